/* store_writer_commit.c: the writer thread's side of sqlite: its own
 * connection and prepared statements, binding account state, request
 * logs, response owners, conversation turns, logins and admin changes, and
 * committing one batch in one transaction (pruning old owners and sweeping
 * the conversations' retention when due), retried with backoff until it
 * succeeds. store_writer.c owns the queue and the thread
 * that hands batches here. */
#include "store/store_internal.h"
#include "base/log.h"
#include "base/sbuf.h"
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define STORE_OWNER_TTL_S (7 * 86400) /* owners older than this are pruned */
#define STORE_PRUNE_EVERY_S 3600.0    /* at most one prune per this interval */
#define STORE_LOG_COLS 21             /* bound parameters per request_logs row */

/* ---------- statements and one batch ---------- */

/* The EXISTS guard skips state for an account deleted (by the CLI) while
 * the server still held it in memory, instead of failing the batch on the
 * foreign key. */
static const char store_sql_up_state[] =
    "INSERT INTO account_state(account_id, cooldown_until, ladder_step, last_429_at, last_error,"
    " primary_used_pct, secondary_used_pct, primary_reset_at, secondary_reset_at, success_ema,"
    " latency_ema_ms, updated_at, primary_window_s, secondary_window_s, plan_type, has_credits,"
    " credits_unlimited, credits_balance, usage_polled_at, usage_poll_status, success_rate_60s, latency_60s_ms,"
    " attempts_60s, family_cooldowns, dialects_refused)"
    " SELECT ?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22,?23,?24,?25"
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
    " attempts_60s = excluded.attempts_60s, family_cooldowns = excluded.family_cooldowns,"
    " dialects_refused = excluded.dialects_refused";

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
    " latency_60s_ms = ?22, attempts_60s = ?23, family_cooldowns = ?24, dialects_refused = ?25"
    " WHERE account_id = ?1";

static const char store_sql_ins_log[] = "INSERT INTO request_logs(" STORE_LOG_COLUMNS ") VALUES ";
#define STORE_SQL_LOG_ROW "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)" /* STORE_LOG_COLS */

static const char store_sql_up_owner[] =
    "INSERT INTO response_owners(response_id, account_id, created_at) VALUES (?1, ?2, ?3)"
    " ON CONFLICT(response_id) DO UPDATE SET account_id = excluded.account_id, created_at = excluded.created_at";

static const char store_sql_prune_owners[] = "DELETE FROM response_owners WHERE created_at < ?1";

/* Conversation turns (store.h). The same response id again replaces the
 * row: a turn recorded twice (a retry) keeps its latest record. */
static const char store_sql_up_conv[] =
    "INSERT INTO conversations(response_id, account_id, previous_response_id, input_json, output_json, bytes,"
    " created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
    " ON CONFLICT(response_id) DO UPDATE SET account_id = excluded.account_id,"
    " previous_response_id = excluded.previous_response_id, input_json = excluded.input_json,"
    " output_json = excluded.output_json, bytes = excluded.bytes, created_at = excluded.created_at";
static const char store_sql_del_conv[] = "DELETE FROM conversations WHERE response_id = ?1";
/* The retention's sweep: the expired first, then the oldest while over a
 * limit, each step bounded; the sums and the walk read the
 * (created_at, bytes) index only, never the rows' text. */
static const char store_sql_conv_expire[] =
    "DELETE FROM conversations WHERE rowid IN"
    " (SELECT rowid FROM conversations WHERE created_at < ?1 ORDER BY created_at LIMIT ?2)";
static const char store_sql_conv_totals[] = "SELECT count(*), coalesce(sum(bytes), 0) FROM conversations";
static const char store_sql_conv_oldest[] = "SELECT rowid, bytes FROM conversations ORDER BY created_at LIMIT ?1";
static const char store_sql_conv_del_rowid[] = "DELETE FROM conversations WHERE rowid = ?1";
/* The request logs' retention: by age through the ts index, by count from
 * the rowid (rows are appended with the largest rowid + 1), each bounded. */
