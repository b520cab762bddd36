import JOSE
import SSLCrypto
import XCTest

/// Published JWE examples whose content encryption is A256GCM. Their key management is `RSA-OAEP`
/// (SHA-1), which this module does not offer, so the vectors are checked at the content-encryption
/// step with the CEK and IV they give: AAD = ASCII of the encoded protected header (RFC 7516 §5.1).
final class JWEVectorTests: XCTestCase {
    private struct ContentVector {
        let name: String, encodedHeader: String, cek: [UInt8], iv: String, plaintext: String, ciphertext: String, tag: String
    }

    private let vectors: [ContentVector] = [
        // RFC 7516 Appendix A.1 (RSAES-OAEP and AES GCM).
        ContentVector(
            name: "RFC 7516 A.1",
            encodedHeader: "eyJhbGciOiJSU0EtT0FFUCIsImVuYyI6IkEyNTZHQ00ifQ",
            cek: [177, 161, 244, 128, 84, 143, 225, 115, 63, 180, 3, 255, 107, 154, 212, 246, 138, 7, 110, 91,
                  112, 46, 34, 105, 47, 130, 203, 46, 122, 234, 64, 252],
            iv: "48V1_ALb6US04U3b",
            plaintext: "The true sign of intelligence is not knowledge but imagination.",
            ciphertext: "5eym8TW_c8SuK0ltJ3rpYIzOeDQz7TALvtu6UG9oMo4vpzs9tX_EFShS8iB7j6jiSdiwkIr3ajwQzaBtQD_A",
            tag: "XFBoMYUZodetZdvTiFvSkQ"),
        // RFC 7520 §5.2 (Key Encryption Using RSA-OAEP with AES-GCM), figures 72, 85, 86, 89–92.
        ContentVector(
            name: "RFC 7520 5.2",
            encodedHeader: "eyJhbGciOiJSU0EtT0FFUCIsImtpZCI6InNhbXdpc2UuZ2FtZ2VlQGhvYmJpdG9uLmV4YW1wbGUiLCJlbmMiOiJBMjU2R0NNIn0",
            cek: Base64URL.decode("mYMfsggkTAm0TbvtlFh2hyoXnbEzJQjMxmgLN3d8xXA") ?? [],
            iv: "-nBoKLH0YkLZPSI9",
            plaintext: "You can trust us to stick with you through thick and thin\u{2013}to the bitter end. And you can "
                + "trust us to keep any secret of yours\u{2013}closer than you keep it yourself. But you cannot trust "
                + "us to let you face trouble alone, and go off without a word. We are your friends, Frodo.",
            ciphertext: "o4k2cnGN8rSSw3IDo1YuySkqeS_t2m1GXklSgqBdpACm6UJuJowOHC5ytjqYgRL-I-soPlwqMUf4UgRWWeaOGNw6vGW-xyM01lTYxrXfV"
                + "zIIaRdhYtEMRBvBWbEwP7ua1DRfvaOjgZv6Ifa3brcAM64d8p5lhhNcizPersuhw5f-pGYzseva-TUaL8iWnctc-sSwy7SQmRkfhDjwb"
                + "z0fz6kFovEgj64X1I5s7E6GLp5fnbYGLa1QUiML7Cc2GxgvI7zqWo0YIEc7aCflLG1-8BboVWFdZKLK9vNoycrYHumwzKluLWEbSVmaP"
                + "pOslY2n525DxDfWaVFUfKQxMF56vn4B9QMpWAbnypNimbM8zVOw",
            tag: "UCGiqJxhBI3IFVdPalHHvA"),
    ]

    func testContentDecryptionIsByteExact() throws {
        for vector in vectors {
            let plaintext = try AES256GCM.open(b64(vector.ciphertext), tag: b64(vector.tag), key: vector.cek,
                                               iv: b64(vector.iv), aad: vector.encodedHeader.utf8)
            XCTAssertEqual(plaintext, Array(vector.plaintext.utf8), vector.name)
        }
    }

    func testContentEncryptionIsByteExact() throws {
        for vector in vectors {
            let sealed = try AES256GCM.seal(vector.plaintext.utf8, key: vector.cek, iv: b64(vector.iv),
                                            aad: vector.encodedHeader.utf8)
            XCTAssertEqual(Base64URL.encode(sealed.ciphertext), vector.ciphertext, vector.name)
            XCTAssertEqual(Base64URL.encode(sealed.tag), vector.tag, vector.name)
        }
    }

    /// The same vectors, wrapped as a `dir` JWE whose header is the vector's own: `JWE.decrypt` must
    /// then reject the header (alg `RSA-OAEP` is not supported) rather than decrypt with the dir key.
    func testForeignAlgorithmsAreRejected() throws {
        let vector = vectors[0]
        let compact = [vector.encodedHeader, "", vector.iv, vector.ciphertext, vector.tag].joined(separator: ".")
        let key = try JWEKey.dir(kid: "k", key: vector.cek)
        XCTAssertThrowsError(try JWE.decrypt(compact: compact, keys: { _ in key }))
    }
}
