"""The app's event hook (issue 20, item 5), end to end: the real gateway and Tansu, the fake FCM, and a loopback
HTTPS receiver (test_webhook.py's, trusted through the app's `webhook.caFile`) that verifies each request's
Standard Webhooks signature with the independent `standardwebhooks` package. A dead token (FCM UNREGISTERED)
gives a signed `subscription.token_dead` with FCM's answer, a rules change a signed `subscription.revoked` with
reason `permission_denied`; a 503 from the receiver is retried under the same webhook-id. Bodies are compared
byte for byte with docs/PAYLOADS.md, "Event hook"; an expired v1 subscription gives `subscription.expired`;
with two replicas, only the owner of the app's partition reports, once per revocation; hook URLs are checked at
settings load."""

from __future__ import annotations

import copy
import json
import re

import pytest
import requests

from gateway import Gateway
from procutil import free_port, wait_for
from test_webhook import WHSEC, WHSEC_NEW, SECRET, api_url, hs, metric, receiver, served  # noqa: F401 - the fixture

ADMIN_TOKEN = "admin-token-for-the-event-hook-tests"
RULES = {"rules": {"users": {"$uid": {".read": "auth.uid == $uid"}}}}
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def hook_settings(fake_fcm, app: str, receiver, secrets: tuple = (WHSEC,), **extra) -> dict:
    """An app served by the fake FCM whose event hook is the receiver's /events (a loopback address: allowed)."""
    return {"enabled": True, "fcmServiceAccountFile": fake_fcm.service_account_file(app),
            "authKeys": [{"alg": "HS256", "secret": SECRET}],
            "webhook": {"secrets": list(secrets), "allowPrivateDestinations": True, "caFile": receiver.cert,
                        "timeoutMs": 5000},
            "eventHook": {"url": receiver.url("/events")}, **extra}


def subscribe(stack, app: str, uid: str, path: str, token: str) -> dict:
    r = requests.post(api_url(stack, app, uid), json={"kind": "mobile", "mode": "noData", "path": path, "context": token},
                      headers={"Authorization": f"Bearer {hs(uid)}"}, timeout=10)
    assert r.status_code == 201, r.text
    return r.json()


def expected_body(event_type: str, timestamp: str, app: str, doc: dict, **tail) -> bytes:
    data = {"app": app, "id": doc["id"], "uid": doc["uid"], "kind": doc["kind"], "mode": doc["mode"],
            "path": doc["path"], "format": doc["format"], "context": doc["context"]}
    data.update(tail)
    return json.dumps({"type": event_type, "timestamp": timestamp, "data": data}, separators=(",", ":"),
                      ensure_ascii=False).encode()


def accepted_events(receiver, event_type: str) -> list[dict]:
    return [r for r in receiver.received("/events") if r["status"] == 200 and json.loads(r["body"])["type"] == event_type]


