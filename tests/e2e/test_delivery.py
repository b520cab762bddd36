"""Delivery that never loses a notification (SPEC §8, issue 5): provider outages with durable retries, a crash
during an outage, dead tokens, errors that are our fault, a noisy app, and HMS against a fake Huawei server."""

from __future__ import annotations

import json
import os
import time

import jwt
import pytest
import requests

from harness import APP, load_fake_fcm_module
from kafka_util import read_topic
from procutil import wait_for
import payloads as P


def metric(stack, name: str, **labels) -> float:
    total = 0.0
    for s in stack.gateway.metrics():
        if s.name == name and all(f'{k}="{v}"' in s.labels for k, v in labels.items()):
            total += s.value
    return total


def values_received(stack, token: str) -> list:
    out = []
    for s in stack.fake.sends_for(token):
        data = json.loads(s["body"])["message"]["data"]
        out.append(json.loads(data["d"]) if "d" in data else data.get("t"))
    return out


@pytest.mark.timeout(180)
def test_outage_then_recovery_delivers_everything_in_order(stack_factory, uniq, token_factory):
    stack = stack_factory()
    devices = [(f"{uniq}/d{i}", token_factory(f"out{i}")) for i in range(5)]
    for path, token in devices:
        stack.gateway.must_subscribe(APP, path, token, "value")
        # The provider is down for these devices: three 503s each (with Retry-After on the first), then it recovers.
        stack.fake.server.state.inject(http_status=503, token=token, count=1, headers={"Retry-After": "1"})
        stack.fake.server.state.inject(http_status=503, token=token, count=2)
    for n in range(5):
        for path, _ in devices:
            stack.publish(path, "SET", str(n))

    def all_final():
        return all(values_received(stack, t)[-1:] == [4] for _, t in devices)
    wait_for(all_final, timeout=90, interval=0.2, what="every device to receive the last value",
             on_timeout=lambda: json.dumps({t[:8]: values_received(stack, t) for _, t in devices}))
    for _, token in devices:
        got = values_received(stack, token)
        # Order per subscription is kept; pending values may be coalesced to the latest (SPEC §8).
        assert got == sorted(got) and len(set(got)) == len(got) and got[-1] == 4, got
    scheduled = metric(stack, "pushgateway_retries_scheduled_total")
    delivered = metric(stack, "pushgateway_retries_finished_total", outcome="delivered")
    print(f"outage: {len(devices) * 5} notifications published, {scheduled:.0f} retries scheduled, "
          f"{delivered:.0f} delivered by retry, per device received: "
          f"{[len(values_received(stack, t)) for _, t in devices]}")
    assert scheduled >= 3 * len(devices) and delivered >= len(devices)
    wait_for(lambda: metric(stack, "pushgateway_retry_backlog") == 0, timeout=10, what="an empty retry backlog")


@pytest.mark.timeout(240)
def test_crash_during_outage_keeps_pending_retries(stack_factory, uniq, token_factory):
    stack = stack_factory()
    devices = [(f"{uniq}/c{i}", token_factory(f"crash{i}")) for i in range(3)]
    for path, token in devices:
        stack.gateway.must_subscribe(APP, path, token, "value")
        stack.fake.server.state.inject(http_status=503, token=token, count=3)
    for path, _ in devices:
        stack.publish(path, "SET", '"pending"')
    wait_for(lambda: metric(stack, "pushgateway_retry_backlog") >= len(devices), timeout=30,
             what="the failed notifications in the retry backlog")
    stack.gateway.kill()  # kill -9 with retries pending: they are in the state topic
    stack.start()
    for path, token in devices:
        stack.expect_data(token, [P.value(APP, path, "pending")], timeout=90)


@pytest.mark.timeout(120)
def test_dead_token_revokes_and_our_fault_does_not(stack_factory, uniq, token_factory):
    stack = stack_factory()
    dead, fine = token_factory("dead"), token_factory("fine")
    stack.gateway.must_subscribe(APP, f"{uniq}/x", dead, "noData")
    stack.gateway.must_subscribe(APP, f"{uniq}/x", fine, "noData")
    stack.fake.server.state.inject(error="UNREGISTERED", token=dead)
    stack.fake.server.state.inject(error="THIRD_PARTY_AUTH_ERROR", token=fine)
    stack.publish(f"{uniq}/x", "SET", "1")
    # Our fault (APNs credentials): retried, delivered, nobody revoked.
    stack.expect_data(fine, [P.no_data(APP, f"{uniq}/x")])
    # Dead token: the subscription is deleted from the state topic.
    key = json.dumps([APP, f"{uniq}/x", "mobile", dead, ""], separators=(",", ":")).encode()

    def tombstoned():
        records = [r for r in read_topic(stack.broker.bootstrap, stack.topics.state, min_records=0, timeout=5,
                                         settle=0.3) if r.key == key]
        return records and records[-1].value is None
    wait_for(tombstoned, timeout=20, what="the dead token's subscription to be deleted")
    assert metric(stack, "pushgateway_revocations_total", reason="token_dead") >= 1
    stack.publish(f"{uniq}/x", "SET", "2")
    stack.expect_data(fine, [P.no_data(APP, f"{uniq}/x")] * 2)
    assert len(stack.fake.sends_for(dead, ok_only=False)) == 1


