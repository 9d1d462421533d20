#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The SELinux guest: Debian 12 booted enforcing under qemu, with dsagent's module loaded.

No SELinux is needed in the host's kernel, nor KVM: the guest runs under KVM where KVM really runs
it (kvm_boots), and is fully emulated (TCG) where it does not (then a run takes 6 to 14 minutes on
a loaded 2-core host).

  base     tests/selinux/image.sh: mmdebstrap from Debian's packages, built once and cached
           under $DSAGENT_TEST_CACHE/selinux (/var/cache/dsagent-tests) by the hash of the script.
  root     the base with selinux/dsagent.pp installed into its policy store (semodule -n -p) and
           every file labelled (setfiles -r), packed into a raw ext4 image without a mount
           (mkfs.ext4 -d); cached by the base and the module's hash.
  run      a throwaway qcow2 overlay of the root; a payload disk (ext4, read-only) with the
           project's build installed into a staging root (meson install --destdir), the host's
           .NET runtime, the test app, the stock dotnet-trace, the policy and the suite
           (guest-suite.sh, run as run.sh); a results disk the guest writes a tar onto before it
           powers off. The overlay's audit.log comes back in that tar.

Run by hand: python3 tests/selinux/guest.py [RESULTS_DIR]; it prints where the results are.
"""
import glob
import hashlib
import inspect
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.realpath(os.environ.get("DSAGENT_SOURCE_DIR", os.path.join(HERE, "../..")))
CACHE = os.path.join(os.environ.get("DSAGENT_TEST_CACHE", "/var/cache/dsagent-tests"), "selinux")
MAKEFILE = "/usr/share/selinux/devel/Makefile"
# the guest's whole run, boot to power-off: a bound against a hang, some four times the 4 to 5 minutes it takes
# under emulation (TCG) on a loaded 2-core machine, and far more than it takes under KVM
BOOT_TIMEOUT = int(os.environ.get("DSAGENT_GUEST_TIMEOUT", "1200"))
# a verdict, not a failure: past it the host is taken to have no working KVM and the guest is emulated. A second
# or two where KVM works, fifteen times that to spare for a loaded machine (kvm_boots())
KVM_PROBE_TIMEOUT = 30


class GuestError(Exception):
    """The guest could not be built or booted; the message says why."""


def sh(argv, **kwargs):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    if r.returncode != 0:
        raise GuestError(f"{' '.join(map(str, argv))} exited {r.returncode}:\n{r.stdout[-4000:]}")
    return r.stdout


def sha(path, n=16):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:n]


def preflight():
    """Everything the guest needs on the host, or GuestError naming what is missing."""
    missing = [p for p in ("qemu-system-x86_64", "qemu-img", "debootstrap", "mkfs.ext4", "semodule",
                           "setfiles", "make", "debugfs") if not shutil.which(p)]
    if not os.path.exists(MAKEFILE):
        missing.append(MAKEFILE + " (selinux-policy-dev)")
    if missing:
        raise GuestError("missing on this host (scripts/install-deps.sh installs them): " + ", ".join(missing))
    if os.geteuid() != 0:
        raise GuestError("the guest's image is built as root (debootstrap, labels)")


def base_image():
    """The cached base: (directory with root.tar, vmlinuz, initrd.img, its key)."""
    out = sh([os.path.join(HERE, "image.sh"), CACHE]).strip().splitlines()[-1]
    return out, os.path.basename(out).removeprefix("base-")


def build_modules(work):
    """dsagent.pp; with DSAGENT_GUEST_PERMISSIVE=1 also a module making dsagent_t permissive, which
    has the guest log every denial of a run rather than stop at the first (for fixing the module)."""
    for name in ("dsagent.te", "dsagent.if", "dsagent.fc"):
        shutil.copy(os.path.join(SOURCE, "selinux", name), work)
    modules = ["dsagent.pp"]
    if os.environ.get("DSAGENT_GUEST_PERMISSIVE") == "1":
        with open(os.path.join(work, "dsagent_permissive.te"), "w") as f:
            f.write("policy_module(dsagent_permissive, 1.0)\ngen_require(`type dsagent_t;')\npermissive dsagent_t;\n")
        modules.append("dsagent_permissive.pp")
    sh(["make", "-f", MAKEFILE, *modules], cwd=work)
    return [os.path.join(work, m) for m in modules]


def root_image(base, base_key, modules):
    """The base with @modules loaded and everything labelled, as a raw ext4 image (cached)."""
    recipe = inspect.getsource(root_image)
    key = hashlib.sha256((recipe + "".join(sha(m) for m in modules)).encode()).hexdigest()[:16]
    path = os.path.join(CACHE, f"root-{base_key}-{key}.img")
    if os.path.exists(path):
        return path
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="dsagent-selinux-root.") as work:
        root = os.path.join(work, "root")
        os.mkdir(root)
        sh(["tar", "--numeric-owner", "--xattrs", "-C", root, "-xf", os.path.join(base, "root.tar")])
        os.makedirs(os.path.join(root, "lost+found"), exist_ok=True)
        sh(["semodule", "-n", "-p", root, "-s", "default", *[a for m in modules for a in ("-i", m)]])
        sh(["setfiles", "-F", "-r", root, os.path.join(root, "etc/selinux/default/contexts/files/file_contexts"),
            root])
        tmp = path + ".new"
        sh(["truncate", "-s", "4G", tmp])
        sh(["mkfs.ext4", "-q", "-F", "-L", "root", "-d", root, tmp])
        # mkfs.ext4 -d copies the tree's contents, not the labels of the file system's own root
        # and lost+found, which it makes itself: unlabelled, every domain would be kept off /
        for d in ("/", "/lost+found"):
            label = os.getxattr(root + d, "security.selinux").rstrip(b"\0").decode()
            sh(["debugfs", "-w", "-R", f"ea_set {d} security.selinux {label}", tmp])
        os.rename(tmp, path)
    # roots of earlier modules on this base are not kept
    for old in glob.glob(os.path.join(CACHE, f"root-{base_key}-*.img")):
        if old != path:
            os.unlink(old)
    return path


def guest_build(work):
    """The project built as the package builds it, installed into a staging root."""
    build = os.environ.get("DSAGENT_GUEST_BUILD_DIR") or os.path.join(
        os.environ.get("DSAGENT_BUILD_DIR", os.path.join(SOURCE, "build")), "selinux-guest-build")
    if not os.path.exists(os.path.join(build, "build.ninja")):
        sh(["meson", "setup", "-Dtest_hooks=false", "--prefix=/usr", "--sysconfdir=/etc", "--localstatedir=/var",
            build, SOURCE])
    sh(["ninja", "-C", build])
    stage = os.path.join(work, "stage")
    sh(["meson", "install", "-C", build, "--destdir", stage, "--quiet"], env={**os.environ, "DESTDIR": stage})
    return stage


def dotnet_root():
    dotnet = os.path.realpath(shutil.which("dotnet") or "/usr/share/dotnet/dotnet")
    return os.path.dirname(dotnet)


def payload_image(work):
    """The payload disk: build, runtime, app, tools, policy, suite."""
    p = os.path.join(work, "payload")
    os.makedirs(p)
    shutil.copy(os.path.join(HERE, "guest-suite.sh"), os.path.join(p, "run.sh"))
    shutil.copy(os.path.join(HERE, "guest-policy.toml"), os.path.join(p, "policy.toml"))
    shutil.copy(os.path.join(HERE, "connect.py"), os.path.join(p, "connect.py"))
    shutil.copy(os.path.join(HERE, "egress-store.py"), os.path.join(p, "egress-store.py"))
    shutil.move(guest_build(work), os.path.join(p, "stage"))
    # the runtime alone, not the SDK: dotnet, its host resolver and Microsoft.NETCore.App
    root = dotnet_root()
    os.makedirs(os.path.join(p, "dotnet/shared"))
    shutil.copy2(os.path.join(root, "dotnet"), os.path.join(p, "dotnet/dotnet"))
    shutil.copytree(os.path.join(root, "host"), os.path.join(p, "dotnet/host"))
    shutil.copytree(os.path.join(root, "shared/Microsoft.NETCore.App"),
                    os.path.join(p, "dotnet/shared/Microsoft.NETCore.App"))
    app = sh([os.path.join(SOURCE, "tests/target-app/build.sh")]).strip().splitlines()[-1]
    if not os.path.exists(os.path.join(app, "DsTestTarget.dll")):
        raise GuestError(f"the test app is not at {app}")
    shutil.copytree(app, os.path.join(p, "app"))
    trace = sh([os.path.join(SOURCE, "tests/tools/dotnet-trace/install.sh")]).strip().splitlines()[-1]
    shutil.copytree(os.path.dirname(trace), os.path.join(p, "dotnet-trace"), symlinks=True)
    img = os.path.join(work, "payload.img")
    size = int(sh(["du", "-sm", p]).split()[0]) + 256
    sh(["truncate", "-s", f"{size}M", img])
    sh(["mkfs.ext4", "-q", "-F", "-L", "payload", "-d", p, img])
    return img


def kvm_boots(base):
    """Whether KVM runs the guest's kernel here. /dev/kvm must open, and the kernel, booted under KVM
    with no root file system, must reach its panic (qemu exits on it, -no-reboot) within
    KVM_PROBE_TIMEOUT seconds: a second or two where KVM works. Some hosts, themselves guests of
    another hypervisor (Firecracker), have a /dev/kvm that opens and makes VMs whose kernel then
    hangs in early boot, with qemu neither failing nor exiting; those get TCG. The verdict is kept
    in the cache for the host's boot (its boot_id)."""
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC))
    except OSError:
        return False
    with open("/proc/sys/kernel/random/boot_id") as f:
        verdict = os.path.join(CACHE, f"kvm-{f.read().strip()}")
    if os.path.exists(verdict):
        with open(verdict) as f:
            return f.read().strip() == "yes"
    argv = ["qemu-system-x86_64", "-accel", "kvm", "-m", "256", "-smp", "1", "-display", "none", "-no-reboot",
            "-nic", "none", "-monitor", "none", "-serial", "stdio", "-kernel", os.path.join(base, "vmlinuz"),
            "-append", "console=ttyS0 panic=-1 loglevel=1"]
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, errors="replace", timeout=KVM_PROBE_TIMEOUT)
        works = "Kernel panic" in r.stdout
    except subprocess.TimeoutExpired:
        works = False
    with open(verdict + ".new", "w") as f:
        f.write("yes\n" if works else "no\n")
    os.rename(verdict + ".new", verdict)
    return works


