/* store_schema.c: what the database looks like, version by version: the
 * SQL of every migration (append only; a shipped one is never edited) and
 * applying the missing ones in order, each in its own IMMEDIATE
 * transaction, when store_open opens the file (store.c). */
#include "store/store_internal.h"
#include <sqlite3.h>
#include <stddef.h>
#include <stdio.h>

/* Migration 1: the initial schema. Columns mirror the structs in store.h.
 * The triggers bump meta.config_version on any change to accounts or
 * platform_keys, from any process, so a running server sees CLI edits. */
static const char store_migration_1[] =
    "CREATE TABLE accounts ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " name TEXT NOT NULL UNIQUE,"
    " kind TEXT NOT NULL CHECK (kind IN ('api_key','chatgpt','aggregate')),"
    " base_url TEXT NOT NULL,"
    " token TEXT NOT NULL,"
    " chatgpt_account_id TEXT,"
    " model_map TEXT,"
    " sort INTEGER NOT NULL DEFAULT 0,"
    " enabled INTEGER NOT NULL DEFAULT 1,"
    " max_concurrency INTEGER NOT NULL DEFAULT 0 CHECK (max_concurrency >= 0),"
    " created_at INTEGER NOT NULL,"
    " updated_at INTEGER NOT NULL);"
    "CREATE TABLE platform_keys ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " name TEXT NOT NULL,"
    " hash TEXT NOT NULL UNIQUE,"
    " prefix TEXT NOT NULL,"
    " preferred_account_id INTEGER REFERENCES accounts(id) ON DELETE SET NULL,"
    " revoked INTEGER NOT NULL DEFAULT 0,"
    " created_at INTEGER NOT NULL);"
    "CREATE TABLE account_state ("
    " account_id INTEGER PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,"
    " cooldown_until REAL NOT NULL DEFAULT 0,"
    " ladder_step INTEGER NOT NULL DEFAULT 0,"
    " last_429_at REAL NOT NULL DEFAULT 0,"
    " last_error TEXT NOT NULL DEFAULT '',"
    " primary_used_pct REAL NOT NULL DEFAULT -1,"
    " secondary_used_pct REAL NOT NULL DEFAULT -1,"
    " primary_reset_at REAL NOT NULL DEFAULT 0,"
    " secondary_reset_at REAL NOT NULL DEFAULT 0,"
    " success_ema REAL NOT NULL DEFAULT 1,"
    " latency_ema_ms REAL NOT NULL DEFAULT 0,"
    " updated_at REAL NOT NULL DEFAULT 0);"
    /* No foreign keys here: logs outlive deleted accounts and keys. */
    "CREATE TABLE request_logs ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " ts REAL NOT NULL,"
    " platform_key_id INTEGER,"
    " endpoint TEXT NOT NULL,"
    " model TEXT NOT NULL,"
    " stream INTEGER NOT NULL,"
    " account_id INTEGER,"
    " account_name TEXT NOT NULL,"
    " status INTEGER NOT NULL,"
    " attempts INTEGER NOT NULL,"
    " latency_ms REAL NOT NULL,"
    " route_strategy TEXT NOT NULL,"
    " error_class TEXT NOT NULL,"
    " input_tokens INTEGER,"
    " output_tokens INTEGER,"
    " total_tokens INTEGER);"
    "CREATE INDEX request_logs_ts ON request_logs(ts);"
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
    "INSERT INTO meta(key, value) VALUES ('config_version', 1);"
#define STORE_BUMP_TRIGGER(tbl, ev) \
    "CREATE TRIGGER " tbl "_" ev "_bump AFTER " ev " ON " tbl " BEGIN" \
    " UPDATE meta SET value = value + 1 WHERE key = 'config_version'; END;"
    STORE_BUMP_TRIGGER("accounts", "INSERT")
    STORE_BUMP_TRIGGER("accounts", "UPDATE")
    STORE_BUMP_TRIGGER("accounts", "DELETE")
    STORE_BUMP_TRIGGER("platform_keys", "INSERT")
    STORE_BUMP_TRIGGER("platform_keys", "UPDATE")
    STORE_BUMP_TRIGGER("platform_keys", "DELETE");

