#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""README's demo, run as README says (as root, no sudo), end to end and twice.

scripts/demo.sh must show the main job: as an ops user that is not root, ps
and info, a dump that user alone may read (its ACL by getfacl), a short trace
and a few rows of counters, then the audit records of it all. It must leave
nothing behind: no user, no group, no process, no file; so a second run works
as the first did, and a real user that holds one of its names is neither used
nor removed.
"""
import os
import pwd
import re
import subprocess
import time

from tap import BUILD, SOURCE, run, run_tests, test

DEMO = os.path.join(SOURCE, "scripts/demo.sh")
# a "real" user, as an administrator makes one: a home, a shell, no comment
REAL = "dsdemo-ops"


def demo():
    started = time.monotonic()
    # as root, as README says: no sudo. 300 s: a bound against a hang; the demo takes about a minute
    r = run([DEMO], env=dict(os.environ, DSAGENT_BUILD_DIR=BUILD), stdin=subprocess.DEVNULL, timeout=300)
    took = time.monotonic() - started
    print(f"# demo.sh took {took:.1f} s")
    return r.stdout, took


def users_like(prefix):
    return sorted(p.pw_name for p in pwd.getpwall() if p.pw_name.startswith(prefix))


def leftovers():
    left = [f"/tmp/{name}" for name in os.listdir("/tmp") if name.startswith("dsagent-demo.")]
    left += users_like("dsdemo-")
    return left


def left_behind():
    """What leftovers() finds, each user with the processes that run as its uid (what keeps userdel from removing
    it: the demo's own, or another system's on this host with the same uid), so that a failure names its cause."""
    found = []
    for name in leftovers():
        try:
            uid = pwd.getpwnam(name).pw_uid
        except KeyError:
            found.append(name)
            continue
        running = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.stat(f"/proc/{pid}").st_uid != uid:
                    continue
                argv = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
                cgroup = open(f"/proc/{pid}/cgroup").read().strip()
            except FileNotFoundError:
                continue
            running.append(f"{pid} {argv.strip()[:120]!r} in {cgroup}")
        found.append(f"{name} (uid {uid}; its processes: {running or 'none'})")
    return found


def check_shows_the_main_job(out, ops):
    # ps and info as the ops user
    pid = re.search(r"^\$ dsctl info (\d+)$", out, re.M).group(1)
    assert re.search(rf"^== as {ops}: the \.NET processes {ops} may act on", out, re.M), out
    assert re.search(rf"^\s*{pid}\b.*DsTestTarget", out, re.M), out
    # a dump, and its ACL: the ops user may read it, no one else but root
    assert re.search(r"mini dump of \d+ .* stored at /tmp/dsagent-demo\.\w+/dumps/", out), out
    assert f"user:{ops}:r--" in out and "other::---" in out, out
    assert "177   E   L   F" in out, out
    assert "Permission denied" in out, out
    # a short trace, and some rows of counters
    assert re.search(r"trace\.nettrace: \d+ bytes, \d+ events", out), out
    # dotnet-counters' CSV, its times as .NET writes them under the invariant culture (docs/counters.md)
    rows = re.findall(r"^\d\d/\d\d/\d{4} \d\d:\d\d:\d\d,System\.Runtime,", out, re.M)
    # the demo shows the first 7 rows (head -n 8); the first of its 1 s intervals alone holds more, so a loaded
    # machine that made some intervals late still fills them
    assert 3 <= len(rows) <= 10, rows
    # the audit records of each of them, with names beside the uids
    for record in (rf"{ops} \(uid \d+\) ps: allowed", rf"{ops} \(uid \d+\) info pid {pid}: allowed",
                   rf"mini dump of pid {pid} \(.*\) for {ops} \(uid \d+\) stored at",
                   rf"trace session of pid {pid} for {ops} \(uid \d+\) ended \(duration\)",
                   rf"counters session of pid {pid} for {ops} \(uid \d+\) ended \(duration\)",
                   rf"dsdemo-visitor\d? \(uid \d+\) info pid {pid}: denied"):
        assert re.search(record, out), f"no record like {record!r}:\n{out}"
    assert re.search(r'^DSAGENT_DUMP_READABLE="yes"$', out, re.M), out


@test
def demo_shows_the_main_job_and_leaves_nothing():
    assert not leftovers(), f"left from before: {leftovers()}"
    out, _ = demo()
    check_shows_the_main_job(out, "dsdemo-ops")
    # about a minute (printed above; a benchmark's business, not a check's): the build and the app's build
    # are not part of it
    assert not leftovers(), f"left behind: {left_behind()}"


@test
def a_second_run_works_and_a_real_user_is_left_alone():
    # no subordinate ids: userdel counts a process running as any uid of the user's subordinate range as the
    # user's, and the range useradd gave it (the next free one) held the host uids 301000 and up that a test beside
    # this one maps a user namespace onto: its processes made userdel refuse, "currently used by process N", gone a
    # moment later. A uid no account of this run had before, too
    run(["useradd", "--create-home", "--shell", "/bin/bash", "-K", "UID_MIN=80000", "-K", "UID_MAX=89999",
         "-K", "GID_MIN=80000", "-K", "GID_MAX=89999", "-K", "SUB_UID_COUNT=0", "-K", "SUB_GID_COUNT=0", REAL])
    try:
        out, _ = demo()
        check_shows_the_main_job(out, "dsdemo-ops2")
        assert users_like("dsdemo-") == [REAL], users_like("dsdemo-")
        assert pwd.getpwnam(REAL).pw_shell == "/bin/bash"
    finally:
        # exit 8 when a process of the user's uid runs: another system on this host (a booted test machine's user
        # of the same uid) would name it here
        removed = run(["userdel", "--remove", REAL], check=False)
    assert not leftovers(), f"left behind: {left_behind()}; userdel {REAL}: {removed.returncode} {removed.stdout!r}"


if __name__ == "__main__":
    run_tests(needs_root=True, chained=True)
