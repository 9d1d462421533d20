#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Requests that reuse what a worker read about a process moments ago (agent/targets/target-cache.h).

A burst of requests about one process has it read once; its records say how
old the facts they were decided on are (DSAGENT_TARGET_FACTS_AGE_MS). Each
check that keeps reused facts honest has an attack here that it stops: a
process that takes root back as its effective uid, and a pid handed to
another process. Both were run against agents with the checks removed
(target-cache.c entry_holds()): with neither, the first served the now-root
process to a user whose rule covers only the service user, and the second
answered "no such process" about a process that exists. The owner checks
alone stop both (the kernel shows root as the owner of a reaped process's
/proc files); the pidfd's liveness alone stops the second. Comparing only
the owner of /proc/PID/status, a process that is not dumpable was served
after taking root back; comparing only /proc/PID's, a change of dumpability
went unseen.

What a process changes without an exec, its name (command line) and its
cgroup, is read again through the pinned fd when a rule selects on it, and for
a dump: a process renamed or moved out of a rule's cover between two requests
is answered as it is now (before that check, it was served on the old reading).
"""
import json
import os
import pwd
import re
import signal
import subprocess
import time
import uuid

import harness
# harness.scope, never a name imported from it: run_tests() makes a new scope for each case
from harness import (ALICE, DSCTL, DUMP_BOUND, EXIT_DENIED, EXIT_NO_SUCH_PROCESS, HERE, PYTHON, SVC, Agent, FakeRuntime,
                     Process, Target, acl_of, as_user, can_read, claim_pid, dsctl, is_elf_core, make_dir, request_id_of,
                     run_tests, target_app, test, uid_of, wait_for)

# Records decided on a reused reading carry its age. The cases that check a reading was reused make their requests
# one after another, within a second or so of each other even on a loaded machine, and keep the policy's longest
# cache (target_cache_ms = 10000): ten times that to spare.
AGE = "DSAGENT_TARGET_FACTS_AGE_MS"


def info_records(agent, pid):
    return [r for r in agent.records() if r.get("DSAGENT_COMMAND") == "info" and r.get("DSAGENT_TARGET_PID") == str(pid)]


@test
def a_burst_of_requests_reads_the_process_once():
    target = Target(SVC)
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\ntarget_cache_ms = 10000\n')
    for _ in range(4):
        r = dsctl(agent, SVC, "info", str(target.pid))
        assert r.returncode == 0, r
    records = info_records(agent, target.pid)
    assert len(records) == 4, records
    assert AGE not in records[0], records[0]  # a worker read it
    ages = [int(r[AGE]) for r in records[1:]]  # the others reused that reading
    assert ages == sorted(ages) and ages[-1] < 10000, ages
    assert all(r["DSAGENT_DECISION"] == "allowed" for r in records), records

    # target_cache_ms = 0: every request has the process read afresh
    agent.write_policy('[agent]\ndump_dir = "@DUMP_DIR@"\ntarget_cache_ms = 0\n')
    agent.reload()
    for _ in range(3):
        assert dsctl(agent, SVC, "info", str(target.pid)).returncode == 0
    assert all(AGE not in r for r in info_records(agent, target.pid)[4:]), info_records(agent, target.pid)


def take_root_back(dumpable):
    # a service started as root that runs as SVC, root kept as its saved uid (setresuid(svc, svc, 0))
    tmpdir = make_dir(SVC, 0o700)
    log = os.path.join(tmpdir, "fake.log")
    mode = f"regain:{uid_of(SVC)}:{pwd.getpwnam(SVC).pw_gid}" + ("" if dumpable else ":undumpable")
    fake = Process(["env", f"TMPDIR={tmpdir}", PYTHON, os.path.join(HERE, "fake_runtime.py"), mode, log])
    pid = int(fake.read_line("listening pid=").split("=")[1])
    # what the kernel shows: the directory, its effective uid; the files in it, root's unless dumpable
    assert os.stat(f"/proc/{pid}").st_uid == uid_of(SVC)
    assert os.stat(f"/proc/{pid}/status").st_uid == (uid_of(SVC) if dumpable else 0)
    agent = Agent(policy=f"""[agent]
dump_dir = "@DUMP_DIR@"
target_cache_ms = 10000

