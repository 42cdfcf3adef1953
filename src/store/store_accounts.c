/* store_accounts.c: changing accounts in place (`account update`) and
 * importing many logins at once (`account import`): one transaction each,
 * so a bad entry leaves the database as it was. Tokens are never put into
 * error messages. */
#include "store/store_internal.h"
#include "base/budget.h"
#include "base/sbuf.h"
#include <stdio.h>
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

/* ---------- update ---------- */

static int store_patch_check(store *s, const account_patch *p, char *err, size_t errlen)
{
    if (p->base_url && strncmp(p->base_url, "http://", 7) != 0 && strncmp(p->base_url, "https://", 8) != 0)
        sbuf_fmt_into(err, errlen, "base_url must start with http:// or https://");
    else if (p->token && !*p->token)
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
    };
    char sql[1024] = "UPDATE accounts SET id = id";
    size_t len = strlen(sql);
    int nset = 0, param = 2;
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (f[i].set) {
            len += (size_t)snprintf(sql + len, sizeof sql - len, ", %s = ?%d", f[i].col, param++);
            nset++;
        }
    if (!nset) {
        sbuf_fmt_into(err, errlen, "nothing to change");
        return -1;
    }
    if (p->token || p->login.refresh_token) /* a new login: whatever was refused before no longer applies */
        len += (size_t)snprintf(sql + len, sizeof sql - len, ", login_error = NULL");
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
    int rc = sqlite3_prepare_v2(db, "UPDATE accounts SET token = ?2, base_url = ?3 WHERE id = ?1", -1, &st, NULL);
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
        " token_expires_at = ?7, last_refresh_at = max(last_refresh_at, ?8), login_error = NULL WHERE id = ?1",
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

/* One entry inside the transaction; 0, or -1 with err filled. */
static int store_import_one(store *s, const account_new *a, const char *label, int *added, int *updated,
                            char *err, size_t errlen)
{
    sqlite3 *db = store_sqlite(s);
    char why[256] = "";
    int64_t id = 0;
    if (store_account_check(s, a, why, sizeof why) != 0) {
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
        if (store_import_one(s, &list[i], labels[i], added, updated, err, errlen) != 0)
            rc = SQLITE_ERROR;
    }
    rc = store_txn_end(db, rc);
    store_sync_write_end(s);
    if (rc != SQLITE_OK)
        *added = *updated = 0;
    return rc == SQLITE_OK ? 0 : -1;
}
