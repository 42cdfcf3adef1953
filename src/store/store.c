/* store.c: the sqlite database (see store.h): file creation with mode 0600,
 * versioned migrations, the synchronous API used by the CLI and start-up
 * (accounts, keys, settings), and the writer thread that commits account
 * state, request logs and response owners off the event loop (and prunes
 * old owners). Tokens and platform keys are never logged. */
#include "store/store.h"
#include "store/store_internal.h"
#include "base/log.h"
#include "base/sbuf.h"
#include "base/sha256.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STORE_LOG_QUEUE_MAX 100000 /* pending request logs before the oldest are dropped */
#define STORE_BATCH_MAX 2000       /* request logs per writer transaction */
#define STORE_BUSY_MS 5000         /* busy wait for connections that are off the loop */
#define STORE_GROUP_MS 50          /* group-commit window: at most 20 fsyncs a second, lock free in between */
#define STORE_KEY_RANDOM_CHARS 40
#define STORE_KEY_PREFIX_LEN 7     /* "sy-" plus 4 random chars */
#define STORE_OWNER_QUEUE_MAX 100000  /* pending response owners before the oldest are dropped */
#define STORE_OWNER_TTL_S (7 * 86400) /* owners older than this are pruned */
#define STORE_PRUNE_EVERY_S 3600.0    /* at most one prune per this interval */
#define STORE_OPS_MAX 64              /* queued admin changes; more are refused until the writer catches up */
#define STORE_LOG_CHUNKS 6            /* request logs go in by 32, 16, 8, 4, 2 and 1 rows per INSERT */
#define STORE_LOG_COLS 20             /* bound parameters per request_logs row */

typedef struct log_item {
    struct log_item *next;
    uint64_t seq;
    request_log rl;
} log_item;

typedef struct owner_item {
    struct owner_item *next;
    uint64_t seq;
    int64_t account_id;
    double created_at;     /* unix seconds */
    char response_id[];
} owner_item;

typedef struct login_item {
    struct login_item *next;
    uint64_t seq;
    int64_t account_id;
    char *access_token, *refresh_token, *id_token, *email, *plan_type, *chatgpt_account_id;
    int64_t token_expires_at, last_refresh_at;
    char *login_error, *expect_refresh;
} login_item;

/* A batch taken off the queue; committed in one transaction. */
typedef struct writer_batch {
    login_item *logins;
    size_t n_logins;
    log_item *logs;
    size_t n_logs;
    account_state *states;
    size_t n_states;
    owner_item *owners;
    size_t n_owners;
    store_admin_op ops[STORE_OPS_MAX];
    size_t n_ops;
    uint64_t seq; /* everything queued with seq <= this is in or before the batch */
} writer_batch;

typedef struct store_writer {
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* writer waits for items or stop */
    pthread_cond_t done_cv; /* store_writer_sync waits for committed_seq */
    log_item *head, *tail;
    size_t n_logs;
    account_state *states; /* one coalesced upsert per account */
    size_t n_states, cap_states;
    uint64_t queued_seq, committed_seq;
    uint64_t dropped_logs, failed_commits;
    int failing;          /* the latest commit failed; cleared by the next success */
    char last_error[128]; /* sqlite's message for the latest failure */
    owner_item *owners_head, *owners_tail;
    size_t n_owners;
    uint64_t dropped_owners;
    store_admin_op ops[STORE_OPS_MAX]; /* taken whole into each batch */
    size_t n_ops;
    double prune_due; /* monotonic seconds; writer thread only */
    int running, stop;
    int idle;         /* writer is waiting for the first item: puts must wake it */
    int sync_waiters; /* a store_writer_sync is waiting: skip the group window */
    login_item *logins_head, *logins_tail; /* refreshed logins: committed without the group window */
    size_t n_logins;
    int notify_fd;    /* eventfd: written after a batch with logins committed */
    pthread_t thread;
    sqlite3 *db; /* the writer's own connection */
    sqlite3_stmt *up_state, *set_state, *up_owner, *prune_owners, *up_login, *up_login_err, *begin, *commit;
    sqlite3_stmt *ins_logs[STORE_LOG_CHUNKS]; /* [k]: insert 2^k rows; prepared when first used */
} store_writer;

struct store {
    sqlite3 *db; /* main connection: loop-thread reads, CLI writes */
    sqlite3_stmt *config_version_st; /* kept: the loop reads config_version every second */
    char *path;
    store_writer w;
};

/* ---------- small helpers ---------- */

static void store_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void store_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static char *store_strdup(const char *s)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        abort(); /* same policy as sbuf: no useful work without memory */
    return d;
}

static char *store_col_dup(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? store_strdup((const char *)t) : NULL;
}

static void store_col_copy(sqlite3_stmt *st, int i, char *dst, size_t n)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    snprintf(dst, n, "%s", t ? (const char *)t : "");
}

void store_bind_text(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

void store_bind_login(sqlite3_stmt *st, int i, const account_login *l)
{
    store_bind_text(st, i, l->refresh_token && *l->refresh_token ? l->refresh_token : NULL);
    store_bind_text(st, i + 1, l->id_token && *l->id_token ? l->id_token : NULL);
    store_bind_text(st, i + 2, l->email && *l->email ? l->email : NULL);
    store_bind_text(st, i + 3, l->plan_type && *l->plan_type ? l->plan_type : NULL);
    sqlite3_bind_int64(st, i + 4, l->token_expires_at);
    sqlite3_bind_int64(st, i + 5, l->last_refresh_at);
}

/* 0 and -1 mean "none"/"unknown" in the structs; NULL in SQL. */
static void store_bind_opt_int(sqlite3_stmt *st, int i, int64_t v, int64_t none)
{
    if (v == none)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_int64(st, i, v);
}

/* Doubles the capacity of *arr when n reached it. 0 ok, -1 out of memory. */
static int store_grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, nc * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

static int64_t store_now(void) { return (int64_t)time(NULL); }

static int store_exec(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        store_errf(err, errlen, "%s", msg ? msg : sqlite3_errstr(rc));
    sqlite3_free(msg);
    return rc;
}

const char *account_kind_name(account_kind k)
{
    switch (k) {
    case ACCOUNT_API_KEY: return "api_key";
    case ACCOUNT_CHATGPT: return "chatgpt";
    case ACCOUNT_AGGREGATE: return "aggregate";
    }
    return "api_key";
}

int account_kind_parse(const char *s, account_kind *out)
{
    static const account_kind kinds[] = {ACCOUNT_API_KEY, ACCOUNT_CHATGPT, ACCOUNT_AGGREGATE};
    for (size_t i = 0; s && i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(s, account_kind_name(kinds[i])) == 0) {
            *out = kinds[i];
            return 0;
        }
    }
    return -1;
}

/* ---------- file permissions ---------- */

/* The database holds upstream tokens: create it 0600 ourselves (sqlite would
 * use 0644 minus umask), and tighten an existing file that is wider. */
