#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Build a minimal, distroless-like root file system for the test target app in DIR:
#
#     tests/containers/rootfs.sh DIR
#
# No image registry is reachable from the test machines, so the container's root is made from
# what this machine has: the app as tests/target-app/build.sh builds it (framework-dependent,
# started by its apphost), the host's Microsoft.NETCore.App that the app rolls forward to, with
# its hostfxr, and the shared libraries those need, found with ldd. Nothing else: no shell, no package
# manager, no ICU (the app runs with InvariantGlobalization), no OpenSSL (the app does no
# cryptography). Copied, not bind-mounted, so that the container holds its own runtime files as
# one made from an image does, and needs no mount of the host's.
#
# Idempotent: DIR is left alone when it already holds a root built from the same app and
# runtime (its .dsagent-rootfs stamp says which), else replaced whole. DIR must be absent, or a
# root this script built. Prints DIR.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
out=$(realpath -m "$1")
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)

app=$("$src/tests/target-app/build.sh")
dotnet=$(command -v dotnet) || { echo "rootfs.sh: the .NET SDK (dotnet) is not on PATH" >&2; exit 1; }
dotnet_root=$(dirname "$(readlink -f "$dotnet")")
# The runtime the app rolls forward to on the host too: the newest patch of the major.minor
# its runtimeconfig asks for.
want=$(sed -n 's/.*"version": *"\([0-9]*\.[0-9]*\)\..*/\1/p' "$app/DsTestTarget.runtimeconfig.json" | head -n 1)
runtime=$(ls -d "$dotnet_root/shared/Microsoft.NETCore.App/$want".*/ 2>/dev/null | sort -V | tail -n 1)
[ -n "$runtime" ] || { echo "rootfs.sh: no Microsoft.NETCore.App $want.* in $dotnet_root" >&2; exit 1; }
runtime=${runtime%/}
version=$(basename "$runtime")
fxr="$dotnet_root/host/fxr/$(ls "$dotnet_root/host/fxr" | sort -V | tail -n 1)"
stamp="app=$(basename "$app") runtime=$version"

mkdir -p "$(dirname "$out")"
# Two test runs at once build it once: the second waits, then finds the stamp.
exec 9>"$out.lock"
flock 9
if [ -e "$out" ]; then
        if [ "$(cat "$out/.dsagent-rootfs" 2>/dev/null)" = "$stamp" ]; then
                echo "$out"
                exit 0
        fi
        [ -f "$out/.dsagent-rootfs" ] || { echo "rootfs.sh: $out exists and is not a root this script built" >&2; exit 1; }
fi

work=$(mktemp -d "$out.new.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work

# A merged /usr as on the host (Debian 12), so that every path ldd prints exists as it is
# printed, /lib64/ld-linux-x86-64.so.2 (the interpreter named in every ELF file) among them.
for top in lib lib64; do
        if [ -L "/$top" ]; then
                ln -s "$(readlink "/$top")" "$root/$top"
                mkdir -p "$root/$(readlink -f "/$top")"
        fi
done
mkdir -p "$root"/{app,etc,proc,sys,dev,run,var/tmp}
# The container's own tmpfs on /tmp takes this directory's mode (podman copies it up): 1777 as
# on any system, so that a non-root user's runtime can make its diagnostic socket there.
install -d -m 1777 "$root/tmp"
chmod 1777 "$root/var/tmp"
# What podman mounts files over, or links, in every container: made here, because a rootless
# user's podman cannot create them in a root-owned directory, nor in an overlay on one ("Error:
# creating /etc/mtab symlink: permission denied", "error mounting .../userdata/hostname to
# rootfs at /etc/hostname: ... permission denied"). With them here no container writes this
# directory, so one copy serves every test, rootful and rootless.
ln -s /proc/mounts "$root/etc/mtab"
touch "$root/etc/hostname" "$root/etc/hosts" "$root/etc/resolv.conf" "$root/run/.containerenv"
# Accounts as distroless images have them; podman adds the container's user when it is not here.
printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' \
        > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"

cp -a "$app/." "$root/app/"
# The runtime where the apphost looks for it by default, without DOTNET_ROOT
mkdir -p "$root/usr/share/dotnet/host/fxr" "$root/usr/share/dotnet/shared/Microsoft.NETCore.App"
cp -a "$fxr" "$root/usr/share/dotnet/host/fxr/"
cp -a "$runtime" "$root/usr/share/dotnet/shared/Microsoft.NETCore.App/"

# Every library any of those ELF files needs (createdump and the runtime's own .so files too,
# since the runtime loads them, and starts createdump for a dump). ldd gives the whole closure.
# A "not found" is a library the host lacks as well and the runtime does without (liblttng-ust,
# which only libcoreclrtraceptprovider.so wants): skipped.
mapfile -t libs < <(
        find "$root/app" "$root/usr/share/dotnet" -type f \( -name '*.so' -o -perm -u+x \) -print0 |
        while IFS= read -r -d '' elf; do
                [ "$(od -An -c -N 4 "$elf" | tr -d ' ')" = '177ELF' ] || continue
                ldd "$elf" 2>/dev/null || true
        done | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u)
[ ${#libs[@]} -gt 0 ] || { echo "rootfs.sh: ldd found no libraries for the runtime" >&2; exit 1; }
for lib in "${libs[@]}"; do
        [[ $lib != "$root"/* ]] || continue  # the runtime's own, found through $ORIGIN: copied above
        mkdir -p "$root$(dirname "$lib")"
        cp -L "$lib" "$root$lib"
done
# The loader finds them in its built-in multiarch directories; a cache makes that explicit.
ldconfig -r "$root" 2>/dev/null || true

chmod -R a+rX,go-w "$root"
chmod 1777 "$root/tmp" "$root/var/tmp"
chmod 755 "$root"
echo "$stamp" > "$root/.dsagent-rootfs"

if [ -e "$out" ]; then
        old=$(mktemp -d "$out.old.XXXXXX")
        mv -T "$out" "$old/root"
        mv -T "$root" "$out"
        rm -rf "$old"
else
        mv -T "$root" "$out"
fi
trap - EXIT
echo "$out"
