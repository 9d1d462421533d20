/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* explain: would the caller be allowed, and by which rule or why not */
#pragma once

#include "agent/loop/request.h"
#include "common/wire.h"

/*
 * Decides the command @m asks about, for the process it names, as it would be decided, and answers
 * with the verdict. The answer speaks only of rules that name the caller; asking uses up no rate limit.
 */
void explain_start(Request *req, const WireMessage *m);
