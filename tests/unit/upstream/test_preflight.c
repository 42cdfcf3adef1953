/* test_preflight.c: the hold/commit/error decision on upstream SSE streams,
 * for the Responses API and Chat Completions: what commits, what is an error
 * before output (fail over) or after it (late_error), the held bytes at each
 * step, usage/id capture, the byte window, and split-anywhere feeding. */
#include "check.h"
#include "upstream/preflight.h"
#include <stdlib.h>

#define WINDOW (64u << 10)

#define CREATED "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"model\":\"gpt-5\",\"status\":\"in_progress\"}}\n\n"
#define IN_PROGRESS "event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"response\":{\"id\":\"resp_1\",\"model\":\"gpt-5\"}}\n\n"
#define TEXT_DELTA "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n"
#define QUOTA_ERROR "{\"type\":\"error\",\"error\":{\"type\":\"usage_limit_reached\",\"code\":\"usage_limit_reached\",\"message\":\"You've hit your usage limit.\",\"resets_in_seconds\":120}}"
#define COMPLETED "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"model\":\"gpt-5\",\"usage\":{\"input_tokens\":11,\"output_tokens\":7,\"total_tokens\":18}}}\n\n"

static pf_state feed(preflight *pf, const char *s) { return preflight_feed(pf, s, strlen(s)); }

/* Feeds s one byte at a time and returns the final state. */
static pf_state feed_bytes(preflight *pf, const char *s)
{
    pf_state st = pf->state;
    for (size_t i = 0; s[i]; i++)
        st = preflight_feed(pf, s + i, 1);
    return st;
}

static void test_initial_state_holds_with_unknown_usage(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    CHECK_EQ_INT(pf.state, PF_HOLD);
    CHECK_EQ_INT(pf.input_tokens, -1);
    CHECK_EQ_INT(pf.output_tokens, -1);
    CHECK_EQ_INT(pf.total_tokens, -1);
    CHECK_EQ_INT(pf.max_bytes, WINDOW);
    preflight_free(&pf);
}

static void test_created_and_in_progress_hold_and_give_id(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    CHECK_EQ_INT(feed(&pf, CREATED), PF_HOLD);
    CHECK_EQ_INT(feed(&pf, IN_PROGRESS), PF_HOLD);
    CHECK_EQ_STR(pf.response_id, "resp_1");
    CHECK_EQ_STR(pf.model, "gpt-5");
    CHECK_EQ_STR(pf.held.p, CREATED IN_PROGRESS);
    CHECK_EQ_INT(pf.events, 2);
    CHECK_EQ_INT(pf.saw_semantic, 0);
    preflight_free(&pf);
}

static void test_text_delta_commits(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    feed(&pf, CREATED);
    CHECK_EQ_INT(feed(&pf, TEXT_DELTA), PF_COMMIT);
    CHECK_EQ_INT(pf.saw_semantic, 1);
    CHECK_EQ_INT(pf.saw_terminal, 0);
    CHECK_EQ_STR(pf.held.p, CREATED TEXT_DELTA);
    preflight_free(&pf);
}

static void test_other_delta_kinds_commit(void)
{
    static const char *const kinds[] = {
        "response.function_call_arguments.delta", "response.reasoning_summary_text.delta",
        "response.refusal.delta", "response.audio.transcript.delta",
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        preflight pf;
        preflight_init(&pf, API_RESPONSES, WINDOW);
        char ev[256];
        snprintf(ev, sizeof ev, "event: %s\ndata: {\"type\":\"%s\",\"delta\":\"x\"}\n\n", kinds[i], kinds[i]);
        CHECK_EQ_INT(feed(&pf, ev), PF_COMMIT);
        preflight_free(&pf);
    }
}

static void test_non_output_events_hold(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    feed(&pf, "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"reasoning\",\"id\":\"rs_1\"}}\n\n");
    feed(&pf, "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"reasoning\",\"summary\":[]}}\n\n");
    feed(&pf, "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"message\",\"content\":[]}}\n\n");
    feed(&pf, "event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"part\":{\"type\":\"output_text\",\"text\":\"\"}}\n\n");
    feed(&pf, ": keep-alive\n\n");
    CHECK_EQ_INT(pf.state, PF_HOLD);
    CHECK_EQ_INT(pf.saw_semantic, 0);
    preflight_free(&pf);
}

static void test_function_call_item_added_commits(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    CHECK_EQ_INT(feed(&pf, "data: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"function_call\",\"name\":\"f\"}}\n\n"), PF_COMMIT);
    preflight_free(&pf);
}

static void test_tool_call_item_done_commits(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    CHECK_EQ_INT(feed(&pf, "data: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"web_search_call\"}}\n\n"), PF_COMMIT);
    preflight_free(&pf);
}

static void test_message_item_done_with_content_commits(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    CHECK_EQ_INT(feed(&pf, "data: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"message\",\"content\":[]}}\n\n"), PF_HOLD);
    CHECK_EQ_INT(feed(&pf, "data: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hi\"}]}}\n\n"), PF_COMMIT);
    preflight_free(&pf);
}

