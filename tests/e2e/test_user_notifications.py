"""Notifications addressed to a user (issue 20, item 4): a record of the user-notifications topic reaches every
device of its uid exactly once per push token, in apps whose devices subscribed through v1 (with an auth token)
and through v2; bad records go to the dead-letter topic. The real binary, Tansu and the fake FCM."""

from __future__ import annotations

import base64
import json
import time

import jwt
import requests

from gateway import wakeup_url
from kafka_util import header_items, read_topic
from payloads import raw_member
from procutil import wait_for

SECRET = "user-notification-tests-hs256-secret-long"


def hs(uid: str) -> str:
    return jwt.encode({"uid": uid, "exp": int(time.time()) + 600}, SECRET, algorithm="HS256")


def settings(stack, app: str) -> dict:
    return {"enabled": True, "fcmServiceAccountFile": stack.fake.service_account_file(app),
            "authKeys": [{"alg": "HS256", "secret": SECRET}]}


def b64u_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def v2_post(stack, app: str, uid: str, body: dict) -> None:
    url = f"{stack.gateway.base}/datasync/v2/{app}/subscriptions/{uid}"
    r = requests.post(url, json=body, headers={"Authorization": f"Bearer {hs(uid)}"}, timeout=10)
    assert r.status_code == 201, f"POST {url}: {r.status_code} {r.text}"


def v1_put(stack, app: str, path: str, device: str, uid: str | None) -> None:
    url = wakeup_url(stack.gateway.base, app, path, id=device, mode="noData", token=hs(uid) if uid else None)
    r = requests.put(url, timeout=10)
    assert r.status_code == 204, f"PUT {url}: {r.status_code} {r.text}"


def served(stack, app: str) -> None:
    url = f"{stack.gateway.base}/datasync/v2/{app}/subscriptions/probe"
    wait_for(lambda: requests.get(url, headers={"Authorization": f"Bearer {hs('probe')}"}, timeout=5).status_code == 200,
             timeout=20, what=f"app {app} to be served", on_timeout=stack.gateway.tails)


def app_stack(stack_factory, prefix: str, uniq: str, **kw):
    """A started stack serving a new app (`prefix` + `uniq`) with the fake FCM and HS256 tokens: (stack, app)."""
    stack = stack_factory(**kw)
    app = prefix + uniq[4:]
    stack.write_app_settings(app, settings(stack, app))
    served(stack, app)
    return stack, app


def data_of(send: dict) -> str:
    data = raw_member(send["body"], "message", "data")
    assert data is not None, send["body"]
    return data


def v2_event(send: dict) -> dict:
    data = json.loads(data_of(send))
    assert data["srv"] == "webcom" and data["ver"] == "v2" and "kid" not in data, data
    header, payload, signature = data["evt"].split(".")
    assert json.loads(b64u_decode(header)) == {"alg": "none"} and signature == ""
    return json.loads(b64u_decode(payload))


def v1_data(app: str, event_id: str, data_text: str) -> str:
    """The v1 payload of a user notification, byte for byte (docs/PAYLOADS.md)."""
    return json.dumps({"s": "OK", "t": "user", "app": app, "id": event_id, "d": data_text},
                      separators=(",", ":"), ensure_ascii=False)


def counts_settle(stack, tokens: dict[str, int], sentinel: tuple[str, int]) -> None:
    """Waits until the sentinel token has its sends (a later notification through the same lines), then checks
    every token has exactly its count: nothing was sent twice, nothing to the wrong device."""
    stack.wait_sends(sentinel[0], sentinel[1])
    for token, n in tokens.items():
        got = stack.fake.sends_for(token)
        assert len(got) == n, f"{token}: {len(got)} sends, expected {n}\n{stack.fake.describe(token)}"


def test_user_notification_reaches_each_v2_device_once(stack_factory, uniq, token_factory):
    stack, app = app_stack(stack_factory, "un-v2-", uniq)
    phone, tablet, other = token_factory("phone"), token_factory("tablet"), token_factory("other")
    # alice: the phone twice (two paths, v2 format), the tablet once in v1 format; bob: another device.
    v2_post(stack, app, "alice", {"kind": "mobile", "path": f"{uniq}/a", "context": phone})
    v2_post(stack, app, "alice", {"kind": "mobile", "path": f"{uniq}/b", "context": phone, "mode": "value"})
    v2_post(stack, app, "alice", {"kind": "mobile", "path": f"{uniq}/a", "context": tablet, "format": "v1"})
    v2_post(stack, app, "bob", {"kind": "mobile", "path": f"{uniq}/a", "context": other})

    first = stack.notify_user("alice", {"title": "hé", "n": 1}, app=app, event_id="evt-1")
    phone_send = stack.wait_sends(phone, 1)[0]
    assert v2_event(phone_send) == {"t": "u", "a": app, "v": {"n": 1, "title": "hé"}, "s": "OK", "e": first}
    # The event's bytes, in their documented key order.
    assert b64u_decode(json.loads(data_of(phone_send))["evt"].split(".")[1]) == (
        '{"t":"u","a":"%s","v":{"n":1,"title":"hé"},"s":"OK","e":"evt-1"}' % app).encode()
    tablet_send = stack.wait_sends(tablet, 1)[0]
    assert data_of(tablet_send) == v1_data(app, first, '{"n":1,"title":"hé"}')

    # A second one: each device gets it once more, bob still nothing.
    stack.notify_user("alice", {"n": 2}, app=app, event_id="evt-2")
    stack.wait_sends(tablet, 2)
    counts_settle(stack, {phone: 2, tablet: 2, other: 0}, sentinel=(phone, 2))
    assert v2_event(stack.fake.sends_for(phone)[1])["v"] == {"n": 2}

    # A user without subscriptions: nothing is sent, and the next one still goes through.
    stack.notify_user("nobody", {"n": 3}, app=app)
    stack.notify_user("bob", {"n": 4}, app=app)
    counts_settle(stack, {phone: 2, tablet: 2, other: 1}, sentinel=(other, 1))


