/* fuzz_login_request_line.c: any bytes as the head of a request to
 * `account login`'s loopback callback, read by login_request_line with
 * rooms for method and target from the first byte. An accepted line's
 * method and target are the line's own bytes, whole, without a space or a
 * line break, and fit their rooms; a refused one keeps nothing; a 414 only
 * for a line that would be accepted with room enough. */
#include "fuzz_common.h"
#include "accounts/login_flow.h"
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (n < 1)
        return 0;
    char *head = malloc(n);
    if (!head)
        return 0;
    memcpy(head, data + 1, n - 1);
    head[n - 1] = '\0';
    size_t mn = 1 + (data[0] & 15), tn = 1 + (data[0] >> 4) * 8;
    char m[16], t[128], bigm[16], bigt[8192];
    login_line_rc rc = login_request_line(head, m, mn, t, tn);
    login_line_rc roomy = login_request_line(head, bigm, sizeof bigm, bigt, sizeof bigt);
    if (rc == LOGIN_LINE_OK) {
        size_t ml = strlen(m), tl = strlen(t);
        FUZZ_CHECK(ml >= 1 && ml < mn && tl >= 1 && tl < tn);
        FUZZ_CHECK(strcspn(m, " \r\n") == ml && strcspn(t, " \r\n") == tl);
        FUZZ_CHECK(!memcmp(head, m, ml) && head[ml] == ' ' && !memcmp(head + ml + 1, t, tl));
        FUZZ_CHECK(!strncmp(head + ml + 1 + tl, " HTTP/", 6));
        FUZZ_CHECK(roomy == LOGIN_LINE_OK && !strcmp(m, bigm) && !strcmp(t, bigt));
    } else {
        FUZZ_CHECK(m[0] == '\0' && t[0] == '\0');
        if (rc == LOGIN_LINE_TOO_LONG)
            FUZZ_CHECK(roomy != LOGIN_LINE_BAD);
    }
    free(head);
    return 0;
}
