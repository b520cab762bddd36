import CompactJSON
import Foundation
import Providers
import PushCore
import Synchronization

/// What operators need to know about each app (SPEC §8, `GET /admin/apps/{app}`): which settings are in force
/// and since when, the last settings file refused and why, and each provider project's health (last success,
/// last error and its class, errors that are our fault). Fed by the settings reloader and the delivery service;
/// read by ``AdminService``.
final class AppStatusBoard: Sendable {
    struct SettingsStatus: Sendable {
        var version: String
        var source: String
        var loadedAt: Double
        var refused: (file: String, reason: String, at: Double)?
    }

    struct ProviderStatus: Sendable {
        var lastSuccessAt: Double?
        var lastError: (reason: String, kind: String, at: Double)?
        var ourFaultErrors = 0
        var tokenDeadErrors = 0
        var retryableErrors = 0
        var rejectedErrors = 0
    }

    private struct Entry {
        var settings: SettingsStatus?
        var providers: [String: ProviderStatus] = [:]
    }

    private let entries = Mutex<[ExactString: Entry]>([:])
    private let clock: @Sendable () -> Double

    init(clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) { self.clock = clock }

    func settingsLoaded(app: String, version: String, source: String) {
        let now = clock()
        entries.withLock { entries in
            let refused = entries[ExactString(app)]?.settings?.refused
            entries[ExactString(app), default: Entry()].settings = SettingsStatus(
                version: version, source: source, loadedAt: now, refused: refused)
        }
    }

    func settingsRefused(app: String, file: String, reason: String) {
        let now = clock()
        entries.withLock { entries in
            var entry = entries[ExactString(app), default: Entry()]
            if entry.settings == nil { entry.settings = SettingsStatus(version: "", source: "", loadedAt: 0) }
            entry.settings?.refused = (file, reason, now)
            entries[ExactString(app)] = entry
        }
    }

    /// `project` names the provider project (`fcm:<project id>`, `hms:<app id>`, `console`).
    func sent(app: String, project: String) {
        let now = clock()
        entries.withLock { $0[ExactString(app), default: Entry()].providers[project, default: ProviderStatus()].lastSuccessAt = now }
    }

    func failed(app: String, project: String, failure: DeliveryFailure) {
        let now = clock()
        entries.withLock { entries in
            var status = entries[ExactString(app), default: Entry()].providers[project, default: ProviderStatus()]
            status.lastError = (failure.reason, failure.classification.rawValue, now)
            switch failure.classification {
            case .ourFault: status.ourFaultErrors += 1
            case .tokenDead: status.tokenDeadErrors += 1
            case .retryable: status.retryableErrors += 1
            case .rejected: status.rejectedErrors += 1
            }
            entries[ExactString(app), default: Entry()].providers[project] = status
        }
    }

    /// The app's settings and providers as JSON (times in seconds since the epoch).
    func json(app: String) -> (settings: JSONValue, providers: JSONValue) {
        let entry = entries.withLock { $0[ExactString(app)] } ?? Entry()
        var settings: [ExactString: JSONValue] = [:]
        if let status = entry.settings {
            if !status.version.isEmpty {
                settings["version"] = .string(status.version)
                settings["source"] = .string(status.source)
                settings["loadedAt"] = Self.time(status.loadedAt)
            }
            if let refused = status.refused {
                settings["lastRefused"] = .object([
                    "file": .string(refused.file), "reason": .string(refused.reason), "at": Self.time(refused.at),
                ])
            }
        }
        var providers: [ExactString: JSONValue] = [:]
        for (project, status) in entry.providers {
            var document: [ExactString: JSONValue] = [
                "ourFaultErrors": .number(String(status.ourFaultErrors)),
                "tokenDeadErrors": .number(String(status.tokenDeadErrors)),
                "retryableErrors": .number(String(status.retryableErrors)),
                "rejectedErrors": .number(String(status.rejectedErrors)),
            ]
            if let at = status.lastSuccessAt { document["lastSuccessAt"] = Self.time(at) }
            if let error = status.lastError {
                document["lastError"] = .object(["reason": .string(error.reason), "class": .string(error.kind), "at": Self.time(error.at)])
            }
            providers[ExactString(project)] = .object(document)
        }
        return (.object(settings), .object(providers))
    }

    static func time(_ seconds: Double) -> JSONValue { .number(String(format: "%.3f", seconds)) }
}
