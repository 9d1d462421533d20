#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Writes the hand-made seed inputs into tests/fuzz/corpus/<target>/seed-*.

The seeds document the formats byte by byte; everything else in the corpus
directories was found by libFuzzer and kept by -merge=1 (see README.md).
Running this again rewrites the same files with the same bytes.

The /proc seeds are fixed snapshots (one real /proc/self/stat and status,
trimmed of nothing), not read at run time, so the corpus stays reproducible.
"""

import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def write(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# --- .NET diagnostic IPC (ipc-protocol.md sections 1.2, 1.3, 1.4, 2.4) ---------

MAGIC = b"DOTNET_IPC_V1\0"  # 14 bytes


def ipc_header(size, cset, cid, reserved=0):
    return MAGIC + struct.pack("<HBBH", size, cset, cid, reserved)


def ipc_message(cset, cid, payload):
    return ipc_header(20 + len(payload), cset, cid) + payload


def ipc_string(s):
    """u32 count of UTF-16 units including the NUL, then UTF-16LE; None is count 0."""
    if s is None:
        return struct.pack("<I", 0)
    units = s.encode("utf-16-le") + b"\0\0"
    return struct.pack("<I", len(units) // 2) + units


def ipc_raw_string(units):
    """A string from raw UTF-16 code units (may be ill-formed); the NUL is added."""
    units = list(units) + [0]
    return struct.pack("<I", len(units)) + b"".join(struct.pack("<H", u) for u in units)


COOKIE = bytes.fromhex("3f2504e04f8941d39a0c0305e82c3301")  # a GUID in .NET byte order
PID = 4242


def process_info(cmdline="/usr/share/dotnet/dotnet /srv/app/Orders.Api.dll --urls http://*:5000",
                 os_="Linux", arch="x64", pid=PID, cookie=COOKIE):
    return struct.pack("<Q", pid) + cookie + ipc_string(cmdline) + ipc_string(os_) + ipc_string(arch)


def process_info2(entry="Orders.Api", version="8.0.11", **kw):
    return process_info(**kw) + ipc_string(entry) + ipc_string(version)


def process_info3(rid="linux-x64", version=1, extra=b"", **kw):
    return struct.pack("<I", version) + process_info2(**kw) + ipc_string(rid) + extra


def ok_reply(payload):
    return ipc_message(0xFF, 0x00, payload)


def error_reply(hresult, rest=b""):
    return ipc_message(0xFF, 0xFF, struct.pack("<I", hresult) + rest)


def dotnet_ipc():
    t = "dotnet-ipc"
    M_REPLY, M_PI, M_PI2, M_PI3, M_STRING = b"\x00", b"\x01", b"\x02", b"\x03", b"\x04"

    # mode 0: whole replies
    write(t, "reply-processinfo3", M_REPLY + ok_reply(process_info3()))
    write(t, "reply-processinfo2", M_REPLY + ok_reply(process_info2()))
    write(t, "reply-processinfo", M_REPLY + ok_reply(process_info()))
    write(t, "reply-processinfo3-musl-arm64", M_REPLY + ok_reply(process_info3(
        rid="linux-musl-arm64", arch="arm64", version=1, cmdline="/app/Worker",
        entry="Worker", **{"pid": 1})))
    write(t, "reply-processinfo3-v2-appended", M_REPLY + ok_reply(process_info3(
        version=2, extra=ipc_string("appended by a newer runtime") + b"\x07\x00\x00\x00")))
    write(t, "reply-processinfo3-null-strings", M_REPLY + ok_reply(
        struct.pack("<I", 1) + struct.pack("<Q", PID) + COOKIE + ipc_string(None) * 6))
    write(t, "reply-processinfo3-empty-strings", M_REPLY + ok_reply(
        struct.pack("<I", 1) + struct.pack("<Q", PID) + COOKIE + ipc_string("") * 6))
    write(t, "reply-processinfo2-unicode", M_REPLY + ok_reply(process_info2(
        cmdline="/srv/app/Bestellungen.Größe 日本語 \U0001F680", entry="Größe", version="9.0.0-preview.1")))
    write(t, "reply-generic-ok", M_REPLY + ok_reply(struct.pack("<I", 0)))  # 24 bytes, ResumeRuntime
    write(t, "reply-session-id", M_REPLY + ok_reply(struct.pack("<Q", 0x1122334455667788)))
    write(t, "reply-error-unknown-command", M_REPLY + error_reply(0x80131385))
    write(t, "reply-error-bad-encoding", M_REPLY + error_reply(0x80131384))
    write(t, "reply-error-dump3-message", M_REPLY + error_reply(
        0x80004005, ipc_string("createdump failed: permission denied")))
    write(t, "reply-error-short", M_REPLY + ipc_message(0xFF, 0xFF, b"\x05\x40"))
    write(t, "reply-truncated", M_REPLY + ok_reply(process_info3())[:-7])
    write(t, "reply-trailing-bytes", M_REPLY + ok_reply(struct.pack("<I", 0)) + b"\0")
    write(t, "reply-size-too-small", M_REPLY + ipc_header(19, 0xFF, 0x00))
    write(t, "reply-bad-magic", M_REPLY + b"DOTNET_IPC_V2\0" + ok_reply(b"\0\0\0\0")[14:])
    write(t, "reply-reserved-nonzero", M_REPLY + ipc_header(24, 0xFF, 0x00, 1) + b"\0\0\0\0")
    write(t, "reply-not-server-set", M_REPLY + ipc_message(0x04, 0x00, b""))  # a request, echoed
    write(t, "reply-unknown-id", M_REPLY + ipc_message(0xFF, 0x01, b"\0\0\0\0"))
    write(t, "reply-header-only", M_REPLY + ipc_header(20, 0xFF, 0x00))
    write(t, "request-processinfo", M_REPLY + bytes.fromhex(  # the worked example of section 1.2
        "444F544E45545F4950435F563100" "1400" "04" "00" "0000"))
    write(t, "reply-generic-ok-worked-example", M_REPLY + bytes.fromhex(
        "444F544E45545F4950435F563100" "1800" "FF" "00" "0000" "00000000"))
    write(t, "reply-processinfo3-bad-string", M_REPLY + ok_reply(
        struct.pack("<I", 1) + struct.pack("<Q", PID) + COOKIE + struct.pack("<I", 0x7fffffff)))

    # modes 1..3: bare payloads
    write(t, "pi-valid", M_PI + process_info())
    write(t, "pi-trailing", M_PI + process_info() + b"\0")
    write(t, "pi-short-cookie", M_PI + struct.pack("<Q", PID) + COOKIE[:9])
    write(t, "pi-empty", M_PI)
    write(t, "pi2-valid", M_PI2 + process_info2())
    write(t, "pi2-missing-version", M_PI2 + process_info() + ipc_string("App"))
    write(t, "pi2-lone-surrogates", M_PI2 + struct.pack("<Q", PID) + COOKIE +
          ipc_raw_string([0x2F, 0xD800, 0x41]) + ipc_raw_string([0xDC00, 0xD83D]) +
          ipc_raw_string([0xD83D, 0xDE80]) + ipc_raw_string([0x41, 0x00, 0x42]) + ipc_string(None))
    write(t, "pi3-valid", M_PI3 + process_info3())
    write(t, "pi3-version0", M_PI3 + process_info3(version=0))
    write(t, "pi3-version1-trailing", M_PI3 + process_info3(version=1, extra=b"\x01"))
    write(t, "pi3-version-max-appended", M_PI3 + process_info3(version=0xFFFFFFFF, extra=b"x" * 9))
    write(t, "pi3-no-terminator", M_PI3 + struct.pack("<I", 1) + struct.pack("<Q", PID) + COOKIE +
          struct.pack("<I", 2) + b"A\0B\0")

    # mode 4: single strings
    write(t, "string-null", M_STRING + ipc_string(None))
    write(t, "string-empty", M_STRING + ipc_string(""))
    write(t, "string-ascii", M_STRING + ipc_string("linux-x64"))
    write(t, "string-bmp", M_STRING + ipc_string("Größe 日本語 \uFFFD \uFEFF"))
    write(t, "string-supplementary", M_STRING + ipc_string("\U0001F680\U0010FFFF\U00010000"))
    write(t, "string-lone-high-before-nul", M_STRING + ipc_raw_string([0x41, 0xD800]))
    write(t, "string-lone-low", M_STRING + ipc_raw_string([0xDFFF, 0x41]))
    write(t, "string-high-high-low", M_STRING + ipc_raw_string([0xD800, 0xD800, 0xDC00]))
    write(t, "string-embedded-nul", M_STRING + ipc_raw_string([0x41, 0, 0x42]))
    write(t, "string-no-terminator", M_STRING + struct.pack("<I", 2) + b"A\0B\0")
    write(t, "string-count-too-large", M_STRING + struct.pack("<I", 3) + b"A\0\0\0")
    write(t, "string-count-huge", M_STRING + struct.pack("<I", 0xFFFFFFFF) + b"\0\0")
    write(t, "string-short-count", M_STRING + b"\x01\x00")
    write(t, "string-trailing", M_STRING + ipc_string("x") + b"tail")



# --- targets.cgroups patterns against cgroup paths (fuzz-cgroup-pattern.c): a pattern, NUL, a path ---

def cgroup_pattern():
    t = "cgroup-pattern"
    podman = b"/machine.slice/libpod-" + b"3f9a" * 16 + b".scope/container"
    write(t, "podman-scope", b"/machine.slice/libpod-*.scope\0" + podman)
    write(t, "parent", b"/machine.slice\0" + podman)
    write(t, "no-match", b"/system.slice/*.service\0" + podman)
    write(t, "double-star", b"/**/libpod-*.scope\0" + podman)
    write(t, "kubepods", b"/kubepods.slice/**/cri-containerd-*.scope\0/kubepods.slice/kubepods-burstable.slice/"
          b"kubepods-burstable-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice/cri-containerd-" + b"ab" * 32 + b".scope")
    write(t, "backtrack", b"/**/a/b\0/a/a/a/a/b")
    write(t, "question-multibyte", "/?\0/\u00e4".encode())
    write(t, "many-stars", b"/**/**/*a*a*a*a*b\0" + b"/aaaa" * 100)
    write(t, "root", b"/**\0/")
    write(t, "invalid-pattern", b"/a/../b\0/a/b")
    write(t, "invalid-path", b"/*\0/\xff\xfe")
    write(t, "no-nul", b"/machine.slice")


# --- what env shows of a variable (fuzz-env-secret.c): a name, NUL, a value ---

def env_secret():
    t = "env-secret"
    write(t, "plain", b"ASPNETCORE_URLS\0http://+:8080")
    write(t, "path", b"PATH\0/usr/local/bin:/usr/bin:/bin:/usr/share/dotnet")
    write(t, "sql-server", b"ConnectionStrings__Main\0Server=tcp:db,1433;User ID=app;Password=Pa55w0rd!;")
    write(t, "redis", b"Redis__Configuration\0cache:6379,password=r3d1s,ssl=True")
    write(t, "url-user", b"DOTNET_X\0amqp://guest:guest@rabbitmq:5672/")
    write(t, "sas", b"AZURE_STORAGE_SAS\0?sv=2022-11-02&sp=r&sig=abcd%2B")
    write(t, "jwt", b"HOSTNAME\0eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkw.c2ln")
    write(t, "pem", b"TZ\0-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n")
    write(t, "aws", b"LANG\0AKIAIOSFODNN7EXAMPLE")
    write(t, "stripe", b"STRIPE_SK\0sk_live_4eC39HqLyjWDarjtT1zdp7dc")
    write(t, "base64", b"DOTNET_K\0wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    write(t, "json", b"DOTNET_J\0{\"user\":\"a\",\"password\":\"b\"}")
    write(t, "secret-name", b"PGPASS\0x")
    write(t, "pwd", b"PWD\0/srv/app")
    write(t, "many-eyj", b"DOTNET_E\0" + b"eyJ" * 200)
    write(t, "many-prefixes", b"DOTNET_S\0" + b"sk_live_" * 100)
    write(t, "many-equals", b"DOTNET_Q\0" + b"key =" * 100)
    write(t, "no-nul", b"DOTNET_gcServer")
    write(t, "not-utf8", b"LC_\xff\0\xfe\xff=")
    # issue 35: what app-chosen names under DOTNET_ held, and the harmless values the new checks must spare
    write(t, "sdk-uuid", b"DOTNET_LaunchDarkly_Sdk\0sdk-2f0b7a9e-51c3-4d8e-9a6b-0c1d2e3f4a5b")
    write(t, "header-uuid", b"DOTNET_Upstream_Headers\0x-api-key: 6f1c2d3e-4b5a-6978-8796-a5b4c3d2e1f0")
    write(t, "login", b"DOTNET_Login\0admin:Winter2025!")
    write(t, "passcode", b"DOTNET_GCHeapHardLimit\x0048213907")
    write(t, "hex-size", b"DOTNET_GCHeapHardLimit\x000x10000000")
    write(t, "round-size", b"DOTNET_SYSTEM_NET_HTTP_SOCKETSHTTPHANDLER_FLOWCONTROL_MAXSTREAMWINDOWSIZE\x0016777216")
    write(t, "base32", b"DOTNET_Otp_Seed\0JBSWY3DPEHPK3PXP")
    write(t, "base32-spaced", b"TZ\0jbsw y3dp ehpk 3pxp")
    write(t, "app-password", b"LANG\0xkcd-plmq-rtzw-vbnh")
    write(t, "webhook", b"ASPNETCORE_URLS\0https://hooks.zapier.com/hooks/catch/4821390/k3j5h6g/")
    write(t, "event-pipe-config", b"DOTNET_EventPipeConfig\0Microsoft-Windows-DotNETRuntime:0x4c14fccbd:5")
    write(t, "many-colons", b"DOTNET_E\0" + b"ab:" * 300)
    write(t, "many-headers", b"DOTNET_H\0" + b"X-A: " * 300)
    write(t, "many-digits", b"DOTNET_D\0" + b"0x1234567 " * 100)


# --- the advertise message (ipc-protocol.md 4.3, fuzz-advertise.c) -----------------------
#
# A runtime started with DOTNET_DiagnosticPorts=PATH,connect writes it first on every
# connection: "ADVR_V1" and a NUL, the 16-byte cookie (the ProcessInfo one), the pid in its
# own pid namespace as a u64 LE, a u16 reserved 0. 34 bytes, no more, no less.

def advertise_message(magic=b"ADVR_V1\0", cookie=COOKIE, pid=PID, reserved=0):
    return magic + cookie + struct.pack("<QH", pid, reserved)


def advertise():
    t = "advertise"
    write(t, "valid", advertise_message())
    write(t, "valid-pid-max", advertise_message(pid=0x7FFFFFFF))
    write(t, "truncated", advertise_message()[:33])
    write(t, "trailing", advertise_message() + b"\0")
    write(t, "bad-magic", advertise_message(magic=b"DOTNET_I"))
    write(t, "magic-v2", advertise_message(magic=b"ADVR_V2\0"))
    write(t, "magic-no-nul", advertise_message(magic=b"ADVR_V1 "))
    write(t, "reserved-nonzero", advertise_message(reserved=1))
    write(t, "reserved-high-byte", advertise_message(reserved=0x8000))
    write(t, "pid-one", advertise_message(pid=1))
    write(t, "pid-zero", advertise_message(pid=0))
    write(t, "pid-above-int32", advertise_message(pid=0x80000000))
    write(t, "pid-high-half", advertise_message(pid=0x1000004D2))  # 1234 in the low half
    # fuzz-advertise.c also encodes the first 24 bytes of any input as a cookie and a pid
    write(t, "cookie-and-pid", COOKIE + struct.pack("<Q", PID))
    write(t, "empty", b"")


# --- ProcessEnvironment's block and reply, env_redact patterns (fuzz-environment.c) ---
#
# The block follows the OK reply on the same connection: u32 count, then count strings
# "NAME=VALUE" (ipc-protocol.md 2.4); the reply's payload is u32 size, u16 0. Mode byte:
# 0 a block, 1 a reply payload, 2 a pattern, NUL, a name.

def env_block(*strings, count=None):
    body = b"".join(s if isinstance(s, bytes) else ipc_string(s) for s in strings)
    return struct.pack("<I", len(strings) if count is None else count) + body


def environment():
    t = "environment"
    E_BLOCK, E_SIZE, E_MATCH = b"\x00", b"\x01", b"\x02"

    typical = env_block("PATH=/usr/bin:/bin", "HOME=/var/lib/orders", "DOTNET_gcServer=1",
                        "DB_PASSWORD=hunter2", "ConnectionStrings__Main=Server=db;Password=hunter2",
                        "AWS_SESSION_TOKEN=FwoGZXIvYXdzE", "EMPTY=")
    write(t, "block-typical", E_BLOCK + typical)
    write(t, "block-empty", E_BLOCK + env_block())
    write(t, "block-duplicate-names", E_BLOCK + env_block("A=1", "A=2", "a=3"))
    write(t, "block-unicode", E_BLOCK + env_block("Größe=日本語 \U0001F680", "RLO=\u202Eevil"))
    write(t, "block-lone-surrogate", E_BLOCK + env_block(ipc_raw_string([0x41, 0x3D, 0xD800, 0x42])))
    write(t, "block-embedded-nul", E_BLOCK + env_block(ipc_raw_string([0x41, 0x00, 0x42, 0x3D, 0x43])))
    write(t, "block-count-too-high", E_BLOCK + env_block("A=1", "B=2", count=3))
    write(t, "block-count-too-low", E_BLOCK + env_block("A=1", "B=2", count=1))
    write(t, "block-count-huge", E_BLOCK + env_block("A=1", count=0xFFFFFFFF))
    write(t, "block-no-equals", E_BLOCK + env_block("NOEQUALS"))
    write(t, "block-empty-name", E_BLOCK + env_block("=value"))
    write(t, "block-null-string", E_BLOCK + env_block(None, "A=1"))
    write(t, "block-truncated", E_BLOCK + typical[:-5])
    write(t, "block-short", E_BLOCK + b"\x01\x00\x00")

    write(t, "size-ok", E_SIZE + struct.pack("<IH", len(typical), 0))
    write(t, "size-reserved-nonzero", E_SIZE + struct.pack("<IH", len(typical), 1))
    write(t, "size-short-payload", E_SIZE + struct.pack("<I", len(typical)))
    write(t, "size-too-small", E_SIZE + struct.pack("<IH", 3, 0))
    write(t, "size-too-large", E_SIZE + struct.pack("<IH", 0x10000000, 0))

    write(t, "match-password", E_MATCH + b"*PASSWORD*\0db_password")
    write(t, "match-prefix", E_MATCH + b"ConnectionStrings__*\0CONNECTIONSTRINGS__Main")
    write(t, "match-question-multibyte", E_MATCH + "A?C\0AÄC".encode())
    write(t, "match-many-stars", E_MATCH + b"*a*a*a*a*a*b\0" + b"a" * 80)
    write(t, "match-invalid-pattern", E_MATCH + b"A=B\0A=B")
    write(t, "match-no-nul", E_MATCH + b"*KEY*")


# --- requests a tool sends through the proxy (common/ipc-request.h) -------------
#
# Byte for byte as Microsoft.Diagnostics.NETCore.Client writes them (ipc-protocol.md
# 1.4, 2): BinaryWriter int/uint as 4 bytes, long as 8, bool as 1 byte 0 or 1, strings
# as ipc_string(); a provider without arguments gets "" (count 1). The first byte is the
# fuzz target's mode: bit 0 sets the header's size to the length, bit 1 also decodes the
# message cut short by one byte.

R_EXACT, R_FIX_SIZE, R_CUT = b"\x00", b"\x01", b"\x02"
CLR = "Microsoft-Windows-DotNETRuntime"
CLR_PRIVATE = "Microsoft-Windows-DotNETRuntimePrivate"
SAMPLER = "Microsoft-DotNETCore-SampleProfiler"
RUNDOWN_DEFAULT = 0x80020139
CLSID = bytes.fromhex("1f6b1ac06e2d6b4f9a8c0d1e2f3a4b5c")  # {c01a6b1f-2d6e-4f6b-9a8c-0d1e2f3a4b5c}


def provider(name, keywords, level, arguments="", event_filter=None):
    """provider_config; event_filter (enable, [ids]) makes it CollectTracing5's form."""
    b = struct.pack("<QI", keywords, level) + ipc_string(name) + ipc_string(arguments)
    if event_filter is not None:
        enable, ids = event_filter
        b += struct.pack("<BI", enable, len(ids)) + b"".join(struct.pack("<I", i) for i in ids)
    return b


