import CompactJSON
import Foundation

/// Any YAML/JSON value, decoded into the project's ``JSONValue`` (for the settings that other modules parse:
/// keys, rules).
struct DecodedJSON: Decodable {
    let value: JSONValue

    init(from decoder: any Decoder) throws {
        if let keyed = try? decoder.container(keyedBy: AnyKey.self) {
            var object: [ExactString: JSONValue] = [:]
            for key in keyed.allKeys { object[ExactString(key.stringValue)] = try keyed.decode(DecodedJSON.self, forKey: key).value }
            value = .object(object)
            return
        }
        if var unkeyed = try? decoder.unkeyedContainer() {
            var array: [JSONValue] = []
            while !unkeyed.isAtEnd { array.append(try unkeyed.decode(DecodedJSON.self).value) }
            value = .array(array)
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            value = .null
        } else if let bool = try? single.decode(Bool.self) {
            value = .bool(bool)
        } else if let int = try? single.decode(Int64.self) {
            value = .number(String(int))
        } else if let double = try? single.decode(Double.self), double.isFinite {
            value = .number(String(double))
        } else {
            value = .string(try single.decode(String.self))
        }
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
