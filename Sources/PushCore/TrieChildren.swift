import CompactJSON

extension AppIndex {
    /// The children of a trie node, found by each child's own key (``Node/key``).
    ///
    /// Kept small (issue 19): a node that has many children (`/users`, with one child per user) held them in a
    /// `Dictionary<ExactString, Node>`, 24 bytes of key and value per bucket at a load of 3/8 to 3/4, about 49 bytes
    /// per child. The key is the child's own, so the table only needs the child: an 8-byte slot and a hash byte per
    /// bucket (``ChildTable``, open addressing), about 17 bytes per child. With no child or one, nothing is allocated.
    struct Children {
        private enum Storage {
            case empty
            case one(Node)
            case many(ChildTable)
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
            case .many(let table): return table.count
            }
        }

        /// The child whose key is `key`.
        subscript(key: ExactString) -> Node? {
            switch storage {
            case .empty: return nil
            case .one(let child): return child.key == key ? child : nil
            case .many(let table): return table.child(key)
            }
        }

        /// Adds `child`; no child may have its key.
        mutating func insert(_ child: Node) {
            switch storage {
            case .empty:
                storage = .one(child)
            case .one(let existing):
                let table = ChildTable.make(slots: ChildTable.slots(forCount: 2))
                table.insertNew(existing)
                table.insertNew(child)
                storage = .many(table)
            case .many(var table):
                storage = .empty  // keep the table uniquely referenced while it changes
                if !isKnownUniquelyReferenced(&table) || table.count + 1 > table.maximumCount {
                    table = table.copy(slots: ChildTable.slots(forCount: table.count + 1))
                }
                table.insertNew(child)
                storage = .many(table)
            }
        }

        /// Puts `child` in the place of the child with its key (does nothing when there is none).
        mutating func replace(with child: Node) {
            switch storage {
            case .empty:
                return
            case .one(let existing):
                if existing.key == child.key { storage = .one(child) }
            case .many(var table):
                storage = .empty
                if !isKnownUniquelyReferenced(&table) { table = table.copy(slots: table.slotCount) }
                table.replace(with: child)
                storage = .many(table)
            }
        }

        /// Removes the child whose key is `key`; returns it.
        @discardableResult
        mutating func remove(key: ExactString) -> Node? {
            switch storage {
            case .empty:
                return nil
            case .one(let existing):
                guard existing.key == key else { return nil }
                storage = .empty
                return existing
            case .many(var table):
                storage = .empty
                if !isKnownUniquelyReferenced(&table) { table = table.copy(slots: table.slotCount) }
                let removed = table.remove(key)
                if table.count == 1, let only = table.first {
                    storage = .one(only)
                } else {
                    storage = .many(table)
                }
                return removed
            }
        }

        /// Calls `body` with every child (in no particular order).
        func forEach(_ body: (Node) throws -> Void) rethrows {
            switch storage {
            case .empty: return
            case .one(let child): try body(child)
            case .many(let table): try table.forEach(body)
            }
        }

        /// Heap bytes of the table (nothing with one child or none; not the children themselves).
        var heapBytes: Int {
            guard case .many(let table) = storage else { return 0 }
            return ChildTable.heapBytes(slots: table.slotCount)
        }

        /// Heap bytes that adding one more child would add to the table.
        var growthForNewKey: Int {
            switch storage {
            case .empty: return 0
            case .one: return ChildTable.heapBytes(slots: ChildTable.slots(forCount: 2))
            case .many(let table):
                guard table.count + 1 > table.maximumCount else { return 0 }
                return ChildTable.heapBytes(slots: ChildTable.slots(forCount: table.count + 1))
                    - ChildTable.heapBytes(slots: table.slotCount)
            }
        }
    }
}

/// ``ChildTable``'s header: how many children it holds, and its slot count less one (a power of two less one).
struct ChildTableHeader {
    var count: Int32
    var mask: Int32
}

/// An open-addressing hash table of trie nodes, keyed by their own ``AppIndex/Node/key``: linear probing, at most
/// 3/4 full, removal by shifting the following entries back (no tombstones).
///
/// One allocation: the 16-byte object header, the 8-byte ``ChildTableHeader``, the slots (a reference each, nil
/// where free), then a byte per slot with 8 bits of its child's key's hash. A probe compares that byte before it
/// reads the child's key, so passing an occupied slot costs no read of another object (the children lie all over
/// the heap, and a table of a million is mostly cache misses).
final class ChildTable: ManagedBuffer<ChildTableHeader, UInt8> {
    /// The slot count (a power of two, at least 4) that holds `count` children at most 3/4 full.
    static func slots(forCount count: Int) -> Int {
        var slots = 4
        while slots * 3 / 4 < count { slots <<= 1 }
        return slots
    }

    private static let slotStride = MemoryLayout<AppIndex.Node?>.stride

