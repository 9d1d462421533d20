#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Install what building and testing dsagent needs on Debian 12. Run as root.
# The .NET SDK is not a Debian package; it must already be on PATH (it is on
# the project's machines). The tests use it to build their target app and
# their .NET tools (tests/tools/*/build.sh), and to install the stock
# dotnet-counters, -dump, -gcdump, -stack and -trace
# (tests/tools/dotnet-tools/install.sh); those fetch their
# packages from NuGet themselves, into $DSAGENT_TEST_CACHE or
# /var/cache/dsagent-tests.
set -euo pipefail

packages=(
        # build
        meson ninja-build gcc pkg-config
        libsystemd-dev libseccomp-dev libacl1-dev libpam0g-dev systemd
        # the cores systemd-coredump stores, decompressed (agent/crashes/crash-core.c); the command-line
        # tools make the unit test's compressed cores (tests/unit/agent/test-crash-core.c)
        libzstd-dev liblz4-dev liblzma-dev zstd lz4 xz-utils
        # fuzzing (clang with libFuzzer) and sanitizers
        clang-14 libclang-rt-14-dev
        # tests: users, namespaces, ACL tools, syscall tracing, the harness;
        # the speedscope schema check of dsctl stacks
        passwd util-linux acl strace python3 python3-jsonschema
        # tests under a booted systemd, and of the packages, the SELinux
        # module and the man pages
        git dpkg-dev debhelper lintian rpm rpmlint bzip2 selinux-policy-dev man-db groff-base
        # targets in real containers, rootful and rootless (tests/containers): runc named, since
        # podman would take crun, which the test machines' sandbox refuses
        podman runc uidmap
        # the container image (packaging/container: its Debian base made with debootstrap) and its
        # DaemonSet's pod under podman kube play (catatonit: podman's pod infra container), read
        # from deploy/kubernetes with python3-yaml
        debootstrap catatonit python3-yaml
        # promtool, which checks dsctl counters --format prometheus (Debian has it in prometheus;
        # its server is kept from starting, below)
        prometheus
        # the SELinux guest (tests/selinux): Debian 12 booted enforcing under qemu (KVM where it
        # runs the guest, else TCG: no KVM needed), its root made with mmdebstrap, the
        # module built with selinux-policy-dev's Makefile (above; make), installed into the guest's
        # policy store and its files labelled on the host (semodule -p, setfiles: no SELinux in the
        # host's kernel needed), packed with mkfs.ext4 -d and its root's label set with debugfs
        qemu-system-x86 qemu-utils e2fsprogs make policycoreutils semodule-utils selinux-utils
        selinux-policy-default mmdebstrap
        # bench/: GNU time reads each tool's peak memory as its own child's (bench-gcdump.py)
        time
        # dsctl's trace formats (tests/integration/test_flame.py): go tool pprof reads its pprof files, and a
        # real browser, headless, opens its flame graphs and takes their screenshots
        golang-go chromium
        # crashes under a booted systemd (tests/systemd/test_crashes.py): systemd-coredump as the booted
        # system runs it, coredumpctl; see below for the host's core_pattern
        systemd-coredump
        # the audit trail shipped off the node (tests/systemd/test_journal_shipping.py, docs/journal-shipping.md):
        # systemd-journal-upload and -remote, both run by the booted systems (which see the host's /usr); openssl
        # makes the test's CA and certificates. Neither unit is enabled by the package.
        systemd-journal-remote openssl
        # S3 egress (docs/egress-plan.md): libcurl signs with AWS SigV4; the tests' real S3 store is Ceph's radosgw
        # on one mon and one osd (tests/integration/radosgw.sh), read back through boto3
        libcurl4-openssl-dev libssl-dev curl radosgw ceph-mon ceph-osd python3-boto3
        # the TLS tests' CA and certificates (openssl; tests/integration/radosgw.sh make-ca) and the system's store
        # an https endpoint without ca_file is checked against (ca-certificates: /etc/ssl/certs)
        openssl ca-certificates
        # bench/bench-egress.py compares the egress core's uploads with Debian's s3cmd put
        s3cmd
)

missing=()
for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
        echo "install-deps: installing ${missing[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        # Only promtool is wanted of prometheus: policy-rc.d keeps its server from starting
        # while it is installed, and it is disabled after. An administrator's own policy-rc.d
        # is left alone.
        made_policy_rc=false
        if [ ! -e /usr/sbin/policy-rc.d ]; then
                printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
                chmod 755 /usr/sbin/policy-rc.d
                made_policy_rc=true
                trap 'rm -f /usr/sbin/policy-rc.d' EXIT
        fi
        # what is downloaded is kept where the SELinux guest's image (tests/selinux/image.sh) finds
        # the packages it shares with this machine, instead of fetching them again
        apt_cache=${DSAGENT_TEST_CACHE:-/var/cache/dsagent-tests}/apt
        mkdir -p "$apt_cache/partial"
        # systemd-coredump's postinst points the running kernel's core_pattern at itself, on a machine whose
        # kernel other work shares and that boots no systemd to receive the cores: the pattern is put back
        core_pattern=$(cat /proc/sys/kernel/core_pattern 2>/dev/null || true)
        apt-get install -y -qq --no-install-recommends -o Dir::Cache::Archives="$apt_cache/" "${missing[@]}" >/dev/null
        if [ -n "$core_pattern" ] && [ "$(cat /proc/sys/kernel/core_pattern)" != "$core_pattern" ]; then
                printf '%s\n' "$core_pattern" >/proc/sys/kernel/core_pattern ||
                        echo "install-deps: could not put kernel.core_pattern back to '$core_pattern'" >&2
        fi
        if $made_policy_rc; then
                rm -f /usr/sbin/policy-rc.d
        fi
        if [[ " ${missing[*]} " == *" prometheus "* ]]; then
                systemctl disable prometheus.service >/dev/null 2>&1 || true
        fi
fi

if ! command -v dotnet >/dev/null; then
        echo "install-deps: the .NET SDK (dotnet) is not on PATH; the tests need it to build their target app and tools" >&2
        exit 1
fi
