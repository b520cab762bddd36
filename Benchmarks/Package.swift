// swift-tools-version:6.1
// Micro-benchmarks of the hot paths (ordo-one/benchmark) and a memory probe. A package of its own so the
// project's build and CI do not compile the benchmark framework.
//   cd Benchmarks && swift package --disable-sandbox benchmark
//   cd Benchmarks && swift run -c release SubscriptionMemory 1000000
import PackageDescription

let package = Package(
    name: "PushGatewayBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "PushCoreBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "PushCore", package: "main"),
                .product(name: "PushFormats", package: "main"),
                .product(name: "JOSE", package: "main"),
            ],
            path: "Benchmarks/PushCoreBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "SubscriptionMemory",
            dependencies: [.product(name: "PushCore", package: "main")],
            path: "Sources/SubscriptionMemory"
        ),
    ]
)
