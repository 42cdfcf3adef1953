/* body_decode.c: Content-Encoding of request bodies undone under a limit on
 * the decoded size (see body_decode.h). zstd through libzstd's streaming
 * decoder, gzip and deflate through zlib's inflate; each writes into the
 * output a piece at a time and never past one byte beyond the limit, so
 * the work and memory of a decompression bomb are those of the limit.
 * The decoder keeps its streams' state between calls (body_decoder_run),
 * so the server can decode a slice per loop turn rather than a whole body
 * at once (http/server.c says why slices on the loop, not a thread);
 * body_decode is the same run to its end. */
#include "http/body_decode.h"
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#define BODY_PIECE (64u << 10)   /* output written per decoder call at most */
#define BODY_FIRST (16u << 10)   /* the output's first allocation (a hint may raise it) */

/* zstd: a frame says how large a window (history) it needs, and the
 * decoder allocates it up front. Frames from every level up to 19 with an
 * unknown size (what a streaming compressor writes) need at most 8 MiB
 * (windowLog 23); a larger limit allows a window of its size, up to
 * libzstd's own default ceiling of 128 MiB (27). A body asking for more is
 * refused rather than met with an allocation of that size. */
#define BODY_ZSTD_WINDOW_LOG_MIN 23
#define BODY_ZSTD_WINDOW_LOG_MAX 27

const char *body_decode_name(body_coding coding)
{
    switch (coding) {
    case BODY_GZIP:
        return "gzip";
    case BODY_DEFLATE:
        return "deflate";
    case BODY_ZSTD:
        return "zstd";
    }
    return "?";
}

/* ---------- the header ---------- */

static int body_is_ows(char ch) { return ch == ' ' || ch == '\t'; }

/* Copies the token t[0..n) into out for a message, printable ASCII only, cut short. */
static void body_token_shown(const char *t, size_t n, char *out, size_t outlen)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < outlen; i++)
        out[k++] = t[i] > ' ' && t[i] < 0x7f && t[i] != '\'' ? t[i] : '?';
    if (n && k < n && k + 3 < outlen) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
}

body_decode_rc body_decode_codings(const char *value, body_codings *c, char *why, size_t whylen)
{
    static const struct {
        const char *name;
        int coding; /* 0: identity */
    } known[] = {{"zstd", BODY_ZSTD}, {"gzip", BODY_GZIP},         {"x-gzip", BODY_GZIP},
                 {"deflate", BODY_DEFLATE}, {"identity", 0}};
    const char *p = value ? value : "";
    for (;;) {
        while (body_is_ows(*p) || *p == ',')
            p++;
        if (!*p)
            return BODY_DECODE_OK;
        const char *t = p;
        while (*p && *p != ',' && !body_is_ows(*p))
            p++;
        size_t n = (size_t)(p - t);
        while (body_is_ows(*p))
            p++;
        char shown[40];
        if (*p && *p != ',') { /* "gzip;q=1", "gzip zstd": a coding has no parameters */
            body_token_shown(t, strcspn(t, ","), shown, sizeof shown);
            sbuf_fmt_into(why, whylen,
                          "unsupported Content-Encoding '%s': a coding is a single name (zstd, gzip, deflate, "
                          "identity), several are separated by commas",
                          shown);
            return BODY_DECODE_UNSUPPORTED;
        }
        int coding = -1;
        for (size_t i = 0; i < sizeof known / sizeof *known && coding < 0; i++)
            if (strlen(known[i].name) == n && strncasecmp(t, known[i].name, n) == 0)
                coding = known[i].coding;
        if (coding < 0) {
            body_token_shown(t, n, shown, sizeof shown);
            sbuf_fmt_into(why, whylen,
                          "unsupported Content-Encoding '%s': this gateway decodes request bodies in zstd, gzip, "
                          "deflate or identity",
                          shown);
            return BODY_DECODE_UNSUPPORTED;
        }
        if (!coding)
            continue;
        if (c->n >= BODY_MAX_CODINGS) {
            sbuf_fmt_into(why, whylen, "unsupported Content-Encoding: more than %d codings applied one over another",
                          BODY_MAX_CODINGS);
            return BODY_DECODE_UNSUPPORTED;
        }
        c->c[c->n++] = (body_coding)coding;
    }
}

/* ---------- the output ---------- */

