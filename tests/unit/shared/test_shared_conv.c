/* test_shared_conv.c: the stored turns shared through Redis
 * (shared/shared_conv.c): a turn's write carries it whole with the
 * retention and TTL, and is not made when recording is off or the turn is
 * larger than kept; a chain's answer is read oldest first with each
 * account by this instance's id, says which link the pool lacks, and is
 * refused whole when it does not link, exceeds what was asked for, or is
 * not the script's. Replies are made by hiredis's own reader from RESP. */
#include "check.h"
#include "shared/shared_conv.h"
#include <hiredis/hiredis.h>

#define PREFIX "sy:{t}:"

/* A reply from RESP bytes (free with freeReplyObject). */
static redisReply *resp_n(const char *text, size_t len)
{
    redisReader *rd = redisReaderCreate();
    void *r = NULL;
    redisReaderFeed(rd, text, len);
    if (redisReaderGetReply(rd, &r) != REDIS_OK)
        r = NULL;
    redisReaderFree(rd);
    return r;
}

static redisReply *resp(const char *text) { return resp_n(text, strlen(text)); }

/* An array of bulk strings in RESP. */
static const char *arr(int n, const char **v)
{
    static char buf[8192];
    size_t w = (size_t)snprintf(buf, sizeof buf, "*%d\r\n", n);
    for (int i = 0; i < n; i++)
        w += (size_t)snprintf(buf + w, sizeof buf - w, "$%zu\r\n%s\r\n", strlen(v[i]), v[i]);
    return buf;
}

static int64_t acct(void *ud, const char *name)
{
    (void)ud;
    return !strcmp(name, "a") ? 11 : !strcmp(name, "b") ? 12 : 0;
}

static int read_chain(const char **v, int n, const char *id, size_t depth, size_t bytes, conv_link **out, size_t *nout,
                      char *missing, char *err)
{
    redisReply *r = resp(arr(n, v));
    int rc = shared_conv_chain_read(r, id, depth, bytes, acct, NULL, out, nout, missing, err, 256);
    freeReplyObject(r);
    return rc;
}

static void test_a_turn_write_carries_the_turn_its_account_and_the_retention(void)
{
    conv_link t = {"resp_2", 11, "resp_1", "[{\"x\":1}]", 9, "[]", 2, 1700000000.0};
    store_conversation_limits l = {100, 1000, 3};
    shared_conv_cmd c;
    CHECK_EQ_INT(shared_conv_tell_cmd(&c, PREFIX, &t, "a", &l), 0);
    CHECK_EQ_INT(c.argc, 15);
    CHECK_EQ_STR(c.argv[0], "EVAL");
    CHECK_EQ_STR(c.argv[2], "3");
    CHECK_EQ_STR(c.argv[3], "sy:{t}:conv:resp_2");
    CHECK_EQ_STR(c.argv[4], "sy:{t}:conv-order");
    CHECK_EQ_STR(c.argv[5], "sy:{t}:conv-bytes");
    CHECK_EQ_STR(c.argv[6], "a");
    CHECK_EQ_STR(c.argv[7], "resp_1");
    CHECK_EQ_STR(c.argv[8], "1700000000");
    CHECK(c.argv[9] == t.input_json && c.lens[9] == 9);
    CHECK(c.argv[10] == t.output_json && c.lens[10] == 2);
    CHECK_EQ_STR(c.argv[11], "259200"); /* 3 days: less than the owners' 7 */
    CHECK_EQ_STR(c.argv[12], "100");
    CHECK_EQ_STR(c.argv[13], "1000");
    CHECK_EQ_STR(c.argv[14], "sy:{t}:conv:");
    l.max_days = 30;
    t.previous_response_id = NULL;
    CHECK_EQ_INT(shared_conv_tell_cmd(&c, PREFIX, &t, "a", &l), 0);
    CHECK_EQ_STR(c.argv[7], "");
    CHECK_EQ_STR(c.argv[11], "604800"); /* at most the owners' 7 days */
}

