#!/usr/bin/env python3
"""End-to-end load test (SPEC §10): Kafka change events → gateway → FCM requests, all on this machine.

    python3 Benchmarks/load-test.py --rate 5000 --seconds 20          # (a) 5,000 notifications/s
    python3 Benchmarks/load-test.py --rate 10000 --seconds 20         # (b) 10,000 notifications/s
    python3 Benchmarks/load-test.py --backlog 30000                   # (c) drain a backlog of 30,000 events
                                                                      #     (× fan-out 10 = 300,000 notifications)
    ... --kafka-prop fetch.wait.max.ms=20    the gateway's consumer polls Tansu every 20 ms instead of 500 ms
    ... --fetch-wait-ms 20                   the same (the gateway's and the --observe consumer's fetch.wait.max.ms)
    ... --observe                            also time broker-only produce → consume (perturbs the run)
    ... --kind webhook                       webhook subscriptions instead of FCM devices (implies --tls;
                                             --webhook is the same)
    ... --kind webpush                       Web Push subscriptions (RFC 8291 encryption per message; implies --tls)
    ... --kind apns                          APNs device subscriptions (HTTP/2, ES256 provider token; implies --tls)
    ... --format v1                          webpush, apns: the subscriptions' data payload format (default v2)
    ... --quota N                            each app's fcm.maxSendsPerMinute (its FCM project's pace; default:
                                             the setting's default, 600,000); with --backlog the result compares
                                             the drain time with the quota's time (docs/DELIVERY.md, "Pacing")

Results and their reading: Benchmarks/README.md ("Load test").

Starts a Tansu broker (topics with 4 partitions), the fast fake FCM (Benchmarks LoadFakeFCM, h2c; built with
`swift build -c release --product LoadFakeFCM` in Benchmarks/ when missing) and the gateway (release binary,
PUSH_GATEWAY_BIN or .build/release/push-gateway) pointing at both; subscribes --devices devices in value mode,
--fanout per path, on --apps apps whose ids cover the 4 partitions; then publishes SET change events whose
value is {"ts": <produce time, ns since the epoch>} (one event → fan-out notifications):

- rate mode: at rate/fanout events per second, --warmup seconds first, then a --seconds measurement window;
- backlog mode: every event as fast as the producer goes, then the gateway drains them.

With --webhook the subscriptions are v2 `kind: "webhook"` ones (one uid per path, a context per subscriber) whose
destination is the fake behind the TLS front (`https://127.0.0.1:<front>/v1/projects/p<path number>/messages:send`: one per path, at most 200 subscriptions
per destination; the
fake counts it as a send and answers 200 at once), and the published value is the JSON string `ts":<ns>`, which
reaches the fake as `"v":"ts\":<ns>"` in the webhook body. Each app's `webhook.maxInFlightPerHost` is
min(--max-in-flight, 1000); all destinations are one host.

With --kind webpush the subscriptions are v2 `kind: "webpush"` ones (one uid per path), each a browser subscription
of its own whose endpoint is the fake behind the TLS front (`https://127.0.0.1:<front>/v1/projects/p<path
number>/messages:send?s=<k>`; one browser key pair and auth secret for all, generated once); each app's `webPush`
settings have a fresh VAPID key, private endpoints allowed, the front's CA, and `maxInFlightPerHost`
min(--max-in-flight, 1000). Every message is encrypted (RFC 8291: a P-256 key pair, an ECDH, HKDF and AES-GCM per
message; the VAPID header is signed once per origin and reused), so the fake cannot read `ts` from it: it counts
those sends as `no_ts`, latency is not measured (the result says so) and only CPU and throughput are reported.

With --kind apns the subscriptions are v2 `kind: "apns"` ones (one uid per path; the context a 64-hex-digit device
token unique per subscriber); the gateway's `apns.baseURL` is the TLS front; each app's `apns` settings have a fresh
P-256 auth key (PKCS#8), team TEAM123456, key KEY1234567, production, and the bundle id `com.example.load.<app>`, so
that each app is its own provider project as with FCM (`fcm:proj-<app>`): one admission scope, hence one delivery
lane, per app (--apns-one-topic: `com.example.load` for every app, one scope and one lane for all). The gateway POSTs
`/3/device/<token>` with `{"aps":{"content-available":1},"data":<data payload>}`; the fake answers 200 with an
`apns-id` (and the body `{}`: an empty one trips the nghttpx front, see LoadFakeFCM). In format v2 the data payload carries the event in an unsecured JWS, which the fake decodes to read `ts`.
APNs requests share the FCM HTTP client and `fcm.maxInFlightPerProject` (--max-in-flight) per project.

The published value is `{"ts":<ns>}` where the payload is v1 (FCM, --format v1) and the JSON string `ts":<ns>`
otherwise (webhook, webpush, apns in v2: the v2 event carries the value as JSON, where it appears as `ts\":<ns>`).

The fake FCM answers every send and measures now − ts (produce → provider request). Reported: sustained
notifications/s (median of the window's per-second counts; for a backlog, of the full seconds between the first
and the last send), exact p50/p90/p99 latency over the window, the CPU used by each process during it (from
/proc, in % of one core, and in µs of CPU per notification), and whether every expected notification arrived
(`complete`; a run where some did not exits with status 1: a backlog that makes no progress for 30 s ends the
wait). In rate mode, the gateway's own latency is read from its /metrics, scraped at the window's start and after
its last notification (bucket deltas, interpolated within a bucket like Prometheus' histogram_quantile):
`gateway_ms` is record fetched by the consumer's poll → provider request handed to the HTTP client
(pushgateway_gateway_latency_seconds, first attempts), `gateway_match_ms` fetched → queued for delivery, and
`rest_ms_estimate` the end-to-end quantile minus the gateway's (produce → fetched, i.e. the broker's wait, plus the
request's way through TLS to the fake; a difference of quantiles, so an estimate). One JSON result line at the end (also written to --json-out when given). Every process is stopped at the end; all waits are bounded.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import queue
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

import requests  # noqa: E402
import yaml  # noqa: E402
from confluent_kafka import Producer  # noqa: E402

from kafka_util import Tansu, Topics, encode_change_event  # noqa: E402
from procutil import free_port  # noqa: E402

FAST_GROUP_PROPERTIES = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}
PARTITIONS = 4
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cpu_ticks(pid: int) -> int:
    """utime + stime (+ children's) of a process, in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])


def thread_ticks(pid: int) -> dict:
    """{(tid, name): utime + stime} of every thread of a process."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
            fields = rest.split()
            out[(tid, head.split("(", 1)[1])] = int(fields[11]) + int(fields[12])
        except (OSError, IndexError):
            pass
    return out


def top_threads(a: dict, b: dict, seconds: float, n: int = 6) -> dict:
    """The `n` busiest threads between two thread_ticks snapshots, in % of one core, by thread name."""
    busy = sorted(((b[k] - a.get(k, 0), k) for k in b), reverse=True)[:n]
    return {f"{name}#{tid}": round(100.0 * d / CLK_TCK / seconds, 1) for d, (tid, name) in busy if d > 0}


def histogram_buckets(text: str, name: str) -> dict:
    """{le: cumulative count} of histogram `name` in a Prometheus text exposition, summed over its series."""
    out: dict = {}
    prefix = name + "_bucket{"
    for line in text.splitlines():
        if not line.startswith(prefix):
            continue
        labels, _, value = line[len(prefix):].rpartition("} ")
        le = next((l.split("=", 1)[1].strip('"') for l in labels.split(",") if l.startswith("le=")), None)
        if le is not None:
            bound = float("inf") if le == "+Inf" else float(le)
            out[bound] = out.get(bound, 0.0) + float(value)
    return out


def histogram_quantiles(before: str, after: str, name: str) -> dict | None:
    """p50/p90/p99/p99.9 in ms of what histogram `name` recorded between two scrapes (bucket deltas), each
    interpolated linearly within its bucket like Prometheus' histogram_quantile; None when nothing was recorded."""
    b0, b1 = histogram_buckets(before, name), histogram_buckets(after, name)
    bounds = sorted(b1)
    cumulative = [b1[b] - b0.get(b, 0.0) for b in bounds]
    if not cumulative or cumulative[-1] <= 0:
        return None
    total = cumulative[-1]

    def quantile(q: float) -> float:
        rank = q * total
        for i, bound in enumerate(bounds):
            if cumulative[i] >= rank:
                lower = bounds[i - 1] if i > 0 else 0.0
                below = cumulative[i - 1] if i > 0 else 0.0
                if bound == float("inf"):
                    return float("inf")  # beyond the last finite bucket (reported as "> <its bound>")
                inside = cumulative[i] - below
                return (lower + (bound - lower) * ((rank - below) / inside if inside > 0 else 1.0)) * 1000
        return bounds[-1] * 1000

    last = max((b for b in bounds if b != float("inf")), default=0.0) * 1000

    def shown(q: float):
        value = quantile(q)
        return round(value, 3) if value != float("inf") else f">{last:g}"

    return {"n": int(total), "p50": shown(0.5), "p90": shown(0.9), "p99": shown(0.99), "p999": shown(0.999)}


def perf_top(path: str, pid: int, us_per_notification: float, n: int = 10) -> list:
    """The `n` functions of process `pid` with the most self time in a `perf record` file: each its share of the
    process's samples and that share of its CPU per notification (µs)."""
    out = subprocess.run(
        ["perf", "report", "-i", path, "--pid", str(pid), "--no-children", "--sort", "symbol", "--stdio",
         "--percentage", "relative", "-g", "none"],
        capture_output=True, text=True, timeout=300).stdout
    top = []
    for line in out.splitlines():
        parts = line.split(None, 1)
        if len(parts) != 2 or not parts[0].endswith("%") or line.lstrip().startswith("#"):
            continue
        share = float(parts[0].rstrip("%"))
        symbol = parts[1].split("] ", 1)[-1].strip()
        top.append({"self_percent": share, "us": round(us_per_notification * share / 100, 2), "symbol": symbol[:160]})
        if len(top) == n:
            break
    return top


def app_ids(count: int) -> list[str]:
    """`count` app ids spread evenly over the partitions under librdkafka's consistent partitioner (CRC-32 of
    the key modulo the partition count), so that every partition carries load."""
    by_partition: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    i = 0
    while sum(len(v) for v in by_partition.values()) < count:
        name = f"load{i}"
        p = zlib.crc32(name.encode()) % PARTITIONS
        if len(by_partition[p]) < (count + PARTITIONS - 1) // PARTITIONS:
            by_partition[p].append(name)
        i += 1
    return sorted((n for v in by_partition.values() for n in v), key=lambda n: int(n[4:]))[:count]


def service_account(path: str, project: str, token_url: str, key_pem: str) -> str:
    with open(path, "w") as f:
        json.dump({"type": "service_account", "project_id": project, "private_key_id": "k1",
                   "private_key": key_pem, "client_email": f"load@{project}.iam.gserviceaccount.com",
                   "client_id": "1", "token_uri": token_url}, f)
    return path


WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"load-test-webhook-secret-32bytes").decode()
AUTH_SECRET = "load-test-hs256-secret-of-enough-length"


