"""`kind: "webhook"` subscriptions (issue 20, item 1), end to end: the real gateway and Tansu, a loopback HTTPS
receiver (self-signed certificate trusted through the app's `webhook.caFile`) that verifies each request's
Standard Webhooks signature with the independent `standardwebhooks` package, and sees retries (503, 429 with
Retry-After, one `webhook-id` per message), order, 410 revocation, a 400 dropped without revocation, and the
SSRF refusals (at subscribe time, and at delivery for a name that resolves to a refused address)."""

from __future__ import annotations

import base64
import json
import os
import socket
import sys

import pytest
import requests

from procutil import wait_for
from v2_api import V2Api, metric  # noqa: E402

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "fakes")))
from fake_fcm import make_self_signed_cert  # noqa: E402
from fake_webhook import FakeWebhookReceiver  # noqa: E402

SECRET = "webhook-tests-hs256-secret-of-enough-length"
_api = V2Api(SECRET)
hs, api_url, subscribe, get, served = _api.hs, V2Api.url, _api.subscribe, _api.get, _api.served

WHSEC = "whsec_" + base64.b64encode(b"k" * 32).decode()
WHSEC_NEW = "whsec_" + base64.b64encode(os.urandom(48)).decode()


def settings(stack, app: str, **webhook) -> dict:
    return {"enabled": True, "fcmServiceAccountFile": stack.fake.service_account_file(app),
            "authKeys": [{"alg": "HS256", "secret": SECRET}], "webhook": webhook}


@pytest.fixture
def receiver(tmp_path):
    cert, key = make_self_signed_cert(str(tmp_path / "tls"))
    r = FakeWebhookReceiver(cert, key, [WHSEC, WHSEC_NEW])
    r.cert = cert
    yield r
    r.close()


def expected_body(app: str, path: str, sid: str, context: str, **fields) -> bytes:
    ordered = {"t": fields.pop("t", "v")}
    for k in ("m", "a", "v", "c", "r", "s"):
        if k == "a":
            ordered["a"] = app
        elif k in fields:
            ordered[k] = fields[k]
    ordered["p"], ordered["id"], ordered["context"] = path, sid, context
    return json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.timeout(240)
def test_webhook_signed_retried_in_order_and_revoked_by_410(stack_factory, uniq, receiver):
    stack = stack_factory()
    app = "whook" + uniq[4:]
    stack.write_app_settings(app, settings(stack, app, secrets=[WHSEC], allowPrivateDestinations=True,
                                           caFile=receiver.cert, timeoutMs=5000))
    served(stack, app)
    path, context = f"{uniq}/doc", "backend ctx é \"1\""
    body = {"kind": "webhook", "mode": "value", "path": path, "destination": receiver.url("/hook/a"), "context": context}
    r = subscribe(stack, app, body)
    assert r.status_code == 201, r.text
    doc = r.json()
    sid = doc["id"]
    assert doc["kind"] == "webhook" and doc["destination"] == receiver.url("/hook/a") and doc["context"] == context
    # The id is the 6-tuple's: another destination or context is another subscription.
    other = subscribe(stack, app, dict(body, destination=receiver.url("/hook/b")))
    assert other.status_code == 201 and other.json()["id"] != sid
    sid_b = other.json()["id"]
    assert subscribe(stack, app, body).status_code == 409
    assert subscribe(stack, app, dict(body, format="v1"), uid="bob").status_code == 400

    # Retries: 503, then 429 with Retry-After, then accepted; one webhook-id for the three attempts.
    receiver.script("/hook/a", [(503, None), (429, "1")])
    receiver.script("/hook/b", [(400, None)])  # the receiver's fault: dropped, not retried, not revoked
    stack.publish(path, "SET", "1", app=app)
    attempts = wait_for(lambda: (lambda got: got if len(got) >= 3 else None)(receiver.received("/hook/a")),
                        timeout=30, what="three attempts of the first message", on_timeout=stack.gateway.tails)
    assert [a["status"] for a in attempts[:3]] == [503, 429, 200]
    assert len({a["headers"]["webhook-id"] for a in attempts[:3]}) == 1
    assert attempts[2]["at"] - attempts[1]["at"] >= 0.9, "Retry-After: 1 was not honoured"
    for a in attempts:
        assert a["verified"] == [True, False], a
        assert a["headers"]["content-type"] == "application/json"
        assert a["body"] == expected_body(app, path, sid, context, m="value", v=1, s="OK")
    [refused] = wait_for(lambda: receiver.received("/hook/b") or None, timeout=20, what="the 400 at /hook/b")
    assert refused["status"] == 400 and refused["verified"] == [True, False]

    # Order: later messages, each with its own id, arrive in publish order.
    for value in range(2, 12):
        stack.publish(path, "SET", str(value), app=app)
    def all_received():
        got = [json.loads(x["body"])["v"] for x in receiver.received("/hook/a") if x["status"] == 200]
        return got if got and got[-1] == 11 else None
    values = wait_for(all_received, timeout=30, what="values 2..11 at /hook/a", on_timeout=stack.gateway.tails)
    assert values == list(range(1, 12)), values
    ok = [x for x in receiver.received("/hook/a") if x["status"] == 200]
    assert len({x["headers"]["webhook-id"] for x in ok}) == len(ok)
    # The 400 was not retried and revoked nothing: /hook/b got value 11 once, and still exists.
    b_values = wait_for(lambda: (lambda got: got if got and got[-1] == 11 else None)(
        [json.loads(x["body"])["v"] for x in receiver.received("/hook/b")]), timeout=30, what="/hook/b to catch up")
    assert b_values[0] == 1 and b_values.count(1) == 1 and b_values == sorted(b_values)
    assert get(stack, app, sid_b).status_code == 200

    # Rotation: two secrets sign; a receiver holding either one verifies.
    stack.write_app_settings(app, settings(stack, app, secrets=[WHSEC, WHSEC_NEW], allowPrivateDestinations=True,
                                           caFile=receiver.cert, timeoutMs=5000))
    def rotated():
        stack.publish(path, "SET", "12", app=app)
        last = receiver.received("/hook/a")[-1]
        return last if last["verified"] == [True, True] else None
    last = wait_for(rotated, timeout=30, interval=0.5, what="a delivery signed with both secrets")
    assert len(last["headers"]["webhook-signature"].split(" ")) == 2

    # 410 Gone revokes the subscription: deleted, nothing more is sent to it.
    receiver.script("/hook/a", [(410, None)])
    stack.publish(path, "SET", "13", app=app)
    wait_for(lambda: get(stack, app, sid).status_code == 404, timeout=30, what="the 410 to delete the subscription",
             on_timeout=stack.gateway.tails)
    gone = [x for x in receiver.received("/hook/a") if x["status"] == 410]
    # (The next message may still be one of the 12s published while waiting for the rotation.)
    assert len(gone) == 1 and json.loads(gone[0]["body"])["v"] in (12, 13)
    count_a = len(receiver.received("/hook/a"))
    stack.publish(path, "SET", "14", app=app)
    wait_for(lambda: any(json.loads(x["body"]).get("v") == 14 for x in receiver.received("/hook/b")), timeout=30,
             what="the control subscription to get 14")
    assert len(receiver.received("/hook/a")) == count_a
    assert metric(stack, "pushgateway_notifications_failed_total", provider="webhook", reason="http_503") >= 1
    assert metric(stack, "pushgateway_notifications_failed_total", provider="webhook", reason="http_400") >= 1


