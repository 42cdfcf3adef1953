/* fault_curl.c: libcurl failures on demand, for switchyard_faulty (a test
 * build of the gateway; the release binary never contains this). Linked
 * with -Wl,--wrap=curl_easy_init,--wrap=curl_multi_add_handle, so every
 * call the gateway makes to those two comes here first. The environment
 * says which calls fail, counted from 1 per function:
 *   SY_FAULT_CURL_EASY_INIT=2,5    the 2nd and 5th curl_easy_init return NULL
 *   SY_FAULT_CURL_MULTI_ADD=all    every curl_multi_add_handle fails
 * tests/e2e/test_faults.py uses it for the paths that only out-of-memory
 * or a libcurl failure reach. */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

CURL *__real_curl_easy_init(void);
CURLMcode __real_curl_multi_add_handle(CURLM *multi, CURL *easy);
CURL *__wrap_curl_easy_init(void);
CURLMcode __wrap_curl_multi_add_handle(CURLM *multi, CURL *easy);

/* 1 if call number n (from 1) is listed in the variable name. */
static int fault_curl_fails(const char *name, unsigned long n)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    if (!strcmp(v, "all"))
        return 1;
    for (const char *p = v; *p;) {
        char *end;
        unsigned long k = strtoul(p, &end, 10);
        if (end == p)
            return 0;
        if (k == n)
            return 1;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

CURL *__wrap_curl_easy_init(void)
{
    static unsigned long calls;
    return fault_curl_fails("SY_FAULT_CURL_EASY_INIT", ++calls) ? NULL : __real_curl_easy_init();
}

CURLMcode __wrap_curl_multi_add_handle(CURLM *multi, CURL *easy)
{
    static unsigned long calls;
    return fault_curl_fails("SY_FAULT_CURL_MULTI_ADD", ++calls) ? CURLM_OUT_OF_MEMORY
                                                                : __real_curl_multi_add_handle(multi, easy);
}
