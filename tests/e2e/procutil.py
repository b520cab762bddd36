"""Process and polling helpers shared by the harness (no sleeps as synchronisation: bounded polls only)."""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import time
from typing import Callable, Optional, TypeVar

T = TypeVar("T")

# Every process the harness starts, so that nothing outlives the test session even on a crash of pytest.
_LIVE: list["ManagedProcess"] = []


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WaitTimeout(AssertionError):
    pass


def wait_for(predicate: Callable[[], T], timeout: float, interval: float = 0.1, what: str = "condition",
             on_timeout: Optional[Callable[[], str]] = None) -> T:
    """Polls ``predicate`` until it returns a truthy value (returned) or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    last_exc: Optional[BaseException] = None
    while True:
        try:
            result = predicate()
            if result:
                return result
        except WaitTimeout:
            raise
        except (OSError, ValueError, KeyError) as exc:  # transient: connection refused, partial output
            last_exc = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_exc!r})" if last_exc else ""
            extra = ("\n" + on_timeout()) if on_timeout else ""
            raise WaitTimeout(f"timed out after {timeout}s waiting for {what}{detail}{extra}")
        time.sleep(interval)


def tail(path: str, max_bytes: int = 6000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return "<no file>"


class ManagedProcess:
    """A subprocess with stdout/stderr captured to files, stopped with SIGTERM then SIGKILL."""

    def __init__(self, name: str, argv: list[str], workdir: str, env: Optional[dict] = None):
        self.name = name
        self.argv = argv
        self.env = env
        os.makedirs(workdir, exist_ok=True)
        n = 0
        while os.path.exists(os.path.join(workdir, f"{name}.{n}.stdout")):
            n += 1
        self.stdout_path = os.path.join(workdir, f"{name}.{n}.stdout")
        self.stderr_path = os.path.join(workdir, f"{name}.{n}.stderr")
        self.popen: Optional[subprocess.Popen] = None
        self.returncode: Optional[int] = None

    def start(self) -> "ManagedProcess":
        self._out = open(self.stdout_path, "wb")
        self._err = open(self.stderr_path, "wb")
        self.popen = subprocess.Popen(self.argv, stdout=self._out, stderr=self._err, stdin=subprocess.DEVNULL,
                                      env=self.env, start_new_session=True)
        _LIVE.append(self)
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stdout(self) -> str:
        with open(self.stdout_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stderr(self) -> str:
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def tails(self) -> str:
        rc = self.popen.poll() if self.popen else None
        return (f"--- {self.name} pid={self.popen.pid if self.popen else '?'} returncode={rc}\n"
                f"--- stdout tail ({self.stdout_path}):\n{tail(self.stdout_path)}\n"
                f"--- stderr tail ({self.stderr_path}):\n{tail(self.stderr_path)}")

    def signal(self, sig: int) -> None:
        if self.alive():
            self.popen.send_signal(sig)

    def wait(self, timeout: float) -> Optional[int]:
        try:
            self.returncode = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        return self.returncode

    def stop(self, grace: float = 10.0) -> Optional[int]:
        """SIGTERM, then SIGKILL after ``grace`` seconds. Returns the exit code of the SIGTERM phase, or None
        when it had to be killed."""
        if self.popen is None:
            return None
        rc: Optional[int] = self.popen.poll()
        if rc is None:
            self.popen.send_signal(signal.SIGTERM)
            rc = self.wait(grace)
            if rc is None:
                self.popen.kill()
                self.popen.wait(5)
        self.returncode = self.popen.returncode
        for f in (self._out, self._err):
            try:
                f.close()
            except Exception:
                pass
        if self in _LIVE:
            _LIVE.remove(self)
        return rc


def kill_all_live() -> None:
    for p in list(_LIVE):
        try:
            if p.alive():
                p.popen.kill()
                p.popen.wait(5)
        except Exception:
            pass
        _LIVE.remove(p)


atexit.register(kill_all_live)
