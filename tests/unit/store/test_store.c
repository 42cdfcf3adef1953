/* test_store.c: the sqlite store: migrations (including the in-place
 * upgrade of a migration-1 database), file modes, accounts and keys (and
 * their administration by name), settings, config_version across
 * connections, response owners, and the writer thread (batching,
 * coalescing, bounded queue, owner pruning, retry after disk full,
 * durability across a kill -9 after store_writer_sync). */
#include "check.h"
#include "test_sql.h"
#include "base/sha256.h"
#include "store/store.h"
#include "store/store_admin.h"
#include <ctype.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The schema version a fresh database reaches: the last migration. */
#define TEST_SCHEMA_VERSION 23

static char test_dir[64];
static int test_seq;

/* A fresh database path for each test. */
static const char *test_db_path(char *buf, size_t n)
{
    snprintf(buf, n, "%s/t%d.db", test_dir, ++test_seq);
    return buf;
}

static store *test_open(const char *path)
{
    char err[256] = "";
    store *s = store_open(path, err, sizeof err);
    if (!s)
        fprintf(stderr, "  store_open(%s): %s\n", path, err);
    return s;
}

static int64_t test_add_account(store *s, const char *name, int sort, account_kind kind)
{
    account_new a = {.name = name, .base_url = "https://api.example.com/v1", .token = "sk-test-token-0123456789",
                     .kind = kind, .sort = sort, .max_concurrency = -1};
    int64_t id = 0;
    char err[256] = "";
    if (store_account_add(s, &a, &id, err, sizeof err) != 0)
        fprintf(stderr, "  store_account_add(%s): %s\n", name, err);
    return id;
}

/* One integer from a raw sqlite connection, independent of the store. */
static int test_integrity_ok(const char *path)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int ok = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        ok = strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0;
    sqlite3_finalize(st);
    sqlite3_close(db);
    return ok;
}

static int test_file_mode(const char *path, const char *suffix)
{
    char p[256];
    struct stat sb;
    snprintf(p, sizeof p, "%s%s", path, suffix);
    return stat(p, &sb) == 0 ? (int)(sb.st_mode & 0777) : -1;
}

/* 1 if needle occurs in the file (or the file is unreadable). */
static int test_file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    int found = 1;
    if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n)
        found = memmem(buf, (size_t)n, needle, strlen(needle)) != NULL;
    free(buf);
    fclose(f);
    return found;
}

static request_log test_log(int i)
{
    request_log r;
    memset(&r, 0, sizeof r);
    r.ts = 1700000000.0 + i;
    r.platform_key_id = 1;
    snprintf(r.endpoint, sizeof r.endpoint, "/v1/responses");
    snprintf(r.model, sizeof r.model, "gpt-test");
    r.stream = i % 2;
    snprintf(r.account_name, sizeof r.account_name, "acct");
    r.status = 200;
    r.attempts = 1;
    r.latency_ms = 12.5;
    snprintf(r.route_strategy, sizeof r.route_strategy, "ordered");
    r.input_tokens = r.output_tokens = r.total_tokens = -1;
    return r;
}

static account_state test_state(int64_t account_id, int step)
{
    account_state st;
    memset(&st, 0, sizeof st);
    st.account_id = account_id;
    st.cooldown_until = 1700000000.5 + step;
    st.ladder_step = step;
    snprintf(st.last_error, sizeof st.last_error, "rate_limit");
    st.primary_used_pct = st.secondary_used_pct = -1;
    st.success_ema = 0.5;
    return st;
}

/* Text collected by the settings and owners callbacks. */
typedef struct test_text {
    char text[512];
} test_text;

/* ---------- schema and files ---------- */

static void test_store_migrations_are_idempotent_on_reopen(void)
{
    char path[128];
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    CHECK(s != NULL);
    int64_t v = store_config_version(s);
    store_close(s);
    s = test_open(path);
    CHECK(s != NULL);
    CHECK_EQ_INT(store_config_version(s), v);
    store_close(s);
    /* each migration recorded once, none twice */
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM schema_migrations"), TEST_SCHEMA_VERSION);
    CHECK_EQ_INT(test_sql_int(path, "SELECT max(version) FROM schema_migrations"), TEST_SCHEMA_VERSION);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM sqlite_master WHERE name='request_logs_ts'"), 1);
    CHECK_EQ_INT(test_sql_int(path, "SELECT journal_mode = 'wal' FROM pragma_journal_mode"), 1);
}

/* Migration 23 widens the kind's CHECK in place: an anthropic account can
 * be written, an unknown kind still cannot, the table keeps its triggers
 * (the config version bump) and the file checks whole. */
static void test_store_migration_23_takes_the_anthropic_kind_in_place(void)
{
    char path[128];
    test_db_path(path, sizeof path);
    store_close(test_open(path));
    int triggers = test_sql_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'accounts'");
    CHECK(triggers > 0);
    test_sql_exec(path, "INSERT INTO accounts(name, kind, base_url, token, created_at, updated_at)"
                        " VALUES ('claude', 'anthropic', 'https://api.anthropic.com/v1', 'sk-ant-x', 1, 1)");
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE kind = 'anthropic'"), 1);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'accounts'"),
                 triggers);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
    store *s = test_open(path);
    CHECK(s != NULL);
    account *list = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_accounts_load(s, &list, &n), 0);
    CHECK_EQ_INT((int)n, 1);
    CHECK_EQ_INT(list[0].kind, ACCOUNT_ANTHROPIC);
    CHECK_EQ_INT((int)account_dialects(&list[0], NULL), (int)ACCOUNT_DIALECT_MESSAGES);
    store_accounts_free(list, n);
    store_close(s);
}

static void test_store_refuses_newer_schema(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store_close(test_open(path));
    test_sql_exec(path, "INSERT INTO schema_migrations(version, applied_at) VALUES (99, 0)");
    store *s = store_open(path, err, sizeof err);
    CHECK(s == NULL);
    CHECK(strstr(err, "newer") != NULL);
    store_close(s);
}

static void test_store_files_are_mode_0600(void)
{
    char path[128];
    mode_t old = umask(022);
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    CHECK(s != NULL);
    test_add_account(s, "a", 0, ACCOUNT_API_KEY);
    CHECK_EQ_INT(test_file_mode(path, ""), 0600);
    CHECK_EQ_INT(test_file_mode(path, "-wal"), 0600);
    CHECK_EQ_INT(test_file_mode(path, "-shm"), 0600);
    store_close(s);
    umask(old);
}

static void test_store_tightens_existing_wide_file(void)
{
    char path[128];
    test_db_path(path, sizeof path);
    store_close(test_open(path));
    CHECK_EQ_INT(chmod(path, 0644), 0);
    store *s = test_open(path);
    CHECK(s != NULL);
    CHECK_EQ_INT(test_file_mode(path, ""), 0600);
    store_close(s);
}

/* ---------- accounts ---------- */

static void test_store_accounts_load_in_sort_updated_id_order(void)
{
    char path[128];
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    int64_t a = test_add_account(s, "a", 5, ACCOUNT_API_KEY);
    int64_t b = test_add_account(s, "b", 1, ACCOUNT_API_KEY);
    int64_t c = test_add_account(s, "c", 1, ACCOUNT_API_KEY);
    int64_t d = test_add_account(s, "d", 1, ACCOUNT_API_KEY);
    test_sql_exec(path, "UPDATE accounts SET updated_at = 100 WHERE name IN ('b', 'd');"
                        "UPDATE accounts SET updated_at = 200 WHERE name = 'c'");
    account *acc = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_accounts_load(s, &acc, &n), 0);
    CHECK_EQ_INT(n, 4);
    if (n == 4) { /* sort 1 first; c is newest; b and d tie, id ASC; then a */
        CHECK_EQ_INT(acc[0].id, c);
        CHECK_EQ_INT(acc[1].id, b);
        CHECK_EQ_INT(acc[2].id, d);
        CHECK_EQ_INT(acc[3].id, a);
        CHECK_EQ_STR(acc[3].base_url, "https://api.example.com/v1");
        CHECK_EQ_STR(acc[3].token, "sk-test-token-0123456789");
        CHECK_EQ_INT(acc[3].enabled, 1);
        CHECK(acc[3].model_map == NULL && acc[3].chatgpt_account_id == NULL);
    }
    store_accounts_free(acc, n);
    store_close(s);
}

static void test_store_max_concurrency_defaults_by_kind(void)
{
    char path[128];
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    test_add_account(s, "oauth", 0, ACCOUNT_CHATGPT);
    test_add_account(s, "api", 1, ACCOUNT_API_KEY);
    test_add_account(s, "agg", 2, ACCOUNT_AGGREGATE);
    account_new x = {.name = "explicit", .base_url = "http://x", .token = "t", .kind = ACCOUNT_CHATGPT,
                     .sort = 3, .max_concurrency = 4, .chatgpt_account_id = "acc-1",
                     .model_map = "{\"a\":\"b\"}"};
    CHECK_EQ_INT(store_account_add(s, &x, NULL, NULL, 0), 0);
    account *acc = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_accounts_load(s, &acc, &n), 0);
    CHECK_EQ_INT(n, 4);
    if (n == 4) {
        CHECK_EQ_INT(acc[0].kind, ACCOUNT_CHATGPT);
        CHECK_EQ_INT(acc[0].max_concurrency, 1);
        CHECK_EQ_INT(acc[1].max_concurrency, 0);
        CHECK_EQ_INT(acc[2].kind, ACCOUNT_AGGREGATE);
        CHECK_EQ_INT(acc[2].max_concurrency, 0);
        CHECK_EQ_INT(acc[3].max_concurrency, 4);
        CHECK_EQ_STR(acc[3].chatgpt_account_id, "acc-1");
        CHECK_EQ_STR(acc[3].model_map, "{\"a\":\"b\"}");
    }
    store_accounts_free(acc, n);
    store_close(s);
}

static void test_store_duplicate_account_name_is_an_error(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    CHECK(test_add_account(s, "dup", 0, ACCOUNT_API_KEY) > 0);
    account_new a = {.name = "dup", .base_url = "https://x", .token = "t", .max_concurrency = -1};
    CHECK_EQ_INT(store_account_add(s, &a, NULL, err, sizeof err), -1);
    CHECK(strstr(err, "already exists") != NULL);
    store_close(s);
}

