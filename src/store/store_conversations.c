/* store_conversations.c: reading the stored conversations back (see
 * store_conversations.h): whether a turn is recorded, and a whole chain
 * from a response back to its first turn. The writer thread writes them
 * (store_writer.c, store_writer_commit.c). Reads only, on the main
 * connection with busy_timeout 0, with the two statements kept prepared
 * (they run per request that names a previous_response_id). A chain is
 * read inside one read transaction, so a sweep committing meanwhile cannot
 * show half of it; ids already met are kept in a small hash set, so a
 * cycle costs one lookup per turn, not a scan of the turns before. */
#include "store/store_conversations.h"
#include "store/store_internal.h"
#include "base/sbuf.h"
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char store_sql_conv_get[] =
    "SELECT account_id, previous_response_id, input_json, output_json, created_at FROM conversations"
    " WHERE response_id = ?1 AND created_at >= ?2";
static const char store_sql_conv_has[] = "SELECT 1 FROM conversations WHERE response_id = ?1 AND created_at >= ?2";

/* The oldest created_at that has not expired under the current limits. */
static double store_conv_cutoff(store *s)
{
    store_conversation_limits l;
    store_conversation_limits_get(s, &l);
    return (double)time(NULL) - (double)l.max_days * 86400.0;
}

static int store_conv_id_ok(const char *id)
{
    return id && *id && strlen(id) <= STORE_CONV_ID_MAX;
}

