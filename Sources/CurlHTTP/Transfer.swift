import CCurl
import CCurlShims

/// One request in flight inside libcurl: the easy handle configured for it, its header list and the
/// response being received. Confined to the transfer thread; libcurl's callbacks reach it through an
/// unretained pointer while the loop's table keeps it alive.
final class Transfer {
    let slot: RequestSlot
    let easy: CurlEasyHandle
    private let maxBodySize: Int
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var connectToList: UnsafeMutablePointer<curl_slist>?

    private(set) var responseHeaders: [(name: String, value: String)] = []
    private(set) var responseBody: [UInt8] = []
    private(set) var bodyTooLarge = false

    /// The cleartext origin when the request went through the ``CleartextHTTP2Gate``.
    let gateOrigin: String?

    init(slot: RequestSlot, easy: CurlEasyHandle, maxBodySize: Int, gateOrigin: String?) {
        self.slot = slot
        self.easy = easy
        self.maxBodySize = maxBodySize
        self.gateOrigin = gateOrigin
    }

    deinit {
        curl_slist_free_all(headerList)
        curl_slist_free_all(connectToList)
    }

    /// Sets every option of the request on the easy handle. `cleartextMode` is the gate's decision for an
    /// `http://` URL when the ``CleartextHTTP2Gate`` is in use, nil otherwise.
    func configure(_ configuration: HTTPClientConfiguration, cleartextMode: CleartextHTTP2Gate.Mode?) throws {
        let request = slot.request
        let isCleartext = request.url.utf8.starts(with: "http://".utf8)
        let isTLS = request.url.utf8.starts(with: "https://".utf8)
        guard isCleartext || isTLS else {
            throw HTTPClientError(code: .invalidRequest, message: "only http:// and https:// URLs are supported")
        }
        try easy.set(CURLOPT_URL, request.url)
        try easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
        if request.pathAsIs { try easy.set(CURLOPT_PATH_AS_IS, 1) }
        if request.http1 {
            try easy.set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1)
        } else if !isCleartext {
            try easy.set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS)
        } else if case .reuse? = cleartextMode {
            try easy.set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2_0)
        } else {
            try easy.set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE)
            if case .probe? = cleartextMode { try easy.set(CURLOPT_FRESH_CONNECT, 1) }
        }
        // Wait for an existing connection to confirm multiplexing rather than opening a new one.
        try easy.set(CURLOPT_PIPEWAIT, 1)
        try easy.set(CURLOPT_NOSIGNAL, 1)
        let timeout = request.timeout.curlMilliseconds
        try easy.set(CURLOPT_TIMEOUT_MS, timeout)
        try easy.set(CURLOPT_CONNECTTIMEOUT_MS, Swift.min(timeout, configuration.connectTimeout.curlMilliseconds))
        if let caFile = request.caFile ?? configuration.caFile {
            try easy.set(CURLOPT_CAINFO, caFile)
        }
        if let address = request.connectAddress {
            // "HOST:PORT:CONNECT-TO-HOST:CONNECT-TO-PORT", empty host and port: any host and port of the URL.
            let host = address.contains(":") ? "[\(address)]" : address
            guard address.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }), let entry = curl_slist_append(nil, "::\(host):") else {
                throw HTTPClientError(code: .invalidRequest, message: "invalid connect address")
            }
            connectToList = entry
            try easy.set(CURLOPT_CONNECT_TO, pointer: UnsafeMutableRawPointer(entry))
            try easy.set(CURLOPT_NOPROXY, "*")
        }
        try easy.set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(easy.errorBuffer))
        easy.errorBuffer[0] = 0

        switch request.method {
        case .get where request.body.isEmpty:
            try easy.set(CURLOPT_HTTPGET, 1)
        case .head:
            try easy.set(CURLOPT_NOBODY, 1)
        default:
            // POSTFIELDS makes libcurl send the body; CUSTOMREQUEST then only renames the method.
            try easy.set(CURLOPT_POSTFIELDSIZE_LARGE, offset: Int64(request.body.count))
            // COPYPOSTFIELDS copies the bytes now, so the array need not outlive this call.
            if request.body.isEmpty {
                try easy.set(CURLOPT_COPYPOSTFIELDS, "")
            } else {
                try request.body.withUnsafeBytes { bytes in
                    try easy.set(CURLOPT_COPYPOSTFIELDS, pointer: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
                }
            }
            if request.method != .post {
                try easy.set(CURLOPT_CUSTOMREQUEST, request.method.rawValue)
            }
        }

        var list: UnsafeMutablePointer<curl_slist>?
        for (name, value) in request.headers {
            guard Self.isValidHeader(name: name, value: value) else {
                curl_slist_free_all(list)
                throw HTTPClientError(code: .invalidRequest, message: "invalid header field \(name)")
            }
            // "Name;" is libcurl's way to send a header with an empty value.
            let line = value.isEmpty ? "\(name);" : "\(name): \(value)"
            guard let appended = curl_slist_append(list, line) else {
                curl_slist_free_all(list)
                throw HTTPClientError(code: .invalidRequest, message: "curl_slist_append failed")
            }
            list = appended
        }
        // Never wait for a 100-continue on HTTP/1.1 fallbacks.
        if let appended = curl_slist_append(list, "Expect:") { list = appended }
        headerList = list
        try easy.set(CURLOPT_HTTPHEADER, pointer: list.map { UnsafeMutableRawPointer($0) })

        let context = Unmanaged.passUnretained(self).toOpaque()
        try easy.set(CURLOPT_WRITEFUNCTION, callback: Transfer.writeCallback)
        try easy.set(CURLOPT_WRITEDATA, pointer: context)
        try easy.set(CURLOPT_HEADERFUNCTION, callback: Transfer.headerCallback)
        try easy.set(CURLOPT_HEADERDATA, pointer: context)
    }

    /// The response once libcurl reported the transfer done with `CURLE_OK`.
    func makeResponse() -> HTTPResponse {
        HTTPResponse(
            status: easy.info(CURLINFO_RESPONSE_CODE),
            headers: responseHeaders,
            body: responseBody,
            version: HTTPVersion(curlVersion: easy.info(CURLINFO_HTTP_VERSION)),
            localPort: easy.info(CURLINFO_LOCAL_PORT))
    }

    private static func isValidHeader(name: String, value: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }
            && value.utf8.allSatisfy { $0 != 0x0D && $0 != 0x0A && $0 != 0 }
    }

    private func appendBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard responseBody.count + bytes.count <= maxBodySize else {
            bodyTooLarge = true
            return false
        }
        responseBody.append(contentsOf: bytes)
        return true
    }

    private func receiveHeaderLine(_ bytes: UnsafeRawBufferPointer) {
        var line = bytes[...]
        while let last = line.last, last == 0x0A || last == 0x0D { line = line.dropLast() }
        if line.starts(with: "HTTP/".utf8) {
            // A new status line (after a 1xx or a redirect): only the final response's headers count.
            responseHeaders.removeAll(keepingCapacity: true)
            return
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
        var value = line[(colon + 1)...]
        while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
        while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
        responseHeaders.append((name, String(decoding: value, as: UTF8.self)))
    }

    /// `CURLOPT_WRITEFUNCTION`: appends body bytes; returning less than given aborts an oversized body.
    private static let writeCallback: curl_write_callback = { data, size, count, context in
        guard let context else { return 0 }
        let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
        let length = size * count
        guard length > 0, let data else { return length }
        return transfer.appendBody(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
    }

    /// `CURLOPT_HEADERFUNCTION`: called once per header line, status line included.
    private static let headerCallback: curl_write_callback = { data, size, count, context in
        guard let context else { return 0 }
        let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
        let length = size * count
        if length > 0, let data {
            transfer.receiveHeaderLine(UnsafeRawBufferPointer(start: data, count: length))
        }
        return length
    }
}
