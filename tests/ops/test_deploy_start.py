"""The rendered manifests start the real binary (not string checks: test_deploy.py does those).

For each overlay, the gateway container of `kubectl kustomize deploy/overlays/<overlay>` is run as a kubelet would
run it, with the real binary (PUSH_GATEWAY_BIN) instead of the image:

- its environment: the image's `ENV` (Dockerfile), then `envFrom` and `env` in order, `$(VAR)` resolved against
  the entries before it as Kubernetes does, `valueFrom` from the downward API (pod IP 127.0.0.1), the rendered
  ConfigMaps and the production overlay's example Secrets (secrets.example.yaml);
- its command and args (the image's `ENTRYPOINT`/`CMD` where the container sets none);
- its volumes: the ConfigMaps' and Secrets' files written to a temporary directory, every mount path in the
  args, the environment and the ConfigMaps' files rewritten to that directory;
- its network: a network namespace of its own standing for the pod's, so every port is the manifests' own
  (8080, the embedded broker's 9092) and nothing else on the machine can collide with them.

Two substitutions only, for a real broker in the test: `kafka.brokers` (and PUSH_KAFKA_BROKERS) point at a Tansu
broker started in the same namespace, whose topics are created as the configuration names them, and the Kafka
security properties (`security.*`, `sasl.*`, `ssl.*`) are dropped (Tansu speaks PLAINTEXT). FCM and HMS are not
reachable from the namespace: the gateway starts without them.

Then: GET /healthz answers 200, GET /readyz too (both overlays' configurations allow it: the embedded broker, or
the test broker), the process stays up and healthy for STAY_UP_SECONDS, and SIGTERM ends it with exit status 0.
Needs root (ip netns), as scripts/test-ops runs.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest
import yaml

from conftest import tool
from gateway import gateway_binary, gateway_env
from kafka_util import tansu_binary
from procutil import ManagedProcess, wait_for
from test_deploy import OVERLAYS, _stages, container, example_secrets, kinds, one, pod

pytestmark = pytest.mark.gateway

POD_IP = "127.0.0.1"
POD_NAME = "push-gateway-0"
TEST_BROKER_PORT = 19092
STAY_UP_SECONDS = 5.0
READY_TIMEOUT = 90.0  # a consumer-group join on Tansu with the default session timeout takes ~25 s
# The gateway's own bound (shutdown.drainSeconds + 5 s watchdog) and a margin.
STOP_TIMEOUT = 30.0
# Partitions of the topics the configuration names (docs/OPERATIONS.md, "Topics"): the change and the state topic
# have the HorizontalPodAutoscaler's maxReplicas, the members topic 1.
SMALL_TOPIC_PARTITIONS = 3

_KAFKA_PROBE = """
import json, sys
from confluent_kafka.admin import AdminClient
md = AdminClient({"bootstrap.servers": sys.argv[1], "socket.timeout.ms": 2000}).list_topics(timeout=3)
print(json.dumps({name: len(t.partitions) for name, t in md.topics.items() if t.error is None}))
"""


class PodNetwork:
    """A named network namespace (ip netns) with only a loopback interface up: the pod's network."""

    def __init__(self):
        if os.geteuid() != 0:
            pytest.fail("a network namespace needs root (scripts/test-ops runs as root)", pytrace=False)
        self.name = f"push-gateway-test-{uuid.uuid4().hex[:8]}"
        self.nsenter = tool("nsenter")
        self._ip = tool("ip")
        subprocess.run([self._ip, "netns", "add", self.name], check=True, timeout=30)
        subprocess.run([self._ip, "-n", self.name, "link", "set", "lo", "up"], check=True, timeout=30)

    def argv(self, argv: list[str]) -> list[str]:
        # Only the network namespace changes (the mount namespace, /sys and the cgroups stay the machine's);
        # nsenter execs the command, so signals reach it directly.
        return [self.nsenter, f"--net=/run/netns/{self.name}", "--"] + argv

    def run(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(argv), capture_output=True, text=True, timeout=timeout)

    def http_get(self, port: int, path: str) -> tuple[int, str]:
        r = self.run([tool("curl"), "-s", "-m", "2", "-w", "\n%{http_code}", f"http://{POD_IP}:{port}{path}"], 10)
        body, _, status = r.stdout.rpartition("\n")
        return int(status or 0), body

    def delete(self) -> None:
        subprocess.run([self._ip, "netns", "delete", self.name], timeout=30)