/* A statement kept prepared on the main connection; NULL if sqlite refuses. */
static sqlite3_stmt *store_conv_stmt(store *s, sqlite3_stmt **st, const char *sql)
{
    if (!*st && sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
        *st = NULL;
    return *st;
}

int store_conversation_has(store *s, const char *response_id)
{
    if (!store_conv_id_ok(response_id))
        return 0;
    sqlite3_stmt *st = store_conv_stmt(s, &s->conv_has_st, store_sql_conv_has);
    if (!st)
        return -1;
    sqlite3_bind_text(st, 1, response_id, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 2, store_conv_cutoff(s));
    int rc = sqlite3_step(st);
    sqlite3_reset(st); /* a statement left stepping would hold its read snapshot */
    sqlite3_clear_bindings(st);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

/* ---------- ids met so far ---------- */

/* Open addressing over the links' response ids: slot = link index + 1. */
typedef struct conv_seen {
    uint32_t *slot;
    size_t cap; /* a power of two, at least twice the ids held */
} conv_seen;

static size_t conv_seen_home(const conv_seen *t, const char *id) { return (size_t)sbuf_hash(id) & (t->cap - 1); }

/* 1 when id is the response id of one of links[0..n). */
static int conv_seen_has(const conv_seen *t, const conv_link *links, const char *id)
{
    for (size_t i = conv_seen_home(t, id);; i = (i + 1) & (t->cap - 1)) {
        if (!t->slot[i])
            return 0;
        if (strcmp(links[t->slot[i] - 1].response_id, id) == 0)
            return 1;
    }
}

/* Adds links[k]'s id (k + 1 links held now); -1 without memory. */
static int conv_seen_add(conv_seen *t, const conv_link *links, size_t k)
{
    if ((k + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        uint32_t *slot = calloc(cap, sizeof *slot);
        if (!slot)
            return -1;
        free(t->slot);
        t->slot = slot;
        t->cap = cap;
        for (size_t j = 0; j < k; j++)
            conv_seen_add(t, links, j); /* fits: no growth */
    }
    size_t i = conv_seen_home(t, links[k].response_id);
    while (t->slot[i])
        i = (i + 1) & (t->cap - 1);
    t->slot[i] = (uint32_t)(k + 1);
    return 0;
}

/* ---------- the chain ---------- */

/* A heap copy of a text column (its bytes, NUL added); *len its length. */
static char *store_conv_col(sqlite3_stmt *st, int i, size_t *len)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    size_t n = (size_t)sqlite3_column_bytes(st, i);
    char *p = malloc(n + 1);
    if (!p)
        abort(); /* as store_strdup: no useful work without memory */
    if (n)
        memcpy(p, t, n);
    p[n] = '\0';
    if (len)
        *len = n;
    return p;
}

void store_conversation_chain_free(conv_link *chain, size_t n)
{
    for (size_t i = 0; chain && i < n; i++) {
        free(chain[i].response_id);
        free(chain[i].previous_response_id);
        free(chain[i].input_json);
        free(chain[i].output_json);
    }
    free(chain);
}

/* What the walk shares between its steps. */
typedef struct conv_walk {
    store *s;
    sqlite3_stmt *st;
    double cutoff;
    size_t max_depth, max_bytes, bytes;
    conv_link *links; /* newest first while walking */
    size_t n, cap;
    conv_seen seen;
    char *err;
    size_t errlen;
} conv_walk;

/* Reads the turn id into links[n]: 0 read, 1 the turn is not recorded,
 * -1 error (err filled). */
static int conv_walk_step(conv_walk *w, const char *id)
{
    sqlite3_bind_text(w->st, 1, id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(w->st, 2, w->cutoff);
    int rc = sqlite3_step(w->st), out = 1;
    if (rc == SQLITE_ROW) {
        size_t in_len = (size_t)sqlite3_column_bytes(w->st, 2), out_len = (size_t)sqlite3_column_bytes(w->st, 3);
        w->bytes += in_len + out_len;
        void *links = w->links;
        if (w->bytes > w->max_bytes) {
            store_errf(w->err, w->errlen, "the conversation holds more than %zu bytes", w->max_bytes);
            out = -1;
        } else if (store_grow(&links, &w->cap, w->n, sizeof *w->links) != 0) {
            store_errf(w->err, w->errlen, "out of memory");
            out = -1;
        } else {
            w->links = links;
            conv_link *l = &w->links[w->n];
            memset(l, 0, sizeof *l);
            l->response_id = store_strdup(id);
            l->account_id = sqlite3_column_int64(w->st, 0);
            if (sqlite3_column_type(w->st, 1) != SQLITE_NULL && sqlite3_column_bytes(w->st, 1) > 0)
                l->previous_response_id = store_conv_col(w->st, 1, NULL);
            l->input_json = store_conv_col(w->st, 2, &l->input_len);
            l->output_json = store_conv_col(w->st, 3, &l->output_len);
            l->created_at = sqlite3_column_double(w->st, 4);
            w->n++;
            out = 0;
        }
    } else if (rc != SQLITE_DONE) {
        store_errf(w->err, w->errlen, "cannot read the stored conversation: %s", sqlite3_errmsg(w->s->db));
        out = -1;
    }
    sqlite3_reset(w->st);
    sqlite3_clear_bindings(w->st);
    return out;
}

/* Walks from response_id back to the first turn (links newest first). */
static int conv_walk_run(conv_walk *w, const char *response_id)
{
    const char *id = response_id;
    while (id) {
        if (w->n && conv_seen_has(&w->seen, w->links, id)) {
            store_errf(w->err, w->errlen, "the stored conversation of %s loops: %s comes back", response_id, id);
            return -1;
        }
        if (w->n >= w->max_depth) {
            store_errf(w->err, w->errlen, "the conversation of %s has more than %zu turns", response_id, w->max_depth);
            return -1;
        }
        int r = conv_walk_step(w, id);
        if (r < 0)
            return -1;
        if (r > 0 && w->n == 0) {
            store_errf(w->err, w->errlen, "response %s is not recorded: it was not relayed through this gateway with"
                       " store, or it has expired or been deleted", id);
            return -1;
        }
        if (r > 0) {
            store_errf(w->err, w->errlen, "response %s continues %s, which is no longer recorded (expired or deleted)",
                       w->links[w->n - 1].response_id, id);
            return -1;
        }
        if (conv_seen_add(&w->seen, w->links, w->n - 1) != 0) {
            store_errf(w->err, w->errlen, "out of memory");
            return -1;
        }
        id = w->links[w->n - 1].previous_response_id;
    }
    return 0;
}

int store_conversation_chain(store *s, const char *response_id, size_t max_depth, size_t max_bytes, conv_link **out,
                             size_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    if (!store_conv_id_ok(response_id)) {
        store_errf(err, errlen, "'%.40s' cannot be a recorded response id (1 to %d bytes)", response_id ? response_id : "",
                   STORE_CONV_ID_MAX);
        return -1;
    }
    conv_walk w = {.s = s, .cutoff = store_conv_cutoff(s), .max_depth = max_depth, .max_bytes = max_bytes,
                   .err = err, .errlen = errlen};
    w.st = store_conv_stmt(s, &s->conv_get_st, store_sql_conv_get);
    if (!w.st) {
        store_errf(err, errlen, "cannot read the stored conversation: %s", sqlite3_errmsg(s->db));
        return -1;
    }
    char e[128];
    if (store_exec(s->db, "BEGIN", e, sizeof e) != SQLITE_OK) {
        store_errf(err, errlen, "cannot read the stored conversation: %s", e);
        return -1;
    }
    int rc = conv_walk_run(&w, response_id);
    store_exec(s->db, rc == 0 ? "COMMIT" : "ROLLBACK", NULL, 0);
    if (!sqlite3_get_autocommit(s->db))
        store_exec(s->db, "ROLLBACK", NULL, 0);
    free(w.seen.slot);
    if (rc != 0) {
        store_conversation_chain_free(w.links, w.n);
        return -1;
    }
    for (size_t i = 0; i < w.n / 2; i++) { /* oldest first */
        conv_link t = w.links[i];
        w.links[i] = w.links[w.n - 1 - i];
        w.links[w.n - 1 - i] = t;
    }
    *out = w.links;
    *n = w.n;
    return 0;
}
