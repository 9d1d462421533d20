#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Virtual-host addressing and TLS of the egress core (agent/egress/s3-upload.c through tests/tools/s3-upload, and
dsagent --check-policy --egress) against a real radosgw that takes BUCKET.s3.test as its bucket's host
(`rgw dns name`) and serves HTTPS with a certificate of a test CA (radosgw.py's dns_name and tls).

Names: the file runs in a mount namespace of its own, /etc/hosts there a file of its own that resolves the
bucket's host, dsagent-test.s3.test, to 127.0.0.1, and not s3.test itself: an upload that reached the store by
that name went to bucket.host, the virtual-host address, as libc's resolver (the one the egress process uses)
found it. No resolution is pinned inside the uploader: the name goes through getaddrinfo() as in production.

Trust: a store's certificate is taken only from a CA of ca_file, or of the system's store without one; a case
that needs a system's store holding the test CA gets /etc/ssl/certs of its own, in a nested mount namespace.
"""
import os
import shutil
import subprocess
import sys

NAME = "s3.test"
BUCKET_HOST = "dsagent-test." + NAME  # radosgw.py's default bucket, under the name
DOTTED_BUCKET = "dotted.bucket"        # a bucket whose host *.s3.test does not cover (one label only)
NAMESPACE_MARK = "DSAGENT_TEST_EGRESS_TLS_NAMESPACE"


def enter_namespace_with_hosts():
    """Re-runs this file in a private mount namespace (unshare execs: the pid stays, so a runner's timeout
    still reaches it), then binds a hosts file of its own over /etc/hosts there. The bound file is unlinked
    at once: the mount holds it, and nothing is left behind."""
    if os.geteuid() != 0:
        return  # run_tests() says why it skips
    if os.environ.get(NAMESPACE_MARK) != "1":
        os.environ[NAMESPACE_MARK] = "1"
        os.execvp("unshare", ["unshare", "--mount", "--propagation", "private", "--", sys.executable,
                              os.path.abspath(__file__), *sys.argv[1:]])
    import tempfile
    fd, hosts = tempfile.mkstemp(prefix="dsagent-it-hosts-")
    with os.fdopen(fd, "w") as f:
        f.write(f"127.0.0.1 localhost\n127.0.0.1 {BUCKET_HOST}\n127.0.0.1 {DOTTED_BUCKET}.{NAME}\n")
    os.chmod(hosts, 0o644)
    subprocess.run(["mount", "--bind", hosts, "/etc/hosts"], check=True)
    os.unlink(hosts)


enter_namespace_with_hosts()

import hashlib  # noqa: E402
import json  # noqa: E402
import socket  # noqa: E402
import ssl  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402

import radosgw  # noqa: E402
from egress_tools import check_policy, credentials_file, egress_table, keys_file  # noqa: E402
from harness import BUILD, MALLORY, make_dir, run_tests, test  # noqa: E402
from radosgw import random_file  # noqa: E402

TOOL = os.path.join(BUILD, "tests", "tools", "s3-upload")
S3_E_UNTRUSTED = 6
PART = 5 << 20

_store = None


def store():
    """The file's one store, with the name and TLS, started on first use."""
    global _store
    if _store is None:
        _store = radosgw.start_for_file(dns_name=NAME, tls=True)
    return _store


def port_of(endpoint):
    return int(endpoint.rsplit(":", 1)[1])


def named(gw, scheme):
    """The store's endpoint by its name: http://s3.test:PORT or https://s3.test:TLSPORT."""
    return f"{scheme}://{NAME}:{port_of(gw.endpoint if scheme == 'http' else gw.https_endpoint)}"


def upload(gw, endpoint, key, path, *extra, prefix=(), bucket=None):
    """Runs s3-upload (after @prefix, a command it runs under); returns (exit status, its JSON report)."""
    creds = credentials_file(make_dir(), gw.access_key, gw.secret_key)
    argv = [*prefix, TOOL, "--endpoint", endpoint, "--bucket", bucket or gw.bucket, "--region", gw.region,
            "--credentials", creds, *extra, key, path]
    # a few MiB to a store on loopback: under a second; the bound only ends a hang
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert result.stdout, result
    return result.returncode, json.loads(result.stdout)


def fetch_sha256(url, cafile=None):
    """GET @url (a presigned one) as any HTTP client would, trusting @cafile for https: (status, sha256)."""
    context = ssl.create_default_context(cafile=cafile) if url.startswith("https:") else None
    digest = hashlib.sha256()
    try:
        # loopback, a few MiB: the bound only ends a hang
        with urllib.request.urlopen(url, timeout=60, context=context) as response:
            for piece in iter(lambda: response.read(1 << 20), b""):
                digest.update(piece)
            return response.status, digest.hexdigest()
    except urllib.error.HTTPError as e:
        return e.code, None


def stored(gw, key):
    import botocore.exceptions
    try:
        gw.client().head_object(Bucket=gw.bucket, Key=key)
        return True
    except botocore.exceptions.ClientError as e:
        assert e.response["Error"]["Code"] in ("404", "NoSuchKey"), e
        return False


def system_store_holding(ca_file):
    """A prefix for upload(): the command runs in a mount namespace of its own whose system store
    (/etc/ssl/certs: Debian's bundle file and OpenSSL's hashed directory, both of which libcurl reads) holds
    @ca_file's CA alone."""
    certs = make_dir(None, 0o755)
    with open(ca_file) as src, open(os.path.join(certs, "ca-certificates.crt"), "w") as dst:
        dst.write(src.read())
    with open(ca_file) as src, open(os.path.join(certs, "test-ca.pem"), "w") as dst:
        dst.write(src.read())
    subprocess.run(["openssl", "rehash", certs], check=True, capture_output=True)
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
            'mount --bind "$0" /etc/ssl/certs && exec "$@"', certs]


