"""Token replacement (issue 20, item 6; SPEC §3 "a rotated push token moves all of a user's subscriptions in one
call"): `POST /datasync/v2/{app}/subscriptions/{uid}/.replace-context` with the real binary, Tansu and the fake
FCM. The decision's rules (idempotence, quotas, authorization) are in Tests/GatewayAPITests/ReplaceContextTests."""

from __future__ import annotations

import json

import pytest
import requests

from procutil import wait_for
from test_v2 import app_settings, auth, b64u_decode, expect, hs, served


def replace(api, uid: str, token, old: str, new: str, kind: str = "mobile") -> requests.Response:
    return requests.post(api.url(uid) + "/.replace-context", json={"kind": kind, "oldContext": old, "newContext": new},
                         headers=auth(token), timeout=10)


def event_of(send: dict) -> dict:
    """The v2 event inside an unsecured JWS notification."""
    data = json.loads(send["body"])["message"]["data"]
    return json.loads(b64u_decode(data["evt"].split(".")[1]))


@pytest.mark.timeout(240)
def test_a_rotated_token_moves_every_subscription_and_later_events_reach_only_the_new_token(
        stack_factory, uniq, token_factory):
    stack = stack_factory()
    app = "v2rep" + uniq[4:]
    stack.write_app_settings(app, app_settings(stack, app))
    api = served(stack, app)
    old, new, other = token_factory("old"), token_factory("new"), token_factory("other")
    paths = [f"{uniq}/inbox", f"{uniq}/news"]
    old_ids = [expect(api.post("alice", hs("alice"), {"kind": "mobile", "mode": "value", "path": p, "context": old}),
                      201)["id"] for p in paths]
    # Bob shares the device (same token): his subscription is not alice's to move.
    bobs = expect(api.post("bob", hs("bob"), {"kind": "mobile", "mode": "value", "path": paths[0], "context": old}),
                  201)["id"]
    # A sentinel on another device at the same node: when it has a notification, the event was matched.
    expect(api.post("carol", hs("carol"), {"kind": "mobile", "path": paths[0], "context": other}), 201)

    stack.publish(paths[0], "SET", '"before"', app=app)
    stack.wait_sends(other, 1)
    before = stack.wait_sends(old, 2)  # alice's and bob's
    assert sorted(event_of(s)["id"] for s in before) == sorted([old_ids[0], bobs])

    # Authorization: the caller's uid must be the path's.
    expect(replace(api, "alice", hs("mallory"), old, new), 403, "permission_denied")
    expect(replace(api, "alice", None, old, new), 401, "unauthorized")

    moved = expect(replace(api, "alice", hs("alice"), old, new), 200)
    new_ids = [d["id"] for d in moved["subscriptions"]]
    assert [d["path"] for d in moved["subscriptions"]] == sorted(paths)
    assert all(d["context"] == new for d in moved["subscriptions"])
    assert {m["from"]: m["id"] for m in moved["moved"]} == dict(zip(old_ids, new_ids))
    assert set(new_ids).isdisjoint(old_ids)
    # Acknowledged means applied: the list shows the new ids only, the old ones are gone.
    listed = expect(api.get("alice", hs("alice")), 200)["subscriptions"]
    assert sorted(d["id"] for d in listed) == sorted(new_ids)
    for sid in old_ids:
        expect(api.get("alice", hs("alice"), sid), 404, "not_found")
    # Idempotent: the same call again moves nothing and answers the same subscriptions.
    again = expect(replace(api, "alice", hs("alice"), old, new), 200)
    assert [d["id"] for d in again["subscriptions"]] == new_ids and again["moved"] == []

    # Later events reach the new token (with the new ids), and the old one only through bob's subscription.
    stack.publish(paths[0], "SET", '"after"', app=app)
    stack.publish(paths[1], "SET", '"after"', app=app)
    after = stack.wait_sends(new, 2)
    assert sorted(event_of(s)["id"] for s in after) == sorted(new_ids)
    stack.wait_sends(other, 2)
    sends_to_old = wait_for(lambda: s if len(s := stack.fake.sends_for(old)) >= 3 else None, timeout=20,
                            what="bob's notification of the later event")
    assert [(event_of(s)["id"], event_of(s)["v"]) for s in sends_to_old[2:]] == [(bobs, "after")], \
        "nothing of alice's went to the old token"

    # Durable in one step: after a restart the new owner loads the moved subscriptions and not the old ones.
    stack.stop()
    stack.start()
    api = served(stack, app)
    listed = expect(api.get("alice", hs("alice")), 200)["subscriptions"]
    assert sorted(d["id"] for d in listed) == sorted(new_ids)
    stack.publish(paths[1], "SET", '"restarted"', app=app)
    wait_for(lambda: any(event_of(x).get("v") == "restarted" for x in stack.fake.sends_for(new)), timeout=30,
             what="the event after the restart at the new token")
    # (Events before the restart may be delivered again after it: at-least-once. None of alice's reaches the old token.)
    to_old = [event_of(x) for x in stack.fake.sends_for(old)]
    assert all(e["id"] == bobs or e.get("v") == "before" for e in to_old), to_old
    assert not any(e.get("v") == "restarted" for e in to_old), to_old
