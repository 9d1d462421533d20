/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dump_dir's guards and the naming and labelling of a finished dump (dump-publish.h); the dump
 * writer and the dump command call it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "agent/dumps/dump-publish.h"
#include "common/text.h"

/* Root's, and writable by root alone (@sticky: or by anyone, with the sticky bit, as /tmp is). */
static bool dir_is_roots(const struct stat *st, bool sticky) {
        return st->st_uid == 0 && (!(st->st_mode & (S_IWGRP | S_IWOTH)) || (sticky && (st->st_mode & S_ISVTX)));
}

/* Links one walk of dump_dir's path may follow, as the kernel's own bound */
#define DUMP_DIR_LINKS_MAX 40

/*
 * Opens the directory @path names, from @dir_fd (absolute: from "/"), one component at a time
 * and never through what another user could have put or changed on the way: every directory
 * passed must be root's and writable by no one else, unless sticky as /tmp is (where no one but
 * root can move root's entries); a link is followed only when it is root's (a user's link in
 * /tmp, or in a group's directory, would take dump_dir, and retention with it, into any
 * directory of root's whose name fits). When @ret_rest is given, the walk may stop at the first
 * component that does not exist: the deepest directory found is returned, and *@ret_rest points
 * at the rest of @path (from @path, which must outlive it); else a missing component is -ENOENT.
 * Return: 0, DUMP_PUBLISH_E_DIRECTORY, or a negative errno (-ELOOP: too many links).
 */
