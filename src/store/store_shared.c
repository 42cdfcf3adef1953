/* store_shared.c: the shared rows' texts, records and applying them (see
 * store_shared.h). The texts are sqlite's json_object of the columns an
 * operator or the gateway's own findings (a login, a hold) set; ids are
 * local to each database and never travel (a key's preferred account
 * travels by name). Applying runs on the writer thread inside its batch,
 * under a savepoint: a text the tables refuse is skipped, never retried. */
#include "store/store_shared.h"
#include "store/store_internal.h"
#include "base/budget.h"
#include "base/json.h"
#include "base/log.h"
#include "base/sha256.h"
#include "base/text.h"
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#define J(k) "json_extract(?2, '$." k "')"

static const char store_shared_sql_rows[] =
    "SELECT 'account:' || name, json_object('kind', kind, 'base_url', base_url, 'token', token,"
    " 'chatgpt_account_id', chatgpt_account_id, 'model_map', model_map, 'sort', sort, 'enabled', enabled,"
    " 'max_concurrency', max_concurrency, 'created_at', created_at, 'updated_at', updated_at,"
    " 'context_fallback', context_fallback, 'reset_gen', reset_gen, 'refresh_token', refresh_token,"
    " 'id_token', id_token, 'email', email, 'plan_type', plan_type, 'token_expires_at', token_expires_at,"
    " 'last_refresh_at', last_refresh_at, 'login_error', login_error, 'weight', weight, 'max_rpm', max_rpm,"
    " 'max_tpm', max_tpm, 'budget_usd', budget_usd, 'budget_period', budget_period, 'hold', hold,"
    " 'hold_detail', hold_detail, 'hold_since', hold_since, 'models', models, 'prefill', prefill,"
    " 'speaks', speaks)"
    " FROM accounts"
    " UNION ALL SELECT 'key:' || k.hash, json_object('name', k.name, 'prefix', k.prefix, 'preferred', a.name,"
    " 'revoked', k.revoked, 'created_at', k.created_at, 'allowed_models', k.allowed_models, 'max_rpm', k.max_rpm,"
    " 'expires_at', k.expires_at, 'budget_usd', k.budget_usd, 'budget_period', k.budget_period)"
    " FROM platform_keys k LEFT JOIN accounts a ON a.id = k.preferred_account_id"
    " UNION ALL SELECT 'setting:' || key, json_object('value', value, 'updated_at', updated_at) FROM settings"
    " WHERE key <> 'redis'" /* each instance's own address of the pool: never shared (a change would move them all) */
    " ORDER BY 1";

/* ?1 the name, ?2 the text. A login (the tokens and what goes with them)
 * is taken only when it is not older than the row's. */
#define STORE_SHARED_LOGIN_NEWER "excluded.last_refresh_at >= accounts.last_refresh_at"
#define STORE_SHARED_LOGIN(col) \
    col " = CASE WHEN " STORE_SHARED_LOGIN_NEWER " THEN excluded." col " ELSE accounts." col " END"
