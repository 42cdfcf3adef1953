/* adapt_bench.c: what adapting a Responses request to the ChatGPT
 * backend's rules costs (src/dialect/adapt.c), on Codex-shaped bodies as
 * Codex CLI sends them to a custom provider: no instructions, its prompt as
 * a leading developer message, then the history (messages with msg_ ids,
 * reasoning items with rs_ ids and 2.5 KB encrypted_content blobs,
 * function calls with fc_ ids and their outputs), Codex's tools, store
 * false, stream true. Two sizes: ~4 KiB (a first turn) and ~512 KiB (a
 * long session: Codex sends the whole history on every request).
 *
 *   adapt_bench                 every case, µs per call (timings: a shared
 *                               VM swings; bench/adapt.sh counts instructions)
 *   adapt_bench CASE N          runs CASE N times in bench_case (callgrind's
 *                               --toggle-collect target); CASE is
 *                               {small,big}_{new,old,parse_write,validate}:
 *     new          adapt_body on the raw bytes (what dialect_request does now)
 *     old          json_parse + the tree-based adapt of before (a copy of it
 *                  below, kept here only) + json_free: what an attempt paid
 *     parse_write  json_parse + json_write + json_free: a tree's floor
 *     validate     json_scan_value of the body: the new walk's floor
 * Prints figures only; checks first that the new and old outputs carry the
 * same request (the new one also moves the developer message). */
#include "base/json.h"
#include "base/sbuf.h"
#include "dialect/adapt.h"
#include "dialect/emit.h"
#include "dialect/refuse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------- the tree-based adapt of before (src/dialect/adapt.c at ab19400), for comparison only ---------- */

typedef struct old_ctx {
    const policy_dialect *r;
    sbuf *out;
    size_t n;                  /* members written */
    size_t n_drop, n_rename;   /* the rules' counts, clamped to their rows */
    int force_stream;          /* the rules own "stream": true */
    int force_store;           /* "store": false (Responses) */
    int want_ins;              /* "instructions" filled when absent or empty (Responses) */
    int touch_input;           /* "input" rewritten (Responses: input_list, system_role, strip_item_ids) */
    char role[sizeof ((policy_dialect *)0)->system_role]; /* system_role, NUL-terminated; "" none */
    /* per rename row: its target may not be written (old_taken), worked
     * out once per body: asking per member would make a body of many
     * members of a renamed name cost its length squared */
    unsigned char taken[POLICY_DIALECT_NAMES];
} old_ctx;

/* A row of a name list as a C string: NULL when it has no NUL within its
 * row or is empty (a name no body can hold). */
static const char *old_row(const char *row, size_t size)
{
    return row[0] && memchr(row, '\0', size) ? row : NULL;
}

static int old_dropped(const old_ctx *c, const char *key)
{
    return refuse_listed((const char (*)[POLICY_DIALECT_NAME_MAX])c->r->drop, c->n_drop, key);
}

/* The rename row for key, -1 for none. */
static int old_rename_of(const old_ctx *c, const char *key)
{
    for (size_t i = 0; i < c->n_rename; i++) {
        const char *from = old_row(c->r->rename_from[i], POLICY_DIALECT_NAME_MAX);
        if (from && strcmp(from, key) == 0 && old_row(c->r->rename_to[i], POLICY_DIALECT_NAME_MAX))
            return (int)i;
    }
    return -1;
}

/* 1 when a forced rule writes the member key itself. */
static int old_owned(const old_ctx *c, const char *key)
{
    return (c->force_stream && strcmp(key, "stream") == 0) || (c->force_store && strcmp(key, "store") == 0) ||
           (c->want_ins && strcmp(key, "instructions") == 0) || (c->touch_input && strcmp(key, "input") == 0);
}

/* Whether a member by the name `to` (a rename's target) may not be
 * written: owned by a rule, dropped, or kept by a member of the body
 * that already has that name (and keeps it). */
