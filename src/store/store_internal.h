/* store_internal.h: what the store's files share with each other; no other
 * module includes it. The store handle and the writer's queue are defined
 * here because store.c opens and closes what store_writer.c and
 * store_writer_commit.c run; the helpers are store.c's. */
#ifndef SY_STORE_INTERNAL_H
#define SY_STORE_INTERNAL_H
#include "store/store.h"
#include <pthread.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define STORE_BUSY_MS 5000    /* busy wait for connections that are off the loop */
#define STORE_OPS_MAX 64      /* queued admin changes; more are refused until the writer catches up */
#define STORE_LOG_CHUNKS 6    /* request logs go in by 32, 16, 8, 4, 2 and 1 rows per INSERT */

/* The request_logs columns in table order as migration 13 (store_schema.c)
 * copied them into the rebuilt table (frozen: a shipped migration), and
 * as the writer inserts them (those and the ones added since). */
#define STORE_LOG_COLUMNS_13                                                                                \
    "ts, platform_key_id, endpoint, model, stream, account_id, account_name, status, attempts, latency_ms," \
    " route_strategy, error_class, input_tokens, output_tokens, total_tokens, attempts_json, upstream_model," \
    " resumed, cached_tokens, cost_usd"
#define STORE_LOG_COLUMNS STORE_LOG_COLUMNS_13 ", error_message"

/* The SET clause that clears an account's hold (store.h), and the one that
 * keeps it only while `same` (an SQL condition on the row's old values:
 * the login is unchanged) holds: a changed login clears it. */
#define STORE_SQL_UNHOLD "hold = NULL, hold_detail = NULL, hold_since = 0"
/* `account reset`: a prefill refusal the gateway learned is forgotten (an
 * operator's yes or no stays) */
/* a refusal follows a declared yes (auto and no never send a prefill): a
 * reset takes the declaration back */
#define STORE_SQL_PREFILL_RELEARN "prefill = CASE prefill WHEN 'refused' THEN 'yes' ELSE prefill END"
#define STORE_SQL_HOLD_IF(same)                                                                       \
    "hold = CASE WHEN " same " THEN hold END, hold_detail = CASE WHEN " same " THEN hold_detail END," \
    " hold_since = CASE WHEN " same " THEN hold_since ELSE 0 END"

/* ---------- the writer's queue and the store handle ---------- */

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

/* A conversation turn to store (del 0) or a response id whose turn to
 * delete (del 1), in one allocation: the strings follow the struct. */
typedef struct conv_item {
    struct conv_item *next;
    uint64_t seq;
    int del;
    int64_t account_id;
    double created_at;     /* unix seconds */
    const char *prev;      /* into the allocation; NULL: the conversation's first turn */
    const char *input, *output;
    size_t input_len, output_len;
    size_t size;           /* bytes of the allocation, for the queue's bound */
    char response_id[];
} conv_item;

/* An account a sign-in of the gateway brought (store_writer_put_import):
 * the entry with its own copies of every string, and what storing it did,
 * filled by the writer thread in the batch's commit. */
#define STORE_IMPORT_RESULTS 16

typedef struct import_job {
    account_new a;
    char *owned[11];       /* the copies a's strings point into (freed; secrets wiped) */
    char label[64];
    int outcome;           /* STORE_IMPORT_* */
    char name[128];        /* the account that holds the login */
    char err[256];
} import_job;

