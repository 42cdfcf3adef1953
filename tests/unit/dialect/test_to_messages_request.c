/* test_to_messages_request.c: a Chat Completions request and a Responses
 * request written as an Anthropic Messages request
 * (dialect/to_messages_request.c through dialect_request): docs/clients.md's
 * "Into the Messages API" Request table, row by row; the roles merged to
 * alternate, tool results first; the thinking budget and when it is left
 * out; the refusals with their OpenAI paths; the ignore list; the rules
 * after the translation. Every output is parsed back.
 *
 * Bodies are written with ' for " (q()): JSON is easier to read so. */
#include "check.h"
#include "dialect_check.h"
#include "base/sha256.h"
#include "dialect/dialect.h"
#include "dialect/to_messages_request.h"

/* s with every ' made " (a JSON body written readably); freed by the caller. */
static char *q(const char *s)
{
    char *d = strdup(s);
    for (char *p = d; *p; p++)
        if (*p == '\'')
            *p = '"';
    return d;
}

/* body (single-quoted) from client to the Messages API with rules: the
 * parsed output, or NULL when refused (err filled and checked). */
static json_value *to_rules(api_kind client, const char *sq, const policy_dialect *rules, dialect_error *err,
                            int *streams)
{
    char *body = q(sq);
    sbuf out = SBUF_INIT;
    dialect_error spare;
    int st = -1;
    if (!err)
        err = &spare;
    int rc = dialect_request(client, API_MESSAGES, rules, body, strlen(body), &out, &st, err);
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
    } else if (err == &spare) {
        fprintf(stderr, "  refused: %s (%s)\n", err->message, err->param);
    }
    sbuf_free(&out);
    free(body);
    return got;
}

static json_value *to(api_kind client, const char *sq)
{
    return to_rules(client, sq, NULL, NULL, NULL);
}

/* body is refused naming param (and code, when given). */
static void refused(api_kind client, const char *sq, const policy_dialect *rules, const char *param, const char *code)
{
    dialect_error err;
    memset(&err, 0, sizeof err);
    json_value *got = to_rules(client, sq, rules, &err, NULL);
    CHECK(got == NULL);
    CHECK_EQ_STR(err.param, param);
    if (code)
        CHECK_EQ_STR(err.code, code);
    if (got || strcmp(err.param, param) != 0)
        fprintf(stderr, "  refused %s? %s\n", param, got ? "(taken)" : err.message);
    json_free(got);
}

typedef struct want {
    const char *path, *value;
} want;

/* Each path holds the string given; NULL: the path holds nothing. */
static void expect(const json_value *g, const want *w, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *got = jstr(g, w[i].path);
        int ok = w[i].value ? got && strcmp(got, w[i].value) == 0 : jpath(g, w[i].path) == NULL;
        if (!ok) {
            fprintf(stderr, "  %s: \"%s\", expected \"%s\"\n", w[i].path,
                    got ? got : jpath(g, w[i].path) ? "(other)" : "(none)", w[i].value ? w[i].value : "(none)");
            check_cur_failed = 1;
        }
    }
}

static long jnum(const json_value *g, const char *path)
{
    const json_value *v = jpath(g, path);
    return v && v->type == JSON_NUMBER ? (long)v->num : -999;
}

static int jis(const json_value *g, const char *path, json_type t)
{
    const json_value *v = jpath(g, path);
    return v && v->type == t;
}

#define CHAT(x) "{'model':'claude-sonnet-4-5','messages':[{'role':'user','content':'hi'}]" x "}"
#define RSP(x) "{'model':'claude-sonnet-4-5','input':'hi'" x "}"

/* ---------- the request table, Chat Completions ---------- */

/* A chat client's tool round: a system message, a user turn with images,
 * an assistant turn of two parallel calls, their two tool messages and a
 * user text after them; tools, a forced choice, one call at a time. */
#define CHAT_ROUND                                                                                                   \
    "{'model':'claude-sonnet-4-5','messages':["                                                                      \
    "{'role':'system','content':'Be brief.'},"                                                                       \
    "{'role':'user','content':[{'type':'text','text':'What is this?'},"                                              \
    "{'type':'image_url','image_url':{'url':'data:image/png;base64,iVBORw0KGgo=','detail':'high'}},"                \
    "{'type':'image_url','image_url':{'url':'https://x.test/a.jpg'}}]},"                                             \
    "{'role':'assistant','content':'','tool_calls':["                                                                \
    "{'id':'call_1','type':'function','function':{'name':'get','arguments':'{\\'a\\':1}'}},"                        \
    "{'id':'functions.get:1','type':'function','function':{'name':'get','arguments':''}}]},"                        \
    "{'role':'tool','tool_call_id':'call_1','content':'one'},"                                                       \
    "{'role':'tool','tool_call_id':'functions.get:1','content':[{'type':'text','text':'two'}]},"                    \
    "{'role':'user','content':'thanks'}],"                                                                           \
    "'tools':[{'type':'function','function':{'name':'get','description':'Gets.','parameters':"                      \
    "{'properties':{'a':{'type':'integer'}}},'strict':true}}],"                                                      \
    "'tool_choice':'required','parallel_tool_calls':false,'max_tokens':50,'max_completion_tokens':100,"              \
    "'stop':'END','user':'u1','stream':true,'stream_options':{'include_usage':true},'n':1,'store':true,"             \
    "'metadata':{'k':'v'},'temperature':0.5,'top_p':0.9,'prompt_cache_key':'p','service_tier':'auto'}"

