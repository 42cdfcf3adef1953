/* shared_conv.c: the turns of stored conversations in Redis: the scripts,
 * the commands, and the reading of a chain's answer (see shared_conv.h). */
#include "shared/shared_conv.h"
#include "store/store_conversations.h"
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHARED_CONV_TRIM_S "256" /* SHARED_CONV_TRIM, in the script's text */

/* Stores a turn unless held (a response id is written once), indexes it
 * by Redis's time to the microsecond (whole seconds tied every turn of one
 * second, and a tie is ordered by the member, "BYTES:ID": the turn just
 * written could go first), then trims the pool's turns: past the TTL,
 * above max_rows or max_bytes, the oldest first, SHARED_CONV_TRIM at most.
 * KEYS: the turn, the order, the bytes. ARGV: account, previous id ("" for
 * none), unix seconds, input, output, ttl s, max_rows, max_bytes, the turn
 * keys' prefix. Answers the turns deleted. */
#define SHARED_CONV_TELL_LUA                                                                              \
    "if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end "                                          \
    "local clock = redis.call('TIME') local now = tonumber(clock[1]) local ttl = tonumber(ARGV[6]) "    \
    "local id = string.sub(KEYS[1], #ARGV[9] + 1) local size = #ARGV[4] + #ARGV[5] "                    \
    "if ARGV[2] == '' then redis.call('HSET', KEYS[1], 'a', ARGV[1], 't', ARGV[3], 'i', ARGV[4], 'o', ARGV[5]) " \
    "else redis.call('HSET', KEYS[1], 'a', ARGV[1], 'p', ARGV[2], 't', ARGV[3], 'i', ARGV[4], 'o', ARGV[5]) end " \
    "redis.call('EXPIRE', KEYS[1], ttl) "                                                                \
    "redis.call('ZADD', KEYS[2], string.format('%.6f', now + tonumber(clock[2]) / 1000000), size .. ':' .. id) " \
    "local total = redis.call('INCRBY', KEYS[3], size) local rows = redis.call('ZCARD', KEYS[2]) "      \
    "local gone = 0 "                                                                                    \
    "while gone < " SHARED_CONV_TRIM_S " do "                                                           \
    "local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES') "                                  \
    "if #first == 0 then break end "                                                                     \
    "if rows <= tonumber(ARGV[7]) and total <= tonumber(ARGV[8]) and tonumber(first[2]) > now - ttl then break end " \
    "redis.call('ZREM', KEYS[2], first[1]) "                                                             \
    "local c = string.find(first[1], ':', 1, true) "                                                     \
    "if c then redis.call('DEL', ARGV[9] .. string.sub(first[1], c + 1)) "                              \
    "total = redis.call('DECRBY', KEYS[3], tonumber(string.sub(first[1], 1, c - 1)) or 0) end "         \
    "rows = rows - 1 gone = gone + 1 end "                                                               \
    "if total < 0 then redis.call('SET', KEYS[3], 0) end "                                               \
    "redis.call('EXPIRE', KEYS[2], ttl) redis.call('EXPIRE', KEYS[3], ttl) return gone"

/* Follows a chain from a turn back through its previous ids: {status, id,
 * then id, account, previous ("" none), seconds, input, output per turn,
 * newest first}. status "ok" (the last is a first turn), "missing" (id is
 * the link not held), or alone with id: "unknown" (the first not held),
 * "deep", "big", "loop". KEYS: the first turn. ARGV: the turn keys'
 * prefix, its id, max depth, max bytes. */
#define SHARED_CONV_CHAIN_LUA                                                                             \
    "local out = {'ok', ''} local id = ARGV[2] local key = KEYS[1] "                                     \
    "local depth = 0 local bytes = 0 local seen = {} "                                                   \
    "while true do "                                                                                     \
    "local v = redis.call('HMGET', key, 'a', 'p', 't', 'i', 'o') "                                       \
    "if not v[1] or not v[4] or not v[5] then "                                                          \
    "if depth == 0 then return {'unknown', id} end out[1] = 'missing' out[2] = id return out end "       \
    "depth = depth + 1 bytes = bytes + #v[4] + #v[5] "                                                   \
    "if depth > tonumber(ARGV[3]) then return {'deep', id} end "                                         \
    "if bytes > tonumber(ARGV[4]) then return {'big', id} end "                                          \
    "out[#out + 1] = id out[#out + 1] = v[1] out[#out + 1] = v[2] or '' out[#out + 1] = v[3] or '0' "   \
    "out[#out + 1] = v[4] out[#out + 1] = v[5] "                                                         \
    "if not v[2] or v[2] == '' then return out end "                                                     \
    "seen[id] = true id = v[2] "                                                                         \
    "if seen[id] then return {'loop', id} end "                                                          \
    "key = ARGV[1] .. id end"

static int shared_conv_id_ok(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    return n > 0 && n < SHARED_CONV_ID;
}

static void shared_conv_arg(shared_conv_cmd *c, const char *s, size_t n)
{
    c->argv[c->argc] = s;
    c->lens[c->argc++] = n;
}

