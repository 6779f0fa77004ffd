/* ipc — the "ipc" experiment: GPU-to-GPU writes over NVLink through CUDA IPC. Every rank (one
   per GPU of this host) exports its buffer; rank 0 writes into each peer in turn (--pairs all:
   every GPU writes every other at once) with efax_cuda.h's copy kernel, sweeping the grid and
   block size and the message size. Each configuration is timed with CUDA events and verified on
   the target by a kernel. Next to it, in the same run: cudaMemcpyPeerAsync (the copy engine's
   ceiling), what the SMs' stores alone move (a kernel that writes the pattern into the peer and
   loads nothing: no copy kernel can beat it), the NVLink theoretical rate (NVML: links x
   per-link rate), and a persistent kernel that takes jobs from mapped memory (no launch per
   copy). --dir pull turns the copy around: the target's GPU reads the source's buffer.

   nvcc -O2 -arch=sm_90 -I. drivers/ipc.cu -o ipc $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix -ldl
   mpirun -np 2 ./ipc
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench {
    efax_opts o;
    efax_boot boot;
    efax_report rep;
    efax_ipc ipc, ipc_src;     /* the targets' buffers; the sources' (read by --dir pull) */
    efax_buf src, dst;         /* device memory (no NIC: registered nowhere); dst has a region per writer */
    cudaStream_t s[64];
    efax_opts ro;              /* the report's options: its table is this driver's own */
    cudaEvent_t e0, e1;
    int me, n, device, sms;
    double nvlink_gbs;
    const char *pairs;
    const char *dir;           /* push | pull */
    int unroll;                /* loads in flight per thread: 4 or 8 */
    const char *layout;        /* stride | block */
    uint64_t tag;              /* a fresh pattern per configuration */
} bench;

/* One timed configuration, every rank calls it. One target: rank 0's buffer is copied into
   rank k's, iters times. All pairs: every rank's into every other rank's at once (its own
   region of each target's buffer, one stream per peer). Push: the source's GPU runs the copy and
   writes into the peer's memory; pull: the target's GPU reads the peer's memory. grid x block
   threads per copy; grid 0: cudaMemcpyAsync (the copy engine); grid < 0: the persistent kernel of
   -grid blocks (one target only); FILL: no copy, the source's GPU stores the pattern straight
   into the target (push only: what stores alone can move). *gbs gets the GB/s of one pair (the
   slowest mover's), *wrong the targets' wrong bytes. */
