/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Targets opened lately, shared by a burst of requests for one process (target-cache.h); the broker
 * owns the cache, the command pipeline asks it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/targets/target-cache.h"

/* What the kernel shows of a process's ids without a read of its files. */
typedef struct TargetIds {
        uid_t euid, owner_uid;  /* of /proc/PID: its effective ids; of /proc/PID/status: target_owner() */
        gid_t egid, owner_gid;
} TargetIds;

typedef struct TargetCacheEntry {
        Target *target;         /* NULL: free */
        uint64_t opened_usec, expires_usec;
        TargetIds ids;          /* when it was opened */
} TargetCacheEntry;

struct TargetCache {
        sd_event_source *timer; /* at the earliest expiry: an entry's fds are let go on time */
        TargetCacheEntry entries[TARGET_CACHE_MAX];
};

static int on_expiry(sd_event_source *s, uint64_t usec, void *userdata);

int target_cache_new(sd_event *event, TargetCache **ret) {
        TargetCache *c = calloc(1, sizeof(TargetCache));
        int r;

        if (!c)
                return -ENOMEM;
        r = sd_event_add_time(event, &c->timer, CLOCK_MONOTONIC, 0, 0, on_expiry, c);
        if (r >= 0)
                r = sd_event_source_set_enabled(c->timer, SD_EVENT_OFF);
        if (r < 0) {
                target_cache_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

static void entry_drop(TargetCacheEntry *e) {
        e->target = target_unref(e->target);
}

void target_cache_clear(TargetCache *c) {
        if (!c)
                return;
        for (size_t i = 0; i < TARGET_CACHE_MAX; i++)
                entry_drop(&c->entries[i]);
        (void)sd_event_source_set_enabled(c->timer, SD_EVENT_OFF);
}

TargetCache *target_cache_free(TargetCache *c) {
        if (!c)
                return NULL;
        target_cache_clear(c);
        sd_event_source_disable_unref(c->timer);
        free(c);
        return NULL;
}

/*
 * Both, as neither alone is enough: the directory always shows the effective
 * ids, which a process that is not dumpable hides behind root's on its files.
 */
static int target_ids(const Target *t, TargetIds *ret) {
        struct stat st;
        int r;

        if (fstat(t->proc_fd, &st) < 0)
                return -errno;
        r = target_owner(t, &ret->owner_uid, &ret->owner_gid);
        if (r < 0)
                return r;
        ret->euid = st.st_uid;
        ret->egid = st.st_gid;
        return 0;
}

/*
 * Are the ids and groups its status file shows now those of the reading, all
 * of them: real, effective, saved and filesystem uids and gids, and the
 * supplementary groups? Ids the process changed without changing its
 * effective ones (setresuid(-1, -1, 0) keeps it dumpable and its files its
 * user's) show nowhere else.
 */
static bool credentials_hold(const Target *t) {
        ProcStatus now;

        return target_read_credentials(t, &now) == 0 && procfs_same_credentials(&now, &t->status);
}

/* Drops what is past its time, and sets the timer for what is left. */
static void drop_expired(TargetCache *c, uint64_t now_usec) {
        uint64_t next = UINT64_MAX;

        for (size_t i = 0; i < TARGET_CACHE_MAX; i++) {
                TargetCacheEntry *e = &c->entries[i];

                if (e->target && e->expires_usec <= now_usec)
                        entry_drop(e);
                else if (e->target && e->expires_usec < next)
                        next = e->expires_usec;
        }
        if (next == UINT64_MAX)
                (void)sd_event_source_set_enabled(c->timer, SD_EVENT_OFF);
        else if (sd_event_source_set_time(c->timer, next) >= 0)
                (void)sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
}

static int on_expiry(sd_event_source *s, uint64_t usec, void *userdata) {
        drop_expired(userdata, usec);
        return 0;
}

static TargetCacheEntry *entry_of(TargetCache *c, pid_t pid) {
        for (size_t i = 0; i < TARGET_CACHE_MAX; i++)
                if (c->entries[i].target && c->entries[i].target->pid == pid)
                        return &c->entries[i];
        return NULL;
}

/* The slot for @pid: its own entry, else a free one, else the oldest. */
static TargetCacheEntry *slot_for(TargetCache *c, pid_t pid) {
        TargetCacheEntry *slot = entry_of(c, pid);

        if (slot)
                return slot;
        slot = &c->entries[0];
        for (size_t i = 0; i < TARGET_CACHE_MAX; i++) {
                if (!c->entries[i].target)
                        return &c->entries[i];
                if (c->entries[i].opened_usec < slot->opened_usec)
                        slot = &c->entries[i];
        }
        return slot;
}

void target_cache_put(TargetCache *c, Target *t, uint64_t now_usec, uint64_t ttl_usec) {
        TargetCacheEntry *slot;
        TargetIds ids;

        /* a reading whose groups were not all kept could never be found to hold: not kept either */
        if (!c || ttl_usec == 0 || t->socket_path_fd < 0 || !t->status.groups_known ||
            t->status.n_groups > PROCFS_GROUPS_MAX || target_ids(t, &ids) < 0)
                return;
        slot = slot_for(c, t->pid);
        entry_drop(slot);
        *slot = (TargetCacheEntry){ .target = target_ref(t), .opened_usec = now_usec,
                                    .expires_usec = now_usec + ttl_usec, .ids = ids };
        drop_expired(c, now_usec);
}

/*
 * Still the same process, with the credentials and dumpability it had. The
 * pidfd last: whatever was read before it said "alive" was read of this
 * process, not of a successor under its pid.
 */
static bool entry_holds(const TargetCacheEntry *e) {
        TargetIds now;

        return target_ids(e->target, &now) == 0 && memcmp(&now, &e->ids, sizeof(now)) == 0 &&
               credentials_hold(e->target) && target_is_alive(e->target);
}

int target_cache_get(TargetCache *c, pid_t pid, uint64_t now_usec, Target **ret, uint64_t *ret_age_usec) {
        TargetCacheEntry *e;

        if (!c)
                return -ENOENT;
        drop_expired(c, now_usec);
        e = entry_of(c, pid);
        if (!e)
                return -ENOENT;
        if (!entry_holds(e)) {
                entry_drop(e);
                return -ENOENT;
        }
        *ret = target_ref(e->target);
        *ret_age_usec = now_usec - e->opened_usec;
        return 0;
}

void target_cache_forget(TargetCache *c, pid_t pid) {
        TargetCacheEntry *e = c ? entry_of(c, pid) : NULL;

        if (e)
                entry_drop(e);
}
