/// Base64url without padding (RFC 4648 §5, as used by JOSE, RFC 7515 §2).
public enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// 0...63 for alphabet bytes, 0xFF for anything else.
    private static let reverse: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    /// Length of the unpadded encoding of `byteCount` bytes.
    @inlinable
    public static func encodedLength(_ byteCount: Int) -> Int {
        (byteCount * 4 + 2) / 3  // 4 per 3 bytes, then 2 or 3 characters for a trailing 1 or 2 bytes
    }

    /// Encodes `bytes` as unpadded base64url text.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        withContiguousBytes(bytes) { input, count in
            String(unsafeUninitializedCapacity: Swift.max(encodedLength(count), 1)) { buffer in
                encode(input, count: count, to: buffer.baseAddress!)  // capacity >= 1, so never nil
            }
        }
    }

    /// Appends the unpadded base64url encoding of `bytes` (as ASCII) to `output`.
    public static func encode(_ bytes: some Sequence<UInt8>, into output: inout [UInt8]) {
        withContiguousBytes(bytes) { input, count in
            let start = output.count
            let length = encodedLength(count)
            if length == 0 { return }
            output.append(contentsOf: repeatElement(0, count: length))
            output.withUnsafeMutableBufferPointer { buffer in
                _ = encode(input, count: count, to: buffer.baseAddress! + start)  // non-empty: length > 0
            }
        }
    }

    /// Writes the encoding of `count` bytes at `input` to `output` (room for `encodedLength(count)`); returns that length.
    private static func encode(_ input: UnsafePointer<UInt8>, count: Int, to output: UnsafeMutablePointer<UInt8>) -> Int {
        alphabet.withUnsafeBufferPointer { table in
            var inIndex = 0, outIndex = 0
            while inIndex + 3 <= count {
                let chunk = UInt32(input[inIndex]) << 16 | UInt32(input[inIndex + 1]) << 8 | UInt32(input[inIndex + 2])
                output[outIndex] = table[Int(chunk >> 18)]
                output[outIndex + 1] = table[Int((chunk >> 12) & 0x3F)]
                output[outIndex + 2] = table[Int((chunk >> 6) & 0x3F)]
                output[outIndex + 3] = table[Int(chunk & 0x3F)]
                inIndex += 3
                outIndex += 4
            }
            let remaining = count - inIndex
            if remaining > 0 {
                let chunk = UInt32(input[inIndex]) << 16 | (remaining == 2 ? UInt32(input[inIndex + 1]) << 8 : 0)
                output[outIndex] = table[Int(chunk >> 18)]
                output[outIndex + 1] = table[Int((chunk >> 12) & 0x3F)]
                outIndex += 2
                if remaining == 2 {
                    output[outIndex] = table[Int((chunk >> 6) & 0x3F)]
                    outIndex += 1
                }
            }
            return outIndex
        }
    }

    /// Decodes unpadded base64url text.
    ///
    /// Strict: returns nil for padding (`=`), whitespace, characters outside the base64url alphabet,
    /// an impossible length (remainder 1 modulo 4) or non-canonical trailing bits, so every byte
    /// sequence has exactly one accepted encoding.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        decode(bytes: text.utf8)
    }

    /// Decodes unpadded base64url given as ASCII bytes; same rules as `decode(_:)`.
    public static func decode(bytes text: some Sequence<UInt8>) -> [UInt8]? {
        withContiguousBytes(text) { input, count -> [UInt8]? in
            let remainder = count % 4
            if remainder == 1 { return nil }
            let decodedCount = count / 4 * 3 + (remainder == 0 ? 0 : remainder - 1)
            var valid = true
            let out = [UInt8](unsafeUninitializedCapacity: Swift.max(decodedCount, 1)) { buffer, initialized in
                buffer.initialize(repeating: 0)
                initialized = decodedCount
                valid = reverse.withUnsafeBufferPointer { table in
                    decode(input, count: count, table: table, to: buffer.baseAddress!)  // capacity >= 1
                }
            }
            return valid ? out : nil
        }
    }

    private static func decode(
        _ input: UnsafePointer<UInt8>, count: Int, table: UnsafeBufferPointer<UInt8>, to out: UnsafeMutablePointer<UInt8>
    ) -> Bool {
        var inIndex = 0, outIndex = 0
        while inIndex + 4 <= count {
            let a = table[Int(input[inIndex])], b = table[Int(input[inIndex + 1])]
            let c = table[Int(input[inIndex + 2])], d = table[Int(input[inIndex + 3])]
            if (a | b | c | d) & 0xC0 != 0 { return false }
            let chunk = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
            out[outIndex] = UInt8(truncatingIfNeeded: chunk >> 16)
            out[outIndex + 1] = UInt8(truncatingIfNeeded: chunk >> 8)
            out[outIndex + 2] = UInt8(truncatingIfNeeded: chunk)
            inIndex += 4
            outIndex += 3
        }
        switch count - inIndex {
        case 2:
            let a = table[Int(input[inIndex])], b = table[Int(input[inIndex + 1])]
            // Non-canonical: the 4 unused low bits of the last character must be zero.
            if (a | b) & 0xC0 != 0 || b & 0x0F != 0 { return false }
            out[outIndex] = a << 2 | b >> 4
        case 3:
            let a = table[Int(input[inIndex])], b = table[Int(input[inIndex + 1])], c = table[Int(input[inIndex + 2])]
            // Non-canonical: the 2 unused low bits of the last character must be zero.
            if (a | b | c) & 0xC0 != 0 || c & 0x03 != 0 { return false }
            out[outIndex] = a << 2 | b >> 4
            out[outIndex + 1] = b << 4 | c >> 2
        default:
            break
        }
        return true
    }
}
