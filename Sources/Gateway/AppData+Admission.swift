import GatewayCore
import PushCore

/// The write-rate buckets an app keeps (``AppQuotas``): spending from them is the API's business.
extension AppData {
    /// What a write spends, by kind (``admitWrite(_:quotas:now:)``).
    enum WriteCost {
        /// An anonymous v1 write that changes state: the client's, the device's and the app's buckets.
        case anonymous(client: String, device: DeviceKey)
        /// An anonymous v1 DELETE that removes nothing: the client's bucket only.
        case anonymousNothing(client: String)
        /// A v1 write with a token: the uid's bucket.
        case user(uid: String)
    }

    /// Takes a token from every bucket `cost` names when each has one (nothing is taken otherwise); else the
    /// quota that refused (`client_rate`, `device_rate`, `anonymous_rate`, `user_rate`) and the seconds until
    /// all of them would admit. `now` in seconds, monotonic.
    func admitWrite(_ cost: WriteCost, quotas: AppQuotas, now: Double) -> (quota: String, retryAfter: Double)? {
        func table(_ table: inout RateTable?, rate: Double, burst: Int) {
            if table == nil || table?.rate != rate || table?.burst != Double(burst) {
                table = RateTable(rate: rate, burst: burst)
            }
        }
        switch cost {
        case .anonymous(let client, let device):
            table(&clientWrites, rate: quotas.clientWritesPerSecond, burst: quotas.clientWriteBurst)
            table(&deviceWrites, rate: quotas.deviceWritesPerSecond, burst: quotas.deviceWriteBurst)
            table(&anonymousWrites, rate: quotas.anonymousWritesPerSecond, burst: quotas.anonymousWriteBurst)
            let waits = [
                ("client_rate", clientWrites?.wait(ExactString(client), now: now) ?? 0),
                ("device_rate", deviceWrites?.wait(device, now: now) ?? 0),
                ("anonymous_rate", anonymousWrites?.wait(0, now: now) ?? 0),
            ]
            if let refused = waits.first(where: { $0.1 > 0 }) { return (refused.0, waits.map(\.1).max() ?? refused.1) }
            clientWrites?.take(ExactString(client), now: now)
            deviceWrites?.take(device, now: now)
            anonymousWrites?.take(0, now: now)
        case .anonymousNothing(let client):
            table(&clientWrites, rate: quotas.clientWritesPerSecond, burst: quotas.clientWriteBurst)
            if let wait = clientWrites?.wait(ExactString(client), now: now), wait > 0 { return ("client_rate", wait) }
            clientWrites?.take(ExactString(client), now: now)
        case .user(let uid):
            table(&userWrites, rate: quotas.userWritesPerSecond, burst: quotas.userWriteBurst)
            if let wait = userWrites?.wait(ExactString(uid), now: now), wait > 0 { return ("user_rate", wait) }
            userWrites?.take(ExactString(uid), now: now)
        }
        return nil
    }
}