def providers(*items):
    return struct.pack("<I", len(items)) + b"".join(items)


def collect_tracing(version, *items, mb=256, fmt=1, rundown=True, keyword=RUNDOWN_DEFAULT, stackwalk=True,
                    session_type=0, tail=b""):
    """tail: what follows the providers (CollectTracing6's u32 sessionBufferMode)"""
    if version == 1:
        head = struct.pack("<II", mb, fmt)
    elif version == 2:
        head = struct.pack("<IIB", mb, fmt, rundown)
    elif version == 3:
        head = struct.pack("<IIBB", mb, fmt, rundown, stackwalk)
    elif version == 4:
        head = struct.pack("<IIQB", mb, fmt, keyword, stackwalk)
    else:  # 5 and 6: streaming session
        head = struct.pack("<IIIQB", session_type, mb, fmt, keyword, stackwalk)
    return ipc_message(0x02, 0x01 + version, head + providers(*items) + tail)


def ipc_request():
    t = "ipc-request"
    # the Process set: no payload but EnablePerfMap's u32 type
    for name, cid in (("processinfo", 0x00), ("resume-runtime", 0x01), ("process-environment", 0x02),
                      ("processinfo2", 0x04), ("disable-perfmap", 0x06), ("processinfo3", 0x08)):
        write(t, name, R_EXACT + ipc_message(0x04, cid, b""))
    write(t, "enable-perfmap", R_EXACT + ipc_message(0x04, 0x05, struct.pack("<I", 3)))
    write(t, "stop-tracing", R_CUT + ipc_message(0x02, 0x01, struct.pack("<Q", 0x00007F3A5C001230)))

    # dotnet-trace: a profile's providers, EventCounters, a Meter listener
    metrics = ("SessionId=6e0a7d2c-2b6f-4a43-9c1f-3a1d5f9e8b70;Metrics=System.Runtime;RefreshInterval=1;"
               "MaxTimeSeries=1000;MaxHistograms=10;ClientId=1f4c2f62-8d8b-4e5a-9d0c-7a3f2e6b1c55")
    trace = collect_tracing(2, provider(SAMPLER, 0xF00000000000, 4), provider(CLR, 0x14C14FCCBD, 4),
                            provider("System.Runtime", 0, 4, "EventCounterIntervalSec=1"),
                            provider("System.Diagnostics.Metrics", 0x2, 4, metrics))
    write(t, "collect-tracing2-dotnet-trace", R_CUT + trace)
    write(t, "collect-tracing2-size-fixed", R_FIX_SIZE + trace[:14] + b"\xff\xff" + trace[16:])
    write(t, "collect-tracing2-no-rundown", R_EXACT + collect_tracing(
        2, provider("System.Runtime", 0, 4, "EventCounterIntervalSec=5"), rundown=False))
    # dotnet-gcdump's heap session (Drop mode: the client's fallback from CollectTracing6)
    write(t, "collect-tracing2-gcdump", R_EXACT + collect_tracing(2, provider(CLR, 0x1980001, 5), mb=1024))
    # the shapes decided as counters, gcdump and stacks (ipc_policy_tracing_shape()), as 10.0.750501 sends them
    write(t, "collect-tracing2-dotnet-counters", R_EXACT + collect_tracing(
        2, provider("System.Runtime", 0, 4, "EventCounterIntervalSec=1"),
        provider("Microsoft.AspNetCore.Hosting", 0, 4, "EventCounterIntervalSec=3"),
        provider("System.Diagnostics.Metrics", 0x2, 4, metrics.replace(
            "Metrics=System.Runtime", "Metrics=System.Runtime,Microsoft.AspNetCore.Hosting\\http.server")),
        rundown=False))
    write(t, "collect-tracing2-counters-monitor", R_EXACT + collect_tracing(
        2, provider("System.Runtime", 0, 4, "EventCounterIntervalSec=1"),
        provider("System.Diagnostics.Metrics", 0x2, 4, "SessionId=SHARED;Metrics=System.Runtime;RefreshInterval=1"),
        rundown=False))
    write(t, "collect-tracing2-gcdump-types", R_EXACT + collect_tracing(2, provider(SAMPLER, 0xF00000000000, 4),
                                                                          mb=1024, rundown=False))
    write(t, "collect-tracing2-dotnet-stack", R_EXACT + collect_tracing(2, provider(SAMPLER, 0xF00000000000, 4)))
    write(t, "collect-tracing1-netperf", R_EXACT + collect_tracing(1, provider(CLR, 0x1, 4, None), mb=16, fmt=0))
    write(t, "collect-tracing3-no-stacks", R_CUT + collect_tracing(
        3, provider(CLR, 0x1, 4), rundown=False, stackwalk=False))
    write(t, "collect-tracing4-gc-rundown", R_CUT + collect_tracing(
        4, provider(CLR, 0x1, 4), provider(CLR_PRIVATE, 0x1, 4), keyword=0x1))
    write(t, "collect-tracing5-filters", R_CUT + collect_tracing(
        5, provider(CLR, 0x8, 4, event_filter=(1, [80, 250, 0x10000])),
        provider("My.Events", 0, 5, "Level=debug", event_filter=(0, [])), mb=100))
    write(t, "collect-tracing5-user-events", R_EXACT + collect_tracing(
        5, provider(CLR, 0x8, 4, event_filter=(0, [])), session_type=1))
    write(t, "collect-tracing6-block", R_EXACT + collect_tracing(
        6, provider(CLR, 0x1980001, 5, event_filter=(0, [])), mb=1024, tail=struct.pack("<I", 1)))

    # GenerateCoreDump: string path, u32 type, u32 diagnostics (v1) or flags (v2, v3)
    for cid, dtype, flags in ((0x01, 1, 1), (0x02, 2, 0), (0x03, 4, 0x5), (0x03, 3, 0x8)):
        write(t, "dump%d-type%d" % (cid, dtype), R_CUT + ipc_message(
            0x01, cid, ipc_string("/var/tmp/dumps/core.%p") + struct.pack("<II", dtype, flags)))
    write(t, "dump3-unicode-path", R_EXACT + ipc_message(
        0x01, 0x03, ipc_string("/tmp/Größe/核\U0001F4A5.dmp") + struct.pack("<II", 4, 0)))

    # the commands that run the requester's code
    write(t, "set-environment-variable", R_CUT + ipc_message(
        0x04, 0x03, ipc_string("DOTNET_gcServer") + ipc_string("1")))
    write(t, "set-environment-variable-unset", R_EXACT + ipc_message(
        0x04, 0x03, ipc_string("LD_PRELOAD") + ipc_string(None)))
    write(t, "apply-startup-hook", R_CUT + ipc_message(0x04, 0x07, ipc_string("/srv/hooks/Hook.dll")))
    write(t, "attach-profiler", R_CUT + ipc_message(
        0x03, 0x01, struct.pack("<I", 10) + CLSID + ipc_string("/opt/prof/libprof.so")
        + struct.pack("<I", 5) + b"\x01\x02\x03\x00\xff"))
    write(t, "attach-profiler-no-data", R_EXACT + ipc_message(
        0x03, 0x01, struct.pack("<I", 0) + CLSID + ipc_string("/opt/prof/libprof.so") + struct.pack("<I", 0)))
    write(t, "startup-profiler", R_CUT + ipc_message(0x03, 0x02, CLSID + ipc_string("/opt/prof/libprof.so")))

    # refused, one class each
    pi = ipc_message(0x04, 0x00, b"")
    write(t, "reject-short", R_EXACT + pi[:19])
    write(t, "reject-magic", R_EXACT + b"DOTNET_IPC_V2\0" + pi[14:])
    write(t, "reject-reserved", R_EXACT + ipc_header(20, 0x04, 0x00, reserved=1))
    write(t, "reject-size-below-header", R_EXACT + ipc_header(19, 0x04, 0x00))
    write(t, "reject-second-message", R_EXACT + pi + pi)
    write(t, "reject-size-beyond", R_EXACT + ipc_header(28, 0x02, 0x01) + b"\0\0\0\0")
    write(t, "reject-unknown-set", R_EXACT + ipc_message(0x05, 0x00, b""))
    write(t, "reject-unknown-id", R_EXACT + ipc_message(0x04, 0x09, b""))
    write(t, "reject-server-reply", R_EXACT + ipc_message(0xFF, 0xFF, struct.pack("<I", 0)))
    write(t, "reject-wildcard-provider", R_EXACT + collect_tracing(2, provider("*", 0xFFFFFFFFFFFFFFFF, 5)))
    write(t, "reject-duplicate-provider", R_EXACT + collect_tracing(2, provider(CLR, 1, 4), provider(CLR, 2, 5)))
    write(t, "reject-33-providers", R_EXACT + collect_tracing(
        2, *[provider("P%d" % i, 1, 4) for i in range(33)]))
    write(t, "reject-level-6", R_EXACT + collect_tracing(2, provider(CLR, 1, 6)))
    write(t, "reject-name-257", R_EXACT + collect_tracing(2, provider("a" * 257, 1, 4)))
    write(t, "reject-lone-surrogate", R_EXACT + ipc_message(0x02, 0x03, struct.pack("<IIB", 256, 1, 1)
          + struct.pack("<I", 1) + struct.pack("<QI", 1, 4) + ipc_string(CLR) + ipc_raw_string([0x41, 0xD800])))
    write(t, "reject-string-unterminated", R_EXACT + ipc_message(
        0x04, 0x07, struct.pack("<I", 3) + "a.dll"[:3].encode("utf-16-le")))
    write(t, "reject-dump-type-0", R_EXACT + ipc_message(0x01, 0x02, ipc_string("/tmp/d") + struct.pack("<II", 0, 0)))
    write(t, "reject-dump-empty-path", R_EXACT + ipc_message(0x01, 0x03, ipc_string("") + struct.pack("<II", 1, 0)))
    write(t, "reject-zero-clsid", R_EXACT + ipc_message(0x03, 0x02, bytes(16) + ipc_string("/p.so")))
    write(t, "reject-client-data-beyond", R_EXACT + ipc_message(
        0x03, 0x01, struct.pack("<I", 1) + CLSID + ipc_string("/p.so") + struct.pack("<I", 9) + b"\0"))
    write(t, "reject-env-name-with-equals", R_EXACT + ipc_message(0x04, 0x03, ipc_string("A=B") + ipc_string("1")))


