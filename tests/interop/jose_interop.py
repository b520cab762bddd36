#!/usr/bin/env python3
"""Interop helper for Tests/JOSETests: runs JOSE operations with independent Python libraries.

Reads one JSON request on stdin: {"ops": [op, ...]}, writes {"results": [result, ...]} on stdout,
one result per op, in order. A failing op yields {"error": "..."} instead of stopping the batch.

Keys are JSON objects: {"kty": "oct", "k": <base64url>}, {"kty": "RSA", "pem": <PEM>} or
{"kty": "EC", "jwk": <a P-256 JWK, with "d" to decrypt>}.
Bytes travel as base64url without padding.

Ops:
  {"op": "encrypt", "lib": "joserfc"|"jwcrypto", "alg", "kid"?, "key", "payload"} -> {"token"}
  {"op": "decrypt", "lib": "joserfc"|"jwcrypto", "token", "key"}                 -> {"payload", "header"}
  {"op": "make_unsecured", "lib": "joserfc"|"jwcrypto", "payload"}               -> {"token"}
  {"op": "parse_unsecured", "lib": "joserfc"|"jwcrypto"|"pyjwt", "token"}        -> {"payload", "header"}
  {"op": "rs256_sign", "lib": "pyjwt", "private_pem", "claims"}                  -> {"token"}
  {"op": "rs256_verify", "lib": "pyjwt"|"cryptography", "public_pem", "token"}   -> {"valid", "claims"?}
  {"op": "rsa_generate", "bits", "format": "pkcs1"|"pkcs8"}                       -> {"private_pem", "public_pem"}
  {"op": "ec_generate"}                                                           -> {"jwk"} (P-256, with "d")

Exit status: 0 when the batch ran (individual ops may still report errors), 2 for a malformed
request, 3 when a required module is missing (the message on stderr says which).
"""
import base64
import json
import sys
import warnings

try:
    import jwt
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa
    from joserfc import jwe as rfc_jwe
    from joserfc import jws as rfc_jws
    from joserfc.jwk import ECKey, OctKey, RSAKey
    from jwcrypto import jwe as jc_jwe
    from jwcrypto import jwk as jc_jwk
    from jwcrypto import jws as jc_jws
except ImportError as error:  # pragma: no cover - reported to the Swift side as a skip
    print(f"missing module: {error.name}", file=sys.stderr)
    sys.exit(3)

warnings.simplefilter("ignore")  # joserfc warns about "none" and non-recommended algorithms

ENC = "A256GCM"


