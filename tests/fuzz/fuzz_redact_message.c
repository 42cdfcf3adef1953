/* fuzz_redact_message.c: any bytes as an upstream's error message, with an
 * sk- key planted in them as a word, made fit for the request log
 * (log_redact_message) at a bound from the first byte: the result fits the
 * bound, is valid UTF-8 without a control character, has no leading or
 * trailing space, never holds a key's start as a word (the planted key,
 * or one the input spells), and redacting it again changes nothing. */
#include "fuzz_common.h"
#include "base/log.h"
#include "base/sbuf.h"
#include "base/text.h"
#include <ctype.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (n < 2)
        return 0;
    size_t max = 1 + (size_t)data[0] * 2; /* 1..511: 0 and 1 are the edge cases, 301 the log's */
    static const char key[] = "sk-Q7wPz3RkT9mXv2LbN8";
    sbuf text = SBUF_INIT;
    size_t half = (n - 1) / 2;
    sbuf_append(&text, (const char *)data + 1, half);
    sbuf_puts(&text, " ");
    sbuf_puts(&text, key); /* a word of its own: glued to other letters ("Xsk-...") it is another word */
    sbuf_puts(&text, ".");
    sbuf_append(&text, (const char *)data + 1 + half, n - 1 - half);
    char out[512], again[512];
    size_t len = log_redact_message(out, max, text.p, text.len);
    FUZZ_CHECK(len == strlen(out) && len < max);
    FUZZ_CHECK(text_check(out, len) == NULL);
    FUZZ_CHECK(!len || (out[0] != ' ' && out[len - 1] != ' '));
    /* no key's start as a word: an sk- or sy- with 3 characters of [A-Za-z0-9_-]
     * after it only inside another word ("Xsk-...", "task-...") */
    for (size_t i = 0; i + 6 <= len; i++) {
        if ((out[i] != 's' || (out[i + 1] != 'k' && out[i + 1] != 'y') || out[i + 2] != '-'))
            continue;
        int keyish = 1;
        for (size_t k = 3; k < 6; k++)
            keyish &= isalnum((unsigned char)out[i + k]) || out[i + k] == '-' || out[i + k] == '_';
        FUZZ_CHECK(!keyish || (i > 0 && isalnum((unsigned char)out[i - 1])));
    }
    size_t len2 = log_redact_message(again, max, out, len);
    FUZZ_CHECK(len2 == len && memcmp(out, again, len) == 0);
    sbuf_free(&text);
    return 0;
}
