/* test_conversations.c: the stored conversations on a real sqlite file:
 * turns put through the writer and read back as chains, the clear errors
 * (unknown id, a missing turn, a cycle, depth and byte limits), deletes in
 * queue order, the retention by rows, bytes and days in bounded sweeps,
 * the queue's bound, and the record surviving a restart. */
#include "check.h"
#include "test_sql.h"
#include "store/store.h"
#include "store/store_conversations.h"
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static char test_dir[64];
static int test_seq;

static const char *test_db_path(char *buf, size_t n)
{
    snprintf(buf, n, "%s/c%d.db", test_dir, ++test_seq);
    return buf;
}

/* A fresh database with its writer running. */
static store *test_open_started(char *path, size_t n)
{
    char err[256] = "";
    test_db_path(path, n);
    store *s = store_open(path, err, sizeof err);
    if (!s || store_writer_start(s, err, sizeof err) != 0)
        fprintf(stderr, "  store_open(%s): %s\n", path, err);
    return s;
}

/* Puts turn id (continuing prev, NULL for none) with a small input and
 * output that name it. */
static void test_put(store *s, const char *id, const char *prev, int64_t account_id)
{
    char in[160], out[160];
    int ni = snprintf(in, sizeof in, "[{\"role\":\"user\",\"content\":\"to %s\"}]", id);
    int no = snprintf(out, sizeof out, "[{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"from %s\"}]", id);
    store_writer_put_conversation(s, id, account_id, prev, in, (size_t)ni, out, (size_t)no);
}

/* Puts n turns c0 <- c1 <- ... (each continuing the one before). */
static void test_put_line(store *s, const char *prefix, int n)
{
    char id[32], prev[32];
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof id, "%s%d", prefix, i);
        snprintf(prev, sizeof prev, "%s%d", prefix, i - 1);
        test_put(s, id, i ? prev : NULL, 1 + i % 3);
    }
}

static int64_t test_count(const char *path) { return test_sql_int(path, "SELECT count(*) FROM conversations"); }

static void test_limits(store *s, int64_t rows, int64_t bytes, int64_t days)
{
    store_conversation_limits l = {rows, bytes, days};
    store_conversation_limits_set(s, &l);
}

/* 1 when err holds the words want. */
static int test_err_has(const char *err, const char *want)
{
    if (strstr(err, want))
        return 1;
    fprintf(stderr, "  error \"%s\" lacks \"%s\"\n", err, want);
    return 0;
}

/* ---------- chains ---------- */

static void test_turns_put_through_the_writer_read_back_as_a_chain_oldest_first(void)
{
    char path[128], err[256] = "";
    store *s = test_open_started(path, sizeof path);
    test_put(s, "resp_1", NULL, 7);
    test_put(s, "resp_2", "resp_1", 8);
    test_put(s, "resp_3", "resp_2", 9);
    test_put(s, "other", NULL, 7);
    store_writer_sync(s);
    conv_link *c = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_conversation_chain(s, "resp_3", 100, 1 << 20, &c, &n, err, sizeof err), 0);
    CHECK_EQ_INT(n, 3);
    if (n == 3) {
        CHECK_EQ_STR(c[0].response_id, "resp_1");
        CHECK(c[0].previous_response_id == NULL);
        CHECK_EQ_INT(c[0].account_id, 7);
        CHECK_EQ_STR(c[0].input_json, "[{\"role\":\"user\",\"content\":\"to resp_1\"}]");
        CHECK_EQ_INT(c[0].input_len, strlen(c[0].input_json));
        CHECK_EQ_STR(c[1].response_id, "resp_2");
        CHECK_EQ_STR(c[1].previous_response_id, "resp_1");
        CHECK_EQ_INT(c[1].account_id, 8);
        CHECK_EQ_STR(c[2].response_id, "resp_3");
        CHECK_EQ_STR(c[2].previous_response_id, "resp_2");
        CHECK_EQ_STR(c[2].output_json, "[{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"from resp_3\"}]");
        CHECK_EQ_INT(c[2].output_len, strlen(c[2].output_json));
        CHECK(c[2].created_at > (double)time(NULL) - 60 && c[2].created_at >= c[0].created_at);
    }
    store_conversation_chain_free(c, n);
    CHECK_EQ_INT(store_conversation_chain(s, "resp_1", 100, 1 << 20, &c, &n, err, sizeof err), 0);
    CHECK_EQ_INT(n, 1);
    store_conversation_chain_free(c, n);
    CHECK_EQ_INT(store_conversation_has(s, "resp_2"), 1);
    CHECK_EQ_INT(store_conversation_has(s, "resp_4"), 0);
    CHECK_EQ_INT(store_conversation_has(s, ""), 0);
    CHECK_EQ_INT(test_sql_int(path, "SELECT bytes FROM conversations WHERE response_id = 'resp_1'"),
                 (int64_t)(strlen("[{\"role\":\"user\",\"content\":\"to resp_1\"}]") +
                           strlen("[{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"from resp_1\"}]")));
    store_close(s);
}

