/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The object key an artifact is stored under (egress-name.c): where it came from (host, unit or container),
 * what it is, of which process, when, and for which request, in a form any S3 store and any shell takes as it
 * is. Pure: no I/O, no clock. The process's name is its owner's to choose: it is reduced to a safe alphabet
 * and length here, so a name can neither climb out of its place in the key nor collide with another request's.
 */
#pragma once

#include <stdint.h>

#define EGRESS_NAME_PART_MAX 64    /* bytes of one part taken from the target (host, unit, process...) */
#define EGRESS_KEY_MAX 1024        /* S3's longest key */

typedef struct EgressNameParts {
        const char *prefix;     /* the target's prefix from the policy: "" or segments of the key alphabet, each
                                 * ending in '/', none "." or ".."; anything else is refused */
        const char *host;       /* the node's name */
        const char *unit;       /* the target's systemd unit; NULL or "" when it has none */
        const char *container;  /* its container's short id, used when it has no unit; NULL or "" for none */
        const char *type;       /* dump, gcdump, trace, stacks, counters, exceptions, crash */
        const char *process;    /* the process's name: untrusted */
        uint32_t pid;
        uint64_t time_usec;     /* when the artifact was written, CLOCK_REALTIME */
        const char *request_id; /* unique per request: what keeps two keys apart */
        const char *extension;  /* without its dot: dmp, nettrace, gcdump, txt, csv */
} EgressNameParts;

/**
 * egress_object_key() - PREFIX HOST/SCOPE/TYPE/YYYY/MM/DD/PROCESS-PID-YYYYMMDDTHHMMSSZ-REQUESTID.EXT
 *
 * SCOPE is the unit, else the container, else "host"; all times UTC. Of every part but the prefix, bytes
 * outside A-Z a-z 0-9 . _ - become '_', only the first EGRESS_NAME_PART_MAX bytes are kept, and an empty
 * part, or one of dots only, becomes "_": no part can hold a '/', be "." or "..", or be empty.
 *
 * Return: 0 with the key in @ret_key (the caller frees it); -EINVAL for a prefix outside the rules above, or
 * a missing type, request id or extension; -E2BIG past EGRESS_KEY_MAX; -ENOMEM.
 */
int egress_object_key(const EgressNameParts *parts, char **ret_key);
