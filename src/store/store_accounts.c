/* store_accounts.c: the accounts table (see store.h): account kinds,
 * adding and loading accounts, enabling, resetting and removing them by
 * name, and changing them in place (`account update`) or importing many
 * logins at once (`account import`), each in one transaction, so a bad
 * entry leaves the database as it was. Tokens are never put into error
 * messages. */
#include "store/store_internal.h"
#include "base/budget.h"
#include "base/sbuf.h"
#include "base/text.h"
#include "base/url.h"
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int store_txn(sqlite3 *db, const char *sql) { return sqlite3_exec(db, sql, NULL, NULL, NULL); }

static int store_txn_end(sqlite3 *db, int rc)
{
    if (rc == SQLITE_OK)
        rc = store_txn(db, "COMMIT");
    if (rc != SQLITE_OK && !sqlite3_get_autocommit(db))
        store_txn(db, "ROLLBACK");
    return rc;
}

/* ---------- kinds ---------- */

const char *account_kind_name(account_kind k)
{
    switch (k) {
    case ACCOUNT_API_KEY: return "api_key";
    case ACCOUNT_CHATGPT: return "chatgpt";
    case ACCOUNT_AGGREGATE: return "aggregate";
    case ACCOUNT_ANTHROPIC: return "anthropic";
    }
    return "api_key";
}

int account_kind_parse(const char *s, account_kind *out)
{
    static const account_kind kinds[] = {ACCOUNT_API_KEY, ACCOUNT_CHATGPT, ACCOUNT_AGGREGATE, ACCOUNT_ANTHROPIC};
    for (size_t i = 0; s && i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(s, account_kind_name(kinds[i])) == 0) {
            *out = kinds[i];
            return 0;
        }
    }
    return -1;
}

const char *account_prefill_name(int p)
{
    static const char *const names[] = {"auto", "yes", "no", "refused"};
    return p >= PREFILL_AUTO && p <= PREFILL_REFUSED ? names[p] : "auto";
}

int account_prefill_parse(const char *s, int *out)
{
    for (int p = PREFILL_AUTO; s && p <= PREFILL_REFUSED; p++)
        if (strcmp(s, account_prefill_name(p)) == 0) {
            *out = p;
            return 0;
        }
    return -1;
}

const char *account_speaks_name(int s)
{
    static const char *const names[] = {"auto", "responses", "chat", "both"};
    return s >= SPEAKS_AUTO && s <= SPEAKS_BOTH ? names[s] : "auto";
}

int account_speaks_parse(const char *s, int *out)
{
    if (s && (strcmp(s, "responses,chat") == 0 || strcmp(s, "chat,responses") == 0)) {
        *out = SPEAKS_BOTH;
        return 0;
    }
    for (int v = SPEAKS_AUTO; s && v <= SPEAKS_BOTH; v++)
        if (strcmp(s, account_speaks_name(v)) == 0) {
            *out = v;
            return 0;
        }
    return -1;
}

unsigned account_dialects(const account *a, const account_state *st)
{
    if (a->kind == ACCOUNT_ANTHROPIC) /* its one API; --speaks is about the OpenAI two */
        return ACCOUNT_DIALECT_MESSAGES;
    unsigned d = a->speaks == SPEAKS_RESPONSES ? ACCOUNT_DIALECT_RESPONSES
                 : a->speaks == SPEAKS_CHAT    ? ACCOUNT_DIALECT_CHAT
                 : a->speaks == SPEAKS_BOTH    ? ACCOUNT_DIALECT_RESPONSES | ACCOUNT_DIALECT_CHAT
                 : a->kind == ACCOUNT_CHATGPT  ? ACCOUNT_DIALECT_RESPONSES
                                               : ACCOUNT_DIALECT_RESPONSES | ACCOUNT_DIALECT_CHAT;
    unsigned left = st ? d & ~(unsigned)st->dialects_refused : d;
    return left ? left : d;
}

/* ---------- add and load ---------- */

