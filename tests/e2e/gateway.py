"""Running the push-gateway binary under test: configuration file, process, readiness, REST and metrics."""

from __future__ import annotations

import os
import re
import signal
import urllib.parse
from dataclasses import dataclass
from typing import Optional

import pytest
import requests
import yaml

from procutil import ManagedProcess, free_port, wait_for

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULT_BIN = os.path.join(REPO_ROOT, ".build", "debug", "push-gateway")

READY_TIMEOUT = 60.0  # a consumer-group join takes seconds
STOP_GRACE = 10.0

# librdkafka properties handed to the gateway: a short session timeout makes consumer-group joins on Tansu
# take ~3 s instead of ~half the default 45 s session timeout.
FAST_GROUP_PROPERTIES = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}


def gateway_binary() -> str:
    """The binary under test (env PUSH_GATEWAY_BIN). A missing binary is a failure, never a skip."""
    path = os.environ.get("PUSH_GATEWAY_BIN", DEFAULT_BIN)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(
            f"push-gateway binary not found or not executable at {path!r}. Build it first "
            f"(`swift build` in {REPO_ROOT}) or point PUSH_GATEWAY_BIN at it.",
            pytrace=False,
        )
    return path


def gateway_env(extra: Optional[dict] = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PUSH_")}
    lib = os.path.join(REPO_ROOT, ".deps", "lib")
    env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    if extra:
        env.update(extra)
    return env


CLUSTER_SECRET = "e2e-cluster-secret-0123456789abcdef0123456789"


def make_config(*, http_port: int, brokers: str, group_id: str, changes_topic: str, dlq_topic: str, state_topic: str,
                fcm_base_url: str, fcm_ca_file: str, apps: dict, kafka_properties: Optional[dict] = None) -> dict:
    """The gateway's configuration for a test. A cleartext (h2c) fake FCM needs ``allowInsecureEndpoints``, which
    is set only then: the gateway refuses http:// provider endpoints without it."""
    config = {
        "http": {"host": "127.0.0.1", "port": http_port},
        "kafka": {
            "brokers": brokers,
            "groupId": group_id,
            "changesTopic": changes_topic,
            "deadLetterTopic": dlq_topic,
            "stateTopic": state_topic,
            "properties": dict(FAST_GROUP_PROPERTIES, **(kafka_properties or {})),
        },
        "fcm": {"baseURL": fcm_base_url, "caFile": fcm_ca_file},
        "logging": {"format": "json", "level": "info"},
        # The replicas of a test share the secret that signs forwarded calls and members records.
        "cluster": {"secret": CLUSTER_SECRET},
        "apps": apps,
    }
    if fcm_base_url.startswith("http://"):
        config["allowInsecureEndpoints"] = True
    return config


def write_config(path: str, config: dict) -> str:
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(config, f, sort_keys=False, allow_unicode=True)
    return path


def wakeup_url(base: str, app: str, path: str, **query: Optional[str]) -> str:
    """``{base}/base/{app}/.wakeup{path}?…`` with every path key percent-encoded (``/`` kept)."""
    quoted = urllib.parse.quote(path, safe="/")
    if quoted and not quoted.startswith("/"):
        quoted = "/" + quoted
    q = urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
    return f"{base}/base/{urllib.parse.quote(app, safe='')}/.wakeup{quoted}" + (f"?{q}" if q else "")


@dataclass
class Sample:
    name: str
    labels: str
    value: float


class Gateway:
    """One push-gateway process. ``argv`` defaults to ``run --config <config_path>``."""

    def __init__(self, workdir: str, *, config: Optional[dict] = None, http_port: Optional[int] = None,
                 env: Optional[dict] = None, name: str = "gateway"):
        self.workdir = workdir
        self.binary = gateway_binary()
        self.config = config
        self.http_port = http_port or (config["http"]["port"] if config else free_port())
        self.base = f"http://127.0.0.1:{self.http_port}"
        self.env = env or {}
        self.name = name
        self.config_path: Optional[str] = None
        if config is not None:
            self.config_path = write_config(os.path.join(workdir, f"{name}-config.yaml"), config)
        self.proc: Optional[ManagedProcess] = None
        self.session = requests.Session()

    # -- lifecycle -----------------------------------------------------------------------------------------

    def start(self, wait_ready: bool = True, timeout: float = READY_TIMEOUT) -> "Gateway":
        argv = [self.binary, "run"]
        if self.config_path:
            argv += ["--config", self.config_path]
        self.proc = ManagedProcess(self.name, argv, self.workdir, env=gateway_env(self.env)).start()
        if wait_ready:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        def ready() -> bool:
            if not self.proc.alive():
                raise AssertionError(f"gateway exited before becoming ready\n{self.proc.tails()}")
            try:
                return self.session.get(self.base + "/readyz", timeout=2).status_code == 200
            except requests.RequestException:
                return False

        wait_for(ready, timeout=timeout, interval=0.25, what=f"GET {self.base}/readyz == 200",
                 on_timeout=self.proc.tails)

    def stop(self, grace: float = STOP_GRACE) -> Optional[int]:
        """SIGTERM, SIGKILL after ``grace``. Returns the exit code, or None when it had to be killed."""
        if self.proc is None:
            return None
        return self.proc.stop(grace)

    def kill(self, timeout: float = 10.0) -> Optional[int]:
        """kill -9: no graceful shutdown, nothing flushed or committed."""
        self.proc.signal(signal.SIGKILL)
        return self.proc.wait(timeout)

    def terminate_and_wait(self, timeout: float) -> Optional[int]:
        self.proc.signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def assert_alive(self) -> None:
        assert self.proc is not None and self.proc.alive(), f"gateway is not running\n{self.proc.tails()}"

    def tails(self) -> str:
        return self.proc.tails() if self.proc else "<gateway not started>"

    def logs(self) -> str:
        return self.proc.stdout() + "\n" + self.proc.stderr()

    # -- REST ----------------------------------------------------------------------------------------------

    def subscribe(self, app: str, path: str, device: Optional[str], mode: Optional[str] = None,
                  **extra: Optional[str]) -> requests.Response:
        return self.session.put(wakeup_url(self.base, app, path, id=device, mode=mode, **extra), timeout=10)

    def unsubscribe(self, app: str, path: str, device: Optional[str], **extra: Optional[str]) -> requests.Response:
        return self.session.delete(wakeup_url(self.base, app, path, id=device, **extra), timeout=10)

    def must_subscribe(self, app: str, path: str, device: str, mode: Optional[str] = None) -> None:
        r = self.subscribe(app, path, device, mode)
        assert r.status_code == 204, f"PUT subscription {app}{path} mode={mode}: {r.status_code} {r.text!r}"

    def get(self, path: str) -> requests.Response:
        return self.session.get(self.base + path, timeout=10)

    # -- metrics -------------------------------------------------------------------------------------------

    def metrics_text(self) -> str:
        r = self.get("/metrics")
        assert r.status_code == 200, f"GET /metrics: {r.status_code} {r.text[:500]!r}"
        return r.text

    def metrics(self) -> list[Sample]:
        return parse_prometheus(self.metrics_text())


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+\d+)?$")


