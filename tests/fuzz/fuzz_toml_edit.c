/* fuzz_toml_edit.c: libFuzzer target for the TOML editor (src/codex/toml_edit.c).
 * For any input: parsing never crashes and never changes the bytes; on a
 * document it accepts, the edits `codex attach` makes (model_provider and
 * the [model_providers.switchyard] keys) either succeed or leave the bytes
 * untouched, every successful edit reads back, and undoing them (original
 * value back, or key removed, added table removed) gives the input back
 * byte for byte. Any broken promise aborts. Seeds: corpus/toml_edit/. */
#include "codex/toml_edit.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FZ_N_KEYS 4

static void fz_check(int ok)
{
    if (!ok)
        abort();
}

static int fz_bytes_are(const toml_doc *d, const char *p, size_t n)
{
    size_t len;
    const char *b = toml_bytes(d, &len);
    return len == n && memcmp(b, p, n) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const keys[FZ_N_KEYS][3] = {
        {"model_provider", NULL, NULL},
        {"model_providers", "switchyard", "name"},
        {"model_providers", "switchyard", "base_url"},
        {"model_providers", "switchyard", "supports_websockets"},
    };
    static const size_t nseg[FZ_N_KEYS] = {1, 3, 3, 3};
    static const char *const val[FZ_N_KEYS] = {"\"switchyard\"", "\"switchyard\"", "\"http://127.0.0.1:8787/v1\"",
                                               "false"};
    const char *in = (const char *)data;
    toml_doc *d = toml_parse(in, size, NULL, 0);
    if (!d)
        return 0;
    fz_check(fz_bytes_are(d, in, size));
    const char *tbl[] = {"model_providers", "switchyard"};
    /* as codex attach decides (codex_attach.c): the [table] header is what an
     * undo removes; a table that exists only through a sub-table
     * ([model_providers.switchyard.x]) or dotted keys gets a header of its own */
    int had_table = toml_has_header(d, tbl, 2);
    sbuf orig[FZ_N_KEYS];
    int had[FZ_N_KEYS], set[FZ_N_KEYS];
    for (int i = 0; i < FZ_N_KEYS; i++) {
        orig[i] = (sbuf)SBUF_INIT;
        had[i] = toml_get(d, keys[i], nseg[i], &orig[i], NULL, 0);
        set[i] = 0;
        if (had[i] < 0)
            continue;
        sbuf before = SBUF_INIT;
        size_t blen;
        const char *b = toml_bytes(d, &blen);
        sbuf_append(&before, b, blen);
        set[i] = toml_set(d, keys[i], nseg[i], val[i], NULL, 0) == 0;
        if (!set[i])
            fz_check(fz_bytes_are(d, before.p ? before.p : "", before.len));
        sbuf_free(&before);
    }
    for (int i = 0; i < FZ_N_KEYS; i++) {
        if (!set[i])
            continue;
        sbuf got = SBUF_INIT;
        fz_check(toml_get(d, keys[i], nseg[i], &got, NULL, 0) == 1 && strcmp(got.p, val[i]) == 0);
        sbuf_free(&got);
    }
    for (int i = FZ_N_KEYS - 1; i >= 0; i--) {
        if (!set[i])
            continue;
        if (had[i] == 1)
            fz_check(toml_set(d, keys[i], nseg[i], orig[i].p, NULL, 0) == 0);
        else
            fz_check(toml_remove(d, keys[i], nseg[i], NULL, 0) == 1);
    }
    if (!had_table)
        toml_remove_empty_table(d, tbl, 2);
    sbuf out = SBUF_INIT;
    size_t olen;
    const char *o = toml_bytes(d, &olen);
    sbuf_append(&out, o, olen);
    toml_final_newline_restore(&out, in, size);
    fz_check(out.len == size && memcmp(out.p ? out.p : "", in, size) == 0);
    sbuf_free(&out);
    for (int i = 0; i < FZ_N_KEYS; i++)
        sbuf_free(&orig[i]);
    toml_free(d);
    return 0;
}
