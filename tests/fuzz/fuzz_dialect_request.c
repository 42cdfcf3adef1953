/* fuzz_dialect_request.c: the request side of the dialect wing
 * (src/dialect/: dialect_request through the table of pairs, the three
 * translators, adapt on raw bytes) on any bytes. The input is the client's
 * body for each of the nine client × upstream pairs (chat, responses,
 * messages), and the Messages token estimate, under five rule sets: none,
 * the ChatGPT
 * backend's, a Chat relay's (ignore lists, Anthropic's fields among them,
 * a rename, stream forced), rules that fight each other (renames onto forced and
 * dropped names, forced names dropped), and only the rules the plan
 * decides from the request's facts (stream, store, instructions). What
 * must hold: a refusal is a 400 with a code and a message and leaves the
 * output empty; bytes that json_parse takes as an object are never refused
 * in the same dialect, and nothing else is taken; an accepted body parses
 * (json_parse: within its 128 levels too) as an object; *up_stream is what
 * the body's last "stream" says, and true when the rules force it; for a
 * Responses upstream store is false, the instructions non-empty, the input
 * a list, no input item carries an id or a system role when the rules say
 * so; a dropped name is gone; a translated body has its dialect's list
 * (messages, input); a Messages body translated (with no rename among the
 * rules) names no field but OpenAI's: nothing of Anthropic's leaks; a
 * Chat or Responses body translated into the Messages API (no rename or
 * drop among the rules) is one Anthropic takes in shape: only its fields,
 * max_tokens above any thinking budget, roles alternating from user,
 * content lists never empty, tool results first, no empty text, tool_use
 * ids of [A-Za-z0-9_-] with object inputs; the token estimate is -1 exactly when the body is no object with a messages
 * list, else >= 0; in the same dialect, a top-level member no rule names
 * keeps its value byte for byte, with no rules (NULL or all empty) the
 * output is the input byte for byte, and when dialect_plan, given the facts
 * dialect_facts_read takes from the shallow parse the proxy makes, says
 * passthrough, the output is the input byte for byte too. */
#include "fuzz_common.h"
#include "base/json.h"
#include "dialect/adapt.h"
#include "dialect/dialect.h"
#include <string.h>

enum { FUZZ_RULES = 5 };

static void fuzz_add(char (*list)[POLICY_DIALECT_NAME_MAX], size_t *n, const char *name)
{
    sbuf_copy_cstr(list[(*n)++], POLICY_DIALECT_NAME_MAX, name);
}

