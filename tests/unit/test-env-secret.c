/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* env-secret: which names and values of an environment look like secrets (policy/env-secret.h) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/env-secret.h"
#include "policy/policy.h"
#include "tests/unit/tap.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void check_values(const char *const *values, size_t n, bool secret) {
        for (size_t i = 0; i < n; i++)
                if (env_value_looks_secret(values[i]) != secret) {
                        printf("# %s: %s\n", secret ? "not taken for a secret" : "taken for a secret", values[i]);
                        check(env_value_looks_secret(values[i]) == secret);
                }
}

static void check_names(const char *const *names, size_t n, bool secret) {
        for (size_t i = 0; i < n; i++)
                if (env_name_looks_secret(names[i]) != secret) {
                        printf("# %s: %s\n", secret ? "not taken for a secret" : "taken for a secret", names[i]);
                        check(env_name_looks_secret(names[i]) == secret);
                }
}

/* Values of .NET deployments that hold secrets, each in the shape its service gives it. */
static void test_secret_values(void) {
        static const char *const secrets[] = {
                /* connection strings: SQL Server, Postgres, MySQL, Redis, Azure, Service Bus, Event Hubs */
                "Server=tcp:sql.example.net,1433;Database=orders;User ID=app;Password=Pa55w0rd!;Encrypt=True",
                "Data Source=sql01;Initial Catalog=Billing;User Id=sa;PWD=hunter2",
                "Host=pg;Port=5432;Database=app;Username=app;Password = s3cr3t",
                "server=mysql;uid=root;pwd=abc;database=shop",
                "redis-master:6379,password=r3d1s,ssl=True,abortConnect=False",
                "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Zm9vYmFy;EndpointSuffix=core.windows.net",
                "Endpoint=sb://bus.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
                "SharedAccessKey=abc=",
                "InstrumentationKey=00000000-0000-0000-0000-000000000000;IngestionEndpoint=https://x/",
                /* SAS tokens, query strings */
                "?sv=2022-11-02&ss=b&srt=sco&sp=rl&se=2030-01-01&sig=abcdEFGH%2Bijkl%3D",
                "https://acct.blob.core.windows.net/c?sp=r&st=2024&sig=QWERTY",
                "https://api.example.com/v1?api_key=abc",
                /* URLs with a user part */
                "postgres://app:p4ss@db:5432/app",
                "amqp://guest:guest@rabbitmq:5672/",
                "mongodb+srv://svc:pw@cluster0.mongodb.net/app?retryWrites=true",
                "redis://:r3d1s@cache:6379/0",
                "https://0123abcd@o450000.ingest.sentry.io/1234567",
                "http://proxyuser:proxypass@proxy:3128",
                "app:s3cret@db.internal:5432",
                /* JSON, JAAS */
                "{\"user\":\"a\",\"password\":\"b\"}",
                "{'client_secret': 'x'}",
                "{\"user\" : \"a\", \"password\" : \"b\"}", /* Jackson's pretty printer */
                "{\"Password\"\t: \"x\"}",
                "Password\t=hunter2",
                "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\";",
                /* tokens and keys by shape */
                "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig",
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
                "-----BEGIN CERTIFICATE-----",
                "Bearer abc.def",
                "Basic YWxhZGRpbjpvcGVuc2VzYW1l",
                "AKIAIOSFODNN7EXAMPLE",
                "AIzaSyD-abcdefghijklmnopqrstuvwxyz0123",
                "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
                "sk_test_abcdefgh",
                "whsec_abcdefghij",
                "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
                "github_pat_11ABCDEFG",
                "glpat-abcdefghij",
                "xoxb-1234-5678-abcdef",
                "SG.abcdefghijklmnop.qrstuvwxyz0123456789",
                /* random-looking */
                "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "Zm9vYmFyYmF6cXV4cXV1eHF1dXg9PT0rKysvLy8vZm9vYmFy==",
                "3f1c2b9e8d7a6f5e4d3c2b1a0f9e8d7c",
                "q8F2zR7kL0pX4mN9",
                /* the shapes of issue 35: an SDK key, a bare UUID, a header, a login, a passcode, a seed, a webhook */
                "sdk-2f0b7a9e-51c3-4d8e-9a6b-0c1d2e3f4a5b",
                "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
                "x-api-key: 6f1c2d3e-4b5a-6978-8796-a5b4c3d2e1f0",
                "user:Winter2025!",
                "48213907",
                "JBSWY3DPEHPK3PXP",
                "https://hooks.example.com/hooks/catch/4821390/k3j5h6g/",
        };
        check_values(secrets, N(secrets), true);
}

