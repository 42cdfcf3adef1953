/* core/gateway.c: the gateway's clock. (Operations on the whole gateway,
 * such as a policy reload, live at the top, in serve.c, and reach the wings
 * through the context's hooks.) */
#include "core/gateway.h"
#include <time.h>

double gateway_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