static int old_taken(const old_ctx *c, const json_value *doc, const char *to)
{
    if (old_owned(c, to) || old_dropped(c, to))
        return 1;
    return json_get(doc, to) && old_rename_of(c, to) < 0;
}

/* One input item: without "id" (strip_item_ids; an item_reference keeps
 * it: the id is all it is), a system message with the rules' role. */
static void old_item(const old_ctx *c, const json_value *it)
{
    sbuf *out = c->out;
    const json_value *type = json_get(it, "type");
    int message = !type || emit_is(type, "message");
    int reference = emit_is(type, "item_reference");
    size_t n = 0;
    sbuf_append(out, "{", 1);
    for (const json_value *m = it->child; m; m = m->next) {
        if (c->r->strip_item_ids && !reference && strcmp(m->key, "id") == 0)
            continue;
        emit_key(out, &n, m->key);
        if (c->role[0] && message && strcmp(m->key, "role") == 0 && emit_is(m, "system"))
            sbuf_json_str(out, c->role, strlen(c->role));
        else
            json_write(out, m);
    }
    sbuf_append(out, "}", 1);
}

static void old_input(const old_ctx *c, const json_value *input)
{
    sbuf *out = c->out;
    if (input->type == JSON_STRING && c->r->input_list) {
        sbuf_puts(out, "[{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":");
        emit_str(out, input);
        sbuf_puts(out, "}]}]");
        return;
    }
    if (input->type != JSON_ARRAY) {
        json_write(out, input);
        return;
    }
    sbuf_append(out, "[", 1);
    for (const json_value *it = input->child; it; it = it->next) {
        if (it != input->child)
            sbuf_append(out, ",", 1);
        if (it->type == JSON_OBJECT)
            old_item(c, it);
        else
            json_write(out, it);
    }
    sbuf_append(out, "]", 1);
}

static void old_default_instructions(old_ctx *c)
{
    const char *text = c->r->instructions;
    sbuf_json_str(c->out, text, strnlen(text, sizeof c->r->instructions));
}

static int old_adapt_body(api_kind upstream, const policy_dialect *r, const json_value *doc, sbuf *out, int *up_stream,
               dialect_error *err)
{
    if (!doc || doc->type != JSON_OBJECT) {
        refuse_param(err, "%s", "");
        return refuse_set(err, REFUSE_INVALID_TYPE, "The request body must be a JSON object.");
    }
    static const policy_dialect none; /* no rules: every field as it came (const: no state) */
    int resp = upstream == API_RESPONSES;
    old_ctx c = {.r = r ? r : &none, .out = out};
    r = c.r;
    c.n_drop = r->n_drop < POLICY_DIALECT_NAMES ? r->n_drop : POLICY_DIALECT_NAMES;
    c.n_rename = r->n_rename < POLICY_DIALECT_NAMES ? r->n_rename : POLICY_DIALECT_NAMES;
    c.force_stream = r->stream != 0;
    c.force_store = resp && r->store_off;
    c.want_ins = resp && r->has_instructions;
    if (resp && memchr(r->system_role, '\0', sizeof r->system_role))
        memcpy(c.role, r->system_role, sizeof c.role);
    c.touch_input = resp && (r->input_list || r->strip_item_ids || c.role[0]);

    for (size_t i = 0; i < c.n_rename; i++)
        c.taken[i] = (unsigned char)(old_row(r->rename_to[i], POLICY_DIALECT_NAME_MAX) &&
                                     old_taken(&c, doc, r->rename_to[i]));

    const json_value *last_stream = json_get(doc, "stream"), *last_store = json_get(doc, "store");
    const json_value *last_ins = json_get(doc, "instructions"), *last_input = json_get(doc, "input");
    int wrote_stream = 0, wrote_store = 0, wrote_ins = 0, streams = 0;
    sbuf_append(out, "{", 1);
    for (const json_value *m = doc->child; m; m = m->next) {
        const char *key = m->key;
        if (old_owned(&c, key)) {
            if (strcmp(key, "stream") == 0) {
                if (m == last_stream) {
                    emit_key(out, &c.n, "stream");
                    sbuf_puts(out, "true");
                    wrote_stream = 1;
                }
            } else if (strcmp(key, "store") == 0) {
                if (m == last_store) {
                    emit_key(out, &c.n, "store");
                    sbuf_puts(out, "false");
                    wrote_store = 1;
                }
            } else if (strcmp(key, "instructions") == 0) {
                if (m == last_ins) {
                    emit_key(out, &c.n, "instructions");
                    if (m->type == JSON_STRING && m->str_len)
                        emit_str(out, m);
                    else /* null, "", or not text: the upstream requires them */
                        old_default_instructions(&c);
                    wrote_ins = 1;
                }
            } else if (m == last_input) {
                emit_key(out, &c.n, "input");
                old_input(&c, m);
            }
            continue;
        }
        if (old_dropped(&c, key))
            continue;
        int k = old_rename_of(&c, key);
        if (k >= 0) {
            if (c.taken[k])
                continue;
            key = r->rename_to[k];
        }
        emit_key(out, &c.n, key);
        json_write(out, m);
        if (strcmp(key, "stream") == 0)
            streams = m->type == JSON_TRUE; /* the last one written is the one read upstream */
    }
    if (c.force_stream) {
        if (!wrote_stream) {
            emit_key(out, &c.n, "stream");
            sbuf_puts(out, "true");
        }
        /* a chat stream carries its usage only when asked, and the gateway
         * needs it: a body the rule made stream asks for it */
        int streamed = last_stream && last_stream->type == JSON_TRUE;
        if (!resp && !streamed && !json_get(doc, "stream_options") && !old_dropped(&c, "stream_options")) {
            emit_key(out, &c.n, "stream_options");
            sbuf_puts(out, "{\"include_usage\":true}");
        }
        streams = 1;
    }
    if (c.force_store && !wrote_store) {
        emit_key(out, &c.n, "store");
        sbuf_puts(out, "false");
    }
    if (c.want_ins && !wrote_ins) {
        emit_key(out, &c.n, "instructions");
        old_default_instructions(&c);
    }
    sbuf_append(out, "}", 1);
    if (up_stream)
        *up_stream = streams;
    return 0;
}

/* ---------- bodies ---------- */

static unsigned long long bench_rng = 0x2545F4914F6CDD1Dull;

static unsigned bench_next(void)
{
    bench_rng ^= bench_rng << 13;
    bench_rng ^= bench_rng >> 7;
    bench_rng ^= bench_rng << 17;
    return (unsigned)(bench_rng >> 11);
}

/* n characters of URL-safe base64, a Fernet token's look ("gAAAAA" head) */
static void bench_b64(sbuf *b, size_t n)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    sbuf_puts(b, "gAAAAA");
    for (size_t i = 6; i < n; i++)
        sbuf_append(b, &a[bench_next() & 63], 1);
}

