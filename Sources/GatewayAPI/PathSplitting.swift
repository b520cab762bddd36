extension String {
    /// The parts between the bytes `/` (empty parts kept). Splits on UTF-8 bytes, never on Swift
    /// `Character`s: a combining mark after a `/` must not glue the next key onto it.
    func slashSeparatedParts() -> [String] {
        utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    }
}
