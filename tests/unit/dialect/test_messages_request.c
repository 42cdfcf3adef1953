/* test_messages_request.c: an Anthropic Messages request written as a
 * Responses request and as a Chat Completions request
 * (dialect/messages_request.c through dialect_request): docs/clients.md's
 * "Anthropic Messages" Request table, row by row, the refusals with their
 * Anthropic paths, the ignore list, the upstream's rules after the
 * translation, and the token estimate of count_tokens. Every output is
 * parsed back. */
#include "check.h"
#include "dialect_check.h"
#include "dialect/dialect.h"

/* What Claude Code sends on its second turn: system blocks with cache
 * hints (the billing line first), a user turn in two text blocks, an
 * assistant turn with a signed thinking block, text and a tool_use, a
 * tool_result with an image beside a user text and an image, a redacted
 * thinking block, an error result, tools with input_schema, metadata,
 * thinking enabled, stream. */
#define CC_BODY                                                                                                      \
    "{\"model\":\"claude-sonnet-4-5-20250929\",\"messages\":["                                                      \
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"<system-reminder>ctx</system-reminder>\"},"       \
    "{\"type\":\"text\",\"text\":\"list the files\",\"cache_control\":{\"type\":\"ephemeral\"}}]},"                  \
    "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"I will run ls.\",\"signature\":"     \
    "\"EqQBCkgIBxABGAIqQJ3m\"},{\"type\":\"text\",\"text\":\"Listing.\"},{\"type\":\"tool_use\",\"id\":"             \
    "\"toolu_01A09q\",\"name\":\"Bash\",\"input\":{\"command\":\"ls -la\"}}]},"                                      \
    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_01A09q\",\"content\":"        \
    "\"README.md\\nsrc\",\"is_error\":false},{\"type\":\"text\",\"text\":\"and the screenshot\"},{\"type\":"        \
    "\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"iVBORw0KGgo=\"}}]},"         \
    "{\"role\":\"assistant\",\"content\":[{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgB\"},{\"type\":"         \
    "\"tool_use\",\"id\":\"toolu_02\",\"name\":\"Read\",\"input\":{\"file_path\":\"/tmp/a.png\"}},{\"type\":"       \
    "\"tool_use\",\"id\":\"toolu_03\",\"name\":\"Read\",\"input\":{\"file_path\":\"/nope\"}}]},"                     \
    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_02\",\"content\":["           \
    "{\"type\":\"text\",\"text\":\"an image\"},{\"type\":\"image\",\"source\":{\"type\":\"url\",\"url\":"           \
    "\"https://x.test/a.png\"}}]},{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_03\",\"is_error\":true,"        \
    "\"content\":\"<tool_use_error>File does not exist.</tool_use_error>\"}]}],"                                    \
    "\"system\":[{\"type\":\"text\",\"text\":\"x-anthropic-billing-header: cc_version=2.1.78\"},{\"type\":"         \
    "\"text\",\"text\":\"You are Claude Code.\",\"cache_control\":{\"type\":\"ephemeral\"}}],"                       \
    "\"tools\":[{\"name\":\"Bash\",\"description\":\"Runs a command\",\"input_schema\":{\"type\":\"object\","       \
    "\"properties\":{\"command\":{\"type\":\"string\"}},\"required\":[\"command\"]}},{\"name\":\"Read\","            \
    "\"input_schema\":{\"type\":\"object\",\"properties\":{\"file_path\":{\"type\":\"string\"}}},"                  \
    "\"cache_control\":{\"type\":\"ephemeral\"}}],"                                                                 \
    "\"metadata\":{\"user_id\":\"user_abc_session_1\"},\"max_tokens\":32000,\"thinking\":{\"type\":\"enabled\","    \
    "\"budget_tokens\":31999},\"temperature\":1,\"stream\":true}"

/* body (a Messages request) sent to upstream with rules: the parsed
 * output, or NULL when refused (err filled, its status checked). */
static json_value *to_rules(api_kind upstream, const char *body, const policy_dialect *rules, dialect_error *err,
                            int *streams)
{
    sbuf out = SBUF_INIT;
    dialect_error spare;
    int st = -1;
    if (!err)
        err = &spare;
    int rc = dialect_request(API_MESSAGES, upstream, rules, body, strlen(body), &out, &st, err);
    json_value *got = NULL;
    if (rc == 0) {
        got = json_parse(out.p, out.len, NULL, 0);
        if (!got)
            fprintf(stderr, "  output does not parse: %s\n", out.p);
        if (streams)
            *streams = st;
    } else if (err->status != 400 || !err->code[0] || !err->message[0] || out.len) {
        fprintf(stderr, "  a refusal without status, code or message, or with output\n");
        check_cur_failed = 1;
    }
    sbuf_free(&out);
    return got;
}

static json_value *to(api_kind upstream, const char *body)
{
    return to_rules(upstream, body, NULL, NULL, NULL);
}

