/* body_decode.c: Content-Encoding of request bodies undone under a limit on
 * the decoded size (see body_decode.h). zstd through libzstd's streaming
 * decoder, gzip and deflate through zlib's inflate; each writes into the
 * output a piece at a time and never past one byte beyond the limit, so
 * the work and memory of a decompression bomb are those of the limit. */
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

static body_decode_rc body_zstd(const char *in, size_t len, size_t limit, sbuf *out, char *why, size_t whylen)
{
    if (!len) {
        sbuf_fmt_into(why, whylen, "invalid zstd body: it is empty (not even one frame)");
        return BODY_DECODE_CORRUPT;
    }
    unsigned long long fcs = ZSTD_getFrameContentSize(in, len);
    if (fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs != ZSTD_CONTENTSIZE_ERROR)
        body_presize(out, fcs, limit);
    ZSTD_DCtx *d = ZSTD_createDCtx();
    if (!d)
        abort();
    ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, body_zstd_window_log(limit));
    ZSTD_inBuffer ib = {in, len, 0};
    size_t last = 1; /* ZSTD_decompressStream's answer: 0 when a frame has just ended */
    int stuck = 0;
    body_decode_rc rc = BODY_DECODE_OK;
    for (;;) {
        size_t room = body_room(out, limit);
        ZSTD_outBuffer ob = {out->p + out->len, room, 0};
        size_t pos0 = ib.pos;
        size_t r = ZSTD_decompressStream(d, &ob, &ib);
        if (ZSTD_isError(r)) {
            if (ZSTD_getErrorCode(r) == ZSTD_error_frameParameter_windowTooLarge)
                sbuf_fmt_into(why, whylen,
                              "invalid zstd body: a frame needs a window larger than %zu bytes, more than the gateway "
                              "decodes (compress with level 19 or lower, without --long)",
                              (size_t)1 << body_zstd_window_log(limit));
            else
                sbuf_fmt_into(why, whylen, "invalid zstd body: %s", ZSTD_getErrorName(r));
            rc = BODY_DECODE_CORRUPT;
            break;
        }
        out->len += ob.pos;
        if (out->len > limit) {
            rc = body_too_large("zstd", limit, why, whylen);
            break;
        }
        last = r;
        if (ib.pos == ib.size && (ob.pos < ob.size || r == 0))
            break; /* all read, and the decoder has no more to give */
        /* the decoder moves every call it is given room and data; this only
         * guards the loop against a library that would not */
        stuck = ob.pos == 0 && ib.pos == pos0 ? stuck + 1 : 0;
        if (stuck > 4) {
            sbuf_fmt_into(why, whylen, "invalid zstd body: the decoder makes no progress");
            rc = BODY_DECODE_CORRUPT;
            break;
        }
    }
    if (rc == BODY_DECODE_OK && last != 0) {
        sbuf_fmt_into(why, whylen, "invalid zstd body: it ends inside a frame (truncated)");
        rc = BODY_DECODE_CORRUPT;
    }
    ZSTD_freeDCtx(d);
    return rc;
}

/* ---------- gzip and deflate (zlib) ---------- */

/* Inflates in[0..len) with zlib's window_bits (31 gzip, 15 zlib, -15 raw);
 * gzip may hold several members back to back, as `cat a.gz b.gz` makes. */
static body_decode_rc body_inflate(const char *in, size_t len, size_t limit, int window_bits, const char *name,
                                   sbuf *out, char *why, size_t whylen)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, window_bits) != Z_OK)
        abort(); /* only a failed allocation */
    size_t fed = 0;
    int ended = 0;
    body_decode_rc rc = BODY_DECODE_OK;
    for (;;) {
        if (z.avail_in == 0 && fed < len) { /* avail_in is 32 bits */
            size_t n = len - fed < UINT_MAX ? len - fed : UINT_MAX;
            z.next_in = (Bytef *)(uintptr_t)(in + fed);
            z.avail_in = (uInt)n;
            fed += n;
        }
        size_t room = body_room(out, limit);
        z.next_out = (Bytef *)(out->p + out->len);
        z.avail_out = (uInt)room;
        int r = inflate(&z, Z_NO_FLUSH);
        out->len += room - z.avail_out;
        if (out->len > limit) {
            rc = body_too_large(name, limit, why, whylen);
            break;
        }
        int more = z.avail_in > 0 || fed < len;
        if (r == Z_STREAM_END) {
            if (!more) {
                ended = 1;
                break;
            }
            if (window_bits != 31) {
                sbuf_fmt_into(why, whylen, "invalid %s body: bytes follow the end of the stream", name);
                rc = BODY_DECODE_CORRUPT;
                break;
            }
            inflateReset(&z); /* the next gzip member */
            continue;
        }
        if (r == Z_MEM_ERROR)
            abort();
        if (r == Z_NEED_DICT) {
            sbuf_fmt_into(why, whylen, "invalid %s body: it needs a preset dictionary", name);
            rc = BODY_DECODE_CORRUPT;
            break;
        }
        if (r == Z_BUF_ERROR && !more)
            break; /* all read, the stream unfinished: truncated */
        if (r != Z_OK && r != Z_BUF_ERROR) {
            sbuf_fmt_into(why, whylen, "invalid %s body: %s", name, z.msg ? z.msg : "corrupt data");
            rc = BODY_DECODE_CORRUPT;
            break;
        }
        if (r == Z_BUF_ERROR) { /* room and data, yet no progress: cannot happen, guarded */
            sbuf_fmt_into(why, whylen, "invalid %s body: the decoder makes no progress", name);
            rc = BODY_DECODE_CORRUPT;
            break;
        }
    }
    if (rc == BODY_DECODE_OK && !ended) {
        sbuf_fmt_into(why, whylen, "invalid %s body: it ends inside the stream (truncated)", name);
        rc = BODY_DECODE_CORRUPT;
    }
    inflateEnd(&z);
    return rc;
}