/* prose with the escapes a real body has (newlines, quotes, a path, an ANSI colour) */
static void bench_text(sbuf *b, size_t n)
{
    static const char *words[] = {"the", "function", "returns", "\\n", "a", "\\\"value\\\"", "src/main.c",
                                  "error:", "test", "passed", "\\t", "int", "{", "}", "\\u001b[32m", "é"};
    size_t start = b->len;
    while (b->len - start < n) {
        sbuf_puts(b, words[bench_next() % 16]);
        sbuf_puts(b, " ");
    }
}

/* A Codex-shaped body of about `target` bytes; prompt: the developer
 * message's size. */
static void bench_body(sbuf *b, size_t target, size_t prompt)
{
    bench_rng = 0x2545F4914F6CDD1Dull;
    sbuf_puts(b, "{\"model\":\"gpt-5-codex\",\"input\":[{\"type\":\"message\",\"role\":\"developer\","
                 "\"content\":[{\"type\":\"input_text\",\"text\":\"You are Codex, a coding agent. ");
    bench_text(b, prompt);
    sbuf_puts(b, "\"}]},{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":"
                 "\"<environment_context>\\n  <cwd>/work/project</cwd>\\n</environment_context>\"}]}");
    static const char tail[] =
        "],\"tools\":[{\"type\":\"function\",\"name\":\"shell\",\"description\":\"Runs a shell command and returns its "
        "output.\",\"strict\":false,\"parameters\":{\"type\":\"object\",\"properties\":{\"command\":{\"type\":"
        "\"array\",\"items\":{\"type\":\"string\"},\"description\":\"The command to execute\"},"
        "\"workdir\":{\"type\":\"string\"},"
        "\"timeout_ms\":{\"type\":\"number\"}},\"required\":[\"command\"],\"additionalProperties\":false}}],"
        "\"tool_choice\":\"auto\",\"parallel_tool_calls\":false,\"reasoning\":{\"effort\":\"medium\","
        "\"summary\":\"auto\"},\"store\":false,\"stream\":true,\"include\":[\"reasoning.encrypted_content\"],"
        "\"prompt_cache_key\":\"019a0000-0000-7000-8000-000000000000\"}";
    for (int i = 0; b->len + sizeof tail < target; i++) {
        switch (i % 5) {
        case 0:
            sbuf_printf(b, ",{\"type\":\"reasoning\",\"id\":\"rs_%04d\",\"summary\":[{\"type\":\"summary_text\","
                           "\"text\":\"**Planning**\"}],\"content\":null,\"encrypted_content\":\"", i);
            bench_b64(b, 2500 < target / 8 ? 2500 : target / 8);
            sbuf_puts(b, "\"}");
            break;
        case 1:
            sbuf_printf(b, ",{\"type\":\"function_call\",\"id\":\"fc_%04d\",\"name\":\"shell\",\"arguments\":"
                           "\"{\\\"command\\\":[\\\"bash\\\",\\\"-lc\\\",\\\"", i);
            bench_text(b, target < 16384 ? 60 : 300);
            sbuf_printf(b, "\\\"]}\",\"call_id\":\"call_%04d\"}", i);
            break;
        case 2:
            sbuf_printf(b, ",{\"type\":\"function_call_output\",\"call_id\":\"call_%04d\",\"output\":\"", i - 1);
            bench_text(b, target < 16384 ? 200 : 2200);
            sbuf_puts(b, "\"}");
            break;
        default:
            sbuf_printf(b, ",{\"type\":\"message\",\"id\":\"msg_%04d\",\"role\":\"%s\",\"content\":[{\"type\":\"%s\","
                           "\"text\":\"",
                        i, i % 5 == 3 ? "assistant" : "user", i % 5 == 3 ? "output_text" : "input_text");
            bench_text(b, target < 16384 ? 100 : 1300);
            sbuf_puts(b, "\"}]}");
            break;
        }
    }
    sbuf_puts(b, tail);
}

