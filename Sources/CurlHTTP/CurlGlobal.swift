import CCurl

/// Process-wide libcurl initialisation (`curl_global_init`), performed exactly once, lazily, before the
/// first handle is created. libcurl 7.84+ makes this call thread-safe itself; the `static let` guarantees
/// it also on older versions.
enum CurlGlobal {
    private static let initResult: CURLcode = curl_global_init(Int(CURL_GLOBAL_SSL | CURL_GLOBAL_WIN32))

    /// Initialises libcurl if needed; throws if `curl_global_init` failed.
    static func ensureInitialized() throws {
        guard initResult == CURLE_OK else {
            throw HTTPClientError(
                code: .transport, curlCode: Int(initResult.rawValue),
                message: "curl_global_init failed: \(CurlGlobal.describe(initResult))")
        }
    }

    /// `curl_easy_strerror` as a Swift string.
    static func describe(_ code: CURLcode) -> String {
        guard let text = curl_easy_strerror(code) else { return "CURLcode \(code.rawValue)" }
        return String(cString: text)
    }
}
