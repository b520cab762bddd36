#!/usr/bin/env python3
"""A fake Firebase Cloud Messaging (FCM HTTP v1) server, with its OAuth2 token endpoint, for tests.

It speaks the real protocol over HTTP/2 (hypercorn): h2 over TLS with ALPN when given a certificate,
h2c with prior knowledge (and HTTP/1.1) in clear text. Error bodies are shaped like FCM's real ones.

Command line
------------
    python3 tests/fakes/fake_fcm.py --port 0 [--host 127.0.0.1]
        [--tls-cert CERT.pem --tls-key KEY.pem | --tls-self-signed DIR]
        [--service-account-out SA.json] [--project-id fake-project]
        [--token-expires-in 3600] [--exit-on-stdin-eof]

prints exactly one JSON line on stdout once listening, then serves until SIGTERM/SIGINT:
    {"port": N, "base_url": "...", "token_url": "...",
     "service_account": "SA.json" (with --service-account-out),
     "ca_file": "DIR/cert.pem" (with --tls-self-signed)}
--tls-self-signed DIR writes a fresh self-signed cert.pem/key.pem for 127.0.0.1/localhost into DIR and
serves TLS with it (clients trust it with DIR/cert.pem as CA file). --service-account-out writes a
service-account JSON (new RSA key, token_uri pointing at this server) and registers its public key.
--exit-on-stdin-eof stops the server when its stdin closes, e.g. when the test process that started it
with a pipe dies without cleaning up.

Endpoints (the FCM protocol)
----------------------------
POST /token
    OAuth2 JWT-bearer grant (form-urlencoded grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer,
    assertion=JWT). The assertion must be RS256-signed by a registered service account key (kid checked
    when registered), iss = its client_email, aud = this server's token URL, scope contains
    https://www.googleapis.com/auth/firebase.messaging, exp > now. Answers
    {"access_token": "...", "expires_in": N, "token_type": "Bearer"}, or 400
    {"error": "invalid_grant" | "unsupported_grant_type" | "invalid_request", "error_description": "..."}.
POST /v1/projects/{project}/messages:send
    Needs "Authorization: Bearer <issued, unexpired token>" (else 401 UNAUTHENTICATED), a JSON body with
    message.token (non-empty string) and message.data values all strings, message.android.ttl a Duration
    string ("3600s", at most 4 weeks) and android.collapse_key a string when present, message.apns.headers all
    strings (apns-expiration decimal, apns-collapse-id at most 64 bytes), and validate_only a boolean when
    present (else 400 INVALID_ARGUMENT with a google.rpc.BadRequest fieldViolation), and the project of the
    token's service account (else 403 PERMISSION_DENIED). Then applies injected errors, then answers 200
    {"name": "projects/{project}/messages/<id>"}. Every request is recorded.
    "validate_only": true is FCM's dry run: every check above and the injected errors (FCM checks the device
    token of a dry run too) apply, nothing is delivered, and the answer names FCM's dry-run message,
    {"name": "projects/{project}/messages/fake_message_id"}; the record has "validate_only": true.

Control API (for tests in other processes; JSON in and out)
-----------------------------------------------------------
GET  /_fake/requests
    {"sends": [{"time", "path", "project", "headers" {lowercase: value}, "body" (text), "json" (parsed or
    null), "http_version" ("1.1"/"2"), "client_port", "token", "status", "validate_only"} ...],
     "send_count": N, "token_requests": [{"time", "http_version", "status", "client_email"}],
     "issued_tokens": N, "connections": number of distinct client ports seen by sends,
     "rate_limited": sends refused by the injected rate limit}
    (At most 100 000 sends are kept; send_count counts all.)
POST /_fake/reset
    Forgets recorded requests, injections, delay and issued access tokens (registered accounts stay).
POST /_fake/inject
    One of:
    {"error": NAME, "token": T (optional: only for that push token; default any), "count": N (default 1),
     "retry_after": seconds (optional Retry-After header), "field": F (INVALID_ARGUMENT only; default
     "message.token"), "message": text (optional)}
        queue N responses of that FCM error; per-token queues are used before the global one. NAME is one
        of UNREGISTERED (404), INVALID_ARGUMENT (400), SENDER_ID_MISMATCH (403), QUOTA_EXCEEDED (429,
        Retry-After 60 unless given), UNAVAILABLE (503), INTERNAL (500), THIRD_PARTY_AUTH_ERROR (401),
        UNSPECIFIED_ERROR (500), UNAUTHENTICATED (401 about the OAuth token, no FcmError detail).
    {"http_status": S, "body": {...} or "text", "headers": {...}, "token": ..., "count": ...}
        queue a raw response (e.g. an error code this fake does not know).
    {"delay_ms": D}          delay every messages:send response by D ms (0 turns it off).
    {"project_delay_ms": {"P": D}}  delay the responses of project P only (a slow provider project).
    {"rate_limit": {"count": N, "window_s": W}}  each project's send quota: a send that would make more than N
        sends of its project (answered or not) within the last W seconds (a sliding window, like FCM's, which are
        not aligned to the clock) is answered 429 QUOTA_EXCEEDED (Retry-After 60) and counted in
        "rate_limited"; {"rate_limit": null} turns it off.
    {"token_expires_in": S}  expires_in of access tokens issued from now on.
    {"revoke_access_tokens": true}  forget every issued access token (the next send gets a real 401).
    {"token_endpoint_error": {"http_status": 400, "error": "invalid_grant", "count": 1}}
        make the next token request(s) fail.
POST /_fake/service-accounts
    {"client_email": E, "public_key_pem": PEM, "private_key_id": K (optional), "project_id": P
    (optional)} registers a key allowed to sign assertions for E.

From Python (pytest)
--------------------
    server = FakeFCMServer(tls_dir=tmp_path)      # or FakeFCMServer() for h2c
    server.start()                                # bounded wait; raises if it does not come up
    account = server.create_service_account()     # dict in Google's format, key registered
    server.state.inject(error="UNREGISTERED", token="t1")
    ... server.state.snapshot() ...
    server.stop()
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import datetime
import ipaddress
import itertools
import json
import os
import re
import secrets
import signal
import socket
import sys
import threading
import time
import urllib.parse
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from hypercorn.asyncio import serve
from hypercorn.config import Config

FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
FCM_ERROR_TYPE = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"
MAX_RECORDED_SENDS = 100_000
SEND_PATH = re.compile(r"^/v1/projects/([^/]+)/messages:send$")

# name -> (HTTP status, google.rpc status, default message). Messages are FCM's own wording.
FCM_ERRORS: dict[str, tuple[int, str, str]] = {
    "UNSPECIFIED_ERROR": (500, "UNKNOWN", "Unknown error."),
    "INVALID_ARGUMENT": (400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token"),
    "UNREGISTERED": (404, "NOT_FOUND", "Requested entity was not found."),
    "SENDER_ID_MISMATCH": (403, "PERMISSION_DENIED", "SenderId mismatch"),
    "QUOTA_EXCEEDED": (429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Send requests'."),
    "UNAVAILABLE": (503, "UNAVAILABLE", "The service is currently unavailable."),
    "INTERNAL": (500, "INTERNAL", "Internal error encountered."),
    "THIRD_PARTY_AUTH_ERROR": (401, "UNAUTHENTICATED", "Auth error from APNS or Web Push Service"),
}
UNAUTHENTICATED_MESSAGE = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other "
    "valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
)


def rpc_error(http_status: int, status: str, message: str, details: list | None = None) -> dict:
    """A google.rpc.Status error body as FCM sends it."""
    error: dict[str, Any] = {"code": http_status, "message": message, "status": status}
    if details:
        error["details"] = details
    return {"error": error}


def fcm_error_response(name: str, field: str | None = None, message: str | None = None,
                       retry_after: float | None = None) -> tuple[int, dict, dict[str, str]]:
    """(status, body, headers) of an FCM error response named by its FCM errorCode."""
    if name == "UNAUTHENTICATED":
        return 401, rpc_error(401, "UNAUTHENTICATED", message or UNAUTHENTICATED_MESSAGE), {}
    if name not in FCM_ERRORS:
        raise ValueError(f"unknown FCM error {name!r}")
    http_status, status, default_message = FCM_ERRORS[name]
    text = message or default_message
    details: list[dict] = [{"@type": FCM_ERROR_TYPE, "errorCode": name}]
    if name == "INVALID_ARGUMENT":
        violation_field = field or "message.token"
        if field and field != "message.token" and message is None:
            text = f"Invalid value at '{field}'"
        details.append({"@type": BAD_REQUEST_TYPE,
                        "fieldViolations": [{"field": violation_field, "description": text}]})
    headers: dict[str, str] = {}
    if retry_after is None and name == "QUOTA_EXCEEDED":
        retry_after = 60
    if retry_after is not None:
        headers["retry-after"] = str(int(retry_after)) if float(retry_after).is_integer() else str(retry_after)
    return http_status, rpc_error(http_status, status, text, details), headers


class Injection:
    """A queued response: `remaining` more requests get (status, body, headers)."""

    def __init__(self, status: int, body: Any, headers: dict[str, str], count: int):
        self.status, self.body, self.headers, self.remaining = status, body, headers, count



class SlidingWindowQuota:
    """A provider's send quota per key (an FCM project, an HMS app): a send that would make more than `count` sends
    of its key within any `window_s` seconds (a sliding window, not aligned to any clock) is over it. Refused sends
    count too, as a quota of requests does. Not thread-safe: its owner's lock guards it."""

    def __init__(self, count: int, window_s: float):
        if count < 1 or window_s <= 0:
            raise ValueError("rate_limit needs count >= 1 and window_s > 0")
        self.count, self.window_s = count, window_s
        self.recent: dict[str, collections.deque] = {}  # key -> arrival times within the window

    @classmethod
    def from_spec(cls, spec: dict | None) -> "SlidingWindowQuota | None":
        """From an injection's {"count": N, "window_s": W}; None turns the quota off."""
        return None if spec is None else cls(int(spec["count"]), float(spec["window_s"]))

    def over(self, key: str, now: float) -> bool:
        recent = self.recent.setdefault(key, collections.deque())
        while recent and recent[0] <= now - self.window_s:
            recent.popleft()
        recent.append(now)
        return len(recent) > self.count