/* The ChatGPT backend's rules (policies/dialect.lua) */
static void bench_rules(policy_dialect *r)
{
    memset(r, 0, sizeof *r);
    r->stream = r->store_off = r->input_list = r->strip_item_ids = r->has_instructions = 1;
    sbuf_copy_cstr(r->system_role, sizeof r->system_role, "developer");
    sbuf_copy_cstr(r->instructions, sizeof r->instructions, "You are a helpful assistant.");
    static const char *const drop[] = {"max_output_tokens", "temperature", "top_p", "frequency_penalty",
                                       "presence_penalty"};
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
        sbuf_copy_cstr(r->drop[r->n_drop++], POLICY_DIALECT_NAME_MAX, drop[i]);
}

static sbuf bench_small = SBUF_INIT, bench_big = SBUF_INIT;
static policy_dialect bench_r;
static volatile size_t bench_sink;

/* one call of a case; noinline so callgrind can collect exactly these */
__attribute__((noinline)) static void bench_case(const char *name)
{
    const sbuf *b = !strncmp(name, "small_", 6) ? &bench_small : !strncmp(name, "big_", 4) ? &bench_big : NULL;
    const char *what = b ? strchr(name, '_') + 1 : "";
    sbuf out = SBUF_INIT;
    dialect_error err;
    int st = 0;
    if (b && !strcmp(what, "new")) {
        bench_sink += (size_t)adapt_body(API_RESPONSES, &bench_r, b->p, b->len, &out, &st, &err);
    } else if (b && !strcmp(what, "old")) {
        json_value *doc = json_parse(b->p, b->len, NULL, 0);
        bench_sink += (size_t)old_adapt_body(API_RESPONSES, &bench_r, doc, &out, &st, &err);
        json_free(doc);
    } else if (b && !strcmp(what, "parse_write")) {
        json_value *doc = json_parse(b->p, b->len, NULL, 0);
        json_write(&out, doc);
        json_free(doc);
    } else if (b && !strcmp(what, "validate")) {
        bench_sink += json_scan_value(b->p, b->len, 0, 0);
    } else {
        fprintf(stderr, "unknown case %s\n", name);
        exit(2);
    }
    bench_sink += out.len;
    sbuf_free(&out);
}

