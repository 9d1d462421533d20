/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Policy engine: who may do what to which process. Pure: no I/O, no logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum PolicyCommand {
        POLICY_COMMAND_PS,
        POLICY_COMMAND_INFO,
        POLICY_COMMAND_ENV,
        POLICY_COMMAND_DUMP,
        POLICY_COMMAND_GCDUMP,
        POLICY_COMMAND_TRACE,
        POLICY_COMMAND_COUNTERS,
        POLICY_COMMAND_RESUME,
        POLICY_COMMAND_PERFMAP,
        POLICY_COMMAND_STACKS,     /* managed stacks of every thread, now */
        POLICY_COMMAND_EXCEPTIONS, /* first-chance exceptions during a window */
        POLICY_COMMAND_LOGS,       /* ILogger output during a window */
        /* these make the target run code chosen by the requester */
        POLICY_COMMAND_SETENV,
        POLICY_COMMAND_STARTUP_HOOK,
        POLICY_COMMAND_PROFILER,
        /* not about a live process: the crashes systemd-coredump caught of the processes a rule covers, decided on
         * what it recorded of each (policy_crash_check()), and their cores */
        POLICY_COMMAND_CRASHES,
        _POLICY_COMMAND_MAX,
        _POLICY_COMMAND_INVALID = -1,
} PolicyCommand;

/* Sets of commands, a bit per PolicyCommand (1u << command), as a rule's commands are kept. */
#define POLICY_COMMANDS_ALL ((uint32_t)((1u << _POLICY_COMMAND_MAX) - 1))
/* The commands a rule's egress uploads the artifacts of: dump_dir keeps a dump, and a copy of a trace or a
 * gcdump, for the store (docs/egress.md) */
#define POLICY_COMMANDS_EGRESS \
        ((1u << POLICY_COMMAND_DUMP) | (1u << POLICY_COMMAND_TRACE) | (1u << POLICY_COMMAND_GCDUMP))
#define POLICY_COMMANDS_RUNNING_CODE \
        ((uint32_t)((1u << POLICY_COMMAND_SETENV) | (1u << POLICY_COMMAND_STARTUP_HOOK) | (1u << POLICY_COMMAND_PROFILER)))
/* The commands about a live process: all but crashes, which is about the dead. A grant of crashes alone neither
 * lists a live process nor lets anyone learn it exists. */
#define POLICY_COMMANDS_LIVE ((uint32_t)(POLICY_COMMANDS_ALL & ~(1u << POLICY_COMMAND_CRASHES)))

typedef enum PolicyDumpType {
        POLICY_DUMP_NONE,
        POLICY_DUMP_MINI,
        POLICY_DUMP_HEAP,
        POLICY_DUMP_TRIAGE,
        POLICY_DUMP_FULL,
        _POLICY_DUMP_MAX,
        _POLICY_DUMP_INVALID = -1,
} PolicyDumpType;

typedef struct PolicyRateLimit {
        unsigned count;
        uint64_t period_usec;
} PolicyRateLimit;

typedef struct PolicyIdList {
        uint32_t *ids;
        size_t n;
} PolicyIdList;

typedef struct PolicyStringList {
        char **items;
        size_t n;
} PolicyStringList;

/* A provider a rule lets --providers name, and the keywords it may ask for. */
typedef struct PolicyProviderGrant {
        char *name;
        uint64_t keywords;
} PolicyProviderGrant;

/*
 * Which processes a [[rule]] or an [[on_start]] is about: every selector given must match, one
 * not given matches anything (policy_targets_mismatch() in policy.c is the one matcher).
 */
typedef struct PolicyTargets {
        bool any;
        PolicyIdList users;          /* effective uid */
        PolicyStringList units;      /* the systemd unit, exactly */
        PolicyStringList names;      /* the process name, exactly */
        PolicyStringList cgroups;    /* globs on the cgroup path (policy_cgroup_pattern_match()) */
        PolicyStringList containers; /* container ids or prefixes of them: 12 to 64 lowercase hex digits */
} PolicyTargets;

