"""`kind: "webpush"` subscriptions (Web Push: RFC 8030, RFC 8291, RFC 8292), end to end: the real gateway and Tansu,
a loopback push service over HTTPS (tests/fakes/fake_webpush.py: a self-signed certificate trusted through the
app's `webPush.caFile`) that checks each request as a push service does and decrypts its body as the subscribed
browser would, with the independent `http_ece`; the VAPID JWT is verified with `joserfc` against the `k` key and
with PyJWT against the public half of the app's key file. The tests see: the message is the data document FCM gets
(v1 byte for byte, v2's event), the headers (TTL, Urgency, Topic, content coding), a user notification's TTL and
collapse key, retries (503, 429 with Retry-After, each attempt a new encryption of the same message), order, 404
and 410 revocation, 413 dropped, 403 kept, and the refusals at subscribe time (private endpoints, bad contexts, an
app without Web Push settings) and at delivery (a name that resolves to a refused address)."""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import socket
import sys

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from payloads import no_data, raw_member, serialise_data, value as value_payload
from procutil import wait_for
from v2_api import V2Api, metric, wait_metric  # noqa: E402

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "fakes")))
from fake_fcm import make_self_signed_cert  # noqa: E402
from fake_webpush import Browser, FakePushService, b64u, b64u_decode, parse_vapid, uncompressed_point  # noqa: E402

SECRET = "webpush-tests-hs256-secret-of-enough-length"
_api = V2Api(SECRET)
hs, api_url, subscribe, created, get, served = _api.hs, V2Api.url, _api.subscribe, _api.created, _api.get, _api.served

SUBJECT = "mailto:ops@example.com"
PUBLIC_ENDPOINT = "https://push.example.com/wpush/send/abc123"


class Vapid:
    """An app's VAPID key, written to a file in one of the forms the gateway reads."""

    def __init__(self, directory, form: str):
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.k = b64u(uncompressed_point(self.key.public_key()))
        self.public_pem = self.key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        if form == "jwk":
            numbers = self.key.private_numbers()
            text = json.dumps({"kty": "EC", "crv": "P-256", "d": b64u(numbers.private_value.to_bytes(32, "big")),
                               "x": b64u(numbers.public_numbers.x.to_bytes(32, "big")),
                               "y": b64u(numbers.public_numbers.y.to_bytes(32, "big"))})
            self.path = str(directory / "vapid.jwk.json")
        else:
            fmt = {"sec1": serialization.PrivateFormat.TraditionalOpenSSL,
                   "pkcs8": serialization.PrivateFormat.PKCS8}[form]
            text = self.key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()).decode()
            assert ("EC PRIVATE KEY" in text) == (form == "sec1")
            self.path = str(directory / f"vapid.{form}.pem")
        with open(self.path, "w") as f:
            f.write(text)


def settings(stack, app: str, vapid: Vapid, **web_push) -> dict:
    return {"enabled": True, "fcmServiceAccountFile": stack.fake.service_account_file(app),
            "authKeys": [{"alg": "HS256", "secret": SECRET}],
            "webPush": {"vapidKeyFile": vapid.path, "subject": SUBJECT, **web_push}}


def wait_accepted(stack, service: FakePushService, path: str, n: int, timeout: float = 30) -> list[dict]:
    """The first `n` pushes to `path` the service accepted (201)."""
    def enough():
        if not stack.gateway.proc.alive():
            raise AssertionError(f"gateway died\n{stack.gateway.tails()}")
        got = service.accepted(path)
        return got[:n] if len(got) >= n else None
    return wait_for(enough, timeout=timeout, what=f"{n} accepted push(es) to {path}",
                    on_timeout=lambda: service.describe(path) + "\n" + stack.gateway.tails())


def webpush_body(path: str, context, mode: str = "noData", fmt: str = "v1") -> dict:
    return {"kind": "webpush", "path": path, "mode": mode, "format": fmt, "context": context}


def stored_context(endpoint: str, browser: Browser) -> dict:
    """The subscription document's `context`: the endpoint and keys as sent (no expirationTime)."""
    return {"endpoint": endpoint, "keys": {"p256dh": browser.p256dh, "auth": browser.auth_b64}}