static void test_store_account_add_rejects_bad_input(void)
{
    char path[128], err[256];
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    account_new a = {.name = "x", .base_url = "ftp://x", .token = "t", .max_concurrency = -1};
    CHECK_EQ_INT(store_account_add(s, &a, NULL, err, sizeof err), -1);
    a.base_url = "https://x";
    a.model_map = "[1,2]";
    CHECK_EQ_INT(store_account_add(s, &a, NULL, err, sizeof err), -1);
    CHECK(strstr(err, "JSON object") != NULL);
    a.model_map = "{\"a\":";
    CHECK_EQ_INT(store_account_add(s, &a, NULL, err, sizeof err), -1);
    a.model_map = NULL;
    a.token = "";
    CHECK_EQ_INT(store_account_add(s, &a, NULL, err, sizeof err), -1);
    account *acc = NULL;
    size_t n = 9;
    CHECK_EQ_INT(store_accounts_load(s, &acc, &n), 0);
    CHECK_EQ_INT(n, 0);
    store_accounts_free(acc, n);
    store_close(s);
}

static void test_store_account_kind_names_round_trip(void)
{
    account_kind k;
    CHECK_EQ_INT(account_kind_parse("chatgpt", &k), 0);
    CHECK_EQ_INT(k, ACCOUNT_CHATGPT);
    CHECK_EQ_STR(account_kind_name(ACCOUNT_AGGREGATE), "aggregate");
    CHECK_EQ_INT(account_kind_parse("oauth", &k), -1);
}

/* ---------- platform keys ---------- */

static void test_store_key_add_stores_only_the_hash(void)
{
    char path[128], key[64], wal[140];
    int64_t id = 0;
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    CHECK_EQ_INT(store_key_add(s, "team", key, sizeof key, &id, NULL, 0), 0);
    CHECK(id > 0);
    CHECK_EQ_INT(strlen(key), 43);
    CHECK(strncmp(key, "sy-", 3) == 0);
    for (size_t i = 3; i < strlen(key); i++)
        CHECK(isalnum((unsigned char)key[i]));
    char hex[65];
    sha256_hex(key, strlen(key), hex);
    platform_key *k = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_keys_load(s, &k, &n), 0);
    CHECK_EQ_INT(n, 1);
    if (n == 1) {
        CHECK_EQ_STR(k[0].hash, hex);
        CHECK_EQ_INT(k[0].id, id);
        CHECK_EQ_STR(k[0].name, "team");
        CHECK_EQ_INT(strlen(k[0].prefix), 7);
        CHECK(strncmp(k[0].prefix, key, 7) == 0);
        CHECK_EQ_INT(k[0].revoked, 0);
        CHECK_EQ_INT(k[0].preferred_account_id, 0);
    }
    store_keys_free(k, n);
    snprintf(wal, sizeof wal, "%s-wal", path);
    CHECK(!test_file_contains(wal, key + 3));
    store_close(s);
    CHECK(!test_file_contains(path, key + 3));
    CHECK(!test_file_contains(path, key + 10));
}

static void test_store_key_add_makes_distinct_keys(void)
{
    char path[128], k1[64], k2[64];
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    CHECK_EQ_INT(store_key_add(s, "a", k1, sizeof k1, NULL, NULL, 0), 0);
    CHECK_EQ_INT(store_key_add(s, "b", k2, sizeof k2, NULL, NULL, 0), 0);
    CHECK(strcmp(k1, k2) != 0);
    char small[16];
    CHECK_EQ_INT(store_key_add(s, "c", small, sizeof small, NULL, NULL, 0), -1);
    store_close(s);
}

static void test_store_key_set_preferred(void)
{
    char path[128], key[64];
    int64_t kid = 0;
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    int64_t acc = test_add_account(s, "a", 0, ACCOUNT_API_KEY);
    CHECK_EQ_INT(store_key_add(s, "k", key, sizeof key, &kid, NULL, 0), 0);
    CHECK_EQ_INT(store_key_set_preferred(s, kid, acc), 0);
    CHECK_EQ_INT(store_key_set_preferred(s, kid, 9999), -1); /* no such account */
    CHECK_EQ_INT(store_key_set_preferred(s, 9999, acc), -1); /* no such key */
    platform_key *k = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_keys_load(s, &k, &n), 0);
    CHECK(n == 1 && k[0].preferred_account_id == acc);
    store_keys_free(k, n);
    CHECK_EQ_INT(store_key_set_preferred(s, kid, 0), 0);
    store_keys_load(s, &k, &n);
    CHECK(n == 1 && k[0].preferred_account_id == 0);
    store_keys_free(k, n);
    store_close(s);
}

/* ---------- config_version ---------- */

static void test_store_config_version_bumps_across_connections(void)
{
    char path[128], key[64];
    test_db_path(path, sizeof path);
    store *cli = test_open(path);
    store *server = test_open(path);
    int64_t v0 = store_config_version(server);
    CHECK(v0 > 0);
    test_add_account(cli, "a", 0, ACCOUNT_API_KEY);
    int64_t v1 = store_config_version(server);
    CHECK(v1 > v0);
    store_key_add(cli, "k", key, sizeof key, NULL, NULL, 0);
    int64_t v2 = store_config_version(server);
    CHECK(v2 > v1);
    test_sql_exec(path, "UPDATE accounts SET enabled = 0");
    CHECK(store_config_version(server) > v2);
    store_close(cli);
    store_close(server);
}

/* Another process mid-transaction must neither block the read nor leak its
 * uncommitted bump (WAL snapshot; the main connection has busy_timeout 0). */
static void test_store_config_version_reads_during_foreign_write_txn(void)
{
    char path[128];
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    int64_t v0 = store_config_version(s);
    sqlite3 *other = NULL;
    CHECK_EQ_INT(sqlite3_open_v2(path, &other, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(other, "BEGIN IMMEDIATE; UPDATE meta SET value = value + 10"
                                     " WHERE key = 'config_version'", NULL, NULL, NULL), SQLITE_OK);
    CHECK_EQ_INT(store_config_version(s), v0);
    CHECK_EQ_INT(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(other);
    CHECK_EQ_INT(store_config_version(s), v0 + 10);
    store_close(s);
}

/* ---------- writer ---------- */

static void test_store_writer_commits_logs_and_states(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    int64_t a = test_add_account(s, "a", 0, ACCOUNT_API_KEY);
    int64_t b = test_add_account(s, "b", 1, ACCOUNT_API_KEY);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    for (int i = 0; i < 1000; i++) {
        request_log r = test_log(i);
        store_writer_put_log(s, &r);
        account_state st = test_state(i % 2 ? a : b, i);
        store_writer_put_state(s, &st);
    }
    store_writer_sync(s);
    CHECK_EQ_INT(store_request_log_count(s), 1000);
    account_state *sts = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_states_load(s, &sts, &n), 0);
    CHECK_EQ_INT(n, 2);
    if (n == 2) {
        CHECK_EQ_INT(sts[0].account_id, a);
        CHECK_EQ_INT(sts[0].ladder_step, 999);
        CHECK_EQ_INT(sts[1].ladder_step, 998);
        CHECK_EQ_STR(sts[0].last_error, "rate_limit");
        CHECK(sts[0].cooldown_until == 1700000000.5 + 999);
    }
    free(sts);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM request_logs WHERE input_tokens IS NULL"), 1000);
    store_close(s);
}

/* A v12 database (request_logs with AUTOINCREMENT, ids with gaps) keeps
 * its rows and ids through migration 13; the rebuilt table has no
 * AUTOINCREMENT, no sqlite_sequence row, its ts index, and numbers the next
 * row after the largest id. */
/* Undoes migration 14 (the stored conversations). */
#define TEST_DROP_MIGRATION_14 " DROP TABLE conversations;"
/* Undoes migration 17 (the family cooldowns). */
#define TEST_DROP_MIGRATION_17 " ALTER TABLE account_state DROP COLUMN family_cooldowns;"
/* Undoes migration 20 (the shared rows' record) and 19 (an account's prefill). */
/* Undoes migration 22 (the dialects an account speaks, declared and learned). */
#define TEST_DROP_MIGRATION_22 \
    " ALTER TABLE accounts DROP COLUMN speaks; ALTER TABLE account_state DROP COLUMN dialects_refused;"
#define TEST_DROP_MIGRATION_20 " DROP TABLE shared_sync;"
#define TEST_DROP_MIGRATION_19 " ALTER TABLE accounts DROP COLUMN prefill;"
#define TEST_DROP_MIGRATION_18 \
    " ALTER TABLE account_state DROP COLUMN models_learned; ALTER TABLE account_state DROP COLUMN models_codex;"
/* Undoes migration 16 (an account's --models). */
#define TEST_DROP_MIGRATION_16 " ALTER TABLE accounts DROP COLUMN models;"
/* Undoes migration 15 (an account's hold). */
#define TEST_DROP_MIGRATION_15                                                                              \
    " ALTER TABLE accounts DROP COLUMN hold; ALTER TABLE accounts DROP COLUMN hold_detail;"                 \
    " ALTER TABLE accounts DROP COLUMN hold_since;"

static void test_store_migration_13_drops_autoincrement_and_keeps_ids(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store_close(test_open(path));
    test_sql_exec(path,
                  "DROP TABLE request_logs;"
                  "CREATE TABLE request_logs (id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL,"
                  " platform_key_id INTEGER, endpoint TEXT NOT NULL, model TEXT NOT NULL, stream INTEGER NOT NULL,"
                  " account_id INTEGER, account_name TEXT NOT NULL, status INTEGER NOT NULL, attempts INTEGER NOT NULL,"
                  " latency_ms REAL NOT NULL, route_strategy TEXT NOT NULL, error_class TEXT NOT NULL,"
                  " input_tokens INTEGER, output_tokens INTEGER, total_tokens INTEGER, attempts_json TEXT,"
                  " upstream_model TEXT, resumed INTEGER NOT NULL DEFAULT 0, cached_tokens INTEGER, cost_usd REAL);"
                  "CREATE INDEX request_logs_ts ON request_logs(ts);"
                  "INSERT INTO request_logs(id, ts, endpoint, model, stream, account_name, status, attempts, latency_ms,"
                  " route_strategy, error_class, attempts_json, cost_usd) VALUES"
                  " (3, 1700000003, '/v1/responses', 'm3', 0, 'a', 200, 1, 1.5, 'ordered', '', '[3]', 0.5),"
                  " (7, 1700000007, '/v1/responses', 'm7', 1, 'a', 429, 2, 2.5, 'ordered', 'quota', NULL, NULL);"
                  TEST_DROP_MIGRATION_22 TEST_DROP_MIGRATION_20 TEST_DROP_MIGRATION_19 TEST_DROP_MIGRATION_18 TEST_DROP_MIGRATION_17 TEST_DROP_MIGRATION_16 TEST_DROP_MIGRATION_15 TEST_DROP_MIGRATION_14 "DELETE FROM schema_migrations WHERE version >= 13;");
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM sqlite_sequence WHERE name = 'request_logs'"), 1);
    store *s = test_open(path);
    CHECK(s != NULL);
    CHECK_EQ_INT(test_sql_int(path, "SELECT max(version) FROM schema_migrations"), TEST_SCHEMA_VERSION);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM request_logs"), 2);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM request_logs WHERE id = 3 AND model = 'm3'"
                                    " AND attempts_json = '[3]' AND cost_usd = 0.5 AND resumed = 0"), 1);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM request_logs WHERE id = 7 AND status = 429"
                                    " AND error_class = 'quota' AND attempts_json IS NULL AND stream = 1"), 1);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'request_logs'"
                                    " AND sql LIKE '%AUTOINCREMENT%'"), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM sqlite_sequence WHERE name = 'request_logs'"), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'index'"
                                    " AND name = 'request_logs_ts' AND tbl_name = 'request_logs'"), 1);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    request_log r = test_log(9);
    store_writer_put_log(s, &r);
    store_writer_sync(s);
    CHECK_EQ_INT(test_sql_int(path, "SELECT max(id) FROM request_logs"), 8);
    store_close(s);
    CHECK(test_integrity_ok(path));
}

