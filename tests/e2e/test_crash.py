"""Crash at scale (issue 3): many devices subscribed, kill -9 while events flow, restart. Every acknowledged
subscription is still there and every accepted event reaches every subscribed device at least once
(SPEC §8 guarantee; duplicates after a crash are allowed)."""

from __future__ import annotations

import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness import APP
from procutil import wait_for

DEVICES_PER_PATH = 50
PATHS = 4
EVENTS_PER_PATH = 30


@pytest.mark.timeout(420)
def test_kill_9_while_events_flow_loses_nothing(stack_factory, uniq, token_factory):
    stack = stack_factory()
    paths = [f"{uniq}/p{i}" for i in range(PATHS)]
    devices = {p: [token_factory(f"c{i}d{j}-") for j in range(DEVICES_PER_PATH)] for i, p in enumerate(paths)}

    def subscribe(pair):
        path, token = pair
        r = stack.gateway.subscribe(APP, path, token, "noData")
        assert r.status_code == 204, r.text
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(subscribe, [(p, t) for p in paths for t in devices[p]]))

    # Events flow: the first rounds are published, and the gateway is killed while it is delivering them
    # (a quarter delivered); the remaining rounds are published while it is down.
    published = Counter()

    def publish_rounds(rounds: range) -> None:
        for n in rounds:
            for p in paths:
                stack.publisher.event(stack.topics.changes, APP, p, "SET", json.dumps(n), flush=False)
                published[p] += 1
            stack.publisher.flush()  # accepted by the broker from here on
    first_half = EVENTS_PER_PATH // 2
    publish_rounds(range(first_half))
    quarter = first_half * PATHS * DEVICES_PER_PATH // 4
    wait_for(lambda: len(stack.fake.sends()) >= quarter, timeout=60, interval=0.02,
             what=f"{quarter} deliveries before the kill")
    stack.gateway.kill()
    sent_before_restart = len(stack.fake.sends())
    publish_rounds(range(first_half, EVENTS_PER_PATH))

    stack.start()
    second = stack.gateway
    # Every acknowledged subscription is loaded...
    total = PATHS * DEVICES_PER_PATH
    wait_for(lambda: sum(s.value for s in second.metrics() if s.name == "pushgateway_subscriptions") == total,
             timeout=30, what=f"{total} subscriptions after the restart")

    # ... and every device got at least one notification per event published at its path.
    def counts() -> Counter:
        c = Counter()
        for s in stack.fake.sends():
            if s.get("status") == 200:
                c[(json.loads(s["body"])["message"]["token"])] += 1
        return c

    def complete():
        c = counts()
        return all(c[t] >= published[p] for p in paths for t in devices[p])
    wait_for(complete, timeout=180, interval=1.0, what="every event delivered to every device at least once",
             on_timeout=lambda: f"published={dict(published)} min per device="
                                f"{min(counts()[t] for p in paths for t in devices[p])}\n" + second.tails())
    c = counts()
    expected = sum(published[p] * DEVICES_PER_PATH for p in paths)
    duplicates = sum(c[t] for p in paths for t in devices[p]) - expected
    print(f"crash test: {expected} notifications expected, {duplicates} duplicates after kill -9, "
          f"{sent_before_restart} sent before the restart")
