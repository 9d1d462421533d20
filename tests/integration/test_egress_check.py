#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""dsagent --check-policy --egress against a real radosgw: the egress process (libexec/dsagent-egress) asks each
[egress.NAME] store with its keys, which it alone reads, and each answer is said as what it is: reachable, refused
with S3's code, unreachable with curl's words. No key is ever in the output.

One store serves the whole file (radosgw.py), started on first use.
"""
import os
import subprocess

import egress_tools
import radosgw
from egress_tools import check_policy as check, keys_file
from harness import DSAGENT, make_dir, run_tests, test

store = radosgw.file_store


def egress_table(name, credentials, endpoint=None, bucket=None):
    return egress_tools.egress_table(store(), name, credentials, endpoint, bucket)


def closed_port():
    """A loopback port nothing listens on: one the kernel handed out, and closed again."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@test
def each_store_is_reachable_refused_or_unreachable():
    gw = store()
    keys = make_dir(None, 0o700)
    good = keys_file(keys, "good", gw.access_key, gw.secret_key)
    wrong_secret = keys_file(keys, "wrong-secret", gw.access_key, "not" + gw.secret_key[3:])
    unknown_key = keys_file(keys, "unknown-key", "NOSUCHKEY0123456789", gw.secret_key)
    port = closed_port()
    text = (egress_table("good", f"file:{good}") + egress_table("wrongsecret", f"file:{wrong_secret}") +
            egress_table("unknownkey", f"file:{unknown_key}") +
            egress_table("nobucket", f"file:{good}", bucket="no-such-bucket") +
            egress_table("down", f"file:{good}", endpoint=f"http://127.0.0.1:{port}"))
    path, r = check(text, None, "--egress")
    assert r.returncode == 1, r
    assert f"{path}: [egress.good] reachable: bucket {gw.bucket} at {gw.endpoint} took the keys" in r.stdout, r
    for expected in (f"{path}: [egress.wrongsecret] refused: bucket {gw.bucket} at {gw.endpoint}: HTTP 403 "
                     "SignatureDoesNotMatch\n",
                     f"{path}: [egress.unknownkey] refused: bucket {gw.bucket} at {gw.endpoint}: HTTP 403 "
                     "InvalidAccessKeyId\n",
                     f"{path}: [egress.nobucket] refused: bucket no-such-bucket at {gw.endpoint}: HTTP 404 "
                     "NoSuchBucket\n",
                     f"{path}: [egress.down] unreachable: bucket {gw.bucket} at http://127.0.0.1:{port}: Failed to "
                     f"connect to 127.0.0.1 port {port}"):
        assert expected in r.stderr, (expected, r.stderr)
    assert gw.secret_key not in r.stdout + r.stderr

    # the good store alone: 0; without --egress nothing is asked, and the keys are not even read
    _, r = check(egress_table("good", f"file:{good}"), None, "--egress")
    assert r.returncode == 0 and "[egress.good] reachable" in r.stdout, r
    _, r = check(text)
    assert r.returncode == 0 and "reachable" not in r.stdout + r.stderr, r


@test
def systemd_credentials_are_read_from_the_credentials_directory():
    gw = store()
    creds = make_dir(None, 0o500)
    keys_file(creds, "s3-central", gw.access_key, gw.secret_key, 0o400)
    path, r = check(egress_table("central", "systemd:s3-central"), {"CREDENTIALS_DIRECTORY": creds}, "--egress")
    assert r.returncode == 0 and f"{path}: [egress.central] reachable" in r.stdout, r


@test
def a_store_down_then_back_is_said_so_each_time():
    gw = store()
    keys = make_dir(None, 0o700)
    text = egress_table("central", f"file:{keys_file(keys, 'k', gw.access_key, gw.secret_key)}")
    gw.stop_rgw()
    try:
        _, r = check(text, None, "--egress")
        assert r.returncode == 1 and "[egress.central] unreachable" in r.stderr and "Couldn't connect" in r.stderr, r
    finally:
        gw.start_rgw()
    _, r = check(text, None, "--egress")
    assert r.returncode == 0 and "[egress.central] reachable" in r.stdout, r


@test
def keys_the_egress_process_cannot_use_are_refused_without_a_word_of_them():
    """The loader only looks at the file; the egress process reads it and refuses what is not the keys, naming
    where, never what: a file whose text is the secret itself (no TOML) is not echoed."""
    gw = store()
    keys = make_dir(None, 0o700)
    bare = os.path.join(keys, "bare")
    fd = os.open(bare, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"{gw.access_key}:{gw.secret_key}\n")
    extra = os.path.join(keys, "extra")
    fd = os.open(extra, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f'access_key_id = "{gw.access_key}"\nsecret_access_key = "{gw.secret_key}"\n'
                f'{gw.secret_key} = "x"\n')
    path, r = check(egress_table("bare", f"file:{bare}") + egress_table("extra", f"file:{extra}"), None, "--egress")
    assert r.returncode == 1, r
    assert f"{path}: [egress.bare] credentials: bucket {gw.bucket} at {gw.endpoint}: the credentials: not TOML at " \
           "line 1" in r.stderr, r
    assert f"{path}: [egress.extra] credentials:" in r.stderr and "an unknown key at line 3, column 1" in r.stderr, r
    assert gw.secret_key not in r.stdout + r.stderr and gw.access_key not in r.stdout + r.stderr, r.stderr


@test
def egress_goes_with_check_policy_only():
    r = subprocess.run([DSAGENT, "--egress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert r.returncode != 0 and "--egress goes with --check-policy" in r.stderr, r


if __name__ == "__main__":
    run_tests()
