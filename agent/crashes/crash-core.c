/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The cores systemd-coredump stored (crash-core.h): found and checked for one crash, decompressed by a
 * confined child, moved into an unnamed file of dump_dir by the worker.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <lz4frame.h>
#include <lzma.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "common/cleanup.h"
#include "agent/crashes/crash-core.h"
#include "agent/dumps/elf-core.h"
#include "agent/support/test-hooks.h"
#include "common/text.h"

#define CRASH_CORE_CHUNK (128u << 10)
/* xz's decoder may use this much memory at most: the largest dictionary xz -9 makes is 64 MiB */
#define CRASH_CORE_XZ_MEMLIMIT (256ULL << 20)
#define CRASH_CORE_PUMP_BUDGET (64ULL << 20)
#define CRASH_CORE_PROGRESS_MSEC 1000

/* What the child's exit status says; 0 is a whole stream. */
enum {
        CHILD_CORRUPT = 1,
        CHILD_TOO_LARGE = 2,
        CHILD_FAILED = 3,
};

static int open_beneath(int dir_fd, const char *path, uint64_t flags, uint64_t resolve) {
        struct open_how how = { .flags = flags | O_CLOEXEC, .resolve = resolve };
        long fd = syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));

        return fd < 0 ? -errno : (int)fd;
}

