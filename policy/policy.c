/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The policy engine (policy.h): who may do what to which process; pure. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "policy/env-secret.h"
#include "policy/policy.h"
#include "policy/policy-rule.h"
#include "eventpipe/session-config.h"
#include "common/text.h"

static const char *const policy_command_names[_POLICY_COMMAND_MAX] = {
        [POLICY_COMMAND_PS] = "ps",
        [POLICY_COMMAND_INFO] = "info",
        [POLICY_COMMAND_ENV] = "env",
        [POLICY_COMMAND_DUMP] = "dump",
        [POLICY_COMMAND_GCDUMP] = "gcdump",
        [POLICY_COMMAND_TRACE] = "trace",
        [POLICY_COMMAND_COUNTERS] = "counters",
        [POLICY_COMMAND_RESUME] = "resume",
        [POLICY_COMMAND_PERFMAP] = "perfmap",
        [POLICY_COMMAND_STACKS] = "stacks",
        [POLICY_COMMAND_EXCEPTIONS] = "exceptions",
        [POLICY_COMMAND_LOGS] = "logs",
        [POLICY_COMMAND_SETENV] = "setenv",
        [POLICY_COMMAND_STARTUP_HOOK] = "startup-hook",
        [POLICY_COMMAND_PROFILER] = "profiler",
        [POLICY_COMMAND_CRASHES] = "crashes",
};

static const char *const policy_dump_type_names[_POLICY_DUMP_MAX] = {
        [POLICY_DUMP_MINI] = "mini",
        [POLICY_DUMP_HEAP] = "heap",
        [POLICY_DUMP_TRIAGE] = "triage",
        [POLICY_DUMP_FULL] = "full",
};


const char *policy_command_to_string(PolicyCommand c) {
        return c >= 0 && c < _POLICY_COMMAND_MAX ? policy_command_names[c] : "unknown";
}

PolicyCommand policy_command_from_string(const char *s) {
        for (int c = 0; c < _POLICY_COMMAND_MAX; c++)
                if (strcmp(s, policy_command_names[c]) == 0)
                        return (PolicyCommand)c;
        return _POLICY_COMMAND_INVALID;
}

void policy_commands_to_string(uint32_t commands, char buf[static POLICY_COMMANDS_TEXT_MAX]) {
        size_t n = 0;

        buf[0] = '\0';
        for (int c = 0; c < _POLICY_COMMAND_MAX; c++)
                if (commands & (1u << c))
                        n += (size_t)snprintf(buf + n, POLICY_COMMANDS_TEXT_MAX - n, "%s%s", n > 0 ? "," : "",
                                              policy_command_names[c]);
}

bool policy_command_runs_code(PolicyCommand c) {
        return c >= 0 && c < _POLICY_COMMAND_MAX && (POLICY_COMMANDS_RUNNING_CODE & (1u << c));
}

const char *policy_dump_type_to_string(PolicyDumpType t) {
        return t > POLICY_DUMP_NONE && t < _POLICY_DUMP_MAX ? policy_dump_type_names[t] : "none";
}

PolicyDumpType policy_dump_type_from_string(const char *s) {
        for (int t = POLICY_DUMP_MINI; t < _POLICY_DUMP_MAX; t++)
                if (strcmp(s, policy_dump_type_names[t]) == 0)
                        return (PolicyDumpType)t;
        return _POLICY_DUMP_INVALID;
}

/*
 * env_redact when the policy does not set it: names that usually carry secrets. Matching
 * ignores case, and '*' makes each one match inside longer names, so that DB_PASSWORD,
 * ConnectionStrings__Main, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_ACCESS_KEY_ID,
 * AZURE_CLIENT_SECRET, AZURE_STORAGE_CONNECTION_STRING and GITHUB_TOKEN are all covered; so are
 * the prefixes .NET's configuration itself reads as connection strings (SQLCONNSTR_,
 * CUSTOMCONNSTR_, ...), AzureWebJobsStorage, and URLs and proxies that may hold a password.
 * docs/policy.md lists them; keep the two in step.
 */
static const char *const policy_env_redact_default[] = {
        "*PASSWORD*", "*PASSWD*", "*PASSPHRASE*", "*_PWD", "*_PASS", "*SECRET*", "*TOKEN*", "*KEY*", "*CREDENTIAL*",
        "*AUTH*", "*PRIVATE*", "*CERT*", "*CONNECTIONSTRING*", "*CONNECTION_STRING*", "*CONNSTR_*", "AzureWebJobs*",
        "*_DSN", "*DATABASE_URL*", "*_URL", "*_URI", "*_PROXY",
};

/*
 * The names whose values env shows without env_reveal, unless the name or the value looks like
 * a secret (env-secret.h) or env_redact matches the name: documented settings that are harmless
 * to read, each by its exact name (case counts, as the runtime's getenv() on Linux does). Never
 * a prefix: applications name their own variables, secrets among them, under any prefix
 * (DOTNET_LaunchDarkly_Sdk, ASPNETCORE_Upstream_Headers); a rule that means to show such names
 * says env_show. docs/policy.md lists them; keep the two in step.
 *
 * First, the runtime's own configuration knobs (CLRConfig, learn.microsoft.com/dotnet/core/
 * runtime-config): the runtime reads each as DOTNET_<knob>, and as COMPlus_<knob> when that is
 * not set.
 */
static const char *const policy_env_runtime_knobs[] = {
        /* garbage collector */
        "gcServer", "gcConcurrent", "GCgen0size", "GCHeapCount", "GCHeapAffinitizeMask", "GCHeapAffinitizeRanges",
        "GCCpuGroup", "GCNoAffinitize", "GCHeapHardLimit", "GCHeapHardLimitPercent", "GCHeapHardLimitSOH",
        "GCHeapHardLimitLOH", "GCHeapHardLimitPOH", "GCHeapHardLimitSOHPercent", "GCHeapHardLimitLOHPercent",
        "GCHeapHardLimitPOHPercent", "GCHighMemPercent", "GCRetainVM", "GCLargePages", "GCLOHThreshold",
        "GCConserveMemory", "GCDynamicAdaptationMode", "GCName", "GCPath",
        /* threading */
        "ThreadPool_ForceMinWorkerThreads", "ThreadPool_ForceMaxWorkerThreads", "ThreadPool_UsePortableThreadPool",
        "Thread_UseAllCpuGroups", "Thread_AssignCpuGroups", "HillClimbing_Disable", "PROCESSOR_COUNT",
        "DefaultStackSize",
        /* compilation */
        "TieredCompilation", "TC_QuickJit", "TC_QuickJitForLoops", "TieredPGO", "ReadyToRun", "EnableWriteXorExecute",
        "EnableHWIntrinsic", "EnableAVX", "EnableAVX2", "EnableAVX512F", "PreferredVectorBitWidth",
        /* debugging, profiling, diagnostics */
        "EnableDiagnostics", "EnableDiagnostics_IPC", "EnableDiagnostics_Debugger", "EnableDiagnostics_Profiler",
        "DiagnosticPorts", "DefaultDiagnosticPortSuspend", "EnableEventPipe", "EventPipeOutputPath", "EventPipeConfig",
        "EventPipeCircularMB", "EventPipeOutputStreaming", "PerfMapEnabled", "PerfMapIgnoreSignal",
        "PerfMapShowOptimizationTiers", "DbgEnableMiniDump", "DbgMiniDumpType", "DbgMiniDumpName",
        "CreateDumpDiagnostics", "CreateDumpVerboseDiagnostics", "EnableCrashReport", "EnableCrashReportOnly", "LTTng",
};

