"""Deployment artefacts: the Kubernetes overlays (deploy/), the Dockerfile and .dockerignore.

No cluster and no container engine needed: each overlay is rendered with `kubectl kustomize` (kustomize v5) and
every rendered manifest is validated against the Kubernetes OpenAPI schemas (kubernetes-validate, strict), then
cross-checked: with each other, with docs/openapi.json (probe and Ingress paths), with docs/CONFIGURATION.md (the
configuration's keys), with the Secrets the production overlay expects (secrets.example.yaml), with the image
scripts/image builds, and with the shutdown timings. The Dockerfile is parsed and linted with hadolint.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import re
import subprocess

import pytest
import yaml

from conftest import ROOT, tool

DEPLOY = os.path.join(ROOT, "deploy")
OVERLAYS = ["development", "production"]
KUBERNETES_VERSIONS = ["1.29.0", "1.33.0"]
NAMESPACE = "push-gateway"
LABEL = {"app.kubernetes.io/name": NAMESPACE}
SECRETS_EXAMPLE = os.path.join(DEPLOY, "overlays", "production", "secrets.example.yaml")
# Configuration keys and PUSH_* variables the manifests set before docs/CONFIGURATION.md lists them: settings the
# gateway is gaining (issue 17; an older binary ignores them). Once documented, an entry here is dead: remove it.
PLANNED_KEYS: set[str] = set()
PLANNED_ENV: set[str] = set()
# The state's high-water mark (PUSH_STATE_MAX_REPLICA_BYTES) as a share of the container's memory limit.
STATE_SHARE_OF_MEMORY_LIMIT = (0.55, 0.65)
# ingress-nginx keeps idle upstream connections this long (upstream-keepalive-timeout); the gateway must keep them longer.
INGRESS_UPSTREAM_KEEPALIVE_MS = 60000
# Kafka's consumer close, offset commit and leave-group, beyond the longest provider request, at shutdown.
KAFKA_CLOSE_SECONDS = 5
# The gateway ends at most this long after its drain bound (Sources/Gateway/GatewayApp.swift, ShutdownWatchdog).
WATCHDOG_MARGIN_SECONDS = 5


def _read(*parts: str) -> str:
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


@functools.cache
def render(overlay: str) -> tuple[dict, ...]:
    r = subprocess.run([tool("kubectl"), "kustomize", os.path.join(DEPLOY, "overlays", overlay)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Warning" not in r.stderr, r.stderr  # no deprecated kustomization fields
    return tuple(d for d in yaml.safe_load_all(r.stdout) if d)


def kinds(overlay: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for doc in render(overlay):
        out.setdefault(doc["kind"], []).append(doc)
    return out


def one(overlay: str, kind: str, name: str | None = None) -> dict:
    docs = [d for d in kinds(overlay).get(kind, []) if name is None or d["metadata"]["name"] == name]
    assert len(docs) == 1, f"{overlay}: expected one {kind} {name or ''}, got {len(docs)}"
    return docs[0]


def pod(overlay: str) -> dict:
    return one(overlay, "Deployment")["spec"]["template"]["spec"]


def container(overlay: str) -> dict:
    containers = pod(overlay)["containers"]
    assert len(containers) == 1
    return containers[0]


def config(overlay: str) -> dict:
    """The gateway's config.yaml, from the ConfigMap the container's --config names."""
    c = container(overlay)
    path = c["args"][c["args"].index("--config") + 1]
    directory, name = os.path.split(path)
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == directory)
    volume = next(v for v in pod(overlay)["volumes"] if v["name"] == mount["name"])
    cm = one(overlay, "ConfigMap", volume["configMap"]["name"])
    return yaml.safe_load(cm["data"][name])


def mounted_files(overlay: str, secrets: dict[str, dict] | None = None) -> dict[str, tuple[str, str]]:
    """Every file the container sees from ConfigMaps and Secrets: path -> (kind/name, key)."""
    c = container(overlay)
    volumes = {v["name"]: v for v in pod(overlay)["volumes"]}
    configmaps = {d["metadata"]["name"]: d for d in kinds(overlay).get("ConfigMap", [])}
    out = {}
    for mount in c["volumeMounts"]:
        v = volumes[mount["name"]]
        if "configMap" in v:
            source, keys = f"ConfigMap/{v['configMap']['name']}", list(configmaps[v["configMap"]["name"]]["data"])
        elif "secret" in v:
            name = v["secret"]["secretName"]
            secret = (secrets or {}).get(name, {})
            source = f"Secret/{name}"
            keys = list(secret.get("stringData", {})) + list(secret.get("data", {}))
        else:
            continue
        items = v.get("configMap", v.get("secret", {})).get("items")
        for key in keys:
            path = key
            if items is not None:
                item = next((i for i in items if i["key"] == key), None)
                if item is None:
                    continue
                path = item["path"]
            out[f"{mount['mountPath']}/{path}"] = (source, key)
    return out


def example_secrets() -> dict[str, dict]:
    with open(SECRETS_EXAMPLE, encoding="utf-8") as f:
        return {d["metadata"]["name"]: d for d in yaml.safe_load_all(f) if d}


def image_script_default() -> str:
    m = re.search(r'^IMAGE=\$\{IMAGE:-([^}]+)\}$', _read("scripts", "image"), re.M)
    assert m, "scripts/image sets no default IMAGE"
    return m.group(1)


# ---------------------------------------------------------------------------------------------------- schemas

def test_kubectl_has_kustomize_v5():
    r = subprocess.run([tool("kubectl"), "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kustomizeVersion"].startswith("v5."), r.stdout


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_manifests_validate_against_kubernetes_schemas(overlay, version):
    import kubernetes_validate

    docs = render(overlay)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_example_secrets_validate_and_are_not_applied(version):
    import kubernetes_validate

    secrets = example_secrets()
    assert set(secrets) == {"push-gateway-kafka", "push-gateway-fcm", "push-gateway-hms", "push-gateway-tls", "push-gateway-admin",
                            "push-gateway-cluster"}
    for doc in secrets.values():
        kubernetes_validate.validate(doc, version, strict=True)
        assert doc["metadata"]["namespace"] == NAMESPACE
    # Applying the overlay never overwrites the real Secrets with placeholders.
    assert "Secret" not in kinds("production")
    assert "secrets.example.yaml" not in _read("deploy", "overlays", "production", "kustomization.yaml").split("resources:")[1].split("images:")[0]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_everything_in_the_namespace_and_labelled(overlay):
    for doc in render(overlay):
        if doc["kind"] == "Namespace":
            assert doc["metadata"]["name"] == NAMESPACE
        else:
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["kind"]
        assert LABEL.items() <= doc["metadata"]["labels"].items(), doc["kind"]
    d = one(overlay, "Deployment")["spec"]
    assert d["selector"]["matchLabels"] == LABEL
    assert LABEL.items() <= d["template"]["metadata"]["labels"].items()
    assert one(overlay, "Service")["spec"]["selector"] == LABEL


# ------------------------------------------------------------------------------------------------------ image

def test_development_deploys_the_image_scripts_image_builds():
    assert container("development")["image"] == image_script_default() == "localhost/push-gateway:0.1.0"


def test_production_deploys_the_same_tag_from_a_registry():
    built = image_script_default()
    image = container("production")["image"]
    assert image.rsplit(":", 1)[1] == built.rsplit(":", 1)[1], (image, built)
    assert image.split("/", 1)[0] not in ("localhost", "docker.io") and "/" in image, image


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_runs_as_the_images_non_root_user(overlay):
    p, c = pod(overlay), container(overlay)
    assert p["securityContext"]["runAsNonRoot"] is True
    assert p["securityContext"]["runAsUser"] == int(_dockerfile_user().split(":")[0])
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]


# ------------------------------------------------------------------------------------------ cross-references

@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_use_documented_endpoints_on_the_configured_port(overlay):
    c = container(overlay)
    paths = json.loads(_read("docs", "openapi.json"))["paths"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"http": config(overlay)["http"]["port"]}, "container port = the config's http.port"
    assert config(overlay)["http"]["host"] == "0.0.0.0"
    probes = {name: c[name]["httpGet"] for name in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert probes["livenessProbe"]["path"] == "/healthz"
    assert probes["readinessProbe"]["path"] == "/readyz"
    for name, probe in probes.items():
        assert "get" in paths.get(probe["path"], {}), f"{name} path {probe['path']} is not in docs/openapi.json"
        assert ports.get(probe["port"], probe["port"]) == ports["http"], name
    svc = one(overlay, "Service")["spec"]
    assert svc["type"] == "ClusterIP"
    assert svc["ports"] == [{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}]
    ann = one(overlay, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert ann["prometheus.io/path"] in paths and int(ann["prometheus.io/port"]) == ports["http"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_advertised_address_is_the_pod_ip_and_port(overlay):
    env = container(overlay)["env"]
    names = [e["name"] for e in env]
    pod_ip = next(e for e in env if e["name"] == "POD_IP")
    assert pod_ip["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    advertised = next(e for e in env if e["name"] == "PUSH_HTTP_ADVERTISED_ADDRESS")
    # A URL (the gateway refuses a bare host:port and exits 2; test_deploy_start.py starts the binary with it).
    assert advertised["value"] == f"http://$(POD_IP):{container(overlay)['ports'][0]['containerPort']}"
    assert names.index("POD_IP") < names.index("PUSH_HTTP_ADVERTISED_ADDRESS"), "$(POD_IP) is defined before use"


def _documented_config() -> dict:
    """The YAML example of docs/CONFIGURATION.md: every key the gateway reads."""
    m = re.search(r"```yaml\n(.*?)```", _read("docs", "CONFIGURATION.md"), re.S)
    assert m, "docs/CONFIGURATION.md has no ```yaml block"
    return yaml.safe_load(m.group(1))


def _undocumented_keys(actual: dict, documented: dict, where: str = "") -> list[str]:
    missing = []
    for key, value in actual.items():
        if where in ("apps", "kafka.properties"):
            # apps.<name> (any name, each with the documented app keys); free-form librdkafka properties.
            if where == "apps":
                assert isinstance(value, dict), f"apps.{key}"
                missing += _undocumented_keys(value, next(iter(documented.values())), f"apps.{key}")
            continue
        path = f"{where}.{key}" if where else key
        if key not in documented:
            if path not in PLANNED_KEYS:
                missing.append(path)
        elif isinstance(value, dict) and isinstance(documented[key], dict):
            missing += _undocumented_keys(value, documented[key], path)
    return missing


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_config_uses_documented_keys(overlay):
    assert _undocumented_keys(config(overlay), _documented_config()) == []
    assert config(overlay)["logging"]["format"] == "json"


def test_development_is_the_embedded_defaults():
    c = config("development")
    assert c["kafka"]["brokers"] == "" and "apps" not in c and "appSettings" not in c, "embedded broker, demo app"
    assert one("development", "Deployment")["spec"]["replicas"] == 1, "the broker lives in the one pod"
    assert one("development", "Deployment")["spec"]["strategy"] == {"type": "Recreate"}
    for kind in ("HorizontalPodAutoscaler", "PodDisruptionBudget", "Ingress", "NetworkPolicy", "Secret"):
        assert kind not in kinds("development"), kind
    assert not any("secret" in v for v in pod("development")["volumes"])


def test_production_config_names_every_topic():
    kafka = config("production")["kafka"]
    assert kafka["brokers"] and kafka["brokers"] != ""
    assert {kafka[k] for k in ("changesTopic", "deadLetterTopic", "stateTopic", "snapshotRequestsTopic", "membersTopic")} == {
        "datasync.changes", "push.dlq", "push.state", "push.snapshot-requests", "push.members"}
    ops = _read("docs", "OPERATIONS.md")
    for topic in ("datasync.changes", "push.dlq", "push.state", "push.snapshot-requests", "push.members"):
        assert f"kafka-topics.sh --bootstrap-server" in ops and f"--topic {topic}" in ops, f"no command creates {topic}"


def test_production_credentials_come_from_the_example_secrets():
    secrets = example_secrets()
    files = mounted_files("production", secrets)
    c = config("production")
    # Kafka: the CA file and the SASL credentials.
    assert files[c["kafka"]["properties"]["ssl.ca.location"]] == ("Secret/push-gateway-kafka", "ca.crt")
    env = {e["name"]: e for e in container("production")["env"]}
    for name, key in (("PUSH_KAFKA_SASL_USERNAME", "username"), ("PUSH_KAFKA_SASL_PASSWORD", "password")):
        ref = env[name]["valueFrom"]["secretKeyRef"]
        assert key in secrets[ref["name"]]["stringData"] and ref["key"] == key
    assert c["kafka"]["properties"]["security.protocol"] == "SASL_SSL"
    # The apps: files of the push-gateway-apps ConfigMap, mounted where appSettings.directory says.
    apps_dir = c["appSettings"]["directory"]
    app_files = {p: v for p, v in files.items() if os.path.dirname(p) == apps_dir}
    assert app_files, f"nothing mounted at {apps_dir}"
    for path, (source, key) in app_files.items():
        assert source == "ConfigMap/push-gateway-apps"
        settings = yaml.safe_load(one("production", "ConfigMap", "push-gateway-apps")["data"][key])
        app = os.path.splitext(key)[0]
        assert files[settings["fcmServiceAccountFile"]] == ("Secret/push-gateway-fcm", f"{app}.json")
        json.loads(secrets["push-gateway-fcm"]["stringData"][f"{app}.json"])
        assert files[settings["hms"]["clientSecretFile"]] == ("Secret/push-gateway-hms", app)
        assert settings["authKeys"] and all(k["alg"] in ("RS256", "ES256") and k["kid"] for k in settings["authKeys"]), \
            "public keys only in a ConfigMap"
    # Reloaded in place: no hash suffix on the apps ConfigMap (the config's has one: a change rolls the pods).
    assert one("production", "ConfigMap", "push-gateway-apps")
    config_volume = next(v for v in pod("production")["volumes"] if v["name"] == "config")
    assert re.fullmatch(r"push-gateway-config-[a-z0-9]{10}", config_volume["configMap"]["name"])


_QUANTITY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
                      "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18, "m": 10**-3, "": 1}


def quantity(value: str | int) -> float:
    """A Kubernetes resource quantity ("2Gi", "512Mi", "1.5G", "2e9", 1073741824) as a number."""
    m = re.fullmatch(r"([0-9.]+(?:[eE][-+]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?", str(value))
    assert m, f"not a quantity: {value!r}"
    return float(m.group(1)) * _QUANTITY_SUFFIXES[m.group(2) or ""]


def test_quantity():
    assert quantity("2Gi") == 2147483648 and quantity("512Mi") == 536870912 and quantity("1G") == 1e9
    assert quantity(1024) == 1024 and quantity("2e3") == 2000 and quantity("500m") == 0.5


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_environment_names_documented_settings(overlay):
    """Every PUSH_* variable of the container is one docs/CONFIGURATION.md lists (or one being added)."""
    documented = set(re.findall(r"\bPUSH_[A-Z0-9_]+", _read("docs", "CONFIGURATION.md")))
    for entry in container(overlay)["env"]:
        name = entry["name"]
        if name.startswith("PUSH_"):
            assert name in documented or name in PLANNED_ENV, f"{overlay}: {name} is not a documented setting"


def test_production_cluster_secret_is_a_mounted_file():
    """The replicas' shared secret: a read-only file of the Secret push-gateway-cluster, never a literal."""
    secrets = example_secrets()
    c = container("production")
    env = {e["name"]: e for e in c["env"]}
    assert "PUSH_CLUSTER_SECRET" not in env and "secret" not in config("production").get("cluster", {}), \
        "the secret itself is never in the manifests"
    path = env["PUSH_CLUSTER_SECRET_FILE"]["value"]
    assert mounted_files("production", secrets)[path] == ("Secret/push-gateway-cluster", "secret")
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == os.path.dirname(path))
    assert mount["readOnly"] is True
    volume = next(v for v in pod("production")["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["defaultMode"] == 0o440
    assert len(secrets["push-gateway-cluster"]["stringData"]["secret"].encode()) >= 32, "32 bytes or more"
    # Development: one replica with the embedded broker; no Secret at all.
    assert "PUSH_CLUSTER_SECRET_FILE" not in {e["name"] for e in container("development")["env"]}


def test_production_state_high_water_mark_follows_the_memory_limit():
    """PUSH_STATE_MAX_REPLICA_BYTES is about 60 % of the container's memory limit: a new limit needs a new value."""
    c = container("production")
    limit = quantity(c["resources"]["limits"]["memory"])
    value = next(e["value"] for e in c["env"] if e["name"] == "PUSH_STATE_MAX_REPLICA_BYTES")
    assert re.fullmatch(r"[1-9][0-9]*", value), f"a number of bytes: {value!r}"
    low, high = STATE_SHARE_OF_MEMORY_LIMIT
    assert low * limit <= int(value) <= high * limit, \
        f"PUSH_STATE_MAX_REPLICA_BYTES={value} is {int(value) / limit:.0%} of limits.memory {limit:.0f}, not about 60 %"


def test_production_trusts_forwarded_for_only_from_the_ingress_controller():
    value = next(e["value"] for e in container("production")["env"] if e["name"] == "PUSH_HTTP_TRUSTED_PROXIES")
    networks = [ipaddress.ip_network(part.strip(), strict=True) for part in value.split(",")]
    assert networks and all(n.prefixlen > 0 for n in networks), f"{value}: not everybody"
    assert all(n.is_private for n in networks), f"{value}: the cluster's own pods"
    # Keep-alive connections from the ingress controller outlive its own idle timeout for them.
    assert config("production")["http"]["idleTimeoutMs"] > INGRESS_UPSTREAM_KEEPALIVE_MS


def test_production_shape():
    spec = one("production", "Deployment")["spec"]
    p, c = pod("production"), container("production")
    assert spec["replicas"] == 3
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert c["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}
    anti = p["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert anti["topologyKey"] == "kubernetes.io/hostname" and anti["labelSelector"]["matchLabels"] == LABEL
    assert p["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"


def test_pdb_and_hpa():
    pdb = one("production", "PodDisruptionBudget")["spec"]
    assert pdb["maxUnavailable"] == 1 and pdb["selector"]["matchLabels"] == LABEL
    hpa = one("production", "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    spec = hpa["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "push-gateway"}
    assert spec["minReplicas"] == 2 and spec["maxReplicas"] == 12
    metrics = {m["type"]: m for m in spec["metrics"]}
    ext = metrics["External"]["external"]
    assert ext["metric"]["name"] == "kafka_consumergroup_lag"
    assert ext["metric"]["selector"]["matchLabels"] == {"group": config("production")["kafka"]["groupId"]}
    assert ext["target"] == {"type": "AverageValue", "averageValue": "1000"}
    assert metrics["Resource"]["resource"] == {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}


def test_ingress_serves_only_the_mobile_api_over_tls():
    ingress = one("production", "Ingress")["spec"]
    hosts = {h for t in ingress["tls"] for h in t["hosts"]}
    assert {r["host"] for r in ingress["rules"]} <= hosts, "every host has TLS"
    assert ingress["tls"][0]["secretName"] == "push-gateway-tls" and "push-gateway-tls" in example_secrets()
    api = [p for p in json.loads(_read("docs", "openapi.json"))["paths"]]
    prefixes = [p["path"] for r in ingress["rules"] for p in r["http"]["paths"]]
    assert sorted(prefixes) == ["/base/", "/datasync/v2/"]
    for path in api:
        exposed = any(path.startswith(prefix) for prefix in prefixes)
        assert exposed == (path.startswith("/base/") or path.startswith("/datasync/v2/")), path
    for r in ingress["rules"]:
        for p in r["http"]["paths"]:
            assert p["backend"]["service"] == {"name": "push-gateway", "port": {"name": "http"}}


def test_network_policy_lets_in_and_out_what_the_gateway_needs():
    policy = one("production", "NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"] == LABEL and sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    port = container("production")["ports"][0]["containerPort"]
    ingress_ports = {p["port"] for rule in policy["ingress"] for p in rule["ports"]}
    assert ingress_ports == {port}
    sources = [s for rule in policy["ingress"] for s in rule["from"]]
    assert {"podSelector": {"matchLabels": LABEL}} in sources, "request forwarding between replicas"
    egress_ports = {(p["port"], p["protocol"]) for rule in policy["egress"] for p in rule["ports"]}
    kafka_port = int(config("production")["kafka"]["brokers"].rsplit(":", 1)[1])
    assert {(53, "UDP"), (53, "TCP"), (kafka_port, "TCP"), (443, "TCP"), (port, "TCP")} <= egress_ports


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_shutdown_fits_the_grace_period(overlay):
    """terminationGracePeriodSeconds covers preStop, the longest provider request in flight, and closing Kafka
    (the drain measured under load in test_drain.py stays within it), and the gateway's own bound: the drain
    (shutdown.drainSeconds, 15 s by default) plus the watchdog's 5 s, after which the process exits anyway."""
    p, c = pod(overlay), container(overlay)
    pre_stop = int(c["lifecycle"]["preStop"]["exec"]["command"][1])
    cfg = config(overlay)
    request = max(cfg.get("fcm", {}).get("requestTimeoutMs", 10000), cfg.get("hms", {}).get("requestTimeoutMs", 10000)) / 1000
    assert p["terminationGracePeriodSeconds"] >= pre_stop + request + KAFKA_CLOSE_SECONDS, p["terminationGracePeriodSeconds"]
    drain = cfg.get("shutdown", {}).get("drainSeconds", 15)
    assert p["terminationGracePeriodSeconds"] > pre_stop + drain + WATCHDOG_MARGIN_SECONDS, p["terminationGracePeriodSeconds"]
    readiness = c["readinessProbe"]
    assert readiness["periodSeconds"] * readiness["failureThreshold"] <= 30


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
    return dict(args.partition("=")[::2] for instr, args in _dockerfile_instructions() if instr == "ARG" and "=" in args)


def _base_image(stage: list[tuple[str, str]]) -> str:
    image = stage[0][1].split()[0]
    m = re.fullmatch(r"\$\{(\w+)\}", image)
    return _args_defaults()[m.group(1)] if m else image


def _dockerfile_user() -> str:
    users = [args for instr, args in _stages()[-1] if instr == "USER"]
    assert users, "the runtime stage sets a USER"
    return users[-1]


def test_dockerfile_bases_are_build_arguments():
    """One recipe: scripts/image gives local bases through SWIFT_IMAGE and RUNTIME_IMAGE, Docker users the defaults."""
    stages = _stages()
    assert len(stages) == 2
    assert stages[0][0][1].startswith("${SWIFT_IMAGE}") and stages[1][0][1].startswith("${RUNTIME_IMAGE}")
    assert re.fullmatch(r"swift:6\.3[\w.-]*-bookworm", _base_image(stages[0])), _base_image(stages[0])
    assert _base_image(stages[-1]) == "debian:bookworm-slim"
    script = _read("scripts", "image")
    assert '--build-arg "SWIFT_IMAGE=' in script and '--build-arg "RUNTIME_IMAGE=' in script
    assert "-f Dockerfile" in script


def test_dockerfile_does_not_copy_git_ignored_files():
    ignored = [line.strip().rstrip("/") for line in _read(".gitignore").splitlines() if line.strip() and not line.startswith("#")]
    assert "Package.resolved" in ignored
    for instr, args in _dockerfile_instructions():
        if instr == "COPY" and "--from=" not in args:
            for src in args.split()[:-1]:
                assert src not in ignored, f"COPY {src}: git-ignored, so absent from a clone"


def test_direct_dependencies_are_pinned_exactly():
    deps = re.findall(r'\.package\(url: "([^"]+)", (\w+): "([^"]+)"\)', _read("Package.swift"))
    assert deps and all(kind == "exact" for _, kind, _ in deps), deps


def test_dockerfile_build_stage():
    build = " ".join(a for i, a in _stages()[0] if i in ("RUN", "ARG"))
    for pkg in ("librdkafka-dev", "libcurl4-openssl-dev", "libssl-dev", "pkg-config", "python3-pip", "patchelf", "binutils"):
        assert pkg in build
    assert "swift build -c release --product push-gateway --static-swift-stdlib" in build
    assert "strip --strip-all /out/push-gateway" in build, "a stripped binary"
    assert "patchelf --remove-rpath /out/push-gateway" in build, "no development rpath"
    wanted = re.search(r"confluent-kafka==([\d.]+)", _read("tests", "requirements.txt")).group(1)
    assert f"CONFLUENT_KAFKA_VERSION={wanted}" in build and "confluent_kafka.libs/librdkafka-" in build
    assert "patchelf --set-soname librdkafka.so.1" in build, "ldconfig indexes it under the name the binary needs"


def test_dockerfile_runtime_stage():
    runtime = _stages()[-1]
    runtime_run = " ".join(a for i, a in runtime if i == "RUN")
    assert "librdkafka1" not in runtime_run and "librdkafka-dev" not in runtime_run
    for pkg in ("libcurl4", "libssl3", "ca-certificates"):
        assert pkg in runtime_run
    assert "ldconfig" in runtime_run and "librdkafka.so.1 => /usr/local/lib/librdkafka.so.1" in runtime_run
    copies = [a for i, a in runtime if i == "COPY"]
    assert any(a.endswith("/usr/local/lib/librdkafka.so.1") and "--from=" in a for a in copies)
    assert any(a.endswith("/usr/local/bin/push-gateway") and "--from=" in a for a in copies)
    settings = dict((i, a) for i, a in runtime)  # last occurrence wins
    user = _dockerfile_user()
    assert re.fullmatch(r"\d+(:\d+)?", user) and int(user.split(":")[0]) != 0, "numeric non-root USER"
    assert settings["EXPOSE"] == "8080"
    assert settings["STOPSIGNAL"] == "SIGTERM"
    assert json.loads(settings["ENTRYPOINT"]) == ["push-gateway"]
    assert json.loads(settings["CMD"]) == ["run", "--config", "/etc/push-gateway/config.yaml"]
    assert dict(re.findall(r"(\w+)=(\S+)", settings["ENV"])) == {"PUSH_HTTP_HOST": "0.0.0.0", "PUSH_LOG_FORMAT": "json"}
    assert "HEALTHCHECK" not in settings, "Kubernetes probes check health"


def test_dockerignore_keeps_build_outputs_out():
    entries = {line.strip() for line in _read(".dockerignore").splitlines() if line.strip() and not line.startswith("#")}
    for entry in (".build", ".deps", "**/__pycache__", "**/.pytest_cache"):
        assert entry in entries, entry
    for instr, args in _dockerfile_instructions():
        if instr == "COPY" and "--from=" not in args:
            for src in args.split()[:-1]:
                assert src.split("/")[0] not in entries, f"COPY {src} is excluded by .dockerignore"


def test_hadolint():
    r = subprocess.run([tool("hadolint"), "--no-color", os.path.join(ROOT, "Dockerfile")], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
