"""`kind: "apns"` subscriptions (Apple Push Notification service, token-based authentication), end to end: the real
gateway and Tansu, and two fake APNs servers (tests/fakes/fake_apns.py: HTTP/2 over TLS, one self-signed certificate
trusted through the main configuration's `apns.caFile`), one for the production base URL and one for the development
one. The fake checks each request as APNs does (the ES256 provider token against the team's registered public key,
its age, the topic against the team's bundle ids, push type and priority, the device token, the payload) and answers
with Apple's statuses and reasons; here the provider token is verified again with PyJWT against the public half of
the app's .p8 key. The tests see: a background push over HTTP/2 whose data is byte for byte the document FCM gets
(v1; v2's event), the development app sent to the development host, an upper-case token being the same subscription,
one provider token reused, a user notification's apns-expiration and apns-collapse-id, retries (503, 429, 500) with
identical bodies and the order kept, revocation on Unregistered, BadDeviceToken and DeviceTokenNotForTopic,
PayloadTooLarge dropped, our own faults (InvalidProviderToken, TopicDisallowed) kept and counted, and the refusals at
subscribe time and of bad app settings."""

from __future__ import annotations

import base64
import json
import os
import secrets
import sys
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from payloads import no_data, raw_member, serialise_data, value as value_payload
from procutil import wait_for
from v2_api import V2Api, metric, wait_metric  # noqa: E402

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "fakes")))
from fake_apns import FakeAPNsServer, public_pem, write_p8  # noqa: E402
from fake_fcm import make_self_signed_cert  # noqa: E402

SECRET = "apns-tests-hs256-secret-of-enough-length"
_api = V2Api(SECRET)
hs, api_url, subscribe, created, get, served = _api.hs, V2Api.url, _api.subscribe, _api.created, _api.get, _api.served

TEAM = "TEAM123456"
KEY_ID = "KEY1234567"
DEV_KEY_ID = "DEVKEY0001"
BUNDLE = "com.example.app"
DEV_BUNDLE = "com.example.app.dev"
PREFIX = b'{"aps":{"content-available":1},"data":'
REASON_STATUS = {"InvalidProviderToken": 403, "TopicDisallowed": 400}


def device_token() -> str:
    """A device token as an iOS app gets it: 32 bytes, in hex."""
    return secrets.token_hex(32)


def b64u_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TeamKey:
    """A team's APNs signing key: the .p8 file the app settings name, and its public half for the fakes."""

    def __init__(self, directory, key_id: str, team_id: str = TEAM):
        self.key_id, self.team_id = key_id, team_id
        self.key, self.path = write_p8(directory / f"AuthKey_{key_id}.p8")
        self.public_pem = public_pem(self.key)


class Fakes:
    def __init__(self, prod: FakeAPNsServer, dev: FakeAPNsServer, cert: str):
        self.prod, self.dev, self.cert = prod, dev, cert

    def register(self, key: TeamKey, bundles=(BUNDLE, DEV_BUNDLE)) -> None:
        """A key works in both environments, as an APNs key does."""
        for server in (self.prod, self.dev):
            server.register_team(key.team_id, key.key_id, key.public_pem, list(bundles))

    def describe(self) -> str:
        return self.prod.describe() + "\n" + self.dev.describe()


@pytest.fixture
def apns(tmp_path):
    """The production and development fakes, sharing one certificate. Tests name this fixture before
    `stack_factory`, so that their gateway stops first (a fake stopped under the gateway's open HTTP/2 connections
    waits for them up to its stop timeout)."""
    cert, key = make_self_signed_cert(str(tmp_path / "apns-tls"))
    prod = FakeAPNsServer(tls_cert=cert, tls_key=key, environment="production")
    dev = FakeAPNsServer(tls_cert=cert, tls_key=key, environment="development")
    try:
        prod.start()
        dev.start()
        yield Fakes(prod, dev, cert)
    finally:
        dev.stop()
        prod.stop()


def apns_stack(stack_factory, apns: Fakes):
    """A gateway whose main configuration sends APNs pushes to the fakes."""
    stack = stack_factory(start=False)
    stack.config["apns"] = {"baseURL": apns.prod.base_url, "developmentBaseURL": apns.dev.base_url,
                            "caFile": apns.cert, "requestTimeoutMs": 5000}
    return stack.start()