/* The rule sets (index 0: none, NULL). */
static void fuzz_rules(policy_dialect r[FUZZ_RULES])
{
    memset(r, 0, sizeof(policy_dialect) * FUZZ_RULES);
    /* 1: the ChatGPT backend */
    r[1].stream = r[1].store_off = r[1].input_list = r[1].strip_item_ids = r[1].has_instructions = 1;
    sbuf_copy_cstr(r[1].system_role, sizeof r[1].system_role, "developer");
    sbuf_copy_cstr(r[1].instructions, sizeof r[1].instructions, "You are a helpful assistant.");
    static const char *const drop1[] = {"max_output_tokens", "temperature", "top_p", "frequency_penalty",
                                        "presence_penalty"};
    for (size_t i = 0; i < sizeof drop1 / sizeof drop1[0]; i++)
        fuzz_add(r[1].drop, &r[1].n_drop, drop1[i]);
    /* 2: a Chat relay that ignores much, wants max_completion_tokens, streams */
    r[2].stream = 1;
    static const char *const ign[] = {"include", "reasoning.summary", "truncation", "store", "metadata",
                                      "prompt_cache_key", "tools.web_search", "tools.web_search_preview",
                                      "tools.file_search", "tools.custom", "content.input_audio", "role.function",
                                      "input.item_reference", "n", "stop", "logprobs", "seed", "audio",
                                      "function_call", "background", "previous_response_id",
                                      /* a Messages client's: Anthropic's own fields, tools and blocks */
                                      "top_k", "stop_sequences", "container", "mcp_servers", "inference_geo",
                                      "tools.web_search_20250305", "tools.bash_20250124", "content.search_result",
                                      "content.document", "content.image", "content.server_tool_use",
                                      "content.web_search_tool_result", "output_config.task_budget"};
    for (size_t i = 0; i < sizeof ign / sizeof ign[0]; i++)
        fuzz_add(r[2].ignore, &r[2].n_ignore, ign[i]);
    fuzz_add(r[2].rename_from, &r[2].n_rename, "max_tokens");
    sbuf_copy_cstr(r[2].rename_to[0], POLICY_DIALECT_NAME_MAX, "max_completion_tokens");
    /* 3: rules that fight: renames onto forced, dropped and swapped names */
    r[3].stream = r[3].store_off = r[3].has_instructions = r[3].input_list = 1;
    sbuf_copy_cstr(r[3].system_role, sizeof r[3].system_role, "user");
    sbuf_copy_cstr(r[3].instructions, sizeof r[3].instructions, "Be \"exact\".\n");
    static const char *const from3[] = {"x", "a", "b", "model", "tools"};
    static const char *const to3[] = {"stream", "b", "a", "store", "input"};
    for (size_t i = 0; i < sizeof from3 / sizeof from3[0]; i++) {
        fuzz_add(r[3].rename_from, &r[3].n_rename, from3[i]);
        sbuf_copy_cstr(r[3].rename_to[i], POLICY_DIALECT_NAME_MAX, to3[i]);
    }
    static const char *const drop3[] = {"stream", "instructions", "a", "messages", "seed"};
    for (size_t i = 0; i < sizeof drop3 / sizeof drop3[0]; i++)
        fuzz_add(r[3].drop, &r[3].n_drop, drop3[i]);
    /* 4: only rules the facts decide (stream, store, instructions): the
     * plan can say passthrough, and must be right when it does */
    r[4].stream = r[4].store_off = r[4].has_instructions = 1;
    sbuf_copy_cstr(r[4].instructions, sizeof r[4].instructions, "x");
}

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

/* The facts as the plan had them before dialect_facts_read (exact 0):
 * what adapt itself goes by (the last copy; store counts as said only as
 * a boolean; instructions only as a non-empty string). */
static dialect_req_facts fuzz_facts_legacy(const json_value *doc)
{
    const json_value *st = json_get(doc, "stream"), *store = json_get(doc, "store");
    const json_value *ins = json_get(doc, "instructions");
    dialect_req_facts f;
    memset(&f, 0, sizeof f);
    f.stream = st && st->type == JSON_TRUE;
    f.has_instructions = ins && ins->type == JSON_STRING && ins->str_len > 0;
    f.store_absent = !store || (store->type != JSON_TRUE && store->type != JSON_FALSE);
    f.store_true = store && store->type == JSON_TRUE;
    return f;
}

/* Every name of a and b has the same last value in both. */
static void fuzz_same_reading(const json_value *a, const json_value *b)
{
    const json_value *docs[2] = {a, b};
    for (int d = 0; d < 2; d++)
        for (const json_value *m = docs[d]->child; m; m = m->next) {
            const json_value *x = json_get(a, m->key), *y = json_get(b, m->key);
            FUZZ_CHECK(x && y);
            sbuf sx = SBUF_INIT, sy = SBUF_INIT;
            json_write(&sx, x);
            json_write(&sy, y);
            FUZZ_CHECK(sx.len == sy.len && memcmp(sx.p, sy.p, sx.len) == 0);
            sbuf_free(&sx);
            sbuf_free(&sy);
        }
}

static int fuzz_listed(const char (*list)[POLICY_DIALECT_NAME_MAX], size_t n, const char *name)
{
    return refuse_listed(list, n, name);
}

/* A top-level member no rule names keeps its (last) value byte for byte:
 * not owned, not dropped, not renamed away. The first 16 names of doc. */