static void test_a_chat_tool_round_becomes_a_messages_request(void)
{
    int streams = -1;
    json_value *g = to_rules(API_CHAT, CHAT_ROUND, NULL, NULL, &streams);
    CHECK(g != NULL);
    CHECK_EQ_INT(streams, 1);
    static const want w[] = {
        {"model", "claude-sonnet-4-5"},
        /* the system message as the system prompt, cached */
        {"system.0.type", "text"}, {"system.0.text", "Be brief."}, {"system.0.cache_control.type", "ephemeral"},
        {"system.1", NULL},
        /* the user turn: text, a data URL as base64, a URL by URL */
        {"messages.0.role", "user"}, {"messages.0.content.0.text", "What is this?"},
        {"messages.0.content.0.cache_control", NULL},
        {"messages.0.content.1.type", "image"}, {"messages.0.content.1.source.type", "base64"},
        {"messages.0.content.1.source.media_type", "image/png"},
        {"messages.0.content.1.source.data", "iVBORw0KGgo="}, {"messages.0.content.1.detail", NULL},
        {"messages.0.content.2.source.type", "url"}, {"messages.0.content.2.source.url", "https://x.test/a.jpg"},
        /* the assistant's "" beside its calls is no block; its calls are
         * tool_use blocks, arguments parsed; an id Anthropic refuses hashed */
        {"messages.1.role", "assistant"}, {"messages.1.content.0.type", "tool_use"},
        {"messages.1.content.0.id", "call_1"}, {"messages.1.content.0.name", "get"},
        {"messages.1.content.2", NULL},
        /* both results and the text after them: one user message, results first */
        {"messages.2.role", "user"}, {"messages.2.content.0.type", "tool_result"},
        {"messages.2.content.0.tool_use_id", "call_1"}, {"messages.2.content.0.content", "one"},
        {"messages.2.content.1.content", "two"},
        {"messages.2.content.2.type", "text"}, {"messages.2.content.2.text", "thanks"},
        /* the conversation's last block carries the cache hint */
        {"messages.2.content.2.cache_control.type", "ephemeral"}, {"messages.3", NULL},
        /* tools: parameters as input_schema, its object type said; strict left out */
        {"tools.0.name", "get"}, {"tools.0.description", "Gets."}, {"tools.0.input_schema.type", "object"},
        {"tools.0.input_schema.properties.a.type", "integer"}, {"tools.0.strict", NULL}, {"tools.0.type", NULL},
        {"tool_choice.type", "any"}, {"stop_sequences.0", "END"}, {"metadata.user_id", "u1"},
        /* what the Messages API has no use for is left out */
        {"stream_options", NULL}, {"n", NULL}, {"store", NULL}, {"user", NULL}, {"prompt_cache_key", NULL},
        {"service_tier", NULL}, {"max_completion_tokens", NULL}, {"metadata.k", NULL}, {"stop", NULL},
    };
    expect(g, w, sizeof w / sizeof w[0]);
    /* the id Anthropic would refuse (":", ".") goes as its SHA-256, in the call and in its result */
    char hex[65];
    sha256_hex("functions.get:1", 15, hex);
    CHECK_EQ_STR(jstr(g, "messages.1.content.1.id"), hex);
    CHECK_EQ_STR(jstr(g, "messages.2.content.1.tool_use_id"), hex);
    CHECK_EQ_INT(jnum(g, "messages.1.content.0.input.a"), 1);
    CHECK(jis(g, "messages.1.content.1.input", JSON_OBJECT) && jcount(g, "messages.1.content.1.input") == 0);
    CHECK(jis(g, "tool_choice.disable_parallel_tool_use", JSON_TRUE));
    CHECK_EQ_INT(jnum(g, "max_tokens"), 100); /* max_completion_tokens replaced max_tokens: it wins */
    CHECK(jis(g, "stream", JSON_TRUE));
    CHECK(jpath(g, "temperature")->num == 0.5 && jpath(g, "top_p")->num == 0.9);
    json_free(g);
}

static void test_a_plain_chat_request_gets_the_default_max_tokens(void)
{
    json_value *g = to(API_CHAT, CHAT(""));
    CHECK(g != NULL);
    CHECK_EQ_INT(jnum(g, "max_tokens"), TO_MESSAGES_MAX_TOKENS);
    /* no system prompt, no tools, no stream member, one user message cached */
    static const want w[] = {{"system", NULL},         {"tools", NULL},
                             {"tool_choice", NULL},    {"stream", NULL},
                             {"thinking", NULL},       {"messages.0.content.0.text", "hi"},
                             {"messages.0.content.0.cache_control.type", "ephemeral"}};
    expect(g, w, sizeof w / sizeof w[0]);
    json_free(g);
    int streams = -1;
    g = to_rules(API_CHAT, CHAT(",'stream':false"), NULL, NULL, &streams);
    CHECK(g && jis(g, "stream", JSON_FALSE) && streams == 0);
    json_free(g);
}

/* ---------- the request table, Responses (Codex) ---------- */

/* What Codex sends on a tool loop's next request: instructions, a
 * developer message, its environment and the prompt, the reasoning item
 * of the last answer (encrypted), the assistant's text, its call and the
 * call's output; function tools, reasoning, include, a cache key. */