class FakeFCMState:
    """Everything the fake knows; thread-safe (the server loop and test threads both use it)."""

    def __init__(self, token_expires_in: int = 3600):
        self._lock = threading.Lock()
        self.accounts: dict[str, dict] = {}  # client_email -> {"key", "kid", "project_id"}
        self.default_token_expires_in = token_expires_in
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.sends: collections.deque = collections.deque(maxlen=MAX_RECORDED_SENDS)
            self.send_count = 0
            self.client_ports: set[int] = set()
            self.token_requests: list[dict] = []
            self.access_tokens: dict[str, tuple[str, float]] = {}  # token -> (client_email, expires_at)
            self.per_token: dict[str, collections.deque] = {}
            self.global_queue: collections.deque = collections.deque()
            self.token_endpoint_errors: collections.deque = collections.deque()
            self.delay_ms = 0
            self.project_delays_ms: dict[str, int] = {}
            self.token_expires_in = self.default_token_expires_in
            self.message_ids = itertools.count(1)
            self.rate_limit: SlidingWindowQuota | None = None
            self.rate_limited = 0

    # --- configuration -------------------------------------------------------------------------

    def register_service_account(self, client_email: str, public_key_pem: str,
                                 private_key_id: str | None = None, project_id: str | None = None) -> None:
        key = serialization.load_pem_public_key(public_key_pem.encode())
        with self._lock:
            self.accounts[client_email] = {"key": key, "kid": private_key_id, "project_id": project_id}

    def inject(self, error: str | None = None, token: str | None = None, count: int = 1,
               retry_after: float | None = None, field: str | None = None, message: str | None = None,
               http_status: int | None = None, body: Any = None, headers: dict | None = None,
               delay_ms: int | None = None, token_expires_in: int | None = None,
               revoke_access_tokens: bool = False, token_endpoint_error: dict | None = None,
               project_delay_ms: dict | None = None, rate_limit: Any = ...) -> None:
        """See the module docstring (POST /_fake/inject); keyword arguments are the JSON fields."""
        with self._lock:
            if rate_limit is not ...:
                self.rate_limit = SlidingWindowQuota.from_spec(rate_limit)
            if delay_ms is not None:
                self.delay_ms = max(0, int(delay_ms))
            if project_delay_ms is not None:
                for project, ms in project_delay_ms.items():
                    self.project_delays_ms[str(project)] = max(0, int(ms))
            if token_expires_in is not None:
                self.token_expires_in = int(token_expires_in)
            if revoke_access_tokens:
                self.access_tokens.clear()
            if token_endpoint_error is not None:
                spec = dict(token_endpoint_error)
                for _ in range(int(spec.get("count", 1))):
                    self.token_endpoint_errors.append(spec)
            response = None
            if error is not None:
                response = fcm_error_response(error, field=field, message=message, retry_after=retry_after)
            elif http_status is not None:
                response = (int(http_status), body if body is not None else {}, dict(headers or {}))
            if response is not None:
                injection = Injection(*response, count=max(1, int(count)))
                if token is not None:
                    self.per_token.setdefault(token, collections.deque()).append(injection)
                else:
                    self.global_queue.append(injection)

    def snapshot(self) -> dict:
        """The recorded requests, as served by GET /_fake/requests."""
        with self._lock:
            return {
                "sends": [dict(s) for s in self.sends],
                "send_count": self.send_count,
                "token_requests": list(self.token_requests),
                "issued_tokens": sum(1 for r in self.token_requests if r["status"] == 200),
                "connections": len(self.client_ports),
                "rate_limited": self.rate_limited,
            }

    def over_rate_limit(self, project: str, now: float) -> bool:
        """Counts a send of `project` arriving at `now`; true when it makes more than the limit within the window."""
        with self._lock:
            if self.rate_limit is None or not self.rate_limit.over(project, now):
                return False
            self.rate_limited += 1
            return True

    # --- request handling (called on the server's loop) ----------------------------------------

    def take_injection(self, push_token: str | None) -> Injection | None:
        with self._lock:
            for queue in (self.per_token.get(push_token) if push_token is not None else None, self.global_queue):
                if queue:
                    injection = queue[0]
                    injection.remaining -= 1
                    if injection.remaining <= 0:
                        queue.popleft()
                    return injection
            return None

    def check_access_token(self, token: str) -> str | None:
        """The client_email the token was issued to, if it is known and unexpired."""
        with self._lock:
            entry = self.access_tokens.get(token)
            if entry is None or entry[1] <= time.time():
                return None
            return entry[0]

    def record_send(self, record: dict) -> None:
        with self._lock:
            self.sends.append(record)
            self.send_count += 1
            if record.get("client_port") is not None:
                self.client_ports.add(record["client_port"])

    def next_message_id(self) -> int:
        with self._lock:
            return next(self.message_ids)


