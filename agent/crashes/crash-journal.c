/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* systemd-coredump's entries, read from the local journal with sd-journal (crash-journal.h); in a worker. */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-id128.h>
#include <systemd/sd-journal.h>

#include "agent/targets/cgroupfs.h"
#include "common/cleanup.h"
#include "agent/crashes/crash-journal.h"

/* An entry of systemd-coredump's has some 40 fields; one with many more is not its */
#define CRASH_JOURNAL_FIELDS_MAX 256


/* The systemd-coredump user, as whom it logs a system user's crash; (uid_t) -1 when there is none. */
static uid_t coredump_user(void) {
        struct passwd pw, *result = NULL;
        char buf[1024];

        if (getpwnam_r("systemd-coredump", &pw, buf, sizeof(buf), &result) != 0 || !result)
                return (uid_t)-1;
        return pw.pw_uid;
}

/* Root made and fills every cgroup on the crashed process's path, as it stands now (a live one's rule). */
static bool cgroup_vouched(const CrashEntry *e) {
        ProcContainer c = { .unified = e->hierarchy_unified };

        if (!e->cgroup[0] || !e->hierarchy_unified)
                return false;
        snprintf(c.cgroup, sizeof(c.cgroup), "%s", e->cgroup);
        return cgroupfs_root_vouches(&c);
}

/*
 * systemd-coredump's entries only, by the journal's own index: its MESSAGE_ID, which anyone may log,
 * and the slice journald says its sender ran in (_SYSTEMD_SLICE, from the sender's cgroup), which no
 * user can put a process in. Entries any user logs with that MESSAGE_ID are then never read: a
 * journal holding millions of them costs a listing, and the collector's every poll, nothing
 * (crash_entry_parse() still checks every trusted field of what is read).
 */
static int add_matches(sd_journal *j, const CrashQuery *q) {
        char match[64];
        int r;

        r = sd_journal_add_match(j, "MESSAGE_ID=" CRASH_MESSAGE_ID, 0);
        if (r >= 0)
                r = sd_journal_add_match(j, "_SYSTEMD_SLICE=" CRASH_WRITER_SLICE, 0);
        if (r < 0 || q->id_pid == 0)
                return r;
        snprintf(match, sizeof(match), "COREDUMP_PID=%" PRIu32, q->id_pid);
        r = sd_journal_add_match(j, match, 0);
        if (r < 0)
                return r;
        snprintf(match, sizeof(match), "COREDUMP_TIMESTAMP=%" PRIu64, q->id_seconds * 1000000);
        return sd_journal_add_match(j, match, 0);
}

/* Where to begin: after the cursor, or at the first entry logged at or after since_usec. */
static int seek(sd_journal *j, const CrashQuery *q, bool *ret_skip_one) {
        *ret_skip_one = false;
        if (q->after[0]) {
                *ret_skip_one = true;
                return sd_journal_seek_cursor(j, q->after);
        }
        if (q->since_usec > 0)
                return sd_journal_seek_realtime_usec(j, q->since_usec);
        /* a crash by id was logged at or after it happened */
        if (q->id_pid != 0)
                return sd_journal_seek_realtime_usec(j, q->id_seconds * 1000000);
        return sd_journal_seek_head(j);
}

/* Copies of an entry's fields: sd_journal_enumerate_data()'s pointers hold only until its next call
 * (a compressed field is decompressed into one buffer, reused for the next) */
typedef struct EntryFields {
        CrashField fields[CRASH_JOURNAL_FIELDS_MAX];
        size_t n;
} EntryFields;

static void entry_fields_done(EntryFields *f) {
        for (size_t i = 0; i < f->n; i++)
                free((void *)f->fields[i].data);
        f->n = 0;
}

/* The entry at @j's place, parsed; 0, CRASH_ENTRY_E_*, or a negative errno. */
static int read_entry(sd_journal *j, const char *machine_id, uid_t coredump_uid, CrashEntry *ret) {
        _cleanup_(entry_fields_done) EntryFields f = {};
        uint64_t logged = 0, total = 0;
        const void *data;
        size_t size;
        int r;

        r = sd_journal_get_realtime_usec(j, &logged);
        if (r < 0)
                return r;
        sd_journal_restart_data(j);
        while ((r = sd_journal_enumerate_data(j, &data, &size)) > 0) {
                void *copy;

                /* systemd-coredump's entries have some 40 fields, a few MiB at most */
                total += size;
                if (f.n == CRASH_JOURNAL_FIELDS_MAX || total > 4 * CRASH_FIELD_MAX)
                        return CRASH_ENTRY_E_UNTRUSTED;
                copy = malloc(size ? size : 1);
                if (!copy)
                        return -ENOMEM;
                memcpy(copy, data, size);
                f.fields[f.n++] = (CrashField){ .data = copy, .size = size };
        }
        if (r < 0)
                return r;
        return crash_entry_parse(f.fields, f.n, machine_id, coredump_uid, logged, ret);
}

int crash_journal_read(const CrashQuery *q, CrashEach each, void *userdata, char *ret_cursor, bool *ret_more,
                       unsigned *ret_untrusted) {
        _cleanup_(sd_journal_closep) sd_journal *j = NULL;
        char machine_id[SD_ID128_STRING_MAX];
        uid_t coredump_uid = coredump_user();
        unsigned untrusted = 0;
        sd_id128_t machine;
        bool skip_one, more = false;
        int r;

        ret_cursor[0] = '\0';
        r = sd_id128_get_machine(&machine);
        if (r < 0)
                return r;
        sd_id128_to_string(machine, machine_id);
        /* every local file, the users' among them: not SD_JOURNAL_SYSTEM */
        r = sd_journal_open(&j, SD_JOURNAL_LOCAL_ONLY);
        if (r < 0)
                return r;
        /* sd_journal_open() passes over files it may not open (a MAC policy's refusal, a mode): a journal of
         * which nothing could be read would list no crash, which is not "none" */
        if (!sd_journal_has_runtime_files(j) && !sd_journal_has_persistent_files(j))
                return -ENODATA;
        r = sd_journal_set_data_threshold(j, CRASH_FIELD_MAX);
        if (r >= 0)
                r = add_matches(j, q);
        if (r >= 0)
                r = seek(j, q, &skip_one);
        if (r < 0)
                return r;
        while ((r = sd_journal_next(j)) > 0) {
                _cleanup_free_ CrashEntry *e = NULL;
                _cleanup_free_ char *cursor = NULL;

                if (skip_one) {
                        skip_one = false;
                        if (sd_journal_test_cursor(j, q->after) > 0)
                                continue;
                }
                e = calloc(1, sizeof(*e));
                if (!e)
                        return -ENOMEM;
                r = read_entry(j, machine_id, coredump_uid, e);
                if (r < 0)
                        return r;
                if (r == CRASH_ENTRY_E_UNTRUSTED || r == CRASH_ENTRY_E_MALFORMED) {
                        untrusted++;
                        continue;
                }
                if (q->id_pid != 0 && (e->pid != q->id_pid || e->time_usec != q->id_seconds * 1000000))
                        continue;
                e->cgroup_vouched = cgroup_vouched(e);
                if (!each(e, userdata)) {
                        more = true;
                        break;
                }
                if (sd_journal_get_cursor(j, &cursor) >= 0 && strlen(cursor) < CRASH_JOURNAL_CURSOR_MAX)
                        memcpy(ret_cursor, cursor, strlen(cursor) + 1);
        }
        if (r < 0)
                return r;
        *ret_more = more;
        *ret_untrusted = untrusted;
        return 0;
}
