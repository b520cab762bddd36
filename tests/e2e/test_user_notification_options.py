"""User notifications (issue 20, item 4): the publisher's TTL and collapse key reach FCM and HMS in their fields
(docs/DELIVERY.md, "TTL and collapse key"), a notification without them carries none, and the protobuf binary form
of the topic's records is read like the JSON form. The real binary, Tansu, the fake FCM and the fake HMS (which
check these fields the way the real services do)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
import requests

from gateway import gateway_binary, gateway_env
from procutil import wait_for
from test_delivery import fake_hms, start_with_hms  # noqa: F401 (a fixture)
from test_user_notifications import app_stack, served, settings, v2_post

FCM_ANDROID = {"priority": "high"}
APNS_HEADERS = {"apns-push-type": "background", "apns-priority": "5"}


def hms_sends(server, token: str) -> list[dict]:
    return [s for s in server.sends() if s.get("token") == token and s.get("code") == "80000000"]


def wait_hms(server, token: str, n: int) -> list[dict]:
    return wait_for(lambda: (lambda got: got if len(got) >= n else None)(hms_sends(server, token)),
                    timeout=30, what=f"{n} HMS send(s) to {token}")


def stack_with_fcm_and_hms(stack_factory, fake_hms, uniq):  # noqa: F811
    app = "un-opt-" + uniq[4:]
    stack = start_with_hms(stack_factory, fake_hms, app, uniq, lambda stack: settings(stack, app), prefix="200000")
    served(stack, app)
    return stack, app


def message_of(send: dict) -> dict:
    assert send["json"] is not None, send["body"]
    return send["json"]["message"]


def test_ttl_and_collapse_key_reach_fcm_and_hms(stack_factory, fake_hms, uniq, token_factory):  # noqa: F811
    stack, app = stack_with_fcm_and_hms(stack_factory, fake_hms, uniq)
    phone, huawei = token_factory("phone"), token_factory("hw")
    v2_post(stack, app, "alice", {"kind": "mobile", "path": f"{uniq}/a", "context": phone})
    v2_post(stack, app, "alice", {"kind": "huawei", "path": f"{uniq}/a", "context": huawei})

    # A TTL and a collapse key that is a number in HMS's range: both providers get both.
    before = int(time.time())
    stack.notify_user("alice", {"n": 1}, app=app, ttl_seconds=3600, collapse_key="7")
    message = message_of(stack.wait_sends(phone, 1)[0])
    after = int(time.time())
    assert message["android"] == {**FCM_ANDROID, "ttl": "3600s", "collapse_key": "7"}
    headers = message["apns"]["headers"]
    assert before + 3600 <= int(headers.pop("apns-expiration")) <= after + 3600
    assert headers == {**APNS_HEADERS, "apns-collapse-id": "7"}
    assert message_of(wait_hms(fake_hms, huawei, 1)[0])["android"] == {"urgency": "HIGH", "ttl": "3600s", "collapse_key": 7}
    assert consumed_gauge(stack) == 1  # the topics' partition counts match

    # A TTL of 0 and a collapse key HMS cannot take (not a number in -1..100): HMS gets the TTL only; a key over
    # 64 bytes reaches APNs as its hash (43 characters), Android as given.
    long_key = "room-" + "x" * 70
    stack.notify_user("alice", {"n": 2}, app=app, ttl_seconds=0, collapse_key=long_key)
    message = message_of(stack.wait_sends(phone, 2)[1])
    assert message["android"] == {**FCM_ANDROID, "ttl": "0s", "collapse_key": long_key}
    collapse_id = message["apns"]["headers"].pop("apns-collapse-id")
    assert len(collapse_id) == 43 and collapse_id != long_key[:43]
    assert message["apns"]["headers"] == {**APNS_HEADERS, "apns-expiration": "0"}
    assert message_of(wait_hms(fake_hms, huawei, 2)[1])["android"] == {"urgency": "HIGH", "ttl": "0s"}

    # Neither: the bodies of change events, no TTL, no collapse key. (The publisher's 28 days are sent to HMS as
    # its 15 days, in the next one.)
    stack.notify_user("alice", {"n": 3}, app=app)
    message = message_of(stack.wait_sends(phone, 3)[2])
    assert (message["android"], message["apns"]["headers"]) == (FCM_ANDROID, APNS_HEADERS)
    assert message_of(wait_hms(fake_hms, huawei, 3)[2])["android"] == {"urgency": "HIGH"}
    stack.notify_user("alice", {"n": 4}, app=app, ttl_seconds=2_419_200)
    assert message_of(stack.wait_sends(phone, 4)[3])["android"]["ttl"] == "2419200s"
    assert message_of(wait_hms(fake_hms, huawei, 4)[3])["android"] == {"urgency": "HIGH", "ttl": "1296000s"}


# -- the protobuf binary form ---------------------------------------------------------------------------------

def varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1  # int64 as protobuf writes it (two's complement)
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def proto_user_notification(app_id: str, uid: str, data: str, event_id: str, collapse_key: str | None = None,
                            ttl_seconds: int | None = None, timestamp_ms: int = 0) -> bytes:
    """A pushgateway.v1.UserNotification (proto/pushgateway/v1/user_notification.proto) in protobuf binary, by
    hand: fields 1 app_id, 2 uid, 3 data, 4 collapse_key (optional), 5 ttl_seconds (optional), 6 event_id,
    7 timestamp_ms. proto3 leaves out empty strings and zeros, except optional fields, which are written when set."""
    def text(number: int, value: str, always: bool = False) -> bytes:
        raw = value.encode("utf-8")
        return varint(number << 3 | 2) + varint(len(raw)) + raw if raw or always else b""

    out = text(1, app_id) + text(2, uid) + text(3, data)
    if collapse_key is not None:
        out += text(4, collapse_key, always=True)
    if ttl_seconds is not None:
        out += varint(5 << 3) + varint(ttl_seconds)
    out += text(6, event_id)
    if timestamp_ms:
        out += varint(7 << 3) + varint(timestamp_ms)
    return out


def test_protobuf_records_are_read_like_json_ones(stack_factory, uniq, token_factory):
    stack, app = app_stack(stack_factory, "un-pb-", uniq)
    phone = token_factory("phone")
    v2_post(stack, app, "bob", {"kind": "mobile", "path": uniq, "context": phone, "format": "v1"})
    topic = stack.topics.notifications
    value = proto_user_notification(app, "bob", '{"title":"hé"}', "pb-1", collapse_key="c", ttl_seconds=60,
                                    timestamp_ms=int(time.time() * 1000))
    stack.publisher.raw(topic, app.encode(), value, [])
    message = message_of(stack.wait_sends(phone, 1)[0])
    assert message["data"] == {"s": "OK", "t": "user", "app": app, "id": "pb-1", "d": '{"title":"hé"}'}
    assert message["android"] == {**FCM_ANDROID, "ttl": "60s", "collapse_key": "c"}

    # `push-gateway publish-user-notification`, in both forms; a mistake is refused before publishing.
    for form in ([], ["--json"]):
        res = subprocess.run([gateway_binary(), "publish-user-notification", "--brokers", stack.broker.bootstrap,
                              "--topic", topic, "--app", app, "--uid", "bob", "--data", '{"form":%d}' % len(form),
                              "--ttl", "30", *form], capture_output=True, timeout=60, env=gateway_env())
        assert res.returncode == 0, res.stdout.decode() + res.stderr.decode()
    sends = stack.wait_sends(phone, 3)
    assert [json.loads(message_of(s)["data"]["d"]) for s in sends[1:]] == [{"form": 0}, {"form": 1}]
    assert {message_of(s)["android"]["ttl"] for s in sends[1:]} == {"30s"}
    res = subprocess.run([gateway_binary(), "publish-user-notification", "--brokers", stack.broker.bootstrap,
                          "--topic", topic, "--app", app, "--uid", "bob", "--data", "[1]"],
                         capture_output=True, timeout=60, env=gateway_env())
    assert res.returncode != 0 and "data: expected a JSON object, got an array" in res.stderr.decode(), res.stderr.decode()


def test_validate_event_reads_user_notifications_in_both_forms(tmp_path):
    from test_publishing import validate

    res = validate("--user-notification", json.dumps(
        {"appId": "demo", "uid": "alice", "data": {"title": "hi"}, "eventId": "e-1", "collapseKey": "room-1", "ttlSeconds": 3600}))
    out = res.stdout.decode()
    assert res.returncode == 0, out + res.stderr.decode()
    assert out.startswith("accepted: a message to the user alice of app demo"), out
    assert "TTL 3600 s" in out and 'collapse key "room-1"' in out and "not sent to HMS" in out, out
    assert "header content-type: application/json" in out, out
    path = tmp_path / "notification.bin"
    path.write_bytes(proto_user_notification("demo", "bob", '{"t":1}', "pb-1", collapse_key="7", ttl_seconds=60,
                                             timestamp_ms=int(time.time() * 1000)))
    res = validate("--user-notification", "--file", str(path), "--content-type", "none", "--key", "demo")
    out = res.stdout.decode()
    assert res.returncode == 0, out + res.stderr.decode()
    assert '{"appId":"demo","collapseKey":"7","data":{"t":1},"eventId":"pb-1"' in out, out
    assert "HMS android.collapse_key 7" in out and "no content-type header (protobuf)" in out, out
    path.write_bytes(b"\x0a\x10abc")
    res = validate("--user-notification", "--file", str(path), "--content-type", "none")
    assert res.returncode == 1 and res.stdout.decode().startswith(
        "dead-lettered: undecodable record (protobuf): expected a protobuf pushgateway.v1.UserNotification"), res.stdout.decode()


# -- the startup check of the topic's partition count -----------------------------------------------------------

def consumed_gauge(stack) -> float:
    return next(s.value for s in stack.gateway.metrics() if s.name == "pushgateway_user_notifications_consumed")


@pytest.mark.parametrize("partitions", [2, None])
def test_a_user_notifications_topic_unlike_the_change_topic_is_not_consumed(stack_factory, uniq, token_factory, partitions):
    """Partition count 2 against the change topic's 4, or no such topic: an error, the gauge at 0, change events
    go on. (The other tests, with matching counts, see the gauge at 1: test_ttl_and_collapse_key_reach_fcm_and_hms.)"""
    stack = stack_factory(start=False)
    topic = f"push.notifications.other.{stack.topics.suffix}"
    if partitions is not None:
        stack.broker.create_topic(topic, partitions)
    stack.config["kafka"]["userNotificationsTopic"] = topic
    stack.start()
    app = "un-parts-" + uniq[4:]
    stack.write_app_settings(app, settings(stack, app))
    served(stack, app)
    assert consumed_gauge(stack) == 0
    expected = "its partition count differs" if partitions else "it does not exist"
    assert f"the user-notifications topic is not consumed: {expected}" in stack.gateway.logs(), stack.gateway.tails()
    phone = token_factory("phone")
    v2_post(stack, app, "carl", {"kind": "mobile", "path": uniq, "context": phone, "mode": "value"})
    stack.publish(uniq, "SET", '{"a":1}', app=app)
    stack.wait_sends(phone, 1)
    assert requests.get(f"{stack.gateway.base}/readyz", timeout=5).status_code == 200