/* Row i of the multi-row tests: every column differs from row to row, so a
 * parameter bound to the wrong row or column shows. */
static request_log test_log_distinct(int i)
{
    request_log r = test_log(i);
    r.platform_key_id = 1000 + i;
    snprintf(r.endpoint, sizeof r.endpoint, "/e%d", i);
    snprintf(r.model, sizeof r.model, "m%d", i);
    r.account_id = 2000 + i;
    snprintf(r.account_name, sizeof r.account_name, "a%d", i);
    r.status = 300 + i;
    r.attempts = 1 + i;
    r.latency_ms = 0.5 + i;
    snprintf(r.route_strategy, sizeof r.route_strategy, "r%d", i);
    snprintf(r.error_class, sizeof r.error_class, "c%d", i);
    r.input_tokens = 3000 + i;
    r.output_tokens = 4000 + i;
    r.total_tokens = 7000 + 2 * i;
    char json[32];
    snprintf(json, sizeof json, "[%d]", i);
    r.attempts_json = strdup(json);
    snprintf(r.upstream_model, sizeof r.upstream_model, "u%d", i);
    r.resumed = i % 2;
    r.cached_tokens = 5000 + i;
    r.cost_usd = 0.25 * i;
    if (i % 2) { /* the odd ones failed and say why; the even ones have no message */
        char msg[32];
        snprintf(msg, sizeof msg, "e%d", i);
        r.error_message = strdup(msg);
    }
    return r;
}

/* The number of rows of request_logs equal, column by column, to what
 * test_log_distinct(i) made, for i in [0, n). */
static int64_t test_count_distinct_rows(const char *path, int n)
{
    char sql[1024];
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE i(v) AS (SELECT 0 UNION ALL SELECT v + 1 FROM i WHERE v + 1 < %d)"
             " SELECT count(*) FROM i JOIN request_logs r ON r.ts = 1700000000.0 + v"
             " AND r.platform_key_id = 1000 + v AND r.endpoint = '/e' || v AND r.model = 'm' || v"
             " AND r.stream = v %% 2 AND r.account_id = 2000 + v AND r.account_name = 'a' || v"
             " AND r.status = 300 + v AND r.attempts = 1 + v AND r.latency_ms = 0.5 + v"
             " AND r.route_strategy = 'r' || v AND r.error_class = 'c' || v AND r.input_tokens = 3000 + v"
             " AND r.output_tokens = 4000 + v AND r.total_tokens = 7000 + 2 * v"
             " AND r.attempts_json = '[' || v || ']' AND r.upstream_model = 'u' || v"
             " AND r.resumed = v %% 2 AND r.cached_tokens = 5000 + v AND r.cost_usd = 0.25 * v"
             " AND r.error_message IS (CASE WHEN v %% 2 THEN 'e' || v END)",
             n);
    return test_sql_int(path, sql);
}

/* 45 queued rows make one batch, written as INSERTs of 32, 8, 4 and 1
 * rows: every column of every row lands as queued, in queue order. */
static void test_store_writer_multi_row_inserts_keep_each_rows_values(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    for (int i = 0; i < 45; i++) {
        request_log r = test_log_distinct(i);
        store_writer_put_log(s, &r);
    }
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    store_writer_sync(s);
    CHECK_EQ_INT(store_request_log_count(s), 45);
    CHECK_EQ_INT(test_count_distinct_rows(path, 45), 45);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM request_logs a JOIN request_logs b ON b.id = a.id + 1"
                                    " WHERE b.ts <= a.ts"), 0);
    for (int i = 45; i < 52; i++) { /* a second batch: 4, 2 and 1 rows */
        request_log r = test_log_distinct(i);
        store_writer_put_log(s, &r);
    }
    store_writer_sync(s);
    CHECK_EQ_INT(test_count_distinct_rows(path, 52), 52);
    store_close(s);
}

/* A row the database refuses (here a trigger's RAISE(ABORT), a constraint
 * error) is skipped alone: the 32-row INSERT it was in is taken back by
 * sqlite and its other rows go in one by one. */
static void test_store_writer_skips_only_the_row_a_constraint_refuses(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path); /* opened first: a file holding the test's trigger would be refused */
    test_sql_exec(path, "CREATE TRIGGER refuse BEFORE INSERT ON request_logs WHEN NEW.model = 'm17'"
                        " BEGIN SELECT RAISE(ABORT, 'refused'); END;");
    for (int i = 0; i < 40; i++) {
        request_log r = test_log_distinct(i);
        store_writer_put_log(s, &r);
    }
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    store_writer_sync(s);
    CHECK_EQ_INT(store_request_log_count(s), 39);
    CHECK_EQ_INT(test_count_distinct_rows(path, 40), 39);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM request_logs WHERE model = 'm17'"), 0);
    store_writer_stats ws;
    store_writer_stats_get(s, &ws);
    CHECK_EQ_INT(ws.failed_commits, 0);
    store_close(s);
}

/* An account's state: inserted by the first batch, updated in place by the
 * next (the writer's update path); every field of the second lands. */
static void test_store_writer_updates_every_state_field_in_place(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    int64_t a = test_add_account(s, "a", 0, ACCOUNT_API_KEY);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    account_state st = test_state(a, 1);
    store_writer_put_state(s, &st);
    store_writer_sync(s);
    account_state w = {.account_id = a, .cooldown_until = 11, .ladder_step = 2, .last_429_at = 12,
                       .primary_used_pct = 13, .secondary_used_pct = 14, .primary_reset_at = 15,
                       .secondary_reset_at = 16, .primary_window_s = 17, .secondary_window_s = 18,
                       .has_credits = 1, .credits_unlimited = 0, .credits_balance = 19, .usage_polled_at = 20,
                       .usage_poll_status = 204, .success_ema = 0.25, .latency_ema_ms = 21, .updated_at = 22,
                       .success_rate_60s = 0.75, .latency_60s_ms = 23, .attempts_60s = 24};
    snprintf(w.last_error, sizeof w.last_error, "server_error");
    snprintf(w.plan_type, sizeof w.plan_type, "pro");
    snprintf(w.fam[1].family, sizeof w.fam[1].family, "codex_fast");
    snprintf(w.fam[1].model, sizeof w.fam[1].model, "m-fast");
    w.fam[1].until = 25, w.fam[1].last_429_at = 26, w.fam[1].ladder_step = 3;
    w.fam[1].primary_used_pct = 100, w.fam[1].secondary_used_pct = -1, w.fam[1].primary_reset_at = 27;
    store_writer_put_state(s, &w);
    store_writer_sync(s);
    account_state *sts = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_states_load(s, &sts, &n), 0);
    CHECK_EQ_INT(n, 1);
    if (n == 1) {
        account_state *g = &sts[0];
        CHECK(g->cooldown_until == 11 && g->ladder_step == 2 && g->last_429_at == 12);
        CHECK(g->primary_used_pct == 13 && g->secondary_used_pct == 14 && g->primary_reset_at == 15);
        CHECK(g->secondary_reset_at == 16 && g->primary_window_s == 17 && g->secondary_window_s == 18);
        CHECK(g->has_credits == 1 && g->credits_unlimited == 0 && g->credits_balance == 19);
        CHECK(g->usage_polled_at == 20 && g->usage_poll_status == 204 && g->success_ema == 0.25);
        CHECK(g->latency_ema_ms == 21 && g->updated_at == 22 && g->success_rate_60s == 0.75);
        CHECK(g->latency_60s_ms == 23 && g->attempts_60s == 24);
        CHECK_EQ_STR(g->last_error, "server_error");
        CHECK_EQ_STR(g->plan_type, "pro");
        /* the family slot comes back (compacted to the first) */
        CHECK_EQ_STR(g->fam[0].family, "codex_fast");
        CHECK_EQ_STR(g->fam[0].model, "m-fast");
        CHECK(g->fam[0].until == 25 && g->fam[0].last_429_at == 26 && g->fam[0].ladder_step == 3);
        CHECK(g->fam[0].primary_used_pct == 100 && g->fam[0].secondary_used_pct == -1);
        CHECK(g->fam[0].primary_reset_at == 27 && g->fam[1].family[0] == '\0');
    }
    free(sts);
    store_close(s);
}

/* Stored family slots are untrusted text: what is not an array of good
 * slots loads as none (or only the good ones), never past the slots. */
static void test_store_families_parse_keeps_only_good_slots(void)
{
    account_state st;
    memset(&st, 0, sizeof st);
    store_families_parse(&st, "[{\"family\":\"codex_a\",\"model\":\"m\",\"until\":5,\"ladder_step\":1e300},"
                              "{\"family\":\"bad name\"},{\"family\":\"codex_b\",\"primary_used_pct\":500},"
                              "{\"family\":\"c3\"},{\"family\":\"c4\"},{\"family\":\"c5\"}]");
    CHECK_EQ_STR(st.fam[0].family, "codex_a");
    CHECK(st.fam[0].until == 5 && st.fam[0].ladder_step == 0);
    CHECK_EQ_STR(st.fam[1].family, "codex_b");
    CHECK(st.fam[1].primary_used_pct == -1);
    CHECK_EQ_STR(st.fam[3].family, "c4");
    store_families_parse(&st, "{\"family\":\"codex_a\"}");
    CHECK(st.fam[0].family[0] == '\0');
    store_families_parse(&st, "[1,2,");
    CHECK(st.fam[0].family[0] == '\0');
    sbuf out = SBUF_INIT;
    store_families_json(&st, &out);
    CHECK_EQ_INT(out.len, 0);
    sbuf_free(&out);
}

