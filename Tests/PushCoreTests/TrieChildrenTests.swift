import CompactJSON
import XCTest

@testable import PushCore

/// The trie's child table (``AppIndex/Children``, ``ChildTable``) against a dictionary, through random inserts,
/// replacements and removals: small key pools wrap the probe runs around the table's end and remove from the middle
/// of runs, large ones grow it.
final class TrieChildrenTests: XCTestCase {
    /// A seeded generator, so a failure repeats (the keys' hashes still vary per process).
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var mixed = state
            mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            return mixed ^ (mixed >> 31)
        }
    }

    func testAgreesWithADictionary() {
        for (pool, steps, seed) in [(3, 2_000, UInt64(1)), (12, 20_000, 2), (40, 20_000, 3), (700, 40_000, 4)] {
            var random = SplitMix(state: seed)
            let keys = (0..<pool).map { ExactString($0 % 3 == 0 ? "a-longer-key-than-fifteen-bytes-\($0)" : "k\($0)") }
            var children = AppIndex.Children()
            var model: [ExactString: AppIndex.Node] = [:]
            for step in 0..<steps {
                let key = keys[Int.random(in: 0..<pool, using: &random)]
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<5 where model[key] == nil:
                    let node = AppIndex.Node(key: key)
                    let growth = children.growthForNewKey
                    let before = children.heapBytes
                    children.insert(node)
                    model[key] = node
                    XCTAssertEqual(children.heapBytes - before, growth, "pool \(pool), step \(step): the growth predicted")
                case 5..<7 where model[key] != nil:
                    let node = AppIndex.Payload(key: key)
                    children.replace(with: node)
                    model[key] = node
                default:
                    let removed = children.remove(key: key)
                    XCTAssertTrue(removed === model.removeValue(forKey: key), "pool \(pool), step \(step): removed \(key)")
                }
                XCTAssertEqual(children.count, model.count)
                XCTAssertEqual(children.isEmpty, model.isEmpty)
                let probe = keys[Int.random(in: 0..<pool, using: &random)]
                XCTAssertTrue(children[probe] === model[probe], "pool \(pool), step \(step): found \(probe)")
                if step % 97 == 0 || pool <= 12 {
                    var seen: [ExactString: AppIndex.Node] = [:]
                    children.forEach { child in
                        XCTAssertNil(seen.updateValue(child, forKey: child.key), "\(child.key) twice")
                    }
                    XCTAssertEqual(seen.count, model.count)
                    for (key, node) in model { XCTAssertTrue(children[key] === node, "pool \(pool), step \(step): \(key) lost") }
                }
            }
            // Emptied one by one, every child is found until it goes, and the table goes with the second-last.
            for (key, node) in model {
                XCTAssertTrue(children.remove(key: key) === node)
            }
            XCTAssertTrue(children.isEmpty)
            XCTAssertEqual(children.heapBytes, 0)
        }
    }

    func testOneChildNeedsNoTable() {
        var children = AppIndex.Children()
        XCTAssertEqual(children.growthForNewKey, 0)
        children.insert(AppIndex.Node(key: "only"))
        XCTAssertEqual(children.heapBytes, 0)
        XCTAssertNotNil(children["only"])
        XCTAssertNil(children["other"])
        children.insert(AppIndex.Node(key: "other"))
        XCTAssertEqual(children.heapBytes, ChildTable.heapBytes(slots: 4))
        children.remove(key: "only")
        XCTAssertEqual(children.heapBytes, 0, "back to one child: the table is freed")
        XCTAssertNotNil(children["other"])
    }

    /// The table's slots are a reference and a hash byte: 9 bytes each, about 17 bytes per child at its average
    /// load, against about 49 for a dictionary of key and node.
    func testTableSlotsAreOneReference() {
        XCTAssertEqual(MemoryLayout<AppIndex.Node?>.stride, 8)
        XCTAssertEqual(MemoryLayout<AppIndex.Children>.size, 8)
        XCTAssertEqual(ChildTable.slots(forCount: 2), 4)
        XCTAssertEqual(ChildTable.slots(forCount: 3), 4)
        XCTAssertEqual(ChildTable.slots(forCount: 4), 8)
        XCTAssertEqual(ChildTable.slots(forCount: 1_000), 2_048)
        XCTAssertEqual(ChildTable.heapBytes(slots: 4), HeapCost.block(16 + 8 + 4 * 9))
    }
}
