/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dump: a core dump of a target, staged in its view, published for exactly the right readers */
#pragma once

#include "connection.h"
#include "wire.h"

void dump_start(Request *req, const WireMessage *m);
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
