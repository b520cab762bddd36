"""Abuse-proof subscriptions (issue 10), each finding reproduced against the real binary and a real broker:
identities compared by bytes, quotas and the anonymous write rate, v1 ownership, the demo app only in the
embedded default, hostile state records. docs/SECURITY.md maps each threat to these tests."""

from __future__ import annotations

import json
import time

import jwt
import pytest
import requests

from harness import APP
from procutil import wait_for
from test_v2 import SECRET, V2Client, auth, b64u_decode, expect, hs

KELVIN_KATE = "\u212aate"  # KELVIN SIGN + "ate": canonically equivalent to "Kate", different bytes
RULES = {"rules": {"users": {"$uid": {".read": "auth != null && auth.uid == $uid"}}}}


def chat_settings(stack, app: str, **extra) -> dict:
    settings = {"enabled": True, "fcmServiceAccountFile": stack.fake.service_account_file(app),
                "authKeys": [{"alg": "HS256", "secret": SECRET}], "rules": RULES}
    settings.update(extra)
    return settings


def wait_served(stack, app: str) -> V2Client:
    client = V2Client(stack.gateway.base, app)
    wait_for(lambda: client.get("probe", hs("probe")).status_code == 200, timeout=20, what=f"app {app} served",
             on_timeout=stack.gateway.tails)
    return client


def event_of(send: dict) -> dict:
    """The v2 event of a notification (an unsecured JWS: header.payload.)."""
    evt = json.loads(send["body"])["message"]["data"]["evt"]
    return json.loads(b64u_decode(evt.split(".")[1]))


def metric(stack, name: str, **labels) -> float:
    total = 0.0
    for sample in stack.gateway.metrics():
        if sample.name == name and all(f'{k}="{v}"' in sample.labels for k, v in labels.items()):
            total += sample.value
    return total


@pytest.mark.timeout(180)
def test_canonically_equivalent_uid_is_another_user(stack_factory, uniq, token_factory):
    """Finding 1, the review's reproduction: a token whose uid is "Kate" spelled with the KELVIN SIGN must
    neither read Kate's subscriptions nor receive Kate's data through an equivalent path."""
    stack = stack_factory()
    app = "chat" + uniq[4:]
    stack.write_app_settings(app, chat_settings(stack, app))
    api = wait_served(stack, app)
    kate_device, attacker_device = token_factory("kate"), token_factory("attacker")

    created = expect(api.post("Kate", hs("Kate"), {"kind": "mobile", "mode": "value", "path": "/users/Kate",
                                                      "context": kate_device}), 201)
    attacker = hs(KELVIN_KATE)
    # The uid check compares bytes: the attacker is not Kate.
    expect(api.get("Kate", attacker), 403, "permission_denied")
    expect(api.get("Kate", attacker, created["id"]), 403, "permission_denied")
    expect(api.delete("Kate", attacker, created["id"]), 403, "permission_denied")
    # Its own uid: allowed by `auth.uid == $uid` on its own (byte-distinct) node, and listed apart.
    own = expect(api.post(KELVIN_KATE, attacker, {"kind": "mobile", "mode": "value", "path": f"/users/{KELVIN_KATE}",
                                                   "context": attacker_device}), 201)
    assert own["id"] != created["id"]
    assert [s["context"] for s in expect(api.get(KELVIN_KATE, attacker), 200)["subscriptions"]] == [attacker_device]
    assert [s["context"] for s in expect(api.get("Kate", hs("Kate")), 200)["subscriptions"]] == [kate_device]
    # Kate's data reaches Kate only, whether written at her node or above it.
    stack.publish("/users/Kate", "SET", json.dumps({"secret": 1}), app=app)
    stack.publish("/users", "SET", json.dumps({"Kate": {"secret": 2}}), app=app)
    stack.publish(f"/users/{KELVIN_KATE}", "SET", json.dumps("mine"), app=app)
    stack.wait_sends(kate_device, 2)
    # The attacker's own write is the last event of the app's partition: once it has arrived, everything the
    # earlier events could have sent the attacker has been sent (one order per subscriber).
    wait_for(lambda: any(event_of(s).get("v") == "mine" for s in stack.fake.sends_for(attacker_device)), timeout=30,
             what="the attacker's own notification", on_timeout=lambda: stack.fake.describe(attacker_device))
    for send in stack.fake.sends_for(attacker_device, ok_only=False):
        assert "secret" not in json.dumps(event_of(send)), event_of(send)