def event(app, path, sid, **fields) -> bytes:
    """A v2 event's payload, keys in the gateway's order: t, m, a, v, c, r, s, p, id (as test_v2.py)."""
    ordered = {"t": fields.pop("t", "v")}
    for k in ("m", "a", "v", "c", "r", "s"):
        if k == "a":
            ordered["a"] = app
        elif k in fields:
            ordered[k] = fields[k]
    ordered["p"], ordered["id"] = path, sid
    return json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode()


def v2_payload(plaintext: bytes) -> bytes:
    """The payload of the unsecured JWS in a v2 document (no app keys: `alg` none, no signature)."""
    data = json.loads(plaintext)
    assert list(data) == ["srv", "evt", "ver"] and data["srv"] == "webcom" and data["ver"] == "v2", data
    head, payload, signature = data["evt"].split(".")
    assert json.loads(b64u_decode(head)) == {"alg": "none"} and signature == "", data["evt"]
    return b64u_decode(payload)


def v1_user_data(app: str, event_id: str, data_text: str) -> bytes:
    """The v1 document of a user notification (docs/PAYLOADS.md), as test_user_notifications.py builds it."""
    return json.dumps({"s": "OK", "t": "user", "app": app, "id": event_id, "d": data_text},
                      separators=(",", ":"), ensure_ascii=False).encode()


def check_push(record: dict, service: FakePushService, vapid: Vapid, *, ttl: str, urgency: str = "normal",
               topic: str | None = None) -> dict:
    """A well-formed push: the headers of the contract, and a VAPID JWT for the service's origin signed by the app's
    key (joserfc in the fake with `k`; PyJWT here with the key file's public half). Returns the JWT's claims."""
    assert record["problems"] == [], service.describe(record["path"])
    headers = record["headers"]
    assert headers.get("content-encoding") == "aes128gcm", headers
    assert headers.get("content-type") == "application/octet-stream", headers
    assert headers.get("ttl") == ttl, headers
    assert headers.get("urgency") == urgency, headers
    assert headers.get("topic") == topic, headers
    assert record["vapid"]["k"] == vapid.k, "k is not the public half of the app's VAPID key"
    assert record["vapid"]["header"] == {"typ": "JWT", "alg": "ES256"}, record["vapid"]["header"]
    token, _ = parse_vapid(headers["authorization"])
    claims = jwt.decode(token, vapid.public_pem, algorithms=["ES256"], audience=service.origin,
                        options={"require": ["aud", "exp", "sub"]})
    assert set(claims) == {"aud", "exp", "sub"}, claims
    assert claims["aud"] == service.origin and claims["sub"] == SUBJECT, claims
    assert record["at"] - 5 < claims["exp"] <= record["at"] + 24 * 3600 + 5, (claims, record["at"])
    return claims


@pytest.fixture
def service(tmp_path):
    cert, key = make_self_signed_cert(str(tmp_path / "tls"))
    s = FakePushService(cert, key)
    s.cert = cert
    yield s
    s.close()


