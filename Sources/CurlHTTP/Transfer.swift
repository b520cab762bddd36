import CCurl
import CCurlShims

/// Everything set on an easy handle for a request except its URL, body, header list and callback context:
/// what requests to one endpoint share, so a reused handle whose settings are equal keeps them as they are.
struct TransferSettings: Equatable {
    /// `CURL_HTTP_VERSION_*`.
    var httpVersion: Int
    var freshConnect: Bool
    var pathAsIs: Bool
    var timeoutMilliseconds: Int
    var connectTimeoutMilliseconds: Int
    var caFile: String?
    var connectAddress: String?
    /// `CURLOPT_PROXY` ("" for none) and `CURLOPT_NOPROXY`.
    var proxy: String
    var noProxy: String
    var method: HTTPMethod
    /// ``HTTPRequest/sendOnce``.
    var sendOnce: Bool
    /// ``HTTPClientConfiguration/maxIdleConnectionAge`` in whole seconds (at least 1), nil for libcurl's default.
    var maxIdleAgeSeconds: Int?
    /// Whether the body goes out with `CURLOPT_POSTFIELDS` (every method but HEAD and a GET without body).
    var sendsBody: Bool
}

/// A request's header lines as one libcurl list (`struct curl_slist`), shared by every transfer with the same
/// header fields (``HeaderListCache``) and freed when the last of them is done.
final class SharedHeaderList {
    let raw: UnsafeMutablePointer<curl_slist>?

    /// Builds the list, with an `Expect:` line that stops libcurl from waiting for a 100-continue on HTTP/1.1.
    init(_ headers: [(name: String, value: String)]) throws {
        var list: UnsafeMutablePointer<curl_slist>?
        for (name, value) in headers {
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
        if let appended = curl_slist_append(list, "Expect:") { list = appended }
        raw = list
    }

    deinit {
        curl_slist_free_all(raw)
    }

    private static func isValidHeader(name: String, value: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }
            && value.utf8.allSatisfy { $0 != 0x0D && $0 != 0x0A && $0 != 0 }
    }
}

/// The header lists of recent requests by their header fields, so requests that repeat their headers (one
/// provider endpoint, one access token) share one list instead of building it per request. Bounded: emptied
/// when full (lists in use stay alive with their transfers). Confined to the transfer thread.
struct HeaderListCache {
    private struct Fields: Hashable {
        let fields: [(name: String, value: String)]

        static func == (lhs: Fields, rhs: Fields) -> Bool {
            lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(fields.count)
            for (name, value) in fields {
                hasher.combine(name)
                hasher.combine(value)
            }
        }
    }

    static let maxLists = 64
    private var lists: [Fields: SharedHeaderList] = [:]

    /// The list for `headers`, built on first use.
    mutating func list(for headers: [(name: String, value: String)]) throws -> SharedHeaderList {
        let key = Fields(fields: headers)
        if let list = lists[key] { return list }
        let list = try SharedHeaderList(headers)
        if lists.count >= Self.maxLists { lists.removeAll(keepingCapacity: true) }
        lists[key] = list
        return list
    }
}

