"""Several gateway replicas in one consumer group (issue 14): starting them, seeing who owns which partition,
measuring their memory, reading their logs; a light HTTP client for many concurrent API calls; a publisher that reports the
offset of every write; the gateway's JSON log lines.

The replicas share one ``Stack`` (its topics, group id, app settings directory and fake FCM): each is the
same configuration on its own HTTP port, as pods of one Deployment would be.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import http.client
import json
import threading
import time
import uuid
import zlib
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable, Optional

import confluent_kafka

from gateway import Gateway, parse_prometheus
from harness import Stack
from kafka_util import client_config, encode_change_event
from procutil import free_port, wait_for


def partition_of(app: str, partitions: int) -> int:
    """librdkafka's `consistent_random` partitioner for a non-empty key (the gateway's `kafka.partitioner`
    default, and confluent-kafka's): CRC-32 of the key modulo the partition count."""
    return zlib.crc32(app.encode("utf-8")) % partitions


def subscription_id(app: str, uid: str, kind: str, path: str, context: str, destination: str = "") -> str:
    """The v2 subscription id (SPEC §5): base64url of the first 16 bytes of SHA-256 over the length-prefixed
    (app, uid, kind, destination, path, context)."""
    material = bytearray(b"pushgateway-subscription-v2")
    for part in (app, uid, kind, destination, path, context):
        data = part.encode("utf-8")
        material += len(data).to_bytes(4, "big") + data
    return base64.urlsafe_b64encode(hashlib.sha256(material).digest()[:16]).rstrip(b"=").decode()


@dataclass
class Memory:
    """Resident memory of a process (/proc/<pid>/status), KiB: all of it (VmRSS) and its anonymous part
    (RssAnon: the heap, without the mapped binary and libraries)."""
    rss: int
    anon: int

    def __sub__(self, other: "Memory") -> "Memory":
        return Memory(self.rss - other.rss, self.anon - other.anon)

    def __str__(self) -> str:
        return f"RSS {self.rss / 1024:.1f} MiB (anonymous {self.anon / 1024:.1f} MiB)"


def memory(pid: int) -> Memory:
    fields = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            name, _, value = line.partition(":")
            fields[name] = value.split()
    return Memory(int(fields["VmRSS"][0]), int(fields["RssAnon"][0]))


def log_lines(gateway: Gateway, msg: Optional[str] = None) -> list[dict]:
    """The gateway's JSON log lines (stderr), those with message ``msg`` when given."""
    out = []
    for line in gateway.proc.stderr().splitlines():
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if msg is None or doc.get("msg") == msg:
            out.append(doc)
    return out


def gauge(gateway: Gateway, name: str, **labels: str) -> float:
    total = 0.0
    for s in parse_prometheus(gateway.metrics_text()):
        if s.name == name and all(f'{k}="{v}"' in s.labels for k, v in labels.items()):
            total += s.value
    return total


# ---------------------------------------------------------------------------------------------------------
# Replicas
# ---------------------------------------------------------------------------------------------------------


