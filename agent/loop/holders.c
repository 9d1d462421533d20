/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The connections each charge holds, and the one to close for a newcomer (holders.h); the broker
 * owns one. A holder exists while it holds a connection, in a chained hash table by charge.
 */
#include <errno.h>
#include <stdlib.h>

#include "agent/loop/holders.h"

#define HOLDERS_BUCKETS 256

struct Holder {
        uid_t charged;
        unsigned count;
        HoldNode *idle_head, *idle_tail; /* oldest first */
        Holder *next;                    /* in its bucket */
};

struct Holders {
        Holder *buckets[HOLDERS_BUCKETS];
        uint64_t next_seq;
};

static unsigned bucket_of(uid_t charged) {
        /* charges of namespaces are inode numbers in a run: spread them (Knuth's multiplicative hash) */
        return (unsigned)(((uint32_t)charged * 2654435761U) >> 24) % HOLDERS_BUCKETS;
}

Holders *holders_new(void) {
        return calloc(1, sizeof(Holders));
}

Holders *holders_free(Holders *h) {
        if (!h)
                return NULL;
        for (unsigned i = 0; i < HOLDERS_BUCKETS; i++)
                while (h->buckets[i]) {
                        Holder *next = h->buckets[i]->next;
                        free(h->buckets[i]);
                        h->buckets[i] = next;
                }
        free(h);
        return NULL;
}

static Holder *holder_find(const Holders *h, uid_t charged) {
        for (Holder *k = h->buckets[bucket_of(charged)]; k; k = k->next)
                if (k->charged == charged)
                        return k;
        return NULL;
}

static void idle_unlink(Holder *k, HoldNode *n) {
        if (n->idle_prev)
                n->idle_prev->idle_next = n->idle_next;
        else
                k->idle_head = n->idle_next;
        if (n->idle_next)
                n->idle_next->idle_prev = n->idle_prev;
        else
                k->idle_tail = n->idle_prev;
        n->idle_prev = n->idle_next = NULL;
        n->idle = false;
}

int holders_add(Holders *h, HoldNode *n, uid_t charged) {
        Holder *k = holder_find(h, charged);

        if (!k) {
                unsigned b = bucket_of(charged);
                k = calloc(1, sizeof(*k));
                if (!k)
                        return -ENOMEM;
                k->charged = charged;
                k->next = h->buckets[b];
                h->buckets[b] = k;
        }
        *n = (HoldNode){ .holder = k, .idle = true, .idle_prev = k->idle_tail, .seq = h->next_seq++ };
        if (k->idle_tail)
                k->idle_tail->idle_next = n;
        else
                k->idle_head = n;
        k->idle_tail = n;
        k->count++;
        return 0;
}

void holders_not_idle(Holders *h, HoldNode *n) {
        if (n->holder && n->idle)
                idle_unlink(n->holder, n);
}

void holders_remove(Holders *h, HoldNode *n) {
        Holder *k = n->holder;

        if (!k)
                return;
        holders_not_idle(h, n);
        n->holder = NULL;
        if (--k->count > 0)
                return;
        for (Holder **p = &h->buckets[bucket_of(k->charged)]; *p; p = &(*p)->next)
                if (*p == k) {
                        *p = k->next;
                        break;
                }
        free(k);
}

unsigned holders_count(const Holders *h, uid_t charged) {
        const Holder *k = holder_find(h, charged);

        return k ? k->count : 0;
}

/* @k's oldest connection that is still idle, those that are not any more taken out on the way. */
static HoldNode *oldest_idle(Holder *k, bool (*still_idle)(HoldNode *n, void *userdata), void *userdata) {
        while (k->idle_head && !still_idle(k->idle_head, userdata))
                idle_unlink(k, k->idle_head);
        return k->idle_head;
}

HoldNode *holders_victim(Holders *h, uid_t charged, unsigned holding, bool (*still_idle)(HoldNode *n, void *userdata),
                         void *userdata) {
        Holder *best = NULL;
        HoldNode *best_node = NULL;

        for (unsigned i = 0; i < HOLDERS_BUCKETS; i++)
                for (Holder *k = h->buckets[i]; k; k = k->next) {
                        HoldNode *n;
                        if (k->charged == 0 || k->charged == charged || k->count <= holding)
                                continue;
                        if (best && k->count < best->count)
                                continue;
                        n = oldest_idle(k, still_idle, userdata);
                        if (!n)
                                continue;
                        if (!best || k->count > best->count || n->seq < best_node->seq) {
                                best = k;
                                best_node = n;
                        }
                }
        return best_node;
}