typedef struct login_item {
    struct login_item *next;
    uint64_t seq;
    int64_t account_id;
    char *access_token, *refresh_token, *id_token, *email, *plan_type, *chatgpt_account_id;
    int64_t token_expires_at, last_refresh_at;
    char *login_error, *expect_refresh;
    /* a hold instead (store_writer_put_hold): hold set, the others NULL */
    char *hold, *hold_detail, *expect_token;
    int64_t expect_gen, hold_since;
    /* a learned model list instead (store_writer_put_models): models set */
    int models;
    char *models_ids, *models_codex;
    /* a function of the store's own modules instead (store_writer_put_call):
     * call set, run in the batch's transaction */
    int (*call)(sqlite3 *db, void *arg);
    void *call_arg;
    void (*call_free)(void *arg);
    /* an account to import instead (store_writer_put_import): import set */
    import_job *import;
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
    conv_item *convs;
    size_t n_convs;
    store_conversation_limits conv_limits; /* as they were when the batch was taken */
    int conv_sweep;                        /* sweep the conversations in this commit whatever is due */
    store_log_limits log_limits;           /* the request logs' retention when the batch was taken */
    int log_sweep;                         /* sweep the request logs in this commit whatever is due */
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
    uint64_t pinned_seq;  /* the last change the loop applied before it was written (admin ops, holds) */
    uint64_t dropped_logs, failed_commits;
    int failing;          /* the latest commit failed; cleared by the next success */
    char last_error[128]; /* sqlite's message for the latest failure */
    char fail_msg[100];   /* writer thread only: the failing call's message, taken before the ROLLBACK */
    /* the database file, watched by the writer thread (store_writer_watch) */
    char *path;           /* NULL: nothing to watch (in memory) */
    dev_t dev;            /* its identity when the writer opened it */
    ino_t ino;
    double watch_due;     /* monotonic seconds; writer thread only */
    char file_problem[192]; /* what happened to the file, "" while it is fine */
    long long db_bytes, wal_bytes, disk_free_bytes; /* the watch's figures (store_writer_stats), under mu */
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
    conv_item *conv_head, *conv_tail; /* conversation turns and deletes, in order */
    size_t n_convs, conv_bytes;
    uint64_t dropped_convs, swept_convs, conv_sweeps;
    store_conversation_limits conv_limits;
    int conv_sweep_wake;  /* a sweep is wanted even without rows to commit (limits changed, a sweep unfinished) */
    size_t conv_inserts;  /* writer thread only: turns committed since the last sweep */
    double conv_sweep_due; /* writer thread only: monotonic seconds of the next timed sweep */
    store_log_limits log_limits;
    int log_sweep_wake;    /* the request logs' sweep is wanted now (limits changed, a sweep unfinished) */
    uint64_t swept_logs;
    double log_sweep_due;  /* writer thread only: monotonic seconds of the next timed sweep */
    pthread_t thread;
    sqlite3 *db; /* the writer's own connection */
    sqlite3_stmt *up_state, *set_state, *up_owner, *prune_owners, *up_login, *up_login_err, *up_hold, *up_models, *begin,
        *commit;
    sqlite3_stmt *ins_logs[STORE_LOG_CHUNKS]; /* [k]: insert 2^k rows; prepared when first used */
    sqlite3_stmt *up_conv, *del_conv, *conv_expire, *conv_totals, *conv_oldest, *conv_del_rowid;
    sqlite3_stmt *log_expire, *log_trim;
    /* what the latest imports did, by ticket (store_writer_import_result), under mu */
    struct {
        uint64_t seq;
        int outcome;
        char name[128], err[256];
    } imports[STORE_IMPORT_RESULTS];
    size_t imports_next;
} store_writer;

struct store {
    sqlite3 *db; /* main connection: loop-thread reads, CLI writes */
    sqlite3_stmt *config_version_st; /* kept: the loop reads config_version every second */
    sqlite3_stmt *conv_get_st, *conv_has_st; /* kept: read per request (store_conversations.c) */
    char *path;
    store_writer w;
};

/* ---------- small helpers (store.c) ---------- */

void store_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
char *store_strdup(const char *s);              /* NULL stays NULL; aborts when out of memory */
char *store_col_dup(sqlite3_stmt *st, int i);   /* heap copy of a text column, NULL for NULL */
void store_col_copy(sqlite3_stmt *st, int i, char *dst, size_t n); /* NULL copies as "" */
void store_bind_text(sqlite3_stmt *st, int i, const char *s); /* NULL binds SQL NULL */
/* The six login columns (refresh_token, id_token, email, plan_type,
 * token_expires_at, last_refresh_at) from parameter i on; "" binds NULL. */
void store_bind_login(sqlite3_stmt *st, int i, const account_login *l);
void store_bind_opt_int(sqlite3_stmt *st, int i, int64_t v, int64_t none); /* v == none binds NULL */
int store_grow(void **arr, size_t *cap, size_t n, size_t elem);
int64_t store_now(void);                        /* unix seconds */
int store_exec(sqlite3 *db, const char *sql, char *err, size_t errlen); /* sqlite result; err filled */
/* A connection with the store's pragmas; flags are added to
 * SQLITE_OPEN_READWRITE. 0 ok, -1 (err filled). */