typedef struct PolicyRule {
        char *name;
        char *file;
        unsigned line;

        PolicyIdList users;     /* requesters, by uid ... */
        PolicyIdList groups;    /* ... or by any of their gids */
        uint32_t commands;      /* bit per PolicyCommand */

        PolicyTargets targets;

        uint32_t dump_types;    /* bit per PolicyDumpType */
        PolicyStringList trace_profiles;
        PolicyProviderGrant *trace_providers;
        size_t n_trace_providers;
        PolicyStringList counter_providers; /* empty: System.Runtime only */
        uint64_t max_duration_usec; /* 0: no limit of the rule's own */
        bool has_rate_limit;
        PolicyRateLimit rate_limit;
        PolicyIdList reader_users;
        PolicyIdList reader_groups;
        bool allow_code_injection;
        bool env_reveal;        /* env: every value is shown (policy_env_value_hidden()) */
        PolicyStringList env_show; /* env: names added to the built-in allow list, as env_redact's globs */
        /* egress = "NAME": its dumps, traces and gcdumps are uploaded there too; resolved when the whole
         * policy is compiled (egress points into the Policy), NULL when the rule names none */
        char *egress_name;
        unsigned egress_line, egress_column;
        const struct PolicyEgress *egress;
} PolicyRule;

/*
 * A socket the agent listens on for runtimes that connect in
 * (DOTNET_DiagnosticPorts=PATH,connect): whose runtimes may, and how long one
 * suspended at startup may wait to be resumed before the agent resumes it.
 */
typedef struct PolicyPort {
        char *path;             /* absolute, at most POLICY_PORT_PATH_MAX bytes */
        char *file;
        unsigned line;
        PolicyIdList users;     /* runtimes of these uids ... */
        PolicyIdList groups;    /* ... or of any of these gids (primary or supplementary) may connect in */
        uint64_t suspend_timeout_usec; /* 0: wait for a resume however long it takes */
} PolicyPort;

#define POLICY_PORTS_MAX 16
#define POLICY_PORT_PATH_MAX 107 /* sun_path, with its NUL */
#define POLICY_SUSPEND_TIMEOUT_DEFAULT_USEC (30 * 1000000ULL)
#define POLICY_SUSPEND_TIMEOUT_MAX_USEC (3600 * 1000000ULL)
#define POLICY_RUNTIMES_PER_USER_DEFAULT 64
/* [agent] target_cache_ms: long enough for a burst of requests, short next to anyone's reaction */
#define POLICY_TARGET_CACHE_MS_DEFAULT 1000
#define POLICY_TARGET_CACHE_MS_MAX 10000

/* A size limit on the dump directory's file system: bytes, or a share of the file system. */
typedef struct PolicySize {
        uint64_t bytes;
        unsigned percent; /* used when bytes is 0 */
} PolicySize;

/*
 * What becomes of a policy table's artifacts ([[on_start]], [[collect]]) in dump_dir, beside the
 * [agent] retention settings every artifact is kept under (agent/dumps/retention.h).
 */
typedef struct PolicyTableArtifacts {
        PolicySize max_use;       /* the table's artifacts take at most this (bytes 0 and percent 0: no budget);
                                   * past it the oldest are removed, never the newest */
        bool yield_to_dumps;      /* removed, oldest first, to make room for a user's dump that would not fit */
        bool readers_may_remove;  /* the table's readers may remove them (dsctl dumps --remove) */
} PolicyTableArtifacts;

/*
 * Collection from a runtime's first instruction (dotnet-monitor's Startup trigger): a runtime
 * that connects in on a [[port]] and matches the targets gets this EventPipe trace started
 * before the agent resumes it. The file goes to dump_dir, readable by the readers.
 */
typedef struct PolicyOnStart {
        char *name;
        char *file;
        unsigned line;

        PolicyTargets targets;  /* as a rule's */

        char *trace_profile;    /* NULL when it names providers */
        PolicyProviderGrant *trace_providers; /* keywords UINT64_MAX when the provider named none */
        size_t n_trace_providers;
        uint64_t duration_usec; /* more than 0, at most the agent's max_session_duration */
        uint64_t max_size;      /* bytes; at most the agent's max_trace_size, which is the default */
        PolicyIdList reader_users;
        PolicyIdList reader_groups;
        PolicyTableArtifacts artifacts;
} PolicyOnStart;

#define POLICY_ON_START_MAX 64

/* What wakes a [[collect]] table. */
typedef enum PolicyCollectTrigger {
        POLICY_COLLECT_WHEN_COUNTER,   /* an EventCounter or Meter instrument beyond a line for a time */
        POLICY_COLLECT_WHEN_EXCEPTION, /* an exception type thrown N times within a window */
        POLICY_COLLECT_WHEN_CRASH,     /* a covered process died and systemd-coredump stored its core (agent/crashes/) */
        _POLICY_COLLECT_WHEN_MAX,
} PolicyCollectTrigger;

