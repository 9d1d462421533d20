#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Relay throughput: a heavy EventPipe session read through dsagent against the same session read
directly from the runtime, in one run.

The target emits Marker events as fast as it can (--emit-events 0), so the
runtime produces more than any reader takes and the reader's speed decides the
bytes per second. Both readers are the same Python loop (os.read of 1 MiB into
a counter): the direct one reads the runtime's socket after CollectTracing2,
as root with sudo would; the agent's one reads the pipe dsagent hands over
after its policy, audit and checks, while dsagent splices the runtime's socket
into that pipe. Runs alternate (agent, direct, agent, ...), each for the same
duration; every session is stopped with StopTracing and drained to its end.

Prints the median bytes per second of each path, their ratio (agent/direct;
the target is at least 0.95), and the agent's CPU time (user+system, from
/proc/PID/stat) per GiB relayed.

Usage (as root): bench/bench-trace.py BUILD_DIR [--seconds 5] [--runs 5]
"""
import argparse
import array
import os
import shutil
import socket
import statistics
import struct
import subprocess
import tempfile
import time

PROVIDER = "Dsagent-TestTarget"
WIRE_REQUEST_TRACE, WIRE_REPLY_STREAM, WIRE_REPLY_DONE, WIRE_REPLY_ERROR = 0x0006, 0x8006, 0x8002, 0x8003
TAG_PID, TAG_DURATION, TAG_PROVIDERS = 1, 21, 29
CHUNK = 1 << 20


def ipc_string(s):
    data = (s + "\0").encode("utf-16-le")
    return struct.pack("<I", len(data) // 2) + data


def ipc_message(command, payload):
    return b"DOTNET_IPC_V1\0" + struct.pack("<HBBH", 20 + len(payload), command >> 8, command & 0xFF, 0) + payload


def ipc_reply(sock):
    header = b""
    while len(header) < 20:
        chunk = sock.recv(20 - len(header))
        if not chunk:
            raise SystemExit("the runtime closed the connection")
        header += chunk
    size, command_set, command_id = struct.unpack_from("<HBB", header, 14)
    payload = b""
    while len(payload) < size - 20:
        payload += sock.recv(size - 20 - len(payload))
    if (command_set, command_id) != (0xFF, 0x00):
        raise SystemExit(f"runtime error {payload.hex()}")
    return payload


def runtime_socket(pid, tmpdir):
    start_time = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]
    return os.path.join(tmpdir, f"dotnet-diagnostic-{pid}-{start_time}-socket")


def drain(fd, seconds, stop):
    """Reads @fd for @seconds, calls @stop, then reads to the end. Returns (bytes in the timed part, total)."""
    timed = total = 0
    deadline = time.monotonic() + seconds
    stopped = False
    while True:
        data = os.read(fd, CHUNK)
        if not data:
            return timed, total
        total += len(data)
        if not stopped:
            timed += len(data)
            if time.monotonic() >= deadline:
                stop()
                stopped = True


def direct_run(path, seconds):
    stream = socket.socket(socket.AF_UNIX)
    stream.connect(path)
    payload = struct.pack("<IIBI", 256, 1, 1, 1) + struct.pack("<QI", 2**64 - 1, 4) + ipc_string(PROVIDER) + \
        struct.pack("<I", 0)
    stream.sendall(ipc_message(0x0203, payload))
    session_id = struct.unpack("<Q", ipc_reply(stream))[0]

    def stop():
        control = socket.socket(socket.AF_UNIX)
        control.connect(path)
        control.sendall(ipc_message(0x0201, struct.pack("<Q", session_id)))
        control.close()  # the runtime answers after the stream ended; nobody needs that answer here

    start = time.monotonic()
    timed, _ = drain(stream.fileno(), seconds, stop)
    elapsed = time.monotonic() - start
    stream.close()
    return timed, elapsed


def wire_frame(msg_type, fields):
    payload = b"".join(struct.pack("<HI", tag, len(value)) + value for tag, value in fields)
    return b"DSAG" + struct.pack("<HHI", 1, msg_type, len(payload)) + payload


def wire_read_frame(sock):
    fds = array.array("i")
    header, ancillary, _, _ = sock.recvmsg(12, socket.CMSG_SPACE(4))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:4])
    _, _, msg_type, size = struct.unpack("<4sHHI", header)
    body = b""
    while len(body) < size:
        body += sock.recv(size - len(body))
    return msg_type, (fds[0] if fds else None)


def agent_run(agent_socket, pid, seconds):
    client = socket.socket(socket.AF_UNIX)
    client.connect(agent_socket)
    client.sendall(wire_frame(WIRE_REQUEST_TRACE, [(TAG_PID, struct.pack("<I", pid)),
                                                   (TAG_PROVIDERS, PROVIDER.encode())]))
    msg_type, pipe_fd = wire_read_frame(client)
    if msg_type != WIRE_REPLY_STREAM or pipe_fd is None:
        raise SystemExit(f"the agent refused the session (frame 0x{msg_type:04x})")
    start = time.monotonic()
    timed, total = drain(pipe_fd, seconds, lambda: client.shutdown(socket.SHUT_WR))
    elapsed = time.monotonic() - start
    os.close(pipe_fd)
    while True:
        msg_type, _ = wire_read_frame(client)
        if msg_type in (WIRE_REPLY_DONE, WIRE_REPLY_ERROR):
            break
    client.close()
    if msg_type != WIRE_REPLY_DONE:
        raise SystemExit("the agent's session ended in an error")
    return timed, elapsed, total


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--runs", type=int, default=5)
    opts = ap.parse_args()
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    app_dir = subprocess.run([os.path.join(source, "tests/target-app/build.sh")], check=True,
                             stdout=subprocess.PIPE, text=True).stdout.strip()
    work = tempfile.mkdtemp(prefix="dsagent-bench-trace-")
    target = agent = None
    try:
        target = subprocess.Popen(["env", "-i", f"TMPDIR={work}", "DOTNET_CLI_TELEMETRY_OPTOUT=1",
                                   os.path.join(app_dir, "DsTestTarget"), "--emit-events", "0"],
                                  stdout=subprocess.PIPE, text=True)
        if not target.stdout.readline().startswith("ready"):
            raise SystemExit("the target did not start")
        policy = os.path.join(work, "policy.toml")
        open(policy, "w").write("")
        agent_socket = os.path.join(work, "dsagent.sock")
        agent = subprocess.Popen([os.path.join(opts.build, "agent", "dsagent"), "--listen", agent_socket, "--listen-mode", "0666",
                                  "--audit", "stderr", "--policy", policy, "--runtime-dir", os.path.join(work, "run")],
                                 stderr=subprocess.DEVNULL)
        while not os.path.exists(agent_socket):
            time.sleep(0.05)
        path = runtime_socket(target.pid, work)

        rates = {"agent": [], "direct": []}
        agent_bytes, agent_cpu = 0, 0.0
        for run in range(opts.runs):
            before = cpu_seconds(agent.pid)
            timed, elapsed, total = agent_run(agent_socket, target.pid, opts.seconds)
            agent_cpu += cpu_seconds(agent.pid) - before
            agent_bytes += total
            rates["agent"].append(timed / elapsed)
            timed, elapsed = direct_run(path, opts.seconds)
            rates["direct"].append(timed / elapsed)
            print(f"run {run + 1}: agent {rates['agent'][-1] / 2**20:8.1f} MiB/s   "
                  f"direct {rates['direct'][-1] / 2**20:8.1f} MiB/s", flush=True)

        agent_median = statistics.median(rates["agent"])
        direct_median = statistics.median(rates["direct"])
        print(f"median agent  {agent_median / 2**20:.1f} MiB/s")
        print(f"median direct {direct_median / 2**20:.1f} MiB/s")
        print(f"ratio agent/direct {agent_median / direct_median:.3f} (target >= 0.95)")
        print(f"agent CPU {agent_cpu / (agent_bytes / 2**30):.3f} s per GiB relayed "
              f"({agent_cpu:.2f} s for {agent_bytes / 2**30:.2f} GiB, whole sessions)")
    finally:
        for proc in (agent, target):
            if proc and proc.poll() is None:
                proc.kill()
                proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
