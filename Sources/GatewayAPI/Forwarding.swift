import HTTPTypes

/// How a call is forwarded to its owner.
public enum Forwarding {
    /// Forwarding attempts for one call before it is answered 503 with `Retry-After`: the first, and one more
    /// after a "not owner" answer or a refused connection (the router waits for its view to change first).
    public static let maximumAttempts = 2
    /// The largest body forwarded: the API's own limit (a subscription is a few hundred bytes).
    public static let maximumBody = V2Routes.maximumBodyBytes
    /// Methods the app calls have: only these are forwarded.
    static let methods: Set<HTTPRequest.Method> = [.get, .put, .post, .delete]
    /// Response headers passed back from the owner (the API's own; hop-by-hop ones never).
    static let answeredHeaders: Set<String> = ["content-type", "content-location", "retry-after", "allow", "www-authenticate"]
}