@pytest.mark.timeout(180)
def test_quotas_and_the_anonymous_write_rate(stack_factory, uniq, token_factory):
    """Finding 2: keys per path (400), subscriptions per device, per user and per app (429 quota_exceeded),
    anonymous v1 writes per client (429 with Retry-After; since issue 17 a DELETE of nothing spends from the
    client's bucket only: test_admission.py has the per-client, per-device and per-app buckets), each counted
    in a metric."""
    stack = stack_factory()
    app = "quota" + uniq[4:]
    stack.write_app_settings(app, {
        "enabled": True, "fcmServiceAccountFile": stack.fake.service_account_file(app),
        "authKeys": [{"alg": "HS256", "secret": SECRET}],
        "quotas": {"maxPathKeys": 4, "maxSubscriptionsPerDevice": 3, "maxSubscriptionsPerUser": 5,
                   "maxSubscriptionsPerApp": 12, "clientWritesPerSecond": 0.5, "clientWriteBurst": 8}})
    api = wait_served(stack, app)
    gw = stack.gateway

    deep = gw.subscribe(app, "/a/b/c/d/e", token_factory(), "noData")
    assert deep.status_code == 400 and deep.json()["status"] == "bad_request", deep.text
    assert gw.subscribe(app, "/a/b/c/d", token_factory(), "noData", token=hs("u0")).status_code == 204

    device = token_factory("dev")
    for key in range(3):
        r = gw.subscribe(app, f"/n{key}", device, token=hs("u1"))
        assert r.status_code == 204, r.text
    r = gw.subscribe(app, "/n3", device, token=hs("u1"))
    assert r.status_code == 429 and r.json()["status"] == "quota_exceeded", r.text
    assert gw.subscribe(app, "/n0", device, token=hs("u1")).status_code == 204  # a refresh is not a new one

    for n in range(5):
        expect(api.post("u2", hs("u2"), {"kind": "mobile", "path": f"/p{n}", "context": token_factory()}), 201)
    expect(api.post("u2", hs("u2"), {"kind": "mobile", "path": "/p9", "context": token_factory()}), 429, "quota_exceeded")

    # 1 + 3 + 5 = 9 so far; the app allows 12.
    for n in range(3):
        expect(api.post("u3", hs("u3"), {"kind": "mobile", "path": f"/q{n}", "context": token_factory()}), 201)
    expect(api.post("u4", hs("u4"), {"kind": "mobile", "path": "/q", "context": token_factory()}), 429, "quota_exceeded")

    # Anonymous v1 writes of one client: a burst of 8, then 0.5/s.
    answers = [gw.unsubscribe(app, "/anon", token_factory()) for _ in range(12)]
    statuses = [r.status_code for r in answers]
    assert statuses[:8] == [204] * 8 and 429 in statuses[8:], statuses
    refused = next(r for r in answers if r.status_code == 429)
    assert refused.json()["status"] == "quota_exceeded"
    assert int(refused.headers["Retry-After"]) >= 1

    assert metric(stack, "pushgateway_quota_refusals_total", quota="path_keys") == 1
    assert metric(stack, "pushgateway_quota_refusals_total", quota="device") == 1
    assert metric(stack, "pushgateway_quota_refusals_total", quota="user") == 1
    assert metric(stack, "pushgateway_quota_refusals_total", quota="app") == 1
    assert metric(stack, "pushgateway_quota_refusals_total", quota="client_rate") >= 1


