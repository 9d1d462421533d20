/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Does an environment variable look like it carries a secret? Pure: no I/O, no logging, no
 * allocation. The engine (policy_env_value_hidden()) shows a value only when the name is on an
 * allow list and neither the name nor the value looks secret; these are the two "looks secret"
 * halves. Both err on the side of hiding: a harmless value withheld costs a question, a secret
 * shown cannot be taken back. Both read untrusted text (the target chooses its environment), in
 * one pass or a few bounded ones, without recursion.
 */
#pragma once

#include <stdbool.h>

/*
 * Does the name @name look like one of a secret? Words that name secrets anywhere in it,
 * ASCII case ignored (PASSWORD, PASSWD, PASSPHRASE, SECRET, TOKEN, KEY, CRED, AUTH, PRIVATE,
 * CERT, CONNSTR, CONNECTION, DSN, SALT, JWT, BEARER, COOKIE, SIGNING, SAS), a component of it
 * (between '_', '.', '-', ':') that is SIG or SAS or ends in PASS, PW or PIN (PGPASS, DB_PASS,
 * SMTPPW, DOTNET_SmtpPw, DbPin: a camel-cased compound names its secret last), or, in a name
 * of more than one component, ends in PWD (SQL_PWD; PWD and OLDPWD alone are the shell's
 * working directories).
 */
bool env_name_looks_secret(const char *name);

/*
 * Does the value @value look like a secret, or hold one? True for: a key=value pair or
 * "key": (blanks allowed before '=' and ':') whose key ends in password, pwd, passwd, pass,
 * secret, key, token, sig, signature, credential(s), auth, authorization, code, pin, otp, hmac,
 * session, sessionid, sid or ticket (connection strings, SAS tokens, JAAS lines, JSON, query
 * strings); a URL, or host, with a user part (scheme://user@, user:pass@host); a JWT
 * (eyJ... . ...); a PEM block (-----BEGIN); "Bearer " and "Basic " credentials; the shapes of
 * cloud and SaaS keys (AWS AKIA/ASIA ids, Google AIza keys, Stripe sk_/rk_/whsec_, GitHub ghp_
 * and kin, GitLab glpat-, Slack xox?-, SendGrid SG.); random-looking runs of [A-Za-z0-9+=]: 16
 * or more characters with upper and lower case letters and digits, or 32 or more with letters
 * and digits (hex keys); a whole value of 20 or more of [A-Za-z0-9+/=] with upper and lower
 * case letters and digits that is not an absolute path (base64 with its '/'); and (issue 35)
 * a UUID anywhere; eight digits or more in a row, but hex after 0x and round numbers
 * (multiples of 1000 or 1024), or a whole value of ten or more in groups; user:password
 * (a word, ':', six characters or more with a letter and a digit or a sign); "Header: value";
 * a base32 seed (16 or more of [A-Z2-7] with a digit, of [a-z2-7] with two) or four groups of
 * four of one case (seeds and app passwords as apps show them); a token of 16 or more letters
 * and digits that change between the two four times, or in a URL's path or query 7 or more
 * that change twice. Each check is a pass over @value, or a few, whatever it holds.
 */
bool env_value_looks_secret(const char *value);
