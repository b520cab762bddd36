// swift-tools-version:6.1
// libFuzzer targets over the gateway's parsers and decoders of outside input (issue 10). A package of its own,
// like Benchmarks/, because every module of it, the main package's libraries included, is compiled with
// `-sanitize=fuzzer` (coverage-guided) and linked against libFuzzer's `main`; scripts/fuzz builds and runs them:
//   scripts/fuzz                      # every target, 60 s each (FUZZ_SECONDS), seeds from Fuzz/Corpus/<target>
//   scripts/fuzz FuzzJWT              # one target
import PackageDescription

// The main package's identity is the name of its directory (a clone may be named anything).
let gateway = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "PushGateway")

let package = Package(
    name: "PushGatewayFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: "..")],
    targets: [
        // libFuzzer's driver, declared for Swift (see include/CFuzzDriver.h).
        .target(name: "CFuzzDriver"),
        // CompactJSON: JSONParser.parse, and the writer's round trip.
        .executableTarget(name: "FuzzJSON", dependencies: ["CFuzzDriver", .product(name: "CompactJSON", package: gateway)]),
        // EventDecoding: EventDecoder.decode(value:contentType:key:) (protobuf and its JSON mapping).
        .executableTarget(name: "FuzzEventDecoder", dependencies: ["CFuzzDriver", .product(name: "EventDecoding", package: gateway)]),
        // PushCore: StateRecord.decode (subscriptions, shadows, retries) and replaying the record into an index.
        .executableTarget(name: "FuzzStateRecord", dependencies: ["CFuzzDriver", .product(name: "PushCore", package: gateway)]),
        // Auth: JWTVerifier.verify on raw tokens, and on correctly signed tokens of fuzzed header and claims.
        .executableTarget(
            name: "FuzzJWT",
            dependencies: [
                "CFuzzDriver",
                .product(name: "Auth", package: gateway), .product(name: "SSLCrypto", package: gateway),
                .product(name: "CompactJSON", package: gateway),
            ]),
        // Rules: ReadRules.parse (documents, and bare `.read` expressions) and canRead.
        .executableTarget(
            name: "FuzzRules",
            dependencies: ["CFuzzDriver", .product(name: "Rules", package: gateway), .product(name: "CompactJSON", package: gateway)]),
    ]
)
