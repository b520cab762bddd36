import SSLCrypto
import XCTest

/// Bytes from a hex string (test vectors only; traps on malformed literals written in the tests).
func hex(_ text: String) -> [UInt8] {
    let digits = Array(text.utf8)
    precondition(digits.count % 2 == 0, "odd hex literal")
    return stride(from: 0, to: digits.count, by: 2).map { index in
        UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16)!
    }
}

/// Bytes from a base64url literal in a test vector.
func b64(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> [UInt8] {
    guard let bytes = Base64URL.decode(text) else {
        XCTFail("bad base64url literal \(text)", file: file, line: line)
        return []
    }
    return bytes
}

extension Array where Element == UInt8 {
    /// Lower-case hex, two digits per byte.
    var hexString: String {
        let digits = [Character]("0123456789abcdef")
        return String(flatMap { byte -> [Character] in [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]] })
    }
}
