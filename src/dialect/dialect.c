/* dialect.c: the request side of the dialect wing's API (dialect.h): the
 * dialects' names, the facts of a request and the plan of an attempt
 * (passthrough, adapt, translate), and the upstream request body, through
 * a table of pairs.
 *
 * The table has one row per client × upstream dialect: the pair's name and
 * its request translator (none when both speak the same dialect: adapt.c
 * applies the upstream's rules to the client's own bytes). A new dialect
 * is a name in dialect_names and rows in dialect_pairs, never a branch
 * here. Only a translation parses the body into a tree (the translators
 * read it whole); what it writes is adapted as raw bytes like a client's
 * body: the rules are applied by one module to one shape, whether the body
 * came from the client or from a translator; the translators write nothing
 * but the translation (chat_request.c and messages_request.c fill
 * "instructions" from the system messages or prompt, and adapt only fills
 * them when they gave none). Every pair of the three dialects has a row; a
 * pair without one would be refused with a 400. */
#include "dialect/dialect.h"
#include "dialect/adapt.h"
#include "dialect/chat_request.h"
#include "dialect/messages_request.h"
#include "dialect/responses_request.h"
#include "dialect/to_messages_request.h"
#include <string.h>

static const char *const dialect_names[] = {
    [API_CHAT] = "chat",
    [API_RESPONSES] = "responses",
    [API_MESSAGES] = "messages",
};
#define DIALECT_COUNT (sizeof dialect_names / sizeof dialect_names[0])

/* A translator: doc in the client's dialect appended to out in the
 * upstream's; -1 with err for a field it cannot carry (rules: the ignore
 * list that lets such a field be left out). */
typedef int (*dialect_request_fn)(const json_value *doc, const policy_dialect *rules, sbuf *out, dialect_error *err);

static const struct dialect_pair {
    api_kind client, upstream;
    const char *name;           /* "client>upstream"; "" for the same dialect */
    dialect_request_fn request; /* NULL: the same dialect, adapted only */
} dialect_pairs[] = {
    {API_CHAT, API_CHAT, "", NULL},
    {API_CHAT, API_RESPONSES, "chat>responses", chat_request_to_responses},
    {API_RESPONSES, API_CHAT, "responses>chat", responses_request_to_chat},
    {API_RESPONSES, API_RESPONSES, "", NULL},
    {API_MESSAGES, API_RESPONSES, "messages>responses", messages_request_to_responses},
    {API_MESSAGES, API_CHAT, "messages>chat", messages_request_to_chat},
    {API_MESSAGES, API_MESSAGES, "", NULL},
    {API_CHAT, API_MESSAGES, "chat>messages", to_messages_request_chat},
    {API_RESPONSES, API_MESSAGES, "responses>messages", to_messages_request_responses},
};

static const struct dialect_pair *dialect_pair_find(api_kind client, api_kind upstream)
{
    for (size_t i = 0; i < sizeof dialect_pairs / sizeof dialect_pairs[0]; i++)
        if (dialect_pairs[i].client == client && dialect_pairs[i].upstream == upstream)
            return &dialect_pairs[i];
    return NULL;
}

const char *dialect_name(api_kind api)
{
    return (unsigned)api < DIALECT_COUNT && dialect_names[api] ? dialect_names[api] : "unknown";
}

int dialect_parse(const char *s, api_kind *out)
{
    for (size_t i = 0; s && i < DIALECT_COUNT; i++)
        if (dialect_names[i] && strcmp(dialect_names[i], s) == 0) {
            *out = (api_kind)i;
            return 0;
        }
    return -1;
}

const char *dialect_pair_name(api_kind client, api_kind upstream)
{
    const struct dialect_pair *p = dialect_pair_find(client, upstream);
    return p ? p->name : "";
}

/* A top-level name's signature in the facts: its length and its first and
 * last eight bytes, mixed. Names that differ only in their middle share
 * one; that only makes the plan say ADAPT for a body adapt leaves as it
 * is, never the reverse. Cheaper than hashing every byte: the facts are
 * read for every request, passthrough included. */
static uint32_t dialect_name_sig(const char *s, size_t n)
{
    uint64_t head = 0, tail = 0;
    size_t k = n < 8 ? n : 8;
    memcpy(&head, s, k);
    memcpy(&tail, s + n - k, k);
    uint64_t h = (n + 1) * 0x9E3779B97F4A7C15ull;
    h ^= head * 0xff51afd7ed558ccdull;
    h = (h ^ (h >> 31)) + tail * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return (uint32_t)(h ^ (h >> 32));
}

