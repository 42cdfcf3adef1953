/* mock_upstream.c: a scripted OpenAI/ChatGPT/Anthropic-style upstream for the e2e tests.
 *
 * The URL path chooses the account name and the behaviour, so an account's
 * base_url alone decides how "its upstream" acts:
 *
 *   /acct/<name>/<scenario>[,opt=val...]/v1/<endpoint>   (OpenAI style)
 *   /acct/<name>/<scenario>[,opt=val...]/<endpoint>      (ChatGPT codex style)
 *   /acct/<name>/<scenario>,anthropic=1[,...]/v1/messages (Anthropic)
 *   /v1/<endpoint>                                       (account "default", ok)
 *
 * endpoint: responses | chat/completions | models (also under a ChatGPT-shaped
 * backend-api/codex/ prefix); on an anthropic=1 account messages,
 * messages/count_tokens and models (a query such as ?beta=true is ignored).
 * The usage endpoints backend-api/wham/usage and api/codex/usage answer
 * what POST /_usage/<name> set (after ms= milliseconds when the segment
 * says so; recorded apart, for GET /_usage_polls). The
 * first item of the scenario segment is the scenario (status=<code> carries
 * its code), the rest are options. Every answer is a script of actions (headers, chunks, delays,
 * end, abrupt close) run on libevent timers; nothing sleeps. Every request is
 * recorded for GET /_requests (POST /_reset hides the ones seen so far).
 * The mock notices a client that goes away (write error via the connection's
 * close callback, or EOF seen by a peek watcher on the socket), marks the
 * request aborted and drops its script.
 *
 * Each style keeps its real upstream's rules before any scenario runs
 * (RULE_*): the codex style the ChatGPT codex backend's (stream true, store
 * false, instructions, no sampling parameters, a list input without system
 * messages or item ids, no previous_response_id, no chat/completions or
 * responses/{id}, event streams with no Content-Type and a bare
 * response.completed); chat requests a strict Chat Completions API's check
 * of the messages. lax= switches rules off; speaks=chat|responses makes an
 * API upstream with only one of the two APIs. Requests to responses,
 * chat/completions and messages keep their body (bounded) in the record.
 *
 * Accounts behave as separate, strict backends: each refuses a turn state,
 * an encrypted_content blob (reasoning=1, compaction=1 mint them) or a
 * previous_response_id that is not its own, in OpenAI's shapes, and keeps
 * its own stored responses (GET/DELETE responses/{id}). With tool_call=1 an
 * answer is a function call (tool_calls=N: N in parallel, on both APIs)
 * until the input ends with its output, so a real client (Codex) runs a
 * tool and comes back within the turn.
 *
 * anthropic=1 makes the account api.anthropic.com (script_anthropic): POST
 * v1/messages needs x-api-key (a bearer alone gets the 401) and
 * anthropic-version, and a body the Messages API validator takes (model, a
 * positive integer max_tokens, messages of user/assistant turns with typed
 * blocks, tool_use/tool_result pairs, no field it does not know: RULE_API_KEY
 * ... RULE_EXTRA, RULE_MESSAGES), refused in its words; answers are its
 * message object or event stream (message_start ... message_stop), with
 * tool_call=1 a tool_use of the request's first tool until the last user
 * message holds a tool_result; status=, overloaded_stream, prompt_too_long,
 * late_error answer in its error shapes; count_tokens answers (body
 * bytes / 4) + 1. Its OpenAI endpoints are Anthropic's 404, and messages is
 * an unknown path on every other account. Records carry x_api_key,
 * anthropic_version and anthropic_beta. See tests/e2e/README.md. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/json.h"
#include "base/jwt.h"
#include "base/sbuf.h"
#include "base/sha256.h"
#include "tool_server.h"

static struct event_base *g_base;

/* ---------- request records ---------- */

typedef struct rec {
    long n;
    char *account, *scenario, *spec, *endpoint, *path, *method;
    char *authorization, *chatgpt_account_id, *model, *prev_id;
    char *headers; /* JSON object of the request headers, names lower-cased */
    char *prefill; /* content of a trailing {"role":"assistant","content":"..."} message (a stream resume), or NULL */
    char *continued; /* content of such a message followed only by a user message (a resume's instruction form) */
    char *refresh_token, *client_id, *grant_type; /* oauth_token requests */
    int stream, has_body_hash;
    size_t body_len;
    uint64_t body_hash;
    int completed, aborted;
    double t_start, t_end; /* when it arrived, when its answer ended (completed or aborted): unix seconds, 0 not yet */
    int usage;         /* a usage poll: listed by /_usage_polls, not /_requests */
    int side;          /* GET/DELETE of a stored response: not counted by ok_first/times */
    /* /responses: what the input carried (see reqinfo) */
    char *blobs;       /* JSON array: each encrypted_content seen, who minted it */
    char *input_types; /* JSON array of the input items' types, in order */
    char *refused;     /* the code this account refused the request with (blob, previous id), or NULL */
    char *last_input_type; /* the last input item's type, or NULL without input items */
    char *tool_outputs;    /* JSON array: call_ids of the function_call_output / custom_tool_call_output items */
    char *tool_call;       /* tool_call=1: the call_id of the function call the answer carried, or NULL */
    long input_items;
    int chain;         /* stored responses followed from previous_response_id */
    int store;         /* -1 not said, 0 store:false, 1 store:true */
    /* what the e2e tests read to see how the gateway adapted a request */
    const char *style; /* "openai" (a /v1/ path) or "codex" (the ChatGPT backend's shape), NULL elsewhere */
    char *body;        /* /responses and /chat/completions: the body's first BODY_KEPT bytes, or NULL */
    size_t body_kept;  /* bytes in body */
    int body_truncated;
    char *tool_calls;  /* JSON array: the call_ids of the tool calls the answer carried (tool_call=1) */
    char *roles;       /* /chat/completions: JSON array of the messages' roles, in order */
    char *last_role;   /* /chat/completions: the last message's role, or NULL */
    char *violations;  /* JSON array: every rule of its upstream the request broke (lax= or not) */
    /* the Anthropic API's headers as the request carried them (a repeated one joined with ", "), or NULL */
    char *x_api_key, *anthropic_version, *anthropic_beta;
} rec;

/* Bodies are kept for GET /_requests up to BODY_KEPT bytes each and
 * BODIES_KEPT_MAX in all (a long test must not grow the mock without
 * bound); POST /_reset frees the bodies it hides. */
#define BODY_KEPT ((size_t)64 << 10)
#define BODIES_KEPT_MAX ((size_t)64 << 20)
static size_t g_body_bytes;

static rec **g_recs;
static size_t g_nrecs, g_caprecs, g_first_visible;
static long g_counter;

static char *xstrdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (!p)
        abort();
    memcpy(p, s, n);
    return p;
}

static double mock_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static rec *rec_new(void)
{
    rec *r = calloc(1, sizeof *r);
    if (!r)
        abort();
    if (g_nrecs == g_caprecs) {
        g_caprecs = g_caprecs ? g_caprecs * 2 : 64;
        rec **p = realloc(g_recs, g_caprecs * sizeof *p);
        if (!p)
            abort();
        g_recs = p;
    }
    g_recs[g_nrecs++] = r;
    r->n = ++g_counter;
    r->store = -1;
    r->t_start = mock_wall();
    return r;
}

static void rec_free(rec *r)
{
    free(r->account);
    free(r->scenario);
    free(r->spec);
    free(r->endpoint);
    free(r->path);
    free(r->method);
    free(r->authorization);
    free(r->chatgpt_account_id);
    free(r->model);
    free(r->prev_id);
    free(r->headers);
    free(r->prefill);
    free(r->continued);
    free(r->refresh_token);
    free(r->client_id);
    free(r->grant_type);
    free(r->blobs);
    free(r->input_types);
    free(r->last_input_type);
    free(r->tool_outputs);
    free(r->tool_call);
    free(r->refused);
    g_body_bytes -= r->body_kept;
    free(r->body);
    free(r->tool_calls);
    free(r->roles);
    free(r->last_role);
    free(r->violations);
    free(r->x_api_key);
    free(r->anthropic_version);
    free(r->anthropic_beta);
    free(r);
}

/* Keeps the first BODY_KEPT bytes of a request body in r while the budget
 * lasts (/_requests shows them as a JSON string: bytes that are no UTF-8,
 * e.g. a compressed body or a character cut at the bound, become U+FFFD). */
static void rec_keep_body(rec *r, const char *body, size_t n)
{
    size_t keep = n < BODY_KEPT ? n : BODY_KEPT;
    r->body_truncated = keep < n;
    if (g_body_bytes + keep > BODIES_KEPT_MAX)
        return;
    r->body = malloc(keep + 1);
    if (!r->body)
        abort();
    memcpy(r->body, body, keep);
    r->body[keep] = '\0';
    r->body_kept = keep;
    g_body_bytes += keep;
}

/* POST /_reset: the hidden records' bodies are never shown again. */
static void rec_drop_bodies(size_t upto)
{
    for (size_t i = 0; i < upto; i++) {
        rec *r = g_recs[i];
        g_body_bytes -= r->body_kept;
        free(r->body);
        r->body = NULL;
        r->body_kept = 0;
    }
}

static void json_str_or_null(sbuf *b, const char *s)
{
    if (s)
        sbuf_json_str(b, s, strlen(s));
    else
        sbuf_puts(b, "null");
}

static void recs_json(sbuf *b, int usage)
{
    sbuf_puts(b, "[");
    int first = 1;
    for (size_t i = g_first_visible; i < g_nrecs; i++) {
        const rec *r = g_recs[i];
        if (r->usage != usage)
            continue;
        if (!first)
            sbuf_puts(b, ",\n");
        first = 0;
        sbuf_printf(b, "{\"n\":%ld,\"account\":", r->n);
        json_str_or_null(b, r->account);
        sbuf_puts(b, ",\"scenario\":");
        json_str_or_null(b, r->scenario);
        sbuf_puts(b, ",\"spec\":");
        json_str_or_null(b, r->spec);
        sbuf_puts(b, ",\"endpoint\":");
        json_str_or_null(b, r->endpoint);
        sbuf_puts(b, ",\"path\":");
        json_str_or_null(b, r->path);
        sbuf_puts(b, ",\"method\":");
        json_str_or_null(b, r->method);
        sbuf_puts(b, ",\"authorization\":");
        json_str_or_null(b, r->authorization);
        sbuf_puts(b, ",\"x_api_key\":");
        json_str_or_null(b, r->x_api_key);
        sbuf_puts(b, ",\"anthropic_version\":");
        json_str_or_null(b, r->anthropic_version);
        sbuf_puts(b, ",\"anthropic_beta\":");
        json_str_or_null(b, r->anthropic_beta);
        sbuf_puts(b, ",\"chatgpt_account_id\":");
        json_str_or_null(b, r->chatgpt_account_id);
        sbuf_puts(b, ",\"model\":");
        json_str_or_null(b, r->model);
        sbuf_printf(b, ",\"stream\":%s,\"previous_response_id\":", r->stream ? "true" : "false");
        json_str_or_null(b, r->prev_id);
        sbuf_puts(b, ",\"prefill\":");
        json_str_or_null(b, r->prefill);
        sbuf_puts(b, ",\"continued\":");
        json_str_or_null(b, r->continued);
        sbuf_printf(b, ",\"body_len\":%zu,\"body_hash\":", r->body_len);
        if (r->has_body_hash)
            sbuf_printf(b, "\"%016llx\"", (unsigned long long)r->body_hash);
        else
            sbuf_puts(b, "null");
        sbuf_puts(b, ",\"headers\":");
        sbuf_puts(b, r->headers ? r->headers : "{}");
        sbuf_puts(b, ",\"refresh_token\":");
        json_str_or_null(b, r->refresh_token);
        sbuf_puts(b, ",\"client_id\":");
        json_str_or_null(b, r->client_id);
        sbuf_puts(b, ",\"grant_type\":");
        json_str_or_null(b, r->grant_type);
        sbuf_puts(b, ",\"blobs\":");
        sbuf_puts(b, r->blobs ? r->blobs : "[]");
        sbuf_puts(b, ",\"input_types\":");
        sbuf_puts(b, r->input_types ? r->input_types : "[]");
        sbuf_puts(b, ",\"last_input_type\":");
        json_str_or_null(b, r->last_input_type);
        sbuf_puts(b, ",\"tool_outputs\":");
        sbuf_puts(b, r->tool_outputs ? r->tool_outputs : "[]");
        sbuf_puts(b, ",\"tool_call\":");
        json_str_or_null(b, r->tool_call);
        sbuf_printf(b, ",\"input_items\":%ld,\"chain\":%d,\"store\":%s,\"refused\":", r->input_items,
                    r->chain, r->store < 0 ? "null" : r->store ? "true" : "false");
        json_str_or_null(b, r->refused);
        sbuf_puts(b, ",\"style\":");
        json_str_or_null(b, r->style);
        sbuf_puts(b, ",\"tool_calls\":");
        sbuf_puts(b, r->tool_calls ? r->tool_calls : "[]");
        sbuf_puts(b, ",\"roles\":");
        sbuf_puts(b, r->roles ? r->roles : "[]");
        sbuf_puts(b, ",\"last_role\":");
        json_str_or_null(b, r->last_role);
        sbuf_puts(b, ",\"violations\":");
        sbuf_puts(b, r->violations ? r->violations : "[]");
        sbuf_puts(b, ",\"body\":");
        if (r->body)
            sbuf_json_str(b, r->body, r->body_kept);
        else
            sbuf_puts(b, "null");
        sbuf_printf(b, ",\"body_truncated\":%s", r->body_truncated ? "true" : "false");
        sbuf_printf(b, ",\"completed\":%s,\"aborted\":%s,\"t_start\":%.6f,\"t_end\":%.6f}",
                    r->completed ? "true" : "false", r->aborted ? "true" : "false", r->t_start, r->t_end);
    }
    sbuf_puts(b, "]\n");
}

/* The request headers as a JSON object, names lower-cased (a repeated
 * header keeps its last value). Returns a malloc'd string. */
static char *headers_json(struct evkeyvalq *h)
{
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{");
    int first = 1;
    for (struct evkeyval *kv = h->tqh_first; kv; kv = kv->next.tqe_next, first = 0) {
        char name[128];
        size_t i = 0;
        for (; kv->key[i] && i + 1 < sizeof name; i++)
            name[i] = (char)(kv->key[i] >= 'A' && kv->key[i] <= 'Z' ? kv->key[i] + 32 : kv->key[i]);
        name[i] = '\0';
        if (!first)
            sbuf_puts(&b, ",");
        sbuf_json_str(&b, name, strlen(name));
        sbuf_puts(&b, ":");
        sbuf_json_str(&b, kv->value, strlen(kv->value));
    }
    sbuf_puts(&b, "}");
    char *out = xstrdup(b.p);
    sbuf_free(&b);
    return out;
}

/* Every value of header name, joined with ", " as a proxy folds repeated
 * headers (so a doubled anthropic-version shows as one that is no version),
 * or NULL when the request has none. Returns a malloc'd string. */
static char *header_joined(struct evkeyvalq *h, const char *name)
{
    sbuf b = SBUF_INIT;
    int n = 0;
    for (struct evkeyval *kv = h->tqh_first; kv; kv = kv->next.tqe_next)
        if (!evutil_ascii_strcasecmp(kv->key, name)) {
            sbuf_puts(&b, n++ ? ", " : "");
            sbuf_puts(&b, kv->value);
        }
    char *out = n ? xstrdup(b.len ? b.p : "") : NULL;
    sbuf_free(&b);
    return out;
}

/* ---------- a minimal reader for the top-level fields of the request body ---------- */

typedef struct scan { const char *p, *end; } scan;

static void sc_ws(scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

/* Reads a string at s->p (on the opening quote); out may be NULL. 0 ok, -1 bad. */
static int sc_string(scan *s, sbuf *out)
{
    if (s->p >= s->end || *s->p != '"')
        return -1;
    s->p++;
    while (s->p < s->end) {
        char c = *s->p++;
        if (c == '"')
            return 0;
        if (c != '\\') {
            if (out)
                sbuf_append(out, &c, 1);
            continue;
        }
        if (s->p >= s->end)
            return -1;
        char e = *s->p++;
        const char *rep = NULL;
        switch (e) {
        case '"': rep = "\""; break;
        case '\\': rep = "\\"; break;
        case '/': rep = "/"; break;
        case 'b': rep = "\b"; break;
        case 'f': rep = "\f"; break;
        case 'n': rep = "\n"; break;
        case 'r': rep = "\r"; break;
        case 't': rep = "\t"; break;
        case 'u': {
            if (s->end - s->p < 4)
                return -1;
            unsigned cp = 0;
            for (int i = 0; i < 4; i++) {
                int h = sbuf_hex_digit((unsigned char)s->p[i]);
                if (h < 0)
                    return -1;
                cp = cp * 16 + (unsigned)h;
            }
            s->p += 4;
            if (out) { /* BMP only; surrogates pass through as-is (the mock only echoes ids) */
                char u[3];
                if (cp < 0x80) {
                    u[0] = (char)cp;
                    sbuf_append(out, u, 1);
                } else if (cp < 0x800) {
                    u[0] = (char)(0xC0 | (cp >> 6));
                    u[1] = (char)(0x80 | (cp & 0x3F));
                    sbuf_append(out, u, 2);
                } else {
                    u[0] = (char)(0xE0 | (cp >> 12));
                    u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                    u[2] = (char)(0x80 | (cp & 0x3F));
                    sbuf_append(out, u, 3);
                }
            }
            continue;
        }
        default: return -1;
        }
        if (out)
            sbuf_puts(out, rep);
    }
    return -1;
}

static int sc_value(scan *s, int depth)
{
    if (depth > 64)
        return -1;
    sc_ws(s);
    if (s->p >= s->end)
        return -1;
    char c = *s->p;
    if (c == '"')
        return sc_string(s, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        s->p++;
        sc_ws(s);
        if (s->p < s->end && *s->p == close) {
            s->p++;
            return 0;
        }
        for (;;) {
            if (c == '{') {
                sc_ws(s);
                if (sc_string(s, NULL) < 0)
                    return -1;
                sc_ws(s);
                if (s->p >= s->end || *s->p != ':')
                    return -1;
                s->p++;
            }
            if (sc_value(s, depth + 1) < 0)
                return -1;
            sc_ws(s);
            if (s->p >= s->end)
                return -1;
            if (*s->p == ',') {
                s->p++;
                continue;
            }
            if (*s->p == close) {
                s->p++;
                return 0;
            }
            return -1;
        }
    }
    /* number, true, false, null: scan the token */
    const char *start = s->p;
    while (s->p < s->end && *s->p != ',' && *s->p != '}' && *s->p != ']' && *s->p != ' ' &&
           *s->p != '\t' && *s->p != '\n' && *s->p != '\r')
        s->p++;
    return s->p > start ? 0 : -1;
}

typedef struct body_fields {
    int stream;
    sbuf model, prev_id;
    int has_model, has_prev_id;
} body_fields;

/* Best effort: a body that is not a JSON object leaves the defaults. */
static void body_fields_read(body_fields *f, const char *p, size_t n)
{
    scan s = {p, p + n};
    sc_ws(&s);
    if (s.p >= s.end || *s.p != '{')
        return;
    s.p++;
    sbuf key = SBUF_INIT;
    for (;;) {
        sc_ws(&s);
        if (s.p < s.end && *s.p == '}')
            break;
        sbuf_reset(&key);
        if (sc_string(&s, &key) < 0)
            break;
        sc_ws(&s);
        if (s.p >= s.end || *s.p != ':')
            break;
        s.p++;
        sc_ws(&s);
        const char *vstart = s.p;
        if (key.p && strcmp(key.p, "model") == 0 && s.p < s.end && *s.p == '"') {
            sbuf_reset(&f->model);
            if (sc_string(&s, &f->model) < 0)
                break;
            f->has_model = 1;
        } else if (key.p && strcmp(key.p, "previous_response_id") == 0 && s.p < s.end &&
                   *s.p == '"') {
            sbuf_reset(&f->prev_id);
            if (sc_string(&s, &f->prev_id) < 0)
                break;
            f->has_prev_id = 1;
        } else {
            if (sc_value(&s, 0) < 0)
                break;
            if (key.p && strcmp(key.p, "stream") == 0)
                f->stream = (s.p - vstart == 4 && memcmp(vstart, "true", 4) == 0);
        }
        sc_ws(&s);
        if (s.p < s.end && *s.p == ',') {
            s.p++;
            continue;
        }
        break;
    }
    sbuf_free(&key);
}

/* The (escaped) content of the last {"role":"assistant","content":"..."} in
 * the body, as a gateway writes a stream-resume continuation, when the list
 * ends with it (follow 0: a prefill) or with one user message after it
 * (follow 1: the instruction form); NULL otherwise. */
static char *prefill_find(const char *p, size_t n, int follow)
{
    static const char pat[] = "{\"role\":\"assistant\",\"content\":\"";
    const char *last = NULL, *end = p + n;
    for (const char *q = p; (q = memmem(q, (size_t)(end - q), pat, sizeof pat - 1)); q++)
        last = q + sizeof pat - 1;
    if (!last)
        return NULL;
    const char *e = last;
    while (e < end && *e != '"')
        e += *e == '\\' && e + 1 < end ? 2 : 1;
    const char *after = e + 1 < end && e[1] == '}' ? e + 2 : end;
    while (after < end && (*after == ' ' || *after == '\n'))
        after++;
    if (after >= end)
        return NULL;
    if (!follow && *after != ']')
        return NULL;
    if (follow) { /* one more element, a user message, and the list ends */
        const char *user = memmem(after, (size_t)(end - after), "\"role\":\"user\"", 13);
        const char *other = user ? memmem(user + 13, (size_t)(end - user - 13), "\"role\":", 7) : NULL;
        if (*after != ',' || !user || other)
            return NULL;
    }
    char *out = malloc((size_t)(e - last) + 1);
    if (!out)
        abort();
    memcpy(out, last, (size_t)(e - last));
    out[e - last] = '\0';
    return out;
}

static uint64_t fnv1a(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* ---------- scenario options ---------- */

/* A real upstream's rules the mock enforces before any scenario runs. The
 * ChatGPT codex backend's (the codex style: a path without /v1/) are from
 * what clients report it answering (Codex, CLIProxyAPI, sub2api, ChatMock,
 * codex2api, LiteLLM trackers); RULE_MESSAGES is a strict Chat Completions
 * API's check of the messages, on either style. Every rule is on by default
 * where it applies, so the gateway meets the upstream as it is; lax=<rule>
 * [+<rule>...] switches rules off (lax=1: all), for a test that exercises
 * something else with a body a real client would never send. */
enum {
    RULE_STREAM = 1u << 0,       /* codex: "stream" must be true */
    RULE_STORE = 1u << 1,        /* codex: "store" must be false (and present) */
    RULE_INSTRUCTIONS = 1u << 2, /* codex: "instructions" must be a non-empty string */
    RULE_PARAMS = 1u << 3,       /* codex: no max_output_tokens, temperature, top_p, *_penalty */
    RULE_INPUT_LIST = 1u << 4,   /* codex: "input" must be an array */
    RULE_SYSTEM = 1u << 5,       /* codex: no input item with role "system" */
    RULE_ITEM_IDS = 1u << 6,     /* codex: no input item with an "id" (nothing is persisted) */
    RULE_PREV_ID = 1u << 7,      /* codex: no previous_response_id (nothing is stored) */
    RULE_ROUTES = 1u << 8,       /* codex: no chat/completions, no responses/{id}: 404 */
    RULE_CONTENT_TYPE = 1u << 9, /* codex: event streams carry no Content-Type */
    RULE_OUTPUT = 1u << 10,      /* codex: response.completed carries "output":[] */
    RULE_MESSAGES = 1u << 11,    /* chat: messages checked as a strict Chat Completions API does; anthropic:
                                  * as the Messages API does (anth_check_message, anth_check_turns) */
    RULE_API_KEY = 1u << 12,     /* anthropic: an x-api-key header (a bearer is no key): 401 */
    RULE_VERSION = 1u << 13,     /* anthropic: an anthropic-version header naming a version */
    RULE_JSON = 1u << 14,        /* anthropic: the body is a JSON object */
    RULE_MODEL = 1u << 15,       /* anthropic: "model" is a string */
    RULE_MAX_TOKENS = 1u << 16,  /* anthropic: "max_tokens" is an integer >= 1 (messages; count_tokens takes none) */
    RULE_EXTRA = 1u << 17,       /* anthropic: no top-level field the endpoint does not know */
};
#define RULES_CODEX (RULE_STREAM | RULE_STORE | RULE_INSTRUCTIONS | RULE_PARAMS | RULE_INPUT_LIST | RULE_SYSTEM | \
                     RULE_ITEM_IDS | RULE_PREV_ID | RULE_ROUTES | RULE_CONTENT_TYPE | RULE_OUTPUT)
#define RULES_ANTHROPIC (RULE_API_KEY | RULE_VERSION | RULE_JSON | RULE_MODEL | RULE_MAX_TOKENS | RULE_EXTRA)
#define RULES_ALL (RULES_CODEX | RULE_MESSAGES | RULES_ANTHROPIC)

static const struct {
    const char *name;
    unsigned bit;
} g_rule_names[] = {
    {"stream", RULE_STREAM}, {"store", RULE_STORE}, {"instructions", RULE_INSTRUCTIONS},
    {"params", RULE_PARAMS}, {"input_list", RULE_INPUT_LIST}, {"system", RULE_SYSTEM},
    {"item_ids", RULE_ITEM_IDS}, {"prev_id", RULE_PREV_ID}, {"routes", RULE_ROUTES},
    {"content_type", RULE_CONTENT_TYPE}, {"output", RULE_OUTPUT}, {"messages", RULE_MESSAGES},
    {"x_api_key", RULE_API_KEY}, {"anthropic_version", RULE_VERSION}, {"json", RULE_JSON}, {"model", RULE_MODEL},
    {"max_tokens", RULE_MAX_TOKENS}, {"extra_inputs", RULE_EXTRA},
};

/* lax=1 | lax=0 | lax=name+name... (unknown names are reported and ignored) */
static unsigned lax_parse(const char *v)
{
    if (!strcmp(v, "1"))
        return RULES_ALL;
    if (!strcmp(v, "0"))
        return 0;
    unsigned bits = 0;
    for (const char *p = v; *p;) {
        const char *e = strchr(p, '+');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        size_t i = 0;
        for (; i < sizeof g_rule_names / sizeof g_rule_names[0]; i++)
            if (strlen(g_rule_names[i].name) == n && !strncmp(g_rule_names[i].name, p, n))
                break;
        if (i < sizeof g_rule_names / sizeof g_rule_names[0])
            bits |= g_rule_names[i].bit;
        else if (n)
            fprintf(stderr, "mock_upstream: ignoring unknown lax rule '%.*s'\n", (int)(n > 64 ? 64 : n), p);
        if (!e)
            break;
        p = e + 1;
    }
    return bits;
}

#define MAX_CALLS 8 /* tool_calls=N is capped here */

typedef struct opts {
    char scenario[32];
    int code;          /* status=<code> */
    long ms;           /* delay for slow_headers / stall / slow_stream / late_reset; -1 = default */
    long gap;          /* delay between ordinary stream events */
    int deltas;        /* number of text deltas (0 = default) */
    int after;         /* late_error/late_reset: deltas before the failure */
    int rst;           /* -1 default, 0 FIN, 1 RST */
    long resets;       /* quota429 resets_in_seconds */
    int times;         /* > 0: the scenario applies to this many requests (same account and spec), then ok */
    char retry_after[24];
    char retry_after_ms[24];
    char err_code[64]; /* late_error code */
    int late_failed;   /* failed=1: late_error's error is a response.failed event (/responses) */
    int stored_status; /* stored=N: GET/DELETE responses/{id} (and input_items) answer HTTP N, an error */
    long head_ms;      /* head=MS: a stream's headers come after MS (any stream scenario; slow_headers: ms=) */
    char primary[24], secondary[24], primary_reset[24], secondary_reset[24];
    char primary_window[24], secondary_window[24];
    char primary_reset_at[24], secondary_reset_at[24]; /* absolute: today's -reset-at headers */
    char turn_state[64];
    int ok_first;      /* the account's first N requests behave as "ok" */
    int echo_auth;     /* x-codex-echo: the request's Authorization (a leaky upstream) */
    long partial;      /* late_reset: bytes of an unfinished event sent before the end */
    int end;           /* late_reset: end the chunked body properly instead of closing */
    int cut;           /* reflect_auth, chat stream: close after the echoing delta (a cut after output) */
    long tail;         /* ok stream: ms between the last event and the end of the body */
    int think;         /* /responses stream: this many reasoning summary deltas (each after gap, or
                        * think_ms) after response.in_progress (after a stall's silence) */
    long think_ms;
    int no_prefill;    /* prefill=0: a request ending in an assistant message (a stream resume's
                        * prefill) is refused with a 400 in the shape of an Anthropic model behind
                        * an OpenAI-compatible relay */
    int gzip;          /* 1: gzip the body (Content-Encoding: gzip); 2: label it x-bogus */
    long bytes;        /* big_error: size of the message; ok (plain): a "pad" field of this many bytes */
    int seq;           /* ok (plain): the pad counts (each 8 bytes: their offset in hex) instead of x's */
    long pad;          /* ok (plain): the pad's size when it differs from bytes (with ok_first) */
    int auth;          /* auth=1: the bearer must be an unexpired, unrevoked JWT */
    long ttl;          /* oauth: lifetime of issued access tokens, seconds */
    int hostile_claims; /* oauth: the id_token's claims carry CR LF (account id), ESC (email), LF (plan) */
    int input_tokens;  /* usage: input tokens reported (0 = default 7) */
    int cached;        /* usage: of them cached */
    int reasoning;     /* /responses: a reasoning item with encrypted_content before the message */
    int compaction;    /* /responses: a compaction item with encrypted_content before the message */
    char enc_err[16];  /* the shape of the refusal of a foreign blob (see enc_refuse) */
    int accept_foreign; /* take encrypted_content of any origin */
    int echo_input;    /* /responses text ends with " [chain=D items=N]" */
    int tool_call;     /* /responses: a function call instead of the message, unless the input ends with its output */
    char tool[64];     /* the function call's name (default exec_command, the shell tool Codex 0.171 registers) */
    char err[32];      /* status: the body of an account refusal in the upstream's shape (account_refusal) */
    char models[256];  /* models=a+b: the models this account serves (see models_refuse) */
    char listed[256];  /* listed=a+b: what its models endpoint lists, while it serves any model (an Azure
                        * deployment, an alias, a relay: names its list does not give) */
    /* a model metered in a limit family of its own (family_answer): family=<name> (the
     * x-codex-<name>-* headers, limit id codex_<name>), family_model=<model> (the model
     * it meters), family_until=<unix s> (its window is spent until then: a 429) */
    char family[32], family_model[64], family_until[24];
    long big_header;   /* any scenario: an x-big response header of this many bytes (0: none, at most 64 MiB) */
    /* rate_event=1: a /responses stream starts with a codex.rate_limits event carrying this
     * account's primary/secondary numbers, as the ChatGPT backend's do; rate_event=<name>:
     * the event of the limit <name> (its metered_limit_name) instead */
    char rate_event[32];
    unsigned lax;      /* rules switched off (RULE_*) */
    char speaks[16];   /* OpenAI style: "chat" (no Responses API: 404 as an unknown path), "responses"
                        * (no Chat Completions), "" both */
    int tool_calls;    /* tool_call=1: this many parallel calls in one answer (default 1, at most MAX_CALLS) */
    int anthropic;     /* anthropic=1: the account is api.anthropic.com (the Messages API only; script_anthropic) */
} opts;

static int numeric(const char *v)
{
    if (!*v)
        return 0;
    for (const char *q = v; *q; q++)
        if (!((*q >= '0' && *q <= '9') || *q == '.' || *q == '-'))
            return 0;
    return 1;
}

static void copy_num(char *dst, size_t n, const char *v)
{
    if (numeric(v))
        snprintf(dst, n, "%s", v);
}

static void copy_word(char *dst, size_t n, const char *v)
{
    size_t i = 0;
    for (; v[i] && i + 1 < n; i++) {
        char c = v[i];
        dst[i] = ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.')
                     ? c
                     : '_';
    }
    dst[i] = '\0';
}

/* models=a+b: names of [A-Za-z0-9_.-] joined by '+'; anything else is dropped. */
static void copy_models(char *dst, size_t n, const char *v)
{
    size_t i = 0;
    for (; *v && i + 1 < n; v++) {
        char c = *v;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
            c == '.' || c == '+')
            dst[i++] = c;
    }
    dst[i] = '\0';
}

/* 1 if model is one of the '+'-joined names of list. */
static int models_has(const char *list, const char *model)
{
    size_t m = strlen(model);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, '+');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == m && !strncmp(p, model, m))
            return 1;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