class FakeFCMApp:
    """The raw ASGI application."""

    def __init__(self, state: FakeFCMState, scheme: str):
        self.state = state
        self.scheme = scheme

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
            elif method == "POST" and path == "/token":
                status, payload, headers = self.token(scope, bytes(body))
            elif path.startswith("/_fake/"):
                status, payload, headers = self.control(method, path, bytes(body))
            else:
                status, payload, headers = 404, rpc_error(404, "NOT_FOUND", f"No route for {method} {path}"), {}
        except Exception as error:  # a bug in the fake must show up, not hang the client
            status, payload, headers = 500, rpc_error(500, "INTERNAL", f"fake_fcm error: {error!r}"), {}
        await respond(send, status, payload, headers)

    # --- OAuth2 token endpoint ---------------------------------------------------------------------

    def token(self, scope: dict, body: bytes) -> tuple[int, Any, dict]:
        record = {"time": time.time(), "http_version": scope.get("http_version"), "status": 400,
                  "client_email": None}
        with self.state._lock:
            self.state.token_requests.append(record)
            forced = self.state.token_endpoint_errors.popleft() if self.state.token_endpoint_errors else None
        if forced is not None:
            record["status"] = int(forced.get("http_status", 400))
            return record["status"], {"error": forced.get("error", "invalid_grant"),
                                      "error_description": forced.get("error_description", "Injected error.")}, {}
        form = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        grant_type = form.get("grant_type", [""])[0]
        if grant_type != JWT_BEARER:
            return 400, {"error": "unsupported_grant_type", "error_description": f"Invalid grant_type: {grant_type}"}, {}
        assertion = form.get("assertion", [""])[0]
        if not assertion:
            return 400, {"error": "invalid_request", "error_description": "Missing required parameter: assertion"}, {}
        try:
            header = jwt.get_unverified_header(assertion)
            unverified = jwt.decode(assertion, options={"verify_signature": False})
        except jwt.PyJWTError:
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT: malformed."}, {}
        email = unverified.get("iss")
        with self.state._lock:
            account = self.state.accounts.get(email) if isinstance(email, str) else None
        if account is None:
            return 400, {"error": "invalid_grant", "error_description": "Invalid grant: account not found"}, {}
        if header.get("alg") != "RS256" or header.get("typ", "JWT") != "JWT":
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT: unsupported algorithm."}, {}
        if account["kid"] is not None and header.get("kid") != account["kid"]:
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}, {}
        try:
            claims = jwt.decode(assertion, account["key"], algorithms=["RS256"], audience=self.token_urls(scope),
                                options={"require": ["iss", "aud", "exp", "iat"]}, leeway=0)
        except jwt.InvalidSignatureError:
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}, {}
        except jwt.ExpiredSignatureError:
            return 400, {"error": "invalid_grant",
                         "error_description": "Invalid JWT: Token must be a short-lived token (60 minutes) and "
                                              "in a reasonable timeframe. Check your iat and exp values in the "
                                              "JWT claim."}, {}
        except jwt.InvalidAudienceError:
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT: Failed audience check."}, {}
        except jwt.PyJWTError as error:
            return 400, {"error": "invalid_grant", "error_description": f"Invalid JWT: {error}"}, {}
        if FCM_SCOPE not in str(claims.get("scope", "")).split(" "):
            return 400, {"error": "invalid_scope", "error_description": "Invalid OAuth scope or ID token audience provided."}, {}
        if claims["exp"] - claims["iat"] > 3600:
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT: Token must be a short-lived token (60 minutes)."}, {}
        access_token = "ya29.fake-" + secrets.token_urlsafe(32)
        with self.state._lock:
            expires_in = self.state.token_expires_in
            self.state.access_tokens[access_token] = (email, time.time() + expires_in)
        record["status"], record["client_email"] = 200, email
        return 200, {"access_token": access_token, "expires_in": expires_in, "token_type": "Bearer"}, {}

    def token_urls(self, scope: dict) -> list[str]:
        """The token URLs this server answers to (what a correct assertion's `aud` is)."""
        urls = []
        host = header_value(scope, b"host")
        if host:
            urls.append(f"{self.scheme}://{host}/token")
        server = scope.get("server")
        if server:
            urls.append(f"{self.scheme}://{server[0]}:{server[1]}/token")
            urls.append(f"{self.scheme}://localhost:{server[1]}/token")
        return urls

    # --- FCM messages:send -------------------------------------------------------------------------

    async def messages_send(self, scope: dict, body: bytes) -> tuple[int, Any, dict]:
        project = SEND_PATH.match(scope["path"]).group(1)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        client = scope.get("client")
        record: dict[str, Any] = {
            "time": time.time(), "path": scope["path"], "project": project, "headers": headers,
            "body": body.decode("utf-8", "replace"), "json": None, "http_version": scope.get("http_version"),
            "client_port": client[1] if client else None, "token": None, "status": None, "validate_only": False,
        }
        result = self.evaluate_send(project, headers, body, record)
        record["status"] = result[0]
        self.state.record_send(record)
        delay = self.state.project_delays_ms.get(project, self.state.delay_ms)
        if delay:
            await asyncio.sleep(delay / 1000)
        return result

    def evaluate_send(self, project: str, headers: dict, body: bytes, record: dict) -> tuple[int, Any, dict]:
        authorization = headers.get("authorization", "")
        email = None
        if authorization.startswith("Bearer "):
            email = self.state.check_access_token(authorization[len("Bearer "):])
        if email is None:
            return 401, rpc_error(401, "UNAUTHENTICATED", UNAUTHENTICATED_MESSAGE), {"www-authenticate": 'Bearer realm="https://accounts.google.com/"'}
        if self.state.over_rate_limit(project, record["time"]):
            return fcm_error_response("QUOTA_EXCEEDED")
        with self.state._lock:
            account_project = self.state.accounts.get(email, {}).get("project_id")
        if account_project is not None and account_project != project:
            return 403, rpc_error(403, "PERMISSION_DENIED",
                                  f"Permission 'cloudmessaging.messages.create' denied on resource "
                                  f"'//cloudresourcemanager.googleapis.com/projects/{project}' (or it may not exist)."), {}
        try:
            document = json.loads(body)
        except (ValueError, UnicodeDecodeError) as error:
            return 400, rpc_error(400, "INVALID_ARGUMENT", f"Invalid JSON payload received. {error}"), {}
        record["json"] = document
        violation = validate_message(document)
        if isinstance(document, dict) and document.get("validate_only") is True:
            record["validate_only"] = True
        message = document.get("message") if isinstance(document, dict) else None
        token = message.get("token") if isinstance(message, dict) else None
        record["token"] = token if isinstance(token, str) else None
        if violation is not None:
            field, description = violation
            return 400, rpc_error(400, "INVALID_ARGUMENT", description, [
                {"@type": BAD_REQUEST_TYPE, "fieldViolations": [{"field": field, "description": description}]}]), {}
        injection = self.state.take_injection(record["token"])
        if injection is not None:
            return injection.status, injection.body, dict(injection.headers)
        if record["validate_only"]:
            return 200, {"name": f"projects/{project}/messages/fake_message_id"}, {}
        message_id = self.state.next_message_id()
        return 200, {"name": f"projects/{project}/messages/0:{message_id}%fake"}, {}

    # --- control API -------------------------------------------------------------------------------

    def control(self, method: str, path: str, body: bytes) -> tuple[int, Any, dict]:
        try:
            document = json.loads(body) if body else {}
        except ValueError:
            return 400, {"error": "body is not JSON"}, {}
        if method == "GET" and path == "/_fake/requests":
            return 200, self.state.snapshot(), {}
        if method == "POST" and path == "/_fake/reset":
            self.state.reset()
            return 200, {}, {}
        if method == "POST" and path == "/_fake/inject":
            try:
                self.state.inject(**document)
            except (TypeError, ValueError) as error:
                return 400, {"error": str(error)}, {}
            return 200, {}, {}
        if method == "POST" and path == "/_fake/service-accounts":
            try:
                self.state.register_service_account(document["client_email"], document["public_key_pem"],
                                                    document.get("private_key_id"), document.get("project_id"))
            except (KeyError, ValueError, TypeError) as error:
                return 400, {"error": f"bad service account: {error!r}"}, {}
            return 200, {}, {}
        return 404, {"error": f"no control endpoint {method} {path}"}, {}


