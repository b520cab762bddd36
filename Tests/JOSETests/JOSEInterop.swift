import TestSupport

extension PythonInterop {
    /// `tests/interop/jose_interop.py`: JOSE with independent Python libraries.
    static let jose = PythonInterop(script: "tests/interop/jose_interop.py", modules: "joserfc jwcrypto pyjwt cryptography")
}
