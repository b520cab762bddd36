"""A Web Push service for the end-to-end tests (RFC 8030 §5, RFC 8291, RFC 8292): HTTPS (a self-signed certificate
the gateway trusts through the app's `webPush.caFile`), HTTP/1.1, in a thread of the test process, and the browsers
that subscribe through it.

A `Browser` is what `pushManager.subscribe()` makes in a page: a P-256 key pair and a 16-byte `auth` secret, and the
`PushSubscription.toJSON()` document a page hands to the gateway. `FakePushService.subscribe(path)` makes one whose
endpoint is `https://127.0.0.1:<port><path>`; the service then decrypts what is pushed to that path, as the browser
would (with the independent `http_ece`), and records it.

Every request is recorded: path, headers (lower-case names), raw body, the plaintext the browser would read (or
None), the sender's key and salt of the aes128gcm header, the VAPID claims (verified with the independent `joserfc`
against the `k` key, for this service's origin), the problems found (each a string; none for a well-formed
request), the status answered and the time.

Answers, as a push service gives them:
- a request that breaks the protocol (no `TTL`, a content coding other than `aes128gcm`, an unreadable body, no or
  an invalid VAPID `Authorization`) is answered 400 (401 for VAPID), without using the path's script;
- a body over `max_body` bytes (4096: RFC 8030 §7.2's minimum a push service accepts) is answered 413;
- otherwise the next scripted answer of the path, if any: (status, Retry-After or None[, delay in seconds]);
- otherwise 201 Created with the push message's `Location` (RFC 8030 §5), or 404 for a path nobody subscribed.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import struct
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

import http_ece
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from joserfc import jws
from joserfc.jwk import ECKey

TOPIC_ALPHABET = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
URGENCIES = ("very-low", "low", "normal", "high")
VAPID_MAX_LIFETIME = 24 * 3600  # RFC 8292 §2: `exp` no more than 24 hours ahead
CLOCK_SLACK = 5.0  # seconds of clock difference tolerated between the gateway and this process


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def b64u_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def uncompressed_point(public_key: ec.EllipticCurvePublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)


class Browser:
    """A browser's push subscription keys: the P-256 key pair (`p256dh`) and the `auth` secret."""

    def __init__(self, auth: Optional[bytes] = None):
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.auth = auth if auth is not None else os.urandom(16)

    @property
    def p256dh(self) -> str:
        return b64u(uncompressed_point(self.key.public_key()))

    @property
    def auth_b64(self) -> str:
        return b64u(self.auth)

    def keys(self) -> dict:
        return {"p256dh": self.p256dh, "auth": self.auth_b64}

    def subscription(self, endpoint: str, expiration_time=None) -> dict:
        """`PushSubscription.toJSON()`: {"endpoint", "expirationTime", "keys": {"p256dh", "auth"}}."""
        return {"endpoint": endpoint, "expirationTime": expiration_time, "keys": self.keys()}

    def decrypt(self, body: bytes) -> bytes:
        """The message as the browser reads it (RFC 8291, aes128gcm); raises on a body that does not decrypt."""
        return decrypt(body, self.key, self.auth)


def decrypt(body: bytes, private_key: ec.EllipticCurvePrivateKey, auth: bytes) -> bytes:
    """Decrypts a Web Push message body with the browser's private key and auth secret (http_ece)."""
    return http_ece.decrypt(body, private_key=private_key, auth_secret=auth, version="aes128gcm")


def aes128gcm_header(body: bytes) -> dict:
    """The RFC 8188 §2.1 header of a body: salt (16 bytes), record size, key id (the sender's public key, RFC 8291
    §4: its 65-byte uncompressed point). Raises ValueError on a body too short for its header."""
    if len(body) < 21:
        raise ValueError(f"a body of {len(body)} bytes has no aes128gcm header")
    id_len = body[20]
    if len(body) < 21 + id_len:
        raise ValueError("the body ends inside its aes128gcm header")
    return {"salt": body[:16], "rs": struct.unpack("!L", body[16:20])[0], "keyid": body[21:21 + id_len],
            "ciphertext_length": len(body) - 21 - id_len}


class VapidError(ValueError):
    pass