@test
def virtual_host_upload_reads_back_through_boto3_and_its_presigned_url():
    """path_style = false: the object goes to http://BUCKET.s3.test:PORT/KEY, whose name alone resolves here (so a
    path-style request to s3.test could not even connect); three parts, read back by boto3 with virtual
    addressing and through our presigned URL, which names and signs the bucket's host."""
    gw = store()
    try:
        socket.getaddrinfo(NAME, 80)
        raise AssertionError(f"{NAME} resolves: the case could not tell the bucket's host from the endpoint's")
    except socket.gaierror:
        pass
    path, digest = random_file(make_dir(), 3 * PART - 1234)
    status, report = upload(gw, named(gw, "http"), "virtual/artifact", path, "--virtual-host",
                            "--part-size", str(PART), "--presign", "300")
    assert status == 0 and report["result"] == 0 and report["parts"] == 3, report
    assert report["sha256"] == digest, report
    boto = gw.client(endpoint=named(gw, "http"), virtual=True)
    assert gw.sha256_of("virtual/artifact", boto) == digest
    assert gw.sha256_of("virtual/artifact") == digest  # the same object, path style on 127.0.0.1
    assert report["url"].startswith(f"http://{BUCKET_HOST}:{port_of(gw.endpoint)}/virtual/artifact?"), report["url"]
    fetched = fetch_sha256(report["url"])
    assert fetched == (200, digest), (fetched, report["url"])


@test
def https_with_the_stores_ca_uploads_and_its_presigned_url_is_served():
    """ca_file names the store's CA: the upload goes over https (multipart), boto3 reads it back over https
    trusting that CA, and the presigned https URL is served."""
    gw = store()
    path, digest = random_file(make_dir(), 2 * PART + 77)
    status, report = upload(gw, gw.https_endpoint, "tls/artifact", path, "--ca-file", gw.ca_file,
                            "--part-size", str(PART), "--presign", "300")
    assert status == 0 and report["result"] == 0 and report["parts"] == 3 and report["sha256"] == digest, report
    assert gw.sha256_of("tls/artifact", gw.client(endpoint=gw.https_endpoint, verify=gw.ca_file)) == digest
    assert report["url"].startswith(gw.https_endpoint + "/" + gw.bucket + "/tls/artifact?"), report["url"]
    fetched = fetch_sha256(report["url"], gw.ca_file)
    assert fetched == (200, digest), (fetched, report["url"])


@test
def https_and_virtual_host_together():
    """https://BUCKET.s3.test:TLSPORT: the certificate's *.s3.test covers the bucket's host; boto3 (virtual,
    https) and the presigned URL read it back."""
    gw = store()
    path, digest = random_file(make_dir(), 1 << 20)
    status, report = upload(gw, named(gw, "https"), "both/artifact", path, "--virtual-host", "--ca-file",
                            gw.ca_file, "--presign", "300")
    assert status == 0 and report["result"] == 0, report
    assert report["url"].startswith(f"https://{BUCKET_HOST}:{port_of(gw.https_endpoint)}/both/artifact?"), report
    assert gw.sha256_of("both/artifact", gw.client(endpoint=named(gw, "https"), virtual=True,
                                                   verify=gw.ca_file)) == digest
    fetched = fetch_sha256(report["url"], gw.ca_file)
    assert fetched == (200, digest), (fetched, report["url"])


