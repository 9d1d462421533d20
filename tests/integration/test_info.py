#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""dsctl info and ps through a running dsagent, against the real .NET runtime."""
import json
import os
import re
import shutil

import harness
from harness import (ALICE, EXIT_AGENT_UNREACHABLE, EXIT_DENIED, EXIT_NO_SUCH_PROCESS, EXIT_NOT_DOTNET, MALLORY, SVC,
                     AcceptWatch, Agent, FakeRuntime, Process, Target, as_user, dsctl, info_json, request_id_of, run_tests,
                     make_dir, place_in_cgroup, place_in_unit, test, uid_of)


@test
def owner_reads_info_through_private_tmpdir():
    target = Target(SVC, tmpdir="private", args=["--marker", "owner-info"])
    agent = Agent()
    info = info_json(agent, SVC, target.pid)
    # the runtime's own answer: its command line carries the marker we started it with
    assert info["pid"] == target.pid
    assert info["runtime_pid"] == target.pid
    assert info["command_line"].endswith("DsTestTarget.dll --marker owner-info"), info
    assert info["os"] == "Linux" and info["arch"] == "x64"
    assert info["entry_assembly"] == "DsTestTarget"
    assert info["runtime_version"].startswith("10.")
    assert info["uid"] == uid_of(SVC) and info["user"] == SVC
    # the private TMPDIR really is out of the owner's reach for anyone else
    assert os.stat(target.tmpdir).st_mode & 0o077 == 0

    text = dsctl(agent, SVC, "info", str(target.pid))
    assert text.returncode == 0, text
    assert "--marker owner-info" in text.stdout and "Runtime version:" in text.stdout


@test
def root_reads_info():
    target = Target(SVC, args=["--marker", "root-info"])
    agent = Agent()
    info = info_json(agent, None, target.pid)
    assert "--marker root-info" in info["command_line"]


@test
def other_user_learns_nothing_and_runtime_sees_no_connection():
    target = Target(SVC)
    agent = Agent()
    watch = AcceptWatch(target.pid)

    denied = dsctl(agent, ALICE, "info", str(target.pid))
    assert denied.returncode == EXIT_NO_SUCH_PROCESS, denied
    assert "no such process" in denied.stderr
    assert denied.stdout == ""
    assert watch.accepts() == 0, "a denied request reached the runtime"

    # the administrator's record says what happened
    record = agent.record_for(request_id_of(denied))
    assert record["DSAGENT_DECISION"] == "denied"
    assert record["DSAGENT_CLIENT_UID"] == str(uid_of(ALICE))
    assert record["DSAGENT_TARGET_PID"] == str(target.pid)
    assert record["DSAGENT_TARGET_UID"] == str(uid_of(SVC))
    assert record["DSAGENT_COMMAND"] == "info"

    # control: the same watch does see an allowed request arrive
    assert dsctl(agent, SVC, "info", str(target.pid)).returncode == 0
    assert watch.accepts() == 1


@test
def target_in_private_mount_namespace():
    # like PrivateTmp=: the socket is on a tmpfs only the target's namespace sees
    target = Target(SVC, tmpdir=None, mount_ns=True, args=["--marker", "mntns"])
    assert not os.path.exists(os.path.join("/tmp", target.socket_name))
    agent = Agent()
    info = info_json(agent, SVC, target.pid)
    assert "--marker mntns" in info["command_line"]


@test
def target_in_own_pid_namespace():
    target = Target(SVC, pid_ns=True, args=["--marker", "pidns"])
    assert target.ns_pid != target.pid
    agent = Agent()
    info = info_json(agent, SVC, target.pid)
    assert info["pid"] == target.pid and info["runtime_pid"] == target.ns_pid
    assert "--marker pidns" in info["command_line"]


@test
def ps_lists_a_runtime_in_its_own_pid_namespace_on_the_hosts_network():
    # its socket's name carries its own pid, which no process of the host's pid namespace claims: the
    # listing must look into the other pid namespaces of that network namespace to find it
    target = Target(SVC, pid_ns=True, args=["--marker", "pidns"])
    plain = Target(SVC)
    assert target.ns_pid != target.pid
    assert os.readlink(f"/proc/{target.pid}/ns/net") == os.readlink("/proc/self/ns/net")
    agent = Agent()
    for user in (SVC, None):
        r = dsctl(agent, user, "--json", "ps")
        assert r.returncode == 0, r
        listed = {p["pid"] for p in json.loads(r.stdout)}
        assert {target.pid, plain.pid} <= listed, (user, listed)
        assert target.ns_pid not in listed or target.ns_pid == plain.pid