static const char store_sql_log_expire[] =
    "DELETE FROM request_logs WHERE rowid IN"
    " (SELECT rowid FROM request_logs WHERE ts < ?1 ORDER BY ts LIMIT ?2)";
static const char store_sql_log_trim[] =
    "DELETE FROM request_logs WHERE rowid IN (SELECT rowid FROM request_logs"
    " WHERE rowid <= (SELECT max(rowid) FROM request_logs) - ?1 ORDER BY rowid LIMIT ?2)";

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

/* A hold (store_writer_put_hold): only while the login and the reset
 * generation are the ones the failed attempt had. */
static const char store_sql_up_hold[] =
    "UPDATE accounts SET hold = ?2, hold_detail = ?3, hold_since = ?4"
    " WHERE id = ?1 AND token IS ?5 AND reset_gen = ?6";

/* A learned model list (store_writer_put_models); the EXISTS guard as
 * store_sql_up_state's. */
static const char store_sql_up_models[] =
    "INSERT INTO account_state(account_id, models_learned, models_codex) SELECT ?1, ?2, ?3"
    " WHERE EXISTS (SELECT 1 FROM accounts WHERE id = ?1)"
    " ON CONFLICT(account_id) DO UPDATE SET models_learned = excluded.models_learned,"
    " models_codex = excluded.models_codex";

double store_writer_clock(clockid_t id)
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
    sbuf fam = SBUF_INIT; /* built only when a family slot is used: most states have none */
    store_families_json(a, &fam);
    if (fam.len)
        sqlite3_bind_text(st, 24, fam.p, (int)fam.len, SQLITE_TRANSIENT);
    else
        sqlite3_bind_text(st, 24, "", 0, SQLITE_STATIC);
    sbuf_free(&fam);
    sqlite3_bind_int(st, 25, a->dialects_refused);
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
    if (r->error_message)
        sqlite3_bind_text(st, base + 21, r->error_message, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, base + 21);
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
        [STORE_OP_ACCOUNT_UNHOLD] = "UPDATE accounts SET reset_gen = reset_gen + 1, " STORE_SQL_UNHOLD
                                    ", " STORE_SQL_PREFILL_RELEARN " WHERE id = ?1",
        [STORE_OP_PREFILL_REFUSED] = "UPDATE accounts SET prefill = 'refused' WHERE id = ?1 AND prefill IN ('auto', 'yes')",
    };
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(w->db, sql[op->kind], -1, &st, NULL) != SQLITE_OK)
        return sqlite3_errcode(w->db);
    if (op->kind != STORE_OP_SETTING) {
        sqlite3_bind_int64(st, 1, op->id);
        if (sqlite3_bind_parameter_count(st) >= 2)
            store_bind_opt_int(st, 2, op->value, op->kind == STORE_OP_KEY_PREFERRED ? 0 : -1);
    } else {
        sqlite3_bind_text(st, 3, op->key, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, op->text, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, (int64_t)store_writer_clock(CLOCK_REALTIME));
    }
    int rc = writer_step(w->db, st, "admin change");
    sqlite3_finalize(st);
    return rc;
}