/* root's, and writable by root alone */
static bool roots_alone(const struct stat *st) {
        return st->st_uid == 0 && (st->st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

/* A label systemd-coredump set, when it is there, says @want. */
static bool label_agrees(int fd, const char *key, uint64_t want) {
        char buf[32];
        ssize_t n = fgetxattr(fd, key, buf, sizeof(buf) - 1);
        uint64_t v;

        if (n < 0)
                return errno == ENODATA || errno == ENOTSUP;
        buf[n] = '\0';
        return parse_u64(buf, &v) == 0 && v == want;
}

int crash_core_open(const CrashEntry *e, int *ret_fd, struct stat *ret_st, const char **ret_why) {
        _cleanup_close_ int root_fd = -EBADF, dir_fd = -EBADF, fd = -EBADF;
        struct stat st;

        if (!e->file_name[0])
                return CRASH_CORE_E_GONE;
        root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return -errno;
        dir_fd = open_beneath(root_fd, CRASH_STORE_DIR + 1, O_PATH | O_DIRECTORY,
                              RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (dir_fd == -ENOENT)
                return CRASH_CORE_E_GONE;
        if (dir_fd < 0) {
                *ret_why = "the coredump store cannot be reached without following a link";
                return dir_fd == -ELOOP || dir_fd == -EXDEV ? CRASH_CORE_E_UNTRUSTED : dir_fd;
        }
        if (fstat(dir_fd, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode) || !roots_alone(&st)) {
                *ret_why = "the coredump store " CRASH_STORE_DIR " is not root's alone";
                return CRASH_CORE_E_UNTRUSTED;
        }
        fd = open_beneath(dir_fd, e->file_name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK,
                          RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
        if (fd == -ENOENT)
                return CRASH_CORE_E_GONE;
        if (fd == -ELOOP || fd == -EXDEV) {
                *ret_why = "the stored core is a link";
                return CRASH_CORE_E_UNTRUSTED;
        }
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || !roots_alone(&st)) {
                *ret_why = "the stored core is not a file of root's alone";
                return CRASH_CORE_E_UNTRUSTED;
        }
        if (!label_agrees(fd, "user.coredump.pid", e->pid) || !label_agrees(fd, "user.coredump.uid", e->uid) ||
            !label_agrees(fd, "user.coredump.timestamp", e->time_usec)) {
                *ret_why = "the stored core's labels name another crash";
                return CRASH_CORE_E_UNTRUSTED;
        }
        *ret_st = st;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* ---- in the confined child ---- */

static int write_all(int fd, const void *p, size_t n) {
        const uint8_t *b = p;

        while (n > 0) {
                ssize_t k = write(fd, b, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                b += k;
                n -= (size_t)k;
        }
        return 0;
}

/* @n more bytes out, within @max. */
static int emit(int out_fd, const void *p, size_t n, uint64_t *total, uint64_t max) {
        if (n > max - *total)
                return CRASH_CORE_E_TOO_LARGE;
        *total += n;
        return write_all(out_fd, p, n);
}

static ssize_t read_some(int fd, void *buf, size_t size) {
        for (;;) {
                ssize_t n = read(fd, buf, size);
                if (n >= 0 || errno != EINTR)
                        return n < 0 ? -errno : n;
        }
}

static int copy_plain(int in_fd, int out_fd, uint8_t *in, uint64_t max) {
        uint64_t total = 0;

        for (;;) {
                ssize_t n = read_some(in_fd, in, CRASH_CORE_CHUNK);
                int r;

                if (n <= 0)
                        return (int)n;
                r = emit(out_fd, in, (size_t)n, &total, max);
                if (r != 0)
                        return r;
        }
}

static int copy_zstd(int in_fd, int out_fd, uint8_t *in, uint8_t *out, uint64_t max) {
        ZSTD_DStream *d = ZSTD_createDStream();
        uint64_t total = 0;
        size_t last = 1; /* 0 once a frame ended exactly at the end of what was read */
        bool any = false;
        int r = 0;

        if (!d)
                return -ENOMEM;
        for (;;) {
                ssize_t n = read_some(in_fd, in, CRASH_CORE_CHUNK);
                ZSTD_inBuffer ib = { .src = in, .size = n > 0 ? (size_t)n : 0 };

                if (n < 0) {
                        r = (int)n;
                        break;
                }
                if (n == 0) {
                        r = any && last == 0 ? 0 : CRASH_CORE_E_CORRUPT;
                        break;
                }
                any = true;
                while (r == 0 && ib.pos < ib.size) {
                        ZSTD_outBuffer ob = { .dst = out, .size = CRASH_CORE_CHUNK };

                        last = ZSTD_decompressStream(d, &ob, &ib);
                        if (ZSTD_isError(last))
                                r = CRASH_CORE_E_CORRUPT;
                        else
                                r = emit(out_fd, out, ob.pos, &total, max);
                }
                /* a block may still be in the decoder with all input read */
                while (r == 0 && last != 0 && !ZSTD_isError(last)) {
                        ZSTD_outBuffer ob = { .dst = out, .size = CRASH_CORE_CHUNK };

                        last = ZSTD_decompressStream(d, &ob, &ib);
                        if (ZSTD_isError(last))
                                r = CRASH_CORE_E_CORRUPT;
                        else if (ob.pos == 0)
                                break; /* it needs more input */
                        else
                                r = emit(out_fd, out, ob.pos, &total, max);
                }
                if (r != 0)
                        break;
        }
        ZSTD_freeDStream(d);
        return r;
}

static int copy_lz4(int in_fd, int out_fd, uint8_t *in, uint8_t *out, uint64_t max) {
        LZ4F_dctx *d = NULL;
        uint64_t total = 0;
        size_t hint = 1;
        bool any = false;
        int r = 0;

        if (LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)))
                return -ENOMEM;
        for (;;) {
                ssize_t n = read_some(in_fd, in, CRASH_CORE_CHUNK);
                size_t pos = 0;

                if (n < 0) {
                        r = (int)n;
                        break;
                }
                if (n == 0) {
                        r = any && hint == 0 ? 0 : CRASH_CORE_E_CORRUPT;
                        break;
                }
                any = true;
                while (r == 0 && pos < (size_t)n) {
                        size_t out_size = CRASH_CORE_CHUNK, in_size = (size_t)n - pos;

                        hint = LZ4F_decompress(d, out, &out_size, in + pos, &in_size, NULL);
                        if (LZ4F_isError(hint))
                                r = CRASH_CORE_E_CORRUPT;
                        else
                                r = emit(out_fd, out, out_size, &total, max);
                        pos += in_size;
                }
                if (r != 0)
                        break;
        }
        (void)LZ4F_freeDecompressionContext(d);
        return r;
}

static int copy_xz(int in_fd, int out_fd, uint8_t *in, uint8_t *out, uint64_t max) {
        lzma_stream s = LZMA_STREAM_INIT;
        uint64_t total = 0;
        int r = 0;

        if (lzma_stream_decoder(&s, CRASH_CORE_XZ_MEMLIMIT, LZMA_CONCATENATED) != LZMA_OK)
                return -ENOMEM;
        for (bool eof = false; r == 0;) {
                lzma_ret ret;

                if (s.avail_in == 0 && !eof) {
                        ssize_t n = read_some(in_fd, in, CRASH_CORE_CHUNK);
                        if (n < 0) {
                                r = (int)n;
                                break;
                        }
                        eof = n == 0;
                        s.next_in = in;
                        s.avail_in = (size_t)n;
                }
                s.next_out = out;
                s.avail_out = CRASH_CORE_CHUNK;
                ret = lzma_code(&s, eof ? LZMA_FINISH : LZMA_RUN);
                r = emit(out_fd, out, CRASH_CORE_CHUNK - s.avail_out, &total, max);
                if (r != 0 || ret == LZMA_STREAM_END)
                        break;
                /* LZMA_BUF_ERROR: the input ended before the stream did */
                if (ret != LZMA_OK)
                        r = CRASH_CORE_E_CORRUPT;
        }
        lzma_end(&s);
        return r;
}

int crash_core_decompress(int in_fd, CrashCompression compression, int out_fd, uint64_t max_bytes) {
        uint8_t *in = malloc(CRASH_CORE_CHUNK), *out = malloc(CRASH_CORE_CHUNK);
        int r;

        if (!in || !out)
                r = -ENOMEM;
        else if (compression == CRASH_COMPRESSION_ZSTD)
                r = copy_zstd(in_fd, out_fd, in, out, max_bytes);
        else if (compression == CRASH_COMPRESSION_LZ4)
                r = copy_lz4(in_fd, out_fd, in, out, max_bytes);
        else if (compression == CRASH_COMPRESSION_XZ)
                r = copy_xz(in_fd, out_fd, in, out, max_bytes);
        else
                r = copy_plain(in_fd, out_fd, in, max_bytes);
        free(in);
        free(out);
        return r;
}

/**
 * crash_core_confine() - what the decompressing child may do from now on, for good
 *
 * read, write and close, its memory (brk, mmap without PROT_EXEC, munmap, mremap, madvise), and
 * exit; anything else kills it (SIGSYS). Return: 0 or a negative errno.
 */
static int crash_core_confine(void) {
        static const int allowed[] = {
                SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(close), SCMP_SYS(brk), SCMP_SYS(munmap), SCMP_SYS(mremap),
                SCMP_SYS(madvise), SCMP_SYS(exit), SCMP_SYS(exit_group), SCMP_SYS(rt_sigreturn),
        };
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
        int r;

        if (!ctx)
                return -ENOMEM;
        /* no_new_privs is the agent's already (sandbox.c): libseccomp need not set it again */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        if (r == 0)
                r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(allowed); i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
        /* memory, never executable */
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
                                     SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
        if (r == 0)
                r = seccomp_load(ctx);
        seccomp_release(ctx);
        return r;
}

/* ---- in the worker ---- */

/* clone() with exactly the flags the agent's filter lets a worker use (sandbox.c) */
static pid_t fork_with_pidfd(int *ret_pidfd) {
        return (pid_t)syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, NULL, ret_pidfd, NULL, NULL);
}

_Noreturn static void child_run(int core_fd, CrashCompression compression, int pipe_fd, uint64_t max_bytes) {
        bool escape = test_hook_decompressor_escape();
        int r;

        (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (crash_core_confine() != 0)
                _exit(CHILD_FAILED);
        /* a test build proves the filter: a call it forbids, then the child must be gone by SIGSYS */
        if (escape)
                (void)open("/etc/shadow", O_RDONLY | O_CLOEXEC);
        r = crash_core_decompress(core_fd, compression, pipe_fd, max_bytes);
        _exit(r == 0 ? 0 : r == CRASH_CORE_E_CORRUPT ? CHILD_CORRUPT : r == CRASH_CORE_E_TOO_LARGE ? CHILD_TOO_LARGE
                                                                                                   : CHILD_FAILED);
}

static uint64_t now_msec(void) {
        struct timespec ts;

        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The child's end: how it exited, as crash-core.h's codes. */
static int child_result(int pidfd, const char **ret_why) {
        siginfo_t si = {};

        if (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED) < 0)
                return -errno;
        if (si.si_code == CLD_EXITED && si.si_status == 0)
                return 0;
        if (si.si_code == CLD_EXITED && si.si_status == CHILD_CORRUPT) {
                *ret_why = "the stored core does not decompress: it is corrupt or cut short";
                return CRASH_CORE_E_CORRUPT;
        }
        if (si.si_code == CLD_EXITED && si.si_status == CHILD_TOO_LARGE) {
                *ret_why = "the stored core decompresses to more than the limit";
                return CRASH_CORE_E_TOO_LARGE;
        }
        *ret_why = si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED
                           ? "the decompressor was killed (it tried something its sandbox forbids)"
                           : "the decompressor failed";
        return CRASH_CORE_E_CORRUPT;
}

/* The first @size bytes the core decompresses to (fewer when it is shorter), into @buf. */
static int read_head(int core_fd, CrashCompression compression, uint8_t *buf, size_t size, size_t *ret_len) {
        _cleanup_close_ int pidfd = -EBADF, pipe_read = -EBADF, pipe_write = -EBADF;
        const char *why = NULL;
        size_t have = 0;
        int fds[2], r = 0;
        pid_t pid;

        if (lseek(core_fd, 0, SEEK_SET) < 0 || pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        pipe_read = fds[0];
        pipe_write = fds[1];
        pid = fork_with_pidfd(&pidfd);
        if (pid < 0)
                return -errno;
        if (pid == 0)
                child_run(core_fd, compression, pipe_write, UINT64_MAX);
        pipe_write = safe_close(pipe_write);
        while (have < size) {
                ssize_t n = read(pipe_read, buf + have, size - have);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = -errno;
                        break;
                }
                if (n == 0)
                        break;
                have += (size_t)n;
        }
        /* what follows is not wanted: the child need not finish */
        (void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        (void)child_result(pidfd, &why);
        *ret_len = have;
        return r;
}

int crash_core_dotnet(int core_fd, CrashCompression compression, CrashDotnet *ret) {
        size_t want = 1u << 20;

        for (unsigned round = 0; round < 4; round++) {
                _cleanup_free_ uint8_t *head = malloc(want);
                size_t have = 0, needed = 0;
                int r;

                if (!head)
                        return -ENOMEM;
                r = read_head(core_fd, compression, head, want, &have);
                if (r < 0)
                        return r;
                r = elf_core_maps_file(head, have, "/libcoreclr.so", &needed);
                if (r == 1 || r == 0) {
                        *ret = r == 1 ? CRASH_DOTNET_YES : CRASH_DOTNET_NO;
                        return 0;
                }
                /* more than the core holds, or than is looked at: it does not tell */
                if (r != ELF_CORE_E_MORE || have < want || needed <= want || needed > ELF_CORE_HEADERS_MAX)
                        break;
                want = needed;
        }
        *ret = CRASH_DOTNET_UNKNOWN;
        return 0;
}

int crash_core_copy(int core_fd, CrashCompression compression, DumpWriter *w, uint64_t max_bytes,
                    CrashCoreProgress progress, void *userdata, const char **ret_why) {
        _cleanup_close_ int pidfd = -EBADF, pipe_read = -EBADF, pipe_write = -EBADF;
        uint64_t reported_msec = now_msec();
        int fds[2], r = 0, child;
        pid_t pid;

        if (pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        pipe_read = fds[0];
        pipe_write = fds[1];
        if (fcntl(pipe_read, F_SETFL, O_NONBLOCK) < 0)
                return -errno;
        pid = fork_with_pidfd(&pidfd);
        if (pid < 0)
                return -errno;
        if (pid == 0)
                child_run(core_fd, compression, pipe_write, max_bytes);
        pipe_write = safe_close(pipe_write);

        w->source_fd = pipe_read;
        for (;;) {
                struct pollfd p = { .fd = pipe_read, .events = POLLIN };

                if (poll(&p, 1, CRASH_CORE_PROGRESS_MSEC) < 0 && errno != EINTR) {
                        r = -errno;
                        break;
                }
                r = dump_writer_pump(w, CRASH_CORE_PUMP_BUDGET, ret_why);
                if (r == 0 && w->bytes > max_bytes) {
                        *ret_why = "the stored core decompresses to more than the limit";
                        r = CRASH_CORE_E_TOO_LARGE;
                }
                if (progress && now_msec() - reported_msec >= CRASH_CORE_PROGRESS_MSEC) {
                        progress(w->bytes, userdata);
                        reported_msec = now_msec();
                }
                if (r != 0)
                        break;
        }
        if (r != DUMP_WRITER_E_ENDED) {
                /* the worker gave up on it: the child need not finish */
                (void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                (void)child_result(pidfd, ret_why);
                return r == DUMP_WRITER_E_NO_SPACE ? CRASH_CORE_E_NO_SPACE : r;
        }
        child = child_result(pidfd, ret_why);
        if (child != 0)
                return child;
        if (progress)
                progress(w->bytes, userdata);
        r = dump_file_check_core(w->file_fd, w->bytes, ret_why);
        if (r == DUMP_WRITER_E_EMPTY || r == DUMP_WRITER_E_NOT_CORE) {
                *ret_why = "the stored core decompressed, but is no whole ELF core";
                return CRASH_CORE_E_NOT_CORE;
        }
        return r;
}
