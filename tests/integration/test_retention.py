#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Retention of dump_dir against the real runtime: what the agent removes of what it stored (max_age, max_files,
room for a user's dump from the tables that yield), each removal recorded; who may remove a table's artifacts; what
a dump refused for space says (docs/policy.md, "Retention")."""
import errno
import grp
import json
import os
import re
import subprocess
import time
import uuid

import harness
from harness import (ALICE, EXIT_DENIED, MALLORY, SVC, Agent, Target, dsctl, make_dir, place_in_unit, run_tests, test,
                     uid_of, wait_for)

RETENTION_MESSAGE_ID = "954f9a585ef5482c9a7017bba952745d"
COLLECT_MESSAGE_ID = "7e4f2962cff7436e853607d2fcf710fe"
EXIT_NO_SPACE = 11


def removals(agent, **fields):
    return [r for r in agent.records(message_id=RETENTION_MESSAGE_ID) if all(r.get(k) == v for k, v in fields.items())]


def collect_records(agent, pid, event):
    return [r for r in agent.records(message_id=COLLECT_MESSAGE_ID)
            if r.get("DSAGENT_COLLECT_EVENT") == event and r["DSAGENT_TARGET_PID"] == str(pid)]


def target_in_unit(value="500", user=SVC):
    """A target of @user's publishing @value on its gauge, in a unit of its own (before the agent starts, whose first
    walk judges it), with a /tmp of its own (as test_collect.py's)."""
    unit = f"dst-retention-{uuid.uuid4().hex[:12]}.service"
    target = Target(user=user, tmpdir=None, mount_ns=True, args=("--meter-value", value))
    place_in_unit(target.pid, unit)
    return target, unit


def table(name, unit, then, extra="", readers=(ALICE,), user=SVC):
    """A table firing on every sample of the gauge above 300 (one a second) of @user's processes in @unit."""
    quoted = ", ".join(f'"{r}"' for r in readers)
    return (f'\n[[collect]]\nname = "{name}"\ntargets.users = ["{user}"]\ntargets.units = ["{unit}"]\n'
            f'when.counter = "Dsagent.TestTarget:test-gauge"\nwhen.above = 300\n{then}\nreaders = [{quoted}]\n'
            f'{extra}\n')


def dump(agent, user, pid, *args):
    r = dsctl(agent, user, "--json", "dump", str(pid), *args, timeout=300)
    return r, (json.loads(r.stdout) if r.returncode == 0 else None)


def backdate(path, seconds):
    when = time.time() - seconds
    os.utime(path, (when, when))


@test
def a_dump_dir_filled_by_a_collect_table_frees_itself_and_a_users_next_dump_succeeds():
    """A table's dumps fill max_use; the user's own dump used to fail "no space" until root came. With
    yield_to_dumps the table's oldest dump is removed to make room, recorded for the user's request, and the
    user's dump is taken."""
    high, unit = target_in_unit()
    own = Target(SVC, tmpdir=None, mount_ns=True)
    # a mini dump of this app, as this runtime writes it: the sizes below are counted in it
    probe = Agent()
    r, taken = dump(probe, SVC, own.pid)
    assert r.returncode == 0, r
    size = os.stat(taken["path"]).st_blocks * 512
    probe.stop()
    # room for two of the table's dumps and half of a third: its third is refused, as the user's would be
    budget = size * 5 // 2
    # it fires on every sample; a firing while its last dump runs is counted and skipped, hence the room in limit
    agent = Agent(policy=f'[agent]\ndump_dir = "@DUMP_DIR@"\nmax_use = "{budget}"\n' +
                  table("crowd", unit, 'then.dump = "mini"', 'limit = "10/1h"\nyield_to_dumps = true'))
    wait_for(lambda: collect_records(agent, high.pid, "failed"), timeout=180, what="a dump of the table's refused")
    # no more of the table's dumps from now on, and every one begun has ended: none takes the room made below
    high.process.stop()
    begun = lambda: [f for f in collect_records(agent, high.pid, "fired")
                     if f["DSAGENT_COLLECT_RESULT"] == "a mini dump begins"]
    wait_for(lambda: len(begun()) == len(collect_records(agent, high.pid, "collected")) +
             len(collect_records(agent, high.pid, "failed")), timeout=60, what="the table's dumps to end")
    collected = collect_records(agent, high.pid, "collected")
    failed = collect_records(agent, high.pid, "failed")
    assert len(collected) == 2 and failed, (collected, failed)
    assert "dumps would take more than max_use (used " in failed[0]["DSAGENT_COLLECT_RESULT"], failed
    oldest, newest = [c["DSAGENT_COLLECT_RESULT"].split(" (")[0] for c in collected]
    assert sorted(os.listdir(agent.dumps)) == sorted([os.path.basename(oldest), os.path.basename(newest)])

    r, mine = dump(agent, SVC, own.pid)
    assert r.returncode == 0, r
    assert os.path.exists(mine["path"]) and mine["size"] > 0, mine
    # the table's oldest dump made room, and no more than it: the newest is still there
    made, = removals(agent, DSAGENT_RETENTION_REASON="make-room")
    assert made["DSAGENT_DUMP_PATH"] == oldest and not os.path.exists(oldest) and os.path.exists(newest), made
    assert made["DSAGENT_RETENTION_EVENT"] == "removing" and made["DSAGENT_RULE"] == "crowd", made
    assert made["DSAGENT_DUMP_ORIGIN"] == "collect" and made["DSAGENT_TARGET_PID"] == str(high.pid), made
    request, = [rec for rec in agent.records() if rec.get("DSAGENT_COMMAND") == "dump"]
    assert made["DSAGENT_REQUEST_ID"] == request["DSAGENT_REQUEST_ID"], (made, request)
    assert made["DSAGENT_CLIENT_UID"] == str(uid_of(SVC)), made
    assert removals(agent) == [made], removals(agent)


@test
def a_table_that_does_not_yield_keeps_its_artifacts_and_the_no_space_answer_says_why_and_what_to_do():
    """Without yield_to_dumps nothing of the table's goes: the user's dump is refused, and the answer says the
    numbers (used, limit, free) and what the user can do."""
    high, unit = target_in_unit()
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_use = "1M"\n' +
                  table("kept", unit, 'then.stacks = true', 'limit = "1/1h"'))
    wait_for(lambda: collect_records(agent, high.pid, "collected"), timeout=120, what="the table's stacks")
    stacks = collect_records(agent, high.pid, "collected")[0]["DSAGENT_COLLECT_RESULT"].split(" (")[0]
    own = Target(SVC, tmpdir=None, mount_ns=True)
    r = dsctl(agent, SVC, "dump", str(own.pid), timeout=300)
    assert r.returncode == EXIT_NO_SPACE, r
    said = " ".join(r.stderr.split())
    assert "dumps would take more than max_use (used " in said and "of max_use 1.0 MiB; free " in said, said
    assert ", keep_free " in said and "(15%)" in said, said
    assert "'dsctl dumps --remove PATH' removes the dumps you asked for" in said and "ask root" in said, said
    assert agent.dumps in said, said
    assert os.path.exists(stacks) and removals(agent) == [], removals(agent)


