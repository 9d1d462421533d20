#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The egress upload core (agent/egress/s3-upload.c, through tests/tools/s3-upload) against a real radosgw: one
PUT and multipart uploads read back through boto3 and a presigned URL with the file's sha256, memory that does
not grow with the file, and the store's refusals and absence each reported as what they are.

One store serves the whole file (radosgw.py), started on first use.
"""
import hashlib
import http.server
import json
import os
import queue
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import harness
import radosgw
from egress_tools import credentials_file
from harness import BUILD, HANG_BOUND, make_dir, run_tests, test
from radosgw import random_file

TOOL = os.path.join(BUILD, "tests", "tools", "s3-upload")
S3_E_REFUSED, S3_E_UNAVAILABLE, S3_E_GARBAGE, S3_E_MISMATCH = 1, 2, 3, 4
PART = 8 << 20

store = radosgw.file_store


def workdir():
    """A directory of root's, removed after the case (harness.make_dir)."""
    return make_dir()


def upload(gw, key, path, *extra, endpoint=None, bucket=None, secret_key=None, access_key=None):
    """Runs s3-upload; returns (exit status, its JSON report)."""
    creds = credentials_file(workdir(), access_key or gw.access_key, secret_key or gw.secret_key)
    argv = [TOOL, "--endpoint", endpoint or gw.endpoint, "--bucket", bucket or gw.bucket, "--region", gw.region,
            "--credentials", creds, *extra, key, path]
    # a sanitizer build's quarantine keeps freed memory (up to 256 MiB), which would count as the uploader's
    # peak, growing with its requests: kept small, what is measured is what the uploader holds
    asan = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"), "quarantine_size_mb=1"]))
    # an upload of at most a few hundred MiB to a store on loopback: seconds; the bound only ends a hang
    result = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=dict(os.environ, ASAN_OPTIONS=asan))
    assert result.stdout, result
    return result.returncode, json.loads(result.stdout)


def object_keys(gw, prefix):
    return [o["Key"] for o in gw.client().list_objects_v2(Bucket=gw.bucket, Prefix=prefix).get("Contents", [])]


@test
def single_put_reads_back_equal():
    """A file below the part size goes up in one PUT; boto3 reads back the same sha256, and the object carries
    the metadata given and the file's sha256 as dsagent-sha256."""
    gw = store()
    path, digest = random_file(workdir(), 3 << 20)
    status, report = upload(gw, "single/artifact", path, "--meta", "requester=dst-alice", "--meta", "rule=ops")
    assert status == 0 and report["result"] == 0, report
    assert report["parts"] == 0 and report["size"] == 3 << 20 and report["sha256"] == digest, report
    assert gw.sha256_of("single/artifact") == digest
    head = gw.client().head_object(Bucket=gw.bucket, Key="single/artifact")
    assert head["Metadata"] == {"requester": "dst-alice", "rule": "ops", "dsagent-sha256": digest}, head["Metadata"]


@test
def multipart_reads_back_equal_in_bounded_memory():
    """A 200 MiB file goes up in 25 parts of 8 MiB: boto3 and a presigned URL both read back its sha256, the
    store's ETag names 25 parts, no multipart upload is left open, and the uploader's peak RSS is within 4 MiB of
    its peak for a 1 MiB file (the file is read by pread, never held, not even a part of it)."""
    gw = store()
    small, _ = random_file(workdir(), 1 << 20)
    status, baseline = upload(gw, "multipart/baseline", small, "--part-size", str(PART))
    assert status == 0 and baseline["parts"] == 0, baseline
    size = 200 << 20
    path, digest = random_file(workdir(), size)
    status, report = upload(gw, "multipart/artifact", path, "--part-size", str(PART))
    assert status == 0 and report["result"] == 0, report
    assert report["parts"] == 25 and report["sha256"] == digest and report["etag"].endswith('-25"'), report
    print(f"# 200 MiB in 25 parts: {report['seconds']:.2f} s, {size / report['seconds'] / (1 << 20):.1f} MiB/s "
          f"(hashing included), peak RSS {report['max_rss_kib']} KiB, {baseline['max_rss_kib']} KiB for 1 MiB",
          flush=True)
    # against the same tool's peak for a 1 MiB file (libcurl, OpenSSL and the C library: about 10 MiB): a part
    # held in memory would add 8 MiB, the file 200; the uploader's own buffers (256 KiB to hash, 64 KiB of an
    # answer) and libcurl's add well under 4
    assert report["max_rss_kib"] - baseline["max_rss_kib"] < 4 << 10, (report, baseline)
    assert gw.sha256_of("multipart/artifact") == digest
    with urllib.request.urlopen(gw.presigned_get("multipart/artifact", 300), timeout=300) as response:
        presigned = hashlib.sha256()
        for piece in iter(lambda: response.read(1 << 20), b""):
            presigned.update(piece)
    assert presigned.hexdigest() == digest
    assert not gw.client().list_multipart_uploads(Bucket=gw.bucket).get("Uploads"), "an upload was left open"


