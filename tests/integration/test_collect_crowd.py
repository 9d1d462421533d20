#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The [[collect]] watcher amid crowds: one user's many processes, covered by no table or by one, cost the
others nothing; a table's work is charged to the watched process's owner (docs/collect.md, "Who pays")."""
import json
import os
import uuid

import harness
from harness import ALICE, MALLORY, SVC, Agent, Process, Target, as_user, dsctl, make_dir, place_in_unit, \
    run_tests, test, wait_for

COLLECT_MESSAGE_ID = "7e4f2962cff7436e853607d2fcf710fe"
# more than the 1,024 watch slots the watcher once handed out in pid order
CROWD = 1100


def fired(agent, pid):
    return [r for r in agent.records(message_id=COLLECT_MESSAGE_ID)
            if r.get("DSAGENT_COLLECT_EVENT") == "fired" and r["DSAGENT_TARGET_PID"] == str(pid)]


def crowd(user, n=CROWD):
    """@n processes of @user, each listening where a runtime of its pid would, answering nothing; their pids
    ascend, and so does the next process's."""
    pid_max = int(open("/proc/sys/kernel/pid_max").read())
    last = int(open("/proc/sys/kernel/ns_last_pid").read())
    if last + n + 1000 > pid_max:
        # the pids would wrap within the crowd or just after it (a test run forks many thousands): wrap them now,
        # to where the kernel does, so that a process started after the crowd has a higher pid than all of it
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write("300")
    tmpdir = make_dir(user, 0o700)
    listeners = Process(as_user(user, ["env", f"TMPDIR={tmpdir}", harness.PYTHON,
                                       os.path.join(harness.HERE, "many_listeners.py"), str(n)]))
    listeners.read_line(f"listening {n}", timeout=300)
    children = open(f"/proc/{listeners.proc.pid}/task/{listeners.proc.pid}/children").read().split()
    assert len(children) == n, len(children)
    return listeners, [int(pid) for pid in children]


def gauge_table(name, unit, users=None):
    who = f'targets.users = [{", ".join(chr(34) + u + chr(34) for u in users)}]\n' if users else ""
    return (f'\n[[collect]]\nname = "{name}"\n{who}targets.units = ["{unit}"]\n'
            f'when.counter = "Dsagent.TestTarget:test-gauge"\nwhen.above = 300\nthen.stacks = true\n'
            f'readers = ["{ALICE}"]\n')


def watched(agent, pid):
    r = dsctl(agent, "root", "--json", "collect")
    return r.returncode == 0 and [x for x in json.loads(r.stdout) if x.get("pid") == pid]


@test
def a_crowd_no_table_covers_delays_no_covered_process():
    """Mallory's 1,100 idle listeners, started first, are candidates of a table by unit alone (anybody's
    processes in it), and none is in the unit; the covered process starts after them (its pid is higher). Its
    coverage is judged from facts read in batches (owner, unit, cgroup), before any watch slot or job is spent:
    the crowd costs no slot, and the covered process is watched and fires. Before, every candidate took a watch
    slot and an open job in pid order before anyone knew whether a table covered it: the 1,024 slots went to
    the crowd, and the covered process was never watched."""
    _, pids = crowd(MALLORY)
    unit = f"dst-collect-{uuid.uuid4().hex[:12]}.service"
    target = Target(user=SVC, tmpdir=None, mount_ns=True, args=("--meter-value", "500"))
    place_in_unit(target.pid, unit)
    assert target.pid > max(pids), (target.pid, max(pids))  # the premise: it comes after the crowd
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\n' + gauge_table("by-unit", unit))
    # the walk's candidates include the crowd (before the fix, it took every slot)
    wait_for(lambda: watched(agent, target.pid), timeout=120, what="the covered process watched")
    wait_for(lambda: fired(agent, target.pid), timeout=60, what="the table fired on it")
    rows = json.loads(dsctl(agent, "root", "--json", "collect").stdout)
    assert not [x for x in rows if x.get("pid") in set(pids)], "a process no table covers is watched"


def crowd_watched(agent, pids):
    r = dsctl(agent, "root", "--json", "collect")
    return len([x for x in json.loads(r.stdout) if x.get("pid") in pids]) if r.returncode == 0 else 0


@test
def a_crowd_of_covered_processes_shares_the_watch_slots_with_another_user():
    """Mallory's 1,100 listeners are all in the table's unit, so the table covers them (they answer nothing: each
    of their watches waits for its runtime, then tries again later), and they take the watch slots. Then svc's
    process starts in the same unit. The slots go in turn to the owners who want them, and a newcomer takes one
    from the owner holding the most: svc's process is watched and fires while mallory's crowd holds the rest.
    Before, the slots and the watcher's jobs went to the crowd in pid order, and svc's process was never
    watched."""
    listeners, pids = crowd(MALLORY)
    unit = f"dst-collect-{uuid.uuid4().hex[:12]}.service"
    place_in_unit(listeners.proc.pid, unit)
    for pid in pids:
        place_in_unit(pid, unit)
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\n' + gauge_table("crowded", unit))
    # the premise: the crowd holds every watch slot (COLLECT_WATCHES_MAX) before svc's process starts; a worker
    # opens one of its processes in a few ms: 120 s only ends a hang
    wait_for(lambda: crowd_watched(agent, set(pids)) >= 512, timeout=120, what="mallory's crowd holding all 512 watches")
    target = Target(user=SVC, tmpdir=None, mount_ns=True, args=("--meter-value", "500"))
    place_in_unit(target.pid, unit)
    wait_for(lambda: fired(agent, target.pid), timeout=120, what="the table fired on svc's process")
    assert watched(agent, target.pid), "svc's process is not watched"


if __name__ == "__main__":
    run_tests()
