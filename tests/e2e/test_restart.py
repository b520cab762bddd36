"""Graceful shutdown and at-least-once across a restart (SPEC §2, §8, §9)."""

from __future__ import annotations

import os

import pytest

from gateway import events_consumed
from harness import APP
from kafka_util import read_topic
from procutil import wait_for
import payloads as P

SIGTERM_EXIT_TIMEOUT = 20.0


@pytest.mark.timeout(300)
def test_events_published_while_down_are_delivered_after_restart(stack_factory, uniq, token_factory):
    """Subscriptions live in the state topic; the consumer group's committed offsets say where to resume.

    A noData subscription keeps the expected payloads simple; shadows across a restart are
    test_shadows_survive_a_restart's subject.
    """
    stack = stack_factory()
    s = f"{uniq}/r"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "noData")
    stack.publish(s, "SET", '{"n":0}')
    stack.expect_data(token, [P.no_data(APP, s)])

    first = stack.gateway
    rc = first.terminate_and_wait(SIGTERM_EXIT_TIMEOUT)
    assert rc is not None, f"gateway did not exit within {SIGTERM_EXIT_TIMEOUT}s of SIGTERM\n{first.tails()}"
    assert rc == 0, f"gateway exited with {rc} on SIGTERM\n{first.tails()}"

    for n in (1, 2, 3):  # published while no gateway runs; the JSON form once
        stack.publish(f"{s}/n", "SET", str(n), as_json=(n == 2))

    stack.start()  # same config, same group: loads the subscriptions, resumes from the committed offsets
    second = stack.gateway
    assert second is not first
    # No re-subscription: the 3 events published while it was down reach FCM, after the first one, in order.
    stack.expect_data(token, [P.no_data(APP, s)] * 4)

    def consumed_3():
        n = events_consumed(second.metrics())
        return n >= 3 and n

    wait_for(consumed_3, timeout=15, what="the restarted gateway to count >= 3 consumed events",
             on_timeout=lambda: second.metrics_text())
    dead = read_topic(stack.broker.bootstrap, stack.topics.dlq, min_records=0, timeout=5, settle=1.0)
    assert dead == [], f"unexpected dead letters: {dead}"


@pytest.mark.timeout(300)
def test_subscriptions_survive_kill_9(stack_factory, uniq, token_factory):
    """An acknowledged subscribe (204) is in the state topic: a kill -9 right after it loses nothing."""
    stack = stack_factory()
    s = f"{uniq}/k"
    tokens = [token_factory() for _ in range(20)]
    for token in tokens:
        stack.gateway.must_subscribe(APP, s, token, "noData")
    stack.gateway.kill()
    stack.start()
    stack.publish(s, "SET", "1")
    for token in tokens:
        stack.expect_data(token, [P.no_data(APP, s)])


@pytest.mark.timeout(120)
def test_state_topic_holds_subscriptions_and_tombstones(stack_factory, uniq, token_factory):
    """The state topic's contract (docs/ARCHITECTURE.md): key = identity, value = settings, deletion = null."""
    import json
    import time

    stack = stack_factory()
    s = f"{uniq}/st"
    sp = s if s.startswith("/") else "/" + s
    token = token_factory()
    before = time.time()
    stack.gateway.must_subscribe(APP, s, token, "childEvent")
    r = stack.gateway.unsubscribe(APP, s, token)
    assert r.status_code == 204, r.text
    key = json.dumps([APP, sp, "mobile", token, ""], separators=(",", ":"), ensure_ascii=False).encode()

    def ours():
        records = read_topic(stack.broker.bootstrap, stack.topics.state, min_records=0, timeout=5, settle=0.5)
        mine = [rec for rec in records if rec.key == key]
        return len(mine) >= 2 and mine

    mine = wait_for(ours, timeout=20, what=f"the subscription and its tombstone under key {key!r} in the state topic")
    assert len({rec.partition for rec in mine}) == 1, "one subscription's records share a partition (ordering)"
    first, last = sorted(mine, key=lambda rec: rec.offset)[-2:]
    settings = json.loads(first.value)
    assert settings["mode"] == "childEvent" and settings["format"] == "v1"
    assert before + 29 * 24 * 3600 < settings["expiresAt"] < time.time() + 31 * 24 * 3600
    assert last.value is None, f"a deletion must be a tombstone (null value), got {last.value!r}"


@pytest.mark.timeout(300)
def test_shadows_survive_a_restart(stack_factory, uniq, token_factory):
    """SPEC §4: the shadow behind a value subscription is persisted with it; after a restart a write below the
    node still gets the complete value (not NotLoaded)."""
    stack = stack_factory()
    s = f"{uniq}/sh"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "value")
    stack.publish(s, "SET", '{"a":1,"b":{"c":2}}')  # seeds the shadow
    stack.expect_data(token, [P.value(APP, s, {"a": P.Num("1"), "b": {"c": P.Num("2")}})])
    first = stack.gateway
    assert first.terminate_and_wait(SIGTERM_EXIT_TIMEOUT) == 0, first.tails()
    stack.start()
    stack.publish(f"{s}/b/d", "SET", '"x"')  # below the node: needs the shadow
    stack.expect_data(token, [
        P.value(APP, s, {"a": P.Num("1"), "b": {"c": P.Num("2")}}),
        P.value(APP, s, {"a": P.Num("1"), "b": {"c": P.Num("2"), "d": "x"}}),
    ])
