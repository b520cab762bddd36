import CompactJSON

/// What the structures of an ``AppIndex`` cost on the heap, as glibc's malloc and Swift's native storage lay
/// them out (64-bit Linux). The constants were checked against the resident memory of N subscriptions
/// (`Benchmarks/Sources/SubscriptionMemory`, results in ``AppIndex/byteCount``'s documentation).
enum HeapCost {
    /// A malloc'ed block of `size` bytes: glibc adds an 8-byte header and rounds up to 16 (32 at least); plus
    /// 1/16 for what the allocator holds beyond the blocks in use (free fragments, partly used pages). Without
    /// that slack the estimate was 2 to 5 % under the resident memory; with it, 1 to 4 % over.
    static func block(_ size: Int) -> Int {
        let chunk = max(32, (size + 8 + 15) & ~15)
        return chunk + chunk / 16
    }

    /// A Swift class instance with `fields` bytes of stored properties (16-byte object header).
    static func object(fields: Int) -> Int { block(16 + fields) }

    /// A native string's storage: nothing for small strings (15 UTF-8 bytes or fewer are held inline), else a
    /// 32-byte header, the bytes and a NUL.
    static func string(_ text: String) -> Int { string(utf8Count: text.utf8.count) }

    static func string(utf8Count count: Int) -> Int { count <= 15 ? 0 : block(32 + count + 1) }

    /// An array's storage: a 32-byte header and `capacity` elements (nothing when empty: a shared singleton).
    static func array(capacity: Int, stride: Int) -> Int { capacity == 0 ? 0 : block(32 + capacity * stride) }

    /// The buckets of a native dictionary of `capacity` (its maximum load is 3/4 of a power of two).
    static func buckets(capacity: Int) -> Int {
        var buckets = 1
        while buckets * 3 / 4 < capacity { buckets <<= 1 }
        return buckets
    }

    /// A native dictionary's storage: a 64-byte object, the occupancy bitmap, and keys and values for every
    /// bucket (nothing when empty: a shared singleton).
    static func dictionary(capacity: Int, keyStride: Int, valueStride: Int) -> Int {
        guard capacity > 0 else { return 0 }
        let buckets = buckets(capacity: capacity)
        let bitmap = max(1, buckets / 64) * 8
        return block(64 + bitmap + buckets * (keyStride + valueStride))
    }

    /// What growing a dictionary of `count` entries and `capacity` by one new key adds.
    static func dictionaryGrowth(count: Int, capacity: Int, keyStride: Int, valueStride: Int) -> Int {
        guard count + 1 > capacity else { return 0 }
        let grown = max(count + 1, capacity * 2)
        return dictionary(capacity: HeapCost.capacity(forCount: grown), keyStride: keyStride, valueStride: valueStride)
            - dictionary(capacity: capacity, keyStride: keyStride, valueStride: valueStride)
    }

    /// The capacity a dictionary grown to hold `count` entries gets.
    static func capacity(forCount count: Int) -> Int {
        var buckets = 1
        while buckets * 3 / 4 < count { buckets <<= 1 }
        return buckets * 3 / 4
    }

    /// A JSON value held in memory (a shadow): its strings, arrays and objects. Values shared between shadows
    /// (copy-on-write) are counted once per shadow, so this never undercounts.
    static func json(_ value: JSONValue) -> Int {
        switch value {
        case .null, .bool: return 0
        case .number(let text), .string(let text): return string(text)
        case .array(let elements):
            return elements.reduce(array(capacity: elements.capacity, stride: MemoryLayout<JSONValue>.stride)) { $0 + json($1) }
        case .object(let members):
            var total = dictionary(
                capacity: members.capacity, keyStride: MemoryLayout<ExactString>.stride, valueStride: MemoryLayout<JSONValue>.stride)
            for (key, member) in members { total += string(key.string) + json(member) }
            return total
        }
    }
}
