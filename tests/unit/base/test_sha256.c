/* test_sha256.c: SHA-256 against the NIST FIPS 180-4 example vectors, plus
 * the message lengths around the one-or-two padding block boundary. */
#include "check.h"
#include "base/sha256.h"
#include <stdlib.h>

static void test_sha256_empty_string(void)
{
    char hex[65];
    sha256_hex("", 0, hex);
    CHECK_EQ_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_sha256_abc(void)
{
    char hex[65];
    sha256_hex("abc", 3, hex);
    CHECK_EQ_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void test_sha256_448_bit_message(void)
{
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    char hex[65];
    CHECK_EQ_INT(strlen(m) * 8, 448);
    sha256_hex(m, strlen(m), hex);
    CHECK_EQ_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_sha256_896_bit_message(void)
{
    const char *m = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                    "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    char hex[65];
    sha256_hex(m, strlen(m), hex);
    CHECK_EQ_STR(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void test_sha256_million_a(void)
{
    size_t n = 1000000;
    char *m = malloc(n);
    CHECK(m != NULL);
    if (!m)
        return;
    memset(m, 'a', n);
    char hex[65];
    sha256_hex(m, n, hex);
    CHECK_EQ_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(m);
}

/* 55/56/63/64 bytes straddle the one-or-two padding block boundary. */
static void test_sha256_padding_boundaries(void)
{
    static const struct { size_t n; const char *hex; } v[] = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
    };
    char buf[64];
    memset(buf, 'a', sizeof buf);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char hex[65];
        sha256_hex(buf, v[i].n, hex);
        CHECK_EQ_STR(hex, v[i].hex);
    }
}

static void test_sha256_raw_matches_hex(void)
{
    uint8_t d[32];
    sha256("abc", 3, d);
    CHECK_EQ_INT(d[0], 0xba);
    CHECK_EQ_INT(d[31], 0xad);
}

int main(void)
{
    RUN(test_sha256_empty_string);
    RUN(test_sha256_abc);
    RUN(test_sha256_448_bit_message);
    RUN(test_sha256_896_bit_message);
    RUN(test_sha256_million_a);
    RUN(test_sha256_padding_boundaries);
    RUN(test_sha256_raw_matches_hex);
    return check_summary();
}
