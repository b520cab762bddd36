import Foundation
import GatewayLogging
import Logging
import ServiceLifecycle
import SSLCrypto
import Synchronization
import Yams

/// Keeps every app's settings current: the `apps` of the main configuration, overridden by one file per app
/// in `appSettings.directory` (`<app>.yaml`, `.yml` or `.json`; hidden entries such as a ConfigMap's `..data`
/// are skipped). The directory is re-read every `appSettings.reloadSeconds`; a file whose content (or whose
/// FCM service account file) changed is parsed and compiled again.
///
/// A file that does not parse or validate is refused with an error log line naming the file and the reason,
/// and the app keeps its last good settings. A removed file makes the app unknown again (the API answers
/// `namespace_does_not_exist`, events are skipped) but keeps its subscriptions in the state topic: a mistaken
/// deletion of a settings file must not lose them.
final class AppSettingsReloader: Service, Sendable {
    private struct Entry: Sendable {
        var fingerprint: String
        /// The FCM service account file the settings named when last parsed ("" for none).
        var accountFile: String
    }

    private let inline: [String: AppSettings]
    private let source: AppSettingsSource
    private let profiles: AppProfiles
    private let builder: AppProfileBuilder
    private let metrics: GatewayMetrics
    private let board: AppStatusBoard?
    private let logger: Logger
    private let onChange: @Sendable ([String]) -> Void
    private let files = Mutex<[String: Entry]>([:])

    init(
        inline: [String: AppSettings], source: AppSettingsSource, profiles: AppProfiles, builder: AppProfileBuilder,
        metrics: GatewayMetrics, board: AppStatusBoard? = nil, logger: Logger, onChange: @escaping @Sendable ([String]) -> Void
    ) {
        self.board = board
        self.inline = inline
        self.source = source
        self.profiles = profiles
        self.builder = builder
        self.metrics = metrics
        self.logger = logger
        self.onChange = onChange
    }

    /// Applies the inline apps, then the directory. Errors in the main configuration's apps are fatal (the
    /// configuration was validated); errors in a file only refuse that file.
    func loadInitial() throws {
        for (name, settings) in inline.sorted(by: { $0.key < $1.key }) {
            do {
                profiles.set(name, try builder.build(name: name, settings: settings, previous: nil))
                board?.settingsLoaded(app: name, version: "inline", source: "main configuration")
            } catch {
                throw ConfigurationError("apps.\(name): \(error.description)")
            }
        }
        _ = reload()
    }

    func run() async throws {
        // A service that returns stops the whole group: without a directory, just wait for shutdown.
        guard !source.directory.isEmpty else { return try await gracefulShutdown() }
        logger.info("watching app settings", metadata: [LoggingKeys.directory: "\(source.directory)"])
        while !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(self.source.reloadSeconds)) }
            } catch {
                return
            }
            let changed = reload()
            if !changed.isEmpty { onChange(changed) }
        }
    }

    /// Re-reads the directory; returns the apps whose settings changed.
    func reload() -> [String] {
        guard !source.directory.isEmpty else { return [] }
        let found: [String: URL]
        do {
            found = try settingsFiles()
        } catch {
            logger.error(
                "cannot list the app settings directory; settings stay as they are",
                metadata: [LoggingKeys.directory: "\(source.directory)", LoggingKeys.error: "\(error.localizedDescription)"])
            return []
        }
        var changed: [String] = []
        let previous = files.withLock { $0 }
        for (app, url) in found.sorted(by: { $0.key < $1.key }) {
            guard let bytes = try? Data(contentsOf: url) else {
                logger.error("cannot read app settings file", metadata: [LoggingKeys.file: "\(url.path)"])
                continue
            }
            let fingerprint = self.fingerprint(bytes, accountFile: previous[app]?.accountFile ?? "")
            if previous[app]?.fingerprint == fingerprint { continue }
            let current = profiles.profile(app)
            do {
                let settings: AppSettings
                do {
                    settings = try YAMLDecoder().decode(AppSettings.self, from: String(decoding: bytes, as: UTF8.self))
                } catch {
                    let unparsed = self.fingerprint(bytes, accountFile: "")
                    files.withLock { $0[app] = Entry(fingerprint: unparsed, accountFile: "") }
                    // Never the error's own text: Yams quotes the offending line, which may hold a secret.
                    throw ConfigurationError(SettingsFileError.describe(error, file: url.path))
                }
                // Fingerprinted with the account file these settings name, so a rotated Secret is noticed.
                let account = settings.fcmServiceAccountFile
                files.withLock {
                    $0[app] = Entry(fingerprint: self.fingerprint(bytes, accountFile: account), accountFile: account)
                }
                profiles.set(app, try builder.build(name: app, settings: settings, previous: current))
                board?.settingsLoaded(app: app, version: String(fingerprint.prefix(16)), source: url.path)
                metrics.appSettingsLoaded(result: "loaded")
                logger.notice(
                    "app settings loaded",
                    metadata: [LoggingKeys.app: "\(app)", LoggingKeys.file: "\(url.path)", LoggingKeys.enabled: "\(settings.enabled)"])
                changed.append(app)
            } catch {
                board?.settingsRefused(app: app, file: url.path, reason: "\(error)")
                metrics.appSettingsLoaded(result: "refused")
                logger.error(
                    "app settings refused; the last good settings stay in force",
                    metadata: [
                        LoggingKeys.app: "\(app)", LoggingKeys.file: "\(url.path)", LoggingKeys.error: "\(error)",
                        LoggingKeys.settingsInForce: "\(current == nil ? "none (app not served)" : "previous")",
                    ])
            }
        }
        for app in previous.keys where found[app] == nil {
            files.withLock { $0[app] = nil }
            let fallback = inline[app].flatMap { try? builder.build(name: app, settings: $0, previous: nil) }
            profiles.set(app, fallback)
            metrics.appSettingsLoaded(result: "removed")
            logger.warning(
                "app settings file removed: the app is no longer served (its subscriptions are kept)",
                metadata: [LoggingKeys.app: "\(app)"])
            changed.append(app)
        }
        return changed
    }

    private func settingsFiles() throws -> [String: URL] {
        let directory = URL(fileURLWithPath: source.directory, isDirectory: true)
        var result: [String: URL] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: source.directory) where !name.hasPrefix(".") {
            let url = directory.appendingPathComponent(name)
            let ext = url.pathExtension
            guard ["yaml", "yml", "json"].contains(ext) else { continue }
            let app = url.deletingPathExtension().lastPathComponent
            guard !app.isEmpty else { continue }
            result[app] = url
        }
        return result
    }

    /// The file's content plus the content of the FCM service account file it named when last parsed (a
    /// rotated Secret changes the fingerprint too). Files are not parsed just to be fingerprinted.
    private func fingerprint(_ bytes: Data, accountFile: String) -> String {
        var material = Array(bytes)
        if !accountFile.isEmpty, let account = try? Data(contentsOf: URL(fileURLWithPath: accountFile)) {
            material.append(0)
            material.append(contentsOf: account)
        }
        return Base64URL.encode(SHA256.hash(material))
    }
}
