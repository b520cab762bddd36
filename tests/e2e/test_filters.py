"""`filters` on v2 subscriptions (issue 20, item 3; docs/PAYLOADS.md, "Filters"), with the real gateway and Tansu:
writes that do and do not notify, per mode (noData, value, childEvent), shadows kept exact by writes that notify
nobody, validation at subscribe time, and filters that survive a restart (a new owner reads them from the state
topic).

"A write that sends nothing" is checked without sleeping: notifications of one subscription are sent in order
(SPEC §8), so once the notification of a later write has arrived, one for an earlier write would be before it.
Every sequence ends with a write whose notification is distinguishable (its content, or a format switched just
before it), and the whole list of sends is compared."""

from __future__ import annotations

import json

import pytest

from test_v2 import app_settings, b64u_decode, event, expect, hs, received, served
from procutil import wait_for


def evt(data: dict) -> bytes:
    """The event of an unsecured v2 notification."""
    assert list(data) == ["srv", "evt", "ver"], data
    return b64u_decode(data["evt"].split(".")[1])


def child(added=None, removed=None, changed=None) -> dict:
    return {"a": added or {}, "r": removed or [], "c": changed or {}}


@pytest.mark.timeout(240)
def test_filters_per_mode_notify_only_for_passing_writes(stack_factory, uniq, token_factory):
    stack = stack_factory()
    app = "filt" + uniq[4:]
    stack.write_app_settings(app, app_settings(stack, app))
    api = served(stack, app)
    path = f"{uniq}/doc"
    nd, val, ce = token_factory("nd"), token_factory("val"), token_factory("ce")

    def subscribe(device: str, mode: str, filters: dict) -> str:
        body = {"kind": "mobile", "mode": mode, "path": path, "context": device, "filters": filters}
        doc = expect(api.post("alice", hs("alice"), body), 201)
        assert doc["filters"] == filters, doc
        return doc["id"]

    nd_id = subscribe(nd, "noData", {"keys": ["a"]})
    val_id = subscribe(val, "value", {"keys": ["a"]})
    ce_id = subscribe(ce, "childEvent", {"events": ["added"]})

    # The node's data (as upstream answers a snapshot request): seeds the shadow, notifies nobody.
    stack.publish(path, "SNAPSHOT", json.dumps({"a": 1, "b": 1}), app=app)
    stack.publish(f"{path}/b", "SET", "2", app=app)   # b changed: no filter passes
    stack.publish(f"{path}/c", "SET", "3", app=app)   # c added: only childEvent [added]
    stack.publish(f"{path}/a", "SET", "5", app=app)   # a changed: noData and value [a]
    [first] = received(stack, ce, 1)
    assert evt(first) == event(app, path, ce_id, m="childEvent", c=child(added={"c": 3}), s="OK")
    # The value sent for a carries b and c, written while the value subscription was filtered out: its
    # shadow was kept exact.
    [v1] = received(stack, val, 1)
    assert evt(v1) == event(app, path, val_id, m="value", v={"a": 5, "b": 2, "c": 3}, s="OK")

    # The noData device's next notification comes in the v1 format, so that it is told apart from the others.
    expect(api.put("alice", hs("alice"), nd_id, {"format": "v1"}), 200)
    # a removed and e added by one MERGE: noData and value fire; childEvent [added] shows only e.
    stack.publish(path, "MERGE", json.dumps({"a": None, "e": 1}), app=app)

    nd_sends = wait_for(lambda: (lambda s: s if s and "t" in s[-1] else None)(
        [json.loads(x["body"])["message"]["data"] for x in stack.fake.sends_for(nd)]),
        timeout=30, what="the noData device's v1 notification", on_timeout=stack.gateway.tails)
    assert len(nd_sends) == 2, nd_sends
    assert evt(nd_sends[0]) == event(app, path, nd_id, m="noData")
    assert nd_sends[1] == {"t": "noData", "app": app, "sp": path}

    val_sends = received(stack, val, 2)
    assert evt(val_sends[1]) == event(app, path, val_id, m="value", v={"b": 2, "c": 3, "e": 1}, s="OK")
    ce_sends = received(stack, ce, 2)
    assert evt(ce_sends[1]) == event(app, path, ce_id, m="childEvent", c=child(added={"e": 1}), s="OK")
    # Nothing else was sent to any of them (each list ends with its last expected notification).
    assert len(stack.fake.sends_for(nd)) == 2
    assert len(stack.fake.sends_for(val)) == 2
    assert len(stack.fake.sends_for(ce)) == 2


@pytest.mark.timeout(240)
def test_filters_validated_at_subscribe_time_and_kept_across_a_restart(stack_factory, uniq, token_factory):
    stack = stack_factory()
    app = "filtr" + uniq[4:]
    stack.write_app_settings(app, app_settings(stack, app))
    api = served(stack, app)
    path = f"{uniq}/list"
    device = token_factory("ce")
    body = {"kind": "mobile", "mode": "childEvent", "path": path, "context": device}

    def refused(filters, mode="childEvent") -> str:
        return expect(api.post("alice", hs("alice"), dict(body, mode=mode, filters=filters)), 400, "bad_request")["message"]

    assert refused({"keys": []}) == "'filters.keys' must not be empty (leave it out to be woken for every child)"
    assert refused({"keys": ["a/b"]}).startswith("'filters.keys' key 'a/b' is not a child key")
    assert refused({"keys": [f"k{i}" for i in range(33)]}) == "'filters.keys' lists 33 keys: at most 32"
    assert refused({"events": ["moved"]}) == "'filters.events' holds 'moved': use an array of added, changed, removed"
    assert refused({"events": ["added"]}, mode="value") == \
        "'filters.events' applies to childEvent mode only, not value: leave it out"
    assert refused({"key": ["a"]}) == "'filters' has an unknown member 'key': use keys and events"
    assert api.get("alice", hs("alice")).json()["subscriptions"] == []

    # The id does not depend on the filters: the same tuple without filters names the same subscription.
    sid = expect(api.post("alice", hs("alice"), dict(body, filters={"keys": ["a"]})), 201)["id"]
    expect(api.post("alice", hs("alice"), body), 409, "already_exists")

    stack.stop()
    stack.start()
    api = served(stack, app)
    assert expect(api.get("alice", hs("alice"), sid), 200)["filters"] == {"keys": ["a"]}
    # The new process applies them: a write below b sends nothing, one below a does.
    stack.publish(f"{path}/b/x", "SET", "1", app=app)
    stack.publish(f"{path}/a/x", "SET", "1", app=app)
    [data] = received(stack, device, 1)
    assert evt(data) == event(app, path, sid, m="childEvent", c=child(changed={"a": True}), s="OnlyKeys")
    assert len(stack.fake.sends_for(device)) == 1
