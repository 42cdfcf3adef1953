/* shared_conv.h: the turns of stored conversations in Redis, so that a
 * conversation can move to another account on any gateway of the pool,
 * not only on the one that relayed its turns (docs/scale-out.md, "Stored
 * conversations"). Pure: the commands that write a turn, forget one and
 * read a chain back, and the reading of that answer with every field
 * checked; shared/shared_redis.c sends them on its link. Fuzzed
 * (tests/fuzz/fuzz_shared_conv.c).
 *
 *   sy:{POOL}:conv:ID      hash, one turn: a (the account's name), p (the
 *                          response it continued; absent for a first turn),
 *                          t (unix seconds), i (input items), o (output
 *                          items, JSON array texts); EX min(7 days, max_days)
 *   sy:{POOL}:conv-order   sorted set, the pool's turns: "BYTES:ID" scored
 *                          by Redis's time (s) of their write
 *   sy:{POOL}:conv-bytes   their input and output bytes together
 *
 * A turn is written by one script (EVAL) that also trims the pool's turns
 * to the retention's max_rows and max_bytes, the oldest first, and drops
 * those past the TTL (at most SHARED_CONV_TRIM per write): the record in
 * Redis is bounded as the local one is. A chain is read by one script that
 * follows the links from a response id, bounded in depth and bytes: one
 * round trip whatever the chain's length. The scripts touch turn keys they
 * do not declare (the links); the pool's hash tag keeps them on the
 * declared keys' shard. */
#ifndef SY_SHARED_CONV_H
#define SY_SHARED_CONV_H
#include <stddef.h>
#include <stdint.h>
#include "base/conv_link.h"
#include "store/store.h"

struct redisReply;

#define SHARED_CONV_TTL_S (7 * 86400) /* as the owner records: a chain without its owner does not move */
#define SHARED_CONV_TRIM 256          /* turns one write deletes at most */
#define SHARED_CONV_ID 128            /* id buffers: 127 bytes and the NUL (as the store's) */
#define SHARED_CONV_ARGS 16

/* One command: argv points into the caller's texts and into the buffers. */
typedef struct shared_conv_cmd {
    int argc;
    const char *argv[SHARED_CONV_ARGS];
    size_t lens[SHARED_CONV_ARGS];
    char key[3][256]; /* the turn's, the order's, the bytes' */
    char pfx[128];    /* sy:{POOL}:conv: */
    char num[4][32];
} shared_conv_cmd;

/* The write of turn (answered by the account named account_name) under
 * prefix ("sy:{POOL}:"); first writer wins (a response id is written
 * once). Returns 0, or -1 when it is not shared: recording off (max_rows
 * or max_bytes 0), a turn above max_bytes or STORE_CONV_TURN_MAX, an id
 * empty or longer than 127 bytes, no account name. cmd points into turn
 * until sent. */
int shared_conv_tell_cmd(shared_conv_cmd *cmd, const char *prefix, const conv_link *turn, const char *account_name,
                         const store_conversation_limits *l);
/* DEL of the turn of response_id (DELETE /v1/responses/{id}); 0 / -1 (no id). */
int shared_conv_forget_cmd(shared_conv_cmd *cmd, const char *prefix, const char *response_id);
/* The walk from response_id back through previous_response_id: at most
 * max_depth turns and max_bytes of input and output. 0 / -1 (no id). */
int shared_conv_chain_cmd(shared_conv_cmd *cmd, const char *prefix, const char *response_id, size_t max_depth,
                          size_t max_bytes);

/* This instance's id of the account named name; 0 for one it does not have. */
typedef int64_t (*shared_conv_account_fn)(void *ud, const char *name);

/* Reads the walk's answer r for response_id. 0: *out (free with
 * shared_conv_chain_free) holds *n >= 1 turns, oldest first as
 * store_conversation_chain gives them, (*out)[*n - 1].response_id is
 * response_id, each account_id from acct (0: not an account of this
 * instance), and missing is "" when (*out)[0] is the conversation's first
 * turn, else the id it continued that Redis does not hold (the caller may
 * hold it). -1 with err (*out NULL, *n 0): response_id not held, too deep,
 * too large, a loop, or an answer that is not the script's (a field
 * missing or of the wrong type, an id too long, links that do not link,
 * an input or output that is not a JSON array text, more turns or bytes
 * than asked for). */
int shared_conv_chain_read(const struct redisReply *r, const char *response_id, size_t max_depth, size_t max_bytes,
                           shared_conv_account_fn acct, void *ud, conv_link **out, size_t *n,
                           char missing[SHARED_CONV_ID], char *err, size_t errlen);
void shared_conv_chain_free(conv_link *chain, size_t n);

#endif
