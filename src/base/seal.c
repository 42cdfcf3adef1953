/* seal.c: AES-256-GCM sealing of values kept in a shared Redis (see
 * seal.h): the key's forms, the "sy1:" text, seal and open. */
#include "base/seal.h"
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char seal_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int seal_b64_val(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

static void seal_b64_put(sbuf *out, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        char q[4] = {seal_b64[v >> 18 & 63], seal_b64[v >> 12 & 63], i + 1 < n ? seal_b64[v >> 6 & 63] : '=',
                     i + 2 < n ? seal_b64[v & 63] : '='};
        sbuf_append(out, q, 4);
    }
}

/* Strict padded base64 (length a multiple of 4, '=' only at the end, no
 * bits set past the end: the canonical text only) into
 * out (room for n / 4 * 3 bytes): the length, or -1. */
static long seal_b64_get(const char *p, size_t n, unsigned char *out)
{
    if (n % 4)
        return -1;
    size_t w = 0;
    for (size_t i = 0; i < n; i += 4) {
        int pad = 0, v[4];
        for (int k = 0; k < 4; k++) {
            if (p[i + k] == '=' && i + 4 == n && k >= 2) {
                v[k] = 0;
                pad++;
                continue;
            }
            if (pad || (v[k] = seal_b64_val((unsigned char)p[i + k])) < 0)
                return -1;
        }
        unsigned x = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 | (unsigned)v[3];
        if ((pad == 1 && (x & 0xff)) || (pad == 2 && (x & 0xffff)))
            return -1; /* bits past the end set: one text per value, so a changed character never opens */
        out[w++] = (unsigned char)(x >> 16);
        if (pad < 2)
            out[w++] = (unsigned char)(x >> 8);
        if (pad < 1)
            out[w++] = (unsigned char)x;
    }
    return (long)w;
}

