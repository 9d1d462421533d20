#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The agent's uploads against a real radosgw: the daemon starts the egress process (libexec/dsagent-egress) when
its policy has an [egress.NAME] store, and hands it each artifact of a rule or [[collect]] table that names the
store. The egress process alone may make an AF_INET socket (SANDBOX_EGRESS) and read the keys; it is not
dumpable. Each upload is recorded (queued, then its outcome), the file labelled (user.dsagent.egress), and what
lands in the store is read back through boto3 and compared with the local file.

One store serves the whole file (radosgw.py), started on first use.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import uuid

import harness
import radosgw
from egress_tools import outcome_for, sha256_file
from harness import (ALICE, BUILD, DSAGENT, DUMP_BOUND, MALLORY, PYTHON, SVC, Agent, Skip, Target, as_user, dsctl,
                     make_dir, place_in_unit, run_tests, test, uid_of, wait_for)

HELPER = os.path.join(BUILD, "agent", "egress", "dsagent-egress")
EGRESS_MESSAGE_ID = "69c19926015d41838f93007ed7cc398e"
DUMP_MESSAGE_ID = "b44be14ffedf48ee806826f1d59bcc4e"

store = radosgw.file_store


def keys_file(access_key, secret_key):
    directory = make_dir(None, 0o700)
    path = os.path.join(directory, "keys")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f'access_key_id = "{access_key}"\nsecret_access_key = "{secret_key}"\n')
    return path


def egress_policy(credentials=None, endpoint=None, extra="", rule_extra="", tables="", bucket=None):
    gw = store()
    credentials = credentials or keys_file(gw.access_key, gw.secret_key)
    return f"""[agent]
dump_dir = "@DUMP_DIR@"

[egress.central]
endpoint = "{endpoint or gw.endpoint}"
bucket = "{bucket or gw.bucket}"
region = "{gw.region}"
prefix = "test/"
credentials = "file:{credentials}"
{extra}
[[rule]]
name = "ops-dumps"
users = ["{ALICE}"]
commands = ["dump", "ps", "info"]
targets.users = ["{SVC}"]
dump_types = ["mini"]
egress = "central"
{rule_extra}
{tables}"""


def start_agent(policy):
    return Agent(policy=policy, env={"DSAGENT_TEST_EGRESS_HELPER": HELPER})


def egress_pid(agent):
    """The agent's child that runs dsagent-egress (its comm is the file's name, cut to 15 bytes)."""
    def comm(pid):
        try:
            return open(f"/proc/{pid}/comm").read().strip()
        except OSError:
            return None  # a child that ended meanwhile
    children = open(f"/proc/{agent.proc.pid}/task/{agent.proc.pid}/children").read().split()
    found = [int(c) for c in children if comm(c) == "dsagent-egress"]
    return found[0] if found else None


def egress_server_pid(agent):
    """The egress process's server: the child of the agent's dsagent-egress (its supervisor) that reads requests
    and forks each upload's process."""
    supervisor = egress_pid(agent)
    try:
        children = open(f"/proc/{supervisor}/task/{supervisor}/children").read().split() if supervisor else []
    except OSError:
        return None  # gone meanwhile
    found = [int(c) for c in children if open(f"/proc/{c}/comm").read().strip() == "dsagent-egress"]
    return found[0] if found else None


def queued_for(agent, path):
    found = [r for r in agent.records(message_id=EGRESS_MESSAGE_ID)
             if r.get("DSAGENT_DUMP_PATH") == path and r.get("DSAGENT_EGRESS_EVENT") == "queued"]
    assert len(found) == 1, (path, agent.records(message_id=EGRESS_MESSAGE_ID))
    return found[0]


def label_of(path):
    try:
        return os.getxattr(path, "user.dsagent.egress").decode()
    except OSError:
        return None


def dump(agent, user, pid):
    r = dsctl(agent, user, "--json", "dump", str(pid), "--type", "mini", timeout=DUMP_BOUND)
    assert r.returncode == 0, r
    return json.loads(r.stdout)