def validate_message(document: Any) -> tuple[str, str] | None:
    """(field, description) of the first violation of the send request's shape, like FCM reports it."""
    if isinstance(document, dict) and "validate_only" in document and not isinstance(document["validate_only"], bool):
        return "validate_only", f"Invalid value at 'validate_only' (TYPE_BOOL), {json.dumps(document['validate_only'])}"
    if not isinstance(document, dict) or not isinstance(document.get("message"), dict):
        return "message", "Invalid value at 'message': a Message object is required."
    message = document["message"]
    token = message.get("token")
    if not isinstance(token, str) or not token:
        return "message.token", "The registration token is not a valid FCM registration token"
    data = message.get("data", {})
    if not isinstance(data, dict):
        return "message.data", "Invalid value at 'message.data': a map of strings is required."
    for index, (key, value) in enumerate(data.items()):
        if not isinstance(value, str):
            return f"message.data[{index}].value", f"Invalid value at 'message.data[{index}].value' (TYPE_STRING), {json.dumps(value)}"
    return validate_android(message.get("android", {})) or validate_apns(message.get("apns", {}))


# A google.protobuf.Duration in its JSON form, as FCM reads android.ttl: seconds, up to 9 decimals, then "s".
DURATION = re.compile(r"^\d+(\.\d{1,9})?s$")
MAX_TTL_SECONDS = 2_419_200  # 4 weeks: FCM refuses a longer android.ttl
MAX_APNS_COLLAPSE_ID_BYTES = 64