/* What a [[collect]] table takes when it fires. */
typedef enum PolicyCollectAction {
        POLICY_COLLECT_THEN_DUMP,   /* a dump of dump_type, as dsctl dump writes */
        POLICY_COLLECT_THEN_STACKS, /* the managed stacks, as dsctl stacks prints */
        POLICY_COLLECT_THEN_TRACE,  /* a nettrace of trace_profile for duration */
        POLICY_COLLECT_THEN_COUNTERS, /* the counters of counters_providers for duration, as dsctl counters --format csv */
        POLICY_COLLECT_THEN_GCDUMP, /* the GC heap, as the .gcdump dsctl gcdump -o writes */
        POLICY_COLLECT_THEN_CORE,   /* when.crash's: the core systemd-coredump stored, as dsctl crash copies it */
        POLICY_COLLECT_THEN_EXCEPTIONS, /* the exceptions with their stacks, as dsctl exceptions prints: the one that
                                         * fired an exception table, and those thrown for duration after */
        _POLICY_COLLECT_THEN_MAX,
} PolicyCollectAction;

/* A tag a counter sample must carry: "key=value" in when.counter's [...]. */
typedef struct PolicyCounterTag {
        char *key;
        char *value;
} PolicyCounterTag;

/*
 * A collection rule (dotnet-monitor's collection rules, for the whole host): every process its
 * targets cover is watched, and when the trigger fires on one the action's artifact goes to
 * dump_dir, readable by the readers, at most limit.count per process within limit.period_usec.
 */
typedef struct PolicyCollect {
        char *name;
        char *file;
        unsigned line;

        PolicyTargets targets;  /* as a rule's */

        PolicyCollectTrigger when;
        /* POLICY_COLLECT_WHEN_COUNTER: "Provider:name[key=value,...]" */
        char *counter_provider; /* an EventSource or a Meter */
        char *counter_name;
        PolicyCounterTag *counter_tags;
        size_t n_counter_tags;
        bool has_above, has_below; /* one or both: above, below, or between the two (above < below) */
        int64_t above;          /* beyond the line: strictly greater than above ... */
        int64_t below;          /* ... strictly less than below */
        uint64_t for_usec;      /* 0: the first sample beyond the line fires */
        /* POLICY_COLLECT_WHEN_EXCEPTION */
        char *exception_type;   /* a full name ("System.InvalidOperationException") or a short one */
        unsigned exception_count; /* at least 1 */
        uint64_t within_usec;   /* 0 when exception_count is 1 */

        PolicyCollectAction then;
        PolicyDumpType dump_type;   /* POLICY_COLLECT_THEN_DUMP */
        char *trace_profile;        /* POLICY_COLLECT_THEN_TRACE */
        uint64_t duration_usec;     /* POLICY_COLLECT_THEN_TRACE, _COUNTERS, _EXCEPTIONS: at most max_session_duration */
        bool flame;                 /* POLICY_COLLECT_THEN_TRACE: its flame graph too (then.flame; the profile samples CPU) */
        PolicyStringList counters_providers; /* POLICY_COLLECT_THEN_COUNTERS: 1 to POLICY_COLLECT_COUNTERS_MAX */

        PolicyIdList reader_users;
        PolicyIdList reader_groups;
        PolicyRateLimit limit;      /* per process (when.crash: per unit, else executable); "1/1h" unless the table says */
        /* the table as a whole, over every process it covers: new processes bring no budget of their
         * own beyond it; POLICY_COLLECT_LIMIT_TOTAL_DEFAULT unless the table says */
        PolicyRateLimit limit_total;
        PolicyTableArtifacts artifacts;
        /* then.egress = "NAME": where its artifacts are uploaded, as a rule's egress */
        char *egress_name;
        unsigned egress_line, egress_column;
        const struct PolicyEgress *egress;
} PolicyCollect;

