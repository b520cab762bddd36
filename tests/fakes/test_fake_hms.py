"""Tests of the fake HMS (Huawei Push Kit) server itself: `python3 -m pytest tests/fakes -q`."""

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

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fake_hms  # noqa: E402

APP_ID = "100000001"


class Client:
    """HTTP/1.1 client for the fake (hypercorn speaks both; the HTTP/2 path is covered with curl below)."""

    def __init__(self, server: fake_hms.FakeHMSServer):
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

    def token(self, client_id: str, client_secret: str, grant_type: str = "client_credentials") -> tuple[int, object]:
        form = urllib.parse.urlencode({"grant_type": grant_type, "client_id": client_id, "client_secret": client_secret})
        status, _, payload = self.request("POST", fake_hms.TOKEN_PATH, form,
                                          {"Content-Type": "application/x-www-form-urlencoded"})
        return status, payload

    def send(self, access_token: str | None, message: dict, app_id: str = APP_ID,
             validate_only: bool = False) -> tuple[int, dict, dict]:
        headers = {"Content-Type": "application/json"}
        if access_token is not None:
            headers["Authorization"] = f"Bearer {access_token}"
        return self.request("POST", f"/v1/{app_id}/messages:send",
                            {"validate_only": validate_only, "message": message}, headers)


def message(*tokens: str, data: object = '{"t":"noData","app":"toto"}') -> dict:
    return {"data": data, "android": {"urgency": "HIGH"}, "token": list(tokens) or ["t1"]}


@pytest.fixture
def server():
    s = fake_hms.FakeHMSServer().start()
    yield s
    s.stop()


@pytest.fixture
def client(server):
    return Client(server)


@pytest.fixture
def app(server):
    return server.register_app(APP_ID, client_secret="s3cr+t/=")


@pytest.fixture
def access_token(client, app):
    status, payload = client.token(app["client_id"], app["client_secret"])
    assert status == 200, payload
    return payload["access_token"]


def test_client_credentials_grant_issues_a_bearer_token(client, app):
    status, payload = client.token(app["client_id"], app["client_secret"])
    assert status == 200
    assert (payload["token_type"], payload["expires_in"]) == ("Bearer", 3600)
    assert payload["access_token"].startswith("CgB6e3x9")



def test_validate_only_is_a_test_message(client, server, access_token):
    status, _, payload = client.send(access_token, message("t1"), validate_only=True)
    assert (status, payload["code"]) == (200, "80000000")
    assert server.state.snapshot()["sends"][-1]["validate_only"] is True
    server.inject(code="80300007", token="dead")
    status, _, payload = client.send(access_token, message("dead"), validate_only=True)
    assert payload["code"] == "80300007"
    client.send(access_token, message("t1"))
    assert server.state.snapshot()["sends"][-1]["validate_only"] is False

@pytest.mark.parametrize("client_id, secret, grant, sub_error", [
    (APP_ID, "wrong", "client_credentials", 20356),
    ("424242", "s3cr+t/=", "client_credentials", 20003),
    (APP_ID, "s3cr+t/=", "authorization_code", 20001),
    (APP_ID, "", "client_credentials", 20001),
])
def test_token_endpoint_errors(client, app, client_id, secret, grant, sub_error):
    status, payload = client.token(client_id, secret, grant)
    assert status == 400
    assert payload["sub_error"] == sub_error
    assert payload["error"] in (1101, 1102)
    assert payload["error_description"]


def test_send_records_and_answers_success(client, server, access_token):
    status, _, payload = client.send(access_token, message("t1"))
    assert status == 200
    assert (payload["code"], payload["msg"]) == ("80000000", "Success")
    assert payload["requestId"]
    snapshot = server.state.snapshot()
    assert snapshot["send_count"] == 1
    record = snapshot["sends"][0]
    assert (record["token"], record["tokens"], record["app_id"]) == ("t1", ["t1"], APP_ID)
    assert record["data"] == '{"t":"noData","app":"toto"}'
    assert record["json"]["message"]["android"] == {"urgency": "HIGH"}
    assert (record["status"], record["code"], record["http_version"]) == (200, "80000000", "1.1")
    assert record["headers"]["authorization"] == f"Bearer {access_token}"
    assert snapshot["token_requests"][0]["client_id"] == APP_ID


