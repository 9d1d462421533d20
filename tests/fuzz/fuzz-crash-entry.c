/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the reading of systemd-coredump's journal entries (agent/crashes/crash-entry.h). Every
 * field but journald's own is the sender's choice, and the facts of a genuine entry are the crashed
 * process's (its command line, its cgroup's names, its status): any byte may come.
 *
 * Input: the entry's fields, "NAME=value", separated by NUL bytes (a value may hold any other byte).
 *
 * Invariants:
 *   - an entry is trusted only with journald's fields as systemd-coredump's (checked here again);
 *   - what it makes of one is bounded and well formed: the id reads back (crash_id_parse()), the
 *     core's name is a plain name, every string is terminated;
 *   - packing it and reading it back gives the same entry.
 */
#include <string.h>

#include "agent/crashes/crash-entry.h"
#include "tests/fuzz/fuzz.h"

#define MACHINE "3d1219c7c4c5404aaa1f6d2a48adfda4"

static bool has_field(const CrashField *f, size_t n, const char *field) {
        for (size_t i = 0; i < n; i++)
                if (f[i].size == strlen(field) && memcmp(f[i].data, field, f[i].size) == 0)
                        return true;
        return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        CrashField fields[64] = {};
        CrashEntry e, back;
        uint8_t packed[16384];
        size_t n = 0, used, at = 0;
        uint64_t seconds;
        uint32_t pid;

        while (at < size && n < 64) {
                const uint8_t *nul = memchr(data + at, '\0', size - at);
                size_t len = nul ? (size_t)(nul - (data + at)) : size - at;

                fields[n++] = (CrashField){ data + at, len };
                at += len + 1;
        }
        if (crash_entry_parse(fields, n, MACHINE, 994, 1, &e) != 0)
                return 0;
        fuzz_assert(has_field(fields, n, "_TRANSPORT=journal") && has_field(fields, n, "_COMM=systemd-coredum") &&
                    has_field(fields, n, "_MACHINE_ID=" MACHINE) && has_field(fields, n, "MESSAGE_ID=" CRASH_MESSAGE_ID));
        fuzz_assert(crash_id_parse(e.id, &seconds, &pid) == 0 && pid == e.pid);
        fuzz_assert(!strchr(e.file_name, '/') && strlen(e.file_name) < sizeof(e.file_name));
        fuzz_assert(strlen(e.name) <= CRASH_NAME_MAX && strlen(e.unit) <= CRASH_UNIT_MAX &&
                    strlen(e.exe) <= CRASH_EXE_MAX && strlen(e.cgroup) <= CRASH_CGROUP_MAX);
        fuzz_assert(e.compression < _CRASH_COMPRESSION_MAX && e.dotnet <= CRASH_DOTNET_YES);
        n = crash_entry_pack(&e, packed, sizeof(packed));
        fuzz_assert(n > 0 && crash_entry_unpack(packed, n, &back, &used) == 0 && used == n);
        fuzz_assert(back.pid == e.pid && back.uid == e.uid && strcmp(back.name, e.name) == 0 &&
                    strcmp(back.file_name, e.file_name) == 0 && strcmp(back.cgroup, e.cgroup) == 0);
        return 0;
}
