/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The staging FIFO of a dump in the target's own /tmp (dump-stage.h): made in a worker, through
 * target-view.h; dump.c asks for it through jobs.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/dumps/acl.h"
#include "common/cleanup.h"
#include "agent/dumps/dump-stage.h"
#include "agent/targets/target-view.h"

#define STAGE_PREFIX ".dsagent-dump-"
#define STALE_PREFIX "stale"

static int map_view_error(int r, const char *view_why, const char **ret_why) {
        switch (r) {
        case TARGET_VIEW_E_UNSAFE_FS:
                *ret_why = view_why;
                return DUMP_STAGE_E_UNSAFE_FS;
        case TARGET_VIEW_E_GONE:
                return DUMP_STAGE_E_GONE;
        case TARGET_VIEW_E_MOUNT:
                *ret_why = view_why ? view_why : "a mount is on the staging directory's path";
                return DUMP_STAGE_E_UNUSABLE;
        case TARGET_VIEW_E_NOT_FOUND:
                *ret_why = "the target has no /tmp";
                return DUMP_STAGE_E_UNUSABLE;
        case TARGET_VIEW_E_SYMLINK:
                *ret_why = "the target's /tmp is a symbolic link";
                return DUMP_STAGE_E_UNUSABLE;
        case TARGET_VIEW_E_NO_ACCESS:
                *ret_why = "the agent may not look into the target's /tmp";
                return DUMP_STAGE_E_UNUSABLE;
        default:
                return r;
        }
}

/*
 * Nobody but the target's user and root may be able to rename or replace
 * the staging directory: /tmp is the user's own and nobody else may write
 * there (or it is sticky), or it is root's, sticky and world-writable, as a
 * shared /tmp is. A directory of root's without the sticky bit, or of a
 * third user, would be the agent writing where it has no business.
 */
static bool parent_is_safe(const struct stat *st, uid_t target_uid) {
        bool sticky = st->st_mode & S_ISVTX, others_write = st->st_mode & (S_IWGRP | S_IWOTH);

        if (!S_ISDIR(st->st_mode))
                return false;
        if (st->st_uid == target_uid && target_uid != 0)
                return sticky || !others_write;
        return st->st_uid == 0 && sticky && (st->st_mode & S_IWOTH);
}

static int open_target_tmp(const Target *t, int *ret_fd, const char **ret_why) {
        _cleanup_(target_view_done) TargetView view = TARGET_VIEW_NULL;
        ViewDir tmp = VIEW_DIR_NULL;
        const char *why = NULL;
        struct stat st;
        int r;

        r = target_view_open(t, &view, &why);
        if (r == 0)
                r = target_view_open_dir(&view, "/tmp", O_PATH, &tmp, &why);
        if (r != 0)
                return map_view_error(r, why, ret_why);
        if (fstat(tmp.fd, &st) < 0) {
                r = -errno;
                view_dir_done(&tmp);
                return r;
        }
        if (!parent_is_safe(&st, target_euid(t))) {
                view_dir_done(&tmp);
                *ret_why = "the target's /tmp is neither its user's own nor a shared sticky directory of root's";
                return DUMP_STAGE_E_UNUSABLE;
        }
        *ret_fd = tmp.fd;
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
        if (fd < 0) {
                free(s->record_path);
                s->record_path = NULL;
                return -errno;
        }
        n = snprintf(line, sizeof(line), "%d %" PRIu64 "\n", (int)t->pid, t->start_time);
        return write(fd, line, (size_t)n) == n ? 0 : -EIO;
}

static int random_name(char *buf, size_t size) {
        uint8_t random[12];
        int n;

        if (getrandom(random, sizeof(random), 0) != sizeof(random))
                return -EIO;
        n = snprintf(buf, size, STAGE_PREFIX);
        for (size_t i = 0; i < sizeof(random); i++)
                n += snprintf(buf + n, size - (size_t)n, "%02x", random[i]);
        return 0;
}

