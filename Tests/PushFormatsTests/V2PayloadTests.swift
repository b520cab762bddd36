import CompactJSON
import JOSE
import PushCore
import SSLCrypto
import XCTest

@testable import PushFormats

final class V2PayloadTests: XCTestCase {
    // MARK: Fixtures

    private static let rsaA = Result { try RSAPrivateKey(generatingBits: 2048) }
    private static let rsaB = Result { try RSAPrivateKey(generatingBits: 2048) }

    private let path = DataPath(validatedSegments: ["a", "b"])
    private let jwsHeader = "eyJhbGciOiJub25lIn0"

    private func text(_ payload: DataPayload?) -> String? {
        payload.map { String(decoding: $0.jsonBytes(), as: UTF8.self) }
    }

    private func secret(_ seed: UInt8) -> [UInt8] { (0..<32).map { UInt8($0) &+ seed } }

    private func dirKey(_ kid: String = "kd", seed: UInt8 = 1) throws -> JWEKey { try JWEKey.dir(kid: kid, key: secret(seed)) }
    private func kwKey(_ kid: String = "kw", seed: UInt8 = 2) throws -> JWEKey { try JWEKey.a256kw(kid: kid, kek: secret(seed)) }
    private func rsaKey(_ kid: String = "kr", other: Bool = false) throws -> JWEKey {
        JWEKey.rsaOAEP256(kid: kid, privateKey: try (other ? Self.rsaB : Self.rsaA).get())
    }
    private func allKeys() throws -> [JWEKey] { [try dirKey(), try kwKey(), try rsaKey()] }

    /// The event JSON for `content` as text.
    private func event(
        _ content: NotificationContent, _ degrade: V2Event.Degrade = .full, app: String = "toto",
        path: DataPath? = nil, id: String = "sub-1"
    ) -> String {
        String(
            decoding: V2Event.bytes(app: app, path: path ?? self.path, subscriptionID: id, content: content, degrade: degrade),
            as: UTF8.self)
    }

    /// The unsecured v2 payload carrying `event`, byte for byte.
    private func unsecuredPayload(_ event: String) -> String {
        #"{"srv":"webcom","evt":""# + jwsHeader + "." + Base64URL.encode(Array(event.utf8)) + #".","ver":"v2"}"#
    }

    private func build(
        _ content: NotificationContent, key: JWEKey?, app: String = "toto", id: String = "sub-1"
    ) throws -> DataPayload {
        try XCTUnwrap(V2Payload.build(app: app, path: path, subscriptionID: id, content: content, key: key))
    }

    /// The event bytes inside `payload`, opened with JOSE.
    private func openedEvent(_ payload: DataPayload, keys: [JWEKey]) throws -> [UInt8] {
        let evt = try XCTUnwrap(payload["evt"])
        return try JOSE.decode(compact: evt, keys: { kid in keys.first { $0.headerKid == kid } })
    }

    private func openedJSON(_ payload: DataPayload, keys: [JWEKey]) throws -> JSONValue {
        try JSONParser.parse(try openedEvent(payload, keys: keys))
    }

    private let childChanges = ChildChanges(
        added: ["n": .object(["v": .number("1")])], removed: ["z", "b"], changed: ["c": .string("é\"")])

    // MARK: Event bytes, unsecured payloads

