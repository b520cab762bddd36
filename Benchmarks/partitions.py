"""Partition-owned state at scale (issue 14): memory and load time per replica, takeover after kill -9, API
latency answered locally vs forwarded.

    python3 Benchmarks/partitions.py --subscriptions 1000000 --replicas 1 2 3 --standbys 0 1 \\
        --binary .build/release/push-gateway

Starts a Tansu broker (in-memory storage) with 12-partition topics, writes N subscription records into the state
topic (50 apps, each in the partition the publishers' partitioner gives it, as the gateway writes them), then for
each replica count starts that many gateways and reports, per replica: subscriptions held, resident memory
(VmRSS) and the time from start to ready. With 2 or more replicas it then kills one (kill -9) and reports the
takeover: time until the survivors are ready again with every partition (the consumer group's session timeout
included), and how each partition got there (read from the log, or promoted from a standby copy). Finally it
measures API latency (v1 PUT refresh and v2 GET) through the owner and through another replica.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

import requests
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
from confluent_kafka import Producer  # noqa: E402
from kafka_util import Tansu  # noqa: E402

PARTITIONS = 12
APPS = 50
SECRET = "partitions-benchmark-hs256-secret-0123456789"


def free_port() -> int:
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def partition_of(app: str) -> int:
    """librdkafka's consistent_random: CRC-32 of the key modulo the partition count."""
    return (zlib.crc32(app.encode()) & 0xFFFFFFFF) % PARTITIONS


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def metric(base: str, name: str) -> float:
    text = requests.get(base + "/metrics", timeout=10).text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ") or line.startswith(name + "{"))


class Replica:
    def __init__(self, workdir: str, binary: str, broker: str, suffix: str, group: str, standbys: int, name: str):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.name = name
        self.log_path = os.path.join(workdir, f"{name}.log")
        config = {
            "http": {"host": "127.0.0.1", "port": self.port},
            "kafka": {"brokers": broker, "groupId": group, "changesTopic": f"changes.{suffix}",
                      "deadLetterTopic": f"dlq.{suffix}", "stateTopic": f"state.{suffix}",
                      "snapshotRequestsTopic": f"snap.{suffix}", "membersTopic": f"members.{suffix}",
                      "properties": {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000",
                                     # extra librdkafka properties for the gateways, e.g. PGW_KAFKA_PROPS='{"a": "1"}'
                                     **json.loads(os.environ.get("PGW_KAFKA_PROPS", "{}"))}},
            "state": {"standbyReplicas": standbys},
            # Replicas sign the calls they forward and their members records (issue 17; older binaries ignore it).
            "cluster": {"secret": "benchmark-cluster-secret-0123456789abcdef"},
            "logging": {"format": "json", "level": os.environ.get("PGW_LOG_LEVEL", "notice")},
            "apps": {f"app{i}": {"authKeys": [{"alg": "HS256", "secret": SECRET}]} for i in range(APPS)},
        }
        self.config_path = os.path.join(workdir, f"{name}.yaml")
        with open(self.config_path, "w") as f:
            yaml.safe_dump(config, f)
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(ROOT, ".deps", "lib"))
        self.started = time.monotonic()
        self.proc = subprocess.Popen([binary, "run", "--config", self.config_path], stdout=subprocess.DEVNULL,
                                     stderr=open(self.log_path, "w"), env=env)

    def ready(self) -> bool:
        try:
            return requests.get(self.base + "/readyz", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def wait_ready(self, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {open(self.log_path).read()[-3000:]}")
            if self.ready():
                return time.monotonic() - self.started
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} not ready in {timeout} s")

    def loads(self) -> list[dict]:
        out = []
        for line in open(self.log_path):
            if "state partition loaded" in line:
                out.append(json.loads(line))
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def write_state(broker: Tansu, topic: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "batch.num.messages": 10000,
                         "queue.buffering.max.messages": 500000})
    value = json.dumps({"expiresAt": 1900000000, "format": "v1", "mode": "noData"}, separators=(",", ":")).encode()
    start = time.time()
    for i in range(n):
        app = f"app{i % APPS}"
        token = f"fcm-{i:08x}:APA91b" + "x" * 140
        key = json.dumps([app, f"/users/u{i}", "mobile", token, ""], separators=(",", ":")).encode()
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=partition_of(app))
                break
            except BufferError:
                producer.poll(0.1)
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(300)
    print(f"wrote {n} subscription records in {time.time() - start:.1f} s", flush=True)


def percentiles(samples: list[float]) -> str:
    samples = sorted(samples)
    p = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))] * 1000  # noqa: E731
    return f"p50 {p(0.5):.1f} ms, p99 {p(0.99):.1f} ms (n={len(samples)})"