/* Parses "scenario[=code][,opt=val...]". Unknown options are ignored. */
static void opts_parse(opts *o, const char *spec)
{
    memset(o, 0, sizeof *o);
    o->after = -1; /* unset: 3 deltas; after=0 sends the error before any output */
    o->ms = -1;
    o->rst = -1;
    o->resets = 3600;
    o->ttl = 3600;
    char *dup = xstrdup(spec), *save = NULL;
    int first = 1;
    for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save), first = 0) {
        char *eq = strchr(tok, '=');
        const char *val = "";
        if (eq) {
            *eq = '\0';
            val = eq + 1;
        }
        if (first) {
            copy_word(o->scenario, sizeof o->scenario, tok);
            if (eq)
                o->code = atoi(val);
            continue;
        }
        if (!strcmp(tok, "ms"))
            o->ms = atol(val);
        else if (!strcmp(tok, "gap"))
            o->gap = atol(val);
        else if (!strcmp(tok, "deltas"))
            o->deltas = atoi(val);
        else if (!strcmp(tok, "after"))
            o->after = atoi(val);
        else if (!strcmp(tok, "rst"))
            o->rst = atoi(val) ? 1 : 0;
        else if (!strcmp(tok, "resets"))
            o->resets = atol(val);
        else if (!strcmp(tok, "times"))
            o->times = atoi(val);
        else if (!strcmp(tok, "retry_after"))
            copy_num(o->retry_after, sizeof o->retry_after, val);
        else if (!strcmp(tok, "retry_after_ms"))
            copy_num(o->retry_after_ms, sizeof o->retry_after_ms, val);
        else if (!strcmp(tok, "code"))
            copy_word(o->err_code, sizeof o->err_code, val);
        else if (!strcmp(tok, "failed"))
            o->late_failed = atoi(val);
        else if (!strcmp(tok, "stored"))
            o->stored_status = atoi(val);
        else if (!strcmp(tok, "head"))
            o->head_ms = atol(val);
        else if (!strcmp(tok, "partial"))
            o->partial = atol(val);
        else if (!strcmp(tok, "end"))
            o->end = atoi(val);
        else if (!strcmp(tok, "cut"))
            o->cut = atoi(val);
        else if (!strcmp(tok, "tail"))
            o->tail = atol(val);
        else if (!strcmp(tok, "think"))
            o->think = atoi(val);
        else if (!strcmp(tok, "think_ms"))
            o->think_ms = atol(val);
        else if (!strcmp(tok, "prefill"))
            o->no_prefill = atoi(val) == 0;
        else if (!strcmp(tok, "gzip"))
            o->gzip = atoi(val);
        else if (!strcmp(tok, "bytes"))
            o->bytes = atol(val);
        else if (!strcmp(tok, "seq"))
            o->seq = atoi(val);
        else if (!strcmp(tok, "pad"))
            o->pad = atol(val);
        else if (!strcmp(tok, "primary"))
            copy_num(o->primary, sizeof o->primary, val);
        else if (!strcmp(tok, "secondary"))
            copy_num(o->secondary, sizeof o->secondary, val);
        else if (!strcmp(tok, "primary_reset"))
            copy_num(o->primary_reset, sizeof o->primary_reset, val);
        else if (!strcmp(tok, "secondary_reset"))
            copy_num(o->secondary_reset, sizeof o->secondary_reset, val);
        else if (!strcmp(tok, "primary_window"))
            copy_num(o->primary_window, sizeof o->primary_window, val);
        else if (!strcmp(tok, "secondary_window"))
            copy_num(o->secondary_window, sizeof o->secondary_window, val);
        else if (!strcmp(tok, "primary_reset_at"))
            copy_num(o->primary_reset_at, sizeof o->primary_reset_at, val);
        else if (!strcmp(tok, "secondary_reset_at"))
            copy_num(o->secondary_reset_at, sizeof o->secondary_reset_at, val);
        else if (!strcmp(tok, "echo_auth"))
            o->echo_auth = atoi(val);
        else if (!strcmp(tok, "ok_first"))
            o->ok_first = atoi(val);
        else if (!strcmp(tok, "turn_state"))
            copy_word(o->turn_state, sizeof o->turn_state, val);
        else if (!strcmp(tok, "auth"))
            o->auth = atoi(val);
        else if (!strcmp(tok, "ttl"))
            o->ttl = atol(val);
        else if (!strcmp(tok, "hostile_claims"))
            o->hostile_claims = atoi(val);
        else if (!strcmp(tok, "big_header"))
            o->big_header = atol(val) > 0 && atol(val) <= (64L << 20) ? atol(val) : 0;
        else if (!strcmp(tok, "input_tokens"))
            o->input_tokens = atoi(val);
        else if (!strcmp(tok, "cached"))
            o->cached = atoi(val);
        else if (!strcmp(tok, "reasoning"))
            o->reasoning = atoi(val);
        else if (!strcmp(tok, "compaction"))
            o->compaction = atoi(val);
        else if (!strcmp(tok, "enc_err"))
            copy_word(o->enc_err, sizeof o->enc_err, val);
        else if (!strcmp(tok, "models"))
            copy_models(o->models, sizeof o->models, val);
        else if (!strcmp(tok, "listed"))
            copy_models(o->listed, sizeof o->listed, val);
        else if (!strcmp(tok, "accept_foreign"))
            o->accept_foreign = atoi(val);
        else if (!strcmp(tok, "echo_input"))
            o->echo_input = atoi(val);
        else if (!strcmp(tok, "tool_call"))
            o->tool_call = atoi(val);
        else if (!strcmp(tok, "tool"))
            copy_word(o->tool, sizeof o->tool, val);
        else if (!strcmp(tok, "err"))
            copy_word(o->err, sizeof o->err, val);
        else if (!strcmp(tok, "family"))
            copy_word(o->family, sizeof o->family, val);
        else if (!strcmp(tok, "family_model"))
            copy_word(o->family_model, sizeof o->family_model, val);
        else if (!strcmp(tok, "family_until"))
            copy_num(o->family_until, sizeof o->family_until, val);
        else if (!strcmp(tok, "rate_event"))
            copy_word(o->rate_event, sizeof o->rate_event, val);
        else if (!strcmp(tok, "lax"))
            o->lax = lax_parse(val);
        else if (!strcmp(tok, "anthropic"))
            o->anthropic = atoi(val);
        else if (!strcmp(tok, "speaks")) {
            if (strcmp(val, "chat") && strcmp(val, "responses"))
                fprintf(stderr, "mock_upstream: ignoring speaks (want chat or responses)\n");
            else
                snprintf(o->speaks, sizeof o->speaks, "%s", val);
        } else if (!strcmp(tok, "tool_calls")) {
            long n = strtol(val, NULL, 10); /* strtol saturates where atoi's overflow is undefined */
            o->tool_calls = n < 1 ? 1 : n > MAX_CALLS ? MAX_CALLS : (int)n;
        }
        else
            fprintf(stderr, "mock_upstream: ignoring unknown option '%s'\n", tok);
    }
    free(dup);
    if (!o->scenario[0])
        snprintf(o->scenario, sizeof o->scenario, "ok");
}

/* ---------- response scripts ---------- */

typedef enum { ACT_START, ACT_CHUNK, ACT_END, ACT_REPLY, ACT_CLOSE } act_kind;

typedef struct action {
    act_kind kind;
    long delay_ms; /* waited before the action runs */
    int waited;
    int status;    /* ACT_START, ACT_REPLY */
    int rst;       /* ACT_CLOSE */
    int tries;     /* ACT_CLOSE: waits for the output to drain */
    sbuf data;     /* ACT_CHUNK, ACT_REPLY */
} action;

typedef struct job {
    struct evhttp_request *req;
    struct evhttp_connection *evcon;
    rec *r;
    action *acts;
    size_t nacts, capacts, next;
    struct event *timer; /* the next delayed action */
    struct event *watch; /* EOF on the client socket */
    int bare_sse;        /* codex style: event streams go out without a Content-Type */
} job;

static action *job_add(job *j, act_kind kind, long delay_ms)
{
    if (j->nacts == j->capacts) {
        j->capacts = j->capacts ? j->capacts * 2 : 16;
        action *p = realloc(j->acts, j->capacts * sizeof *p);
        if (!p)
            abort();
        j->acts = p;
    }
    action *a = &j->acts[j->nacts++];
    memset(a, 0, sizeof *a);
    a->kind = kind;
    a->delay_ms = delay_ms > 0 ? delay_ms : 0;
    return a;
}

static void job_chunk(job *j, long delay_ms, const sbuf *data)
{
    action *a = job_add(j, ACT_CHUNK, delay_ms);
    sbuf_append(&a->data, data->p, data->len);
}

static void job_free(job *j)
{
    if (j->timer)
        event_free(j->timer);
    if (j->watch)
        event_free(j->watch);
    for (size_t i = 0; i < j->nacts; i++)
        sbuf_free(&j->acts[i].data);
    free(j->acts);
    free(j);
}

/* Stops watching the connection: after this only libevent owns the request. */
static void job_detach(job *j)
{
    evhttp_connection_set_closecb(j->evcon, NULL, NULL);
    if (j->watch)
        event_del(j->watch);
}

static size_t job_pending_output(job *j)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(j->evcon);
    return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

static void job_close_conn(job *j, int rst)
{
    struct evhttp_connection *evcon = j->evcon;
    if (rst) {
        struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
        evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
        if (fd >= 0) {
            struct linger lg = {1, 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
    }
    j->r->completed = 1, j->r->t_end = mock_wall();
    job_detach(j);
    job_free(j);
    evhttp_connection_free(evcon); /* frees the request too */
}

static void job_schedule(job *j, long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(j->timer, &tv);
}

static void job_run(job *j)
{
    while (j->next < j->nacts) {
        action *a = &j->acts[j->next];
        if (a->delay_ms > 0 && !a->waited) {
            a->waited = 1;
            job_schedule(j, a->delay_ms);
            return;
        }
        switch (a->kind) {
        case ACT_START:
            j->next++;
            evhttp_send_reply_start(j->req, a->status, NULL);
            break;
        case ACT_CHUNK: {
            j->next++;
            struct evbuffer *b = evbuffer_new();
            evbuffer_add(b, a->data.p, a->data.len);
            evhttp_send_reply_chunk(j->req, b);
            evbuffer_free(b);
            break;
        }
        case ACT_END: {
            struct evhttp_request *req = j->req;
            j->r->completed = 1, j->r->t_end = mock_wall();
            job_detach(j);
            job_free(j);
            evhttp_send_reply_end(req);
            return;
        }
        case ACT_REPLY: {
            struct evhttp_request *req = j->req;
            struct evbuffer *b = evbuffer_new();
            evbuffer_add(b, a->data.p, a->data.len);
            int status = a->status;
            j->r->completed = 1, j->r->t_end = mock_wall();
            job_detach(j);
            job_free(j);
            evhttp_send_reply(req, status, NULL, b);
            evbuffer_free(b);
            return;
        }
        case ACT_CLOSE:
            /* let what was sent reach the socket first (bounded wait) */
            if (job_pending_output(j) > 0 && a->tries++ < 1000) {
                job_schedule(j, 5);
                return;
            }
            job_close_conn(j, a->rst);
            return;
        }
    }
}

static void job_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    job_run(arg);
}

/* The connection is going away under us (write error, server shutdown). */
static void job_close_cb(struct evhttp_connection *evcon, void *arg)
{
    job *j = arg;
    (void)evcon;
    if (!j->r->completed)
        j->r->aborted = 1, j->r->t_end = mock_wall();
    /* A request libevent detached from its failed connection is ours to free. */
    if (evhttp_request_get_connection(j->req) == NULL)
        evhttp_request_free(j->req);
    job_free(j);
}

/* Read readiness on the client socket while we answer: EOF or an error means
 * the client went away (libevent does not read while a reply is pending). */
static void job_watch_cb(evutil_socket_t fd, short what, void *arg)
{
    job *j = arg;
    char c;
    (void)what;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) { /* pipelined bytes: not ours to read; stop watching */
        event_del(j->watch);
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    struct evhttp_connection *evcon = j->evcon;
    j->r->aborted = 1, j->r->t_end = mock_wall();
    job_detach(j);
    job_free(j);
    evhttp_connection_free(evcon);
}

/* ---------- payloads ---------- */

typedef struct gen {
    const char *name;
    const char *model;
    char resp_id[192], msg_id[192], chat_id[192];
    long created;
    int seq;
    sbuf *pieces;
    int npieces;
    sbuf text;
    int input_tokens, cached_tokens;
    /* items before the message (reasoning=1, compaction=1): empty blob = none */
    char rs_id[192], cmp_id[192];
    sbuf rs_blob, cmp_blob;
    int msg_index; /* the message's output_index: after the items above */
    /* tool_call=1: ncalls function calls from msg_index on, in place of the message */
    int ncalls;
    struct {
        char fc_id[192], call_id[192];
        sbuf args;
    } calls[MAX_CALLS];
    char tool[256];  /* the calls' name (the Messages API: the request's first tool, up to 255 bytes) */
    int think;       /* chat, reasoning=1: reasoning_content deltas before the answer */
    int bare_output; /* codex style: the response.completed event lists no items */
} gen;

static void gen_init(gen *g, const char *name, const char *model, long n, int npieces)
{
    memset(g, 0, sizeof *g);
    g->name = name;
    g->model = model;
    g->created = (long)time(NULL);
    snprintf(g->resp_id, sizeof g->resp_id, "resp_%s_%ld", name, n);
    snprintf(g->msg_id, sizeof g->msg_id, "msg_%s_%ld", name, n);
    snprintf(g->chat_id, sizeof g->chat_id, "chatcmpl-%s-%ld", name, n);
    if (npieces < 3)
        npieces = 3;
    g->npieces = npieces;
    g->pieces = calloc((size_t)npieces, sizeof *g->pieces);
    if (!g->pieces)
        abort();
    sbuf_puts(&g->pieces[0], "hello");
    sbuf_puts(&g->pieces[1], " from");
    sbuf_printf(&g->pieces[2], " %s", name);
    for (int i = 3; i < npieces; i++)
        sbuf_puts(&g->pieces[i], ".");
    for (int i = 0; i < npieces; i++)
        sbuf_append(&g->text, g->pieces[i].p, g->pieces[i].len);
    g->input_tokens = 7;
}

static void gen_free(gen *g)
{
    for (int i = 0; i < g->npieces; i++)
        sbuf_free(&g->pieces[i]);
    free(g->pieces);
    sbuf_free(&g->text);
    sbuf_free(&g->rs_blob);
    sbuf_free(&g->cmp_blob);
    for (int k = 0; k < MAX_CALLS; k++)
        sbuf_free(&g->calls[k].args);
}

/* One more text delta at the end (echo_input's marker). */
static void gen_add_piece(gen *g, const char *text)
{
    sbuf *p = realloc(g->pieces, (size_t)(g->npieces + 1) * sizeof *p);
    if (!p)
        abort();
    g->pieces = p;
    sbuf piece = SBUF_INIT;
    sbuf_puts(&piece, text);
    g->pieces[g->npieces++] = piece;
    sbuf_puts(&g->text, text);
}

static void js(sbuf *b, const char *s) { sbuf_json_str(b, s, strlen(s)); }

static void sse_open(sbuf *b, const char *event)
{
    if (event)
        sbuf_printf(b, "event: %s\n", event);
    sbuf_puts(b, "data: ");
}

static void sse_close(sbuf *b) { sbuf_puts(b, "\n\n"); }

static void usage_resp(sbuf *b, const gen *g, int out_tokens)
{
    sbuf_printf(b,
                "{\"input_tokens\":%d,\"input_tokens_details\":{\"cached_tokens\":%d},"
                "\"output_tokens\":%d,\"output_tokens_details\":{\"reasoning_tokens\":0},"
                "\"total_tokens\":%d}",
                g->input_tokens, g->cached_tokens, out_tokens, g->input_tokens + out_tokens);
}

static void message_item(sbuf *b, const gen *g, int done)
{
    sbuf_puts(b, "{\"id\":");
    js(b, g->msg_id);
    sbuf_printf(b, ",\"type\":\"message\",\"status\":\"%s\",\"role\":\"assistant\",\"content\":",
                done ? "completed" : "in_progress");
    if (done) {
        sbuf_puts(b, "[{\"type\":\"output_text\",\"text\":");
        sbuf_json_str(b, g->text.p, g->text.len);
        sbuf_puts(b, ",\"annotations\":[]}]}");
    } else {
        sbuf_puts(b, "[]}");
    }
}

/* A reasoning or compaction item; the output_item.added event carries it
 * without its encrypted_content, the done event and the response whole. */
static void reasoning_item(sbuf *b, const gen *g, int done)
{
    sbuf_puts(b, "{\"type\":\"reasoning\",\"id\":");
    js(b, g->rs_id);
    if (!done) {
        sbuf_puts(b, ",\"summary\":[]}");
        return;
    }
    sbuf_puts(b, ",\"summary\":[{\"type\":\"summary_text\",\"text\":\"thinking\"}],\"encrypted_content\":");
    sbuf_json_str(b, g->rs_blob.p, g->rs_blob.len);
    sbuf_puts(b, "}");
}

static void compaction_item(sbuf *b, const gen *g, int done)
{
    sbuf_puts(b, "{\"type\":\"compaction\",\"id\":");
    js(b, g->cmp_id);
    if (done) {
        sbuf_puts(b, ",\"encrypted_content\":");
        sbuf_json_str(b, g->cmp_blob.p, g->cmp_blob.len);
    }
    sbuf_puts(b, "}");
}

/* Function call k; in progress its arguments are still empty, as the
 * output_item.added event of the real API shows it. */
static void function_call_item(sbuf *b, const gen *g, int k, int done)
{
    sbuf_puts(b, "{\"type\":\"function_call\",\"id\":");
    js(b, g->calls[k].fc_id);
    sbuf_puts(b, ",\"call_id\":");
    js(b, g->calls[k].call_id);
    sbuf_puts(b, ",\"name\":");
    js(b, g->tool);
    sbuf_puts(b, ",\"arguments\":");
    if (done)
        sbuf_json_str(b, g->calls[k].args.p, g->calls[k].args.len);
    else
        sbuf_puts(b, "\"\"");
    sbuf_printf(b, ",\"status\":\"%s\"}", done ? "completed" : "in_progress");
}

/* The completed output array: [reasoning,] [compaction,] the message or the function calls. */
static void output_items(sbuf *b, const gen *g)
{
    sbuf_puts(b, "[");
    if (g->rs_blob.len) {
        reasoning_item(b, g, 1);
        sbuf_puts(b, ",");
    }
    if (g->cmp_blob.len) {
        compaction_item(b, g, 1);
        sbuf_puts(b, ",");
    }
    for (int k = 0; k < g->ncalls; k++) {
        if (k)
            sbuf_puts(b, ",");
        function_call_item(b, g, k, 1);
    }
    if (!g->ncalls)
        message_item(b, g, 1);
    sbuf_puts(b, "]");
}

/* The response object; status "in_progress", "completed" or "failed".
 * A completed one lists its output items unless bare (the codex style's
 * response.completed event: its items came in output_item.done events). */
static void response_obj_x(sbuf *b, const gen *g, const char *status, const char *err_code,
                           const char *err_msg, int bare)
{
    int done = strcmp(status, "completed") == 0;
    sbuf_puts(b, "{\"id\":");
    js(b, g->resp_id);
    sbuf_printf(b, ",\"object\":\"response\",\"created_at\":%ld,\"status\":\"%s\",\"model\":",
                g->created, status);
    js(b, g->model);
    sbuf_puts(b, ",\"error\":");
    if (err_code) {
        sbuf_puts(b, "{\"code\":");
        js(b, err_code);
        sbuf_puts(b, ",\"message\":");
        js(b, err_msg);
        sbuf_puts(b, "}");
    } else {
        sbuf_puts(b, "null");
    }
    sbuf_puts(b, ",\"output\":");
    if (done) {
        if (bare)
            sbuf_puts(b, "[]");
        else
            output_items(b, g);
        sbuf_puts(b, ",\"usage\":");
        usage_resp(b, g, g->npieces);
    } else {
        sbuf_puts(b, "[],\"usage\":null");
    }
    sbuf_puts(b, "}");
}

static void response_obj(sbuf *b, const gen *g, const char *status, const char *err_code,
                         const char *err_msg)
{
    response_obj_x(b, g, status, err_code, err_msg, 0);
}

static void ev_resp_state(sbuf *b, gen *g, const char *type, const char *status)
{
    sse_open(b, type);
    sbuf_printf(b, "{\"type\":\"%s\",\"sequence_number\":%d,\"response\":", type, g->seq++);
    response_obj_x(b, g, status, NULL, NULL, g->bare_output);
    sbuf_puts(b, "}");
    sse_close(b);
}

/* output_item.added and .done of the items before the message. */
static void ev_pre_items(sbuf *b, gen *g)
{
    int idx = 0;
    for (int k = 0; k < 2; k++) {
        const sbuf *blob = k == 0 ? &g->rs_blob : &g->cmp_blob;
        if (!blob->len)
            continue;
        for (int done = 0; done < 2; done++) {
            const char *type = done ? "response.output_item.done" : "response.output_item.added";
            sse_open(b, type);
            sbuf_printf(b, "{\"type\":\"%s\",\"sequence_number\":%d,\"output_index\":%d,\"item\":", type,
                        g->seq++, idx);
            if (k == 0)
                reasoning_item(b, g, done);
            else
                compaction_item(b, g, done);
            sbuf_puts(b, "}");
            sse_close(b);
        }
        idx++;
    }
}

static void ev_item_added(sbuf *b, gen *g)
{
    sse_open(b, "response.output_item.added");
    sbuf_printf(b, "{\"type\":\"response.output_item.added\",\"sequence_number\":%d,"
                   "\"output_index\":%d,\"item\":", g->seq++, g->msg_index);
    message_item(b, g, 0);
    sbuf_puts(b, "}");
    sse_close(b);
}

static void ev_part(sbuf *b, gen *g, const char *type, int done)
{
    sse_open(b, type);
    sbuf_printf(b, "{\"type\":\"%s\",\"sequence_number\":%d,\"item_id\":", type, g->seq++);
    js(b, g->msg_id);
    sbuf_printf(b, ",\"output_index\":%d,\"content_index\":0,\"part\":{\"type\":\"output_text\","
                   "\"text\":", g->msg_index);
    if (done)
        sbuf_json_str(b, g->text.p, g->text.len);
    else
        sbuf_puts(b, "\"\"");
    sbuf_puts(b, ",\"annotations\":[]}}");
    sse_close(b);
}

static void ev_delta(sbuf *b, gen *g, int i)
{
    sse_open(b, "response.output_text.delta");
    sbuf_printf(b, "{\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"item_id\":",
                g->seq++);
    js(b, g->msg_id);
    sbuf_printf(b, ",\"output_index\":%d,\"content_index\":0,\"delta\":", g->msg_index);
    sbuf_json_str(b, g->pieces[i].p, g->pieces[i].len);
    sbuf_puts(b, "}");
    sse_close(b);
}

static void ev_text_done(sbuf *b, gen *g)
{
    sse_open(b, "response.output_text.done");
    sbuf_printf(b, "{\"type\":\"response.output_text.done\",\"sequence_number\":%d,\"item_id\":",
                g->seq++);
    js(b, g->msg_id);
    sbuf_printf(b, ",\"output_index\":%d,\"content_index\":0,\"text\":", g->msg_index);
    sbuf_json_str(b, g->text.p, g->text.len);
    sbuf_puts(b, "}");
    sse_close(b);
}

static void ev_item_done(sbuf *b, gen *g)
{
    sse_open(b, "response.output_item.done");
    sbuf_printf(b, "{\"type\":\"response.output_item.done\",\"sequence_number\":%d,"
                   "\"output_index\":%d,\"item\":", g->seq++, g->msg_index);
    message_item(b, g, 1);
    sbuf_puts(b, "}");
    sse_close(b);
}

/* How a function call's arguments are streamed: ARG_PIECES pieces (the
 * last takes the rest), as the real APIs send several per call. */
#define ARG_PIECES 3
static void arg_piece(const sbuf *args, int i, size_t *off, size_t *len)
{
    size_t step = args->len / ARG_PIECES;
    *off = step * (size_t)i;
    *len = i == ARG_PIECES - 1 ? args->len - *off : step;
}

/* Function call k's events: output_item.added, its arguments in
 * ARG_PIECES deltas, function_call_arguments.done, output_item.done. */
static void ev_function_call(sbuf *b, gen *g, int k)
{
    int idx = g->msg_index + k;
    sse_open(b, "response.output_item.added");
    sbuf_printf(b, "{\"type\":\"response.output_item.added\",\"sequence_number\":%d,"
                   "\"output_index\":%d,\"item\":", g->seq++, idx);
    function_call_item(b, g, k, 0);
    sbuf_puts(b, "}");
    sse_close(b);
    for (int i = 0; i < ARG_PIECES; i++) {
        size_t off, len;
        arg_piece(&g->calls[k].args, i, &off, &len);
        sse_open(b, "response.function_call_arguments.delta");
        sbuf_printf(b, "{\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":%d,"
                       "\"item_id\":", g->seq++);
        js(b, g->calls[k].fc_id);
        sbuf_printf(b, ",\"output_index\":%d,\"delta\":", idx);
        sbuf_json_str(b, g->calls[k].args.p + off, len);
        sbuf_puts(b, "}");
        sse_close(b);
    }
    sse_open(b, "response.function_call_arguments.done");
    sbuf_printf(b, "{\"type\":\"response.function_call_arguments.done\",\"sequence_number\":%d,"
                   "\"item_id\":", g->seq++);
    js(b, g->calls[k].fc_id);
    sbuf_puts(b, ",\"name\":");
    js(b, g->tool);
    sbuf_printf(b, ",\"output_index\":%d,\"arguments\":", idx);
    sbuf_json_str(b, g->calls[k].args.p, g->calls[k].args.len);
    sbuf_puts(b, "}");
    sse_close(b);
    sse_open(b, "response.output_item.done");
    sbuf_printf(b, "{\"type\":\"response.output_item.done\",\"sequence_number\":%d,"
                   "\"output_index\":%d,\"item\":", g->seq++, idx);
    function_call_item(b, g, k, 1);
    sbuf_puts(b, "}");
    sse_close(b);
}

static void ev_error(sbuf *b, gen *g, const char *code, const char *message)
{
    sse_open(b, "error");
    sbuf_printf(b, "{\"type\":\"error\",\"sequence_number\":%d,\"code\":", g->seq++);
    js(b, code);
    sbuf_puts(b, ",\"message\":");
    js(b, message);
    sbuf_puts(b, ",\"param\":null}");
    sse_close(b);
}

static void ev_failed(sbuf *b, gen *g, const char *code, const char *message)
{
    sse_open(b, "response.failed");
    sbuf_printf(b, "{\"type\":\"response.failed\",\"sequence_number\":%d,\"response\":", g->seq++);
    response_obj(b, g, "failed", code, message);
    sbuf_puts(b, "}");
    sse_close(b);
}

static void chat_chunk_open(sbuf *b, const gen *g)
{
    sse_open(b, NULL);
    sbuf_puts(b, "{\"id\":");
    js(b, g->chat_id);
    sbuf_printf(b, ",\"object\":\"chat.completion.chunk\",\"created\":%ld,\"model\":", g->created);
    js(b, g->model);
}

static void chat_role(sbuf *b, const gen *g)
{
    chat_chunk_open(b, g);
    sbuf_puts(b, ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                 "\"finish_reason\":null}]}");
    sse_close(b);
}

static void chat_delta(sbuf *b, const gen *g, int i)
{
    chat_chunk_open(b, g);
    sbuf_puts(b, ",\"choices\":[{\"index\":0,\"delta\":{\"content\":");
    sbuf_json_str(b, g->pieces[i].p, g->pieces[i].len);
    sbuf_puts(b, "},\"finish_reason\":null}]}");
    sse_close(b);
}

/* reasoning=1 on chat: the model's thinking streamed as reasoning_content
 * deltas before the answer, as DeepSeek's API streams it (content null). */
static const char *const g_think_pieces[] = {"thinking", " about", " it"};
#define THINK_TEXT "thinking about it"

static void chat_think(sbuf *b, const gen *g, int i)
{
    chat_chunk_open(b, g);
    sbuf_puts(b, ",\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"reasoning_content\":");
    js(b, g_think_pieces[i]);
    sbuf_puts(b, "},\"finish_reason\":null}]}");
    sse_close(b);
}

/* Tool call k streamed as OpenAI streams one: its first chunk carries
 * index, id, type, function.name and arguments "", the later ones only the
 * index and a piece of the arguments. piece -1 is the first chunk. */
static void chat_tool_chunk(sbuf *b, const gen *g, int k, int piece)
{
    chat_chunk_open(b, g);
    sbuf_printf(b, ",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%d,", k);
    if (piece < 0) {
        sbuf_puts(b, "\"id\":");
        js(b, g->calls[k].call_id);
        sbuf_puts(b, ",\"type\":\"function\",\"function\":{\"name\":");
        js(b, g->tool);
        sbuf_puts(b, ",\"arguments\":\"\"}}]");
    } else {
        size_t off, len;
        arg_piece(&g->calls[k].args, piece, &off, &len);
        sbuf_puts(b, "\"function\":{\"arguments\":");
        sbuf_json_str(b, g->calls[k].args.p + off, len);
        sbuf_puts(b, "}}]");
    }
    sbuf_puts(b, "},\"finish_reason\":null}]}");
    sse_close(b);
}

static void chat_usage_obj(sbuf *b, const gen *g)
{
    sbuf_printf(b, "{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d,"
                   "\"prompt_tokens_details\":{\"cached_tokens\":%d}}",
                g->input_tokens, g->npieces, g->input_tokens + g->npieces, g->cached_tokens);
}

static void chat_finish(sbuf *b, const gen *g)
{
    chat_chunk_open(b, g);
    sbuf_printf(b, ",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"%s\"}]}",
                g->ncalls ? "tool_calls" : "stop");
    sse_close(b);
    chat_chunk_open(b, g);
    sbuf_puts(b, ",\"choices\":[],\"usage\":");
    chat_usage_obj(b, g);
    sbuf_puts(b, "}");
    sse_close(b);
    sbuf_puts(b, "data: [DONE]\n\n");
}

/* The plain chat answer's message: the text, or the tool calls (content
 * null), and reasoning_content under reasoning=1. */
static void chat_message(sbuf *b, const gen *g)
{
    sbuf_puts(b, "{\"role\":\"assistant\",\"content\":");
    if (g->ncalls)
        sbuf_puts(b, "null");
    else
        sbuf_json_str(b, g->text.p, g->text.len);
    if (g->think)
        sbuf_puts(b, ",\"reasoning_content\":\"" THINK_TEXT "\"");
    if (g->ncalls) {
        sbuf_puts(b, ",\"tool_calls\":[");
        for (int k = 0; k < g->ncalls; k++) {
            sbuf_puts(b, k ? ",{\"id\":" : "{\"id\":");
            js(b, g->calls[k].call_id);
            sbuf_puts(b, ",\"type\":\"function\",\"function\":{\"name\":");
            js(b, g->tool);
            sbuf_puts(b, ",\"arguments\":");
            sbuf_json_str(b, g->calls[k].args.p, g->calls[k].args.len);
            sbuf_puts(b, "}}");
        }
        sbuf_puts(b, "]");
    }
    sbuf_puts(b, "}");
}

static void error_json_full(sbuf *b, const char *message, const char *type, const char *param,
                            const char *code, const char *extra)
{
    sbuf_puts(b, "{\"error\":{\"message\":");
    js(b, message);
    sbuf_puts(b, ",\"type\":");
    js(b, type);
    sbuf_puts(b, ",\"param\":");
    json_str_or_null(b, param);
    sbuf_puts(b, ",\"code\":");
    json_str_or_null(b, code);
    if (extra)
        sbuf_puts(b, extra);
    sbuf_puts(b, "}}");
}

static void error_json(sbuf *b, const char *message, const char *type, const char *code,
                       const char *extra)
{
    error_json_full(b, message, type, NULL, code, extra);
}

static void error_json_param(sbuf *b, const char *message, const char *type, const char *param,
                             const char *code)
{
    error_json_full(b, message, type, param, code, NULL);
}

static void chat_error_chunk(sbuf *b, const char *message, const char *type, const char *code)
{
    sse_open(b, NULL);
    error_json(b, message, type, code, NULL);
    sse_close(b);
}

#define QUOTA_MSG "You've hit your usage limit. Upgrade to Pro or try again later."
#define LATE_MSG "You've hit your usage limit"
#define INSUFFICIENT_MSG "You exceeded your current quota, please check your plan and billing details."

static void status_error(sbuf *b, int code)
{
    switch (code) {
    case 400: error_json(b, "Invalid request.", "invalid_request_error", "invalid_request", NULL); break;
    case 401: error_json(b, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key", NULL); break;
    case 403: error_json(b, "You are not allowed to use this resource.", "permission_error", "forbidden", NULL); break;
    case 404: error_json(b, "The model does not exist.", "invalid_request_error", "model_not_found", NULL); break;
    case 408: error_json(b, "Request timed out.", "timeout_error", "timeout", NULL); break;
    case 409: error_json(b, "Conflict.", "conflict_error", "conflict", NULL); break;
    case 429: error_json(b, "Rate limit reached for requests.", "requests", "rate_limit_exceeded", NULL); break;
    default:
        if (code >= 500)
            error_json(b, "The server had an error while processing your request.", "server_error",
                       "server_error", NULL);
        else
            error_json(b, "Mock upstream error.", "mock_error", "mock_error", NULL);
    }
}

/* status=<code>,err=<shape>: the account refused in the upstream's own
 * words, shapes waiting does not heal: the ChatGPT backend's deactivated
 * workspace (402) and workspace that may not use Codex (403), and the
 * API's unsupported region (403), deactivated account (401) and wrong key
 * (401, quoting a key). 0 when err names none. */
static int account_refusal(sbuf *b, const char *err)
{
    if (!strcmp(err, "deactivated_workspace"))
        sbuf_puts(b, "{\"detail\":{\"code\":\"deactivated_workspace\"}}");
    else if (!strcmp(err, "workspace_denied"))
        sbuf_puts(b, "{\"detail\":{\"code\":\"invalid_workspace_selected\"}}");
    else if (!strcmp(err, "region"))
        error_json(b, "Country, region, or territory not supported", "request_forbidden",
                   "unsupported_country_region_territory", NULL);
    else if (!strcmp(err, "invalid_api_key")) /* the API's 401 for a wrong key: it quotes the key (here a fixed one) */
        error_json(b, "Incorrect API key provided: sk-proj-Zq9XkWm3Pb8VrT5nLc2YhF7gD4sA1eJ6. You can find your API "
                   "key at https://platform.openai.com/account/api-keys.",
                   "invalid_request_error", "invalid_api_key", NULL);
    else if (!strcmp(err, "account_deactivated")) /* the API's 401 for a key of a deactivated account */
        error_json(b, "The OpenAI account associated with this API key has been deactivated. If you are the developer "
                   "for this OpenAI app, please check your email for more information.",
                   "invalid_request_error", "account_deactivated", NULL);
    else
        return 0;
    return 1;
}

/* ---------- building the answer ---------- */

typedef enum {
    EP_RESPONSES, EP_CHAT, EP_MODELS, EP_USAGE, EP_STORED,
    EP_MESSAGES,       /* the Anthropic Messages API: v1/messages (an anthropic=1 account's) */
    EP_MESSAGES_COUNT, /* v1/messages/count_tokens */
    EP_UNKNOWN
} endpoint;

static void add_header(struct evhttp_request *req, const char *k, const char *v)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), k, v);
}

