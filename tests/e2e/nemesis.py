"""The nemesis run (issue 17), Jepsen's method: replicas of the real gateway on a real Tansu, a client workload and a
publisher, random faults, and a recorded history (JSON lines) that ``checker.py`` judges afterwards.

Pieces (also used by test_zombie.py):

- ``History``: the JSON-lines file, one record per line (the record types are described in checker.py).
- ``call``: one HTTP call on a fresh connection, classified: an answer, ``connect`` (the request never left: not
  applied), ``timeout``/``io`` (it left, no answer: outcome unknown). No automatic retry: a write retried by the
  client could be applied twice and blamed on the gateway.
- ``Workload``: one sequential worker per key (create/delete/get/list for v2, PUT/DELETE for v1), through a replica
  picked at random among the targets; each call recorded with its answer. It can be paused (every worker idle).
- ``EventPublisher``: change events ``SET {"n": n}`` at a rate, round robin over (app, path), each recorded with the
  broker's acknowledgement (or its failure).
- ``NotificationCollector``: every request the fake FCM received for the run's tokens.
- ``Slot``: one replica across its restarts (same port, same configuration), every process it ran, and their exits
  (expected when the nemesis or the teardown caused them).
- ``OwnershipPoller``: each replica's ``pushgateway_partition_state`` and ``/readyz``, twice a second.
- ``Nemesis``: kill -9 (then restart), SIGSTOP past the session timeout (then SIGCONT), SIGTERM (then restart),
  broker freeze (SIGSTOP/SIGCONT of Tansu).
- ``run``: the whole run (``Params``), then the checker's ``Report``.

Waits are bounded (procutil.wait_for or a deadline); sleeps only pace the workload or hold a fault. Every process
started is stopped in ``finally`` (SIGCONT first for a frozen one) and killed at exit whatever happened.
"""

from __future__ import annotations

import copy
import http.client
import json
import os
import random
import signal
import socket
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Callable, Optional

import confluent_kafka
import jwt

import checker
from cluster import partition_of, subscription_id
from gateway import Gateway, free_port, parse_prometheus
from kafka_util import client_config, encode_change_event
from procutil import ManagedProcess, WaitTimeout, wait_for

SECRET = "nemesis-test-secret-long-enough-for-hs256"

# ---------------------------------------------------------------------------------------------------------
# History
# ---------------------------------------------------------------------------------------------------------


class History:
    """The run's records, in memory and appended to a JSON-lines file as they come (flushed, so a run that dies
    still leaves its history)."""

    def __init__(self, path: str):
        self.path = path
        self.lock = threading.Lock()
        self.records: list[dict] = []
        self.file = open(path, "w", encoding="utf-8")

    def add(self, record: dict) -> dict:
        line = json.dumps(record, separators=(",", ":"), default=str)
        with self.lock:
            self.records.append(record)
            if self.file is not None:
                self.file.write(line + "\n")
                self.file.flush()
        return record

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.records)

    def close(self) -> None:
        with self.lock:
            if self.file is not None:
                self.file.close()
                self.file = None


# ---------------------------------------------------------------------------------------------------------
# HTTP calls
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Call:
    status: Optional[int]
    error: Optional[str]  # connect | timeout | io
    body: str
    start: float
    end: float


def call(port: int, method: str, path: str, body=None, headers: Optional[dict] = None, timeout: float = 30.0,
         limit: Optional[int] = 2000) -> Call:
    """One call on a new connection (see the module docstring for the classification); the body is kept up to
    ``limit`` characters."""
    data = json.dumps(body).encode() if body is not None else None
    headers = dict(headers or {})
    if data is not None:
        headers["Content-Type"] = "application/json"
    start = time.time()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        try:
            conn.connect()
        except OSError as exc:
            return Call(None, "connect", repr(exc)[:200], start, time.time())
        try:
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            payload = response.read()
            text = payload.decode("utf-8", "replace")
            return Call(response.status, None, text[:limit] if limit else text, start, time.time())
        except (socket.timeout, TimeoutError) as exc:
            return Call(None, "timeout", repr(exc)[:200], start, time.time())
        except (OSError, http.client.HTTPException) as exc:
            return Call(None, "io", repr(exc)[:200], start, time.time())
    finally:
        conn.close()


class Client:
    """Calls on kept-alive connections, one per (thread, port), classified as ``call`` does. Requests sent to a
    frozen replica on an established connection wait in its socket and are read the moment it is continued (the
    race a zombie loses or wins). A pooled connection the server closed (or a dead process's) is noticed before it
    is used (readable without a request: EOF or reset) and replaced, so that the request either leaves on a live
    connection or never leaves (``connect``); no call is ever retried."""

    def __init__(self, timeout: float = 30.0):
        self.timeout = timeout
        self.local = threading.local()

    def _pool(self) -> dict:
        pool = getattr(self.local, "pool", None)
        if pool is None:
            pool = self.local.pool = {}
        return pool

    def call(self, port: int, method: str, path: str, body=None, headers: Optional[dict] = None,
             limit: Optional[int] = 2000) -> Call:
        data = json.dumps(body).encode() if body is not None else None
        headers = dict(headers or {})
        if data is not None:
            headers["Content-Type"] = "application/json"
        start = time.time()
        pool = self._pool()
        conn = pool.get(port)
        if conn is not None and (conn.sock is None or _readable(conn.sock)):
            conn.close()
            conn = None
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=self.timeout)
            try:
                conn.connect()
            except OSError as exc:
                conn.close()
                pool.pop(port, None)
                return Call(None, "connect", repr(exc)[:200], start, time.time())
            pool[port] = conn
        try:
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            payload = response.read()
            if response.will_close:
                conn.close()
                pool.pop(port, None)
            text = payload.decode("utf-8", "replace")
            return Call(response.status, None, text[:limit] if limit else text, start, time.time())
        except (socket.timeout, TimeoutError) as exc:
            conn.close()
            pool.pop(port, None)
            return Call(None, "timeout", repr(exc)[:200], start, time.time())
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            pool.pop(port, None)
            return Call(None, "io", repr(exc)[:200], start, time.time())