/* Migration 2: settings written by `switchyard config` (their triggers bump
 * config_version like accounts do, so a running server reloads), and the
 * owners of response ids, kept so previous_response_id pinning survives a
 * restart. No foreign key on owners: the writer may record one for an
 * account the CLI just removed; loaders skip owners whose account is gone. */
static const char store_migration_2[] =
    "CREATE TABLE settings ("
    " key TEXT PRIMARY KEY,"
    " value TEXT NOT NULL,"
    " updated_at INTEGER NOT NULL);"
    STORE_BUMP_TRIGGER("settings", "INSERT")
    STORE_BUMP_TRIGGER("settings", "UPDATE")
    STORE_BUMP_TRIGGER("settings", "DELETE")
    "CREATE TABLE response_owners ("
    " response_id TEXT PRIMARY KEY,"
    " account_id INTEGER NOT NULL,"
    " created_at REAL NOT NULL);"
    "CREATE INDEX response_owners_created_at ON response_owners(created_at);";

/* Migration 3: what a ChatGPT account's usage endpoint (and its rate-limit
 * headers) say beyond the used percentages: window lengths, plan, credits,
 * and when the last poll was answered with which status. */
static const char store_migration_3[] =
    "ALTER TABLE account_state ADD COLUMN primary_window_s REAL NOT NULL DEFAULT 0;"
    "ALTER TABLE account_state ADD COLUMN secondary_window_s REAL NOT NULL DEFAULT 0;"
    "ALTER TABLE account_state ADD COLUMN plan_type TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE account_state ADD COLUMN has_credits INTEGER NOT NULL DEFAULT -1;"
    "ALTER TABLE account_state ADD COLUMN credits_unlimited INTEGER NOT NULL DEFAULT -1;"
    "ALTER TABLE account_state ADD COLUMN credits_balance REAL NOT NULL DEFAULT -1;"
    "ALTER TABLE account_state ADD COLUMN usage_polled_at REAL NOT NULL DEFAULT 0;"
    "ALTER TABLE account_state ADD COLUMN usage_poll_status INTEGER NOT NULL DEFAULT 0;";

/* Migration 4: the journal of `switchyard codex attach` (see
 * store_codex.h). One row per attach of one Codex home; at most one of a
 * home is unfinished (attaching, attached or detaching) at a time. The
 * original config.toml is kept whole so detach can give it back byte for
 * byte; the platform key itself is not (only its id and prefix). */
static const char store_migration_4[] =
    "CREATE TABLE codex_attach ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " codex_home TEXT NOT NULL,"
    " config_path TEXT NOT NULL,"
    " state TEXT NOT NULL CHECK (state IN ('attaching','attached','detaching','detached','rolled_back')),"
    " gateway_url TEXT NOT NULL,"
    " key_id INTEGER NOT NULL,"
    " key_prefix TEXT NOT NULL,"
    " original BLOB,"
    " original_sha256 TEXT,"
    " original_mode INTEGER NOT NULL,"
    " written_sha256 TEXT NOT NULL,"
    " keys TEXT NOT NULL,"
    " restore_sha256 TEXT,"
    " restore_from_sha256 TEXT,"
    " created_at INTEGER NOT NULL,"
    " updated_at INTEGER NOT NULL);"
    "CREATE UNIQUE INDEX codex_attach_open ON codex_attach(codex_home)"
    " WHERE state IN ('attaching','attached','detaching');";


/* Migration 5: each request's attempts (a JSON array written by proxy.c:
 * which accounts were tried, in order, and why each was left), and the
 * admin token's hash (one row; `switchyard admin token` replaces it). Its
 * triggers bump config_version so a running gateway picks up a rotation. */
static const char store_migration_5[] =
    "ALTER TABLE request_logs ADD COLUMN attempts_json TEXT;"
    "CREATE TABLE admin_token ("
    " id INTEGER PRIMARY KEY CHECK (id = 1),"
    " hash TEXT NOT NULL,"
    " prefix TEXT NOT NULL,"
    " created_at INTEGER NOT NULL);"
    STORE_BUMP_TRIGGER("admin_token", "INSERT")
    STORE_BUMP_TRIGGER("admin_token", "UPDATE")
    STORE_BUMP_TRIGGER("admin_token", "DELETE");
