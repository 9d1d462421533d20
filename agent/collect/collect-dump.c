/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The dump action of a [[collect]] table (collect-dump.h). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/loop/admission.h"
#include "agent/audit/audit.h"
#include "agent/broker.h"
#include "agent/collect/collect-dump.h"
#include "agent/egress/egress-upload.h"
#include "agent/collect/collect.h"
#include "agent/dumps/dump-publish.h"
#include "agent/dumps/dump-take.h"
#include "agent/targets/target.h"

typedef struct CollectDump CollectDump;

struct CollectDumps {
        Broker *broker;
        CollectDump *dumps;
};

struct CollectDump {
        CollectDumps *set;
        CollectDump *next;
        Policy *policy;             /* a reference: the table lives in it */
        const PolicyCollect *table;
        Target *target;
        AdmissionKey key;           /* counted from the start to the end */
        DumpTake *take;
        uint64_t started_usec;
        AuditReservation audit_room; /* the file's record and the table's, held before the runtime is asked */
};

static Broker *broker_of(const CollectDump *d) {
        return d->set->broker;
}

static void dump_free(CollectDump *d) {
        for (CollectDump **i = &d->set->dumps; *i; i = &(*i)->next)
                if (*i == d) {
                        *i = d->next;
                        break;
                }
        dump_take_free(d->take);
        audit_reservation_release(&d->audit_room);
        admission_end(broker_of(d)->admission, ADMISSION_DUMP, &d->key);
        target_unref(d->target);
        policy_unref(d->policy);
        free(d);
}

static uint64_t now_usec(const Broker *b) {
        uint64_t now = 0;

        (void)sd_event_now(b->event, CLOCK_MONOTONIC, &now);
        return now;
}

/* The table's readers, or root alone when the process changed credentials (its memory is root's alone now,
 * as dsctl dump decides). */
static AclGrant readers_of(const CollectDump *d, const DumpTakeResult *res) {
        if (res->changed)
                return (AclGrant){};
        return (AclGrant){ .users = d->table->reader_users.ids, .n_users = d->table->reader_users.n,
                           .groups = d->table->reader_groups.ids, .n_groups = d->table->reader_groups.n };
}

/* Root's, exactly the readers, labelled, named for the table (@ret_name), then recorded: the name goes
 * again when its record cannot be written. Return: 0, DUMP_PUBLISH_E_*, or a negative errno, with
 * *@ret_unrecorded set when that errno is the record's. */
static int publish(CollectDump *d, const DumpTakeResult *res, char *ret_path, size_t path_size,
                   bool *ret_unrecorded) {
        AclGrant readers = readers_of(d, res);
        DumpAttributes attrs = {
                .requester = 0,
                .target_pid = d->target->pid,
                .target_uid = target_euid(d->target),
                .target_unit = d->target->unit,
                .target_exe = d->target->exe,
                .target_name = d->target->name,
                .dump_type = policy_dump_type_to_string(d->table->dump_type),
        };
        char name[256];
        int r;

        *ret_unrecorded = false;
        r = dump_publish_for_table(res->dir_fd, res->file_fd, &readers, &attrs, "dump", "collect", d->table->name, "",
                                   name, sizeof(name));
        if (r != 0)
                return r;
        snprintf(ret_path, path_size, "%s/%s", d->policy->agent.dump_dir, name);
        r = audit_log_artifact(broker_of(d)->config.audit_sink, d->policy->agent.audit_failure_allow, res->dir_fd,
                               name, &(AuditDumpEvent){
                .origin = "collect", .requester = 0, .target_pid = d->target->pid, .target_uid = attrs.target_uid,
                .target_unit = attrs.target_unit, .target_exe = attrs.target_exe,
                .target_container_id = d->target->container_id, .target_pod_uid = d->target->pod_uid,
                .target_cgroup = d->target->cgroup, .target_cgroup_vouched = d->target->cgroup_vouched,
                .rule = d->table->name, .path = ret_path, .size = res->bytes, .dump_type = attrs.dump_type,
                .readable = readers.n_users + readers.n_groups > 0,
                .duration_usec = now_usec(broker_of(d)) - d->started_usec, .reservation = &d->audit_room });
        *ret_unrecorded = r < 0;
        /* the table's store gets it too, unless only root may read it (the process changed credentials) */
        if (r == 0 && d->table->egress && !res->changed)
                egress_upload_artifact(broker_of(d), d->table->egress, d->policy->agent.dump_dir, res->dir_fd, name,
                                       &(EgressArtifact){ .type = "dump", .extension = "dmp",
                                                          .process = d->target->name, .pid = d->target->pid,
                                                          .unit = d->target->unit,
                                                          .container = d->target->container_id,
                                                          .requester = (uid_t)-1, .rule = d->table->name });
        return r;
}

