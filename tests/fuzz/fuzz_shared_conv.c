/* fuzz_shared_conv.c: what the pool's Redis answers to a chain's read
 * (shared/shared_conv.c; anyone able to write to that Redis chooses it):
 * any bytes through hiredis's reader, then read as the walk's answer for
 * "r3" with a depth of 1..16 and 0..255 bytes (the first two bytes). What
 * holds: a refusal keeps nothing and says why; a chain kept has 1..depth
 * turns, linked oldest first to "r3", ids of 1..127 bytes, input and
 * output bracketed arrays within the bytes asked for, and names the link
 * it lacks only when its oldest turn continued that link. The reader is
 * bounded as the link's (core/redis_reply.h: hiredis 0.14 would allocate
 * an array's element table from its header before any element arrives). */
#include "fuzz_common.h"
#include "core/redis_reply.h"
#include "shared/shared_conv.h"
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

static int64_t acct(void *ud, const char *name)
{
    (void)ud;
    return name[0] == 'a' ? 7 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (n < 2)
        return 0;
    size_t depth = (size_t)(data[0] % 16) + 1, max_bytes = data[1];
    redisReader *rd = redisReaderCreate();
    if (!rd)
        return 0;
    redis_reply_bound(rd, NULL);
    redisReaderFeed(rd, (const char *)data + 2, n - 2);
    void *reply = NULL;
    if (redisReaderGetReply(rd, &reply) == REDIS_OK && reply) {
        conv_link *c = (conv_link *)1;
        size_t k = 99;
        char missing[SHARED_CONV_ID], err[256];
        err[0] = '\0';
        int rc = shared_conv_chain_read(reply, "r3", depth, max_bytes, acct, NULL, &c, &k, missing, err, sizeof err);
        if (rc != 0) {
            FUZZ_CHECK(rc == -1 && c == NULL && k == 0 && err[0]);
        } else {
            FUZZ_CHECK(c && k >= 1 && k <= depth);
            FUZZ_CHECK(!strcmp(c[k - 1].response_id, "r3"));
            size_t bytes = 0;
            for (size_t i = 0; i < k; i++) {
                size_t idl = strlen(c[i].response_id);
                FUZZ_CHECK(idl >= 1 && idl < SHARED_CONV_ID);
                FUZZ_CHECK(c[i].input_len >= 2 && c[i].input_json[0] == '[' &&
                           c[i].input_json[c[i].input_len - 1] == ']');
                FUZZ_CHECK(c[i].output_len >= 2 && c[i].output_json[0] == '[' &&
                           c[i].output_json[c[i].output_len - 1] == ']');
                FUZZ_CHECK(c[i].account_id == 0 || c[i].account_id == 7);
                bytes += c[i].input_len + c[i].output_len;
                if (i)
                    FUZZ_CHECK(c[i].previous_response_id &&
                               !strcmp(c[i].previous_response_id, c[i - 1].response_id));
            }
            FUZZ_CHECK(bytes <= max_bytes);
            if (missing[0])
                FUZZ_CHECK(c[0].previous_response_id && !strcmp(c[0].previous_response_id, missing));
            else
                FUZZ_CHECK(c[0].previous_response_id == NULL);
            shared_conv_chain_free(c, k);
        }
        freeReplyObject(reply);
    }
    redisReaderFree(rd);
    return 0;
}
