#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Boot systemd as PID 1 of the pid namespace this runs in (see booted.py),
# on a copy-on-write view of the host's root: what the tests install, the
# journal and all state land in a tmpfs and vanish with the namespace.
#
# Run by unshare --pid --fork --mount --cgroup --uts --ipc --net, as PID 1,
# with the work directory as $1, then host directories the tests need at
# the same path where the booted system has its own (a build directory
# under /tmp, say). The host's kernel settings are guarded:
# /proc/sys and /sys are read-only, and systemd's bounding set has no
# CAP_SYS_MODULE, CAP_SYS_TIME, CAP_SYS_RAWIO or CAP_SYSLOG.
set -euo pipefail

work=$1
shift
root=$work/root
upper=$work/layer

mount --make-rprivate /
mount -t tmpfs -o mode=0755 tmpfs "$upper"
mkdir "$upper/upper" "$upper/work"
mount -t overlay overlay -o "lowerdir=/,upperdir=$upper/upper,workdir=$upper/work" "$root"

mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
for p in sys sysrq-trigger; do
        if [ -e "$root/proc/$p" ]; then
                mount --bind "$root/proc/$p" "$root/proc/$p"
                mount -o remount,bind,ro "$root/proc/$p"
        fi
done
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
# unified mode, rooted at the cgroup booted.py made: the host's v1
# controllers (and the memory limits there) stay as they are
mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 "$root/sys/fs/cgroup"

# a /dev of its own with the few nodes services use, as containers have
mount -t tmpfs -o mode=0755,nosuid tmpfs "$root/dev"
for d in null zero full random urandom tty; do
        touch "$root/dev/$d"
        mount --bind "/dev/$d" "$root/dev/$d"
done
touch "$root/dev/console"
mount --bind /dev/null "$root/dev/console"
mkdir "$root/dev/pts" "$root/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"

mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$root/run"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/tmp"
mkdir -p "$root/var/log/journal"
mount -t tmpfs -o mode=2755 tmpfs "$root/var/log/journal"
for path in "$@"; do
        mkdir -p "$root$path"
        mount --rbind "$path" "$root$path"
done

# Only what the tests need: no getty, no timers, no host services. Kernel
# audit messages are the host's, not this system's.
cat >"$root/etc/systemd/system/dsagent-test.target" <<UNIT
[Unit]
Description=dsagent test system
Requires=sysinit.target sockets.target
After=sysinit.target sockets.target
UNIT
ln -sf /dev/null "$root/etc/systemd/system/systemd-journald-audit.socket"

cd "$root"
mkdir .host
pivot_root . .host
umount -l /.host
rmdir /.host
# Shared, as systemd makes a host's own mounts at boot (it leaves that to the
# container manager when it runs in a container): a unit's LoadCredential=
# is mounted from a child's namespace into /run/credentials and reaches the
# service only by propagation. The peer groups are this namespace's own; the
# host's mounts were made private above and stay so.
mount --make-rshared /

exec setpriv --bounding-set -sys_module,-sys_rawio,-sys_time,-syslog,-mac_admin,-mac_override \
        env -i container=dsagent-test /lib/systemd/systemd --unit=dsagent-test.target
