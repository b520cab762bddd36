import ArgumentParser
import Foundation
import JOSE
import PushFormats
import SSLCrypto
import WebPush

struct DecodeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Decode a received notification data payload (v1 or v2, encrypted or not) and print the event",
        discussion: """
            PAYLOAD is the data map the device received, as JSON ({"srv":"webcom","kid":"k1","evt":"…","ver":"v2"} \
            or a v1 map), or a bare compact evt. An encrypted v2 payload needs the key its kid names: a key file holds \
            a JWK, a JWK Set ({"keys":[…]}, e.g. the app's encryption settings) or a private key PEM (RSA, or P-256), \
            whose kid is --kid or else the file name without its extension. A subscription made with a device key \
            (encryption ECDH-ES+A256KW or RSA-OAEP-256) is decoded with that device's private key only: its P-256 \
            JWK with "d" ({"kty":"EC","crv":"P-256","x":…,"y":…,"d":…}) or its PEM; the app's keys cannot open it.
            """)

    @Argument(help: "The data payload (JSON data map or compact evt); - reads standard input.")
    var payload: String = "-"

    @Option(
        name: .customLong("key-file"),
        help: ArgumentHelp("JWK, JWK Set or private key PEM file (RSA, or a device's P-256 key; repeatable).", valueName: "path"))
    var keyFiles: [String] = []

    @Option(help: "Key id of a PEM key file or of a JWK without kid (default: the file name without its extension).")
    var kid: String?

    @Option(
        name: .customLong("webpush-auth"),
        help: ArgumentHelp(
            "The browser's auth secret (base64url): PAYLOAD is then a Web Push message body (aes128gcm, base64url), decrypted with the browser's P-256 private key (--key-file: a JWK with d, or a PEM); prints the message it carried.",
            valueName: "secret"))
    var webPushAuth: String?

    func run() throws {
        do {
            let keys = try loadKeys()
            let text = payload == "-" ? String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self) : payload
            if let webPushAuth {
                print(try decryptWebPush(text, auth: webPushAuth, keys: keys))
                return
            }
            print(try PayloadDecoder.decode(payload: text, keys: keys), terminator: "")
        } catch let error as ValidationError {
            throw error
        } catch {
            FileHandle.standardError.write(Data("push-gateway decode: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }

    private struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// A Web Push body (base64url, surrounding white space ignored) decrypted with the one P-256 key given.
    private func decryptWebPush(_ text: String, auth: String, keys: [JWEKey]) throws -> String {
        guard let secret = Base64URL.decode(auth.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw ValidationError("--webpush-auth: not base64url")
        }
        let browserKeys = keys.compactMap(\.ecPrivateKey)
        guard browserKeys.count == 1, keys.count == 1 else {
            throw ValidationError("--webpush-auth needs one --key-file: the browser's P-256 private key")
        }
        guard let body = Base64URL.decode(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw Failure(description: "the Web Push body is not base64url")
        }
        let message = try WebPushEncryption.decrypt(body, userAgentKey: browserKeys[0], authSecret: secret)
        return String(decoding: message, as: UTF8.self)
    }

    private func loadKeys() throws -> [JWEKey] {
        var files: [(path: String, text: String)] = []
        for path in keyFiles {
            do {
                files.append((path, try String(contentsOfFile: path, encoding: .utf8)))
            } catch {
                throw Failure(description: "cannot read key file \(path): \(error.localizedDescription)")
            }
        }
        if kid != nil, files.filter({ $0.text.drop(while: { $0.isWhitespace }).hasPrefix("-----BEGIN") }).count > 1 {
            throw ValidationError("--kid names the key of one PEM key file; name the others by their file names")
        }
        var keys: [JWEKey] = []
        for file in files {
            let stem = URL(fileURLWithPath: file.path).deletingPathExtension().lastPathComponent
            let loaded: [JWEKey]
            do {
                loaded = try KeyFile.load(text: file.text, kid: kid ?? stem)
            } catch {
                throw Failure(description: "\(file.path): \(error)")
            }
            for key in loaded {
                guard !keys.contains(where: { $0.kid == key.kid }) else {
                    throw Failure(description: "\(file.path): kid \"\(key.kid)\" is already in another key file")
                }
                keys.append(key)
            }
        }
        return keys
    }
}
