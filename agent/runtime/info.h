/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* info: what the runtime of one process says of it (ProcessInfo), under policy */
#pragma once

#include "agent/loop/request.h"
#include "common/wire.h"

/* Opens the process @m names, decides, asks its runtime for ProcessInfo and answers with it. */
void info_start(Request *req, const WireMessage *m);
