"""The v2 subscription calls the end-to-end tests of the delivery channels make (webhooks, Web Push, APNs), with
HS256 user tokens of one app secret, and the metric reads they share."""

from __future__ import annotations

import time

import jwt
import requests

from procutil import wait_for


class V2Api:
    """v2 calls as user `uid` (default alice), each with a fresh HS256 token signed with `secret`."""

    def __init__(self, secret: str):
        self.secret = secret

    def hs(self, uid: str) -> str:
        return jwt.encode({"uid": uid, "exp": int(time.time()) + 600}, self.secret, algorithm="HS256")

    @staticmethod
    def url(stack, app: str, uid: str, sid: str = "") -> str:
        return f"{stack.gateway.base}/datasync/v2/{app}/subscriptions/{uid}" + (f"/{sid}" if sid else "")

    def subscribe(self, stack, app: str, body: dict, uid: str = "alice") -> requests.Response:
        return requests.post(self.url(stack, app, uid), json=body, headers={"Authorization": f"Bearer {self.hs(uid)}"},
                             timeout=10)

    def created(self, stack, app: str, body: dict, uid: str = "alice") -> dict:
        r = self.subscribe(stack, app, body, uid)
        assert r.status_code == 201, f"POST {body}: {r.status_code} {r.text}"
        return r.json()

    def put(self, stack, app: str, sid: str, body: dict, uid: str = "alice") -> requests.Response:
        return requests.put(self.url(stack, app, uid, sid), json=body, headers={"Authorization": f"Bearer {self.hs(uid)}"},
                            timeout=10)

    def get(self, stack, app: str, sid: str, uid: str = "alice") -> requests.Response:
        return requests.get(self.url(stack, app, uid, sid), headers={"Authorization": f"Bearer {self.hs(uid)}"}, timeout=10)

    def served(self, stack, app: str) -> None:
        wait_for(lambda: requests.get(self.url(stack, app, "probe"), headers={"Authorization": f"Bearer {self.hs('probe')}"},
                                      timeout=10).status_code == 200,
                 timeout=20, what=f"app {app} to be served", on_timeout=stack.gateway.tails)


def metric(stack, name: str, **labels) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    total = 0.0
    for s in stack.gateway.metrics():
        if s.name == name and all(f'{k}="{v}"' in s.labels for k, v in labels.items()):
            total += s.value
    return total


def wait_metric(stack, name: str, at_least: float, **labels) -> float:
    return wait_for(lambda: (lambda v: v if v >= at_least else None)(metric(stack, name, **labels)), timeout=30,
                    what=f"{name}{labels} >= {at_least}", on_timeout=stack.gateway.tails)