/*
 * Then whole names: the host's and the SDK's DOTNET_ settings, the libraries' DOTNET_SYSTEM_
 * switches, the profiler's, ASP.NET Core's host, and the process's locale, paths and session,
 * its container and Kubernetes.
 */
static const char *const policy_env_show_default[] = {
        /* host, SDK and container images */
        "DOTNET_ROOT", "DOTNET_ROOT_X64", "DOTNET_ROOT_ARM64", "DOTNET_ROOT_X86", "DOTNET_HOST_PATH",
        "DOTNET_ROLL_FORWARD", "DOTNET_ROLL_FORWARD_TO_PRERELEASE", "DOTNET_ROLL_FORWARD_ON_NO_CANDIDATE_FX",
        "DOTNET_ADDITIONAL_DEPS", "DOTNET_SHARED_STORE", "DOTNET_BUNDLE_EXTRACT_BASE_DIR", "DOTNET_MULTILEVEL_LOOKUP",
        "DOTNET_STARTUP_HOOKS", "DOTNET_RUNNING_IN_CONTAINER", "DOTNET_VERSION", "DOTNET_SDK_VERSION", "ASPNET_VERSION",
        "DOTNET_USE_POLLING_FILE_WATCHER", "DOTNET_CLI_TELEMETRY_OPTOUT", "DOTNET_NOLOGO",
        "DOTNET_SKIP_FIRST_TIME_EXPERIENCE", "DOTNET_CLI_HOME", "DOTNET_CLI_UI_LANGUAGE", "DOTNET_ENVIRONMENT",
        "DOTNET_APPLICATIONNAME", "DOTNET_CONTENTROOT",
        /* the libraries' switches */
        "DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "DOTNET_SYSTEM_GLOBALIZATION_PREDEFINED_CULTURES_ONLY",
        "DOTNET_SYSTEM_GLOBALIZATION_APPLOCALICU", "CLR_ICU_VERSION_OVERRIDE",
        "DOTNET_SYSTEM_NET_HTTP_ENABLEACTIVITYPROPAGATION", "DOTNET_SYSTEM_NET_HTTP_USESOCKETSHTTPHANDLER",
        "DOTNET_SYSTEM_NET_HTTP_SOCKETSHTTPHANDLER_HTTP2SUPPORT", "DOTNET_SYSTEM_NET_HTTP_SOCKETSHTTPHANDLER_HTTP3SUPPORT",
        "DOTNET_SYSTEM_NET_HTTP_SOCKETSHTTPHANDLER_HTTP2FLOWCONTROL_DISABLEDYNAMICWINDOWSIZING",
        "DOTNET_SYSTEM_NET_HTTP_SOCKETSHTTPHANDLER_FLOWCONTROL_MAXSTREAMWINDOWSIZE",
        "DOTNET_SYSTEM_NET_HTTP_SOCKETSHTTPHANDLER_FLOWCONTROL_STREAMWINDOWSCALETHRESHOLDMULTIPLIER",
        "DOTNET_SYSTEM_NET_SOCKETS_INLINE_COMPLETIONS", "DOTNET_SYSTEM_NET_SOCKETS_THREAD_COUNT",
        "DOTNET_SYSTEM_NET_DISABLEIPV6", "DOTNET_SYSTEM_CONSOLE_ALLOW_ANSI_COLOR_REDIRECTION",
        /* a profiler's */
        "CORECLR_ENABLE_PROFILING", "CORECLR_PROFILER", "CORECLR_PROFILER_PATH", "CORECLR_PROFILER_PATH_64",
        "CORECLR_PROFILER_PATH_ARM64",
        /* ASP.NET Core's host */
        "ASPNETCORE_URLS", "ASPNETCORE_ENVIRONMENT", "ASPNETCORE_HTTP_PORTS", "ASPNETCORE_HTTPS_PORTS",
        "ASPNETCORE_HTTPS_PORT", "ASPNETCORE_CONTENTROOT", "ASPNETCORE_WEBROOT", "ASPNETCORE_APPLICATIONNAME",
        "ASPNETCORE_DETAILEDERRORS", "ASPNETCORE_SHUTDOWNTIMEOUTSECONDS", "ASPNETCORE_FORWARDEDHEADERS_ENABLED",
        "ASPNETCORE_PREVENTHOSTINGSTARTUP", "ASPNETCORE_HOSTINGSTARTUPASSEMBLIES",
        "ASPNETCORE_HOSTINGSTARTUPEXCLUDEASSEMBLIES", "ASPNETCORE_SUPPRESSSTATUSMESSAGES",
        "ASPNETCORE_CAPTURESTARTUPERRORS", "ASPNETCORE_PREFERHOSTINGURLS",
        /* the process's session, locale and paths */
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "SHLVL", "TERM", "LANG", "LANGUAGE", "LC_ALL",
        "LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "LC_MONETARY", "LC_MESSAGES", "LC_PAPER", "LC_NAME",
        "LC_ADDRESS", "LC_TELEPHONE", "LC_MEASUREMENT", "LC_IDENTIFICATION", "TZ", "HOSTNAME", "TMPDIR", "TEMP", "TMP",
        "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "INVOCATION_ID", "JOURNAL_STREAM",
        "SYSTEMD_EXEC_PID", "NUGET_PACKAGES", "NUGET_XMLDOC_MODE", "APP_UID",
        /* container and Kubernetes */
        "container", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_PORT_HTTPS",
        "KUBERNETES_PORT", "KUBERNETES_PORT_443_TCP", "KUBERNETES_PORT_443_TCP_PROTO", "KUBERNETES_PORT_443_TCP_PORT",
        "KUBERNETES_PORT_443_TCP_ADDR",
};

static bool env_names_match(const char *const *patterns, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (policy_env_pattern_match(patterns[i], name))
                        return true;
        return false;
}

