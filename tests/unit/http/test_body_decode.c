/* test_body_decode.c: compressed request bodies (http/body_decode.c): the
 * Content-Encoding header read into codings, each coding (zstd, gzip,
 * deflate zlib-wrapped and raw) decoded to the original, zstd frames and
 * gzip members back to back, a list of codings undone last first, truncated
 * and garbage data refused as corrupt, the limit on the decoded size exact
 * to the byte, and bombs (a 1 KB body that inflates to 1 GB) stopped at the
 * limit with no more than the limit allocated. */
#include "check.h"
#include "http/body_decode.h"
#include <stdint.h>
#include <time.h>
#include <zlib.h>
#include <zstd.h>

/* ---------- making compressed bodies ---------- */

/* A JSON body of about n bytes that compresses like a real one (words, not one byte repeated). */
static void make_body(sbuf *b, size_t n)
{
    static const char *words[] = {"read", "the", "file", "src/http/server.c", "and", "tell", "me", "what",
                                  "body", "limit", "zstd", "codex", "turn", "{\\\"k\\\":1}", "\\n", "42"};
    uint32_t x = 12345;
    sbuf_reset(b);
    sbuf_puts(b, "{\"model\":\"gpt-test\",\"input\":\"");
    while (b->len + 24 < n) {
        x = x * 1103515245u + 12345u;
        sbuf_puts(b, words[(x >> 16) % 16]);
        sbuf_puts(b, " ");
    }
    sbuf_puts(b, "\"}");
}

/* deflate with zlib's window_bits: 31 gzip, 15 zlib, -15 raw. */
static void zlib_pack(const char *in, size_t n, int window_bits, int level, sbuf *out)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, level, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        abort();
    size_t bound = deflateBound(&z, (uLong)n);
    sbuf_reset(out);
    sbuf_reserve(out, bound);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    z.next_out = (Bytef *)out->p;
    z.avail_out = (uInt)bound;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END)
        abort();
    out->len = bound - z.avail_out;
    deflateEnd(&z);
}

static void zstd_pack(const char *in, size_t n, int level, sbuf *out)
{
    size_t bound = ZSTD_compressBound(n);
    sbuf_reset(out);
    sbuf_reserve(out, bound);
    size_t r = ZSTD_compress(out->p, bound, in, n, level);
    if (ZSTD_isError(r))
        abort();
    out->len = r;
}

/* One body in coding c (deflate: zlib-wrapped). */
static void pack(body_coding c, const char *in, size_t n, sbuf *out)
{
    if (c == BODY_ZSTD)
        zstd_pack(in, n, 3, out);
    else
        zlib_pack(in, n, c == BODY_GZIP ? 31 : 15, 6, out);
}

/* A zstd frame of `blocks` RLE blocks of 128 KiB of 'x' each, written by
 * hand: 4 bytes a block, so 32 KiB that decode to 1 GiB. */
static void zstd_rle_bomb(size_t blocks, sbuf *out)
{
    static const unsigned char head[] = {0x28, 0xb5, 0x2f, 0xfd, /* magic */
                                         0x00,                   /* no content size, no checksum */
                                         7 << 3};                /* window 2^(10+7) = 128 KiB */
    sbuf_reset(out);
    sbuf_append(out, head, sizeof head);
    for (size_t i = 0; i < blocks; i++) {
        uint32_t h = (uint32_t)(131072u << 3) | (1u << 1) | (i + 1 == blocks); /* size, RLE, last */
        unsigned char b[4] = {(unsigned char)h, (unsigned char)(h >> 8), (unsigned char)(h >> 16), 'x'};
        sbuf_append(out, b, 4);
    }
}

static body_codings codings1(body_coding c)
{
    body_codings k = {1, {c}};
    return k;
}

static const body_coding all[] = {BODY_ZSTD, BODY_GZIP, BODY_DEFLATE};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* ---------- the header ---------- */

