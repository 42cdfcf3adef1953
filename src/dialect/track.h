/* track.h: what one stream translator keeps (struct dialect_stream, the
 * opaque type of dialect.h) and the small stores the pairs share: a
 * budget for what is kept, finished Responses items by output index, and
 * tool calls by their chat index. stream.c owns the object and its table
 * of pairs; each pair (stream_chat.c, stream_responses.c,
 * stream_messages.c, stream_from_messages.c, aggregate.c) reads and writes
 * its own part of the state and the common fields.
 *
 * Memory is bounded: everything kept for a final event or an aggregated
 * answer (text, items, the terminal event, tool call names and arguments)
 * is charged to a budget of TRACK_KEEP_MAX bytes per stream. Past it the
 * translator marks `overflow` and keeps nothing more: a translated stream
 * goes on (the deltas still reach the client, the done events and the
 * final response carry what was kept), an aggregated answer becomes a 502
 * error (a cut answer must not pass for a whole one). The item tables are
 * bounded by count too (TRACK_ITEMS_MAX; more items are not tracked). */
#ifndef SY_DIALECT_TRACK_H
#define SY_DIALECT_TRACK_H
#include <stddef.h>
#include <stdint.h>
#include "base/json.h"
#include "base/sbuf.h"
#include "base/sse.h"
#include "dialect/dialect.h"
#include "dialect/errors.h"
#include "dialect/shape.h"

#define TRACK_KEEP_MAX ((size_t)64 << 20)
#define TRACK_ITEMS_MAX 4096

enum { TRACK_OTHER, TRACK_MESSAGE, TRACK_REASONING, TRACK_CALL };

/* A finished Responses item (its JSON) at its output index. */
typedef struct track_done {
    long output_index;
    sbuf json;
} track_done;

/* Finished items, sorted by output index (one per index: a later one
 * replaces it). */
typedef struct track_items {
    track_done *v;
    size_t n, cap;
} track_items;

/* A tool call met in a chat stream, by its chat index. */
typedef struct track_call {
    long chat_index;
    long output_index;          /* chat -> responses: its function_call item's */
    char item_id[SHAPE_ID_MAX];
    char call_id[SHAPE_ID_MAX];
    sbuf name, args;
    int closed;
    long block;                 /* chat -> messages: its content block (tomsg_state), -1 none */
} track_call;

typedef struct track_calls {
    track_call *v;
    size_t n, cap;
} track_calls;

/* Responses -> chat, streamed: an output item seen. */
typedef struct tochat_item {
    long output_index;          /* -1: not given */
    char id[SHAPE_ID_MAX];
    int kind;                   /* TRACK_* */
    long tool_index;            /* TRACK_CALL: its tool_calls index in the chat stream, -1 none yet */
    size_t args_sent;           /* TRACK_CALL: argument bytes the client has */
    int text_sent;              /* message / reasoning: some of its text reached the client */
} tochat_item;

typedef struct tochat_state {
    tochat_item *items;
    size_t n, cap;
    long calls;                 /* tool_calls indexes given */
    int role_sent;
    int id_fixed;               /* chat_id, created and model are fixed once a chunk went out */
    char chat_id[SHAPE_ID_MAX];
    char response_id[SHAPE_ID_MAX];
    char model[SHAPE_ID_MAX];
    int64_t created;
    int rs_sent;                /* reasoning text sent: the next summary part gets a blank line first */
    char rs_item[SHAPE_ID_MAX];
    int64_t rs_summary;
} tochat_state;

/* Chat -> Responses, streamed. */
typedef struct torsp_state {
    int started;                /* response.created and .in_progress sent */
    char chat_id[SHAPE_ID_MAX], resp_id[SHAPE_ID_MAX], model[SHAPE_ID_MAX];
    int64_t created;
    long next_index;            /* the next output_index */
    int open;                   /* the open text item: TRACK_OTHER (none), TRACK_MESSAGE, TRACK_REASONING */
    long open_index;
    char open_id[SHAPE_ID_MAX];
    int part;                   /* the message's open part: -1 none, 0 output_text, 1 refusal */
    long part_index;            /* its content_index */
    long parts_n;               /* parts the message has had */
    sbuf text;                  /* the open part's (or reasoning summary's) text */
    sbuf parts;                 /* the message's finished parts, JSON, comma-separated */
    long messages, reasonings;  /* items of each kind opened: the second and later get numbered ids */
    track_calls calls;
    long calls_seen;            /* calls opened, for their ids */
    track_items done;
    int closed;                 /* finish_reason seen: every item closed, deltas ignored */
    char finish[32];
    shape_usage usage;
    sbuf final;                 /* the response object of the terminal event, as the client got it */
} torsp_state;

