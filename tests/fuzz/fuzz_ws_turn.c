/* fuzz_ws_turn.c: Responses WebSocket messages (ws_frame_request) on any
 * bytes, against a last response cut from the input, and the collector of
 * a turn's events (ws_collect_event). Input: message 0x1E last-input 0x1E
 * last-output 0x1E events separated by 0x1F. */
#include "fuzz_common.h"
#include "base/json.h"
#include "http/ws_turn.h"
#include <string.h>

static const char *piece(const char **p, const char *end, size_t *len)
{
    const char *s = *p;
    const char *e = memchr(s, 0x1E, (size_t)(end - s));
    if (!e)
        e = end;
    *len = (size_t)(e - s);
    *p = e < end ? e + 1 : end;
    return s;
}

/* The bytes with a NUL after them (strndup would stop at a NUL inside). */
static char *copy(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (!d)
        abort();
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    const char *p = (const char *)data, *end = p + n;
    size_t flen, ilen, olen, elen;
    const char *frame = piece(&p, end, &flen);
    const char *in = piece(&p, end, &ilen);
    const char *out = piece(&p, end, &olen);
    const char *events = piece(&p, end, &elen);
    char *ibuf = copy(in, ilen), *obuf = copy(out, olen);
    conv_link last;
    memset(&last, 0, sizeof last);
    last.response_id = "resp_last";
    last.input_json = ibuf;
    last.input_len = ilen;
    last.output_json = obuf;
    last.output_len = olen;

    ws_request r;
    sbuf msg = SBUF_INIT; /* ws_frame_request writes the request over the message */
    sbuf_append(&msg, frame, flen);
    ws_frame_kind k = ws_frame_request(&msg, &last, &r);
    FUZZ_CHECK(msg.p == NULL && msg.len == 0);
    FUZZ_CHECK(k >= WS_FRAME_CREATE && k <= WS_FRAME_BAD);
    if (k == WS_FRAME_CREATE || k == WS_FRAME_WARMUP) {
        /* what is sent is one JSON object, streamed, without the message's own members */
        json_value *d = json_parse(r.body.p, r.body.len, NULL, 0);
        FUZZ_CHECK(d && d->type == JSON_OBJECT);
        FUZZ_CHECK(json_get(d, "stream") && json_get(d, "stream")->type == JSON_TRUE);
        FUZZ_CHECK(!json_get(d, "type") && !json_get(d, "generate") && !json_get(d, "client_metadata"));
        if (r.chained)
            FUZZ_CHECK(!json_get(d, "previous_response_id"));
        json_free(d);
        FUZZ_CHECK(r.n_headers <= WS_TURN_MAX_HEADERS);
        for (size_t i = 0; i < r.n_headers; i++) {
            const char *v = r.headers[i].value;
            FUZZ_CHECK(*v && strlen(v) <= WS_TURN_HEADER_MAX && !strpbrk(v, "\r\n"));
        }
        FUZZ_CHECK(strlen(r.model) < sizeof r.model);
    } else if (k == WS_FRAME_BAD) {
        FUZZ_CHECK(r.error_status == 400 && r.error_code && *r.error_code && r.error_message[0]);
        FUZZ_CHECK(r.body.len == 0);
    }
    ws_request_free(&r);

    ws_collect c;
    ws_collect_init(&c, 1 << 16);
    const char *e = events, *eend = events + elen;
    while (e < eend) {
        const char *sep = memchr(e, 0x1F, (size_t)(eend - e));
        const char *stop = sep ? sep : eend;
        ws_collect_event(&c, e, (size_t)(stop - e));
        e = sep ? sep + 1 : eend;
    }
    if (c.completed) {
        json_value *o = json_parse(c.output.p, c.output.len, NULL, 0);
        FUZZ_CHECK(o && o->type == JSON_ARRAY);
        json_free(o);
        FUZZ_CHECK(c.response_id[0] && c.terminal);
    }
    FUZZ_CHECK(c.items.len <= (1 << 16) + 2);
    ws_collect_free(&c);
    free(ibuf);
    free(obuf);
    return 0;
}