/* Turn states are per account, as on separate backends: the mock
 * remembers which account issued each one, and an account refuses a turn
 * state another account issued (turn_state_foreign). Unknown ones pass. */
#define MAX_TURN_STATES 256
static struct {
    char value[64], account[128];
} g_turn_states[MAX_TURN_STATES];
static size_t g_n_turn_states;

static void turn_state_issued(const char *value, const char *account)
{
    for (size_t i = 0; i < g_n_turn_states; i++)
        if (!strcmp(g_turn_states[i].value, value))
            return;
    if (g_n_turn_states == MAX_TURN_STATES)
        return;
    snprintf(g_turn_states[g_n_turn_states].value, sizeof g_turn_states[0].value, "%s", value);
    snprintf(g_turn_states[g_n_turn_states].account, sizeof g_turn_states[0].account, "%s", account);
    g_n_turn_states++;
}

/* 1 when value was issued by another account than account. */
static int turn_state_foreign(const char *value, const char *account)
{
    for (size_t i = 0; value && i < g_n_turn_states; i++)
        if (!strcmp(g_turn_states[i].value, value))
            return strcmp(g_turn_states[i].account, account) != 0;
    return 0;
}

/* ---------- encrypted content: each account its own key ----------
 *
 * Blobs look like Fernet tokens (what OpenAI's encrypted_content is): URL-safe
 * base64 with padding of 0x80 | 8-byte time | 16-byte IV | ciphertext |
 * 32-byte HMAC-SHA256. The plaintext names the account that minted it and is
 * encrypted under one mock-wide key (so the mock can say who minted a blob it
 * is shown); the HMAC is keyed per account, derived from a secret drawn at
 * start. A blob verifies for an account only if that account minted it in
 * this mock process: another account's blob, an edited one or one the mock
 * never made are refused, as separate backends refuse them. */

static uint8_t g_secret[32];

static void secret_init(void)
{
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(g_secret, 1, sizeof g_secret, f) : 0;
    if (f)
        fclose(f);
    if (got != sizeof g_secret) { /* no urandom: time, pid and an address still differ per process */
        char seed[96];
        snprintf(seed, sizeof seed, "%ld %ld %p", (long)time(NULL), (long)getpid(), (void *)&seed);
        sha256(seed, strlen(seed), g_secret);
    }
}

/* sha256(secret | label | name): the mock-wide "enc" key or an account's "mac" key. */
static void key_derive(const char *label, const char *name, uint8_t out[32])
{
    sbuf b = SBUF_INIT;
    sbuf_append(&b, g_secret, sizeof g_secret);
    sbuf_puts(&b, label);
    sbuf_append(&b, "|", 1);
    sbuf_puts(&b, name);
    sha256(b.p, b.len, out);
    sbuf_free(&b);
}

static void hmac_sha256(const uint8_t key[32], const void *msg, size_t n, uint8_t out[32])
{
    uint8_t pad[64], inner[32];
    sbuf b = SBUF_INIT;
    for (int i = 0; i < 64; i++)
        pad[i] = (uint8_t)((i < 32 ? key[i] : 0) ^ 0x36);
    sbuf_append(&b, pad, sizeof pad);
    sbuf_append(&b, msg, n);
    sha256(b.p, b.len, inner);
    sbuf_reset(&b);
    for (int i = 0; i < 64; i++)
        pad[i] = (uint8_t)((i < 32 ? key[i] : 0) ^ 0x5c);
    sbuf_append(&b, pad, sizeof pad);
    sbuf_append(&b, inner, sizeof inner);
    sha256(b.p, b.len, out);
    sbuf_free(&b);
}

/* XORs p with the keystream sha256(enc key | iv | block number). */
static void blob_crypt(uint8_t *p, size_t n, const uint8_t iv[16])
{
    uint8_t key[32], in[52], ks[32];
    key_derive("enc", "", key);
    memcpy(in, key, 32);
    memcpy(in + 32, iv, 16);
    for (size_t off = 0, blk = 0; off < n; off += 32, blk++) {
        in[48] = (uint8_t)(blk >> 24);
        in[49] = (uint8_t)(blk >> 16);
        in[50] = (uint8_t)(blk >> 8);
        in[51] = (uint8_t)blk;
        sha256(in, sizeof in, ks);
        for (size_t i = 0; i < 32 && off + i < n; i++)
            p[off + i] ^= ks[i];
    }
}

static void b64url(sbuf *out, const char *p, size_t n);

#define BLOB_HEAD 25 /* version, time, IV */
#define BLOB_MAC 32
#define BLOB_MAX_CHARS 65536 /* longer strings are nobody's blob: not decoded */

/* A new blob minted by account: kind "reasoning" or "compaction", n the
 * request's number; about `size` bytes of plaintext. Unique per call. */
static void blob_mint(sbuf *out, const char *account, const char *kind, long n, size_t size)
{
    static long serial;
    serial++;
    sbuf raw = SBUF_INIT, pt = SBUF_INIT;
    sbuf_printf(&pt, "mock-ec|%zu|%s|%s|%ld|%ld|", strlen(account), account, kind, n, serial);
    while (pt.len < size)
        sbuf_puts(&pt, "thinking ");
    size_t padn = 16 - pt.len % 16; /* PKCS#7, as Fernet's AES-CBC: the ciphertext is whole blocks */
    for (size_t i = 0; i < padn; i++) {
        char c = (char)padn;
        sbuf_append(&pt, &c, 1);
    }
    uint8_t head[BLOB_HEAD], d[32], mac[BLOB_MAC], key[32];
    uint64_t t = (uint64_t)time(NULL);
    head[0] = 0x80;
    for (int i = 0; i < 8; i++)
        head[1 + i] = (uint8_t)(t >> (56 - 8 * i));
    char ivseed[48];
    snprintf(ivseed, sizeof ivseed, "iv|%ld", serial);
    key_derive(ivseed, account, d);
    memcpy(head + 9, d, 16);
    blob_crypt((uint8_t *)pt.p, pt.len, head + 9);
    sbuf_append(&raw, head, sizeof head);
    sbuf_append(&raw, pt.p, pt.len);
    key_derive("mac", account, key);
    hmac_sha256(key, raw.p, raw.len, mac);
    sbuf_append(&raw, mac, sizeof mac);
    b64url(out, raw.p, raw.len);
    for (size_t i = 0; i < (3 - raw.len % 3) % 3; i++)
        sbuf_append(out, "=", 1);
    sbuf_free(&raw);
    sbuf_free(&pt);
}

/* URL-safe base64, '=' padding optional. -1 on any other character. */
static int b64url_decode(const char *s, size_t n, sbuf *out)
{
    while (n > 0 && s[n - 1] == '=')
        n--;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int v = c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26
              : c >= '0' && c <= '9' ? c - '0' + 52 : c == '-' ? 62 : c == '_' ? 63 : -1;
        if (v < 0)
            return -1;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            char byte = (char)((acc >> bits) & 0xff);
            sbuf_append(out, &byte, 1);
        }
    }
    return 0;
}

/* 1 when the mock minted blob v (whole and unedited): its account in by. */
static int blob_minter(const char *v, size_t n, char *by, size_t byn)
{
    sbuf raw = SBUF_INIT;
    int ok = 0;
    if (n > BLOB_MAX_CHARS || b64url_decode(v, n, &raw) < 0 || raw.len < BLOB_HEAD + 16 + BLOB_MAC ||
        (raw.len - BLOB_HEAD - BLOB_MAC) % 16 || (uint8_t)raw.p[0] != 0x80)
        goto out;
    size_t ctn = raw.len - BLOB_HEAD - BLOB_MAC;
    char *pt = malloc(ctn + 1);
    if (!pt)
        abort();
    memcpy(pt, raw.p + BLOB_HEAD, ctn);
    pt[ctn] = '\0';
    blob_crypt((uint8_t *)pt, ctn, (const uint8_t *)raw.p + 9);
    char *end = NULL;
    if (!strncmp(pt, "mock-ec|", 8)) {
        unsigned long len = strtoul(pt + 8, &end, 10);
        size_t room = end && *end == '|' ? (size_t)(pt + ctn - (end + 1)) : 0; /* bytes after the '|' */
        if (len < byn && len < room && end[1 + len] == '|') {
            memcpy(by, end + 1, len);
            by[len] = '\0';
            uint8_t key[32], mac[BLOB_MAC];
            key_derive("mac", by, key);
            hmac_sha256(key, raw.p, raw.len - BLOB_MAC, mac);
            ok = memcmp(mac, raw.p + raw.len - BLOB_MAC, BLOB_MAC) == 0;
        }
    }
    free(pt);
out:
    sbuf_free(&raw);
    if (!ok && byn)
        by[0] = '\0';
    return ok;
}

/* "gAAA...DQ==": the blob as OpenAI's error messages show it (first and
 * last 4 characters; bytes other than printable ASCII become '?'). */
static void blob_abbrev(sbuf *b, const char *v)
{
    size_t n = strlen(v);
    char s[12];
    size_t k = 0;
    for (size_t i = 0; i < 4 && i < n; i++)
        s[k++] = v[i] >= ' ' && v[i] < 127 ? v[i] : '?';
    memcpy(s + k, "...", 3);
    k += 3;
    for (size_t i = n > 4 ? n - 4 : 0; i < n && k < sizeof s; i++)
        s[k++] = v[i] >= ' ' && v[i] < 127 ? v[i] : '?';
    sbuf_append(b, s, k);
}

/* ---------- stored responses, per account ----------
 *
 * Every /responses answer that completes, unless the request said
 * "store": false, is kept under its account: GET and DELETE /responses/{id}
 * and previous_response_id see only their own account's. Kept across
 * POST /_reset (like turn states); the oldest go first past the bounds. */

typedef struct stored {
    char id[192], account[128], prev[192];
    char *response; /* the completed response object */
    char *input;    /* the request's input items, a JSON array */
} stored;

#define STORED_MAX 4096
#define STORED_BYTES_MAX ((size_t)32 << 20)
static stored *g_stored[STORED_MAX];
static size_t g_nstored, g_stored_bytes;

static void stored_drop(size_t i)
{
    stored *s = g_stored[i];
    g_stored_bytes -= strlen(s->response) + strlen(s->input);
    free(s->response);
    free(s->input);
    free(s);
    memmove(&g_stored[i], &g_stored[i + 1], (g_nstored - i - 1) * sizeof g_stored[0]);
    g_nstored--;
}

static stored *stored_find(const char *account, const char *id, size_t *at)
{
    for (size_t i = 0; id && i < g_nstored; i++)
        if (!strcmp(g_stored[i]->id, id) && !strcmp(g_stored[i]->account, account)) {
            if (at)
                *at = i;
            return g_stored[i];
        }
    return NULL;
}

static void stored_add(const char *account, const char *id, const char *prev, const char *response,
                       const char *input)
{
    size_t bytes = strlen(response) + strlen(input);
    while (g_nstored > 0 && (g_nstored == STORED_MAX || g_stored_bytes + bytes > STORED_BYTES_MAX))
        stored_drop(0);
    if (bytes > STORED_BYTES_MAX)
        return;
    stored *s = calloc(1, sizeof *s);
    if (!s)
        abort();
    snprintf(s->id, sizeof s->id, "%s", id);
    snprintf(s->account, sizeof s->account, "%s", account);
    snprintf(s->prev, sizeof s->prev, "%s", prev ? prev : "");
    s->response = xstrdup(response);
    s->input = xstrdup(input);
    g_stored[g_nstored++] = s;
    g_stored_bytes += bytes;
}

/* How many of account's stored responses the chain from id follows (0: id is not its). */
static int stored_chain(const char *account, const char *id)
{
    int depth = 0;
    for (const stored *s = stored_find(account, id, NULL); s && (size_t)depth <= g_nstored;
         s = s->prev[0] ? stored_find(account, s->prev, NULL) : NULL)
        depth++;
    return depth;
}

static void stored_free_all(void)
{
    while (g_nstored > 0)
        stored_drop(g_nstored - 1);
}

/* ---------- what a /responses request carries ---------- */

typedef struct reqinfo {
    int want_reasoning; /* "include" holds "reasoning.encrypted_content" */
    int after_tool;     /* the last input item is a function_call_output or custom_tool_call_output
                         * (chat: the last message is a tool message) */
    int store;          /* "store" is not false */
    int prev_missing;   /* previous_response_id is none of this account's stored responses */
    char *input;        /* the input items as a JSON array (a string input: one user message) */
    char *bad_blob;     /* the first encrypted_content this account did not mint */
    char *bad_item;     /* the id of the input item holding it, or NULL */
    unsigned rules;     /* the RULE_* in force for this request (its style, less lax=) */
    char *tool_name;    /* the Messages API: the name of the request's first tool, or NULL */
} reqinfo;

static void reqinfo_free(reqinfo *ri)
{
    free(ri->tool_name);
    free(ri->input);
    free(ri->bad_blob);
    free(ri->bad_item);
}

#define BLOBS_LISTED 256

typedef struct blob_walk {
    const char *account;
    const json_value *item; /* the input item being walked */
    reqinfo *ri;
    sbuf list;              /* rec->blobs */
    int n;
} blob_walk;

static void blob_seen(blob_walk *w, const json_value *v)
{
    char by[128];
    int mine = blob_minter(v->str, v->str_len, by, sizeof by);
    int own = mine && !strcmp(by, w->account);
    const char *item_id = json_get_str(w->item, "id"), *item_type = json_get_str(w->item, "type");
    if (!own && !w->ri->bad_blob) {
        w->ri->bad_blob = xstrdup(v->str);
        w->ri->bad_item = xstrdup(item_id);
    }
    if (w->n++ >= BLOBS_LISTED)
        return;
    char prefix[17];
    size_t k = 0;
    for (; k < 16 && k < v->str_len; k++)
        prefix[k] = v->str[k] >= ' ' && v->str[k] < 127 ? v->str[k] : '?';
    prefix[k] = '\0';
    sbuf_puts(&w->list, w->n > 1 ? ",{\"prefix\":" : "{\"prefix\":");
    js(&w->list, prefix);
    sbuf_puts(&w->list, ",\"by\":");
    json_str_or_null(&w->list, mine ? by : NULL);
    sbuf_printf(&w->list, ",\"own\":%s,\"len\":%zu,\"item\":", own ? "true" : "false", v->str_len);
    json_str_or_null(&w->list, item_id);
    sbuf_puts(&w->list, ",\"item_type\":");
    json_str_or_null(&w->list, item_type);
    sbuf_puts(&w->list, "}");
}

/* Every "encrypted_content" string under v, at any depth (json_parse bounds the depth). */
static void blobs_walk(blob_walk *w, const json_value *v)
{
    for (const json_value *c = v->child; c; c = c->next) {
        if (c->type == JSON_STRING && c->key && !strcmp(c->key, "encrypted_content"))
            blob_seen(w, c);
        else if (c->type == JSON_ARRAY || c->type == JSON_OBJECT)
            blobs_walk(w, c);
    }
}

/* Reads a /responses body: what it asks for, its input items and their
 * blobs (into r for /_requests), and whether previous_response_id is one of
 * account's stored responses. A body that is no JSON object leaves it all unset. */
