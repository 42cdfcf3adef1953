/* sha256.h: SHA-256 (FIPS 180-4), used to store platform keys as hashes. */
#ifndef SY_SHA256_H
#define SY_SHA256_H
#include <stddef.h>
#include <stdint.h>

void sha256(const void *data, size_t len, uint8_t out[32]);
/* Writes the lowercase hex digest (64 chars + NUL) into hex. */
void sha256_hex(const void *data, size_t len, char hex[65]);

#endif