#undef STORE_BUMP_TRIGGER

/* Migration 6 (failover, issue 10): an account may be a larger-context
 * fallback; `account reset` bumps reset_gen (an accounts UPDATE, so the
 * running gateway reloads and clears that account's routing state); the
 * request log names the model the serving attempt was sent, and whether a
 * cut stream was resumed on another account. */
static const char store_migration_6[] =
    "ALTER TABLE accounts ADD COLUMN context_fallback INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE accounts ADD COLUMN reset_gen INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE request_logs ADD COLUMN upstream_model TEXT;"
    "ALTER TABLE request_logs ADD COLUMN resumed INTEGER NOT NULL DEFAULT 0;";

/* Migration 7 (issue 9): full ChatGPT logins (refresh and id tokens, identity from
 * the id token, access-token expiry, last refresh) and needs_login. */
static const char store_migration_7[] =
    "ALTER TABLE accounts ADD COLUMN refresh_token TEXT;"
    "ALTER TABLE accounts ADD COLUMN id_token TEXT;"
    "ALTER TABLE accounts ADD COLUMN email TEXT;"
    "ALTER TABLE accounts ADD COLUMN plan_type TEXT;"
    "ALTER TABLE accounts ADD COLUMN token_expires_at INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE accounts ADD COLUMN last_refresh_at INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE accounts ADD COLUMN login_error TEXT;"
    "CREATE INDEX accounts_chatgpt_account_id ON accounts(chatgpt_account_id);";

/* Migration 8 (issue 14): per-key rules (key_rules.c): allowed model patterns
 * (comma-separated, NULL = every model), a requests-per-minute limit
 * (0 = none) and an expiry (unix seconds, 0 = never). */
static const char store_migration_8[] =
    "ALTER TABLE platform_keys ADD COLUMN allowed_models TEXT;"
    "ALTER TABLE platform_keys ADD COLUMN max_rpm INTEGER NOT NULL DEFAULT 0 CHECK (max_rpm >= 0);"
    "ALTER TABLE platform_keys ADD COLUMN expires_at INTEGER NOT NULL DEFAULT 0;";

/* Migration 9 (issue 14): per-account routing controls: the weighted strategy's weight
 * and local rate limits (requests / tokens per minute, 0 = none). */
static const char store_migration_9[] =
    "ALTER TABLE accounts ADD COLUMN weight INTEGER NOT NULL DEFAULT 1 CHECK (weight >= 0);"
    "ALTER TABLE accounts ADD COLUMN max_rpm INTEGER NOT NULL DEFAULT 0 CHECK (max_rpm >= 0);"
    "ALTER TABLE accounts ADD COLUMN max_tpm INTEGER NOT NULL DEFAULT 0 CHECK (max_tpm >= 0);";

/* Migration 10 (issue 14): spend (spend.c): cached input tokens and the cost of each
 * request (NULL: no price known, or no usage reported). No new index: every
 * index is paid for by every logged request, and the budget sums (at start)
 * and `switchyard usage --since` read a time range, which request_logs_ts
 * already serves. */
static const char store_migration_10[] =
    "ALTER TABLE request_logs ADD COLUMN cached_tokens INTEGER;"
    "ALTER TABLE request_logs ADD COLUMN cost_usd REAL;";

/* Migration 11 (issue 14): budgets (budget.c) per account and per platform key: USD
 * (0 = none) per period ("month" or "<N>d"). */
static const char store_migration_11[] =
    "ALTER TABLE accounts ADD COLUMN budget_usd REAL NOT NULL DEFAULT 0 CHECK (budget_usd >= 0);"
    "ALTER TABLE accounts ADD COLUMN budget_period TEXT NOT NULL DEFAULT 'month';"
    "ALTER TABLE platform_keys ADD COLUMN budget_usd REAL NOT NULL DEFAULT 0 CHECK (budget_usd >= 0);"
    "ALTER TABLE platform_keys ADD COLUMN budget_period TEXT NOT NULL DEFAULT 'month';";

/* Migration 12 (issue 14): the 60 s success rate and latency of each account
 * (health_window.c) as of the state's updated_at, for `account list`. */