#define CODEX_LOOP                                                                                                   \
    "{'model':'claude-sonnet-4-5','instructions':'You are Codex.','input':["                                        \
    "{'type':'message','role':'developer','content':[{'type':'input_text','text':'sandbox: workspace-write'}]},"    \
    "{'type':'message','role':'user','content':[{'type':'input_text','text':'<environment_context/>'}]},"           \
    "{'type':'message','role':'user','content':[{'type':'input_text','text':'list files'}]},"                       \
    "{'type':'reasoning','id':'rs_1','summary':[{'type':'summary_text','text':'Plan'}],"                            \
    "'encrypted_content':'gAAAAABsecret'},"                                                                          \
    "{'type':'message','role':'assistant','id':'msg_1','content':[{'type':'output_text','text':'Running ls.'}]},"   \
    "{'type':'function_call','id':'fc_1','call_id':'call_A','name':'shell','arguments':'{\\'command\\':[\\'ls\\']}'}," \
    "{'type':'function_call_output','call_id':'call_A','output':'a\\nb'}],"                                        \
    "'tools':[{'type':'function','name':'shell','description':'Runs a command','strict':false,'parameters':"        \
    "{'type':'object','properties':{'command':{'type':'array','items':{'type':'string'}}},'required':['command']}}]," \
    "'tool_choice':'auto','parallel_tool_calls':true,'reasoning':{'effort':'medium','summary':'auto'},"             \
    "'store':false,'stream':true,'include':['reasoning.encrypted_content'],'prompt_cache_key':'conv-1'}"

static void test_a_codex_tool_loop_becomes_a_messages_request(void)
{
    int streams = -1;
    json_value *g = to_rules(API_RESPONSES, CODEX_LOOP, NULL, NULL, &streams);
    CHECK(g != NULL);
    CHECK_EQ_INT(streams, 1);
    static const want w[] = {
        /* instructions, then the developer message: the system prompt */
        {"system.0.text", "You are Codex.\n\nsandbox: workspace-write"},
        /* the two user messages: one user turn */
        {"messages.0.role", "user"}, {"messages.0.content.0.text", "<environment_context/>"},
        {"messages.0.content.1.text", "list files"},
        /* the reasoning item left out; the text and the call one assistant turn */
        {"messages.1.role", "assistant"}, {"messages.1.content.0.text", "Running ls."},
        {"messages.1.content.1.type", "tool_use"}, {"messages.1.content.1.id", "call_A"},
        {"messages.1.content.1.name", "shell"}, {"messages.1.content.1.input.command.0", "ls"},
        {"messages.2.role", "user"}, {"messages.2.content.0.type", "tool_result"},
        {"messages.2.content.0.tool_use_id", "call_A"}, {"messages.2.content.0.content", "a\nb"},
        {"tools.0.name", "shell"}, {"tools.0.input_schema.required.0", "command"},
        {"tool_choice.type", "auto"},
        /* a tool loop in progress: no thinking (its last assistant turn has
         * no signed thinking block to begin with) */
        {"thinking", NULL}, {"include", NULL}, {"reasoning", NULL}, {"store", NULL}, {"prompt_cache_key", NULL},
        {"instructions", NULL}, {"input", NULL},
    };
    expect(g, w, sizeof w / sizeof w[0]);
    CHECK(!jpath(g, "tool_choice.disable_parallel_tool_use"));
    CHECK_EQ_INT(jnum(g, "max_tokens"), TO_MESSAGES_MAX_TOKENS);
    sbuf text = SBUF_INIT;
    json_write(&text, g);
    CHECK(strstr(text.p, "gAAAAABsecret") == NULL && strstr(text.p, "Plan") == NULL);
    sbuf_free(&text);
    json_free(g);
}

static void test_a_responses_request_with_a_string_input_and_parts(void)
{
    json_value *g = to(API_RESPONSES,
                       "{'model':'m','input':[{'role':'user','content':[{'type':'input_text','text':'look'},"
                       "{'type':'input_image','image_url':'data:image/jpeg;base64,/9j/4AAQ','detail':'low'},"
                       "{'type':'input_file','file_url':'https://x.test/a.pdf','filename':'a.pdf'},"
                       "{'type':'input_file','file_data':'data:application/pdf;base64,JVBERi0=','filename':'b.pdf'}]},"
                       "{'type':'function_call','call_id':'call_1','name':'f','arguments':''},"
                       "{'type':'function_call_output','call_id':'call_1','output':[{'type':'input_text','text':'img:'},"
                       "{'type':'input_image','image_url':'https://x.test/i.png'}]}],"
                       "'max_output_tokens':300,'text':{'verbosity':'medium'}}");
    CHECK(g != NULL);
    static const want w[] = {
        {"messages.0.content.1.type", "image"}, {"messages.0.content.1.source.media_type", "image/jpeg"},
        {"messages.0.content.2.type", "document"}, {"messages.0.content.2.source.type", "url"},
        {"messages.0.content.2.source.url", "https://x.test/a.pdf"}, {"messages.0.content.2.title", "a.pdf"},
        {"messages.0.content.3.source.type", "base64"},
        {"messages.0.content.3.source.media_type", "application/pdf"},
        {"messages.0.content.3.source.data", "JVBERi0="}, {"messages.0.content.3.title", "b.pdf"},
        /* a result with an image: a content list, its text first */
        {"messages.2.content.0.content.0.type", "text"}, {"messages.2.content.0.content.0.text", "img:"},
        {"messages.2.content.0.content.1.type", "image"},
        {"messages.2.content.0.content.1.source.url", "https://x.test/i.png"},
        {"output_config", NULL},
    };
    expect(g, w, sizeof w / sizeof w[0]);
    CHECK_EQ_INT(jcount(g, "messages.1.content.0.input"), 0); /* "" arguments: an empty input */
    CHECK_EQ_INT(jnum(g, "max_tokens"), 300);
    json_free(g);
    g = to(API_RESPONSES, RSP(",'instructions':'Be terse.'"));
    CHECK(g != NULL);
    static const want w2[] = {{"system.0.text", "Be terse."}, {"messages.0.content.0.text", "hi"}};
    expect(g, w2, sizeof w2 / sizeof w2[0]);
    json_free(g);
    /* an empty output: a result without content */
    g = to(API_RESPONSES, "{'model':'m','input':[{'role':'user','content':'go'},{'type':'function_call','call_id':'c',"
                          "'name':'f','arguments':'{}'},{'type':'function_call_output','call_id':'c','output':''}]}");
    CHECK(g && jstr(g, "messages.2.content.0.tool_use_id") && !jpath(g, "messages.2.content.0.content"));
    json_free(g);
}

