"""Several replicas in one consumer group (SPEC §3 durability, issues 3 and 14).

Each replica holds the state of the partitions it owns and forwards every other call to the owner, so a
subscription made through any replica is served at once through every replica, and by whichever replica owns
the app's partition after a rebalance. (The larger cases are in test_partitions.py.)
"""

from __future__ import annotations

import copy
import time

import jwt
import requests

import pytest

from gateway import Gateway, events_consumed
from harness import APP
from procutil import free_port, wait_for
import payloads as P


V2_SECRET = "replicas-test-secret-long-enough-for-hs256"


def consumed(gateway: Gateway) -> float:
    return events_consumed(gateway.metrics())


def subscriptions(gateway: Gateway) -> float:
    return sum(sample.value for sample in gateway.metrics() if sample.name == "pushgateway_subscriptions")


@pytest.mark.timeout(300)
def test_two_replicas_share_subscriptions_and_take_over(stack_factory, uniq, token_factory):
    stack = stack_factory()
    a = stack.gateway
    config_b = copy.deepcopy(stack.config)
    config_b["http"]["port"] = free_port()
    b = Gateway(stack.workdir, config=config_b, name="replica-b")
    try:
        b.start()
        s = f"{uniq}/rep"
        t1, t2, t3 = token_factory("one"), token_factory("two"), token_factory("three")
        # Writes through either replica; t3 is subscribed through one and unsubscribed through the other.
        b.must_subscribe(APP, s, t1, "noData")
        a.must_subscribe(APP, s, t2, "noData")
        a.must_subscribe(APP, s, t3, "noData")
        r = b.unsubscribe(APP, s, t3)
        assert r.status_code == 204, r.text
        # Every call went to the owner of the app's partition, which alone holds the 2 subscriptions.
        held = sorted([subscriptions(a), subscriptions(b)])
        assert held == [0, 2], held

        # The v2 API answers the same on both replicas (the owner answers, the other forwards), at once.
        v2_app = "v2rep" + uniq[4:]
        stack.write_app_settings(v2_app, {"enabled": True, "authKeys": [{"alg": "HS256", "secret": V2_SECRET}]})
        token = jwt.encode({"uid": "alice", "exp": int(time.time()) + 600}, V2_SECRET, algorithm="HS256")
        headers = {"Authorization": f"Bearer {token}"}

        def v2(gateway: Gateway, method: str, suffix: str = "", **kw) -> requests.Response:
            return requests.request(method, f"{gateway.base}/datasync/v2/{v2_app}/subscriptions/alice{suffix}",
                                    headers=headers, timeout=10, **kw)
        wait_for(lambda: v2(a, "GET").status_code == 200 and v2(b, "GET").status_code == 200, timeout=20,
                 what="both replicas to serve the v2 app")
        created = v2(a, "POST", json={"kind": "huawei", "mode": "value", "path": s, "context": t1})
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        assert v2(b, "GET", f"/{sid}").json() == v2(a, "GET", f"/{sid}").json() == created.json()
        assert v2(b, "GET").json() == v2(a, "GET").json()
        conflict = v2(b, "POST", json={"kind": "huawei", "mode": "value", "path": s, "context": t1})
        assert conflict.status_code == 409, conflict.text
        assert v2(b, "DELETE", f"/{sid}").status_code == 204
        assert v2(a, "GET", f"/{sid}").status_code == 404

        # Token replacement through either replica (the non-owner forwards it, body and all): the first call
        # moves the subscription, the same call through the other replica finds nothing left to move.
        rotated_from, rotated_to = token_factory("rotated-from"), token_factory("rotated-to")
        made = v2(a, "POST", json={"kind": "mobile", "mode": "value", "path": s, "context": rotated_from})
        assert made.status_code == 201, made.text
        answers = []
        for gateway in (b, a):
            answer = v2(gateway, "POST", "/.replace-context",
                        json={"kind": "mobile", "oldContext": rotated_from, "newContext": rotated_to})
            assert answer.status_code == 200, answer.text
            answers.append(answer.json())
        assert [m["from"] for m in answers[0]["moved"]] == [made.json()["id"]] and answers[1]["moved"] == []
        assert answers[0]["subscriptions"] == answers[1]["subscriptions"]
        assert [d["context"] for d in answers[0]["subscriptions"]] == [rotated_to]
        assert v2(b, "GET").json()["subscriptions"] == v2(a, "GET").json()["subscriptions"] == answers[0]["subscriptions"]
        assert v2(a, "DELETE", "/" + answers[0]["moved"][0]["id"]).status_code == 204

        # The group splits the 4 partitions; the app's partition belongs to exactly one replica. Events go
        # to t1 and t2 whichever it is, and never to t3.
        stack.publish(s, "SET", "1")
        stack.expect_data(t1, [P.no_data(APP, s)])
        stack.expect_data(t2, [P.no_data(APP, s)])
        owner, survivor = (a, b) if consumed(a) >= 1 else (b, a)
        assert consumed(owner) >= 1 and consumed(survivor) == 0, (consumed(a), consumed(b))

        # The owner dies without a goodbye: the survivor takes the partition over (after the session
        # timeout) with every subscription, and resumes from the committed offset.
        killed = time.monotonic()
        owner.kill()
        stack.gateway = survivor  # the harness checks that its gateway is alive while waiting
        stack.publish(s, "SET", "2")
        stack.expect_data(t1, [P.no_data(APP, s)] * 2, timeout=60)
        stack.expect_data(t2, [P.no_data(APP, s)] * 2, timeout=60)
        print(f"takeover: the survivor delivered the first event {time.monotonic() - killed:.1f} s after kill -9 "
              f"(session.timeout.ms={stack.config['kafka']['properties'].get('session.timeout.ms')})")
        wait_for(lambda: consumed(survivor) >= 1, timeout=15, what="the survivor to count the event")
        assert stack.fake.sends_for(t3) == [], f"an unsubscribed device was notified: {[x['body'] for x in stack.fake.sends_for(t3)]}"
    finally:
        b.stop()
