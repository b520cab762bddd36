import CompactJSON

/// Reads a JOSE header: exactly one JSON object, duplicate member names rejected (RFC 7515 §4 allows it).
enum HeaderReader {
    /// Top-level members: string values decoded, every other value recorded as `nil`.
    typealias Members = [ExactString: String?]

    /// Nil when `json` is not exactly one well-formed JSON object without duplicate members.
    static func members(of json: [UInt8]) -> Members? {
        guard case .object(let object)? = try? JSONParser.parse(json, rejectDuplicateKeys: true) else { return nil }
        return object.mapValues { $0.stringValue }
    }
}