static void reqinfo_read(reqinfo *ri, rec *r, const char *account, const char *body, size_t n)
{
    json_value *doc = json_parse(body, n, NULL, 0);
    if (!doc || doc->type != JSON_OBJECT) {
        json_free(doc);
        return;
    }
    const json_value *inc = json_get(doc, "include"), *st = json_get(doc, "store");
    for (const json_value *c = inc && inc->type == JSON_ARRAY ? inc->child : NULL; c; c = c->next)
        if (c->type == JSON_STRING && !strcmp(c->str, "reasoning.encrypted_content"))
            ri->want_reasoning = 1;
    r->store = !st ? -1 : st->type == JSON_FALSE ? 0 : st->type == JSON_TRUE ? 1 : -1;
    ri->store = r->store != 0;
    const json_value *in = json_get(doc, "input");
    sbuf types = SBUF_INIT, items = SBUF_INIT;
    sbuf_puts(&types, "[");
    if (in && in->type == JSON_STRING) {
        r->input_items = 1;
        r->last_input_type = xstrdup("message");
        sbuf_puts(&types, "\"message\"");
        sbuf_puts(&items, "[{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":");
        sbuf_json_str(&items, in->str, in->str_len);
        sbuf_puts(&items, "}]}]");
    } else if (in && in->type == JSON_ARRAY) {
        blob_walk w = {account, NULL, ri, SBUF_INIT, 0};
        sbuf outputs = SBUF_INIT;
        int noutputs = 0;
        sbuf_puts(&w.list, "[");
        sbuf_puts(&outputs, "[");
        for (const json_value *it = in->child; it; it = it->next) {
            const char *t = json_get_str(it, "type");
            if (!t)
                t = it->type == JSON_OBJECT && json_get(it, "role") ? "message" : "unknown";
            if (r->input_items++ < 1000) {
                sbuf_puts(&types, r->input_items > 1 ? "," : "");
                js(&types, t);
            }
            int is_output = !strcmp(t, "function_call_output") || !strcmp(t, "custom_tool_call_output");
            if (is_output && noutputs++ < 1000) {
                sbuf_puts(&outputs, noutputs > 1 ? "," : "");
                json_str_or_null(&outputs, json_get_str(it, "call_id"));
            }
            if (!it->next) {
                r->last_input_type = xstrdup(t);
                ri->after_tool = is_output;
            }
            w.item = it;
            if (it->type == JSON_OBJECT || it->type == JSON_ARRAY)
                blobs_walk(&w, it);
        }
        sbuf_puts(&w.list, "]");
        sbuf_puts(&outputs, "]");
        r->blobs = xstrdup(w.list.p);
        r->tool_outputs = xstrdup(outputs.p);
        sbuf_free(&w.list);
        sbuf_free(&outputs);
        json_write(&items, in);
    }
    sbuf_puts(&types, "]");
    r->input_types = xstrdup(types.p);
    ri->input = xstrdup(items.len ? items.p : "[]");
    sbuf_free(&types);
    sbuf_free(&items);
    if (r->prev_id) {
        r->chain = stored_chain(account, r->prev_id);
        ri->prev_missing = r->chain == 0;
    }
    json_free(doc);
}

/* Rate-limit headers (a reset time given as primary_reset_at goes out as
 * today's absolute -reset-at header, else the older -reset-after-seconds),
 * and the turn state. */
static void add_usage_headers(struct evhttp_request *req, const opts *o)
{
    if (o->primary[0]) {
        add_header(req, "x-codex-primary-used-percent", o->primary);
        add_header(req, "x-codex-primary-window-minutes", o->primary_window[0] ? o->primary_window : "300");
        if (o->primary_reset_at[0])
            add_header(req, "x-codex-primary-reset-at", o->primary_reset_at);
        else
            add_header(req, "x-codex-primary-reset-after-seconds", o->primary_reset[0] ? o->primary_reset : "3600");
    }
    if (o->secondary[0]) {
        add_header(req, "x-codex-secondary-used-percent", o->secondary);
        add_header(req, "x-codex-secondary-window-minutes", o->secondary_window[0] ? o->secondary_window : "10080");
        if (o->secondary_reset_at[0])
            add_header(req, "x-codex-secondary-reset-at", o->secondary_reset_at);
        else
            add_header(req, "x-codex-secondary-reset-after-seconds", o->secondary_reset[0] ? o->secondary_reset : "86400");
    }
    if (o->turn_state[0])
        add_header(req, "x-codex-turn-state", o->turn_state);
}

static void reply_json(job *j, long delay, int status, const sbuf *body)
{
    add_header(j->req, "Content-Type", "application/json");
    action *a = job_add(j, ACT_REPLY, delay);
    a->status = status;
    sbuf_append(&a->data, body->p, body->len);
}

/* An event stream's head. The ChatGPT codex backend sends its streams with
 * no Content-Type at all (a client must not insist on text/event-stream);
 * main() turns off libevent's default type so none is added either. */
static void start_sse(job *j, long delay)
{
    if (!j->bare_sse)
        add_header(j->req, "Content-Type", "text/event-stream");
    add_header(j->req, "Cache-Control", "no-cache");
    job_add(j, ACT_START, delay)->status = 200;
}

/* late_reset's end: optionally `partial` bytes of an event that never
 * finishes (prefix, then x...), then a close (or, with end=1, a proper end
 * of the chunked body). */
static void late_end(job *j, const opts *o, const char *prefix)
{
    if (o->partial > 0) {
        sbuf b = SBUF_INIT;
        sbuf_puts(&b, prefix);
        for (long i = 0; i < o->partial; i++)
            sbuf_append(&b, "x", 1);
        job_chunk(j, 0, &b);
        sbuf_free(&b);
    }
    if (o->end) {
        job_add(j, ACT_END, o->ms >= 0 ? o->ms : 50);
        return;
    }
    action *a = job_add(j, ACT_CLOSE, o->ms >= 0 ? o->ms : 50);
    a->rst = o->rst == 1;
}

/* Stream scripts. `mode` picks where the stream goes wrong. */
typedef enum {
    S_OK, S_STALL, S_SLOW, S_QUOTA, S_FAILED, S_LATE_ERROR, S_LATE_RESET, S_NO_OUTPUT,
    S_OVERLOADED, /* the Messages API: message_start, then an overloaded_error event */
} stream_mode;

/* One window of the codex.rate_limits event (rate_event=): the account's
 * used percent, window and reset as its headers give them, or null. */
static void ev_rate_window(sbuf *b, const char *used, const char *window, const char *reset_at, const char *reset,
                           const char *dflt_window, long dflt_reset)
{
    if (!used[0]) {
        sbuf_puts(b, "null");
        return;
    }
    sbuf_printf(b, "{\"used_percent\":%s,\"window_minutes\":%s,\"reset_at\":%.0f}", used,
                window[0] ? window : dflt_window,
                reset_at[0] ? atof(reset_at) : (double)time(NULL) + (reset[0] ? atof(reset) : (double)dflt_reset));
}

/* rate_event=: the codex.rate_limits event the ChatGPT backend starts a
 * Responses stream with (codex-rs codex-api/src/rate_limits.rs reads it). */
static void ev_rate_limits(sbuf *b, const opts *o)
{
    sse_open(b, "codex.rate_limits");
    sbuf_puts(b, "{\"type\":\"codex.rate_limits\",\"plan_type\":\"plus\",");
    if (strcmp(o->rate_event, "1") != 0)
        sbuf_printf(b, "\"metered_limit_name\":\"%s\",", o->rate_event);
    sbuf_puts(b, "\"rate_limits\":{\"allowed\":true,\"limit_reached\":false,\"primary\":");
    ev_rate_window(b, o->primary, o->primary_window, o->primary_reset_at, o->primary_reset, "300", 3600);
    sbuf_puts(b, ",\"secondary\":");
    ev_rate_window(b, o->secondary, o->secondary_window, o->secondary_reset_at, o->secondary_reset, "10080", 86400);
    sbuf_puts(b, "},\"credits\":null}");
    sse_close(b);
}

/* late_error's error event: `event: error`, or with failed=1 a
 * response.failed (as the ChatGPT backend ends a stream at a usage limit).
 * A custom code gets a neutral message, so the code alone decides how it
 * is classified. */
static void ev_late_error(sbuf *b, gen *g, const opts *o)
{
    const char *code = o->err_code[0] ? o->err_code : "usage_limit_reached";
    const char *msg = o->err_code[0] ? "the upstream reported an error" : LATE_MSG;
    if (o->late_failed)
        ev_failed(b, g, code, msg);
    else
        ev_error(b, g, code, msg);
}

static void script_responses_stream(job *j, gen *g, const opts *o, stream_mode mode, long delay0)
{
    sbuf b = SBUF_INIT;
    long gap = o->gap;
    start_sse(j, delay0);
    if (o->rate_event[0])
        ev_rate_limits(&b, o);
    ev_resp_state(&b, g, "response.created", "in_progress");
    job_chunk(j, 0, &b);
    sbuf_reset(&b);
    if (mode == S_NO_OUTPUT) { /* a clean end with no output and no terminal event */
        job_add(j, ACT_END, gap);
        sbuf_free(&b);
        return;
    }
    if (mode == S_QUOTA) {
        ev_error(&b, g, "usage_limit_reached", LATE_MSG);
        job_chunk(j, gap, &b);
        job_add(j, ACT_END, 0);
        sbuf_free(&b);
        return;
    }
    /* stall: silence right after response.created */
    long stall = mode == S_STALL ? (o->ms >= 0 ? o->ms : 5000) : 0;
    ev_resp_state(&b, g, "response.in_progress", "in_progress");
    job_chunk(j, stall > 0 ? stall : gap, &b);
    sbuf_reset(&b);
    if (mode == S_FAILED) {
        ev_failed(&b, g, "insufficient_quota", INSUFFICIENT_MSG);
        job_chunk(j, gap, &b);
        job_add(j, ACT_END, 0);
        sbuf_free(&b);
        return;
    }
    for (int i = 0; i < o->think && i < 1000; i++) { /* a reasoning model showing its work */
        sse_open(&b, "response.reasoning_summary_text.delta");
        sbuf_printf(&b, "{\"type\":\"response.reasoning_summary_text.delta\",\"sequence_number\":%d,"
                        "\"item_id\":\"rs_think\",\"output_index\":0,\"summary_index\":0,\"delta\":\"step %d. \"}",
                    g->seq++, i + 1);
        sse_close(&b);
        job_chunk(j, o->think_ms > 0 ? o->think_ms : gap, &b);
        sbuf_reset(&b);
    }
    if (g->rs_blob.len || g->cmp_blob.len) {
        ev_pre_items(&b, g);
        job_chunk(j, gap, &b);
        sbuf_reset(&b);
    }
    if (g->ncalls) { /* tool_call=1 (only set for the modes that complete, and late_error) */
        for (int k = 0; k < g->ncalls; k++) {
            ev_function_call(&b, g, k);
            job_chunk(j, gap, &b);
            sbuf_reset(&b);
        }
        if (mode == S_LATE_ERROR) { /* the calls went out, then the limit */
            ev_late_error(&b, g, o);
            job_chunk(j, gap, &b);
            job_add(j, ACT_END, 0);
            sbuf_free(&b);
            return;
        }
        ev_resp_state(&b, g, "response.completed", "completed");
        job_chunk(j, gap, &b);
        job_add(j, ACT_END, o->tail);
        sbuf_free(&b);
        return;
    }
    ev_item_added(&b, g);
    job_chunk(j, gap, &b);
    sbuf_reset(&b);
    ev_part(&b, g, "response.content_part.added", 0);
    job_chunk(j, gap, &b);
    sbuf_reset(&b);
    int late = mode == S_LATE_ERROR || mode == S_LATE_RESET;
    int n = late ? (o->after >= 0 ? o->after : 3) : g->npieces;
    if (n > g->npieces)
        n = g->npieces;
    long dgap = mode == S_SLOW ? (o->ms >= 0 ? o->ms : 100) : gap;
    for (int i = 0; i < n; i++) {
        ev_delta(&b, g, i);
        job_chunk(j, dgap, &b);
        sbuf_reset(&b);
    }
    if (mode == S_LATE_ERROR) {
        ev_late_error(&b, g, o);
        job_chunk(j, gap, &b);
        job_add(j, ACT_END, 0);
        sbuf_free(&b);
        return;
    }
    if (mode == S_LATE_RESET) {
        late_end(j, o, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"");
        sbuf_free(&b);
        return;
    }
    ev_text_done(&b, g);
    ev_part(&b, g, "response.content_part.done", 1);
    ev_item_done(&b, g);
    job_chunk(j, gap, &b);
    sbuf_reset(&b);
    ev_resp_state(&b, g, "response.completed", "completed");
    job_chunk(j, gap, &b);
    job_add(j, ACT_END, o->tail);
    sbuf_free(&b);
}

static void script_chat_stream(job *j, gen *g, const opts *o, stream_mode mode, long delay0)
{
    sbuf b = SBUF_INIT;
    long gap = o->gap;
    start_sse(j, delay0);
    if (mode == S_QUOTA || mode == S_FAILED) {
        if (mode == S_QUOTA)
            chat_error_chunk(&b, LATE_MSG, "usage_limit_reached", "usage_limit_reached");
        else
            chat_error_chunk(&b, INSUFFICIENT_MSG, "insufficient_quota", "insufficient_quota");
        job_chunk(j, 0, &b);
        job_add(j, ACT_END, 0);
        sbuf_free(&b);
        return;
    }
    chat_role(&b, g);
    job_chunk(j, 0, &b);
    sbuf_reset(&b);
    if (mode == S_NO_OUTPUT) {
        job_add(j, ACT_END, gap);
        sbuf_free(&b);
        return;
    }
    long stall = mode == S_STALL ? (o->ms >= 0 ? o->ms : 5000) : 0;
    int late = mode == S_LATE_ERROR || mode == S_LATE_RESET;
    int n = late ? (o->after >= 0 ? o->after : 3) : g->npieces;
    if (n > g->npieces)
        n = g->npieces;
    long dgap = mode == S_SLOW ? (o->ms >= 0 ? o->ms : 100) : gap;
    int sent = 0; /* chunks after the role chunk: a stall's silence comes before the first */
    for (int i = 0; g->think && i < (int)(sizeof g_think_pieces / sizeof g_think_pieces[0]); i++) {
        chat_think(&b, g, i);
        job_chunk(j, sent++ == 0 && stall > 0 ? stall : gap, &b);
        sbuf_reset(&b);
    }
    if (g->ncalls) { /* tool_call=1 (only set for the modes that complete): calls, not text */
        for (int k = 0; k < g->ncalls; k++)
            for (int piece = -1; piece < ARG_PIECES; piece++) {
                chat_tool_chunk(&b, g, k, piece);
                job_chunk(j, sent++ == 0 && stall > 0 ? stall : dgap, &b);
                sbuf_reset(&b);
            }
        n = 0;
    }
    for (int i = 0; i < n; i++) {
        chat_delta(&b, g, i);
        job_chunk(j, sent++ == 0 && stall > 0 ? stall : dgap, &b);
        sbuf_reset(&b);
    }
    if (mode == S_LATE_ERROR) {
        const char *code = o->err_code[0] ? o->err_code : "usage_limit_reached";
        chat_error_chunk(&b, o->err_code[0] ? "the upstream reported an error" : LATE_MSG, code, code);
        job_chunk(j, gap, &b);
        job_add(j, ACT_END, 0);
        sbuf_free(&b);
        return;
    }
    if (mode == S_LATE_RESET) {
        late_end(j, o, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"");
        sbuf_free(&b);
        return;
    }
    chat_finish(&b, g);
    job_chunk(j, gap, &b);
    job_add(j, ACT_END, o->tail);
    sbuf_free(&b);
}

/* bytes=N (pad=N, seq=1): a large plain answer: ,"pad":"xxx..." before
 * the closing brace of the JSON object in b. */
static void pad_append(sbuf *b, long pad, int seq)
{
    if (pad <= 0 || !b->len || b->p[b->len - 1] != '}')
        return;
    b->len--;
    sbuf_puts(b, ",\"pad\":\"");
    if (seq) { /* "00000000000000080000001000..." (cut at pad): a lost, doubled or moved piece shows */
        for (long i = 0; i < pad; i += 8) {
            char w[24];
            snprintf(w, sizeof w, "%08lx", (unsigned long)i & 0xffffffffUL);
            sbuf_append(b, w, pad - i < 8 ? (size_t)(pad - i) : 8);
        }
    } else {
        for (long i = 0; i < pad; i++)
            sbuf_append(b, "x", 1);
    }
    sbuf_puts(b, "\"}");
}

static void script_plain(job *j, gen *g, endpoint ep, long delay0, long pad, int seq)
{
    sbuf b = SBUF_INIT;
    if (ep == EP_RESPONSES) {
        response_obj(&b, g, "completed", NULL, NULL);
    } else {
        sbuf_puts(&b, "{\"id\":");
        js(&b, g->chat_id);
        sbuf_printf(&b, ",\"object\":\"chat.completion\",\"created\":%ld,\"model\":", g->created);
        js(&b, g->model);
        sbuf_puts(&b, ",\"choices\":[{\"index\":0,\"message\":");
        chat_message(&b, g);
        sbuf_printf(&b, ",\"finish_reason\":\"%s\"}],\"usage\":", g->ncalls ? "tool_calls" : "stop");
        chat_usage_obj(&b, g);
        sbuf_puts(&b, "}");
    }
    pad_append(&b, pad, seq); /* a large answer */
    reply_json(j, delay0, 200, &b);
    sbuf_free(&b);
}

static void models_json(sbuf *b)
{
    sbuf_puts(b, "{\"object\":\"list\",\"data\":[{\"id\":\"gpt-test\",\"object\":\"model\","
                 "\"created\":1700000000,\"owned_by\":\"mock\"}]}");
}

/* ---------- hostile answers ---------- */

static uint32_t crc32_of(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
}

/* in as a gzip member made of stored (uncompressed) deflate blocks: real
 * gzip any decoder reads, with no compression library. The blocks are
 * small (61 bytes), so block headers land inside every line: a client
 * handed these bytes undecoded cannot read a single event or JSON value. */
static void gzip_stored(const sbuf *in, sbuf *out)
{
    static const unsigned char hdr[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255};
    sbuf_append(out, hdr, sizeof hdr);
    size_t off = 0;
    do {
        size_t n = in->len - off > 61 ? 61 : in->len - off;
        unsigned char bh[5] = {off + n == in->len ? 1 : 0, (unsigned char)(n & 255), (unsigned char)(n >> 8),
                               (unsigned char)(~n & 255), (unsigned char)((~n >> 8) & 255)};
        sbuf_append(out, bh, sizeof bh);
        sbuf_append(out, in->p + off, n);
        off += n;
    } while (off < in->len);
    uint32_t crc = crc32_of((const unsigned char *)in->p, in->len), len = (uint32_t)in->len;
    unsigned char tr[8] = {crc & 255, (crc >> 8) & 255, (crc >> 16) & 255, crc >> 24,
                           len & 255, (len >> 8) & 255, (len >> 16) & 255, len >> 24};
    sbuf_append(out, tr, sizeof tr);
}

/* gzip=1: the whole body as one gzip member (a stream's chunks become one). */
static void script_gzip(job *j)
{
    size_t first = j->nacts, keep = 0;
    for (size_t i = 0; i < j->nacts; i++) {
        action *a = &j->acts[i];
        if (a->kind == ACT_REPLY || (a->kind == ACT_CHUNK && first == j->nacts)) {
            if (a->kind == ACT_CHUNK)
                first = i;
        } else if (a->kind == ACT_CHUNK) {
            sbuf_append(&j->acts[first].data, a->data.p, a->data.len);
            sbuf_free(&a->data);
            continue;
        }
        j->acts[keep++] = *a;
    }
    j->nacts = keep;
    for (size_t i = 0; i < j->nacts; i++) {
        action *a = &j->acts[i];
        if (a->kind != ACT_REPLY && a->kind != ACT_CHUNK)
            continue;
        sbuf z = SBUF_INIT;
        gzip_stored(&a->data, &z);
        sbuf_free(&a->data);
        a->data = z;
    }
    add_header(j->req, "Content-Encoding", "gzip");
}

/* reflect_auth[=code]: reflects the Authorization header the upstream got,
 * as a hostile or careless upstream might: in an x-request-id and an
 * x-echo header, and in an error body (code >= 400, default 400), a plain
 * answer's text or, streamed, a text delta split across two chunks in the
 * middle of the secret. */
static void script_reflect_auth(job *j, const opts *o, endpoint ep, const rec *r, int stream)
{
    const char *auth = r->authorization ? r->authorization : "";
    int code = o->code ? o->code : 400;
    sbuf b = SBUF_INIT, msg = SBUF_INIT;
    add_header(j->req, "x-request-id", auth);
    add_header(j->req, "x-echo", auth);
    sbuf_printf(&msg, "bad credentials: %s", auth);
    if (code >= 400) {
        error_json(&b, msg.p, "invalid_request_error", "echo", NULL);
        reply_json(j, 0, code, &b);
        sbuf_free(&b);
        sbuf_free(&msg);
        return;
    }
    gen g;
    gen_init(&g, r->account, r->model ? r->model : "gpt-test", r->n, 1);
    sbuf_reset(&g.pieces[0]);
    sbuf_append(&g.pieces[0], msg.p, msg.len);
    sbuf_reset(&g.text);
    sbuf_append(&g.text, msg.p, msg.len);
    if (!stream) {
        script_plain(j, &g, ep, 0, 0, 0);
    } else {
        if (ep == EP_RESPONSES) {
            ev_resp_state(&b, &g, "response.created", "in_progress");
            ev_item_added(&b, &g);
            ev_delta(&b, &g, 0);
            ev_text_done(&b, &g);
            ev_item_done(&b, &g);
            ev_resp_state(&b, &g, "response.completed", "completed");
        } else {
            chat_role(&b, &g);
            chat_delta(&b, &g, 0);
            if (o->cut) { /* whole events, then the connection drops: no finish */
                start_sse(j, 0);
                job_chunk(j, 0, &b);
                job_add(j, ACT_CLOSE, 50);
                gen_free(&g);
                sbuf_free(&b);
                sbuf_free(&msg);
                return;
            }
            chat_finish(&b, &g);
        }
        /* cut in the middle of the first copy of the secret */
        const char *tok = strchr(auth, ' ') ? strchr(auth, ' ') + 1 : auth;
        const char *hit = *tok ? strstr(b.p, tok) : NULL;
        size_t cut = hit ? (size_t)(hit - b.p) + strlen(tok) / 2 : b.len / 2;
        sbuf first = SBUF_INIT, rest = SBUF_INIT;
        sbuf_append(&first, b.p, cut);
        sbuf_append(&rest, b.p + cut, b.len - cut);
        start_sse(j, 0);
        job_chunk(j, 0, &first);
        job_chunk(j, 50, &rest);
        job_add(j, ACT_END, 0);
        sbuf_free(&first);
        sbuf_free(&rest);
    }
    gen_free(&g);
    sbuf_free(&b);
    sbuf_free(&msg);
}

static int bearer_valid(const char *authz);

/* ---------- a strict backend's refusals and its stored responses ---------- */

/* Refuses, as OpenAI does, a request whose previous_response_id is none of
 * this account's stored responses, or whose input carries encrypted content
 * this account did not mint (unless accept_foreign=1). enc_err picks the
 * shape: default (code invalid_encrypted_content), null_code, item, org,
 * fn_output, stream (a 200 stream that fails; only when streamed). Returns 1
 * when it answered. */
static int refuse_request(job *j, const opts *o, rec *r, const reqinfo *ri, int stream)
{
    sbuf b = SBUF_INIT, msg = SBUF_INIT;
    if (r->prev_id && ri->prev_missing) {
        sbuf_printf(&msg, "Previous response with id '%s' not found.", r->prev_id);
        error_json_param(&b, msg.p, "invalid_request_error", "previous_response_id", "previous_response_not_found");
        reply_json(j, 0, 400, &b);
        r->refused = xstrdup("previous_response_not_found");
        sbuf_free(&b);
        sbuf_free(&msg);
        return 1;
    }
    if (!ri->bad_blob || o->accept_foreign)
        return 0;
    const char *v = o->enc_err;
    const char *code = "invalid_encrypted_content";
    if (v[0] && strcmp(v, "null_code") && strcmp(v, "item") && strcmp(v, "org") && strcmp(v, "fn_output") &&
        strcmp(v, "stream")) {
        fprintf(stderr, "mock_upstream: unknown enc_err '%s', using the default shape\n", v);
        v = "";
    }
    if (!strcmp(v, "fn_output")) {
        sbuf_puts(&msg, "Encrypted function output content could not be decrypted or decoded.");
    } else if (!strcmp(v, "item") && ri->bad_item) {
        sbuf_printf(&msg, "The encrypted content for item %s could not be verified. Reason: Encrypted content "
                          "could not be decrypted or parsed.", ri->bad_item);
    } else {
        sbuf_puts(&msg, "The encrypted content ");
        blob_abbrev(&msg, ri->bad_blob);
        sbuf_puts(&msg, " could not be verified.");
        if (!strcmp(v, "item")) /* an item without an id: the blob instead */
            sbuf_puts(&msg, " Reason: Encrypted content could not be decrypted or parsed.");
        else if (!strcmp(v, "org"))
            sbuf_puts(&msg, " Reason: Encrypted content organization_id did not match the target organization.");
    }
    r->refused = xstrdup(code);
    if (!strcmp(v, "stream") && stream) {
        gen g;
        gen_init(&g, r->account, r->model ? r->model : "gpt-test", r->n, 3);
        start_sse(j, 0);
        ev_resp_state(&b, &g, "response.created", "in_progress");
        ev_failed(&b, &g, code, msg.p);
        job_chunk(j, 0, &b);
        job_add(j, ACT_END, 0);
        gen_free(&g);
    } else {
        error_json_param(&b, msg.p, "invalid_request_error", NULL, !strcmp(v, "null_code") ? NULL : code);
        reply_json(j, 0, 400, &b);
    }
    sbuf_free(&b);
    sbuf_free(&msg);
    return 1;
}

/* ---------- a real upstream's rules (RULE_*), checked before the scenario ---------- */

typedef struct refusal {
    int status;       /* 0: the request passed */
    sbuf body;
    const char *rule; /* recorded as the request's "refused" */
} refusal;

/* The ChatGPT backend's own shape: FastAPI's {"detail": "..."}. */
static void refuse_detail(refusal *rf, int status, const char *rule, const char *detail)
{
    rf->status = status;
    rf->rule = rule;
    sbuf_puts(&rf->body, "{\"detail\":");
    js(&rf->body, detail);
    sbuf_puts(&rf->body, "}");
}

static void refuse_openai(refusal *rf, int status, const char *rule, const char *message, const char *param,
                          const char *code)
{
    rf->status = status;
    rf->rule = rule;
    error_json_full(&rf->body, message, "invalid_request_error", param, code, NULL);
}

/* The ChatGPT codex backend's checks of a POST responses body, in the
 * order it applies them (rules: those in force). A body that is no JSON
 * object is not checked (as the account checks, refuse_request). 1 when
 * it refused. */
static int codex_check(refusal *rf, unsigned rules, const json_value *doc)
{
    static const char *const unsupported[] = {"max_output_tokens", "temperature", "top_p", "frequency_penalty",
                                              "presence_penalty"};
    const json_value *v;
    if (!doc || doc->type != JSON_OBJECT)
        return 0;
    if ((rules & RULE_STREAM) && !((v = json_get(doc, "stream")) && v->type == JSON_TRUE))
        refuse_detail(rf, 400, "stream", "Stream must be set to true");
    else if ((rules & RULE_STORE) && !((v = json_get(doc, "store")) && v->type == JSON_FALSE))
        refuse_detail(rf, 400, "store", "Store must be set to false");
    else if ((rules & RULE_INSTRUCTIONS) &&
             !((v = json_get(doc, "instructions")) && v->type == JSON_STRING && v->str_len > 0))
        refuse_detail(rf, 400, "instructions", "Instructions are required");
    if (rf->status)
        return 1;
    for (size_t i = 0; (rules & RULE_PARAMS) && i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (json_get(doc, unsupported[i])) { /* any value, null too: the field must go */
            sbuf msg = SBUF_INIT;
            sbuf_printf(&msg, "Unsupported parameter: %s", unsupported[i]);
            refuse_detail(rf, 400, "params", msg.p);
            sbuf_free(&msg);
            return 1;
        }
    const json_value *in = json_get(doc, "input");
    if ((rules & RULE_INPUT_LIST) && !(in && in->type == JSON_ARRAY)) {
        refuse_detail(rf, 400, "input_list", "Input must be a list");
        return 1;
    }
    for (const json_value *it = in && in->type == JSON_ARRAY ? in->child : NULL; it && (rules & RULE_SYSTEM);
         it = it->next) {
        const char *role = json_get_str(it, "role");
        if (role && !strcmp(role, "system")) {
            refuse_detail(rf, 400, "system", "System messages are not allowed");
            return 1;
        }
    }
    /* It persists nothing, so an item that names an id (a reasoning item's
     * rs_..., a message's msg_..., a call's fc_..., an item_reference)
     * refers to nothing. Clients report this one as a 404 in the API's
     * shape (Codex and proxies in front of the backend, 2025-2026). */
    for (const json_value *it = in && in->type == JSON_ARRAY ? in->child : NULL; it && (rules & RULE_ITEM_IDS);
         it = it->next) {
        const char *id = json_get_str(it, "id");
        if (id) {
            sbuf msg = SBUF_INIT;
            sbuf_printf(&msg, "Item with id '%s' not found. Items are not persisted when `store` is set to false. "
                              "Try again with `store` set to true, or remove this item from your input.", id);
            refuse_openai(rf, 404, "item_ids", msg.p, "input", NULL);
            sbuf_free(&msg);
            return 1;
        }
    }
    const char *prev = json_get_str(doc, "previous_response_id");
    if ((rules & RULE_PREV_ID) && prev) {
        sbuf msg = SBUF_INIT;
        sbuf_printf(&msg, "Previous response with id '%s' not found.", prev);
        refuse_openai(rf, 400, "previous_response_not_found", msg.p, "previous_response_id",
                      "previous_response_not_found");
        sbuf_free(&msg);
        return 1;
    }
    return 0;
}

/* The strict Chat Completions checks of message i (m) of msgs; *calls is
 * the tool_calls array of the assistant message (at *calls_at) that the
 * tool messages since answer, *answered how many have. Refuses in rf in
 * OpenAI's words and param paths (it writes "messages.[i]" in the tool
 * checks, "messages[i]" in the others). */
static void chat_check_message(refusal *rf, const json_value *m, size_t i, const json_value *msgs,
                               const json_value **calls, size_t *calls_at, size_t *answered)
{
    static const char *const known[] = {"system", "developer", "user", "assistant", "tool"};
    char param[64];
    sbuf msg = SBUF_INIT;
    const char *role = json_get_str(m, "role");
    size_t k = 0;
    for (; role && k < sizeof known / sizeof known[0]; k++)
        if (!strcmp(role, known[k]))
            break;
    if (m->type != JSON_OBJECT) {
        snprintf(param, sizeof param, "messages[%zu]", i);
        sbuf_printf(&msg, "Invalid type for 'messages[%zu]': expected an object, but got another type instead.", i);
        refuse_openai(rf, 400, "messages", msg.p, param, "invalid_type");
    } else if (!json_get(m, "role")) {
        snprintf(param, sizeof param, "messages[%zu].role", i);
        sbuf_printf(&msg, "Missing required parameter: 'messages[%zu].role'.", i);
        refuse_openai(rf, 400, "messages", msg.p, param, "missing_required_parameter");
    } else if (!role || k == sizeof known / sizeof known[0]) {
        snprintf(param, sizeof param, "messages[%zu].role", i);
        sbuf_puts(&msg, "Invalid value: ");
        if (role)
            sbuf_printf(&msg, "'%s'", role);
        else
            sbuf_puts(&msg, "a value that is not a string");
        sbuf_puts(&msg, ". Supported values are: 'system', 'assistant', 'user', 'tool', and 'developer'.");
        refuse_openai(rf, 400, "messages", msg.p, param, "invalid_value");
    } else if (!strcmp(role, "tool")) {
        const char *id = json_get_str(m, "tool_call_id");
        int found = 0;
        for (const json_value *c = *calls ? (*calls)->child : NULL; id && c; c = c->next) {
            const char *cid = json_get_str(c, "id");
            found |= cid && !strcmp(cid, id);
        }
        if (!id) {
            snprintf(param, sizeof param, "messages.[%zu].tool_call_id", i);
            refuse_openai(rf, 400, "messages", "Missing parameter 'tool_call_id': messages with role 'tool' must "
                          "have a 'tool_call_id'.", param, NULL);
        } else if (!*calls) {
            snprintf(param, sizeof param, "messages.[%zu].role", i);
            refuse_openai(rf, 400, "messages", "Invalid parameter: messages with role 'tool' must be a response to "
                          "a preceeding message with 'tool_calls'.", param, NULL);
        } else if (!found) {
            snprintf(param, sizeof param, "messages.[%zu].tool_call_id", i);
            sbuf_printf(&msg, "Invalid parameter: 'tool_call_id' of '%s' not found in 'tool_calls' of previous "
                              "message.", id);
            refuse_openai(rf, 400, "messages", msg.p, param, NULL);
        }
        (*answered)++;
    } else {
        /* any other message ends the answers to the last tool_calls: each
         * call must have had its tool message by now */
        if (*calls && *answered < (*calls)->count) {
            sbuf_puts(&msg, "An assistant message with 'tool_calls' must be followed by tool messages responding "
                            "to each 'tool_call_id'. The following tool_call_ids did not have response messages: ");
            size_t shown = 0;
            for (const json_value *c = (*calls)->child; c; c = c->next) {
                const char *cid = json_get_str(c, "id");
                int seen = 0;
                size_t t = *calls_at + 1;
                for (const json_value *a = json_at(msgs, t); cid && a && t < i; a = a->next, t++) {
                    const char *tid = json_get_str(a, "tool_call_id");
                    seen |= tid && !strcmp(tid, cid);
                }
                if (!seen) {
                    sbuf_puts(&msg, shown++ ? ", " : "");
                    sbuf_puts(&msg, cid ? cid : "null");
                }
            }
            snprintf(param, sizeof param, "messages.[%zu].role", i);
            if (shown)
                refuse_openai(rf, 400, "messages", msg.p, param, NULL);
        }
        const json_value *tc = json_get(m, "tool_calls");
        *calls = !strcmp(role, "assistant") && tc && tc->type == JSON_ARRAY && tc->count ? tc : NULL;
        *calls_at = i;
        *answered = 0;
    }
    sbuf_free(&msg);
}

/* What a chat request's messages say: recorded in r (roles, last_role,
 * tool_outputs), whether the last one is a tool's output (*after_tool: the
 * answer is then text, so a client's tool loop ends), and when strict
 * (RULE_MESSAGES) the first thing a strict Chat Completions API refuses.
 * A body that is no JSON object is not checked. 1 when it refused. */
static int chat_check(refusal *rf, rec *r, const json_value *doc, int strict, int *after_tool)
{
    const json_value *msgs = json_get(doc, "messages");
    const json_value *calls = NULL;
    size_t calls_at = 0, answered = 0, i = 0;
    *after_tool = 0;
    if (!doc || doc->type != JSON_OBJECT)
        return 0;
    if (strict && !msgs)
        refuse_openai(rf, 400, "messages", "Missing required parameter: 'messages'.", "messages",
                      "missing_required_parameter");
    else if (strict && msgs->type != JSON_ARRAY)
        refuse_openai(rf, 400, "messages", "Invalid type for 'messages': expected an array of objects, but got "
                      "another type instead.", "messages", "invalid_type");
    else if (strict && !msgs->child)
        refuse_openai(rf, 400, "messages", "Invalid 'messages': empty array. Expected an array with minimum length "
                      "1, but got an empty array instead.", "messages", "empty_array");
    sbuf roles = SBUF_INIT, outputs = SBUF_INIT;
    sbuf_puts(&roles, "[");
    sbuf_puts(&outputs, "[");
    for (const json_value *m = msgs && msgs->type == JSON_ARRAY ? msgs->child : NULL; m; m = m->next, i++) {
        const char *role = json_get_str(m, "role");
        if (i < 1000) {
            sbuf_puts(&roles, i ? "," : "");
            json_str_or_null(&roles, role);
        }
        free(r->last_role);
        r->last_role = xstrdup(role);
        *after_tool = role && !strcmp(role, "tool");
        if (*after_tool) {
            sbuf_puts(&outputs, outputs.len > 1 ? "," : "");
            json_str_or_null(&outputs, json_get_str(m, "tool_call_id"));
        }
        if (strict && !rf->status)
            chat_check_message(rf, m, i, msgs, &calls, &calls_at, &answered);
    }
    sbuf_puts(&roles, "]");
    sbuf_puts(&outputs, "]");
    r->roles = xstrdup(roles.p);
    r->tool_outputs = xstrdup(outputs.p);
    sbuf_free(&roles);
    sbuf_free(&outputs);
    return rf->status != 0;
}

/* Every rule of the request's upstream that it breaks, whether or not lax=
 * switched the rule off, as a JSON array of rule names in the order they
 * are checked: a test whose upstream is lax (to exercise something else)
 * can still see what a strict one would have refused. */
static char *violations_of(endpoint ep, int codex, const json_value *doc)
{
    sbuf out = SBUF_INIT;
    sbuf_puts(&out, "[");
    if (codex && (ep == EP_CHAT || ep == EP_STORED))
        sbuf_puts(&out, "\"routes\"");
    if (codex && ep == EP_RESPONSES) {
        unsigned left = RULES_CODEX;
        for (int n = 0;; n++) {
            refusal t = {0, SBUF_INIT, NULL};
            int refused = codex_check(&t, left, doc);
            sbuf_free(&t.body);
            if (!refused)
                break;
            /* the refusal names its rule as lax= does, but for previous_response_not_found */
            const char *name = strcmp(t.rule, "previous_response_not_found") ? t.rule : "prev_id";
            for (size_t i = 0; i < sizeof g_rule_names / sizeof g_rule_names[0]; i++)
                if (!strcmp(g_rule_names[i].name, name))
                    left &= ~g_rule_names[i].bit;
            sbuf_puts(&out, n ? "," : "");
            js(&out, name);
        }
    } else if (ep == EP_CHAT) {
        refusal t = {0, SBUF_INIT, NULL};
        rec scratch = {0}; /* chat_check records into a rec: this one is thrown away */
        int dummy;
        if (chat_check(&t, &scratch, doc, 1, &dummy))
            sbuf_puts(&out, out.len > 1 ? ",\"messages\"" : "\"messages\"");
        sbuf_free(&t.body);
        free(scratch.roles);
        free(scratch.tool_outputs);
        free(scratch.last_role);
    }
    sbuf_puts(&out, "]");
    char *v = xstrdup(out.p);
    sbuf_free(&out);
    return v;
}

/* tool_call=1: the answer's function calls (tool_calls=N of them, in
 * parallel), ids fc_<name>_<n>[_<k>] and call_<name>_<n>[_<k>] (k from 2),
 * recorded in r. exec_command takes a command line, the older shell tools
 * an argv; a later call's command names its number, so the calls differ. */
static void gen_tool_calls(gen *g, const opts *o, rec *r)
{
    int n = o->tool_calls > 0 ? o->tool_calls : 1;
    sbuf ids = SBUF_INIT;
    snprintf(g->tool, sizeof g->tool, "%s", o->tool[0] ? o->tool : "exec_command");
    sbuf_puts(&ids, "[");
    for (int k = 0; k < n && k < MAX_CALLS; k++) {
        char suffix[16] = "";
        if (k)
            snprintf(suffix, sizeof suffix, "_%d", k + 1);
        snprintf(g->calls[k].fc_id, sizeof g->calls[k].fc_id, "fc_%s_%ld%s", r->account, r->n, suffix);
        snprintf(g->calls[k].call_id, sizeof g->calls[k].call_id, "call_%s_%ld%s", r->account, r->n, suffix);
        sbuf *a = &g->calls[k].args;
        if (!strcmp(g->tool, "exec_command") && k)
            sbuf_printf(a, "{\"cmd\":\"echo hi %d\"}", k + 1);
        else if (!strcmp(g->tool, "exec_command"))
            sbuf_puts(a, "{\"cmd\":\"echo hi\"}");
        else if (k)
            sbuf_printf(a, "{\"command\":[\"echo\",\"hi\",\"%d\"]}", k + 1);
        else
            sbuf_puts(a, "{\"command\":[\"echo\",\"hi\"]}");
        sbuf_puts(&ids, k ? "," : "");
        js(&ids, g->calls[k].call_id);
        g->ncalls++;
    }
    sbuf_puts(&ids, "]");
    r->tool_call = xstrdup(g->calls[0].call_id);
    r->tool_calls = xstrdup(ids.p);
    sbuf_free(&ids);
}

/* The items a /responses answer carries before its message (reasoning=1 or
 * an include of reasoning.encrypted_content; compaction=1), the function
 * call that replaces the message (tool_call=1, in an answer that completes
 * or ends in late_error,
 * while the input does not end with a tool's output), and echo_input's
 * marker at the end of the text. */
static void gen_responses_extras(gen *g, const opts *o, rec *r, const reqinfo *ri, int completes)
{
    if (o->reasoning || ri->want_reasoning) {
        snprintf(g->rs_id, sizeof g->rs_id, "rs_%s_%ld", r->account, r->n);
        blob_mint(&g->rs_blob, r->account, "reasoning", r->n, 480);
        g->msg_index++;
    }
    if (o->compaction) {
        snprintf(g->cmp_id, sizeof g->cmp_id, "cmp_%s_%ld", r->account, r->n);
        blob_mint(&g->cmp_blob, r->account, "compaction", r->n, 1400);
        g->msg_index++;
    }
    if (o->tool_call && completes && !ri->after_tool)
        gen_tool_calls(g, o, r);
    if (o->echo_input) {
        char mark[96];
        snprintf(mark, sizeof mark, " [chain=%d items=%ld]", r->chain, r->input_items);
        gen_add_piece(g, mark);
    }
}

typedef enum { STORED_GET, STORED_DELETE, STORED_INPUT_ITEMS, STORED_OTHER } stored_op;

/* GET /responses/{id}, DELETE /responses/{id}, GET /responses/{id}/input_items:
 * this account's stored response, else 404 as OpenAI answers. The scenario
 * does not apply; auth=1 does. */
static void script_stored(job *j, const opts *o, const rec *r, stored_op op, const char *id)
{
    sbuf b = SBUF_INIT, msg = SBUF_INIT;
    size_t at = 0;
    stored *s = op == STORED_OTHER ? NULL : stored_find(r->account, id, &at);
    if (o->auth && !bearer_valid(r->authorization)) {
        error_json(&b, "Your authentication token has expired. Please try signing in again.",
                   "invalid_request_error", "token_expired", NULL);
        reply_json(j, 0, 401, &b);
    } else if (op == STORED_OTHER) {
        error_json(&b, "mock_upstream: unknown endpoint", "invalid_request_error", "unknown_url", NULL);
        reply_json(j, 0, 404, &b);
    } else if (o->stored_status >= 400 && o->stored_status <= 599) { /* a relay without the stored-response API */
        sbuf_printf(&msg, "%s %s is not implemented here", r->method, r->path);
        error_json(&b, msg.p, o->stored_status >= 500 ? "server_error" : "invalid_request_error", NULL, NULL);
        reply_json(j, 0, o->stored_status, &b);
    } else if (!s) {
        sbuf_printf(&msg, "Response with id '%s' not found.", id);
        error_json(&b, msg.p, "invalid_request_error", NULL, NULL);
        reply_json(j, 0, 404, &b);
    } else if (op == STORED_GET) {
        sbuf_puts(&b, s->response);
        reply_json(j, 0, 200, &b);
    } else if (op == STORED_INPUT_ITEMS) {
        sbuf_printf(&b, "{\"object\":\"list\",\"data\":%s,\"has_more\":false}", s->input);
        reply_json(j, 0, 200, &b);
    } else {
        sbuf_puts(&b, "{\"id\":");
        js(&b, s->id);
        sbuf_puts(&b, ",\"object\":\"response.deleted\",\"deleted\":true}");
        stored_drop(at);
        reply_json(j, 0, 200, &b);
    }
    sbuf_free(&b);
    sbuf_free(&msg);
}

/* The account's own model list (models=a+b): GET models answers it, in
 * the Codex form {"models":[{"slug":...}]} when asked with client_version
 * (as the ChatGPT backend), else as the OpenAI list; a request for another
 * model is refused as the upstream does: the ChatGPT backend's 400 on a
 * ChatGPT-style path, the API's 404 model_not_found on a /v1/ one. 1 when
 * it answered. */
static int models_answer(job *j, const opts *o, endpoint ep, const rec *r)
{
    /* listed=: the models endpoint lists these, any model is served */
    const char *list = ep == EP_MODELS && o->listed[0] ? o->listed : o->models;
    if (!list[0] || (ep != EP_MODELS && ep != EP_RESPONSES && ep != EP_CHAT))
        return 0;
    if (ep != EP_MODELS && (!r->model || models_has(o->models, r->model)))
        return 0;
    sbuf b = SBUF_INIT, msg = SBUF_INIT;
    int codex = r->path && strstr(r->path, "client_version=") != NULL;
    if (ep == EP_MODELS) {
        sbuf_puts(&b, codex ? "{\"models\":[" : "{\"object\":\"list\",\"data\":[");
        int k = 0;
        for (const char *p = list; *p;) {
            const char *e = strchr(p, '+');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            if (n) {
                if (k++)
                    sbuf_puts(&b, ",");
                if (codex)
                    sbuf_printf(&b, "{\"slug\":\"%.*s\",\"display_name\":\"%.*s\",\"visibility\":\"list\","
                                    "\"supported_in_api\":true,\"priority\":%d,\"base_instructions\":\"mock\"}",
                                (int)n, p, (int)n, p, k);
                else
                    sbuf_printf(&b, "{\"id\":\"%.*s\",\"object\":\"model\",\"created\":1700000000,"
                                    "\"owned_by\":\"mock\"}", (int)n, p);
            }
            if (!e)
                break;
            p = e + 1;
        }
        sbuf_puts(&b, "]}");
        reply_json(j, 0, 200, &b);
    } else if (r->path && !strstr(r->path, "/v1/")) {
        sbuf_printf(&msg, "The '%s' model is not supported when using Codex with a ChatGPT account.", r->model);
        sbuf_puts(&b, "{\"detail\":");
        js(&b, msg.p);
        sbuf_puts(&b, "}");
        reply_json(j, 0, 400, &b);
    } else {
        sbuf_printf(&msg, "The model `%s` does not exist or you do not have access to it.", r->model);
        error_json(&b, msg.p, "invalid_request_error", "model_not_found", NULL);
        reply_json(j, 0, 404, &b);
    }
    sbuf_free(&b);
    sbuf_free(&msg);
    return 1;
}

/* A request for the model of the account's limit family (family=...): the
 * family's headers as the ChatGPT backend sends them (x-codex-<name>-*, the
 * main x-codex-primary-* carrying the active limit's numbers too, and
 * x-codex-active-limit naming it, last), and while its window is spent
 * (before family_until) a 429 usage_limit_reached. 1 when it answered. */
static int family_answer(job *j, const opts *o, const rec *r)
{
    if (!o->family[0] || !o->family_model[0] || !r->model || strcmp(r->model, o->family_model) != 0)
        return 0;
    double until = atof(o->family_until);
    int spent = (double)time(NULL) < until;
    char name[96];
    const char *used = spent ? "100" : "10";
    snprintf(name, sizeof name, "x-codex-%s-primary-used-percent", o->family);
    add_header(j->req, name, used);
    snprintf(name, sizeof name, "x-codex-%s-primary-window-minutes", o->family);
    add_header(j->req, name, "15");
    add_header(j->req, "x-codex-primary-used-percent", used);
    add_header(j->req, "x-codex-primary-window-minutes", "15");
    if (until > 0) {
        snprintf(name, sizeof name, "x-codex-%s-primary-reset-at", o->family);
        add_header(j->req, name, o->family_until);
        add_header(j->req, "x-codex-primary-reset-at", o->family_until);
    }
    snprintf(name, sizeof name, "codex_%s", o->family);
    add_header(j->req, "x-codex-active-limit", name);
    if (!spent)
        return 0;
    sbuf b = SBUF_INIT;
    char extra[96];
    snprintf(extra, sizeof extra, ",\"plan_type\":\"pro\",\"resets_at\":%.0f", until);
    error_json(&b, QUOTA_MSG, "usage_limit_reached", "usage_limit_reached", extra);
    reply_json(j, 0, 429, &b);
    sbuf_free(&b);
    return 1;
}

/* Scenarios whose answer is the same on every API: html (a 200 challenge
 * page), empty (200, no body; streamed: an empty event stream), reset (the
 * connection closed at once), html_error / empty_error (an error page that
 * is not JSON, as a proxy in front of an API sends, or no body at all). 1
 * when it answered. */
static int script_generic(job *j, const opts *o, int stream)
{
    const char *sc = o->scenario;
    if (!strcmp(sc, "html")) {
        add_header(j->req, "Content-Type", "text/html; charset=utf-8");
        action *a = job_add(j, ACT_REPLY, 0);
        a->status = 200;
        sbuf_puts(&a->data, "<!DOCTYPE html><html><body>Checking your browser...</body></html>");
    } else if (!strcmp(sc, "empty")) {
        if (stream) {
            start_sse(j, 0);
            job_add(j, ACT_END, 0);
        } else {
            sbuf none = SBUF_INIT;
            reply_json(j, 0, 200, &none);
        }
    } else if (!strcmp(sc, "reset")) {
        job_add(j, ACT_CLOSE, 0)->rst = o->rst != 0;
    } else if (!strcmp(sc, "html_error") || !strcmp(sc, "empty_error")) {
        int code = o->code >= 400 && o->code <= 599 ? o->code : 400;
        add_header(j->req, "Content-Type", "text/html");
        action *a = job_add(j, ACT_REPLY, 0);
        a->status = code;
        if (!strcmp(sc, "html_error"))
            sbuf_printf(&a->data, "<html><head><title>%d</title></head><body><h1>%d Bad Request</h1>\n"
                                  "<p>nginx</p></body></html>\n", code, code);
    } else {
        return 0;
    }
    return 1;
}

/* gzip=1 / gzip=2 on the whole answer. */
static void script_encoding(job *j, const opts *o)
{
    if (o->gzip == 2) /* an encoding nobody can decode, body untouched */
        add_header(j->req, "Content-Encoding", "x-bogus");
    else if (o->gzip)
        script_gzip(j);
}

/* ---------- the Anthropic Messages API (anthropic=1) ----------
 *
 * An account whose options say anthropic=1 is api.anthropic.com: POST
 * v1/messages and v1/messages/count_tokens (and GET v1/models), checked as
 * the real API checks them before anything else (anth_check: the headers,
 * then the body as its validator words it), answered in its shapes
 * (script_anthropic). Every OpenAI endpoint is a 404 there, and messages is
 * an unknown path on any other account (handle). */

static const char *const g_anth_fields[] = { /* what POST v1/messages takes */
    "model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream", "temperature", "top_k",
    "top_p", "tools", "tool_choice", "thinking", "service_tier", "container", "mcp_servers", "context_management",
    "output_config", "output_format",
};
static const char *const g_anth_count_fields[] = { /* what v1/messages/count_tokens takes (no max_tokens) */
    "model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers", "context_management",
    "output_config", "output_format",
};
/* content block types a message may hold */
static const char *const g_anth_blocks[] = {
    "text", "image", "document", "search_result", "thinking", "redacted_thinking", "tool_use", "tool_result",
    "server_tool_use", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
    "bash_code_execution_tool_result", "text_editor_code_execution_tool_result", "mcp_tool_use", "mcp_tool_result",
    "container_upload",
};
#define ANTH_TAGS "'text', 'image', 'document', 'search_result', 'thinking', 'redacted_thinking', 'tool_use', " \
                  "'tool_result', 'server_tool_use', 'web_search_tool_result', ..."
#define ANTH_DICT "Input should be a valid dictionary or object to extract fields from"
#define ANTH_RATE_MSG "Number of request tokens has exceeded your per-minute rate limit"

static int word_in(const char *w, const char *const *list, size_t n)
{
    for (size_t i = 0; w && i < n; i++)
        if (!strcmp(w, list[i]))
            return 1;
    return 0;
}

/* Anthropic's error body: {"type":"error","error":{"type":T,"message":M}}. */
static void anth_error_json(sbuf *b, const char *type, const char *message)
{
    sbuf_puts(b, "{\"type\":\"error\",\"error\":{\"type\":");
    js(b, type);
    sbuf_puts(b, ",\"message\":");
    js(b, message);
    sbuf_puts(b, "}}");
}

static void refuse_anthropic(refusal *rf, int status, const char *rule, const char *type, const char *message)
{
    rf->status = status;
    rf->rule = rule;
    anth_error_json(&rf->body, type, message);
}

/* What the API's checks look at. */
typedef struct anth_req {
    const char *api_key, *version; /* the headers (repeated ones joined), NULL when absent */
    const json_value *doc;         /* the body parsed, NULL when it is no JSON */
    int count;                     /* messages/count_tokens: its own fields, no max_tokens */
    int headers_only;              /* GET v1/models: only the headers are checked */
} anth_req;

/* Message i's own shape, in the words of the API's validator (pydantic's):
 * role, content (a string or a list of blocks, each with a known "type"),
 * no other member; text blocks carry text, tool_use blocks id, name and an
 * input object, tool_result blocks a tool_use_id. 1 when refused. */
static int anth_check_message(refusal *rf, const json_value *m, size_t i)
{
    sbuf msg = SBUF_INIT;
    const json_value *role = json_get(m, "role"), *content = json_get(m, "content");
    if (m->type != JSON_OBJECT)
        sbuf_printf(&msg, "messages.%zu: " ANTH_DICT, i);
    else if (!role)
        sbuf_printf(&msg, "messages.%zu.role: Field required", i);
    else if (role->type != JSON_STRING || (strcmp(role->str, "user") && strcmp(role->str, "assistant")))
        sbuf_printf(&msg, "messages.%zu.role: Input should be 'user' or 'assistant'", i);
    else if (!content)
        sbuf_printf(&msg, "messages.%zu.content: Field required", i);
    else if (content->type != JSON_STRING && content->type != JSON_ARRAY)
        sbuf_printf(&msg, "messages.%zu.content: Input should be a valid list", i);
    for (const json_value *c = msg.len ? NULL : m->child; c; c = c->next)
        if (strcmp(c->key, "role") && strcmp(c->key, "content")) { /* an OpenAI message's tool_calls, name, ... */
            sbuf_printf(&msg, "messages.%zu.%s: Extra inputs are not permitted", i, c->key);
            break;
        }
    size_t k = 0;
    for (const json_value *blk = !msg.len && content->type == JSON_ARRAY ? content->child : NULL; blk && !msg.len;
         blk = blk->next, k++) {
        const char *t = json_get_str(blk, "type");
        const json_value *v = NULL;
        if (blk->type != JSON_OBJECT)
            sbuf_printf(&msg, "messages.%zu.content.%zu: " ANTH_DICT, i, k);
        else if (!t)
            sbuf_printf(&msg, "messages.%zu.content.%zu: Unable to extract tag using discriminator 'type'", i, k);
        else if (!word_in(t, g_anth_blocks, sizeof g_anth_blocks / sizeof *g_anth_blocks))
            sbuf_printf(&msg, "messages.%zu.content.%zu: Input tag '%s' found using 'type' does not match any of the "
                              "expected tags: " ANTH_TAGS, i, k, t);
        else if (!strcmp(t, "text") && !(v = json_get(blk, "text")))
            sbuf_printf(&msg, "messages.%zu.content.%zu.text: Field required", i, k);
        else if (!strcmp(t, "text") && v->type != JSON_STRING)
            sbuf_printf(&msg, "messages.%zu.content.%zu.text: Input should be a valid string", i, k);
        else if (!strcmp(t, "tool_use") && !json_get_str(blk, "id"))
            sbuf_printf(&msg, "messages.%zu.content.%zu.id: Field required", i, k);
        else if (!strcmp(t, "tool_use") && !json_get_str(blk, "name"))
            sbuf_printf(&msg, "messages.%zu.content.%zu.name: Field required", i, k);
        else if (!strcmp(t, "tool_use") && !(v = json_get(blk, "input")))
            sbuf_printf(&msg, "messages.%zu.content.%zu.input: Field required", i, k);
        else if (!strcmp(t, "tool_use") && v->type != JSON_OBJECT) /* e.g. the arguments as a JSON string */
            sbuf_printf(&msg, "messages.%zu.content.%zu.input: Input should be a valid dictionary", i, k);
        else if (!strcmp(t, "tool_result") && !json_get_str(blk, "tool_use_id"))
            sbuf_printf(&msg, "messages.%zu.content.%zu.tool_use_id: Field required", i, k);
    }
    if (msg.len)
        refuse_anthropic(rf, 400, "messages", "invalid_request_error", msg.p);
    sbuf_free(&msg);
    return rf->status != 0;
}

/* 1 when message m (a list content) holds a block of type whose key is id. */
static int anth_block_has(const json_value *m, const char *type, const char *key, const char *id)
{
    const json_value *content = m ? json_get(m, "content") : NULL;
    for (const json_value *blk = content && content->type == JSON_ARRAY ? content->child : NULL; blk; blk = blk->next) {
        const char *t = json_get_str(blk, "type"), *v = json_get_str(blk, key);
        if (t && v && !strcmp(t, type) && !strcmp(v, id))
            return 1;
    }
    return 0;
}

/* The conversation as the API checks it once each message is well formed:
 * the first message is the user's; every message has content but for a
 * final assistant message (a prefill); no empty text block; each tool_use
 * of an assistant message has its tool_result in the next message, and
 * each tool_result answers a tool_use of the message before. 1 when refused. */
static int anth_check_turns(refusal *rf, const json_value *msgs)
{
    sbuf msg = SBUF_INIT;
    size_t i = 0;
    const json_value *prev = NULL;
    if (strcmp(json_get_str(msgs->child, "role"), "user") != 0)
        sbuf_puts(&msg, "messages: first message must use the \"user\" role");
    for (const json_value *m = msgs->child; m && !msg.len; prev = m, m = m->next, i++) {
        const json_value *content = json_get(m, "content");
        int assistant = !strcmp(json_get_str(m, "role"), "assistant");
        int empty = content->type == JSON_STRING ? content->str_len == 0 : content->count == 0;
        if (empty && !(assistant && !m->next)) {
            sbuf_printf(&msg, "messages.%zu: all messages must have non-empty content except for the optional final "
                              "assistant message", i);
            break;
        }
        size_t k = 0;
        for (const json_value *blk = content->type == JSON_ARRAY ? content->child : NULL; blk && !msg.len;
             blk = blk->next, k++) {
            const char *t = json_get_str(blk, "type"), *id = json_get_str(blk, "tool_use_id");
            if (!strcmp(t, "text") && json_get(blk, "text")->str_len == 0)
                sbuf_puts(&msg, "messages: text content blocks must be non-empty");
            else if (!strcmp(t, "tool_result") && !anth_block_has(prev, "tool_use", "id", id))
                sbuf_printf(&msg, "messages.%zu.content.%zu: unexpected `tool_use_id` found in `tool_result` blocks: "
                                  "%s. Each `tool_result` block must have a corresponding `tool_use` block in the "
                                  "previous message.", i, k, id);
        }
        /* the tool_use blocks of the message before, each answered here */
        const json_value *pc = prev ? json_get(prev, "content") : NULL;
        sbuf missing = SBUF_INIT;
        for (const json_value *blk = !msg.len && pc && pc->type == JSON_ARRAY ? pc->child : NULL; blk;
             blk = blk->next) {
            const char *t = json_get_str(blk, "type"), *id = json_get_str(blk, "id");
            if (!strcmp(t, "tool_use") && !anth_block_has(m, "tool_result", "tool_use_id", id)) {
                sbuf_puts(&missing, missing.len ? ", " : "");
                sbuf_puts(&missing, id);
            }
        }
        if (missing.len)
            sbuf_printf(&msg, "messages.%zu: `tool_use` ids were found without `tool_result` blocks immediately "
                              "after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the "
                              "next message.", i - 1, missing.p);
        sbuf_free(&missing);
    }
    if (msg.len)
        refuse_anthropic(rf, 400, "messages", "invalid_request_error", msg.p);
    sbuf_free(&msg);
    return rf->status != 0;
}

/* The Messages API's checks of a request, in the order it applies them,
 * among the rules in force: x-api-key (401), anthropic-version, then the
 * body: a JSON object, model, max_tokens (messages only), messages, and no
 * field the endpoint does not take. Refuses in rf in the API's words. 1
 * when it refused. */
static int anth_check(refusal *rf, unsigned rules, const anth_req *a)
{
    const json_value *doc = a->doc, *v = NULL;
    sbuf msg = SBUF_INIT;
    if ((rules & RULE_API_KEY) && !a->api_key) /* a bearer alone is no key */
        refuse_anthropic(rf, 401, "x_api_key", "authentication_error", "x-api-key header is required");
    else if ((rules & RULE_API_KEY) && !a->api_key[0])
        refuse_anthropic(rf, 401, "x_api_key", "authentication_error", "invalid x-api-key");
    else if ((rules & RULE_VERSION) && !a->version)
        refuse_anthropic(rf, 400, "anthropic_version", "invalid_request_error",
                         "anthropic-version: header is required");
    else if ((rules & RULE_VERSION) && strcmp(a->version, "2023-06-01") && strcmp(a->version, "2023-01-01")) {
        sbuf_printf(&msg, "anthropic-version: \"%s\" is not a valid version", a->version);
        refuse_anthropic(rf, 400, "anthropic_version", "invalid_request_error", msg.p);
    }
    if (rf->status || a->headers_only)
        goto out;
    if (!doc || doc->type != JSON_OBJECT) { /* nothing else can be checked */
        if (rules & RULE_JSON)
            refuse_anthropic(rf, 400, "json", "invalid_request_error",
                             doc ? ANTH_DICT : "There was an error parsing the body of your request: it is not JSON");
        goto out;
    }
    if ((rules & RULE_MODEL) && !(v = json_get(doc, "model")))
        refuse_anthropic(rf, 400, "model", "invalid_request_error", "model: Field required");
    else if ((rules & RULE_MODEL) && v->type != JSON_STRING)
        refuse_anthropic(rf, 400, "model", "invalid_request_error", "model: Input should be a valid string");
    if (rf->status)
        goto out;
    if (!a->count && (rules & RULE_MAX_TOKENS)) {
        int64_t n = 0;
        if (!(v = json_get(doc, "max_tokens")))
            refuse_anthropic(rf, 400, "max_tokens", "invalid_request_error", "max_tokens: Field required");
        else if (v->type != JSON_NUMBER || json_num_to_int64(v->num, INT64_MIN / 2, INT64_MAX / 2, &n) ||
                 (double)n != v->num)
            refuse_anthropic(rf, 400, "max_tokens", "invalid_request_error",
                             "max_tokens: Input should be a valid integer");
        else if (n < 1)
            refuse_anthropic(rf, 400, "max_tokens", "invalid_request_error",
                             "max_tokens: Input should be greater than or equal to 1");
        if (rf->status)
            goto out;
    }
    if (rules & RULE_MESSAGES) {
        const json_value *msgs = json_get(doc, "messages");
        size_t i = 0;
        if (!msgs)
            refuse_anthropic(rf, 400, "messages", "invalid_request_error", "messages: Field required");
        else if (msgs->type != JSON_ARRAY)
            refuse_anthropic(rf, 400, "messages", "invalid_request_error", "messages: Input should be a valid list");
        else if (!msgs->child)
            refuse_anthropic(rf, 400, "messages", "invalid_request_error",
                             "messages: at least one message is required");
        for (const json_value *m = rf->status ? NULL : msgs->child; m; m = m->next, i++)
            if (anth_check_message(rf, m, i))
                break;
        if (rf->status || anth_check_turns(rf, msgs))
            goto out;
    }
    for (const json_value *c = (rules & RULE_EXTRA) ? doc->child : NULL; c; c = c->next)
        if (a->count ? !word_in(c->key, g_anth_count_fields, sizeof g_anth_count_fields / sizeof *g_anth_count_fields)
                     : !word_in(c->key, g_anth_fields, sizeof g_anth_fields / sizeof *g_anth_fields)) {
            sbuf_printf(&msg, "%s: Extra inputs are not permitted", c->key); /* input, instructions, store, ... */
            refuse_anthropic(rf, 400, "extra_inputs", "invalid_request_error", msg.p);
            break;
        }
out:
    sbuf_free(&msg);
    return rf->status != 0;
}

/* Every rule of the Messages API the request breaks, lax= or not, in the
 * order they are checked (the first failure of each). */
static char *anth_violations(const anth_req *a)
{
    unsigned left = RULES_ANTHROPIC | RULE_MESSAGES;
    sbuf out = SBUF_INIT;
    sbuf_puts(&out, "[");
    for (int n = 0;; n++) {
        refusal t = {0, SBUF_INIT, NULL};
        int refused = anth_check(&t, left, a);
        sbuf_free(&t.body);
        unsigned bit = 0;
        for (size_t i = 0; refused && i < sizeof g_rule_names / sizeof g_rule_names[0]; i++)
            if (!strcmp(g_rule_names[i].name, t.rule))
                bit = g_rule_names[i].bit;
        if (!bit)
            break;
        left &= ~bit;
        sbuf_puts(&out, n ? "," : "");
        js(&out, t.rule);
    }
    sbuf_puts(&out, "]");
    char *v = xstrdup(out.p);
    sbuf_free(&out);
    return v;
}

/* What a Messages request carries, for the record (roles, last_role,
 * tool_outputs: the tool_use_ids of its tool_result blocks) and the answer:
 * its first tool's name, and whether its last user message holds a
 * tool_result (tool_call=1 then answers text). */
static void anth_read(reqinfo *ri, rec *r, const json_value *doc)
{
    if (!doc || doc->type != JSON_OBJECT)
        return;
    const json_value *tools = json_get(doc, "tools"), *msgs = json_get(doc, "messages"), *last_user = NULL;
    ri->tool_name = xstrdup(tools && tools->type == JSON_ARRAY ? json_get_str(tools->child, "name") : NULL);
    sbuf roles = SBUF_INIT, outputs = SBUF_INIT;
    size_t i = 0, nout = 0;
    sbuf_puts(&roles, "[");
    sbuf_puts(&outputs, "[");
    for (const json_value *m = msgs && msgs->type == JSON_ARRAY ? msgs->child : NULL; m; m = m->next, i++) {
        const char *role = json_get_str(m, "role");
        const json_value *content = json_get(m, "content");
        if (i < 1000) {
            sbuf_puts(&roles, i ? "," : "");
            json_str_or_null(&roles, role);
        }
        free(r->last_role);
        r->last_role = xstrdup(role);
        if (role && !strcmp(role, "user"))
            last_user = m;
        for (const json_value *blk = content && content->type == JSON_ARRAY ? content->child : NULL; blk;
             blk = blk->next) {
            const char *t = json_get_str(blk, "type");
            if (t && !strcmp(t, "tool_result") && nout++ < 1000) {
                sbuf_puts(&outputs, nout > 1 ? "," : "");
                json_str_or_null(&outputs, json_get_str(blk, "tool_use_id"));
            }
        }
    }
    const json_value *lc = last_user ? json_get(last_user, "content") : NULL;
    for (const json_value *blk = lc && lc->type == JSON_ARRAY ? lc->child : NULL; blk; blk = blk->next) {
        const char *t = json_get_str(blk, "type");
        ri->after_tool |= t && !strcmp(t, "tool_result");
    }
    sbuf_puts(&roles, "]");
    sbuf_puts(&outputs, "]");
    r->roles = xstrdup(roles.p);
    r->tool_outputs = xstrdup(outputs.p);
    sbuf_free(&roles);
    sbuf_free(&outputs);
}

/* The error type and words of the API for an HTTP status (status=<code>). */
static void anth_status(int code, const char **type, const char **msg)
{
    switch (code) {
    case 400: *type = "invalid_request_error", *msg = "Invalid request"; break;
    case 401: *type = "authentication_error", *msg = "invalid x-api-key"; break;
    case 402: *type = "billing_error", *msg = "Your credit balance is too low to access the Anthropic API."; break;
    case 403:
        *type = "permission_error", *msg = "Your API key does not have permission to use the specified resource.";
        break;
    case 404: *type = "not_found_error", *msg = "Not found"; break;
    case 413: *type = "request_too_large", *msg = "Request exceeds the maximum allowed number of bytes."; break;
    case 429: *type = "rate_limit_error", *msg = ANTH_RATE_MSG; break;
    case 504: *type = "timeout_error", *msg = "Request timed out"; break;
    case 529: *type = "overloaded_error", *msg = "Overloaded"; break;
    default:
        if (code >= 500)
            *type = "api_error", *msg = "Internal server error";
        else
            *type = "invalid_request_error", *msg = "Invalid request";
    }
}

/* The words of an in-stream error event of type t. */
static const char *anth_event_msg(const char *t)
{
    return !strcmp(t, "overloaded_error") ? "Overloaded"
           : !strcmp(t, "api_error")      ? "Internal server error"
           : !strcmp(t, "rate_limit_error") ? ANTH_RATE_MSG
                                           : "the upstream reported an error";
}

/* tool_call=1: tool_use blocks (tool_calls=N of them) calling the request's
 * first tool with {"city":"Paris"}, ids toolu_<name>_<n>[_<k>] (k from 2),
 * recorded in r. */
static void gen_anth_tools(gen *g, const opts *o, rec *r, const char *tool)
{
    int n = o->tool_calls > 0 ? o->tool_calls : 1;
    sbuf ids = SBUF_INIT;
    snprintf(g->tool, sizeof g->tool, "%s", tool);
    sbuf_puts(&ids, "[");
    for (int k = 0; k < n && k < MAX_CALLS; k++) {
        char suffix[16] = "";
        if (k)
            snprintf(suffix, sizeof suffix, "_%d", k + 1);
        snprintf(g->calls[k].call_id, sizeof g->calls[k].call_id, "toolu_%s_%ld%s", r->account, r->n, suffix);
        if (k)
            sbuf_printf(&g->calls[k].args, "{\"city\":\"Paris %d\"}", k + 1);
        else
            sbuf_puts(&g->calls[k].args, "{\"city\":\"Paris\"}");
        sbuf_puts(&ids, k ? "," : "");
        js(&ids, g->calls[k].call_id);
        g->ncalls++;
    }
    sbuf_puts(&ids, "]");
    r->tool_call = xstrdup(g->calls[0].call_id);
    r->tool_calls = xstrdup(ids.p);
    sbuf_free(&ids);
}

/* The answer's message object: content (the text or the tool_use blocks),
 * stop reason and usage (input 7, cache reads 2 unless input_tokens= /
 * cached= say otherwise, output = the deltas). */
static void anth_message(sbuf *b, const gen *g)
{
    sbuf_puts(b, "{\"id\":");
    js(b, g->msg_id);
    sbuf_puts(b, ",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
    js(b, g->model);
    sbuf_puts(b, ",\"content\":[");
    for (int k = 0; k < g->ncalls; k++) {
        sbuf_puts(b, k ? ",{\"type\":\"tool_use\",\"id\":" : "{\"type\":\"tool_use\",\"id\":");
        js(b, g->calls[k].call_id);
        sbuf_puts(b, ",\"name\":");
        js(b, g->tool);
        sbuf_puts(b, ",\"input\":");
        sbuf_append(b, g->calls[k].args.p, g->calls[k].args.len);
        sbuf_puts(b, "}");
    }
    if (!g->ncalls) {
        sbuf_puts(b, "{\"type\":\"text\",\"text\":");
        sbuf_json_str(b, g->text.p, g->text.len);
        sbuf_puts(b, "}");
    }
    sbuf_printf(b, "],\"stop_reason\":\"%s\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":%d,"
                   "\"output_tokens\":%d,\"cache_read_input_tokens\":%d,\"cache_creation_input_tokens\":0}}",
                g->ncalls ? "tool_use" : "end_turn", g->input_tokens, g->npieces, g->cached_tokens);
}

static void ae_message_start(sbuf *b, const gen *g)
{
    sse_open(b, "message_start");
    sbuf_puts(b, "{\"type\":\"message_start\",\"message\":{\"id\":");
    js(b, g->msg_id);
    sbuf_puts(b, ",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
    js(b, g->model);
    sbuf_printf(b, ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":%d,"
                   "\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":%d,\"output_tokens\":1}}}",
                g->input_tokens, g->cached_tokens);
    sse_close(b);
}

/* content_block_start of block k: the text (empty) or tool_use k (input {}),
 * and after the first block's start the ping the API sends there. */
static void ae_block_start(sbuf *b, const gen *g, int k)
{
    sse_open(b, "content_block_start");
    sbuf_printf(b, "{\"type\":\"content_block_start\",\"index\":%d,\"content_block\":", k);
    if (g->ncalls) {
        sbuf_puts(b, "{\"type\":\"tool_use\",\"id\":");
        js(b, g->calls[k].call_id);
        sbuf_puts(b, ",\"name\":");
        js(b, g->tool);
        sbuf_puts(b, ",\"input\":{}}}");
    } else {
        sbuf_puts(b, "{\"type\":\"text\",\"text\":\"\"}}");
    }
    sse_close(b);
    if (k == 0) {
        sse_open(b, "ping");
        sbuf_puts(b, "{\"type\":\"ping\"}");
        sse_close(b);
    }
}

static void ae_text_delta(sbuf *b, const gen *g, int i)
{
    sse_open(b, "content_block_delta");
    sbuf_puts(b, "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":");
    sbuf_json_str(b, g->pieces[i].p, g->pieces[i].len);
    sbuf_puts(b, "}}");
    sse_close(b);
}

static void ae_json_delta(sbuf *b, const gen *g, int k, int piece)
{
    size_t off, len;
    arg_piece(&g->calls[k].args, piece, &off, &len);
    sse_open(b, "content_block_delta");
    sbuf_printf(b, "{\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"input_json_delta\","
                   "\"partial_json\":", k);
    sbuf_json_str(b, g->calls[k].args.p + off, len);
    sbuf_puts(b, "}}");
    sse_close(b);
}

static void ae_block_stop(sbuf *b, int k)
{
    sse_open(b, "content_block_stop");
    sbuf_printf(b, "{\"type\":\"content_block_stop\",\"index\":%d}", k);
    sse_close(b);
}

static void ae_message_end(sbuf *b, const gen *g)
{
    sse_open(b, "message_delta");
    sbuf_printf(b, "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"%s\",\"stop_sequence\":null},"
                   "\"usage\":{\"output_tokens\":%d}}", g->ncalls ? "tool_use" : "end_turn", g->npieces);
    sse_close(b);
    sse_open(b, "message_stop");
    sbuf_puts(b, "{\"type\":\"message_stop\"}");
    sse_close(b);
}

static void ae_error(sbuf *b, const char *type, const char *message)
{
    sse_open(b, "error");
    anth_error_json(b, type, message);
    sse_close(b);
}

/* A Messages stream in Anthropic's order: message_start, per block
 * content_block_start (a ping after the first), its deltas,
 * content_block_stop, then message_delta and message_stop. `mode` picks
 * where it goes wrong, as the OpenAI streams' do. */
static void script_anth_stream(job *j, gen *g, const opts *o, stream_mode mode, long delay0)
{
    sbuf b = SBUF_INIT;
    long gap = o->gap;
    start_sse(j, delay0);
    ae_message_start(&b, g);
    job_chunk(j, 0, &b);
    sbuf_reset(&b);
    if (mode == S_NO_OUTPUT) { /* a clean end with no content and no message_stop */
        job_add(j, ACT_END, gap);
        goto out;
    }
    if (mode == S_OVERLOADED || mode == S_QUOTA || mode == S_FAILED) { /* before any content block */
        const char *t = mode == S_OVERLOADED ? "overloaded_error" : mode == S_QUOTA ? "rate_limit_error" : "api_error";
        ae_error(&b, t, anth_event_msg(t));
        job_chunk(j, gap, &b);
        job_add(j, ACT_END, 0);
        goto out;
    }
    long stall = mode == S_STALL ? (o->ms >= 0 ? o->ms : 5000) : 0, first = stall > 0 ? stall : gap;
    int late = mode == S_LATE_ERROR || mode == S_LATE_RESET;
    int n = late ? (o->after >= 0 ? o->after : 3) : g->npieces;
    if (n > g->npieces)
        n = g->npieces;
    long dgap = mode == S_SLOW ? (o->ms >= 0 ? o->ms : 100) : gap;
    const char *late_type = o->err_code[0] ? o->err_code : "overloaded_error";
    if (g->ncalls) { /* tool_call=1: the tool_use blocks instead of text */
        for (int k = 0; k < g->ncalls; k++) {
            ae_block_start(&b, g, k);
            job_chunk(j, k ? gap : first, &b);
            sbuf_reset(&b);
            for (int piece = 0; piece < ARG_PIECES; piece++) {
                ae_json_delta(&b, g, k, piece);
                job_chunk(j, dgap, &b);
                sbuf_reset(&b);
            }
            ae_block_stop(&b, k);
            job_chunk(j, gap, &b);
            sbuf_reset(&b);
        }
        if (mode == S_LATE_ERROR) { /* the calls went out, then the error */
            ae_error(&b, late_type, anth_event_msg(late_type));
            job_chunk(j, gap, &b);
            job_add(j, ACT_END, 0);
            goto out;
        }
    } else {
        ae_block_start(&b, g, 0);
        job_chunk(j, first, &b);
        sbuf_reset(&b);
        for (int i = 0; i < n; i++) {
            ae_text_delta(&b, g, i);
            job_chunk(j, dgap, &b);
            sbuf_reset(&b);
        }
        if (mode == S_LATE_ERROR) {
            ae_error(&b, late_type, anth_event_msg(late_type));
            job_chunk(j, gap, &b);
            job_add(j, ACT_END, 0);
            goto out;
        }
        if (mode == S_LATE_RESET) {
            late_end(j, o, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
                           "\"delta\":{\"type\":\"text_delta\",\"text\":\"");
            goto out;
        }
        ae_block_stop(&b, 0);
        job_chunk(j, gap, &b);
        sbuf_reset(&b);
    }
    ae_message_end(&b, g);
    job_chunk(j, gap, &b);
    job_add(j, ACT_END, o->tail);
out:
    sbuf_free(&b);
}

/* reflect_auth[=code] on the Messages API: the x-api-key the upstream got
 * reflected as reflect_auth reflects the Authorization on the others: in
 * x-request-id and x-echo headers, an error body (code >= 400, default
 * 400), a plain answer's text or, streamed, a text delta split across two
 * chunks in the middle of the key. */
static void script_anth_reflect(job *j, const opts *o, const rec *r, int stream)
{
    const char *key = r->x_api_key ? r->x_api_key : "";
    int code = o->code ? o->code : 400;
    sbuf b = SBUF_INIT, msg = SBUF_INIT;
    add_header(j->req, "x-request-id", key);
    add_header(j->req, "x-echo", key);
    sbuf_printf(&msg, "bad credentials: %s", key);
    if (code >= 400) {
        const char *type, *ignored;
        anth_status(code, &type, &ignored);
        anth_error_json(&b, type, msg.p);
        reply_json(j, 0, code, &b);
        goto out;
    }
    gen g;
    gen_init(&g, r->account, r->model ? r->model : "claude-test", r->n, 1);
    sbuf_reset(&g.pieces[0]);
    sbuf_append(&g.pieces[0], msg.p, msg.len);
    sbuf_reset(&g.text);
    sbuf_append(&g.text, msg.p, msg.len);
    g.npieces = 1;
    g.cached_tokens = 2;
    if (!stream) {
        anth_message(&b, &g);
        reply_json(j, 0, 200, &b);
    } else {
        ae_message_start(&b, &g);
        ae_block_start(&b, &g, 0);
        ae_text_delta(&b, &g, 0);
        ae_block_stop(&b, 0);
        ae_message_end(&b, &g);
        const char *hit = *key ? strstr(b.p, key) : NULL;
        size_t cut = hit ? (size_t)(hit - b.p) + strlen(key) / 2 : b.len / 2;
        sbuf first = SBUF_INIT, rest = SBUF_INIT;
        sbuf_append(&first, b.p, cut);
        sbuf_append(&rest, b.p + cut, b.len - cut);
        start_sse(j, 0);
        job_chunk(j, 0, &first);
        job_chunk(j, 50, &rest);
        job_add(j, ACT_END, 0);
        sbuf_free(&first);
        sbuf_free(&rest);
    }
    g.npieces = 3; /* gen_init made three pieces: all are freed */
    gen_free(&g);
out:
    sbuf_free(&b);
    sbuf_free(&msg);
}

/* GET v1/models on the API: {"data":[{"type":"model","id",...}],...}: the
 * models= (or listed=) names, else claude-test. */
static void anth_models(sbuf *b, const opts *o)
{
    const char *list = o->listed[0] ? o->listed : o->models[0] ? o->models : "claude-test";
    const char *first = NULL, *last = NULL;
    size_t nfirst = 0, nlast = 0;
    int k = 0;
    sbuf_puts(b, "{\"data\":[");
    for (const char *p = list; *p;) {
        const char *e = strchr(p, '+');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n) {
            sbuf_printf(b, "%s{\"type\":\"model\",\"id\":\"%.*s\",\"display_name\":\"%.*s\","
                           "\"created_at\":\"2025-01-01T00:00:00Z\"}", k++ ? "," : "", (int)n, p, (int)n, p);
            if (!first)
                first = p, nfirst = n;
            last = p, nlast = n;
        }
        if (!e)
            break;
        p = e + 1;
    }
    sbuf_puts(b, "],\"has_more\":false,\"first_id\":");
    if (first)
        sbuf_printf(b, "\"%.*s\",\"last_id\":\"%.*s\"}", (int)nfirst, first, (int)nlast, last);
    else
        sbuf_puts(b, "null,\"last_id\":null}");
}

/* The answer of an anthropic=1 account to messages, count_tokens or models
 * (script_build's counterpart): its rules' refusal first, then models=,
 * then the scenario in the API's shapes. */
static void script_anthropic(job *j, const opts *o, endpoint ep, rec *r, int stream, const reqinfo *ri,
                             const refusal *rf)
{
    sbuf b = SBUF_INIT, msg = SBUF_INIT;
    const char *sc = o->scenario;
    char rid[48];
    snprintf(rid, sizeof rid, "req_mock_%ld", r->n);
    add_header(j->req, "request-id", rid);
    if (rf->status) {
        reply_json(j, 0, rf->status, &rf->body);
        r->refused = xstrdup(rf->rule);
    } else if (ep == EP_MODELS) {
        anth_models(&b, o);
        reply_json(j, 0, 200, &b);
    } else if (o->models[0] && r->model && !models_has(o->models, r->model)) {
        sbuf_printf(&msg, "model: %s", r->model);
        anth_error_json(&b, "not_found_error", msg.p);
        reply_json(j, 0, 404, &b);
    } else if (!strcmp(sc, "status")) {
        int code = o->code >= 100 && o->code <= 599 ? o->code : 500;
        const char *type, *text;
        anth_status(code, &type, &text);
        anth_error_json(&b, type, text);
        reply_json(j, 0, code, &b);
    } else if (ep == EP_MESSAGES_COUNT) { /* any other scenario: the count */
        sbuf_printf(&b, "{\"input_tokens\":%zu}", r->body_len / 4 + 1);
        reply_json(j, 0, 200, &b);
    } else if (!strcmp(sc, "prompt_too_long") || !strcmp(sc, "ctxlen")) {
        anth_error_json(&b, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum");
        reply_json(j, 0, 400, &b);
    } else if (!strcmp(sc, "quota429")) {
        anth_error_json(&b, "rate_limit_error",
                        "This request would exceed your account's rate limit. Please try again later.");
        reply_json(j, 0, 429, &b);
    } else if (!strcmp(sc, "big_error")) {
        int code = o->code >= 400 && o->code <= 599 ? o->code : 400;
        const char *type, *ignored;
        anth_status(code, &type, &ignored);
        for (long i = 0; i < (o->bytes > 0 ? o->bytes : 40000); i++)
            sbuf_append(&msg, "x", 1);
        anth_error_json(&b, type, msg.p);
        reply_json(j, 0, code, &b);
    } else if (script_generic(j, o, stream)) {
        /* html, empty, reset, html_error, empty_error */
    } else if (!strcmp(sc, "reflect_auth")) {
        script_anth_reflect(j, o, r, stream);
    } else {
        static const struct { const char *name; stream_mode mode; } modes[] = {
            {"ok", S_OK}, {"slow_headers", S_OK}, {"stall", S_STALL}, {"slow_stream", S_SLOW},
            {"quota_stream", S_QUOTA}, {"failed_stream", S_FAILED}, {"overloaded_stream", S_OVERLOADED},
            {"late_error", S_LATE_ERROR}, {"late_reset", S_LATE_RESET}, {"no_output", S_NO_OUTPUT},
            {"plain_cut", S_OK},
        };
        int found = -1;
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
            if (!strcmp(sc, modes[i].name))
                found = (int)i;
        if (found < 0) {
            fprintf(stderr, "mock_upstream: unknown scenario '%s'\n", sc);
            anth_error_json(&b, "api_error", "mock_upstream: unknown scenario");
            reply_json(j, 0, 500, &b);
            goto out;
        }
        stream_mode mode = modes[found].mode;
        long delay0 = !strcmp(sc, "slow_headers") ? (o->ms >= 0 ? o->ms : 2000) : o->head_ms;
        int npieces = o->deltas > 0 ? o->deltas : (mode == S_SLOW ? 20 : 3);
        if (npieces > 10000)
            npieces = 10000;
        gen g;
        gen_init(&g, r->account, r->model ? r->model : "claude-test", r->n, npieces);
        if (o->input_tokens > 0)
            g.input_tokens = o->input_tokens;
        g.cached_tokens = o->cached > 0 ? o->cached : 2;
        int calls = mode == S_OK || mode == S_STALL || mode == S_SLOW || mode == S_LATE_ERROR;
        if (o->tool_call && calls && !ri->after_tool && ri->tool_name) /* a model calls only a tool it was given */
            gen_anth_tools(&g, o, r, ri->tool_name);
        if (!strcmp(sc, "plain_cut")) { /* the plain answer's first half, then the connection closes */
            anth_message(&b, &g);
            pad_append(&b, o->bytes, 0);
            sbuf half = SBUF_INIT;
            sbuf_append(&half, b.p, b.len / 2);
            add_header(j->req, "Content-Type", "application/json");
            job_add(j, ACT_START, 0)->status = 200;
            job_chunk(j, 0, &half);
            job_add(j, ACT_CLOSE, 50)->rst = o->rst == 1;
            sbuf_free(&half);
        } else if (mode == S_OK && !stream) {
            anth_message(&b, &g);
            pad_append(&b, o->pad > 0 ? o->pad : o->bytes, o->seq);
            reply_json(j, delay0, 200, &b);
        } else {
            script_anth_stream(j, &g, o, mode, delay0);
        }
        gen_free(&g);
    }
out:
    sbuf_free(&b);
    sbuf_free(&msg);
}

/* Fills j with the script for scenario o on endpoint ep. */

static void script_build(job *j, const opts *o, endpoint ep, rec *r, int stream, const reqinfo *ri,
                         const refusal *rf)
{
    sbuf b = SBUF_INIT;
    const char *sc = o->scenario;
    add_usage_headers(j->req, o);
    if (o->echo_auth && r->authorization)
        add_header(j->req, "x-codex-echo", r->authorization);
    if (o->retry_after[0])
        add_header(j->req, "Retry-After", o->retry_after);
    if (o->retry_after_ms[0])
        add_header(j->req, "retry-after-ms", o->retry_after_ms);
    if (o->big_header) { /* one header line larger than a client may take (libcurl: 100 KiB) */
        char *v = malloc((size_t)o->big_header + 1);
        if (!v)
            abort();
        memset(v, 'x', (size_t)o->big_header);
        v[o->big_header] = '\0';
        add_header(j->req, "x-big", v);
        free(v);
    }
    if (o->anthropic && (ep == EP_MESSAGES || ep == EP_MESSAGES_COUNT || ep == EP_MODELS)) {
        script_anthropic(j, o, ep, r, stream, ri, rf);
        script_encoding(j, o);
        sbuf_free(&b);
        return;
    }

    /* the upstream's rules come before the scenario, as a real backend
     * validates a request before it serves or meters it; only a bad token
     * is answered first */
    int auth_bad = o->auth && !bearer_valid(r->authorization);
    if (!auth_bad && rf->status) {
        reply_json(j, 0, rf->status, &rf->body);
        r->refused = xstrdup(rf->rule);
        sbuf_free(&b);
        return;
    }
    if (!auth_bad && models_answer(j, o, ep, r)) {
        sbuf_free(&b);
        return;
    }
    if (family_answer(j, o, r)) {
        sbuf_free(&b);
        return;
    }
    if (o->auth && !bearer_valid(r->authorization)) {
        error_json(&b, "Your authentication token has expired. Please try signing in again.",
                   "invalid_request_error", "token_expired", NULL);
        reply_json(j, 0, 401, &b);
    } else if (o->no_prefill && r->prefill) {
        error_json_param(&b, "This model does not support assistant message prefill. The conversation must end "
                             "with a user message.", "invalid_request_error", "messages", NULL);
        reply_json(j, 0, 400, &b);
    } else if (!strcmp(sc, "status")) {
        int code = o->code >= 100 && o->code <= 599 ? o->code : 500;
        if (code == 429 && !strcmp(o->err, "per_model")) { /* the API's per-model limits, in its words */
            char msg[256];
            snprintf(msg, sizeof msg,
                     "Rate limit reached for %s in organization org-mock on requests per min (RPM): Limit 3, "
                     "Used 3, Requested 1. Please try again in 20s.",
                     r->model ? r->model : "");
            error_json(&b, msg, "requests", "rate_limit_exceeded", NULL);
        } else if (!account_refusal(&b, o->err))
            status_error(&b, code);
        reply_json(j, 0, code, &b);
    } else if (!strcmp(sc, "quota429")) {
        char extra[96];
        snprintf(extra, sizeof extra, ",\"plan_type\":\"plus\",\"resets_in_seconds\":%ld", o->resets);
        error_json(&b, QUOTA_MSG, "usage_limit_reached", "usage_limit_reached", extra);
        reply_json(j, 0, 429, &b);
    } else if (!strcmp(sc, "ctxlen")) {
        error_json(&b,
                   "This model's maximum context length is 8192 tokens. However, your messages "
                   "resulted in 9000 tokens. Please reduce the length of the messages.",
                   "invalid_request_error", "context_length_exceeded", NULL);
        reply_json(j, 0, 400, &b);
    } else if (script_generic(j, o, stream)) {
        /* html, empty, reset, html_error, empty_error: the same on every API */
    } else if (!strcmp(sc, "reflect_auth")) {
        script_reflect_auth(j, o, ep, r, stream);
    } else if (!strcmp(sc, "error200")) {
        /* HTTP 200 whose body is an error object, as some relays answer quota
         * and rate limits (code=...: its code, default insufficient_quota) */
        const char *code = o->err_code[0] ? o->err_code : "insufficient_quota";
        error_json(&b, !strcmp(code, "insufficient_quota") ? "You exceeded your current quota." : "refused by the relay",
                   !strcmp(code, "insufficient_quota") ? "insufficient_quota" : "relay_error", code, NULL);
        reply_json(j, 0, 200, &b);
    } else if (!strcmp(sc, "big_error")) {
        /* an error body far above what the gateway keeps of one */
        int code = o->code >= 400 && o->code <= 599 ? o->code : 400;
        sbuf m = SBUF_INIT;
        for (long i = 0; i < (o->bytes > 0 ? o->bytes : 40000); i++)
            sbuf_append(&m, "x", 1);
        error_json(&b, m.p, "invalid_request_error", "big_error", NULL);
        sbuf_free(&m);
        reply_json(j, 0, code, &b);
    } else if (!strcmp(sc, "plain_cut")) {
        /* a plain JSON answer that stops halfway: chunked, then the connection closes
         * (bytes=N: an answer of about N bytes, e.g. more than the gateway holds whole) */
        gen g;
        gen_init(&g, r->account, r->model ? r->model : "gpt-test", r->n, 3);
        response_obj(&b, &g, "completed", NULL, NULL);
        gen_free(&g);
        if (o->bytes > 0 && b.len && b.p[b.len - 1] == '}') {
            b.len--; /* the closing brace */
            sbuf_puts(&b, ",\"pad\":\"");
            sbuf_reserve(&b, (size_t)o->bytes);
            memset(b.p + b.len, 'x', (size_t)o->bytes);
            b.len += (size_t)o->bytes;
            sbuf_puts(&b, "\"}");
        }
        sbuf half = SBUF_INIT;
        sbuf_append(&half, b.p, b.len / 2);
        add_header(j->req, "Content-Type", "application/json");
        job_add(j, ACT_START, 0)->status = 200;
        job_chunk(j, 0, &half);
        job_add(j, ACT_CLOSE, 50)->rst = o->rst == 1;
        sbuf_free(&half);
    } else if (ep == EP_MODELS) {
        long delay = !strcmp(sc, "slow_headers") ? (o->ms >= 0 ? o->ms : 2000) : 0;
        models_json(&b);
        reply_json(j, delay, 200, &b);
    } else if (ep == EP_UNKNOWN) {
        error_json(&b, "mock_upstream: unknown endpoint", "invalid_request_error", "unknown_url", NULL);
        reply_json(j, 0, 404, &b);
    } else {
        static const struct { const char *name; stream_mode mode; } modes[] = {
            {"ok", S_OK}, {"slow_headers", S_OK}, {"stall", S_STALL}, {"slow_stream", S_SLOW},
            {"quota_stream", S_QUOTA}, {"failed_stream", S_FAILED},
            {"late_error", S_LATE_ERROR}, {"late_reset", S_LATE_RESET}, {"no_output", S_NO_OUTPUT},
        };
        int found = -1;
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
            if (!strcmp(sc, modes[i].name))
                found = (int)i;
        if (found < 0) {
            fprintf(stderr, "mock_upstream: unknown scenario '%s'\n", sc);
            error_json(&b, "mock_upstream: unknown scenario", "mock_config_error", "unknown_scenario", NULL);
            reply_json(j, 0, 500, &b);
        } else if (ep == EP_RESPONSES && refuse_request(j, o, r, ri, stream)) {
            /* refused like a strict backend: a foreign blob or previous response */
        } else {
            stream_mode mode = modes[found].mode;
            long delay0 = !strcmp(sc, "slow_headers") ? (o->ms >= 0 ? o->ms : 2000) : o->head_ms;
            int npieces = o->deltas > 0 ? o->deltas : (mode == S_SLOW ? 20 : 3);
            if (npieces > 10000)
                npieces = 10000;
            gen g;
            gen_init(&g, r->account, r->model ? r->model : "gpt-test", r->n, npieces);
            if (o->input_tokens > 0)
                g.input_tokens = o->input_tokens;
            g.cached_tokens = o->cached < g.input_tokens ? o->cached : g.input_tokens;
            int completes = mode == S_OK || mode == S_STALL || mode == S_SLOW;
            int calls = completes || mode == S_LATE_ERROR; /* late_error: the calls, then the error */
            if (ep == EP_RESPONSES) {
                gen_responses_extras(&g, o, r, ri, calls);
                g.bare_output = (ri->rules & RULE_OUTPUT) != 0;
            } else {
                g.think = o->reasoning != 0;
                if (o->tool_call && calls && !ri->after_tool)
                    gen_tool_calls(&g, o, r);
            }
            /* only "ok"/"slow_headers" answer plain JSON; the others are stream behaviours */
            if (mode == S_OK && !stream)
                script_plain(j, &g, ep, delay0, o->pad > 0 ? o->pad : o->bytes, o->seq);
            else if (ep == EP_RESPONSES)
                script_responses_stream(j, &g, o, mode, delay0);
            else
                script_chat_stream(j, &g, o, mode, delay0);
            /* a response that completes is kept, unless store:false or the
             * codex style's backend (which keeps nothing) */
            if (ep == EP_RESPONSES && ri->store && !(ri->rules & RULE_PREV_ID) && completes) {
                sbuf resp = SBUF_INIT;
                response_obj(&resp, &g, "completed", NULL, NULL);
                stored_add(r->account, g.resp_id, r->prev_id, resp.p, ri->input ? ri->input : "[]");
                sbuf_free(&resp);
            }
            gen_free(&g);
        }
    }
    script_encoding(j, o);
    sbuf_free(&b);
}

/* ---------- usage endpoint ---------- */

/* What an account's usage endpoint answers, set by POST /_usage/<name>
 * (?status=N, default 200; the body is the answer). Unset: 404. */
typedef struct usage_cfg {
    char name[128];
    int status;
    sbuf body;
} usage_cfg;

#define USAGE_CFG_MAX 64
static usage_cfg g_usage[USAGE_CFG_MAX];
static size_t g_nusage;

static usage_cfg *usage_find(const char *name)
{
    for (size_t i = 0; i < g_nusage; i++)
        if (!strcmp(g_usage[i].name, name))
            return &g_usage[i];
    return NULL;
}

static void usage_set(const char *name, int status, const char *body, size_t len)
{
    usage_cfg *u = usage_find(name);
    if (!u) {
        if (g_nusage == USAGE_CFG_MAX)
            return;
        u = &g_usage[g_nusage++];
        snprintf(u->name, sizeof u->name, "%s", name);
    }
    u->status = status >= 100 && status <= 599 ? status : 200;
    sbuf_reset(&u->body);
    sbuf_append(&u->body, body, len);
}

static void usage_clear(void)
{
    for (size_t i = 0; i < g_nusage; i++)
        sbuf_free(&g_usage[i].body);
    g_nusage = 0;
}

static void script_usage(job *j, const char *account, const opts *o, const rec *r)
{
    const usage_cfg *u = usage_find(account);
    sbuf b = SBUF_INIT;
    if (o->auth && !bearer_valid(r->authorization)) {
        error_json(&b, "Your authentication token has expired. Please try signing in again.",
                   "invalid_request_error", "token_expired", NULL);
        reply_json(j, 0, 401, &b);
    } else if (!u) {
        error_json(&b, "mock_upstream: no usage configured for this account", "invalid_request_error",
                   "not_found", NULL);
        reply_json(j, 0, 404, &b);
    } else { /* ms=N: the answer comes after N ms (a slow usage endpoint: polls pile up in flight) */
        sbuf_append(&b, u->body.p ? u->body.p : "", u->body.len);
        reply_json(j, o->ms > 0 ? o->ms : 0, u->status, &b);
    }
    sbuf_free(&b);
}

/* ---------- HTTP handling ---------- */

static void send_simple(struct evhttp_request *req, int status, const char *ctype, const sbuf *body)
{
    struct evbuffer *b = evbuffer_new();
    evbuffer_add(b, body->p ? body->p : "", body->len);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", ctype);
    evhttp_send_reply(req, status, NULL, b);
    evbuffer_free(b);
}

static const char *method_name(enum evhttp_cmd_type t)
{
    switch (t) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_PATCH: return "PATCH";
    default: return "OTHER";
    }
}

/* Endpoint of the path after the spec; for responses/{id}[/input_items]
 * (EP_STORED) the id goes to id (up to idn - 1 bytes) and *items says which. */
static endpoint endpoint_parse(const char *rest, char *id, size_t idn, int *items)
{
    if (!strcmp(rest, "backend-api/wham/usage") || !strcmp(rest, "api/codex/usage"))
        return EP_USAGE;
    if (!strcmp(rest, "v1/messages")) /* Anthropic's paths: under /v1/ only, as api.anthropic.com */
        return EP_MESSAGES;
    if (!strcmp(rest, "v1/messages/count_tokens"))
        return EP_MESSAGES_COUNT;
    if (!strncmp(rest, "v1/", 3))
        rest += 3;
    else if (!strncmp(rest, "backend-api/codex/", 18)) /* a base URL shaped like ChatGPT's */
        rest += 18;
    if (!strcmp(rest, "responses"))
        return EP_RESPONSES;
    if (!strncmp(rest, "responses/", 10) && rest[10] && rest[10] != '/') {
        const char *p = rest + 10, *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (slash && strcmp(slash, "/input_items") != 0)
            return EP_UNKNOWN;
        snprintf(id, idn, "%.*s", (int)n, p);
        *items = slash != NULL;
        return EP_STORED;
    }
    if (!strcmp(rest, "chat/completions"))
        return EP_CHAT;
    if (!strcmp(rest, "models"))
        return EP_MODELS;
    return EP_UNKNOWN;
}

static const char *endpoint_name(endpoint ep)
{
    switch (ep) {
    case EP_RESPONSES: return "responses";
    case EP_CHAT: return "chat/completions";
    case EP_MODELS: return "models";
    case EP_USAGE: return "usage";
    case EP_STORED: return "responses_get";
    case EP_MESSAGES: return "messages";
    case EP_MESSAGES_COUNT: return "messages/count_tokens";
    default: return "unknown";
    }
}

/* ---------- OAuth token endpoint and JWT access tokens ---------- */

/* Refresh tokens are "rt_<name>_<generation>"; each is single-use. A token
 * starting with "rt_expired" is refused as expired. Issued access tokens
 * are unsigned JWTs with "exp"; id tokens carry the ChatGPT claims. */
static char **g_used_rt;
static size_t g_nused;

static int rt_used(const char *rt)
{
    for (size_t i = 0; i < g_nused; i++)
        if (!strcmp(g_used_rt[i], rt))
            return 1;
    return 0;
}

static void rt_mark_used(const char *rt)
{
    char **p = realloc(g_used_rt, (g_nused + 1) * sizeof *p);
    if (!p)
        abort();
    g_used_rt = p;
    g_used_rt[g_nused++] = xstrdup(rt);
}

static void b64url(sbuf *out, const char *p, size_t n)
{
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)p[i] << 16;
        if (i + 1 < n)
            v |= (unsigned char)p[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)p[i + 2];
        char c[4] = {al[(v >> 18) & 63], al[(v >> 12) & 63], al[(v >> 6) & 63], al[v & 63]};
        sbuf_append(out, c, i + 2 < n ? 4 : i + 1 < n ? 3 : 2);
    }
}

static void jwt_make(sbuf *out, const char *payload)
{
    b64url(out, "{\"alg\":\"none\",\"typ\":\"JWT\"}", 26);
    sbuf_puts(out, ".");
    b64url(out, payload, strlen(payload));
    sbuf_puts(out, ".mock");
}

/* A bearer the auth=1 scenarios accept: a JWT whose exp lies ahead and
 * whose payload does not say "mock_revoked". */
static int bearer_valid(const char *authz)
{
    if (!authz || strncmp(authz, "Bearer ", 7) != 0)
        return 0;
    const char *tok = authz + 7;
    jwt_claims c;
    if (jwt_claims_read(tok, &c) != 0 || c.exp <= (int64_t)time(NULL))
        return 0;
    return strstr(tok, "bW9ja19yZXZva2Vk") == NULL && strstr(tok, "1vY2tfcmV2b2tlZ") == NULL &&
           strstr(tok, "tb2NrX3Jldm9rZW") == NULL; /* "mock_revoked" at any base64 alignment */
}

typedef struct oauth_pending {
    struct evhttp_request *req;
    struct event *timer;
    rec *r;
    long ttl;
    int hostile;
    char *rt;
} oauth_pending;

/* The client left while the endpoint was slow: a real server that never
 * answered never rotated the token either. */
static int oauth_client_gone(struct evhttp_request *req)
{
    struct evhttp_connection *c = evhttp_request_get_connection(req);
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    char ch;
    return fd >= 0 && recv(fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* The token endpoint's 200 for login <name>: a JWT access token (exp =
 * now + ttl, generation gen), an id token (<name>@example.com, plan pro,
 * account acct-<name>; hostile: with control characters) and the refresh
 * token rt_<name>_<gen>. */
static void oauth_issue(sbuf *out, const char *name, long next_gen, long ttl, int hostile)
{
    char payload[512];
    snprintf(payload, sizeof payload,
             "{\"exp\":%lld,\"sub\":\"%s\",\"gen\":%ld,\"https://api.openai.com/auth\":{\"chatgpt_account_id\":"
             "\"acct-%s\"}}", (long long)time(NULL) + ttl, name, next_gen, name);
    sbuf_puts(out, "{\"access_token\":\"");
    jwt_make(out, payload);
    if (hostile) /* the claims a hostile token endpoint could put in a refreshed login */
        snprintf(payload, sizeof payload,
                 "{\"email\":\"%s@example.com\\u001b[2J\",\"aud\":[\"app_EMoamEEZ73f0CkXaXp7hrann\"],"
                 "\"https://api.openai.com/auth\":{\"chatgpt_account_id\":\"acct-%s\\r\\nX-Injected: 1\","
                 "\"chatgpt_plan_type\":\"pro\\nREQUEST_FINAL forged\"}}",
                 name, name);
    else
        snprintf(payload, sizeof payload,
                 "{\"email\":\"%s@example.com\",\"aud\":[\"app_EMoamEEZ73f0CkXaXp7hrann\"],"
                 "\"https://api.openai.com/auth\":{\"chatgpt_account_id\":\"acct-%s\",\"chatgpt_plan_type\":\"pro\"}}",
                 name, name);
    sbuf_puts(out, "\",\"id_token\":\"");
    jwt_make(out, payload);
    sbuf_printf(out, "\",\"refresh_token\":\"rt_%s_%ld\",\"expires_in\":%ld,\"token_type\":\"Bearer\"}",
                name, next_gen, ttl);
}

static void oauth_reply(struct evhttp_request *req, rec *r, const char *rt, long ttl, int hostile)
{
    sbuf out = SBUF_INIT;
    int status = 200;
    const char *u = strrchr(rt, '_');
    if (r->grant_type && strcmp(r->grant_type, "refresh_token") != 0) {
        status = 400;
        sbuf_puts(&out, "{\"error\":\"unsupported_grant_type\"}");
    } else if (!strncmp(rt, "rt_expired", 10)) {
        status = 401;
        sbuf_puts(&out, "{\"error\":{\"message\":\"Your refresh token has expired.\","
                        "\"type\":\"invalid_request_error\",\"code\":\"refresh_token_expired\"}}");
    } else if (rt_used(rt)) {
        status = 401;
        sbuf_puts(&out, "{\"error\":{\"message\":\"Your refresh token has already been used to generate a new access"
                        " token.\",\"type\":\"invalid_request_error\",\"code\":\"refresh_token_reused\"}}");
    } else if (strncmp(rt, "rt_", 3) != 0 || !u || u == rt + 2) {
        status = 401;
        sbuf_puts(&out, "{\"error\":{\"message\":\"Invalid refresh token.\",\"type\":\"invalid_request_error\","
                        "\"code\":\"refresh_token_invalidated\"}}");
    } else {
        rt_mark_used(rt);
        char name[96];
        snprintf(name, sizeof name, "%.*s", (int)(u - rt - 3), rt + 3);
        oauth_issue(&out, name, atol(u + 1) + 1, ttl, hostile);
    }
    r->completed = 1, r->t_end = mock_wall();
    send_simple(req, status, "application/json", &out);
    sbuf_free(&out);
}

static void oauth_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    oauth_pending *op = arg;
    if (oauth_client_gone(op->req)) {
        op->r->aborted = 1, op->r->t_end = mock_wall();
        evhttp_connection_free(evhttp_request_get_connection(op->req));
    } else {
        oauth_reply(op->req, op->r, op->rt, op->ttl, op->hostile);
    }
    event_free(op->timer);
    free(op->rt);
    free(op);
}

/* ---------- sign-in: authorize page, code exchange, device code ----------
 *
 * The authorization server of `switchyard account login` (docs in
 * tests/e2e/README.md, "Sign-in"). Specs: /oauth/<scenario>[,opt=val...]/
 * with scenario "ok" and the options user=NAME (whose login is issued,
 * default "user"), deny=1 (the user says no), approve_after=N (device: the
 * Nth poll finds the code approved; 0 or unset: never), expires=S (device:
 * the code expires S seconds after it was issued), interval=S (device: the
 * poll interval it asks for, default 1). Codes are single-use. */

typedef struct login_code {
    char code[40], name[96], challenge[64], redirect[512];
    int used;
} login_code;

typedef struct login_dev {
    char id[40], user_code[16], name[96];
    int approve_after, deny, polls;
    long expires;
    time_t issued;
    char verifier[96], challenge[64], redirect[512]; /* the code its approval hands out */
} login_dev;

typedef struct login_opts {
    char user[96];
    int deny, approve_after, bad;
    long expires, interval;
} login_opts;

static login_code *g_codes;
static size_t g_ncodes;
static login_dev *g_devs;
static size_t g_ndevs;
static long g_login_gen; /* refresh-token generations of new logins: apart per login */

static void login_opts_parse(login_opts *o, const char *spec)
{
    memset(o, 0, sizeof *o);
    snprintf(o->user, sizeof o->user, "user");
    o->interval = 1;
    char *dup = xstrdup(spec), *save = NULL;
    int first = 1;
    for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save), first = 0) {
        char *eq = strchr(tok, '=');
        const char *val = eq ? eq + 1 : "";
        if (eq)
            *eq = '\0';
        if (first)
            o->bad |= strcmp(tok, "ok") != 0;
        else if (!strcmp(tok, "user") && *val && strlen(val) < sizeof o->user && strspn(val,
                 "abcdefghijklmnopqrstuvwxyz0123456789_-") == strlen(val))
            snprintf(o->user, sizeof o->user, "%s", val);
        else if (!strcmp(tok, "deny"))
            o->deny = atoi(val);
        else if (!strcmp(tok, "approve_after"))
            o->approve_after = atoi(val);
        else if (!strcmp(tok, "expires"))
            o->expires = atol(val);
        else if (!strcmp(tok, "interval"))
            o->interval = atol(val);
        else
            o->bad = 1;
    }
    if (o->bad)
        fprintf(stderr, "mock_upstream: bad sign-in spec '%s'\n", spec);
    free(dup);
}

