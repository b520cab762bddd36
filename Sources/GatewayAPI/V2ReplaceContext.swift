import PushCore

/// The body of `POST /datasync/v2/{app}/subscriptions/{uid}/.replace-context` (a device's push token rotated):
/// every subscription of the user on (`kind`, `oldContext`) moves to (`kind`, `newContext`).
public struct V2ReplaceContextRequest: Sendable, Equatable {
    /// The provider of both tokens (a token rotates within its provider).
    public var kind: SubscriberKind
    /// The push token the device had.
    public var oldContext: String
    /// The push token the device has now.
    public var newContext: String

    public init(kind: SubscriberKind, oldContext: String, newContext: String) {
        self.kind = kind
        self.oldContext = oldContext
        self.newContext = newContext
    }

    /// Reads and checks a request body: 400 for a missing or bad field. The same token twice is valid (nothing
    /// moves).
    public init(_ body: [ExactString: JSONValue]) throws(APIError) {
        func string(_ key: String, _ what: String) throws(APIError) -> String {
            guard let value = body[ExactString(key)], value != .null else { throw .badRequest("'\(key)' (\(what)) is required") }
            guard let text = value.stringValue else { throw .badRequest("'\(key)' must be a string") }
            return text
        }
        let kindText = try string("kind", "mobile, huawei or apns")
        // A device's push token is replaced by its provider; a webhook's destination or a browser's subscription is not
        // a token.
        guard let kind = SubscriberKind(rawValue: kindText), [.mobile, .huawei, .apns].contains(kind) else {
            throw .badRequest("unknown kind '\(kindText.prefix(64))': use mobile, huawei or apns")
        }
        var old = try string("oldContext", "the device's former push token")
        var new = try string("newContext", "the device's new push token")
        for (key, token) in [("oldContext", old), ("newContext", new)] {
            guard !token.isEmpty else { throw .badRequest("'\(key)' must not be empty") }
            try validateDeviceID(token)
        }
        if kind == .apns {
            old = try V2Routes.apnsDeviceToken(old)
            new = try V2Routes.apnsDeviceToken(new)
        }
        self.init(kind: kind, oldContext: old, newContext: new)
    }
}

/// What a token replacement answers (200): the user's subscriptions on the new token once the call is over (the
/// moved ones with their new ids, and any the new token already had), and the ids each moved subscription had and
/// has now. Repeating the call answers the same subscriptions and no move.
public struct V2ReplaceContextOutcome: Sendable, Equatable {
    public var subscriptions: [V2SubscriptionDocument]
    /// (the id on the old token, the id on the new token), in the order of `subscriptions`.
    public var moved: [Move]

    public struct Move: Sendable, Equatable {
        public var from: String
        public var to: String

        public init(from: String, to: String) {
            self.from = from
            self.to = to
        }
    }

    public init(subscriptions: [V2SubscriptionDocument], moved: [Move]) {
        self.subscriptions = subscriptions
        self.moved = moved
    }

    public var json: JSONValue {
        .object([
            "subscriptions": .array(subscriptions.map(\.json)),
            "moved": .array(moved.map { .object(["from": .string($0.from), "id": .string($0.to)]) }),
        ])
    }
}
