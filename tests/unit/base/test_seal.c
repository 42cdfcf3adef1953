/* test_seal.c: values sealed for a shared Redis (base/seal.c): the key's
 * forms, a seal opens to what went in, and anything changed (a bit of the
 * text, the place it belongs to, the key) is refused, never opened. */
#include "check.h"
#include "base/seal.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *HEX = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

static void key_of(unsigned char key[SEAL_KEY_LEN])
{
    char err[200];
    CHECK_EQ_INT(seal_key_parse(HEX, key, err, sizeof err), 0);
}

static void test_key_is_read_from_hex_base64_or_a_file(void)
{
    unsigned char k1[SEAL_KEY_LEN], k2[SEAL_KEY_LEN], k3[SEAL_KEY_LEN];
    char err[200];
    key_of(k1);
    for (int i = 0; i < SEAL_KEY_LEN; i++)
        CHECK_EQ_INT(k1[i], i);
    CHECK_EQ_INT(seal_key_parse("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", k2, err, sizeof err), 0);
    CHECK(memcmp(k1, k2, SEAL_KEY_LEN) == 0);
    char dir[64], path[128];
    CHECK_EQ_INT(check_tmpdir_make(dir, sizeof dir, "sy_seal"), 0);
    snprintf(path, sizeof path, "%s/key", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "  %s\n", HEX);
    fclose(f);
    CHECK_EQ_INT(seal_key_parse(path, k3, err, sizeof err), 0);
    CHECK(memcmp(k1, k3, SEAL_KEY_LEN) == 0);
    check_tmpdir_remove(dir);
}

static void test_bad_keys_are_refused_without_quoting_them(void)
{
    unsigned char k[SEAL_KEY_LEN];
    char err[300];
    const char *bad[] = {"", "short", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1", /* 63 */
                         "zz0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
                         "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg==", /* 31 bytes */
                         "relative/path"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        CHECK_EQ_INT(seal_key_parse(bad[i], k, err, sizeof err), -1);
        CHECK(err[0] != '\0');
        CHECK(!bad[i][0] || !strstr(err, bad[i]));
    }
    CHECK_EQ_INT(seal_key_parse("/nonexistent/sy-key", k, err, sizeof err), -1);
    CHECK(strstr(err, "cannot read the key file") != NULL);
}

static void test_a_sealed_value_opens_to_what_went_in_and_holds_no_plaintext(void)
{
    unsigned char key[SEAL_KEY_LEN];
    key_of(key);
    const char *plain = "{\"token\":\"at_secret\",\"refresh_token\":\"rt_secret\"}";
    sbuf s = SBUF_INIT, o = SBUF_INIT, s2 = SBUF_INIT;
    CHECK_EQ_INT(seal_seal(key, "login:a", plain, strlen(plain), &s), 0);
    CHECK(strncmp(s.p, SEAL_PREFIX, 4) == 0);
    CHECK(seal_is_sealed(s.p, s.len));
    CHECK(!strstr(s.p, "secret"));
    CHECK_EQ_INT(seal_open(key, "login:a", s.p, s.len, &o), 0);
    CHECK_EQ_STR(o.p, plain);
    /* a fresh nonce each time: the same text seals differently */
    CHECK_EQ_INT(seal_seal(key, "login:a", plain, strlen(plain), &s2), 0);
    CHECK(strcmp(s.p, s2.p) != 0);
    sbuf_reset(&o);
    CHECK_EQ_INT(seal_seal(key, "x", "", 0, &o), 0); /* empty text seals and opens */
    sbuf empty = SBUF_INIT;
    CHECK_EQ_INT(seal_open(key, "x", o.p, o.len, &empty), 0);
    CHECK_EQ_INT(empty.len, 0);
    sbuf_free(&s), sbuf_free(&o), sbuf_free(&s2), sbuf_free(&empty);
}

static void test_a_tampered_value_another_place_or_another_key_is_refused(void)
{
    unsigned char key[SEAL_KEY_LEN], other[SEAL_KEY_LEN];
    key_of(key);
    memcpy(other, key, sizeof other);
    other[5] ^= 1;
    const char *plain = "{\"token\":\"at_secret\"}";
    sbuf s = SBUF_INIT, o = SBUF_INIT;
    CHECK_EQ_INT(seal_seal(key, "login:a", plain, strlen(plain), &s), 0);
    CHECK_EQ_INT(seal_open(key, "login:b", s.p, s.len, &o), -2); /* moved under another name */
    CHECK_EQ_INT(seal_open(other, "login:a", s.p, s.len, &o), -2);
    for (size_t i = 4; i < s.len; i++) { /* every character of the text changed in turn */
        char saved = s.p[i];
        s.p[i] = saved == 'A' ? 'B' : 'A';
        int rc = seal_open(key, "login:a", s.p, s.len, &o);
        CHECK(rc == -2 || rc == -1);
        s.p[i] = saved;
    }
    CHECK_EQ_INT(seal_open(key, "login:a", s.p, s.len - 4, &o), -2); /* cut short (tag gone) */
    CHECK_EQ_INT(seal_open(key, "login:a", s.p, s.len - 1, &o), -1); /* not base64 any more */
    CHECK_EQ_INT(seal_open(key, "login:a", "sy1:", 4, &o), -1);
    CHECK_EQ_INT(seal_open(key, "login:a", plain, strlen(plain), &o), -1); /* plaintext is no seal */
    CHECK_EQ_INT(o.len, 0);                                                  /* nothing kept of any of them */
    sbuf_free(&s), sbuf_free(&o);
}

static void test_plaintext_of_older_instances_is_told_apart_from_seals(void)
{
    CHECK(!seal_is_sealed("{\"token\":\"x\"}", 13));
    CHECK(!seal_is_sealed("sy:", 3));
    CHECK(seal_is_sealed("sy1:AAAA", 8));
    CHECK(seal_is_sealed("sy2:whatever", 12)); /* a later version: sealed, not plaintext */
}

int main(void)
{
    RUN(test_key_is_read_from_hex_base64_or_a_file);
    RUN(test_bad_keys_are_refused_without_quoting_them);
    RUN(test_a_sealed_value_opens_to_what_went_in_and_holds_no_plaintext);
    RUN(test_a_tampered_value_another_place_or_another_key_is_refused);
    RUN(test_plaintext_of_older_instances_is_told_apart_from_seals);
    return check_summary();
}