static void test_content_encoding_names_lists_and_identity_are_read(void)
{
    char why[256];
    body_codings c = {0};
    CHECK_EQ_INT(body_decode_codings("zstd", &c, why, sizeof why), BODY_DECODE_OK);
    CHECK_EQ_INT(c.n, 1);
    CHECK_EQ_INT(c.c[0], BODY_ZSTD);
    c.n = 0;
    CHECK_EQ_INT(body_decode_codings("GZip", &c, why, sizeof why), BODY_DECODE_OK);
    CHECK_EQ_INT(body_decode_codings(" x-gzip ", &c, why, sizeof why), BODY_DECODE_OK);
    CHECK_EQ_INT(c.n, 2);
    CHECK_EQ_INT(c.c[0], BODY_GZIP);
    CHECK_EQ_INT(c.c[1], BODY_GZIP);
    c.n = 0;
    CHECK_EQ_INT(body_decode_codings("identity", &c, why, sizeof why), BODY_DECODE_OK);
    CHECK_EQ_INT(body_decode_codings("", &c, why, sizeof why), BODY_DECODE_OK);
    CHECK_EQ_INT(body_decode_codings(NULL, &c, why, sizeof why), BODY_DECODE_OK);
    CHECK_EQ_INT(c.n, 0);
    /* a list in the order applied; empty elements and identity skipped */
    CHECK_EQ_INT(body_decode_codings(",gzip ,, identity,\tZSTD , deflate,", &c, why, sizeof why), BODY_DECODE_OK);
    CHECK_EQ_INT(c.n, 3);
    CHECK_EQ_INT(c.c[0], BODY_GZIP);
    CHECK_EQ_INT(c.c[1], BODY_ZSTD);
    CHECK_EQ_INT(c.c[2], BODY_DEFLATE);
    CHECK_EQ_STR(body_decode_name(BODY_ZSTD), "zstd");
    CHECK_EQ_STR(body_decode_name(BODY_DEFLATE), "deflate");
}

static void test_unknown_parameterised_or_too_many_codings_are_unsupported(void)
{
    char why[256];
    body_codings c = {0};
    CHECK_EQ_INT(body_decode_codings("br", &c, why, sizeof why), BODY_DECODE_UNSUPPORTED);
    CHECK(strstr(why, "'br'") && strstr(why, "zstd"));
    c.n = 0;
    CHECK_EQ_INT(body_decode_codings("gzip, compress", &c, why, sizeof why), BODY_DECODE_UNSUPPORTED);
    CHECK(strstr(why, "'compress'"));
    c.n = 0;
    CHECK_EQ_INT(body_decode_codings("gzip;q=1", &c, why, sizeof why), BODY_DECODE_UNSUPPORTED);
    c.n = 0;
    CHECK_EQ_INT(body_decode_codings("gzip zstd", &c, why, sizeof why), BODY_DECODE_UNSUPPORTED);
    c.n = 0;
    CHECK_EQ_INT(body_decode_codings("zstdx", &c, why, sizeof why), BODY_DECODE_UNSUPPORTED);
    c.n = 0;
    CHECK_EQ_INT(body_decode_codings("gzip,gzip,gzip,gzip", &c, why, sizeof why), BODY_DECODE_OK);
    CHECK_EQ_INT(body_decode_codings("gzip", &c, why, sizeof why), BODY_DECODE_UNSUPPORTED);
    CHECK(strstr(why, "more than 4"));
    /* what a client sent is shown, never a control byte or a quote of its own */
    c.n = 0;
    CHECK_EQ_INT(body_decode_codings("a'\x01z", &c, why, sizeof why), BODY_DECODE_UNSUPPORTED);
    CHECK(strstr(why, "'a??z'"));
}

/* ---------- decoding ---------- */