static void writer_bind_login(store_writer *w, const login_item *l, sqlite3_stmt **st)
{
    if (l->models) {
        *st = w->up_models;
        sqlite3_bind_int64(*st, 1, l->account_id);
        store_bind_text(*st, 2, l->models_ids);
        store_bind_text(*st, 3, l->models_codex);
        return;
    }
    if (l->hold) {
        *st = w->up_hold;
        sqlite3_bind_int64(*st, 1, l->account_id);
        sqlite3_bind_text(*st, 2, l->hold, -1, SQLITE_STATIC);
        store_bind_text(*st, 3, l->hold_detail);
        sqlite3_bind_int64(*st, 4, l->hold_since);
        sqlite3_bind_text(*st, 5, l->expect_token, -1, SQLITE_STATIC);
        sqlite3_bind_int64(*st, 6, l->expect_gen);
        return;
    }
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

static int writer_conv_row(store_writer *w, const conv_item *c)
{
    if (c->del) {
        sqlite3_bind_text(w->del_conv, 1, c->response_id, -1, SQLITE_STATIC);
        return writer_step(w->db, w->del_conv, "conversations delete");
    }
    sqlite3_stmt *st = w->up_conv;
    sqlite3_bind_text(st, 1, c->response_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, c->account_id);
    store_bind_text(st, 3, c->prev);
    /* lengths below STORE_CONV_TURN_MAX (64 MiB): they fit an int */
    sqlite3_bind_text(st, 4, c->input, (int)c->input_len, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, c->output, (int)c->output_len, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, (int64_t)(c->input_len + c->output_len));
    sqlite3_bind_double(st, 7, c->created_at);
    return writer_step(w->db, st, "conversations");
}

/* An import (store_writer_put_import) in a savepoint of its own: a refused
 * entry (a name taken by another login, a bad value) is rolled back alone
 * and said in the job; only a failure of sqlite itself fails the batch. */
static int writer_import(store_writer *w, import_job *j)
{
    int added = 0, updated = 0;
    j->outcome = STORE_IMPORT_FAILED;
    j->name[0] = j->err[0] = '\0';
    int rc = sqlite3_exec(w->db, "SAVEPOINT signin", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return rc;
    if (store_import_one(w->db, &j->a, j->label, &added, &updated, j->err, sizeof j->err) != 0) {
        rc = sqlite3_exec(w->db, "ROLLBACK TO signin", NULL, NULL, NULL);
        return rc == SQLITE_OK ? sqlite3_exec(w->db, "RELEASE signin", NULL, NULL, NULL) : rc;
    }
    j->outcome = added ? STORE_IMPORT_ADDED : STORE_IMPORT_UPDATED;
    snprintf(j->name, sizeof j->name, "%s", j->a.name);
    if (updated && j->a.chatgpt_account_id) { /* the name of the account that holds the login */
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(w->db, "SELECT name FROM accounts WHERE kind = 'chatgpt' AND chatgpt_account_id = ?1"
                                      " AND (?2 IS NULL OR email IS NULL OR email = ?2 COLLATE NOCASE) ORDER BY id",
                               -1, &st, NULL) == SQLITE_OK) {
            sqlite3_bind_text(st, 1, j->a.chatgpt_account_id, -1, SQLITE_STATIC);
            store_bind_text(st, 2, j->a.login.email && *j->a.login.email ? j->a.login.email : NULL);
            if (sqlite3_step(st) == SQLITE_ROW)
                store_col_copy(st, 0, j->name, sizeof j->name);
        }
        sqlite3_finalize(st);
    }
    return sqlite3_exec(w->db, "RELEASE signin", NULL, NULL, NULL);
}

static int writer_batch_rows(store_writer *w, const writer_batch *b)
{
    int rc = SQLITE_OK;
    for (size_t i = 0; rc == SQLITE_OK && i < b->n_ops; i++)
        rc = writer_admin_op(w, &b->ops[i]);
    for (const login_item *l = b->logins; rc == SQLITE_OK && l; l = l->next) {
        if (l->call) {
            rc = l->call(w->db, l->call_arg);
            continue;
        }
        if (l->import) {
            rc = writer_import(w, l->import);
            continue;
        }
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
    for (const conv_item *c = b->convs; rc == SQLITE_OK && c; c = c->next)
        rc = writer_conv_row(w, c);
    return rc;
}

static int writer_prune(store_writer *w)
{
    sqlite3_bind_double(w->prune_owners, 1, store_writer_clock(CLOCK_REALTIME) - STORE_OWNER_TTL_S);
    return writer_step(w->db, w->prune_owners, "response_owners prune");
}

/* What one sweep did: rows deleted, and whether limits are still exceeded
 * (or the expired not all gone) so that the next commit goes on. */
typedef struct conv_sweep {
    int64_t deleted;
    int more;
} conv_sweep;

/* The oldest rows while over max_rows or max_bytes, at most budget of
 * them; their rowids are collected first, then deleted. */
static int writer_conv_trim(store_writer *w, const store_conversation_limits *l, int budget, conv_sweep *out)
{
    int64_t rows, bytes, ids[STORE_CONV_SWEEP_ROWS];
    int k = 0, rc = sqlite3_step(w->conv_totals);
    if (rc != SQLITE_ROW) {
        sqlite3_reset(w->conv_totals);
        return rc;
    }
    rows = sqlite3_column_int64(w->conv_totals, 0);
    bytes = sqlite3_column_int64(w->conv_totals, 1);
    sqlite3_reset(w->conv_totals);
    if (rows <= l->max_rows && bytes <= l->max_bytes)
        return SQLITE_OK;
    sqlite3_bind_int(w->conv_oldest, 1, budget);
    while ((rows > l->max_rows || bytes > l->max_bytes) && k < budget &&
           (rc = sqlite3_step(w->conv_oldest)) == SQLITE_ROW) {
        ids[k++] = sqlite3_column_int64(w->conv_oldest, 0);
        rows--;
        bytes -= sqlite3_column_int64(w->conv_oldest, 1);
    }
    sqlite3_reset(w->conv_oldest);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return rc;
    rc = SQLITE_OK;
    for (int i = 0; rc == SQLITE_OK && i < k; i++) {
        sqlite3_bind_int64(w->conv_del_rowid, 1, ids[i]);
        rc = writer_step(w->db, w->conv_del_rowid, "conversations sweep");
    }
    out->deleted += k;
    out->more = rows > l->max_rows || bytes > l->max_bytes;
    return rc;
}

/* The conversations' retention (store.h), inside the batch's transaction. */
static int writer_conv_sweep(store_writer *w, const store_conversation_limits *l, conv_sweep *out)
{
    int budget = STORE_CONV_SWEEP_ROWS;
    memset(out, 0, sizeof *out);
    sqlite3_bind_double(w->conv_expire, 1, store_writer_clock(CLOCK_REALTIME) - (double)l->max_days * 86400.0);
    sqlite3_bind_int(w->conv_expire, 2, budget);
    int rc = writer_step(w->db, w->conv_expire, "conversations expiry");
    if (rc != SQLITE_OK)
        return rc;
    out->deleted = sqlite3_changes(w->db);
    budget -= (int)out->deleted;
    if (budget <= 0) {
        out->more = 1;
        return SQLITE_OK;
    }
    return writer_conv_trim(w, l, budget, out);
}

/* The request logs' retention (store.h), inside the batch's transaction:
 * the expired, then the oldest past max_rows, STORE_LOG_SWEEP_ROWS at most;
 * *more when that budget was used up (the next commit goes on). */
static int writer_log_sweep(store_writer *w, const store_log_limits *l, int64_t *deleted, int *more)
{
    int budget = STORE_LOG_SWEEP_ROWS;
    sqlite3_bind_double(w->log_expire, 1, store_writer_clock(CLOCK_REALTIME) - (double)l->max_days * 86400.0);
    sqlite3_bind_int(w->log_expire, 2, budget);
    int rc = writer_step(w->db, w->log_expire, "request_logs expiry");
    if (rc != SQLITE_OK)
        return rc;
    *deleted = sqlite3_changes(w->db);
    budget -= (int)*deleted;
    if (budget > 0) {
        sqlite3_bind_int64(w->log_trim, 1, l->max_rows);
        sqlite3_bind_int(w->log_trim, 2, budget);
        if ((rc = writer_step(w->db, w->log_trim, "request_logs trim")) != SQLITE_OK)
            return rc;
        *deleted += sqlite3_changes(w->db);
    }
    *more = *deleted >= STORE_LOG_SWEEP_ROWS;
    return SQLITE_OK;
}

/* Whether this batch sweeps the conversations: when asked to (limits
 * changed, the last sweep unfinished), after STORE_CONV_SWEEP_EVERY_N
 * recorded turns, or when turns were recorded and the timed sweep is due. */
static int writer_conv_sweep_due(const store_writer *w, const writer_batch *b, size_t puts, double now)
{
    size_t recorded = w->conv_inserts + puts;
    return b->conv_sweep || recorded >= STORE_CONV_SWEEP_EVERY_N || (recorded && now >= w->conv_sweep_due);
}

/* One transaction for the whole batch, with the owner prune and the
 * conversations' sweep when they are due; rolled back on any failure. */
static int writer_commit(store_writer *w, const writer_batch *b)
{
    double now = store_writer_clock(CLOCK_MONOTONIC);
    int prune = now >= w->prune_due;
    size_t puts = 0;
    for (const conv_item *c = b->convs; c; c = c->next)
        puts += !c->del;
    int sweep = writer_conv_sweep_due(w, b, puts, now);
    conv_sweep swept = {0, 0};
    int log_sweep = b->log_limits.max_rows > 0 && (b->log_sweep || (b->n_logs && now >= w->log_sweep_due)),
        log_more = 0;
    int64_t logs_deleted = 0;
    int rc = writer_run(w->begin);
    if (rc == SQLITE_OK)
        rc = writer_batch_rows(w, b);
    if (rc == SQLITE_OK && prune)
        rc = writer_prune(w);
    if (rc == SQLITE_OK && sweep)
        rc = writer_conv_sweep(w, &b->conv_limits, &swept);
    if (rc == SQLITE_OK && log_sweep)
        rc = writer_log_sweep(w, &b->log_limits, &logs_deleted, &log_more);
    if (rc == SQLITE_OK)
        rc = writer_run(w->commit); /* a deferred constraint fails here, and the batch with it */
    if (rc != SQLITE_OK) {
        /* the message now: the ROLLBACK below resets it to "not an error" */
        const char *msg = sqlite3_errmsg(w->db);
        int sys = sqlite3_system_errno(w->db);
        if (!msg || !strcmp(msg, "not an error"))
            msg = sqlite3_errstr(rc);
        if (sys)
            snprintf(w->fail_msg, sizeof w->fail_msg, "%s: %s", msg, strerror(sys));
        else
            snprintf(w->fail_msg, sizeof w->fail_msg, "%s", msg);
    }
    if (rc != SQLITE_OK && !sqlite3_get_autocommit(w->db))
        sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return rc;
    if (prune)
        w->prune_due = now + STORE_PRUNE_EVERY_S;
    w->conv_inserts += puts;
    if (sweep) {
        w->conv_inserts = 0;
        w->conv_sweep_due = now + STORE_CONV_SWEEP_EVERY_S;
    }
    if (sweep) {
        pthread_mutex_lock(&w->mu);
        w->conv_sweeps++;
        w->swept_convs += (uint64_t)swept.deleted;
        w->conv_sweep_wake |= swept.more;
        pthread_mutex_unlock(&w->mu);
    }
    if (log_sweep) {
        w->log_sweep_due = now + STORE_LOG_SWEEP_EVERY_S;
        pthread_mutex_lock(&w->mu);
        w->swept_logs += (uint64_t)logs_deleted;
        w->log_sweep_wake |= log_more;
        pthread_mutex_unlock(&w->mu);
    }
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
void store_writer_commit_retry(store_writer *w, const writer_batch *b)
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
        snprintf(w->last_error, sizeof w->last_error, "%s (sqlite code %d)", w->fail_msg, rc);
        pthread_mutex_unlock(&w->mu);
        if (failures == 0 || failures % 20 == 0)
            log_error("store: writer commit failed (%s); keeping %zu request logs, %zu state updates, %zu"
                      " response owners and %zu conversation turns, retrying", w->fail_msg, b->n_logs,
                      b->n_states, b->n_owners, b->n_convs);
        if (writer_stopping(w) && failures >= 3) {
            log_error("store: shutting down; dropped %zu request logs, %zu state updates, %zu response owners and"
                      " %zu conversation turns that could not be written", b->n_logs, b->n_states, b->n_owners,
                      b->n_convs);
            return;
        }
        store_writer_watch(w); /* a commit failing on a tampered file: say what happened to it */
        writer_sleep_ms(delay_ms);
        delay_ms = delay_ms * 2 > 2000 ? 2000 : delay_ms * 2;
    }
}

/* ---------- the writer's connection ---------- */

/* What is wrong with the database file, into out ("" when nothing). */
static void writer_file_check(const store_writer *w, char *out, size_t n)
{
    struct stat sb;
    out[0] = '\0';
    if (stat(w->path, &sb) != 0) {
        if (errno == ENOENT)
            snprintf(out, n, "the database file %s was deleted; what is written now is lost when the gateway stops",
                     w->path);
        else
            snprintf(out, n, "the database file %s cannot be checked: %s", w->path, strerror(errno));
        return;
    }
    if (sb.st_dev != w->dev || sb.st_ino != w->ino) {
        snprintf(out, n, "the database file %s was replaced by another file; the gateway still writes the one it "
                 "opened", w->path);
        return;
    }
    /* root passes access(), so the mode bits are checked as well */
    if ((sb.st_mode & (S_IRUSR | S_IWUSR)) != (S_IRUSR | S_IWUSR) || access(w->path, R_OK | W_OK) != 0) {
        snprintf(out, n, "the database file %s is no longer readable and writable (mode %04o); a restart "
                 "could not open it", w->path, (unsigned)(sb.st_mode & 07777));
        return;
    }
    /* the header through sqlite's own handle: opening and closing another
     * descriptor of the file would drop this process's POSIX locks on it,
     * and another connection could then take the WAL for its own and
     * delete it */
    char head[16];
    sqlite3_file *fp = NULL;
    sqlite3_int64 size = -1;
    if (sqlite3_file_control(w->db, "main", SQLITE_FCNTL_FILE_POINTER, &fp) != SQLITE_OK || !fp || !fp->pMethods)
        return;
    if (fp->pMethods->xFileSize(fp, &size) != SQLITE_OK)
        return;
    int got = size >= (sqlite3_int64)sizeof head ? fp->pMethods->xRead(fp, head, (int)sizeof head, 0) : SQLITE_IOERR;
    if (got != SQLITE_OK || memcmp(head, "SQLite format 3", 16) != 0)
        snprintf(out, n, "the database file %s was truncated or overwritten (%lld bytes, %s)", w->path,
                 (long long)size, got != SQLITE_OK ? "no SQLite header" : "not an SQLite header");
}

void store_writer_watch(store_writer *w)
{
    double now = store_writer_clock(CLOCK_MONOTONIC);
    if (!w->path || now < w->watch_due)
        return;
    w->watch_due = now + STORE_WATCH_S;
    char problem[sizeof w->file_problem];
    writer_file_check(w, problem, sizeof problem);
    /* the disk it takes, for /health and status: stat and statvfs, here off the loop */
    struct stat sb;
    struct statvfs vb;
    char wal[4200];
    long long db = stat(w->path, &sb) == 0 ? (long long)sb.st_size : -1, walsz = -1, avail = -1;
    if (snprintf(wal, sizeof wal, "%s-wal", w->path) < (int)sizeof wal && stat(wal, &sb) == 0)
        walsz = (long long)sb.st_size;
    if (statvfs(w->path, &vb) == 0)
        avail = (long long)vb.f_bavail * (long long)vb.f_frsize;
    pthread_mutex_lock(&w->mu);
    w->db_bytes = db;
    w->wal_bytes = walsz;
    w->disk_free_bytes = avail;
    int changed = strcmp(problem, w->file_problem) != 0;
    char before[sizeof w->file_problem];
    if (changed) {
        snprintf(before, sizeof before, "%s", w->file_problem);
        snprintf(w->file_problem, sizeof w->file_problem, "%s", problem);
    }
    pthread_mutex_unlock(&w->mu);
    if (changed && problem[0]) /* once per change, not per commit or request */
        log_error("store: %s", problem);
    else if (changed)
        log_info("store: the database file %s is as the gateway opened it again (%s no longer)", w->path, before);
}

int store_writer_prepare(store_writer *w, const char *path, char *err, size_t errlen)
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
        sqlite3_prepare_v3(w->db, store_sql_up_hold, -1, keep, &w->up_hold, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, store_sql_up_models, -1, keep, &w->up_models, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, store_sql_up_conv, -1, keep, &w->up_conv, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, store_sql_del_conv, -1, keep, &w->del_conv, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, store_sql_conv_expire, -1, keep, &w->conv_expire, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, store_sql_conv_totals, -1, keep, &w->conv_totals, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, store_sql_conv_oldest, -1, keep, &w->conv_oldest, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, store_sql_conv_del_rowid, -1, keep, &w->conv_del_rowid, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, store_sql_log_expire, -1, keep, &w->log_expire, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, store_sql_log_trim, -1, keep, &w->log_trim, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, "BEGIN IMMEDIATE", -1, keep, &w->begin, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(w->db, "COMMIT", -1, keep, &w->commit, NULL) != SQLITE_OK ||
        !writer_ins_logs(w, 0)) {
        store_errf(err, errlen, "writer: %s", sqlite3_errmsg(w->db));
        return -1;
    }
    /* the file's identity now, for the watch (an in-memory or URI
     * database has no path to watch) */
    struct stat sb;
    if (path && *path && strcmp(path, ":memory:") != 0 && strncmp(path, "file:", 5) != 0 && stat(path, &sb) == 0) {
        free(w->path);
        w->path = strdup(path);
        w->dev = sb.st_dev;
        w->ino = sb.st_ino;
        w->watch_due = store_writer_clock(CLOCK_MONOTONIC) + STORE_WATCH_S;
    }
    return 0;
}

