"""Subscription expiry (seed 000: "If a subscription expires, an FCM message for revocation will be sent to
subscribed devices with status "expired"")."""

from __future__ import annotations

import json

import pytest

from gateway import events_consumed
from kafka_util import read_topic
from procutil import wait_for
import payloads as P

SHORT = "short"


@pytest.mark.timeout(180)
def test_expired_subscriptions_are_revoked_and_deleted(stack_factory, fake_fcm, uniq, token_factory):
    stack = stack_factory(start=False, extra_apps={
        SHORT: {"enabled": True, "fcmServiceAccountFile": fake_fcm.service_account_file(SHORT),
                "subscriptionTTLSeconds": 2},
    })
    stack.config["subscriptions"] = {"expirySweepSeconds": 1}
    stack.start()
    s = f"{uniq}/exp"
    token = token_factory()
    stack.gateway.must_subscribe(SHORT, s, token, "value")
    # About 2 s later the sweep revokes it: exactly the seed's revoke message.
    stack.expect_data(token, [P.revoke(SHORT, s, "expired")], timeout=30)

    # Deleted from the state topic (a tombstone after the subscription record), so it stays gone.
    key = json.dumps([SHORT, s, "mobile", token, ""], separators=(",", ":")).encode()

    def tombstoned():
        records = [r for r in read_topic(stack.broker.bootstrap, stack.topics.state, min_records=0, timeout=5, settle=0.5)
                   if r.key == key]
        return len(records) >= 2 and records[-1].value is None

    wait_for(tombstoned, timeout=20, what="the expired subscription's tombstone in the state topic")
    # Nothing more is sent to it: once the gateway has consumed a write at its path, still one send only.
    consumed_before = events_consumed(stack.gateway.metrics())
    stack.publish(s, "SET", "1", app=SHORT)
    wait_for(lambda: events_consumed(stack.gateway.metrics()) > consumed_before, timeout=20,
             what="the gateway to consume the write")
    assert len(stack.fake.sends_for(token)) == 1
