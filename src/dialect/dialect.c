/* dialect.c: the request side of the dialect wing's API (dialect.h): the
 * dialects' names, the plan of an attempt (passthrough, adapt, translate)
 * and the upstream request body, through a table of pairs.
 *
 * The table has one row per client × upstream dialect: the pair's name and
 * its request translator (none when both speak the same dialect: adapt.c
 * applies the upstream's rules to the client's own body). A new dialect is
 * a name in dialect_names and rows in dialect_pairs, never a branch here.
 * A translated body is read back (json_parse) and adapted: the rules are
 * applied by one module to one shape, whether the body came from the
 * client or from a translator; the translators write nothing but the
 * translation (chat_request.c fills "instructions" from the system
 * messages, and adapt only fills the default when they gave none). */
#include "dialect/dialect.h"
#include "dialect/adapt.h"
#include "dialect/chat_request.h"
#include "dialect/responses_request.h"
#include <string.h>

static const char *const dialect_names[] = {
    [API_CHAT] = "chat",
    [API_RESPONSES] = "responses",
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

dialect_step dialect_plan(api_kind client, api_kind upstream, const policy_dialect *rules, const dialect_req_facts *f)
{
    if (client != upstream)
        return DIALECT_TRANSLATE;
    if (!adapt_has_work(upstream, rules))
        return DIALECT_NONE;
    if (!f)
        return DIALECT_ADAPT;
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

int dialect_request(api_kind client, api_kind upstream, const policy_dialect *rules, const json_value *doc,
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
        rc = adapt_body(upstream, rules, doc, out, &streams, err);
    } else if (!adapt_has_work(upstream, rules)) {
        rc = p->request(doc, rules, out, err);
        const json_value *s = rc == 0 ? json_get(doc, "stream") : NULL;
        streams = s && s->type == JSON_TRUE; /* both translators carry "stream" as it came */
    } else {
        sbuf mid = SBUF_INIT;
        rc = p->request(doc, rules, &mid, err);
        if (rc == 0) {
            /* the translators write JSON within the parser's depth
             * (responses_request.c checks the one place that nests
             * deeper), so this parse fails only if one breaks that
             * promise: a 400 then, never a body the upstream chokes on */
            json_value *t = json_parse(mid.p, mid.len, NULL, 0);
            if (t) {
                rc = adapt_body(upstream, rules, t, out, &streams, err);
            } else {
                refuse_param(err, "%s", "");
                rc = refuse_set(err, REFUSE_INVALID_VALUE, "The request could not be translated for the %s API.",
                                dialect_name(upstream));
            }
            json_free(t);
        }
        sbuf_free(&mid);
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
