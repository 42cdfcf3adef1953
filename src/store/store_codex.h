/* store_codex.h: the journal of `switchyard codex attach` (table
 * codex_attach, migration 4 in store_schema.c). A row is written before the
 * Codex config file is touched and records everything detach and crash
 * recovery need: the original bytes, their hash and mode, the hash of what
 * attach wrote, the keys it set (JSON, see codex_attach.c) and the platform
 * key it created. States: attaching -> attached -> detaching -> detached,
 * or attaching -> rolled_back. CLI path only (synchronous writes). */
#ifndef SY_STORE_CODEX_H
#define SY_STORE_CODEX_H
#include "base/sbuf.h"
#include "store/store.h"
#include <stdint.h>

#define CODEX_PATH_MAX 4096

typedef struct codex_journal {
    int64_t id;
    char home[CODEX_PATH_MAX];        /* the Codex home directory, absolute */
    char config_path[CODEX_PATH_MAX]; /* the file written (a symlink's target) */
    char state[16];
    char gateway_url[512];            /* base_url written, e.g. http://127.0.0.1:8787/v1 */
    int64_t key_id;
    char key_prefix[16];
    sbuf original;                    /* the file before attach */
    int original_present;             /* 0: there was no file */
    char original_sha[65];            /* "" when absent */
    int original_mode;
    char written_sha[65];
    sbuf keys;                        /* JSON text */
    char restore_sha[65];             /* detaching: what detach writes ("" = removes the file) */
    char restore_from_sha[65];        /* detaching: the file detach started from ("" = none) */
    int64_t created_at, updated_at;
} codex_journal;

void store_codex_journal_free(codex_journal *j);
/* In one transaction: the platform key (name, hash, j->key_prefix) and the
 * journal row in state 'attaching'. Fills j->id and j->key_id. With
 * handover_from (the id of this home's journal in 'detaching', whose file
 * is already given back, an attach moving to another gateway address), no
 * key is made: j->key_id, that journal's key, must still be live and
 * passes to the new journal, and that journal becomes 'detached' in the
 * same commit without revoking it (-1, nothing written, otherwise). */
int store_codex_begin(store *s, codex_journal *j, const char *key_name, const char *key_hash, int64_t handover_from,
                      char *err, size_t errlen);
/* 1 if key key_id is live and its hash is key_hash, 0 if not, -1 error. */
int store_codex_key_is_live(store *s, int64_t key_id, const char *key_hash);
/* The unfinished journal of a home: 1 found (j filled), 0 none, -1 error. */
int store_codex_open_get(store *s, const char *home, codex_journal *j);
/* Calls fn for the home of every unfinished journal; -1 on error. */
int store_codex_open_homes(store *s, void (*fn)(void *ud, const char *home), void *ud);
/* Moves to state ('attached' or 'detaching'); restore and from are
 * recorded for 'detaching' (NULL = the file is absent). */
int store_codex_set_state(store *s, int64_t id, const char *state, const char *restore, const char *from, char *err,
                          size_t errlen);
/* In one transaction: revokes the journal's platform key and moves to the
 * final state ('detached' or 'rolled_back'). */
int store_codex_close(store *s, const codex_journal *j, const char *state, char *err, size_t errlen);

#endif
