"""Per-app settings files reloaded without a restart, and the revocations they cause (SPEC §6, §8; issue 3).

Each test runs its own gateway whose settings directory it writes (``Stack.write_app_settings``): the files a
Kubernetes ConfigMap/Secret mount would hold. Tokens are made by PyJWT, an independent JWT implementation.
"""

from __future__ import annotations

import json
import time

import jwt
import pytest

from kafka_util import read_topic
from procutil import wait_for
import payloads as P

SECRET = "an-app-secret-that-is-long-enough-for-hs256"
USERS_RULES = {"rules": {"public": {".read": True}, "users": {"$uid": {".read": "auth != null && auth.uid == $uid"}}}}


def token(uid: str, exp_in: int = 600) -> str:
    return jwt.encode({"uid": uid, "exp": int(time.time()) + exp_in}, SECRET, algorithm="HS256")


def settings(stack, app: str, **extra) -> dict:
    base = {"enabled": True, "fcmServiceAccountFile": stack.fake.service_account_file(app),
            "authKeys": [{"alg": "HS256", "secret": SECRET}]}
    base.update(extra)
    return base


def wait_status(stack, app: str, path: str, device: str, status: int, what: str, **query) -> None:
    def check():
        r = stack.gateway.subscribe(app, path, device, "noData", **query)
        return r.status_code == status
    wait_for(check, timeout=20, interval=0.1, what=what, on_timeout=stack.gateway.tails)


@pytest.mark.timeout(120)
def test_settings_file_added_changed_refused_and_removed(stack_factory, uniq, token_factory):
    stack = stack_factory()
    app = "dyn" + uniq[4:]
    device = token_factory()
    assert stack.gateway.subscribe(app, uniq, device).status_code == 404

    stack.write_app_settings(app, settings(stack, app))
    wait_status(stack, app, uniq, device, 204, "the new app to be served")

    # A broken file is refused with a clear log line; the last good settings stay in force.
    stack.write_app_settings(app, None, raw="enabled: [this is not: valid\n")
    wait_for(lambda: "app settings refused" in stack.gateway.logs(), timeout=20, what="the refusal log line")
    line = next(l for l in stack.gateway.logs().splitlines() if "app settings refused" in l)
    assert app in line and "last good settings stay in force" in line, line
    assert stack.gateway.subscribe(app, uniq, device).status_code == 204

    # Bad rules are refused the same way (and named).
    stack.write_app_settings(app, settings(stack, app, rules={"rules": {".read": "auth.uid =="}}))
    wait_for(lambda: stack.gateway.logs().count("app settings refused") >= 2, timeout=20, what="the second refusal")
    assert stack.gateway.subscribe(app, uniq, device).status_code == 204

    # Removing the file stops serving the app.
    import os
    os.remove(os.path.join(stack.settings_dir, f"{app}.yaml"))
    wait_status(stack, app, uniq, device, 404, "the app to be unknown once its file is removed")


@pytest.mark.timeout(120)
def test_disabling_an_app_revokes_its_subscriptions(stack_factory, uniq, token_factory):
    stack = stack_factory()
    app = "dis" + uniq[4:]
    stack.write_app_settings(app, settings(stack, app))
    first, second = token_factory("d1"), token_factory("d2")
    wait_status(stack, app, f"{uniq}/a", first, 204, "the app to be served")
    stack.gateway.must_subscribe(app, f"{uniq}/b", second, "value")

    stack.write_app_settings(app, settings(stack, app, enabled=False))
    stack.expect_data(first, [P.revoke(app, f"{uniq}/a", "disabled")])
    stack.expect_data(second, [P.revoke(app, f"{uniq}/b", "disabled")])
    r = stack.gateway.subscribe(app, f"{uniq}/a", first)
    assert r.status_code == 403 and r.json()["status"] == "disabled", r.text

    # Re-enabled: nothing is left to notify.
    stack.write_app_settings(app, settings(stack, app))
    wait_status(stack, app, f"{uniq}/c", token_factory("probe"), 204, "the app to be served again")
    stack.publish(f"{uniq}/a", "SET", "1", app=app)
    stack.publish(f"{uniq}/b", "SET", "2", app=app)
    stack.publish(f"{uniq}/c", "SET", "3", app=app)
    wait_for(lambda: any("/c" in s["body"] for s in stack.fake.sends() if app in s["body"] and "noData" in s["body"]),
             timeout=30, what="the barrier notification")
    assert len(stack.fake.sends_for(first)) == 1 and len(stack.fake.sends_for(second)) == 1


