#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Crashes systemd-coredump caught, under policy (docs/crashes.md), in a booted systemd.

The real .NET test app runs as a service and dies as .NET apps die: of an unhandled exception, then of
Environment.FailFast. The booted system shares the host's kernel, and so its core_pattern, which this
test must not change (other tests run beside it): so the core reaches systemd-coredump the way the kernel
hands it over, but from here. The runtime, dying, runs createdump (DOTNET_DbgEnableMiniDump=1) into a
FIFO; when createdump opens it, the process is alive and stopped in its crash handler, and this test runs
/lib/systemd/systemd-coredump with the kernel's arguments (%P %u %g %s %t %c %h %d) and that FIFO as its
standard input, exactly as core_pattern's pipe would. It reads the process's /proc, passes the core to
systemd-coredump@.service over /run/systemd/coredump, and that instance stores it compressed and writes
the journal entry: every trusted field is journald's own. (The SELinux guest, with a kernel of its own,
crashes the app through the kernel's core_pattern itself: tests/selinux/guest-suite.sh.)

Then: coredumpctl lists it; the ops user granted crashes on the unit lists it and gets the core, which
stock dotnet-dump analyze opens, showing the app's method and exception; another user sees nothing, and
is answered for it exactly as for a crash that never was; an entry forged with logger, naming the unit and
the very core, lists nothing and hands nothing; a core that is not what systemd-coredump
stored, or is corrupt, is refused with nothing left behind; a decompressor that tries a forbidden call
dies.
"""
import json
import os
import re
import subprocess
import time

from booted import (BUILD, SOURCE, Machine, policy_dir, policy_records, reload_and_wait, run_tests, target_app,
                    test, wait_for)

COREDUMP_MESSAGE_ID = "fc2e22bc6ee647b6b90729ab34a250b1"
DUMP_MESSAGE_ID = "b44be14ffedf48ee806826f1d59bcc4e"
REQUEST_MESSAGE_ID = "27ade2ec85a54471a176f947b0ec018e"
EXIT_NO_SPACE, EXIT_NO_SUCH_CRASH, EXIT_CORE_UNUSABLE = 11, 17, 18

SVC, ALICE, MALLORY = "dst-svc", "dst-alice", "dst-mallory"
OPS = "dst-ops"
CRASH_UNIT = "dst-crasher.service"
# units of their own, so that no table's limit on one test's unit depends on what another test did with it
FAILFAST_UNIT = "dst-crasher-failfast.service"
REPEAT_UNIT = "dst-crasher-repeat.service"
FEED = "/run/dst-crash"
DUMP_DIR = "/var/lib/dsagent/dumps"
STORE = "/var/lib/systemd/coredump"

state = {}


def dsctl(m, user, *args, check=True):
    r = m.run(["dsctl", *args], user=user, check=False)
    assert not check or r.returncode == 0, r
    return r


def crashes(m, user):
    r = dsctl(m, user, "crashes", "--json")
    return json.loads(r.stdout)


def roots_listing_records(m):
    """The records of root's crashes listings so far (journald may write a listing's after dsctl has its answer)."""
    return m.journal(f"MESSAGE_ID={REQUEST_MESSAGE_ID}", "DSAGENT_COMMAND=crashes", "DSAGENT_CLIENT_UID=0")


def dotnet_tools():
    return subprocess.run([os.path.join(SOURCE, "tests/tools/dotnet-tools/install.sh")], check=True,
                          stdout=subprocess.PIPE, text=True).stdout.strip()


def analyze(m, core, method):
    """Stock dotnet-dump analyze of @core, as the ops user: clrstack of every thread, then pe on the one in @method."""
    tools = dotnet_tools()
    out = m.run([f"{tools}/dotnet-dump", "analyze", core, "-c", "clrstack -all", "-c", "exit"], user=ALICE,
                timeout=300).stdout
    found = re.search(rf"OS Thread Id: (0x[0-9a-f]+)\n(?:(?!OS Thread Id).*\n)*?.*DsTestTarget\.CrashProbe\.{method}\(", out)
    assert found, out
    out += m.run([f"{tools}/dotnet-dump", "analyze", core, "-c", f"setthread -t {int(found.group(1), 16)}", "-c", "pe -nested",
                  "-c", "exit"], user=ALICE, timeout=300).stdout
    print(f"# dotnet-dump analyze {core}: thread {found.group(1)} in CrashProbe.{method}")
    return out


def crash_service(m, mode, unit=CRASH_UNIT):
    """The app as a service (@unit) that dies of @mode once told to; returns its pid and systemd-coredump's entry."""
    m.sh(f"rm -rf {FEED}; mkdir -m 0755 {FEED}; mkfifo -m 0600 {FEED}/core; chown {SVC}: {FEED}/core")
    m.write(f"/etc/systemd/system/{unit}", f"""[Unit]
Description=dsagent test app that crashes

[Service]
User={SVC}
Environment=DOTNET_CLI_TELEMETRY_OPTOUT=1
# the runtime's own createdump, into the FIFO the feeder reads (the module docstring)
Environment=DOTNET_DbgEnableMiniDump=1 DOTNET_DbgMiniDumpType=2 DOTNET_DbgMiniDumpName={FEED}/core
ExecStart={target_app()} --crash-when {FEED}/go {mode}
""")
    m.run(["systemctl", "daemon-reload"])
    m.run(["systemctl", "start", unit])
    pid = int(m.show(unit, "MainPID")["MainPID"])
    assert pid > 0
    # the app is up once it said so on its stdout, in its unit's journal
    wait_for(lambda: f"ready pid={pid}" in m.run(["journalctl", "-u", unit, "-o", "cat", "--no-pager"]).stdout,
             what="the app to be ready")
    uid, gid = m.uid_of(SVC), int(m.run(["id", "-g", SVC]).stdout)
    # as core_pattern's pipe: "|/lib/systemd/systemd-coredump %P %u %g %s %t %c %h %d", SIGABRT (6), as the runtime
    # aborts once createdump is done; the FIFO opens when createdump opens it, with the process alive
    feeder = subprocess.Popen(m.command(["python3", "-c", f"""
import os, subprocess, time
fd = os.open("{FEED}/core", os.O_RDONLY)
subprocess.run(["/lib/systemd/systemd-coredump", "{pid}", "{uid}", "{gid}", "6", str(int(time.time())),
                "9223372036854775808", "dsagent-test", "1"], stdin=fd, check=True)
"""]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    m.run(["touch", f"{FEED}/go"])
    # createdump writes a heap dump of the app, then systemd-coredump compresses it: a minute is plenty on a
    # loaded machine, and the test fails rather than waits for ever
    out, _ = feeder.communicate(timeout=240)
    assert feeder.returncode == 0, out
    entry = wait_for(lambda: m.journal(f"MESSAGE_ID={COREDUMP_MESSAGE_ID}", f"COREDUMP_PID={pid}"), timeout=120,
                     what="systemd-coredump's entry")[-1]
    return pid, entry


@test
def install_and_crash_a_dotnet_service(m):
    m.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet"])
    m.run(["systemctl", "daemon-reload"])
    m.run(["groupadd", "--force", OPS])
    m.add_user(SVC, groups=["dsagent"])
    m.add_user(ALICE, groups=["dsagent", OPS])
    m.add_user(MALLORY, groups=["dsagent"])
    m.write(f"{policy_dir()}/policy.d/50-crashes.toml", f"""
[[rule]]
name = "ops-crashes"
groups = ["{OPS}"]
commands = ["crashes"]
targets.units = ["{CRASH_UNIT}", "{FAILFAST_UNIT}", "{REPEAT_UNIT}"]

[[collect]]
name = "crasher-cores"
targets.units = ["{CRASH_UNIT}", "{FAILFAST_UNIT}"]
when.crash = true
then.core = true
readers = ["{ALICE}"]
""")
    m.run(["systemctl", "start", "dsagent.socket"])
    pid, entry = crash_service(m, "throw")
    # the entry is systemd-coredump's own: journald's fields say so, and the core is stored compressed
    assert entry["_SYSTEMD_UNIT"].startswith("systemd-coredump@") and entry["_COMM"] == "systemd-coredum", entry
    assert entry["COREDUMP_UNIT"] == CRASH_UNIT and entry["COREDUMP_FILENAME"].endswith(".zst"), entry
    listed = m.run(["coredumpctl", "list", "--no-pager", "--no-legend", str(pid)]).stdout
    assert str(pid) in listed and "present" in listed, listed
    print(f"# coredumpctl: {listed.strip()}")
    state["throw"] = (pid, entry)
    # the [[collect]] table copies this crash's core too, when its watch next reads the journal (every 5 s,
    # crash-collect.h): that copy is made before the tests below change the stored core or dump_dir's limits. It
    # ran beside them, late on a loaded machine, and held the process's dump slot: a user's copy was answered
    # "a dump of this process is already in progress" (fresh run, 2026-11-29). 120 s: a few MiB copied, loaded
    wait_for(lambda: [r for r in m.journal("DSAGENT_RULE=crasher-cores", f"DSAGENT_TARGET_PID={pid}")
                      if r.get("DSAGENT_COLLECT_EVENT") in ("collected", "failed")],
             timeout=120, what="the crash table's copy of the first crash")


@test
def the_ops_user_lists_it_and_gets_a_core_dotnet_dump_opens(m):
    pid, entry = state["throw"]
    mine = [c for c in crashes(m, ALICE) if c["pid"] == pid]
    assert len(mine) == 1, crashes(m, ALICE)
    c = mine[0]
    assert (c["unit"], c["uid"], c["signal"], c["dotnet"], c["stored"]) == (CRASH_UNIT, m.uid_of(SVC), 6, True, True), c
    assert c["id"] == f"{int(entry['COREDUMP_TIMESTAMP']) // 1000000}-{pid}", c
    state["throw_id"] = c["id"]
    text = dsctl(m, ALICE, "crashes").stdout
    assert c["id"] in text and "yes" in text, text

    before = set(m.run(["ls", DUMP_DIR]).stdout.split())
    r = dsctl(m, ALICE, "crash", c["id"], "-o", "/tmp/alice.core")
    path = re.search(r"stored at (\S+)", r.stdout).group(1)
    assert os.path.dirname(path) == DUMP_DIR and os.path.basename(path) not in before, r.stdout
    # the copy in dump_dir: root's, the requester alone besides, as a dump's
    acl = m.run(["getfacl", "-cp", path]).stdout
    assert f"user:{ALICE}:r--" in acl and MALLORY not in acl and "other::---" in acl, acl
    assert m.run(["head", "-c", "4", "/tmp/alice.core"], user=ALICE).stdout == "\x7fELF"
    # her own copy (-o) is hers and 0600 from the start (dsctl makes it unnamed, then links it): nobody else reads it
    assert m.run(["stat", "-c", "%a %U", "/tmp/alice.core"]).stdout.split() == ["600", ALICE]
    assert m.run(["head", "-c", "4", "/tmp/alice.core"], user=MALLORY, check=False).returncode != 0
    record = m.journal(f"MESSAGE_ID={DUMP_MESSAGE_ID}", f"DSAGENT_DUMP_PATH={path}")[-1]
    assert record["DSAGENT_DUMP_TYPE"] == "crash" and record["DSAGENT_TARGET_PID"] == str(pid), record

    # stock dotnet-dump opens it, and shows the app's method and its exception
    out = analyze(m, "/tmp/alice.core", "ThrowUnhandled")
    assert "System.InvalidOperationException" in out and "dsagent test crash: unhandled" in out, out


@test
def a_core_that_does_not_fit_says_the_numbers_and_what_to_do(m):
    """A crash's core past max_use was refused with the numbers and no word of what the user can do (a dump's said
    both). It says used, limit and free now, and what to do, as every "no space" answer; nothing is left behind."""
    main = f"{policy_dir()}/policy.toml"
    shipped = m.run(["cat", main]).stdout
    # the copy of the test before is in dump_dir already, past 1 MiB: the guards refuse the next one at once
    limited = shipped.replace("[agent]\n", '[agent]\nmax_use = "1M"\n', 1) if "[agent]\n" in shipped else \
        '[agent]\nmax_use = "1M"\n' + shipped
    m.write(main, limited)
    try:
        assert reload_and_wait(m).returncode == 0
        before = m.run(["ls", "-A", DUMP_DIR]).stdout
        r = dsctl(m, ALICE, "crash", state["throw_id"], "-o", "/tmp/alice-no-room.core", check=False)
        said = " ".join(r.stderr.split())
        assert r.returncode == EXIT_NO_SPACE, r
        assert "dumps would take more than max_use (used " in said and " of max_use 1.0 MiB; free " in said, said
        assert ", keep_free " in said, said
        assert f"To make room: 'dsctl dumps' lists what you may read in {DUMP_DIR}" in said, said
        assert "'dsctl dumps --remove PATH' removes the dumps you asked for" in said and "ask root" in said, said
        assert m.run(["ls", "-A", DUMP_DIR]).stdout == before, "a copy refused for space left something behind"
    finally:
        m.write(main, shipped)
        reload_and_wait(m)


@test
def another_user_sees_nothing_and_is_answered_as_for_no_crash(m):
    cid = state["throw_id"]
    assert crashes(m, MALLORY) == []
    seen = dsctl(m, MALLORY, "crash", cid, "-o", "/tmp/mallory.core", check=False)
    never = dsctl(m, MALLORY, "crash", "1000000000-4194303", "-o", "/tmp/mallory2.core", check=False)
    assert seen.returncode == never.returncode == EXIT_NO_SUCH_CRASH, (seen, never)
    strip = lambda s: re.sub(r"\(request [0-9a-f]+\)", "", s)
    assert strip(seen.stderr) == strip(never.stderr), (seen.stderr, never.stderr)
    assert m.run(["test", "!", "-e", "/tmp/mallory.core"], check=False).returncode == 0
    # the record says why: denied, by no rule
    record = m.journal(f"MESSAGE_ID={REQUEST_MESSAGE_ID}", "DSAGENT_COMMAND=crash",
                       f"DSAGENT_CLIENT_UID={m.uid_of(MALLORY)}", "DSAGENT_DECISION=denied")
    assert record, "no record of mallory's denied request"


@test
def forged_entries_list_nothing_and_hand_nothing(m):
    pid, entry = state["throw"]
    mallory = m.uid_of(MALLORY)
    fake_pid = 4000000
    forged = "\n".join([
        f"MESSAGE_ID={COREDUMP_MESSAGE_ID}", "SYSLOG_IDENTIFIER=systemd-coredump", "MESSAGE=forged crash",
        f"COREDUMP_PID={fake_pid}", f"COREDUMP_UID={mallory}", f"COREDUMP_GID={mallory}", "COREDUMP_SIGNAL=11",
        f"COREDUMP_TIMESTAMP={entry['COREDUMP_TIMESTAMP']}", f"COREDUMP_UNIT={CRASH_UNIT}",
        f"COREDUMP_CGROUP=/system.slice/{CRASH_UNIT}", f"COREDUMP_CMDLINE={entry['COREDUMP_CMDLINE']}",
        f"COREDUMP_FILENAME={entry['COREDUMP_FILENAME']}", "COREDUMP_DUMPABLE=1"])
    m.run(["logger", "--journald"], user=MALLORY, input=forged + "\n")
    # the attack happened: both are in the journal, under systemd-coredump's MESSAGE_ID
    logged = wait_for(lambda: [e for e in m.journal(f"MESSAGE_ID={COREDUMP_MESSAGE_ID}")
                               if e.get("COREDUMP_PID") == str(fake_pid)], what="the forged entry")
    # by mallory: journald's _UID, from the socket's credentials (its _COMM, read from /proc, is missing when
    # logger has exited before journald reads the entry)
    print(f"# forged entries in the journal: {len(logged)}, from uids {sorted({e.get('_UID') for e in logged})}")
    assert [e.get("_UID") for e in logged] == [str(mallory)], logged
    for user in (ALICE, MALLORY):
        pids = [c["pid"] for c in crashes(m, user)]
        assert fake_pid not in pids, (user, pids)
    seconds = int(entry["COREDUMP_TIMESTAMP"]) // 1000000
    for user, fid in ((MALLORY, f"{seconds}-{fake_pid}"), (ALICE, f"{seconds}-{fake_pid}")):
        r = dsctl(m, user, "crash", fid, check=False)
        assert r.returncode == EXIT_NO_SUCH_CRASH, r
    # the reader never even read it: only entries logged from systemd-coredump's slice are (the next test)
    before = len(roots_listing_records(m))
    dsctl(m, None, "crashes")
    record = wait_for(lambda: roots_listing_records(m)[before:], what="root's listing's record")[-1]
    assert "claim to be systemd-coredump's" not in record["DSAGENT_REASON"], record


# What mallory logs, as many entries as journald takes: systemd-coredump's MESSAGE_ID and every field of its own
FLOOD = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.connect("/run/systemd/journal/socket")
for i in range(int(sys.argv[1])):
    s.send(("MESSAGE_ID=%s\\nSYSLOG_IDENTIFIER=systemd-coredump\\nMESSAGE=forged crash %d\\nCOREDUMP_PID=%d\\n"
            "COREDUMP_UID=%s\\nCOREDUMP_GID=%s\\nCOREDUMP_SIGNAL=11\\nCOREDUMP_TIMESTAMP=%d000000\\n"
            % (sys.argv[2], i, 3000000 + i, sys.argv[3], sys.argv[3], 1700000000 + i)).encode())
"""
FLOODED = 20000


@test
def a_journal_full_of_forged_entries_costs_the_reader_nothing(m):
    """Any user may log entries with systemd-coredump's MESSAGE_ID, as many as journald takes (its rate limit
    only slows them: 10000 each 30 s per unit, hours of them fill the journal's files). The reader visited each:
    root's listing read all of mallory's 20000 (its record counted them) on its way to the real crashes, and the
    crash collector, whose cursor moved only past crashes it took, read all of those logged since the last real
    crash again every 5 s, for ever. It reads only what systemd-coredump's slice logged now."""
    # journald's rate limit off, so that the flood a user builds up over hours is there in seconds
    m.write("/etc/systemd/journald.conf.d/50-no-rate-limit.conf", "[Journal]\nRateLimitBurst=0\n")
    m.run(["systemctl", "restart", "systemd-journald"])
    mallory = m.uid_of(MALLORY)
    m.run(["python3", "-c", FLOOD, str(FLOODED), COREDUMP_MESSAGE_ID, str(mallory)], user=MALLORY, timeout=300)
    # the attack is in place: the journal holds them all, under systemd-coredump's MESSAGE_ID
    count = lambda: len(m.run(["journalctl", "--no-pager", "-o", "cat", f"MESSAGE_ID={COREDUMP_MESSAGE_ID}",
                               f"_UID={mallory}"]).stdout.splitlines())
    wait_for(lambda: count() >= FLOODED, timeout=120, what="journald to write the forged entries")
    before = len(roots_listing_records(m))
    began = time.monotonic()
    listed = crashes(m, None)
    print(f"# root's listing with {FLOODED} forged entries in the journal: {time.monotonic() - began:.2f} s")
    assert state["throw"][0] in [c["pid"] for c in listed], listed
    record = wait_for(lambda: roots_listing_records(m)[before:], what="root's listing's record")[-1]
    assert "claim to be systemd-coredump's" not in record["DSAGENT_REASON"], record
    m.run(["rm", "/etc/systemd/journald.conf.d/50-no-rate-limit.conf"])
    m.run(["systemctl", "restart", "systemd-journald"])


@test
def a_core_that_is_not_the_stored_one_or_corrupt_is_refused(m):
    pid, entry = state["throw"]
    core = entry["COREDUMP_FILENAME"]
    m.run(["cp", "-a", core, "/root/saved.zst"])

    def refused(why):
        before = m.run(["ls", "-A", DUMP_DIR]).stdout
        r = dsctl(m, ALICE, "crash", state["throw_id"], "-o", f"/tmp/refused-{len(state)}.core", check=False)
        state[f"refused-{len(state)}"] = True
        assert r.returncode == EXIT_CORE_UNUSABLE and why in r.stderr, r
        assert m.run(["ls", "-A", DUMP_DIR]).stdout == before, "a refused copy left something behind"

    # cut short, then corrupt
    m.sh(f"head -c 100000 /root/saved.zst > {core}")
    refused("corrupt or cut short")
    m.sh(f"cp /root/saved.zst {core}; printf 'garbage!' | dd of={core} bs=1 seek=20000 conv=notrunc status=none")
    refused("corrupt or cut short")
    # a link where the core was, to a file root may read
    m.sh(f"rm {core}; ln -s /root/saved.zst {core}")
    refused("is a link")
    # the labels systemd-coredump set name another crash
    m.sh(f"rm {core}; cp -a /root/saved.zst {core}")
    m.run(["python3", "-c", f"import os; print(os.getxattr('{core}', 'user.coredump.pid')); "
           f"os.setxattr('{core}', 'user.coredump.pid', b'1')"])
    refused("labels name another crash")
    # writable by its user
    m.sh(f"cp -a /root/saved.zst {core}; chown {SVC} {core}")
    refused("not a file of root's alone")
    m.sh(f"cp -a /root/saved.zst {core}")
    dsctl(m, ALICE, "crash", state["throw_id"])


@test
def a_decompressor_that_breaks_out_is_killed(m):
    m.write("/etc/systemd/system/dsagent.service.d/escape.conf", "[Service]\nEnvironment=DSAGENT_TEST_DECOMPRESSOR_ESCAPE=1\n")
    m.run(["systemctl", "daemon-reload"])
    m.run(["systemctl", "restart", "dsagent.service"])
    try:
        r = dsctl(m, ALICE, "crash", state["throw_id"], check=False)
        assert r.returncode == EXIT_CORE_UNUSABLE and "decompressor was killed" in r.stderr, r
    finally:
        m.run(["rm", "/etc/systemd/system/dsagent.service.d/escape.conf"])
        m.run(["systemctl", "daemon-reload"])
        m.run(["systemctl", "restart", "dsagent.service"])
    dsctl(m, ALICE, "crash", state["throw_id"])


@test
def a_failfast_crash_too_and_a_collect_table_stores_its_core_for_its_readers(m):
    # a unit of its own: the table's limit on dst-crasher.service (1/1h) was taken by the first test's crash
    pid, entry = crash_service(m, "failfast", FAILFAST_UNIT)
    c = [c for c in crashes(m, ALICE) if c["pid"] == pid]
    assert len(c) == 1 and c[0]["dotnet"] is True, crashes(m, ALICE)
    dsctl(m, ALICE, "crash", c[0]["id"], "-o", "/tmp/alice-failfast.core")
    analyze(m, "/tmp/alice-failfast.core", "FailFast")

    # the [[collect]] table with when.crash: the core in dump_dir, for its readers alone, recorded; the agent
    # reads the journal every 5 s (crash-collect.h) and copies a few MiB: two minutes is ample on a loaded machine
    stored = wait_for(lambda: [f for f in m.run(["ls", DUMP_DIR]).stdout.split()
                               if f.startswith("crash.") and ".collect-crasher-cores." in f and f".{pid}." in f],
                      timeout=120, what="the collect table's copy of the core")
    path = f"{DUMP_DIR}/{stored[0]}"
    acl = m.run(["getfacl", "-cp", path]).stdout
    assert f"user:{ALICE}:r--" in acl and "other::---" in acl and MALLORY not in acl and SVC not in acl, acl
    assert m.run(["head", "-c", "4", path], user=ALICE).stdout == "\x7fELF"
    assert m.run(["head", "-c", "4", path], user=MALLORY, check=False).returncode != 0
    collected = wait_for(lambda: m.journal("DSAGENT_RULE=crasher-cores", "DSAGENT_COLLECT_EVENT=collected",
                                           f"DSAGENT_TARGET_PID={pid}"),
                         what="the table's collected record")
    assert path in collected[-1]["DSAGENT_COLLECT_RESULT"], collected[-1]
    listing = json.loads(dsctl(m, ALICE, "collect", "--json").stdout)
    assert any(row.get("table") == "crasher-cores" and row.get("pid") == pid and row.get("last_fired_usec")
               for row in listing), listing
    # the table's last result: this core, its size and the crashed process
    table = [row for row in listing if row.get("table") == "crasher-cores" and "pid" not in row]
    assert len(table) == 1 and table[0].get("last_result") == "collected", listing
    assert (table[0].get("last_result_path"), table[0].get("last_result_pid")) == (path, pid), table
    assert table[0].get("last_result_size") == int(m.run(["stat", "-c", "%s", path]).stdout), table
    assert not any(row.get("table") == "crasher-cores" for row in json.loads(dsctl(m, MALLORY, "collect", "--json").stdout))


def table_fired(m, table, pid, what):
    """The result of @table's firing on the crash of @pid, once the collector has read it (every 5 s, then a copy
    of a few MiB: 120 s only ends a hang), and once that copy, if it began, is done."""
    fired = wait_for(lambda: [f for f in m.journal(f"DSAGENT_RULE={table}", "DSAGENT_COLLECT_EVENT=fired")
                              if f["DSAGENT_TARGET_PID"] == str(pid)], timeout=120, what=f"{what}'s firing")
    result = fired[-1]["DSAGENT_COLLECT_RESULT"]
    if result.startswith("the core of crash"):
        wait_for(lambda: [f for f in m.journal(f"DSAGENT_RULE={table}", "DSAGENT_COLLECT_EVENT=collected")
                          if f["DSAGENT_TARGET_PID"] == str(pid)], timeout=120, what=f"{what}'s copy")
    return result


@test
def crashes_of_ever_new_units_bring_a_crash_table_nothing_beyond_its_limit_total(m):
    """A crash table's limit counts per unit, or executable outside one: each of a user's logins is a unit of its
    own, and any user may copy a program anywhere. limit_total, "at most N artifacts of the table in any window,
    over all the processes it covers", was parsed for crash tables (its default too) and never applied: three
    crashes of svc's processes in three units of their own, under limit = "1/1h" and limit_total = "2/1h", had
    three cores copied into dump_dir. Now two, and the third's firing says why not."""
    units = [f"dst-svc-login-{k}.service" for k in range(3)]
    m.write(f"{policy_dir()}/policy.d/60-svc-cores.toml", f"""
[[collect]]
name = "svc-cores"
targets.units = [{", ".join(f'"{u}"' for u in units)}]
when.crash = true
then.core = true
readers = ["{ALICE}"]
limit = "1/1h"
limit_total = "2/1h"
""")
    reload_and_wait(m)
    results = []
    for unit in units:
        # the app as a unit of its own each time, as each of svc's logins would be, crashed for real
        pid, _ = crash_service(m, "throw", unit)
        # one crash at a time: no copy waits on another's slot
        results.append(table_fired(m, "svc-cores", pid, unit))
        m.run(["systemctl", "reset-failed", unit], check=False)
    print(f"# svc-cores fired: {results}")
    assert [r.startswith("the core of crash") for r in results] == [True, True, False], results
    assert "limit_total (2 in 3600 s) is reached" in results[2], results
    # dsctl collect says so too: the table's last result is the third crash's, held back, in its firing's words
    table = [row for row in json.loads(dsctl(m, ALICE, "collect", "--json").stdout)
             if row.get("table") == "svc-cores" and "pid" not in row]
    assert len(table) == 1 and (table[0].get("last_result"), table[0].get("last_result_reason"),
                                table[0].get("last_result_pid")) == ("failed", results[2], pid), table
    stored = [f for f in m.run(["ls", DUMP_DIR]).stdout.split() if ".collect-svc-cores." in f]
    assert len(stored) == 2, stored


@test
def a_crash_tables_core_whose_record_cannot_be_written_is_removed(m):
    """No core in dump_dir without its record: a crash table's copy was published whatever its dump record did.
    With every artifact's dump record failing as an out-of-memory one does (the test hook
    DSAGENT_TEST_ARTIFACT_RECORD_FAILS), the copy is removed again once named and its failed record says why."""
    unit = "dst-unrecorded-crash.service"
    m.write(f"{policy_dir()}/policy.d/70-unrecorded-cores.toml", f"""
[[collect]]
name = "unrecorded-cores"
targets.units = ["{unit}"]
when.crash = true
then.core = true
readers = ["{ALICE}"]
""")
    m.write("/etc/systemd/system/dsagent.service.d/unrecorded.conf",
            "[Service]\nEnvironment=DSAGENT_TEST_ARTIFACT_RECORD_FAILS=1\n")
    m.run(["systemctl", "daemon-reload"])
    m.run(["systemctl", "restart", "dsagent.service"])
    try:
        pid, _ = crash_service(m, "throw", unit)
        # the collector reads the journal every 5 s and copies a few MiB: 120 s only ends a hang
        failed = wait_for(lambda: [f for f in m.journal("DSAGENT_RULE=unrecorded-cores",
                                                        "DSAGENT_COLLECT_EVENT=failed")
                                   if f["DSAGENT_TARGET_PID"] == str(pid)], timeout=120, what="the copy's end")
        assert "the core's audit record could not be written (Cannot allocate memory): it was removed" in \
            failed[-1]["DSAGENT_COLLECT_RESULT"], failed[-1]
        stored = [f for f in m.run(["ls", DUMP_DIR]).stdout.split() if ".collect-unrecorded-cores." in f]
        assert stored == [], stored
    finally:
        m.run(["rm", "/etc/systemd/system/dsagent.service.d/unrecorded.conf",
               f"{policy_dir()}/policy.d/70-unrecorded-cores.toml"])
        m.run(["systemctl", "daemon-reload"])
        m.run(["systemctl", "restart", "dsagent.service"])
        m.run(["systemctl", "reset-failed", unit], check=False)


@test
def a_units_second_crash_within_the_tables_limit_is_not_stored_across_a_reload_either(m):
    """A crash table's limit counts per unit: a service that crashes in a loop is copied limit times a period, not
    each time. No test crashed one unit twice under a table: the FailFast case crashed the first case's unit
    and its core was stored only because an earlier case restarted the agent. Here one unit crashes twice
    under limit = "1/1h", with a reload between (a table that keeps its name and limit keeps its count): the
    first core is stored, the second is not, and its firing says the unit's limit held."""
    m.write(f"{policy_dir()}/policy.d/70-repeat.toml", f"""
[[collect]]
name = "repeat-cores"
targets.units = ["{REPEAT_UNIT}"]
when.crash = true
then.core = true
readers = ["{ALICE}"]
limit = "1/1h"
""")
    reload_and_wait(m)
    first, first_entry = crash_service(m, "throw", REPEAT_UNIT)
    assert table_fired(m, "repeat-cores", first, "the first crash").startswith("the core of crash")
    reload_and_wait(m)
    m.run(["systemctl", "reset-failed", REPEAT_UNIT], check=False)
    second, second_entry = crash_service(m, "throw", REPEAT_UNIT)
    result = table_fired(m, "repeat-cores", second, "the second crash")
    print(f"# repeat-cores on the second crash of {REPEAT_UNIT}: {result}")
    assert result == f"not copied: the table's limit for {REPEAT_UNIT} (1 in 3600 s) is reached", result
    stored = [f for f in m.run(["ls", DUMP_DIR]).stdout.split() if ".collect-repeat-cores." in f]
    assert len(stored) == 1 and f".{first}." in stored[0], stored
    # dsctl collect: the table's last result is the second crash, held back, in its firing's words
    table = [row for row in json.loads(dsctl(m, ALICE, "collect", "--json").stdout)
             if row.get("table") == "repeat-cores" and "pid" not in row]
    assert len(table) == 1 and (table[0].get("last_result"), table[0].get("last_result_reason"),
                                table[0].get("last_result_pid")) == ("failed", result, second), table
    state["repeat"] = (first, first_entry, second, second_entry)


@test
def dsctl_crashes_since_lists_the_crashes_logged_from_then_on(m):
    first, first_entry, second, _ = state["repeat"]
    # the second crash was logged seconds after the first one's entry (a reload and a runtime's start between)
    since = int(first_entry["__REALTIME_TIMESTAMP"]) // 1000000 + 1
    pids = lambda *args: [c["pid"] for c in json.loads(dsctl(m, ALICE, "crashes", "--json", *args).stdout)]
    assert {first, second} <= set(pids()), pids()
    listed = pids("--since", f"@{since}")
    assert second in listed and first not in listed, (since, listed)
    assert {first, second} <= set(pids("--since", "2h")), pids("--since", "2h")


@test
def a_core_systemd_coredump_no_longer_holds_is_listed_missing_and_not_handed_over(m):
    _, _, second, second_entry = state["repeat"]
    m.run(["rm", second_entry["COREDUMP_FILENAME"]])  # as systemd-coredump's vacuuming does
    c = [c for c in crashes(m, ALICE) if c["pid"] == second]
    assert len(c) == 1 and c[0]["stored"] is False and "size" not in c[0], c
    row = [line for line in dsctl(m, ALICE, "crashes").stdout.splitlines() if c[0]["id"] in line]
    assert len(row) == 1 and " missing " in row[0], row
    before = m.run(["ls", "-A", DUMP_DIR]).stdout
    r = dsctl(m, ALICE, "crash", c[0]["id"], "-o", "/tmp/alice-missing.core", check=False)
    assert r.returncode == EXIT_NO_SUCH_CRASH and "no core is stored for this crash (systemd-coredump removed it" in r.stderr, r
    assert m.run(["ls", "-A", DUMP_DIR]).stdout == before, "a copy of no core left something behind"
    assert m.run(["test", "!", "-e", "/tmp/alice-missing.core"], check=False).returncode == 0


def subordinate_range(m, user, path):
    """The first id of @user's range in @path inside (/etc/subuid or /etc/subgid), given one when it has none."""
    mine = [line for line in m.run(["cat", path], check=False).stdout.splitlines() if line.split(":")[0] == user]
    if not mine:
        m.sh(f"echo {user}:3000000:65536 >> {path}")
        mine = [f"{user}:3000000:65536"]
    return int(mine[0].split(":")[1])


@test
def a_copy_asked_from_a_users_subordinate_uid_is_labelled_as_hers(m):
    """A crash copy in dump_dir is labelled user.dsagent.charged_uid with the principal the agent charges the
    requester to, for retention's max_files and max_use_per_user (test_retention.py shows it for dumps): alice,
    asking from one of her subordinate uids (a user namespace of hers, newuidmap), is that uid for the policy and
    the file's requester, and alice for the charge."""
    sub_uid, sub_gid = subordinate_range(m, ALICE, "/etc/subuid"), subordinate_range(m, ALICE, "/etc/subgid")
    # as alice alone can: a user namespace whose maps newuidmap and newgidmap write, setpriv in it; her groups kept
    # (the kernel's, which SO_PEERGROUPS tells the agent: dsagent's socket, the ops rule)
    r = m.run(["setpriv", f"--reuid={ALICE}", f"--regid={ALICE}", "--init-groups", "unshare",
               f"--map-users={sub_uid},1,1", f"--map-groups={sub_gid},1,1", "--map-user=0", "--map-group=0",
               "setpriv", "--reuid=1", "--regid=1", "--keep-groups", "dsctl", "crash", state["throw_id"], "-o",
               "/tmp/alice-sub.core"],
              check=False)
    assert r.returncode == 0, r
    path = re.search(r"stored at (\S+)", r.stdout).group(1)
    # the attack's setting is real: the copy is the subordinate uid's, a host uid not alice's
    assert m.run(["stat", "-c", "%u", "/tmp/alice-sub.core"]).stdout.split() == [str(sub_uid)]
    label = lambda name: m.run(["python3", "-c", f"import os, sys; sys.stdout.write(os.getxattr({path!r}, "
                                                 f"'user.dsagent.{name}').decode())"]).stdout
    assert label("requester_uid") == str(sub_uid), label("requester_uid")
    assert label("charged_uid") == str(m.uid_of(ALICE)), label("charged_uid")
    assert label("dump_type") == "crash"

if __name__ == "__main__":
    # a clone or build under /tmp would be hidden by the booted system's own /tmp
    run_tests(lambda: Machine(name="dsagent-crashes", binds=[SOURCE, BUILD]))
