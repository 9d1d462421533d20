/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* resolve: which process a request's PID or UNIT names for the caller (dsctl exec UNIT) */
#pragma once

#include "agent/loop/request.h"
#include "common/wire.h"

/*
 * Opens the process @m names, exactly as any command about one process does (commands_open_target():
 * a unit's one .NET process the caller may see, the invisible answered as the missing), and answers
 * with one PROCESS frame of its PID and UNIT. Nothing is asked of its runtime and no command is
 * decided: the caller learns what a unit's name already stands for in its every request, and what
 * explain tells it too.
 */
void resolve_start(Request *req, const WireMessage *m);
