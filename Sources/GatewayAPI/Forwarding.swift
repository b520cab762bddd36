/// How a call is forwarded to its owner.
public enum Forwarding {
    /// Forwarding attempts for one call (the owner unreachable, or no longer the owner) before it is answered
    /// 503 with `Retry-After`. The router waits for its view to change between attempts, so that together they
    /// take about its wait bound.
    public static let maximumAttempts = 20
}
