"""The hop between replicas is a trust boundary (issue 17, docs/SECURITY.md "The hop between replicas").

Two real replicas over a real broker. A *recording listener* plays a host an attacker would like a replica to
reach (a cloud metadata service, an internal admin port): it records every byte it receives. To see exactly
what a replica forwards, the tests also make the listener the "owner" of an app's partition with a members
record signed with the cluster secret (only the test and the replicas know it), published again every half
second so that it stays the latest claim.

- Request targets that are not a plain path (`*@host…`, `//host…`, absolute-form `http://host/…`, authority-form,
  dot-segments however encoded) get 4xx and never reach any other host.
- Calls for unknown apps, and admin calls without the admin token, are answered by the replica that got them.
- What is forwarded is rebuilt: an origin-form target of checked segments, the known query parameters, the
  Authorization header, a hop signature; no userinfo, no `Basic` header, no client-chosen x-push-* headers.
- One client call causes at most 2 forwarded attempts, and a hanging owner holds it only until the call's
  deadline (`http.ownerWaitMs`): a write then gets 504 (outcome unknown), never a second attempt; a 1xx from
  the owner is not relayed.
- Members records that are unsigned, badly signed, or signed with an address that is not a plain
  `http://host:port` change nothing and crash nothing, whatever their `updatedAtMs` (Int64.min, Int64.max).
- A call claiming to be forwarded without a valid hop signature is refused 403; a signed one replayed is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import struct
import threading
import time
import uuid
from typing import Optional

import confluent_kafka
import pytest

from cluster import Cluster, gauge, partition_of
from gateway import CLUSTER_SECRET, Gateway, parse_prometheus
from harness import APP
from kafka_util import client_config
from procutil import wait_for

PARTITIONS = 4
OWNER_WAIT_MS = 3000


# ---------------------------------------------------------------------------------------------------------
# A listener that records everything and answers as told
# ---------------------------------------------------------------------------------------------------------


class RecordingListener:
    """A TCP listener on loopback: records each connection's bytes; answers per ``mode``: ``ok`` (200),
    ``not_owner`` (503 with x-push-not-owner), ``hang`` (never answers), ``info`` (a 102 then nothing)."""

    def __init__(self, mode: str = "ok"):
        self.mode = mode
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.address = f"http://127.0.0.1:{self.port}"
        self.requests: list[bytes] = []
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.closing.is_set():
                conn.close()
                return
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        buffer = b""
        try:
            while not self.closing.is_set():
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
                while b"\r\n\r\n" in buffer:
                    head, _, rest = buffer.partition(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n")[1:]:
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            length = int(value.strip())
                    if len(rest) < length:
                        break
                    request, buffer = head + b"\r\n\r\n" + rest[:length], rest[length:]
                    with self.lock:
                        self.requests.append(request)
                    if self.mode == "ok":
                        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nleak")
                    elif self.mode == "not_owner":
                        body = b'{"status":"unavailable","message":"not the owner"}'
                        conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nx-push-not-owner: 1\r\nRetry-After: 1\r\n"
                                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                    elif self.mode == "info":
                        conn.sendall(b"HTTP/1.1 102 Processing\r\n\r\n")
                    # "hang": nothing
        except OSError:
            return

    def count(self) -> int:
        with self.lock:
            return len(self.requests)

    def close(self) -> None:
        self.closing.set()
        # shutdown wakes the accept blocked in the other thread: a plain close would leave the socket listening
        # (that thread's call holds it), and a later call forwarded here would hang instead of being refused.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        for conn in self.conns:
            try:
                conn.close()
            except OSError:
                pass


def raw_request(port: int, request: bytes, timeout: float = 15.0) -> tuple[int, bytes, float]:
    """Sends ``request`` as is on a new connection; returns the status, the whole answer and the seconds taken."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
        status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else 0
        return status, head + b"\r\n\r\n" + body, time.monotonic() - started


def request_line(method: str, target: str, headers: Optional[dict] = None, body: bytes = b"") -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "Host: gateway", "Connection: close", f"Content-Length: {len(body)}"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


# ---------------------------------------------------------------------------------------------------------
# Members records
# ---------------------------------------------------------------------------------------------------------


def member_signature(key: bytes, value: bytes, secret: str = CLUSTER_SECRET) -> bytes:
    """The `pgw-sig` header: HMAC-SHA-256 over a label and the length-prefixed key and value (ClusterKey)."""
    message = b"push-gateway member v1"
    for field in (key, value):
        message += struct.pack(">I", len(field)) + field
    return hmac.new(secret.encode(), message, hashlib.sha256).digest()