/* Responses stream -> one answer. */
typedef struct ragg_state {
    track_items items;          /* from response.output_item.done */
    sbuf terminal;              /* the data of response.completed / .incomplete */
} ragg_state;

/* Chat stream -> one answer. */
typedef struct cagg_state {
    int started;
    char id[SHAPE_ID_MAX], model[SHAPE_ID_MAX], fingerprint[SHAPE_ID_MAX];
    int64_t created;
    sbuf content, refusal, reasoning;
    track_calls calls;
    char finish[32];
    sbuf usage;                 /* the last usage object, JSON */
} cagg_state;

/* Responses or chat -> Messages, streamed: a content block. Anthropic's
 * blocks come one at a time (start, deltas, stop), while an upstream may
 * interleave parallel tool calls: the first block not stopped (the head)
 * streams as its pieces come; what comes for a later one waits in its
 * pending until the blocks before it are stopped. */
typedef struct tomsg_block {
    int kind;                   /* TRACK_MESSAGE (a text block) or TRACK_CALL (tool_use) */
    long output_index;          /* Responses: the upstream item's, -1 not given */
    char item_id[SHAPE_ID_MAX]; /* Responses: the upstream item's id */
    char call_id[SHAPE_ID_MAX]; /* TRACK_CALL: the tool_use id */
    sbuf name;                  /* TRACK_CALL */
    sbuf pending;               /* what came while it was not the head */
    size_t got;                 /* bytes of text / arguments come (sent or pending) */
    int started, done;
} tomsg_block;

typedef struct tomsg_state {
    int started;                /* message_start and ping sent */
    char up_id[SHAPE_ID_MAX], id[SHAPE_ID_MAX], model[SHAPE_ID_MAX];
    tomsg_block *v;             /* blocks in the order they began: v[k] is the client's index k */
    size_t n, cap;
    size_t head;                /* the first block not stopped */
    long text;                  /* chat: the text block being written, -1 none */
    track_calls calls;          /* chat: tool calls by their index, each naming its block */
    long calls_seen;
    int refused;                /* a refusal came (stop_reason "refusal") */
    int closed;                 /* chat: finish_reason seen, every block done; message_delta waits for the usage */
    char finish[32];            /* chat: the finish_reason */
    shape_usage usage;
} tomsg_state;

/* Messages -> chat or Responses, streamed (stream_from_messages.c): a
 * content block of the upstream's, by Anthropic's index. */
typedef struct frommsg_block {
    long index;                 /* Anthropic's content block index */
    int kind;                   /* TRACK_MESSAGE text, TRACK_REASONING thinking, TRACK_CALL tool_use, TRACK_OTHER */
    long tool_index;            /* TRACK_CALL: its chat tool_calls index (and the Responses call's key) */
    size_t got;                 /* bytes of text, thinking or arguments given to the client */
    int stopped;
} frommsg_block;

typedef struct frommsg_state {
    int started;                /* message_start seen (or stood for) */
    frommsg_block *v;           /* the blocks begun, in order */
    size_t n, cap;
    long calls;                 /* tool_calls indexes given */
    int thought;                /* some thinking reached the client: the next block's starts after a blank line */
    int closed;                 /* message_delta seen: its stop_reason and usage kept */
    char stop[32];              /* the stop_reason */
    shape_msg_usage usage;
} frommsg_state;

/* Messages stream -> one answer (aggregate.c): a content block gathered. */
typedef struct magg_block {
    long index;
    int kind;                   /* TRACK_MESSAGE, TRACK_REASONING, TRACK_CALL, TRACK_OTHER (left out) */
    char id[SHAPE_ID_MAX];      /* TRACK_CALL: the tool_use id */
    sbuf name;                  /* TRACK_CALL */
    sbuf text;                  /* the text, the thinking, or the input's JSON text */
} magg_block;

