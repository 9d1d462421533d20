/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cleanup.h"
#include "dump-publish.h"
#include "io.h"
#include "text.h"

/**
 * dump_dir_open() - open dump_dir, making it (0711, root's) if it is missing
 *
 * Users reach their dumps by name (x) but cannot list the directory (no r).
 * A directory anybody but root could write to is refused.
 *
 * Return: 0, DUMP_PUBLISH_E_DIRECTORY, or a negative errno.
 */
int dump_dir_open(const char *path, int *ret_fd, const char **ret_why) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (mkdir(path, 0711) < 0 && errno != EEXIST) {
                *ret_why = "the dump directory cannot be created";
                return DUMP_PUBLISH_E_DIRECTORY;
        }
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
                *ret_why = "the dump directory cannot be opened";
                return DUMP_PUBLISH_E_DIRECTORY;
        }
        if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
                *ret_why = "the dump directory is not root's alone";
                return DUMP_PUBLISH_E_DIRECTORY;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static uint64_t size_limit(const PolicySize *s, uint64_t fs_bytes) {
        return s->bytes ? s->bytes : fs_bytes / 100 * s->percent;
}

/* Bytes the published dumps take now. */
static int dump_dir_usage(int dir_fd, uint64_t *ret) {
        _cleanup_close_ int walk_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        uint64_t used = 0;
        struct dirent *de;
        DIR *d;

        if (walk_fd < 0 || !(d = fdopendir(walk_fd)))
                return -errno;
        walk_fd = -EBADF;
        while ((de = readdir(d))) {
                struct stat st;
                if (de->d_name[0] != '.' && fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISREG(st.st_mode))
                        used += (uint64_t)st.st_blocks * 512;
        }
        rewinddir(d);
        closedir(d);
        *ret = used;
        return 0;
}

/**
 * dump_guard_check() - would one more dump keep dump_dir within max_use and keep_free?
 * @dump_bytes: the new dump's size, which counts against max_use
 * @fs_bytes_needed: what publishing it still takes from the file system (0 when
 *                   it is already there and only gets linked)
 *
 * With both 0 it asks whether dumps may be taken at all right now.
 *
 * Return: 0, DUMP_PUBLISH_E_NO_SPACE with a reason, or a negative errno.
 */
int dump_guard_check(int dir_fd, const PolicyAgentSettings *a, uint64_t dump_bytes, uint64_t fs_bytes_needed,
                     const char **ret_why) {
        struct statvfs vfs;
        uint64_t fs_bytes, avail, used = 0;
        int r;

        if (fstatvfs(dir_fd, &vfs) < 0)
                return -errno;
        fs_bytes = (uint64_t)vfs.f_blocks * vfs.f_frsize;
        avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
        r = dump_dir_usage(dir_fd, &used);
        if (r < 0)
                return r;
        if (used + dump_bytes > size_limit(&a->max_use, fs_bytes)) {
                *ret_why = "dumps would take more than max_use";
                return DUMP_PUBLISH_E_NO_SPACE;
        }
        if (avail < fs_bytes_needed) {
                *ret_why = "the dump does not fit in the dump directory's file system";
                return DUMP_PUBLISH_E_NO_SPACE;
        }
        if (avail - fs_bytes_needed < size_limit(&a->keep_free, fs_bytes)) {
                *ret_why = "the dump would leave less free space than keep_free";
                return DUMP_PUBLISH_E_NO_SPACE;
        }
        return 0;
}

static int set_attribute(int fd, const char *key, const char *value) {
        if (!value)
                return 0;
        if (fsetxattr(fd, key, value, strlen(value), XATTR_CREATE) == 0)
                return 0;
        /* a file system without user xattrs loses the labels, not the dump */
        return errno == ENOTSUP ? 0 : -errno;
}