#define POLICY_COLLECT_MAX 64
#define POLICY_COLLECT_TAGS_MAX 8
#define POLICY_COLLECT_COUNT_MAX 1000  /* when.count: a watcher keeps that many times per process */
#define POLICY_COLLECT_LIMIT_MAX 100   /* limit's count: artifacts per process and period */
#define POLICY_COLLECT_LIMIT_TOTAL_MAX 1000 /* limit_total's count: artifacts of the table and period */
/* limit_total when the table sets none, "10/1h": as many artifacts an hour as ten processes at the default limit */
#define POLICY_COLLECT_LIMIT_TOTAL_DEFAULT_COUNT 10
#define POLICY_COLLECT_LIMIT_TOTAL_DEFAULT_USEC (3600 * 1000000ULL)
#define POLICY_COLLECT_TEXT_MAX 256    /* bytes of when.counter and of when.exception */
#define POLICY_COLLECT_COUNTERS_MAX 16 /* then.counters' providers, as many as dsctl counters may name */
/* then.counters without then.duration: dotnet-monitor's CollectLiveMetrics default (at most max_session_duration) */
#define POLICY_COLLECT_COUNTERS_DEFAULT_USEC (30 * 1000000ULL)
/* then.exceptions without then.duration: dsctl exceptions' window (at most max_session_duration) */
#define POLICY_COLLECT_EXCEPTIONS_DEFAULT_USEC (10 * 1000000ULL)

typedef struct PolicyAgentSettings {
        char *dump_dir;
        unsigned max_concurrent_dumps;
        unsigned max_dumps_per_user;
        /* dumps users take of their own processes under owner_access: a pool apart from
         * max_concurrent_dumps, so that no user's own dumps keep anyone else's waiting */
        unsigned max_concurrent_own_dumps;
        PolicySize max_use;   /* dumps may take at most this much in all (coredump.conf MaxUse=) */
        PolicySize keep_free; /* and must leave this much free (coredump.conf KeepFree=) */
        /* retention (agent/dumps/retention.h): what the agent removes of what it stored, oldest first */
        uint64_t max_age_usec;        /* artifacts older than this go; 0: none goes for its age */
        unsigned max_files;           /* at most this many artifacts; 0: no bound */
        PolicySize max_use_per_user;  /* the dumps one user asked for; zero: no budget */
        bool audit_failure_allow; /* audit_failure = "allow"; the default is deny */
        bool owner_access;
        char *pam_service;        /* NULL: no PAM account check */
        /* trace and counters sessions, for everyone, root included */
        unsigned max_sessions_per_target;
        unsigned max_sessions_per_user;
        uint64_t max_session_duration_usec; /* also the end of a session that asked for no duration */
        uint64_t max_trace_size;            /* bytes; the session is stopped there */
        unsigned max_trace_buffer_mb;
        /* requests of one user the agent decides and records, for everyone, root included: more
         * would drown the audit trail; the excess is refused and counted in one record a second */
        unsigned max_requests_per_second;
        unsigned max_request_burst;
        /* env: globs on variable names whose values are withheld unless the verdict reveals them
         * (policy_env_value_hidden()); the built-in list until the policy sets its own */
        PolicyStringList env_redact;
        /* runtimes of one user that connected in on a [[port]] and are registered at once */
        unsigned max_runtimes_per_user;
        /* how long the facts a worker read about a process serve further requests about it
         * (agent/targets/target-cache.h); 0: every request has the process read afresh */
        unsigned target_cache_ms;
} PolicyAgentSettings;

/* [agent] max_age: artifacts removed at this age by default, as the packaged tmpfiles.d line did for
 * /var/lib/dsagent/dumps alone; and the longest a policy may say */
#define POLICY_MAX_AGE_DEFAULT_USEC (3ULL * 24 * 3600 * 1000000)
#define POLICY_MAX_AGE_MAX_USEC (3650ULL * 24 * 3600 * 1000000)
#define POLICY_MAX_FILES_MAX 1000000

/* Immutable once compiled and shared by reference: a reload swaps the pointer,
 * requests in flight keep the policy they started with. */
typedef struct Policy {
        unsigned n_ref;
        PolicyAgentSettings agent;
        PolicyRule *rules;
        size_t n_rules;
        PolicyPort *ports;
        size_t n_ports;
        PolicyOnStart *on_start;
        size_t n_on_start;
        PolicyCollect *collect;
        size_t n_collect;
        struct PolicyEgress *egress; /* [egress.NAME] tables, main file first */
        size_t n_egress;
        size_t n_files;
} Policy;

/*
 * An S3-compatible store a rule's or a [[collect]] table's artifacts are uploaded to: [egress.NAME]
 * (docs/egress-plan.md). Only where the credentials are is said here, never what they are: the policy
 * loader checks the file's owner and mode and never reads it; the egress process alone does, at each
 * upload.
 */
typedef enum PolicyEgressCredentials {
        POLICY_EGRESS_CREDENTIALS_FILE,    /* credentials = "file:PATH": an absolute path */
        POLICY_EGRESS_CREDENTIALS_SYSTEMD, /* credentials = "systemd:NAME": $CREDENTIALS_DIRECTORY/NAME */
} PolicyEgressCredentials;

