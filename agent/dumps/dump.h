/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dump: a core dump of a target, staged in its view, published for exactly the right readers */
#pragma once

#include "connection.h"
#include "wire.h"

void dump_start(Request *req, const WireMessage *m);
/*
 * A dump of @type of the process @m names (its PID or UNIT), decided as the
 * dump command; with @want_fd the reply carries a read-only fd of the
 * published dump when the requester may read it. dump_start() reads these
 * from a dump request; the proxy from a tool's GenerateCoreDump.
 */
void dump_start_as(Request *req, const WireMessage *m, PolicyDumpType type, bool want_fd);
void dumps_list(Request *req);

/*
 * dumps_remove() - remove the dump PATH names, if the caller asked for it
 *
 * PATH is a name in dump_dir, alone or after dump_dir and a slash; nothing
 * else is looked up. The requester the dump records (user.dsagent.requester_uid)
 * and root may remove it; everyone else gets the answer a name that does
 * not exist gets.
 */
void dumps_remove(Request *req, const WireMessage *m);
