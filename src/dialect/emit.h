/* emit.h: what the dialect wing's translators (chat_request.c,
 * responses_request.c, messages_request.c) share to write JSON from a tree
 * with base/sbuf: a member's key with the comma before it, a string node as
 * a literal (its decoded bytes, NULs included), a value written as the JSON
 * text of a string (a tool call's arguments that came as an object), and
 * the depth of a subtree that passes unchanged (json_write) to a deeper
 * place than it came from. (adapt.c writes no tree: it copies the body's
 * own bytes.) */
#ifndef SY_DIALECT_EMIT_H
#define SY_DIALECT_EMIT_H
#include <stddef.h>
#include "base/json.h"
#include "base/sbuf.h"

/* ',' when *count > 0, then "key":; counts the member. */
void emit_key(sbuf *out, size_t *count, const char *key);
/* A JSON_STRING node as a string literal; any other node as "". */
void emit_str(sbuf *out, const json_value *s);
/* v as a string literal holding its JSON text: a string as itself, any
 * other value (an object of arguments) serialized first. NULL: dflt. */
void emit_as_text(sbuf *out, const json_value *v, const char *dflt);
/* 1 when v is a string node equal to s (no NUL inside). */
int emit_is(const json_value *v, const char *s);
/* How deep v nests, counting itself when it is a container; counting
 * stops past limit (the recursion is bounded by it, and by the parser's
 * 128 levels). A translator that moves a subtree (a tool's schema) deeper
 * than it came checks it still parses there. */
int emit_depth(const json_value *v, int limit);

#endif