typedef enum PolicyEgressVerify {
        POLICY_EGRESS_VERIFY_SIGNED,    /* each body's sha256 signed and checked by the store, and a HEAD */
        POLICY_EGRESS_VERIFY_READ_BACK, /* and the object read back and hashed */
} PolicyEgressVerify;

typedef struct PolicyEgress {
        char *name;             /* NAME of [egress.NAME]: 1-64 of A-Z a-z 0-9 . _ - */
        char *file;
        unsigned line, column;  /* of the table, for messages about it */

        char *endpoint;         /* "http[s]://HOST[:PORT]", no path; http only on loopback or with allow_http */
        char *bucket;           /* S3's bucket names: 3-63 of a-z 0-9 . -, a letter or digit at each end */
        char *region;           /* the SigV4 scope's region: 1-64 of A-Z a-z 0-9 _ - */
        char *prefix;           /* "" or segments of A-Z a-z 0-9 . _ - each ending in '/', none "." or ".." */
        bool path_style;        /* endpoint/bucket/key (the default); false: bucket.host/key */
        bool allow_http;
        char *ca_file;          /* absolute; NULL: the system's store */
        unsigned ca_file_line, ca_file_column; /* of its value, for policy_load()'s check of the file */
        PolicyEgressCredentials credentials_kind;
        char *credentials;      /* the file's absolute path, or the systemd credential's name: where, not what */
        unsigned credentials_line, credentials_column;
        uint64_t part_size;     /* bytes; multipart above it; POLICY_EGRESS_PART_MIN to POLICY_EGRESS_PART_MAX */
        unsigned attempts;      /* tries of each request, 1 to POLICY_EGRESS_ATTEMPTS_MAX */
        uint64_t timeout_usec;  /* the whole upload's deadline */
        uint64_t min_speed;     /* bytes a second; slower for 30 s cuts the transfer, which is tried again */
        bool keep_local;        /* false: a confirmed upload frees its local copy */
        PolicyEgressVerify verify;
        uint64_t url_max_age_usec; /* presigned URLs live at most this long (SigV4: at most 7 days) */
        unsigned retries;       /* hand-overs after the first for a transient failure (unavailable, timeout, busy,
                                 * the egress process lost), 0 to POLICY_EGRESS_RETRIES_MAX */
        uint64_t retry_delay_usec; /* before the first of them; each next waits twice as long, at most an hour */
} PolicyEgress;

#define POLICY_EGRESS_MAX 16
#define POLICY_EGRESS_PART_MIN (5ULL << 20)       /* S3's smallest part but the last */
#define POLICY_EGRESS_PART_MAX (5ULL << 30)       /* and its largest */
#define POLICY_EGRESS_PART_DEFAULT (16ULL << 20)
#define POLICY_EGRESS_ATTEMPTS_MAX 20
#define POLICY_EGRESS_ATTEMPTS_DEFAULT 5
#define POLICY_EGRESS_RETRIES_MAX 100
#define POLICY_EGRESS_RETRIES_DEFAULT 8
#define POLICY_EGRESS_RETRY_DELAY_DEFAULT_USEC (30 * 1000000ULL)
#define POLICY_EGRESS_RETRY_DELAY_MAX_USEC (3600 * 1000000ULL)
#define POLICY_EGRESS_TIMEOUT_DEFAULT_USEC (3600 * 1000000ULL)
#define POLICY_EGRESS_MIN_SPEED_DEFAULT (64ULL << 10)
#define POLICY_EGRESS_URL_MAX_AGE_DEFAULT_USEC (15 * 60 * 1000000ULL)
#define POLICY_EGRESS_URL_MAX_AGE_MAX_USEC (7 * 24 * 3600 * 1000000ULL)
#define POLICY_EGRESS_CREDENTIAL_NAME_MAX 255

/* Is @c of the object keys' alphabet, A-Z a-z 0-9 . _ -, which any store and any shell take as it is? */
bool policy_egress_key_char(char c);
/* A key prefix of [egress.NAME]: "" or segments of A-Z a-z 0-9 . _ -, each ending in '/', none "." or "..". */
bool policy_egress_prefix_is_valid(const char *prefix);

/* The [egress.NAME] of @p called @name, or NULL. */
const PolicyEgress *policy_egress_find(const Policy *p, const char *name);


typedef struct PolicyRequester {
        uid_t uid;
        gid_t gid;
        const gid_t *groups; /* primary and supplementary, from the kernel */
        size_t n_groups;
} PolicyRequester;