static const char store_shared_sql_account[] =
    "INSERT INTO accounts(name, kind, base_url, token, chatgpt_account_id, model_map, sort, enabled,"
    " max_concurrency, created_at, updated_at, context_fallback, reset_gen, refresh_token, id_token, email,"
    " plan_type, token_expires_at, last_refresh_at, login_error, weight, max_rpm, max_tpm, budget_usd,"
    " budget_period, hold, hold_detail, hold_since, models, prefill, speaks) VALUES (?1, " J("kind") ", " J("base_url")
    ", " J("token") ", " J("chatgpt_account_id") ", " J("model_map") ", " J("sort") ", " J("enabled") ", "
    J("max_concurrency") ", " J("created_at") ", " J("updated_at") ", " J("context_fallback") ", " J("reset_gen")
    ", " J("refresh_token") ", " J("id_token") ", " J("email") ", " J("plan_type") ", " J("token_expires_at") ", "
    J("last_refresh_at") ", " J("login_error") ", " J("weight") ", " J("max_rpm") ", " J("max_tpm") ", "
    J("budget_usd") ", " J("budget_period") ", " J("hold") ", " J("hold_detail") ", " J("hold_since") ", "
    J("models") ", " J("prefill") ", coalesce(" J("speaks") ", 'auto'))"
    " ON CONFLICT(name) DO UPDATE SET kind = excluded.kind, base_url = excluded.base_url,"
    " chatgpt_account_id = excluded.chatgpt_account_id, model_map = excluded.model_map, sort = excluded.sort,"
    " enabled = excluded.enabled, max_concurrency = excluded.max_concurrency, created_at = excluded.created_at,"
    " updated_at = excluded.updated_at, context_fallback = excluded.context_fallback,"
    " reset_gen = excluded.reset_gen, email = excluded.email, plan_type = excluded.plan_type,"
    " weight = excluded.weight, max_rpm = excluded.max_rpm, max_tpm = excluded.max_tpm,"
    " budget_usd = excluded.budget_usd, budget_period = excluded.budget_period, hold = excluded.hold,"
    " hold_detail = excluded.hold_detail, hold_since = excluded.hold_since, models = excluded.models,"
    " prefill = excluded.prefill, speaks = excluded.speaks, " STORE_SHARED_LOGIN("token") ", " STORE_SHARED_LOGIN("refresh_token") ", "
    STORE_SHARED_LOGIN("id_token") ", " STORE_SHARED_LOGIN("token_expires_at") ", "
    STORE_SHARED_LOGIN("login_error") ", " STORE_SHARED_LOGIN("last_refresh_at");

/* ?1 the hash, ?2 the text. A revoked key stays revoked. */
static const char store_shared_sql_key[] =
    "INSERT INTO platform_keys(name, hash, prefix, preferred_account_id, revoked, created_at, allowed_models,"
    " max_rpm, expires_at, budget_usd, budget_period) VALUES (" J("name") ", ?1, " J("prefix")
    ", (SELECT id FROM accounts WHERE name = " J("preferred") "), " J("revoked") ", " J("created_at") ", "
    J("allowed_models") ", " J("max_rpm") ", " J("expires_at") ", " J("budget_usd") ", " J("budget_period") ")"
    " ON CONFLICT(hash) DO UPDATE SET name = excluded.name, prefix = excluded.prefix,"
    " preferred_account_id = excluded.preferred_account_id, revoked = max(platform_keys.revoked, excluded.revoked),"
    " created_at = excluded.created_at, allowed_models = excluded.allowed_models, max_rpm = excluded.max_rpm,"
    " expires_at = excluded.expires_at, budget_usd = excluded.budget_usd, budget_period = excluded.budget_period";

static const char store_shared_sql_setting[] =
    "INSERT INTO settings(key, value, updated_at) VALUES (?1, " J("value") ", " J("updated_at") ")"
    " ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at";

static const char store_shared_sql_record[] =
    "INSERT INTO shared_sync(field, version, digest) VALUES (?1, ?2, ?3)"
    " ON CONFLICT(field) DO UPDATE SET version = excluded.version, digest = excluded.digest";

/* ---------- reading (the loop) ---------- */

int store_shared_rows(store *s, void (*fn)(void *ud, const char *field, const char *body), void *ud)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, store_shared_sql_rows, -1, &st, NULL) != SQLITE_OK) {
        log_warn("store: cannot read the shared rows: %s", sqlite3_errmsg(s->db));
        return -1;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *field = (const char *)sqlite3_column_text(st, 0);
        const char *body = (const char *)sqlite3_column_text(st, 1);
        if (field && body)
            fn(ud, field, body);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

int store_shared_records(store *s, void (*fn)(void *ud, const char *field, int64_t version, const char *digest),
                         void *ud)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT field, version, digest FROM shared_sync ORDER BY field", -1, &st, NULL) !=
        SQLITE_OK)
        return -1;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *field = (const char *)sqlite3_column_text(st, 0);
        const char *digest = (const char *)sqlite3_column_text(st, 2);
        if (field && digest)
            fn(ud, field, sqlite3_column_int64(st, 1), digest);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

