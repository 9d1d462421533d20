#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The agent's uploads under bad conditions and at full size, against a real radosgw (issue 41's "done when"):

- a 1 GiB full dump of the real test app, taken with `dsctl dump --type full` under a rule with `egress =`, goes
  up in 64 parts of 16 MiB and reads back whole through boto3 and through `dsctl dumps --url`'s presigned URL,
  the upload's process staying small (its VmHWM);
- the store stopped between two parts of an upload the agent asked for, and started again: a confirmed upload
  after retries; kept down past the attempts: a recorded failure, the local copy kept and labelled;
- a full bucket quota (QuotaExceeded, the multipart upload aborted), a store whose certificate the policy's ca_file
  does not vouch for (untrusted, not tried again), a redirect to another host and a store that answers garbage:
  each a record of its own, the local copy kept, and the agent answering others meanwhile.

The egress process's test hook (egress-main.c, test builds) says on stderr, which is the agent's log, each part the
store took ("dsagent-egress: test: part N") and each retry ("... retry N: WHY"), and stops the upload after part N
while DSAGENT_TEST_PAUSE names "egress-after-part-N" (harness.Pause): the test acts on the store between two parts.

One store serves the whole file (radosgw.py, bluestore: a GiB on disk, not in RAM, with an https endpoint of a test
CA beside its http one), started on first use.
"""
import hashlib
import http.server
import json
import os
import socket
import threading
import urllib.request

import harness
import radosgw
from harness import (ALICE, BUILD, DUMP_BOUND, SVC, Agent, Pause, Target, dsctl, make_dir, run_tests, test,
                     wait_for)

HELPER = os.path.join(BUILD, "agent", "egress", "dsagent-egress")
EGRESS_MESSAGE_ID = "69c19926015d41838f93007ed7cc398e"
MIB = 1 << 20

_store = None


def store():
    """The file's one store, http and https (radosgw.py's tls), started on first use."""
    global _store
    if _store is None:
        _store = radosgw.start_for_file(tls=True)
    return _store


def credentials(gw):
    """A keys file as the policy wants it: root's, 0600, in a directory of root's."""
    path = os.path.join(make_dir(None, 0o700), "keys")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f'access_key_id = "{gw.access_key}"\nsecret_access_key = "{gw.secret_key}"\n')
    return path


def policy(endpoint=None, bucket=None, store_lines=""):
    """Alice may take full dumps of the service user's processes under a rule whose dumps go to store
    "central" (the file's radosgw, or @endpoint / @bucket instead), with @store_lines added to the store."""
    gw = store()
    return f"""[agent]
dump_dir = "@DUMP_DIR@"

[egress.central]
endpoint = "{endpoint or gw.endpoint}"
bucket = "{bucket or gw.bucket}"
region = "{gw.region}"
prefix = "faults/"
credentials = "file:{credentials(gw)}"
{store_lines}
[[rule]]
name = "ops-full-dumps"
users = ["{ALICE}"]
commands = ["dump", "info"]
targets.users = ["{SVC}"]
dump_types = ["full"]
egress = "central"
"""


def start_agent(text, pause=None):
    env = {"DSAGENT_TEST_EGRESS_HELPER": HELPER}
    env.update(pause.env if pause else {})
    return Agent(policy=text, env=env)


def full_dump(agent, pid):
    r = dsctl(agent, ALICE, "--json", "dump", str(pid), "--type", "full", timeout=DUMP_BOUND)
    assert r.returncode == 0, r
    return json.loads(r.stdout)["path"]


def egress_record(agent, path, event):
    found = [r for r in agent.records(message_id=EGRESS_MESSAGE_ID)
             if r.get("DSAGENT_DUMP_PATH") == path and r.get("DSAGENT_EGRESS_EVENT") == event]
    assert len(found) <= 1, found
    return found[0] if found else None


def outcome(agent, path, timeout):
    """The outcome record of @path's upload once written; @timeout, each caller's, says what it bounds."""
    return wait_for(lambda: egress_record(agent, path, "outcome"), timeout=timeout,
                    what=f"the egress outcome of {path}")


def label(path):
    return os.getxattr(path, "user.dsagent.egress").decode()


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for piece in iter(lambda: f.read(MIB), b""):
            digest.update(piece)
    return digest.hexdigest()


def log_has(agent, words):
    with open(agent.log_path, errors="replace") as f:
        return words in f.read()


def incomplete_uploads(gw, key, bucket=None):
    """The store's multipart uploads of @key not completed nor aborted, each as (UploadId, its parts' numbers)."""
    client = gw.client()
    bucket = bucket or gw.bucket
    found = []
    for upload in client.list_multipart_uploads(Bucket=bucket, Prefix=key).get("Uploads", []):
        if upload["Key"] == key:
            parts = client.list_parts(Bucket=bucket, Key=key, UploadId=upload["UploadId"]).get("Parts", [])
            found.append((upload["UploadId"], [p["PartNumber"] for p in parts]))
    return found


def assert_answers_meanwhile(agent, target):
    """The agent answers another request while the upload is held: nothing of it waits for the store."""
    r = dsctl(agent, ALICE, "--json", "info", str(target.pid))
    assert r.returncode == 0 and json.loads(r.stdout)["pid"] == target.pid, r


def assert_kept_and_labelled(path, sha256, result):
    assert os.path.exists(path) and file_sha256(path) == sha256, path
    assert label(path) == f"failed:central:{result}", label(path)


def children_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def egress_process(agent):
    """The egress process's server (the child of the agent's dsagent-egress, its supervisor), which forks each
    upload's process."""
    found = [c for c in children_of(agent.proc.pid) if open(f"/proc/{c}/comm").read().strip() == "dsagent-egress"]
    found = [c for c in children_of(found[0]) if open(f"/proc/{c}/comm").read().strip() == "dsagent-egress"] if found else []
    return found[0] if found else None


def vm_hwm_kib(pid):
    """The process's peak resident set (VmHWM, KiB), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class PeakWatch:
    """Samples the VmHWM of the egress process's children (one per upload, egress-main.c) every 50 ms until
    stopped. VmHWM only grows, so the last sample of each child is its peak up to then; a child's last 50 ms
    before it exits (the confirming HEAD, after every part) are the only part not seen."""

    def __init__(self, egress_pid):
        self.egress_pid, self.peaks, self.done = egress_pid, {}, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.done.wait(0.05):
            for child in children_of(self.egress_pid):
                kib = vm_hwm_kib(child)
                if kib is not None:
                    self.peaks[child] = max(kib, self.peaks.get(child, 0))

    def stop(self):
        self.done.set()
        self.thread.join()
        return self.peaks


@test
def a_one_gib_full_dump_goes_up_in_parts_and_reads_back_whole():
    gw = store()
    # 1024 MiB of random managed arrays, touched: a full dump a little over 1 GiB
    target = Target(SVC, args=("--allocate-mb", "1024"))
    agent = start_agent(policy(store_lines='part_size = "16M"\n'))
    egress_pid = wait_for(lambda: egress_process(agent), what="the egress process")
    watch = PeakWatch(egress_pid)
    path = full_dump(agent, target.pid)
    size = os.path.getsize(path)
    assert size > 1 << 30, size
    # the upload's own bound: 1 GiB on loopback to a bluestore radosgw took about a minute on a loaded 2-core
    # machine (its time is printed below); 900 s ends only a hang
    out = outcome(agent, path, timeout=900)
    peaks = watch.stop()
    local = file_sha256(path)
    assert out["DSAGENT_EGRESS_RESULT"] == "uploaded", out
    parts = -(-size // (16 * MIB))  # 16 MiB parts, the last one shorter
    assert out["DSAGENT_EGRESS_PARTS"] == str(parts) and parts >= 65, (parts, out)
    assert out["DSAGENT_EGRESS_SIZE"] == str(size) and out["DSAGENT_EGRESS_SHA256"] == local, (size, local, out)
    key = out["DSAGENT_EGRESS_KEY"]
    head = gw.client().head_object(Bucket=gw.bucket, Key=key)
    assert head["ContentLength"] == size and head["ETag"].strip('"').endswith(f"-{parts}"), head
    # the store's own client path, hashed as it streams
    assert gw.sha256_of(key) == local, key
    # the requester's way back: a presigned URL from dsctl, read and hashed in 1 MiB pieces (never whole);
    # 120 s: a bound on each read of the socket (urlopen's timeout), not on the transfer
    r = dsctl(agent, ALICE, "dumps", "--url", path)
    assert r.returncode == 0, r
    digest, got = hashlib.sha256(), 0
    with urllib.request.urlopen(r.stdout.strip(), timeout=120) as response:
        for piece in iter(lambda: response.read(MIB), b""):
            digest.update(piece)
            got += len(piece)
    assert got == size and digest.hexdigest() == local, (got, size)
    # the upload's process: one child of the egress process, seen by the sampler
    assert len(peaks) == 1, peaks
    peak_kib = list(peaks.values())[0]
    egress_kib = vm_hwm_kib(egress_pid)
    print(f"# 1 GiB upload: {size} bytes, {parts} parts, {int(out['DSAGENT_EGRESS_USEC']) / 1e6:.1f} s, "
          f"{out['DSAGENT_EGRESS_ATTEMPTS']} requests; VmHWM: upload process {peak_kib} KiB, egress process "
          f"{egress_kib} KiB", flush=True)
    # Memory stays bounded whatever the size: the file is read by pread() a part at a time and never held. The
    # process is libcurl, OpenSSL and one part's buffer (16 MiB) at most; 64 MiB is four times that beside the
    # libraries, and a file held whole (1 GiB) would be sixteen times over it.
    assert peak_kib < 64 * 1024, peak_kib


class HeldDump:
    """A full dump of a service-user process taken by Alice through an agent whose upload of it stops after part
    @part (the test hook), with @store_lines added to the store (its part_size makes it multipart): .target,
    .pause (end() lets the upload go on), .agent, .path, .sha256 (the local file's), .key (the queued record's)."""

    def __init__(self, part, store_lines, bucket=None):
        self.target = Target(SVC)
        self.pause = Pause(f"egress-after-part-{part}", bound=600)  # ended by the test; 600 s ends a failing one
        self.agent = start_agent(policy(bucket=bucket, store_lines=store_lines), self.pause)
        self.path = full_dump(self.agent, self.target.pid)
        self.sha256 = file_sha256(self.path)
        queued = wait_for(lambda: egress_record(self.agent, self.path, "queued"), what="the queued record")
        self.key = queued["DSAGENT_EGRESS_KEY"]
        # the dump was published: its upload reaches the part within seconds; the bound is a hang's
        self.pause.wait(self.agent, timeout=120)


def stopped_after_part_2(attempts, store_lines=""):
    """A held dump (5 MiB parts, the smallest: the test app's plain full dump, about 112 MiB, is 23 of them)
    whose upload stands after part 2 when the store is stopped; then the upload goes on."""
    gw = store()
    held = HeldDump(2, f'part_size = "5M"\nattempts = {attempts}\n{store_lines}')
    # parts 1 and 2 are in the store, the upload not complete: this is the middle of a multipart upload
    assert [parts for _, parts in incomplete_uploads(gw, held.key)] == [[1, 2]], incomplete_uploads(gw, held.key)
    gw.stop_rgw()
    held.pause.end()
    return held


@test
def the_store_stopped_mid_upload_and_started_again_ends_uploaded():
    gw = store()
    # 20 tries a request (the most a policy allows): the part refused while the store is down is tried again with
    # a backoff that doubles from 1 s, long enough for radosgw to start again (seconds) before the last try
    try:
        held = stopped_after_part_2(attempts=20)
        agent, path, local, key = held.agent, held.path, held.sha256, held.key
        # part 3 was refused (the store is down) and is about to be tried again
        wait_for(lambda: log_has(agent, "dsagent-egress: test: retry 2: "), what="part 3 refused and retried")
        assert not log_has(agent, "dsagent-egress: test: part 3\n")
        assert_answers_meanwhile(agent, held.target)
    finally:
        if not gw.rgw_running():  # stopped by stopped_after_part_2(), unless it failed first
            gw.start_rgw()
    # the rest of the upload: tens of 5 MiB parts after the retries' backoff (30 s at most each); 600 s ends a hang
    out = outcome(agent, path, timeout=600)
    assert out["DSAGENT_EGRESS_RESULT"] == "uploaded", out
    parts = int(out["DSAGENT_EGRESS_PARTS"])
    # requests: the start, each part, the completion and the confirming HEAD, and the retries on top
    assert parts >= 3 and int(out["DSAGENT_EGRESS_ATTEMPTS"]) > parts + 3, out
    assert out["DSAGENT_EGRESS_SHA256"] == local and gw.sha256_of(key) == local, out
    assert label(path) == f"uploaded:central:{key}", label(path)
    assert incomplete_uploads(gw, key) == [], "the completed upload is still listed as incomplete"
    print(f"# stopped after part 2, uploaded after {int(out['DSAGENT_EGRESS_ATTEMPTS']) - parts - 3} more requests "
          f"in {int(out['DSAGENT_EGRESS_USEC']) / 1e6:.1f} s ({parts} parts)", flush=True)


@test
def the_store_kept_down_past_the_attempts_is_a_recorded_failure_the_local_copy_kept():
    gw = store()
    # two tries a request: part 3's second try (about a second later) finds the store still down
    try:
        # no hand-over again (retries = 0): that is test_egress_retry.py's
        held = stopped_after_part_2(attempts=2, store_lines="retries = 0\n")
        agent, path, local, key = held.agent, held.path, held.sha256, held.key
        # the bound: two connection attempts and one backoff of about a second
        out = outcome(agent, path, timeout=120)
        assert_answers_meanwhile(agent, held.target)
    finally:
        if not gw.rgw_running():  # stopped by stopped_after_part_2(), unless it failed first
            gw.start_rgw()
    assert out["DSAGENT_EGRESS_RESULT"] == "unavailable" and out["DSAGENT_EGRESS_LOCAL"] == "kept", out
    assert "onnect" in out["DSAGENT_EGRESS_ERROR"], out  # curl's words: "Couldn't connect", "Failed to connect"
    # part 3 was tried as often as the policy says, and no more: the start, parts 1 and 2, part 3 twice, and
    # the abort the store did not take
    assert log_has(agent, "dsagent-egress: test: retry 2: ") and not log_has(agent, "test: retry 3"), "attempts"
    assert out["DSAGENT_EGRESS_ATTEMPTS"] == "6", out
    assert_kept_and_labelled(path, local, "unavailable")
    # what the store holds proves the stop came between parts: the upload with exactly parts 1 and 2, left
    # incomplete (its abort could not reach a stopped store; a bucket's lifecycle rule ends such uploads)
    left = incomplete_uploads(gw, key)
    assert [parts for _, parts in left] == [[1, 2]], left
    gw.client().abort_multipart_upload(Bucket=gw.bucket, Key=key, UploadId=left[0][0])
    r = dsctl(agent, ALICE, "--json", "dumps")
    listed = [x for x in json.loads(r.stdout) if x["path"] == path] if r.returncode == 0 else r
    assert listed and listed[0]["egress"] == {"state": "failed", "store": "central", "result": "unavailable"}, listed


@test
def a_full_bucket_quota_is_refused_recorded_and_the_upload_aborted():
    gw = store()
    # a bucket of 10 MiB: the first 8 MiB part fits, the second does not (radosgw counts the parts it holds)
    gw.make_bucket("dsagent-faults-quota", max_size=10 * MIB)
    held = HeldDump(1, 'part_size = "8M"\n', bucket="dsagent-faults-quota")
    agent, path, local, key = held.agent, held.path, held.sha256, held.key
    assert [parts for _, parts in incomplete_uploads(gw, key, "dsagent-faults-quota")] == [[1]]
    assert_answers_meanwhile(agent, held.target)
    held.pause.end()
    out = outcome(agent, path, timeout=120)  # part 2 refused at once, then one abort
    assert out["DSAGENT_EGRESS_RESULT"] == "refused" and out["DSAGENT_EGRESS_LOCAL"] == "kept", out
    assert out["DSAGENT_EGRESS_HTTP_STATUS"] == "403" and out["DSAGENT_EGRESS_S3_CODE"] == "QuotaExceeded", out
    assert not log_has(agent, "dsagent-egress: test: retry"), "a refused part was tried again"
    assert_kept_and_labelled(path, local, "refused")
    # aborted: no upload and no object left in the bucket
    client = gw.client()
    assert not client.list_multipart_uploads(Bucket="dsagent-faults-quota").get("Uploads"), "not aborted"
    assert not client.list_objects_v2(Bucket="dsagent-faults-quota").get("Contents")


class HeldProxy:
    """A TCP relay on 127.0.0.1 to @port that holds each connection until .release is set (so that the test asks
    the agent something while an upload waits on its store), then relays both ways; .connections counts them."""

    def __init__(self, port):
        self.port, self.connections, self.release = port, 0, threading.Event()
        self.arrived = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint_port = self.listener.getsockname()[1]
        harness.scope.callback(self.listener.close)
        harness.scope.callback(self.release.set)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            self.arrived.set()
            threading.Thread(target=self.relay, args=(client,), daemon=True).start()

    def relay(self, client):
        # 600 s: the test sets it within seconds; the bound only frees the thread of a failing test
        self.release.wait(600)
        upstream = socket.create_connection(("127.0.0.1", self.port))
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=self.pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def pipe(source, sink):
        try:
            for data in iter(lambda: source.recv(1 << 16), b""):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@test
def a_store_certificate_the_ca_file_does_not_vouch_for_is_recorded_untrusted_and_not_tried_again():
    gw = store()
    # radosgw's https endpoint, reached through a relay that holds the connection while the agent is asked
    https_port = int(gw.https_endpoint.rsplit(":", 1)[1])
    proxy = HeldProxy(https_port)
    other_ca = radosgw.make_ca(make_dir(None, 0o755))  # a CA that did not sign the store's certificate
    target = Target(SVC)
    agent = start_agent(policy(endpoint=f"https://127.0.0.1:{proxy.endpoint_port}",
                               store_lines=f'ca_file = "{other_ca}"\nattempts = 5\n'))
    path = full_dump(agent, target.pid)
    local = file_sha256(path)
    wait_for(proxy.arrived.is_set, what="the upload's first connection")
    assert_answers_meanwhile(agent, target)
    proxy.release.set()
    out = outcome(agent, path, timeout=120)  # one handshake, refused at once; the bound is a hang's
    assert out["DSAGENT_EGRESS_RESULT"] == "untrusted" and out["DSAGENT_EGRESS_LOCAL"] == "kept", out
    assert "certificate" in out["DSAGENT_EGRESS_ERROR"], out  # curl's words
    # one request, one connection, whatever attempts says: the same certificate would come back
    assert out["DSAGENT_EGRESS_ATTEMPTS"] == "1" and proxy.connections == 1, (out, proxy.connections)
    assert not log_has(agent, "dsagent-egress: test: retry"), "an untrusted store was tried again"
    assert_kept_and_labelled(path, local, "untrusted")
    # nothing of it reached the store
    assert not gw.client().list_multipart_uploads(Bucket=gw.bucket, Prefix=out["DSAGENT_EGRESS_KEY"]).get("Uploads")


class HeldAnswer(http.server.BaseHTTPRequestHandler):
    """A store radosgw would never be: @answer (status, headers, body) to every request, its body read first; the
    first answer waits until @release is set, so that the test asks the agent something while the upload is held."""

    answer = (200, {}, b"")

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        while length > 0:
            length -= len(self.rfile.read(min(length, MIB)))
        type(self).requests.append((self.command, self.path))
        type(self).arrived.set()
        # 600 s: the test sets it within seconds; the bound only frees the thread of a failing test
        type(self).release.wait(600)
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


def misbehaving_store(status, headers, body, held=False):
    """An HTTP server on 127.0.0.1 answering every request alike (after .release if @held), stopped after the
    case; returns (endpoint, its handler class: .requests lists what came, .arrived is set at the first)."""
    release = threading.Event()
    if not held:
        release.set()
    handler = type("Answer", (HeldAnswer,), {"answer": (status, headers, body), "requests": [],
                                             "arrived": threading.Event(), "release": release})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    harness.scope.callback(server.server_close)
    harness.scope.callback(server.shutdown)
    harness.scope.callback(release.set)
    return "http://127.0.0.1:%d" % server.server_address[1], handler


def upload_to_misbehaving(endpoint, handler, part_size="5M"):
    """A full dump to the store at @endpoint, held at its first request while the agent answers another; the
    outcome record, the local copy's path and sha256. @part_size: 5M makes it a multipart upload, 1G one PUT."""
    target = Target(SVC)
    agent = start_agent(policy(endpoint=endpoint, store_lines=f'part_size = "{part_size}"\nattempts = 3\n'))
    path = full_dump(agent, target.pid)
    local = file_sha256(path)
    wait_for(handler.arrived.is_set, what="the upload's first request")
    assert_answers_meanwhile(agent, target)
    handler.release.set()
    return outcome(agent, path, timeout=120), path, local  # one answer, read at once; the bound is a hang's


@test
def a_redirect_to_another_host_is_recorded_garbage_and_never_followed():
    other, other_handler = misbehaving_store(200, {}, b"")
    endpoint, handler = misbehaving_store(307, {"Location": other + "/elsewhere"}, b"", held=True)
    out, path, local = upload_to_misbehaving(endpoint, handler)
    assert out["DSAGENT_EGRESS_RESULT"] == "garbage" and out["DSAGENT_EGRESS_HTTP_STATUS"] == "307", out
    assert out["DSAGENT_EGRESS_LOCAL"] == "kept", out
    # one request (the multipart start), not tried again, and the other host never asked
    assert [method for method, _ in handler.requests] == ["POST"], handler.requests
    assert other_handler.requests == [], other_handler.requests
    assert_kept_and_labelled(path, local, "garbage")


@test
def a_store_answering_garbage_is_recorded_and_nothing_is_taken_for_an_upload():
    endpoint, handler = misbehaving_store(200, {}, b"<html>hello</html>", held=True)
    out, path, local = upload_to_misbehaving(endpoint, handler)
    assert out["DSAGENT_EGRESS_RESULT"] == "garbage" and "UploadId" in out["DSAGENT_EGRESS_ERROR"], out
    assert out["DSAGENT_EGRESS_LOCAL"] == "kept", out
    # the start answered 200 without an UploadId: no part sent
    assert [method for method, _ in handler.requests] == ["POST"], handler.requests
    assert_kept_and_labelled(path, local, "garbage")


@test
def a_put_the_store_does_not_confirm_is_recorded_mismatch():
    endpoint, handler = misbehaving_store(200, {}, b"<html>hello</html>", held=True)
    # one PUT of the whole dump (about 112 MiB, under the part size), answered 200 without being stored
    out, path, local = upload_to_misbehaving(endpoint, handler, part_size="1G")
    assert out["DSAGENT_EGRESS_RESULT"] == "mismatch" and out["DSAGENT_EGRESS_LOCAL"] == "kept", out
    # the PUT, then the HEAD that found no dsagent-sha256 of the file's: a 200 alone is never taken for an upload
    assert [method for method, _ in handler.requests] == ["PUT", "HEAD"], handler.requests
    assert_kept_and_labelled(path, local, "mismatch")


run_tests()