@test
def a_dump_dir_that_fills_as_the_dump_is_named_says_the_numbers_and_what_to_do():
    """A file system that filled up as the dump was labelled and named (past the guards, which it met) answered
    "the dump directory's file system is full" and no numbers. It says used, limit and free now, and what the user
    can do, as every "no space" answer. Here a tmpfs with room for the dump's bytes but not for its labels: tmpfs
    charges each inode and each user xattr to an inode space of its own (nr_inodes), all taken but one, which the
    dump's unnamed file takes; its first label then finds none (ENOSPC)."""
    own = Target(SVC, tmpdir=None, mount_ns=True)
    small = make_dir(None, 0o755)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1g,nr_inodes=32,mode=0711", "tmpfs", small], check=True)
    harness.scope.callback(subprocess.run, ["umount", "-l", small])
    # hidden names are none of the agent's: the guards and retention pass over them
    filler = 0
    try:
        while True:
            open(os.path.join(small, f".filler{filler}"), "w").close()
            filler += 1
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
    os.unlink(os.path.join(small, f".filler{filler - 1}"))
    fillers = sorted(os.listdir(small))
    # loose guards: the file system is what refuses
    agent = Agent(policy=f'[agent]\ndump_dir = "{small}"\nmax_use = "1T"\nkeep_free = "1"\n')
    r = dsctl(agent, SVC, "dump", str(own.pid), timeout=300)
    assert r.returncode == EXIT_NO_SPACE, r
    said = " ".join(r.stderr.split())
    assert "the dump does not fit: the dump directory's file system filled up as it was named (used 0 B" in said, said
    assert " of max_use 1.0 TiB; free " in said and ", keep_free 1 B)" in said, said
    assert f"'dsctl dumps' lists what you may read in {small}" in said, said
    assert "'dsctl dumps --remove PATH' removes the dumps you asked for" in said and "ask root" in said, said
    assert sorted(os.listdir(small)) == fillers, os.listdir(small)


