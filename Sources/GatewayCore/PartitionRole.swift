/// What a replica is to one partition.
public enum PartitionRole: Sendable, Equatable {
    /// Being read from the state topic; its owner consumes the partition's events only once it is loaded.
    case loading
    /// Owned and loaded: serves the API and processes the events; its writes apply on acknowledgement.
    case owner
    /// A warm copy of a partition owned elsewhere, kept current by tailing the state topic.
    case standby
    /// Being given up: no longer serving the API or new events, but finishing the work in flight (its
    /// writes, its deliveries' outcomes) before the new owner takes over.
    case releasing
    /// Given up: nothing is served from it.
    case released

    /// Work already started may still write here (the owner, or one finishing before a handover).
    public var isActive: Bool { self == .owner || self == .releasing }

    /// As one byte, for a lock-free copy.
    public var code: UInt8 {
        switch self {
        case .loading: 0
        case .owner: 1
        case .standby: 2
        case .releasing: 3
        case .released: 4
        }
    }

    public init(code: UInt8) {
        switch code {
        case 0: self = .loading
        case 1: self = .owner
        case 2: self = .standby
        case 3: self = .releasing
        default: self = .released
        }
    }
}
