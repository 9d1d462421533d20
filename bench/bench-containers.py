#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""info and dump of the same app in a podman container against on the host, through one dsagent.

The test app runs twice at once: on the host as an unprivileged user, and in a rootful podman
container (tests/containers/podman.py: its own pid, mount, network, uts and ipc namespaces, a
read-only root, its own 8 MiB tmpfs /tmp, a uid no host user has). For each:

- info: bench-info (bench/bench-info.c) against it, the agent's path and the direct one
  interleaved; for the container the direct path is its socket through /proc/PID/root, as root
  would reach it. Reported: medians and p99s, and container/host for the agent's path.
- dump: `dsctl dump PID --type mini` as root, interleaved host/container, N times each, timed
  from the command's start to its exit. The container's dump goes through a FIFO in its own /tmp
  (too small to hold one) into dump_dir on the host.

Usage: bench-containers.py [--iterations 1000] [--dumps 5]   (as root; the build in $DSAGENT_BUILD_DIR)
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../tests/integration"))
sys.path.insert(0, os.path.join(HERE, "../tests/containers"))
import harness  # noqa: E402
from harness import SVC, Agent, Target, make_dir  # noqa: E402
import podman  # noqa: E402


def bench_info(agent, pid, ns_pid, runtime_socket, iterations):
    r = subprocess.run([os.path.join(harness.BUILD, "bench", "bench-info"), "--agent-socket", agent.socket,
                        "--runtime-socket", runtime_socket, "--pid", str(pid), "--runtime-pid", str(ns_pid),
                        "--iterations", str(iterations)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return {k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", line)}


def container_socket(c):
    tmp = f"/proc/{c.pid}/root/tmp"
    names = [n for n in os.listdir(tmp) if n.startswith(f"dotnet-diagnostic-{c.ns_pid}-")]
    assert len(names) == 1, names
    return os.path.join(tmp, names[0])


def time_dump(agent, pid, out):
    started = time.monotonic()
    r = subprocess.run([harness.DSCTL, "--socket", agent.socket, "dump", str(pid), "--type", "mini", "-o", out],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    took = time.monotonic() - started
    assert r.returncode == 0, r
    os.unlink(out)
    return took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--dumps", type=int, default=5)
    args = ap.parse_args()
    # as bench/run-bench-info.sh: the request budget would cut a run of thousands of requests short
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_requests_per_second = 100000\n'
                         'max_request_burst = 1000000\n')
    host = Target(SVC)
    c = podman.run_target("bench", podman.rootfs(), tmp_size="8m")
    print(f"# host pid {host.pid}; container {c.id[:12]}, host pid {c.pid}, its own pid {c.ns_pid}, "
          f"uid {c.uid}; {os.cpu_count()} CPUs")

    info = {"host": bench_info(agent, host.pid, host.ns_pid, host.socket_path, args.iterations),
            "container": bench_info(agent, c.pid, c.ns_pid, container_socket(c), args.iterations)}
    print(f"\n{'info (usec)':<12} {'agent med':>10} {'agent p99':>10} {'direct med':>11} {'direct p99':>11}")
    for name, r in info.items():
        print(f"{name:<12} {r['agent_median_us']:>10.1f} {r['agent_p99_us']:>10.1f} {r['direct_median_us']:>11.1f} "
              f"{r['direct_p99_us']:>11.1f}")
    print(f"container/host through the agent: median {info['container']['agent_median_us'] / info['host']['agent_median_us']:.2f}, "
          f"p99 {info['container']['agent_p99_us'] / info['host']['agent_p99_us']:.2f}")

    out = make_dir(None, 0o700)
    dumps = {"host": [], "container": []}
    for i in range(args.dumps + 1):  # the first of each warms the page cache and createdump
        for name, pid in (("host", host.pid), ("container", c.pid)) if i % 2 == 0 else \
                (("container", c.pid), ("host", host.pid)):
            took = time_dump(agent, pid, os.path.join(out, f"{name}.core"))
            if i > 0:
                dumps[name].append(took)
    print(f"\n{'mini dump (ms)':<15} {'median':>8} {'max':>8}   ({args.dumps} each, interleaved)")
    for name, t in dumps.items():
        print(f"{name:<15} {statistics.median(t) * 1000:>8.0f} {max(t) * 1000:>8.0f}")
    print(f"container/host: median {statistics.median(dumps['container']) / statistics.median(dumps['host']):.2f}")


if __name__ == "__main__":
    try:
        main()
    finally:
        harness.scope.close()