static void test_usage_parsed_from_response_completed(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    feed(&pf, CREATED TEXT_DELTA);
    sbuf_reset(&pf.held);
    CHECK_EQ_INT(feed(&pf, COMPLETED), PF_COMMIT);
    CHECK_EQ_INT(pf.saw_terminal, 1);
    CHECK_EQ_INT(pf.input_tokens, 11);
    CHECK_EQ_INT(pf.output_tokens, 7);
    CHECK_EQ_INT(pf.total_tokens, 18);
    CHECK_EQ_STR(pf.response_id, "resp_1");
    CHECK_EQ_STR(pf.held.p, COMPLETED);
    CHECK_EQ_INT(pf.late_error, 0);
    preflight_free(&pf);
}

static void test_completed_without_output_commits_as_terminal(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    feed(&pf, CREATED);
    CHECK_EQ_INT(feed(&pf, "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"id\":\"resp_1\",\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n"), PF_COMMIT);
    CHECK_EQ_INT(pf.saw_terminal, 1);
    CHECK_EQ_INT(pf.saw_semantic, 0);
    CHECK_EQ_INT(pf.input_tokens, 3);
    CHECK_EQ_INT(pf.output_tokens, 0);
    CHECK_EQ_INT(pf.total_tokens, 3); /* derived when the upstream omits it */
    preflight_free(&pf);
}

static void test_quota_error_event_before_output_is_error(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    feed(&pf, CREATED);
    CHECK_EQ_INT(feed(&pf, "event: error\ndata: " QUOTA_ERROR "\n\n"), PF_ERROR);
    CHECK_EQ_STR(pf.error_type, "usage_limit_reached");
    CHECK_EQ_STR(pf.error_code, "usage_limit_reached");
    CHECK_EQ_STR(pf.error_message.p, "You've hit your usage limit.");
    CHECK_EQ_STR(pf.error_body.p, QUOTA_ERROR);
    CHECK_EQ_INT(pf.late_error, 0);
    CHECK_EQ_INT(pf.saw_semantic, 0);
    preflight_free(&pf);
}

static void test_error_type_with_fields_on_top_level(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    CHECK_EQ_INT(feed(&pf, "data: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"Slow down\",\"param\":null}\n\n"), PF_ERROR);
    CHECK_EQ_STR(pf.error_code, "rate_limit_exceeded");
    CHECK_EQ_STR(pf.error_message.p, "Slow down");
    CHECK_EQ_STR(pf.error_type, ""); /* "error" is the event kind, not an error type */
    preflight_free(&pf);
}

static void test_response_failed_before_output_is_error(void)
{
    const char *data = "{\"type\":\"response.failed\",\"response\":{\"id\":\"resp_9\",\"status\":\"failed\","
                       "\"error\":{\"code\":\"server_error\",\"message\":\"The server had an error\"}}}";
    char ev[512];
    snprintf(ev, sizeof ev, "event: response.failed\ndata: %s\n\n", data);
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    CHECK_EQ_INT(feed(&pf, ev), PF_ERROR);
    CHECK_EQ_STR(pf.error_code, "server_error");
    CHECK_EQ_STR(pf.error_message.p, "The server had an error");
    CHECK_EQ_STR(pf.error_body.p, data);
    CHECK_EQ_STR(pf.response_id, "resp_9");
    preflight_free(&pf);
}

static void test_sse_error_event_with_plain_text_is_error(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    CHECK_EQ_INT(feed(&pf, "event: error\ndata: quota exceeded\n\n"), PF_ERROR);
    CHECK_EQ_STR(pf.error_body.p, "quota exceeded");
    CHECK_EQ_INT(pf.error_message.len, 0);
    CHECK_EQ_STR(pf.error_code, "");
    preflight_free(&pf);
}

static void test_error_after_commit_sets_late_error(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    feed(&pf, CREATED TEXT_DELTA);
    sbuf_reset(&pf.held);
    const char *err = "event: error\ndata: " QUOTA_ERROR "\n\n";
    CHECK_EQ_INT(feed(&pf, err), PF_COMMIT);
    CHECK_EQ_INT(pf.late_error, 1);
    CHECK_EQ_STR(pf.error_code, "usage_limit_reached");
    CHECK_EQ_STR(pf.held.p, err); /* still forwarded: the client already has output */
    /* a second late error does not overwrite the first */
    CHECK_EQ_INT(feed(&pf, "data: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"other\"}}}\n\n"), PF_COMMIT);
    CHECK_EQ_STR(pf.error_code, "usage_limit_reached");
    CHECK_EQ_INT(pf.saw_terminal, 0);
    preflight_free(&pf);
}