/* The same response id recorded again (a retried turn) replaces the row. */
static void test_the_same_id_again_replaces_its_turn(void)
{
    char path[128], err[256] = "";
    store *s = test_open_started(path, sizeof path);
    store_writer_put_conversation(s, "r", 1, NULL, "[1]", 3, "[2]", 3);
    store_writer_put_conversation(s, "r", 2, "", "[3]", 3, "[4,5]", 5);
    store_writer_sync(s);
    conv_link *c = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_conversation_chain(s, "r", 10, 100, &c, &n, err, sizeof err), 0);
    CHECK_EQ_INT(n, 1);
    if (n == 1) {
        CHECK_EQ_INT(c[0].account_id, 2);
        CHECK_EQ_STR(c[0].input_json, "[3]");
        CHECK_EQ_STR(c[0].output_json, "[4,5]");
        CHECK(c[0].previous_response_id == NULL);
    }
    store_conversation_chain_free(c, n);
    CHECK_EQ_INT(test_count(path), 1);
    store_close(s);
}

static void test_an_unknown_id_is_a_clear_error(void)
{
    char path[128], err[256] = "";
    store *s = test_open_started(path, sizeof path);
    conv_link *c = (conv_link *)1;
    size_t n = 5;
    CHECK_EQ_INT(store_conversation_chain(s, "resp_never", 100, 1 << 20, &c, &n, err, sizeof err), -1);
    CHECK(c == NULL && n == 0);
    CHECK(test_err_has(err, "response resp_never is not recorded"));
    char longid[200];
    memset(longid, 'r', 150);
    longid[150] = '\0';
    CHECK_EQ_INT(store_conversation_chain(s, longid, 100, 1 << 20, &c, &n, err, sizeof err), -1);
    CHECK(test_err_has(err, "cannot be a recorded response id"));
    CHECK_EQ_INT(store_conversation_chain(s, NULL, 100, 1 << 20, &c, &n, err, sizeof err), -1);
    store_close(s);
}

/* A turn deleted (or expired) in the middle breaks the chains through it,
 * with the ids in the error; the turns before it still read. */
static void test_a_missing_turn_in_the_middle_is_a_clear_error(void)
{
    char path[128], err[256] = "";
    store *s = test_open_started(path, sizeof path);
    test_put_line(s, "m", 4);
    CHECK_EQ_INT(store_conversation_delete(s, "m1"), 0);
    store_writer_sync(s);
    conv_link *c = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_conversation_chain(s, "m3", 100, 1 << 20, &c, &n, err, sizeof err), -1);
    CHECK(test_err_has(err, "response m2 continues m1, which is no longer recorded"));
    CHECK_EQ_INT(store_conversation_has(s, "m1"), 0);
    CHECK_EQ_INT(store_conversation_chain(s, "m0", 100, 1 << 20, &c, &n, err, sizeof err), 0);
    CHECK_EQ_INT(n, 1);
    store_conversation_chain_free(c, n);
    store_close(s);
}

