#!/usr/bin/env python3
"""Interop helper for Tests/WebPushTests: Web Push message encryption (RFC 8291, aes128gcm) and VAPID (RFC 8292)
with independent Python libraries: http_ece (encryption, with cryptography's ECDH) and joserfc (the VAPID JWT).

Reads one JSON request on stdin: {"ops": [op, ...]}, writes {"results": [result, ...]} on stdout, one result per
op, in order. A failing op yields {"error": "..."} instead of stopping the batch. Bytes travel as base64url without
padding.

Ops:
  {"op": "browser"}                                          -> {"d", "public", "auth"} (a browser's P-256 key and auth secret)
  {"op": "encrypt", "public", "auth", "plaintext", "rs"?}    -> {"body"} (http_ece, a fresh sender key and salt)
  {"op": "decrypt", "d", "public", "auth", "body"}           -> {"plaintext"} (http_ece)
  {"op": "vapid_verify", "authorization", "audience"}        -> {"valid", "claims"?, "header"?} (joserfc, the key from k=)

Exit status: 0 when the batch ran, 2 for a malformed request, 3 when a required module is missing.
"""
import base64
import json
import os
import sys
import time

try:
    import http_ece
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from joserfc import jws
    from joserfc.jwk import ECKey
except ImportError as error:  # pragma: no cover - reported to the Swift side as a skip
    print(f"missing module: {error.name}", file=sys.stderr)
    sys.exit(3)


def b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def b64d(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def point(key) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)


def run(op: dict) -> dict:
    kind = op["op"]
    if kind == "browser":
        key = ec.generate_private_key(ec.SECP256R1())
        d = key.private_numbers().private_value.to_bytes(32, "big")
        return {"d": b64e(d), "public": b64e(point(key)), "auth": b64e(os.urandom(16))}
    if kind == "encrypt":
        body = http_ece.encrypt(
            b64d(op["plaintext"]), private_key=ec.generate_private_key(ec.SECP256R1()), dh=b64d(op["public"]),
            auth_secret=b64d(op["auth"]), rs=op.get("rs", 4096), version="aes128gcm")
        return {"body": b64e(body)}
    if kind == "decrypt":
        key = ec.derive_private_key(int.from_bytes(b64d(op["d"]), "big"), ec.SECP256R1())
        assert point(key) == b64d(op["public"]), "d does not match the public key"
        plaintext = http_ece.decrypt(b64d(op["body"]), private_key=key, auth_secret=b64d(op["auth"]), version="aes128gcm")
        return {"plaintext": b64e(plaintext)}
    if kind == "vapid_verify":
        value = op["authorization"]
        if not value.startswith("vapid "):
            return {"valid": False, "reason": "not the vapid scheme"}
        params = dict(part.strip().split("=", 1) for part in value[len("vapid "):].split(","))
        raw = b64d(params["k"])
        x, y = raw[1:33], raw[33:65]
        key = ECKey.import_key({"kty": "EC", "crv": "P-256", "x": b64e(x), "y": b64e(y)})
        try:
            token = jws.deserialize_compact(params["t"], key, algorithms=["ES256"])
        except Exception as error:  # noqa: BLE001 - any failure is "not valid"
            return {"valid": False, "reason": str(error)}
        claims = json.loads(token.payload)
        valid = claims.get("aud") == op["audience"] and time.time() < claims.get("exp", 0) <= time.time() + 86400
        return {"valid": valid, "claims": claims, "header": token.protected}
    raise ValueError(f"unknown op {kind}")


def main() -> None:
    try:
        request = json.load(sys.stdin)
        ops = request["ops"]
    except (ValueError, KeyError) as error:
        print(f"malformed request: {error}", file=sys.stderr)
        sys.exit(2)
    results = []
    for op in ops:
        try:
            results.append(run(op))
        except Exception as error:  # noqa: BLE001 - reported per op
            results.append({"error": f"{type(error).__name__}: {error}"})
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    main()
