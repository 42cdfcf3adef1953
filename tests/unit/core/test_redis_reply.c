/* test_redis_reply.c: the bounded reply objects (core/redis_reply.c) on a
 * hiredis reader: what the gateway legitimately reads is built as hiredis
 * builds it, a header declaring too much or nesting too deep is refused
 * before anything is allocated for it. */
#include "check.h"
#include "core/redis_reply.h"
#include <hiredis/hiredis.h>

/* Feeds s to a bounded reader: 0 and *out a reply, 1 nothing yet, -1 refused (note says why). */
static int feed(const char *s, size_t n, redisReply **out, char *note)
{
    redisReader *rd = redisReaderCreate();
    note[0] = '\0';
    redis_reply_bound(rd, note);
    redisReaderFeed(rd, s, n);
    void *reply = NULL;
    int rc = redisReaderGetReply(rd, &reply) == REDIS_OK ? (reply ? 0 : 1) : -1;
    redisReaderFree(rd);
    *out = reply;
    return rc;
}

static void test_scan_answer_is_built_like_hiredis_builds_it(void)
{
    const char s[] = "*2\r\n$1\r\n0\r\n*3\r\n$5\r\nsy:ab\r\n$-1\r\n:42\r\n";
    char note[REDIS_REPLY_NOTE];
    redisReply *r = NULL;
    CHECK_EQ_INT(feed(s, sizeof s - 1, &r, note), 0);
    CHECK(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    if (r && r->elements == 2) {
        CHECK_EQ_STR(r->element[0]->str, "0");
        redisReply *k = r->element[1];
        CHECK(k->type == REDIS_REPLY_ARRAY && k->elements == 3);
        CHECK_EQ_STR(k->element[0]->str, "sy:ab");
        CHECK_EQ_INT(k->element[0]->len, 5);
        CHECK_EQ_INT(k->element[1]->type, REDIS_REPLY_NIL);
        CHECK_EQ_INT(k->element[2]->integer, 42);
    }
    freeReplyObject(r);
    CHECK_EQ_STR(note, "");
}

static void test_status_error_and_empty_array_are_built(void)
{
    char note[REDIS_REPLY_NOTE];
    redisReply *r = NULL;
    CHECK_EQ_INT(feed("-ERR no\r\n", 9, &r, note), 0);
    CHECK(r && r->type == REDIS_REPLY_ERROR && !strcmp(r->str, "ERR no"));
    freeReplyObject(r);
    CHECK_EQ_INT(feed("*0\r\n", 4, &r, note), 0);
    CHECK(r && r->type == REDIS_REPLY_ARRAY && r->elements == 0 && !r->element);
    freeReplyObject(r);
    CHECK_EQ_INT(feed("*-1\r\n", 5, &r, note), 0);
    CHECK(r && r->type == REDIS_REPLY_NIL);
    freeReplyObject(r);
}

static void test_header_of_two_billion_elements_is_refused_before_any_element(void)
{
    char note[REDIS_REPLY_NOTE];
    redisReply *r = NULL;
    CHECK_EQ_INT(feed("*2000000000\r\n", 13, &r, note), -1);
    CHECK(r == NULL);
    CHECK_EQ_STR(note, "a reply declaring 2000000000 array elements (at most 1048576) refused");
}

static void test_the_limit_counts_nested_arrays_of_one_reply_together(void)
{
    /* two nested arrays of 600000 each: the first alone is within, both together are not */
    char note[REDIS_REPLY_NOTE];
    redisReply *r = NULL;
    const char head[] = "*2\r\n*600000\r\n", second[] = "*600000\r\n";
    CHECK_EQ_INT(feed(head, sizeof head - 1, &r, note), 1); /* accepted, waits for its elements */
    size_t n = sizeof head - 1 + 600000 * 4 + sizeof second - 1;
    char *s = malloc(n), *p = s;
    memcpy(p, head, sizeof head - 1);
    p += sizeof head - 1;
    for (int i = 0; i < 600000; i++, p += 4)
        memcpy(p, ":1\r\n", 4);
    memcpy(p, second, sizeof second - 1);
    CHECK_EQ_INT(feed(s, n, &r, note), -1);
    CHECK_EQ_STR(note, "a reply declaring 1200002 array elements (at most 1048576) refused");
    free(s);
    char big[32];
    int k = snprintf(big, sizeof big, "*%d\r\n", REDIS_REPLY_MAX_ELEMENTS);
    CHECK_EQ_INT(feed(big, (size_t)k, &r, note), 1); /* exactly the limit: accepted */
    k = snprintf(big, sizeof big, "*%d\r\n", REDIS_REPLY_MAX_ELEMENTS + 1);
    CHECK_EQ_INT(feed(big, (size_t)k, &r, note), -1);
}

static void test_arrays_nested_five_deep_are_refused(void)
{
    char note[REDIS_REPLY_NOTE];
    redisReply *r = NULL;
    CHECK_EQ_INT(feed("*1\r\n*1\r\n*1\r\n*1\r\n:7\r\n", 20, &r, note), 0);
    CHECK(r && r->element[0]->element[0]->element[0]->element[0]->integer == 7);
    freeReplyObject(r);
    CHECK_EQ_INT(feed("*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:7\r\n", 24, &r, note), -1);
    CHECK_EQ_STR(note, "a reply nesting arrays 5 deep (at most 4) refused");
}

int main(void)
{
    RUN(test_scan_answer_is_built_like_hiredis_builds_it);
    RUN(test_status_error_and_empty_array_are_built);
    RUN(test_header_of_two_billion_elements_is_refused_before_any_element);
    RUN(test_the_limit_counts_nested_arrays_of_one_reply_together);
    RUN(test_arrays_nested_five_deep_are_refused);
    return check_summary();
}