@test
def a_rules_dump_lands_in_the_store_with_its_records_and_label():
    gw = store()
    target = Target(SVC)
    agent = start_agent(egress_policy())
    result = dump(agent, ALICE, target.pid)
    path = result["path"]
    request_id = path.rsplit(".", 1)[1]  # the dump's name ends in its request id
    out = outcome_for(agent, path)
    queued = queued_for(agent, path)
    assert out["DSAGENT_EGRESS_RESULT"] == "uploaded", out
    local = sha256_file(path)
    key = out["DSAGENT_EGRESS_KEY"]
    assert key == queued["DSAGENT_EGRESS_KEY"], (queued, out)
    host = os.uname().nodename
    assert re.fullmatch(rf"test/{re.escape(host)}/[^/]+/dump/\d{{4}}/\d\d/\d\d/[A-Za-z0-9._-]+-{target.pid}-"
                        rf"\d{{8}}T\d{{6}}Z-{request_id}\.dmp", key), key
    # the store's own client path reads back what the local file holds
    assert gw.sha256_of(key) == local == out["DSAGENT_EGRESS_SHA256"], (key, local, out)
    size = os.path.getsize(path)
    assert out["DSAGENT_EGRESS_SIZE"] == str(size) and queued["DSAGENT_EGRESS_SIZE"] == str(size), out
    for field in ("DSAGENT_EGRESS_TARGET", "DSAGENT_EGRESS_PARTS", "DSAGENT_EGRESS_ATTEMPTS", "DSAGENT_EGRESS_USEC",
                  "DSAGENT_EGRESS_HTTP_STATUS", "DSAGENT_REQUEST_ID", "DSAGENT_RULE"):
        assert field in out, (field, out)
    assert out["DSAGENT_EGRESS_TARGET"] == "central" and out["DSAGENT_RULE"] == "ops-dumps", out
    assert out["DSAGENT_REQUEST_ID"] == request_id and out["DSAGENT_EGRESS_HTTP_STATUS"] == "200", out
    assert int(out["DSAGENT_EGRESS_ATTEMPTS"]) >= 2, out  # the PUT and the confirming HEAD
    assert label_of(path) == f"uploaded:central:{key}", label_of(path)
    head = gw.client().head_object(Bucket=gw.bucket, Key=key)
    meta = head["Metadata"]
    assert meta["dsagent-sha256"] == local and meta["requester-uid"] == str(uid_of(ALICE)), meta
    assert meta["rule"] == "ops-dumps" and meta["pid"] == str(target.pid) and meta["type"] == "dump", meta
    # dsctl dumps names the object, from the label
    r = dsctl(agent, ALICE, "--json", "dumps")
    listed = [x for x in json.loads(r.stdout) if x["path"] == path] if r.returncode == 0 else r
    assert listed and listed[0]["egress"] == {"state": "uploaded", "store": "central", "key": key}, (listed, r)
    r = dsctl(agent, ALICE, "dumps")
    assert r.returncode == 0 and f" egress uploaded:central:{key}\n" in r.stdout, r
    # the queued record came before the outcome
    records = [r for r in agent.records(message_id=EGRESS_MESSAGE_ID) if r.get("DSAGENT_DUMP_PATH") == path]
    assert [r["DSAGENT_EGRESS_EVENT"] for r in records] == ["queued", "outcome"], records
    assert gw.secret_key not in open(agent.log_path).read()


def table(name, unit, then):
    return (f'\n[[collect]]\nname = "{name}"\ntargets.users = ["{SVC}"]\ntargets.units = ["{unit}"]\n'
            f'when.counter = "Dsagent.TestTarget:test-gauge"\nwhen.above = 300\n{then}\nthen.egress = "central"\n'
            f'readers = ["{ALICE}"]\n')


def outcome_of_table(agent, name, timeout=180):
    """The egress outcome of table @name's artifact. @timeout: the table's firing (its counter session's first
    samples, a few seconds) and the artifact's taking and upload; 180 s bounds them on a loaded machine."""
    def find():
        for r in agent.records(message_id=EGRESS_MESSAGE_ID):
            if r.get("DSAGENT_RULE") == name and r.get("DSAGENT_EGRESS_EVENT") == "outcome":
                return r
        return None
    return wait_for(find, timeout=timeout, what=f"the egress outcome of table {name}'s artifact")


@test
def a_collect_tables_artifacts_land_in_the_store():
    gw = store()
    unit = f"dst-egress-{uuid.uuid4().hex[:12]}.service"
    # a /tmp of its own: a dump still staging when the test ends leaves its staging directory there
    target = Target(SVC, tmpdir=None, mount_ns=True, args=("--meter-value", "500"))
    place_in_unit(target.pid, unit)
    agent = start_agent(egress_policy(tables=table("high-dump", unit, 'then.dump = "mini"') +
                                      table("high-stacks", unit, "then.stacks = true")))
    for name, kind, extension in (("high-dump", "dump", "dmp"), ("high-stacks", "stacks", "txt")):
        out = outcome_of_table(agent, name)
        assert out["DSAGENT_EGRESS_RESULT"] == "uploaded", out
        path, key = out["DSAGENT_DUMP_PATH"], out["DSAGENT_EGRESS_KEY"]
        assert f".collect-{name}." in path, path
        assert re.fullmatch(rf"test/[^/]+/{re.escape(unit)}/{kind}/\d{{4}}/\d\d/\d\d/[A-Za-z0-9._-]+-{target.pid}-"
                            rf"\d{{8}}T\d{{6}}Z-[0-9a-f]{{16}}\.{extension}", key), key
        local = sha256_file(path)
        assert gw.sha256_of(key) == local == out["DSAGENT_EGRESS_SHA256"], (key, local, out)
        assert label_of(path) == f"uploaded:central:{key}", label_of(path)
        meta = gw.client().head_object(Bucket=gw.bucket, Key=key)["Metadata"]
        assert meta["rule"] == name and meta["unit"] == unit and "requester-uid" not in meta, meta


@test
def keep_local_false_frees_the_local_copy_once_the_upload_is_confirmed():
    gw = store()
    target = Target(SVC)
    agent = start_agent(egress_policy(extra="keep_local = false\n"))
    path = dump(agent, ALICE, target.pid)["path"]
    out = outcome_for(agent, path)
    assert out["DSAGENT_EGRESS_RESULT"] == "uploaded" and out["DSAGENT_EGRESS_LOCAL"] == "removed", out
    assert not os.path.exists(path), path
    # what is gone locally is in the store, whole: its size and the sha256 the upload read
    assert gw.sha256_of(out["DSAGENT_EGRESS_KEY"]) == out["DSAGENT_EGRESS_SHA256"], out
    head = gw.client().head_object(Bucket=gw.bucket, Key=out["DSAGENT_EGRESS_KEY"])
    assert str(head["ContentLength"]) == out["DSAGENT_EGRESS_SIZE"], (head, out)


