/* fuzz_seal.c: any bytes as a sealed value from Redis (seal_open), under a
 * fixed key and a place named by the first byte: refused (-1 not a seal,
 * -2 does not open) with nothing kept, or opened, and then sealing what it
 * held opens again to the same bytes. Nothing but the key's owner makes a
 * seal that opens, so an opened input is one the fuzzer built from a seed. */
#include "fuzz_common.h"
#include "base/seal.h"
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    static const unsigned char key[SEAL_KEY_LEN] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                                     17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
    if (n < 1)
        return 0;
    const char *aad = data[0] & 1 ? "login:a" : "config:account:a";
    const char *p = (const char *)data + 1;
    sbuf out = SBUF_INIT;
    int rc = seal_open(key, aad, p, n - 1, &out);
    FUZZ_CHECK(rc == 0 || rc == -1 || rc == -2);
    if (rc != 0) {
        FUZZ_CHECK(out.len == 0);
    } else {
        FUZZ_CHECK(seal_is_sealed(p, n - 1));
        sbuf again = SBUF_INIT, back = SBUF_INIT;
        FUZZ_CHECK(seal_seal(key, aad, out.p ? out.p : "", out.len, &again) == 0);
        FUZZ_CHECK(seal_open(key, aad, again.p, again.len, &back) == 0);
        FUZZ_CHECK(back.len == out.len && (!out.len || memcmp(back.p, out.p, out.len) == 0));
        sbuf_free(&again);
        sbuf_free(&back);
    }
    sbuf_free(&out);
    return 0;
}