static void test_error_before_output_in_same_chunk_wins(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    CHECK_EQ_INT(feed(&pf, CREATED "event: error\ndata: " QUOTA_ERROR "\n\n" TEXT_DELTA), PF_ERROR);
    CHECK_EQ_INT(pf.saw_semantic, 0);
    preflight_free(&pf);
    preflight_init(&pf, API_RESPONSES, WINDOW);
    CHECK_EQ_INT(feed(&pf, CREATED TEXT_DELTA "event: error\ndata: " QUOTA_ERROR "\n\n"), PF_COMMIT);
    CHECK_EQ_INT(pf.late_error, 1);
    preflight_free(&pf);
}

static void test_feed_after_error_is_noop(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    feed(&pf, "event: error\ndata: " QUOTA_ERROR "\n\n");
    size_t held = pf.held.len;
    long events = pf.events;
    CHECK_EQ_INT(feed(&pf, TEXT_DELTA COMPLETED), PF_ERROR);
    CHECK_EQ_INT(pf.held.len, held);
    CHECK_EQ_INT(pf.events, events);
    CHECK_EQ_INT(pf.saw_semantic, 0);
    CHECK_EQ_INT(pf.input_tokens, -1);
    preflight_commit(&pf); /* no-op too */
    CHECK_EQ_INT(pf.state, PF_ERROR);
    preflight_free(&pf);
}

static void test_non_json_data_before_commit_is_not_error(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    CHECK_EQ_INT(feed(&pf, "data: hello there\n\ndata: [1,2]\n\ndata: \"error\"\n\ndata: {\"error\":null}\n\n"), PF_HOLD);
    CHECK_EQ_INT(pf.events, 4);
    preflight_free(&pf);
}

static void test_commit_held_includes_partial_trailing_bytes(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    const char *chunk = CREATED TEXT_DELTA "event: response.output_te";
    CHECK_EQ_INT(feed(&pf, chunk), PF_COMMIT);
    CHECK_EQ_STR(pf.held.p, chunk);
    sbuf_reset(&pf.held);
    feed(&pf, "xt.delta\n");
    CHECK_EQ_STR(pf.held.p, "xt.delta\n"); /* after commit: only what is new since the drain */
    preflight_free(&pf);
}

static void test_window_bytes_commit(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, 100);
    char pad[101];
    memset(pad, 'x', 97);
    pad[0] = ':';
    pad[97] = '\n';
    pad[98] = '\n';
    pad[99] = '\0'; /* 99 bytes: a comment and a blank line */
    CHECK_EQ_INT(feed(&pf, pad), PF_HOLD);
    CHECK_EQ_INT(feed(&pf, ":"), PF_HOLD); /* exactly max_bytes: still within */
    CHECK_EQ_INT(pf.held.len, 100);
    CHECK_EQ_INT(feed(&pf, "x"), PF_COMMIT);
    CHECK_EQ_INT(pf.held.len, 101);
    CHECK_EQ_INT(pf.saw_semantic, 0);
    preflight_free(&pf);
}

static void test_big_created_event_commits_on_window(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, 64);
    CHECK_EQ_INT(feed(&pf, CREATED), PF_COMMIT);
    CHECK_EQ_STR(pf.held.p, CREATED);
    CHECK_EQ_STR(pf.response_id, "resp_1");
    preflight_free(&pf);
}

static void test_forced_commit_moves_hold_to_commit(void)
{
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    feed(&pf, CREATED);
    preflight_commit(&pf);
    CHECK_EQ_INT(pf.state, PF_COMMIT);
    CHECK_EQ_STR(pf.held.p, CREATED);
    CHECK_EQ_INT(feed(&pf, "event: error\ndata: " QUOTA_ERROR "\n\n"), PF_COMMIT);
    CHECK_EQ_INT(pf.late_error, 1);
    preflight_free(&pf);
}

/* Same stream whole, byte by byte and in 5-byte pieces with CRLF line ends. */
static void test_bytes_split_one_at_a_time_same_result(void)
{
    const char *stream = CREATED IN_PROGRESS TEXT_DELTA COMPLETED;
    preflight a, b;
    preflight_init(&a, API_RESPONSES, WINDOW);
    preflight_init(&b, API_RESPONSES, WINDOW);
    feed(&a, stream);
    /* byte by byte: the state must flip exactly on the delta's blank line */
    size_t commit_at = strlen(CREATED IN_PROGRESS TEXT_DELTA) - 1;
    for (size_t i = 0; stream[i]; i++) {
        pf_state st = preflight_feed(&b, stream + i, 1);
        if (i == commit_at - 1)
            CHECK_EQ_INT(st, PF_HOLD);
        if (i == commit_at) {
            CHECK_EQ_INT(st, PF_COMMIT);
            CHECK_EQ_INT(b.held.len, commit_at + 1);
        }
    }
    CHECK_EQ_INT(b.state, a.state);
    CHECK_EQ_INT(b.saw_terminal, 1);
    CHECK_EQ_INT(b.events, a.events);
    CHECK_EQ_INT(b.total_tokens, a.total_tokens);
    CHECK_EQ_STR(b.response_id, a.response_id);
    CHECK_EQ_STR(b.held.p, a.held.p);
    preflight_free(&a);
    preflight_free(&b);

    /* an error stream split byte by byte still ends in PF_ERROR with the fields */
    preflight c;
    preflight_init(&c, API_RESPONSES, WINDOW);
    CHECK_EQ_INT(feed_bytes(&c, "event: response.created\r\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\"}}\r\n\r\n"
                                "event: error\r\ndata: " QUOTA_ERROR "\r\n\r\n" TEXT_DELTA), PF_ERROR);
    CHECK_EQ_STR(c.error_code, "usage_limit_reached");
    CHECK_EQ_STR(c.error_body.p, QUOTA_ERROR);
    preflight_free(&c);
}

