# SPDX-License-Identifier: LGPL-2.1-or-later
"""Listen on PATH as whoever runs this, logging every connection and the bytes it carried.

Used as the attacker's socket: planted under a runtime's name, or as the
privileged socket a symlink points to. Prints "listening" once bound.
"""
import os
import socket
import sys

path, log = sys.argv[1], sys.argv[2]
os.umask(0o077)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(path)
listener.listen(16)
print("listening", flush=True)
while True:
    conn, _ = listener.accept()
    # 5 s: what a client sends comes at once; only a client that never ends its side is waited for this long,
    # and what it sent is logged all the same (a test reads the log after its own request has ended)
    conn.settimeout(5)
    data = b""
    try:
        while chunk := conn.recv(65536):
            data += chunk
    except OSError:
        pass
    with open(log, "a") as f:
        f.write(f"connection bytes={len(data)}\n")
    conn.close()