[[rule]]
name = "svc-info"
users = ["{ALICE}"]
commands = ["info"]
targets.users = ["{SVC}"]
""")
    for _ in range(2):  # the runtime answers "not implemented", after the policy let the request through
        dsctl(agent, ALICE, "info", str(pid))
    first, second = info_records(agent, pid)
    assert first["DSAGENT_RULE"] == "svc-info" and second["DSAGENT_RULE"] == "svc-info", (first, second)
    assert AGE in second, second  # the second was decided on the first one's reading: the cache is in use
    received = len(open(log, "rb").read())
    assert received > 0

    # the attack: within the cache's lifetime, the process takes root back
    os.kill(pid, signal.SIGUSR1)
    wait_for(lambda: os.path.exists(log + ".regained"), what="the process to take root back")  # ms after the signal
    uids = [line for line in open(log + ".regained").read().splitlines() if line.startswith("Uid:")][0].split()
    assert uids[2] == "0", uids  # its effective uid is root's now
    assert os.stat(f"/proc/{pid}").st_uid == 0

    r = dsctl(agent, ALICE, "info", str(pid))
    assert r.returncode == EXIT_NO_SUCH_PROCESS, r  # what her rule does not cover she does not see
    record = agent.record_for(request_id_of(r))
    assert AGE not in record and record["DSAGENT_TARGET_UID"] == "0", record
    assert len(open(log, "rb").read()) == received, "a byte reached the process after it took root back"
    fake.stop()


@test
def a_process_that_takes_root_back_is_read_afresh():
    take_root_back(dumpable=True)


@test
def a_process_not_dumpable_that_takes_root_back_is_read_afresh():
    # its /proc files are root's before and after: only the directory shows the change
    take_root_back(dumpable=False)


@test
def a_process_that_stops_being_dumpable_is_read_afresh():
    tmpdir = make_dir(SVC, 0o700)
    log = os.path.join(tmpdir, "fake.log")
    fake = Process(["env", f"TMPDIR={tmpdir}", PYTHON, os.path.join(HERE, "fake_runtime.py"),
                    f"regain:{uid_of(SVC)}:{pwd.getpwnam(SVC).pw_gid}", log])
    pid = int(fake.read_line("listening pid=").split("=")[1])
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\ntarget_cache_ms = 10000\n')
    for _ in range(2):
        dsctl(agent, SVC, "info", str(pid))
    assert AGE in info_records(agent, pid)[1]
    os.kill(pid, signal.SIGUSR2)
    wait_for(lambda: os.path.exists(log + ".undumpable"), what="the process to turn undumpable")  # ms, as above
    assert os.stat(f"/proc/{pid}/status").st_uid == 0 and os.stat(f"/proc/{pid}").st_uid == uid_of(SVC)
    dsctl(agent, SVC, "info", str(pid))
    assert AGE not in info_records(agent, pid)[2], info_records(agent, pid)[2]
    fake.stop()


@test
def a_reused_pid_is_read_afresh():
    target = Target(SVC, tmpdir="private")
    pid, socket_path = target.pid, target.socket_path
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\ntarget_cache_ms = 10000\n')
    for _ in range(2):
        assert dsctl(agent, SVC, "info", str(pid)).returncode == 0
    assert AGE in info_records(agent, pid)[1]  # the cache holds the first reading

    # the attack: the process dies and its pid goes to another process of its user, a runtime of sorts
    target.process.proc.kill()
    target.process.proc.wait()
    tmpdir = make_dir(SVC, 0o700)
    log = os.path.join(tmpdir, "fake.log")
    substitute = claim_pid(pid, as_user(SVC, ["env", f"TMPDIR={tmpdir}", PYTHON,
                                              os.path.join(HERE, "fake_runtime.py"), "garbage", log]))
    assert substitute, f"pid {pid} could not be handed to a new process"
    substitute.read_line("listening pid=")

    # the request is about the process that has the pid now: read afresh, it reaches that one
    r = dsctl(agent, SVC, "info", str(pid))
    assert r.returncode not in (0, EXIT_NO_SUCH_PROCESS), r  # the substitute answers garbage
    assert open(log, "rb").read().startswith(b"DOTNET_IPC_V1"), "the process that has the pid was not asked"
    record = agent.record_for(request_id_of(r))
    assert AGE not in record, record
    substitute.stop()


def status_ids(pid, key):
    """The ids of a line of /proc/PID/status ("Uid", "Gid"), as numbers."""
    line = next(l for l in open(f"/proc/{pid}/status") if l.startswith(key + ":"))
    return [int(v) for v in line.split()[1:]]


class SavedUidApp:
    """The real .NET app as SVC, every id SVC's, with CAP_SETUID (and CAP_SYS_PTRACE, so that the runtime's
    createdump still reads its memory once its saved uid is root's) as ambient capabilities, as a service
    started with AmbientCapabilities= runs; told to take root as its saved uid once a file exists
    (tests/target-app/SavedUid.cs)."""

    def __init__(self):
        self.tmpdir = make_dir(SVC, 0o700)
        self.trigger = os.path.join(self.tmpdir, "take-root")
        self.process = Process(["setpriv", f"--reuid={SVC}", f"--regid={SVC}", "--init-groups", "--reset-env",
                                "--inh-caps=+setuid,+sys_ptrace", "--ambient-caps=+setuid,+sys_ptrace", "--",
                                "env", "-i", "PATH=/usr/bin:/bin", "DOTNET_CLI_TELEMETRY_OPTOUT=1",
                                f"TMPDIR={self.tmpdir}", target_app(), "--saved-uid-root-when", self.trigger])
        self.pid = int(re.match(r"ready pid=(\d+)", self.process.read_line("ready pid=")).group(1))
        svc = uid_of(SVC)
        # all its ids are SVC's and it is dumpable: under owner_access SVC may dump it
        assert status_ids(self.pid, "Uid") == [svc] * 4, status_ids(self.pid, "Uid")
        assert os.stat(f"/proc/{self.pid}").st_uid == svc and os.stat(f"/proc/{self.pid}/status").st_uid == svc

    def take_root_as_saved_uid(self):
        """The change, done and shown: Uid SVC SVC 0 SVC, while the owners of its /proc files stay SVC's."""
        open(self.trigger, "w").close()
        said = self.process.read_line("s")  # "saved-uid-root Uid: ..." or "setresuid failed: errno N"
        assert said.startswith("saved-uid-root "), said
        svc = uid_of(SVC)
        assert status_ids(self.pid, "Uid") == [svc, svc, 0, svc], status_ids(self.pid, "Uid")
        # what the cache compared before: the owners of /proc/PID and of its status file. Both unmoved:
        # the process stays dumpable, its effective ids are what they were
        assert os.stat(f"/proc/{self.pid}").st_uid == svc and os.stat(f"/proc/{self.pid}/status").st_uid == svc