def accelerators(base):
    """qemu's -accel arguments: KVM where it runs the guest's kernel (kvm_boots), else TCG.
    DSAGENT_GUEST_ACCEL=tcg forces emulation."""
    if os.environ.get("DSAGENT_GUEST_ACCEL") != "tcg" and kvm_boots(base):
        return ["-accel", "kvm"]
    return ["-accel", "tcg,thread=multi"]


def boot(base, root, payload, results_dir, work):
    """Boot an overlay of @root with @payload; the results tar is unpacked into @results_dir."""
    overlay = os.path.join(work, "overlay.qcow2")
    sh(["qemu-img", "create", "-q", "-f", "qcow2", "-b", root, "-F", "raw", overlay])
    results = os.path.join(work, "results.img")
    sh(["truncate", "-s", "512M", results])
    console = os.path.join(results_dir, "console.log")
    smp = os.environ.get("DSAGENT_GUEST_SMP", "1")
    argv = ["qemu-system-x86_64", *accelerators(base), "-m", "2048", "-smp", smp,
            "-display", "none", "-no-reboot", "-nic", "none", "-monitor", "none",
            "-serial", f"file:{console}",
            "-kernel", os.path.join(base, "vmlinuz"), "-initrd", os.path.join(base, "initrd.img"),
            "-append", "root=/dev/vda rw console=ttyS0 selinux=1 security=selinux enforcing=1 "
                       "systemd.show_status=0",
            "-drive", f"file={overlay},if=virtio,format=qcow2",
            "-drive", f"file={payload},if=virtio,format=raw,readonly=on",
            "-drive", f"file={results},if=virtio,format=raw"]
    started = time.monotonic()
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=BOOT_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise GuestError(f"the guest did not power off within {BOOT_TIMEOUT} s; console: {console}")
    elapsed = time.monotonic() - started
    if r.returncode != 0:
        raise GuestError(f"qemu exited {r.returncode}: {r.stdout[-2000:]}")
    # the results disk starts zeroed: a first block of zeros is no tar (tarfile would read it as an
    # empty archive, after scanning the whole disk)
    with open(results, "rb") as f:
        written = any(f.read(512))
    try:
        if not written:
            raise tarfile.TarError("the results disk is blank")
        with tarfile.open(results) as t:
            t.extractall(results_dir, filter="fully_trusted")
    except tarfile.TarError as e:
        tail = open(console, errors="replace").read()[-3000:] if os.path.exists(console) else ""
        raise GuestError(f"the guest wrote no results ({e}) in {elapsed:.0f} s; the console's end:\n{tail}")
    return elapsed


def run(results_dir):
    """Everything: returns the timings in seconds; the guest's results are in @results_dir."""
    preflight()
    os.makedirs(results_dir, exist_ok=True)
    times = {}
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="dsagent-selinux-run.") as work:
        t = time.monotonic()
        base, key = base_image()
        times["base"] = time.monotonic() - t
        t = time.monotonic()
        root = root_image(base, key, build_modules(work))
        times["root"] = time.monotonic() - t
        t = time.monotonic()
        payload = payload_image(work)
        times["payload"] = time.monotonic() - t
        times["boot"] = boot(base, root, payload, results_dir, work)
    return times


def avc_denials(results_dir):
    """The AVC and USER_AVC records of the guest's audit log."""
    path = os.path.join(results_dir, "audit.log")
    if not os.path.exists(path):
        raise GuestError("the guest's audit.log did not come back")
    return [line for line in open(path, errors="replace") if "type=AVC" in line or "type=USER_AVC" in line]


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="dsagent-selinux-results.")
    print(run(out))
    print(out)
    for line in avc_denials(out):
        print(line, end="")