/* Values of harmless configuration: shown when their name is on the allow list. */
static void test_harmless_values(void) {
        static const char *const plain[] = {
                "", "1", "true", "Production", "http://+:8080", "https://+:443;http://+:80", "8080",
                "/usr/bin:/bin:/usr/share/dotnet:/root/.dotnet/tools", "/tmp/tmpab12cd34", "en_US.UTF-8",
                "Europe/Berlin", "orders-api-7d9f8b6c5d-x2x7k", "/usr/share/dotnet", "8.0.11", "Microsoft.AspNetCore.Hosting", "Information",
                "/run/dsagent/ports/a.sock,connect,nosuspend", "0x1F", "ops@example.com",
                "https://api.example.com/v1/orders", "/opt/app/v2/Release/net8.0/App.dll", "Key Vault",
                "a1b2c3d4e5f6",
        };
        check_values(plain, N(plain), false);
}

static void test_secret_names(void) {
        static const char *const secrets[] = {
                "DB_PASSWORD", "PGPASS", "PGPASSWORD", "DBPASS", "SMTP_PASS", "SQL_PW", "SQL_PWD", "MYSQL_PASSWD",
                "GPG_PASSPHRASE", "AZURE_STORAGE_SAS", "BLOB_SAS", "JWT_SIGNING", "Jwt__SigningKey", "STRIPE_SK_KEY",
                "API_KEY", "ApiKey", "CLIENT_SECRET", "GITHUB_TOKEN", "AWS_CREDENTIALS", "BASIC_AUTH",
                "TLS_PRIVATE", "SSL_CERT_FILE", "SQLCONNSTR_Main", "DB_CONNECTION", "SENTRY_DSN", "HASH_SALT",
                "SESSION_COOKIE", "OAUTH_BEARER", "CARD_PIN", "WEBHOOK_SIG", "DOTNET_gcServer_PASSWORD",
                /* under the allow list's DOTNET_*: a camel-cased compound that names its secret last */
                "DOTNET_SmtpPw", "DOTNET_SMTPPW", "DOTNET_DbPin", "LDAPPW",
        };
        static const char *const plain[] = {
                "PATH", "HOME", "PWD", "OLDPWD", "LANG", "TZ", "HOSTNAME", "TMPDIR", "DOTNET_ROOT", "DOTNET_gcServer",
                "ASPNETCORE_URLS", "ASPNETCORE_ENVIRONMENT", "ASPNETCORE_HOSTINGSTARTUPASSEMBLIES",
                "Logging__LogLevel__Default", "KUBERNETES_SERVICE_HOST", "PINGER", "SIGNAL_R_HUB",
        };
        check_names(secrets, N(secrets), true);
        check_names(plain, N(plain), false);
}

/* Untrusted values, long and repetitive: answered, in a pass or a few (a hang fails the suite). */
static void test_long_values(void) {
        static const char *const units[] = { "eyJ", "sk_live_", "a=", "x://", ":@", "AKIA", "aB1", "Bearer",
                                             "\"  :", " \t=", "Pw_" };
        size_t n = 1u << 20;
        char *s = malloc(n + 1);

        check(s);
        if (!s)
                return;
        for (size_t u = 0; u < N(units); u++) {
                size_t m = strlen(units[u]);

                for (size_t i = 0; i < n; i++)
                        s[i] = units[u][i % m];
                s[n] = '\0';
                (void)env_value_looks_secret(s);
                (void)env_name_looks_secret(s);
        }
        free(s);
}

