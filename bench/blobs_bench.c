/* blobs_bench.c: what finding and dropping account-bound blobs costs a
 * request (src/upstream/blobs.c), on a Codex-sized body: 200 input items,
 * 40 of them reasoning items with ~2.5 KB of encrypted_content, the rest
 * messages, function calls and their outputs, ~300 KB in all; and on a body
 * of the same size and shape without blobs (the reasoning items are
 * messages there). For comparison, the house parser on the same bodies:
 * json_scan_value (validates, builds nothing) and json_parse (a tree).
 *
 *   blobs_bench                 every case, ns per call (timings: a shared
 *                               VM swings; bench/blobs.sh counts instructions)
 *   blobs_bench CASE N          runs CASE N times in bench_case (callgrind's
 *                               --toggle-collect target): plain_scan,
 *                               codex_scan, codex_scan_keys_rewrite,
 *                               codex_validate, codex_json_parse
 * Prints figures only. */
#include "base/json.h"
#include "base/sbuf.h"
#include "upstream/blobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_ITEMS 200
#define BENCH_REASONING 40
#define BENCH_BLOB 2500

static unsigned long long bench_rng = 0x2545F4914F6CDD1Dull;

static unsigned bench_next(void)
{
    bench_rng ^= bench_rng << 13;
    bench_rng ^= bench_rng >> 7;
    bench_rng ^= bench_rng << 17;
    return (unsigned)(bench_rng >> 11);
}

/* n characters of URL-safe base64, a Fernet token's look ("gAAAAA" head) */
static void bench_b64(sbuf *b, size_t n)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    sbuf_puts(b, "gAAAAA");
    for (size_t i = 6; i < n; i++)
        sbuf_append(b, &a[bench_next() & 63], 1);
}

/* prose with the escapes a real body has (newlines, quotes, a path) */
static void bench_text(sbuf *b, size_t n)
{
    static const char *words[] = {"the", "function", "returns", "\\n", "a", "\\\"value\\\"", "src/main.c",
                                  "error:", "test", "passed", "\\t", "int", "{", "}", "build", "é"};
    size_t start = b->len;
    while (b->len - start < n) {
        sbuf_puts(b, words[bench_next() % 16]);
        sbuf_puts(b, " ");
    }
}

/* with_blobs: the 40 reasoning items carry encrypted_content; without, those
 * items are messages of the same size. */
static void bench_body(sbuf *b, int with_blobs)
{
    bench_rng = 0x2545F4914F6CDD1Dull; /* both bodies from the same draws */
    sbuf_puts(b, "{\"model\":\"gpt-5-codex\",\"instructions\":\"You are Codex, a coding agent.\",\"input\":[");
    for (int i = 0; i < BENCH_ITEMS; i++) {
        if (i)
            sbuf_puts(b, ",");
        if (i % 5 == 1) { /* 40 of 200 */
            if (with_blobs) {
                sbuf_printf(b, "{\"type\":\"reasoning\",\"id\":\"rs_%04d\",\"summary\":[{\"type\":\"summary_text\","
                               "\"text\":\"**Planning**\"}],\"encrypted_content\":\"", i);
                bench_b64(b, BENCH_BLOB);
                sbuf_puts(b, "\"}");
            } else {
                sbuf_printf(b, "{\"type\":\"message\",\"id\":\"ms_%04d\",\"role\":\"assistant\",\"content\":[{\"type\":"
                               "\"output_text\",\"text\":\"", i);
                bench_b64(b, BENCH_BLOB);
                sbuf_puts(b, "\"}]}");
            }
        } else if (i % 5 == 2) {
            sbuf_printf(b, "{\"type\":\"function_call\",\"id\":\"fc_%04d\",\"call_id\":\"call_%04d\",\"name\":\"shell\","
                           "\"arguments\":\"{\\\"command\\\":[\\\"bash\\\",\\\"-lc\\\",\\\"", i, i);
            bench_text(b, 300);
            sbuf_puts(b, "\\\"]}\"}");
        } else if (i % 5 == 3) {
            sbuf_printf(b, "{\"type\":\"function_call_output\",\"call_id\":\"call_%04d\",\"output\":\"", i - 1);
            bench_text(b, 2200);
            sbuf_puts(b, "\"}");
        } else {
            sbuf_printf(b, "{\"type\":\"message\",\"role\":\"%s\",\"content\":[{\"type\":\"%s\",\"text\":\"",
                        i % 5 ? "assistant" : "user", i % 5 ? "output_text" : "input_text");
            bench_text(b, 1300);
            sbuf_puts(b, "\"}]}");
        }
    }
    sbuf_puts(b, "],\"tools\":[],\"tool_choice\":\"auto\",\"parallel_tool_calls\":false,\"reasoning\":{\"effort\":"
                 "\"medium\",\"summary\":\"auto\"},\"store\":false,\"stream\":true,\"include\":[\"reasoning.encrypted_content\"],"
                 "\"prompt_cache_key\":\"019a0000-0000-7000-8000-000000000000\"}");
}

