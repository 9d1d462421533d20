#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""dsctl env through a running dsagent, against the real .NET runtime: redaction, reveal, denial, audit."""
import json
import os
import subprocess

from harness import (ALICE, DSAGENT, DSCTL, EXIT_DENIED, EXIT_NO_SUCH_PROCESS, EXIT_RUNTIME_UNREACHABLE, MALLORY, PYTHON,
                     SOURCE, SVC, AcceptWatch, Agent, FakeRuntime, Process, Target, as_user, dsctl, make_dir,
                     place_in_unit, request_id_of, run_tests, test, uid_of)

# Values no other test and no part of the environment holds: found anywhere, they leaked.
SECRET = "hunter2-5f1c0d8a"
CONN_SECRET = "Server=db;Password=c0nn-9e41b7"
TOKEN_SECRET = "tok-77a1e3c9"
ENVIRONMENT = {
    "ASPNETCORE_ENVIRONMENT": "Staging",  # on the allow list of harmless configuration: shown
    "DSAGENT_TEST_PLAIN": "hello",  # harmless, but on no allow list: withheld all the same
    "DB_PASSWORD": SECRET,
    "ConnectionStrings__Main": CONN_SECRET,
    "GITHUB_TOKEN": TOKEN_SECRET,
}
SECRETS = (SECRET, CONN_SECRET, TOKEN_SECRET)


def env_policy(commands='"env"', extra=""):
    return (f'[agent]\ndump_dir = "@DUMP_DIR@"\n\n[[rule]]\nname = "ops-env"\nusers = ["{ALICE}"]\n'
            f'commands = [{commands}]\ntargets.users = ["{SVC}"]\n{extra}')


def env_json(agent, user, what):
    r = dsctl(agent, user, "--json", "env", str(what))
    assert r.returncode == 0, r
    return r, json.loads(r.stdout)


def values_of(listing):
    return {v["name"]: v for v in listing}


def assert_not_logged(agent, *values):
    log = open(agent.log_path).read()
    for value in values:
        assert value not in log, f"{value!r} is in the agent's log"


@test
def env_shows_plain_values_and_redacts_secrets():
    target = Target(SVC, environment=ENVIRONMENT)
    agent = Agent(policy=env_policy())

    r, listing = env_json(agent, ALICE, target.pid)
    seen = values_of(listing)
    assert seen["ASPNETCORE_ENVIRONMENT"] == {"name": "ASPNETCORE_ENVIRONMENT", "value": "Staging",
                                              "redacted": False}, seen
    for name in ("DB_PASSWORD", "ConnectionStrings__Main", "GITHUB_TOKEN", "DSAGENT_TEST_PLAIN"):
        assert seen[name] == {"name": name, "value": None, "redacted": True}, seen[name]
    # the runtime's own view: the variables the target was started with, in their order
    assert seen["PATH"]["value"] == "/usr/bin:/bin" and seen["TMPDIR"]["value"] == target.tmpdir
    names = [v["name"] for v in listing]
    assert names.index("DSAGENT_TEST_PLAIN") < names.index("DB_PASSWORD"), names
    for secret in SECRETS:
        assert secret not in r.stdout and secret not in r.stderr

    text = dsctl(agent, ALICE, "env", str(target.pid))
    assert text.returncode == 0, text
    lines = text.stdout.splitlines()
    assert "ASPNETCORE_ENVIRONMENT=Staging" in lines and "DB_PASSWORD=<redacted>" in lines, lines
    assert "DSAGENT_TEST_PLAIN=<redacted>" in lines, lines
    assert "ConnectionStrings__Main=<redacted>" in lines and "GITHUB_TOKEN=<redacted>" in lines, lines
    assert len(lines) == len(listing)
    for secret in SECRETS:
        assert secret not in text.stdout

    # the record lists the names returned, says how many values were withheld, and holds no value
    record = agent.records()[-1]
    assert record["DSAGENT_COMMAND"] == "env" and record["DSAGENT_DECISION"] == "allowed", record
    assert record["DSAGENT_RULE"] == "ops-env"
    assert record["DSAGENT_ENV_NAMES"].split(" ") == names, record["DSAGENT_ENV_NAMES"]
    assert record["DSAGENT_ENV_COUNT"] == str(len(names)) and record["DSAGENT_ENV_REDACTED"] == "4", record
    assert "Staging" not in record["DSAGENT_ENV_NAMES"]
    assert_not_logged(agent, *SECRETS)


@test
def env_reveal_and_the_built_in_grants_show_the_secrets():
    target = Target(SVC, environment=ENVIRONMENT)
    agent = Agent(policy=env_policy(extra="env_reveal = true\n"))

    for user in (ALICE, SVC, None):  # the rule with env_reveal, the process's own user, root
        _, listing = env_json(agent, user, target.pid)
        seen = values_of(listing)
        assert seen["DB_PASSWORD"] == {"name": "DB_PASSWORD", "value": SECRET, "redacted": False}, (user, seen)
        assert seen["ConnectionStrings__Main"]["value"] == CONN_SECRET
        assert seen["GITHUB_TOKEN"]["value"] == TOKEN_SECRET
    records = agent.records()[-3:]
    assert [r["DSAGENT_RULE"] for r in records] == ["ops-env", "owner-access", "root"], records
    assert all(r["DSAGENT_ENV_REDACTED"] == "0" and "DB_PASSWORD" in r["DSAGENT_ENV_NAMES"].split(" ")
               for r in records), records
    # what was shown never reaches the log
    assert_not_logged(agent, *SECRETS)