static void fuzz_untouched_bytes(api_kind upstream, const policy_dialect *r, const char *in, size_t n,
                                 const json_value *doc, const sbuf *out)
{
    size_t k = 0;
    for (const json_value *m = doc->child; m && k < 16; m = m->next, k++) {
        if (r && (adapt_owns(upstream, r, m->key) || fuzz_listed((const char (*)[POLICY_DIALECT_NAME_MAX])r->drop,
                                                                   r->n_drop, m->key) ||
                  fuzz_listed((const char (*)[POLICY_DIALECT_NAME_MAX])r->rename_from, r->n_rename, m->key)))
            continue;
        size_t a0, a1, b0, b1;
        FUZZ_CHECK(json_member_span(in, n, m->key, &a0, &a1) == 0);
        FUZZ_CHECK(json_member_span(out->p, out->len, m->key, &b0, &b1) == 0);
        FUZZ_CHECK(a1 - a0 == b1 - b0 && memcmp(in + a0, out->p + b0, a1 - a0) == 0);
    }
}

/* 1 when v is a string of exactly the bytes of lit (a NUL inside counts). */
static int fuzz_is(const json_value *v, const char *lit)
{
    return v && v->type == JSON_STRING && v->str_len == strlen(lit) && memcmp(v->str, lit, v->str_len) == 0;
}

/* A translated Messages body names only fields of OpenAI's APIs (the
 * translation's, and what adapt may add): Anthropic's own never leak. */
static void fuzz_openai_names(const json_value *got)
{
    static const char *const names[] = {"model", "input", "messages", "instructions", "max_output_tokens",
                                        "max_tokens", "user", "stop", "stream", "stream_options", "tools",
                                        "tool_choice", "parallel_tool_calls", "reasoning", "reasoning_effort",
                                        "text", "response_format", "temperature", "top_p", "store"};
    for (const json_value *m = got->child; m; m = m->next) {
        int known = 0;
        for (size_t i = 0; i < sizeof names / sizeof names[0] && !known; i++)
            known = strcmp(m->key, names[i]) == 0;
        FUZZ_CHECK(known);
    }
}

/* A body translated into the Messages API is one api.anthropic.com takes
 * in shape (the mock's strict checks, tests/mock_upstream.c): only its
 * fields; max_tokens an integer of 1 or more, above a thinking budget;
 * messages a non-empty list whose roles alternate from user, each with a
 * non-empty content list of typed blocks, a user message's tool results
 * before its other blocks, no empty text, every tool_use with an id of
 * [A-Za-z0-9_-] and an object input. */
static void fuzz_anthropic_body(const json_value *got)
{
    static const char *const names[] = {"model", "messages", "max_tokens", "system", "metadata", "stop_sequences",
                                        "stream", "temperature", "top_p", "tools", "tool_choice", "thinking",
                                        "output_config"};
    for (const json_value *m = got->child; m; m = m->next) {
        int known = 0;
        for (size_t i = 0; i < sizeof names / sizeof names[0] && !known; i++)
            known = strcmp(m->key, names[i]) == 0;
        FUZZ_CHECK(known);
    }
    int64_t max = 0, budget = 0;
    FUZZ_CHECK(json_get_int64(got, "max_tokens", 1, INT64_MAX / 2, &max) == 0);
    const json_value *th = json_get(got, "thinking");
    if (th)
        FUZZ_CHECK(json_get_int64(th, "budget_tokens", 1024, INT64_MAX / 2, &budget) == 0 && max > budget);
    const json_value *msgs = json_get(got, "messages");
    FUZZ_CHECK(msgs && msgs->type == JSON_ARRAY && msgs->count);
    int want_user = 1;
    for (const json_value *m = msgs->child; m; m = m->next, want_user = !want_user) {
        FUZZ_CHECK(fuzz_is(json_get(m, "role"), want_user ? "user" : "assistant"));
        const json_value *content = json_get(m, "content");
        FUZZ_CHECK(content && content->type == JSON_ARRAY && content->count);
        int others = 0;
        for (const json_value *b = content->child; b; b = b->next) {
            const char *t = json_get_str(b, "type");
            FUZZ_CHECK(t != NULL);
            if (strcmp(t, "tool_result") == 0)
                FUZZ_CHECK(want_user && !others);
            else
                others = 1;
            if (strcmp(t, "text") == 0) {
                const json_value *text = json_get(b, "text");
                FUZZ_CHECK(text && text->type == JSON_STRING && text->str_len);
            }
            if (strcmp(t, "tool_use") == 0) {
                const json_value *id = json_get(b, "id"), *in = json_get(b, "input");
                FUZZ_CHECK(!want_user && id && id->type == JSON_STRING && id->str_len && in &&
                           in->type == JSON_OBJECT);
                for (size_t k = 0; k < id->str_len; k++)
                    FUZZ_CHECK(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", id->str[k]) &&
                               id->str[k]);
            }
        }
    }
}

