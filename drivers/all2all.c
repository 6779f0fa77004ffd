/* all2all — every rank writes one chunk to every other rank at once and waits until every
   peer's chunk has landed (counted chunk by chunk through immediate data). The size column is
   each rank's send buffer, cut into one chunk per rank, as in nccl-tests' alltoall_perf;
   algbw = size / time and busbw = algbw * (n-1)/n, so the numbers compare with nccl-tests.
   Time, as nccl-tests takes it: a rank's whole loop of iterations run back to back, divided
   by the iterations — a rank may start its next iteration while a slower one finishes, and
   that overlap is the sustained rate. nccl-tests averages the ranks' loops; we report the
   slowest rank's. The latency columns are per iteration, the slowest rank's each time. With -c
   the checks separate the iterations (a rank may start its next one before a peer has finished
   checking, so its own loop undercounts): bandwidth then comes from those per-iteration times.
   Modes: Single (NIC 0), Split (each chunk striped over all NICs), RoundRobin (chunk to peer p
   on NIC (p + rank + iteration) mod NICs), Stripe.

   cc -O2 -I. drivers/all2all.c -o all2all $(pkg-config --cflags --libs libfabric pmix)
   nvcc -O2 -x cu -I. drivers/all2all.c -o all2all_cuda $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix
   mpirun -np 4 ./all2all -b 64K -e 256M --mode single,split,roundrobin -c
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#ifdef __CUDACC__
#include "efax_cuda.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* iterations alternate between two data tags: a fast rank's next iteration never mixes with
   the one a slower rank is still counting */
enum { TAG_READY = 1, TAG_DATA = 2 };
#define TAG_ITER(b, seq) (TAG_DATA + 2 * (b)->k + (int)((seq) & 1)) /* and each memory kind its own pair */

typedef struct bench {
    efax_opts o;
    efax_boot boot;
    efax_ctx ctx;
    efax_report rep;
    const efax_mem_ops *kinds[3];
    int nk, k;                 /* memory kinds, and the one being measured */
    efax_buf srcs[3], dsts[3];
    efax_buf *src, *dst;       /* the current kind's */
    efax_xfer *xs;
    efax_expect *ex;
    double *lat, *all;
    int me, n;
} bench;

/* One iteration on this rank: write every peer its chunk, copy our own, count every peer's. */
static int iteration(bench *b, efax_mode mode, uint64_t chunk, uint64_t seq) {
    int rc = 0, tag = TAG_ITER(b, seq);
    for (int k = 1; k < b->n && !rc; k++) { /* start with the next rank: spreads the load */
        int p = (b->me + k) % b->n;
        rc = efax_write(&b->ctx, &b->xs[p], p, mode, (uint64_t)p + (uint64_t)b->me + seq, &b->src->mr, (uint64_t)p * chunk,
                        &b->dst->mr, (uint64_t)b->me * chunk, chunk, efax_opts_chunk(&b->o, &b->ctx, b->dst), tag, (uint32_t)seq, NULL);
    }
    if (!rc) efax_buf_copy(b->dst, (uint64_t)b->me * chunk, b->src, (uint64_t)b->me * chunk, chunk);
    for (int p = 0; p < b->n && !rc; p++) /* what each peer writes to us: counted, or staged cells copied in */
        if (p != b->me)
            rc = efax_expect_write(&b->ctx, &b->ex[p], &b->dst->mr, (uint64_t)p * chunk, chunk, p, efax_ctx_peer_nnics(&b->ctx, p),
                                   mode, (uint64_t)p + (uint64_t)b->me + seq, efax_opts_chunk(&b->o, &b->ctx, b->dst), tag, (uint32_t)seq);
    for (int k = 1; k < b->n && !rc; k++) rc = efax_expect_wait(&b->ctx, &b->ex[(b->me + b->n - k) % b->n], -1);
    for (int p = 0; p < b->n && !rc; p++)
        if (p != b->me) rc = efax_wait(&b->ctx, &b->xs[p], -1);
    if (!rc) rc = efax_buf_settle(b->dst); /* our own chunk's copy (it overlapped the transfers) */
    return rc;
}

