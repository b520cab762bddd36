"""How long one replica takes to load N subscriptions from the state topic at start-up (issue 19).

    python3 Benchmarks/state-load.py --subscriptions 1000000 --runs 3 \\
        --binary base=/tmp/pgw-load-base --binary new=.build/release/push-gateway [--perf new]

Starts a Tansu broker (in-memory storage) with 12-partition topics, writes N subscription records into the state
topic (50 apps, ~150-byte tokens, each app in its partitioner's partition: the layout of `partitions.py`), then:

- the floor: how fast plain consumers read the same topic to its end (`kcat -C -e`, and confluent_kafka's
  `consume()` in batches of 10,000 without decoding anything);
- for each run, each binary in turn (interleaved, so a busy machine hurts all alike): one gateway with a fresh
  consumer group, the time from start to /readyz, subscriptions/s, RSS once ready, and the gateway's own
  "state partition loaded" lines (sum and longest per-partition load).

`--perf LABEL` records `perf record -g` on that binary's last run (from start to ready) and prints the top of
`perf report --no-children` by shared object and by symbol. The machine's load average at start is printed
too: other processes on the machine move these figures. `PGW_LOG_LEVEL=info` puts the gateway's info lines
(joining the consumer group, partitions assigned) in its log, `state-load-*/LABEL-RUN.log`.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from kafka_util import Tansu  # noqa: E402
from partitions import PARTITIONS, Replica, metric, rss_mb, write_state  # noqa: E402


def plain_floor(bootstrap: str, topic: str, n: int) -> None:
    if shutil.which("kcat"):
        start = time.monotonic()
        # The project's librdkafka: Debian's kcat links an older one that cannot read Tansu's ApiVersions answer.
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(ROOT, ".deps", "lib"))
        out = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-f", "%o\n",
                              "-X", "fetch.max.bytes=52428800", "-X", "max.partition.fetch.bytes=10485760"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=600, env=env)
        took = time.monotonic() - start
        count = out.stdout.count(b"\n")
        print(f"floor kcat -C -e: {count:,} records in {took:.2f} s ({count / took:,.0f}/s)", flush=True)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"floor-{os.getpid()}", "enable.auto.commit": False,
                         "enable.partition.eof": True, "auto.offset.reset": "earliest",
                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    start = time.monotonic()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    count, eof = 0, set()
    while len(eof) < PARTITIONS and time.monotonic() - start < 600:
        for m in consumer.consume(10000, 1.0):
            if m.error():
                eof.add(m.partition())
            else:
                count += 1
    took = time.monotonic() - start
    consumer.close()
    print(f"floor confluent_kafka consume(): {count:,} records in {took:.2f} s ({count / took:,.0f}/s)", flush=True)
    if count < n:
        print(f"  (read {count} of {n})", flush=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process so far (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def perf_report(data: str, pid: int) -> None:
    for sort in ("dso", "sym"):
        out = subprocess.run(["perf", "report", "-i", data, "--pid", str(pid), "--no-children", "--sort", sort, "--stdio",
                              "--percent-limit", "1.5" if sort == "sym" else "0.5"],
                             capture_output=True, text=True)
        lines = [line for line in out.stdout.splitlines() if line.strip() and not line.startswith("#")
                 and "%" in line.split()[0]]
        print(f"  perf by {sort}:", flush=True)
        for line in lines[:25]:
            print("    " + line.strip()[:160], flush=True)


def run_once(workdir: str, label: str, binary: str, bootstrap: str, suffix: str, n: int, run: int,
             perf: bool) -> float:
    group = f"load-{suffix}-{label}-{run}"
    replica = Replica(workdir, binary, bootstrap, suffix, group, 0, f"{label}-{run}")
    recorder = None
    if perf:
        data = os.path.join(workdir, f"{label}-{run}.perf")
        # System-wide, the gateway's samples picked out in the report: `-p` attaches to the threads that exist when
        # perf starts, and the gateway's loader threads are often made before that.
        recorder = subprocess.Popen(["perf", "record", "-a", "-g", "-F", "999", "-o", data],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ready = replica.wait_ready(600)
        if recorder:
            recorder.send_signal(signal.SIGINT)
            recorder.wait(60)
        cpu = cpu_seconds(replica.proc.pid)
        held = metric(replica.base, "pushgateway_subscriptions")
        loads = replica.loads()
        durations = [float(x["duration"].split()[0]) for x in loads]
        threads = len(os.listdir(f"/proc/{replica.proc.pid}/task"))
        print(f"  {label} run {run}: ready after {ready:.2f} s ({n / ready:,.0f} subscriptions/s), {held:,.0f} held, "
              f"CPU {cpu:.2f} s (user+sys until ready), RSS {rss_mb(replica.proc.pid):.0f} MB, {len(loads)} partitions loaded "
              f"(sum {sum(durations):.2f} s, longest {max(durations, default=0):.2f} s), {threads} threads", flush=True)
        if held < n:
            print(f"  {label}: only {held:,.0f} of {n:,} subscriptions held", flush=True)
        if recorder:
            perf_report(data, replica.proc.pid)
        return ready
    finally:
        if recorder and recorder.poll() is None:
            recorder.send_signal(signal.SIGINT)
            recorder.wait(60)
        replica.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subscriptions", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--binary", action="append", default=[],
                        help="LABEL=PATH, repeatable (default: release=.build/release/push-gateway)")
    parser.add_argument("--perf", action="append", default=[], help="LABEL whose last run perf records")
    parser.add_argument("--no-floor", action="store_true", help="skip the plain-consumer floor")
    args = parser.parse_args()
    binaries = [b.split("=", 1) for b in (args.binary or [f"release={ROOT}/.build/release/push-gateway"])]
    print(f"load average at start: {' '.join(open('/proc/loadavg').read().split()[:3])}; {os.cpu_count()} cores",
          flush=True)
    workdir = tempfile.mkdtemp(prefix="state-load-")
    broker = Tansu(workdir).start()
    try:
        suffix = os.urandom(4).hex()
        for topic in ("changes", "state", "dlq", "snap"):
            broker.create_topic(f"{topic}.{suffix}", PARTITIONS)
        broker.create_topic(f"members.{suffix}", 1)
        write_state(broker, f"state.{suffix}", args.subscriptions)
        if not args.no_floor:
            plain_floor(broker.bootstrap, f"state.{suffix}", args.subscriptions)
        results: dict[str, list[float]] = {label: [] for label, _ in binaries}
        for run in range(1, args.runs + 1):
            for label, binary in binaries:
                perf = label in args.perf and run == args.runs
                results[label].append(run_once(workdir, label, binary, broker.bootstrap, suffix,
                                               args.subscriptions, run, perf))
        for label, times in results.items():
            med = statistics.median(times)
            print(f"{label}: median ready {med:.2f} s ({args.subscriptions / med:,.0f} subscriptions/s) over "
                  f"{len(times)} runs: {', '.join(f'{t:.2f}' for t in times)}", flush=True)
        print(f"load average at end: {' '.join(open('/proc/loadavg').read().split()[:3])}", flush=True)
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
