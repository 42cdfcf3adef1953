/* test_sse.c: the incremental event-stream parser: line ends (LF, CRLF, CR,
 * and a CRLF split across feeds), data joining, the optional space, comments,
 * ignored fields, dispatch rules, and byte-at-a-time feeding. */
#include "check.h"
#include "base/sse.h"
#include <stdlib.h>

#define MAX_EVENTS 32

typedef struct got {
    int n;
    char event[MAX_EVENTS][64];
    char data[MAX_EVENTS][256];
    size_t len[MAX_EVENTS];
} got;

static void collect(void *ud, const char *event, const char *data, size_t len)
{
    got *g = ud;
    if (g->n >= MAX_EVENTS)
        return;
    snprintf(g->event[g->n], sizeof g->event[0], "%s", event);
    snprintf(g->data[g->n], sizeof g->data[0], "%.*s", (int)len, data);
    g->len[g->n] = len;
    g->n++;
}

/* Feeds s in pieces of `step` bytes (0 = all at once). */
static void run(got *g, const char *s, size_t step)
{
    sse_parser p;
    memset(g, 0, sizeof *g);
    sse_init(&p, collect, g);
    size_t n = strlen(s);
    if (!step)
        step = n ? n : 1;
    for (size_t i = 0; i < n; i += step)
        sse_feed(&p, s + i, n - i < step ? n - i : step);
    sse_free(&p);
}

static void test_overlong_line_dropped_and_parsing_resumes(void)
{
    got g;
    memset(&g, 0, sizeof g);
    sse_parser p;
    sse_init(&p, collect, &g);
    static char junk[1 << 20];
    memset(junk, 'x', sizeof junk);
    sse_feed(&p, "data: ", 6);
    for (int i = 0; i < 9; i++) /* 9 MiB without a line end */
        sse_feed(&p, junk, sizeof junk);
    CHECK(p.line.len <= SSE_MAX_LINE);
    sse_feed(&p, "tail\n\ndata: ok\n\n", 17);
    CHECK_EQ_INT(g.n, 1);
    CHECK_EQ_STR(g.data[0], "ok");
    sse_free(&p);
}

static void test_single_event_with_name(void)
{
    got g;
    run(&g, "event: response.created\ndata: {\"a\":1}\n\n", 0);
    CHECK_EQ_INT(g.n, 1);
    CHECK_EQ_STR(g.event[0], "response.created");
    CHECK_EQ_STR(g.data[0], "{\"a\":1}");
    CHECK_EQ_INT(g.len[0], 7);
}

static void test_event_without_name_has_empty_name(void)
{
    got g;
    run(&g, "data: x\n\n", 0);
    CHECK_EQ_INT(g.n, 1);
    CHECK_EQ_STR(g.event[0], "");
}

static void test_crlf_and_cr_line_ends(void)
{
    got g;
    run(&g, "event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\rdata: 3\n\n", 0);
    CHECK_EQ_INT(g.n, 3);
    CHECK_EQ_STR(g.event[0], "a");
    CHECK_EQ_STR(g.data[0], "1");
    CHECK_EQ_STR(g.event[1], "b");
    CHECK_EQ_STR(g.data[1], "2");
    CHECK_EQ_STR(g.event[2], "");
    CHECK_EQ_STR(g.data[2], "3");
}

/* The LF after a CR in the previous feed must not count as a blank line. */
static void test_crlf_split_across_feeds(void)
{
    got g;
    sse_parser p;
    memset(&g, 0, sizeof g);
    sse_init(&p, collect, &g);
    sse_feed(&p, "data: a\r", 8);
    sse_feed(&p, "\ndata: b\r", 9);
    CHECK_EQ_INT(g.n, 0);
    sse_feed(&p, "\n", 1);
    CHECK_EQ_INT(g.n, 0);
    sse_feed(&p, "\r", 1);
    CHECK_EQ_INT(g.n, 1); /* the blank line ends at its CR */
    sse_feed(&p, "\n", 1);
    sse_feed(&p, "data: c\r\n\r\n", 11);
    CHECK_EQ_INT(g.n, 2);
    CHECK_EQ_STR(g.data[0], "a\nb");
    CHECK_EQ_STR(g.data[1], "c");
    sse_free(&p);
}

static void test_empty_feed_keeps_pending_cr(void)
{
    got g;
    sse_parser p;
    memset(&g, 0, sizeof g);
    sse_init(&p, collect, &g);
    sse_feed(&p, "data: a\r", 8);
    sse_feed(&p, "", 0);
    sse_feed(&p, "\n\n", 2);
    CHECK_EQ_INT(g.n, 1);
    CHECK_EQ_STR(g.data[0], "a");
    sse_free(&p);
}

static void test_multiple_data_lines_joined_with_newline(void)
{
    got g;
    run(&g, "data: one\ndata: two\ndata:\ndata: four\n\n", 0);
    CHECK_EQ_INT(g.n, 1);
    CHECK_EQ_STR(g.data[0], "one\ntwo\n\nfour");
}

