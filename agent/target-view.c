/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "fileio.h"
#include "target-view.h"
#include "test-hooks.h"
#include "target.h"
#include "text.h"

#define FDINFO_MAX 4096

static const char WHY_UNSAFE_FS[] =
        "the path lies on a file system served by a user-space or network server (FUSE, NFS, SMB, ...), "
        "where a lookup could wait for as long as that server wants";
static const char WHY_UNLISTED_MOUNT[] = "a mount on the path is not the one the target's mount table lists there";

int fd_mount_id(int fd, uint64_t *ret) {
        _cleanup_free_ char *info = NULL;
        char path[48];
        size_t size;
        const char *p;
        int r;

        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
        r = read_file_at(AT_FDCWD, path, FDINFO_MAX, &info, &size);
        if (r < 0)
                return r;
        p = strstr(info, "\nmnt_id:");
        if (!p)
                return -EBADMSG;
        p += strlen("\nmnt_id:");
        p += strspn(p, " \t");
        {
                _cleanup_free_ char *digits = strndup(p, strspn(p, "0123456789"));
                uint64_t id;

                if (!digits)
                        return -ENOMEM;
                if (parse_u64(digits, &id) < 0)
                        return -EBADMSG;
                *ret = id;
        }
        return 0;
}

void view_dir_done(ViewDir *d) {
        d->fd = safe_close(d->fd);
}

void target_view_done(TargetView *v) {
        v->root_fd = safe_close(v->root_fd);
        mount_table_done(&v->mounts);
}

/* A mount the walk landed on must be listed, and local. */
static int check_mount(const TargetView *v, uint64_t mount_id, const char **ret_why) {
        const MountEntry *e = mount_table_find(&v->mounts, mount_id);

        if (!e) {
                *ret_why = WHY_UNLISTED_MOUNT;
                return TARGET_VIEW_E_MOUNT;
        }
        if (mount_fs_type_is_unsafe(e->fs_type) && !test_hook_fs_type_trusted(e->fs_type)) {
                *ret_why = WHY_UNSAFE_FS;
                return TARGET_VIEW_E_UNSAFE_FS;
        }
        return 0;
}

static int read_mount_table(int proc_fd, MountTable *ret) {
        _cleanup_free_ char *buf = NULL;
        size_t size;
        int r;

        r = read_file_at(proc_fd, "mountinfo", TARGET_VIEW_MOUNTINFO_MAX + 1, &buf, &size);
        if (r < 0)
                return r;
        if (size > TARGET_VIEW_MOUNTINFO_MAX)
                return -E2BIG;
        r = mountinfo_parse(buf, size, ret);
        return r == 0 ? 0 : r == -ENOMEM ? r : -EBADMSG;
}

/*
 * A chrooted process's own table omits the mount holding its root (and
 * everything else above it). The same mount namespace's init lists every
 * mount; its mount points mean nothing below the chroot, but mount ids and
 * types still tell which file systems a walk may touch.
 */
