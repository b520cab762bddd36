import CompactJSON
import GatewayCore
import PushCore
import SSLCrypto

/// One event of an app's event hook (docs/PAYLOADS.md, "Event hook"): what happened to one subscription, as the
/// JSON body of a Standard Webhooks message, and its `webhook-id`.
///
/// The body is built once, when the end is reported (its `timestamp` is then), so every attempt sends the same
/// bytes under the same id. Members in this order: `type`, `timestamp`, `data` { `app`, `id`, `uid`, `kind`,
/// `mode`, `path`, `format`, `context`, [`destination`], then by type: `reason`; or `provider` and, when the
/// subscription was being revoked, `revocation` }.
struct EventHookEvent: Sendable, Equatable {
    /// `subscription.revoked`, `subscription.expired`, `subscription.token_dead`.
    let type: String
    /// The `webhook-id`: `evt_` and 22 characters of a hash of the body.
    let id: String
    let body: [UInt8]

    init(_ ended: EndedSubscription, at time: Double) {
        let subscription = ended.subscription
        let subscriber = subscription.subscriber
        var json = JSONStreamWriter(reservingCapacity: 512)
        let type: String
        switch ended.cause {
        case .revoked(.expired): type = "subscription.expired"
        case .revoked: type = "subscription.revoked"
        case .tokenDead: type = "subscription.token_dead"
        }
        json.raw("{\"type\":")
        json.string(type)
        json.raw(",\"timestamp\":")
        json.string(Self.timestamp(time))
        json.raw(",\"data\":{\"app\":")
        json.string(ended.app)
        json.raw(",\"id\":")
        json.string(SubscriptionID.make(app: ended.app, path: subscription.path, subscriber: subscriber))
        json.raw(",\"uid\":")
        if let uid = subscriber.uid ?? subscription.settings.authUID { json.string(uid) } else { json.raw("null") }
        json.raw(",\"kind\":")
        json.string(subscriber.kind.rawValue)
        json.raw(",\"mode\":")
        json.string(subscription.settings.mode.rawValue)
        json.raw(",\"path\":")
        json.string(subscription.path.description)
        json.raw(",\"format\":")
        json.string(subscription.settings.format.rawValue)
        json.raw(",\"context\":")
        if let browser = subscriber.webPushParts {
            // A browser's subscription, as the API shows it.
            json.raw("{\"endpoint\":")
            json.string(String(browser.endpoint))
            json.raw(",\"keys\":{\"p256dh\":")
            json.string(String(browser.p256dh))
            json.raw(",\"auth\":")
            json.string(String(browser.auth))
            json.raw("}}")
        } else {
            json.string(String(subscriber.context))
        }
        if subscriber.kind == .webhook {
            json.raw(",\"destination\":")
            json.string(String(subscriber.destination))
        }
        switch ended.cause {
        case .revoked(let reason):
            if reason != .expired {
                json.raw(",\"reason\":")
                json.string(reason.rawValue)
            }
        case .tokenDead(let answer, let revoking):
            json.raw(",\"provider\":{\"name\":")
            json.string(answer.provider)
            json.raw(",\"status\":")
            if let status = answer.httpStatus { json.integer(status) } else { json.raw("null") }
            json.raw(",\"code\":")
            json.string(answer.code)
            json.raw(",\"message\":")
            if let message = answer.message { json.string(message) } else { json.raw("null") }
            json.raw("}")
            if let revoking {
                json.raw(",\"revocation\":")
                json.string(revoking.rawValue)
            }
        }
        json.raw("}}")
        self.type = type
        self.body = json.bytes
        self.id = "evt_" + Base64URL.encode(SHA256.hash(Array("pushgateway-event-hook".utf8) + json.bytes).prefix(16))
    }

    /// RFC 3339 in UTC with milliseconds: `2026-11-26T05:40:00.123Z`.
    static func timestamp(_ seconds: Double) -> String {
        let millis = Int64((max(0, seconds) * 1000).rounded(.down))
        let days = millis / 86_400_000
        let inDay = millis % 86_400_000
        // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
        let z = days + 719_468
        let era = z / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(inDay / 3_600_000, 2)):\(pad(inDay / 60_000 % 60, 2)):"
            + "\(pad(inDay / 1000 % 60, 2)).\(pad(inDay % 1000, 3))Z"
    }
}
