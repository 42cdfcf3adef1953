/* store_admin.c: read queries for the admin surface and the admin token
 * (see store_admin.h). Request logs are read on the main connection with
 * busy_timeout 0: in WAL mode a reader never waits for the writer thread. */
#include "store/store_admin.h"
#include "base/sbuf.h"
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define STORE_ADMIN_BUSY_MS 5000 /* CLI writes only */

static const char *store_admin_text(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? (const char *)t : "";
}

static long store_admin_opt(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : (long)sqlite3_column_int64(st, i);
}

int store_admin_token_get(store *s, char hash[65])
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(store_db(s), "SELECT hash FROM admin_token WHERE id = 1", -1, &st, NULL) != SQLITE_OK)
        return -1;
    int rc = sqlite3_step(st), out = 1;
    if (rc == SQLITE_ROW) {
        snprintf(hash, 65, "%s", store_admin_text(st, 0));
        out = 0;
    } else if (rc != SQLITE_DONE) {
        out = -1;
    }
    sqlite3_finalize(st);
    return out;
}

int store_admin_token_set(store *s, const char *hash, const char *prefix, char *err, size_t errlen)
{
    sqlite3 *db = store_db(s);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
        "INSERT INTO admin_token(id, hash, prefix, created_at) VALUES (1, ?1, ?2, ?3) ON CONFLICT(id) DO UPDATE"
        " SET hash = excluded.hash, prefix = excluded.prefix, created_at = excluded.created_at", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, prefix, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, (int64_t)time(NULL));
        sqlite3_busy_timeout(db, STORE_ADMIN_BUSY_MS);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
        sqlite3_busy_timeout(db, 0);
    }
    if (rc != SQLITE_OK)
        snprintf(err, errlen, "cannot store the admin token: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : -1;
}

/* ---------- request logs ---------- */