def dumps_of(agent, user, pid, count):
    """@count dumps of @pid that @user asks for, one after the other: their paths."""
    paths = []
    for _ in range(count):
        r, taken = dump(agent, user, pid)
        assert r.returncode == 0, r
        paths.append(taken["path"])
    return paths


def on_disk(path):
    """What retention counts of a file: its blocks."""
    return os.stat(path).st_blocks * 512


# the agent notes each retention pass's end (test-hooks.h): for the tests that wait for a pass
NOTES = {"DSAGENT_TEST_RETENTION_NOTES": "1"}


def removed_for(agent, reason, count):
    """The removals of the pass a reload runs now (else the next minute's would), once it has ended (its test-hook
    note, after the reload: a pass already running then read the policy before and removes nothing, and the
    reload's pass follows it at once): @count of them, all for @reason, and no others so far. 60 s is a bound only
    against a hang, the pass ends within ms."""
    start = len(open(agent.log_path).read())
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    wait_for(lambda: re.search(r"test-hook: retention: a pass ended: [1-9][0-9]* files removed\n",
                               open(agent.log_path).read()[start:]), timeout=60, what="a pass that removes to end")
    removed = removals(agent)
    assert len(removed) == count and all(r["DSAGENT_RETENTION_REASON"] == reason for r in removed), removed
    for rec in removed:
        assert rec["DSAGENT_RETENTION_EVENT"] == "removing" and not os.path.exists(rec["DSAGENT_DUMP_PATH"]), rec
    return removed


@test
def a_users_dumps_past_max_use_per_user_lose_their_oldest_never_another_users():
    """max_use_per_user was tested on the plan alone. alice's three dumps of svc's process take more than it: her
    oldest goes, recorded before it goes, and her newer ones stay; mallory's two dumps of her own process, older
    than all of alice's, stay: the budget is each user's, not the directory's."""
    svc = Target(SVC, tmpdir=None, mount_ns=True)
    own = Target(MALLORY, tmpdir=None, mount_ns=True)
    policy = lambda budget="": (
        f'[agent]\ndump_dir = "@DUMP_DIR@"\n{budget}\n[[rule]]\nname = "alice-dumps"\nusers = ["{ALICE}"]\n'
        f'commands = ["dump"]\ntargets.users = ["{SVC}"]\ndump_types = ["mini"]\n')
    agent = Agent(policy=policy(), env=NOTES)
    mallorys = dumps_of(agent, MALLORY, own.pid, 2)
    alices = dumps_of(agent, ALICE, svc.pid, 3)
    # in the order taken, minutes apart: mallory's the oldest of all
    for path, age in zip(mallorys + alices, (600, 500, 300, 200, 100)):
        backdate(path, age)
    # alice's newer two and half her oldest: her oldest must go, and mallory's two fit
    oldest = on_disk(alices[0])
    budget = on_disk(alices[1]) + on_disk(alices[2]) + oldest // 2
    assert on_disk(mallorys[0]) + on_disk(mallorys[1]) <= budget, "mallory's dumps would not fit the budget"
    agent.write_policy(policy(f'max_use_per_user = "{budget}"\n'))
    removed, = removed_for(agent, "max_use_per_user", 1)
    assert removed["DSAGENT_DUMP_PATH"] == alices[0], removed
    assert removed["DSAGENT_DUMP_REQUESTER_UID"] == str(uid_of(ALICE)) and removed["DSAGENT_DUMP_TYPE"] == "mini", \
        removed
    assert removed["DSAGENT_TARGET_PID"] == str(svc.pid) and int(removed["DSAGENT_DUMP_SIZE"]) == oldest, removed
    assert removed["DSAGENT_RETENTION_DETAIL"].startswith("the user's dumps take ") and \
        removed["DSAGENT_RETENTION_DETAIL"].endswith("; the oldest go first, the newest stays"), removed
    assert ", max_use_per_user " in removed["DSAGENT_RETENTION_DETAIL"], removed
    for path in mallorys + alices[1:]:
        assert os.path.exists(path), f"{path} was removed for alice's budget"
    listed = [d["path"] for d in json.loads(dsctl(agent, MALLORY, "--json", "dumps").stdout)]
    assert sorted(listed) == sorted(mallorys), listed