def settings(stack, app: str, key: TeamKey, bundle: str = BUNDLE, environment: str = "production", **extra) -> dict:
    return {"enabled": True, "fcmServiceAccountFile": stack.fake.service_account_file(app),
            "authKeys": [{"alg": "HS256", "secret": SECRET}],
            "apns": {"teamId": key.team_id, "keyId": key.key_id, "keyFile": key.path, "bundleId": bundle,
                     "environment": environment, **extra}}


def wait_received(stack, server: FakeAPNsServer, token: str, n: int, accepted: bool = True,
                  timeout: float = 30) -> list[dict]:
    """The first `n` pushes to `token` (answered 200 when `accepted`), in arrival order."""
    def enough():
        if not stack.gateway.proc.alive():
            raise AssertionError(f"gateway died\n{stack.gateway.tails()}")
        got = server.accepted(token) if accepted else server.received(token)
        return got[:n] if len(got) >= n else None
    return wait_for(enough, timeout=timeout, what=f"{n} push(es) to {token} at the {server.environment} fake APNs",
                    on_timeout=lambda: server.describe(token) + "\n" + stack.gateway.tails())


def apns_body(path: str, context, mode: str = "noData", fmt: str = "v1") -> dict:
    return {"kind": "apns", "path": path, "mode": mode, "format": fmt, "context": context}


def data_of(record: dict) -> bytes:
    """The data document of a push: the body is exactly {"aps":{"content-available":1},"data":<document>}."""
    body = record["body"]
    assert body.startswith(PREFIX) and body.endswith(b"}"), body
    data = body[len(PREFIX):-1]
    assert isinstance(json.loads(data), dict), body
    return data


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


def v2_payload(data: bytes) -> bytes:
    """The payload of the unsecured JWS in a v2 document (no app keys: `alg` none, no signature)."""
    document = json.loads(data)
    assert list(document) == ["srv", "evt", "ver"] and document["srv"] == "webcom" and document["ver"] == "v2", document
    head, payload, signature = document["evt"].split(".")
    assert json.loads(b64u_decode(head)) == {"alg": "none"} and signature == "", document["evt"]
    return b64u_decode(payload)


def v1_user_data(app: str, event_id: str, data_text: str) -> bytes:
    """The v1 document of a user notification (docs/PAYLOADS.md), as test_user_notifications.py builds it."""
    return json.dumps({"s": "OK", "t": "user", "app": app, "id": event_id, "d": data_text},
                      separators=(",", ":"), ensure_ascii=False).encode()


def check_push(record: dict, key: TeamKey, bundle: str, *, expiration: tuple[int, int] | None = None,
               collapse_id: str | None = None) -> dict:
    """A well-formed background push over HTTP/2 answered 200, its headers as the contract says, its provider token
    an ES256 JWT of exactly {"alg","kid"} / {"iss","iat"} that PyJWT verifies with the public half of the app's key.
    `expiration`: the bounds of apns-expiration (None: no such header). Returns the JWT's claims."""
    assert record["http_version"] == "2", record["http_version"]
    assert record["status"] == 200 and record["problems"] == [], (record["status"], record["problems"])
    assert record["method"] == "POST" and record["path"] == "/3/device/" + record["token"]
    headers = record["headers"]
    assert headers.get("apns-push-type") == "background", headers
    assert headers.get("apns-priority") == "5", headers
    assert headers.get("apns-topic") == bundle, headers
    if expiration is None:
        assert "apns-expiration" not in headers, headers
    else:
        low, high = expiration
        assert low <= int(headers["apns-expiration"]) <= high, (headers["apns-expiration"], expiration)
    assert headers.get("apns-collapse-id") == collapse_id, headers
    scheme, _, token = headers["authorization"].partition(" ")
    assert scheme == "bearer", headers["authorization"][:20]
    head = json.loads(b64u_decode(token.split(".")[0]))
    assert head == {"alg": "ES256", "kid": key.key_id}, head
    claims = jwt.decode(token, key.public_pem, algorithms=["ES256"], options={"require": ["iss", "iat"]})
    assert set(claims) == {"iss", "iat"} and claims["iss"] == key.team_id, claims
    assert isinstance(claims["iat"], int) and record["time"] - 3600 < claims["iat"] <= record["time"] + 5, claims
    return claims


