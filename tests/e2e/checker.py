"""The checker of a nemesis history (issue 17): a pure function over recorded records, no process, no network.

A history is a JSON-lines file (``load``), one record per line, each with a ``type``:

``meta``          ``started`` (wall clock, s), ``seed``, ``partitions``, ``params`` (free-form)
``key``           a subscription a client worker writes: ``key``, ``api`` (``v1``/``v2``), ``app``, ``path``, ``token``,
                  ``uid``, ``id`` (v2 subscription id)
``stable``        a subscription made before the run and never touched: ``key``, ``app``, ``path``, ``token``,
                  ``created`` (when its create was acknowledged)
``op``            one API call: ``key``, ``replica``, ``op`` (``create``/``delete``/``get``/``list`` for v2,
                  ``put``/``unput`` for v1's PUT/DELETE), ``start``, ``end``, ``status`` (HTTP status or null),
                  ``error`` (``connect``: the request never left, so not applied; ``timeout``/``io``: no answer,
                  outcome unknown), ``body``, ``phase`` (``run``: the workload; anything else, e.g. ``verify``,
                  ``reload``, ``final``: a read after the faults, when the fleet is quiet)
``event``         a change event: ``n`` (its value is ``{"n": n}``), ``app``, ``path``, ``published`` (when it was
                  handed to the producer), ``acked`` (the broker's acknowledgement, or null), ``error``,
                  ``partition``, ``offset``, ``probe`` (a read by effect: see below)
``notification``  a request the fake FCM received: ``time``, ``token``, ``status``, ``data`` (the FCM data object)
``fault``         ``kind`` (``kill``/``stop``/``term``/``broker-freeze``/...), ``target``, ``start``, ``end`` (healed)
``ownership``     one poll of a replica: ``time``, ``replica``, ``ok``, ``ready`` (partitions owned and loaded),
                  ``loading``, ``readyz``
``process``       ``replica``, ``pid``, ``event`` (``start``/``exit``), ``time``, ``returncode``, ``expected``
                  (the nemesis or the teardown ended it), ``cause``, ``forced`` (SIGTERM was not enough)
``log``           a suspicious line of a replica's log (``CRASH_PATTERNS``): ``replica``, ``pid``, ``line``
``probe``         ``n`` (a probe event), ``checked``: when the runner read its effect (see below)
``phase``         ``name`` (``quiet``: the faults are over and the workload stopped), ``time``

The outcome of a call: ``ok`` (2xx: applied), ``fail`` (definitely not applied: a 4xx, a 503, a request that never
reached the server), ``info`` (indeterminate: 504, another 5xx, a timeout, a connection cut after the request
left). A 409 answer to a create and a 404 to a v2 delete are failures that are also observations (it existed; it
did not).

Checks (each violation names the records involved):

- ``keys``: per key, the calls are made one after the other by one worker, so each key is a register
  (present/absent) with a total order of calls; an indeterminate write may take effect at any time after it
  started (or never), each at most once. Every observation (a read, a 409, a 404, a 201 that needs the key absent,
  a v2 204 that needs it present, a read by effect) must be explained by the acknowledged writes before it and
  the indeterminate ones. Kinds: ``lost-write`` (a read after the faults contradicts acknowledged writes),
  ``stale-read`` (a read during the run does), ``wrong-answer`` (a write's answer does), ``failed-write-applied``
  (only explained if a write answered 503/4xx took effect: during the run, one answered at most 10 s before the
  anomaly; a request that never left is never a candidate).
- ``notify-after-delete``: no notification for an event published after the acknowledged delete of the
  subscription, unless it was made again (a create or PUT acknowledged or indeterminate before the notification).
- ``missed-notification``: every event the broker acknowledged is notified to every stable subscription of its
  path (at least once).
- ``unowned-partitions``: after each fault heals, every partition is owned and loaded by a live replica within
  ``coverage_bound`` seconds; at the end of the run, exactly one owner each and every replica ready.
- ``split-brain``: two answering replicas both say they own and have loaded a partition for longer than
  ``dual_bound`` seconds.
- ``crash``: a replica exited that no one stopped; ``unclean-shutdown``: a SIGTERM that did not end the process
  with status 0 in time; ``fatal-log``: a fatal error or trap in a log.
- ``server-error``: a 500 answer (never right).

A read by effect: after the faults, ``probe`` events are published to each path and the runner waits until the
stable subscriptions of that path have them (and the deliveries are quiet); a key is then present if its token got
the probe's notification by then and absent otherwise: a read from the probe's publication to that check. A probe
that some witness of its path did not get by then (nobody consumed it) reads nothing (``probes_unprocessed``).
"""

