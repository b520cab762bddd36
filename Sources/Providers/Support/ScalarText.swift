import CompactJSON

extension JSONValue {
    /// The text of a member that Huawei writes as a number or a string (`"error":1101`, `"code":"80000000"`):
    /// the number's lexeme or the string; nil for anything else.
    var scalarText: String? {
        switch self {
        case .number(let lexeme): lexeme
        case .string(let text): text
        default: nil
        }
    }
}