class Cluster:
    """Replicas of one stack. ``partitions`` must be the stack's topic partition count."""

    def __init__(self, stack: Stack, partitions: int):
        self.stack = stack
        self.partitions = partitions
        self.replicas: list[Gateway] = []
        self.reports: list[list] = []

    def report_to(self, item) -> None:
        """A failure of test ``item`` shows every replica's output (conftest's report hook)."""
        views = item.__dict__.setdefault("_e2e_stacks", [])
        self.reports.append(views)
        views.extend(SimpleNamespace(name=r.name, gateway=r) for r in self.replicas)

    def add(self, start: bool = True, wait_ready: bool = True) -> Gateway:
        config = copy.deepcopy(self.stack.config)
        config["http"]["port"] = free_port()
        replica = Gateway(self.stack.workdir, config=config, name=f"replica{len(self.replicas)}")
        self.replicas.append(replica)
        for views in self.reports:
            views.append(SimpleNamespace(name=replica.name, gateway=replica))
        if start:
            replica.start(wait_ready=wait_ready)
        return replica

    def start(self, count: int) -> list[Gateway]:
        """Starts ``count`` replicas at once, then waits for each to be ready."""
        started = [self.add(wait_ready=False) for _ in range(count)]
        for replica in started:
            replica.wait_ready()
        return started

    @property
    def live(self) -> list[Gateway]:
        return [r for r in self.replicas if r.proc is not None and r.proc.alive()]

    def stop(self) -> None:
        """Stops every replica (SIGTERM, then SIGKILL after the grace), all at once."""
        stopping = [threading.Thread(target=replica.stop) for replica in self.replicas]
        for t in stopping:
            t.start()
        for t in stopping:
            t.join(60)

    # -- ownership ------------------------------------------------------------------------------------------

    @staticmethod
    def owned_ready(replica: Gateway) -> set[int]:
        """The change partitions this replica owns and has loaded (``pushgateway_partition_state``)."""
        out = set()
        for s in parse_prometheus(replica.metrics_text()):
            if (s.name == "pushgateway_partition_state" and s.value == 1 and 'role="owner"' in s.labels
                    and 'state="ready"' in s.labels):
                out.add(int(s.labels.split('partition="')[1].split('"')[0]))
        return out

    def ownership(self, replicas: Optional[list[Gateway]] = None) -> dict[Gateway, set[int]]:
        return {r: self.owned_ready(r) for r in (replicas if replicas is not None else self.live)}

    def wait_stable(self, replicas: Optional[list[Gateway]] = None, timeout: float = 60.0,
                    balanced: bool = False) -> dict[Gateway, set[int]]:
        """Waits until every partition is owned and loaded by exactly one of ``replicas`` (default: the live
        ones), each owning some. Returns the ownership.

        ``balanced``: also until the replicas' counts differ by at most one, where the cooperative-sticky assignor
        ends. Before that a cooperative rebalance may still have a round to go (a joiner holding one partition
        while another is still being revoked for it), and a member that leaves then meets Tansu's group that never
        settles after its leader leaves mid-rebalance (tests/e2e/README.md): wait for it before stopping one."""
        def stable():
            group = replicas if replicas is not None else self.live
            owned = self.ownership(group)
            seen: list[int] = sorted(p for parts in owned.values() for p in parts)
            if seen != list(range(self.partitions)) or any(not parts for parts in owned.values()):
                return None
            counts = [len(parts) for parts in owned.values()]
            if balanced and max(counts) - min(counts) > 1:
                return None
            return owned

        def describe() -> str:
            try:
                return "ownership: " + repr({r.name: sorted(p) for r, p in self.ownership(replicas).items()})
            except Exception as exc:  # noqa: BLE001 - diagnostics only
                return f"ownership unknown: {exc!r}"

        return wait_for(stable, timeout=timeout, interval=0.25, what="a stable partition ownership",
                        on_timeout=describe)

    def owner_of(self, app: str, ownership: Optional[dict[Gateway, set[int]]] = None) -> Gateway:
        partition = partition_of(app, self.partitions)
        for replica, parts in (ownership or self.ownership()).items():
            if partition in parts:
                return replica
        raise AssertionError(f"no replica owns partition {partition} of app {app!r}")

    def tails(self) -> str:
        return "\n".join(r.tails() for r in self.replicas)


# ---------------------------------------------------------------------------------------------------------
# A light HTTP/1.1 client (keep-alive, one connection per thread): many API calls from Python threads
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


class Http:
    """``http.client`` over keep-alive connections, one per (thread, replica port)."""

    def __init__(self, timeout: float = 15.0):
        self.timeout = timeout
        self.local = threading.local()

    def _connection(self, port: int) -> http.client.HTTPConnection:
        pool = getattr(self.local, "pool", None)
        if pool is None:
            pool = self.local.pool = {}
        conn = pool.get(port)
        if conn is None:
            conn = pool[port] = http.client.HTTPConnection("127.0.0.1", port, timeout=self.timeout)
        return conn

    def request(self, replica: Gateway, method: str, path: str, body=None, headers: Optional[dict] = None) -> Answer:
        data = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) else body
        headers = dict(headers or {})
        if data is not None:
            headers.setdefault("Content-Type", "application/json")
        while True:
            reused = replica.http_port in getattr(self.local, "pool", {})
            conn = self._connection(replica.http_port)
            try:
                conn.request(method, path, body=data, headers=headers)
                response = conn.getresponse()
                payload = response.read()
                return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, payload)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # A kept-alive connection the server had closed: once more on a new one. A fresh connection
                # that fails is an error.
                conn.close()
                self.local.pool.pop(replica.http_port, None)
                if not reused:
                    raise
            except BaseException:
                conn.close()
                self.local.pool.pop(replica.http_port, None)
                raise


# ---------------------------------------------------------------------------------------------------------
# Writes with their offsets
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Write:
    n: int
    path: str
    op: str
    after: Optional[str]
    partition: int = -1
    offset: int = -1
    acked_at: float = 0.0