class Members:
    """Writes records to the stack's members topic."""

    def __init__(self, stack):
        self.topic = stack.topics.members
        self.group = stack.topics.group
        self.producer = confluent_kafka.Producer(client_config(stack.broker.bootstrap, **{"linger.ms": 0}))
        self.seq = 0

    def record(self, address: str, partitions: list[int], updated: int) -> bytes:
        self.seq += 1
        return json.dumps({"address": address, "group": self.group, "owned": partitions, "ready": partitions,
                           "seq": self.seq, "updatedAtMs": updated}, separators=(",", ":"), sort_keys=True).encode()

    def send(self, instance: str, value: bytes, signed: bool = True, signature: Optional[bytes] = None) -> None:
        key = instance.encode()
        headers = []
        if signed:
            headers.append(("pgw-sig", signature if signature is not None else member_signature(key, value)))
        self.producer.produce(self.topic, key=key, value=value, partition=0, headers=headers)
        self.producer.flush(10)


def until_forwarded(listener: RecordingListener, replica: Gateway, target: str, timeout: float = 30.0) -> None:
    """Calls ``replica`` (``PUT target``) until one call reaches ``listener`` (the view has the forged owner)."""
    before = listener.count()

    def reached() -> bool:
        try:
            raw_request(replica.http_port, request_line("PUT", target), timeout=OWNER_WAIT_MS / 1000 + 5)
        except OSError:
            pass
        return listener.count() > before
    wait_for(reached, timeout=timeout, interval=0.2, what=f"{replica.name} to forward to {listener.address}")


def call_through(listener: RecordingListener, replica: Gateway, request: bytes, tries: int = 10):
    """Sends ``request`` to ``replica`` until one call reaches ``listener``; returns that call's status, answer,
    seconds taken and how many times it reached ``listener``. The real owner's heartbeat (every 5 s) makes its own
    claim the latest in the members topic until the forged owner's next record (0.2 s): a call sent then is
    answered by the real owner, and says nothing of the hop to the forged one."""
    for _ in range(tries):
        before = listener.count()
        status, answer, took = raw_request(replica.http_port, request)
        reached = listener.count() - before
        if reached:
            return status, answer, took, reached
        assert status == 204, f"a call that did not reach {listener.address}: {answer[:300]!r}"
    raise AssertionError(f"{tries} calls, none reached {listener.address}")


def refused(replica: Gateway, reason: str) -> float:
    return gauge(replica, "pushgateway_cluster_messages_refused_total", kind="member", reason=reason)


# ---------------------------------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def pair(request, stack_factory):
    """Two replicas; the app's partition, its owner and the other replica."""
    stack = stack_factory(start=False, partitions=PARTITIONS)
    stack.config["http"]["ownerWaitMs"] = OWNER_WAIT_MS
    stack.config["admin"] = {"token": "admin-token-for-the-hop-test-0123"}
    cluster = Cluster(stack, PARTITIONS)
    cluster.report_to(request.node)
    try:
        cluster.start(2)
        ownership = cluster.wait_stable()
        owner = cluster.owner_of(APP, ownership)
        other = next(r for r in cluster.replicas if r is not owner)
        yield stack, cluster, owner, other, partition_of(APP, PARTITIONS)
    finally:
        cluster.stop()


class ForgedOwner:
    """Keeps a signed members record claiming ``partition`` for ``address`` the latest claim."""

    def __init__(self, members: Members, address: str, partition: int):
        self.members, self.address, self.partition = members, address, partition
        self.instance = "forged-" + uuid.uuid4().hex[:8]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.members.send(self.instance, self.members.record(self.address, [self.partition], int(time.time() * 1000)))
            self.stop.wait(0.2)

    def __enter__(self) -> "ForgedOwner":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(5)
        # Gone: a signed tombstone.
        self.members.send(self.instance, b"")