/* Strict check with sqlite's JSON1: model_map must be a JSON object. */
int store_json_is_object(sqlite3 *db, const char *text)
{
    sqlite3_stmt *st = NULL;
    int ok = 0;
    if (sqlite3_prepare_v2(db, "SELECT CASE WHEN json_valid(?1) THEN json_type(?1) = 'object' ELSE 0 END",
                           -1, &st, NULL) != SQLITE_OK)
        return 1; /* sqlite built without JSON: the CLI's shape check has to do */
    sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW)
        ok = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return ok;
}

/* The texts an account is made of become headers (the token, the ChatGPT
 * account id), names, log and terminal lines: a control character (or
 * invalid UTF-8) in one is refused here, whichever way it came in (the
 * command line, an import, an update). A token may hold no whitespace
 * either. -1 with err naming the field. */
static int store_account_texts_check(const char *name, const char *token, const char *base_url,
                                     const char *chatgpt_account_id, const account_login *l, char *err, size_t errlen)
{
    const struct {
        const char *what, *v;
    } f[] = {{"account name", name},           {"base_url", base_url},
             {"chatgpt_account_id", chatgpt_account_id}, {"email", l->email},
             {"plan_type", l->plan_type},       {"refresh_token", l->refresh_token},
             {"id_token", l->id_token}};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        const char *why = text_check_str(f[i].v);
        if (why) {
            sbuf_fmt_into(err, errlen, "%s %s", f[i].what, why);
            return -1;
        }
    }
    for (const char *p = token; p && *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f) {
            sbuf_fmt_into(err, errlen, "the token contains whitespace or a control character");
            return -1;
        }
    return 0;
}

/* The base URL's shape (base/url.h), one rule for add, update and import. */
static int store_base_url_check(const char *what, const char *url, char *err, size_t errlen)
{
    char why[URL_BASE_MAX + 160];
    if (url_base_check(url, why, sizeof why) == 0)
        return 0;
    store_errf(err, errlen, "%s %s", what, why);
    return -1;
}

int store_account_check(sqlite3 *db, const account_new *a, char *err, size_t errlen)
{
    if (store_account_texts_check(a->name, a->token, a->base_url, a->chatgpt_account_id, &a->login, err, errlen) != 0)
        return -1;
    if (!a->name || !*a->name)
        store_errf(err, errlen, "account name is required");
    else if (!a->base_url || !*a->base_url)
        store_errf(err, errlen, "account base_url is required");
    else if (store_base_url_check("account base_url", a->base_url, err, errlen) != 0)
        return -1;
    else if (a->budget_period && *a->budget_period && budget_period_valid(a->budget_period) != 0)
        store_errf(err, errlen, "budget_period must be month or <N>d");
    else if (!a->token || !*a->token)
        store_errf(err, errlen, "account token is required");
    else if ((unsigned)a->kind > ACCOUNT_ANTHROPIC)
        store_errf(err, errlen, "unknown account kind");
    else if (a->max_concurrency < -1)
        store_errf(err, errlen, "max_concurrency must be >= 0");
    else if (a->weight < 0 || a->max_rpm < 0 || a->max_tpm < 0 || !(a->budget_usd >= 0))
        store_errf(err, errlen, "weight, max_rpm, max_tpm and budget must be >= 0");
    else if (a->model_map && !store_json_is_object(db, a->model_map))
        store_errf(err, errlen, "model_map must be a JSON object");
    else
        return 0;
    return -1;
}

static int store_max_concurrency(const account_new *a)
{
    if (a->max_concurrency >= 0)
        return a->max_concurrency;
    return a->kind == ACCOUNT_CHATGPT ? 1 : 0; /* one OAuth session per account by default */
}

