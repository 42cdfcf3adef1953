/* store_codex.c: queries of the codex_attach journal (see store_codex.h).
 * Every write runs on the CLI / start-up path with the store's busy wait,
 * in an IMMEDIATE transaction when it touches two rows. */
#include "store/store_codex.h"
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void sc_err(char *err, size_t errlen, const char *what, sqlite3 *db)
{
    if (err && errlen)
        snprintf(err, errlen, "%s: %s", what, sqlite3_errmsg(db));
}

static void sc_bind_opt(sqlite3_stmt *st, int i, const char *s)
{
    if (s && *s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

void store_codex_journal_free(codex_journal *j)
{
    sbuf_free(&j->original);
    sbuf_free(&j->keys);
}

static int sc_step_done(sqlite3 *db, const char *sql, void (*bind)(sqlite3_stmt *, const void *), const void *arg)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        bind(st, arg);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_extended_errcode(db);
    }
    sqlite3_finalize(st);
    return rc;
}

typedef struct sc_key_arg {
    const char *name, *hash, *prefix;
} sc_key_arg;

static void sc_bind_key(sqlite3_stmt *st, const void *arg)
{
    const sc_key_arg *k = arg;
    sqlite3_bind_text(st, 1, k->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, k->hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, k->prefix, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, (int64_t)time(NULL));
}

static void sc_bind_journal(sqlite3_stmt *st, const void *arg)
{
    const codex_journal *j = arg;
    sqlite3_bind_text(st, 1, j->home, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, j->config_path, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, j->gateway_url, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, j->key_id);
    sqlite3_bind_text(st, 5, j->key_prefix, -1, SQLITE_STATIC);
    if (j->original_present)
        sqlite3_bind_blob(st, 6, j->original.p ? j->original.p : "", (int)j->original.len, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 6);
    sc_bind_opt(st, 7, j->original_sha);
    sqlite3_bind_int(st, 8, j->original_mode);
    sqlite3_bind_text(st, 9, j->written_sha, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 10, j->keys.p ? j->keys.p : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 11, j->created_at);
}

/* The handover's checks, inside the transaction: the old journal is this
 * home's, 'detaching' (its file already given back), and holds the key,
 * which is still live. Its close then keeps the key for the new journal. */
static int sc_handover_close(sqlite3 *db, const codex_journal *j, int64_t from)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "UPDATE codex_attach SET state = 'detached', updated_at = ?4 WHERE id = ?1"
                                " AND state = 'detaching' AND codex_home = ?2 AND key_id = ?3"
                                " AND EXISTS (SELECT 1 FROM platform_keys WHERE id = ?3 AND revoked = 0)",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, from);
        sqlite3_bind_text(st, 2, j->home, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, j->key_id);
        sqlite3_bind_int64(st, 4, (int64_t)time(NULL));
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_extended_errcode(db);
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_OK && sqlite3_changes(db) != 1)
        rc = SQLITE_CONSTRAINT; /* not the journal or the key we were told: a new key then */
    return rc;
}

int store_codex_begin(store *s, codex_journal *j, const char *key_name, const char *key_hash, int64_t handover_from,
                      char *err, size_t errlen)
{
    sqlite3 *db = store_sqlite(s);
    sc_key_arg k = {key_name, key_hash, j->key_prefix};
    j->created_at = j->updated_at = (int64_t)time(NULL);
    store_sync_write_begin(s);
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc == SQLITE_OK && handover_from) {
        rc = sc_handover_close(db, j, handover_from);
    } else if (rc == SQLITE_OK) {
        rc = sc_step_done(db, "INSERT INTO platform_keys(name, hash, prefix, created_at) VALUES (?,?,?,?)",
                          sc_bind_key, &k);
        if (rc == SQLITE_OK)
            j->key_id = sqlite3_last_insert_rowid(db);
    }
    if (rc == SQLITE_OK) {
        rc = sc_step_done(db,
                          "INSERT INTO codex_attach(codex_home, config_path, state, gateway_url, key_id, key_prefix,"
                          " original, original_sha256, original_mode, written_sha256, keys, created_at, updated_at)"
                          " VALUES (?1, ?2, 'attaching', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)",
                          sc_bind_journal, j);
        j->id = sqlite3_last_insert_rowid(db);
    }
    if (rc != SQLITE_OK)
        sc_err(err, errlen,
               rc == SQLITE_CONSTRAINT_UNIQUE ? "another attach of this Codex home is in progress"
               : rc == SQLITE_CONSTRAINT      ? "the key of the earlier attach is no longer live"
                                              : "cannot write the attach journal",
               db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK && !sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    store_sync_write_end(s);
    return rc == SQLITE_OK ? 0 : -1;
}

int store_codex_key_is_live(store *s, int64_t key_id, const char *key_hash)
{
    sqlite3_stmt *st = NULL;
    int live = -1;
    if (sqlite3_prepare_v2(store_sqlite(s), "SELECT revoked = 0 AND hash = ?2 FROM platform_keys WHERE id = ?1", -1,
                           &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, key_id);
        sqlite3_bind_text(st, 2, key_hash, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        live = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : rc == SQLITE_DONE ? 0 : -1;
    }
    sqlite3_finalize(st);
    return live;
}

static void sc_col_text(sqlite3_stmt *st, int i, char *dst, size_t n)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    snprintf(dst, n, "%s", t ? (const char *)t : "");
}