/* A key written out (hex or base64), whitespace around it ignored. */
static int seal_key_literal(const char *s, size_t n, unsigned char key[SEAL_KEY_LEN])
{
    while (n && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        n--;
    if (n == 2 * SEAL_KEY_LEN) {
        int ok = 1;
        for (size_t i = 0; i < SEAL_KEY_LEN && ok; i++) {
            int hi = sbuf_hex_digit((unsigned char)s[2 * i]), lo = sbuf_hex_digit((unsigned char)s[2 * i + 1]);
            ok = hi >= 0 && lo >= 0;
            if (ok)
                key[i] = (unsigned char)(hi << 4 | lo);
        }
        if (ok)
            return 0;
    }
    unsigned char tmp[48];
    if (n == 44 && seal_b64_get(s, n, tmp) == SEAL_KEY_LEN) {
        memcpy(key, tmp, SEAL_KEY_LEN);
        OPENSSL_cleanse(tmp, sizeof tmp);
        return 0;
    }
    OPENSSL_cleanse(tmp, sizeof tmp);
    return -1;
}

int seal_key_parse(const char *s, unsigned char key[SEAL_KEY_LEN], char *err, size_t n)
{
    if (!s || !*s) {
        sbuf_fmt_into(err, n, "empty");
        return -1;
    }
    if (seal_key_literal(s, strlen(s), key) == 0)
        return 0;
    if (s[0] != '/') {
        sbuf_fmt_into(err, n, "expected 64 hex digits, base64 of 32 bytes (44 characters) or the absolute path of "
                              "a file holding one of those");
        return -1;
    }
    FILE *f = fopen(s, "r");
    if (!f) {
        sbuf_fmt_into(err, n, "cannot read the key file %s: %s", s, strerror(errno));
        return -1;
    }
    char buf[256];
    size_t got = fread(buf, 1, sizeof buf, f);
    fclose(f);
    int rc = got < sizeof buf ? seal_key_literal(buf, got, key) : -1;
    OPENSSL_cleanse(buf, sizeof buf);
    if (rc != 0)
        sbuf_fmt_into(err, n, "the key file %s holds no key (64 hex digits or base64 of 32 bytes)", s);
    return rc;
}

int seal_is_sealed(const char *p, size_t n)
{
    if (n < 4 || p[0] != 's' || p[1] != 'y')
        return 0;
    size_t i = 2;
    while (i < n && i < 8 && p[i] >= '0' && p[i] <= '9')
        i++;
    return i > 2 && i < n && p[i] == ':';
}

int seal_seal(const unsigned char key[SEAL_KEY_LEN], const char *aad, const char *plain, size_t n, sbuf *out)
{
    if (n > SEAL_PLAIN_MAX)
        return -1;
    size_t total = SEAL_NONCE_LEN + n + SEAL_TAG_LEN;
    unsigned char *buf = malloc(total);
    EVP_CIPHER_CTX *cx = EVP_CIPHER_CTX_new();
    int len = 0, fin = 0, ok = buf && cx && RAND_bytes(buf, SEAL_NONCE_LEN) == 1 &&
                                 EVP_EncryptInit_ex(cx, EVP_aes_256_gcm(), NULL, key, buf) == 1 &&
                                 EVP_EncryptUpdate(cx, NULL, &len, (const unsigned char *)aad, (int)strlen(aad)) == 1 &&
                                 EVP_EncryptUpdate(cx, buf + SEAL_NONCE_LEN, &len, (const unsigned char *)plain,
                                                   (int)n) == 1 &&
                                 EVP_EncryptFinal_ex(cx, buf + SEAL_NONCE_LEN + len, &fin) == 1 &&
                                 (size_t)(len + fin) == n &&
                                 EVP_CIPHER_CTX_ctrl(cx, EVP_CTRL_GCM_GET_TAG, SEAL_TAG_LEN,
                                                     buf + SEAL_NONCE_LEN + n) == 1;
    EVP_CIPHER_CTX_free(cx);
    if (ok) {
        sbuf_puts(out, SEAL_PREFIX);
        seal_b64_put(out, buf, total);
    }
    free(buf); /* ciphertext: nothing secret */
    return ok ? 0 : -1;
}

int seal_open(const unsigned char key[SEAL_KEY_LEN], const char *aad, const char *p, size_t n, sbuf *out)
{
    size_t pl = strlen(SEAL_PREFIX);
    if (n < pl || memcmp(p, SEAL_PREFIX, pl) != 0 || n - pl > (SEAL_PLAIN_MAX + 64) / 3 * 4)
        return -1;
    unsigned char *buf = malloc((n - pl) / 4 * 3 + 1);
    if (!buf)
        return -1;
    long got = seal_b64_get(p + pl, n - pl, buf);
    if (got < SEAL_NONCE_LEN + SEAL_TAG_LEN) {
        free(buf);
        return -1;
    }
    size_t clen = (size_t)got - SEAL_NONCE_LEN - SEAL_TAG_LEN;
    unsigned char *plain = malloc(clen + 1);
    EVP_CIPHER_CTX *cx = EVP_CIPHER_CTX_new();
    int len = 0, fin = 0;
    int ok = plain && cx && EVP_DecryptInit_ex(cx, EVP_aes_256_gcm(), NULL, key, buf) == 1 &&
             EVP_DecryptUpdate(cx, NULL, &len, (const unsigned char *)aad, (int)strlen(aad)) == 1 &&
             EVP_DecryptUpdate(cx, plain, &len, buf + SEAL_NONCE_LEN, (int)clen) == 1 &&
             EVP_CIPHER_CTX_ctrl(cx, EVP_CTRL_GCM_SET_TAG, SEAL_TAG_LEN, buf + SEAL_NONCE_LEN + clen) == 1 &&
             EVP_DecryptFinal_ex(cx, plain + len, &fin) == 1 && (size_t)(len + fin) == clen;
    EVP_CIPHER_CTX_free(cx);
    if (ok)
        sbuf_append(out, plain, clen);
    if (plain) {
        OPENSSL_cleanse(plain, clen + 1);
        free(plain);
    }
    free(buf);
    return ok ? 0 : -2;
}