static void taken(void *userdata, const DumpTakeResult *res) {
        CollectDump *d = userdata;
        char path[PATH_MAX] = "", result[PATH_MAX + 256];
        bool unrecorded;
        int r;

        switch (res->failure) {
        case DUMP_TAKE_OK:
                r = publish(d, res, path, sizeof(path), &unrecorded);
                if (unrecorded) {
                        collect_record_removed(broker_of(d), d->table, d->target, "dump", r, &d->audit_room);
                        break;
                }
                if (r == 0)
                        snprintf(result, sizeof(result), "%s (%" PRIu64 " bytes%s)", path, res->bytes,
                                 res->changed ? "; only root may read it: the process changed credentials" : "");
                else
                        snprintf(result, sizeof(result), "cannot store the dump: %s",
                                 r > 0 ? "no space in dump_dir" : strerror(-r));
                collect_record_result(broker_of(d), d->table, d->target, "dump", r == 0 ? "collected" : "failed",
                                      result, r == 0 ? path : NULL, r == 0 ? res->bytes : 0, &d->audit_room);
                break;
        case DUMP_TAKE_ERRNO:
                snprintf(result, sizeof(result), "%s: %s", res->why ? res->why : "cannot take the dump",
                         strerror(-res->r));
                collect_record_result(broker_of(d), d->table, d->target, "dump", "failed", result, NULL, 0,
                                      &d->audit_room);
                break;
        case DUMP_TAKE_TARGET:
                snprintf(result, sizeof(result), "cannot reach the process%s%s", res->why ? ": " : "",
                         res->why ? res->why : "");
                collect_record_result(broker_of(d), d->table, d->target, "dump", "failed", result, NULL, 0,
                                      &d->audit_room);
                break;
        default: /* the runtime's words, or the agent's on the dump's way */
                collect_record_result(broker_of(d), d->table, d->target, "dump", "failed",
                                      res->why ? res->why : "the dump failed", NULL, 0, &d->audit_room);
                break;
        }
        dump_free(d);
}

int collect_dump_start(CollectDumps *s, Policy *policy, const PolicyCollect *table, Target *target, uid_t owner,
                       char *why, size_t why_size) {
        static const DumpTakeOps ops = { .done = taken };
        Broker *b = s->broker;
        const char *busy = NULL;
        CollectDump *d;
        int r;

        d = calloc(1, sizeof(CollectDump));
        if (!d) {
                snprintf(why, why_size, "not dumped: out of memory");
                return 1;
        }
        /* as the owner's own dump of its process: the owner controls that runtime, and its pace */
        d->key = (AdmissionKey){ .pid = target->pid, .start_time = target->start_time, .requester = owner,
                                 .own = true };
        r = admission_begin(b->admission, ADMISSION_DUMP, &d->key,
                            &(AdmissionLimits){ .per_target = 1, .per_requester = policy->agent.max_dumps_per_user,
                                                .in_all = policy->agent.max_concurrent_own_dumps },
                            &busy);
        if (r != 0) {
                snprintf(why, why_size, "not dumped (counted as uid %u's dump of its own process): %s", (unsigned)owner,
                         r == ADMISSION_E_BUSY && busy ? busy : strerror(-r));
                free(d);
                return 1;
        }
        *d = (CollectDump){ .set = s, .next = s->dumps, .policy = policy_ref(policy), .table = table,
                            .target = target_ref(target), .key = d->key, .started_usec = now_usec(b) };
        s->dumps = d;
        /* the file's record and the table's: room for them before the runtime is asked */
        if (audit_reserve(b->config.audit_sink, 2, &d->audit_room) != 0) {
                snprintf(why, why_size, "not dumped: the audit output takes no records now (its reader stopped)");
                dump_free(d);
                return 1;
        }
        r = dump_take_start(&(DumpTakeParams){ .broker = b, .policy = policy, .target = target,
                                               .type = table->dump_type, .owner = owner,
                                               .job_timeout_usec = b->config.runtime_timeout_usec },
                            &ops, d, &d->take);
        if (r != 0) {
                snprintf(why, why_size, "not dumped: %s",
                         r < 0 ? strerror(-r) : "no worker is free to take it");
                dump_free(d);
                return 1;
        }
        return 0;
}

CollectDumps *collect_dumps_new(Broker *b) {
        CollectDumps *s = calloc(1, sizeof(CollectDumps));

        if (s)
                s->broker = b;
        return s;
}

CollectDumps *collect_dumps_free(CollectDumps *s) {
        if (!s)
                return NULL;
        while (s->dumps)
                dump_free(s->dumps);
        free(s);
        return NULL;
}
