/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The commands a client can ask for: decide under policy, then carry out (the steps they share: command-steps.h) */
#pragma once

#include "agent/loop/request.h"
#include "common/wire.h"

/* Carries out the request @m of a connection (connection.c): every request ends in exactly one reply. */
void commands_dispatch(Request *req, const WireMessage *m);