/* ---------- Chat Completions ---------- */

#define CHAT_ROLE "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"
#define CHAT_TEXT "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}\n\n"
#define CHAT_STOP "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
#define CHAT_USAGE "data: {\"id\":\"chatcmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}\n\n"

static void test_chat_role_chunk_not_semantic(void)
{
    preflight pf;
    preflight_init(&pf, API_CHAT, WINDOW);
    CHECK_EQ_INT(feed(&pf, CHAT_ROLE), PF_HOLD);
    CHECK_EQ_INT(pf.saw_semantic, 0);
    CHECK_EQ_STR(pf.model, "gpt-4o");
    CHECK_EQ_STR(pf.response_id, ""); /* chat ids are not response ids */
    preflight_free(&pf);
}

static void test_chat_content_delta_commits(void)
{
    preflight pf;
    preflight_init(&pf, API_CHAT, WINDOW);
    feed(&pf, CHAT_ROLE);
    CHECK_EQ_INT(feed(&pf, CHAT_TEXT), PF_COMMIT);
    CHECK_EQ_STR(pf.held.p, CHAT_ROLE CHAT_TEXT);
    CHECK_EQ_INT(pf.saw_terminal, 0);
    preflight_free(&pf);
}

static void test_chat_tool_call_refusal_and_function_call_commit(void)
{
    static const char *const deltas[] = {
        "{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}",
        "{\"function_call\":{\"name\":\"f\"}}",
        "{\"refusal\":\"no\"}",
    };
    for (size_t i = 0; i < sizeof deltas / sizeof deltas[0]; i++) {
        preflight pf;
        preflight_init(&pf, API_CHAT, WINDOW);
        char ev[256];
        snprintf(ev, sizeof ev, "data: {\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", deltas[i]);
        CHECK_EQ_INT(feed(&pf, ev), PF_COMMIT);
        preflight_free(&pf);
    }
}

static void test_chat_empty_fields_not_semantic(void)
{
    preflight pf;
    preflight_init(&pf, API_CHAT, WINDOW);
    feed(&pf, "data: {\"choices\":[{\"delta\":{\"content\":null,\"tool_calls\":[],\"refusal\":null,\"function_call\":null},\"finish_reason\":null}]}\n\n");
    feed(&pf, "data: {\"choices\":[]}\n\n");
    CHECK_EQ_INT(pf.state, PF_HOLD);
    preflight_free(&pf);
}

static void test_chat_finish_reason_commits_and_is_terminal(void)
{
    preflight pf;
    preflight_init(&pf, API_CHAT, WINDOW);
    feed(&pf, CHAT_ROLE);
    CHECK_EQ_INT(feed(&pf, CHAT_STOP), PF_COMMIT);
    CHECK_EQ_INT(pf.saw_terminal, 1);
    CHECK_EQ_INT(pf.saw_semantic, 1);
    preflight_free(&pf);
}

static void test_chat_done_is_terminal(void)
{
    preflight pf;
    preflight_init(&pf, API_CHAT, WINDOW);
    feed(&pf, CHAT_ROLE);
    CHECK_EQ_INT(feed(&pf, "data: [DONE]\n\n"), PF_COMMIT);
    CHECK_EQ_INT(pf.saw_terminal, 1);
    preflight_free(&pf);
}

static void test_chat_usage_chunk_parsed(void)
{
    preflight pf;
    preflight_init(&pf, API_CHAT, WINDOW);
    feed(&pf, CHAT_ROLE CHAT_TEXT CHAT_STOP CHAT_USAGE "data: [DONE]\n\n");
    CHECK_EQ_INT(pf.state, PF_COMMIT);
    CHECK_EQ_INT(pf.input_tokens, 5);
    CHECK_EQ_INT(pf.output_tokens, 2);
    CHECK_EQ_INT(pf.total_tokens, 7);
    CHECK_EQ_INT(pf.events, 5);
    preflight_free(&pf);
}

