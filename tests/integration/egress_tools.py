# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the egress test files share (test_egress_upload.py, test_egress_check.py, test_egress_tls.py,
test_egress_daemon.py, test_egress_sessions.py): the keys files of s3-upload and of a policy's [egress.NAME],
such a table, dsagent --check-policy on a policy text, a file's sha256 and an upload's outcome record."""
import hashlib
import os
import subprocess

from harness import BUILD, DSAGENT, make_dir, wait_for

HELPER = os.path.join(BUILD, "agent", "egress", "dsagent-egress")
EGRESS_MESSAGE_ID = "69c19926015d41838f93007ed7cc398e"
DUMP_MESSAGE_ID = "b44be14ffedf48ee806826f1d59bcc4e"


def secret_file(directory, name, text, mode=0o600):
    """@text in a new file @directory/@name, made with @mode (never wider first); returns its path."""
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def credentials_file(directory, access_key, secret_key):
    """s3-upload's --credentials: ACCESS_KEY:SECRET_KEY, as curl --user takes them."""
    return secret_file(directory, "credentials", f"{access_key}:{secret_key}\n")


def keys_file(directory, name, access_key, secret_key, mode=0o600):
    """The keys file a policy's credentials = "file:PATH" names (TOML, read by the egress process alone)."""
    return secret_file(directory, name, f'access_key_id = "{access_key}"\nsecret_access_key = "{secret_key}"\n',
                       mode)


def egress_table(gw, name, credentials, endpoint=None, bucket=None, extra=""):
    """An [egress.NAME] table for the store @gw (its plain endpoint and bucket unless told), @extra lines added."""
    return (f'[egress.{name}]\nendpoint = "{endpoint or gw.endpoint}"\nbucket = "{bucket or gw.bucket}"\n'
            f'region = "{gw.region}"\ncredentials = "{credentials}"\n{extra}')


def check_policy(policy_text, env_extra=None, *extra):
    """dsagent --check-policy [@extra...] on @policy_text in a file of its own, the build's egress process as
    its helper: (the policy's path, the CompletedProcess)."""
    d = make_dir(None, 0o755)
    path = os.path.join(d, "policy.toml")
    with open(path, "w") as f:
        f.write(policy_text)
    env = dict(os.environ, DSAGENT_TEST_EGRESS_HELPER=HELPER)
    env.pop("CREDENTIALS_DIRECTORY", None)
    env.update(env_extra or {})
    r = subprocess.run([DSAGENT, "--check-policy", *extra, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=env)
    return path, r


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for piece in iter(lambda: f.read(1 << 20), b""):
            digest.update(piece)
    return digest.hexdigest()


def outcome_for(agent, path, timeout=120):
    """The egress outcome record of @path, once it is written. @timeout: the upload's own bound (a small file on
    loopback takes well under a second; 120 s covers a loaded machine and the store's retries)."""
    def find():
        for r in agent.records(message_id=EGRESS_MESSAGE_ID):
            if r.get("DSAGENT_DUMP_PATH") == path and r.get("DSAGENT_EGRESS_EVENT") == "outcome":
                return r
        return None
    return wait_for(find, timeout=timeout, what=f"the egress outcome of {path}")