@test
def a_presigned_url_is_for_a_reader_of_the_artifact_alone():
    import urllib.parse
    import urllib.request
    target = Target(SVC)
    agent = start_agent(egress_policy(extra='url_max_age = "2m"\n'))
    path = dump(agent, ALICE, target.pid)["path"]
    out = outcome_for(agent, path)
    assert out["DSAGENT_EGRESS_RESULT"] == "uploaded", out
    r = dsctl(agent, ALICE, "--json", "dumps", "--url", path)
    assert r.returncode == 0, r
    answer = json.loads(r.stdout)
    assert answer["path"] == path and answer["key"] == out["DSAGENT_EGRESS_KEY"], answer
    query = urllib.parse.parse_qs(urllib.parse.urlparse(answer["url"]).query)
    assert query["X-Amz-Expires"] == ["120"], query  # the store's url_max_age, no more
    assert answer["expires_usec"] <= (time.time() + 120) * 1e6, answer
    assert store().secret_key not in answer["url"]
    # whoever holds the URL reads the very bytes of the local file (15 s: a bound on loopback, not a timing)
    with urllib.request.urlopen(answer["url"], timeout=15) as response:
        assert hashlib.sha256(response.read()).hexdigest() == sha256_file(path)
    # the text form: the URL alone
    r = dsctl(agent, ALICE, "dumps", "--url", os.path.basename(path))
    assert r.returncode == 0 and r.stdout.startswith(store().endpoint + "/") and r.stdout.count("\n") == 1, r
    # someone who may not read the file is answered exactly as for a name that is not there
    refused = dsctl(agent, MALLORY, "dumps", "--url", path)
    missing = dsctl(agent, MALLORY, "dumps", "--url", path + "0")
    words = lambda result: re.sub(r" \(request [0-9a-f]+\)", "", result.stderr)  # each request has its own id
    assert refused.returncode == missing.returncode != 0, (refused, missing)
    assert refused.stdout == missing.stdout == "" and words(refused) == words(missing), (refused, missing)
    assert words(dsctl(agent, ALICE, "dumps", "--url", path + "0")) == words(missing)
    # the record says which object, never the URL
    said = open(agent.log_path).read()
    assert "X-Amz-Signature" not in said and answer["url"] not in said
    records = [x for x in agent.records() if x.get("DSAGENT_COMMAND") == "dump-url"]
    assert [x["DSAGENT_DECISION"] for x in records] == ["allowed", "allowed", "denied", "failed", "failed"], records
    assert out["DSAGENT_EGRESS_KEY"] in records[0]["DSAGENT_REASON"], records[0]


@test
def a_url_the_keys_cannot_sign_tells_the_reader_nothing_of_where_they_are():
    """The egress process's reason for a failed signature can name the keys file (its mode, its place); the reader
    who asked is told only that the keys failed, the record keeps the whole reason for root. (Before: her error
    held the keys' path, which explain and collect withhold by design.)"""
    gw = store()
    target = Target(SVC)
    keys = keys_file(gw.access_key, gw.secret_key)
    agent = start_agent(egress_policy(credentials=keys))
    path = dump(agent, ALICE, target.pid)["path"]
    assert outcome_for(agent, path)["DSAGENT_EGRESS_RESULT"] == "uploaded"
    assert dsctl(agent, ALICE, "dumps", "--url", path).returncode == 0
    os.chmod(keys, 0o644)  # a rotation gone wrong: the egress process refuses keys others may read
    r = dsctl(agent, ALICE, "dumps", "--url", path)
    assert r.returncode != 0 and "the store's keys cannot be used to sign a URL" in r.stderr, r
    assert keys not in r.stderr + r.stdout and os.path.dirname(keys) not in r.stderr, r
    failed = [x for x in agent.records() if x.get("DSAGENT_COMMAND") == "dump-url" and x["DSAGENT_DECISION"] == "failed"]
    assert failed and keys in failed[-1]["DSAGENT_REASON"], failed


@test
def an_agent_restarted_mid_upload_hands_the_file_over_again():
    gw = store()
    target = Target(SVC)
    dumps = os.path.join(make_dir(None, 0o755), "dumps")  # both agents' dump_dir
    policy = egress_policy().replace("@DUMP_DIR@", dumps)
    first = start_agent(policy)
    gw.pause_rgw()
    try:
        path = dump(first, ALICE, target.pid)["path"]
        queued_for(first, path)
        # killed mid-upload: its egress process and the upload's process die with it (PR_SET_DEATHSIG)
        pid = egress_pid(first)
        first.proc.kill()
        first.proc.wait()
        wait_for(lambda: not os.path.exists(f"/proc/{pid}"), what="the egress process gone with its agent")
        assert label_of(path) == "pending:central", label_of(path)
        assert not [r for r in first.records(message_id=EGRESS_MESSAGE_ID)
                    if r.get("DSAGENT_EGRESS_EVENT") == "outcome"], "an outcome before the kill"
    finally:
        gw.resume_rgw()
    second = start_agent(policy)
    out = outcome_for(second, path)
    assert out["DSAGENT_EGRESS_RESULT"] == "uploaded", out
    assert queued_for(second, path)["DSAGENT_REQUEST_ID"] == path.rsplit(".", 1)[1]  # the dump's own request
    assert gw.sha256_of(out["DSAGENT_EGRESS_KEY"]) == sha256_file(path) == out["DSAGENT_EGRESS_SHA256"], out
    assert label_of(path) == f"uploaded:central:{out['DSAGENT_EGRESS_KEY']}", label_of(path)
    # an uploaded file is not handed over again by the next start
    third = start_agent(policy)
    r = dsctl(third, ALICE, "ps")  # answered once its start-up, and so its scan, is over
    assert r.returncode == 0, r
    assert not third.records(message_id=EGRESS_MESSAGE_ID), third.records(message_id=EGRESS_MESSAGE_ID)


