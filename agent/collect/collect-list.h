/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl collect: the policy's [[collect]] tables the caller reads, each with the processes it
 * watches now and when it last fired on each (docs/collect.md).
 *
 * Root is shown every table; anyone else the tables that name them among their readers (the user,
 * or one of their groups): the ones whose artifacts they can read. A caller who reads no table is
 * answered as for a policy without tables, so that no table's existence, name or targets reach
 * anyone it does not name. Read from the watcher's state in the loop: nothing blocks.
 */
#pragma once

#include "request.h"

/* One COLLECT frame per table (RULE, COMMAND: its action, PROVIDERS: what it watches, and MESSAGE when
 * artifacts of it were removed because their records could not be written), one per process it watches
 * (RULE, PID, UID, UNIT, NAME, and TIME when it fired), then DONE. */
void collect_list(Request *req);