/* One (size, mode) step on every rank; the per-iteration times of all ranks end in b->all. */
static int step(bench *b, efax_mode mode, uint64_t size, int iters, int warm, int64_t *wrong) {
    uint64_t chunk = size / (uint64_t)b->n;
    int rc = efax_boot_barrier(&b->boot, EFAX_TURN_MS);
    for (int it = -warm; it < iters && !rc; it++) {
        uint64_t seq = (uint64_t)(it + warm), t0;
        if (b->o.check) { /* fresh bytes per destination; wait until every peer cleared its buffer */
            for (int p = 0; p < b->n; p++) b->src->ops->fill(b->src, (uint64_t)p * chunk, chunk, b->me, seq * 4096 + (uint64_t)p);
            for (int p = 0; p < b->n && seq > 0 && !rc; p++)
                if (p != b->me) rc = efax_wait_imm(&b->ctx, p, TAG_READY, (uint32_t)seq - 1, 1, -1);
        }
        t0 = efax_now_ns();
        if (!rc) rc = iteration(b, mode, chunk, seq);
        if (it >= 0) b->lat[it] = (double)(efax_now_ns() - t0) / 1e3;
        if (!rc && b->o.check) {
            for (int q = 0; q < b->n; q++) *wrong += (int64_t)b->dst->ops->check(b->dst, (uint64_t)q * chunk, chunk, q, seq * 4096 + (uint64_t)b->me);
            b->dst->ops->poison(b->dst, 0, chunk * (uint64_t)b->n);
            for (int p = 0; p < b->n && !rc; p++)
                if (p != b->me) rc = efax_notify(&b->ctx, p, TAG_READY, (uint32_t)seq);
        }
    }
    for (int p = 0; p < b->n && b->o.check && !rc; p++) /* the last "cleared" notices belong to this step */
        if (p != b->me) rc = efax_wait_imm(&b->ctx, p, TAG_READY, (uint32_t)(iters + warm - 1), 1, -1);
    if (!rc) rc = efax_boot_allgather(&b->boot, b->lat, sizeof(double) * (size_t)iters, b->all, EFAX_TURN_MS);
    return rc;
}