    static func heapBytes(slots: Int) -> Int {
        HeapCost.block(16 + MemoryLayout<ChildTableHeader>.stride + slots * (slotStride + 1))
    }

    /// An empty table of `slots` slots (a power of two).
    static func make(slots: Int) -> ChildTable {
        let table = unsafeDowncast(
            create(minimumCapacity: slots * (slotStride + 1)) { _ in ChildTableHeader(count: 0, mask: Int32(slots - 1)) },
            to: ChildTable.self)
        table.withTable { _, children, tags in
            children.initialize(repeating: nil, count: slots)
            tags.initialize(repeating: 0, count: slots)
        }
        return table
    }

    deinit {
        withTable { header, children, _ in
            _ = children.deinitialize(count: Int(header.pointee.mask) + 1)
        }
    }

    /// The header, the slots and their hash bytes. The slots come first in the tail, at an 8-byte boundary (the
    /// header is 8 bytes after the 16-byte object header).
    private func withTable<Result>(
        _ body: (UnsafeMutablePointer<ChildTableHeader>, UnsafeMutablePointer<AppIndex.Node?>, UnsafeMutablePointer<UInt8>) throws -> Result
    ) rethrows -> Result {
        try withUnsafeMutablePointers { header, tail in
            let slots = Int(header.pointee.mask) + 1
            let raw = UnsafeMutableRawPointer(tail)
            assert(Int(bitPattern: raw) % MemoryLayout<AppIndex.Node?>.alignment == 0)
            let children = raw.bindMemory(to: AppIndex.Node?.self, capacity: slots)
            let tags = (raw + slots * Self.slotStride).bindMemory(to: UInt8.self, capacity: slots)
            return try body(header, children, tags)
        }
    }

    var count: Int { Int(header.count) }
    var slotCount: Int { Int(header.mask) + 1 }
    /// The most children the table holds before it grows.
    var maximumCount: Int { slotCount * 3 / 4 }

    /// The hash byte kept for a child: the hash's top 8 bits (the slot comes from its low bits).
    @inline(__always)
    private static func tag(_ hash: Int) -> UInt8 { UInt8(truncatingIfNeeded: UInt(bitPattern: hash) >> 56) }

    /// The slot that holds the child of `key`.
    private func slot(of key: ExactString) -> Int? {
        let hash = key.hashValue
        let tag = Self.tag(hash)
        return withTable { header, children, tags in
            let mask = Int(header.pointee.mask)
            var index = hash & mask
            while let child = children[index] {
                if tags[index] == tag, child.key == key { return index }
                index = (index + 1) & mask
            }
            return nil
        }
    }

    func child(_ key: ExactString) -> AppIndex.Node? {
        slot(of: key).flatMap { index in withTable { _, children, _ in children[index] } }
    }

    /// Stores `child`, whose key is not in the table; the table has room (``maximumCount``).
    func insertNew(_ child: AppIndex.Node) {
        let hash = child.key.hashValue
        withTable { header, children, tags in
            let mask = Int(header.pointee.mask)
            var index = hash & mask
            while children[index] != nil { index = (index + 1) & mask }
            children[index] = child
            tags[index] = Self.tag(hash)
            header.pointee.count += 1
        }
    }

    func replace(with child: AppIndex.Node) {
        guard let index = slot(of: child.key) else { return }
        withTable { _, children, _ in children[index] = child }
    }

    /// Removes the child of `key`; the children after it in its probe run move back, so every child stays
    /// reachable from its home slot without gaps.
    func remove(_ key: ExactString) -> AppIndex.Node? {
        guard var hole = slot(of: key) else { return nil }
        return withTable { header, children, tags in
            let mask = Int(header.pointee.mask)
            let removed = children[hole]
            children[hole] = nil
            header.pointee.count -= 1
            var index = hole
            while true {
                index = (index + 1) & mask
                guard let child = children[index] else { break }
                let home = child.key.hashValue & mask
                // The child stays when its home lies cyclically in (hole, index]: the hole is not on its way.
                let stays = hole <= index ? (hole < home && home <= index) : (hole < home || home <= index)
                if stays { continue }
                children[hole] = child
                tags[hole] = tags[index]
                children[index] = nil
                hole = index
            }
            return removed
        }
    }

    /// Some child (the first in slot order).
    var first: AppIndex.Node? {
        withTable { header, children, _ in
            for index in 0...Int(header.pointee.mask) {
                if let child = children[index] { return child }
            }
            return nil
        }
    }

    func forEach(_ body: (AppIndex.Node) throws -> Void) rethrows {
        for index in 0..<slotCount {
            // One slot read at a time: `body` may not change the table, but it runs outside the pointer's scope.
            if let child = withTable({ _, children, _ in children[index] }) { try body(child) }
        }
    }

    /// A copy with `slots` slots (a power of two that holds every child).
    func copy(slots: Int) -> ChildTable {
        let copied = ChildTable.make(slots: slots)
        forEach { copied.insertNew($0) }
        return copied
    }
}