# --- dsctl <-> dsagent frames (common/wire.h) ----------------------------------

TAG = dict(PID=1, UID=2, UNIT=3, NAME=4, EXE=5, COMMAND_LINE=6, OS=7, ARCH=8, RUNTIME_VERSION=9,
           ENTRY_ASSEMBLY=10, RUNTIME_ID=11, RUNTIME_PID=12, COOKIE=13, ERROR=14, MESSAGE=15,
           HRESULT=16, REQUEST_ID=17)
REQUEST_PS, REQUEST_INFO = 0x0001, 0x0002
REPLY_PROCESS, REPLY_DONE, REPLY_ERROR = 0x8001, 0x8002, 0x8003


def field(tag, value):
    return struct.pack("<HI", tag, len(value)) + value


def u32(tag, v):
    return field(TAG[tag], struct.pack("<I", v))


def u64(tag, v):
    return field(TAG[tag], struct.pack("<Q", v))


def string(tag, s):
    return field(TAG[tag], s.encode() if isinstance(s, str) else s)


def frame(mtype, *fields, version=1, size=None):
    payload = b"".join(fields)
    return b"DSAG" + struct.pack("<HHI", version, mtype,
                                 len(payload) if size is None else size) + payload


def wire():
    t = "wire"
    process_fields = [
        u32("PID", 4242), u32("UID", 1000), string("UNIT", "orders.service"),
        string("NAME", "Orders.Api"), string("EXE", "/usr/share/dotnet/dotnet"),
        u64("RUNTIME_PID", 1), string("COMMAND_LINE", "dotnet /srv/app/Orders.Api.dll"),
        field(TAG["COOKIE"], COOKIE), string("OS", "Linux"), string("ARCH", "x64"),
        string("ENTRY_ASSEMBLY", "Orders.Api"), string("RUNTIME_VERSION", "8.0.11"),
        string("RUNTIME_ID", "linux-x64"),
    ]
    write(t, "request-ps", frame(REQUEST_PS))
    write(t, "request-info", frame(REQUEST_INFO, u32("PID", 4242)))
    write(t, "reply-process-ps", frame(REPLY_PROCESS, *process_fields[:4]))
    write(t, "reply-process-info", frame(REPLY_PROCESS, *process_fields))
    write(t, "reply-process-all-tags", frame(REPLY_PROCESS, *process_fields, u32("ERROR", 9),
                                             string("MESSAGE", "m"), u32("HRESULT", 0x80131385),
                                             u64("REQUEST_ID", 7)))
    write(t, "reply-done", frame(REPLY_DONE, u64("REQUEST_ID", 123456789)))
    write(t, "reply-error", frame(REPLY_ERROR, u32("ERROR", 1), string("MESSAGE", "permission denied"),
                                  u64("REQUEST_ID", 17)))
    write(t, "reply-error-hresult", frame(REPLY_ERROR, u32("ERROR", 5),
                                          string("MESSAGE", "the runtime refused ProcessInfo"),
                                          u32("HRESULT", 0x80131385), u64("REQUEST_ID", 2**64 - 1)))
    write(t, "reply-process-unicode", frame(REPLY_PROCESS, string("NAME", "Größe 日本語 \U0001F680"),
                                            string("UNIT", ""), field(TAG["COOKIE"], b"")))
    # invalid
    write(t, "bad-version", frame(REQUEST_PS, version=2))
    write(t, "bad-version-0", frame(REQUEST_INFO, u32("PID", 1), version=0))
    write(t, "bad-magic", b"DSAH" + frame(REQUEST_PS)[4:])
    write(t, "bad-magic-prefix", b"DSX")
    write(t, "truncated-header", frame(REQUEST_PS)[:11])
    write(t, "truncated-payload", frame(REQUEST_INFO, u32("PID", 4242))[:-1])
    write(t, "trailing-bytes", frame(REQUEST_INFO, u32("PID", 4242)) + b"\0")
    write(t, "two-frames", frame(REQUEST_PS) + frame(REQUEST_INFO, u32("PID", 1)))
    write(t, "payload-too-large", frame(REQUEST_PS, size=64 * 1024 + 1))
    write(t, "payload-max-declared", frame(REQUEST_PS, size=64 * 1024))
    write(t, "unknown-type", frame(0x0003))
    write(t, "unknown-type-reply", frame(0x8004))
    write(t, "tag-zero", frame(REQUEST_INFO, field(0, b"\1\0\0\0")))
    write(t, "tag-unknown", frame(REQUEST_INFO, field(18, b"\1\0\0\0")))
    write(t, "tag-duplicate", frame(REQUEST_INFO, u32("PID", 1), u32("PID", 2)))
    write(t, "u32-wrong-size", frame(REQUEST_INFO, field(TAG["PID"], b"\1\0\0")))
    write(t, "u64-wrong-size", frame(REPLY_DONE, field(TAG["REQUEST_ID"], b"\1\0\0\0")))
    write(t, "string-nul", frame(REPLY_ERROR, string("MESSAGE", b"a\0b")))
    write(t, "string-invalid-utf8", frame(REPLY_ERROR, string("MESSAGE", b"\xc0\xaf")))
    write(t, "string-surrogate-utf8", frame(REPLY_ERROR, string("MESSAGE", b"\xed\xa0\x80")))
    write(t, "string-too-long", frame(REPLY_ERROR, string("MESSAGE", b"a" * (32 * 1024 + 1))))
    write(t, "string-max", frame(REPLY_ERROR, string("MESSAGE", b"a" * (32 * 1024))))
    write(t, "field-header-cut", frame(REQUEST_INFO, b"\x01\x00\x04"))
    write(t, "field-size-past-end", frame(REQUEST_INFO, struct.pack("<HI", 1, 100) + b"\1\0\0\0"))
    # the diagnostic-port proxy: a tool's IPC message out, bytes for the tool back (tag 37, any size)
    write(t, "request-ipc", frame(0x0009, u32("PID", 4242), field(37, ipc_message(0x04, 0x08, b""))))
    write(t, "reply-ipc", frame(0x8009, field(37, ipc_message(0xFF, 0x00, struct.pack("<I", 0)))))
    write(t, "reply-ipc-empty", frame(0x8009, field(37, b"")))


