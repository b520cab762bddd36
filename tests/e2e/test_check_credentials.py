"""`push-gateway check-credentials APP` (docs/OPERATIONS.md, "FCM and HMS set-up"): the real binary against the fake
FCM and HMS servers (TLS, HTTP/2): settings compiled, an OAuth token fetched, one dry run (FCM `validate_only`, HMS
`validate_only: true`) per provider, nothing delivered; each way our credentials can be wrong is named."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import uuid

import pytest
import yaml

from gateway import gateway_binary, gateway_env
from harness import load_fake_fcm_module

HERE = os.path.dirname(os.path.abspath(__file__))
APP = "shop"
HMS_APP_ID = "100200300"
SERVICE_DISABLED = {
    "error": {
        "code": 403,
        "message": "Firebase Cloud Messaging API has not been used in project 123456 before or it is disabled. Enable it "
                   "by visiting https://console.developers.google.com/apis/api/fcm.googleapis.com/overview?project=123456 "
                   "then retry.",
        "status": "PERMISSION_DENIED",
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED",
                     "domain": "googleapis.com", "metadata": {"service": "fcm.googleapis.com", "consumer": "projects/123456"}}],
    }
}


def _load_fake_hms():
    path = os.path.join(HERE, "..", "fakes", "fake_hms.py")
    spec = importlib.util.spec_from_file_location("fake_hms", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fake_hms"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fakes(tmp_path_factory):
    """Own fake FCM and HMS servers (this module injects global errors and resets them), one TLS certificate."""
    fcm = load_fake_fcm_module().FakeFCMServer(tls_dir=str(tmp_path_factory.mktemp("tls"))).start()
    try:
        hms = _load_fake_hms().FakeHMSServer(tls_cert=fcm.tls_cert, tls_key=fcm.tls_key).start()
        try:
            yield fcm, hms
        finally:
            hms.stop()
    finally:
        try:
            fcm.stop()
        except OSError:
            pass


class Setup:
    """A configuration directory: config.yaml, apps.d/<app>.yaml, the credential files."""

    def __init__(self, root: str, fcm, hms):
        self.root, self.fcm, self.hms = root, fcm, hms
        self.apps_dir = os.path.join(root, "apps.d")
        os.makedirs(self.apps_dir, exist_ok=True)
        self.config_file = os.path.join(root, "config.yaml")
        with open(self.config_file, "w") as f:
            yaml.safe_dump({
                "kafka": {"brokers": "127.0.0.1:9"},  # never contacted by check-credentials
                "fcm": {"baseURL": fcm.base_url, "caFile": fcm.ca_file},
                "hms": {"baseURL": hms.base_url, "tokenURL": hms.token_url},
                "appSettings": {"directory": self.apps_dir},
            }, f)

    def service_account(self, project_id: str = "shop-project") -> str:
        path = os.path.join(self.root, f"sa-{uuid.uuid4().hex[:6]}.json")
        with open(path, "w") as f:
            json.dump(self.fcm.create_service_account(project_id), f)
        return path

    def hms_secret(self, secret: str) -> str:
        path = os.path.join(self.root, f"hms-{uuid.uuid4().hex[:6]}")
        with open(path, "w") as f:
            f.write(secret + "\n")
        return path

    def app(self, settings: dict, name: str = APP) -> None:
        with open(os.path.join(self.apps_dir, f"{name}.yaml"), "w") as f:
            yaml.safe_dump(settings, f)

    def check(self, *args: str, app: str = APP) -> subprocess.CompletedProcess:
        return subprocess.run([gateway_binary(), "check-credentials", app, "--config", self.config_file, *args],
                              capture_output=True, text=True, timeout=60, env=gateway_env())


@pytest.fixture
def setup(fakes, tmp_path):
    fcm, hms = fakes
    fcm.state.reset()
    hms.reset()
    return Setup(str(tmp_path), fcm, hms)


def both_providers(setup: Setup, secret: str = "right-secret") -> dict:
    app = setup.hms.register_app(HMS_APP_ID, client_secret="right-secret")
    return {
        "fcmServiceAccountFile": setup.service_account(),
        "hms": {"appId": app["app_id"], "clientId": app["client_id"], "clientSecretFile": setup.hms_secret(secret)},
    }


def test_good_credentials_pass_with_dry_runs_only(setup):
    setup.app(both_providers(setup))
    r = setup.check()
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "settings  ok" in out and "fcm       ok      OAuth access token obtained" in out
    assert "project shop-project accepted a validate_only message (delivered to nobody)" in out
    assert "hms       ok      OAuth access token obtained for client" in out
    assert f"app {HMS_APP_ID} accepted a validate_only test message" in out
    assert out.strip().endswith("all checks passed")
    fcm_sends = setup.fcm.state.snapshot()["sends"]
    assert len(fcm_sends) == 1 and fcm_sends[0]["validate_only"] is True and fcm_sends[0]["http_version"] == "2"
    assert fcm_sends[0]["token"] == "push-gateway-check-credentials"
    hms_sends = setup.hms.sends()
    assert len(hms_sends) == 1 and hms_sends[0]["validate_only"] is True


def test_a_refused_placeholder_token_still_proves_the_credentials(setup):
    """Real providers refuse the placeholder device token after accepting our credentials."""
    setup.app(both_providers(setup))
    setup.fcm.state.inject(error="INVALID_ARGUMENT", token="push-gateway-check-credentials")
    setup.hms.inject(code="80300007", token="push-gateway-check-credentials")
    r = setup.check()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "refused the placeholder device token, as expected (HTTP 400 INVALID_ARGUMENT" in r.stdout
    assert "refused the placeholder device token, as expected (HTTP 200 code 80300007" in r.stdout


def test_a_given_dead_device_token_fails(setup):
    setup.app({"fcmServiceAccountFile": setup.service_account()})
    setup.fcm.state.inject(error="UNREGISTERED", token="dead-device")
    r = setup.check("--fcm-token", "dead-device")
    assert r.returncode == 1, r.stdout
    assert "accepted our credentials but says the device token is invalid or unregistered (HTTP 404 UNREGISTERED" in r.stdout
    assert setup.fcm.state.snapshot()["sends"][0]["token"] == "dead-device"


def test_fcm_api_disabled_is_named(setup):
    setup.app({"fcmServiceAccountFile": setup.service_account()})
    setup.fcm.state.inject(http_status=403, body=SERVICE_DISABLED)
    r = setup.check()
    assert r.returncode == 1, r.stdout
    line = next(line for line in r.stdout.splitlines() if "FAILED" in line)
    assert "project shop-project refused our request or credentials: HTTP 403 PERMISSION_DENIED" in line
    assert "Firebase Cloud Messaging API has not been used in project 123456" in line
    assert "is the Firebase Cloud Messaging API enabled in project shop-project" in line
    assert r.stdout.strip().endswith("1 check(s) failed")


def test_fcm_refused_key_is_named(setup):
    setup.app({"fcmServiceAccountFile": setup.service_account()})
    setup.fcm.state.inject(token_endpoint_error={"http_status": 400, "error": "invalid_grant",
                                                  "error_description": "Invalid JWT Signature."})
    r = setup.check()
    assert r.returncode == 1, r.stdout
    assert "fcm       FAILED  no OAuth access token for firebase-adminsdk-" in r.stdout
    assert "Invalid JWT Signature." in r.stdout and "wrong, revoked or deleted key or secret" in r.stdout
    assert setup.fcm.state.snapshot()["sends"] == [], "no send without a token"


def test_wrong_hms_secret_is_named(setup):
    settings = both_providers(setup, secret="wrong-secret")
    setup.app(settings)
    r = setup.check()
    assert r.returncode == 1, r.stdout
    assert "fcm       ok" in r.stdout, "the other provider is still checked"
    line = next(line for line in r.stdout.splitlines() if line.strip().startswith("hms") and "FAILED" in line)
    assert f"no OAuth access token for client {HMS_APP_ID}" in line and "sub_error 20356" in line
    assert setup.hms.sends() == []


def test_wrong_hms_app_is_named(setup):
    setup.app(both_providers(setup))
    setup.hms.inject(code="80300002")
    r = setup.check()
    assert r.returncode == 1, r.stdout
    assert f"app {HMS_APP_ID} refused our request or credentials: HTTP 200 code 80300002" in r.stdout
    assert "check the app ID and that Push Kit is enabled" in r.stdout


def test_console_sink_app_has_nothing_to_check(setup):
    setup.app({"enabled": True})
    r = setup.check()
    assert r.returncode == 0, r.stdout
    assert "no FCM or HMS credentials: notifications go to the console sink" in r.stdout


def test_invalid_settings_and_unknown_apps_fail(setup):
    setup.app({"authKeys": [{"alg": "RS256", "kid": "k1", "publicKeyPEM": "not a key"}]})
    r = setup.check()
    assert r.returncode == 1 and f"{setup.apps_dir}/{APP}.yaml: authKeys[0]" in r.stdout, r.stdout
    r = setup.check(app="nobody")
    assert r.returncode == 1 and "no app nobody" in r.stdout, r.stdout


def test_unreadable_configuration_exits_2(setup):
    r = subprocess.run([gateway_binary(), "check-credentials", APP, "--config", os.path.join(setup.root, "missing.yaml")],
                       capture_output=True, text=True, timeout=60, env=gateway_env())
    assert r.returncode == 2 and "cannot read configuration file" in r.stderr, r.stderr