/* Makes room for the next piece of output and returns its size (at least
 * 1): up to BODY_PIECE, what the allocation still has if it has any, never
 * past limit + 1 bytes in all (the one byte that tells "over the limit").
 * Capacity grows by doubling but never past limit + 2 (those bytes and the
 * NUL). Requires out->len <= limit. */
static size_t body_room(sbuf *out, size_t limit)
{
    size_t room = limit + 1 - out->len;
    if (room > BODY_PIECE)
        room = BODY_PIECE;
    size_t left = out->cap ? out->cap - out->len - 1 : 0;
    if (left)
        return room < left ? room : left;
    size_t cap = out->cap ? out->cap * 2 : BODY_FIRST;
    if (cap < out->len + room + 1)
        cap = out->len + room + 1;
    if (cap > limit + 2)
        cap = limit + 2;
    char *p = realloc(out->p, cap);
    if (!p)
        abort(); /* as sbuf: no useful work without memory */
    out->p = p;
    out->cap = cap;
    return room;
}

/* An allocation of hint + 1 bytes up front when the data says how large it
 * decodes (a zstd frame's content size, a gzip trailer): untrusted, so
 * never past the limit, and any slack is given back at the end. */
static void body_presize(sbuf *out, uint64_t hint, size_t limit)
{
    if (hint > limit)
        hint = limit;
    if (out->cap || hint + 1 <= BODY_FIRST)
        return;
    out->p = malloc((size_t)hint + 1);
    if (!out->p)
        abort();
    out->p[0] = '\0';
    out->cap = (size_t)hint + 1;
}

/* Gives back slack beyond an eighth of the body (a request holds its body
 * until it ends); realloc shrinking in place is cheap. */
static void body_trim(sbuf *out)
{
    if (out->cap - (out->len + 1) <= (out->len >> 3) + 4096)
        return;
    char *p = realloc(out->p, out->len + 1);
    if (p) {
        out->p = p;
        out->cap = out->len + 1;
    }
}

static body_decode_rc body_too_large(const char *name, size_t limit, char *why, size_t whylen)
{
    sbuf_fmt_into(why, whylen, "the %s-encoded request body decodes to more than %zu bytes, the limit", name, limit);
    return BODY_DECODE_TOO_LARGE;
}

/* ---------- zstd ---------- */

static int body_zstd_window_log(size_t limit)
{
    int log = BODY_ZSTD_WINDOW_LOG_MIN;
    while (log < BODY_ZSTD_WINDOW_LOG_MAX && ((size_t)1 << log) < limit)
        log++;
    return log;
}

/* ---------- the decoder, a slice at a time ---------- */

struct body_decoder {
    body_codings c;
    const char *in;
    size_t len;
    size_t limit;
    int i;                 /* the coding being undone (c.n - 1 down to 0) */
    int started;           /* its decoder is set up */
    int done;
    body_decode_rc rc;
    const char *src;       /* its input: the body, or the previous stage's output */
    size_t srclen;
    sbuf stage[2];         /* the outputs of stages before the last */
    sbuf out;
    /* zstd */
    ZSTD_DCtx *zd;
    ZSTD_inBuffer ib;
    size_t zlast;          /* ZSTD_decompressStream's answer: 0 when a frame has just ended */
    int stuck;
    /* gzip and deflate */
    z_stream z;
    int z_on;
    int window_bits;       /* 31 gzip, 15 zlib, -15 raw */
    const char *zname;
    size_t fed;
    int raw_next;          /* deflate with a zlib head: raw deflate is tried when zlib fails */
    int zlib_failed;       /* it was, and as_zlib says why */
    char as_zlib[256];
};

static sbuf *body_dst(body_decoder *d) { return d->i == 0 ? &d->out : &d->stage[d->i & 1]; }

static void body_zlib_end(body_decoder *d)
{
    if (d->z_on)
        inflateEnd(&d->z);
    d->z_on = 0;
}

static void body_zlib_start(body_decoder *d, int window_bits)
{
    body_zlib_end(d);
    memset(&d->z, 0, sizeof d->z);
    if (inflateInit2(&d->z, window_bits) != Z_OK)
        abort(); /* only a failed allocation */
    d->z_on = 1;
    d->window_bits = window_bits;
    d->fed = 0;
}