def parse_prometheus(text: str) -> list[Sample]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise AssertionError(f"not a Prometheus sample line: {line!r}")
        out.append(Sample(m.group(1), m.group(2) or "", float(m.group(3))))
    return out


def counter_types(text: str) -> dict[str, str]:
    types = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0] == "#" and parts[1] == "TYPE":
            types[parts[2]] = parts[3]
    return types


def sum_matching(samples: list[Sample], *needles: str, exclude: tuple[str, ...] = ("_bucket", "_sum", "_count",
                                                                                   "_created")) -> float:
    """Sum of every sample whose metric name contains all ``needles`` (case-insensitive)."""
    total = 0.0
    for s in samples:
        n = s.name.lower()
        if all(x in n for x in needles) and not any(n.endswith(e) for e in exclude):
            total += s.value
    return total


def events_consumed(samples: list[Sample]) -> float:
    """Change events consumed, from whichever counter family says so (names are the gateway's to choose):
    a family containing "event" and "consum", else every family containing "events"."""
    total = sum_matching(samples, "event", "consum")
    return total if any("event" in s.name.lower() and "consum" in s.name.lower() for s in samples) \
        else sum_matching(samples, "events")


def notifications_count(samples: list[Sample]) -> float:
    return sum_matching(samples, "notification")