@pytest.mark.timeout(240)
def test_apns_background_push_over_http2_with_the_provider_token(apns, stack_factory, uniq, tmp_path, token_factory):
    stack = apns_stack(stack_factory, apns)
    app, dev_app = "apns" + uniq[4:], "apnsdev" + uniq[4:]
    key, dev_key = TeamKey(tmp_path, KEY_ID), TeamKey(tmp_path, DEV_KEY_ID)
    apns.register(key)
    apns.register(dev_key)
    stack.write_app_settings(app, settings(stack, app, key))
    stack.write_app_settings(dev_app, settings(stack, dev_app, dev_key, bundle=DEV_BUNDLE, environment="development"))
    served(stack, app)
    served(stack, dev_app)
    path, dev_path = f"{uniq}/doc", f"{uniq}/dev"

    # A v1 noData subscription, and a v2 value one whose token is given in upper case: stored and echoed in lower
    # case, the same subscription as its lower-case spelling (409 for either).
    t1, t2, t3 = device_token(), device_token(), device_token()
    doc1 = created(stack, app, apns_body(path, t1))
    assert doc1["kind"] == "apns" and doc1["context"] == t1, doc1
    sid1 = doc1["id"]
    doc2 = created(stack, app, apns_body(path, t2.upper(), mode="value", fmt="v2"))
    assert doc2["kind"] == "apns" and doc2["context"] == t2, doc2
    sid2 = doc2["id"]
    assert sid1 != sid2
    for spelling in (t2.upper(), t2):
        r = subscribe(stack, app, apns_body(path, spelling, mode="value", fmt="v2"))
        assert r.status_code == 409, (spelling, r.status_code, r.text)
    got = get(stack, app, sid2)
    assert got.status_code == 200 and got.json()["context"] == t2, got.text
    # A PUT whose body has no kind names the subscription by its token in either case too.
    for spelling in (t2.upper(), t2):
        r = _api.put(stack, app, sid2, {"context": spelling, "mode": "value"})
        assert r.status_code == 200 and r.json()["context"] == t2, (spelling, r.status_code, r.text)
    # An FCM device subscribed alike (v1 noData): APNs carries the document FCM gets, byte for byte.
    phone = token_factory("phone")
    created(stack, app, {"kind": "mobile", "path": path, "mode": "noData", "format": "v1", "context": phone})
    assert created(stack, dev_app, apns_body(dev_path, t3))["context"] == t3

    stack.publish(path, "SET", json.dumps({"b": "é", "a": 1}), app=app)
    [m1] = wait_received(stack, apns.prod, t1, 1)
    [m2] = wait_received(stack, apns.prod, t2, 1)
    fcm_data = raw_member(stack.wait_sends(phone, 1)[0]["body"], "message", "data").encode()
    assert fcm_data == serialise_data(no_data(app, path))
    assert m1["body"] == PREFIX + fcm_data + b"}", m1["body"]
    assert m2["token"] == t2, m2["path"]
    assert v2_payload(data_of(m2)) == event(app, path, sid2, m="value", v={"a": 1, "b": "é"}, s="OK")
    for m in (m1, m2):
        check_push(m, key, BUNDLE)

    # The development app's pushes go to the development host, with its own key and topic.
    stack.publish(dev_path, "SET", "1", app=dev_app)
    [d1] = wait_received(stack, apns.dev, t3, 1)
    check_push(d1, dev_key, DEV_BUNDLE)
    assert d1["body"] == PREFIX + serialise_data(no_data(dev_app, dev_path)) + b"}", d1["body"]

    # User notifications: a TTL becomes apns-expiration (now + TTL; 0 stays 0), a collapse key apns-collapse-id.
    before = int(time.time())
    eid = stack.notify_user("alice", {"n": 1}, app=app, ttl_seconds=60, collapse_key="room-1")
    u1 = wait_received(stack, apns.prod, t1, 2)[1]
    u2 = wait_received(stack, apns.prod, t2, 2)[1]
    phone_data = raw_member(stack.wait_sends(phone, 2)[1]["body"], "message", "data").encode()
    assert data_of(u1) == v1_user_data(app, eid, '{"n":1}') == phone_data, (u1["body"], phone_data)
    assert json.loads(v2_payload(data_of(u2))) == {"t": "u", "a": app, "v": {"n": 1}, "s": "OK", "e": eid}
    for m in (u1, u2):
        check_push(m, key, BUNDLE, expiration=(before + 60, int(m["time"]) + 61), collapse_id="room-1")

    stack.notify_user("alice", {"n": 2}, app=app, ttl_seconds=0)
    stack.notify_user("alice", {"n": 3}, app=app)
    u1b, u1c = wait_received(stack, apns.prod, t1, 4)[2:]
    u2b, u2c = wait_received(stack, apns.prod, t2, 4)[2:]
    assert [json.loads(json.loads(data_of(m))["d"]) for m in (u1b, u1c)] == [{"n": 2}, {"n": 3}]
    assert [json.loads(v2_payload(data_of(m)))["v"] for m in (u2b, u2c)] == [{"n": 2}, {"n": 3}]
    for m in (u1b, u2b):
        check_push(m, key, BUNDLE, expiration=(0, 0))
    for m in (u1c, u2c):
        check_push(m, key, BUNDLE)

    # One provider token per key, reused for every request; nothing went anywhere else.
    prod_records = apns.prod.requests()
    assert len(prod_records) == 8, apns.describe()
    assert len({r["headers"]["authorization"] for r in prod_records}) == 1, apns.describe()
    assert apns.prod.provider_tokens() == 1 and apns.dev.provider_tokens() == 1
    assert [r["token"] for r in apns.dev.requests()] == [t3], apns.describe()
    assert all(r["http_version"] == "2" for r in prod_records + apns.dev.requests())
    wait_metric(stack, "pushgateway_notifications_sent_total", 9, provider="apns")


