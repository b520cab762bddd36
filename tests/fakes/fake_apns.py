#!/usr/bin/env python3
"""A fake Apple Push Notification service (the APNs provider API with token-based authentication) for tests.

It speaks what APNs speaks: HTTP/2 over TLS (hypercorn; ALPN offers h2 only, as APNs does), `POST /3/device/<token>`
with the provider token in `authorization: bearer <JWT>` and the `apns-*` headers, and answers as Apple documents
("Handling notification responses from APNs"): 200 with an `apns-id` header and an empty body; an error with an
`apns-id` header and a JSON body `{"reason": "<Reason>"}`, plus `"timestamp"` (milliseconds since the epoch) for
410 Unregistered / ExpiredToken.

What it checks of each request, in this order (the first refusal is the answer):
- HTTP/2 (a request over HTTP/1.x to /3/device is answered 505: APNs cannot be spoken to in HTTP/1);
- POST (else 405 MethodNotAllowed); the path /3/device/<token> (else 404 BadPath; no token: 400 MissingDeviceToken);
- no apns-* header twice (400 DuplicateHeaders);
- the provider token: missing → 403 MissingProviderToken; not `bearer <JWT>`, a header other than ES256 with a `kid`,
  a (iss, kid) pair not registered, a signature the registered public key does not verify, no integer `iat`, an
  `iat` more than a minute ahead → 403 InvalidProviderToken; an `iat` more than an hour old → 403 ExpiredProviderToken;
- apns-topic: missing → 400 MissingTopic; not a bundle id of the token's team (`.voip`, `.complication` suffixes are
  not modelled) → 400 TopicDisallowed;
- apns-push-type, when present, one of Apple's types (else 400 InvalidPushType; absent means alert);
- apns-priority, when present, 1, 5 or 10 (else 400 BadPriority); a background push must be priority 5 (an absent
  priority is 10: 400 BadPriority);
- apns-expiration, when present, a decimal number (else 400 BadExpirationDate); apns-collapse-id at most 64 bytes
  (else 400 BadCollapseId); apns-id, when present, a lower-case UUID (else 400 BadMessageId);
- the device token in the path: hex, an even number of digits, at most 200 (else 400 BadDeviceToken);
- the body: empty → 400 PayloadEmpty; more than 4096 bytes → 413 PayloadTooLarge; not a JSON object with an `aps`
  object → 400 BadPayload (*this fake's name*: Apple does not document one); a background push whose `aps` is not
  exactly `{"content-available": 1}` → 400 BadPayload too (APNs would take it but the device would not wake silently,
  which a test could not see otherwise). The problem is in the record's "problems".
Then the device token's scripted answers are used in turn (`script(token, [...])`; the token compared in lower case),
then 200.

Every request is recorded (`requests()`): time, method, path, token (as in the path), headers (lower-case names;
the last value of a repeated one), header_list, body (bytes), json (parsed or None), http_version ("2", "1.1"),
client_port, jwt ({"raw", "header", "claims"} when the JWT could be decoded, verified or not), jwt_verified, topic,
status, reason, apns_id, problems, environment (this server's label).

From Python (pytest)
--------------------
    server = FakeAPNsServer(tls_dir=tmp_path, environment="production").start()
    key, p8_path = write_p8(tmp_path / "AuthKey.p8")                    # a team's .p8 (PKCS#8 PEM, P-256)
    server.register_team("TEAM123456", "KEY1234567", key.public_key(), ["com.example.app"])
    server.script("ab12...", [(410, "Unregistered"), (503, "ServiceUnavailable")])
    ... server.received("ab12..."), server.accepted("ab12..."), server.describe() ...
    server.stop()
Two servers can share one certificate (`tls_cert=`, `tls_key=`), so that one CA file trusts both.

Command line
------------
    python3 tests/fakes/fake_apns.py --port 0 [--host 127.0.0.1] (--tls-self-signed DIR | --tls-cert C --tls-key K)
        [--environment production|development] [--team TEAMID --key-id KEYID --bundle-id B [--bundle-id B2 ...]
        --p8-out PATH] [--exit-on-stdin-eof]
prints one JSON line once listening ({"port", "base_url", "ca_file" (with --tls-self-signed), "p8" (with
--p8-out)}), then serves until SIGTERM/SIGINT (or stdin's end with --exit-on-stdin-eof). --p8-out writes a new
team key there and registers it for --team/--key-id/--bundle-id.

Control API (any HTTP version; JSON in and out)
    GET  /_fake/requests   {"requests": [record, body as text], "count": N, "provider_tokens": distinct JWTs accepted}
    POST /_fake/reset      forgets records and scripts (teams stay)
    POST /_fake/script     {"token": T, "answers": [{"status": S, "reason": R, "timestamp": ms?, "retry_after": s?,
                            "delay": seconds?}, ...]}
    POST /_fake/teams      {"team_id", "key_id", "public_key_pem", "bundle_ids": [...]}
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import signal
import sys
import threading
import time
import uuid
from typing import Any, Optional, Sequence, Union

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from hypercorn.asyncio import serve

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_fcm import listening_socket, make_config, make_self_signed_cert, quiet_cancellations  # noqa: E402

MAX_PAYLOAD_BYTES = 4096
MAX_COLLAPSE_ID_BYTES = 64
MAX_TOKEN_HEX_DIGITS = 200
PROVIDER_TOKEN_LIFETIME = 3600  # APNs refuses a provider token issued more than an hour ago
CLOCK_SLACK = 60.0
MAX_RECORDS = 100_000
DEVICE_PATH = re.compile(r"^/3/device/(.*)$")
HEX = re.compile(r"^[0-9a-fA-F]*$")
UUID_TEXT = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
PUSH_TYPES = {"alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity",
              "pushtotalk", "widgets", "controls"}

# Apple's documented reasons and the status each comes with.
REASONS: dict[str, int] = {
    "BadCollapseId": 400, "BadDeviceToken": 400, "BadExpirationDate": 400, "BadMessageId": 400, "BadPriority": 400,
    "BadTopic": 400, "DeviceTokenNotForTopic": 400, "DuplicateHeaders": 400, "IdleTimeout": 400,
    "InvalidPushType": 400, "MissingDeviceToken": 400, "MissingTopic": 400, "PayloadEmpty": 400,
    "TopicDisallowed": 400, "BadCertificate": 403, "BadCertificateEnvironment": 403, "ExpiredProviderToken": 403,
    "Forbidden": 403, "InvalidProviderToken": 403, "MissingProviderToken": 403, "UnrelatedKeyIdInToken": 403,
    "BadEnvironmentKeyInToken": 403, "BadPath": 404, "MethodNotAllowed": 405, "ExpiredToken": 410,
    "Unregistered": 410, "PayloadTooLarge": 413, "TooManyProviderTokenUpdates": 429, "TooManyRequests": 429,
    "InternalServerError": 500, "ServiceUnavailable": 503, "Shutdown": 503,
}


class Answer:
    """A scripted answer: status, reason (the JSON body's), timestamp (ms; 410 only, default now), Retry-After,
    and a delay before answering (seconds)."""

    def __init__(self, status: int, reason: Optional[str] = None, timestamp: Optional[int] = None,
                 retry_after: Optional[str] = None, delay: float = 0.0):
        self.status, self.reason, self.timestamp = int(status), reason, timestamp
        self.retry_after, self.delay = retry_after, float(delay)

    @classmethod
    def of(cls, spec: Union["Answer", tuple, list, dict]) -> "Answer":
        if isinstance(spec, Answer):
            return spec
        if isinstance(spec, dict):
            return cls(**spec)
        return cls(*spec)


class FakeAPNsState:
    """Teams, scripts and records; thread-safe (the server's loop and the test's threads both use it)."""

    def __init__(self, environment: str = "production"):
        self.environment = environment
        self.lock = threading.Lock()
        self.keys: dict[tuple[str, str], Any] = {}  # (team id, key id) -> public key
        self.bundles: dict[str, set[str]] = {}  # team id -> bundle ids it may push to
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.records: collections.deque = collections.deque(maxlen=MAX_RECORDS)
            self.count = 0
            self.scripts: dict[str, collections.deque] = {}
            self.provider_tokens: set[str] = set()

    def register_team(self, team_id: str, key_id: str, public_key: Any, bundle_ids: Sequence[str]) -> None:
        """`public_key`: an EC public key object or its PEM (str/bytes). The bundle ids are added to the team's."""
        if isinstance(public_key, (str, bytes)):
            public_key = serialization.load_pem_public_key(
                public_key.encode() if isinstance(public_key, str) else public_key)
        if not isinstance(public_key, ec.EllipticCurvePublicKey) or public_key.curve.name != "secp256r1":
            raise ValueError("an APNs key is a P-256 key")
        with self.lock:
            self.keys[(team_id, key_id)] = public_key
            self.bundles.setdefault(team_id, set()).update(bundle_ids)

    def script(self, token: str, answers: Sequence[Union[Answer, tuple, list, dict]]) -> None:
        with self.lock:
            self.scripts.setdefault(token.lower(), collections.deque()).extend(Answer.of(a) for a in answers)

    def take_answer(self, token: str) -> Optional[Answer]:
        with self.lock:
            queue = self.scripts.get(token.lower())
            return queue.popleft() if queue else None

    def record(self, record: dict) -> None:
        with self.lock:
            self.records.append(record)
            self.count += 1

    def requests(self) -> list[dict]:
        with self.lock:
            return [dict(r) for r in self.records]


def json_record(record: dict) -> dict:
    out = dict(record)
    out["body"] = record["body"].decode("utf-8", "replace")
    return out


class FakeAPNsApp:
    """The ASGI application."""

    def __init__(self, state: FakeAPNsState):
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
        if scope["path"].startswith("/_fake/"):
            status, payload = self.control(scope["method"], scope["path"], bytes(body))
            data = json.dumps(payload).encode()
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
            await send({"type": "http.response.body", "body": data})
            return
        try:
            record, answer = self.push(scope, bytes(body))
        except Exception as error:  # a bug of the fake must show, not hang the client
            record, answer = None, Answer(500, "InternalServerError")
            print(f"fake_apns: {error!r}", file=sys.stderr)
        apns_id = (record or {}).get("apns_id") or str(uuid.uuid4())
        headers = [(b"apns-id", apns_id.encode())]
        if answer.status == 200:
            if self.state.environment == "development":
                headers.append((b"apns-unique-id", str(uuid.uuid4()).encode()))
            data = b""
        elif answer.status == 505:
            data = b"HTTP/2 required"
        else:
            document: dict[str, Any] = {"reason": answer.reason or "InternalServerError"}
            if answer.status == 410:
                document["timestamp"] = answer.timestamp if answer.timestamp is not None else int(time.time() * 1000)
            data = json.dumps(document, separators=(",", ":")).encode()
            headers.append((b"content-type", b"application/json; charset=utf-8"))
        if answer.retry_after is not None:
            headers.append((b"retry-after", str(answer.retry_after).encode()))
        headers.append((b"content-length", str(len(data)).encode()))
        if answer.delay:
            await asyncio.sleep(answer.delay)
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    # --- the provider API ---------------------------------------------------------------------------------

    def push(self, scope: dict, body: bytes) -> tuple[dict, Answer]:
        header_list = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]
        headers = dict(header_list)
        client = scope.get("client")
        match = DEVICE_PATH.match(scope["path"])
        record: dict[str, Any] = {
            "time": time.time(), "method": scope["method"], "path": scope["path"],
            "token": match.group(1) if match else None, "headers": headers, "header_list": header_list,
            "body": body, "json": None, "http_version": scope.get("http_version"),
            "client_port": client[1] if client else None, "jwt": None, "jwt_verified": False,
            "topic": headers.get("apns-topic"), "status": None, "reason": None, "apns_id": None, "problems": [],
            "environment": self.state.environment,
        }
        answer = self.evaluate(record, match)
        record["status"], record["reason"] = answer.status, (answer.reason if answer.status != 200 else None)
        if record["apns_id"] is None:
            record["apns_id"] = str(uuid.uuid4())
        self.state.record(record)
        return record, answer

    def evaluate(self, record: dict, match: Optional[re.Match]) -> Answer:
        headers, problems = record["headers"], record["problems"]

        def refuse(reason: str, problem: Optional[str] = None) -> Answer:
            problems.append(problem or reason)
            return Answer(REASONS.get(reason, 400), reason)

        if record["http_version"] != "2":
            problems.append(f"HTTP/{record['http_version']}: APNs speaks HTTP/2 only")
            return Answer(505)
        if record["method"] != "POST":
            return refuse("MethodNotAllowed")
        if match is None:
            return refuse("BadPath")
        token = match.group(1)
        if not token:
            return refuse("MissingDeviceToken")
        names = [name for name, _ in record["header_list"] if name.startswith("apns-") or name == "authorization"]
        if len(names) != len(set(names)):
            return refuse("DuplicateHeaders")
        apns_id = headers.get("apns-id")
        if apns_id is not None:
            if not UUID_TEXT.match(apns_id):
                return refuse("BadMessageId", f"apns-id {apns_id!r}")
            record["apns_id"] = apns_id

        # The provider token.
        authorization = headers.get("authorization")
        if authorization is None:
            return refuse("MissingProviderToken")
        scheme, _, raw = authorization.partition(" ")
        if scheme.lower() != "bearer" or not raw:
            return refuse("InvalidProviderToken", f"authorization {authorization[:40]!r} is not bearer <JWT>")
        try:
            jwt_header = jwt.get_unverified_header(raw)
            unverified = jwt.decode(raw, options={"verify_signature": False})
        except jwt.PyJWTError as error:
            return refuse("InvalidProviderToken", f"the JWT does not decode: {error}")
        record["jwt"] = {"raw": raw, "header": jwt_header, "claims": unverified}
        team, kid = unverified.get("iss"), jwt_header.get("kid")
        if jwt_header.get("alg") != "ES256" or not isinstance(kid, str):
            return refuse("InvalidProviderToken", f"JWT header {jwt_header}: ES256 with a kid expected")
        with self.state.lock:
            key = self.state.keys.get((team, kid)) if isinstance(team, str) else None
            bundles = set(self.state.bundles.get(team, ())) if isinstance(team, str) else set()
        if key is None:
            return refuse("InvalidProviderToken", f"no key {kid!r} registered for team {team!r}")
        try:
            jwt.decode(raw, key, algorithms=["ES256"], options={"verify_exp": False, "verify_iat": False})
        except jwt.PyJWTError as error:
            return refuse("InvalidProviderToken", f"the JWT does not verify with key {kid}: {error}")
        iat = unverified.get("iat")
        if not isinstance(iat, int) or isinstance(iat, bool):
            return refuse("InvalidProviderToken", f"iat {iat!r} is not an integer")
        now = record["time"]
        if iat > now + CLOCK_SLACK:
            return refuse("InvalidProviderToken", f"iat {iat} is in the future (now {now:.0f})")
        if iat < now - PROVIDER_TOKEN_LIFETIME:
            return refuse("ExpiredProviderToken", f"iat {iat} is more than an hour old (now {now:.0f})")
        record["jwt_verified"] = True
        with self.state.lock:
            self.state.provider_tokens.add(raw)

        # The headers.
        topic = headers.get("apns-topic")
        if topic is None:
            return refuse("MissingTopic")
        if topic not in bundles:
            return refuse("TopicDisallowed", f"topic {topic!r} is not a bundle id of team {team} ({sorted(bundles)})")
        push_type = headers.get("apns-push-type", "alert")
        if push_type not in PUSH_TYPES:
            return refuse("InvalidPushType", f"apns-push-type {push_type!r}")
        priority = headers.get("apns-priority", "10")
        if priority not in ("1", "5", "10"):
            return refuse("BadPriority", f"apns-priority {priority!r}")
        if push_type == "background" and priority != "5":
            return refuse("BadPriority", f"a background push must have priority 5, not {priority}")
        expiration = headers.get("apns-expiration")
        if expiration is not None and not re.fullmatch(r"\d+", expiration):
            return refuse("BadExpirationDate", f"apns-expiration {expiration!r}")
        collapse_id = headers.get("apns-collapse-id")
        if collapse_id is not None and len(collapse_id.encode("utf-8")) > MAX_COLLAPSE_ID_BYTES:
            return refuse("BadCollapseId", f"apns-collapse-id of {len(collapse_id.encode())} bytes")
        if not (HEX.match(token) and len(token) % 2 == 0 and len(token) <= MAX_TOKEN_HEX_DIGITS):
            return refuse("BadDeviceToken", f"device token {token[:80]!r}")

        # The payload.
        body = record["body"]
        if not body:
            return refuse("PayloadEmpty")
        if len(body) > MAX_PAYLOAD_BYTES:
            return refuse("PayloadTooLarge", f"a payload of {len(body)} bytes")
        try:
            document = json.loads(body)
        except (ValueError, UnicodeDecodeError) as error:
            return refuse("BadPayload", f"the payload is not JSON: {error}")
        record["json"] = document
        if not isinstance(document, dict) or not isinstance(document.get("aps"), dict):
            return refuse("BadPayload", "the payload is not a JSON object with an aps dictionary")
        if push_type == "background" and document["aps"] != {"content-available": 1}:
            return refuse("BadPayload", f"a background push's aps must be {{\"content-available\":1}}, "
                                        f"got {document['aps']}")

        scripted = self.state.take_answer(token)
        if scripted is not None:
            if scripted.status != 200:
                problems.append(f"scripted {scripted.status} {scripted.reason}")
            return scripted
        return Answer(200)

    # --- control API ------------------------------------------------------------------------------------------

    def control(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        try:
            document = json.loads(body) if body else {}
        except ValueError:
            return 400, {"error": "body is not JSON"}
        try:
            if method == "GET" and path == "/_fake/requests":
                with self.state.lock:
                    count, tokens = self.state.count, len(self.state.provider_tokens)
                return 200, {"requests": [json_record(r) for r in self.state.requests()], "count": count,
                             "provider_tokens": tokens}
            if method == "POST" and path == "/_fake/reset":
                self.state.reset()
                return 200, {}
            if method == "POST" and path == "/_fake/script":
                self.state.script(document["token"], document["answers"])
                return 200, {}
            if method == "POST" and path == "/_fake/teams":
                self.state.register_team(document["team_id"], document["key_id"], document["public_key_pem"],
                                         document.get("bundle_ids", []))
                return 200, {}
        except (KeyError, TypeError, ValueError) as error:
            return 400, {"error": repr(error)}
        return 404, {"error": f"no control endpoint {method} {path}"}


# --- helpers -----------------------------------------------------------------------------------------------------

def write_p8(path: Union[str, os.PathLike]) -> tuple[ec.EllipticCurvePrivateKey, str]:
    """A new APNs signing key, written to `path` as Apple gives it (AuthKey_<KEYID>.p8: PKCS#8 PEM, P-256).
    Returns (the private key, the path)."""
    key = ec.generate_private_key(ec.SECP256R1())
    with open(path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return key, str(path)


def public_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def h2_config(fd: int, cert: Optional[str], key: Optional[str]):
    config = make_config(fd, cert, key)
    config.alpn_protocols = ["h2"]  # APNs speaks HTTP/2 only
    return config


# --- server ------------------------------------------------------------------------------------------------------

class FakeAPNsServer:
    """The fake run by hypercorn on a background thread with its own event loop (for pytest)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None, tls_dir: Optional[str] = None, environment: str = "production"):
        if tls_dir is not None and tls_cert is None:
            tls_cert, tls_key = make_self_signed_cert(str(tls_dir))
        if not (tls_cert and tls_key):
            raise ValueError("APNs is served over TLS: give tls_cert and tls_key, or tls_dir")
        self.host, self.tls_cert, self.tls_key = host, tls_cert, tls_key
        self.state = FakeAPNsState(environment)
        self._sock = listening_socket(host, port)
        self.port = self._sock.getsockname()[1]
        self._thread: Optional[threading.Thread] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stop_event: Optional[asyncio.Event] = None
        self._started = threading.Event()
        self._error: Optional[BaseException] = None

    @property
    def environment(self) -> str:
        return self.state.environment

    @property
    def base_url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def ca_file(self) -> str:
        return self.tls_cert

    # -- the test's side ------------------------------------------------------------------------------------------

    def register_team(self, team_id: str, key_id: str, public_key: Any, bundle_ids: Sequence[str]) -> None:
        self.state.register_team(team_id, key_id, public_key, bundle_ids)

    def script(self, token: str, answers: Sequence[Union[Answer, tuple, list, dict]]) -> None:
        """Answers for the next well-formed pushes to `token`, in turn: (status, reason[, timestamp ms[, Retry-After
        [, delay s]]]) tuples, dicts or Answers."""
        self.state.script(token, answers)

    def requests(self) -> list[dict]:
        return self.state.requests()

    def received(self, token: str) -> list[dict]:
        """The pushes to `token` (any case), in arrival order."""
        return [r for r in self.state.requests() if (r["token"] or "").lower() == token.lower()]

    def accepted(self, token: str) -> list[dict]:
        return [r for r in self.received(token) if r["status"] == 200]

    def provider_tokens(self) -> int:
        """How many distinct provider tokens (JWTs) were accepted."""
        with self.state.lock:
            return len(self.state.provider_tokens)

    def describe(self, token: Optional[str] = None) -> str:
        records = self.requests() if token is None else self.received(token)
        lines = [f"{len(records)} request(s) to the {self.environment} fake APNs"
                 + ("" if token is None else f" for {token}") + ":"]
        for r in records:
            headers = {k: v for k, v in r["headers"].items() if k.startswith("apns-")}
            lines.append(f"  {r['method']} {r['path'][:90]} HTTP/{r['http_version']} -> {r['status']} {r['reason']} "
                         f"{headers} body={r['body'][:300]!r} problems={r['problems']}")
        return "\n".join(lines)

    # -- lifecycle ------------------------------------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> "FakeAPNsServer":
        self._thread = threading.Thread(target=self._run, name=f"fake-apns-{self.environment}", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout):
            raise TimeoutError("the fake APNs server did not start in time")
        if self._error is not None:
            raise RuntimeError("the fake APNs server failed to start") from self._error
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
        config = h2_config(self._sock.detach(), self.tls_cert, self.tls_key)  # hypercorn owns and closes it
        asyncio.get_running_loop().call_soon(self._started.set)
        await serve(FakeAPNsApp(self.state), config, shutdown_trigger=self._stop_event.wait)

    def stop(self, timeout: float = 10.0) -> None:
        if self._loop is not None and self._stop_event is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._stop_event.set)
            except RuntimeError:
                pass
        if self._thread is not None:
            self._thread.join(timeout)
        try:
            if self._sock.fileno() != -1:  # never handed to hypercorn
                self._sock.close()
        except OSError:
            pass

    def __enter__(self) -> "FakeAPNsServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Fake APNs provider API (see the module docstring).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--tls-self-signed", metavar="DIR")
    parser.add_argument("--environment", default="production", choices=["production", "development"])
    parser.add_argument("--team")
    parser.add_argument("--key-id")
    parser.add_argument("--bundle-id", action="append", default=[])
    parser.add_argument("--p8-out", metavar="PATH")
    parser.add_argument("--exit-on-stdin-eof", action="store_true")
    args = parser.parse_args(argv)
    cert, key = args.tls_cert, args.tls_key
    if args.tls_self_signed:
        cert, key = make_self_signed_cert(args.tls_self_signed)
    if not (cert and key):
        parser.error("APNs is served over TLS: --tls-self-signed DIR, or --tls-cert and --tls-key")
    if args.p8_out and not (args.team and args.key_id):
        parser.error("--p8-out needs --team and --key-id")
    state = FakeAPNsState(args.environment)
    sock = listening_socket(args.host, args.port)
    port = sock.getsockname()[1]
    announcement: dict[str, Any] = {"port": port, "base_url": f"https://{args.host}:{port}"}
    if args.tls_self_signed:
        announcement["ca_file"] = cert
    if args.p8_out:
        team_key, path = write_p8(args.p8_out)
        state.register_team(args.team, args.key_id, team_key.public_key(), args.bundle_id)
        announcement["p8"] = path

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
        await serve(FakeAPNsApp(state), h2_config(sock.detach(), cert, key), shutdown_trigger=stop.wait)

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
