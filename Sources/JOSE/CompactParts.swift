import CompactJSON
import SSLCrypto

/// The dot-separated parts of a compact serialisation, as ASCII byte ranges of one buffer.
struct CompactParts {
    let bytes: [UInt8]
    let ranges: [Range<Int>]

    /// Splits `compact` at every `.`.
    init(_ compact: String) {
        bytes = Array(compact.utf8)
        var ranges: [Range<Int>] = []
        var start = 0
        for (position, byte) in bytes.enumerated() where byte == UInt8(ascii: ".") {
            ranges.append(start..<position)
            start = position + 1
        }
        ranges.append(start..<bytes.count)
        self.ranges = ranges
    }

    var count: Int { ranges.count }

    /// The raw ASCII of part `index` (used as AAD for the protected header).
    func raw(_ index: Int) -> ArraySlice<UInt8> { bytes[ranges[index]] }

    /// Part `index` base64url-decoded, strictly.
    func decoded(_ index: Int, _ name: String) throws -> [UInt8] {
        guard let value = Base64URL.decode(bytes: raw(index)) else {
            throw JOSEError("JOSE: \(name) is not valid base64url")
        }
        return value
    }

    /// Part `index` decoded as a protected header: a JSON object whose `crit` (RFC 7515 §4.1.11) is refused,
    /// since no extension is understood here.
    func header(_ index: Int) throws -> HeaderReader.Members {
        guard let members = HeaderReader.members(of: try decoded(index, "protected header")) else {
            throw JOSEError("JOSE: protected header is not a JSON object")
        }
        guard members["crit"] == nil else { throw JOSEError("JOSE: unsupported critical header parameters") }
        return members
    }
}

extension HeaderReader.Members {
    /// A member that must be a string when present: `.none` when absent, throws when not a string.
    func string(_ name: String) throws -> String? {
        guard let member = self[ExactString(name)] else { return nil }
        guard let value = member else { throw JOSEError("JOSE: header parameter \(name) must be a string") }
        return value
    }
}
