"""The v2 subscriptions API (seed 001, SPEC §5) with tokens made by PyJWT, and the v2 notification format
(SPEC §7) checked with joserfc: independent implementations on both sides of the gateway (issues 3 and 4)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time

import jwt
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from joserfc import jwe as rfc_jwe
from joserfc.jwk import OctKey

from gateway import gateway_binary, gateway_env
from procutil import wait_for

SECRET = "v2-tests-hs256-secret-of-enough-length"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
K1 = os.urandom(32)
K2 = os.urandom(32)


def pem(public_key) -> str:
    return public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64u_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def hs(uid: str, exp_in: int = 600, **claims) -> str:
    return jwt.encode({"uid": uid, "exp": int(time.time()) + exp_in, **claims}, SECRET, algorithm="HS256")


def rs(uid: str, key=RSA_KEY) -> str:
    return jwt.encode({"sub": uid, "exp": int(time.time()) + 600}, key, algorithm="RS256", headers={"kid": "rsa1"})


def es(uid: str) -> str:
    return jwt.encode({"uid": uid, "exp": int(time.time()) + 600}, EC_KEY, algorithm="ES256")


def encryption(active: str, k1_alg: str = "A256KW") -> dict:
    return {"active": active, "keys": [
        {"kty": "oct", "kid": "k1", "alg": k1_alg, "k": b64u(K1)},
        {"kty": "oct", "kid": "k2", "alg": "dir", "k": b64u(K2)},
    ]}


def app_settings(stack, app: str, **extra) -> dict:
    settings = {
        "enabled": True, "fcmServiceAccountFile": stack.fake.service_account_file(app),
        "authKeys": [
            {"alg": "HS256", "secret": SECRET},
            {"alg": "RS256", "kid": "rsa1", "publicKeyPEM": pem(RSA_KEY.public_key())},
            {"alg": "ES256", "publicKeyPEM": pem(EC_KEY.public_key())},
        ],
    }
    settings.update(extra)
    return settings


class V2Client:
    def __init__(self, base: str, app: str):
        self.base, self.app = base, app

    def url(self, uid: str, sid: str = "") -> str:
        return f"{self.base}/datasync/v2/{self.app}/subscriptions/{uid}" + (f"/{sid}" if sid else "")

    def post(self, uid: str, token, body: dict, allows_update: bool = False) -> requests.Response:
        return requests.post(self.url(uid) + ("?allowsUpdate=true" if allows_update else ""), json=body,
                             headers=auth(token), timeout=10)

    def get(self, uid: str, token, sid: str = "") -> requests.Response:
        return requests.get(self.url(uid, sid), headers=auth(token), timeout=10)

    def put(self, uid: str, token, sid: str, body: dict) -> requests.Response:
        return requests.put(self.url(uid, sid), json=body, headers=auth(token), timeout=10)

    def delete(self, uid: str, token, sid: str) -> requests.Response:
        return requests.delete(self.url(uid, sid), headers=auth(token), timeout=10)


def auth(token) -> dict:
    return {"Authorization": f"Bearer {token}"} if token else {}


def expect(r: requests.Response, status: int, code: str | None = None) -> dict:
    assert r.status_code == status, f"{r.request.method} {r.url}: {r.status_code} {r.text}"
    body = r.json() if r.content else {}
    if code:
        assert body.get("status") == code, body
    return body


def served(stack, app: str) -> V2Client:
    client = V2Client(stack.gateway.base, app)
    wait_for(lambda: client.get("probe", hs("probe")).status_code == 200, timeout=20, what=f"app {app} to be served",
             on_timeout=stack.gateway.tails)
    return client


@pytest.mark.timeout(180)
def test_v2_api_statuses_with_independent_tokens(stack_factory, uniq, token_factory):
    stack = stack_factory()
    app = "v2api" + uniq[4:]
    stack.write_app_settings(app, app_settings(stack, app))
    api = served(stack, app)
    device = token_factory("v2")
    body = {"kind": "mobile", "mode": "value", "path": f"{uniq}/a", "context": device}

    # Created: 201, the document, Content-Location. The same with RS256 (sub claim) and ES256 tokens.
    for uid, token in (("alice", hs("alice")), ("bob", rs("bob")), ("carol", es("carol"))):
        created = expect(api.post(uid, token, body), 201)
        assert created["path"] == f"{uniq}/a" and created["kind"] == "mobile" and created["mode"] == "value"
        assert created["format"] == "v2" and created["context"] == device
        r = api.post(uid, token, body)
        expect(r, 409, "already_exists")
        again = expect(api.post(uid, token, dict(body, mode="childEvent"), allows_update=True), 200)
        assert again["id"] == created["id"] and again["mode"] == "childEvent"
    alice = api.get("alice", hs("alice"), "")
    [doc] = expect(alice, 200)["subscriptions"]
    sid = doc["id"]
    loc = api.post("alice", hs("alice"), body, allows_update=True).headers["Content-Location"]
    assert loc == f"/datasync/v2/{app}/subscriptions/alice/{sid}"
    # The id is a function of the tuple: recreated after deletion, it is the same.
    expect(api.delete("alice", hs("alice"), sid), 204)
    expect(api.get("alice", hs("alice"), sid), 404, "not_found")
    assert expect(api.post("alice", hs("alice"), body), 201)["id"] == sid
    # Expiry: capped by the app's lifetime (30 days by default); 0 deletes.
    far = int(time.time()) + 10 * 365 * 86400
    capped = expect(api.post("alice", hs("alice"), dict(body, expirationTimestampSeconds=far), allows_update=True), 200)
    assert capped["expirationTimestampSeconds"] <= int(time.time()) + 30 * 86400 + 5
    soon = int(time.time()) + 3600
    assert expect(api.put("alice", hs("alice"), sid, {"expirationTimestampSeconds": soon}), 200)[
        "expirationTimestampSeconds"] == soon
    expect(api.post("alice", hs("alice"), dict(body, expirationTimestampSeconds=0)), 204)
    wait_for(lambda: api.get("alice", hs("alice"), sid).status_code == 404, timeout=20,
             what="the revoked subscription to be deleted")

    # Authentication: missing, expired, forged, unknown key, wrong uid.
    expect(api.post("alice", None, body), 401, "unauthorized")
    expect(api.post("alice", hs("alice", exp_in=-3600), body), 401, "unauthorized")
    forged = jwt.encode({"uid": "alice", "exp": int(time.time()) + 600}, "not-the-secret-not-the-secret-not-it!!", algorithm="HS256")
    expect(api.post("alice", forged, body), 401, "unauthorized")
    expect(api.post("alice", rs("alice", key=OTHER_RSA_KEY), body), 401, "unauthorized")
    expect(api.post("alice", jwt.encode({"uid": "alice", "exp": int(time.time()) + 600}, None, algorithm="none"), body),
           401, "unauthorized")
    expect(api.post("alice", hs("mallory"), body), 403, "permission_denied")
    expect(api.get("alice", hs("mallory")), 403, "permission_denied")
    # Body errors and unknown apps.
    expect(api.post("alice", hs("alice"), dict(body, kind="pager")), 400, "bad_request")
    expect(api.post("alice", hs("alice"), dict(body, path="/a/b.c")), 400, "bad_request")
    expect(V2Client(stack.gateway.base, "no-such-app").post("alice", hs("alice"), body), 404, "namespace_does_not_exist")


def received(stack, token: str, n: int) -> list[dict]:
    sends = stack.wait_sends(token, n)
    return [json.loads(s["body"])["message"]["data"] for s in sends[:n]]


def decrypt(evt: str, key: bytes, alg: str) -> bytes:
    return rfc_jwe.decrypt_compact(evt, OctKey.import_key(key), algorithms=[alg, "A256GCM"]).plaintext


def event(app, path, sid, **fields) -> bytes:
    """The expected event, keys in the gateway's order: t, m, a, v, c, r, s, p, id."""
    ordered = {"t": fields.pop("t", "v")}
    for k in ("m", "a", "v", "c", "r", "s"):
        if k == "a":
            ordered["a"] = app
        elif k in fields:
            ordered[k] = fields[k]
    ordered["p"], ordered["id"] = path, sid
    return json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.timeout(180)
