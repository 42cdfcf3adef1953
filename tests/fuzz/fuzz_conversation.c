/* fuzz_conversation.c: the conversation record and rebuild
 * (upstream/conversation.c) on any bytes. The input is cut at 0x1E bytes
 * into request, response, request, response, ..., final request. Each pair
 * is recorded (conversation_record_input / _output); when all were, the
 * records make a chain and the final request is rebuilt from it; the raw
 * parts are also used directly as a chain's recorded arrays, under the
 * final part wrapped as a request's input. What must hold: a record is a
 * JSON array (input, output) with ids of 1 to 127 bytes; a failed call
 * leaves its buffer as it was; a rebuilt body is a JSON object without
 * previous_response_id whose input holds every item of the chain and the
 * request, in count, and whose other members are the request's, in order. */
#include "fuzz_common.h"
#include "base/json.h"
#include "upstream/conversation.h"
#include <string.h>

#define FUZZ_CONV_PARTS 9 /* four turns and the final request */

/* Items of a JSON array text (-1 when it is not one). */
static long fuzz_items(const char *p, size_t n)
{
    json_value *v = json_parse(p, n, NULL, 0);
    long c = v && v->type == JSON_ARRAY ? (long)v->count : -1;
    json_free(v);
    return c;
}

/* Items the request body's input adds: 1 for a string, the array's count,
 * 0 when absent; -1 when the body is no object. */
static long fuzz_request_items(const json_value *doc)
{
    if (!doc || doc->type != JSON_OBJECT)
        return -1;
    const json_value *in = json_get(doc, "input");
    return !in ? 0 : in->type == JSON_STRING ? 1 : (long)in->count;
}

/* The rebuilt body against the request it came from: every member but
 * input and previous_response_id kept in order, input holding want items. */
static void fuzz_check_rebuilt(const char *body, size_t len, const sbuf *out, size_t mark, long want)
{
    json_value *req = json_parse(body, len, NULL, 0);
    json_value *got = json_parse(out->p + mark, out->len - mark, NULL, 0);
    FUZZ_CHECK(req && req->type == JSON_OBJECT);
    FUZZ_CHECK(got && got->type == JSON_OBJECT);
    FUZZ_CHECK(!json_get(got, "previous_response_id"));
    const json_value *in = json_get(got, "input");
    FUZZ_CHECK(in && in->type == JSON_ARRAY);
    if (want >= 0)
        FUZZ_CHECK((long)in->count == want);
    const json_value *g = got->child;
    for (const json_value *r = req->child; r; r = r->next) {
        if (strcmp(r->key, "input") == 0 || strcmp(r->key, "previous_response_id") == 0)
            continue;
        while (g && strcmp(g->key, "input") == 0)
            g = g->next;
        FUZZ_CHECK(g && strcmp(g->key, r->key) == 0 && g->type == r->type);
        g = g->next;
    }
    while (g && strcmp(g->key, "input") == 0)
        g = g->next;
    FUZZ_CHECK(!g);
    json_free(req);
    json_free(got);
}

