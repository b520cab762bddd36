"""The embedded defaults for a newcomer (README, `scripts/run`): the banner's commands, a fixed broker port that
survives a restart, snapshot requests answered by the embedded upstream, and a clean SIGTERM.

Each gateway here runs with no configuration file, its HTTP port and `PUSH_KAFKA_EMBEDDED_BROKER_PORT` set to
free ports (the default 9092 would collide with other runs on the machine). The banner's commands are run as
printed, through bash, from another directory and without LD_LIBRARY_PATH, as a user would paste them.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest
import requests

from gateway import Gateway, gateway_env
from procutil import free_port, wait_for
import payloads as P
from test_console_sink import console_lines

# A text log line at error level or worse: "2026-01-01T00:00:00+0000 error push-gateway: ...".
ERROR_LINE = re.compile(r"^\S+ (error|critical) ", re.MULTILINE)


def start_embedded(workdir: str, name: str, http_port: int, broker_port: int) -> Gateway:
    env = {"PUSH_HTTP_PORT": str(http_port), "PUSH_KAFKA_EMBEDDED_BROKER_PORT": str(broker_port)}
    return Gateway(os.path.join(workdir, name), config=None, http_port=http_port, env=env, name=name).start()


def banner(gw: Gateway) -> str:
    return wait_for(lambda: "push-gateway is running with embedded defaults" in gw.proc.stderr()
                    and "How to publish" in gw.proc.stderr() and gw.proc.stderr(),
                    timeout=15, what="the getting-started banner", on_timeout=gw.tails)


def banner_command(text: str, marker: str) -> str:
    """The shell command of the banner that contains ``marker`` (joined over its `\\` continuation lines)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if marker in line:
            command = line.strip()
            while command.endswith("\\"):
                i += 1
                command = command[:-1] + " " + lines[i].strip()
            return command
    raise AssertionError(f"no banner line with {marker!r}:\n{text}")


