#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Requests that reuse what a worker read about a process moments ago (agent/target-cache.h).

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
"""
import os
import pwd
import signal

from harness import (ALICE, EXIT_NO_SUCH_PROCESS, HERE, PYTHON, SVC, Agent, Process, Target, as_user, claim_pid,
                     dsctl, make_dir, request_id_of, run_tests, test, uid_of, wait_for)

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
    wait_for(lambda: os.path.exists(log + ".regained"), timeout=10, what="the process to take root back")
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
    wait_for(lambda: os.path.exists(log + ".undumpable"), timeout=10, what="the process to turn undumpable")
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


if __name__ == "__main__":
    run_tests()
