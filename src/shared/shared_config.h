/* shared_config.h: accounts, platform keys and settings shared by the
 * gateways of one pool over Redis (docs/scale-out.md, "Accounts, keys and
 * settings"), so that `switchyard account add`, `key add|revoke` or
 * `config set` against one instance's database reaches all of them, and
 * an instance started with an empty database serves the pool.
 *
 * Each instance's sqlite stays its own and is where the operator changes
 * things. A row changed here (its text no longer matches the digest
 * recorded for it, store/store_shared.h) is written to the pool's hash
 * sy:{POOL}:config with a new version, by a script that refuses it when
 * the pool holds a newer version than this instance last saw (then the
 * pool's wins), and announced on the channel; the others read it and
 * apply it through their store writer, recording the version and digest
 * in the same transaction, so an applied row is never told back as new.
 * Removals travel as versions too ("gone"). Nothing here is on the
 * request path: the pool reloads the applied rows as it reloads the CLI's
 * (config_version). */
#ifndef SY_SHARED_CONFIG_H
#define SY_SHARED_CONFIG_H
#include "core/gateway.h"

typedef struct shared_config shared_config;

/* Starts sharing gw's accounts, keys and settings over gw->shared when
 * that is the Redis implementation; NULL otherwise (a lone gateway has
 * nothing to share) or when out of memory. */
shared_config *shared_config_new(gateway *gw);
void shared_config_free(shared_config *sc); /* before gw->shared is freed; NULL is fine */

#endif