typedef struct magg_state {
    char id[SHAPE_ID_MAX], model[SHAPE_ID_MAX];
    magg_block *v;
    size_t n, cap;
    char stop[32];
    shape_msg_usage usage;
} magg_state;

typedef struct track_pair track_pair;

struct dialect_stream {
    const track_pair *pair;
    int include_usage;
    char model[SHAPE_ID_MAX];   /* the model the client asked */
    sse_parser sse;
    sbuf *out;                  /* the caller's, during a feed or the end */
    size_t kept, keep_max;      /* the budget (track.h's comment) */
    int overflow;
    int finished;               /* a terminal or failure event seen: later events are ignored */
    int terminal;               /* the upstream ended its stream properly */
    int failed, fail_status;    /* it ended in an error; the status it stands for */
    sbuf fail_body;             /* aggregate: the error object the client gets */
    int ended;                  /* dialect_stream_end was called */
    int end_result;
    int output_sent;
    long seq;                   /* the next sequence_number of a Responses event we write */
    tochat_state tc;
    torsp_state tr;
    tomsg_state tm;
    ragg_state ra;
    cagg_state ca;
    frommsg_state fm;
    magg_state ma;
};

/* A row of the table of pairs (stream.c): the upstream's events in, the
 * client's bytes out. type is the event's "type" member (else its SSE
 * event name, "" for a chat chunk) and doc its data, an object; "[DONE]"
 * with doc NULL for the chat end marker. end writes what the client still
 * needs and returns dialect_stream_end's result. */
struct track_pair {
    api_kind upstream, client;
    int aggregate;
    void (*event)(dialect_stream *s, const char *type, const json_value *doc);
    int (*end)(dialect_stream *s);
};

/* Charges n bytes to the budget: 1 when they may be kept; 0 (and overflow
 * set) when the budget is spent. */
int track_keep(dialect_stream *s, size_t n);

/* Puts a finished item (json, len bytes) at output_index (a later one at
 * the same index replaces it). 0, or -1 when it was not kept (budget or
 * TRACK_ITEMS_MAX: overflow set). */
int track_items_put(dialect_stream *s, track_items *l, long output_index, const char *json, size_t len);
/* The items, comma-separated, in output index order. */
void track_items_write(const track_items *l, sbuf *out);
void track_items_free(track_items *l);

/* The call of chat index i, or NULL. */
track_call *track_calls_find(track_calls *l, long i);
/* A new call of chat index i (ids empty, output_index -1), or NULL when
 * TRACK_ITEMS_MAX calls are kept already (overflow set). */
track_call *track_calls_add(dialect_stream *s, track_calls *l, long i);
/* The call a chat tool_calls element continues, or a new one (*fresh set).
 * By its "index"; an element without one (some relays send each call
 * whole) is the call with its "id" when there is one, a new call when
 * its id is new, else the last call. NULL when no call can be kept. */
track_call *track_calls_for(dialect_stream *s, track_calls *l, const json_value *elem, int *fresh);
void track_calls_free(track_calls *l);

/* Room for one more element in an array of elem-sized ones (*v, n of
 * them, *cap allocated; grown by doubling, the growth charged to the
 * budget). 1, or 0 with overflow set when TRACK_ITEMS_MAX, the budget or
 * memory says no. */
int track_room(dialect_stream *s, void **v, size_t n, size_t *cap, size_t elem);

/* "event: type\ndata: {"type":"type"": the head of an event whose data
 * is an object named by its type (Responses', Anthropic's); its other
 * members follow. */
void track_event_open(sbuf *out, const char *type);

/* Appends n bytes to b when the budget allows (else overflow, nothing). */
void track_append(dialect_stream *s, sbuf *b, const char *p, size_t n);

/* The stream ended in an error (doc: the error event or chunk): its facts
 * into e (borrowed from doc), the stream marked failed and finished, and
 * the status it stands for kept and returned. */
int track_fail(dialect_stream *s, const json_value *doc, errors_info *e);

/* The choice of a chat chunk for index 0 (n > 1 is refused upstream of
 * here), or NULL. */
const json_value *track_chat_choice(const json_value *doc);

/* Frees what every part of the state holds (not s itself). */
void track_free(dialect_stream *s);

#endif
