"""Per-device end-to-end encryption (issue 20, item 2; SPEC §2 `encryption`): a v2 subscription that carries the
device's own public key gets its notifications as a JWE for that key alone (ECDH-ES+A256KW on P-256). Checked with
independent libraries (joserfc, jwcrypto) on the receiving side, against the real gateway binary and Tansu: the
device's key opens them, the app's key does not; the key survives a restart (it lives in the state topic); a bad
key answers 400 with a clear message."""

from __future__ import annotations

import json
import subprocess

import pytest
from joserfc import jwe as rfc_jwe
from joserfc.jwk import ECKey, OctKey
from jwcrypto import jwe as jc_jwe
from jwcrypto import jwk as jc_jwk

from gateway import gateway_binary, gateway_env
from procutil import wait_for
from test_v2 import K1, app_settings, b64u, b64u_decode, encryption, event, expect, hs, received, served

ALG = "ECDH-ES+A256KW"


def device_key() -> ECKey:
    return ECKey.generate_key("P-256", private=True)


def public_jwk(key: ECKey, kid: str | None = None) -> dict:
    jwk = {k: v for k, v in key.as_dict(private=False).items() if k in ("kty", "crv", "x", "y")}
    if kid:
        jwk["kid"] = kid
    return jwk


def open_with_device(evt: str, key: ECKey) -> bytes:
    return rfc_jwe.decrypt_compact(evt, key, algorithms=[ALG, "A256GCM"]).plaintext


def last_data(stack, device: str) -> dict:
    return json.loads(stack.fake.sends_for(device)[-1]["body"])["message"]["data"]


@pytest.mark.timeout(240)
def test_device_encrypted_notifications_open_with_the_device_key_only(stack_factory, uniq, token_factory, tmp_path):
    stack = stack_factory()
    app = "v2dev" + uniq[4:]
    # The app has an active key (k1, A256KW): the device key must win over it.
    stack.write_app_settings(app, app_settings(stack, app, encryption=encryption("k1")))
    api = served(stack, app)
    device, plain_device = token_factory("e2ee"), token_factory("appkey")
    key = device_key()
    path = f"{uniq}/doc"
    body = {"kind": "mobile", "mode": "value", "path": path, "context": device,
            "encryption": {"alg": ALG, "jwk": public_jwk(key, "phone-1")}}
    created = expect(api.post("alice", hs("alice"), body), 201)
    sid = created["id"]
    # The document shows the public key as stored: nothing but the public JWK members.
    assert created["encryption"] == {"alg": ALG, "jwk": public_jwk(key, "phone-1")}
    assert expect(api.get("alice", hs("alice"), sid), 200)["encryption"] == created["encryption"]
    expect(api.post("alice", hs("alice"), {"kind": "mobile", "mode": "value", "path": path, "context": plain_device}), 201)

    stack.publish(path, "SET", json.dumps({"b": "é", "a": 1}), app=app)
    [data] = received(stack, device, 1)
    assert list(data) == ["srv", "kid", "evt", "ver"] and data["kid"] == "phone-1", data
    parts = data["evt"].split(".")
    header = json.loads(b64u_decode(parts[0]))
    assert list(header) == ["alg", "enc", "epk", "kid"], header
    assert header["alg"] == ALG and header["enc"] == "A256GCM" and header["kid"] == "phone-1"
    assert set(header["epk"]) == {"kty", "crv", "x", "y"} and header["epk"]["crv"] == "P-256"
    assert len(b64u_decode(parts[1])) == 40  # the wrapped CEK
    expected = event(app, path, sid, m="value", v={"a": 1, "b": "é"}, s="OK")
    # joserfc, with the device's key only.
    assert open_with_device(data["evt"], key) == expected
    # jwcrypto too.
    token = jc_jwe.JWE()
    token.deserialize(data["evt"], key=jc_jwk.JWK(**key.as_dict(private=True)))
    assert token.payload == expected
    # The app's key cannot open it, nor can another device's key.
    with pytest.raises(Exception):
        rfc_jwe.decrypt_compact(data["evt"], OctKey.import_key(K1), algorithms=["A256KW", ALG, "A256GCM"])
    with pytest.raises(Exception):
        open_with_device(data["evt"], device_key())
    # The other subscription of the same node is still encrypted with the app's key.
    [app_data] = received(stack, plain_device, 1)
    assert app_data["kid"] == "k1"
    plain_sid = _id(api, plain_device, path)
    assert rfc_jwe.decrypt_compact(app_data["evt"], OctKey.import_key(K1), algorithms=["A256KW", "A256GCM"]).plaintext \
        == event(app, path, plain_sid, m="value", v={"a": 1, "b": "é"}, s="OK")

    # push-gateway decode with the device's private key (a JWK with d); the app's key file cannot.
    device_file = tmp_path / "phone-1.json"
    device_file.write_text(json.dumps(key.as_dict(private=True)))
    out = subprocess.run([gateway_binary(), "decode", "--key-file", str(device_file), json.dumps(data)],
                         capture_output=True, text=True, timeout=30, env=gateway_env())
    assert out.returncode == 0, out.stderr
    decoded = json.loads(out.stdout)
    assert decoded["v"] == {"a": 1, "b": "é"} and decoded["id"] == sid and decoded["p"] == path
    app_file = tmp_path / "keys.json"
    app_file.write_text(json.dumps(encryption("k1")))
    out = subprocess.run([gateway_binary(), "decode", "--key-file", str(app_file), json.dumps(data)],
                         capture_output=True, text=True, timeout=30, env=gateway_env())
    assert out.returncode != 0 and "phone-1" in out.stderr, out.stderr

    # Size rules on the result: ~3 KB of data encrypts to more than 4064 bytes → TooBig without the value.
    stack.publish(path, "SET", json.dumps("z" * 2900), app=app)

    def degraded():
        last = last_data(stack, device)
        return last if open_with_device(last["evt"], key) == event(app, path, sid, m="value", s="TooBig") else None
    big = wait_for(degraded, timeout=20, what="the TooBig notification")
    assert len(json.dumps(big, separators=(",", ":"), ensure_ascii=False).encode()) < 4064
    # Just under the threshold the value is kept.
    stack.publish(path, "SET", json.dumps("y" * 2500), app=app)
    kept = wait_for(lambda: (lambda d: d if json.loads(open_with_device(d["evt"], key)).get("v") == "y" * 2500 else None)(
        last_data(stack, device)), timeout=20, what="the 2500-byte value, kept")
    assert len(json.dumps(kept, separators=(",", ":"), ensure_ascii=False).encode()) < 4064

    # The key lives in the state topic: after a restart the (new) owner still encrypts for the device.
    rc = stack.gateway.terminate_and_wait(20)
    assert rc == 0, stack.gateway.tails()
    stack.start()
    served(stack, app)
    sends_before = len(stack.fake.sends_for(device))
    stack.publish(path, "SET", '"after restart"', app=app)
    stack.wait_sends(device, sends_before + 1)
    again = last_data(stack, device)
    assert again["kid"] == "phone-1"
    assert open_with_device(again["evt"], key) == event(app, path, sid, m="value", v="after restart", s="OK")