static void test_chat_error_object_before_output_is_error(void)
{
    const char *data = "{\"error\":{\"message\":\"Rate limit reached\",\"type\":\"rate_limit_error\",\"code\":\"rate_limit_exceeded\"}}";
    char ev[256];
    snprintf(ev, sizeof ev, "data: %s\n\n", data);
    preflight pf;
    preflight_init(&pf, API_CHAT, WINDOW);
    feed(&pf, CHAT_ROLE);
    CHECK_EQ_INT(feed(&pf, ev), PF_ERROR);
    CHECK_EQ_STR(pf.error_type, "rate_limit_error");
    CHECK_EQ_STR(pf.error_code, "rate_limit_exceeded");
    CHECK_EQ_STR(pf.error_message.p, "Rate limit reached");
    CHECK_EQ_STR(pf.error_body.p, data);
    preflight_free(&pf);
}

static void test_chat_error_string_is_error(void)
{
    preflight pf;
    preflight_init(&pf, API_CHAT, WINDOW);
    CHECK_EQ_INT(feed(&pf, "data: {\"error\":\"insufficient_quota\"}\n\n"), PF_ERROR);
    CHECK_EQ_STR(pf.error_message.p, "insufficient_quota");
    preflight_free(&pf);
}

static void test_chat_error_after_content_sets_late_error(void)
{
    preflight pf;
    preflight_init(&pf, API_CHAT, WINDOW);
    feed(&pf, CHAT_ROLE CHAT_TEXT);
    CHECK_EQ_INT(feed(&pf, "data: {\"error\":{\"message\":\"boom\",\"code\":500}}\n\n"), PF_COMMIT);
    CHECK_EQ_INT(pf.late_error, 1);
    CHECK_EQ_STR(pf.error_code, "500"); /* numeric codes are kept as text */
    CHECK_EQ_INT(pf.saw_terminal, 0);
    preflight_free(&pf);
}

static void test_long_error_fields_truncated(void)
{
    sbuf ev = SBUF_INIT;
    sbuf_puts(&ev, "data: {\"error\":{\"code\":\"");
    for (int i = 0; i < 200; i++)
        sbuf_puts(&ev, "c");
    sbuf_puts(&ev, "\",\"type\":\"t\"}}\n\n");
    preflight pf;
    preflight_init(&pf, API_CHAT, WINDOW);
    CHECK_EQ_INT(preflight_feed(&pf, ev.p, ev.len), PF_ERROR);
    CHECK_EQ_INT(strlen(pf.error_code), sizeof pf.error_code - 1);
    CHECK_EQ_STR(pf.error_type, "t");
    preflight_free(&pf);
    sbuf_free(&ev);
}

/* keep_text (stream resume): the chat text of choice 0 is kept, after
 * commit too; a tool call is noted; without keep_text nothing is kept. */
static void test_keep_text_collects_chat_content_and_notes_tool_calls(void)
{
    static const char s[] =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\n\n"
        "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"other\"}}]}\n\n";
    for (int keep = 0; keep < 2; keep++) {
        preflight pf;
        preflight_init(&pf, API_CHAT, WINDOW);
        pf.keep_text = keep;
        CHECK_EQ_INT(preflight_feed(&pf, s, sizeof s - 1), PF_COMMIT);
        CHECK_EQ_STR(pf.text.p ? pf.text.p : "", keep ? "Hello" : "");
        CHECK_EQ_INT(pf.saw_tool_call, 0);
        static const char tool[] = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0}]}}]}\n\n";
        preflight_feed(&pf, tool, sizeof tool - 1);
        CHECK_EQ_INT(pf.saw_tool_call, keep);
        preflight_free(&pf);
    }
}

/* keep_text on a Responses stream: resumable only while one message's
 * text is being written and nothing else is open. */
static int rsp_resumable_after(const char *extra)
{
    static const char head[] =
        "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\"}}\n\n"
        "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,"
        "\"output_index\":0,\"item\":{\"id\":\"rs_1\",\"type\":\"reasoning\"}}\n\n"
        "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":2,"
        "\"output_index\":0,\"item\":{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[]}}\n\n"
        "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":3,"
        "\"output_index\":1,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[]}}\n\n"
        "event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"sequence_number\":4,"
        "\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"\"}}\n\n"
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":5,"
        "\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"delta\":\"Hel\"}\n\n";
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    pf.keep_text = 1;
    preflight_feed(&pf, head, sizeof head - 1);
    preflight_feed(&pf, extra, strlen(extra));
    int ok = preflight_rsp_resumable(&pf);
    if (!*extra) {
        CHECK_EQ_STR(pf.text.p, "Hel");
        CHECK_EQ_STR(pf.rsp_item_id, "msg_1");
        CHECK_EQ_INT(pf.rsp_output_index, 1);
        CHECK_EQ_INT(pf.rsp_seq, 5);
        CHECK_EQ_STR(pf.rsp_done_items.p, "{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[]}");
    }
    preflight_free(&pf);
    return ok;
}