static void test_store_writer_coalesces_state_upserts_per_account(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    int64_t a = test_add_account(s, "a", 0, ACCOUNT_API_KEY);
    int64_t b = test_add_account(s, "b", 0, ACCOUNT_API_KEY);
    for (int i = 1; i <= 50000; i++) { /* queued before the writer runs */
        account_state st = test_state(i % 2 ? a : b, i);
        store_writer_put_state(s, &st);
    }
    store_writer_stats ws;
    store_writer_stats_get(s, &ws);
    CHECK_EQ_INT(ws.pending_states, 2);
    CHECK_EQ_INT(ws.pending_logs, 0);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    store_writer_sync(s);
    account_state *sts = NULL;
    size_t n = 0;
    store_states_load(s, &sts, &n);
    CHECK_EQ_INT(n, 2);
    if (n == 2) {
        CHECK_EQ_INT(sts[0].ladder_step, 49999);
        CHECK_EQ_INT(sts[1].ladder_step, 50000);
    }
    free(sts);
    store_close(s);
}

static void test_store_writer_drops_oldest_logs_when_queue_full(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    for (int i = 0; i < 100005; i++) {
        request_log r = test_log(i);
        store_writer_put_log(s, &r);
    }
    store_writer_stats ws;
    store_writer_stats_get(s, &ws);
    CHECK_EQ_INT(ws.pending_logs, 100000);
    CHECK_EQ_INT(ws.dropped_logs, 5);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    store_writer_sync(s);
    CHECK_EQ_INT(store_request_log_count(s), 100000);
    CHECK_EQ_INT(test_sql_int(path, "SELECT CAST(min(ts) - 1700000000 AS INTEGER) FROM request_logs"), 5);
    store_close(s);
}

static void test_store_writer_skips_state_of_deleted_account(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    int64_t a = test_add_account(s, "a", 0, ACCOUNT_API_KEY);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    account_state gone = test_state(a + 100, 1), kept = test_state(a, 2);
    store_writer_put_state(s, &gone);
    store_writer_put_state(s, &kept);
    request_log r = test_log(0);
    store_writer_put_log(s, &r);
    store_writer_sync(s);
    account_state *sts = NULL;
    size_t n = 0;
    store_states_load(s, &sts, &n);
    CHECK(n == 1 && sts[0].account_id == a);
    free(sts);
    CHECK_EQ_INT(store_request_log_count(s), 1);
    store_close(s);
}

static void test_store_close_drains_writer_and_reopen_keeps_data(void)
{
    char path[128], err[256] = "", key[64];
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    int64_t a = test_add_account(s, "a", 0, ACCOUNT_API_KEY);
    store_key_add(s, "k", key, sizeof key, NULL, NULL, 0);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    for (int i = 0; i < 3000; i++) {
        request_log r = test_log(i);
        store_writer_put_log(s, &r);
    }
    account_state st = test_state(a, 3);
    store_writer_put_state(s, &st);
    store_close(s); /* no sync: close must drain */
    s = test_open(path);
    CHECK_EQ_INT(store_request_log_count(s), 3000);
    account *acc = NULL;
    platform_key *k = NULL;
    account_state *sts = NULL;
    size_t na = 0, nk = 0, ns = 0;
    store_accounts_load(s, &acc, &na);
    store_keys_load(s, &k, &nk);
    store_states_load(s, &sts, &ns);
    CHECK_EQ_INT(na, 1);
    CHECK_EQ_INT(nk, 1);
    CHECK(ns == 1 && sts[0].ladder_step == 3);
    store_accounts_free(acc, na);
    store_keys_free(k, nk);
    free(sts);
    store_close(s);
}

/* The child commits through the writer, syncs, then dies by SIGKILL with no
 * store_close: the synced rows must survive and the file must be sound. */
static void test_store_writer_sync_survives_kill_9(void)
{
    char path[128];
    test_db_path(path, sizeof path);
    store_close(test_open(path));
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        store *s = store_open(path, NULL, 0);
        if (!s || store_writer_start(s, NULL, 0) != 0)
            _exit(3);
        for (int i = 0; i < 2500; i++) {
            request_log r = test_log(i);
            store_writer_put_log(s, &r);
        }
        store_writer_sync(s);
        for (int i = 0; i < 2000; i++) { /* in flight when killed: may or may not land */
            request_log r = test_log(100000 + i);
            store_writer_put_log(s, &r);
        }
        kill(getpid(), SIGKILL);
        _exit(4);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    store *s = test_open(path);
    CHECK(s != NULL);
    CHECK(store_request_log_count(s) >= 2500);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM request_logs WHERE ts < 1700100000"), 2500);
    store_close(s);
    CHECK(test_integrity_ok(path));
}

/* Child: a file size limit makes commits fail (SQLITE_FULL / IOERR); the
 * writer must keep the batch, retry, and commit everything once the limit
 * is lifted. Exit code 0 = all rows present. */
static int test_child_disk_full(const char *path)
{
    signal(SIGXFSZ, SIG_IGN); /* write() then fails with EFBIG instead */
    store *s = store_open(path, NULL, 0);
    if (!s || store_writer_start(s, NULL, 0) != 0)
        return 3;
    struct rlimit rl, tight;
    getrlimit(RLIMIT_FSIZE, &rl);
    tight = rl;
    tight.rlim_cur = 64 * 1024;
    setrlimit(RLIMIT_FSIZE, &tight);
    for (int i = 0; i < 5000; i++) {
        request_log r = test_log(i);
        store_writer_put_log(s, &r);
    }
    store_writer_stats ws = {0};
    for (int i = 0; i < 500 && ws.failed_commits < 2; i++) {
        usleep(10000);
        store_writer_stats_get(s, &ws);
    }
    setrlimit(RLIMIT_FSIZE, &rl);
    store_writer_sync(s);
    int64_t n = store_request_log_count(s);
    store_close(s);
    if (ws.failed_commits < 2)
        return 5;
    return n == 5000 ? 0 : 6;
}

static void test_store_writer_retries_after_disk_full(void)
{
    char path[128];
    test_db_path(path, sizeof path);
    store_close(test_open(path));
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(test_child_disk_full(path));
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ_INT(WEXITSTATUS(status), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM request_logs"), 5000);
    CHECK(test_integrity_ok(path));
}

static void test_store_sync_without_writer_returns(void)
{
    char path[128];
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    request_log r = test_log(0);
    store_writer_put_log(s, &r);
    store_writer_sync(s); /* writer not started: must not hang */
    CHECK_EQ_INT(store_request_log_count(s), 0);
    store_close(s);
}

/* Undoes migration 7 (the login columns of accounts). */
#define TEST_DROP_MIGRATION_7                                                                              \
    " DROP INDEX accounts_chatgpt_account_id;"                                                             \
    " ALTER TABLE accounts DROP COLUMN refresh_token; ALTER TABLE accounts DROP COLUMN id_token;"          \
    " ALTER TABLE accounts DROP COLUMN email; ALTER TABLE accounts DROP COLUMN plan_type;"                 \
    " ALTER TABLE accounts DROP COLUMN token_expires_at; ALTER TABLE accounts DROP COLUMN last_refresh_at;" \
    " ALTER TABLE accounts DROP COLUMN login_error;"

/* Undoes migration 3 (usage columns of account_state). */
#define TEST_DROP_MIGRATION_3                                                                              \
    " ALTER TABLE account_state DROP COLUMN primary_window_s;"                                             \
    " ALTER TABLE account_state DROP COLUMN secondary_window_s;"                                           \
    " ALTER TABLE account_state DROP COLUMN plan_type; ALTER TABLE account_state DROP COLUMN has_credits;" \
    " ALTER TABLE account_state DROP COLUMN credits_unlimited;"                                            \
    " ALTER TABLE account_state DROP COLUMN credits_balance;"                                              \
    " ALTER TABLE account_state DROP COLUMN usage_polled_at;"                                              \
    " ALTER TABLE account_state DROP COLUMN usage_poll_status;"

/* Undoes migration 5 by hand. */
#define TEST_DROP_MIGRATION_5 " DROP TABLE admin_token; ALTER TABLE request_logs DROP COLUMN attempts_json;"
/* Undoes migration 6 (failover: account flags, request log columns). */
#define TEST_DROP_MIGRATION_6                                                                              \
    " ALTER TABLE accounts DROP COLUMN context_fallback; ALTER TABLE accounts DROP COLUMN reset_gen;"      \
    " ALTER TABLE request_logs DROP COLUMN upstream_model; ALTER TABLE request_logs DROP COLUMN resumed;"

/* Undoes the channel-control migrations (8..12: key rules, account
 * controls, spend, budgets, the 60 s window), newest first, so a test can
 * take a database back to an older version. A new migration adds its undo. */
#define TEST_DROP_MIGRATIONS_8_TO_12                                                                        \
    " ALTER TABLE account_state DROP COLUMN success_rate_60s;"                                             \
    " ALTER TABLE account_state DROP COLUMN latency_60s_ms;"                                               \
    " ALTER TABLE account_state DROP COLUMN attempts_60s;"                                                 \
    " ALTER TABLE accounts DROP COLUMN budget_usd; ALTER TABLE accounts DROP COLUMN budget_period;"        \
    " ALTER TABLE platform_keys DROP COLUMN budget_usd;"                                                   \
    " ALTER TABLE platform_keys DROP COLUMN budget_period;"                                                \
    " ALTER TABLE request_logs DROP COLUMN cached_tokens; ALTER TABLE request_logs DROP COLUMN cost_usd;"  \
    " ALTER TABLE accounts DROP COLUMN weight; ALTER TABLE accounts DROP COLUMN max_rpm;"                  \
    " ALTER TABLE accounts DROP COLUMN max_tpm;"                                                           \
    " ALTER TABLE platform_keys DROP COLUMN allowed_models; ALTER TABLE platform_keys DROP COLUMN max_rpm;" \
    " ALTER TABLE platform_keys DROP COLUMN expires_at;"

/* Undoes every migration after 5, newest first (13 only rebuilt a table). */
#define TEST_DROP_DOWN_TO_5 TEST_DROP_MIGRATION_22 TEST_DROP_MIGRATION_20 TEST_DROP_MIGRATION_19 TEST_DROP_MIGRATION_18 TEST_DROP_MIGRATION_17 TEST_DROP_MIGRATION_16 TEST_DROP_MIGRATION_15 TEST_DROP_MIGRATION_14 TEST_DROP_MIGRATIONS_8_TO_12 TEST_DROP_MIGRATION_7 TEST_DROP_MIGRATION_6

/* ---------- migration 3: usage columns ---------- */

/* A v2 database keeps its account state through migration 3; the new
 * usage fields start unknown and round-trip through the writer. */
static void test_store_migration_3_keeps_state_and_stores_usage_fields(void)
{
    char path[128];
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    int64_t a = test_add_account(s, "cg", 0, ACCOUNT_CHATGPT);
    store_close(s);
    test_sql_exec(path, "INSERT INTO account_state(account_id, cooldown_until) VALUES (1, 123);"
                        TEST_DROP_DOWN_TO_5 TEST_DROP_MIGRATION_5 TEST_DROP_MIGRATION_3
                        " DROP TABLE codex_attach; DELETE FROM schema_migrations WHERE version >= 3");
    s = test_open(path);
    CHECK(s != NULL);
    account_state *st = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_states_load(s, &st, &n), 0);
    CHECK_EQ_INT((long)n, 1);
    if (n == 1) {
        CHECK(st[0].cooldown_until == 123);
        CHECK_EQ_INT(st[0].has_credits, -1);
        CHECK(st[0].credits_balance == -1);
        CHECK_EQ_STR(st[0].plan_type, "");
    }
    free(st);
    char err[256];
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    account_state w = test_state(a, 0);
    w.primary_window_s = 18000;
    w.secondary_window_s = 604800;
    snprintf(w.plan_type, sizeof w.plan_type, "pro");
    w.has_credits = 1;
    w.credits_unlimited = 0;
    w.credits_balance = 12.5;
    w.usage_polled_at = 1700000000;
    w.usage_poll_status = 401;
    store_writer_put_state(s, &w);
    store_writer_sync(s);
    CHECK_EQ_INT(store_states_load(s, &st, &n), 0);
    if (n == 1) {
        CHECK(st[0].primary_window_s == 18000 && st[0].secondary_window_s == 604800);
        CHECK_EQ_STR(st[0].plan_type, "pro");
        CHECK_EQ_INT(st[0].has_credits, 1);
        CHECK_EQ_INT(st[0].credits_unlimited, 0);
        CHECK(st[0].credits_balance == 12.5);
        CHECK(st[0].usage_polled_at == 1700000000);
        CHECK_EQ_INT(st[0].usage_poll_status, 401);
    }
    free(st);
    store_close(s);
}

