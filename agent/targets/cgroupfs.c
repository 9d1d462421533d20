/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Who made and who may fill the cgroups on a process's path (cgroupfs.h) */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/targets/cgroupfs.h"
#include "common/cleanup.h"

/* One component below @dir_fd, O_PATH, never through a symlink; across a mount only if @may_cross. */
static int open_below(int dir_fd, const char *name, bool may_cross) {
        struct open_how how = {
                .flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                           (may_cross ? 0 : RESOLVE_NO_XDEV),
        };

        return (int)syscall(SYS_openat2, dir_fd, name, &how, sizeof(how));
}

static bool is_fs(int fd, unsigned long magic) {
        struct statfs sfs;

        return fstatfs(fd, &sfs) == 0 && (unsigned long)sfs.f_type == magic;
}

/* Root's alone: root owns it, and no other user or group may write it. */
static bool root_only(const struct stat *st) {
        return st->st_uid == 0 && !(st->st_mode & S_IWOTH) && (!(st->st_mode & S_IWGRP) || st->st_gid == 0);
}

/* A cgroup's directory (who may make cgroups in it) and the files that move processes or threads into it. */
static bool cgroup_root_only(int dir_fd) {
        static const char *const movers[] = { "cgroup.threads", "tasks" }; /* v2 threaded, v1: where present */
        struct stat st;

        if (fstat(dir_fd, &st) < 0 || !S_ISDIR(st.st_mode) || !root_only(&st))
                return false;
        if (fstatat(dir_fd, "cgroup.procs", &st, AT_SYMLINK_NOFOLLOW) < 0 || !root_only(&st))
                return false;
        for (size_t i = 0; i < ELEMENTSOF(movers); i++) {
                if (fstatat(dir_fd, movers[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno != ENOENT)
                                return false;
                } else if (!root_only(&st))
                        return false;
        }
        return true;
}

/* The root of @c's hierarchy, checked to be a cgroup file system of its kind. Return: an fd, or -1. */
static int open_hierarchy(const ProcContainer *c) {
        _cleanup_close_ int top = open(CGROUPFS_MOUNT, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int fd;

        if (top < 0)
                return -1;
        if (c->unified) {
                if (is_fs(top, CGROUP2_SUPER_MAGIC))
                        return TAKE_FD(top);
                fd = open_below(top, "unified", true); /* a hybrid host's */
                if (fd >= 0 && !is_fs(fd, CGROUP2_SUPER_MAGIC))
                        fd = safe_close(fd), fd = -1;
                return fd;
        }
        if (!c->hierarchy[0] || is_fs(top, CGROUP2_SUPER_MAGIC))
                return -1;
        fd = open_below(top, c->hierarchy, true);
        if (fd >= 0 && !is_fs(fd, CGROUP_SUPER_MAGIC))
                fd = safe_close(fd), fd = -1;
        return fd;
}

bool cgroupfs_root_vouches(const ProcContainer *c) {
        _cleanup_close_ int dir = -EBADF;
        const char *p = c->cgroup;

        if (c->cgroup[0] != '/')
                return false; /* none, or too long to be kept whole */
        dir = open_hierarchy(c);
        if (dir < 0 || !cgroup_root_only(dir))
                return false;
        while (*p) {
                char component[PROC_CGROUP_PATH_MAX + 1];
                size_t len;
                int next;

                p += strspn(p, "/");
                len = strcspn(p, "/");
                if (len == 0)
                        break;
                memcpy(component, p, len);
                component[len] = '\0';
                p += len;
                /* a path from outside our cgroup namespace ("/../x") is not ours to look at */
                if (strcmp(component, ".") == 0 || strcmp(component, "..") == 0)
                        return false;
                next = open_below(dir, component, false);
                if (next < 0)
                        return false;
                safe_close(dir);
                dir = next;
                if (!cgroup_root_only(dir))
                        return false;
        }
        return true;
}
