import CCurl
import CCurlShims

/// Owns a libcurl easy handle (`CURL *`), its error buffer and the buffer its request bodies are sent from.
/// Confined to the transfer thread.
///
/// Handles are reused between requests: options stay set on a handle after its transfer, so a request whose
/// ``TransferSettings`` equal the handle's ``settings`` only sets what differs per request (URL, body, header
/// list, callback context); any other request resets the handle first (``reset()``).
final class CurlEasyHandle {
    let raw: UnsafeMutableRawPointer
    /// `CURLOPT_ERRORBUFFER`, `CURL_ERROR_SIZE` bytes, owned here so it outlives every transfer on the handle.
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// The options set since the last reset; nil on a fresh or reset handle (or after a failed setup).
    var settings: TransferSettings?
    /// The `CURLOPT_URL` set since the last reset.
    var url: String?
    /// The `CURLOPT_CONNECT_TO` list set since the last reset, freed by the next one.
    var connectToList: UnsafeMutablePointer<curl_slist>?
    /// The bytes `CURLOPT_POSTFIELDS` points at: the current request's body, copied in when the transfer is
    /// configured and left untouched until the handle carries its next request, i.e. after the transfer was
    /// removed from the multi handle (libcurl re-reads it when it sends the request again, e.g. after a refused
    /// stream). Never null, so libcurl never falls back to its read callback (stdin).
    private var bodyBuffer: UnsafeMutableRawBufferPointer

    init() throws {
        try CurlGlobal.ensureInitialized()
        guard let handle = curl_easy_init() else {
            throw HTTPClientError(code: .transport, message: "curl_easy_init failed")
        }
        raw = handle
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        bodyBuffer = .allocate(byteCount: 1024, alignment: 1)
    }

    deinit {
        curl_easy_cleanup(raw)
        curl_slist_free_all(connectToList)
        errorBuffer.deallocate()
        bodyBuffer.deallocate()
    }

    /// Clears all options so the handle can carry another request (connections stay in the multi's pool).
    func reset() {
        curl_easy_reset(raw)
        curl_slist_free_all(connectToList)
        connectToList = nil
        settings = nil
        url = nil
        errorBuffer[0] = 0
    }

    /// Copies `body` into the handle's body buffer (growing it when needed) and points `CURLOPT_POSTFIELDS`
    /// at it, with `CURLOPT_POSTFIELDSIZE_LARGE` set to its exact size. Unlike `CURLOPT_COPYPOSTFIELDS`, this
    /// allocates nothing once the buffer is large enough.
    func setBody(_ body: [UInt8]) throws {
        if body.count > bodyBuffer.count {
            let grown = UnsafeMutableRawBufferPointer.allocate(
                byteCount: Swift.max(body.count, bodyBuffer.count * 2), alignment: 1)
            bodyBuffer.deallocate()
            bodyBuffer = grown
        }
        body.withUnsafeBytes { bytes in
            bodyBuffer.copyMemory(from: bytes)
        }
        try set(CURLOPT_POSTFIELDSIZE_LARGE, offset: Int64(body.count))
        try set(CURLOPT_POSTFIELDS, pointer: bodyBuffer.baseAddress)
    }

    /// The text libcurl left in the error buffer, or `curl_easy_strerror(code)` when it is empty.
    func errorMessage(for code: CURLcode) -> String {
        if errorBuffer[0] != 0 {
            return String(cString: errorBuffer)
        }
        return CurlGlobal.describe(code)
    }

    func set(_ option: CURLoption, _ value: Int) throws {
        try check(CCurlShims_easy_setopt_long(raw, option, value), option)
    }

    func set(_ option: CURLoption, _ value: String) throws {
        try check(CCurlShims_easy_setopt_string(raw, option, value), option)
    }

    func set(_ option: CURLoption, pointer: UnsafeMutableRawPointer?) throws {
        try check(CCurlShims_easy_setopt_pointer(raw, option, pointer), option)
    }

    func set(_ option: CURLoption, offset: Int64) throws {
        try check(CCurlShims_easy_setopt_off_t(raw, option, curl_off_t(offset)), option)
    }

    func set(_ option: CURLoption, callback: curl_write_callback) throws {
        try check(CCurlShims_easy_setopt_write_function(raw, option, callback), option)
    }

    func info(_ info: CURLINFO) -> Int {
        var value = 0
        return CCurlShims_easy_getinfo_long(raw, info, &value) == CURLE_OK ? value : 0
    }

    private func check(_ result: CURLcode, _ option: CURLoption) throws {
        guard result == CURLE_OK else {
            throw HTTPClientError(
                code: .invalidRequest, curlCode: Int(result.rawValue),
                message: "curl_easy_setopt(\(option.rawValue)) failed: \(CurlGlobal.describe(result))")
        }
    }
}
