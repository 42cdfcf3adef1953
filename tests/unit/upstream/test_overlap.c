/* test_overlap.c: a continuation's repeat of the delivered text taken out:
 * the longest end of the delivered text it begins with, across deltas and
 * feeds cut anywhere; a short coincidence left alone; a whole restart taken
 * out; events without text passing in order; both dialects. */
#include "check.h"
#include "upstream/overlap.h"
#include "base/json.h"
#include <stdlib.h>

static void chat_delta(sbuf *b, const char *text)
{
    sbuf_puts(b, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":");
    sbuf_json_str(b, text, strlen(text));
    sbuf_puts(b, "}}]}\n\n");
}

static void rsp_delta(sbuf *b, const char *text)
{
    sbuf_puts(b, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"m\","
                 "\"delta\":");
    sbuf_json_str(b, text, strlen(text));
    sbuf_puts(b, "}\n\n");
}

/* The text of every delta in out, concatenated, and how many events. */
static void text_of(api_kind api, const sbuf *out, sbuf *text, int *events)
{
    *events = 0;
    for (const char *p = out->p; p && (p = strstr(p, "data: ")); p += 6) {
        const char *e = strchr(p, '\n');
        json_value *v = json_parse(p + 6, (size_t)(e - p - 6), NULL, 0);
        (*events)++;
        const json_value *t = NULL;
        if (api == API_CHAT) {
            const json_value *c = json_at(json_get(v, "choices"), 0);
            t = json_get(json_get(c, "delta"), "content");
        } else if (json_get_str(v, "type") && !strcmp(json_get_str(v, "type"), "response.output_text.delta")) {
            t = json_get(v, "delta");
        }
        if (t && t->type == JSON_STRING)
            sbuf_append(text, t->str, t->str_len);
        json_free(v);
    }
}

/* Feeds the continuation in pieces of step bytes (0: whole), then ends it;
 * returns the text the client gets after `delivered`. */
static size_t run(api_kind api, const char *delivered, const char *const *deltas, size_t step, sbuf *text,
                  int *events)
{
    sbuf in = SBUF_INIT, out = SBUF_INIT;
    if (api == API_CHAT)
        sbuf_puts(&in, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n");
    else
        sbuf_puts(&in, "event: response.created\ndata: {\"type\":\"response.created\"}\n\n");
    for (size_t i = 0; deltas[i]; i++)
        (api == API_CHAT ? chat_delta : rsp_delta)(&in, deltas[i]);
    if (api == API_CHAT)
        sbuf_puts(&in, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
                       "data: [DONE]\n\n");
    overlap_trim t;
    overlap_init(&t, api, delivered, strlen(delivered));
    if (!step)
        step = in.len;
    for (size_t i = 0; i < in.len; i += step)
        overlap_feed(&t, in.p + i, in.len - i < step ? in.len - i : step, &out);
    overlap_end(&t, &out);
    size_t removed = t.removed;
    overlap_free(&t);
    sbuf_reset(text);
    text_of(api, &out, text, events);
    sbuf_free(&in);
    sbuf_free(&out);
    return removed;
}

static void test_suffix_prefix_is_the_longest_end_of_a_that_starts_b(void)
{
    CHECK_EQ_INT(overlap_suffix_prefix("hello world", 11, "world peace", 11), 5);
    CHECK_EQ_INT(overlap_suffix_prefix("abcab", 5, "abcabd", 6), 5);
    CHECK_EQ_INT(overlap_suffix_prefix("aaaa", 4, "aaab", 4), 3);
    CHECK_EQ_INT(overlap_suffix_prefix("abc", 3, "xyz", 3), 0);
    CHECK_EQ_INT(overlap_suffix_prefix("", 0, "x", 1), 0);
    CHECK_EQ_INT(overlap_suffix_prefix("ab", 2, "abab", 4), 2);
}

static void test_a_restart_of_the_whole_answer_is_taken_out_across_deltas_and_cuts(void)
{
    const char *deltas[] = {"hel", "lo fr", "om b", NULL};
    sbuf text = SBUF_INIT;
    int events;
    for (int api = 0; api < 2; api++)
        for (size_t step = 0; step < 40; step += 7) {
            CHECK_EQ_INT(run((api_kind)api, "hello from", deltas, step, &text, &events), 10);
            CHECK_EQ_STR(text.p, " b");
        }
    sbuf_free(&text);
}

static void test_a_long_repeat_of_the_end_is_taken_out(void)
{
    const char *deltas[] = {"the quick brown fox ", "jumps over the lazy dog", NULL};
    sbuf text = SBUF_INIT;
    int events;
    CHECK_EQ_INT(run(API_RESPONSES, "I said: the quick brown fox ", deltas, 0, &text, &events), 20);
    CHECK_EQ_STR(text.p, "jumps over the lazy dog");
    sbuf_free(&text);
}

static void test_a_short_coincidence_is_new_text(void)
{
    /* "the " ends the delivered text and starts the continuation: not a repeat the client could tell */
    const char *deltas[] = {"the ", "end", NULL};
    sbuf text = SBUF_INIT;
    int events;
    CHECK_EQ_INT(run(API_CHAT, "and then the ", deltas, 0, &text, &events), 0);
    CHECK_EQ_STR(text.p, "the end");
    sbuf_free(&text);
}

static void test_a_true_continuation_passes_whole_and_every_event_stays(void)
{
    const char *deltas[] = {" and", " more", NULL};
    sbuf text = SBUF_INIT;
    int events;
    CHECK_EQ_INT(run(API_CHAT, "hello from", deltas, 3, &text, &events), 0);
    CHECK_EQ_STR(text.p, " and more");
    CHECK_EQ_INT(events, 5); /* role, two deltas, finish, [DONE] */
    sbuf_free(&text);
}

static void test_a_delta_all_repeat_is_dropped_and_unicode_is_cut_whole(void)
{
    const char *deltas[] = {"héllo wörld, ", "héllo", " wörld, and on", NULL};
    sbuf text = SBUF_INIT;
    int events;
    CHECK_EQ_INT(run(API_RESPONSES, "héllo wörld, héllo wörld, ", deltas, 1, &text, &events),
                 (long)strlen("héllo wörld, héllo wörld, "));
    CHECK_EQ_STR(text.p, "and on");
    CHECK_EQ_INT(events, 2); /* response.created and the one delta left */
    sbuf_free(&text);
}

int main(void)
{
    RUN(test_suffix_prefix_is_the_longest_end_of_a_that_starts_b);
    RUN(test_a_restart_of_the_whole_answer_is_taken_out_across_deltas_and_cuts);
    RUN(test_a_long_repeat_of_the_end_is_taken_out);
    RUN(test_a_short_coincidence_is_new_text);
    RUN(test_a_true_continuation_passes_whole_and_every_event_stays);
    RUN(test_a_delta_all_repeat_is_dropped_and_unicode_is_cut_whole);
    return check_summary();
}