@test
def a_store_named_by_a_host_name_is_reached_through_the_resolver_thread():
    """Debian's libcurl resolves a name (other than localhost) in a thread of its own: SANDBOX_EGRESS must let the
    upload's process start it. The host's own name, where /etc/hosts gives it 127.0.0.1 (Debian's default
    gives 127.0.1.1, where the store does not listen: then there is nothing to test here)."""
    import socket
    gw = store()
    name = os.uname().nodename
    try:
        address = socket.gethostbyname(name)
    except OSError:
        address = None
    if address != "127.0.0.1":
        raise Skip(f"{name} is not 127.0.0.1 here ({address})")
    endpoint = gw.endpoint.replace("127.0.0.1", name)
    target = Target(SVC)
    agent = start_agent(egress_policy(endpoint=endpoint, extra="allow_http = true\n"))
    path = dump(agent, ALICE, target.pid)["path"]
    out = outcome_for(agent, path)
    assert out["DSAGENT_EGRESS_RESULT"] == "uploaded", out
    assert gw.sha256_of(out["DSAGENT_EGRESS_KEY"]) == sha256_file(path)


@test
def a_host_without_a_store_runs_no_egress_process_and_a_reload_that_adds_one_is_said():
    target = Target(SVC)
    text = egress_policy()
    without = re.sub(r"\[egress\.central\].*?(?=\[\[rule\]\])", "", text, flags=re.S)
    without = without.replace('egress = "central"\n', "")
    assert "egress" not in without, without
    agent = start_agent(without)
    assert egress_pid(agent) is None  # no store, no network code: nothing was started
    agent.write_policy(egress_policy())
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    path = dump(agent, ALICE, target.pid)["path"]
    out = outcome_for(agent, path)
    assert out["DSAGENT_EGRESS_RESULT"] == "failed" and "restart the agent" in out["DSAGENT_EGRESS_ERROR"], out
    assert os.path.exists(path) and label_of(path) == "failed:central:no-egress-process", label_of(path)
    assert egress_pid(agent) is None


@test
def explain_names_the_store_a_rules_dumps_go_to_and_nothing_of_its_keys():
    gw = store()
    target = Target(SVC)
    agent = start_agent(egress_policy())
    r = dsctl(agent, ALICE, "--json", "explain", str(target.pid), "dump")
    assert r.returncode == 0 and json.loads(r.stdout)["egress"] == "central", r
    r = dsctl(agent, ALICE, "explain", str(target.pid), "dump")
    assert r.returncode == 0 and f"  egress: central ({gw.endpoint}, bucket {gw.bucket}, prefix test/)\n" in r.stdout, r
    # a command that stores nothing names no store; nor does a denied dump
    r = dsctl(agent, ALICE, "--json", "explain", str(target.pid), "info")
    assert r.returncode == 0 and "egress" not in json.loads(r.stdout), r
    r = dsctl(agent, MALLORY, "--json", "explain", str(target.pid), "dump")
    assert "egress" not in r.stdout and "central" not in r.stdout, r
    said = r.stdout + r.stderr + dsctl(agent, ALICE, "explain", str(target.pid), "dump").stdout
    # the store is named with where it is (test_policy's explain case decides so); nothing of its keys
    assert gw.access_key not in said and gw.secret_key not in said and "credentials" not in said, said


def assert_failed_and_kept(agent, path, result):
    out = outcome_for(agent, path)
    assert out["DSAGENT_EGRESS_RESULT"] == result, out
    assert out["DSAGENT_EGRESS_LOCAL"] == "kept" and out.get("DSAGENT_EGRESS_ERROR"), out
    assert os.path.exists(path) and label_of(path) == f"failed:central:{result}", (path, label_of(path))
    return out


@test
def a_store_down_is_recorded_and_the_local_copy_kept():
    gw = store()
    target = Target(SVC)
    # two tries a request: a refused connection is tried again after a backoff of about a second; no hand-over
    # again (retries = 0: test_egress_retry.py has those)
    agent = start_agent(egress_policy(extra="attempts = 2\nretries = 0\n"))
    gw.stop_rgw()
    try:
        path = dump(agent, ALICE, target.pid)["path"]
        out = assert_failed_and_kept(agent, path, "unavailable")
        assert int(out["DSAGENT_EGRESS_ATTEMPTS"]) == 2, out
        assert "onnect" in out["DSAGENT_EGRESS_ERROR"], out  # curl's words: "Couldn't connect", "Failed to connect"
    finally:
        gw.start_rgw()
    # the store back, the next dump goes
    path = dump(agent, ALICE, target.pid)["path"]
    assert outcome_for(agent, path)["DSAGENT_EGRESS_RESULT"] == "uploaded"


@test
def wrong_keys_are_refused_and_recorded_with_the_stores_code():
    gw = store()
    target = Target(SVC)
    wrong = keys_file(gw.access_key, "not" + gw.secret_key[3:])
    agent = start_agent(egress_policy(credentials=wrong))
    path = dump(agent, ALICE, target.pid)["path"]
    out = assert_failed_and_kept(agent, path, "refused")
    assert out["DSAGENT_EGRESS_HTTP_STATUS"] == "403" and out["DSAGENT_EGRESS_S3_CODE"] == "SignatureDoesNotMatch", out
    assert out["DSAGENT_EGRESS_ATTEMPTS"] == "1", out  # a 4xx is not tried again
    r = dsctl(agent, ALICE, "--json", "dumps")
    listed = [x for x in json.loads(r.stdout) if x["path"] == path] if r.returncode == 0 else r
    assert listed and listed[0]["egress"] == {"state": "failed", "store": "central", "result": "refused"}, listed
    assert gw.secret_key[3:] not in open(agent.log_path).read()


