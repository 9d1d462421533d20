/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Refused connections held unanswered for PARK_USEC, then answered (park.h): a ring in the order
 * they came, which is the order their time is up, and one timer for the oldest.
 */
#include <errno.h>
#include <stdlib.h>

#include "agent/loop/park.h"

typedef struct Parked {
        int fd;
        uint64_t until_usec;
} Parked;

struct Park {
        sd_event_source *timer;
        void (*answer)(int fd, void *userdata);
        void *userdata;
        unsigned max, head, n;
        Parked held[];
};

static void park_arm(Park *p) {
        if (p->n == 0) {
                (void)sd_event_source_set_enabled(p->timer, SD_EVENT_OFF);
                return;
        }
        (void)sd_event_source_set_time(p->timer, p->held[p->head].until_usec);
        (void)sd_event_source_set_enabled(p->timer, SD_EVENT_ONESHOT);
}

static void park_release_head(Park *p) {
        int fd = p->held[p->head].fd;

        p->head = (p->head + 1) % p->max;
        p->n--;
        p->answer(fd, p->userdata);
}

static int park_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Park *p = userdata;

        while (p->n > 0 && p->held[p->head].until_usec <= usec)
                park_release_head(p);
        park_arm(p);
        return 0;
}

int park_new(sd_event *event, unsigned max, void (*answer)(int fd, void *userdata), void *userdata, Park **ret) {
        Park *p;
        int r;

        p = calloc(1, sizeof(Park) + (size_t)max * sizeof(Parked));
        if (!p)
                return -ENOMEM;
        *p = (Park){ .answer = answer, .userdata = userdata, .max = max };
        r = sd_event_add_time(event, &p->timer, CLOCK_MONOTONIC, 0, 0, park_on_timer, p);
        if (r >= 0)
                r = sd_event_source_set_enabled(p->timer, SD_EVENT_OFF);
        if (r < 0) {
                park_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

Park *park_free(Park *p) {
        if (!p)
                return NULL;
        while (p->n > 0)
                park_release_head(p);
        sd_event_source_disable_unref(p->timer);
        free(p);
        return NULL;
}

bool park_hold(Park *p, int fd) {
        uint64_t now = 0;

        if (p->n == p->max)
                return false;
        (void)sd_event_now(sd_event_source_get_event(p->timer), CLOCK_MONOTONIC, &now);
        p->held[(p->head + p->n) % p->max] = (Parked){ .fd = fd, .until_usec = now + PARK_USEC };
        if (p->n++ == 0)
                park_arm(p);
        return true;
}

unsigned park_held(const Park *p) {
        return p->n;
}
