import COpenSSL

/// An error raised by a cryptographic operation.
///
/// When OpenSSL reported the failure, `message` ends with OpenSSL's own error strings
/// (`ERR_error_string_n`), which also drains this thread's OpenSSL error queue.
public struct CryptoError: Error, CustomStringConvertible, Sendable {
    /// What failed, in words.
    public let message: String

    /// Creates an error with a plain message (no OpenSSL details).
    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }

    /// An error for a failed OpenSSL call: `what` followed by every queued OpenSSL error string.
    /// Always empties the calling thread's error queue so stale errors never leak into later calls.
    static func openSSL(_ what: String) -> CryptoError {
        var details: [String] = []
        var buffer = [CChar](repeating: 0, count: 256)
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            if details.count < 4 {
                ERR_error_string_n(code, &buffer, buffer.count)
                details.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
        }
        return CryptoError(details.isEmpty ? what : what + ": " + details.joined(separator: "; "))
    }
}