# --- --providers lists, and after a NUL a --profile list merged as dotnet-trace does (fuzz-providers.c) ---

def providers_seeds():
    t = "providers"
    # what stock dotnet-trace 10.0.750501 was given, as explain --as dotnet-trace takes it
    write(t, "stock-default", b"\0")
    write(t, "stock-profiles", b"\0dotnet-common,gc-collect")
    write(t, "stock-database", b"\0database")
    write(t, "stock-providers-and-profile", b"Dsagent-TestTarget,Microsoft-Windows-DotNETRuntime:0x1:5\0DOTNET-COMMON")
    write(t, "stock-not-collect", b"\0dotnet-sampled-thread-time,cpu-sampling")
    write(t, "stock-empty-name", b"A:0x1\0dotnet-common,,gc-verbose")


# --- /proc files (agent/targets/procfs.h); the first byte picks the parser -------------

# A real /proc/self/stat and the lines of a real /proc/self/status (Debian 12, 6.x kernel)
STAT = ("6670 (cat) R 6667 6667 3739 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 1 0 45737 3133440 359 "
        "18446744073709551615 94242251976704 94242251996585 140729855559072 0 0 0 0 0 0 0 0 0 17 1 0 0 "
        "0 0 0 94242252012592 94242252014208 94243076157440 140729855564250 140729855564270 "
        "140729855564270 140729855565803 0\n")

STATUS = """Name:\tcat
Umask:\t0022
State:\tR (running)
Tgid:\t6671
Ngid:\t0
Pid:\t6671
PPid:\t6667
TracerPid:\t0
Uid:\t0\t0\t0\t0
Gid:\t0\t0\t0\t0
FDSize:\t256
Groups:\t 
NStgid:\t6671
NSpid:\t6671
NSpgid:\t6667
NSsid:\t3739
Kthread:\t0
VmPeak:\t    3060 kB
VmSize:\t    3060 kB
VmRSS:\t    1704 kB
Threads:\t1
SigQ:\t0/96365
CapEff:\t000001fffeffffff
NoNewPrivs:\t0
Seccomp:\t0
Cpus_allowed_list:\t0-1
voluntary_ctxt_switches:\t0
nonvoluntary_ctxt_switches:\t0
"""


def stat_with(comm, start="45737", pid="6670"):
    rest = STAT.split(") ", 1)[1].split(" ")
    rest[19] = start  # field 22 is the 20th after ')'
    return pid + " (" + comm + ") " + " ".join(rest)


def status_with(**lines):
    out = STATUS
    for key, value in lines.items():
        old = next(l for l in STATUS.splitlines() if l.startswith(key + ":"))
        out = out.replace(old + "\n", "" if value is None else key + ":" + value + "\n")
    return out


