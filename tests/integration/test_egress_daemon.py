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
import subprocess
import time

import radosgw
from harness import (ALICE, BUILD, DUMP_BOUND, MALLORY, SVC, Agent, Target, as_user, dsctl, make_dir, run_tests,
                     test, uid_of, wait_for)

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


def egress_policy(credentials=None, endpoint=None, extra="", rule_extra="", tables=""):
    gw = store()
    credentials = credentials or keys_file(gw.access_key, gw.secret_key)
    return f"""[agent]
dump_dir = "@DUMP_DIR@"

[egress.central]
endpoint = "{endpoint or gw.endpoint}"
bucket = "{gw.bucket}"
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
    children = open(f"/proc/{agent.proc.pid}/task/{agent.proc.pid}/children").read().split()
    found = [int(c) for c in children if open(f"/proc/{c}/comm").read().strip() == "dsagent-egress"]
    return found[0] if found else None


def outcome_for(agent, path, timeout=120):
    """The egress outcome record of @path, once it is written. @timeout: the upload's own bound (a small file on
    loopback takes well under a second; 120 s covers a loaded machine and the store's retries)."""
    def find():
        for r in agent.records(message_id=EGRESS_MESSAGE_ID):
            if r.get("DSAGENT_DUMP_PATH") == path and r.get("DSAGENT_EGRESS_EVENT") == "outcome":
                return r
        return None
    return wait_for(find, timeout=timeout, what=f"the egress outcome of {path}")


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


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for piece in iter(lambda: f.read(1 << 20), b""):
            digest.update(piece)
    return digest.hexdigest()


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
    assert label_of(path) == f"uploaded:{key}", label_of(path)
    head = gw.client().head_object(Bucket=gw.bucket, Key=key)
    meta = head["Metadata"]
    assert meta["dsagent-sha256"] == local and meta["requester-uid"] == str(uid_of(ALICE)), meta
    assert meta["rule"] == "ops-dumps" and meta["pid"] == str(target.pid) and meta["type"] == "dump", meta
    # the queued record came before the outcome
    records = [r for r in agent.records(message_id=EGRESS_MESSAGE_ID) if r.get("DSAGENT_DUMP_PATH") == path]
    assert [r["DSAGENT_EGRESS_EVENT"] for r in records] == ["queued", "outcome"], records
    assert gw.secret_key not in open(agent.log_path).read()


run_tests()