def validate_android(android: Any) -> tuple[str, str] | None:
    """android.ttl (a Duration string, at most 4 weeks) and android.collapse_key (a string), as FCM checks them."""
    if not isinstance(android, dict):
        return "message.android", "Invalid value at 'message.android': an AndroidConfig object is required."
    if "ttl" in android:
        ttl = android["ttl"]
        if not isinstance(ttl, str) or not DURATION.match(ttl):
            return "message.android.ttl", f"Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), {json.dumps(ttl)}"
        if float(ttl[:-1]) > MAX_TTL_SECONDS:
            return "message.android.ttl", "The TTL must not exceed 4 weeks (2419200s)."
    if "collapse_key" in android and not isinstance(android["collapse_key"], str):
        return "message.android.collapse_key", f"Invalid value at 'message.android.collapse_key' (TYPE_STRING), {json.dumps(android['collapse_key'])}"
    return None


def validate_apns(apns: Any) -> tuple[str, str] | None:
    """apns.headers: a map of strings; apns-expiration a decimal number of seconds, apns-collapse-id at most 64
    bytes (APNs refuses a longer one: BadCollapseId, which FCM reports as INVALID_ARGUMENT)."""
    if not isinstance(apns, dict):
        return "message.apns", "Invalid value at 'message.apns': an ApnsConfig object is required."
    headers = apns.get("headers", {})
    if not isinstance(headers, dict):
        return "message.apns.headers", "Invalid value at 'message.apns.headers': a map of strings is required."
    for name, value in headers.items():
        if not isinstance(value, str):
            return f"message.apns.headers[{name}]", f"Invalid value at 'message.apns.headers[{name}]' (TYPE_STRING), {json.dumps(value)}"
    expiration = headers.get("apns-expiration")
    if expiration is not None and not re.fullmatch(r"\d+", expiration):
        return "message.apns.headers", f"Invalid APNs header apns-expiration: {json.dumps(expiration)}"
    collapse_id = headers.get("apns-collapse-id")
    if collapse_id is not None and len(collapse_id.encode("utf-8")) > MAX_APNS_COLLAPSE_ID_BYTES:
        return "message.apns.headers", "Invalid APNs header apns-collapse-id: more than 64 bytes (BadCollapseId)"
    return None