@pytest.mark.timeout(240)
def test_event_hook_reports_dead_token_and_permission_denied_signed_and_retried(stack_factory, uniq, receiver,
                                                                               token_factory):
    stack = stack_factory(start=False)
    stack.config["admin"] = {"token": ADMIN_TOKEN}
    stack.start()
    app = "evhook" + uniq[4:]
    stack.write_app_settings(app, hook_settings(stack.fake, app, receiver, rules=RULES))
    served(stack, app)
    dead, fine = token_factory("dead"), token_factory("fine")
    dead_doc = subscribe(stack, app, "alice", "/users/alice/phone", dead)
    fine_doc = subscribe(stack, app, "alice", "/users/alice/inbox", fine)
    assert dead_doc["uid"] == "alice" and dead_doc["context"] == dead

    # A dead token: FCM answers UNREGISTERED. The receiver first answers 503: retried, same webhook-id.
    receiver.script("/events", [(503, None)])
    stack.fake.server.state.inject(error="UNREGISTERED", token=dead)
    stack.publish("/users/alice/phone", "SET", "1", app=app)
    [event] = wait_for(lambda: accepted_events(receiver, "subscription.token_dead") or None, timeout=30,
                       what="the dead token's event", on_timeout=stack.gateway.tails)
    attempts = [r for r in receiver.received("/events") if r["headers"]["webhook-id"] == event["headers"]["webhook-id"]]
    assert [a["status"] for a in attempts] == [503, 200], attempts
    assert attempts[0]["body"] == attempts[1]["body"]
    assert event["headers"]["webhook-id"].startswith("evt_")
    body = json.loads(event["body"])
    assert TIMESTAMP.match(body["timestamp"]), body
    provider = {"name": "fcm", "status": 404, "code": "UNREGISTERED", "message": "Requested entity was not found."}
    assert event["body"] == expected_body("subscription.token_dead", body["timestamp"], app, dead_doc, provider=provider)
    for a in attempts:
        assert a["verified"] == [True, False], a  # signed with the app's webhook secret (not with the other one)
        assert a["headers"]["content-type"] == "application/json"
    r = requests.get(api_url(stack, app, "alice", dead_doc["id"]), headers={"Authorization": f"Bearer {hs('alice')}"},
                     timeout=10)
    assert r.status_code == 404, r.text  # the subscription is gone, as the event says

    # The rules change: the inbox is not readable any more. Its revoke reaches the device, then the hook hears.
    stack.write_app_settings(app, hook_settings(stack.fake, app, receiver, rules={"rules": {".read": False}}))
    [revoked] = wait_for(lambda: accepted_events(receiver, "subscription.revoked") or None, timeout=30,
                         what="the permission_denied event", on_timeout=stack.gateway.tails)
    body = json.loads(revoked["body"])
    assert revoked["body"] == expected_body("subscription.revoked", body["timestamp"], app, fine_doc,
                                            reason="permission_denied")
    assert revoked["verified"] == [True, False]
    assert revoked["headers"]["webhook-id"] != event["headers"]["webhook-id"]
    assert stack.fake.sends_for(fine), "the device got its revoke"

    # Once per fact; counted.
    assert len(accepted_events(receiver, "subscription.token_dead")) == 1
    assert len(accepted_events(receiver, "subscription.revoked")) == 1
    assert metric(stack, "pushgateway_event_hook_events_total", type="subscription.token_dead") == 1
    assert metric(stack, "pushgateway_event_hook_events_total", type="subscription.revoked") == 1
    assert metric(stack, "pushgateway_event_hook_failures_total", reason="http_503") == 1
    wait_for(lambda: metric(stack, "pushgateway_event_hook_sent_total") == 2, timeout=10, what="2 events sent")
    assert metric(stack, "pushgateway_event_hook_queued") == 0
    status = requests.get(f"{stack.gateway.base}/admin/apps/{app}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                          timeout=10).json()
    assert status["eventHook"] == {"queued": 0}, status


def v2_id(app: str, uid: str, kind: str, destination: str, path: str, context: str) -> str:
    """The subscription id (docs/PAYLOADS.md): base64url of 16 bytes of SHA-256 over the length-prefixed 6-tuple."""
    import base64
    import hashlib
    material = b"pushgateway-subscription-v2"
    for part in (app, uid, kind, destination, path, context):
        raw = part.encode()
        material += len(raw).to_bytes(4, "big") + raw
    return base64.urlsafe_b64encode(hashlib.sha256(material).digest()[:16]).rstrip(b"=").decode()


@pytest.mark.timeout(180)
def test_event_hook_reports_an_expired_v1_subscription(stack_factory, fake_fcm, uniq, receiver, token_factory):
    app = "evexp" + uniq[4:]
    settings = hook_settings(fake_fcm, app, receiver, secrets=(WHSEC, WHSEC_NEW), subscriptionTTLSeconds=2)
    stack = stack_factory(start=False, extra_apps={app: settings})
    stack.config["subscriptions"] = {"expirySweepSeconds": 1}
    stack.start()
    path, token = f"{uniq}/exp", token_factory()
    stack.gateway.must_subscribe(app, path, token, "value")
    [event] = wait_for(lambda: accepted_events(receiver, "subscription.expired") or None, timeout=30,
                       what="the expired event", on_timeout=stack.gateway.tails)
    body = json.loads(event["body"])
    doc = {"id": v2_id(app, "", "mobile", "", path, token), "uid": None, "kind": "mobile", "mode": "value",
           "path": path, "format": "v1", "context": token}
    assert event["body"] == expected_body("subscription.expired", body["timestamp"], app, doc)
    assert event["verified"] == [True, True], "signed with both secrets (a rotation)"
    assert len(stack.fake.sends_for(token)) == 1, "the device got its revoke first"



@pytest.mark.timeout(120)
def test_event_hook_urls_are_checked_at_settings_load(stack_factory, uniq, receiver):
    stack = stack_factory()
    app = "evbad" + uniq[4:]
    good = hook_settings(stack.fake, app, receiver)
    private = dict(good, webhook=dict(good["webhook"], allowPrivateDestinations=False))
    cases = [
        (private, "eventHook.url is refused: a loopback address"),
        (dict(good, eventHook={"url": "http://backend.example.com/events"}), "eventHook.url must be an https:// URL"),
        (dict(good, webhook={"allowPrivateDestinations": True}), "eventHook needs webhook.secrets"),
    ]
    for number, (settings, message) in enumerate(cases, start=1):
        stack.write_app_settings(app, settings)
        wait_for(lambda: stack.gateway.logs().count("app settings refused") >= number, timeout=20,
                 what=f"refusal {number}", on_timeout=stack.gateway.tails)
        line = [l for l in stack.gateway.logs().splitlines() if "app settings refused" in l][-1]
        assert message in line, line
    stack.write_app_settings(app, good)
    served(stack, app)


@pytest.mark.timeout(240)
def test_two_replicas_report_each_revocation_once_from_the_owner(stack_factory, uniq, receiver, token_factory):
    stack = stack_factory()
    config_b = copy.deepcopy(stack.config)
    config_b["http"]["port"] = free_port()
    b = Gateway(stack.workdir, config=config_b, name="replica-b")
    try:
        b.start()
        app = "evrep" + uniq[4:]
        stack.write_app_settings(app, hook_settings(stack.fake, app, receiver, rules=RULES))
        served(stack, app)
        headers = {"Authorization": f"Bearer {hs('alice')}"}
        wait_for(lambda: requests.get(f"{b.base}/datasync/v2/{app}/subscriptions/alice", headers=headers,
                                      timeout=10).status_code == 200, timeout=20, what="replica b to serve the app")
        # Made through either replica: the owner of the app's partition holds them all.
        ids = set()
        for n, gateway in enumerate([stack.gateway, b, b]):
            r = requests.post(f"{gateway.base}/datasync/v2/{app}/subscriptions/alice", headers=headers, timeout=10,
                              json={"kind": "mobile", "mode": "noData", "path": f"/users/alice/n{n}",
                                    "context": token_factory(f"rep{n}")})
            assert r.status_code == 201, r.text
            ids.add(r.json()["id"])
        stack.write_app_settings(app, hook_settings(stack.fake, app, receiver, rules={"rules": {".read": False}}))
        events = wait_for(lambda: (lambda got: got if len(got) >= 3 else None)(
            accepted_events(receiver, "subscription.revoked")), timeout=30, what="three revocations",
            on_timeout=stack.gateway.tails)
        assert {json.loads(e["body"])["data"]["id"] for e in events} == ids
        assert all(e["verified"] == [True, False] for e in events)
        # One replica (the owner) reported them, once each.
        counts = sorted(sum(s.value for s in g.metrics() if s.name == "pushgateway_event_hook_events_total")
                        for g in (stack.gateway, b))
        assert counts == [0, 3], counts
        assert len(accepted_events(receiver, "subscription.revoked")) == 3
    finally:
        b.stop()