/* What a refused mkdirat() or mkfifoat() in the target's /tmp means. */
static int creation_error(int error, const char **ret_why) {
        switch (error) {
        case EROFS:
                *ret_why = "the target's /tmp is read-only";
                return DUMP_STAGE_E_UNUSABLE;
        case ENOSPC:
        case EDQUOT:
                *ret_why = "the target's /tmp has no room for a directory";
                return DUMP_STAGE_E_UNUSABLE;
        case EOVERFLOW:
                /* a tmpfs mounted in a user namespace that does not map the agent's root */
                *ret_why = "the target's /tmp belongs to a user namespace in which the agent's root has no identity";
                return DUMP_STAGE_E_UNUSABLE;
        case EACCES:
        case EPERM:
                *ret_why = "the agent may not create anything in the target's /tmp";
                return DUMP_STAGE_E_UNUSABLE;
        default:
                return -error;
        }
}

/* Root's and of the kind made: what target_view_open_entry() found without crossing a mount is ours. */
static bool made_by_us(int fd, mode_t kind) {
        struct stat st;
        return fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == kind && st.st_uid == 0;
}

static int make_dir_and_fifo(DumpStage *s, uid_t target_uid, const char **ret_why) {
        ViewDir tmp = { .fd = s->tmp_fd }, dir;
        int r;

        if (mkdirat(s->tmp_fd, s->name, 0700) < 0)
                return creation_error(errno, ret_why);
        r = target_view_open_entry(&tmp, s->name, O_RDONLY | O_DIRECTORY, &s->dir_fd);
        if (r == 0 && !made_by_us(s->dir_fd, S_IFDIR))
                /* someone else's directory under our name: nothing in it is ours to remove */
                s->dir_fd = safe_close(s->dir_fd);
        if (s->dir_fd < 0) {
                *ret_why = "the staging directory was replaced, or a mount was placed on it";
                return r < 0 ? r : DUMP_STAGE_E_UNUSABLE;
        }
        r = acl_set_exact_user_fd(s->dir_fd, ACL_READ | ACL_WRITE | ACL_EXECUTE, target_uid, ACL_EXECUTE);
        if (r == -EOPNOTSUPP) {
                *ret_why = "the target's /tmp keeps no ACLs";
                return DUMP_STAGE_E_UNUSABLE;
        }
        if (r < 0)
                return r;

        if (mkfifoat(s->dir_fd, DUMP_STAGE_FIFO, 0600) < 0)
                return creation_error(errno, ret_why);
        dir = (ViewDir){ .fd = s->dir_fd };
        /* the read end first: a writer that opens it then never blocks */
        r = target_view_open_entry(&dir, DUMP_STAGE_FIFO, O_RDONLY | O_NONBLOCK, &s->fifo_fd);
        if (r != 0 || !made_by_us(s->fifo_fd, S_IFIFO)) {
                *ret_why = "a mount was placed on the staging FIFO";
                return r < 0 ? r : DUMP_STAGE_E_UNUSABLE;
        }
        r = acl_set_exact_user_fd(s->fifo_fd, ACL_READ | ACL_WRITE, target_uid, ACL_WRITE);
        if (r == -EOPNOTSUPP) {
                *ret_why = "the target's /tmp keeps no ACLs";
                return DUMP_STAGE_E_UNUSABLE;
        }
        return r;
}

int dump_stage_create(const Target *t, const char *runtime_dir, DumpStage **ret, const char **ret_why) {
        _cleanup_(dump_stage_freep) DumpStage *s = NULL;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->tmp_fd = s->dir_fd = s->fifo_fd = -EBADF;

        r = open_target_tmp(t, &s->tmp_fd, ret_why);
        if (r != 0)
                return r;
        r = random_name(s->name, sizeof(s->name));
        if (r == 0)
                r = write_record(s, t, runtime_dir);
        if (r == 0)
                r = make_dir_and_fifo(s, target_euid(t), ret_why);
        if (r != 0)
                return r;
        if (!target_is_alive(t))
                return DUMP_STAGE_E_GONE;

        snprintf(s->target_path, sizeof(s->target_path), "/tmp/%s/" DUMP_STAGE_FIFO, s->name);
        *ret = TAKE_PTR(s);
        return 0;
}

int dump_stage_take_fifo(DumpStage *s) {
        return TAKE_FD(s->fifo_fd);
}

void dump_stage_disown(DumpStage *s) {
        if (!s)
                return;
        safe_close(s->fifo_fd);
        safe_close(s->dir_fd);
        safe_close(s->tmp_fd);
        free(s->record_path);
        free(s);
}

