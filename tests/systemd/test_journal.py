#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The journal as an operator reads it: every kind of record, explained by journalctl -x.

`meson install` of the build into a booted system (booted.py); then the
agent, under its unit, writes each kind of record there is: a request
allowed, denied and failed, a policy loaded and refused (by a running agent
and at start), a dump, a session's start and end, and the count of requests
refused as too many. Each is then read back with `journalctl -x`, as an
operator would, and the catalog's text must hold a real value wherever an
@FIELD@ stood: for a field a record lacks, journalctl prints the field's
bare name instead, so a name left in the text is a field the agent did not
write. Numbers read as people say them: seconds, not microseconds; "1 rule",
not "1 rules". Beside every uid of a request, a dump or a session stand the
user's and group's names.
"""
import json
import os
import re

from booted import (BUILD, POLICY_MESSAGE_ID, REQUEST_MESSAGE_ID, SOURCE, Machine, install_agent, policy_dir,
                    policy_records, reload_and_wait, run_tests, start_target, target_app, test, wait_for)

DUMP_MESSAGE_ID = "b44be14ffedf48ee806826f1d59bcc4e"
SESSION_START_MESSAGE_ID = "21c6214d54a0498bbab8983290c4efb6"
SESSION_END_MESSAGE_ID = "1c5ee471f818453b8c7bac25ac2e872f"
SUPPRESSED_MESSAGE_ID = "dba026f157524dc5bd31f98f0e8e84b9"
AUDIT_GAP_MESSAGE_ID = "e7a3a2ffe6c543d2a42572e8d2074d1b"
EGRESS_MESSAGE_ID = "69c19926015d41838f93007ed7cc398e"
EXIT_AUDIT_UNAVAILABLE = 16

SVC, ALICE, MALLORY = "dst-svc", "dst-alice", "dst-mallory"
TARGET_UNIT = "dst-journal-target.service"
NO_SUCH_PID = "4194303"

state = {"explained": set()}


def catalog_entries():
    text = open(os.path.join(SOURCE, "units/dsagent.catalog")).read()
    return dict(re.findall(r"^-- ([0-9a-f]{32})\n(.*?)(?=^-- |\Z)", text, re.M | re.S))


def message_ids():
    header = open(os.path.join(SOURCE, "agent/audit/catalog-ids.h")).read()
    return set(re.findall(r'#define DSAGENT_MESSAGE_\w+ "([0-9a-f]{32})"', header))


def last_record(m, message_id, *matches):
    records = wait_for(lambda: m.journal(f"MESSAGE_ID={message_id}", *matches),
                       what=f"a record {message_id} {' '.join(matches)}")
    return records[-1]


def explained(m, record):
    """What journalctl -x shows of @record: the catalog's text, lines joined, the "░░ " margin taken off."""
    # from the record on: its own explanation is the first block of "░░" lines
    out = m.run(["journalctl", "--no-pager", "-x", "-o", "short", f"--cursor={record['__CURSOR']}",
                 f"MESSAGE_ID={record['MESSAGE_ID']}"]).stdout
    lines = []
    for line in out.splitlines():
        if line.startswith("░░"):
            lines.append(line[2:].strip())
        elif lines:
            break
    assert lines, f"journalctl -x showed no catalog text for {record['MESSAGE_ID']}:\n{out}"
    return " ".join(" ".join(lines).split())


def check_explained(m, record, *expected):
    """The record's explanation has a value for every @FIELD@, numbers in words, and each of @expected."""
    message_id = record["MESSAGE_ID"]
    template = catalog_entries()[message_id]
    text = explained(m, record)
    fields = set(re.findall(r"@([A-Z0-9_]+)@", template))
    assert fields, f"the catalog entry {message_id} substitutes no field"
    left = sorted(f for f in fields if re.search(rf"\b{f}\b", text))
    assert not left, f"{message_id}: {left} left unexpanded (the record lacks them):\n{text}\n{record}"
    assert not re.search(r"@[A-Z0-9_]+@", text), text
    assert "microsecond" not in text and "_USEC" not in text, text
    wrong = re.findall(r"(?<![\d.])1 (?:rules|files|errors|requests|bytes|seconds|minutes|hours|milliseconds)\b",
                       text)
    assert not wrong, f"{wrong} in:\n{text}"
    for want in expected:
        if isinstance(want, re.Pattern):
            assert want.search(text), f"{want.pattern!r} not in:\n{text}"
        else:
            assert want in text, f"{want!r} not in:\n{text}"
    state["explained"].add(message_id)
    print(f"# {message_id}: {text[:300]}")
    return text