static void test_responses_keep_text_is_resumable_only_while_one_message_is_being_written(void)
{
    CHECK_EQ_INT(rsp_resumable_after(""), 1);
    CHECK_EQ_INT(rsp_resumable_after("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\","
                                     "\"sequence_number\":6,\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,"
                                     "\"delta\":\"lo\"}\n\n"), 1);
    /* the text finished: nothing to continue */
    CHECK_EQ_INT(rsp_resumable_after("data: {\"type\":\"response.output_text.done\",\"item_id\":\"msg_1\","
                                     "\"output_index\":1,\"content_index\":0,\"text\":\"Hel\"}\n\n"), 0);
    /* a tool call in flight */
    CHECK_EQ_INT(rsp_resumable_after("data: {\"type\":\"response.output_item.added\",\"output_index\":2,"
                                     "\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\"}}\n\n"), 0);
    /* a refusal in the message */
    CHECK_EQ_INT(rsp_resumable_after("data: {\"type\":\"response.refusal.delta\",\"item_id\":\"msg_1\","
                                     "\"output_index\":1,\"content_index\":1,\"delta\":\"no\"}\n\n"), 0);
    /* bookkeeping that names no item changes nothing */
    CHECK_EQ_INT(rsp_resumable_after("data: {\"type\":\"response.in_progress\",\"response\":{\"id\":\"resp_1\"}}\n\n"), 1);
}

static void test_responses_keep_text_is_not_resumable_while_reasoning_is_open_or_without_text(void)
{
    static const char s[] =
        "data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"rs_1\",\"type\":\"reasoning\"}}\n\n"
        "data: {\"type\":\"response.reasoning_summary_text.delta\",\"item_id\":\"rs_1\",\"output_index\":0,\"delta\":\"x\"}\n\n";
    preflight pf;
    preflight_init(&pf, API_RESPONSES, WINDOW);
    pf.keep_text = 1;
    preflight_feed(&pf, s, sizeof s - 1);
    CHECK_EQ_INT(pf.rsp_unsafe, 0);
    CHECK_EQ_INT(preflight_rsp_resumable(&pf), 0); /* reasoning open, no text */
    preflight_free(&pf);
}

/* Chat chunks are read without a JSON tree (pf_chat_scan); with tree_only
 * every chunk goes through the tree. Both must reach the same verdict, and
 * keep the same text, on each of these, one event at a time from a fresh
 * watcher (with keep_text, as a stream resume reads them). */