static void test_each_coding_decodes_to_the_original(void)
{
    sbuf body = SBUF_INIT, packed = SBUF_INIT, out = SBUF_INIT;
    char why[256];
    make_body(&body, 200000);
    for (size_t i = 0; i < 3; i++) {
        pack(all[i], body.p, body.len, &packed);
        CHECK(packed.len < body.len / 2);
        body_codings c = codings1(all[i]);
        CHECK_EQ_INT(body_decode(&c, packed.p, packed.len, 16 << 20, &out, why, sizeof why), BODY_DECODE_OK);
        CHECK_EQ_INT(out.len, body.len);
        CHECK(out.len == body.len && memcmp(out.p, body.p, body.len) == 0);
        CHECK_EQ_INT(out.p[out.len], '\0');
        CHECK(out.cap <= out.len + out.len / 8 + 4097); /* slack given back */
    }
    /* deflate as raw deflate (no zlib wrapper), as some clients send it */
    zlib_pack(body.p, body.len, -15, 6, &packed);
    body_codings c = codings1(BODY_DEFLATE);
    CHECK_EQ_INT(body_decode(&c, packed.p, packed.len, 16 << 20, &out, why, sizeof why), BODY_DECODE_OK);
    CHECK(out.len == body.len && memcmp(out.p, body.p, body.len) == 0);
    /* identity: the bytes as they are */
    body_codings none = {0};
    CHECK_EQ_INT(body_decode(&none, "{}", 2, 16, &out, why, sizeof why), BODY_DECODE_OK);
    CHECK_EQ_STR(out.p, "{}");
    /* an empty payload, compressed, is an empty body */
    for (size_t i = 0; i < 3; i++) {
        pack(all[i], "", 0, &packed);
        c = codings1(all[i]);
        CHECK_EQ_INT(body_decode(&c, packed.p, packed.len, 16, &out, why, sizeof why), BODY_DECODE_OK);
        CHECK_EQ_INT(out.len, 0);
        CHECK(out.p && out.p[0] == '\0');
    }
    sbuf_free(&body);
    sbuf_free(&packed);
    sbuf_free(&out);
}

static void test_zstd_frames_and_gzip_members_back_to_back_decode_as_one_body(void)
{
    sbuf body = SBUF_INIT, part = SBUF_INIT, packed = SBUF_INIT, out = SBUF_INIT;
    char why[256];
    make_body(&body, 50000);
    size_t half = body.len / 2;
    for (int gz = 0; gz < 2; gz++) {
        sbuf_reset(&packed);
        if (gz) {
            zlib_pack(body.p, half, 31, 6, &part);
            sbuf_append(&packed, part.p, part.len);
            zlib_pack(body.p + half, body.len - half, 31, 6, &part);
            sbuf_append(&packed, part.p, part.len);
        } else {
            zstd_pack(body.p, half, 3, &part);
            sbuf_append(&packed, part.p, part.len);
            /* a skippable frame between them (magic 0x184D2A50, 4 bytes of length, its bytes) */
            static const unsigned char skip[] = {0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 'a', 'b', 'c'};
            sbuf_append(&packed, skip, sizeof skip);
            zstd_pack(body.p + half, body.len - half, 19, &part);
            sbuf_append(&packed, part.p, part.len);
        }
        body_codings c = codings1(gz ? BODY_GZIP : BODY_ZSTD);
        CHECK_EQ_INT(body_decode(&c, packed.p, packed.len, 1 << 20, &out, why, sizeof why), BODY_DECODE_OK);
        CHECK(out.len == body.len && memcmp(out.p, body.p, body.len) == 0);
    }
    sbuf_free(&body);
    sbuf_free(&part);
    sbuf_free(&packed);
    sbuf_free(&out);
}

static void test_a_list_of_codings_is_undone_last_first(void)
{
    sbuf body = SBUF_INIT, once = SBUF_INIT, twice = SBUF_INIT, out = SBUF_INIT;
    char why[256];
    make_body(&body, 30000);
    /* "gzip, zstd": gzip applied first, then zstd over it */
    zlib_pack(body.p, body.len, 31, 6, &once);
    zstd_pack(once.p, once.len, 3, &twice);
    body_codings c = {0};
    CHECK_EQ_INT(body_decode_codings("gzip, zstd", &c, why, sizeof why), BODY_DECODE_OK);
    CHECK_EQ_INT(body_decode(&c, twice.p, twice.len, 1 << 20, &out, why, sizeof why), BODY_DECODE_OK);
    CHECK(out.len == body.len && memcmp(out.p, body.p, body.len) == 0);
    /* the other order is not this body */
    body_codings wrong = {2, {BODY_ZSTD, BODY_GZIP}};
    CHECK_EQ_INT(body_decode(&wrong, twice.p, twice.len, 1 << 20, &out, why, sizeof why), BODY_DECODE_CORRUPT);
    CHECK(strstr(why, "gzip"));
    sbuf_free(&body);
    sbuf_free(&once);
    sbuf_free(&twice);
    sbuf_free(&out);
}