@test
def a_frozen_store_holds_nothing_of_the_agent():
    gw = store()
    target = Target(SVC)
    other = Target(SVC)
    agent = start_agent(egress_policy())
    gw.pause_rgw()
    try:
        path = dump(agent, ALICE, target.pid)["path"]
        queued_for(agent, path)
        # the store answers nothing: the agent still does, and another dump is taken, published and queued
        r = dsctl(agent, ALICE, "ps")
        assert r.returncode == 0 and str(target.pid) in r.stdout, r
        r = dsctl(agent, ALICE, "--json", "info", str(other.pid))
        assert r.returncode == 0, r
        second = dump(agent, ALICE, other.pid)["path"]
        queued_for(agent, second)
    finally:
        gw.resume_rgw()
    # both uploads were under way across the stall (a frozen store takes nothing), and end uploaded once it
    # runs again: what the agent answered meanwhile did not wait for them
    for p in (path, second):
        out = outcome_for(agent, p, timeout=300)  # curl cuts a stalled transfer after 30 s, then tries again
        assert out["DSAGENT_EGRESS_RESULT"] == "uploaded", out
        assert gw.sha256_of(out["DSAGENT_EGRESS_KEY"]) == sha256_file(p)


@test
def an_egress_process_far_behind_is_busy_and_the_loop_never_waits_for_it():
    import signal
    target = Target(SVC)
    # busy is final here (retries = 0): test_egress_retry.py hands it over again
    agent = start_agent(egress_policy(extra="retries = 0\n"))
    pid = wait_for(lambda: egress_server_pid(agent), what="the egress process's server")
    os.kill(pid, signal.SIGSTOP)  # it reads nothing more: the uploads pile up in its socket's buffer
    try:
        paths, busy = [], None
        # the buffer holds a few dozen requests at most (the kernel's queue of a Unix socket, its send buffer);
        # 64 dumps are a bound far beyond that, never reached when the check holds
        for _ in range(64):
            paths.append(dump(agent, ALICE, target.pid)["path"])  # answered: the loop did not wait
            busy = [r for r in agent.records(message_id=EGRESS_MESSAGE_ID)
                    if r.get("DSAGENT_EGRESS_RESULT") == "busy"]
            if busy:
                break
        assert busy, "no upload was refused busy"
        path = busy[0]["DSAGENT_DUMP_PATH"]
        assert path == paths[-1] and os.path.exists(path) and label_of(path) == "failed:central:busy", busy
        assert "far behind" in busy[0]["DSAGENT_EGRESS_ERROR"], busy
    finally:
        os.kill(pid, signal.SIGCONT)
    # what it took before it fell behind goes once it runs again: it reads them in order, runs 4 and queues 16,
    # and answers the rest busy itself (final here, with retries = 0)
    for i, p in enumerate(paths[:-1]):
        result = outcome_for(agent, p)["DSAGENT_EGRESS_RESULT"]
        assert result == "uploaded" if i < 20 else result in ("uploaded", "busy"), (i, p, result)


@test
def an_upload_to_a_store_frozen_for_good_ends_at_its_deadline_recorded():
    gw = store()
    target = Target(SVC)
    # timeout: the whole upload's deadline, past which its process is killed; 5 s keeps the test short
    agent = start_agent(egress_policy(extra='timeout = "5s"\nretries = 0\n'))
    gw.pause_rgw()
    try:
        path = dump(agent, ALICE, target.pid)["path"]
        out = assert_failed_and_kept(agent, path, "timeout")
        assert "deadline" in out["DSAGENT_EGRESS_ERROR"], out
        # its process is gone: the egress process's server has no child left
        pid = egress_server_pid(agent)
        wait_for(lambda: not open(f"/proc/{pid}/task/{pid}/children").read().split(),
                 what="the upload's process reaped")
    finally:
        gw.resume_rgw()


def run_egress_alone(env_extra):
    """dsagent-egress started as the agent starts it, with one end of a socketpair as its fd 3; its test hook
    (DSAGENT_TEST_EGRESS_SYSCALL) runs in its sandbox before it serves. The other end is closed once the hook has
    said its word on stderr, or killed it: the egress process ends as soon as the agent's end closes (it watches
    fd 3), so closed at once it could end before its hook ran. Its result and its stderr."""
    import select
    import socket
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with theirs:
        proc = subprocess.Popen(["sh", "-c", f'exec "$0" --agent={os.getpid()} 3<&{theirs.fileno()} {theirs.fileno()}<&-',
                                 HELPER],
                                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=dict(os.environ, **env_extra))
    with ours:
        # the hook's line, or the end of stderr when the hook killed it: ms; 30 s is a bound against a hang
        ready, _, _ = select.select([proc.stderr], [], [], 30)
        said = proc.stderr.readline() if ready else ""
    # then it exits by itself, its end closed: ms; 30 s is a bound against a hang
    out, err = proc.communicate(timeout=30)
    return proc.returncode, said + err


