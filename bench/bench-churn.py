#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What one user's connection churn costs everyone else: info latency idle against under churn.

One agent (the integration tests' harness, its users dst-*), the default policy (request budget
included). Two measuring clients run side by side the whole time, one exchange after another
with a pause between (--pause-ms): root asking `info` about dst-svc's app, and dst-alice asking
`info` about her own; each exchange timed from socket() to the last reply byte, as bench-info's
agent path. Windows of --window seconds alternate, round by round, between:

- idle:  nothing else runs;
- churn: dst-mallory, in a user namespace of her own mapped onto her subordinate range
         (newuidmap), runs --uids processes, each as a uid of its own there, each keeping
         --per-uid connections open that send nothing, and opening a new one (a blocking
         connect: no spinning) as soon as the agent closes one: all of them are charged to her,
         whose share is 32, so all but 32 are refused again and again, as fast as the agent
         refuses them.

With --churn-cgroup, the churn runs in a CPU cgroup of its own, as systemd places a user's
processes in a slice of their own apart from system services: the churn's processes then share
one process's part of the CPU with the rest of the machine, instead of each taking one, and what
is left to measure is what the churn costs the agent's loop. Without it (the default), they
compete with the agent, its workers, the runtimes and the clients one by one.

Reported per client: median and p90 of each kind of window and the ratios churn/idle (the
goal, issue 35 item 8: everyone else within 2x their idle latency); the p50 and p90 of connect()
alone (time in the listen backlog's wait, when it is full); how many of mallory's connections the
agent refused a second under churn, and the agent's own CPU time (its loop: utime + stime of the
agent process, not its workers) per refused connection.

Usage: bench-churn.py [--rounds 4] [--window 5] [--uids 40] [--per-uid 32] [--pause-ms 20] [--churn-cgroup]
       (as root; the build in $DSAGENT_BUILD_DIR)
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../tests/integration"))
import harness  # noqa: E402
from harness import ALICE, MALLORY, SUPPRESSED_MESSAGE_ID, SVC, Agent, Process, Target, as_user  # noqa: E402

# One client, one exchange after another until killed: "lat=MICROSECONDS OK AT CONNECT_MICROSECONDS" each.
MEASURE = r"""
import socket, struct, sys, time
sock, pid, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
request = b"DSAG" + struct.pack("<HHI", 1, 0x0002, 10) + struct.pack("<HI", 1, 4) + struct.pack("<I", pid)
while True:
    t0 = time.monotonic()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    t1 = time.monotonic()
    s.sendall(request)
    reply = b""
    while chunk := s.recv(65536):
        reply += chunk
    s.close()
    t2 = time.monotonic()
    # a reply other than the process's (its PROCESS frame first) is a failure the run must show
    ok = len(reply) > 12 and struct.unpack("<H", reply[6:8])[0] == 0x8001
    print(f"lat={(t2 - t0) * 1e6:.0f} {int(ok)} {t2:.6f} {(t1 - t0) * 1e6:.0f}", flush=True)
    time.sleep(pause)
"""

# The churn: in the namespace, as its root; each child a uid of its own, keeping per_uid connections.
CHURN = r"""
import os, selectors, socket, sys, time
sock, n_uids, per_uid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for k in range(1, n_uids + 1):
    if os.fork() == 0:
        os.setresgid(k, k, k)
        os.setresuid(k, k, k)
        sel = selectors.DefaultSelector()
        while True:
            while len(sel.get_map()) < per_uid:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(sock)  # blocks while the agent's backlog is full
                except OSError:
                    s.close()
                    time.sleep(0.01)
                    continue
                sel.register(s, selectors.EVENT_READ)
            for key, _ in sel.select(1):
                sel.unregister(key.fileobj)
                key.fileobj.close()
os.wait()
"""