def procfs():
    t = "procfs"
    write(t, "stat-real", "0" + STAT)
    write(t, "stat-comm-paren-space", "0" + stat_with("evil) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 0 0 999 x"))
    write(t, "stat-comm-spaces", "0" + stat_with("Orders Api ) (x"))
    write(t, "stat-comm-newline", "0" + stat_with("a\nb)"))
    write(t, "stat-comm-empty", "0" + stat_with(""))
    write(t, "stat-starttime-max", "0" + stat_with("dotnet", start="18446744073709551615"))
    write(t, "stat-starttime-overflow", "0" + stat_with("dotnet", start="18446744073709551616"))
    write(t, "stat-starttime-zero", "0" + stat_with("dotnet", start="0"))
    write(t, "stat-starttime-leading-zeros", "0" + stat_with("dotnet", start="000123"))
    write(t, "stat-starttime-garbage", "0" + stat_with("dotnet", start="45737x"))
    write(t, "stat-starttime-negative", "0" + stat_with("dotnet", start="-1"))
    write(t, "stat-truncated-at-starttime", "0" + STAT[:STAT.index(" 45737 ") + 7])
    write(t, "stat-truncated-before-starttime", "0" + STAT[:STAT.index(" 45737 ") + 1])
    write(t, "stat-no-newline", "0" + STAT.rstrip("\n").split(" 3133440")[0])
    write(t, "stat-double-space", "0" + STAT.replace(" R ", " R  ", 1))
    write(t, "stat-no-paren", "0" + STAT.replace(")", "]"))
    write(t, "stat-empty", "0")

    write(t, "status-real", "1" + STATUS)
    write(t, "status-container", "1" + status_with(NSpid="\t31337\t42\t1", Uid="\t1000\t1000\t1000\t1000",
                                                   Gid="\t100\t100\t100\t100"))
    write(t, "status-setuid", "1" + status_with(Uid="\t1000\t0\t0\t0", Gid="\t1000\t1000\t1000\t1000"))
    write(t, "status-max-ids", "1" + status_with(Uid="\t4294967295\t4294967295\t4294967295\t4294967295",
                                                 NSpid="\t2147483647"))
    write(t, "status-uid-overflow", "1" + status_with(Uid="\t4294967296\t0\t0\t0"))
    write(t, "status-uid-three", "1" + status_with(Uid="\t0\t0\t0"))
    write(t, "status-uid-five", "1" + status_with(Uid="\t0\t0\t0\t0\t0"))
    write(t, "status-uid-sign", "1" + status_with(Uid="\t-1\t0\t0\t0"))
    write(t, "status-uid-duplicate", "1" + STATUS + "Uid:\t1\t1\t1\t1\n")
    write(t, "status-no-nspid", "1" + status_with(NSpid=None))
    write(t, "status-no-uid", "1" + status_with(Uid=None))
    write(t, "status-nspid-zero", "1" + status_with(NSpid="\t0"))
    write(t, "status-nspid-big", "1" + status_with(NSpid="\t2147483648"))
    write(t, "status-nspid-32", "1" + status_with(NSpid="".join("\t%d" % (i + 1) for i in range(32))))
    write(t, "status-nspid-33", "1" + status_with(NSpid="".join("\t%d" % (i + 1) for i in range(33))))
    write(t, "status-nspid-empty", "1" + status_with(NSpid=""))
    write(t, "status-spaces", "1" + "Uid: 0 0 0 0\nGid: 0 0 0 0\nNSpid: 7")
    write(t, "status-crlf", "1" + "Uid:\t0\t0\t0\t0\r\nGid:\t0\t0\t0\t0\r\nNSpid:\t7\r\n")
    write(t, "status-name-forged", "1" + STATUS.replace("Name:\tcat", "Name:\tx\\nUid:\t0\t0\t0\t0"))
    # what a process with CAP_SETUID shows after setresuid(-1, -1, 0), and the Groups line
    write(t, "status-saved-root", "1" + status_with(Uid="\t987\t987\t0\t987", Gid="\t987\t987\t987\t987",
                                                    Groups="\t4 24 987 "))
    write(t, "status-groups-many", "1" + status_with(Groups="\t" + " ".join(str(g) for g in range(1, 302)) + " "))
    write(t, "status-groups-duplicate", "1" + STATUS + "Groups:\t0\n")
    write(t, "status-groups-garbage", "1" + status_with(Groups="\t4 x24"))
    write(t, "status-groups-overflow", "1" + status_with(Groups="\t4294967295"))

    write(t, "environ-typical", "2" + "PATH=/usr/local/bin:/usr/bin\0HOME=/home/app\0TMPDIR=/run/app/tmp\0"
          "DOTNET_EnableDiagnostics=1\0")
    write(t, "environ-no-tmpdir", "2" + "PATH=/usr/bin\0HOME=/\0LANG=C.UTF-8\0")
    write(t, "environ-twice", "2" + "TMPDIR=/first\0TMPDIR=/second\0")
    write(t, "environ-prefix-keys", "2" + "TMPDIRX=/no\0TMP=/tmp-var\0TMPDIR\0XTMPDIR=/no\0TMPDIR=/yes\0")
    write(t, "environ-empty-value", "2" + "TMPDIR=\0")
    write(t, "environ-unterminated", "2" + "A=1\0TMPDIR=/var/tmp")
    write(t, "environ-empty-entries", "2" + "\0\0TMPDIR=/x\0\0")
    write(t, "environ-equals-in-value", "2" + "TMPDIR==/a=b\0")
    write(t, "environ-binary-value", b"2TMPDIR=/tmp/\x1b[31m\xff\0")
    write(t, "environ-empty", "2")
    # the runtime's startup settings (procfs_environ_startup_suspend())
    write(t, "environ-suspend-default-port", "2" + "DOTNET_DefaultDiagnosticPortSuspend=1\0TMPDIR=/x\0")
    write(t, "environ-suspend-complus-hex", "2" + "COMPlus_DefaultDiagnosticPortSuspend=0x1f\0")
    write(t, "environ-suspend-ports", "2" + "DOTNET_DiagnosticPorts=/run/a.sock,nosuspend;,suspend;/run/b,LISTEN;"
          "/run/c,connect,suspend,nosuspend;;\0DOTNET_DefaultDiagnosticPortSuspend=100000000\0")
    write(t, "environ-suspend-ports-unterminated", "2" + "DOTNET_DiagnosticPorts=/run/a,")

    write(t, "cmdline-dotnet-dll", "3" + "/usr/share/dotnet/dotnet\0/srv/app/Orders.Api.dll\0--urls\0"
          "http://*:5000\0")
    write(t, "cmdline-apphost", "3" + "/srv/app/Orders.Api\0--environment\0Production\0")
    write(t, "cmdline-dotnet-relative", "3" + "dotnet\0Worker.dll\0")
    write(t, "cmdline-dotnet-exec", "3" + "dotnet\0exec\0app.dll\0")
    write(t, "cmdline-dotnet-only", "3" + "/usr/bin/dotnet\0")
    write(t, "cmdline-dotnet-dot-dll", "3" + "dotnet\0/x/.dll\0")
    write(t, "cmdline-dotnet-short-dll", "3" + "dotnet\0.dll\0")
    write(t, "cmdline-trailing-slash", "3" + "/srv/app/\0")
    write(t, "cmdline-leading-nul", "3" + "\0/srv/app/x\0")
    write(t, "cmdline-unterminated", "3" + "/srv/app/Orders.Api")
    write(t, "cmdline-setproctitle", "3" + "worker: processing queue orders (idle)")
    write(t, "cmdline-unicode", "3" + "/srv/app/Größe\0")
    write(t, "cmdline-control-chars", "3" + "/tmp/\x1b]0;pwned\x07\n\0")
    write(t, "cmdline-empty", "3")

    # /proc/PID/net/unix (selector '5'): the listening runtime sockets among a network namespace's sockets
    header = "Num       RefCount Protocol Flags    Type St Inode Path\n"
    write(t, "unix-listeners", "5" + header +
          "0000000000000000: 00000002 00000000 00010000 0001 01 20001 /tmp/dotnet-diagnostic-4242-987654-socket\n"
          "0000000000000000: 00000003 00000000 00000000 0001 03 20002 /tmp/dotnet-diagnostic-4343-1-socket\n"
          "0000000000000000: 00000002 00000000 00010000 0001 01 20004 /home/my dir/dotnet-diagnostic-7-8-socket\n"
          "0000000000000000: 00000002 00000000 00010000 0001 01 20005 @dotnet-diagnostic-9-10-socket\n"
          "0000000000000000: 00000002 00000000 00010000 0001 01 20008\n")
    write(t, "unix-hostile-names", "5" + header +
          "0000000000000000: 00000002 00000000 00010000 0001 01 1 /tmp/dotnet-diagnostic--1-socket\n"
          "0000000000000000: 00000002 00000000 00010000 0001 01 2 /tmp/dotnet-diagnostic-99999999999-1-socket\n"
          "0000000000000000: 00000002 00000000 00010000 0001 01 3 /tmp/dotnet-diagnostic-1-184467440737095516160-socket\n"
          "0000000000000000: 00000002 00000000 fffffffffffffffff 0001 01 4 /tmp/dotnet-diagnostic-1-2-socket\n"
          "0000000000000000: 00000002 00000000 00010000 0001 01 5 /tmp/dotnet-diagnostic-1-2-socket\ninjected\n")
    write(t, "unix-no-header", "5" + "0000000000000000: 00000002 00000000 00010000 0001 01 1 /x\n")

    # /proc/PID/cgroup (selector '4'): the unit (procfs_cgroup_unit()) and the container
    # (procfs_cgroup_container()); container ids are 64 lowercase hex, pod uids canonical UUIDs
    cid = "fcfe79830dc51fa91eb457b37217629989435997564dd17d8d75eee0753cc376"
    pod = "8d2a4c1e-5b3f-4e6a-9c7d-0f1e2d3c4b5a"
    write(t, "cgroup-v2", "4" + "0::/system.slice/orders.service\n")
    write(t, "cgroup-v1-user", "4" + "12:pids:/\n9:name=systemd:/user.slice/user-1000.slice/user@1000.service/"
          "app.slice/x.service\n0::/\n")
    write(t, "cgroup-slices-only", "4" + "0::/system.slice/a.slice/\n")
    # podman --cgroup-manager cgroupfs as the test machines run it (tests/containers/podman.py): hybrid
    write(t, "cgroup-podman-cgroupfs", "4" + "".join(
        f"{n}:{c}:/libpod_parent/libpod-{cid}\n" for n, c in (
            (9, "name=systemd"), (8, "pids"), (7, "blkio"), (6, "freezer"), (5, "devices"), (4, "memory"),
            (3, "cpuset"), (2, "cpuacct"), (1, "cpu"), (0, ""))))
    write(t, "cgroup-podman-systemd", "4" + f"0::/machine.slice/libpod-{cid}.scope/container\n")
    write(t, "cgroup-docker-legacy", "4" + f"12:memory:/docker/{cid}\n2:cpu,cpuacct:/docker/{cid}\n"
          f"1:name=systemd:/docker/{cid}\n0::/\n")
    write(t, "cgroup-kubepods-systemd", "4" + "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
          f"{pod.replace('-', '_')}.slice/cri-containerd-{cid}.scope\n")
    write(t, "cgroup-kubepods-cgroupfs", "4" + f"0::/kubepods/besteffort/pod{pod}/crio-{cid}\n")
    write(t, "cgroup-nested", "4" + f"0::/docker/{cid}/kubepods/pod{pod}/{cid[::-1]}\n")
    write(t, "cgroup-forged-line", "4" + f"5:pids:/x\n0::/docker/{cid}\n0::/system.slice/a.service\n")
    write(t, "cgroup-hostile-ids", "4" + f"0::/docker/{cid.upper()}/docker-{cid[1:]}.scope/kubepods-pod"
          f"{pod.upper()}.slice/crio-{cid}x.scope/../{cid}.scope")


# --- text helpers (common/text.h) ----------------------------------------------

