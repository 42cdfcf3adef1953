/* resume.h: what finishes a cut stream on another account (stream resume,
 * docs/policies.md): the continuation request (the client's request with
 * the text already delivered appended as an assistant message, a prefill,
 * everything else unchanged) and, for the Responses API, the splice that
 * makes the continuation's events one response with what the client got
 * before the cut. Pure: no I/O. */
#ifndef SY_RESUME_H
#define SY_RESUME_H
#include <stddef.h>
#include "base/json.h"
#include "base/sbuf.h"
#include "base/sse.h"

/* Writes into out the body of doc (a chat-completions request object) with
 * {"role":"assistant","content":text} appended to its "messages". Returns 0,
 * or -1 (out untouched) when doc has no messages array. */
int resume_body_build(const json_value *doc, const char *text, size_t len, sbuf *out);

/* The same for a Responses request: {"role":"assistant","content":text}
 * appended to its "input" (a string input becomes [{"role":"user",
 * "content":input}, ...]). -1 (out untouched) when input is neither. */
int resume_responses_body_build(const json_value *doc, const char *text, size_t len, sbuf *out);

/* The instruction a continuation ends with where no prefill is taken. */
#define RESUME_INSTRUCTION                                                                                       \
    "Your previous message was cut off. Continue it from exactly where it stopped: do not repeat any of it and " \
    "add nothing before the continuation."

/* body (a continuation built above, as JSON text of len bytes) with a user
 * message of RESUME_INSTRUCTION after the assistant message it ends with,
 * into out: the form every chat API takes (a conversation ending with the
 * user), where an assistant prefill may be refused. responses: the list is
 * "input" (a Responses message item), else "messages". 0, or -1 (out
 * untouched) when the body has no such list. */
int resume_instruction_add(int responses, const char *body, size_t len, sbuf *out);

/* The cut Responses stream as the client got it: one message whose
 * output_text was being written (preflight.h, keep_text). */
typedef struct resume_cut {
    const char *response_id, *item_id;
    long output_index, content_index;
    long last_seq;             /* its last sequence_number, -1 none */
    const char *text;          /* the delivered text */
    size_t text_len;
    const char *done_items;    /* finished items before the message (JSON, comma-separated), may be "" */
    size_t done_len;
} resume_cut;

#define RESUME_MAP_MAX 32      /* continuation items after the message that keep their events */

/* Rewrites the continuation's event stream into the cut one's: its
 * response.created / in_progress, the message's output_item.added and
 * content_part.added and any reasoning item before the message are
 * swallowed; the message's text deltas go out as the cut message's (its
 * item_id, output_index, content_index); the text's, part's and item's
 * done events and response.completed / .incomplete carry the whole text
 * (delivered and continued), the cut response's id and its output; items
 * after the message are renumbered after it; sequence numbers go on from
 * the cut stream's. Anything that is not a JSON event passes as it is. */
typedef struct resume_splice {
    char response_id[128], item_id[128];
    long output_index, content_index;
    long seq;                  /* the next sequence_number the client gets; -1: the cut stream had none */
    sbuf text;                 /* the whole text: delivered, then continued */
    sbuf done_items;
    sbuf msg_item;             /* the message item as finished ("" not yet) */
    long cont_index, cont_content; /* the continuation's message: output_index, content_index (-1 unseen) */
    int text_done, part_done, item_done; /* those done events went to the client */
    long map_from[RESUME_MAP_MAX], map_to[RESUME_MAP_MAX];
    size_t nmap;
    long next_index;           /* the client's output_index of the next item after the message */
    sse_parser parser;
    sbuf *out;                 /* during resume_splice_feed */
} resume_splice;

void resume_splice_init(resume_splice *s, const resume_cut *cut);
/* Feeds continuation bytes (any cut: events are parsed whole) and appends
 * the client's bytes to out. */
void resume_splice_feed(resume_splice *s, const char *buf, size_t n, sbuf *out);
void resume_splice_free(resume_splice *s);

#endif
