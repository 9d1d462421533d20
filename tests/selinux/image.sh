#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The SELinux guest's base system, built once from Debian's packages and cached:
#
#     tests/selinux/image.sh CACHE_DIR
#
# Makes CACHE_DIR/base-KEY/{root.tar,vmlinuz,initrd.img} unless they are there, and prints
# CACHE_DIR/base-KEY. KEY is the sha256 of this script, which holds the whole recipe (the
# package list included): change a line and the next run builds a new base.
#
# root.tar: Debian 12 (bookworm) from `mmdebstrap --variant=minbase` off the Debian mirror
# ($DSAGENT_DEBIAN_MIRROR, http://deb.debian.org/debian) with systemd, the kernel, Debian's
# SELinux policy and auditd, set to boot enforcing, unlabelled: tests/selinux/guest.py
# loads dsagent's module into it and labels it on the host (semodule -p, setfiles), which
# needs no SELinux in the host's kernel. At boot the guest runs /usr/local/sbin/guest-run
# (below) as a service: the payload disk (/dev/vdb, ext4) is mounted on /payload, its run.sh
# runs as unconfined root, and /results goes as a tar onto /dev/vdc; then it powers off.
#
# mmdebstrap, not debootstrap: apt fetches and installs the packages in one go, where debootstrap
# fetched them one at a time and unpacked them twice (a fresh machine's debootstrap took 17 minutes
# behind a slow mirror). The .debs it needs are taken from CACHE_DIR/debs, and from the host's own
# apt cache (scripts/install-deps.sh keeps what it downloaded in $DSAGENT_TEST_CACHE/apt), where
# they are already there; what it downloads goes into CACHE_DIR/debs for the next base. Neither
# ends up in the image.
set -euo pipefail

