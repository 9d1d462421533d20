#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs chosen integration files or cases many times, to find the ones that fail only sometimes.

    tests/repeat.py --build DIR [--runs N] [--load] [--jobs J] [FILE[::CASE]...]

FILE is an integration file's name as meson knows it (ports, or test_ports.py); FILE::CASE one case of
it. With none, every integration file. Each run runs the chosen files as scripts/test.sh does: those
that share nothing (suite integration-shared) J at a time (3), then those that run alone, one by one.
--load keeps one busy process per core beside the runs (a machine doing other work), stopped at the end.

It prints, for every case that failed at least once, its passes out of its runs, the seconds each
failing run took and its last wait (what the case waited for, as harness.py reports it); then a line
per file; the last line reads "N passed, N failed" over every case of every run. Each run's TAP output
stays under DIR/meson-logs/repeat-TIME-PID/. Nothing is ever retried: a failure counts as one.

Used by scripts/test.sh --repeat; it needs the users the harness runs as, which test.sh makes.
"""
import argparse
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import time

TAP_RESULT = re.compile(r"^(not )?ok \d+ - (\S+)")
CASE_TIME = re.compile(r"^# (\S+) took ([\d.]+) s")
LAST_WAIT = re.compile(r"^# last wait: (.*)$")


def integration_tests(build):
    """meson's integration tests of @build: name -> (argv, env, whether it runs beside others)."""
    out = subprocess.run(["meson", "introspect", "--tests", build], check=True, stdout=subprocess.PIPE,
                         text=True).stdout
    tests = {}
    for t in json.loads(out):
        if any(s.endswith(":integration") for s in t["suite"]):
            tests[t["name"]] = (t["cmd"], t["env"], any(s.endswith(":integration-shared") for s in t["suite"]))
    return tests


def selection(specs, tests):
    """{file: [cases]} from FILE[::CASE] arguments; an empty list runs the whole file."""
    chosen, whole = {}, set()
    for spec in specs or sorted(tests):
        name, _, case = spec.partition("::")
        name = name.removeprefix("test_").removesuffix(".py")
        if name not in tests:
            sys.exit(f"repeat.py: no integration file {spec!r}; there are: {', '.join(sorted(tests))}")
        cases = chosen.setdefault(name, [])
        if not case:
            whole.add(name)
        elif case not in cases:
            cases.append(case)
    for name in whole:
        chosen[name] = []
    return chosen


def run_file(name, cases, tests, log_path):
    """One file's run: [(case, passed, seconds, last wait)], and whether it ended as a TAP file should."""
    argv, env, _ = tests[name]
    with open(log_path, "w") as log:
        rc = subprocess.run(argv + cases, env=dict(os.environ, **env), stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, timeout=3600).returncode
    results, seconds, last_wait = [], {}, None
    for line in open(log_path, errors="replace"):
        if m := LAST_WAIT.match(line):
            last_wait = m.group(1)
        elif m := CASE_TIME.match(line):
            seconds[m.group(1)] = float(m.group(2))
        elif m := TAP_RESULT.match(line):
            results.append((m.group(2), not m.group(1), seconds.get(m.group(2)), last_wait if m.group(1) else None))
            last_wait = None
    # a file that died between cases (or before its first) is a failure of its own
    complete = bool(re.search(r"^1\.\.\d+", open(log_path, errors="replace").read(), re.M)) and rc in (0, 1)
    return results, complete


def busy_loops():
    """One busy process per core, at the default priority, as another user's work would be."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(os.cpu_count() or 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--load", action="store_true")
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("specs", nargs="*")
    args = ap.parse_args()

    tests = integration_tests(args.build)
    chosen = selection(args.specs, tests)
    shared = [n for n in chosen if tests[n][2]]
    alone = [n for n in chosen if not tests[n][2]]
    # a directory of its own: two repeat runs of one build keep apart
    logs = os.path.join(args.build, "meson-logs", f"repeat-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    os.makedirs(logs, exist_ok=True)
    loads = busy_loops() if args.load else []
    began = time.monotonic()
    outcomes = {}  # (file, case) -> [(passed, seconds, last wait, log)]
    broken = []  # (run, file, log) of files that died outside a case
    try:
        for run in range(1, args.runs + 1):
            def one(name, run=run):
                log = os.path.join(logs, f"run{run}-{name}.log")
                return name, log, run_file(name, chosen[name], tests, log)
            with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                done = list(pool.map(one, shared))
            done += [one(name) for name in alone]
            for name, log, (results, complete) in done:
                for case, ok, seconds, last_wait in results:
                    outcomes.setdefault((name, case), []).append((ok, seconds, last_wait, log))
                if not complete:
                    broken.append((run, name, log))
            print(f"# run {run} of {args.runs} done after {time.monotonic() - began:.0f} s", flush=True)
    finally:
        for p in loads:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()

    print(f"{args.runs} runs{' beside ' + str(len(loads)) + ' busy processes' if loads else ''}, "
          f"{time.monotonic() - began:.0f} s")
    passed = sum(ok for runs in outcomes.values() for ok, *_ in runs)
    failed = sum(not ok for runs in outcomes.values() for ok, *_ in runs) + len(broken)
    for (name, case), runs in sorted(outcomes.items()):
        if all(ok for ok, *_ in runs):
            continue
        print(f"FLAKY {name}::{case}: {sum(ok for ok, *_ in runs)}/{len(runs)} passed")
        for ok, seconds, last_wait, log in runs:
            if not ok:
                took = f"{seconds:.1f} s" if seconds is not None else "? s"
                print(f"    failed after {took}; last wait: {last_wait or 'none'} ({log})")
    for run, name, log in broken:
        print(f"BROKEN {name} in run {run}: it ended outside a case ({log})")
    for name in chosen:
        cases = {c for n, c in outcomes if n == name}
        runs = [ok for (n, _), rs in outcomes.items() if n == name for ok, *_ in rs]
        print(f"  {name}: {len(cases)} cases, {sum(runs)}/{len(runs)} case runs passed")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