static void test_a_cycle_is_refused(void)
{
    char path[128], err[256] = "";
    store *s = test_open_started(path, sizeof path);
    test_put(s, "a", "c", 1);
    test_put(s, "b", "a", 1);
    test_put(s, "c", "b", 1);
    test_put(s, "self", "self", 1);
    store_writer_sync(s);
    conv_link *c = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_conversation_chain(s, "c", 100, 1 << 20, &c, &n, err, sizeof err), -1);
    CHECK(test_err_has(err, "the stored conversation of c loops: c comes back"));
    CHECK_EQ_INT(store_conversation_chain(s, "self", 100, 1 << 20, &c, &n, err, sizeof err), -1);
    CHECK(test_err_has(err, "loops: self comes back"));
    CHECK(c == NULL && n == 0);
    store_close(s);
}

/* A long chain with ids met many times over the hash set's growth: found
 * whole, and a cycle at its root still caught. */
static void test_a_long_chain_reads_whole_and_a_cycle_at_its_root_is_caught(void)
{
    char path[128], err[256] = "";
    store *s = test_open_started(path, sizeof path);
    test_put_line(s, "L", 700);
    store_writer_sync(s);
    conv_link *c = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_conversation_chain(s, "L699", 1000, 1 << 24, &c, &n, err, sizeof err), 0);
    CHECK_EQ_INT(n, 700);
    if (n == 700) {
        CHECK_EQ_STR(c[0].response_id, "L0");
        CHECK_EQ_STR(c[699].response_id, "L699");
        CHECK_EQ_STR(c[350].previous_response_id, "L349");
    }
    store_conversation_chain_free(c, n);
    test_put(s, "L0", "L500", 1); /* the root now continues a later turn */
    store_writer_sync(s);
    CHECK_EQ_INT(store_conversation_chain(s, "L699", 1000, 1 << 24, &c, &n, err, sizeof err), -1);
    CHECK(test_err_has(err, "loops: L500 comes back"));
    store_close(s);
}

static void test_depth_and_byte_limits_refuse_a_chain_with_a_clear_error(void)
{
    char path[128], err[256] = "";
    store *s = test_open_started(path, sizeof path);
    test_put_line(s, "d", 5);
    store_writer_sync(s);
    conv_link *c = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_conversation_chain(s, "d4", 4, 1 << 20, &c, &n, err, sizeof err), -1);
    CHECK(test_err_has(err, "the conversation of d4 has more than 4 turns"));
    CHECK_EQ_INT(store_conversation_chain(s, "d4", 5, 1 << 20, &c, &n, err, sizeof err), 0);
    CHECK_EQ_INT(n, 5);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += c[i].input_len + c[i].output_len;
    store_conversation_chain_free(c, n);
    CHECK_EQ_INT(store_conversation_chain(s, "d4", 5, total, &c, &n, err, sizeof err), 0);
    store_conversation_chain_free(c, n);
    CHECK_EQ_INT(store_conversation_chain(s, "d4", 5, total - 1, &c, &n, err, sizeof err), -1);
    CHECK(test_err_has(err, "holds more than"));
    CHECK(c == NULL && n == 0);
    store_close(s);
}

/* ---------- deletes ---------- */

/* Deletes go through the same queue as turns: a put then a delete leaves
 * nothing, a delete then a put leaves the turn. */
static void test_deletes_apply_in_queue_order(void)
{
    char path[128];
    store *s = test_open_started(path, sizeof path);
    test_put(s, "x", NULL, 1);
    CHECK_EQ_INT(store_conversation_delete(s, "x"), 0);
    CHECK_EQ_INT(store_conversation_delete(s, "y"), 0);
    test_put(s, "y", NULL, 1);
    CHECK_EQ_INT(store_conversation_delete(s, ""), -1);
    CHECK_EQ_INT(store_conversation_delete(s, NULL), -1);
    store_writer_sync(s);
    CHECK_EQ_INT(store_conversation_has(s, "x"), 0);
    CHECK_EQ_INT(store_conversation_has(s, "y"), 1);
    CHECK_EQ_INT(test_count(path), 1);
    store_close(s);
}

/* ---------- what is not recorded ---------- */

