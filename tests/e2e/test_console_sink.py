"""Zero-configuration start (docs/CONFIGURATION.md "Embedded defaults", SPEC §9): embedded broker + console sink.

`push-gateway run` with no config file: it logs the embedded broker's bootstrap address; `push-gateway publish`
publishes a change event to it; a subscribed device of app `demo` gets its notification printed on stdout as
`{"sink":"console","app":"demo","token":"<first 6 chars>…","data":{...}}`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from gateway import Gateway, gateway_env
from procutil import free_port, wait_for
import payloads as P

# Tolerant: "bootstrap=127.0.0.1:1234", "bootstrap servers: localhost:1234", JSON "bootstrap":"127.0.0.1:1234"
BOOTSTRAP_RE = re.compile(r"bootstrap[^\n]*?((?:\d{1,3}(?:\.\d{1,3}){3}|localhost|\[[0-9a-fA-F:]+\]):\d{2,5}"
                          r"(?:,(?:\d{1,3}(?:\.\d{1,3}){3}|localhost):\d{2,5})*)", re.IGNORECASE)


def console_lines(text: str) -> list[tuple[str, dict]]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and '"sink"' in line:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if doc.get("sink") == "console":
                out.append((line, doc))
    return out


@pytest.fixture
def embedded_gateway(workdir, request):
    port = free_port()
    gw = Gateway(os.path.join(workdir, "embedded-" + request.node.name[:30]), config=None, http_port=port,
                 env={"PUSH_HTTP_PORT": str(port), "PUSH_KAFKA_EMBEDDED_BROKER_PORT": str(free_port())},
                 name="embedded")
    try:
        gw.start()
        yield gw
    finally:
        gw.stop()


def test_no_config_start_publish_and_console_sink(embedded_gateway):
    gw = embedded_gateway
    match = wait_for(lambda: BOOTSTRAP_RE.search(gw.logs()), timeout=10,
                     what="a log line with the embedded broker's bootstrap address", on_timeout=gw.tails)
    bootstrap = match.group(1)

    token = "consoleDeviceToken-0123456789"
    gw.must_subscribe("demo", "/x", token, "value")
    res = subprocess.run(
        [gw.binary, "publish", "--brokers", bootstrap, "--app", "demo", "--path", "/x", "--op", "SET",
         "--after", '{"a":1}'],
        capture_output=True, text=True, timeout=60, env=gateway_env())
    assert res.returncode == 0, f"publish failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"

    lines = wait_for(lambda: console_lines(gw.proc.stdout()), timeout=30,
                     what='a {"sink":"console",...} line on stdout', on_timeout=gw.tails)
    raw, doc = lines[0]
    assert doc["app"] == "demo", doc
    expected = P.serialise_data(P.value("demo", "/x", P.parse('{"a":1}'))).decode()
    assert expected == '{"s":"OK","t":"value","app":"demo","sp":"/x","d":"{\\"a\\":1}"}'
    assert P.raw_member(raw, "data") == expected, f"console data differs\n expected: {expected}\n got: {raw}"
    # No push token in clear in the output: only its first 6 characters.
    assert doc["token"].startswith(token[:6]) and token not in raw, doc["token"]
    assert token not in gw.logs(), "the full push token appears in the gateway's output"


def test_publish_json_mapping_to_the_embedded_broker(embedded_gateway):
    gw = embedded_gateway
    bootstrap = wait_for(lambda: BOOTSTRAP_RE.search(gw.logs()), timeout=10, what="bootstrap address",
                         on_timeout=gw.tails).group(1)
    token = "consoleJsonToken-abcdef"
    gw.must_subscribe("demo", "/j", token, "noData")
    res = subprocess.run(
        [gw.binary, "publish", "--brokers", bootstrap, "--app", "demo", "--path", "/j/k", "--op", "SET",
         "--after", '"v"', "--json"],
        capture_output=True, text=True, timeout=60, env=gateway_env())
    assert res.returncode == 0, f"publish --json failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    lines = wait_for(lambda: [x for x in console_lines(gw.proc.stdout()) if x[1].get("data", {}).get("sp") == "/j"],
                     timeout=30, what="the console line for /j", on_timeout=gw.tails)
    assert P.raw_member(lines[0][0], "data") == P.serialise_data(P.no_data("demo", "/j")).decode()
