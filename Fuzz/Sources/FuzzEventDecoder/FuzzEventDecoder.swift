import CFuzzDriver
import EventDecoding

/// libFuzzer entry: the first byte chooses the record's headers and key, the rest is the record's value.
///   bit 0: `content-type: application/json` (protobuf otherwise); bit 1: a `content-type` header with another
///   value; bit 2: key "toto"; bit 3: an empty key.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEventDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let flags = data[0]
    let value = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let contentType: [UInt8]? =
        flags & 1 != 0 ? Array("application/json; charset=utf-8".utf8) : flags & 2 != 0 ? Array("text/plain".utf8) : nil
    let key: [UInt8]? = flags & 4 != 0 ? Array("toto".utf8) : flags & 8 != 0 ? [] : nil
    if let event = try? EventDecoder.decode(value: value, contentType: contentType, key: key) {
        // A decoded event is valid: its path is a data path of the event's app.
        if event.app.isEmpty { fatalError("an event without an app was accepted") }
        _ = event.path.description
    }
    return 0
}

/// The entry point (SwiftPM renames an executable's `main` to `<Module>_main`): libFuzzer's driver.
@_cdecl("FuzzEventDecoder_main")
public func fuzzEventDecoderMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    CFuzzDriver_run(argc, argv) { data, size in data.map { fuzzEventDecoder($0, size) } ?? 0 }
}
