/* blobs.h: account-bound opaque blobs in OpenAI Responses API bodies. An
 * answer's output items may carry strings only the minting account can read
 * ("encrypted_content" of reasoning and compaction items, and of encrypted
 * content parts); clients replay them in the next request's "input". This
 * module finds them in answers (blobs_minted), finds them in a request
 * (blobs_scan) and writes the request without the ones the caller marks
 * (blobs_rewrite). Pure: no I/O, no state between calls, so it is fuzzed.
 *
 * Member names are matched as their raw bytes, quotes included
 * ("encrypted_content", "input", "type"): a name spelled with escapes
 * (\u005f) is not recognised. No client writes names that way, and a blob
 * missed by it only reaches an account that refuses it. The quick test
 * before any parse (memmem) looks for "encrypted_content" with its quotes
 * too: Codex sends "include":["reasoning.encrypted_content"] in every
 * request, which must not make every request a full scan. */
#ifndef SY_BLOBS_H
#define SY_BLOBS_H
#include <stddef.h>
#include "base/sbuf.h"

#define BLOBS_KEY_SIZE 36 /* "bl:" + 32 hex + NUL */
#define BLOBS_MAX_ITEMS 100000
#define BLOBS_MAX_BLOBS 10000
#define BLOBS_MAX_DEPTH 64

/* The key of one blob: "bl:" + 32 lower-case hex, a 128-bit hash (two
 * seeded 64-bit FNV-1a) of the blob's decoded string value's length, its
 * first 64 and its last 64 bytes (the whole value when shorter). Cheap on
 * purpose (a few hundred bytes hashed whatever the blob's size): blobs are
 * Fernet tokens (version, time stamp and a random 128-bit IV at the head,
 * an HMAC-SHA256 at the tail), so head + tail + length tell one from
 * another. It is not a cryptographic hash: a forged value that collides
 * with another account's blob only makes the gateway send that value to
 * the wrong account, which cannot verify it and refuses the request; the
 * gateway never decrypts or trusts a blob's content. */
void blobs_key(const char *s, size_t n, char key[BLOBS_KEY_SIZE]);

/* Answers: calls fn(ud, key) for each string value of an "encrypted_content"
 * member anywhere in json[0..len) (a plain response object, or one SSE
 * event's data such as response.output_item.done / response.completed).
 * Returns the count. Returns 0 at once, without parsing, when the text holds
 * no "encrypted_content" (memmem). Values that are not strings are ignored.
 * Malformed JSON (or nesting deeper than BLOBS_MAX_DEPTH): whatever was
 * found before the error. */
size_t blobs_minted(const char *json, size_t len, void (*fn)(void *ud, const char *key), void *ud);

/* Requests, the cheap first look: calls fn(ud, key) for the value after
 * each "encrypted_content" member name found by memmem alone (no parse; the
 * same bytes as a string value, a part's "type", are passed over) and
 * returns how many it found; -1 when one is not followed by a plain string
 * (an escape inside it, another type, a cut body): the caller must then
 * assume any blob may be there and scan. The key equals blobs_key of the
 * value for every real blob; the token at the end of another member's name
 * (`"note \"encrypted_content"`) yields a key of no blob, which can only
 * make the caller scan when it need not. So the proxy learns, for about the
 * price of the memmem, whether a request carries any blob its target did
 * not mint, and pays for blobs_scan only then. */
int blobs_quick(const char *body, size_t len, void (*fn)(void *ud, const char *key), void *ud);

enum { BLOB_KEEP = 0, BLOB_DROP = 1, BLOB_TEXT = 2 };

typedef struct blob_ref {
    char key[BLOBS_KEY_SIZE];
    char item_type[32];   /* the input item's "type" ("" when none; cut on a character boundary if long) */
    int in_part;          /* 1: the blob sits in an element of an array inside the item (an encrypted content part) */
    size_t item;          /* index of the item in "input" */
    size_t item_off, item_len; /* the item's bytes in the body */
    size_t part_off, part_len; /* in_part: the array element's bytes */
    int action;           /* set by the caller: BLOB_KEEP, BLOB_DROP or BLOB_TEXT */
} blob_ref;

/* Zero it before the first blobs_scan ({0}); it may be scanned into again
 * (the array is reused) and is released with blobs_scan_free. */
typedef struct blob_scan {
    blob_ref *v;          /* in body order */
    size_t n, cap;
    size_t items;         /* items in "input" */
    size_t len;           /* added: the length of the body scanned (blobs_rewrite checks it) */
} blob_scan;

/* Requests: finds the blobs in the top-level "input" array of a request
 * body (a JSON object). Returns 0 with scan->n == 0 and without parsing the
 * body when it holds no "encrypted_content" (memmem first: most bodies have
 * none, and a body without blobs must not be parsed in full). Returns 0 with
 * the blobs found (every action BLOB_KEEP); -1 (scan->n == 0) when the body
 * is not a well-formed JSON object or exceeds the limits (BLOBS_MAX_ITEMS
 * items, BLOBS_MAX_BLOBS blobs, nesting depth BLOBS_MAX_DEPTH): the caller
 * then sends the body untouched. A blob is the string value of an
 * "encrypted_content" member of an input item (an object), or of an object
 * that is an element of an array member of an input item; a value that is
 * not a string is not a blob. An "input" that is not an array, or absent:
 * 0 blobs. With "input" given twice the last one counts (as json_get). */
int blobs_scan(const char *body, size_t len, blob_scan *scan);
void blobs_scan_free(blob_scan *scan);

/* Appends to out the body with every blob whose action is not BLOB_KEEP
 * handled: BLOB_DROP removes the whole item (or, in_part, the array element
 * only); BLOB_TEXT replaces the item with
 * {"type":"message","role":"user","content":[{"type":"input_text","text":NOTE}]}
 * (or, in_part, the element with {"type":"input_text","text":NOTE}), NOTE
 * being the JSON-escaped `note` argument (NULL: ""; bytes that are not
 * UTF-8 become '?'). An item holding several blobs: the strongest action
 * among them applies to the item (DROP > TEXT > KEEP) unless all are in
 * parts, where each part is handled. Commas stay valid (removing the first,
 * a middle or the last element, or all of them, gives valid JSON). Every
 * byte outside the removed/replaced ranges is copied unchanged. Returns the
 * number of items and parts changed; 0 means nothing to do and out is left
 * untouched (the caller then sends the original body: no copy). -1 (out
 * untouched) on a scan that does not match body, or an action that is not
 * one of the three. */
int blobs_rewrite(const char *body, size_t len, const blob_scan *scan, const char *note, sbuf *out);

#endif
