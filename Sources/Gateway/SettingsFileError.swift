import Yams

/// Why a YAML or JSON file (the main configuration, an app's settings) could not be decoded, in words that
/// name the file and the place (line and column for a syntax error, the field for a value of the wrong
/// type) but never quote the file: the offending line may hold a secret (`clientSecret: …`), and Yams'
/// own descriptions print it with a caret under the error.
enum SettingsFileError {
    static func describe(_ error: any Error, file: String) -> String {
        if let yaml = error as? YamlError { return describe(yaml, file: file) }
        guard let decoding = error as? DecodingError else {
            // Not from the decoder: say what kind of error, nothing of its text.
            return "\(file): cannot decode it (\(type(of: error)))"
        }
        switch decoding {
        case .dataCorrupted(let context):
            if let yaml = context.underlyingError as? YamlError { return describe(yaml, file: file) }
            // The standard library's messages here quote the value ("Cannot initialize X from invalid String
            // value …"): only the field is named.
            return "\(file): \(field(context.codingPath)): invalid value"
        case .typeMismatch(let type, let context):
            return "\(file): \(field(context.codingPath)): wrong type, expected \(expected(type))"
        case .valueNotFound(let type, let context):
            return "\(file): \(field(context.codingPath)): missing value, expected \(expected(type))"
        case .keyNotFound(let key, let context):
            return "\(file): \(field(context.codingPath + [key])): required field missing"
        @unknown default:
            return "\(file): cannot decode it"
        }
    }

    /// libyaml's problem and context texts are fixed phrases ("could not find expected ':'"); the position is
    /// 1-based, the column counted in Unicode scalars.
    static func describe(_ error: YamlError, file: String) -> String {
        func syntax(_ kind: String, _ context: YamlError.Context?, _ problem: String, _ mark: Mark) -> String {
            var text = "\(file):\(mark.line):\(mark.column): not valid YAML/JSON (\(kind)): \(problem)"
            if let context { text += ", \(context.text) at line \(context.mark.line), column \(context.mark.column)" }
            return text
        }
        switch error {
        case .scanner(let context, let problem, let mark, _): return syntax("scanner", context, problem, mark)
        case .parser(let context, let problem, let mark, _): return syntax("parser", context, problem, mark)
        case .composer(let context, let problem, let mark, _): return syntax("composer", context, problem, mark)
        case .reader(let problem, let offset, _, let yaml):
            guard let offset, let (line, column) = position(ofCharacter: offset, in: yaml) else {
                return "\(file): not valid YAML/JSON (reader): \(problem)"
            }
            return "\(file):\(line):\(column): not valid YAML/JSON (reader): \(problem)"
        case .duplicatedKeysInMapping(let duplicates, let context):
            let keys = duplicates.sorted().map { "'\($0.prefix(64))'" }.joined(separator: ", ")
            return "\(file):\(context.mark.line):\(context.mark.column): duplicate key(s) \(keys)"
        case .dataCouldNotBeDecoded:
            return "\(file): not UTF-8 text"
        case .no, .memory, .writer, .emitter, .representer:
            return "\(file): not valid YAML/JSON"
        }
    }

    /// 1-based line and column of the `offset`-th character of `text`.
    static func position(ofCharacter offset: Int, in text: String) -> (line: Int, column: Int)? {
        guard offset >= 0 else { return nil }
        var line = 1, column = 1, index = 0
        for character in text {
            if index == offset { return (line, column) }
            if character.isNewline {
                line += 1
                column = 1
            } else {
                column += 1
            }
            index += 1
        }
        return index == offset ? (line, column) : nil
    }

    /// `apps.toto.hms.clientSecret`, `authKeys[0]`; `(document)` for the root.
    static func field(_ path: [any CodingKey]) -> String {
        var text = ""
        for key in path {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += (text.isEmpty ? "" : ".") + key.stringValue.prefix(64)
            }
        }
        return text.isEmpty ? "(document)" : text
    }

    private static func expected(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is Int.Type, is Int64.Type, is Int32.Type: "an integer"
        case is Double.Type: "a number"
        case is Node.Mapping.Type: "a mapping"
        case is Node.Sequence.Type: "a list"
        case is Node.Scalar.Type: "a single value"
        default: "\(type)"
        }
    }
}