static void login_s256(const char *verifier, char *out, size_t n)
{
    uint8_t d[32];
    sha256(verifier, strlen(verifier), d);
    sbuf b = SBUF_INIT;
    b64url(&b, (const char *)d, sizeof d);
    snprintf(out, n, "%s", b.p);
    sbuf_free(&b);
}

static void login_err(struct evhttp_request *req, rec *r, int status, const char *code, const char *desc)
{
    sbuf out = SBUF_INIT;
    sbuf_printf(&out, "{\"error\":\"%s\",\"error_description\":\"%s\"}", code, desc);
    r->completed = 1, r->t_end = mock_wall();
    send_simple(req, status, "application/json", &out);
    sbuf_free(&out);
}

static rec *login_rec(struct evhttp_request *req, const char *spec, const char *ep_name, const char *name)
{
    rec *r = rec_new();
    r->scenario = xstrdup("ok");
    r->spec = xstrdup(spec);
    r->endpoint = xstrdup(ep_name);
    r->path = xstrdup(evhttp_request_get_uri(req));
    r->method = xstrdup(method_name(evhttp_request_get_command(req)));
    r->account = xstrdup(name);
    return r;
}

static login_code *login_code_new(const char *name, const char *challenge, const char *redirect)
{
    login_code *p = realloc(g_codes, (g_ncodes + 1) * sizeof *p);
    if (!p)
        abort();
    g_codes = p;
    login_code *c = &g_codes[g_ncodes++];
    memset(c, 0, sizeof *c);
    snprintf(c->code, sizeof c->code, "ac_%ld_%zu", g_counter, g_ncodes);
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->challenge, sizeof c->challenge, "%s", challenge);
    snprintf(c->redirect, sizeof c->redirect, "%s", redirect);
    return c;
}

