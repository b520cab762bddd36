"""Graceful shutdown and at-least-once across a restart (SPEC §2, §8, §9)."""

from __future__ import annotations

import os

import pytest

from gateway import events_consumed
from harness import APP
from kafka_util import read_topic
from procutil import wait_for
import payloads as P

# TODO(issue 3): v1 subscriptions are held in memory only for now. Once they are durable (compacted state
# topic), flip this to True: the test then also asserts that the 3 events published while the gateway was
# down reach FCM by themselves, without re-subscribing. (E2E_DURABLE_SUBSCRIPTIONS=1 runs that mode now.)
DURABLE_SUBSCRIPTIONS = os.environ.get("E2E_DURABLE_SUBSCRIPTIONS") == "1"

SIGTERM_EXIT_TIMEOUT = 20.0


@pytest.mark.timeout(300)
def test_sigterm_exits_0_and_events_published_while_down_are_consumed(stack_factory, uniq, token_factory):
    stack = stack_factory()
    s = f"{uniq}/r"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "value")
    stack.publish(s, "SET", '{"n":0}')
    stack.expect_data(token, [P.value(APP, s, {"n": P.Num("0")})])

    first = stack.gateway
    rc = first.terminate_and_wait(SIGTERM_EXIT_TIMEOUT)
    assert rc is not None, f"gateway did not exit within {SIGTERM_EXIT_TIMEOUT}s of SIGTERM\n{first.tails()}"
    assert rc == 0, f"gateway exited with {rc} on SIGTERM\n{first.tails()}"

    for n in (1, 2, 3):  # published while no gateway runs
        stack.publish(f"{s}/n", "SET", str(n), as_json=(n == 2))

    stack.start()  # same config, same group: resumes from the committed offsets
    second = stack.gateway
    assert second is not first

    expected_down = [P.value(APP, s, {"n": P.Num(str(n))}) for n in (1, 2, 3)]
    if DURABLE_SUBSCRIPTIONS:
        stack.expect_data(token, [P.value(APP, s, {"n": P.Num("0")})] + expected_down)
    else:
        # Subscriptions are not durable yet: re-create it. Consumption may have started before this PUT, so
        # the down-time events are checked through the consumed-events counter, and delivery with a marker.
        second.must_subscribe(APP, s, token, "value")
    marker = '{"marker":"m","n":3}'
    stack.publish(s, "SET", marker)  # at S, so its data does not depend on a shadow surviving the restart
    marker_data = P.serialise_data(P.value(APP, s, P.parse(marker))).decode()

    def marker_delivered():
        for send in stack.fake.sends_for(token):
            if P.raw_member(send["body"], "message", "data") == marker_data:
                return send
        return None

    wait_for(marker_delivered, timeout=30, what=f"the marker notification {marker_data}",
             on_timeout=lambda: stack.fake.describe(token) + "\n" + second.tails())

    def consumed_4():
        n = events_consumed(second.metrics())
        return n >= 4 and n

    wait_for(consumed_4, timeout=15, what="the restarted gateway to count >= 4 consumed events (3 + marker)",
             on_timeout=lambda: second.metrics_text())
    # Nothing was dead-lettered on the way.
    dead = read_topic(stack.broker.bootstrap, stack.topics.dlq, min_records=0, timeout=5, settle=1.0)
    assert dead == [], f"unexpected dead letters: {dead}"
