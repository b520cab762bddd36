import Benchmark
import JOSE
import PushCore
import PushFormats
import SSLCrypto

/// The cost per notification of a device key (issue 20): `ECDH-ES+A256KW` draws an ephemeral P-256 key per message
/// (the price of forward secrecy on the sending side: the gateway keeps nothing that could open a message once it
/// is sent), derives Z by ECDH with the device's key, the KEK by the Concat KDF, and wraps a random CEK. Compared
/// with the app-key JWE of `v2PayloadBenchmarks` (same event, same sizes).
func deviceEncryptionBenchmarks() {
    let value = (try? JSONParser.parse(hundredByteValueJSON)) ?? .null
    let path = DataPath(validatedSegments: ["users", "u42", "inbox"])
    let subscriptionID = "sub-" + String(repeating: "0123456789abcdef", count: 2)

    let device: ECPrivateKey
    let encryption: DeviceEncryption
    do {
        device = try ECPrivateKey()
        let point = try device.publicKey.coordinates
        encryption = try DeviceKey.parse(
            .object([
                "alg": .string("ECDH-ES+A256KW"),
                "jwk": .object([
                    "kty": .string("EC"), "crv": .string("P-256"), "x": .string(Base64URL.encode(point.x)),
                    "y": .string(Base64URL.encode(point.y)), "kid": .string("phone-1"),
                ]),
            ]))
    } catch {
        fatalError("device key: \(error)")
    }
    let prepared: JWEKey
    do {
        prepared = try DeviceKey.jweKey(encryption)
    } catch {
        fatalError("device key: \(error)")
    }

    // What the gateway does per notification: the JWE key made from the subscription's JWK, then the payload.
    Benchmark("v2 payload: device key ECDH-ES+A256KW + A256GCM (key read from the JWK per message)") { benchmark in
        for _ in benchmark.scaledIterations {
            let key = try DeviceKey.jweKey(encryption)
            let payload = try V2Payload.build(app: "toto", path: path, subscriptionID: subscriptionID, content: .value(value), key: key)
            blackHole(payload?.jsonBytes())
        }
    }
    Benchmark("v2 payload: device key ECDH-ES+A256KW + A256GCM (key prepared once)") { benchmark in
        for _ in benchmark.scaledIterations {
            let payload = try V2Payload.build(
                app: "toto", path: path, subscriptionID: subscriptionID, content: .value(value), key: prepared)
            blackHole(payload?.jsonBytes())
        }
    }

    // Its parts.
    Benchmark("ECDH-ES part: ephemeral P-256 key generation") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try ECPrivateKey())
        }
    }
    let ephemeral = (try? ECPrivateKey()) ?? device
    let peer = device.publicKey
    Benchmark("ECDH-ES part: ECDH shared secret Z") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try ephemeral.sharedSecret(with: peer))
        }
    }
    let z = (try? ephemeral.sharedSecret(with: peer)) ?? []
    Benchmark("ECDH-ES part: Concat KDF (SSKDF, SHA-256, 256 bits)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try ConcatKDF.sha256(z: z, algorithmID: "ECDH-ES+A256KW", keyBits: 256))
        }
    }
    Benchmark("ECDH-ES part: the ephemeral public key's coordinates (for epk)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try ephemeral.publicKey.coordinates)
        }
    }
    Benchmark("ECDH-ES part: device public key from its JWK (x, y: decode, on-curve check)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try DeviceKey.jweKey(encryption))
        }
    }
}
