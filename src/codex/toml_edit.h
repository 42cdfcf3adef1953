/* toml_edit.h: a format-preserving editor for one TOML document (a Codex
 * config.toml). It parses enough TOML to find every statement (comments,
 * [tables], [[arrays of tables]], dotted keys, strings of all four kinds,
 * multi-line arrays, inline tables, CRLF, a UTF-8 BOM) and changes only the
 * bytes of the keys it is asked to set or remove: every other byte of the
 * file stays as it was. A document it cannot parse is refused with the line
 * and the reason. Key paths are arrays of decoded segments, so
 * ["projects", "/home/me/a.b"] names [projects."/home/me/a.b"]. Values are
 * passed and returned as raw TOML text (`"switchyard"`, `0`, `false`). */
#ifndef SY_TOML_EDIT_H
#define SY_TOML_EDIT_H
#include "base/sbuf.h"
#include <stddef.h>

typedef struct toml_doc toml_doc;

/* Parses a copy of buf. NULL with "line N: why" in err when it is not TOML
 * this editor understands. */
toml_doc *toml_parse(const char *buf, size_t len, char *err, size_t errlen);
void toml_free(toml_doc *d);
/* The path comparisons the last parse or edit's indexing made: a test's
 * measure that indexing stays linear in the number of statements. Keys and
 * table names of more than 128 parts are refused, so each statement's work
 * is bounded. */
size_t toml_index_work(const toml_doc *d);
/* The statements the last parse or edit parsed: every one after a parse,
 * only those around the edit after an edit (a test's measure that an edit
 * does not re-index the whole document). */
size_t toml_index_statements(const toml_doc *d);
/* 1 if the index is what indexing the current bytes afresh gives: a
 * test's proof that updating it in place after an edit is exact. */
int toml_index_check(const toml_doc *d);
/* The current bytes of the document (after any edits). */
const char *toml_bytes(const toml_doc *d, size_t *len);

/* The raw value text of the key at path: 1 found (raw filled), 0 absent,
 * -1 the path lies inside a value this editor will not edit (an inline
 * table, an array of tables), with why in err. */
int toml_get(const toml_doc *d, const char *const *path, size_t n, sbuf *raw, char *err, size_t errlen);
/* Sets the key at path to raw: replaces the value bytes when the key
 * exists; otherwise adds `key = raw` after the last key of its table (a
 * top-level key before the first table), or a new [table] at the end. 0 ok,
 * -1 (err filled, document unchanged) when the path cannot be edited. */
int toml_set(toml_doc *d, const char *const *path, size_t n, const char *raw, char *err, size_t errlen);
/* Removes the whole statement (its lines) of the key at path: 1 removed,
 * 0 absent, -1 error. */
int toml_remove(toml_doc *d, const char *const *path, size_t n, char *err, size_t errlen);
/* 1 if a [table] header with exactly this path exists. */
int toml_has_header(const toml_doc *d, const char *const *path, size_t n);
/* 1 if any key or header lives under path (as a table, by any syntax). */
int toml_has_table(const toml_doc *d, const char *const *path, size_t n);
/* Removes the [table] header at path with the blank line before it when its
 * table holds nothing but blank lines: 1 removed, 0 kept or absent. */
int toml_remove_empty_table(toml_doc *d, const char *const *path, size_t n);

/* An edit that adds lines after an unterminated last line gives it a line
 * ending; when out (the edited bytes) ends with orig's unterminated last
 * line plus a line ending again, this takes the line ending away. */
void toml_final_newline_restore(sbuf *out, const char *orig, size_t n);

/* A comparable form of a raw value: single-line strings decoded (so "a" and
 * 'a' compare equal), anything else as written. Appends to out. */
void toml_value_norm(const char *raw, size_t n, sbuf *out);
/* Appends s as a TOML basic string ("..." with escapes). */
void toml_quote(sbuf *out, const char *s);
/* Appends the decoded content when raw is a single-line string and returns
 * 0; -1 (out untouched) for any other value. */
int toml_string_decode(const char *raw, size_t n, sbuf *out);

#endif