@test
def a_certificate_not_trusted_is_refused_at_once_and_said_so():
    """Without ca_file (the system's store, which lacks the test CA) and with another CA's file, the first request's
    handshake fails: S3_E_UNTRUSTED with curl's words about the certificate, one request whatever the attempts
    allowed (another would meet the same certificate), nothing stored."""
    gw = store()
    path, _ = random_file(make_dir(), 1 << 20)
    other_ca = radosgw.make_ca(make_dir())
    for key, extra in (("untrusted/system", ()), ("untrusted/other-ca", ("--ca-file", other_ca))):
        status, report = upload(gw, gw.https_endpoint, key, path, "--attempts", "5", "--backoff-usec", "1000",
                                *extra)
        assert status == 1 and report["result"] == S3_E_UNTRUSTED, (key, report)
        assert report["requests"] == 1 and report["retries"] == 0 and report["http_status"] == 0, (key, report)
        assert "certificate" in report["message"], (key, report)
        assert not stored(gw, key), key


@test
def a_certificate_for_another_name_is_refused():
    """The store's own CA, but the endpoint named localhost, a name the certificate is not for (127.0.0.1,
    s3.test, *.s3.test): refused, the name said."""
    gw = store()
    path, _ = random_file(make_dir(), 1 << 20)
    status, report = upload(gw, f"https://localhost:{port_of(gw.https_endpoint)}", "wrong-name/artifact", path,
                            "--ca-file", gw.ca_file, "--attempts", "5", "--backoff-usec", "1000")
    assert status == 1 and report["result"] == S3_E_UNTRUSTED and report["requests"] == 1, report
    assert "localhost" in report["message"], report
    assert not stored(gw, "wrong-name/artifact")


@test
def ca_file_replaces_the_systems_store():
    """A system's store that holds the store's CA: without ca_file the upload is trusted (the default is the
    system's store); with ca_file naming another CA it is refused: ca_file is the only CA trusted then, not one
    more beside the system's (Debian's libcurl also reads /etc/ssl/certs as a directory by default)."""
    gw = store()
    path, digest = random_file(make_dir(), 1 << 20)
    system = system_store_holding(gw.ca_file)
    status, report = upload(gw, gw.https_endpoint, "system/artifact", path, prefix=system)
    assert status == 0 and report["result"] == 0 and report["sha256"] == digest, report
    other_ca = radosgw.make_ca(make_dir())
    status, report = upload(gw, gw.https_endpoint, "system/other-ca", path, "--ca-file", other_ca, prefix=system)
    assert status == 1 and report["result"] == S3_E_UNTRUSTED and "certificate" in report["message"], report
    assert not stored(gw, "system/other-ca")


@test
def a_ca_that_is_no_certificate_is_refused_at_once():
    """The core takes its CA from memory (the egress process's user cannot open a CA file of root's: the agent
    sends it open): a bundle with no certificate in it is refused before any request is tried again."""
    gw = store()
    path, _ = random_file(make_dir(), 1 << 20)
    garbage = os.path.join(make_dir(), "not-a-ca.pem")
    with open(garbage, "w") as f:
        f.write("no certificate here\n")
    status, report = upload(gw, gw.https_endpoint, "no-ca/artifact", path, "--ca-file", garbage,
                            "--attempts", "5", "--backoff-usec", "1000")
    assert status == 1 and report["result"] == S3_E_UNTRUSTED and report["requests"] == 1, report
    assert not stored(gw, "no-ca/artifact")


@test
def a_dotted_bucket_under_virtual_host_tls_is_refused_with_the_name_said():
    """A bucket named with a dot, addressed as BUCKET.s3.test over https: the certificate's *.s3.test covers one
    label, not dotted.bucket.s3.test, so the handshake is refused (as with AWS's own wildcard), the name said
    for the operator, who may use path_style = true; the same bucket path-style (on 127.0.0.1) goes up."""
    gw = store()
    gw.client().create_bucket(Bucket=DOTTED_BUCKET)
    path, digest = random_file(make_dir(), 1 << 20)
    status, report = upload(gw, named(gw, "https"), "dotted/artifact", path, "--virtual-host", "--ca-file",
                            gw.ca_file, "--attempts", "5", "--backoff-usec", "1000", bucket=DOTTED_BUCKET)
    assert status == 1 and report["result"] == S3_E_UNTRUSTED and report["requests"] == 1, report
    assert f"{DOTTED_BUCKET}.{NAME}" in report["message"], report
    status, report = upload(gw, gw.https_endpoint, "dotted/artifact", path, "--ca-file", gw.ca_file,
                            bucket=DOTTED_BUCKET)
    assert status == 0 and report["result"] == 0 and report["sha256"] == digest, report


