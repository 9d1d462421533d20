/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Decompressing a stored core (agent/crashes/crash-core.h), as systemd-coredump stores them: zstd, lz4,
 * xz, or none, each made by its own command-line tool from the same bytes and read back whole; the
 * same files cut short or with a byte changed are refused as corrupt; more than the limit is refused as
 * too large. Then elf_core_maps_file() on a core whose NT_FILE note names libcoreclr.so, or not.
 */
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/crashes/crash-core.h"
#include "agent/dumps/elf-core.h"
#include "tests/unit/tap.h"

#define DATA_SIZE (3u << 20)

static char dir[] = "/tmp/test-crash-core.XXXXXX";
static uint8_t *data;

static void make_data(void) {
        uint32_t x = 12345;

        data = malloc(DATA_SIZE);
        /* compressible, but not trivially: runs of pseudo-random bytes and of zeros, as memory is */
        for (size_t i = 0; i < DATA_SIZE; i++) {
                x = x * 1103515245 + 12345;
                data[i] = (i / 4096) % 3 == 0 ? 0 : (uint8_t)(x >> 16);
        }
}

/* A path in the test's directory; four at a time may be in use (one command line names up to three). */
static char *path_of(const char *name) {
        static char p[4][128];
        static unsigned next;
        char *s = p[next++ % 4];

        snprintf(s, sizeof(p[0]), "%s/%s", dir, name);
        return s;
}

static void write_file(const char *name, const void *p, size_t n) {
        FILE *f = fopen(path_of(name), "w");

        fwrite(p, 1, n, f);
        fclose(f);
}

