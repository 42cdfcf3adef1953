/* redis_reply.h: bounded reply objects for hiredis's reader. hiredis 0.14
 * allocates an array's element table from the count its header declares,
 * before any element arrives (`*2000000000\r\n`: 16 GB); these object
 * functions build the same redisReply objects as hiredis's own (freed with
 * freeReplyObject) but refuse a reply that declares more than
 * REDIS_REPLY_MAX_ELEMENTS elements in all (its nested arrays counted) or
 * nests arrays deeper than REDIS_REPLY_MAX_DEPTH. A refusal is a reader
 * error (hiredis says "Out of memory"; the note says what was refused), so
 * the connection drops like any broken link (docs/scale-out.md, "Trust
 * boundary"). A bulk string is not allocated before its bytes arrive. */
#ifndef SY_REDIS_REPLY_H
#define SY_REDIS_REPLY_H
#include <stddef.h>

struct redisReader;

/* The largest legitimate answer is the config hash's HGETALL (two
 * elements a row); 1<<20 elements is 8 MB of element tables at most. */
#define REDIS_REPLY_MAX_ELEMENTS (1 << 20)
/* SCAN's answer nests two deep; nothing the gateway asks nests more. */
#define REDIS_REPLY_MAX_DEPTH 4
#define REDIS_REPLY_NOTE 128

/* Installs the bounded functions on r (a context's c->reader, or a reader
 * of redisReaderCreate) and the default maximum idle buffer. note: NULL,
 * or REDIS_REPLY_NOTE bytes that receive why a reply was refused (left as
 * they are otherwise); it must outlive the reader's parsing. */
void redis_reply_bound(struct redisReader *r, char *note);

#endif