static void store_account_bind(sqlite3_stmt *st, const account_new *a)
{
    store_bind_login(st, 11, &a->login);
    int64_t now = store_now();
    sqlite3_bind_text(st, 1, a->name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, account_kind_name(a->kind), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, a->base_url, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 4, a->token, -1, SQLITE_TRANSIENT);
    store_bind_text(st, 5, a->chatgpt_account_id && *a->chatgpt_account_id ? a->chatgpt_account_id : NULL);
    store_bind_text(st, 6, a->model_map && *a->model_map ? a->model_map : NULL);
    sqlite3_bind_int(st, 7, a->sort);
    sqlite3_bind_int(st, 8, store_max_concurrency(a));
    sqlite3_bind_int64(st, 9, now);
    sqlite3_bind_int64(st, 10, now);
    sqlite3_bind_int(st, 17, a->context_fallback ? 1 : 0);
    sqlite3_bind_int(st, 18, a->weight > 0 ? a->weight : 1);
    sqlite3_bind_int(st, 19, a->max_rpm);
    sqlite3_bind_int(st, 20, a->max_tpm);
    sqlite3_bind_double(st, 21, a->budget_usd);
    sqlite3_bind_text(st, 22, a->budget_period && *a->budget_period ? a->budget_period : "month", -1, SQLITE_STATIC);
    store_bind_text(st, 23, a->models && *a->models ? a->models : NULL);
    sqlite3_bind_int(st, 24, a->disabled ? 0 : 1);
    sqlite3_bind_text(st, 25, account_prefill_name(a->prefill), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 26, account_speaks_name(a->speaks), -1, SQLITE_STATIC);
}

/* Inserts one account on db (no busy handling, no transaction of its own). */
int store_account_insert(sqlite3 *db, const account_new *a)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
        "INSERT INTO accounts(name, kind, base_url, token, chatgpt_account_id, model_map, sort,"
        " max_concurrency, created_at, updated_at, refresh_token, id_token, email, plan_type,"
        " token_expires_at, last_refresh_at, context_fallback, weight, max_rpm, max_tpm, budget_usd, budget_period,"
        " models, enabled, prefill, speaks) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        -1, &st, NULL);
    if (rc == SQLITE_OK) {
        store_account_bind(st, a);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_extended_errcode(db);
    }
    sqlite3_finalize(st);
    return rc;
}

int store_account_add(store *s, const account_new *a, int64_t *id_out, char *err, size_t errlen)
{
    if (store_account_check(s->db, a, err, errlen) != 0)
        return -1;
    store_sync_write_begin(s);
    int rc = store_account_insert(s->db, a);
    store_sync_write_end(s);
    if (rc == SQLITE_CONSTRAINT_UNIQUE)
        store_errf(err, errlen, "an account named '%s' already exists", a->name);
    else if (rc != SQLITE_OK)
        store_errf(err, errlen, "cannot add account: %s", sqlite3_errmsg(s->db));
    else if (id_out)
        *id_out = sqlite3_last_insert_rowid(s->db);
    return rc == SQLITE_OK ? 0 : -1;
}

static void store_account_row(sqlite3_stmt *st, account *a)
{
    a->id = sqlite3_column_int64(st, 0);
    a->name = store_col_dup(st, 1);
    const char *kind = (const char *)sqlite3_column_text(st, 2);
    if (account_kind_parse(kind, &a->kind) != 0)
        a->kind = ACCOUNT_API_KEY; /* the CHECK constraint makes this unreachable */
    a->base_url = store_col_dup(st, 3);
    a->token = store_col_dup(st, 4);
    a->chatgpt_account_id = store_col_dup(st, 5);
    a->model_map = store_col_dup(st, 6);
    a->sort = sqlite3_column_int(st, 7);
    a->enabled = sqlite3_column_int(st, 8);
    a->max_concurrency = sqlite3_column_int(st, 9);
    a->created_at = sqlite3_column_int64(st, 10);
    a->updated_at = sqlite3_column_int64(st, 11);
    a->context_fallback = sqlite3_column_int(st, 12);
    a->reset_gen = sqlite3_column_int64(st, 13);
    a->refresh_token = store_col_dup(st, 14);
    a->id_token = store_col_dup(st, 15);
    a->email = store_col_dup(st, 16);
    a->plan_type = store_col_dup(st, 17);
    a->token_expires_at = sqlite3_column_int64(st, 18);
    a->last_refresh_at = sqlite3_column_int64(st, 19);
    a->login_error = store_col_dup(st, 20);
    a->weight = sqlite3_column_int(st, 21);
    a->max_rpm = sqlite3_column_int(st, 22);
    a->max_tpm = sqlite3_column_int(st, 23);
    a->budget_usd = sqlite3_column_double(st, 24);
    store_col_copy(st, 25, a->budget_period, sizeof a->budget_period);
    a->hold = store_col_dup(st, 26);
    a->hold_detail = a->hold ? store_col_dup(st, 27) : NULL;
    a->hold_since = a->hold ? sqlite3_column_int64(st, 28) : 0;
    a->models = store_col_dup(st, 29);
    if (account_prefill_parse((const char *)sqlite3_column_text(st, 30), &a->prefill) != 0)
        a->prefill = PREFILL_AUTO; /* the CHECK constraint makes this unreachable */
    if (account_speaks_parse((const char *)sqlite3_column_text(st, 31), &a->speaks) != 0)
        a->speaks = SPEAKS_AUTO; /* the CHECK constraint makes this unreachable */
}