cache=${1:?usage: image.sh CACHE_DIR}
mirror=${DSAGENT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
here=$(cd "$(dirname "$0")" && pwd)

packages=(
        # boot: the init, devices, the kernel and its initramfs (virtio_blk is in MODULES=most)
        systemd systemd-sysv udev dbus linux-image-amd64 initramfs-tools
        # SELinux: Debian's reference policy, its tools, semanage for logins, and the audit log
        selinux-basics selinux-policy-default selinux-utils policycoreutils
        policycoreutils-python-utils auditd
        # what dsagent links to and its tests use (getfacl), and what .NET needs
        libsystemd0 libseccomp2 libacl1 libpam0g libpam-modules acl libicu72 libssl3 zlib1g
        # the egress process (dsagent-egress) links libcurl
        libcurl4
        # checking results inside the guest
        procps psmisc python3 kmod
        # crashes: the kernel's core_pattern pipes cores to it, it stores them and logs them (docs/crashes.md)
        systemd-coredump
)

key=$(sha256sum "$here/image.sh" | cut -c1-16)
out="$cache/base-$key"
if [ -s "$out/root.tar" ] && [ -s "$out/vmlinuz" ] && [ -s "$out/initrd.img" ]; then
        echo "$out"
        exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/selinux-base.lock"
flock 9
if [ -s "$out/root.tar" ]; then
        echo "$out"
        exit 0
fi

work=$(mktemp -d /var/tmp/dsagent-selinux-base.XXXXXX)
trap 'rm -rf "$work"' EXIT
root="$work/root"
debs="$cache/debs"
host_debs=${DSAGENT_TEST_CACHE:-/var/cache/dsagent-tests}/apt
mkdir -p "$debs"
echo "image.sh: mmdebstrap bookworm from $mirror into $root (a few minutes, once)" >&2
include=$(IFS=,; echo "${packages[*]}")
# The hooks link (or, across file systems, copy) the .debs: in from both caches before apt runs,
# out to CACHE_DIR/debs once it has run. essential/unlink skipped: the archive directory is the
# hooks' own, emptied before the tar is made (below).
link_debs() { # FROM TO: every .deb of FROM into TO, none replaced
        [ -d "$1" ] || return 0
        find "$1" -maxdepth 1 -name '*.deb' -exec cp -nl -t "$2" {} + 2>/dev/null ||
                find "$1" -maxdepth 1 -name '*.deb' -exec cp -n -t "$2" {} +
}
printf '#!/bin/bash\nset -e\n%s\nmkdir -p "$1/var/cache/apt/archives"\nlink_debs %q "$1/var/cache/apt/archives"\nlink_debs %q "$1/var/cache/apt/archives"\n' \
        "$(declare -f link_debs)" "$debs" "$host_debs" >"$work/debs-in"
printf '#!/bin/bash\nset -e\n%s\nlink_debs "$1/var/cache/apt/archives" %q\n' "$(declare -f link_debs)" "$debs" >"$work/debs-out"
chmod 755 "$work/debs-in" "$work/debs-out"
mmdebstrap --variant=minbase --include="$include" --skip=essential/unlink \
        --setup-hook="$work/debs-in" --customize-hook="$work/debs-out" \
        bookworm "$root" "$mirror" >"$work/mmdebstrap.log" 2>&1 || {
        tail -n 40 "$work/mmdebstrap.log" >&2
        echo "image.sh: mmdebstrap failed" >&2
        exit 1
}

echo "/dev/vda / ext4 rw,relatime 0 1" >"$root/etc/fstab"
echo selinux-guest >"$root/etc/hostname"
cat >"$root/etc/selinux/config" <<EOF
SELINUX=enforcing
SELINUXTYPE=default
EOF
# Nothing of the build machine, nor what mmdebstrap downloaded or was given.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/tmp/* "$root"/var/tmp/*
: >"$root/etc/resolv.conf"
# A quiet boot: no logins (the guest is driven through its disks), no timers, no relabel.
for unit in serial-getty@ttyS0.service getty@tty1.service apt-daily.timer apt-daily-upgrade.timer \
        e2scrub_all.timer e2scrub_reap.service fstrim.timer man-db.timer systemd-timesyncd.service \
        selinux-autorelabel-mark.service; do
        ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
rm -f "$root/.autorelabel"

cat >"$root/usr/local/sbin/guest-run" <<'EOF'
#!/bin/bash
# Run the payload's run.sh, keep its output and the audit log in /results, hand /results
# over as a tar on /dev/vdc, power off. Whatever happens, the host gets a tar.
mkdir -p /payload /results
if mount -o ro /dev/vdb /payload; then
        bash /payload/run.sh >/results/run.log 2>&1
        echo "$?" >/results/run.rc
else
        echo "cannot mount the payload disk" >/results/run.log
        echo 99 >/results/run.rc
fi
cp /var/log/audit/audit.log /results/audit.log 2>/dev/null
journalctl -b --no-pager >/results/journal.txt 2>&1
sync
tar -C /results -cf /dev/vdc .
sync
systemctl poweroff --no-block
EOF
chmod 755 "$root/usr/local/sbin/guest-run"
# unconfined_t: run.sh installs, adds users and maps logins, as an administrator would
cat >"$root/etc/systemd/system/guest-run.service" <<'EOF'
[Unit]
Description=Run the test payload and power off
After=multi-user.target auditd.service
[Service]
Type=oneshot
SELinuxContext=unconfined_u:unconfined_r:unconfined_t:s0-s0:c0.c1023
ExecStart=/usr/local/sbin/guest-run
StandardOutput=journal+console
[Install]
WantedBy=multi-user.target
EOF
ln -sf /etc/systemd/system/guest-run.service "$root/etc/systemd/system/multi-user.target.wants/guest-run.service"

mkdir -p "$work/out"
cp "$(readlink -f "$root/vmlinuz")" "$work/out/vmlinuz"
cp "$(readlink -f "$root/initrd.img")" "$work/out/initrd.img"
tar --numeric-owner --xattrs -C "$root" -cf "$work/out/root.tar" .
rm -rf "$out"
mv "$work/out" "$out"
echo "$out"
