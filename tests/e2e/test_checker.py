"""Unit tests of the nemesis checker (checker.py) over small hand-made histories: no broker, no gateway."""

from __future__ import annotations

import json

import checker
from checker import check

T0 = 1000.0


class H:
    """A history under construction: times are seconds after T0."""

    def __init__(self, partitions: int = 0):
        self.records: list[dict] = [{"type": "meta", "started": T0, "seed": 7, "partitions": partitions}]
        self.ops = 0

    def key(self, name: str = "k", api: str = "v2", path: str = "/p", token: str = None) -> "H":
        self.records.append({"type": "key", "key": name, "api": api, "app": "app", "path": path,
                             "token": token or f"tok-{name}", "uid": f"u-{name}", "id": f"id-{name}"})
        return self

    def op(self, op: str, start: float, status=None, error=None, key: str = "k", phase: str = "run",
           end: float = None, body: str = "") -> "H":
        self.records.append({"type": "op", "key": key, "replica": "r0", "op": op, "start": T0 + start,
                             "end": T0 + (end if end is not None else start + 0.1), "status": status, "error": error,
                             "body": body, "phase": phase})
        return self

    def event(self, n: int, published: float, acked: float = None, path: str = "/p", probe: bool = False,
              phase: str = "final") -> "H":
        self.records.append({"type": "event", "n": n, "app": "app", "path": path, "published": T0 + published,
                             "acked": None if acked is None else T0 + acked, "probe": probe, "phase": phase})
        return self

    def note(self, token: str, n: int, at: float, status: int = 200, path: str = "/p") -> "H":
        self.records.append({"type": "notification", "time": T0 + at, "token": token, "status": status,
                             "data": {"s": "OK", "t": "value", "app": "app", "sp": path, "d": json.dumps({"n": n})}})
        return self

    def stable(self, name: str, token: str, path: str = "/p", created: float = 0.0) -> "H":
        self.records.append({"type": "stable", "key": name, "app": "app", "path": path, "token": token,
                             "created": T0 + created})
        return self

    def fault(self, kind: str, start: float, end: float, target: str = "r0") -> "H":
        self.records.append({"type": "fault", "kind": kind, "target": target, "start": T0 + start, "end": T0 + end})
        return self

    def poll(self, replica: str, at: float, ready=(), loading=(), ok: bool = True, readyz: int = 200,
             steady=None) -> "H":
        self.records.append({"type": "ownership", "replica": replica, "time": T0 + at, "ok": ok, "ready": list(ready),
                             "loading": list(loading), "readyz": readyz if ok else None, "group_steady": steady})
        return self

    def quiet(self, at: float) -> "H":
        self.records.append({"type": "phase", "name": "quiet", "time": T0 + at})
        return self

    def check(self, **kw):
        return check(self.records, **kw)


def kinds(report) -> dict:
    return report.kinds()


# ---------------------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------------------


def test_a_clean_sequential_history_has_no_violation():
    h = (H().key().op("create", 1, 201).op("get", 2, 200).op("list", 3, 200, body='{"subscriptions":[{"id":"id-k"}]}')
         .op("create", 4, 409).op("delete", 5, 204).op("get", 6, 404).op("delete", 7, 404)
         .op("list", 8, 200, body='{"subscriptions":[]}').op("get", 20, 404, phase="final"))
    report = h.check()
    assert report.ok, report.lines()
    assert report.stats["ops"] == 9 and report.stats["seed"] == 7


def test_an_acknowledged_create_not_visible_after_the_faults_is_a_lost_write():
    report = H().key().op("create", 1, 201).op("get", 20, 404, phase="final").check()
    assert kinds(report) == {"lost-write": 1}
    v = report.violations[0]
    assert "create -> 201" in v.message and v.key == "k"
    assert [r["op"] for r in v.records] == ["create", "get"]


def test_an_acknowledged_delete_undone_is_a_lost_write():
    report = H().key().op("create", 1, 201).op("delete", 2, 204).op("get", 20, 200, phase="final").check()
    assert kinds(report) == {"lost-write": 1}


def test_a_read_during_the_run_that_misses_an_acknowledged_write_is_stale():
    report = H().key().op("create", 1, 201).op("get", 2, 404).op("get", 3, 200).check()
    # Reported once: after an anomaly the replay assumes nothing, and the next read (right) is not blamed.
    assert kinds(report) == {"stale-read": 1}
    assert report.violations[0].records[-1]["start"] == T0 + 2
    # ... until the next observation: a later contradiction is a new anomaly.
    report = (H().key().op("create", 1, 201).op("get", 2, 404).op("get", 3, 200).op("get", 4, 404)
              .check())
    assert kinds(report) == {"stale-read": 2}