static void test_truncated_input_is_corrupt_for_each_coding(void)
{
    sbuf body = SBUF_INIT, packed = SBUF_INIT, out = SBUF_INIT;
    char why[256];
    make_body(&body, 40000);
    for (size_t i = 0; i < 3; i++) {
        pack(all[i], body.p, body.len, &packed);
        body_codings c = codings1(all[i]);
        size_t cuts[] = {packed.len - 1, packed.len - 4, packed.len / 2, 3, 1};
        for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
            why[0] = '\0';
            body_decode_rc rc = body_decode(&c, packed.p, cuts[k], 1 << 20, &out, why, sizeof why);
            if (rc != BODY_DECODE_CORRUPT)
                fprintf(stderr, "  %s cut at %zu of %zu: rc %d\n", body_decode_name(all[i]), cuts[k], packed.len, rc);
            CHECK_EQ_INT(rc, BODY_DECODE_CORRUPT);
            CHECK(strstr(why, body_decode_name(all[i])));
            CHECK(out.len <= (1 << 20) + 1);
        }
        /* the message says what is wrong: a body cut short says so */
        body_decode(&c, packed.p, packed.len / 2, 1 << 20, &out, why, sizeof why);
        CHECK(strstr(why, "truncated") || strstr(why, "Truncated") || strstr(why, "incomplete"));
    }
    /* nothing at all is not a zstd body */
    body_codings z = codings1(BODY_ZSTD);
    CHECK_EQ_INT(body_decode(&z, "", 0, 1024, &out, why, sizeof why), BODY_DECODE_CORRUPT);
    sbuf_free(&body);
    sbuf_free(&packed);
    sbuf_free(&out);
}

static void test_garbage_and_trailing_bytes_are_corrupt_for_each_coding(void)
{
    sbuf body = SBUF_INIT, packed = SBUF_INIT, out = SBUF_INIT;
    char why[256];
    /* the plain JSON itself, sent with a Content-Encoding it does not have */
    const char *json = "{\"model\":\"gpt-test\",\"input\":\"hi\"}";
    for (size_t i = 0; i < 3; i++) {
        body_codings c = codings1(all[i]);
        why[0] = '\0';
        CHECK_EQ_INT(body_decode(&c, json, strlen(json), 1 << 20, &out, why, sizeof why), BODY_DECODE_CORRUPT);
        CHECK(strncmp(why, "invalid ", 8) == 0 && strstr(why, body_decode_name(all[i])));
    }
    /* random bytes */
    unsigned char junk[4096];
    uint32_t x = 7;
    for (size_t j = 0; j < sizeof junk; j++) {
        x = x * 1103515245u + 12345u;
        junk[j] = (unsigned char)(x >> 16);
    }
    for (size_t i = 0; i < 3; i++) {
        body_codings c = codings1(all[i]);
        CHECK_EQ_INT(body_decode(&c, (const char *)junk, sizeof junk, 1 << 20, &out, why, sizeof why),
                     BODY_DECODE_CORRUPT);
    }
    /* a whole body with bytes after it */
    make_body(&body, 2000);
    for (size_t i = 0; i < 3; i++) {
        pack(all[i], body.p, body.len, &packed);
        sbuf_append(&packed, "JUNK", 4);
        body_codings c = codings1(all[i]);
        CHECK_EQ_INT(body_decode(&c, packed.p, packed.len, 1 << 20, &out, why, sizeof why), BODY_DECODE_CORRUPT);
    }
    /* a flipped byte in the middle of a gzip body: its CRC says so */
    zlib_pack(body.p, body.len, 31, 0, &packed); /* stored: the byte lands in the text */
    packed.p[packed.len / 2] ^= 0x20;
    body_codings g = codings1(BODY_GZIP);
    CHECK_EQ_INT(body_decode(&g, packed.p, packed.len, 1 << 20, &out, why, sizeof why), BODY_DECODE_CORRUPT);
    sbuf_free(&body);
    sbuf_free(&packed);
    sbuf_free(&out);
}

