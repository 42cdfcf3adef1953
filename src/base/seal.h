/* seal.h: values sealed with a key the gateways of one pool share
 * (SWITCHYARD_REDIS_KEY; docs/scale-out.md, "Logins encrypted"), so that
 * whoever reads their Redis alone cannot use the tokens in them.
 *
 * A sealed value is text: "sy1:" then base64 of nonce (12 random bytes),
 * ciphertext and the AES-256-GCM tag (16 bytes). The version prefix keeps
 * plaintext written by older instances readable (seal_is_sealed says which
 * is which), and leaves room for another scheme. The additional data binds
 * a value to where it is kept (the key's name, "login:NAME"): a sealed
 * login moved under another account's name is refused. Pure but for the
 * random nonce and seal_key_parse's file; the opener is fuzzed. */
#ifndef SY_SEAL_H
#define SY_SEAL_H
#include <stddef.h>
#include "base/sbuf.h"

#define SEAL_KEY_LEN 32
#define SEAL_PREFIX "sy1:"
#define SEAL_NONCE_LEN 12
#define SEAL_TAG_LEN 16
#define SEAL_PLAIN_MAX (4u << 20) /* a larger value is neither sealed nor opened */

/* The key from s: 64 hex digits, base64 of 32 bytes (44 characters, '='
 * padded), or an absolute path ('/...') of a file holding one of those
 * (surrounding whitespace ignored). 0, or -1 with err saying why (never
 * quoting the key). */
int seal_key_parse(const char *s, unsigned char key[SEAL_KEY_LEN], char *err, size_t n);

/* 1 when p (n bytes) begins with a seal's version prefix ("sy" digits ':'):
 * a sealed value, of this version or another. */
int seal_is_sealed(const char *p, size_t n);

/* Appends the sealed form of plain (n bytes) to out: 0, or -1 (too large,
 * or libcrypto failed: out as it was). */
int seal_seal(const unsigned char key[SEAL_KEY_LEN], const char *aad, const char *plain, size_t n, sbuf *out);

/* Appends what p (n bytes, a sealed value) holds to out: 0; -1 when it is
 * not a sealed value of this version (bad prefix, base64 or length); -2
 * when it does not open with this key and aad (another key, another place,
 * or changed in any bit). out is as it was unless 0. */
int seal_open(const unsigned char key[SEAL_KEY_LEN], const char *aad, const char *p, size_t n, sbuf *out);

#endif