/* Sets the stage up. Returns BODY_DECODE_OK, or an error with why filled. */
static body_decode_rc body_stage_start(body_decoder *d, char *why, size_t whylen)
{
    sbuf *dst = body_dst(d);
    sbuf_reset(dst);
    const char *in = d->src;
    size_t len = d->srclen;
    d->started = 1;
    switch (d->c.c[d->i]) {
    case BODY_ZSTD: {
        if (!len) {
            sbuf_fmt_into(why, whylen, "invalid zstd body: it is empty (not even one frame)");
            return BODY_DECODE_CORRUPT;
        }
        unsigned long long fcs = ZSTD_getFrameContentSize(in, len);
        if (fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs != ZSTD_CONTENTSIZE_ERROR)
            body_presize(dst, fcs, d->limit);
        if (!d->zd && !(d->zd = ZSTD_createDCtx()))
            abort();
        ZSTD_DCtx_reset(d->zd, ZSTD_reset_session_and_parameters);
        ZSTD_DCtx_setParameter(d->zd, ZSTD_d_windowLogMax, body_zstd_window_log(d->limit));
        d->ib = (ZSTD_inBuffer){in, len, 0};
        d->zlast = 1;
        d->stuck = 0;
        return BODY_DECODE_OK;
    }
    case BODY_GZIP:
        /* the trailer's size (mod 2^32) of the last member: right for one member */
        if (len >= 18) {
            const unsigned char *t = (const unsigned char *)in + len - 4;
            body_presize(dst, (uint64_t)t[0] | (uint64_t)t[1] << 8 | (uint64_t)t[2] << 16 | (uint64_t)t[3] << 24,
                         d->limit);
        }
        d->zname = "gzip";
        body_zlib_start(d, 31);
        d->raw_next = 0;
        return BODY_DECODE_OK;
    case BODY_DEFLATE: {
        /* "deflate" is RFC 1950 zlib data, but some clients send raw deflate
         * (RFC 1951): as browsers do, a body whose first two bytes are a zlib
         * header is inflated as zlib, and one that is not, or fails as zlib,
         * as raw deflate */
        const unsigned char *b = (const unsigned char *)in;
        int zlib_head = len >= 2 && (b[0] & 0x0f) == 8 && (b[0] >> 4) <= 7 && ((b[0] << 8) | b[1]) % 31 == 0;
        d->zname = "deflate";
        body_zlib_start(d, zlib_head ? 15 : -15);
        d->raw_next = zlib_head;
        d->zlib_failed = 0;
        return BODY_DECODE_OK;
    }
    }
    sbuf_fmt_into(why, whylen, "unsupported Content-Encoding");
    return BODY_DECODE_UNSUPPORTED;
}

/* zstd: at least `work` bytes of output made (or the stage's end). Returns
 * BODY_DECODE_OK with *end set when the stage is over, or an error. */
static body_decode_rc body_zstd_step(body_decoder *d, size_t work, int *end, size_t *made, char *why,
                                     size_t whylen)
{
    sbuf *out = body_dst(d);
    while (*made < work) {
        size_t room = body_room(out, d->limit);
        ZSTD_outBuffer ob = {out->p + out->len, room, 0};
        size_t pos0 = d->ib.pos;
        size_t r = ZSTD_decompressStream(d->zd, &ob, &d->ib);
        if (ZSTD_isError(r)) {
            if (ZSTD_getErrorCode(r) == ZSTD_error_frameParameter_windowTooLarge)
                sbuf_fmt_into(why, whylen,
                              "invalid zstd body: a frame needs a window larger than %zu bytes, more than the gateway "
                              "decodes (compress with level 19 or lower, without --long)",
                              (size_t)1 << body_zstd_window_log(d->limit));
            else
                sbuf_fmt_into(why, whylen, "invalid zstd body: %s", ZSTD_getErrorName(r));
            return BODY_DECODE_CORRUPT;
        }
        out->len += ob.pos;
        *made += ob.pos + (d->ib.pos - pos0) + 1; /* bytes out and in: the work done */
        if (out->len > d->limit)
            return body_too_large("zstd", d->limit, why, whylen);
        d->zlast = r;
        if (d->ib.pos == d->ib.size && (ob.pos < ob.size || r == 0)) { /* all read, and no more to give */
            if (d->zlast != 0) {
                sbuf_fmt_into(why, whylen, "invalid zstd body: it ends inside a frame (truncated)");
                return BODY_DECODE_CORRUPT;
            }
            *end = 1;
            return BODY_DECODE_OK;
        }
        /* the decoder moves every call it is given room and data; this only
         * guards the loop against a library that would not */
        d->stuck = ob.pos == 0 && d->ib.pos == pos0 ? d->stuck + 1 : 0;
        if (d->stuck > 4) {
            sbuf_fmt_into(why, whylen, "invalid zstd body: the decoder makes no progress");
            return BODY_DECODE_CORRUPT;
        }
    }
    return BODY_DECODE_OK;
}

