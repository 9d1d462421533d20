/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Lookups in a target's view of the file system that never cross an unexpected mount (target-
 * view.h); run in workers, for target.c and dump-stage.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "agent/support/fileio.h"
#include "agent/targets/target-view.h"
#include "agent/support/test-hooks.h"
#include "agent/targets/target.h"
#include "common/text.h"

#define FDINFO_MAX 4096

static const char WHY_UNSAFE_FS[] =
        "the path lies on a file system served by a user-space or network server (FUSE, NFS, SMB, ...), "
        "where a lookup could wait for as long as that server wants";
static const char WHY_UNLISTED_MOUNT[] = "a mount on the path is not the one the target's mount table lists there";

/* The fdinfo way, for kernels before statx() knew STATX_MNT_ID (5.8). */
static int fd_mount_id_from_fdinfo(int fd, uint64_t *ret) {
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

/* The mount id of @fd, from /proc/self/fdinfo: never a call into @fd's file system. */
static int fd_mount_id(int fd, uint64_t *ret) {
        struct statx stx;

        /* statx() on the fd itself asks nothing of its file system beyond what fstat() would */
        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_MNT_ID, &stx) == 0 &&
            (stx.stx_mask & STATX_MNT_ID)) {
                *ret = stx.stx_mnt_id;
                return 0;
        }
        return fd_mount_id_from_fdinfo(fd, ret);
}

static void cached_table_unref(CachedTable *c);

void view_dir_done(ViewDir *d) {
        d->fd = safe_close(d->fd);
}

void target_view_done(TargetView *v) {
        v->root_fd = safe_close(v->root_fd);
        cached_table_unref(v->cache);
        v->cache = NULL;
        v->mounts = NULL;
}

/* A mount the walk landed on must be listed, and local. */
static int check_mount(const TargetView *v, uint64_t mount_id, const char **ret_why) {
        const MountEntry *e = mount_table_find(v->mounts, mount_id);

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

/*
 * A worker keeps the mount tables it read, with the open mountinfo file each
 * came from: the kernel marks that file (POLLPRI) whenever its namespace's
 * mounts change, so an unchanged table is reused without reading and parsing
 * it again, and a changed one is read again before any use. A table is
 * known by its mount namespace and the root it is seen from (mountinfo lists
 * mount points relative to the reader's root).
 */
#define MOUNT_TABLE_CACHE_SIZE 8

typedef struct CachedTable {
        unsigned refs;          /* the cache's own, and each view's that uses it */
        int fd;                 /* /proc/PID/mountinfo, open */
        dev_t ns_dev, root_dev;
        ino_t ns_ino, root_ino;
        uint64_t root_mount_id;
        MountTable table;
} CachedTable;

static CachedTable *table_cache[MOUNT_TABLE_CACHE_SIZE];
static unsigned table_cache_next;

static void cached_table_unref(CachedTable *c) {
        if (!c || --c->refs > 0)
                return;
        safe_close(c->fd);
        mount_table_done(&c->table);
        free(c);
}

static int parse_table_from(int fd, MountTable *ret) {
        _cleanup_free_ char *buf = NULL;
        size_t size;
        int r;

        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        r = read_fd_bounded(fd, TARGET_VIEW_MOUNTINFO_MAX + 1, &buf, &size);
        if (r < 0)
                return r;
        if (size > TARGET_VIEW_MOUNTINFO_MAX)
                return -E2BIG;
        r = mountinfo_parse(buf, size, ret);
        return r == 0 ? 0 : r == -ENOMEM ? r : -EBADMSG;
}

/* Whether the namespace's mounts changed since the file was last asked (and from now on, since now). */
static bool table_changed(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLPRI };
        int n = poll(&p, 1, 0);

        /* only a change raises an event here (mountinfo is always readable, but POLLIN was not asked) */
        return n < 0 || (n > 0 && (p.revents & (POLLPRI | POLLERR | POLLNVAL)));
}