def test_send_checks_the_access_token(client, server, access_token):
    assert client.send(None, message())[2]["code"] == "80200001"
    status, _, payload = client.send("CgB6e3x9unknown", message())
    assert (status, payload["code"]) == (401, "80200001")
    other = server.register_app("200000002")
    other_token = client.token(other["client_id"], other["client_secret"])[1]["access_token"]
    assert client.send(other_token, message())[2]["code"] == "80200001"  # a token of another app
    server.expire_tokens()
    status, _, payload = client.send(access_token, message())
    assert (status, payload["code"], payload["msg"]) == (401, "80200003", "Oauth Token expired")


@pytest.mark.parametrize("msg, code", [
    ({"data": {"a": "b"}, "token": ["t"]}, "80100003"),    # data must be a string
    ({"data": "[1,2]", "token": ["t"]}, "80100001"),       # ... holding a JSON object
    ({"data": "{", "token": ["t"]}, "80100001"),
    ({"data": "{}", "token": []}, "80300010"),
    ({"data": "{}"}, "80300010"),
    ({"data": "{}", "token": "t"}, "80100003"),
    ({"data": "{}", "token": ["t"] * 1001}, "80300010"),
    ({"data": json.dumps({"k": "x" * 4100}), "token": ["t"]}, "80300008"),
    ({"data": "{}", "token": ["t"], "android": {"urgency": "URGENT"}}, "80100001"),
])
def test_send_validates_the_body(client, access_token, msg, code):
    _, _, payload = client.send(access_token, msg)
    assert payload["code"] == code


def test_injections(client, server, access_token):
    server.inject(code="80300007", token="dead")
    server.inject(code="81000001", count=2)
    server.inject(http_status=503, retry_after=7, token="busy")
    status, _, payload = client.send(access_token, message("dead"))
    assert (status, payload["code"]) == (200, "80300007")
    assert [client.send(access_token, message("x"))[2]["code"] for _ in range(3)] == ["81000001", "81000001", "80000000"]
    status, headers, payload = client.send(access_token, message("busy"))
    assert (status, headers["retry-after"]) == (503, "7")
    assert "code" not in payload
    assert client.send(access_token, message("dead"))[2]["code"] == "80000000"  # used up
    assert [s["status"] for s in server.sends()] == [200, 500, 500, 200, 503, 200]


def test_partial_success_lists_the_illegal_tokens(client, server, access_token):
    server.inject(code="80100000", token="bad")
    status, _, payload = client.send(access_token, message("good", "bad"))
    assert (status, payload["code"]) == (200, "80100000")
    assert json.loads(payload["msg"]) == {"success": 1, "failure": 1, "illegal_tokens": ["bad"]}


def test_control_api_over_http(client, server, access_token):
    assert client.request("POST", "/_control/inject", {"code": "80300002", "count": 2})[0] == 200
    assert [client.send(access_token, message())[2]["code"] for _ in range(3)] == ["80300002", "80300002", "80000000"]
    status, _, snapshot = client.request("GET", "/_control/sends")
    assert status == 200
    assert [s["code"] for s in snapshot["sends"]] == ["80300002", "80300002", "80000000"]
    assert snapshot["issued_tokens"] == 1
    assert client.request("POST", "/_control/inject", {"code": "NOT_A_CODE"})[0] == 400
    assert client.request("POST", "/_control/inject", {"bogus": 1})[0] == 400
    assert client.request("POST", "/_control/expire_tokens")[0] == 200
    assert client.send(access_token, message())[2]["code"] == "80200003"
    assert client.request("POST", "/_control/reset")[0] == 200
    assert client.request("POST", "/_control/sends")[2]["send_count"] == 0
    assert client.send(access_token, message())[2]["code"] == "80200001"  # reset forgot the access tokens
    status, _, registered = client.request("POST", "/_control/apps", {"app_id": "300000003"})
    assert status == 200 and registered["client_id"] == "300000003"
    assert client.token(registered["client_id"], registered["client_secret"])[0] == 200