class NamespacedTansu:
    """A Tansu broker (in-memory storage) inside the pod's network namespace."""

    def __init__(self, network: PodNetwork, workdir: str):
        self.network = network
        self.bootstrap = f"{POD_IP}:{TEST_BROKER_PORT}"
        url = f"tcp://{self.bootstrap}"
        self.url = url
        self.proc = ManagedProcess("tansu", network.argv([
            tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/"]), workdir)

    def topics(self) -> dict[str, int] | None:
        """Topic name -> partitions, from the broker's metadata; None while it does not answer."""
        if not self.proc.alive():
            raise AssertionError(f"tansu exited\n{self.proc.tails()}")
        r = self.network.run([sys.executable, "-c", _KAFKA_PROBE, self.bootstrap], 30)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def start(self) -> "NamespacedTansu":
        self.proc.start()
        wait_for(lambda: self.topics() is not None, timeout=30, interval=0.2, what=f"tansu metadata on {self.bootstrap}",
                 on_timeout=self.proc.tails)
        return self

    def create_topics(self, partitions: dict[str, int]) -> None:
        for name, count in partitions.items():
            r = self.network.run([tansu_binary(), "topic", "create", name, "--partitions", str(count),
                                  "--broker", self.url], 30)
            assert r.returncode == 0, f"tansu topic create {name}: {r.stdout}{r.stderr}"
        wait_for(lambda: all((self.topics() or {}).get(n) == c for n, c in partitions.items()), timeout=30,
                 what=f"topics {partitions}")

    def stop(self) -> None:
        self.proc.stop(5)


# ------------------------------------------------------------------------------------------ the pod, resolved

_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand(value: str, defined: dict[str, str]) -> str:
    """Kubernetes' expansion: $(VAR) of a variable defined before, unchanged when undefined; $$ is a $."""
    return _REFERENCE.sub(lambda m: "$" if m.group(0) == "$$" else defined.get(m.group(1), m.group(0)), value)


def _secret_data(secret: dict) -> dict[str, bytes]:
    out = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
    out.update({k: v.encode() for k, v in (secret.get("stringData") or {}).items()})
    return out


def _source(overlay: str, kind: str, name: str) -> dict[str, bytes]:
    """The files of a ConfigMap (rendered) or a Secret (the example Secrets: never rendered, never applied)."""
    if kind == "ConfigMap":
        cm = one(overlay, "ConfigMap", name)
        return {k: v.encode() for k, v in (cm.get("data") or {}).items()}
    secrets = example_secrets()
    assert name in secrets, f"{overlay}: Secret {name} is not in secrets.example.yaml"
    return _secret_data(secrets[name])


def _field(overlay: str, path: str) -> str:
    fields = {"status.podIP": POD_IP, "status.hostIP": POD_IP, "metadata.name": POD_NAME,
              "metadata.namespace": one(overlay, "Deployment")["metadata"]["namespace"]}
    assert path in fields, f"{overlay}: fieldRef {path} is not emulated by this test"
    return fields[path]


def _dockerfile(instruction: str) -> list[tuple[str, str]]:
    return [(i, a) for i, a in _stages()[-1] if i == instruction]


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for _, args in _dockerfile("ENV"):
        env.update(re.findall(r"(\w+)=(\S+)", args))
    return env


def container_env(overlay: str) -> dict[str, str]:
    c = container(overlay)
    env = image_env()
    for source in c.get("envFrom", []):
        kind, ref = ("ConfigMap", source["configMapRef"]) if "configMapRef" in source else ("Secret", source["secretRef"])
        env.update({source.get("prefix", "") + k: v.decode() for k, v in _source(overlay, kind, ref["name"]).items()})
    for entry in c.get("env", []):
        name = entry["name"]
        if "value" in entry:
            env[name] = expand(entry["value"], env)
        elif "valueFrom" in entry:
            ref = entry["valueFrom"]
            if "fieldRef" in ref:
                env[name] = _field(overlay, ref["fieldRef"]["fieldPath"])
            elif "secretKeyRef" in ref or "configMapKeyRef" in ref:
                kind, key_ref = ("Secret", ref["secretKeyRef"]) if "secretKeyRef" in ref else ("ConfigMap", ref["configMapKeyRef"])
                data = _source(overlay, kind, key_ref["name"])
                assert key_ref["key"] in data or key_ref.get("optional"), f"{overlay}: {kind} {key_ref}: no such key"
                if key_ref["key"] in data:
                    env[name] = data[key_ref["key"]].decode()
            else:
                pytest.fail(f"{overlay}: env {name}: valueFrom {ref} is not emulated by this test")
        else:
            env[name] = ""
    return env


def command_line(overlay: str, env: dict[str, str]) -> list[str]:
    """command + args as the kubelet builds them (the image's ENTRYPOINT and CMD as defaults), $(VAR) expanded."""
    c = container(overlay)
    entrypoint = json.loads(_dockerfile("ENTRYPOINT")[-1][1])
    cmd = json.loads(_dockerfile("CMD")[-1][1])
    command = c.get("command", entrypoint)
    args = c["args"] if "args" in c else ([] if "command" in c else cmd)
    argv = [expand(a, env) for a in command + args]
    assert argv[0] == "push-gateway", f"{overlay}: the container runs {argv[0]}, not the gateway"
    return argv


def write_volumes(overlay: str, root: str) -> list[str]:
    """Writes the container's ConfigMap, Secret and emptyDir volumes under root; returns the mount paths."""
    volumes = {v["name"]: v for v in pod(overlay)["volumes"]}
    mounts = []
    for mount in container(overlay).get("volumeMounts", []):
        assert "subPath" not in mount, f"{overlay}: subPath mounts are not emulated by this test"
        volume = volumes[mount["name"]]
        target = root + mount["mountPath"]
        os.makedirs(target, exist_ok=True)
        mounts.append(mount["mountPath"])
        if "emptyDir" in volume:
            continue
        if "configMap" in volume:
            spec, files = volume["configMap"], _source(overlay, "ConfigMap", volume["configMap"]["name"])
        elif "secret" in volume:
            spec, files = volume["secret"], _source(overlay, "Secret", volume["secret"]["secretName"])
        else:
            pytest.fail(f"{overlay}: volume {volume} is not emulated by this test")
        items = spec.get("items")
        paths = {i["key"]: i["path"] for i in items} if items is not None else {k: k for k in files}
        for key, path in paths.items():
            assert key in files, f"{overlay}: volume {mount['name']}: no key {key}"
            with open(os.path.join(target, path), "wb") as f:
                f.write(files[key])
    return mounts


class Rewriter:
    """Every mount path (a whole path component sequence) moved under root, in one pass."""

    def __init__(self, root: str, mounts: list[str]):
        self.root = root
        alternatives = "|".join(re.escape(m) for m in sorted(mounts, key=len, reverse=True))
        self.pattern = re.compile(rf"(?<![\w./-])(?:{alternatives})(?![\w.-])")

    def __call__(self, text: str) -> str:
        return self.pattern.sub(lambda m: self.root + m.group(0), text)


class StartedPod:
    def __init__(self, overlay: str, workdir: str):
        self.overlay = overlay
        self.workdir = workdir
        self.root = os.path.join(workdir, "pod")
        self.network = PodNetwork()
        self.broker: NamespacedTansu | None = None
        self.proc: ManagedProcess | None = None
        self.port = next(p["containerPort"] for p in container(overlay)["ports"] if p["name"] == "http")

    def prepare(self) -> list[str]:
        """The environment, the files and the broker; returns argv (the real binary first)."""
        mounts = write_volumes(self.overlay, self.root)
        rewrite = Rewriter(self.root, mounts)
        # The ConfigMaps' files name paths of the other volumes (appSettings.directory, credentials files).
        volumes = {v["name"]: v for v in pod(self.overlay)["volumes"]}
        for mount in container(self.overlay).get("volumeMounts", []):
            if "configMap" in volumes[mount["name"]]:
                directory = self.root + mount["mountPath"]
                for name in os.listdir(directory):
                    path = os.path.join(directory, name)
                    with open(path, encoding="utf-8") as f:
                        text = f.read()
                    with open(path, "w", encoding="utf-8") as f:
                        f.write(rewrite(text))
        self.env = {k: rewrite(v) for k, v in container_env(self.overlay).items()}
        argv = [rewrite(a) for a in command_line(self.overlay, container_env(self.overlay))]
        config_path = argv[argv.index("--config") + 1] if "--config" in argv else self.env.get("PUSH_GATEWAY_CONFIG")
        assert config_path and config_path.startswith(self.root), f"{self.overlay}: the configuration is not a mounted file"
        with open(config_path, encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
        kafka = config.setdefault("kafka", {})
        if kafka.get("brokers") or self.env.get("PUSH_KAFKA_BROKERS"):
            self.broker = NamespacedTansu(self.network, os.path.join(self.workdir, "tansu")).start()
            self.broker.create_topics(self.topics(kafka))
            kafka["brokers"] = self.broker.bootstrap
            if self.env.get("PUSH_KAFKA_BROKERS"):
                self.env["PUSH_KAFKA_BROKERS"] = self.broker.bootstrap
            kafka["properties"] = {k: v for k, v in (kafka.get("properties") or {}).items()
                                   if not k.startswith(("security.", "sasl.", "ssl."))}
            with open(config_path, "w", encoding="utf-8") as f:
                yaml.safe_dump(config, f, sort_keys=False)
        return [gateway_binary()] + argv[1:]

    def topics(self, kafka: dict) -> dict[str, int]:
        """The topics the configuration names (environment first), as docs/OPERATIONS.md creates them."""
        def name(key: str, variable: str, default: str) -> str:
            return self.env.get(variable) or kafka.get(key) or default

        partitions = one(self.overlay, "HorizontalPodAutoscaler")["spec"]["maxReplicas"] \
            if "HorizontalPodAutoscaler" in kinds(self.overlay) else 4
        return {
            name("changesTopic", "PUSH_KAFKA_CHANGES_TOPIC", "datasync.changes"): partitions,
            name("stateTopic", "PUSH_KAFKA_STATE_TOPIC", "push.state"): partitions,
            name("userNotificationsTopic", "PUSH_KAFKA_USER_NOTIFICATIONS_TOPIC", "push.notifications"): partitions,
            name("deadLetterTopic", "PUSH_KAFKA_DLQ_TOPIC", "push.dlq"): SMALL_TOPIC_PARTITIONS,
            name("snapshotRequestsTopic", "PUSH_KAFKA_SNAPSHOT_REQUESTS_TOPIC", "push.snapshot-requests"): SMALL_TOPIC_PARTITIONS,
            name("membersTopic", "PUSH_KAFKA_MEMBERS_TOPIC", "push.members"): 1,
        }

    def start(self) -> None:
        argv = self.prepare()
        # The machine's PATH and library path (LD_LIBRARY_PATH for librdkafka), none of its PUSH_* variables,
        # then exactly the container's environment.
        env = gateway_env()
        env.update(self.env)
        self.proc = ManagedProcess(f"gateway-{self.overlay}", self.network.argv(argv), self.workdir, env=env)
        self.proc.start()

    def get(self, path: str) -> tuple[int, str]:
        if not self.proc.alive():
            raise AssertionError(f"the gateway exited with status {self.proc.popen.returncode}\n{self.proc.tails()}")
        return self.network.http_get(self.port, path)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(5)
        if self.broker is not None:
            self.broker.stop()
        self.network.delete()


@pytest.fixture
def started(tmp_path):
    pods: list[StartedPod] = []

    def start(overlay: str) -> StartedPod:
        p = StartedPod(overlay, str(tmp_path / overlay))
        pods.append(p)
        p.start()
        return p

    try:
        yield start
    finally:
        for p in pods:
            p.stop()


def test_expand_follows_kubernetes():
    defined = {"POD_IP": "10.0.0.5"}
    assert expand("http://$(POD_IP):8080", defined) == "http://10.0.0.5:8080"
    assert expand("$(LATER):1", defined) == "$(LATER):1", "a variable defined after (or never) stays as written"
    assert expand("$$(POD_IP)", defined) == "$(POD_IP)", "$$ escapes"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_manifests_start_the_gateway(overlay, started):
    p = started(overlay)
    wait_for(lambda: p.get("/healthz")[0] == 200, timeout=60, interval=0.2, what=f"{overlay}: GET /healthz = 200",
             on_timeout=p.proc.tails)
    wait_for(lambda: p.get("/readyz")[0] == 200, timeout=READY_TIMEOUT, interval=0.5,
             what=f"{overlay}: GET /readyz = 200", on_timeout=lambda: f"{p.get('/readyz')}\n{p.proc.tails()}")
    # Stays up: healthy and ready at every look for a few seconds (the manifests' probes, as the kubelet polls).
    deadline = time.monotonic() + STAY_UP_SECONDS
    while time.monotonic() < deadline:
        for path in ("/healthz", "/readyz"):
            status, body = p.get(path)
            assert status == 200, f"{overlay}: {path} {status} {body}\n{p.proc.tails()}"
        p.proc.wait(0.5)  # bounded: returns at once if the process ends, which the next get() reports
    p.proc.signal(signal.SIGTERM)
    code = p.proc.wait(STOP_TIMEOUT)
    assert code == 0, f"{overlay}: exit status {code} after SIGTERM\n{p.proc.tails()}"
    assert '"msg":"stopped"' in p.proc.stderr() + p.proc.stdout(), f"{overlay}: no graceful stop logged\n{p.proc.tails()}"