/* ---------- migration 2: settings and response owners ---------- */

/* A database at migration 1 (built by undoing migrations 12 to 2 by hand, which
 * leaves exactly the v1 schema) upgrades in place and keeps its rows. */
static void test_store_migration_2_upgrades_a_v1_database_in_place(void)
{
    char path[128];
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    test_add_account(s, "kept", 0, ACCOUNT_API_KEY);
    store_close(s);
    test_sql_exec(path, "DROP TABLE settings; DROP TABLE response_owners; DROP TABLE codex_attach;"
                        TEST_DROP_DOWN_TO_5 TEST_DROP_MIGRATION_5 TEST_DROP_MIGRATION_3
                        " DELETE FROM schema_migrations WHERE version >= 2");
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM sqlite_master WHERE name IN"
                                    " ('settings', 'response_owners', 'settings_INSERT_bump')"), 0);
    s = test_open(path);
    CHECK(s != NULL);
    store_close(s);
    CHECK_EQ_INT(test_sql_int(path, "SELECT max(version) FROM schema_migrations"), TEST_SCHEMA_VERSION);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE name = 'kept' AND login_error IS NULL"
                                    " AND token_expires_at = 0"), 1);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN"
                                    " ('settings', 'response_owners', 'codex_attach')"), 3);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'"
                                    " AND tbl_name = 'settings'"), 3);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'response_owners_created_at'"), 1);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE name = 'kept'"), 1);
}

/* ---------- migration 5: attempts record and admin token ---------- */

/* Writes one request log (with attempts_json, may be NULL) into a fresh
 * database at path through the writer. */
static void test_store_one_log(char *path, size_t n, const char *attempts_json)
{
    test_db_path(path, n);
    store *s = test_open(path);
    char err[256];
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    request_log r = test_log(0);
    r.attempts_json = attempts_json ? strdup(attempts_json) : NULL;
    store_writer_put_log(s, &r);
    store_close(s);
}

/* A v4 database gains the attempts column and the admin token table and
 * keeps its request logs (their attempts read as NULL). */
static void test_store_migration_5_adds_attempts_and_admin_token(void)
{
    char path[128];
    test_store_one_log(path, sizeof path, NULL);
    test_sql_exec(path, TEST_DROP_DOWN_TO_5 TEST_DROP_MIGRATION_5 " DELETE FROM schema_migrations WHERE version >= 5");
    store *s = test_open(path);
    CHECK(s != NULL);
    store_close(s);
    CHECK_EQ_INT(test_sql_int(path, "SELECT max(version) FROM schema_migrations"), TEST_SCHEMA_VERSION);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM request_logs WHERE attempts_json IS NULL"), 1);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'"
                                    " AND tbl_name = 'admin_token'"), 3);
}

static void test_collect_rows(void *ud, const store_log_row *r)
{
    sbuf *b = ud;
    sbuf_printf(b, "%lld|%s|%s\n", (long long)r->id, r->error_class, r->error_message);
}

/* A failed request's error message is kept (cut to STORE_LOG_MESSAGE_MAX
 * bytes on a character boundary), read back with its row and found by the
 * text search, case-insensitively; a success has none. */
static void test_store_log_search_finds_a_request_by_its_error_message(void)
{
    char path[128], err[256];
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    request_log ok = test_log(0);
    store_writer_put_log(s, &ok);
    request_log bad = test_log(1);
    bad.status = 400;
    snprintf(bad.error_class, sizeof bad.error_class, "client_error");
    bad.error_message = strdup("context_length_exceeded: This model's maximum context length is 8192 tokens.");
    store_writer_put_log(s, &bad);
    request_log longer = test_log(2);
    longer.status = 502;
    snprintf(longer.error_class, sizeof longer.error_class, "server");
    sbuf m = SBUF_INIT;
    sbuf_puts(&m, "upstream said:");
    while (m.len < 298)
        sbuf_puts(&m, " x");
    sbuf_puts(&m, "y\xc3\xa9 and more after the bound");
    longer.error_message = m.p; /* the writer takes it over */
    store_writer_put_log(s, &longer);
    store_writer_sync(s);

    sbuf out = SBUF_INIT;
    store_log_filter f = {.q = "MAXIMUM context", .limit = 10};
    CHECK_EQ_INT(store_logs_query(s, &f, test_collect_rows, &out), 1);
    CHECK_EQ_STR(out.p, "2|client_error|context_length_exceeded: This model's maximum context length is 8192 tokens.\n");
    sbuf_reset(&out);
    store_log_filter g = {.q = "8192 tokens", .failed = 1, .limit = 10};
    CHECK_EQ_INT(store_logs_query(s, &g, test_collect_rows, &out), 1);
    store_log_filter one = {.id = 1, .limit = 1};
    sbuf_reset(&out);
    CHECK_EQ_INT(store_logs_query(s, &one, test_collect_rows, &out), 1);
    CHECK_EQ_STR(out.p, "1||\n");
    /* 300 bytes at most, never half of the two-byte character the bound falls in */
    CHECK_EQ_INT(test_sql_int(path, "SELECT length(CAST(error_message AS BLOB)) FROM request_logs WHERE id = 3"), 299);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM request_logs WHERE error_message IS NULL"), 1);
    sbuf_free(&out);
    store_close(s);
}

/* The writer stores a log's attempts record as given, and frees it. */
static void test_store_log_keeps_its_attempts_record(void)
{
    char path[128];
    test_store_one_log(path, sizeof path, "[{\"account\":\"a\",\"outcome\":\"failover\"}]");
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM request_logs WHERE"
                                    " json_extract(attempts_json, '$[0].outcome') = 'failover'"), 1);
}

static void test_store_settings_round_trip(void)
{
    char path[128], err[256] = "", v[64], tiny[4];
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    CHECK_EQ_INT(store_setting_get(s, "route_strategy", v, sizeof v), 1);
    CHECK_EQ_INT(store_setting_set(s, "route_strategy", "balanced", err, sizeof err), 0);
    CHECK_EQ_INT(store_setting_get(s, "route_strategy", v, sizeof v), 0);
    CHECK_EQ_STR(v, "balanced");
    CHECK_EQ_INT(store_setting_get(s, "route_strategy", tiny, sizeof tiny), -1); /* does not fit */
    CHECK_EQ_INT(store_setting_set(s, "route_strategy", "ordered", err, sizeof err), 0);
    CHECK_EQ_INT(store_setting_get(s, "route_strategy", v, sizeof v), 0);
    CHECK_EQ_STR(v, "ordered");
    CHECK_EQ_INT(store_setting_set(s, "", "x", err, sizeof err), -1);
    CHECK_EQ_INT(store_setting_delete(s, "route_strategy", err, sizeof err), 0);
    CHECK_EQ_INT(store_setting_delete(s, "route_strategy", err, sizeof err), 1);
    CHECK_EQ_INT(store_setting_get(s, "route_strategy", v, sizeof v), 1);
    store_close(s);
}

/* Insert, update and delete of a setting each bump config_version as seen by
 * another connection (the running server), like account edits do. */
static void test_store_settings_bump_config_version(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *cli = test_open(path);
    store *server = test_open(path);
    int64_t v0 = store_config_version(server);
    CHECK_EQ_INT(store_setting_set(cli, "rotation", "account_rotation", err, sizeof err), 0);
    int64_t v1 = store_config_version(server);
    CHECK(v1 > v0);
    CHECK_EQ_INT(store_setting_set(cli, "rotation", "hybrid_rotation", err, sizeof err), 0);
    int64_t v2 = store_config_version(server);
    CHECK(v2 > v1);
    CHECK_EQ_INT(store_setting_delete(cli, "rotation", err, sizeof err), 0);
    CHECK(store_config_version(server) > v2);
    store_close(cli);
    store_close(server);
}