# the longest target_cache_ms the policy takes: the few requests below come well within it
LONG_CACHE = '[agent]\ndump_dir = "@DUMP_DIR@"\ntarget_cache_ms = 10000\n'


@test
def a_process_that_takes_root_as_its_saved_uid_is_read_afresh_and_not_dumped_for_its_owner():
    """Issue 35: a process of SVC's with CAP_SETUID takes root as its saved uid (setresuid(-1, -1, 0)) within
    the cache's lifetime. Nothing the cache compared moves (its effective ids, its dumpability). Before the
    fix its owner's next requests were decided on the old reading: SVC's dump was taken and published with
    SVC's ACL. Now the reading is stale: read afresh, the process changed credentials, and only root may act."""
    app = SavedUidApp()
    agent = Agent(policy=LONG_CACHE)
    opened = time.monotonic()
    for _ in range(2):
        r = dsctl(agent, SVC, "info", str(app.pid))
        assert r.returncode == 0, r
    assert AGE in info_records(agent, app.pid)[1]  # the cache holds the first reading

    app.take_root_as_saved_uid()

    r = dsctl(agent, SVC, "dump", "--type", "mini", str(app.pid))
    # not a bound on the agent's speed: past the cache's lifetime the dump would be read afresh anyway, and
    # the test would prove nothing. These steps take about a second, two or three on a loaded machine, against
    # the longest cache the policy allows (10 s); the clock started before the reading was made, so it errs early
    assert time.monotonic() - opened < 10, "the machine took longer than target_cache_ms; the test proves nothing"
    assert r.returncode == EXIT_DENIED, r
    assert "target changed credentials; only root may act on it" in r.stderr, r.stderr
    record = agent.record_for(request_id_of(r))
    assert record["DSAGENT_DECISION"] == "denied" and AGE not in record, record
    # nothing was published for SVC, nor for anyone
    assert not os.path.isdir(agent.dumps) or os.listdir(agent.dumps) == [], os.listdir(agent.dumps)
    # and no other command for its owner either: the fresh reading is the one kept now
    r = dsctl(agent, SVC, "info", str(app.pid))
    assert r.returncode == EXIT_DENIED and "target changed credentials" in r.stderr, r