def _readable(sock: socket.socket) -> bool:
    """True when an idle connection has something to read: the server closed it (or sent garbage)."""
    import select  # noqa: PLC0415
    try:
        readable, _, errored = select.select([sock], [], [sock], 0)
    except (OSError, ValueError):
        return True
    return bool(readable or errored)


_TOKENS: dict[str, str] = {}
_TOKENS_LOCK = threading.Lock()


def bearer(uid: str) -> dict:
    with _TOKENS_LOCK:
        token = _TOKENS.get(uid)
        if token is None:
            token = _TOKENS[uid] = jwt.encode({"uid": uid, "exp": int(time.time()) + 6 * 3600}, SECRET,
                                              algorithm="HS256")
    return {"Authorization": f"Bearer {token}"}


def app_settings(service_account_file: str) -> dict:
    return {"enabled": True, "fcmServiceAccountFile": service_account_file,
            "authKeys": [{"alg": "HS256", "secret": SECRET}]}


def apps_on_partitions(prefix: str, partitions: int, per_partition: int = 1) -> list[str]:
    """App names, ``per_partition`` on each partition (the publishers' partitioner)."""
    wanted = [per_partition] * partitions
    out, k = [], 0
    while any(wanted):
        name = f"{prefix}-{k}"
        p = partition_of(name, partitions)
        if wanted[p]:
            wanted[p] -= 1
            out.append(name)
        k += 1
    return out


def fcm_token(label: str) -> str:
    head = f"{label}:APA91b"
    return head + (uuid.uuid4().hex * 4)[: 163 - len(head)]


# ---------------------------------------------------------------------------------------------------------
# Keys and the client workload
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Key:
    """A subscription (app, path, token) that one worker writes, with a uid of its own: v2 (a list is a read of
    this key alone), or v1 PUT/DELETE with that uid's auth token (``anonymous``: without, and then subject to the
    app's anonymous write rate)."""
    name: str
    api: str
    app: str
    path: str
    token: str
    uid: str = ""
    anonymous: bool = False

    @property
    def id(self) -> str:
        return subscription_id(self.app, self.uid, "mobile", self.path, self.token) if self.api == "v2" else ""

    def record(self, kind: str = "key", **extra) -> dict:
        return {"type": kind, "key": self.name, "api": self.api, "app": self.app, "path": self.path,
                "token": self.token, "uid": self.uid, "id": self.id, **extra}

    def request(self, op: str) -> tuple[str, str, Optional[dict], dict]:
        """(method, path, body, headers) of ``op``."""
        if self.api == "v1":
            auth = {} if self.anonymous or not self.uid else {"token": bearer(self.uid)["Authorization"][7:]}
            query = urllib.parse.urlencode({"id": self.token, **({"mode": "value"} if op == "put" else {}), **auth})
            url = (f"/base/{urllib.parse.quote(self.app, safe='')}/.wakeup{urllib.parse.quote(self.path, safe='/')}"
                   f"?{query}")
            return ("PUT" if op == "put" else "DELETE"), url, None, {}
        base = f"/datasync/v2/{urllib.parse.quote(self.app, safe='')}/subscriptions/{self.uid}"
        auth = bearer(self.uid)
        if op == "create":
            return "POST", base, {"kind": "mobile", "mode": "value", "path": self.path, "context": self.token,
                                  "format": "v1"}, auth
        if op == "delete":
            return "DELETE", f"{base}/{self.id}", None, auth
        if op == "get":
            return "GET", f"{base}/{self.id}", None, auth
        if op == "list":
            return "GET", base, None, auth
        raise ValueError(op)


def do_op(history: History, key: Key, op: str, replica: Gateway, timeout: float, phase: str = "run",
          client: Optional[Client] = None) -> Call:
    method, path, body, headers = key.request(op)
    if client is not None:
        answer = client.call(replica.http_port, method, path, body, headers)
    else:
        answer = call(replica.http_port, method, path, body, headers, timeout)
    history.add({"type": "op", "key": key.name, "replica": replica.name, "op": op, "start": answer.start,
                 "end": answer.end, "status": answer.status, "error": answer.error,
                 "body": answer.body if op in ("list", "get", "create") or answer.status is None
                 or answer.status >= 300 else "", "phase": phase})
    return answer


V2_OPS = (("create", 0.35), ("delete", 0.35), ("get", 0.15), ("list", 0.15))
V1_OPS = (("put", 0.5), ("unput", 0.5))
V2_WRITES = (("create", 0.5), ("delete", 0.5))


def pick(rng: random.Random, weighted) -> str:
    roll, acc = rng.random() * sum(w for _, w in weighted), 0.0
    for name, w in weighted:
        acc += w
        if roll < acc:
            return name
    return weighted[-1][0]