def table_records(agent, name, event):
    return [r for r in agent.records(message_id=COLLECT_MESSAGE_ID)
            if r.get("DSAGENT_COLLECT_EVENT") == event and r["DSAGENT_RULE"] == name]


@test
def a_tables_traces_past_its_max_use_lose_their_oldest_and_nothing_else():
    """A table's max_use was tested on the plan alone, and no test saw retention remove a trace. A trace table's
    .nettrace files take more than its max_use: its oldest go, each recorded before it goes, never its newest;
    another table's stacks of the same process and a user's dump, older than every trace, stay."""
    high, unit = target_in_unit()
    # the other table watches a process of alice's: one collection session of an owner's processes runs at a time,
    # and the trace table, firing on every sample, would hold the process's turn (a firing held back counts
    # against its table's limit: a trace of 2 s takes about three, hence the room in the limit)
    alices, alices_unit = target_in_unit(user=ALICE)
    policy = lambda budget="": ('[agent]\ndump_dir = "@DUMP_DIR@"\n' +
                                table("traced", unit, 'then.trace_profile = "gc-collect"\nthen.duration = "2s"',
                                      f'limit = "20/1h"\n{budget}') +
                                table("stacked", alices_unit, "then.stacks = true", user=ALICE))
    agent = Agent(policy=policy(), env=NOTES)
    users, = dumps_of(agent, SVC, high.pid, 1)
    # 180 s: a bound only against a hang; a trace takes its 2 s, and a sample a second fires the next
    wait_for(lambda: len(table_records(agent, "traced", "collected")) >= 3 and
             table_records(agent, "stacked", "collected"), timeout=180, what="three traces and the stacks")
    # no more firings from now on, and every action begun has ended: the files are all there
    high.process.stop()
    begun = lambda: [f for f in table_records(agent, "traced", "fired") if f["DSAGENT_COLLECT_RESULT"].endswith(" begins")]
    wait_for(lambda: len(begun()) == len(table_records(agent, "traced", "collected")) +
             len(table_records(agent, "traced", "failed")), timeout=60, what="the table's traces to end")
    traces = [c["DSAGENT_COLLECT_RESULT"].split(" (")[0] for c in table_records(agent, "traced", "collected")]
    others = [users] + [c["DSAGENT_COLLECT_RESULT"].split(" (")[0] for c in table_records(agent, "stacked", "collected")]
    assert len(traces) >= 3 and all(t.endswith(".nettrace") for t in traces), traces
    assert sorted(os.listdir(agent.dumps)) == sorted(os.path.basename(p) for p in traces + others), os.listdir(agent.dumps)
    # the others older than every trace; the traces in the order taken
    for k, path in enumerate(others):
        backdate(path, 3000 - k)
    for k, path in enumerate(traces):
        backdate(path, 1000 - 100 * k)
    # the newest two traces and half the one before: all but the newest two must go
    budget = on_disk(traces[-1]) + on_disk(traces[-2]) + on_disk(traces[-3]) // 2
    agent.write_policy(policy(f'max_use = "{budget}"'))
    removed = removed_for(agent, "table-max_use", len(traces) - 2)
    assert [r["DSAGENT_DUMP_PATH"] for r in removed] == traces[:-2], (removed, traces)
    for rec in removed:
        assert rec["DSAGENT_RULE"] == "traced" and rec["DSAGENT_DUMP_ORIGIN"] == "collect", rec
        assert rec["DSAGENT_DUMP_TYPE"] == "trace" and rec["DSAGENT_TARGET_PID"] == str(high.pid), rec
        assert rec["DSAGENT_RETENTION_DETAIL"].startswith("the table's artifacts take ") and \
            f", its max_use " in rec["DSAGENT_RETENTION_DETAIL"], rec
    assert sorted(os.listdir(agent.dumps)) == sorted(os.path.basename(p) for p in traces[-2:] + others), \
        os.listdir(agent.dumps)


