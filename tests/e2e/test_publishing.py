"""The publishers' contract (docs/PUBLISHING.md) against a real broker and the real binary: the JSON form people
write is accepted (`after` as a JSON value, `op` in any case) with the same notification bytes as the strict
form; each natural mistake is dead-lettered with its own reason (header `x-dlq-reason`, and the same reason in
the gateway's warning line); a record without a key is delivered and the log names the missing key; and
`push-gateway validate-event` gives the same answers before publishing.
"""

from __future__ import annotations

import json
import subprocess
import time

from gateway import gateway_binary, gateway_env
from harness import APP
from kafka_util import encode_change_event, json_change_event, read_topic
from procutil import wait_for
import payloads as P

JSON = [("content-type", b"application/json")]
OPS = "SET, MERGE, REMOVE, SNAPSHOT or NAMESPACE_DELETED"


def doc(**fields) -> bytes:
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode()


# (what, key, value, headers, the reason's expected beginning)
MISTAKES = [
    ("after as a plain string", APP, doc(appId=APP, path="/m/a", op="set", after="hello"), JSON,
     'after: expected a JSON value or JSON text, got the string "hello", which is not JSON text'),
    ("an unknown op", APP, doc(appId=APP, path="/m/b", op="FROBNICATE", after=1), JSON,
     f'op: expected {OPS} (in any case), got "FROBNICATE"'),
    ("JSON without the content-type header", APP, doc(appId=APP, path="/m/c", op="SET", after={"m": "obj"}), [],
     "undecodable record (protobuf): the value is JSON but the record has no content-type header; "
     "a JSON event needs the record header content-type: application/json"),
    ("a misspelt field", APP, doc(app=APP, path="/m/d", op="SET", after=1), JSON,
     '"app": unknown field; expected appId, path, op, after, before, eventId, timestampMs'),
    ("a missing op", APP, doc(appId=APP, path="/m/e", after=1), JSON, f"op: missing; expected {OPS}"),
    ("a missing path", APP, doc(appId=APP, op="SET", after=1), JSON, "path: missing; expected the path of the write"),
    ("a key that is not the app id", b"other", doc(appId=APP, path="/m/f", op="SET", after=1), JSON,
     f'record key: expected the app id "{APP}" (the event\'s appId), got "other"'),
    ("a dot in a path key", APP, doc(appId=APP, path="/m/g.h", op="SET", after=1), JSON,
     'path: expected a "/"-separated path such as /chat/m1 ("/" is the root), got "/m/g.h"'),
    ("MERGE without an object", APP, doc(appId=APP, path="/m/i", op="merge", after=[1, 2]), JSON,
     "after: MERGE expects an object of the children to set, got an array"),
    ("a JSON array", APP, b'[{"appId":"toto"}]', JSON,
     "undecodable record (application/json): expected a JSON object (the JSON form of pushgateway.v1.ChangeEvent), got an array"),
    ("protobuf with bad JSON text in after", APP, encode_change_event(APP, "/m/j", "SET", after='{"v":'), [],
     'after: expected JSON text (such as {"m":"hi"}, 42 or "\\"hi\\""), got "{\\"v\\":"'),
    ("protobuf without an op", APP, encode_change_event(APP, "/m/k", 0, after="1"), [],
     f"op: missing (OP_UNSPECIFIED); expected {OPS}"),
    ("protobuf with an unknown op number", APP, encode_change_event(APP, "/m/l", 9, after="1"), [],
     "op: expected SET (1), MERGE (2), REMOVE (3), SNAPSHOT (4) or NAMESPACE_DELETED (5), got the number 9"),
    ("a timestamp that is not a number", APP, doc(appId=APP, path="/m/n", op="SET", timestampMs="yesterday"), JSON,
     'timestampMs: expected milliseconds since the epoch as an integer (such as 1700000000000), got the string "yesterday"'),
]


def key_bytes(key) -> bytes:
    return key if isinstance(key, bytes) else key.encode()


def test_each_natural_mistake_gets_its_own_reason(stack_factory, uniq, token_factory):
    stack = stack_factory()
    s = f"{uniq}/ok"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "value")
    for _, key, value, headers, _ in MISTAKES:
        stack.publisher.raw(stack.topics.changes, key_bytes(key), value, headers, flush=False)
    # What people naturally write and the gateway now accepts: a JSON value in `after`, `op` in lower case.
    stack.publisher.raw(stack.topics.changes, APP.encode(), doc(appId=APP, path=s, op="set", after={"m": "obj"}), JSON)

    stack.expect_data(token, [P.value(APP, s, {"m": "obj"})])
    records = read_topic(stack.broker.bootstrap, stack.topics.dlq, min_records=len(MISTAKES), timeout=30)
    reasons = {bytes(r.value): dict(r.headers).get("x-dlq-reason", b"").decode() for r in records}
    logged = set()
    for line in stack.gateway.logs().splitlines():  # JSON log lines (logging.format: json)
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("msg") == "record dead-lettered":
            logged.add(entry.get("reason"))
    for what, _, value, _, expected in MISTAKES:
        got = reasons.get(value)
        assert got is not None, f"{what}: not dead-lettered; reasons: {reasons}\n{stack.gateway.tails()}"
        assert got.startswith(expected), f"{what}:\n expected: {expected}…\n got:      {got}"
        assert got in logged, f"{what}: no warning line with the same reason\n{stack.gateway.tails()}"
    assert len(records) == len(MISTAKES), f"unexpected dead letters: {reasons}"