/* ---------- the limit ---------- */

static void test_the_limit_on_the_decoded_size_is_exact_to_the_byte(void)
{
    sbuf body = SBUF_INIT, packed = SBUF_INIT, out = SBUF_INIT;
    char why[256];
    make_body(&body, 100000);
    for (size_t i = 0; i < 3; i++) {
        pack(all[i], body.p, body.len, &packed);
        body_codings c = codings1(all[i]);
        CHECK_EQ_INT(body_decode(&c, packed.p, packed.len, body.len, &out, why, sizeof why), BODY_DECODE_OK);
        CHECK(out.len == body.len && memcmp(out.p, body.p, body.len) == 0);
        CHECK(out.cap <= body.len + 2);
        CHECK_EQ_INT(body_decode(&c, packed.p, packed.len, body.len - 1, &out, why, sizeof why),
                     BODY_DECODE_TOO_LARGE);
        CHECK_EQ_INT(out.len, body.len); /* stopped one byte past the limit */
        CHECK(out.cap <= body.len + 1);
        char lim[32];
        snprintf(lim, sizeof lim, "%zu", body.len - 1);
        CHECK(strstr(why, body_decode_name(all[i])) && strstr(why, lim));
    }
    /* identity too, its memory included (fuzz_body_decode: a 300-byte body
     * was appended by doubling into 512 bytes) */
    body_codings none = {0};
    CHECK_EQ_INT(body_decode(&none, body.p, 300, 300, &out, why, sizeof why), BODY_DECODE_OK);
    CHECK(out.len == 300 && out.cap <= 302);
    CHECK_EQ_INT(body_decode(&none, body.p, 301, 300, &out, why, sizeof why), BODY_DECODE_TOO_LARGE);
    /* every stage of a list is held to the limit: "zstd, gzip" (zstd
     * applied first) of a body exactly at the limit passes; with a limit
     * below the zstd data, the gzip stage (undone first) stops */
    zstd_pack(body.p, body.len, 1, &packed);
    sbuf gz = SBUF_INIT;
    zlib_pack(packed.p, packed.len, 31, 6, &gz);
    body_codings c2 = {2, {BODY_ZSTD, BODY_GZIP}};
    CHECK_EQ_INT(body_decode(&c2, gz.p, gz.len, body.len, &out, why, sizeof why), BODY_DECODE_OK);
    CHECK(out.len == body.len && memcmp(out.p, body.p, body.len) == 0);
    CHECK_EQ_INT(body_decode(&c2, gz.p, gz.len, packed.len - 1, &out, why, sizeof why), BODY_DECODE_TOO_LARGE);
    CHECK(strstr(why, "gzip"));
    sbuf_free(&gz);
    sbuf_free(&body);
    sbuf_free(&packed);
    sbuf_free(&out);
}

