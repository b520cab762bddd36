import CFuzzDriver
import Auth
import CompactJSON
import SSLCrypto

/// libFuzzer entry for the access-token verifier. The first byte chooses how the rest becomes a token:
///   0: the rest is the token's text;
///   1: the rest is a header and claims (split at the first 0x00 byte), signed with the HS256 key, so the
///      claims checks (exp, nbf, iss, aud, uid/sub) are reached;
///   2: the rest is the claims under a fixed HS256 header, signed;
///   3: the rest is the signature of a fixed RS256 or ES256 token (the public-key verification paths).
/// Every token is checked by a verifier without and one with an issuer and audience.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJWT(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let rest = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let token: String
    switch data[0] % 4 {
    case 0:
        token = String(decoding: rest, as: UTF8.self)
    case 1:
        let split = rest.firstIndex(of: 0) ?? rest.count
        token = signed(header: Array(rest[..<split]), claims: Array(rest[min(split + 1, rest.count)...]))
    case 2:
        token = signed(header: Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8), claims: rest)
    default:
        let header = data[0] & 4 == 0 ? #"{"alg":"RS256","kid":"rs"}"# : #"{"alg":"ES256"}"#
        let claims = #"{"uid":"user-1","exp":4102444800,"iss":"https://issuer.example/p1","aud":"p1"}"#
        token = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8)) + "."
            + Base64URL.encode(rest)
    }
    for verifier in [Fuzz.plain, Fuzz.bound] {
        guard let verified = try? verifier.verify(token, now: Fuzz.now) else { continue }
        if verified.uid.isEmpty { fatalError("a token was accepted with an empty user id") }
        if let uid = verified.claims["uid"], uid != .string(verified.uid) { fatalError("uid claim not the user id") }
        if verifier.issuer != nil, verified.claims["iss"] != .string(Fuzz.issuer) { fatalError("issuer not checked") }
    }
    return 0
}

func signed(header: [UInt8], claims: [UInt8]) -> String {
    let input = Base64URL.encode(header) + "." + Base64URL.encode(claims)
    guard let mac = try? HMACSHA256.authenticationCode(for: Array(input.utf8), key: Fuzz.secret) else {
        fatalError("HMAC failed")
    }
    return input + "." + Base64URL.encode(mac)
}

enum Fuzz {
    static let now: Int64 = 1_900_000_000
    static let issuer = "https://issuer.example/p1"
    static let secret = Array("the fuzzers' HS256 secret, 32 bytes or more".utf8)
    static let keys: [AuthKey] = {
        do {
            return [
                .hs256(kid: nil, secret: secret),
                .rs256(kid: "rs", try RSAPublicKey(pem: rsaPEM)),
                .es256(kid: nil, try ECPublicKey(pem: ecPEM)),
            ]
        } catch {
            fatalError("fuzzer keys: \(error)")
        }
    }()
    static let plain = JWTVerifier(keys: keys)
    static let bound = JWTVerifier(keys: keys, issuer: issuer, audience: "p1")

    static let rsaPEM = """
        -----BEGIN PUBLIC KEY-----
        MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAkaBQLTDjY5GgRVl7FT/F
        qESbn+z/QH8zurUPrf7r7cmeWVG/N69cCsToTqFOcE5mXA/HVcLZPmCb6totv+wl
        OJaTK4mClFvUwKDxOLV+R/5TfFut6DLgABHE3810cehN8WHzo6qZFhncHJNLnplh
        SmeSLbWTNAQZm+Lk7qsBcRdl11C7R6keXZKwRVJk7z1F6AuqeTMmTAELV1tcvMES
        K5pW6e7FHFHg23fEcTKbktNQoy0l0GPMWn7iFxAV7uS0N520ltvh290jD5BkoVEH
        t8dfYHTYNtsOr+jrBFDAD42CQRkAaaVXqcu1/hTktuiVDWdlEPVB7z8C+0G6J0h4
        ywIDAQAB
        -----END PUBLIC KEY-----
        """
    static let ecPEM = """
        -----BEGIN PUBLIC KEY-----
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEXFeDYyiL1n+i0O9CRtKtrGtToW5D
        CxYEZwf7Ac4KuQBM0dLhmYWfyQ3HcSFVVqeGzycuJqninDMDqGg9/NHaww==
        -----END PUBLIC KEY-----
        """
}

/// The entry point (SwiftPM renames an executable's `main` to `<Module>_main`): libFuzzer's driver.
@_cdecl("FuzzJWT_main")
public func fuzzJWTMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    CFuzzDriver_run(argc, argv) { data, size in data.map { fuzzJWT($0, size) } ?? 0 }
}
