#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Upload throughput and peak memory of the egress core (agent/egress/s3-upload.c, driven by tests/tools/s3-upload)
against Debian's s3cmd (2.3.0, `s3cmd put`), the same file to the same radosgw.

One store for the whole run: radosgw on one mon and one osd, objects on bluestore (tests/integration/radosgw.py),
bound to 127.0.0.1, path-style; plain http, or https with --tls (radosgw's test CA given to both tools). A file
of random bytes of each size (in the page cache: both tools read it from memory) goes up RUNS times with each
tool, interleaved (s3-upload, s3cmd, s3-upload, ...), each upload under a key of its own, deleted after it was
checked. Both tools cut the file into parts of the same size (16 MiB: s3-upload's default, s3cmd's
multipart_chunk_size_mb set to it) and sign with SigV4; each does what it does by default beyond that:
s3-upload hashes the file (sha256) before it sends it and signs every part's sha256, then confirms the object
with a HEAD; s3cmd hashes the whole file (md5, for its attrs metadata) and each part twice (sha256 for its
signature, md5 as it sends, checked against the part's ETag). Each run is timed from the tool's start to its exit and its peak resident memory
is its own (ru_maxrss of GNU time's child, bench/rusage.py: a child of this Python would carry the script's peak,
docs/egress-plan.md's fact 7). The first upload of each tool at each size is read back through boto3 and its
sha256 compared with the file's; every upload's size is checked with a HEAD.

Prints each run, then per size the medians and a RESULT line: s3-upload's median time and peak memory over
s3cmd's (below 1: s3-upload is faster, or smaller).

Usage (as root): bench/bench-egress.py BUILD_DIR [--sizes 256 1024] [--runs 3] [--tls]
Needs the packages of the egress tests (radosgw ceph-mon ceph-osd python3-boto3), s3cmd and time
(scripts/install-deps.sh), and `ninja -C BUILD tests/tools/s3-upload`.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(0, HERE)
import radosgw  # noqa: E402
from rusage import timed_rusage  # noqa: E402

PART_MIB = 16
S3CMD = "/usr/bin/s3cmd"


def s3cmd_config(path, gw, endpoint):
    """s3cmd's configuration for @gw at @endpoint: path-style, SigV4, 16 MiB parts; https verified against the
    store's CA."""
    host = endpoint.split("://", 1)[1]
    tls = endpoint.startswith("https:")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"[default]\naccess_key = {gw.access_key}\nsecret_key = {gw.secret_key}\nhost_base = {host}\n"
                f"host_bucket = {host}\nuse_https = {tls}\nsignature_v2 = False\nbucket_location = {gw.region}\n"
                f"multipart_chunk_size_mb = {PART_MIB}\nprogress_meter = False\n")
        if tls:
            f.write(f"ca_certs_file = {gw.ca_file}\ncheck_ssl_certificate = True\ncheck_ssl_hostname = True\n")


def credentials_file(path, gw):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"{gw.access_key}:{gw.secret_key}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build")
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024], help="MiB")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tls", action="store_true", help="upload over https")
    args = parser.parse_args()
    tool = os.path.join(os.path.abspath(args.build), "tests", "tools", "s3-upload")
    for needed in (tool, S3CMD, "/usr/bin/time"):
        if not os.access(needed, os.X_OK):
            raise SystemExit(f"bench-egress: {needed} is missing (ninja -C BUILD tests/tools/s3-upload; "
                             "scripts/install-deps.sh for s3cmd and time)")
    work = tempfile.mkdtemp(prefix="bench-egress-")
    gw = radosgw.Radosgw(store="bluestore", tls=args.tls).start()
    try:
        endpoint = gw.https_endpoint if args.tls else gw.endpoint
        print(f"# radosgw (bluestore) started in {gw.start_seconds:.1f} s; uploads to {endpoint}", flush=True)
        config, creds = os.path.join(work, "s3cfg"), os.path.join(work, "credentials")
        s3cmd_config(config, gw, endpoint)
        credentials_file(creds, gw)
        client = gw.client()
        tls_options = ["--ca-file", gw.ca_file] if args.tls else []
        tools = {
            "s3-upload": lambda key, path: [tool, "--endpoint", endpoint, "--bucket", gw.bucket, "--region",
                                            gw.region, "--credentials", creds, "--part-size",
                                            str(PART_MIB << 20), *tls_options, key, path],
            "s3cmd put": lambda key, path: [S3CMD, "-c", config, "--no-progress", "put", path,
                                            f"s3://{gw.bucket}/{key}"],
        }
        print(f"{'size':>7} {'tool':<10} {'median s':>9} {'MiB/s':>7} {'peak MiB':>9}  runs (s / MiB)", flush=True)
        for mib in args.sizes:
            path, digest = radosgw.random_file(work, mib << 20)
            results = {name: [] for name in tools}
            for run in range(args.runs):
                for name, argv in tools.items():
                    key = f"bench/{mib}/{run}/{name.split()[0]}"
                    results[name].append(timed_rusage(argv(key, path)))
                    head = client.head_object(Bucket=gw.bucket, Key=key)
                    if head["ContentLength"] != mib << 20:
                        raise SystemExit(f"{name}: {key} holds {head['ContentLength']} bytes, not {mib << 20}")
                    if run == 0 and gw.sha256_of(key) != digest:
                        raise SystemExit(f"{name}: {key} does not read back as the file")
                    client.delete_object(Bucket=gw.bucket, Key=key)
            medians = {}
            for name in tools:
                seconds = statistics.median(r[0] for r in results[name])
                peak = max(r[1] for r in results[name])
                medians[name] = (seconds, peak)
                runs = " ".join(f"{s:.2f}/{p:.1f}" for s, p in results[name])
                print(f"{mib:5}Mi {name:<10} {seconds:9.2f} {mib / seconds:7.1f} {peak:9.1f}  {runs}", flush=True)
            ours, theirs = medians["s3-upload"], medians["s3cmd put"]
            print(f"RESULT size_mib={mib} runs={args.runs} tls={int(args.tls)} time_ratio={ours[0] / theirs[0]:.3f} "
                  f"memory_ratio={ours[1] / theirs[1]:.3f} (s3-upload / s3cmd put; "
                  f"{mib / ours[0]:.1f} and {mib / theirs[0]:.1f} MiB/s)", flush=True)
            os.unlink(path)
    finally:
        gw.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