static void test_a_turn_is_not_shared_when_recording_is_off_or_it_is_larger_than_kept(void)
{
    char longid[200];
    memset(longid, 'x', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    conv_link t = {"resp_2", 11, NULL, "[1]", 3, "[2]", 3, 0};
    store_conversation_limits l = {100, 6, 30};
    shared_conv_cmd c;
    CHECK_EQ_INT(shared_conv_tell_cmd(&c, PREFIX, &t, "a", &l), 0); /* 6 bytes: exactly the limit */
    l.max_bytes = 5;
    CHECK_EQ_INT(shared_conv_tell_cmd(&c, PREFIX, &t, "a", &l), -1);
    l.max_bytes = 0;
    CHECK_EQ_INT(shared_conv_tell_cmd(&c, PREFIX, &t, "a", &l), -1);
    l.max_bytes = 100, l.max_rows = 0;
    CHECK_EQ_INT(shared_conv_tell_cmd(&c, PREFIX, &t, "a", &l), -1);
    l.max_rows = 100;
    CHECK_EQ_INT(shared_conv_tell_cmd(&c, PREFIX, &t, "", &l), -1);
    t.response_id = longid;
    CHECK_EQ_INT(shared_conv_tell_cmd(&c, PREFIX, &t, "a", &l), -1);
    t.response_id = "resp_2", t.previous_response_id = longid;
    CHECK_EQ_INT(shared_conv_tell_cmd(&c, PREFIX, &t, "a", &l), -1);
    CHECK_EQ_INT(shared_conv_chain_cmd(&c, PREFIX, longid, 10, 10), -1);
    CHECK_EQ_INT(shared_conv_forget_cmd(&c, PREFIX, ""), -1);
    CHECK_EQ_INT(shared_conv_forget_cmd(&c, PREFIX, "resp_2"), 0);
    CHECK_EQ_INT(c.argc, 2);
    CHECK_EQ_STR(c.argv[1], "sy:{t}:conv:resp_2");
}

static void test_a_chain_is_read_oldest_first_with_accounts_by_this_instances_ids(void)
{
    const char *v[] = {"ok", "", "r3", "b", "r2", "3", "[3]", "[33]", "r2", "zed", "r1", "2", "[2]", "[22]",
                       "r1", "a", "", "1", "[1]", "[11]"};
    conv_link *c;
    size_t n;
    char missing[SHARED_CONV_ID], err[256];
    CHECK_EQ_INT(read_chain(v, 20, "r3", 10, 100, &c, &n, missing, err), 0);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_STR(missing, "");
    CHECK_EQ_STR(c[0].response_id, "r1");
    CHECK(c[0].previous_response_id == NULL);
    CHECK_EQ_INT(c[0].account_id, 11);
    CHECK_EQ_STR(c[1].previous_response_id, "r1");
    CHECK_EQ_INT(c[1].account_id, 0); /* an account this instance does not have */
    CHECK_EQ_STR(c[2].response_id, "r3");
    CHECK_EQ_INT(c[2].account_id, 12);
    CHECK_EQ_STR(c[2].output_json, "[33]");
    CHECK_EQ_INT(c[2].output_len, 4);
    shared_conv_chain_free(c, n);
    /* exactly the bytes asked for: read; one more turn than asked for: refused */
    CHECK_EQ_INT(read_chain(v, 20, "r3", 3, 21, &c, &n, missing, err), 0);
    shared_conv_chain_free(c, n);
    CHECK_EQ_INT(read_chain(v, 20, "r3", 3, 20, &c, &n, missing, err), -1);
    CHECK(c == NULL && n == 0);
    CHECK_EQ_INT(read_chain(v, 20, "r3", 2, 100, &c, &n, missing, err), -1);
}

static void test_a_chain_whose_older_link_the_pool_lacks_says_which(void)
{
    const char *v[] = {"missing", "r1", "r3", "a", "r2", "3", "[3]", "[33]", "r2", "a", "r1", "2", "[2]", "[22]"};
    conv_link *c;
    size_t n;
    char missing[SHARED_CONV_ID], err[256];
    CHECK_EQ_INT(read_chain(v, 14, "r3", 10, 100, &c, &n, missing, err), 0);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_STR(missing, "r1");
    CHECK_EQ_STR(c[0].response_id, "r2");
    shared_conv_chain_free(c, n);
    v[1] = "r0"; /* says it lacks another link than the one the last turn continued */
    CHECK_EQ_INT(read_chain(v, 14, "r3", 10, 100, &c, &n, missing, err), -1);
}

static void test_the_scripts_refusals_say_why(void)
{
    const char *unknown[] = {"unknown", "r9"}, *deep[] = {"deep", "r5"}, *big[] = {"big", "r5"},
               *loop[] = {"loop", "r2"}, *other[] = {"what", "r2"};
    conv_link *c;
    size_t n;
    char missing[SHARED_CONV_ID], err[256];
    CHECK_EQ_INT(read_chain(unknown, 2, "r9", 10, 100, &c, &n, missing, err), -1);
    CHECK(strstr(err, "not in the pool's record") != NULL);
    CHECK_EQ_INT(read_chain(deep, 2, "r9", 10, 100, &c, &n, missing, err), -1);
    CHECK(strstr(err, "longer than 10 turns") != NULL);
    CHECK_EQ_INT(read_chain(big, 2, "r9", 10, 100, &c, &n, missing, err), -1);
    CHECK(strstr(err, "larger than 100 bytes") != NULL);
    CHECK_EQ_INT(read_chain(loop, 2, "r9", 10, 100, &c, &n, missing, err), -1);
    CHECK(strstr(err, "loops") != NULL);
    CHECK_EQ_INT(read_chain(other, 2, "r9", 10, 100, &c, &n, missing, err), -1);
    CHECK(c == NULL && n == 0);
}

static void test_an_answer_that_does_not_link_or_is_not_the_scripts_is_refused_whole(void)
{
    conv_link *c;
    size_t n;
    char missing[SHARED_CONV_ID], err[256];
    const char *wrong_first[] = {"ok", "", "r2", "a", "", "1", "[1]", "[2]"};
    CHECK_EQ_INT(read_chain(wrong_first, 8, "r3", 10, 100, &c, &n, missing, err), -1);
    const char *gap[] = {"ok", "", "r3", "a", "r2", "1", "[1]", "[2]", "r1", "a", "", "1", "[1]", "[2]"};
    CHECK_EQ_INT(read_chain(gap, 14, "r3", 10, 100, &c, &n, missing, err), -1);
    const char *ok_not_first[] = {"ok", "", "r3", "a", "r2", "1", "[1]", "[2]"};
    CHECK_EQ_INT(read_chain(ok_not_first, 8, "r3", 10, 100, &c, &n, missing, err), -1);
    const char *not_array[] = {"ok", "", "r3", "a", "", "1", "{}", "[2]"};
    CHECK_EQ_INT(read_chain(not_array, 8, "r3", 10, 100, &c, &n, missing, err), -1);
    const char *short_turn[] = {"ok", "", "r3", "a", "", "1", "[1]"};
    CHECK_EQ_INT(read_chain(short_turn, 7, "r3", 10, 100, &c, &n, missing, err), -1);
    const char *no_turn[] = {"ok", ""};
    CHECK_EQ_INT(read_chain(no_turn, 2, "r3", 10, 100, &c, &n, missing, err), -1);
    CHECK(c == NULL && n == 0);
    /* not an array of strings at all */
    const char *texts[] = {"+OK\r\n", ":3\r\n", "*2\r\n:1\r\n$0\r\n\r\n", "*-1\r\n", "$2\r\nok\r\n",
                           "*8\r\n$2\r\nok\r\n$0\r\n\r\n$2\r\nr3\r\n$1\r\na\r\n$0\r\n\r\n$1\r\n1\r\n$3\r\n[1]\r\n:5\r\n"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        redisReply *r = resp(texts[i]);
        CHECK(r != NULL);
        CHECK_EQ_INT(shared_conv_chain_read(r, "r3", 10, 100, acct, NULL, &c, &n, missing, err, sizeof err), -1);
        freeReplyObject(r);
    }
    CHECK_EQ_INT(shared_conv_chain_read(NULL, "r3", 10, 100, acct, NULL, &c, &n, missing, err, sizeof err), -1);
    /* an id with a NUL in it: "r3" to strcmp, not to the record */
    static const char nul[] = "*8\r\n$2\r\nok\r\n$0\r\n\r\n$4\r\nr3\000x\r\n$1\r\na\r\n$0\r\n\r\n$1\r\n1\r\n"
                              "$3\r\n[1]\r\n$3\r\n[2]\r\n";
    redisReply *r = resp_n(nul, sizeof nul - 1);
    CHECK(r != NULL);
    CHECK_EQ_INT(shared_conv_chain_read(r, "r3", 10, 100, acct, NULL, &c, &n, missing, err, sizeof err), -1);
    freeReplyObject(r);
}

int main(void)
{
    RUN(test_a_turn_write_carries_the_turn_its_account_and_the_retention);
    RUN(test_a_turn_is_not_shared_when_recording_is_off_or_it_is_larger_than_kept);
    RUN(test_a_chain_is_read_oldest_first_with_accounts_by_this_instances_ids);
    RUN(test_a_chain_whose_older_link_the_pool_lacks_says_which);
    RUN(test_the_scripts_refusals_say_why);
    RUN(test_an_answer_that_does_not_link_or_is_not_the_scripts_is_refused_whole);
    return check_summary();
}
