# SPDX-License-Identifier: LGPL-2.1-or-later
"""A hostile client of a dsctl port: sends raw bytes as whoever runs it and reports what came back.

Usage: port_client.py SOCKET HEX [--shutdown] [--timeout SECONDS]

Connects to SOCKET, writes the bytes HEX in one go (--shutdown: then ends its side, as a client that
has nothing more to say), and reads until the other side closes or the timeout passes. Prints one JSON
object: {"connected": bool, "sent": N or null, "reply": HEX, "eof": bool, "error": TEXT or null}.
"eof" is true when the other side closed; false when the timeout ended the wait.
"""
import json
import socket
import sys

path, data = sys.argv[1], bytes.fromhex(sys.argv[2])
shutdown = "--shutdown" in sys.argv
# 20 s by default: a bound on each read, against a port that never answers nor closes; a case that expects
# an answer gets it within ms, and one that expects the port to hold on says why its --timeout is enough
timeout = float(sys.argv[sys.argv.index("--timeout") + 1]) if "--timeout" in sys.argv else 20.0
result = {"connected": False, "sent": None, "reply": "", "eof": False, "error": None}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(timeout)
reply = b""
try:
    s.connect(path)
    result["connected"] = True
    try:
        s.sendall(data)
        result["sent"] = len(data)
        if shutdown:
            s.shutdown(socket.SHUT_WR)
    except (BrokenPipeError, ConnectionResetError) as e:
        # closed on before all was written: what it answered first is still there to read
        result["error"] = f"{type(e).__name__}: {e}"
    while True:
        chunk = s.recv(65536)
        if not chunk:
            result["eof"] = True
            break
        reply += chunk
except socket.timeout:
    pass
except OSError as e:
    # a reset is the other side closing on unread bytes
    result["error"] = f"{type(e).__name__}: {e}"
    result["eof"] = isinstance(e, (ConnectionResetError, BrokenPipeError))
result["reply"] = reply.hex()
print(json.dumps(result), flush=True)