@pytest.mark.timeout(120)
def test_rules_change_revokes_denied_subscriptions(stack_factory, uniq, token_factory):
    stack = stack_factory()
    app = "rul" + uniq[4:]
    stack.write_app_settings(app, settings(stack, app, rules=USERS_RULES))
    alice_device, public_device, anonymous = token_factory("alice"), token_factory("pub"), token_factory("anon")
    wait_status(stack, app, "/public/news", public_device, 204, "the app to be served")
    # The rules decide at subscribe time: without a token, /users/alice is denied.
    r = stack.gateway.subscribe(app, "/users/alice/inbox", anonymous)
    assert r.status_code == 403 and r.json()["status"] == "permission_denied", r.text
    r = stack.gateway.subscribe(app, "/users/alice/inbox", alice_device, "noData", token=token("alice"))
    assert r.status_code == 204, r.text
    r = stack.gateway.subscribe(app, "/users/alice/inbox", anonymous, "noData", token=token("bob"))
    assert r.status_code == 403 and r.json()["status"] == "permission_denied", r.text
    r = stack.gateway.subscribe(app, "/users/alice/inbox", anonymous, "noData", token="forged." + token("alice")[7:])
    assert r.status_code == 401 and r.json()["status"] == "unauthorized", r.text

    # Users may now only read their profile: the inbox subscription is revoked, /public stays.
    new_rules = {"rules": {"public": {".read": True},
                           "users": {"$uid": {"profile": {".read": "auth.uid == $uid"}}}}}
    stack.write_app_settings(app, settings(stack, app, rules=new_rules))
    stack.expect_data(alice_device, [P.revoke(app, "/users/alice/inbox", "permission_denied")])
    stack.publish("/public/news", "SET", '"hello"', app=app)
    stack.expect_data(public_device, [P.no_data(app, "/public/news")])
    assert len(stack.fake.sends_for(alice_device)) == 1


@pytest.mark.timeout(120)
def test_too_big_revokes_and_refuses(stack_factory, uniq, token_factory):
    stack = stack_factory()
    app = "big" + uniq[4:]
    stack.write_app_settings(app, settings(stack, app, shadowMaxBytes=100))
    device, later, no_data = token_factory("big"), token_factory("later"), token_factory("nd")
    wait_status(stack, app, f"{uniq}/n", no_data, 204, "the app to be served")
    stack.gateway.must_subscribe(app, f"{uniq}/doc", device, "value")
    small = json.dumps({"a": "x" * 10})
    stack.publish(f"{uniq}/doc", "SET", small, app=app)
    stack.expect_data(device, [P.value(app, f"{uniq}/doc", P.parse(small))])
    # A write below makes the node's data larger than 100 bytes: revoked with too_big, instead of the value.
    stack.publish(f"{uniq}/doc/b", "SET", json.dumps("y" * 200), app=app)
    stack.expect_data(device, [P.value(app, f"{uniq}/doc", P.parse(small)), P.revoke(app, f"{uniq}/doc", "too_big")])
    # Subscribing there again in value mode is refused with 403 too_big; noData is fine.
    r = stack.gateway.subscribe(app, f"{uniq}/doc", later, "value")
    assert r.status_code == 403 and r.json()["status"] == "too_big", r.text
    assert stack.gateway.subscribe(app, f"{uniq}/doc", later, "noData").status_code == 204


@pytest.mark.timeout(120)
def test_snapshot_requests_and_snapshot_seeding(stack_factory, uniq, token_factory):
    stack = stack_factory()
    device = token_factory("snap")
    path = f"{uniq}/node"
    stack.gateway.must_subscribe("toto", path, device, "value")
    # The gateway cannot seed /node by itself: it asks upstream (protobuf SnapshotRequest{app_id, path}).
    records = read_topic(stack.broker.bootstrap, stack.topics.snapshots, min_records=1, timeout=30, settle=0.3)
    assert records, "no snapshot request published\n" + stack.gateway.tails()
    rec = records[0]
    assert rec.key == b"toto"
    expected = b"\x0a\x04toto\x12" + bytes([len(path)]) + path.encode()
    assert rec.value == expected, rec.value
    # Until seeded, a write below gives NotLoaded; a SNAPSHOT seeds it (and notifies nobody).
    stack.publish(f"{path}/x", "SET", "1")
    stack.expect_data(device, [P.not_loaded("toto", path)])
    stack.publish(path, "SNAPSHOT", json.dumps({"x": 1, "y": 2}))
    stack.publish(f"{path}/z", "SET", "3")
    stack.expect_data(device, [P.not_loaded("toto", path), P.value("toto", path, {"x": P.Num("1"), "y": P.Num("2"), "z": P.Num("3")})])