static const char store_migration_12[] =
    "ALTER TABLE account_state ADD COLUMN success_rate_60s REAL NOT NULL DEFAULT -1;"
    "ALTER TABLE account_state ADD COLUMN latency_60s_ms REAL NOT NULL DEFAULT -1;"
    "ALTER TABLE account_state ADD COLUMN attempts_60s INTEGER NOT NULL DEFAULT 0;";

/* Migration 13 (issue 15): request_logs without AUTOINCREMENT. With it,
 * every INSERT statement looked its counter up in sqlite_sequence and wrote
 * it back (a page more in every commit): about a fifth of the writer's cost
 * per row. Without it a new row's id is the largest id plus one, which is
 * the same id as long as the newest rows are never deleted (nothing
 * deletes request logs). The table is rebuilt with the same columns in the
 * same order (STORE_LOG_COLUMNS_13, store_internal.h); ids are kept. */
static const char store_migration_13[] =
    "CREATE TABLE request_logs_13 ("
    " id INTEGER PRIMARY KEY,"
    " ts REAL NOT NULL,"
    " platform_key_id INTEGER,"
    " endpoint TEXT NOT NULL,"
    " model TEXT NOT NULL,"
    " stream INTEGER NOT NULL,"
    " account_id INTEGER,"
    " account_name TEXT NOT NULL,"
    " status INTEGER NOT NULL,"
    " attempts INTEGER NOT NULL,"
    " latency_ms REAL NOT NULL,"
    " route_strategy TEXT NOT NULL,"
    " error_class TEXT NOT NULL,"
    " input_tokens INTEGER,"
    " output_tokens INTEGER,"
    " total_tokens INTEGER,"
    " attempts_json TEXT,"
    " upstream_model TEXT,"
    " resumed INTEGER NOT NULL DEFAULT 0,"
    " cached_tokens INTEGER,"
    " cost_usd REAL);"
    "INSERT INTO request_logs_13(id, " STORE_LOG_COLUMNS_13 ") SELECT id, " STORE_LOG_COLUMNS_13 " FROM request_logs;"
    "DROP TABLE request_logs;"
    "ALTER TABLE request_logs_13 RENAME TO request_logs;"
    "CREATE INDEX request_logs_ts ON request_logs(ts);";

/* Migration 14 (issue 21): the conversations the gateway relayed on the
 * Responses API with store: true, one row per response, so that a
 * conversation can go on on another account when the one that owns its
 * previous_response_id cannot serve (store_conversations.h). input_json
 * and output_json are JSON array texts (the request's input items, the
 * response's output items); bytes is their length together, what the
 * retention counts. No foreign key on account_id: the conversation is
 * meant to outlive its account. The index leads with created_at (the
 * retention deletes the oldest first) and carries bytes, so the writer's
 * sweep sums the table's size from the index alone, never touching the
 * rows' text. */
static const char store_migration_14[] =
    "CREATE TABLE conversations ("
    " response_id TEXT PRIMARY KEY,"
    " account_id INTEGER NOT NULL,"
    " previous_response_id TEXT,"
    " input_json TEXT NOT NULL,"
    " output_json TEXT NOT NULL,"
    " bytes INTEGER NOT NULL,"
    " created_at REAL NOT NULL);"
    "CREATE INDEX conversations_created_at ON conversations(created_at, bytes);";

/* Migration 15 (issue 22): an account held out of the pool until an
 * operator acts (route/hold.h): the upstream refused it for a reason
 * waiting does not heal (a deactivated ChatGPT workspace, a workspace that
 * may not use Codex, a region the upstream does not serve). Columns of
 * accounts, as needs_login's login_error: an account row is what a reset,
 * an update or an import changes, and the running gateway reloads it
 * (config_version) whoever wrote it. NULL: not held. */
static const char store_migration_15[] =
    "ALTER TABLE accounts ADD COLUMN hold TEXT;"
    "ALTER TABLE accounts ADD COLUMN hold_detail TEXT;"
    "ALTER TABLE accounts ADD COLUMN hold_since INTEGER NOT NULL DEFAULT 0;";

/* Migration 16 (issue 22): an operator's list of the models an account
 * serves (`account add/update --models a,b,c`): comma-separated exact
 * names; NULL: no override (the list learned from the upstream's /models,
 * kept in memory, or every model when none is known). */
