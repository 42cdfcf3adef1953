/* safe_file.h: reading and replacing a user's file without ever leaving
 * it half-written: the new bytes go to a temp file beside it
 * (PATH.switchyard-tmp), which is fsynced, renamed over the target, and the
 * directory fsynced; the mode is the caller's (the original's). Used by
 * codex_attach.c for Codex's config.toml. */
#ifndef SY_SAFE_FILE_H
#define SY_SAFE_FILE_H
#include "base/sbuf.h"
#include <stddef.h>

#define SAFE_FILE_TMP_SUFFIX ".switchyard-tmp"
/* The largest file safe_file_read takes (a config file is kilobytes). */
#define SAFE_FILE_MAX (16u << 20)

/* Appends the file's bytes to out: 0 with *present 1 (and *mode, if given,
 * its permission bits), or 0 with *present 0 when it does not exist; -1
 * (err filled) on any other error. Never blocks on what the path names: a
 * FIFO, socket, device or directory is refused (opened non-blocking, then
 * fstat), as is a file over SAFE_FILE_MAX. A symlink is followed; a
 * dangling one is an error naming its target, not an absent file (writing
 * would replace the user's link with a file). */
int safe_file_read(const char *path, sbuf *out, int *present, int *mode, char *err, size_t errlen);
/* Replaces path with p[0..n) atomically, with mode (set on the temp file
 * before a byte is written, so the rename carries it; the umask does not
 * apply). before_rename (may be
 * NULL) runs after the temp file is on disk, before the rename (a test hook
 * point). 0 ok; -1 (err filled, the target untouched, the temp removed). */
int safe_file_replace(const char *path, const char *p, size_t n, int mode, void (*before_rename)(void *),
                      void *ud, char *err, size_t errlen);
/* Removes path (absent is fine) and fsyncs its directory. */
int safe_file_remove(const char *path, char *err, size_t errlen);
/* Removes a temp file a crash left beside path. */
void safe_file_tmp_remove(const char *path);

#endif