@test
def max_age_and_max_files_remove_the_oldest_each_recorded():
    """The agent ages out and counts what it stored in any dump_dir (the packaged tmpfiles.d line cleaned only
    /var/lib/dsagent/dumps, and nothing recorded it): the oldest first, each removal recorded before it is made,
    at a reload, and at start with nobody asking."""
    own = Target(SVC, tmpdir=None, mount_ns=True)
    policy = '[agent]\ndump_dir = "@DUMP_DIR@"\n'
    agent = Agent(policy=policy)
    paths = []
    for _ in range(4):
        r, taken = dump(agent, SVC, own.pid)
        assert r.returncode == 0, r
        paths.append(taken["path"])
    # written two days ago, then 300, 200 and 100 seconds ago: the oldest first, by any rule
    for path, age in zip(paths, (2 * 86400, 300, 200, 100)):
        backdate(path, age)
    agent.write_policy(policy + 'max_age = "1d"\nmax_files = 2\n')
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    wait_for(lambda: len(removals(agent)) >= 2, timeout=60, what="the pass after the reload")
    aged, counted = removals(agent)
    assert aged["DSAGENT_DUMP_PATH"] == paths[0] and aged["DSAGENT_RETENTION_REASON"] == "max_age", aged
    assert aged["DSAGENT_RETENTION_DETAIL"] == "older than max_age (1 day)", aged
    assert counted["DSAGENT_DUMP_PATH"] == paths[1] and counted["DSAGENT_RETENTION_REASON"] == "max_files", counted
    assert counted["DSAGENT_RETENTION_DETAIL"] == "3 files, max_files 2", counted
    for rec, path in ((aged, paths[0]), (counted, paths[1])):
        assert rec["DSAGENT_RETENTION_EVENT"] == "removing" and rec["DSAGENT_DUMP_TYPE"] == "mini", rec
        assert rec["DSAGENT_DUMP_REQUESTER_UID"] == str(uid_of(SVC)), rec
        assert rec["DSAGENT_TARGET_PID"] == str(own.pid) and int(rec["DSAGENT_DUMP_SIZE"]) > 0, rec
        assert not os.path.exists(path), path
    listed = [d["path"] for d in json.loads(dsctl(agent, SVC, "--json", "dumps").stdout)]
    assert sorted(listed) == sorted(paths[2:]), listed

    # a new agent over the same dump_dir: what is due goes at its start, with no request and no reload
    backdate(paths[2], 3 * 86400)
    agent.stop()
    again = Agent(policy=f'[agent]\ndump_dir = "{agent.dumps}"\nmax_age = "2d"\n')
    wait_for(lambda: removals(again), timeout=60, what="the pass at start")
    started, = removals(again)
    assert started["DSAGENT_DUMP_PATH"] == paths[2] and started["DSAGENT_RETENTION_REASON"] == "max_age", started
    assert not os.path.exists(paths[2]) and os.path.exists(paths[3])


@test
def a_reload_during_a_pass_has_a_pass_under_the_new_policy_at_once():
    """A reload while a pass ran got no pass of its own: the pass running had read the policy before, and the next
    came only with the next period (a minute), so what the new policy removes stayed until then. A pass follows the
    running one at once now. The period is an hour here (a test hook): the removal comes only by that pass."""
    dump_dir = make_dir(None, 0o711)
    old = os.path.join(dump_dir, "put-there-by-hand")
    with open(old, "w") as f:
        f.write("old")
    backdate(old, 10 * 86400)
    pause = harness.Pause("retention-pass")
    policy = lambda max_age: f'[agent]\ndump_dir = "{dump_dir}"\nmax_age = "{max_age}"\n'
    agent = Agent(policy=policy("30d"),
                  env={**pause.env, **NOTES, "DSAGENT_TEST_RETENTION_PERIOD_MS": str(3600 * 1000)})
    pause.wait(agent)  # the pass at start, under max_age 30 days, stands before it lists dump_dir
    agent.write_policy(policy("5d"))
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    assert not pause.resumed(agent), "the pass ended before the reload: the test proves nothing"
    pause.end()
    # 30 s: a bound only against a hang; the pass follows within ms, where the next period is an hour away
    wait_for(lambda: not os.path.exists(old), what="the pass after the one the reload met")
    removed, = removals(agent)
    assert removed["DSAGENT_DUMP_PATH"] == old and removed["DSAGENT_RETENTION_REASON"] == "max_age", removed
    # the pass the reload met went by the policy it began under: it removed nothing. The follow-up pass's note
    # comes after its removal: waited for (30 s: a bound against a hang; it follows within ms)
    wait_for(lambda: "test-hook: retention: a pass ended: 1 files removed" in open(agent.log_path).read(),
             what="the follow-up pass's end")
    after = open(agent.log_path).read().split("test-hook: resumed at retention-pass\n", 1)[1]
    assert after.index("test-hook: retention: a pass ended: 0 files removed") < \
        after.index("test-hook: retention: a pass ended: 1 files removed"), after


