/* store_state.c: reading back what the serving path persisted through
 * the writer thread: account state and response owners (loaded at
 * start-up), and the request log count (tests, diagnostics). Reads only,
 * on the main connection with busy_timeout 0: in WAL mode they never wait
 * for the writer. */
#include "store/store_internal.h"
#include "base/json.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>

/* ---------- account state ---------- */

/* A family or model name as stored: printable ASCII without quotes or
 * backslashes, shorter than its room (what the serving path keeps; the
 * stored text is checked again on load, as any stored text). */
static int store_family_name_ok(const char *v, size_t room)
{
    size_t n = v ? strlen(v) : room;
    if (n >= room)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] <= ' ' || v[i] > '~' || v[i] == '"' || v[i] == '\\')
            return 0;
    return 1;
}

void store_families_json(const account_state *st, sbuf *out)
{
    int first = 1;
    for (int i = 0; i < ACCOUNT_FAMILIES; i++) {
        const account_family *f = &st->fam[i];
        if (!f->family[0])
            continue;
        sbuf_puts(out, first ? "[{\"family\":" : ",{\"family\":");
        first = 0;
        sbuf_json_str(out, f->family, strlen(f->family));
        sbuf_puts(out, ",\"model\":");
        sbuf_json_str(out, f->model, strlen(f->model));
        sbuf_printf(out, ",\"until\":%.3f,\"last_429_at\":%.3f,\"ladder_step\":%d,\"primary_used_pct\":%.2f,"
                         "\"secondary_used_pct\":%.2f,\"primary_reset_at\":%.0f,\"secondary_reset_at\":%.0f}",
                    f->until, f->last_429_at, f->ladder_step, f->primary_used_pct, f->secondary_used_pct,
                    f->primary_reset_at, f->secondary_reset_at);
    }
    if (!first)
        sbuf_puts(out, "]");
}

/* A stored number, finite and within [lo, hi], else dflt. */
static double store_family_num(const json_value *o, const char *key, double lo, double hi, double dflt)
{
    double v = json_get_num(o, key, dflt);
    return isfinite(v) && v >= lo && v <= hi ? v : dflt;
}

void store_families_parse(account_state *st, const char *text)
{
    memset(st->fam, 0, sizeof st->fam);
    json_value *doc = text && *text ? json_parse(text, strlen(text), NULL, 0) : NULL;
    int k = 0;
    for (const json_value *o = doc && doc->type == JSON_ARRAY ? doc->child : NULL; o && k < ACCOUNT_FAMILIES;
         o = o->next) {
        const char *fam = json_get_str(o, "family"), *model = json_get_str(o, "model");
        if (!fam || !*fam || !store_family_name_ok(fam, ACCOUNT_FAMILY_MAX) ||
            (model && *model && !store_family_name_ok(model, ACCOUNT_FAMILY_MODEL_MAX)))
            continue;
        account_family *f = &st->fam[k++];
        snprintf(f->family, sizeof f->family, "%s", fam);
        snprintf(f->model, sizeof f->model, "%s", model ? model : "");
        f->until = store_family_num(o, "until", 0, 1e11, 0);
        f->last_429_at = store_family_num(o, "last_429_at", 0, 1e11, 0);
        f->ladder_step = (int)store_family_num(o, "ladder_step", 0, 100, 0);
        f->primary_used_pct = store_family_num(o, "primary_used_pct", -1, 100, -1);
        f->secondary_used_pct = store_family_num(o, "secondary_used_pct", -1, 100, -1);
        f->primary_reset_at = store_family_num(o, "primary_reset_at", 0, 1e11, 0);
        f->secondary_reset_at = store_family_num(o, "secondary_reset_at", 0, 1e11, 0);
    }
    json_free(doc);
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
    store_families_parse(a, (const char *)sqlite3_column_text(st, 23));
    a->dialects_refused = sqlite3_column_int(st, 24);
}

int store_states_load(store *s, account_state **out, size_t *n)
{
    void *rows;
    int rc = store_rows_load(s,
        "SELECT account_id, cooldown_until, ladder_step, last_429_at, last_error, primary_used_pct,"
        " secondary_used_pct, primary_reset_at, secondary_reset_at, success_ema, latency_ema_ms,"
        " updated_at, primary_window_s, secondary_window_s, plan_type, has_credits, credits_unlimited,"
        " credits_balance, usage_polled_at, usage_poll_status, success_rate_60s, latency_60s_ms, attempts_60s,"
        " family_cooldowns, dialects_refused FROM account_state ORDER BY account_id",
        sizeof(account_state), store_state_row, &rows, n);
    if (rc != 0) {
        free(rows);
        rows = NULL;
        *n = 0;
    }
    *out = rows;
    return rc;
}

int store_models_load(store *s, void (*fn)(void *ud, int64_t account_id, const char *ids, const char *codex),
                      void *ud)
{
    sqlite3_stmt *st = NULL;
    int rc;
    if (sqlite3_prepare_v2(s->db,
            "SELECT account_id, models_learned, models_codex FROM account_state"
            " WHERE models_learned IS NOT NULL OR models_codex IS NOT NULL ORDER BY account_id",
            -1, &st, NULL) != SQLITE_OK)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        fn(ud, sqlite3_column_int64(st, 0), (const char *)sqlite3_column_text(st, 1),
           (const char *)sqlite3_column_text(st, 2));
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* ---------- request logs ---------- */

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

int64_t store_request_log_count(store *s) { return store_query_int(s, "SELECT count(*) FROM request_logs"); }

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
