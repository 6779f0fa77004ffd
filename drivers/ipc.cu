/* ipc — the "ipc" experiment: GPU-to-GPU writes over NVLink through CUDA IPC. Every rank (one per GPU of
   this host) exports its buffer; rank 0 writes into each peer in turn (--pairs all: every GPU writes every
   other at once) with efax_cuda.h's copy kernel, sweeping the grid and block size and the message size.
   Each configuration is timed with CUDA events and verified on the target by a kernel. Next to it, in the
   same run: cudaMemcpyPeerAsync (the copy engine's ceiling), what the SMs' stores alone move (a kernel that
   writes the pattern into the peer and loads nothing: no copy kernel can beat it), the NVLink theoretical
   rate (NVML: links x per-link rate), and a persistent kernel that takes jobs from mapped memory (no launch
   per copy). With --pairs all each configuration is also recorded in aggregate (every pair's bytes over
   the slowest pair's time: variant "...-aggregate"); with more than two GPUs, rank 0's copies to rank k
   are recorded as "...-to-k". --dir pull turns the copy around: the target's GPU
   reads the source's buffer. No fabric context: nothing goes through a NIC.

   nvcc -O2 -arch=sm_90 -I. drivers/ipc.cu -o ipc \
       $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix -ldl
   mpirun -np 2 ./ipc
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_cuda.h"
#include "efax_bench.h"

#include <string.h>

static const int blocks[3] = {256, 512, 1024}; /* the block sizes: the table's columns */

typedef struct run {
    efax_bench b;
    efax_ipc ipc, ipc_src;            /* the targets' buffers; the sources' (read by --dir pull) */
    efax_buf *src, *dst;              /* device memory, registered nowhere; dst has a region per writer */
    efax_gpu_info gi;                 /* this rank's GPU */
    int me, n, unroll;                /* unroll: loads in flight per thread, 4 or 8 */
    const char *pairs, *dir, *layout; /* one | all; push | pull; stride | block | tma */
    bool all, pull;
    int64_t tag, wrong; /* a fresh pattern per configuration; wrong bytes over all of them */
    double best;        /* rank 0: the best launched copy of this size */
    double best_agg;    /* rank 0, --pairs all: its aggregate */
} run;

/* The copy kernels' layout flags for --layout. */
static unsigned layout_flags(const run *r) {
    if (!strcmp(r->layout, "block")) return EFAX_COPY_BLOCKED;
    return !strcmp(r->layout, "tma") ? EFAX_COPY_TMA : 0;
}

/* A configuration's name in the results: its grid and block, or what it is. */
static void config_label(char *buf, size_t len, int how, int grid, int block) {
    if (how == EFAX_IPC_KERNEL)
        snprintf(buf, len, "g%dxb%d", grid, block);
    else if (how == EFAX_IPC_MEMCPY)
        snprintf(buf, len, "memcpyPeer");
    else
        snprintf(buf, len, "%s", how == EFAX_IPC_STORES ? "stores" : "persistent");
}

/* Rank 0: records a configuration, as if one iteration took size/gbs (and prints a copy kernel's cell);
   with --pairs all, its aggregate agg (GB/s of every pair's bytes) as a second row. */
static void config_record(run *r, int k, int how, int grid, int block, uint64_t size, int iters, double gbs,
                          double agg, int64_t wrong) {
    double lat = (double)size / (gbs * 1e3), pairs = (double)r->n * (r->n - 1);
    char label[40];
    efax_result res;
    if (how == EFAX_IPC_KERNEL) {
        printf(" %9.1f%s", gbs, wrong ? "!" : "");
        r->best_agg = gbs > r->best ? agg : r->best_agg;
        r->best = gbs > r->best ? gbs : r->best;
    }
    config_label(label, sizeof label, how, grid, block);
    if (!r->all && r->n > 2) snprintf(label + strlen(label), sizeof label - strlen(label), "-to-%d", k);
    efax_result_init(&res, label, "device", "nvlink", EFAX_RESULT_IPC, size, 1, r->all ? r->n : 1);
    efax_result_time(&res, &lat, 1, size, r->gi.nvlink_gbs * 8);
    res.iters = iters;
    res.wrong = wrong;
    efax_report_add(r->b.rep, &res);
    if (!r->all || agg <= 0) return;
    lat = (double)size * pairs / (agg * 1e3); /* every pair's bytes in that time */
    strncat(label, "-aggregate", sizeof label - strlen(label) - 1);
    efax_result_init(&res, label, "device", "nvlink", EFAX_RESULT_IPC, size, 1, (int)pairs);
    efax_result_time(&res, &lat, 1, size * (uint64_t)pairs, r->gi.nvlink_gbs * 8 * r->n);
    res.iters = iters;
    res.wrong = wrong;
    efax_report_add(r->b.rep, &res);
}