static int walk_dir_path(int dir_fd, const char *path, unsigned *links, int *ret_fd, const char **ret_rest) {
        _cleanup_close_ int fd = -EBADF;
        char name[NAME_MAX + 1];
        const char *p = path;

        fd = openat(path[0] == '/' ? AT_FDCWD : dir_fd, path[0] == '/' ? "/" : ".",
                    O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        for (;;) {
                _cleanup_close_ int child = -EBADF;
                struct stat st;
                size_t n;

                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                n = strcspn(p, "/");
                if (n > NAME_MAX)
                        return -ENAMETOOLONG;
                memcpy(name, p, n);
                name[n] = '\0';
                if (fstat(fd, &st) < 0)
                        return -errno;
                if (!dir_is_roots(&st, true))
                        return DUMP_PUBLISH_E_DIRECTORY;
                child = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (child < 0 && errno == ENOENT && ret_rest) {
                        *ret_rest = p;
                        break;
                }
                if (child < 0 && (errno == ELOOP || errno == ENOTDIR) &&
                    fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
                        char target[PATH_MAX];
                        ssize_t len;
                        int r;

                        if (st.st_uid != 0)
                                return DUMP_PUBLISH_E_DIRECTORY; /* a user's link: never followed */
                        if (++*links > DUMP_DIR_LINKS_MAX)
                                return -ELOOP;
                        len = readlinkat(fd, name, target, sizeof(target) - 1);
                        if (len < 0)
                                return -errno;
                        target[len] = '\0';
                        r = walk_dir_path(fd, target, links, &child, NULL);
                        if (r != 0)
                                return r;
                }
                if (child < 0)
                        return -errno;
                safe_close(fd);
                fd = TAKE_FD(child);
                p += n;
        }
        if (ret_rest && !*ret_rest)
                *ret_rest = p;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int root_dir_open(const char *path, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        unsigned links = 0;
        struct stat st;
        int r;

        if (path[0] != '/')
                return -EINVAL;
        r = walk_dir_path(AT_FDCWD, path, &links, &fd, NULL);
        if (r != 0)
                return r;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!dir_is_roots(&st, false))
                return DUMP_PUBLISH_E_DIRECTORY;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/*
 * mkdir -p for the components of @rest below @parent_fd, each root's and 0711, never through a symbolic
 * link. Each directory made in must be root's alone (or sticky and root's, as /tmp): a user who could
 * write there could move ours away and put theirs in its place; one a user made first (in /tmp, say) is
 * not root's and is refused. Return: the last one's fd, or DUMP_PUBLISH_E_DIRECTORY, or a negative errno.
 */
static int make_missing_dirs(int parent_fd, const char *rest, int *ret_fd) {
        _cleanup_close_ int fd = parent_fd;
        char name[NAME_MAX + 1];
        struct stat st;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!dir_is_roots(&st, true))
                return DUMP_PUBLISH_E_DIRECTORY;
        while (*rest) {
                size_t n = strcspn(rest, "/");
                _cleanup_close_ int child = -EBADF;
                bool made;

                if (n == 0 || n > NAME_MAX || (n == 1 && rest[0] == '.') || (n == 2 && rest[0] == '.' && rest[1] == '.'))
                        return -EINVAL;
                memcpy(name, rest, n);
                name[n] = '\0';
                rest += n + (rest[n] == '/');
                made = mkdirat(fd, name, 0711) == 0;
                if (!made && errno != EEXIST)
                        return -errno;
                child = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (child < 0 || fstat(child, &st) < 0)
                        return -errno;
                if (!dir_is_roots(&st, *rest != '\0'))
                        return DUMP_PUBLISH_E_DIRECTORY;
                /* the umask may have taken x from others, who reach their dumps through it */
                if (made && fchmod(child, 0711) < 0)
                        return -errno;
                safe_close(fd);
                fd = TAKE_FD(child);
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int dump_dir_open(const char *path, int *ret_fd, const char **ret_why) {
        _cleanup_close_ int fd = -EBADF, parent_fd = -EBADF;
        const char *rest = NULL;
        unsigned links = 0;
        struct stat st;
        int r;

        if (path[0] != '/') {
                *ret_why = "the dump directory cannot be opened";
                return -EINVAL;
        }
        r = walk_dir_path(AT_FDCWD, path, &links, &parent_fd, &rest);
        if (r == DUMP_PUBLISH_E_DIRECTORY) {
                *ret_why = "the dump directory's path passes a directory others may write, or a link that is not "
                           "root's";
                return r;
        }
        if (r < 0) {
                *ret_why = "the dump directory cannot be opened";
                return r;
        }
        if (*rest) {
                r = make_missing_dirs(TAKE_FD(parent_fd), rest, &fd);
                if (r == DUMP_PUBLISH_E_DIRECTORY) {
                        *ret_why = "the dump directory would be made where others may write";
                        return r;
                }
                if (r < 0) {
                        *ret_why = "the dump directory cannot be created";
                        return r;
                }
        } else
                fd = TAKE_FD(parent_fd);
        if (fstat(fd, &st) < 0) {
                *ret_why = "the dump directory cannot be opened";
                return -errno;
        }
        if (!dir_is_roots(&st, false)) {
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

int dump_space_measure(int dir_fd, const PolicySize *max_use, const PolicySize *keep_free, uint64_t in_flight,
                       DumpSpace *ret) {
        struct statvfs vfs;
        DumpSpace s = { .in_flight = in_flight, .max_use_setting = *max_use, .keep_free_setting = *keep_free };
        int r;

        if (fstatvfs(dir_fd, &vfs) < 0)
                return -errno;
        s.fs_size = (uint64_t)vfs.f_blocks * vfs.f_frsize;
        s.avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
        r = dump_dir_usage(dir_fd, &s.used);
        if (r < 0)
                return r;
        s.max_use = size_limit(max_use, s.fs_size);
        s.keep_free = size_limit(keep_free, s.fs_size);
        *ret = s;
        return 0;
}

/* "10.0 GiB", or "10.0 GiB (10%)" for a share of the file system. */
static void format_limit(uint64_t bytes, const PolicySize *setting, char *buf, size_t size) {
        char text[32];

        text_format_size(bytes, text, sizeof(text));
        if (setting->bytes == 0 && setting->percent > 0)
                snprintf(buf, size, "%s (%u%%)", text, setting->percent);
        else
                snprintf(buf, size, "%s", text);
}

void dump_space_format(const DumpSpace *s, char *buf, size_t size) {
        char used[32], flight[32], max_use[48], avail[32], fs[32], keep_free[48];

        text_format_size(s->used, used, sizeof(used));
        text_format_size(s->in_flight, flight, sizeof(flight));
        format_limit(s->max_use, &s->max_use_setting, max_use, sizeof(max_use));
        text_format_size(s->avail, avail, sizeof(avail));
        text_format_size(s->fs_size, fs, sizeof(fs));
        format_limit(s->keep_free, &s->keep_free_setting, keep_free, sizeof(keep_free));
        snprintf(buf, size, "used %s%s%s%s of max_use %s; free %s of %s, keep_free %s", used,
                 s->in_flight ? " and " : "", s->in_flight ? flight : "", s->in_flight ? " being written" : "",
                 max_use, avail, fs, keep_free);
}

const char *dump_space_full_why(int dir_fd, const PolicySize *max_use, const PolicySize *keep_free, uint64_t in_flight,
                                const char *what, char *buf, size_t size) {
        char numbers[DUMP_SPACE_NUMBERS_MAX];
        DumpSpace s;

        if (dump_space_measure(dir_fd, max_use, keep_free, in_flight, &s) < 0)
                return what;
        dump_space_format(&s, numbers, sizeof(numbers));
        snprintf(buf, size, "%s (%s)", what, numbers);
        return buf;
}

char *dump_no_space_answer(const Policy *p, const char *why) {
        bool readers_remove = false;
        char *text = NULL;

        for (size_t i = 0; i < p->n_collect; i++)
                readers_remove = readers_remove || p->collect[i].artifacts.readers_may_remove;
        for (size_t i = 0; i < p->n_on_start; i++)
                readers_remove = readers_remove || p->on_start[i].artifacts.readers_may_remove;
        if (asprintf(&text,
                     "%s. To make room: 'dsctl dumps' lists what you may read in %s, and 'dsctl dumps --remove PATH' "
                     "removes the dumps you asked for%s; for the rest ask root, who may remove any, or raise max_use "
                     "or lower keep_free in the policy's [agent]",
                     why, p->agent.dump_dir,
                     readers_remove ? " and the artifacts of the tables that let their readers remove them" : "") < 0)
                return NULL;
        return text;
}

/**
 * dump_space_headroom_of() - how many more bytes may dumps take, as @s measured?
 *
 * max_use counts the published dumps and those in flight; keep_free is what
 * the file system must still have free. The headroom is what is left under
 * both; 0 means "not one byte more".
 *
 * Return: 0, or DUMP_PUBLISH_E_NO_SPACE with @why (which limit, and the numbers) when one is
 * already broken.
 */
static int dump_space_headroom_of(const DumpSpace *s, uint64_t *ret_headroom, char *why, size_t why_size) {
        char numbers[DUMP_SPACE_NUMBERS_MAX];

        if (s->used > s->max_use || s->in_flight > s->max_use - s->used || s->avail < s->keep_free) {
                dump_space_format(s, numbers, sizeof(numbers));
                snprintf(why, why_size, "%s (%s)",
                         s->avail < s->keep_free ? "the dump does not fit: it would leave less free space than keep_free"
                                                 : "dumps would take more than max_use",
                         numbers);
                return DUMP_PUBLISH_E_NO_SPACE;
        }
        *ret_headroom = s->max_use - s->used - s->in_flight < s->avail - s->keep_free ? s->max_use - s->used - s->in_flight
                                                                                      : s->avail - s->keep_free;
        return 0;
}

int dump_space_headroom(int dir_fd, const PolicySize *max_use, const PolicySize *keep_free, uint64_t in_flight,
                        uint64_t *ret_headroom, char *why, size_t why_size) {
        DumpSpace s;
        int r;

        r = dump_space_measure(dir_fd, max_use, keep_free, in_flight, &s);
        if (r < 0)
                return r;
        return dump_space_headroom_of(&s, ret_headroom, why, why_size);
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
        char requester[16], charged[16], pid[16], uid[16], id[24];
        int r = 0;

        snprintf(requester, sizeof(requester), "%u", (unsigned)a->requester);
        snprintf(charged, sizeof(charged), "%u", (unsigned)a->charged);
        snprintf(pid, sizeof(pid), "%d", (int)a->target_pid);
        snprintf(uid, sizeof(uid), "%u", (unsigned)a->target_uid);
        snprintf(id, sizeof(id), "%016" PRIx64, a->request_id);
        if (r == 0) r = set_attribute(fd, "user.dsagent.requester_uid", requester);
        if (r == 0 && a->charged != a->requester) r = set_attribute(fd, "user.dsagent.charged_uid", charged);
        if (r == 0) r = set_attribute(fd, "user.dsagent.target_pid", pid);
        if (r == 0) r = set_attribute(fd, "user.dsagent.target_uid", uid);
        if (r == 0) r = set_attribute(fd, "user.dsagent.target_unit", a->target_unit);
        if (r == 0) r = set_attribute(fd, "user.dsagent.target_exe", a->target_exe);
        if (r == 0) r = set_attribute(fd, "user.dsagent.target_name", a->target_name);
        if (r == 0) r = set_attribute(fd, "user.dsagent.dump_type", a->dump_type);
        if (r == 0) r = set_attribute(fd, "user.dsagent.request_id", id);
        if (r == 0) r = set_attribute(fd, "user.dsagent.origin", a->origin);
        if (r == 0) r = set_attribute(fd, "user.dsagent.table", a->table);
        return r;
}

/* Owner, ACL and labels go on the fd while the file has no name in dump_dir. */
static int label(int fd, const AclGrant *readers, const DumpAttributes *attrs) {
        int r;

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

void dump_name_part(const char *src, char *buf, size_t size) {
        size_t n = 0;

        for (; src && *src && n + 1 < size; src++)
                if ((*src >= 'a' && *src <= 'z') || (*src >= 'A' && *src <= 'Z') || (*src >= '0' && *src <= '9') ||
                    *src == '-' || *src == '_' || (*src == '.' && n > 0))
                        buf[n++] = *src;
        if (n == 0)
                snprintf(buf, size, "process");
        else
                buf[n] = '\0';
}

/* ENOSPC and EDQUOT as the guards' code; anything else as it is. */
static int publish_result(int r) {
        return r == -ENOSPC || r == -EDQUOT ? DUMP_PUBLISH_E_NO_SPACE : r;
}

int dump_publish_fd(int dir_fd, int fd, const AclGrant *readers, const DumpAttributes *attrs, const char *name) {
        int r;

        r = label(fd, readers, attrs);
        if (r == 0)
                r = link_fd(fd, dir_fd, name);
        return publish_result(r);
}

/* The @try-th name of an artifact: the first has no number, the next ".2", ".3" before the suffix. */
static void table_name(const DumpAttributes *attrs, const char *kind, const char *origin, const char *table,
                       const char *suffix, unsigned try, char *buf, size_t size) {
        char name[DUMP_NAME_PART_SIZE], stamp[32], number[16] = "";
        time_t now = time(NULL);
        struct tm tm;

        dump_name_part(attrs->target_name, name, sizeof(name));
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
        if (try > 0)
                snprintf(number, sizeof(number), ".%u", try + 1);
        snprintf(buf, size, "%s.%s.%d.%s-%s.%s%s%s", kind, name, (int)attrs->target_pid, origin, table, stamp,
                 number, suffix);
}

int dump_publish_for_table(int dir_fd, int fd, const AclGrant *readers, const DumpAttributes *attrs,
                           const char *kind, const char *origin, const char *table, const char *suffix,
                           char *ret_name, size_t name_size) {
        DumpAttributes labelled = *attrs;
        char name[256];
        int r;

        labelled.origin = origin;
        labelled.table = table;
        /* labelled once: the xattrs are set with XATTR_CREATE, so a second labelling of the same file
         * fails; only the name is tried again */
        r = label(fd, readers, &labelled);
        if (r != 0)
                return publish_result(r);
        r = -EEXIST;
        for (unsigned try = 0; try < DUMP_PUBLISH_NAME_TRIES && r == -EEXIST; try++) {
                table_name(attrs, kind, origin, table, suffix, try, name, sizeof(name));
                r = link_fd(fd, dir_fd, name);
        }
        if (r == -ENOSPC || r == -EDQUOT)
                return DUMP_PUBLISH_E_NO_SPACE;
        if (r == 0)
                snprintf(ret_name, name_size, "%s", name);
        return publish_result(r);
}

int dump_publish_trace(int dir_fd, int fd, const AclGrant *readers, const DumpAttributes *attrs, const char *origin,
                       const char *table, char *ret_name, size_t name_size) {
        return dump_publish_for_table(dir_fd, fd, readers, attrs, "trace", origin, table, ".nettrace", ret_name,
                                      name_size);
}
