import PushCore

/// The v1 payload of one node's notification (or of one user notification), built once for every v1 subscriber
/// that takes the same size limit (``PushCore/SubscriberKind/maximumPayloadSize``): the seed's 4093 bytes for FCM and
/// HMS, or the smaller ones of Web Push and APNs, which can cut the data sooner.
struct V1PayloadCache {
    private var standard: [UInt8]?
    /// The other limits' payloads (rarely more than one).
    private var others: [(limit: Int, bytes: [UInt8])] = []

    /// The bytes for `subscriber`, built by `build` the first time its limit is asked for (again while it returns
    /// nil: too large, dropped).
    mutating func bytes(for subscriber: SubscriberKey, build: () -> [UInt8]?) -> [UInt8]? {
        let limit = subscriber.kind.maximumPayloadSize
        if limit == DataPayload.maximumSize {
            if standard == nil { standard = build() }
            return standard
        }
        if let built = others.first(where: { $0.limit == limit }) { return built.bytes }
        guard let bytes = build() else { return nil }
        others.append((limit, bytes))
        return bytes
    }
}