static void test_bad_ids_and_a_turn_too_large_are_not_recorded(void)
{
    char path[128], longid[200];
    store *s = test_open_started(path, sizeof path);
    memset(longid, 'r', 128);
    longid[128] = '\0';
    store_writer_put_conversation(s, "", 1, NULL, "[]", 2, "[]", 2);
    store_writer_put_conversation(s, NULL, 1, NULL, "[]", 2, "[]", 2);
    store_writer_put_conversation(s, longid, 1, NULL, "[]", 2, "[]", 2);
    store_writer_put_conversation(s, "r", 0, NULL, "[]", 2, "[]", 2);
    store_writer_put_conversation(s, "r", 1, longid, "[]", 2, "[]", 2);
    store_writer_put_conversation(s, "r", 1, NULL, NULL, 0, "[]", 2);
    longid[127] = '\0';
    store_writer_put_conversation(s, longid, 1, NULL, "[]", 2, "[]", 2); /* 127 bytes: kept */
    test_limits(s, 100, 10, 30);
    store_writer_put_conversation(s, "big", 1, NULL, "[1,2,3,4]", 9, "[]", 2); /* 11 > 10 bytes */
    store_writer_sync(s);
    store_writer_stats ws;
    store_writer_stats_get(s, &ws);
    CHECK_EQ_INT(ws.dropped_conversations, 1);
    CHECK_EQ_INT(test_count(path), 1);
    CHECK_EQ_INT(store_conversation_has(s, longid), 1);
    store_close(s);
}

static void test_recording_is_off_with_no_rows_or_no_bytes_allowed(void)
{
    char path[128];
    store *s = test_open_started(path, sizeof path);
    test_put(s, "kept", NULL, 1);
    store_writer_sync(s);
    test_limits(s, 0, 1 << 20, 30);
    test_put(s, "not", NULL, 1);
    store_writer_sync(s);
    CHECK_EQ_INT(test_count(path), 0); /* the sweep took the one kept before */
    test_limits(s, 10, 0, 30);
    test_put(s, "not2", NULL, 1);
    store_writer_sync(s);
    CHECK_EQ_INT(test_count(path), 0);
    store_writer_stats ws;
    store_writer_stats_get(s, &ws);
    CHECK_EQ_INT(ws.dropped_conversations, 0);
    store_close(s);
}

/* Queued faster than written (here: the writer not started yet), the
 * oldest beyond STORE_CONV_QUEUE_MAX are dropped and counted. */
static void test_a_full_queue_drops_the_oldest_and_counts_them(void)
{
    char path[128], err[256], id[32];
    store *s = store_open(test_db_path(path, sizeof path), err, sizeof err);
    for (int i = 0; i < STORE_CONV_QUEUE_MAX + 5; i++) {
        snprintf(id, sizeof id, "q%d", i);
        store_writer_put_conversation(s, id, 1, NULL, "[]", 2, "[]", 2);
    }
    store_writer_stats ws;
    store_writer_stats_get(s, &ws);
    CHECK_EQ_INT(ws.pending_conversations, STORE_CONV_QUEUE_MAX);
    CHECK_EQ_INT(ws.dropped_conversations, 5);
    CHECK_EQ_INT(store_writer_start(s, err, sizeof err), 0);
    store_writer_sync(s);
    CHECK_EQ_INT(test_count(path), STORE_CONV_QUEUE_MAX);
    CHECK_EQ_INT(store_conversation_has(s, "q4"), 0);
    CHECK_EQ_INT(store_conversation_has(s, "q5"), 1);
    store_writer_stats_get(s, &ws);
    CHECK_EQ_INT(ws.pending_conversations, 0);
    store_close(s);
}

/* ---------- retention ---------- */