def test_after_as_a_json_value_gives_the_bytes_of_json_text(stack, uniq, token_factory):
    s = f"{uniq}/same"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "value")
    text = '{"n":1.50,"e":-1E+3,"u":"\u00e9/\\u00e8","l":[1,{"x":true},"s"],"z":null,"t":"\\"q\\""}'
    stack.publish(s, "SET", text, as_json=True)  # strict protobuf JSON mapping: after is a string of JSON text
    stack.publisher.raw(stack.topics.changes, APP.encode(),
                        ('{"appId":"%s","path":"%s","op":"Set","after":%s}' % (APP, s, text)).encode(), JSON)
    stack.publish(s, "SET", text)  # protobuf
    expected = P.value(APP, s, P.parse(text))
    sends = stack.expect_data(token, [expected, expected, expected])
    bodies = [P.raw_member(x["body"], "message", "data") for x in sends]
    assert bodies[0] == bodies[1] == bodies[2], bodies


def test_a_record_without_a_key_is_delivered_and_the_log_names_the_missing_key(stack_factory, uniq, token_factory):
    stack = stack_factory()
    s = f"{uniq}/nokey"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "noData")
    stack.publisher.raw(stack.topics.changes, None, encode_change_event(APP, s, "SET", after="1"))
    stack.expect_data(token, [P.no_data(APP, s)])
    logs = wait_for(lambda: "record without a key" in stack.gateway.logs() and stack.gateway.logs(), timeout=10,
                    what="the missing-key log line", on_timeout=stack.gateway.tails)
    line = next(x for x in logs.splitlines() if "record without a key" in x)
    assert "record key to the app id" in line and "partitioner" not in line, line


def validate(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([gateway_binary(), "validate-event", *args], input=stdin, capture_output=True,
                          timeout=30, env=gateway_env())


def test_validate_event_accepts_a_good_event_and_says_what_the_gateway_does():
    now = int(time.time() * 1000)
    good = doc(appId="demo", path="/chat", op="set", after={"m1": "hi"}, eventId="e-1", timestampMs=now)
    res = validate(good.decode())
    out = res.stdout.decode()
    assert res.returncode == 0, out + res.stderr.decode()
    assert out.startswith("accepted: SET at /chat of app demo"), out
    assert 'replaces the node /chat with {"m1":"hi"}' in out, out
    assert "record key: demo" in out and "content-type: application/json" in out, out
    assert "notes:" not in out, out
    # Protobuf from standard input, with the header it will really have (none) and no key: a note about it.
    res = validate("--content-type", "none", "--key", "", stdin=encode_change_event("demo", "/a", "MERGE",
                                                                                     after='{"x":null,"y":2}'))
    out = res.stdout.decode()
    assert res.returncode == 0, out + res.stderr.decode()
    assert "sets the children y and removes the children x of /a" in out, out
    assert "no content-type header (protobuf)" in out, out
    assert "the record has no key" in out and "eventId is empty" in out and "timestampMs is missing" in out, out


def test_validate_event_gives_the_dead_letter_reason_of_each_mistake(tmp_path):
    for what, key, value, headers, expected in MISTAKES:
        path = tmp_path / "event.bin"
        path.write_bytes(value)
        content_type = "application/json" if headers else "none"
        res = validate("--file", str(path), "--content-type", content_type, "--key", key_bytes(key).decode())
        out = res.stdout.decode()
        assert res.returncode == 1, f"{what}: exit {res.returncode}\n{out}{res.stderr.decode()}"
        assert out.startswith("dead-lettered: " + expected), f"{what}:\n expected: {expected}…\n got: {out}"
    # Without --content-type, JSON is recognised, so the missing header is not what it reports.
    res = validate(doc(appId="demo", path="/c", op="SET", after="oops").decode())
    assert res.returncode == 1 and res.stdout.decode().startswith(
        'dead-lettered: after: expected a JSON value or JSON text, got the string "oops"'), res.stdout.decode()
    usage = validate("--content-type")
    assert usage.returncode == 64, usage.stderr.decode()