def parse_vapid(authorization: str) -> tuple[str, str]:
    """(t, k) of an `Authorization: vapid t=<JWT>, k=<key>` value (RFC 8292 §3)."""
    scheme, _, rest = authorization.strip().partition(" ")
    if scheme.lower() != "vapid":
        raise VapidError(f"the authorization scheme is {scheme!r}, not vapid")
    params = {}
    for part in rest.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep:
            raise VapidError(f"malformed vapid parameter {part!r}")
        params[name.strip().lower()] = value.strip()
    if "t" not in params or "k" not in params:
        raise VapidError(f"the vapid authorization needs t and k, got {sorted(params)}")
    return params["t"], params["k"]


def verify_vapid(authorization: str, audience: str, now: Optional[float] = None) -> dict:
    """Verifies a VAPID `Authorization` value for a push to `audience` (the push service's origin) and returns
    {"claims", "header", "k"} (`k`: the public key as sent, base64url). Raises VapidError on anything RFC 8292
    refuses: another scheme, a `k` that is not an uncompressed P-256 point, a JWT not signed ES256 by `k`, another
    `aud`, an `exp` in the past or more than 24 hours ahead, a `sub` that is neither mailto: nor https:."""
    now = time.time() if now is None else now
    token, k = parse_vapid(authorization)
    try:
        raw = b64u_decode(k)
    except ValueError as error:
        raise VapidError(f"k is not base64url: {error}") from error
    if len(raw) != 65 or raw[0] != 4:
        raise VapidError(f"k must be an uncompressed P-256 point (65 bytes), got {len(raw)} bytes")
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
    except ValueError as error:
        raise VapidError(f"k is not a P-256 point: {error}") from error
    key = ECKey.import_key({"kty": "EC", "crv": "P-256", "x": b64u(raw[1:33]), "y": b64u(raw[33:65])})
    try:
        verified = jws.deserialize_compact(token, key, algorithms=["ES256"])
    except Exception as error:  # noqa: BLE001 - any failure of the library is a refusal
        raise VapidError(f"the JWT does not verify with k: {type(error).__name__}: {error}") from error
    header = dict(verified.protected)
    if header.get("alg") != "ES256" or header.get("typ", "JWT").upper() != "JWT":
        raise VapidError(f"JWT header {header}")
    try:
        claims = json.loads(verified.payload)
    except ValueError as error:
        raise VapidError(f"the JWT's claims are not JSON: {error}") from error
    if not isinstance(claims, dict):
        raise VapidError(f"the JWT's claims are not an object: {claims!r}")
    if claims.get("aud") != audience:
        raise VapidError(f"aud {claims.get('aud')!r}, expected {audience!r}")
    exp = claims.get("exp")
    if not isinstance(exp, int) or isinstance(exp, bool):
        raise VapidError(f"exp must be an integer NumericDate, got {exp!r}")
    if exp <= now - CLOCK_SLACK:
        raise VapidError(f"exp {exp} is in the past (now {now:.0f})")
    if exp > now + VAPID_MAX_LIFETIME + CLOCK_SLACK:
        raise VapidError(f"exp {exp} is more than 24 hours ahead (now {now:.0f})")
    sub = claims.get("sub")
    if sub is not None and not (isinstance(sub, str) and (sub.startswith("mailto:") or sub.startswith("https:"))):
        raise VapidError(f"sub must be a mailto: or https: URI, got {sub!r}")
    return {"claims": claims, "header": header, "k": k}


