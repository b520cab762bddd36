"""Helpers of the broker-fault tests (test_broker_faults.py, Benchmarks/broker-outage.py): a broker of the test's
own that can be frozen, killed and restarted on the same port, an S3 emulator for Tansu's ``s3://`` storage, a
stream of change events whose acknowledgements are recorded, probes of the API and of ``/readyz`` that record
every answer with its latency, and the accounting of notifications (missing, duplicated) and log lines.

Everything polls with bounds (procutil.wait_for); every process started here is a ManagedProcess, stopped by its
owner and killed at exit whatever happened.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import threading
import time
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

import confluent_kafka
import requests

from gateway import wakeup_url
from kafka_util import Tansu, client_config, encode_change_event, read_topic, tansu_binary
from payloads import raw_member
from procutil import ManagedProcess, free_port, wait_for


# ---------------------------------------------------------------------------------------------------------
# Broker with a storage that may outlive it, and faults
# ---------------------------------------------------------------------------------------------------------


class S3Emulator:
    """moto's S3 server (PyPI ``moto``, server mode) on a free loopback port, with one bucket: Tansu's
    ``s3://<bucket>/`` storage keeps a broker's data across a restart (one object per produce batch)."""

    def __init__(self, workdir: str, bucket: str = "tansu"):
        self.workdir = workdir
        self.bucket = bucket
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc: Optional[ManagedProcess] = None

    def start(self, timeout: float = 30.0) -> "S3Emulator":
        import sys
        self.proc = ManagedProcess("moto", [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                                            str(self.port)], self.workdir).start()

        def bucket_made() -> bool:
            if not self.proc.alive():
                raise AssertionError("moto server exited early:\n" + self.proc.tails())
            request = urllib.request.Request(f"{self.endpoint}/{self.bucket}", method="PUT")
            with urllib.request.urlopen(request, timeout=2) as response:
                return response.status == 200

        wait_for(bucket_made, timeout=timeout, interval=0.2, what=f"moto S3 bucket {self.bucket}",
                 on_timeout=self.proc.tails)
        return self

    def env(self) -> dict:
        """What Tansu's object store reads (the AWS SDK's usual variables; plain HTTP allowed)."""
        return {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "eu-west-2",
                "AWS_ENDPOINT": self.endpoint, "AWS_ALLOW_HTTP": "true"}

    def stop(self) -> None:
        if self.proc:
            self.proc.stop(grace=5)