/* One configuration (how: EFAX_IPC_*, grid x block), timed by efax_ipc_time; every rank calls it. One
   target: rank 0's buffer into rank k's; all pairs: every rank's into every other rank's at once (its own
   region of each). Push: the source's GPU writes into the peer's memory; pull: the target's GPU reads the
   peer's. *gbs: the GB/s of one pair (the slowest mover's); *wrong: the targets' wrong bytes; *agg (all
   pairs): every pair's bytes over the slowest mover's time, in GB/s. */
static int config(run *r, int k, int how, int grid, int block, uint64_t size, int iters, double *gbs,
                  int64_t *wrong, double *agg) {
    bool writer = r->all || r->me == 0, target = r->all || r->me == k, mover = r->pull ? target : writer;
    int rc, nt = r->all ? r->n - 1 : 1;
    double mine = 0, got[64]; /* mine: this mover's GB/s */
    efax_ipc_run job = {how, grid, block, r->unroll, layout_flags(r), r->me, (uint64_t)++r->tag, iters};
    void *dst[64], *src[64];
    int64_t bad = 0;
    for (int t = 0; t < nt; t++) { /* copy t: into the target (push) or from the source (pull) `peer` */
        int peer = r->all ? (r->me + 1 + t) % r->n : r->pull ? 0 : k;
        uint8_t *here = (uint8_t *)r->dst->ptr + (r->all ? (uint64_t)peer * size : 0);
        uint8_t *there = (uint8_t *)r->ipc.peer[peer] + (r->all ? (uint64_t)r->me * size : 0);
        dst[t] = r->pull ? here : there;
        src[t] = r->pull ? r->ipc_src.peer[peer] : r->src->ptr;
    }
    if (writer) r->src->ops->fill(r->src, 0, size, r->me, r->tag); /* a fresh pattern */
    if (target) r->dst->ops->poison(r->dst, 0, size * (uint64_t)(r->all ? r->n : 1));
    rc = efax_boot_barrier(&r->b.boot, EFAX_TURN_MS);
    if (!rc && mover) rc = efax_ipc_time(&job, nt, dst, src, size, &mine);
    if (!rc) rc = efax_boot_barrier(&r->b.boot, EFAX_TURN_MS); /* the writes are done: check them */
    for (int w = 0; target && w < r->n && !rc; w++)
        if (r->all ? w != r->me : w == 0)
            bad += (int64_t)r->dst->ops->check(r->dst, r->all ? (uint64_t)w * size : 0, size, w, r->tag);
    if (!rc) rc = efax_boot_sum(&r->b.boot, bad, wrong, EFAX_TURN_MS);
    if (!rc) rc = efax_boot_allgather(&r->b.boot, &mine, sizeof mine, got, EFAX_TURN_MS);
    if (rc) return rc;
    *gbs = got[r->pull ? k : 0]; /* the mover's GB/s; with --pairs all, the slowest's */
    for (int q = 0; r->all && q < r->n; q++) *gbs = got[q] < *gbs ? got[q] : *gbs;
    *agg = r->all ? *gbs * r->n * (r->n - 1) : *gbs; /* every copy ran at least that fast */
    r->wrong += *wrong;
    if (r->me == 0) config_record(r, k, how, grid, block, size, iters, *gbs, *agg, *wrong);
    return 0;
}

/* Rank 0: the table's heading for peer k (or every pair) at one size, with the memcpy ceiling and what
   the SMs' stores alone move. */