/* gzip and deflate: as body_zstd_step. gzip may hold several members back
 * to back, as `cat a.gz b.gz` makes. */
static body_decode_rc body_zlib_step(body_decoder *d, size_t work, int *end, size_t *made, char *why,
                                     size_t whylen)
{
    sbuf *out = body_dst(d);
    const char *name = d->zname;
    while (*made < work) {
        if (d->z.avail_in == 0 && d->fed < d->srclen) { /* avail_in is 32 bits */
            size_t n = d->srclen - d->fed < UINT_MAX ? d->srclen - d->fed : UINT_MAX;
            d->z.next_in = (Bytef *)(uintptr_t)(d->src + d->fed);
            d->z.avail_in = (uInt)n;
            d->fed += n;
        }
        size_t room = body_room(out, d->limit);
        d->z.next_out = (Bytef *)(out->p + out->len);
        d->z.avail_out = (uInt)room;
        uInt in0 = d->z.avail_in;
        int r = inflate(&d->z, Z_NO_FLUSH);
        out->len += room - d->z.avail_out;
        *made += room - d->z.avail_out + (in0 - d->z.avail_in) + 1; /* bytes out and in: the work done */
        if (out->len > d->limit)
            return body_too_large(name, d->limit, why, whylen);
        int more = d->z.avail_in > 0 || d->fed < d->srclen;
        if (r == Z_STREAM_END) {
            if (!more) {
                *end = 1;
                return BODY_DECODE_OK;
            }
            if (d->window_bits != 31) {
                sbuf_fmt_into(why, whylen, "invalid %s body: bytes follow the end of the stream", name);
                return BODY_DECODE_CORRUPT;
            }
            inflateReset(&d->z); /* the next gzip member */
            continue;
        }
        if (r == Z_MEM_ERROR)
            abort();
        if (r == Z_NEED_DICT) {
            sbuf_fmt_into(why, whylen, "invalid %s body: it needs a preset dictionary", name);
            return BODY_DECODE_CORRUPT;
        }
        if (r == Z_BUF_ERROR && !more) { /* all read, the stream unfinished: truncated */
            sbuf_fmt_into(why, whylen, "invalid %s body: it ends inside the stream (truncated)", name);
            return BODY_DECODE_CORRUPT;
        }
        if (r != Z_OK && r != Z_BUF_ERROR) {
            sbuf_fmt_into(why, whylen, "invalid %s body: %s", name, d->z.msg ? d->z.msg : "corrupt data");
            return BODY_DECODE_CORRUPT;
        }
        if (r == Z_BUF_ERROR) { /* room and data, yet no progress: cannot happen, guarded */
            sbuf_fmt_into(why, whylen, "invalid %s body: the decoder makes no progress", name);
            return BODY_DECODE_CORRUPT;
        }
    }
    return BODY_DECODE_OK;
}

/* A stage's step, with deflate's second try: zlib data that fails as zlib
 * is inflated as raw deflate; when that fails too, what was wrong with it
 * as the zlib data it looks like is the clearer message (and zlib's "too
 * large" stands without a second try). */
static body_decode_rc body_stage_step(body_decoder *d, size_t work, int *end, size_t *made, char *why,
                                      size_t whylen)
{
    if (d->c.c[d->i] == BODY_ZSTD)
        return body_zstd_step(d, work, end, made, why, whylen);
    body_decode_rc rc = body_zlib_step(d, work, end, made, why, whylen);
    if (rc == BODY_DECODE_CORRUPT && d->raw_next) {
        sbuf_copy_cstr(d->as_zlib, sizeof d->as_zlib, why);
        d->raw_next = 0;
        d->zlib_failed = 1;
        sbuf_reset(body_dst(d));
        body_zlib_start(d, -15);
        return BODY_DECODE_OK; /* the raw try: at the next step */
    }
    if (rc == BODY_DECODE_CORRUPT && d->zlib_failed && why && whylen)
        sbuf_copy_cstr(why, whylen, d->as_zlib);
    return rc;
}

