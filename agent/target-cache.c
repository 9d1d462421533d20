/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "target-cache.h"

typedef struct TargetCacheEntry {
        Target *target;         /* NULL: free */
        uint64_t opened_usec;
        uid_t proc_uid;         /* the owner of /proc/PID when it was opened */
        gid_t proc_gid;
} TargetCacheEntry;

struct TargetCache {
        TargetCacheEntry entries[TARGET_CACHE_MAX];
};

TargetCache *target_cache_new(void) {
        return calloc(1, sizeof(TargetCache));
}

static void entry_drop(TargetCacheEntry *e) {
        e->target = target_unref(e->target);
}

void target_cache_clear(TargetCache *c) {
        if (!c)
                return;
        for (size_t i = 0; i < TARGET_CACHE_MAX; i++)
                entry_drop(&c->entries[i]);
}

TargetCache *target_cache_free(TargetCache *c) {
        target_cache_clear(c);
        free(c);
        return NULL;
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

void target_cache_put(TargetCache *c, Target *t, uint64_t now_usec) {
        TargetCacheEntry *slot;
        struct stat st;

        if (!c || t->socket_path_fd < 0 || fstat(t->proc_fd, &st) < 0)
                return;
        slot = slot_for(c, t->pid);
        entry_drop(slot);
        *slot = (TargetCacheEntry){ .target = target_ref(t), .opened_usec = now_usec, .proc_uid = st.st_uid,
                                    .proc_gid = st.st_gid };
}

/* Still the same process, with the ids it had. */
static bool entry_holds(const TargetCacheEntry *e) {
        struct stat st;

        if (!target_is_alive(e->target))
                return false;
        return fstat(e->target->proc_fd, &st) == 0 && st.st_uid == e->proc_uid && st.st_gid == e->proc_gid;
}

/* Entries past their time hold fds for nothing. */
static void drop_expired(TargetCache *c, uint64_t now_usec, uint64_t ttl_usec) {
        for (size_t i = 0; i < TARGET_CACHE_MAX; i++) {
                TargetCacheEntry *e = &c->entries[i];
                if (e->target && (now_usec < e->opened_usec || now_usec - e->opened_usec >= ttl_usec))
                        entry_drop(e);
        }
}

int target_cache_get(TargetCache *c, pid_t pid, uint64_t now_usec, uint64_t ttl_usec, Target **ret,
                     uint64_t *ret_age_usec) {
        TargetCacheEntry *e;

        if (!c)
                return -ENOENT;
        drop_expired(c, now_usec, ttl_usec);
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
