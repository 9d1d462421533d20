/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dump: a core dump of a target, staged in its view, published for exactly the right readers */
#pragma once

#include "agent/loop/connection.h"
#include "common/wire.h"

void dump_start(Request *req, const WireMessage *m);
/* What becomes of a dump once it is whole. */
typedef enum DumpDelivery {
        DUMP_DELIVER_STORED,        /* published in dump_dir, for the requester and the rule's readers */
        DUMP_DELIVER_STORED_AND_FD, /* and a read-only fd of it in the reply (dsctl dump -o) */
        /*
         * a read-only fd of the unnamed file alone, nothing stored (a stock tool's dump through dsctl
         * port, which dsctl writes where the tool asked): the space is the requester's to hold while
         * it keeps the fd, and dump_dir keeps no copy. A dump only root may read (the process changed
         * credentials) is stored, root's, as for DUMP_DELIVER_STORED.
         */
        DUMP_DELIVER_FD_ONLY,
} DumpDelivery;

/*
 * A dump of @type of the process @m names (its PID or UNIT), decided as the
 * dump command, delivered as @delivery says. dump_start() reads these from a
 * dump request; the proxy from a tool's GenerateCoreDump.
 */
void dump_start_as(Request *req, const WireMessage *m, PolicyDumpType type, DumpDelivery delivery);
void dumps_list(Request *req);
/*
 * dump_publish_session_copy() - publish the copy dump_dir kept of @req's trace or gcdump session (session-copy.h)
 * @kind: "trace" or "gcdump", its type and the first part of its name; @suffix: ".nettrace" or ".gcdump"
 *
 * As a dump of @req is: for the requester and the rule's readers, labelled with its requester and request, named
 * @kind.NAME.PID.TIME.REQUESTID@suffix, then recorded (the dump record: without it the file goes again, unless
 * audit_failure = "allow") and handed to the rule's egress store (egress_upload_artifact()).
 *
 * Return: 0 with its path in @ret_path, DUMP_PUBLISH_E_NO_SPACE, or a negative errno (nothing is left).
 */
int dump_publish_session_copy(Request *req, int dir_fd, int file_fd, const char *kind, const char *suffix,
                              uint64_t size, char *ret_path, size_t path_size);


/*
 * dumps_remove() - remove the dump PATH names, if the caller asked for it
 *
 * PATH is a name in dump_dir, alone or after dump_dir and a slash; nothing
 * else is looked up. The requester the dump records (user.dsagent.requester_uid)
 * and root may remove it; everyone else gets the answer a name that does
 * not exist gets.
 */
void dumps_remove(Request *req, const WireMessage *m);

/**
 * dumps_url() - a presigned GET URL of the uploaded object of the artifact PATH names (dsctl dumps --url)
 *
 * For a caller who may read the file (root, or its ACL, as dumps_list() decides); anyone else, and a name that
 * is not there, get the same answer. The egress process signs it (it alone holds the keys), for the store's
 * url_max_age; the record says which object, never the URL.
 */
void dumps_url(Request *req, const WireMessage *m);