/* GET /oauth/<spec>/authorize?...: checks every parameter Codex sends, then
 * redirects to redirect_uri with a code (deny=1: error=access_denied) and
 * the state. */
static void login_authorize(struct evhttp_request *req, const char *spec)
{
    login_opts o;
    login_opts_parse(&o, spec);
    rec *r = login_rec(req, spec, "oauth_authorize", o.user);
    struct evkeyvalq q;
    TAILQ_INIT(&q);
    const char *uri = evhttp_request_get_uri(req), *qs = strchr(uri, '?');
    if (o.bad || evhttp_request_get_command(req) != EVHTTP_REQ_GET || !qs || evhttp_parse_query_str(qs + 1, &q) != 0) {
        login_err(req, r, o.bad ? 500 : 400, o.bad ? "mock_config_error" : "invalid_request", "bad request");
        evhttp_clear_headers(&q);
        return;
    }
    const char *rt = evhttp_find_header(&q, "response_type"), *cid = evhttp_find_header(&q, "client_id");
    const char *ru = evhttp_find_header(&q, "redirect_uri"), *scope = evhttp_find_header(&q, "scope");
    const char *ch = evhttp_find_header(&q, "code_challenge"), *cm = evhttp_find_header(&q, "code_challenge_method");
    const char *st = evhttp_find_header(&q, "state"), *org = evhttp_find_header(&q, "id_token_add_organizations");
    const char *simple = evhttp_find_header(&q, "codex_cli_simplified_flow");
    r->client_id = xstrdup(cid);
    const char *bad = !rt || strcmp(rt, "code") ? "response_type"
                      : !cid || strcmp(cid, "app_EMoamEEZ73f0CkXaXp7hrann") ? "client_id"
                      : !ru || strncmp(ru, "http://localhost:", 17) || strlen(ru) >= 400 ||
                              strcmp(ru + strlen(ru) - 14, "/auth/callback") ? "redirect_uri"
                      : !scope || !strstr(scope, "openid") || !strstr(scope, "offline_access") ? "scope"
                      : !ch || strlen(ch) != 43 || strspn(ch, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                               "0123456789-_") != 43 ? "code_challenge"
                      : !cm || strcmp(cm, "S256") ? "code_challenge_method"
                      : !st || strlen(st) < 16 || strlen(st) > 200 ? "state"
                      : !org || strcmp(org, "true") ? "id_token_add_organizations"
                      : !simple || strcmp(simple, "true") ? "codex_cli_simplified_flow"
                                                           : NULL;
    if (bad) {
        login_err(req, r, 400, "invalid_request", bad);
        evhttp_clear_headers(&q);
        return;
    }
    char *est = evhttp_encode_uri(st);
    sbuf loc = SBUF_INIT;
    if (o.deny) {
        sbuf_printf(&loc, "%s?error=access_denied&error_description=The+user+denied+the+request&state=%s", ru, est);
    } else {
        login_code *c = login_code_new(o.user, ch, ru);
        sbuf_printf(&loc, "%s?code=%s&scope=openid+profile+email+offline_access&state=%s", ru, c->code, est);
    }
    free(est);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Location", loc.p);
    sbuf empty = SBUF_INIT;
    r->completed = 1, r->t_end = mock_wall();
    send_simple(req, 302, "text/plain", &empty);
    sbuf_free(&loc);
    evhttp_clear_headers(&q);
}