@test
def env_by_unit_and_its_own_redaction_list():
    target = Target(SVC, environment=dict(ENVIRONMENT, TZ="Europe/Berlin"))
    place_in_unit(target.pid, "dsagent-it-env.service")
    agent = Agent(policy=env_policy().replace("[[rule]]", 'env_redact = ["ASPNETCORE_*"]\n\n[[rule]]', 1))

    _, listing = env_json(agent, ALICE, "dsagent-it-env.service")
    seen = values_of(listing)
    # the policy's list withholds names of the allow list too; what is on no allow list stays
    # withheld although the policy's list does not name it
    assert seen["ASPNETCORE_ENVIRONMENT"]["redacted"] and seen["DB_PASSWORD"]["redacted"], seen
    assert seen["GITHUB_TOKEN"]["redacted"] and seen["DSAGENT_TEST_PLAIN"]["redacted"], seen
    assert seen["TZ"]["value"] == "Europe/Berlin" and seen["PATH"]["value"] == "/usr/bin:/bin", seen
    assert agent.records()[-1]["DSAGENT_TARGET_UNIT"] == "dsagent-it-env.service"


@test
def allow_listed_values_past_the_check_budget_are_withheld_unchecked():
    """The target chooses its environment: hundreds of KiB of allow-listed values, each checked
    for secrets on the event loop, held it for up to 100 ms a request. What one answer checks is bounded
    (POLICY_ENV_CHECK_BUDGET, 32 KiB); harmless values past it are withheld, not vouched for."""
    padding = {f"DOTNET_PAD_{i:02}": ("plain words " * 171)[:2047] for i in range(40)}  # 80 KiB in all
    target = Target(SVC, environment=padding)
    # names of the application's own: allow-listed by the rule (the built-in list names no prefix)
    agent = Agent(policy=env_policy(extra='env_show = ["DOTNET_PAD_*"]\n'))
    _, listing = env_json(agent, ALICE, target.pid)
    seen = values_of(listing)
    shown = [n for n in padding if not seen[n]["redacted"]]
    # the environment's first 32 KiB of them are checked and shown, the rest withheld
    assert 10 <= len(shown) <= 16 and shown == sorted(shown)[:len(shown)], shown
    assert all(seen[n]["value"] == padding[n] for n in shown)
    assert sum(seen[n]["redacted"] for n in padding) == 40 - len(shown)


@test
def a_stranger_gets_no_such_process_and_the_runtime_sees_nothing():
    target = Target(SVC, environment=ENVIRONMENT)
    agent = Agent(policy=env_policy())
    watch = AcceptWatch(target.pid)

    r = dsctl(agent, MALLORY, "env", str(target.pid))
    assert r.returncode == EXIT_NO_SUCH_PROCESS, r
    assert "no such process" in r.stderr and r.stdout == ""
    as_json = dsctl(agent, MALLORY, "--json", "env", str(target.pid))
    assert as_json.returncode == EXIT_NO_SUCH_PROCESS, as_json
    assert json.loads(as_json.stdout)["error"] == "no such process"  # one object, not a listing
    assert watch.accepts() == 0, "a request nobody may make reached the runtime"
    record = agent.record_for(request_id_of(r))
    assert record["DSAGENT_DECISION"] == "denied" and record["DSAGENT_COMMAND"] == "env", record
    assert "DSAGENT_ENV_NAMES" not in record


@test
def a_rule_without_env_denies_and_the_runtime_sees_nothing():
    target = Target(SVC, environment=ENVIRONMENT)
    agent = Agent(policy=env_policy(commands='"info"'))
    watch = AcceptWatch(target.pid)

    r = dsctl(agent, ALICE, "env", str(target.pid))
    assert r.returncode == EXIT_DENIED, r
    assert "permission denied" in r.stderr and "no rule grants you 'env'" in r.stderr, r
    assert r.stdout == ""
    assert watch.accepts() == 0, "a denied request reached the runtime"
    record = agent.record_for(request_id_of(r))
    assert record["DSAGENT_DECISION"] == "denied" and record["DSAGENT_COMMAND"] == "env", record
    assert record["DSAGENT_CLIENT_UID"] == str(uid_of(ALICE)) and record["DSAGENT_TARGET_PID"] == str(target.pid)
    assert "DSAGENT_ENV_NAMES" not in record

    explained = dsctl(agent, ALICE, "explain", str(target.pid), "env")
    assert explained.returncode == EXIT_DENIED and "env on" in explained.stdout, explained
    # control: what the rule grants does reach the runtime
    assert dsctl(agent, ALICE, "info", str(target.pid)).returncode == 0
    assert watch.accepts() == 1


