"""Checks of the harness itself (no gateway needed): the protobuf encoder against protoc, the expected-payload
builder against the seed's byte-exact example, and a produce/read round trip through the real broker."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from kafka_util import OPS, encode_change_event, encode_varint, json_change_event, read_topic
from payloads import (Num, Tree, child_event, children_diff, escape_string, fcm_body, json_text, parse,
                      raw_member, serialise_data, size, value, value_ok)

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROTO_DIR = os.path.join(REPO_ROOT, "proto")
PROTO_FILE = "pushgateway/v1/change_event.proto"


def protoc(args: list[str], data: bytes) -> str:
    res = subprocess.run(["protoc", *args], input=data, capture_output=True, timeout=30)
    assert res.returncode == 0, f"protoc {args} failed: {res.stderr.decode()}"
    return res.stdout.decode("utf-8")


@pytest.mark.parametrize("n,encoded", [
    (0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
    (2**63 - 1, b"\xff\xff\xff\xff\xff\xff\xff\xff\x7f"),
    (-1, b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
])
def test_varint(n, encoded):
    assert encode_varint(n) == encoded


def test_encoder_matches_protoc_decode_raw():
    after = '{"a":"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj","é":"ü"}'
    data = encode_change_event("toto", "/some/webcom/path", "SET", after=after, before="null",
                               event_id="ev-1", timestamp_ms=1_700_000_000_123)
    out = protoc(["--decode_raw"], data)
    lines = out.strip().splitlines()
    assert lines[0] == '1: "toto"'
    assert lines[1] == '2: "/some/webcom/path"'
    assert lines[2] == "3: 1"
    assert lines[3].startswith("4: ")
    assert lines[4] == '5: "null"'
    assert lines[5] == '6: "ev-1"'
    assert lines[6] == "7: 1700000000123"
    assert len(lines) == 7


def test_encoder_matches_the_proto_schema():
    """Decoding with the project's .proto proves field numbers and types agree with the schema."""
    after = '{"x":{"y":[1,2.50]},"q":"a\\"b"}'
    data = encode_change_event("app-1", "/a/b", "MERGE", after=after, event_id="e", timestamp_ms=5)
    out = protoc([f"--proto_path={PROTO_DIR}", "--decode=pushgateway.v1.ChangeEvent", PROTO_FILE], data)
    assert 'app_id: "app-1"' in out
    assert 'path: "/a/b"' in out
    assert "op: MERGE" in out
    assert 'event_id: "e"' in out
    assert "timestamp_ms: 5" in out
    assert "before" not in out
    # Round trip through protoc's encoder gives identical bytes.
    text = out
    reencoded = subprocess.run(
        ["protoc", f"--proto_path={PROTO_DIR}", "--encode=pushgateway.v1.ChangeEvent", PROTO_FILE],
        input=text.encode(), capture_output=True, timeout=30)
    assert reencoded.returncode == 0, reencoded.stderr.decode()
    assert reencoded.stdout == data


@pytest.mark.parametrize("op", sorted(OPS))
def test_every_op_round_trips_through_protoc(op):
    data = encode_change_event("toto", "/", op, event_id="x", timestamp_ms=1)
    text = protoc([f"--proto_path={PROTO_DIR}", "--decode=pushgateway.v1.ChangeEvent", PROTO_FILE], data)
    if OPS[op]:
        assert f"op: {op}" in text
    reencoded = subprocess.run(
        ["protoc", f"--proto_path={PROTO_DIR}", "--encode=pushgateway.v1.ChangeEvent", PROTO_FILE],
        input=text.encode(), capture_output=True, timeout=30)
    assert reencoded.stdout == data


def test_empty_optional_after_is_present_on_the_wire():
    data = encode_change_event("toto", "/a", "SET", after="", event_id="x")
    assert b"\x22\x00" in data  # field 4, length 0


def test_json_mapping_shape():
    doc = json.loads(json_change_event("toto", "/a", "SET", after='{"a":1}', event_id="e1",
                                       timestamp_ms=1_700_000_000_000))
    assert doc == {"appId": "toto", "path": "/a", "op": "SET", "after": '{"a":1}', "eventId": "e1",
                   "timestampMs": "1700000000000"}


# --- expected payload builder --------------------------------------------------------------------------

SEED_EXAMPLE = ('{"s":"OK","t":"value","app":"toto","sp":"/some/webcom/path",'
                '"d":"{\\"a\\":\\"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj\\"}"}')


def test_seed_example_is_114_bytes():
    pairs = value("toto", "/some/webcom/path", parse('{"a":"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj"}'))
    assert serialise_data(pairs).decode() == SEED_EXAMPLE
    assert size(pairs) == 114 == len(SEED_EXAMPLE.encode())


