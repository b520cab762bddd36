"""The 4 KB data-payload rules (seed 000 "Size limitations", SPEC §7): 4063 bytes is sent, 4064 is too big."""

from __future__ import annotations

import json

from harness import APP, assert_data
import payloads as P


def filler_for(app: str, sp: str, target: int, unit: str = "x") -> str:
    """A string value v such that the OK value payload for {"a": v} at sp is exactly ``target`` bytes."""
    base = P.size(P.value_ok(app, sp, {"a": ""}))
    unit_bytes = len(unit.encode())
    room = target - base
    assert room % unit_bytes == 0, (target, base, unit)
    return unit * (room // unit_bytes)


def test_value_payload_of_4063_bytes_is_sent_with_data(stack, uniq, token_factory):
    s = f"{uniq}/sz"
    token = token_factory()
    filler = filler_for(APP, s, 4063)
    expected = P.value(APP, s, {"a": filler})
    assert P.size(expected) == 4063 and dict(expected)["s"] == "OK"
    stack.gateway.must_subscribe(APP, s, token, "value")
    stack.publish(s, "SET", '{"a":"' + filler + '"}')
    sends = stack.expect_data(token, [expected])
    assert len(P.raw_member(sends[0]["body"], "message", "data").encode()) == 4063


def test_value_payload_of_4064_bytes_is_too_big(stack, uniq, token_factory):
    s = f"{uniq}/sz"
    token = token_factory()
    filler = filler_for(APP, s, 4064)
    assert P.size(P.value_ok(APP, s, {"a": filler})) == 4064
    expected = P.value(APP, s, {"a": filler})
    assert expected == [("s", "TooBig"), ("t", "value"), ("app", APP), ("sp", s)]
    stack.gateway.must_subscribe(APP, s, token, "value")
    stack.publish(s, "SET", '{"a":"' + filler + '"}')
    stack.expect_data(token, [expected])


def test_size_is_measured_in_utf8_bytes_after_escaping(stack, uniq, token_factory):
    """Non-ASCII counts in UTF-8 bytes (é = 2) and escapes count twice: a '"' in the value is \\" in d's JSON
    text, and \\\\\\" once d is escaped inside the payload (4 bytes)."""
    s_ok, s_big = f"{uniq}/sa", f"{uniq}/sb"  # same length, so the same budget
    ok_token, big_token = token_factory("ok"), token_factory("big")
    base = P.size(P.value_ok(APP, s_ok, {"a": ""}))
    assert P.size(P.value_ok(APP, s_ok, {"a": '"'})) - base == 4
    n_quotes = 10
    room = 4063 - base - 4 * n_quotes
    ok_value = '"' * n_quotes + "é" * (room // 2) + "x" * (room % 2)
    big_value = ok_value + "x"
    ok_expected = P.value(APP, s_ok, {"a": ok_value})
    assert P.size(ok_expected) == 4063 and ok_expected[0] == ("s", "OK")
    assert P.size(P.value_ok(APP, s_big, {"a": big_value})) == 4064
    big_expected = P.value(APP, s_big, {"a": big_value})
    assert big_expected[0] == ("s", "TooBig")
    stack.gateway.must_subscribe(APP, s_ok, ok_token, "value")
    stack.gateway.must_subscribe(APP, s_big, big_token, "value")
    stack.publish(s_ok, "SET", P.json_text({"a": ok_value}))
    stack.publish(s_big, "SET", P.json_text({"a": big_value}), as_json=True)
    stack.expect_data(ok_token, [ok_expected])
    stack.expect_data(big_token, [big_expected])


def test_child_event_only_keys_then_too_big(stack, uniq, token_factory):
    """childEvent over the limit: OnlyKeys (added/changed map keys to true); if even that is too big: TooBig
    with empty added/removed/changed."""
    s = f"{uniq}/ce"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "childEvent")
    stack.publish(s, "SET", '{"small":1,"gone":2}', before="null")  # seeds the shadow
    stack.wait_sends(token, 1)

    big = "y" * 4100
    stack.publish(s, "MERGE", json.dumps({"big": big, "small": 2, "gone": None}))  # null child: removed
    only_keys = P.child_event(APP, s, {"big": big}, ["gone"], {"small": P.Num("2")})
    assert only_keys[0] == ("s", "OnlyKeys")
    assert only_keys[4:] == [("added", '{"big":true}'), ("removed", '["gone"]'), ("changed", '{"small":true}')]

    many = {f"k{i:04d}-" + "z" * 40: 1 for i in range(100)}  # 100 keys x ~55 bytes of keys alone
    stack.publish(s, "MERGE", P.json_text(many))
    too_big = P.child_event(APP, s, many, [], {})
    assert too_big == [("s", "TooBig"), ("t", "childEvent"), ("app", APP), ("sp", s), ("added", "{}"),
                       ("removed", "[]"), ("changed", "{}")]
    sends = stack.wait_sends(token, 3)
    assert_data(sends[1], only_keys, "OnlyKeys notification")
    assert_data(sends[2], too_big, "TooBig notification")