def latency(replicas: list[Replica]) -> None:
    import jwt
    app = "app0"
    home = partition_of(app)
    owner = None
    for r in replicas:
        owned = [json.loads(line) for line in open(r.log_path) if "state partition loaded" in line]
        if any(int(x["kafka.partition"]) == home for x in owned):
            owner = r
    other = next((r for r in replicas if r is not owner), None)
    token = jwt.encode({"uid": "u0", "exp": int(time.time()) + 600}, SECRET, algorithm="HS256")
    headers = {"Authorization": f"Bearer {token}"}
    for label, target in (("local", owner), ("forwarded", other)):
        if target is None:
            continue
        session = requests.Session()
        put, get = [], []
        for i in range(300):
            t = time.perf_counter()
            r = session.put(f"{target.base}/base/{app}/.wakeup/bench/{i % 20}?id=lat-{i % 20}", timeout=10)
            put.append(time.perf_counter() - t)
            assert r.status_code == 204, r.text
            t = time.perf_counter()
            r = session.get(f"{target.base}/datasync/v2/{app}/subscriptions/u0", headers=headers, timeout=10)
            get.append(time.perf_counter() - t)
            assert r.status_code == 200, r.text
        print(f"  API {label:9s} v1 PUT {percentiles(put[20:])}; v2 GET {percentiles(get[20:])}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subscriptions", type=int, default=1_000_000)
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--standbys", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--binary", default=os.path.join(ROOT, ".build", "release", "push-gateway"))
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="partitions-")
    broker = Tansu(workdir).start()
    try:
        suffix = os.urandom(4).hex()
        for topic in ("changes", "state", "dlq", "snap"):
            broker.create_topic(f"{topic}.{suffix}", PARTITIONS)
        broker.create_topic(f"members.{suffix}", 1)
        write_state(broker, f"state.{suffix}", args.subscriptions)
        run = 0
        for standbys in args.standbys:
            for count in args.replicas:
                if standbys >= count:
                    continue
                run += 1
                # A fresh consumer group per run (same topics): every run loads from the log.
                group = f"bench-{suffix}-{run}"
                print(f"\n== {count} replica(s), state.standbyReplicas={standbys}", flush=True)
                replicas = [
                    Replica(workdir, args.binary, broker.bootstrap, suffix, group, standbys, f"r{run}-{i}") for i in range(count)
                ]
                try:
                    for r in replicas:
                        r.wait_ready(600)
                    # Let the group settle (all members joined: no partition loading anywhere).
                    deadline = time.monotonic() + 120
                    while time.monotonic() < deadline:
                        if all(r.ready() for r in replicas) and sum(metric(r.base, "pushgateway_subscriptions") for r in replicas) >= args.subscriptions:
                            break
                        time.sleep(0.5)
                    settled = time.monotonic()
                    for r in replicas:
                        held = metric(r.base, "pushgateway_subscriptions")
                        standby = metric(r.base, "pushgateway_standby_subscriptions")
                        loads = r.loads()
                        total_load = sum(float(x["duration"].split()[0]) for x in loads)
                        print(f"  {r.name}: {held:,.0f} subscriptions owned, {standby:,.0f} standby, RSS {rss_mb(r.proc.pid):.0f} MB, "
                              f"loads {len(loads)} partitions in {total_load:.2f} s (sum), ready after {settled - r.started:.1f} s",
                              flush=True)
                    if count >= 2:
                        latency(replicas)
                        victim = replicas[0]
                        survivors = replicas[1:]
                        before = {r.name: len(r.loads()) for r in survivors}
                        killed = time.monotonic()
                        victim.proc.kill()
                        victim.proc.wait()
                        deadline = time.monotonic() + 300
                        while time.monotonic() < deadline:
                            owned = sum(metric(r.base, "pushgateway_subscriptions") for r in survivors)
                            if owned >= args.subscriptions and all(r.ready() for r in survivors):
                                break
                            time.sleep(0.2)
                        took = time.monotonic() - killed
                        new_loads = [x for r in survivors for x in r.loads()[before[r.name]:]]
                        from_log = [x for x in new_loads if x.get("from") == "log"]
                        promoted = [x for x in new_loads if x.get("from") == "standby"]
                        longest = max((float(x["duration"].split()[0]) for x in new_loads), default=0)
                        print(f"  takeover after kill -9: every subscription served again in {took:.1f} s "
                              f"(session.timeout.ms 6000 included); partitions taken over: {len(from_log)} read from the log, "
                              f"{len(promoted)} promoted from standby; longest load {longest:.2f} s; "
                              f"RSS after: {', '.join(f'{rss_mb(r.proc.pid):.0f} MB' for r in survivors)}", flush=True)
                finally:
                    for r in replicas:
                        r.stop()
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