@pytest.mark.timeout(240)
def test_webpush_delivered_encrypted_with_vapid_ttl_urgency_and_topic(stack_factory, uniq, service, tmp_path,
                                                                      token_factory):
    stack = stack_factory()
    app = "wpush" + uniq[4:]
    vapid = Vapid(tmp_path, "sec1")
    stack.write_app_settings(app, settings(stack, app, vapid, allowPrivateEndpoints=True, caFile=service.cert,
                                           timeoutMs=5000, ttlSeconds=7200, urgency="normal"))
    served(stack, app)
    path = f"{uniq}/doc"

    # A v1 noData subscription with the browser's PushSubscription.toJSON() as is (expirationTime null), and a v2
    # value one whose context is that JSON as a string (with an expirationTime, ignored).
    ep1, browser1 = service.subscribe("/push/v1-nodata")
    ep2, browser2 = service.subscribe("/push/v2-value")
    body1 = webpush_body(path, browser1.subscription(ep1))
    doc1 = created(stack, app, body1)
    assert doc1["kind"] == "webpush" and doc1["context"] == stored_context(ep1, browser1), doc1
    sid1 = doc1["id"]
    doc2 = created(stack, app, webpush_body(path, json.dumps(browser2.subscription(ep2, 1893456000000)),
                                            mode="value", fmt="v2"))
    assert doc2["kind"] == "webpush" and doc2["context"] == stored_context(ep2, browser2), doc2
    sid2 = doc2["id"]
    assert sid1 != sid2
    r = subscribe(stack, app, body1)
    assert r.status_code == 409, r.text
    got = get(stack, app, sid1)
    assert got.status_code == 200 and got.json()["context"] == stored_context(ep1, browser1), got.text
    # A PUT whose body has no kind names the subscription by its context as an object or as JSON text.
    for context in (browser1.subscription(ep1), json.dumps(browser1.subscription(ep1))):
        r = _api.put(stack, app, sid1, {"context": context, "mode": "noData"})
        assert r.status_code == 200 and r.json()["context"] == stored_context(ep1, browser1), (r.status_code, r.text)
    # An FCM device subscribed alike (v1 noData): the browser reads the document FCM gets, byte for byte.
    phone = token_factory("phone")
    created(stack, app, {"kind": "mobile", "path": path, "mode": "noData", "format": "v1", "context": phone})

    stack.publish(path, "SET", json.dumps({"b": "é", "a": 1}), app=app)
    [m1] = wait_accepted(stack, service, "/push/v1-nodata", 1)
    [m2] = wait_accepted(stack, service, "/push/v2-value", 1)
    fcm_data = raw_member(stack.wait_sends(phone, 1)[0]["body"], "message", "data").encode()
    assert m1["plaintext"] == serialise_data(no_data(app, path)) == fcm_data, (m1["plaintext"], fcm_data)
    assert v2_payload(m2["plaintext"]) == event(app, path, sid2, m="value", v={"a": 1, "b": "é"}, s="OK")
    for m in (m1, m2):
        check_push(m, service, vapid, ttl="7200", urgency="normal")
        assert m["location"] is not None  # answered 201 Created with a Location, as RFC 8030 §5 says

    # User notifications: the publisher's TTL overrides the app's, a collapse key becomes the Topic (as is when it
    # is a valid topic, else 32 base64url characters derived from it, the same for the same key).
    eid = stack.notify_user("alice", {"n": 1}, app=app, ttl_seconds=60, collapse_key="room-1")
    u1 = wait_accepted(stack, service, "/push/v1-nodata", 2)[1]
    u2 = wait_accepted(stack, service, "/push/v2-value", 2)[1]
    assert u1["plaintext"] == v1_user_data(app, eid, '{"n":1}'), u1["plaintext"]
    assert json.loads(v2_payload(u2["plaintext"])) == {"t": "u", "a": app, "v": {"n": 1}, "s": "OK", "e": eid}
    for m in (u1, u2):
        check_push(m, service, vapid, ttl="60", topic="room-1")

    long_key = "chat:room/" + "x" * 40
    stack.notify_user("alice", {"n": 2}, app=app, ttl_seconds=0, collapse_key=long_key)
    stack.notify_user("alice", {"n": 3}, app=app, collapse_key=long_key)
    u1b, u1c = wait_accepted(stack, service, "/push/v1-nodata", 4)[2:]
    u2b, u2c = wait_accepted(stack, service, "/push/v2-value", 4)[2:]
    assert [json.loads(json.loads(m["plaintext"])["d"]) for m in (u1b, u1c)] == [{"n": 2}, {"n": 3}]
    assert [json.loads(v2_payload(m["plaintext"]))["v"] for m in (u2b, u2c)] == [{"n": 2}, {"n": 3}]
    topic = u1b["headers"].get("topic")
    assert topic is not None and len(topic) == 32 and topic != long_key[:32], topic
    for m, ttl in ((u1b, "0"), (u2b, "0"), (u1c, "7200"), (u2c, "7200")):
        check_push(m, service, vapid, ttl=ttl, topic=topic)
    # The plain SET carried no topic (checked above); nothing went anywhere else.
    assert len(service.received("/push/v1-nodata")) == 4 and len(service.received("/push/v2-value")) == 4
    wait_metric(stack, "pushgateway_notifications_sent_total", 8, provider="webpush")


