/* test_dialect.c: the request side of the dialect API (dialect/dialect.c):
 * names, the plan of an attempt, the upstream body through the table of
 * pairs with the rules applied after a translation, and a Chat
 * conversation that goes to Responses and back unchanged in meaning. */
#include "check.h"
#include "dialect_check.h"
#include "dialect/dialect.h"

/* Facts as the plan read them before dialect_facts_read (exact 0). */
static dialect_req_facts facts4(int stream, int has_instructions, int store_absent, int store_true)
{
    dialect_req_facts f;
    memset(&f, 0, sizeof f);
    f.stream = stream;
    f.has_instructions = has_instructions;
    f.store_absent = store_absent;
    f.store_true = store_true;
    return f;
}

/* dialect_request on body: the parsed output (NULL when refused). */
static json_value *req(api_kind client, api_kind upstream, const policy_dialect *r, const char *body, int *streams,
                       dialect_error *err)
{
    sbuf out = SBUF_INIT;
    sbuf_puts(&out, "stale"); /* dialect_request fills out from empty */
    dialect_error spare;
    int st = -1;
    json_value *got = NULL;
    if (dialect_request(client, upstream, r, body, strlen(body), &out, &st, err ? err : &spare) == 0) {
        got = json_parse(out.p, out.len, NULL, 0);
        CHECK(got != NULL);
        CHECK(st == 0 || st == 1);
    } else {
        CHECK_EQ_INT(out.len, 0);
    }
    if (streams)
        *streams = st;
    sbuf_free(&out);
    return got;
}

static void test_names_parse_and_pair_names_follow_the_table(void)
{
    CHECK_EQ_STR(dialect_name(API_CHAT), "chat");
    CHECK_EQ_STR(dialect_name(API_RESPONSES), "responses");
    CHECK_EQ_STR(dialect_name((api_kind)7), "unknown");
    api_kind a = API_CHAT;
    CHECK_EQ_INT(dialect_parse("responses", &a), 0);
    CHECK_EQ_INT(a, API_RESPONSES);
    CHECK_EQ_INT(dialect_parse("chat", &a), 0);
    CHECK_EQ_INT(a, API_CHAT);
    CHECK_EQ_INT(dialect_parse("anthropic", &a), -1);
    CHECK_EQ_INT(dialect_parse(NULL, &a), -1);
    CHECK_EQ_STR(dialect_pair_name(API_CHAT, API_RESPONSES), "chat>responses");
    CHECK_EQ_STR(dialect_pair_name(API_RESPONSES, API_CHAT), "responses>chat");
    CHECK_EQ_STR(dialect_pair_name(API_CHAT, API_CHAT), "");
    CHECK_EQ_STR(dialect_pair_name(API_RESPONSES, API_RESPONSES), "");
}

static void test_plan_translates_across_dialects_whatever_the_rules(void)
{
    dialect_req_facts f = facts4(1, 1, 0, 0);
    CHECK_EQ_INT(dialect_plan(API_CHAT, API_RESPONSES, NULL, &f), DIALECT_TRANSLATE);
    CHECK_EQ_INT(dialect_plan(API_RESPONSES, API_CHAT, NULL, &f), DIALECT_TRANSLATE);
}

static void test_plan_is_passthrough_when_no_rule_would_change_the_request(void)
{
    policy_dialect r;
    memset(&r, 0, sizeof r);
    dialect_req_facts f = facts4(0, 0, 1, 0);
    CHECK_EQ_INT(dialect_plan(API_RESPONSES, API_RESPONSES, NULL, &f), DIALECT_NONE);
    CHECK_EQ_INT(dialect_plan(API_RESPONSES, API_RESPONSES, &r, &f), DIALECT_NONE);
    rules_add(r.ignore, &r.n_ignore, "n"); /* for translations only */
    CHECK_EQ_INT(dialect_plan(API_CHAT, API_CHAT, &r, &f), DIALECT_NONE);
    /* a Responses request that already streams, says store false and has
     * instructions needs nothing of stream/store/instructions rules */
    r.stream = 1;
    r.store_off = 1;
    r.has_instructions = 1;
    dialect_req_facts ready = facts4(1, 1, 0, 0);
    CHECK_EQ_INT(dialect_plan(API_RESPONSES, API_RESPONSES, &r, &ready), DIALECT_NONE);
    /* Responses-only rules do nothing to a chat request that streams */
    dialect_req_facts chat_streams = facts4(1, 0, 1, 0);
    CHECK_EQ_INT(dialect_plan(API_CHAT, API_CHAT, &r, &chat_streams), DIALECT_NONE);
}

