/* gpu_share — what two processes that share one GPU can do with it, without efax or libfabric:
   the GPU machine's own figures that efax's one-GPU results (both ranks on one GPU, provider shm)
   are read against. Two processes (forked before either touches CUDA, as two ranks are) each
   allocate buffers on the same GPU and open the other's by CUDA IPC, as shm's IPC path does; then,
   each line one experiment (B: the process that copies, A: the other one):

     pull            B pulls SIZE from A's buffer with cudaMemcpy on the legacy default stream (what
                     shm issues for a write or receive into device memory); A has no GPU work.
                     Two rates: from issue to done by the host clock (what a waiter gets), and
                     while the copy runs by events around it (they cannot see a wait for the GPU)
     pull+spin       the same while A runs a kernel that spins until B is done (8 blocks of 32
                     threads polling mapped host memory: the proxy's producers waiting in quiet)
     h2d, h2d+spin   B copies SIZE from pinned host memory (always a copy engine), alone and beside
                     A's spinning kernel: whether the other context's kernel holds up copy engines
     d2h             B copies SIZE of its device memory into pinned host memory: what staged device
                     memory (no GPUDirect) pays to leave the GPU, the staged path's copy ceiling
     pull+pull       both pull at once (all2all's two directions)
     a2a/sm, a2a/ce, a2a/none, a2a/alone
                     all2all's iteration for 2 ranks with a send buffer of SIZE: each process copies
                     its own half by SMs (efax__dev_copy, a kernel on a stream of its own) or by the
                     copy engine (cudaMemcpyAsync), or not at all, pulls the peer's half, waits for
                     both by events (as efax's settle does), then both meet at a barrier; alone: B
                     only, A idle (the GPU to itself). Microseconds per iteration (median) and the
                     busbw that gives, as all2all_cuda reports it.
     a2a/q-sm, a2a/q-none
                     the same copies with no host in the loop: each process queues every
                     iteration's pull (and own-half copy by SMs, or none) at once, the pulls one
                     after the other on the legacy stream, and waits once at the end: what the GPUs
                     and their link can do for all2all when no iteration waits for the last (its
                     bound; a host that sees each iteration end pays that wait on top). Mean per
                     iteration over the whole queue, the slower process's.

   With -d A,B the two processes run on GPUs A and B (two GPUs: their link, NVLink or PCIe, is
   what the pulls cross); with one device both share it.

   Every wait has a deadline; a copy is checked once (its first and last byte). Exit status: 0,
   1 on a failure, 77 (printing "skipped: ...") without a CUDA device.

   nvcc -O2 -arch=sm_90 -I. tests/gpu_share.cu -o gpu_share
   gpu_share [-s SIZE] [-n ITERS] [-d DEVICE[,DEVICE_B]]   (SIZE default 64M; a2a also at 1M)
*/
#include <cuda_runtime.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CK(call)                                                                                                   \
    do {                                                                                                           \
        cudaError_t e_ = (call);                                                                                   \
        if (e_ != cudaSuccess) {                                                                                   \
            fprintf(stderr, "gpu_share: %s failed: %s at line %d\n", #call, cudaGetErrorString(e_), __LINE__);     \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)

enum { MAXIT = 200, DEADLINE_S = 30 };

/* Shared between the two processes (an anonymous shared mapping made before fork). */
typedef struct shared {
    cudaIpcMemHandle_t h[2];   /* each process's source buffer */
    int arrived[2];            /* barrier: how many times each process arrived */
    int done;                  /* B finished its part of an experiment */
    double us[2][MAXIT];       /* per-iteration times, per process */
    double gbs[2];
} shared;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Both processes meet; a peer that does not come within DEADLINE_S ends this one. */
static void barrier(shared *sh, int me) {
    int mine = __atomic_add_fetch(&sh->arrived[me], 1, __ATOMIC_SEQ_CST);
    double end = now_s() + DEADLINE_S;
    while (__atomic_load_n(&sh->arrived[1 - me], __ATOMIC_SEQ_CST) < mine)
        if (now_s() > end) {
            fprintf(stderr, "gpu_share: process %d: the other process did not reach barrier %d within %d s\n", me, mine, DEADLINE_S);
            exit(1);
        }
}

/* Polls every event until it fired, or fails after DEADLINE_S. */
static void wait_events(cudaEvent_t *ev, int n) {
    double end = now_s() + DEADLINE_S;
    for (int i = 0; i < n;) {
        cudaError_t e = cudaEventQuery(ev[i]);
        if (e == cudaSuccess) i++;
        else if (e != cudaErrorNotReady) CK(e);
        else if (now_s() > end) {
            fprintf(stderr, "gpu_share: a copy did not finish within %d s\n", DEADLINE_S);
            exit(1);
        }
    }
}

__global__ void k_spin(volatile const int *stop) {
    if (threadIdx.x == 0)
        while (!*stop) __nanosleep(128);
}

__global__ void k_copy(uint4 *dst, const uint4 *src, size_t n) { /* efax__dev_copy's kind: every SM, blocked */
    size_t per = (n + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * per, hi = lo + per < n ? lo + per : n;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) dst[i] = src[i];
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(const double *v, int n) {
    double t[MAXIT];
    memcpy(t, v, sizeof(double) * (size_t)n);
    qsort(t, (size_t)n, sizeof t[0], cmp_d);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

typedef struct proc {
    shared *sh;
    int me, iters, sms;
    size_t size;
    uint8_t *src, *dst, *peer;  /* own source, own destination, the other's source (IPC) */
    uint8_t *host;              /* pinned */
    int *stop_h, *stop_d;       /* mapped pinned: A's spinning kernel stops when it is 1 */
    cudaStream_t self_s;        /* the own-chunk copy's stream (non-blocking, as efax's) */
    cudaEvent_t ev[2], t0, t1;
} proc;

/* This process's copies of `bytes` from `from`, one at a time on the legacy stream; GB/s, median:
   *gpu by events around each copy (the copy while it runs), the return value by the host clock
   from its issue until it is seen done (what a waiter gets: time spent waiting for the GPU to
   run this context counts too). */
static double copies(proc *p, void *to, const void *from, size_t bytes, double *gpu) {
    double g[MAXIT], h[MAXIT];
    for (int i = 0; i < p->iters; i++) {
        float ms = 0;
        double t = now_s();
        CK(cudaEventRecord(p->t0, cudaStreamLegacy));
        CK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, cudaStreamLegacy));
        CK(cudaEventRecord(p->t1, cudaStreamLegacy));
        wait_events(&p->t1, 1);
        h[i] = (double)bytes / (now_s() - t) / 1e9;
        CK(cudaEventElapsedTime(&ms, p->t0, p->t1));
        g[i] = (double)bytes / (ms * 1e-3) / 1e9;
    }
    *gpu = median(g, p->iters);
    return median(h, p->iters);
}

/* One experiment of the copy kind: B copies (kind 0: pull, 1: h2d, 2: d2h), A idle or spinning. */
static void copy_exp(proc *p, const char *name, int kind, int spin) {
    barrier(p->sh, p->me);
    if (p->me == 0) { /* A */
        if (spin) {
            *p->stop_h = 0;
            k_spin<<<8, 32>>>(p->stop_d);
            CK(cudaGetLastError());
        }
        barrier(p->sh, p->me); /* the kernel is queued */
        barrier(p->sh, p->me); /* B is done */
        if (spin) {
            __atomic_store_n(p->stop_h, 1, __ATOMIC_SEQ_CST);
            CK(cudaDeviceSynchronize());
        }
        return;
    }
    barrier(p->sh, p->me);
    if (spin) usleep(2000); /* the spinning kernel is resident */
    {
        void *to = kind == 2 ? (void *)p->host : (void *)p->dst;
        const void *from = kind == 1 ? (const void *)p->host : kind == 2 ? (const void *)p->src : (const void *)p->peer;
        double gpu = 0, host = copies(p, to, from, p->size, &gpu);
        barrier(p->sh, p->me);
        printf("%-12s %8zu MiB  %8.1f GB/s issue to done  %8.1f GB/s while it runs  (B's copies, medians of %d)\n", name,
               p->size >> 20, host, gpu, p->iters);
    }
    fflush(stdout);
}

/* Both pull at once. */
static void pull_pull(proc *p) {
    double gpu = 0;
    barrier(p->sh, p->me);
    p->sh->gbs[p->me] = copies(p, p->dst, p->peer, p->size, &gpu);
    barrier(p->sh, p->me);
    if (p->me == 1)
        printf("%-12s %8zu MiB  %8.1f GB/s issue to done  (A's; B's %.1f), %.1f GB/s while B's runs  (medians of %d)\n",
               "pull+pull", p->size >> 20, p->sh->gbs[0], p->sh->gbs[1], gpu, p->iters);
    fflush(stdout);
}

/* all2all's iteration; self: 0 none, 1 SMs, 2 copy engine; alone: only B works. */
static void a2a(proc *p, const char *name, size_t size, int self, int alone) {
    size_t half = size / 2;
    int work = !alone || p->me == 1;
    barrier(p->sh, p->me);
    for (int i = -3; i < p->iters; i++) {
        double t = now_s();
        int n = 0;
        if (work) {
            if (self == 1) k_copy<<<p->sms, 512, 0, p->self_s>>>((uint4 *)(p->dst + half), (const uint4 *)(p->src + half), half / 16);
            if (self == 2) CK(cudaMemcpyAsync(p->dst + half, p->src + half, half, cudaMemcpyDeviceToDevice, p->self_s));
            CK(cudaGetLastError());
            CK(cudaMemcpyAsync(p->dst, p->peer, half, cudaMemcpyDefault, cudaStreamLegacy));
            CK(cudaEventRecord(p->ev[n++], cudaStreamLegacy));
            if (self) CK(cudaEventRecord(p->ev[n++], p->self_s));
            wait_events(p->ev, n);
        }
        barrier(p->sh, p->me);
        if (i >= 0) p->sh->us[p->me][i] = (now_s() - t) * 1e6;
    }
    barrier(p->sh, p->me);
    if (p->me == 1) {
        double us = median(p->sh->us[1], p->iters);
        /* all2all_cuda's busbw for 2 ranks: size / time * (n-1)/n */
        printf("%-12s %8zu MiB  %8.1f us/iteration  busbw %.1f GB/s\n", name, size >> 20, us, (double)size / (us * 1e-6) / 1e9 / 2);
    }
    fflush(stdout);
}

/* all2all's copies queued with no host in the loop (self: 0 none, 1 SMs): every iteration's pull
   one after the other on the legacy stream, the own half on self_s, one wait at the end. */
static void a2a_queued(proc *p, const char *name, size_t size, int self) {
    size_t half = size / 2;
    int n = 0;
    double t, us;
    barrier(p->sh, p->me);
    t = now_s();
    for (int i = 0; i < p->iters; i++) {
        if (self) k_copy<<<p->sms, 512, 0, p->self_s>>>((uint4 *)(p->dst + half), (const uint4 *)(p->src + half), half / 16);
        CK(cudaGetLastError());
        CK(cudaMemcpyAsync(p->dst, p->peer, half, cudaMemcpyDefault, cudaStreamLegacy));
    }
    CK(cudaEventRecord(p->ev[n++], cudaStreamLegacy));
    if (self) CK(cudaEventRecord(p->ev[n++], p->self_s));
    wait_events(p->ev, n);
    p->sh->us[p->me][0] = (now_s() - t) * 1e6 / p->iters;
    barrier(p->sh, p->me);
    us = p->sh->us[0][0] > p->sh->us[1][0] ? p->sh->us[0][0] : p->sh->us[1][0];
    if (p->me == 1)
        printf("%-12s %8zu MiB  %8.1f us/iteration  busbw %.1f GB/s\n", name, size >> 20, us, (double)size / (us * 1e-6) / 1e9 / 2);
    fflush(stdout);
}

static int run(shared *sh, int me, size_t size, int iters, int device) {
    proc p;
    uint8_t first = 0, last = 0;
    memset(&p, 0, sizeof p);
    p.sh = sh, p.me = me, p.size = size, p.iters = iters;
    alarm(300); /* a GPU that never finishes a copy or a kernel ends the process (SIGALRM) */
    CK(cudaSetDevice(device));
    CK(cudaDeviceGetAttribute(&p.sms, cudaDevAttrMultiProcessorCount, device));
    CK(cudaMalloc((void **)&p.src, size));
    CK(cudaMalloc((void **)&p.dst, size));
    CK(cudaMemset(p.src, 0xa0 + me, size));
    CK(cudaHostAlloc((void **)&p.host, size, cudaHostAllocDefault));
    memset(p.host, 0x5a, size);
    CK(cudaHostAlloc((void **)&p.stop_h, sizeof(int), cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **)&p.stop_d, p.stop_h, 0));
    CK(cudaStreamCreateWithFlags(&p.self_s, cudaStreamNonBlocking));
    for (int i = 0; i < 2; i++) CK(cudaEventCreateWithFlags(&p.ev[i], cudaEventDisableTiming));
    CK(cudaEventCreate(&p.t0));
    CK(cudaEventCreate(&p.t1));
    CK(cudaIpcGetMemHandle(&sh->h[me], p.src));
    CK(cudaDeviceSynchronize());
    barrier(sh, me);
    CK(cudaIpcOpenMemHandle((void **)&p.peer, sh->h[1 - me], cudaIpcMemLazyEnablePeerAccess));
    /* the pull moves the other's bytes */
    CK(cudaMemcpy(p.dst, p.peer, size, cudaMemcpyDefault));
    CK(cudaMemcpy(&first, p.dst, 1, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&last, p.dst + size - 1, 1, cudaMemcpyDeviceToHost));
    if (first != 0xa0 + (1 - me) || last != first) {
        fprintf(stderr, "gpu_share: process %d: pulled bytes 0x%02x..0x%02x, expected 0x%02x\n", me, first, last, 0xa0 + (1 - me));
        return 1;
    }
    copy_exp(&p, "pull", 0, 0);
    copy_exp(&p, "pull+spin", 0, 1);
    copy_exp(&p, "h2d", 1, 0);
    copy_exp(&p, "h2d+spin", 1, 1);
    copy_exp(&p, "d2h", 2, 0);
    pull_pull(&p);
    for (size_t s = size < (1u << 20) ? size : (1u << 20);; s = size) {
        a2a(&p, "a2a/sm", s, 1, 0);
        a2a(&p, "a2a/ce", s, 2, 0);
        a2a(&p, "a2a/none", s, 0, 0);
        a2a(&p, "a2a/alone", s, 1, 1);
        a2a_queued(&p, "a2a/q-sm", s, 1);
        a2a_queued(&p, "a2a/q-none", s, 0);
        if (s == size) break;
    }
    barrier(sh, me);
    CK(cudaIpcCloseMemHandle(p.peer));
    return 0;
}

int main(int argc, char **argv) {
    size_t size = 64u << 20;
    int iters = 20, device = 0, device_b = -1, n = 0, st, bad = 0, opt;
    shared *sh;
    pid_t pid[2];
    while ((opt = getopt(argc, argv, "s:n:d:h")) != -1) {
        char *end = NULL;
        double v;
        switch (opt) {
        case 's':
            v = strtod(optarg, &end);
            if (end && (*end == 'K' || *end == 'k')) v *= 1024;
            if (end && (*end == 'M' || *end == 'm')) v *= 1 << 20;
            if (end && (*end == 'G' || *end == 'g')) v *= 1 << 30;
            size = (size_t)v;
            break;
        case 'n': iters = atoi(optarg); break;
        case 'd':
            device = atoi(optarg);
            device_b = strchr(optarg, ',') ? atoi(strchr(optarg, ',') + 1) : -1;
            break;
        default:
            fprintf(stderr, "usage: gpu_share [-s SIZE (64M)] [-n ITERS (20, at most %d)] [-d DEVICE[,DEVICE_B] (0)]\n", MAXIT);
            return opt == 'h' ? 0 : 2;
        }
    }
    if (size < 4096 || size % 4096 || iters < 1 || iters > MAXIT) {
        fprintf(stderr, "gpu_share: -s must be a multiple of 4 KiB (at least 4K) and -n 1..%d\n", MAXIT);
        return 2;
    }
    /* the parent never touches CUDA (a forked child must not inherit a CUDA context); the device
       count comes from a child too */
    if ((pid[0] = fork()) == 0) {
        int c = 0;
        _exit(cudaGetDeviceCount(&c) != cudaSuccess || c <= device || c <= device_b ? 77 : 0);
    }
    if (pid[0] < 0 || waitpid(pid[0], &st, 0) < 0) return 1;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
        printf("skipped: no CUDA device %d\n", device_b > device ? device_b : device);
        return 77;
    }
    sh = (shared *)mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) return 1;
    memset(sh, 0, sizeof *sh);
    if (device_b < 0) device_b = device;
    if (device_b == device)
        printf("gpu_share: two processes on GPU %d, %d iterations each (B copies, A is the other process)\n", device, iters);
    else
        printf("gpu_share: process A on GPU %d, B on GPU %d, %d iterations each\n", device, device_b, iters);
    fflush(stdout);
    for (; n < 2; n++)
        if ((pid[n] = fork()) == 0) _exit(run(sh, n, size, iters, n ? device_b : device));
        else if (pid[n] < 0) return 1;
    for (int i = 0; i < 2; i++) {
        if (waitpid(pid[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) bad++;
    }
    if (bad) fprintf(stderr, "gpu_share: %d process(es) failed\n", bad);
    return bad ? 1 : 0;
}
