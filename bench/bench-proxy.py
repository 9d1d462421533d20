#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""dsctl port against the runtime's own socket, in one run: trace throughput and ProcessInfo latency.

A tool that speaks the .NET diagnostic IPC protocol can talk to the runtime's
socket itself (root, or the target's own user), or to the socket `dsctl port`
serves, which carries each connection's one message to dsagent; the agent
decides it, re-encodes it, calls the runtime and relays the answer. This
benchmark is the same client code on both paths:

- direct: as root, on $TMPDIR/dotnet-diagnostic-PID-STARTTIME-socket;
- proxy:  as the target's user (dsbench), on the socket of a `dsctl port PID`
          run by that user (owner access, the built-in rule).

1. ProcessInfo latency, first, against an idle target of its own (so that
   no emitter takes a CPU): ProcessInfo2 (set 4, id 4) on a fresh connection,
   timed from socket() to the reply's last byte. A third path, "agent", is
   the request exactly as dsctl port forwards it (WIRE_REQUEST_IPC, sent by
   dsbench straight to the agent's socket, timed to the frame that carries
   the answer), so that proxy - agent is what the port itself adds.
   --iterations per path after --warmup, interleaved request by request,
   each path first, second and third in turn. Every reply must be OK, name
   the pid, and carry the same payload on all paths. The port's CPU time per
   request is reported too.
2. Trace throughput, against a second target that emits its Marker event as
   fast as it can (--emit-events 0). Each round is one CollectTracing2 session (same request
   bytes on both paths: --providers, 256 MB buffer, rundown), read by one
   loop of os.read(fd, 1 MiB) for --seconds from the OK reply, then stopped
   with StopTracing on a second connection and read to its end. The rate is
   the bytes read in the timed window over the window. Rounds alternate the
   path and which goes first (--rounds of each); medians and proxy/direct,
   and the median of each round's proxy/direct (sessions next to each other).
   CPU time (utime+stime from /proc) of the agent and its workers, of the
   dsctl port process and of the target is taken around each session.

On a shared machine the other processes' load moves both numbers, so each
phase and each session reports how many CPUs the rest of the machine kept
busy (/proc/stat's busy time less the benchmark's own processes').

Every reading runs in a forked child (root for direct, dsbench for proxy), so
that both paths have the same process structure. The agent runs with the
budget keys of bench-env.sh and a max_trace_size that never binds; its audit
records are discarded.

Usage (as root): bench/bench-proxy.py BUILD_DIR [--seconds 5] [--rounds 7] [--iterations 500]
                     [--warmup 50] [--providers SPEC]
"""
import argparse
import ctypes
import json
import os
import pwd
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib

USER = "dsbench"
CHUNK = 1 << 20
PR_SET_PDEATHSIG = 1
TIMEOUT = 60  # seconds any one read may wait before the run is abandoned
# Marker events as fast as the app makes them; the runtime's GC, exception, loader, JIT, contention and
# threading events at verbose (the emitter's boxing makes GCs and allocation ticks); the sample profiler.
DEFAULT_PROVIDERS = ("Dsagent-TestTarget:0xFFFFFFFFFFFFFFFF:5,"
                     "Microsoft-Windows-DotNETRuntime:0x1C019:5,"
                     "Microsoft-DotNETCore-SampleProfiler:0:5")
WIRE_REQUEST_IPC, WIRE_REPLY_DONE, WIRE_REPLY_PROGRESS, WIRE_REPLY_IPC = 0x0009, 0x8002, 0x8008, 0x8009
WIRE_TAG_PID, WIRE_TAG_MESSAGE, WIRE_TAG_PROGRESS, WIRE_TAG_IPC_MESSAGE = 1, 15, 35, 37
POLICY = """[agent]
max_requests_per_second = 100000
max_request_burst = 1000000
max_trace_size = "1T"
"""


# ---- the diagnostic IPC protocol ----

def ipc_string(s):
    data = (s + "\0").encode("utf-16-le")
    return struct.pack("<I", len(data) // 2) + data


def ipc_message(command_set, command_id, payload=b""):
    return b"DOTNET_IPC_V1\0" + struct.pack("<HBBH", 20 + len(payload), command_set, command_id, 0) + payload


def collect_tracing2(spec, buffer_mb=256):
    providers = []
    for item in spec.split(","):
        parts = item.split(":")
        name = parts[0]
        keywords = int(parts[1], 0) if len(parts) > 1 and parts[1] else 0xFFFFFFFFFFFFFFFF
        level = int(parts[2]) if len(parts) > 2 and parts[2] else 4
        providers.append(struct.pack("<QI", keywords, level) + ipc_string(name) + struct.pack("<I", 0))
    payload = struct.pack("<IIBI", buffer_mb, 1, 1, len(providers)) + b"".join(providers)
    return ipc_message(2, 3, payload)


def unix_socket():
    """A blocking socket whose waits the kernel bounds (SO_RCVTIMEO, SO_SNDTIMEO): socket.settimeout()
    would add a poll() to every exchange and make the fd non-blocking for os.read()."""
    s = socket.socket(socket.AF_UNIX)
    for option in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):
        s.setsockopt(socket.SOL_SOCKET, option, struct.pack("ll", TIMEOUT, 0))
    return s


def recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise RuntimeError(f"connection closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def read_reply(sock):
    """One reply: (ok, payload). Raises when the connection ends early."""
    header = recv_exactly(sock, 20)
    if header[:14] != b"DOTNET_IPC_V1\0":
        raise RuntimeError(f"bad magic {header[:14]!r}")
    size, command_set, command_id = struct.unpack_from("<HBB", header, 14)
    payload = recv_exactly(sock, size - 20) if size > 20 else b""
    if command_set != 0xFF:
        raise RuntimeError(f"reply of command set 0x{command_set:02x}")
    return command_id == 0x00, payload


def runtime_socket(pid, tmpdir):
    start_time = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]
    return os.path.join(tmpdir, f"dotnet-diagnostic-{pid}-{start_time}-socket")


# ---- children of the right user ----

def become(user):
    """In a forked child: @user's ids (None: stay root), and death with the benchmark."""
    if user is not None:
        pw = pwd.getpwnam(user)
        os.setgroups([])
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)
    # after the uid change, which clears it
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def in_child(user, fn, *args):
    """Runs fn(*args) in a forked child as @user (None: root); returns its JSON-able result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            become(user)
            out = {"ok": True, "result": fn(*args)}
        except BaseException as e:  # everything goes back to the parent
            out = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    out = json.loads(data) if data else {"ok": False, "error": "the child died"}
    if not out["ok"]:
        raise SystemExit(f"bench-proxy: {out['error']}")
    return out["result"]


# ---- 1. trace throughput ----

def trace_session(path, request, seconds):
    """One session on @path: the timed window's bytes, then stop and drain. Runs in a child."""
    stream = unix_socket()
    stream.connect(path)
    stream.sendall(request)
    ok, payload = read_reply(stream)
    if not ok or len(payload) != 8:
        raise RuntimeError(f"CollectTracing2 refused: {payload.hex()}")
    session_id = struct.unpack("<Q", payload)[0]
    fd = stream.fileno()
    start = time.monotonic()
    deadline = start + seconds
    timed = 0
    head = b""
    now = start
    while now < deadline:
        data = os.read(fd, CHUNK)
        if not data:
            raise RuntimeError("the stream ended before it was stopped")
        if len(head) < 8:
            head += data[:8]
        timed += len(data)
        now = time.monotonic()
    window = now - start
    if not head.startswith(b"Nettrace"):
        raise RuntimeError(f"the stream does not start as a nettrace: {head!r}")
    control = unix_socket()
    control.connect(path)
    stopped = time.monotonic()
    control.sendall(ipc_message(2, 1, struct.pack("<Q", session_id)))
    rest = 0
    while True:
        data = os.read(fd, CHUNK)
        if not data:
            break
        rest += len(data)
    ended = time.monotonic()
    stream.close()
    # the runtime answers StopTracing once the stream has ended; the port at once
    ok, payload = read_reply(control)
    control.close()
    if not ok or payload != struct.pack("<Q", session_id):
        raise RuntimeError(f"StopTracing refused: {payload.hex()}")
    return {"timed": timed, "window": window, "rest": rest, "stop_to_end": ended - stopped}


def cpu_seconds(pid, with_children=False):
    """utime+stime of @pid (its threads, dead ones too), and of its live children if asked."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    if with_children:
        try:
            children = open(f"/proc/{pid}/task/{pid}/children").read().split()
        except OSError:
            children = []
        total += sum(cpu_seconds(int(c)) for c in children)
    return total


def machine_busy_seconds():
    """CPU time all CPUs spent busy (not idle, not waiting for I/O), from /proc/stat."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


class OtherLoad:
    """How many CPUs processes other than the benchmark's kept busy while it measured: the machine's
    busy time less this process's, its reaped children's and that of the live processes in @pids
    (the agent with its workers, the ports, the targets)."""

    def __init__(self, pids):
        self.pids = pids
        self.start = self._sample()

    def _sample(self):
        t = os.times()
        ours = t.user + t.system + t.children_user + t.children_system
        ours += sum(cpu_seconds(pid, with_children=True) for pid in self.pids)
        return time.monotonic(), machine_busy_seconds(), ours

    def cpus(self):
        end = self._sample()
        wall = end[0] - self.start[0]
        return max(0.0, (end[1] - self.start[1]) - (end[2] - self.start[2])) / wall if wall > 0 else 0.0


# ---- 2. ProcessInfo latency ----

def info_exchange(path, request):
    """One ProcessInfo on a fresh connection: (nanoseconds, payload)."""
    started = time.monotonic_ns()
    s = unix_socket()
    s.connect(path)
    s.sendall(request)
    ok, payload = read_reply(s)
    elapsed = time.monotonic_ns() - started
    s.close()
    if not ok:
        raise RuntimeError(f"ProcessInfo refused: {payload.hex()}")
    return elapsed, payload


def wire_frame(msg_type, fields):
    payload = b"".join(struct.pack("<HI", tag, len(value)) + value for tag, value in fields)
    return b"DSAG" + struct.pack("<HHI", 1, msg_type, len(payload)) + payload


def wire_fields(body):
    fields, at = {}, 0
    while at < len(body):
        tag, size = struct.unpack_from("<HI", body, at)
        fields[tag] = body[at + 6:at + 6 + size]
        at += 6 + size
    return fields


def agent_exchange(path, request):
    """The same request as dsctl port sends it (WIRE_REQUEST_IPC), straight to the agent: (ns, payload).
    Timed to the frame that carries the runtime's answer, which is when the port writes it to the tool."""
    started = time.monotonic_ns()
    s = unix_socket()
    s.connect(path)
    s.sendall(request)
    reply = None
    while True:
        header = recv_exactly(s, 12)
        _, _, msg_type, size = struct.unpack("<4sHHI", header)
        fields = wire_fields(recv_exactly(s, size) if size else b"")
        if msg_type == WIRE_REPLY_IPC:
            elapsed = time.monotonic_ns() - started
            reply = fields.get(WIRE_TAG_IPC_MESSAGE, b"")
        elif msg_type == WIRE_REPLY_DONE:
            break
        elif msg_type != WIRE_REPLY_PROGRESS:
            message = fields.get(WIRE_TAG_MESSAGE, b"").decode(errors="replace")
            raise RuntimeError(f"the agent answered 0x{msg_type:04x}: {message}")
    s.close()
    if reply is None or len(reply) < 20 or reply[16:18] != b"\xff\x00":
        raise RuntimeError(f"the agent relayed no OK reply: {reply!r}")
    return elapsed, reply[20:]


def info_server(paths, requests, commands, answers):
    """The clients of dsbench: one exchange per byte read from @commands (b"p": proxy, b"a": agent)."""
    exchanges = {b"p": info_exchange, b"a": agent_exchange}
    while True:
        what = os.read(commands, 1)
        if what not in exchanges:
            return None
        try:
            elapsed, payload = exchanges[what](paths[what], requests[what])
            os.write(answers, struct.pack("<qI", elapsed, zlib.crc32(payload)))
        except Exception as e:
            message = str(e).encode()[:200]
            os.write(answers, struct.pack("<qI", -1, len(message)) + message)


def percentile(values, p):
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * p // 100) - 1)]


PATHS = ("direct", "agent", "proxy")


def info_latency(direct_path, proxy_path, agent_socket, pid, iterations, warmup):
    request = ipc_message(4, 4)
    _, reference = info_exchange(direct_path, request)
    if struct.unpack_from("<Q", reference)[0] != pid:
        raise SystemExit(f"bench-proxy: ProcessInfo2 names pid {struct.unpack_from('<Q', reference)[0]}, not {pid}")
    reference_crc = zlib.crc32(reference)
    agent_request = wire_frame(WIRE_REQUEST_IPC, [(WIRE_TAG_PROGRESS, struct.pack("<I", 1)),
                                                  (WIRE_TAG_PID, struct.pack("<I", pid)),
                                                  (WIRE_TAG_IPC_MESSAGE, request)])
    cmd_r, cmd_w = os.pipe()
    ans_r, ans_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(cmd_w)
        os.close(ans_r)
        try:
            become(USER)
            info_server({b"p": proxy_path, b"a": agent_socket}, {b"p": request, b"a": agent_request},
                        cmd_r, ans_w)
        finally:
            os._exit(0)
    os.close(cmd_r)
    os.close(ans_w)

    def in_server(what, name):
        os.write(cmd_w, what)
        answer = os.read(ans_r, 12)
        elapsed, crc = struct.unpack("<qI", answer)
        if elapsed < 0:
            raise SystemExit(f"bench-proxy: {name} ProcessInfo2 failed: {os.read(ans_r, crc).decode()}")
        if crc != reference_crc:
            raise SystemExit(f"bench-proxy: the {name} path's ProcessInfo2 payload differs from the runtime's")
        return elapsed

    def direct_once():
        elapsed, payload = info_exchange(direct_path, request)
        if payload != reference:
            raise SystemExit("bench-proxy: the runtime's ProcessInfo2 payload changed")
        return elapsed

    run = {"direct": direct_once, "agent": lambda: in_server(b"a", "agent"),
           "proxy": lambda: in_server(b"p", "proxy")}
    times = {name: [] for name in PATHS}
    try:
        for i in range(warmup + iterations):
            for k in range(len(PATHS)):  # each path first, second and third in turn
                name = PATHS[(i + k) % len(PATHS)]
                elapsed = run[name]()
                if i >= warmup:
                    times[name].append(elapsed / 1000)
    finally:
        os.write(cmd_w, b"q")
        os.close(cmd_w)
        os.waitpid(child, 0)
        os.close(ans_r)
    return times


# ---- processes ----

def start_target(app, tmpdir, extra):
    proc = subprocess.Popen(["setpriv", f"--reuid={USER}", f"--regid={USER}", "--init-groups", "env", "-i",
                             f"TMPDIR={tmpdir}", "DOTNET_CLI_TELEMETRY_OPTOUT=1", app] + extra,
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("ready"):
        raise SystemExit(f"bench-proxy: the target did not start: {line!r}")
    return proc


def start_port(dsctl, agent_socket, pid, path, log):
    """dsctl port PID as dsbench; returns (process, the path its first line names)."""
    proc = subprocess.Popen(["setpriv", f"--reuid={USER}", f"--regid={USER}", "--init-groups", "env", "-i",
                             "PATH=/usr/bin:/bin", dsctl, "port", str(pid), "--agent-socket", agent_socket,
                             "--port-path", path], stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline().strip()
    if not line.endswith(",connect"):
        raise SystemExit(f"bench-proxy: dsctl port did not start: {line!r}")
    return proc, line[:-len(",connect")]


def private_dir(parent, name):
    path = os.path.join(parent, name)
    os.mkdir(path, 0o700)
    shutil.chown(path, USER, USER)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iterations", type=int, default=500)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--providers", default=DEFAULT_PROVIDERS)
    ap.add_argument("--skip-trace", action="store_true")
    ap.add_argument("--skip-info", action="store_true")
    opts = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench-proxy: must run as root (it starts processes as another user)")
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    build = os.path.abspath(opts.build)
    dsagent = os.path.join(build, "agent", "dsagent")
    dsctl = os.path.join(build, "client", "dsctl")
    for exe in (dsagent, dsctl):
        if not os.access(exe, os.X_OK):
            raise SystemExit(f"bench-proxy: {exe} is missing; build first (ninja -C {build})")
    app_dir = subprocess.run([os.path.join(source, "tests/target-app/build.sh")], check=True,
                             stdout=subprocess.PIPE, text=True).stdout.strip()
    app = os.path.join(app_dir, "DsTestTarget")
    if subprocess.run(["id", "-u", USER], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER], check=True)

    work = tempfile.mkdtemp(prefix="dsagent-bench-proxy-")
    os.chmod(work, 0o755)  # dsbench reaches the agent's socket in here
    policy = os.path.join(work, "policy.toml")
    with open(policy, "w") as f:
        f.write(POLICY)
    os.chmod(policy, 0o644)
    agent_socket = os.path.join(work, "agent.sock")
    port_log = open(os.path.join(work, "port.log"), "w")
    procs = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        agent = subprocess.Popen([dsagent, "--listen", agent_socket, "--listen-mode", "0666", "--policy", policy, "--runtime-dir",
                                  os.path.join(work, "run"), "--audit", "stderr"], stderr=subprocess.DEVNULL)
        procs.append(agent)
        for _ in range(100):
            if os.path.exists(agent_socket):
                break
            if agent.poll() is not None:
                raise SystemExit("bench-proxy: dsagent exited early")
            time.sleep(0.05)
        else:
            raise SystemExit(f"bench-proxy: dsagent did not create {agent_socket} in 5 s")
        print(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {' '.join(os.uname()[i] for i in (0, 2, 4))},"
              f" {os.cpu_count()} CPUs, build {build}")

        if not opts.skip_info:
            tmp_idle = private_dir(work, "idle-tmp")
            idle = start_target(app, tmp_idle, [])
            procs.append(idle)
            port, port_path = start_port(dsctl, agent_socket, idle.pid, os.path.join(private_dir(work, "idle-port"),
                                                                                    "port.sock"), port_log)
            procs.append(port)
            port_cpu = cpu_seconds(port.pid)
            load = OtherLoad([agent.pid, port.pid, idle.pid])
            times = info_latency(runtime_socket(idle.pid, tmp_idle), port_path, agent_socket, idle.pid,
                                 opts.iterations, opts.warmup)
            other_cpus = load.cpus()
            port_cpu = cpu_seconds(port.pid) - port_cpu
            for p in (port, idle):
                p.terminate()  # dsctl port removes its socket on SIGTERM
                p.wait()
                procs.remove(p)
            stats = {}
            print(f"\nProcessInfo2 of an idle target (pid {idle.pid}): {opts.iterations} per path after "
                  f"{opts.warmup} warmup, interleaved; every reply checked")
            print(f"{'path (usec)':<14}{'min':>9}{'median':>10}{'mean':>10}{'p90':>10}{'p99':>10}{'max':>10}")
            for name in PATHS:
                t = times[name]
                stats[name] = (min(t), statistics.median(t), statistics.mean(t), percentile(t, 90),
                               percentile(t, 99), max(t))
                print(f"{name:<14}" + "".join(f"{v:>10.1f}" for v in stats[name])[1:])
            for a, b in (("proxy", "direct"), ("agent", "direct"), ("proxy", "agent")):
                print(f"{a + '/' + b:<14}" + "".join(f"{p / d:>10.2f}" for p, d in zip(stats[a], stats[b]))[1:])
            print(f"other processes on the machine kept {other_cpus:.2f} of {os.cpu_count()} CPUs busy meanwhile")
            port_us = port_cpu * 1e6 / (opts.iterations + opts.warmup)
            print(f"dsctl port: {port_us:.0f} usec of CPU per proxied request")
            print(f"RESULT info iterations={opts.iterations} direct_median_us={stats['direct'][1]:.1f} "
                  f"direct_p99_us={stats['direct'][4]:.1f} proxy_median_us={stats['proxy'][1]:.1f} "
                  f"proxy_p99_us={stats['proxy'][4]:.1f} agent_median_us={stats['agent'][1]:.1f} "
                  f"agent_p99_us={stats['agent'][4]:.1f} median_ratio={stats['proxy'][1] / stats['direct'][1]:.2f} "
                  f"p99_ratio={stats['proxy'][4] / stats['direct'][4]:.2f} port_cpu_us={port_us:.0f} "
                  f"other_cpus={other_cpus:.2f}", flush=True)

        if not opts.skip_trace:
            tmp_busy = private_dir(work, "busy-tmp")
            busy = start_target(app, tmp_busy, ["--emit-events", "0"])
            procs.append(busy)
            port, port_path = start_port(dsctl, agent_socket, busy.pid, os.path.join(private_dir(work, "busy-port"),
                                                                                    "port.sock"), port_log)
            procs.append(port)
            direct_path = runtime_socket(busy.pid, tmp_busy)
            request = collect_tracing2(opts.providers)
            print(f"\ntrace: CollectTracing2 {opts.providers}, 256 MB, rundown; target pid {busy.pid} "
                  f"emitting as fast as it can; {opts.seconds:g} s timed per session")
            print(f"{'round':<7}{'path':<8}{'MiB/s':>8}{'timed MiB':>11}{'rundown MiB':>13}{'stop->end s':>13}"
                  f"{'agent cpu s':>13}{'port cpu s':>12}{'target cpu s':>14}{'MiB/target s':>14}{'others CPUs':>13}")
            rows = {"direct": [], "proxy": []}
            for rnd in range(opts.rounds):
                order = ("direct", "proxy") if rnd % 2 == 0 else ("proxy", "direct")
                for name in order:
                    before = (cpu_seconds(agent.pid, True), cpu_seconds(port.pid), cpu_seconds(busy.pid))
                    load = OtherLoad([agent.pid, port.pid, busy.pid])
                    if name == "direct":
                        r = in_child(None, trace_session, direct_path, request, opts.seconds)
                    else:
                        r = in_child(USER, trace_session, port_path, request, opts.seconds)
                    other = load.cpus()
                    after = (cpu_seconds(agent.pid, True), cpu_seconds(port.pid), cpu_seconds(busy.pid))
                    r["rate"] = r["timed"] / r["window"]
                    r["cpu"] = [a - b for a, b in zip(after, before)]
                    r["other"] = other
                    # what the runtime made per CPU second it got: the same on both paths unless the relay
                    # makes it work harder; the rate itself moves with how much CPU the target gets
                    r["per_cpu"] = (r["timed"] + r["rest"]) / r["cpu"][2] if r["cpu"][2] > 0 else 0.0
                    rows[name].append(r)
                    print(f"{rnd + 1:<7}{name:<8}{r['rate'] / 2**20:>8.1f}{r['timed'] / 2**20:>11.1f}"
                          f"{r['rest'] / 2**20:>13.1f}{r['stop_to_end']:>13.2f}{r['cpu'][0]:>13.2f}"
                          f"{r['cpu'][1]:>12.2f}{r['cpu'][2]:>14.2f}{r['per_cpu'] / 2**20:>14.1f}"
                          f"{r['other']:>13.2f}", flush=True)
                    time.sleep(0.5)
            med = {n: statistics.median(x["rate"] for x in rows[n]) for n in rows}
            stop = {n: statistics.median(x["stop_to_end"] for x in rows[n]) for n in rows}
            proxy_bytes = sum(x["timed"] + x["rest"] for x in rows["proxy"])
            agent_cpu = sum(x["cpu"][0] for x in rows["proxy"])
            port_cpu = sum(x["cpu"][1] for x in rows["proxy"])
            target_cpu = {n: statistics.median(x["cpu"][2] for x in rows[n]) for n in rows}
            print(f"median direct {med['direct'] / 2**20:.1f} MiB/s, proxy {med['proxy'] / 2**20:.1f} MiB/s; "
                  f"proxy/direct {med['proxy'] / med['direct']:.3f} (goal >= 0.95)")
            paired = statistics.median(p["rate"] / d["rate"] for p, d in zip(rows["proxy"], rows["direct"]))
            print(f"median of each round's proxy/direct (the two sessions next to each other): {paired:.3f}")
            eff = {n: statistics.median(x["per_cpu"] for x in rows[n]) for n in rows}
            print(f"median MiB per CPU second of the target: direct {eff['direct'] / 2**20:.1f}, proxy "
                  f"{eff['proxy'] / 2**20:.1f}; proxy/direct {eff['proxy'] / eff['direct']:.3f}")
            print(f"median StopTracing to the stream's end: direct {stop['direct']:.2f} s, "
                  f"proxy {stop['proxy']:.2f} s")
            print(f"relaying {proxy_bytes / 2**30:.2f} GiB: agent {agent_cpu / (proxy_bytes / 2**30):.2f} s/GiB, "
                  f"dsctl port {port_cpu / (proxy_bytes / 2**30):.2f} s/GiB; target CPU per session (median) "
                  f"direct {target_cpu['direct']:.2f} s, proxy {target_cpu['proxy']:.2f} s")
            print(f"RESULT trace rounds={opts.rounds} seconds={opts.seconds:g} "
                  f"direct_mib_s={med['direct'] / 2**20:.1f} proxy_mib_s={med['proxy'] / 2**20:.1f} "
                  f"ratio={med['proxy'] / med['direct']:.3f} paired_ratio={paired:.3f} "
                  f"per_target_cpu_ratio={eff['proxy'] / eff['direct']:.3f} "
                  f"agent_s_per_gib={agent_cpu / (proxy_bytes / 2**30):.2f} "
                  f"port_s_per_gib={port_cpu / (proxy_bytes / 2**30):.2f} "
                  f"other_cpus={statistics.median(x['other'] for n in rows for x in rows[n]):.2f}", flush=True)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.kill()
                p.wait()
        port_log.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
