"""The operators' per-app status (issue 11, SPEC §8): `GET /admin/apps[/{app}]` behind the admin token names the
problem of a misconfigured app (wrong HMS credentials), the settings in force and the last refused file."""

from __future__ import annotations

import time

import jwt
import pytest
import requests

from procutil import wait_for
from test_delivery import SECRET, fake_hms  # noqa: F401 - the fixture

ADMIN_TOKEN = "admin-token-for-the-tests-0123456789"


def admin(stack, path: str, token: str | None = ADMIN_TOKEN) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.get(f"{stack.gateway.base}/admin/apps{path}", headers=headers, timeout=10)


@pytest.mark.timeout(180)
def test_admin_status_names_a_misconfigured_app(stack_factory, fake_hms, uniq, token_factory):  # noqa: F811
    hw = "hwbad" + uniq[4:]
    registered = fake_hms.register_app("200000" + uniq[4:10].translate(str.maketrans("abcdef", "123456")))
    stack = stack_factory(start=False)
    stack.config["hms"] = {"baseURL": fake_hms.base_url, "tokenURL": fake_hms.token_url}
    stack.config["admin"] = {"token": ADMIN_TOKEN}
    stack.start()
    settings_file = stack.write_app_settings(hw, {
        "enabled": True, "authKeys": [{"alg": "HS256", "secret": SECRET}],
        "hms": {"appId": registered["app_id"], "clientId": registered["client_id"], "clientSecret": "not-the-secret"}})
    wait_for(lambda: admin(stack, f"/{hw}").status_code == 200, timeout=20, what="the app's status")

    # Closed without the token, or with a wrong one.
    assert admin(stack, f"/{hw}", token=None).status_code == 401
    assert admin(stack, f"/{hw}", token="wrong-token-wrong-token").status_code == 403

    user = jwt.encode({"uid": "u1", "exp": int(time.time()) + 600}, SECRET, algorithm="HS256")
    device = token_factory("hw")
    r = requests.post(f"{stack.gateway.base}/datasync/v2/{hw}/subscriptions/u1", timeout=10,
                      headers={"Authorization": f"Bearer {user}"},
                      json={"kind": "huawei", "mode": "noData", "path": f"{uniq}/a", "context": device})
    assert r.status_code == 201, r.text
    stack.publish(f"{uniq}/a", "SET", "1", app=hw)

    def hms_error():
        status = admin(stack, f"/{hw}").json()
        project = status["providers"].get(f"hms:{registered['app_id']}")
        return status if project and project.get("lastError") else None

    status = wait_for(hms_error, timeout=30, what="the HMS error in the app's status")
    project = status["providers"][f"hms:{registered['app_id']}"]
    assert project["lastError"]["class"] == "ourFault", project
    assert "authentication" in project["lastError"]["reason"], project
    assert project["ourFaultErrors"] >= 1 and "lastSuccessAt" not in project, project
    assert status["subscriptions"] == 1 and status["deliveries"]["retryBacklog"] >= 1, status
    assert status["settings"]["source"] == settings_file and status["settings"]["version"], status

    # A settings file that does not parse is refused, named, and the last good settings stay.
    with open(settings_file, "w") as f:
        f.write("enabled: [\n")
    refused = wait_for(lambda: admin(stack, f"/{hw}").json()["settings"].get("lastRefused"), timeout=20,
                       what="the refused settings file")
    assert refused["file"] == settings_file and refused["reason"], refused

    listed = admin(stack, "").json()["apps"]
    entry = next(a for a in listed if a["app"] == hw)
    assert entry["servedBy"] == "this replica" and entry["enabled"] is True, entry


@pytest.mark.timeout(60)
def test_admin_is_closed_without_a_configured_token(stack):
    r = admin(stack, "/toto")
    assert r.status_code == 403 and r.json()["status"] == "disabled", r.text
    # Without a bearer too: a 401 would ask for a token that can never work (issue 17).
    for path in ("", "/toto"):
        r = admin(stack, path, token=None)
        assert r.status_code == 403 and r.json()["status"] == "disabled", r.text


@pytest.mark.timeout(180)
def test_admin_status_shows_apns_refusals_and_the_web_push_key(stack_factory, uniq, tmp_path):
    """Issue 21: a provider token APNs refuses is our fault and shows in the app's status under its project
    `apns:<team>/<bundle id>`; an app with Web Push settings shows the key its pages subscribe with."""
    import base64
    import os
    import sys

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "fakes")))
    from fake_apns import FakeAPNsServer, write_p8

    server = FakeAPNsServer(tls_dir=tmp_path / "tls", environment="production").start()
    try:
        _, p8 = write_p8(tmp_path / "AuthKey.p8")
        # The team is known with another key: APNs answers InvalidProviderToken.
        server.register_team("TEAM123456", "KEY1234567", ec.generate_private_key(ec.SECP256R1()).public_key(), ["com.example.a"])
        vapid = ec.generate_private_key(ec.SECP256R1())
        vapid_file = tmp_path / "vapid.pem"
        vapid_file.write_bytes(vapid.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                   serialization.NoEncryption()))
        point = vapid.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
        app = "apple" + uniq[4:]
        stack = stack_factory(start=False)
        stack.config["apns"] = {"baseURL": server.base_url, "developmentBaseURL": server.base_url, "caFile": server.ca_file}
        stack.config["admin"] = {"token": ADMIN_TOKEN}
        stack.start()
        stack.write_app_settings(app, {
            "enabled": True, "authKeys": [{"alg": "HS256", "secret": SECRET}],
            "apns": {"teamId": "TEAM123456", "keyId": "KEY1234567", "keyFile": p8, "bundleId": "com.example.a"},
            "webPush": {"vapidKeyFile": str(vapid_file), "subject": "mailto:ops@example.com"}})
        wait_for(lambda: admin(stack, f"/{app}").status_code == 200, timeout=20, what="the app's status")
        user = jwt.encode({"uid": "u1", "exp": int(time.time()) + 600}, SECRET, algorithm="HS256")
        r = requests.post(f"{stack.gateway.base}/datasync/v2/{app}/subscriptions/u1", timeout=10,
                          headers={"Authorization": f"Bearer {user}"},
                          json={"kind": "apns", "mode": "noData", "path": f"{uniq}/a", "context": "ab" * 32})
        assert r.status_code == 201, r.text
        stack.publish(f"{uniq}/a", "SET", "1", app=app)

        def apns_error():
            status = admin(stack, f"/{app}").json()
            project = status["providers"].get("apns:TEAM123456/com.example.a")
            return status if project and project.get("lastError") else None

        status = wait_for(apns_error, timeout=30, what="the APNs refusal in the app's status", on_timeout=stack.gateway.tails)
        project = status["providers"]["apns:TEAM123456/com.example.a"]
        assert project["lastError"]["class"] == "ourFault", project
        assert project["lastError"]["reason"] == "InvalidProviderToken", project
        assert status["subscriptions"] == 1 and status["deliveries"]["retryBacklog"] >= 1, status
        assert status["webPush"] == {"applicationServerKey": base64.urlsafe_b64encode(point).decode().rstrip("="),
                                     "subject": "mailto:ops@example.com"}, status
        assert stack.stop() == 0
    finally:
        server.stop()