def test_user_notification_reaches_each_v1_device_once(stack_factory, uniq, token_factory):
    stack, app = app_stack(stack_factory, "un-v1-", uniq)
    d1, d2, anonymous, dave = token_factory("d1"), token_factory("d2"), token_factory("anon"), token_factory("dave")
    # carol's devices subscribed with her auth token: d1 at two paths, d2 at one; an anonymous device; dave's.
    v1_put(stack, app, f"{uniq}/x", d1, "carol")
    v1_put(stack, app, f"{uniq}/y", d1, "carol")
    v1_put(stack, app, f"{uniq}/x", d2, "carol")
    v1_put(stack, app, f"{uniq}/x", anonymous, None)
    v1_put(stack, app, f"{uniq}/x", dave, "dave")

    event_id = stack.notify_user("carol", {"msg": "hi"}, app=app)
    for device in (d1, d2):
        assert data_of(stack.wait_sends(device, 1)[0]) == v1_data(app, event_id, '{"msg":"hi"}')
    stack.notify_user("dave", {"msg": "later"}, app=app)
    counts_settle(stack, {d1: 1, d2: 1, anonymous: 0, dave: 1}, sentinel=(dave, 1))
    stack.notify_user("carol", {"msg": "again"}, app=app)
    stack.wait_sends(d2, 2)
    counts_settle(stack, {d1: 2, d2: 2, anonymous: 0, dave: 1}, sentinel=(d1, 2))


def test_bad_user_notifications_are_dead_lettered(stack_factory, uniq, token_factory):
    stack, app = app_stack(stack_factory, "un-dlq-", uniq)
    phone = token_factory("phone")
    v2_post(stack, app, "erin", {"kind": "mobile", "path": uniq, "context": phone})
    topic = stack.topics.notifications
    json_header = [("content-type", b"application/json")]
    bad = [
        (json.dumps({"appId": app, "uid": "erin", "data": [1], "eventId": "e1"}).encode(), json_header, "data: expected a JSON object"),
        (json.dumps({"appId": app, "data": {}, "eventId": "e2"}).encode(), json_header, "uid: missing"),
        (json.dumps({"appId": app, "uid": "erin", "data": {}}).encode(), json_header, "event_id: missing"),
        (json.dumps({"appId": app, "uid": "erin", "data": {}, "eventId": "e4", "ttlSeconds": -1}).encode(), json_header, "ttl_seconds"),
        (b"not json", json_header, "undecodable record"),
        # Protobuf (no content-type): truncated bytes (field 1 announces 16 bytes, 3 follow), and a record
        # that decodes but lacks its uid (fields 1 app_id, 3 data, 6 event_id).
        (b"\x0a\x10abc", [], "undecodable record (protobuf): expected a protobuf pushgateway.v1.UserNotification"),
        (b"\x0a" + bytes([len(app)]) + app.encode() + b"\x1a\x02{}\x32\x02e7", [], "uid: missing"),
    ]
    for value, headers, _ in bad:
        stack.publisher.raw(topic, app.encode(), value, headers)
    records = read_topic(stack.broker.bootstrap, stack.topics.dlq, min_records=len(bad), timeout=30)
    reasons = sorted(dict(header_items(r.headers))["x-dlq-reason"].decode() for r in records)
    assert len(records) == len(bad), reasons
    for _, _, expected in bad:
        wanted = sum(1 for _, _, other in bad if other == expected)
        assert sum(expected in reason for reason in reasons) >= wanted, (expected, reasons)
    for r in records:
        assert dict(header_items(r.headers))["x-dlq-source-topic"].decode() == topic
    # Consumption goes on: a good one after them is delivered, once.
    stack.notify_user("erin", {"ok": True}, app=app)
    assert v2_event(stack.wait_sends(phone, 1)[0])["v"] == {"ok": True}