static bool name_listed(const char *const *names, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(names[i], name) == 0)
                        return true;
        return false;
}

/* @name past @prefix, or NULL when it does not begin with it. */
static const char *after_prefix(const char *name, const char *prefix) {
        size_t n = strlen(prefix);

        return strncmp(name, prefix, n) == 0 ? name + n : NULL;
}

bool policy_env_name_shown_by_default(const char *name) {
        const char *knob = after_prefix(name, "DOTNET_");

        if (!knob)
                knob = after_prefix(name, "COMPlus_");

        return (knob && name_listed(policy_env_runtime_knobs, ELEMENTSOF(policy_env_runtime_knobs), knob)) ||
               name_listed(policy_env_show_default, ELEMENTSOF(policy_env_show_default), name);
}

/* The profiles dsctl trace knows; a rule naming another one is a typo. */
bool policy_trace_profile_is_known(const char *s) {
        return eventpipe_profile_is_known(s);
}

Policy *policy_new_builtin(void) {
        Policy *p = calloc(1, sizeof(*p));

        if (!p)
                return NULL;
        p->n_ref = 1;
        p->agent.dump_dir = strdup(POLICY_DEFAULT_DUMP_DIR);
        p->agent.max_concurrent_dumps = 1;
        p->agent.max_dumps_per_user = 1;
        p->agent.max_concurrent_own_dumps = 4;
        p->agent.max_use = (PolicySize){ .percent = 10 };
        p->agent.keep_free = (PolicySize){ .percent = 15 };
        p->agent.max_age_usec = POLICY_MAX_AGE_DEFAULT_USEC;
        p->agent.owner_access = true;
        p->agent.max_sessions_per_target = 4;
        p->agent.max_sessions_per_user = 8;
        p->agent.max_session_duration_usec = 3600ULL * 1000000;
        p->agent.max_trace_size = 1ULL << 30;
        p->agent.max_trace_buffer_mb = 256;
        p->agent.max_requests_per_second = 100;
        p->agent.max_request_burst = 1000;
        p->agent.max_runtimes_per_user = POLICY_RUNTIMES_PER_USER_DEFAULT;
        p->agent.target_cache_ms = POLICY_TARGET_CACHE_MS_DEFAULT;
        if (!p->agent.dump_dir)
                return policy_unref(p);
        p->agent.env_redact.items = calloc(ELEMENTSOF(policy_env_redact_default), sizeof(char *));
        if (!p->agent.env_redact.items)
                return policy_unref(p);
        for (size_t i = 0; i < ELEMENTSOF(policy_env_redact_default); i++) {
                p->agent.env_redact.items[i] = strdup(policy_env_redact_default[i]);
                if (!p->agent.env_redact.items[i])
                        return policy_unref(p);
                p->agent.env_redact.n++;
        }
        return p;
}

void policy_string_list_done(PolicyStringList *l) {
        for (size_t i = 0; i < l->n; i++)
                free(l->items[i]);
        free(l->items);
        *l = (PolicyStringList){};
}

/* What each part of a policy owns, freed by policy_unref() alone. */
static void policy_targets_done(PolicyTargets *t) {
        free(t->users.ids);
        policy_string_list_done(&t->units);
        policy_string_list_done(&t->names);
        policy_string_list_done(&t->cgroups);
        policy_string_list_done(&t->containers);
        *t = (PolicyTargets){};
}

static void policy_rule_done(PolicyRule *r) {
        PolicyStringList *lists[] = { &r->trace_profiles, &r->counter_providers, &r->env_show };

        free(r->name);
        free(r->file);
        free(r->users.ids);
        free(r->groups.ids);
        policy_targets_done(&r->targets);
        free(r->reader_users.ids);
        free(r->reader_groups.ids);
        for (size_t i = 0; i < r->n_trace_providers; i++)
                free(r->trace_providers[i].name);
        free(r->trace_providers);
        for (size_t i = 0; i < ELEMENTSOF(lists); i++)
                policy_string_list_done(lists[i]);
        free(r->egress_name);
        *r = (PolicyRule){};
}

static void policy_port_done(PolicyPort *port) {
        free(port->path);
        free(port->file);
        free(port->users.ids);
        free(port->groups.ids);
        *port = (PolicyPort){};
}

static void policy_on_start_done(PolicyOnStart *o) {
        free(o->name);
        free(o->file);
        policy_targets_done(&o->targets);
        free(o->trace_profile);
        for (size_t i = 0; i < o->n_trace_providers; i++)
                free(o->trace_providers[i].name);
        free(o->trace_providers);
        free(o->reader_users.ids);
        free(o->reader_groups.ids);
        *o = (PolicyOnStart){};
}

static void policy_collect_done(PolicyCollect *c) {
        free(c->name);
        free(c->file);
        policy_targets_done(&c->targets);
        free(c->counter_provider);
        free(c->counter_name);
        for (size_t i = 0; i < c->n_counter_tags; i++) {
                free(c->counter_tags[i].key);
                free(c->counter_tags[i].value);
        }
        free(c->counter_tags);
        free(c->exception_type);
        free(c->trace_profile);
        policy_string_list_done(&c->counters_providers);
        free(c->reader_users.ids);
        free(c->reader_groups.ids);
        free(c->egress_name);
        *c = (PolicyCollect){};
}

static void policy_egress_done(PolicyEgress *e) {
        char *strings[] = { e->name, e->file, e->endpoint, e->bucket, e->region, e->prefix, e->ca_file,
                            e->credentials };

        for (size_t i = 0; i < ELEMENTSOF(strings); i++)
                free(strings[i]);
        *e = (PolicyEgress){};
}

Policy *policy_ref(Policy *p) {
        if (p)
                p->n_ref++;
        return p;
}

Policy *policy_unref(Policy *p) {
        if (!p)
                return NULL;
        assert(p->n_ref > 0); /* a reference given back twice: the policy is freed already */
        if (--p->n_ref > 0)
                return NULL;
        for (size_t i = 0; i < p->n_rules; i++)
                policy_rule_done(&p->rules[i]);
        free(p->rules);
        for (size_t i = 0; i < p->n_ports; i++)
                policy_port_done(&p->ports[i]);
        free(p->ports);
        for (size_t i = 0; i < p->n_on_start; i++)
                policy_on_start_done(&p->on_start[i]);
        free(p->on_start);
        for (size_t i = 0; i < p->n_collect; i++)
                policy_collect_done(&p->collect[i]);
        free(p->collect);
        for (size_t i = 0; i < p->n_egress; i++)
                policy_egress_done(&p->egress[i]);
        free(p->egress);
        free(p->agent.dump_dir);
        free(p->agent.pam_service);
        policy_string_list_done(&p->agent.env_redact);
        free(p);
        return NULL;
}