static double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The new and the old output carry the same request, but for what the new
 * rule does (the developer message moved into the instructions). */
static int bench_check(const sbuf *b)
{
    sbuf a = SBUF_INIT, o = SBUF_INIT;
    dialect_error err;
    int st1 = 0, st2 = 0, ok = adapt_body(API_RESPONSES, &bench_r, b->p, b->len, &a, &st1, &err) == 0;
    json_value *doc = json_parse(b->p, b->len, NULL, 0);
    ok = ok && doc && old_adapt_body(API_RESPONSES, &bench_r, doc, &o, &st2, &err) == 0;
    json_value *na = ok ? json_parse(a.p, a.len, NULL, 0) : NULL, *no = ok ? json_parse(o.p, o.len, NULL, 0) : NULL;
    const json_value *ia = json_get(na, "input"), *io = json_get(no, "input");
    const char *ins = json_get_str(na, "instructions");
    ok = ok && na && no && st1 && st2 && ia && io && ia->count + 1 == io->count && ins &&
         !strncmp(ins, "You are Codex", 13) && !memmem(a.p, a.len, "\"id\":\"", 6);
    if (ok) { /* every item after the moved one the same, once written by json_write */
        const json_value *x = ia->child, *y = io->child->next;
        for (; ok && x && y; x = x->next, y = y->next) {
            sbuf sx = SBUF_INIT, sy = SBUF_INIT;
            json_write(&sx, x);
            json_write(&sy, y);
            ok = sx.len == sy.len && !memcmp(sx.p, sy.p, sx.len);
            sbuf_free(&sx);
            sbuf_free(&sy);
        }
    }
    json_free(na);
    json_free(no);
    json_free(doc);
    sbuf_free(&a);
    sbuf_free(&o);
    return ok;
}

int main(int argc, char **argv)
{
    bench_rules(&bench_r);
    bench_body(&bench_small, 4096, 1200);
    bench_body(&bench_big, 512 * 1024, 12000);
    if (!bench_check(&bench_small) || !bench_check(&bench_big)) {
        fprintf(stderr, "bench bodies or outputs are not what they should be\n");
        return 1;
    }
    if (argc == 3) {
        long n = atol(argv[2]);
        for (long i = 0; i < n; i++)
            bench_case(argv[1]);
        return 0;
    }
    printf("bodies: %zu and %zu bytes\n", bench_small.len, bench_big.len);
    static const char *cases[] = {"small_new", "small_old", "small_parse_write", "small_validate",
                                  "big_new",   "big_old",   "big_parse_write",   "big_validate"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        long n = c < 4 ? 20000 : 200;
        double t0 = bench_now();
        for (long i = 0; i < n; i++)
            bench_case(cases[c]);
        printf("%-20s %10.2f us per call\n", cases[c], (bench_now() - t0) / n * 1e6);
    }
    sbuf_free(&bench_small);
    sbuf_free(&bench_big);
    return 0;
}