def max_files_3_with_alices_dump(pid):
    """An agent with max_files = 3 whose rule lets alice dump svc's processes, and alice's dump of @pid in its
    dump_dir, the oldest file there, as an earlier day's dump would be. Returns the agent and alice's dump."""
    policy = ('[agent]\ndump_dir = "@DUMP_DIR@"\nmax_files = 3\n\n[[rule]]\nname = "alice-dumps"\n'
              f'users = ["{ALICE}"]\ncommands = ["dump"]\ntargets.users = ["{SVC}"]\ndump_types = ["mini"]\n')
    agent = Agent(policy=policy)
    r, alices = dump(agent, ALICE, pid)
    assert r.returncode == 0, r
    backdate(alices["path"], 600)
    return agent, alices


def the_max_files_removal(agent):
    """The one max_files removal of a pass run now: a reload has one run (else the next minute's would); 60 s is
    a bound only against a hang, the pass ends within ms."""
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    removed, = wait_for(lambda: removals(agent, DSAGENT_RETENTION_REASON="max_files"), timeout=60,
                        what="the max_files removal")
    return removed


@test
def one_users_many_dumps_never_count_another_users_dump_out_of_max_files():
    """max_files took the oldest files whoever had asked for them: mallory, dumping her own process (owner_access,
    nobody's grant) as often as max_files, had the agent remove alice's dump of another user's process, recorded
    as max_files. The files go from whoever holds the most, oldest first: mallory's own go, alice's stays."""
    svc = Target(SVC, tmpdir=None, mount_ns=True)
    own = Target(MALLORY, tmpdir=None, mount_ns=True)
    agent, alices = max_files_3_with_alices_dump(svc.pid)
    mallorys = []
    for _ in range(3):
        r, taken = dump(agent, MALLORY, own.pid)
        assert r.returncode == 0, r
        mallorys.append(taken["path"])
    removed = the_max_files_removal(agent)  # four files, one too many
    assert removed["DSAGENT_DUMP_REQUESTER_UID"] == str(uid_of(MALLORY)), removed
    assert removed["DSAGENT_DUMP_PATH"] == mallorys[0], removed
    assert os.path.exists(alices["path"]), "alice's dump was removed for mallory's"
    listed = [d["path"] for d in json.loads(dsctl(agent, ALICE, "--json", "dumps").stdout)]
    assert listed == [alices["path"]], listed


@test
def a_users_subordinate_uids_hold_their_dumps_as_the_user():
    """Retention counted files by the uid that asked: mallory, one person with 65536 host uids of her own
    (/etc/subuid, newuidmap), dumped a process of each of three of them as that uid, and each was a holder of one
    file beside alice: max_files counted alice's dump out (and each uid had a max_use_per_user of its own). The
    files are held by the principal the agent charges, mallory: her oldest goes, alice's stays."""
    svc = harness.FakeRuntime("dumper")
    agent, alices = max_files_3_with_alices_dump(svc.pid)
    mallorys = []
    for k in range(3):
        uid = harness.subordinate_range(MALLORY) + k
        tmpdir = make_dir()
        os.chown(tmpdir, uid, harness.subordinate_range(MALLORY, "/etc/subgid") + k)
        runtime = harness.Process(harness.as_subordinate(MALLORY, [
            "env", f"TMPDIR={tmpdir}", harness.PYTHON, os.path.join(harness.HERE, "fake_runtime.py"), "dumper",
            os.path.join(tmpdir, "fake.log")], k))
        pid = int(runtime.read_line("listening pid=").split("=")[1])
        assert os.stat(f"/proc/{pid}").st_uid == uid  # the attack is in place: a uid of the host, not hers
        r = subprocess.run(harness.as_subordinate(MALLORY, [harness.DSCTL, "--socket", agent.socket, "--json", "dump",
                                                            str(pid)], k),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=harness.DUMP_BOUND)
        assert r.returncode == 0, r
        mallorys.append(json.loads(r.stdout)["path"])
        backdate(mallorys[-1], 300 - 100 * k)  # in the order taken, each younger than alice's
    removed = the_max_files_removal(agent)  # four files, one too many
    assert removed["DSAGENT_DUMP_PATH"] == mallorys[0], removed
    assert removed["DSAGENT_DUMP_REQUESTER_UID"] == str(harness.subordinate_range(MALLORY)), removed
    assert os.path.exists(alices["path"]), "alice's dump was counted out by mallory's subordinate uids"


