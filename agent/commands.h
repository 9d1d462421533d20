/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The commands a client can ask for: decide under policy, then carry out */
#pragma once

#include "connection.h"
#include "wire.h"

void commands_dispatch(Request *req, const WireMessage *m);
void commands_reply_target_error(Request *req, int r, const char *why);
