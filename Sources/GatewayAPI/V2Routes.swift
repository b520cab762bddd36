import Foundation
import Hummingbird
import PushCore
import PushFormats

/// The v2 subscriptions API of seed 001 under `/datasync/v2/{app}/subscriptions/{uid}[/{id}]`, and the token
/// replacement `POST …/{uid}/.replace-context`.
enum V2Routes {
    /// Request bodies larger than this are refused (a subscription is a few hundred bytes).
    static let maximumBodyBytes = 16 * 1024

    static func add(to router: Router<GatewayRequestContext>, api: some V2SubscriptionAPI) {
        let collection = "/datasync/v2/:app/subscriptions/:uid"
        let item = "/datasync/v2/:app/subscriptions/:uid/:id"

        router.post(RouterPath(collection)) { request, context in
            await respond { () async throws(APIError) -> Response in
                let target = try V2Target(try context.apiPath(of: request), withID: false)
                let caller = try await api.authorize(app: target.app, uid: target.uid, bearer: bearer(request))
                let body = try await parseBody(request)
                let allowsUpdate = request.uri.queryParameters["allowsUpdate"].map { $0 == "true" } ?? false
                let outcome = try await api.create(caller, request: try fullRequest(body), allowsUpdate: allowsUpdate)
                return written(outcome, target)
            }
        }
        // A token rotated: `.replace-context` cannot be a subscription id (ids are base64url, without '.').
        router.post(RouterPath(collection + "/.replace-context")) { request, context in
            await respond { () async throws(APIError) -> Response in
                let target = try V2Target(try context.apiPath(of: request), withID: true)
                let caller = try await api.authorize(app: target.app, uid: target.uid, bearer: bearer(request))
                let outcome = try await api.replaceContext(caller, request: try V2ReplaceContextRequest(try await parseBody(request)))
                return json(.ok, outcome.json)
            }
        }
        router.get(RouterPath(collection)) { request, context in
            await respond { () async throws(APIError) -> Response in
                let target = try V2Target(try context.apiPath(of: request), withID: false)
                let caller = try await api.authorize(app: target.app, uid: target.uid, bearer: bearer(request))
                let documents = try await api.list(caller)
                return json(.ok, .object(["subscriptions": .array(documents.map(\.json))]))
            }
        }
        router.get(RouterPath(item)) { request, context in
            await respond { () async throws(APIError) -> Response in
                let target = try V2Target(try context.apiPath(of: request), withID: true)
                let caller = try await api.authorize(app: target.app, uid: target.uid, bearer: bearer(request))
                let document = try await api.get(caller, id: target.id)
                return json(.ok, document.json, location: target.location(id: document.id))
            }
        }
        router.put(RouterPath(item)) { request, context in
            await respond { () async throws(APIError) -> Response in
                let target = try V2Target(try context.apiPath(of: request), withID: true)
                let caller = try await api.authorize(app: target.app, uid: target.uid, bearer: bearer(request))
                let body = try await parseBody(request)
                let outcome = try await api.update(caller, id: target.id, request: try partialRequest(body))
                return written(outcome, target)
            }
        }
        router.delete(RouterPath(item)) { request, context in
            await respond { () async throws(APIError) -> Response in
                let target = try V2Target(try context.apiPath(of: request), withID: true)
                let caller = try await api.authorize(app: target.app, uid: target.uid, bearer: bearer(request))
                try await api.delete(caller, id: target.id)
                return Response(status: .noContent)
            }
        }
    }

    private static func respond(_ body: () async throws(APIError) -> Response) async -> Response {
        do {
            return try await body()
        } catch {
            return Routes.errorResponse(error)
        }
    }

    private static func written(_ outcome: V2WriteOutcome, _ target: V2Target) -> Response {
        switch outcome {
        case .created(let document): json(.created, document.json, location: target.location(id: document.id))
        case .updated(let document): json(.ok, document.json, location: target.location(id: document.id))
        case .deleted: Response(status: .noContent)
        }
    }