void store_writer_conn_close(store_writer *w)
{
    free(w->path);
    w->path = NULL;
    sqlite3_finalize(w->up_state);
    sqlite3_finalize(w->set_state);
    sqlite3_finalize(w->up_owner);
    sqlite3_finalize(w->prune_owners);
    sqlite3_finalize(w->up_login);
    sqlite3_finalize(w->up_login_err);
    sqlite3_finalize(w->up_hold);
    sqlite3_finalize(w->up_models);
    sqlite3_finalize(w->begin);
    sqlite3_finalize(w->commit);
    sqlite3_stmt **conv[] = {&w->up_conv,     &w->del_conv,       &w->conv_expire, &w->conv_totals,
                             &w->conv_oldest, &w->conv_del_rowid, &w->log_expire,  &w->log_trim};
    for (size_t i = 0; i < sizeof conv / sizeof *conv; i++) {
        sqlite3_finalize(*conv[i]);
        *conv[i] = NULL;
    }
    for (int k = 0; k < STORE_LOG_CHUNKS; k++) {
        sqlite3_finalize(w->ins_logs[k]);
        w->ins_logs[k] = NULL;
    }
    sqlite3_close_v2(w->db);
    w->up_state = w->set_state = w->up_owner = w->prune_owners = w->up_login = w->up_login_err = w->up_hold = w->up_models = w->begin =
        w->commit = NULL;
    w->db = NULL;
}
