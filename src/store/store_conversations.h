/* store_conversations.h: reading back the conversations the gateway
 * relayed with store: true (written through the writer thread, see
 * store.h: store_writer_put_conversation, store_conversation_delete, the
 * retention), so that a conversation whose account cannot serve can be
 * rebuilt for another one (upstream/conversation.h). Reads run on the main
 * connection with busy_timeout 0 (in WAL mode a reader never waits for
 * the writer) and are bounded by the caller's depth and byte limits, so
 * the loop may call them; a turn older than the retention's max_days reads
 * as gone even before the writer's sweep deletes it. */
#ifndef SY_STORE_CONVERSATIONS_H
#define SY_STORE_CONVERSATIONS_H
#include <stddef.h>
#include "base/conv_link.h"
#include "store/store.h"

/* 1 when the turn of response_id is recorded (and not expired), 0 when
 * not, -1 on a database error. One indexed lookup. */
int store_conversation_has(store *s, const char *response_id);

/* The conversation that ends at response_id, from its first turn to that
 * one (oldest first: (*out)[*n - 1].response_id is response_id), followed
 * through previous_response_id, read in one snapshot. Returns 0 with *out
 * (free with store_conversation_chain_free) and *n >= 1, or -1 with *out
 * NULL, *n 0 and err saying why: response_id unknown (not relayed through
 * this gateway with store, or expired or deleted), a turn in the middle no
 * longer recorded, a cycle (an id met twice), more than max_depth turns,
 * more than max_bytes of input and output together, or a database error. */
int store_conversation_chain(store *s, const char *response_id, size_t max_depth, size_t max_bytes, conv_link **out,
                             size_t *n, char *err, size_t errlen);
void store_conversation_chain_free(conv_link *chain, size_t n);

#endif