def dsctl(m, user, *args, check=True):
    r = m.run(["dsctl", *args], user=user, check=False)
    assert not check or r.returncode == 0, r
    return r


def who(m, user):
    return f"{user} (uid {m.uid_of(user)})"


def agent_pid(m):
    return m.show("dsagent.service", "MainPID")["MainPID"]


@test
def install_and_make_each_kind_of_record(m):
    install_agent(m, users=(SVC, ALICE, MALLORY))
    state["pid"] = str(start_target(m, TARGET_UNIT, SVC, target_app()))
    m.write(f"{policy_dir()}/policy.d/50-journal.toml", f"""
[[rule]]
name = "alice-diagnoses-the-target"
users = ["{ALICE}"]
commands = ["info", "dump", "trace", "counters"]
targets.units = ["{TARGET_UNIT}"]
dump_types = ["mini"]
trace_profiles = ["cpu-sampling"]
max_duration = "1m"
""")
    m.run(["systemctl", "start", "dsagent.socket"])
    dsctl(m, ALICE, "info", state["pid"])
    wait_for(lambda: any(r["DSAGENT_POLICY_LOADED"] == "yes" for r in policy_records(m)),
             what="the policy's record")


@test
def a_request_allowed_denied_and_failed_is_explained(m):
    pid = state["pid"]
    svc = who(m, SVC)
    record = last_record(m, REQUEST_MESSAGE_ID, "DSAGENT_DECISION=allowed", f"DSAGENT_CLIENT_UID={m.uid_of(ALICE)}")
    assert (record["DSAGENT_CLIENT_USER"], record["DSAGENT_CLIENT_GROUP"], record["DSAGENT_TARGET_USER"]) == \
        (ALICE, ALICE, SVC), record
    check_explained(m, record, f"dsagent allowed a diagnostic request of {who(m, ALICE)}",
                    f'asked dsagent for "info" on process {pid} of {svc}, unit {TARGET_UNIT}, executable /',
                    "Outcome: allowed: process info read.", "Decided by rule alice-diagnoses-the-target.")

    assert dsctl(m, MALLORY, "info", pid, check=False).returncode != 0
    record = last_record(m, REQUEST_MESSAGE_ID, "DSAGENT_DECISION=denied", f"DSAGENT_CLIENT_UID={m.uid_of(MALLORY)}")
    assert record["DSAGENT_CLIENT_USER"] == MALLORY and record["DSAGENT_TARGET_USER"] == SVC, record
    check_explained(m, record, f"dsagent denied a diagnostic request of {who(m, MALLORY)}",
                    f'"info" on process {pid} of {svc}', "Decided by no rule")

    assert dsctl(m, ALICE, "info", NO_SUCH_PID, check=False).returncode != 0
    record = last_record(m, REQUEST_MESSAGE_ID, "DSAGENT_DECISION=failed", f"DSAGENT_TARGET_PID={NO_SUCH_PID}")
    assert record["DSAGENT_CLIENT_USER"] == ALICE and "DSAGENT_TARGET_USER" not in record, record
    check_explained(m, record, f"dsagent failed a diagnostic request of {who(m, ALICE)}",
                    f'asked dsagent for "info" on process {NO_SUCH_PID}.', "Outcome: failed: no such process")


@test
def a_dump_is_explained(m):
    r = dsctl(m, ALICE, "dump", state["pid"], "--type", "mini")
    path = re.search(r"stored at (/var/lib/dsagent/dumps/\S+)", r.stdout).group(1)
    record = last_record(m, DUMP_MESSAGE_ID, f"DSAGENT_DUMP_PATH={path}")
    assert (record["DSAGENT_CLIENT_USER"], record["DSAGENT_TARGET_USER"]) == (ALICE, SVC), record
    check_explained(m, record, f"dsagent stored a mini dump of process {state['pid']} for {who(m, ALICE)}",
                    f"of process {state['pid']} of {who(m, SVC)}, unit {TARGET_UNIT}",
                    "under rule alice-diagnoses-the-target", f"stored it at {path} (",
                    re.compile(r"\(\d+\.\d (?:KiB|MiB|GiB), in \d+(?:\.\d)? (?:milliseconds|seconds?)\)"),
                    "Readable by the requester: yes.")


RETENTION_MESSAGE_ID = "954f9a585ef5482c9a7017bba952745d"