/* An accepted body against the rules and the pair. */
static void fuzz_check_body(api_kind client, api_kind upstream, const policy_dialect *r, const json_value *doc,
                            const json_value *got, int up_stream)
{
    FUZZ_CHECK(got->type == JSON_OBJECT);
    const json_value *st = json_get(got, "stream");
    FUZZ_CHECK(up_stream == (st && st->type == JSON_TRUE));
    if (r && r->stream)
        FUZZ_CHECK(up_stream == 1);
    const char *list_name = upstream == API_RESPONSES ? "input" : "messages";
    int list_dropped = r && refuse_listed((const char (*)[POLICY_DIALECT_NAME_MAX])r->drop, r->n_drop, list_name);
    if (client != upstream && !list_dropped) {
        const json_value *list = json_get(got, list_name);
        FUZZ_CHECK(list && list->type == JSON_ARRAY);
    }
    if (client == API_MESSAGES && upstream != API_MESSAGES && (!r || !r->n_rename))
        fuzz_openai_names(got);
    if (client != API_MESSAGES && upstream == API_MESSAGES && (!r || (!r->n_rename && !r->n_drop)))
        fuzz_anthropic_body(got);
    if (r) {
        for (size_t i = 0; i < r->n_drop; i++) {
            const char *name = r->drop[i];
            int owned = (r->stream && strcmp(name, "stream") == 0) ||
                        (upstream == API_RESPONSES &&
                         ((r->store_off && strcmp(name, "store") == 0) ||
                          (r->has_instructions && strcmp(name, "instructions") == 0) ||
                          ((r->input_list || r->strip_item_ids || r->system_role[0] || r->has_instructions) &&
                           strcmp(name, "input") == 0)));
            if (!owned)
                FUZZ_CHECK(!json_get(got, name));
        }
    }
    if (!r || upstream != API_RESPONSES)
        return;
    const json_value *store = json_get(got, "store"), *ins = json_get(got, "instructions");
    const json_value *input = json_get(got, "input");
    if (r->store_off)
        FUZZ_CHECK(store && store->type == JSON_FALSE);
    if (r->has_instructions) /* the default's own text when the body had none */
        FUZZ_CHECK(ins && ins->type == JSON_STRING && (ins->str_len > 0 || !r->instructions[0]));
    if (r->input_list && input)
        FUZZ_CHECK(input->type != JSON_STRING);
    for (const json_value *it = input && input->type == JSON_ARRAY ? input->child : NULL; it; it = it->next) {
        if (it->type != JSON_OBJECT)
            continue;
        const json_value *type = json_get(it, "type");
        if (r->strip_item_ids && !fuzz_is(type, "item_reference"))
            for (const json_value *m = it->child; m; m = m->next)
                FUZZ_CHECK(strcmp(m->key, "id") != 0);
        if (r->system_role[0] && (!type || fuzz_is(type, "message")))
            for (const json_value *m = it->child; m; m = m->next)
                FUZZ_CHECK(strcmp(m->key, "role") != 0 || !fuzz_is(m, "system") ||
                           strcmp(r->system_role, "system") == 0);
    }
    (void)doc;
}

static int fuzz_rules_empty(const policy_dialect *r)
{
    static const policy_dialect none;
    return !r || memcmp(r, &none, sizeof none) == 0;
}

