import COpenSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Building an `EVP_PKEY` from its parameters (`EVP_PKEY_fromdata`) through an `OSSL_PARAM_BLD`.
///
/// The builder keeps the pointers it is given until `OSSL_PARAM_BLD_to_param` copies them, so every name and
/// buffer is copied into C storage that lives for the whole call.
enum KeyParameters {
    /// `EVP_PKEY_PUBLIC_KEY` and `EVP_PKEY_KEYPAIR` (macros Swift does not import): the key with its domain
    /// parameters.
    static let publicKeySelection = Int32(OSSL_KEYMGMT_SELECT_PUBLIC_KEY | OSSL_KEYMGMT_SELECT_ALL_PARAMETERS)
    static let keyPairSelection = publicKeySelection | Int32(OSSL_KEYMGMT_SELECT_PRIVATE_KEY)

    /// One parameter: a UTF-8 string, an octet string, or a big-endian unsigned integer (an OpenSSL `BIGNUM`).
    enum Value {
        case utf8(String)
        case octets([UInt8])
        case unsigned([UInt8])
    }

    /// A new key of type `type` (`"EC"`, `"RSA"`) from `parameters`; `selection` says which parts they hold.
    static func key(type: String, selection: Int32, _ parameters: [(String, Value)]) throws -> OpaquePointer {
        ERR_clear_error()
        // C copies of every name and string value, freed when the key is built.
        var cStrings: [UnsafeMutablePointer<CChar>] = []
        defer { cStrings.forEach { free($0) } }
        func name(_ text: String) throws -> UnsafePointer<CChar> {
            guard let copy = strdup(text) else { throw CryptoError("KeyParameters: out of memory") }
            cStrings.append(copy)
            return UnsafePointer(copy)
        }
        guard let builder = OSSL_PARAM_BLD_new() else { throw CryptoError.openSSL("OSSL_PARAM_BLD_new failed") }
        defer { OSSL_PARAM_BLD_free(builder) }
        var numbers: [OpaquePointer] = []
        defer { numbers.forEach { BN_clear_free($0) } }
        // The octet strings are copied into one buffer that outlives OSSL_PARAM_BLD_to_param.
        let octets = parameters.reduce(into: [UInt8]()) { all, parameter in
            if case .octets(let bytes) = parameter.1 { all += bytes }
        }
        return try octets.withUnsafeBufferPointer { buffer throws -> OpaquePointer in
            var offset = 0
            for (key, value) in parameters {
                let pushed: Int32
                switch value {
                case .utf8(let text):
                    pushed = OSSL_PARAM_BLD_push_utf8_string(builder, try name(key), try name(text), 0)
                case .octets(let bytes):
                    pushed = OSSL_PARAM_BLD_push_octet_string(
                        builder, try name(key), UnsafeRawPointer(buffer.baseAddress.map { $0 + offset }), bytes.count)
                    offset += bytes.count
                case .unsigned(let bytes):
                    guard bytes.count <= Int(Int32.max),
                          let number = bytes.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress, Int32($0.count), nil) })
                    else { throw CryptoError.openSSL("BN_bin2bn failed") }
                    numbers.append(number)
                    pushed = OSSL_PARAM_BLD_push_BN(builder, try name(key), number)
                }
                guard pushed == 1 else { throw CryptoError.openSSL("OSSL_PARAM_BLD_push failed") }
            }
            guard let params = OSSL_PARAM_BLD_to_param(builder) else { throw CryptoError.openSSL("OSSL_PARAM_BLD_to_param failed") }
            defer { OSSL_PARAM_free(params) }
            guard let ctx = EVP_PKEY_CTX_new_from_name(nil, type, nil) else {
                throw CryptoError.openSSL("EVP_PKEY_CTX_new_from_name failed")
            }
            defer { EVP_PKEY_CTX_free(ctx) }
            var key: OpaquePointer? = nil
            guard EVP_PKEY_fromdata_init(ctx) == 1, EVP_PKEY_fromdata(ctx, &key, selection, params) == 1, let key else {
                throw CryptoError.openSSL("EVP_PKEY_fromdata failed")
            }
            return key
        }
    }

    /// An octet-string parameter of `pkey` (e.g. `pub`), at most `capacity` bytes; nil when it has none.
    static func octets(_ pkey: OpaquePointer, _ key: String, capacity: Int) -> [UInt8]? {
        var length = 0
        var failed = false
        let bytes = makeBytes(count: capacity) { out in
            guard EVP_PKEY_get_octet_string_param(pkey, key, out, capacity, &length) == 1, length <= capacity else {
                failed = true
                return 0
            }
            return length
        }
        if failed {
            ERR_clear_error()
            return nil
        }
        return bytes
    }
}