/* grant_type=authorization_code at /oauth/<spec>/token (a form body, as
 * Codex sends it): the code must be unused and have been issued for this
 * redirect_uri, and SHA-256 of code_verifier must be its challenge. */
static void login_code_exchange(struct evhttp_request *req, rec *r, const char *body, long ttl)
{
    struct evkeyvalq q;
    TAILQ_INIT(&q);
    char *dup = xstrdup(body);
    if (evhttp_parse_query_str(dup, &q) != 0) {
        free(dup);
        login_err(req, r, 400, "invalid_request", "the body is not a form");
        return;
    }
    free(dup);
    const char *code = evhttp_find_header(&q, "code"), *ru = evhttp_find_header(&q, "redirect_uri");
    const char *cid = evhttp_find_header(&q, "client_id"), *cv = evhttp_find_header(&q, "code_verifier");
    r->grant_type = xstrdup(evhttp_find_header(&q, "grant_type"));
    r->client_id = xstrdup(cid);
    login_code *c = NULL;
    for (size_t i = 0; code && i < g_ncodes; i++)
        if (!strcmp(g_codes[i].code, code))
            c = &g_codes[i];
    char want[64] = "";
    if (cv)
        login_s256(cv, want, sizeof want);
    if (c)
        r->account = xstrdup(c->name);
    if (!c || c->used)
        login_err(req, r, 400, "invalid_grant", c ? "the code was used" : "unknown code");
    else if (!cid || strcmp(cid, "app_EMoamEEZ73f0CkXaXp7hrann"))
        login_err(req, r, 400, "invalid_client", "client_id");
    else if (!ru || strcmp(ru, c->redirect))
        login_err(req, r, 400, "invalid_grant", "redirect_uri does not match");
    else if (!cv || strcmp(want, c->challenge))
        login_err(req, r, 400, "invalid_grant", "code_verifier does not match the challenge");
    else {
        c->used = 1;
        sbuf out = SBUF_INIT;
        oauth_issue(&out, c->name, 1000 * ++g_login_gen, ttl, 0);
        r->completed = 1, r->t_end = mock_wall();
        send_simple(req, 200, "application/json", &out);
        sbuf_free(&out);
    }
    evhttp_clear_headers(&q);
}

