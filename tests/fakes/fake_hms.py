#!/usr/bin/env python3
"""A fake Huawei Push Kit (HMS, server API v1) server, with its OAuth 2.0 token endpoint, for tests.

Same design as fake_fcm.py (whose TLS, socket and hypercorn helpers it reuses): HTTP/2 via hypercorn, h2 over
TLS with ALPN when given a certificate, h2c with prior knowledge (and HTTP/1.1) in clear text. Answers are
shaped like Huawei's: `{"code": "80000000", "msg": "Success", "requestId": "..."}`.

Command line
------------
    python3 tests/fakes/fake_hms.py --port 0 [--host 127.0.0.1]
        [--tls-cert CERT.pem --tls-key KEY.pem | --tls-self-signed DIR]
        [--app-id 100000001] [--client-id ID (default: the app id)] [--client-secret S (default: random)]
        [--token-expires-in 3600] [--exit-on-stdin-eof]

prints exactly one JSON line on stdout once listening, then serves until SIGTERM/SIGINT:
    {"port": N, "base_url": "...", "token_url": ".../oauth2/v3/token", "app_id": "...", "client_id": "...",
     "client_secret": "...", "ca_file": "DIR/cert.pem" (with --tls-self-signed)}
The app given (or defaulted) on the command line is registered. --exit-on-stdin-eof stops the server when
its stdin closes (the test process that piped it died).

Endpoints (the HMS protocol)
----------------------------
POST /oauth2/v3/token
    Client-credentials grant, form-urlencoded grant_type=client_credentials&client_id=...&client_secret=...
    Answers {"access_token": "...", "expires_in": N, "token_type": "Bearer"} (tokens contain '+', '/' and '='
    like Huawei's), or HTTP 400 with {"error": 1101 | 1102, "sub_error": N, "error_description": "..."}:
    1102/20001 missing parameter, 1101/20001 unsupported grant_type, 1101/20003 unknown client_id,
    1101/20356 invalid client_secret (sub-errors are the fake's choice where Huawei's are not known).
POST /v1/{appId}/messages:send
    1. "Authorization: Bearer <token>": missing, unknown or issued for another app -> HTTP 401 code 80200001;
       expired -> HTTP 401 code 80200003.
    2. Body: JSON (else 400 80100003) {"validate_only": bool (optional), "message": {"data": STRING that parses
       as a JSON object, "android": {"urgency": "HIGH" | "NORMAL", "ttl": a duration string ("86400s", "86400",
       up to 9 decimals; at most 15 days), "collapse_key": an integer -1..100} (each optional), "token": [non-empty strings,
       1..1000]}}. Structure errors -> 400 80100003, bad values -> 400 80100001, no/too many tokens -> 200
       80300010, data over 4096 bytes -> 200 80300008.
    3. Injected responses (per-token queues first, then the global one).
    4. 200 {"code": "80000000", "msg": "Success", "requestId": "..."}.
    Every request is recorded. "validate_only": true is a test message: the same checks and answers, delivered to no
    device; its record has "validate_only": true.

Control API (for tests in other processes; JSON in and out)
-----------------------------------------------------------
GET or POST /_control/sends
    {"sends": [{"time", "method", "path", "app_id", "headers" {lowercase: value}, "body" (text), "json" (parsed
    or null), "data" (message.data string or null), "tokens" (list or null), "token" (the only token, else
    null), "http_version" ("1.1"/"2"), "client_port", "status", "code", "validate_only"} ...], "send_count": N,
    "token_requests": [{"time", "http_version", "status", "client_id"}], "issued_tokens": N,
    "connections": number of distinct client ports seen by sends, "rate_limited": sends refused by the injected
    rate limit}   (at most 100 000 sends are kept)
POST /_control/reset
    Forgets recorded requests, injections, delay and issued access tokens (registered apps stay).
POST /_control/inject
    {"code": "80300007", "token": null | T, "count": N (default 1), "http_status": S (default: 400 for
     801xxxxx, 401 for 802xxxxx, 500 for 81000001, else 200), "retry_after": seconds, "msg": text,
     "illegal_tokens": [...] (80100000 only; default: [token] when a token is given, else all the request's)}
        queue N answers with that result code (80100000's msg is {"success","failure","illegal_tokens"}).
    {"http_status": 503, "retry_after": 7, "body": {...} | "text" (optional), "headers": {...}, "token", "count"}
        queue a raw answer; without a body, a JSON one without a code ({"msg": ..., "requestId": ...}).
    {"delay_ms": D}           delay every messages:send answer by D ms (0 turns it off).
    {"rate_limit": {"count": N, "window_s": W}}  each app's send rate: a send that would make more than N
                              sends of its app within any W seconds (a sliding window) is answered 503 (HMS's
                              flow control; its body carries no result code here, as none is documented for it)
                              and counted in "rate_limited"; {"rate_limit": null} turns it off.
    {"token_expires_in": S}   expires_in of access tokens issued from now on.
    {"expire_tokens": true}   every issued access token expires now (the next send gets a real 80200003).
    {"revoke_access_tokens": true}  forget every issued access token (the next send gets 80200001).
    {"token_endpoint_error": {"http_status": 400, "error": 1101, "sub_error": 20356, "error_description": "...",
     "count": 1}}             make the next token request(s) fail.
POST /_control/expire_tokens
    Same as {"expire_tokens": true}.
POST /_control/apps
    {"app_id": A, "client_id": C (optional, default A), "client_secret": S (optional, default random)}
    registers an app; answers it.

From Python (pytest)
--------------------
    server = FakeHMSServer(tls_dir=tmp_path)      # or FakeHMSServer() for h2c
    server.start()                                # bounded wait; raises if it does not come up
    app = server.register_app("100000001")        # {"app_id", "client_id", "client_secret"}
    server.inject(code="80300007", token="t1")
    ... server.state.snapshot() ...
    server.stop()
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import itertools
import json
import os
import re
import secrets
import signal
import sys
import threading
import time
import urllib.parse
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hypercorn.asyncio import serve  # noqa: E402

# Shared with the fake FCM: certificates, sockets, hypercorn settings, response writing.
from fake_fcm import (  # noqa: E402
    header_value,
    listening_socket,
    make_config,
    make_self_signed_cert,
    quiet_cancellations,
    respond,
    SlidingWindowQuota,
)

MAX_RECORDED_SENDS = 100_000
MAX_TOKENS = 1000
MAX_DATA_BYTES = 4096
# android.ttl as HMS reads it: seconds, optionally with up to 9 decimals, optionally ending in "s".
HMS_DURATION = re.compile(r"^\d+(\.\d{1,9})?[sS]?$")
MAX_TTL_SECONDS = 1_296_000  # 15 days
TOKEN_PATH = "/oauth2/v3/token"
SEND_PATH = re.compile(r"^/v1/([^/]+)/messages:send$")

SUCCESS = "80000000"
PARTIAL_SUCCESS = "80100000"
# Huawei's wording where known.
DEFAULT_MESSAGES: dict[str, str] = {
    SUCCESS: "Success",
    "80100001": "Some request parameters are incorrect",
    "80100003": "Incorrect message structure",
    "80100004": "The message expiration time is earlier than the current time",
    "80200001": "Oauth authentication error",
    "80200003": "Oauth Token expired",
    "80300002": "The current app does not have the permission to send messages",
    "80300007": "All tokens are invalid",
    "80300008": "The message body size exceeds the default value",
    "80300010": "The number of tokens in the message body exceeds the default value",
    "80600003": "Request OAuth service failed",
    "81000001": "System inner error",
}


def default_http_status(code: str) -> int:
    if code.startswith("801") and code != PARTIAL_SUCCESS:
        return 400
    if code.startswith("802"):
        return 401
    if code == "81000001":
        return 500
    return 200


def new_access_token() -> str:
    """Looks like Huawei's: base64 with '+', '/' and '=' (47 random bytes always end in one '=')."""
    return "CgB6e3x9" + base64.b64encode(secrets.token_bytes(47)).decode()