def test_v2_notifications_encrypted_rotated_degraded_and_decoded(stack_factory, uniq, token_factory, tmp_path):
    stack = stack_factory()
    app = "v2enc" + uniq[4:]
    stack.write_app_settings(app, app_settings(stack, app, encryption=encryption("k1")))
    api = served(stack, app)
    device = token_factory("enc")
    path = f"{uniq}/doc"
    sid = expect(api.post("alice", hs("alice"), {"kind": "mobile", "mode": "value", "path": path, "context": device}),
                 201)["id"]

    stack.publish(path, "SET", json.dumps({"b": "é", "a": 1}), app=app)
    [data] = received(stack, device, 1)
    assert list(data) == ["srv", "kid", "evt", "ver"] and data["srv"] == "webcom" and data["ver"] == "v2"
    assert data["kid"] == "k1"
    header = json.loads(b64u_decode(data["evt"].split(".")[0]))
    assert header == {"alg": "A256KW", "enc": "A256GCM", "kid": "k1"}
    assert decrypt(data["evt"], K1, "A256KW") == event(app, path, sid, m="value", v={"a": 1, "b": "é"}, s="OK")

    # Rotation: k2 (dir) becomes active without a restart.
    stack.write_app_settings(app, app_settings(stack, app, encryption=encryption("k2")))

    def rotated():
        stack.publish(path, "SET", '"x"', app=app)
        sends = stack.fake.sends_for(device)
        last = json.loads(sends[-1]["body"])["message"]["data"]
        return last if last.get("kid") == "k2" else None
    data2 = wait_for(rotated, timeout=20, interval=0.5, what="a notification encrypted with the rotated key k2")
    assert decrypt(data2["evt"], K2, "dir") == event(app, path, sid, m="value", v="x", s="OK")

    # Size rule on the encrypted payload: ~3 KB of data encrypts to more than 4064 bytes → TooBig, no value.
    big = "z" * 2900
    stack.publish(path, "SET", json.dumps(big), app=app)
    def degraded():
        last = json.loads(stack.fake.sends_for(device)[-1]["body"])["message"]["data"]
        return last if decrypt(last["evt"], K2, "dir") == event(app, path, sid, m="value", s="TooBig") else None
    big_data = wait_for(degraded, timeout=20, what="the TooBig notification")
    assert len(json.dumps(big_data, separators=(",", ":")).encode()) < 4064

    # The decode command, as an app developer uses it, with the app's key set as a file.
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(encryption("k2")))
    out = subprocess.run([gateway_binary(), "decode", "--key-file", str(keys), json.dumps(data)],
                         capture_output=True, text=True, timeout=30, env=gateway_env())
    assert out.returncode == 0, out.stderr
    decoded = json.loads(out.stdout)
    assert decoded["v"] == {"a": 1, "b": "é"} and decoded["id"] == sid and decoded["p"] == path
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"kty": "oct", "kid": "k1", "alg": "A256KW", "k": b64u(os.urandom(32))}))
    out = subprocess.run([gateway_binary(), "decode", "--key-file", str(wrong), json.dumps(data)],
                         capture_output=True, text=True, timeout=30, env=gateway_env())
    assert out.returncode != 0 and "decrypt" in out.stderr


