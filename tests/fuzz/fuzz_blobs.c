/* fuzz_blobs.c: account-bound blobs (src/upstream/blobs.c) on any bytes:
 * blobs_scan, then blobs_rewrite with every action KEEP (nothing written)
 * and with actions drawn from the input. What must hold: a body the scan
 * accepts (with blobs to look for) is one json_parse accepts; the rewrite
 * of a body that parses parses too, and scanned again holds no blob whose
 * key was marked for dropping or replacing; blobs_minted sees at least the
 * blobs the scan found. */
#include "fuzz_common.h"
#include "base/json.h"
#include "upstream/blobs.h"
#include <string.h>

static void count_key(void *ud, const char *key)
{
    (void)key;
    ++*(size_t *)ud;
}

static int has_key(const blob_scan *sc, const char *key, int kept)
{
    for (size_t i = 0; i < sc->n; i++)
        if ((sc->v[i].action == BLOB_KEEP) == kept && strcmp(sc->v[i].key, key) == 0)
            return 1;
    return 0;
}

typedef struct quick_keys {
    size_t n;
    char k[64][BLOBS_KEY_SIZE];
} quick_keys;

static void quick_key(void *ud, const char *key)
{
    quick_keys *q = ud;
    if (q->n < 64)
        memcpy(q->k[q->n], key, BLOBS_KEY_SIZE);
    q->n++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    const char *body = (const char *)data;
    blob_scan sc = {0};
    int rc = blobs_scan(body, n, &sc);
    FUZZ_CHECK(rc == 0 || (rc == -1 && sc.n == 0));
    json_value *doc = json_parse(body, n, NULL, 0);
    int needle = memmem(body, n, "\"encrypted_content\"", 19) != NULL;
    if (rc == 0 && needle)
        FUZZ_CHECK(doc && doc->type == JSON_OBJECT);
    size_t minted = 0, calls = 0;
    minted = blobs_minted(body, n, count_key, &calls);
    FUZZ_CHECK(minted == calls);
    if (rc == 0)
        FUZZ_CHECK(minted >= sc.n);

    /* the quick look never misses a blob the scan finds (when it is sure) */
    static quick_keys q;
    q.n = 0;
    int qn = blobs_quick(body, n, quick_key, &q);
    FUZZ_CHECK(qn < 0 || (size_t)qn == q.n);
    if (rc == 0 && qn >= 0 && q.n <= 64)
        for (size_t i = 0; i < sc.n; i++) {
            int found = 0;
            for (size_t k = 0; k < q.n && !found; k++)
                found = strcmp(q.k[k], sc.v[i].key) == 0;
            FUZZ_CHECK(found);
        }

    sbuf out = SBUF_INIT;
    FUZZ_CHECK(blobs_rewrite(body, n, &sc, "note \"x\"", &out) == 0); /* all KEEP */
    FUZZ_CHECK(out.len == 0);

    for (size_t i = 0; i < sc.n; i++) { /* actions from the body's bytes */
        const blob_ref *r = &sc.v[i];
        FUZZ_CHECK(r->item < sc.items && r->item_off + r->item_len <= n);
        FUZZ_CHECK(!r->in_part || (r->part_off > r->item_off && r->part_off + r->part_len < r->item_off + r->item_len));
        FUZZ_CHECK(strlen(r->key) == BLOBS_KEY_SIZE - 1 && strlen(r->item_type) < sizeof r->item_type);
        sc.v[i].action = (int)((data[(r->item_off + r->part_off + i * 7) % n] + i) % 3);
    }
    int changed = blobs_rewrite(body, n, &sc, "note \"x\"", &out);
    FUZZ_CHECK(changed >= 0);
    FUZZ_CHECK((changed == 0) == (out.len == 0));
    if (changed > 0) {
        FUZZ_CHECK(doc != NULL);
        json_value *again = json_parse(out.p, out.len, NULL, 0);
        FUZZ_CHECK(again != NULL);
        json_free(again);
        blob_scan after = {0};
        FUZZ_CHECK(blobs_scan(out.p, out.len, &after) == 0);
        for (size_t i = 0; i < after.n; i++) /* nothing marked survives, unless the same value was kept */
            FUZZ_CHECK(!has_key(&sc, after.v[i].key, 0) || has_key(&sc, after.v[i].key, 1));
        blobs_scan_free(&after);
    }
    sbuf_free(&out);
    json_free(doc);
    blobs_scan_free(&sc);
    return 0;
}