def _id(api, context: str, path: str) -> str:
    listed = expect(api.get("alice", hs("alice")), 200)["subscriptions"]
    return next(s["id"] for s in listed if s["context"] == context and s["path"] == path)


@pytest.mark.timeout(180)
def test_device_key_update_removal_and_bad_keys(stack_factory, uniq, token_factory):
    stack = stack_factory()
    app = "v2dku" + uniq[4:]
    stack.write_app_settings(app, app_settings(stack, app, encryption=encryption("k1")))
    api = served(stack, app)
    device = token_factory("rot")
    path = f"{uniq}/doc"
    first, second = device_key(), device_key()

    def body(key: ECKey | None, **extra) -> dict:
        b = {"kind": "mobile", "mode": "value", "path": path, "context": device, **extra}
        if key is not None:
            b["encryption"] = {"alg": ALG, "jwk": public_jwk(key)}
        return b

    # Bad keys: 400 with a message that names the field; nothing is stored.
    good = public_jwk(first)
    y = bytearray(b64u_decode(good["y"]))
    y[31] ^= 1
    bad = [
        ({"alg": ALG, "jwk": dict(good, y=b64u(bytes(y)))}, "not on the curve"),
        ({"alg": ALG, "jwk": dict(good, x=b64u(b64u_decode(good["x"])[1:]))}, "must hold 32 bytes for P-256, not 31"),
        ({"alg": ALG, "jwk": dict(good, crv="P-384")}, "'encryption.jwk.crv' must be 'P-256'"),
        ({"alg": ALG, "jwk": first.as_dict(private=True)}, "private key member 'd'"),
        ({"alg": "ECDH-ES", "jwk": good}, "'encryption.alg' must be ECDH-ES+A256KW or RSA-OAEP-256"),
        ({"jwk": good}, "'encryption.alg' is required"),
        ("a string", "'encryption' must be an object"),
    ]
    for encryption_member, message in bad:
        answer = expect(api.post("alice", hs("alice"), dict(body(None), encryption=encryption_member)), 400, "bad_request")
        assert message in answer["message"], (message, answer)
    answer = expect(api.post("alice", hs("alice"), body(first, format="v1")), 400, "bad_request")
    assert "'encryption' needs format v2" in answer["message"], answer
    assert expect(api.get("alice", hs("alice")), 200)["subscriptions"] == []

    # Created with the first key (no kid: the envelope has none, the JWE header neither).
    sid = expect(api.post("alice", hs("alice"), body(first)), 201)["id"]
    stack.publish(path, "SET", "1", app=app)
    [data] = received(stack, device, 1)
    assert list(data) == ["srv", "evt", "ver"], data
    assert "kid" not in json.loads(b64u_decode(data["evt"].split(".")[0]))
    assert open_with_device(data["evt"], first) == event(app, path, sid, m="value", v=1, s="OK")

    # Without allowsUpdate the key cannot be replaced; with it, it can (a new key pair on the device).
    expect(api.post("alice", hs("alice"), body(second)), 409)
    updated = expect(api.post("alice", hs("alice"), body(second), allows_update=True), 200)
    assert updated["encryption"]["jwk"] == public_jwk(second)
    stack.publish(path, "SET", "2", app=app)
    stack.wait_sends(device, 2)
    data = last_data(stack, device)
    assert open_with_device(data["evt"], second) == event(app, path, sid, m="value", v=2, s="OK")
    with pytest.raises(Exception):
        open_with_device(data["evt"], first)

    # PUT without `encryption` keeps the key; `"encryption": null` removes it: the app's key applies again.
    kept = expect(api.put("alice", hs("alice"), sid, {"mode": "value"}), 200)
    assert kept["encryption"]["jwk"] == public_jwk(second)
    removed = expect(api.put("alice", hs("alice"), sid, {"encryption": None}), 200)
    assert "encryption" not in removed
    stack.publish(path, "SET", "3", app=app)
    stack.wait_sends(device, 3)
    data = last_data(stack, device)
    assert data["kid"] == "k1"
    assert rfc_jwe.decrypt_compact(data["evt"], OctKey.import_key(K1), algorithms=["A256KW", "A256GCM"]).plaintext \
        == event(app, path, sid, m="value", v=3, s="OK")