static void test_plan_adapts_when_a_rule_applies_to_this_request(void)
{
    policy_dialect r;
    memset(&r, 0, sizeof r);
    r.stream = 1;
    r.store_off = 1;
    r.has_instructions = 1;
    dialect_req_facts ready = facts4(1, 1, 0, 0);
    dialect_req_facts f = ready;
    f.stream = 0;
    CHECK_EQ_INT(dialect_plan(API_RESPONSES, API_RESPONSES, &r, &f), DIALECT_ADAPT);
    CHECK_EQ_INT(dialect_plan(API_CHAT, API_CHAT, &r, &f), DIALECT_ADAPT);
    f = ready;
    f.store_absent = 1;
    CHECK_EQ_INT(dialect_plan(API_RESPONSES, API_RESPONSES, &r, &f), DIALECT_ADAPT);
    f = ready;
    f.store_true = 1;
    CHECK_EQ_INT(dialect_plan(API_RESPONSES, API_RESPONSES, &r, &f), DIALECT_ADAPT);
    f = ready;
    f.has_instructions = 0;
    CHECK_EQ_INT(dialect_plan(API_RESPONSES, API_RESPONSES, &r, &f), DIALECT_ADAPT);
    CHECK_EQ_INT(dialect_plan(API_RESPONSES, API_RESPONSES, &r, NULL), DIALECT_ADAPT);
    /* rules whose effect the facts cannot tell: ADAPT */
    policy_dialect q;
    rules_chatgpt(&q);
    CHECK_EQ_INT(dialect_plan(API_RESPONSES, API_RESPONSES, &q, &ready), DIALECT_ADAPT);
    memset(&q, 0, sizeof q);
    rules_add(q.drop, &q.n_drop, "seed");
    CHECK_EQ_INT(dialect_plan(API_CHAT, API_CHAT, &q, &ready), DIALECT_ADAPT);
    memset(&q, 0, sizeof q);
    q.strip_item_ids = 1;
    CHECK_EQ_INT(dialect_plan(API_RESPONSES, API_RESPONSES, &q, &ready), DIALECT_ADAPT);
    CHECK_EQ_INT(dialect_plan(API_CHAT, API_CHAT, &q, &ready), DIALECT_NONE);
}

/* The plan from dialect_facts_read (the proxy's reading of the shallow
 * doc) against what adapt does with the same body: NONE exactly when the
 * output is the body byte for byte; the one case it cannot tell without
 * looking into input's items (the body's bulk) is ADAPT. */