@test
def a_file_retention_removes_is_explained(m):
    """max_files = 1 in the main policy's [agent], a second dump, a reload: the pass after the reload removes the
    older dump, recorded before it goes (docs/policy.md, "Retention")."""
    main = f"{policy_dir()}/policy.toml"
    before = m.run(["cat", main]).stdout
    limited = before.replace("[agent]\n", "[agent]\nmax_files = 1\n", 1) if "[agent]\n" in before else \
        "[agent]\nmax_files = 1\n" + before
    dsctl(m, ALICE, "dump", state["pid"], "--type", "mini")
    m.write(main, limited)
    try:
        reload_and_wait(m)
        record = last_record(m, RETENTION_MESSAGE_ID, "DSAGENT_RETENTION_REASON=max_files")
        check_explained(m, record, "dsagent retention:", "goes by max_files")
    finally:
        m.write(main, before)
        reload_and_wait(m)


@test
def a_trace_and_a_counters_session_are_explained(m):
    dsctl(m, ALICE, "trace", state["pid"], "--duration", "2", "-o", "/tmp/journal-test.nettrace")
    dsctl(m, ALICE, "counters", state["pid"], "--interval", "1", "--duration", "2", "-o", "/tmp/journal-test.csv")
    for kind in ("trace", "counters"):
        start = last_record(m, SESSION_START_MESSAGE_ID, f"DSAGENT_SESSION_KIND={kind}")
        assert (start["DSAGENT_CLIENT_USER"], start["DSAGENT_TARGET_USER"]) == (ALICE, SVC), start
        check_explained(m, start, f"dsagent started a {kind} session in process {state['pid']} for {who(m, ALICE)}",
                        "under rule alice-diagnoses-the-target", "The session ends after at most 2 seconds or ")
        end = last_record(m, SESSION_END_MESSAGE_ID, f"DSAGENT_SESSION_KIND={kind}")
        check_explained(m, end, f"session of process {state['pid']} (duration)",
                        f"for {who(m, ALICE)}, ended: duration, after ", f"Request id: {start['DSAGENT_REQUEST_ID']}.",
                        re.compile(r"after (?:\d+ bytes?|\d+\.\d [KMG]iB) relayed in \d+(?:\.\d)? seconds?\."))


@test
def requests_refused_as_too_many_are_explained(m):
    main = f"{policy_dir()}/policy.toml"
    shipped = m.run(["cat", main]).stdout
    lowered = re.sub(r"^\[agent\]$", "[agent]\nmax_requests_per_second = 1\nmax_request_burst = 1", shipped,
                     count=1, flags=re.M)
    assert lowered != shipped, shipped
    m.write(main, lowered)
    assert reload_and_wait(m).returncode == 0
    m.run(["sh", "-c", f"for i in $(seq 20); do dsctl info {NO_SUCH_PID}; done; true"], user=MALLORY)
    record = last_record(m, SUPPRESSED_MESSAGE_ID, f"DSAGENT_CLIENT_UID={m.uid_of(MALLORY)}")
    assert record["DSAGENT_CLIENT_USER"] == MALLORY, record
    check_explained(m, record, re.compile(rf"dsagent refused \d+ requests? of {re.escape(who(m, MALLORY))} as "
                                          r"too many"), f"{who(m, MALLORY)} sent requests faster")
    m.write(main, shipped)
    assert reload_and_wait(m).returncode == 0


@test
def a_policy_loaded_and_refused_is_explained(m):
    record = [r for r in policy_records(m) if r["DSAGENT_POLICY_LOADED"] == "yes"][-1]
    check_explained(m, record, f"dsagent policy from {policy_dir()}/policy.toml: loaded, 1 rule from 2 files",
                    "The first problem found: none")

    # a running agent told to reload a broken policy keeps the one it has; the signal goes straight to
    # the agent, past the unit's own check, so that the agent itself refuses it
    broken = f"{policy_dir()}/policy.d/60-broken.toml"
    # one error exactly: "1 error"
    m.write(broken, '[[rule]]\nname = "broken"\nusers = ["no-such-user-x"]\ncommands = ["info"]\ntargets.any = true\n')
    before = len(policy_records(m))
    m.run(["systemctl", "kill", "--kill-who=main", "--signal=SIGHUP", "dsagent.service"])
    wait_for(lambda: len(policy_records(m)) > before, what="the refusal's record")
    record = policy_records(m)[-1]
    assert record["DSAGENT_POLICY_LOADED"] == "no", record
    check_explained(m, record, "refused for 1 error; the policy loaded before stays in force",
                    f"The first problem found: {broken}:")

    # an agent that starts on a broken policy has none to keep
    before = len(policy_records(m))
    m.run(["systemctl", "restart", "dsagent.service"], check=False)
    wait_for(lambda: len(policy_records(m)) > before, what="the record of the start")
    record = policy_records(m)[-1]
    assert record["DSAGENT_POLICY_LOADED"] == "no", record
    check_explained(m, record, "refused for 1 error; no policy has loaded yet, so only root is served")
    m.run(["rm", broken])
    m.run(["systemctl", "reset-failed", "dsagent.service", "dsagent.socket"], check=False)
    m.run(["systemctl", "restart", "dsagent.socket", "dsagent.service"], check=False)