@pytest.mark.timeout(240)
def test_apns_retried_with_identical_bodies_and_in_order(apns, stack_factory, uniq, tmp_path):
    stack = apns_stack(stack_factory, apns)
    app = "apnsretry" + uniq[4:]
    key = TeamKey(tmp_path, KEY_ID)
    apns.register(key)
    stack.write_app_settings(app, settings(stack, app, key))
    served(stack, app)
    path = f"{uniq}/doc"
    token = device_token()
    created(stack, app, apns_body(path, token, mode="value"))

    # 503, 429, 500, then accepted: four attempts of one message, the same body each time.
    apns.prod.script(token, [(503, "ServiceUnavailable"), (429, "TooManyRequests"), (500, "InternalServerError")])
    stack.publish(path, "SET", "1", app=app)
    attempts = wait_received(stack, apns.prod, token, 4, accepted=False, timeout=60)
    assert [a["status"] for a in attempts] == [503, 429, 500, 200], apns.prod.describe(token)
    expected = PREFIX + serialise_data(value_payload(app, path, 1)) + b"}"
    assert [a["body"] for a in attempts] == [expected] * 4, apns.prod.describe(token)
    for a in attempts:
        assert a["http_version"] == "2" and a["jwt_verified"], a
    check_push(attempts[3], key, BUNDLE)

    # Order: later messages arrive in publish order.
    for v in range(2, 7):
        stack.publish(path, "SET", str(v), app=app)

    def values():
        got = [json.loads(json.loads(data_of(m))["d"]) for m in apns.prod.accepted(token)]
        return got if got and got[-1] == 6 else None
    got = wait_for(values, timeout=30, what=f"values 2..6 to {token}",
                   on_timeout=lambda: apns.prod.describe(token) + "\n" + stack.gateway.tails())
    assert got == list(range(1, 7)), got
    for m in apns.prod.accepted(token):
        check_push(m, key, BUNDLE)
    assert len(apns.prod.received(token)) == 9, apns.prod.describe(token)
    for reason in ("ServiceUnavailable", "TooManyRequests", "InternalServerError"):
        assert metric(stack, "pushgateway_notifications_failed_total", provider="apns", reason=reason) >= 1, reason
    wait_metric(stack, "pushgateway_notifications_sent_total", 6, provider="apns")


