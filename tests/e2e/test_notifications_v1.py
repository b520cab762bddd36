"""v1 notifications at the fake FCM (seed 000, SPEC §3, §4, §7): envelope, modes, matching, JSON rules.

Expected payloads are computed by ``payloads.py`` from the contract; the database state a subscription sees is
computed by ``payloads.Tree`` from the published events. Negative checks ("this write must not notify") are
made safe by a later write that does notify the same subscription: per-subscription order is kept, so once
the later notification has arrived the earlier one would have arrived too.
"""

from __future__ import annotations

import json

from harness import APP, assert_body, assert_data
from procutil import wait_for
import payloads as P


def test_envelope_and_seed_example_byte_exact(stack, token_factory):
    """The seed's own example: value subscription at /some/webcom/path of app toto → the 114-byte payload."""
    token = token_factory()
    stack.gateway.must_subscribe(APP, "/some/webcom/path", token, "value")
    stack.publish("/some/webcom/path", "SET", '{"a":"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj"}')
    (send,) = stack.wait_sends(token, 1)

    expected = P.value(APP, "/some/webcom/path", P.parse('{"a":"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj"}'))
    data = P.raw_member(send["body"], "message", "data")
    assert data == ('{"s":"OK","t":"value","app":"toto","sp":"/some/webcom/path",'
                    '"d":"{\\"a\\":\\"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj\\"}"}'), data
    assert len(data.encode()) == 114
    assert_body(send, token, expected)
    assert send["path"] == "/v1/projects/fake-project/messages:send"
    assert send["http_version"] == "2", f"FCM must be reached over HTTP/2, got {send['http_version']}"
    assert send["headers"].get("authorization", "").startswith("Bearer ya29.fake-")
    assert send["headers"].get("content-type", "").startswith("application/json")


def test_default_mode_is_no_data(stack, uniq, token_factory):
    token = token_factory()
    stack.gateway.must_subscribe(APP, f"{uniq}/a", token)  # no mode parameter
    stack.publish(f"{uniq}/a/b", "SET", '"x"')
    sends = stack.expect_data(token, [P.no_data(APP, f"{uniq}/a")])
    assert_body(sends[0], token, P.no_data(APP, f"{uniq}/a"))


def test_matching_at_below_above_and_not_siblings(stack, uniq, token_factory):
    s = f"{uniq}/a/b"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "noData")
    stack.publish(s, "SET", '{"v":1}')                          # at S: fires
    stack.publish(f"{s}/c/d", "SET", '"deep"')                  # below S: fires
    stack.publish(f"{uniq}/a/c", "SET", '"sibling"')            # sibling of S: must not fire
    stack.publish(f"{uniq}/a/bb", "SET", '"prefix, not child"')  # /a/bb is not below /a/b
    stack.publish(f"{uniq}/ab", "SET", '"prefix of parent"')    # /ab is not above /a/b
    stack.publish(uniq, "SET", '{"a":{"b":{"v":2}}}')           # above S, value at S changed: fires
    stack.publish(f"{s}/v", "REMOVE", as_json=True)              # below S (JSON mapping): fires
    expected = [P.no_data(APP, s)] * 4
    stack.expect_data(token, expected)
    assert len(stack.fake.sends_for(token)) == 4, stack.fake.describe(token)


def test_trailing_slash_subscription_has_normalised_sp(stack, uniq, token_factory):
    token = token_factory()
    stack.gateway.must_subscribe(APP, f"{uniq}/x/", token, "noData")
    stack.publish(f"{uniq}/x", "SET", "1")
    stack.expect_data(token, [P.no_data(APP, f"{uniq}/x")])


def test_root_subscription(stack, uniq, token_factory):
    token = token_factory()
    gw = stack.gateway
    r = gw.session.put(f"{gw.base}/base/{APP}/.wakeup/?id={token}&mode=noData", timeout=10)
    assert r.status_code == 204, f"{r.status_code} {r.text!r}"
    try:
        stack.publish(f"{uniq}/anything", "SET", "1")
        sends = stack.wait_sends(token, 1)
        assert_data(sends[0], P.no_data(APP, "/"))
    finally:
        gw.session.delete(f"{gw.base}/base/{APP}/.wakeup/?id={token}", timeout=10)