@pytest.mark.timeout(120)
def test_noisy_app_with_slow_provider_does_not_delay_others(stack_factory, fake_fcm, uniq, token_factory):
    noisy = "noisy" + uniq[4:]
    stack = stack_factory(start=False, extra_apps={
        noisy: {"enabled": True, "fcmServiceAccountFile": fake_fcm.service_account_file(noisy, project_id="slow-project")},
    })
    stack.start()
    slow = [token_factory("slow") for _ in range(30)]
    for token in slow:
        stack.gateway.must_subscribe(noisy, f"{uniq}/n", token, "noData")
    quick = token_factory("quick")
    stack.gateway.must_subscribe(APP, f"{uniq}/q", quick, "noData")
    stack.fake.server.state.inject(project_delay_ms={"slow-project": 5000})
    try:
        for _ in range(10):
            stack.publish(f"{uniq}/n", "SET", "1", app=noisy)  # 300 slow requests in flight
        started = time.monotonic()
        stack.publish(f"{uniq}/q", "SET", "1")
        stack.expect_data(quick, [P.no_data(APP, f"{uniq}/q")], timeout=10)
        elapsed = time.monotonic() - started
        print(f"noisy app: the other app's notification took {elapsed:.2f} s while 300 slow sends were in flight")
        assert elapsed < 3.0, elapsed
    finally:
        stack.fake.server.state.inject(project_delay_ms={"slow-project": 0})


# -- HMS ------------------------------------------------------------------------------------------------------

SECRET = "hms-tests-hs256-secret-long-enough-for-hs256"


@pytest.fixture
def fake_hms(fake_fcm):
    import importlib.util
    import sys
    load_fake_fcm_module()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fakes", "fake_hms.py")
    spec = importlib.util.spec_from_file_location("fake_hms", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fake_hms"] = module
    spec.loader.exec_module(module)
    # Same certificate as the fake FCM: the gateway trusts one CA file for its provider connections.
    server = module.FakeHMSServer(tls_cert=fake_fcm.server.tls_cert, tls_key=fake_fcm.server.tls_key).start()
    try:
        yield server
    finally:
        server.stop()


def hms_data(server, token: str) -> list[str]:
    return [s["data"] for s in server.sends() if s.get("token") == token and s.get("code") == "80000000"]


def start_with_hms(stack_factory, fake_hms, app: str, uniq: str, settings, prefix: str = "100000"):
    """A started stack whose gateway reaches the fake HMS, and `app`'s settings (`settings(stack)` plus its own HMS
    app, registered with the fake, its numeric id made of `prefix` and `uniq`)."""
    registered = fake_hms.register_app(prefix + uniq[4:10].translate(str.maketrans("abcdef", "123456")))
    stack = stack_factory(start=False)
    stack.config["hms"] = {"baseURL": fake_hms.base_url, "tokenURL": fake_hms.token_url}
    stack.start()
    stack.write_app_settings(app, {
        **settings(stack), "hms": {"appId": registered["app_id"], "clientId": registered["client_id"],
                            "clientSecret": registered["client_secret"]}})
    return stack


@pytest.mark.timeout(180)
def test_hms_delivery_revocation_and_mass_failure_guard(stack_factory, fake_hms, uniq, token_factory):
    hw = "hw" + uniq[4:]
    stack = start_with_hms(stack_factory, fake_hms, hw, uniq,
                           lambda _: {"enabled": True, "authKeys": [{"alg": "HS256", "secret": SECRET}]})
    token = jwt.encode({"uid": "u1", "exp": int(time.time()) + 600}, SECRET, algorithm="HS256")
    url = f"{stack.gateway.base}/datasync/v2/{hw}/subscriptions/u1"
    headers = {"Authorization": f"Bearer {token}"}
    wait_for(lambda: requests.get(url, headers=headers, timeout=5).status_code == 200, timeout=20,
             what="the HMS app to be served")

    devices = [token_factory("hw") for _ in range(12)]
    for device in devices:
        r = requests.post(url, headers=headers, timeout=10,
                          json={"kind": "huawei", "mode": "noData", "path": f"{uniq}/h", "context": device, "format": "v1"})
        assert r.status_code == 201, r.text

    # 80300007 for every device of the app at once (as with a wrong app id): a configuration error, nobody is
    # revoked; the notifications are retried and delivered once HMS accepts them.
    for device in devices:
        fake_hms.inject(code="80300007", token=device)
    stack.publish(f"{uniq}/h", "SET", "1", app=hw)
    expected = json.dumps({"t": "noData", "app": hw, "sp": f"{uniq}/h"}, separators=(",", ":"))
    for device in devices:
        wait_for(lambda: hms_data(fake_hms, device), timeout=60, what="the retried HMS send")
        assert hms_data(fake_hms, device) == [expected]
    assert len(requests.get(url, headers=headers, timeout=5).json()["subscriptions"]) == len(devices)
    sends = [s for s in fake_hms.sends() if s.get("token") in devices]
    assert all(s["http_version"] == "2" for s in sends), {s["http_version"] for s in sends}

    # Later, one device's token is invalid while the others are reached: that one is revoked.
    lone = devices[0]
    fake_hms.inject(code="80300007", token=lone)
    stack.publish(f"{uniq}/h", "SET", "2", app=hw)
    wait_for(lambda: len(requests.get(url, headers=headers, timeout=5).json()["subscriptions"]) == len(devices) - 1,
             timeout=30, what="the invalid token's subscription to be revoked")
    for device in devices[1:]:
        wait_for(lambda: len(hms_data(fake_hms, device)) >= 2, timeout=30, what="the second HMS send")