def header_value(scope: dict, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def respond(send, status: int, payload: Any, headers: dict[str, str]) -> None:
    if isinstance(payload, (bytes, bytearray)):
        data, content_type = bytes(payload), "application/octet-stream"
    elif isinstance(payload, str):
        data, content_type = payload.encode(), "text/plain; charset=utf-8"
    else:
        data, content_type = json.dumps(payload, separators=(",", ":")).encode(), "application/json; charset=UTF-8"
    raw_headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(data)).encode())]
    raw_headers += [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": data})


# --- helpers: keys, service accounts, certificates -------------------------------------------------

def generate_rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def make_service_account(token_uri: str, project_id: str = "fake-project",
                         client_email: str | None = None) -> tuple[dict, str]:
    """(service-account JSON dict in Google's format, public key PEM). The key is new."""
    key = generate_rsa_key()
    private_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    email = client_email or f"firebase-adminsdk-{secrets.token_hex(3)}@{project_id}.iam.gserviceaccount.com"
    account = {
        "type": "service_account",
        "project_id": project_id,
        "private_key_id": secrets.token_hex(20),
        "private_key": private_pem,
        "client_email": email,
        "client_id": str(secrets.randbelow(10**20)),
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": token_uri,
        "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
        "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/" + urllib.parse.quote(email),
        "universe_domain": "googleapis.com",
    }
    return account, public_pem


def make_self_signed_cert(directory: str) -> tuple[str, str]:
    """Writes cert.pem and key.pem (RSA 2048, CN/SAN localhost + 127.0.0.1, CA:true so it can be its own
    trust anchor) into `directory`; returns their paths."""
    os.makedirs(directory, exist_ok=True)
    key = generate_rsa_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                  serialization.NoEncryption()))
    return cert_path, key_path