def test_value_mode_tracks_the_complete_value(stack, uniq, token_factory):
    """Writes at, below and above S (protobuf and JSON mapping mixed): d is always the complete value at S."""
    s = f"{uniq}/s"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "value")
    db = P.Tree()
    writes = [
        (s, "SET", '{"a":1,"b":{"c":2}}', False),              # at S: seeds the shadow
        (f"{s}/b/c", "SET", "3", True),                        # below S
        (s, "MERGE", '{"a":null,"d":"x"}', False),             # MERGE with a null child removes it
        (f"{s}/b", "MERGE", '{"e":true,"c":null}', True),      # MERGE below S
        (f"{s}/d", "REMOVE", None, False),                     # REMOVE below S
        (uniq, "SET", '{"s":{"k":"v"},"other":1}', True),   # above S, value at S changed
        (uniq, "MERGE", '{"s":{"z":{"y":"w"}}}', False),       # MERGE above S replaces child s
        (s, "REMOVE", None, True),                             # the node itself removed: d = null
        (f"{s}/n", "SET", '{"q":"again"}', False),             # below S, S re-created
    ]
    expected = []
    for path, op, after, as_json in writes:
        stack.publish(path, op, after, as_json=as_json)
        db.apply(path, op, after)
        expected.append(P.value(APP, s, db.get(s)))
    stack.expect_data(token, expected)
    assert expected[7] == [("s", "OK"), ("t", "value"), ("app", APP), ("sp", s), ("d", "null")]


def test_value_json_text_rules(stack, uniq, token_factory):
    """Key order by UTF-8 bytes, numbers verbatim, minimal escaping, null/empty children dropped."""
    s = f"{uniq}/json"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "value")
    after = ('{"b":1.50,"a":{"z":null,"y":{}},"B":"sl/ash é \\"q\\" \\\\ \\n tab\\t","\uff21":2,"😀":1,'
             '"n":-0,"e":1E+3,"big":123456789012345678901234567890,"t":true,"f":false,"o":{"k":{"x":null}}}')
    stack.publish(s, "SET", after)
    expected = P.value(APP, s, P.parse(after))
    assert dict(expected)["d"] == ('{"B":"sl/ash é \\"q\\" \\\\ \\n tab\\t","b":1.50,'
                                   '"big":123456789012345678901234567890,"e":1E+3,"f":false,"n":-0,"t":true,'
                                   '"\uff21":2,"😀":1}')
    stack.expect_data(token, [expected])


def test_value_above_write_without_change_at_s_does_not_fire(stack, uniq, token_factory):
    s = f"{uniq}/s"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "value")
    stack.publish(s, "SET", '{"k":1}')                               # fires, seeds
    stack.publish(uniq, "SET", '{"s":{"k":1},"other":1}')            # above, value at S unchanged
    stack.publish(uniq, "MERGE", '{"other":2}')                      # above (MERGE of a sibling)
    stack.publish(f"{uniq}/other", "SET", "3")                       # sibling
    stack.publish(f"{s}/k", "SET", "2")                              # fires
    stack.expect_data(token, [P.value(APP, s, {"k": P.Num("1")}), P.value(APP, s, {"k": P.Num("2")})])
    assert len(stack.fake.sends_for(token)) == 2, stack.fake.describe(token)


def test_value_below_write_before_seed_is_not_loaded(stack, uniq, token_factory):
    s = f"{uniq}/nl"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "value")
    stack.publish(f"{s}/x", "SET", "1")                          # nothing known at S yet
    stack.publish(s, "SET", '{"x":1,"y":2}')                     # seeds
    stack.publish(f"{s}/y", "SET", '"two"')                      # now the full value is known
    stack.expect_data(token, [
        P.not_loaded(APP, s),
        P.value(APP, s, P.parse('{"x":1,"y":2}')),
        P.value(APP, s, P.parse('{"x":1,"y":"two"}')),
    ])


def test_value_shadow_seeded_by_a_write_above_s(stack, uniq, token_factory):
    s = f"{uniq}/p/s"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "value")
    stack.publish(f"{uniq}/p", "SET", '{"s":{"a":"1"},"t":0}')   # above: fires and seeds
    stack.publish(f"{s}/b", "SET", '"2"')                         # below: full value known
    stack.expect_data(token, [P.value(APP, s, {"a": "1"}), P.value(APP, s, {"a": "1", "b": "2"})])


def test_value_snapshot_event_seeds_the_shadow(stack, uniq, token_factory):
    s = f"{uniq}/snap"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "value")
    stack.publish(s, "SNAPSHOT", '{"a":1}')
    stack.publish(f"{s}/b", "SET", "2")
    # Whether a SNAPSHOT itself notifies is not specified; the write after it must carry the full value.
    want = P.serialise_data(P.value(APP, s, P.parse('{"a":1,"b":2}'))).decode()
    wait_for(lambda: any(P.raw_member(x["body"], "message", "data") == want for x in stack.fake.sends_for(token)),
             timeout=30, what=f"a notification with data {want}",
             on_timeout=lambda: stack.fake.describe(token))
    assert len(stack.fake.sends_for(token)) <= 2, stack.fake.describe(token)


