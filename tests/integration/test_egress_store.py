#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The real S3 store the egress tests use (radosgw.sh, radosgw.py), and the facts of Debian 12's curl 7.88 SigV4
against it that the uploader's design rests on (docs/egress-plan.md): each case would fail if the fact changed.

One store serves every case of the file, started on first use; the last case starts a second one of its own to
prove that stopping leaves no daemon behind.
"""
import hashlib
import os
import subprocess
import urllib.error
import urllib.request

import harness
import radosgw
from harness import make_dir, run_tests, test

_store = None

# The sha256 of no bytes: what x-amz-content-sha256 says for a request without a body.
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def store():
    global _store
    if _store is None:
        _store = radosgw.start_for_file()
    return _store


def random_file(size):
    """A file of @size random bytes in a directory removed after the case; returns (path, sha256 hex)."""
    return radosgw.random_file(make_dir(), size)


def curl_sigv4(gw, method, path_and_query, headers=(), upload=None):
    """curl with its own SigV4 signing (--aws-sigv4), as Debian 12 ships it; returns (HTTP status, body)."""
    argv = ["curl", "-s", "-o", "-", "-w", "\n%{http_code}", "-X", method,
            "--aws-sigv4", f"aws:amz:{gw.region}:s3", "--user", f"{gw.access_key}:{gw.secret_key}"]
    for header in headers:
        argv += ["-H", header]
    if upload:
        argv += ["-T", upload]
    result = subprocess.run(argv + [gw.endpoint + path_and_query], capture_output=True, timeout=120)
    body, _, status = result.stdout.rpartition(b"\n")
    assert result.returncode == 0, result
    return int(status), body


@test
def store_round_trip_through_boto3():
    """A 20 MiB object written and read back through boto3 (the store's own client path) has the same sha256,
    and the bucket's listing names it with its size."""
    gw = store()
    path, digest = random_file(20 << 20)
    client = gw.client()
    client.upload_file(path, gw.bucket, "round-trip/artifact")
    assert gw.sha256_of("round-trip/artifact") == digest
    listed = client.list_objects_v2(Bucket=gw.bucket, Prefix="round-trip/")["Contents"]
    assert [(o["Key"], o["Size"]) for o in listed] == [("round-trip/artifact", 20 << 20)], listed


@test
def presigned_url_reads_and_tampering_is_refused():
    """boto3's presigned GET reads the object without credentials; the same URL with its signature altered
    gets 403 (so a presigned URL is worth exactly what its signature covers)."""
    gw = store()
    path, digest = random_file(1 << 20)
    gw.client().upload_file(path, gw.bucket, "presigned/artifact")
    url = gw.presigned_get("presigned/artifact", 300)
    with urllib.request.urlopen(url, timeout=60) as response:
        assert hashlib.sha256(response.read()).hexdigest() == digest
    signature = url.rsplit("X-Amz-Signature=", 1)[1][:64]
    altered = ("0" if signature[0] != "0" else "1") + signature[1:]
    tampered = url.replace(signature, altered)
    try:
        urllib.request.urlopen(tampered, timeout=60)
        raise AssertionError("a tampered presigned URL was served")
    except urllib.error.HTTPError as e:
        assert e.code == 403, e


@test
def curl_sigv4_needs_the_content_sha256_header():
    """curl 7.88 does not add x-amz-content-sha256, which S3's SigV4 requires: radosgw refuses the signature
    without it, and accepts the same request once the caller adds the header (curl then signs it)."""
    gw = store()
    status, body = curl_sigv4(gw, "GET", f"/{gw.bucket}?list-type=2")
    assert status == 403 and b"SignatureDoesNotMatch" in body, (status, body)
    status, body = curl_sigv4(gw, "GET", f"/{gw.bucket}?list-type=2", [f"x-amz-content-sha256: {EMPTY_SHA256}"])
    assert status == 200 and b"<ListBucketResult" in body, (status, body)


@test
def store_checks_the_signed_body_sha256():
    """A PUT whose signed x-amz-content-sha256 is the body's own is stored and reads back equal; the same body
    under another body's sha256 is refused (XAmzContentSHA256Mismatch) and nothing is stored: the store
    verifies what arrives against the hash the uploader computed, so a corrupted transfer cannot land."""
    gw = store()
    path, digest = random_file(3 << 20)
    status, body = curl_sigv4(gw, "PUT", f"/{gw.bucket}/signed/good", [f"x-amz-content-sha256: {digest}"], path)
    assert status == 200, (status, body)
    assert gw.sha256_of("signed/good") == digest
    status, body = curl_sigv4(gw, "PUT", f"/{gw.bucket}/signed/bad", [f"x-amz-content-sha256: {EMPTY_SHA256}"],
                              path)
    assert status == 400 and b"XAmzContentSHA256Mismatch" in body, (status, body)
    listed = gw.client().list_objects_v2(Bucket=gw.bucket, Prefix="signed/").get("Contents", [])
    assert [o["Key"] for o in listed] == ["signed/good"], listed


@test
def curl_sigv4_signs_a_bare_query_parameter_only_with_an_equals_sign():
    """Starting a multipart upload is POST ?uploads. curl 7.88 signs a parameter without a value differently
    from S3 (radosgw: SignatureDoesNotMatch); written ?uploads= it is signed as S3 expects and answered with an
    UploadId. The uploader writes every such parameter with its '='."""
    gw = store()
    headers = ["x-amz-content-sha256: UNSIGNED-PAYLOAD"]
    status, body = curl_sigv4(gw, "POST", f"/{gw.bucket}/multipart/bare?uploads", headers)
    assert status == 403 and b"SignatureDoesNotMatch" in body, (status, body)
    status, body = curl_sigv4(gw, "POST", f"/{gw.bucket}/multipart/bare?uploads=", headers)
    assert status == 200 and b"<UploadId>" in body, (status, body)


@test
def stopping_leaves_no_daemon():
    """A store of its own (objects in memory), started and stopped: its mon, osd and radosgw are gone after
    stop, and its port answers nothing."""
    gw = radosgw.Radosgw(store="memstore").start()
    print(f"# a memstore radosgw started in {gw.start_seconds:.1f} s", flush=True)
    harness.scope.callback(gw.stop)
    pids = gw.pids()
    assert sorted(pids) == ["mon", "osd", "rgw"], pids
    for pid in pids.values():
        assert os.path.exists(f"/proc/{pid}"), pids
    endpoint = gw.endpoint
    gw.stop()
    for pid in pids.values():
        assert not os.path.exists(f"/proc/{pid}"), (pid, pids)
    status = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", endpoint],
                            capture_output=True, text=True, timeout=60)
    assert status.returncode != 0 and status.stdout == "000", status


if __name__ == "__main__":
    run_tests()
