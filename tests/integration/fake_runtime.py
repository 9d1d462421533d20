# SPDX-License-Identifier: LGPL-2.1-or-later
"""A process that listens where a .NET runtime would, and misbehaves on purpose.

Modes: silent (accepts, reads, never answers), garbage (answers with bytes that
are not a reply), close (accepts and hangs up), dumper:undumpable (a dumper that set
itself not dumpable), env:short, env:stall, env:count, env:huge
(an environment block that ends early, stops halfway, or miscounts), dumper (writes a small ELF core
where a GenerateCoreDump request says and answers OK, as a runtime running with
credentials the real one refuses to serve under would), trace:FILE (answers
CollectTracing with the stream in FILE, made by hand, and ends it on
StopTracing), stream:FILE (as trace:FILE, but ends the stream right after the file), rebind:FILE:SECONDS (as
stream:FILE, and after each stream closes its listener, waits SECONDS and binds it again: the same process,
re-bound; LOG.rebinds counts the re-binds), flood:HEAD:BLOCK (answers CollectTracing with the stream in HEAD, then
the bytes of BLOCK again and again as fast as they are read, until the agent hangs up;
LOG.flood then holds the bytes sent and the seconds it took), trickle:SECONDS[:BURST] (a dumper that writes its core a byte at a time,
SECONDS apart, creating LOG.trickling once the first byte is written, and never answers if
the agent cuts it; with BURST, the BURST bytes after the first go at once half a second in),
stream-trickle:FILE:SECONDS (sessions as stream:FILE, dumps as trickle:SECONDS),
heapdump:FILE:HEAD:BLOCK:COUNT:TAIL (sessions as stream:FILE, but a session of the runtime's own provider,
as a heap dump's is, gets the stream in HEAD, the bytes of BLOCK COUNT times, those of TAIL, and its end;
LOG.heapdump then holds the bytes of the blocks sent), gated (a dumper
that writes the first byte of its core, creates LOG.trickling, and writes the rest and answers OK only once
LOG.go exists: a dump a test holds in progress for as long as it needs), regain:UID:GID[:undumpable] (runs as UID with root as its saved uid and
takes root back on SIGUSR1, turns itself not dumpable on SIGUSR2; answers "not
implemented"), renamer:NAME:OTHER (names itself NAME by rewriting its argv[0] in
place, as setproctitle() does, and on each SIGUSR1 switches to the other name and
prints "renamed NAME"; answers ProcessEnvironment with one variable, and
GenerateCoreDump as dumper does), info:huge (answers ProcessInfo, 2 and 3 with strings as long as one reply holds: a command
line, an OS and an entry assembly of 10,800 euro signs each, 32,400 bytes of UTF-8). Everything received is
appended to LOG so tests can check what reached the "runtime".

mounter:ATTACK:VICTIM runs in a user and mount namespace of its own (unshare
-Urm) and, when a GenerateCoreDump request arrives, first mounts VICTIM where
the agent will work: "inside" (a new directory in the staging directory, VICTIM
bound onto it), "over-dir" (VICTIM bound onto the staging directory itself) or
"over-fifo" (VICTIM, a file, bound onto the dump's path). It then writes a core
to the dump's path, answers OK, and appends what it managed to LOG.mounts as
one JSON object, so tests can prove the attack was in place.
"""
import ctypes
import json
import os
import signal
import socket
import struct
import sys
import time

# A whole ELF core: the header, one program header, and the 4000 bytes of its one segment.
CORE = (b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HHIQQQIHHHHHH", 4, 62, 1, 0, 64, 0, 0, 64, 56, 1, 0, 0, 0)
        + struct.pack("<IIQQQQQQ", 1, 4, 120, 0, 0, 4000, 4000, 1) + bytes(4000))

mode, log = sys.argv[1], sys.argv[2]
MS_BIND = 4096
libc = ctypes.CDLL(None, use_errno=True)

if mode.startswith("regain:"):
    # started as root, it runs as UID:GID with root kept as its saved ids, and dumpable, so that
    # /proc shows UID; on SIGUSR1 it takes root back as its effective uid, as a service that
    # dropped privileges only for a while may
    # (with :undumpable it stays as the id change left it, not dumpable: its /proc files are root's)
    _, uid, gid, *rest = mode.split(":")
    os.setgroups([])
    os.setresgid(int(gid), int(gid), 0)
    os.setresuid(int(uid), int(uid), 0)
    if rest != ["undumpable"]:
        libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE

    def regain(signum, frame):
        os.seteuid(0)
        publish(".regained", open("/proc/self/status").read())

    def undumpable(signum, frame):
        libc.prctl(4, 0, 0, 0, 0)
        open(log + ".undumpable", "w").close()

    signal.signal(signal.SIGUSR1, regain)
    signal.signal(signal.SIGUSR2, undumpable)