@test
def an_egress_process_that_closes_its_socket_and_lingers_holds_nothing_of_the_agent():
    """A compromised egress process may close its socket and live on (its filter allows both): the agent, seeing
    the socket end, must not wait for it in waitpid() with its loop held for everyone (a reviewer's stand-in held
    root's `dsctl ps` for 40 s). It runs as its own user, which the agent (no CAP_KILL) cannot signal: the agent
    watches its pidfd and reaps it once it has exited, leaving no zombie. Here the stand-in would linger 10
    minutes; the test ends it."""
    import pwd
    import signal
    helper = os.path.join(make_dir(None, 0o755), "dsagent-egress")
    with open(helper, "w") as f:
        f.write("#!/bin/sh\nexec 3>&-\nexec sleep 600\n")
    os.chmod(helper, 0o755)
    gw = store()
    agent = Agent(policy=egress_policy(credentials=keys_file(gw.access_key, gw.secret_key)),
                  env={"DSAGENT_TEST_EGRESS_HELPER": helper})
    lingering = lambda: [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()
                         and is_child_of(int(p), agent.proc.pid) and os.path.exists(f"/proc/{p}/cmdline")
                         and open(f"/proc/{p}/cmdline", "rb").read().startswith(b"sleep\x00600\x00")]
    (pid,) = wait_for(lingering, what="the lingering egress stand-in")
    assert status_of(pid)["Uid"].split()[0] == str(pwd.getpwnam(harness.EGRESS_USER).pw_uid), status_of(pid)["Uid"]
    # dsctl's own bound (60 s) is far shorter than the linger: a loop held in waitpid() fails this
    r = dsctl(agent, "root", "ps")
    assert r.returncode == 0, r
    assert os.path.exists(f"/proc/{pid}") and status_of(pid)["State"][0] != "Z"  # it lingers: the case is real
    os.kill(pid, signal.SIGKILL)
    # reaped by the agent once it exited: no zombie of it is left under the agent
    wait_for(lambda: not os.path.exists(f"/proc/{pid}"), what="the lingering stand-in reaped by the agent")


def is_child_of(pid, parent):
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]) == parent
    except (OSError, IndexError, ValueError):
        return False


@test
def the_egress_process_blocks_no_signal_of_the_agents():
    """An exec keeps the blocked signals: the agent blocks SIGTERM, SIGINT and SIGHUP for its signal sources, and its
    egress process (and each upload's child) took that mask and ignored SIGTERM. It starts with none blocked."""
    gw = store()
    agent = start_agent(egress_policy(credentials=keys_file(gw.access_key, gw.secret_key)))
    pid = wait_for(lambda: egress_pid(agent), what="the egress process")
    blocked = [line.split()[1] for line in open(f"/proc/{pid}/status") if line.startswith("SigBlk:")][0]
    assert int(blocked, 16) == 0, blocked
    agent_blocked = [line.split()[1] for line in open(f"/proc/{agent.proc.pid}/status") if line.startswith("SigBlk:")][0]
    assert int(agent_blocked, 16) & (1 << 14), agent_blocked  # the agent's own mask holds SIGTERM: the case is real


@test
def the_egress_process_dies_with_its_agent_while_a_check_waits_on_the_store():
    """The egress process runs as its own user, which the agent (root without CAP_KILL) may not signal: the kernel
    refuses the death signal the agent's exit would send it (and SELinux records a denial of dsagent_t's kill).
    It watches fd 3 instead (O_ASYNC): the agent's end closes when it dies, however it dies, and the egress
    process ends at once, even while a check blocks in libcurl on a store that holds the connection and never
    answers. Here `--check-policy --egress` is killed while its egress process waits on such a store."""
    import signal
    import socket
    import threading
    import pwd
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    harness.scope.callback(server.close)
    held = []

    def hold():  # accepts and never answers: the connection stays open until the case ends
        try:
            while True:
                held.append(server.accept()[0])
        except OSError:
            pass
    threading.Thread(target=hold, daemon=True).start()
    harness.scope.callback(lambda: [c.close() for c in held])
    gw = store()
    agent_dir = make_dir(None, 0o755)
    policy = os.path.join(agent_dir, "policy.toml")
    with open(policy, "w") as f:
        f.write(egress_policy(credentials=keys_file(gw.access_key, gw.secret_key),
                              endpoint=f"http://127.0.0.1:{server.getsockname()[1]}")
                .replace("@DUMP_DIR@", os.path.join(agent_dir, "dumps")))
    check = subprocess.Popen([DSAGENT, "--check-policy", "--egress", policy], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=dict(os.environ, DSAGENT_TEST_EGRESS_HELPER=HELPER))
    harness.scope.callback(check.kill)
    wait_for(lambda: held, what="the egress process connected to the silent store")
    children = open(f"/proc/{check.pid}/task/{check.pid}/children").read().split()
    (egress,) = [int(c) for c in children if open(f"/proc/{c}/comm").read().strip() == "dsagent-egress"]
    assert status_of(egress)["Uid"].split()[0] == str(pwd.getpwnam(harness.EGRESS_USER).pw_uid)
    check.send_signal(signal.SIGKILL)
    check.wait()
    alive = lambda: os.path.exists(f"/proc/{egress}") and "State:\tZ" not in open(f"/proc/{egress}/status").read()
    # it ends at once; 10 s is a bound against a hang, well below what the store would hold it (curl's 30 s
    # low-speed cut of the check): without its watch of fd 3 it waits that long, and the case fails
    wait_for(lambda: not alive(), timeout=10, what="the egress process gone with its agent")