def rsa_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def p256_pem(pkcs8: bool) -> str:
    """A fresh P-256 private key in PEM: PKCS#8 (an APNs .p8 key) or SEC 1 (`openssl ecparam -genkey -noout`)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    key = ec.generate_private_key(ec.SECP256R1())
    form = serialization.PrivateFormat.PKCS8 if pkcs8 else serialization.PrivateFormat.TraditionalOpenSSL
    return key.private_bytes(serialization.Encoding.PEM, form, serialization.NoEncryption()).decode()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def browser_keys() -> dict:
    """A browser's Web Push keys (`PushSubscription.toJSON().keys`): the uncompressed P-256 point and 16-byte auth."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    point = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return {"p256dh": b64url(point), "auth": b64url(os.urandom(16))}


def write_file(path: str, text: str) -> str:
    with open(path, "w") as f:
        f.write(text)
    return path


class Proc:
    """A child process with its output to files (or stdout to a pipe), stopped with SIGTERM then SIGKILL."""

    def __init__(self, name: str, argv: list[str], workdir: str, env: dict | None = None, pipe: bool = False):
        self.name = name
        self.err = open(os.path.join(workdir, f"{name}.stderr"), "wb")
        out = subprocess.PIPE if pipe else open(os.path.join(workdir, f"{name}.stdout"), "wb")
        self.p = subprocess.Popen(argv, stdout=out, stderr=self.err, env=env,
                                  stdin=subprocess.PIPE if pipe else subprocess.DEVNULL, text=pipe, bufsize=1 if pipe else -1)

    @property
    def pid(self) -> int:
        return self.p.pid

    def stop(self, grace: float = 10.0) -> None:
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(grace)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(5)


