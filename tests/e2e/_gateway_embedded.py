"""A push-gateway process with its embedded defaults (in-process broker, console sink), for API tests that
need a running gateway but no real broker or fake FCM (tests/e2e/test_api_fuzz.py).

    with EmbeddedGateway(tmpdir) as gw:
        requests.get(gw.base_url + "/readyz")

Started as `PUSH_HTTP_PORT=<free port> PUSH_KAFKA_EMBEDDED_BROKER_PORT=0 push-gateway run` (LD_LIBRARY_PATH=.deps/lib), ready once
`GET /readyz` is 200 (at most 60 s), stopped with SIGTERM then SIGKILL after 10 s.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import time
from typing import Optional

import requests

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_BIN = os.path.join(REPO_ROOT, ".build", "debug", "push-gateway")
READY_TIMEOUT = 60.0
STOP_GRACE = 10.0

_live: "set[subprocess.Popen]" = set()


def _kill_live() -> None:
    for proc in list(_live):
        if proc.poll() is None:
            proc.kill()


atexit.register(_kill_live)


def binary() -> str:
    """The binary under test (env PUSH_GATEWAY_BIN). A missing binary is a failure, never a skip."""
    path = os.environ.get("PUSH_GATEWAY_BIN", DEFAULT_BIN)
    if not os.access(path, os.X_OK):
        raise AssertionError(f"push-gateway binary not found at {path}: build it (`swift build` in {REPO_ROOT}) "
                             "or point PUSH_GATEWAY_BIN at it")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: str, max_bytes: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - max_bytes))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


class EmbeddedGateway:
    def __init__(self, workdir: str, env: Optional[dict] = None):
        self.workdir = workdir
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.stdout_path = os.path.join(workdir, f"gateway-{self.port}.out")
        self.stderr_path = os.path.join(workdir, f"gateway-{self.port}.err")
        self.extra_env = env or {}
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> "EmbeddedGateway":
        env = dict(os.environ)
        for key in [k for k in env if k.startswith("PUSH_")]:
            del env[key]  # embedded defaults only
        lib = os.path.join(REPO_ROOT, ".deps", "lib")
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        env["PUSH_HTTP_PORT"] = str(self.port)
        # A random broker port: several embedded gateways (and other checkouts' test runs) share the machine.
        env["PUSH_KAFKA_EMBEDDED_BROKER_PORT"] = "0"
        env.update(self.extra_env)
        os.makedirs(self.workdir, exist_ok=True)
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen([binary(), "run"], stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                         env=env, cwd=self.workdir)
        _live.add(self.proc)
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise AssertionError(f"push-gateway exited with {self.proc.returncode if self.proc else None} "
                                     f"before it was ready\n{self.tails()}")
            try:
                r = requests.get(self.base_url + "/readyz", timeout=2)
                if r.status_code == 200:
                    return
                last = f"{r.status_code} {r.text[:200]}"
            except requests.RequestException as e:
                last = type(e).__name__
            time.sleep(0.2)
        raise AssertionError(f"push-gateway not ready after {timeout:.0f} s (last /readyz: {last})\n{self.tails()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = STOP_GRACE) -> Optional[int]:
        """SIGTERM, then SIGKILL after `grace` seconds. Returns the exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        _live.discard(proc)
        return proc.returncode

    def tails(self) -> str:
        return (f"--- stdout ({self.stdout_path}) ---\n{_tail(self.stdout_path)}\n"
                f"--- stderr ({self.stderr_path}) ---\n{_tail(self.stderr_path)}")

    def __enter__(self) -> "EmbeddedGateway":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