int store_codex_open_get(store *s, const char *home, codex_journal *j)
{
    sqlite3 *db = store_sqlite(s);
    sqlite3_stmt *st = NULL;
    int found = -1;
    if (sqlite3_prepare_v2(db,
                           "SELECT id, codex_home, config_path, state, gateway_url, key_id, key_prefix, original,"
                           " original_sha256, original_mode, written_sha256, keys, restore_sha256,"
                           " restore_from_sha256, created_at, updated_at FROM codex_attach"
                           " WHERE codex_home = ? AND state IN ('attaching','attached','detaching')",
                           -1, &st, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_bind_text(st, 1, home, -1, SQLITE_STATIC);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        memset(j, 0, sizeof *j);
        j->id = sqlite3_column_int64(st, 0);
        sc_col_text(st, 1, j->home, sizeof j->home);
        sc_col_text(st, 2, j->config_path, sizeof j->config_path);
        sc_col_text(st, 3, j->state, sizeof j->state);
        sc_col_text(st, 4, j->gateway_url, sizeof j->gateway_url);
        j->key_id = sqlite3_column_int64(st, 5);
        sc_col_text(st, 6, j->key_prefix, sizeof j->key_prefix);
        j->original_present = sqlite3_column_type(st, 7) != SQLITE_NULL;
        sbuf_append(&j->original, sqlite3_column_blob(st, 7) ? sqlite3_column_blob(st, 7) : "",
                    (size_t)sqlite3_column_bytes(st, 7));
        sc_col_text(st, 8, j->original_sha, sizeof j->original_sha);
        j->original_mode = sqlite3_column_int(st, 9);
        sc_col_text(st, 10, j->written_sha, sizeof j->written_sha);
        sbuf_puts(&j->keys, sqlite3_column_text(st, 11) ? (const char *)sqlite3_column_text(st, 11) : "{}");
        sc_col_text(st, 12, j->restore_sha, sizeof j->restore_sha);
        sc_col_text(st, 13, j->restore_from_sha, sizeof j->restore_from_sha);
        j->created_at = sqlite3_column_int64(st, 14);
        j->updated_at = sqlite3_column_int64(st, 15);
        found = 1;
    } else if (step == SQLITE_DONE) {
        found = 0;
    }
    sqlite3_finalize(st);
    return found;
}

int store_codex_open_homes(store *s, void (*fn)(void *ud, const char *home), void *ud)
{
    sqlite3_stmt *st = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(store_sqlite(s),
                           "SELECT codex_home FROM codex_attach WHERE state IN ('attaching','attached','detaching')"
                           " ORDER BY id",
                           -1, &st, NULL) == SQLITE_OK) {
        int step;
        while ((step = sqlite3_step(st)) == SQLITE_ROW)
            fn(ud, (const char *)sqlite3_column_text(st, 0));
        rc = step == SQLITE_DONE ? 0 : -1;
    }
    sqlite3_finalize(st);
    return rc;
}

typedef struct sc_state_arg {
    int64_t id;
    const char *state, *restore, *from;
} sc_state_arg;

static void sc_bind_state(sqlite3_stmt *st, const void *arg)
{
    const sc_state_arg *a = arg;
    sqlite3_bind_int64(st, 1, a->id);
    sqlite3_bind_text(st, 2, a->state, -1, SQLITE_STATIC);
    sc_bind_opt(st, 3, a->restore);
    sc_bind_opt(st, 4, a->from);
    sqlite3_bind_int64(st, 5, (int64_t)time(NULL));
}

static const char sc_sql_state[] = "UPDATE codex_attach SET state = ?2, restore_sha256 = ?3, restore_from_sha256 = ?4,"
                                   " updated_at = ?5 WHERE id = ?1";

int store_codex_set_state(store *s, int64_t id, const char *state, const char *restore, const char *from, char *err,
                          size_t errlen)
{
    sc_state_arg a = {id, state, restore, from};
    store_sync_write_begin(s);
    int rc = sc_step_done(store_sqlite(s), sc_sql_state, sc_bind_state, &a);
    store_sync_write_end(s);
    if (rc != SQLITE_OK)
        sc_err(err, errlen, "cannot update the attach journal", store_sqlite(s));
    return rc == SQLITE_OK ? 0 : -1;
}

static void sc_bind_id(sqlite3_stmt *st, const void *arg) { sqlite3_bind_int64(st, 1, *(const int64_t *)arg); }

int store_codex_close(store *s, const codex_journal *j, const char *state, char *err, size_t errlen)
{
    sqlite3 *db = store_sqlite(s);
    sc_state_arg a = {j->id, state, NULL, NULL};
    store_sync_write_begin(s);
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sc_step_done(db, "UPDATE platform_keys SET revoked = 1 WHERE id = ?1", sc_bind_id, &j->key_id);
    if (rc == SQLITE_OK)
        rc = sc_step_done(db, sc_sql_state, sc_bind_state, &a);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        sc_err(err, errlen, "cannot close the attach journal", db);
        if (!sqlite3_get_autocommit(db))
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    }
    store_sync_write_end(s);
    return rc == SQLITE_OK ? 0 : -1;
}