static void store_account_row_slot(sqlite3_stmt *st, void *slot) { store_account_row(st, slot); }

int store_accounts_load(store *s, account **out, size_t *n)
{
    void *rows;
    int rc = store_rows_load(s,
        "SELECT id, name, kind, base_url, token, chatgpt_account_id, model_map, sort, enabled,"
        " max_concurrency, created_at, updated_at, context_fallback, reset_gen, refresh_token, id_token,"
        " email, plan_type, token_expires_at, last_refresh_at, login_error, weight, max_rpm, max_tpm, budget_usd,"
        " budget_period, hold, hold_detail, hold_since, models, prefill, speaks FROM accounts"
        " ORDER BY sort ASC, updated_at DESC, id ASC",
        sizeof(account), store_account_row_slot, &rows, n);
    if (rc != 0) {
        store_accounts_free(rows, *n);
        rows = NULL;
        *n = 0;
    }
    *out = rows;
    return rc;
}

void store_account_clear(account *a)
{
    free(a->name);
    free(a->base_url);
    sbuf_secret_free(a->token);
    sbuf_secret_free(a->refresh_token);
    sbuf_secret_free(a->id_token);
    free(a->chatgpt_account_id);
    free(a->model_map);
    free(a->email);
    free(a->plan_type);
    free(a->login_error);
    free(a->hold);
    free(a->hold_detail);
    free(a->models);
    memset(a, 0, sizeof *a);
}

void store_accounts_free(account *a, size_t n)
{
    for (size_t i = 0; a && i < n; i++)
        store_account_clear(&a[i]);
    free(a);
}

/* ---------- by name (enable, reset, remove) ---------- */

int store_account_set_enabled(store *s, const char *name, int enabled, char *err, size_t errlen)
{
    int64_t v = enabled ? 1 : 0;
    int changes = 0;
    if (store_name_write_sync(s, "UPDATE accounts SET enabled = ?2 WHERE name = ?1", name, &v, &changes,
                              enabled ? "enable account" : "disable account", err, errlen) != 0)
        return -1;
    if (changes == 0) {
        store_errf(err, errlen, "no account named '%s'", name);
        return -1;
    }
    return 0;
}

/* Runs the name-keyed statements sql[0..n) in one IMMEDIATE transaction;
 * *changes gets the rows the statement at index `counted` changed. */
