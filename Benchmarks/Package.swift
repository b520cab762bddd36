// swift-tools-version:6.1
// Micro-benchmarks of the hot paths (ordo-one/benchmark) and a memory probe. A package of its own so the
// project's build and CI do not compile the benchmark framework.
//   cd Benchmarks && swift package --disable-sandbox benchmark
//   cd Benchmarks && swift run -c release SubscriptionMemory 1000000
//   python3 Benchmarks/load-test.py --rate 5000 --seconds 20   (builds and uses LoadFakeFCM, see README.md)
import PackageDescription

let package = Package(
    name: "PushGatewayBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
    ],
    targets: [
        .executableTarget(
            name: "PushCoreBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "PushCore", package: "main"),
                .product(name: "PushFormats", package: "main"),
                .product(name: "JOSE", package: "main"),
                .product(name: "SSLCrypto", package: "main"),
                .product(name: "WebPush", package: "main"),
            ],
            path: "Benchmarks/PushCoreBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "SubscriptionMemory",
            dependencies: [.product(name: "PushCore", package: "main")],
            path: "Sources/SubscriptionMemory"
        ),
        // A fast fake FCM (h2c) for the end-to-end load test (load-test.py): counts sends and measures
        // produce → provider-request latency from the `ts` the load generator puts in each value.
        .executableTarget(
            name: "LoadFakeFCM",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            path: "Sources/LoadFakeFCM"
        ),
    ]
)