def alices_link_is_refused(place, victim, kept):
    """alice's link @place/dsagent -> @victim, a root's directory with a dumps/ holding @kept, root's file past
    max_age; an agent whose dump_dir is @place/dsagent/dumps refuses the path at its first pass, removing nothing,
    and answers dsctl dumps so. Returns the agent."""
    r = subprocess.run(harness.as_user(ALICE, ["ln", "-s", victim, os.path.join(place, "dsagent")]),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert r.returncode == 0, r.stdout
    assert os.lstat(os.path.join(place, "dsagent")).st_uid == uid_of(ALICE)  # the attack is in place
    agent = Agent(policy=f'[agent]\ndump_dir = "{place}/dsagent/dumps"\n')
    said = ("retention: the pass over dump_dir failed: the dump directory's path passes a directory others may "
            "write, or a link that is not root's")
    # the pass at start; 60 s: a bound only against a hang, the pass ends within ms
    wait_for(lambda: said in open(agent.log_path).read() or not os.path.exists(kept), timeout=60,
             what="the pass to refuse the path (or to remove root's file)")
    assert os.path.exists(kept), f"retention removed a file of root's outside dump_dir, through a link in {place}"
    assert not removals(agent), removals(agent)
    r = dsctl(agent, ALICE, "dumps")
    assert r.returncode != 0 and "a link that is not root's" in r.stderr, r
    return agent


@test
def a_link_on_dump_dirs_way_takes_the_agent_nowhere():
    """dump_dir's existing part was opened as given, following links, and only what the agent made had to be
    root's: where a user may write on dump_dir's way (a group's shared directory; /tmp where the kernel's
    protected_symlinks is off), a link of the user's in place of a directory the agent had still to make moved
    dump_dir into any directory of root's whose name fit, and retention removed root's old files there. A
    link is followed only when root made it, and every directory on the way must be root's, writable by no one
    else unless sticky: the agent refuses the path, says why, and removes nothing."""
    shared = make_dir(None, 0o775)  # a group's place: root's, its group may write, not sticky
    os.chown(shared, 0, grp.getgrnam(harness.OPS).gr_gid)
    victim = make_dir(None, 0o755)  # root's own directory with a "dumps" in it, as any root tree may have
    os.mkdir(os.path.join(victim, "dumps"), 0o700)
    kept = os.path.join(victim, "dumps", "roots-file")
    with open(kept, "w") as f:
        f.write("root's")
    backdate(kept, 10 * 86400)  # past the built-in max_age (3 days)
    # alice, in the group, puts a link where the agent's dump_dir has a directory still to make
    agent = alices_link_is_refused(shared, victim, kept)
    # the same link in a sticky directory anyone may write, as /tmp: every directory on the way is as it may be,
    # and the agent walks the path itself, where the kernel's protected_symlinks does not apply: the link is
    # refused because it is alice's
    alices_link_is_refused(make_dir(None, 0o1777), victim, kept)

    # a link root made is followed, as an administrator's /var/lib/dsagent -> /srv/dsagent is
    roots = make_dir(None, 0o755)
    os.symlink(make_dir(None, 0o755), os.path.join(roots, "store"))
    agent.write_policy(f'[agent]\ndump_dir = "{roots}/store/dumps"\n')
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    r = dsctl(agent, ALICE, "dumps")
    assert r.returncode == 0, r
    assert os.path.isdir(os.path.join(roots, "store", "dumps")), "the dump directory was not made through root's link"


@test
def a_tables_readers_remove_its_artifacts_only_where_it_says_so():
    """Only root could remove a table's artifacts (exit 4 for its readers). A table with readers_may_remove lets
    its readers remove them; one without still refuses them, saying why; a user who is no reader learns nothing."""
    high, unit = target_in_unit()
    # one collection session of an owner's processes runs at a time: the table that fires second is held back
    # once (recorded, counted against its limit), and a limit of five lets it take its stacks at a later sample
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\n' +
                  table("removable", unit, 'then.stacks = true', 'readers_may_remove = true\nlimit = "5/1h"') +
                  table("kept", unit, 'then.stacks = true', 'limit = "5/1h"'))
    for name in ("removable", "kept"):
        wait_for(lambda: [c for c in collect_records(agent, high.pid, "collected") if c["DSAGENT_RULE"] == name],
                 timeout=120, what=f"{name}'s stacks")
    path = {c["DSAGENT_RULE"]: c["DSAGENT_COLLECT_RESULT"].split(" (")[0]
            for c in collect_records(agent, high.pid, "collected")}

    # mallory reads neither: the same words as for a name that does not exist
    r = dsctl(agent, MALLORY, "dumps", "--remove", path["removable"])
    assert r.returncode == EXIT_DENIED and "no dump of that name that you asked for" in r.stderr, r
    assert os.path.exists(path["removable"])
    # alice reads both: the table that does not let its readers remove says so
    r = dsctl(agent, ALICE, "dumps", "--remove", path["kept"])
    assert r.returncode == EXIT_DENIED and "readers_may_remove is not set" in r.stderr and "root may" in r.stderr, r
    assert os.path.exists(path["kept"])
    # and the one that does lets her
    r = dsctl(agent, ALICE, "dumps", "--remove", path["removable"])
    assert r.returncode == 0 and r.stdout == f"removed {path['removable']}\n", r
    assert not os.path.exists(path["removable"]) and os.path.exists(path["kept"])
    records = [rec for rec in agent.records() if rec.get("DSAGENT_COMMAND") == "remove-dump"]
    assert [rec["DSAGENT_DECISION"] for rec in records] == ["denied", "denied", "allowed"], records
    assert records[2]["DSAGENT_REASON"] == (f"removed the dump {path['removable']}, as a reader of [[collect]] "
                                            "removable (readers_may_remove)"), records[2]
    assert records[2]["DSAGENT_CLIENT_UID"] == str(uid_of(ALICE)), records[2]