def test_wrong_answers_to_writes():
    report = H().key().op("create", 1, 201).op("delete", 2, 404).check()
    assert kinds(report) == {"wrong-answer": 1}
    report = H().key().op("create", 1, 201).op("create", 2, 201).check()
    assert kinds(report) == {"wrong-answer": 1}, "a 201 for a duplicate"
    report = H().key().op("create", 1, 409).check()
    assert kinds(report) == {"wrong-answer": 1}, "a 409 for nothing"
    report = H().key().op("delete", 1, 204).check()
    assert kinds(report) == {"wrong-answer": 1}, "a v2 204 for nothing"


def test_writes_of_unknown_outcome_allow_either_state_even_late():
    for final in (200, 404):
        report = H().key().op("create", 1, None, "timeout").op("get", 20, final, phase="final").check()
        assert report.ok, report.lines()
        report = H().key().op("create", 1, 504).op("get", 20, final, phase="final").check()
        assert report.ok, report.lines()
    # The create of unknown outcome may take effect after the delete acknowledged later (a zombie's socket).
    report = (H().key().op("create", 1, None, "io").op("create", 2, 201).op("delete", 3, 204)
              .op("get", 20, 200, phase="final").check())
    assert report.ok, report.lines()
    assert report.stats["indeterminate"] == 1


def test_a_write_of_unknown_outcome_takes_effect_at_most_once():
    report = (H().key().op("create", 1, None, "timeout").op("get", 2, 200).op("delete", 3, 204).op("get", 4, 200)
              .check())
    assert kinds(report) == {"stale-read": 1}
    assert report.violations[0].records[-1]["start"] == T0 + 4


def test_a_write_answered_503_or_never_sent_that_takes_effect():
    report = H().key().op("create", 1, 503).op("get", 20, 200, phase="final").check()
    assert kinds(report) == {"failed-write-applied": 1}
    assert "create -> 503 at +1.000" in report.violations[0].message
    # A request that never left cannot have taken effect: the read is simply wrong.
    report = H().key().op("create", 1, None, "connect").op("get", 20, 200, phase="final").check()
    assert kinds(report) == {"lost-write": 1}
    report = H().key().op("create", 1, 201).op("delete", 2, 503).op("get", 20, 404, phase="final").check()
    assert kinds(report) == {"failed-write-applied": 1}
    # During the run, only a failure answered shortly before the anomaly is a plausible culprit.
    report = H().key().op("create", 1, 503).op("get", 5, 200).check()
    assert kinds(report) == {"failed-write-applied": 1}
    report = H().key().op("create", 1, 503).op("get", 30, 200).check()
    assert kinds(report) == {"stale-read": 1}


def test_v1_writes_are_unconditional_and_read_by_effect():
    h = (H().key("v", api="v1", token="tv").op("put", 1, 204, key="v").op("put", 2, 204, key="v")
         .op("unput", 3, 204, key="v").op("unput", 4, 204, key="v"))
    assert h.check().ok
    # The probe (published at 20) reaches nobody: absent, as acknowledged.
    h.event(1, 20, 20.1, probe=True)
    assert h.check().ok, h.check().lines()
    # It reaches the device: the acknowledged delete was lost, and the device was notified after it.
    h.note("tv", 1, 21)
    report = h.check()
    assert kinds(report) == {"lost-write": 1, "notify-after-delete": 1}, report.lines()


def test_a_probe_counts_the_notifications_received_until_it_was_checked():
    h = H().key("v", api="v1", token="tv").op("put", 1, 204, key="v").op("unput", 2, 204, key="v")
    h.event(1, 20, 20.1, probe=True).records.append({"type": "probe", "n": 1, "checked": T0 + 25})
    # Notified later (e.g. replayed after a restart): not what the probe saw; but a notification after the delete.
    report = h.note("tv", 1, 30).check()
    assert kinds(report) == {"notify-after-delete": 1}, report.lines()
    report = h.note("tv", 1, 24).check()
    assert kinds(report) == {"lost-write": 1, "notify-after-delete": 2}, report.lines()


def test_a_probe_nobody_processed_reads_nothing():
    h = H().key("v", api="v1", token="tv").op("put", 1, 204, key="v").stable("w", "tw").event(1, 20, 20.1, probe=True)
    h.records.append({"type": "probe", "n": 1, "checked": T0 + 25})
    report = h.check()
    # Not a read of the key; but the witness missed an event.
    assert kinds(report) == {"missed-notification": 1} and report.stats["probes_unprocessed"] == 1, report.lines()
    report = h.note("tw", 1, 21).check()
    assert kinds(report) == {"lost-write": 1}, report.lines()


def test_a_probe_that_misses_an_acknowledged_put_is_a_lost_write():
    report = H().key("v", api="v1", token="tv").op("put", 1, 204, key="v").event(1, 20, 20.1, probe=True).check()
    assert kinds(report) == {"lost-write": 1}
    assert report.violations[0].records[-1]["op"] == "probe"


