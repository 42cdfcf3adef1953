/* preflight.h: watches an upstream SSE stream (/v1/responses or
 * /v1/chat/completions). Before the first semantic event (text delta, tool
 * call) it holds bytes back so that an error inside a 200 stream can still
 * fail over; after commit it keeps parsing to learn usage, the response id
 * and whether the stream ended properly. Pure logic: no I/O, no timers (the
 * caller owns the time window and calls preflight_commit when it ends). */
#ifndef SY_PREFLIGHT_H
#define SY_PREFLIGHT_H
#include <stddef.h>
#include "base/json.h"
#include "base/sbuf.h"
#include "base/sse.h"

/* The API dialects (src/dialect/dialect.h names them). API_MESSAGES, the
 * Anthropic Messages API, is a client's dialect the dialect wing translates;
 * the watcher here reads the two OpenAI streams and, for an anthropic
 * account, Anthropic's (message_start ... message_stop, its error event). */
typedef enum { API_CHAT, API_RESPONSES, API_MESSAGES } api_kind;

typedef enum {
    PF_HOLD,   /* nothing semantic yet: bytes are in pf->held, client has seen nothing */
    PF_COMMIT, /* output may flow to the client; pf->held has whatever is still to send */
    PF_ERROR   /* an error arrived before any semantic output: see error_* fields */
} pf_state;

typedef struct preflight {
    api_kind api;
    pf_state state;
    size_t max_bytes;      /* hold window in bytes (64 KiB by default) */
    sbuf held;             /* bytes not yet given to the client (caller drains it) */
    sse_parser parser;

    /* error seen before output (PF_ERROR), or after commit (late_error) */
    char error_type[64];
    char error_code[64];
    sbuf error_message;    /* message text of the error, may be empty */
    sbuf error_body;       /* the raw data of the error event */
    int late_error;        /* an error/response.failed after commit */
    size_t late_error_at;  /* its event's first byte: an offset over all bytes fed (sse_event_start) */

    char response_id[128]; /* responses API: id from response.created/completed */
    char model[128];
    int saw_semantic;
    int saw_terminal;      /* response.completed/incomplete, chat finish_reason or [DONE] */
    long input_tokens, output_tokens, total_tokens; /* -1 when unknown */
    long cached_tokens;    /* of input_tokens, served from the prompt cache; -1 unknown */
    long events;

    /* chat streams, when asked (keep_text): the text content seen, for a
     * stream resume; tool calls make a stream unresumable */
    int keep_text;
    sbuf text;             /* choices[0].delta.content, concatenated, at most PREFLIGHT_TEXT_MAX */
    int text_overflow;     /* more than that: no resume */
    int saw_tool_call;
    int tree_only;         /* tests: every chat chunk read as a JSON tree (the scan's reference) */

    /* Responses streams, when asked (keep_text): the one message whose
     * output_text is being written, for a stream resume that continues it
     * in place (upstream/resume.h, resume_splice). text holds its deltas.
     * rsp_unsafe: anything a text prefill cannot continue (a tool call, a
     * refusal, a second message or part, a finished text). */
    int rsp_unsafe;
    int rsp_part_open;     /* the message's output_text part was added and is not done */
    int rsp_reasoning_open; /* reasoning items added and not done */
    char rsp_item_id[128];
    long rsp_output_index, rsp_content_index;
    long rsp_seq;          /* the last sequence_number seen, -1 none */
    sbuf rsp_done_items;   /* the finished items before the message (JSON, comma-separated) */         /* tests: every chat chunk read as a JSON tree (the scan's reference) */

    /* Responses streams, when asked: called with each finished output
     * item's event data (response.output_item.done) that carries an
     * "encrypted_content" member: the proxy records who minted the blobs
     * (upstream/blobs.h). NULL: not asked. */
    void (*on_item_blobs)(void *ud, const char *data, size_t len);
    void *hooks_ud;
    /* ... and with response.completed's event data (the whole response):
     * the proxy records a stored conversation's turn. NULL: not asked. */
    void (*on_completed)(void *ud, const char *data, size_t len);
    /* ... and with every response.output_item.done event's data: for an
     * upstream whose response.completed carries no output (the ChatGPT
     * backend's "output": []), the turn's items. NULL: not asked. */
    void (*on_item_done)(void *ud, const char *data, size_t len);
} preflight;

#define PREFLIGHT_TEXT_MAX (256u << 10)
#define PREFLIGHT_ITEMS_MAX (256u << 10) /* rsp_done_items at most; more: unsafe */

/* keep_text on a Responses stream: 1 when what the client got is one
 * message's text in progress (plus finished reasoning items before it),
 * which an assistant prefill can continue. */
int preflight_rsp_resumable(const preflight *pf);

void preflight_init(preflight *pf, api_kind api, size_t max_bytes);
void preflight_free(preflight *pf);

/* Feeds upstream bytes and returns the state after them. In PF_HOLD the bytes
 * go to pf->held; in PF_COMMIT they also go to pf->held (the caller forwards
 * and sbuf_reset()s it). Transitions: HOLD->COMMIT on the first semantic or
 * terminal event, or when held exceeds max_bytes; HOLD->ERROR on an `error`
 * event, a response.failed event, or a data object carrying "error" before
 * any semantic output. ERROR and COMMIT are final. */
pf_state preflight_feed(preflight *pf, const char *buf, size_t n);

/* After commit, with nothing held: parses buf as preflight_feed does but
 * holds none of it (the caller relays buf itself, from its own buffer).
 * Returns how many bytes at the end of buf belong to an unfinished event;
 * a caller that holds those back appends them to pf->held. */
size_t preflight_pass(preflight *pf, const char *buf, size_t n);

/* The bytes at the end of pf->held that belong to an unfinished event. */
size_t preflight_open_bytes(const preflight *pf);

/* Forces HOLD->COMMIT (the time window ended). No-op in other states. */
void preflight_commit(preflight *pf);

#endif
