/* store_controls.c: the store's queries for channel controls (see
 * store.h): per-key rules. Kept out of store.c (the connection),
 * store_schema.c (the schema) and store_writer.c (the writer). */
#include "store/store.h"
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

int store_key_update(store *s, int64_t key_id, const char *name, const key_update *u, char *err, size_t errlen)
{
    sqlite3 *db = store_sqlite(s);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
        "UPDATE platform_keys SET"
        " allowed_models = CASE WHEN ?1 THEN ?2 ELSE allowed_models END,"
        " max_rpm = CASE WHEN ?3 THEN ?4 ELSE max_rpm END,"
        " expires_at = CASE WHEN ?5 THEN ?6 ELSE expires_at END,"
        " budget_usd = CASE WHEN ?9 THEN ?10 ELSE budget_usd END,"
        " budget_period = CASE WHEN ?11 THEN ?12 ELSE budget_period END"
        " WHERE CASE WHEN ?7 > 0 THEN id = ?7 ELSE name = ?8 END",
        -1, &st, NULL);
    int changes = 0;
    if (rc == SQLITE_OK) {
        sqlite3_bind_int(st, 1, u->set_models);
        if (u->allowed_models && *u->allowed_models)
            sqlite3_bind_text(st, 2, u->allowed_models, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 2);
        sqlite3_bind_int(st, 3, u->set_rpm);
        sqlite3_bind_int(st, 4, u->max_rpm);
        sqlite3_bind_int(st, 5, u->set_expires);
        sqlite3_bind_int64(st, 6, u->expires_at);
        sqlite3_bind_int64(st, 7, key_id);
        sqlite3_bind_text(st, 8, name ? name : "", -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 9, u->set_budget);
        sqlite3_bind_double(st, 10, u->budget_usd);
        sqlite3_bind_int(st, 11, u->set_period);
        sqlite3_bind_text(st, 12, u->budget_period ? u->budget_period : "month", -1, SQLITE_STATIC);
        store_sync_write_begin(s);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
        store_sync_write_end(s);
        changes = sqlite3_changes(db);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "cannot update key: %s", sqlite3_errmsg(db));
        return -1;
    }
    if (!changes) {
        snprintf(err, errlen, "no key named '%s'", name ? name : "?");
        return -1;
    }
    return changes;
}

int store_usage_report(store *s, const char *by, double since, void (*fn)(void *ud, const usage_row *r), void *ud,
                       char *err, size_t errlen)
{
    static const struct {
        const char *by, *group, *order;
    } groups[] = {
        {"key", "coalesce(k.name, '-') || ' (' || coalesce(r.platform_key_id, '-') || ')'", "8 DESC, 2 DESC, 1"},
        {"account", "CASE WHEN r.account_name = '' THEN '-' ELSE r.account_name END", "8 DESC, 2 DESC, 1"},
        {"model", "CASE WHEN r.model = '' THEN '-' ELSE r.model END", "8 DESC, 2 DESC, 1"},
        {"day", "date(r.ts, 'unixepoch')", "1"},
        {NULL, "'total'", "1"},
    };
    size_t g = 0;
    while (groups[g].by && (!by || strcmp(groups[g].by, by) != 0))
        g++;
    if (by && !groups[g].by) {
        snprintf(err, errlen, "--by must be key, account, model or day, got '%s'", by);
        return -1;
    }
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT %s, count(*), coalesce(sum(r.input_tokens), 0), coalesce(sum(r.cached_tokens), 0),"
             " coalesce(sum(r.output_tokens), 0), coalesce(sum(r.total_tokens), 0),"
             " sum(r.cost_usd IS NULL AND r.total_tokens IS NOT NULL), coalesce(sum(r.cost_usd), 0)"
             " FROM request_logs r LEFT JOIN platform_keys k ON k.id = r.platform_key_id"
             " WHERE r.ts >= ?1 GROUP BY 1 ORDER BY %s",
             groups[g].group, groups[g].order);
    sqlite3 *db = store_sqlite(s);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_double(st, 1, since);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            usage_row r;
            memset(&r, 0, sizeof r);
            const unsigned char *name = sqlite3_column_text(st, 0);
            snprintf(r.group, sizeof r.group, "%s", name ? (const char *)name : "-");
            r.requests = sqlite3_column_int64(st, 1);
            r.input_tokens = sqlite3_column_int64(st, 2);
            r.cached_tokens = sqlite3_column_int64(st, 3);
            r.output_tokens = sqlite3_column_int64(st, 4);
            r.total_tokens = sqlite3_column_int64(st, 5);
            r.unpriced = sqlite3_column_int64(st, 6);
            r.cost_usd = sqlite3_column_double(st, 7);
            fn(ud, &r);
        }
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    if (rc != SQLITE_OK)
        snprintf(err, errlen, "cannot read request logs: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : -1;
}

int store_spend_since(store *s, int by_key, int64_t id, double since, double *spent, int64_t *priced)
{
    sqlite3 *db = store_sqlite(s);
    sqlite3_stmt *st = NULL;
    *spent = 0;
    if (priced)
        *priced = 0;
    int rc = sqlite3_prepare_v2(db,
                                by_key ? "SELECT coalesce(sum(cost_usd), 0), count(cost_usd > 0 OR NULL) FROM request_logs"
                                         " WHERE platform_key_id = ? AND ts >= ?"
                                       : "SELECT coalesce(sum(cost_usd), 0), count(cost_usd > 0 OR NULL) FROM request_logs"
                                         " WHERE account_id = ? AND ts >= ?",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_double(st, 2, since);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *spent = sqlite3_column_double(st, 0);
            if (priced)
                *priced = sqlite3_column_int64(st, 1);
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : -1;
}

int store_spent_since(store *s, int by_key, int64_t id, double since, double *out)
{
    return store_spend_since(s, by_key, id, since, out, NULL);
}

int store_keys_activity(store *s, double day_start, double since, void (*fn)(void *ud, const store_key_activity *a),
                        void *ud)
{
    sqlite3 *db = store_sqlite(s);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
        "SELECT platform_key_id, sum(ts >= ?1), coalesce(sum(CASE WHEN ts >= ?1 THEN cost_usd END), 0), max(ts)"
        " FROM (SELECT platform_key_id, ts, cost_usd FROM request_logs WHERE ts >= ?2 ORDER BY ts DESC LIMIT ?3)"
        " WHERE platform_key_id IS NOT NULL GROUP BY platform_key_id", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_double(st, 1, day_start);
        sqlite3_bind_double(st, 2, since);
        sqlite3_bind_int64(st, 3, STORE_KEY_ACTIVITY_ROWS);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            store_key_activity a = {sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                                    sqlite3_column_double(st, 2), sqlite3_column_double(st, 3)};
            fn(ud, &a);
        }
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : -1;
}
