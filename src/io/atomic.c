/* atomic.c -- atomic saves of user files (io_impl.h): a temporary file
 * "<path>.tmp.<pid>.<6 random characters>" in the destination's directory,
 * written, flushed, fsync'ed, renamed over the destination, the directory
 * fsync'ed.  A writer killed midway leaves its temporary behind; the next
 * save of the same destination removes those whose writer is gone. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../ops/op_table.h"
#include "io_impl.h"

#define RAND_LEN 6

static const char k_alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

static void random_suffix(char *out) {
    static atomic_ulong counter;
    unsigned char r[RAND_LEN];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        /* no entropy yet: O_EXCL makes the name unique anyway */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (atomic_fetch_add(&counter, 1) << 52);
        for (int i = 0; i < RAND_LEN; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            r[i] = (unsigned char)(x >> 56);
        }
    }
    for (int i = 0; i < RAND_LEN; i++) out[i] = k_alnum[r[i] % (sizeof k_alnum - 1)];
    out[RAND_LEN] = '\0';
}

/* pid of a temporary name "<base>.tmp.<pid>.<RAND_LEN alnum>" of base, or
 * -1 when name is not one (other files are never touched). */
static long temp_pid(const char *name, const char *base, size_t blen) {
    if (strncmp(name, base, blen) != 0 || strncmp(name + blen, ".tmp.", 5) != 0) return -1;
    const char *p = name + blen + 5;
    long pid = 0;
    int nd = 0;
    for (; *p >= '0' && *p <= '9'; p++, nd++) {
        if (nd >= 10) return -1;
        pid = pid * 10 + (*p - '0');
    }
    if (nd == 0 || pid <= 0 || pid > 0x7fffffffL || *p != '.') return -1;
    p++;
    for (int i = 0; i < RAND_LEN; i++, p++)
        if (!*p || !strchr(k_alnum, *p)) return -1;
    return *p ? -1 : pid;
}

/* Removes the stale temporaries of path in dir: those whose writer process
 * no longer exists (kill(pid, 0) fails with ESRCH) and which nobody holds
 * locked (a live writer keeps an flock on its temporary until the rename,
 * which also protects writers in another pid namespace).  Best effort. */
static void remove_stale(const char *dir, const char *base) {
    DIR *d = opendir(dir);
    if (!d) return;
    size_t blen = strlen(base), dlen = strlen(dir);
    struct dirent *de;
    while ((de = readdir(d))) {
        long pid = temp_pid(de->d_name, base, blen);
        if (pid < 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours to judge) */
        size_t n = dlen + strlen(de->d_name) + 2;
        char *p = malloc(n);
        if (!p) break;
        snprintf(p, n, "%s/%s", dir, de->d_name);
        int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd >= 0) {
            struct stat sb;
            if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0) unlink(p);
            close(fd);
        }
        free(p);
    }
    closedir(d);
}

ct_status ct__atomic_begin(const char *op, const char *path, ct_atomic_file *af) {
    memset(af, 0, sizeof *af);
    size_t L = strlen(path);
    if (L == 0) return ct__error_status(CT_ERR_ARG, "%s: the path is empty", op);
    af->path = strdup(path);
    af->tmp = malloc(L + 32);
    af->dir = malloc(L + 2);
    if (!af->path || !af->tmp || !af->dir) {
        ct__atomic_abort(af);
        return ct__error_status(CT_ERR_OOM, "%s: out of memory", op);
    }
    const char *slash = strrchr(path, '/');
    if (!slash) strcpy(af->dir, ".");
    else if (slash == path) strcpy(af->dir, "/");
    else { memcpy(af->dir, path, (size_t)(slash - path)); af->dir[slash - path] = '\0'; }
    const char *base = slash ? slash + 1 : path;
    if (*base) remove_stale(af->dir, base);

    int fd = -1, err = 0;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        char r[RAND_LEN + 1];
        random_suffix(r);
        snprintf(af->tmp, L + 32, "%s.tmp.%ld.%s", path, (long)getpid(), r);
        /* the kernel applies the umask to 0666, like fopen(path, "w") */
        fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        err = errno;
        if (fd < 0 && err != EEXIST) break;
    }
    if (fd < 0) {
        ct_status st = ct__error_status(CT_ERR_IO, "%s: cannot create a temporary file next to %s: %s", op,
                                        path, strerror(err));
        free(af->tmp); /* nothing was created */
        af->tmp = NULL;
        ct__atomic_abort(af);
        return st;
    }
    (void)flock(fd, LOCK_EX | LOCK_NB); /* marks it live for remove_stale */
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        ct_status st = ct__error_status(CT_ERR_IO, "%s: cannot write %s: %s", op, af->tmp, strerror(errno));
        close(fd);
        ct__atomic_abort(af);
        return st;
    }
    return CT_OK;
}

void ct__atomic_abort(ct_atomic_file *af) {
    if (af->fp) fclose(af->fp);
    if (af->tmp) unlink(af->tmp);
    free(af->tmp);
    free(af->dir);
    free(af->path);
    memset(af, 0, sizeof *af);
}

ct_status ct__atomic_commit(const char *op, ct_atomic_file *af) {
    ct_status st = CT_OK;
    if (ferror(af->fp)) {
        st = ct__error_status(CT_ERR_IO, "%s: writing %s failed", op, af->tmp);
        goto fail;
    }
    if (fflush(af->fp) != 0 || fsync(fileno(af->fp)) != 0) {
        st = ct__error_status(CT_ERR_IO, "%s: flushing %s failed: %s", op, af->tmp, strerror(errno));
        goto fail;
    }
    /* rename while the lock is still held, then close */
    if (rename(af->tmp, af->path) != 0) {
        st = ct__error_status(CT_ERR_IO, "%s: cannot rename %s to %s: %s", op, af->tmp, af->path,
                              strerror(errno));
        goto fail;
    }
    free(af->tmp);
    af->tmp = NULL; /* renamed: nothing to unlink any more */
    FILE *fp = af->fp;
    af->fp = NULL;
    if (fclose(fp) != 0) {
        st = ct__error_status(CT_ERR_IO, "%s: closing %s failed: %s", op, af->path, strerror(errno));
        goto fail;
    }
    /* make the rename durable (best effort: some file systems refuse) */
    int dfd = open(af->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
fail:
    ct__atomic_abort(af);
    return st;
}