/* ---------- roles ---------- */

static void test_roles_alternate_and_tool_results_come_first(void)
{
    /* two user messages, an empty one between them, two assistant messages,
     * a user text then the tool result of the call before it */
    json_value *g = to(API_CHAT, "{'model':'m','messages':[{'role':'user','content':'a'},{'role':'user','content':''},"
                                 "{'role':'user','content':[{'type':'text','text':''},{'type':'text','text':'b'}]},"
                                 "{'role':'assistant','content':'c'},{'role':'assistant','content':null,'tool_calls':"
                                 "[{'id':'t1','type':'function','function':{'name':'f','arguments':'{}'}}]},"
                                 "{'role':'user','content':'meanwhile'},{'role':'tool','tool_call_id':'t1','content':'r'},"
                                 "{'role':'system','content':'late rule'},{'role':'assistant','content':'d'}]}");
    CHECK(g != NULL);
    static const want w[] = {
        {"messages.0.role", "user"}, {"messages.0.content.0.text", "a"}, {"messages.0.content.1.text", "b"},
        {"messages.0.content.2", NULL},
        {"messages.1.role", "assistant"}, {"messages.1.content.0.text", "c"},
        {"messages.1.content.1.type", "tool_use"},
        {"messages.2.role", "user"}, {"messages.2.content.0.type", "tool_result"},
        {"messages.2.content.1.text", "meanwhile"},
        /* a later system message joins the system prompt */
        {"system.0.text", "late rule"},
        /* a last assistant message goes as it is (Anthropic continues it) */
        {"messages.3.role", "assistant"}, {"messages.3.content.0.text", "d"}, {"messages.4", NULL},
    };
    expect(g, w, sizeof w / sizeof w[0]);
    json_free(g);
    /* a message that says nothing parts nothing: the tool result before an
     * empty assistant turn and the user text after it are one user message */
    g = to(API_CHAT, "{'model':'m','messages':[{'role':'user','content':'x'},{'role':'assistant','tool_calls':[{'id':"
                     "'t1','type':'function','function':{'name':'f','arguments':'{}'}}]},{'role':'tool','tool_call_id':"
                     "'t1','content':'r'},{'role':'assistant','content':''},{'role':'system','content':'s'},"
                     "{'role':'user','content':'y'}]}");
    static const want w2[] = {{"messages.2.role", "user"}, {"messages.2.content.0.type", "tool_result"},
                              {"messages.2.content.1.text", "y"}, {"messages.3", NULL}};
    expect(g, w2, sizeof w2 / sizeof w2[0]);
    json_free(g);
    /* a refusal the assistant gave is what it said */
    g = to(API_CHAT, "{'model':'m','messages':[{'role':'user','content':'x'},{'role':'assistant','content':null,"
                     "'refusal':'No.'},{'role':'user','content':[{'type':'text','text':'why'}]}]}");
    CHECK(g && strcmp(jstr(g, "messages.1.content.0.text"), "No.") == 0);
    json_free(g);
}

static void test_a_conversation_must_open_with_a_user_message(void)
{
    refused(API_CHAT, "{'model':'m','messages':[{'role':'system','content':'s'},{'role':'assistant','content':'hello'},"
                      "{'role':'user','content':'hi'}]}",
            NULL, "messages[1]", REFUSE_INVALID_VALUE);
    refused(API_CHAT, "{'model':'m','messages':[{'role':'system','content':'s'}]}", NULL, "messages", NULL);
    refused(API_RESPONSES, "{'model':'m','instructions':'s'}", NULL, "input", NULL);
    refused(API_RESPONSES, "{'model':'m','input':[{'type':'function_call','call_id':'c','name':'f','arguments':'{}'},"
                           "{'role':'user','content':'x'}]}",
            NULL, "input[0]", NULL);
}

/* ---------- reasoning, max_tokens, sampling ---------- */

