/* shared_redis_internal.h: what the three files of the Redis implementation
 * of shared.h share (shared_redis.c: the link's turns, rests, the resync,
 * the interface's table, sealing; shared_logins.c: logins, the refresh
 * lease and once-per-pool jobs; shared_records.c: what the request path
 * asks the pool and waits for: records, concurrency slots, the rotation's
 * positions, stored turns). The instance's state, its calls and the small
 * helpers every part uses. Included by those three files only. */
#ifndef SY_SHARED_REDIS_INTERNAL_H
#define SY_SHARED_REDIS_INTERNAL_H
#include "shared/shared_redis.h"
#include "shared/shared_deadline.h"
#include "core/redis_script.h"
#include "shared/shared_state.h"
#include "shared/shared_conv.h"
#include "route/affinity.h"
#include "shared/shared_rotation.h"
#include "core/redis_link.h"
#include "base/log.h"
#include "base/sbuf.h"
#include "base/seal.h"
#include "obs/metrics.h"
#include <hiredis/hiredis.h>
#include <stdint.h>

#define SHARED_START_GRACE_S 3.0   /* a refresh at start-up waits this long for the link */
#define SHARED_LEASE_EXTRA_MS 10000 /* a refresh lease lives oauth_timeout_ms + this */
#define SHARED_SCAN_COUNT "500"
#define SHARED_OWNER_TTL_S "604800" /* 7 days: as long as the store keeps an owner row */
/* A slot not renewed for SWITCHYARD_REDIS_SLOT_TTL_S (30 by default) is
 * free (its instance died); held slots are renewed three times per TTL, so
 * a live one survives two renewals lost (shared_slot_ttl_s below). */
/* Takes a slot when fewer than the limit are held (the expired dropped
 * first), on Redis's clock so the instances' clocks do not matter:
 * {1, held} or {0, held}. */
#define SHARED_SLOT_TAKE_LUA                                                                      \
    "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) " \
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) "                                          \
    "local n = redis.call('ZCARD', KEYS[1]) "                                                        \
    "if n < tonumber(ARGV[2]) then "                                                                 \
    "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1]) "                                 \
    "redis.call('PEXPIRE', KEYS[1], ARGV[3]) return {1, n + 1} end "                                 \
    "return {0, n}"
/* Renews a slot still held (one dropped as expired stays dropped). */
#define SHARED_SLOT_RENEW_LUA                                                                     \
    "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) " \
    "if redis.call('ZSCORE', KEYS[1], ARGV[1]) then "                                                \
    "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1]) "                                 \
    "redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end return 0"
/* A job's lease: taken when free, renewed when this instance holds it. */
#define SHARED_LEASE_TAKE_LUA                                                                     \
    "local cur = redis.call('GET', KEYS[1]) "                                                        \
    "if cur == false or cur == ARGV[1] then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end " \
    "return 0"
#define SHARED_USAGE_TTL_S "604800"
#define SHARED_RELEASE_LUA \
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"

typedef struct shared_redis shared_redis;

/* A slot this instance took (or is taking): until given back and answered. */
typedef struct shared_slot {
    struct shared_slot *next;
    uint64_t seq;
    char key[320];          /* sy:{POOL}:inflight:NAME */
    char member[56];        /* INSTANCE:SEQ */
    char limit[24];
    int answered, granted, given;
    int sent_text;          /* the take went as EVAL with the script's text (after NOSCRIPT) */
} shared_slot;

/* A refresh_begin, or an ask, in flight (shared_call). */
struct shared_call {
    shared_call *next;      /* in pending, while waiting for the link */
    shared_redis *sr;
    shared_refresh_fn fn;   /* NULL: cancelled */
    /* an ask (ask != NULL): its records, its deadline, its caller */
    shared_ask *ask;
    shared_ask_done_fn done;
    shared_deadline dl;      /* an ask's, a slot's or a chain's wait: open while the caller waits */
    /* a slot_take (slot != NULL) */
    shared_slot *slot;
    shared_slot_fn slot_fn;
    /* a chain_get (chain set) */
    int chain;
    shared_chain_fn chain_fn;
    size_t chain_depth, chain_bytes;
    char chain_id[SHARED_CONV_ID];
    void *ud;
    char name[256];
    int64_t local_last_refresh;
    uint64_t local_refresh_hash; /* sbuf_hash of the refresh token it has: not the secret itself */
    double queued_at;
    int replies, granted, lost;
    char *login;            /* the GET's answer, wiped */
    size_t login_len;
    /* a lease_take (is_lease): its callback, NULL once cancelled */
    int is_lease;
    shared_lease_fn lease_fn;
    char lease_key[320];
    long lease_ttl_ms;
    /* a cursor_take (rot != NULL) */
    shared_rotation_wait *rot;
    shared_cursor_fn cursor_fn;
};

