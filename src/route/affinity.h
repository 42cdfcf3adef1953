/* affinity.h: session affinity. Prompt caches live per account, so the
 * turns of one Codex session (its session-id / session_id header) should
 * reach the account that served the session's last turn. This table maps a
 * session id to that account: bounded in entries (least recently used goes
 * first) and forgetting a session after an idle time. It lives on the loop
 * thread and is not persisted (a restart costs each session one cache miss). */
#ifndef SY_AFFINITY_H
#define SY_AFFINITY_H
#include <stddef.h>
#include <stdint.h>

typedef struct affinity affinity;

/* max entries (>= 1), idle seconds after which a session is forgotten. */
affinity *affinity_new(size_t max, double idle_s);
void affinity_free(affinity *a);
/* Changes the idle time (entries keep their last use). */
void affinity_set_idle(affinity *a, double idle_s);

/* The account that served the session's last turn, or 0 (unknown, or idle
 * for longer than the idle time: the entry is dropped). Does not count as
 * a use. */
int64_t affinity_get(affinity *a, const char *session, double now);
/* Records that account_id served the session now (a use). Returns 1 when
 * the entry is worth telling other gateways (shared/shared.h): it is new,
 * its account changed, or it was last worth telling more than a quarter of
 * the idle time ago; 0 otherwise (and for a refused argument). */
int affinity_put(affinity *a, const char *session, int64_t account_id, double now);
size_t affinity_count(const affinity *a);

#endif