/* POST /oauth/<spec>/deviceauth/usercode {"client_id"}: a device code. */
static void login_device_code(struct evhttp_request *req, const char *spec, const char *body, size_t blen)
{
    login_opts o;
    login_opts_parse(&o, spec);
    rec *r = login_rec(req, spec, "oauth_device_code", o.user);
    json_value *doc = json_parse(body, blen, NULL, 0);
    const char *cid = doc ? json_get_str(doc, "client_id") : NULL;
    r->client_id = xstrdup(cid);
    if (o.bad)
        login_err(req, r, 500, "mock_config_error", "bad spec");
    else if (!cid || strcmp(cid, "app_EMoamEEZ73f0CkXaXp7hrann"))
        login_err(req, r, 400, "invalid_client", "client_id");
    else {
        login_dev *p = realloc(g_devs, (g_ndevs + 1) * sizeof *p);
        if (!p)
            abort();
        g_devs = p;
        login_dev *d = &g_devs[g_ndevs++];
        memset(d, 0, sizeof *d);
        snprintf(d->id, sizeof d->id, "deviceauth_%zu", g_ndevs);
        snprintf(d->user_code, sizeof d->user_code, "MOCK-%04zu", g_ndevs);
        snprintf(d->name, sizeof d->name, "%s", o.user);
        d->approve_after = o.approve_after;
        d->deny = o.deny;
        d->expires = o.expires;
        d->issued = time(NULL);
        const char *host = evhttp_find_header(evhttp_request_get_input_headers(req), "Host");
        snprintf(d->redirect, sizeof d->redirect, "http://%s/deviceauth/callback", host ? host : "");
        snprintf(d->verifier, sizeof d->verifier, "mock-device-verifier-%zu-%ld-abcdefghijklmnopqrstuvwxyz", g_ndevs,
                 g_counter);
        login_s256(d->verifier, d->challenge, sizeof d->challenge);
        sbuf out = SBUF_INIT; /* the interval as a string, as the real server sends it */
        sbuf_printf(&out, "{\"device_auth_id\":\"%s\",\"user_code\":\"%s\",\"interval\":\"%ld\"}", d->id,
                    d->user_code, o.interval);
        r->completed = 1, r->t_end = mock_wall();
        send_simple(req, 200, "application/json", &out);
        sbuf_free(&out);
    }
    json_free(doc);
}

/* POST /oauth/<spec>/deviceauth/token {"device_auth_id","user_code"}:
 * pending 403 (as Codex expects), denied 400 access_denied, expired 400
 * expired_token (RFC 8628's words), approved 200 with the code and its PKCE
 * pair (the server holds the verifier in this flow). */
static void login_device_poll(struct evhttp_request *req, const char *spec, const char *body, size_t blen)
{
    json_value *doc = json_parse(body, blen, NULL, 0);
    const char *id = doc ? json_get_str(doc, "device_auth_id") : NULL;
    const char *uc = doc ? json_get_str(doc, "user_code") : NULL;
    login_dev *d = NULL;
    for (size_t i = 0; id && uc && i < g_ndevs; i++)
        if (!strcmp(g_devs[i].id, id) && !strcmp(g_devs[i].user_code, uc))
            d = &g_devs[i];
    rec *r = login_rec(req, spec, "oauth_device_poll", d ? d->name : NULL);
    if (!d) {
        login_err(req, r, 400, "invalid_request", "unknown device code");
    } else if (d->expires > 0 && time(NULL) >= d->issued + d->expires) {
        login_err(req, r, 400, "expired_token", "the device code expired");
    } else if (d->approve_after <= 0 || ++d->polls < d->approve_after) {
        login_err(req, r, 403, "authorization_pending", "pending");
    } else if (d->deny) {
        login_err(req, r, 400, "access_denied", "the user denied the request");
    } else {
        login_code *c = login_code_new(d->name, d->challenge, d->redirect);
        sbuf out = SBUF_INIT;
        sbuf_printf(&out, "{\"authorization_code\":\"%s\",\"code_challenge\":\"%s\",\"code_verifier\":\"%s\"}",
                    c->code, d->challenge, d->verifier);
        d->approve_after = 0; /* approved once: its code is handed out once */
        d->expires = 1, d->issued = 0;
        r->completed = 1, r->t_end = mock_wall();
        send_simple(req, 200, "application/json", &out);
        sbuf_free(&out);
    }
    json_free(doc);
}

/* POST /oauth/<spec>/token: spec "ok", "slow,ms=N" (answers after N ms,
 * rotating only if the client is still there), "down" (503), "reset"
 * (closes the connection); ttl=S sets the issued tokens' lifetime;
 * hostile_claims=1 issues an id_token whose claims carry control
 * characters (account id "acct-NAME\r\nX-Injected: 1", an ESC in the
 * e-mail, a newline in the plan). */
static void oauth_handle(struct evhttp_request *req, const char *spec)
{
    opts o;
    opts_parse(&o, spec);
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t blen = evbuffer_get_length(in);
    const char *body = blen ? (const char *)evbuffer_pullup(in, -1) : "";
    if (blen > 30 && !strncmp(body, "grant_type=authorization_code&", 30) && !strcmp(o.scenario, "ok") &&
        !memchr(body, 0, blen)) { /* a sign-in's code (login_code_exchange) */
        char *form = malloc(blen + 1); /* the pulled-up buffer has no NUL */
        if (!form)
            abort();
        memcpy(form, body, blen);
        form[blen] = '\0';
        rec *r = rec_new();
        r->scenario = xstrdup(o.scenario);
        r->spec = xstrdup(spec);
        r->endpoint = xstrdup("oauth_token");
        r->path = xstrdup(evhttp_request_get_uri(req));
        r->method = xstrdup(method_name(evhttp_request_get_command(req)));
        r->body_len = blen;
        login_code_exchange(req, r, form, o.ttl);
        free(form);
        return;
    }
    json_value *doc = json_parse(body, blen, NULL, 0);
    const char *rt = doc ? json_get_str(doc, "refresh_token") : NULL;
    rec *r = rec_new();
    r->scenario = xstrdup(o.scenario);
    r->spec = xstrdup(spec);
    r->endpoint = xstrdup("oauth_token");
    r->path = xstrdup(evhttp_request_get_uri(req));
    r->method = xstrdup(method_name(evhttp_request_get_command(req)));
    r->refresh_token = xstrdup(rt);
    r->client_id = xstrdup(doc ? json_get_str(doc, "client_id") : NULL);
    r->grant_type = xstrdup(doc ? json_get_str(doc, "grant_type") : NULL);
    const char *u = rt ? strrchr(rt, '_') : NULL;
    if (rt && u && !strncmp(rt, "rt_", 3) && u > rt + 3) {
        char name[96];
        snprintf(name, sizeof name, "%.*s", (int)(u - rt - 3), rt + 3);
        r->account = xstrdup(name);
    }
    r->body_len = blen;
    sbuf out = SBUF_INIT;
    if (!strcmp(o.scenario, "down")) {
        sbuf_puts(&out, "{\"error\":{\"message\":\"upstream connect error\",\"type\":\"server_error\",\"code\":null}}");
        r->completed = 1, r->t_end = mock_wall();
        send_simple(req, 503, "application/json", &out);
    } else if (!strcmp(o.scenario, "reset")) {
        r->completed = 1, r->t_end = mock_wall();
        evhttp_connection_free(evhttp_request_get_connection(req));
    } else if (!strcmp(o.scenario, "slow")) {
        oauth_pending *op = calloc(1, sizeof *op);
        if (!op)
            abort();
        op->req = req;
        op->r = r;
        op->ttl = o.ttl;
        op->hostile = o.hostile_claims;
        op->rt = xstrdup(rt ? rt : "");
        op->timer = evtimer_new(g_base, oauth_timer_cb, op);
        struct timeval tv = {(o.ms >= 0 ? o.ms : 2000) / 1000, ((o.ms >= 0 ? o.ms : 2000) % 1000) * 1000};
        evtimer_add(op->timer, &tv);
    } else {
        oauth_reply(req, r, rt ? rt : "", o.ttl, o.hostile_claims);
    }
    sbuf_free(&out);
    json_free(doc);
}

static void handle(struct evhttp_request *req, void *arg)
{
    (void)arg;
    const char *uri = evhttp_request_get_uri(req);
    size_t plen = strcspn(uri, "?");
    char *path = malloc(plen + 1);
    if (!path)
        abort();
    memcpy(path, uri, plen);
    path[plen] = '\0';
    sbuf out = SBUF_INIT;

    if (!strcmp(path, "/_requests") || !strcmp(path, "/_usage_polls")) {
        recs_json(&out, !strcmp(path, "/_usage_polls"));
        send_simple(req, 200, "application/json", &out);
        goto done;
    }
    if (!strncmp(path, "/_usage/", 8) && path[8]) {
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t blen = evbuffer_get_length(in);
        const char *q = strchr(uri, '?');
        const char *st = q ? strstr(q, "status=") : NULL;
        usage_set(path + 8, st ? atoi(st + 7) : 200, blen ? (const char *)evbuffer_pullup(in, -1) : "", blen);
        sbuf_puts(&out, "{\"ok\":true}\n");
        send_simple(req, 200, "application/json", &out);
        goto done;
    }
    if (!strcmp(path, "/_reset")) {
        usage_clear();
        rec_drop_bodies(g_nrecs);
        g_first_visible = g_nrecs;
        sbuf_puts(&out, "{\"ok\":true}\n");
        send_simple(req, 200, "application/json", &out);
        goto done;
    }
    if (!strcmp(path, "/_health")) {
        sbuf_puts(&out, "{\"ok\":true}\n");
        send_simple(req, 200, "application/json", &out);
        goto done;
    }

    if (!strncmp(path, "/oauth/", 7)) { /* the sign-in's endpoints (login_*) */
        static const struct {
            const char *suffix;
            int kind;
        } ends[] = {{"/authorize", 0}, {"/deviceauth/usercode", 1}, {"/deviceauth/token", 2}};
        for (size_t i = 0; i < sizeof ends / sizeof *ends; i++) {
            size_t sl = strlen(ends[i].suffix);
            if (plen > 7 + sl && plen - 7 - sl < 200 && !strcmp(path + plen - sl, ends[i].suffix)) {
                char spec_l[256];
                snprintf(spec_l, sizeof spec_l, "%.*s", (int)(plen - 7 - sl), path + 7);
                struct evbuffer *in = evhttp_request_get_input_buffer(req);
                size_t blen = evbuffer_get_length(in);
                const char *body = blen ? (const char *)evbuffer_pullup(in, -1) : "";
                if (ends[i].kind == 0)
                    login_authorize(req, spec_l);
                else if (ends[i].kind == 1)
                    login_device_code(req, spec_l, body, blen);
                else
                    login_device_poll(req, spec_l, body, blen);
                goto done;
            }
        }
    }
    if (!strncmp(path, "/oauth/", 7) && plen > 13 && !strcmp(path + plen - 6, "/token")) {
        char spec_o[256];
        snprintf(spec_o, sizeof spec_o, "%.*s", (int)(plen - 13), path + 7);
        oauth_handle(req, spec_o);
        goto done;
    }

    /* /acct/<name>/<spec>/<endpoint...> or /v1/<endpoint...> */
    char name[128] = "default", spec[256] = "ok";
    const char *rest = NULL;
    if (!strncmp(path, "/acct/", 6)) {
        const char *p = path + 6, *s1 = strchr(p, '/');
        const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
        if (s1 && s2 && s1 > p && (size_t)(s1 - p) < sizeof name && s2 > s1 + 1 &&
            (size_t)(s2 - s1 - 1) < sizeof spec) {
            memcpy(name, p, (size_t)(s1 - p));
            name[s1 - p] = '\0';
            memcpy(spec, s1 + 1, (size_t)(s2 - s1 - 1));
            spec[s2 - s1 - 1] = '\0';
            rest = s2 + 1;
        }
    } else if (!strncmp(path, "/v1/", 4)) {
        rest = path + 1;
    }
    if (!rest) {
        error_json(&out, "mock_upstream: no such path (want /acct/<name>/<scenario>/v1/<endpoint>)",
                   "invalid_request_error", "unknown_url", NULL);
        send_simple(req, 404, "application/json", &out);
        goto done;
    }

    opts o;
    opts_parse(&o, spec);
    char stored_id[192] = "";
    int input_items = 0;
    endpoint ep = endpoint_parse(rest, stored_id, sizeof stored_id, &input_items);
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    stored_op sop = ep != EP_STORED ? STORED_OTHER
                    : input_items   ? (cmd == EVHTTP_REQ_GET ? STORED_INPUT_ITEMS : STORED_OTHER)
                    : cmd == EVHTTP_REQ_GET    ? STORED_GET
                    : cmd == EVHTTP_REQ_DELETE ? STORED_DELETE
                                               : STORED_OTHER;
    if (o.ok_first > 0 && ep != EP_USAGE && ep != EP_STORED) {
        int seen = 0;
        for (size_t i = g_first_visible; i < g_nrecs; i++)
            seen += !g_recs[i]->usage && !g_recs[i]->side && !strcmp(g_recs[i]->account, name);
        if (seen < o.ok_first)
            snprintf(o.scenario, sizeof o.scenario, "ok");
    }
    if (o.times > 0 && ep != EP_USAGE && ep != EP_STORED) { /* a flaky upstream: after `times` requests it behaves */
        int seen = 0;
        for (size_t i = g_first_visible; i < g_nrecs; i++)
            seen += !g_recs[i]->usage && !g_recs[i]->side && !strcmp(g_recs[i]->account, name) &&
                    !strcmp(g_recs[i]->spec, spec);
        if (seen >= o.times) {
            snprintf(o.scenario, sizeof o.scenario, "ok");
            o.retry_after[0] = o.retry_after_ms[0] = '\0';
        }
    }

    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t blen = evbuffer_get_length(in);
    const char *body = blen ? (const char *)evbuffer_pullup(in, -1) : "";
    body_fields f = {0, SBUF_INIT, SBUF_INIT, 0, 0};
    body_fields_read(&f, body, blen);

    struct evkeyvalq *hin = evhttp_request_get_input_headers(req);
    rec *r = rec_new();
    r->account = xstrdup(name);
    r->scenario = xstrdup(o.scenario);
    r->spec = xstrdup(spec);
    static const char *const stored_ep[] = {"responses_get", "responses_delete", "responses_input_items",
                                             "responses_id"};
    r->endpoint = xstrdup(ep == EP_STORED ? stored_ep[sop] : endpoint_name(ep));
    r->path = xstrdup(uri);
    r->method = xstrdup(method_name(cmd));
    r->side = ep == EP_STORED;
    r->authorization = xstrdup(evhttp_find_header(hin, "Authorization"));
    r->x_api_key = header_joined(hin, "x-api-key");
    r->anthropic_version = header_joined(hin, "anthropic-version");
    r->anthropic_beta = header_joined(hin, "anthropic-beta");
    r->chatgpt_account_id = xstrdup(evhttp_find_header(hin, "ChatGPT-Account-Id"));
    r->headers = headers_json(hin);
    r->model = f.has_model ? xstrdup(f.model.p) : NULL;
    r->prev_id = f.has_prev_id ? xstrdup(f.prev_id.p) : NULL;
    r->stream = f.stream;
    r->usage = ep == EP_USAGE;
    r->body_len = blen;
    r->has_body_hash = blen > 0;
    r->body_hash = fnv1a(body, blen);
    r->prefill = prefill_find(body, blen, 0);
    r->continued = prefill_find(body, blen, 1);
    /* the style is the upstream's: a /v1/ path is the API, any other the
     * ChatGPT codex backend with its rules (RULES_CODEX) */
    int codex = strncmp(rest, "v1/", 3) != 0;
    /* anthropic=1: the account is api.anthropic.com, with the Messages API only */
    int anth = o.anthropic != 0, anth_ep = ep == EP_MESSAGES || ep == EP_MESSAGES_COUNT;
    r->style = ep == EP_USAGE ? NULL : anth ? "anthropic" : codex ? "codex" : "openai";
    reqinfo ri = {.store = 1};
    ri.rules = (anth ? RULES_ANTHROPIC | RULE_MESSAGES : (codex ? RULES_CODEX : 0u) | RULE_MESSAGES) & ~o.lax;
    if (ep == EP_RESPONSES && !anth)
        reqinfo_read(&ri, r, name, body, blen);
    /* an endpoint this upstream does not have: the ChatGPT backend's
     * FastAPI 404, or the API's for an unknown URL (speaks=); Anthropic's
     * 404 for anything but its own on an anthropic=1 account, and on any
     * other the mock's unknown path for messages (refused: anthropic) */
    refusal route = {0, SBUF_INIT, NULL}, rf = {0, SBUF_INIT, NULL};
    if (ep == EP_RESPONSES || ep == EP_CHAT || anth_ep)
        rec_keep_body(r, body, blen);
    if (ep == EP_STORED && !anth)
        r->violations = violations_of(ep, codex, NULL);
    if (anth && !anth_ep && ep != EP_MODELS && ep != EP_USAGE) {
        refuse_anthropic(&route, 404, "anthropic", "not_found_error", "Not found");
    } else if (!anth && anth_ep) {
        route.status = 404;
        route.rule = "anthropic";
        error_json(&route.body, "mock_upstream: unknown endpoint", "invalid_request_error", "unknown_url", NULL);
    } else if (codex && (ri.rules & RULE_ROUTES) && (ep == EP_STORED || ep == EP_CHAT)) {
        refuse_detail(&route, 404, "routes", "Not Found");
    } else if (!codex && ((!strcmp(o.speaks, "chat") && (ep == EP_RESPONSES || ep == EP_STORED)) ||
                          (!strcmp(o.speaks, "responses") && ep == EP_CHAT))) {
        sbuf msg = SBUF_INIT;
        sbuf_printf(&msg, "Invalid URL (%s /%s)", method_name(cmd), rest);
        refuse_openai(&route, 404, "speaks", msg.p, NULL, NULL);
        sbuf_free(&msg);
    }
    if (anth && (anth_ep || ep == EP_MODELS)) { /* the Messages API's checks (anth_check) */
        json_value *doc = anth_ep ? json_parse(body, blen, NULL, 0) : NULL;
        anth_req a = {r->x_api_key, r->anthropic_version, doc, ep == EP_MESSAGES_COUNT, ep == EP_MODELS};
        r->violations = anth_violations(&a);
        anth_check(&rf, ri.rules, &a);
        anth_read(&ri, r, doc);
        json_free(doc);
    } else if ((ep == EP_RESPONSES || ep == EP_CHAT) && !anth) {
        json_value *doc = json_parse(body, blen, NULL, 0);
        r->violations = violations_of(ep, codex, doc);
        if (ep == EP_RESPONSES && codex)
            codex_check(&rf, ri.rules, doc);
        else if (ep == EP_CHAT)
            chat_check(&rf, r, doc, (ri.rules & RULE_MESSAGES) != 0, &ri.after_tool);
        json_free(doc);
    }
    sbuf_free(&f.model);
    sbuf_free(&f.prev_id);

    job *j = calloc(1, sizeof *j);
    if (!j)
        abort();
    j->req = req;
    j->evcon = evhttp_request_get_connection(req);
    j->r = r;
    j->timer = evtimer_new(g_base, job_timer_cb, j);
    struct bufferevent *bev = evhttp_connection_get_bufferevent(j->evcon);
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    if (fd >= 0) {
        j->watch = event_new(g_base, fd, EV_READ | EV_PERSIST, job_watch_cb, j);
        event_add(j->watch, NULL);
    }
    evhttp_connection_set_closecb(j->evcon, job_close_cb, j);
    j->bare_sse = codex && (ri.rules & RULE_CONTENT_TYPE);
    if (o.turn_state[0])
        turn_state_issued(o.turn_state, name);
    if (route.status) {
        reply_json(j, 0, route.status, &route.body);
        r->refused = xstrdup(route.rule);
    } else if (ep != EP_USAGE && turn_state_foreign(evhttp_find_header(hin, "x-codex-turn-state"), name)) {
        error_json(&out, "mock_upstream: this x-codex-turn-state was issued by another account",
                   "invalid_request_error", "invalid_turn_state", NULL);
        reply_json(j, 0, 400, &out);
    } else if (ep == EP_USAGE)
        script_usage(j, name, &o, r);
    else if (ep == EP_STORED)
        script_stored(j, &o, r, sop, stored_id);
    else
        script_build(j, &o, ep, r, f.stream, &ri, &rf);
    reqinfo_free(&ri);
    sbuf_free(&route.body);
    sbuf_free(&rf.body);
    job_run(j);

done:
    sbuf_free(&out);
    free(path);
}

int main(int argc, char **argv)
{
    const char *host;
    int port;
    if (tool_server_args(argc, argv, "mock_upstream", &host, &port) != 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);
    secret_init();
    g_base = event_base_new();
    struct evhttp *http = evhttp_new(g_base);
    if (!g_base || !http) {
        fprintf(stderr, "mock_upstream: libevent init failed\n");
        return 1;
    }
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                         EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH |
                                         EVHTTP_REQ_OPTIONS | EVHTTP_REQ_HEAD);
    evhttp_set_timeout(http, 600);
    /* no text/html default: every answer names its type, except the codex
     * style's event streams, which must go out with none (start_sse) */
    evhttp_set_default_content_type(http, NULL);
    evhttp_set_gencb(http, handle, NULL);
    struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(http, host, (ev_uint16_t)port);
    if (!bs) {
        fprintf(stderr, "mock_upstream: cannot listen on %s:%d: %s\n", host, port, strerror(errno));
        return 1;
    }
    tool_server_announce(evhttp_bound_socket_get_fd(bs), port);
    tool_server_run(g_base);

    evhttp_free(http); /* runs the close callbacks of connections still open */
    for (size_t i = 0; i < g_nrecs; i++)
        rec_free(g_recs[i]);
    usage_clear();
    stored_free_all();
    free(g_recs);
    for (size_t i = 0; i < g_nused; i++)
        free(g_used_rt[i]);
    free(g_used_rt);
    event_base_free(g_base);
    return 0;
}
