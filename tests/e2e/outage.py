"""One broker outage with change events streaming and the API in use, measured: shared by
test_broker_faults.py (30 s, in CI) and Benchmarks/broker-outage.py (30 s and 120 s, by hand).

The scenario, on a gateway and broker of its own:
1. ``devices`` devices subscribe in value mode to one node; change events stream to it at ``rate`` per second
   (event n sets it to ``{"n": n}``), a probe subscribes a new device every ``probe_interval`` and polls
   ``/readyz`` every 0.25 s;
2. once notifications flow, the broker is made unavailable for ``seconds``: ``freeze`` (SIGSTOP: the process
   is stopped, its connections stay open, nothing answers) or ``restart`` (SIGKILL, then the same broker
   started again on the same port: connections are refused meanwhile; use it with ``s3://`` storage, which
   keeps the data);
3. then the broker is back; the stream goes on for ``tail_seconds``, stops, and every acknowledged event is
   awaited on every device.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, field
from typing import Optional

from fault_util import (Answer, ApiProbe, Delivery, EventStream, FaultyTansu, Recorder, account, lines_between,
                        log_lines, replaced_producers, summarise, utcnow)
from harness import APP, Stack
from procutil import wait_for

READY_AGAIN_BOUND = 90.0
DELIVERY_BOUND = 120.0
SUBSCRIBE_AGAIN_BOUND = 60.0


@dataclass
class OutageReport:
    kind: str
    seconds: float
    events_published: int = 0
    events_acked: int = 0
    delivery: Delivery = field(default_factory=Delivery)
    # Seconds from the start of the outage to the first /readyz 503 (None: never 503).
    not_ready_after: Optional[float] = None
    # Seconds from the broker's return to the first /readyz 200 after it.
    ready_again_after: Optional[float] = None
    # Seconds from the broker's return to the first 2xx subscribe.
    subscribe_ok_after: Optional[float] = None
    # Seconds from the broker's return until every acknowledged event was notified on every device.
    delivered_after: Optional[float] = None
    during: list[Answer] = field(default_factory=list)  # subscribes started during the outage
    # The subscribes answered 504 (sent to the broker as it stopped: outcome unknown), made again after the return.
    unknown_again: list[Answer] = field(default_factory=list)
    after: list[Answer] = field(default_factory=list)  # subscribes started after the broker's return
    ready_during: list[Answer] = field(default_factory=list)
    log_during: list[dict] = field(default_factory=list)  # from the outage's start to ready again
    replaced_producer: float = 0.0
    # Events the broker acknowledged but no longer has after its restart (not the gateway's doing).
    lost_by_broker: list[int] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [
            f"outage: {self.kind} for {self.seconds:.0f} s",
            f"events: {self.events_published} published, {self.events_acked} acknowledged, "
            f"{len(self.lost_by_broker)} of them lost by the broker {self.lost_by_broker or ''}",
            f"notifications: {self.delivery.notifications}, missing {self.delivery.missing_count}, "
            f"duplicates {self.delivery.duplicates}",
            f"/readyz: 503 after {fmt(self.not_ready_after)} of outage; 200 again {fmt(self.ready_again_after)} "
            f"after the broker's return",
            f"/readyz during the outage: {summarise(self.ready_during)}",
            f"subscribes during the outage: {summarise(self.during)}",
            f"504 subscribes made again after the return: {summarise(self.unknown_again) or 'none'}",
            f"first subscribe answered 204 {fmt(self.subscribe_ok_after)} after the broker's return",
            f"subscribes after the return: {summarise(self.after)} "
            f"{sorted({a.body[:120] for a in self.after if a.status >= 300})}",
            f"every acknowledged event notified {fmt(self.delivered_after)} after the broker's return",
            f"log lines from the outage's start to ready again: {len(self.log_during)}",
            f"producer replacements: {self.replaced_producer:.0f}",
        ]


def hold(seconds: float) -> None:
    """A duration that is part of the scenario (the outage's length, the stream's tail): not a wait for a
    condition. The recording threads run meanwhile."""
    time.sleep(seconds)


def fmt(seconds: Optional[float]) -> str:
    return "never" if seconds is None else f"{seconds:.1f} s"


def run_outage(stack: Stack, broker: FaultyTansu, uniq: str, seconds: float, kind: str, *, devices: int = 5,
               rate: float = 5.0, probe_interval: float = 1.0, tail_seconds: float = 5.0) -> OutageReport:
    assert kind in ("freeze", "restart"), kind
    gateway = stack.gateway
    node = f"{uniq}/stream"
    tokens = [f"out{i}-{uniq.strip('/')}:APA91b{i:04d}" for i in range(devices)]
    for token in tokens:
        gateway.must_subscribe(APP, node, token, "value")
    report = OutageReport(kind, seconds)
    stream = EventStream(broker.bootstrap, stack.topics.changes, APP, node)
    probe = ApiProbe(gateway.base, APP, f"{uniq}/probe")
    recorder = Recorder()
    recorder.loop("events", stream.publish_one, 1.0 / rate)
    recorder.loop("subscribes", probe.subscribe_once, probe_interval)
    recorder.loop("readyz", probe.ready_once, 0.25)
    try:
        # Notifications flow before the fault.
        wait_for(lambda: account(stack.fake.sends(), tokens, stream.acked_set() or {-1}).missing_count == 0
                 and len(stream.acked_set()) >= 5, timeout=60, interval=0.2, what="notifications before the outage",
                 on_timeout=gateway.tails)

        outage_wall = utcnow()
        outage_start = time.monotonic()
        if kind == "freeze":
            broker.freeze()
        else:
            broker.kill()
        hold(seconds)
        if kind == "freeze":
            broker.thaw()
        else:
            broker.start()
        back = time.monotonic()

        def ready_again() -> Optional[float]:
            gateway.assert_alive()
            return probe.first_ready_after(back)

        ready_at = wait_for(ready_again, timeout=READY_AGAIN_BOUND, interval=0.2,
                            what=f"/readyz 200 within {READY_AGAIN_BOUND}s of the broker's return",
                            on_timeout=gateway.tails)
        ready_wall = utcnow()
        report.ready_again_after = ready_at - back
        # Readiness can come back before the consumer group has taken this replica back (a freeze longer than
        # the session timeout: the replica learns only after the return that it was removed, and rejoins): the
        # probes go on until a new subscribe works, at most SUBSCRIBE_AGAIN_BOUND after the return.
        try:
            wait_for(lambda: any(a.at >= back and 200 <= a.status < 300 for a in list(probe.subscribes)),
                     timeout=max(0.0, back + SUBSCRIBE_AGAIN_BOUND - time.monotonic()), interval=0.2,
                     what="a subscribe answered 2xx after the broker's return")
        except AssertionError:
            pass  # reported as "never" below
        # The stream goes on a little after the return, then every event is settled by the broker.
        hold(max(0.0, ready_at + tail_seconds - time.monotonic()))
    finally:
        recorder.stop()
    stream.finish(60)
    report.events_published = stream.next
    report.events_acked = len(stream.acked_set())
    assert not stream.failed, f"change events failed at the publisher: {stream.failed}"
    # What the gateway can deliver is what the broker kept: Tansu's s3 storage can lose the record it
    # acknowledged just before a SIGKILL. Those are counted apart (the broker's loss, not the gateway's).
    in_topic = stream.events_in_topic(min_records=report.events_acked)
    report.lost_by_broker = sorted(stream.acked_set() - in_topic)
    acked = stream.acked_set() & in_topic

    def all_delivered() -> bool:
        gateway.assert_alive()
        return account(stack.fake.sends(), tokens, acked).missing_count == 0

    delivered = True
    try:
        wait_for(all_delivered, timeout=DELIVERY_BOUND, interval=0.5,
                 what="every acknowledged event notified on every device")
    except AssertionError:
        delivered = False
    report.delivered_after = (time.monotonic() - back) if delivered else None
    report.delivery = account(stack.fake.sends(), tokens, acked)

    report.during = [a for a in probe.subscribes if outage_start <= a.at < back]
    report.after = [a for a in probe.subscribes if a.at >= back]
    report.unknown_again = [probe.subscribe_again(a.device) for a in report.during if a.status == 504]
    report.ready_during = [a for a in probe.ready if outage_start <= a.at < back]
    first_503 = next((a.at for a in probe.ready if a.at >= outage_start and a.status == 503), None)
    report.not_ready_after = None if first_503 is None or first_503 >= back else first_503 - outage_start
    ok = next((a for a in probe.subscribes if a.at >= back and 200 <= a.status < 300), None)
    report.subscribe_ok_after = None if ok is None else ok.at + ok.latency - back
    report.log_during = lines_between(log_lines(gateway.proc.stderr()), outage_wall,
                                      ready_wall + datetime.timedelta(seconds=1))
    report.replaced_producer = replaced_producers(gateway)
    return report