static void test_retention_by_rows_drops_the_oldest(void)
{
    char path[128];
    store *s = test_open_started(path, sizeof path);
    test_limits(s, 5, 1 << 20, 30);
    test_put_line(s, "r", 8);
    store_writer_sync(s);
    store_conversation_sweep_now(s);
    store_writer_sync(s);
    CHECK_EQ_INT(test_count(path), 5);
    CHECK_EQ_INT(store_conversation_has(s, "r2"), 0);
    CHECK_EQ_INT(store_conversation_has(s, "r3"), 1);
    CHECK_EQ_INT(store_conversation_has(s, "r7"), 1);
    store_writer_stats ws;
    store_writer_stats_get(s, &ws);
    CHECK_EQ_INT(ws.swept_conversations, 3);
    store_close(s);
}

/* Lowering a limit sweeps at once: no new turn is needed. */
static void test_retention_by_bytes_drops_the_oldest_when_the_limit_is_lowered(void)
{
    char path[128];
    store *s = test_open_started(path, sizeof path);
    test_put_line(s, "b", 6);
    store_writer_sync(s);
    CHECK_EQ_INT(test_count(path), 6);
    int64_t three = test_sql_int(path, "SELECT sum(bytes) FROM conversations WHERE response_id IN ('b3','b4','b5')");
    test_limits(s, 100, three, 30);
    store_writer_sync(s);
    CHECK_EQ_INT(test_count(path), 3);
    CHECK_EQ_INT(store_conversation_has(s, "b2"), 0);
    CHECK_EQ_INT(store_conversation_has(s, "b3"), 1);
    test_limits(s, 100, three - 1, 30);
    store_writer_sync(s);
    CHECK_EQ_INT(test_count(path), 2);
    CHECK_EQ_INT(store_conversation_has(s, "b3"), 0);
    store_close(s);
}

/* A turn older than max_days reads as gone at once and is deleted by the
 * next sweep. */
static void test_retention_by_days_hides_then_deletes_expired_turns(void)
{
    char path[128], err[256] = "";
    store *s = test_open_started(path, sizeof path);
    test_put_line(s, "t", 3);
    store_writer_sync(s);
    test_sql_exec(path, "UPDATE conversations SET created_at = created_at - 31 * 86400 WHERE response_id IN ('t0', 't1')");
    CHECK_EQ_INT(store_conversation_has(s, "t0"), 0);
    CHECK_EQ_INT(store_conversation_has(s, "t2"), 1);
    conv_link *c = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_conversation_chain(s, "t2", 10, 1 << 20, &c, &n, err, sizeof err), -1);
    CHECK(test_err_has(err, "response t2 continues t1, which is no longer recorded"));
    CHECK_EQ_INT(test_count(path), 3);
    store_conversation_sweep_now(s);
    store_writer_sync(s);
    CHECK_EQ_INT(test_count(path), 1);
    test_limits(s, 100, 1 << 20, 60); /* longer retention: nothing comes back, nothing more goes */
    store_writer_sync(s);
    CHECK_EQ_INT(test_count(path), 1);
    store_close(s);
}

/* The retention sweeps by itself after STORE_CONV_SWEEP_EVERY_N turns. */
static void test_retention_sweeps_by_itself_after_enough_new_turns(void)
{
    char path[128];
    store *s = test_open_started(path, sizeof path);
    test_limits(s, 10, 1 << 20, 30);
    store_writer_sync(s);
    for (int round = 0; round < 4; round++) {
        char prefix[8];
        snprintf(prefix, sizeof prefix, "n%d_", round);
        test_put_line(s, prefix, STORE_CONV_SWEEP_EVERY_N);
        store_writer_sync(s);
    }
    /* at least one sweep per STORE_CONV_SWEEP_EVERY_N turns: never more
     * than those turns above the limit */
    CHECK(test_count(path) <= 10 + STORE_CONV_SWEEP_EVERY_N);
    CHECK_EQ_INT(store_conversation_has(s, "n3_63"), 1);
    CHECK_EQ_INT(store_conversation_has(s, "n0_0"), 0);
    store_close(s);
}

/* A large excess is swept in commits of at most STORE_CONV_SWEEP_ROWS
 * deletions, which go on by themselves until the limit holds. */