def test_token_endpoint_error_and_delay(client, server, app):
    server.inject(token_endpoint_error={"http_status": 503, "error_description": "busy"})
    assert client.token(app["client_id"], app["client_secret"])[0] == 503
    token = client.token(app["client_id"], app["client_secret"])[1]["access_token"]
    server.inject(delay_ms=300)
    started = time.monotonic()
    assert client.send(token, message())[0] == 200
    assert time.monotonic() - started >= 0.3


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs the curl command")
def test_tls_with_alpn_h2(tmp_path):
    with fake_hms.FakeHMSServer(tls_dir=str(tmp_path)) as server:
        output = subprocess.run(
            ["curl", "-s", "--cacert", server.ca_file, "-o", "/dev/null", "-w", "%{http_version}",
             f"{server.base_url}/_control/sends"], capture_output=True, text=True, timeout=20).stdout
        assert output == "2"
        assert Client(server).request("GET", "/_control/sends")[0] == 200  # HTTP/1.1 over TLS too


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs the curl command")
def test_cli_announces_its_app_and_serves_h2c():
    process = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "fake_hms.py"), "--port", "0", "--app-id", "555", "--client-secret", "shh"],
        stdout=subprocess.PIPE, text=True)
    try:
        announcement = json.loads(process.stdout.readline())
        assert announcement["port"] > 0
        assert (announcement["app_id"], announcement["client_id"], announcement["client_secret"]) == ("555", "555", "shh")
        assert announcement["token_url"] == announcement["base_url"] + "/oauth2/v3/token"
        output = subprocess.run(
            ["curl", "-s", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_version} %{http_code}",
             "-d", "grant_type=client_credentials&client_id=555&client_secret=shh", announcement["token_url"]],
            capture_output=True, text=True, timeout=20).stdout
        assert output == "2 200"
        sends = subprocess.run(
            ["curl", "-s", "--http2-prior-knowledge", f"{announcement['base_url']}/_control/sends"],
            capture_output=True, text=True, timeout=20).stdout
        assert json.loads(sends)["token_requests"][0]["http_version"] == "2"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.parametrize("android", [
    {"ttl": 3600}, {"ttl": "an hour"}, {"ttl": "1296001s"}, {"collapse_key": "7"}, {"collapse_key": 101},
    {"collapse_key": -2}, {"collapse_key": True},
])
def test_ttl_and_collapse_key_are_checked_as_hms_does(client, access_token, android):
    body = message("t1")
    body["android"].update(android)
    status, _, payload = client.send(access_token, body)
    assert (status, payload["code"]) == (400, "80100001"), payload


@pytest.mark.parametrize("android", [
    {"ttl": "3600s"}, {"ttl": "3600"}, {"ttl": "0.5s"}, {"ttl": "1296000s"}, {"collapse_key": -1}, {"collapse_key": 100},
])
def test_ttl_and_collapse_key_are_accepted_and_recorded(client, server, access_token, android):
    body = message("t1")
    body["android"].update(android)
    status, _, payload = client.send(access_token, body)
    assert (status, payload["code"]) == (200, "80000000"), payload
    assert server.state.snapshot()["sends"][-1]["json"]["message"]["android"] == {"urgency": "HIGH", **android}


def test_rate_limit_answers_503_above_the_apps_rate(client, server, access_token):
    # A window longer than the test: the first 3 sends pass, the next ones are over the app's rate.
    assert client.request("POST", "/_control/inject", {"rate_limit": {"count": 3, "window_s": 600}})[0] == 200
    answers = [client.send(access_token, message(f"t{n}")) for n in range(5)]
    assert [status for status, _, _ in answers] == [200, 200, 200, 503, 503]
    assert "code" not in answers[3][2], "HMS documents no result code for its flow control"
    assert server.state.snapshot()["rate_limited"] == 2
    assert client.request("POST", "/_control/inject", {"rate_limit": None})[0] == 200
    assert client.send(access_token, message("t6"))[0] == 200
    assert client.request("POST", "/_control/inject", {"rate_limit": {"count": 0, "window_s": 1}})[0] == 400


def test_rate_limit_window_slides_per_app(server):
    server.state.inject(rate_limit={"count": 2, "window_s": 1.0})
    times = (10.0, 10.5, 10.9, 11.45, 12.5)
    assert [server.state.over_rate_limit("a", t) for t in times] == [False, False, True, True, False]
    assert server.state.over_rate_limit("other", 11.5) is False, "per app"
