import CFuzzDriver
import PushCore

/// libFuzzer entry: a state-topic record, its key up to the first 0x00 byte and its value after it (no 0x00:
/// a tombstone). A record that decodes is replayed into an app index as at start-up, and its re-encoding
/// decodes to the same record.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzStateRecord(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let split = bytes.firstIndex(of: 0)
    let key = Array(bytes[..<(split ?? size)])
    let value = split.map { Array(bytes[($0 + 1)...]) }
    guard let record = try? StateRecord.decode(key: key, value: value) else { return 0 }
    record.apply(to: AppIndex(app: record.app))
    guard let again = try? StateRecord.decode(key: record.key, value: record.value) else {
        fatalError("a decoded state record's encoding does not decode")
    }
    if again != record { fatalError("a state record changed in an encode/decode round trip") }
    return 0
}

/// The entry point (SwiftPM renames an executable's `main` to `<Module>_main`): libFuzzer's driver.
@_cdecl("FuzzStateRecord_main")
public func fuzzStateRecordMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    CFuzzDriver_run(argc, argv) { data, size in data.map { fuzzStateRecord($0, size) } ?? 0 }
}