/// One request in flight inside libcurl: the easy handle configured for it, its header list and the
/// response being received. Confined to the transfer thread; libcurl's callbacks reach it through an
/// unretained pointer while the loop's table keeps it alive.
final class Transfer {
    let slot: RequestSlot
    let easy: CurlEasyHandle
    private let maxBodySize: Int
    /// Kept alive until the transfer is done (libcurl reads it when it sends the request, again on a retry).
    private var headerList: SharedHeaderList?
    /// Names of the response headers to keep (``HTTPRequest/responseHeaderNames``), nil for all.
    private let keptHeaderNames: [String]?

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
        keptHeaderNames = slot.request.responseHeaderNames
    }

    /// Sets the request's options on the easy handle: everything after a reset when the handle's
    /// ``TransferSettings`` differ, else only the URL (when it differs), body, header list and callback context.
    /// `cleartextMode` is the gate's decision for an `http://` URL when the ``CleartextHTTP2Gate`` is in use,
    /// nil otherwise; `sockets`, the multi handle's record of its connections' sockets (``CurlMultiHandle/sockets``).
    func configure(
        _ configuration: HTTPClientConfiguration, proxy: ProxySettings, headerLists: inout HeaderListCache,
        cleartextMode: CleartextHTTP2Gate.Mode?, sockets: UnsafeMutablePointer<CCurlShims_sockets>
    ) throws {
        let request = slot.request
        let isCleartext = request.url.utf8.starts(with: "http://".utf8)
        let isTLS = request.url.utf8.starts(with: "https://".utf8)
        guard isCleartext || isTLS else {
            throw HTTPClientError(code: .invalidRequest, message: "only http:// and https:// URLs are supported")
        }
        let httpVersion: Int
        if request.http1 {
            httpVersion = CURL_HTTP_VERSION_1_1
        } else if !isCleartext {
            httpVersion = CURL_HTTP_VERSION_2TLS
        } else if case .reuse? = cleartextMode {
            httpVersion = CURL_HTTP_VERSION_2_0
        } else {
            httpVersion = CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
        }
        let timeout = request.timeout.curlMilliseconds
        let sendsBody: Bool
        switch request.method {
        case .get: sendsBody = !request.body.isEmpty
        case .head: sendsBody = false
        default: sendsBody = true
        }
        let settings = TransferSettings(
            httpVersion: httpVersion,
            freshConnect: isCleartext && !request.http1 && cleartextMode == .probe,
            pathAsIs: request.pathAsIs,
            timeoutMilliseconds: timeout,
            connectTimeoutMilliseconds: Swift.min(timeout, configuration.connectTimeout.curlMilliseconds),
            caFile: request.caFile ?? configuration.caFile,
            connectAddress: request.connectAddress,
            // A connect address bypasses every proxy, so the address checked by the caller is the one used.
            proxy: request.connectAddress == nil ? proxy.proxy(forTLS: isTLS) : "",
            noProxy: request.connectAddress == nil ? proxy.noProxy ?? "" : "*",
            method: request.method,
            sendOnce: request.sendOnce,
            maxIdleAgeSeconds: configuration.maxIdleConnectionAge.map { Swift.max(1, Int($0.components.seconds)) },
            sendsBody: sendsBody)
        if easy.settings != settings {
            easy.reset()
            try apply(settings)
            try easy.trackSockets(in: sockets)
            easy.settings = settings
        }
        if easy.url != request.url {
            easy.url = nil
            try easy.set(CURLOPT_URL, request.url)
            easy.url = request.url
        }
        easy.errorBuffer[0] = 0
        if settings.sendOnce { easy.resetAttempts() }
        if sendsBody {
            // Copied into the handle's own buffer: no request ever goes out with another one's body or none.
            try easy.setBody(request.body)
        }
        let list = try headerLists.list(for: request.headers)
        headerList = list
        try easy.set(CURLOPT_HTTPHEADER, pointer: list.raw.map { UnsafeMutableRawPointer($0) })
        let context = Unmanaged.passUnretained(self).toOpaque()
        try easy.set(CURLOPT_WRITEDATA, pointer: context)
        try easy.set(CURLOPT_HEADERDATA, pointer: context)
    }

    /// Sets `settings` and the options every request shares on a freshly reset handle.
    private func apply(_ settings: TransferSettings) throws {
        try easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
        try easy.set(CURLOPT_HTTP_VERSION, settings.httpVersion)
        if settings.freshConnect { try easy.set(CURLOPT_FRESH_CONNECT, 1) }
        if settings.pathAsIs { try easy.set(CURLOPT_PATH_AS_IS, 1) }
        // Wait for an existing connection to confirm multiplexing rather than opening a new one.
        try easy.set(CURLOPT_PIPEWAIT, 1)
        try easy.set(CURLOPT_NOSIGNAL, 1)
        try easy.set(CURLOPT_TIMEOUT_MS, settings.timeoutMilliseconds)
        try easy.set(CURLOPT_CONNECTTIMEOUT_MS, settings.connectTimeoutMilliseconds)
        if let caFile = settings.caFile {
            try easy.set(CURLOPT_CAINFO, caFile)
        }
        if let address = settings.connectAddress {
            // "HOST:PORT:CONNECT-TO-HOST:CONNECT-TO-PORT", empty host and port: any host and port of the URL.
            let host = address.contains(":") ? "[\(address)]" : address
            guard address.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }), let entry = curl_slist_append(nil, "::\(host):") else {
                throw HTTPClientError(code: .invalidRequest, message: "invalid connect address")
            }
            // Owned by the handle until its next reset: later requests with equal settings use it too.
            easy.connectToList = entry
            try easy.set(CURLOPT_CONNECT_TO, pointer: UnsafeMutableRawPointer(entry))
        }
        // Set explicitly, even empty: libcurl then never reads the proxy environment itself.
        try easy.set(CURLOPT_PROXY, settings.proxy)
        try easy.set(CURLOPT_NOPROXY, settings.noProxy)
        try easy.set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(easy.errorBuffer))
        if settings.sendOnce { try easy.sendOnce() }
        if let age = settings.maxIdleAgeSeconds { try easy.set(CURLOPT_MAXAGE_CONN, age) }

        switch settings.method {
        case .get where !settings.sendsBody:
            try easy.set(CURLOPT_HTTPGET, 1)
        case .head:
            try easy.set(CURLOPT_NOBODY, 1)
        default:
            // POSTFIELDS (set per request) makes libcurl send the body; CUSTOMREQUEST only renames the method.
            if settings.method != .post {
                try easy.set(CURLOPT_CUSTOMREQUEST, settings.method.rawValue)
            }
        }
        try easy.set(CURLOPT_WRITEFUNCTION, callback: Transfer.writeCallback)
        try easy.set(CURLOPT_HEADERFUNCTION, callback: Transfer.headerCallback)
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
        let nameBytes = line[..<colon]
        let name: String
        if let keptHeaderNames {
            // Compared in place: a header nobody reads costs no string.
            guard let kept = keptHeaderNames.first(where: { Self.equalIgnoringASCIICase($0, nameBytes) }) else { return }
            name = kept.lowercased()
        } else {
            name = String(decoding: nameBytes, as: UTF8.self).lowercased()
        }
        var value = line[(colon + 1)...]
        while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
        while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
        responseHeaders.append((name, String(decoding: value, as: UTF8.self)))
    }

    /// Whether `name` and `bytes` are equal ignoring ASCII case.
    private static func equalIgnoringASCIICase(_ name: String, _ bytes: Slice<UnsafeRawBufferPointer>) -> Bool {
        func lower(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }
        return name.utf8.count == bytes.count && name.utf8.elementsEqual(bytes) { lower($0) == lower($1) }
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