@test
def values_and_names_from_the_target_are_escaped():
    evil = "red\x1b[31mX\u202egnp.exe\x07"
    target = Target(SVC, environment={"DSAGENT_TEST_EVIL": evil, "SPACE NAME": "x", "BACK\\SLASH": "y"})
    agent = Agent()

    text = dsctl(agent, SVC, "env", str(target.pid))
    assert text.returncode == 0, text
    assert "\x1b" not in text.stdout and "\u202e" not in text.stdout and "\x07" not in text.stdout
    assert "DSAGENT_TEST_EVIL=red\\x1b[31mX\\u202egnp.exe\\x07" in text.stdout.splitlines(), text.stdout
    _, listing = env_json(agent, SVC, target.pid)
    assert values_of(listing)["DSAGENT_TEST_EVIL"]["value"] == evil  # JSON carries it exactly, escaped as JSON
    # in the record a space inside a name is \x20 and a backslash \\, so that the names stay apart
    names = agent.records()[-1]["DSAGENT_ENV_NAMES"].split(" ")
    assert r"SPACE\x20NAME" in names and r"BACK\\SLASH" in names, names


@test
def an_environment_too_large_for_one_reply_is_refused_whole():
    agent = Agent()
    # 12000 small variables: the block fits what the agent reads, their frames not one reply;
    # 40000: not even the block
    for count, decoded in ((12000, True), (40000, False)):
        target = Target(SVC, environment={f"DSV{i:05d}": "" for i in range(count)})
        r = dsctl(agent, SVC, "env", str(target.pid))
        assert r.returncode == 1, r
        assert "larger than one reply carries (256 KiB)" in r.stderr, r.stderr
        assert (f"{count + 3} variables, " in r.stderr) == decoded, r.stderr
        assert r.stdout == ""
        assert agent.records()[-1]["DSAGENT_DECISION"] == "failed"
        target.process.stop()

    # a value longer than a protocol string is not cut short either
    long_value = Target(SVC, environment={"DSAGENT_LONG": "v" * 40000})
    r = dsctl(agent, SVC, "--json", "env", str(long_value.pid))
    assert r.returncode == 1, r
    error = json.loads(r.stdout)
    assert "longer than a reply carries (32 KiB)" in error["message"], error


@test
def a_runtime_that_breaks_its_environment_block_is_answered_as_not_answering():
    # 2 s: the stalling runtime is cut at it; the others answer as soon as they are asked (a fake already waiting in
    # accept(), some milliseconds even on a loaded machine), so their own words, not the deadline, end theirs
    agent = Agent("--runtime-timeout", "2")
    for kind, words in (("short", "closed the connection before the whole environment"),
                        ("stall", "did not send the whole environment in time"),
                        ("count", "sent a malformed environment"),
                        # nothing of the agent's memory in the words: the size was never decoded
                        ("huge", "announced an environment larger than any process has (over 4 MiB)")):
        fake = FakeRuntime(f"env:{kind}")
        r = dsctl(agent, SVC, "env", str(fake.pid))
        assert r.returncode == EXIT_RUNTIME_UNREACHABLE, r
        assert words in r.stderr and r.stdout == "", (kind, r.stderr)
        record = agent.records()[-1]
        assert record["DSAGENT_DECISION"] == "failed" and "DSAGENT_ENV_NAMES" not in record, record
        assert fake.received()[16:18] == b"\x04\x02"  # it was asked ProcessEnvironment, nothing else


# ProcessEnvironment through a dsctl port socket, as a stock tool sends it: the tool's
# client reads the reply (u32 size, u16 0) and then that many bytes of block to the end.
IPC_ENV_CLIENT = r'''
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)  # each read, a bound against a hang: the port answers from the runtime within ms
s.connect(sys.argv[1])
s.sendall(b"DOTNET_IPC_V1\0" + struct.pack("<HBBH", 20, 4, 2, 0))
data = b""
while chunk := s.recv(65536):
    data += chunk
size, cset, cid = struct.unpack("<HBB", data[14:18])
assert (cset, cid) == (0xFF, 0x00), data[:24]
announced, = struct.unpack("<I", data[20:24])
block = data[size:]
assert len(block) == announced, (len(block), announced)
count, = struct.unpack("<I", block[:4])
pos, out = 4, []
for _ in range(count):
    units, = struct.unpack("<I", block[pos:pos + 4])
    text = block[pos + 4:pos + 4 + 2 * units].decode("utf-16-le").rstrip("\0")
    pos += 4 + 2 * units
    name, _, value = text.partition("=")
    out.append([name, value])
assert pos == len(block)
print(json.dumps(out))
'''


def open_port(agent, target):
    """dsctl port for ALICE on @target: the path of its socket."""
    directory = make_dir(ALICE, 0o700)
    path = os.path.join(directory, "port.sock")
    port = Process(as_user(ALICE, [DSCTL, "--agent-socket", agent.socket, "port", str(target.pid),
                                   "--port-path", path]))
    assert port.read_line(path) == f"{path},connect"
    return path


