#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""dsctl dump against the real runtime: every type, exact ACLs, hostile staging, full disks, dying targets."""
import glob
import json
import os
import signal
import stat
import subprocess
import threading
import time

import harness
from harness import (ALICE, DSCTL, DUMP_BOUND, EXIT_BUSY, EXIT_DENIED, EXIT_RUNTIME_UNREACHABLE, HANG_BOUND,
                     MALLORY, OPS, SOURCE, SVC, AcceptWatch, Agent, FakeRuntime, Process, Target, acl_of, as_user,
                     can_read, dsctl, is_elf_core, make_dir, run_tests, test, uid_of, wait_for)

EXIT_NO_SPACE = 11


def dump(agent, user, target, *args):
    r = dsctl(agent, user, "--json", "dump", str(target), *args, timeout=DUMP_BOUND)
    return r, (json.loads(r.stdout) if r.returncode == 0 else None)


def staging_dirs(target):
    """Staging directories in the target's /tmp. Tests that count them give the target a /tmp of its own,
    so that no other agent's work on this host can show up there."""
    return glob.glob(os.path.join(f"/proc/{target.pid}/root/tmp", ".dsagent-dump-*"))


def private_target(**kwargs):
    return Target(SVC, tmpdir=None, mount_ns=True, **kwargs)


@test
def every_dump_type_is_an_elf_core_with_exactly_the_right_acl():
    target = private_target()
    agent = Agent()
    mine = make_dir(SVC, 0o700)
    for dump_type in ("mini", "heap", "triage", "full"):
        r, result = dump(agent, SVC, target.pid, "--type", dump_type, "-o", os.path.join(mine, f"{dump_type}.core"))
        assert r.returncode == 0, r
        path = result["path"]
        assert result["type"] == dump_type and result["readable"] and os.path.dirname(path) == agent.dumps
        assert is_elf_core(path), path
        assert os.stat(path).st_uid == 0 and os.stat(path).st_size == result["size"]
        assert acl_of(path) == ["user::rw-", f"user:{uid_of(SVC)}:r--", "group::---", "mask::r--", "other::---"]
        assert can_read(SVC, path) and not can_read(ALICE, path) and not can_read(MALLORY, path)
        copy = os.path.join(mine, f"{dump_type}.core")
        assert os.stat(copy).st_uid == uid_of(SVC) and os.stat(copy).st_mode & 0o777 == 0o600
        assert open(copy, "rb").read() == open(path, "rb").read()
        assert os.getxattr(path, "user.dsagent.dump_type") == dump_type.encode()
        assert os.getxattr(path, "user.dsagent.requester_uid") == str(uid_of(SVC)).encode()
        assert os.getxattr(path, "user.dsagent.target_pid") == str(target.pid).encode()
    assert staging_dirs(target) == []
    # one dump record per dump, with its own MESSAGE_ID
    records = agent.records(message_id=harness.DUMP_MESSAGE_ID)
    assert [r["DSAGENT_DUMP_TYPE"] for r in records] == ["mini", "heap", "triage", "full"]
    assert all(r["DSAGENT_RULE"] == "owner-access" and int(r["DSAGENT_DUMP_SIZE"]) > 0 for r in records)

    listed = json.loads(dsctl(agent, SVC, "--json", "dumps").stdout)
    assert len(listed) == 4
    assert json.loads(dsctl(agent, ALICE, "--json", "dumps").stdout) == []


