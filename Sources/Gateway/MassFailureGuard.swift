import Foundation
import Logging
import Providers
import PushCore
import Synchronization

/// What one provider project last answered for each device over a sliding window: reached, or refused as
/// invalid.
struct MassFailureGuard {
    static let window = 600.0
    static let maximumDevices = 100_000
    private var latest: [String: (time: Double, invalid: Bool)] = [:]

    mutating func record(token: String, invalid: Bool, now: Double) {
        latest[token] = (now, invalid)
        if latest.count > Self.maximumDevices {
            latest = latest.filter { $0.value.time >= now - Self.window }
        }
    }

    /// Records that `token` was refused as invalid and answers whether that can be believed about the device
    /// (``singleDeviceFailureIsCredible(now:)``).
    mutating func refusalIsCredible(token: String, now: Double) -> Bool {
        record(token: token, invalid: true, now: now)
        return singleDeviceFailureIsCredible(now: now)
    }

    /// True when an invalid-token answer can be believed to be about that device: the project reached some
    /// device recently, and at most half of the devices it answered for were last refused as invalid.
    func singleDeviceFailureIsCredible(now: Double) -> Bool {
        var reached = 0
        var refused = 0
        for (_, answer) in latest where answer.time >= now - Self.window {
            if answer.invalid { refused += 1 } else { reached += 1 }
        }
        return reached > 0 && refused <= reached
    }
}
