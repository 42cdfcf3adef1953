/* fuzz_request.c: the client body checks (request_parse) on any bytes: a
 * well-formed answer either way, routing fields NUL-terminated and typed. */
#include "fuzz_common.h"
#include "http/request.h"
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    request_input in;
    memset(&in, 0, sizeof in);
    request_error err;
    int rc = request_parse((const char *)data, n, 1 << 20, &in, &err);
    if (rc == 0) {
        FUZZ_CHECK(in.doc && in.doc->type == JSON_OBJECT);
        FUZZ_CHECK(strlen(in.model) < sizeof in.model);
        FUZZ_CHECK(strlen(in.previous_response_id) < sizeof in.previous_response_id);
        FUZZ_CHECK(in.stream == 0 || in.stream == 1);
    } else {
        FUZZ_CHECK(err.status == 400 || err.status == 413);
        FUZZ_CHECK(err.code && *err.code && err.message[0]);
    }
    json_free(in.doc);
    return 0;
}
