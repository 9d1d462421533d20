#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Capture a nettrace stream from a running .NET process, speaking the diagnostic IPC directly.

Used to record the real streams under tests/data/nettrace/ (see the README there), so the
parser is tested on what the runtime really writes rather than on what we think it writes.
Run as root or as the target's user:

    capture-nettrace.py PID OUT --seconds 3 --provider 'Name:0xKEYWORDS:LEVEL[:ARGS]' \
        [--rundown | --rundown-keyword 0xK]

It sends CollectTracing2 (0x0203; CollectTracing4 with --rundown-keyword), reads the stream for the given time, then sends StopTracing
(0x0201) on a second connection while it keeps draining the first: the runtime writes the
rundown and the end-of-stream marker into the stream before it answers StopTracing, so a
reader that stopped reading would wedge the runtime's single diagnostic thread.
"""
import argparse
import glob
import os
import select
import socket
import struct
import sys
import threading
import time

MAGIC = b"DOTNET_IPC_V1\0"


def ipc_string(text):
    if text is None:
        return struct.pack("<I", 0)
    units = (text + "\0").encode("utf-16-le")
    return struct.pack("<I", len(units) // 2) + units


def message(command, payload):
    header = MAGIC + struct.pack("<HBBH", 20 + len(payload), command >> 8, command & 0xFF, 0)
    return header + payload


def parse_provider(spec):
    # Name:keywords:level[:args]; args may contain ':' (they never contain it today, but allow it)
    parts = spec.split(":", 3)
    if len(parts) < 3:
        raise argparse.ArgumentTypeError("provider must be NAME:KEYWORDS:LEVEL[:ARGS]")
    return parts[0], int(parts[1], 0), int(parts[2], 0), parts[3] if len(parts) == 4 else None


def collect_tracing(providers, rundown, rundown_keyword, buffer_mb=16):
    if rundown_keyword is None:
        # CollectTracing2: rundown with the runtime's default keyword (every loaded method)
        command = 0x0203
        payload = struct.pack("<IIB", buffer_mb, 1, 1 if rundown else 0)  # format 1 = NetTrace
    else:
        # CollectTracing4: a narrower rundown (e.g. 0x8, Loader: modules only) keeps captures small
        command = 0x0205
        payload = struct.pack("<IIQB", buffer_mb, 1, rundown_keyword, 1)
    payload += struct.pack("<I", len(providers))
    for name, keywords, level, arguments in providers:
        payload += struct.pack("<QI", keywords, level) + ipc_string(name) + ipc_string(arguments)
    return message(command, payload)


def socket_path(pid):
    tmp = "/tmp"
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for entry in f.read().split(b"\0"):
                if entry.startswith(b"TMPDIR=") and len(entry) > 7:
                    tmp = entry[7:].decode()
    except OSError:
        pass
    matches = glob.glob(os.path.join(f"/proc/{pid}/root{tmp}", f"dotnet-diagnostic-{pid}-*-socket"))
    if not matches:
        sys.exit(f"no diagnostic socket for pid {pid} in {tmp}")
    return max(matches, key=os.path.getmtime)


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("runtime closed the connection")
        data += chunk
    return data


def read_reply(sock):
    header = recv_exact(sock, 20)
    if header[:14] != MAGIC:
        raise ValueError("bad reply magic")
    size, cmd_set, cmd_id = struct.unpack_from("<HBB", header, 14)
    payload = recv_exact(sock, size - 20)
    if (cmd_set, cmd_id) != (0xFF, 0x00):
        raise RuntimeError(f"runtime error 0x{struct.unpack_from('<I', payload)[0]:08x}")
    return payload


def drain(sock, out, until):
    """Reads the stream into @out until EOF, or until time @until when it is given."""
    while True:
        timeout = None if until is None else until - time.monotonic()
        if timeout is not None and timeout <= 0:
            return False
        ready, _, _ = select.select([sock], [], [], timeout)
        if not ready:
            continue
        chunk = sock.recv(65536)
        if not chunk:
            return True
        out += chunk


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pid", type=int)
    ap.add_argument("output")
    ap.add_argument("--provider", type=parse_provider, action="append", required=True)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rundown", action="store_true", help="CollectTracing2 with the default rundown")
    ap.add_argument("--rundown-keyword", type=lambda v: int(v, 0),
                    help="CollectTracing4 with this rundown keyword instead")
    opts = ap.parse_args()

    path = socket_path(opts.pid)
    stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stream.connect(path)
    stream.sendall(collect_tracing(opts.provider, opts.rundown, opts.rundown_keyword))
    session_id = struct.unpack("<Q", read_reply(stream))[0]

    data = bytearray()
    drain(stream, data, time.monotonic() + opts.seconds)

    stopped = {}

    def stop():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(path)
            s.sendall(message(0x0201, struct.pack("<Q", session_id)))
            stopped["id"] = struct.unpack("<Q", read_reply(s))[0]

    stopper = threading.Thread(target=stop)
    stopper.start()
    drain(stream, data, None)  # to EOF: the runtime closes the stream after the end marker
    stopper.join(30)
    stream.close()
    if stopped.get("id") != session_id:
        sys.exit("StopTracing did not answer with the session id")

    with open(opts.output, "wb") as f:
        f.write(data)
    print(f"{opts.output}: {len(data)} bytes, session 0x{session_id:x}, ends with 0x{data[-1]:02x}")


if __name__ == "__main__":
    main()
