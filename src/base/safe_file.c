/* safe_file.c: crash-safe reads and replacements of a file (see
 * safe_file.h): temp file beside the target, fsync, rename, fsync of the
 * directory, as git's lock files and sqlite's journals do. */
#include "base/safe_file.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A path that does not open for want of its target: a dangling symlink is
 * there (the user's link, to be kept), not absent. */
static int sf_dangling_link(const char *path)
{
    struct stat lb;
    return lstat(path, &lb) == 0 && S_ISLNK(lb.st_mode);
}

int safe_file_read(const char *path, sbuf *out, int *present, int *mode, char *err, size_t errlen)
{
    *present = 0;
    /* O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer;
     * whatever it is, fstat below refuses it before a byte is read */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT && sf_dangling_link(path)) {
            char target[PATH_MAX] = "";
            ssize_t tn = readlink(path, target, sizeof target - 1);
            target[tn > 0 ? tn : 0] = '\0';
            sbuf_fmt_into(err, errlen,
                          "%s is a symlink to %s, which does not exist; create the target (or remove the link) "
                          "and try again",
                          path, target);
            return -1;
        }
        if (errno == ENOENT)
            return 0;
        sbuf_fmt_into(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        sbuf_fmt_into(err, errlen, "cannot read %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        const char *what = S_ISFIFO(sb.st_mode)  ? "a FIFO"
                           : S_ISDIR(sb.st_mode) ? "a directory"
                           : S_ISSOCK(sb.st_mode) ? "a socket"
                           : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
                                                                        : "not a regular file";
        sbuf_fmt_into(err, errlen, "%s is %s, not a regular file; it was left untouched", path, what);
        close(fd);
        return -1;
    }
    if (sb.st_size > (off_t)SAFE_FILE_MAX) {
        sbuf_fmt_into(err, errlen, "%s is %lld bytes, more than the %u MiB switchyard reads; it was left untouched",
                      path, (long long)sb.st_size, SAFE_FILE_MAX >> 20);
        close(fd);
        return -1;
    }
    if (mode)
        *mode = (int)(sb.st_mode & 07777);
    char buf[8192];
    ssize_t n;
    size_t before = out->len;
    while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
        if (n > 0)
            sbuf_append(out, buf, (size_t)n);
        if (out->len - before > SAFE_FILE_MAX) { /* it grew while read */
            close(fd);
            sbuf_fmt_into(err, errlen, "%s grew past the %u MiB switchyard reads; it was left untouched", path,
                          SAFE_FILE_MAX >> 20);
            return -1;
        }
    }
    close(fd);
    if (n < 0) {
        sbuf_fmt_into(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    if (!out->p)
        sbuf_append(out, "", 0);
    *present = 1;
    return 0;
}

static int sf_dir_of(const char *path, char *dir, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash && n >= 2) { /* a bare name: the working directory's */
        memcpy(dir, ".", 2);
        return 0;
    }
    if (!slash || (size_t)(slash - path) + 1 >= n)
        return -1;
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    memcpy(dir, path, len);
    dir[len] = '\0';
    return 0;
}

static int sf_dir_fsync(const char *path, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    int fd = sf_dir_of(path, dir, sizeof dir) == 0 ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    int rc = fd >= 0 && fsync(fd) == 0 ? 0 : -1;
    if (rc != 0)
        sbuf_fmt_into(err, errlen, "cannot fsync the directory of %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    return rc;
}

static int sf_write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

int safe_file_replace(const char *path, const char *p, size_t n, int mode, void (*before_rename)(void *),
                      void *ud, char *err, size_t errlen)
{
    char tmp[PATH_MAX + 32];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s%s", path, SAFE_FILE_TMP_SUFFIX) >= sizeof tmp) {
        sbuf_fmt_into(err, errlen, "path too long: %s", path);
        return -1;
    }
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        sbuf_fmt_into(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        return -1;
    }
    int rc = fchmod(fd, (mode_t)mode) == 0 && sf_write_all(fd, p, n) == 0 && fsync(fd) == 0 ? 0 : -1;
    if (rc != 0)
        sbuf_fmt_into(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    close(fd);
    if (before_rename)
        before_rename(ud);
    if (rc == 0 && rename(tmp, path) != 0) {
        sbuf_fmt_into(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        rc = -1;
    }
    if (rc != 0) {
        unlink(tmp);
        return -1;
    }
    return sf_dir_fsync(path, err, errlen);
}

int safe_file_remove(const char *path, char *err, size_t errlen)
{
    if (unlink(path) != 0 && errno != ENOENT) {
        sbuf_fmt_into(err, errlen, "cannot remove %s: %s", path, strerror(errno));
        return -1;
    }
    return sf_dir_fsync(path, err, errlen);
}

void safe_file_tmp_remove(const char *path)
{
    char tmp[PATH_MAX + 32];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s%s", path, SAFE_FILE_TMP_SUFFIX) < sizeof tmp)
        unlink(tmp);
}