/* The object keys' alphabet (agent/egress/egress-name.c keeps to it too): what any store and any shell take as is. */
bool policy_egress_key_char(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == '-';
}

bool policy_egress_prefix_is_valid(const char *prefix) {
        const char *segment = prefix;

        for (const char *c = prefix; *c; c++) {
                if (*c != '/') {
                        if (!policy_egress_key_char(*c))
                                return false;
                        continue;
                }
                if (c == segment || (c - segment == 1 && segment[0] == '.') ||
                    (c - segment == 2 && segment[0] == '.' && segment[1] == '.'))
                        return false;
                segment = c + 1;
        }
        return *segment == '\0'; /* the last segment ended in '/' */
}

const PolicyEgress *policy_egress_find(const Policy *p, const char *name) {
        for (size_t i = 0; i < p->n_egress; i++)
                if (strcmp(p->egress[i].name, name) == 0)
                        return &p->egress[i];
        return NULL;
}

bool policy_env_pattern_is_valid(const char *pattern) {
        size_t n = strlen(pattern);

        if (n == 0 || n > POLICY_ENV_PATTERN_MAX || !utf8_is_valid(pattern, n))
                return false;
        for (const char *c = pattern; *c; c++)
                if ((unsigned char)*c <= ' ' || *c == 0x7F || strchr("=[]\\", *c))
                        return false;
        return true;
}