void store_shared_digest(const char *body, char out[65])
{
    if (!body) {
        strcpy(out, STORE_SHARED_GONE);
        return;
    }
    sha256_hex(body, strlen(body), out);
}

/* ---------- checking a text from outside ---------- */

static int store_shared_name_ok(const char *s, size_t max)
{
    size_t n = strlen(s);
    return n && n <= max && !text_check_str(s);
}

int store_shared_field_ok(const char *field)
{
    if (!field || strlen(field) > STORE_SHARED_FIELD_MAX)
        return 0;
    if (strncmp(field, "account:", 8) == 0)
        return store_shared_name_ok(field + 8, 255);
    if (strncmp(field, "key:", 4) == 0) {
        const char *h = field + 4;
        if (strlen(h) != 64)
            return 0;
        for (; *h; h++)
            if (!((*h >= '0' && *h <= '9') || (*h >= 'a' && *h <= 'f')))
                return 0;
        return 1;
    }
    if (strncmp(field, "setting:", 8) == 0) {
        const char *k = field + 8;
        if (!*k || strlen(k) > 31 || strcmp(k, "redis") == 0) /* not shared (store_shared_sql_rows) */
            return 0;
        for (; *k; k++)
            if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '_'))
                return 0;
        return 1;
    }
    return 0;
}

/* A member that must be a string (or null when nullable): its text, or
 * NULL; *bad set when it is neither. */
static const char *store_shared_str(const json_value *doc, const char *key, int nullable, int *bad)
{
    const json_value *v = json_get(doc, key);
    if (v && v->type == JSON_STRING && strlen(v->str) == v->str_len && !text_check_str(v->str))
        return v->str;
    if (!(nullable && (!v || v->type == JSON_NULL)))
        *bad = 1;
    return NULL;
}

static int64_t store_shared_int(const json_value *doc, const char *key, int64_t lo, int64_t hi, int *bad)
{
    int64_t out = 0;
    if (json_get_int64(doc, key, lo, hi, &out) != 0)
        *bad = 1;
    return out;
}

static int store_shared_check_account(store *s, const char *name, const json_value *doc, char *err, size_t errlen)
{
    int bad = 0;
    account_new a;
    memset(&a, 0, sizeof a);
    a.name = name;
    const char *kind = store_shared_str(doc, "kind", 0, &bad);
    account_kind k;
    if (!kind || account_kind_parse(kind, &k) != 0) {
        store_errf(err, errlen, "an unknown account kind");
        return -1;
    }
    a.kind = k;
    a.base_url = store_shared_str(doc, "base_url", 0, &bad);
    a.token = store_shared_str(doc, "token", 0, &bad);
    a.chatgpt_account_id = store_shared_str(doc, "chatgpt_account_id", 1, &bad);
    a.model_map = store_shared_str(doc, "model_map", 1, &bad);
    a.login.refresh_token = store_shared_str(doc, "refresh_token", 1, &bad);
    a.login.id_token = store_shared_str(doc, "id_token", 1, &bad);
    a.login.email = store_shared_str(doc, "email", 1, &bad);
    a.login.plan_type = store_shared_str(doc, "plan_type", 1, &bad);
    a.budget_period = store_shared_str(doc, "budget_period", 0, &bad);
    store_shared_str(doc, "login_error", 1, &bad);
    store_shared_str(doc, "hold", 1, &bad);
    store_shared_str(doc, "hold_detail", 1, &bad);
    store_shared_str(doc, "models", 1, &bad);
    const char *prefill = store_shared_str(doc, "prefill", 0, &bad);
    int pf;
    if (prefill && account_prefill_parse(prefill, &pf) != 0)
        bad = 1;
    const char *speaks = store_shared_str(doc, "speaks", 1, &bad); /* absent: an older gateway's text */
    int sp;
    if (speaks && account_speaks_parse(speaks, &sp) != 0)
        bad = 1;
    const int64_t big = INT64_C(1) << 40;
    store_shared_int(doc, "sort", -(INT64_C(1) << 31), INT32_MAX, &bad);
    store_shared_int(doc, "enabled", 0, 1, &bad);
    a.max_concurrency = (int)store_shared_int(doc, "max_concurrency", 0, INT32_MAX, &bad);
    a.context_fallback = (int)store_shared_int(doc, "context_fallback", 0, 1, &bad);
    a.weight = (int)store_shared_int(doc, "weight", 0, INT32_MAX, &bad);
    a.max_rpm = (int)store_shared_int(doc, "max_rpm", 0, INT32_MAX, &bad);
    a.max_tpm = (int)store_shared_int(doc, "max_tpm", 0, INT32_MAX, &bad);
    const char *ints[] = {"created_at", "updated_at", "reset_gen", "token_expires_at", "last_refresh_at", "hold_since"};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        store_shared_int(doc, ints[i], 0, big, &bad);
    const json_value *b = json_get(doc, "budget_usd");
    if (!b || b->type != JSON_NUMBER || !(b->num >= 0 && b->num < 1e15))
        bad = 1;
    else
        a.budget_usd = b->num;
    if (bad) {
        store_errf(err, errlen, "a member is missing or not of its type");
        return -1;
    }
    return store_account_check(s->db, &a, err, errlen);
}