/* A foreign write transaction must not make the loop-side read wait. */
static void test_store_setting_get_does_not_wait_for_a_writer(void)
{
    char path[128], err[256] = "", v[64];
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    CHECK_EQ_INT(store_setting_set(s, "rotation", "account_rotation", err, sizeof err), 0);
    sqlite3 *other = NULL;
    CHECK_EQ_INT(sqlite3_open_v2(path, &other, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(other, "BEGIN IMMEDIATE; UPDATE settings SET value = 'x'", NULL, NULL, NULL), SQLITE_OK);
    CHECK_EQ_INT(store_setting_get(s, "rotation", v, sizeof v), 0);
    CHECK_EQ_STR(v, "account_rotation");
    sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(other);
    store_close(s);
}

static void test_settings_collect(void *ud, const char *key, const char *value)
{
    test_text *b = ud;
    snprintf(b->text + strlen(b->text), sizeof b->text - strlen(b->text), "%s=%s;", key, value);
}

static void test_store_settings_load_in_key_order(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    store_setting_set(s, "rotation", "hybrid_rotation", err, sizeof err);
    store_setting_set(s, "route_strategy", "balanced", err, sizeof err);
    test_text b = {""};
    CHECK_EQ_INT(store_settings_load(s, test_settings_collect, &b), 0);
    CHECK_EQ_STR(b.text, "rotation=hybrid_rotation;route_strategy=balanced;");
    store_close(s);
}

static void test_owners_collect(void *ud, const char *response_id, int64_t account_id)
{
    test_text *b = ud;
    snprintf(b->text + strlen(b->text), sizeof b->text - strlen(b->text), "%s:%lld;", response_id,
             (long long)account_id);
}

static void test_store_owners_round_trip_through_the_writer(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    store_writer_put_owner(s, "resp_a", 1);
    request_log r = test_log(0); /* same batch as a log */
    store_writer_put_log(s, &r);
    store_writer_put_owner(s, "resp_b", 2);
    store_writer_put_owner(s, "", 2);      /* ignored */
    store_writer_put_owner(s, "resp_c", 0); /* ignored: no account */
    store_writer_sync(s);
    usleep(20000); /* distinct created_at */
    store_writer_put_owner(s, "resp_a", 3); /* re-owned: upsert, now newest */
    store_writer_sync(s);
    CHECK_EQ_INT(store_request_log_count(s), 1);
    test_text b = {""};
    CHECK_EQ_INT(store_owners_load(s, 10, test_owners_collect, &b), 2);
    CHECK_EQ_STR(b.text, "resp_b:2;resp_a:3;");
    store_writer_stats ws;
    store_writer_stats_get(s, &ws);
    CHECK_EQ_INT(ws.pending_owners, 0);
    store_close(s);
}

static void test_store_owners_load_keeps_the_most_recent_oldest_first(void)
{
    char path[128];
    test_db_path(path, sizeof path);
    store_close(test_open(path));
    test_sql_exec(path, "INSERT INTO response_owners VALUES ('r1', 1, 100), ('r4', 4, 400),"
                        " ('r2', 2, 200), ('r3', 3, 300)");
    store *s = test_open(path);
    test_text b = {""};
    CHECK_EQ_INT(store_owners_load(s, 2, test_owners_collect, &b), 2);
    CHECK_EQ_STR(b.text, "r3:3;r4:4;");
    b.text[0] = '\0';
    CHECK_EQ_INT(store_owners_load(s, 0, test_owners_collect, &b), 0);
    CHECK_EQ_STR(b.text, "");
    store_close(s);
}

/* Owners queued before the writer starts are kept and committed by it, in
 * batches of at most STORE_BATCH_MAX. */
static void test_store_owners_queued_before_start_are_committed(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    char id[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(id, sizeof id, "resp_%d", i);
        store_writer_put_owner(s, id, 1 + i % 3);
    }
    store_writer_stats ws;
    store_writer_stats_get(s, &ws);
    CHECK_EQ_INT(ws.pending_owners, 5000);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    store_writer_sync(s); /* more than one batch: sync must wait for all of them */
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM response_owners"), 5000);
    store_close(s);
}

/* The first batch prunes owners older than 7 days; the next prune waits an
 * hour, so an old row added right after survives the next batch. */
static void test_store_writer_prunes_old_owners_at_most_hourly(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store_close(test_open(path));
    test_sql_exec(path, "INSERT INTO response_owners VALUES"
                        " ('old', 1, (strftime('%s', 'now') + 0) - 8 * 86400), ('recent', 1, (strftime('%s', 'now') + 0) - 6 * 86400)");
    store *s = test_open(path);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    store_writer_put_owner(s, "new", 2);
    store_writer_sync(s);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM response_owners WHERE response_id = 'old'"), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM response_owners"), 2);
    test_sql_exec(path, "INSERT INTO response_owners VALUES ('old2', 1, (strftime('%s', 'now') + 0) - 8 * 86400)");
    store_writer_put_owner(s, "newer", 2);
    store_writer_sync(s);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM response_owners WHERE response_id = 'old2'"), 1);
    store_close(s);
}

/* ---------- administration by name ---------- */

static void test_store_account_enable_disable_by_name(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    test_add_account(s, "a", 0, ACCOUNT_API_KEY);
    int64_t v0 = store_config_version(s);
    CHECK_EQ_INT(store_account_set_enabled(s, "a", 0, err, sizeof err), 0);
    CHECK(store_config_version(s) > v0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT enabled FROM accounts WHERE name = 'a'"), 0);
    CHECK_EQ_INT(store_account_set_enabled(s, "a", 1, err, sizeof err), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT enabled FROM accounts WHERE name = 'a'"), 1);
    CHECK_EQ_INT(store_account_set_enabled(s, "nope", 0, err, sizeof err), -1);
    CHECK(strstr(err, "no account named 'nope'") != NULL);
    store_close(s);
}

/* `account reset` clears the persisted cooldown, ladder and health and
 * bumps reset_gen (an accounts UPDATE: a running gateway reloads). */
static void test_store_account_reset_clears_cooldown_ladder_and_bumps_reset_gen(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    test_add_account(s, "a", 0, ACCOUNT_API_KEY);
    test_sql_exec(path, "INSERT INTO account_state(account_id, cooldown_until, ladder_step, last_429_at, last_error,"
                        " success_ema) SELECT id, 9e9, 3, 100, 'rate_limit', 0.2 FROM accounts WHERE name = 'a'");
    int64_t v0 = store_config_version(s);
    CHECK_EQ_INT(store_account_reset(s, "a", err, sizeof err), 0);
    CHECK(store_config_version(s) > v0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT reset_gen FROM accounts WHERE name = 'a'"), 1);
    CHECK_EQ_INT(test_sql_int(path, "SELECT cooldown_until = 0 AND ladder_step = 0 AND last_429_at = 0"
                                    " AND last_error = '' AND success_ema = 1 FROM account_state"), 1);
    account *acc = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_accounts_load(s, &acc, &n), 0);
    CHECK(n == 1 && acc[0].reset_gen == 1);
    store_accounts_free(acc, n);
    CHECK_EQ_INT(store_account_reset(s, "nope", err, sizeof err), -1);
    CHECK(strstr(err, "no account named 'nope'") != NULL);
    store_close(s);
}

/* Removal takes the account's state and owners with it and clears it as a
 * key's preferred account; request logs stay. */
static void test_store_account_remove_cleans_up_references(void)
{
    char path[128], err[256] = "", key[64];
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    int64_t a = test_add_account(s, "a", 0, ACCOUNT_API_KEY);
    int64_t b = test_add_account(s, "b", 0, ACCOUNT_API_KEY);
    int64_t kid = 0;
    store_key_add(s, "k", key, sizeof key, &kid, NULL, 0);
    CHECK_EQ_INT(store_key_prefer(s, kid, "a", err, sizeof err), 0);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    account_state st = test_state(a, 1);
    store_writer_put_state(s, &st);
    store_writer_put_owner(s, "resp_a", a);
    store_writer_put_owner(s, "resp_b", b);
    request_log r = test_log(0);
    r.account_id = a;
    store_writer_put_log(s, &r);
    store_writer_sync(s);
    CHECK_EQ_INT(store_account_remove(s, "a", err, sizeof err), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts"), 1);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM account_state"), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM response_owners"), 1);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM platform_keys WHERE preferred_account_id IS NULL"), 1);
    CHECK_EQ_INT(store_request_log_count(s), 1);
    CHECK_EQ_INT(store_account_remove(s, "a", err, sizeof err), -1);
    CHECK(strstr(err, "no account named") != NULL);
    store_close(s);
}

/* A selector names one key: by id, by prefix (as `key list` shows it, or
 * more of the key), or by name, a live key before revoked ones; two live
 * keys of one name (from before names were unique) or a prefix two keys
 * share are refused, never both changed. */
