/* store.c: the store handle (see store.h): the database file (created
 * 0600), its connections and their pragmas, opening (WAL, then the
 * migrations of store_schema.c) and closing (the writer first), the busy
 * wait that brackets the CLI's synchronous writes, config_version, and the
 * small helpers the store's other files share (store_internal.h). The
 * queries live with their tables (store_accounts.c, store_keys.c,
 * store_state.c, store_settings.c, store_conversations.c, ...), the writer thread in
 * store_writer.c and store_writer_commit.c. Tokens and platform keys are
 * never logged. */
#include "store/store.h"
#include "store/store_internal.h"
#include "base/log.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---------- small helpers ---------- */

void store_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

char *store_strdup(const char *s)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        abort(); /* same policy as sbuf: no useful work without memory */
    return d;
}

char *store_col_dup(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? store_strdup((const char *)t) : NULL;
}

void store_col_copy(sqlite3_stmt *st, int i, char *dst, size_t n)
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
void store_bind_opt_int(sqlite3_stmt *st, int i, int64_t v, int64_t none)
{
    if (v == none)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_int64(st, i, v);
}

/* Doubles the capacity of *arr when n reached it. 0 ok, -1 out of memory. */
int store_grow(void **arr, size_t *cap, size_t n, size_t elem)
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

int64_t store_now(void) { return (int64_t)time(NULL); }

int store_exec(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        store_errf(err, errlen, "%s", msg ? msg : sqlite3_errstr(rc));
    sqlite3_free(msg);
    return rc;
}

/* Runs a SELECT and hands each row to row_fn(stmt, slot) in a growing array
 * of elem-sized slots. On error frees nothing itself: the caller's free_fn
 * gets the rows read so far. Returns 0 or -1 (including SQLITE_BUSY). */
int store_rows_load(store *s, const char *sql, size_t elem, store_row_fn row_fn, void **out, size_t *n)
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

/* ---------- writes by name (CLI) ---------- */

/* Runs one write with ?1 = name and, when the SQL has a ?2, ?2 = *arg (NULL
 * binds SQL NULL). Returns the sqlite result; *changes gets the row count. */
int store_name_write(sqlite3 *db, const char *sql, const char *name, const int64_t *arg, int *changes)
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
int store_name_write_sync(store *s, const char *sql, const char *name, const int64_t *arg, int *changes,
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

/* ---------- connections ---------- */

/* flags: added to SQLITE_OPEN_READWRITE (SQLITE_OPEN_NOMUTEX for a
 * connection only one thread at a time ever uses). */
int store_conn_open(const char *path, int busy_ms, int flags, sqlite3 **out, char *err, size_t errlen)
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

/* ---------- open / close ---------- */

/* see store_internal.h */
int store_schema_refuse_foreign(sqlite3 *db, const char *what, char *err, size_t errlen)
{
    char obj[192];
    int rc = store_schema_foreign(db, obj, sizeof obj, err, errlen);
    if (rc == 1)
        store_errf(err, errlen,
                   "%s holds %s, which switchyard's schema does not define: refused, since whatever SQL it holds "
                   "would run inside the gateway (a database file is taken with exactly the schema's tables, "
                   "indexes and triggers; drop it with sqlite3 if it is yours)",
                   what, obj);
    return rc == 0 ? 0 : -1;
}

static int store_open_db(store *s, char *err, size_t errlen)
{
    /* Open and migrate with a busy wait (start-up is off the serving path,
     * and another process may be migrating), then drop to 0 for the loop. */
    if (store_conn_open(s->path, STORE_BUSY_MS, 0, &s->db, err, errlen) != 0)
        return -1;
    if (store_wal_enable(s->db, err, errlen) != 0 || store_schema_refuse_foreign(s->db, s->path, err, errlen) != 0 ||
        store_migrate(s->db, err, errlen) != 0)
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
        /* the message names the database once: the connection's errors
         * already do, a migration's does not */
        if (err && errlen && !strstr(err, path)) {
            char why[512];
            snprintf(why, sizeof why, "%s", err);
            store_errf(err, errlen, "cannot open database %s: %s", path, why);
        }
        return NULL;
    }
    return s;
}

const char *store_path(const store *s) { return s->path; }
struct sqlite3 *store_db(store *s) { return s->db; }

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
    sqlite3_finalize(s->conv_get_st);
    sqlite3_finalize(s->conv_has_st);
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

/* ---------- config_version ---------- */

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
