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
    /// What libcurl did with the current transfer's attempts, for a request sent at most once
    /// (``HTTPRequest/sendOnce``): the callbacks installed by ``sendOnce()`` write it, ``resetAttempts()`` clears it.
    private let attempts: UnsafeMutablePointer<CCurlShims_attempts>

    init() throws {
        try CurlGlobal.ensureInitialized()
        guard let handle = curl_easy_init() else {
            throw HTTPClientError(code: .transport, message: "curl_easy_init failed")
        }
        raw = handle
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        bodyBuffer = .allocate(byteCount: 1024, alignment: 1)
        attempts = .allocate(capacity: 1)
        attempts.initialize(to: CCurlShims_attempts(easy: handle, sent: 0, stopped: 0, first_errno: 0))
    }

    deinit {
        curl_easy_cleanup(raw)
        curl_slist_free_all(connectToList)
        errorBuffer.deallocate()
        bodyBuffer.deallocate()
        attempts.deallocate()
    }

    /// Makes libcurl open and close the sockets of this handle's connections through `sockets` (its multi handle's
    /// ``CurlMultiHandle/sockets``), until the next reset.
    func trackSockets(in sockets: UnsafeMutablePointer<CCurlShims_sockets>) throws {
        let result = CCurlShims_easy_track_sockets(raw, sockets)
        guard result == CURLE_OK else {
            throw HTTPClientError(
                code: .invalidRequest, curlCode: Int(result.rawValue),
                message: "the socket callbacks could not be set: \(CurlGlobal.describe(result))")
        }
    }

    /// Makes every transfer of this handle (until its next reset) send its request at most once: libcurl's own
    /// resend on another connection, after a kept-alive one died with no answer, is stopped and recorded.
    func sendOnce() throws {
        let result = CCurlShims_easy_send_once(raw, attempts)
        guard result == CURLE_OK else {
            throw HTTPClientError(
                code: .invalidRequest, curlCode: Int(result.rawValue),
                message: "the send-once callbacks could not be set: \(CurlGlobal.describe(result))")
        }
    }

    /// Clears the record of attempts before a transfer.
    func resetAttempts() {
        attempts.pointee.sent = 0
        attempts.pointee.stopped = 0
        attempts.pointee.first_errno = 0
    }

    /// For a failed transfer sent at most once (``sendOnce()``): whether the server certainly never read the whole
    /// request. Its one attempt went out, no byte of an answer came back, and the connection was reset: a send
    /// failed (the request did not go out whole), or the peer reset the connection (`ECONNRESET`, `EPIPE`). A
    /// peer resets a TCP connection when its application closes it with bytes unread, or when bytes arrive after
    /// it closed; one that read the whole request and then closed, or died, ends the connection in order (EOF),
    /// which says nothing about whether it acted on the request.
    func wasResetUnread(_ code: CURLcode) -> Bool {
        let record = attempts.pointee
        guard record.sent == 1, info(CURLINFO_HEADER_SIZE) == 0 else { return false }
        if record.stopped != 0 {
            // libcurl began a resend after a send or receive failure on a reused connection, or after its end.
            return CCurlShims_is_reset_errno(record.first_errno) == 1
        }
        return code == CURLE_SEND_ERROR
            || (code == CURLE_RECV_ERROR && CCurlShims_is_reset_errno(info(CURLINFO_OS_ERRNO)) == 1)
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
