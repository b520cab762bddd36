#!/usr/bin/env python3
"""An h2c (prior knowledge) server that refuses streams, sends GOAWAY and drops connections, and counts
every request body it receives. It stands for a provider whose front end sheds load the ways HTTP/2 allows
(RFC 9113 §8.7: REFUSED_STREAM and GOAWAY mark streams as not processed, so a client may send them again), and
that, like FCM, answers 400 to a POST whose body is empty.

    h2_resets.py --port 0 [--tls-self-signed DIR] [--refuse-every N] [--goaway-after M] [--drop-after K]
                 [--exit-on-stdin-eof]

- `--tls-self-signed DIR`: TLS with ALPN h2 (as the providers), with a self-signed certificate written to DIR
  (`cert.pem`, its own CA) by fake_fcm.py's maker; without it, h2c with prior knowledge only.

- `--refuse-every N`: every Nth stream (counted over the server) is reset with REFUSED_STREAM as soon as its
  headers arrive, before its body is read.
- `--goaway-after M`: once a connection has received M streams' headers, the server sends GOAWAY naming the
  first of them as the last processed, answers that one, and closes the connection when it is answered; the
  others were refused by the GOAWAY.
- `--drop-after K`: once a connection has received K streams' headers, the TCP connection is closed at once,
  with nothing answered.
- Every other stream is answered when its body ends: 200 `{"name":"ok"}` when the body is the one announced by
  `content-length` and not empty, else 400 `INVALID_ARGUMENT` (as FCM).
- `GET /stats` answers the counts as JSON (`answered`, `empty_bodies`, `short_bodies`, `refused`, `goaways`,
  `drops`, `connections`, `protocol_errors`: connections that did not speak HTTP/2 with prior knowledge).

Prints `{"port": N, "ca_file": PATH|null}` on stdout once it listens. Only loopback.
"""
import argparse
import json
import os
import socket
import ssl
import sys
import threading

import h2.config
import h2.connection
import h2.errors
import h2.events

lock = threading.Lock()
stats = {"answered": 0, "empty_bodies": 0, "short_bodies": 0, "refused": 0, "goaways": 0, "drops": 0,
         "connections": 0, "streams": 0, "protocol_errors": 0}


def count(name, n=1):
    with lock:
        stats[name] += n


def next_stream_number():
    with lock:
        stats["streams"] += 1
        return stats["streams"]


class Connection:
    def __init__(self, sock, options):
        self.sock = sock
        self.options = options
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        self.streams = {}  # id -> {"headers": dict, "body": bytearray}
        self.seen = 0
        self.goaway_last = None
        self.closing = False

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def answer(self, stream_id, status, body):
        payload = json.dumps(body).encode()
        self.conn.send_headers(stream_id, [(":status", str(status)), ("content-type", "application/json"),
                                           ("content-length", str(len(payload)))])
        self.conn.send_data(stream_id, payload, end_stream=True)

    def on_headers(self, event):
        headers = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                   for k, v in event.headers}
        self.seen += 1
        number = next_stream_number()
        sid = event.stream_id
        if self.goaway_last is not None and sid > self.goaway_last:
            return  # refused by the GOAWAY already sent
        if self.options.drop_after and self.seen >= self.options.drop_after:
            count("drops")
            raise ConnectionAbortedError("drop")
        if self.options.refuse_every and number % self.options.refuse_every == 0:
            count("refused")
            self.conn.reset_stream(sid, error_code=h2.errors.ErrorCodes.REFUSED_STREAM)
            return
        self.streams[sid] = {"headers": headers, "body": bytearray()}
        if headers.get(":method") == "GET" and headers.get(":path") == "/stats":
            with lock:
                snapshot = dict(stats)
            self.answer(sid, 200, snapshot)
            self.streams.pop(sid, None)
            return
        if event.stream_ended:
            self.finish(sid)
        if self.options.goaway_after and self.seen >= self.options.goaway_after and self.goaway_last is None:
            self.goaway_last = sid
            count("goaways")
            self.conn.close_connection(error_code=h2.errors.ErrorCodes.NO_ERROR, last_stream_id=sid)
            self.closing = True

    def finish(self, sid):
        stream = self.streams.pop(sid, None)
        if stream is None:
            return
        body = bytes(stream["body"])
        announced = stream["headers"].get("content-length")
        if stream["headers"].get(":method") == "POST" and not body:
            count("empty_bodies")
            self.answer(sid, 400, {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                             "message": "the request body is empty"}})
        elif announced is not None and int(announced) != len(body):
            count("short_bodies")
            self.answer(sid, 400, {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                             "message": "the body is not as long as announced"}})
        else:
            count("answered")
            self.answer(sid, 200, {"name": "ok", "bytes": len(body)})

    def serve(self):
        self.conn.initiate_connection()
        self.flush()
        while True:
            data = self.sock.recv(65536)
            if not data:
                return
            for event in self.conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    self.on_headers(event)
                elif isinstance(event, h2.events.DataReceived):
                    self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    if event.stream_id in self.streams:
                        self.streams[event.stream_id]["body"] += event.data
                    if event.stream_ended:
                        self.finish(event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    self.finish(event.stream_id)
                elif isinstance(event, h2.events.ConnectionTerminated):
                    self.flush()
                    return
            self.flush()
            if self.closing and not self.streams:
                return


def handle(sock, options, context):
    count("connections")
    try:
        if context is not None:
            sock.settimeout(10)
            sock = context.wrap_socket(sock, server_side=True)
            sock.settimeout(None)
            if sock.selected_alpn_protocol() != "h2":
                return
        Connection(sock, options).serve()
    except (ConnectionError, OSError, ssl.SSLError):
        pass
    except h2.exceptions.ProtocolError:
        count("protocol_errors")  # e.g. an HTTP/1.1 `Upgrade: h2c` request: this server takes prior knowledge only
    finally:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        except OSError:
            pass
        sock.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--refuse-every", type=int, default=0)
    parser.add_argument("--goaway-after", type=int, default=0)
    parser.add_argument("--drop-after", type=int, default=0)
    parser.add_argument("--exit-on-stdin-eof", action="store_true")
    parser.add_argument("--tls-self-signed", default=None)
    options = parser.parse_args()
    context, ca_file = None, None
    if options.tls_self_signed:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from fake_fcm import make_self_signed_cert
        ca_file, key_file = make_self_signed_cert(options.tls_self_signed)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(ca_file, key_file)
        context.set_alpn_protocols(["h2"])
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", options.port))
    listener.listen(128)
    print(json.dumps({"port": listener.getsockname()[1], "ca_file": ca_file}), flush=True)
    if options.exit_on_stdin_eof:
        def watch():
            sys.stdin.read()
            listener.close()
            os._exit(0)
        threading.Thread(target=watch, daemon=True).start()
    while True:
        try:
            sock, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=handle, args=(sock, options, context), daemon=True).start()


if __name__ == "__main__":
    import h2.exceptions  # noqa: F401  (used in handle)
    main()