def b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def b64d(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def header_of(token: str) -> dict:
    return json.loads(b64d(token.split(".")[0]))


def joserfc_key(key: dict):
    if key["kty"] == "oct":
        return OctKey.import_key(b64d(key["k"]))
    if key["kty"] == "EC":
        return ECKey.import_key(key["jwk"])
    return RSAKey.import_key(key["pem"])


def jwcrypto_key(key: dict):
    if key["kty"] == "oct":
        return jc_jwk.JWK(kty="oct", k=key["k"])
    if key["kty"] == "EC":
        return jc_jwk.JWK(**key["jwk"])
    return jc_jwk.JWK.from_pem(key["pem"].encode("ascii"))


def encrypt(op: dict) -> dict:
    header = {"alg": op["alg"], "enc": ENC}
    if op.get("kid") is not None:
        header["kid"] = op["kid"]
    payload = b64d(op["payload"])
    if op["lib"] == "joserfc":
        token = rfc_jwe.encrypt_compact(header, payload, joserfc_key(op["key"]), algorithms=[op["alg"], ENC])
    else:
        jwe = jc_jwe.JWE(payload, protected=json.dumps(header))
        jwe.add_recipient(jwcrypto_key(op["key"]))
        token = jwe.serialize(compact=True)
    return {"token": token}


def decrypt(op: dict) -> dict:
    token = op["token"]
    alg = header_of(token).get("alg")
    if op["lib"] == "joserfc":
        result = rfc_jwe.decrypt_compact(token, joserfc_key(op["key"]), algorithms=[alg, ENC])
        return {"payload": b64e(result.plaintext), "header": dict(result.protected)}
    jwe = jc_jwe.JWE()
    jwe.deserialize(token, key=jwcrypto_key(op["key"]))
    return {"payload": b64e(jwe.payload), "header": dict(jwe.jose_header)}


def make_unsecured(op: dict) -> dict:
    payload = b64d(op["payload"])
    if op["lib"] == "joserfc":
        token = rfc_jws.serialize_compact({"alg": "none"}, payload, None, algorithms=["none"])
    else:
        jws = jc_jws.JWS(payload)
        jws.allowed_algs = ["none"]
        jws.add_signature(jc_jwk.JWK(kty="oct", k=""), alg="none", protected=json.dumps({"alg": "none"}))
        token = jws.serialize(compact=True)
    return {"token": token}


def parse_unsecured(op: dict) -> dict:
    token = op["token"]
    if op["lib"] == "joserfc":
        result = rfc_jws.deserialize_compact(token, None, algorithms=["none"])
        return {"payload": b64e(result.payload), "header": dict(result.protected)}
    if op["lib"] == "jwcrypto":
        jws = jc_jws.JWS()
        jws.allowed_algs = ["none"]
        jws.deserialize(token)
        jws.verify(jc_jwk.JWK(kty="oct", k=""), alg="none")
        return {"payload": b64e(jws.payload), "header": dict(jws.jose_header)}
    payload = jwt.api_jws.PyJWS().decode(token, algorithms=["none"], options={"verify_signature": False})
    return {"payload": b64e(payload), "header": jwt.get_unverified_header(token)}


def rs256_sign(op: dict) -> dict:
    return {"token": jwt.encode(op["claims"], op["private_pem"], algorithm="RS256")}


def rs256_verify(op: dict) -> dict:
    token = op["token"]
    if op["lib"] == "pyjwt":
        try:
            claims = jwt.decode(token, op["public_pem"], algorithms=["RS256"], options={"verify_exp": False})
        except jwt.InvalidSignatureError:
            return {"valid": False}
        return {"valid": True, "claims": claims}
    public_key = serialization.load_pem_public_key(op["public_pem"].encode("ascii"))
    signing_input, _, signature = token.rpartition(".")
    try:
        public_key.verify(b64d(signature), signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        return {"valid": False}
    return {"valid": True}


def rsa_generate(op: dict) -> dict:
    key = rsa.generate_private_key(public_exponent=65537, key_size=op.get("bits", 2048))
    private_format = (
        serialization.PrivateFormat.TraditionalOpenSSL
        if op.get("format") == "pkcs1"
        else serialization.PrivateFormat.PKCS8
    )
    private_pem = key.private_bytes(serialization.Encoding.PEM, private_format, serialization.NoEncryption())
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return {"private_pem": private_pem.decode("ascii"), "public_pem": public_pem.decode("ascii")}


def ec_generate(op: dict) -> dict:
    return {"jwk": ECKey.generate_key("P-256", private=True).as_dict(private=True)}


OPS = {
    "ec_generate": ec_generate,
    "encrypt": encrypt,
    "decrypt": decrypt,
    "make_unsecured": make_unsecured,
    "parse_unsecured": parse_unsecured,
    "rs256_sign": rs256_sign,
    "rs256_verify": rs256_verify,
    "rsa_generate": rsa_generate,
}


def main() -> int:
    try:
        request = json.load(sys.stdin)
        ops = request["ops"]
    except (ValueError, KeyError, TypeError) as error:
        print(f"malformed request: {error}", file=sys.stderr)
        return 2
    results = []
    for op in ops:
        try:
            results.append(OPS[op["op"]](op))
        except Exception as error:  # noqa: BLE001 - every failure is reported back per op
            results.append({"error": f"{type(error).__name__}: {error}"})
    json.dump({"results": results}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
