/* refuse.h: the refusals of the dialect wing's request side: the error a
 * translation gives for a field it cannot carry (dialect_error, a 400 that
 * names the field as OpenAI writes its path), and the lists of a
 * policy_dialect read as names (the ignore list that waives a refusal, the
 * drop and rename lists adapt applies).
 *
 * dialect_error lives here rather than in dialect.h so the translators
 * (chat_request.c, responses_request.c) and adapt.c can fill it without
 * including dialect.h, whose dialect.c includes them: two modules that
 * include each other would be a cycle (tests/layers/check_layers.py).
 * dialect.h includes this header, so its users see the same type.
 *
 * Names in rules->ignore (policies/dialect.lua): a top-level field by its
 * name ("n", "stop", "include", "store"); a member of a top-level object
 * as "parent.member" ("reasoning.summary"); a tool by "tools.<type>"
 * ("tools.web_search", "tools.custom"), which also leaves out the history
 * items of that hosted tool (web_search_call); a content part by
 * "content.<type>" ("content.input_audio"); a message role by
 * "role.<role>" ("role.function"); a Responses input item by
 * "input.<type>" ("input.item_reference"). */
#ifndef SY_DIALECT_REFUSE_H
#define SY_DIALECT_REFUSE_H
#include <stddef.h>
#include "policy/policy.h"

/* A request the gateway refuses to translate: the status (400), the field
 * it names (param, e.g. "n", "messages[2].content[0].type") and a message
 * in the ecosystem's words. */
typedef struct dialect_error {
    int status;
    char param[96];
    char code[48];       /* "unsupported_parameter", "invalid_value", ... */
    char message[320];
} dialect_error;

/* The codes a refusal carries (OpenAI's own words for these cases). */
#define REFUSE_UNSUPPORTED "unsupported_parameter" /* a field the other dialect cannot carry */
#define REFUSE_INVALID_TYPE "invalid_type"          /* a field of the wrong JSON type */
#define REFUSE_INVALID_VALUE "invalid_value"        /* a value the translation does not know */
#define REFUSE_MISSING "missing_required_parameter" /* a field the translation needs */

/* err->param = the path printf makes of fmt ("messages[%zu].role"), cut
 * on a UTF-8 boundary when it does not fit. err may be NULL. */
void refuse_param(dialect_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Fills err's status (400), code and message (printf of fmt, cut on a
 * UTF-8 boundary); param stays as refuse_param set it. Returns -1, so a
 * translator can `return refuse_set(...)`. err may be NULL. */
int refuse_set(dialect_error *err, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* 1 when name is one of the n names of list (fixed-size rows of the
 * policy's struct; a row without its NUL matches nothing). */
int refuse_listed(const char (*list)[POLICY_DIALECT_NAME_MAX], size_t n, const char *name);
/* 1 when rules (NULL: none) lists name in ignore: the field may be left
 * out instead of refused. */
int refuse_ignores(const policy_dialect *rules, const char *name);
/* refuse_ignores of prefix followed by name ("tools." "web_search"), for
 * names that come from the request (cut names never match). */
int refuse_ignores2(const policy_dialect *rules, const char *prefix, const char *name);

/* s (a name from the request: it may hold anything) made fit to quote in
 * a message: into dst[n], cut on a UTF-8 boundary, control characters as
 * '?'. Returns dst. */
const char *refuse_quote(char *dst, size_t n, const char *s);

#endif