enum { FILL = 1 << 30 };
static int config(bench *b, int k, int grid, int block, uint64_t size, int iters, double *gbs, int64_t *wrong) {
    bool all = !strcmp(b->pairs, "all"), pull = !strcmp(b->dir, "pull"), fill = grid == FILL;
    bool writer = all || b->me == 0, target = all || b->me == k, mover = pull ? target : writer;
    int rc = 0, nt = all ? b->n - 1 : 1;
    efax_copy_engine eng;
    float ms = 0;
    double mine = 0;
    int64_t bad = 0;
    memset(&eng, 0, sizeof eng);
    b->tag++;
    if (writer) b->src.ops->fill(&b->src, 0, size, b->me, b->tag);
    if (target) b->dst.ops->poison(&b->dst, 0, size * (uint64_t)(all ? b->n : 1));
    if ((rc = efax_boot_barrier(&b->boot, EFAX_TURN_MS))) return rc;
    if (mover) {
        if (grid < 0 && (rc = efax_copy_engine_start(&eng, -grid, block, b->unroll))) return rc;
        for (int it = -2; it < iters && !rc; it++) { /* two untimed copies first */
            if (it == 0) {
                EFAX_CUDA(cudaEventRecord(b->e0, b->s[0]));
                for (int t = 1; t < nt; t++) EFAX_CUDA(cudaStreamWaitEvent(b->s[t], b->e0, 0));
            }
            for (int t = 0; t < nt && !rc; t++) {
                int peer = all ? (b->me + 1 + t) % b->n : pull ? 0 : k; /* the target (push) or the source (pull) */
                uint8_t *dst = pull ? (uint8_t *)b->dst.ptr + (all ? (uint64_t)peer * size : 0)
                                    : (uint8_t *)b->ipc.peer[peer] + (all ? (uint64_t)b->me * size : 0);
                const uint8_t *src = pull ? (const uint8_t *)b->ipc_src.peer[peer] : (const uint8_t *)b->src.ptr;
                if (fill) rc = EFAX_CUDA(efax_ipc_fill(dst, size, b->me, b->tag, 2 * b->sms, 1024, b->s[t]));
                else if (grid > 0) rc = EFAX_CUDA(efax_ipc_copy(dst, src, size, grid, block, b->unroll, !strcmp(b->layout, "block") ? EFAX_COPY_BLOCKED : !strcmp(b->layout, "tma") ? EFAX_COPY_TMA : 0, b->s[t]));
                else if (grid == 0) rc = EFAX_CUDA(cudaMemcpyAsync(dst, src, size, cudaMemcpyDeviceToDevice, b->s[t]));
                else {
                    uint64_t t0 = efax_now_ns();
                    rc = efax_copy_engine_run(&eng, dst, src, size, 60000);
                    if (it >= 0) mine += (double)(efax_now_ns() - t0) / 1e6;
                }
            }
        }
        if (!rc && grid >= 0) {
            for (int t = 1; t < nt && !rc; t++) { /* join the streams */
                rc = EFAX_CUDA(cudaEventRecord(b->e1, b->s[t]));
                if (!rc) rc = EFAX_CUDA(cudaStreamWaitEvent(b->s[0], b->e1, 0));
            }
            if (!rc) rc = EFAX_CUDA(cudaEventRecord(b->e1, b->s[0]));
            if (!rc) rc = EFAX_CUDA(cudaEventSynchronize(b->e1));
            if (!rc) rc = EFAX_CUDA(cudaEventElapsedTime(&ms, b->e0, b->e1));
            mine = ms;
        }
        if (grid < 0) efax_copy_engine_stop(&eng);
        mine = (double)size * iters / (mine * 1e-3) / 1e9; /* GB/s of each pair */
    }
    if (!rc) rc = efax_boot_barrier(&b->boot, EFAX_TURN_MS); /* the writes are done: check them */
    for (int w = 0; !rc && target && w < b->n; w++)
        if (all ? w != b->me : w == 0) bad += (int64_t)b->dst.ops->check(&b->dst, all ? (uint64_t)w * size : 0, size, w, b->tag);
    if (!rc) rc = efax_boot_sum(&b->boot, bad, wrong, EFAX_TURN_MS);
    if (!rc) { /* the slowest writer */
        double *all_gbs = (double *)calloc((size_t)b->n, sizeof(double));
        rc = all_gbs ? efax_boot_allgather(&b->boot, &mine, sizeof mine, all_gbs, EFAX_TURN_MS) : -FI_ENOMEM;
        *gbs = 0;
        for (int r = 0; !rc && r < b->n; r++)
            if ((all || r == (pull ? k : 0)) && (*gbs == 0 || all_gbs[r] < *gbs)) *gbs = all_gbs[r];
        free(all_gbs);
    }
    return rc;
}

/* One record of the report: `gbs` for a copy of `size` bytes, as if one iteration took size/gbs. */
static void record(bench *b, const char *label, uint64_t size, double gbs, int iters, int64_t wrong) {
    efax_result res;
    double lat = (double)size / (gbs * 1e3);
    efax_result_init(&res, label, "device", "nvlink", "ipc", size, 1, b->pairs[0] == 'a' ? b->n : 1);
    efax_result_time(&res, &lat, 1, size, b->nvlink_gbs * 8);
    res.iters = iters, res.wrong = wrong;
    efax_report_add(&b->rep, &res);
}

