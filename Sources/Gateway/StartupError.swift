/// A start that cannot succeed: the process ends with a non-zero status and this one line.
public struct StartupError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