if mode.startswith("renamer:"):
    # the kernel shows the bytes between arg_start and arg_end (/proc/PID/stat fields 48 and 49) as the
    # command line; argv[0] is overwritten there, NUL-padded, and the rest left as it is
    names = mode.split(":")[1:3]
    fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
    arg_start = int(fields[45])
    argv0_len = open("/proc/self/cmdline", "rb").read().index(b"\0")
    assert all(len(name) <= argv0_len for name in names), (names, argv0_len)

    def rename(name):
        ctypes.memmove(arg_start, name.encode().ljust(argv0_len, b"\0"), argv0_len)
        assert open("/proc/self/cmdline", "rb").read().split(b"\0")[0] == name.encode()

    def switch(signum, frame):
        names.reverse()
        rename(names[0])
        print(f"renamed {names[0]}", flush=True)

    rename(names[0])
    signal.signal(signal.SIGUSR1, switch)

if mode == "dumper:undumpable":
    # a process that made itself not dumpable (PR_SET_DUMPABLE 0): its files in /proc are root's
    libc.prctl(4, 0, 0, 0, 0)

stat = open("/proc/self/stat").read()
start = int(stat[stat.rindex(")") + 2:].split()[19])
socket_path = os.path.join(os.environ.get("TMPDIR") or "/tmp", f"dotnet-diagnostic-{os.getpid()}-{start}-socket")

os.umask(0o077)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(socket_path)
listener.listen(16)
print(f"listening pid={os.getpid()}", flush=True)


def publish(suffix, text):
    """LOG+@suffix holding @text, whole from its first appearance: a test reads it while this runtime runs, and a
    file rewritten in place reads empty between its truncation and its write (int("") failed a test)."""
    with open(log + suffix + ".part", "w") as f:
        f.write(text)
    os.replace(log + suffix + ".part", log + suffix)


def bind_mount(source, target):
    if libc.mount(source.encode(), target.encode(), None, MS_BIND, None) != 0:
        raise OSError(ctypes.get_errno(), f"mount {source} on {target}")


def attack(kind, victim, dump_path):
    """Put VICTIM where the agent will work; return what was in place."""
    staging = os.path.dirname(dump_path)
    done = {"attack": kind, "staging": staging}
    try:
        if kind == "inside":
            os.mkdir(os.path.join(staging, "evil"))
            bind_mount(victim, os.path.join(staging, "evil"))
        elif kind == "over-dir":
            bind_mount(victim, staging)
        elif kind == "over-fifo":
            if not os.path.exists(dump_path):  # an agent that lets the runtime create the file
                open(dump_path, "w").close()
            bind_mount(victim, dump_path)
        done["mounted"] = True
    except OSError as e:
        done["mounted"] = False
        done["error"] = str(e)
    return done


held = []