class FaultyTansu(Tansu):
    """A Tansu broker of one test: ``memory://`` storage (lost when the process ends) or ``s3://`` over an
    :class:`S3Emulator` (kept). It can be frozen (SIGSTOP: connections stay open, nothing answers), thawed,
    killed (SIGKILL: connections refused until it is started again) and started again on the same port."""

    def __init__(self, workdir: str, s3: Optional[S3Emulator] = None):
        super().__init__(workdir)
        self.s3 = s3
        self.frozen = False

    def start(self, timeout: float = 30.0) -> "FaultyTansu":
        storage = f"s3://{self.s3.bucket}/" if self.s3 else "memory://tansu/"
        env = dict(os.environ, **(self.s3.env() if self.s3 else {}))
        self.proc = ManagedProcess(
            "tansu",
            [tansu_binary(), "broker", "--listener-url", self.url, "--advertised-listener-url", self.url,
             "--storage-engine", storage],
            self.workdir, env=env,
        ).start()

        def metadata_ok() -> bool:
            if not self.proc.alive():
                raise RuntimeError("tansu exited early:\n" + self.proc.tails())
            admin = confluent_kafka.admin.AdminClient(client_config(self.bootstrap, **{"socket.timeout.ms": 2000}))
            try:
                admin.list_topics(timeout=2)
                return True
            except confluent_kafka.KafkaException:
                return False

        wait_for(metadata_ok, timeout=timeout, interval=0.2, what=f"tansu metadata on {self.bootstrap}",
                 on_timeout=self.proc.tails)
        return self

    def freeze(self) -> None:
        self.proc.signal(signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        self.proc.signal(signal.SIGCONT)
        self.frozen = False

    def kill(self) -> None:
        """SIGKILL: the port refuses connections at once."""
        if self.frozen:
            self.thaw()
        self.proc.signal(signal.SIGKILL)
        self.proc.wait(10)
        self.proc.stop()

    def stop(self) -> None:
        if self.frozen:
            self.thaw()
        super().stop()


# ---------------------------------------------------------------------------------------------------------
# Observation
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Answer:
    at: float  # time.monotonic() when the call started
    status: int  # 0: no HTTP answer (connection error, client timeout)
    latency: float
    retry_after: Optional[str] = None
    body: str = ""
    device: str = ""  # the device a subscribe was for


class Recorder:
    """Background loops, each with its own thread, stopped together: the event stream and the probes."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def loop(self, name: str, body, interval: float) -> None:
        def run() -> None:
            try:
                while not self.stopping.is_set():
                    body()
                    self.stopping.wait(interval)
            except BaseException as exc:  # noqa: BLE001 - reported by stop()
                self.errors.append(exc)

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def stop(self, timeout: float = 40.0) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout)
        alive = [t.name for t in self.threads if t.is_alive()]
        assert not alive, f"recorder threads still running: {alive}"
        assert not self.errors, f"recorder threads failed: {self.errors!r}"


class EventStream:
    """Change events for one app path, published at a fixed rate: event n sets the node to ``{"n": n}``, so a
    value-mode notification says which event it is for. The publisher is idempotent (no duplicates of its own
    in the topic; not against a broker that loses its data, which makes an idempotent producer fatal) with a
    delivery timeout longer than any outage here; ``acked`` is the set of events the broker acknowledged."""

    def __init__(self, bootstrap: str, topic: str, app: str, path: str, idempotent: bool = True):
        self.topic, self.app, self.path = topic, app, path
        self.bootstrap = bootstrap
        self.producer = confluent_kafka.Producer(client_config(bootstrap, **{
            "linger.ms": 0, "acks": "all", "enable.idempotence": idempotent, "message.timeout.ms": 300_000,
            # Quiet while the broker is down (the test's log is pytest's).
            "log_level": 2,
            # A broker that lost its topics gets them back from the test, with their partition counts.
            "allow.auto.create.topics": False,
        }))
        self.lock = threading.Lock()
        self.next = 0
        self.acked: dict[int, float] = {}  # n -> monotonic time of the acknowledgement
        self.failed: dict[int, str] = {}
        self.published_at: dict[int, float] = {}

    def publish_one(self) -> None:
        with self.lock:
            n = self.next
            self.next += 1
        value = json.dumps({"n": n}, separators=(",", ":"))
        payload = encode_change_event(self.app, self.path, "SET", value, event_id=uuid.uuid4().hex,
                                      timestamp_ms=int(time.time() * 1000))

        def delivered(err, _msg, n=n) -> None:
            with self.lock:
                if err is None:
                    self.acked[n] = time.monotonic()
                else:
                    self.failed[n] = str(err)

        self.published_at[n] = time.monotonic()
        self.producer.produce(self.topic, key=self.app.encode(), value=payload, on_delivery=delivered)
        self.producer.poll(0)

    def poll(self) -> None:
        self.producer.poll(0)

    def finish(self, timeout: float) -> None:
        """Waits until every event published is acknowledged or failed."""
        left = self.producer.flush(timeout)
        assert left == 0, f"{left} change event(s) neither acknowledged nor failed within {timeout}s"

    def events_in_topic(self, min_records: int, timeout: float = 60.0) -> set[int]:
        """The ``n`` of every event of this stream found in the change topic."""
        found = set()
        for record in read_topic(self.bootstrap, self.topic, min_records=min_records, timeout=timeout, settle=1.0):
            if record.key != self.app.encode() or not record.value:
                continue
            text = record.value.decode("utf-8", "replace")
            start = text.find('{"n":')
            if start >= 0:
                found.add(json.JSONDecoder().raw_decode(text, start)[0]["n"])
        return found

    def acked_set(self) -> set[int]:
        with self.lock:
            return set(self.acked)


def notified_events(sends: list[dict], token: str) -> list[int]:
    """The ``n`` of every successful value-mode notification to ``token``, in send order."""
    out = []
    for send in sends:
        if send.get("status") != 200:
            continue
        body = send.get("body") or ""
        document = send.get("json") or json.loads(body)
        if (document.get("message") or {}).get("token") != token:
            continue
        data = json.loads(raw_member(body, "message", "data") or "{}")
        if data.get("t") != "value" or data.get("s") != "OK":
            continue
        out.append(json.loads(data["d"])["n"])
    return out


@dataclass
class Delivery:
    """Per device: events acknowledged but never notified, and notifications beyond one per event (of the
    events acknowledged; others are not counted)."""

    missing: dict[str, list[int]] = field(default_factory=dict)
    duplicates: int = 0
    notifications: int = 0

    @property
    def missing_count(self) -> int:
        return sum(len(v) for v in self.missing.values())


def account(sends: list[dict], tokens: list[str], acked: set[int]) -> Delivery:
    result = Delivery()
    for token in tokens:
        got = Counter(n for n in notified_events(sends, token) if n in acked)
        result.notifications += sum(got.values())
        missing = sorted(n for n in acked if got[n] == 0)
        if missing:
            result.missing[token] = missing
        result.duplicates += sum(count - 1 for count in got.values() if count > 1)
    return result


class ApiProbe:
    """Subscribes a new device (v1 ``PUT``, noData) to a probe path every ``interval``, and polls ``/readyz``;
    records every answer with its latency (no client time limit short of ``client_timeout``)."""

    def __init__(self, base: str, app: str, path: str, client_timeout: float = 90.0):
        self.base, self.app, self.path = base, app, path
        self.client_timeout = client_timeout
        self.subscribes: list[Answer] = []
        self.ready: list[Answer] = []
        self.session = requests.Session()
        self.ready_session = requests.Session()

    def subscribe_once(self) -> None:
        device = f"probe{uuid.uuid4().hex[:10]}:APA91b{uuid.uuid4().hex}"
        started = time.monotonic()
        try:
            r = self.session.put(wakeup_url(self.base, self.app, self.path, id=device, mode="noData"),
                                 timeout=self.client_timeout)
            answer = Answer(started, r.status_code, time.monotonic() - started, r.headers.get("Retry-After"),
                            r.text[:300], device)
        except requests.RequestException as exc:
            answer = Answer(started, 0, time.monotonic() - started, None, repr(exc)[:300], device)
        self.subscribes.append(answer)

    def subscribe_again(self, device: str) -> Answer:
        """The same subscribe once more (a v1 ``PUT`` is idempotent: what a client does after a ``504``)."""
        started = time.monotonic()
        r = self.session.put(wakeup_url(self.base, self.app, self.path, id=device, mode="noData"),
                             timeout=self.client_timeout)
        return Answer(started, r.status_code, time.monotonic() - started, r.headers.get("Retry-After"),
                      r.text[:300], device)

    def ready_once(self) -> None:
        started = time.monotonic()
        try:
            r = self.ready_session.get(self.base + "/readyz", timeout=5)
            answer = Answer(started, r.status_code, time.monotonic() - started, None, r.text[:300])
        except requests.RequestException as exc:
            answer = Answer(started, 0, time.monotonic() - started, None, repr(exc)[:300])
        self.ready.append(answer)

    def first_ready_after(self, t: float) -> Optional[float]:
        for answer in self.ready:
            if answer.at >= t and answer.status == 200:
                return answer.at
        return None


def summarise(answers: list[Answer]) -> str:
    """``204×12 (p50 0.01 s, max 0.03 s); 503×6 (…)``: answers by status with latencies."""
    by_status: dict[int, list[float]] = {}
    for answer in answers:
        by_status.setdefault(answer.status, []).append(answer.latency)
    parts = []
    for status in sorted(by_status):
        latencies = sorted(by_status[status])
        p50 = latencies[len(latencies) // 2]
        parts.append(f"{status}×{len(latencies)} (p50 {p50:.2f} s, max {latencies[-1]:.2f} s)")
    return "; ".join(parts) or "none"


# ---------------------------------------------------------------------------------------------------------
# The gateway's log
# ---------------------------------------------------------------------------------------------------------


def log_lines(stderr: str) -> list[dict]:
    """The gateway's JSON log lines (``logging.format: json``); other lines (librdkafka's raw output, if any)
    as ``{"raw": line}`` with no time."""
    out = []
    for line in stderr.splitlines():
        if not line.strip():
            continue
        try:
            document = json.loads(line)
            out.append(document if isinstance(document, dict) else {"raw": line})
        except ValueError:
            out.append({"raw": line})
    return out


def lines_between(lines: list[dict], start: datetime.datetime, end: datetime.datetime) -> list[dict]:
    """The lines logged between two wall-clock instants (UTC); lines without a time count as inside."""
    out = []
    for line in lines:
        ts = line.get("ts")
        if ts is None:
            out.append(line)
            continue
        at = datetime.datetime.fromisoformat(ts.replace("Z", "+00:00"))
        if at.tzinfo is None:  # the gateway writes UTC without a zone
            at = at.replace(tzinfo=datetime.timezone.utc)
        if start <= at <= end:
            out.append(line)
    return out


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def describe_lines(lines: list[dict], limit: int = 60) -> str:
    return "\n".join(json.dumps(line)[:400] for line in lines[:limit])


def recreate_topics(broker: Tansu, topics, partitions: int = 4) -> None:
    """Creates a stack's topics again, under the same names, on a broker that lost them (memory storage)."""
    broker.create_topic(topics.members, 1)
    for name in (topics.snapshots, topics.changes, topics.dlq, topics.state, topics.notifications):
        broker.create_topic(name, partitions)


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int = 4) -> dict[int, int]:
    """The consumer group's committed offsets of ``topic`` (without joining the group); -1001: none."""
    consumer = confluent_kafka.Consumer(client_config(bootstrap, **{"group.id": group, "enable.auto.commit": False}))
    try:
        found = consumer.committed([confluent_kafka.TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def replaced_producers(gateway) -> float:
    return sum(s.value for s in gateway.metrics()
               if s.name == "pushgateway_kafka_clients_replaced_total" and 'client="producer"' in s.labels)