def http_get(url):
    """(HTTP status, body) of a GET without credentials."""
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@test
def presigned_url_of_our_own_reads_back_and_nothing_else():
    """The agent's own presigner (s3-presign.c; libcurl cannot presign) makes a GET URL that the real store
    serves with the file's bytes; the same URL with one signature digit changed, for another key, or made an
    hour ago for 60 s, is refused 403. The URL holds the key id and never the secret."""
    gw = store()
    path, digest = random_file(workdir(), 2 << 20)
    status, report = upload(gw, "presign/artifact", path, "--presign", "300")
    assert status == 0 and report["result"] == 0, report
    url = report["url"]
    assert gw.secret_key not in url and f"X-Amz-Credential={gw.access_key}%2F" in url, url
    code, body = http_get(url)
    assert code == 200 and hashlib.sha256(body).hexdigest() == digest, code
    signature = url.rsplit("X-Amz-Signature=", 1)[1]
    altered = url[:-len(signature)] + ("0" if signature[0] != "0" else "1") + signature[1:]
    code, body = http_get(altered)
    assert code == 403 and b"SignatureDoesNotMatch" in body, (code, body)
    code, body = http_get(url.replace("/presign/artifact?", "/single/artifact?"))
    assert code == 403, (code, body)
    hour_ago = int(time.time()) - 3600
    status, report = upload(gw, "presign/expired", path, "--presign", "60", "--presign-time", str(hour_ago))
    assert status == 0, report
    code, body = http_get(report["url"])
    assert code == 403 and b"AccessDenied" in body, (code, body)


# Attempts for the cases where the store comes back: each failed connection is answered at once and followed
# by a backoff of 0.1-0.2 s, so 600 attempts last 60-120 s, far beyond radosgw's restart (1-5 s, loaded);
# the case goes on the moment the upload ends, and the bound only ends a store that never returns.
COMEBACK = ("--attempts", "600", "--backoff-usec", "200000")