/* ---- the corpora of tests/data/env-secret (README.md there): NAME=VALUE a line ---- */

typedef struct Variable {
        char *name, *value;
} Variable;

/* The variables of tests/data/env-secret/@file, *@ret_n of them; NULL when it cannot be read. */
static Variable *read_corpus(const char *file, size_t *ret_n) {
        char path[512], line[8192];
        Variable *vars = NULL;
        size_t n = 0;
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", ENV_SECRET_DATA_DIR, file);
        f = fopen(path, "re");
        if (!f)
                return NULL;
        while (fgets(line, sizeof(line), f)) {
                char *eq;

                line[strcspn(line, "\n")] = '\0';
                eq = strchr(line, '=');
                if (line[0] == '#' || line[0] == '\0' || !eq)
                        continue;
                *eq = '\0';
                vars = realloc(vars, (n + 1) * sizeof(Variable));
                vars[n++] = (Variable){ .name = strdup(line), .value = strdup(eq + 1) };
        }
        fclose(f);
        *ret_n = n;
        return vars;
}

static void free_corpus(Variable *vars, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(vars[i].name);
                free(vars[i].value);
        }
        free(vars);
}

/* Every secret of the corpus looks secret by its value alone: under a name of the allow list, or env_show's. */
static void test_secret_corpus(void) {
        size_t n = 0, shown = 0;
        Variable *vars = read_corpus("secrets.txt", &n);

        check(vars && n >= 100);
        for (size_t i = 0; i < n; i++)
                if (!env_value_looks_secret(vars[i].value)) {
                        printf("# not taken for a secret: %s=%s\n", vars[i].name, vars[i].value);
                        shown++;
                }
        printf("# secrets: %zu of %zu shown\n", shown, n);
        check(shown == 0);
        free_corpus(vars, n);
}

/* Every harmless value of the corpus is shown under its name of the built-in allow list. */
static void test_harmless_corpus(void) {
        Policy *p = policy_new_builtin();
        PolicyVerdict redacting = { .allowed = true };
        size_t n = 0, shown = 0;
        Variable *vars = read_corpus("harmless.txt", &n);

        check(p && vars && n >= 100);
        for (size_t i = 0; i < n; i++) {
                size_t budget = POLICY_ENV_CHECK_BUDGET;

                if (policy_env_value_hidden(p, &redacting, vars[i].name, vars[i].value, &budget))
                        printf("# withheld: %s=%s\n", vars[i].name, vars[i].value);
                else
                        shown++;
        }
        printf("# harmless: %zu of %zu shown\n", shown, n);
        check(shown == n);
        free_corpus(vars, n);
        policy_unref(p);
}

/* The known price: harmless values the checks withhold, each by its value. */
static void test_harmless_withheld(void) {
        size_t n = 0, withheld = 0;
        Variable *vars = read_corpus("harmless-withheld.txt", &n);

        check(vars && n > 0);
        for (size_t i = 0; i < n; i++) {
                check(policy_env_name_shown_by_default(vars[i].name));
                if (env_value_looks_secret(vars[i].value))
                        withheld++;
                else
                        printf("# shown after all (move it to harmless.txt): %s=%s\n", vars[i].name, vars[i].value);
        }
        printf("# harmless but withheld: %zu of %zu\n", withheld, n);
        check(withheld == n);
        free_corpus(vars, n);
}

int main(void) {
        run_test(test_secret_values);
        run_test(test_harmless_values);
        run_test(test_secret_corpus);
        run_test(test_harmless_corpus);
        run_test(test_harmless_withheld);
        run_test(test_secret_names);
        run_test(test_long_values);
        return tap_finish();
}