/* The largest request log id, 0 when empty, -1 on error. */
static int64_t store_logs_max_id(store *s)
{
    sqlite3_stmt *st = NULL;
    int64_t id = -1;
    if (sqlite3_prepare_v2(store_db(s), "SELECT coalesce(max(id), 0) FROM request_logs", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return id;
}

/* q split into lower-case words (ASCII), at most STORE_LOG_QUERY_WORDS of
 * them, in buf; returns how many. */
static int store_logs_words(const char *q, char buf[STORE_LOG_QUERY_MAX + 1], const char *words[STORE_LOG_QUERY_WORDS])
{
    int n = 0;
    size_t len = q ? strlen(q) : 0;
    if (len > STORE_LOG_QUERY_MAX)
        len = STORE_LOG_QUERY_MAX;
    for (size_t i = 0; i < len; i++)
        buf[i] = q[i] >= 'A' && q[i] <= 'Z' ? (char)(q[i] - 'A' + 'a') : q[i];
    buf[len] = '\0';
    for (char *p = buf; *p && n < STORE_LOG_QUERY_WORDS;) {
        while (*p == ' ' || *p == '\t')
            *p++ = '\0';
        if (!*p)
            break;
        words[n++] = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
    }
    return n;
}

/* What the text search looks in, as one lower-case text: the fields
 * joined with newlines (a word with a newline cannot span two of them). */
#define STORE_LOG_HAYSTACK                                                                                   \
    "lower(r.model || char(10) || coalesce(r.upstream_model, '') || char(10) || r.endpoint || char(10) ||" \
    " r.account_name || char(10) || coalesce(k.name, '') || char(10) || r.error_class || char(10) ||"     \
    " r.status || char(10) || coalesce(r.attempts_json, '') || char(10) || coalesce(r.error_message, ''))"

int store_logs_query(store *s, store_log_filter *f, void (*fn)(void *ud, const store_log_row *r), void *ud)
{
    sbuf sql = SBUF_INIT, needle = SBUF_INIT;
    char qbuf[STORE_LOG_QUERY_MAX + 1];
    const char *words[STORE_LOG_QUERY_WORDS];
    int nwords = store_logs_words(f->q, qbuf, words);
    int filtered = (f->key && *f->key) || (f->account && *f->account) || f->status || f->failed || f->since > 0 ||
                   f->until > 0 || nwords || (f->model && *f->model) || (f->endpoint && *f->endpoint);
    f->scan_floor = 0;
    if (filtered && f->scan_max > 0 && f->after_id <= 0 && f->id <= 0) {
        int64_t top = f->before_id > 0 ? f->before_id : store_logs_max_id(s) + 1;
        if (top < 0)
            return -1;
        f->scan_floor = top - 1 - f->scan_max > 0 ? top - 1 - f->scan_max : 0;
    }
    sbuf_puts(&sql, "SELECT r.id, r.ts, coalesce(r.platform_key_id, 0), coalesce(k.name, ''), r.endpoint, r.model,"
                    " r.stream, coalesce(r.account_id, 0), r.account_name, r.status, r.attempts, r.latency_ms,"
                    " r.route_strategy, r.error_class, r.input_tokens, r.output_tokens, r.total_tokens,"
                    " coalesce(r.attempts_json, '[]'), coalesce(r.upstream_model, ''), r.cached_tokens, r.cost_usd,"
                    " r.resumed, coalesce(r.error_message, '')"
                    " FROM request_logs r LEFT JOIN platform_keys k ON k.id = r.platform_key_id WHERE 1");
    if (f->id > 0)
        sbuf_puts(&sql, " AND r.id = ?19");
    if (f->before_id > 0)
        sbuf_puts(&sql, " AND r.id < ?1");
    if (f->after_id > 0)
        sbuf_puts(&sql, " AND r.id > ?2");
    if (f->key && *f->key)
        sbuf_puts(&sql, " AND (r.platform_key_id IN (SELECT id FROM platform_keys WHERE name = ?3)"
                        " OR CAST(r.platform_key_id AS TEXT) = ?3)");
    if (f->account && *f->account) {
        /* served by it, or named in its attempts */
        sbuf_puts(&sql, " AND (r.account_name = ?4 OR instr(r.attempts_json, ?5) > 0)");
        sbuf_puts(&needle, "\"account\":");
        sbuf_json_str(&needle, f->account, strlen(f->account));
    }
    if (f->status)
        sbuf_puts(&sql, " AND r.status = ?6");
    if (f->failed)
        sbuf_puts(&sql, " AND (r.status < 200 OR r.status >= 300)");
    if (f->since > 0)
        sbuf_puts(&sql, " AND r.ts >= ?7");
    if (f->until > 0)
        sbuf_puts(&sql, " AND r.ts < ?8");
    if (f->model && *f->model)
        sbuf_puts(&sql, " AND r.model = ?20");
    if (f->endpoint && *f->endpoint)
        sbuf_puts(&sql, " AND r.endpoint = ?21");
    for (int i = 0; i < nwords; i++)
        sbuf_printf(&sql, " AND instr(" STORE_LOG_HAYSTACK ", ?%d) > 0", 11 + i);
    if (f->scan_floor > 0)
        sbuf_puts(&sql, " AND r.id > ?10");
    sbuf_puts(&sql, f->after_id > 0 ? " ORDER BY r.id ASC LIMIT ?9" : " ORDER BY r.id DESC LIMIT ?9");
    sqlite3_stmt *st = NULL;
    int n = -1;
    if (sqlite3_prepare_v2(store_db(s), sql.p, -1, &st, NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_int64(st, 1, f->before_id);
    sqlite3_bind_int64(st, 2, f->after_id);
    sqlite3_bind_text(st, 3, f->key ? f->key : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, f->account ? f->account : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, needle.p ? needle.p : "", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 6, f->status);
    sqlite3_bind_double(st, 7, f->since);
    sqlite3_bind_double(st, 8, f->until);
    sqlite3_bind_int(st, 9, f->limit < 1 ? 1 : f->limit > 1000 ? 1000 : f->limit);
    sqlite3_bind_int64(st, 10, f->scan_floor);
    for (int i = 0; i < nwords; i++)
        sqlite3_bind_text(st, 11 + i, words[i], -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 19, f->id);
    sqlite3_bind_text(st, 20, f->model ? f->model : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 21, f->endpoint ? f->endpoint : "", -1, SQLITE_STATIC);
    int rc;
    n = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        store_log_row r = {
            .id = sqlite3_column_int64(st, 0), .ts = sqlite3_column_double(st, 1),
            .key_id = sqlite3_column_int64(st, 2), .key_name = store_admin_text(st, 3),
            .endpoint = store_admin_text(st, 4), .model = store_admin_text(st, 5),
            .stream = sqlite3_column_int(st, 6), .account_id = sqlite3_column_int64(st, 7),
            .account_name = store_admin_text(st, 8), .status = sqlite3_column_int(st, 9),
            .attempts = sqlite3_column_int(st, 10), .latency_ms = sqlite3_column_double(st, 11),
            .route_strategy = store_admin_text(st, 12), .error_class = store_admin_text(st, 13),
            .input_tokens = store_admin_opt(st, 14), .output_tokens = store_admin_opt(st, 15),
            .total_tokens = store_admin_opt(st, 16), .attempts_json = store_admin_text(st, 17),
            .upstream_model = store_admin_text(st, 18), .cached_tokens = store_admin_opt(st, 19),
            .cost_usd = sqlite3_column_type(st, 20) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 20),
            .resumed = sqlite3_column_int(st, 21), .error_message = store_admin_text(st, 22),
        };
        fn(ud, &r);
        n++;
    }
    if (rc != SQLITE_DONE)
        n = -1;
out:
    sqlite3_finalize(st);
    sbuf_free(&sql);
    sbuf_free(&needle);
    return n;
}

int store_logs_usage_since(store *s, double since, void (*fn)(void *ud, const store_usage_group *g), void *ud)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(store_db(s),
            "SELECT coalesce(account_id, 0), coalesce(platform_key_id, 0), model, count(*),"
            " coalesce(sum(input_tokens), 0), coalesce(sum(cached_tokens), 0), coalesce(sum(output_tokens), 0),"
            " coalesce(sum(cost_usd), 0) FROM request_logs WHERE ts >= ?1 GROUP BY 1, 2, 3", -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_double(st, 1, since);
    int rc, n = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        store_usage_group g = {sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), store_admin_text(st, 2),
                               sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5),
                               sqlite3_column_int64(st, 6), sqlite3_column_double(st, 7)};
        fn(ud, &g);
        n++;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? n : -1;
}

