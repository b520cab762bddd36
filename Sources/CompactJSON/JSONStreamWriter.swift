/// Compact JSON written piece by piece into a byte buffer, for documents whose member order is fixed
/// (provider requests, JWT headers and claims). Strings are escaped by ``JSONWriter/writeString(_:into:)``.
public struct JSONStreamWriter {
    public private(set) var bytes: [UInt8] = []

    public init(reservingCapacity capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    /// Appends text that is already JSON.
    public mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Appends bytes that are already JSON.
    public mutating func raw(_ json: some Sequence<UInt8>) {
        bytes.append(contentsOf: json)
    }

    /// Appends `value` as a JSON string literal, quotes included.
    public mutating func string(_ value: String) {
        JSONWriter.writeString(value, into: &bytes)
    }

    /// Appends an integer.
    public mutating func integer(_ value: Int) {
        bytes.append(contentsOf: String(value).utf8)
    }
}
