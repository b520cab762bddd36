/// Subscriptions per push destination (``DeviceKey``: kind and token), exact, for the per-device quota; also the
/// stored copy of each device's token (``AppIndex`` makes every subscription of a device share it).
///
/// Kept small (issue 19): a device is counted under its token alone, an 8-byte key (the shared ``PackedToken``), with its kind packed into the
/// 4-byte count, instead of under a 24-byte ``DeviceKey``. The rare device whose token is already counted for
/// another kind (the same bytes registered with two providers) is counted under its full key in a second table.
/// A device is in exactly one of the two tables.
struct DeviceCounts {
    /// A count and the kind it is of: the kind in the 3 low bits, the count in the 29 high bits (a device cannot
    /// hold 2^29 subscriptions: they would take over a hundred GB).
    struct KindCount {
        private var packed: UInt32

        init(kind: SubscriberKind, count: Int32) { packed = UInt32(count) << 3 | Self.code(kind) }

        var count: Int32 {
            get { Int32(packed >> 3) }
            set { packed = UInt32(newValue) << 3 | (packed & 7) }
        }

        func isOf(_ kind: SubscriberKind) -> Bool { packed & 7 == Self.code(kind) }

        private static func code(_ kind: SubscriberKind) -> UInt32 {
            switch kind {
            case .mobile: return 0
            case .huawei: return 1
            case .webhook: return 2
            case .webpush: return 3
            case .apns: return 4
            }
        }
    }

    private var byToken: [PackedToken: KindCount] = [:]
    private var byDevice: [DeviceKey: Int32] = [:]

    /// Subscriptions that reach `device`.
    func count(of device: DeviceKey) -> Int32 {
        if let counted = byToken[device.packedToken], counted.isOf(device.kind) { return counted.count }
        return byDevice.isEmpty ? 0 : byDevice[device] ?? 0
    }

    /// The stored copy of `device`'s token, if a device with that token is counted (of its kind, or in the first
    /// table of any kind: the bytes are the same).
    func storedToken(of device: DeviceKey) -> PackedToken? {
        if let index = byToken.index(forKey: device.packedToken) { return byToken[index].key }
        if !byDevice.isEmpty, let index = byDevice.index(forKey: device) { return byDevice[index].key.packedToken }
        return nil
    }

    /// Counts one more subscription of `device`; true when the device is new (its token is now stored).
    mutating func increment(_ device: DeviceKey) -> Bool {
        // One lookup of the token in the first table (its bytes hashed once), then the insert.
        let index = byToken.index(forKey: device.packedToken)
        if let index, byToken[index].value.isOf(device.kind) {
            byToken.values[index].count += 1
            return false
        }
        if !byDevice.isEmpty, let counted = byDevice[device] {
            byDevice[device] = counted + 1
            return false
        }
        if index == nil {
            byToken[device.packedToken] = KindCount(kind: device.kind, count: 1)
        } else {
            byDevice[device] = 1
        }
        return true
    }

    /// Counts one subscription of `device` less; returns the stored token when that was the device's last one
    /// (its entry is gone). Does nothing for a device not counted.
    mutating func decrement(_ device: DeviceKey) -> PackedToken? {
        if let index = byToken.index(forKey: device.packedToken), byToken[index].value.isOf(device.kind) {
            guard byToken[index].value.count <= 1 else {
                byToken.values[index].count -= 1
                return nil
            }
            return byToken.remove(at: index).key
        }
        guard let index = byDevice.index(forKey: device) else { return nil }
        guard byDevice[index].value <= 1 else {
            byDevice.values[index] -= 1
            return nil
        }
        return byDevice.remove(at: index).key.packedToken
    }

    /// Heap bytes of the two tables (not the tokens).
    var heapBytes: Int {
        HeapCost.dictionary(
            capacity: byToken.capacity, keyStride: MemoryLayout<PackedToken>.stride, valueStride: MemoryLayout<KindCount>.stride)
            + HeapCost.dictionary(
                capacity: byDevice.capacity, keyStride: MemoryLayout<DeviceKey>.stride, valueStride: MemoryLayout<Int32>.stride)
    }

    /// What counting a new `device` (``count(of:)`` 0) adds to the tables' heap bytes.
    func growthForNew(_ device: DeviceKey) -> Int {
        if byToken[device.packedToken] == nil {
            return HeapCost.dictionaryGrowth(
                count: byToken.count, capacity: byToken.capacity, keyStride: MemoryLayout<PackedToken>.stride,
                valueStride: MemoryLayout<KindCount>.stride)
        }
        return HeapCost.dictionaryGrowth(
            count: byDevice.count, capacity: byDevice.capacity, keyStride: MemoryLayout<DeviceKey>.stride,
            valueStride: MemoryLayout<Int32>.stride)
    }
}
