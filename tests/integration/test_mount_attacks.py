#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Attacks on the dump path from the target's own user: its own user and mount namespace (mounts
where the agent works), fds kept from the staging place, a /tmp that is not really its own.

Each attack is shown to have been in place (the mount succeeded, the fds were held, the directory
was there) before the test asserts that nothing outside changed."""
import hashlib
import json
import os
import shutil
import subprocess
import time

import harness
from harness import (ALICE, SVC, Agent, FakeRuntime, Process, Target, as_user, dsctl, make_dir, run_tests, test, uid_of,
                     wait_for)

EXIT_RUNTIME_FAILED, EXIT_UNSAFE_FS, EXIT_NO_STAGING = 8, 12, 13
ELF_CORE = 4


def dump(agent, user, pid, *args):
    r = dsctl(agent, user, "--json", "dump", str(pid), *args, timeout=harness.DUMP_BOUND)
    return r, (json.loads(r.stdout) if r.returncode == 0 else None)


def is_elf_core(path):
    with open(path, "rb") as f:
        header = f.read(18)
    return header[:4] == b"\x7fELF" and int.from_bytes(header[16:18], "little") == ELF_CORE


def snapshot(path):
    """Every file below @path with its owner, mode, links and content: what must not change."""
    out = {}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            p = os.path.join(root, name)
            st = os.lstat(p)
            content = open(p, "rb").read() if os.path.isfile(p) and not os.path.islink(p) else None
            out[p] = (st.st_uid, st.st_mode, st.st_nlink, content)
    return out


def victim_tree():
    """A directory of root's with files in it, reachable by path for everyone (0755): what an attacker
    who can mount would like the agent to work in."""
    victim = make_dir(None, 0o755, base="/var/tmp")
    for name in ("precious", "also-precious"):
        with open(os.path.join(victim, name), "w") as f:
            f.write(name)
    os.makedirs(os.path.join(victim, "sub"))
    with open(os.path.join(victim, "sub", "deep"), "w") as f:
        f.write("deep")
    return victim


def no_staging_left(pid, wait=harness.DUMP_BOUND):
    """No staging directory in the target's /tmp. Some targets share the host's /tmp, where another
    test run's dump may be staging right now: that one goes once its dump ends, within its agent's
    --dump-timeout (300 s) at worst, and @wait is past that; a leaked one never goes. The answer comes
    as soon as none is left."""
    def none():
        return [n for n in os.listdir(f"/proc/{pid}/root/tmp") if n.startswith(".dsagent-dump-")] == []
    deadline = time.monotonic() + wait
    while not none():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def mounts_of(fake):
    return [json.loads(line) for line in open(fake.log + ".mounts")]


@test
def a_hostile_runtime_cannot_mount_a_directory_inside_the_staging_place():
    victim = victim_tree()
    before = snapshot(victim)
    fake = FakeRuntime(f"mounter:inside:{victim}", userns=True)
    agent = Agent()
    r, result = dump(agent, SVC, fake.pid)
    (attempt,) = mounts_of(fake)
    assert snapshot(victim) == before, attempt
    # it tried while the staging directory was there, and may not even make a directory in it
    assert attempt["mounted"] is False and "Permission denied" in attempt["error"], attempt
    # its core went into the agent's pipe: an honest, whole dump
    assert r.returncode == 0 and is_elf_core(result["path"]), r
    assert no_staging_left(fake.pid)


@test
def a_hostile_runtime_mounting_over_the_staging_directory_changes_nothing():
    victim = victim_tree()
    before = snapshot(victim)
    fake = FakeRuntime(f"mounter:over-dir:{victim}", userns=True)
    agent = Agent()
    r, _ = dump(agent, SVC, fake.pid)
    (attempt,) = mounts_of(fake)
    assert attempt["mounted"] is True, attempt  # root's directory was mounted on the staging directory
    # the runtime "wrote" into root's directory (it may not) and said OK: no dump arrived, and the
    # agent says so; it made nothing in the mounted directory and removed nothing from it
    assert r.returncode == EXIT_RUNTIME_FAILED and "no dump arrived" in r.stdout, r
    assert snapshot(victim) == before
    assert os.listdir(agent.dumps) == []


@test
def a_file_of_the_user_mounted_over_the_dump_is_never_published():
    mine = os.path.join(make_dir(SVC, 0o755, base="/var/tmp"), "mine")
    with open(mine, "w") as f:
        f.write("the attacker's own file")
    os.chown(mine, uid_of(SVC), uid_of(SVC))
    fake = FakeRuntime(f"mounter:over-fifo:{mine}", userns=True)
    agent = Agent()
    r, _ = dump(agent, SVC, fake.pid)
    (attempt,) = mounts_of(fake)
    assert attempt["mounted"] is True and attempt["wrote"] is True, attempt  # it wrote its core into its file
    assert r.returncode == EXIT_RUNTIME_FAILED and "no dump arrived" in r.stdout, r
    # still the user's own plain file: not made root's, no ACL entry added
    acl = subprocess.run(["getfacl", "--omit-header", "--absolute-names", "--numeric", mine],
                         stdout=subprocess.PIPE, text=True).stdout.split()
    assert os.stat(mine).st_uid == uid_of(SVC) and acl == ["user::rw-", "group::r--", "other::r--"], acl
    assert open(mine, "rb").read()[:4] == b"\x7fELF"  # its core did land there
    assert os.listdir(agent.dumps) == []


def watcher(target, mode, arg, shared, userns):
    """staging_watcher.py as the target's user, in the target's mount namespace, and in its user namespace
    (which the user made, so the user may enter it and mount there) when @userns."""
    stop, tally = os.path.join(shared, "stop"), os.path.join(shared, "tally")
    # a copy where the target's namespace sees it: a source tree under /tmp is hidden by its private /tmp
    copy = os.path.join(shared, "staging_watcher.py")
    shutil.copy(os.path.join(harness.HERE, "staging_watcher.py"), copy)
    os.chmod(copy, 0o644)
    script = [harness.PYTHON, copy, mode, arg, stop, tally]
    if userns:
        argv = as_user(SVC, ["nsenter", f"--target={target.pid}", "--user", "--mount", "--preserve-credentials"]
                       + script)
    else:
        argv = ["nsenter", f"--target={target.pid}", "--mount", "--"] + as_user(SVC, script)
    process = Process(argv)
    # watching before the dump begins, else a loaded machine could stage and publish it before the watcher ran
    process.read_line("watching")

    def result():
        open(stop, "w").close()
        wait_for(lambda: os.path.exists(tally), what="the watcher's tally")
        process.stop()
        return json.load(open(tally))
    return result


@test
def a_watcher_mounting_during_a_real_dump_changes_nothing():
    victim = victim_tree()
    before = snapshot(victim)
    shared = make_dir(None, 0o777, base="/var/tmp")
    # the real runtime, in a user and mount namespace its user made (its /tmp is the host's)
    target = Target(SVC, userns="")
    agent = Agent()
    for mode in ("mount-inside", "mount-over-dir"):
        result = watcher(target, mode, victim, shared, userns=True)
        r, out = dump(agent, SVC, target.pid, "--type", "heap")
        tally = result()
        os.unlink(os.path.join(shared, "stop"))
        os.unlink(os.path.join(shared, "tally"))
        assert snapshot(victim) == before, (mode, tally)
        assert tally["seen"] >= 1, (mode, tally)
        if mode == "mount-inside":
            # it was there, and could not even make the directory to mount on
            assert tally["done"] == 0 and "Permission denied" in tally["errors"], tally
            assert r.returncode == 0 and is_elf_core(out["path"]), r
        else:
            # root's directory was on the staging directory: createdump found no pipe there
            assert tally["done"] == 1, tally
            assert r.returncode == EXIT_RUNTIME_FAILED, r
        assert no_staging_left(target.pid)
    # the runtime serves on
    r, out = dump(agent, SVC, target.pid)
    assert r.returncode == 0, r


@test
def a_tmp_mounted_from_a_directory_the_user_does_not_own_is_refused():
    victim = victim_tree()
    before = snapshot(victim)
    # its socket lives elsewhere: the runtime needs a TMPDIR it may write
    sockets = make_dir(SVC, 0o700, base="/var/tmp")
    target = Target(SVC, tmpdir=sockets, userns=f"mount --bind {victim} /tmp")
    agent = Agent()
    # the target's /tmp really is root's directory
    assert os.stat(f"/proc/{target.pid}/root/tmp").st_ino == os.stat(victim).st_ino
    r, _ = dump(agent, SVC, target.pid)
    assert r.returncode == EXIT_NO_STAGING and "neither its user's own" in r.stdout, r
    assert snapshot(victim) == before
    # another user's shared directory is no better: its owner could move the staging directory away
    other = make_dir(harness.MALLORY, 0o1777, base="/var/tmp")
    target2 = Target(SVC, tmpdir=sockets, userns=f"mount --bind {other} /tmp")
    r, _ = dump(agent, SVC, target2.pid)
    assert r.returncode == EXIT_NO_STAGING, r
    assert os.listdir(other) == []
    # the user's own private directory is a fine /tmp
    own = make_dir(SVC, 0o700, base="/var/tmp")
    target3 = Target(SVC, tmpdir=sockets, userns=f"mount --bind {own} /tmp")
    r, out = dump(agent, SVC, target3.pid)
    assert r.returncode == 0 and is_elf_core(out["path"]), r
    assert os.listdir(own) == []


@test
def fds_kept_from_the_staging_place_cannot_change_a_published_dump():
    shared = make_dir(None, 0o777, base="/var/tmp")
    target = Target(SVC, tmpdir=None, mount_ns=True)
    agent = Agent()
    result = watcher(target, "hold-fds", "-", shared, userns=False)
    r, out = dump(agent, SVC, target.pid, "--type", "heap")
    assert r.returncode == 0, r
    path = out["path"]
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    tally = result()  # it writes through every fd and mapping it kept for 2 s before it reports
    assert hashlib.sha256(open(path, "rb").read()).hexdigest() == digest, tally
    # it held the pipe open for writing while the dump ran (it could not open it any other way)
    assert tally["held"] >= 1 and tally["maps"] == 0, tally
    assert any("Permission denied" in e for e in tally["errors"]), tally
    (record,) = agent.records(message_id=harness.DUMP_MESSAGE_ID)
    assert int(record["DSAGENT_DUMP_SIZE"]) == os.stat(path).st_size == out["size"]


@test
def a_target_whose_tmp_is_too_small_for_its_dump_is_dumped_all_the_same():
    target = Target(SVC, tmpdir=None, mount_ns=True, tmp_size="1m", args=("--allocate-mb", "16"))
    agent = Agent()
    r, out = dump(agent, SVC, target.pid, "--type", "heap")
    assert r.returncode == 0, r
    # the dump is many times the size of the /tmp it was staged in
    assert out["size"] > 16 * 1024 * 1024 and is_elf_core(out["path"])
    assert no_staging_left(target.pid)


@test
def a_fuse_server_that_never_answers_holds_up_nobody():
    mountpoint = make_dir(None, 0o755)
    # 120 s: the stall outlasts the case, which takes seconds, and the server's last check below proves it did
    fuse = harness.fuse_stall(mountpoint, 120)
    fuse.read_line("mounted")
    # the server really holds every lookup: a process that looks is stuck until it is killed
    looker = subprocess.Popen(["stat", os.path.join(mountpoint, "x")], stdout=subprocess.DEVNULL)
    try:
        # 2 s: a lookup the server answered returns within ms; one that is held never does, so a loaded machine
        # can only make this pass wrongly, never fail (and the server's own check at the end stands as well)
        looker.wait(timeout=2)
        raise AssertionError(f"the lookup on FUSE returned ({looker.returncode}): the server is not holding it")
    except subprocess.TimeoutExpired:
        looker.kill()
        looker.wait()
    # a process of svc whose TMPDIR lies on it, a real runtime of another user, and the agent
    # a process whose TMPDIR is on the stalled mount, alive for the whole case (300 s; killed as the case ends)
    stalled = Process(as_user(SVC, ["env", f"TMPDIR={mountpoint}/tmp", "sleep", "300"])).wait_exec("sleep")
    other = Target(ALICE)
    agent = Agent()
    # asking about the process on FUSE fails at once, with its own error (30 s each: bounds against a hang,
    # below the stall's 120 s, so a request the stall held ends the case here, not when the stall does)
    r = dsctl(agent, SVC, "info", str(stalled.proc.pid), timeout=30)
    assert r.returncode == EXIT_UNSAFE_FS and "FUSE" in r.stderr, r
    r = dsctl(agent, SVC, "dump", str(stalled.proc.pid), timeout=30)
    assert r.returncode == EXIT_UNSAFE_FS, r
    # and while the server still holds its lookups, everyone else is served
    r = dsctl(agent, ALICE, "--json", "info", str(other.pid), timeout=30)
    assert r.returncode == 0 and json.loads(r.stdout)["pid"] == other.pid, r
    r = dsctl(agent, "root", "--json", "ps", timeout=30)
    listed = [p["pid"] for p in json.loads(r.stdout)]
    assert r.returncode == 0 and other.pid in listed and stalled.proc.pid not in listed, r
    assert fuse.proc.poll() is None, "the FUSE server let go before the end"


@test
def a_mount_made_after_the_table_was_read_is_seen_by_the_next_request():
    """Workers keep the mount tables they read; the kernel's change mark on mountinfo must retire them."""
    target = Target(SVC, tmpdir=None, mount_ns=True)
    # each request to a worker: reused for a second, its first reading would answer the next ones
    # (test_target_cache.py), and this is about what the workers keep
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\ntarget_cache_ms = 0\n')
    # every worker that may take the next requests has this namespace's table by now (12 requests one after
    # another, where a user holds at most 2 workers at once and the agent keeps 2 idle: each worker has served
    # several; a count of requests, not of time, which a loaded machine does not change)
    for _ in range(12):
        r = dsctl(agent, SVC, "info", str(target.pid))
        assert r.returncode == 0, r
    subprocess.run(["nsenter", "-t", str(target.pid), "-m", "mount", "-t", "tmpfs", "tmpfs", "/tmp"], check=True)
    # the socket is under the new mount now; an old table would call the new mount unlisted (exit 9)
    for _ in range(12):
        r = dsctl(agent, SVC, "info", str(target.pid))
        assert r.returncode == harness.EXIT_NOT_DOTNET and "no diagnostic socket" in r.stderr, r


if __name__ == "__main__":
    run_tests()