typedef struct PolicyTarget {
        uid_t uid[4]; /* real, effective, saved, filesystem */
        gid_t gid[4];
        const char *unit; /* NULL when not in a unit */
        const char *name; /* process name: entry assembly for "dotnet X.dll", else executable name */
        /* its cgroup path, as the kernel shows it, and the container id it names (64 lowercase hex digits):
         * each NULL when none, or when root does not vouch for the path (a delegated subtree's) */
        const char *cgroup;
        const char *container_id;
} PolicyTarget;

/* A provider a trace or counters session asks for. Keywords 0 enable every
 * event of an EventSource, so the engine takes 0 as all of them. */
typedef struct PolicyProvider {
        const char *name;
        uint64_t keywords;
        uint32_t level;        /* EventLevel, 0 to 5 */
        const char *arguments; /* NULL when none ("" is none too) */
} PolicyProvider;

/*
 * A trace is decided by its providers, provider for provider: one is admitted when it is exactly
 * (name, keywords, level, arguments) a provider of a profile the rule's trace_profiles names
 * (session-config.h's table, as the stock dotnet-trace sends it), else when trace_providers names
 * it, with keywords within the grant's and no arguments. So a request made of granted profiles
 * (dotnet-trace's default, several profiles at once, a profile beside granted providers) is
 * admitted whoever sends it, and a profile asked for by name (trace_profile) is decided as its
 * providers are.
 */
typedef struct PolicyRequest {
        PolicyCommand command;
        /*
         * Not 0: the request is allowed when the requester holds any of these commands on the
         * target, whatever parameters they take, and the command's own parameters are not looked
         * at (the proxy's ProcessInfo without info: policy_check()). A ps request asks so for
         * every command.
         */
        uint32_t any_of;
        PolicyDumpType dump_type;  /* for dump */
        /* for trace: a profile of the table, decided as its providers (providers is not read); NULL
         * when the request names its providers */
        const char *trace_profile;
        const PolicyProvider *providers; /* for trace without a profile, and counters */
        size_t n_providers;
        unsigned buffer_mb;        /* for trace and counters; 0 when not asked */
        uint64_t duration_usec;    /* for trace and counters; 0 when not asked */
} PolicyRequest;

/* The names of the rules built into the engine, for audit and explanations. */
#define POLICY_RULE_ROOT "root"
#define POLICY_RULE_OWNER "owner-access"

/* The runtime holds at most 64 sessions in all. */
#define POLICY_SESSIONS_MAX 64

typedef struct PolicyVerdict {
        bool allowed;
        const PolicyRule *rule; /* the file rule that allowed it, or NULL */
        const char *rule_name;  /* that rule's name, or a built-in one; NULL when denied */
        bool env_reveal;        /* env: every value is shown (root, owner-access, env_reveal) */
        /* denied, though a rule grants the requester the command on the target: only the request's
         * parameters (providers, dump type, duration) are outside it */
        bool parameters_refused;
        /* for the requester and the audit log; names only rules that apply to them, and for a trace
         * the profiles it was admitted as ("granted by rule 'ops' as dotnet-common, ...") */
        char reason[192];
        /* trace: the profiles of the rule's trace_profiles it was admitted as, comma-separated
         * ("dotnet-common,dotnet-sampled-thread-time"); "" when none (trace_providers alone, root, owner) */
        char trace_profiles[160];
} PolicyVerdict;

const char *policy_command_to_string(PolicyCommand c);
PolicyCommand policy_command_from_string(const char *s);
/* Room for every command's name, comma-separated, and the NUL. */
#define POLICY_COMMANDS_TEXT_MAX 160
/* The names of @commands (a bit per PolicyCommand) in PolicyCommand's order, comma-separated: "info,counters"; "" for none. */
void policy_commands_to_string(uint32_t commands, char buf[static POLICY_COMMANDS_TEXT_MAX]);
bool policy_command_runs_code(PolicyCommand c);
const char *policy_dump_type_to_string(PolicyDumpType t);
PolicyDumpType policy_dump_type_from_string(const char *s);
bool policy_trace_profile_is_known(const char *s);

/* env_redact's and env_show's patterns: at most this many, each of at most this many bytes */
#define POLICY_ENV_REDACT_MAX 64
#define POLICY_ENV_PATTERN_MAX 128

/*
 * A pattern of env_redact or env_show: valid UTF-8, 1 to POLICY_ENV_PATTERN_MAX bytes, no '=', no control
 * character or space, and none of '[', ']', '\\' (kept for a richer glob syntax).
 */
