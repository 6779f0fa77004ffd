/* nvshmem_bench — NVSHMEM's own figures beside efax's, on the same GPUs and in the same run
   (tests/gpu.sh): one PE per GPU, started as efax's ranks are (EFAX_RANK, EFAX_SIZE, EFAX_ROOT,
   EFAX_TOKEN: efax's TCP rendezvous), NVSHMEM bootstrapped through its unique-id API over that
   rendezvous (rank 0's id, gathered with efax_boot_allgather). Only NVSHMEM's public API moves
   data. Each experiment sweeps -b .. -e by -f; every byte its last timed iteration moved is checked
   afterwards, against the pattern efax's checks use (efax_pattern_word):

     a2a   nvshmemx_alltoallmem_on_stream (host-initiated, on a stream): the send buffer of SIZE
           cut into one chunk per PE, as efax's all2all and nccl-tests' alltoall_perf cut it. Time:
           the slowest PE's loop of iterations back to back (all2all's), over the iterations;
           busbw = SIZE / time x (n-1)/n (nccl-tests' formula)
     put   PE 0 -> PE 1, device-initiated: CMDS = 256 MiB / SIZE commands (1 .. 128) of SIZE
           bytes an iteration, as efax's proxy driver writes them, one kernel an iteration; each
           command a put by every block of the grid (its slice); Blocking: nvshmemx_putmem_block
           and a quiet after every command (the seed study's blocking calls), NBI:
           nvshmemx_putmem_nbi_block and one quiet at the end of the kernel
     bw    put bandwidth over NVLink, beside efax's ipc driver: PE 0 -> each other PE in turn (one
           put of SIZE an iteration, the grid's blocks a slice each, one quiet), then every PE ->
           every other at once (into its own region of each): GB/s per pair (the slowest PE's) and
           in aggregate (every pair's bytes over that time)

   The grid: one block of 512 threads per SM (NVSHMEM's puts over NVLink are the SMs' own loads
   and stores). Rows go to --json FILE as JSON Lines shaped like efax's ({"schema":1,"driver":
   "nvshmem", "variant", "kind", "size", "gbs", "busbw_gbs", "wrong", ...}). Exit status 0; 1 on
   an error or a wrong byte; 2 for bad arguments; 77 ("skipped: ...") without a CUDA device.

   Built by tests/gpu.sh on the GPU machine, where NVSHMEM is the nvidia-nvshmem-cu13 Python
   package (headers, libnvshmem_host.so.3, libnvshmem_device.a):
   nvcc -O2 -rdc=true -arch=sm_90 -I. -I$NVSHMEM/include tests/nvshmem_bench.cu -o nvshmem_bench \
       -L$NVSHMEM/lib -l:libnvshmem_host.so.3 -lnvshmem_device -lcuda -L$LIBFABRIC/lib -lfabric \
       -DEFAX_NO_PMIX
   nvshmem_bench a2a|put|bw [-b 1M] [-e 256M] [-f 4] [--json FILE]
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"

#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(call) ck((call), #call, __LINE__)

enum { MAX_CMDS = 128, BLOCK = 512, DEADLINE_MS = 60000 };
static const uint64_t BUDGET = 256ull << 20; /* the put experiment's bytes an iteration, as proxy's */

typedef struct run {
    efax_boot boot;
    int me, n, sms;
    uint64_t min, max;
    double factor;
    FILE *json;
    cudaStream_t s;
    unsigned long long *bad_d;
    uint64_t tag; /* a fresh pattern for every experiment and size */
    int64_t wrong;
    char nv[32]; /* NVSHMEM's version */
} run;

static int ck(cudaError_t e, const char *what, int line) {
    if (e == cudaSuccess) return 0;
    fprintf(stderr, "nvshmem_bench: %s failed at line %d: %s\n", what, line, cudaGetErrorString(e));
    return 1;
}