def serve(conn, data):
    """Answers one connection's request @data as the mode says."""
    global listener
    if mode.startswith("renamer:") and len(data) >= 20 and data[16] == 0x04 and data[17] == 0x02:
        pair = "RENAMER_VARIABLE=value".encode("utf-16-le") + b"\0\0"
        block = struct.pack("<II", 1, len(pair) // 2) + pair
        conn.sendall(b"DOTNET_IPC_V1\x00" + struct.pack("<HBBH", 26, 0xFF, 0, 0) + struct.pack("<IH", len(block), 0))
        conn.sendall(block)
        conn.close()
    elif mode.startswith(("trickle:", "stream-trickle:")) and len(data) > 24 and data[16] == 0x01:
        # a runtime its user controls, slow on purpose: it meets the first-byte deadline, then trickles. The
        # sleeps are the misbehaviour itself, the writer's pace, not waits for anything: a loaded machine only
        # makes it slower, which the tests' rate and stall cuts take the same way. The burst's 0.5 s lie well
        # inside the first 3 s stretch the tests measure over (--dump-stall-timeout 3)
        units = int.from_bytes(data[20:24], "little")
        path = data[24:24 + 2 * (units - 1)].decode("utf-16-le")
        pause, burst = (mode.split(":")[1 if mode.startswith("trickle:") else 2:] + ["0"])[:2]
        try:
            with open(path, "wb", buffering=0) as f:
                f.write(CORE[:1])
                open(log + ".trickling", "w").close()
                if int(burst):
                    time.sleep(0.5)
                    f.write(CORE[1:1 + int(burst)])
                for i in range(1 + int(burst), len(CORE)):
                    time.sleep(float(pause))
                    f.write(CORE[i:i + 1])
            conn.sendall(b"DOTNET_IPC_V1\x00" + bytes([24, 0, 0xFF, 0, 0, 0]) + bytes(4))
        except OSError:  # the agent cut the dump: its FIFO is gone
            pass
        conn.close()
    elif mode == "gated" and len(data) > 24 and data[16] == 0x01:
        units = int.from_bytes(data[20:24], "little")
        path = data[24:24 + 2 * (units - 1)].decode("utf-16-le")
        try:
            with open(path, "wb", buffering=0) as f:
                f.write(CORE[:1])
                open(log + ".trickling", "w").close()
                while not os.path.exists(log + ".go"):
                    time.sleep(0.05)  # a poll, with no bound: the test lets it go, or kills it as it ends
                f.write(CORE[1:])
            conn.sendall(b"DOTNET_IPC_V1\x00" + bytes([24, 0, 0xFF, 0, 0, 0]) + bytes(4))
        except OSError:  # the agent cut the dump: its FIFO is gone
            pass
        conn.close()
    elif mode.split(":")[0] in ("dumper", "mounter", "renamer") and len(data) > 24 and data[16] == 0x01:
        units = int.from_bytes(data[20:24], "little")
        path = data[24:24 + 2 * (units - 1)].decode("utf-16-le")
        if mode.startswith("mounter:"):
            _, kind, victim = mode.split(":", 2)
            done = attack(kind, victim, path)
            try:
                with open(path, "wb") as f:
                    f.write(CORE)
                done["wrote"] = True
            except OSError as e:
                done["wrote"] = str(e)
            with open(log + ".mounts", "a") as f:
                f.write(json.dumps(done) + "\n")
        else:
            with open(path, "wb") as f:
                f.write(CORE)
        conn.sendall(b"DOTNET_IPC_V1\x00" + bytes([24, 0, 0xFF, 0, 0, 0]) + bytes(4))
        conn.close()
    elif mode == "garbage":
        conn.sendall(b"DOTNET_IPC_V1\x00" + b"\xff" * 30)
        conn.close()
    elif mode.startswith("env:"):
        # ProcessEnvironment's OK reply and a block that breaks it: "short" ends 10 bytes early,
        # "stall" sends half and waits, "count" says one variable more than it holds, "huge"
        # announces 0xFFFFFFF0 bytes
        kind = mode.split(":", 1)[1]
        pair = "SECRET_LOOKING_TOKEN=fake-value".encode("utf-16-le") + b"\0\0"
        block = struct.pack("<II", 2 if kind == "count" else 1, len(pair) // 2) + pair
        announced = 0xFFFFFFF0 if kind == "huge" else len(block) + (10 if kind == "short" else 0)
        conn.sendall(b"DOTNET_IPC_V1\x00" + struct.pack("<HBBH", 26, 0xFF, 0, 0) +
                     struct.pack("<IH", announced, 0))
        conn.sendall(block[:len(block) // 2] if kind == "stall" else block)
        if kind == "stall":
            held.append(conn)
        else:
            conn.close()
    elif mode.startswith("trace:"):
        # a session's stream made by hand: CollectTracing (and its later versions) gets OK, a session
        # id and the bytes of the file named, its connection held open until StopTracing
        if len(data) >= 20 and data[16] == 0x02 and data[17] >= 0x02:
            conn.sendall(b"DOTNET_IPC_V1\x00" + struct.pack("<HBBH", 28, 0xFF, 0, 0) + struct.pack("<Q", 77))
            with open(mode.split(":", 1)[1], "rb") as f:
                try:
                    conn.sendall(f.read())
                except OSError:
                    pass
            held.append(conn)
        elif len(data) >= 20 and data[16] == 0x02 and data[17] == 0x01:  # StopTracing: the streams end
            conn.sendall(b"DOTNET_IPC_V1\x00" + struct.pack("<HBBH", 28, 0xFF, 0, 0) + struct.pack("<Q", 77))
            conn.close()
            for stream in held:
                stream.close()
            held.clear()
        else:  # anything else: not implemented (E_NOTIMPL)
            conn.sendall(b"DOTNET_IPC_V1\x00" + struct.pack("<HBBH", 24, 0xFF, 0xFF, 0) + struct.pack("<I", 0x80004001))
            conn.close()
    elif mode.startswith("heapdump:") and len(data) >= 20 and data[16] == 0x02 and data[17] >= 0x02 and \
            "Microsoft-Windows-DotNETRuntime".encode("utf-16-le") in data:
        # a heap dump's session: the head, the block COUNT times, the tail, as long as anyone reads
        _, _, head_path, block_path, count, tail_path = mode.split(":", 5)
        head, block, tail = (open(path, "rb").read() for path in (head_path, block_path, tail_path))
        conn.sendall(b"DOTNET_IPC_V1\x00" + struct.pack("<HBBH", 28, 0xFF, 0, 0) + struct.pack("<Q", 77))
        sent = 0
        try:
            conn.sendall(head)
            for _ in range(int(count)):
                conn.sendall(block)
                sent += len(block)
            conn.sendall(tail)
        except OSError:  # the agent hung up
            pass
        publish(".heapdump", f"{sent}\n")
        conn.close()
    elif mode.startswith(("stream:", "rebind:", "stream-trickle:", "heapdump:")) and len(data) >= 20 and \
            data[16] == 0x02 and data[17] >= 0x02:
        conn.sendall(b"DOTNET_IPC_V1\x00" + struct.pack("<HBBH", 28, 0xFF, 0, 0) + struct.pack("<Q", 77))
        with open(mode.split(":")[1], "rb") as f:
            try:
                conn.sendall(f.read())
            except OSError:
                pass
        conn.close()
        if mode.startswith("rebind:"):
            # the same process closes its listener and binds it again, as a runtime's host may
            listener.close()
            os.unlink(socket_path)
            time.sleep(float(mode.split(":")[2]))
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(socket_path)
            listener.listen(16)
            rebinds = int(open(log + ".rebinds").read()) if os.path.exists(log + ".rebinds") else 0
            publish(".rebinds", str(rebinds + 1))
    elif mode.startswith("flood:") and len(data) >= 20 and data[16] == 0x02 and data[17] >= 0x02:
        _, head_path, block_path = mode.split(":", 2)
        head, block = open(head_path, "rb").read(), open(block_path, "rb").read()
        conn.sendall(b"DOTNET_IPC_V1\x00" + struct.pack("<HBBH", 28, 0xFF, 0, 0) + struct.pack("<Q", 77))
        sent, start = 0, time.monotonic()
        try:
            conn.sendall(head)
            sent += len(head)
            while True:
                conn.sendall(block)
                sent += len(block)
        except OSError:  # the agent hung up
            pass
        publish(".flood", f"{sent} {time.monotonic() - start:.3f}\n")
        conn.close()
    elif mode == "info:huge" and len(data) >= 20 and data[16] == 0x04 and data[17] in (0x00, 0x04, 0x08):
        def ipc_string(text):
            raw = (text + "\0").encode("utf-16-le")
            return struct.pack("<I", len(raw) // 2) + raw
        big = "\u20ac" * 10800
        payload = (struct.pack("<I", 1) if data[17] == 0x08 else b"") + struct.pack("<Q", os.getpid()) + bytes(16)
        payload += ipc_string("cmd " + big) + ipc_string("os " + big) + ipc_string("x64")
        if data[17] != 0x00:
            payload += ipc_string("ea " + big) + ipc_string("10.0.0")
        if data[17] == 0x08:
            payload += ipc_string("linux-x64")
        conn.sendall(b"DOTNET_IPC_V1\x00" + struct.pack("<HBBH", 20 + len(payload), 0xFF, 0, 0) + payload)
        conn.close()
    elif mode.startswith(("regain:", "renamer:")):  # whatever else it is asked: not implemented (E_NOTIMPL)
        conn.sendall(b"DOTNET_IPC_V1\x00" + struct.pack("<HBBH", 24, 0xFF, 0xFF, 0) + struct.pack("<I", 0x80004001))
        conn.close()
    else:
        held.append(conn)  # silent: keep it open, answer nothing


while True:
    conn, _ = listener.accept()
    if mode == "close":
        conn.close()
        continue
    try:
        data = conn.recv(65536)
        if not data:
            # a client that hung up unasked, as an agent does that finds another process listening than the one
            # it pinned: nothing to answer
            conn.close()
            continue
        with open(log, "ab") as f:
            f.write(data)
        serve(conn, data)
    except (BrokenPipeError, ConnectionResetError):
        # a client that hung up mid-answer: a runtime serves the next one all the same. Before, this process died
        # of it, and with it the connection it held for another (env:stall's, read as closed early)
        conn.close()
