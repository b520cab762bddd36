"""Dead letters (SPEC §2): a record that cannot be decoded or is invalid goes to the dead-letter topic with the
reason in a header, is counted, and consumption goes on — the valid records around it are delivered."""

from __future__ import annotations

import time

from gateway import sum_matching
from harness import APP
from kafka_util import encode_change_event, json_change_event, read_topic
import payloads as P


def test_malformed_records_are_dead_lettered_and_consumption_continues(stack_factory, uniq, token_factory):
    stack = stack_factory()
    s = f"{uniq}/d/s"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "value")
    now = int(time.time() * 1000)
    json_header = [("content-type", b"application/json")]
    bad = [
        ("garbage bytes", b"\x08\x96\x01\xff\xff\xff garbage, not protobuf \x00", []),
        ("JSON with an unknown op",
         json_change_event(APP, s, "FROBNICATE", after='{"v":"bad"}', event_id="bad-op", timestamp_ms=now),
         json_header),
        ("a key with a dot in the path",
         encode_change_event(APP, f"{s}/b.c", "SET", after='"bad"', event_id="bad-path", timestamp_ms=now), []),
        ("JSON that is not JSON", b'{"appId":"toto","path":', json_header),
        ("bad JSON in after",
         encode_change_event(APP, s, "SET", after='{"v":', event_id="bad-after", timestamp_ms=now), []),
        ("missing app id",
         encode_change_event("", s, "SET", after='{"v":"no app"}', event_id="no-app", timestamp_ms=now), []),
        ("op unspecified",
         encode_change_event(APP, s, "OP_UNSPECIFIED", after='{"v":0}', event_id="no-op", timestamp_ms=now), []),
    ]
    samples_before = stack.gateway.metrics()

    stack.publish(s, "SET", '{"v":1}')
    for _, value, headers in bad:
        stack.publisher.raw(stack.topics.changes, APP.encode(), value, headers, flush=False)
    stack.publisher.flush()
    stack.publish(s, "SET", '{"v":2}', as_json=True)

    stack.expect_data(token, [P.value(APP, s, {"v": P.Num("1")}), P.value(APP, s, {"v": P.Num("2")})])

    records = read_topic(stack.broker.bootstrap, stack.topics.dlq, min_records=len(bad), timeout=30)
    got = [(r.key, r.value) for r in records]
    for what, value, _ in bad:
        assert (APP.encode(), value) in got, (
            f"{what}: not on the dead-letter topic {stack.topics.dlq} with its original key and value; "
            f"got {len(records)} record(s): {got!r}\n{stack.gateway.tails()}")
    assert len(records) == len(bad), f"unexpected extra dead letters: {got!r}"
    for r in records:
        reasons = [(k, v) for k, v in r.headers if "reason" in k.lower()]
        assert reasons and all(v for _, v in reasons), f"no non-empty *reason* header on {r}"
    json_ones = [r for r in records if r.value == bad[1][1]]
    assert ("content-type", b"application/json") in json_ones[0].headers, "original headers are kept"

    # Still consuming: a later valid event is delivered, and only the two valid ones were sent so far.
    assert len(stack.fake.sends_for(token)) == 2, stack.fake.describe(token)
    stack.publish(f"{s}/w", "SET", "3")
    stack.expect_data(token, [P.value(APP, s, {"v": P.Num("1")}), P.value(APP, s, {"v": P.Num("2")}),
                              P.value(APP, s, {"v": P.Num("2"), "w": P.Num("3")})])

    # Counted in metrics (a family whose name says dead letter / dlq).
    after = stack.gateway.metrics()
    counted = max(sum_matching(after, "dead") - sum_matching(samples_before, "dead"),
                  sum_matching(after, "dlq") - sum_matching(samples_before, "dlq"))
    assert counted >= len(bad), (
        f"dead letters not counted in /metrics (families containing 'dead' or 'dlq' grew by {counted})\n"
        + "\n".join(f"{x.name}{x.labels} {x.value}" for x in after if "dead" in x.name or "dlq" in x.name))