static void test_one_leading_space_stripped(void)
{
    got g;
    run(&g, "data:x\n\ndata: x\n\ndata:  x\n\ndata:x: y\n\n", 0);
    CHECK_EQ_INT(g.n, 4);
    CHECK_EQ_STR(g.data[0], "x");
    CHECK_EQ_STR(g.data[1], "x");
    CHECK_EQ_STR(g.data[2], " x");
    CHECK_EQ_STR(g.data[3], "x: y");
}

static void test_comment_lines_ignored(void)
{
    got g;
    run(&g, ": ping\n\n:\ndata: a\n: inside\ndata: b\n\n", 0);
    CHECK_EQ_INT(g.n, 1);
    CHECK_EQ_STR(g.data[0], "a\nb");
}

static void test_id_retry_and_unknown_fields_ignored(void)
{
    got g;
    run(&g, "id: 7\nretry: 1000\nfoo: bar\ndata: a\nData: nope\n\n", 0);
    CHECK_EQ_INT(g.n, 1);
    CHECK_EQ_STR(g.data[0], "a");
}

static void test_blank_line_without_data_dispatches_nothing(void)
{
    got g;
    run(&g, "\n\n\nevent: lonely\n\nid: 1\n\n", 0);
    CHECK_EQ_INT(g.n, 0);
}

static void test_event_name_reset_after_dispatch(void)
{
    got g;
    run(&g, "event: first\ndata: 1\n\ndata: 2\n\nevent: dropped\n\ndata: 3\n\n", 0);
    CHECK_EQ_INT(g.n, 3);
    CHECK_EQ_STR(g.event[0], "first");
    CHECK_EQ_STR(g.event[1], "");
    CHECK_EQ_STR(g.event[2], ""); /* a name without data does not carry over */
}

static void test_empty_data_still_dispatches(void)
{
    got g;
    run(&g, "data:\n\ndata\n\n", 0);
    CHECK_EQ_INT(g.n, 2);
    CHECK_EQ_INT(g.len[0], 0);
    CHECK_EQ_INT(g.len[1], 0);
}

static void test_last_event_name_wins(void)
{
    got g;
    run(&g, "event: a\nevent: b\ndata: x\n\n", 0);
    CHECK_EQ_INT(g.n, 1);
    CHECK_EQ_STR(g.event[0], "b");
}

static void test_incomplete_event_waits_for_blank_line(void)
{
    got g;
    run(&g, "data: x\n", 0);
    CHECK_EQ_INT(g.n, 0);
    run(&g, "data: x\n\ndata: partial", 0);
    CHECK_EQ_INT(g.n, 1);
}

static void test_bytes_split_one_at_a_time_same_result(void)
{
    const char *s = "event: a\r\ndata: {\"t\":\"x:y\"}\r\n\r\n: c\rdata:1\rdata: 2\r\r"
                    "event:b\ndata: \xc3\xa9\n\ndata\r\n\r\nid: 3\nevent: z\ndata: end\n\n";
    got whole, one, three;
    run(&whole, s, 0);
    run(&one, s, 1);
    run(&three, s, 3);
    CHECK_EQ_INT(whole.n, 5);
    CHECK_EQ_INT(one.n, whole.n);
    CHECK_EQ_INT(three.n, whole.n);
    for (int i = 0; i < whole.n; i++) {
        CHECK_EQ_STR(one.event[i], whole.event[i]);
        CHECK_EQ_STR(one.data[i], whole.data[i]);
        CHECK_EQ_STR(three.event[i], whole.event[i]);
        CHECK_EQ_STR(three.data[i], whole.data[i]);
    }
    CHECK_EQ_STR(whole.data[0], "{\"t\":\"x:y\"}");
    CHECK_EQ_STR(whole.data[1], "1\n2");
    CHECK_EQ_STR(whole.event[2], "b");
    CHECK_EQ_INT(whole.len[3], 0);
    CHECK_EQ_STR(whole.event[4], "z");
    CHECK_EQ_STR(whole.data[4], "end");
}

static void test_long_line_split_across_many_feeds(void)
{
    sbuf s = SBUF_INIT;
    sbuf_puts(&s, "data: ");
    for (int i = 0; i < 200; i++)
        sbuf_puts(&s, "0123456789");
    sbuf_puts(&s, "\n\n");
    got g;
    run(&g, s.p, 7);
    CHECK_EQ_INT(g.n, 1);
    CHECK_EQ_INT(g.len[0], 2000);
    sbuf_free(&s);
}

/* Many short data: lines and never a blank line: the event is capped and
 * dropped, the parser's memory stays bounded, and the next event parses. */