/* A login seen at a resync: which instance's is newer. */
typedef struct shared_seen {
    char *name;
    int64_t last_refresh_at;
} shared_seen;

struct shared_redis {
    shared base;
    redis_link *link;
    char prefix[64];        /* sy:{POOL}: */
    char channel[96];
    char id[33];            /* this run's instance id: the owner of its leases, the from of its messages */
    double started;         /* monotonic */
    shared_call *pending;   /* refreshes waiting for the first connect */
    struct event *tick;
    int scanning;           /* a resync in progress (its generation) */
    unsigned long scan_gen;
    /* the pool's data lost while the link stayed up (FLUSHALL, eviction, a
     * replica promoted empty): the pool's generation (sy:{POOL}:gen, a
     * token the first instance to come up writes, SET NX) is read every
     * SHARED_LOSS_CHECK_TICKS ticks; once seen since the link came up, its
     * absence, or another token (an instance that noticed first wrote a
     * new one), is the loss, and the link's turn is run again (a resync) */
    int layout_seen;
    char gen[48];           /* the generation seen ("" none yet) */
    int loss_asking;
    unsigned ticks;
    shared_seen *seen;
    size_t nseen, capseen;
    shared_slot *slots;     /* slots taken and not yet given back and answered */
    uint64_t slot_seq;
    double slots_renewed;   /* monotonic */
    int closing;
    shared_redis_ext ext[SHARED_REDIS_EXT_MAX]; /* shared_config.c and the like */
    size_t next;
    /* the pool's key (SWITCHYARD_REDIS_KEY): logins and config texts sealed */
    unsigned char key[SEAL_KEY_LEN];
    int has_key;
    int seen_sealed;         /* a sealed value this instance cannot open was seen: it writes no login */
    int said_nokey, said_badkey;
    shared_rotation *rot;   /* the balanced rotation's positions */
    redis_script slot_take, slot_renew; /* the slot scripts, by their SHA1 (core/redis_script.h) */
};

/* --- shared_redis.c: helpers --- */
double shared_mono(void);
pool_account *shared_find(shared_redis *sr, const char *name);
void shared_key(const shared_redis *sr, const char *kind, const char *name, sbuf *out);
int shared_key_buf(const shared_redis *sr, const char *kind, const char *key, char *buf, size_t n);
/* A command of C strings (at most 8); fn NULL: the answer ignored (fire and forget). */
int shared_cmd(shared_redis *sr, redis_reply_fn fn, void *ud, int argc, const char **argv);
int shared_redis_open(shared *sh, const char *aad, const char *p, size_t n, sbuf *out);
int shared_redis_seal(shared *sh, const char *aad, const char *plain, size_t n, sbuf *out);

/* --- shared_logins.c --- */
int shared_login_open(shared_redis *sr, const char *name, const char *p, size_t n, sbuf *out);
void shared_login_heard(shared_redis *sr, const char *name, const char *text, size_t len);
void shared_login_fetch(shared_redis *sr, const char *name);
void shared_login_tell(shared_redis *sr, const char *name, const account *a);
shared_call *shared_redis_lease_take(shared *sh, const char *job, const char *id, long ttl_ms, shared_lease_fn fn, void *ud);
void shared_redis_lease_release(shared *sh, const char *job, const char *id);
void shared_redis_usage_told(shared *sh, const pool_account *pa);
shared_call *shared_redis_refresh_begin(shared *sh, const pool_account *pa, shared_refresh_fn fn, void *ud);
void shared_redis_refresh_end(shared *sh, const char *account_name, const account *fresh);
void shared_pending_flush(shared_redis *sr, int give_up);

/* --- shared_records.c --- */
void shared_redis_owner_told(shared *sh, const char *key, int64_t account_id);
void shared_redis_session_told(shared *sh, const char *session, int64_t account_id);
void shared_session_heard(shared_redis *sr, const char *session, const json_value *body);
shared_call *shared_redis_ask(shared *sh, shared_ask_build_fn build, shared_ask_done_fn done, void *ud);
shared_call *shared_redis_slot_take(shared *sh, const pool_account *pa, uint64_t *slot, shared_slot_fn fn, void *ud);
void shared_redis_slot_give(shared *sh, uint64_t seq);
void shared_scripts_load(shared_redis *sr);
void shared_slots_renew(shared_redis *sr);
shared_call *shared_redis_cursor_take(shared *sh, const char *key, const char *model, int64_t *pos, shared_cursor_fn fn, void *ud);
void shared_redis_turn_told(shared *sh, const conv_link *turn);
void shared_redis_turn_forgot(shared *sh, const char *response_id);
shared_call *shared_redis_chain_get(shared *sh, const char *response_id, size_t max_depth, size_t max_bytes, shared_chain_fn fn, void *ud);

#endif