static int store_shared_check_key(const json_value *doc, char *err, size_t errlen)
{
    int bad = 0;
    const char *name = store_shared_str(doc, "name", 0, &bad);
    const char *prefix = store_shared_str(doc, "prefix", 0, &bad);
    store_shared_str(doc, "preferred", 1, &bad);
    store_shared_str(doc, "allowed_models", 1, &bad);
    const char *period = store_shared_str(doc, "budget_period", 0, &bad);
    store_shared_int(doc, "revoked", 0, 1, &bad);
    store_shared_int(doc, "created_at", 0, INT64_C(1) << 40, &bad);
    store_shared_int(doc, "expires_at", 0, INT64_C(1) << 40, &bad);
    store_shared_int(doc, "max_rpm", 0, INT32_MAX, &bad);
    const json_value *b = json_get(doc, "budget_usd");
    if (!b || b->type != JSON_NUMBER || !(b->num >= 0 && b->num < 1e15))
        bad = 1;
    if (!bad && (strlen(name) > 255 || strlen(prefix) >= 16 || budget_period_valid(period) != 0))
        bad = 1;
    if (bad)
        store_errf(err, errlen, "a member is missing, not of its type or out of range");
    return bad ? -1 : 0;
}

int store_shared_check(store *s, const char *field, const char *body, char *err, size_t errlen)
{
    if (!store_shared_field_ok(field)) {
        store_errf(err, errlen, "not a shared row's name");
        return -1;
    }
    if (!body)
        return 0;
    size_t n = strlen(body);
    if (n > STORE_SHARED_BODY_MAX) {
        store_errf(err, errlen, "a text of %zu bytes (at most %u)", n, STORE_SHARED_BODY_MAX);
        return -1;
    }
    json_value *doc = json_parse(body, n, NULL, 0);
    int rc = -1;
    if (!doc || doc->type != JSON_OBJECT)
        store_errf(err, errlen, "not a JSON object");
    else if (field[0] == 'a')
        rc = store_shared_check_account(s, field + 8, doc, err, errlen);
    else if (field[0] == 'k')
        rc = store_shared_check_key(doc, err, errlen);
    else {
        int bad = 0;
        const char *v = store_shared_str(doc, "value", 0, &bad);
        store_shared_int(doc, "updated_at", 0, INT64_C(1) << 40, &bad);
        if (bad || strlen(v) > 4096)
            store_errf(err, errlen, "a setting's value must be a string of at most 4096 bytes");
        else
            rc = 0;
    }
    json_free(doc);
    return rc;
}