bool policy_env_pattern_is_valid(const char *pattern);
/*
 * Does @name match @pattern? '*' stands for any run of characters, none included, '?' for one
 * character; anything else for itself, ASCII letters in either case. At most about
 * strlen(@name) x strlen(@pattern) steps, without recursion.
 */
bool policy_env_pattern_match(const char *pattern, const char *name);
/* targets.cgroups: at most this many patterns, each of at most this many bytes (the longest path kept) */
#define POLICY_CGROUP_PATTERNS_MAX 64
#define POLICY_CGROUP_PATTERN_MAX 512
/* targets.containers: at most this many; a prefix of at least this many digits, as `podman ps` shows */
#define POLICY_CONTAINERS_MAX 256
#define POLICY_CONTAINER_PREFIX_MIN 12
#define POLICY_CONTAINER_ID_LEN 64

/*
 * A pattern of targets.cgroups: valid UTF-8, an absolute path of at most
 * POLICY_CGROUP_PATTERN_MAX bytes whose components are not empty, "." or "..";
 * "**" only as a whole component; no control character and none of '[', ']',
 * '\' (kept for a richer glob syntax).
 */
bool policy_cgroup_pattern_is_valid(const char *pattern);
/*
 * Does the cgroup @path, or one of its ancestors, match @pattern? Component by component:
 * "**" stands for any number of components, none included; in a component '*' stands for any
 * run of characters and '?' for one, neither ever for '/'; anything else for itself, case
 * counting. A pattern thus selects the cgroups it matches and everything below them. At most
 * about (components of @path) x (bytes of @pattern) x (bytes of a component) steps, without
 * recursion.
 */
bool policy_cgroup_pattern_match(const char *pattern, const char *path);
/* An entry of targets.containers: POLICY_CONTAINER_PREFIX_MIN to POLICY_CONTAINER_ID_LEN lowercase hex digits. */
bool policy_container_selector_is_valid(const char *selector);

/*
 * How many bytes of names and values policy_env_value_hidden() checks for secrets in one
 * environment. The checks cost up to a few hundred ns a byte on a loaded machine, and the target
 * chooses its environment (up to 256 KiB of values under the names of the allow list, or of a
 * rule's env_show): unbounded, one env request could hold the event loop for 100 ms. Real
 * allow-listed values (PATH, DOTNET_gcServer, LANG) come to a few KiB; those past the budget are
 * withheld, not vouched for.
 */
#define POLICY_ENV_CHECK_BUDGET (32u * 1024u)

/*
 * Is the value @value of the variable @name withheld from the requester of @v? Values are
 * hidden unless known safe: none is withheld under env_reveal (a rule's, root's, the process
 * owner's); else one is shown only when @name is on the allow list (the built-in one,
 * policy_env_name_shown_by_default(), or the env_show of the rule that granted it), env_redact
 * does not match @name, neither @name nor @value looks like a secret (env-secret.h), and both
 * fit in what is left of *@check_budget (start it at POLICY_ENV_CHECK_BUDGET for each
 * environment), which the check then spends.
 */
bool policy_env_value_hidden(const Policy *p, const PolicyVerdict *v, const char *name, const char *value,
                             size_t *check_budget);
/*
 * Is @name, exactly and in its case, on the built-in allow list of harmless configuration: a
 * runtime knob after DOTNET_ or COMPlus_, or a whole name (policy.c, docs/policy.md)? No prefix
 * is on it: applications choose their own names under any.
 */
bool policy_env_name_shown_by_default(const char *name);

Policy *policy_new_builtin(void);
Policy *policy_ref(Policy *p);
Policy *policy_unref(Policy *p);

/**
 * policy_target_visible() - may @who learn that @target exists at all?
 *
 * Yes for root, for the target's own user (real, effective or saved uid)
 * under owner_access, and when any rule naming @who covers @target, for
 * whatever command. The agent answers about every other process exactly as
 * about one that does not exist: it must not tell users about processes
 * they may not act on.
 */
bool policy_target_visible(const Policy *p, const PolicyRequester *who, const PolicyTarget *target);

/**
 * policy_visible_uids() - whose processes could @who see at all?
 *
 * A cheap first cut for listings, before any process is looked at closely:
 * true when they may be anybody's (root; a rule naming @who whose targets
 * are any, or given without users: by unit, name, cgroup or container; more
 * users than @max); else
 * false, with the users in @out (its own uid under owner_access, and the
 * target users of the rules naming @who), in *@ret_n of them.
 */
