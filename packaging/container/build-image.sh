#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Build the dsagent container image (Containerfile beside this script) with podman, as root:
#
#     packaging/container/build-image.sh [DEB]
#
# 1. The .deb: DEB, or built here with dpkg-buildpackage from a clean copy of the source tree
#    (the files git knows or would add), as tests/packaging/test_deb.py builds it, without
#    running the package's own tests (DEB_BUILD_OPTIONS=nocheck).
# 2. The base: Debian 12 (bookworm) made with `debootstrap --variant=minbase` from the Debian
#    mirror, with bookworm-updates and bookworm-security in its sources, packed as a tarball
#    and `podman import`ed as localhost/dsagent-base:bookworm. No image registry is used: the
#    project's machines reach none, and the base is then made of Debian's packages alone.
# 3. The image: `podman build` FROM that base, with the .deb and its dependencies installed
#    from the mirror and nothing else; tagged localhost/dsagent:VERSION and
#    localhost/dsagent:deb-HASH (HASH: the .deb's sha256, first 16 digits).
#
# Cached: the debootstrap tarball in $DSAGENT_TEST_CACHE (/var/cache/dsagent-tests) until it is
# removed or --refresh-base is given; the image until the .deb, the Containerfile or the base
# changes (the package builds reproducibly: the same source gives the same .deb). Prints the
# image's name, the deb-HASH one, on its last line; everything else goes to stderr.
#
# Environment: DSAGENT_DEBIAN_MIRROR (http://deb.debian.org/debian), DSAGENT_TEST_CACHE,
# PODMAN_GLOBAL_ARGS (podman's global options, e.g. "--runtime runc --cgroup-manager cgroupfs";
# CONTAINERS_CONF as podman reads it).
set -euo pipefail

usage() { echo "usage: $0 [--refresh-base] [DEB]" >&2; exit 2; }
refresh_base=false
deb=
while [ $# -gt 0 ]; do
        case $1 in
        --refresh-base) refresh_base=true ;;
        -h|--help) usage ;;
        -*) usage ;;
        *) [ -z "$deb" ] || usage; deb=$(realpath "$1") ;;
        esac
        shift
done

[ "$(id -u)" -eq 0 ] || { echo "build-image.sh: run as root (debootstrap, rootful podman)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
cache=${DSAGENT_TEST_CACHE:-/var/cache/dsagent-tests}
mirror=${DSAGENT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
read -r -a podman_args <<<"${PODMAN_GLOBAL_ARGS:-}"
pm() { podman "${podman_args[@]}" "$@"; }
say() { echo "build-image.sh: $*" >&2; }

mkdir -p "$cache"
chmod 755 "$cache"
# Two builds at once: the second waits, then finds what the first made.
exec 9>"$cache/container-image.lock"
flock 9

work=$(mktemp -d /var/tmp/dsagent-image.XXXXXX)
trap 'rm -rf "$work"' EXIT

# 1. The package
if [ -z "$deb" ]; then
        say "building the .deb from $src"
        tree="$work/dsagent"
        mkdir -p "$tree"
        # files deleted in the work tree but not yet in git are left out
        (cd "$src" && git ls-files -z --cached --others --exclude-standard |
                while IFS= read -r -d '' f; do
                        if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
                done | tar --null -T - -cf -) | tar -C "$tree" -xf -
        cp -r "$src/packaging/deb/debian" "$tree/debian"
        (cd "$tree" && DEB_BUILD_OPTIONS=nocheck dpkg-buildpackage -us -uc -b >"$work/deb-build.log" 2>&1) || {
                tail -n 40 "$work/deb-build.log" >&2
                say "dpkg-buildpackage failed"
                exit 1
        }
        deb=$(ls "$work"/dsagent_*_*.deb)
fi
[ -f "$deb" ] || { say "no such .deb: $deb"; exit 1; }
hash=$(sha256sum "$deb" | cut -c1-16)
version=$(dpkg-deb --field "$deb" Version)
upstream=${version%-*}
image="localhost/dsagent:deb-$hash"

# 2. The base
rootfs_tar="$cache/container-base-bookworm.tar"
if $refresh_base || [ ! -s "$rootfs_tar" ]; then
        say "debootstrap --variant=minbase bookworm from $mirror"
        root="$work/rootfs"
        debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
                tail -n 40 "$work/debootstrap.log" >&2
                say "debootstrap failed"
                exit 1
        }
        # bookworm's own sources, and its fixes
        security=${mirror%/debian}/debian-security
        cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security bookworm-security main
EOF
        # Nothing of the build machine, nor what debootstrap downloaded, goes into the image.
        rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log \
                "$root"/tmp/* "$root"/var/tmp/*
        : >"$root/etc/hostname"
        : >"$root/etc/resolv.conf"
        tar --numeric-owner --xattrs --acls -C "$root" -cf "$rootfs_tar.new" .
        mv -f "$rootfs_tar.new" "$rootfs_tar"
        rm -rf "$root"
fi
base_hash=$(sha256sum "$rootfs_tar" | cut -c1-16)
base="localhost/dsagent-base:bookworm-$base_hash"
if ! pm image exists "$base"; then
        say "podman import $rootfs_tar as $base"
        pm import --quiet --change 'CMD ["/bin/bash"]' "$rootfs_tar" "$base" >/dev/null
fi
pm tag "$base" localhost/dsagent-base:bookworm

# 3. The image, unless one was built from this very .deb, Containerfile and base
recipe=$(sha256sum "$here/Containerfile" | cut -c1-16)
if pm image exists "$image" &&
   [ "$(pm image inspect --format '{{index .Labels "org.dsagent.base"}}/{{index .Labels "org.dsagent.containerfile"}}' \
        "$image")" = "$base/$recipe" ]; then
        say "$image is up to date"
else
        say "podman build $image"
        replaced=$(pm image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
        ctx="$work/context"
        mkdir -p "$ctx"
        cp "$here/Containerfile" "$ctx/Containerfile"
        cp "$deb" "$ctx/dsagent.deb"
        # the host's network for apt-get: a build needs the mirror, nothing else is reached
        pm build --quiet --network host --pull=never --build-arg "BASE=$base" \
                --label "org.dsagent.base=$base" --label "org.dsagent.containerfile=$recipe" \
                --label "org.dsagent.deb-sha256=$(sha256sum "$deb" | cut -d' ' -f1)" \
                --label "org.opencontainers.image.title=dsagent" \
                --label "org.opencontainers.image.version=$version" \
                --tag "$image" "$ctx" >"$work/build.log" 2>&1 || {
                tail -n 40 "$work/build.log" >&2
                say "podman build failed"
                exit 1
        }
        pm tag "$image" "localhost/dsagent:$upstream"
        # the image this one replaces under the same name (another Containerfile or base), now untagged
        if [ -n "$replaced" ]; then
                pm rmi "$replaced" >/dev/null 2>&1 || true
        fi
fi
pm tag "$image" "localhost/dsagent:$upstream"
# Images of earlier .debs and bases are not kept: each would hold its own copy of everything.
# One still in use by a container stays (podman refuses), and goes with a later build.
for old in $(pm images --format '{{.Repository}}:{{.Tag}}'); do
        [[ $old =~ ^localhost/dsagent(-base)?:(deb|bookworm)-[0-9a-f]{16}$ ]] || continue
        [ "$old" != "$image" ] && [ "$old" != "$base" ] || continue
        pm rmi "$old" >/dev/null 2>&1 || true
done
echo "$image"
