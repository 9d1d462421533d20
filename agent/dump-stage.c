/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "acl.h"
#include "cleanup.h"
#include "dump-stage.h"

#define STAGE_PREFIX ".dsagent-dump-"
/* what the target's user may have left behind in the directory while it was theirs */
#define STAGE_REMOVE_DEPTH_MAX 8
#define STAGE_REMOVE_ENTRIES_MAX 10000

static const char ELF_MAGIC[4] = { 0x7f, 'E', 'L', 'F' };

/* The target's /tmp, resolved in its root without following any symlink. */
static int open_target_tmp(const Target *t, int *ret_fd, const char **ret_why) {
        struct open_how how = {
                .flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        _cleanup_close_ int root_fd = -EBADF, fd = -EBADF;
        struct stat st;

        root_fd = openat(t->proc_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return errno == ENOENT || errno == ESRCH ? TARGET_E_GONE : -errno;
        fd = (int)syscall(SYS_openat2, root_fd, "tmp", &how, sizeof(how));
        if (fd < 0 || fstat(fd, &st) < 0) {
                *ret_why = "the target has no usable /tmp";
                return DUMP_STAGE_E_UNUSABLE;
        }
        /* others who may write there could rename our directory unless /tmp is sticky */
        if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
                *ret_why = "the target's /tmp is writable by others and not sticky";
                return DUMP_STAGE_E_UNUSABLE;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int write_record(DumpStage *s, const Target *t, const char *runtime_dir) {
        _cleanup_close_ int fd = -EBADF;
        char line[64];
        int n;

        if (asprintf(&s->record_path, "%s/%s", runtime_dir, s->name) < 0) {
                s->record_path = NULL;
                return -ENOMEM;
        }
        fd = open(s->record_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        n = snprintf(line, sizeof(line), "%d %" PRIu64 "\n", (int)t->pid, t->start_time);
        return write(fd, line, (size_t)n) == n ? 0 : -EIO;
}

/**
 * dump_stage_create() - make a fresh staging directory in the target's /tmp
 *
 * The directory is root's, mode 0700, with an ACL entry that lets the
 * target's user (createdump runs as it) write inside until
 * dump_stage_close_to_target(). Being root's in a sticky /tmp, it cannot be
 * renamed or removed by the target's user; its name is random.
 *
 * Return: 0, DUMP_STAGE_E_UNUSABLE, TARGET_E_GONE, or a negative errno.
 */
int dump_stage_create(const Target *t, const char *runtime_dir, DumpStage **ret, const char **ret_why) {
        _cleanup_(dump_stage_freep) DumpStage *s = NULL;
        uint8_t random[12];
        struct stat st;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->tmp_fd = s->dir_fd = -EBADF;

        r = open_target_tmp(t, &s->tmp_fd, ret_why);
        if (r != 0)
                return r;
        if (getrandom(random, sizeof(random), 0) != sizeof(random))
                return -EIO;
        r = snprintf(s->name, sizeof(s->name), STAGE_PREFIX);
        for (size_t i = 0; i < sizeof(random); i++)
                r += snprintf(s->name + r, sizeof(s->name) - (size_t)r, "%02x", random[i]);

        if (mkdirat(s->tmp_fd, s->name, 0700) < 0) {
                *ret_why = "cannot create a staging directory in the target's /tmp";
                return errno == EROFS || errno == ENOSPC || errno == EDQUOT ? DUMP_STAGE_E_UNUSABLE : -errno;
        }
        s->dir_fd = openat(s->tmp_fd, s->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (s->dir_fd < 0 || fstat(s->dir_fd, &st) < 0 || st.st_uid != 0)
                return -EIO;
        r = write_record(s, t, runtime_dir);
        if (r < 0)
                return r;
        r = acl_grant_dir_user(s->dir_fd, target_euid(t));
        if (r < 0)
                return r;

        snprintf(s->target_path, sizeof(s->target_path), "/tmp/%s/" DUMP_STAGE_FILE, s->name);
        *ret = TAKE_PTR(s);
        return 0;
}

/* From now on the target's user can add, rename or remove nothing in the directory. */
int dump_stage_close_to_target(DumpStage *s) {
        return acl_revoke_dir_users(s->dir_fd);
}

/**
 * dump_stage_open_dump() - the finished dump, checked through its fd
 *
 * Never follows a symlink or blocks on a FIFO; the file must be a regular
 * file with one link, owned by @owner (createdump ran as the target's user),
 * and start like an ELF core.
 *
 * Return: 0, DUMP_STAGE_E_NO_DUMP with a reason, or a negative errno.
 */
int dump_stage_open_dump(DumpStage *s, uid_t owner, int *ret_fd, uint64_t *ret_size, const char **ret_why) {
        _cleanup_close_ int fd = -EBADF;
        char magic[4];
        struct stat st;

        fd = openat(s->dir_fd, DUMP_STAGE_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0) {
                *ret_why = errno == ENOENT ? "the runtime reported success but wrote no dump"
                                           : "the file in the staging directory cannot be opened safely";
                return DUMP_STAGE_E_NO_DUMP;
        }
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != owner) {
                *ret_why = "the staging directory holds something other than the runtime's dump";
                return DUMP_STAGE_E_NO_DUMP;
        }
        if (st.st_size < (off_t)sizeof(magic) || pread(fd, magic, sizeof(magic), 0) != sizeof(magic) ||
            memcmp(magic, ELF_MAGIC, sizeof(magic)) != 0) {
                *ret_why = "the runtime's dump is not an ELF core file";
                return DUMP_STAGE_E_NO_DUMP;
        }
        *ret_fd = TAKE_FD(fd);
        *ret_size = (uint64_t)st.st_size;
        return 0;
}

/*
 * A FIFO planted as the dump file makes createdump block in open() for ever,
 * and with it the runtime's only diagnostics thread. Opening it for reading
 * (without blocking) releases the writer, which then fails on its first
 * write once we have closed it again.
 */
static void release_fifo_writer(int dir_fd, const char *name) {
        struct stat st;
        int fd;

        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISFIFO(st.st_mode))
                return;
        fd = openat(dir_fd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
                close(fd);
}

/* Removes what is below @dir_fd without following links, within fixed bounds. */
static void remove_contents(int dir_fd, unsigned depth, unsigned *budget) {
        _cleanup_close_ int walk_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        struct dirent *de;
        DIR *d;

        if (walk_fd < 0 || !(d = fdopendir(walk_fd)))
                return;
        walk_fd = -EBADF;
        while (*budget > 0 && (de = readdir(d))) {
                int sub;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                (*budget)--;
                release_fifo_writer(dir_fd, de->d_name);
                if (unlinkat(dir_fd, de->d_name, 0) == 0 || errno != EISDIR || depth >= STAGE_REMOVE_DEPTH_MAX)
                        continue;
                sub = openat(dir_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0)
                        continue;
                remove_contents(sub, depth + 1, budget);
                close(sub);
                (void)unlinkat(dir_fd, de->d_name, AT_REMOVEDIR);
        }
        closedir(d);
}

/* Frees the stage and removes its directory: after success, failure, timeout or the target's death. */
DumpStage *dump_stage_free(DumpStage *s) {
        unsigned budget = STAGE_REMOVE_ENTRIES_MAX;

        if (!s)
                return NULL;
        if (s->dir_fd >= 0) {
                (void)dump_stage_close_to_target(s);
                remove_contents(s->dir_fd, 0, &budget);
                (void)unlinkat(s->tmp_fd, s->name, AT_REMOVEDIR);
        }
        if (s->record_path)
                (void)unlink(s->record_path);
        safe_close(s->dir_fd);
        safe_close(s->tmp_fd);
        free(s->record_path);
        free(s);
        return NULL;
}

/* A record left by an agent that died mid-dump: remove its staging directory if its process lives. */
static void clean_one(const char *runtime_dir, const char *name) {
        _cleanup_free_ char *path = NULL;
        unsigned long long start_time;
        DumpStage stage = { .tmp_fd = -EBADF, .dir_fd = -EBADF };
        Target *t = NULL;
        const char *why;
        int pid;
        FILE *f;

        if (asprintf(&path, "%s/%s", runtime_dir, name) < 0)
                return;
        f = fopen(path, "re");
        if (f && fscanf(f, "%d %llu", &pid, &start_time) == 2 && target_open(pid, &t) == 0 &&
            t->start_time == start_time && open_target_tmp(t, &stage.tmp_fd, &why) == 0) {
                memcpy(stage.name, name, strlen(name) + 1);
                stage.dir_fd = openat(stage.tmp_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (stage.dir_fd >= 0) {
                        DumpStage *owned = malloc(sizeof(*owned));
                        if (owned) {
                                *owned = stage;
                                stage.tmp_fd = stage.dir_fd = -EBADF;
                                dump_stage_free(owned);
                        }
                }
        }
        if (f)
                fclose(f);
        safe_close(stage.dir_fd);
        safe_close(stage.tmp_fd);
        target_free(t);
        (void)unlink(path);
}

/**
 * dump_stage_clean_stale() - finish the clean-up an earlier agent could not
 *
 * Run at start-up. Every staging directory is noted in the runtime
 * directory while it exists; notes found now belong to an agent that died.
 */
void dump_stage_clean_stale(const char *runtime_dir) {
        struct dirent *de;
        DIR *d = opendir(runtime_dir);

        if (!d)
                return;
        while ((de = readdir(d)))
                if (strncmp(de->d_name, STAGE_PREFIX, strlen(STAGE_PREFIX)) == 0 &&
                    strlen(de->d_name) < sizeof(((DumpStage *)NULL)->name))
                        clean_one(runtime_dir, de->d_name);
        closedir(d);
}