def test_child_event_mode(stack, uniq, token_factory):
    s = f"{uniq}/c"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "childEvent")
    db = P.Tree()
    first = '{"a":1,"b":{"x":1},"c":"z","zz":true,"k":"keep"}'
    stack.publish(s, "SET", first, before="null")
    db.set(s, first)
    (send1,) = stack.wait_sends(token, 1)
    data1 = json.loads(P.raw_member(send1["body"], "message", "data"))
    assert (data1.get("t"), data1.get("app"), data1.get("sp")) == ("childEvent", APP, s), data1

    steps = [
        (s, "MERGE", '{"a":2,"zz":null,"c":null,"d":"new","k":"keep"}', False),  # changed a, removed c+zz
        (f"{s}/b/x", "SET", "5", True),                                           # below: child b changed
        (f"{s}/d", "REMOVE", None, False),                                        # child removed
        (f"{s}/b/x/deeper", "SET", '"v"', True),                                  # below a grandchild
        (uniq, "MERGE", '{"c":{"k":"keep","e":{"f":1}}}', False),                 # above: replaces S
    ]
    expected = []
    for path, op, after, as_json in steps:
        old = P.parse(P.json_text(db.get(s)))  # a deep copy of the value at S before the write
        stack.publish(path, op, after, as_json=as_json)
        db.apply(path, op, after)
        added, removed, changed = P.children_diff(old, db.get(s))
        expected.append(P.child_event(APP, s, added, removed, changed))
    assert expected[0] == [("s", "OK"), ("t", "childEvent"), ("app", APP), ("sp", s),
                           ("added", '{"d":"new"}'), ("removed", '["c","zz"]'), ("changed", '{"a":2}')]
    assert expected[4][4:] == [("added", '{"e":{"f":1}}'), ("removed", '["a","b"]'), ("changed", "{}")]
    sends = stack.wait_sends(token, 1 + len(expected))
    for i, (send, pairs) in enumerate(zip(sends[1:], expected)):
        assert_data(send, pairs, f"childEvent notification #{i + 2}")


def test_several_devices_and_modes_on_one_path(stack, uniq, token_factory):
    s = f"{uniq}/multi"
    t_nodata, t_value, t_child = token_factory("n"), token_factory("v"), token_factory("c")
    stack.gateway.must_subscribe(APP, s, t_nodata, "noData")
    stack.gateway.must_subscribe(APP, s, t_value, "value")
    stack.gateway.must_subscribe(APP, s, t_child, "childEvent")
    stack.publish(s, "SET", '{"a":"1"}')
    stack.publish(f"{s}/b", "SET", '"2"')
    stack.expect_data(t_nodata, [P.no_data(APP, s)] * 2)
    stack.expect_data(t_value, [P.value(APP, s, {"a": "1"}), P.value(APP, s, {"a": "1", "b": "2"})])
    sends = stack.wait_sends(t_child, 2)
    assert_data(sends[1], P.child_event(APP, s, {"b": "2"}, [], {}))


def test_same_subscription_twice_notifies_once(stack, uniq, token_factory):
    s = f"{uniq}/twice"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "noData")
    stack.gateway.must_subscribe(APP, s, token, "noData")
    stack.publish(s, "SET", "1")
    stack.publish(f"{s}/x", "SET", "2")
    stack.expect_data(token, [P.no_data(APP, s)] * 2)
    # After the second write arrived, a duplicate of the first would have too.
    assert len(stack.fake.sends_for(token)) == 2, stack.fake.describe(token)


def test_unsubscribe_stops_notifications(stack, uniq, token_factory):
    s = f"{uniq}/u"
    gone, stays = token_factory("gone"), token_factory("stays")
    stack.gateway.must_subscribe(APP, s, gone, "noData")
    stack.gateway.must_subscribe(APP, s, stays, "noData")
    stack.publish(s, "SET", "1")
    stack.wait_sends(gone, 1)
    stack.wait_sends(stays, 1)
    r = stack.gateway.unsubscribe(APP, s, gone)
    assert r.status_code == 204, f"{r.status_code} {r.text!r}"
    stack.publish(s, "SET", "2")
    stack.publish(s, "SET", "3")
    stack.wait_sends(stays, 3)
    assert len(stack.fake.sends_for(gone)) == 1, stack.fake.describe(gone)


def test_non_ascii_path_and_value(stack, uniq, token_factory):
    s = f"{uniq}/café/ünïcode"
    token = token_factory()
    stack.gateway.must_subscribe(APP, s, token, "value")
    stack.publish(s, "SET", '{"名前":"値","é":"ü"}', as_json=True)
    expected = P.value(APP, s, P.parse('{"名前":"値","é":"ü"}'))
    sends = stack.expect_data(token, [expected])
    # Non-ASCII is sent verbatim, not \u-escaped.
    assert "café/ünïcode" in sends[0]["body"] and "名前" in sends[0]["body"]