static void table_head(const run *r, int k, uint64_t size, double ceiling, double ceiling_agg, int64_t wrong,
                       double stores, int64_t wrong_stores) {
    char sz[32], who[40] = "every rank -> every other rank at once", st[96] = "";
    double nvl = r->gi.nvlink_gbs;
    if (!r->all) snprintf(who, sizeof who, "rank 0 -> rank %d", k);
    if (stores > 0)
        snprintf(st, sizeof st, "; SM stores alone (no loads, %d x 1024) %.1f GB/s%s", 2 * r->gi.sms, stores,
                 wrong_stores ? " WRONG BYTES" : "");
    printf("\n%s, %s: cudaMemcpyPeerAsync %.1f GB/s per pair (%.1f%% of NVLink)", who,
           efax_fmt_size(size, sz, sizeof sz), ceiling, nvl > 0 ? 100 * ceiling / nvl : 0);
    if (r->all) printf(", %.1f GB/s in aggregate (%d pairs)", ceiling_agg, r->n * (r->n - 1));
    printf("%s%s\n", wrong ? "  WRONG BYTES" : "", st);
    printf("%10s %9d %9d %9d   (GB/s; %% of memcpy at the best)\n", "grid\\block", blocks[0], blocks[1],
           blocks[2]);
}

/* Peer k (or every pair at once) at one size: the memcpy ceiling, what stores alone move (push), the grid
   x block table, and (one target) the persistent kernel at the SM count x 1024. */
static int one_size(run *r, int k, uint64_t size) {
    int iters = size >= (64u << 20) ? 10 : 50, sms = r->gi.sms, rc;
    double ceiling = 0, ceiling_agg = 0, stores = 0, gbs, agg, nvl = r->gi.nvlink_gbs, best;
    int64_t wrong, wrong_stores = 0;
    rc = config(r, k, EFAX_IPC_MEMCPY, 0, 0, size, iters, &ceiling, &wrong, &ceiling_agg);
    if (!rc && !r->pull)
        rc = config(r, k, EFAX_IPC_STORES, 2 * sms, 1024, size, iters, &stores, &wrong_stores, &agg);
    if (rc) return rc;
    if (r->me == 0) table_head(r, k, size, ceiling, ceiling_agg, wrong, stores, wrong_stores);
    for (int g = 1; g <= 2 * sms && !rc;
         g = g < sms ? (2 * g < sms ? 2 * g : sms) : 2 * g) { /* 1, 2, 4 .. 2 SMs */
        if (r->me == 0) printf("%10d", g); /* a row of the table (config prints its cells) */
        for (int bl = 0; bl < 3 && !rc; bl++)
            rc = config(r, k, EFAX_IPC_KERNEL, g, blocks[bl], size, iters, &gbs, &wrong, &agg);
        if (r->me == 0) printf("\n");
    }
    if (!rc && r->all && r->me == 0) {
        printf("%10s best launched %.1f GB/s per pair, %.1f GB/s in aggregate (%.1f%% of memcpy's)\n", "all",
               r->best, r->best_agg, ceiling_agg > 0 ? 100 * r->best_agg / ceiling_agg : 0);
        r->best = r->best_agg = 0;
    }
    if (rc || r->all) return rc;
    rc = config(r, k, EFAX_IPC_PERSIST, sms, 1024, size, iters, &gbs, &wrong, &agg);
    if (rc || r->me != 0) return rc;
    best = r->best;
    r->best = 0;
    printf("%10s %9.1f GB/s (persistent, %d x 1024, host-timed); best launched %.1f GB/s = %.1f%% of memcpy, "
           "%.1f%% of NVLink",
           "persist", gbs, sms, best, 100 * best / ceiling, nvl > 0 ? 100 * best / nvl : 0);
    if (stores > 0) printf(", %.1f%% of SM stores alone", 100 * best / stores);
    printf("\n");
    return 0;
}

/* This rank's GPU, the buffers (dst: a region per writer with --pairs all), every rank's IPC handles of
   them; the report (ipc prints its own table). */