static int set_attributes(int fd, const DumpAttributes *a) {
        char requester[16], pid[16], uid[16], id[24];
        int r = 0;

        snprintf(requester, sizeof(requester), "%u", (unsigned)a->requester);
        snprintf(pid, sizeof(pid), "%d", (int)a->target_pid);
        snprintf(uid, sizeof(uid), "%u", (unsigned)a->target_uid);
        snprintf(id, sizeof(id), "%016" PRIx64, a->request_id);
        if (r == 0) r = set_attribute(fd, "user.dsagent.requester_uid", requester);
        if (r == 0) r = set_attribute(fd, "user.dsagent.target_pid", pid);
        if (r == 0) r = set_attribute(fd, "user.dsagent.target_uid", uid);
        if (r == 0) r = set_attribute(fd, "user.dsagent.target_unit", a->target_unit);
        if (r == 0) r = set_attribute(fd, "user.dsagent.target_exe", a->target_exe);
        if (r == 0) r = set_attribute(fd, "user.dsagent.dump_type", a->dump_type);
        if (r == 0) r = set_attribute(fd, "user.dsagent.request_id", id);
        return r;
}

/* Owner, ACL and labels go on the fd while the file has no name in dump_dir. */
static int label(int fd, const AclGrant *readers, const DumpAttributes *attrs) {
        int r;

        if (fchown(fd, 0, 0) < 0)
                return -errno;
        r = acl_set_exact_fd(fd, true, readers);
        if (r < 0)
                return r;
        return set_attributes(fd, attrs);
}

static int link_fd(int fd, int dir_fd, const char *name) {
        char proc_path[32];

        snprintf(proc_path, sizeof(proc_path), "/proc/self/fd/%d", fd);
        return linkat(AT_FDCWD, proc_path, dir_fd, name, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
}

static int publish_by_copy(int dir_fd, int src_fd, uint64_t size, const AclGrant *readers,
                           const DumpAttributes *attrs, const char *name) {
        _cleanup_close_ int tmp = -EBADF;
        int r;

        /* unnamed until complete: a failure or a full disk leaves nothing behind */
        tmp = openat(dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (tmp < 0)
                return -errno;
        /* in the kernel: the dump never passes through the agent's memory */
        r = fd_copy_all(src_fd, tmp, size);
        if (r == 0)
                r = label(tmp, readers, attrs);
        if (r == 0)
                r = link_fd(tmp, dir_fd, name);
        return r;
}

/**
 * dump_publish() - give the dump in @src_fd its name in dump_dir
 * @src_fd: the staged dump, checked by dump_stage_open_dump()
 *
 * On the same file system the staged inode itself is relabelled (root's,
 * exact ACL, xattrs) and linked: no byte is copied. Otherwise it is copied
 * in the kernel into an unnamed file that gets its name only when complete.
 * Either way no file is ever visible under its final name before it is
 * whole and labelled.
 *
 * Return: 0, DUMP_PUBLISH_E_NO_SPACE, or a negative errno.
 */
int dump_publish(int dir_fd, int src_fd, uint64_t size, const PolicyAgentSettings *a, const AclGrant *readers,
                 const DumpAttributes *attrs, const char *name, bool *ret_copied, const char **ret_why) {
        struct stat dir_st, src_st;
        bool same_fs;
        int r;

        if (fstat(dir_fd, &dir_st) < 0 || fstat(src_fd, &src_st) < 0)
                return -errno;
        same_fs = dir_st.st_dev == src_st.st_dev;

        /* linking adds no bytes to the file system, copying does */
        r = dump_guard_check(dir_fd, a, size, same_fs ? 0 : size, ret_why);
        if (r != 0)
                return r;
        if (same_fs) {
                r = label(src_fd, readers, attrs);
                if (r == 0)
                        r = link_fd(src_fd, dir_fd, name);
                /* the same device through another mount: copy after all */
                if (r == -EXDEV) {
                        same_fs = false;
                        r = dump_guard_check(dir_fd, a, size, size, ret_why);
                        if (r != 0)
                                return r;
                }
        }
        if (r == 0 && !same_fs)
                r = publish_by_copy(dir_fd, src_fd, size, readers, attrs, name);
        if (r == -ENOSPC || r == -EDQUOT) {
                *ret_why = "the dump directory's file system is full";
                return DUMP_PUBLISH_E_NO_SPACE;
        }
        if (r == 0)
                *ret_copied = !same_fs;
        return r;
}