int store_conn_open(const char *path, int busy_ms, int flags, sqlite3 **out, char *err, size_t errlen);
/* A SELECT's rows into a growing array of elem-sized slots (see store.c). */
typedef void (*store_row_fn)(sqlite3_stmt *st, void *slot);
int store_rows_load(store *s, const char *sql, size_t elem, store_row_fn row_fn, void **out, size_t *n);
/* One write with ?1 = name (and ?2 = *arg); the _sync form adds the CLI
 * busy wait and fills err (see store.c). */
int store_name_write(sqlite3 *db, const char *sql, const char *name, const int64_t *arg, int *changes);
int store_name_write_sync(store *s, const char *sql, const char *name, const int64_t *arg, int *changes,
                          const char *what, char *err, size_t errlen);

/* ---------- schema (store_schema.c) ---------- */

/* Brings the database to this build's schema version. 0 ok, -1 (err filled). */
int store_migrate(sqlite3 *db, char *err, size_t errlen);
/* Does db hold an object its schema (switchyard's, at db's version) does
 * not define, or one of its own with other SQL? A trigger added to a
 * backup would run the attacker's SQL inside the gateway (issue 33): such
 * a file is refused, the object named in out ("trigger evil"). 0 none,
 * 1 one (the first), -1 err filled. */
int store_schema_foreign(sqlite3 *db, char *out, size_t n, char *err, size_t errlen);
/* store_schema_foreign as a refusal: 0 when db holds only its schema's
 * objects, else -1 with err naming what (the file's name) and the object.
 * Every database file the gateway is handed goes through it: the one it
 * opens, and a backup before restore puts it in place. */
int store_schema_refuse_foreign(sqlite3 *db, const char *what, char *err, size_t errlen);
/* The highest migration applied to db (0 none, -1 no schema_migrations
 * table or an error), and the highest this build knows (store_backup.c
 * checks a database to restore with them). */
int store_schema_version(sqlite3 *db);
int store_schema_latest(void);

/* ---------- accounts (store_accounts.c) ---------- */

int store_json_is_object(sqlite3 *db, const char *text);
int store_account_check(sqlite3 *db, const account_new *a, char *err, size_t errlen);
/* One entry of an import (store_accounts_import) on db, inside the
 * caller's transaction: 0 (added or updated counted), or -1 with err. The
 * writer runs it for a sign-in of the gateway (store_writer_put_import). */
int store_import_one(sqlite3 *db, const account_new *a, const char *label, int *added, int *updated, char *err,
                     size_t errlen);
/* INSERT of one account on db; returns the sqlite result code. */
int store_account_insert(sqlite3 *db, const account_new *a);

/* ---------- the writer (store_writer.c, store_writer_commit.c) ---------- */

/* store_writer.c: set up at open; at close stopped (draining its queue)
 * and what was never written freed. */
void store_writer_init(store_writer *w);
void store_writer_stop(store_writer *w);
void store_writer_discard(store_writer *w);
/* Queues call(db, arg) to run in the writer's next transaction, in order
 * with the logins and committed at once as they are (store_shared.c
 * applies another gateway's rows so). call returns a sqlite result code:
 * anything but SQLITE_OK fails the batch, which is retried whole, so call
 * must be idempotent and must skip bad data itself (a savepoint), failing
 * only on what a retry can heal (busy, I/O). free_fn(arg) after the
 * commit. The ticket as store_writer_put_login's; 0 (and free_fn called)
 * when it could not be queued. */
uint64_t store_writer_put_call(store *s, int (*call)(sqlite3 *db, void *arg), void *arg, void (*free_fn)(void *arg));

/* store_writer_commit.c: the writer's connection and statements, and
 * committing one batch (retried until it succeeds or shutdown gives up). */
int store_writer_prepare(store_writer *w, const char *path, char *err, size_t errlen);
void store_writer_conn_close(store_writer *w);
void store_writer_commit_retry(store_writer *w, const writer_batch *b);
/* Every STORE_WATCH_S (writer thread, off the loop): does the database path
 * still name the file the writer has open, readable and writable, with an
 * SQLite header? A change is logged once and kept in file_problem. */
void store_writer_watch(store_writer *w);
#define STORE_WATCH_S 1.0
double store_writer_clock(clockid_t id); /* seconds on that clock */

#endif