@test
def check_policy_egress_takes_ca_file_and_virtual_host_addressing():
    """The policy's ca_file and path_style = false, through dsagent --check-policy --egress to the egress process:
    the store's CA over https (path style on 127.0.0.1, and virtual on s3.test) is reachable; another CA's file
    and the system's store are said to be untrusted, with curl's words; no key in the output. A CA file that is
    not there is refused when the policy loads, as keys that are not there are, before any store is asked."""
    gw = store()
    keys = "file:" + keys_file(make_dir(None, 0o700), "keys", gw.access_key, gw.secret_key)
    other_ca = radosgw.make_ca(make_dir(None, 0o755))
    # the store's CA in a file root alone may read: the agent opens it for the egress process, whose user could not
    root_only_ca = os.path.join(make_dir(None, 0o700), "ca.pem")
    shutil.copy(gw.ca_file, root_only_ca)
    os.chmod(root_only_ca, 0o600)
    missing_ca = os.path.join(make_dir(None, 0o755), "no-such-ca.pem")
    missing = egress_table(gw, "missingca", keys, gw.https_endpoint, extra=f'ca_file = "{missing_ca}"\n')
    policy, r = check_policy(missing, None, "--egress")
    expected = f"[egress.missingca]: refusing the CA file {missing_ca}: it cannot be found: No such file or directory"
    assert r.returncode == 1 and expected in r.stderr and not r.stdout, (expected, r)
    text = (egress_table(gw, "tls", keys, gw.https_endpoint, extra=f'ca_file = "{root_only_ca}"\n') +
            egress_table(gw, "virtual", keys, named(gw, "https"),
                         extra=f'ca_file = "{gw.ca_file}"\npath_style = false\n') +
            egress_table(gw, "otherca", keys, gw.https_endpoint, extra=f'ca_file = "{other_ca}"\n') +
            egress_table(gw, "system", keys, gw.https_endpoint))
    policy, r = check_policy(text, None, "--egress")
    assert r.returncode == 1, r
    assert f"{policy}: [egress.tls] reachable: bucket {gw.bucket} at {gw.https_endpoint}" in r.stdout, r
    assert f"{policy}: [egress.virtual] reachable: bucket {gw.bucket} at {named(gw, 'https')}" in r.stdout, r
    for name in ("otherca", "system"):
        expected = (f"{policy}: [egress.{name}] untrusted: bucket {gw.bucket} at {gw.https_endpoint}: SSL "
                    "certificate problem: unable to get local issuer certificate\n")
        assert expected in r.stderr, (expected, r.stderr)
    assert gw.secret_key not in r.stdout + r.stderr


@test
def a_ca_file_another_user_could_write_is_not_trusted():
    """ca_file says whom the store's connection trusts: a file dst-mallory owns, one anyone may write, or root's in
    a directory she may write (she could put another file of root's in its place) would let her choose the trust
    anchor and read every upload on the way. Each holds the store's true CA, so that a connection made through it
    would be the proof that her file was taken; each is refused when the policy loads, with why, before any
    connection. The same CA in a file of root's, 0644, in root's directory, is the control."""
    import pwd
    gw = store()
    keys = "file:" + keys_file(make_dir(None, 0o700), "keys", gw.access_key, gw.secret_key)
    d = make_dir(None, 0o755)
    hers = make_dir(None, 0o755)
    os.chown(hers, pwd.getpwnam(MALLORY).pw_uid, -1)
    mallorys, anyones, roots, in_hers = (os.path.join(d, "mallory.pem"), os.path.join(d, "anyone.pem"),
                                         os.path.join(d, "root.pem"), os.path.join(hers, "root.pem"))
    for path, mode in ((mallorys, 0o644), (anyones, 0o666), (roots, 0o644), (in_hers, 0o644)):
        shutil.copy(gw.ca_file, path)
        os.chmod(path, mode)
    os.chown(mallorys, pwd.getpwnam(MALLORY).pw_uid, -1)
    tables = {"mallorys": mallorys, "anyones": anyones, "in_hers": in_hers}
    text = egress_table(gw, "roots", keys, gw.https_endpoint, extra=f'ca_file = "{roots}"\n')
    policy, r = check_policy(text, None, "--egress")
    assert f"{policy}: [egress.roots] reachable: bucket {gw.bucket} at {gw.https_endpoint}" in r.stdout, r
    assert r.returncode == 0, r
    text += "".join(egress_table(gw, name, keys, gw.https_endpoint, extra=f'ca_file = "{path}"\n')
                    for name, path in tables.items())
    policy, r = check_policy(text, None, "--egress")
    assert r.returncode != 0 and "reachable" not in r.stdout, ("a CA file another user may write was used", r)
    for name, why in (("mallorys", "it is not owned by root"), ("anyones", "its mode is 0666; no one but root may "
                                                                          "write it"),
                      ("in_hers", "its directory, or one on the way to it, may be written by others than root")):
        expected = f"[egress.{name}]: refusing the CA file {tables[name]}: {why}"
        assert expected in r.stderr, (expected, r.stderr)


if __name__ == "__main__":
    run_tests()