@pytest.mark.timeout(240)
def test_webpush_retried_with_new_encryptions_and_in_order(stack_factory, uniq, service, tmp_path):
    stack = stack_factory()
    app = "wpretry" + uniq[4:]
    vapid = Vapid(tmp_path, "pkcs8")
    stack.write_app_settings(app, settings(stack, app, vapid, allowPrivateEndpoints=True, caFile=service.cert,
                                           timeoutMs=5000, ttlSeconds=120, urgency="high"))
    served(stack, app)
    path = f"{uniq}/doc"
    endpoint, browser = service.subscribe("/push/retry")
    created(stack, app, webpush_body(path, browser.subscription(endpoint), mode="value"))

    # 503, then 429 with Retry-After: 1, then accepted: three attempts of one message.
    service.script("/push/retry", [(503, None), (429, "1")])
    stack.publish(path, "SET", "1", app=app)
    attempts = wait_for(lambda: (lambda got: got[:3] if len(got) >= 3 else None)(service.received("/push/retry")),
                        timeout=60, what="three attempts of the first message",
                        on_timeout=lambda: service.describe("/push/retry") + "\n" + stack.gateway.tails())
    assert [a["status"] for a in attempts] == [503, 429, 201], service.describe("/push/retry")
    assert attempts[2]["at"] - attempts[1]["at"] >= 0.9, "Retry-After: 1 was not honoured"
    expected = serialise_data(value_payload(app, path, 1))
    for a in attempts:
        check_push(a, service, vapid, ttl="120", urgency="high")
        assert a["plaintext"] == expected, a["plaintext"]
    # Each attempt is encrypted anew: another sender key, another salt, another body.
    assert len({a["salt"] for a in attempts}) == 3 and len({a["sender_key"] for a in attempts}) == 3
    assert len({a["body"] for a in attempts}) == 3

    # Order: later messages arrive, and decrypt, in publish order.
    for v in range(2, 8):
        stack.publish(path, "SET", str(v), app=app)

    def values():
        got = [json.loads(json.loads(m["plaintext"])["d"]) for m in service.accepted("/push/retry")]
        return got if got and got[-1] == 7 else None
    got = wait_for(values, timeout=30, what="values 2..7 at /push/retry",
                   on_timeout=lambda: service.describe("/push/retry") + "\n" + stack.gateway.tails())
    assert got == list(range(1, 8)), got
    for m in service.accepted("/push/retry"):
        check_push(m, service, vapid, ttl="120", urgency="high")
    assert metric(stack, "pushgateway_notifications_failed_total", provider="webpush", reason="http_503") >= 1
    assert metric(stack, "pushgateway_notifications_failed_total", provider="webpush", reason="http_429") >= 1
    wait_metric(stack, "pushgateway_notifications_sent_total", 7, provider="webpush")


