import Dispatch

/// Receives the gateway's own latency of a notification: from its record's fetch to its provider request's
/// submission to the HTTP client (``RequestSubmission``).
public protocol SubmissionObserver: AnyObject, Sendable {
    func submitted(afterNanoseconds: UInt64)
}

/// The moment a provider request is handed to the HTTP client, for the gateway's own latency.
///
/// The delivery path passes one to the sender (``PushSender/send(token:payload:messageID:options:submission:)``)
/// with the first attempt of a notification whose record's fetch time is known; the sender calls ``submitted()``
/// once, just before it hands that notification's request to the HTTP client (after its access token and body are
/// ready). None (a retry, a token fetch, a console sink): nothing recorded.
public struct RequestSubmission: Sendable {
    /// The fetch time (monotonic nanoseconds, `DispatchTime.uptimeNanoseconds`).
    public let fetchedAt: UInt64
    /// Where the latency goes (resolved once per provider by the delivery path).
    public let observer: any SubmissionObserver

    public init(fetchedAt: UInt64, observer: any SubmissionObserver) {
        self.fetchedAt = fetchedAt
        self.observer = observer
    }

    /// Records the time since the fetch: one clock read.
    public func submitted() {
        let now = DispatchTime.now().uptimeNanoseconds
        observer.submitted(afterNanoseconds: now >= fetchedAt ? now - fetchedAt : 0)
    }
}