static void fuzz_one(api_kind client, api_kind upstream, const policy_dialect *r, const char *in, size_t n,
                     const json_value *doc, const dialect_req_facts *facts)
{
    sbuf out = SBUF_INIT;
    sbuf_puts(&out, "stale");
    dialect_error err;
    memset(&err, 0x5a, sizeof err); /* dialect_request fills what it says */
    int up_stream = 7;
    int object = doc && doc->type == JSON_OBJECT;
    int rc = dialect_request(client, upstream, r, in, n, &out, &up_stream, &err);
    if (rc != 0) {
        FUZZ_CHECK(rc == -1 && out.len == 0 && up_stream == 7);
        FUZZ_CHECK(err.status == 400);
        FUZZ_CHECK(memchr(err.param, '\0', sizeof err.param) && memchr(err.code, '\0', sizeof err.code));
        FUZZ_CHECK(memchr(err.message, '\0', sizeof err.message) && err.message[0] && err.code[0]);
        FUZZ_CHECK(client != upstream || !object); /* adapt takes every object json_parse takes */
        sbuf_free(&out);
        return;
    }
    FUZZ_CHECK(up_stream == 0 || up_stream == 1);
    FUZZ_CHECK(doc != NULL); /* nothing json_parse refuses is taken */
    json_value *got = json_parse(out.p, out.len, NULL, 0);
    FUZZ_CHECK(got != NULL);
    fuzz_check_body(client, upstream, r, doc, got, up_stream);
    if (client == upstream) {
        FUZZ_CHECK(object);
        if (fuzz_rules_empty(r))
            FUZZ_CHECK(out.len == n && memcmp(out.p, in, n) == 0);
        if (dialect_plan(client, upstream, r, facts) == DIALECT_NONE)
            FUZZ_CHECK(out.len == n && memcmp(out.p, in, n) == 0);
        dialect_req_facts legacy = fuzz_facts_legacy(doc);
        if (dialect_plan(client, upstream, r, &legacy) == DIALECT_NONE)
            fuzz_same_reading(doc, got);
        fuzz_untouched_bytes(upstream, r, in, n, doc, &out);
    }
    json_free(got);
    sbuf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    const char *in = (const char *)data;
    json_value *doc = json_parse(in, n, NULL, 0); /* NULL: refused, never a crash */
    /* the facts as the proxy reads them: from request.c's shallow parse */
    json_value *shallow = json_parse_shallow(in, n, 1, NULL, 0);
    FUZZ_CHECK(!shallow == !doc);
    dialect_req_facts facts;
    dialect_facts_read(&facts, shallow);
    FUZZ_CHECK(facts.exact == (doc && doc->type == JSON_OBJECT));
    json_free(shallow);
    policy_dialect rules[FUZZ_RULES];
    fuzz_rules(rules);
    static const api_kind apis[] = {API_CHAT, API_RESPONSES, API_MESSAGES};
    for (size_t c = 0; c < 3; c++)
        for (size_t u = 0; u < 3; u++)
            for (size_t k = 0; k < FUZZ_RULES; k++) {
                dialect_req_facts f = facts4(0, 0, 1, 0);
                dialect_step step = dialect_plan(apis[c], apis[u], k ? &rules[k] : NULL, &f);
                FUZZ_CHECK(step == DIALECT_NONE || step == DIALECT_ADAPT || step == DIALECT_TRANSLATE);
                FUZZ_CHECK((step == DIALECT_TRANSLATE) == (c != u));
                /* a pair has a name when it has a translator: every pair of two dialects */
                FUZZ_CHECK((strlen(dialect_pair_name(apis[c], apis[u])) > 0) == (c != u));
                fuzz_one(apis[c], apis[u], k ? &rules[k] : NULL, in, n, doc, &facts);
                if (!k && c == u) /* rules that are there and say nothing */
                    fuzz_one(apis[c], apis[u], &rules[0], in, n, doc, &facts);
            }
    /* the token estimate: -1 exactly for what has no messages list */
    long tokens = messages_count_tokens_estimate(in, n);
    const json_value *msgs = json_get(doc, "messages");
    FUZZ_CHECK(tokens >= -1 && (tokens >= 0) == (msgs && msgs->type == JSON_ARRAY));
    json_free(doc);
    return 0;
}
