"""Revocation (seed 000 "Subscription revocation", SPEC §6, §8): NAMESPACE_DELETED revokes every subscription
of the app with reason namespace_does_not_exist. A dedicated gateway, since it wipes the whole app."""

from __future__ import annotations

from harness import APP
from kafka_util import read_topic
import payloads as P


def test_namespace_deleted_revokes_every_subscription_of_the_app(stack_factory, uniq, token_factory):
    stack = stack_factory()
    subs = [(f"{uniq}/a", token_factory("nd"), "noData"),
            (f"{uniq}/b/c", token_factory("v"), "value"),
            ("/", token_factory("root"), "childEvent")]
    for path, token, mode in subs:
        stack.gateway.must_subscribe(APP, path, token, mode)

    stack.publish("/", "NAMESPACE_DELETED")
    for path, token, _ in subs:
        stack.expect_data(token, [P.revoke(APP, path, "namespace_does_not_exist")])

    # The subscriptions are gone: later writes notify nobody. Barrier: a malformed record on the same key is
    # dead-lettered after the writes were processed (same partition, log order).
    stack.publish(f"{uniq}/a", "SET", "1")
    stack.publish(f"{uniq}/b/c", "SET", "2")
    stack.publisher.raw(stack.topics.changes, APP.encode(), b"\xff\xfe not a change event")
    barrier = read_topic(stack.broker.bootstrap, stack.topics.dlq, min_records=1, timeout=30, settle=0.5)
    assert barrier, "the barrier record never reached the dead-letter topic\n" + stack.gateway.tails()
    for path, token, _ in subs:
        assert len(stack.fake.sends_for(token)) == 1, stack.fake.describe(token)
