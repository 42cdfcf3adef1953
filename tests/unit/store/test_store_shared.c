/* test_store_shared.c: the rows the gateways of a pool share, on real
 * sqlite files: a row's text applied to another database reads back as
 * the same text (so an applied row is never told back as a change), the
 * record written with it, a login never moved back, a revoke never
 * undone, removals, texts from outside checked, and a text the tables
 * refuse skipped without stopping the writer. */
#include "check.h"
#include "store/store.h"
#include "store/store_shared.h"
#include <stdlib.h>
#include <string.h>

static char test_dir[64];
static int test_seq;

static store *test_open(void)
{
    char path[128], err[256] = "";
    snprintf(path, sizeof path, "%s/s%d.db", test_dir, ++test_seq);
    store *s = store_open(path, err, sizeof err);
    if (!s || store_writer_start(s, err, sizeof err) != 0)
        fprintf(stderr, "  store_open(%s): %s\n", path, err);
    return s;
}

typedef struct rows {
    char *field[16], *body[16];
    size_t n;
} rows;

static void on_row(void *ud, const char *field, const char *body)
{
    rows *r = ud;
    if (r->n < 16) {
        r->field[r->n] = strdup(field);
        r->body[r->n++] = strdup(body);
    }
}

static void rows_free(rows *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->field[i]);
        free(r->body[i]);
    }
    memset(r, 0, sizeof *r);
}

static const char *row_of(rows *r, const char *field)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->field[i], field) == 0)
            return r->body[i];
    return NULL;
}

typedef struct recs {
    char field[8][STORE_SHARED_FIELD_MAX + 1], digest[8][65];
    int64_t version[8];
    size_t n;
} recs;

static void on_rec(void *ud, const char *field, int64_t version, const char *digest)
{
    recs *r = ud;
    if (r->n < 8) {
        snprintf(r->field[r->n], sizeof r->field[r->n], "%s", field);
        snprintf(r->digest[r->n], sizeof r->digest[r->n], "%s", digest);
        r->version[r->n++] = version;
    }
}

/* An account with most of its columns set, a key preferring it, a setting. */
static void fill(store *s)
{
    char err[256] = "", key[64];
    account_new a = {.name = "acc", .base_url = "https://api.example.com/v1", .token = "sk-1",
                     .kind = ACCOUNT_CHATGPT, .chatgpt_account_id = "cid", .model_map = "{\"x\":\"y\"}",
                     .sort = 5, .max_concurrency = 2, .weight = 3, .max_rpm = 60, .budget_usd = 12.5,
                     .budget_period = "7d", .models = "gpt-a,gpt-b",
                     .login = {.refresh_token = "rt-1", .email = "e@x", .last_refresh_at = 1000}};
    int64_t id = 0, kid = 0;
    CHECK_EQ_INT(store_account_add(s, &a, &id, err, sizeof err), 0);
    CHECK_EQ_INT(store_key_add(s, "team", key, sizeof key, &kid, err, sizeof err), 0);
    CHECK_EQ_INT(store_key_prefer(s, kid, "acc", err, sizeof err), 0);
    CHECK_EQ_INT(store_setting_set(s, "usage_poll_s", "600", err, sizeof err), 0);
}