static int store_file_prepare(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        store_errf(err, errlen, "cannot open database %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    int rc = fstat(fd, &sb);
    if (rc == 0 && !S_ISREG(sb.st_mode)) {
        store_errf(err, errlen, "database %s is not a regular file", path);
        rc = -1;
    } else if (rc == 0 && (sb.st_mode & 077) && fchmod(fd, 0600) != 0) {
        store_errf(err, errlen, "cannot chmod 0600 %s: %s", path, strerror(errno));
        rc = -1;
    } else if (rc != 0) {
        store_errf(err, errlen, "cannot stat %s: %s", path, strerror(errno));
    }
    close(fd);
    return rc == 0 ? 0 : -1;
}

/* sqlite gives -wal/-shm the database file's mode; this only fixes files
 * left behind with wider modes by something else. */
static void store_file_tighten(const char *path, const char *suffix)
{
    char p[4096];
    struct stat sb;
    if ((size_t)snprintf(p, sizeof p, "%s%s", path, suffix) >= sizeof p)
        return;
    if (stat(p, &sb) == 0 && (sb.st_mode & 077) && chmod(p, 0600) != 0)
        log_warn("store: cannot chmod 0600 %s: %s", p, strerror(errno));
}

/* ---------- connections and migrations ---------- */

/* flags: added to SQLITE_OPEN_READWRITE (SQLITE_OPEN_NOMUTEX for a
 * connection only one thread at a time ever uses). */
static int store_conn_open(const char *path, int busy_ms, int flags, sqlite3 **out, char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | flags, NULL);
    if (rc != SQLITE_OK) {
        store_errf(err, errlen, "cannot open database %s: %s", path,
                   db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return -1;
    }
    sqlite3_busy_timeout(db, busy_ms);
    if (store_exec(db, "PRAGMA foreign_keys=ON; PRAGMA synchronous=FULL;", err, errlen) != SQLITE_OK) {
        sqlite3_close(db);
        return -1;
    }
    *out = db;
    return 0;
}

static int store_wal_enable(sqlite3 *db, char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    int ok = 0;
    if (sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *mode = sqlite3_column_text(st, 0);
        ok = mode && strcmp((const char *)mode, "wal") == 0;
    }
    if (!ok)
        store_errf(err, errlen, "cannot enable WAL mode: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return ok ? 0 : -1;
}

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
 * same order; ids are kept. */
#define STORE_LOG_COLUMNS                                                                                   \
    "ts, platform_key_id, endpoint, model, stream, account_id, account_name, status, attempts, latency_ms," \
    " route_strategy, error_class, input_tokens, output_tokens, total_tokens, attempts_json, upstream_model," \
    " resumed, cached_tokens, cost_usd"
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
    "INSERT INTO request_logs_13(id, " STORE_LOG_COLUMNS ") SELECT id, " STORE_LOG_COLUMNS " FROM request_logs;"
    "DROP TABLE request_logs;"
    "ALTER TABLE request_logs_13 RENAME TO request_logs;"
    "CREATE INDEX request_logs_ts ON request_logs(ts);";

/* Index i holds migration i + 1. Append only; never edit a shipped one. */
static const char *const store_migrations[] = {store_migration_1,  store_migration_2,  store_migration_3,
                                               store_migration_4,  store_migration_5,  store_migration_6,
                                               store_migration_7,  store_migration_8,  store_migration_9,
                                               store_migration_10, store_migration_11, store_migration_12,
                                               store_migration_13};
#define STORE_SCHEMA_VERSION ((int)(sizeof store_migrations / sizeof store_migrations[0]))

/* The highest applied version, 0 for a fresh database, -1 on error. */
static int store_schema_version(sqlite3 *db)
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

/* Applies one migration in its own IMMEDIATE transaction; the version check
 * happens inside it so two processes opening a fresh file cannot both apply. */
static int store_migration_apply(sqlite3 *db, int version, char *err, size_t errlen)
{
    if (store_exec(db, "BEGIN IMMEDIATE", err, errlen) != SQLITE_OK)
        return -1;
    int have = store_schema_version(db);
    int rc = have < 0 ? SQLITE_ERROR : SQLITE_OK;
    if (rc == SQLITE_OK && have < version) {
        rc = store_exec(db, store_migrations[version - 1], err, errlen);
        if (rc == SQLITE_OK && (rc = store_migration_record(db, version)) != SQLITE_OK)
            store_errf(err, errlen, "%s", sqlite3_errmsg(db));
    }
    if (rc == SQLITE_OK && store_exec(db, "COMMIT", err, errlen) == SQLITE_OK)
        return 0;
    store_exec(db, "ROLLBACK", NULL, 0);
    return -1;
}

static int store_migrate(sqlite3 *db, char *err, size_t errlen)
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
    for (int v = have + 1; v <= STORE_SCHEMA_VERSION; v++) {
        char e[256] = "";
        if (store_migration_apply(db, v, e, sizeof e) != 0) {
            store_errf(err, errlen, "migration %d failed: %s", v, e);
            return -1;
        }
    }
    return 0;
}

/* ---------- open / close ---------- */

static void store_writer_init(store_writer *w)
{
    memset(w, 0, sizeof *w);
    w->notify_fd = -1;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the group window must not jump with the wall clock */
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->work_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&w->done_cv, NULL);
}

static int store_open_db(store *s, char *err, size_t errlen)
{
    /* Open and migrate with a busy wait (start-up is off the serving path,
     * and another process may be migrating), then drop to 0 for the loop. */
    if (store_conn_open(s->path, STORE_BUSY_MS, 0, &s->db, err, errlen) != 0)
        return -1;
    if (store_wal_enable(s->db, err, errlen) != 0 || store_migrate(s->db, err, errlen) != 0)
        return -1;
    sqlite3_busy_timeout(s->db, 0);
    store_file_tighten(s->path, "-wal");
    store_file_tighten(s->path, "-shm");
    return 0;
}

/* sqlite's memory statistics take a global mutex around every allocation
 * of every connection; nothing here reads them. Must come before sqlite
 * initialises, i.e. before the first connection of the process. */
static void store_sqlite_config(void) { sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }

store *store_open(const char *path, char *err, size_t errlen)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, store_sqlite_config);
    if (!path || !*path) {
        store_errf(err, errlen, "empty database path");
        return NULL;
    }
    if (store_file_prepare(path, err, errlen) != 0)
        return NULL;
    store *s = calloc(1, sizeof *s);
    if (!s) {
        store_errf(err, errlen, "out of memory");
        return NULL;
    }
    s->path = store_strdup(path);
    store_writer_init(&s->w);
    if (store_open_db(s, err, errlen) != 0) {
        store_close(s);
        return NULL;
    }
    return s;
}

const char *store_path(const store *s) { return s->path; }
struct sqlite3 *store_db(store *s) { return s->db; }

static void store_writer_stop(store_writer *w);
static void store_writer_discard(store_writer *w);

void store_close(store *s)
{
    if (!s)
        return;
    store_writer_stop(&s->w);
    store_writer_discard(&s->w);
    pthread_mutex_destroy(&s->w.mu);
    pthread_cond_destroy(&s->w.work_cv);
    pthread_cond_destroy(&s->w.done_cv);
    sqlite3_finalize(s->config_version_st);
    sqlite3_close_v2(s->db);
    free(s->path);
    free(s);
}

/* ---------- synchronous API ---------- */

/* Synchronous writes run on the CLI / start-up path, where waiting for the
 * server's writer to finish a transaction is right; the loop never calls
 * them, so the main connection goes back to busy_timeout 0 afterwards. */
void store_sync_write_begin(store *s) { sqlite3_busy_timeout(s->db, STORE_BUSY_MS); }
void store_sync_write_end(store *s) { sqlite3_busy_timeout(s->db, 0); }
struct sqlite3 *store_sqlite(store *s) { return s->db; }

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

int store_account_check(store *s, const account_new *a, char *err, size_t errlen)
{
    if (!a->name || !*a->name)
        store_errf(err, errlen, "account name is required");
    else if (!a->base_url || !*a->base_url)
        store_errf(err, errlen, "account base_url is required");
    else if (strncmp(a->base_url, "http://", 7) != 0 && strncmp(a->base_url, "https://", 8) != 0)
        store_errf(err, errlen, "account base_url must start with http:// or https://");
    else if (!a->token || !*a->token)
        store_errf(err, errlen, "account token is required");
    else if ((unsigned)a->kind > ACCOUNT_AGGREGATE)
        store_errf(err, errlen, "unknown account kind");
    else if (a->max_concurrency < -1)
        store_errf(err, errlen, "max_concurrency must be >= 0");
    else if (a->weight < 0 || a->max_rpm < 0 || a->max_tpm < 0 || !(a->budget_usd >= 0))
        store_errf(err, errlen, "weight, max_rpm, max_tpm and budget must be >= 0");
    else if (a->model_map && !store_json_is_object(s->db, a->model_map))
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
}

/* Inserts one account on db (no busy handling, no transaction of its own). */
int store_account_insert(sqlite3 *db, const account_new *a)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
        "INSERT INTO accounts(name, kind, base_url, token, chatgpt_account_id, model_map, sort,"
        " enabled, max_concurrency, created_at, updated_at, refresh_token, id_token, email, plan_type,"
        " token_expires_at, last_refresh_at, context_fallback, weight, max_rpm, max_tpm, budget_usd, budget_period)"
        " VALUES (?,?,?,?,?,?,?,1,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
    if (store_account_check(s, a, err, errlen) != 0)
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
}

/* Runs a SELECT and hands each row to row_fn(stmt, slot) in a growing array
 * of elem-sized slots. On error frees nothing itself: the caller's free_fn
 * gets the rows read so far. Returns 0 or -1 (including SQLITE_BUSY). */