class FakePushService:
    def __init__(self, cert: str, key: str, port: int = 0, max_body: int = 4096):
        self.max_body = max_body
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.scripts: dict[str, list[tuple]] = {}
        self.browsers: dict[str, Browser] = {}
        self.closing = threading.Event()
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                record = service._examine(self.path, headers, body)
                record["http_version"] = self.request_version
                status, retry_after, delay = service._answer_for(self.path, record)
                record["status"] = status
                location = None
                if 200 <= status < 300:
                    location = f"/message/{uuid.uuid4().hex}"
                    record["location"] = location
                with service.lock:
                    service.requests.append(record)
                if delay:
                    service.closing.wait(delay)
                self.send_response(status)
                if location is not None:
                    self.send_header("Location", location)
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        context.set_alpn_protocols(["http/1.1"])
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    # -- the service's side ---------------------------------------------------------------------------------

    def _examine(self, path: str, headers: dict, body: bytes) -> dict:
        """Records what a push service checks of a request, and what the browser at `path` would read."""
        record = {"path": path, "headers": headers, "body": body, "at": time.time(), "problems": [],
                  "plaintext": None, "vapid": None, "salt": None, "sender_key": None}
        problems = record["problems"]
        ttl = headers.get("ttl")
        if ttl is None or not ttl.isdigit():
            problems.append(f"TTL: {ttl!r} (RFC 8030 §5.2: required, a number of seconds)")
        if headers.get("content-encoding") != "aes128gcm":
            problems.append(f"content-encoding: {headers.get('content-encoding')!r}, expected aes128gcm")
        urgency = headers.get("urgency")
        if urgency is not None and urgency not in URGENCIES:
            problems.append(f"urgency: {urgency!r}")
        topic = headers.get("topic")
        if topic is not None and not (0 < len(topic) <= 32 and set(topic) <= TOPIC_ALPHABET):
            problems.append(f"topic: {topic!r} (RFC 8030 §5.4: at most 32 base64url characters)")
        try:
            header = aes128gcm_header(body)
            record["salt"], record["sender_key"] = header["salt"], header["keyid"]
            if len(header["keyid"]) != 65:
                problems.append(f"the aes128gcm key id is {len(header['keyid'])} bytes, not a P-256 point")
        except ValueError as error:
            problems.append(str(error))
        authorization = headers.get("authorization")
        if authorization is None:
            record["vapid_problem"] = "no Authorization header"
        else:
            try:
                record["vapid"] = verify_vapid(authorization, f"https://{headers.get('host', '')}")
            except VapidError as error:
                record["vapid_problem"] = str(error)
        if record.get("vapid_problem"):
            problems.append("VAPID: " + record["vapid_problem"])
        with self.lock:
            browser = self.browsers.get(path)
        if browser is not None and not any(p.startswith(("content-encoding", "a body", "the body")) for p in problems):
            try:
                record["plaintext"] = browser.decrypt(body)
            except Exception as error:  # noqa: BLE001 - whatever http_ece refuses
                problems.append(f"the body does not decrypt for the browser: {type(error).__name__}: {error}")
        return record

    def _answer_for(self, path: str, record: dict) -> tuple[int, Optional[str], float]:
        if record.get("vapid_problem"):
            return 401, None, 0.0
        if record["problems"]:
            return 400, None, 0.0
        if len(record["body"]) > self.max_body:
            return 413, None, 0.0
        with self.lock:
            script = self.scripts.get(path)
            if script:
                answer = script.pop(0)
                return answer[0], answer[1], answer[2] if len(answer) > 2 else 0.0
            known = path in self.browsers
        return (201 if known else 404), None, 0.0

    # -- the test's side ------------------------------------------------------------------------------------

    @property
    def origin(self) -> str:
        """The push service's origin: the audience of the VAPID JWTs of the endpoints made by `subscribe`."""
        return f"https://127.0.0.1:{self.port}"

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}{path}"

    def subscribe(self, path: str, host: str = "127.0.0.1", browser: Optional[Browser] = None) -> tuple[str, Browser]:
        """A browser subscribed at `path` (its pushes are decrypted and answered 201): (endpoint, browser)."""
        browser = browser or Browser()
        with self.lock:
            self.browsers[path] = browser
        return self.url(path, host), browser

    def script(self, path: str, answers: list[tuple]) -> None:
        """Answers for the next well-formed requests to `path`: (status, Retry-After or None[, delay in seconds])."""
        with self.lock:
            self.scripts.setdefault(path, []).extend(answers)

    def received(self, path: str) -> list[dict]:
        with self.lock:
            return [r for r in self.requests if r["path"] == path]

    def accepted(self, path: str) -> list[dict]:
        """The requests to `path` answered 2xx, in arrival order."""
        return [r for r in self.received(path) if 200 <= r["status"] < 300]

    def describe(self, path: Optional[str] = None) -> str:
        with self.lock:
            records = [r for r in self.requests if path is None or r["path"] == path]
        lines = [f"{len(records)} request(s){'' if path is None else ' to ' + path}:"]
        for r in records:
            headers = {k: v for k, v in r["headers"].items() if k != "authorization"}
            lines.append(f"  {r['path']} -> {r['status']} headers={headers} body={len(r['body'])} bytes "
                         f"plaintext={r['plaintext']!r} problems={r['problems']}")
        return "\n".join(lines)

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
