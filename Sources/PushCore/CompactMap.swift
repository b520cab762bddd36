/// A map that stores zero or one entry inline and switches to a `Dictionary` from two entries on: most trie
/// nodes have one child and one subscriber, and a one-entry dictionary costs a heap allocation of ~100 bytes.
struct CompactMap<Key: Hashable, Value> {
    private enum Storage {
        case empty
        case one(Key, Value)
        case many([Key: Value])
    }

    private var storage = Storage.empty

    init() {}

    var isEmpty: Bool {
        if case .empty = storage { return true }
        return false
    }

    var count: Int {
        switch storage {
        case .empty: return 0
        case .one: return 1
        case .many(let dictionary): return dictionary.count
        }
    }

    subscript(key: Key) -> Value? {
        switch storage {
        case .empty: return nil
        case .one(let existing, let value): return existing == key ? value : nil
        case .many(let dictionary): return dictionary[key]
        }
    }

    /// Heap bytes of the map's own storage (a dictionary from two entries on; nothing inline).
    var heapBytes: Int {
        guard case .many(let dictionary) = storage else { return 0 }
        return HeapCost.dictionary(
            capacity: dictionary.capacity, keyStride: MemoryLayout<Key>.stride, valueStride: MemoryLayout<Value>.stride)
    }

    /// Heap bytes that storing one more (new) key would add to the map's own storage.
    var growthForNewKey: Int {
        switch storage {
        case .empty: return 0
        case .one:
            return HeapCost.dictionary(
                capacity: HeapCost.capacity(forCount: 2), keyStride: MemoryLayout<Key>.stride, valueStride: MemoryLayout<Value>.stride)
        case .many(let dictionary):
            return HeapCost.dictionaryGrowth(
                count: dictionary.count, capacity: dictionary.capacity, keyStride: MemoryLayout<Key>.stride,
                valueStride: MemoryLayout<Value>.stride)
        }
    }

    /// Sets the value for `key`; returns the previous one.
    @discardableResult
    mutating func updateValue(_ value: Value, forKey key: Key) -> Value? {
        switch storage {
        case .empty:
            storage = .one(key, value)
            return nil
        case .one(let existing, let previous):
            if existing == key {
                storage = .one(key, value)
                return previous
            }
            storage = .many([existing: previous, key: value])
            return nil
        case .many(var dictionary):
            storage = .empty  // keep the dictionary uniquely referenced while it is mutated
            let previous = dictionary.updateValue(value, forKey: key)
            storage = .many(dictionary)
            return previous
        }
    }

    @discardableResult
    mutating func removeValue(forKey key: Key) -> Value? {
        switch storage {
        case .empty:
            return nil
        case .one(let existing, let value):
            guard existing == key else { return nil }
            storage = .empty
            return value
        case .many(var dictionary):
            storage = .empty
            let removed = dictionary.removeValue(forKey: key)
            if dictionary.count == 1, let only = dictionary.first {
                storage = .one(only.key, only.value)
            } else if !dictionary.isEmpty {
                storage = .many(dictionary)
            }
            return removed
        }
    }

    mutating func removeAll() { storage = .empty }

    func forEach(_ body: (Key, Value) throws -> Void) rethrows {
        switch storage {
        case .empty: return
        case .one(let key, let value): try body(key, value)
        case .many(let dictionary):
            for (key, value) in dictionary { try body(key, value) }
        }
    }
}
