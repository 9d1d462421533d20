/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* [[collect]] tables with when.crash (crash-collect.h): the journal read every few seconds, cores copied. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent/loop/admission.h"
#include "agent/audit/audit.h"
#include "agent/loop/broker-state.h"
#include "common/cleanup.h"
#include "agent/collect/collect-ledger.h"
#include "agent/collect/collect-trigger.h"
#include "agent/collect/collect.h"
#include "agent/crashes/crash-collect.h"
#include "agent/crashes/crash-core.h"
#include "agent/crashes/crash-entry.h"
#include "agent/dumps/dump-publish.h"
#include "agent/workers/jobs.h"

#define USEC_PER_SEC 1000000ULL

typedef struct CrashCopy CrashCopy;

/* A core a table stored, as dsctl collect shows it. */
typedef struct Shown {
        char table[65];
        uint32_t pid, uid;
        char unit[CRASH_UNIT_MAX + 1];
        char name[CRASH_NAME_MAX + 1];
        uint64_t stored_usec;
} Shown;

struct CrashCollector {
        Broker *broker;
        Policy *policy;             /* a reference to the policy in force */
        sd_event_source *timer;
        JobCall read;               /* the journal read, while it runs */
        CrashQuery query;           /* where the next read begins */
        CrashCopy *copies;
        /* the crash tables' limits, per unit and limit_total, by name and limit, across reloads: the agent's
         * memory, as the live tables' ledger (collect.h), so not across a restart (docs/crashes.md) */
        CollectLedger *ledger;
        Shown shown[CRASH_COLLECT_SHOWN_KEPT];
        unsigned n_shown;
};

struct CrashCopy {
        CrashCollector *collector;
        CrashCopy *next;
        Policy *policy;             /* a reference: the table lives in it */
        const PolicyCollect *table;
        CrashEntry entry;
        AdmissionKey key;
        bool claimed, slot_claimed;
        unsigned slot;
        int dir_fd, file_fd, control_fd;
        JobCall job;
        uint64_t started_usec;
        AuditReservation audit_room; /* the file's record and the table's, held before the copy begins */
};

static uint64_t mono_usec(const Broker *b) {
        uint64_t now = 0;

        (void)sd_event_now(b->event, CLOCK_MONOTONIC, &now);
        return now;
}

static uint64_t real_usec(void) {
        struct timespec ts;

        (void)clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * USEC_PER_SEC + (uint64_t)ts.tv_nsec / 1000;
}

static bool has_crash_tables(const Policy *p) {
        for (size_t i = 0; p && i < p->n_collect; i++)
                if (p->collect[i].when == POLICY_COLLECT_WHEN_CRASH)
                        return true;
        return false;
}

static void record(CrashCollector *c, const PolicyCollect *table, const CrashEntry *e, const char *event,
                   const char *result, AuditReservation *room) {
        (void)audit_log_collect(c->broker->config.audit_sink,
                                &(AuditCollectEvent){ .event = event, .table = table->name, .trigger = "crash",
                                                      .what = "crash", .pid = (pid_t)e->pid, .uid = e->uid,
                                                      .unit = e->unit[0] ? e->unit : NULL, .action = "core",
                                                      .result = result, .reservation = room });
}

/* What dsctl collect shows as the table's last result (collect.h): the crash tables' results beside the others'. */
static void note(CrashCollector *c, const PolicyCollect *table, const CrashEntry *e, bool failed, const char *text,
                 uint64_t size) {
        collector_note_result(c->broker->collector, table, (pid_t)e->pid, 0, failed, text, size);
}

static void copy_free(CrashCopy *k) {
        CrashCollector *c = k->collector;

        for (CrashCopy **i = &c->copies; *i; i = &(*i)->next)
                if (*i == k) {
                        *i = k->next;
                        break;
                }
        if (k->job.job)
                worker_job_cancel(k->job.job);
        safe_close(k->control_fd);
        safe_close(k->file_fd);
        safe_close(k->dir_fd);
        if (k->slot_claimed)
                dump_slots_release(c->broker->dump_slots, k->slot);
        if (k->claimed)
                admission_end(c->broker->admission, ADMISSION_DUMP, &k->key);
        audit_reservation_release(&k->audit_room);
        policy_unref(k->policy);
        free(k);
}

