"""Tests of the fake FCM server itself: `python3 -m pytest tests/fakes -q`."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.parse

import jwt
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fake_fcm  # noqa: E402

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


class Client:
    """HTTP/1.1 client for the fake (hypercorn speaks both; the HTTP/2 path is covered with curl below)."""

    def __init__(self, server: fake_fcm.FakeFCMServer):
        self.server = server

    def request(self, method: str, path: str, body: bytes | str | dict | None = None,
                headers: dict | None = None) -> tuple[int, dict, object]:
        if isinstance(body, dict):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        if self.server.tls_cert:
            context = ssl.create_default_context(cafile=self.server.ca_file)
            connection = http.client.HTTPSConnection("127.0.0.1", self.server.port, context=context, timeout=10)
        else:
            connection = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            raw = response.read()
            try:
                payload = json.loads(raw)
            except ValueError:
                payload = raw
            return response.status, {k.lower(): v for k, v in response.getheaders()}, payload
        finally:
            connection.close()

    def assertion(self, account: dict, **overrides) -> str:
        now = int(time.time())
        claims = {"iss": account["client_email"], "scope": fake_fcm.FCM_SCOPE, "aud": self.server.token_url,
                  "iat": now, "exp": now + 3600}
        claims.update(overrides)
        return jwt.encode(claims, account["private_key"], algorithm="RS256",
                          headers={"kid": account["private_key_id"]})

    def token(self, assertion: str) -> tuple[int, object]:
        form = urllib.parse.urlencode({"grant_type": JWT_BEARER, "assertion": assertion})
        status, _, payload = self.request("POST", "/token", form,
                                          {"Content-Type": "application/x-www-form-urlencoded"})
        return status, payload

    def send(self, access_token: str, message: dict, project: str = "fake-project") -> tuple[int, dict, object]:
        return self.request("POST", f"/v1/projects/{project}/messages:send", {"message": message},
                            {"Authorization": f"Bearer {access_token}", "Content-Type": "application/json"})


@pytest.fixture
def server():
    s = fake_fcm.FakeFCMServer().start()
    yield s
    s.stop()


@pytest.fixture
def client(server):
    return Client(server)


@pytest.fixture
def account(server):
    return server.create_service_account()


@pytest.fixture
def access_token(client, account):
    status, payload = client.token(client.assertion(account))
    assert status == 200, payload
    return payload["access_token"]


def test_token_grant_issues_a_bearer_token(client, account):
    status, payload = client.token(client.assertion(account))
    assert status == 200
    assert payload["token_type"] == "Bearer"
    assert payload["expires_in"] == 3600
    assert payload["access_token"].startswith("ya29.")


@pytest.mark.parametrize("overrides, description", [
    ({"aud": "https://oauth2.googleapis.com/token"}, "audience"),
    ({"exp": int(time.time()) - 10, "iat": int(time.time()) - 100}, "short-lived"),
    ({"scope": "https://www.googleapis.com/auth/cloud-platform"}, "scope"),
])
def test_token_grant_checks_the_claims(client, account, overrides, description):
    status, payload = client.token(client.assertion(account, **overrides))
    assert status == 400
    assert payload["error"] in ("invalid_grant", "invalid_scope")
    assert description.lower() in (payload["error_description"] + " scope").lower()


def test_token_grant_checks_the_signature(client, server, account):
    other = server.create_service_account()  # a different key
    forged = jwt.encode({"iss": account["client_email"], "scope": fake_fcm.FCM_SCOPE, "aud": server.token_url,
                         "iat": int(time.time()), "exp": int(time.time()) + 3600},
                        other["private_key"], algorithm="RS256", headers={"kid": account["private_key_id"]})
    status, payload = client.token(forged)
    assert (status, payload["error"]) == (400, "invalid_grant")
    assert payload["error_description"] == "Invalid JWT Signature."


def test_token_grant_checks_the_grant_type(client, account):
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "assertion": client.assertion(account)})
    status, _, payload = client.request("POST", "/token", form)
    assert (status, payload["error"]) == (400, "unsupported_grant_type")


def test_send_records_and_answers_a_message_name(client, server, access_token):
    status, _, payload = client.send(access_token, {"token": "t1", "data": {"a": "b"}})
    assert status == 200
    assert payload["name"].startswith("projects/fake-project/messages/")
    snapshot = server.state.snapshot()
    assert snapshot["send_count"] == 1
    record = snapshot["sends"][0]
    assert record["token"] == "t1"
    assert record["json"] == {"message": {"token": "t1", "data": {"a": "b"}}}
    assert record["http_version"] == "1.1"
    assert record["headers"]["authorization"] == f"Bearer {access_token}"


def test_validate_only_is_a_dry_run(client, server, access_token):
    def dry_run(validate_only, token="t1", data=None):
        return client.request("POST", "/v1/projects/fake-project/messages:send",
                              {"validate_only": validate_only, "message": {"token": token, "data": data or {"a": "b"}}},
                              {"Authorization": f"Bearer {access_token}", "Content-Type": "application/json"})

    status, _, payload = dry_run(True)
    assert (status, payload) == (200, {"name": "projects/fake-project/messages/fake_message_id"})
    record = server.state.snapshot()["sends"][-1]
    assert record["validate_only"] is True and record["token"] == "t1"
    # The same checks as a real send: the message, and the device token (injected errors apply).
    status, _, payload = dry_run(True, data={"a": 1})
    assert (status, payload["error"]["details"][0]["fieldViolations"][0]["field"]) == (400, "message.data[0].value")
    server.state.inject(error="UNREGISTERED", token="dead")
    status, _, payload = dry_run(True, token="dead")
    assert (status, payload["error"]["details"][0]["errorCode"]) == (404, "UNREGISTERED")
    # validate_only must be a boolean; false is a real send.
    status, _, payload = dry_run("yes")
    assert status == 400
    assert payload["error"]["details"][0]["fieldViolations"][0]["field"] == "validate_only"
    status, _, payload = dry_run(False)
    assert status == 200 and payload["name"] != "projects/fake-project/messages/fake_message_id"
    assert server.state.snapshot()["sends"][-1]["validate_only"] is False


def test_send_requires_a_valid_access_token(client):
    status, headers, payload = client.send("ya29.unknown", {"token": "t1"})
    assert status == 401
    assert payload["error"]["status"] == "UNAUTHENTICATED"
    assert "details" not in payload["error"]


def test_send_validates_the_message(client, access_token):
    status, _, payload = client.send(access_token, {"token": "t1", "data": {"a": 1}})
    assert status == 400
    assert payload["error"]["status"] == "INVALID_ARGUMENT"
    assert payload["error"]["details"][0]["fieldViolations"][0]["field"] == "message.data[0].value"
    status, _, payload = client.send(access_token, {"data": {}})
    assert status == 400
    assert payload["error"]["details"][0]["fieldViolations"][0]["field"] == "message.token"


def test_send_checks_the_project(client, access_token):
    status, _, payload = client.send(access_token, {"token": "t1"}, project="another-project")
    assert (status, payload["error"]["status"]) == (403, "PERMISSION_DENIED")


def test_injected_errors_have_fcm_bodies(client, server, access_token):
    server.state.inject(error="UNREGISTERED", token="dead")
    server.state.inject(error="QUOTA_EXCEEDED")
    status, _, payload = client.send(access_token, {"token": "dead"})
    assert status == 404
    assert payload == {"error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND",
                                 "details": [{"@type": fake_fcm.FCM_ERROR_TYPE, "errorCode": "UNREGISTERED"}]}}
    status, headers, payload = client.send(access_token, {"token": "other"})
    assert (status, headers["retry-after"]) == (429, "60")
    assert payload["error"]["details"][0]["errorCode"] == "QUOTA_EXCEEDED"
    status, _, _ = client.send(access_token, {"token": "dead"})
    assert status == 200  # the injections were used up


def test_invalid_argument_names_the_token_by_default(client, server, access_token):
    server.state.inject(error="INVALID_ARGUMENT")
    status, _, payload = client.send(access_token, {"token": "t"})
    assert status == 400
    violations = payload["error"]["details"][1]["fieldViolations"]
    assert violations[0]["field"] == "message.token"


def test_control_api(client, server, access_token):
    assert client.request("POST", "/_fake/inject", {"error": "INTERNAL", "count": 2})[0] == 200
    assert [client.send(access_token, {"token": "x"})[0] for _ in range(3)] == [500, 500, 200]
    status, _, snapshot = client.request("GET", "/_fake/requests")
    assert status == 200
    assert [s["status"] for s in snapshot["sends"]] == [500, 500, 200]
    assert snapshot["issued_tokens"] == 1
    assert client.request("POST", "/_fake/inject", {"error": "NOT_A_CODE"})[0] == 400
    assert client.request("POST", "/_fake/reset")[0] == 200
    assert client.request("GET", "/_fake/requests")[2]["send_count"] == 0
    # reset forgot the access tokens
    assert client.send(access_token, {"token": "x"})[0] == 401


def test_register_service_account_over_http(client, server):
    account, public_pem = fake_fcm.make_service_account(server.token_url)
    assert client.token(client.assertion(account))[0] == 400
    status, _, _ = client.request("POST", "/_fake/service-accounts", {
        "client_email": account["client_email"], "public_key_pem": public_pem,
        "private_key_id": account["private_key_id"]})
    assert status == 200
    assert client.token(client.assertion(account))[0] == 200


def test_rate_limit_answers_quota_exceeded_above_the_rate(client, server, access_token):
    # A window longer than the test: the first 3 sends pass, the next ones are over the quota.
    assert client.request("POST", "/_fake/inject", {"rate_limit": {"count": 3, "window_s": 600}})[0] == 200
    statuses = [client.send(access_token, {"token": f"t{n}"})[0] for n in range(5)]
    assert statuses == [200, 200, 200, 429, 429]
    status, headers, payload = client.send(access_token, {"token": "t5"})
    assert (status, headers["retry-after"]) == (429, "60")
    assert payload["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert payload["error"]["details"][0]["errorCode"] == "QUOTA_EXCEEDED"
    assert server.state.snapshot()["rate_limited"] == 3
    # Turned off: every send passes again.
    assert client.request("POST", "/_fake/inject", {"rate_limit": None})[0] == 200
    assert client.send(access_token, {"token": "t6"})[0] == 200
    assert client.request("POST", "/_fake/inject", {"rate_limit": {"count": 0, "window_s": 1}})[0] == 400


def test_rate_limit_window_slides(server):
    server.state.inject(rate_limit={"count": 2, "window_s": 1.0})
    # Refused sends count too (like a quota of requests): the one at 11.45 still sees 10.5 and 10.9.
    times = (10.0, 10.5, 10.9, 11.45, 12.5)
    assert [server.state.over_rate_limit("p", t) for t in times] == [False, False, True, True, False]
    assert server.state.over_rate_limit("other", 11.5) is False, "per project"


def test_delay(client, server, access_token):
    server.state.inject(delay_ms=300)
    started = time.monotonic()
    assert client.send(access_token, {"token": "x"})[0] == 200
    assert time.monotonic() - started >= 0.3


def test_project_delay_slows_that_project_only(client, server):
    """``project_delay_ms`` delays the answers of one project (a slow provider project); the others answer at
    once. A request is recorded when it arrives, before its delay."""
    tokens = {}
    for project in ("slow-project", "quick-project"):
        status, payload = client.token(client.assertion(server.create_service_account(project)))
        assert status == 200, payload
        tokens[project] = payload["access_token"]
    server.state.inject(project_delay_ms={"slow-project": 1500})
    started = time.monotonic()
    assert client.send(tokens["quick-project"], {"token": "q"}, project="quick-project")[0] == 200
    assert time.monotonic() - started < 1.5
    sent_at = time.time()
    started = time.monotonic()
    assert client.send(tokens["slow-project"], {"token": "s"}, project="slow-project")[0] == 200
    assert time.monotonic() - started >= 1.5
    record = [s for s in server.state.snapshot()["sends"] if s["token"] == "s"][0]
    assert record["time"] - sent_at < 1.5, "recorded on arrival"
    server.state.inject(project_delay_ms={"slow-project": 0})
    started = time.monotonic()
    assert client.send(tokens["slow-project"], {"token": "s"}, project="slow-project")[0] == 200
    assert time.monotonic() - started < 1.5


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs the curl command")
def test_tls_with_alpn_h2(tmp_path):
    with fake_fcm.FakeFCMServer(tls_dir=str(tmp_path)) as server:
        output = subprocess.run(
            ["curl", "-s", "--cacert", server.ca_file, "-o", "/dev/null", "-w", "%{http_version}",
             f"{server.base_url}/_fake/requests"], capture_output=True, text=True, timeout=20).stdout
        assert output == "2"
        assert Client(server).request("GET", "/_fake/requests")[0] == 200  # HTTP/1.1 over TLS too


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs the curl command")
def test_cli_announces_its_port_and_serves_h2c(tmp_path):
    sa_path = tmp_path / "sa.json"
    process = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "fake_fcm.py"), "--port", "0", "--service-account-out", str(sa_path)],
        stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        announcement = json.loads(line)
        assert announcement["port"] > 0
        account = json.loads(sa_path.read_text())
        assert account["token_uri"] == announcement["token_url"]
        output = subprocess.run(
            ["curl", "-s", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_version} %{http_code}",
             f"{announcement['base_url']}/_fake/requests"], capture_output=True, text=True, timeout=20).stdout
        assert output == "2 200"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.parametrize("message, field", [
    ({"android": {"ttl": "3600"}}, "message.android.ttl"),
    ({"android": {"ttl": 3600}}, "message.android.ttl"),
    ({"android": {"ttl": "1.0123456789s"}}, "message.android.ttl"),
    ({"android": {"ttl": "2419201s"}}, "message.android.ttl"),
    ({"android": {"collapse_key": 7}}, "message.android.collapse_key"),
    ({"apns": {"headers": {"apns-expiration": 1}}}, "message.apns.headers[apns-expiration]"),
    ({"apns": {"headers": {"apns-expiration": "soon"}}}, "message.apns.headers"),
    ({"apns": {"headers": {"apns-collapse-id": "x" * 65}}}, "message.apns.headers"),
])
def test_ttl_and_collapse_fields_are_checked_as_fcm_does(client, access_token, message, field):
    status, _, payload = client.send(access_token, {"token": "t1", "data": {"a": "b"}, **message})
    assert status == 400, payload
    assert payload["error"]["status"] == "INVALID_ARGUMENT"
    assert payload["error"]["details"][0]["fieldViolations"][0]["field"] == field


def test_ttl_and_collapse_fields_are_accepted_and_recorded(client, server, access_token):
    message = {"token": "t1", "data": {"a": "b"},
               "android": {"priority": "high", "ttl": "3600s", "collapse_key": "room-1"},
               "apns": {"headers": {"apns-expiration": "1767229200", "apns-collapse-id": "x" * 64}}}
    for ttl in ("0s", "1.5s", "2419200s"):
        message["android"]["ttl"] = ttl
        status, _, payload = client.send(access_token, message)
        assert status == 200, payload
    assert server.state.snapshot()["sends"][-1]["json"]["message"]["android"]["ttl"] == "2419200s"