class OffsetPublisher:
    """Publishes change events (key = app id, the default partitioner) and records each one's partition and
    offset from the broker's delivery report."""

    def __init__(self, bootstrap: str):
        self.producer = confluent_kafka.Producer(client_config(bootstrap, **{"linger.ms": 0, "acks": "all"}))
        self.errors: list = []

    def publish(self, topic: str, app: str, write: Write, wait: bool = True) -> Write:
        def on_delivery(err, msg) -> None:
            if err is not None:
                self.errors.append(err)
                return
            write.partition, write.offset, write.acked_at = msg.partition(), msg.offset(), time.monotonic()

        value = encode_change_event(app, write.path, write.op, write.after, None, uuid.uuid4().hex,
                                    int(time.time() * 1000))
        self.producer.produce(topic, key=app.encode("utf-8"), value=value, on_delivery=on_delivery)
        if wait:
            self.producer.flush(15)
            assert not self.errors, f"produce failed: {self.errors}"
            assert write.offset >= 0, f"no delivery report for write {write.n}"
        else:
            self.producer.poll(0)
        return write

    def raw(self, topic: str, key: bytes, value: bytes) -> tuple[int, int]:
        """Publishes one record as it is; returns its (partition, offset)."""
        result: list = []
        self.producer.produce(topic, key=key, value=value,
                              on_delivery=lambda err, msg: result.append(err or (msg.partition(), msg.offset())))
        self.producer.flush(15)
        assert result and isinstance(result[0], tuple), f"produce failed: {result}"
        return result[0]

    def flush(self) -> None:
        left = self.producer.flush(15)
        assert left == 0 and not self.errors, f"{left} write(s) not delivered; errors: {self.errors}"

    def close(self) -> None:
        self.producer.flush(5)


class WriteStream:
    """A background thread publishing ``SET path {"n": i, ...}`` at ``rate`` per second until stopped; every
    write is acknowledged (its offset known) before the next. ``inject`` slips another write into the stream
    (the next one published)."""

    def __init__(self, publisher: OffsetPublisher, topic: str, app: str, path: str, rate: float = 20.0,
                 pad: int = 0):
        self.publisher, self.topic, self.app, self.path = publisher, topic, app, path
        self.interval = 1.0 / rate
        self.pad = pad
        self.writes: list[Write] = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.injected: list[tuple[Write, threading.Event]] = []
        self.thread = threading.Thread(target=self._run, name=f"writes-{app}", daemon=True)
        self.failure: Optional[BaseException] = None

    def value(self, n: int) -> str:
        return json.dumps({"n": n, "pad": "x" * self.pad}) if self.pad else json.dumps({"n": n})

    def _run(self) -> None:
        try:
            next_at = time.monotonic()
            n = 0
            while not self.stopping.is_set():
                with self.lock:
                    special = self.injected.pop(0) if self.injected else None
                if special is not None:
                    write, done = special
                    write.n = n
                else:
                    write, done = Write(n=n, path=self.path, op="SET", after=self.value(n)), None
                self.publisher.publish(self.topic, self.app, write)
                self.writes.append(write)
                if done is not None:
                    done.set()
                n += 1
                next_at += self.interval
                self.stopping.wait(max(0.0, next_at - time.monotonic()))
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.failure = exc

    def start(self) -> "WriteStream":
        self.thread.start()
        return self

    def inject(self, path: str, op: str, after: Optional[str] = None, timeout: float = 10.0) -> Write:
        """Publishes ``op`` at ``path`` as the stream's next write; returns it once acknowledged."""
        write, done = Write(n=-1, path=path, op=op, after=after), threading.Event()
        with self.lock:
            self.injected.append((write, done))
        assert done.wait(timeout) and write.offset >= 0, f"the injected {op} was not published: {self.failure!r}"
        return write

    def wait_writes(self, count: int, timeout: float = 30.0) -> None:
        wait_for(lambda: len(self.writes) >= count or self.failure, timeout=timeout, interval=0.02,
                 what=f"{count} writes to {self.app}{self.path}")
        if self.failure:
            raise self.failure

    def stop(self) -> list[Write]:
        self.stopping.set()
        self.thread.join(20)
        if self.failure:
            raise self.failure
        return list(self.writes)


class Background:
    """A function run on its own thread; ``join`` re-raises what it raised."""

    def __init__(self, target: Callable[[], None]):
        self.failure: Optional[BaseException] = None

        def run() -> None:
            try:
                target()
            except BaseException as exc:  # noqa: BLE001 - re-raised by join()
                self.failure = exc
        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"background work still running after {timeout}s"
        if self.failure is not None:
            raise self.failure


def run_parallel(count: int, work: Callable[[int], None], timeout: float) -> None:
    """Runs ``work(i)`` on ``count`` threads; re-raises the first failure."""
    failures: list[BaseException] = []

    def wrapped(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            failures.append(exc)

    threads = [threading.Thread(target=wrapped, args=(i,), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in threads):
        raise AssertionError(f"parallel work did not finish within {timeout}s")
    if failures:
        raise failures[0]