class Injection:
    """A queued answer: `remaining` more requests get it."""

    def __init__(self, spec: dict, count: int):
        self.spec, self.remaining = spec, count


class FakeHMSState:
    """Everything the fake knows; thread-safe (the server loop and test threads both use it)."""

    def __init__(self, token_expires_in: int = 3600):
        self._lock = threading.Lock()
        self.apps: dict[str, dict] = {}  # client_id -> {"app_id", "client_id", "client_secret"}
        self.default_token_expires_in = token_expires_in
        self.request_ids = itertools.count(1)
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.sends: collections.deque = collections.deque(maxlen=MAX_RECORDED_SENDS)
            self.send_count = 0
            self.client_ports: set[int] = set()
            self.token_requests: list[dict] = []
            self.access_tokens: dict[str, tuple[str, str, float]] = {}  # token -> (client_id, app_id, expires_at)
            self.per_token: dict[str, collections.deque] = {}
            self.global_queue: collections.deque = collections.deque()
            self.token_endpoint_errors: collections.deque = collections.deque()
            self.delay_ms = 0
            self.token_expires_in = self.default_token_expires_in
            self.rate_limit: SlidingWindowQuota | None = None
            self.rate_limited = 0

    # --- configuration -------------------------------------------------------------------------

    def register_app(self, app_id: str, client_id: str | None = None, client_secret: str | None = None) -> dict:
        app = {"app_id": str(app_id), "client_id": str(client_id or app_id),
               "client_secret": client_secret or secrets.token_hex(32)}
        with self._lock:
            self.apps[app["client_id"]] = app
        return dict(app)

    def inject(self, code: str | None = None, token: str | None = None, count: int = 1,
               http_status: int | None = None, retry_after: float | None = None, msg: str | None = None,
               illegal_tokens: list | None = None, body: Any = None, headers: dict | None = None,
               delay_ms: int | None = None, token_expires_in: int | None = None, expire_tokens: bool = False,
               revoke_access_tokens: bool = False, token_endpoint_error: dict | None = None, rate_limit: Any = ...) -> None:
        """See the module docstring (POST /_control/inject); keyword arguments are the JSON fields."""
        with self._lock:
            if rate_limit is not ...:
                self.rate_limit = SlidingWindowQuota.from_spec(rate_limit)
            if delay_ms is not None:
                self.delay_ms = max(0, int(delay_ms))
            if token_expires_in is not None:
                self.token_expires_in = int(token_expires_in)
            if expire_tokens:
                now = time.time()
                for key, (client_id, app_id, _) in list(self.access_tokens.items()):
                    self.access_tokens[key] = (client_id, app_id, now - 1)
            if revoke_access_tokens:
                self.access_tokens.clear()
            if token_endpoint_error is not None:
                spec = dict(token_endpoint_error)
                for _ in range(int(spec.get("count", 1))):
                    self.token_endpoint_errors.append(spec)
            if code is None and http_status is None and body is None:
                return
            if code is not None:
                code = str(code)
                if not re.fullmatch(r"[0-9]{8}", code):
                    raise ValueError(f"HMS result codes are 8 digits, not {code!r}")
            if illegal_tokens is not None and not isinstance(illegal_tokens, list):
                raise ValueError("illegal_tokens must be a list")
            spec = {"code": code, "token": token, "http_status": None if http_status is None else int(http_status),
                    "retry_after": retry_after, "msg": msg, "illegal_tokens": illegal_tokens, "body": body,
                    "headers": dict(headers or {})}
            injection = Injection(spec, max(1, int(count)))
            if token is not None:
                self.per_token.setdefault(str(token), collections.deque()).append(injection)
            else:
                self.global_queue.append(injection)

    def expire_tokens(self) -> None:
        self.inject(expire_tokens=True)

    def snapshot(self) -> dict:
        """The recorded requests, as served by /_control/sends."""
        with self._lock:
            return {
                "sends": [dict(s) for s in self.sends],
                "send_count": self.send_count,
                "token_requests": [dict(r) for r in self.token_requests],
                "issued_tokens": sum(1 for r in self.token_requests if r["status"] == 200),
                "connections": len(self.client_ports),
                "rate_limited": self.rate_limited,
            }

    def over_rate_limit(self, app_id: str, now: float) -> bool:
        """Counts a send of `app_id` arriving at `now`; true when it makes more than the limit within the window."""
        with self._lock:
            if self.rate_limit is None or not self.rate_limit.over(app_id, now):
                return False
            self.rate_limited += 1
            return True

    # --- request handling (called on the server's loop) ----------------------------------------

    def take_injection(self, push_tokens: list[str]) -> Injection | None:
        with self._lock:
            queues = [self.per_token.get(t) for t in push_tokens] + [self.global_queue]
            for queue in queues:
                if queue:
                    injection = queue[0]
                    injection.remaining -= 1
                    if injection.remaining <= 0:
                        queue.popleft()
                    return injection
            return None

    def next_request_id(self) -> str:
        with self._lock:
            return f"{int(time.time() * 1000)}{next(self.request_ids):08d}"

    def record_send(self, record: dict) -> None:
        with self._lock:
            self.sends.append(record)
            self.send_count += 1
            if record.get("client_port") is not None:
                self.client_ports.add(record["client_port"])