@test
def clrmd_reads_a_heap_dump_taken_through_the_agent():
    """Microsoft's own dump reader (ClrMD) opens heap and full dumps taken through the agent: the runtime,
    the managed threads with their stacks down to the app's entry point, and a heap it can walk that holds
    the app's 16 arrays of 1 MiB."""
    built = subprocess.run([os.path.join(SOURCE, "tests/tools/clrmd-check/build.sh")], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    assert built.returncode == 0, built.stderr
    target = private_target(args=("--allocate-mb", "16"))
    agent = Agent()
    for dump_type in ("heap", "full"):
        r, result = dump(agent, SVC, target.pid, "--type", dump_type)
        assert r.returncode == 0, (dump_type, r)
        # 300 s: a bound against a hang; ClrMD starts a runtime and reads a dump of some hundred MB in seconds
        read = subprocess.run(["dotnet", built.stdout.strip(), result["path"], "--type", "System.Byte[]"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
        assert read.returncode == 0, (dump_type, read.stderr)
        seen = json.loads(read.stdout)
        assert seen["process_id"] == target.ns_pid, (dump_type, seen["process_id"], target.ns_pid)
        heap = seen["heap"]
        assert heap["can_walk"] and heap["objects"] > 0, (dump_type, heap)
        assert heap["types"]["System.Byte[]"] >= 16, (dump_type, heap)
        threads = seen["threads"]
        assert seen["managed_threads"] == len(threads) >= 1, (dump_type, seen)
        main = [thread for thread in threads if thread["main"]]
        stacks = {thread["os_id"]: thread["frames"] for thread in threads}
        assert len(main) == 1, (dump_type, "no main thread among the managed threads", stacks)
        assert any("Main" in frame for frame in main[0]["frames"]), (dump_type, main[0]["frames"])


@test
def rule_readers_get_read_access_and_nobody_else():
    target = Target(SVC)
    agent = Agent(policy=f"""
[agent]
dump_dir = "@DUMP_DIR@"
[[rule]]
name = "oncall-dumps"
users = ["{ALICE}"]
commands = ["dump"]
targets.users = ["{SVC}"]
dump_types = ["mini"]
readers = ["group:{OPS}", "{MALLORY}"]
""")
    r, result = dump(agent, ALICE, target.pid)
    assert r.returncode == 0, r
    gid = subprocess.run(["getent", "group", OPS], stdout=subprocess.PIPE, text=True).stdout.split(":")[2]
    readers = [f"user:{uid}:r--" for uid in sorted((uid_of(ALICE), uid_of(MALLORY)))]  # getfacl lists by uid
    assert acl_of(result["path"]) == ["user::rw-", *readers, "group::---", f"group:{gid}:r--", "mask::r--",
                                      "other::---"]
    assert can_read(MALLORY, result["path"]) and not can_read(SVC, result["path"])


@test
def dump_of_a_target_with_private_tmp_in_its_own_mount_namespace():
    target = Target(SVC, tmpdir=None, mount_ns=True)
    agent = Agent()
    r, result = dump(agent, SVC, target.pid)
    assert r.returncode == 0, r
    assert is_elf_core(result["path"])
    assert staging_dirs(target) == []


@test
def disallowed_type_or_target_is_denied_before_the_runtime_sees_anything():
    target = Target(SVC)
    other = Target(MALLORY)
    agent = Agent(policy=f"""
[agent]
dump_dir = "@DUMP_DIR@"
[[rule]]
name = "mini-only"
users = ["{ALICE}"]
commands = ["dump"]
targets.users = ["{SVC}"]
dump_types = ["mini"]
""")
    watch, other_watch = AcceptWatch(target.pid), AcceptWatch(other.pid)
    r, _ = dump(agent, ALICE, target.pid, "--type", "full")
    assert r.returncode == EXIT_DENIED and "does not allow full dumps" in r.stdout + r.stderr, r
    r, _ = dump(agent, ALICE, other.pid)
    assert r.returncode == harness.EXIT_NO_SUCH_PROCESS, r  # outside her rule: absent for her
    assert watch.accepts() == 0 and other_watch.accepts() == 0
    assert not os.path.exists(agent.dumps) or os.listdir(agent.dumps) == []
    # createdump must ptrace the target, which it cannot while strace does: detach first
    watch.stop()
    r, _ = dump(agent, ALICE, target.pid, "--type", "mini")
    assert r.returncode == 0, r


def hostile_owner(target, action, stop, tally):
    """As the target's own user, keep doing @action to every staging directory that appears. @stop + ".ready"
    appears once it looks, @stop + ".seen" once it found one. When @stop appears, @tally gets "SEEN DONE": how
    often it found a staging directory, and how often @action worked."""
    # 600 s: only for a test that never writes @stop; the race must outlast the dumps a loaded machine takes
    script = f"""
import glob, os, time
deadline, seen, done = time.time() + 600, 0, 0
open({stop!r} + '.ready', 'w').close()
while time.time() < deadline and not os.path.exists({stop!r}):
    for d in glob.glob('/tmp/.dsagent-dump-*'):
        if not seen:
            open({stop!r} + '.seen', 'w').close()
        seen += 1
        p = os.path.join(d, 'dump')
        try:
            {action}
            done += 1
        except OSError:
            pass
open({tally!r} + '.new', 'w').write(f"{{seen}} {{done}}")
os.rename({tally!r} + '.new', {tally!r})
"""
    # in the target's own mount namespace, where its /tmp is
    return Process(["nsenter", f"--target={target.pid}", "--mount", "--"] +
                   as_user(SVC, [harness.PYTHON, "-c", script]))


@test
def a_hostile_owner_racing_the_staging_place_can_do_nothing_in_it():
    """The target's user may search the staging directory and write its FIFO, nothing else: every
    attempt to put something there, replace the FIFO or move the directory fails, while it is there."""
    target = private_target()
    # 60 s: a mini dump is written in a second; the deadline only ends a dump the racer made hang
    agent = Agent("--dump-timeout", "60")
    root_canary = os.path.join(make_dir(None, 0o755, base="/var/tmp"), "root-canary")
    with open(root_canary, "w") as f:
        f.write("root's")
    shared = make_dir(None, 0o777, base="/var/tmp")
    stop, tally = os.path.join(shared, "stop"), os.path.join(shared, "tally")
    actions = {
        "symlink": f"os.symlink({root_canary!r}, os.path.join(d, 'x'))",
        "file": "open(os.path.join(d, 'x'), 'w').close()",
        "fifo": "os.mkfifo(os.path.join(d, 'x'))",
        "directory": "os.mkdir(os.path.join(d, 'x'))",
        "replace-fifo": "os.unlink(p)",
        "rename-fifo": "os.rename(p, p + '.moved')",
        "swap": "os.rename(d, d + '.moved')",
        "chmod": "os.chmod(p, 0o666)",
        "list": "os.listdir(d)",
        "read-fifo": "os.close(os.open(p, os.O_RDONLY | os.O_NONBLOCK))",
    }
    for name, action in actions.items():
        racer = hostile_owner(target, action, stop, tally)
        wait_for(lambda: os.path.exists(stop + ".ready"), what="the racer to look")
        # two dumps at least, and more until the racer caught a staging directory (a loaded machine): each staging
        # directory lives through its dump's writing, which the racer's busy loop needs a moment of; 12 of them
        # is a count of chances, which load shortens for the racer as much as for the dump
        for n in range(12):
            r, result = dump(agent, SVC, target.pid)
            assert r.returncode == 0, (name, r)
            assert is_elf_core(result["path"]) and os.stat(result["path"]).st_size == result["size"]
            if n >= 1 and os.path.exists(stop + ".seen"):
                break
        open(stop, "w").close()
        wait_for(lambda: os.path.exists(tally), what="the racer's tally")
        racer.stop()
        seen, done = map(int, open(tally).read().split())
        for leftover in (stop, tally, stop + ".ready", stop + ".seen"):
            if os.path.exists(leftover):
                os.unlink(leftover)
        # the racer was there while the directory was, and never got anything done
        assert seen > 0 and done == 0, (name, seen, done)
        assert open(root_canary).read() == "root's" and os.lstat(root_canary).st_nlink == 1
        assert staging_dirs(target) == [], (name, staging_dirs(target))


@test
def a_dump_that_does_not_fit_fails_cleanly_and_leaves_no_file():
    target = private_target()
    small = make_dir(None, 0o755)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0711", "tmpfs", small], check=True)
    harness.scope.callback(subprocess.run, ["umount", "-l", small])
    # loosen the guards so the dump's own size is what does not fit
    agent = Agent(policy=f'[agent]\ndump_dir = "{small}"\nmax_use = "1T"\nkeep_free = "1"\n')
    r, _ = dump(agent, SVC, target.pid)
    assert r.returncode == EXIT_NO_SPACE and "does not fit" in r.stdout + r.stderr, r
    # the unnamed file the bytes went to is gone with its fd: the worker that streamed it lets it go once the
    # answer is out, a moment after dsctl has it (a bound only against a leak: the space comes back or not)
    assert os.listdir(small) == [] and staging_dirs(target) == []
    wait_for(lambda: int(subprocess.run(["df", "--output=used", "-B1", small], stdout=subprocess.PIPE,
                                        text=True).stdout.split()[1]) < 64 * 1024, timeout=HANG_BOUND,
             what="the space of the unnamed file back")

    guarded = Agent(policy=f'[agent]\ndump_dir = "{small}"\nmax_use = "1M"\n')
    r, _ = dump(guarded, SVC, target.pid)
    assert r.returncode == EXIT_NO_SPACE and "max_use" in r.stdout + r.stderr, r
    assert os.listdir(small) == []


@test
def missing_parents_of_dump_dir_are_made_roots_and_0711():
    """An agent run outside the package, whose dump_dir's parents do not exist, answered every dump
    "cannot be created": it makes them now, as mkdir -p, each root's and 0711, and serves the dump."""
    target = private_target()
    base = make_dir(None, 0o755)
    made = [os.path.join(base, "var"), os.path.join(base, "var", "lib"), os.path.join(base, "var", "lib", "dumps")]
    agent = Agent(policy=f'[agent]\ndump_dir = "{made[-1]}"\n')
    r, result = dump(agent, SVC, target.pid, "--type", "mini")
    assert r.returncode == 0, r
    assert os.path.dirname(result["path"]) == made[-1] and is_elf_core(result["path"]), result
    for path in made:
        st = os.lstat(path)
        assert stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and st.st_gid == 0, (path, st)
        assert stat.S_IMODE(st.st_mode) == 0o711, (path, oct(st.st_mode))
    # entered, not listed, by the requester, who reads the dump by name
    assert can_read(SVC, result["path"])


@test
def dump_dir_parents_are_never_made_where_another_user_may_write():
    """Where dump_dir's missing parents would be made in a directory another user made or may write,
    nothing is made: the user could move root's directory away and put one of theirs in its place."""
    target = private_target()
    shared = make_dir(None, 0o1777)  # as /tmp: root's, sticky, writable by all
    mallorys = os.path.join(shared, "dsagent")
    subprocess.run(as_user(MALLORY, ["mkdir", "-m", "0777", mallorys]), check=True)
    elsewhere = make_dir(MALLORY, 0o777)
    link = os.path.join(shared, "link")
    subprocess.run(as_user(MALLORY, ["ln", "-s", elsewhere, link]), check=True)
    alices = make_dir(ALICE, 0o755)
    # the attacker's directories are in place before the agent looks
    assert os.lstat(mallorys).st_uid == uid_of(MALLORY) and os.lstat(link).st_uid == uid_of(MALLORY)
    for dump_dir, where in ((os.path.join(mallorys, "dumps"), mallorys),
                            (os.path.join(link, "dumps"), elsewhere),
                            (os.path.join(alices, "sub", "dumps"), alices),
                            (os.path.join(shared, "new", "dumps"), None)):
        agent = Agent(policy=f'[agent]\ndump_dir = "{dump_dir}"\n')
        r, _ = dump(agent, SVC, target.pid, "--type", "mini")
        if where is None:
            # in a sticky directory of root's, with nobody's directory in the way: made, root's alone
            assert r.returncode == 0, r
            st = os.lstat(os.path.dirname(dump_dir))
            assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o711, st
            continue
        assert r.returncode != 0 and "others may write" in r.stdout + r.stderr, (dump_dir, r)
        assert os.listdir(where) == [], (where, os.listdir(where))


@test
def target_killed_mid_dump_gives_a_clean_error_and_no_staging():
    target = private_target()
    agent = Agent()
    harness.stop_process(target.pid)  # the runtime will not answer until we say so
    pending = subprocess.Popen(as_user(SVC, [DSCTL, "--socket", agent.socket, "dump", str(target.pid)]),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: staging_dirs(target), what="the staging directory")
    stage = staging_dirs(target)[0]
    # while it hangs, a second dump of the same process is refused at once
    r, _ = dump(agent, SVC, target.pid)
    assert r.returncode == EXIT_BUSY and "already in progress" in r.stdout + r.stderr, r
    os.kill(target.pid, signal.SIGKILL)
    out, err = pending.communicate(timeout=60)  # the error comes as the target dies; a bound against a hang
    assert pending.returncode != 0 and err.strip(), (pending.returncode, err)
    assert not os.path.exists(stage)
    assert not os.path.exists(agent.dumps) or os.listdir(agent.dumps) == []


@test
def an_agent_restart_cleans_up_the_staging_an_earlier_one_left():
    target = private_target()
    agent = Agent()
    harness.stop_process(target.pid)
    harness.scope.callback(lambda: os.kill(target.pid, signal.SIGCONT))
    pending = subprocess.Popen(as_user(SVC, [DSCTL, "--socket", agent.socket, "dump", str(target.pid)]),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: staging_dirs(target), what="the staging directory")
    stage = staging_dirs(target)[0]
    agent.proc.kill()
    agent.proc.wait()
    pending.wait(timeout=HANG_BOUND)  # dsctl sees its connection end at once
    assert os.path.exists(stage)
    restarted = subprocess.Popen([harness.DSAGENT, "--listen", agent.socket + "2", "--policy", agent.policy_path,
                                  "--runtime-dir", agent.runtime_dir, "--audit", "stderr"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    harness.scope.callback(lambda: (restarted.kill(), restarted.wait()))
    wait_for(lambda: not os.path.exists(stage), what="the new agent to remove the old staging directory")


@test
def a_starting_agent_cleans_only_an_earlier_agents_staging_never_its_own():
    """A starting agent removes, in a worker, the staging directories an agent that died left behind (their notes
    in the runtime directory). A dump asked for at once (socket activation starts the agent for it) stages while
    that worker has not looked yet: its note must not read as an earlier agent's. Before, on a loaded machine the
    worker found the new note and removed the directory under the runtime (createdump: "Could not create output
    file '/tmp/.dsagent-dump-.../dump': No such file or directory"; 1 in 8 runs beside a busy core)."""
    target = private_target()
    # the cleaning worker waits before it looks, as a loaded machine made it, until the dump below has staged
    held = harness.Pause("before-clean", bound=harness.DUMP_BOUND)
    agent = Agent("--dump-start-timeout", "120", env=held.env)
    held.wait(agent)
    pending = stopped_dump(agent, SVC, target)
    staged = staging_dirs(target)
    assert not held.resumed(agent), "cleaned before the dump staged"  # the premise
    held.end()
    wait_for(lambda: "test-hook: stale staging cleaned" in open(agent.log_path).read(),
             what="the clean-up of an earlier agent's staging")
    assert staging_dirs(target) == staged, (staged, staging_dirs(target))
    os.kill(target.pid, signal.SIGCONT)
    out, err = pending.communicate(timeout=120)
    assert pending.returncode == 0, (out, err)
    assert staging_dirs(target) == []


@test
def only_root_reads_a_dump_of_a_process_that_changed_credentials():
    # started by alice, running as svc: its memory is not alice's, nor svc's to hand out. The real
    # runtime opens no diagnostic socket with real and effective uid apart, so a fake plays it.
    target = FakeRuntime("dumper", user=SVC, ruid=ALICE)
    agent = Agent(policy=f"""
[agent]
dump_dir = "@DUMP_DIR@"
[[rule]]
name = "svc-dumps"
users = ["{ALICE}"]
commands = ["dump"]
targets.users = ["{SVC}"]
dump_types = ["mini"]
""")
    r, result = dump(agent, ALICE, target.pid)
    assert r.returncode == 0, r
    assert not result["readable"]
    assert acl_of(result["path"]) == ["user::rw-", "group::---", "other::---"]
    assert not can_read(ALICE, result["path"]) and not can_read(SVC, result["path"])
    r, _ = dump(agent, ALICE, target.pid, "-o", os.path.join(make_dir(ALICE), "x.core"))
    assert r.returncode == EXIT_DENIED, r


@test
def only_root_reads_a_dump_of_a_process_that_made_itself_undumpable():
    # all its ids are svc's, but it said no process of its user may read its memory (PR_SET_DUMPABLE 0);
    # the kernel shows that on the files in its /proc directory, not on the directory itself
    target = FakeRuntime("dumper:undumpable", user=SVC)
    assert os.stat(f"/proc/{target.pid}").st_uid == harness.uid_of(SVC)
    assert os.stat(f"/proc/{target.pid}/status").st_uid == 0
    agent = Agent()
    r, result = dump(agent, SVC, target.pid, "--type", "mini")
    assert r.returncode == 0, r
    assert not result["readable"], result
    assert acl_of(result["path"]) == ["user::rw-", "group::---", "other::---"]
    assert not can_read(SVC, result["path"])


# The host's one dump slot, taken by a requester a rule grants (not root, who has one slot more than anyone,
# nor a user dumping its own processes, whose dumps take a pool of their own)
HOST_SLOT_POLICY = f"""[agent]
dump_dir = "@DUMP_DIR@"
max_concurrent_dumps = 1
max_dumps_per_user = 2

[[rule]]
name = "host-slot"
users = ["{ALICE}"]
commands = ["dump"]
targets.users = ["{SVC}"]
dump_types = ["mini"]
"""


@test
def max_concurrent_dumps_bounds_dumps_across_targets():
    # a rule's grantee's dumps take the host's slots (a user's of its own processes take slots of their own)
    first, second = private_target(), Target(SVC)
    agent = Agent(policy=HOST_SLOT_POLICY)
    harness.stop_process(first.pid)
    harness.scope.callback(lambda: os.kill(first.pid, signal.SIGCONT))
    pending = subprocess.Popen(as_user(ALICE, [DSCTL, "--socket", agent.socket, "dump", str(first.pid)]),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: staging_dirs(first), what="the first dump to start")
    r, _ = dump(agent, ALICE, second.pid)
    assert r.returncode == EXIT_BUSY and "max_concurrent_dumps" in r.stdout + r.stderr, r
    # root has one slot more than anyone: others' dumps never shut the administrator out
    r, _ = dump(agent, "root", second.pid)
    assert r.returncode == 0, r
    os.kill(first.pid, signal.SIGCONT)
    assert pending.wait(timeout=DUMP_BOUND) == 0
    r, _ = dump(agent, ALICE, second.pid)
    assert r.returncode == 0, r


@test
def max_concurrent_own_dumps_bounds_users_dumps_of_their_own_processes():
    first, second = private_target(), Target(SVC)
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_concurrent_own_dumps = 1\nmax_dumps_per_user = 2\n')
    stopped_dump(agent, SVC, first)
    r, _ = dump(agent, SVC, second.pid)
    assert r.returncode == EXIT_BUSY and "max_concurrent_own_dumps" in r.stdout, r
    # root's dump is not one of them: the host's slot serves it
    r, _ = dump(agent, "root", second.pid)
    assert r.returncode == 0, r


def stopped_dump(agent, user, target):
    """A dump of @target, stopped by SIGSTOP so that its runtime writes nothing, left pending."""
    harness.stop_process(target.pid)
    harness.scope.callback(lambda: os.kill(target.pid, signal.SIGCONT))
    pending = subprocess.Popen(as_user(user, [DSCTL, "--socket", agent.socket, "dump", str(target.pid)]),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    harness.scope.callback(pending.kill)
    wait_for(lambda: staging_dirs(target), what="the stopped target's dump to start")
    return pending


@test
def a_runtime_that_writes_nothing_frees_the_dump_slot_at_the_first_byte_deadline():
    first, second = private_target(), Target(SVC)
    # long enough for the second request to arrive while the first holds the slot, even on a loaded machine: it
    # is asked as soon as the first's staging directory is there, and comes within a second of the 10
    agent = Agent("--dump-start-timeout", "10",
                  policy=HOST_SLOT_POLICY)
    pending = stopped_dump(agent, ALICE, first)
    r, _ = dump(agent, ALICE, second.pid)
    assert r.returncode == EXIT_BUSY and "max_concurrent_dumps" in r.stdout, r
    # the target stays stopped: only the first-byte deadline can end its dump, long before the overall one (and
    # this bound, against a hang, 50 s past it)
    _, err = pending.communicate(timeout=60)
    assert pending.returncode == EXIT_RUNTIME_UNREACHABLE and "--dump-start-timeout" in err, (pending.returncode, err)
    assert staging_dirs(first) == []
    r, _ = dump(agent, ALICE, second.pid)
    assert r.returncode == 0, r


@test
def a_dump_whose_client_leaves_is_cancelled_and_frees_its_slot():
    first, second = private_target(), Target(SVC)
    # 600 s: no deadline of the agent's may end the stopped dump while the case runs; only the client's leaving
    agent = Agent("--dump-start-timeout", "600",
                  policy=HOST_SLOT_POLICY)
    pending = stopped_dump(agent, ALICE, first)
    pending.kill()
    pending.wait()
    wait_for(lambda: [rec for rec in agent.records() if "went away" in rec.get("DSAGENT_REASON", "")],
             what="the cancelled dump's record")
    cancelled, = [rec for rec in agent.records() if "went away" in rec.get("DSAGENT_REASON", "")]
    assert cancelled["DSAGENT_DECISION"] == "failed" and cancelled["DSAGENT_TARGET_PID"] == str(first.pid), cancelled
    assert staging_dirs(first) == []
    # the first target is still stopped, yet its slot is free (a grantee's dumps take the host's slots)
    r, _ = dump(agent, ALICE, second.pid)
    assert r.returncode == 0, r


@test
def one_requester_takes_one_dump_slot_at_a_time_by_default():
    first, second = private_target(), Target(SVC)
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_concurrent_dumps = 4\n')
    stopped_dump(agent, SVC, first)
    r, _ = dump(agent, SVC, second.pid)
    assert r.returncode == EXIT_BUSY and "max_dumps_per_user" in r.stdout, r
    # another requester still gets one
    r, _ = dump(agent, "root", second.pid)
    assert r.returncode == 0, r


def trickling_dump(agent, user, pause):
    """A dump by @user of @user's own fake runtime that writes its core a byte at a time, @pause seconds
    apart, left pending once its first byte is in."""
    # a /tmp of its own: the staging directories the tests look for are this agent's alone
    target = FakeRuntime(f"trickle:{pause}", user=user, private_tmp=True)
    pending = subprocess.Popen(as_user(user, [DSCTL, "--socket", agent.socket, "dump", str(target.pid)]),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    harness.scope.callback(pending.kill)
    wait_for(lambda: os.path.exists(target.log + ".trickling") or pending.poll() is not None,
             what="the runtime's first byte")
    assert pending.poll() is None, pending.communicate()
    return target, pending


def cut_record(agent, target, words):
    wait_for(lambda: [rec for rec in agent.records() if words in rec.get("DSAGENT_REASON", "")],
             what="the cut dump's record")
    cut, = [rec for rec in agent.records() if words in rec.get("DSAGENT_REASON", "")]
    assert cut["DSAGENT_DECISION"] == "failed" and cut["DSAGENT_TARGET_PID"] == str(target.pid), cut
    return cut


@test
def a_trickling_dump_is_cut_at_the_minimum_rate_and_frees_its_slot():
    # 20 bytes a second against a minimum of 1000, measured over 3 s: cut some 3 s after its first
    # byte, where --dump-timeout (300 s) would have let it hold the slot for minutes
    agent = Agent("--dump-stall-timeout", "3", "--dump-min-rate", "1000")
    target, pending = trickling_dump(agent, SVC, "0.05")
    other = FakeRuntime("dumper", user=SVC)
    r, _ = dump(agent, SVC, other.pid)
    assert r.returncode == EXIT_BUSY and "max_dumps_per_user" in r.stdout, r  # the slot is held meanwhile
    # the cut comes some 3 s after the first byte (one stretch of --dump-stall-timeout); a bound against a hang
    _, err = pending.communicate(timeout=60)
    assert pending.returncode == EXIT_RUNTIME_UNREACHABLE and "--dump-min-rate" in err, (pending.returncode, err)
    cut_record(agent, target, "too slowly")
    assert staging_dirs(target) == []
    r, _ = dump(agent, SVC, other.pid)
    assert r.returncode == 0, r


@test
def a_dump_that_slows_down_later_is_cut_at_the_minimum_rate():
    # 3500 bytes in its first 3 s keep up 1000 a second; the trickle after them does not, and the next
    # stretch's check cuts it
    agent = Agent("--dump-stall-timeout", "3", "--dump-min-rate", "1000")
    target, pending = trickling_dump(agent, SVC, "0.05:3500")
    _, err = pending.communicate(timeout=60)  # the cut comes at the second stretch's end, some 6 s in
    assert pending.returncode == EXIT_RUNTIME_UNREACHABLE and "--dump-min-rate" in err, (pending.returncode, err)
    cut = cut_record(agent, target, "too slowly")
    assert "in 3 s" in cut["DSAGENT_REASON"] and " 3500 bytes" not in cut["DSAGENT_REASON"], cut


@test
def a_dump_that_stalls_after_its_first_byte_is_cut_at_the_stall_deadline():
    # one byte, then a minute of nothing: with no minimum rate, the stall deadline alone ends it
    agent = Agent("--dump-stall-timeout", "3", "--dump-min-rate", "0")
    target, pending = trickling_dump(agent, SVC, 60)
    # the cut comes 3 s after the first byte; the bound stays below the trickle's 60 s pause, so that only the
    # stall deadline can have ended it
    _, err = pending.communicate(timeout=40)
    assert pending.returncode == EXIT_RUNTIME_UNREACHABLE and "--dump-stall-timeout" in err, (pending.returncode, err)
    cut_record(agent, target, "no byte for 3 s")
    assert staging_dirs(target) == []


@test
def a_users_trickling_dumps_of_its_own_processes_keep_nobody_elses_dump_waiting():
    # the default slots (max_concurrent_dumps = 1, max_dumps_per_user = 1); the pace is loosened so that
    # the trickle outlives the test: fairness, not the pace, must serve the others
    agent = Agent("--dump-min-rate", "0", "--dump-stall-timeout", "600", policy=f"""
[agent]
dump_dir = "@DUMP_DIR@"
[[rule]]
name = "oncall-dumps"
groups = ["{OPS}"]
commands = ["dump"]
targets.users = ["{SVC}"]
dump_types = ["mini"]
""")
    _, pending = trickling_dump(agent, SVC, 1)
    others = [FakeRuntime("dumper", user=SVC) for _ in range(2)]
    mallorys = FakeRuntime("dumper", user=MALLORY)
    # root, an ops user under a rule, and another user dumping its own process: each served
    for user, target in (("root", others[0]), (ALICE, others[1]), (MALLORY, mallorys)):
        r, result = dump(agent, user, target.pid)
        assert r.returncode == 0 and is_elf_core(result["path"]), (user, r)
    assert pending.poll() is None, "the trickling dump was still running all along"
    # and the trickling user itself is held to its own allowance
    r, _ = dump(agent, SVC, others[0].pid)
    assert r.returncode == EXIT_BUSY and "max_dumps_per_user" in r.stdout, r


@test
def a_users_trickling_dump_of_its_own_process_under_a_rule_keeps_the_hosts_slot_free():
    # without owner_access a rule may grant users dumps of their own processes: the runtime is still theirs
    # to program, so the dump takes the own pool all the same, never the host's one slot
    agent = Agent("--dump-min-rate", "0", "--dump-stall-timeout", "600", policy=f"""
[agent]
dump_dir = "@DUMP_DIR@"
owner_access = false
[[rule]]
name = "own-dumps"
users = ["{SVC}"]
commands = ["dump"]
targets.users = ["{SVC}"]
dump_types = ["mini"]
""")
    _, pending = trickling_dump(agent, SVC, 1)
    other = FakeRuntime("dumper", user=SVC)
    r, result = dump(agent, "root", other.pid)
    assert r.returncode == 0 and is_elf_core(result["path"]), r
    assert pending.poll() is None, "the trickling dump was still running all along"


@test
def a_users_subordinate_uids_count_as_the_user_for_dumps_of_their_own_processes():
    # mallory is one person, but /etc/subuid gives her 65536 uids of the host she may become alone
    # (newuidmap): as one of them, her own dumps must not get a second max_dumps_per_user, nor a second
    # share of max_concurrent_own_dumps
    uid = harness.subordinate_range(MALLORY)
    # 600 s: no deadline may free the held dump's slot while the case runs
    agent = Agent("--dump-start-timeout", "600",
                  policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_dumps_per_user = 1\nmax_concurrent_own_dumps = 4\n')
    held = FakeRuntime("silent", user=MALLORY)
    pending = subprocess.Popen(as_user(MALLORY, [DSCTL, "--socket", agent.socket, "dump", str(held.pid)]),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    harness.scope.callback(pending.kill)
    wait_for(held.received, what="mallory's first dump to reach her runtime")
    other = FakeRuntime("dumper", user=MALLORY)
    r, _ = dump(agent, MALLORY, other.pid)
    assert r.returncode == EXIT_BUSY and "max_dumps_per_user" in r.stdout, r
    # the same, as her subordinate uid: a runtime of its own, and dsctl
    tmpdir = make_dir()
    os.chown(tmpdir, uid, harness.subordinate_range(MALLORY, "/etc/subgid"))
    log = os.path.join(tmpdir, "fake.log")
    runtime = Process(harness.as_subordinate(MALLORY, ["env", f"TMPDIR={tmpdir}", harness.PYTHON,
                                               os.path.join(harness.HERE, "fake_runtime.py"), "dumper", log]))
    pid = int(runtime.read_line("listening pid=").split("=")[1])
    assert os.stat(f"/proc/{pid}").st_uid == uid  # the attack is in place: a uid of the host, not hers
    r = subprocess.run(harness.as_subordinate(MALLORY, [DSCTL, "--socket", agent.socket, "--json", "dump", str(pid)]),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=HANG_BOUND)  # refused at once
    assert r.returncode == EXIT_BUSY and "max_dumps_per_user" in r.stdout, r


if __name__ == "__main__":
    run_tests()
