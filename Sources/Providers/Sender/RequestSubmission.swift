import Dispatch

/// Receives the gateway's own latency of a notification: from its record's fetch to its provider request's
/// submission to the HTTP client (``RequestSubmission``).
public protocol SubmissionObserver: AnyObject, Sendable {
    func submitted(afterNanoseconds: UInt64)
}

/// The moment a provider request is handed to the HTTP client, for the gateway's own latency.
///
/// The delivery path sets ``current`` around the first attempt of a notification whose record's fetch time is
/// known; a sender calls ``submitted()`` once, just before it hands that notification's request to the HTTP client
/// (after its access token and body are ready). No mark (a retry, a token fetch, a console sink): nothing recorded.
public enum RequestSubmission {
    /// The fetch time (monotonic nanoseconds, `DispatchTime.uptimeNanoseconds`) and where it goes.
    public struct Mark: Sendable {
        public let fetchedAt: UInt64
        public let observer: any SubmissionObserver

        public init(fetchedAt: UInt64, observer: any SubmissionObserver) {
            self.fetchedAt = fetchedAt
            self.observer = observer
        }
    }

    @TaskLocal public static var current: Mark?

    /// Records the time since the fetch with the current mark, if any: one clock read.
    public static func submitted() {
        guard let mark = current else { return }
        let now = DispatchTime.now().uptimeNanoseconds
        mark.observer.submitted(afterNanoseconds: now >= mark.fetchedAt ? now - mark.fetchedAt : 0)
    }
}