@pytest.mark.timeout(240)
def test_webpush_410_and_404_revoke_413_drops_403_keeps(stack_factory, uniq, service, tmp_path):
    stack = stack_factory()
    app = "wprevoke" + uniq[4:]
    vapid = Vapid(tmp_path, "jwk")
    stack.write_app_settings(app, settings(stack, app, vapid, allowPrivateEndpoints=True, caFile=service.cert,
                                           timeoutMs=5000))
    served(stack, app)
    path = f"{uniq}/doc"
    sids, endpoints = {}, {}
    for name in ("gone", "notfound", "big", "forbidden", "ok"):
        endpoint, browser = service.subscribe(f"/push/{name}")
        doc = created(stack, app, webpush_body(path, browser.subscription(endpoint)))
        assert doc["context"] == stored_context(endpoint, browser), doc
        sids[name], endpoints[name] = doc["id"], endpoint
    assert len(set(sids.values())) == 5
    expected = serialise_data(no_data(app, path))

    service.script("/push/gone", [(410, None)])
    service.script("/push/notfound", [(404, None)])
    service.script("/push/big", [(413, None)])
    stack.publish(path, "SET", "1", app=app)
    for name in ("gone", "notfound"):
        wait_for(lambda: get(stack, app, sids[name]).status_code == 404, timeout=30,
                 what=f"the {name} subscription to be deleted",
                 on_timeout=lambda: service.describe() + "\n" + stack.gateway.tails())
    wait_metric(stack, "pushgateway_notifications_failed_total", 1, provider="webpush", reason="too_big")
    assert [r["status"] for r in service.received("/push/big")] == [413]
    assert get(stack, app, sids["big"]).status_code == 200  # dropped, not revoked
    for name, status in (("gone", 410), ("notfound", 404), ("big", 413)):
        [r] = service.received(f"/push/{name}")
        assert r["status"] == status and r["plaintext"] == expected, service.describe(r["path"])
        check_push(r, service, vapid, ttl="2419200")
    assert wait_accepted(stack, service, "/push/ok", 1)[0]["plaintext"] == expected

    # The next message: to the subscriptions that remain, not to the revoked ones.
    stack.publish(path, "SET", "2", app=app)
    wait_accepted(stack, service, "/push/ok", 2)
    wait_accepted(stack, service, "/push/big", 1)
    assert [r["status"] for r in service.received("/push/big")] == [413, 201]
    assert len(wait_accepted(stack, service, "/push/forbidden", 2)) == 2
    assert len(service.received("/push/gone")) == 1 and len(service.received("/push/notfound")) == 1

    # 403: our fault (the VAPID key, say); the subscription is kept (no need to see the retry).
    service.script("/push/forbidden", [(403, None)])
    stack.publish(path, "SET", "3", app=app)
    [forbidden] = wait_for(lambda: [r for r in service.received("/push/forbidden") if r["status"] == 403], timeout=30,
                           what="the 403 at /push/forbidden",
                           on_timeout=lambda: service.describe("/push/forbidden") + "\n" + stack.gateway.tails())
    check_push(forbidden, service, vapid, ttl="2419200")
    assert forbidden["plaintext"] == expected
    assert get(stack, app, sids["forbidden"]).status_code == 200