/* ---------- applying (the writer thread) ---------- */

typedef struct store_shared_job {
    char *field;
    char *body; /* NULL: removed */
    int64_t version;
    int apply;
    char digest[65];
} store_shared_job;

static void store_shared_job_free(void *arg)
{
    store_shared_job *j = arg;
    sbuf_secret_free(j->body);
    free(j->field);
    free(j);
}

/* One statement with ?1 = name (and ?2 = the text). */
static int store_shared_step(sqlite3 *db, const char *sql, const char *name, const char *body)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        if (body && sqlite3_bind_parameter_count(st) >= 2)
            sqlite3_bind_text(st, 2, body, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        rc = rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    return rc;
}

/* A result a retry cannot heal: the text is what is wrong. */
static int store_shared_data_error(int rc)
{
    int base = rc & 0xff;
    return base == SQLITE_CONSTRAINT || base == SQLITE_MISMATCH || base == SQLITE_ERROR || base == SQLITE_TOOBIG ||
           base == SQLITE_RANGE;
}

static int store_shared_apply(sqlite3 *db, const store_shared_job *j)
{
    const char *f = j->field;
    if (strncmp(f, "account:", 8) == 0) {
        if (j->body)
            return store_shared_step(db, store_shared_sql_account, f + 8, j->body);
        int rc = store_shared_step(
            db, "DELETE FROM response_owners WHERE account_id IN (SELECT id FROM accounts WHERE name = ?1)", f + 8,
            NULL);
        return rc == SQLITE_OK ? store_shared_step(db, "DELETE FROM accounts WHERE name = ?1", f + 8, NULL) : rc;
    }
    if (strncmp(f, "key:", 4) == 0)
        return j->body ? store_shared_step(db, store_shared_sql_key, f + 4, j->body)
                       : store_shared_step(db, "DELETE FROM platform_keys WHERE hash = ?1", f + 4, NULL);
    return j->body ? store_shared_step(db, store_shared_sql_setting, f + 8, j->body)
                   : store_shared_step(db, "DELETE FROM settings WHERE key = ?1", f + 8, NULL);
}

static int store_shared_run(sqlite3 *db, void *arg)
{
    const store_shared_job *j = arg;
    int rc = sqlite3_exec(db, "SAVEPOINT shared_row", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return rc;
    if (j->apply && (rc = store_shared_apply(db, j)) != SQLITE_OK) {
        if (!store_shared_data_error(rc)) {
            sqlite3_exec(db, "ROLLBACK TO shared_row; RELEASE shared_row", NULL, NULL, NULL);
            return rc; /* busy, I/O: the batch is retried */
        }
        log_warn("store: skipped another gateway's %s: %s", j->field, sqlite3_errmsg(db));
        sqlite3_exec(db, "ROLLBACK TO shared_row", NULL, NULL, NULL);
    }
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(db, store_shared_sql_record, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, j->field, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, j->version);
        sqlite3_bind_text(st, 3, j->digest, -1, SQLITE_STATIC);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        sqlite3_exec(db, "ROLLBACK TO shared_row; RELEASE shared_row", NULL, NULL, NULL);
        return rc;
    }
    return sqlite3_exec(db, "RELEASE shared_row", NULL, NULL, NULL);
}

uint64_t store_shared_put(store *s, const char *field, int64_t version, const char *body, int apply)
{
    if (!store_shared_field_ok(field))
        return 0;
    store_shared_job *j = calloc(1, sizeof *j);
    if (!j)
        return 0;
    j->field = strdup(field);
    j->body = body ? strdup(body) : NULL;
    j->version = version;
    j->apply = apply;
    store_shared_digest(body, j->digest);
    if (!j->field || (body && !j->body)) {
        store_shared_job_free(j);
        return 0;
    }
    return store_writer_put_call(s, store_shared_run, j, store_shared_job_free);
}