def test_json_text_rules():
    v = parse('{"b":1.50,"a":{"z":null,"y":{}},"B":"/é\\n\\"\\\\","😀":1,"\uff21":2,"n":-0,"e":1E+3}')
    # sorted by UTF-8 bytes: "B" < "a"(dropped: empty after null/empty removal) < "b" < "e" < "n" < U+FF21 < U+1F600
    assert json_text(v) == '{"B":"/é\\n\\"\\\\","b":1.50,"e":1E+3,"n":-0,"\uff21":2,"😀":1}'
    assert json_text(None) == "null"
    assert json_text(parse('{"a":null}')) == "null"
    assert escape_string("\x01\t") == '"\\u0001\\t"'


def test_tree_model():
    t = Tree()
    t.set("/p/s", '{"a":1,"b":{"c":2}}')
    t.set("/p/s/b/c", "3")
    t.merge("/p/s", '{"a":null,"d":"x"}')
    assert json_text(t.get("/p/s")) == '{"b":{"c":3},"d":"x"}'
    t.remove("/p/s/b")
    assert json_text(t.get("/p/s")) == '{"d":"x"}'
    t.remove("/p/s/d")
    assert t.get("/p/s") is None and t.get("/p") is None


def test_child_event_builder_and_size_rules():
    old = parse('{"a":1,"b":{"x":1},"c":"z"}')
    new = parse('{"a":2,"b":{"x":1},"d":"n"}')
    added, removed, changed = children_diff(old, new)
    assert added == {"d": "n"} and removed == ["c"] and changed == {"a": Num("2")}
    pairs = child_event("toto", "/s", added, removed, changed)
    assert serialise_data(pairs).decode() == (
        '{"s":"OK","t":"childEvent","app":"toto","sp":"/s","added":"{\\"d\\":\\"n\\"}",'
        '"removed":"[\\"c\\"]","changed":"{\\"a\\":2}"}')
    big = child_event("toto", "/s", {"k": "x" * 5000}, [], {})
    assert big[0] == ("s", "OnlyKeys") and big[4] == ("added", '{"k":true}')
    huge = child_event("toto", "/s", {f"k{i:05d}" + "y" * 40: "x" for i in range(200)}, [], {})
    assert huge[0] == ("s", "TooBig")


def test_value_size_boundary_builder():
    def pairs_for(n):
        return value_ok("toto", "/sz", {"a": "x" * n})

    n = 4063 - size(pairs_for(0))
    assert size(pairs_for(n)) == 4063 and value("toto", "/sz", {"a": "x" * n})[0] == ("s", "OK")
    assert value("toto", "/sz", {"a": "x" * (n + 1)})[0] == ("s", "TooBig")


def test_fcm_body_and_raw_member():
    body = fcm_body("tok", value("toto", "/a", parse('{"a":1}'))).decode()
    assert body == ('{"message":{"token":"tok","data":{"s":"OK","t":"value","app":"toto","sp":"/a",'
                    '"d":"{\\"a\\":1}"},"android":{"priority":"high"},"apns":{"headers":'
                    '{"apns-push-type":"background","apns-priority":"5"},"payload":{"aps":{"content-available":1}}}}}')
    assert raw_member(body, "message", "data") == '{"s":"OK","t":"value","app":"toto","sp":"/a","d":"{\\"a\\":1}"}'
    assert raw_member(body, "message", "apns", "headers", "apns-priority") == '"5"'
    assert raw_member(body, "message", "nope") is None


# --- broker round trip ---------------------------------------------------------------------------------

def test_broker_round_trip(broker, publisher):
    from kafka_util import Topics

    topics = Topics.unique(broker)
    publisher.event(topics.changes, "toto", "/a", "SET", after='{"a":1}', event_id="e1")
    publisher.event(topics.changes, "toto", "/a", "SET", after='{"a":2}', event_id="e2", as_json=True)
    records = read_topic(broker.bootstrap, topics.changes, min_records=2, timeout=20, settle=0.2)
    assert len(records) == 2
    assert {r.partition for r in records} == {records[0].partition}, "one app key → one partition"
    assert all(r.key == b"toto" for r in records)
    assert records[1].headers == [("content-type", b"application/json")]
    assert json.loads(records[1].value)["eventId"] == "e2"
    assert records[0].value == encode_change_event("toto", "/a", "SET", after='{"a":1}', event_id="e1",
                                                   timestamp_ms=_decode_ts(records[0].value))


def _decode_ts(data: bytes) -> int:
    """Reads field 7 with protoc to recover the timestamp the publisher set."""
    text = subprocess.run(["protoc", "--decode_raw"], input=data, capture_output=True, timeout=30).stdout.decode()
    for line in text.splitlines():
        if line.startswith("7: "):
            return int(line[3:])
    return 0