int main(int argc, char **argv) {
    bench b;
    efax_ctx_desc cd;
    efax_boot_desc bd;
    char err[256], names[64];
    int rc;

    /* 1. options */
    memset(&b, 0, sizeof b);
    efax_opts_init(&b.o);
    b.o.min_size = 64 << 10;
    b.o.max_size = 256 << 20;
#ifdef __CUDACC__
    b.o.mem = "all"; /* host, pinned and device memory */
#endif
    rc = efax_opts_parse(&b.o, argc, argv, NULL, "all2all",
                         "All-to-all: every rank writes a chunk to every other rank at once (nccl-tests sizes and busbw).", err, sizeof err);
    if (rc == 1) return 0;
    if (rc) { fprintf(stderr, "all2all: %s\n", err); return 2; }
#ifdef __CUDACC__
    rc = efax_cuda_mem_select(b.o.mem, b.kinds, 3, &b.nk, err, sizeof err);
#else
    rc = efax_mem_select(b.o.mem, b.kinds, 3, &b.nk, err, sizeof err);
#endif
    if (rc < 0) { fprintf(stderr, "all2all: %s\n", err); return 2; }
    if (!b.nk) { printf("# %s\n", err); return 0; }

    /* 2. launcher, NICs, connections to every peer */
    memset(&bd, 0, sizeof bd);
    bd.timeout_ms = b.o.timeout_ms;
    if ((rc = efax_boot_init(&b.boot, &bd))) return efax_exit_code(rc);
    b.me = b.boot.rank;
    b.n = b.boot.size;
    if (b.n < 2) { fprintf(stderr, "all2all: needs at least 2 ranks (e.g. mpirun -np 4 %s)\n", argv[0]); efax_boot_deinit(&b.boot); return 2; }
    if (err[0] && b.me == 0) printf("# %s\n", err); /* kinds this machine cannot run */
    if (b.o.min_size < (uint64_t)b.n) { fprintf(stderr, "all2all: -b %llu: the send buffer must hold at least one byte per rank (%d)\n", (unsigned long long)b.o.min_size, b.n); efax_boot_deinit(&b.boot); return 2; }
    memset(&cd, 0, sizeof cd);
    cd.provider = b.o.provider;
    cd.nics = b.o.nics;
    cd.local_rank = b.boot.local_rank;
    cd.timeout_ms = b.o.timeout_ms;
    cd.efa_shm = b.o.efa_shm, cd.no_cuda_api = b.o.no_cuda_api;
    cd.imm_tags = TAG_DATA + 2 * b.nk > 64 ? TAG_DATA + 2 * b.nk : 64;
#ifdef __CUDACC__
    if ((rc = efax_cuda_use(b.kinds, b.nk, b.boot.local_rank, &cd.hmem))) goto out; /* this rank's GPU */
    efax_cuda_near(&cd); /* device memory: the NICs nearest this GPU */
#endif
    if ((rc = efax_ctx_init(&b.ctx, &cd)) || (rc = efax_ctx_connect(&b.ctx, &b.boot)) || (rc = efax_ctx_warmup(&b.ctx))) goto out;

    /* 3. a send and a receive buffer of the largest size; the receive buffer's keys to everyone */
    for (b.k = 0; b.k < b.nk; b.k++) {
        if ((rc = efax_buf_alloc(&b.ctx, &b.srcs[b.k], b.kinds[b.k], b.o.max_size, EFAX_MR_WRITE_SRC)) ||
            (rc = efax_buf_alloc(&b.ctx, &b.dsts[b.k], b.kinds[b.k], b.o.max_size, EFAX_MR_WRITE_DST)) ||
            (rc = efax_mr_exchange(&b.dsts[b.k].mr, &b.boot)) || (rc = efax_expect_prepare(&b.ctx, &b.dsts[b.k].mr, TAG_ITER(&b, 0))) ||
            (rc = efax_expect_prepare(&b.ctx, &b.dsts[b.k].mr, TAG_ITER(&b, 1))))
            goto out;
        b.dsts[b.k].ops->poison(&b.dsts[b.k], 0, b.o.max_size);
    }
    b.xs = (efax_xfer *)calloc((size_t)b.n, sizeof *b.xs);
    b.ex = (efax_expect *)calloc((size_t)b.n, sizeof *b.ex);
    b.lat = (double *)calloc((size_t)efax_opts_iters(&b.o, b.o.min_size), sizeof(double));
    b.all = (double *)calloc((size_t)efax_opts_iters(&b.o, b.o.min_size) * (size_t)b.n, sizeof(double));
    if (!b.xs || !b.ex || !b.lat || !b.all) { rc = -FI_ENOMEM; goto out; }
    if ((rc = efax_report_init(&b.rep, &b.o, "all2all", efax_mem_names(b.kinds, b.nk, names, sizeof names), &b.ctx, &b.boot))) goto out;
#ifdef __CUDACC__
    if (efax_cuda_wants_hmem(b.kinds, b.nk) && (rc = efax_cuda_ceiling(&b.rep, &b.boot, 256u << 20))) goto out;
#endif

    /* 4. the sweep: every size, every mode; an iteration takes as long as its slowest rank */
    for (uint64_t size = b.o.min_size; size && !rc; size = efax_opts_next_size(&b.o, size)) {
        uint64_t s = size / (uint64_t)b.n * (uint64_t)b.n; /* whole chunks */
        for (int mode = 0; mode < EFAX_MODE_COUNT && !rc; mode++)
        for (b.k = 0; b.k < b.nk && (b.o.modes & (1u << mode)) && !rc; b.k++) {
            int iters = efax_opts_iters(&b.o, s), warm = efax_opts_warmup(&b.o, s);
            int64_t wrong = 0, total = 0;
            char label[40];
            efax_result res;
            b.src = &b.srcs[b.k], b.dst = &b.dsts[b.k];
            efax_ctx_stats_reset(&b.ctx);
            efax_report_progress(&b.rep, "%s %llu bytes", efax_mode_label((efax_mode)mode), (unsigned long long)s);
            rc = step(&b, (efax_mode)mode, s, iters, warm, &wrong);
            if (!rc) rc = efax_boot_sum(&b.boot, wrong, &total, EFAX_TURN_MS);
            if (rc || b.me != 0) continue;
            double loop_us = 0; /* the slowest rank's whole loop; b.lat: the slowest rank's time per iteration */
            for (int r = 0; r < b.n; r++) {
                const double *mine = b.all + (size_t)r * (size_t)iters;
                double sum = 0;
                for (int it = 0; it < iters; it++) {
                    sum += mine[it];
                    if (mine[it] > b.lat[it]) b.lat[it] = mine[it];
                }
                if (sum > loop_us) loop_us = sum;
            }
            snprintf(label, sizeof label, "%s%s", efax_mode_label((efax_mode)mode), b.kinds[b.k]->label);
            efax_result_init(&res, label, b.kinds[b.k]->name, b.src->path, "alltoall", s, 1, b.n - 1);
            efax_result_time(&res, b.lat, iters, s, efax_line_rate(&b.ctx, &b.o, mode == EFAX_MODE_SINGLE ? 1 : efax_ctx_nnics(&b.ctx)));
            if (!b.o.check) { /* bandwidth from the loop, as nccl-tests (which averages ranks; we take the slowest) */
                res.seconds = loop_us * 1e-6;
                res.gbps = res.seconds > 0 ? (double)res.bytes * 8 / res.seconds / 1e9 : 0;
            }
            res.algbw_gbs = res.gbps / 8;
            res.busbw_gbs = res.algbw_gbs * (double)(b.n - 1) / (double)b.n;
            res.wrong = b.o.check ? total : -1;
            efax_result_nics(&res, &b.ctx);
            efax_report_add(&b.rep, &res);
        }
        efax_report_row(&b.rep);
    }
    if (!rc) rc = efax_report_status(&b.rep);
    efax_report_deinit(&b.rep);
out:
    for (int k = 0; k < 3; k++) efax_buf_free(&b.srcs[k]), efax_buf_free(&b.dsts[k]);
    efax_ctx_deinit(&b.ctx);
    efax_boot_deinit(&b.boot);
    free(b.xs), free(b.ex), free(b.lat), free(b.all);
    return efax_exit_code(rc);
}