@pytest.mark.timeout(180)
def test_webhook_destinations_refused_at_subscribe_and_at_delivery(stack_factory, uniq, receiver):
    stack = stack_factory()
    app = "whssrf" + uniq[4:]
    stack.write_app_settings(app, settings(stack, app, secrets=[WHSEC], caFile=receiver.cert, timeoutMs=5000))
    bare = "whnone" + uniq[4:]
    stack.write_app_settings(bare, {"enabled": True, "authKeys": [{"alg": "HS256", "secret": SECRET}]})
    served(stack, app)
    served(stack, bare)
    path = f"{uniq}/doc"
    base = {"kind": "webhook", "mode": "value", "path": path, "context": "c"}
    port = receiver.port
    for destination in (f"https://127.0.0.1:{port}/x", f"https://[::1]:{port}/x", "https://10.1.2.3/x",
                        "https://192.168.0.1/x", "https://169.254.169.254/latest/meta-data", "https://[fe80::1]/x",
                        "https://[::ffff:127.0.0.1]/x", "https://localhost/x", "https://api.localhost/x",
                        "https://0.0.0.0/x", "https://100.64.0.1/x"):
        r = subscribe(stack, app, dict(base, destination=destination))
        assert r.status_code == 400 and r.json()["status"] == "bad_request", (destination, r.text)
        assert "refused" in r.json()["message"], r.text
    for destination in ("http://example.com/x", "https://user@example.com/x", "https://2130706433/x",
                        "https://example.com/x#f", "ftp://example.com/", "https://exa mple.com/"):
        r = subscribe(stack, app, dict(base, destination=destination))
        assert r.status_code == 400, (destination, r.text)
    assert subscribe(stack, app, {"kind": "webhook", "mode": "value", "path": path}).status_code == 400
    assert subscribe(stack, app, dict(base, kind="mobile", destination="https://example.com/", context="t")).status_code == 400
    r = subscribe(stack, bare, dict(base, destination="https://example.com/x"))
    assert r.status_code == 400 and "webhook secret" in r.json()["message"], r.text
    assert metric(stack, "pushgateway_webhook_destinations_refused_total") >= 11

    # A name that passes at subscribe time but resolves to a refused address: refused at each delivery.
    host = socket.gethostname().lower()
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except socket.gaierror:
        pytest.skip(f"the host name {host} does not resolve here")
    import ipaddress
    if not all(ipaddress.ip_address(a.split("%")[0]).is_private for a in resolved):
        pytest.skip(f"{host} resolves to a public address here: {resolved}")
    r = subscribe(stack, app, dict(base, destination=receiver.url("/hook/dns", host=host)))
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    stack.publish(path, "SET", "1", app=app)
    wait_for(lambda: metric(stack, "pushgateway_notifications_failed_total", provider="webhook",
                            reason="address_refused") >= 1,
             timeout=30, what="the delivery to be refused", on_timeout=stack.gateway.tails)
    assert receiver.received("/hook/dns") == []
    assert get(stack, app, sid).status_code == 200  # the receiver's fault: nobody revoked