@pytest.mark.timeout(120)
def test_v1_subscription_made_with_a_token_belongs_to_its_user(stack_factory, uniq, token_factory):
    """Finding 3: removed or refreshed only with a token of the same uid; anonymous ones stay anonymous."""
    stack = stack_factory()
    app = "owned" + uniq[4:]
    stack.write_app_settings(app, {"enabled": True, "fcmServiceAccountFile": stack.fake.service_account_file(app),
                                   "authKeys": [{"alg": "HS256", "secret": SECRET}]})
    wait_served(stack, app)
    gw = stack.gateway
    device = token_factory()
    assert gw.subscribe(app, "/x", device, "value", token=hs("alice")).status_code == 204
    for extra in ({}, {"token": hs("bob")}, {"token": hs(KELVIN_KATE)}):
        r = gw.unsubscribe(app, "/x", device, **extra)
        assert r.status_code == 403 and r.json()["status"] == "permission_denied", (extra, r.text)
        r = gw.subscribe(app, "/x", device, "noData", **extra)
        assert r.status_code == 403 and r.json()["status"] == "permission_denied", (extra, r.text)
    assert gw.subscribe(app, "/x", device, "noData", token=hs("alice")).status_code == 204
    assert gw.unsubscribe(app, "/x", device, token=hs("alice")).status_code == 204

    anonymous = token_factory()
    assert gw.subscribe(app, "/y", anonymous).status_code == 204
    assert gw.unsubscribe(app, "/y", anonymous).status_code == 204


@pytest.mark.timeout(120)
def test_demo_app_is_not_served_by_a_production_configuration(stack_factory):
    """Finding 4: a configuration with a broker and a settings directory (and no `apps:`) has no `demo` app."""
    stack = stack_factory(start=False)
    stack.config.pop("apps")
    stack.start()
    r = stack.gateway.subscribe("demo", "/chat", "my-device-token", "value")
    assert r.status_code == 404 and r.json()["status"] == "namespace_does_not_exist", r.text
    token = jwt.encode({"uid": "demo-user", "exp": int(time.time()) + 600},
                       "demo-secret-for-the-embedded-defaults-only", algorithm="HS256", headers={"kid": "demo"})
    r = requests.get(f"{stack.gateway.base}/datasync/v2/demo/subscriptions/demo-user", headers=auth(token), timeout=10)
    assert r.status_code == 404, r.text
    assert "built-in demo app" not in stack.gateway.logs()


@pytest.mark.timeout(120)
def test_hostile_state_records_are_skipped_and_counted(stack_factory, token_factory):
    """Finding 7: a state record with an out-of-range attempt number (it crashed every replica at every start)
    or otherwise unreadable is skipped, logged and counted; the gateway starts and serves."""
    stack = stack_factory(start=False)
    hostile = [
        (b'["retry","toto","/p","mobile","tok",""]',
         b'[{"content":{"t":"noData"},"format":"v1","first":1,"notBefore":2,"attempt":1e300}]'),
        (b'["toto","/p","mobile","tok2",""]', b'{"expiresAt":1e999999,"mode":"value","format":"v1"}'),
        (b'["shadow","toto","/p"]', b"[" * 300 + b"]" * 300),
        (b"not json", b"{}"),
    ]
    for key, value in hostile:
        stack.publisher.raw(stack.topics.state, key, value)
    stack.publisher.flush()
    stack.start()
    device = token_factory()
    stack.gateway.must_subscribe(APP, "/ok", device, "noData")
    stack.publish("/ok", "SET", "1")
    stack.wait_sends(device, 1)
    assert metric(stack, "pushgateway_state_records_unreadable_total") >= 3
    assert "unreadable state record skipped" in stack.gateway.logs()


@pytest.mark.timeout(120)
def test_shadow_too_deep_to_read_back_is_too_big(stack, token_factory):
    """Finding 7: data that nests deeper than the JSON parser reads back is revoked as too_big rather than
    stored as a checkpoint that every later load would lose."""
    device = token_factory()
    stack.gateway.must_subscribe(APP, "/deep", device, "value")
    stack.publish("/deep", "SET", json.dumps({"seed": 1}))  # the node's data is known from here on
    stack.wait_sends(device, 1)
    # 250 levels written 10 keys below the node: 260 levels at the node, more than the parser reads back.
    below = "/".join(f"k{i}" for i in range(10))
    stack.publish(f"/deep/{below}", "SET", "[" * 249 + "1" + "]" * 249)
    sends = stack.wait_sends(device, 2)
    data = json.loads(sends[1]["body"])["message"]["data"]
    assert data["t"] == "revoke" and data["r"] == "too_big", data