static void remember_shown(CrashCollector *c, const CrashCopy *k) {
        Shown *s;

        if (c->n_shown == CRASH_COLLECT_SHOWN_KEPT) {
                memmove(c->shown, c->shown + 1, (CRASH_COLLECT_SHOWN_KEPT - 1) * sizeof(Shown));
                c->n_shown--;
        }
        s = &c->shown[c->n_shown++];
        *s = (Shown){ .pid = k->entry.pid, .uid = k->entry.uid, .stored_usec = real_usec() };
        snprintf(s->table, sizeof(s->table), "%s", k->table->name);
        snprintf(s->unit, sizeof(s->unit), "%s", k->entry.unit);
        snprintf(s->name, sizeof(s->name), "%s", k->entry.name);
}

/* publish()'s codes */
enum {
        PUBLISH_E_NO_SPACE = 1,         /* dump_dir's guards, or the disk, refuse it */
        PUBLISH_E_UNRECORDED,           /* named, but its record could not be written: removed again */
};

/* Root's, exactly the table's readers (nobody's but root's when the process changed credentials), named for it,
 * recorded. Return: 0 with @ret_path; PUBLISH_E_NO_SPACE; PUBLISH_E_UNRECORDED with *@ret_unrecorded (the
 * record's negative errno); or a negative errno. */
static int publish(CrashCopy *k, uint64_t bytes, char *ret_path, size_t path_size, int *ret_unrecorded) {
        const CrashEntry *e = &k->entry;
        AclGrant readers = {};
        DumpAttributes attrs = {
                .requester = 0, .target_pid = (pid_t)e->pid, .target_uid = e->uid,
                .target_unit = e->unit[0] ? e->unit : NULL, .target_exe = e->exe[0] ? e->exe : NULL,
                .target_name = e->name[0] ? e->name : NULL, .dump_type = "crash",
        };
        char name[256];
        int r;

        if (!e->changed_credentials)
                readers = (AclGrant){ .users = k->table->reader_users.ids, .n_users = k->table->reader_users.n,
                                      .groups = k->table->reader_groups.ids, .n_groups = k->table->reader_groups.n };
        r = dump_publish_for_table(k->dir_fd, k->file_fd, &readers, &attrs, "crash", "collect", k->table->name, "",
                                   name, sizeof(name));
        if (r != 0)
                return r == DUMP_PUBLISH_E_NO_SPACE ? PUBLISH_E_NO_SPACE : r < 0 ? r : -EIO;
        snprintf(ret_path, path_size, "%s/%s", k->policy->agent.dump_dir, name);
        /* no core without its record: removed again when the record cannot be written */
        r = audit_log_artifact(k->collector->broker->config.audit_sink, k->policy->agent.audit_failure_allow,
                               k->dir_fd, name, &(AuditDumpEvent){
                .origin = "collect", .requester = 0, .target_pid = attrs.target_pid, .target_uid = e->uid,
                .target_unit = attrs.target_unit, .target_exe = attrs.target_exe,
                .target_container_id = e->container_id[0] ? e->container_id : NULL,
                .target_cgroup = e->cgroup[0] ? e->cgroup : NULL, .target_cgroup_vouched = e->cgroup_vouched,
                .rule = k->table->name, .path = ret_path, .size = bytes, .dump_type = "crash",
                .readable = readers.n_users + readers.n_groups > 0,
                .duration_usec = mono_usec(k->collector->broker) - k->started_usec, .reservation = &k->audit_room });
        if (r < 0) {
                *ret_unrecorded = r;
                return PUBLISH_E_UNRECORDED;
        }
        return 0;
}