def port_environment(path):
    """The environment as a tool reads it through the port at @path: {NAME: VALUE}."""
    r = subprocess.run(as_user(ALICE, [PYTHON, "-c", IPC_ENV_CLIENT, path]), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)  # past the client's own 30 s; ms in truth
    assert r.returncode == 0, r
    return dict(json.loads(r.stdout))


def stock_environment(path, names):
    """The values of @names as the stock client library (GetProcessEnvironment) reads them through the port."""
    built = subprocess.run([os.path.join(SOURCE, "tests/tools/ipc-client/build.sh")], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    assert built.returncode == 0, built.stderr
    # 300 s: a bound against a hang; the client's runtime starts and asks once, seconds even on a loaded machine
    stock = subprocess.run(as_user(ALICE, ["dotnet", built.stdout.strip(), "env", f"{path},connect", *names]),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    assert stock.returncode == 0, stock
    return json.loads(stock.stdout.strip().splitlines()[-1])["values"]


@test
def the_diagnostic_port_redacts_what_env_redacts():
    target = Target(SVC, environment=ENVIRONMENT)
    agent = Agent(policy=env_policy())
    path = open_port(agent, target)

    seen = port_environment(path)
    assert seen["ASPNETCORE_ENVIRONMENT"] == "Staging" and seen["DB_PASSWORD"] == "<redacted>", seen
    assert seen["ConnectionStrings__Main"] == "<redacted>" and seen["GITHUB_TOKEN"] == "<redacted>", seen
    assert seen["DSAGENT_TEST_PLAIN"] == "<redacted>", seen
    record = agent.records()[-1]
    assert record["DSAGENT_IPC_COMMAND"] == "ProcessEnvironment" and record["DSAGENT_COMMAND"] == "env", record
    assert "DB_PASSWORD" in record["DSAGENT_ENV_NAMES"].split(" ") and record["DSAGENT_ENV_REDACTED"] == "4"

    # the block encoded again is one the stock client library reads (GetProcessEnvironment)
    values = stock_environment(path, ["DB_PASSWORD", "ASPNETCORE_ENVIRONMENT"])
    assert values == {"DB_PASSWORD": "<redacted>", "ASPNETCORE_ENVIRONMENT": "Staging"}, values
    assert_not_logged(agent, *SECRETS)

    # with env_reveal the tool gets the block as the runtime sent it
    agent.write_policy(env_policy(extra="env_reveal = true\n"))
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    seen = port_environment(path)
    assert seen["DB_PASSWORD"] == SECRET and seen["ConnectionStrings__Main"] == CONN_SECRET, seen


# A .NET deployment's secrets, as its services and platforms hand them over: (name, value, the
# part of the value that is the secret). Each secret part is found nowhere else: seen anywhere, it
# leaked. Many names are ones no deny list had (issue 26); the values are hidden because the
# names are on no allow list, or, for names that are, because the values look like secrets.
DEPLOYMENT_SECRETS = [
    # SQL Server
    ("ConnectionStrings__DefaultConnection", "Server=tcp:sql-prod.database.windows.net,1433;Initial Catalog=Orders;"
     "User ID=orders_app;Password=Sq1-Pr0d-7731;Encrypt=True;", "Sq1-Pr0d-7731"),
    ("SQLCONNSTR_Legacy", "Data Source=sql01;Initial Catalog=Billing;User Id=sa;PWD=Leg4cy-sa-0192", "Leg4cy-sa-0192"),
    ("MSSQL_SA_PASSWORD", "Sa-Pa55-8812", None),
    ("SQL_PW", "sqlpw-5521", None),
    # Postgres
    ("ConnectionStrings__Postgres", "Host=pg;Port=5432;Database=app;Username=app;Password=pg-Secr3t-44", "pg-Secr3t-44"),
    ("POSTGRES_PASSWORD", "pg-root-9912", None),
    ("PGPASS", "pgpass-3301", None),
    ("PGPASSWORD", "pgpassword-7710", None),
    ("DATABASE_URL", "postgres://app:pgurl-5521@pg:5432/app", "pgurl-5521"),
    ("POSTGRESQLCONNSTR_Reports", "Server=pg2;Database=rep;User Id=rep;Password=rep-pg-4410", "rep-pg-4410"),
    # MySQL
    ("ConnectionStrings__MySql", "server=mysql;uid=shop;pwd=my-shop-8830;database=shop", "my-shop-8830"),
    ("MYSQL_ROOT_PASSWORD", "myroot-1102", None),
    ("DBPASS", "dbpass-6620", None),
    ("MYSQLCONNSTR_localdb", "Database=localdb;Data Source=127.0.0.1:3306;User Id=azure;Password=azmy-7781",
     "azmy-7781"),
    # Redis
    ("Redis__Configuration", "redis-master:6379,password=redis-cfg-2209,ssl=True,abortConnect=False", "redis-cfg-2209"),
    ("REDIS_URL", "redis://:redis-url-4471@cache:6379/0", "redis-url-4471"),
    ("ConnectionStrings__Redis", "cache:6380,password=redis-cs-9931,ssl=True", "redis-cs-9931"),
    ("REDIS_PASSWORD", "redis-pw-1180", None),
    # RabbitMQ
    ("RabbitMQ__Password", "rabbit-pw-6602", None),
    ("RABBITMQ_DEFAULT_PASS", "rabbit-def-3390", None),
    ("ConnectionStrings__RabbitMQ", "amqp://orders:rabbit-cs-7720@rabbitmq:5672/prod", "rabbit-cs-7720"),
    ("RabbitMQ__Uri", "amqps://svc:rabbit-uri-5540@mq.example.net/vhost", "rabbit-uri-5540"),
    # Kafka
    ("Kafka__SaslPassword", "kafka-sasl-8810", None),
    ("KAFKA_SASL_JAAS_CONFIG", 'org.apache.kafka.common.security.plain.PlainLoginModule required username="svc" '
     'password="kafka-jaas-2231";', "kafka-jaas-2231"),
    ("ConnectionStrings__EventHubKafka", "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=kafka;"
     "SharedAccessKey=ehKafkaKey7731abcdEFGH=", "ehKafkaKey7731abcdEFGH="),
    # MongoDB
    ("ConnectionStrings__Mongo", "mongodb+srv://orders:mongo-cs-4410@cluster0.abcde.mongodb.net/orders?retryWrites=true",
     "mongo-cs-4410"),
    ("MongoDB__ConnectionString", "mongodb://admin:mongo-cfg-8832@mongo-0.mongo:27017/?replicaSet=rs0", "mongo-cfg-8832"),
    ("MONGO_INITDB_ROOT_PASSWORD", "mongo-root-6651", None),
    # Azure
    ("AZURE_CLIENT_SECRET", "azcs~8Q~abcdefGHIJKL0123456789mnopqr", None),
    ("AZURE_STORAGE_CONNECTION_STRING", "DefaultEndpointsProtocol=https;AccountName=ordersstore;"
     "AccountKey=c3RvcmFnZWtleS05OTIxYWJjZGVmZ2hpams=;EndpointSuffix=core.windows.net",
     "c3RvcmFnZWtleS05OTIxYWJjZGVmZ2hpams="),
    ("AZURE_STORAGE_SAS", "sv=2022-11-02&ss=b&srt=sco&sp=rl&se=2030-01-01T00:00:00Z&sig=sasSig4410abcd%2Bxyz%3D",
     "sasSig4410abcd"),
    ("AZURE_STORAGE_KEY", "YXp1cmVzdG9yYWdla2V5LTU1MjFhYmNkZWZnaGlqa2w=", None),
    ("ServiceBus__ConnectionString", "Endpoint=sb://orders.servicebus.windows.net/;SharedAccessKeyName="
     "RootManageSharedAccessKey;SharedAccessKey=sbKey6630ABCDefgh+ijkl=", "sbKey6630ABCDefgh+ijkl="),
    ("AzureWebJobsStorage", "DefaultEndpointsProtocol=https;AccountName=funcstore;AccountKey=ZnVuY3N0b3Jla2V5LTc3MjE=",
     "ZnVuY3N0b3Jla2V5LTc3MjE="),
    ("APPLICATIONINSIGHTS_CONNECTION_STRING", "InstrumentationKey=6f1c2d3e-4b5a-6978-8796-a5b4c3d2e1f0;"
     "IngestionEndpoint=https://westeurope-5.in.applicationinsights.azure.com/", "6f1c2d3e-4b5a-6978-8796-a5b4c3d2e1f0"),
    ("KeyVault__ClientSecret", "kvcs-3312-secret", None),
    ("AZURE_CLIENT_CERTIFICATE_PASSWORD", "azcert-pw-5561", None),
    ("ConnectionStrings__Cosmos", "AccountEndpoint=https://orders.documents.azure.com:443/;"
     "AccountKey=Y29zbW9za2V5LTQ0MTA=;", "Y29zbW9za2V5LTQ0MTA="),
    # AWS
    ("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE", None),
    ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", None),
    ("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEBYaDHhL7sessiontoken9911", None),
    ("Aws__SecretAccessKey", "awsSecret/9921+abcdEFGHijklMNOPqrst", None),
    # GCP
    ("GOOGLE_APPLICATION_CREDENTIALS_JSON", '{"type":"service_account","private_key_id":"gcp-kid-4410",'
     '"private_key":"-----BEGIN PRIVATE KEY-----\\nMIIEvgcp4410\\n-----END PRIVATE KEY-----\\n"}', "MIIEvgcp4410"),
    ("GCP_API_KEY", "AIzaSyD-gcpkey4410abcdefghijklmnopqrs", None),
    ("Firebase__ApiKey", "AIzaSyFirebase7731abcdefghijklmnopqrs", None),
    # JWT and OAuth
    ("Jwt__Key", "jwt-signing-key-that-is-long-enough-8831", None),
    ("JWT_SIGNING", "jwtsign-5510", None),
    ("Jwt__Secret", "jwt-secret-2290", None),
    ("Authentication__Bearer__Token", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJvcmRlcnMiLCJpYXQiOjE1MTYyMzkwMjJ9."
     "jwtSig7731", "jwtSig7731"),
    ("Authentication__Google__ClientSecret", "GOCSPX-oauthGoogle4410", None),
    ("OAUTH_CLIENT_SECRET", "oauth-cs-9921", None),
    ("Authentication__Microsoft__ClientSecret", "msft~oauth-6612", None),
    ("IdentityServer__SigningCredential", "idsrv-cred-3390", None),
    # SMTP
    ("Smtp__Password", "smtp-pw-4410", None),
    ("SMTP_PASS", "smtp-pass-8811", None),
    ("SMTP_URL", "smtp://mailer:smtp-url-3310@smtp.example.net:587", "smtp-url-3310"),
    ("SENDGRID_API_KEY", "SG.sendgridkey7731.abcdefghijklmnopqrstuvwxyz0123", None),
    # Stripe
    ("STRIPE_SK", "sk_live_51Hstripe4410abcdEFGH", None),
    ("Stripe__SecretKey", "sk_live_51Hstripe9921ijklMNOP", None),
    ("STRIPE_WEBHOOK_SECRET", "whsec_stripehook7731abcd", None),
    # Sentry, Seq, Elastic
    ("SENTRY_DSN", "https://sentrykey4410abcd@o450000.ingest.sentry.io/5500001", "sentrykey4410abcd"),
    ("Sentry__Dsn", "https://sentrykey9921efgh@o450000.ingest.sentry.io/5500002", "sentrykey9921efgh"),
    ("Seq__ApiKey", "seqapikey3310ABCD", None),
    ("Serilog__WriteTo__0__Args__apiKey", "seqserilog7731EFGH", None),
    ("SEQ_API_KEY", "seqkey-5510", None),
    ("Elastic__Password", "elastic-pw-2290", None),
    ("ElasticApm__SecretToken", "apm-secret-4410", None),
    ("ELASTICSEARCH_URL", "https://elastic:elastic-url-8831@es.example.net:9200", "elastic-url-8831"),
    ("Elastic__ApiKey", "ZWxhc3RpY2FwaWtleTo3NzMxYWJjZA==", None),
    # elsewhere: Kestrel, GitHub, a proxy; and names of the allow list whose values give them away
    ("ASPNETCORE_Kestrel__Certificates__Default__Password", "kestrel-cert-6612", None),
    ("GITHUB_TOKEN", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", None),
    ("HTTPS_PROXY", "http://proxyuser:proxy-pw-7721@proxy:3128", "proxy-pw-7721"),
    ("DOTNET_SEQ_URL", "https://admin:dotnet-seq-3390@seq:5341", "dotnet-seq-3390"),
    ("DOTNET_OTEL_EXPORTER_HEADERS", "Authorization=Basic b3RlbDpvdGVsLXB3LTQ0MTA=", "b3RlbDpvdGVsLXB3LTQ0MTA="),
    ("TZ_DATABASE_TOKEN", "tzdb-token-6613", None),
]

# Harmless configuration of the same deployment, shown to a grantee without env_reveal.
DEPLOYMENT_SHOWN = {
    "ASPNETCORE_URLS": "http://+:8080",
    "ASPNETCORE_ENVIRONMENT": "Production",
    "ASPNETCORE_HTTP_PORTS": "8080",
    "DOTNET_RUNNING_IN_CONTAINER": "true",
    "DOTNET_NOLOGO": "1",
    "DOTNET_VERSION": "8.0.11",
    "ASPNET_VERSION": "8.0.11",
    "LANG": "C.UTF-8",
    "TZ": "Europe/Berlin",
    "HOSTNAME": "orders-api-7d9f8b6c5d-x2x7k",
    "KUBERNETES_SERVICE_HOST": "10.96.0.1",
    "KUBERNETES_SERVICE_PORT": "443",
    "APP_UID": "1654",
}

# Harmless configuration on no built-in allow list: shown only where a rule's env_show names it.
DEPLOYMENT_SECTIONS = {
    "Logging__LogLevel__Default": "Information",
    "Kafka__BootstrapServers": "kafka-0.kafka:9092,kafka-1.kafka:9092",
    "Seq__ServerUrl": "http://seq:5341",
    "Redis__InstanceName": "orders",
}


def secret_parts():
    return [part or value for _, value, part in DEPLOYMENT_SECRETS]


def assert_no_secret_in(text, where):
    for part in secret_parts():
        assert part not in text, f"{part!r} is in {where}"


def deployment():
    assert len(DEPLOYMENT_SECRETS) >= 60 and len({n for n, _, _ in DEPLOYMENT_SECRETS}) == len(DEPLOYMENT_SECRETS)
    environment = dict(DEPLOYMENT_SHOWN, **DEPLOYMENT_SECTIONS)
    environment.update({name: value for name, value, _ in DEPLOYMENT_SECRETS})
    return Target(SVC, environment=environment)


def assert_deployment_seen(agent, target, shown, withheld):
    """dsctl env (JSON and text), a tool through dsctl port, and the stock client library all show
    exactly @shown ({NAME: VALUE}) and withhold @withheld (names); no secret is anywhere."""
    r, listing = env_json(agent, ALICE, target.pid)
    seen = values_of(listing)
    assert_no_secret_in(r.stdout, "dsctl env --json")
    for name in withheld:
        assert seen[name] == {"name": name, "value": None, "redacted": True}, seen[name]
    for name, value in shown.items():
        assert seen[name] == {"name": name, "value": value, "redacted": False}, seen[name]
    text = dsctl(agent, ALICE, "env", str(target.pid))
    assert text.returncode == 0, text
    assert_no_secret_in(text.stdout, "dsctl env")
    lines = set(text.stdout.splitlines())
    assert all(f"{name}=<redacted>" in lines for name in withheld), lines
    assert all(f"{name}={value}" in lines for name, value in shown.items()), lines
    record = agent.records()[-1]
    assert int(record["DSAGENT_ENV_REDACTED"]) == sum(v["redacted"] for v in listing) >= len(withheld), record

    path = open_port(agent, target)
    through_port = port_environment(path)
    assert_no_secret_in(json.dumps(through_port), "the tool's environment")
    assert all(through_port[name] == "<redacted>" for name in withheld), through_port
    assert all(through_port[name] == value for name, value in shown.items()), through_port
    stock = stock_environment(path, [*withheld, *shown])
    assert_no_secret_in(json.dumps(stock), "GetProcessEnvironment")
    assert stock == dict({name: "<redacted>" for name in withheld}, **shown), stock
    assert_not_logged(agent, *secret_parts())


@test
def a_deployments_secrets_are_withheld_and_its_harmless_configuration_shown():
    target = deployment()
    agent = Agent(policy=env_policy())
    secrets = [name for name, _, _ in DEPLOYMENT_SECRETS]
    shown = dict(DEPLOYMENT_SHOWN, PATH="/usr/bin:/bin", TMPDIR=target.tmpdir)
    assert_deployment_seen(agent, target, shown, secrets + list(DEPLOYMENT_SECTIONS))

    # control: the values are really there, and env_reveal shows every one
    agent.write_policy(env_policy(extra="env_reveal = true\n"))
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    _, listing = env_json(agent, ALICE, target.pid)
    seen = values_of(listing)
    assert all(seen[name]["value"] == value for name, value, _ in DEPLOYMENT_SECRETS), seen


@test
def env_show_widens_the_allow_list_but_not_past_what_looks_secret():
    target = deployment()
    # the sections of the secrets too: Redis__Configuration, Kafka__SaslPassword, Seq__ApiKey stay
    # withheld, by their values and by their names
    agent = Agent(policy=env_policy(extra='env_show = ["Logging__*", "Kafka__*", "Seq__*", "Redis__*", "SQL_*", '
                                          '"AZURE_STORAGE_*", "STRIPE_*"]\n'))
    secrets = [name for name, _, _ in DEPLOYMENT_SECRETS]
    shown = dict(DEPLOYMENT_SHOWN, **DEPLOYMENT_SECTIONS)
    assert_deployment_seen(agent, target, shown, secrets)

    # the schema checks the key, at file:line:column, and a broken policy is not loaded
    agent.write_policy(env_policy(extra='env_show = ["Logging=*"]\n'))
    checked = subprocess.run([DSAGENT, "--check-policy", agent.policy_path], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert checked.returncode != 0, checked
    assert f"{agent.policy_path}:9:13: bad pattern \"Logging=*\" in 'env_show'" in checked.stderr, checked.stderr


# Issue 35: what applications put under the runtime's prefixes, which the allow list once covered
# (DOTNET_*): an SDK key, a bare UUID API key, an x-api-key header, a login, a passcode, a base32
# one-time-password seed, a webhook URL with its token. Each value is found nowhere else.
APP_CHOSEN = {
    "DOTNET_LaunchDarkly_Sdk": "sdk-9c3e51d2-7a4b-4f08-b6d1-2e8f0a1c3b57",
    "DOTNET_Segment_WriteId": "41d7e0b2-c5a9-4e36-8f12-9b0d3a6c7e84",
    "DOTNET_Upstream_Headers": "x-api-key: 5e2b8f14-0d3c-4a97-b16e-c8a4f2d09b31",
    "DOTNET_Login": "orders:Winter2025!",
    "DOTNET_Passcode": "73920481",
    "DOTNET_Otp_Seed": "KRSXG5CTMVRXEZLU",
    "DOTNET_Alerts_Webhook": "https://hooks.slack.com/services/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",
    "ASPNETCORE_Upstream_Login": "svc_backup:Backup#8842",
    "COMPlus_Deploy_Hook": "https://api.netlify.com/build_hooks/6b1f9e3a7c2d4e8f0a5b9c1d",
}
# runtime knobs of the list, with values that leave the app running as it should
KNOBS_SHOWN = {"DOTNET_gcServer": "0", "DOTNET_GCHeapHardLimit": "0x10000000", "DOTNET_TieredCompilation": "1",
               "COMPlus_gcConcurrent": "1", "DOTNET_SYSTEM_GLOBALIZATION_INVARIANT": "1"}


def assert_env_seen(agent, pid, shown, withheld, leaked):
    """dsctl env by ALICE, as JSON and as text: @shown {NAME: VALUE} shown, @withheld names withheld, none of
    the strings of @leaked anywhere in its output or the agent's log."""
    r, listing = env_json(agent, ALICE, pid)
    seen = values_of(listing)
    text = dsctl(agent, ALICE, "env", str(pid))
    assert text.returncode == 0, text
    for value in leaked:
        assert value not in r.stdout and value not in text.stdout, f"{value!r} was shown"
    assert_not_logged(agent, *leaked)
    assert [n for n in withheld if not seen[n]["redacted"]] == [], [seen[n] for n in withheld]
    wrong = {n: seen[n] for n, v in shown.items() if seen[n] != {"name": n, "value": v, "redacted": False}}
    assert wrong == {}, wrong
    lines = set(text.stdout.splitlines())
    assert all(f"{name}=<redacted>" in lines for name in withheld)
    assert all(f"{name}={value}" in lines for name, value in shown.items())


@test
def names_applications_choose_under_the_runtimes_prefixes_are_withheld():
    """Before the fix DOTNET_* and COMPlus_* were on the allow list as prefixes, and a grantee without
    env_reveal read every one of these values (none looked secret to the checks then). The list now names
    the runtime's knobs one by one: these names are on no list, and their values look secret besides."""
    target = Target(SVC, environment=dict(APP_CHOSEN, **KNOBS_SHOWN))
    agent = Agent(policy=env_policy())
    assert_env_seen(agent, target.pid, KNOBS_SHOWN, list(APP_CHOSEN), list(APP_CHOSEN.values()))
    # and by its value alone: under a name a rule's env_show adds to the list, each is still withheld
    agent.write_policy(env_policy(extra='env_show = ["DOTNET_*", "ASPNETCORE_*", "COMPlus_*"]\n'))
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    assert_env_seen(agent, target.pid, KNOBS_SHOWN, list(APP_CHOSEN), list(APP_CHOSEN.values()))
    # control: the values are there, and env_reveal shows them
    agent.write_policy(env_policy(extra="env_reveal = true\n"))
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    _, listing = env_json(agent, ALICE, target.pid)
    assert {n: values_of(listing)[n]["value"] for n in APP_CHOSEN} == APP_CHOSEN


def corpus(file):
    """(NAME, VALUE) of tests/data/env-secret/@file (README.md there)."""
    out = []
    for line in open(os.path.join(SOURCE, "tests/data/env-secret", file)):
        line = line.rstrip("\n")
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            out.append((name, value))
    return out


@test
def no_secret_of_the_corpus_is_shown_and_every_harmless_value_is():
    """The real runtime started with the corpus of secrets (tests/data/env-secret/secrets.txt, issue 35's
    shapes and the keys and tokens of common services) and of harmless configuration (harmless.txt), each
    under a name the rule's env_show adds to the allow list, so that only the value checks stand between
    them and a grantee without env_reveal: no secret is shown, every harmless value is. Before the fix 62
    of the 133 secrets were shown."""
    secrets, harmless = corpus("secrets.txt"), corpus("harmless.txt")
    assert len(secrets) >= 100 and len(harmless) >= 100
    environment = {f"LEAKTEST_{i:03}": value for i, (_, value) in enumerate(secrets)}
    environment.update({f"PLAINTEST_{i:03}": value for i, (_, value) in enumerate(harmless)})
    target = Target(SVC, environment=environment)
    agent = Agent(policy=env_policy(extra='env_show = ["LEAKTEST_*", "PLAINTEST_*"]\n'))
    _, listing = env_json(agent, ALICE, target.pid)
    seen = values_of(listing)
    shown_secrets = [(name, value) for i, (name, value) in enumerate(secrets)
                     if not seen[f"LEAKTEST_{i:03}"]["redacted"]]
    shown_plain = sum(not seen[f"PLAINTEST_{i:03}"]["redacted"] for i in range(len(harmless)))
    print(f"# secrets shown: {len(shown_secrets)} of {len(secrets)}; harmless shown: {shown_plain} of {len(harmless)}")
    assert shown_secrets == [], shown_secrets
    assert shown_plain == len(harmless), [harmless[i] for i in range(len(harmless))
                                          if seen[f"PLAINTEST_{i:03}"]["redacted"]]
    plain = {f"PLAINTEST_{i:03}": value for i, (_, value) in enumerate(harmless)}
    assert_env_seen(agent, target.pid, plain, [f"LEAKTEST_{i:03}" for i in range(len(secrets))],
                    [value for _, value in secrets])


if __name__ == "__main__":
    run_tests()