void dialect_facts_read(dialect_req_facts *f, const json_value *doc)
{
    memset(f, 0, sizeof *f);
    if (!doc || doc->type != JSON_OBJECT)
        return;
    const json_value *stream = NULL, *store = NULL, *ins = NULL, *input = NULL;
    unsigned seen = 0;
    for (const json_value *m = doc->child; m; m = m->next) {
        const char *k = m->key ? m->key : "";
        size_t n = strlen(k);
        if (n >= POLICY_DIALECT_NAME_MAX) /* longer than any name a rule holds */
            continue;
        if (f->n_names < DIALECT_FACT_NAMES)
            f->names[f->n_names] = dialect_name_sig(k, n);
        f->n_names++;
        unsigned bit = 0;
        if (k[0] == 's' && strcmp(k, "stream") == 0)
            bit = DIALECT_FACT_STREAM, stream = m;
        else if (k[0] == 's' && strcmp(k, "store") == 0)
            bit = DIALECT_FACT_STORE, store = m;
        else if (k[0] == 'i' && strcmp(k, "instructions") == 0)
            bit = DIALECT_FACT_INSTRUCTIONS, ins = m;
        else if (k[0] == 'i' && strcmp(k, "input") == 0)
            bit = DIALECT_FACT_INPUT, input = m;
        f->repeated |= seen & bit;
        seen |= bit;
    }
    f->exact = 1;
    f->stream = stream && stream->type == JSON_TRUE;
    f->has_instructions = ins && ins->type == JSON_STRING && ins->str_len > 0;
    f->store_absent = !store || store->type == JSON_NULL;
    f->store_true = store && store->type == JSON_TRUE;
    f->store_false = store && store->type == JSON_FALSE;
    f->input = !input                         ? DIALECT_INPUT_NONE
               : input->type == JSON_STRING   ? DIALECT_INPUT_STRING
               : input->type != JSON_ARRAY    ? DIALECT_INPUT_OTHER
               : input->count                 ? DIALECT_INPUT_ITEMS
                                              : DIALECT_INPUT_EMPTY;
}

/* 0 when the facts say the body has no top-level member named name. */
static int dialect_may_hold(const dialect_req_facts *f, const char *name)
{
    if (f->n_names > DIALECT_FACT_NAMES)
        return 1;
    uint32_t sig = dialect_name_sig(name, strlen(name));
    for (size_t i = 0; i < f->n_names; i++)
        if (f->names[i] == sig)
            return 1;
    return 0;
}

/* The plan from exact facts: ADAPT for each thing adapt.c would change
 * (a copy of an owned name beyond the last, an owned value not as the
 * rule wants it, a member the rule appends, a dropped or renamed name
 * present), NONE when there is none. */
static dialect_step dialect_plan_exact(api_kind upstream, const policy_dialect *r, const dialect_req_facts *f)
{
    if (r->stream && (!f->stream || (f->repeated & DIALECT_FACT_STREAM)))
        return DIALECT_ADAPT; /* (a chat body's stream_options are added only then) */
    size_t nd = r->n_drop < POLICY_DIALECT_NAMES ? r->n_drop : POLICY_DIALECT_NAMES;
    for (size_t i = 0; i < nd; i++) { /* a row matches as refuse_listed matches it */
        const char *name = r->drop[i];
        if (memchr(name, '\0', POLICY_DIALECT_NAME_MAX) && !adapt_owns(upstream, r, name) && dialect_may_hold(f, name))
            return DIALECT_ADAPT;
    }
    size_t nr = r->n_rename < POLICY_DIALECT_NAMES ? r->n_rename : POLICY_DIALECT_NAMES;
    for (size_t i = 0; i < nr; i++) { /* renamed, or left out when its new name is taken */
        const char *from = r->rename_from[i], *to = r->rename_to[i];
        if (from[0] && memchr(from, '\0', POLICY_DIALECT_NAME_MAX) && to[0] &&
            memchr(to, '\0', POLICY_DIALECT_NAME_MAX) && !adapt_owns(upstream, r, from) && dialect_may_hold(f, from))
            return DIALECT_ADAPT;
    }
    if (upstream != API_RESPONSES)
        return DIALECT_NONE;
    if (r->store_off && (!f->store_false || (f->repeated & DIALECT_FACT_STORE)))
        return DIALECT_ADAPT;
    if (r->has_instructions && (!f->has_instructions || (f->repeated & DIALECT_FACT_INSTRUCTIONS)))
        return DIALECT_ADAPT; /* (the only case in which leading messages move) */
    if (adapt_owns(upstream, r, "input")) {
        if (f->repeated & DIALECT_FACT_INPUT)
            return DIALECT_ADAPT;
        if (r->input_list && f->input == DIALECT_INPUT_STRING)
            return DIALECT_ADAPT;
        int role = r->system_role[0] && memchr(r->system_role, '\0', sizeof r->system_role);
        if ((r->strip_item_ids || role) && f->input == DIALECT_INPUT_ITEMS)
            return DIALECT_ADAPT; /* the items decide: not looked at here */
    }
    return DIALECT_NONE;
}

