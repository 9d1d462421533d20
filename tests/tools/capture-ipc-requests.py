#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Record what a stock tool sends a runtime: a relay between a tool and a runtime's diagnostic socket.

    capture-ipc-requests.py LISTEN_PATH RUNTIME_SOCKET [--json]

Listens on LISTEN_PATH (give the tool `--diagnostic-port LISTEN_PATH,connect`), and for each connection
the tool makes reads its one request, prints it decoded (CollectTracing 1 to 5: buffer, format, rundown,
stackwalk, each provider's name, keywords, level and arguments; any other command by name) on standard
output, one line each (a JSON object with --json), then relays the request to RUNTIME_SOCKET and the
runtime's answer back until either side closes. Runs until killed.

Used to learn what dotnet-trace sends for each of its profiles (eventpipe/session-config.c's table of
the stock tool's profiles, docs/proxy.md), rather than guessing from its documentation.
"""
import json
import os
import socket
import struct
import sys
import threading

MAGIC = b"DOTNET_IPC_V1\0"
NAMES = {(2, 1): "StopTracing", (2, 2): "CollectTracing", (2, 3): "CollectTracing2", (2, 4): "CollectTracing3",
         (2, 5): "CollectTracing4", (2, 6): "CollectTracing5", (2, 7): "CollectTracing6",
         (4, 0): "ProcessInfo", (4, 1): "ResumeRuntime", (4, 2): "ProcessEnvironment", (4, 4): "ProcessInfo2",
         (4, 8): "ProcessInfo3", (1, 1): "GenerateCoreDump", (1, 2): "GenerateCoreDump2",
         (1, 3): "GenerateCoreDump3"}


def read_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return values[0] if len(values) == 1 else values

    def string(self):
        n = self.take("<I")
        if n == 0:
            return None
        units = self.data[self.pos:self.pos + 2 * n]
        self.pos += 2 * n
        return units.decode("utf-16-le").rstrip("\0")


def decode_tracing(version, payload):
    rd = Reader(payload)
    out = {}
    if version == 5:
        out["session_type"] = rd.take("<I")
    out["buffer_mb"], out["format"] = rd.take("<II")
    if version in (2, 3):
        out["rundown"] = bool(rd.take("<B"))
    elif version >= 4:
        out["rundown_keyword"] = hex(rd.take("<Q"))
    if version >= 3:
        out["stackwalk"] = bool(rd.take("<B"))
    providers = []
    for _ in range(rd.take("<I")):
        keywords, level = rd.take("<QI")
        name = rd.string()
        arguments = rd.string()
        provider = {"name": name, "keywords": hex(keywords), "level": level, "arguments": arguments}
        if version == 5:
            enable, n = rd.take("<BI")
            provider["filter"] = {"enable": bool(enable), "ids": [rd.take("<I") for _ in range(n)]}
        providers.append(provider)
    out["providers"] = providers
    return out


def describe(header, payload):
    command_set, command_id = header[16], header[17]
    name = NAMES.get((command_set, command_id), f"({command_set},{command_id})")
    out = {"command": name}
    if command_set == 2 and 2 <= command_id <= 6:
        out.update(decode_tracing(command_id - 1, payload))
    return out


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve(tool, runtime_path, as_json):
    with tool:
        header = read_exactly(tool, 20)
        if header[:14] != MAGIC:
            return
        size = struct.unpack_from("<H", header, 14)[0]
        payload = read_exactly(tool, size - 20)
        described = describe(header, payload)
        print(json.dumps(described) if as_json else described, flush=True)
        runtime = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        runtime.connect(runtime_path)
        with runtime:
            runtime.sendall(header + payload)
            back = threading.Thread(target=pump, args=(runtime, tool), daemon=True)
            back.start()
            pump(tool, runtime)
            back.join()


def main():
    listen_path, runtime_path = sys.argv[1], sys.argv[2]
    as_json = "--json" in sys.argv[3:]
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(listen_path)
    os.chmod(listen_path, 0o666)
    server.listen(8)
    while True:
        tool, _ = server.accept()
        threading.Thread(target=serve, args=(tool, runtime_path, as_json), daemon=True).start()


if __name__ == "__main__":
    main()