class Workload:
    """One worker thread per key, each calling one op after the other (paced), through ``targets()``, on kept-alive
    connections (``keep_alive``) or a new connection per call."""

    def __init__(self, keys: list[Key], history: History, targets: Callable[[], list[Gateway]], seed: int,
                 timeout: float = 30.0, pace: tuple[float, float] = (0.3, 1.2), v2_ops=V2_OPS, v1_ops=V1_OPS,
                 keep_alive: bool = True):
        self.keys, self.history, self.targets = keys, history, targets
        self.client = Client(timeout) if keep_alive else None
        self.timeout, self.pace = timeout, pace
        self.v2_ops, self.v1_ops = v2_ops, v1_ops
        self.seed = seed
        self.stopping = threading.Event()
        self.cond = threading.Condition()
        self.running = True
        self.busy = 0
        self.burst_id = 0  # a burst armed (see burst); each worker joins each burst once
        self.burst_go: Optional[threading.Event] = None
        self.burst_waiting = 0
        self.calls = 0
        self.failures: list[BaseException] = []
        self.threads = [threading.Thread(target=self._run, args=(i, key), name=f"worker-{key.name}", daemon=True)
                        for i, key in enumerate(keys)]

    def start(self) -> "Workload":
        for t in self.threads:
            t.start()
        return self

    def _run(self, index: int, key: Key) -> None:
        rng = random.Random(self.seed * 1000 + index)
        joined = 0
        try:
            while not self.stopping.is_set():
                with self.cond:
                    go = self.running
                    if go:
                        self.busy += 1
                    burst = self.burst_go if self.burst_id > joined else None
                    if go and burst is not None:
                        joined = self.burst_id
                        self.burst_waiting += 1
                        self.cond.notify_all()
                if not go:
                    self.stopping.wait(0.05)
                    continue
                try:
                    if burst is not None:
                        burst.wait(10)
                    targets = self.targets()
                    if targets:
                        ops = self.v2_ops if key.api == "v2" else self.v1_ops
                        op = pick(rng, (V2_WRITES if key.api == "v2" else self.v1_ops) if burst else ops)
                        do_op(self.history, key, op, rng.choice(targets), self.timeout, client=self.client)
                        self.calls += 1
                finally:
                    with self.cond:
                        self.busy -= 1
                        self.cond.notify_all()
                self.stopping.wait(rng.uniform(*self.pace))
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.failures.append(exc)

    def pause(self, timeout: Optional[float] = None) -> None:
        """Returns once no worker is in a call (and none starts one until ``resume``)."""
        with self.cond:
            self.running = False
            ok = self.cond.wait_for(lambda: self.busy == 0, timeout or self.timeout + 15)
        assert ok, f"{self.busy} worker(s) still in a call after {timeout or self.timeout + 15:.0f} s"

    def resume(self) -> None:
        with self.cond:
            self.running = True

    def burst(self, then: Callable[[], None], delay: float, timeout: float = 60.0) -> bool:
        """Every worker sends its next call (a write) at the same moment; ``then()`` is called ``delay`` seconds
        after they were let go (a fault timed to find many writes in flight). When the workers cannot all be
        gathered within ``timeout`` (calls still waiting), ``then()`` is called without a burst; returns whether
        there was one."""
        with self.cond:
            self.running = False
            idle = self.cond.wait_for(lambda: self.busy == 0, timeout)
            if not idle:
                self.running = True
        if not idle:
            then()
            return False
        go = threading.Event()
        with self.cond:
            self.burst_id += 1
            self.burst_go, self.burst_waiting = go, 0
            self.running = True
            self.cond.wait_for(lambda: self.burst_waiting == len(self.threads), 10)
        go.set()
        time.sleep(delay)  # times the fault after the burst (not a synchronisation)
        then()
        return True

    def stop(self) -> None:
        """Stops the workers; one still in a call after the client timeout is left to finish (its call, if it
        ends, is still recorded; unanswered, it is simply not in the history: as good as unknown)."""
        try:
            self.pause()
        except AssertionError as exc:
            print(f"nemesis: {exc}", flush=True)
        self.stopping.set()
        for t in self.threads:
            t.join(5)
        assert not self.failures, f"workers failed: {self.failures!r}"


# ---------------------------------------------------------------------------------------------------------
# Change events
# ---------------------------------------------------------------------------------------------------------


