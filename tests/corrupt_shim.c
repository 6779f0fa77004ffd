/* corrupt_shim.c — a fault injector for the test suite: preloaded into a rank
   (LD_PRELOAD=build/corrupt_shim.so), it flips bytes of data that the network delivers into the
   program's own message buffers, so a `-c` run must find wrong bytes and exit 1.

   It tracks the buffers the program itself allocates with posix_memalign (efax_host_alloc:
   every host buffer a driver registers), not libfabric's or PMIx's, so the provider's headers
   and control traffic stay intact. After a receive call (recv, recvfrom, recvmsg, read, readv)
   returns data, every received span that lies inside a tracked buffer gets one byte inverted,
   at most EFAX_SHIM_CORRUPT times per process (default 1), and the shim says so on stderr.

   cc -shared -fPIC -O2 tests/corrupt_shim.c -o build/corrupt_shim.so -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_BUFS 64
static struct { uintptr_t lo, hi; } bufs[MAX_BUFS];
static int nbufs, budget = -1;

static int (*real_memalign)(void **, size_t, size_t);
static ssize_t (*real_recv)(int, void *, size_t, int);
static ssize_t (*real_recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
static ssize_t (*real_recvmsg)(int, struct msghdr *, int);
static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_readv)(int, const struct iovec *, int);

/* the main program's address range: the first object dl_iterate_phdr lists */
static uintptr_t prog_lo, prog_hi;
static int first_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size, (void)data;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD) {
            uintptr_t lo = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr, hi = lo + info->dlpi_phdr[i].p_memsz;
            if (!prog_lo || lo < prog_lo) prog_lo = lo;
            if (hi > prog_hi) prog_hi = hi;
        }
    return 1; /* stop after the first */
}
static int from_program(void *ret) {
    if (!prog_hi) dl_iterate_phdr(first_object, NULL);
    return (uintptr_t)ret >= prog_lo && (uintptr_t)ret < prog_hi;
}

int posix_memalign(void **p, size_t align, size_t len) {
    int rc;
    if (!real_memalign) real_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    rc = real_memalign(p, align, len);
    if (rc == 0 && len >= 4096 && nbufs < MAX_BUFS && from_program(__builtin_return_address(0))) {
        bufs[nbufs].lo = (uintptr_t)*p;
        bufs[nbufs].hi = (uintptr_t)*p + len;
        nbufs++;
    }
    return rc;
}

/* n bytes just landed at p: invert one of them if they lie in a tracked buffer */
static void maybe_corrupt(void *p, size_t n) {
    uintptr_t a = (uintptr_t)p;
    if (n == 0 || nbufs == 0) return;
    if (budget < 0) {
        const char *e = getenv("EFAX_SHIM_CORRUPT");
        budget = e && *e ? atoi(e) : 1;
    }
    if (budget == 0) return;
    for (int i = 0; i < nbufs; i++)
        if (a >= bufs[i].lo && a + n <= bufs[i].hi) {
            unsigned char *b = (unsigned char *)p + n / 2;
            *b = (unsigned char)~*b;
            budget--;
            fprintf(stderr, "corrupt_shim: inverted 1 byte of %zu received at %p (buffer +%zu)\n", n, p,
                    (size_t)(a + n / 2 - bufs[i].lo));
            return;
        }
}

static void corrupt_iov(const struct iovec *iov, int cnt, ssize_t got) {
    for (int i = 0; i < cnt && got > 0; i++) {
        size_t n = (size_t)got < iov[i].iov_len ? (size_t)got : iov[i].iov_len;
        maybe_corrupt(iov[i].iov_base, n);
        got -= (ssize_t)n;
    }
}

ssize_t recv(int fd, void *buf, size_t len, int flags) {
    ssize_t r;
    if (!real_recv) real_recv = (ssize_t(*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
    r = real_recv(fd, buf, len, flags);
    if (r > 0 && !(flags & MSG_PEEK)) maybe_corrupt(buf, (size_t)r);
    return r;
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *sa, socklen_t *sl) {
    ssize_t r;
    if (!real_recvfrom)
        real_recvfrom = (ssize_t(*)(int, void *, size_t, int, struct sockaddr *, socklen_t *))dlsym(
            RTLD_NEXT, "recvfrom");
    r = real_recvfrom(fd, buf, len, flags, sa, sl);
    if (r > 0 && !(flags & MSG_PEEK)) maybe_corrupt(buf, (size_t)r);
    return r;
}

ssize_t recvmsg(int fd, struct msghdr *m, int flags) {
    ssize_t r;
    if (!real_recvmsg) real_recvmsg = (ssize_t(*)(int, struct msghdr *, int))dlsym(RTLD_NEXT, "recvmsg");
    r = real_recvmsg(fd, m, flags);
    if (r > 0 && !(flags & MSG_PEEK)) corrupt_iov(m->msg_iov, (int)m->msg_iovlen, r);
    return r;
}

ssize_t read(int fd, void *buf, size_t len) {
    ssize_t r;
    if (!real_read) real_read = (ssize_t(*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
    r = real_read(fd, buf, len);
    if (r > 0) maybe_corrupt(buf, (size_t)r);
    return r;
}

ssize_t readv(int fd, const struct iovec *iov, int cnt) {
    ssize_t r;
    if (!real_readv) real_readv = (ssize_t(*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "readv");
    r = real_readv(fd, iov, cnt);
    if (r > 0) corrupt_iov(iov, cnt, r);
    return r;
}