static int store_name_txn(sqlite3 *db, const char *name, const char *const *sql, size_t n, size_t counted,
                          int *changes)
{
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
        int c = 0;
        rc = store_name_write(db, sql[i], name, NULL, &c);
        if (i == counted)
            *changes = c;
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK && !sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* store_name_txn from the CLI (sync write); -1 with err when it failed or
 * no account has that name. */
static int store_account_txn_sync(store *s, const char *name, const char *const *sql, size_t n, size_t counted,
                                  const char *what, char *err, size_t errlen)
{
    if (!name || !*name) {
        store_errf(err, errlen, "account name is required");
        return -1;
    }
    int changes = 0;
    store_sync_write_begin(s);
    int rc = store_name_txn(s->db, name, sql, n, counted, &changes);
    store_sync_write_end(s);
    if (rc != SQLITE_OK)
        store_errf(err, errlen, "cannot %s: %s", what, sqlite3_errmsg(s->db));
    else if (changes == 0)
        store_errf(err, errlen, "no account named '%s'", name);
    return rc == SQLITE_OK && changes ? 0 : -1;
}

/* Cooldown, ladder, health and hold back to a fresh account's; reset_gen
 * tells a running gateway (an accounts UPDATE bumps config_version) and
 * voids a hold it has not written yet (store_writer_put_hold). */
int store_account_reset(store *s, const char *name, char *err, size_t errlen)
{
    static const char *const sql[] = {
        "UPDATE accounts SET reset_gen = reset_gen + 1, " STORE_SQL_UNHOLD ", " STORE_SQL_PREFILL_RELEARN
        " WHERE name = ?1",
        "UPDATE account_state SET cooldown_until = 0, ladder_step = 0, last_429_at = 0, last_error = '',"
        " success_ema = 1, family_cooldowns = '', dialects_refused = 0"
        " WHERE account_id IN (SELECT id FROM accounts WHERE name = ?1)",
    };
    return store_account_txn_sync(s, name, sql, 2, 0, "reset account", err, errlen);
}

/* Owners first (no foreign key), then the account: its state cascades and
 * platform_keys.preferred_account_id is set to NULL by the schema. */
int store_account_remove(store *s, const char *name, char *err, size_t errlen)
{
    static const char *const sql[] = {
        "DELETE FROM response_owners WHERE account_id IN (SELECT id FROM accounts WHERE name = ?1)",
        "DELETE FROM accounts WHERE name = ?1",
    };
    return store_account_txn_sync(s, name, sql, 2, 1, "remove account", err, errlen);
}

/* ---------- update ---------- */

static int store_patch_check(store *s, const account_patch *p, char *err, size_t errlen)
{
    if (store_account_texts_check(NULL, p->token, p->base_url, p->chatgpt_account_id, &p->login, err, errlen) != 0)
        return -1;
    if (p->base_url && store_base_url_check("base_url", p->base_url, err, errlen) != 0)
        return -1;
    if (p->token && !*p->token)
        sbuf_fmt_into(err, errlen, "the token is empty");
    else if (p->has_max_concurrency && p->max_concurrency < 0)
        sbuf_fmt_into(err, errlen, "max_concurrency must be >= 0");
    else if (p->model_map && *p->model_map && !store_json_is_object(store_sqlite(s), p->model_map))
        sbuf_fmt_into(err, errlen, "model_map must be a JSON object");
    else if ((p->has_weight && p->weight < 0) || (p->has_max_rpm && p->max_rpm < 0) ||
             (p->has_max_tpm && p->max_tpm < 0) || (p->has_budget && !(p->budget_usd >= 0)))
        sbuf_fmt_into(err, errlen, "weight, max_rpm, max_tpm and budget must be >= 0");
    else if (p->budget_period && budget_period_valid(p->budget_period) != 0)
        sbuf_fmt_into(err, errlen, "budget_period must be month or <N>d");
    else
        return 0;
    return -1;
}

/* One UPDATE built from the fields present: ?1 is the name, values follow. */
int store_account_update(store *s, const char *name, const account_patch *p, char *err, size_t errlen)
{
    if (!name || !*name) {
        sbuf_fmt_into(err, errlen, "account name is required");
        return -1;
    }
    if (store_patch_check(s, p, err, errlen) != 0)
        return -1;
    enum { TEXT, INT, REAL };
    struct { const char *col; const char *text; double num; int type, set; } f[] = {
        {"token", p->token, 0, TEXT, p->token != NULL},
        {"base_url", p->base_url, 0, TEXT, p->base_url != NULL},
        {"model_map", p->model_map && *p->model_map ? p->model_map : NULL, 0, TEXT, p->model_map != NULL},
        {"chatgpt_account_id", p->chatgpt_account_id, 0, TEXT, p->chatgpt_account_id != NULL},
        {"refresh_token", p->login.refresh_token, 0, TEXT, p->login.refresh_token != NULL},
        {"id_token", p->login.id_token, 0, TEXT, p->login.id_token != NULL},
        {"email", p->login.email, 0, TEXT, p->login.email != NULL},
        {"plan_type", p->login.plan_type, 0, TEXT, p->login.plan_type != NULL},
        {"token_expires_at", NULL, (double)p->login.token_expires_at, INT, p->login.token_expires_at != 0},
        {"last_refresh_at", NULL, (double)p->login.last_refresh_at, INT, p->login.last_refresh_at != 0},
        {"sort", NULL, p->sort, INT, p->has_sort},
        {"max_concurrency", NULL, p->max_concurrency, INT, p->has_max_concurrency},
        {"context_fallback", NULL, p->context_fallback ? 1 : 0, INT, p->has_context_fallback},
        {"weight", NULL, p->weight, INT, p->has_weight},
        {"max_rpm", NULL, p->max_rpm, INT, p->has_max_rpm},
        {"max_tpm", NULL, p->max_tpm, INT, p->has_max_tpm},
        {"budget_usd", NULL, p->budget_usd, REAL, p->has_budget},
        {"budget_period", p->budget_period, 0, TEXT, p->budget_period != NULL},
        {"models", p->models && *p->models ? p->models : NULL, 0, TEXT, p->models != NULL},
        {"prefill", account_prefill_name(p->prefill), 0, TEXT, p->has_prefill},
        {"speaks", account_speaks_name(p->speaks), 0, TEXT, p->has_speaks},
    };
    char sql[1536] = "UPDATE accounts SET id = id";
    size_t len = strlen(sql);
    int nset = 0, param = 2;
    char tok_param[16] = "token", rt_param[16] = "refresh_token"; /* the new values, or the column: unchanged */
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (f[i].set) {
            if (strcmp(f[i].col, "token") == 0)
                snprintf(tok_param, sizeof tok_param, "?%d", param);
            else if (strcmp(f[i].col, "refresh_token") == 0)
                snprintf(rt_param, sizeof rt_param, "?%d", param);
            len += (size_t)snprintf(sql + len, sizeof sql - len, ", %s = ?%d", f[i].col, param++);
            nset++;
        }
    if (!nset) {
        sbuf_fmt_into(err, errlen, "nothing to change");
        return -1;
    }
    if (p->token || p->login.refresh_token) { /* a new login: whatever was refused before no longer applies */
        len += (size_t)snprintf(sql + len, sizeof sql - len, ", login_error = NULL");
        /* the hold too, when the login really changed (the SET sees the old row) */
        char same[96];
        snprintf(same, sizeof same, "token IS %s AND refresh_token IS %s", tok_param, rt_param);
        len += (size_t)snprintf(sql + len, sizeof sql - len,
                                ", hold = CASE WHEN %s THEN hold END, hold_detail = CASE WHEN %s THEN hold_detail END,"
                                " hold_since = CASE WHEN %s THEN hold_since ELSE 0 END",
                                same, same, same);
    }
    snprintf(sql + len, sizeof sql - len, " WHERE name = ?1");
    sqlite3 *db = store_sqlite(s);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        param = 2;
        for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
            if (!f[i].set)
                continue;
            if (f[i].type == INT)
                sqlite3_bind_int64(st, param++, (int64_t)f[i].num);
            else if (f[i].type == REAL)
                sqlite3_bind_double(st, param++, f[i].num);
            else
                store_bind_text(st, param++, f[i].text);
        }
        store_sync_write_begin(s);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
        store_sync_write_end(s);
    }
    int changes = rc == SQLITE_OK ? sqlite3_changes(db) : 0;
    if (rc != SQLITE_OK)
        sbuf_fmt_into(err, errlen, "cannot update account: %s", sqlite3_errmsg(db));
    else if (!changes)
        sbuf_fmt_into(err, errlen, "no account named '%s'", name);
    sqlite3_finalize(st);
    return rc == SQLITE_OK && changes ? 0 : -1;
}