# ---------------------------------------------------------------------------------------------------------
# Notifications
# ---------------------------------------------------------------------------------------------------------


def test_notification_after_an_acknowledged_delete():
    base = H().key(token="t").op("create", 1, 201).op("delete", 5, 204, end=5.2)
    # Published before the delete was acknowledged: allowed, whenever it is sent.
    assert base.event(1, 5.1, 5.15).note("t", 1, 8).check().ok
    report = base.event(2, 6, 6.1).note("t", 2, 7).check()
    assert kinds(report) == {"notify-after-delete": 1}
    assert "n=2" in report.violations[0].message
    # Made again before the notification: allowed.
    again = H().key(token="t").op("create", 1, 201).op("delete", 5, 204).op("create", 6.5, 201).event(2, 6, 6.1)
    assert again.note("t", 2, 7).check().ok
    # ... also when that create's outcome is unknown.
    unknown = H().key(token="t").op("create", 1, 201).op("delete", 5, 204).op("create", 6.5, None, "timeout")
    assert unknown.event(2, 6, 6.1).note("t", 2, 7).check().ok
    # A create answered 503 does not excuse it.
    failed = H().key(token="t").op("create", 1, 201).op("delete", 5, 204).op("create", 6.5, 503)
    assert kinds(failed.event(2, 6, 6.1).note("t", 2, 7).check()) == {"notify-after-delete": 1}


def test_every_acknowledged_event_reaches_every_stable_subscription():
    h = (H().stable("s", "ts", created=0).event(1, 1, 1.1).event(2, 2, 2.1).event(3, 3, None)
         .event(4, 4, 4.1, path="/other").note("ts", 1, 1.5))
    report = h.check()
    assert kinds(report) == {"missed-notification": 1}
    assert "n=2" in report.violations[0].message
    assert report.stats["stable_expected"] == 2 and report.stats["stable_delivered"] == 1
    # Duplicates are fine (at-least-once).
    assert h.note("ts", 2, 9).note("ts", 2, 9.5).check().ok


def test_a_missed_value_is_excused_by_coalescing_only_after_a_failed_send():
    h = H().stable("s", "ts").event(1, 1, 1.1).event(2, 2, 2.1).note("ts", 2, 3)
    assert kinds(h.check()) == {"missed-notification": 1}
    h.note("ts", 1, 1.5, status=503)
    assert h.check().ok


# ---------------------------------------------------------------------------------------------------------
# Partitions and processes
# ---------------------------------------------------------------------------------------------------------


def covered_polls(h: H, start: float, end: float, step: float = 0.5):
    t = start
    while t <= end:
        h.poll("r0", t, ready=[0, 1]).poll("r1", t + 0.01, ready=[2, 3])
        t += step
    return h


def test_partitions_recovered_within_the_bound():
    h = H(partitions=4).fault("stop", 10, 20, "r1")
    h.poll("r0", 21, ready=[0, 1]).poll("r1", 21.01, ok=False)
    covered_polls(h, 25, 30).quiet(29)
    report = h.check()
    assert report.ok, report.lines()
    assert report.stats["recovery_s"]["max"] == 5.0


def test_a_partition_left_loading_is_reported():
    h = H(partitions=4).fault("kill", 10, 12, "r1")
    t = 12.0
    while t < 90:
        h.poll("r0", t, ready=[0, 1, 2]).poll("r1", t + 0.01, loading=[3], readyz=503)
        t += 1
    h.quiet(85)
    report = h.check(coverage_bound=60)
    assert kinds(report) == {"unowned-partitions": 2}, report.lines()
    assert "never covered" in report.violations[0].message and "[3]" in report.violations[0].message
    assert "replicas not ready" in report.violations[1].message


def test_a_group_that_never_settles_is_the_brokers_not_the_gateways():
    """No replica's consumer is a steady group member for the whole window (the coordinator never completes a
    rebalance): partitions left without an owner are reported as the broker's, and the events of those partitions
    published meanwhile are not counted as missed. With a steady group, the same ownership is a violation."""
    import zlib
    app_partition = zlib.crc32(b"app") % 4
    owned = sorted(set(range(4)) - {app_partition})

    def history(steady):
        h = H(partitions=4).fault("term", 10, 12, "r1").stable("s", "tok-s", created=0).event(1, 3, 3.1)
        h.note("tok-s", 1, 3.5)
        # Published just before the fault, never notified: unfinished by the owner that stopped (uncommitted, left
        # to a next owner that never came), so waiting too.
        h.event(3, 8, 8.1)
        t = 12.0
        while t < 90:
            h.poll("r0", t, ready=owned, steady=steady).poll("r1", t + 0.01, readyz=503, steady=steady)
            t += 1
        h.event(2, 40, 40.1)  # published while its partition has no owner
        return h.quiet(85).check(coverage_bound=60)

    stalled = history(steady=False)
    assert stalled.ok, stalled.lines()
    assert [b.kind for b in stalled.broker] == ["group-stalled", "group-stalled"], stalled.lines()
    assert stalled.stats["events_waiting_for_the_broker"] == 2
    assert any(line.startswith("BROKER [group-stalled]") for line in stalled.lines())
    steady = history(steady=True)
    assert kinds(steady) == {"missed-notification": 1, "unowned-partitions": 2}, steady.lines()
    missed = [v.message for v in steady.violations if v.kind == "missed-notification"]
    assert "n=2,3" in missed[0], steady.lines()