static void test_event_of_many_data_lines_is_capped(void)
{
    got g;
    memset(&g, 0, sizeof g);
    sse_parser p;
    sse_init(&p, collect, &g);
    static char lines[1 << 16];
    for (size_t i = 0; i + 8 <= sizeof lines; i += 8)
        memcpy(lines + i, "data: x\n", 8);
    size_t fed = 0;
    while (fed < (size_t)SSE_MAX_EVENT * 5) { /* 2 bytes of data per 8 fed: past the cap */
        sse_feed(&p, lines, sizeof lines);
        fed += sizeof lines;
        CHECK(p.data.cap <= SSE_MAX_EVENT + 64);
    }
    CHECK(p.drop);
    sse_feed(&p, "\ndata: after\n\n", 15);
    CHECK_EQ_INT(g.n, 1);
    CHECK_EQ_STR(g.data[0], "after");
    CHECK(!p.drop);
    sse_free(&p);
}

/* sse_open_bytes: what is fed after the last blank line, across feeds and
 * for every line-end style. */
static void test_open_bytes_track_the_unfinished_event(void)
{
    sse_parser p;
    sse_init(&p, NULL, NULL);
#define FEED(s) sse_feed(&p, s, strlen(s))
    CHECK_EQ_INT(sse_open_bytes(&p), 0);
    FEED("data: a\n\ndata: b");
    CHECK_EQ_INT(sse_open_bytes(&p), 7);
    FEED("cd");
    CHECK_EQ_INT(sse_open_bytes(&p), 9);
    FEED("\n");
    CHECK_EQ_INT(sse_open_bytes(&p), 10);
    FEED("\n");
    CHECK_EQ_INT(sse_open_bytes(&p), 0);
    FEED("data: c\r\n\r\nevent: x\r\n");
    CHECK_EQ_INT(sse_open_bytes(&p), 10);
    FEED("\r\r: ping\r\r");
    CHECK_EQ_INT(sse_open_bytes(&p), 0);
    FEED("data: d\n\n");
    CHECK_EQ_INT(sse_open_bytes(&p), 0);
    FEED("data: e\r\n\r"); /* the blank line's LF comes in the next feed (found by fuzz_sse) */
    CHECK_EQ_INT(sse_open_bytes(&p), 0);
    FEED("\n");
    CHECK_EQ_INT(sse_open_bytes(&p), 0);
    FEED("data: f\r");
    FEED("\ndata: g\n");
    CHECK_EQ_INT(sse_open_bytes(&p), 17);
#undef FEED
    sse_free(&p);
}

/* Each event's start, whatever the feed's pieces: the offset just after
 * the blank line before it (CRLF and CR ends, a CRLF split across feeds). */
typedef struct starts {
    sse_parser *p;
    int n;
    size_t at[8];
} starts;

static void note_start(void *ud, const char *event, const char *data, size_t len)
{
    (void)event, (void)data, (void)len;
    starts *s = ud;
    if (s->n < 8)
        s->at[s->n++] = sse_event_start(s->p);
}

static void test_event_start_is_the_offset_after_the_previous_blank_line(void)
{
    const char *in = "data: a\n\n: ping\n\nevent: e\r\ndata: bb\r\n\r\ndata: c\r\rdata: d\n\n";
    size_t n = strlen(in);
    for (size_t step = 1; step <= n; step++) {
        sse_parser p;
        starts s = {.p = &p};
        sse_init(&p, note_start, &s);
        for (size_t i = 0; i < n; i += step)
            sse_feed(&p, in + i, n - i < step ? n - i : step);
        CHECK_EQ_INT(s.n, 4);
        CHECK_EQ_INT(s.at[0], 0);
        CHECK_EQ_INT(s.at[1], 17); /* after ": ping" and its own blank line */
        CHECK_EQ_INT(s.at[2], strstr(in, "data: c") - in);
        CHECK_EQ_INT(s.at[3], strstr(in, "data: d") - in);
        CHECK_EQ_INT(p.fed, n);
        sse_free(&p);
    }
}

int main(void)
{
    RUN(test_single_event_with_name);
    RUN(test_overlong_line_dropped_and_parsing_resumes);
    RUN(test_event_without_name_has_empty_name);
    RUN(test_crlf_and_cr_line_ends);
    RUN(test_crlf_split_across_feeds);
    RUN(test_empty_feed_keeps_pending_cr);
    RUN(test_multiple_data_lines_joined_with_newline);
    RUN(test_one_leading_space_stripped);
    RUN(test_comment_lines_ignored);
    RUN(test_id_retry_and_unknown_fields_ignored);
    RUN(test_blank_line_without_data_dispatches_nothing);
    RUN(test_event_name_reset_after_dispatch);
    RUN(test_empty_data_still_dispatches);
    RUN(test_last_event_name_wins);
    RUN(test_incomplete_event_waits_for_blank_line);
    RUN(test_bytes_split_one_at_a_time_same_result);
    RUN(test_long_line_split_across_many_feeds);
    RUN(test_event_of_many_data_lines_is_capped);
    RUN(test_open_bytes_track_the_unfinished_event);
    RUN(test_event_start_is_the_offset_after_the_previous_blank_line);
    return check_summary();
}