/* ---------- import ---------- */

/* The chatgpt account holding the same login: same ChatGPT account id and,
 * when both sides know it, the same e-mail (a Team workspace shares one
 * account id among its members). 1 found, 0 none, 2 ambiguous, -1 error. */
static int store_login_find(sqlite3 *db, const account_new *a, int64_t *id)
{
    if (!a->chatgpt_account_id || !*a->chatgpt_account_id)
        return 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
            "SELECT id FROM accounts WHERE kind = 'chatgpt' AND chatgpt_account_id = ?1"
            " AND (?2 IS NULL OR email IS NULL OR email = ?2 COLLATE NOCASE) ORDER BY id", -1, &st,
            NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, a->chatgpt_account_id, -1, SQLITE_STATIC);
    store_bind_text(st, 2, a->login.email && *a->login.email ? a->login.email : NULL);
    int n = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        if (n++ == 0)
            *id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return -1;
    return n == 0 ? 0 : n == 1 ? 1 : 2;
}

/* A key account (api_key, aggregate) of the same name and kind: 1 found, 0 none, -1 error. */
static int store_key_account_find(sqlite3 *db, const account_new *a, int64_t *id)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT id FROM accounts WHERE name = ?1 AND kind = ?2", -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, a->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, account_kind_name(a->kind), -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