def test_a_stalled_group_after_a_chain_of_faults_excuses_events_from_the_first_owners_stop():
    """Seed 650546 in CI (2026-11-27): a kill left a partition without an owner, and before the group gave it to
    another, a second fault (a SIGTERM) took over the check and the group never settled again. The partition's events
    published after the kill (and in the margin before it) wait for an owner that never comes, not only those after
    the second fault."""
    import zlib
    app_partition = zlib.crc32(b"app") % 4
    others = sorted(set(range(4)) - {app_partition})

    def history(steady):
        h = H(partitions=4).fault("kill", 10, 12, "r1").fault("term", 18, 20, "r0").stable("s", "tok-s", created=0)
        t = 0.0
        while t < 10:  # r1 owns the app's partition until it is killed
            h.poll("r0", t, ready=others[:2], steady=True).poll("r1", t + 0.01, ready=[app_partition, others[2]],
                                                                 steady=True)
            t += 0.5
        h.event(1, 8, 8.1)  # published just before the kill: r1 may have fetched it and not finished it
        h.event(2, 14, 14.1)  # published between the faults: nobody owns the partition
        while t < 90:
            h.poll("r0", t, ready=others, steady=steady).poll("r1", t + 0.01, readyz=503, steady=steady)
            t += 1
        return h.quiet(85).check(coverage_bound=60)

    stalled = history(steady=False)
    assert stalled.ok, stalled.lines()
    assert stalled.stats["events_waiting_for_the_broker"] == 2, stalled.lines()
    steady = history(steady=True)
    missed = [v.message for v in steady.violations if v.kind == "missed-notification"]
    assert missed and "n=1,2" in missed[0], steady.lines()


def test_a_fault_starting_before_recovery_takes_the_blame():
    h = H(partitions=4).fault("stop", 10, 20, "r1").fault("kill", 22, 24, "r0")
    h.poll("r0", 21, ready=[0, 1])
    covered_polls(h, 30, 31)
    assert h.check().ok


def test_two_ready_owners_for_too_long_is_split_brain():
    h = H(partitions=2)
    for i in range(40):
        h.poll("r0", i * 0.5, ready=[0, 1]).poll("r1", i * 0.5 + 0.01, ready=[1])
    report = h.check(dual_bound=15)
    assert kinds(report) == {"split-brain": 1}, report.lines()
    assert "partition 1" in report.violations[0].message
    assert h.check(dual_bound=30).ok


def test_processes_and_logs():
    records = H().records + [
        {"type": "process", "replica": "r0", "pid": 1, "event": "exit", "time": T0 + 5, "returncode": -9,
         "expected": True, "cause": "kill"},
        {"type": "process", "replica": "r1", "pid": 2, "event": "exit", "time": T0 + 6, "returncode": 0,
         "expected": True, "cause": "term"},
        {"type": "process", "replica": "r2", "pid": 3, "event": "exit", "time": T0 + 7, "returncode": -4,
         "expected": False},
        {"type": "process", "replica": "r1", "pid": 4, "event": "exit", "time": T0 + 8, "returncode": 1,
         "expected": True, "cause": "teardown"},
        {"type": "log", "replica": "r2", "pid": 3, "line": "Fatal error: Unexpectedly found nil"},
    ]
    report = check(records)
    assert kinds(report) == {"crash": 1, "fatal-log": 1, "unclean-shutdown": 1}, report.lines()
    assert checker.crash_line("PushCore/AppIndex.swift:12: Fatal error: Index out of range")
    assert not checker.crash_line('{"level":"warning","msg":"consumer group session expired"}')


def test_server_errors_and_rendering(tmp_path):
    h = H().key().op("create", 1, 500)
    report = h.check()
    assert kinds(report) == {"server-error": 1}
    text = "\n".join(report.lines())
    assert "VIOLATION [server-error]" in text and "SUMMARY" in text and "+1.000" in text
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in h.records) + "\n")
    assert checker.load(str(path)) == h.records
