"""Issue 19: one app's slow provider does not pause every app.

Two apps whose ids land on different change partitions; app A's FCM project answers only after 5 s (the fake's
per-project delay). The replica's in-flight budget (`kafka.maxInFlightRecords`: 40) is small enough that A's
backlog alone would fill it; each partition's share (derived: 16) pauses A's partition alone, so app B's
notifications keep flowing: every notification of both apps is delivered, and B's delivery latency (publish → the
fake FCM receives it) stays far below A's delay."""

from __future__ import annotations

import math
import time

import pytest

from cluster import gauge, partition_of
from procutil import wait_for

DELAY_MS = 5000
BUDGET = 40            # kafka.maxInFlightRecords; the derived share is max(min(40, 16), 40 / 4) = 16
SLOW_EVENTS = 60       # A alone: more than the whole budget in flight within 2 s
QUICK_EVENTS = 40
STEP = 0.1             # one B event (and two A events, until A's are all out) every 100 ms
PARTITIONS = 4


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


@pytest.mark.timeout(300)
def test_a_slow_app_pauses_only_its_own_partition(stack_factory, fake_fcm, uniq, token_factory):
    tag = uniq[4:]
    slow = f"slow{tag}"
    quick = next(name for name in (f"quick{tag}{i}" for i in range(100))
                 if partition_of(name, PARTITIONS) != partition_of(slow, PARTITIONS))
    slow_project, quick_project = f"slow-{tag}", f"quick-{tag}"
    stack = stack_factory(start=False, partitions=PARTITIONS, extra_apps={
        slow: {"enabled": True, "fcmServiceAccountFile": fake_fcm.service_account_file(slow, project_id=slow_project)},
        quick: {"enabled": True, "fcmServiceAccountFile": fake_fcm.service_account_file(quick, project_id=quick_project)},
    })
    stack.config["kafka"]["maxInFlightRecords"] = BUDGET
    # Tansu answers a fetch only when fetch.wait.max.ms expires: at the default 500 ms that wait, not the slow app,
    # would set B's latency (about 250 ms p99 with or without a slow app). At 50 ms, the release build gives B a p99
    # of 23-33 ms while A's project answers after 5 s (Benchmarks/README.md).
    stack.config["kafka"].setdefault("properties", {})["fetch.wait.max.ms"] = "50"
    stack.start()
    gateway = stack.gateway

    # One subscription (and device) per event: a subscription has one notification in flight at a time, and
    # pending noData notifications of one subscription are coalesced; here every event is one send.
    slow_tokens = [token_factory("slow") for _ in range(SLOW_EVENTS)]
    quick_tokens = [token_factory("quick") for _ in range(QUICK_EVENTS)]
    for i, token in enumerate(slow_tokens):
        gateway.must_subscribe(slow, f"{uniq}/s{i}", token, "noData")
    for i, token in enumerate(quick_tokens):
        gateway.must_subscribe(quick, f"{uniq}/q{i}", token, "noData")

    fake_fcm.server.state.inject(project_delay_ms={slow_project: DELAY_MS})
    try:
        published: dict[str, float] = {}
        next_slow = 0
        started = time.monotonic()
        for step in range(QUICK_EVENTS):
            for _ in range(2):
                if next_slow < SLOW_EVENTS:
                    stack.publish(f"{uniq}/s{next_slow}", "SET", "1", app=slow)
                    next_slow += 1
            published[quick_tokens[step]] = time.time()
            stack.publish(f"{uniq}/q{step}", "SET", "1", app=quick)
            left = started + (step + 1) * STEP - time.monotonic()
            if left > 0:
                time.sleep(left)  # pacing the publisher (a steady load), not synchronisation
        while next_slow < SLOW_EVENTS:
            stack.publish(f"{uniq}/s{next_slow}", "SET", "1", app=slow)
            next_slow += 1

        for token in quick_tokens:
            stack.wait_sends(token, 1, timeout=60)
        latencies = [fake_fcm.sends_for(token)[0]["time"] - published[token] for token in quick_tokens]
        measured = p99(latencies)
        print(f"inflight fairness: app B's delivery latency p50 {sorted(latencies)[len(latencies) // 2] * 1000:.0f} ms, "
              f"p99 {measured * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms over {len(latencies)} notifications, "
              f"while app A's project answered after {DELAY_MS} ms (budget {BUDGET}, share 16)")
        assert measured < 1.0, f"app B's p99 delivery latency {measured:.3f} s: held behind app A's slow project"

        # Meanwhile A's partition is held by its budget: its backlog waits for the slow project.
        wait_for(lambda: gauge(gateway, "pushgateway_partitions_paused_for_budget") >= 1, timeout=20,
                 what="the slow app's partition paused for its budget", on_timeout=gateway.tails)
        # Every notification of A is delivered too (16 in flight per 5 s: about 20 s).
        for token in slow_tokens:
            stack.wait_sends(token, 1, timeout=120)

        # Drained: nothing stays paused.
        wait_for(lambda: gauge(gateway, "pushgateway_partitions_paused_for_budget") == 0, timeout=30,
                 what="no partition paused for its budget once drained", on_timeout=gateway.tails)
    finally:
        fake_fcm.server.state.inject(project_delay_ms={slow_project: 0})
