# SPDX-License-Identifier: LGPL-2.1-or-later
"""A real S3 store for the egress tests: radosgw.sh (beside this file) started from nothing, once per test file.

    store = radosgw.start_for_file()      # started now, stopped when the test file's process exits
    store.endpoint, store.bucket, store.region, store.access_key, store.secret_key
    store.client()                         # boto3, path-style, SigV4: the store's own client path
    store.client(endpoint, virtual=True)   # boto3 on another endpoint (https, a name), bucket.host addressing
    store.sha256_of(key)                   # read back through boto3, hashed as it streams
    store.presigned_get(key, seconds)      # a presigned GET URL, made by boto3
    store.make_bucket(name, max_size)      # another bucket, with a quota if asked
    store.stop_rgw(), store.start_rgw()    # the store down and back (radosgw alone, same port)
    store.pause_rgw(), store.resume_rgw()  # the store frozen (SIGSTOP) and running again
    random_file(directory, size)           # an artifact of random bytes and its sha256
    make_ca(directory)                     # a test CA of radosgw.sh's (openssl): the path of its certificate

Radosgw(dns_name="s3.test") has radosgw take BUCKET.s3.test[:PORT]/KEY as the bucket's (`rgw dns name`; the
name's resolution is the test's: /etc/hosts in a mount namespace of its own); Radosgw(tls=True) also serves
HTTPS (store.https_endpoint) with a certificate for 127.0.0.1, the name and *.name, signed by a CA of its own
(store.ca_file).

The store is radosgw on a one-mon, one-osd Ceph cluster bound to 127.0.0.1 (see radosgw.sh); it starts in
about 12 s with its objects on disk (bluestore, the default) and stops in about 5 s on a busy 2-core
machine. start_for_file() prints the start time as a TAP comment, so a run's log keeps it.
"""
import atexit
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "radosgw.sh")

# radosgw.sh bounds each of its own waits (START_BOUND=120 s for the store to answer, STOP_BOUND=30 s per
# daemon); these only end a hang of the script itself beyond those.
START_TIMEOUT = 300.0
STOP_TIMEOUT = 150.0


