"""Fixtures of the operations suite: those of the end-to-end suite (tests/e2e/conftest.py: a real Tansu broker, the
fake FCM, gateway stacks), plus the tools the operator uses (kubectl, promtool, prometheus)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
E2E = os.path.join(ROOT, "tests", "e2e")
sys.path.insert(0, E2E)

_spec = importlib.util.spec_from_file_location("e2e_conftest", os.path.join(E2E, "conftest.py"))
_e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_e2e)

# The end-to-end fixtures and hooks, as if defined here.
workdir = _e2e.workdir
broker = _e2e.broker
publisher = _e2e.publisher
fake_fcm = _e2e.fake_fcm
stack = _e2e.stack
stack_factory = _e2e.stack_factory
uniq = _e2e.uniq
token_factory = _e2e.token_factory
_shared_gateway_alive = _e2e._shared_gateway_alive
pytest_runtest_makereport = _e2e.pytest_runtest_makereport
pytest_sessionfinish = _e2e.pytest_sessionfinish


def tool(name: str) -> str:
    """The path of an operator tool; missing is a failure (scripts/test-ops installs them), never a skip."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: run scripts/test-ops, which installs it", pytrace=False)
    return path