static void test_reasoning_effort_becomes_a_thinking_budget(void)
{
    static const struct {
        const char *body;
        long budget, max;
    } cases[] = {
        {CHAT(",'reasoning_effort':'low'"), TO_MESSAGES_BUDGET_LOW, TO_MESSAGES_MAX_TOKENS},
        {CHAT(",'reasoning_effort':'minimal'"), TO_MESSAGES_BUDGET_MINIMAL, TO_MESSAGES_MAX_TOKENS},
        /* a budget at or above the limit: the limit raised by it */
        {CHAT(",'reasoning_effort':'medium'"), TO_MESSAGES_BUDGET_MEDIUM, TO_MESSAGES_MAX_TOKENS + TO_MESSAGES_BUDGET_MEDIUM},
        {CHAT(",'reasoning_effort':'high','max_tokens':100"), TO_MESSAGES_BUDGET_HIGH, 100 + TO_MESSAGES_BUDGET_HIGH},
        {CHAT(",'reasoning_effort':'high','max_completion_tokens':50000"), TO_MESSAGES_BUDGET_HIGH, 50000},
        {RSP(",'reasoning':{'effort':'xhigh'}"), TO_MESSAGES_BUDGET_HIGH, TO_MESSAGES_MAX_TOKENS + TO_MESSAGES_BUDGET_HIGH},
        {RSP(",'reasoning':{'effort':'low','summary':'detailed'},'max_output_tokens':5000"), TO_MESSAGES_BUDGET_LOW, 5000},
        {RSP(",'reasoning':{'effort':'none'}"), 0, TO_MESSAGES_MAX_TOKENS},
        {RSP(",'reasoning':{'summary':'auto'}"), 0, TO_MESSAGES_MAX_TOKENS},
        /* temperature 1 and top_p from 0.95 go with thinking */
        {CHAT(",'reasoning_effort':'low','temperature':1,'top_p':0.95"), TO_MESSAGES_BUDGET_LOW, TO_MESSAGES_MAX_TOKENS},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_value *g = to(strstr(cases[i].body, "'input'") ? API_RESPONSES : API_CHAT, cases[i].body);
        CHECK(g != NULL);
        long budget = jnum(g, "thinking.budget_tokens");
        if (cases[i].budget) {
            CHECK_EQ_STR(jstr(g, "thinking.type"), "enabled");
            CHECK_EQ_INT(budget, cases[i].budget);
        } else {
            CHECK(!jpath(g, "thinking"));
        }
        CHECK_EQ_INT(jnum(g, "max_tokens"), cases[i].max);
        CHECK(!jpath(g, "reasoning_effort") && !jpath(g, "reasoning"));
        json_free(g);
    }
}

static void test_thinking_is_left_out_where_anthropic_refuses_it(void)
{
    /* a forced tool: Anthropic thinks only with auto or none */
    json_value *g = to(API_CHAT, CHAT(",'reasoning_effort':'high','tools':[{'type':'function','function':{'name':'f'}}],"
                                      "'tool_choice':{'type':'function','function':{'name':'f'}}"));
    CHECK(g && !jpath(g, "thinking") && jnum(g, "max_tokens") == TO_MESSAGES_MAX_TOKENS);
    CHECK(g && strcmp(jstr(g, "tool_choice.type"), "tool") == 0 && strcmp(jstr(g, "tool_choice.name"), "f") == 0);
    json_free(g);
    /* a choice without tools forces nothing: no tool_choice, thinking kept */
    g = to(API_CHAT, CHAT(",'reasoning_effort':'low','tool_choice':'required'"));
    CHECK(g && !jpath(g, "tool_choice") && jnum(g, "thinking.budget_tokens") == TO_MESSAGES_BUDGET_LOW);
    json_free(g);
    /* tool_choice none with thinking: kept */
    g = to(API_RESPONSES, RSP(",'reasoning':{'effort':'low'},'tools':[{'type':'function','name':'f'}],"
                              "'tool_choice':'none','parallel_tool_calls':false"));
    CHECK(g && jpath(g, "thinking") && strcmp(jstr(g, "tool_choice.type"), "none") == 0);
    CHECK(g && !jpath(g, "tool_choice.disable_parallel_tool_use")); /* none takes no such member */
    json_free(g);
    /* a tool loop: the last assistant message holds a call */
    g = to(API_RESPONSES, "{'model':'m','reasoning':{'effort':'high'},'input':[{'role':'user','content':'go'},"
                          "{'type':'function_call','call_id':'c','name':'f','arguments':'{}'},"
                          "{'type':'function_call_output','call_id':'c','output':'ok'}]}");
    CHECK(g && !jpath(g, "thinking") && jnum(g, "max_tokens") == TO_MESSAGES_MAX_TOKENS);
    json_free(g);
    /* once the loop is over (the assistant answered, the user spoke): thinking */
    g = to(API_RESPONSES, "{'model':'m','reasoning':{'effort':'high'},'input':[{'role':'user','content':'go'},"
                          "{'type':'function_call','call_id':'c','name':'f','arguments':'{}'},"
                          "{'type':'function_call_output','call_id':'c','output':'ok'},"
                          "{'role':'assistant','content':'done'},{'role':'user','content':'next'}]}");
    CHECK(g && jnum(g, "thinking.budget_tokens") == TO_MESSAGES_BUDGET_HIGH);
    json_free(g);
}

