#!/usr/bin/env python3
"""An HTTP/1.1 server that vanishes after reading a request: it stands for a replica killed (SIGKILL) between
acting on a forwarded call and answering it.

    vanishing_http1.py --port 0 --record FILE [--second vanish|reset] [--keep-listening] [--exit-on-stdin-eof]

- The first request on its first connection is answered `200 ok`, keeping the connection alive.
- The second request, with `--second vanish` (the default), is read whole and its request line appended to FILE;
  then the connection is closed in order (EOF), answering nothing. With `--second reset`, the server waits until
  the request's bytes arrived and closes the connection without reading them: the kernel resets it (RST), as when
  a stopping replica closes a connection whose request it has not read yet.
- Then, by default, the server closes its listening socket and exits: a client that sends again on a new
  connection is refused. With `--keep-listening` it goes on: every later request, on any connection, is recorded
  and answered `200 ok`.

Prints `{"port": N, "base_url": "http://127.0.0.1:N"}` on stdout once it listens. Only loopback.
"""
import argparse
import json
import os
import select
import signal
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


def record(path, line):
    with open(path, "a") as file:
        file.write(f"{line}\n")


def answer_forever(listener, path):
    """Records and answers `200 ok` every request, one connection at a time."""
    while True:
        connection, _ = listener.accept()
        pending = [b""]
        while (line := read_request(connection, pending)) is not None:
            record(path, line)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok")
        connection.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--record", required=True)
    parser.add_argument("--second", choices=["vanish", "reset"], default="vanish")
    parser.add_argument("--keep-listening", action="store_true")
    parser.add_argument("--exit-on-stdin-eof", action="store_true")
    args = parser.parse_args()
    # The test runner may start it with SIGTERM blocked or ignored: a stop must end it at once.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
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
    if args.second == "vanish":
        second = read_request(connection, pending)
        record(args.record, second)
    else:
        # Bytes of the next request arrived; closing with them unread makes the kernel answer RST.
        select.select([connection], [], [], 30)
    if not args.keep_listening:
        listener.close()
    connection.close()
    if args.keep_listening:
        answer_forever(listener, args.record)
    os._exit(0)


if __name__ == "__main__":
    main()
