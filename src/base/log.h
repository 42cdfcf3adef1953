/* log.h: leveled logging to stderr. Never pass a secret (token, platform key)
 * to these functions; use log_redact() for anything that might hold one. */
#ifndef SY_LOG_H
#define SY_LOG_H
#include <stddef.h>

enum { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

void log_set_level(int level);
int log_level_parse(const char *name); /* "debug".."error"; -1 if unknown */
/* Each call site (format string) writes at most 100 lines per 10 s at info
 * and above; the rest are counted and summarized on its next line. */
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
unsigned long log_suppressed(void); /* lines held back so far */

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

/* Copies src into dst (size n), replacing anything that looks like a bearer
 * token or API key (sk-..., Bearer ..., long base64/hex runs) with "[redacted]". */
void log_redact(char *dst, size_t n, const char *src);

#endif