static int read_namespace_table(int proc_fd, MountTable *ret) {
        struct stat mine, init;
        _cleanup_close_ int init_fd = -EBADF;

        if (fstatat(proc_fd, "ns/mnt", &mine, 0) < 0 || stat("/proc/1/ns/mnt", &init) < 0)
                return -errno;
        if (mine.st_ino != init.st_ino || mine.st_dev != init.st_dev)
                return -ENOENT;
        init_fd = open("/proc/1", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (init_fd < 0)
                return -errno;
        return read_mount_table(init_fd, ret);
}

int target_view_open(const Target *t, TargetView *ret, const char **ret_why) {
        _cleanup_(target_view_done) TargetView v = TARGET_VIEW_NULL;
        int r;

        r = read_mount_table(t->proc_fd, &v.mounts);
        if (r == -ENOENT || r == -ESRCH)
                return TARGET_VIEW_E_GONE;
        if (r < 0)
                return r;
        v.root_fd = openat(t->proc_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (v.root_fd < 0) {
                if (errno == EACCES || errno == EPERM) {
                        *ret_why = "the agent may not look into the process's file system";
                        return TARGET_VIEW_E_NO_ACCESS;
                }
                return errno == ENOENT || errno == ESRCH ? TARGET_VIEW_E_GONE : -errno;
        }
        r = fd_mount_id(v.root_fd, &v.root_mount_id);
        if (r < 0)
                return r;
        v.paths_known = mount_table_find(&v.mounts, v.root_mount_id) != NULL;
        if (!v.paths_known) {
                mount_table_done(&v.mounts);
                if (read_namespace_table(t->proc_fd, &v.mounts) < 0) {
                        *ret_why = "the target's root is not in its mount table (a chroot in another mount "
                                   "namespace), so the agent cannot check the mounts on its paths";
                        return TARGET_VIEW_E_MOUNT;
                }
        }
        r = check_mount(&v, v.root_mount_id, ret_why);
        if (r != 0)
                return r;
        if (!target_is_alive(t))
                return TARGET_VIEW_E_GONE;

        *ret = v;
        v = (TargetView)TARGET_VIEW_NULL;
        return 0;
}

/* Before any lookup: no mount on @path's way may be of an unsafe type, shadowed or not. */
static int precheck_path(const TargetView *v, const char *path, const char **ret_why) {
        if (!v->paths_known)
                return 0; /* the walk checks each mount it lands on all the same */
        for (size_t i = 0; i < v->mounts.n; i++) {
                const MountEntry *e = &v->mounts.entries[i];
                size_t len = strlen(e->mount_point);
                bool on_path = strcmp(e->mount_point, "/") == 0 ||
                               (strncmp(path, e->mount_point, len) == 0 && (path[len] == '/' || path[len] == '\0'));
                if (on_path && mount_fs_type_is_unsafe(e->fs_type) && !test_hook_fs_type_trusted(e->fs_type)) {
                        *ret_why = WHY_UNSAFE_FS;
                        return TARGET_VIEW_E_UNSAFE_FS;
                }
        }
        return 0;
}

static int map_open_error(int error) {
        switch (error) {
        case ENOENT:
        case ENOTDIR:
                return TARGET_VIEW_E_NOT_FOUND;
        case ELOOP:
                return TARGET_VIEW_E_SYMLINK;
        case EACCES:
        case EPERM:
                return TARGET_VIEW_E_NO_ACCESS;
        case EXDEV:
                return TARGET_VIEW_E_MOUNT;
        default:
                return -error;
        }
}

/* One component below @dir_fd, never following a symlink; crossing a mount only if @may_cross. */
static int open_component(int dir_fd, const char *name, int flags, bool may_cross, int *ret_fd, bool *ret_crossed) {
        struct open_how how = {
                .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        int fd;

        *ret_crossed = false;
        fd = (int)syscall(SYS_openat2, dir_fd, name, &how, sizeof(how));
        if (fd < 0 && errno == EXDEV && may_cross) {
                how.resolve &= ~(uint64_t)RESOLVE_NO_XDEV;
                fd = (int)syscall(SYS_openat2, dir_fd, name, &how, sizeof(how));
                *ret_crossed = fd >= 0;
        }
        if (fd < 0)
                return map_open_error(errno);
        *ret_fd = fd;
        return 0;
}

/* Copies the next component of @path (after *@pos) into @buf, skipping "." and empty ones; false at the end. */
static bool next_component(const char *path, size_t *pos, char *buf, size_t size) {
        for (;;) {
                size_t start = *pos + strspn(path + *pos, "/"), len = strcspn(path + start, "/");

                *pos = start + len;
                if (len == 0)
                        return false;
                if (len == 1 && path[start] == '.')
                        continue;
                if (len >= size)
                        len = size - 1; /* the open fails with ENOENT: NAME_MAX is smaller than the buffer */
                memcpy(buf, path + start, len);
                buf[len] = '\0';
                return true;
        }
}

/* Steps from @cur into @name, checking whatever mount it lands on. */
static int walk_step(const TargetView *v, ViewDir *cur, const char *name, const char **ret_why) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        bool crossed;
        int r;

        r = open_component(cur->fd, name, O_PATH, true, &fd, &crossed);
        if (r != 0)
                return r;
        if (crossed) {
                r = fd_mount_id(fd, &cur->mount_id);
                if (r < 0)
                        return r;
                r = check_mount(v, cur->mount_id, ret_why);
                if (r != 0)
                        return r;
        }
        /* only now that the mount is known to be local may its file system be asked */
        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISLNK(st.st_mode))
                return TARGET_VIEW_E_SYMLINK;
        if (!S_ISDIR(st.st_mode))
                return TARGET_VIEW_E_NOT_FOUND;
        safe_close(cur->fd);
        cur->fd = TAKE_FD(fd);
        return 0;
}

int target_view_open_dir(const TargetView *v, const char *path, int open_flags, ViewDir *ret, const char **ret_why) {
        _cleanup_(view_dir_done) ViewDir cur = VIEW_DIR_NULL;
        char name[512];
        size_t pos = 0;
        int r;

        if (path[0] != '/' || strstr(path, "/../") || (strlen(path) >= 3 && strcmp(path + strlen(path) - 3, "/..") == 0)) {
                *ret_why = "the path is not absolute, or goes up with ..";
                return TARGET_VIEW_E_NOT_FOUND;
        }
        r = precheck_path(v, path, ret_why);
        if (r != 0)
                return r;

        cur.fd = fcntl(v->root_fd, F_DUPFD_CLOEXEC, 3);
        if (cur.fd < 0)
                return -errno;
        cur.mount_id = v->root_mount_id;
        while (next_component(path, &pos, name, sizeof(name))) {
                r = walk_step(v, &cur, name, ret_why);
                if (r != 0)
                        return r;
        }

        /* the walk ended where the table says @path is: no mount was taken away or moved meanwhile */
        if (v->paths_known) {
                const MountEntry *expected = mount_table_covering(&v->mounts, path);
                if (!expected || expected->id != cur.mount_id) {
                        *ret_why = WHY_UNLISTED_MOUNT;
                        return TARGET_VIEW_E_MOUNT;
                }
        }
        if (open_flags != O_PATH) {
                int fd = openat(cur.fd, ".", open_flags | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return map_open_error(errno);
                safe_close(cur.fd);
                cur.fd = fd;
        }
        *ret = cur;
        cur = (ViewDir)VIEW_DIR_NULL;
        return 0;
}

int target_view_open_entry(const ViewDir *dir, const char *name, int flags, int *ret_fd) {
        bool crossed;

        if (strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                return -EINVAL;
        return open_component(dir->fd, name, flags, false, ret_fd, &crossed);
}