static const char store_migration_16[] = "ALTER TABLE accounts ADD COLUMN models TEXT;";

/* Migration 17 (issue 22): cooldowns per limit family of an account
 * (store.h, account_family): a JSON array of the used slots; '' none. A
 * column of the state, as cooldown_until: written by the serving path
 * through the writer, cleared by `account reset`. */
static const char store_migration_17[] =
    "ALTER TABLE account_state ADD COLUMN family_cooldowns TEXT NOT NULL DEFAULT '';";

/* Migration 18 (issue 22): the model list an account's upstream gave on
 * GET {base}/models (accounts/model_poll.c), kept so a restart routes and
 * answers the catalog by it before the first poll answers: the list
 * (comma-separated; NULL unknown) and the Codex form's "models" array
 * (NULL none). Columns of the state, not of accounts: the gateway learns
 * them, writes them through the writer (only when they change) and no
 * operator's change is involved, so no config_version bump. */
static const char store_migration_18[] =
    "ALTER TABLE account_state ADD COLUMN models_learned TEXT;"
    "ALTER TABLE account_state ADD COLUMN models_codex TEXT;";

/* Index i holds migration i + 1. Append only; never edit a shipped one. */
/* Migration 19 (issue 23): whether an account takes a stream resume's
 * assistant prefill; "refused" is the gateway's own finding, kept across
 * restarts (store.h, account_prefill). */
static const char store_migration_19[] =
    "ALTER TABLE accounts ADD COLUMN prefill TEXT NOT NULL DEFAULT 'auto'"
    " CHECK (prefill IN ('auto','yes','no','refused'));";

/* Migration 20 (issue 25): which version of each shared row (an account,
 * a platform key, a setting; store_shared.h) this database holds, and the
 * digest of its text then: a row whose text no longer has that digest was
 * changed here and is told to the other gateways of the pool. No trigger:
 * recording a version is no change of the configuration. */
static const char store_migration_20[] =
    "CREATE TABLE shared_sync ("
    " field TEXT PRIMARY KEY,"
    " version INTEGER NOT NULL,"
    " digest TEXT NOT NULL);";

/* Migration 21: what the client was told when a request failed (the
 * upstream's error message or the gateway's own; store.h, request_log),
 * at most STORE_LOG_MESSAGE_MAX bytes, so `logs --search` and the
 * dashboard find a request by it. NULL: none (a success). A nullable
 * column added last costs the rows that have none one byte of header. */
static const char store_migration_21[] = "ALTER TABLE request_logs ADD COLUMN error_message TEXT;";

/* Migration 22 (issue 30): the dialects an account's upstream speaks, as
 * the operator declared them (store.h, account_speaks), and the ones the
 * gateway learned it does not (a 404/405 to that endpoint): a bit per
 * dialect in the state, which the gateway writes and no operator change
 * involves (account reset and update --speaks forget it). */
static const char store_migration_22[] =
    "ALTER TABLE accounts ADD COLUMN speaks TEXT NOT NULL DEFAULT 'auto'"
    " CHECK (speaks IN ('auto','responses','chat','both'));"
    "ALTER TABLE account_state ADD COLUMN dialects_refused INTEGER NOT NULL DEFAULT 0;";

/* Migration 23 (issue 32): the anthropic account kind. The kind's CHECK
 * is widened in place (store_migration_widen applies it): SQLite's own
 * procedure for changing a CHECK constraint (the table definition edited
 * in sqlite_schema with writable_schema, the schema version bumped, all in
 * one transaction), since every row that held the old constraint holds
 * the new one and nothing on disk changes. The other way, a copy of the
 * table, would drop and make again its triggers and the state rows its
 * foreign keys cascade to. */
#define STORE_MIGRATION_WIDEN 23
static const char store_migration_23[] =
    "UPDATE sqlite_schema SET sql = replace(sql,"
    " 'CHECK (kind IN (''api_key'',''chatgpt'',''aggregate''))',"
    " 'CHECK (kind IN (''api_key'',''chatgpt'',''aggregate'',''anthropic''))')"
    " WHERE type = 'table' AND name = 'accounts'"
    " AND instr(sql, 'CHECK (kind IN (''api_key'',''chatgpt'',''aggregate''))') > 0;";

