#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Install what building and testing dsagent needs on Debian 12. Run as root.
# The .NET SDK is not a Debian package; it must already be on PATH (it is on
# the project's machines) and is only used to build the test target app.
set -euo pipefail

packages=(
        # build
        meson ninja-build gcc pkg-config
        libsystemd-dev libseccomp-dev libacl1-dev libpam0g-dev systemd
        # fuzzing (clang with libFuzzer) and sanitizers
        clang-14 libclang-rt-14-dev
        # tests: users, namespaces, ACL tools, syscall tracing, the harness
        passwd util-linux acl strace python3
        # tests under a booted systemd, and of the packages, the SELinux
        # module and the man pages
        git dpkg-dev debhelper lintian rpm rpmlint bzip2 selinux-policy-dev man-db groff-base
)

missing=()
for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
        echo "install-deps: installing ${missing[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v dotnet >/dev/null; then
        echo "install-deps: the .NET SDK (dotnet) is not on PATH; the tests need it to build their target app" >&2
        exit 1
fi