def text():
    t = "text"
    write(t, "ascii", "Orders.Api")
    write(t, "empty", b"")
    write(t, "utf8", "Größe 日本語 \U0001F680 \uFEFF")
    write(t, "ansi-escape", "\x1b[31mred\x1b[0m\x1b]0;title\x07")
    write(t, "newline-forge", "ok\nMESSAGE=forged\r\n")
    write(t, "controls", bytes(range(0x00, 0x20)) + b"\x7f")
    write(t, "c1-controls", "".join(chr(c) for c in range(0x80, 0xA0)).encode())
    write(t, "c1-csi", b"\xc2\x9b31m")
    write(t, "backslash", "C:\\path\\x41\\\\")
    # bidi overrides, isolates, marks and zero widths: they reorder or hide what a terminal shows
    write(t, "format-controls", "invoice\u202etxt.exe \u2066iso\u2069 \u200e\u200b\u061c\ufeff\ufff9")
    write(t, "invalid-overlong", b"\xc0\xaf\xe0\x80\xaf\xf0\x80\x80\xaf")
    write(t, "invalid-surrogate", b"\xed\xa0\x80\xed\xbf\xbf")
    write(t, "invalid-too-big", b"\xf4\x90\x80\x80\xf5\x80\x80\x80\xff\xfe")
    write(t, "invalid-truncated", b"ab\xe2\x82")
    write(t, "invalid-lone-continuation", b"\x80\xbfx")
    write(t, "boundaries", "\u007e\u00a0\u07ff\u0800\ud7ff\ue000\uffff\U00010000\U0010ffff".encode())
    write(t, "nul-inside", b"a\0b")
    # as UTF-16LE units (utf16le_to_utf8): a pair, lone high and low surrogates, a pair
    # broken by a NUL, a reversed pair, and a high surrogate cut by the end
    write(t, "utf16-pair", struct.pack("<4H", ord("a"), 0xD83D, 0xDE00, ord("b")))
    write(t, "utf16-lone", struct.pack("<8H", 0xD800, ord("x"), 0xDC00, 0xD83D, 0, 0xDE00, 0xDE00, 0xD83D))
    write(t, "utf16-odd-length", struct.pack("<2H", ord("a"), 0xDBFF) + b"\xff")
    write(t, "number-zero", "0")
    write(t, "number-leading-zero", "007")
    write(t, "number-u64-max", "18446744073709551615")
    write(t, "number-u64-overflow", "18446744073709551616")
    write(t, "number-overflow-then-garbage", "99999999999999999999x")
    write(t, "number-pid-max", "2147483647")
    write(t, "number-pid-overflow", "2147483648")
    write(t, "number-negative", "-1")
    write(t, "number-plus", "+1")
    write(t, "number-space", " 1")
    write(t, "number-trailing", "12a")


# --- Prometheus names and text (client/counter-format.h) --------------------------

def prometheus():
    """A type byte (% 3: gauge, counter, summary), a counter's name (also the text), a NUL, its unit."""
    t = "prometheus"
    write(t, "plain", b"\x00dsagent.test.temperature\x00Cel")
    write(t, "counter-unit", b"\x01http.server.requests\x00{request}")
    write(t, "summary-ms", b"\x02dsagent.test.latency\x00ms")
    write(t, "no-unit", b"\x00CPU Usage (%)")
    write(t, "empty", b"\x00")
    write(t, "syntax", b'\x00a\\b"c\nd # HELP x y\n# TYPE x gauge\nx{a="b"} 1\x00By/s')
    write(t, "controls", b"\x00evil\x1b[2J\r\n\x7f\t\x01\xc2\x85\xc2\x9b31m\x00\x1b")
    write(t, "bidi", "\x00invoice\u202etxt.exe \u2066iso\u2069 \u200b\ufeff".encode())
    write(t, "invalid-utf8", b"\x01\xff\xfe\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80ab\xe2\x82\x00\xff")
    write(t, "leading-digit", b"\x002xx_total\x00MiBy")
    write(t, "only-symbols", b"\x01...---...\x00%")
    write(t, "escapes-as-text", b"\x00\\x41\\u202e\\n\\\"")


# --- durations (common/duration.h) ----------------------------------------------

def duration():
    t = "duration"
    write(t, "bare", "90")
    write(t, "zero", "0")
    write(t, "units", "1d2h3m4s5ms")
    write(t, "any-order", "30m1h1m")
    write(t, "leading-zero", "1h05m")
    write(t, "number-after-unit", "1h30")
    write(t, "ms-prefix", "5mss")
    write(t, "sign", "-5m")
    write(t, "space", "5m ")
    write(t, "empty", b"")
    write(t, "max-days", "213503982d")
    write(t, "wraps-days", "213503983d")
    write(t, "wraps-minutes", "307445734562m")
    write(t, "sum-overflows", "213503982d213503982d")
    write(t, "digits-overflow-then-junk", "99999999999999999999999999x")


# --- nettrace streams (eventpipe/nettrace.h); the first byte picks the chunking ---

DATA = os.path.join(HERE, "..", "data", "nettrace")


def nt_object_type(name, version):
    # BeginPrivateObject (object), BeginPrivateObject (type), NullReference,
    # version, minimum reader version, name length, name, EndObject
    return b"\x05\x05\x01" + struct.pack("<III", version, version, len(name)) + name + b"\x06"


def nt_utf16z(text):
    return (text + "\0").encode("utf-16-le")


def nt_start(pid=4242):
    trace = struct.pack("<8H", 2026, 1, 1, 1, 0, 0, 0, 0) + struct.pack("<qqIIII", 0, 10**9, 8, pid, 2, 10**6)
    return b"Nettrace" + struct.pack("<I", 20) + b"!FastSerialization.1" + nt_object_type(b"Trace", 4) + trace + b"\x06"


def nt_block(stream, name, body):
    out = nt_object_type(name, 2) + struct.pack("<I", len(body))
    out += b"\0" * (-(len(stream) + len(out)) % 4)  # padding to a 4-byte file offset
    return out + body + b"\x06"


def nt_v2_field(name, type_code, element=None, nested=b""):
    body = nt_utf16z(name) + struct.pack("<I", type_code)
    if element is not None:
        body += struct.pack("<I", element)
    body += nested
    return struct.pack("<I", 4 + len(body)) + body


def nt_v2_metadata():
    """Definition 5 with an empty V1 list and a V2Params tag: an int32 and an
    array of structs { double d; string s }, which real captures do not have."""
    element = struct.pack("<I", 2) + nt_v2_field("d", 14) + nt_v2_field("s", 18)
    fields = struct.pack("<I", 2) + nt_v2_field("n", 9) + nt_v2_field("items", 19, 1, element)
    head = struct.pack("<I", 5) + nt_utf16z("Seed-Provider") + struct.pack("<I", 1) + nt_utf16z("Arrays")
    head += struct.pack("<QII", 0, 1, 4) + struct.pack("<I", 0)
    return head + struct.pack("<IB", len(fields), 2) + fields + struct.pack("<IBB", 1, 1, 7)


def nt_v2_stream():
    # MetadataBlock and EventBlock with header compression (flags 1)
    header = struct.pack("<HHqq", 20, 1, 0, 0)
    meta = nt_v2_metadata()
    meta_blob = bytes([0x80]) + b"\x00" + bytes([len(meta) & 0x7F | 0x80, len(meta) >> 7])
    payload = struct.pack("<iH", 3, 2) + struct.pack("<d", 1.5) + nt_utf16z("a") + struct.pack("<d", -2) + nt_utf16z("")
    event = bytes([0x01 | 0x02 | 0x80, 5, 0, 42, 0, 1, len(payload)]) + payload
    stream = nt_start()
    stream += nt_block(stream, b"MetadataBlock", header + meta_blob + meta)
    stream += nt_block(stream, b"EventBlock", header + event)
    return stream + b"\x01"


def nt_stacks_stream(odd_stack=False):
    """Samples whose stacks come in StackBlocks: ids 1 and 2 (an empty one), a sequence point that
    numbers them anew, then id 1 again and an event naming id 3, which no block defined. With
    odd_stack, a stack whose size is no multiple of the pointer size (8)."""
    header = struct.pack("<HHqq", 20, 1, 0, 0)
    meta = struct.pack("<I", 1) + nt_utf16z("Microsoft-DotNETCore-SampleProfiler") + struct.pack("<I", 0)
    meta += nt_utf16z("ThreadSample") + struct.pack("<QII", 0, 0, 4) + struct.pack("<I", 0)
    meta_blob = bytes([0x80]) + b"\x00" + bytes([len(meta) & 0x7F | 0x80, len(meta) >> 7])

    def stacks(first, *ips_lists):
        body = struct.pack("<II", first, len(ips_lists))
        for ips in ips_lists:
            raw = b"".join(struct.pack("<Q", ip) for ip in ips)
            body += struct.pack("<I", len(raw)) + raw
        return body

    def sample(stack_id):
        # metadata id, sequence/capture thread/processor, thread, stack id, timestamp, payload size
        return bytes([0x01 | 0x02 | 0x04 | 0x08 | 0x80, 1, 0, 42, 0, 7, stack_id, 1, 4]) + struct.pack("<I", 1)

    stream = nt_start()
    stream += nt_block(stream, b"MetadataBlock", header + meta_blob + meta)
    first = stacks(1, [0x7F0000001000, 0x7F0000002000], [])
    if odd_stack:
        first += struct.pack("<I", 12) + b"\x11" * 12
        first = struct.pack("<II", 1, 3) + first[8:]
    stream += nt_block(stream, b"StackBlock", first)
    stream += nt_block(stream, b"EventBlock", header + sample(1) + sample(2))
    stream += nt_block(stream, b"SPBlock", struct.pack("<QI", 5, 0))
    stream += nt_block(stream, b"StackBlock", stacks(1, [0x7F0000003000]))
    stream += nt_block(stream, b"EventBlock", header + sample(1) + sample(3))
    return stream + b"\x01"