@pytest.mark.timeout(180)
def test_v2_unsecured_and_v1_format_choice_and_revoke(stack_factory, uniq, token_factory):
    stack = stack_factory()
    app = "v2jws" + uniq[4:]
    rules = {"rules": {"users": {"$uid": {".read": "auth.uid == $uid"}}}}
    stack.write_app_settings(app, app_settings(stack, app, rules=rules))
    api = served(stack, app)
    v2_device, v1_device = token_factory("jws"), token_factory("v1fmt")
    path = "/users/alice/inbox"
    sid = expect(api.post("alice", hs("alice"), {"kind": "mobile", "mode": "childEvent", "path": path,
                                                  "context": v2_device}), 201)["id"]
    expect(api.post("alice", hs("alice"), {"kind": "mobile", "mode": "noData", "path": path, "context": v1_device,
                                           "format": "v1"}), 201)
    stack.publish(f"{path}/m1", "SET", '"hi"', app=app)
    [data] = received(stack, v2_device, 1)
    assert list(data) == ["srv", "evt", "ver"], data
    head, payload, signature = data["evt"].split(".")
    assert json.loads(b64u_decode(head)) == {"alg": "none"} and signature == ""
    # The node's data was never seen: the changed key is known, its values are not (OnlyKeys).
    assert b64u_decode(payload) == event(app, path, sid, m="childEvent", c={"a": {}, "r": [], "c": {"m1": True}},
                                         s="OnlyKeys")
    [v1] = received(stack, v1_device, 1)
    assert v1 == {"t": "noData", "app": app, "sp": path}

    # Rules change: both are revoked, each in its own format.
    stack.write_app_settings(app, app_settings(stack, app, rules={"rules": {".read": False}}))
    stack.wait_sends(v2_device, 2)
    [_, revoke] = received(stack, v2_device, 2)
    assert b64u_decode(revoke["evt"].split(".")[1]) == event(app, path, sid, t="r", r="permission_denied")
    [_, v1_revoke] = received(stack, v1_device, 2)
    assert v1_revoke == {"t": "revoke", "r": "permission_denied", "app": app, "sp": path}
    wait_for(lambda: api.get("alice", hs("alice"), sid).status_code == 404, timeout=20,
             what="the revoked subscription to be deleted")