    func testNoDataPayloadIsByteExact() {
        XCTAssertEqual(event(.noData), #"{"t":"v","m":"noData","a":"toto","p":"/a/b","id":"sub-1"}"#)
        XCTAssertEqual(
            text(try V2Payload.build(app: "toto", path: path, subscriptionID: "sub-1", content: .noData, key: nil)),
            #"{"srv":"webcom","evt":"eyJhbGciOiJub25lIn0.eyJ0IjoidiIsIm0iOiJub0RhdGEiLCJhIjoidG90byIsInAiOiIvYS9iIiwiaWQiOiJzdWItMSJ9.","ver":"v2"}"#
        )
    }

    func testRevokePayloadIsByteExact() {
        XCTAssertEqual(
            event(.revoke(.tooBig), path: .root, id: "s"), #"{"t":"r","a":"toto","r":"too_big","p":"/","id":"s"}"#)
        XCTAssertEqual(
            text(try V2Payload.build(app: "toto", path: .root, subscriptionID: "s", content: .revoke(.tooBig), key: nil)),
            #"{"srv":"webcom","evt":"eyJhbGciOiJub25lIn0.eyJ0IjoiciIsImEiOiJ0b3RvIiwiciI6InRvb19iaWciLCJwIjoiLyIsImlkIjoicyJ9.","ver":"v2"}"#
        )
        for reason in RevocationReason.allCases {
            XCTAssertEqual(event(.revoke(reason)), #"{"t":"r","a":"toto","r":""# + reason.rawValue + #"","p":"/a/b","id":"sub-1"}"#)
        }
    }

    func testValueEvents() throws {
        let value = try JSONParser.parse(#"{"b":[1,2.50,"x/y"],"a":{"z":null,"y":true}}"#)
        let ok = #"{"t":"v","m":"value","a":"toto","v":{"a":{"y":true,"z":null},"b":[1,2.50,"x/y"]},"s":"OK","p":"/a/b","id":"sub-1"}"#
        XCTAssertEqual(event(.value(value)), ok)
        XCTAssertEqual(text(try build(.value(value), key: nil)), unsecuredPayload(ok))

        let notLoaded = #"{"t":"v","m":"value","a":"toto","s":"NotLoaded","p":"/a/b","id":"sub-1"}"#
        XCTAssertEqual(event(.value(nil)), notLoaded)
        XCTAssertEqual(event(.value(nil), .tooBig), notLoaded)
        XCTAssertEqual(text(try build(.value(nil), key: nil)), unsecuredPayload(notLoaded))

        XCTAssertEqual(event(.value(.null)), #"{"t":"v","m":"value","a":"toto","v":null,"s":"OK","p":"/a/b","id":"sub-1"}"#)
        XCTAssertEqual(event(.value(.string("s"))), #"{"t":"v","m":"value","a":"toto","v":"s","s":"OK","p":"/a/b","id":"sub-1"}"#)
        XCTAssertEqual(event(.value(value), .tooBig), #"{"t":"v","m":"value","a":"toto","s":"TooBig","p":"/a/b","id":"sub-1"}"#)
    }

    func testChildEventEvents() throws {
        let ok = #"{"t":"v","m":"childEvent","a":"toto","c":{"a":{"n":{"v":1}},"r":["b","z"],"c":{"c":"é\""}},"s":"OK","p":"/a/b","id":"sub-1"}"#
        let keys = #"{"t":"v","m":"childEvent","a":"toto","c":{"a":{"n":true},"r":["b","z"],"c":{"c":true}},"s":"OnlyKeys","p":"/a/b","id":"sub-1"}"#
        let tooBig = #"{"t":"v","m":"childEvent","a":"toto","c":{"a":{},"r":[],"c":{}},"s":"TooBig","p":"/a/b","id":"sub-1"}"#
        XCTAssertEqual(event(.childEvent(childChanges, keysOnly: false)), ok)
        XCTAssertEqual(event(.childEvent(childChanges, keysOnly: true)), keys)
        XCTAssertEqual(event(.childEvent(childChanges, keysOnly: false), .onlyKeys), keys)
        XCTAssertEqual(event(.childEvent(childChanges, keysOnly: false), .tooBig), tooBig)
        XCTAssertEqual(event(.childEvent(childChanges, keysOnly: true), .tooBig), tooBig)
        XCTAssertEqual(text(try build(.childEvent(childChanges, keysOnly: false), key: nil)), unsecuredPayload(ok))
        XCTAssertEqual(text(try build(.childEvent(childChanges, keysOnly: true), key: nil)), unsecuredPayload(keys))
        XCTAssertEqual(
            event(.childEvent(ChildChanges(), keysOnly: false)),
            #"{"t":"v","m":"childEvent","a":"toto","c":{"a":{},"r":[],"c":{}},"s":"OK","p":"/a/b","id":"sub-1"}"#)
    }

    func testStringsAreEscapedMinimally() throws {
        let path = DataPath(validatedSegments: ["é", "x y"])
        XCTAssertEqual(
            event(.noData, app: "a\"b\\c", path: path, id: "ü\n\u{1}"),
            #"{"t":"v","m":"noData","a":"a\"b\\c","p":"/é/x y","id":"ü\n\u0001"}"#)
    }

    // MARK: Envelope

    func testEnvelopeFieldOrderAndKid() throws {
        let plain = try build(.noData, key: nil)
        XCTAssertEqual(plain.fields.map(\.key), ["srv", "evt", "ver"])
        XCTAssertEqual(plain["srv"], "webcom")
        XCTAssertEqual(plain["ver"], "v2")
        XCTAssertEqual(plain["evt"]?.split(separator: ".", omittingEmptySubsequences: false).count, 3)

        for key in try allKeys() {
            let sealed = try build(.value(.string("x")), key: key)
            XCTAssertEqual(sealed.fields.map(\.key), ["srv", "kid", "evt", "ver"], key.algorithm.rawValue)
            XCTAssertEqual(sealed["srv"], "webcom")
            XCTAssertEqual(sealed["kid"], key.kid)
            XCTAssertEqual(sealed["ver"], "v2")
            let parts = try XCTUnwrap(sealed["evt"]).split(separator: ".", omittingEmptySubsequences: false)
            XCTAssertEqual(parts.count, 5)
            let header = try JSONParser.parse(try XCTUnwrap(Base64URL.decode(parts[0])))
            XCTAssertEqual(
                header, .object(["alg": .string(key.algorithm.rawValue), "enc": .string("A256GCM"), "kid": .string(key.kid)]))
            XCTAssertEqual(parts[1].isEmpty, key.algorithm == .dir)
        }
    }

    // MARK: Encryption

    func testEncryptedPayloadDecryptsToExactEventForEachAlgorithm() throws {
        let contents: [NotificationContent] = [
            .noData, .value(.object(["k": .string("v")])), .value(nil),
            .childEvent(childChanges, keysOnly: false), .revoke(.expired),
        ]
        for key in try allKeys() {
            for content in contents {
                let payload = try build(content, key: key)
                XCTAssertEqual(
                    try openedEvent(payload, keys: [key]),
                    V2Event.bytes(app: "toto", path: path, subscriptionID: "sub-1", content: content),
                    "\(key.algorithm.rawValue) \(content)")
            }
        }
    }

    func testEncryptionForAPublicOnlyRSAKey() throws {
        let privateKey = try Self.rsaA.get()
        let publicOnly = JWEKey.rsaOAEP256(kid: "kr", publicKey: privateKey.publicKey)
        let payload = try build(.noData, key: publicOnly)
        XCTAssertEqual(try openedEvent(payload, keys: [try rsaKey()]), Array(event(.noData).utf8))
    }

    func testArithmeticSizeEqualsEncryptedLength() throws {
        let keys = try allKeys() + [try dirKey("k\"é\u{1F600}\n"), try kwKey(String(repeating: "w", count: 70))]
        for key in [nil] + keys.map(Optional.some) {
            for length in Array(0..<40) + [500, 1000, 2000, 2900] {
                let content = NotificationContent.value(.string(String(repeating: "é", count: length / 2) + (length % 2 == 0 ? "" : "x")))
                let payload = try build(content, key: key)
                // The event actually sent (degraded to TooBig for the largest values).
                let eventLength = try openedEvent(payload, keys: keys).count
                let computed = V2Payload.envelopeSize(kid: key?.kid) + V2Payload.compactLength(eventLength: eventLength, key: key)
                XCTAssertEqual(payload.jsonBytes().count, computed, "\(key?.kid ?? "none") \(length)")
                XCTAssertEqual(payload.serializedSize, computed)
                XCTAssertEqual(try XCTUnwrap(payload["evt"]).utf8.count, V2Payload.compactLength(eventLength: eventLength, key: key))
                if let key {
                    XCTAssertEqual(
                        try XCTUnwrap(payload["evt"]).utf8.count, JWE.compactLength(payloadLength: eventLength, key: key))
                }
            }
        }
    }

    func testFreshIVPerMessage() throws {
        for key in try allKeys() {
            let first = try XCTUnwrap(try build(.value(.string("same")), key: key)["evt"])
            let second = try XCTUnwrap(try build(.value(.string("same")), key: key)["evt"])
            XCTAssertNotEqual(first, second, key.algorithm.rawValue)
            let firstParts = first.split(separator: ".", omittingEmptySubsequences: false)
            let secondParts = second.split(separator: ".", omittingEmptySubsequences: false)
            XCTAssertNotEqual(firstParts[2], secondParts[2], "IV reused for \(key.algorithm.rawValue)")
            XCTAssertNotEqual(firstParts[3], secondParts[3])
            if key.algorithm != .dir { XCTAssertNotEqual(firstParts[1], secondParts[1], "CEK reused") }
            let opened = try [first, second].map { try JOSE.decode(compact: $0, keys: { _ in key }) }
            XCTAssertEqual(opened[0], opened[1])
        }
    }

    // MARK: Size rules

    /// The event length that makes the payload exactly `size` bytes, nil when base64url skips that size.
    private func eventLength(payloadSize size: Int, key: JWEKey?) -> Int? {
        let overhead = V2Payload.envelopeSize(kid: key?.headerKid)
        return (0...size).first { overhead + V2Payload.compactLength(eventLength: $0, key: key) == size }
    }

    /// A key, among kids of growing length, for which payloads of exactly 4063 and 4064 bytes exist.
    private func boundaryKey(
        kids: [String] = ["k1", "k12", "k123", "k1234"], _ make: (String) throws -> JWEKey
    ) throws -> JWEKey {
        for kid in kids {
            let key = try make(kid)
            if eventLength(payloadSize: 4063, key: key) != nil, eventLength(payloadSize: 4064, key: key) != nil {
                return key
            }
        }
        throw XCTSkip("no kid reaches both 4063 and 4064")
    }

    /// `value` content whose full event is `length` bytes.
    private func valueContent(eventLength length: Int) -> NotificationContent {
        let base = event(.value(.string(""))).utf8.count
        return .value(.string(String(repeating: "x", count: length - base)))
    }

    /// childEvent content whose full event is `length` bytes (one added child with a long value).
    private func childContent(fullEventLength length: Int) -> NotificationContent {
        let base = event(.childEvent(ChildChanges(added: ["k": .string("")]), keysOnly: false)).utf8.count
        return .childEvent(ChildChanges(added: ["k": .string(String(repeating: "v", count: length - base))]), keysOnly: false)
    }

    /// childEvent content whose `OnlyKeys` event is `length` bytes (a long key) and whose full event is larger.
    private func keysContent(onlyKeysEventLength length: Int) -> NotificationContent {
        let big = JSONValue.string(String(repeating: "v", count: 300))
        let base = event(.childEvent(ChildChanges(added: ["": big], removed: ["gone"]), keysOnly: false), .onlyKeys).utf8.count
        return .childEvent(
            ChildChanges(added: [ExactString(String(repeating: "k", count: length - base)): big], removed: ["gone"]), keysOnly: false)
    }

    private func checkBoundaries(key: JWEKey?, file: StaticString = #filePath, line: UInt = #line) throws {
        let keys = key.map { [$0] } ?? []
        let at4063 = try XCTUnwrap(eventLength(payloadSize: 4063, key: key), file: file, line: line)
        let at4064 = try XCTUnwrap(eventLength(payloadSize: 4064, key: key), file: file, line: line)
        let name = key?.algorithm.rawValue ?? "unsecured"

        // value: OK at 4063, TooBig at 4064.
        let valueOK = try build(valueContent(eventLength: at4063), key: key)
        XCTAssertEqual(valueOK.jsonBytes().count, 4063, name, file: file, line: line)
        let okEvent = try openedJSON(valueOK, keys: keys)
        XCTAssertEqual(okEvent["s"], .string("OK"), name, file: file, line: line)
        XCTAssertNotNil(okEvent["v"], file: file, line: line)

        let valueBig = try build(valueContent(eventLength: at4064), key: key)
        XCTAssertLessThan(valueBig.jsonBytes().count, 4064, file: file, line: line)
        let bigEvent = try openedJSON(valueBig, keys: keys)
        XCTAssertEqual(bigEvent["s"], .string("TooBig"), name, file: file, line: line)
        XCTAssertNil(bigEvent["v"], file: file, line: line)
        XCTAssertEqual(bigEvent["p"], .string("/a/b"), file: file, line: line)

        // childEvent: OK at 4063, OnlyKeys at 4064.
        let childOK = try build(childContent(fullEventLength: at4063), key: key)
        XCTAssertEqual(childOK.jsonBytes().count, 4063, name, file: file, line: line)
        XCTAssertEqual(try openedJSON(childOK, keys: keys)["s"], .string("OK"), name, file: file, line: line)
        let childKeys = try build(childContent(fullEventLength: at4064), key: key)
        let childKeysEvent = try openedJSON(childKeys, keys: keys)
        XCTAssertEqual(childKeysEvent["s"], .string("OnlyKeys"), name, file: file, line: line)
        XCTAssertEqual(
            childKeysEvent["c"], .object(["a": .object(["k": .bool(true)]), "r": .array([]), "c": .object([:])]),
            file: file, line: line)

        // childEvent whose OnlyKeys form is 4063 (kept) or 4064 (TooBig, no changes).
        let onlyKeys = try build(keysContent(onlyKeysEventLength: at4063), key: key)
        XCTAssertEqual(onlyKeys.jsonBytes().count, 4063, name, file: file, line: line)
        let onlyKeysEvent = try openedJSON(onlyKeys, keys: keys)
        XCTAssertEqual(onlyKeysEvent["s"], .string("OnlyKeys"), name, file: file, line: line)
        XCTAssertEqual(onlyKeysEvent["c"]?["r"], .array([.string("gone")]), "removed keys are kept", file: file, line: line)
        XCTAssertEqual(onlyKeysEvent["c"]?["a"]?.objectValue?.values.first, .bool(true), file: file, line: line)

        let tooBig = try build(keysContent(onlyKeysEventLength: at4064), key: key)
        XCTAssertLessThan(tooBig.jsonBytes().count, 4064, file: file, line: line)
        let tooBigEvent = try openedJSON(tooBig, keys: keys)
        XCTAssertEqual(tooBigEvent["s"], .string("TooBig"), name, file: file, line: line)
        XCTAssertEqual(
            tooBigEvent["c"], .object(["a": .object([:]), "r": .array([]), "c": .object([:])]), file: file, line: line)

        // keysOnly at input: OnlyKeys at 4063, TooBig at 4064.
        guard case .childEvent(let changes, _) = keysContent(onlyKeysEventLength: at4063) else { return }
        let inputKeys = try build(.childEvent(changes, keysOnly: true), key: key)
        XCTAssertEqual(try openedJSON(inputKeys, keys: keys)["s"], .string("OnlyKeys"), file: file, line: line)
        guard case .childEvent(let larger, _) = keysContent(onlyKeysEventLength: at4064) else { return }
        let inputTooBig = try build(.childEvent(larger, keysOnly: true), key: key)
        XCTAssertEqual(try openedJSON(inputTooBig, keys: keys)["s"], .string("TooBig"), file: file, line: line)
    }

    func testBoundariesUnsecured() throws { try checkBoundaries(key: nil) }
    func testBoundariesDir() throws { try checkBoundaries(key: try boundaryKey { try self.dirKey($0) }) }
    func testBoundariesA256KW() throws { try checkBoundaries(key: try boundaryKey { try self.kwKey($0) }) }
    func testBoundariesRSAOAEP256() throws { try checkBoundaries(key: try boundaryKey { try self.rsaKey($0) }) }
    /// A device key: ECDH-ES+A256KW, with a kid and without (no `kid` in the envelope then).
    func testBoundariesECDHES() throws {
        let device = try ECPrivateKey()
        let withKid = try boundaryKey { JWEKey.ecdhESA256KW(kid: $0, privateKey: device) }
        try checkBoundaries(key: withKid)
        let withoutKid = try boundaryKey(kids: ["", "k", "k1", "k12", "k123"]) { JWEKey.ecdhESA256KW(kid: $0, privateKey: device) }
        try checkBoundaries(key: withoutKid)
    }

    func testMaximumSize() throws {
        for key in [nil, try kwKey(), try rsaKey()] {
            let overhead = V2Payload.envelopeSize(kid: key?.kid)
            func size(app: String) -> Int {
                let length = V2Event.bytes(app: app, path: path, subscriptionID: "sub-1", content: .noData).count
                return overhead + V2Payload.compactLength(eventLength: length, key: key)
            }
            // The largest app id whose noData payload fits in 4093 bytes, and one more byte.
            let fitting = try XCTUnwrap((1...4093).last { size(app: String(repeating: "a", count: $0)) <= 4093 })
            let largest = String(repeating: "a", count: fitting)
            let payload = try build(.noData, key: key, app: largest)
            XCTAssertGreaterThanOrEqual(payload.jsonBytes().count, 4064)
            XCTAssertLessThanOrEqual(payload.jsonBytes().count, 4093)
            XCTAssertNil(try V2Payload.build(app: largest + "a", path: path, subscriptionID: "sub-1", content: .noData, key: key))

            // A value too big even as TooBig is sent as TooBig when that fits, not at all when it does not.
            let value = NotificationContent.value(.string(String(repeating: "x", count: 100)))
            let shortApp = String(repeating: "a", count: fitting - 12)
            let degraded = try build(value, key: key, app: shortApp)
            XCTAssertEqual(try openedJSON(degraded, keys: key.map { [$0] } ?? [])["s"], .string("TooBig"))
            XCTAssertLessThanOrEqual(degraded.jsonBytes().count, 4093)
            XCTAssertNil(try V2Payload.build(app: largest + "aaaa", path: path, subscriptionID: "sub-1", content: value, key: key))
            let child = NotificationContent.childEvent(childChanges, keysOnly: false)
            XCTAssertNil(try V2Payload.build(app: largest + "aaaa", path: path, subscriptionID: "sub-1", content: child, key: key))
        }
    }

    // MARK: AppEncryptionKeys

    private func jwk(_ kid: String, _ alg: String, _ secret: [UInt8]) -> JSONValue {
        .object(["kty": .string("oct"), "kid": .string(kid), "alg": .string(alg), "k": .string(Base64URL.encode(secret))])
    }

    private func rsaJWK(_ kid: String, publicPEM: String? = nil, privatePEM: String? = nil) -> JSONValue {
        var members: [ExactString: JSONValue] = ["kty": .string("RSA"), "kid": .string(kid), "alg": .string("RSA-OAEP-256")]
        if let publicPEM { members["publicKeyPEM"] = .string(publicPEM) }
        if let privatePEM { members["privateKeyPEM"] = .string(privatePEM) }
        return .object(members)
    }

    private func assertKeyError(
        _ settings: JSONValue, _ expected: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try AppEncryptionKeys.parse(settings), file: file, line: line) { error in
            XCTAssertEqual("\(error)", expected, file: file, line: line)
        }
    }

    func testParseAppEncryptionKeys() throws {
        let privateKey = try Self.rsaA.get()
        let settings = JSONValue.object([
            "active": .string("k3"),
            "keys": .array([
                jwk("k1", "dir", secret(1)), jwk("k2", "A256KW", secret(2)),
                rsaJWK("k3", publicPEM: try privateKey.publicKey.pemRepresentation()),
                rsaJWK("k4", publicPEM: try privateKey.publicKey.pemRepresentation(), privatePEM: try privateKey.pemRepresentation()),
            ]),
        ])
        let keys = try AppEncryptionKeys.parse(settings)
        XCTAssertEqual(keys.keys.keys.sorted(), ["k1", "k2", "k3", "k4"])
        XCTAssertEqual(keys.keys["k1"]?.algorithm, .dir)
        XCTAssertEqual(keys.keys["k2"]?.algorithm, .a256kw)
        XCTAssertEqual(keys.key(kid: "k3")?.algorithm, .rsaOAEP256)
        XCTAssertEqual(keys.active?.kid, "k3")

        let none = try AppEncryptionKeys.parse(.object([:]))
        XCTAssertNil(none.active)
        XCTAssertTrue(none.keys.isEmpty)
        let inactive = try AppEncryptionKeys.parse(.object(["active": .null, "keys": .array([jwk("k1", "dir", secret(1))])]))
        XCTAssertNil(inactive.active)
        XCTAssertEqual(inactive.keys.count, 1)
    }

    func testParseAppEncryptionKeysErrors() throws {
        let good = jwk("k1", "dir", secret(1))
        assertKeyError(.array([]), #"encryption settings must be a JSON object {"active": …, "keys": […]}"#)
        assertKeyError(.object(["activ": .string("k1")]), #"encryption settings: unknown field "activ" (expected "active" and "keys")"#)
        assertKeyError(.object(["keys": good]), #"encryption settings: field "keys" must be an array of JWKs"#)
        assertKeyError(.object(["active": .number("1")]), #"encryption settings: field "active" must be a kid (a string)"#)
        assertKeyError(.object(["active": .string("k9")]), #"field "active": no key has kid "k9" (there are no keys)"#)
        assertKeyError(
            .object(["active": .string("k9"), "keys": .array([good])]), #"field "active": no key has kid "k9" (keys: k1)"#)
        assertKeyError(.object(["keys": .array([good, good])]), #"key "k1": field "kid" is used twice"#)
        assertKeyError(.object(["keys": .array([.string("k1")])]), #"keys[0]: a key must be a JSON object (a JWK)"#)
        assertKeyError(
            .object(["keys": .array([good, .object(["kty": .string("oct")])])]), #"keys[1]: field "kid" is missing"#)
        assertKeyError(.object(["keys": .array([.object(["kid": .string("")])])]), #"keys[0]: field "kid" must be a non-empty string"#)
        assertKeyError(.object(["keys": .array([jwk("k1", "dir", secret(1).dropLast(16).map { $0 })])]),
            #"key "k1": field "k" must hold 32 bytes (256 bits), not 16"#)
        assertKeyError(
            .object(["keys": .array([.object(["kty": .string("oct"), "kid": .string("k1"), "alg": .string("dir"), "k": .string("a=b")])])]),
            #"key "k1": field "k" is not valid base64url (no padding, no whitespace)"#)
        assertKeyError(
            .object(["keys": .array([.object(["kty": .string("oct"), "kid": .string("k1"), "alg": .string("dir")])])]),
            #"key "k1": field "k" is missing"#)
        assertKeyError(.object(["keys": .array([jwk("k1", "A128KW", secret(1))])]),
            #"key "k1": field "alg" must be "dir", "A256KW", "RSA-OAEP-256" or "ECDH-ES+A256KW", not "A128KW""#)
        assertKeyError(.object(["keys": .array([jwk("k1", "RSA-OAEP-256", secret(1))])]),
            #"key "k1": field "alg" RSA-OAEP-256 needs "kty":"RSA", not "oct""#)
        assertKeyError(
            .object(["keys": .array([.object(["kty": .string("EC"), "kid": .string("k1"), "alg": .string("dir")])])]),
            #"key "k1": field "alg" dir needs "kty":"oct", not "EC""#)
        assertKeyError(
            .object(["keys": .array([.object(["kty": .string("OKP"), "kid": .string("k1"), "alg": .string("dir")])])]),
            #"key "k1": field "kty" must be "oct", "RSA" or "EC", not "OKP""#)
        assertKeyError(
            .object(["keys": .array([.object(["kty": .string("oct"), "kid": .string("k1"), "alg": .string("dir"), "k": .number("1")])])]),
            #"key "k1": field "k" must be a string"#)
        assertKeyError(
            .object(["keys": .array([.object([
                "kty": .string("oct"), "kid": .string("k1"), "alg": .string("dir"), "use": .string("sig"),
                "k": .string(Base64URL.encode(secret(1))),
            ])])]),
            #"key "k1": field "use" must be "enc", not "sig""#)
        assertKeyError(.object(["keys": .array([rsaJWK("k3")])]),
            #"key "k3": an RSA key needs field "publicKeyPEM" or "privateKeyPEM""#)
        var withModulus = rsaJWK("k3")
        if case .object(var members) = withModulus {
            members["n"] = .string("AQAB")
            withModulus = .object(members)
        }
        assertKeyError(.object(["keys": .array([withModulus])]),
            #"key "k3": an RSA key needs field "publicKeyPEM" or "privateKeyPEM" (JWK "n"/"e" members are not supported)"#)
        XCTAssertThrowsError(try AppEncryptionKeys.parse(.object(["keys": .array([rsaJWK("k3", publicPEM: "not a key")])]))) { error in
            XCTAssertTrue("\(error)".hasPrefix(#"key "k3": field "publicKeyPEM": RSAPublicKey: cannot read PEM public key"#), "\(error)")
        }

        XCTAssertThrowsError(try AppEncryptionKeys.parse(.object(["keys": .array([rsaJWK("k3", privatePEM: "junk")])]))) { error in
            XCTAssertTrue("\(error)".hasPrefix(#"key "k3": field "privateKeyPEM": "#), "\(error)")
        }
        let mismatched = rsaJWK(
            "k3", publicPEM: try Self.rsaB.get().publicKey.pemRepresentation(), privatePEM: try Self.rsaA.get().pemRepresentation())
        assertKeyError(.object(["keys": .array([mismatched])]),
            #"key "k3": field "publicKeyPEM" is not the public key of "privateKeyPEM""#)
    }

    func testKeyRotation() throws {
        let k1 = jwk("k1", "A256KW", secret(1))
        let k2 = jwk("k2", "dir", secret(2))
        let before = try AppEncryptionKeys.parse(.object(["active": .string("k1"), "keys": .array([k1, k2])]))
        let after = try AppEncryptionKeys.parse(.object(["active": .string("k2"), "keys": .array([k1, k2])]))
        let old = try build(.value(.string("x")), key: before.active)
        let new = try build(.value(.string("x")), key: after.active)
        XCTAssertEqual(old["kid"], "k1")
        XCTAssertEqual(new["kid"], "k2")

        // A device holding both keys reads messages from before and after the switch.
        let deviceKeys = Array(after.keys.values)
        let expected = try PayloadDecoder.decodeEvent(payload: text(try build(.value(.string("x")), key: nil)) ?? "", keys: []).event
        for payload in [old, new] {
            let decoded = try PayloadDecoder.decodeEvent(payload: text(payload) ?? "", keys: deviceKeys)
            XCTAssertEqual(decoded.event, expected)
            XCTAssertEqual(decoded.kid, payload["kid"])
        }
        // Once the old key is dropped, its messages no longer open.
        let dropped = try AppEncryptionKeys.parse(.object(["active": .string("k2"), "keys": .array([k2])]))
        XCTAssertThrowsError(try PayloadDecoder.decodeEvent(payload: text(old) ?? "", keys: Array(dropped.keys.values))) { error in
            XCTAssertEqual("\(error)", #"unknown kid "k1": no key given has it (keys given: "k2")"#)
        }
    }

    // MARK: PayloadDecoder

    func testDecodeV1() throws {
        let value = try JSONParser.parse(#"{"b":"é","a":[1,true]}"#)
        let v1 = try XCTUnwrap(text(V1Payload.build(app: "toto", path: path, content: .value(value))))
        XCTAssertEqual(
            try PayloadDecoder.decode(payload: v1, keys: []),
            """
            {
              "s": "OK",
              "t": "value",
              "app": "toto",
              "sp": "/a/b",
              "d": {
                "a": [
                  1,
                  true
                ],
                "b": "é"
              }
            }

            """)
        let child = try XCTUnwrap(text(V1Payload.build(app: "toto", path: path, content: .childEvent(childChanges, keysOnly: false))))
        let decoded = try PayloadDecoder.decodeEvent(payload: child, keys: [])
        XCTAssertEqual(decoded.format, .v1)
        XCTAssertEqual(decoded.event["added"], .object(["n": .object(["v": .number("1")])]))
        XCTAssertEqual(decoded.event["removed"], .array([.string("b"), .string("z")]))
        XCTAssertEqual(decoded.event["changed"], .object(["c": .string("é\"")]))
        XCTAssertEqual(
            try PayloadDecoder.decode(payload: #"{"t":"revoke","r":"expired","app":"toto","sp":"/"}"#, keys: []),
            "{\n  \"t\": \"revoke\",\n  \"r\": \"expired\",\n  \"app\": \"toto\",\n  \"sp\": \"/\"\n}\n")
        XCTAssertThrowsError(try PayloadDecoder.decode(payload: #"{"t":"value","d":"{nope"}"#, keys: [])) { error in
            XCTAssertTrue("\(error)".hasPrefix(#"v1 field "d" does not hold JSON text"#), "\(error)")
        }
    }

    func testDecodeV2Unsecured() throws {
        let changes = ChildChanges(added: ["n": .number("3")], removed: ["b"])
        let payload = try XCTUnwrap(text(try build(.childEvent(changes, keysOnly: true), key: nil)))
        let pretty = """
            {
              "t": "v",
              "m": "childEvent",
              "a": "toto",
              "c": {
                "a": {
                  "n": true
                },
                "r": [
                  "b"
                ],
                "c": {}
              },
              "s": "OnlyKeys",
              "p": "/a/b",
              "id": "sub-1"
            }

            """
        XCTAssertEqual(try PayloadDecoder.decode(payload: payload, keys: []), pretty)
        // With keys given, an unsecured payload still decodes; a bare evt, a JSON string and an FCM message too.
        XCTAssertEqual(try PayloadDecoder.decode(payload: "  \n" + payload + "\n", keys: try allKeys()), pretty)
        let evt = try XCTUnwrap(try build(.childEvent(changes, keysOnly: true), key: nil)["evt"])
        XCTAssertEqual(try PayloadDecoder.decode(payload: evt, keys: []), pretty)
        XCTAssertEqual(try PayloadDecoder.decode(payload: "\"\(evt)\"", keys: []), pretty)
        XCTAssertEqual(
            try PayloadDecoder.decode(payload: #"{"message":{"token":"t","data":"# + payload + "}}", keys: []), pretty)
        let decoded = try PayloadDecoder.decodeEvent(payload: payload, keys: [])
        XCTAssertEqual(decoded.format, .v2)
        XCTAssertNil(decoded.kid)
    }

    func testDecodeV2Encrypted() throws {
        let content = NotificationContent.value(.object(["k": .string("v"), "n": .number("1.0")]))
        let expected = try JSONParser.parse(V2Event.bytes(app: "toto", path: path, subscriptionID: "sub-1", content: content))
        for key in try allKeys() {
            let payload = try XCTUnwrap(text(try build(content, key: key)))
            let decoded = try PayloadDecoder.decodeEvent(payload: payload, keys: try allKeys())
            XCTAssertEqual(decoded.event, expected, key.algorithm.rawValue)
            XCTAssertEqual(decoded.kid, key.kid)
            XCTAssertEqual(decoded.format, .v2)
            XCTAssertEqual(
                try PayloadDecoder.decode(payload: payload, keys: [key]),
                try PayloadDecoder.decode(payload: try XCTUnwrap(text(try build(content, key: nil))), keys: []))
        }
    }

    private func assertDecodeError(
        _ payload: String, keys: [JWEKey], _ expected: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try PayloadDecoder.decode(payload: payload, keys: keys), file: file, line: line) { error in
            XCTAssertEqual("\(error)", expected, file: file, line: line)
        }
    }

    func testDecodeErrors() throws {
        let wrong = "cannot decrypt: wrong key or tampered payload"
        // Same kid, other key material.
        let sealedKW = try XCTUnwrap(text(try build(.noData, key: try kwKey())))
        assertDecodeError(sealedKW, keys: [try kwKey(seed: 9)], wrong)
        let sealedDir = try XCTUnwrap(text(try build(.noData, key: try dirKey())))
        assertDecodeError(sealedDir, keys: [try dirKey(seed: 9)], wrong)
        let sealedRSA = try XCTUnwrap(text(try build(.noData, key: try rsaKey())))
        assertDecodeError(sealedRSA, keys: [try rsaKey(other: true)], wrong)
        // Same kid, other algorithm.
        assertDecodeError(
            sealedKW, keys: [try dirKey("kw")], wrong + " (the evt uses A256KW, key \"kw\" is dir)")

        // Tampered ciphertext.
        let payload = try build(.value(.string("secret")), key: try kwKey())
        var parts = try XCTUnwrap(payload["evt"]).split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        parts[3] = (parts[3].hasPrefix("A") ? "B" : "A") + parts[3].dropFirst()
        let tampered = V2Payload.envelope(kid: "kw", evt: parts.joined(separator: "."))
        assertDecodeError(try XCTUnwrap(text(tampered)), keys: [try kwKey()], wrong)

        assertDecodeError(sealedKW, keys: [try dirKey(), try rsaKey()], #"unknown kid "kw": no key given has it (keys given: "kd", "kr")"#)
        assertDecodeError(sealedKW, keys: [], #"the payload is encrypted (kid "kw") and no key was given"#)
        let relabelled = V2Payload.envelope(kid: "k9", evt: try XCTUnwrap(payload["evt"]))
        assertDecodeError(
            try XCTUnwrap(text(relabelled)), keys: [try kwKey()],
            #"the payload names kid "k9" but its evt was encrypted for kid "kw""#)
        let plain = try build(.noData, key: nil)
        assertDecodeError(
            try XCTUnwrap(text(V2Payload.envelope(kid: "k1", evt: try XCTUnwrap(plain["evt"])))), keys: [],
            #"the payload names kid "k1" but its evt is not encrypted"#)
        assertDecodeError(#"{"srv":"webcom","evt":"a.b","ver":"v2"}"#, keys: [],
            "evt is not a compact JOSE object (3 dot-separated parts for a JWS, 5 for a JWE; found 2)")
        assertDecodeError(#"{"srv":"webcom","evt":"x","ver":"v3"}"#, keys: [], #"unsupported version "ver":"v3" (expected "v2")"#)
        assertDecodeError(#"{"srv":"webcom"}"#, keys: [], #"not a notification payload: no "evt" field (v2) and no "t" field (v1)"#)
        assertDecodeError("   ", keys: [], "the payload is empty")
        assertDecodeError("[1]", keys: [], "evt is not a compact JOSE object (3 dot-separated parts for a JWS, 5 for a JWE; found 1)")
        XCTAssertThrowsError(try PayloadDecoder.decode(payload: "{nope", keys: [])) { error in
            XCTAssertTrue("\(error)".hasPrefix("the payload is not JSON: "), "\(error)")
        }
        assertDecodeError("\"\"", keys: [], "evt is not a compact JOSE object (3 dot-separated parts for a JWS, 5 for a JWE; found 1)")
    }

    // MARK: KeyFile

    func testKeyFile() throws {
        let single = JSONWriter.string(jwk("k1", "A256KW", secret(1)))
        let keys = try KeyFile.load(text: single)
        XCTAssertEqual(keys.map(\.kid), ["k1"])
        XCTAssertEqual(keys.first?.algorithm, .a256kw)

        let unnamed = JSONWriter.string(.object(["kty": .string("oct"), "alg": .string("dir"), "k": .string(Base64URL.encode(secret(1)))]))
        XCTAssertEqual(try KeyFile.load(text: unnamed, kid: "file-kid").map(\.kid), ["file-kid"])
        XCTAssertThrowsError(try KeyFile.load(text: unnamed)) { XCTAssertEqual("\($0)", #"key file: field "kid" is missing"#) }

        let privateKey = try Self.rsaA.get()
        let set = JSONWriter.string(.object([
            "active": .string("k1"),
            "keys": .array([jwk("k1", "dir", secret(1)), rsaJWK("kr", privatePEM: try privateKey.pemRepresentation())]),
        ]))
        let loaded = try KeyFile.load(text: set)
        XCTAssertEqual(loaded.map(\.kid), ["k1", "kr"])
        let sealed = try XCTUnwrap(text(try build(.noData, key: try rsaKey())))
        XCTAssertEqual(try PayloadDecoder.decodeEvent(payload: sealed, keys: loaded).kid, "kr")

        let pem = try privateKey.pemRepresentation()
        let fromPEM = try KeyFile.load(text: pem, kid: "kr")
        XCTAssertEqual(fromPEM.map(\.kid), ["kr"])
        XCTAssertEqual(fromPEM.first?.algorithm, .rsaOAEP256)
        XCTAssertEqual(try PayloadDecoder.decodeEvent(payload: sealed, keys: fromPEM).kid, "kr")

        XCTAssertThrowsError(try KeyFile.load(text: pem)) { XCTAssertEqual("\($0)", "key file: a PEM key carries no key id: give its kid") }
        XCTAssertThrowsError(try KeyFile.load(text: try privateKey.publicKey.pemRepresentation(), kid: "kr")) {
            XCTAssertEqual("\($0)", "key file: a PEM key file must hold a private key, RSA or P-256 (a public key cannot decrypt)")
        }
        let publicJWK = publicRSAJWKText(try privateKey.publicKey.pemRepresentation())
        XCTAssertThrowsError(try KeyFile.load(text: publicJWK)) {
            XCTAssertEqual("\($0)", #"key "kr": an RSA public key cannot decrypt: field "privateKeyPEM" is missing"#)
        }
        XCTAssertThrowsError(try KeyFile.load(text: #"{"keys":[]}"#)) { XCTAssertEqual("\($0)", "key file: the JWK Set holds no keys") }
        XCTAssertThrowsError(try KeyFile.load(text: "hello")) { XCTAssertTrue("\($0)".hasPrefix("key file: not a JWK"), "\($0)") }
    }

    private func publicRSAJWKText(_ pem: String) -> String { JSONWriter.string(rsaJWK("kr", publicPEM: pem)) }
}
