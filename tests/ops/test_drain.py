"""Graceful shutdown, measured (docs/OPERATIONS.md, "Graceful shutdown"): SIGTERM while provider requests are in
flight lets them finish, commits their offsets and exits 0; the time it takes, plus the preStop hook, fits the
Kubernetes grace period of the manifests (tests/ops/test_deploy.py checks the same bound from the timeouts)."""

from __future__ import annotations

import time

from harness import APP
from procutil import wait_for
from test_deploy import OVERLAYS, container, pod

PROVIDER_DELAY_MS = 3000  # each FCM answer takes 3 s: sends are in flight at SIGTERM


def _drain(stack) -> tuple[int | None, float]:
    started = time.monotonic()
    code = stack.gateway.terminate_and_wait(timeout=60)
    return code, time.monotonic() - started


def test_idle_drain_is_quick(stack_factory):
    stack = stack_factory()
    code, seconds = _drain(stack)
    print(f"\nidle drain: {seconds:.2f} s")
    assert code == 0, stack.gateway.tails()
    assert seconds < 5, seconds


def test_drain_with_sends_in_flight_fits_the_grace_period(stack_factory, token_factory, uniq):
    stack = stack_factory()
    fake = stack.fake.server.state
    tokens = [token_factory("drain") for _ in range(20)]
    for token in tokens:
        stack.gateway.must_subscribe(APP, uniq, token, "noData")
    fake.inject(delay_ms=PROVIDER_DELAY_MS)
    try:
        stack.publish(uniq, "SET", '"before SIGTERM"')
        # Every request has reached the fake (whose answers take 3 s): all are in flight now.
        wait_for(lambda: all(stack.fake.sends_for(t) for t in tokens), timeout=30, what="20 requests in flight")
        code, seconds = _drain(stack)
    finally:
        fake.inject(delay_ms=0)
    print(f"\ndrain with 20 sends in flight (provider answers in {PROVIDER_DELAY_MS} ms): {seconds:.2f} s")
    assert code == 0, stack.gateway.tails()
    assert "stopped" in stack.gateway.logs()
    assert seconds < PROVIDER_DELAY_MS / 1000 + 5, seconds
    for overlay in OVERLAYS:
        pre_stop = int(container(overlay)["lifecycle"]["preStop"]["exec"]["command"][1])
        # Even with answers as slow as the request timeout (10 s), the drain fits: checked in test_deploy.py.
        assert pre_stop + seconds < pod(overlay)["terminationGracePeriodSeconds"], overlay

    # The offsets of the finished sends were committed: a new gateway in the same group does not send them again.
    before = {t: len(stack.fake.sends_for(t)) for t in tokens}
    stack.start()
    stack.publish(uniq, "SET", '"after restart"')
    for token in tokens:
        stack.wait_sends(token, before[token] + 1)
    again = {t: len(stack.fake.sends_for(t)) - before[t] for t in tokens}
    assert set(again.values()) == {1}, f"notifications sent again after the drain: {again}"
