"""A webhook receiver for the end-to-end tests: HTTPS (a self-signed certificate the gateway trusts through the
app's `webhook.caFile`), HTTP/1.1, in a thread of the test process.

Every request is recorded (path, headers, body, whether its Standard Webhooks signature verifies with the
independent `standardwebhooks` package from PyPI, the status answered). Answers are scripted per path: a list of
statuses (with an optional Retry-After, and an optional delay in seconds before answering) used in turn, then 200.
Paths can also hang (by prefix): their requests are answered only when the receiver closes. The receiver counts the requests
it is answering at once (`max_concurrent`).
"""

from __future__ import annotations

import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


class FakeWebhookReceiver:
    def __init__(self, cert: str, key: str, secrets: list[str], port: int = 0):
        self.secrets = secrets
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.scripts: dict[str, list[tuple]] = {}
        self.hanging: set[str] = set()
        self.closing = threading.Event()
        self.concurrent = 0
        self.max_concurrent = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                with receiver.lock:
                    receiver.concurrent += 1
                    receiver.max_concurrent = max(receiver.max_concurrent, receiver.concurrent)
                try:
                    self._answer()
                finally:
                    with receiver.lock:
                        receiver.concurrent -= 1

            def _answer(self):
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                status, retry_after, delay = receiver._next(self.path)
                headers = {k.lower(): v for k, v in self.headers.items()}
                record = {"path": self.path, "headers": headers, "body": body, "status": status,
                          "verified": receiver._verify(body, headers), "at": time.time()}
                with receiver.lock:
                    receiver.requests.append(record)
                    hang = any(self.path.startswith(prefix) for prefix in receiver.hanging)
                if hang:
                    receiver.closing.wait()
                elif delay:
                    receiver.closing.wait(delay)
                self.send_response(status)
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _verify(self, body: bytes, headers: dict) -> list[bool]:
        """For each configured secret: does the request verify with it (standardwebhooks)?"""
        out = []
        for secret in self.secrets:
            try:
                Webhook(secret).verify(body, headers)
                out.append(True)
            except WebhookVerificationError:
                out.append(False)
        return out

    def _next(self, path: str) -> tuple[int, Optional[str], float]:
        with self.lock:
            script = self.scripts.get(path)
            if script:
                answer = script.pop(0)
                return answer[0], answer[1], answer[2] if len(answer) > 2 else 0.0
        return 200, None, 0.0

    def script(self, path: str, answers: list[tuple]) -> None:
        """Answers for the next requests to `path`: (status, Retry-After or None[, delay in seconds])."""
        with self.lock:
            self.scripts.setdefault(path, []).extend(answers)

    def hang(self, prefix: str) -> None:
        """Requests to paths starting with `prefix` get no answer until the receiver closes."""
        with self.lock:
            self.hanging.add(prefix)

    def received(self, path: str) -> list[dict]:
        with self.lock:
            return [r for r in self.requests if r["path"] == path]

    def received_prefix(self, prefix: str) -> list[dict]:
        with self.lock:
            return [r for r in self.requests if r["path"].startswith(prefix)]

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}{path}"

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