static void test_a_1kb_body_that_inflates_to_1gb_stops_at_the_limit(void)
{
    sbuf frame = SBUF_INIT, bomb = SBUF_INIT, out = SBUF_INIT;
    char why[256];
    const size_t limit = 16u << 20;
    zstd_rle_bomb(8192, &frame); /* 1 GiB */
    CHECK(frame.len < 33 * 1024);
    zstd_pack(frame.p, frame.len, 19, &bomb); /* "zstd, zstd": the frame compressed again */
    printf("  bomb: %zu bytes -> %zu bytes -> 1 GiB\n", bomb.len, frame.len);
    CHECK(bomb.len < 1024);
    body_codings c = {2, {BODY_ZSTD, BODY_ZSTD}};
    double t0 = now_s();
    CHECK_EQ_INT(body_decode(&c, bomb.p, bomb.len, limit, &out, why, sizeof why), BODY_DECODE_TOO_LARGE);
    double t = now_s() - t0;
    printf("  stopped after %zu bytes in %.3f s: %s\n", out.len, t, why);
    /* it stopped at the first byte past the limit and allocated no more */
    CHECK_EQ_INT(out.len, limit + 1);
    CHECK(out.cap <= limit + 2);
    CHECK(t < 5.0); /* the limit's work (milliseconds), never a gigabyte's; generous for sanitizers */
    /* the bare frame (32 KiB of RLE blocks) the same */
    c.n = 1;
    CHECK_EQ_INT(body_decode(&c, frame.p, frame.len, limit, &out, why, sizeof why), BODY_DECODE_TOO_LARGE);
    CHECK_EQ_INT(out.len, limit + 1);
    /* gzip and deflate: 64 MiB of one byte (about 64 KiB) against a 1 MiB limit */
    sbuf zeros = SBUF_INIT;
    sbuf_reserve(&zeros, 64u << 20);
    memset(zeros.p, 'x', 64u << 20);
    zeros.len = 64u << 20;
    for (int d = 0; d < 2; d++) {
        zlib_pack(zeros.p, zeros.len, d ? 15 : 31, 6, &bomb);
        CHECK(bomb.len < (1u << 20) / 4);
        body_codings z = codings1(d ? BODY_DEFLATE : BODY_GZIP);
        CHECK_EQ_INT(body_decode(&z, bomb.p, bomb.len, 1u << 20, &out, why, sizeof why), BODY_DECODE_TOO_LARGE);
        CHECK_EQ_INT(out.len, (1u << 20) + 1);
        CHECK(out.cap <= (1u << 20) + 2);
    }
    sbuf_free(&zeros);
    sbuf_free(&frame);
    sbuf_free(&bomb);
    sbuf_free(&out);
}

static void test_a_zstd_frame_asking_for_a_huge_window_is_refused_before_it_is_allocated(void)
{
    /* a frame that says its window is 2 GiB, then one RLE block of 10 bytes (last) */
    static const unsigned char frame[] = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 21 << 3, 0x53, 0x00, 0x00, 'x'};
    sbuf out = SBUF_INIT;
    char why[256];
    body_codings c = codings1(BODY_ZSTD);
    CHECK_EQ_INT(body_decode(&c, (const char *)frame, sizeof frame, 16u << 20, &out, why, sizeof why),
                 BODY_DECODE_CORRUPT);
    CHECK(strstr(why, "window"));
    /* the same block under a 128 KiB window decodes: 10 bytes of 'x' */
    unsigned char ok[sizeof frame];
    memcpy(ok, frame, sizeof ok);
    ok[5] = 7 << 3;
    CHECK_EQ_INT(body_decode(&c, (const char *)ok, sizeof ok, 16u << 20, &out, why, sizeof why), BODY_DECODE_OK);
    CHECK_EQ_STR(out.p, "xxxxxxxxxx");
    sbuf_free(&out);
}

int main(void)
{
    RUN(test_content_encoding_names_lists_and_identity_are_read);
    RUN(test_unknown_parameterised_or_too_many_codings_are_unsupported);
    RUN(test_each_coding_decodes_to_the_original);
    RUN(test_zstd_frames_and_gzip_members_back_to_back_decode_as_one_body);
    RUN(test_a_list_of_codings_is_undone_last_first);
    RUN(test_truncated_input_is_corrupt_for_each_coding);
    RUN(test_garbage_and_trailing_bytes_are_corrupt_for_each_coding);
    RUN(test_the_limit_on_the_decoded_size_is_exact_to_the_byte);
    RUN(test_a_1kb_body_that_inflates_to_1gb_stops_at_the_limit);
    RUN(test_a_zstd_frame_asking_for_a_huge_window_is_refused_before_it_is_allocated);
    return check_summary();
}
