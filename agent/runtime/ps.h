/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ps: the .NET processes the caller may act on */
#pragma once

#include "agent/loop/request.h"
#include "common/wire.h"

/* Lists the processes the requester may act on, one frame each, as they are probed (ps.c says how). */
void ps_start(Request *req);