/* body is refused for upstream naming param, its message starting with
 * the path as Anthropic writes its own ("messages.2.content.0.type: "). */
static void refused(api_kind upstream, const char *body, const policy_dialect *rules, const char *param)
{
    dialect_error err;
    memset(&err, 0, sizeof err);
    json_value *got = to_rules(upstream, body, rules, &err, NULL);
    CHECK(got == NULL);
    CHECK_EQ_STR(err.param, param);
    CHECK(strncmp(err.message, param, strlen(param)) == 0 && err.message[strlen(param)] == ':');
    if (got || strcmp(err.param, param) != 0)
        fprintf(stderr, "  refused %s? %s\n", param, err.message);
    json_free(got);
}

static policy_dialect *rules_ignoring(policy_dialect *r, const char *const *names, size_t n)
{
    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < n; i++)
        rules_add(r->ignore, &r->n_ignore, names[i]);
    return r;
}

#define MSGS(x) "{\"model\":\"m\",\"max_tokens\":100,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" x "}"

/* Each path of g holds the string given; a NULL string: the path holds
 * nothing. */
typedef struct want {
    const char *path, *value;
} want;

static void expect(const json_value *g, const want *w, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *got = jstr(g, w[i].path);
        int ok = w[i].value ? got && strcmp(got, w[i].value) == 0 : jpath(g, w[i].path) == NULL;
        if (!ok) {
            fprintf(stderr, "  %s: \"%s\", expected \"%s\"\n", w[i].path, got ? got : jpath(g, w[i].path) ? "(other)" : "(none)",
                    w[i].value ? w[i].value : "(none)");
            check_cur_failed = 1;
        }
    }
}

/* body translated for up holds what w says. */
static void holds(api_kind up, const char *body, const want *w, size_t n)
{
    json_value *g = to(up, body);
    CHECK(g != NULL);
    expect(g, w, n);
    json_free(g);
}
#define HOLDS(up, body, ...)                                                                                         \
    do {                                                                                                             \
        static const want w_[] = {__VA_ARGS__};                                                                     \
        holds(up, body, w_, sizeof w_ / sizeof w_[0]);                                                               \
    } while (0)

static void test_a_claude_code_request_becomes_a_responses_request(void)
{
    int streams = 0;
    json_value *g = to_rules(API_RESPONSES, CC_BODY, NULL, NULL, &streams);
    CHECK(g != NULL);
    CHECK_EQ_INT(streams, 1);
    static const want w[] = {
        {"instructions", "x-anthropic-billing-header: cc_version=2.1.78\n\nYou are Claude Code."},
        {"system", NULL}, {"messages", NULL}, {"thinking", NULL}, {"metadata", NULL},
        /* user: two text parts, no cache hint */
        {"input.0.role", "user"}, {"input.0.content.0.type", "input_text"},
        {"input.0.content.1.text", "list the files"}, {"input.0.content.1.cache_control", NULL},
        /* the thinking block left out: the assistant's text, then its call
         * with the toolu_ id kept as the call id */
        {"input.1.role", "assistant"}, {"input.1.content.0.type", "output_text"},
        {"input.1.content.0.text", "Listing."}, {"input.1.content.1", NULL},
        {"input.2.type", "function_call"}, {"input.2.call_id", "toolu_01A09q"}, {"input.2.name", "Bash"},
        {"input.2.arguments", "{\"command\":\"ls -la\"}"},
        {"input.3.type", "function_call_output"}, {"input.3.call_id", "toolu_01A09q"},
        {"input.3.output", "README.md\nsrc"},
        {"input.4.content.0.text", "and the screenshot"}, {"input.4.content.1.type", "input_image"},
        {"input.4.content.1.image_url", "data:image/png;base64,iVBORw0KGgo="},
        /* the redacted thinking left out: the two calls follow each other */
        {"input.5.call_id", "toolu_02"}, {"input.6.call_id", "toolu_03"},
        /* a result with an image: output parts; an error result: "Error: " first */
        {"input.7.output.0.text", "an image"}, {"input.7.output.1.image_url", "https://x.test/a.png"},
        {"input.8.output", "Error: <tool_use_error>File does not exist.</tool_use_error>"}, {"input.9", NULL},
        {"tools.0.type", "function"}, {"tools.0.name", "Bash"},
        {"tools.0.parameters.properties.command.type", "string"},
        {"tools.1.cache_control", NULL}, {"tools.1.description", NULL},
        {"reasoning.effort", "high"}, {"user", "user_abc_session_1"},
    };
    expect(g, w, sizeof w / sizeof w[0]);
    CHECK(jpath(g, "tools.0.strict")->type == JSON_FALSE);
    CHECK(jpath(g, "store")->type == JSON_FALSE);
    CHECK_EQ_INT((long)jpath(g, "max_output_tokens")->num, 32000);
    CHECK_EQ_INT((long)jpath(g, "temperature")->num, 1);
    /* nothing signed or encrypted travels, nor the thinking's text */
    sbuf text = SBUF_INIT;
    json_write(&text, g);
    CHECK(strstr(text.p, "EqQBCkgIBxABGAIqQJ3m") == NULL && strstr(text.p, "EmwKAhgB") == NULL);
    CHECK(strstr(text.p, "I will run ls.") == NULL && strstr(text.p, "cache_control") == NULL);
    sbuf_free(&text);
    json_free(g);
}

