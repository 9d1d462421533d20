/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent's loop: accepts clients, bounds them, exits when idle */
#pragma once

#include "broker-state.h"

int broker_new(sd_event *event, int listen_fd, const BrokerConfig *config, Broker **ret);

/**
 * broker_load_policy() - read the policy files and put them in force whole
 *
 * At start and on every reload. Files that do not load change nothing once
 * a policy has loaded: the last good one stays in force. Until one has,
 * the broker is broken: it serves under policy_new_fallback(), answers
 * everyone but root POLICY_BROKEN (broker_policy_refuses()), and keeps in
 * policy_problem what is wrong. Files that load end that state. Either way
 * the audit trail gets the policy record, with every error. At start, the
 * errors go to stderr too. Requests in flight keep the policy they started
 * under.
 *
 * Return: 0 when the files loaded, POLICY_LOAD_E_INVALID when they did not
 * (the previous policy, or the fallback, is in force), or a negative errno
 * when no policy at all could be put in force (at start only).
 */
int broker_load_policy(Broker *b);

int broker_start_workers(Broker *b);
Broker *broker_free(Broker *b);
unsigned broker_connections_of_uid(const Broker *b, uid_t uid);