static char ascii_upper(char c) {
        return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

/* The bytes of the character at @s, of the @n left: never past them. */
static size_t char_length_within(const char *s, size_t n) {
        size_t len = utf8_char_length(s);

        return len < n ? len : n;
}

/*
 * Does name[0..@n) match pattern[0..@m)? '*' stands for any run of characters, none included,
 * '?' for one character; anything else for itself, ASCII letters in either case when
 * @fold_case. Greedy, with one place to go back to: after the latest '*' only, since a match
 * of what follows an earlier one can always be pushed right. Each '*' thus costs at most one
 * pass over the name per character of the pattern after it.
 */
static bool glob_match(const char *pattern, size_t m, const char *name, size_t n, bool fold_case) {
        size_t p = 0, s = 0, star = SIZE_MAX, resume = 0;

        while (s < n) {
                if (p < m && pattern[p] == '*') {
                        star = ++p;
                        resume = s;
                } else if (p < m && pattern[p] == '?') {
                        p++;
                        s += char_length_within(name + s, n - s);
                } else if (p < m && (fold_case ? ascii_upper(pattern[p]) == ascii_upper(name[s])
                                               : pattern[p] == name[s])) {
                        p++;
                        s++;
                } else if (star != SIZE_MAX) {
                        p = star;
                        resume += char_length_within(name + resume, n - resume);
                        s = resume;
                } else
                        return false;
        }
        while (p < m && pattern[p] == '*')
                p++;
        return p == m;
}

bool policy_env_pattern_match(const char *pattern, const char *name) {
        return glob_match(pattern, strlen(pattern), name, strlen(name), true);
}

/* The component of a path at *@cursor, past its '/'; *@cursor moves after it. False at the end. */
static bool next_component(const char **cursor, const char **ret_start, size_t *ret_len) {
        const char *s = *cursor;

        while (*s == '/')
                s++;
        if (*s == '\0')
                return false;
        *ret_start = s;
        *ret_len = strcspn(s, "/");
        *cursor = s + *ret_len;
        return true;
}

bool policy_cgroup_pattern_is_valid(const char *pattern) {
        const char *cursor = pattern, *c;
        size_t n = strlen(pattern), len;

        if (n < 2 || n > POLICY_CGROUP_PATTERN_MAX || pattern[0] != '/' || pattern[n - 1] == '/' ||
            strstr(pattern, "//") || !utf8_is_valid(pattern, n))
                return false;
        for (c = pattern; *c; c++)
                if ((unsigned char)*c < ' ' || *c == 0x7F || strchr("[]\\", *c))
                        return false;
        while (next_component(&cursor, &c, &len)) {
                if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                if (len != 2 && memmem(c, len, "**", 2))
                        return false;
        }
        return true;
}

bool policy_cgroup_pattern_match(const char *pattern, const char *path) {
        const char *star = NULL, *resume = NULL, *p, *q;
        size_t p_len, q_len;

        /*
         * Greedy over components as glob_match() is over characters, "**" in the role of '*':
         * a later "**" takes over from an earlier one. The end of the pattern is an unwritten
         * trailing "**": what is left of the path are the cgroups below a match.
         */
        for (;;) {
                const char *at_pattern = pattern;

                if (!next_component(&pattern, &p, &p_len))
                        return true;
                if (p_len == 2 && p[0] == '*' && p[1] == '*') {
                        star = pattern;
                        resume = path;
                        continue;
                }
                if (!next_component(&path, &q, &q_len)) {
                        /* the path ends here: only "**" may be left of the pattern */
                        while (next_component(&at_pattern, &p, &p_len))
                                if (p_len != 2 || p[0] != '*' || p[1] != '*')
                                        return false;
                        return true;
                }
                if (glob_match(p, p_len, q, q_len, false))
                        continue;
                if (!star || !next_component(&resume, &q, &q_len))
                        return false;
                pattern = star;
                path = resume;
        }
}

bool policy_container_selector_is_valid(const char *selector) {
        size_t n = strlen(selector);

        return n >= POLICY_CONTAINER_PREFIX_MIN && n <= POLICY_CONTAINER_ID_LEN &&
               strspn(selector, "0123456789abcdef") == n;
}

/* Is @name on the allow list: the built-in one, or that of the rule that granted env? */
static bool env_name_shown(const PolicyVerdict *v, const char *name) {
        const PolicyStringList *show = v->rule ? &v->rule->env_show : NULL;

        return policy_env_name_shown_by_default(name) ||
               (show && env_names_match((const char *const *)show->items, show->n, name));
}

bool policy_env_value_hidden(const Policy *p, const PolicyVerdict *v, const char *name, const char *value,
                             size_t *check_budget) {
        size_t cost;

        if (v->env_reveal)
                return false;
        if (env_names_match((const char *const *)p->agent.env_redact.items, p->agent.env_redact.n, name))
                return true;
        if (!env_name_shown(v, name))
                return true;
        cost = strlen(name) + strlen(value);
        if (cost > *check_budget)
                return true; /* not checked, so not vouched for; smaller ones after it still may be */
        *check_budget -= cost;
        return env_name_looks_secret(name) || env_value_looks_secret(value);
}

static bool id_list_contains(const PolicyIdList *l, uint32_t id) {
        for (size_t i = 0; i < l->n; i++)
                if (l->ids[i] == id)
                        return true;
        return false;
}

static bool string_list_contains(const PolicyStringList *l, const char *s) {
        if (!s)
                return false;
        for (size_t i = 0; i < l->n; i++)
                if (strcmp(l->items[i], s) == 0)
                        return true;
        return false;
}

bool policy_port_admits(const PolicyPort *port, uid_t uid, const gid_t *gids, size_t n_gids) {
        if (id_list_contains(&port->users, uid))
                return true;
        for (size_t i = 0; i < n_gids; i++)
                if (id_list_contains(&port->groups, gids[i]))
                        return true;
        return false;
}

static bool rule_matches_requester(const PolicyRule *r, const PolicyRequester *who) {
        if (id_list_contains(&r->users, who->uid))
                return true;
        for (size_t i = 0; i < who->n_groups; i++)
                if (id_list_contains(&r->groups, who->groups[i]))
                        return true;
        return false;
}

static bool cgroup_patterns_match(const PolicyStringList *patterns, const char *path) {
        if (!path)
                return false;
        for (size_t i = 0; i < patterns->n; i++)
                if (policy_cgroup_pattern_match(patterns->items[i], path))
                        return true;
        return false;
}

static bool container_selectors_match(const PolicyStringList *selectors, const char *id) {
        if (!id)
                return false;
        for (size_t i = 0; i < selectors->n; i++)
                if (strncmp(id, selectors->items[i], strlen(selectors->items[i])) == 0)
                        return true;
        return false;
}

/*
 * The one matcher of targets, for [[rule]] and [[on_start]] alike: every selector given must
 * match, a selector not given matches anything.
 *
 * Return: NULL when they all match, else what did not.
 */
static const char *targets_mismatch(const PolicyTargets *s, const PolicyTarget *t) {
        if (s->any)
                return NULL;
        if (s->users.n > 0 && !id_list_contains(&s->users, t->uid[1]))
                return "the target's user";
        if (s->units.n > 0 && !string_list_contains(&s->units, t->unit))
                return "the target's unit";
        if (s->names.n > 0 && !string_list_contains(&s->names, t->name))
                return "the target's name";
        if (s->cgroups.n > 0 && !cgroup_patterns_match(&s->cgroups, t->cgroup))
                return "the target's cgroup";
        if (s->containers.n > 0 && !container_selectors_match(&s->containers, t->container_id))
                return "the target's container";
        return NULL;
}

bool policy_collect_covers(const PolicyCollect *c, const PolicyTarget *target) {
        return !targets_mismatch(&c->targets, target);
}

/* Is "@key=@value" (or "@key:@value", EventCounters' spelling) one of the comma-separated @tags? */
static bool tags_contain(const char *tags, const char *key, const char *value) {
        size_t nk = strlen(key), nv = strlen(value);

        for (const char *t = tags; t && *t;) {
                const char *end = strchr(t, ',');
                size_t n = end ? (size_t)(end - t) : strlen(t);

                while (n > 0 && *t == ' ') { /* "k:v, k2:v2" */
                        t++;
                        n--;
                }
                if (n == nk + 1 + nv && strncmp(t, key, nk) == 0 && (t[nk] == '=' || t[nk] == ':') &&
                    strncmp(t + nk + 1, value, nv) == 0)
                        return true;
                t = end ? end + 1 : NULL;
        }
        return false;
}

bool policy_collect_counter_matches(const PolicyCollect *c, const char *provider, const char *name,
                                    const char *tags) {
        if (c->when != POLICY_COLLECT_WHEN_COUNTER || !provider || !name)
                return false;
        if (strcmp(c->counter_provider, provider) != 0 || strcmp(c->counter_name, name) != 0)
                return false;
        for (size_t i = 0; i < c->n_counter_tags; i++)
                if (!tags_contain(tags, c->counter_tags[i].key, c->counter_tags[i].value))
                        return false;
        return true;
}

bool policy_collect_exception_matches(const PolicyCollect *c, const char *type_name) {
        size_t n, nt;

        if (c->when != POLICY_COLLECT_WHEN_EXCEPTION || !type_name)
                return false;
        if (strcmp(c->exception_type, type_name) == 0)
                return true;
        if (strchr(c->exception_type, '.'))
                return false;
        n = strlen(c->exception_type);
        nt = strlen(type_name);
        return nt > n && (type_name[nt - n - 1] == '.' || type_name[nt - n - 1] == '+') &&
               strcmp(type_name + nt - n, c->exception_type) == 0;
}

static const char *rule_target_mismatch(const PolicyRule *r, const PolicyTarget *t) {
        return targets_mismatch(&r->targets, t);
}

const PolicyOnStart *policy_on_start_match(const Policy *p, const PolicyTarget *target) {
        for (size_t i = 0; i < p->n_on_start; i++)
                if (!targets_mismatch(&p->on_start[i].targets, target))
                        return &p->on_start[i];
        return NULL;
}

static const PolicyProviderGrant *grant_find(const PolicyRule *r, const char *name) {
        for (size_t i = 0; i < r->n_trace_providers; i++)
                if (strcmp(r->trace_providers[i].name, name) == 0)
                        return &r->trace_providers[i];
        return NULL;
}

/*
 * Whether trace_providers admits @pp: named there, keywords within the grant's, no arguments.
 * Arguments are refused: some providers take code-like filters in them (DiagnosticSource's
 * FilterAndPayloadSpecs reads any object's properties); only a profile's own are admitted, as
 * the profile has them.
 */
static bool grant_allows_provider(const PolicyRule *r, const PolicyProvider *pp, char *buf, size_t size) {
        const PolicyProviderGrant *g = grant_find(r, pp->name);
        uint64_t asked = pp->keywords == 0 ? UINT64_MAX : pp->keywords;

        if (!g) {
                snprintf(buf, size, "rule '%s' does not allow the provider '%s'", r->name, pp->name);
                return false;
        }
        if (asked & ~g->keywords) {
                snprintf(buf, size, "rule '%s' allows '%s' only with keywords within 0x%llx", r->name, pp->name,
                         (unsigned long long)g->keywords);
                return false;
        }
        if (pp->arguments && *pp->arguments) {
                snprintf(buf, size, "rule '%s' allows no provider arguments", r->name);
                return false;
        }
        return true;
}

static bool profile_has_provider(const EventPipeProfile *profile, const PolicyProvider *pp) {
        for (size_t k = 0; profile && k < profile->n_providers; k++)
                if (eventpipe_profile_provider_matches(&profile->providers[k], pp->name, pp->keywords, pp->level,
                                                       pp->arguments))
                        return true;
        return false;
}

static bool profile_names_provider(const EventPipeProfile *profile, const char *name) {
        for (size_t k = 0; profile && k < profile->n_providers; k++)
                if (strcmp(profile->providers[k].name, name) == 0)
                        return true;
        return false;
}

/* Every provider of @profile is one of the request's, as the profile has it. */
static bool profile_is_whole_in(const EventPipeProfile *profile, const PolicyProvider *providers, size_t n) {
        for (size_t k = 0; k < profile->n_providers; k++) {
                bool found = false;

                for (size_t i = 0; i < n && !found; i++)
                        found = eventpipe_profile_provider_matches(&profile->providers[k], providers[i].name,
                                                                   providers[i].keywords, providers[i].level,
                                                                   providers[i].arguments);
                if (!found)
                        return false;
        }
        return true;
}

/* The profile of the table whose providers @providers are, all and only them; NULL when none is. */
static const EventPipeProfile *profile_of(const PolicyProvider *providers, size_t n) {
        size_t n_profiles;
        const EventPipeProfile *profiles = eventpipe_profiles(&n_profiles);

        for (size_t j = 0; j < n_profiles; j++)
                if (profiles[j].n_providers == n && profile_is_whole_in(&profiles[j], providers, n))
                        return &profiles[j];
        return NULL;
}

#define ADMITTED_BY_NONE SIZE_MAX
#define ADMITTED_BY_GRANT (SIZE_MAX - 1)

/*
 * Which of the rule's trace_profiles admits each provider (an index into it), or its
 * trace_providers (ADMITTED_BY_GRANT). Profiles the request holds whole are tried first, so
 * that a provider two profiles share (the sample profiler) is put down to the one asked for.
 */
static bool rule_allows_trace_providers(const PolicyRule *r, const PolicyProvider *providers, size_t n,
                                        size_t *by, char *buf, size_t size) {
        for (size_t i = 0; i < n; i++)
                by[i] = ADMITTED_BY_NONE;
        for (int pass = 0; pass < 2; pass++)
                for (size_t j = 0; j < r->trace_profiles.n; j++) {
                        const EventPipeProfile *profile = eventpipe_profile_find(r->trace_profiles.items[j]);

                        if (!profile || (pass == 0 && !profile_is_whole_in(profile, providers, n)))
                                continue;
                        for (size_t i = 0; i < n; i++)
                                if (by[i] == ADMITTED_BY_NONE && profile_has_provider(profile, &providers[i]))
                                        by[i] = j;
                }
        for (size_t i = 0; i < n; i++) {
                const PolicyProvider *pp = &providers[i];
                bool a_profile_names_it = false;

                if (by[i] != ADMITTED_BY_NONE)
                        continue;
                if (grant_allows_provider(r, pp, buf, size)) {
                        by[i] = ADMITTED_BY_GRANT;
                        continue;
                }
                for (size_t j = 0; j < r->trace_profiles.n; j++)
                        a_profile_names_it = a_profile_names_it ||
                                             profile_names_provider(eventpipe_profile_find(r->trace_profiles.items[j]),
                                                                    pp->name);
                if (a_profile_names_it && !grant_find(r, pp->name))
                        snprintf(buf, size,
                                 "rule '%s' allows '%s' only as its trace_profiles ask for it, not at keywords "
                                 "0x%llx, level %u%s",
                                 r->name, pp->name, (unsigned long long)pp->keywords, pp->level,
                                 pp->arguments && *pp->arguments ? ", with these arguments" : "");
                return false;
        }
        return true;
}

/* What admitted a trace: the rule's profiles, and whether trace_providers too. */
typedef struct TraceAdmission {
        char profiles[sizeof(((PolicyVerdict *)NULL)->trace_profiles)]; /* "a,b" */
        char spelled[sizeof(((PolicyVerdict *)NULL)->trace_profiles)];  /* "a, b", for people */
        bool by_grant;
} TraceAdmission;

static void admission_add(TraceAdmission *a, const char *profile) {
        size_t used = strlen(a->profiles), spelled = strlen(a->spelled);

        snprintf(a->profiles + used, sizeof(a->profiles) - used, "%s%s", used ? "," : "", profile);
        snprintf(a->spelled + spelled, sizeof(a->spelled) - spelled, "%s%s", spelled ? ", " : "", profile);
}

static void trace_admitted(const PolicyRule *r, const size_t *by, size_t n, TraceAdmission *a) {
        *a = (TraceAdmission){};
        for (size_t j = 0; j < r->trace_profiles.n; j++) {
                bool this_one = false;

                for (size_t i = 0; i < n; i++)
                        this_one = this_one || by[i] == j;
                if (this_one)
                        admission_add(a, r->trace_profiles.items[j]);
        }
        for (size_t i = 0; i < n; i++)
                a->by_grant = a->by_grant || by[i] == ADMITTED_BY_GRANT;
}

/*
 * A trace: its providers, or those of the profile it names, each admitted by a profile of the
 * rule's or by its trace_providers (policy.h); @admission says what admitted it.
 */
static bool rule_allows_trace(const PolicyRule *r, const PolicyRequest *q, char *buf, size_t size,
                              TraceAdmission *admission) {
        PolicyProvider expanded[EVENTPIPE_PROFILE_PROVIDERS_MAX];
        const PolicyProvider *providers = q->providers;
        size_t n = q->n_providers, by[EVENTPIPE_PROVIDERS_MAX];

        if (q->trace_profile) {
                const EventPipeProfile *profile = eventpipe_profile_find(q->trace_profile);

                if (string_list_contains(&r->trace_profiles, q->trace_profile)) {
                        *admission = (TraceAdmission){};
                        admission_add(admission, q->trace_profile);
                        return true;
                }
                n = profile ? profile->n_providers : 0;
                for (size_t k = 0; k < n; k++)
                        expanded[k] = (PolicyProvider){ .name = profile->providers[k].name,
                                                        .keywords = profile->providers[k].keywords,
                                                        .level = profile->providers[k].level,
                                                        .arguments = profile->providers[k].arguments };
                if (n == 0 || !rule_allows_trace_providers(r, expanded, n, by, buf, size)) {
                        snprintf(buf, size, "rule '%s' does not allow the trace profile '%s'", r->name,
                                 q->trace_profile);
                        return false;
                }
                providers = expanded;
        } else if (n > EVENTPIPE_PROVIDERS_MAX) {
                snprintf(buf, size, "more than %d providers", EVENTPIPE_PROVIDERS_MAX);
                return false;
        } else if (!rule_allows_trace_providers(r, providers, n, by, buf, size)) {
                /* a tool's request that is one profile exactly is refused as that profile, as dsctl's is */
                const EventPipeProfile *profile = profile_of(providers, n);

                if (profile)
                        snprintf(buf, size, "rule '%s' does not allow the trace profile '%s'", r->name,
                                 profile->name);
                return false;
        }
        trace_admitted(r, by, n, admission);
        return true;
}

static bool rule_allows_counters(const PolicyRule *r, const PolicyRequest *q, char *buf, size_t size) {
        for (size_t i = 0; i < q->n_providers; i++) {
                const char *name = q->providers[i].name;
                bool granted = r->counter_providers.n > 0 ? string_list_contains(&r->counter_providers, name)
                                                          : strcmp(name, "System.Runtime") == 0;
                if (!granted) {
                        snprintf(buf, size, "rule '%s' does not allow the counters of '%s'", r->name, name);
                        return false;
                }
        }
        return true;
}

/* Return: true when the request's parameters are within the rule, and for a trace what admitted it in
 * @admission; else a reason in @buf. */
static bool rule_allows_parameters(const PolicyRule *r, const PolicyRequest *q, char *buf, size_t size,
                                   TraceAdmission *admission) {
        if (q->command == POLICY_COMMAND_DUMP && !(r->dump_types & (1u << q->dump_type))) {
                snprintf(buf, size, "rule '%s' does not allow %s dumps", r->name,
                         policy_dump_type_to_string(q->dump_type));
                return false;
        }
        if (q->command == POLICY_COMMAND_TRACE && !rule_allows_trace(r, q, buf, size, admission))
                return false;
        if (q->command == POLICY_COMMAND_COUNTERS && !rule_allows_counters(r, q, buf, size))
                return false;
        if (r->max_duration_usec > 0 && q->duration_usec > r->max_duration_usec) {
                snprintf(buf, size, "rule '%s' allows at most %llus, %llus were asked", r->name,
                         (unsigned long long)(r->max_duration_usec / 1000000),
                         (unsigned long long)(q->duration_usec / 1000000));
                return false;
        }
        return true;
}

/* The [agent] limits on sessions hold for everyone, root included. */
static bool session_exceeds_agent_limits(const Policy *p, const PolicyRequest *q, char *buf, size_t size) {
        const PolicyAgentSettings *a = &p->agent;

        if (q->command != POLICY_COMMAND_TRACE && q->command != POLICY_COMMAND_COUNTERS &&
            q->command != POLICY_COMMAND_STACKS && q->command != POLICY_COMMAND_EXCEPTIONS &&
            q->command != POLICY_COMMAND_LOGS)
                return false;
        if (q->buffer_mb > a->max_trace_buffer_mb) {
                snprintf(buf, size, "buffers above %u MB are not allowed, %u MB were asked", a->max_trace_buffer_mb,
                         q->buffer_mb);
                return true;
        }
        if (q->duration_usec > a->max_session_duration_usec) {
                snprintf(buf, size, "sessions may last at most %llus, %llus were asked",
                         (unsigned long long)(a->max_session_duration_usec / 1000000),
                         (unsigned long long)(q->duration_usec / 1000000));
                return true;
        }
        return false;
}

/* Real, effective, saved and filesystem ids not all one: a process that changed credentials. */
static bool policy_target_changed_credentials(const PolicyTarget *t) {
        for (size_t i = 1; i < 4; i++)
                if (t->uid[i] != t->uid[0] || t->gid[i] != t->gid[0])
                        return true;
        return false;
}

/* Does owner_access give @who one of @commands on @t? Only commands that run no code. */
static bool owner_access_applies(const Policy *p, const PolicyRequester *who, const PolicyTarget *t,
                                 uint32_t commands) {
        return p->agent.owner_access && (commands & ~POLICY_COMMANDS_RUNNING_CODE) != 0 &&
               !policy_target_changed_credentials(t) && who->uid == t->uid[1];
}

bool policy_target_visible(const Policy *p, const PolicyRequester *who, const PolicyTarget *target) {
        if (who->uid == 0)
                return true;
        /* its own processes a user sees in /proc anyway, even with hidepid= */
        if (p->agent.owner_access &&
            (who->uid == target->uid[0] || who->uid == target->uid[1] || who->uid == target->uid[2]))
                return true;
        for (size_t i = 0; i < p->n_rules; i++)
                if (rule_matches_requester(&p->rules[i], who) && (p->rules[i].commands & POLICY_COMMANDS_LIVE) != 0 &&
                    !rule_target_mismatch(&p->rules[i], target))
                        return true;
        return false;
}

bool policy_selects_by_name_or_cgroup(const Policy *p) {
        for (size_t i = 0; i < p->n_rules; i++) {
                const PolicyTargets *t = &p->rules[i].targets;

                if ((p->rules[i].commands & POLICY_COMMANDS_LIVE) != 0 &&
                    (t->units.n > 0 || t->names.n > 0 || t->cgroups.n > 0 || t->containers.n > 0))
                        return true;
        }
        return false;
}

bool policy_visible_uids(const Policy *p, const PolicyRequester *who, uid_t *out, size_t max, size_t *ret_n) {
        size_t n = 0;

        if (who->uid == 0)
                return true;
        if (p->agent.owner_access && n < max)
                out[n++] = who->uid;
        for (size_t i = 0; i < p->n_rules; i++) {
                const PolicyRule *r = &p->rules[i];

                if (!rule_matches_requester(r, who) || (r->commands & POLICY_COMMANDS_LIVE) == 0)
                        continue;
                if (r->targets.any || r->targets.users.n == 0)
                        return true; /* units, names, cgroups or containers alone: a process of anybody's */
                for (size_t k = 0; k < r->targets.users.n; k++) {
                        if (n == max)
                                return true;
                        out[n++] = (uid_t)r->targets.users.ids[k];
                }
        }
        *ret_n = n;
        return false;
}

uint32_t policy_commands_held(const Policy *p, const PolicyRequester *who, const PolicyTarget *target) {
        const uint32_t no_code = POLICY_COMMANDS_LIVE & ~POLICY_COMMANDS_RUNNING_CODE;
        uint32_t held = 0;

        if (who->uid == 0 || owner_access_applies(p, who, target, POLICY_COMMANDS_LIVE))
                held |= no_code;
        for (size_t i = 0; i < p->n_rules; i++)
                if (rule_matches_requester(&p->rules[i], who) && !rule_target_mismatch(&p->rules[i], target))
                        held |= p->rules[i].commands;
        return held & POLICY_COMMANDS_LIVE;
}

/* @why: the built-in rule's reason; @admission: for a file rule's trace, what admitted it, or NULL */
static void verdict_allow(PolicyVerdict *v, const PolicyRule *rule, const char *name, const char *why,
                          const TraceAdmission *admission) {
        bool profiles = admission && admission->profiles[0];

        v->allowed = true;
        v->rule = rule;
        v->rule_name = name;
        /* root and a process's own user read its environment anyway: /proc/PID/environ, its socket */
        v->env_reveal = rule ? rule->env_reveal : true;
        if (profiles)
                snprintf(v->trace_profiles, sizeof(v->trace_profiles), "%s", admission->profiles);
        if (rule && profiles) {
                /* a long rule name leaves less of the list: the reason is for people, trace_profiles whole */
                int n = snprintf(v->reason, sizeof(v->reason), "granted by rule '%s' as ", name);

                if (n > 0 && (size_t)n < sizeof(v->reason))
                        strncat(v->reason, admission->spelled, sizeof(v->reason) - (size_t)n - 1);
                if (admission->by_grant && strlen(v->reason) + 20 < sizeof(v->reason))
                        strcat(v->reason, " and trace_providers");
        } else if (rule)
                snprintf(v->reason, sizeof(v->reason), "granted by rule '%s'", name);
        else
                snprintf(v->reason, sizeof(v->reason), "%s", why);
}

/*
 * How far the best non-matching rule got, so a denial can say what was
 * missing. Only rules that name the requester are ever mentioned: a denial
 * must not tell a user about rules written for somebody else.
 */
typedef enum DenyStage {
        DENY_NO_RULE,
        DENY_COMMAND,
        DENY_TARGET,
        DENY_PARAMETERS,
} DenyStage;

/**
 * policy_check() - decide one request; deny unless something allows it
 *
 * Root may use every command that runs no code in the target. With
 * owner_access, so may a target's own user, unless the target changed
 * credentials. Otherwise the first rule in file order that matches the
 * requester, the command, the target and the parameters decides.
 *
 * A request for any of several commands (ps, and any_of) is decided so
 * with the rule's commands matched against all of them, and no parameters:
 * ps is allowed exactly when policy_commands_held() is not 0.
 */
void policy_check(const Policy *p, const PolicyRequester *who, const PolicyTarget *target,
                  const PolicyRequest *q, PolicyVerdict *ret) {
        PolicyVerdict v = {};
        DenyStage stage = DENY_NO_RULE;
        const PolicyRule *closest = NULL;
        const char *mismatch = NULL;
        char param_reason[sizeof(v.reason)] = "", later_reason[sizeof(v.reason)];
        uint32_t wanted;
        bool any;
        TraceAdmission admission = {};

        if (q->command < 0 || q->command >= _POLICY_COMMAND_MAX) {
                snprintf(v.reason, sizeof(v.reason), "unknown command");
                *ret = v;
                return;
        }

        if (session_exceeds_agent_limits(p, q, v.reason, sizeof(v.reason))) {
                *ret = v;
                return;
        }
        any = q->any_of != 0 || q->command == POLICY_COMMAND_PS;
        wanted = q->any_of != 0 ? q->any_of : q->command == POLICY_COMMAND_PS ? POLICY_COMMANDS_LIVE : 1u << q->command;
        if (who->uid == 0 && (wanted & ~POLICY_COMMANDS_RUNNING_CODE)) {
                verdict_allow(&v, NULL, POLICY_RULE_ROOT, "requester is root", NULL);
                *ret = v;
                return;
        }
        if (owner_access_applies(p, who, target, wanted)) {
                verdict_allow(&v, NULL, POLICY_RULE_OWNER, "requester owns the target", NULL);
                *ret = v;
                return;
        }

        for (size_t i = 0; i < p->n_rules; i++) {
                const PolicyRule *r = &p->rules[i];
                const char *m;

                if (!rule_matches_requester(r, who))
                        continue;
                if (!(r->commands & wanted)) {
                        if (stage < DENY_COMMAND)
                                stage = DENY_COMMAND;
                        continue;
                }
                m = rule_target_mismatch(r, target);
                if (m) {
                        if (stage < DENY_TARGET) {
                                stage = DENY_TARGET;
                                closest = r;
                                mismatch = m;
                        }
                        continue;
                }
                /* the first rule that failed on parameters is the one to explain */
                if (!any && !rule_allows_parameters(r, q, stage < DENY_PARAMETERS ? param_reason : later_reason,
                                                    sizeof(param_reason), &admission)) {
                        stage = DENY_PARAMETERS;
                        continue;
                }
                verdict_allow(&v, r, r->name, NULL, q->command == POLICY_COMMAND_TRACE ? &admission : NULL);
                *ret = v;
                return;
        }

        switch (stage) {
        case DENY_NO_RULE:
                if (p->agent.owner_access && who->uid == target->uid[1] && policy_target_changed_credentials(target))
                        snprintf(v.reason, sizeof(v.reason), "target changed credentials; only root may act on it");
                else if (p->agent.owner_access && who->uid == target->uid[1])
                        snprintf(v.reason, sizeof(v.reason), "no rule grants '%s', which runs code in the target",
                                 policy_command_to_string(q->command));
                else
                        snprintf(v.reason, sizeof(v.reason), "no rule grants you access to this process");
                break;
        case DENY_COMMAND:
                if (any)
                        snprintf(v.reason, sizeof(v.reason), "no rule grants you a command on this process");
                else
                        snprintf(v.reason, sizeof(v.reason), "no rule grants you '%s'",
                                 policy_command_to_string(q->command));
                break;
        case DENY_TARGET:
                snprintf(v.reason, sizeof(v.reason), "rule '%s' does not cover %s", closest->name, mismatch);
                break;
        case DENY_PARAMETERS:
                snprintf(v.reason, sizeof(v.reason), "%s", param_reason);
                v.parameters_refused = true;
                break;
        }
        *ret = v;
}

const PolicyTableArtifacts *policy_table_artifacts(const Policy *p, const char *origin, const char *table,
                                                   size_t *ret_index) {
        if (!origin || !table)
                return NULL;
        if (strcmp(origin, "collect") == 0) {
                for (size_t i = 0; i < p->n_collect; i++)
                        if (strcmp(p->collect[i].name, table) == 0) {
                                if (ret_index)
                                        *ret_index = i;
                                return &p->collect[i].artifacts;
                        }
        } else if (strcmp(origin, "on_start") == 0) {
                for (size_t i = 0; i < p->n_on_start; i++)
                        if (strcmp(p->on_start[i].name, table) == 0) {
                                if (ret_index)
                                        *ret_index = p->n_collect + i;
                                return &p->on_start[i].artifacts;
                        }
        }
        return NULL;
}

void policy_crash_check(const Policy *p, const PolicyRequester *who, const PolicyTarget *crashed, PolicyVerdict *ret) {
        /* the reason of a denial is for the record: the requester is answered as for a crash that never was */
        policy_check(p, who, crashed, &(PolicyRequest){ .command = POLICY_COMMAND_CRASHES }, ret);
}