@test
def ps_lists_only_what_the_caller_may_act_on():
    mine = Target(SVC)
    theirs = Target(ALICE)
    agent = Agent()

    def pids(user):
        r = dsctl(agent, user, "--json", "ps")
        assert r.returncode == 0, r
        return {p["pid"]: p for p in json.loads(r.stdout)}

    svc_view, alice_view, root_view = pids(SVC), pids(ALICE), pids(None)
    assert mine.pid in svc_view and theirs.pid not in svc_view
    assert theirs.pid in alice_view and mine.pid not in alice_view
    assert {mine.pid, theirs.pid} <= set(root_view)
    assert svc_view[mine.pid]["name"] == "DsTestTarget" and svc_view[mine.pid]["user"] == SVC

    text = dsctl(agent, SVC, "ps")
    assert text.returncode == 0 and str(mine.pid) in text.stdout and "DsTestTarget" in text.stdout


# what a listing may show of a process: the agent's reading of it in /proc, and the commands held on it
PS_FIELDS = {"pid", "uid", "user", "unit", "name", "exe", "cgroup", "container_id", "pod_uid", "unverified_container_id",
             "unverified_pod_uid", "cgroup_unverified", "port", "suspended", "commands"}
NO_CODE = ["ps", "info", "env", "dump", "gcdump", "trace", "counters", "resume", "perfmap", "stacks", "exceptions",
           "logs"]


@test
def ps_lists_a_process_to_anyone_granted_a_command_on_it_with_those_commands():
    """A user granted only counters on a process finds it in ps, told what she holds, as explain says; she is
    shown what the agent read of it in /proc, nothing its runtime says (which needs info). A process no command
    of hers reaches is missing from her listing as one that does not exist is."""
    served = Target(SVC)
    hidden = Target(MALLORY)
    own = Target(ALICE)
    agent = Agent(policy=f"""
[agent]
dump_dir = "@DUMP_DIR@"

[[rule]]
name = "alice-counters"
users = ["{ALICE}"]
commands = ["counters"]
targets.users = ["{SVC}"]

[[rule]]
name = "alice-traces"
users = ["{ALICE}"]
commands = ["trace", "stacks"]
targets.users = ["{SVC}"]
trace_profiles = ["cpu-sampling"]
""")
    listing = dsctl(agent, ALICE, "--json", "ps")
    assert listing.returncode == 0, listing
    rows = {p["pid"]: p for p in json.loads(listing.stdout)}
    assert served.pid in rows and own.pid in rows and hidden.pid not in rows, rows
    row = rows[served.pid]
    assert row["commands"] == ["trace", "counters", "stacks"], row
    assert row["name"] == "DsTestTarget" and row["user"] == SVC, row
    assert set(row) <= PS_FIELDS, set(row) - PS_FIELDS
    # her own process: every command that runs no code (owner_access)
    assert rows[own.pid]["commands"] == NO_CODE, rows[own.pid]
    record, = [r for r in agent.records() if r["DSAGENT_COMMAND"] == "ps"]
    assert record["DSAGENT_RESULT_COUNT"] == str(len(rows)), record

    # as explain says, and info (the runtime's facts) stays hers to ask for only under a grant of info
    explained = dsctl(agent, ALICE, "--json", "explain", str(served.pid), "ps")
    assert json.loads(explained.stdout)["allowed"] and json.loads(explained.stdout)["rule"] == "alice-counters"
    assert dsctl(agent, ALICE, "info", str(served.pid)).returncode == EXIT_DENIED

    text = dsctl(agent, ALICE, "ps")
    assert text.returncode == 0, text
    header, *lines = text.stdout.splitlines()
    assert header.split() == ["PID", "USER", "UNIT", "COMMANDS", "NAME"], header
    shown = {int(line.split()[0]): line.split()[3] for line in lines}
    assert shown[served.pid] == "trace,counters,stacks" and shown[own.pid] == "all", text.stdout
    assert hidden.pid not in shown

    # root sees all of them, holding every command that runs no code
    rows = {p["pid"]: p for p in json.loads(dsctl(agent, None, "--json", "ps").stdout)}
    assert {served.pid, hidden.pid, own.pid} <= set(rows) and rows[hidden.pid]["commands"] == NO_CODE, rows
    # a user no rule names sees her own alone
    rows = {p["pid"]: p for p in json.loads(dsctl(agent, MALLORY, "--json", "ps").stdout)}
    assert hidden.pid in rows and served.pid not in rows and own.pid not in rows, rows