static body_decode_rc body_gzip(const char *in, size_t len, size_t limit, sbuf *out, char *why, size_t whylen)
{
    /* the trailer's size (mod 2^32) of the last member: right for one member */
    if (len >= 18) {
        const unsigned char *t = (const unsigned char *)in + len - 4;
        body_presize(out, (uint64_t)t[0] | (uint64_t)t[1] << 8 | (uint64_t)t[2] << 16 | (uint64_t)t[3] << 24, limit);
    }
    return body_inflate(in, len, limit, 31, "gzip", out, why, whylen);
}

/* "deflate" is RFC 1950 zlib data, but some clients send raw deflate (RFC
 * 1951): as browsers do, a body whose first two bytes are a zlib header is
 * inflated as zlib, and one that is not, or fails as zlib, as raw deflate. */
static body_decode_rc body_deflate(const char *in, size_t len, size_t limit, sbuf *out, char *why, size_t whylen)
{
    const unsigned char *b = (const unsigned char *)in;
    int zlib_head = len >= 2 && (b[0] & 0x0f) == 8 && (b[0] >> 4) <= 7 && ((b[0] << 8) | b[1]) % 31 == 0;
    if (!zlib_head)
        return body_inflate(in, len, limit, -15, "deflate", out, why, whylen);
    char as_zlib[256] = "";
    body_decode_rc rc = body_inflate(in, len, limit, 15, "deflate", out, as_zlib, sizeof as_zlib);
    if (rc == BODY_DECODE_CORRUPT) {
        sbuf_reset(out);
        body_decode_rc raw = body_inflate(in, len, limit, -15, "deflate", out, why, whylen);
        if (raw != BODY_DECODE_CORRUPT)
            return raw;
    }
    /* zlib's verdict stands (too large), or neither worked: then what was
     * wrong with it as the zlib data it looks like is the clearer message */
    if (rc != BODY_DECODE_OK && why && whylen)
        sbuf_copy_cstr(why, whylen, as_zlib);
    return rc;
}

/* ---------- the stages ---------- */

static body_decode_rc body_stage(body_coding coding, const char *in, size_t len, size_t limit, sbuf *out,
                                 char *why, size_t whylen)
{
    switch (coding) {
    case BODY_ZSTD:
        return body_zstd(in, len, limit, out, why, whylen);
    case BODY_GZIP:
        return body_gzip(in, len, limit, out, why, whylen);
    case BODY_DEFLATE:
        return body_deflate(in, len, limit, out, why, whylen);
    }
    sbuf_fmt_into(why, whylen, "unsupported Content-Encoding");
    return BODY_DECODE_UNSUPPORTED;
}

body_decode_rc body_decode(const body_codings *c, const char *in, size_t len, size_t limit, sbuf *out,
                           char *why, size_t whylen)
{
    if (limit > SIZE_MAX / 4)
        limit = SIZE_MAX / 4; /* limit + 2 never wraps */
    sbuf_free(out); /* its memory too: what it holds after is bounded by the limit */
    if (c->n < 0 || c->n > BODY_MAX_CODINGS) {
        sbuf_fmt_into(why, whylen, "unsupported Content-Encoding: more than %d codings", BODY_MAX_CODINGS);
        return BODY_DECODE_UNSUPPORTED;
    }
    if (!c->n) { /* identity */
        if (len > limit) {
            sbuf_fmt_into(why, whylen, "the request body is %zu bytes; the limit is %zu", len, limit);
            return BODY_DECODE_TOO_LARGE;
        }
        sbuf_reserve(out, len); /* exact: out is empty */
        sbuf_append(out, in, len);
        return BODY_DECODE_OK;
    }
    /* the last coding applied is undone first; each stage's output is the
     * next one's input, and each is held to the limit */
    sbuf stage[2] = {SBUF_INIT, SBUF_INIT};
    const char *src = in;
    size_t srclen = len;
    body_decode_rc rc = BODY_DECODE_OK;
    for (int i = c->n - 1; i >= 0 && rc == BODY_DECODE_OK; i--) {
        sbuf *dst = i == 0 ? out : &stage[i & 1];
        sbuf_reset(dst);
        rc = body_stage(c->c[i], src, srclen, limit, dst, why, whylen);
        src = dst->p ? dst->p : "";
        srclen = dst->len;
        if (i + 1 < c->n) /* the input of this stage, when it was an earlier stage's output */
            sbuf_free(&stage[(i + 1) & 1]);
    }
    sbuf_free(&stage[0]);
    sbuf_free(&stage[1]);
    if (rc == BODY_DECODE_OK)
        body_trim(out);
    if (out->p) /* the decoders write past the NUL; room for it was kept */
        out->p[out->len] = '\0';
    else
        sbuf_append(out, "", 0);
    return rc;
}