static void test_chat_chunks_read_without_a_tree_match_the_tree(void)
{
    static const char *const events[] = {
        "{\"model\":\"m1\",\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"model\":\"m2\"}",
        "{\"choices\":[{\"delta\":{\"content\":\"hi\",\"content\":\"\"}}]}",          /* the last content counts */
        "{\"choices\":[{\"delta\":{\"content\":\"\",\"content\":\"hi\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"hi\"},\"delta\":{}}]}",               /* the last delta counts */
        "{\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"choices\":[]}",             /* the last choices count */
        "{\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"choices\":{\"a\":1}}",
        "{\"choices\":{\"a\":1},\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}",
        "{\"choices\":[5,\"x\",null,{\"delta\":{\"tool_calls\":[ ]}},{\"delta\":{\"tool_calls\":[{}]}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":{ }}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":\"\"}}]}",                           /* present, if odd */
        "{\"choices\":[{\"delta\":{\"function_call\":null,\"refusal\":\"\"}}]}",
        "{\"choices\":[{\"delta\":{\"refusal\":\"no\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":7}}]}",
        "{\"choices\":[{\"delta\":\"text\",\"finish_reason\":null}]}",
        "{\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}",
        "{\"choices\":[{\"finish_reason\":\"stop\",\"finish_reason\":null}]}",
        "{\"choices\":[{\"finish_reason\":0}]}",
        "{\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":1}}}",
        "{\"usage\":{\"prompt_tokens\":5},\"usage\":null}",
        "{\"usage\":{\"prompt_tokens\":1e400}}",                                       /* invalid: nothing */
        "{\"usage\":{\"input_tokens\":5,\"prompt_tokens\":9,\"output_tokens\":\"x\",\"completion_tokens\":2}}",
        "{\"usage\":{\"prompt_tokens\":-3,\"completion_tokens\":-0,\"total_tokens\":7.5}}",
        "{\"usage\":{\"prompt_tokens\":1e3,\"completion_tokens\":2E0}}",
        "{\"usage\":{\"prompt_tokens\":123456789012345,\"completion_tokens\":1234567890123456}}",
        "{\"usage\":{\"prompt_tokens\":1,\"input_tokens_details\":null,\"prompt_tokens_details\":{\"cached_tokens\":1}}}",
        "{\"usage\":{\"prompt_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":4,\"cached_tokens\":\"x\"}}}",
        "{\"usage\":{\"prompt_tokens\":1,\"prompt_tokens_details\":{\"audio_tokens\":0,\"cached_tokens\":4}}}",
        "{\"usage\":{\"input_tokens\":1,\"input_tokens_details\":{\"cached_tokens\":1},\"input_tokens_details\":[1]}}",
        "{\"usage\":{\"prompt_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":4}},\"usage\":{\"prompt_tokens\":2}}",
        "{\"usage\":{\"prompt_tokens\":1},\"usage\":[]}",
        "{\"usage\":{\"total_tokens\":3,\"input_tokens\":999999999999999,\"output_tokens\":999999999999999}}",
        "{\"choices\":[{\"delta\":{\"content\":\"caf\xc3\xa9 \\u00e9\\n\\\"\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"\xc3\"}}]}",                          /* invalid UTF-8 */
        "{\"choices\":[{\"delta\":{\"content\":\"hi\"}}]} x",                          /* trailing bytes */
        "{\"choices\":[{\"delta\":{\"content\":\"hi\"}}],}",
        " \t{ \"choices\" : [ { \"delta\" : { \"content\" : \"hi\" } } ] } ",
        "{\"mod\\u0065l\":\"esc\",\"choices\":[{\"delta\":{\"cont\\u0065nt\":\"hi\"}}]}",
        "{\"model\":\"a\\\"b\",\"choices\":[]}",
        "{\"model\":5}",
        "{\"model\":\"" "0123456789012345678901234567890123456789012345678901234567890123456789"
        "0123456789012345678901234567890123456789012345678901234567890123456789\"}",
        "{\"error\":null,\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}",
        "{\"error\":{\"message\":\"quota\"}}",
        "{\"type\":5,\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}",
        "[{\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}]",
        "\"text\"",
        "{\"choices\":[{\"delta\":{\"content\":\"hi\",\"x\":[[[[[[[[[[1]]]]]]]]]]}}]}",
        "{\"choices\":[{\"index\":1,\"delta\":{\"content\":\"one\"}}]}",          /* not choice 0: not kept */
        "{\"choices\":[{\"index\":0,\"index\":\"x\",\"delta\":{\"content\":\"zero\"}}]}",
        "{\"choices\":[{\"index\":0.0,\"delta\":{\"content\":\"frac\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"a\"}},{\"index\":0,\"delta\":{\"content\":\"b\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"t\",\"tool_calls\":[{\"index\":0}]}}]}",
        "{\"choices\":[{\"delta\":{\"function_call\":{\"name\":\"f\"}},\"delta\":{\"content\":\"x\"}}]}",
        "{\"choices\":[{\"delta\":{\"reasoning_content\":\"thinking\"}}]}",
        "{\"choices\":[{\"delta\":{\"reasoning\":\"thinking\",\"reasoning_content\":\"\"}}]}",
        "{\"choices\":[{\"delta\":{\"reasoning\":{\"text\":\"x\"}}}]}",
    };
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++) {
        char ev[1024];
        snprintf(ev, sizeof ev, "data: %s\n\n", events[i]);
        preflight scan, tree;
        preflight_init(&scan, API_CHAT, WINDOW);
        preflight_init(&tree, API_CHAT, WINDOW);
        tree.tree_only = 1;
        scan.keep_text = tree.keep_text = 1;
        feed(&scan, ev);
        feed(&tree, ev);
        int same = scan.state == tree.state && scan.saw_semantic == tree.saw_semantic &&
                   scan.text.len == tree.text.len && (!scan.text.len || !memcmp(scan.text.p, tree.text.p, scan.text.len)) &&
                   scan.saw_tool_call == tree.saw_tool_call &&
                   scan.saw_terminal == tree.saw_terminal && scan.input_tokens == tree.input_tokens &&
                   scan.output_tokens == tree.output_tokens && scan.total_tokens == tree.total_tokens &&
                   scan.cached_tokens == tree.cached_tokens && strcmp(scan.model, tree.model) == 0;
        if (!same)
            fprintf(stderr, "  event #%zu %s: scan state %d sem %d term %d in %ld model %s; tree %d %d %d %ld %s\n", i,
                    events[i], scan.state, scan.saw_semantic, scan.saw_terminal, scan.input_tokens, scan.model,
                    tree.state, tree.saw_semantic, tree.saw_terminal, tree.input_tokens, tree.model);
        CHECK(same);
        preflight_free(&scan);
        preflight_free(&tree);
    }
}

/* The usual chunks, read without a tree, give the verdicts and figures of
 * the Chat Completions shape. */