class EventPublisher:
    """``SET path {"n": n}`` events, each recorded when the broker acknowledges it (or fails it). ``start`` streams
    them at ``rate`` per second round robin over ``streams``; ``publish`` sends one more (a probe)."""

    def __init__(self, bootstrap: str, topic: str, history: History, streams: list[tuple[str, str]] = (),
                 rate: float = 4.0):
        self.topic, self.history, self.streams, self.rate = topic, history, list(streams), rate
        self.producer = confluent_kafka.Producer(client_config(bootstrap, **{
            "linger.ms": 0, "acks": "all", "enable.idempotence": True, "message.timeout.ms": 120_000,
            "log_level": 2}))
        self.lock = threading.Lock()
        self.next = 0
        self.pending: dict[int, dict] = {}
        self.done: dict[int, dict] = {}
        self.stopping = threading.Event()
        self.thread: Optional[threading.Thread] = None
        self.failure: Optional[BaseException] = None

    def publish(self, app: str, path: str, **extra) -> int:
        with self.lock:
            n = self.next
            self.next += 1
            record = {"type": "event", "n": n, "app": app, "path": path, "published": time.time(), "acked": None,
                      **extra}
            self.pending[n] = record
        payload = encode_change_event(app, path, "SET", json.dumps({"n": n}, separators=(",", ":")),
                                      event_id=uuid.uuid4().hex, timestamp_ms=int(time.time() * 1000))

        def delivered(err, msg, n=n) -> None:
            with self.lock:
                rec = self.pending.pop(n, None)
            if rec is None:
                return
            if err is None:
                rec.update(acked=time.time(), partition=msg.partition(), offset=msg.offset())
            else:
                rec["error"] = str(err)
            self.history.add(rec)
            with self.lock:
                self.done[n] = rec

        self.producer.produce(self.topic, key=app.encode(), value=payload, on_delivery=delivered)
        self.producer.poll(0)
        return n

    def acked(self, n: int) -> Optional[dict]:
        with self.lock:
            rec = self.done.get(n)
        return rec if rec and rec.get("acked") is not None else None

    def wait_acked(self, numbers: list[int], timeout: float = 60.0) -> list[dict]:
        def all_acked():
            self.producer.poll(0.1)
            with self.lock:
                failed = [self.done[n] for n in numbers if n in self.done and self.done[n].get("acked") is None]
            if failed:
                raise AssertionError(f"events not acknowledged: {failed}")
            return all(self.acked(n) for n in numbers)
        wait_for(all_acked, timeout=timeout, interval=0.05, what=f"{len(numbers)} event(s) acknowledged")
        return [self.acked(n) for n in numbers]

    def start(self) -> "EventPublisher":
        def run() -> None:
            try:
                k = 0
                next_at = time.monotonic()
                while not self.stopping.is_set():
                    if self.streams:
                        app, path = self.streams[k % len(self.streams)]
                        self.publish(app, path)
                        k += 1
                    self.producer.poll(0)
                    next_at += 1.0 / self.rate
                    self.stopping.wait(max(0.0, next_at - time.monotonic()))
            except BaseException as exc:  # noqa: BLE001 - reported by stop()
                self.failure = exc
        self.thread = threading.Thread(target=run, name="publisher", daemon=True)
        self.thread.start()
        return self

    def stop(self, flush_timeout: float = 60.0) -> None:
        """Stops streaming; waits for every event's acknowledgement or failure; records the others as never
        acknowledged."""
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(10)
        self.producer.flush(flush_timeout)
        with self.lock:
            left, self.pending = list(self.pending.values()), {}
        for rec in left:
            rec["error"] = f"neither acknowledged nor failed within {flush_timeout:.0f} s"
            self.history.add(rec)
        if self.failure:
            raise self.failure


# ---------------------------------------------------------------------------------------------------------
# Notifications
# ---------------------------------------------------------------------------------------------------------


