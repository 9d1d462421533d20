# SPDX-License-Identifier: LGPL-2.1-or-later
"""A process that listens where a .NET runtime would, and misbehaves on purpose.

Modes: silent (accepts, reads, never answers), garbage (answers with bytes that
are not a reply), close (accepts and hangs up). Everything received is
appended to LOG so tests can check what reached the "runtime".
"""
import os
import socket
import sys

mode, log = sys.argv[1], sys.argv[2]
stat = open("/proc/self/stat").read()
start = int(stat[stat.rindex(")") + 2:].split()[19])
path = os.path.join(os.environ.get("TMPDIR") or "/tmp", f"dotnet-diagnostic-{os.getpid()}-{start}-socket")

os.umask(0o077)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(path)
listener.listen(16)
print(f"listening pid={os.getpid()}", flush=True)

held = []
while True:
    conn, _ = listener.accept()
    if mode == "close":
        conn.close()
        continue
    data = conn.recv(65536)
    with open(log, "ab") as f:
        f.write(data)
    if mode == "garbage":
        conn.sendall(b"DOTNET_IPC_V1\x00" + b"\xff" * 30)
        conn.close()
    else:
        held.append(conn)  # silent: keep it open, answer nothing