int dump_stage_adopt(const char *name, const char *target_path, const char *record_path, int tmp_fd, int dir_fd,
                     int fifo_fd, DumpStage **ret) {
        DumpStage *s = calloc(1, sizeof(*s));

        if (!s || strlen(name) >= sizeof(s->name) || strlen(target_path) >= sizeof(s->target_path) ||
            !(s->record_path = strdup(record_path))) {
                free(s);
                safe_close(tmp_fd);
                safe_close(dir_fd);
                safe_close(fifo_fd);
                return -ENOMEM;
        }
        s->tmp_fd = tmp_fd;
        s->dir_fd = dir_fd;
        s->fifo_fd = fifo_fd;
        memcpy(s->name, name, strlen(name) + 1);
        memcpy(s->target_path, target_path, strlen(target_path) + 1);
        *ret = s;
        return 0;
}

/* By name, in a directory nobody else may write: what is there is ours. */
static void remove_ours(int tmp_fd, int dir_fd, const char *name) {
        if (dir_fd >= 0)
                (void)unlinkat(dir_fd, DUMP_STAGE_FIFO, 0);
        (void)unlinkat(tmp_fd, name, AT_REMOVEDIR);
}

DumpStage *dump_stage_free(DumpStage *s) {
        if (!s)
                return NULL;
        safe_close(s->fifo_fd);
        if (s->tmp_fd >= 0 && s->name[0])
                remove_ours(s->tmp_fd, s->dir_fd, s->name);
        if (s->record_path)
                (void)unlink(s->record_path);
        safe_close(s->dir_fd);
        safe_close(s->tmp_fd);
        free(s->record_path);
        free(s);
        return NULL;
}

/* A note left by an agent that died mid-dump, set aside as @note (STALE_PREFIX and the directory's @name):
 * remove its staging directory if its process lives. */
static void clean_one(const char *runtime_dir, const char *note, const char *name) {
        _cleanup_(target_unrefp) Target *t = NULL;
        _cleanup_close_ int tmp_fd = -EBADF, dir_fd = -EBADF;
        _cleanup_free_ char *path = NULL;
        unsigned long long start_time;
        const char *why;
        int pid, fields = 0;
        FILE *f;

        if (asprintf(&path, "%s/%s", runtime_dir, note) < 0)
                return;
        f = fopen(path, "re");
        if (f) {
                fields = fscanf(f, "%d %llu", &pid, &start_time);
                fclose(f);
        }
        if (fields == 2 && target_open(pid, &t) == 0 && t->start_time == start_time &&
            open_target_tmp(t, &tmp_fd, &why) == 0) {
                ViewDir tmp = { .fd = tmp_fd };
                if (target_view_open_entry(&tmp, name, O_RDONLY | O_DIRECTORY, &dir_fd) == 0 &&
                    made_by_us(dir_fd, S_IFDIR))
                        remove_ours(tmp_fd, dir_fd, name);
        }
        (void)unlink(path);
}

static bool is_note(const char *name) {
        return strncmp(name, STAGE_PREFIX, strlen(STAGE_PREFIX)) == 0 &&
               strlen(name) < sizeof(((DumpStage *)NULL)->name);
}

void dump_stage_set_aside_stale(const char *runtime_dir) {
        _cleanup_close_ int dir_fd = open(runtime_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        struct dirent *de;
        char stale[sizeof(STALE_PREFIX) + NAME_MAX];
        DIR *d;

        int fd;

        if (dir_fd < 0)
                return;
        fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return;
        }
        while ((de = readdir(d)))
                if (is_note(de->d_name)) {
                        snprintf(stale, sizeof(stale), STALE_PREFIX "%s", de->d_name);
                        (void)renameat(dir_fd, de->d_name, dir_fd, stale);
                }
        closedir(d);
}

void dump_stage_clean_stale(const char *runtime_dir) {
        struct dirent *de;
        DIR *d = opendir(runtime_dir);

        if (!d)
                return;
        while ((de = readdir(d)))
                if (strncmp(de->d_name, STALE_PREFIX, strlen(STALE_PREFIX)) == 0 &&
                    is_note(de->d_name + strlen(STALE_PREFIX)))
                        clean_one(runtime_dir, de->d_name, de->d_name + strlen(STALE_PREFIX));
        closedir(d);
}
