"""The limits of webhook deliveries (issue 20, item 1), end to end: the real gateway and Tansu, loopback HTTPS
receivers (tests/fakes/fake_webhook.py) that can delay or hang their answers and count the requests they answer
at once.

- One hanging receiver, with more subscriptions than the gateway has sending places, does not delay another
  destination host (the waiting notifications take no sending place: docs/DELIVERY.md, "Webhooks").
- A request answered after `webhook.timeoutMs` is retried with the same `webhook-id` and finally accepted.
- A destination nobody listens on (a connection error) is retried until a receiver listens there.
- A body over `webhook.maxBodyBytes` arrives cut down (docs/PAYLOADS.md, "Webhooks").
- A receiver never sees more than `webhook.maxInFlightPerHost` requests at once."""

from __future__ import annotations

import json
import os
import socket
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from procutil import wait_for
from test_webhook import WHSEC, expected_body, metric, served, settings, subscribe

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "fakes")))
from fake_fcm import make_self_signed_cert  # noqa: E402
from fake_webhook import FakeWebhookReceiver  # noqa: E402

# More than the delivery service's sending places (2000, DeliveryService.maxInFlight): before the fix, the
# notifications waiting for the hanging host held every place.
SLOW_SUBSCRIPTIONS = 2100


@pytest.fixture
def receivers(tmp_path):
    """Makes receivers sharing one self-signed certificate (`.cert`, valid for 127.0.0.1 and localhost)."""
    cert, key = make_self_signed_cert(str(tmp_path / "tls"))
    made: list[FakeWebhookReceiver] = []

    def make(port: int = 0) -> FakeWebhookReceiver:
        r = FakeWebhookReceiver(cert, key, [WHSEC], port=port)
        made.append(r)
        return r

    make.cert = cert
    yield make
    for r in made:
        r.close()


def webhook_app(stack_factory, uniq: str, prefix: str, cert: str, **webhook):
    """A gateway serving a new app whose webhooks may reach loopback receivers trusting `cert`; (stack, app)."""
    stack = stack_factory()
    app = prefix + uniq[4:]
    stack.write_app_settings(app, settings(stack, app, secrets=[WHSEC], allowPrivateDestinations=True, caFile=cert,
                                           **webhook))
    served(stack, app)
    return stack, app


def subscribe_hook(stack, app: str, path: str, destination: str, uid: str = "alice") -> str:
    """A value-mode webhook subscription (context "c"); its id."""
    r = subscribe(stack, app, {"kind": "webhook", "mode": "value", "path": path, "context": "c",
                               "destination": destination}, uid=uid)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def one_hook_published(stack_factory, uniq: str, prefix: str, cert: str, destination: str, value: str, **webhook):
    """`webhook_app`, one subscription to `destination` at `<uniq>/doc`, and one SET of `value` published there;
    (stack, app, path, subscription id)."""
    stack, app = webhook_app(stack_factory, uniq, prefix, cert, **webhook)
    path = f"{uniq}/doc"
    sid = subscribe_hook(stack, app, path, destination)
    stack.publish(path, "SET", value, app=app)
    return stack, app, path, sid


def received_values(receiver: FakeWebhookReceiver, path: str) -> list:
    return [json.loads(x["body"]).get("v") for x in receiver.received(path)]


@pytest.mark.timeout(300)
def test_a_hanging_receiver_does_not_delay_another_host(stack_factory, uniq, receivers):
    stack, app = webhook_app(stack_factory, uniq, "whfair", receivers.cert, timeoutMs=120000, maxInFlightPerHost=4)
    slow, fast = receivers(), receivers()
    slow.hang("/slow/")
    slow_path, fast_path = f"{uniq}/slow", f"{uniq}/fast"

    def subscribe_slow(index: int) -> str:
        # Spread over uids (at most 1000 subscriptions per user) and destinations (at most 200 subscriptions
        # each); one host: `localhost`.
        return subscribe_hook(stack, app, slow_path, slow.url(f"/slow/{index}", host="localhost"), uid=f"slow{index % 5}")

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert len(set(pool.map(subscribe_slow, range(SLOW_SUBSCRIPTIONS)))) == SLOW_SUBSCRIPTIONS
    subscribe_hook(stack, app, fast_path, fast.url("/fast"))

    # Every slow subscription gets a notification; the receiver takes 4 requests and answers none of them.
    stack.publish(slow_path, "SET", "1", app=app)
    wait_for(lambda: slow.concurrent == 4, timeout=30, what="4 hanging requests at the slow receiver",
             on_timeout=stack.gateway.tails)
    # The other host gets each of its notifications promptly, in order, while the slow requests still hang.
    for value in range(1, 6):
        stack.publish(fast_path, "SET", str(value), app=app)
    values = wait_for(lambda: (lambda got: got if len(got) >= 5 else None)(received_values(fast, "/fast")),
                      timeout=10, what="5 notifications at the other host", on_timeout=stack.gateway.tails)
    assert values == [1, 2, 3, 4, 5]
    assert slow.concurrent == 4 and slow.max_concurrent == 4
    assert len(slow.received_prefix("/slow/")) == 4, "nothing else reached the slow host, nothing was retried"
    # The notifications waiting for the slow host are not in flight (only its 4 requests are).
    wait_for(lambda: metric(stack, "pushgateway_retries_in_flight") == 4, timeout=10,
             what="4 notifications in flight", on_timeout=lambda: str(metric(stack, "pushgateway_retries_in_flight")))