class Radosgw:
    """One store in a directory of its own; start() and stop() run radosgw.sh."""

    def __init__(self, store="bluestore", bucket="dsagent-test", region="us-east-1", dns_name=None, tls=False):
        self.kind = store
        self.bucket = bucket
        self.region = region
        self.dns_name = dns_name
        self.tls = tls
        self.dir = None
        self.endpoint = self.access_key = self.secret_key = None
        self.https_endpoint = self.ca_file = None
        self.start_seconds = None

    def start(self):
        base = tempfile.mkdtemp(prefix="dsagent-radosgw-")
        self.dir = os.path.join(base, "store")
        env = dict(os.environ, RADOSGW_STORE=self.kind, RADOSGW_BUCKET=self.bucket, RADOSGW_REGION=self.region)
        if self.dns_name:
            env["RADOSGW_DNS_NAME"] = self.dns_name
        if self.tls:
            env["RADOSGW_TLS"] = "1"
        began = time.monotonic()
        result = subprocess.run([SCRIPT, "start", self.dir], env=env, capture_output=True, text=True,
                                timeout=START_TIMEOUT)
        self.start_seconds = time.monotonic() - began
        if result.returncode != 0:
            shutil.rmtree(base, ignore_errors=True)
            self.dir = None
            raise RuntimeError("radosgw.sh start failed (%d): %s" % (result.returncode, result.stderr.strip()))
        fields = dict(item.split("=", 1) for item in result.stdout.split())
        self.endpoint = fields["endpoint"]
        self.access_key = fields["access_key"]
        self.secret_key = fields["secret_key"]
        self.https_endpoint = fields.get("https_endpoint")
        self.ca_file = fields.get("ca_file")
        return self

    def stop(self):
        """Stops the daemons (radosgw, osd, mon, in that order) and removes the store's directory."""
        if self.dir is None:
            return
        self._run("stop", STOP_TIMEOUT)
        shutil.rmtree(os.path.dirname(self.dir), ignore_errors=True)
        self.dir = None

    def make_bucket(self, name, max_size=None):
        """Another bucket of the same user; @max_size (bytes) sets and enables its quota, which radosgw checks
        on every write from then on (what it already holds counts)."""
        self.client().create_bucket(Bucket=name)
        if max_size is not None:
            admin = ["radosgw-admin", "-c", os.path.join(self.dir, "ceph.conf"), "-n", "client.admin", "quota"]
            for step in (["set", f"--max-size={max_size}"], ["enable"]):
                subprocess.run(admin + step + ["--quota-scope=bucket", f"--bucket={name}"], check=True,
                               capture_output=True, timeout=STOP_TIMEOUT)

    def stop_rgw(self):
        """radosgw alone stopped (SIGTERM, waited for): the store down, its data kept."""
        self._run("stop-rgw", STOP_TIMEOUT)

    def start_rgw(self):
        """radosgw started again on its port; returns once it answers."""
        self._run("start-rgw", START_TIMEOUT)

    def pause_rgw(self):
        """radosgw frozen (SIGSTOP): connections are still accepted by the kernel, nothing is answered, the
        slowest store there is."""
        os.kill(self.pids()["rgw"], signal.SIGSTOP)

    def resume_rgw(self):
        os.kill(self.pids()["rgw"], signal.SIGCONT)

    def rgw_running(self):
        return os.path.exists(os.path.join(self.dir, "run", "rgw.pid"))

    def _run(self, command, timeout):
        result = subprocess.run([SCRIPT, command, self.dir], capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError("radosgw.sh %s failed (%d): %s" % (command, result.returncode, result.stderr.strip()))

    def pids(self):
        """The daemons' pids that radosgw.sh recorded, by name (rgw, osd, mon)."""
        found = {}
        for name in ("rgw", "osd", "mon"):
            try:
                with open(os.path.join(self.dir, "run", name + ".pid")) as f:
                    found[name] = int(f.read())
            except FileNotFoundError:
                pass
        return found

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def client(self, endpoint=None, virtual=False, verify=None):
        """boto3's S3 client for this store, SigV4: path-style addressing on the plain endpoint (no DNS for bucket
        hosts) unless told: @endpoint (an https one, a name), @virtual (bucket.host/key), @verify (a CA file;
        botocore's default, certifi's store, otherwise)."""
        import boto3
        import botocore.config

        return boto3.client("s3", endpoint_url=endpoint or self.endpoint, region_name=self.region,
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
                            verify=verify,
                            config=botocore.config.Config(signature_version="s3v4",
                                                          s3={"addressing_style": "virtual" if virtual else "path"},
                                                          retries={"max_attempts": 1}))

    def sha256_of(self, key, client=None):
        """sha256 (hex) of the object's bytes as boto3 reads them back (through @client, default client()),
        streamed in 1 MiB pieces."""
        body = (client or self.client()).get_object(Bucket=self.bucket, Key=key)["Body"]
        digest = hashlib.sha256()
        for piece in iter(lambda: body.read(1 << 20), b""):
            digest.update(piece)
        return digest.hexdigest()

    def presigned_get(self, key, seconds=300):
        return self.client().generate_presigned_url("get_object", Params={"Bucket": self.bucket, "Key": key},
                                                    ExpiresIn=seconds)


def random_file(directory, size):
    """A file of @size random bytes in @directory, written in 1 MiB pieces; returns (path, sha256 hex)."""
    path = os.path.join(directory, "artifact")
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        remaining = size
        while remaining:
            piece = os.urandom(min(remaining, 1 << 20))
            digest.update(piece)
            f.write(piece)
            remaining -= len(piece)
    return path, digest.hexdigest()


def make_ca(directory):
    """A CA of radosgw.sh make-ca in @directory/ca (a fresh one each call): the path of its certificate."""
    result = subprocess.run([SCRIPT, "make-ca", os.path.join(directory, "ca")], capture_output=True, text=True,
                            timeout=STOP_TIMEOUT)
    if result.returncode != 0:
        raise RuntimeError("radosgw.sh make-ca failed (%d): %s" % (result.returncode, result.stderr.strip()))
    return result.stdout.strip()


def start_for_file(store="bluestore", **options):
    """One store for the whole test file: started now, stopped when the process exits, pass or fail.
    @options: Radosgw's dns_name and tls."""
    gw = Radosgw(store=store, **options).start()
    atexit.register(gw.stop)
    print("# radosgw (%s) started in %.1f s at %s" % (store, gw.start_seconds, gw.endpoint))
    sys.stdout.flush()
    return gw


_file_store = None


def file_store():
    """The test file's one store (start_for_file()), started on first use, so that a case run alone that needs
    none starts none."""
    global _file_store
    if _file_store is None:
        _file_store = start_for_file()
    return _file_store