def nt_captures(t, names, whole, truncated):
    """Each capture whole, and its first two thirds, behind the chunking bytes given."""
    for name in names:
        with open(os.path.join(DATA, name + ".nettrace"), "rb") as f:
            data = f.read()
        write(t, name, whole + data)
        write(t, name + "-truncated", truncated + data[: len(data) * 2 // 3])


def nettrace():
    t = "nettrace"
    nt_captures(t, ("eventsource", "eventcounters", "metrics", "rundown"), b"\x00", b"\x07")
    with open(os.path.join(DATA, "eventcounters.nettrace"), "rb") as f:
        counters = f.read()
    # the first block's size claims more than the limit
    write(t, "block-too-large", b"\x00" + counters[:131] + struct.pack("<I", (1 << 20) + 1) + counters[135:400])
    write(t, "v2-params-arrays", b"\x03" + nt_v2_stream())
    write(t, "v6-header", b"\x00Nettrace" + struct.pack("<III", 0, 6, 0))
    write(t, "empty-trace", b"\x00" + nt_start() + b"\x01")
    write(t, "trailing-byte", b"\x00" + nt_start() + b"\x01\x01")
    # dsctl stacks, exceptions and logs: the first byte's bit 0x40 has the parser keep stacks
    nt_captures(t, ("exceptions", "logs"), b"\x40", b"\x47")
    with open(os.path.join(DATA, "stacks.nettrace"), "rb") as f:
        data = f.read()
    # its samples, stacks and the start of the rundown: the whole capture is half a megabyte
    write(t, "stacks-head", b"\x45" + data[:65536])
    write(t, "stacks-hand-made", b"\x40" + nt_stacks_stream())
    write(t, "stacks-hand-made-plain", b"\x00" + nt_stacks_stream())
    write(t, "stacks-odd-size", b"\x41" + nt_stacks_stream(odd_stack=True))


# --- /proc/PID/mountinfo (proc(5)): "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE
# SUPEROPTIONS", one mount a line; the kernel writes space, tab, newline and backslash in names as \ooo.

MOUNTINFO_HOST = (
    "22 27 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
    "23 27 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw\n"
    "24 27 0:5 / /dev rw,nosuid,relatime shared:8 - devtmpfs udev rw,size=4017144k,mode=755\n"
    "27 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro\n"
    "28 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw\n"
    "29 27 0:27 / /run rw,nosuid,nodev,noexec,relatime shared:5 - tmpfs tmpfs rw,size=804380k,mode=755\n"
    "30 27 0:28 / /tmp rw,nosuid,nodev shared:6 - tmpfs tmpfs rw,size=4021876k\n"
    "31 29 0:29 / /run/user/1000 rw,nosuid,nodev,relatime shared:7 - tmpfs tmpfs rw,size=804376k,mode=700,uid=1000\n"
    "32 27 0:30 / /proc/sys/fs/binfmt_misc rw,relatime shared:9 - autofs systemd-1 rw,fd=29,pgrp=1\n"
)


def mountinfo():
    t = "mountinfo"
    write(t, "host", MOUNTINFO_HOST)
    # PrivateTmp= and a container: an overlay root, its own /tmp, a volume, a FUSE mount made in a user namespace
    write(t, "container",
          "900 899 0:70 / / rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w\n"
          "901 900 0:71 / /proc rw,nosuid,nodev,noexec - proc proc rw\n"
          "902 900 0:72 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755\n"
          "903 900 0:73 / /tmp rw - tmpfs tmpfs rw,size=1024k,uid=1000\n"
          "904 900 254:0 /var/lib/kubelet/pods/abc/volumes /data rw - ext4 /dev/vda rw\n"
          "905 903 0:74 / /tmp/fuse rw,nosuid,nodev - fuse fuse rw,user_id=0,group_id=0,allow_other\n")
    # names with every escaped byte, two mounts on one point, an empty source, network file systems
    write(t, "escapes",
          "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
          "60 27 0:50 / /tmp rw,nosuid shared:7 master:3 - tmpfs tmpfs rw,size=1024k\n"
          "61 60 0:51 / /tmp/my\\040dir\\011tab\\012nl\\134bs rw - fuse.sshfs user@host: rw,user_id=1000\n"
          "62 60 0:52 / /tmp/share rw - nfs4 server:/export rw\n"
          "63 27 0:53 /sub /tmp rw - tmpfs  rw\n")
    write(t, "cut-off", "27 1 254:0 / / rw - ext4 /dev/vda rw")
    write(t, "bad-escape", "27 1 254:0 / /a\\9zz rw - ext4 /dev/vda rw\n")
    write(t, "empty", "")


# --- ELF core files (elf(5)): the header, the program header table, then the segments' bytes ----------


def elf_core(n_segments=2, cls=64, big_endian=False, e_type=4, cut=0, xnum=False):
    e = ">" if big_endian else "<"
    ident = b"\x7fELF" + bytes([2 if cls == 64 else 1, 2 if big_endian else 1, 1]) + bytes(9)
    ehsize, phentsize, shentsize = (64, 56, 64) if cls == 64 else (52, 32, 40)
    data_at = ehsize + n_segments * phentsize
    phnum = 0xFFFF if xnum else n_segments
    shoff = data_at + 16 * n_segments if xnum else 0
    if cls == 64:
        header = ident + struct.pack(e + "HHIQQQIHHHHHH", e_type, 62, 1, 0, ehsize, shoff, 0, ehsize, phentsize,
                                     phnum, shentsize if xnum else 0, 1 if xnum else 0, 0)
        phdrs = b"".join(struct.pack(e + "IIQQQQQQ", 1, 4, data_at + 16 * i, 0, 0, 16, 16, 1)
                         for i in range(n_segments))
        sh0 = struct.pack(e + "IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, n_segments, 0, 0) if xnum else b""
    else:
        header = ident + struct.pack(e + "HHIIIIIHHHHHH", e_type, 40, 1, 0, ehsize, shoff, 0, ehsize, phentsize,
                                     phnum, shentsize if xnum else 0, 1 if xnum else 0, 0)
        phdrs = b"".join(struct.pack(e + "IIIIIIII", 1, data_at + 16 * i, 0, 0, 16, 16, 4, 1)
                         for i in range(n_segments))
        sh0 = struct.pack(e + "IIIIIIIIII", 0, 0, 0, 0, 0, 0, 0, n_segments, 0, 0) if xnum else b""
    whole = header + phdrs + bytes(range(16)) * n_segments + sh0
    return whole[:len(whole) - cut]


def small_heap_session():
    """A made-up heap session of every event gcdump-heap reads, a few values each: small, so the fuzzer
    mutates the events rather than the real capture's hundreds of KiB."""
    sys.path.insert(0, os.path.join(HERE, "..", "integration"))
    import nettrace_writer as nw

    ids = {"start": 1, "end": 2, "type": 15, "root": 16, "cwt": 17, "node": 18, "edge": 19, "static": 38,
           "module": 152}
    metas = [nw.metadata(i + 1, nw.RUNTIME, event_id, name) for i, (name, event_id) in enumerate(ids.items())]
    mid = {name: i + 1 for i, name in enumerate(ids)}
    head = struct.pack("<IIH", 0, 2, 0)  # Index, Count 2, ClrInstanceID
    module = struct.pack("<QQII", 0xA0, 0x77, 0, 0)
    payloads = [
        # before any GCStart: not taken (dotnet-gcdump convert does not know the process yet)
        ("module", module + nw.utf16z("/early/Wrong.dll") + nw.utf16z("")),
        ("start", struct.pack("<IIIIH", 9, 2, 1, 0, 0)),
        ("module", module + nw.utf16z("/x/System.Private.CoreLib.dll") + nw.utf16z("")),
        ("type", struct.pack("<IH", 2, 0) +
         struct.pack("<QQIIB", 0x100, 0xA0, 1, 0, 0x12) + nw.utf16z("List`1[System.Int32]") + struct.pack("<IQ", 1, 8) +
         struct.pack("<QQIIB", 0x200, 0xA0, 2, 8, 0x1D) + nw.utf16z("") + struct.pack("<I", 0)),
        ("node", head + struct.pack("<QQQQ", 0x1000, 32, 0x100, 2) + struct.pack("<QQQQ", 0x2000, 5000, 0x999, 0)),
        ("edge", head + struct.pack("<QI", 0x2000, 1) + struct.pack("<QI", 0x3000, 2)),
        ("root", head + struct.pack("<QBIQ", 0x1000, 0, 0, 0) + struct.pack("<QBIQ", 0x2000, 2, 1, 0)),
        ("cwt", head + struct.pack("<QQQ", 0x1000, 0x2000, 0) + struct.pack("<QQQ", 0, 0x3000, 0)),
        ("static", struct.pack("<IQH", 1, 1, 0) + struct.pack("<QQQI", 0x10, 0x1000, 0x100, 1) + nw.utf16z("Cache")),
        ("end", struct.pack("<IIH", 9, 2, 0)),
    ]
    stream = nw.Stream()
    stream.metadata(*metas)
    stream.events([nw.event(metadata_id=mid[name], thread=1, payload=p) for name, p in payloads])
    return stream.end()


def gcdump():
    """dsctl gcdump's heap session (eventpipe/gcdump-heap.h): the real one, whole and cut short, and a small one."""
    t = "gcdump"
    with open(os.path.join(DATA, "gcdump.nettrace"), "rb") as f:
        data = f.read()
    write(t, "heap-session", data)
    write(t, "heap-session-two-thirds", data[: len(data) * 2 // 3])
    write(t, "heap-session-third", data[: len(data) // 3])
    write(t, "small-heap-session", small_heap_session())


def elf_core_seeds():
    t = "elf-core"
    write(t, "core64", elf_core())
    write(t, "core64-cut", elf_core(cut=5))
    write(t, "core64-xnum", elf_core(n_segments=3, xnum=True))
    write(t, "core32-big-endian", elf_core(cls=32, big_endian=True))
    write(t, "exec-not-core", elf_core(e_type=2))
    write(t, "not-elf", b"#!/bin/sh\necho not a core\n")


def policy():
    t = "policy"
    with open(os.path.join(HERE, "..", "..", "policy", "examples", "policy.toml"), "rb") as f:
        write(t, "example", f.read())
    counter = (b'[[collect]]\nname = "queue-backlog"\ntargets.users = ["svc"]\n'
               b'when.counter = "Bars.Target:bars-queue-depth[queue=bars-q2,region=eu]"\n'
               b'when.above = 300\nwhen.for = "2s"\nthen.dump = "mini"\nreaders = ["group:ops"]\nlimit = "1/1h"\n')
    exception = (b'[[collect]]\nname = "marker-exceptions"\ntargets.any = true\n'
                 b'when.exception = "BarsMarkerException"\nwhen.count = 2\nwhen.within = "10s"\n'
                 b'then.stacks = true\nreaders = []\n')
    trace = (b'[agent]\nmax_session_duration = "1m"\n[[collect]]\nname = "low"\ntargets.units = ["a.service"]\n'
             b'when.counter = "System.Runtime:threadpool-thread-count"\nwhen.below = 2\n'
             b'then.trace_profile = "cpu-sampling"\nthen.duration = "30s"\n')
    write(t, "collect-counter", counter + b"\0Bars.Target\nbars-queue-depth\nregion:eu, queue:bars-q2\nX")
    write(t, "collect-exception", exception + b"\0A\nb\n\nBars.Target.Outer+BarsMarkerException")
    write(t, "collect-trace", trace)
    write(t, "collect-both-triggers", counter.replace(b"when.above", b'when.exception = "E"\nwhen.above'))
    write(t, "collect-bad-tags", counter.replace(b"region=eu]", b"region=eu,]"))
    write(t, "collect-unknown-key", exception + b'then.upload = "s3"\n')
    write(t, "collect-many", counter + exception + trace.split(b"\n", 2)[2] + counter)
    # [egress.NAME] (docs/egress-plan.md): every key, a rule's and a table's names resolved across the document,
    # and the refusals of each check (endpoint, loopback, sizes, credentials, a name that is no store)
    egress = (b'[egress.central]\nendpoint = "https://s3.eu-west-1.example.net:8443"\nbucket = "dotnet-diagnostics"\n'
              b'region = "eu-west-1"\nprefix = "prod/node-7/"\npath_style = false\nca_file = "/etc/ssl/ca.pem"\n'
              b'credentials = "file:/etc/dsagent/egress/central.credentials"\npart_size = "16M"\nattempts = 5\n'
              b'timeout = "30m"\nmin_speed = "64K"\nkeep_local = false\nverify = "read-back"\nurl_max_age = "15m"\n'
              b'[egress.local]\nendpoint = "http://[::1]:7480"\nbucket = "b-1.x"\nregion = "us-east-1"\n'
              b'credentials = "systemd:s3-local"\n')
    rule = (b'[[rule]]\nname = "ops"\ngroups = ["ops"]\ncommands = ["dump", "trace"]\ndump_types = ["full"]\n'
            b'trace_profiles = ["cpu-sampling"]\ntargets.any = true\negress = "central"\n')
    write(t, "egress", egress + rule + exception + b'then.egress = "local"\n')
    write(t, "egress-http-not-loopback", egress.replace(b"http://[::1]:7480", b"http://s3.example.net"))
    write(t, "egress-bad-values", egress.replace(b'"16M"', b'"4M"').replace(b"prod/", b"../").replace(
        b"file:/etc", b"AKIA:secret").replace(b"b-1.x", b"B"))
    write(t, "egress-missing-store", rule.replace(b'"central"', b'"nowhere"') + egress)
    write(t, "egress-secret-key", egress + b'secret_access_key = "x"\n')


# --- S3 egress (agent/egress): object keys, presigned URLs, the keys file --------------------------------------

def egress_name_input(pid=4711, usec=1764419696_000000, fields=("prod/", "node-7", "orders.service", "", "dump",
                                                                "Orders.Api", "9f2c41aa", "dmp")):
    """fuzz-egress-name.c: u32 pid, u64 microseconds (little endian), then NUL-separated fields: prefix, host,
    unit, container, type, process, request id, extension."""
    return struct.pack("<IQ", pid, usec) + b"\0".join(f.encode() if isinstance(f, str) else f for f in fields)


def egress_name():
    t = "egress-name"
    write(t, "plain", egress_name_input())
    write(t, "container", egress_name_input(fields=("", "node-7", "", "3f2a9c01b7de", "trace", "dotnet",
                                                     "0001", "nettrace")))
    write(t, "no-scope", egress_name_input(fields=("a/b/", "h", "", "", "gcdump", "p", "r", "gcdump")))
    # the process's owner chooses its name: climbing out, dots, control bytes, UTF-8, longer than a part
    for name, process in (("climb", b"../../etc/passwd"), ("dot", b"."), ("dotdot", b".."), ("slash", b"/"),
                          ("control", b"a\x01\x1b[31mb\r\nc"), ("utf8", "Zähler-✓".encode()),
                          ("long", b"P" * 80), ("dots-long", b"." * 70), ("empty", b"")):
        write(t, "process-" + name, egress_name_input(fields=(b"", b"node", b"x.service", b"", b"dump", process,
                                                               b"id", b"dmp")))
    write(t, "unit-hostile", egress_name_input(fields=("", "..", "../x.service", "", "dump", "p", "id", "dmp")))
    write(t, "prefix-bad", egress_name_input(fields=("../", "h", "", "", "dump", "p", "id", "dmp")))
    write(t, "prefix-no-slash", egress_name_input(fields=("prod", "h", "", "", "dump", "p", "id", "dmp")))
    write(t, "prefix-long", egress_name_input(fields=("a" * 1000 + "/", "h", "", "", "dump", "p", "id", "dmp")))
    write(t, "missing-type", egress_name_input(fields=("", "h", "", "", "", "p", "id", "dmp")))
    write(t, "missing-fields", egress_name_input(fields=("", "h")))
    write(t, "far-future", egress_name_input(usec=0xFFFFFFFFFFFFFFFF))
    write(t, "epoch", egress_name_input(usec=0, pid=0xFFFFFFFF))


def s3_presign_input(flags=1, now=1369353600, expires=86400, fields=(
        "https://s3.amazonaws.com", "examplebucket", "test.txt", "us-east-1", "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "")):
    """fuzz-s3-presign.c: flags (bit 0 path style, bit 1 a session token), i64 seconds, u32 expiry, then
    NUL-separated fields: endpoint, bucket, key, region, access key id, secret key, session token."""
    return struct.pack("<BqI", flags, now, expires) + b"\0".join(
        f.encode() if isinstance(f, str) else f for f in fields)


def s3_presign():
    t = "s3-presign"
    names = ("endpoint", "bucket", "key", "region", "access", "secret", "token")
    aws = ["https://s3.amazonaws.com", "examplebucket", "test.txt", "us-east-1", "AKIAIOSFODNN7EXAMPLE",
           "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""]

    def with_(**kw):
        return [kw.get(name, aws[i]) for i, name in enumerate(names)]

    write(t, "aws-example-virtual-host", s3_presign_input(flags=0, fields=with_()))
    write(t, "path-style-port", s3_presign_input(fields=with_(endpoint="http://127.0.0.1:7480/",
                                                              key="prod/node-7/x.service/dump/2026/11/29/a-1.dmp")))
    write(t, "ipv6", s3_presign_input(fields=with_(endpoint="http://[::1]:7480")))
    write(t, "session-token", s3_presign_input(flags=3, fields=with_(token="FwoGZXIvYXdzEJr//////////wEaDE+/=x")))
    write(t, "key-hostile", s3_presign_input(fields=with_(key=b"a b/\x7fc%41")))
    write(t, "key-bytes", s3_presign_input(fields=with_(key=bytes(range(1, 256)))))
    write(t, "key-dot-segments", s3_presign_input(fields=with_(key="a/../../b")))
    write(t, "key-dot", s3_presign_input(fields=with_(key="./x")))
    write(t, "bucket-in-host", s3_presign_input(flags=0, fields=with_(bucket="evil.com/x?y#")))
    write(t, "bucket-dotdot", s3_presign_input(fields=with_(bucket="..")))
    write(t, "endpoint-user", s3_presign_input(fields=with_(endpoint="https://user@host")))
    write(t, "endpoint-space", s3_presign_input(fields=with_(endpoint="https://host name\r\n")))
    write(t, "endpoint-path", s3_presign_input(fields=with_(endpoint="https://host/path")))
    write(t, "endpoint-scheme", s3_presign_input(fields=with_(endpoint="ftp://host")))
    write(t, "region-hostile", s3_presign_input(fields=with_(region="us/east&1=2")))
    write(t, "access-hostile", s3_presign_input(fields=with_(access="AKIA/&=?#x")))
    write(t, "secret-in-key", s3_presign_input(fields=with_(key="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")))
    write(t, "secret-empty", s3_presign_input(fields=with_(secret="")))
    write(t, "expiry-zero", s3_presign_input(expires=0))
    write(t, "expiry-too-long", s3_presign_input(expires=604801))
    write(t, "year-10000", s3_presign_input(now=253402300800))
    write(t, "before-1970", s3_presign_input(now=-1))
    write(t, "fields-missing", s3_presign_input(fields=("https://h",)))


def egress_credentials():
    t = "egress-credentials"
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    keys = 'access_key_id = "AKIAIOSFODNN7EXAMPLE"\nsecret_access_key = "%s"\n' % secret
    write(t, "keys", keys)
    write(t, "token", keys + 'session_token = "FwoGZXIvYXdzEJr//////////wEaDE+/="\n')
    write(t, "literal-strings", "# a comment\naccess_key_id = 'A'\nsecret_access_key = \"\"\"%s\"\"\"\n" % secret)
    write(t, "not-toml", "AKIAIOSFODNN7EXAMPLE:%s\n" % secret)
    write(t, "secret-as-key-name", keys + "%s = 1\n" % secret.replace("/", "_"))
    write(t, "unknown-key", keys + 'region = "x"\n')
    write(t, "missing-secret", 'access_key_id = "A"\n')
    write(t, "missing-key-id", 'secret_access_key = "%s"\n' % secret)
    write(t, "value-space", 'access_key_id = "A"\nsecret_access_key = "has space"\n')
    write(t, "value-empty", 'access_key_id = "A"\nsecret_access_key = ""\n')
    write(t, "value-integer", 'access_key_id = 1\nsecret_access_key = "%s"\n' % secret)
    write(t, "value-nul", 'access_key_id = "A\\u0000B"\nsecret_access_key = "%s"\n' % secret)
    write(t, "value-utf8", 'access_key_id = "A"\nsecret_access_key = "\\u00e9%s"\n' % secret)
    write(t, "value-long", 'access_key_id = "A"\nsecret_access_key = "%s"\n' % ("S" * 300))
    write(t, "table", keys + '[nested]\nsecret_access_key = "%s"\n' % secret)
    write(t, "dotted", 'access_key_id = "A"\nsecret_access_key.x = "%s"\n' % secret)
    write(t, "duplicate", keys + 'access_key_id = "B"\n')
    write(t, "array", 'access_key_id = ["%s"]\nsecret_access_key = "%s"\n' % (secret, secret))


def main():
    for fn in (dotnet_ipc, ipc_request, wire, procfs, mountinfo, elf_core_seeds, text, duration, nettrace, gcdump,
               environment, advertise, cgroup_pattern, env_secret, prometheus,
               policy, providers_seeds, egress_name, s3_presign, egress_credentials):
        fn()
    return 0


if __name__ == "__main__":
    sys.exit(main())