    private static func json(_ status: HTTPResponse.Status, _ value: JSONValue, location: String? = nil) -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let location { headers[.contentLocation] = location }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(value))))
    }

    /// The token of `Authorization: Bearer <token>`; nil when the header is absent or not a bearer token.
    static func bearer(_ request: Request) -> String? {
        guard let header = request.headers[.authorization] else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }

    private static func parseBody(_ request: Request) async throws(APIError) -> [ExactString: JSONValue] {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: maximumBodyBytes)
        } catch {
            throw .badRequest("the request body must be a JSON object of at most \(maximumBodyBytes) bytes")
        }
        guard case .object(let object)? = try? JSONParser.parse(Array(buffer.readableBytesView)) else {
            throw .badRequest("the request body must be a JSON object")
        }
        return object
    }

    static func fullRequest(_ body: [ExactString: JSONValue]) throws(APIError) -> V2SubscriptionRequest {
        let partial = try partialRequest(body)
        guard let kind = partial.kind else { throw .badRequest("'kind' is required: mobile, huawei, apns, webhook or webpush") }
        guard let path = partial.path else { throw .badRequest("'path' is required") }
        let webhook = kind == .webhook
        guard let context = partial.context ?? (webhook ? "" : nil) else {
            throw .badRequest(
                kind == .webpush
                    ? "'context' (the browser's subscription: {\"endpoint\":…,\"keys\":{\"p256dh\":…,\"auth\":…}}) is required"
                    : "'context' (the device's push token) is required")
        }
        if webhook && partial.destination == nil { throw .badRequest("'destination' (the https:// URL to POST to) is required for a webhook") }
        if webhook, case .set? = partial.encryption { throw encryptionNotForWebhooks }
        if kind == .webpush, case .set? = partial.encryption { throw encryptionNotForWebPush }
        let format = partial.format ?? .v2
        var encryption: DeviceEncryption? = nil
        if case .set(let key)? = partial.encryption {
            guard format == .v2 else { throw encryptionNeedsV2 }
            encryption = key
        }
        var request = V2SubscriptionRequest(
            kind: kind, mode: partial.mode ?? .noData, path: path, context: context,
            expirationTimestampSeconds: partial.expirationTimestampSeconds, format: format, filters: partial.filters, encryption: encryption)
        request.destination = partial.destination
        return request
    }

    /// 400 for a device key on a webhook subscription: its deliveries are the v2 event as JSON over HTTPS.
    static let encryptionNotForWebhooks = APIError.badRequest(
        "'encryption' is for device subscriptions: a webhook receives the v2 event as JSON over HTTPS")

    /// 400 for a device key on a Web Push subscription: every message is already encrypted for the browser's keys.
    static let encryptionNotForWebPush = APIError.badRequest(
        "'encryption' is not for webpush: every Web Push message is encrypted for the browser's own keys (RFC 8291)")

    /// 400 for a device key on a v1 subscription: v1 payloads are never encrypted.
    static let encryptionNeedsV2 = APIError.badRequest("'encryption' needs format v2 (v1 payloads are never encrypted)")

    /// The `encryption` member: absent → nil (keep), `null` → remove, an object → a checked device key.
    static func encryptionUpdate(_ body: [ExactString: JSONValue]) throws(APIError) -> EncryptionUpdate? {
        guard let value = body["encryption"] else { return nil }
        if value == .null { return .remove }
        do {
            return .set(try DeviceKey.parse(value))
        } catch {
            throw .badRequest(error.message)
        }
    }

    static func partialRequest(_ body: [ExactString: JSONValue]) throws(APIError) -> V2PartialRequest {
        var request = V2PartialRequest()
        func string(_ key: String) throws(APIError) -> String? {
            guard let value = body[ExactString(key)], value != .null else { return nil }
            guard let text = value.stringValue else { throw .badRequest("'\(key)' must be a string") }
            return text
        }
        if let kind = try string("kind") {
            guard let parsed = SubscriberKind(rawValue: kind) else {
                throw .badRequest("unknown kind '\(kind.prefix(64))': use mobile, huawei, apns, webhook or webpush")
            }
            request.kind = parsed
        }
        try parseWebhookFields(body, into: &request)
        if let mode = try string("mode") {
            guard let parsed = SubscriptionMode(rawValue: mode) else {
                throw .badRequest("unknown mode '\(mode.prefix(64))': use noData, value or childEvent")
            }
            request.mode = parsed
        }
        if let path = try string("path") {
            do {
                request.path = try DataPath(path)
            } catch {
                throw .badRequest(error.description)
            }
        }
        // Without a kind (a PUT naming an existing subscription), a context given as an object, or as JSON text of one,
        // is a browser's subscription: no device id is an object.
        if let value = body["context"], value != .null,
            request.kind == .webpush || (request.kind == nil && (value.objectValue != nil || value.stringValue?.utf8.first == UInt8(ascii: "{")))
        {
            do {
                request.context = try BrowserSubscription.parse(value).token
            } catch {
                throw .badRequest(error.message)
            }
        } else if request.kind != .webhook, request.destination == nil, let context = try string("context") {
            guard !context.isEmpty else { throw .badRequest("'context' (the device's push token) must not be empty") }
            try validateDeviceID(context)
            request.context = request.kind == .apns ? try apnsDeviceToken(context) : context
        }
        if let format = try string("format") {
            guard let parsed = NotificationFormat(rawValue: format) else {
                throw .badRequest("unknown format '\(format.prefix(64))': use v1 or v2")
            }
            request.format = parsed
        }
        if let value = body["expirationTimestampSeconds"], value != .null {
            guard case .number(let lexeme) = value, let seconds = Int64(lexeme), seconds >= 0 else {
                throw .badRequest("'expirationTimestampSeconds' must be a non-negative integer (seconds since the epoch)")
            }
            request.expirationTimestampSeconds = seconds
        }
        if let value = body["filters"], value != .null {
            do {
                request.filters = try SubscriptionFilters.parse(value)
            } catch {
                throw .badRequest(error.description)
            }
        }
        request.encryption = try encryptionUpdate(body)
        return request
    }
}