dialect_step dialect_plan(api_kind client, api_kind upstream, const policy_dialect *rules, const dialect_req_facts *f)
{
    if (client != upstream)
        return DIALECT_TRANSLATE;
    if (!adapt_has_work(upstream, rules))
        return DIALECT_NONE;
    if (!f)
        return DIALECT_ADAPT;
    if (f->exact)
        return dialect_plan_exact(upstream, rules, f);
    /* drop and rename name fields the facts do not cover, and the input
     * rules look inside items: when they are set, the body may change */
    if (rules->n_drop || rules->n_rename)
        return DIALECT_ADAPT;
    if (rules->stream && !f->stream)
        return DIALECT_ADAPT;
    if (upstream != API_RESPONSES)
        return DIALECT_NONE;
    if (rules->input_list || rules->system_role[0] || rules->strip_item_ids)
        return DIALECT_ADAPT;
    if (rules->store_off && (f->store_absent || f->store_true))
        return DIALECT_ADAPT;
    if (rules->has_instructions && !f->has_instructions)
        return DIALECT_ADAPT;
    return DIALECT_NONE;
}

int dialect_request(api_kind client, api_kind upstream, const policy_dialect *rules, const char *body, size_t len,
                    sbuf *out, int *up_stream, dialect_error *err)
{
    dialect_error spare;
    if (!err)
        err = &spare;
    memset(err, 0, sizeof *err);
    sbuf_reset(out);
    int streams = 0, rc;
    const struct dialect_pair *p = dialect_pair_find(client, upstream);
    if (!p) {
        refuse_param(err, "%s", "");
        rc = refuse_set(err, REFUSE_UNSUPPORTED, "No translation from the %s API to the %s API.", dialect_name(client),
                        dialect_name(upstream));
    } else if (!p->request) {
        rc = adapt_body(upstream, rules, body, len, out, &streams, err);
    } else {
        json_value *doc = body ? json_parse(body, len, NULL, 0) : NULL;
        if (!doc) {
            refuse_param(err, "%s", "");
            rc = refuse_set(err, REFUSE_INVALID_VALUE, "The request body is not valid JSON.");
        } else if (!adapt_has_work(upstream, rules)) {
            rc = p->request(doc, rules, out, err);
            const json_value *s = rc == 0 ? json_get(doc, "stream") : NULL;
            streams = s && s->type == JSON_TRUE; /* every translator carries "stream" as it came */
        } else {
            sbuf mid = SBUF_INIT;
            rc = p->request(doc, rules, &mid, err);
            /* the translators write JSON within the parser's depth
             * (responses_request.c checks the one place that nests
             * deeper), and adapt validates what it walks, so this fails
             * only if one breaks that promise: a 400 then, never a body
             * the upstream chokes on */
            if (rc == 0 && adapt_body(upstream, rules, mid.p, mid.len, out, &streams, err) != 0) {
                refuse_param(err, "%s", "");
                rc = refuse_set(err, REFUSE_INVALID_VALUE, "The request could not be translated for the %s API.",
                                dialect_name(upstream));
            }
            sbuf_free(&mid);
        }
        json_free(doc);
    }
    if (rc != 0) {
        sbuf_reset(out);
        if (!err->status) /* every refusal sets one; a 400 in any case */
            err->status = 400;
        return -1;
    }
    if (up_stream)
        *up_stream = streams;
    return 0;
}