/* Waits for everything on the stream, within DEADLINE_MS: a hung put ends the run, not the job. */
static int drain(cudaStream_t s) {
    uint64_t end = efax_now_ns() + (uint64_t)DEADLINE_MS * 1000000ull;
    cudaError_t e;
    while ((e = cudaStreamQuery(s)) == cudaErrorNotReady)
        if (efax_now_ns() > end) {
            fprintf(stderr, "nvshmem_bench: the GPU's work did not finish within %d ms\n", DEADLINE_MS);
            return 1;
        }
    return CK(e);
}

/* Word w of a message is efax_pattern_word(seed, w), as efax's own fill writes it. */
__global__ void k_fill(uint64_t *p, uint64_t words, uint64_t seed) {
    for (uint64_t w = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; w < words;
         w += (uint64_t)gridDim.x * blockDim.x)
        p[w] = efax_pattern_word(seed, w);
}

/* Counts the bytes of words that differ from the pattern into *bad. */
__global__ void k_check(const uint64_t *p, uint64_t words, uint64_t seed, unsigned long long *bad) {
    unsigned long long mine = 0;
    for (uint64_t w = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; w < words;
         w += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t got = p[w], want = efax_pattern_word(seed, w);
        for (int k = 0; k < 8; k++) mine += (uint8_t)(got >> (8 * k)) != (uint8_t)(want >> (8 * k));
    }
    if (mine) atomicAdd(bad, mine);
}

/* The put experiment's kernel: cmds commands of size bytes, command c at c * size on both sides,
   each block putting its slice of every command to pe; blocking: a quiet after each. */