PORT_MESSAGE_ID = "92ba7a9ad3f54f1995e1add7dea5ceee"
PORT_TARGET_UNIT = "dst-journal-port-target.service"


@test
def a_runtime_that_connects_in_through_the_socket_unit_is_explained(m):
    """dsagent-port.socket holds /run/dsagent/ports/default.sock; the agent serves it under the [[port]]."""
    port = "/run/dsagent/ports/default.sock"
    m.write(f"{policy_dir()}/policy.d/70-port.toml", f'[[port]]\npath = "{port}"\nusers = ["{SVC}"]\n')
    # systemd starts no socket unit whose service runs already, and passes its fd at the service's start
    m.run(["systemctl", "stop", "dsagent.service"])
    m.run(["systemctl", "start", "dsagent-port.socket"])
    m.run(["systemctl", "start", "dsagent.service"])
    acl = m.run(["getfacl", "-cn", port]).stdout
    assert f"user:{m.uid_of(SVC)}:rw-" in acl and "other::---" in acl, acl
    m.write(f"/etc/systemd/system/{PORT_TARGET_UNIT}", f"""[Unit]
Description=dsagent test target that connects in

[Service]
User={SVC}
PrivateTmp=yes
Environment=DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_DiagnosticPorts={port},connect,nosuspend
ExecStart={target_app()}
""")
    m.run(["systemctl", "daemon-reload"])
    m.run(["systemctl", "start", PORT_TARGET_UNIT])
    pid = m.show(PORT_TARGET_UNIT, "MainPID")["MainPID"]
    record = last_record(m, PORT_MESSAGE_ID, "DSAGENT_PORT_EVENT=registered", f"DSAGENT_TARGET_PID={pid}")
    uid = m.uid_of(SVC)
    check_explained(m, record, re.compile(rf"dsagent port {re.escape(port)}: registered a runtime of process {pid} "
                                          rf"of (?:{SVC} \(uid {uid}\)|uid {uid})"),
                    f"DOTNET_DiagnosticPorts={port},connect", "(running)")
    m.run(["systemctl", "stop", PORT_TARGET_UNIT, "dsagent.service", "dsagent-port.socket"])
    m.run(["rm", f"{policy_dir()}/policy.d/70-port.toml"])
    m.run(["systemctl", "start", "dsagent.service"])


COLLECT_MESSAGE_ID = "7e4f2962cff7436e853607d2fcf710fe"
COLLECT_TARGET_UNIT = "dst-journal-collect-target.service"


@test
def a_collection_rule_that_fires_is_explained(m):
    """A [[collect]] table whose Meter gauge the app keeps beyond its line: the agent's watch sees it and
    records the firing (docs/collect.md)."""
    pid = start_target(m, COLLECT_TARGET_UNIT, SVC, f"{target_app()} --meter-value 500")
    m.write(f"{policy_dir()}/policy.d/80-collect.toml", f"""
[[collect]]
name = "journal-gauge"
targets.units = ["{COLLECT_TARGET_UNIT}"]
when.counter = "Dsagent.TestTarget:test-gauge"
when.above = 300
then.trace_profile = "cpu-sampling"
then.duration = "2s"
readers = ["{ALICE}"]
""")
    reload_and_wait(m)
    record = last_record(m, COLLECT_MESSAGE_ID, "DSAGENT_COLLECT_EVENT=fired", f"DSAGENT_TARGET_PID={pid}")
    check_explained(m, record, "dsagent [[collect]] journal-gauge: fired on", "Dsagent.TestTarget:test-gauge")
    m.run(["rm", f"{policy_dir()}/policy.d/80-collect.toml"])
    reload_and_wait(m)
    m.run(["systemctl", "stop", COLLECT_TARGET_UNIT])