static void test_rows_applied_to_another_database_read_back_as_the_same_texts(void)
{
    store *a = test_open(), *b = test_open();
    fill(a);
    rows ra = {0}, rb = {0};
    CHECK_EQ_INT(store_shared_rows(a, on_row, &ra), 0);
    CHECK_EQ_INT(ra.n, 3);
    CHECK(strncmp(ra.field[0], "account:acc", 11) == 0 && strncmp(ra.field[1], "key:", 4) == 0);
    for (size_t i = 0; i < ra.n; i++) {
        char err[256] = "";
        CHECK_EQ_INT(store_shared_check(b, ra.field[i], ra.body[i], err, sizeof err), 0);
        CHECK(store_shared_put(b, ra.field[i], (int64_t)i + 1, ra.body[i], 1) != 0);
    }
    store_writer_sync(b);
    CHECK_EQ_INT(store_shared_rows(b, on_row, &rb), 0);
    CHECK_EQ_INT(rb.n, ra.n);
    for (size_t i = 0; i < ra.n && i < rb.n; i++) {
        CHECK_EQ_STR(rb.field[i], ra.field[i]);
        CHECK_EQ_STR(rb.body[i], ra.body[i]); /* the key's preferred account travelled by name */
    }
    recs r = {0};
    CHECK_EQ_INT(store_shared_records(b, on_rec, &r), 0);
    CHECK_EQ_INT(r.n, 3);
    for (size_t i = 0; i < r.n && i < rb.n; i++) {
        char d[65];
        store_shared_digest(rb.body[i], d);
        CHECK_EQ_STR(r.digest[i], d); /* the row's text has the recorded digest: nothing to tell back */
        CHECK_EQ_INT(r.version[i], (int64_t)i + 1);
    }
    rows_free(&ra);
    rows_free(&rb);
    store_close(a);
    store_close(b);
}

static void test_an_older_login_is_not_applied_but_the_rest_of_the_row_is(void)
{
    store *a = test_open(), *b = test_open();
    fill(a);
    fill(b);
    char err[256] = "";
    account_patch p = {.token = "sk-newer", .login = {.refresh_token = "rt-newer", .last_refresh_at = 2000}};
    CHECK_EQ_INT(store_account_update(b, "acc", &p, err, sizeof err), 0);
    account_patch w = {.has_weight = 1, .weight = 9};
    CHECK_EQ_INT(store_account_update(a, "acc", &w, err, sizeof err), 0);
    rows ra = {0}, rb = {0};
    store_shared_rows(a, on_row, &ra);
    CHECK(store_shared_put(b, "account:acc", 5, row_of(&ra, "account:acc"), 1) != 0);
    store_writer_sync(b);
    store_shared_rows(b, on_row, &rb);
    const char *got = row_of(&rb, "account:acc");
    CHECK(got && strstr(got, "\"weight\":9") && strstr(got, "\"token\":\"sk-newer\"") &&
          strstr(got, "\"refresh_token\":\"rt-newer\"") && strstr(got, "\"last_refresh_at\":2000"));
    rows_free(&ra);
    rows_free(&rb);
    store_close(a);
    store_close(b);
}

static void test_a_revoked_key_stays_revoked_and_a_removal_deletes_the_row(void)
{
    store *a = test_open(), *b = test_open();
    fill(a);
    rows ra = {0}, rb = {0};
    store_shared_rows(a, on_row, &ra);
    for (size_t i = 0; i < ra.n; i++)
        store_shared_put(b, ra.field[i], 1, ra.body[i], 1);
    store_writer_sync(b);
    char err[256] = "";
    int64_t kid = 0;
    CHECK_EQ_INT(store_key_select(b, 0, NULL, "team", &kid, err, sizeof err), 1);
    CHECK_EQ_INT(store_key_revoke_id(b, kid, err, sizeof err), 1);
    store_shared_put(b, ra.field[1], 2, ra.body[1], 1); /* the older text says live */
    store_shared_put(b, "account:acc", 3, NULL, 1);
    store_shared_put(b, "setting:usage_poll_s", 4, NULL, 1);
    store_writer_sync(b);
    store_shared_rows(b, on_row, &rb);
    CHECK_EQ_INT(rb.n, 1);
    CHECK(rb.n == 1 && strstr(rb.body[0], "\"revoked\":1") && strstr(rb.body[0], "\"preferred\":null"));
    recs r = {0};
    store_shared_records(b, on_rec, &r);
    CHECK_EQ_INT(r.n, 3);
    CHECK_EQ_STR(r.field[0], "account:acc");
    CHECK_EQ_STR(r.digest[0], STORE_SHARED_GONE);
    rows_free(&ra);
    rows_free(&rb);
    store_close(a);
    store_close(b);
}