@pytest.mark.timeout(180)
def test_webpush_endpoints_and_contexts_refused_at_subscribe(stack_factory, uniq, service, tmp_path):
    stack = stack_factory()
    app = "wpssrf" + uniq[4:]
    vapid = Vapid(tmp_path, "sec1")
    stack.write_app_settings(app, settings(stack, app, vapid, allowPrivateEndpoints=False, caFile=service.cert))
    bare = "wpnone" + uniq[4:]
    stack.write_app_settings(bare, {"enabled": True, "authKeys": [{"alg": "HS256", "secret": SECRET}]})
    served(stack, app)
    served(stack, bare)
    path = f"{uniq}/doc"
    browser = Browser()

    def refused(body: dict, what, contains: str | None = None) -> None:
        r = subscribe(stack, app, body)
        assert r.status_code == 400, (what, r.status_code, r.text)
        answer = r.json()
        assert isinstance(answer.get("status"), str) and isinstance(answer.get("message"), str), (what, answer)
        if contains:
            assert contains in answer["message"], (what, answer)

    port = service.port
    for endpoint in (f"https://127.0.0.1:{port}/push/x", f"https://[::1]:{port}/push/x", "https://10.1.2.3/push/x",
                     "https://192.168.0.1/push/x", "https://172.16.5.4/push/x", "https://169.254.169.254/push/x",
                     "https://[fe80::1]/push/x", "https://localhost/push/x", f"https://localhost:{port}/push/x"):
        refused(webpush_body(path, browser.subscription(endpoint)), endpoint, "refused")
    assert service.requests == []

    # A public endpoint with good keys is taken: the refusals below are about what each one changes.
    good = browser.subscription(PUBLIC_ENDPOINT)
    assert created(stack, app, webpush_body(path, good))["context"] == stored_context(PUBLIC_ENDPOINT, browser)
    compressed = browser.key.public_key().public_bytes(serialization.Encoding.X962,
                                                       serialization.PublicFormat.CompressedPoint)
    keys = good["keys"]
    bad_contexts = {
        "http endpoint": dict(good, endpoint="http://push.example.com/wpush/send/abc"),
        "ftp endpoint": dict(good, endpoint="ftp://push.example.com/x"),
        "endpoint with user info": dict(good, endpoint="https://user@push.example.com/x"),
        "not a URL": dict(good, endpoint="push service"),
        "no endpoint": {"keys": keys},
        "no keys": {"endpoint": PUBLIC_ENDPOINT},
        "no p256dh": {"endpoint": PUBLIC_ENDPOINT, "keys": {"auth": keys["auth"]}},
        "no auth": {"endpoint": PUBLIC_ENDPOINT, "keys": {"p256dh": keys["p256dh"]}},
        "p256dh of 10 bytes": dict(good, keys=dict(keys, p256dh=b64u(os.urandom(10)))),
        "p256dh compressed": dict(good, keys=dict(keys, p256dh=b64u(compressed))),
        "p256dh off the curve": dict(good, keys=dict(keys, p256dh=b64u(b"\x04" + b"\x00" * 63 + b"\x01"))),
        "p256dh not base64url": dict(good, keys=dict(keys, p256dh="not base64 !!")),
        "auth of 15 bytes": dict(good, keys=dict(keys, auth=b64u(os.urandom(15)))),
        "auth of 17 bytes": dict(good, keys=dict(keys, auth=b64u(os.urandom(17)))),
        "auth not base64url": dict(good, keys=dict(keys, auth="$$$$$$$$$$$$$$$$$$$$$$")),
        "a string not JSON": "{not json",
        "a number": 42,
    }
    for what, context in bad_contexts.items():
        refused(webpush_body(f"{path}/{len(what)}", context), what)
    refused({"kind": "webpush", "path": path, "mode": "noData"}, "no context")
    jwk = {"kty": "EC", "crv": "P-256", "x": b64u(uncompressed_point(browser.key.public_key())[1:33]),
           "y": b64u(uncompressed_point(browser.key.public_key())[33:])}
    other = Browser()
    refused(dict(webpush_body(path, other.subscription(PUBLIC_ENDPOINT), fmt="v2"),
                 encryption={"alg": "ECDH-ES+A256KW", "jwk": jwk}), "encryption on a webpush subscription")
    # The same context without `encryption` is fine: the refusal was about the member.
    created(stack, app, webpush_body(path, other.subscription(PUBLIC_ENDPOINT), fmt="v2"))

    # An app without webPush settings takes no webpush subscription.
    r = subscribe(stack, bare, webpush_body(path, Browser().subscription(PUBLIC_ENDPOINT)))
    assert r.status_code == 400 and isinstance(r.json().get("message"), str), r.text
    assert service.requests == []


@pytest.mark.timeout(180)
def test_webpush_endpoint_resolving_to_a_refused_address_is_dropped_at_delivery(stack_factory, uniq, service,
                                                                                 tmp_path):
    host = socket.gethostname().lower()
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except socket.gaierror:
        pytest.skip(f"the host name {host} does not resolve here")
    if not all(ipaddress.ip_address(a.split("%")[0]).is_private for a in resolved):
        pytest.skip(f"{host} resolves to a public address here: {resolved}")
    stack = stack_factory()
    app = "wpdns" + uniq[4:]
    vapid = Vapid(tmp_path, "sec1")
    stack.write_app_settings(app, settings(stack, app, vapid, allowPrivateEndpoints=False, caFile=service.cert,
                                           timeoutMs=5000))
    served(stack, app)
    path = f"{uniq}/doc"
    endpoint, browser = service.subscribe("/push/dns", host=host)
    sid = created(stack, app, webpush_body(path, browser.subscription(endpoint)))["id"]
    stack.publish(path, "SET", "1", app=app)
    wait_metric(stack, "pushgateway_notifications_failed_total", 1, provider="webpush", reason="address_refused")
    assert service.received("/push/dns") == []
    assert get(stack, app, sid).status_code == 200  # dropped, nobody revoked