static void test_sampling_that_anthropic_refuses_is_a_400(void)
{
    refused(API_CHAT, CHAT(",'temperature':1.5"), NULL, "temperature", REFUSE_INVALID_VALUE);
    refused(API_CHAT, CHAT(",'temperature':'hot'"), NULL, "temperature", REFUSE_INVALID_TYPE);
    refused(API_CHAT, CHAT(",'reasoning_effort':'low','temperature':0.2"), NULL, "temperature", REFUSE_UNSUPPORTED);
    refused(API_RESPONSES, RSP(",'reasoning':{'effort':'low'},'top_p':0.5"), NULL, "top_p", REFUSE_UNSUPPORTED);
    refused(API_CHAT, CHAT(",'reasoning_effort':'extreme'"), NULL, "reasoning_effort", REFUSE_INVALID_VALUE);
    refused(API_RESPONSES, RSP(",'reasoning':'high'"), NULL, "reasoning", REFUSE_INVALID_TYPE);
    refused(API_CHAT, CHAT(",'max_tokens':0"), NULL, "max_tokens", REFUSE_INVALID_VALUE);
    refused(API_CHAT, CHAT(",'max_completion_tokens':10.5"), NULL, "max_completion_tokens", REFUSE_INVALID_TYPE);
    refused(API_RESPONSES, RSP(",'max_output_tokens':'many'"), NULL, "max_output_tokens", REFUSE_INVALID_TYPE);
    /* without thinking, any temperature from 0 to 1 */
    json_value *g = to(API_CHAT, CHAT(",'temperature':0"));
    CHECK(g && jis(g, "temperature", JSON_NUMBER));
    json_free(g);
}

/* ---------- structured output, verbosity, include ---------- */

static void test_a_json_schema_becomes_output_config(void)
{
    json_value *g = to(API_CHAT, CHAT(",'response_format':{'type':'json_schema','json_schema':{'name':'out',"
                                      "'strict':true,'schema':{'type':'object','properties':{'x':{'type':'string'}}}}}"));
    CHECK(g != NULL);
    static const want w[] = {{"output_config.format.type", "json_schema"},
                             {"output_config.format.schema.properties.x.type", "string"},
                             {"output_config.format.name", NULL}, {"output_config.format.strict", NULL},
                             {"response_format", NULL}};
    expect(g, w, sizeof w / sizeof w[0]);
    json_free(g);
    g = to(API_RESPONSES, RSP(",'text':{'format':{'type':'json_schema','name':'o','schema':{'type':'object'}},"
                              "'verbosity':'medium'}"));
    CHECK(g && strcmp(jstr(g, "output_config.format.schema.type"), "object") == 0 && !jpath(g, "text"));
    json_free(g);
    g = to(API_CHAT, CHAT(",'response_format':{'type':'text'}"));
    CHECK(g && !jpath(g, "output_config"));
    json_free(g);
    /* JSON without a schema: Anthropic has none */
    refused(API_CHAT, CHAT(",'response_format':{'type':'json_object'}"), NULL, "response_format.type",
            REFUSE_UNSUPPORTED);
    refused(API_RESPONSES, RSP(",'text':{'format':{'type':'json_object'}}"), NULL, "text.format.type", NULL);
    refused(API_CHAT, CHAT(",'response_format':{'type':'json_schema','json_schema':{'name':'o'}}"), NULL,
            "response_format.json_schema.schema", REFUSE_MISSING);
    refused(API_RESPONSES, RSP(",'text':{'format':{'type':'yaml'}}"), NULL, "text.format.type", REFUSE_INVALID_VALUE);
    refused(API_CHAT, CHAT(",'verbosity':'low'"), NULL, "verbosity", REFUSE_UNSUPPORTED);
    refused(API_RESPONSES, RSP(",'text':{'verbosity':'high'}"), NULL, "text.verbosity", REFUSE_UNSUPPORTED);
    refused(API_RESPONSES, RSP(",'include':['reasoning.encrypted_content','message.output_text.logprobs']"), NULL,
            "include", REFUSE_UNSUPPORTED);
}

/* ---------- refusals ---------- */

