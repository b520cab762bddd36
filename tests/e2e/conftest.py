"""Fixtures of the end-to-end suite: a real broker (Tansu), the fake FCM (TLS, HTTP/2), the gateway binary.

Scopes:
- ``broker``, ``fake_fcm``, ``publisher``: one per session.
- ``stack`` (module): a gateway with its own unique change/DLQ topics and group id, shared by the tests of one
  module; each test isolates itself with a unique path prefix (``uniq``) and unique device tokens.
- ``stack_factory`` (function): a dedicated gateway per test, for tests that stop it, revoke a whole app or
  read the dead-letter topic.

Every process started here is stopped at teardown (SIGTERM, then SIGKILL), and killed at session end/exit
whatever happened.
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import Callable

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import FakeFCM, Stack  # noqa: E402
from kafka_util import Publisher, Tansu  # noqa: E402
from procutil import kill_all_live  # noqa: E402


@pytest.fixture(scope="session")
def workdir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("e2e"))


@pytest.fixture(scope="session")
def broker(workdir):
    b = Tansu(os.path.join(workdir, "tansu"))
    try:
        b.start()
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="session")
def publisher(broker):
    p = Publisher(broker.bootstrap)
    yield p
    p.close()


@pytest.fixture(scope="session")
def fake_fcm(workdir):
    fake = FakeFCM(workdir).start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture(scope="module")
def stack(request, workdir, broker, publisher, fake_fcm):
    s = Stack(workdir, broker, publisher, fake_fcm, name=request.module.__name__.split(".")[-1])
    try:
        s.start()
        yield s
    finally:
        s.stop()


@pytest.fixture(autouse=True)
def _shared_gateway_alive(request):
    """Tests on the module's shared gateway fail clearly if an earlier test killed it."""
    if "stack" in request.fixturenames:
        s = request.getfixturevalue("stack")
        _stacks_of(request.node).append(s)
        s.gateway.assert_alive()
    yield


def _stacks_of(item) -> list:
    if not hasattr(item, "_e2e_stacks"):
        item._e2e_stacks = []
    return item._e2e_stacks


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report carries the tails of its gateway(s)' stdout/stderr."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for s in getattr(item, "_e2e_stacks", []):
            if s.gateway is not None and s.gateway.proc is not None:
                report.sections.append((f"gateway {s.name} output", s.gateway.tails()))


@pytest.fixture
def stack_factory(workdir, broker, publisher, fake_fcm, request) -> Callable[..., Stack]:
    made: list[Stack] = []

    def make(start: bool = True, **kw) -> Stack:
        s = Stack(workdir, broker, publisher, fake_fcm, name=request.node.name[:40], **kw)
        made.append(s)
        _stacks_of(request.node).append(s)
        return s.start() if start else s

    try:
        yield make
    finally:
        for s in made:
            s.stop()


@pytest.fixture
def uniq() -> str:
    """A unique path prefix (one key) for the current test."""
    return "/e2e" + uuid.uuid4().hex[:8]


@pytest.fixture
def token_factory() -> Callable[..., str]:
    def make(label: str = "dev") -> str:
        # Shaped like a real FCM registration token: <instance id>:APA91b<...>
        return f"{label}{uuid.uuid4().hex[:10]}:APA91b{uuid.uuid4().hex}_-x"

    return make


def pytest_sessionfinish(session, exitstatus):
    kill_all_live()