# ---------------------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(240)
def test_request_targets_never_reach_another_host(pair):
    stack, cluster, owner, other, partition = pair
    listener = RecordingListener("ok")
    try:
        token = "hoptoken" + uuid.uuid4().hex
        host = f"127.0.0.1:{listener.port}"
        cases = [
            ("PUT", f"*@{host}/base/{APP}/.wakeup/x?id={token}"),
            ("PUT", f"@{host}/base/{APP}/.wakeup/x?id={token}"),
            ("PUT", f"//{host}/base/{APP}/.wakeup/x?id={token}"),
            ("GET", f"/base/{APP}/.wakeup/../../../metrics"),
            ("PUT", f"/base/{APP}/.wakeup/../../../metrics?id={token}"),
            ("PUT", f"/base/{APP}/.wakeup/x/%2e%2e/%2E%2E/y?id={token}"),
            ("PUT", f"/base/{APP}/.wakeup/./x?id={token}"),
            ("GET", f"/datasync/v2/{APP}/subscriptions/alice/../../../../latest/meta-data/"),
            ("DELETE", f"/datasync/v2/{APP}/subscriptions/%2e%2e/x"),
        ]
        for replica in (other, owner):
            for method, target in cases:
                status, answer, _ = raw_request(replica.http_port, request_line(method, target))
                assert 400 <= status < 500, f"{method} {target} through {replica.name}: {answer[:300]!r}"
                assert b"leak" not in answer
            # The absolute-form and the authority-form name a host: refused before anything reads them.
            for target in (f"http://{host}/base/{APP}/.wakeup/x?id={token}", f"https://{host}/metrics"):
                status, answer, _ = raw_request(replica.http_port, request_line("PUT", target))
                assert status == 400 and b"origin-form" in answer, (target, answer[:300])
            status, answer, _ = raw_request(replica.http_port, request_line("PUT", host))  # the parser refuses it
            assert status == 400, answer[:300]
        # Even with the listener as the (forged, signed) owner of the app's partition, none of them is forwarded.
        with ForgedOwner(Members(stack), listener.address, partition):
            until_forwarded(listener, other, f"/base/{APP}/.wakeup/probe?id={token}")
            before = listener.count()
            for method, target in cases:
                status, answer, _ = raw_request(other.http_port, request_line(method, target))
                assert 400 <= status < 500, f"{method} {target}: {answer[:300]!r}"
            assert listener.count() == before, listener.requests[before:]
            status, _, _ = raw_request(other.http_port, request_line("PUT", f"http://169.254.169.254:80/base/{APP}/.wakeup/x?id={token}"))
            assert status == 400
            assert listener.count() == before, listener.requests[before:]
            # A call for an app the gateway does not serve, and an admin call without the admin token, are
            # answered here.
            status, _, _ = raw_request(other.http_port, request_line("PUT", f"/base/nosuchapp/.wakeup/x?id={token}"))
            assert status == 404
            status, _, _ = raw_request(other.http_port, request_line("GET", f"/admin/apps/{APP}"))
            assert status == 401
            status, _, _ = raw_request(other.http_port, request_line(
                "GET", f"/admin/apps/{APP}", {"Authorization": "Bearer wrong-token-0123456789"}))
            assert status == 403
            assert listener.count() == before, listener.requests[before:]
            # What a valid call becomes: the rebuilt target, the hop signature, no client-chosen hop headers.
            status, answer, _, _ = call_through(listener, other, request_line(
                "PUT", f"/base/{APP}/.wakeup/a%20b/c?mode=value&id={token}&evil=1",
                {"x-push-client-address": "6.6.6.6", "Authorization": "Basic c2VjcmV0", "x-push-hop": "forged"}))
            assert status == 200 and answer.endswith(b"leak")
            forwarded = listener.requests[-1]
            line, _, rest = forwarded.partition(b"\r\n")
            assert line == f"PUT /base/{APP}/.wakeup/a%20b/c?mode=value&id={token} HTTP/1.1".encode(), line
            headers = {h.partition(b":")[0].strip().lower(): h.partition(b":")[2].strip()
                       for h in rest.split(b"\r\n") if b":" in h}
            assert headers[b"host"] == host.encode()
            assert headers[b"x-push-client-address"] != b"6.6.6.6"
            assert headers[b"x-push-hop"].startswith(b"v1;t=")
            assert headers[b"authorization"] == b"Basic c2VjcmV0"  # the client's own header, passed as is
            assert b"6.6.6.6" not in forwarded and b"forged" not in forwarded
    finally:
        listener.close()