/* Decompresses @name into a file; returns crash_core_decompress()'s answer and the bytes in *@ret_size. */
static int decompress(const char *name, CrashCompression c, uint64_t max, size_t *ret_size) {
        int in = open(path_of(name), O_RDONLY | O_CLOEXEC);
        int out = open(path_of("out"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        struct stat st;
        int r;

        r = crash_core_decompress(in, c, out, max);
        fstat(out, &st);
        *ret_size = (size_t)st.st_size;
        close(in);
        close(out);
        return r;
}

static bool out_is_data(void) {
        uint8_t *back = malloc(DATA_SIZE);
        FILE *f = fopen(path_of("out"), "r");
        bool same = fread(back, 1, DATA_SIZE, f) == DATA_SIZE && fgetc(f) == EOF && memcmp(back, data, DATA_SIZE) == 0;

        fclose(f);
        free(back);
        return same;
}

static void each_format(const char *name, CrashCompression c, const char *tool) {
        char cmd[1024], cut[64], bad[64];
        struct stat st;
        size_t n;
        FILE *f;
        int r;

        snprintf(cmd, sizeof(cmd), "%s < %s > %s", tool, path_of("data"), path_of(name));
        if (system(cmd) != 0) {
                /* the tools come with scripts/install-deps.sh (zstd, lz4, xz-utils) */
                printf("# '%s' failed: is its tool installed?\n", tool);
                check(false);
                return;
        }
        check(decompress(name, c, UINT64_MAX, &n) == 0 && n == DATA_SIZE && out_is_data());
        /* more than the limit */
        check(decompress(name, c, DATA_SIZE - 1, &n) == CRASH_CORE_E_TOO_LARGE && n < DATA_SIZE);
        if (c == CRASH_COMPRESSION_NONE)
                return;
        /* cut short: half of it */
        stat(path_of(name), &st);
        snprintf(cut, sizeof(cut), "%s.cut", name);
        snprintf(cmd, sizeof(cmd), "head -c %lld %s > %s", (long long)st.st_size / 2, path_of(name), path_of(cut));
        check(system(cmd) == 0);
        r = decompress(cut, c, UINT64_MAX, &n);
        check(r == CRASH_CORE_E_CORRUPT);
        /* a byte changed in the middle */
        snprintf(bad, sizeof(bad), "%s.bad", name);
        snprintf(cmd, sizeof(cmd), "cp %s %s", path_of(name), path_of(bad));
        check(system(cmd) == 0);
        f = fopen(path_of(bad), "r+");
        fseek(f, st.st_size / 2, SEEK_SET);
        fputc(fgetc(f) ^ 0x5a, f);
        fclose(f);
        r = decompress(bad, c, UINT64_MAX, &n);
        check(r == CRASH_CORE_E_CORRUPT);
        /* nothing at all, and bytes of no format */
        write_file("empty", "", 0);
        check(decompress("empty", c, UINT64_MAX, &n) == CRASH_CORE_E_CORRUPT);
        write_file("garbage", "this is no compressed stream at all", 35);
        check(decompress("garbage", c, UINT64_MAX, &n) == CRASH_CORE_E_CORRUPT);
}

static void test_formats(void) {
        write_file("data", data, DATA_SIZE);
        each_format("core", CRASH_COMPRESSION_NONE, "cat");
        each_format("core.zst", CRASH_COMPRESSION_ZSTD, "zstd -q -c");
        each_format("core.lz4", CRASH_COMPRESSION_LZ4, "lz4 -q -c");
        each_format("core.xz", CRASH_COMPRESSION_XZ, "xz -q -c");
}

static void put_u64(uint8_t *p, uint64_t v) {
        memcpy(p, &v, sizeof(v));
}

/* A 64-bit core: the header, one PT_NOTE with an NT_FILE note naming @files, one PT_LOAD. */
static size_t make_core(uint8_t *buf, const char *const *files, size_t n_files) {
        Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
        Elf64_Phdr *ph = (Elf64_Phdr *)(buf + sizeof(Elf64_Ehdr));
        size_t notes = sizeof(Elf64_Ehdr) + 2 * sizeof(Elf64_Phdr), at, desc;
        Elf64_Nhdr *nh;

        memset(buf, 0, 8192);
        memcpy(eh->e_ident, ELFMAG, SELFMAG);
        eh->e_ident[EI_CLASS] = ELFCLASS64;
        eh->e_ident[EI_DATA] = ELFDATA2LSB;
        eh->e_ident[EI_VERSION] = EV_CURRENT;
        eh->e_type = ET_CORE;
        eh->e_machine = EM_X86_64;
        eh->e_phoff = sizeof(Elf64_Ehdr);
        eh->e_ehsize = sizeof(Elf64_Ehdr);
        eh->e_phentsize = sizeof(Elf64_Phdr);
        eh->e_phnum = 2;
        nh = (Elf64_Nhdr *)(buf + notes);
        nh->n_namesz = 5;
        nh->n_type = 0x46494c45;
        memcpy(buf + notes + sizeof(*nh), "CORE", 5);
        desc = notes + sizeof(*nh) + 8;
        /* the note's words stand where the name's padding leaves them, 4-aligned: copied, not stored through a
         * uint64_t pointer (UBSan: a misaligned store) */
        put_u64(buf + desc, n_files);
        put_u64(buf + desc + 8, 4096);
        at = desc + 16 + n_files * 24;
        for (size_t i = 0; i < n_files; i++) {
                strcpy((char *)buf + at, files[i]);
                at += strlen(files[i]) + 1;
        }
        nh->n_descsz = (uint32_t)(at - desc);
        at = (at + 3) & ~(size_t)3;
        ph[0] = (Elf64_Phdr){ .p_type = PT_NOTE, .p_offset = notes, .p_filesz = at - notes };
        ph[1] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_offset = at, .p_filesz = 4096 };
        return at + 4096;
}

static void test_nt_file(void) {
        static const char *const dotnet[] = { "/usr/bin/app", "/usr/share/dotnet/shared/x/libcoreclr.so", "/lib/libc.so.6" };
        static const char *const native[] = { "/usr/bin/sleep", "/lib/libcoreclr.so.bak", "/lib/libc.so.6" };
        uint8_t *buf = calloc(1, 16384);
        size_t n, needed = 0;

        n = make_core(buf, dotnet, 3);
        check(elf_core_check(buf, n, n, &needed) == 0);
        check(elf_core_maps_file(buf, n, "/libcoreclr.so", &needed) == 1);
        n = make_core(buf, native, 3);
        check(elf_core_maps_file(buf, n, "/libcoreclr.so", &needed) == 0);
        /* the note past what was read: asks for it */
        n = make_core(buf, dotnet, 3);
        check(elf_core_maps_file(buf, 200, "/libcoreclr.so", &needed) == ELF_CORE_E_MORE && needed > 200);
        /* a count that claims more names than the note holds reads nothing past it */
        put_u64(buf + sizeof(Elf64_Ehdr) + 2 * sizeof(Elf64_Phdr) + sizeof(Elf64_Nhdr) + 8, 1u << 30);
        check(elf_core_maps_file(buf, n, "/libcoreclr.so", &needed) == 0);
        check(elf_core_maps_file((const uint8_t *)"not an elf", 10, "/libcoreclr.so", &needed) == ELF_CORE_E_NOT_CORE);
        free(buf);
}

int main(void) {
        if (!mkdtemp(dir))
                return 1;
        make_data();
        run_test(test_formats);
        run_test(test_nt_file);
        {
                char cmd[128];
                snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
                (void)system(cmd);
        }
        free(data);
        return tap_finish();
}
