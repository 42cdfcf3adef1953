/* fuzz_json.c: the strict JSON parser on any bytes; what it accepts it
 * writes back, and the written text parses to the same text again; the
 * scanner without a tree (json_scan_value) accepts exactly the same. */
#include "fuzz_common.h"
#include "base/json.h"
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char err[160];
    json_value *v = json_parse((const char *)data, n, err, sizeof err);
    size_t at = json_scan_value((const char *)data, n, json_scan_ws((const char *)data, n, 0), 0);
    FUZZ_CHECK((v != NULL) == (at && json_scan_ws((const char *)data, n, at) == n));
    if (!v)
        return 0;
    sbuf a = SBUF_INIT, b = SBUF_INIT;
    json_write(&a, v);
    json_value *w = json_parse(a.p, a.len, err, sizeof err);
    FUZZ_CHECK(w != NULL);
    json_write(&b, w);
    FUZZ_CHECK(a.len == b.len && memcmp(a.p, b.p, a.len) == 0);
    json_get_num(v, "x", 0);
    json_get_str(v, "model");
    json_get_bool(v, "stream", 0);
    json_at(v, 3);
    json_free(v);
    json_free(w);
    sbuf_free(&a);
    sbuf_free(&b);
    return 0;
}