@pytest.mark.timeout(240)
def test_one_call_at_most_two_attempts_within_the_deadline(pair):
    stack, cluster, owner, other, partition = pair
    members = Members(stack)
    token = "hoptoken" + uuid.uuid4().hex
    # An owner that always says "not the owner": the call is tried at most twice, then 503.
    refusing = RecordingListener("not_owner")
    try:
        with ForgedOwner(members, refusing.address, partition):
            until_forwarded(refusing, other, f"/base/{APP}/.wakeup/probe?id={token}")
            for _ in range(5):
                before = refusing.count()
                status, answer, took = raw_request(other.http_port, request_line(
                    "PUT", f"/base/{APP}/.wakeup/x?id={token}", body=b""))
                attempts = refusing.count() - before
                assert attempts <= 2, f"{attempts} forwarded attempts for one call"
                assert status in (204, 503), answer[:300]
                assert took < OWNER_WAIT_MS / 1000 + 3
    finally:
        refusing.close()
    # An owner that never answers: one attempt, 504 for a write (its outcome is unknown), within the deadline.
    hanging = RecordingListener("hang")
    try:
        with ForgedOwner(members, hanging.address, partition):
            until_forwarded(hanging, other, f"/base/{APP}/.wakeup/probe?id={token}")
            status, answer, took, reached = call_through(hanging, other, request_line(
                "PUT", f"/base/{APP}/.wakeup/x?id={token}"))
            assert status == 504, answer[:300]
            assert b'"status":"timeout"' in answer
            assert reached == 1, "a write that may have reached the owner is never sent again"
            assert took < OWNER_WAIT_MS / 1000 + 3, f"held {took:.1f} s"
    finally:
        hanging.close()
    # An owner that answers 102 and nothing more: not relayed, bounded.
    informing = RecordingListener("info")
    try:
        with ForgedOwner(members, informing.address, partition):
            until_forwarded(informing, other, f"/base/{APP}/.wakeup/probe?id={token}")
            status, answer, took, _ = call_through(informing, other, request_line(
                "PUT", f"/base/{APP}/.wakeup/x?id={token}"))
            assert status >= 500, answer[:300]
            assert took < OWNER_WAIT_MS / 1000 + 3
    finally:
        informing.close()
    assert owner.proc.alive() and other.proc.alive()


@pytest.mark.timeout(240)
def test_forged_members_records_change_nothing_and_crash_nothing(pair, token_factory):
    stack, cluster, owner, other, partition = pair
    members = Members(stack)
    listener = RecordingListener("ok")
    try:
        base = refused(other, "unsigned"), refused(other, "bad_signature"), refused(other, "invalid")
        for updated in (-(2 ** 63), 2 ** 63 - 1, 0, int(time.time() * 1000)):
            value = members.record(listener.address, list(range(PARTITIONS)), updated)
            members.send("forged-unsigned", value, signed=False)
            members.send("forged-badsig", value, signature=b"\0" * 32)
            members.send("forged-othersecret", value, signature=member_signature(b"forged-othersecret", value, "x" * 40))
        for address in (f"http://user@127.0.0.1:{listener.port}", f"http://127.0.0.1:{listener.port}/path",
                        f"http://127.0.0.1:{listener.port}?q", f"ftp://127.0.0.1:{listener.port}", "http://127.0.0.1",
                        f"http://127.0.0.1:{listener.port}#f", f"http://[::1:{listener.port}"):
            members.send("forged-badaddress", members.record(address, list(range(PARTITIONS)), 2 ** 63 - 1))
        wait_for(lambda: refused(other, "unsigned") >= base[0] + 4 and refused(other, "bad_signature") >= base[1] + 8
                 and refused(other, "invalid") >= base[2] + 7, timeout=20, what="the forged records to be refused")
        # Calls through both replicas keep working, and nothing reaches the listener.
        for i in range(10):
            device = token_factory(f"forge{i}")
            for replica in (owner, other):
                replica.must_subscribe(APP, f"/forged{i}", device, "noData")
        assert listener.count() == 0
        assert owner.proc.alive() and other.proc.alive()
        for replica in (owner, other):
            assert replica.get("/readyz").status_code == 200
    finally:
        listener.close()


@pytest.mark.timeout(240)
def test_forwarded_calls_must_be_signed_and_are_accepted_once(pair):
    stack, cluster, owner, other, partition = pair
    token = "hoptoken" + uuid.uuid4().hex
    # A client saying it is a replica: refused.
    status, answer, _ = raw_request(owner.http_port, request_line(
        "PUT", f"/base/{APP}/.wakeup/x?id={token}", {"x-push-forwarded": "1", "x-push-client-address": "10.0.0.1"}))
    assert status == 403, answer[:300]
    status, answer, _ = raw_request(owner.http_port, request_line(
        "PUT", f"/base/{APP}/.wakeup/x?id={token}", {"x-push-forwarded": "1", "x-push-hop": "v1;t=1;n=abc;s=AAAA"}))
    assert status == 403, answer[:300]
    # A real forwarded call, captured by a forged owner and replayed to the real owner: accepted once (it never
    # reached it), refused the second time.
    listener = RecordingListener("ok")
    try:
        with ForgedOwner(Members(stack), listener.address, partition):
            until_forwarded(listener, other, f"/base/{APP}/.wakeup/replay?id={token}")
        captured = listener.requests[-1]
    finally:
        listener.close()
    first, answer, _ = raw_request(owner.http_port, captured.replace(b"Connection: Keep-Alive", b"Connection: close"))
    assert first == 204, answer[:300]
    second, answer, _ = raw_request(owner.http_port, captured)
    assert second == 403, answer[:300]
    assert gauge(owner, "pushgateway_cluster_messages_refused_total", kind="hop", reason="replayed") >= 1