/* A fresh table from @proc_fd's mountinfo, put in the cache (one slot, the oldest, makes room). */
static int cache_new_table(int proc_fd, const CachedTable *key, CachedTable **ret) {
        CachedTable *c = calloc(1, sizeof(*c));
        unsigned slot;
        int r;

        if (!c)
                return -ENOMEM;
        *c = *key;
        c->refs = 1;
        c->table = (MountTable)MOUNT_TABLE_NULL;
        c->fd = openat(proc_fd, "mountinfo", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (c->fd < 0) {
                r = -errno;
                free(c);
                return r;
        }
        (void)table_changed(c->fd); /* from here on, a change is seen */
        r = parse_table_from(c->fd, &c->table);
        if (r < 0) {
                cached_table_unref(c);
                return r;
        }
        slot = table_cache_next++ % MOUNT_TABLE_CACHE_SIZE;
        cached_table_unref(table_cache[slot]);
        table_cache[slot] = c;
        c->refs++;
        *ret = c;
        return 0;
}

/* The mount table of the process at @proc_fd, seen from its root (@root_fd on @root_mount_id); a reference. */
static int get_mount_table(int proc_fd, int root_fd, uint64_t root_mount_id, CachedTable **ret) {
        CachedTable key = { .root_mount_id = root_mount_id };
        struct stat ns, root;

        if (fstatat(proc_fd, "ns/mnt", &ns, 0) < 0 || fstat(root_fd, &root) < 0)
                return -errno;
        key.ns_dev = ns.st_dev;
        key.ns_ino = ns.st_ino;
        key.root_dev = root.st_dev;
        key.root_ino = root.st_ino;
        for (unsigned i = 0; i < MOUNT_TABLE_CACHE_SIZE; i++) {
                CachedTable *c = table_cache[i];
                if (!c || c->ns_dev != key.ns_dev || c->ns_ino != key.ns_ino || c->root_dev != key.root_dev ||
                    c->root_ino != key.root_ino || c->root_mount_id != key.root_mount_id)
                        continue;
                if (table_changed(c->fd)) {
                        table_cache[i] = NULL; /* views still using it keep their reference */
                        cached_table_unref(c);
                        break;
                }
                c->refs++;
                *ret = c;
                return 0;
        }
        return cache_new_table(proc_fd, &key, ret);
}

/*
 * A chrooted process's own table omits the mount holding its root (and
 * everything else above it). The same mount namespace's init lists every
 * mount; its mount points mean nothing below the chroot, but mount ids and
 * types still tell which file systems a walk may touch.
 */
static int get_namespace_table(int proc_fd, CachedTable **ret) {
        _cleanup_close_ int init_fd = -EBADF, init_root = -EBADF;
        struct stat mine, init;
        uint64_t init_root_mount_id;
        int r;

        if (fstatat(proc_fd, "ns/mnt", &mine, 0) < 0 || stat("/proc/1/ns/mnt", &init) < 0)
                return -errno;
        if (mine.st_ino != init.st_ino || mine.st_dev != init.st_dev)
                return -ENOENT;
        init_fd = open("/proc/1", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (init_fd < 0)
                return -errno;
        init_root = openat(init_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (init_root < 0)
                return -errno;
        r = fd_mount_id(init_root, &init_root_mount_id);
        if (r < 0)
                return r;
        return get_mount_table(init_fd, init_root, init_root_mount_id, ret);
}

static int map_table_error(int r) {
        return r == -ENOENT || r == -ESRCH ? TARGET_VIEW_E_GONE : r;
}

int target_view_open(const Target *t, TargetView *ret, const char **ret_why) {
        _cleanup_(target_view_done) TargetView v = TARGET_VIEW_NULL;
        int r;

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
        r = get_mount_table(t->proc_fd, v.root_fd, v.root_mount_id, &v.cache);
        if (r < 0)
                return map_table_error(r);
        v.mounts = &v.cache->table;
        v.paths_known = mount_table_find(v.mounts, v.root_mount_id) != NULL;
        if (!v.paths_known) {
                cached_table_unref(v.cache);
                v.cache = NULL;
                r = get_namespace_table(t->proc_fd, &v.cache);
                if (r < 0) {
                        *ret_why = "the target's root is not in its mount table (a chroot in another mount "
                                   "namespace), so the agent cannot check the mounts on its paths";
                        return TARGET_VIEW_E_MOUNT;
                }
                v.mounts = &v.cache->table;
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
        for (size_t i = 0; i < v->mounts->n; i++) {
                const MountEntry *e = &v->mounts->entries[i];
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
                const MountEntry *expected = mount_table_covering(v->mounts, path);
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