bool policy_visible_uids(const Policy *p, const PolicyRequester *who, uid_t *out, size_t max, size_t *ret_n);

void policy_check(const Policy *p, const PolicyRequester *who, const PolicyTarget *target,
                  const PolicyRequest *request, PolicyVerdict *ret);

/**
 * policy_crash_check() - may @who see the crash of @crashed, and have its core?
 *
 * @crashed is the process as systemd-coredump recorded it when it died (agent/crashes/crash-entry.h
 * builds it from a trusted journal entry): its ids and groups, unit, name, cgroup and container,
 * matched by the very selectors a live process is. Root may; under owner_access the crashed
 * process's own user may, unless it changed credentials (systemd-coredump's own rule for who reads
 * a core: all four uids and gids one, dumpable, not started set-user-ID); else the first rule that
 * names @who, grants crashes and covers @crashed. A crash one may not see is answered as one that
 * never was: there is no separate visibility.
 */
void policy_crash_check(const Policy *p, const PolicyRequester *who, const PolicyTarget *crashed, PolicyVerdict *ret);

/**
 * policy_commands_held() - which commands may @who use on @target, whatever their parameters?
 *
 * A bit per PolicyCommand: root's and, under owner_access, the target's own user's (unless it
 * changed credentials) every command that runs no code; and every command of each rule that
 * names @who and covers @target. Parameters (dump types, profiles, providers, durations) and
 * rate limits are not looked at: a command here may still be refused for what it asks. Not 0
 * exactly when policy_check() allows ps, which lists the process; and every target whose
 * commands are not 0 is one policy_target_visible() lets @who see.
 */
uint32_t policy_commands_held(const Policy *p, const PolicyRequester *who, const PolicyTarget *target);

/**
 * policy_selects_by_name_or_cgroup() - does a rule tell processes apart by what they change without an exec?
 *
 * True when a rule (that grants any command) selects targets by name, unit,
 * cgroup or container: a process rewrites its command line whenever it likes,
 * and is moved to another cgroup by root, or by its owner within a subtree
 * delegated to it, so a reading of those facts is only as good as its moment.
 */
bool policy_selects_by_name_or_cgroup(const Policy *p);

/**
 * policy_table_artifacts() - what @p says of the artifacts of a policy table, by its labels
 * @origin: "collect" or "on_start", as an artifact's user.dsagent.origin says
 * @ret_index: NULL, or where the table stands among all of them: the [[collect]] tables first,
 *             then the [[on_start]]s (0 to n_collect + n_on_start - 1)
 *
 * Return: the table's PolicyTableArtifacts, or NULL when @p has no such table (any more).
 */
const PolicyTableArtifacts *policy_table_artifacts(const Policy *p, const char *origin, const char *table,
                                                   size_t *ret_index);

/* May a runtime of @uid, in groups @gids (primary and supplementary), connect in on @port? */
bool policy_port_admits(const PolicyPort *port, uid_t uid, const gid_t *gids, size_t n_gids);

/**
 * policy_on_start_match() - which [[on_start]] trace does a runtime that connected in get?
 *
 * The first [[on_start]] in file order (main file, then policy.d) whose targets cover @target,
 * matched as a rule's targets are; NULL when none does. The answer points into @p.
 */
const PolicyOnStart *policy_on_start_match(const Policy *p, const PolicyTarget *target);

/* Do a [[collect]] table's targets cover @target? Matched as a rule's targets are. */
bool policy_collect_covers(const PolicyCollect *c, const PolicyTarget *target);

/**
 * policy_collect_counter_matches() - is a counter sample the one a [[collect]] table watches?
 *
 * @provider and @name must equal the table's (case counting, as the runtime reports them), and
 * every tag the table names must be among @tags: "k=v,k2=v2" as Meters report them, or
 * "k:v,k2:v2" as EventCounters' Metadata does; NULL or "" when the sample has none. A table
 * with an exception trigger matches no counter.
 */
bool policy_collect_counter_matches(const PolicyCollect *c, const char *provider, const char *name,
                                    const char *tags);

/**
 * policy_collect_exception_matches() - is an exception of @type_name (its full name, as the
 * runtime reports it) one a [[collect]] table counts?
 *
 * Yes when it equals when.exception, or when.exception has no '.' and is the last dotted
 * component of @type_name (a nested type's "+" counts as a dot).
 */
bool policy_collect_exception_matches(const PolicyCollect *c, const char *type_name);