typedef void (*store_row_fn)(sqlite3_stmt *st, void *slot);
static int store_rows_load(store *s, const char *sql, size_t elem, store_row_fn row_fn, void **out, size_t *n)
{
    sqlite3_stmt *st = NULL;
    size_t cap = 0;
    int rc;
    *out = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (store_grow(out, &cap, *n, elem) != 0)
            break;
        memset((char *)*out + *n * elem, 0, elem);
        row_fn(st, (char *)*out + *n * elem);
        (*n)++;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

static void store_account_row_slot(sqlite3_stmt *st, void *slot) { store_account_row(st, slot); }

int store_accounts_load(store *s, account **out, size_t *n)
{
    void *rows;
    int rc = store_rows_load(s,
        "SELECT id, name, kind, base_url, token, chatgpt_account_id, model_map, sort, enabled,"
        " max_concurrency, created_at, updated_at, context_fallback, reset_gen, refresh_token, id_token,"
        " email, plan_type, token_expires_at, last_refresh_at, login_error, weight, max_rpm, max_tpm, budget_usd,"
        " budget_period FROM accounts"
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
    memset(a, 0, sizeof *a);
}

void store_accounts_free(account *a, size_t n)
{
    for (size_t i = 0; a && i < n; i++)
        store_account_clear(&a[i]);
    free(a);
}

/* Fills out[0..n) with base62 characters from getrandom(), rejecting bytes
 * >= 248 so every character is equally likely. */
int store_random_base62(char *out, size_t n)
{
    static const char alphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    unsigned char buf[64];
    size_t have = 0;
    while (have < n) {
        ssize_t got = getrandom(buf, sizeof buf, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        for (ssize_t i = 0; i < got && have < n; i++)
            if (buf[i] < 248)
                out[have++] = alphabet[buf[i] % 62];
    }
    memset(buf, 0, sizeof buf);
    return 0;
}

static int store_key_insert(store *s, const char *name, const char *hash, const char *prefix, int64_t *id_out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "INSERT INTO platform_keys(name, hash, prefix, created_at) VALUES (?,?,?,?)",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, hash, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 3, prefix, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 4, store_now());
        store_sync_write_begin(s);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(s->db);
        store_sync_write_end(s);
    }
    if (rc == SQLITE_OK && id_out)
        *id_out = sqlite3_last_insert_rowid(s->db);
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : -1;
}

int store_key_generate(char *key_out, size_t keylen, char hash[65], char prefix[16], char *err, size_t errlen)
{
    char key[3 + STORE_KEY_RANDOM_CHARS + 1] = "sy-";
    if (keylen < sizeof key) {
        store_errf(err, errlen, "key buffer too small (need %zu bytes)", sizeof key);
        return -1;
    }
    if (store_random_base62(key + 3, STORE_KEY_RANDOM_CHARS) != 0) {
        store_errf(err, errlen, "getrandom failed: %s", strerror(errno));
        return -1;
    }
    key[sizeof key - 1] = '\0';
    sha256_hex(key, strlen(key), hash);
    snprintf(prefix, 16, "%.*s", STORE_KEY_PREFIX_LEN, key);
    memcpy(key_out, key, sizeof key);
    memset(key, 0, sizeof key);
    return 0;
}

int store_key_add(store *s, const char *name, char *key_out, size_t keylen, int64_t *id_out,
                  char *err, size_t errlen)
{
    char key[3 + STORE_KEY_RANDOM_CHARS + 1];
    char hash[65], prefix[16];
    if (!name || !*name) {
        store_errf(err, errlen, "key name is required");
        return -1;
    }
    if (store_key_generate(key, keylen < sizeof key ? keylen : sizeof key, hash, prefix, err, errlen) != 0)
        return -1;
    int rc = store_key_insert(s, name, hash, prefix, id_out);
    if (rc == 0)
        memcpy(key_out, key, sizeof key);
    else
        store_errf(err, errlen, "cannot add key: %s", sqlite3_errmsg(s->db));
    memset(key, 0, sizeof key);
    return rc;
}

int store_key_set_preferred(store *s, int64_t key_id, int64_t account_id)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "UPDATE platform_keys SET preferred_account_id = ? WHERE id = ?",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        store_bind_opt_int(st, 1, account_id, 0);
        sqlite3_bind_int64(st, 2, key_id);
        store_sync_write_begin(s);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(s->db);
        store_sync_write_end(s);
    }
    int changed = rc == SQLITE_OK && sqlite3_changes(s->db) == 1;
    sqlite3_finalize(st);
    return changed ? 0 : -1; /* unknown key id, unknown account id (FK) or db error */
}

static void store_key_row(sqlite3_stmt *st, void *slot)
{
    platform_key *k = slot;
    k->id = sqlite3_column_int64(st, 0);
    k->name = store_col_dup(st, 1);
    store_col_copy(st, 2, k->hash, sizeof k->hash);
    store_col_copy(st, 3, k->prefix, sizeof k->prefix);
    k->preferred_account_id = sqlite3_column_int64(st, 4); /* NULL reads as 0 */
    k->revoked = sqlite3_column_int(st, 5);
    k->allowed_models = store_col_dup(st, 6);
    k->max_rpm = sqlite3_column_int(st, 7);
    k->expires_at = sqlite3_column_int64(st, 8);
    k->budget_usd = sqlite3_column_double(st, 9);
    store_col_copy(st, 10, k->budget_period, sizeof k->budget_period);
}

int store_keys_load(store *s, platform_key **out, size_t *n)
{
    void *rows;
    int rc = store_rows_load(s,
        "SELECT id, name, hash, prefix, preferred_account_id, revoked, allowed_models, max_rpm, expires_at,"
        " budget_usd, budget_period FROM platform_keys ORDER BY id",
        sizeof(platform_key), store_key_row, &rows, n);
    if (rc != 0) {
        store_keys_free(rows, *n);
        rows = NULL;
        *n = 0;
    }
    *out = rows;
    return rc;
}

void store_keys_free(platform_key *k, size_t n)
{
    for (size_t i = 0; k && i < n; i++) {
        free(k[i].name);
        free(k[i].allowed_models);
    }
    free(k);
}

static void store_state_row(sqlite3_stmt *st, void *slot)
{
    account_state *a = slot;
    a->account_id = sqlite3_column_int64(st, 0);
    a->cooldown_until = sqlite3_column_double(st, 1);
    a->ladder_step = sqlite3_column_int(st, 2);
    a->last_429_at = sqlite3_column_double(st, 3);
    store_col_copy(st, 4, a->last_error, sizeof a->last_error);
    a->primary_used_pct = sqlite3_column_double(st, 5);
    a->secondary_used_pct = sqlite3_column_double(st, 6);
    a->primary_reset_at = sqlite3_column_double(st, 7);
    a->secondary_reset_at = sqlite3_column_double(st, 8);
    a->success_ema = sqlite3_column_double(st, 9);
    a->latency_ema_ms = sqlite3_column_double(st, 10);
    a->updated_at = sqlite3_column_double(st, 11);
    a->primary_window_s = sqlite3_column_double(st, 12);
    a->secondary_window_s = sqlite3_column_double(st, 13);
    store_col_copy(st, 14, a->plan_type, sizeof a->plan_type);
    a->has_credits = sqlite3_column_int(st, 15);
    a->credits_unlimited = sqlite3_column_int(st, 16);
    a->credits_balance = sqlite3_column_double(st, 17);
    a->usage_polled_at = sqlite3_column_double(st, 18);
    a->usage_poll_status = sqlite3_column_int(st, 19);
    a->success_rate_60s = sqlite3_column_double(st, 20);
    a->latency_60s_ms = sqlite3_column_double(st, 21);
    a->attempts_60s = sqlite3_column_int(st, 22);
}

int store_states_load(store *s, account_state **out, size_t *n)
{
    void *rows;
    int rc = store_rows_load(s,
        "SELECT account_id, cooldown_until, ladder_step, last_429_at, last_error, primary_used_pct,"
        " secondary_used_pct, primary_reset_at, secondary_reset_at, success_ema, latency_ema_ms,"
        " updated_at, primary_window_s, secondary_window_s, plan_type, has_credits, credits_unlimited,"
        " credits_balance, usage_polled_at, usage_poll_status, success_rate_60s, latency_60s_ms, attempts_60s"
        " FROM account_state ORDER BY account_id",
        sizeof(account_state), store_state_row, &rows, n);
    if (rc != 0) {
        free(rows);
        rows = NULL;
        *n = 0;
    }
    *out = rows;
    return rc;
}

/* One integer from a single-row query; -1 on any error, SQLITE_BUSY
 * included: with busy_timeout 0 this never waits, so the loop may poll it. */