static void test_chat_stream_read_without_a_tree(void)
{
    preflight pf;
    preflight_init(&pf, API_CHAT, WINDOW);
    CHECK_EQ_INT(feed(&pf, CHAT_ROLE), PF_HOLD);
    CHECK_EQ_STR(pf.model, "gpt-4o");
    CHECK_EQ_INT(feed(&pf, CHAT_TEXT), PF_COMMIT);
    CHECK_EQ_INT(pf.saw_semantic, 1);
    CHECK_EQ_INT(pf.saw_terminal, 0);
    feed(&pf, "data: {\"model\":\"gpt-4o-2\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}],"
              "\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4,\"prompt_tokens_details\":{\"cached_tokens\":3}}}\n\n");
    CHECK_EQ_INT(pf.saw_terminal, 1);
    CHECK_EQ_STR(pf.model, "gpt-4o-2");
    CHECK_EQ_INT(pf.input_tokens, 9);
    CHECK_EQ_INT(pf.output_tokens, 4);
    CHECK_EQ_INT(pf.total_tokens, 13);
    CHECK_EQ_INT(pf.cached_tokens, 3);
    preflight_free(&pf);
}

/* After commit a chunk is parsed only when it names usage, an error or a
 * non-null finish_reason; the quotes are looked for eight bytes at a time,
 * so each is tried at every offset. */
static void test_chat_usage_and_finish_after_commit_found_at_any_offset(void)
{
    for (int pad = 0; pad < 17; pad++) {
        char ev[512];
        preflight pf;
        preflight_init(&pf, API_CHAT, WINDOW);
        feed(&pf, CHAT_ROLE CHAT_TEXT);
        CHECK_EQ_INT(pf.state, PF_COMMIT);
        snprintf(ev, sizeof ev, "data: {\"id\":\"%.*s\",\"choices\":[{\"delta\":{},\"finish_reason\":null}]}\n\n", pad,
                 "xxxxxxxxxxxxxxxxxxxx");
        feed(&pf, ev);
        CHECK_EQ_INT(pf.saw_terminal, 0);
        snprintf(ev, sizeof ev, "data: {\"id\":\"%.*s\",\"choices\":[{\"delta\":{},\"finish_reason\" : \"stop\"}]}\n\n", pad,
                 "xxxxxxxxxxxxxxxxxxxx");
        feed(&pf, ev);
        CHECK_EQ_INT(pf.saw_terminal, 1);
        snprintf(ev, sizeof ev, "data: {\"id\":\"%.*s\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":1}}\n\n",
                 pad, "xxxxxxxxxxxxxxxxxxxx", pad + 1);
        feed(&pf, ev);
        CHECK_EQ_INT(pf.input_tokens, pad + 1);
        snprintf(ev, sizeof ev, "data: {\"id\":\"%.*s\",\"error\":{\"message\":\"late\"}}\n\n", pad, "xxxxxxxxxxxxxxxxxxxx");
        feed(&pf, ev);
        CHECK_EQ_INT(pf.late_error, 1);
        preflight_free(&pf);
    }
}

int main(void)
{
    RUN(test_keep_text_collects_chat_content_and_notes_tool_calls);
    RUN(test_responses_keep_text_is_resumable_only_while_one_message_is_being_written);
    RUN(test_responses_keep_text_is_not_resumable_while_reasoning_is_open_or_without_text);
    RUN(test_initial_state_holds_with_unknown_usage);
    RUN(test_created_and_in_progress_hold_and_give_id);
    RUN(test_text_delta_commits);
    RUN(test_other_delta_kinds_commit);
    RUN(test_non_output_events_hold);
    RUN(test_function_call_item_added_commits);
    RUN(test_tool_call_item_done_commits);
    RUN(test_message_item_done_with_content_commits);
    RUN(test_usage_parsed_from_response_completed);
    RUN(test_completed_without_output_commits_as_terminal);
    RUN(test_quota_error_event_before_output_is_error);
    RUN(test_error_type_with_fields_on_top_level);
    RUN(test_response_failed_before_output_is_error);
    RUN(test_sse_error_event_with_plain_text_is_error);
    RUN(test_error_after_commit_sets_late_error);
    RUN(test_error_before_output_in_same_chunk_wins);
    RUN(test_feed_after_error_is_noop);
    RUN(test_non_json_data_before_commit_is_not_error);
    RUN(test_commit_held_includes_partial_trailing_bytes);
    RUN(test_window_bytes_commit);
    RUN(test_big_created_event_commits_on_window);
    RUN(test_forced_commit_moves_hold_to_commit);
    RUN(test_bytes_split_one_at_a_time_same_result);
    RUN(test_chat_role_chunk_not_semantic);
    RUN(test_chat_content_delta_commits);
    RUN(test_chat_tool_call_refusal_and_function_call_commit);
    RUN(test_chat_empty_fields_not_semantic);
    RUN(test_chat_finish_reason_commits_and_is_terminal);
    RUN(test_chat_done_is_terminal);
    RUN(test_chat_usage_chunk_parsed);
    RUN(test_chat_error_object_before_output_is_error);
    RUN(test_chat_error_string_is_error);
    RUN(test_chat_error_after_content_sets_late_error);
    RUN(test_long_error_fields_truncated);
    RUN(test_chat_chunks_read_without_a_tree_match_the_tree);
    RUN(test_chat_stream_read_without_a_tree);
    RUN(test_chat_usage_and_finish_after_commit_found_at_any_offset);
    return check_summary();
}