static const char *const store_migrations[] = {store_migration_1,  store_migration_2,  store_migration_3,
                                               store_migration_4,  store_migration_5,  store_migration_6,
                                               store_migration_7,  store_migration_8,  store_migration_9,
                                               store_migration_10, store_migration_11, store_migration_12,
                                               store_migration_13, store_migration_14, store_migration_15,
                                               store_migration_16, store_migration_17, store_migration_18,
                                               store_migration_19, store_migration_20, store_migration_21,
                                               store_migration_22, store_migration_23};
#define STORE_SCHEMA_VERSION ((int)(sizeof store_migrations / sizeof store_migrations[0]))

/* The highest applied version, 0 for a fresh database, -1 on error. */
int store_schema_version(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    int v = -1;
    if (sqlite3_prepare_v2(db, "SELECT coalesce(max(version), 0) FROM schema_migrations", -1, &st,
                           NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return v;
}

int store_schema_latest(void) { return STORE_SCHEMA_VERSION; }

static int store_migration_record(sqlite3 *db, int version)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "INSERT INTO schema_migrations(version, applied_at) VALUES (?, ?)",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int(st, 1, version);
        sqlite3_bind_int64(st, 2, store_now());
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    }
    sqlite3_finalize(st);
    return rc;
}

/* A migration that edits a table's definition in sqlite_schema (inside the
 * caller's transaction): writable_schema on for the edit, the schema
 * version bumped so every connection reads the definition again. */
static int store_migration_widen(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(db, "PRAGMA schema_version", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version < 0) {
        store_errf(err, errlen, "schema_version: %s", sqlite3_errmsg(db));
        return SQLITE_ERROR;
    }
    char bump[64];
    snprintf(bump, sizeof bump, "PRAGMA schema_version = %d", version + 1);
    int rc = store_exec(db, "PRAGMA writable_schema = ON", err, errlen);
    if (rc == SQLITE_OK)
        rc = store_exec(db, sql, err, errlen);
    if (rc == SQLITE_OK) { /* widened now, or before (a migration record lost): else not the expected table */
        sqlite3_stmt *q = NULL;
        int ok = sqlite3_prepare_v2(db,
                                    "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'accounts'"
                                    " AND instr(sql, '''anthropic''') > 0",
                                    -1, &q, NULL) == SQLITE_OK &&
                 sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0) == 1;
        sqlite3_finalize(q);
        if (!ok) {
            store_errf(err, errlen, "the accounts table's definition is not the expected one");
            rc = SQLITE_ERROR;
        }
    }
    if (rc == SQLITE_OK)
        rc = store_exec(db, bump, err, errlen);
    int off = store_exec(db, "PRAGMA writable_schema = OFF", rc == SQLITE_OK ? err : NULL, errlen);
    return rc != SQLITE_OK ? rc : off;
}

/* Applies one migration in its own IMMEDIATE transaction; the version check
 * happens inside it so two processes opening a fresh file cannot both apply. */
static int store_migration_apply(sqlite3 *db, int version, char *err, size_t errlen)
{
    if (store_exec(db, "BEGIN IMMEDIATE", err, errlen) != SQLITE_OK)
        return -1;
    int have = store_schema_version(db);
    int rc = have < 0 ? SQLITE_ERROR : SQLITE_OK;
    if (rc == SQLITE_OK && have < version) {
        rc = version == STORE_MIGRATION_WIDEN ? store_migration_widen(db, store_migrations[version - 1], err, errlen)
                                              : store_exec(db, store_migrations[version - 1], err, errlen);
        if (rc == SQLITE_OK && (rc = store_migration_record(db, version)) != SQLITE_OK)
            store_errf(err, errlen, "%s", sqlite3_errmsg(db));
    }
    if (rc == SQLITE_OK && store_exec(db, "COMMIT", err, errlen) == SQLITE_OK)
        return 0;
    store_exec(db, "ROLLBACK", NULL, 0);
    return -1;
}

