/* json.h: a small strict JSON (RFC 8259) parser to a tree, and a serializer.
 * Used to validate client bodies, read/rewrite top-level fields (model,
 * stream, previous_response_id) and to read SSE event payloads. */
#ifndef SY_JSON_H
#define SY_JSON_H
#include <stddef.h>
#include <stdint.h>
#include "base/sbuf.h"

typedef enum { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json_value json_value;
struct json_value {
    json_type type;
    double num;          /* JSON_NUMBER */
    char *str;           /* JSON_STRING: decoded UTF-8, NUL-terminated; object member key storage too */
    size_t str_len;
    char *key;           /* member name when this value sits in an object, else NULL */
    json_value *child;   /* first element/member of an ARRAY/OBJECT */
    json_value *next;    /* next sibling */
    size_t count;        /* number of children (ARRAY/OBJECT) */
};

/* Parses exactly one JSON document (surrounding whitespace allowed).
 * Returns NULL and fills err (with a byte offset) on invalid input.
 * Nesting deeper than 128 levels is rejected. */
json_value *json_parse(const char *buf, size_t len, char *err, size_t errlen);
/* Like json_parse (the whole input is validated), but containers nested
 * deeper than keep_depth (1 = the root's members only) keep their type and
 * count and no children: memory stays small whatever the input holds.
 * json_write must not be given such a document. */
json_value *json_parse_shallow(const char *buf, size_t len, int keep_depth, char *err, size_t errlen);
/* json_parse_shallow that builds only the root object's members named in
 * keys (all of them when repeated); the others are validated and dropped
 * without being built or copied. For reading a few fields of a large
 * answer (the usage of a plain one). */
json_value *json_parse_members(const char *buf, size_t len, int keep_depth, const char *const *keys, size_t nkeys);
/* Byte span [start, end) of the value of the root object's member key in
 * buf (the last one if repeated); -1 if buf is no valid JSON object holding key. */
int json_member_span(const char *buf, size_t len, const char *key, size_t *start, size_t *end);
/* Scanning without a tree: json_parse's rules checked in place, nothing
 * allocated or decoded, for a reader that wants a few facts of a document
 * and walks it itself. json_scan_value returns the offset just past the
 * value that starts at buf[pos] (no whitespace before it), 0 when json_parse
 * would reject it there; depth is how many arrays and objects are open
 * around it (the 128-level limit counts them). */
size_t json_scan_value(const char *buf, size_t len, size_t pos, int depth);
/* The offset of the first byte at or after pos that is not JSON whitespace.
 * Inline for the common case of none (compact JSON): every byte that is not
 * whitespace is above ' '; json_scan_ws_run walks the rest. */
size_t json_scan_ws_run(const char *buf, size_t len, size_t pos);
static inline size_t json_scan_ws(const char *buf, size_t len, size_t pos)
{
    return pos < len && (unsigned char)buf[pos] > ' ' ? pos : json_scan_ws_run(buf, len, pos);
}
/* Frees a whole document: v must be what json_parse returned (or NULL). */
void json_free(json_value *v);

json_value *json_get(const json_value *obj, const char *key);   /* NULL unless obj is an object holding key */
json_value *json_at(const json_value *arr, size_t i);           /* NULL if out of range */
const char *json_get_str(const json_value *obj, const char *key); /* string member or NULL */
int json_get_bool(const json_value *obj, const char *key, int dflt);
double json_get_num(const json_value *obj, const char *key, double dflt);
/* The one conversion of an outside number (a JSON number, a query value
 * read with strtod) to an integer: 0 with *out set to d truncated toward
 * zero when d is finite and that integer lies within [lo, hi]; -1 (out
 * untouched) otherwise. A C cast of a double outside the integer's range
 * (1e300, NaN) is undefined behaviour, so nothing else casts them. */
int json_num_to_int64(double d, int64_t lo, int64_t hi, int64_t *out);
/* json_num_to_int64 of obj's number member key: -1 when it is absent, not
 * a number, or out of [lo, hi]. */
int json_get_int64(const json_value *obj, const char *key, int64_t lo, int64_t hi, int64_t *out);

/* Replaces (or adds) the string member key of obj with val. obj must be a
 * document root (what json_parse returned). Returns 0, -1 if obj is not an object. */
int json_set_str(json_value *obj, const char *key, const char *val);

/* Serializes v compactly into out (appending). */
void json_write(sbuf *out, const json_value *v);

/* The members of an OpenAI-style error object, without its braces:
 * "message":M,"type":T,"code":C (code NULL: null), so a caller can add
 * members of its own (the gateway's errors, its stream error events, the
 * WebSocket error frames: one spelling of the ecosystem's shape). */
void json_error_members(sbuf *out, const char *message, const char *type, const char *code);

#endif