int main(int argc, char **argv) {
    bench b;
    efax_boot_desc bd;
    efax_gpu_info gi;
    char err[256];
    int rc = 0, grids[16], ng = 0, blocks[] = {256, 512, 1024};
    int64_t wrong_total = 0;
    efax_optdef extra[] = {
        {"pairs", 0, EFAX_OPT_CHOICE, &b.pairs, 0, 0, "one|all", "WHICH", "one: rank 0 -> each peer in turn (default); all: every GPU -> every other at once"},
        {"dir", 0, EFAX_OPT_CHOICE, &b.dir, 0, 0, "push|pull", "HOW", "push: the source's GPU writes into the target (default); pull: the target's GPU reads the source"},
        {"unroll", 0, EFAX_OPT_INT, &b.unroll, 4, 8, NULL, "N", "16-byte loads in flight per thread: 4 or 8 (default 8)"},
        {"layout", 0, EFAX_OPT_CHOICE, &b.layout, 0, 0, "stride|block|tma", "HOW", "stride: grid-stride (default); block: a contiguous slice per block; tma: bulk copies (sm_90)"},
        {NULL, 0, (efax_opt_type)0, NULL, 0, 0, NULL, NULL, NULL}};

    /* 1. options: sizes 256K .. 1G by 4 */
    memset(&b, 0, sizeof b);
    b.pairs = "one";
    b.dir = "push";
    b.unroll = 8;
    b.layout = "stride";
    efax_opts_init(&b.o);
    b.o.min_size = 256 << 10;
    b.o.max_size = 1ull << 30;
    b.o.factor = 4;
    rc = efax_opts_parse(&b.o, argc, argv, extra, "ipc", "NVLink IPC writes between the GPUs of this host: grid x block sweep.", err, sizeof err);
    if (rc == 1) return 0;
    if (rc) { fprintf(stderr, "ipc: %s\n", err); return 2; }
    if (b.unroll != 4 && b.unroll != 8) { fprintf(stderr, "ipc: --unroll %d: expected 4 or 8\n", b.unroll); return 2; }
    if (!efax_cuda_devices(err, sizeof err)) { printf("ipc: skipped: no CUDA device (%s)\n", err); return 0; }

    /* 2. launcher, a GPU per rank, buffers, IPC handles among the ranks of this host */
    memset(&bd, 0, sizeof bd);
    if ((rc = efax_boot_init(&b.boot, &bd))) return efax_exit_code(rc);
    b.me = b.boot.rank, b.n = b.boot.size;
    if (b.n < 2 || b.n > 64 || b.boot.local_size != b.n) {
        fprintf(stderr, "ipc: needs 2 or more ranks, all on this host, one per GPU (mpirun -np <GPUs> %s)\n", argv[0]);
        efax_boot_deinit(&b.boot);
        return 2;
    }
    if ((rc = efax_cuda_bind(b.boot.local_rank, &b.device)) || (rc = efax_cuda_gpu_info(b.device, NULL, 0, &gi))) goto out;
    b.sms = gi.sms;
    b.nvlink_gbs = gi.nvlink_gbs;
    if ((rc = efax_buf_alloc(NULL, &b.src, efax_mem_device(), b.o.max_size, 0)) ||
        (rc = efax_buf_alloc(NULL, &b.dst, efax_mem_device(), b.o.max_size * (uint64_t)(!strcmp(b.pairs, "all") ? b.n : 1), 0)) ||
        (rc = efax_ipc_open(&b.ipc, &b.boot, b.dst.ptr, b.dst.len)) || (rc = efax_ipc_open(&b.ipc_src, &b.boot, b.src.ptr, b.src.len)) || (rc = EFAX_CUDA(cudaEventCreate(&b.e0))) ||
        (rc = EFAX_CUDA(cudaEventCreate(&b.e1))))
        goto out;
    for (int t = 0; t < b.n && t < 64 && !rc; t++) rc = EFAX_CUDA(cudaStreamCreateWithFlags(&b.s[t], cudaStreamNonBlocking));
    b.ro = b.o;
    b.ro.quiet = true;
    if (rc || (rc = efax_report_init(&b.rep, &b.ro, "ipc", "device", NULL, &b.boot))) goto out;
    /* grids: 1, 2, 4, ... up to the SM count, the SM count, twice it */
    for (int g = 1; g < b.sms && ng < 12; g *= 2) grids[ng++] = g;
    grids[ng++] = b.sms, grids[ng++] = 2 * b.sms;
    if (b.me == 0)
        printf("# %s: %d SMs, NVLink %d x v%d = %.0f GB/s one way (theoretical); pairs %s; %s; unroll %d, layout %s; GB/s of one copy, every copy verified\n",
               gi.name, b.sms, gi.nvlinks, gi.nvlink_version, gi.nvlink_gbs, b.pairs, b.dir, b.unroll, b.layout);

    /* 3. for every peer (or every pair at once) and size: the memcpy ceiling, the grid x block
          sweep, and the persistent kernel at the SM count */
    for (int k = 1; k < b.n && !rc; k = !strcmp(b.pairs, "all") ? b.n : k + 1) {
        for (uint64_t size = b.o.min_size; size && !rc; size = efax_opts_next_size(&b.o, size)) {
            int iters = size >= (64u << 20) ? 10 : 50;
            double ceiling = 0, stores = 0, best = 0, gbs;
            int64_t wrong;
            char sz[32], label[40];
            if ((rc = config(&b, k, 0, 0, size, iters, &ceiling, &wrong))) break;
            wrong_total += wrong;
            int64_t wrong_stores = 0; /* push: what the SMs' stores alone move (no loads) */
            if (!strcmp(b.dir, "push") && (rc = config(&b, k, FILL, 1024, size, iters, &stores, &wrong_stores))) break;
            wrong_total += wrong_stores;
            if (b.me == 0) {
                char st[96] = "";
                if (b.pairs[0] == 'a') snprintf(label, sizeof label, "every rank -> every other rank at once");
                else snprintf(label, sizeof label, "rank 0 -> rank %d", k);
                if (stores > 0) snprintf(st, sizeof st, "; SM stores alone (no loads, %d x 1024) %.1f GB/s%s", 2 * b.sms, stores, wrong_stores ? " WRONG BYTES" : "");
                printf("\n%s, %s: cudaMemcpyPeerAsync %.1f GB/s per pair (%.1f%% of NVLink)%s%s\n", label, efax_fmt_size(size, sz, sizeof sz),
                       ceiling, b.nvlink_gbs > 0 ? 100 * ceiling / b.nvlink_gbs : 0, wrong ? "  WRONG BYTES" : "", st);
                printf("%10s", "grid\\block");
                for (unsigned bl = 0; bl < sizeof blocks / sizeof blocks[0]; bl++) printf(" %9d", blocks[bl]);
                printf("   (GB/s; %% of memcpy at the best)\n");
                record(&b, "memcpyPeer", size, ceiling, iters, wrong);
                if (stores > 0) record(&b, "stores", size, stores, iters, wrong_stores);
            }
            for (int g = 0; g < ng && !rc; g++) {
                if (b.me == 0) printf("%10d", grids[g]);
                for (unsigned bl = 0; bl < sizeof blocks / sizeof blocks[0] && !rc; bl++) {
                    if ((rc = config(&b, k, grids[g], blocks[bl], size, iters, &gbs, &wrong))) break;
                    wrong_total += wrong;
                    if (gbs > best) best = gbs;
                    if (b.me != 0) continue;
                    printf(" %9.1f%s", gbs, wrong ? "!" : "");
                    snprintf(label, sizeof label, "g%dxb%d", grids[g], blocks[bl]);
                    record(&b, label, size, gbs, iters, wrong);
                }
                if (b.me == 0) printf("\n");
            }
            /* the persistent kernel at the SM count x 1024: no launch per copy (one target) */
            if (!rc && b.pairs[0] == 'o' && (rc = config(&b, k, -b.sms, 1024, size, iters, &gbs, &wrong)) == 0) {
                wrong_total += wrong;
                if (b.me == 0) {
                    printf("%10s %9.1f GB/s (persistent, %d x 1024, host-timed); best launched %.1f GB/s = %.1f%% of memcpy, %.1f%% of NVLink",
                           "persist", gbs, b.sms, best, 100 * best / ceiling, b.nvlink_gbs > 0 ? 100 * best / b.nvlink_gbs : 0);
                    if (stores > 0) printf(", %.1f%% of SM stores alone", 100 * best / stores);
                    printf("\n");
                    record(&b, "persistent", size, gbs, iters, wrong);
                }
            }
            efax_report_row(&b.rep);
        }
    }
    if (b.me == 0) printf("\n%s\n", wrong_total ? "ipc: WRONG BYTES (see the configurations marked !)" : "ipc: every configuration verified");
    efax_report_deinit(&b.rep);
out:
    efax_ipc_close(&b.ipc);
    efax_ipc_close(&b.ipc_src);
    for (int t = 0; t < 64; t++)
        if (b.s[t]) cudaStreamDestroy(b.s[t]);
    efax_buf_free(&b.src);
    efax_buf_free(&b.dst);
    efax_boot_deinit(&b.boot);
    return rc ? efax_exit_code(rc) : wrong_total ? 1 : 0;
}