body_decoder *body_decoder_new(const body_codings *c, const char *in, size_t len, size_t limit)
{
    body_decoder *d = calloc(1, sizeof *d);
    if (!d)
        abort();
    d->c = *c;
    d->in = in;
    d->len = len;
    d->limit = limit > SIZE_MAX / 4 ? SIZE_MAX / 4 : limit; /* limit + 2 never wraps */
    d->i = c->n - 1;
    d->src = in;
    d->srclen = len;
    return d;
}

/* The end, whatever it is: the output NUL-terminated, the rest let go. */
static void body_decoder_finish(body_decoder *d, body_decode_rc rc)
{
    d->done = 1;
    d->rc = rc;
    body_zlib_end(d);
    if (d->zd)
        ZSTD_freeDCtx(d->zd);
    d->zd = NULL;
    sbuf_free(&d->stage[0]);
    sbuf_free(&d->stage[1]);
    if (rc == BODY_DECODE_OK)
        body_trim(&d->out);
    if (d->out.p) /* the decoders write past the NUL; room for it was kept */
        d->out.p[d->out.len] = '\0';
    else
        sbuf_append(&d->out, "", 0);
}

body_decode_rc body_decoder_run(body_decoder *d, size_t work, int *done, char *why, size_t whylen)
{
    if (!d->done && (d->c.n < 0 || d->c.n > BODY_MAX_CODINGS)) {
        sbuf_fmt_into(why, whylen, "unsupported Content-Encoding: more than %d codings", BODY_MAX_CODINGS);
        body_decoder_finish(d, BODY_DECODE_UNSUPPORTED);
    }
    if (!d->done && d->c.n == 0) { /* identity */
        if (d->len > d->limit) {
            sbuf_fmt_into(why, whylen, "the request body is %zu bytes; the limit is %zu", d->len, d->limit);
            body_decoder_finish(d, BODY_DECODE_TOO_LARGE);
        } else {
            sbuf_reserve(&d->out, d->len); /* exact: out is empty */
            sbuf_append(&d->out, d->in, d->len);
            body_decoder_finish(d, BODY_DECODE_OK);
        }
    }
    /* the last coding applied is undone first; each stage's output is the
     * next one's input, and each is held to the limit */
    size_t spent = 0;
    while (!d->done && spent < work) {
        body_decode_rc rc = d->started ? BODY_DECODE_OK : body_stage_start(d, why, whylen);
        int end = 0;
        size_t made = 0;
        if (rc == BODY_DECODE_OK)
            rc = body_stage_step(d, work - spent, &end, &made, why, whylen);
        spent += made;
        if (rc != BODY_DECODE_OK) {
            body_decoder_finish(d, rc);
            break;
        }
        if (end) {
            sbuf *dst = body_dst(d);
            if (d->i + 1 < d->c.n) /* this stage's input, when it was an earlier stage's output */
                sbuf_free(&d->stage[(d->i + 1) & 1]);
            d->src = dst->p ? dst->p : "";
            d->srclen = dst->len;
            d->started = 0;
            if (d->i-- == 0)
                body_decoder_finish(d, BODY_DECODE_OK);
        }
    }
    *done = d->done;
    return d->done ? d->rc : BODY_DECODE_OK;
}

size_t body_decoder_held(const body_decoder *d)
{
    return d->stage[0].cap + d->stage[1].cap + d->out.cap;
}

void body_decoder_take(body_decoder *d, sbuf *out)
{
    sbuf_free(out);
    *out = d->out;
    d->out = (sbuf)SBUF_INIT;
}

void body_decoder_free(body_decoder *d)
{
    if (!d)
        return;
    body_zlib_end(d);
    if (d->zd)
        ZSTD_freeDCtx(d->zd);
    sbuf_free(&d->stage[0]);
    sbuf_free(&d->stage[1]);
    sbuf_free(&d->out);
    free(d);
}

body_decode_rc body_decode(const body_codings *c, const char *in, size_t len, size_t limit, sbuf *out,
                           char *why, size_t whylen)
{
    body_decoder *d = body_decoder_new(c, in, len, limit);
    int done = 0;
    body_decode_rc rc = body_decoder_run(d, SIZE_MAX, &done, why, whylen);
    body_decoder_take(d, out);
    body_decoder_free(d);
    return rc;
}