static void test_a_large_sweep_runs_in_bounded_commits_until_done(void)
{
    char path[128];
    store *s = test_open_started(path, sizeof path);
    int total = 3 * STORE_CONV_SWEEP_ROWS + 11; /* 3 * 256 + 1 to delete: four commits */
    test_put_line(s, "s", total);
    store_writer_sync(s);
    CHECK_EQ_INT(test_count(path), total);
    store_writer_stats ws0, ws;
    store_writer_stats_get(s, &ws0);
    test_limits(s, 10, 1 << 20, 30);
    store_writer_sync(s);
    for (int i = 0; i < 500 && test_count(path) > 10; i++)
        usleep(10000);
    CHECK_EQ_INT(test_count(path), 10);
    /* the writer counts a sweep's rows after its commit, which readers may see first */
    store_writer_stats_get(s, &ws);
    for (int i = 0; i < 500 && ws.swept_conversations - ws0.swept_conversations < (uint64_t)(total - 10); i++) {
        usleep(10000);
        store_writer_stats_get(s, &ws);
    }
    CHECK_EQ_INT(ws.swept_conversations - ws0.swept_conversations, total - 10);
    CHECK(ws.conversation_sweeps - ws0.conversation_sweeps >= 4);
    char last[16];
    snprintf(last, sizeof last, "s%d", total - 1);
    CHECK_EQ_INT(store_conversation_has(s, last), 1);
    store_close(s);
}

/* ---------- restart ---------- */

static void test_the_record_survives_reopening_the_database(void)
{
    char path[128], err[256] = "";
    store *s = test_open_started(path, sizeof path);
    test_put_line(s, "p", 3);
    store_close(s); /* drains the queue */
    s = store_open(path, err, sizeof err);
    CHECK(s != NULL);
    if (!s)
        return;
    conv_link *c = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_conversation_chain(s, "p2", 10, 1 << 20, &c, &n, err, sizeof err), 0);
    CHECK_EQ_INT(n, 3);
    if (n == 3)
        CHECK_EQ_STR(c[0].input_json, "[{\"role\":\"user\",\"content\":\"to p0\"}]");
    store_conversation_chain_free(c, n);
    store_close(s);
}

static void test_the_schema_has_the_table_and_its_index(void)
{
    char path[128];
    store *s = test_open_started(path, sizeof path);
    store_close(s);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'conversations'"), 1);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'index'"
                                    " AND name = 'conversations_created_at'"), 1);
    CHECK_EQ_INT(test_sql_int(path, "SELECT count(*) FROM pragma_table_info('conversations') WHERE name IN"
                                    " ('response_id','account_id','previous_response_id','input_json','output_json',"
                                    "'bytes','created_at')"), 7);
}

int main(void)
{
    if (check_tmpdir_make(test_dir, sizeof test_dir, "sy_conv") != 0)
        return 2;
    RUN(test_turns_put_through_the_writer_read_back_as_a_chain_oldest_first);
    RUN(test_the_same_id_again_replaces_its_turn);
    RUN(test_an_unknown_id_is_a_clear_error);
    RUN(test_a_missing_turn_in_the_middle_is_a_clear_error);
    RUN(test_a_cycle_is_refused);
    RUN(test_a_long_chain_reads_whole_and_a_cycle_at_its_root_is_caught);
    RUN(test_depth_and_byte_limits_refuse_a_chain_with_a_clear_error);
    RUN(test_deletes_apply_in_queue_order);
    RUN(test_bad_ids_and_a_turn_too_large_are_not_recorded);
    RUN(test_recording_is_off_with_no_rows_or_no_bytes_allowed);
    RUN(test_a_full_queue_drops_the_oldest_and_counts_them);
    RUN(test_retention_by_rows_drops_the_oldest);
    RUN(test_retention_by_bytes_drops_the_oldest_when_the_limit_is_lowered);
    RUN(test_retention_by_days_hides_then_deletes_expired_turns);
    RUN(test_retention_sweeps_by_itself_after_enough_new_turns);
    RUN(test_a_large_sweep_runs_in_bounded_commits_until_done);
    RUN(test_the_record_survives_reopening_the_database);
    RUN(test_the_schema_has_the_table_and_its_index);
    check_tmpdir_remove(test_dir);
    return check_summary();
}
