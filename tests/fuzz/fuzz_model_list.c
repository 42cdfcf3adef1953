/* fuzz_model_list.c: an upstream /models answer and an operator's --models
 * list from any bytes: no crash, and every name kept is a valid one that
 * the list then holds. */
#include "fuzz_common.h"
#include "upstream/model_list.h"
#include "base/json.h"
#include <string.h>

/* Every comma-separated name of csv is non-empty, short and a member. */
static void check_list(const char *csv)
{
    if (!*csv)
        return;
    for (const char *p = csv;;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        FUZZ_CHECK(n > 0 && n <= MODEL_LIST_NAME_MAX);
        char name[MODEL_LIST_NAME_MAX + 1];
        memcpy(name, p, n);
        name[n] = '\0';
        FUZZ_CHECK(model_list_has(csv, name));
        if (!e)
            break;
        p = e + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    sbuf ids = SBUF_INIT;
    int r = model_list_parse_upstream((const char *)data, n, &ids, NULL);
    FUZZ_CHECK(r >= -1 && r <= 1);
    if (r >= 0)
        check_list(ids.p ? ids.p : "");
    else
        FUZZ_CHECK(ids.len == 0);
    sbuf_free(&ids);
    char *s = malloc(n + 1);
    memcpy(s, data, n);
    s[n] = '\0';
    sbuf o = SBUF_INIT;
    char err[200];
    if (model_list_normalize(s, &o, err, sizeof err) == 0)
        check_list(o.p ? o.p : "");
    sbuf_free(&o);
    free(s);
    return 0;
}