static void test_plan_from_the_facts_read_is_passthrough_exactly_when_adapt_changes_nothing(void)
{
    policy_dialect gpt, chat, ren;
    rules_chatgpt(&gpt);
    memset(&chat, 0, sizeof chat);
    chat.stream = 1;
    rules_add(chat.drop, &chat.n_drop, "seed");
    memset(&ren, 0, sizeof ren);
    rules_add(ren.rename_from, &ren.n_rename, "max_tokens");
    strcpy(ren.rename_to[0], "max_completion_tokens");
    rules_add(ren.drop, &ren.n_drop, "stream"); /* owned by no rule here: a drop like any */
    const struct {
        api_kind api;
        const policy_dialect *r;
        const char *body;
        int adapt; /* 1: ADAPT expected; 2: ADAPT although the output is the same (items not looked at) */
    } cases[] = {
        {API_RESPONSES, &gpt, "{\"model\":\"g\",\"instructions\":\"i\","
                              "\"input\":[],\"store\":false,\"stream\":true}", 0},
        {API_RESPONSES, &gpt, "{\"instructions\":\"i\",\"input\":[],\"store\":false,\"stream\":true,\"top_p\":1}", 1},
        {API_RESPONSES, &gpt, "{\"instructions\":\"i\",\"input\":\"hi\",\"store\":false,\"stream\":true}", 1},
        {API_RESPONSES, &gpt, "{\"instructions\":\"i\","
                              "\"input\":[],\"store\":false,\"stream\":true,\"stream\":true}", 1},
        {API_RESPONSES, &gpt, "{\"instructions\":\"i\",\"input\":[],\"input\":[],\"store\":false,\"stream\":true}", 1},
        {API_RESPONSES, &gpt, "{\"instructions\":\"\",\"input\":[],\"store\":false,\"stream\":true}", 1},
        {API_RESPONSES, &gpt, "{\"instructions\":\"i\",\"input\":[],\"store\":null,\"stream\":true}", 1},
        {API_RESPONSES, &gpt, "{\"instructions\":\"i\",\"input\":[],\"store\":false}", 1},
        {API_RESPONSES, &gpt, "{\"instructions\":\"i\","
                              "\"input\":[{\"id\":\"msg_1\"}],\"store\":false,\"stream\":true}", 1},
        {API_RESPONSES, &gpt, "{\"instructions\":\"i\","
                              "\"input\":[{\"role\":\"user\"}],\"store\":false,\"stream\":true}", 2},
        {API_CHAT, &chat, "{\"messages\":[],\"stream\":true}", 0},
        {API_CHAT, &chat, "{\"messages\":[],\"stream\":true,\"seed\":1}", 1},
        {API_CHAT, &chat, "{\"messages\":[],\"stream\":false}", 1},
        {API_CHAT, &ren, "{\"messages\":[],\"max_completion_tokens\":5}", 0},
        {API_CHAT, &ren, "{\"messages\":[],\"max_tokens\":5}", 1},
        {API_CHAT, &ren, "{\"messages\":[],\"stream\":false}", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *b = cases[i].body;
        json_value *doc = json_parse_shallow(b, strlen(b), 1, NULL, 0);
        dialect_req_facts f;
        dialect_facts_read(&f, doc);
        json_free(doc);
        CHECK_EQ_INT(f.exact, 1);
        dialect_step step = dialect_plan(cases[i].api, cases[i].api, cases[i].r, &f);
        sbuf out = SBUF_INIT;
        int st;
        CHECK_EQ_INT(dialect_request(cases[i].api, cases[i].api, cases[i].r, b, strlen(b), &out, &st, NULL), 0);
        int same = out.len == strlen(b) && memcmp(out.p, b, out.len) == 0;
        CHECK_EQ_INT(step, cases[i].adapt ? DIALECT_ADAPT : DIALECT_NONE);
        CHECK_EQ_INT(same, cases[i].adapt != 1);
        if (step != (cases[i].adapt ? DIALECT_ADAPT : DIALECT_NONE) || same != (cases[i].adapt != 1))
            fprintf(stderr, "  case %zu: %s -> %s\n", i, b, out.p);
        sbuf_free(&out);
    }
    /* more top-level names than the facts keep: any drop may apply */
    sbuf big = SBUF_INIT;
    sbuf_puts(&big, "{\"messages\":[],\"stream\":true");
    for (int i = 0; i < DIALECT_FACT_NAMES; i++)
        sbuf_printf(&big, ",\"x%d\":%d", i, i);
    sbuf_puts(&big, "}");
    json_value *doc = json_parse_shallow(big.p, big.len, 1, NULL, 0);
    dialect_req_facts f;
    dialect_facts_read(&f, doc);
    json_free(doc);
    CHECK_EQ_INT(dialect_plan(API_CHAT, API_CHAT, &chat, &f), DIALECT_ADAPT);
    sbuf_free(&big);
    /* no object: no facts, the plan of before */
    doc = json_parse_shallow("[1]", 3, 1, NULL, 0);
    dialect_facts_read(&f, doc);
    json_free(doc);
    CHECK_EQ_INT(f.exact, 0);
}

static void test_a_chat_request_on_the_chatgpt_backend_takes_instructions_from_its_system_messages(void)
{
    policy_dialect r;
    rules_chatgpt(&r);
    int st = 0;
    json_value *o = req(API_CHAT, API_RESPONSES, &r,
                        "{\"model\":\"gpt-5\",\"messages\":[{\"role\":\"system\",\"content\":\"Be terse.\"},"
                        "{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0.2,\"max_tokens\":50}",
                        &st, NULL);
    CHECK(o != NULL);
    CHECK_EQ_STR(jstr(o, "instructions"), "Be terse.");
    CHECK_EQ_INT(st, 1); /* the client asked no stream: the backend streams anyway */
    CHECK(json_get(o, "stream") && json_get(o, "stream")->type == JSON_TRUE);
    CHECK(json_get(o, "store") && json_get(o, "store")->type == JSON_FALSE);
    CHECK(!json_get(o, "temperature") && !json_get(o, "max_output_tokens"));
    json_free(o);
    /* no system message: the rules' default */
    o = req(API_CHAT, API_RESPONSES, &r, "{\"model\":\"gpt-5\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
            &st, NULL);
    CHECK_EQ_STR(jstr(o, "instructions"), "You are a helpful assistant.");
    json_free(o);
}

static void test_a_responses_request_on_a_chat_relay_leaves_out_what_the_relay_ignores(void)
{
    policy_dialect r;
    rules_chat_relay(&r);
    rules_add(r.rename_from, &r.n_rename, "max_tokens");
    strcpy(r.rename_to[0], "max_completion_tokens");
    int st = 1;
    json_value *o = req(API_RESPONSES, API_CHAT, &r,
                        "{\"model\":\"gpt-5-codex\",\"instructions\":\"You are Codex.\",\"input\":[{\"type\":\"message\","
                        "\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"hi\"}]}],\"store\":false,"
                        "\"include\":[\"reasoning.encrypted_content\"],\"reasoning\":{\"effort\":\"low\",\"summary\":"
                        "\"auto\"},\"tools\":[{\"type\":\"web_search\"}],\"max_output_tokens\":64,\"stream\":false}",
                        &st, NULL);
    CHECK(o != NULL);
    CHECK_EQ_INT(st, 0);
    CHECK_EQ_STR(jstr(o, "messages.0.content"), "You are Codex.");
    CHECK_EQ_STR(jstr(o, "reasoning_effort"), "low");
    CHECK_EQ_INT(json_get_num(o, "max_completion_tokens", -1), 64);
    CHECK(!json_get(o, "store") && !json_get(o, "include") && !json_get(o, "tools") && !json_get(o, "max_tokens"));
    json_free(o);
}

static void test_the_same_dialect_is_adapted_and_without_rules_written_as_it_came(void)
{
    policy_dialect r;
    rules_chatgpt(&r);
    int st = 0;
    json_value *o = req(API_RESPONSES, API_RESPONSES, &r,
                        "{\"model\":\"gpt-5\",\"instructions\":\"i\",\"input\":[{\"type\":\"message\",\"id\":\"msg_1\","
                        "\"role\":\"system\",\"content\":\"s\"}],\"store\":true}",
                        &st, NULL);
    CHECK_EQ_STR(jstr(o, "input.0.role"), "developer");
    CHECK(!jpath(o, "input.0.id"));
    CHECK(json_get(o, "store")->type == JSON_FALSE);
    CHECK_EQ_INT(st, 1);
    json_free(o);
    /* without instructions, the leading system message becomes them */
    o = req(API_RESPONSES, API_RESPONSES, &r,
            "{\"model\":\"gpt-5\",\"input\":[{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"system\","
            "\"content\":\"s\"},{\"role\":\"user\",\"content\":\"hi\"}],\"store\":true}",
            &st, NULL);
    CHECK_EQ_STR(jstr(o, "instructions"), "s");
    CHECK_EQ_INT(jcount(o, "input"), 1);
    CHECK_EQ_STR(jstr(o, "input.0.role"), "user");
    json_free(o);
    o = req(API_CHAT, API_CHAT, NULL, "{\"messages\":[],\"stream\":true,\"seed\":1}", &st, NULL);
    CHECK_EQ_INT(o ? o->count : 0, 3);
    CHECK_EQ_INT(st, 1);
    json_free(o);
}

static void test_a_refusal_empties_out_and_says_what_and_why(void)
{
    dialect_error err;
    int st = 5;
    json_value *o = req(API_CHAT, API_RESPONSES, NULL,
                        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"n\":2}", &st, &err);
    CHECK(o == NULL);
    CHECK_EQ_INT(st, -1); /* untouched on refusal */
    CHECK_EQ_INT(err.status, 400);
    CHECK_EQ_STR(err.param, "n");
    CHECK_EQ_STR(err.code, "unsupported_parameter");
    CHECK(strstr(err.message, "Responses API") != NULL);
    /* the same request on a policy that ignores n goes, without it */
    policy_dialect r;
    memset(&r, 0, sizeof r);
    rules_add(r.ignore, &r.n_ignore, "n");
    o = req(API_CHAT, API_RESPONSES, &r, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"n\":2}", NULL, &err);
    CHECK(o && !json_get(o, "n"));
    json_free(o);
    o = req(API_RESPONSES, API_RESPONSES, NULL, "[]", NULL, &err);
    CHECK(o == NULL);
    CHECK_EQ_STR(err.code, "invalid_type");
}

/* A chat messages array in a form that ignores how text was cut: one line
 * per message ("role|text|call id name args;...|tool_call_id|images"). */
static void canon(const json_value *msgs, sbuf *out)
{
    for (const json_value *m = msgs ? msgs->child : NULL; m; m = m->next) {
        sbuf_printf(out, "%s|", json_get_str(m, "role"));
        const json_value *c = json_get(m, "content");
        if (c && c->type == JSON_STRING)
            sbuf_append(out, c->str, c->str_len);
        for (const json_value *p = c && c->type == JSON_ARRAY ? c->child : NULL; p; p = p->next) {
            if (json_get_str(p, "text"))
                sbuf_puts(out, json_get_str(p, "text"));
            if (jstr(p, "image_url.url"))
                sbuf_printf(out, "<img %s %s>", jstr(p, "image_url.url"),
                            jstr(p, "image_url.detail") ? jstr(p, "image_url.detail") : "-");
        }
        sbuf_puts(out, "|");
        const json_value *calls = json_get(m, "tool_calls");
        for (const json_value *t = calls ? calls->child : NULL; t; t = t->next)
            sbuf_printf(out, "%s %s %s;", json_get_str(t, "id"), jstr(t, "function.name"), jstr(t, "function.arguments"));
        sbuf_printf(out, "|%s\n", json_get_str(m, "tool_call_id") ? json_get_str(m, "tool_call_id") : "");
    }
}

static void test_chat_messages_go_to_responses_and_back_unchanged_in_meaning(void)
{
    const char *body =
        "{\"model\":\"gpt-5\",\"messages\":["
        "{\"role\":\"system\",\"content\":\"You are terse.\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"What is this?\"},"
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://x/cat.png\",\"detail\":\"low\"}}]},"
        "{\"role\":\"assistant\",\"content\":\"Let me check.\",\"tool_calls\":["
        "{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"look\",\"arguments\":\"{\\\"x\\\":1}\"}},"
        "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"zoom\",\"arguments\":\"{}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"a cat\"},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":\"a big cat\"},"
        "{\"role\":\"assistant\",\"content\":\"A cat.\"},"
        "{\"role\":\"system\",\"content\":\"Answer in French now.\"},"
        "{\"role\":\"user\",\"content\":\"Again?\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"look\",\"parameters\":{\"type\":\"object\"},"
        "\"strict\":false}}],\"tool_choice\":\"auto\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
        "{\"name\":\"a\",\"schema\":{\"type\":\"object\"},\"strict\":true}},\"reasoning_effort\":\"low\","
        "\"max_completion_tokens\":500,\"stream\":true}";
    json_value *orig = json_parse(body, strlen(body), NULL, 0);
    sbuf mid = SBUF_INIT, back = SBUF_INIT;
    dialect_error err;
    int st = 0;
    CHECK_EQ_INT(dialect_request(API_CHAT, API_RESPONSES, NULL, body, strlen(body), &mid, &st, &err), 0);
    json_value *resp = json_parse(mid.p, mid.len, NULL, 0);
    CHECK(resp != NULL);
    CHECK_EQ_INT(dialect_request(API_RESPONSES, API_CHAT, NULL, mid.p, mid.len, &back, &st, &err), 0);
    json_value *again = json_parse(back.p, back.len, NULL, 0);
    CHECK(again != NULL);
    sbuf a = SBUF_INIT, b = SBUF_INIT;
    canon(json_get(orig, "messages"), &a);
    canon(json_get(again, "messages"), &b);
    CHECK_EQ_STR(b.p, a.p);
    if (a.p && b.p && strcmp(a.p, b.p) != 0)
        fprintf(stderr, "  before:\n%s  after:\n%s", a.p, b.p);
    CHECK_EQ_STR(jstr(again, "tools.0.function.name"), "look");
    CHECK_EQ_STR(jstr(again, "tool_choice"), "auto");
    CHECK_EQ_STR(jstr(again, "response_format.json_schema.name"), "a");
    CHECK_EQ_STR(jstr(again, "reasoning_effort"), "low");
    CHECK_EQ_INT(json_get_num(again, "max_tokens", -1), 500);
    CHECK(jpath(again, "stream_options.include_usage") != NULL);
    sbuf_free(&a);
    sbuf_free(&b);
    json_free(again);
    json_free(resp);
    json_free(orig);
    sbuf_free(&mid);
    sbuf_free(&back);
}

int main(void)
{
    RUN(test_names_parse_and_pair_names_follow_the_table);
    RUN(test_plan_translates_across_dialects_whatever_the_rules);
    RUN(test_plan_is_passthrough_when_no_rule_would_change_the_request);
    RUN(test_plan_adapts_when_a_rule_applies_to_this_request);
    RUN(test_plan_from_the_facts_read_is_passthrough_exactly_when_adapt_changes_nothing);
    RUN(test_a_chat_request_on_the_chatgpt_backend_takes_instructions_from_its_system_messages);
    RUN(test_a_responses_request_on_a_chat_relay_leaves_out_what_the_relay_ignores);
    RUN(test_the_same_dialect_is_adapted_and_without_rules_written_as_it_came);
    RUN(test_a_refusal_empties_out_and_says_what_and_why);
    RUN(test_chat_messages_go_to_responses_and_back_unchanged_in_meaning);
    return check_summary();
}
