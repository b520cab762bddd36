// swift-tools-version:6.1
import PackageDescription

// librdkafka is compiled against Debian's headers but loaded at run time from the project-local
// `.deps/lib/librdkafka.so.1` (librdkafka >= 2.1, see scripts/setup). The binaries live in
// `.build/<triple>/<config>/`, so `$ORIGIN/../../../.deps/lib` is the project's `.deps/lib`.
let rdkafkaRuntimePath: [LinkerSetting] = [
    .unsafeFlags(["-Xlinker", "-rpath", "-Xlinker", "$ORIGIN/../../../.deps/lib"])
]

// Swift 6 language mode (tools 6.1) gives complete strict concurrency checking.
let strict: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny")]

let package = Package(
    name: "PushGateway",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "push-gateway", targets: ["PushGatewayCLI"]),
        .library(name: "PushCore", targets: ["PushCore"]),
        // For the benchmarks package (Benchmarks/).
        .library(name: "PushFormats", targets: ["PushFormats"]),
        .library(name: "JOSE", targets: ["JOSE"]),
        .library(name: "EventDecoding", targets: ["EventDecoding"]),
        // For the fuzzers (Fuzz/).
        .library(name: "CompactJSON", targets: ["CompactJSON"]),
        .library(name: "Auth", targets: ["Auth"]),
        .library(name: "Rules", targets: ["Rules"]),
        .library(name: "SSLCrypto", targets: ["SSLCrypto"]),
        .library(name: "WebPush", targets: ["WebPush"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", exact: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", exact: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", exact: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-protobuf", exact: "1.39.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1"),
        .package(url: "https://github.com/jpsim/Yams", exact: "6.2.2"),
        // Already in the graph through Hummingbird; named for the embedded broker's fixed port (BrokerPortForwarder).
        .package(url: "https://github.com/apple/swift-nio", exact: "2.101.3"),
        .package(url: "https://github.com/apple/swift-collections", exact: "1.6.0"),
    ],
    targets: [
        // C libraries, each behind one module map.
        .systemLibrary(name: "CRdKafka", pkgConfig: "rdkafka", providers: [.apt(["librdkafka-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .target(name: "CCurlShims", dependencies: ["CCurl"]),

        // Byte-exact compact JSON (values, parser, writers) shared by the domain, the providers and JOSE.
        .target(name: "CompactJSON", swiftSettings: strict),
        // The metadata keys of every log line (`LoggingKeys`).
        .target(name: "GatewayLogging", swiftSettings: strict),
        // Pure domain: paths, subscriptions, matching, shadows, payloads, size rules. No I/O.
        .target(
            name: "PushCore", dependencies: ["CompactJSON", .product(name: "DequeModule", package: "swift-collections")],
            swiftSettings: strict),
        // The partition as a state machine: inputs in, actions out; no I/O, no locks, no clock.
        .target(name: "GatewayCore", dependencies: ["PushCore", "CompactJSON"], swiftSettings: strict),
        // Generated from proto/ (see scripts/generate-proto); committed.
        .target(name: "PushProto", dependencies: [.product(name: "SwiftProtobuf", package: "swift-protobuf")]),
        // Change records (protobuf or its JSON mapping) into validated events. Pure: no Kafka, no I/O.
        .target(
            name: "EventDecoding",
            dependencies: ["PushCore", "PushProto", .product(name: "SwiftProtobuf", package: "swift-protobuf")],
            swiftSettings: strict),

        // One thin Swift wrapper per C library.
        .target(
            name: "KafkaClient",
            dependencies: [
                "CRdKafka", "GatewayLogging", .product(name: "Logging", package: "swift-log"),
                // The timer service's deadlines (`Timers`).
                .product(name: "HeapModule", package: "swift-collections"),
            ],
            swiftSettings: strict,
            linkerSettings: rdkafkaRuntimePath
        ),
        .target(
            name: "CurlHTTP",
            dependencies: [
                "CCurl", "CCurlShims", "GatewayLogging", .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strict
        ),
        .target(name: "SSLCrypto", dependencies: ["COpenSSL"], swiftSettings: strict),

        // Web Push (RFC 8291 message encryption, RFC 8292 VAPID) over SSLCrypto.
        .target(name: "WebPush", dependencies: ["SSLCrypto", "CompactJSON"], swiftSettings: strict),

        // JOSE compact serialisations (JWS `none`, JWE dir/A256KW/RSA-OAEP-256 + A256GCM) over SSLCrypto.
        .target(name: "JOSE", dependencies: ["SSLCrypto", "CompactJSON"], swiftSettings: strict),

        // Auth tokens: JWT (HS256, RS256, ES256) verification over SSLCrypto.
        .target(name: "Auth", dependencies: ["SSLCrypto", "CompactJSON"], swiftSettings: strict),
        // Firebase-style read rules (`.read` per path pattern), compiled and evaluated.
        .target(name: "Rules", dependencies: ["CompactJSON"], swiftSettings: strict),
        // Notification formats beyond v1: the v2 envelope (JWS/JWE), app encryption keys, the decoder.
        .target(name: "PushFormats", dependencies: ["PushCore", "JOSE", "SSLCrypto", "CompactJSON"], swiftSettings: strict),

        // Push providers (FCM HTTP v1 now; HMS later) over CurlHTTP + SSLCrypto. No Foundation on the send path.
        .target(
            name: "Providers",
            dependencies: [
                "CompactJSON", "CurlHTTP", "SSLCrypto", "GatewayLogging", "PushCore", "WebPush",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // The REST API (Hummingbird routes), independent of Kafka.
        .target(
            name: "GatewayAPI",
            dependencies: [
                "PushCore",
                // The device keys of v2 subscriptions are checked where the request is read.
                "PushFormats",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                // The request context's peer address, the server's request deadline handler.
                .product(name: "NIOCore", package: "swift-nio"),
                // The request line as received (origin-form targets only).
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            // The document served at /openapi.json (docs/openapi.json links to it).
            resources: [.embedInCode("Resources/openapi.json")],
            swiftSettings: strict
        ),

        // The embedded defaults: an in-process broker on a fixed port, a stand-in upstream answering snapshot
        // requests, the newcomer's banner and the demo app's tokens.
        .target(
            name: "GatewayEmbedded",
            dependencies: [
                "PushCore", "PushProto", "EventDecoding", "KafkaClient", "SSLCrypto", "GatewayLogging",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),

        // Assembly: configuration, the consume → match → send pipeline, services, metrics.
        .target(
            name: "Gateway",
            dependencies: [
                "PushCore", "GatewayCore", "PushProto", "EventDecoding", "KafkaClient", "Providers", "GatewayAPI", "JOSE", "Auth", "Rules", "PushFormats",
                "SSLCrypto", "CurlHTTP", "GatewayEmbedded", "GatewayLogging", "WebPush",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "PushGatewayCLI",
            dependencies: [
                "Gateway", "GatewayEmbedded", "GatewayLogging", "EventDecoding", "PushFormats", "JOSE", "Providers", "CurlHTTP",
                "SSLCrypto", "WebPush",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                // check-credentials reads an app's settings file as the gateway does.
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: strict,
            linkerSettings: rdkafkaRuntimePath
        ),

        // Helpers shared by the test targets.
        .target(name: "TestSupport", swiftSettings: strict),
        // The in-memory log that stands in for Kafka in the Swift tests of the gateway's services.
        .target(name: "GatewayTesting", dependencies: ["KafkaClient"], swiftSettings: strict),
        .testTarget(name: "PushCoreTests", dependencies: ["PushCore"]),
        .testTarget(name: "GatewayCoreTests", dependencies: ["GatewayCore", "PushCore", "CompactJSON"]),
        .testTarget(name: "EventDecodingTests", dependencies: ["EventDecoding", "PushCore", "PushProto"]),
        .testTarget(name: "JOSETests", dependencies: ["JOSE", "SSLCrypto", "CompactJSON", "TestSupport"]),
        .testTarget(name: "WebPushTests", dependencies: ["WebPush", "SSLCrypto", "CompactJSON", "TestSupport"]),
        .testTarget(name: "AuthTests", dependencies: ["Auth", "SSLCrypto", "CompactJSON"], exclude: ["make_fixtures.py"]),
        .testTarget(name: "RulesTests", dependencies: ["Rules", "CompactJSON"]),
        .testTarget(name: "PushFormatsTests", dependencies: ["PushFormats", "PushCore", "JOSE", "SSLCrypto", "CompactJSON"]),
        .testTarget(
            name: "ProvidersTests",
            dependencies: [
                "Providers", "CurlHTTP", "SSLCrypto", "PushCore", "TestSupport", "WebPush", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "GatewayAPITests",
            dependencies: [
                "GatewayAPI", "Gateway", "GatewayEmbedded", "Providers", "PushProto", "SSLCrypto", "Auth", "CurlHTTP", "KafkaClient", "GatewayTesting",
                "EventDecoding", "WebPush", "PushFormats",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Yams", package: "Yams"),
            ],
            linkerSettings: rdkafkaRuntimePath
        ),
    ]
)
