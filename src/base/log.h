/* log.h: leveled logging to stderr. Never pass a secret (token, platform key)
 * to these functions; use log_redact() for anything that might hold one,
 * log_redact_message() for an error message that is kept. */
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

/* An error message from outside (an upstream's answer, the gateway's own
 * reply) made fit to keep in the request log and show: the n bytes at s
 * (at most LOG_MESSAGE_IN of them are looked at) into dst as one line of
 * at most max - 1 bytes, cut before the word or character that does not
 * fit (a first word longer than that is cut). Control characters
 * and runs of white space become one space (none leading or trailing),
 * bytes that are not UTF-8 a '?'. A run of key-ish characters
 * ([A-Za-z0-9._-]) becomes "[redacted]" when it holds "sk-" or "sy-" at
 * its start or after one of . _ - (a key, or the masked start of one),
 * when it follows "Bearer", "Basic", "Authorization", "api-key" or
 * "apikey", and when it is 24 characters or more and not word-like (a
 * code, a model name and a date pass: pieces of lower-case letters, short
 * digit groups); "[redacted]" itself stays as it is. A run the
 * LOG_MESSAGE_IN cut ends inside is left out. Returns the length. */
#define LOG_MESSAGE_IN 4096
size_t log_redact_message(char *dst, size_t max, const char *s, size_t n);

#endif
