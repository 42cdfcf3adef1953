/* conv_link.h: one turn of a conversation the gateway relayed on the
 * Responses API with store: true, as plain data: the response's id, the
 * account that answered it, the response it continued, and what the turn
 * added to the conversation (the request's input items and the response's
 * output items, each a JSON array text). The store reads these back
 * (store/store_conversations.h) and the rebuild reads them
 * (upstream/conversation.h); the type lives here, below both, so the
 * rebuild stays pure and includes base/ only. No functions: the store
 * frees what it hands out (store_conversation_chain_free). */
#ifndef SY_CONV_LINK_H
#define SY_CONV_LINK_H
#include <stddef.h>
#include <stdint.h>

typedef struct conv_link {
    char *response_id;          /* the upstream's id of this turn's response */
    int64_t account_id;         /* the account that answered it */
    char *previous_response_id; /* the turn it continued; NULL for the conversation's first turn */
    char *input_json;           /* the request's input items: a JSON array text */
    size_t input_len;
    char *output_json;          /* the response's output items: a JSON array text */
    size_t output_len;
    double created_at;          /* unix seconds, when the gateway recorded it */
} conv_link;

#endif
