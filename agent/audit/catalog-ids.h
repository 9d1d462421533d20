/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Journal MESSAGE_IDs; the text for each is in units/dsagent.catalog */
#pragma once

/* one record per client request: the decision and its outcome */
#define DSAGENT_MESSAGE_REQUEST "27ade2ec85a54471a176f947b0ec018e"

/* the policy was loaded or reloaded, or a reload was refused */
#define DSAGENT_MESSAGE_POLICY "29cd34f17b474bad9ed538319addd224"

/* a dump was taken and published */
#define DSAGENT_MESSAGE_DUMP "b44be14ffedf48ee806826f1d59bcc4e"

/* a trace or counters session started in a runtime */
#define DSAGENT_MESSAGE_SESSION_START "21c6214d54a0498bbab8983290c4efb6"

/* a trace or counters session ended */
#define DSAGENT_MESSAGE_SESSION_END "1c5ee471f818453b8c7bac25ac2e872f"

/* requests of one user refused for coming faster than the agent records them */
#define DSAGENT_MESSAGE_SUPPRESSED "dba026f157524dc5bd31f98f0e8e84b9"

/* a runtime that connected in on a port: registered, refused, resumed by the agent, gone */
#define DSAGENT_MESSAGE_PORT "92ba7a9ad3f54f1995e1add7dea5ceee"

/* a policy [[collect]] table fired on a process, or its watch of a process could not start */
#define DSAGENT_MESSAGE_COLLECT "7e4f2962cff7436e853607d2fcf710fe"

/* the audit output did not take records: how many requests were refused for it, how many records were lost */
#define DSAGENT_MESSAGE_AUDIT_GAP "e7a3a2ffe6c543d2a42572e8d2074d1b"

/* retention removed an artifact from dump_dir (max_age, max_files, a budget, room for a user's dump), or could not */
#define DSAGENT_MESSAGE_RETENTION "954f9a585ef5482c9a7017bba952745d"

/* an artifact's upload to an [egress.NAME] store: queued (before it is handed to the egress process), and its outcome */
#define DSAGENT_MESSAGE_EGRESS "69c19926015d41838f93007ed7cc398e"