static int setup(run *r) {
    efax_bench *b = &r->b;
    size_t len = (size_t)b->o.max_size;
    int rc, dev;
    r->me = b->rank;
    r->n = b->size;
    r->all = !strcmp(r->pairs, "all");
    r->pull = !strcmp(r->dir, "pull");
    rc = efax_cuda_bind(b->boot.local_rank, &dev);
    if (!rc) rc = efax_cuda_gpu_info(dev, NULL, 0, &r->gi);
    if (!rc) rc = efax_bench_buf(b, efax_mem_device(), len, 0, &r->src);
    if (!rc) rc = efax_bench_buf(b, efax_mem_device(), len * (size_t)(r->all ? r->n : 1), 0, &r->dst);
    if (!rc) rc = efax_ipc_open(&r->ipc, &b->boot, r->dst->ptr, r->dst->len);
    if (!rc) rc = efax_ipc_open(&r->ipc_src, &b->boot, r->src->ptr, r->src->len);
    if (!rc) rc = efax_bench_begin(b, "device");
    if (rc || r->me != 0) return rc;
    printf("# %s: %d SMs, NVLink %d x v%d = %.0f GB/s one way (theoretical); pairs %s; %s; unroll %d, layout "
           "%s; GB/s of one copy, every copy verified\n",
           r->gi.name, r->gi.sms, r->gi.nvlinks, r->gi.nvlink_version, r->gi.nvlink_gbs, r->pairs, r->dir,
           r->unroll, r->layout);
    return 0;
}

/* The verdict (once the sweep began: the old driver's, even after an error), the handles, then the
   harness's close; wrong bytes in any configuration make the exit status 1, on every rank. */
static int finish(run *r, int rc) {
    if (r->b.begun && r->me == 0)
        printf("\n%s\n", r->wrong ? "ipc: WRONG BYTES (see the configurations marked !)"
                                  : "ipc: every configuration verified");
    efax_ipc_close(&r->ipc);
    efax_ipc_close(&r->ipc_src);
    return efax_bench_close(&r->b, rc ? rc : r->wrong ? -EFAX_E_VERIFY : 0);
}

int main(int argc, char **argv) {
    run r;
    efax_bench_desc d;
    efax_optdef extra[] = {
        {"pairs", 0, EFAX_OPT_CHOICE, &r.pairs, 0, 0, "one|all", "WHICH",
         "one: rank 0 -> each peer in turn (default); all: every GPU -> every other at once"},
        {"dir", 0, EFAX_OPT_CHOICE, &r.dir, 0, 0, "push|pull", "HOW",
         "push: the source's GPU writes into the target (default); pull: the target's GPU reads the source"},
        {"unroll", 0, EFAX_OPT_INT, &r.unroll, 4, 8, NULL, "N",
         "16-byte loads in flight per thread: 4 or 8 (default 8)"},
        {"layout", 0, EFAX_OPT_CHOICE, &r.layout, 0, 0, "stride|block|tma", "HOW",
         "stride: grid-stride (default); block: a contiguous slice per block; tma: bulk copies (sm_90)"},
        EFAX_OPT_END,
    };
    int rc;
    memset(&r, 0, sizeof r);
    memset(&d, 0, sizeof d);
    r.pairs = "one";
    r.dir = "push";
    r.unroll = 8;
    r.layout = "stride";
    d.driver = "ipc";
    d.about = "NVLink IPC writes between the GPUs of this host: grid x block sweep.";
    d.extra = extra;
    d.min_size = 256 << 10;
    d.max_size = 1ull << 30;
    d.factor = 4;
    d.mem = "dma";
    d.gpu = true;
    d.own_table = true;                         /* the report writes --json and --csv only */
    rc = efax_bench_open(&r.b, &d, argc, argv); /* options, the launcher */
    if (!rc && r.unroll != 4 && r.unroll != 8)
        rc = efax_bench_usage(&r.b, "--unroll %d: expected 4 or 8", r.unroll);
    if (!rc && (r.b.size > 64 || r.b.boot.local_size != r.b.size))
        rc = efax_bench_usage(
            &r.b, "needs 2 or more ranks, all on this host, one per GPU (mpirun -np <GPUs> %s)", argv[0]);
    if (!rc) rc = setup(&r); /* buffers, IPC handles, the report */
    for (int k = 1; !rc && k < r.n;
         k = r.all ? r.n : k + 1) /* every peer (or every pair at once), every size */
        for (uint64_t size = r.b.o.min_size; size && !rc; size = efax_opts_next_size(&r.b.o, size))
            rc = one_size(&r, k, size);
    return finish(&r, rc);
}