static void copied(void *userdata, int r, uint64_t bytes, const char *why) {
        CrashCopy *k = userdata;
        char path[PATH_MAX] = "", result[PATH_MAX + 256];
        int unrecorded = 0;

        if (k->slot_claimed) {
                dump_slots_release(k->collector->broker->dump_slots, k->slot);
                k->slot_claimed = false;
        }
        if (r != 0) /* the worker's: a JOBS_E_* code with @why, or a negative errno */
                snprintf(result, sizeof(result), "%s%s%s", why ? why : "cannot copy the core", r < 0 ? ": " : "",
                         r < 0 ? strerror(-r) : "");
        else {
                r = publish(k, bytes, path, sizeof(path), &unrecorded);
                if (r == 0) {
                        snprintf(result, sizeof(result), "%s (%" PRIu64 " bytes%s)", path, bytes,
                                 k->entry.changed_credentials
                                         ? "; only root may read it: the process changed credentials" : "");
                        remember_shown(k->collector, k);
                } else if (r == PUBLISH_E_UNRECORDED)
                        snprintf(result, sizeof(result),
                                 "the core's audit record could not be written (%s): it was removed",
                                 strerror(-unrecorded));
                else if (r == PUBLISH_E_NO_SPACE)
                        snprintf(result, sizeof(result), "cannot store the core: no space in dump_dir");
                else
                        snprintf(result, sizeof(result), "cannot store the core: %s", strerror(-r));
        }
        record(k->collector, k->table, &k->entry, r == 0 ? "collected" : "failed", result, &k->audit_room);
        note(k->collector, k->table, &k->entry, r != 0, r == 0 ? path : result, r == 0 ? bytes : 0);
        copy_free(k);
}

