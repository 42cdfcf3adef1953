/* policy_test.h: the spec runner behind `switchyard test` (policy_test.c).
 * Its entry point, policy_test_main(), is declared in policy.h beside the
 * engine it exercises; nothing else is exported. */
#ifndef SY_POLICY_TEST_H
#define SY_POLICY_TEST_H
#include "policy/policy.h"
#endif