/* Applies the migrations after the database's version, up to `upto`. */
static int store_migrate_to(sqlite3 *db, int upto, char *err, size_t errlen)
{
    if (store_exec(db, "CREATE TABLE IF NOT EXISTS schema_migrations ("
                       " version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
                   err, errlen) != SQLITE_OK)
        return -1;
    int have = store_schema_version(db);
    if (have > STORE_SCHEMA_VERSION) {
        store_errf(err, errlen, "database schema version %d is newer than this build supports (%d)",
                   have, STORE_SCHEMA_VERSION);
        return -1;
    }
    for (int v = have + 1; v <= upto && v <= STORE_SCHEMA_VERSION; v++) {
        char e[256] = "";
        if (store_migration_apply(db, v, e, sizeof e) != 0) {
            store_errf(err, errlen, "migration %d failed: %s", v, e);
            return -1;
        }
    }
    return 0;
}

int store_migrate(sqlite3 *db, char *err, size_t errlen)
{
    return store_migrate_to(db, STORE_SCHEMA_VERSION, err, errlen);
}

/* ---------- objects the schema does not define ---------- */

/* see store_internal.h. The reference is the schema itself, made in memory
 * by the same migrations up to the file's version: an object the file
 * holds that it has not is foreign (a trigger, a view, an index, a table),
 * and so is a trigger or view of ours whose SQL differs: those run SQL.
 * A table's or index's text is not compared (ALTER TABLE rewrites it, and
 * it runs nothing).
 * sqlite's own objects (sqlite_*: sqlite_sequence, automatic indexes)
 * have no SQL of anyone's and are left out. */
int store_schema_foreign(sqlite3 *db, char *out, size_t n, char *err, size_t errlen)
{
    sqlite3_stmt *has = NULL;
    int versioned = sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table'"
                                           " AND name = 'schema_migrations'", -1, &has, NULL) == SQLITE_OK &&
                    sqlite3_step(has) == SQLITE_ROW && sqlite3_column_int(has, 0) == 1;
    sqlite3_finalize(has);
    int version = versioned ? store_schema_version(db) : 0; /* a new file: nothing is ours yet */
    if (version < 0) {
        store_errf(err, errlen, "cannot read the schema version: %s", sqlite3_errmsg(db));
        return -1;
    }
    sqlite3 *ref = NULL;
    if (sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        store_errf(err, errlen, "cannot make the reference schema: out of memory");
        sqlite3_close(ref);
        return -1;
    }
    int rc = -1;
    if (store_exec(ref, "CREATE TABLE IF NOT EXISTS schema_migrations ("
                        " version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
                   err, errlen) == SQLITE_OK &&
        (version == 0 || store_migrate_to(ref, version, err, errlen) == 0))
        rc = 0;
    sqlite3_stmt *st = NULL, *q = NULL;
    if (rc == 0 &&
        (sqlite3_prepare_v2(db,
                            "SELECT type, name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
                            " ORDER BY rowid",
                            -1, &st, NULL) != SQLITE_OK ||
         sqlite3_prepare_v2(ref,
                            "SELECT count(*) FROM sqlite_schema WHERE type = ?1 AND name = ?2"
                            " AND (type IN ('table', 'index') OR sql IS ?3)",
                            -1, &q, NULL) != SQLITE_OK)) {
        store_errf(err, errlen, "cannot read the schema: %s", sqlite3_errmsg(st ? ref : db));
        rc = -1;
    }
    if (out && n)
        out[0] = '\0';
    while (rc == 0) {
        int step = sqlite3_step(st);
        if (step == SQLITE_DONE)
            break;
        if (step != SQLITE_ROW) {
            store_errf(err, errlen, "cannot read the schema: %s", sqlite3_errmsg(db));
            rc = -1;
            break;
        }
        sqlite3_reset(q);
        for (int i = 0; i < 3; i++)
            sqlite3_bind_value(q, i + 1, sqlite3_column_value(st, i));
        if (sqlite3_step(q) != SQLITE_ROW || sqlite3_column_int(q, 0) != 1) {
            const char *type = (const char *)sqlite3_column_text(st, 0), *name = (const char *)sqlite3_column_text(st, 1);
            if (out && n)
                snprintf(out, n, "%s %s", type ? type : "object", name ? name : "?");
            rc = 1;
        }
    }
    sqlite3_finalize(q);
    sqlite3_finalize(st);
    sqlite3_close(ref);
    return rc;
}
