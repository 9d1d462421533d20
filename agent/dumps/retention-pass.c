/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One retention pass over dump_dir, in a worker (retention-pass.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "agent/dumps/dump-publish.h"
#include "agent/dumps/retention-pass.h"
#include "agent/dumps/retention-plan.h"
#include "agent/support/test-hooks.h"
#include "common/text.h"

/* One artifact as listed, with the labels its records name. */
typedef struct Artifact {
        char *name;
        dev_t dev;
        ino_t ino;
        int32_t target_pid;
        uint32_t target_uid;
        uint32_t requester;     /* as its label says, root too; UINT32_MAX: none */
        char origin[16], table[65], dump_type[16];
} Artifact;

typedef struct Listing {
        Artifact *artifacts;
        RetentionEntry *entries;
        size_t n, allocated;
} Listing;

static void listing_done(Listing *l) {
        for (size_t i = 0; i < l->n; i++)
                free(l->artifacts[i].name);
        free(l->artifacts);
        free(l->entries);
}

/* A label's text in @buf (empty when absent or too long for it). */
static void read_label(int fd, const char *key, char *buf, size_t size) {
        ssize_t n = fgetxattr(fd, key, buf, size - 1);

        buf[n > 0 ? n : 0] = '\0';
}

/* A label that is a number, or @absent. */
static uint64_t read_number(int fd, const char *key, uint64_t absent) {
        char text[24];
        uint64_t v;

        read_label(fd, key, text, sizeof(text));
        return text[0] && parse_u64(text, &v) == 0 ? v : absent;
}

/* Its table's place in retention_tables(), or -1: no table of the policy's (any more). */
static int table_index(const Policy *p, const char *origin, const char *table) {
        size_t i;

        return policy_table_artifacts(p, origin, table, &i) ? (int)i : -1;
}

static uint64_t size_of(const PolicySize *s, uint64_t fs_size) {
        return s->bytes ? s->bytes : fs_size / 100 * s->percent;
}

/* The tables' budgets and whether they yield, as policy_table_artifacts() numbers them. */
static RetentionTable *retention_tables(const Policy *p, uint64_t fs_size) {
        RetentionTable *t = calloc(p->n_collect + p->n_on_start + 1, sizeof(RetentionTable));

        for (size_t i = 0; t && i < p->n_collect + p->n_on_start; i++) {
                const PolicyTableArtifacts *a =
                        i < p->n_collect ? &p->collect[i].artifacts : &p->on_start[i - p->n_collect].artifacts;
                t[i] = (RetentionTable){ .max_use = size_of(&a->max_use, fs_size), .yields = a->yield_to_dumps };
        }
        return t;
}

static int listing_add(Listing *l, const Policy *p, int dir_fd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        Artifact *a;
        uint64_t requester;

        fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return 0; /* gone meanwhile, or not an artifact: nothing of the agent's to keep or remove */
        if (l->n == l->allocated) {
                size_t more = l->allocated ? 2 * l->allocated : 64;
                Artifact *grown_a = realloc(l->artifacts, more * sizeof(Artifact));
                RetentionEntry *grown_e = grown_a ? realloc(l->entries, more * sizeof(RetentionEntry)) : NULL;

                if (grown_a)
                        l->artifacts = grown_a;
                if (!grown_e)
                        return -ENOMEM;
                l->entries = grown_e;
                l->allocated = more;
        }
        a = &l->artifacts[l->n];
        *a = (Artifact){ .dev = st.st_dev, .ino = st.st_ino, .name = strdup(name) };
        if (!a->name)
                return -ENOMEM;
        read_label(fd, "user.dsagent.origin", a->origin, sizeof(a->origin));
        read_label(fd, "user.dsagent.table", a->table, sizeof(a->table));
        read_label(fd, "user.dsagent.dump_type", a->dump_type, sizeof(a->dump_type));
        a->target_pid = (int32_t)read_number(fd, "user.dsagent.target_pid", 0);
        a->target_uid = (uint32_t)read_number(fd, "user.dsagent.target_uid", UINT32_MAX);
        requester = read_number(fd, "user.dsagent.requester_uid", UINT32_MAX);
        a->requester = requester < UINT32_MAX ? (uint32_t)requester : UINT32_MAX;
        /* whose it is for the budgets and max_files: the principal charged for the request, where it is
         * not the uid that asked (a user's subordinate uids are the user) */
        requester = read_number(fd, "user.dsagent.charged_uid", requester);
        l->entries[l->n] = (RetentionEntry){
                .mtime_usec = (uint64_t)st.st_mtim.tv_sec * 1000000ULL + (uint64_t)st.st_mtim.tv_nsec / 1000,
                .bytes = (uint64_t)st.st_blocks * 512,
                .order = (uint64_t)st.st_ino,
                /* root's own dumps and the tables' (requester 0) count against no user's budget; the others
                 * against the principal's */
                .requester = a->origin[0] || requester == 0 || requester >= UINT32_MAX ? (uid_t)-1 : (uid_t)requester,
                .table = a->origin[0] ? table_index(p, a->origin, a->table) : -1,
        };
        l->n++;
        return 0;
}

static int list_dump_dir(Listing *l, const Policy *p, int dir_fd) {
        _cleanup_close_ int walk_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        struct dirent *de;
        DIR *d;
        int r = 0;

        if (walk_fd < 0 || !(d = fdopendir(walk_fd)))
                return -errno;
        walk_fd = -EBADF;
        while (r == 0 && (de = readdir(d)))
                if (de->d_name[0] != '.') /* hidden names are none of the agent's */
                        r = listing_add(l, p, dir_fd, de->d_name);
        closedir(d);
        return r;
}

/* How many bytes must go for the guards to let @room more be written (0: they do already). */
static uint64_t shortfall(const DumpSpace *s, uint64_t room) {
        uint64_t over_use = s->used + s->in_flight + room, need = 0;

        if (over_use > s->max_use)
                need = over_use - s->max_use;
        if (s->keep_free + room > s->avail && s->keep_free + room - s->avail > need)
                need = s->keep_free + room - s->avail;
        return need;
}

/* Tells the agent, and for RETENTION_NOTE_REMOVING waits for its word. Return: whether to go on. */
static bool tell(int control_fd, const RetentionNote *note) {
        struct pollfd pfd = { .fd = control_fd, .events = POLLIN };
        char word = 0;

        if (send(control_fd, note, sizeof(*note), MSG_NOSIGNAL) != (ssize_t)sizeof(*note))
                return false;
        if (note->kind != RETENTION_NOTE_REMOVING)
                return true;
        if (poll(&pfd, 1, RETENTION_PASS_ANSWER_MSEC) <= 0 || recv(control_fd, &word, 1, 0) != 1)
                return false;
        return word == RETENTION_GO;
}

static void note_of(RetentionNote *n, const char *dump_dir, const Artifact *a, const RetentionEntry *e,
                    const RetentionVictim *v, uint64_t now_usec) {
        *n = (RetentionNote){
                .kind = RETENTION_NOTE_REMOVING, .reason = (uint8_t)v->reason, .bytes = e->bytes,
                .age_usec = now_usec > e->mtime_usec ? now_usec - e->mtime_usec : 0,
                .limit = v->limit, .total = v->total, .requester = a->origin[0] ? UINT32_MAX : a->requester,
                .target_pid = a->target_pid, .target_uid = a->target_uid,
        };
        snprintf(n->path, sizeof(n->path), "%s/%s", dump_dir, a->name);
        memcpy(n->origin, a->origin, sizeof(n->origin));
        memcpy(n->table, a->table, sizeof(n->table));
        memcpy(n->dump_type, a->dump_type, sizeof(n->dump_type));
}

/* Removes what the plan took, in its order, each once the agent recorded it. */
static void remove_victims(const Listing *l, const RetentionVictim *v, size_t n, const char *dump_dir, int dir_fd,
                           int control_fd, uint64_t now_usec, RetentionPassResult *res) {
        for (size_t k = 0; k < n && k < RETENTION_PASS_REMOVALS_MAX; k++) {
                const Artifact *a = &l->artifacts[v[k].entry];
                RetentionNote note;
                struct stat st;
                int r = 0;

                note_of(&note, dump_dir, a, &l->entries[v[k].entry], &v[k], now_usec);
                if (!tell(control_fd, &note)) {
                        res->stopped = true;
                        return;
                }
                /* dump_dir is root's alone; still, the name must be the file the plan judged */
                if (fstatat(dir_fd, a->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        r = -errno;
                else if (st.st_dev != a->dev || st.st_ino != a->ino)
                        r = -ESTALE;
                else if (unlinkat(dir_fd, a->name, 0) < 0)
                        r = -errno;
                if (r < 0) {
                        note.kind = RETENTION_NOTE_NOT_REMOVED;
                        note.error = -r;
                        (void)tell(control_fd, &note);
                        continue;
                }
                res->removed++;
                res->bytes += note.bytes;
        }
        res->more = n > RETENTION_PASS_REMOVALS_MAX;
}

int retention_pass_run(const Policy *p, const DumpSlots *slots, uint64_t room, int control_fd,
                       RetentionPassResult *ret, const char **ret_why) {
        _cleanup_close_ int dir_fd = -EBADF;
        _cleanup_free_ RetentionTable *tables = NULL;
        _cleanup_free_ RetentionVictim *victims = NULL;
        const PolicyAgentSettings *a = &p->agent;
        RetentionPassResult res = {};
        Listing l = {};
        DumpSpace space;
        struct timespec now;
        uint64_t now_usec;
        uint64_t need = 0;
        size_t n = 0;
        int r;

        test_hook_pause("retention-pass");
        /* a dump_dir not made yet holds nothing to remove: it is made at the first artifact, not here */
        if (access(a->dump_dir, F_OK) < 0 && errno == ENOENT) {
                *ret = res;
                return 0;
        }
        r = dump_dir_open(a->dump_dir, &dir_fd, ret_why);
        if (r != 0)
                return r < 0 ? r : -EPERM;
        (void)clock_gettime(CLOCK_REALTIME, &now);
        now_usec = (uint64_t)now.tv_sec * 1000000ULL + (uint64_t)now.tv_nsec / 1000;
        r = dump_space_measure(dir_fd, &a->max_use, &a->keep_free, dump_slots_total(slots), &space);
        if (r == 0)
                r = list_dump_dir(&l, p, dir_fd);
        need = r == 0 && room > 0 ? shortfall(&space, room) : 0;
        tables = r == 0 ? retention_tables(p, space.fs_size) : NULL;
        victims = r == 0 ? calloc(l.n + 1, sizeof(RetentionVictim)) : NULL;
        if (r == 0 && (!tables || !victims))
                r = -ENOMEM;
        if (r == 0)
                r = retention_plan(l.entries, l.n,
                                   &(RetentionSettings){ .now_usec = now_usec, .max_age_usec = a->max_age_usec,
                                                         .max_files = a->max_files,
                                                         .user_max_use = size_of(&a->max_use_per_user, space.fs_size),
                                                         .tables = tables, .n_tables = p->n_collect + p->n_on_start,
                                                         .room = need },
                                   victims, &n);
        if (r == 0)
                remove_victims(&l, victims, n, a->dump_dir, dir_fd, control_fd, now_usec, &res);
        listing_done(&l);
        if (r < 0) {
                *ret_why = "cannot read the dump directory";
                return r;
        }
        res.room_left = need > res.bytes ? need - res.bytes : 0;
        *ret = res;
        return 0;
}