static void test_a_claude_code_request_becomes_a_chat_request(void)
{
    json_value *g = to(API_CHAT, CC_BODY);
    CHECK(g != NULL);
    static const want w[] = {
        {"messages.0.role", "system"},
        {"messages.0.content", "x-anthropic-billing-header: cc_version=2.1.78\n\nYou are Claude Code."},
        /* text blocks as one string, a blank line apart */
        {"messages.1.content", "<system-reminder>ctx</system-reminder>\n\nlist the files"},
        {"messages.2.role", "assistant"}, {"messages.2.content", "Listing."},
        {"messages.2.tool_calls.0.id", "toolu_01A09q"}, {"messages.2.tool_calls.0.function.name", "Bash"},
        {"messages.2.tool_calls.0.function.arguments", "{\"command\":\"ls -la\"}"},
        /* the tool message first, then the rest of the turn */
        {"messages.3.role", "tool"}, {"messages.3.tool_call_id", "toolu_01A09q"},
        {"messages.3.content", "README.md\nsrc"},
        {"messages.4.role", "user"}, {"messages.4.content.0.text", "and the screenshot"},
        {"messages.4.content.1.image_url.url", "data:image/png;base64,iVBORw0KGgo="},
        /* one assistant message with both calls */
        {"messages.5.tool_calls.1.id", "toolu_03"}, {"messages.5.tool_calls.2", NULL},
        {"messages.6.content", "an image"},
        {"messages.7.content", "Error: <tool_use_error>File does not exist.</tool_use_error>"},
        /* the image a tool returned: in the user message after the tool messages */
        {"messages.8.role", "user"}, {"messages.8.content.0.text", "Attached to the result of tool call toolu_02:"},
        {"messages.8.content.1.image_url.url", "https://x.test/a.png"}, {"messages.9", NULL},
        {"tools.0.function.name", "Bash"}, {"tools.0.function.parameters.type", "object"},
        {"tools.0.function.strict", NULL}, {"reasoning_effort", "high"}, {"store", NULL},
    };
    expect(g, w, sizeof w / sizeof w[0]);
    CHECK(jpath(g, "messages.5.content")->type == JSON_NULL); /* content null beside the calls */
    CHECK_EQ_INT((long)jpath(g, "max_tokens")->num, 32000);
    CHECK(jpath(g, "stream_options.include_usage")->type == JSON_TRUE);
    json_free(g);
}

static const char *effort_of(api_kind up, const char *members)
{
    static char got[32];
    char body[512];
    snprintf(body, sizeof body, MSGS("%s"), members);
    json_value *g = to(up, body);
    const char *e = g ? jstr(g, up == API_CHAT ? "reasoning_effort" : "reasoning.effort") : NULL;
    snprintf(got, sizeof got, "%s", e ? e : g ? "(none)" : "(refused)");
    json_free(g);
    return got;
}

static void test_ids_openai_would_find_too_long_go_hashed(void)
{
    /* Claude Code's user_id (a JSON text since 2.1.78) and a 70-character
     * tool id: OpenAI refuses either over 64 characters */
    static const char body[] =
        "{\"metadata\":{\"user_id\":\"{\\\"device_id\\\":\\\"8f2c0d9e1b3a4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5\\\","
        "\\\"session_id\\\":\\\"54c1eb09-bc4c-4d2f-98eb-6d2ab2d5e2fe\\\"}\"},\"messages\":[{\"role\":\"assistant\",\"content\":["
        "{\"type\":\"tool_use\",\"id\":\"toolu_0123456789012345678901234567890123456789012345678901234567890123\","
        "\"name\":\"f\",\"input\":{}}]},{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"
        "\"toolu_0123456789012345678901234567890123456789012345678901234567890123\",\"content\":\"ok\"}]}]}";
    static const api_kind ups[] = {API_RESPONSES, API_CHAT};
    for (int k = 0; k < 2; k++) {
        json_value *g = to(ups[k], body);
        const char *user = jstr(g, "user");
        CHECK(user && strlen(user) == 64 && strspn(user, "0123456789abcdef") == 64);
        const char *call = jstr(g, k ? "messages.0.tool_calls.0.id" : "input.0.call_id");
        const char *result = jstr(g, k ? "messages.1.tool_call_id" : "input.1.call_id");
        CHECK(call && strlen(call) == 64 && result && strcmp(call, result) == 0);
        json_free(g);
    }
    /* a short one goes as it is */
    HOLDS(API_CHAT, MSGS(",\"metadata\":{\"user_id\":\"user_1\"}"), {"user", "user_1"});
}