/* ---------- aggregates ---------- */

/* Accounts: requests served by each (final account) and attempts made on
 * each (from the attempts records), joined both ways. */
static const char store_sql_stats_account[] =
    "WITH r AS (SELECT * FROM request_logs WHERE ts >= ?1 AND ts < ?2),"
    " att AS (SELECT json_extract(j.value, '$.account') AS label, count(*) AS attempts,"
    "   sum(json_extract(j.value, '$.outcome') = 'failover') AS failovers"
    "   FROM r, json_each(CASE WHEN json_valid(r.attempts_json) THEN r.attempts_json ELSE '[]' END) j"
    "   GROUP BY label),"
    " srv AS (SELECT account_name AS label, count(*) AS requests, sum(status < 200 OR status >= 300) AS failed,"
    "   sum(input_tokens) AS i, sum(output_tokens) AS o, sum(total_tokens) AS t FROM r"
    "   WHERE account_name != '' GROUP BY account_name)"
    " SELECT srv.label, srv.requests, srv.failed, coalesce(att.attempts, 0), coalesce(att.failovers, 0),"
    "   coalesce(srv.i, 0), coalesce(srv.o, 0), coalesce(srv.t, 0) FROM srv LEFT JOIN att ON att.label = srv.label"
    " UNION ALL SELECT att.label, 0, 0, att.attempts, att.failovers, 0, 0, 0 FROM att"
    "   WHERE att.label IS NOT NULL AND att.label NOT IN (SELECT label FROM srv)"
    " ORDER BY 2 DESC, 4 DESC, 1";

#define STORE_SQL_STATS_BY(expr)                                                                                  \
    "SELECT " expr " AS label, count(*), sum(status < 200 OR status >= 300), sum(attempts),"                     \
    " sum(CASE WHEN attempts > 1 THEN attempts - 1 ELSE 0 END), coalesce(sum(input_tokens), 0),"                 \
    " coalesce(sum(output_tokens), 0), coalesce(sum(total_tokens), 0)"                                            \
    " FROM request_logs r WHERE ts >= ?1 AND ts < ?2 GROUP BY label ORDER BY 2 DESC, 1"

int store_logs_stats(store *s, const char *group, double since, double until,
                     void (*fn)(void *ud, const store_stat_row *r), void *ud)
{
    const char *sql;
    if (strcmp(group, "account") == 0)
        sql = store_sql_stats_account;
    else if (strcmp(group, "key") == 0)
        sql = STORE_SQL_STATS_BY("coalesce((SELECT name FROM platform_keys k WHERE k.id = r.platform_key_id), '')");
    else if (strcmp(group, "model") == 0)
        sql = STORE_SQL_STATS_BY("model");
    else
        return -1;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_double(st, 1, since);
    sqlite3_bind_double(st, 2, until > 0 ? until : 1e18);
    int rc, n = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        store_stat_row r = {store_admin_text(st, 0),          sqlite3_column_int64(st, 1),
                            sqlite3_column_int64(st, 2),      sqlite3_column_int64(st, 3),
                            sqlite3_column_int64(st, 4),      sqlite3_column_int64(st, 5),
                            sqlite3_column_int64(st, 6),      sqlite3_column_int64(st, 7)};
        fn(ud, &r);
        n++;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? n : -1;
}

int store_logs_timeline(store *s, double since, int bucket_s,
                        void (*fn)(void *ud, double bucket_start, int64_t requests, int64_t failovers, int64_t failed),
                        void *ud)
{
    sqlite3_stmt *st = NULL;
    if (bucket_s < 1 || sqlite3_prepare_v2(store_db(s),
            "SELECT CAST((ts - ?1) / ?2 AS INTEGER) AS b, count(*),"
            " sum(CASE WHEN attempts > 1 THEN attempts - 1 ELSE 0 END), sum(status < 200 OR status >= 300)"
            " FROM request_logs WHERE ts >= ?1 GROUP BY b ORDER BY b", -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_double(st, 1, since);
    sqlite3_bind_int(st, 2, bucket_s);
    int rc, n = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        fn(ud, since + (double)sqlite3_column_int64(st, 0) * bucket_s, sqlite3_column_int64(st, 1),
           sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3));
        n++;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? n : -1;
}
