/* scrub.h: takes an account's secrets out of bytes on their way to a
 * client. An upstream may echo what it was sent (an error body quoting the
 * Authorization header, a stream, a header); whatever it echoes, no byte the
 * gateway sends contains the serving account's token: each occurrence is
 * replaced by SCRUB_MARK. Streams are scrubbed as they pass, so a secret
 * split across two chunks is caught too: bytes that could be the start of a
 * secret are held back until the next chunk shows whether they are. */
#ifndef SY_SCRUB_H
#define SY_SCRUB_H
#include <stddef.h>
#include <stdint.h>
#include "base/sbuf.h"

#define SCRUB_MARK "[redacted]"
#define SCRUB_MIN_LEN 8      /* shorter "secrets" are not scrubbed (they would eat ordinary text) */
#define SCRUB_MAX_SECRETS 8

typedef struct scrub {
    char *sec[SCRUB_MAX_SECRETS]; /* copies, longest first */
    size_t len[SCRUB_MAX_SECRETS];
    size_t n;
    uint8_t first[32];            /* first bytes of the secrets, a bit each (every stream has one: 32 bytes, not 256) */
    int only_first;               /* the first byte all secrets share (memchr finds candidates), or -1 */
    int only_second;              /* and the second byte they share, or -1 */
    sbuf tail;                    /* held back: may begin a secret the next bytes complete */
} scrub;

void scrub_init(scrub *s);
void scrub_free(scrub *s);
/* Forgets every secret and anything held back. */
void scrub_reset(scrub *s);
/* Adds a secret (copied) and its JSON-escaped spelling when that differs.
 * NULL or shorter than SCRUB_MIN_LEN: ignored. */
void scrub_add(scrub *s, const char *secret);

/* Streams: appends buf[0..n) to out with every secret replaced, except a
 * tail that may be the start of one (at most the longest secret's length
 * less one byte); scrub_flush appends that tail at the end of the stream.
 * At the end of a stream or text, the start of a secret at least
 * SCRUB_MIN_LEN bytes long is redacted too: a value cut short (a
 * truncated field, a connection that died) must not reveal half a token. */
void scrub_feed(scrub *s, const char *buf, size_t n, sbuf *out);
void scrub_flush(scrub *s, sbuf *out);

/* Whole texts: appends in[0..n) to out with every secret replaced. */
void scrub_text(const scrub *s, const char *in, size_t n, sbuf *out);
/* A NUL-terminated string in a buffer of cap bytes, scrubbed in place (cut to fit). */
void scrub_cstr(const scrub *s, char *str, size_t cap);

#endif
