"""`push-gateway decode --webpush-auth`: a Web Push message body (RFC 8291, aes128gcm) made by an independent
implementation (http_ece) is decrypted with the browser's private key and auth secret, as a browser would; a
wrong secret or another key is refused with a clear error. (No gateway process: the CLI alone.)"""
from __future__ import annotations

import base64
import json
import os
import subprocess

import http_ece
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from gateway import gateway_binary, gateway_env


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def browser_jwk(key: ec.EllipticCurvePrivateKey) -> dict:
    numbers = key.private_numbers()
    return {"kty": "EC", "crv": "P-256", "d": b64u(numbers.private_value.to_bytes(32, "big")),
            "x": b64u(numbers.public_numbers.x.to_bytes(32, "big")),
            "y": b64u(numbers.public_numbers.y.to_bytes(32, "big"))}


def decode(body: bytes, auth: bytes, key_file: str) -> subprocess.CompletedProcess:
    return subprocess.run([gateway_binary(), "decode", "--webpush-auth", b64u(auth), "--key-file", key_file, b64u(body)],
                          capture_output=True, text=True, timeout=30, env=gateway_env())


def test_decode_opens_a_web_push_message_with_the_browsers_keys(tmp_path):
    browser = ec.generate_private_key(ec.SECP256R1())
    point = browser.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    auth = os.urandom(16)
    key_file = tmp_path / "browser.json"
    key_file.write_text(json.dumps(browser_jwk(browser)))
    message = {"v": 2, "t": "app1", "p": "/users/42", "e": "é"}
    document = json.dumps(message, ensure_ascii=False).encode()
    for rs in (4096, 40):  # one record, then many small ones with their padding delimiters
        body = http_ece.encrypt(document, private_key=ec.generate_private_key(ec.SECP256R1()), dh=point,
                                auth_secret=auth, rs=rs, version="aes128gcm")
        out = decode(body, auth, str(key_file))
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == message

    # Another auth secret, another browser's key, an altered body: refused, with the reason.
    out = decode(body, os.urandom(16), str(key_file))
    assert out.returncode == 1 and "does not decrypt" in out.stderr, out.stderr
    other = tmp_path / "other.json"
    other.write_text(json.dumps(browser_jwk(ec.generate_private_key(ec.SECP256R1()))))
    out = decode(body, auth, str(other))
    assert out.returncode == 1 and "does not decrypt" in out.stderr, out.stderr
    out = decode(body[:50], auth, str(key_file))
    assert out.returncode == 1 and "Web Push" in out.stderr, out.stderr
