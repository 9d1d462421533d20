/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl collect: the policy's [[collect]] tables the caller reads, each with how its action last
 * ended, the processes it watches now, and when it last fired on each and how its action ended there
 * (docs/collect.md).
 *
 * Root is shown every table; anyone else the tables that name them among their readers (the user,
 * or one of their groups): the ones whose artifacts they can read. A caller who reads no table is
 * answered as for a policy without tables, so that no table's existence, name or targets reach
 * anyone it does not name. Read from the watcher's state in the loop: nothing blocks.
 */
#pragma once

#include "agent/loop/request.h"

/* One COLLECT frame per table (RULE, COMMAND: its action, PROVIDERS: what it watches, MESSAGE when
 * artifacts of it were removed because their records could not be written, and once its action has ended
 * RESULT_PID and the result: RESULT, RESULT_TIME, then PATH and SIZE or REASON), one per process it watches
 * (RULE, PID, UID, UNIT, NAME, TIME when it fired, and its own result likewise), then DONE. */
void collect_list(Request *req);
