#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Time and peak memory of dsctl gcdump against dotnet-gcdump collect, on the same live heap.

The target (bench/heap-app) holds OBJECTS small objects in a chain. For each
size, both tools take a .gcdump of it, interleaved, RUNS times each: the stock
dotnet-gcdump collect -p PID (10.0.750501, tests/tools/dotnet-tools), as root
straight on the runtime's socket, and dsctl gcdump PID -o FILE through a
dsagent of its own. Each is timed from its start to its exit, and its peak
resident memory is its own (ru_maxrss of the tool as GNU time's child, which
starts from time's small memory, not this script's: see timed_rusage()); the agent
only splices the stream, and its peak is printed apart. Both files are read
by the stock dotnet-gcdump report once per size, to show they hold the same
heap (its object count, of the last run), after one untimed dump that
makes the runtime's own EventSource objects for all.

Usage (as root): bench/bench-gcdump.py BUILD_DIR [--objects 100000 1000000] [--runs 3]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rusage import GNU_TIME, timed_rusage  # noqa: E402

USER = "dsbench"


def start_target(app, tmpdir, objects):
    proc = subprocess.Popen(["setpriv", f"--reuid={USER}", f"--regid={USER}", "--init-groups", "env", "-i",
                             f"TMPDIR={tmpdir}", "DOTNET_CLI_TELEMETRY_OPTOUT=1", app, str(objects)],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("ready"):
        raise SystemExit(f"target did not start: {line!r}")
    return proc




def objects_in(report_tool, path):
    r = subprocess.run([report_tool, "report", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env={"PATH": os.environ["PATH"], "DOTNET_CLI_TELEMETRY_OPTOUT": "1"})
    m = re.search(r"^ +([\d,]+)  GC Heap objects$", r.stdout, re.M)
    if r.returncode != 0 or not m:
        raise SystemExit(f"dotnet-gcdump report cannot read {path}: {r.stdout} {r.stderr}")
    return int(m.group(1).replace(",", ""))


def vm_hwm_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--objects", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not os.access(GNU_TIME, os.X_OK):
        raise SystemExit(f"{GNU_TIME} (GNU time, Debian's package time) measures each tool's peak memory; install it")
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    app_dir = subprocess.run([os.path.join(src, "bench/heap-app/build.sh")], check=True, stdout=subprocess.PIPE,
                             text=True).stdout.strip()
    tools = subprocess.run([os.path.join(src, "tests/tools/dotnet-tools/install.sh")], check=True,
                           stdout=subprocess.PIPE, text=True).stdout.strip()
    stock = os.path.join(tools, "dotnet-gcdump")
    if subprocess.run(["id", "-u", USER], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER], check=True)
    work = tempfile.mkdtemp(prefix="dsagent-bench-gcdump-")
    os.chmod(work, 0o755)
    tmpdir = os.path.join(work, "target-tmp")
    os.mkdir(tmpdir, 0o700)
    shutil.chown(tmpdir, USER, USER)
    out = os.path.join(work, "out")
    os.mkdir(out, 0o700)
    policy = os.path.join(work, "policy.toml")
    with open(policy, "w") as f:
        f.write(f'[agent]\ndump_dir = "{work}/dumps"\n')
    os.chmod(policy, 0o644)
    agent_socket = os.path.join(work, "agent.sock")
    dsctl = os.path.join(args.build, "client/dsctl")
    stock_env = {"PATH": os.environ["PATH"], "TMPDIR": tmpdir, "DOTNET_CLI_TELEMETRY_OPTOUT": "1", "HOME": work}
    target = agent = None
    rows = []
    try:
        agent = subprocess.Popen([os.path.join(args.build, "agent/dsagent"), "--listen", agent_socket,
                                  "--listen-mode", "0666", "--policy", policy, "--runtime-dir",
                                  os.path.join(work, "run"), "--audit", "stderr"], stderr=subprocess.DEVNULL)
        while not os.path.exists(agent_socket):
            time.sleep(0.05)
        for objects in args.objects:
            target = start_target(os.path.join(app_dir, "HeapApp"), tmpdir, objects)
            results = {"dotnet-gcdump": [], "dsctl": []}
            counts = {}
            # the first session of a process makes the runtime's EventSource objects: a heap of a few
            # thousand objects more for every dump after it; one untimed dump first, so all see the same
            timed_rusage([dsctl, "--socket", agent_socket, "-q", "gcdump", str(target.pid),
                          "-o", os.path.join(out, "warm-up.gcdump")])
            os.unlink(os.path.join(out, "warm-up.gcdump"))
            for run in range(args.runs):
                for label in ("dotnet-gcdump", "dsctl"):
                    path = os.path.join(out, f"{label}-{objects}-{run}.gcdump")
                    if label == "dsctl":
                        argv = [dsctl, "--socket", agent_socket, "-q", "gcdump", str(target.pid), "-o", path]
                        results[label].append(timed_rusage(argv))
                    else:
                        argv = [stock, "collect", "-p", str(target.pid), "-o", path]
                        results[label].append(timed_rusage(argv, stock_env))
                    if run == args.runs - 1:
                        counts[label] = objects_in(stock, path)
                    os.unlink(path)
            rows.append((objects, results, counts))
            target.kill()
            target.wait()
            target = None
        print(f"dsctl gcdump -o against dotnet-gcdump collect, {args.runs} runs each, interleaved")
        print(f"{'objects held':>12} {'tool':<14} {'heap objects':>12} {'median s':>9} {'min s':>7} {'max s':>7} "
              f"{'peak RSS MiB':>12}")
        for objects, results, counts in rows:
            for label, values in results.items():
                seconds = [s for s, _ in values]
                peak = max(m for _, m in values)
                print(f"{objects:>12} {label:<14} {counts[label]:>12} {statistics.median(seconds):>9.3f} "
                      f"{min(seconds):>7.3f} {max(seconds):>7.3f} {peak:>12.1f}")
            time_ratio = statistics.median(s for s, _ in results["dsctl"]) / statistics.median(
                s for s, _ in results["dotnet-gcdump"])
            memory_ratio = max(m for _, m in results["dsctl"]) / max(m for _, m in results["dotnet-gcdump"])
            print(f"RESULT objects={objects} time_ratio={time_ratio:.3f} memory_ratio={memory_ratio:.3f}")
        print(f"agent peak RSS (VmHWM): {vm_hwm_kib(agent.pid) / 1024:.1f} MiB")
    finally:
        for p in (agent, target):
            if p:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