/* dump_dir, the unnamed file, a slot, room for the records; then a worker copies. 0, or 1 with @why. */
static int copy_start(CrashCollector *c, const PolicyCollect *table, const CrashEntry *e, char *why, size_t size) {
        const PolicyAgentSettings *a = &c->policy->agent;
        DumpLimits limits = { .max_use = a->max_use, .keep_free = a->keep_free };
        _cleanup_close_ int control_theirs = -EBADF;
        const char *busy = NULL, *dir_why = NULL;
        CrashCopy *k;
        int sv[2], r;

        k = calloc(1, sizeof(CrashCopy));
        if (!k) {
                snprintf(why, size, "not copied: out of memory");
                return 1;
        }
        *k = (CrashCopy){ .collector = c, .next = c->copies, .policy = policy_ref(c->policy), .table = table,
                          .entry = *e, .dir_fd = -EBADF, .file_fd = -EBADF, .control_fd = -EBADF,
                          .started_usec = mono_usec(c->broker),
                          .key = { .pid = (pid_t)e->pid, .start_time = e->time_usec,
                                   .requester = CRASH_COLLECT_OWNER } };
        c->copies = k;
        r = admission_begin(c->broker->admission, ADMISSION_DUMP, &k->key,
                            /* the tables are nobody's user: only the host's bound, and one per crash */
                            &(AdmissionLimits){ .per_target = 1, .per_requester = UINT_MAX,
                                                .in_all = a->max_concurrent_dumps },
                            &busy);
        if (r != 0) {
                snprintf(why, size, "not copied: %s", r == ADMISSION_E_BUSY && busy ? busy : strerror(-r));
                copy_free(k);
                return 1;
        }
        k->claimed = true;
        if (audit_reserve(c->broker->config.audit_sink, 2, &k->audit_room) != 0) {
                snprintf(why, size, "not copied: the audit output takes no records now (its reader stopped)");
                copy_free(k);
                return 1;
        }
        r = dump_dir_open(a->dump_dir, &k->dir_fd, &dir_why);
        if (r == 0 && (k->file_fd = openat(k->dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0)
                r = -errno;
        if (r == 0 && (r = dump_slots_claim(c->broker->dump_slots, &k->slot)) == 0)
                k->slot_claimed = true;
        if (r == 0 && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                r = -errno;
        if (r == 0) {
                k->control_fd = sv[0]; /* the worker's progress reports: nobody waits for them here */
                control_theirs = sv[1];
                r = jobs_copy_crash(c->broker,
                                    &(JobDumpFile){ .owner = CRASH_COLLECT_OWNER, .file_fd = k->file_fd,
                                                    .dir_fd = k->dir_fd, .control_fd = control_theirs,
                                                    .limits = limits, .slot = k->slot },
                                    &k->entry, CRASH_CORE_SIZE_MAX_DEFAULT, copied, k, &k->job);
        }
        if (r != 0) {
                snprintf(why, size, "not copied: %s",
                         r > 0 && dir_why ? dir_why : r < 0 ? strerror(-r) : "no worker is free to copy it");
                copy_free(k);
                return 1;
        }
        return 0;
}

/* What a table's limit counts crashes by: the unit, else the executable, else the name. */
static const char *limit_key_of(const CrashEntry *e) {
        return e->unit[0] ? e->unit : e->exe[0] ? e->exe : e->name;
}

/*
 * Do @table's limits let one more copy of @e run now: its limit for @e's unit (or executable
 * outside a unit), and its limit_total over every crash it covers, so that crashes of ever new
 * units or executables (a user's logins, copies of a program) bring no budget beyond it? Counted
 * in both if they do; else @why says which held it back.
 */
static bool limit_allows(CrashCollector *c, const PolicyCollect *table, const CrashEntry *e, uint64_t now,
                         char *why, size_t size) {
        /* held only while looked at: the ledger keeps each while the policy has a table of that name and limit
         * and it holds something back (crash_collector_apply() and every poll prune the rest), so that a reload
         * keeps its count, and never drops one that holds something to make room for another: crashes of ever
         * new units cannot push a unit's count out (fewer copies, never more) */
        CollectLimit *unit = collect_ledger_key_limit(c->ledger, table, limit_key_of(e)), *total = NULL;
        bool allowed = false;

        if (!unit)
                snprintf(why, size, "not copied: no room to keep the table's limit for %.128s", limit_key_of(e));
        else if (!collect_limit_has_room(unit, now))
                snprintf(why, size, "not copied: the table's limit for %.128s (%u in %llu s) is reached",
                         limit_key_of(e), table->limit.count,
                         (unsigned long long)(table->limit.period_usec / USEC_PER_SEC));
        else if (!(total = collect_ledger_table_limit(c->ledger, table, COLLECT_LEDGER_EVERY_OWNER)))
                snprintf(why, size, "not copied: no room to keep the table's limit_total");
        else if (!collect_limit_take(total, now))
                snprintf(why, size, "not copied: the table's limit_total (%u in %llu s) is reached",
                         table->limit_total.count,
                         (unsigned long long)(table->limit_total.period_usec / USEC_PER_SEC));
        else if (!collect_limit_take(unit, now))
                snprintf(why, size, "not copied: no room to count it in the table's limit for %.128s",
                         limit_key_of(e));
        else
                allowed = true;
        collect_ledger_release(c->ledger, total);
        collect_ledger_release(c->ledger, unit);
        return allowed;
}

/* One trusted crash: every crash table that covers it fires, within its limit. */
static void judge(CrashCollector *c, const CrashEntry *e) {
        PolicyTarget pt = crash_entry_policy_target(e);
        uint64_t now = mono_usec(c->broker);

        for (size_t i = 0; i < c->policy->n_collect; i++) {
                const PolicyCollect *table = &c->policy->collect[i];
                char why[256];

                if (table->when != POLICY_COLLECT_WHEN_CRASH || !policy_collect_covers(table, &pt))
                        continue;
                if (!e->stored) {
                        static const char none[] = "no core is stored for this crash (systemd-coredump kept none)";

                        record(c, table, e, "failed", none, NULL);
                        note(c, table, e, true, none, 0);
                        continue;
                }
                /* held back by its limits, or not begun: no collect record follows, the firing's words are its
                 * result (as the watcher's tables) */
                if (!limit_allows(c, table, e, now, why, sizeof(why))) {
                        note(c, table, e, true, why, 0);
                        record(c, table, e, "fired", why, NULL);
                        continue;
                }
                if (copy_start(c, table, e, why, sizeof(why)) == 0)
                        snprintf(why, sizeof(why), "the core of crash %s is copied", e->id);
                else
                        note(c, table, e, true, why, 0);
                record(c, table, e, "fired", why, NULL);
        }
}

static void read_done(void *userdata, int r, const JobCrashesResult *res) {
        CrashCollector *c = userdata;
        size_t at = 0;

        c->read.job = NULL;
        if (r != 0)
                return; /* the next poll tries again from the same place */
        for (unsigned i = 0; i < res->n; i++) {
                CrashEntry e;
                size_t used;

                if (crash_entry_unpack(res->packed + at, res->size - at, &e, &used) < 0)
                        return;
                at += used;
                judge(c, &e);
        }
        if (res->cursor[0])
                snprintf(c->query.after, sizeof(c->query.after), "%s", res->cursor);
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        CrashCollector *c = userdata;

        (void)sd_event_source_set_time(s, usec + CRASH_COLLECT_POLL_USEC);
        (void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        /* what holds nothing back any more goes, so that the ledger keeps only what limits */
        collect_ledger_prune(c->ledger, c->policy, mono_usec(c->broker));
        if (!c->broker->workers || c->read.job || !has_crash_tables(c->policy))
                return 0;
        (void)jobs_read_crashes_own(c->broker, CRASH_COLLECT_OWNER, &c->query, true, read_done, c, &c->read);
        return 0;
}

int crash_collector_new(Broker *b, CrashCollector **ret) {
        _cleanup_free_ CrashCollector *c = calloc(1, sizeof(CrashCollector));
        int r;

        if (!c)
                return -ENOMEM;
        c->ledger = collect_ledger_new();
        if (!c->ledger)
                return -ENOMEM;
        c->broker = b;
        c->policy = policy_ref(b->policy);
        /* crashes from now on: an agent that starts again does not copy old ones again */
        c->query.since_usec = real_usec();
        r = sd_event_add_time_relative(b->event, &c->timer, CLOCK_MONOTONIC, CRASH_COLLECT_POLL_USEC, 0, on_timer, c);
        if (r < 0) {
                collect_ledger_free(c->ledger);
                policy_unref(c->policy);
                return r;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

CrashCollector *crash_collector_free(CrashCollector *c) {
        if (!c)
                return NULL;
        if (c->read.job)
                worker_job_cancel(c->read.job);
        while (c->copies)
                copy_free(c->copies);
        sd_event_source_disable_unref(c->timer);
        policy_unref(c->policy);
        collect_ledger_free(c->ledger);
        free(c);
        return NULL;
}

void crash_collector_apply(CrashCollector *c) {
        policy_unref(c->policy);
        c->policy = policy_ref(c->broker->policy);
        /* a table that keeps its name and limit_total keeps what it counted; the rest go */
        collect_ledger_prune(c->ledger, c->policy, 0);
}

void crash_collector_visit(const CrashCollector *c, const PolicyCollect *table,
                           void (*each)(const CrashCollectView *v, void *userdata), void *userdata) {
        unsigned first = 0, n = 0;

        if (!c)
                return;
        for (unsigned i = c->n_shown; i > 0 && n < CRASH_COLLECT_SHOWN_MAX; i--)
                if (strcmp(c->shown[i - 1].table, table->name) == 0) {
                        first = i - 1;
                        n++;
                }
        for (unsigned i = first; n > 0 && i < c->n_shown; i++) {
                const Shown *s = &c->shown[i];

                if (strcmp(s->table, table->name) != 0)
                        continue;
                each(&(CrashCollectView){ .pid = s->pid, .uid = s->uid, .unit = s->unit[0] ? s->unit : NULL,
                                          .name = s->name[0] ? s->name : NULL, .stored_usec = s->stored_usec },
                     userdata);
                n--;
        }
}
