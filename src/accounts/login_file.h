/* login_file.h: the files that carry logins in and out of switchyard:
 * Codex auth.json, switchyard's own export, CodexManager and sub2api
 * exports, a JSON array or a stream of concatenated login objects
 * (docs/accounts.md lists the shapes). Reading checks every entry and says
 * which entry and which field is wrong; writing leaves tokens out unless
 * asked. */
#ifndef SY_LOGIN_FILE_H
#define SY_LOGIN_FILE_H
#include <stddef.h>
#include <stdint.h>
#include "base/sbuf.h"
#include "store/store.h"

typedef struct login_entry {
    char label[160];       /* "FILE entry N (NAME)": for error messages */
    char *name;            /* NULL: derived from the e-mail or account id */
    account_kind kind;
    char *base_url;        /* NULL: the kind's default */
    char *access_token, *refresh_token, *id_token; /* secrets */
    char *account_id, *email, *plan_type, *model_map;
    char *models;          /* the operator's --models list ("a,b"), normalized; NULL none */
    int64_t expires_at, last_refresh_at;
    int has_sort, sort;
    int max_concurrency;   /* -1: the kind's default */
    /* the account's settings as switchyard's export writes them (0 / NULL
     * when the entry has none: the defaults of `account add`) */
    int weight;            /* 0: the default (1) */
    int max_rpm, max_tpm;  /* 0: none */
    double budget_usd;     /* 0: none */
    char budget_period[16]; /* "" when not given: "month" */
    int context_fallback;
    int disabled;          /* "enabled": false */
    int prefill;           /* "prefill": auto (0), yes or no (store.h, account_prefill) */
    int speaks;            /* "speaks": auto (0), responses, chat or both (store.h, account_speaks) */
} login_entry;

typedef struct login_list {
    login_entry *v;
    size_t n, cap;
} login_list;

/* Appends the logins of one file to out. Returns 0, or -1 with err naming
 * the file, entry and field (nothing is appended then). */
int login_file_read(const char *path, login_list *out, char *err, size_t errlen);
/* Same for text already in memory; name labels the entries. */
int login_file_parse(const char *name, const char *text, size_t len, login_list *out, char *err, size_t errlen);
void login_list_free(login_list *l); /* wipes the secrets */

/* Fills an account_new from an entry (pointers into e). The name is e's,
 * else derived into namebuf. */
void login_entry_to_account(const login_entry *e, account_new *an, char *namebuf, size_t n);
/* The login fields of an entry beside its access token (pointers into e),
 * for adding the login or updating an account with it. */
void login_entry_login(const login_entry *e, account_login *out);

/* Writes accounts as a switchyard export (format "switchyard.accounts",
 * version 1) that login_file_read takes back: every setting of `account
 * add` (kind, base URL, sort, enabled, max concurrency, weight, rpm/tpm
 * limits, budget and its period, context fallback, model map, models) and
 * the login's fields. Tokens only with_secrets. */
void login_file_write(sbuf *out, const account *a, size_t n, int with_secrets);

/* Unix seconds of an RFC 3339 time ("2025-05-01T10:00:00.5Z"); 0 if not one. */
int64_t login_time_parse(const char *s);

#endif
