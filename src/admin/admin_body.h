/* admin_body.h: the admin API's POST bodies (account actions, the key's
 * preferred account, settings, a sign-in) read into plain values. Pure: no pool, no
 * I/O, so it is fuzzed (tests/fuzz/fuzz_admin_body.c); admin_api.c looks
 * the names up and acts. */
#ifndef SY_ADMIN_BODY_H
#define SY_ADMIN_BODY_H
#include <stddef.h>
#include <stdint.h>

#define ADMIN_BODY_MAX (64u << 10)   /* a larger body is refused unparsed */
#define ADMIN_BODY_ACCOUNT_MSG "'account' must be an account name or id"

/* ADMIN_BODY_LOGIN: the dashboard's sign-in, {"name"?, "sort"?, "models"?}:
 * name a string of 1 to 127 bytes of plain text (no control character), or
 * absent, null or ""; sort an integer (any int, as `account add --sort`),
 * or absent or null; models the account's model list as `account add
 * --models` takes it, a string "a,b" or an array of names, or absent, null,
 * "" or [] for none. These settings are for the account the sign-in adds. */
typedef enum { ADMIN_BODY_ACCOUNT, ADMIN_BODY_PREFER, ADMIN_BODY_SETTINGS, ADMIN_BODY_LOGIN } admin_body_kind;

/* How a body names an account or a key. */
typedef enum {
    ADMIN_REF_NONE,   /* absent, or a type that names nothing (a number no id can be: 1e300, 0, 1.5e19) */
    ADMIN_REF_NAME,   /* name */
    ADMIN_REF_ID,     /* id (1..INT64_MAX) */
    ADMIN_REF_NULL    /* JSON null (prefer: clear the preference) */
} admin_ref_kind;

typedef struct admin_ref {
    admin_ref_kind kind;
    int invalid;      /* absent, or neither a string, a number nor null: ADMIN_BODY_ACCOUNT_MSG (400) */
    int64_t id;
    char *name;       /* ADMIN_REF_NAME: a copy, NUL-terminated (a name holding NUL matches nothing) */
} admin_ref;

typedef struct admin_body {
    admin_ref account;  /* ACCOUNT, PREFER: "account" */
    admin_ref key;      /* PREFER: "key" */
    const char *strategy; /* SETTINGS: the canonical strategy (a static string), NULL not given */
    char *rotation;       /* SETTINGS: a valid rotation (a copy), NULL not given */
    char *name;           /* LOGIN: the account name asked for (a copy), NULL none */
    int has_sort, sort;   /* LOGIN: the account's sort, when given */
    char *models;         /* LOGIN: the model list, normalized ("a,b"), NULL none */
    /* refused: the reply's status, code and message */
    int status;
    const char *code;
    char message[256];
} admin_body;

/* Reads buf (len bytes, not NUL-terminated; len 0 reads as {}) for kind.
 * 0: out holds the values; -1: out->status (400), code and message say why
 * and nothing is held. "account" of an account action must be a name or an
 * id (else 400 invalid_value); prefer's references are only read (the API
 * answers an unknown key 404 before a bad account 400). A number that can
 * be no id is ADMIN_REF_NONE, not invalid: "no such account" (404). Either
 * way admin_body_free(out) afterwards. */
int admin_body_parse(admin_body_kind kind, const char *buf, size_t len, admin_body *out);
void admin_body_free(admin_body *b);

#endif
