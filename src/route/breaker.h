/* breaker.h: the circuit breaker of every account (and the half-open probe
 * after any failure). State lives in pool_account.breaker (memory only: a
 * restart starts closed; cooldowns themselves are persisted); when it opens
 * and closes is decided by the `breaker` policy hook (policies/breaker.lua). */
#ifndef SY_BREAKER_H
#define SY_BREAKER_H
#include <stddef.h>
#include "core/gateway.h"
#include "route/pool.h"

/* Records an attempt's outcome for pa (success 1, failure 0: an attempt that
 * failed over) and applies the policy's verdict on the breaker. */
void breaker_record(gateway *gw, pool_account *pa, int success, double now);

/* 1 if the breaker lets pa take a request now; else 0 and why (starting with
 * "breaker_open" while open, "half-open" while a probe is in flight). */
int breaker_available(const pool_account *pa, double now, char *why, size_t n);

/* Until when the open breaker keeps pa out (0: not open). */
double breaker_open_until(const pool_account *pa);

/* "closed", "open" (keeping the account out now) or "half_open" (probing:
 * after its open time, or after any failure once the cooldown is over). */
const char *breaker_state_name(const pool_account *pa, double now);

#endif