static void test_what_cannot_be_carried_is_a_400_naming_it(void)
{
    static const struct {
        api_kind client;
        const char *body, *param;
    } cases[] = {
        {API_CHAT, CHAT(",'n':2"), "n"},
        {API_CHAT, CHAT(",'logprobs':true"), "logprobs"},
        {API_CHAT, CHAT(",'top_logprobs':3"), "top_logprobs"},
        {API_CHAT, CHAT(",'seed':7"), "seed"},
        {API_CHAT, CHAT(",'frequency_penalty':0.5"), "frequency_penalty"},
        {API_CHAT, CHAT(",'audio':{'voice':'x'}"), "audio"},
        {API_CHAT, CHAT(",'modalities':['text','audio']"), "modalities"},
        {API_CHAT, CHAT(",'functions':[{'name':'f'}]"), "functions"},
        {API_CHAT, CHAT(",'web_search_options':{}"), "web_search_options"},
        /* a field nobody translates: Anthropic would refuse it */
        {API_CHAT, CHAT(",'top_k':5"), "top_k"},
        {API_RESPONSES, RSP(",'previous_response_id':'resp_1'"), "previous_response_id"},
        {API_RESPONSES, RSP(",'truncation':'auto'"), "truncation"},
        {API_RESPONSES, RSP(",'background':true"), "background"},
        {API_RESPONSES, RSP(",'messages':[]"), "messages"},
        {API_CHAT, CHAT(",'input':'x'"), "input"},
        /* arguments that are no JSON object */
        {API_CHAT, "{'model':'m','messages':[{'role':'user','content':'x'},{'role':'assistant','tool_calls':[{'id':'a',"
                   "'type':'function','function':{'name':'f','arguments':'{oops'}}]}]}",
         "messages[1].tool_calls[0].function.arguments"},
        {API_CHAT, "{'model':'m','messages':[{'role':'user','content':'x'},{'role':'assistant','tool_calls':[{'id':'a',"
                   "'type':'function','function':{'name':'f','arguments':'[1]'}}]}]}",
         "messages[1].tool_calls[0].function.arguments"},
        {API_RESPONSES, "{'model':'m','input':[{'role':'user','content':'x'},{'type':'function_call','call_id':'c',"
                        "'name':'f','arguments':'{\\'a\\':'}]}",
         "input[1].arguments"},
        /* parts, items, roles, tools */
        {API_CHAT, "{'model':'m','messages':[{'role':'user','content':[{'type':'input_audio','input_audio':{}}]}]}",
         "messages[0].content[0].type"},
        {API_CHAT, "{'model':'m','messages':[{'role':'user','content':[{'type':'image_url','image_url':{'url':"
                   "'ftp://x.test/a.png'}}]}]}",
         "messages[0].content[0].image_url.url"},
        {API_CHAT, "{'model':'m','messages':[{'role':'user','content':[{'type':'file','file':{'file_id':'file-1'}}]}]}",
         "messages[0].content[0].file.file_id"},
        {API_RESPONSES, "{'model':'m','input':[{'role':'user','content':[{'type':'input_image','file_id':'file-1'}]}]}",
         "input[0].content[0].file_id"},
        {API_CHAT, "{'model':'m','messages':[{'role':'user','content':'x'},{'role':'function','name':'f','content':'r'}]}",
         "messages[1].role"},
        {API_CHAT, "{'model':'m','messages':[{'role':'user','content':'x'},{'role':'assistant','tool_calls':[{'id':'a',"
                   "'type':'custom','custom':{'name':'f','input':'x'}}]}]}",
         "messages[1].tool_calls[0].type"},
        {API_RESPONSES, "{'model':'m','input':[{'type':'item_reference','id':'msg_1'}]}", "input[0].type"},
        {API_RESPONSES, "{'model':'m','input':[{'role':'user','content':'x'},{'type':'web_search_call','id':'ws'}]}",
         "input[1].type"},
        {API_RESPONSES, "{'model':'m','input':[{'role':'user','content':'x'},{'type':'custom_tool_call','call_id':'c',"
                        "'name':'apply_patch','input':'x'}]}",
         "input[1].type"},
        {API_RESPONSES, RSP(",'tools':[{'type':'web_search'}]"), "tools[0].type"},
        {API_RESPONSES, RSP(",'tools':[{'type':'custom','name':'apply_patch'}]"), "tools[0].type"},
        {API_CHAT, CHAT(",'tools':[{'type':'function','function':{'name':'f'}}],'tool_choice':{'type':'allowed_tools',"
                        "'allowed_tools':{'mode':'auto','tools':[]}}"),
         "tool_choice.type"},
        {API_CHAT, CHAT(",'tool_choice':'sometimes'"), "tool_choice"},
        {API_CHAT, CHAT(",'stop':[1]"), "stop"},
        {API_CHAT, "{'model':'m','messages':[{'role':'user'}]}", "messages[0].content"},
        {API_CHAT, "{'model':'m','messages':[{'role':'robot','content':'x'}]}", "messages[0].role"},
        {API_CHAT, "{'model':'m'}", "messages"},
        {API_CHAT, "{'model':'m','messages':[{'role':'user','content':'x'},{'role':'tool','content':'r'}]}",
         "messages[1].tool_call_id"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        refused(cases[i].client, cases[i].body, NULL, cases[i].param, NULL);
    /* the message says where to go instead */
    dialect_error err;
    to_rules(API_CHAT, CHAT(",'n':3"), NULL, &err, NULL);
    CHECK(strstr(err.message, "'n' > 1") && strstr(err.message, "Anthropic Messages API"));
    to_rules(API_RESPONSES, RSP(",'background':true"), NULL, &err, NULL);
    CHECK(strstr(err.message, "speaks the Responses API"));
    /* what asks for nothing passes */
    json_value *g = to(API_CHAT, CHAT(",'n':1,'logprobs':false,'frequency_penalty':0,'logit_bias':{},"
                                      "'modalities':['text'],'function_call':'auto'"));
    CHECK(g != NULL);
    json_free(g);
    g = to(API_RESPONSES, RSP(",'truncation':'disabled','background':false,'top_logprobs':0"));
    CHECK(g != NULL);
    json_free(g);
}

static void test_the_ignore_list_leaves_fields_out(void)
{
    policy_dialect r;
    memset(&r, 0, sizeof r);
    static const char *const names[] = {"n", "seed", "tools.web_search", "content.input_audio", "role.function",
                                        "input.item_reference", "text.verbosity", "verbosity", "include",
                                        "tools.custom", "top_k", "response_format", "content.input_file"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        rules_add(r.ignore, &r.n_ignore, names[i]);
    json_value *g = to_rules(API_CHAT,
                             "{'model':'m','messages':[{'role':'user','content':[{'type':'input_audio','input_audio':{}},"
                             "{'type':'text','text':'x'}]},{'role':'function','name':'f','content':'r'}],'n':3,'seed':1,"
                             "'verbosity':'low','top_k':5,'response_format':{'type':'json_object'}}",
                             &r, NULL, NULL);
    CHECK(g != NULL);
    static const want w[] = {{"messages.0.content.0.text", "x"}, {"messages.0.content.1", NULL}, {"messages.1", NULL},
                             {"n", NULL}, {"seed", NULL}, {"top_k", NULL}, {"output_config", NULL}};
    expect(g, w, sizeof w / sizeof w[0]);
    json_free(g);
    g = to_rules(API_RESPONSES,
                 "{'model':'m','input':[{'type':'item_reference','id':'x'},{'role':'user','content':[{'type':'input_text',"
                 "'text':'x'},{'type':'input_file','file_id':'file-1'}]},{'type':'custom_tool_call','call_id':'c','name':'p',"
                 "'input':'x'},{'type':'custom_tool_call_output','call_id':'c','output':'ok'},{'type':'web_search_call',"
                 "'id':'ws'}],'tools':[{'type':'web_search'},{'type':'custom','name':'p'},{'type':'function','name':'f'}],"
                 "'tool_choice':{'type':'web_search'},'text':{'verbosity':'high'},"
                 "'include':['message.output_text.logprobs']}",
                 &r, NULL, NULL);
    CHECK(g != NULL);
    static const want w2[] = {{"messages.0.content.0.text", "x"}, {"messages.0.content.1", NULL}, {"messages.1", NULL},
                              {"tools.0.name", "f"}, {"tools.1", NULL}, {"tool_choice", NULL}};
    expect(g, w2, sizeof w2 / sizeof w2[0]);
    json_free(g);
    /* tools all ignored: no tools member, and no tool_choice without tools */
    g = to_rules(API_RESPONSES, RSP(",'tools':[{'type':'web_search'}],'tool_choice':'required'"), &r, NULL, NULL);
    CHECK(g && !jpath(g, "tools") && !jpath(g, "tool_choice"));
    json_free(g);
}

/* ---------- the rules, the depth ---------- */

static void test_the_upstreams_rules_apply_to_the_translation(void)
{
    policy_dialect r;
    memset(&r, 0, sizeof r);
    r.stream = 1;
    rules_add(r.drop, &r.n_drop, "temperature");
    int streams = 0;
    json_value *g = to_rules(API_CHAT, CHAT(",'temperature':0.3"), &r, NULL, &streams);
    CHECK(g && streams == 1 && jis(g, "stream", JSON_TRUE) && !jpath(g, "temperature"));
    CHECK(g && !jpath(g, "stream_options")); /* a chat upstream's member, not Anthropic's */
    json_free(g);
    CHECK_EQ_STR(dialect_pair_name(API_CHAT, API_MESSAGES), "chat>messages");
    CHECK_EQ_STR(dialect_pair_name(API_RESPONSES, API_MESSAGES), "responses>messages");
    CHECK_EQ_INT(dialect_plan(API_CHAT, API_MESSAGES, NULL, NULL), DIALECT_TRANSLATE);
}

/* A chat body whose one tool call's arguments are an object nested depth
 * levels (the object counting). */
static char *nested_call(int depth)
{
    sbuf args = SBUF_INIT, body = SBUF_INIT;
    sbuf_puts(&args, "{\"a\":");
    for (int i = 1; i < depth; i++)
        sbuf_puts(&args, "[");
    for (int i = 1; i < depth; i++)
        sbuf_puts(&args, "]");
    sbuf_puts(&args, "}");
    sbuf_puts(&body, "{'model':'m','messages':[{'role':'user','content':'x'},{'role':'assistant','tool_calls':"
                     "[{'id':'a','type':'function','function':{'name':'f','arguments':");
    sbuf_json_str(&body, args.p, args.len);
    sbuf_puts(&body, "}}]}]}");
    sbuf_free(&args); /* its quotes are escaped: q() turns only the body's ' */
    return body.p;
}

static void test_arguments_too_deep_for_the_body_are_refused(void)
{
    char *ok = nested_call(123), *deep = nested_call(124);
    json_value *g = to(API_CHAT, ok);
    CHECK(g != NULL);
    json_free(g);
    refused(API_CHAT, deep, NULL, "messages[1].tool_calls[0].function.arguments", REFUSE_INVALID_VALUE);
    free(ok);
    free(deep);
}

int main(void)
{
    RUN(test_a_chat_tool_round_becomes_a_messages_request);
    RUN(test_a_plain_chat_request_gets_the_default_max_tokens);
    RUN(test_a_codex_tool_loop_becomes_a_messages_request);
    RUN(test_a_responses_request_with_a_string_input_and_parts);
    RUN(test_roles_alternate_and_tool_results_come_first);
    RUN(test_a_conversation_must_open_with_a_user_message);
    RUN(test_reasoning_effort_becomes_a_thinking_budget);
    RUN(test_thinking_is_left_out_where_anthropic_refuses_it);
    RUN(test_sampling_that_anthropic_refuses_is_a_400);
    RUN(test_a_json_schema_becomes_output_config);
    RUN(test_what_cannot_be_carried_is_a_400_naming_it);
    RUN(test_the_ignore_list_leaves_fields_out);
    RUN(test_the_upstreams_rules_apply_to_the_translation);
    RUN(test_arguments_too_deep_for_the_body_are_refused);
    return check_summary();
}
