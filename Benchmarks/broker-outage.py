#!/usr/bin/env python3
"""Broker outages measured (issue 12): the scenario of tests/e2e/outage.py (change events streaming to value
subscriptions, a new device subscribing every second, /readyz polled) with the broker frozen (SIGSTOP) and
killed then restarted with its data (Tansu on s3:// storage over a local moto server), for each duration
given. Prints each outage's report: readiness, API answers during the outage, notifications missing or
duplicated, recovery times, log lines.

    python3 Benchmarks/broker-outage.py --seconds 30 120
    PUSH_GATEWAY_BIN=.build/release/push-gateway python3 Benchmarks/broker-outage.py --seconds 120 --kind freeze
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, nargs="+", default=[30.0, 120.0], help="outage lengths")
    parser.add_argument("--kind", choices=["freeze", "restart", "both"], default="both")
    args = parser.parse_args()
    env = dict(os.environ)
    deps = os.path.join(ROOT, ".deps", "lib")
    env["LD_LIBRARY_PATH"] = deps + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    failed = 0
    for seconds in args.seconds:
        env["PUSH_OUTAGE_SECONDS"] = str(seconds)
        selector = "outage_measured" + ("" if args.kind == "both" else f" and {args.kind}")
        print(f"== outages of {seconds:.0f} s ({args.kind})", flush=True)
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "tests/e2e/test_broker_faults.py", "-k", selector, "-s", "-q",
             "-p", "no:cacheprovider"], cwd=ROOT, env=env)
        failed += result.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
