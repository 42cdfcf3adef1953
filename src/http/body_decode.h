/* body_decode.h: a request body sent with a Content-Encoding (zstd, gzip,
 * deflate, identity, or a list of them) turned back into the bytes the
 * client meant, under a hard limit on the DECODED size: decoding stops as
 * soon as the output passes the limit, so a small body that would inflate
 * to gigabytes costs the limit and no more. Pure: no I/O, so the server
 * calls it and the fuzzer and unit tests can too. */
#ifndef SY_BODY_DECODE_H
#define SY_BODY_DECODE_H
#include <stddef.h>
#include "base/sbuf.h"

typedef enum body_coding { BODY_GZIP = 1, BODY_DEFLATE, BODY_ZSTD } body_coding;

/* At most this many codings in one request ("identity" is not counted). */
#define BODY_MAX_CODINGS 4

/* The codings of a body, in the order the client applied them (the
 * header's order); n == 0: identity, nothing to decode. */
typedef struct body_codings {
    int n;
    body_coding c[BODY_MAX_CODINGS];
} body_codings;

typedef enum body_decode_rc {
    BODY_DECODE_OK = 0,
    BODY_DECODE_UNSUPPORTED, /* a coding not decoded here, or too many: 415 */
    BODY_DECODE_CORRUPT,     /* not valid data in its coding (garbage, truncated): 400 */
    BODY_DECODE_TOO_LARGE,   /* the decoded body passes the limit: 413 */
} body_decode_rc;

/* Appends the codings of one Content-Encoding value to c (start with
 * c->n = 0; call once per header line, in order, for a repeated header).
 * A comma list; names case-insensitive; "x-gzip" is "gzip"; "identity" and
 * empty elements are skipped. BODY_DECODE_OK, or BODY_DECODE_UNSUPPORTED
 * with why filled (an unknown coding, parameters, more than
 * BODY_MAX_CODINGS). */
body_decode_rc body_decode_codings(const char *value, body_codings *c, char *why, size_t whylen);

/* The name of a coding as the header spells it ("zstd"). */
const char *body_decode_name(body_coding coding);

/* Decodes in[0..len), to which c's codings were applied in order, undoing
 * the last one first, into out (freed first). zstd: one or more frames,
 * back to back (skippable frames allowed). gzip: one or more members.
 * deflate: zlib-wrapped, or raw deflate when that fails (as browsers
 * accept both). No stage's output may pass limit bytes: the first byte
 * past it stops the decoding with BODY_DECODE_TOO_LARGE. Returns
 * BODY_DECODE_OK with out holding the body (NUL-terminated, out->cap at
 * most limit + 2), or an error with why filled and out holding at most
 * limit + 1 bytes of no meaning (the caller frees it either way). */
body_decode_rc body_decode(const body_codings *c, const char *in, size_t len, size_t limit, sbuf *out,
                           char *why, size_t whylen);

/* The same decoding a slice at a time, so that a loop can serve other work
 * between slices (http/server.c: a body that inflates to the limit is
 * tens of milliseconds of work, and a key holder can send many at once).
 * in[0..len) must stay valid until the decoder is freed. */
typedef struct body_decoder body_decoder;
body_decoder *body_decoder_new(const body_codings *c, const char *in, size_t len, size_t limit);
/* Decodes about work bytes' worth (bytes read plus bytes written; at
 * least one step of the decoder), then returns. *done set: the result is
 * the return value, as body_decode's (why filled on an error), and the
 * body is taken with body_decoder_take. Not done: BODY_DECODE_OK. */
body_decode_rc body_decoder_run(body_decoder *d, size_t work, int *done, char *why, size_t whylen);
/* The memory the decoder's output holds now (its stages' too): what the
 * body budget counts while it runs. */
size_t body_decoder_held(const body_decoder *d);
/* Moves the decoded body (done) into out (freed first). */
void body_decoder_take(body_decoder *d, sbuf *out);
void body_decoder_free(body_decoder *d);

#endif