static void test_store_key_select_prefer_and_revoke_one_key(void)
{
    char path[128], err[256] = "", key1[64], key2[64], key3[64];
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    int64_t a = test_add_account(s, "a", 0, ACCOUNT_API_KEY), t1 = 0, t2 = 0, solo = 0, got = 0;
    store_key_add(s, "team", key1, sizeof key1, &t1, NULL, 0);
    store_key_add(s, "team", key2, sizeof key2, &t2, NULL, 0);
    store_key_add(s, "solo", key3, sizeof key3, &solo, NULL, 0);
    CHECK_EQ_INT(store_key_select(s, 0, NULL, "team", &got, err, sizeof err), -1);
    CHECK(strstr(err, "more than one key has name 'team'") != NULL);
    CHECK_EQ_INT(store_key_select(s, t2, NULL, NULL, &got, err, sizeof err), 1);
    CHECK(got == t2);
    CHECK_EQ_INT(store_key_select(s, 0, NULL, "solo", &got, err, sizeof err), 1);
    CHECK(got == solo);
    char prefix[16];
    snprintf(prefix, sizeof prefix, "%.7s", key3);
    CHECK_EQ_INT(store_key_select(s, 0, prefix, NULL, &got, err, sizeof err), 1);
    CHECK(got == solo);
    CHECK_EQ_INT(store_key_select(s, 0, key3, NULL, &got, err, sizeof err), 1); /* the whole key works too */
    CHECK(got == solo);
    CHECK_EQ_INT(store_key_select(s, 0, "sy-", NULL, &got, err, sizeof err), -1); /* every key starts so */
    CHECK_EQ_INT(store_key_select(s, 0, NULL, "nope", &got, err, sizeof err), 0);
    CHECK(strstr(err, "no key with name 'nope'") != NULL);
    CHECK_EQ_INT(store_key_select(s, 99, NULL, NULL, &got, err, sizeof err), 0);
    CHECK_EQ_INT(store_key_prefer(s, t1, "a", err, sizeof err), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM platform_keys WHERE preferred_account_id = 1"), 1);
    CHECK_EQ_INT(a, 1);
    CHECK_EQ_INT(store_key_prefer(s, t1, "nope", err, sizeof err), -1);
    CHECK(strstr(err, "no account named") != NULL);
    CHECK_EQ_INT(store_key_prefer(s, t1, NULL, err, sizeof err), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM platform_keys WHERE preferred_account_id IS NULL"), 3);
    int64_t v0 = store_config_version(s);
    CHECK_EQ_INT(store_key_revoke_id(s, t1, err, sizeof err), 1);
    CHECK(store_config_version(s) > v0);
    CHECK_EQ_INT(store_key_revoke_id(s, t1, err, sizeof err), 0); /* already revoked */
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM platform_keys WHERE revoked = 1"), 1);
    /* one live key of that name is left: the name finds it, and a new key may not take the name */
    CHECK_EQ_INT(store_key_select(s, 0, NULL, "team", &got, err, sizeof err), 1);
    CHECK(got == t2);
    CHECK_EQ_INT(store_key_live_by_name(s, "team", &got, prefix), 1);
    CHECK(got == t2);
    CHECK_EQ_INT(store_key_revoke_id(s, t2, err, sizeof err), 1);
    CHECK_EQ_INT(store_key_live_by_name(s, "team", &got, prefix), 0);
    CHECK_EQ_INT(store_key_select(s, 0, NULL, "team", &got, err, sizeof err), -1); /* two revoked: which? */
    store_close(s);
}

/* ---------- logins (migration 7, writer logins, import) ---------- */

static account *test_find(account *a, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(a[i].name, name) == 0)
            return &a[i];
    return NULL;
}

/* A refreshed login goes through the writer at once: the notify fd turns
 * readable, the ticket is committed, and a fresh connection reads it. */
static void test_store_refreshed_login_is_committed_and_signalled(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    account_new a = {.name = "c", .base_url = "https://chatgpt.com/backend-api/codex", .token = "old-access",
                     .kind = ACCOUNT_CHATGPT, .max_concurrency = -1, .login = {.refresh_token = "rt-old"}};
    int64_t id = 0;
    CHECK_EQ_INT(store_account_add(s, &a, &id, err, sizeof err), 0);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    store_login l = {.account_id = id, .access_token = "new-access", .refresh_token = "rt-new",
                     .email = "c@example.com", .token_expires_at = 1900000000, .last_refresh_at = 1800000000};
    uint64_t ticket = store_writer_put_login(s, &l);
    CHECK(ticket > 0);
    struct pollfd pfd = {store_writer_notify_fd(s), POLLIN, 0};
    CHECK_EQ_INT(poll(&pfd, 1, 10000), 1); /* bounded: fails rather than hangs */
    CHECK(store_writer_committed(s) >= ticket);
    store *other = test_open(path);
    account *acc = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_accounts_load(other, &acc, &n), 0);
    account *c = test_find(acc, n, "c");
    CHECK(c && strcmp(c->token, "new-access") == 0 && strcmp(c->refresh_token, "rt-new") == 0);
    CHECK(c && c->token_expires_at == 1900000000 && c->last_refresh_at == 1800000000 && !c->login_error);
    CHECK(c && c->email && strcmp(c->email, "c@example.com") == 0);
    store_accounts_free(acc, n);
    store_close(other);
    store_close(s);
}

/* A sign-in of the gateway goes to the writer as an import: added, then
 * the same login again updates that account (named in the result); an
 * entry refused (a name another login holds) is rolled back alone, and a
 * login queued beside it in the same batch is still written. */
static void test_store_writer_import_adds_updates_and_refuses_alone(void)
{
    char path[128], err[256] = "", name[128];
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    account_new keep = {.name = "taken", .base_url = "https://chatgpt.com/backend-api/codex", .token = "t0",
                        .kind = ACCOUNT_CHATGPT, .max_concurrency = -1, .chatgpt_account_id = "acct-0",
                        .login = {.refresh_token = "rt-0"}};
    int64_t kid = 0;
    CHECK_EQ_INT(store_account_add(s, &keep, &kid, err, sizeof err), 0);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    char tok[16] = "access-1";
    account_new a = {.name = "carol", .base_url = "https://chatgpt.com/backend-api/codex", .token = tok,
                     .kind = ACCOUNT_CHATGPT, .max_concurrency = -1, .chatgpt_account_id = "acct-carol",
                     .login = {.refresh_token = "rt-1", .email = "carol@example.com"}};
    uint64_t t1 = store_writer_put_import(s, &a, "the sign-in");
    CHECK(t1 > 0);
    snprintf(tok, sizeof tok, "clobbered"); /* copied at the put */
    store_writer_sync(s);
    CHECK_EQ_INT(store_writer_import_result(s, t1, name, sizeof name, err, sizeof err), STORE_IMPORT_ADDED);
    CHECK_EQ_STR(name, "carol");
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE name = 'carol' AND token = 'access-1'"), 1);
    account_new again = a;
    again.name = "other-name";
    again.token = "access-2";
    uint64_t t2 = store_writer_put_import(s, &again, "the sign-in");
    account_new clash = a;
    clash.chatgpt_account_id = "acct-new";
    clash.name = "taken";
    uint64_t t3 = store_writer_put_import(s, &clash, "the sign-in");
    store_login l = {.account_id = kid, .access_token = "t0-refreshed", .refresh_token = "rt-0b"};
    CHECK(store_writer_put_login(s, &l) > 0);
    store_writer_sync(s);
    CHECK_EQ_INT(store_writer_import_result(s, t2, name, sizeof name, err, sizeof err), STORE_IMPORT_UPDATED);
    CHECK_EQ_STR(name, "carol");
    CHECK_EQ_INT(store_writer_import_result(s, t3, name, sizeof name, err, sizeof err), STORE_IMPORT_FAILED);
    CHECK(strstr(err, "already exists") != NULL);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts"), 2);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE name = 'carol' AND token = 'access-2'"), 1);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE name = 'taken' AND token = 't0-refreshed'"),
                 1);
    CHECK_EQ_INT(store_writer_import_result(s, 12345, name, sizeof name, err, sizeof err), STORE_IMPORT_UNKNOWN);
    store_close(s);
}

/* needs_login only lands while the refused refresh token is still the
 * stored one: a login imported meanwhile is not marked. */
static void test_store_needs_login_spares_a_login_replaced_meanwhile(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    account_new a = {.name = "d", .base_url = "https://chatgpt.com/backend-api/codex", .token = "acc",
                     .kind = ACCOUNT_CHATGPT, .max_concurrency = -1, .login = {.refresh_token = "rt-current"}};
    int64_t id = 0;
    CHECK_EQ_INT(store_account_add(s, &a, &id, err, sizeof err), 0);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    store_login stale = {.account_id = id, .login_error = "refresh_token_reused", .expect_refresh = "rt-older"};
    store_writer_put_login(s, &stale);
    store_writer_sync(s);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE login_error IS NULL"), 1);
    store_login real = {.account_id = id, .login_error = "refresh_token_reused", .expect_refresh = "rt-current"};
    store_writer_put_login(s, &real);
    store_writer_sync(s);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts"
                                    " WHERE login_error = 'refresh_token_reused'"), 1);
    account_patch p = {.token = "fresh", .login = {.refresh_token = "rt-fresh"}};
    CHECK_EQ_INT(store_account_update(s, "d", &p, err, sizeof err), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE login_error IS NULL AND id = 1"), 1);
    store_close(s);
}

/* An account's --models override is stored on add, loads with the
 * account, is replaced by update and cleared by an empty update. */