class FakeHMSApp:
    """The raw ASGI application."""

    def __init__(self, state: FakeHMSState):
        self.state = state

    async def __call__(self, scope: dict, receive, send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        method, path = scope["method"], scope["path"]
        try:
            if method == "POST" and SEND_PATH.match(path):
                status, payload, headers = await self.messages_send(scope, bytes(body))
            elif method == "POST" and path == TOKEN_PATH:
                status, payload, headers = self.token(scope, bytes(body))
            elif path.startswith("/_control/"):
                status, payload, headers = self.control(method, path, bytes(body))
            else:
                status, payload, headers = 404, {"code": "80100001", "msg": f"No route for {method} {path}"}, {}
        except Exception as error:  # a bug in the fake must show up, not hang the client
            status, payload, headers = 500, {"msg": f"fake_hms error: {error!r}"}, {}
        await respond(send, status, payload, headers)

    # --- OAuth 2.0 token endpoint ------------------------------------------------------------------

    def token(self, scope: dict, body: bytes) -> tuple[int, Any, dict]:
        record = {"time": time.time(), "http_version": scope.get("http_version"), "status": 400, "client_id": None}
        with self.state._lock:
            self.state.token_requests.append(record)
            forced = self.state.token_endpoint_errors.popleft() if self.state.token_endpoint_errors else None
        if forced is not None:
            record["status"] = int(forced.get("http_status", 400))
            return record["status"], {"error": forced.get("error", 1101), "sub_error": forced.get("sub_error", 20356),
                                      "error_description": forced.get("error_description", "Injected error.")}, {}
        form = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        values = {name: form.get(name, [""])[0] for name in ("grant_type", "client_id", "client_secret")}
        for name, value in values.items():
            if not value:
                return 400, {"error": 1102, "sub_error": 20001,
                             "error_description": f"missing required parameter: {name}"}, {}
        if values["grant_type"] != "client_credentials":
            return 400, {"error": 1101, "sub_error": 20001, "error_description": "unsupported grant_type"}, {}
        with self.state._lock:
            app = self.state.apps.get(values["client_id"])
        if app is None:
            return 400, {"error": 1101, "sub_error": 20003, "error_description": "invalid client_id"}, {}
        if not secrets.compare_digest(app["client_secret"], values["client_secret"]):
            return 400, {"error": 1101, "sub_error": 20356, "error_description": "invalid client_secret"}, {}
        access_token = new_access_token()
        with self.state._lock:
            expires_in = self.state.token_expires_in
            self.state.access_tokens[access_token] = (app["client_id"], app["app_id"], time.time() + expires_in)
        record["status"], record["client_id"] = 200, app["client_id"]
        return 200, {"access_token": access_token, "expires_in": expires_in, "token_type": "Bearer"}, {}

    # --- HMS messages:send -------------------------------------------------------------------------

    async def messages_send(self, scope: dict, body: bytes) -> tuple[int, Any, dict]:
        app_id = SEND_PATH.match(scope["path"]).group(1)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        client = scope.get("client")
        record: dict[str, Any] = {
            "time": time.time(), "method": scope["method"], "path": scope["path"], "app_id": app_id,
            "headers": headers, "body": body.decode("utf-8", "replace"), "json": None, "data": None,
            "tokens": None, "token": None, "http_version": scope.get("http_version"),
            "client_port": client[1] if client else None, "status": None, "code": None, "validate_only": False,
        }
        status, payload, response_headers = self.evaluate_send(app_id, headers, body, record)
        record["status"] = status
        record["code"] = payload.get("code") if isinstance(payload, dict) else None
        self.state.record_send(record)
        delay = self.state.delay_ms
        if delay:
            await asyncio.sleep(delay / 1000)
        return status, payload, response_headers

    def answer(self, code: str, msg: str | None = None) -> dict:
        return {"code": code, "msg": msg if msg is not None else DEFAULT_MESSAGES.get(code, "Error"),
                "requestId": self.state.next_request_id()}

    def evaluate_send(self, app_id: str, headers: dict, body: bytes, record: dict) -> tuple[int, Any, dict]:
        authorization = headers.get("authorization", "")
        if not authorization.startswith("Bearer "):
            return 401, self.answer("80200001"), {}
        with self.state._lock:
            entry = self.state.access_tokens.get(authorization[len("Bearer "):])
        if entry is None or entry[1] != app_id:
            return 401, self.answer("80200001"), {}
        if entry[2] <= time.time():
            return 401, self.answer("80200003"), {}
        if self.state.over_rate_limit(app_id, record["time"]):
            return 503, {"msg": "HTTP 503", "requestId": self.state.next_request_id()}, {}
        try:
            document = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return 400, self.answer("80100003", "Incorrect message structure: the body is not JSON"), {}
        record["json"] = document
        record["validate_only"] = isinstance(document, dict) and document.get("validate_only") is True
        message = document.get("message") if isinstance(document, dict) else None
        if not isinstance(message, dict):
            return 400, self.answer("80100003", "Incorrect message structure: message must be an object"), {}
        tokens = message.get("token")
        if isinstance(tokens, list) and all(isinstance(t, str) for t in tokens):
            record["tokens"] = tokens
            record["token"] = tokens[0] if len(tokens) == 1 else None
        data = message.get("data")
        record["data"] = data if isinstance(data, str) else None
        violation = self.validate(document, message, tokens, data)
        if violation is not None:
            code, text = violation
            return default_http_status(code), self.answer(code, text), {}
        injection = self.state.take_injection(tokens)
        if injection is not None:
            return self.injected_answer(injection, tokens)
        return 200, self.answer(SUCCESS), {}

    @staticmethod
    def validate(document: dict, message: dict, tokens: Any, data: Any) -> tuple[str, str] | None:
        """(code, msg) of the first problem of the request's shape."""
        if "validate_only" in document and not isinstance(document["validate_only"], bool):
            return "80100001", "Some request parameters are incorrect: validate_only must be a boolean"
        if tokens is None or (isinstance(tokens, list) and not tokens):
            return "80300010", DEFAULT_MESSAGES["80300010"]
        if not isinstance(tokens, list):
            return "80100003", "Incorrect message structure: message.token must be a list"
        if len(tokens) > MAX_TOKENS:
            return "80300010", DEFAULT_MESSAGES["80300010"]
        if not all(isinstance(t, str) and t for t in tokens):
            return "80100001", "Some request parameters are incorrect: tokens must be non-empty strings"
        if not isinstance(data, str):
            return "80100003", "Incorrect message structure: message.data must be a string"
        try:
            parsed = json.loads(data)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            return "80100001", "Some request parameters are incorrect: message.data must be a JSON object string"
        if len(data.encode("utf-8")) > MAX_DATA_BYTES:
            return "80300008", DEFAULT_MESSAGES["80300008"]
        android = message.get("android", {})
        if not isinstance(android, dict):
            return "80100003", "Incorrect message structure: message.android must be an object"
        if "urgency" in android and android["urgency"] not in ("HIGH", "NORMAL"):
            return "80100001", "Some request parameters are incorrect: android.urgency must be HIGH or NORMAL"
        if "ttl" in android:
            ttl = android["ttl"]
            if not isinstance(ttl, str) or not HMS_DURATION.match(ttl):
                return "80100001", "Some request parameters are incorrect: android.ttl must be a duration such as \"86400s\""
            if float(ttl.rstrip("sS")) > MAX_TTL_SECONDS:
                return "80100001", "Some request parameters are incorrect: android.ttl exceeds 15 days"
        if "collapse_key" in android:
            key = android["collapse_key"]
            if isinstance(key, bool) or not isinstance(key, int) or not -1 <= key <= 100:
                return "80100001", "Some request parameters are incorrect: android.collapse_key must be an integer from -1 to 100"
        return None

    def injected_answer(self, injection: Injection, tokens: list[str]) -> tuple[int, Any, dict]:
        spec = injection.spec
        headers = dict(spec["headers"])
        if spec["retry_after"] is not None:
            value = spec["retry_after"]
            headers["retry-after"] = str(int(value)) if float(value).is_integer() else str(value)
        code = spec["code"]
        if spec["body"] is not None:
            return spec["http_status"] or 200, spec["body"], headers
        if code is None:
            status = spec["http_status"]
            return status, {"msg": f"HTTP {status}", "requestId": self.state.next_request_id()}, headers
        status = spec["http_status"] if spec["http_status"] is not None else default_http_status(code)
        msg = spec["msg"]
        if code == PARTIAL_SUCCESS and msg is None:
            illegal = spec["illegal_tokens"]
            if illegal is None:
                illegal = [spec["token"]] if spec["token"] is not None else list(tokens)
            failed = [t for t in tokens if t in illegal]
            msg = json.dumps({"success": len(tokens) - len(failed), "failure": len(failed),
                              "illegal_tokens": illegal}, separators=(",", ":"))
        return status, self.answer(code, msg), headers

    # --- control API -------------------------------------------------------------------------------

    def control(self, method: str, path: str, body: bytes) -> tuple[int, Any, dict]:
        try:
            document = json.loads(body) if body else {}
        except ValueError:
            return 400, {"error": "body is not JSON"}, {}
        if path == "/_control/sends" and method in ("GET", "POST"):
            return 200, self.state.snapshot(), {}
        if method != "POST":
            return 405, {"error": f"{path} takes POST"}, {}
        if path == "/_control/reset":
            self.state.reset()
            return 200, {}, {}
        if path == "/_control/inject":
            if not isinstance(document, dict):
                return 400, {"error": "inject takes a JSON object"}, {}
            try:
                self.state.inject(**document)
            except (TypeError, ValueError) as error:
                return 400, {"error": str(error)}, {}
            return 200, {}, {}
        if path == "/_control/expire_tokens":
            self.state.expire_tokens()
            return 200, {}, {}
        if path == "/_control/apps":
            try:
                app = self.state.register_app(document["app_id"], document.get("client_id"),
                                              document.get("client_secret"))
            except (KeyError, TypeError, AttributeError) as error:
                return 400, {"error": f"bad app: {error!r}"}, {}
            return 200, app, {}
        return 404, {"error": f"no control endpoint {method} {path}"}, {}


# --- server ----------------------------------------------------------------------------------------

class FakeHMSServer:
    """The fake run by hypercorn on a background thread with its own event loop (for pytest)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, tls_cert: str | None = None,
                 tls_key: str | None = None, tls_dir: str | None = None, token_expires_in: int = 3600):
        if tls_dir is not None and tls_cert is None:
            tls_cert, tls_key = make_self_signed_cert(str(tls_dir))
        self.host, self.tls_cert, self.tls_key = host, tls_cert, tls_key
        self.state = FakeHMSState(token_expires_in)
        self._sock = listening_socket(host, port)
        self._sock_handed_over = False
        self.port = self._sock.getsockname()[1]
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert else "http"

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}{TOKEN_PATH}"

    @property
    def ca_file(self) -> str | None:
        return self.tls_cert

    def register_app(self, app_id: str, client_id: str | None = None, client_secret: str | None = None) -> dict:
        """Registers an app ({"app_id", "client_id", "client_secret"}; client_id defaults to app_id, the secret
        to a random one) and returns it."""
        return self.state.register_app(app_id, client_id, client_secret)

    def inject(self, **spec: Any) -> None:
        """See FakeHMSState.inject (POST /_control/inject)."""
        self.state.inject(**spec)

    def expire_tokens(self) -> None:
        self.state.expire_tokens()

    def reset(self) -> None:
        self.state.reset()

    def sends(self) -> list[dict]:
        return self.state.snapshot()["sends"]

    def start(self, timeout: float = 10.0) -> "FakeHMSServer":
        self._thread = threading.Thread(target=self._run, name="fake-hms", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout):
            raise TimeoutError("fake HMS server did not start in time")
        if self._error is not None:
            raise RuntimeError("fake HMS server failed to start") from self._error
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as error:  # reported by start()
            self._error = error
            self._started.set()
        finally:
            loop.close()

    async def _serve(self) -> None:
        quiet_cancellations(asyncio.get_running_loop())
        self._stop_event = asyncio.Event()
        # From here hypercorn owns the descriptor and closes it on shutdown.
        self._sock_handed_over = True
        config = make_config(self._sock.detach(), self.tls_cert, self.tls_key)
        asyncio.get_running_loop().call_soon(self._started.set)
        await serve(FakeHMSApp(self.state), config, shutdown_trigger=self._stop_event.wait)

    def stop(self, timeout: float = 10.0) -> None:
        if self._loop is not None and self._stop_event is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._stop_event.set)
            except RuntimeError:
                pass
        if self._thread is not None:
            self._thread.join(timeout)
        if not self._sock_handed_over:
            self._sock.close()

    def __enter__(self) -> "FakeHMSServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fake Huawei Push Kit v1 + OAuth 2.0 server (see module docstring).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--tls-self-signed", metavar="DIR", help="generate cert.pem/key.pem in DIR and serve TLS")
    parser.add_argument("--app-id", default="100000001")
    parser.add_argument("--client-id", help="default: the app id")
    parser.add_argument("--client-secret", help="default: random")
    parser.add_argument("--token-expires-in", type=int, default=3600)
    parser.add_argument("--exit-on-stdin-eof", action="store_true",
                        help="stop when stdin closes (so the fake dies with the test process that piped it)")
    args = parser.parse_args(argv)
    # A parent that spawns us from a thread with signals blocked (e.g. a Swift concurrency or Dispatch worker
    # thread, through Foundation's Process) passes that mask on: unblock what stops us, or SIGTERM never lands.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    cert, key = args.tls_cert, args.tls_key
    if args.tls_self_signed:
        cert, key = make_self_signed_cert(args.tls_self_signed)

    state = FakeHMSState(args.token_expires_in)
    app = state.register_app(args.app_id, args.client_id, args.client_secret)
    sock = listening_socket(args.host, args.port)
    port = sock.getsockname()[1]
    scheme = "https" if cert else "http"
    base_url = f"{scheme}://{args.host}:{port}"
    announcement: dict[str, Any] = {"port": port, "base_url": base_url, "token_url": f"{base_url}{TOKEN_PATH}", **app}
    if args.tls_self_signed:
        announcement["ca_file"] = cert

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        quiet_cancellations(loop)
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        if args.exit_on_stdin_eof:
            def stdin_readable() -> None:
                if not os.read(sys.stdin.fileno(), 4096):
                    loop.remove_reader(sys.stdin.fileno())
                    stop.set()
            loop.add_reader(sys.stdin.fileno(), stdin_readable)
        loop.call_soon(lambda: print(json.dumps(announcement), flush=True))
        await serve(FakeHMSApp(state), make_config(sock.detach(), cert, key), shutdown_trigger=stop.wait)

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
