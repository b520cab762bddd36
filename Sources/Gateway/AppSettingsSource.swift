import CompactJSON
import Foundation

/// Where per-app settings files are read from, and how often they are re-read.
public struct AppSettingsSource: Decodable, Sendable, Equatable {
    /// A directory of `<app>.yaml` / `<app>.yml` / `<app>.json` files (a mounted ConfigMap/Secret); empty: none.
    public var directory = ""
    public var reloadSeconds = 5.0

    public init() {}

    enum CodingKeys: String, CodingKey { case directory, reloadSeconds }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        directory = try c.decodeIfPresent(String.self, forKey: .directory) ?? ""
        reloadSeconds = try c.decodeIfPresent(Double.self, forKey: .reloadSeconds) ?? 5
    }
}