static int64_t store_query_int(store *s, const char *sql)
{
    sqlite3_stmt *st = NULL;
    int64_t v = -1;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* Read once a second by the loop (pool_refresh): the statement is kept
 * prepared (parsing it cost 20 times more than running it). */
int64_t store_config_version(store *s)
{
    if (!s->config_version_st &&
        sqlite3_prepare_v3(s->db, "SELECT value FROM meta WHERE key = 'config_version'", -1,
                           SQLITE_PREPARE_PERSISTENT, &s->config_version_st, NULL) != SQLITE_OK)
        return -1;
    int64_t v = sqlite3_step(s->config_version_st) == SQLITE_ROW ? sqlite3_column_int64(s->config_version_st, 0) : -1;
    sqlite3_reset(s->config_version_st);
    return v;
}

int64_t store_request_log_count(store *s) { return store_query_int(s, "SELECT count(*) FROM request_logs"); }

/* ---------- administration by name ---------- */

/* Runs one write with ?1 = name and, when the SQL has a ?2, ?2 = *arg (NULL
 * binds SQL NULL). Returns the sqlite result; *changes gets the row count. */
static int store_name_write(sqlite3 *db, const char *sql, const char *name, const int64_t *arg, int *changes)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        if (sqlite3_bind_parameter_count(st) >= 2 && arg)
            sqlite3_bind_int64(st, 2, *arg);
        else if (sqlite3_bind_parameter_count(st) >= 2)
            sqlite3_bind_null(st, 2);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_extended_errcode(db);
    }
    *changes = rc == SQLITE_OK ? sqlite3_changes(db) : 0;
    sqlite3_finalize(st);
    return rc;
}

/* One name-keyed write with the CLI busy wait; -1 (err filled) on failure. */
static int store_name_write_sync(store *s, const char *sql, const char *name, const int64_t *arg, int *changes,
                                 const char *what, char *err, size_t errlen)
{
    if (!name || !*name) {
        store_errf(err, errlen, "%s: a name is required", what);
        return -1;
    }
    store_sync_write_begin(s);
    int rc = store_name_write(s->db, sql, name, arg, changes);
    store_sync_write_end(s);
    if (rc != SQLITE_OK)
        store_errf(err, errlen, "cannot %s: %s", what, sqlite3_errmsg(s->db));
    return rc == SQLITE_OK ? 0 : -1;
}

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

/* Cooldown, ladder and health back to a fresh account's; reset_gen tells a
 * running gateway (an accounts UPDATE bumps config_version). */
