"""Operator endpoints (SPEC §5, §9): /healthz, /readyz, /metrics (Prometheus text)."""

from __future__ import annotations

from gateway import counter_types, events_consumed, notifications_count, parse_prometheus
from harness import APP
from procutil import wait_for
import payloads as P


def test_healthz_and_readyz(stack):
    for path in ("/healthz", "/readyz"):
        r = stack.gateway.get(path)
        assert r.status_code == 200, f"GET {path}: {r.status_code} {r.text!r}"


def test_metrics_is_prometheus_text(stack):
    r = stack.gateway.get("/metrics")
    assert r.status_code == 200, f"{r.status_code} {r.text[:300]!r}"
    assert r.headers.get("content-type", "").startswith("text/plain"), r.headers.get("content-type")
    samples = parse_prometheus(r.text)  # every non-comment line is a valid sample
    types = counter_types(r.text)
    names = sorted(types)
    assert any("event" in n for n in names), f"no metric family about events: {names}"
    assert any(t == "counter" for t in types.values()), f"no counter at all: {types}"
    assert samples


def test_counters_increase_with_traffic(stack, uniq, token_factory):
    before = stack.gateway.metrics()
    token = token_factory()
    s = f"{uniq}/m"
    stack.gateway.must_subscribe(APP, s, token, "noData")
    for i in range(3):
        stack.publish(s, "SET", str(i))
    stack.expect_data(token, [P.no_data(APP, s)] * 3)

    def grown():
        after = stack.gateway.metrics()
        ev = events_consumed(after) - events_consumed(before)
        no = notifications_count(after) - notifications_count(before)
        # The gateway's own latency (fetched → provider request handed to the HTTP client, first attempts) and its
        # first part (fetched → queued), one observation per notification / per matched record.
        own = total(after, "pushgateway_gateway_latency_seconds_count", 'provider="fcm"') \
            - total(before, "pushgateway_gateway_latency_seconds_count", 'provider="fcm"')
        queued = total(after, "pushgateway_gateway_match_latency_seconds_count") \
            - total(before, "pushgateway_gateway_match_latency_seconds_count")
        return (ev >= 3 and no >= 3 and own >= 3 and queued >= 3) and (ev, no, own, queued)

    text = stack.gateway.metrics_text()
    names = sorted(counter_types(text))
    assert any("notification" in n for n in names), f"no metric family about notifications: {names}"
    wait_for(grown, timeout=15, what="event and notification counters to grow by >= 3",
             on_timeout=lambda: "\n".join(f"{x.name}{x.labels} {x.value}" for x in stack.gateway.metrics()
                                          if "event" in x.name or "notification" in x.name or "latency" in x.name))
    # Every observation is a duration: the latency histograms' sums never decrease.
    after = stack.gateway.metrics()
    for name in ("pushgateway_gateway_latency_seconds_sum", "pushgateway_gateway_match_latency_seconds_sum"):
        assert total(after, name) >= total(before, name), name


def total(samples, name: str, label: str = "") -> float:
    """The sum of `name`'s samples (those whose labels contain `label`)."""
    return sum(s.value for s in samples if s.name == name and label in (s.labels or ""))


def test_consumer_lag_is_exported_per_partition(stack):
    """SPEC §9: consumer lag, from librdkafka's statistics (every 5 s), one gauge per assigned partition."""
    def lag_samples():
        samples = [s for s in stack.gateway.metrics() if s.name == "pushgateway_consumer_lag_records"]
        return len(samples) >= 1 and samples

    samples = wait_for(lag_samples, timeout=20, what="pushgateway_consumer_lag_records samples",
                       on_timeout=stack.gateway.metrics_text)
    assert all(s.value >= 0 and 'partition="' in s.labels for s in samples), samples
