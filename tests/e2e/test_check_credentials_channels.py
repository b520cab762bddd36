"""`push-gateway check-credentials APP` for the channels of issue 21 (docs/OPERATIONS.md): the real binary against the
fake APNs (TLS, HTTP/2, provider tokens checked with the team's public key) and with a VAPID key file.

APNs: a provider token is signed with the app's `.p8` key and one background push goes to a device token no device
has; APNs checks the token and the topic before the device, so its `BadDeviceToken` proves the credentials and the
bundle id (real APNs answers it for a token it never issued; the fake is told to). A key APNs does not know and a
bundle id that is not the team's are named. Web Push: the VAPID key signs a token that verifies with its public half,
and the `applicationServerKey` printed is that public half."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from gateway import gateway_binary, gateway_env

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "fakes")))
from fake_apns import FakeAPNsServer, write_p8  # noqa: E402

APP = "shop"
TEAM, KEY_ID, BUNDLE = "TEAM123456", "KEY1234567", "com.example.shop"
PLACEHOLDER = "0" * 64


@pytest.fixture(scope="module")
def apns(tmp_path_factory):
    server = FakeAPNsServer(tls_dir=tmp_path_factory.mktemp("apns-tls"), environment="production").start()
    yield server
    server.stop()


class Setup:
    def __init__(self, root, apns: FakeAPNsServer):
        self.root, self.apns = root, apns
        self.apps_dir = root / "apps.d"
        self.apps_dir.mkdir()
        self.config_file = root / "config.yaml"
        self.config_file.write_text(yaml.safe_dump({
            "kafka": {"brokers": "127.0.0.1:9"},  # never contacted by check-credentials
            "apns": {"baseURL": apns.base_url, "developmentBaseURL": apns.base_url, "caFile": apns.ca_file},
            "appSettings": {"directory": str(self.apps_dir)},
        }))

    def app(self, settings: dict) -> None:
        (self.apps_dir / f"{APP}.yaml").write_text(yaml.safe_dump(settings))

    def check(self) -> subprocess.CompletedProcess:
        return subprocess.run([gateway_binary(), "check-credentials", APP, "--config", str(self.config_file)],
                              capture_output=True, text=True, timeout=60, env=gateway_env())


@pytest.fixture
def setup(apns, tmp_path):
    apns.state.reset()
    return Setup(tmp_path, apns)


def apns_settings(setup: Setup, registered: bool = True, bundle: str = BUNDLE) -> dict:
    key, p8 = write_p8(setup.root / "AuthKey.p8")
    if registered:
        setup.apns.register_team(TEAM, KEY_ID, key.public_key(), [BUNDLE])
    else:
        # The team is known with another key under this key id: our signature does not verify.
        setup.apns.register_team(TEAM, KEY_ID, ec.generate_private_key(ec.SECP256R1()).public_key(), [BUNDLE])
    return {"apns": {"teamId": TEAM, "keyId": KEY_ID, "keyFile": p8, "bundleId": bundle}}


@pytest.mark.timeout(120)
def test_apns_credentials_are_proved_by_a_refused_placeholder_device(setup):
    setup.app(apns_settings(setup))
    setup.apns.script(PLACEHOLDER, [(400, "BadDeviceToken")])
    r = setup.check()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "apns      ok" in r.stdout and "APNs accepted the provider token and the topic" in r.stdout, r.stdout
    [push] = setup.apns.requests()
    assert push["token"] == PLACEHOLDER and push["http_version"] == "2" and push["jwt_verified"], push
    assert push["headers"]["apns-push-type"] == "background" and push["headers"]["apns-topic"] == BUNDLE


@pytest.mark.timeout(120)
def test_a_key_apns_does_not_know_and_a_foreign_bundle_are_named(setup):
    setup.app(apns_settings(setup, registered=False))
    r = setup.check()
    assert r.returncode != 0
    assert "apns      FAILED" in r.stdout and "InvalidProviderToken" in r.stdout, r.stdout
    assert "the key file, keyId or teamId is not right" in r.stdout

    setup.apns.state.reset()
    setup.app(apns_settings(setup, bundle="com.example.other"))
    r = setup.check()
    assert r.returncode != 0
    assert "TopicDisallowed" in r.stdout and "the bundleId is not an app of this team" in r.stdout, r.stdout


@pytest.mark.timeout(120)
def test_the_vapid_key_is_checked_and_its_public_half_printed(setup):
    key = ec.generate_private_key(ec.SECP256R1())
    path = setup.root / "vapid.pem"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    point = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    server_key = base64.urlsafe_b64encode(point).decode().rstrip("=")
    setup.app({"webPush": {"vapidKeyFile": str(path), "subject": "mailto:ops@example.com"}})
    r = setup.check()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "webpush   ok" in r.stdout and f"applicationServerKey {server_key}" in r.stdout, r.stdout

    # Not a P-256 key: the settings are refused before any check.
    path.write_text(json.dumps({"kty": "oct", "kid": "k", "alg": "dir", "k": base64.urlsafe_b64encode(b"k" * 32).decode()}))
    r = setup.check()
    assert r.returncode != 0 and "webPush.vapidKeyFile" in r.stdout + r.stderr, r.stdout + r.stderr