__global__ void k_put(uint8_t *dst, const uint8_t *src, uint64_t size, int cmds, int pe, int blocking) {
    uint64_t slice = ((size + gridDim.x - 1) / gridDim.x + 15) / 16 * 16, off = blockIdx.x * slice;
    uint64_t len = off < size ? (size - off < slice ? size - off : slice) : 0;
    for (int c = 0; c < cmds; c++) {
        uint64_t at = (uint64_t)c * size + off;
        if (len && blocking) nvshmemx_putmem_block(dst + at, src + at, len, pe);
        if (len && !blocking) nvshmemx_putmem_nbi_block(dst + at, src + at, len, pe);
        if (blocking) {
            __syncthreads();
            if (threadIdx.x == 0) nvshmem_quiet();
            __syncthreads();
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) nvshmem_quiet();
    __syncthreads();
}

/* The bw experiment's kernel: npeers puts of size bytes at once, put p from src to pes[p] at
   dst_off[p] of dst; the grid's blocks are shared among the puts (block b: put b mod npeers). */
__global__ void k_bw(uint8_t *dst, const uint8_t *src, uint64_t size, int npeers, const int *pes,
                     const uint64_t *dst_off) {
    int p = blockIdx.x % npeers, nb = gridDim.x / npeers, b = blockIdx.x / npeers;
    uint64_t slice = ((size + (uint64_t)nb - 1) / (uint64_t)nb + 15) / 16 * 16, off = (uint64_t)b * slice;
    uint64_t len = b < nb && off < size ? (size - off < slice ? size - off : slice) : 0;
    if (len) nvshmemx_putmem_nbi_block(dst + dst_off[p] + off, src + off, len, pes[p]);
    __syncthreads();
    if (threadIdx.x == 0) nvshmem_quiet();
    __syncthreads();
}

/* Fills len bytes at p with (rank, iter)'s pattern; checks them (adds the wrong bytes to r->wrong). */
static int fill(run *r, void *p, uint64_t len, int rank, uint64_t iter) {
    k_fill<<<1024, 256, 0, r->s>>>((uint64_t *)p, len / 8, efax_pattern_seed(rank, iter));
    return CK(cudaGetLastError()) || drain(r->s);
}
static int check(run *r, const void *p, uint64_t len, int rank, uint64_t iter, int64_t *wrong) {
    unsigned long long bad = 0;
    if (CK(cudaMemsetAsync(r->bad_d, 0, sizeof bad, r->s))) return 1;
    k_check<<<1024, 256, 0, r->s>>>((const uint64_t *)p, len / 8, efax_pattern_seed(rank, iter), r->bad_d);
    if (CK(cudaGetLastError()) ||
        CK(cudaMemcpyAsync(&bad, r->bad_d, sizeof bad, cudaMemcpyDeviceToHost, r->s)) || drain(r->s))
        return 1;
    *wrong += (int64_t)bad;
    return 0;
}

/* "4096", "64K", "1M", "2G": *out bytes; 0, or 1 for anything else. */
static int parse_size(const char *v, uint64_t *out) {
    char *end = NULL;
    double x = strtod(v, &end);
    double unit = !end || !*end ? 1
                  : *end == 'K' ? 1024.0
                  : *end == 'M' ? 1048576.0
                  : *end == 'G' ? 1073741824.0
                                : 0;
    if (!end || end == v || x <= 0 || unit == 0 || (*end && end[1])) return 1;
    *out = (uint64_t)(x * unit);
    return 0;
}

/* Iterations of a size: a GiB's worth, 10 .. 1000 (efax's default, efax_opts_iters). */
static int iters_of(uint64_t bytes) {
    uint64_t n = bytes ? (1ull << 30) / bytes : 1000;
    return n < 10 ? 10 : n > 1000 ? 1000 : (int)n;
}

/* The slowest PE's seconds (each PE gives its own; 0 from a PE that timed nothing). */
static int slowest(run *r, double mine, double *out) {
    double all[1024];
    if (r->n > 1024 || efax_boot_allgather(&r->boot, &mine, sizeof mine, all, -1)) return 1;
    *out = 0;
    for (int i = 0; i < r->n; i++) *out = all[i] > *out ? all[i] : *out;
    return 0;
}

/* One JSON row (rank 0) and one line on stdout. */
static void row(run *r, const char *variant, const char *kind, uint64_t size, int iters, int peers,
                double seconds, uint64_t bytes, double busbw, int64_t wrong) {
    double gbs = seconds > 0 ? (double)bytes / seconds / 1e9 : 0;
    if (r->me != 0) return;
    printf("%-18s %10llu B %5d iters %9.2f GB/s", variant, (unsigned long long)size, iters, gbs);
    if (busbw > 0) printf("  busbw %9.2f GB/s", busbw);
    printf("  %s\n", wrong ? "WRONG BYTES" : "0 wrong");
    if (!r->json) return;
    fprintf(
        r->json,
        "{\"schema\":1,\"driver\":\"nvshmem\",\"variant\":\"%s\",\"kind\":\"%s\",\"provider\":\"nvshmem\","
        "\"memory\":\"device\",\"mem_path\":\"nvshmem\",\"size\":%llu,\"iters\":%d,\"window\":1,\"peers\":%d,"
        "\"seconds\":%.9g,\"bytes\":%llu,\"gbps\":%.6g,\"gbs\":%.6g,",
        variant, kind, (unsigned long long)size, iters, peers, seconds, (unsigned long long)bytes, gbs * 8,
        gbs);
    if (busbw > 0) fprintf(r->json, "\"algbw_gbs\":%.6g,\"busbw_gbs\":%.6g,", gbs, busbw);
    fprintf(r->json, "\"wrong\":%lld,\"run\":{\"nvshmem\":\"%s\",\"ranks\":%d,\"sms\":%d,\"block\":%d}}\n",
            (long long)wrong, r->nv, r->n, r->sms, BLOCK);
    fflush(r->json);
}

/* Times iters launches of what `go` starts on r->s, after 5 untimed ones; *sec: this PE's time. */
typedef int (*launch_fn)(run *r, void *u);
static int timed(run *r, launch_fn go, void *u, int iters, double *sec) {
    cudaEvent_t e0, e1;
    float ms = 0;
    int rc = CK(cudaEventCreate(&e0)) || CK(cudaEventCreate(&e1));
    for (int i = 0; i < 5 && !rc; i++) rc = go(r, u);
    if (!rc) rc = drain(r->s);
    if (!rc) nvshmem_barrier_all();
    if (!rc) rc = CK(cudaEventRecord(e0, r->s));
    for (int i = 0; i < iters && !rc; i++) rc = go(r, u);
    if (!rc) rc = CK(cudaEventRecord(e1, r->s)) || drain(r->s) || CK(cudaEventElapsedTime(&ms, e0, e1));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    *sec = ms * 1e-3;
    return rc;
}

typedef struct a2a_job {
    uint8_t *dst, *src;
    uint64_t chunk;
} a2a_job;
static int a2a_go(run *r, void *u) {
    a2a_job *j = (a2a_job *)u;
    return nvshmemx_alltoallmem_on_stream(NVSHMEM_TEAM_WORLD, j->dst, j->src, j->chunk, r->s) != 0;
}

/* a2a: nvshmemx_alltoallmem_on_stream at every size. */
static int exp_a2a(run *r) {
    a2a_job j;
    int rc = 0;
    j.src = (uint8_t *)nvshmem_malloc(r->max);
    j.dst = (uint8_t *)nvshmem_malloc(r->max);
    if (!j.src || !j.dst) {
        fprintf(stderr, "nvshmem_bench: nvshmem_malloc of 2 x %llu bytes failed\n",
                (unsigned long long)r->max);
        return 1;
    }
    for (uint64_t size = r->min; size && size <= r->max && !rc;) {
        int iters;
        double mine = 0, t = 0;
        int64_t wrong = 0;
        j.chunk = size / (uint64_t)r->n / 16 * 16;
        iters = iters_of(j.chunk * (uint64_t)r->n);
        r->tag++;
        for (int p = 0; p < r->n && !rc; p++) /* the chunk for PE p: this PE's pattern of (tag, p) */
            rc = fill(r, j.src + (uint64_t)p * j.chunk, j.chunk, r->me, r->tag * 1024 + (uint64_t)p);
        if (!rc) rc = CK(cudaMemsetAsync(j.dst, EFAX_POISON, j.chunk * (uint64_t)r->n, r->s)) || drain(r->s);
        if (!rc) rc = timed(r, a2a_go, &j, iters, &mine);
        if (!rc) nvshmem_barrier_all();
        for (int p = 0; p < r->n && !rc; p++) /* what PE p sent here */
            rc = check(r, j.dst + (uint64_t)p * j.chunk, j.chunk, p, r->tag * 1024 + (uint64_t)r->me, &wrong);
        if (!rc) rc = efax_boot_sum(&r->boot, wrong, &wrong, -1) || slowest(r, mine, &t);
        if (rc) break;
        r->wrong += wrong;
        t /= iters;
        row(r, "alltoall", "alltoall", j.chunk * (uint64_t)r->n, iters, r->n - 1, t, j.chunk * (uint64_t)r->n,
            t > 0 ? (double)(j.chunk * (uint64_t)r->n) / t / 1e9 * (r->n - 1) / r->n : 0, wrong);
        size = size >= r->max                          ? 0
               : (uint64_t)(size * r->factor) < r->max ? (uint64_t)(size * r->factor)
                                                       : r->max;
    }
    nvshmem_free(j.dst);
    nvshmem_free(j.src);
    return rc;
}

typedef struct put_job {
    uint8_t *dst, *src;
    uint64_t size;
    int cmds, pe, blocking;
    int npeers;
    int *pes_d;
    uint64_t *off_d;
} put_job;
static int put_go(run *r, void *u) {
    put_job *j = (put_job *)u;
    if (r->me == 0) k_put<<<r->sms, BLOCK, 0, r->s>>>(j->dst, j->src, j->size, j->cmds, j->pe, j->blocking);
    return CK(cudaGetLastError());
}
static int bw_go(run *r, void *u) {
    put_job *j = (put_job *)u;
    if (j->npeers > 0)
        k_bw<<<r->sms, BLOCK, 0, r->s>>>(j->dst, j->src, j->size, j->npeers, j->pes_d, j->off_d);
    return CK(cudaGetLastError());
}

/* put: PE 0 -> PE 1, Blocking and NBI, at every size. */
static int exp_put(run *r) {
    uint64_t len = BUDGET > r->max ? BUDGET : r->max;
    put_job j;
    int rc = 0;
    memset(&j, 0, sizeof j);
    j.src = (uint8_t *)nvshmem_malloc(len);
    j.dst = (uint8_t *)nvshmem_malloc(len);
    if (!j.src || !j.dst) {
        fprintf(stderr, "nvshmem_bench: nvshmem_malloc of 2 x %llu bytes failed\n", (unsigned long long)len);
        return 1;
    }
    j.pe = 1;
    for (uint64_t size = r->min; size && size <= r->max && !rc;) {
        j.size = size / 16 * 16;
        uint64_t cmds = BUDGET / j.size;
        j.cmds = cmds < 1 ? 1 : cmds > (uint64_t)MAX_CMDS ? (int)MAX_CMDS : (int)cmds;
        for (j.blocking = 1; j.blocking >= 0 && !rc; j.blocking--) {
            int iters = iters_of(j.size * (uint64_t)j.cmds);
            double mine = 0, t = 0;
            int64_t wrong = 0;
            r->tag++;
            for (int c = 0; r->me == 0 && c < j.cmds && !rc; c++)
                rc = fill(r, j.src + (uint64_t)c * j.size, j.size, 0, r->tag * 1024 + (uint64_t)c);
            if (!rc && r->me == 1)
                rc = CK(cudaMemsetAsync(j.dst, EFAX_POISON, j.size * (uint64_t)j.cmds, r->s)) || drain(r->s);
            if (!rc) rc = timed(r, put_go, &j, iters, &mine);
            if (!rc) nvshmem_barrier_all();
            for (int c = 0; r->me == 1 && c < j.cmds && !rc; c++)
                rc = check(r, j.dst + (uint64_t)c * j.size, j.size, 0, r->tag * 1024 + (uint64_t)c, &wrong);
            if (!rc) rc = efax_boot_sum(&r->boot, wrong, &wrong, -1) || slowest(r, mine, &t);
            if (rc) break;
            r->wrong += wrong;
            t /= iters;
            row(r, j.blocking ? "put-blocking" : "put-nbi", "oneway", j.size, iters, 1, t,
                j.size * (uint64_t)j.cmds, 0, wrong);
        }
        size = size >= r->max                          ? 0
               : (uint64_t)(size * r->factor) < r->max ? (uint64_t)(size * r->factor)
                                                       : r->max;
    }
    nvshmem_free(j.dst);
    nvshmem_free(j.src);
    return rc;
}

/* bw: PE 0 -> each PE k in turn, then every PE -> every other at once, at every size. */
static int exp_bw(run *r) {
    put_job j;
    int pes[1024], rc = 0;
    uint64_t offs[1024];
    memset(&j, 0, sizeof j);
    if (r->n > 1024) return 1;
    j.src = (uint8_t *)nvshmem_malloc(r->max);
    j.dst = (uint8_t *)nvshmem_malloc(r->max * (uint64_t)r->n);
    if (!j.src || !j.dst || CK(cudaMalloc((void **)&j.pes_d, sizeof pes)) ||
        CK(cudaMalloc((void **)&j.off_d, sizeof offs))) {
        fprintf(stderr, "nvshmem_bench: %llu bytes of symmetric memory: nvshmem_malloc failed\n",
                (unsigned long long)(r->max * (uint64_t)(r->n + 1)));
        return 1;
    }
    for (uint64_t size = r->min; size && size <= r->max && !rc;) {
        j.size = size / 16 * 16;
        for (int k = 1; k <= r->n && !rc; k++) { /* k < n: PE 0 -> PE k; k == n: every pair at once */
            bool all = k == r->n, src = all || r->me == 0, dst = all || r->me == k;
            int iters = iters_of(j.size), np = 0;
            double mine = 0, t = 0;
            int64_t wrong = 0;
            char name[32];
            r->tag++;
            if (all)
                for (int q = 1; q < r->n; q++) { /* the next PE on first: every PE's puts spread */
                    pes[np] = (r->me + q) % r->n;
                    offs[np++] = (uint64_t)r->me * j.size;
                }
            else if (r->me == 0) {
                pes[np] = k;
                offs[np++] = 0;
            }
            j.npeers = np;
            rc = CK(cudaMemcpy(j.pes_d, pes, sizeof pes, cudaMemcpyHostToDevice)) ||
                 CK(cudaMemcpy(j.off_d, offs, sizeof offs, cudaMemcpyHostToDevice));
            if (!rc && src) rc = fill(r, j.src, j.size, r->me, r->tag);
            if (!rc && dst)
                rc = CK(cudaMemsetAsync(j.dst, EFAX_POISON, j.size * (uint64_t)r->n, r->s)) || drain(r->s);
            if (!rc) rc = timed(r, bw_go, &j, iters, &mine);
            if (!rc) nvshmem_barrier_all();
            for (int p = 0; dst && p < r->n && !rc; p++)
                if (all ? p != r->me : p == 0)
                    rc = check(r, j.dst + (all ? (uint64_t)p * j.size : 0), j.size, p, r->tag, &wrong);
            if (!rc) rc = efax_boot_sum(&r->boot, wrong, &wrong, -1) || slowest(r, mine, &t);
            if (rc) break;
            r->wrong += wrong;
            t /= iters;
            snprintf(name, sizeof name, all ? "put-all-pairs" : "put-0-to-%d", k);
            row(r, name, "oneway", j.size, iters, all ? r->n - 1 : 1, t, j.size, 0, wrong);
            if (all) /* every pair's bytes over the slowest PE's time */
                row(r, "put-all-aggregate", "oneway", j.size, iters, r->n * (r->n - 1), t,
                    j.size * (uint64_t)r->n * (uint64_t)(r->n - 1), 0, wrong);
        }
        size = size >= r->max                          ? 0
               : (uint64_t)(size * r->factor) < r->max ? (uint64_t)(size * r->factor)
                                                       : r->max;
    }
    cudaFree(j.pes_d);
    cudaFree(j.off_d);
    nvshmem_free(j.dst);
    nvshmem_free(j.src);
    return rc;
}

static int usage(const char *why) {
    fprintf(stderr,
            "nvshmem_bench: %s\nusage: nvshmem_bench a2a|put|bw [-b MIN] [-e MAX] [-f F] [--json FILE]\n",
            why);
    return 2;
}

int main(int argc, char **argv) {
    run r;
    efax_boot_desc bd;
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER, *ids;
    const char *what = argc > 1 ? argv[1] : "";
    int rc, dev = 0, ndev = 0;
    char heap[32];
    memset(&r, 0, sizeof r);
    memset(&bd, 0, sizeof bd);
    r.min = 1 << 20;
    r.max = 256 << 20;
    r.factor = 4;
    if (strcmp(what, "a2a") && strcmp(what, "put") && strcmp(what, "bw")) return usage("name a2a, put or bw");
    for (int i = 2; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage("an option without its value");
        if (!strcmp(argv[i], "-b") && !parse_size(v, &r.min))
            i++;
        else if (!strcmp(argv[i], "-e") && !parse_size(v, &r.max))
            i++;
        else if (!strcmp(argv[i], "-f") && (r.factor = atof(v)) > 1)
            i++;
        else if (!strcmp(argv[i], "--json") && (r.json = fopen(v, "a")))
            i++;
        else
            return usage("a bad option or value");
    }
    if (r.min < 16 || r.min > r.max) return usage("-b must be 16 bytes or more, and at most -e");
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    bd.timeout_ms = 120000;
    if ((rc = efax_boot_init(&r.boot, &bd))) return 1;
    r.me = r.boot.rank;
    r.n = r.boot.size;
    if (r.boot.local_size != r.n || r.n > ndev || r.n < 2) {
        if (r.me == 0)
            fprintf(stderr,
                    "nvshmem_bench: needs 2 or more PEs on this host, one per GPU (%d PEs, %d GPUs)\n", r.n,
                    ndev);
        efax_boot_deinit(&r.boot);
        return 2;
    }
    if (!strcmp(what, "put") && r.n != 2) {
        if (r.me == 0) fprintf(stderr, "nvshmem_bench: put runs PE 0 -> PE 1: start 2 PEs\n");
        efax_boot_deinit(&r.boot);
        return 2;
    }
    dev = r.boot.local_rank;
    if (CK(cudaSetDevice(dev)) || CK(cudaDeviceGetAttribute(&r.sms, cudaDevAttrMultiProcessorCount, dev)))
        return 1;
    /* the symmetric heap: the largest experiment's buffers (bw: a region per PE), and a GiB for NVSHMEM */
    snprintf(heap, sizeof heap, "%llu",
             (unsigned long long)(r.max * (uint64_t)(r.n + 1) + 2 * (BUDGET > r.max ? BUDGET : r.max) +
                                  (1ull << 30)));
    setenv("NVSHMEM_SYMMETRIC_SIZE", heap, 0);
    if (r.me == 0 && nvshmemx_get_uniqueid(&id)) {
        fprintf(stderr, "nvshmem_bench: nvshmemx_get_uniqueid failed\n");
        return 1;
    }
    if (!(ids = (nvshmemx_uniqueid_t *)calloc((size_t)r.n, sizeof *ids)) ||
        efax_boot_allgather(&r.boot, &id, sizeof id, ids, -1))
        return 1;
    nvshmemx_set_attr_uniqueid_args(r.me, r.n, &ids[0], &attr);
    if (nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr)) {
        fprintf(stderr, "nvshmem_bench: nvshmemx_init_attr failed\n");
        return 1;
    }
    free(ids);
    snprintf(r.nv, sizeof r.nv, "%d.%d.%d", NVSHMEM_VENDOR_MAJOR_VERSION, NVSHMEM_VENDOR_MINOR_VERSION,
             NVSHMEM_VENDOR_PATCH_VERSION);
    if (nvshmem_my_pe() != r.me || nvshmem_n_pes() != r.n) {
        fprintf(stderr, "nvshmem_bench: NVSHMEM made this PE %d of %d, efax's rank %d of %d\n",
                nvshmem_my_pe(), nvshmem_n_pes(), r.me, r.n);
        return 1;
    }
    if (CK(cudaStreamCreateWithFlags(&r.s, cudaStreamNonBlocking)) || CK(cudaMalloc((void **)&r.bad_d, 8)))
        return 1;
    if (r.me == 0)
        printf("# nvshmem_bench %s: NVSHMEM %s, %d PEs (one per GPU), %d SMs x %d threads a put grid; GB/s = "
               "1e9 B/s\n",
               what, r.nv, r.n, r.sms, BLOCK);
    rc = !strcmp(what, "a2a") ? exp_a2a(&r) : !strcmp(what, "put") ? exp_put(&r) : exp_bw(&r);
    if (r.me == 0)
        printf("%s\n", rc        ? "nvshmem_bench: FAILED"
                       : r.wrong ? "WRONG BYTES"
                                 : "every byte checked: 0 wrong");
    cudaFree(r.bad_d);
    cudaStreamDestroy(r.s);
    nvshmem_finalize();
    if (r.json) fclose(r.json);
    efax_boot_deinit(&r.boot);
    return rc || r.wrong ? 1 : 0;
}