@test
def errors_have_their_own_exit_codes():
    agent = Agent()
    gone = dsctl(agent, None, "info", "4194303")
    assert gone.returncode == EXIT_NO_SUCH_PROCESS, gone

    # until setpriv has become svc and run sleep, the process is root's, and not svc's to ask about
    sleeper = Process(as_user(SVC, ["sleep", "300"])).wait_exec("sleep")  # no .NET process; it outlives the case
    not_dotnet = dsctl(agent, SVC, "info", str(sleeper.proc.pid))
    assert not_dotnet.returncode == EXIT_NOT_DOTNET, not_dotnet
    assert "not a .NET process" in not_dotnet.stderr

    nowhere = dsctl(agent, None, "--socket", "/nonexistent/dsagent.sock", "info", "1")
    assert nowhere.returncode == EXIT_AGENT_UNREACHABLE, nowhere
    assert "cannot reach dsagent" in nowhere.stderr

    usage = dsctl(agent, None, "info", "not-a-pid")
    assert usage.returncode == 2 and "one process id" in usage.stderr


@test
def socket_comes_from_environment_when_not_given():
    target = Target(SVC)
    agent = Agent()
    import subprocess
    from harness import DSCTL
    r = subprocess.run(as_user(SVC, ["env", f"DSAGENT_SOCKET={agent.socket}", DSCTL, "info", str(target.pid)]),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 0, r


@test
def every_decision_is_one_audit_record():
    target = Target(SVC)
    agent = Agent()
    results = [
        dsctl(agent, SVC, "--json", "info", str(target.pid)),
        dsctl(agent, ALICE, "--json", "info", str(target.pid)),
        dsctl(agent, None, "--json", "info", "4194303"),
        dsctl(agent, SVC, "--json", "ps"),
    ]
    records = agent.records()
    assert len(records) == len(results), records
    decisions = [r["DSAGENT_DECISION"] for r in records]
    assert decisions == ["allowed", "denied", "failed", "allowed"], decisions
    for r in records:
        assert r["MESSAGE_ID"] == "27ade2ec85a54471a176f947b0ec018e"
        assert r["SYSLOG_IDENTIFIER"] == "dsagent"
        for key in ("DSAGENT_REQUEST_ID", "DSAGENT_CLIENT_UID", "DSAGENT_CLIENT_GID", "DSAGENT_CLIENT_PID",
                    "DSAGENT_COMMAND", "DSAGENT_REASON"):
            assert key in r, (key, r)
    allowed = records[0]
    assert allowed["DSAGENT_RULE"] == "owner-access"
    assert allowed["DSAGENT_TARGET_EXE"].endswith("/DsTestTarget")
    listed = json.loads(results[3].stdout)
    assert target.pid in [p["pid"] for p in listed]
    assert records[3]["DSAGENT_RESULT_COUNT"] == str(len(listed))


@test
def bidi_and_other_format_characters_from_a_runtime_come_out_escaped():
    # "invoice<RLO>fdp.exe" shows as "invoiceexe.pdf" on a terminal that honours it
    target = Target(SVC, args=["--marker", "invoice\u202efdp.exe\u2066x\u2069\u200b"])
    agent = Agent()
    text = dsctl(agent, SVC, "info", str(target.pid))
    assert text.returncode == 0, text
    assert "invoice\\u202efdp.exe\\u2066x\\u2069\\u200b" in text.stdout, text.stdout
    raw = dsctl(agent, SVC, "--json", "info", str(target.pid))
    assert "invoice\\u202efdp.exe\\u2066x\\u2069\\u200b" in raw.stdout, raw.stdout
    # JSON readers still get the string that was sent
    assert "invoice\u202efdp.exe\u2066x\u2069\u200b" in json.loads(raw.stdout)["command_line"]
    for out in (text.stdout, raw.stdout):
        assert not any(c in out for c in "\u202e\u2066\u2069\u200b"), out


@test
def a_process_whose_path_and_name_are_not_utf8_is_listed_and_described_escaped():
    """The owner chooses the bytes of its executable's path and of its command line, and who may make cgroups
    those of its cgroup: bytes that are not UTF-8 and control characters must neither hide the process from
    anyone's ps nor fail info, and come out escaped in text, as U+FFFD in JSON, and escaped in the audit record."""
    base = make_dir(None, 0o755)
    plain = os.path.join(base, "app")
    shutil.copytree(os.path.dirname(harness.target_app()), plain)
    name = b"\xffev\x1b]0;il\x07\xfe"
    # argv[0] names it in ps; the runtime finds itself through /proc/self/exe, not through argv[0]
    target = Process(as_user(SVC, ["env", "-i", f"TMPDIR={make_dir(SVC)}", "DOTNET_CLI_TELEMETRY_OPTOUT=1",
                                   "bash", "-c", 'exec -a "$0" ./DsTestTarget', name]), cwd=plain)
    pid = int(target.read_line("ready pid=").split()[1].split("=")[1])
    # the owner renames the directory under the running process: /proc/PID/exe follows
    evil = os.path.join(base.encode(), b"dir\xff\xfe\x1b[2J\xc3")
    os.rename(plain.encode(), evil)
    exe = os.readlink(f"/proc/{pid}/exe".encode())
    assert exe == evil + b"/DsTestTarget", exe
    cgroup = place_in_cgroup(pid, b"dst-esc-\xff\x1b[2J")
    assert cgroup == b"/dst-esc-\xff\x1b[2J" and cgroup in open(f"/proc/{pid}/cgroup", "rb").read(), cgroup
    agent = Agent(audit="json")

    shown_exe = base + "/dir\\xff\\xfe\\x1b[2J\\xc3/DsTestTarget"
    shown_name = "\\xffev\\x1b]0;il\\x07\\xfe"
    for user in (None, SVC):
        listing = dsctl(agent, user, "--json", "ps")
        assert listing.returncode == 0, listing
        rows = {p["pid"]: p for p in json.loads(listing.stdout)}
        assert pid in rows, (user, listing.stdout)
        assert rows[pid]["exe"] == base + "/dir\ufffd\ufffd\u001b[2J\ufffd/DsTestTarget", rows[pid]
        assert rows[pid]["name"] == "\ufffdev\u001b]0;il\u0007\ufffd", rows[pid]
        text = dsctl(agent, user, "ps")
        assert text.returncode == 0 and shown_name in text.stdout, (user, text)

        info = dsctl(agent, user, "info", str(pid))
        assert info.returncode == 0, (user, info)
        assert f"Executable:       {shown_exe}\n" in info.stdout, info.stdout
        assert "Cgroup:           /dst-esc-\\xff\\x1b[2J\n" in info.stdout, info.stdout
        for out in (text.stdout, info.stdout):
            assert not any(c in out for c in "\x1b\x07\ufffd"), out
        raw = dsctl(agent, user, "--json", "info", str(pid))
        assert raw.returncode == 0, (user, raw)
        described = json.loads(raw.stdout)
        assert described["exe"] == rows[pid]["exe"] and described["entry_assembly"] == "DsTestTarget", described
        assert described["cgroup"] == rows[pid]["cgroup"] == "/dst-esc-\ufffd\u001b[2J", described
        assert "\x1b" not in raw.stdout and "\\u001b" in raw.stdout, raw.stdout

    records = [r for r in agent.records() if r["DSAGENT_COMMAND"] == "info"]
    assert len(records) == 4 and all(r["DSAGENT_DECISION"] == "allowed" for r in records), records
    assert all(r["DSAGENT_TARGET_EXE"] == shown_exe for r in records), records
    assert all(r["DSAGENT_TARGET_CGROUP"] == "/dst-esc-\\xff\\x1b[2J" for r in records), records


@test
def a_runtime_with_the_longest_strings_gets_a_shorter_answer_not_an_error():
    """A runtime's ProcessInfo may hold more text than one reply of the agent's: its strings are cut to fit, each
    before a character, and the answer is the rest of them, for root as for the owner."""
    fake = FakeRuntime("info:huge")
    agent = Agent()
    big = "\u20ac" * 10800
    for user in (None, SVC):
        info = info_json(agent, user, fake.pid)
        assert info["pid"] == fake.pid and info["name"] == "ea " + big, info.keys()
        cut = info["command_line"]
        assert 1000 < len(cut) < len("cmd " + big) and ("cmd " + big).startswith(cut), len(cut)
        text = dsctl(agent, user, "info", str(fake.pid))
        assert text.returncode == 0 and f"Name:             ea {big}\n" in text.stdout, text.returncode
    assert [r["DSAGENT_DECISION"] for r in agent.records()] == ["allowed"] * 4, agent.records()


def without_ids(text, *words):
    """@text with request ids and @words (which differ between the two questions) blanked out."""
    text = re.sub(r"[0-9a-f]{16}", "<request>", text)
    for w in words:
        text = text.replace(str(w), "<asked>")
    return text


@test
def a_process_the_caller_may_not_act_on_is_answered_as_one_that_does_not_exist():
    secret = Target(SVC, args=["--marker", "secret"])
    twin = Target(SVC)
    for t in (secret, twin):
        place_in_unit(t.pid, "dst-secret.service")
    agent = Agent()
    missing = 4194303
    questions = [
        ["info", "{}"],
        ["explain", "{}", "info"],
        ["explain", "{}", "dump", "--type", "full"],
        ["dump", "{}"],
        ["trace", "{}", "--duration", "1", "-o", os.path.join(make_dir(ALICE), "{}.nettrace")],
        ["counters", "{}", "--duration", "1"],
    ]
    answers = []
    for question in questions:
        for fmt in ([], ["--json"]):
            asked = [a.format(secret.pid) for a in question]
            control = [a.format(missing) for a in question]
            a, b = dsctl(agent, ALICE, *fmt, *asked), dsctl(agent, ALICE, *fmt, *control)
            assert a.returncode == b.returncode == EXIT_NO_SUCH_PROCESS, (question, a, b)
            assert without_ids(a.stdout, secret.pid) == without_ids(b.stdout, missing), (a, b)
            assert without_ids(a.stderr, secret.pid) == without_ids(b.stderr, missing), (a, b)
            answers += [a.stdout, a.stderr]
    # a unit whose processes she may not see is a unit that runs none, however many it runs
    a = dsctl(agent, ALICE, "--json", "dump", "dst-secret.service")
    b = dsctl(agent, ALICE, "--json", "dump", "dst-nothing.service")
    assert a.returncode == b.returncode == EXIT_NO_SUCH_PROCESS, (a, b)
    assert without_ids(a.stdout, "dst-secret.service") == without_ids(b.stdout, "dst-nothing.service"), (a, b)
    answers += [a.stdout, a.stderr]
    # nothing of the process is in any answer: not its user, unit, executable or command line
    for text in answers:
        for leak in (str(uid_of(SVC)), SVC, "DsTestTarget", "secret", "runs several"):
            assert leak not in text.replace("dst-secret.service", ""), (leak, text)
    # while its owner gets the real answers, and root the real count
    assert dsctl(agent, SVC, "info", str(secret.pid)).returncode == 0
    r = dsctl(agent, None, "dump", "dst-secret.service")
    assert r.returncode == 1 and "runs several" in r.stderr, r


@test
def audit_json_is_one_json_object_a_line_whatever_a_value_holds():
    """--audit json, for log collectors where there is no journald (a Kubernetes pod): each record one line of
    JSON on stdout, the journal's field names as keys, its values as strings. The target's owner chooses its
    executable's path: a newline, quotes, a backslash and the start of a forged line stay inside one value."""
    # no ':' in it: the runtime takes a path with one apart as a list of paths, and does not start
    forged = '{"MESSAGE_ID" "%s", "DSAGENT_DECISION" "allowed"}' % harness.REQUEST_MESSAGE_ID
    evil_dir = os.path.join(make_dir(None, 0o755), f'x\n{forged}\\"')
    shutil.copytree(os.path.dirname(harness.target_app()), evil_dir)
    target = Process(as_user(SVC, ["env", "-i", f"TMPDIR={make_dir(SVC)}", "DOTNET_CLI_TELEMETRY_OPTOUT=1",
                                   "./DsTestTarget"]), cwd=evil_dir)
    pid = int(target.read_line("ready pid=").split()[1].split("=")[1])
    agent = Agent(audit="json")

    r = dsctl(agent, SVC, "--json", "info", str(pid))
    assert r.returncode == 0, r
    lines = open(agent.log_path).read().splitlines()
    # every line is a record, and every record one JSON object of strings (arrays only for repeated fields)
    records = [json.loads(line) for line in lines]
    assert all(isinstance(rec, dict) and all(isinstance(v, (str, list)) for v in rec.values()) for rec in records)
    requests = [rec for rec in records if rec["MESSAGE_ID"] == harness.REQUEST_MESSAGE_ID]
    assert len(requests) == 1 and agent.records() == requests, lines
    record = requests[0]
    assert all(isinstance(v, str) for v in record.values()), record
    assert record["SYSLOG_IDENTIFIER"] == "dsagent" and record["PRIORITY"] == "6", record
    assert record["DSAGENT_COMMAND"] == "info" and record["DSAGENT_DECISION"] == "allowed", record
    assert record["DSAGENT_RULE"] == "owner-access", record
    assert record["DSAGENT_TARGET_PID"] == str(pid) and record["DSAGENT_CLIENT_UID"] == str(uid_of(SVC)), record
    assert re.fullmatch(r"[0-9a-f]{16}", record["DSAGENT_REQUEST_ID"]), record
    # the journal's value: the newline escaped as in every value a target controls, the rest as it was
    assert record["DSAGENT_TARGET_EXE"].endswith("x\\x0a" + forged + '\\\\"/DsTestTarget'), record


if __name__ == "__main__":
    run_tests()
