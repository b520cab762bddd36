import CCurl
import CCurlShims

/// Owns a libcurl easy handle (`CURL *`) and its error buffer. Confined to the transfer thread.
/// Handles are reset and reused between requests (``reset()``).
final class CurlEasyHandle {
    let raw: UnsafeMutableRawPointer
    /// `CURLOPT_ERRORBUFFER`, `CURL_ERROR_SIZE` bytes, owned here so it outlives every transfer on the handle.
    let errorBuffer: UnsafeMutablePointer<CChar>

    init() throws {
        try CurlGlobal.ensureInitialized()
        guard let handle = curl_easy_init() else {
            throw HTTPClientError(code: .transport, message: "curl_easy_init failed")
        }
        raw = handle
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        curl_easy_cleanup(raw)
        errorBuffer.deallocate()
    }

    /// Clears all options so the handle can carry another request (connections stay in the multi's pool).
    func reset() {
        curl_easy_reset(raw)
        errorBuffer[0] = 0
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
