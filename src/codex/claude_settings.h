/* claude_settings.h: Claude Code's settings.json as `switchyard claude
 * attach | detach | status` edits it, and the record attach keeps of what
 * it changed. Pure: text in, text out, no I/O (admin/cli_claude.c reads
 * and writes the files, mints the key and takes the lock).
 *
 * Claude Code applies the `env` object of its settings.json to its own
 * environment; attach sets a few of env's members and nothing else. The
 * file is edited in place, never regenerated: a member attach sets has
 * its value replaced (or is added after env's last member, indented like
 * its neighbours); every other byte stays where it was, so an attach
 * followed by a detach gives the file back byte for byte even when other
 * parts of it changed in between. See docs/claude.md. */
#ifndef SY_CLAUDE_SETTINGS_H
#define SY_CLAUDE_SETTINGS_H
#include "base/sbuf.h"
#include <stddef.h>
#include <stdint.h>

#define CLAUDE_ENV_KEYS_MAX 8
#define CLAUDE_PATH_MAX 4096

/* 0 when text is a settings file attach can edit: one JSON object (or
 * nothing but whitespace: an empty file is an empty object), whose `env`,
 * if present, is an object, with no member named twice where attach looks
 * (two `env`s, or one of names twice in env: JSON.parse would keep the
 * last, an editor could pick the other). -1 with err naming the fault. */
int claude_settings_check(const char *text, size_t len, const char *const *names, size_t n, char *err,
                          size_t errlen);

/* env[name] of text: 1 a string (decoded into out), 2 present but not a
 * string (its raw JSON into out), 0 absent (or no env), -1 text does not
 * parse as a settings file. */
int claude_settings_env_get(const char *text, size_t len, const char *name, sbuf *out);

/* One env member attach sets: name = value. On return orig holds the raw
 * JSON text the member had (orig_present 0: there was none). */
typedef struct claude_env_set {
    const char *name, *value;
    int orig_present;
    sbuf orig;
} claude_env_set;

/* Sets each keys[i] in env (created after the last top-level member when
 * absent: *env_created 1) and appends the edited text to out. A new file
 * (len 0, or whitespace) becomes a 2-space-indented object, as Claude Code
 * writes it. -1 with err when text is not a file claude_settings_check
 * accepts. */
int claude_settings_set(const char *text, size_t len, claude_env_set *keys, size_t n, int *env_created, sbuf *out,
                        char *err, size_t errlen);

/* One member to give back: what attach wrote (written, or only its
 * sha256 when it is the platform key) and what was there before. */
typedef struct claude_env_restore {
    const char *name;
    const char *written;     /* NULL: compare by written_sha */
    const char *written_sha; /* sha256 hex of the string written */
    int orig_present;
    const char *orig; /* raw JSON */
    size_t orig_len;
    int changed; /* out (claude_settings_restore): not what attach wrote, so it was left as it is */
} claude_env_restore;

/* 1 if env[k->name] of text still holds what attach wrote, 0 if not (changed
 * or gone), -1 text does not parse. */
int claude_settings_is_written(const char *text, size_t len, const claude_env_restore *k);
/* The three-way restore: each member still holding what attach wrote gets
 * its original raw value back, or is removed when it had none; a member
 * the user changed stays (keys[i].changed set). env goes too when
 * env_created and nothing is left in it. The result is appended to out;
 * *empty is 1 when it is an object with no members at all (a file attach
 * created and nobody added to: the caller removes it). -1 with err. */
int claude_settings_restore(const char *text, size_t len, claude_env_restore *keys, size_t n, int env_created,
                            sbuf *out, int *empty, char *err, size_t errlen);

/* ---------- the record: what attach changed, to give it back ---------- */

typedef struct claude_record_key {
    char name[64];
    int orig_present;
    sbuf orig;            /* raw JSON value text before the first attach */
    sbuf written;         /* the string attach wrote; empty for the key */
    char written_sha[65]; /* the key: only its sha256 (the record never holds a platform key) */
} claude_record_key;

/* States: attaching -> attached -> detaching (then the record is removed),
 * or attaching -> (rolled back: removed, or prev put back). */
typedef struct claude_record {
    char state[16];
    char settings[CLAUDE_PATH_MAX]; /* the file written (a symlink's target) */
    char db[CLAUDE_PATH_MAX];       /* the database holding the key */
    char gateway[512];              /* ANTHROPIC_BASE_URL written */
    int64_t key_id;
    char key_prefix[16];
    char key_sha[65];
    int64_t created_at;
    int original_present, original_mode;
    sbuf original; /* the file before the first attach */
    char original_sha[65];
    int env_created;
    char written_sha[65]; /* sha256 of the file attach wrote */
    int restore_present;  /* detaching: 0 = detach removes the file */
    char restore_sha[65]; /* detaching: sha256 of what detach writes */
    size_t n;
    claude_record_key k[CLAUDE_ENV_KEYS_MAX];
    struct claude_record *prev; /* attaching over an attach: the record to go back to */
} claude_record;

void claude_record_free(claude_record *r);
/* r (and r->prev) as JSON text appended to out. */
void claude_record_write(const claude_record *r, sbuf *out);
/* Parses what claude_record_write wrote into r (zeroed first; free it with
 * claude_record_free). -1 with err when it is not such a record. */
int claude_record_read(const char *text, size_t len, claude_record *r, char *err, size_t errlen);
/* The key of r named name, or NULL. */
claude_record_key *claude_record_key_get(claude_record *r, const char *name);
/* A deep copy of src into dst (prev not copied). */
void claude_record_copy(claude_record *dst, const claude_record *src);

#endif