/* Rebuilds body over chain[0..m) and checks the result either way. */
static void fuzz_rebuild(const conv_link *chain, size_t m, const char *body, size_t len, long chain_items)
{
    sbuf out = SBUF_INIT;
    char err[256] = "";
    sbuf_puts(&out, "P");
    int rc = conversation_rebuild(chain, m, body, len, &out, err, sizeof err);
    if (rc == 0) {
        FUZZ_CHECK(chain_items >= 0); /* what the rebuild took for arrays, json_parse takes too */
        json_value *req = json_parse(body, len, NULL, 0);
        long own = fuzz_request_items(req);
        json_free(req);
        fuzz_check_rebuilt(body, len, &out, 1, chain_items >= 0 && own >= 0 ? chain_items + own : -1);
    } else {
        FUZZ_CHECK(out.len == 1 && strcmp(out.p, "P") == 0);
        FUZZ_CHECK(err[0]);
    }
    sbuf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    const char *p[FUZZ_CONV_PARTS];
    size_t len[FUZZ_CONV_PARTS], parts = 0, start = 0;
    for (size_t i = 0; i <= n && parts < FUZZ_CONV_PARTS; i++)
        if (i == n || data[i] == 0x1E) {
            p[parts] = (const char *)data + start;
            len[parts++] = i - start;
            start = i + 1;
        }
    size_t m = parts / 2; /* turns; the part after them is the final request */
    const char *final = parts % 2 ? p[parts - 1] : "{}";
    size_t final_len = parts % 2 ? len[parts - 1] : 2;

    /* the records, and a chain of them */
    sbuf in[FUZZ_CONV_PARTS / 2], out[FUZZ_CONV_PARTS / 2];
    char prev[FUZZ_CONV_PARTS / 2][CONVERSATION_ID_MAX], id[FUZZ_CONV_PARTS / 2][CONVERSATION_ID_MAX];
    conv_link chain[FUZZ_CONV_PARTS / 2];
    int all = 1;
    long items = 0;
    for (size_t i = 0; i < m; i++) {
        in[i] = (sbuf)SBUF_INIT;
        out[i] = (sbuf)SBUF_INIT;
        int store = -1;
        if (conversation_record_input(p[2 * i], len[2 * i], &in[i], prev[i], &store) == 0) {
            FUZZ_CHECK(store == 0 || store == 1);
            FUZZ_CHECK(strlen(prev[i]) < CONVERSATION_ID_MAX);
            long c = fuzz_items(in[i].p, in[i].len);
            FUZZ_CHECK(c >= 0);
            items += c;
        } else {
            FUZZ_CHECK(in[i].len == 0 && prev[i][0] == '\0');
            all = 0;
        }
        if (conversation_record_output(p[2 * i + 1], len[2 * i + 1], &out[i], id[i]) == 0) {
            FUZZ_CHECK(id[i][0] && strlen(id[i]) < CONVERSATION_ID_MAX);
            long c = fuzz_items(out[i].p, out[i].len);
            FUZZ_CHECK(c >= 0);
            items += c;
        } else {
            FUZZ_CHECK(out[i].len == 0 && id[i][0] == '\0');
            all = 0;
        }
        chain[i] = (conv_link){id[i], 1, prev[i][0] ? prev[i] : NULL, in[i].p, in[i].len, out[i].p, out[i].len, 0};
    }
    if (all && m)
        fuzz_rebuild(chain, m, final, final_len, items);

    /* the raw parts as recorded arrays, under the final part as the input */
    char ids[FUZZ_CONV_PARTS / 2][8];
    conv_link raw[FUZZ_CONV_PARTS / 2];
    long raw_items = 0;
    for (size_t i = 0; i < m; i++) {
        snprintf(ids[i], sizeof ids[i], "f%zu", i);
        raw[i] = (conv_link){ids[i], 1, i ? ids[i - 1] : NULL, (char *)p[2 * i], len[2 * i], (char *)p[2 * i + 1],
                             len[2 * i + 1], 0};
        long a = fuzz_items(p[2 * i], len[2 * i]), b = fuzz_items(p[2 * i + 1], len[2 * i + 1]);
        raw_items = raw_items < 0 || a < 0 || b < 0 ? -1 : raw_items + a + b;
    }
    if (m) {
        sbuf body = SBUF_INIT;
        sbuf_puts(&body, "{\"model\":\"m\",\"input\":");
        sbuf_append(&body, final, final_len);
        sbuf_printf(&body, ",\"previous_response_id\":\"f%zu\",\"x\":[1]}", m - 1);
        fuzz_rebuild(raw, m, body.p, body.len, raw_items);
        sbuf_free(&body);
    }
    for (size_t i = 0; i < m; i++) {
        sbuf_free(&in[i]);
        sbuf_free(&out[i]);
    }
    return 0;
}
