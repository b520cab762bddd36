/// Why a JOSE object could not be produced or accepted.
public struct JOSEError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, in words. Decryption failures deliberately share one message so that the
    /// error does not tell an attacker which check failed.
    public let message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }

    /// The single error reported for every key-unwrap, RSA or tag failure.
    static let decryptionFailed = JOSEError("JWE: decryption failed")
}
