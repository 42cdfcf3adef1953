/* overlap.h: the start of a continuation that repeats what the client
 * already has. A stream cut after text is finished on another account
 * (stream resume, docs/policies.md); asked to continue, a model often
 * starts again with the end of the delivered text, or with all of it. The
 * continuation's events are held back while its text so far could still be
 * such a repeat; once that is decided, the repeated bytes are taken out of
 * its first text deltas (an event whose delta is all repeat is dropped, the
 * one it ends in keeps the rest) and the events go on in order. Only a
 * repeat the client could not tell from new text is taken out: one of at
 * least OVERLAP_MIN bytes, or the whole delivered text. Chat chunks
 * (choices[0].delta.content) and Responses output_text deltas; other events
 * pass as they are (written again from the parser: event and data lines).
 * Pure: no I/O. */
#ifndef SY_OVERLAP_H
#define SY_OVERLAP_H
#include <stddef.h>
#include "base/sbuf.h"
#include "base/sse.h"
#include "upstream/preflight.h"

#define OVERLAP_MIN 16 /* a shorter repeat of the end is taken out only when it is all the delivered text */

typedef struct overlap_trim {
    api_kind api;
    sbuf delivered;    /* the text the client got */
    struct ov_event *held; /* whole events held back while undecided (overlap.c) */
    size_t nheld, capheld;
    sbuf text;         /* the continuation's text in them */
    int decided;
    size_t removed;    /* bytes of repeat taken out */
    sse_parser parser;
    sbuf *out;         /* during overlap_feed */
} overlap_trim;

/* delivered: the text the client got (copied). */
void overlap_init(overlap_trim *t, api_kind api, const char *delivered, size_t len);
/* Forgets the continuation seen so far (another attempt begins); the delivered text stays. */
void overlap_reset(overlap_trim *t);
/* Continuation bytes (any cut) in; what may go to the client now appended to out. */
void overlap_feed(overlap_trim *t, const char *buf, size_t n, sbuf *out);
/* The continuation ended (or broke): what is held goes out, the repeat decided on what came. */
void overlap_end(overlap_trim *t, sbuf *out);
void overlap_free(overlap_trim *t);

/* The longest k such that the last k bytes of a equal the first k of b (k <= both lengths). */
size_t overlap_suffix_prefix(const char *a, size_t alen, const char *b, size_t blen);

#endif