def upload_in_background(gw, key, path, *extra):
    """s3-upload with --progress, running: its stderr gives a line per part and per retry, which a thread
    hands to next_progress() (None at its end)."""
    creds = credentials_file(workdir(), gw.access_key, gw.secret_key)
    proc = subprocess.Popen([TOOL, "--endpoint", gw.endpoint, "--bucket", gw.bucket, "--region", gw.region,
                             "--credentials", creds, "--progress", *extra, key, path],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    harness.scope.callback(lambda: proc.poll() is not None or (proc.kill(), proc.wait()))
    proc.progress = queue.Queue()

    def forward():
        for line in proc.stderr:
            proc.progress.put(line)
        proc.progress.put(None)

    threading.Thread(target=forward, daemon=True).start()
    return proc


def next_progress(proc, word):
    """The tool's next progress line that starts with @word (lines before it are skipped); fails if the tool
    ends first, or writes none within HANG_BOUND: each awaited line follows a step of the tool's that takes
    seconds at most (a part on loopback; a refused connection; the 2 s low-speed window and a backoff)."""
    while True:
        try:
            line = proc.progress.get(timeout=HANG_BOUND)
        except queue.Empty:
            raise AssertionError(f"no '{word}' line from s3-upload within {HANG_BOUND} s")
        assert line, f"s3-upload ended before a '{word}' line: {proc.stdout.read()}"
        if line.split(" ", 1)[0] == word:
            return line


def store_comes_back(gw):
    """radosgw started again after the case, should the case have failed while the store was down."""
    harness.scope.callback(lambda: gw.rgw_running() or gw.start_rgw())


@test
def store_down_before_the_upload_is_waited_for():
    """The store is down when the upload begins: the uploader retries, and once radosgw is back (started when
    the first retry was announced) the upload completes; boto3 reads back the file's sha256."""
    gw = store()
    store_comes_back(gw)
    path, digest = random_file(workdir(), 12 << 20)
    gw.stop_rgw()
    proc = upload_in_background(gw, "comeback/before", path, "--part-size", str(PART), *COMEBACK)
    next_progress(proc, "retry")
    gw.start_rgw()
    out, _ = proc.communicate(timeout=600)  # bounded by COMEBACK's attempts; see above
    report = json.loads(out)
    assert proc.returncode == 0 and report["result"] == 0, report
    assert report["retries"] >= 1 and report["parts"] == 2, report
    assert gw.sha256_of("comeback/before") == digest


@test
def store_down_in_the_middle_of_an_upload_is_waited_for():
    """The store stops after the first of five parts (the tool holds between parts until told to go on): the
    second part is tried again until radosgw is back, the same multipart upload then completes, and boto3 reads
    back the file's sha256; no upload is left open."""
    gw = store()
    store_comes_back(gw)
    path, digest = random_file(workdir(), 40 << 20)
    proc = upload_in_background(gw, "comeback/middle", path, "--part-size", str(PART), "--hold-after-part", "1",
                                *COMEBACK)
    next_progress(proc, "part")
    gw.stop_rgw()
    proc.stdin.write("go\n")
    proc.stdin.flush()
    next_progress(proc, "retry")
    gw.start_rgw()
    out, _ = proc.communicate(timeout=600)  # bounded by COMEBACK's attempts; see above
    report = json.loads(out)
    assert proc.returncode == 0 and report["result"] == 0, report
    assert report["retries"] >= 1 and report["parts"] == 5 and report["etag"].endswith('-5"'), report
    assert gw.sha256_of("comeback/middle") == digest
    assert not gw.client().list_multipart_uploads(Bucket=gw.bucket).get("Uploads"), "an upload was left open"


@test
def slow_store_is_cut_and_tried_again():
    """radosgw frozen (SIGSTOP) between two parts: the next part stalls, the uploader cuts it once less than
    1 KiB/s went for 2 s (its --low-speed, as `min_speed` will set it) and tries again; radosgw resumed when
    the retry is announced, the same upload completes and reads back equal."""
    gw = store()
    harness.scope.callback(gw.resume_rgw)
    path, digest = random_file(workdir(), 24 << 20)
    proc = upload_in_background(gw, "slow/artifact", path, "--part-size", str(PART), "--hold-after-part", "1",
                                "--low-speed", "1024/2", *COMEBACK)
    next_progress(proc, "part")
    gw.pause_rgw()
    proc.stdin.write("go\n")
    proc.stdin.flush()
    line = next_progress(proc, "retry")
    assert "too slow" in line, line
    gw.resume_rgw()
    out, _ = proc.communicate(timeout=600)  # bounded by COMEBACK's attempts; see above
    report = json.loads(out)
    assert proc.returncode == 0 and report["result"] == 0, report
    assert report["retries"] >= 1 and report["parts"] == 3, report
    assert gw.sha256_of("slow/artifact") == digest


class Misbehaving(http.server.BaseHTTPRequestHandler):
    """A store radosgw would never be: @answer (status, headers, body) to every request, its body read first."""

    answer = (200, {}, b"")
    requests = []

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        while length > 0:
            length -= len(self.rfile.read(min(length, 1 << 20)))
        type(self).requests.append((self.command, self.path))
        status, headers, body = self.answer
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_PUT = do_POST = do_GET = do_HEAD = do_DELETE = handle_any

    def log_message(self, *args):
        pass


def misbehaving_store(status, headers, body):
    """An HTTP server on 127.0.0.1 answering every request alike, stopped after the case; returns
    (endpoint, its handler class, whose .requests lists what came)."""
    handler = type("Answer", (Misbehaving,), {"answer": (status, headers, body), "requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    harness.scope.callback(server.server_close)
    harness.scope.callback(server.shutdown)
    return "http://127.0.0.1:%d" % server.server_address[1], handler


@test
def redirect_is_reported_never_followed():
    """A store that answers 307 to another host: the uploader reports the answer (S3_E_GARBAGE, HTTP 307) after
    that one request, and never asks the other host (a redirect would carry the signed request elsewhere)."""
    gw = store()
    other, other_handler = misbehaving_store(200, {}, b"")
    endpoint, handler = misbehaving_store(307, {"Location": other + "/elsewhere"}, b"")
    path, _ = random_file(workdir(), 1 << 20)
    status, report = upload(gw, "redirect/artifact", path, endpoint=endpoint)
    assert status == 1 and report["result"] == S3_E_GARBAGE, report
    assert report["http_status"] == 307 and report["requests"] == 1, report
    assert len(handler.requests) == 1 and other_handler.requests == [], (handler.requests, other_handler.requests)


@test
def garbage_answers_are_not_taken_for_an_upload():
    """A server that answers 200 and non-S3 bytes to everything: a single PUT is not confirmed (the HEAD shows no
    dsagent-sha256: S3_E_MISMATCH), and a multipart upload stops at its start (no UploadId: S3_E_GARBAGE)."""
    gw = store()
    endpoint, handler = misbehaving_store(200, {}, b"<html>hello</html>")
    path, _ = random_file(workdir(), 1 << 20)
    status, report = upload(gw, "garbage/single", path, endpoint=endpoint)
    assert status == 1 and report["result"] == S3_E_MISMATCH, report
    assert [method for method, _ in handler.requests] == ["PUT", "HEAD"], handler.requests
    handler.requests.clear()
    path, _ = random_file(workdir(), 12 << 20)
    status, report = upload(gw, "garbage/multipart", path, "--part-size", str(PART), endpoint=endpoint)
    assert status == 1 and report["result"] == S3_E_GARBAGE and "UploadId" in report["message"], report
    assert [method for method, _ in handler.requests] == ["POST"], handler.requests


@test
def wrong_keys_are_refused_at_once():
    """An unknown access key and a wrong secret are each refused by the store with its own code, after one
    request: no retry (another attempt would not change the answer), nothing stored."""
    gw = store()
    path, _ = random_file(workdir(), 1 << 20)
    status, report = upload(gw, "refused/unknown-key", path, access_key="DSAGENTNOSUCHKEY0000")
    assert status == 1 and report["result"] == S3_E_REFUSED, report
    assert report["http_status"] == 403 and report["s3_code"] == "InvalidAccessKeyId", report
    assert report["requests"] == 1 and report["retries"] == 0, report
    status, report = upload(gw, "refused/wrong-secret", path, secret_key="0" * 40)
    assert status == 1 and report["result"] == S3_E_REFUSED, report
    assert report["http_status"] == 403 and report["s3_code"] == "SignatureDoesNotMatch", report
    assert report["requests"] == 1, report
    assert object_keys(gw, "refused/") == []


@test
def store_unreachable_is_tried_again_then_reported():
    """A store that refuses connections (a port bound by the test and not listening) is tried as often as asked,
    with backoff, and then reported unavailable, curl's words kept."""
    gw = store()
    path, _ = random_file(workdir(), 1 << 20)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    harness.scope.callback(closed.close)
    endpoint = "http://127.0.0.1:%d" % closed.getsockname()[1]
    status, report = upload(gw, "unreachable/artifact", path, "--attempts", "3", "--backoff-usec", "100000",
                            endpoint=endpoint)
    assert status == 1 and report["result"] == S3_E_UNAVAILABLE, report
    assert report["requests"] == 3 and report["retries"] == 2 and report["http_status"] == 0, report
    assert "connect" in report["message"].lower(), report


@test
def missing_bucket_refuses_a_multipart_upload_before_any_part():
    """A bucket that does not exist: the multipart start is refused (NoSuchBucket) and no part is sent."""
    gw = store()
    path, _ = random_file(workdir(), 12 << 20)
    status, report = upload(gw, "missing/artifact", path, "--part-size", str(PART), bucket="dsagent-no-such-bucket")
    assert status == 1 and report["result"] == S3_E_REFUSED, report
    assert report["s3_code"] == "NoSuchBucket" and report["parts"] == 2 and report["requests"] == 1, report



@test
def bucket_quota_refuses_a_part_and_the_upload_is_aborted():
    """A bucket with a quota of 10 MiB takes the first 8 MiB part of a 24 MiB file and refuses the second
    (QuotaExceeded): the uploader reports it refused without retrying and aborts the multipart upload, so no
    upload and no object is left in the bucket."""
    gw = store()
    gw.make_bucket("dsagent-quota", max_size=10 << 20)
    path, _ = random_file(workdir(), 24 << 20)
    status, report = upload(gw, "quota/artifact", path, "--part-size", str(PART), bucket="dsagent-quota")
    assert status == 1 and report["result"] == S3_E_REFUSED, report
    assert report["http_status"] == 403 and report["s3_code"] == "QuotaExceeded", report
    assert report["retries"] == 0, report
    client = gw.client()
    assert not client.list_multipart_uploads(Bucket="dsagent-quota").get("Uploads"), "the upload was not aborted"
    assert not client.list_objects_v2(Bucket="dsagent-quota").get("Contents")


if __name__ == "__main__":
    run_tests()