class NotificationCollector:
    """Copies the fake FCM's requests for the run's tokens into the history (``collect``; ``start`` does it every
    few seconds, so that the fake's bounded memory of requests never drops one)."""

    def __init__(self, fake_state, history: History, tokens: set[str]):
        self.state, self.history, self.tokens = fake_state, history, set(tokens)
        self.lock = threading.Lock()
        self.seen = fake_state.snapshot()["send_count"]
        self.by_token: dict[str, list[dict]] = {}
        self.stopping = threading.Event()
        self.thread: Optional[threading.Thread] = None
        self.last_new = time.monotonic()

    def collect(self) -> int:
        with self.lock:
            snap = self.state.snapshot()
            count, sends = snap["send_count"], snap["sends"]
            new = count - self.seen
            if new <= 0:
                if new < 0:  # the fake was reset (another test): start over from what it holds
                    self.seen = count
                return 0
            fresh = sends[-new:] if new <= len(sends) else sends
            if new > len(sends):
                self.history.add({"type": "warning", "time": time.time(),
                                  "message": f"{new - len(sends)} fake FCM requests dropped before collection"})
            self.seen = count
            added = 0
            for s in fresh:
                document = s.get("json") or {}
                message = document.get("message") or {}
                token = s.get("token") or message.get("token")
                if token not in self.tokens:
                    continue
                rec = {"type": "notification", "time": s.get("time"), "token": token, "status": s.get("status"),
                       "data": message.get("data")}
                self.history.add(rec)
                self.by_token.setdefault(token, []).append(rec)
                added += 1
            if added:
                self.last_new = time.monotonic()
            return added

    def got(self, token: str, n: int) -> bool:
        with self.lock:
            return any(r.get("status") == 200 and checker.notified_n(r.get("data")) == n
                       for r in self.by_token.get(token, []))

    def start(self, interval: float = 3.0) -> "NotificationCollector":
        def run() -> None:
            while not self.stopping.wait(interval):
                self.collect()
        self.thread = threading.Thread(target=run, name="collector", daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(10)
        self.collect()

    def wait_quiet(self, seconds: float = 3.0, timeout: float = 20.0) -> None:
        """Until no new request for the run's tokens arrived for ``seconds`` (bounded)."""
        def quiet() -> bool:
            self.collect()
            return time.monotonic() - self.last_new >= seconds
        try:
            wait_for(quiet, timeout=timeout, interval=0.25, what="the fake FCM quiet")
        except WaitTimeout:
            pass  # still busy: the checker judges what arrived


def wait_notified(collector: NotificationCollector, pairs: list[tuple[str, int]], timeout: float) -> list:
    """Waits (bounded, no failure) until each (token, n) was notified; returns the ones that were not."""
    def left():
        collector.collect()
        return [p for p in pairs if not collector.got(*p)]
    try:
        wait_for(lambda: not left(), timeout=timeout, interval=0.5, what="notifications")
        return []
    except WaitTimeout:
        return left()


# ---------------------------------------------------------------------------------------------------------
# Replicas: slots, processes, polls
# ---------------------------------------------------------------------------------------------------------


class Slot:
    """One replica across restarts: its ``Gateway`` (same port and configuration), every process it ran."""

    def __init__(self, gateway: Gateway, history: History):
        self.gateway, self.history = gateway, history
        self.name = gateway.name
        self.procs: list[ManagedProcess] = []
        self.expected: dict[int, str] = {}
        self.forced: set[int] = set()
        self.recorded: set[int] = set()
        self.lock = threading.Lock()
        self.up = False  # started and not ended by the nemesis (it may be frozen)
        self.frozen = False

    def adopt(self) -> None:
        """The gateway's current process (already started)."""
        proc = self.gateway.proc
        self.procs.append(proc)
        self.up = True
        self.history.add({"type": "process", "replica": self.name, "pid": proc.pid, "event": "start",
                          "time": time.time()})

    def start(self) -> None:
        self.gateway.start(wait_ready=False)
        self.adopt()

    @property
    def proc(self) -> ManagedProcess:
        return self.gateway.proc

    def expect_exit(self, cause: str) -> None:
        with self.lock:
            self.expected[self.proc.pid] = cause

    def record_exits(self) -> None:
        for proc in self.procs:
            rc = proc.popen.poll() if proc.popen else None
            if rc is None:
                continue
            with self.lock:
                if proc.pid in self.recorded:
                    continue
                self.recorded.add(proc.pid)
                cause = self.expected.get(proc.pid)
                forced = proc.pid in self.forced
            self.history.add({"type": "process", "replica": self.name, "pid": proc.pid, "event": "exit",
                              "time": time.time(), "returncode": rc, "expected": cause is not None, "cause": cause,
                              "forced": forced})
            if cause is None:
                self.up = False

    def signal(self, sig: int) -> None:
        self.proc.signal(sig)

    def end(self, cause: str, grace: float) -> Optional[int]:
        """SIGTERM (``cause`` term or teardown) and wait ``grace``, then SIGKILL; or SIGKILL at once (kill).
        Returns the exit status (None: killed after the grace)."""
        proc = self.proc
        if proc is None or proc.popen is None:
            return None
        self.expect_exit(cause)
        if self.frozen:
            proc.signal(signal.SIGCONT)
            self.frozen = False
        rc = None
        if cause == "kill":
            proc.signal(signal.SIGKILL)
            proc.wait(10)
        else:
            proc.signal(signal.SIGTERM)
            rc = proc.wait(grace)
            if rc is None and proc.alive():
                with self.lock:
                    self.forced.add(proc.pid)
                proc.signal(signal.SIGKILL)
                proc.wait(10)
        self.up = False
        self.record_exits()
        proc.stop(grace=1)  # closes its files (it has exited)
        return rc

    def log_text(self) -> list[tuple[int, str]]:
        out = []
        for proc in self.procs:
            for path in (proc.stdout_path, proc.stderr_path):
                try:
                    with open(path, "rb") as f:
                        out.append((proc.pid, f.read().decode("utf-8", "replace")))
                except OSError:
                    pass
        return out

    def record_fatal_lines(self, limit: int = 20) -> int:
        found = 0
        for pid, text in self.log_text():
            count = 0
            for line in text.splitlines():
                if checker.crash_line(line):
                    count += 1
                    if count <= limit:
                        self.history.add({"type": "log", "replica": self.name, "pid": pid, "line": line[:1000]})
            found += count
        return found


def partition_states(metrics_text: str) -> list[tuple[int, str, str]]:
    out = []
    for s in parse_prometheus(metrics_text):
        if s.name == "pushgateway_partition_state" and s.value == 1:
            labels = dict(part.split("=", 1) for part in s.labels.strip("{}").split(",") if "=" in part)
            labels = {k: v.strip('"') for k, v in labels.items()}
            out.append((int(labels.get("partition", -1)), labels.get("role", ""), labels.get("state", "")))
    return out


class OwnershipPoller:
    """A thread per slot polling ``/metrics`` and ``/readyz`` (1 s time limit each) every ``interval``; every
    answer (or its absence) is recorded. ``latest`` keeps each slot's last."""

    def __init__(self, slots: list[Slot], history: History, interval: float = 0.5):
        self.slots, self.history, self.interval = slots, history, interval
        self.latest: dict[str, dict] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []

    def poll_once(self, slot: Slot) -> dict:
        rec = {"type": "ownership", "replica": slot.name, "time": time.time(), "ok": False, "ready": [],
               "loading": [], "states": [], "readyz": None}
        port = slot.gateway.http_port
        metrics = call(port, "GET", "/metrics", timeout=1.0, limit=None)
        if metrics.status == 200:
            try:
                states = partition_states(metrics.body)
            except AssertionError:
                states = []
            steady = [x.value for x in parse_prometheus(metrics.body) if x.name == "pushgateway_consumer_group_steady"]
            rec["group_steady"] = bool(steady[0]) if steady else None
            rec.update(ok=True, states=[f"{p}:{r}:{s}" for p, r, s in sorted(states)],
                       ready=sorted(p for p, r, s in states if r == "owner" and s == "ready"),
                       loading=sorted(p for p, r, s in states if s == "loading"))
            readyz = call(port, "GET", "/readyz", timeout=1.0)
            rec["readyz"] = readyz.status
        else:
            rec["error"] = metrics.error or metrics.status
        self.history.add(rec)
        with self.lock:
            self.latest[slot.name] = rec
        return rec

    def start(self) -> "OwnershipPoller":
        for slot in self.slots:
            def run(slot=slot) -> None:
                while not self.stopping.is_set():
                    started = time.monotonic()
                    self.poll_once(slot)
                    self.stopping.wait(max(0.0, self.interval - (time.monotonic() - started)))
            t = threading.Thread(target=run, name=f"poll-{slot.name}", daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def stop(self) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(5)

    def fresh(self, max_age: float = 2.5) -> dict[str, dict]:
        now = time.time()
        with self.lock:
            return {n: r for n, r in self.latest.items() if r["ok"] and now - r["time"] <= max_age}

    def covered(self, partitions: int) -> bool:
        union = set().union(*(set(r["ready"]) for r in self.fresh().values())) if self.fresh() else set()
        return union >= set(range(partitions))

    def stable(self, partitions: int, names: list[str]) -> bool:
        """Every named replica answers, is ready, and every partition has exactly one ready owner among them."""
        fresh = self.fresh()
        if any(n not in fresh or fresh[n]["readyz"] != 200 for n in names):
            return False
        claims = sorted(p for n in names for p in fresh[n]["ready"])
        return claims == list(range(partitions))

    def describe(self) -> str:
        with self.lock:
            return "; ".join(f"{n}: ok={r['ok']} ready={r['ready']} loading={r['loading']} readyz={r['readyz']}"
                             for n, r in sorted(self.latest.items()))


class ProcessWatcher:
    """Notices (every 0.2 s) a replica process that exited, and records it (expected or not)."""

    def __init__(self, slots: list[Slot]):
        self.slots = slots
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="process-watcher", daemon=True)

    def _run(self) -> None:
        while not self.stopping.wait(0.2):
            for slot in self.slots:
                slot.record_exits()

    def start(self) -> "ProcessWatcher":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(5)
        for slot in self.slots:
            slot.record_exits()


# ---------------------------------------------------------------------------------------------------------
# The nemesis
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Params:
    seed: int
    seconds: float = 120.0  # of faults
    replicas: int = 3
    partitions: int = 6
    v2_keys_per_app: int = 3
    v1_keys_per_app: int = 2
    event_rate: float = 4.0  # change events per second, over all (app, path)
    pace: tuple[float, float] = (0.3, 1.2)  # each worker's pause between calls
    client_timeout: float = 30.0
    coverage_bound: float = 60.0
    settle_bound: float = 45.0  # after the faults: waits for a stable fleet, for the notifications, for the probes
    dual_bound: float = 15.0
    session_timeout_ms: int = 6000
    drain_seconds: int = 5
    # kill (-9, then restart), stop (SIGSTOP past the session timeout), term (SIGTERM, then restart), broker-freeze;
    # "none" (no fault) makes a control run.
    weights: dict = field(default_factory=lambda: {"kill": 3, "stop": 3, "term": 2, "broker-freeze": 2})
    kill_down: tuple[float, float] = (1.0, 5.0)
    term_down: tuple[float, float] = (1.0, 3.0)
    stop_hold: tuple[float, float] = (8.0, 12.0)  # past the session timeout
    freeze_hold: tuple[float, float] = (2.0, 4.5)  # under it (see README: Tansu and expired sessions)
    calm: tuple[float, float] = (2.0, 8.0)
    burst: float = 0.5  # chance that a kill/stop/term strikes a few ms after every worker sent a write at once
    eager: float = 0.25  # chance that the next fault does not wait for the fleet to recover
    rdkafka_debug: str = ""  # e.g. "cgrp": librdkafka's consumer-group debug log in the replicas' stderr


class Nemesis:
    def __init__(self, params: Params, slots: list[Slot], broker, history: History, rng: random.Random,
                 stopping: threading.Event, t0: float, workload: Optional[Workload] = None):
        self.params, self.slots, self.broker, self.history, self.rng = params, slots, broker, history, rng
        self.stopping, self.t0, self.workload = stopping, t0, workload
        self.active: Optional[dict] = None

    def hold(self, bounds: tuple[float, float]) -> None:
        self.stopping.wait(self.rng.uniform(*bounds))  # holds the fault for its duration

    def fault(self) -> dict:
        kinds = list(self.params.weights)
        kind = self.rng.choices(kinds, weights=[self.params.weights[k] for k in kinds])[0]
        slot = self.rng.choice([s for s in self.slots if s.up] or self.slots)
        target = "broker" if kind == "broker-freeze" else slot.name
        record = {"type": "fault", "kind": kind, "target": target, "start": time.time(), "end": None}
        self.active = record
        burst = kind in ("kill", "stop", "term") and self.workload is not None and self.rng.random() < self.params.burst
        delay = self.rng.uniform(0.002, 0.010)

        def strike(action: Callable[[], None]) -> None:
            def timed() -> None:
                record["start"] = time.time()
                action()
            if burst:
                record["burst"] = self.workload.burst(timed, delay)
            else:
                timed()
            print(f"nemesis: {kind} {target} at {record['start'] - self.t0:+.1f} s"
                  + (" (after a burst of writes)" if record.get("burst") else ""), flush=True)

        if kind == "kill":
            strike(lambda: slot.end("kill", 0))
            self.hold(self.params.kill_down)
            slot.start()
        elif kind == "term":
            strike(lambda: record.update(returncode=slot.end("term", self.params.drain_seconds + 10)))
            self.hold(self.params.term_down)
            slot.start()
        elif kind == "stop":
            def freeze() -> None:
                slot.signal(signal.SIGSTOP)
                slot.frozen = True
            strike(freeze)
            self.hold(self.params.stop_hold)
            slot.signal(signal.SIGCONT)
            slot.frozen = False
        elif kind == "none":  # a control run: the same workload, no fault
            self.hold(self.params.calm)
            self.active = None
            return record
        elif kind == "broker-freeze":
            print(f"nemesis: {kind} at {record['start'] - self.t0:+.1f} s", flush=True)
            self.broker.freeze()
            self.hold(self.params.freeze_hold)
            self.broker.thaw()
        record["end"] = time.time()
        self.active = None
        self.history.add(record)
        return record

    def heal_all(self) -> None:
        """Ends a fault cut short (an exception): thaws, continues, and records it."""
        if getattr(self.broker, "frozen", False):
            self.broker.thaw()
        for slot in self.slots:
            if slot.frozen:
                slot.signal(signal.SIGCONT)
                slot.frozen = False
        if self.active is not None:
            self.active["end"] = time.time()
            self.history.add(self.active)
            self.active = None


# ---------------------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------------------


def make_keys(apps: list[str], params: Params) -> tuple[list[Key], list[Key], list[tuple[str, str]]]:
    """Per app: v2 keys on /nem/v2, v1 keys on /nem/v1, one stable subscription on each; the (app, path)
    streams of events."""
    keys, stables, streams = [], [], []
    for a, app in enumerate(apps):
        for api, count in (("v2", params.v2_keys_per_app), ("v1", params.v1_keys_per_app)):
            path = f"/nem/{api}"
            streams.append((app, path))
            for i in range(count):
                name = f"a{a}-{api}-{i}"
                keys.append(Key(name, api, app, path, fcm_token(name), uid=f"u-{name}"))
            stables.append(Key(f"a{a}-{api}-stable", "v2", app, path, fcm_token(f"a{a}{api}stable"),
                               uid="stable"))
    return keys, stables, streams


def create_stable(history: History, stable: Key, replicas: list[Gateway], timeout: float = 60.0) -> dict:
    """Creates a stable subscription (201), repeating after 503; records it with the time it was acknowledged."""
    deadline = time.monotonic() + timeout
    k = 0
    while True:
        replica = replicas[k % len(replicas)]
        k += 1
        method, path, body, headers = stable.request("create")
        answer = call(replica.http_port, method, path, body, headers, 30)
        if answer.status == 201:
            return history.add(stable.record("stable", created=answer.end))
        assert answer.status in (503, None) and time.monotonic() < deadline, (
            f"stable subscription {stable.name} through {replica.name}: {answer.status} {answer.error} {answer.body}")
        time.sleep(0.2)  # a client's backoff before trying again


def probe_paths(publisher: EventPublisher, collector: NotificationCollector, streams: list[tuple[str, str]],
                witnesses: dict[tuple[str, str], list[str]], phase: str, timeout: float = 60.0) -> list:
    """Reads by effect: one probe event per (app, path); waits until the witnesses (stable subscriptions) of each
    path have it, then until the deliveries are quiet. Returns the (token, n) that never arrived."""
    numbers = [publisher.publish(app, path, probe=True, phase=phase) for app, path in streams]
    acked = publisher.wait_acked(numbers, timeout=timeout)
    pairs = [(token, e["n"]) for e in acked for token in witnesses.get((e["app"], e["path"]), [])]
    missing = wait_notified(collector, pairs, timeout)
    collector.wait_quiet()
    checked = time.time()
    for n in numbers:
        publisher.history.add({"type": "probe", "n": n, "checked": checked})
    return missing


def run(params: Params, workdir: str, broker, fake, history_path: Optional[str] = None,
        extra_properties: Optional[dict] = None) -> tuple[str, checker.Report]:
    """The whole run on ``broker`` (a FaultyTansu, started) and ``fake`` (harness.FakeFCM, started); returns the
    history's path and the checker's report."""
    from harness import Stack  # noqa: PLC0415 - pytest's import path
    from kafka_util import Publisher  # noqa: PLC0415

    rng = random.Random(params.seed)
    os.makedirs(workdir, exist_ok=True)
    history_path = history_path or os.path.join(workdir, f"nemesis-{params.seed}.jsonl")
    history = History(history_path)
    t0 = time.time()
    history.add({"type": "meta", "started": t0, "seed": params.seed, "partitions": params.partitions,
                 "params": {k: v for k, v in params.__dict__.items()}})
    print(f"nemesis: seed {params.seed}, {params.seconds:.0f} s of faults, history {history_path}", flush=True)

    account = fake.service_account_file("nemesis")
    apps = apps_on_partitions(f"nem{uuid.uuid4().hex[:4]}", params.partitions)
    keys, stables, streams = make_keys(apps, params)
    kafka_publisher = Publisher(broker.bootstrap)
    stack = Stack(workdir, broker, kafka_publisher, fake, name="nemesis", partitions=params.partitions,
                  extra_apps={app: app_settings(account) for app in apps})
    properties = {"session.timeout.ms": str(params.session_timeout_ms),
                  "heartbeat.interval.ms": str(max(500, params.session_timeout_ms // 6))}
    if params.rdkafka_debug:
        properties["debug"] = params.rdkafka_debug
        # librdkafka's debug lines are logged at debug level.
        stack.config["logging"]["level"] = "debug"
    properties.update(extra_properties or {})
    stack.config["kafka"]["properties"].update(properties)
    stack.config["shutdown"] = {"drainSeconds": params.drain_seconds}

    slots: list[Slot] = []
    stopping = threading.Event()
    nemesis: Optional[Nemesis] = None
    workload = publisher = collector = poller = watcher = None
    try:
        gateways = []
        for i in range(params.replicas):
            config = copy.deepcopy(stack.config)
            config["http"]["port"] = free_port()
            gateways.append(Gateway(stack.workdir, config=config, name=f"replica{i}"))
        for g in gateways:
            slot = Slot(g, history)
            slot.start()
            slots.append(slot)
        watcher = ProcessWatcher(slots).start()
        poller = OwnershipPoller(slots, history).start()
        names = [s.name for s in slots]
        wait_for(lambda: poller.stable(params.partitions, names), timeout=90, interval=0.25,
                 what="the replicas ready, every partition owned once", on_timeout=poller.describe)
        print(f"nemesis: {len(slots)} replicas ready at {time.time() - t0:+.1f} s", flush=True)

        for key in keys:
            history.add(key.record())
        witnesses: dict[tuple[str, str], list[str]] = {}
        for stable in stables:
            create_stable(history, stable, [s.gateway for s in slots])
            witnesses.setdefault((stable.app, stable.path), []).append(stable.token)

        collector = NotificationCollector(fake.server.state, history,
                                          {k.token for k in keys} | {s.token for s in stables}).start()
        publisher = EventPublisher(broker.bootstrap, stack.topics.changes, history, streams, params.event_rate).start()
        workload = Workload(keys, history, lambda: [s.gateway for s in slots if s.up], params.seed,
                            params.client_timeout, params.pace).start()
        stopping.wait(5)  # the workload warms up before the first fault

        nemesis = Nemesis(params, slots, broker, history, rng, stopping, t0, workload)
        faults_until = time.time() + params.seconds
        while time.time() < faults_until:
            record = nemesis.fault()
            if record["end"] is None:
                continue
            if rng.random() >= params.eager:
                try:
                    wait_for(lambda: poller.covered(params.partitions), timeout=params.coverage_bound, interval=0.25,
                             what="every partition owned and loaded")
                    print(f"nemesis: covered {time.time() - record['end']:.1f} s after the heal", flush=True)
                except WaitTimeout:
                    print(f"nemesis: NOT covered {params.coverage_bound:.0f} s after the heal: {poller.describe()}",
                          flush=True)
            stopping.wait(rng.uniform(*params.calm))  # paces the faults
        history.add({"type": "phase", "name": "faults-end", "time": time.time()})
        print(f"nemesis: faults ended at {time.time() - t0:+.1f} s", flush=True)

        try:
            wait_for(lambda: poller.stable(params.partitions, names), timeout=params.settle_bound, interval=0.25,
                     what="the fleet stable after the faults", on_timeout=poller.describe)
        except WaitTimeout as exc:
            print(f"nemesis: {exc}", flush=True)
        workload.stop()
        publisher.stop()
        history.add({"type": "phase", "name": "quiet", "time": time.time()})
        print(f"nemesis: quiet at {time.time() - t0:+.1f} s ({workload.calls} calls, {publisher.next} events)",
              flush=True)

        # Every acknowledged event reaches every stable subscription (allowing time after the faults).
        with publisher.lock:
            acked = [r for r in publisher.done.values() if r.get("acked") is not None]
        pairs = [(token, e["n"]) for e in acked for token in witnesses.get((e["app"], e["path"]), [])]
        missing = wait_notified(collector, pairs, timeout=params.settle_bound)
        if missing:
            print(f"nemesis: {len(missing)} notifications of stable subscriptions still missing", flush=True)
        # The final state: reads by effect (every key), and v2 reads through every replica.
        probe_paths(publisher, collector, streams, witnesses, phase="final", timeout=params.settle_bound / 2)
        def final_reads(key: Key) -> None:  # one thread per key: each key's reads stay one after the other
            for slot in slots:
                if slot.up:
                    do_op(history, key, "get", slot.gateway, params.client_timeout, phase="final")
        readers = [threading.Thread(target=final_reads, args=(k,), daemon=True) for k in keys if k.api == "v2"]
        for t in readers:
            t.start()
        for t in readers:
            t.join(params.client_timeout * len(slots) + 5)
        collector.stop()
        # A rebalance may still be under way (a zombie member resolved late by the broker): the end state is the
        # one the fleet settles in, within the bound.
        try:
            wait_for(lambda: poller.stable(params.partitions, names), timeout=params.settle_bound, interval=0.25,
                     what="the fleet stable at the end", on_timeout=poller.describe)
        except WaitTimeout as exc:
            print(f"nemesis: {exc}", flush=True)
        after = time.time()  # one more poll of each replica after the final reads: the end state of the fleet
        wait_for(lambda: all(poller.latest.get(n, {}).get("time", 0) > after for n in names), timeout=10,
                 interval=0.1, what="a poll of every replica")
    finally:
        stopping.set()
        if nemesis is not None:
            nemesis.heal_all()
        for part in (workload, publisher, collector):
            if part is not None:
                try:
                    part.stop()
                except BaseException as exc:  # noqa: BLE001 - the teardown goes on
                    print(f"nemesis: stopping {type(part).__name__}: {exc!r}", flush=True)
        if poller is not None:
            poller.stop()
        if watcher is not None:
            watcher.stop()
        for slot in slots:
            if slot.up:
                slot.end("teardown", 15)
        for slot in slots:
            slot.record_exits()
            slot.record_fatal_lines()
        kafka_publisher.close()
        history.close()
    report = checker.check(checker.load(history_path), coverage_bound=params.coverage_bound,
                           dual_bound=params.dual_bound)
    return history_path, report