@test
def only_the_egress_process_may_make_an_inet_socket():
    import signal
    # each of the agent's workers (forked after it entered its sandbox) dies on socket(AF_INET) while its egress
    # process runs
    agent = Agent(policy=egress_policy(), env={"DSAGENT_TEST_EGRESS_HELPER": HELPER,
                                               "DSAGENT_TEST_WORKER_INET_SOCKET": "1"})
    # the agent forks it before it listens; its name is dsagent-egress once its exec is done
    wait_for(lambda: egress_pid(agent), what="the egress process")
    r = dsctl(agent, ALICE, "info", "1")  # opening a process is a worker's job
    assert r.returncode != 0, r
    log = wait_for(lambda: (lambda text: text if "a worker was killed by its system call filter" in text
                            else None)(open(agent.log_path).read()), what="a worker killed by its filter")
    assert "a worker survived socket(AF_INET)" not in log, log
    # the agent, started with a store and so with its egress process, still dies on socket(AF_INET)
    agent_dir = make_dir(None, 0o755)
    policy = os.path.join(agent_dir, "policy.toml")
    with open(policy, "w") as f:
        f.write(egress_policy().replace("@DUMP_DIR@", os.path.join(agent_dir, "dumps")))
    proc = subprocess.run([DSAGENT, "--listen", os.path.join(agent_dir, "s.sock"), "--policy", policy,
                           "--runtime-dir", os.path.join(agent_dir, "run"), "--audit", "stderr"],
                          env=dict(os.environ, DSAGENT_TEST_FORBIDDEN_SYSCALL="inet-socket",
                                   DSAGENT_TEST_EGRESS_HELPER=HELPER),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    # it dies at its start, within ms; 30 s is a bound against a hang
    assert proc.returncode == -signal.SIGSYS, (proc.returncode, proc.stderr)
    # the egress process may, in its sandbox, and serves on
    rc, err = run_egress_alone({"DSAGENT_TEST_EGRESS_SYSCALL": "inet-socket"})
    assert rc == 0 and "dsagent-egress: an AF_INET socket: made" in err, (rc, err)
    # and nothing else of what its filter leaves out: each kills it
    for call in ("packet-socket", "execve", "open-write", "ptrace", "unshare"):
        rc, err = run_egress_alone({"DSAGENT_TEST_EGRESS_SYSCALL": call})
        assert rc == -signal.SIGSYS, (call, rc, err)
    # nor kill() of a process of root's that is not its own (it kills its uploads through pidfds): before, its
    # filter let SIGKILL reach any pid of root's, this sleep included
    bystander = subprocess.Popen(["sleep", "600"])
    try:
        rc, err = run_egress_alone({"DSAGENT_TEST_EGRESS_SYSCALL": f"kill:{bystander.pid}"})
        assert rc == -signal.SIGSYS and bystander.poll() is None, (rc, err, bystander.poll())
    finally:
        bystander.kill()
        bystander.wait()


def status_of(pid):
    return dict(line.split(":\t", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":\t" in line)


def root_only_file():
    """A file of root's, mode 0600, whose text says whose it is: what a compromised egress process would send out."""
    path = os.path.join(make_dir(None, 0o755), "root-only")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("root's alone\n")
    return path


@test
def the_egress_process_runs_as_its_own_user_and_opens_no_file_of_roots():
    """The egress process holds the network and parses what the stores answer: compromised, as uid 0 it could read
    every file of root's (owner access needs no capability) and send it out. It runs as dsagent-egress, its group,
    no other group; from inside its sandbox, a 0600 file of root's is refused it (EACCES), which the same call in
    the same sandbox as uid 0 (the control, as it ran before) opens. And its uploads still work: the keys and the
    CA come open from the agent."""
    import pwd
    user = pwd.getpwnam(harness.EGRESS_USER)
    assert user.pw_uid != 0 and user.pw_gid != 0, user
    secret = root_only_file()
    gw = store()
    target = Target(SVC)
    agent = Agent(policy=egress_policy(credentials=keys_file(gw.access_key, gw.secret_key)),
                  env={"DSAGENT_TEST_EGRESS_HELPER": HELPER, "DSAGENT_TEST_EGRESS_SYSCALL": f"open-read:{secret}"})
    pid = wait_for(lambda: egress_pid(agent), what="the egress process")
    wait_for(lambda: status_of(pid)["Seccomp"].strip() == "2", what="the egress process's seccomp filter")
    status = status_of(pid)
    assert status["Uid"].split() == [str(user.pw_uid)] * 4, status["Uid"]
    assert status["Gid"].split() == [str(user.pw_gid)] * 4, status["Gid"]
    assert status["Groups"].split() == [], status["Groups"]
    said = wait_for(lambda: (lambda text: text if f"dsagent-egress: opening {secret} to read:" in text else None)(
        open(agent.log_path).read()), what="the egress process's try at a file of root's")
    assert f"dsagent-egress: opening {secret} to read: Permission denied" in said, said
    # the control: as uid 0 (the egress process started by hand, as root), the same call in the same sandbox opens it
    rc, err = run_egress_alone({"DSAGENT_TEST_EGRESS_SYSCALL": f"open-read:{secret}"})
    assert rc == 0 and f"dsagent-egress: opening {secret} to read: opened" in err, (rc, err)
    # and it still uploads, its keys read from the fd the agent opened
    path = dump(agent, ALICE, target.pid)["path"]
    out = outcome_for(agent, path)
    assert out["DSAGENT_EGRESS_RESULT"] == "uploaded", out


@test
def keys_a_user_could_write_are_refused_though_the_agent_opens_them():
    """The agent now opens the keys for the egress process (whose user could not): the check of owner and mode is
    still made, on the fd it sent, so keys swapped after the policy loaded for a file a user owns, or one others
    may write, are refused and recorded, never used."""
    import pwd
    gw = store()
    target = Target(SVC)
    keys = keys_file(gw.access_key, gw.secret_key)
    agent = start_agent(egress_policy(credentials=keys))
    path = dump(agent, ALICE, target.pid)["path"]
    assert outcome_for(agent, path)["DSAGENT_EGRESS_RESULT"] == "uploaded"  # the keys work as they are
    mallory = pwd.getpwnam(MALLORY)
    for owner, mode in ((mallory.pw_uid, 0o600), (0, 0o622)):
        swapped = keys + ".new"
        fd = os.open(swapped, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f'access_key_id = "{gw.access_key}"\nsecret_access_key = "{gw.secret_key}"\n')
        os.chown(swapped, owner, 0)
        os.chmod(swapped, mode)
        os.rename(swapped, keys)
        path = dump(agent, ALICE, target.pid)["path"]
        out = outcome_for(agent, path)
        assert out["DSAGENT_EGRESS_RESULT"] == "credentials", (owner, oct(mode), out)
        assert f"{keys} is not a regular file of root's with mode 0600 or 0400" in out["DSAGENT_EGRESS_ERROR"], out


@test
def a_missing_egress_user_starts_no_egress_process_and_every_upload_fails_saying_so():
    """Without its user the egress process is not started at all (never as root instead): the agent says so at its
    start, naming the user, and each upload fails, recorded with that reason and labelled; --check-policy --egress
    fails naming it too."""
    missing = "dst-no-egress-user"
    target = Target(SVC)
    policy = egress_policy()
    agent = Agent(policy=policy, env={"DSAGENT_TEST_EGRESS_HELPER": HELPER, "DSAGENT_TEST_EGRESS_USER": missing})
    log = open(agent.log_path).read()
    assert f"the egress process's user {missing} does not exist; no egress process runs" in log, log
    assert egress_pid(agent) is None
    path = dump(agent, ALICE, target.pid)["path"]
    out = outcome_for(agent, path)
    assert out["DSAGENT_EGRESS_RESULT"] == "failed", out
    assert f"the egress process's user {missing} does not exist: it never runs as root" in out["DSAGENT_EGRESS_ERROR"], out
    assert os.path.exists(path) and label_of(path) == "failed:central:no-egress-user", label_of(path)
    assert egress_pid(agent) is None
    agent_dir = make_dir(None, 0o755)
    policy_path = os.path.join(agent_dir, "policy.toml")
    with open(policy_path, "w") as f:
        f.write(policy.replace("@DUMP_DIR@", os.path.join(agent_dir, "dumps")))
    # the check starts no process that could hang; 30 s bounds a hang
    r = subprocess.run([DSAGENT, "--check-policy", "--egress", "--policy", policy_path],
                       env=dict(os.environ, DSAGENT_TEST_EGRESS_HELPER=HELPER, DSAGENT_TEST_EGRESS_USER=missing),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    assert r.returncode == 1 and f"the egress process's user {missing} does not exist" in r.stderr, r


@test
def the_egress_process_is_not_dumpable_and_holds_nothing_a_user_can_read():
    agent = start_agent(egress_policy())
    pid = wait_for(lambda: egress_pid(agent), what="the egress process")
    # it has entered its sandbox before it serves: wait until its filter shows
    wait_for(lambda: status_of(pid)["Seccomp"].strip() == "2", what="the egress process's seccomp filter")
    status = status_of(pid)
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[cap], 16) == 0, (cap, status[cap])
    assert status["NoNewPrivs"].strip() == "1", status
    # a user reads nothing of it; nor does root without CAP_SYS_PTRACE (same uid, no capability over it: a
    # dumpable process's environ would be readable so, as the control below shows)
    for what in ("environ", "mem", "cmdline"):
        r = subprocess.run(as_user(MALLORY, ["cat", f"/proc/{pid}/{what}"]), capture_output=True)
        assert r.returncode != 0 and not r.stdout or what == "cmdline", (what, r)
    drop = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"]
    control = subprocess.Popen(drop + ["sleep", "300"])
    try:
        wait_for(lambda: status_of(control.pid)["Name"].strip() == "sleep", what="the control's exec")
        r = subprocess.run(drop + ["cat", f"/proc/{control.pid}/environ"], capture_output=True)
        assert r.returncode == 0 and b"PATH=" in r.stdout, r  # the control: a dumpable process of root's
    finally:
        control.kill()
        control.wait()
    r = subprocess.run(drop + ["cat", f"/proc/{pid}/environ"], capture_output=True)
    assert r.returncode != 0 and b"Permission denied" in r.stderr and not r.stdout, r


@test
def the_secret_is_in_no_record_no_dsctl_output_and_no_stderr():
    gw = store()
    target = Target(SVC)
    agent = start_agent(egress_policy())
    path = dump(agent, ALICE, target.pid)["path"]
    assert outcome_for(agent, path)["DSAGENT_EGRESS_RESULT"] == "uploaded"
    said = open(agent.log_path).read()  # the agent's stderr: its records, and the egress process's words
    for user, args in ((ALICE, ("ps",)), (ALICE, ("info", str(target.pid))), (ALICE, ("dumps",)),
                       (ALICE, ("--json", "dumps")), ("root", ("dumps",))):
        r = dsctl(agent, user, *args)
        assert r.returncode == 0, (args, r)
        said += r.stdout + r.stderr
    assert gw.secret_key not in said and gw.secret_key[:12] not in said, "the secret was said"


run_tests()