static void shared_conv_carg(shared_conv_cmd *c, const char *s) { shared_conv_arg(c, s, strlen(s)); }

/* "PREFIXconv:" into c->pfx and "PREFIXconv:ID" into key: 0, or -1 when too long. */
static int shared_conv_keys(shared_conv_cmd *c, const char *prefix, const char *id, char *key, size_t n)
{
    int w = snprintf(c->pfx, sizeof c->pfx, "%sconv:", prefix);
    if (w < 0 || (size_t)w >= sizeof c->pfx)
        return -1;
    w = snprintf(key, n, "%s%s", c->pfx, id);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

int shared_conv_tell_cmd(shared_conv_cmd *c, const char *prefix, const conv_link *t, const char *account_name,
                         const store_conversation_limits *l)
{
    memset(c, 0, sizeof *c);
    const char *prev = t->previous_response_id ? t->previous_response_id : "";
    if (l->max_rows <= 0 || l->max_bytes <= 0 || !shared_conv_id_ok(t->response_id) ||
        (*prev && !shared_conv_id_ok(prev)) || !account_name || !*account_name || !t->input_json || !t->output_json ||
        t->input_len > STORE_CONV_TURN_MAX || t->output_len > STORE_CONV_TURN_MAX - t->input_len ||
        (int64_t)(t->input_len + t->output_len) > l->max_bytes)
        return -1;
    if (shared_conv_keys(c, prefix, t->response_id, c->key[0], sizeof c->key[0]) != 0 ||
        snprintf(c->key[1], sizeof c->key[1], "%sconv-order", prefix) >= (int)sizeof c->key[1] ||
        snprintf(c->key[2], sizeof c->key[2], "%sconv-bytes", prefix) >= (int)sizeof c->key[2])
        return -1;
    long days = l->max_days > 0 && l->max_days < 3650 ? (long)l->max_days : 3650;
    long ttl = days * 86400L < SHARED_CONV_TTL_S ? days * 86400L : SHARED_CONV_TTL_S;
    snprintf(c->num[0], sizeof c->num[0], "%.0f", t->created_at > 0 && t->created_at < 1e12 ? t->created_at : 0.0);
    snprintf(c->num[1], sizeof c->num[1], "%ld", ttl);
    snprintf(c->num[2], sizeof c->num[2], "%lld", (long long)l->max_rows);
    snprintf(c->num[3], sizeof c->num[3], "%lld", (long long)l->max_bytes);
    shared_conv_carg(c, "EVAL");
    shared_conv_carg(c, SHARED_CONV_TELL_LUA);
    shared_conv_carg(c, "3");
    for (int i = 0; i < 3; i++)
        shared_conv_carg(c, c->key[i]);
    shared_conv_carg(c, account_name);
    shared_conv_carg(c, prev);
    shared_conv_carg(c, c->num[0]);
    shared_conv_arg(c, t->input_json, t->input_len);
    shared_conv_arg(c, t->output_json, t->output_len);
    shared_conv_carg(c, c->num[1]);
    shared_conv_carg(c, c->num[2]);
    shared_conv_carg(c, c->num[3]);
    shared_conv_carg(c, c->pfx);
    return 0;
}

int shared_conv_forget_cmd(shared_conv_cmd *c, const char *prefix, const char *response_id)
{
    memset(c, 0, sizeof *c);
    if (!shared_conv_id_ok(response_id) || shared_conv_keys(c, prefix, response_id, c->key[0], sizeof c->key[0]))
        return -1;
    shared_conv_carg(c, "DEL");
    shared_conv_carg(c, c->key[0]);
    return 0;
}

int shared_conv_chain_cmd(shared_conv_cmd *c, const char *prefix, const char *response_id, size_t max_depth,
                          size_t max_bytes)
{
    memset(c, 0, sizeof *c);
    if (!shared_conv_id_ok(response_id) || shared_conv_keys(c, prefix, response_id, c->key[0], sizeof c->key[0]))
        return -1;
    snprintf(c->num[0], sizeof c->num[0], "%zu", max_depth);
    snprintf(c->num[1], sizeof c->num[1], "%zu", max_bytes);
    shared_conv_carg(c, "EVAL");
    shared_conv_carg(c, SHARED_CONV_CHAIN_LUA);
    shared_conv_carg(c, "1");
    shared_conv_carg(c, c->key[0]);
    shared_conv_carg(c, c->pfx);
    shared_conv_carg(c, response_id);
    shared_conv_carg(c, c->num[0]);
    shared_conv_carg(c, c->num[1]);
    return 0;
}

/* ---------- the chain's answer ---------- */

/* The turns own their strings as the store's do: one way to free both. */
void shared_conv_chain_free(conv_link *chain, size_t n) { store_conversation_chain_free(chain, n); }

/* A string element of the answer: 1, with its bytes in *s and *n. */
static int shared_conv_str(const redisReply *e, const char **s, size_t *n)
{
    if (!e || e->type != REDIS_REPLY_STRING || (e->len && !e->str))
        return 0;
    *s = e->str ? e->str : "";
    *n = e->len;
    return 1;
}

/* An id of the answer: 1 to 127 bytes, no NUL ("" allowed when empty_ok). */
static int shared_conv_id_elem(const redisReply *e, int empty_ok, char out[SHARED_CONV_ID])
{
    const char *s;
    size_t n;
    if (!shared_conv_str(e, &s, &n) || n >= SHARED_CONV_ID || (!n && !empty_ok) || memchr(s, 0, n))
        return 0;
    memcpy(out, s, n);
    out[n] = '\0';
    return 1;
}

/* A JSON array text, as recorded (the rebuild checks the rest). */
static int shared_conv_array_elem(const redisReply *e, const char **s, size_t *n)
{
    return shared_conv_str(e, s, n) && *n >= 2 && (*s)[0] == '[' && (*s)[*n - 1] == ']';
}

static char *shared_conv_dup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

#define SHARED_CONV_FIELDS 6 /* id, account, previous, seconds, input, output */

int shared_conv_chain_read(const redisReply *r, const char *response_id, size_t max_depth, size_t max_bytes,
                           shared_conv_account_fn acct, void *ud, conv_link **out, size_t *n,
                           char missing[SHARED_CONV_ID], char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    missing[0] = '\0';
    char status[SHARED_CONV_ID], at[SHARED_CONV_ID];
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2 || !r->element ||
        !shared_conv_id_elem(r->element[0], 0, status) || !shared_conv_id_elem(r->element[1], 1, at)) {
        snprintf(err, errlen, "the pool's record answered what its script does not write");
        return -1;
    }
    if (strcmp(status, "ok") != 0 && strcmp(status, "missing") != 0) {
        if (!strcmp(status, "unknown"))
            snprintf(err, errlen, "%.60s is not in the pool's record either", response_id);
        else if (!strcmp(status, "deep"))
            snprintf(err, errlen, "the pool's record of it is longer than %zu turns", max_depth);
        else if (!strcmp(status, "big"))
            snprintf(err, errlen, "the pool's record of it is larger than %zu bytes", max_bytes);
        else if (!strcmp(status, "loop"))
            snprintf(err, errlen, "the pool's record of it loops: %.60s comes back", at);
        else
            snprintf(err, errlen, "the pool's record answered what its script does not write");
        return -1;
    }
    size_t items = r->elements - 2, turns = items / SHARED_CONV_FIELDS;
    if (!turns || items % SHARED_CONV_FIELDS || turns > max_depth) {
        snprintf(err, errlen, "the pool's record answered a chain of the wrong shape");
        return -1;
    }
    conv_link *v = calloc(turns, sizeof *v);
    if (!v) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    size_t bytes = 0;
    char want[SHARED_CONV_ID];
    snprintf(want, sizeof want, "%s", response_id);
    for (size_t k = 0; k < turns; k++) { /* the answer is newest first; v is oldest first */
        redisReply **e = r->element + 2 + k * SHARED_CONV_FIELDS;
        conv_link *l = &v[turns - 1 - k];
        char id[SHARED_CONV_ID], name[SHARED_CONV_ID], prev[SHARED_CONV_ID], secs[SHARED_CONV_ID];
        const char *in, *outp;
        size_t in_len, out_len;
        int last = k + 1 == turns;
        if (!shared_conv_id_elem(e[0], 0, id) || strcmp(id, want) != 0 || !shared_conv_id_elem(e[1], 0, name) ||
            !shared_conv_id_elem(e[2], 1, prev) || !shared_conv_id_elem(e[3], 1, secs) ||
            !shared_conv_array_elem(e[4], &in, &in_len) || !shared_conv_array_elem(e[5], &outp, &out_len) ||
            in_len > max_bytes - bytes || out_len > max_bytes - bytes - in_len ||
            (!last && !prev[0]) ||                                  /* a first turn in the middle */
            (last && !strcmp(status, "ok") && prev[0]) ||           /* "ok" ends at a first turn */
            (last && !strcmp(status, "missing") && strcmp(prev, at) != 0)) {
            shared_conv_chain_free(v, turns);
            snprintf(err, errlen, "the pool's record answered a turn it cannot use (%.60s)", want);
            return -1;
        }
        bytes += in_len + out_len;
        l->response_id = shared_conv_dup(id, strlen(id));
        l->previous_response_id = prev[0] ? shared_conv_dup(prev, strlen(prev)) : NULL;
        l->input_json = shared_conv_dup(in, in_len);
        l->output_json = shared_conv_dup(outp, out_len);
        if (!l->response_id || (prev[0] && !l->previous_response_id) || !l->input_json || !l->output_json) {
            shared_conv_chain_free(v, turns);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        l->input_len = in_len;
        l->output_len = out_len;
        l->account_id = acct ? acct(ud, name) : 0;
        double t = strtod(secs, NULL);
        l->created_at = t >= 0 && t < 1e12 ? t : 0; /* shown only: a bad one is no time */
        memcpy(want, prev, sizeof want);
    }
    if (!strcmp(status, "missing"))
        memcpy(missing, at, SHARED_CONV_ID);
    *out = v;
    *n = turns;
    return 0;
}
