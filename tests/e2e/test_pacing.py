"""Pacing each provider project at its send quota (issue 19), end to end: the real gateway and Tansu, the fake FCM
answering 429 QUOTA_EXCEEDED above a rate (tests/fakes/fake_fcm.py, `rate_limit`).

A burst to a few thousand devices of an app whose FCM project is paced (`fcm.maxSendsPerMinute`) reaches the
fake with no 429, takes the quota's time (count / rate) within 10 %, and shows in the metrics and the per-app
status while it lasts (docs/DELIVERY.md, "Pacing").

The issue's 100,000-device burst is the same test, larger (a load run; its numbers are in Benchmarks/README.md):
    PUSH_PACING_DEVICES=100000 PUSH_PACING_PER_MINUTE=60000 PUSH_PACING_FAKE_WINDOW_S=60 \
        python3 -m pytest tests/e2e/test_pacing.py -q -s
(FCM's own window, a minute: this Python fake pauses for its garbage collector as its 100,000 records pile up, and
the requests it then reads at once would overflow a 5 s window's 10 % headroom.)"""

from __future__ import annotations

import bisect
import os
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from procutil import wait_for
from test_delivery import metric

ADMIN_TOKEN = "admin-token-for-the-pacing-tests-0123456789"
DEVICES = int(os.environ.get("PUSH_PACING_DEVICES", "3000"))
PER_MINUTE = int(os.environ.get("PUSH_PACING_PER_MINUTE", "18000"))  # 300 sends a second: 3,000 take about 10 s
# The provider's quota: 10 % above the pace the operator set (the headroom docs/DELIVERY.md recommends), counted
# over any 5 s (a sliding window, not aligned to the gateway's clock). Sent at full speed, the burst would pass
# it within a second or two.
FAKE_WINDOW_S = float(os.environ.get("PUSH_PACING_FAKE_WINDOW_S", "5"))
FAKE_QUOTA = int(PER_MINUTE / 60 * 1.1 * FAKE_WINDOW_S)


def status(stack, app: str) -> dict:
    r = requests.get(f"{stack.gateway.base}/admin/apps/{app}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                     timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.timeout(300 + int(DEVICES / 500 + 2 * DEVICES / (PER_MINUTE / 60)))
def test_a_burst_is_paced_at_the_project_quota(stack_factory, fake_fcm, uniq, token_factory):
    app = "paced" + uniq[4:]
    project = "paced-" + uniq[4:]
    stack = stack_factory(start=False, extra_apps={app: {
        "enabled": True,
        "fcmServiceAccountFile": fake_fcm.service_account_file(app, project_id=project),
        "fcm": {"maxSendsPerMinute": PER_MINUTE},
        # Thousands of anonymous subscribes from one test client.
        "quotas": {"clientWritesPerSecond": 100000, "clientWriteBurst": 100000,
                   "anonymousWritesPerSecond": 100000, "anonymousWriteBurst": 100000},
    }})
    stack.config["admin"] = {"token": ADMIN_TOKEN}
    stack.start()
    path = f"{uniq}/all"
    tokens = [token_factory("paced") for _ in range(DEVICES)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda token: stack.gateway.must_subscribe(app, path, token, "noData"), tokens))
    wanted = set(tokens)

    def project_sends() -> list[dict]:
        return [s for s in fake_fcm.sends() if s["project"] == project]

    state = fake_fcm.server.state
    sends_before = state.send_count  # read without copying the records: the burst's progress

    fake_fcm.server.state.inject(rate_limit={"count": FAKE_QUOTA, "window_s": FAKE_WINDOW_S})
    try:
        stack.publish(path, "SET", "1", app=app)
        # While the burst lasts, the per-app status shows the project's pace and the notifications waiting for it.
        pacing = wait_for(
            lambda: next((p for p in status(stack, app)["deliveries"]["pacing"] if p["pacing"]), None), timeout=30,
            interval=0.2, what="the status to show the project pacing", on_timeout=stack.gateway.tails)
        assert pacing["project"] == f"fcm:{project}" and pacing["waiting"] > 0, pacing
        assert abs(float(pacing["sendsPerSecond"]) - PER_MINUTE / 60) < PER_MINUTE / 60 * 0.01, pacing
        assert metric(stack, "pushgateway_notifications_waiting_for_pace", project=f"fcm:{project}") > 0

        wait_for(lambda: state.send_count - sends_before >= DEVICES, timeout=60 + 2 * DEVICES / (PER_MINUTE / 60),
                 interval=0.5, what=f"{DEVICES} sends",
                 on_timeout=lambda: f"{state.send_count - sends_before} sends\n{stack.gateway.tails()}")
        sends = project_sends()
        refused = [s for s in sends if s["status"] != 200]
        assert not refused, f"{len(refused)} sends refused, e.g. {refused[0]['status']}"
        assert state.rate_limited == 0
        assert {s["token"] for s in sends} == wanted, "every device notified"
        times = sorted(s["time"] for s in sends)
        elapsed = times[-1] - times[0]
        quota_time = DEVICES / (PER_MINUTE / 60)
        busiest = max(bisect.bisect_left(times, start + 1.0) - i for i, start in enumerate(times))
        print(f"pacing: {len(sends)} sends in {elapsed:.2f} s (the quota's time: {quota_time:.2f} s, "
              f"{elapsed / quota_time - 1:+.1%}); busiest second: {busiest} sends; "
              f"none refused by a quota of {FAKE_QUOTA} per {FAKE_WINDOW_S:.0f} s")
        assert len(sends) == DEVICES, "one send per device: nothing retried"
        assert quota_time * 0.9 <= elapsed <= quota_time * 1.1, elapsed
        paced = metric(stack, "pushgateway_sends_paced_total", provider="fcm", project=f"fcm:{project}")
        assert paced >= DEVICES * 0.9, paced
        wait_for(lambda: not any(p["pacing"] for p in status(stack, app)["deliveries"]["pacing"]), timeout=10,
                 what="the pacing to end")
    finally:
        fake_fcm.server.state.inject(rate_limit=None)
