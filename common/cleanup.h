/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Scope-bound cleanup for memory, file descriptors and streams */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void freep(void *p) {
        free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

/* Closed or absent fds hold -EBADF, as in systemd. */
static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void)close(fd);
                errno = saved;
        }
        return -EBADF;
}

static inline void closep(int *fd) {
        *fd = safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f) {
        if (*f)
                (void)fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

#define TAKE_PTR(p)                             \
        ({                                      \
                __typeof__(p) _tmp_ = (p);      \
                (p) = NULL;                     \
                _tmp_;                          \
        })

#define TAKE_FD(fd)                             \
        ({                                      \
                int _tmp_ = (fd);               \
                (fd) = -EBADF;                  \
                _tmp_;                          \
        })

#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)         \
        static inline void func##p(type *p) {           \
                if (*p)                                 \
                        *p = func(*p);                  \
        }

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