static void test_thinking_budgets_and_efforts_map_to_reasoning_effort(void)
{
    CHECK_EQ_STR(effort_of(API_RESPONSES, ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024}"), "low");
    CHECK_EQ_STR(effort_of(API_RESPONSES, ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":4000}"), "low");
    CHECK_EQ_STR(effort_of(API_RESPONSES, ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":4096}"), "medium");
    CHECK_EQ_STR(effort_of(API_CHAT, ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":10000}"), "medium");
    CHECK_EQ_STR(effort_of(API_CHAT, ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":16384}"), "high");
    CHECK_EQ_STR(effort_of(API_CHAT, ",\"thinking\":{\"type\":\"disabled\"}"), "(none)");
    CHECK_EQ_STR(effort_of(API_RESPONSES, ",\"thinking\":{\"type\":\"adaptive\"}"), "(none)");
    CHECK_EQ_STR(effort_of(API_RESPONSES, ",\"thinking\":{\"type\":\"adaptive\"},\"output_config\":{\"effort\":\"max\"}"),
                 "high");
    /* an explicit effort wins over a budget, whichever comes first */
    CHECK_EQ_STR(effort_of(API_CHAT, ",\"output_config\":{\"effort\":\"low\"},\"thinking\":{\"type\":\"enabled\","
                                     "\"budget_tokens\":30000}"),
                 "low");
    CHECK_EQ_STR(effort_of(API_CHAT, ",\"thinking\":{\"type\":\"sometimes\"}"), "(refused)");
    CHECK_EQ_STR(effort_of(API_CHAT, ",\"output_config\":{\"effort\":\"extreme\"}"), "(refused)");
    refused(API_CHAT, MSGS(",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":\"lots\"}"), NULL,
            "thinking.budget_tokens");
    /* one reasoning member however the two are given */
    char body[256];
    snprintf(body, sizeof body, MSGS("%s"),
             ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":5000},\"output_config\":{\"effort\":\"high\"}");
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(dialect_request(API_MESSAGES, API_RESPONSES, NULL, body, strlen(body), &out, NULL, NULL), 0);
    const char *first = strstr(out.p, "\"reasoning\"");
    CHECK(first && !strstr(first + 1, "\"reasoning\""));
    sbuf_free(&out);
}

static void test_tool_choice_maps_and_goes_only_beside_tools(void)
{
#define WITH_TOOL(choice) MSGS(",\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"}}],\"tool_choice\":" choice)
    HOLDS(API_RESPONSES, WITH_TOOL("{\"type\":\"any\",\"disable_parallel_tool_use\":true}"), {"tool_choice", "required"});
    json_value *g = to(API_RESPONSES, WITH_TOOL("{\"type\":\"any\",\"disable_parallel_tool_use\":true}"));
    CHECK(jpath(g, "parallel_tool_calls")->type == JSON_FALSE);
    json_free(g);
    HOLDS(API_RESPONSES, WITH_TOOL("{\"type\":\"tool\",\"name\":\"f\"}"), {"tool_choice.type", "function"},
          {"tool_choice.name", "f"}, {"parallel_tool_calls", NULL});
    HOLDS(API_CHAT, WITH_TOOL("{\"type\":\"tool\",\"name\":\"f\"}"), {"tool_choice.type", "function"},
          {"tool_choice.function.name", "f"});
    HOLDS(API_CHAT, WITH_TOOL("{\"type\":\"auto\"}"), {"tool_choice", "auto"});
    HOLDS(API_CHAT, WITH_TOOL("{\"type\":\"none\"}"), {"tool_choice", "none"});
    /* no tools (none sent, or all left out): no tools, no tool_choice */
    HOLDS(API_CHAT, MSGS(",\"tool_choice\":{\"type\":\"any\"},\"tools\":[]"), {"tools", NULL}, {"tool_choice", NULL});
    refused(API_CHAT, MSGS(",\"tool_choice\":{\"type\":\"tool\"}"), NULL, "tool_choice.name");
    refused(API_CHAT, MSGS(",\"tool_choice\":{\"type\":\"whichever\"}"), NULL, "tool_choice.type");
    refused(API_CHAT, MSGS(",\"tool_choice\":\"auto\""), NULL, "tool_choice");
#undef WITH_TOOL
}

static void test_documents_go_as_files_where_the_target_takes_them(void)
{
#define DOC(src) MSGS_DOC("{\"type\":\"document\",\"title\":\"spec.pdf\",\"source\":" src "}")
#define MSGS_DOC(block) "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[" block "]}]}"
    const char *pdf = DOC("{\"type\":\"base64\",\"media_type\":\"application/pdf\",\"data\":\"JVBERi0=\"}");
    HOLDS(API_RESPONSES, pdf, {"input.0.content.0.type", "input_file"}, {"input.0.content.0.filename", "spec.pdf"},
          {"input.0.content.0.file_data", "data:application/pdf;base64,JVBERi0="});
    HOLDS(API_CHAT, pdf, {"messages.0.content.0.type", "file"}, {"messages.0.content.0.file.filename", "spec.pdf"},
          {"messages.0.content.0.file.file_data", "data:application/pdf;base64,JVBERi0="});
    HOLDS(API_CHAT, DOC("{\"type\":\"text\",\"media_type\":\"text/plain\",\"data\":\"plain words\"}"),
          {"messages.0.content", "plain words"});
    const char *url = DOC("{\"type\":\"url\",\"url\":\"https://x.test/a.pdf\"}");
    HOLDS(API_RESPONSES, url, {"input.0.content.0.file_url", "https://x.test/a.pdf"});
    refused(API_CHAT, url, NULL, "messages.0.content.0.source.type");
    refused(API_RESPONSES, DOC("{\"type\":\"file\",\"file_id\":\"file_1\"}"), NULL, "messages.0.content.0.source.type");
    refused(API_RESPONSES, DOC("{\"type\":\"base64\",\"data\":\"JVBERi0=\"}"), NULL,
            "messages.0.content.0.source.media_type");
    static const char *const ign[] = {"content.document"};
    policy_dialect r;
    json_value *g = to_rules(API_CHAT, url, rules_ignoring(&r, ign, 1), NULL, NULL);
    CHECK(g && jcount(g, "messages") == 0);
    json_free(g);
    refused(API_CHAT, MSGS_DOC("{\"type\":\"image\",\"source\":{\"type\":\"file\",\"file_id\":\"f\"}}"), NULL,
            "messages.0.content.0.source.type");
    /* a PDF a tool returned (Claude Code's Read): in the output on the
     * Responses API, after the tool message for Chat */
    const char *read = MSGS_DOC("{\"type\":\"tool_result\",\"tool_use_id\":\"t1\",\"content\":[{\"type\":"
                                "\"document\",\"source\":{\"type\":\"base64\",\"media_type\":\"application/pdf\","
                                "\"data\":\"JVBERi0=\"}},{\"type\":\"document\",\"source\":{\"type\":\"text\","
                                "\"media_type\":\"text/plain\",\"data\":\"notes\"}}]}");
    HOLDS(API_RESPONSES, read, {"input.0.call_id", "t1"}, {"input.0.output.0.text", "notes"},
          {"input.0.output.1.type", "input_file"}, {"input.0.output.1.filename", "document.pdf"});
    HOLDS(API_CHAT, read, {"messages.0.role", "tool"}, {"messages.0.content", "notes"}, {"messages.1.role", "user"},
          {"messages.1.content.0.text", "Attached to the result of tool call t1:"},
          {"messages.1.content.1.file.file_data", "data:application/pdf;base64,JVBERi0="});
#undef DOC
#undef MSGS_DOC
}

static void test_anthropic_only_fields_are_refused_with_their_path_unless_ignored(void)
{
    refused(API_RESPONSES, MSGS(",\"top_k\":5"), NULL, "top_k");
    refused(API_CHAT, MSGS(",\"container\":\"c_1\""), NULL, "container");
    refused(API_CHAT, MSGS(",\"mcp_servers\":[{\"type\":\"url\",\"url\":\"https://m.test\",\"name\":\"m\"}]"), NULL,
            "mcp_servers");
    refused(API_CHAT, MSGS(",\"inference_geo\":\"us\""), NULL, "inference_geo");
    refused(API_RESPONSES, MSGS(",\"stop_sequences\":[\"END\"]"), NULL, "stop_sequences");
    refused(API_RESPONSES, MSGS(",\"tools\":[{\"type\":\"web_search_20250305\",\"name\":\"web_search\"}]"), NULL,
            "tools.0.type");
    refused(API_CHAT,
            "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
            "{\"type\":\"search_result\",\"source\":\"s\",\"title\":\"t\",\"content\":[]}]}]}",
            NULL, "messages.0.content.1.type");
    refused(API_CHAT, MSGS(",\"output_config\":{\"task_budget\":100}"), NULL, "output_config.task_budget");
    static const char *const ign[] = {"top_k",      "container",          "inference_geo", "stop_sequences",
                                      "tools.web_search_20250305", "content.search_result", "output_config.task_budget"};
    policy_dialect r;
    rules_ignoring(&r, ign, sizeof ign / sizeof ign[0]);
    json_value *g = to_rules(API_RESPONSES,
                             MSGS(",\"top_k\":5,\"container\":\"c\",\"inference_geo\":\"us\",\"stop_sequences\":[\"E\"],"
                                  "\"tools\":[{\"type\":\"web_search_20250305\",\"name\":\"web_search\"}],"
                                  "\"tool_choice\":{\"type\":\"auto\"},\"output_config\":{\"task_budget\":1}"),
                             &r, NULL, NULL);
    CHECK(g != NULL);
    CHECK(!jpath(g, "top_k") && !jpath(g, "container") && !jpath(g, "inference_geo") && !jpath(g, "stop_sequences"));
    CHECK(!jpath(g, "tools") && !jpath(g, "tool_choice") && !jpath(g, "output_config") && !jpath(g, "stop"));
    json_free(g);
    /* what asks for nothing is no request */
    g = to(API_CHAT, MSGS(",\"mcp_servers\":[],\"stop_sequences\":[]"));
    CHECK(g && !jpath(g, "mcp_servers") && !jpath(g, "stop"));
    json_free(g);
}

static void test_fields_only_anthropic_serving_asks_for_are_left_out(void)
{
    json_value *g = to(API_RESPONSES, MSGS(",\"anthropic_version\":\"vertex-2023-10-16\",\"anthropic_beta\":[\"x\"],"
                                           "\"context_management\":{\"edits\":[{\"type\":\"clear_tool_uses_20250919\"}]},"
                                           "\"cache_control\":{\"type\":\"ephemeral\"},\"service_tier\":\"auto\""));
    CHECK(g != NULL);
    sbuf text = SBUF_INIT;
    json_write(&text, g);
    CHECK_EQ_STR(text.p, "{\"model\":\"m\",\"max_output_tokens\":100,\"input\":[{\"type\":\"message\",\"role\":"
                         "\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"hi\"}]}],\"store\":false}");
    sbuf_free(&text);
    json_free(g);
}

/* Claude Code 2.1 sends a system message inside the conversation (its
 * per-turn environment): it goes where it stands. */
static void test_a_system_message_in_the_conversation_stays_where_it_stands(void)
{
    static const char body[] = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                               "{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"env\"},"
                               "{\"type\":\"text\",\"text\":\"more\"}]},{\"role\":\"user\",\"content\":\"go\"}]}";
    HOLDS(API_RESPONSES, body, {"input.0.role", "user"}, {"input.1.type", "message"}, {"input.1.role", "developer"},
          {"input.1.content.0.type", "input_text"}, {"input.1.content.0.text", "env\n\nmore"},
          {"input.2.role", "user"});
    HOLDS(API_CHAT, body, {"messages.0.role", "user"}, {"messages.1.role", "system"},
          {"messages.1.content", "env\n\nmore"}, {"messages.2.role", "user"});
}

static void test_refusals_name_the_field_as_anthropic_writes_paths(void)
{
    refused(API_CHAT, "{\"model\":\"m\"}", NULL, "messages");
    refused(API_CHAT, "{\"messages\":{}}", NULL, "messages");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}", NULL, "messages.0.role");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"image\"}]}]}", NULL,
            "messages.0.content.0.type");
    refused(API_RESPONSES, "{\"messages\":[{\"role\":\"user\"}]}", NULL, "messages.0.content");
    refused(API_RESPONSES, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t\","
                           "\"name\":\"n\",\"input\":{}}]}]}",
            NULL, "messages.0.content.0.type");
    refused(API_RESPONSES, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\","
                           "\"content\":[{\"type\":\"tool_use\",\"name\":\"n\",\"input\":{}}]}]}",
            NULL, "messages.1.content.0.id");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"content\":\"x\"}]}]}",
            NULL, "messages.0.content.0.tool_use_id");
    refused(API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\","
                      "\"content\":[{\"type\":\"text\"}]}]}]}",
            NULL, "messages.0.content.0.content.0.text");
    refused(API_CHAT, "{\"messages\":[],\"system\":[{\"type\":\"image\"}]}", NULL, "system.0.type");
    refused(API_CHAT, "{\"messages\":[],\"system\":7}", NULL, "system");
    refused(API_CHAT, MSGS(",\"tools\":[{\"name\":\"f\"}]"), NULL, "tools.0.input_schema");
    refused(API_CHAT, MSGS(",\"max_tokens\":\"many\""), NULL, "max_tokens");
    refused(API_CHAT, MSGS(",\"metadata\":{\"user_id\":5}"), NULL, "metadata.user_id");
    /* not a JSON object at all */
    dialect_error err;
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(dialect_request(API_MESSAGES, API_CHAT, NULL, "[1]", 3, &out, NULL, &err), -1);
    CHECK_EQ_INT(err.status, 400);
    CHECK_EQ_INT(dialect_request(API_MESSAGES, API_CHAT, NULL, "{", 1, &out, NULL, &err), -1);
    sbuf_free(&out);
}