extension V2Routes {
    /// An APNs device token as the app got it from `registerForRemoteNotifications`, in hex: an even number of hex
    /// digits, at most 200 (32 bytes today; Apple says the length may grow), stored in lowercase so that one device is
    /// one subscription however its token was written.
    static func apnsDeviceToken(_ context: String) throws(APIError) -> String {
        let digits = context.utf8
        let isHex = digits.allSatisfy { byte in
            (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
        }
        guard isHex, digits.count % 2 == 0, digits.count <= 200 else {
            throw .badRequest("an apns 'context' is the device token in hex: an even number of hex digits, at most 200")
        }
        return context.lowercased()
    }

    /// The longest webhook `destination` (bytes) and `context` (bytes) accepted.
    static let maximumDestinationLength = 2048
    static let maximumWebhookContextLength = 1024

    /// `destination` (webhook only: an `https://` URL, checked by ``WebhookURL``) and a webhook's `context`
    /// (free text, any Unicode, at most 1024 bytes).
    static func parseWebhookFields(_ body: [ExactString: JSONValue], into request: inout V2PartialRequest) throws(APIError) {
        if let value = body["destination"], value != .null {
            guard let text = value.stringValue else { throw .badRequest("'destination' must be a string") }
            guard request.kind == nil || request.kind == .webhook else { throw .badRequest("'destination' is only for kind 'webhook'") }
            guard text.utf8.count <= maximumDestinationLength else {
                throw .badRequest("'destination' is longer than \(maximumDestinationLength) bytes")
            }
            do {
                _ = try WebhookURL(text)
            } catch {
                throw .badRequest("'destination': \(error.description)")
            }
            request.destination = text
        }
        if request.kind == .webhook || request.destination != nil, let value = body["context"], value != .null {
            guard let text = value.stringValue else { throw .badRequest("'context' must be a string") }
            guard text.utf8.count <= maximumWebhookContextLength else {
                throw .badRequest("a webhook's 'context' is longer than \(maximumWebhookContextLength) bytes")
            }
            request.context = text
        }
    }
}

/// The app, uid and (for items) id of a v2 call.
struct V2Target {
    var app: String
    var uid: String
    var id: String

    init(_ apiPath: APIPath, withID: Bool) throws(APIError) {
        let parts = apiPath.segments
        // ["", "datasync", "v2", app, "subscriptions", uid, id?], decoded
        guard parts.count == (withID ? 7 : 6), !parts[3].isEmpty, !parts[5].isEmpty
        else { throw .badRequest("expected /datasync/v2/{app}/subscriptions/{uid}\(withID ? "/{id}" : "")") }
        self.app = parts[3]
        self.uid = parts[5]
        self.id = withID ? parts[6] : ""
        if withID && id.isEmpty { throw .badRequest("empty subscription id") }
    }

    func location(id: String) -> String {
        func escape(_ text: String) -> String {
            text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? text
        }
        return "/datasync/v2/\(escape(app))/subscriptions/\(escape(uid))/\(escape(id))"
    }
}