int store_account_reset(store *s, const char *name, char *err, size_t errlen)
{
    static const char *const sql[] = {
        "UPDATE accounts SET reset_gen = reset_gen + 1 WHERE name = ?1",
        "UPDATE account_state SET cooldown_until = 0, ladder_step = 0, last_429_at = 0, last_error = '',"
        " success_ema = 1 WHERE account_id IN (SELECT id FROM accounts WHERE name = ?1)",
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

/* An account's id by name: 1 found, 0 none, -1 error. */
static int store_account_id_by_name(store *s, const char *name, int64_t *id)
{
    sqlite3_stmt *st = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(s->db, "SELECT id FROM accounts WHERE name = ?", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        int step = sqlite3_step(st);
        rc = step == SQLITE_ROW ? 1 : step == SQLITE_DONE ? 0 : -1;
        if (rc == 1)
            *id = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    return rc;
}

int store_key_set_preferred_by_name(store *s, const char *key_name, const char *account_name,
                                    char *err, size_t errlen)
{
    int64_t acc = 0;
    int found = account_name ? store_account_id_by_name(s, account_name, &acc) : 1;
    if (found <= 0) {
        if (found == 0)
            store_errf(err, errlen, "no account named '%s'", account_name);
        else
            store_errf(err, errlen, "cannot look up account: %s", sqlite3_errmsg(s->db));
        return -1;
    }
    int changes = 0;
    if (store_name_write_sync(s, "UPDATE platform_keys SET preferred_account_id = ?2 WHERE name = ?1", key_name,
                              account_name ? &acc : NULL, &changes, "set the preferred account", err, errlen) != 0)
        return -1;
    if (changes == 0)
        store_errf(err, errlen, "no key named '%s'", key_name);
    return changes ? changes : -1;
}

int store_key_revoke(store *s, const char *name, char *err, size_t errlen)
{
    int changes = 0;
    if (store_name_write_sync(s, "UPDATE platform_keys SET revoked = 1 WHERE name = ?1 AND revoked = 0", name,
                              NULL, &changes, "revoke key", err, errlen) != 0)
        return -1;
    if (changes)
        return changes;
    int64_t known = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM platform_keys WHERE name = ?", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        known = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    }
    sqlite3_finalize(st);
    if (known <= 0)
        store_errf(err, errlen, known == 0 ? "no key named '%s'" : "cannot look up key '%s'", name);
    return known > 0 ? 0 : -1;
}

/* ---------- settings ---------- */

int store_setting_get(store *s, const char *key, char *out, size_t n)
{
    sqlite3_stmt *st = NULL;
    int rc = -1;
    if (!key || !out || n == 0)
        return -1;
    out[0] = '\0';
    if (sqlite3_prepare_v2(s->db, "SELECT value FROM settings WHERE key = ?", -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    int step = sqlite3_step(st);
    if (step == SQLITE_DONE) {
        rc = 1;
    } else if (step == SQLITE_ROW) {
        const unsigned char *v = sqlite3_column_text(st, 0);
        size_t len = (size_t)sqlite3_column_bytes(st, 0);
        if (v && len < n) {
            memcpy(out, v, len + 1);
            rc = 0;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

int store_setting_set(store *s, const char *key, const char *value, char *err, size_t errlen)
{
    if (!key || !*key || !value) {
        store_errf(err, errlen, "a setting needs a key and a value");
        return -1;
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db,
        "INSERT INTO settings(key, value, updated_at) VALUES (?1, ?2, ?3) ON CONFLICT(key) DO UPDATE"
        " SET value = excluded.value, updated_at = excluded.updated_at", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, store_now());
        store_sync_write_begin(s);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(s->db);
        store_sync_write_end(s);
    }
    if (rc != SQLITE_OK)
        store_errf(err, errlen, "cannot set %s: %s", key, sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : -1;
}

int store_setting_delete(store *s, const char *key, char *err, size_t errlen)
{
    int changes = 0;
    if (store_name_write_sync(s, "DELETE FROM settings WHERE key = ?1", key, NULL, &changes, "unset a setting",
                              err, errlen) != 0)
        return -1;
    return changes ? 0 : 1;
}

int store_settings_load(store *s, void (*fn)(void *ud, const char *key, const char *value), void *ud)
{
    sqlite3_stmt *st = NULL;
    int rc;
    if (sqlite3_prepare_v2(s->db, "SELECT key, value FROM settings ORDER BY key", -1, &st, NULL) != SQLITE_OK)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        fn(ud, (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1));
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* ---------- response owners (read) ---------- */

int store_owners_load(store *s, size_t max, void (*fn)(void *ud, const char *response_id, int64_t account_id),
                      void *ud)
{
    sqlite3_stmt *st = NULL;
    int rc, n = 0;
    if (sqlite3_prepare_v2(s->db,
            "SELECT response_id, account_id FROM (SELECT rowid AS r, response_id, account_id, created_at"
            " FROM response_owners ORDER BY created_at DESC, rowid DESC LIMIT ?1)"
            " ORDER BY created_at ASC, r ASC", -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(st, 1, max > INT32_MAX ? INT32_MAX : (int64_t)max);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        fn(ud, (const char *)sqlite3_column_text(st, 0), sqlite3_column_int64(st, 1));
        n++;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? n : -1;
}

/* ---------- writer thread: statements and one batch ---------- */

/* The EXISTS guard skips state for an account deleted (by the CLI) while
 * the server still held it in memory, instead of failing the batch on the
 * foreign key. */
static const char store_sql_up_state[] =
    "INSERT INTO account_state(account_id, cooldown_until, ladder_step, last_429_at, last_error,"
    " primary_used_pct, secondary_used_pct, primary_reset_at, secondary_reset_at, success_ema,"
    " latency_ema_ms, updated_at, primary_window_s, secondary_window_s, plan_type, has_credits,"
    " credits_unlimited, credits_balance, usage_polled_at, usage_poll_status, success_rate_60s, latency_60s_ms,"
    " attempts_60s)"
    " SELECT ?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22,?23"
    " WHERE EXISTS (SELECT 1 FROM accounts WHERE id = ?1)"
    " ON CONFLICT(account_id) DO UPDATE SET cooldown_until = excluded.cooldown_until,"
    " ladder_step = excluded.ladder_step, last_429_at = excluded.last_429_at,"
    " last_error = excluded.last_error, primary_used_pct = excluded.primary_used_pct,"
    " secondary_used_pct = excluded.secondary_used_pct, primary_reset_at = excluded.primary_reset_at,"
    " secondary_reset_at = excluded.secondary_reset_at, success_ema = excluded.success_ema,"
    " latency_ema_ms = excluded.latency_ema_ms, updated_at = excluded.updated_at,"
    " primary_window_s = excluded.primary_window_s, secondary_window_s = excluded.secondary_window_s,"
    " plan_type = excluded.plan_type, has_credits = excluded.has_credits,"
    " credits_unlimited = excluded.credits_unlimited, credits_balance = excluded.credits_balance,"
    " usage_polled_at = excluded.usage_polled_at, usage_poll_status = excluded.usage_poll_status,"
    " success_rate_60s = excluded.success_rate_60s, latency_60s_ms = excluded.latency_60s_ms,"
    " attempts_60s = excluded.attempts_60s";

/* Followed by one STORE_SQL_LOG_ROW per row: sqlite pays its per-statement
 * costs (starting and ending the statement, opening and closing the table
 * and its index) once per statement, not once per row. */
/* The usual case of store_sql_up_state, the account's row being there
 * already: a plain update by primary key, a fifth cheaper. */
static const char store_sql_set_state[] =
    "UPDATE account_state SET cooldown_until = ?2, ladder_step = ?3, last_429_at = ?4, last_error = ?5,"
    " primary_used_pct = ?6, secondary_used_pct = ?7, primary_reset_at = ?8, secondary_reset_at = ?9,"
    " success_ema = ?10, latency_ema_ms = ?11, updated_at = ?12, primary_window_s = ?13,"
    " secondary_window_s = ?14, plan_type = ?15, has_credits = ?16, credits_unlimited = ?17,"
    " credits_balance = ?18, usage_polled_at = ?19, usage_poll_status = ?20, success_rate_60s = ?21,"
    " latency_60s_ms = ?22, attempts_60s = ?23 WHERE account_id = ?1";

static const char store_sql_ins_log[] = "INSERT INTO request_logs(" STORE_LOG_COLUMNS ") VALUES ";
#define STORE_SQL_LOG_ROW "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)" /* STORE_LOG_COLS */

static const char store_sql_up_owner[] =
    "INSERT INTO response_owners(response_id, account_id, created_at) VALUES (?1, ?2, ?3)"
    " ON CONFLICT(response_id) DO UPDATE SET account_id = excluded.account_id, created_at = excluded.created_at";

static const char store_sql_prune_owners[] = "DELETE FROM response_owners WHERE created_at < ?1";

/* A refreshed login. NULLs keep what is stored (a token endpoint may leave
 * out the refresh or id token). updated_at is left alone: the routing order
 * does not change. */
static const char store_sql_up_login[] =
    "UPDATE accounts SET token = ?2, refresh_token = coalesce(?3, refresh_token),"
    " id_token = coalesce(?4, id_token), email = coalesce(?5, email), plan_type = coalesce(?6, plan_type),"
    " chatgpt_account_id = coalesce(?7, chatgpt_account_id), token_expires_at = ?8, last_refresh_at = ?9,"
    " login_error = NULL WHERE id = ?1";

static const char store_sql_up_login_err[] =
    "UPDATE accounts SET login_error = ?2 WHERE id = ?1 AND refresh_token IS ?3";

static double writer_clock(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void writer_bind_state(sqlite3_stmt *st, const account_state *a)
{
    sqlite3_bind_int64(st, 1, a->account_id);
    sqlite3_bind_double(st, 2, a->cooldown_until);
    sqlite3_bind_int(st, 3, a->ladder_step);
    sqlite3_bind_double(st, 4, a->last_429_at);
    sqlite3_bind_text(st, 5, a->last_error, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 6, a->primary_used_pct);
    sqlite3_bind_double(st, 7, a->secondary_used_pct);
    sqlite3_bind_double(st, 8, a->primary_reset_at);
    sqlite3_bind_double(st, 9, a->secondary_reset_at);
    sqlite3_bind_double(st, 10, a->success_ema);
    sqlite3_bind_double(st, 11, a->latency_ema_ms);
    sqlite3_bind_double(st, 12, a->updated_at);
    sqlite3_bind_double(st, 13, a->primary_window_s);
    sqlite3_bind_double(st, 14, a->secondary_window_s);
    sqlite3_bind_text(st, 15, a->plan_type, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 16, a->has_credits);
    sqlite3_bind_int(st, 17, a->credits_unlimited);
    sqlite3_bind_double(st, 18, a->credits_balance);
    sqlite3_bind_double(st, 19, a->usage_polled_at);
    sqlite3_bind_int(st, 20, a->usage_poll_status);
    sqlite3_bind_double(st, 21, a->success_rate_60s);
    sqlite3_bind_double(st, 22, a->latency_60s_ms);
    sqlite3_bind_int(st, 23, a->attempts_60s);
}

/* Binds every one of the row's STORE_LOG_COLS parameters, which start after
 * parameter `base` (so a reused statement needs no clearing). The texts are
 * owned by the row, which outlives the step: no copies. */
static void writer_bind_log(sqlite3_stmt *st, int base, const request_log *r)
{
    sqlite3_bind_double(st, base + 1, r->ts);
    store_bind_opt_int(st, base + 2, r->platform_key_id, 0);
    sqlite3_bind_text(st, base + 3, r->endpoint, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, base + 4, r->model, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, base + 5, r->stream);
    store_bind_opt_int(st, base + 6, r->account_id, 0);
    sqlite3_bind_text(st, base + 7, r->account_name, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, base + 8, r->status);
    sqlite3_bind_int(st, base + 9, r->attempts);
    sqlite3_bind_double(st, base + 10, r->latency_ms);
    sqlite3_bind_text(st, base + 11, r->route_strategy, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, base + 12, r->error_class, -1, SQLITE_STATIC);
    store_bind_opt_int(st, base + 13, r->input_tokens, -1);
    store_bind_opt_int(st, base + 14, r->output_tokens, -1);
    store_bind_opt_int(st, base + 15, r->total_tokens, -1);
    if (r->attempts_json)
        sqlite3_bind_text(st, base + 16, r->attempts_json, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, base + 16);
    if (r->upstream_model[0])
        sqlite3_bind_text(st, base + 17, r->upstream_model, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, base + 17);
    sqlite3_bind_int(st, base + 18, r->resumed ? 1 : 0);
    store_bind_opt_int(st, base + 19, r->cached_tokens, -1);
    if (r->cost_usd >= 0)
        sqlite3_bind_double(st, base + 20, r->cost_usd);
    else
        sqlite3_bind_null(st, base + 20);
}

/* Steps a bound statement. A constraint error belongs to that one row
 * (retrying would fail forever), so it is skipped; anything else fails the
 * batch. */
static int writer_step(sqlite3 *db, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc == SQLITE_DONE)
        return SQLITE_OK;
    if ((rc & 0xff) == SQLITE_CONSTRAINT) {
        log_warn("store: skipped a %s row: %s", what, sqlite3_errmsg(db));
        return SQLITE_OK;
    }
    return rc;
}

/* Steps a statement that returns no row (BEGIN, COMMIT): any error is the
 * batch's. */
static int writer_run(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Admin changes (rare): prepared when used. Each bumps config_version
 * through the tables' triggers, so the pool reloads what was written. */
static int writer_admin_op(store_writer *w, const store_admin_op *op)
{
    static const char *const sql[] = {
        [STORE_OP_ACCOUNT_ENABLED] = "UPDATE accounts SET enabled = ?2 WHERE id = ?1",
        [STORE_OP_KEY_PREFERRED] = "UPDATE platform_keys SET preferred_account_id = ?2 WHERE id = ?1",
        [STORE_OP_SETTING] = "INSERT INTO settings(key, value, updated_at) VALUES (?3, ?4, ?5)"
                             " ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
    };
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(w->db, sql[op->kind], -1, &st, NULL) != SQLITE_OK)
        return sqlite3_errcode(w->db);
    if (op->kind != STORE_OP_SETTING) {
        sqlite3_bind_int64(st, 1, op->id);
        store_bind_opt_int(st, 2, op->value, op->kind == STORE_OP_KEY_PREFERRED ? 0 : -1);
    } else {
        sqlite3_bind_text(st, 3, op->key, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, op->text, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, (int64_t)writer_clock(CLOCK_REALTIME));
    }
    int rc = writer_step(w->db, st, "admin change");
    sqlite3_finalize(st);
    return rc;
}

static void writer_bind_login(store_writer *w, const login_item *l, sqlite3_stmt **st)
{
    if (l->login_error) {
        *st = w->up_login_err;
        sqlite3_bind_int64(*st, 1, l->account_id);
        sqlite3_bind_text(*st, 2, l->login_error, -1, SQLITE_STATIC);
        store_bind_text(*st, 3, l->expect_refresh);
        return;
    }
    *st = w->up_login;
    sqlite3_bind_int64(*st, 1, l->account_id);
    sqlite3_bind_text(*st, 2, l->access_token, -1, SQLITE_STATIC);
    store_bind_text(*st, 3, l->refresh_token);
    store_bind_text(*st, 4, l->id_token);
    store_bind_text(*st, 5, l->email);
    store_bind_text(*st, 6, l->plan_type);
    store_bind_text(*st, 7, l->chatgpt_account_id);
    sqlite3_bind_int64(*st, 8, l->token_expires_at);
    sqlite3_bind_int64(*st, 9, l->last_refresh_at);
}

/* The INSERT of 2^k request_logs rows, prepared when first used and kept;
 * NULL if sqlite refuses it. */
static sqlite3_stmt *writer_ins_logs(store_writer *w, int k)
{
    if (!w->ins_logs[k]) {
        sbuf sql = SBUF_INIT;
        sbuf_puts(&sql, store_sql_ins_log);
        for (int i = 0; i < 1 << k; i++)
            sbuf_puts(&sql, i ? "," STORE_SQL_LOG_ROW : STORE_SQL_LOG_ROW);
        if (sqlite3_prepare_v3(w->db, sql.p, (int)sql.len, SQLITE_PREPARE_PERSISTENT, &w->ins_logs[k], NULL) !=
            SQLITE_OK)
            w->ins_logs[k] = NULL;
        sbuf_free(&sql);
    }
    return w->ins_logs[k];
}

/* Inserts n logs from the list at it, 2^k rows at a time (the largest 2^k
 * that fits, k <= max_k; with max_k = STORE_LOG_CHUNKS - 1 a batch of n
 * rows takes at most n / 32 + 5 statements). A constraint error belongs to
 * one row, but a multi-row statement that meets one is taken back whole by
 * sqlite; its rows then go in one by one, so only that row is skipped, as
 * ever. */
static int writer_insert_logs(store_writer *w, const log_item *it, size_t n, int max_k)
{
    int rc = SQLITE_OK;
    while (rc == SQLITE_OK && n) {
        int k = max_k;
        while ((size_t)1 << k > n)
            k--;
        sqlite3_stmt *st = writer_ins_logs(w, k);
        while (!st && k > 0) /* a longer statement sqlite would not take: shorter ones */
            st = writer_ins_logs(w, --k);
        if (!st)
            return sqlite3_errcode(w->db);
        const log_item *first = it;
        for (int i = 0; i < 1 << k; i++, it = it->next)
            writer_bind_log(st, i * STORE_LOG_COLS, &it->rl);
        n -= (size_t)1 << k;
        rc = sqlite3_step(st);
        sqlite3_reset(st);
        if (rc == SQLITE_DONE)
            rc = SQLITE_OK;
        else if ((rc & 0xff) == SQLITE_CONSTRAINT && k == 0) {
            log_warn("store: skipped a request_logs row: %s", sqlite3_errmsg(w->db));
            rc = SQLITE_OK;
        } else if ((rc & 0xff) == SQLITE_CONSTRAINT) {
            rc = writer_insert_logs(w, first, (size_t)1 << k, 0);
        }
    }
    return rc;
}

static int writer_batch_rows(store_writer *w, const writer_batch *b)
{
    int rc = SQLITE_OK;
    for (size_t i = 0; rc == SQLITE_OK && i < b->n_ops; i++)
        rc = writer_admin_op(w, &b->ops[i]);
    for (const login_item *l = b->logins; rc == SQLITE_OK && l; l = l->next) {
        sqlite3_stmt *st;
        writer_bind_login(w, l, &st);
        rc = writer_step(w->db, st, "account login");
    }
    for (size_t i = 0; rc == SQLITE_OK && i < b->n_states; i++) {
        writer_bind_state(w->set_state, &b->states[i]);
        rc = writer_step(w->db, w->set_state, "account_state");
        if (rc == SQLITE_OK && sqlite3_changes(w->db) == 0) { /* no row yet (or no account) */
            writer_bind_state(w->up_state, &b->states[i]);
            rc = writer_step(w->db, w->up_state, "account_state");
        }
    }
    if (rc == SQLITE_OK)
        rc = writer_insert_logs(w, b->logs, b->n_logs, STORE_LOG_CHUNKS - 1);
    for (const owner_item *o = b->owners; rc == SQLITE_OK && o; o = o->next) {
        sqlite3_bind_text(w->up_owner, 1, o->response_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(w->up_owner, 2, o->account_id);
        sqlite3_bind_double(w->up_owner, 3, o->created_at);
        rc = writer_step(w->db, w->up_owner, "response_owners");
    }
    return rc;
}

static int writer_prune(store_writer *w)
{
    sqlite3_bind_double(w->prune_owners, 1, writer_clock(CLOCK_REALTIME) - STORE_OWNER_TTL_S);
    return writer_step(w->db, w->prune_owners, "response_owners prune");
}

/* One transaction for the whole batch, with the owner prune when it is due;
 * rolled back on any failure. */
static int writer_commit(store_writer *w, const writer_batch *b)
{
    double now = writer_clock(CLOCK_MONOTONIC);
    int prune = now >= w->prune_due;
    int rc = writer_run(w->begin);
    if (rc == SQLITE_OK)
        rc = writer_batch_rows(w, b);
    if (rc == SQLITE_OK && prune)
        rc = writer_prune(w);
    if (rc == SQLITE_OK)
        rc = writer_run(w->commit); /* a deferred constraint fails here, and the batch with it */
    if (rc != SQLITE_OK && !sqlite3_get_autocommit(w->db))
        sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
    if (rc == SQLITE_OK && prune)
        w->prune_due = now + STORE_PRUNE_EVERY_S;
    return rc;
}

static int writer_stopping(store_writer *w)
{
    pthread_mutex_lock(&w->mu);
    int stop = w->stop;
    pthread_mutex_unlock(&w->mu);
    return stop;
}

static void writer_sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Commits b, retrying with backoff on failure (disk full, I/O error, a lock
 * held past the busy timeout) so nothing queued is lost to a transient
 * problem. Only at shutdown does it give up, after a few more tries. */
static void writer_commit_retry(store_writer *w, const writer_batch *b)
{
    unsigned delay_ms = 100;
    for (int failures = 0;; failures++) {
        int rc = writer_commit(w, b);
        if (rc == SQLITE_OK) {
            if (failures) {
                log_info("store: writer recovered after %d failed commits", failures);
                pthread_mutex_lock(&w->mu);
                w->failing = 0;
                pthread_mutex_unlock(&w->mu);
            }
            return;
        }
        pthread_mutex_lock(&w->mu);
        w->failed_commits++;
        w->failing = 1;
        snprintf(w->last_error, sizeof w->last_error, "%s (sqlite code %d)", sqlite3_errmsg(w->db), rc);
        pthread_mutex_unlock(&w->mu);
        if (failures == 0 || failures % 20 == 0)
            log_error("store: writer commit failed (%s); keeping %zu request logs, %zu state updates and %zu"
                      " response owners, retrying", sqlite3_errmsg(w->db), b->n_logs, b->n_states, b->n_owners);
        if (writer_stopping(w) && failures >= 3) {
            log_error("store: shutting down; dropped %zu request logs, %zu state updates and %zu response owners"
                      " that could not be written", b->n_logs, b->n_states, b->n_owners);
            return;
        }
        writer_sleep_ms(delay_ms);
        delay_ms = delay_ms * 2 > 2000 ? 2000 : delay_ms * 2;
    }
}

/* ---------- writer thread: queue ---------- */

static int writer_has_work(const store_writer *w)
{
    return w->head || w->n_states || w->owners_head || w->n_ops || w->logins_head;
}

/* Moves up to STORE_BATCH_MAX logs into the batch (lock held; the whole
 * list at once when it fits, so the loop's puts rarely find the lock
 * taken). */
static void writer_take_logs(store_writer *w, writer_batch *b)
{
    if (w->n_logs <= STORE_BATCH_MAX) {
        b->logs = w->head;
        b->n_logs = w->n_logs;
        w->head = w->tail = NULL;
        w->n_logs = 0;
        return;
    }
    log_item **tailp = &b->logs;
    while (w->head && b->n_logs < STORE_BATCH_MAX) {
        *tailp = w->head;
        tailp = &w->head->next;
        w->head = w->head->next;
        b->n_logs++;
        w->n_logs--;
    }
    *tailp = NULL;
    if (!w->head)
        w->tail = NULL;
}

/* Moves up to STORE_BATCH_MAX owners into the batch (lock held), as
 * writer_take_logs. */
static void writer_take_owners(store_writer *w, writer_batch *b)
{
    if (w->n_owners <= STORE_BATCH_MAX) {
        b->owners = w->owners_head;
        b->n_owners = w->n_owners;
        w->owners_head = w->owners_tail = NULL;
        w->n_owners = 0;
        return;
    }
    owner_item **tailp = &b->owners;
    while (w->owners_head && b->n_owners < STORE_BATCH_MAX) {
        *tailp = w->owners_head;
        tailp = &w->owners_head->next;
        w->owners_head = w->owners_head->next;
        b->n_owners++;
        w->n_owners--;
    }
    *tailp = NULL;
    if (!w->owners_head)
        w->owners_tail = NULL;
}

/* Takes all coalesced states and up to STORE_BATCH_MAX logs and owners
 * (lock held). */
static void writer_take(store_writer *w, writer_batch *b)
{
    memset(b, 0, sizeof *b);
    b->states = w->states;
    b->n_states = w->n_states;
    w->states = NULL;
    w->n_states = w->cap_states = 0;
    memcpy(b->ops, w->ops, w->n_ops * sizeof *w->ops);
    b->n_ops = w->n_ops;
    w->n_ops = 0;
    b->logins = w->logins_head;
    b->n_logins = w->n_logins;
    w->logins_head = w->logins_tail = NULL;
    w->n_logins = 0;
    writer_take_logs(w, b);
    writer_take_owners(w, b);
    /* Every state is in the batch and both queues are in seq order, so the
     * batch covers everything queued before the first item still waiting. */
    uint64_t next = w->queued_seq + 1;
    if (w->head && w->head->seq < next)
        next = w->head->seq;
    if (w->owners_head && w->owners_head->seq < next)
        next = w->owners_head->seq;
    b->seq = next - 1;
}

static void writer_login_free(login_item *l)
{
    sbuf_secret_free(l->access_token);
    sbuf_secret_free(l->refresh_token);
    sbuf_secret_free(l->id_token);
    sbuf_secret_free(l->expect_refresh);
    free(l->email);
    free(l->plan_type);
    free(l->chatgpt_account_id);
    free(l->login_error);
    free(l);
}

static void writer_batch_free(writer_batch *b)
{
    for (login_item *l = b->logins, *next; l; l = next) {
        next = l->next;
        writer_login_free(l);
    }
    for (log_item *it = b->logs, *next; it; it = next) {
        next = it->next;
        free(it->rl.attempts_json);
        free(it);
    }
    for (owner_item *o = b->owners, *next; o; o = next) {
        next = o->next;
        free(o);
    }
    free(b->states);
}

static int writer_window_open(const store_writer *w)
{
    return !w->stop && !w->sync_waiters && !w->n_logins && w->n_logs < STORE_BATCH_MAX &&
           w->n_owners < STORE_BATCH_MAX;
}

/* After the first item arrives, gathers more for up to STORE_GROUP_MS (lock
 * held): one transaction and one fsync per window instead of per request,
 * and the write lock stays free most of the time for the CLI. */
static void writer_gather(store_writer *w)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += STORE_GROUP_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (writer_window_open(w))
        if (pthread_cond_timedwait(&w->work_cv, &w->mu, &until) == ETIMEDOUT)
            break;
}

static void writer_wait_work(store_writer *w)
{
    w->idle = 1;
    while (!writer_has_work(w) && !w->stop)
        pthread_cond_wait(&w->work_cv, &w->mu);
    w->idle = 0;
}

static void *writer_main(void *arg)
{
    store_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        writer_wait_work(w);
        if (!writer_has_work(w))
            break; /* stop requested and the queue is drained */
        writer_gather(w);
        writer_batch b;
        writer_take(w, &b);
        pthread_mutex_unlock(&w->mu);
        writer_commit_retry(w, &b);
        writer_batch_free(&b);
        pthread_mutex_lock(&w->mu);
        w->committed_seq = b.seq;
        pthread_cond_broadcast(&w->done_cv);
        if (b.n_logins && w->notify_fd >= 0) {
            uint64_t one = 1;
            if (write(w->notify_fd, &one, sizeof one) < 0 && errno != EAGAIN)
                log_warn("store: cannot signal a committed login: %s", strerror(errno));
        }
    }
    w->committed_seq = w->queued_seq;
    pthread_cond_broadcast(&w->done_cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static int writer_prepare(store_writer *w, const char *path, char *err, size_t errlen)
{
    /* The connection is the writer thread's alone (prepared here before
     * the thread starts, closed after it ends): sqlite's per-call mutex
     * would only cost instructions on every bind and step. */
    if (store_conn_open(path, STORE_BUSY_MS, SQLITE_OPEN_NOMUTEX, &w->db, err, errlen) != 0)
        return -1;
    const unsigned keep = SQLITE_PREPARE_PERSISTENT;
    if (sqlite3_prepare_v3(w->db, store_sql_up_state, -1, keep, &w->up_state, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, store_sql_set_state, -1, keep, &w->set_state, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, store_sql_up_owner, -1, keep, &w->up_owner, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, store_sql_prune_owners, -1, keep, &w->prune_owners, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, store_sql_up_login, -1, keep, &w->up_login, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, store_sql_up_login_err, -1, keep, &w->up_login_err, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, "BEGIN IMMEDIATE", -1, keep, &w->begin, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, "COMMIT", -1, keep, &w->commit, NULL) != SQLITE_OK ||
        !writer_ins_logs(w, 0)) {
        store_errf(err, errlen, "writer: %s", sqlite3_errmsg(w->db));
        return -1;
    }
    return 0;
}

static void writer_conn_close(store_writer *w)
{
    sqlite3_finalize(w->up_state);
    sqlite3_finalize(w->set_state);
    sqlite3_finalize(w->up_owner);
    sqlite3_finalize(w->prune_owners);
    sqlite3_finalize(w->up_login);
    sqlite3_finalize(w->up_login_err);
    sqlite3_finalize(w->begin);
    sqlite3_finalize(w->commit);
    for (int k = 0; k < STORE_LOG_CHUNKS; k++) {
        sqlite3_finalize(w->ins_logs[k]);
        w->ins_logs[k] = NULL;
    }
    sqlite3_close_v2(w->db);
    w->up_state = w->set_state = w->up_owner = w->prune_owners = w->up_login = w->up_login_err = w->begin = w->commit = NULL;
    w->db = NULL;
}

/* Signals go to the loop thread (SIGHUP reload, SIGTERM), never here. */
static int writer_spawn(store_writer *w)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&w->thread, NULL, writer_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int store_writer_start(store *s, char *err, size_t errlen)
{
    store_writer *w = &s->w;
    if (w->running) {
        store_errf(err, errlen, "writer already running");
        return -1;
    }
    if (!sqlite3_threadsafe()) { /* two threads use two connections of one library */
        store_errf(err, errlen, "sqlite3 was built without thread support");
        return -1;
    }
    if (writer_prepare(w, s->path, err, errlen) != 0) {
        writer_conn_close(w);
        return -1;
    }
    w->notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->notify_fd < 0) {
        store_errf(err, errlen, "cannot create the writer's eventfd: %s", strerror(errno));
        writer_conn_close(w);
        return -1;
    }
    int rc = writer_spawn(w);
    if (rc != 0) {
        store_errf(err, errlen, "cannot start writer thread: %s", strerror(rc));
        writer_conn_close(w);
        return -1;
    }
    w->running = 1;
    return 0;
}

static void store_writer_stop(store_writer *w)
{
    if (!w->running)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->work_cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    w->running = 0;
    writer_conn_close(w);
    if (w->notify_fd >= 0)
        close(w->notify_fd);
    w->notify_fd = -1;
}

/* Frees whatever was queued but never written (writer never started). */
static void store_writer_discard(store_writer *w)
{
    writer_batch lb = {.logins = w->logins_head};
    if (w->logins_head)
        log_warn("store: closing with %zu refreshed logins never written (writer not started)", w->n_logins);
    writer_batch_free(&lb);
    w->logins_head = w->logins_tail = NULL;
    w->n_logins = 0;
    if (w->head || w->n_states || w->owners_head)
        log_warn("store: closing with %zu request logs, %zu state updates and %zu response owners never written"
                 " (writer not started)", w->n_logs, w->n_states, w->n_owners);
    writer_batch b = {.logs = w->head, .states = w->states, .owners = w->owners_head};
    writer_batch_free(&b);
    w->head = w->tail = NULL;
    w->owners_head = w->owners_tail = NULL;
    w->states = NULL;
    w->n_logs = w->n_states = w->cap_states = w->n_owners = w->n_ops = 0;
}

/* Whether a put must wake the writer (lock held): when it waits for a
 * first item (once per idle spell), or when full, a batch that cuts its
 * gathering window short; else it is gathering or committing and looks
 * again. The caller signals after unlocking: woken under the lock, the
 * writer would only block on it (two more futex calls, one on the loop). */
static int writer_wake_due(store_writer *w, int full)
{
    int wake = w->idle || full;
    w->idle = 0;
    return wake;
}

void store_writer_put_state(store *s, const account_state *st)
{
    store_writer *w = &s->w;
    pthread_mutex_lock(&w->mu);
    size_t i = 0;
    while (i < w->n_states && w->states[i].account_id != st->account_id)
        i++;
    void *states = w->states;
    if (i == w->n_states && store_grow(&states, &w->cap_states, w->n_states, sizeof *w->states) != 0) {
        pthread_mutex_unlock(&w->mu);
        log_error("store: out of memory; dropped a state update");
        return;
    }
    w->states = states;
    if (i == w->n_states)
        w->n_states++;
    w->states[i] = *st;
    w->states[i].last_error[sizeof w->states[i].last_error - 1] = '\0';
    w->queued_seq++;
    int wake = writer_wake_due(w, 0);
    pthread_mutex_unlock(&w->mu);
    if (wake)
        pthread_cond_signal(&w->work_cv);
}

static void store_log_terminate(request_log *r)
{
    r->endpoint[sizeof r->endpoint - 1] = '\0';
    r->model[sizeof r->model - 1] = '\0';
    r->upstream_model[sizeof r->upstream_model - 1] = '\0';
    r->account_name[sizeof r->account_name - 1] = '\0';
    r->route_strategy[sizeof r->route_strategy - 1] = '\0';
    r->error_class[sizeof r->error_class - 1] = '\0';
}

/* Drops the oldest queued log (lock held); returns the new dropped total. */
static uint64_t writer_drop_oldest(store_writer *w)
{
    log_item *old = w->head;
    w->head = old->next;
    if (!w->head)
        w->tail = NULL;
    w->n_logs--;
    free(old->rl.attempts_json);
    free(old);
    return ++w->dropped_logs;
}

void store_writer_put_log(store *s, const request_log *rl)
{
    store_writer *w = &s->w;
    log_item *it = malloc(sizeof *it);
    if (!it) {
        log_error("store: out of memory; dropped a request log");
        free(rl->attempts_json);
        return;
    }
    it->next = NULL;
    it->rl = *rl;
    store_log_terminate(&it->rl);
    uint64_t dropped = 0;
    pthread_mutex_lock(&w->mu);
    if (w->n_logs >= STORE_LOG_QUEUE_MAX)
        dropped = writer_drop_oldest(w);
    it->seq = ++w->queued_seq;
    if (w->tail)
        w->tail->next = it;
    else
        w->head = it;
    w->tail = it;
    w->n_logs++;
    int wake = writer_wake_due(w, w->n_logs == STORE_BATCH_MAX);
    pthread_mutex_unlock(&w->mu);
    if (wake)
        pthread_cond_signal(&w->work_cv);
    if (dropped == 1 || (dropped && dropped % 10000 == 0)) /* one line per 10000, not a flood */
        log_error("store: writer queue full (%d request logs); dropped the oldest (%llu dropped so far)",
                  STORE_LOG_QUEUE_MAX, (unsigned long long)dropped);
}

/* Drops the oldest queued owner (lock held); returns the new dropped total. */
static uint64_t writer_drop_oldest_owner(store_writer *w)
{
    owner_item *old = w->owners_head;
    w->owners_head = old->next;
    if (!w->owners_head)
        w->owners_tail = NULL;
    w->n_owners--;
    free(old);
    return ++w->dropped_owners;
}

static owner_item *writer_owner_new(const char *response_id, int64_t account_id)
{
    size_t len = strlen(response_id);
    owner_item *o = malloc(sizeof *o + len + 1);
    if (!o)
        return NULL;
    o->next = NULL;
    o->account_id = account_id;
    o->created_at = writer_clock(CLOCK_REALTIME);
    memcpy(o->response_id, response_id, len + 1);
    return o;
}

void store_writer_put_owner(store *s, const char *response_id, int64_t account_id)
{
    store_writer *w = &s->w;
    if (!response_id || !*response_id || strlen(response_id) > STORE_OWNER_ID_MAX || account_id <= 0)
        return;
    owner_item *o = writer_owner_new(response_id, account_id);
    if (!o) {
        log_error("store: out of memory; dropped a response owner");
        return;
    }
    uint64_t dropped = 0;
    pthread_mutex_lock(&w->mu);
    if (w->n_owners >= STORE_OWNER_QUEUE_MAX)
        dropped = writer_drop_oldest_owner(w);
    o->seq = ++w->queued_seq;
    if (w->owners_tail)
        w->owners_tail->next = o;
    else
        w->owners_head = o;
    w->owners_tail = o;
    w->n_owners++;
    int wake = writer_wake_due(w, w->n_owners == STORE_BATCH_MAX);
    pthread_mutex_unlock(&w->mu);
    if (wake)
        pthread_cond_signal(&w->work_cv);
    if (dropped == 1 || (dropped && dropped % 10000 == 0))
        log_error("store: writer queue full (%d response owners); dropped the oldest (%llu dropped so far)",
                  STORE_OWNER_QUEUE_MAX, (unsigned long long)dropped);
}

int store_writer_put_admin(store *s, const store_admin_op *op)
{
    store_writer *w = &s->w;
    pthread_mutex_lock(&w->mu);
    int ok = w->n_ops < STORE_OPS_MAX;
    if (ok) {
        w->ops[w->n_ops] = *op;
        w->ops[w->n_ops].key[sizeof op->key - 1] = '\0';
        w->ops[w->n_ops].text[sizeof op->text - 1] = '\0';
        w->n_ops++;
        w->queued_seq++;
        if (w->idle)
            pthread_cond_signal(&w->work_cv);
    }
    pthread_mutex_unlock(&w->mu);
    return ok ? 0 : -1;
}

uint64_t store_writer_put_login(store *s, const store_login *l)
{
    store_writer *w = &s->w;
    login_item *it = calloc(1, sizeof *it);
    if (!it || !l->account_id || (!l->login_error && !l->access_token)) {
        free(it);
        return 0;
    }
    it->account_id = l->account_id;
    it->access_token = store_strdup(l->access_token);
    it->refresh_token = store_strdup(l->refresh_token);
    it->id_token = store_strdup(l->id_token);
    it->email = store_strdup(l->email);
    it->plan_type = store_strdup(l->plan_type);
    it->chatgpt_account_id = store_strdup(l->chatgpt_account_id);
    it->token_expires_at = l->token_expires_at;
    it->last_refresh_at = l->last_refresh_at;
    it->login_error = store_strdup(l->login_error);
    it->expect_refresh = store_strdup(l->expect_refresh);
    pthread_mutex_lock(&w->mu);
    uint64_t seq = it->seq = ++w->queued_seq;
    if (w->logins_tail)
        w->logins_tail->next = it;
    else
        w->logins_head = it;
    w->logins_tail = it;
    w->n_logins++;
    pthread_cond_signal(&w->work_cv); /* idle or gathering: a login does not wait for the window */
    pthread_mutex_unlock(&w->mu);
    return seq;
}

uint64_t store_writer_committed(store *s)
{
    store_writer *w = &s->w;
    pthread_mutex_lock(&w->mu);
    uint64_t c = w->committed_seq;
    pthread_mutex_unlock(&w->mu);
    return c;
}

int store_writer_notify_fd(store *s) { return s->w.notify_fd; }

void store_writer_sync(store *s)
{
    store_writer *w = &s->w;
    if (!w->running)
        return; /* nothing would ever commit; blocking forever helps no one */
    pthread_mutex_lock(&w->mu);
    uint64_t target = w->queued_seq;
    w->sync_waiters++;
    pthread_cond_signal(&w->work_cv); /* cut a gathering window short */
    while (w->committed_seq < target)
        pthread_cond_wait(&w->done_cv, &w->mu);
    w->sync_waiters--;
    pthread_mutex_unlock(&w->mu);
}

void store_writer_stats_get(store *s, store_writer_stats *out)
{
    store_writer *w = &s->w;
    pthread_mutex_lock(&w->mu);
    out->pending_logs = w->n_logs;
    out->pending_states = w->n_states;
    out->dropped_logs = w->dropped_logs;
    out->failed_commits = w->failed_commits;
    out->pending_owners = w->n_owners;
    out->dropped_owners = w->dropped_owners;
    out->failing = w->failing;
    snprintf(out->last_error, sizeof out->last_error, "%s", w->last_error);
    pthread_mutex_unlock(&w->mu);
}