@test
def a_dumps_credentials_are_checked_on_a_reading_taken_when_it_is_whole():
    """The process changes credentials after the decision, while its dump is taken: the check that decides
    who may read the dump reads its status file again rather than trusting the reading the decision was
    made on. Before the fix, SVC's dump of a process whose saved uid had become root's was published with
    SVC's ACL; now it is root's alone."""
    app = SavedUidApp()
    # the agent stops whole right after its decision (a test hook) until the change is done: it takes well under
    # a second (the app looks for its trigger every 50 ms), within the dump's 10 s deadline for its steps. Had
    # the change come before the decision, the decision would have denied the dump, which the test would see;
    # had it come after the dump was whole, the dump would be SVC's, which the test would see too.
    pause = harness.Pause("after-decision")
    agent = Agent(policy=LONG_CACHE, env=pause.env)
    dump = subprocess.Popen(as_user(SVC, [DSCTL, "--socket", agent.socket, "--json", "dump", "--type", "mini",
                                          str(app.pid)]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    harness.scope.callback(lambda: dump.poll() is not None or (dump.kill(), dump.wait()))
    pause.wait(agent)
    app.take_root_as_saved_uid()
    assert not pause.resumed(agent), "the agent went on from its decision before the change"
    pause.end()
    out, err = dump.communicate(timeout=DUMP_BOUND)
    assert dump.returncode == 0, (out, err)
    result = json.loads(out)
    assert not result["readable"], result
    assert is_elf_core(result["path"])
    assert acl_of(result["path"]) == ["user::rw-", "group::---", "other::---"], acl_of(result["path"])
    assert not can_read(SVC, result["path"])
    record = [r for r in agent.records() if r.get("DSAGENT_COMMAND") == "dump"][-1]
    assert record["DSAGENT_DECISION"] == "allowed" and record["DSAGENT_RULE"] == "owner-access", record


def env_records(agent, pid):
    return [r for r in agent.records() if r.get("DSAGENT_COMMAND") == "env" and r.get("DSAGENT_TARGET_PID") == str(pid)]


def env_as(agent, user, pid):
    """@user's env request and its record (the agent writes it before it answers)."""
    before = len(env_records(agent, pid))
    r = dsctl(agent, user, "env", str(pid))
    records = env_records(agent, pid)
    assert len(records) == before + 1, (before, records)
    return r, records[-1]


def renaming_policy(selector):
    return f"""[agent]
dump_dir = "@DUMP_DIR@"
target_cache_ms = 10000

[[rule]]
name = "public-api"
users = ["{ALICE}"]
commands = ["env", "dump"]
dump_types = ["mini"]
{selector}
"""


@test
def a_process_that_renames_itself_is_decided_on_its_name_now():
    """A rule lets ALICE read the environment of processes named "public-api", and dump them. Between
    her requests, well within the cache's lifetime, the process names itself "private-api" and back
    (its own to do: it rewrites its argv[0], as setproctitle() does). Every answer is the one its name
    at that moment gets: served while it is "public-api", "no such process" while it is not, and its
    dump's file is named after it. Before the fix, the first request after each rename was decided
    on the name read up to target_cache_ms before: she read the environment of "private-api"."""
    fake = FakeRuntime("renamer:public-api:private-api")
    pid = fake.pid
    agent = Agent(policy=renaming_policy('targets.names = ["public-api"]'))
    r, first = env_as(agent, ALICE, fake.pid)
    assert r.returncode == 0 and "RENAMER_VARIABLE=" in r.stdout, r
    name, dumps = "public-api", 0
    for round in range(20):
        # the cache holds while nothing changed: the second request reuses the first one's reading
        # (one the process was invisible to her in is not kept: its socket was never looked for)
        r, record = env_as(agent, ALICE, pid)
        assert (r.returncode == 0) == (name == "public-api") == (AGE in record), (round, name, r, record)
        os.kill(pid, signal.SIGUSR1)
        name = fake.process.read_line("renamed ").split()[1]
        assert open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0] == name.encode()

        r, record = env_as(agent, ALICE, pid)
        if name == "public-api":
            assert r.returncode == 0 and "RENAMER_VARIABLE=" in r.stdout, (round, r)
            assert record["DSAGENT_DECISION"] == "allowed" and record["DSAGENT_RULE"] == "public-api", record
        else:
            # what her rule no longer covers she does not see, and the runtime is not asked
            assert r.returncode == EXIT_NO_SUCH_PROCESS and r.stdout == "", (round, r)
            assert record["DSAGENT_DECISION"] == "denied" and "absent" in record["DSAGENT_REASON"], record
        if round % 3 == 0:
            received = len(fake.received())
            d = dsctl(agent, ALICE, "--json", "dump", "--type", "mini", str(pid))
            if name == "public-api":
                assert d.returncode == 0, (round, d)
                assert os.path.basename(json.loads(d.stdout)["path"]).startswith(f"dump.{name}.{pid}."), d.stdout
                dumps += 1
            else:
                assert d.returncode == EXIT_NO_SUCH_PROCESS, (round, d)
                assert len(fake.received()) == received, "the runtime was asked for a dump under the old name"
    assert dumps > 0


@test
def a_dump_is_named_after_the_process_as_it_is_named_now():
    """A rule by user, which decides on no name: a reading is reused as it is, but not for a dump,
    whose file and its label are named after the process. Before the fix, the dump after a rename,
    within target_cache_ms, carried the name the process had before."""
    fake = FakeRuntime("renamer:public-api:private-api")
    agent = Agent(policy=renaming_policy(f'targets.users = ["{SVC}"]'))
    assert env_as(agent, ALICE, fake.pid)[0].returncode == 0
    r, record = env_as(agent, ALICE, fake.pid)
    assert r.returncode == 0 and AGE in record, record  # the first reading is in the cache
    for round in range(4):
        os.kill(fake.pid, signal.SIGUSR1)
        name = fake.process.read_line("renamed ").split()[1]
        d = dsctl(agent, ALICE, "--json", "dump", "--type", "mini", str(fake.pid))
        assert d.returncode == 0, d
        path = json.loads(d.stdout)["path"]
        assert os.path.basename(path).startswith(f"dump.{name}.{fake.pid}."), (round, name, path)
        try:  # its label too, where the file system keeps user attributes
            label = os.getxattr(path, "user.dsagent.target_name").decode()
        except OSError:
            label = name
        assert label == name, (round, name, label)


def cgroup_roots():
    """The hierarchies a process's cgroup path is read from: systemd's named one and the unified one."""
    roots = [root for root in ("/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified", "/sys/fs/cgroup")
             if os.path.exists(os.path.join(root, "cgroup.procs"))]
    assert roots, "no writable cgroup hierarchy"
    return roots


def make_cgroups(*names):
    """Root-owned cgroups /NAME in every hierarchy; removed (their processes sent back to the root) after."""
    roots = cgroup_roots()
    for root in roots:
        for name in names:
            os.mkdir(os.path.join(root, name))

    def remove():
        for root in roots:
            for name in names:
                for left in open(os.path.join(root, name, "cgroup.procs")).read().split():
                    try:
                        move_to(left, "")
                    except OSError:
                        pass  # it exited meanwhile
                wait_for(lambda: not open(os.path.join(root, name, "cgroup.procs")).read(),
                         what="the test cgroup to empty")
                os.rmdir(os.path.join(root, name))
    harness.scope.callback(remove)


def move_to(pid, name):
    """Moves @pid to /NAME (the root for ""), as root may: the whole process, in every hierarchy."""
    for root in cgroup_roots():
        with open(os.path.join(root, name, "cgroup.procs"), "w") as f:
            f.write(str(pid))


@test
def a_process_moved_to_another_cgroup_is_decided_on_its_cgroup_now():
    """A rule lets ALICE read the environment of the processes in one cgroup. Between her requests,
    within the cache's lifetime, root moves the real .NET app to another cgroup and back (as its owner
    could within a subtree delegated to it). Every answer is the one its cgroup at that moment gets,
    and each record names that cgroup. Before the fix, the first request after each move was decided
    on the cgroup read up to target_cache_ms before."""
    tag = uuid.uuid4().hex[:8]
    covered, other = f"dsagent-it-{tag}-covered", f"dsagent-it-{tag}-other"
    target = Target(SVC)
    make_cgroups(covered, other)
    move_to(target.pid, covered)
    agent = Agent(policy=renaming_policy(f'targets.cgroups = ["/{covered}"]'))
    r, record = env_as(agent, ALICE, target.pid)
    assert r.returncode == 0 and record["DSAGENT_TARGET_CGROUP"] == f"/{covered}", (r, record)
    where = covered
    for round in range(20):
        r, record = env_as(agent, ALICE, target.pid)
        assert (r.returncode == 0) == (where == covered) == (AGE in record), (round, r, record)
        where = other if where == covered else covered
        move_to(target.pid, where)
        assert f":/{where}\n" in open(f"/proc/{target.pid}/cgroup").read()

        r, record = env_as(agent, ALICE, target.pid)
        assert record["DSAGENT_TARGET_CGROUP"] == f"/{where}", (round, record)
        if where == covered:
            assert r.returncode == 0 and "TMPDIR=" in r.stdout, (round, r)
            assert record["DSAGENT_DECISION"] == "allowed", record
        else:
            assert r.returncode == EXIT_NO_SUCH_PROCESS and r.stdout == "", (round, r)
            assert record["DSAGENT_DECISION"] == "denied" and "absent" in record["DSAGENT_REASON"], record


if __name__ == "__main__":
    run_tests()