static void test_texts_from_outside_that_break_the_rules_are_refused(void)
{
    store *s = test_open();
    fill(s);
    rows r = {0};
    store_shared_rows(s, on_row, &r);
    const char *acc = row_of(&r, "account:acc");
    char err[256];
    CHECK_EQ_INT(store_shared_check(s, "account:acc", acc, err, sizeof err), 0);
    CHECK_EQ_INT(store_shared_check(s, "account:acc", NULL, err, sizeof err), 0);
    const char *bad_fields[] = {"acc", "account:", "key:ABC", "key:zz", "setting:Bad-Key", "other:x", "account:a\tb"};
    for (size_t i = 0; i < sizeof bad_fields / sizeof *bad_fields; i++)
        CHECK_EQ_INT(store_shared_check(s, bad_fields[i], "{}", err, sizeof err), -1);
    /* one member wrong at a time */
    const struct {
        const char *from, *to;
    } edits[] = {{"\"kind\":\"chatgpt\"", "\"kind\":\"other\""},
                 {"\"token\":\"sk-1\"", "\"token\":\"sk 1\""},
                 {"\"weight\":3", "\"weight\":-1"},
                 {"\"budget_period\":\"7d\"", "\"budget_period\":\"soon\""},
                 {"\"base_url\":\"https://api.example.com/v1\"", "\"base_url\":\"ftp://x\""},
                 {"\"enabled\":1", "\"enabled\":\"yes\""},
                 {"\"model_map\":\"{\\\"x\\\":\\\"y\\\"}\"", "\"model_map\":\"[1]\""}};
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        const char *at = strstr(acc, edits[i].from);
        CHECK(at != NULL);
        if (!at)
            continue;
        char text[4096];
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - acc), acc, edits[i].to, at + strlen(edits[i].from));
        if (store_shared_check(s, "account:acc", text, err, sizeof err) != -1)
            fprintf(stderr, "  accepted: %s\n", edits[i].to);
        CHECK_EQ_INT(store_shared_check(s, "account:acc", text, err, sizeof err), -1);
    }
    CHECK_EQ_INT(store_shared_check(s, "setting:x", "[1]", err, sizeof err), -1);
    CHECK_EQ_INT(store_shared_check(s, "setting:x", "{\"value\":\"a\",\"updated_at\":1}", err, sizeof err), 0);
    CHECK_EQ_INT(store_shared_check(s, "setting:x", "{\"value\":1,\"updated_at\":1}", err, sizeof err), -1);
    rows_free(&r);
    store_close(s);
}

static void test_a_text_the_tables_refuse_is_skipped_and_the_writer_goes_on(void)
{
    store *s = test_open();
    /* no kind, no token: NOT NULL refuses it */
    CHECK(store_shared_put(s, "account:broken", 7, "{\"base_url\":\"https://x.example/v1\"}", 1) != 0);
    CHECK(store_shared_put(s, "setting:usage_poll_s", 8, "{\"value\":\"30\",\"updated_at\":1}", 1) != 0);
    store_writer_sync(s);
    rows r = {0};
    store_shared_rows(s, on_row, &r);
    CHECK_EQ_INT(r.n, 1);
    CHECK_EQ_STR(r.n ? r.field[0] : "", "setting:usage_poll_s");
    recs rc = {0};
    store_shared_records(s, on_rec, &rc);
    CHECK_EQ_INT(rc.n, 2); /* the refused version recorded too: not taken again and again */
    store_writer_stats ws;
    store_writer_stats_get(s, &ws);
    CHECK_EQ_INT(ws.failing, 0);
    rows_free(&r);
    store_close(s);
}

int main(void)
{
    if (check_tmpdir_make(test_dir, sizeof test_dir, "sy_shared") != 0)
        return 2;
    RUN(test_rows_applied_to_another_database_read_back_as_the_same_texts);
    RUN(test_an_older_login_is_not_applied_but_the_rest_of_the_row_is);
    RUN(test_a_revoked_key_stays_revoked_and_a_removal_deletes_the_row);
    RUN(test_texts_from_outside_that_break_the_rules_are_refused);
    RUN(test_a_text_the_tables_refuse_is_skipped_and_the_writer_goes_on);
    check_tmpdir_remove(test_dir);
    return check_summary();
}