static void test_store_account_models_override_is_stored_replaced_and_cleared(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    account_new a = {.name = "m", .base_url = "https://api.example/v1", .token = "t", .kind = ACCOUNT_API_KEY,
                     .max_concurrency = -1, .models = "gpt-5,o3"};
    CHECK_EQ_INT(store_account_add(s, &a, NULL, err, sizeof err), 0);
    account *acc = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_accounts_load(s, &acc, &n), 0);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_STR(n ? acc[0].models : NULL, "gpt-5,o3");
    store_accounts_free(acc, n);
    account_patch p = {.models = "gpt-5-codex"};
    CHECK_EQ_INT(store_account_update(s, "m", &p, err, sizeof err), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE models = 'gpt-5-codex'"), 1);
    account_patch clear = {.models = ""};
    CHECK_EQ_INT(store_account_update(s, "m", &clear, err, sizeof err), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE models IS NULL"), 1);
    store_close(s);
}

typedef struct models_seen {
    int n;
    int64_t id;
    char ids[64], codex[64];
} models_seen;

static void models_seen_row(void *ud, int64_t account_id, const char *ids, const char *codex)
{
    models_seen *m = ud;
    m->n++;
    m->id = account_id;
    snprintf(m->ids, sizeof m->ids, "%s", ids ? ids : "(null)");
    snprintf(m->codex, sizeof m->codex, "%s", codex ? codex : "(null)");
}

/* A learned model list is stored in the account's state (a row made for
 * it when there is none, the rest of the state left alone), read back by
 * store_models_load, and forgotten with the account. */
static void test_store_learned_models_are_stored_and_loaded_back(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    account_new a = {.name = "m", .base_url = "https://api.example.com/v1", .token = "tok", .max_concurrency = -1};
    int64_t id = 0;
    CHECK_EQ_INT(store_account_add(s, &a, &id, err, sizeof err), 0);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    CHECK(store_writer_put_models(s, id, "m-a,m-b", "[{\"slug\":\"m-a\"}]") > 0);
    CHECK(store_writer_put_models(s, id + 99, "x", NULL) > 0); /* no such account: skipped */
    store_writer_sync(s);
    models_seen m = {0};
    CHECK_EQ_INT(store_models_load(s, models_seen_row, &m), 0);
    CHECK_EQ_INT(m.n, 1);
    CHECK_EQ_INT(m.id, id);
    CHECK_EQ_STR(m.ids, "m-a,m-b");
    CHECK_EQ_STR(m.codex, "[{\"slug\":\"m-a\"}]");
    account_state st;
    memset(&st, 0, sizeof st);
    st.account_id = id;
    st.primary_used_pct = 42;
    store_writer_put_state(s, &st); /* the state's own columns leave the lists alone */
    CHECK(store_writer_put_models(s, id, "m-c", NULL) > 0);
    store_writer_sync(s);
    memset(&m, 0, sizeof m);
    CHECK_EQ_INT(store_models_load(s, models_seen_row, &m), 0);
    CHECK_EQ_STR(m.ids, "m-c");
    CHECK_EQ_STR(m.codex, "(null)");
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM account_state WHERE primary_used_pct = 42"), 1);
    CHECK(store_writer_put_models(s, id, NULL, NULL) > 0); /* unknown again (a 404): nothing to load */
    store_writer_sync(s);
    memset(&m, 0, sizeof m);
    CHECK_EQ_INT(store_models_load(s, models_seen_row, &m), 0);
    CHECK_EQ_INT(m.n, 0);
    store_close(s);
}

/* A hold lands only while the account still has the token the failed
 * attempt sent and the reset generation it had; a reset clears it; an
 * update or import clears it when the login really changed, not when the
 * same token comes again. It loads with the account. */
static void test_store_hold_lands_only_on_the_same_login_and_a_changed_login_clears_it(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    account_new a = {.name = "h", .base_url = "https://chatgpt.com/backend-api/codex", .token = "tok-1",
                     .kind = ACCOUNT_CHATGPT, .chatgpt_account_id = "ws-h", .max_concurrency = -1,
                     .login = {.refresh_token = "rt-1"}};
    int64_t id = 0;
    CHECK_EQ_INT(store_account_add(s, &a, &id, err, sizeof err), 0);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    const char *held = "SELECT count(*) FROM accounts WHERE hold = 'deactivated_workspace'"
                       " AND hold_detail = 'HTTP 402 deactivated_workspace' AND hold_since > 0";
    store_hold stale_token = {id, "deactivated_workspace", "HTTP 402 deactivated_workspace", "tok-0", 0};
    store_hold stale_gen = {id, "deactivated_workspace", "HTTP 402 deactivated_workspace", "tok-1", 7};
    CHECK(store_writer_put_hold(s, &stale_token) > 0);
    CHECK(store_writer_put_hold(s, &stale_gen) > 0);
    store_writer_sync(s);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE hold IS NULL AND hold_since = 0"), 1);
    store_hold real = {id, "deactivated_workspace", "HTTP 402 deactivated_workspace", "tok-1", 0};
    CHECK(store_writer_put_hold(s, &real) > 0);
    store_writer_sync(s);
    CHECK_EQ_INT(test_sql_int(path, held), 1);
    account *acc = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_accounts_load(s, &acc, &n), 0);
    CHECK(n == 1 && acc[0].hold && strcmp(acc[0].hold, "deactivated_workspace") == 0 && acc[0].hold_since > 0);
    store_accounts_free(acc, n);
    /* the same token again (an update, an import of the same login) is no fix */
    account_patch same = {.token = "tok-1"};
    CHECK_EQ_INT(store_account_update(s, "h", &same, err, sizeof err), 0);
    account_new again = a;
    int added = 0, updated = 0;
    const char *label = "entry 1";
    CHECK_EQ_INT(store_accounts_import(s, &again, 1, &label, &added, &updated, err, sizeof err), 0);
    CHECK_EQ_INT(updated, 1);
    CHECK_EQ_INT(test_sql_int(path, held), 1);
    /* a reset clears it (and bumps reset_gen, voiding holds written for the old generation) */
    CHECK_EQ_INT(store_account_reset(s, "h", err, sizeof err), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE hold IS NULL AND hold_detail IS NULL"
                                    " AND hold_since = 0 AND reset_gen = 1"), 1);
    store_writer_put_hold(s, &real); /* generation 0: too old now */
    store_writer_sync(s);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE hold IS NULL"), 1);
    real.expect_gen = 1;
    store_writer_put_hold(s, &real);
    store_writer_sync(s);
    CHECK_EQ_INT(test_sql_int(path, held), 1);
    /* a new refresh token alone is a changed login */
    account_patch rt = {.login = {.refresh_token = "rt-2"}};
    CHECK_EQ_INT(store_account_update(s, "h", &rt, err, sizeof err), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE hold IS NULL AND hold_since = 0"), 1);
    store_writer_put_hold(s, &real);
    store_writer_sync(s);
    CHECK_EQ_INT(test_sql_int(path, held), 1);
    /* an import bringing another token clears it */
    again.token = "tok-2";
    CHECK_EQ_INT(store_accounts_import(s, &again, 1, &label, &added, &updated, err, sizeof err), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE hold IS NULL AND token = 'tok-2'"), 1);
    /* and so does an update with a new token, whatever else it changes */
    real.expect_token = "tok-2";
    store_writer_put_hold(s, &real);
    store_writer_sync(s);
    CHECK_EQ_INT(test_sql_int(path, held), 1);
    account_patch tok = {.base_url = "https://chatgpt.com/backend-api/codex", .token = "tok-3", .has_sort = 1,
                         .sort = 5};
    CHECK_EQ_INT(store_account_update(s, "h", &tok, err, sizeof err), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE hold IS NULL AND sort = 5"), 1);
    /* the admin API's reset goes through the writer */
    real.expect_token = "tok-3";
    store_writer_put_hold(s, &real);
    store_writer_sync(s);
    CHECK_EQ_INT(test_sql_int(path, held), 1);
    store_admin_op op = {.kind = STORE_OP_ACCOUNT_UNHOLD, .id = id};
    CHECK_EQ_INT(store_writer_put_admin(s, &op), 0);
    store_writer_sync(s);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE hold IS NULL AND reset_gen = 2"), 1);
    store_close(s);
}

/* One bad entry rolls the whole import back; a matching login updates in place. */
static void test_store_import_is_all_or_nothing_and_updates_by_account_id(void)
{
    char path[128], err[256] = "";
    test_db_path(path, sizeof path);
    store *s = test_open(path);
    account_new v[3] = {
        {.name = "e1", .base_url = "https://x.example/c", .token = "t1", .kind = ACCOUNT_CHATGPT,
         .chatgpt_account_id = "acct-1", .login = {.email = "e1@x"}, .max_concurrency = -1},
        {.name = "e2", .base_url = "https://x.example/c", .token = "t2", .kind = ACCOUNT_CHATGPT,
         .chatgpt_account_id = "acct-2", .max_concurrency = -1},
        {.name = "e3", .base_url = "ftp://bad", .token = "t3", .kind = ACCOUNT_CHATGPT, .max_concurrency = -1},
    };
    const char *labels[3] = {"f entry 1", "f entry 2", "f entry 3"};
    int added = 0, updated = 0;
    CHECK_EQ_INT(store_accounts_import(s, v, 3, labels, &added, &updated, err, sizeof err), -1);
    CHECK(strstr(err, "f entry 3: account base_url must start with") != NULL);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts"), 0);
    CHECK_EQ_INT(store_accounts_import(s, v, 2, labels, &added, &updated, err, sizeof err), 0);
    CHECK_EQ_INT(added, 2);
    v[0].name = "other-name";
    v[0].token = "t1-new";
    CHECK_EQ_INT(store_accounts_import(s, v, 1, labels, &added, &updated, err, sizeof err), 0);
    CHECK(added == 0 && updated == 1);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM accounts WHERE name = 'e1' AND token = 't1-new'"), 1);
    store_close(s);
}

int main(void)
{
    if (check_tmpdir_make(test_dir, sizeof test_dir, "sy_store") != 0)
        return 2;
    RUN(test_store_migration_23_takes_the_anthropic_kind_in_place);
    RUN(test_store_migrations_are_idempotent_on_reopen);
    RUN(test_store_families_parse_keeps_only_good_slots);
    RUN(test_store_refreshed_login_is_committed_and_signalled);
    RUN(test_store_needs_login_spares_a_login_replaced_meanwhile);
    RUN(test_store_writer_import_adds_updates_and_refuses_alone);
    RUN(test_store_hold_lands_only_on_the_same_login_and_a_changed_login_clears_it);
    RUN(test_store_learned_models_are_stored_and_loaded_back);
    RUN(test_store_import_is_all_or_nothing_and_updates_by_account_id);
    RUN(test_store_refuses_newer_schema);
    RUN(test_store_files_are_mode_0600);
    RUN(test_store_tightens_existing_wide_file);
    RUN(test_store_accounts_load_in_sort_updated_id_order);
    RUN(test_store_max_concurrency_defaults_by_kind);
    RUN(test_store_duplicate_account_name_is_an_error);
    RUN(test_store_account_add_rejects_bad_input);
    RUN(test_store_account_kind_names_round_trip);
    RUN(test_store_key_add_stores_only_the_hash);
    RUN(test_store_key_add_makes_distinct_keys);
    RUN(test_store_key_set_preferred);
    RUN(test_store_config_version_bumps_across_connections);
    RUN(test_store_config_version_reads_during_foreign_write_txn);
    RUN(test_store_writer_commits_logs_and_states);
    RUN(test_store_migration_13_drops_autoincrement_and_keeps_ids);
    RUN(test_store_writer_multi_row_inserts_keep_each_rows_values);
    RUN(test_store_writer_skips_only_the_row_a_constraint_refuses);
    RUN(test_store_writer_updates_every_state_field_in_place);
    RUN(test_store_writer_coalesces_state_upserts_per_account);
    RUN(test_store_writer_drops_oldest_logs_when_queue_full);
    RUN(test_store_writer_skips_state_of_deleted_account);
    RUN(test_store_close_drains_writer_and_reopen_keeps_data);
    RUN(test_store_writer_sync_survives_kill_9);
    RUN(test_store_writer_retries_after_disk_full);
    RUN(test_store_sync_without_writer_returns);
    RUN(test_store_migration_2_upgrades_a_v1_database_in_place);
    RUN(test_store_migration_3_keeps_state_and_stores_usage_fields);
    RUN(test_store_migration_5_adds_attempts_and_admin_token);
    RUN(test_store_log_keeps_its_attempts_record);
    RUN(test_store_log_search_finds_a_request_by_its_error_message);
    RUN(test_store_settings_round_trip);
    RUN(test_store_settings_bump_config_version);
    RUN(test_store_setting_get_does_not_wait_for_a_writer);
    RUN(test_store_settings_load_in_key_order);
    RUN(test_store_owners_round_trip_through_the_writer);
    RUN(test_store_owners_load_keeps_the_most_recent_oldest_first);
    RUN(test_store_owners_queued_before_start_are_committed);
    RUN(test_store_writer_prunes_old_owners_at_most_hourly);
    RUN(test_store_account_enable_disable_by_name);
    RUN(test_store_account_models_override_is_stored_replaced_and_cleared);
    RUN(test_store_account_remove_cleans_up_references);
    RUN(test_store_account_reset_clears_cooldown_ladder_and_bumps_reset_gen);
    RUN(test_store_key_select_prefer_and_revoke_one_key);
    check_tmpdir_remove(test_dir);
    return check_summary();
}