@pytest.mark.timeout(240)
def test_apns_dead_tokens_revoke_too_large_drops_our_faults_keep(apns, stack_factory, uniq, tmp_path):
    stack = apns_stack(stack_factory, apns)
    app, rogue, wrong_topic = "apnsrev" + uniq[4:], "apnsrogue" + uniq[4:], "apnstopic" + uniq[4:]
    key = TeamKey(tmp_path, KEY_ID)
    apns.register(key)
    unknown_key = TeamKey(tmp_path, "KEYUNKNOWN")  # never registered at the fakes
    stack.write_app_settings(app, settings(stack, app, key))
    stack.write_app_settings(rogue, settings(stack, rogue, unknown_key))
    stack.write_app_settings(wrong_topic, settings(stack, wrong_topic, key, bundle="com.example.notours"))
    for a in (app, rogue, wrong_topic):
        served(stack, a)
    # APNs answers BadDeviceToken and DeviceTokenNotForTopic to every device of an app whose environment or bundle
    # id is wrong, so the gateway believes them about one device only once the project reaches others (as HMS's
    # 80300007): three devices reached first.
    warm_path = f"{uniq}/warm"
    warm = [device_token() for _ in range(3)]
    for t in warm:
        created(stack, app, apns_body(warm_path, t))
    stack.publish(warm_path, "SET", "0", app=app)
    for t in warm:
        wait_received(stack, apns.prod, t, 1)
    path = f"{uniq}/doc"
    tokens, sids = {}, {}
    for name in ("gone", "bad", "nottopic", "big", "invalid", "ok"):
        tokens[name] = device_token()
        sids[name] = created(stack, app, apns_body(path, tokens[name]))["id"]
    assert len(set(sids.values())) == 6
    gone_at = int(time.time() * 1000) - 60_000
    apns.prod.script(tokens["gone"], [(410, "Unregistered", gone_at)])
    apns.prod.script(tokens["bad"], [(400, "BadDeviceToken")])
    apns.prod.script(tokens["nottopic"], [(400, "DeviceTokenNotForTopic")])
    apns.prod.script(tokens["big"], [(413, "PayloadTooLarge")])
    apns.prod.script(tokens["invalid"], [(403, "InvalidProviderToken")])
    expected = PREFIX + serialise_data(no_data(app, path)) + b"}"

    stack.publish(path, "SET", "1", app=app)
    for name in ("gone", "bad", "nottopic"):
        wait_for(lambda: get(stack, app, sids[name]).status_code == 404, timeout=30,
                 what=f"the {name} subscription to be deleted",
                 on_timeout=lambda: apns.describe() + "\n" + stack.gateway.tails())
    wait_metric(stack, "pushgateway_notifications_failed_total", 1, provider="apns", reason="too_big")
    wait_metric(stack, "pushgateway_notifications_our_fault_total", 1, provider="apns", reason="InvalidProviderToken")
    assert wait_metric(stack, "pushgateway_revocations_total", 3, reason="token_dead") >= 3
    for name, status, reason in (("gone", 410, "Unregistered"), ("bad", 400, "BadDeviceToken"),
                                 ("nottopic", 400, "DeviceTokenNotForTopic"), ("big", 413, "PayloadTooLarge")):
        [r] = apns.prod.received(tokens[name])
        assert (r["status"], r["reason"], r["body"]) == (status, reason, expected), apns.prod.describe(tokens[name])
        assert r["http_version"] == "2" and r["jwt_verified"], r
    first_invalid = apns.prod.received(tokens["invalid"])[0]
    assert (first_invalid["status"], first_invalid["body"]) == (403, expected), apns.prod.describe(tokens["invalid"])
    for name in ("big", "invalid"):  # dropped, or our fault: nobody revoked
        assert get(stack, app, sids[name]).status_code == 200, name
    assert wait_received(stack, apns.prod, tokens["ok"], 1)[0]["body"] == expected

    # The next message: to the subscriptions that remain, not to the revoked ones.
    stack.publish(path, "SET", "2", app=app)
    wait_received(stack, apns.prod, tokens["ok"], 2)
    wait_received(stack, apns.prod, tokens["big"], 1)
    assert [r["status"] for r in apns.prod.received(tokens["big"])] == [413, 200]
    wait_received(stack, apns.prod, tokens["invalid"], 1)  # the retry, or the next message
    for name in ("gone", "bad", "nottopic"):
        assert len(apns.prod.received(tokens[name])) == 1, apns.prod.describe(tokens[name])

    # Refusals APNs makes on its own: a key it does not know (InvalidProviderToken), a bundle id that is not the
    # team's (TopicDisallowed). Our configuration is wrong: counted, nobody revoked.
    for a, reason in ((rogue, "InvalidProviderToken"), (wrong_topic, "TopicDisallowed")):
        t = device_token()
        sid = created(stack, a, apns_body(path, t))["id"]
        stack.publish(path, "SET", "3", app=a)
        [r] = wait_received(stack, apns.prod, t, 1, accepted=False)
        assert (r["status"], r["reason"]) == (REASON_STATUS[reason], reason), apns.prod.describe(t)
        wait_metric(stack, "pushgateway_notifications_our_fault_total", 1, provider="apns", reason=reason)
        assert get(stack, a, sid).status_code == 200, (a, reason)
    assert metric(stack, "pushgateway_notifications_our_fault_total", provider="apns",
                  reason="InvalidProviderToken") >= 2

    # An app whose every device is refused as BadDeviceToken (its environment is wrong, say) and which has reached
    # none: a configuration mistake, not dead devices. Nobody is revoked; counted as our fault.
    wrong_env = "apnsenv" + uniq[4:]
    stack.write_app_settings(wrong_env, settings(stack, wrong_env, key))
    served(stack, wrong_env)
    refused_tokens = [device_token() for _ in range(2)]
    refused_sids = []
    for t in refused_tokens:
        apns.prod.script(t, [(400, "BadDeviceToken")] * 5)
        refused_sids.append(created(stack, wrong_env, apns_body(path, t))["id"])
    stack.publish(path, "SET", "4", app=wrong_env)
    for t in refused_tokens:
        wait_received(stack, apns.prod, t, 1, accepted=False)
    wait_metric(stack, "pushgateway_notifications_our_fault_total", 2, provider="apns", reason="BadDeviceToken")
    for sid in refused_sids:
        assert get(stack, wrong_env, sid).status_code == 200, "revoked over a configuration mistake"