def run_as_user(command: str, cwd: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH" and not k.startswith("PUSH_")}
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def values_at(gw: Gateway, sp: str) -> list[str]:
    return [raw for raw, doc in console_lines(gw.proc.stdout()) if doc.get("data", {}).get("sp") == sp]


@pytest.fixture
def stopper():
    started: list[Gateway] = []
    yield started
    for gw in started:
        gw.stop()


def test_restart_keeps_the_broker_port_and_the_banner_commands_work(workdir, stopper, tmp_path):
    http_port, broker_port = free_port(), free_port()
    first = start_embedded(workdir, "embedded-restart-1", http_port, broker_port)
    stopper.append(first)
    text = banner(first)
    assert f"127.0.0.1:{broker_port}" in text, text
    assert "Nothing is stored on disk: a restart starts with no subscriptions" in text, text
    publish = banner_command(text, " publish --brokers ")
    kcat = banner_command(text, "echo '{\"appId\"")
    assert re.search(r"\| +kcat -P -b ", kcat), kcat
    binary = publish.split()[0]
    assert os.path.isabs(binary.strip("'")), f"the banner's binary path is not absolute: {publish}"
    elsewhere = str(tmp_path)

    first.must_subscribe("demo", "/chat", "restartDeviceToken-1", "value")
    result = run_as_user(publish, elsewhere)
    assert result.returncode == 0, f"banner publish failed:\n{publish}\n{result.stdout}\n{result.stderr}"
    wait_for(lambda: values_at(first, "/chat"), timeout=30, what="the console line of the banner's publish",
             on_timeout=first.tails)
    assert first.stop() == 0, first.tails()

    second = start_embedded(workdir, "embedded-restart-2", http_port, broker_port)
    stopper.append(second)
    assert f"127.0.0.1:{broker_port}" in banner(second)
    # Nothing survives (the banner says so): subscribe again, then the first run's commands work as printed.
    second.must_subscribe("demo", "/chat", "restartDeviceToken-2", "value")
    result = run_as_user(publish, elsewhere)
    assert result.returncode == 0, f"banner publish after a restart failed:\n{result.stdout}\n{result.stderr}"
    line = wait_for(lambda: values_at(second, "/chat"), timeout=30, what="the console line after a restart",
                    on_timeout=second.tails)[0]
    assert P.raw_member(line, "data") == P.serialise_data(P.value("demo", "/chat", P.parse('{"m1":"hi"}'))).decode()
    result = run_as_user(kcat, elsewhere)
    assert result.returncode == 0, f"banner kcat command failed:\n{kcat}\n{result.stdout}\n{result.stderr}"
    lines = wait_for(lambda: len(values_at(second, "/chat")) >= 2 and values_at(second, "/chat"), timeout=30,
                     what="the console line of the banner's kcat command",
                     on_timeout=lambda: f"kcat said:\n{result.stdout}\n{result.stderr}\n{second.tails()}")
    assert P.raw_member(lines[1], "data") == P.serialise_data(
        P.value("demo", "/chat", P.parse('{"m1":"hi","m2":{"text":"hello"}}'))).decode()


def test_snapshot_requests_are_answered_so_child_event_has_the_data(workdir, stopper):
    gw = start_embedded(workdir, "embedded-snapshot", free_port(), free_port())
    stopper.append(gw)
    bootstrap = re.search(r"kafka\.bootstrap=(\S+)", gw.logs()).group(1)

    def publish(path: str, op: str, after: str | None = None) -> None:
        argv = [gw.binary, "publish", "--brokers", bootstrap, "--app", "demo", "--path", path, "--op", op]
        res = subprocess.run(argv + (["--after", after] if after is not None else []), capture_output=True,
                             text=True, timeout=60, env=gateway_env())
        assert res.returncode == 0, f"publish failed:\n{res.stdout}\n{res.stderr}"

    # Data written before anyone subscribes to /room; the sentinel shows when the gateway has consumed it.
    gw.must_subscribe("demo", "/sentinel", "snapshotSentinelToken", "noData")
    publish("/room", "SET", '{"a":1,"b":{"x":true}}')
    publish("/sentinel", "SET", "1")
    wait_for(lambda: values_at(gw, "/sentinel"), timeout=30, what="the sentinel notification", on_timeout=gw.tails)

    # A new childEvent node: the gateway asks for a snapshot, the embedded upstream answers from the events.
    gw.must_subscribe("demo", "/room", "snapshotChildToken", "childEvent")
    wait_for(lambda: "embedded upstream: snapshot published" in gw.logs(), timeout=30,
             what="the embedded upstream's snapshot", on_timeout=gw.tails)
    # The snapshot is in the log before the next write (same key, same partition), so the shadow is seeded.
    publish("/room/c", "SET", '"new"')
    publish("/room/a", "REMOVE")
    lines = wait_for(lambda: len(values_at(gw, "/room")) >= 2 and values_at(gw, "/room"), timeout=30,
                     what="two childEvent notifications for /room", on_timeout=gw.tails)
    assert P.raw_member(lines[0], "data") == P.serialise_data(
        P.child_event("demo", "/room", {"c": "new"}, [], {})).decode(), lines[0]
    assert P.raw_member(lines[1], "data") == P.serialise_data(
        P.child_event("demo", "/room", {}, ["a"], {})).decode(), lines[1]


def test_sigterm_exits_0_with_no_error_line(workdir, tmp_path):
    gw = start_embedded(workdir, "embedded-sigterm", free_port(), free_port())
    try:
        bootstrap = re.search(r"kafka\.bootstrap=(\S+)", gw.logs()).group(1)
        gw.must_subscribe("demo", "/t", "sigtermDeviceToken", "childEvent")  # a snapshot request too
        res = subprocess.run([gw.binary, "publish", "--brokers", bootstrap, "--app", "demo", "--path", "/t/x",
                              "--op", "SET", "--after", "1"], capture_output=True, text=True, timeout=60,
                             env=gateway_env())
        assert res.returncode == 0, res.stderr
        wait_for(lambda: values_at(gw, "/t"), timeout=30, what="the /t notification", on_timeout=gw.tails)
    finally:
        rc = gw.stop()
    logs = gw.proc.stderr()
    assert rc == 0, f"exit code {rc} after SIGTERM\n{gw.tails()}"
    assert "stopped" in logs.splitlines()[-1], f"'stopped' is not the last line:\n{gw.tails()}"
    assert not ERROR_LINE.search(logs), f"error lines in a clean run:\n{ERROR_LINE.findall(logs)}\n{gw.tails()}"


def test_a_taken_broker_port_is_a_clear_error(workdir):
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        gw = Gateway(os.path.join(workdir, "embedded-taken"), config=None, http_port=free_port(),
                     env={"PUSH_KAFKA_EMBEDDED_BROKER_PORT": str(port)}, name="embedded-taken")
        gw.start(wait_ready=False)
        rc = gw.proc.wait(30)
        gw.stop()
    assert rc not in (0, None), f"started on a taken port\n{gw.tails()}"
    assert f"cannot listen on 127.0.0.1:{port}" in gw.proc.stderr() and "PUSH_KAFKA_EMBEDDED_BROKER_PORT" in gw.proc.stderr(), gw.tails()


def test_demo_token_mints_a_token_the_v2_api_accepts(workdir, stopper):
    http_port = free_port()
    gw = start_embedded(workdir, "embedded-token", http_port, free_port())
    stopper.append(gw)
    res = subprocess.run([gw.binary, "demo-token", "--uid", "alice", "--lifetime", "90m"], capture_output=True,
                         text=True, timeout=30, env=gateway_env())
    assert res.returncode == 0, res.stderr
    token = res.stdout.strip()
    url = f"http://127.0.0.1:{http_port}/datasync/v2/demo/subscriptions/alice"
    body = '{"kind":"mobile","mode":"value","path":"/chat","context":"aliceDeviceToken"}'
    r = requests.post(url, data=body, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert r.status_code == 201, f"{r.status_code} {r.text}"
    other = requests.post(url.replace("/alice", "/bob"), data=body, headers={"Authorization": f"Bearer {token}"},
                          timeout=10)
    assert other.status_code == 403, f"a token of alice used for bob: {other.status_code} {other.text}"
    bad = subprocess.run([gw.binary, "demo-token", "--lifetime", "soon"], capture_output=True, text=True,
                         timeout=30, env=gateway_env())
    assert bad.returncode != 0 and "--lifetime" in bad.stderr, bad.stderr
