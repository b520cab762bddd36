#!/usr/bin/env python3
"""An HTTP/1.1 server that vanishes after reading a request: it stands for a replica killed (SIGKILL) between
acting on a forwarded call and answering it.

    vanishing_http1.py --port 0 --record FILE [--exit-on-stdin-eof]

- The first request on its (single) connection is answered `200 ok`, keeping the connection alive.
- The second request is read whole and its request line appended to FILE; then the server closes its listening
  socket and the connection, answering nothing, and exits. A client that sends again on a new connection is
  refused.

Prints `{"port": N, "base_url": "http://127.0.0.1:N"}` on stdout once it listens. Only loopback.
"""
import argparse
import json
import os
import socket
import sys
import threading


def read_request(connection, pending):
    """One request (head and a content-length body) from `connection`; None at the connection's end."""
    while b"\r\n\r\n" not in pending[0]:
        data = connection.recv(65536)
        if not data:
            return None
        pending[0] += data
    head, _, rest = pending[0].partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        data = connection.recv(65536)
        if not data:
            return None
        rest += data
    pending[0] = rest[length:]
    return head.split(b"\r\n")[0].decode("latin-1")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--record", required=True)
    parser.add_argument("--exit-on-stdin-eof", action="store_true")
    args = parser.parse_args()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(4)
    port = listener.getsockname()[1]
    print(json.dumps({"port": port, "base_url": f"http://127.0.0.1:{port}"}), flush=True)
    if args.exit_on_stdin_eof:
        def watch():
            sys.stdin.read()
            os._exit(0)
        threading.Thread(target=watch, daemon=True).start()
    connection, _ = listener.accept()
    pending = [b""]
    first = read_request(connection, pending)
    if first is None:
        return
    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok")
    second = read_request(connection, pending)
    with open(args.record, "a") as record:
        record.write(f"{second}\n")
    listener.close()
    connection.close()
    os._exit(0)


if __name__ == "__main__":
    main()