from __future__ import annotations

import json
import re
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

PRESENT, ABSENT = "present", "absent"

# Lines of a replica's stderr/stdout that mean it crashed or trapped (the runner copies them into the history).
CRASH_PATTERNS = [
    re.compile(p) for p in (
        r"Fatal error", r"fatal error:", r"Precondition failed", r"Assertion failed", r"Illegal instruction",
        r"Segmentation fault", r"\bSIGSEGV\b", r"\bSIGILL\b", r"\bSIGTRAP\b", r"\bSIGABRT\b", r"Current stack trace",
        r"Program crashed", r"Trace/breakpoint trap", r"double free", r"heap-use-after-free", r"\bpanicked at\b",
    )
]


def crash_line(line: str) -> bool:
    return any(p.search(line) for p in CRASH_PATTERNS)


def load(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# ---------------------------------------------------------------------------------------------------------
# Outcomes
# ---------------------------------------------------------------------------------------------------------


def outcome(op: dict) -> str:
    """``ok``, ``fail`` or ``info`` (see the module docstring)."""
    status, error = op.get("status"), op.get("error")
    if status is None:
        return "fail" if error == "connect" else "info"
    if 200 <= status < 300:
        return "ok"
    if status == 503 or 400 <= status < 500:
        return "fail"
    return "info"  # 504 (outcome unknown), 500, anything else


WRITES = {"create", "delete", "put", "unput"}
SETS = {"create": PRESENT, "put": PRESENT, "delete": ABSENT, "unput": ABSENT}


def observation(op: dict, key: dict) -> tuple[Optional[str], Optional[str]]:
    """(what the answer says the key was just before the call, or None; what the call leaves it as, or None)."""
    kind, status, cls = op["op"], op.get("status"), outcome(op)
    if kind == "probe":
        return op["observed"], None
    if kind == "get":
        return {200: PRESENT, 404: ABSENT}.get(status), None
    if kind == "list":
        if status != 200:
            return None, None
        try:
            items = json.loads(op.get("body") or "{}").get("subscriptions") or []
        except ValueError:
            return None, None
        return (PRESENT if any(i.get("id") == key.get("id") for i in items) else ABSENT), None
    if kind == "create":
        if status == 201:
            return ABSENT, PRESENT
        if cls == "ok":
            return None, PRESENT  # 200: an update (allowsUpdate), whatever it was
        if status == 409:
            return PRESENT, None
        return None, None
    if kind == "delete":
        if cls == "ok":
            return PRESENT, ABSENT
        if status == 404:
            return ABSENT, None
        return None, None
    if kind in ("put", "unput"):
        return None, (SETS[kind] if cls == "ok" else None)
    return None, None


# ---------------------------------------------------------------------------------------------------------
# Violations and the report
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Violation:
    kind: str
    message: str
    records: list[dict] = field(default_factory=list)
    key: Optional[str] = None


@dataclass
class Report:
    violations: list[Violation]
    stats: dict
    t0: float = 0.0
    # Anomalies of the broker, not of the gateway (reported, not counted as violations).
    broker: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def kinds(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for v in self.violations:
            out[v.kind] += 1
        return dict(sorted(out.items()))

    def render(self, record: dict) -> str:
        return render(record, self.t0)

    def lines(self, limit_per_kind: int = 10) -> list[str]:
        out = []
        shown: dict[str, int] = defaultdict(int)
        for v in self.violations:
            shown[v.kind] += 1
            if shown[v.kind] > limit_per_kind:
                continue
            out.append(f"VIOLATION [{v.kind}] {v.message}")
            out += ["    " + self.render(r) for r in v.records]
        for kind, count in self.kinds().items():
            if count > limit_per_kind:
                out.append(f"... {count - limit_per_kind} more [{kind}] violations not shown")
        for b in self.broker[:limit_per_kind]:
            out.append(f"BROKER [{b.kind}] {b.message}")
            out += ["    " + self.render(r) for r in b.records]
        out.append(self.summary())
        return out

    def summary(self) -> str:
        s = self.stats
        parts = [f"{k}={v}" for k, v in s.items() if not isinstance(v, (dict, list))]
        extra = [f"{k}: {v}" for k, v in s.items() if isinstance(v, (dict, list))]
        verdict = "no violation" if self.ok else "violations: " + ", ".join(f"{k}×{n}" for k, n in self.kinds().items())
        return "SUMMARY " + verdict + "\n  " + " ".join(parts) + ("\n  " + "\n  ".join(extra) if extra else "")


def rel(t: Optional[float], t0: float) -> str:
    return "?" if t is None else f"{t - t0:+.3f}"


def render(r: dict, t0: float) -> str:
    kind = r.get("type")
    if kind == "op":
        answer = r.get("status") if r.get("status") is not None else r.get("error")
        body = (r.get("body") or "").replace("\n", " ")
        return (f"op  {rel(r.get('start'), t0)}..{rel(r.get('end'), t0)} {r.get('phase', 'run')}"
                f" {r.get('key')} {r.get('op')} via {r.get('replica')} -> {answer}"
                + (f" {body[:160]}" if body and r.get("op") != "probe" else "")
                + (f" (observed {r.get('observed')})" if r.get("op") == "probe" else ""))
    if kind == "event":
        return (f"event n={r.get('n')} {r.get('app')}{r.get('path')} published {rel(r.get('published'), t0)} acked "
                f"{rel(r.get('acked'), t0)} partition {r.get('partition')} offset {r.get('offset')}"
                + (" probe" if r.get("probe") else "") + (f" error {r.get('error')}" if r.get("error") else ""))
    if kind == "notification":
        return f"notification {rel(r.get('time'), t0)} token {short(r.get('token'))} status {r.get('status')} {r.get('data')}"
    if kind == "fault":
        return f"fault {r.get('kind')} {r.get('target')} {rel(r.get('start'), t0)}..{rel(r.get('end'), t0)}"
    if kind == "ownership":
        return (f"ownership {rel(r.get('time'), t0)} {r.get('replica')} ok={r.get('ok')} ready={r.get('ready')} "
                f"loading={r.get('loading')} readyz={r.get('readyz')}")
    if kind == "process":
        return (f"process {rel(r.get('time'), t0)} {r.get('replica')} pid {r.get('pid')} {r.get('event')} "
                f"rc={r.get('returncode')} expected={r.get('expected')} cause={r.get('cause')}"
                + (" forced" if r.get("forced") else ""))
    return json.dumps(r)[:300]


def short(token: Optional[str]) -> str:
    return "?" if not token else (token[:20] + "…" if len(token) > 20 else token)


# ---------------------------------------------------------------------------------------------------------
# Keys: a register per key
# ---------------------------------------------------------------------------------------------------------


def _closure(configs: set) -> set:
    """Every configuration reachable by letting one pending indeterminate write take effect (or none). Letting
    two take effect is never needed: the second alone reaches the same state with more pending left."""
    out = set(configs)
    for state, pc, pa in configs:
        if pc:
            out.add((PRESENT, pc - 1, pa))
        if pa:
            out.add((ABSENT, pc, pa - 1))
    return _prune(out)


def _prune(configs: set) -> set:
    """Drops configurations dominated by one with the same state and at least as much pending."""
    out = set()
    for c in configs:
        if not any(o != c and o[0] == c[0] and o[1] >= c[1] and o[2] >= c[2] for o in configs):
            out.add(c)
    return out


FAILED_WINDOW = 10.0  # seconds: how long before an anomaly during the run a failed write is a plausible culprit


def _replay(ops: list[dict], key: dict, failed_as_unknown: Callable[[dict], bool] = lambda op: False) -> list[int]:
    """Replays ``ops`` (one key, in order); the indexes of the observations nothing explains. After each, the
    replay assumes nothing about the state (either, the writes of unknown outcome still pending) until the next
    write or observation, so that one anomaly is reported once. The writes answered as failed that
    ``failed_as_unknown`` selects count as of unknown outcome (never one that was not sent: that is certain)."""
    configs = {(ABSENT, 0, 0)}
    bad = []
    for i, op in enumerate(ops):
        cls = outcome(op)
        before, after = observation(op, key)
        if op["op"] in WRITES and before is None and after is None and (
                cls == "info" or (cls == "fail" and op.get("error") != "connect" and failed_as_unknown(op))):
            target = SETS[op["op"]]
            configs = {(s, pc + (target == PRESENT), pa + (target == ABSENT)) for s, pc, pa in configs}
            continue
        if before is None and after is None:
            continue
        reach = _closure(configs)
        if before is not None:
            matching = {c for c in reach if c[0] == before}
            if not matching:
                bad.append(i)
                matching = {(s, pc, pa) for _, pc, pa in reach for s in (PRESENT, ABSENT)}
            reach = matching
        if after is not None:
            reach = {(after, pc, pa) for _, pc, pa in reach}
        configs = _prune(reach)
    return bad


def check_keys(keys: dict[str, dict], ops_by_key: dict[str, list[dict]], t0: float) -> tuple[list[Violation], dict]:
    violations = []
    stats = {"keys_checked": 0}
    for name, ops in sorted(ops_by_key.items()):
        key = keys.get(name, {"key": name})
        ops = sorted(ops, key=lambda o: (o["start"], o.get("end") or o["start"]))
        stats["keys_checked"] += 1
        bad = _replay(ops, key)
        for index in bad:
            # A write answered as failed that took effect is a plausible explanation if it was answered shortly
            # before the anomaly (any time before, for a read after the faults).
            op = ops[index]
            since = op["start"] - FAILED_WINDOW if op.get("phase", "run") == "run" else float("-inf")
            recent = (lambda o, since=since: (o.get("end") or o["start"]) >= since)
            explained = index not in _replay(ops[: index + 1], key, failed_as_unknown=recent)
            violations.append(_key_violation(key, ops, index, t0, explained, since))
    return violations, stats


def _key_violation(key: dict, ops: list[dict], index: int, t0: float, by_failed: bool, since: float) -> Violation:
    op = ops[index]
    before, _ = observation(op, key)
    real = ops[:index]
    acked = [o for o in real if o["op"] in WRITES and outcome(o) == "ok"]
    last = acked[-1] if acked else None
    unknown = [o for o in real if o["op"] in WRITES and outcome(o) == "info"]
    failed = [o for o in real if o["op"] in WRITES and outcome(o) == "fail" and observation(o, key) == (None, None)
              and o.get("error") != "connect" and (o.get("end") or o["start"]) >= since]
    describe = f"key {key.get('key')} ({key.get('api')} {key.get('app')}{key.get('path')} token {short(key.get('token'))})"
    answer = op.get("status") if op.get("status") is not None else op.get("error")
    says = f"{op['op']} via {op.get('replica')} at {rel(op['start'], t0)} answered {answer}" + (
        f" (observed {op.get('observed')})" if op["op"] == "probe" else "") + f": the key was {before}"
    if last is not None:
        expect = f"; the last acknowledged write was {last['op']} -> {last.get('status')} at {rel(last['start'], t0)}"
    else:
        expect = "; no write to it was acknowledged"
    if unknown:
        expect += f"; {len(unknown)} write(s) of unknown outcome before"
    if by_failed and failed:
        kind = "failed-write-applied"
        culprits = [o for o in failed if SETS[o["op"]] == before] or failed
        last_failed = culprits[-1]
        answer_failed = last_failed.get("status") if last_failed.get("status") is not None else last_failed.get("error")
        why = (f" — explained only if a write answered as failed took effect, e.g. {last_failed['op']} -> "
               f"{answer_failed} at {rel(last_failed['start'], t0)} via {last_failed.get('replica')}")
    elif op["op"] in WRITES:
        kind, why = "wrong-answer", ""
    elif op.get("phase", "run") == "run":
        kind, why = "stale-read", ""
    else:
        kind, why = "lost-write", ""
    context = real[max(0, index - 8): index] + [op]
    return Violation(kind, f"{describe}: {says}{expect}{why}", context, key.get("key"))


# ---------------------------------------------------------------------------------------------------------
# Notifications
# ---------------------------------------------------------------------------------------------------------


def notified_n(data: Optional[dict]) -> Optional[int]:
    """The ``n`` of a value notification's event (v1 format: ``d`` is the JSON text of ``{"n": n}``)."""
    if not isinstance(data, dict) or data.get("t") != "value" or "d" not in data:
        return None
    try:
        value = json.loads(data["d"])
    except (TypeError, ValueError):
        return None
    return value.get("n") if isinstance(value, dict) else None


def check_notify_after_delete(keys: dict[str, dict], ops_by_key: dict[str, list[dict]], events: dict[int, dict],
                              notes_by_token: dict[str, list[dict]], t0: float) -> list[Violation]:
    violations = []
    for name, key in sorted(keys.items()):
        ops = sorted(ops_by_key.get(name, []), key=lambda o: o["start"])
        deletes = [o for o in ops if o["op"] in ("delete", "unput") and outcome(o) == "ok"]
        if not deletes:
            continue
        makes = [o for o in ops if o["op"] in ("create", "put") and outcome(o) in ("ok", "info")]
        for note in notes_by_token.get(key.get("token"), []):
            if note.get("status") != 200:
                continue
            n = notified_n(note.get("data"))
            event = events.get(n) if n is not None else None
            if event is None or event.get("app") != key.get("app") or event.get("path") != key.get("path"):
                continue
            before = [d for d in deletes if d["end"] < event["published"]]
            if not before:
                continue
            delete = before[-1]
            remade = [m for m in makes if note["time"] > m["start"] and (
                m["start"] > delete["start"] or outcome(m) == "info")]
            if remade:
                continue
            violations.append(Violation(
                "notify-after-delete",
                f"key {name} ({key.get('app')}{key.get('path')} token {short(key.get('token'))}): notified at "
                f"{rel(note['time'], t0)} of event n={n} published at {rel(event['published'], t0)}, after its delete "
                f"was acknowledged at {rel(delete['end'], t0)} (via {delete.get('replica')}), and not made again",
                [delete, event, note], name))
    return violations


def check_stable(stables: list[dict], events: dict[int, dict], notes_by_token: dict[str, list[dict]],
                 t0: float) -> tuple[list[Violation], dict]:
    violations = []
    expected = delivered = 0
    for sub in stables:
        notes = notes_by_token.get(sub["token"], [])
        got = {notified_n(n.get("data")) for n in notes if n.get("status") == 200}
        failed_sends = any(n.get("status") != 200 for n in notes)
        path_events = sorted((e for e in events.values() if e.get("app") == sub["app"] and e.get("path") == sub["path"]
                              and e.get("acked") is not None and e["published"] >= sub.get("created", 0)),
                             key=lambda e: e["n"])
        missing = []
        for e in path_events:
            expected += 1
            if e["n"] in got:
                delivered += 1
                continue
            # A backing-off line may coalesce its pending values into the latest (SPEC §8): only after a failed send.
            later = [m for m in got if m is not None and m > e["n"] and events.get(m, {}).get("path") == sub["path"]]
            if failed_sends and later:
                delivered += 1
                continue
            missing.append(e)
        if missing:
            violations.append(Violation(
                "missed-notification",
                f"stable subscription {sub['key']} ({sub['app']}{sub['path']} token {short(sub['token'])}): "
                f"{len(missing)} of {len(path_events)} acknowledged events never notified: n="
                + ",".join(str(e["n"]) for e in missing[:30]) + ("…" if len(missing) > 30 else ""),
                missing[:5], sub["key"]))
    return violations, {"stable_expected": expected, "stable_delivered": delivered}


# ---------------------------------------------------------------------------------------------------------
# Partitions
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Snapshot:
    time: float
    ready: dict[str, set]  # answering replica -> partitions owned and loaded
    loading: dict[str, set]
    readyz: dict[str, Optional[int]]
    # Per answering replica: its change consumer a steady member of the group (None: not reported).
    steady: dict[str, Optional[bool]] = field(default_factory=dict)

    def covered(self, partitions: int) -> bool:
        union = set().union(*self.ready.values()) if self.ready else set()
        return union >= set(range(partitions))

    def missing(self, partitions: int) -> list[int]:
        union = set().union(*self.ready.values()) if self.ready else set()
        return sorted(set(range(partitions)) - union)

    def dual(self) -> dict[int, list[str]]:
        owners: dict[int, list[str]] = defaultdict(list)
        for replica, parts in self.ready.items():
            for p in parts:
                owners[p].append(replica)
        return {p: sorted(r) for p, r in owners.items() if len(r) > 1}


def snapshots(polls: list[dict], freshness: float = 3.0) -> list[Snapshot]:
    """The fleet as the polls saw it, after each poll: per replica its latest answer, if it answered and is
    recent (a frozen or dead replica does not answer; its claims do not count)."""
    latest: dict[str, dict] = {}
    out = []
    for poll in sorted(polls, key=lambda p: p["time"]):
        latest[poll["replica"]] = poll
        now = poll["time"]
        live = {r: p for r, p in latest.items() if p.get("ok") and now - p["time"] <= freshness}
        out.append(Snapshot(now, {r: set(p.get("ready") or []) for r, p in live.items()},
                            {r: set(p.get("loading") or []) for r, p in live.items()},
                            {r: p.get("readyz") for r, p in live.items()},
                            {r: p.get("group_steady") for r, p in live.items()}))
    return out


def group_stalled(window: list[Snapshot], span: float = 20.0) -> bool:
    """True when, for the last ``span`` seconds of ``window`` (at least), no live replica's change consumer was a
    steady member of the group: the group coordinator never completed a rebalance, so no partition it left
    unassigned could get an owner, whatever the gateway did. (Tansu 0.6, seen with librdkafka's cgrp log: after the
    group's leader leaves during a rebalance, every JoinGroup answer names that departed leader, every SyncGroup
    fails, and the group never settles: tests/e2e/README.md.)"""
    if not window or window[-1].time - window[0].time < span:
        return False
    tail = [s for s in window if s.time >= window[-1].time - span]
    return all(s.steady and all(v is False for v in s.steady.values()) for s in tail)


# Seconds before a fault in which an event may not have been finished by its owner: not fetched yet, or fetched and
# not notified when the owner stopped (then uncommitted: the next owner's to deliver). Without the group's committed
# offsets the checker cannot tell those from a loss; with a group the broker left stalled there is no next owner.
IN_FLIGHT_MARGIN = 5.0


def unowned_since(snaps: list[Snapshot], partition: int, fault_start: float, until: float) -> float:
    """From when ``partition``'s events wait for an owner the stalled group never gives: the owner's stop
    (``fault_start``), or earlier when no snapshot saw the partition with a ready owner since an earlier moment (a
    fault before, whose own check a later fault took over, had already left it without one), less the margin in
    which its last owner may have fetched an event and not finished it."""
    last = next((s.time for s in reversed(snaps)
                 if s.time <= until and any(partition in parts for parts in s.ready.values())), None)
    return min(fault_start, last if last is not None else fault_start) - IN_FLIGHT_MARGIN


def check_partitions(polls: list[dict], faults: list[dict], partitions: int, coverage_bound: float,
                     dual_bound: float, quiet_at: Optional[float], t0: float) -> tuple[list[Violation], dict]:
    violations: list[Violation] = []
    broker: list[Violation] = []
    stalled: list[tuple[float, set]] = []  # (since, partitions) the broker's group left without an owner
    stats: dict = {}
    if not polls or not partitions:
        return violations, stats
    snaps = snapshots(polls)
    recoveries = []
    faults = sorted(faults, key=lambda f: f["start"])
    for i, fault in enumerate(faults):
        healed = fault.get("end")
        if healed is None:
            continue
        covered = next((s for s in snaps if s.time >= healed and s.covered(partitions)), None)
        limit = healed + coverage_bound
        until = covered.time if covered else limit
        # A later fault that starts before the fleet recovered takes the blame (its own check covers it).
        if any(f["start"] >= healed and f["start"] <= min(until, limit) for f in faults[i + 1:]):
            continue
        if covered is not None and covered.time <= limit:
            recoveries.append(covered.time - healed)
            continue
        window = [s for s in snaps if healed <= s.time <= limit]
        last = window[-1] if window else None
        detail = ""
        if last is not None:
            detail = (f"; at {rel(last.time, t0)}: partitions {last.missing(partitions)} without a ready owner; "
                      f"ready {_fmt(last.ready)}, loading {_fmt(last.loading)}, readyz {last.readyz}")
        after = f"covered only {covered.time - healed:.1f} s after" if covered else "never covered after"
        found = Violation(
            "unowned-partitions",
            f"{after} {fault['kind']} of {fault.get('target')} healed at {rel(healed, t0)} (bound {coverage_bound:.0f} s)"
            + detail, [fault] + _polls_near(polls, limit), None)
        if last is not None and group_stalled(window):
            found.kind = "group-stalled"
            broker.append(found)
            # The partitions' owner stopped consuming when the fault began (a SIGTERM stops polling at once, a kill
            # or a stop at once too): events published from then on were consumed by nobody, and those of the last
            # seconds before may be unfinished (uncommitted, left to a next owner that never came). Not lost by the
            # gateway. When an earlier fault had already left a partition without a ready owner (that fault's check
            # was this one's to make), its events have waited since then.
            for p in last.missing(partitions):
                stalled.append((unowned_since(snaps, p, fault["start"], last.time), {p}))
        else:
            violations.append(found)
    if recoveries:
        stats["recovery_s"] = {"max": round(max(recoveries), 1), "median": round(sorted(recoveries)[len(recoveries) // 2], 1),
                               "faults": len(recoveries)}
    # Two ready owners of one partition for longer than dual_bound.
    since: dict[tuple, float] = {}
    reported: set = set()
    for s in snaps:
        current = {(p, tuple(rs)) for p, rs in s.dual().items()}
        for item in list(since):
            if item not in current:
                del since[item]
        for item in current:
            since.setdefault(item, s.time)
            if s.time - since[item] > dual_bound and item not in reported:
                reported.add(item)
                p, rs = item
                violations.append(Violation(
                    "split-brain",
                    f"partition {p} owned and loaded by {', '.join(rs)} at once from {rel(since[item], t0)} to at "
                    f"least {rel(s.time, t0)} (bound {dual_bound:.0f} s)", _polls_near(polls, s.time), None))
    # At the end of the run (after the faults, the fleet quiet): one owner each, every replica ready.
    if quiet_at is not None:
        final = [s for s in snaps if s.time >= quiet_at]
        if final:
            last = final[-1]
            bad = []
            if not last.covered(partitions):
                bad.append(f"partitions {last.missing(partitions)} without a ready owner")
            if last.dual():
                bad.append(f"partitions with two owners {last.dual()}")
            not_ready = {r: z for r, z in last.readyz.items() if z != 200}
            if not_ready:
                bad.append(f"replicas not ready {not_ready}")
            if bad:
                found = Violation(
                    "unowned-partitions",
                    f"when the run ended ({rel(last.time, t0)}): " + "; ".join(bad) + f"; ready {_fmt(last.ready)}, "
                    f"loading {_fmt(last.loading)}", _polls_near(polls, last.time), None)
                if not last.dual() and group_stalled([s for s in snaps if s.time >= quiet_at - 60]):
                    found.kind = "group-stalled"
                    broker.append(found)
                    since = min((t for t, parts in stalled if parts & set(last.missing(partitions))), default=quiet_at - 60)
                    stalled.append((since, set(last.missing(partitions))))
                else:
                    violations.append(found)
    stats["_broker"] = broker
    stats["_stalled"] = stalled
    return violations, stats


def _fmt(parts: dict[str, set]) -> str:
    return "{" + ", ".join(f"{r}: {sorted(p)}" for r, p in sorted(parts.items())) + "}"


def _polls_near(polls: list[dict], t: float) -> list[dict]:
    """The latest poll of each replica at or before ``t``."""
    latest: dict[str, dict] = {}
    for p in sorted(polls, key=lambda p: p["time"]):
        if p["time"] <= t:
            latest[p["replica"]] = p
    return [latest[r] for r in sorted(latest)]


# ---------------------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------------------


def check_processes(processes: list[dict], logs: list[dict], t0: float) -> list[Violation]:
    violations = []
    for p in processes:
        if p.get("event") != "exit":
            continue
        if not p.get("expected"):
            violations.append(Violation(
                "crash", f"{p.get('replica')} (pid {p.get('pid')}) exited at {rel(p.get('time'), t0)} with status "
                f"{p.get('returncode')}, and no one stopped it", [p], None))
        elif p.get("cause") in ("term", "teardown") and (p.get("forced") or p.get("returncode") != 0):
            violations.append(Violation(
                "unclean-shutdown", f"{p.get('replica')} (pid {p.get('pid')}) after SIGTERM: "
                + ("still running at the end of the grace, killed" if p.get("forced")
                   else f"exit status {p.get('returncode')}"), [p], None))
    by_process: dict[tuple, list[dict]] = defaultdict(list)
    for line in logs:
        by_process[(line.get("replica"), line.get("pid"))].append(line)
    for (replica, pid), lines in sorted(by_process.items(), key=lambda kv: str(kv[0])):
        violations.append(Violation(
            "fatal-log", f"{replica} (pid {pid}): {len(lines)} fatal line(s), first: {lines[0].get('line', '')[:300]}",
            lines[:3], None))
    return violations


# ---------------------------------------------------------------------------------------------------------
# Everything
# ---------------------------------------------------------------------------------------------------------


def check(records: Iterable[dict], coverage_bound: float = 60.0, dual_bound: float = 15.0) -> Report:
    records = list(records)
    meta = next((r for r in records if r.get("type") == "meta"), {})
    t0 = meta.get("started") or min((r.get("start") or r.get("time") or r.get("published") or 0 for r in records
                                     if r.get("start") or r.get("time") or r.get("published")), default=0.0)
    keys = {r["key"]: r for r in records if r.get("type") == "key"}
    stables = [r for r in records if r.get("type") == "stable"]
    events = {r["n"]: r for r in records if r.get("type") == "event"}
    ops = [r for r in records if r.get("type") == "op"]
    notes = [r for r in records if r.get("type") == "notification"]
    faults = [r for r in records if r.get("type") == "fault"]
    polls = [r for r in records if r.get("type") == "ownership"]
    processes = [r for r in records if r.get("type") == "process"]
    logs = [r for r in records if r.get("type") == "log"]
    quiet = next((r.get("time") for r in records if r.get("type") == "phase" and r.get("name") == "quiet"), None)

    notes_by_token: dict[str, list[dict]] = defaultdict(list)
    for n in sorted(notes, key=lambda n: n["time"]):
        notes_by_token[n.get("token")].append(n)

    ops_by_key: dict[str, list[dict]] = defaultdict(list)
    for op in ops:
        ops_by_key[op["key"]].append(op)
    # Reads by effect: a probe event of a key's path, after the faults, judged when the runner checked it (a later
    # notification of the same event, e.g. replayed after a restart, says nothing about that moment).
    checked = {r["n"]: r["checked"] for r in records if r.get("type") == "probe"}
    unprocessed = []
    for e in events.values():
        if not e.get("probe") or e.get("acked") is None:
            continue
        until = checked.get(e["n"], float("inf"))
        # The probe says something only if it was processed: every witness (stable subscription) of its path has it.
        witnesses = [s for s in stables if s.get("app") == e.get("app") and s.get("path") == e.get("path")]
        if any(not any(n.get("status") == 200 and notified_n(n.get("data")) == e["n"] and n["time"] <= until
                       for n in notes_by_token.get(w["token"], [])) for w in witnesses):
            unprocessed.append(e["n"])
            continue
        for name, key in keys.items():
            if key.get("app") != e.get("app") or key.get("path") != e.get("path"):
                continue
            got = [n for n in notes_by_token.get(key.get("token"), []) if n.get("status") == 200
                   and notified_n(n.get("data")) == e["n"] and n["time"] <= until]
            ops_by_key[name].append({"type": "op", "key": name, "op": "probe", "replica": "(effect)",
                                     "start": e["published"], "end": min(until, e["published"] + 3600),
                                     "status": 200, "observed": PRESENT if got else ABSENT,
                                     "phase": e.get("phase", "final"), "event": e["n"]})

    violations: list[Violation] = []
    stats: dict = {"probes_unprocessed": len(unprocessed)} if unprocessed else {}
    v, s = check_keys(keys, ops_by_key, t0)
    violations += v
    stats.update(s)
    violations += check_notify_after_delete(keys, ops_by_key, events, notes_by_token, t0)
    v, s = check_partitions(polls, faults, int(meta.get("partitions") or 0), coverage_bound, dual_bound, quiet, t0)
    violations += v
    broker = s.pop("_broker", [])
    stalled = s.pop("_stalled", [])
    stats.update(s)
    # Events of a partition the broker's group left without an owner since before they were published are not
    # the gateway's to deliver (they wait, unconsumed): not counted as missed.
    partitions = int(meta.get("partitions") or 0)

    def stalled_event(e: dict) -> bool:
        if not partitions or not stalled:
            return False
        p = zlib.crc32(str(e.get("app", "")).encode("utf-8")) % partitions
        return any(p in parts and e["published"] >= since for since, parts in stalled)
    waiting = {n: e for n, e in events.items() if stalled_event(e)}
    v, s = check_stable(stables, {n: e for n, e in events.items() if n not in waiting}, notes_by_token, t0)
    violations += v
    stats.update(s)
    if waiting:
        stats["events_waiting_for_the_broker"] = len(waiting)
    violations += check_processes(processes, logs, t0)
    for op in ops:
        if op.get("status") == 500:
            violations.append(Violation("server-error", f"{op['op']} of {op['key']} via {op.get('replica')} "
                                        f"answered 500", [op], op["key"]))

    classes: dict[str, int] = defaultdict(int)
    for op in ops:
        classes[outcome(op)] += 1
    statuses: dict[str, int] = defaultdict(int)
    for op in ops:
        statuses[str(op.get("status") if op.get("status") is not None else op.get("error"))] += 1
    stats.update({
        "ops": len(ops), "ok": classes["ok"], "fail": classes["fail"], "indeterminate": classes["info"],
        "events": len(events), "events_acked": sum(1 for e in events.values() if e.get("acked") is not None),
        "notifications": len(notes), "faults": len(faults),
        "answers": dict(sorted(statuses.items())),
        "faults_by_kind": dict(sorted(_count(f["kind"] for f in faults).items())),
    })
    if meta.get("seed") is not None:
        stats = {"seed": meta["seed"], **stats}
    return Report(violations, stats, t0, broker)


def _count(items: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for i in items:
        out[i] += 1
    return out
