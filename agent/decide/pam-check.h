/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * PAM account checks for requesters, done by a helper process forked at
 * start-up: PAM modules are many and their needs unknown, so they run apart
 * from the agent, which can then be sandboxed without them.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "common/cleanup.h"

#define PAM_CHECK_SERVICE_MAX 64
#define PAM_CHECK_MESSAGE_MAX 160

enum {
        _PAM_CHECK_E_SUCCESS,
        PAM_CHECK_E_DENIED,      /* PAM said no */
        PAM_CHECK_E_UNAVAILABLE, /* no answer: the helper is gone or failed; callers deny */
};

typedef struct PamChecker PamChecker;
typedef struct PamQuery PamQuery;

/* Called once with 0, PAM_CHECK_E_DENIED or PAM_CHECK_E_UNAVAILABLE and PAM's words. */
typedef void (*PamCheckDone)(int result, const char *message, void *userdata);

int pam_checker_start(sd_event *event, PamChecker **ret);
PamChecker *pam_checker_free(PamChecker *pc);
DEFINE_TRIVIAL_CLEANUP_FUNC(PamChecker *, pam_checker_free);
int pam_checker_query(PamChecker *pc, const char *service, uid_t uid, PamCheckDone done, void *userdata,
                      PamQuery **ret);
void pam_query_cancel(PamQuery *q);
