"""The pieces the tests share: the fake FCM wrapper, a gateway stack (gateway + its topics), assertions."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import uuid
from typing import Optional

import pytest

from gateway import Gateway, free_port, make_config
from kafka_util import Publisher, Tansu, Topics
from payloads import Pairs, fcm_body, raw_member, serialise_data
from procutil import wait_for

HERE = os.path.dirname(os.path.abspath(__file__))

FAKE_FCM_PATH = os.path.abspath(os.path.join(HERE, "..", "fakes", "fake_fcm.py"))
APP = "toto"
DISABLED_APP = "off"
DELIVERY_TIMEOUT = 30.0


def load_fake_fcm_module():
    """tests/fakes/fake_fcm.py, imported by path. Missing or broken → a clear failure, never a skip."""
    if not os.path.exists(FAKE_FCM_PATH):
        pytest.fail(f"fake FCM server not found at {FAKE_FCM_PATH}", pytrace=False)
    spec = importlib.util.spec_from_file_location("fake_fcm", FAKE_FCM_PATH)
    module = importlib.util.module_from_spec(spec)
    try:
        sys.modules["fake_fcm"] = module
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - report whatever broke the import
        pytest.fail(f"cannot import the fake FCM server {FAKE_FCM_PATH}: {exc!r}", pytrace=False)
    return module


class FakeFCM:
    """The fake FCM server (in this process, TLS + HTTP/2 via ALPN, or cleartext h2c with ``tls=False``) and its
    recorded requests."""

    def __init__(self, workdir: str, tls: bool = True):
        module = load_fake_fcm_module()
        if tls:
            self.server = module.FakeFCMServer(tls_dir=os.path.join(workdir, "fake-fcm-tls"))
        else:
            self.server = module.FakeFCMServer()
        self.workdir = workdir

    def start(self) -> "FakeFCM":
        self.server.start()
        return self

    def stop(self) -> None:
        try:
            self.server.stop()
        except OSError:
            # fake_fcm's stop() closes a listening socket hypercorn already closed (EBADF): harmless.
            pass

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def ca_file(self) -> str:
        return self.server.ca_file

    def service_account_file(self, name: str, project_id: str = "fake-project") -> str:
        account = self.server.create_service_account(project_id)
        path = os.path.join(self.workdir, f"service-account-{name}-{uuid.uuid4().hex[:6]}.json")
        with open(path, "w") as f:
            json.dump(account, f)
        return path

    def sends(self) -> list[dict]:
        return self.server.state.snapshot()["sends"]

    def sends_for(self, token: str, ok_only: bool = True) -> list[dict]:
        out = []
        for s in self.sends():
            tok = s.get("token")
            if tok is None and s.get("json"):
                tok = (s["json"].get("message") or {}).get("token")
            if tok == token and (not ok_only or s.get("status") == 200):
                out.append(s)
        return out

    def describe(self, token: str) -> str:
        all_sends = self.sends_for(token, ok_only=False)
        lines = [f"{len(all_sends)} request(s) for token {token!r}:"]
        lines += [f"  status={s.get('status')} path={s.get('path')} body={s.get('body')}" for s in all_sends]
        return "\n".join(lines)


class Stack:
    """One gateway process wired to the session's broker and fake FCM, with its own topics."""

    def __init__(self, workdir: str, broker: Tansu, publisher: Publisher, fake: FakeFCM, name: str,
                 extra_apps: Optional[dict] = None, partitions: int = 4):
        self.broker, self.publisher, self.fake = broker, publisher, fake
        self.topics = Topics.unique(broker, partitions)
        self.name = f"{name}-{self.topics.suffix}"
        self.workdir = os.path.join(workdir, self.name)
        os.makedirs(self.workdir, exist_ok=True)
        apps = {
            APP: {"enabled": True, "fcmServiceAccountFile": fake.service_account_file(APP)},
            DISABLED_APP: {"enabled": False},
        }
        apps.update(extra_apps or {})
        self.config = make_config(
            http_port=free_port(), brokers=broker.bootstrap, group_id=self.topics.group,
            changes_topic=self.topics.changes, dlq_topic=self.topics.dlq, state_topic=self.topics.state,
            fcm_base_url=fake.base_url, fcm_ca_file=fake.ca_file, apps=apps,
        )
        self.config["kafka"]["snapshotRequestsTopic"] = self.topics.snapshots
        self.config["kafka"]["membersTopic"] = self.topics.members
        self.config["kafka"]["userNotificationsTopic"] = self.topics.notifications
        # Per-app settings files (tests write them with write_app_settings), re-read every 0.2 s.
        self.settings_dir = os.path.join(self.workdir, "apps.d")
        os.makedirs(self.settings_dir, exist_ok=True)
        self.config["appSettings"] = {"directory": self.settings_dir, "reloadSeconds": 0.2}
        self.gateway: Optional[Gateway] = None
        self.generation = 0

    def write_app_settings(self, app: str, settings, raw: Optional[str] = None) -> str:
        """Writes apps.d/<app>.yaml atomically (as a ConfigMap update would): ``settings`` as YAML, or ``raw``."""
        import yaml
        path = os.path.join(self.settings_dir, f"{app}.yaml")
        tmp = os.path.join(self.settings_dir, f".{app}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(raw if raw is not None else yaml.safe_dump(settings, sort_keys=False))
        os.replace(tmp, path)
        return path

    def start(self) -> "Stack":
        self.generation += 1
        self.gateway = Gateway(self.workdir, config=self.config, name=f"gateway{self.generation}").start()
        return self

    def stop(self) -> Optional[int]:
        return self.gateway.stop() if self.gateway else None

    # -- publishing ----------------------------------------------------------------------------------------

    def publish(self, path: str, op: str, after: Optional[str] = None, before: Optional[str] = None, *,
                app: str = APP, as_json: bool = False) -> str:
        return self.publisher.event(self.topics.changes, app, path, op, after, before, as_json=as_json)

    def notify_user(self, uid: str, data, *, app: str = APP, **extra) -> str:
        return self.publisher.user_notification(self.topics.notifications, app, uid, data, **extra)

    # -- observing the fake FCM ----------------------------------------------------------------------------

    def wait_sends(self, token: str, n: int, timeout: float = DELIVERY_TIMEOUT) -> list[dict]:
        def enough():
            if self.gateway and not self.gateway.proc.alive():
                raise AssertionError(f"gateway died\n{self.gateway.tails()}")
            sends = self.fake.sends_for(token)
            return sends if len(sends) >= n else None

        return wait_for(enough, timeout=timeout, interval=0.05,
                        what=f"{n} successful FCM send(s) to token {token!r}",
                        on_timeout=lambda: self.fake.describe(token) + "\n" + self.gateway.tails())

    def expect_data(self, token: str, expected: list[Pairs], timeout: float = DELIVERY_TIMEOUT) -> list[dict]:
        """Waits for len(expected) sends to ``token`` and compares each ``data`` object byte for byte."""
        sends = self.wait_sends(token, len(expected), timeout)
        for i, (send, pairs) in enumerate(zip(sends, expected)):
            assert_data(send, pairs, f"notification #{i + 1} to {token}")
        return sends


def assert_data(send: dict, pairs: Pairs, what: str = "notification") -> None:
    got = raw_member(send["body"], "message", "data")
    want = serialise_data(pairs).decode("utf-8")
    assert got is not None, f"{what}: no message.data in body {send['body']!r}"
    assert got.encode("utf-8") == want.encode("utf-8"), (
        f"{what}: data payload differs\n expected ({len(want.encode())} bytes): {want}\n"
        f" got      ({len(got.encode())} bytes): {got}"
    )


def assert_body(send: dict, token: str, pairs: Pairs) -> None:
    want = fcm_body(token, pairs)
    got = send["body"].encode("utf-8")
    assert got == want, f"FCM request body differs\n expected: {want.decode()}\n got:      {got.decode()}"