class TLSFront:
    """nghttpx terminating TLS (HTTP/2 by ALPN) with a fresh self-signed certificate for 127.0.0.1, forwarding
    over h2c to the fake: the gateway pays TLS as it does against the real providers."""

    def __init__(self, workdir: str, backend_port: int):
        binary = shutil.which("nghttpx") or "/usr/sbin/nghttpx"
        if not os.path.exists(binary):
            raise RuntimeError("--tls needs nghttpx: apt-get install nghttp2-proxy")
        self.ca_file = os.path.join(workdir, "front-cert.pem")
        key = os.path.join(workdir, "front-key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", self.ca_file,
                        "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                       check=True, capture_output=True, timeout=60)
        self.port = free_port()
        self.proc = Proc("tls-front", [
            # Not the system's nghttpx.conf: its frontend (port 3000) would collide with another run's front.
            binary, "--conf=/dev/null", f"--frontend=127.0.0.1,{self.port}", f"--backend=127.0.0.1,{backend_port};;proto=h2",
            "--single-process", "--workers=1", "--no-ocsp", "--frontend-http2-max-concurrent-streams=1000",
            "--backend-http2-max-concurrent-streams=1000", "--accesslog-file=/dev/null", "--log-level=WARN",
            key, self.ca_file], workdir)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.p.poll() is not None:
                raise RuntimeError("nghttpx exited: " + open(self.proc.err.name).read()[-2000:])
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("nghttpx did not listen in 20 s")


class Fake:
    """LoadFakeFCM: per-second lines collected by a reader thread; `reset`/`report` on its stdin."""

    def __init__(self, workdir: str):
        binary = os.path.join(ROOT, "Benchmarks", ".build", "release", "LoadFakeFCM")
        if not os.path.exists(binary):
            log("building LoadFakeFCM (swift build -c release --product LoadFakeFCM in Benchmarks/)")
            subprocess.run(["swift", "build", "-c", "release", "--product", "LoadFakeFCM"],
                           cwd=os.path.join(ROOT, "Benchmarks"), check=True, timeout=1800)
        self.proc = Proc("fake-fcm", [binary, "0"], workdir, pipe=True)
        self.lines: "queue.Queue[dict]" = queue.Queue()
        self.seconds: list[dict] = []
        self.total = 0
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        first = self.next_line(lambda d: "port" in d or "error" in d, 30)
        if "port" not in first:
            raise RuntimeError(f"fake FCM did not start: {first}")
        self.port = first["port"]

    def _read(self) -> None:
        for line in self.proc.p.stdout:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if "sends" in d and "t" in d:
                with self.lock:
                    self.seconds.append(d)
                    self.total += d["sends"]
            else:
                self.lines.put(d)

    def next_line(self, pred, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                d = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if pred(d):
                return d
        raise RuntimeError("no expected line from the fake FCM within %ss (stderr: %s)" % (
            timeout, open(self.proc.err.name).read()[-2000:]))

    def command(self, word: str) -> None:
        self.proc.p.stdin.write(word + "\n")
        self.proc.p.stdin.flush()

    def report(self) -> dict:
        self.command("report")
        return self.next_line(lambda d: d.get("window"), 30)

    def stop(self) -> dict | None:
        try:
            self.proc.p.stdin.close()
        except OSError:
            pass
        summary = None
        try:
            summary = self.next_line(lambda d: d.get("summary"), 15)
        except RuntimeError:
            pass
        self.proc.stop(5)
        return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=int, default=5000, help="target notifications/s (rate mode)")
    ap.add_argument("--seconds", type=int, default=20, help="measurement window (rate mode)")
    ap.add_argument("--warmup", type=int, default=5, help="seconds at the rate before the window")
    ap.add_argument("--backlog", type=int, default=0, help="backlog mode: publish this many events at once")
    ap.add_argument("--devices", type=int, default=1000)
    ap.add_argument("--fanout", type=int, default=10, help="subscribers per path = notifications per event")
    ap.add_argument("--apps", type=int, default=4)
    ap.add_argument("--linger-ms", type=float, default=20.0,
                    help="producer batching delay (Tansu spends CPU per produce request: small batches slow it down)")
    ap.add_argument("--max-in-flight", type=int, default=2000, help="fcm.maxInFlightPerProject")
    ap.add_argument("--connections", type=int, default=2, help="fcm.maxConnections (HTTP/2 connections to the fake)")
    ap.add_argument("--streams", type=int, default=100, help="fcm.maxStreamsPerConnection")
    ap.add_argument("--max-in-flight-records", type=int, default=20000, help="kafka.maxInFlightRecords")
    ap.add_argument("--kafka-prop", action="append", default=[], metavar="KEY=VALUE",
                    help="extra librdkafka property for the gateway (kafka.properties), e.g. fetch.wait.max.ms=10")
    ap.add_argument("--fetch-wait-ms", type=int, default=None,
                    help="the gateway consumer's fetch.wait.max.ms (Tansu answers a fetch only when it expires, so "
                         "it bounds the broker's part of the latency); librdkafka's default is 500")
    ap.add_argument("--observe", action="store_true",
                    help="also read the change topic with a plain consumer (same kafka props) and report the "
                         "broker-only produce → consume latency, to separate it from the gateway's share")
    ap.add_argument("--tls", action="store_true",
                    help="reach the fake FCM over TLS (HTTP/2, ALPN) through an nghttpx front with a self-signed "
                         "certificate, as the real providers are reached (needs Debian's nghttp2-proxy)")
    ap.add_argument("--kind", choices=("fcm", "webhook", "webpush", "apns"), default=None,
                    help="what the subscriptions are: FCM devices (default), webhooks, Web Push browser subscriptions "
                         "or APNs devices (v2 kinds webhook, webpush, apns; each implies --tls)")
    ap.add_argument("--webhook", action="store_true", help="the same as --kind webhook")
    ap.add_argument("--format", choices=("v1", "v2"), default="v2",
                    help="webpush, apns: the subscriptions' data payload format (v2 subscriptions' default: v2)")
    ap.add_argument("--apns-one-topic", action="store_true",
                    help="apns: one bundle id (com.example.load) for every app, i.e. one provider project, admission "
                         "scope and delivery lane for all, instead of one per app")
    ap.add_argument("--quota", type=int, default=None,
                    help="fcm.maxSendsPerMinute of each app (one FCM project per app); 0: unpaced")
    ap.add_argument("--json-out", default="")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    ap.add_argument("--perf", metavar="FILE",
                    help="backlog mode: record the whole machine with `perf record -a -g` while the backlog is "
                         "published and drained (into FILE), and report the gateway's 10 most costly functions "
                         "(self time) in µs of CPU per notification")
    args = ap.parse_args()
    if args.webhook and args.kind not in (None, "webhook"):
        ap.error("--webhook is --kind webhook")
    args.kind = "webhook" if args.webhook else (args.kind or "fcm")
    args.webhook = args.kind == "webhook"
    v2_kinds = ("webhook", "webpush", "apns")
    args.tls = args.tls or args.kind in v2_kinds
    if args.format == "v1" and args.kind not in ("webpush", "apns"):
        ap.error("--format applies to --kind webpush and apns (FCM devices are v1, webhooks v2)")
    # v1 payloads carry the value JSON-escaped (`ts\":` as the fake looks for); a v2 event carries it as JSON.
    v1_payload = args.kind == "fcm" or args.format == "v1"
    if args.fetch_wait_ms is not None:
        args.kafka_prop.append(f"fetch.wait.max.ms={args.fetch_wait_ms}")
    if args.kind in v2_kinds and args.fanout > 1000:
        ap.error(f"--kind {args.kind}: at most 1000 subscribers per path (one uid per path, maxSubscriptionsPerUser)")

    binary = os.environ.get("PUSH_GATEWAY_BIN", os.path.join(ROOT, ".build", "release", "push-gateway"))
    work = tempfile.mkdtemp(prefix="load-test-")
    log(f"work directory {work}")
    paths_total = args.devices // args.fanout
    apps = app_ids(args.apps)
    broker = fake = gw = producer = front = None
    result: dict = {}
    try:
        broker = Tansu(work).start()
        topics = Topics.unique(broker, PARTITIONS)
        fake = Fake(work)
        base = f"http://127.0.0.1:{fake.port}"
        fcm_tls: dict = {}
        if args.tls:
            front = TLSFront(work, fake.port)
            base = f"https://127.0.0.1:{front.port}"
            fcm_tls = {"caFile": front.ca_file}
        pem = rsa_pem()
        http_port = free_port()
        config = {
            "http": {"host": "127.0.0.1", "port": http_port},
            "kafka": {"brokers": broker.bootstrap, "groupId": topics.group, "changesTopic": topics.changes,
                      "deadLetterTopic": topics.dlq, "stateTopic": topics.state,
                      "snapshotRequestsTopic": topics.snapshots, "membersTopic": topics.members, "maxInFlightRecords": args.max_in_flight_records,
                      "properties": dict(FAST_GROUP_PROPERTIES, **dict(kv.split("=", 1) for kv in args.kafka_prop))},
            "fcm": {"baseURL": base, "tokenURL": base + "/token", "maxConnections": args.connections, "maxStreamsPerConnection": args.streams,
                    "maxInFlightPerProject": args.max_in_flight, **fcm_tls},
            "logging": {"format": "json", "level": "warning"},
            **({"apns": {"baseURL": base, "developmentBaseURL": base, "caFile": front.ca_file}} if args.kind == "apns" else {}),
            "allowInsecureEndpoints": True,  # the fake FCM is h2c (cleartext)
            "apps": {a: {"fcmServiceAccountFile": service_account(os.path.join(work, f"{a}-sa.json"),
                                                                  f"proj-{a}", base + "/token", pem)}
                     for a in apps},
        }
        # The load generator subscribes every device from one address, far faster than a client may write.
        for settings in config["apps"].values():
            settings["quotas"] = {"clientWritesPerSecond": 1_000_000, "clientWriteBurst": 1_000_000,
                                  "anonymousWritesPerSecond": 1_000_000, "anonymousWriteBurst": 1_000_000}
        if args.quota is not None:
            for settings in config["apps"].values():
                settings["fcm"] = {"maxSendsPerMinute": args.quota}
        if args.webhook:
            for settings in config["apps"].values():
                settings["authKeys"] = [{"alg": "HS256", "secret": AUTH_SECRET}]
                settings["webhook"] = {"secrets": [WEBHOOK_SECRET], "allowPrivateDestinations": True,
                                       "caFile": front.ca_file, "maxInFlightPerHost": min(args.max_in_flight, 1000)}
        if args.kind == "webpush":
            vapid = write_file(os.path.join(work, "vapid-key.pem"), p256_pem(pkcs8=False))
            browser = browser_keys()
            for settings in config["apps"].values():
                settings["authKeys"] = [{"alg": "HS256", "secret": AUTH_SECRET}]
                settings["webPush"] = {"vapidKeyFile": vapid, "subject": "mailto:load@example.com",
                                       "allowPrivateEndpoints": True, "caFile": front.ca_file,
                                       "maxInFlightPerHost": min(args.max_in_flight, 1000)}
        if args.kind == "apns":
            apns_key = write_file(os.path.join(work, "apns-AuthKey.p8"), p256_pem(pkcs8=True))
            for app_name, settings in config["apps"].items():
                settings["authKeys"] = [{"alg": "HS256", "secret": AUTH_SECRET}]
                settings["apns"] = {"teamId": "TEAM123456", "keyId": "KEY1234567", "keyFile": apns_key,
                                    "bundleId": "com.example.load" if args.apns_one_topic else f"com.example.load.{app_name}",
                                    "environment": "production"}
        with open(os.path.join(work, "gateway.yaml"), "w") as f:
            yaml.safe_dump(config, f, sort_keys=False)
        env = dict((k, v) for k, v in os.environ.items() if not k.startswith("PUSH_"))
        env["LD_LIBRARY_PATH"] = os.path.join(ROOT, ".deps", "lib")
        gw = Proc("gateway", [binary, "run", "--config", os.path.join(work, "gateway.yaml")], work, env=env)
        session = requests.Session()
        deadline = time.monotonic() + 90
        while True:
            if gw.p.poll() is not None:
                raise RuntimeError("gateway exited: " + open(gw.err.name).read()[-3000:])
            try:
                if session.get(f"http://127.0.0.1:{http_port}/readyz", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("gateway not ready in 90 s: " + open(gw.err.name).read()[-3000:])
            time.sleep(0.25)
        log(f"gateway ready; subscribing {args.devices} devices ({paths_total} paths × {args.fanout}) on apps {apps}")

        # Path i belongs to app i % apps; every path gets `fanout` devices (tokens shaped like FCM's).
        targets = [(apps[i % len(apps)], f"/load/p{i}") for i in range(paths_total)]
        t0 = time.monotonic()
        local = threading.local()

        def subscribe(job: tuple) -> None:
            i, k = job
            app, path = targets[i]
            token = f"d{i:05d}x{k:03d}:APA91b" + "L" * 140
            if not hasattr(local, "s"):
                local.s = requests.Session()
            if args.kind in v2_kinds:
                import jwt
                uid = f"u{i}"
                bearer = jwt.encode({"uid": uid, "exp": int(time.time()) + 3600}, AUTH_SECRET, algorithm="HS256")
                if args.kind == "webhook":
                    body = {"kind": "webhook", "mode": "value", "path": path, "context": f"k{k}",
                            "destination": f"{base}/v1/projects/p{i}/messages:send"}
                elif args.kind == "webpush":
                    # One browser subscription per subscriber: its own endpoint (one host for all).
                    body = {"kind": "webpush", "mode": "value", "path": path, "format": args.format,
                            "context": {"endpoint": f"{base}/v1/projects/p{i}/messages:send?s={k}", "keys": browser}}
                else:
                    body = {"kind": "apns", "mode": "value", "path": path, "format": args.format,
                            "context": f"{i:032x}{k:032x}"}  # 64 hex digits, unique per subscriber
                r = local.s.post(f"http://127.0.0.1:{http_port}/datasync/v2/{app}/subscriptions/{uid}",
                                 json=body, headers={"Authorization": f"Bearer {bearer}"}, timeout=10)
                ok = r.status_code == 201
            else:
                r = local.s.put(f"http://127.0.0.1:{http_port}/base/{app}/.wakeup{path}",
                                params={"id": token, "mode": "value"}, timeout=10)
                ok = r.status_code == 204
            if not ok:
                raise RuntimeError(f"subscribe {app}{path}: {r.status_code} {r.text[:300]}")

        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(subscribe, [(i, k) for i in range(len(targets)) for k in range(args.fanout)]))
        log(f"subscribed in {time.monotonic() - t0:.1f}s")

        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": args.linger_ms,
                             "batch.num.messages": 10000, "queue.buffering.max.messages": 2_000_000,
                             "acks": 1, "enable.idempotence": False})
        errors: list = []
        acks: list = []  # produce() → broker acknowledgement, seconds (librdkafka's msg.latency())

        def delivered(err, msg):
            if err is not None:
                errors.append(err)
            elif measuring:
                acks.append(msg.latency())

        produced = 0
        measuring = False

        def produce_one() -> None:
            nonlocal produced
            app, path = targets[produced % len(targets)]
            # A webhook body (and a v2 event) carries the value as JSON: a string `ts":N` appears there as
            # `ts\":N`, as the fake looks for (a v1 payload, FCM's data, carries `{"ts":N}` JSON-escaped, the same way).
            after = ('{"ts":%d}' if v1_payload else '"ts\\":%d"') % time.time_ns()
            value = encode_change_event(app, path, "SET", after=after,
                                        event_id=f"e{produced}", timestamp_ms=int(time.time() * 1000))
            while True:
                try:
                    producer.produce(topics.changes, key=app.encode(), value=value, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.01)
            produced += 1

        # Subscriptions become active on the partition owner once their state records are consumed: probe
        # with one event per path until every path's first notification arrived, then start.
        log("probing: one event per path")
        for _ in targets:
            produce_one()
        producer.flush(30)
        want = len(targets) * args.fanout
        deadline = time.monotonic() + 60
        while fake.total < want and time.monotonic() < deadline:
            time.sleep(0.2)
        if fake.total < want:
            raise RuntimeError(f"probe: only {fake.total} of {want} notifications arrived in 60 s")
        time.sleep(1.5)
        base_sends = fake.total
        log(f"probe ok ({fake.total} notifications)")

        watched = {"gateway": gw.pid, "tansu": broker.proc.popen.pid, "fake_fcm": fake.proc.pid, "load_gen": os.getpid()}
        if front is not None:
            watched["tls_front"] = front.proc.pid

        def cpu_snapshot() -> dict:
            return {k: cpu_ticks(v) for k, v in watched.items()} | {"_threads": thread_ticks(gw.pid)}

        def cpu_percent(a: dict, b: dict, seconds: float) -> dict:
            out = {k: round(100.0 * (b[k] - a[k]) / CLK_TCK / seconds, 1) for k in a if k != "_threads"}
            out["gateway_threads"] = top_threads(a["_threads"], b["_threads"], seconds)
            return out

        def cpu_us_per_notification(a: dict, b: dict, notifications: int) -> dict:
            return {k: round(1e6 * (b[k] - a[k]) / CLK_TCK / max(1, notifications), 1)
                    for k in a if k not in ("_threads", "load_gen")}

        def scrape_metrics() -> str:
            try:
                return session.get(f"http://127.0.0.1:{http_port}/metrics", timeout=5).text
            except requests.RequestException as error:
                log(f"scraping /metrics failed: {error}")
                return ""

        observed: list = []  # (ts_ns, consumed_ns) of the observer consumer
        observer_stop = threading.Event()
        observer = None
        if args.observe:
            from confluent_kafka import Consumer, TopicPartition, OFFSET_END
            props = dict(kv.split("=", 1) for kv in args.kafka_prop)
            oc = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "observer-" + topics.suffix,
                           "enable.auto.commit": False, **props})
            oc.assign([TopicPartition(topics.changes, p, OFFSET_END) for p in range(PARTITIONS)])

            def observe() -> None:
                try:
                    while not observer_stop.is_set():
                        for m in oc.consume(1000, 0.1):
                            if m.error():
                                continue
                            v = m.value()
                            i = v.find(b'{"ts":')
                            if i >= 0:
                                observed.append((int(v[i + 6: v.index(b"}", i)]), time.time_ns()))
                finally:
                    oc.close()
            observer = threading.Thread(target=observe, daemon=True)
            observer.start()
            time.sleep(2)

        if args.backlog:
            start_produced = produced
            t_pub = time.monotonic()
            t_pub_wall = window_wall_start = time.time()
            perf = None
            if args.perf:
                perf = subprocess.Popen(["perf", "record", "-a", "-g", "-F", "499", "-o", args.perf],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(0.5)
            cpu0 = cpu_snapshot()
            fake.command("reset")
            measuring = True
            for _ in range(args.backlog):
                produce_one()
                if produced % 5000 == 0:
                    producer.poll(0)
            producer.flush(120)
            pub_s = time.monotonic() - t_pub
            log(f"published {args.backlog} events in {pub_s:.1f}s ({args.backlog / pub_s:.0f}/s); draining")
            want = base_sends + args.backlog * args.fanout
            deadline = time.monotonic() + 600
            last, last_change = fake.total, time.monotonic()
            while fake.total < want and time.monotonic() < deadline and time.monotonic() - last_change < 30:
                time.sleep(0.5)
                if fake.total != last:
                    last, last_change = fake.total, time.monotonic()
            window = fake.report()
            window_wall_end = time.time()
            elapsed = time.monotonic() - t_pub
            cpu1 = cpu_snapshot()
            if perf:
                perf.send_signal(signal.SIGINT)
                perf.wait(60)
            with fake.lock:
                secs = list(fake.seconds)
            active = [s for s in secs if s["t"] >= t_pub_wall + 0.5]
            idx = [i for i, s in enumerate(active) if s["sends"] > 0]
            steady = [s["sends"] for s in active[idx[0] + 1: idx[-1]]] if len(idx) >= 3 else []
            drain_s = (idx[-1] - idx[0] + 1) if idx else 0
            result = {
                "scenario": "backlog", "mode": args.kind, "events": args.backlog, "gateway_kafka_props": args.kafka_prop, "fanout": args.fanout,
                "notifications_expected": args.backlog * args.fanout,
                "notifications_received": fake.total - base_sends,
                "publish_seconds": round(pub_s, 2),
                "drain_seconds": drain_s,
                "achieved_per_s_median": int(statistics.median(steady)) if steady else 0,
                "achieved_per_s_mean": int((fake.total - base_sends) / max(1, drain_s)),
                "latency_ms (queueing, not meaningful)": {k: window[k] for k in ("p50_ms", "p99_ms", "max_ms")},
                "cpu_percent_of_one_core": cpu_percent(cpu0, cpu1, elapsed),
                "cpu_us_per_notification": cpu_us_per_notification(cpu0, cpu1, fake.total - base_sends),
                "per_second": [s["sends"] for s in active[idx[0]: idx[-1] + 1]] if idx else [],
            }
            if args.quota:
                # The projects' pace: every app's quota, spread over the apps' projects.
                rate = args.quota / 60 * len(apps)
                quota_s = args.backlog * args.fanout / rate
                result["quota_per_minute_per_project"] = args.quota
                result["quota_seconds"] = round(quota_s, 2)
                result["busiest_second"] = max(result["per_second"], default=0)
                # drain_seconds counts the fake's whole seconds with sends (±1 s).
                result["drain_vs_quota"] = f"{drain_s / quota_s - 1:+.1%}"
            if perf:
                us = result["cpu_us_per_notification"].get("gateway", 0.0)
                result["perf_top10_self_us_per_notification"] = perf_top(args.perf, gw.pid, us)
        else:
            event_rate = args.rate / args.fanout
            log(f"publishing {event_rate:.0f} events/s ({args.rate} notifications/s): "
                f"{args.warmup}s warm-up + {args.seconds}s window")
            start = time.monotonic()
            start_produced = produced
            window_start = start + args.warmup
            end = window_start + args.seconds
            in_window = False
            cpu0 = None
            metrics0 = ""
            window_t0 = 0.0
            while True:
                now = time.monotonic()
                if now >= end:
                    break
                if not in_window and now >= window_start:
                    in_window = True
                    fake.command("reset")
                    measuring = True
                    cpu0 = cpu_snapshot()
                    metrics0 = scrape_metrics()
                    window_t0 = now
                    window_wall_start = time.time()
                due = int((now - start) * event_rate) - (produced - start_produced)
                for _ in range(due):
                    produce_one()
                producer.poll(0)
                time.sleep(0.002)
            window = fake.report()
            measuring = False
            cpu1 = cpu_snapshot()
            window_s = time.monotonic() - window_t0
            window_wall_end = time.time()
            published = produced - start_produced
            producer.flush(30)
            want = base_sends + published * args.fanout
            deadline = time.monotonic() + 60
            while fake.total < want and time.monotonic() < deadline:
                time.sleep(0.2)
            metrics1 = scrape_metrics()
            with fake.lock:
                secs = [s["sends"] for s in fake.seconds if window_wall_start + 1 <= s["t"] <= window_wall_end]
            result = {
                "scenario": "rate", "mode": args.kind, "target_per_s": args.rate, "gateway_kafka_props": args.kafka_prop, "fanout": args.fanout, "window_seconds": round(window_s, 1),
                "achieved_per_s_median": int(statistics.median(secs)) if secs else 0,
                "achieved_per_s_window": window["rate"],
                "p50_ms": window["p50_ms"], "p90_ms": window["p90_ms"], "p99_ms": window["p99_ms"],
                "p999_ms": window["p999_ms"], "max_ms": window["max_ms"],
                "notifications_expected": published * args.fanout,
                "notifications_received": fake.total - base_sends,
                "cpu_percent_of_one_core": cpu_percent(cpu0, cpu1, window_s),
                "cpu_us_per_notification": cpu_us_per_notification(cpu0, cpu1, window["sends"]),
                "per_second": secs,
            }
            gateway = histogram_quantiles(metrics0, metrics1, "pushgateway_gateway_latency_seconds")
            if gateway:
                result["gateway_ms"] = gateway
                result["rest_ms_estimate"] = {
                    q: round(window[f"{q}_ms"] - gateway[q], 2) for q in ("p50", "p99") if isinstance(gateway[q], float)}
            match = histogram_quantiles(metrics0, metrics1, "pushgateway_gateway_match_latency_seconds")
            if match:
                result["gateway_match_ms"] = match
        if args.kind in ("webpush", "apns"):
            result["format"] = args.format
        if args.kind == "apns":
            result["apns_topics"] = "one for all apps" if args.apns_one_topic else "one per app"
        if args.kind == "webpush":
            # Encrypted bodies: the fake cannot read `ts` (it counts these sends as no_ts).
            result["latency"] = "not measured: Web Push bodies are encrypted (RFC 8291); CPU and throughput only"
            for key in ("latency_ms (queueing, not meaningful)", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms",
                        "rest_ms_estimate"):
                result.pop(key, None)
        if observer is not None:
            time.sleep(1)
            observer_stop.set()
            observer.join(10)
            lo, hi = int(window_wall_start * 1e9), int(window_wall_end * 1e9)
            lat = sorted((c - t) / 1e6 for t, c in observed if lo <= t <= hi)
            if lat:
                result["broker_only_consume_ms"] = {"n": len(lat), "p50": round(lat[len(lat) // 2], 1),
                                                    "p99": round(lat[int(len(lat) * 0.99)], 1)}
        if acks:
            acks.sort()
            result["broker_ack_ms"] = {"p50": round(acks[len(acks) // 2] * 1000, 1),
                                       "p99": round(acks[int(len(acks) * 0.99)] * 1000, 1)}
        if errors:
            result["produce_errors"] = [str(e) for e in errors[:5]]
        # A run that does not deliver everything fails (exit status 1), whatever its rate: a stall must not pass
        # for a slow run.
        result["complete"] = result["notifications_received"] >= result["notifications_expected"]
        if not result["complete"]:
            log(f"INCOMPLETE: {result['notifications_received']} of {result['notifications_expected']} notifications "
                "reached the fake")
        try:
            metrics = session.get(f"http://127.0.0.1:{http_port}/metrics", timeout=5).text
            with open(os.path.join(work, "metrics.txt"), "w") as f:
                f.write(metrics)
            result["gateway_metrics"] = [l for l in metrics.splitlines()
                                         if not l.startswith("#") and ("dead" in l or "error" in l or "fail" in l)
                                         and not l.rstrip().endswith(" 0") and not l.rstrip().endswith(" 0.0")][:12]
        except requests.RequestException:
            pass
        return 0 if result["complete"] else 1
    finally:
        if producer is not None:
            producer.flush(5)
            producer = None  # destroyed before the broker stops
        if gw:
            gw.stop(15)
        if front:
            front.proc.stop(5)
        if fake:
            summary = fake.stop()
            if summary:
                result["fake_summary"] = summary
        if broker:
            broker.stop()
        if result:
            line = json.dumps(result)
            print(line, flush=True)
            if args.json_out:
                with open(args.json_out, "w") as f:
                    f.write(line + "\n")
        if gw:
            errs = [l for l in open(gw.err.name, errors="replace") if '"level":"error"' in l or "rror" in l][:5]
            if errs:
                log("gateway error lines:\n" + "".join(e[:400] for e in errs))
        if not args.keep:
            import shutil
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
