/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dump: a core dump of a target, staged in its view, published for exactly the right readers */
#pragma once

#include "connection.h"
#include "wire.h"

void dump_start(Request *req, const WireMessage *m);
void dumps_list(Request *req);
