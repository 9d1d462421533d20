/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The crashes command (docs/crashes.md): what systemd-coredump caught of the processes a rule's
 * crashes covers, listed, and a crash's core handed over. The journal is read and the core copied
 * by workers (jobs.h); each crash is decided in the loop (policy_crash_check()), and one the caller
 * may not see is answered exactly as one that never was.
 */
#pragma once

#include "agent/loop/request.h"
#include "common/wire.h"

/* What a crash one may not see, or that never was, is answered with. */
#define CRASHES_NO_SUCH_CRASH "no such crash"

/**
 * crashes_list() - CRASHES: the caller's crashes, oldest first, one CRASH frame each
 *
 * TIME (µs since the epoch): only those systemd-coredump logged since. Root sees them all; the PAM
 * account check, when the policy names a service, is made once for the listing.
 */
void crashes_list(Request *req, const WireMessage *m);

/**
 * crash_copy_start() - CRASH: the core of CRASH_ID, decompressed into dump_dir and handed over
 *
 * Decided by decide_crash() (the policy, PAM, the rule's rate limit), counted as a dump is
 * (admission.h), decompressed by a worker (jobs_copy_crash()), published for the requester and the
 * rule's readers (none but root when the process changed credentials), recorded as a dump is, and,
 * with WANT_FD, handed over as a read-only fd. A CRASH frame, then a DUMP frame, then DONE.
 */
void crash_copy_start(Request *req, const WireMessage *m);