@pytest.mark.timeout(180)
def test_apns_tokens_and_settings_refused(apns, stack_factory, uniq, tmp_path):
    stack = apns_stack(stack_factory, apns)
    app, bare = "apnsref" + uniq[4:], "apnsnone" + uniq[4:]
    key = TeamKey(tmp_path, KEY_ID)
    apns.register(key)
    stack.write_app_settings(app, settings(stack, app, key))
    stack.write_app_settings(bare, {"enabled": True, "authKeys": [{"alg": "HS256", "secret": SECRET}]})
    served(stack, app)
    served(stack, bare)
    path = f"{uniq}/doc"

    def refused(stack_app: str, body: dict, what, contains: str | None = None) -> None:
        r = subscribe(stack, stack_app, body)
        assert r.status_code == 400, (what, r.status_code, r.text)
        answer = r.json()
        assert isinstance(answer.get("status"), str) and isinstance(answer.get("message"), str), (what, answer)
        if contains:
            assert contains in answer["message"].lower(), (what, answer)

    for what, context in {"odd length": "abc", "not hex": "zz" * 32, "empty": "", "0x prefix": "0x" + "ab" * 31,
                          "a space": "ab" * 16 + " " + "ab" * 15 + "a", "202 digits": "ab" * 101,
                          "a number": 42}.items():
        refused(app, apns_body(path, context), what)
    refused(app, {"kind": "apns", "path": path, "mode": "noData"}, "no context")
    # The longest token taken: 200 hex digits.
    assert created(stack, app, apns_body(path, "cd" * 100))["context"] == "cd" * 100
    # An app without apns settings takes no apns subscription.
    refused(bare, apns_body(path, device_token()), "an app without apns settings", "apns")

    # Bad apns settings: the app is refused (a clear log line), not served.
    other_curve = tmp_path / "p384.p8"
    garbage = tmp_path / "garbage.p8"
    garbage.write_text("-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n")
    other_curve.write_bytes(ec.generate_private_key(ec.SECP384R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    bad = {
        "a": {"keyFile": str(garbage)},
        "b": {"keyFile": str(tmp_path / "missing.p8")},
        "c": {"teamId": "TEAM12345"},
        "d": {"keyId": "KEY12345678"},
        "e": {"environment": "staging"},
        "f": {"keyFile": str(other_curve)},
    }
    names = {}
    for label, change in bad.items():
        name = f"apnsbad{label}" + uniq[4:]
        names[label] = name
        document = settings(stack, name, key)
        document["apns"].update(change)
        stack.write_app_settings(name, document)

    def refusals() -> dict:
        """label -> the JSON log line refusing that app's settings (or None)."""
        lines = []
        for line in stack.gateway.logs().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "app settings refused" in str(record.get("msg")):
                lines.append(record)
        return {label: next((r for r in lines if r.get("app") == name), None) for label, name in names.items()}
    found = wait_for(lambda: (lambda got: got if all(got.values()) else None)(refusals()), timeout=30,
                     what="a refusal log line for each bad apns settings file",
                     on_timeout=lambda: "not refused: " + str([bad[label] for label, line in refusals().items()
                                                                if line is None]) + "\n" + stack.gateway.tails())
    for label, line in found.items():
        assert "apns" in str(line.get("error", "")).lower(), (bad[label], line)
        assert line.get("settings.in.force") == "none (app not served)", (bad[label], line)
        r = subscribe(stack, names[label], apns_body(path, device_token()))
        assert r.status_code != 201, (bad[label], r.status_code, r.text)
    assert apns.prod.requests() == [] and apns.dev.requests() == []
