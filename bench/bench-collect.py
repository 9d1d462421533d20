#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What watching costs the agent, and how soon a crossed line gives an artifact ([[collect]], docs/collect.md).

Part 1, watching: N processes of the test app (tests/target-app, default 50) publish a Meter gauge and an
EventCounter from a file of their own. One agent serves them, its policy switched by reload, window by
window, interleaved:

- watch: two [[collect]] tables cover all N (a Meter table and an EventCounter table, lines never crossed),
         so the agent holds one session per process, counters every second, and parses every sample;
- idle:  the same policy without the tables: the same agent, the same processes, no session.

For each window (after every process's runtime says its EventSource is, or is no longer, listened to): the
CPU time of the agent and of its workers, as a share of one core, and the agent's memory (VmRSS of the
agent, and the proportional set size of the agent with its workers). Reported: each window, the medians of
each way, and the difference: what watching N processes costs.

Part 2, latency: a table without when.for watches one of the processes; the file's value is raised past
its line at a known moment. Timed from that moment: the table's record ("fired"), the first byte of its
trace in dump_dir (the agent's O_TMPFILE, seen in /proc/AGENT/fd), and the published file. The counters
come every second, so the first part of each is the wait for the next sample.

Usage: bench-collect.py [--processes N] [--window SECONDS] [--rounds N] [--latency-rounds N]
       (as root; the build in $DSAGENT_BUILD_DIR; the integration tests' users and harness)
"""
import argparse
import os
import select
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../tests/integration"))
import harness  # noqa: E402
from harness import ALICE, SVC, Agent, Target, place_in_unit, wait_for  # noqa: E402

COLLECT_MESSAGE_ID = "7e4f2962cff7436e853607d2fcf710fe"
UNIT = "dsbench-collect.service"
LATENCY_UNIT = "dsbench-collect-latency.service"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def policy(tables):
    return '[agent]\ndump_dir = "@DUMP_DIR@"\n' + tables


def table(name, counter, unit, line, extra=""):
    return (f'\n[[collect]]\nname = "{name}"\ntargets.users = ["{SVC}"]\ntargets.units = ["{unit}"]\n'
            f'when.counter = "{counter}"\n{line}\nthen.trace_profile = "gc-collect"\nthen.duration = "1s"\n'
            f'readers = ["{ALICE}"]\n{extra}\n')


WATCH = (table("bench-gauge", "Dsagent.TestTarget:test-gauge", UNIT, "when.above = 1000000") +
         table("bench-counter", "Dsagent-TestTarget:test-counter", UNIT, "when.above = 1000000"))
LATENCY = table("bench-latency", "Dsagent-TestTarget:test-counter", LATENCY_UNIT, "when.above = 300",
                'limit = "100/1h"')


def descendants(pid):
    """@pid and every process below it."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def cpu_seconds(pid):
    """CPU time of the agent, of its live workers, and of the workers it has reaped."""
    total = 0
    for p in descendants(pid):
        try:
            fields = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
        if p == pid:
            total += int(fields[13]) + int(fields[14])  # cutime, cstime
    return total / CLOCK_TICKS


def memory_kib(pid):
    """(the agent's VmRSS, the proportional set size of the agent and its workers), in KiB."""
    rss = int(next(line.split()[1] for line in open(f"/proc/{pid}/status") if line.startswith("VmRSS:")))
    pss = 0
    for p in descendants(pid):
        try:
            pss += int(next(line.split()[1] for line in open(f"/proc/{p}/smaps_rollup") if line.startswith("Pss:")))
        except (OSError, StopIteration):
            pass
    return rss, pss


def said(target, want, timeout):
    """Whether @target's app printed a line starting with @want within @timeout seconds."""
    fd = target.process.proc.stdout.fileno()
    os.set_blocking(fd, False)
    pending, deadline = getattr(target, "pending", b""), time.monotonic() + timeout
    while True:
        lines = pending.split(b"\n")
        for i, line in enumerate(lines[:-1]):
            if line.decode(errors="replace").startswith(want):
                target.pending = b"\n".join(lines[i + 1:])
                return True
        pending = lines[-1]
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            target.pending = pending
            return False
        chunk = os.read(fd, 65536)
        if not chunk:
            raise RuntimeError(f"pid {target.pid} exited")
        pending += chunk


def targets_listened(agent, targets, listened):
    """Waits until every target's runtime says its EventSource is (or is no longer) listened to."""
    want = f"eventsource-enabled {listened}"
    for t in targets:
        if not said(t, want, 120):
            tail = open(agent.log_path).read()[-3000:]
            raise RuntimeError(f"pid {t.pid} never said {want!r}; the agent's log ends:\n{tail}")


def window(agent, seconds):
    cpu0, t0 = cpu_seconds(agent.proc.pid), time.monotonic()
    time.sleep(seconds)
    cpu1, t1 = cpu_seconds(agent.proc.pid), time.monotonic()
    rss, pss = memory_kib(agent.proc.pid)
    return {"cpu_percent": 100 * (cpu1 - cpu0) / (t1 - t0), "rss_mib": rss / 1024, "pss_mib": pss / 1024}


def switch(agent, tables, targets, listened):
    agent.write_policy(policy(tables))
    record = agent.reload()
    assert record.get("DSAGENT_POLICY_LOADED") == "yes", record
    targets_listened(agent, targets, listened)


def watching(agent, targets, rounds, seconds):
    results = {"watch": [], "idle": []}
    for n in range(rounds):
        for way, tables, listened in (("watch", WATCH, "True"), ("idle", "", "False")):
            switch(agent, tables, targets, listened)
            time.sleep(2)  # the walk and the first samples are the switch's cost, not the window's
            w = window(agent, seconds)
            results[way].append(w)
            print(f"# round {n + 1} {way:5}: agent CPU {w['cpu_percent']:.2f} % of a core, "
                  f"RSS {w['rss_mib']:.1f} MiB, PSS with workers {w['pss_mib']:.1f} MiB", flush=True)
    return results


def tmpfile_bytes(agent):
    """The size of the agent's unpublished artifact in dump_dir (O_TMPFILE: "/dir/#INODE (deleted)"), or None."""
    fds = f"/proc/{agent.proc.pid}/fd"
    for fd in os.listdir(fds):
        try:
            where = os.readlink(f"{fds}/{fd}")
            if where.startswith(os.path.join(agent.dumps, "#")):
                return os.stat(f"{fds}/{fd}").st_size
        except OSError:
            continue
    return None


def fired(agent):
    return [r for r in agent.records(message_id=COLLECT_MESSAGE_ID) if r.get("DSAGENT_COLLECT_EVENT") == "fired"]


def published(agent):
    names = os.listdir(agent.dumps) if os.path.isdir(agent.dumps) else []  # made at the first artifact
    return [n for n in names if "collect-bench-latency" in n]


def latency(agent, value_file, rounds):
    times = {"fired": [], "first_byte": [], "published": []}
    for n in range(rounds):
        before_fired, before_published = len(fired(agent)), len(published(agent))
        with open(value_file, "w") as f:
            f.write("500\n")
        t0 = time.monotonic()
        seen = {}
        while len(seen) < 3 and time.monotonic() - t0 < 30:
            now = time.monotonic() - t0
            if "fired" not in seen and len(fired(agent)) > before_fired:
                seen["fired"] = now
            if "first_byte" not in seen and (tmpfile_bytes(agent) or 0) > 0:
                seen["first_byte"] = now
            if "published" not in seen and len(published(agent)) > before_published:
                seen["published"] = now
            time.sleep(0.005)
        with open(value_file, "w") as f:
            f.write("100\n")
        assert len(seen) == 3, f"round {n + 1}: only {seen} within 30 s"
        for k, v in seen.items():
            times[k].append(v)
        print(f"# latency round {n + 1}: fired {seen['fired']:.2f} s, first byte {seen['first_byte']:.2f} s, "
              f"published {seen['published']:.2f} s", flush=True)
        time.sleep(2.5)  # the value below the line for two samples before the next round
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=50)
    ap.add_argument("--window", type=float, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--latency-rounds", type=int, default=5)
    a = ap.parse_args()
    for user in (SVC, ALICE):
        harness.ensure_user(user)
    with harness.scope:
        values = harness.make_dir(None, 0o755)
        quiet = os.path.join(values, "quiet")
        with open(quiet, "w") as f:
            f.write("100\n")
        started = time.monotonic()
        targets = []
        for _ in range(a.processes):
            t = Target(SVC, args=("--meter-file", quiet, "--report-sessions"))
            place_in_unit(t.pid, UNIT)
            targets.append(t)
        print(f"# {a.processes} processes started in {time.monotonic() - started:.0f} s", flush=True)
        rising = os.path.join(values, "rising")
        with open(rising, "w") as f:
            f.write("100\n")
        probe = Target(SVC, args=("--meter-file", rising, "--report-sessions"))
        place_in_unit(probe.pid, LATENCY_UNIT)

        agent = Agent(policy=policy(""))
        results = watching(agent, targets, a.rounds, a.window)
        med = {way: {k: statistics.median(w[k] for w in ws) for k in ws[0]} for way, ws in results.items()}
        extra_cpu = med["watch"]["cpu_percent"] - med["idle"]["cpu_percent"]
        extra_rss = med["watch"]["rss_mib"] - med["idle"]["rss_mib"]
        print(f"watching {a.processes} processes (medians of {a.rounds} windows of {a.window:.0f} s each way):")
        for way in ("watch", "idle"):
            m = med[way]
            print(f"  {way:5}: agent CPU {m['cpu_percent']:.2f} % of one core, RSS {m['rss_mib']:.1f} MiB, "
                  f"PSS with workers {m['pss_mib']:.1f} MiB")
        print(f"  watching costs {extra_cpu:+.2f} % of one core and {extra_rss:+.1f} MiB RSS "
              f"({extra_cpu / a.processes * 1000:+.1f} thousandths of a percent and "
              f"{extra_rss * 1024 / a.processes:+.0f} KiB per process); goal: at most 2 % and 16 MiB for 50")

        switch(agent, WATCH + LATENCY, targets + [probe], "True")
        times = latency(agent, rising, a.latency_rounds)
        print(f"from the line crossed to ... (median, max of {a.latency_rounds}; counters every 1 s):")
        for k, label in (("fired", "the table's record"), ("first_byte", "the trace's first byte in dump_dir"),
                         ("published", "the trace published (its duration 1 s)")):
            print(f"  {label}: {statistics.median(times[k]):.2f} s, {max(times[k]):.2f} s")


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("bench-collect.py: run as root")
    # a SIGTERM (timeout, a CI's cancel) ends it as an exception would: what it started is stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("bench-collect.py: terminated"))
    main()
