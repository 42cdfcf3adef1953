/* test_shared.c: the interface's own calls (shared/shared.c): the records a
 * request asks for are bounded, deduplicated and checked, and the local
 * implementation never asks (nor builds a question): a lone gateway adds
 * nothing to the request path. */
#include "check.h"
#include "shared/shared.h"
#include <stdlib.h>
#include <string.h>

static void test_ask_add_keeps_each_record_once_and_refuses_what_does_not_fit(void)
{
    shared_ask *q = malloc(sizeof *q);
    q->n = 0;
    CHECK_EQ_INT(shared_ask_add(q, SHARED_ASK_OWNER, "resp_1"), 0);
    CHECK_EQ_INT(shared_ask_add(q, SHARED_ASK_OWNER, "resp_1"), 0); /* a blob carried twice */
    CHECK_EQ_INT(shared_ask_add(q, SHARED_ASK_SESSION, "resp_1"), 0); /* another kind: another record */
    CHECK_EQ_INT(q->n, 2);
    CHECK_EQ_INT(shared_ask_add(q, SHARED_ASK_OWNER, ""), -1);
    CHECK_EQ_INT(shared_ask_add(q, SHARED_ASK_OWNER, NULL), -1);
    char big[SHARED_ASK_KEY + 1];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK_EQ_INT(shared_ask_add(q, SHARED_ASK_OWNER, big), -1);
    big[SHARED_ASK_KEY - 1] = '\0'; /* the longest that fits */
    CHECK_EQ_INT(shared_ask_add(q, SHARED_ASK_OWNER, big), 0);
    for (int i = 0; q->n < SHARED_ASK_MAX; i++) {
        char k[16];
        snprintf(k, sizeof k, "bl:%d", i);
        CHECK_EQ_INT(shared_ask_add(q, SHARED_ASK_OWNER, k), 0);
    }
    CHECK_EQ_INT(shared_ask_add(q, SHARED_ASK_OWNER, "one more"), -1);
    CHECK_EQ_INT(q->n, SHARED_ASK_MAX);
    CHECK_EQ_STR(q->key[0], "resp_1");
    CHECK_EQ_INT(q->kind[1], SHARED_ASK_SESSION);
    free(q);
}

static int built, done;
static void build(void *ud, shared_ask *q) { built++; shared_ask_add(q, SHARED_ASK_OWNER, "resp_1"); }
static void on_done(void *ud) { done++; }

static void test_the_local_implementation_never_asks(void)
{
    gateway gw;
    memset(&gw, 0, sizeof gw);
    shared *sh = shared_local_new(&gw);
    CHECK(shared_ask_send(sh, build, on_done, NULL) == NULL);
    CHECK(shared_ask_send(NULL, build, on_done, NULL) == NULL);
    CHECK_EQ_INT(built, 0);
    CHECK_EQ_INT(done, 0);
    shared_session_tell(sh, "s", 1); /* nothing to tell it to: no effect, no crash */
    CHECK_EQ_STR(shared_kind(sh), "local");
    shared_free(sh);
}

static int cursor_calls;
static void on_cursor(void *ud, int64_t pos) { cursor_calls++; }

/* The balanced rotation of a lone gateway is its own cursor: no position, no wait. */
static void test_the_local_implementation_gives_no_cursor_position_and_never_waits(void)
{
    gateway gw;
    memset(&gw, 0, sizeof gw);
    shared *sh = shared_local_new(&gw);
    int64_t pos = 99;
    CHECK(shared_cursor_take(sh, "0123456789abcdef", "gpt-test", &pos, on_cursor, NULL) == NULL);
    CHECK_EQ_INT(pos, 0);
    pos = 99;
    CHECK(shared_cursor_take(NULL, NULL, NULL, &pos, on_cursor, NULL) == NULL);
    CHECK_EQ_INT(pos, 0);
    CHECK_EQ_INT(cursor_calls, 0);
    shared_free(sh);
}

int main(void)
{
    RUN(test_ask_add_keeps_each_record_once_and_refuses_what_does_not_fit);
    RUN(test_the_local_implementation_never_asks);
    RUN(test_the_local_implementation_gives_no_cursor_position_and_never_waits);
    return check_summary();
}
