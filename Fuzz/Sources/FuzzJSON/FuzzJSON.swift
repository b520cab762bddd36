import CFuzzDriver
import CompactJSON

/// libFuzzer entry: any bytes as a JSON document. Properties besides "no crash, no hang": a parsed value
/// written back and parsed again is the same value, and writing is stable byte for byte; parsing with
/// duplicate keys refused never accepts what the lenient parse refuses.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let lenient = try? JSONParser.parse(bytes)
    let strict = try? JSONParser.parse(bytes, rejectDuplicateKeys: true)
    if strict != nil, lenient == nil { fatalError("accepted with duplicate keys refused, refused without") }
    guard let value = lenient else { return 0 }
    let written = JSONWriter.bytes(value)
    guard let again = try? JSONParser.parse(written) else { fatalError("the writer's output does not parse") }
    if again != value { fatalError("a value changed in a write/parse round trip") }
    if JSONWriter.bytes(again) != written { fatalError("writing is not stable") }
    _ = JSONWriter.string(value)
    return 0
}

/// The entry point (SwiftPM renames an executable's `main` to `<Module>_main`): libFuzzer's driver.
@_cdecl("FuzzJSON_main")
public func fuzzJSONMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    CFuzzDriver_run(argc, argv) { data, size in data.map { fuzzJSON($0, size) } ?? 0 }
}
