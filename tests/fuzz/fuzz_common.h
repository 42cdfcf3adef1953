/* fuzz_common.h: what the libFuzzer targets share: a way to cut one input
 * into the chunks a network would deliver (the first byte seeds the cut
 * points), and an assertion that survives NDEBUG. */
#ifndef SY_FUZZ_COMMON_H
#define SY_FUZZ_COMMON_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); abort(); } } while (0)

/* Calls fn(ud, piece, len) for consecutive pieces of data[0..n): sizes come
 * from a small generator seeded by `seed`, 1..64 bytes, sometimes larger. */
static inline void fuzz_chunks(const uint8_t *data, size_t n, uint8_t seed,
                               void (*fn)(void *ud, const char *p, size_t len), void *ud)
{
    uint32_t x = seed * 2654435761u + 1;
    size_t off = 0;
    while (off < n) {
        x = x * 1103515245u + 12345u;
        size_t len = ((x >> 16) & 63) + 1;
        if (((x >> 8) & 7) == 0)
            len *= 64;
        if (len > n - off)
            len = n - off;
        fn(ud, (const char *)data + off, len);
        off += len;
    }
}
#endif