@test
def nothing_is_removed_while_the_policy_is_broken():
    """A policy that does not load leaves the agent on its built-in settings (dump_dir /var/lib/dsagent/dumps,
    max_age 3 days), not the administrator's, who may keep files longer or elsewhere: no pass runs until a policy
    loads. The agent gets a /var/lib of its own (a mount namespace), so that the host's is never touched."""
    lib = make_dir(None, 0o755)
    dumps = os.path.join(lib, "dsagent", "dumps")
    os.makedirs(dumps)
    for path in (os.path.dirname(dumps), dumps):
        os.chmod(path, 0o711)
    old = os.path.join(dumps, "dump.App.4242.mini.20200101T000000Z.0000000000000001")
    with open(old, "w") as f:
        f.write("core")
    backdate(old, 10 * 86400)
    private_lib = ("unshare", "--mount", "--propagation", "private", "sh", "-c",
                   f'mount --bind {lib} /var/lib && exec "$@"', "sh")
    agent = Agent(policy='[agent]\nmax_age = "forever"\n', wrapper=private_lib)
    said = "dsagent: retention: the policy is broken: nothing is removed"
    wait_for(lambda: said in open(agent.log_path).read() or not os.path.exists(old), timeout=60,
             what="the first pass to be skipped (or to remove the file all the same)")
    assert os.path.exists(old), "removed under the built-in settings of a broken policy"

    # once a policy loads, retention runs under it (its dump_dir is the built-in one, here the agent's own)
    agent.write_policy('[agent]\nmax_age = "5d"\n')
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    wait_for(lambda: not os.path.exists(old), timeout=60, what="the pass under the policy that loaded")
    removed, = removals(agent)
    assert removed["DSAGENT_DUMP_PATH"] == "/var/lib/dsagent/dumps/" + os.path.basename(old), removed
    assert removed["DSAGENT_RETENTION_REASON"] == "max_age", removed


run_tests()
