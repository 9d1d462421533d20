#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Time from process start to the first line of managed output, with and without a dsagent port.

Three ways to start the same app (tests/target-app, whose first managed line
is "ready pid=..."), interleaved round by round, each timed from fork to that
line on its stdout:

- plain:     no DOTNET_DiagnosticPorts;
- nosuspend: DOTNET_DiagnosticPorts=PORT,connect,nosuspend to a running dsagent
             (the runtime connects in, the agent registers it; nothing waits);
- resume:    DOTNET_DiagnosticPorts=PORT,connect,suspend, resumed by `dsctl resume PID`
             as a granted user, sent in a loop from the moment the process exists
             until the agent answers that it resumed it through its port;
- on_start:  DOTNET_DiagnosticPorts=PORT2,connect,suspend to a second agent whose
             [[on_start]] covers the app: it starts a trace (the app's EventSource and
             the runtime's default providers) over the port, then resumes the app itself.
             Each trace ends when the app is killed after its first line; the next
             on_start round waits (untimed) until the agent has published it.

Reported: the median and p90 of each, and the medians' differences to plain.
Usage: bench-startup.py [--rounds N]   (as root; the build in $DSAGENT_BUILD_DIR)
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../tests/integration"))
import harness  # noqa: E402
from harness import ALICE, OPS, SVC, Agent, as_user, target_app  # noqa: E402


def start_and_time(env_extra, resume=None):
    env = ["env", "-i", "PATH=/usr/bin:/bin", "DOTNET_CLI_TELEMETRY_OPTOUT=1"] + env_extra
    t0 = time.monotonic()
    proc = subprocess.Popen(as_user(SVC, env + [target_app()]), stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        if resume:
            resume(proc.pid)
        for line in proc.stdout:
            if line.startswith("ready pid="):
                return time.monotonic() - t0
        raise RuntimeError("the app ended before its first line")
    finally:
        proc.kill()
        proc.wait()


def resumer(agent):
    def resume(pid):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = subprocess.run(as_user(ALICE, [harness.DSCTL, "--socket", agent.socket, "resume", str(pid)]),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if r.returncode == 0 and "through its diagnostic port" in r.stdout:
                return
            time.sleep(0.01)
        raise RuntimeError("never resumed through the port")
    return resume


SESSION_START_ID = "21c6214d54a0498bbab8983290c4efb6"
DUMP_MESSAGE_ID = "b44be14ffedf48ee806826f1d59bcc4e"


def on_start_runner(agent, port):
    """Starts the app on @agent's on_start port; first waits until every earlier trace is published."""
    runs = [0]

    def run():
        deadline = time.monotonic() + 60
        while len(agent.records(message_id=DUMP_MESSAGE_ID)) < runs[0]:
            if time.monotonic() > deadline:
                raise RuntimeError("an on_start trace was never published")
            time.sleep(0.05)
        runs[0] += 1
        return start_and_time([f"DOTNET_DiagnosticPorts={port},connect,suspend"])
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    port_dir = "/run/dsagent-bench-ports"
    os.makedirs(port_dir, mode=0o755, exist_ok=True)
    port = os.path.join(port_dir, "app.sock")
    policy = (f'[agent]\ndump_dir = "@DUMP_DIR@"\n[[port]]\npath = "{port}"\nusers = ["{SVC}"]\n'
              f'suspend_timeout = "0"\n[[rule]]\nname = "ops"\ngroups = ["{OPS}"]\ncommands = ["resume"]\n'
              f'targets.users = ["{SVC}"]\n')
    agent = Agent(policy=policy)
    port2 = os.path.join(port_dir, "traced.sock")
    # suspend_timeout 10 s: a round whose trace did not start would show as a 10 s outlier, not hang
    traced = Agent(policy=f'[agent]\ndump_dir = "@DUMP_DIR@"\n[[port]]\npath = "{port2}"\nusers = ["{SVC}"]\n'
                          f'suspend_timeout = "10s"\n[[on_start]]\nname = "bench"\ntargets.users = ["{SVC}"]\n'
                          f'trace_providers = ["Dsagent-TestTarget", "Microsoft-Windows-DotNETRuntime:0x1"]\n'
                          f'duration = "60s"\nreaders = ["{ALICE}"]\n')
    target_app()
    times = {"plain": [], "nosuspend": [], "resume": [], "on_start": []}
    ways = {
        "plain": lambda: start_and_time([]),
        "nosuspend": lambda: start_and_time([f"DOTNET_DiagnosticPorts={port},connect,nosuspend"]),
        "resume": lambda: start_and_time([f"DOTNET_DiagnosticPorts={port},connect,suspend"], resumer(agent)),
        "on_start": on_start_runner(traced, port2),
    }
    for way in ways.values():  # warm the page cache and the agent
        way()
    for i in range(args.rounds):
        order = list(ways)[i % len(ways):] + list(ways)[:i % len(ways)]
        for name in order:
            times[name].append(ways[name]())
    base = statistics.median(times["plain"])
    print(f"{'start':<10} {'median ms':>10} {'p90 ms':>8} {'- plain ms':>11}  ({args.rounds} rounds, interleaved)")
    for name, t in times.items():
        t = sorted(t)
        med = statistics.median(t)
        p90 = t[min(len(t) - 1, int(len(t) * 0.9))]
        print(f"{name:<10} {med * 1000:>10.1f} {p90 * 1000:>8.1f} {(med - base) * 1000:>+11.1f}")
    started = len(traced.records(message_id=SESSION_START_ID))
    print(f"on_start traces started: {started} of {args.rounds + 1} on_start runs")


if __name__ == "__main__":
    try:
        main()
    finally:
        harness.scope.close()
