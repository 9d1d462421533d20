/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "dump-publish.h"
#include "dump-writer.h"
#include "elf-core.h"

#define SPLICE_CHUNK (1 << 20)
#define ELF_HEAD_READ 4096

/*
 * The guards are looked at again once the dump has gone one byte past the
 * headroom they left (other dumps may have been removed meanwhile), and at
 * least every DUMP_WRITER_CHECK_EVERY bytes (other dumps grow too).
 */
static uint64_t next_check_after(uint64_t bytes, uint64_t headroom) {
        return bytes + (headroom < DUMP_WRITER_CHECK_EVERY ? headroom + 1 : DUMP_WRITER_CHECK_EVERY);
}

int dump_writer_new(int dir_fd, int source_fd, const PolicyAgentSettings *limits, uint64_t *in_flight,
                    DumpWriter **ret, const char **ret_why) {
        _cleanup_close_ int source = source_fd;
        uint64_t headroom;
        DumpWriter *w;
        int r;

        r = dump_space_headroom(dir_fd, limits, *in_flight, &headroom, ret_why);
        if (r == DUMP_PUBLISH_E_NO_SPACE)
                return DUMP_WRITER_E_NO_SPACE;
        if (r < 0)
                return r;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        /* unnamed until complete: a failure or a full disk leaves nothing behind */
        w->file_fd = openat(dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (w->file_fd < 0) {
                r = -errno;
                free(w);
                return r;
        }
        w->dir_fd = dir_fd;
        w->source_fd = TAKE_FD(source);
        w->limits = limits;
        w->in_flight = in_flight;
        w->next_check = next_check_after(0, headroom);
        *ret = w;
        return 0;
}

static int account(DumpWriter *w, size_t n, const char **ret_why) {
        uint64_t headroom;
        int r;

        w->bytes += n;
        *w->in_flight += n;
        if (w->bytes < w->next_check)
                return 0;
        r = dump_space_headroom(w->dir_fd, w->limits, *w->in_flight, &headroom, ret_why);
        if (r != 0)
                return r == DUMP_PUBLISH_E_NO_SPACE ? DUMP_WRITER_E_NO_SPACE : r;
        w->next_check = next_check_after(w->bytes, headroom);
        return 0;
}

int dump_writer_pump(DumpWriter *w, uint64_t budget, const char **ret_why) {
        uint64_t moved = 0;

        if (w->ended || w->source_fd < 0)
                return DUMP_WRITER_E_ENDED;
        while (moved < budget) {
                /* never past the next check: a limit is found broken by one byte, not by a chunk */
                uint64_t until_check = w->next_check - w->bytes;
                ssize_t n = splice(w->source_fd, NULL, w->file_fd, NULL,
                                   until_check < SPLICE_CHUNK ? (size_t)until_check : SPLICE_CHUNK,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                int r;

                if (n == 0) {
                        w->ended = true;
                        return DUMP_WRITER_E_ENDED;
                }
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        if (errno == ENOSPC || errno == EDQUOT) {
                                *ret_why = "the dump does not fit: the dump directory's file system is full";
                                return DUMP_WRITER_E_NO_SPACE;
                        }
                        return -errno;
                }
                moved += (uint64_t)n;
                r = account(w, (size_t)n, ret_why);
                if (r != 0)
                        return r;
        }
        return 0;
}

/* Reads the first @size bytes of the file written so far. */
static int read_head(const DumpWriter *w, uint8_t *buf, size_t size) {
        ssize_t n = pread(w->file_fd, buf, size, 0);

        if (n < 0)
                return -errno;
        return (size_t)n == size ? 0 : -EIO;
}

static int check_core(const DumpWriter *w, const char **ret_why) {
        _cleanup_free_ uint8_t *head = NULL;
        size_t have = w->bytes < ELF_HEAD_READ ? (size_t)w->bytes : ELF_HEAD_READ, needed = 0;
        int r;

        for (;;) {
                uint8_t *grown = realloc(head, have ? have : 1);
                if (!grown)
                        return -ENOMEM;
                head = grown;
                r = read_head(w, head, have);
                if (r < 0)
                        return r;
                r = elf_core_check(head, have, w->bytes, &needed);
                if (r != ELF_CORE_E_MORE)
                        break;
                have = needed;
        }
        if (r == ELF_CORE_E_NOT_CORE)
                *ret_why = "what the runtime wrote is not an ELF core file";
        else if (r == ELF_CORE_E_TRUNCATED)
                *ret_why = "the runtime's dump is cut short: its headers promise more than arrived";
        return r == 0 ? 0 : DUMP_WRITER_E_NOT_CORE;
}

int dump_writer_finish(DumpWriter *w, uint64_t *ret_size, const char **ret_why) {
        int capacity, r = 0;

        if (!w->ended && w->source_fd >= 0) {
                capacity = fcntl(w->source_fd, F_GETPIPE_SZ);
                r = dump_writer_pump(w, capacity > 0 ? (uint64_t)capacity : 65536, ret_why);
                if (r == DUMP_WRITER_E_ENDED)
                        r = 0;
        }
        dump_writer_close_source(w);
        if (r != 0)
                return r;
        if (w->bytes == 0) {
                *ret_why = "the runtime reported success but no dump arrived";
                return DUMP_WRITER_E_EMPTY;
        }
        r = check_core(w, ret_why);
        if (r != 0)
                return r;
        *ret_size = w->bytes;
        return 0;
}

void dump_writer_close_source(DumpWriter *w) {
        w->source_fd = safe_close(w->source_fd);
}

DumpWriter *dump_writer_free(DumpWriter *w) {
        if (!w)
                return NULL;
        *w->in_flight -= w->bytes;
        safe_close(w->source_fd);
        safe_close(w->file_fd);
        free(w);
        return NULL;
}