@test
def a_journald_that_stops_reading_holds_no_one_and_its_gap_is_explained(m):
    """journald itself stopped (SIGSTOP): the agent never waits for it. Once journald's socket and the agent's
    queue (made 8 records by a test hook) are full, each request is refused "audit unavailable" at once; when
    journald reads again, the records that waited come, then one that counts the refused."""
    drop_in = "/etc/systemd/system/dsagent.service.d/50-test-audit-queue.conf"
    m.write(drop_in, "[Service]\nEnvironment=DSAGENT_TEST_AUDIT_QUEUE=8\n")
    m.run(["systemctl", "daemon-reload"])
    m.run(["systemctl", "restart", "dsagent.service"])
    dsctl(m, ALICE, "info", state["pid"])
    journald = m.show("systemd-journald.service", "MainPID")["MainPID"]
    m.run(["kill", "-STOP", journald])
    try:
        # each dsctl bounded by timeout(1): a request the agent held would show as 124. 20 s: each is answered at
        # once, and one the agent held would never be; 3000: a count of requests far past the few dozen that
        # fill journald's socket and the queue; 900 s only ends a hang of the whole loop
        r = m.run(["sh", "-c", f"for i in $(seq 3000); do timeout 20 dsctl info {NO_SUCH_PID} >/dev/null 2>&1; "
                               f"s=$?; echo $s; [ $s = {EXIT_AUDIT_UNAVAILABLE} ] && break; done; true"],
                  user=ALICE, timeout=900)
    finally:
        m.run(["kill", "-CONT", journald])
    statuses = r.stdout.split()
    assert statuses[-1] == str(EXIT_AUDIT_UNAVAILABLE) and "124" not in statuses, statuses[-20:]
    record = last_record(m, AUDIT_GAP_MESSAGE_ID)
    assert int(record["DSAGENT_AUDIT_REFUSED"]) >= 1, record
    check_explained(m, record, "dsagent's audit output did not take records",
                    re.compile(r"it refused \d+ requests?"))
    m.run(["rm", drop_in])
    m.run(["systemctl", "daemon-reload"])
    m.run(["systemctl", "restart", "dsagent.service"])
    dsctl(m, ALICE, "info", state["pid"])


@test
def an_egress_outcome_is_explained(m):
    # a store on a port of the agent's own loopback where nothing listens: under the shipped unit (no egress
    # drop-in: tests/systemd/test_egress_unit.py has the uploads that succeed) the upload ends unavailable
    m.sh("install -d -m 0700 /etc/dsagent/egress")
    m.write("/etc/dsagent/egress/journal.keys", 'access_key_id = "journal"\nsecret_access_key = "not-used"\n',
            mode=0o600)
    policy = m.run(["cat", f"{policy_dir()}/policy.d/50-journal.toml"]).stdout
    m.write(f"{policy_dir()}/policy.d/50-journal.toml", f"""
[egress.journal]
endpoint = "http://127.0.0.1:9"
bucket = "dsagent-journal"
region = "us-east-1"
credentials = "file:/etc/dsagent/egress/journal.keys"
attempts = 1
retries = 0
""" + policy.replace('max_duration = "1m"', 'max_duration = "1m"\negress = "journal"'))
    # the egress process is started at start-up only: a store a reload adds needs a restart
    m.run(["systemctl", "restart", "dsagent.service"])
    r = dsctl(m, ALICE, "dump", state["pid"], "--type", "mini")
    path = re.search(r"stored at (/var/lib/dsagent/dumps/\S+)", r.stdout).group(1)
    record = last_record(m, EGRESS_MESSAGE_ID, "DSAGENT_EGRESS_EVENT=outcome", f"DSAGENT_DUMP_PATH={path}")
    assert record["DSAGENT_EGRESS_RESULT"] == "unavailable", record
    check_explained(m, record, f"An artifact of the dump directory, {path}, goes to the S3 store [egress.journal]",
                    "because the rule or [[collect]] table alice-diagnoses-the-target names that store",
                    "the unit has no network")
    m.write(f"{policy_dir()}/policy.d/50-journal.toml", policy)
    m.run(["systemctl", "restart", "dsagent.service"])


@test
def every_message_id_was_explained(m):
    assert message_ids() == set(catalog_entries()), "catalog-ids.h and the catalog disagree"
    missing = message_ids() - state["explained"]
    assert not missing, f"no record of {missing} was rendered: this test should make one"


if __name__ == "__main__":
    # a clone or build under /tmp would be hidden by the booted system's own /tmp
    run_tests(lambda: Machine(name="dsagent-journal", binds=[SOURCE, BUILD]))
