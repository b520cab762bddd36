/// Subscriptions per push destination (``DeviceKey``: kind and token), exact, for the per-device quota; also the
/// stored copy of each device's destination (``AppIndex`` makes every subscription of a device share it).
///
/// Kept small (issue 19): a device is counted under its ``PackedToken`` (which holds its kind), an 8-byte key, and
/// a 1-byte count. The few devices with ``spilled`` subscriptions or more are counted exactly in a second table
/// (their byte says ``spilled``): 9 bytes a bucket for nearly every device instead of 12.
struct DeviceCounts {
    private var byDevice: [PackedToken: UInt8] = [:]
    /// The exact counts of the devices whose byte is ``spilled``.
    private var large: [PackedToken: Int32] = [:]

    /// The byte of a device counted in ``large``.
    private static let spilled = UInt8.max

    /// Subscriptions that reach `device`.
    func count(of device: DeviceKey) -> Int32 {
        guard let small = byDevice[device.packedToken] else { return 0 }
        return small == Self.spilled ? large[device.packedToken] ?? Int32(Self.spilled) : Int32(small)
    }

    /// Where `device` is counted, if it is: the index stays valid until the table changes.
    typealias Index = Dictionary<PackedToken, UInt8>.Index

    /// Where `device` is counted, if it is (one lookup: the token's bytes hashed once).
    func find(_ device: DeviceKey) -> Index? { byDevice.index(forKey: device.packedToken) }

    /// The stored copy of the destination counted at `index`.
    func storedToken(at index: Index) -> PackedToken { byDevice.keys[index] }

    /// Counts one more subscription of `device`, found at `index` (``find(_:)``, the table unchanged since) or not
    /// counted yet (nil); true when the device is new (its token is now stored).
    mutating func increment(_ device: DeviceKey, at index: Index?) -> Bool {
        guard let index else {
            byDevice[device.packedToken] = 1
            return true
        }
        let small = byDevice.values[index]
        if small < Self.spilled {
            byDevice.values[index] = small + 1
            if small + 1 == Self.spilled { large[byDevice.keys[index]] = Int32(Self.spilled) }
        } else {
            large[byDevice.keys[index], default: Int32(Self.spilled)] += 1
        }
        return false
    }

    /// Counts one subscription of `device` less; returns the stored token when that was the device's last one
    /// (its entry is gone). Does nothing for a device not counted.
    mutating func decrement(_ device: DeviceKey) -> PackedToken? {
        guard let index = byDevice.index(forKey: device.packedToken) else { return nil }
        let small = byDevice.values[index]
        if small == Self.spilled {
            let key = byDevice.keys[index]
            let exact = (large[key] ?? Int32(Self.spilled)) - 1
            if exact < Int32(Self.spilled) {
                large.removeValue(forKey: key)
                byDevice.values[index] = UInt8(exact)
            } else {
                large[key] = exact
            }
            return nil
        }
        guard small <= 1 else {
            byDevice.values[index] = small - 1
            return nil
        }
        return byDevice.remove(at: index).key
    }

    /// Heap bytes of the tables (not the tokens).
    var heapBytes: Int {
        HeapCost.dictionary(
            capacity: byDevice.capacity, keyStride: MemoryLayout<PackedToken>.stride, valueStride: MemoryLayout<UInt8>.stride)
            + HeapCost.dictionary(
                capacity: large.capacity, keyStride: MemoryLayout<PackedToken>.stride, valueStride: MemoryLayout<Int32>.stride)
    }

    /// What counting one more subscription of `device` adds to the tables' heap bytes: a new device's bucket, or a
    /// bucket in ``large`` for a device whose count reaches ``spilled``.
    func growthForOneMore(_ device: DeviceKey) -> Int {
        switch byDevice[device.packedToken] {
        case nil:
            return HeapCost.dictionaryGrowth(
                count: byDevice.count, capacity: byDevice.capacity, keyStride: MemoryLayout<PackedToken>.stride,
                valueStride: MemoryLayout<UInt8>.stride)
        case Self.spilled - 1:
            return HeapCost.dictionaryGrowth(
                count: large.count, capacity: large.capacity, keyStride: MemoryLayout<PackedToken>.stride,
                valueStride: MemoryLayout<Int32>.stride)
        default:
            return 0
        }
    }
}