def churn_cgroup():
    """A CPU cgroup for the churn (the cgroup v2 hierarchy's, or v1's cpu controller): its cgroup.procs; it is
    removed when the run ends."""
    for root in ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup"):
        if os.path.exists(os.path.join(root, "cpu.shares" if root.endswith("cpu") else "cgroup.subtree_control")):
            path = os.path.join(root, "dsbench-churn")
            os.makedirs(path, exist_ok=True)
            harness.scope.callback(lambda p=path: os.path.isdir(p) and os.rmdir(p))
            return os.path.join(path, "cgroup.procs")
    raise SystemExit("no CPU cgroup to put the churn in")


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def refused(agent):
    """Mallory's connections the agent refused so far: each recorded, or counted in a suppressed record."""
    mallory = str(harness.uid_of(MALLORY))
    recorded = [r for r in agent.records() if r.get("DSAGENT_CLIENT_CHARGED_UID") == mallory and
                r["DSAGENT_REASON"].startswith("too many")]
    counted = [int(r["DSAGENT_SUPPRESSED"]) for r in agent.records(message_id=SUPPRESSED_MESSAGE_ID)
               if r.get("DSAGENT_CLIENT_UID") == mallory]
    return len(recorded) + sum(counted)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--uids", type=int, default=40)
    ap.add_argument("--per-uid", type=int, default=32)
    ap.add_argument("--pause-ms", type=float, default=20.0)
    ap.add_argument("--churn-cgroup", action="store_true")
    args = ap.parse_args()
    into_cgroup = []
    if args.churn_cgroup:
        into_cgroup = ["sh", "-c", f'echo $$ > {churn_cgroup()} && exec "$@"', "sh"]
    harness.subordinate_range(MALLORY)
    agent = Agent()
    target, own = Target(SVC), Target(ALICE)
    clients = {"root": Process([harness.PYTHON, "-c", MEASURE, agent.socket, str(target.pid),
                                str(args.pause_ms / 1000)]),
               "alice": Process(as_user(ALICE, [harness.PYTHON, "-c", MEASURE, agent.socket, str(own.pid),
                                                str(args.pause_ms / 1000)]))}
    kinds = ("idle", "churn")
    samples = {(who, kind): [] for who in clients for kind in kinds}
    connects = {key: [] for key in samples}
    failures = {key: 0 for key in samples}
    cpu = {kind: 0.0 for kind in kinds}
    churn_refused, churn_seconds = 0, 0.0

    def collect(kind, until):
        """Every exchange the clients finish before @until (their own clock: time.monotonic())."""
        for who, proc in clients.items():
            while True:
                lat, ok, at, connect = proc.read_line("lat=", timeout=120).split("=")[1].split()
                if float(at) > until:
                    break
                samples[(who, kind)].append(int(lat))
                connects[(who, kind)].append(int(connect))
                failures[(who, kind)] += ok != "1"

    for proc in clients.values():  # warm-up: one exchange each
        proc.read_line("lat=")
    print(f"# {os.cpu_count()} CPUs; windows of {args.window} s, {args.rounds} rounds; churn: {args.uids} uids x "
          f"{args.per_uid} connections{', in a CPU cgroup of its own' if args.churn_cgroup else ''}; load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    for r in range(args.rounds):
        for kind in (kinds if r % 2 == 0 else kinds[::-1]):
            churn = None
            if kind == "churn":
                churn = Process(into_cgroup + as_user(MALLORY, [
                    "unshare", "--user", "--map-auto", "--setuid", "0", "--setgid", "0", "--", harness.PYTHON, "-c",
                    CHURN, agent.socket, str(args.uids), str(args.per_uid)]))
                time.sleep(1)  # under way before the window opens
            before_refused = refused(agent) if churn else 0
            before_cpu, began = cpu_seconds(agent.proc.pid), time.monotonic()
            for proc in clients.values():  # what came before the window is not the window's
                while float(proc.read_line("lat=", timeout=120).split()[2]) < began:
                    pass
            collect(kind, began + args.window)
            cpu[kind] += cpu_seconds(agent.proc.pid) - before_cpu
            if churn:
                churn.stop()
                time.sleep(1.5)  # the last suppressed record (one a second) written
                churn_refused += refused(agent) - before_refused
                churn_seconds += time.monotonic() - began - 1.5
            print(f"# round {r + 1} {kind}: " + ", ".join(
                f"{who} p50 {statistics.median(samples[(who, kind)][-50:]):.0f} us" for who in clients) +
                  f"; load average {os.getloadavg()[0]:.1f}", flush=True)

    print(f"\n{'client':<8} {'idle p50':>10} {'idle p90':>10} {'churn p50':>10} {'churn p90':>10} "
          f"{'p50 ratio':>10} {'p90 ratio':>10} {'n idle/churn':>14} {'failed':>7}")
    ratios = {}
    for who in clients:
        idle, churn = samples[(who, "idle")], samples[(who, "churn")]
        i50, i90, c50, c90 = (statistics.median(idle), percentile(idle, 0.9), statistics.median(churn),
                              percentile(churn, 0.9))
        ratios[who] = (c50 / i50, c90 / i90)
        print(f"{who:<8} {i50:>10.0f} {i90:>10.0f} {c50:>10.0f} {c90:>10.0f} {c50 / i50:>10.2f} {c90 / i90:>10.2f} "
              f"{len(idle):>7}/{len(churn):<6} {failures[(who, 'idle')] + failures[(who, 'churn')]:>7}")
    for (who, kind), v in connects.items():
        print(f"# {who} {kind}: connect() alone p50 {statistics.median(v):.0f} us, p90 {percentile(v, 0.9):.0f} us")
    rate = churn_refused / churn_seconds if churn_seconds else 0
    per_refusal = cpu["churn"] / churn_refused * 1e6 if churn_refused else 0
    print(f"# churn: {rate:.0f} of mallory's connections refused a second; the agent's CPU {cpu['churn'] / churn_seconds:.2f}"
          f" of a core under churn, {cpu['idle'] / (args.rounds * args.window):.2f} idle; {per_refusal:.1f} us per "
          f"refused connection")
    print(f"RESULT root_p50_ratio={ratios['root'][0]:.2f} root_p90_ratio={ratios['root'][1]:.2f} "
          f"alice_p50_ratio={ratios['alice'][0]:.2f} alice_p90_ratio={ratios['alice'][1]:.2f} "
          f"refused_per_second={rate:.0f} agent_cpu_us_per_refusal={per_refusal:.1f}")


if __name__ == "__main__":
    try:
        main()
    finally:
        harness.scope.close()
