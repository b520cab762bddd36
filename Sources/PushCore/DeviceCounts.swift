/// Subscriptions per push destination (``DeviceKey``: kind and token), exact, for the per-device quota; also the
/// stored copy of each device's destination (``AppIndex`` makes every subscription of a device share it).
///
/// Kept small (issue 19): a device is counted under its ``PackedToken`` (which holds its kind), an 8-byte key, and
/// a 4-byte count.
struct DeviceCounts {
    private var byDevice: [PackedToken: Int32] = [:]

    /// Subscriptions that reach `device`.
    func count(of device: DeviceKey) -> Int32 { byDevice[device.packedToken] ?? 0 }

    /// Where `device` is counted, if it is: the index stays valid until the table changes.
    typealias Index = Dictionary<PackedToken, Int32>.Index

    /// Where `device` is counted, if it is (one lookup: the token's bytes hashed once).
    func find(_ device: DeviceKey) -> Index? { byDevice.index(forKey: device.packedToken) }

    /// The stored copy of the destination counted at `index`.
    func storedToken(at index: Index) -> PackedToken { byDevice.keys[index] }

    /// Counts one more subscription of `device`, found at `index` (``find(_:)``, the table unchanged since) or not
    /// counted yet (nil); true when the device is new (its token is now stored).
    mutating func increment(_ device: DeviceKey, at index: Index?) -> Bool {
        if let index {
            byDevice.values[index] += 1
            return false
        }
        byDevice[device.packedToken] = 1
        return true
    }

    /// Counts one subscription of `device` less; returns the stored token when that was the device's last one
    /// (its entry is gone). Does nothing for a device not counted.
    mutating func decrement(_ device: DeviceKey) -> PackedToken? {
        guard let index = byDevice.index(forKey: device.packedToken) else { return nil }
        guard byDevice.values[index] <= 1 else {
            byDevice.values[index] -= 1
            return nil
        }
        return byDevice.remove(at: index).key
    }

    /// Heap bytes of the table (not the tokens).
    var heapBytes: Int {
        HeapCost.dictionary(
            capacity: byDevice.capacity, keyStride: MemoryLayout<PackedToken>.stride, valueStride: MemoryLayout<Int32>.stride)
    }

    /// What counting a new `device` (``count(of:)`` 0) adds to the table's heap bytes.
    func growthForNew(_ device: DeviceKey) -> Int {
        HeapCost.dictionaryGrowth(
            count: byDevice.count, capacity: byDevice.capacity, keyStride: MemoryLayout<PackedToken>.stride,
            valueStride: MemoryLayout<Int32>.stride)
    }
}