@pytest.mark.timeout(120)
def test_a_request_answered_after_the_timeout_is_retried_with_the_same_id(stack_factory, uniq, receivers):
    receiver = receivers()
    receiver.script("/t", [(200, None, 2.0)])  # answers after 2 s: the gateway gave up after 0.5 s
    stack, app, path, sid = one_hook_published(stack_factory, uniq, "whtime", receivers.cert, receiver.url("/t"), "1",
                                               timeoutMs=500)
    wait_for(lambda: metric(stack, "pushgateway_notifications_sent_total", provider="webhook") >= 1, timeout=30,
             what="the retried notification to be accepted", on_timeout=stack.gateway.tails)
    attempts = receiver.received("/t")
    assert len(attempts) >= 2
    assert len({a["headers"]["webhook-id"] for a in attempts}) == 1, "one message, one webhook-id"
    assert {a["body"] for a in attempts} == {expected_body(app, path, sid, "c", m="value", v=1, s="OK")}
    assert attempts[1]["at"] - attempts[0]["at"] >= 0.5
    assert metric(stack, "pushgateway_notifications_failed_total", provider="webhook", reason="timeout") >= 1


@pytest.mark.timeout(120)
def test_a_connection_error_is_retried_until_a_receiver_listens(stack_factory, uniq, receivers):
    with socket.socket() as s:  # a free port, nobody listening on it (yet)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    stack, app, path, sid = one_hook_published(stack_factory, uniq, "whconn", receivers.cert,
                                               f"https://127.0.0.1:{port}/late", "7", timeoutMs=2000)
    wait_for(lambda: metric(stack, "pushgateway_notifications_failed_total", provider="webhook", reason="transport") >= 1,
             timeout=30, what="a refused connection", on_timeout=stack.gateway.tails)
    receiver = receivers(port=port)
    [got] = wait_for(lambda: receiver.received("/late") or None, timeout=30, what="the retry at the new receiver",
                     on_timeout=stack.gateway.tails)
    assert got["status"] == 200 and got["verified"] == [True]
    assert got["body"] == expected_body(app, path, sid, "c", m="value", v=7, s="OK")


@pytest.mark.timeout(120)
def test_a_body_over_max_body_bytes_arrives_cut_down(stack_factory, uniq, receivers):
    stack, app = webhook_app(stack_factory, uniq, "whsize", receivers.cert, maxBodyBytes=1024)
    receiver = receivers()
    path = f"{uniq}/doc"
    sid = subscribe_hook(stack, app, path, receiver.url("/big"))
    small, big = "s" * 500, "b" * 1200
    stack.publish(path, "SET", json.dumps(small), app=app)
    stack.publish(path, "SET", json.dumps(big), app=app)
    got = wait_for(lambda: (lambda x: x if len(x) >= 2 else None)(receiver.received("/big")), timeout=30,
                   what="two deliveries", on_timeout=stack.gateway.tails)
    assert got[0]["body"] == expected_body(app, path, sid, "c", m="value", v=small, s="OK")
    # Over 1024 bytes with the value: `TooBig` without `v`; the receiver reads the data itself.
    assert got[1]["body"] == expected_body(app, path, sid, "c", m="value", s="TooBig")
    assert all(len(x["body"]) <= 1024 for x in got) and got[1]["verified"] == [True]


@pytest.mark.timeout(120)
def test_a_receiver_never_sees_more_than_max_in_flight_per_host(stack_factory, uniq, receivers):
    stack, app = webhook_app(stack_factory, uniq, "whconc", receivers.cert, maxInFlightPerHost=2)
    receiver = receivers()
    path = f"{uniq}/doc"
    for index in range(12):
        subscribe_hook(stack, app, path, receiver.url(f"/n/{index}"))
        receiver.script(f"/n/{index}", [(200, None, 0.3)])  # each answer takes 0.3 s
    stack.publish(path, "SET", "1", app=app)
    wait_for(lambda: len(receiver.received_prefix("/n/")) >= 12, timeout=30, what="12 deliveries",
             on_timeout=stack.gateway.tails)
    assert receiver.max_concurrent == 2, receiver.max_concurrent
