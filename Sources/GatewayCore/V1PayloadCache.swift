import PushCore

/// The v1 payload of one node's notification (or of one user notification), built once for every v1 subscriber
/// that takes the same size limit (``PushCore/SubscriberKind/maximumPayloadSize``): the seed's 4093 bytes, or Web
/// Push's smaller record, which can cut the data sooner.
struct V1PayloadCache {
    private var standard: [UInt8]?
    private var webPush: [UInt8]?

    /// The bytes for `subscriber`, built by `build` the first time its limit is asked for (again while it returns
    /// nil: too large, dropped).
    mutating func bytes(for subscriber: SubscriberKey, build: () -> [UInt8]?) -> [UInt8]? {
        if subscriber.kind.maximumPayloadSize == DataPayload.maximumSize {
            if standard == nil { standard = build() }
            return standard
        }
        if webPush == nil { webPush = build() }
        return webPush
    }
}