# --- server ----------------------------------------------------------------------------------------

def make_config(fd: int, cert: str | None, key: str | None) -> Config:
    """Hypercorn settings; `fd` is a listening socket whose ownership passes to hypercorn (it closes it)."""
    config = Config()
    config.bind = [f"fd://{fd}"]
    config.keep_alive_timeout = 120
    config.keep_alive_max_requests = 10**12
    config.h2_max_concurrent_streams = 100
    config.backlog = 1024
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 0.2  # a test fake: stop fast
    if cert and key:
        config.certfile, config.keyfile = cert, key
    return config


def quiet_cancellations(loop: asyncio.AbstractEventLoop) -> None:
    """Connection tasks cancelled at shutdown are expected; do not print their tracebacks."""
    def handler(loop: asyncio.AbstractEventLoop, context: dict) -> None:
        if isinstance(context.get("exception"), asyncio.CancelledError):
            return
        loop.default_exception_handler(context)
    loop.set_exception_handler(handler)


def listening_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(1024)
    return sock


class FakeFCMServer:
    """The fake run by hypercorn on a background thread with its own event loop (for pytest)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, tls_cert: str | None = None,
                 tls_key: str | None = None, tls_dir: str | None = None, token_expires_in: int = 3600):
        if tls_dir is not None and tls_cert is None:
            tls_cert, tls_key = make_self_signed_cert(str(tls_dir))
        self.host, self.tls_cert, self.tls_key = host, tls_cert, tls_key
        self.state = FakeFCMState(token_expires_in)
        self._sock = listening_socket(host, port)
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
        return f"{self.base_url}/token"

    @property
    def ca_file(self) -> str | None:
        return self.tls_cert

    def create_service_account(self, project_id: str = "fake-project") -> dict:
        """A new service account (Google's JSON format, token_uri = this server) with its key registered."""
        account, public_pem = make_service_account(self.token_url, project_id)
        self.state.register_service_account(account["client_email"], public_pem, account["private_key_id"],
                                            project_id)
        return account

    def start(self, timeout: float = 10.0) -> "FakeFCMServer":
        self._thread = threading.Thread(target=self._run, name="fake-fcm", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout):
            raise TimeoutError("fake FCM server did not start in time")
        if self._error is not None:
            raise RuntimeError("fake FCM server failed to start") from self._error
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
        config = make_config(self._sock.detach(), self.tls_cert, self.tls_key)
        app = FakeFCMApp(self.state, self.scheme)
        asyncio.get_running_loop().call_soon(self._started.set)
        await serve(app, config, shutdown_trigger=self._stop_event.wait)

    def stop(self, timeout: float = 10.0) -> None:
        if self._loop is not None and self._stop_event is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._stop_event.set)
            except RuntimeError:
                pass
        if self._thread is not None:
            self._thread.join(timeout)
        if self._sock.fileno() != -1:  # never handed to hypercorn
            self._sock.close()

    def __enter__(self) -> "FakeFCMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fake FCM HTTP v1 + OAuth2 server (see module docstring).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--tls-self-signed", metavar="DIR", help="generate cert.pem/key.pem in DIR and serve TLS")
    parser.add_argument("--service-account-out", metavar="PATH",
                        help="write a service-account JSON for this server to PATH and register its key")
    parser.add_argument("--project-id", default="fake-project")
    parser.add_argument("--token-expires-in", type=int, default=3600)
    parser.add_argument("--exit-on-stdin-eof", action="store_true",
                        help="stop when stdin closes (so the fake dies with the test process that piped it)")
    args = parser.parse_args(argv)
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    cert, key = args.tls_cert, args.tls_key
    if args.tls_self_signed:
        cert, key = make_self_signed_cert(args.tls_self_signed)

    state = FakeFCMState(args.token_expires_in)
    sock = listening_socket(args.host, args.port)
    port = sock.getsockname()[1]
    scheme = "https" if cert else "http"
    base_url = f"{scheme}://{args.host}:{port}"
    announcement: dict[str, Any] = {"port": port, "base_url": base_url, "token_url": f"{base_url}/token"}
    if args.service_account_out:
        account, public_pem = make_service_account(f"{base_url}/token", args.project_id)
        state.register_service_account(account["client_email"], public_pem, account["private_key_id"],
                                       args.project_id)
        with open(args.service_account_out, "w") as f:
            json.dump(account, f, indent=2)
        announcement["service_account"] = args.service_account_out
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
        await serve(FakeFCMApp(state, scheme), make_config(sock.detach(), cert, key), shutdown_trigger=stop.wait)

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