static sbuf bench_plain = SBUF_INIT, bench_codex = SBUF_INIT;
static volatile size_t bench_sink;

/* the quick look's callback: what the proxy does there is one owner look-up */
static void bench_key(void *ud, const char *key)
{
    (void)ud;
    bench_sink += (unsigned char)key[3];
}

/* one call of a case; noinline so callgrind can collect exactly these */
__attribute__((noinline)) static void bench_case(const char *name)
{
    if (!strcmp(name, "plain_scan")) {
        blob_scan sc = {0};
        bench_sink += (size_t)blobs_scan(bench_plain.p, bench_plain.len, &sc) + sc.n;
        blobs_scan_free(&sc);
    } else if (!strcmp(name, "codex_scan")) {
        blob_scan sc = {0};
        bench_sink += (size_t)blobs_scan(bench_codex.p, bench_codex.len, &sc) + sc.n;
        blobs_scan_free(&sc);
    } else if (!strcmp(name, "codex_scan_keys_rewrite")) {
        blob_scan sc = {0};
        blobs_scan(bench_codex.p, bench_codex.len, &sc);
        for (size_t i = 0; i < sc.n; i++) /* the caller's look-up: one key each (computed by the scan) */
            if (sc.v[i].key[3] != 'x')
                sc.v[i].action = BLOB_DROP;
        sbuf out = SBUF_INIT;
        bench_sink += (size_t)blobs_rewrite(bench_codex.p, bench_codex.len, &sc, "(reasoning from another account)", &out);
        bench_sink += out.len;
        sbuf_free(&out);
        blobs_scan_free(&sc);
    } else if (!strcmp(name, "codex_quick")) {
        bench_sink += (size_t)blobs_quick(bench_codex.p, bench_codex.len, bench_key, NULL);
    } else if (!strcmp(name, "plain_quick")) {
        bench_sink += (size_t)blobs_quick(bench_plain.p, bench_plain.len, bench_key, NULL);
    } else if (!strcmp(name, "codex_validate")) {
        bench_sink += json_scan_value(bench_codex.p, bench_codex.len, 0, 0);
    } else if (!strcmp(name, "codex_json_parse")) {
        json_value *v = json_parse(bench_codex.p, bench_codex.len, NULL, 0);
        bench_sink += v != NULL;
        json_free(v);
    } else {
        fprintf(stderr, "unknown case %s\n", name);
        exit(2);
    }
}

static double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    bench_body(&bench_plain, 0);
    bench_body(&bench_codex, 1);
    blob_scan sc = {0};
    json_value *plain = json_parse(bench_plain.p, bench_plain.len, NULL, 0);
    int ok = plain && blobs_scan(bench_codex.p, bench_codex.len, &sc) == 0 && sc.n == BENCH_REASONING &&
             sc.items == BENCH_ITEMS && !memmem(bench_plain.p, bench_plain.len, "\"encrypted_content\"", 19);
    json_free(plain);
    blobs_scan_free(&sc);
    if (!ok) {
        fprintf(stderr, "bench bodies are not what they should be\n");
        return 1;
    }
    if (argc == 3) {
        long n = atol(argv[2]);
        for (long i = 0; i < n; i++)
            bench_case(argv[1]);
        return 0;
    }
    printf("bodies: %zu bytes with %d blobs of %d bytes in %d items; %zu bytes without\n", bench_codex.len,
           BENCH_REASONING, BENCH_BLOB, BENCH_ITEMS, bench_plain.len);
    static const char *cases[] = {"plain_scan", "plain_quick", "codex_quick", "codex_scan", "codex_scan_keys_rewrite",
                                  "codex_validate", "codex_json_parse"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        long n = c == 0 ? 20000 : 300;
        double t0 = bench_now();
        for (long i = 0; i < n; i++)
            bench_case(cases[c]);
        printf("%-26s %10.1f us per call\n", cases[c], (bench_now() - t0) / n * 1e6);
    }
    sbuf_free(&bench_plain);
    sbuf_free(&bench_codex);
    return 0;
}
