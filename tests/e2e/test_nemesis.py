"""The nemesis run (issue 17) in CI mode: three replicas under a client workload and a publisher, random faults
(kill -9 and restart, SIGSTOP past the session timeout, SIGTERM and restart, broker freezes) for NEMESIS_SECONDS
(default 120), then the checker over the recorded history (checker.py; its unit tests are test_checker.py).

NEMESIS_SEED makes a run reproducible (the fault schedule and the workload's choices; not the timing): the seed is
printed. NEMESIS_SECONDS makes it longer. Longer runs: scripts/nemesis (the same run outside pytest).
"""

from __future__ import annotations

import os
import random
import uuid

import pytest

import nemesis
from fault_util import FaultyTansu

SECONDS = float(os.environ.get("NEMESIS_SECONDS", "120"))


@pytest.mark.timeout(int(SECONDS) + 540)
def test_nemesis(workdir, fake_fcm):
    seed = int(os.environ.get("NEMESIS_SEED") or random.SystemRandom().randrange(1, 10**6))
    directory = os.path.join(workdir, f"nemesis-{seed}-{uuid.uuid4().hex[:6]}")
    broker = FaultyTansu(os.path.join(directory, "tansu"))
    try:
        broker.start()
        path, report = nemesis.run(nemesis.Params(seed=seed, seconds=SECONDS), directory, broker, fake_fcm)
    finally:
        broker.stop()
    text = "\n".join(report.lines())
    print(f"\nnemesis seed {seed}, history {path}\n{text}")
    assert report.ok, (f"nemesis seed {seed} (NEMESIS_SEED={seed} to run the same schedule), history {path}:\n"
                       + text)
