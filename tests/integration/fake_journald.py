#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A journald that stops reading: binds PATH (SOCK_DGRAM) and reads nothing until stdin says "read".

Run in a network namespace of its own (unshare -n), where it sets net.unix.max_dgram_qlen to QLEN,
so that its queue fills after a few datagrams whatever the host's setting. Prints "ready" once bound;
after "read" on stdin, prints each datagram (journald's native protocol) as one JSON object a line.
"""
import json
import socket
import struct
import sys


def parse(data):
    fields = {}
    while data:
        nl = data.index(b"\n")
        line, data = data[:nl], data[nl + 1:]
        if b"=" in line:
            key, value = line.split(b"=", 1)
        else:  # KEY, newline, 64-bit little-endian length, value, newline
            key = line
            (size,) = struct.unpack("<Q", data[:8])
            value, data = data[8:8 + size], data[8 + size + 1:]
        fields.setdefault(key.decode(), value.decode(errors="replace"))
    return fields


def main():
    path, qlen = sys.argv[1], sys.argv[2]
    with open("/proc/sys/net/unix/max_dgram_qlen", "w") as f:
        f.write(qlen)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "read":
        return
    while True:
        print(json.dumps(parse(s.recv(1 << 20))), flush=True)


main()