static int store_key_account_refresh(sqlite3 *db, int64_t id, const account_new *a)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "UPDATE accounts SET token = ?2, base_url = ?3, " STORE_SQL_HOLD_IF("token IS ?2")
                                    " WHERE id = ?1", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_text(st, 2, a->token, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, a->base_url, -1, SQLITE_STATIC);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    }
    sqlite3_finalize(st);
    return rc;
}

static int store_login_refresh(sqlite3 *db, int64_t id, const account_new *a)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
        "UPDATE accounts SET token = ?2, refresh_token = coalesce(?3, refresh_token),"
        " id_token = coalesce(?4, id_token), email = coalesce(?5, email), plan_type = coalesce(?6, plan_type),"
        " token_expires_at = ?7, last_refresh_at = max(last_refresh_at, ?8), login_error = NULL, "
        STORE_SQL_HOLD_IF("token IS ?2 AND refresh_token IS coalesce(?3, refresh_token)") " WHERE id = ?1",
        -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_text(st, 2, a->token, -1, SQLITE_STATIC);
        store_bind_login(st, 3, &a->login);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    }
    sqlite3_finalize(st);
    return rc;
}

int store_import_one(sqlite3 *db, const account_new *a, const char *label, int *added, int *updated, char *err,
                     size_t errlen)
{
    char why[256] = "";
    int64_t id = 0;
    if (store_account_check(db, a, why, sizeof why) != 0) {
        sbuf_fmt_into(err, errlen, "%s: %s", label, why);
        return -1;
    }
    int chatgpt = a->kind == ACCOUNT_CHATGPT;
    int found = chatgpt ? store_login_find(db, a, &id) : store_key_account_find(db, a, &id);
    if (found == 2) {
        sbuf_fmt_into(err, errlen, "%s: several accounts hold ChatGPT account id %s; give the entry an email", label,
                   a->chatgpt_account_id);
        return -1;
    }
    int rc = found < 0 ? SQLITE_ERROR
             : !found  ? store_account_insert(db, a)
             : chatgpt ? store_login_refresh(db, id, a)
                       : store_key_account_refresh(db, id, a);
    if ((rc & 0xff) == SQLITE_CONSTRAINT) {
        sbuf_fmt_into(err, errlen, "%s: name: an account named '%s' already exists with another login", label, a->name);
        return -1;
    }
    if (rc != SQLITE_OK) {
        sbuf_fmt_into(err, errlen, "%s: %s", label, sqlite3_errmsg(db));
        return -1;
    }
    (*(found ? updated : added))++;
    return 0;
}

int store_accounts_import(store *s, const account_new *list, size_t n, const char *const *labels, int *added,
                          int *updated, char *err, size_t errlen)
{
    sqlite3 *db = store_sqlite(s);
    *added = *updated = 0;
    store_sync_write_begin(s);
    int rc = store_txn(db, "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK)
        sbuf_fmt_into(err, errlen, "cannot start the import: %s", sqlite3_errmsg(db));
    for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
        if (store_import_one(db, &list[i], labels[i], added, updated, err, errlen) != 0)
            rc = SQLITE_ERROR;
    }
    rc = store_txn_end(db, rc);
    store_sync_write_end(s);
    if (rc != SQLITE_OK)
        *added = *updated = 0;
    return rc == SQLITE_OK ? 0 : -1;
}