static void test_sampling_limits_and_stop_sequences(void)
{
    json_value *g = to(API_CHAT, "{\"model\":\"m\",\"max_tokens\":1,\"temperature\":0.2,\"top_p\":0.9,"
                                 "\"stop_sequences\":[\"END\",\"STOP\"],\"messages\":[{\"role\":\"user\","
                                 "\"content\":\"hi\"}]}");
    CHECK_EQ_INT((long)jpath(g, "max_tokens")->num, 1);
    CHECK_EQ_STR(jstr(g, "stop.1"), "STOP");
    CHECK(jpath(g, "top_p")->num == 0.9);
    json_free(g);
    /* the Responses API refuses fewer than 16 output tokens: raised */
    g = to(API_RESPONSES, "{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    CHECK_EQ_INT((long)jpath(g, "max_output_tokens")->num, 16);
    json_free(g);
}

static void test_a_structured_output_format_becomes_the_targets(void)
{
    static const char fmt[] = ",\"output_config\":{\"format\":{\"type\":\"json_schema\",\"schema\":{\"type\":"
                              "\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}}}";
    char body[512];
    snprintf(body, sizeof body, MSGS("%s"), fmt);
    HOLDS(API_RESPONSES, body, {"text.format.type", "json_schema"}, {"text.format.name", "output"},
          {"text.format.schema.properties.a.type", "string"});
    HOLDS(API_CHAT, body, {"response_format.type", "json_schema"}, {"response_format.json_schema.schema.type", "object"});
    HOLDS(API_CHAT, MSGS(",\"output_format\":{\"type\":\"json_schema\",\"schema\":{\"type\":\"object\"}}"),
          {"response_format.json_schema.name", "output"});
    refused(API_CHAT, MSGS(",\"output_format\":{\"type\":\"xml\"}"), NULL, "output_format.type");
}

static void test_a_schema_too_deep_for_the_target_is_refused(void)
{
    /* 125 levels: the Messages body is 128 deep, so is a Responses body;
     * under Chat's "function" it would be 129, past what parses */
    sbuf body = SBUF_INIT;
    sbuf_puts(&body, "{\"messages\":[],\"tools\":[{\"name\":\"f\",\"input_schema\":");
    for (int i = 0; i < 125; i++)
        sbuf_puts(&body, "{\"a\":");
    sbuf_puts(&body, "1");
    for (int i = 0; i < 125; i++)
        sbuf_puts(&body, "}");
    sbuf_puts(&body, "}]}");
    dialect_error err;
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(dialect_request(API_MESSAGES, API_CHAT, NULL, body.p, body.len, &out, NULL, &err), -1);
    CHECK_EQ_STR(err.param, "tools.0.input_schema");
    CHECK_EQ_INT(dialect_request(API_MESSAGES, API_RESPONSES, NULL, body.p, body.len, &out, NULL, &err), 0);
    json_value *g = json_parse(out.p, out.len, NULL, 0);
    CHECK(g != NULL);
    json_free(g);
    sbuf_free(&out);
    sbuf_free(&body);
}

static void test_the_upstreams_rules_apply_after_the_translation(void)
{
    policy_dialect r;
    rules_chatgpt(&r);
    int streams = 0;
    json_value *g = to_rules(API_RESPONSES,
                             "{\"model\":\"gpt-5-codex\",\"max_tokens\":500,\"temperature\":0.5,\"messages\":[{\"role\":"
                             "\"user\",\"content\":\"hi\"}]}",
                             &r, NULL, &streams);
    CHECK(g != NULL);
    CHECK_EQ_INT(streams, 1);
    CHECK(jpath(g, "stream")->type == JSON_TRUE);
    CHECK(jpath(g, "store")->type == JSON_FALSE);
    CHECK_EQ_STR(jstr(g, "instructions"), "You are a helpful assistant.");
    CHECK(jpath(g, "max_output_tokens") == NULL && jpath(g, "temperature") == NULL);
    json_free(g);
    /* a system prompt is the instructions: the default is not used */
    g = to_rules(API_RESPONSES, MSGS(",\"system\":\"Be brief.\""), &r, NULL, NULL);
    CHECK_EQ_STR(jstr(g, "instructions"), "Be brief.");
    json_free(g);
}

static void test_the_messages_dialect_has_its_name_and_its_pairs(void)
{
    CHECK_EQ_STR(dialect_name(API_MESSAGES), "messages");
    api_kind k = API_CHAT;
    CHECK_EQ_INT(dialect_parse("messages", &k), 0);
    CHECK_EQ_INT(k, API_MESSAGES);
    CHECK_EQ_STR(dialect_pair_name(API_MESSAGES, API_RESPONSES), "messages>responses");
    CHECK_EQ_STR(dialect_pair_name(API_MESSAGES, API_CHAT), "messages>chat");
    CHECK_EQ_STR(dialect_pair_name(API_MESSAGES, API_MESSAGES), "");
    CHECK_EQ_STR(dialect_pair_name(API_CHAT, API_MESSAGES), "chat>messages");
    CHECK_EQ_STR(dialect_pair_name(API_RESPONSES, API_MESSAGES), "responses>messages");
    CHECK_EQ_INT(DIALECT_BIT(API_MESSAGES), 4);
    CHECK_EQ_INT(dialect_plan(API_MESSAGES, API_CHAT, NULL, NULL), DIALECT_TRANSLATE);
    CHECK_EQ_INT(dialect_plan(API_MESSAGES, API_MESSAGES, NULL, NULL), DIALECT_NONE);
    /* a chat request is translated into the Messages API (test_to_messages_request.c) */
    dialect_error err;
    sbuf out = SBUF_INIT;
    static const char chat[] = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    CHECK_EQ_INT(dialect_request(API_CHAT, API_MESSAGES, NULL, chat, sizeof chat - 1, &out, NULL, &err), 0);
    CHECK(strstr(out.p, "\"max_tokens\":8192") != NULL);
    /* the same dialect goes as it came; a forced stream adds no chat stream_options */
    policy_dialect r;
    memset(&r, 0, sizeof r);
    r.stream = 1;
    int streams = 0;
    CHECK_EQ_INT(dialect_request(API_MESSAGES, API_MESSAGES, NULL, chat, sizeof chat - 1, &out, &streams, &err), 0);
    CHECK_EQ_STR(out.p, chat);
    CHECK_EQ_INT(dialect_request(API_MESSAGES, API_MESSAGES, &r, chat, sizeof chat - 1, &out, &streams, &err), 0);
    CHECK_EQ_INT(streams, 1);
    CHECK(strstr(out.p, "\"stream\":true") != NULL && strstr(out.p, "stream_options") == NULL);
    sbuf_free(&out);
}

static void test_count_tokens_is_an_estimate_from_the_text(void)
{
    /* 16 bytes of system text, 8 of message text, a tool: name 4 bytes,
     * description 4, schema {"type":"object"} 17 bytes: 49 bytes, 13 tokens;
     * an image: 1600 more */
    static const char body[] = "{\"model\":\"m\",\"system\":[{\"type\":\"text\",\"text\":\"0123456789abcdef\"}],"
                               "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"01234567\"},"
                               "{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\","
                               "\"data\":\"AAAA\"}}]},{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\","
                               "\"thinking\":\"not counted\",\"signature\":\"s\"}]}],"
                               "\"tools\":[{\"name\":\"Bash\",\"description\":\"runs\",\"input_schema\":{\"type\":"
                               "\"object\"}}]}";
    CHECK_EQ_INT(messages_count_tokens_estimate(body, sizeof body - 1), 13 + MESSAGES_COUNT_MEDIA_TOKENS);
    static const char results[] = "{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":"
                                  "\"t\",\"name\":\"ab\",\"input\":{}}]},{\"role\":\"user\",\"content\":[{\"type\":"
                                  "\"tool_result\",\"tool_use_id\":\"t\",\"content\":[{\"type\":\"text\",\"text\":"
                                  "\"abcd\"}]}]}]}";
    CHECK_EQ_INT(messages_count_tokens_estimate(results, sizeof results - 1), 2); /* "ab" "{}" "abcd": 8 bytes */
    CHECK_EQ_INT(messages_count_tokens_estimate("{\"messages\":[]}", 15), 0);
    CHECK_EQ_INT(messages_count_tokens_estimate("{\"model\":\"m\"}", 13), -1);
    CHECK_EQ_INT(messages_count_tokens_estimate("not json", 8), -1);
    CHECK_EQ_INT(messages_count_tokens_estimate(NULL, 0), -1);
}

int main(void)
{
    RUN(test_a_claude_code_request_becomes_a_responses_request);
    RUN(test_a_claude_code_request_becomes_a_chat_request);
    RUN(test_ids_openai_would_find_too_long_go_hashed);
    RUN(test_thinking_budgets_and_efforts_map_to_reasoning_effort);
    RUN(test_tool_choice_maps_and_goes_only_beside_tools);
    RUN(test_documents_go_as_files_where_the_target_takes_them);
    RUN(test_anthropic_only_fields_are_refused_with_their_path_unless_ignored);
    RUN(test_fields_only_anthropic_serving_asks_for_are_left_out);
    RUN(test_refusals_name_the_field_as_anthropic_writes_paths);
    RUN(test_a_system_message_in_the_conversation_stays_where_it_stands);
    RUN(test_sampling_limits_and_stop_sequences);
    RUN(test_a_structured_output_format_becomes_the_targets);
    RUN(test_a_schema_too_deep_for_the_target_is_refused);
    RUN(test_the_upstreams_rules_apply_after_the_translation);
    RUN(test_the_messages_dialect_has_its_name_and_its_pairs);
    RUN(test_count_tokens_is_an_estimate_from_the_text);
    return check_summary();
}
