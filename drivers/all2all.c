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
#include "efax_bench.h"

#include <string.h>

enum { TAG_READY = 1, TAG_DATA = 2 };

typedef struct run {
    efax_bench b;
    efax_bench_step st, pt;    /* the point of the sweep; pt: its size cut to whole chunks, and its iterations */
    uint64_t chunk;            /* pt.size / ranks */
    efax_buf *srcs[3], *dsts[3], *src, *dst; /* a send and a receive buffer of -e bytes per memory kind; the current one's */
    efax_xfer *xs;
    efax_expect *ex;
    double *lat;               /* this rank's time per iteration (rank 0, once gathered: the slowest rank's) */
} run;

/* Iterations alternate between two data tags (a fast rank's next iteration never mixes with the one a slower
   rank is still counting), and each memory kind has its own pair. */
static int tag_of(int k, uint64_t seq) { return TAG_DATA + 2 * k + (int)(seq & 1); }

/* The chunk `from` writes to `to` in iteration seq, as both sides describe it. */
static const efax_write_desc *msg(const run *r, efax_write_desc *w, int from, int to, uint64_t seq) {
    memset(w, 0, sizeof *w);
    w->from = from, w->to = to, w->size = r->chunk, w->mode = r->pt.mode;
    w->src = &r->src->mr, w->dst = &r->dst->mr, w->src_off = (uint64_t)to * r->chunk, w->dst_off = (uint64_t)from * r->chunk;
    w->index = (uint64_t)from + (uint64_t)to + seq;
    w->chunk = efax_opts_chunk(&r->b.o, &r->b.ctx, r->dst, from, to);
    w->tag = tag_of(r->pt.k, seq), w->seq = (uint32_t)seq;
    return w;
}

/* One iteration on this rank: write every peer its chunk, copy our own, count every peer's. */
static int iteration(run *r, uint64_t seq) {
    int n = r->b.size, me = r->b.rank, rc = 0;
    efax_write_desc w;
    for (int k = 1; k < n && !rc; k++) /* start with the next rank: spreads the load */
        rc = efax_write(&r->b.ctx, &r->xs[(me + k) % n], msg(r, &w, me, (me + k) % n, seq), NULL);
    if (!rc) efax_buf_copy(r->dst, (uint64_t)me * r->chunk, r->src, (uint64_t)me * r->chunk, r->chunk);
    for (int p = 0; p < n && !rc; p++) /* what each peer writes to us: counted, or staged cells copied in */
        if (p != me) rc = efax_expect_write(&r->b.ctx, &r->ex[p], msg(r, &w, p, me, seq));
    for (int k = 1; k < n && !rc; k++) rc = efax_expect_wait(&r->b.ctx, &r->ex[(me + n - k) % n], -1);
    for (int p = 0; p < n && !rc; p++)
        if (p != me) rc = efax_wait(&r->b.ctx, &r->xs[p], -1);
    return rc ? rc : efax_buf_settle(r->dst); /* our own chunk's copy (it overlapped the transfers) */
}

/* The iterations of one point on every rank, each timed into r->lat. */
static int loop(run *r, int64_t *wrong) {
    int n = r->b.size, me = r->b.rank, iters = r->pt.iters, warm = r->pt.warmup, rc = efax_boot_barrier(&r->b.boot, EFAX_TURN_MS);
    uint64_t chunk = r->chunk;
    for (int it = -warm; it < iters && !rc; it++) {
        uint64_t seq = (uint64_t)(it + warm), t0;
        if (r->b.o.check) { /* fresh bytes per destination; wait until every peer cleared its buffer */
            for (int p = 0; p < n; p++) r->src->ops->fill(r->src, (uint64_t)p * chunk, chunk, me, seq * 4096 + (uint64_t)p);
            for (int p = 0; p < n && seq > 0 && !rc; p++)
                if (p != me) rc = efax_wait_imm(&r->b.ctx, p, TAG_READY, (uint32_t)seq - 1, 1, -1);
        }
        t0 = efax_now_ns();
        if (!rc) rc = iteration(r, seq);
        if (it >= 0) r->lat[it] = (double)(efax_now_ns() - t0) / 1e3;
        if (!rc && r->b.o.check) {
            for (int q = 0; q < n; q++) *wrong += (int64_t)r->dst->ops->check(r->dst, (uint64_t)q * chunk, chunk, q, seq * 4096 + (uint64_t)me);
            r->dst->ops->poison(r->dst, 0, chunk * (uint64_t)n);
            for (int p = 0; p < n && !rc; p++)
                if (p != me) rc = efax_notify(&r->b.ctx, p, TAG_READY, (uint32_t)seq);
        }
    }
    for (int p = 0; p < n && r->b.o.check && !rc; p++) /* the last "cleared" notices belong to this point */
        if (p != me) rc = efax_wait_imm(&r->b.ctx, p, TAG_READY, (uint32_t)(iters + warm - 1), 1, -1);
    return rc;
}

/* One (size, mode, memory kind) of the sweep; an iteration takes as long as its slowest rank. */
static int measure(run *r) {
    efax_bench *b = &r->b;
    int n = b->size, iters, rc;
    int64_t wrong = 0;
    double loop_us = 0; /* the slowest rank's whole loop; r->lat: the slowest rank's time per iteration */
    efax_result res;
    r->pt = r->st, r->pt.size = r->st.size / (uint64_t)n * (uint64_t)n, r->chunk = r->pt.size / (uint64_t)n; /* whole chunks */
    r->pt.iters = iters = efax_opts_iters(&b->o, r->pt.size), r->pt.warmup = efax_opts_warmup(&b->o, r->pt.size);
    r->src = r->srcs[r->pt.k], r->dst = r->dsts[r->pt.k];
    efax_report_progress(&b->rep, "%s %llu bytes", efax_mode_label(r->pt.mode), (unsigned long long)r->pt.size);
    if ((rc = loop(r, &wrong)) || (rc = efax_bench_slowest(b, r->lat, iters, &loop_us))) return rc;
    efax_bench_result(&res, &r->pt, r->src, NULL, EFAX_RESULT_ALLTOALL, 1, n - 1);
    efax_result_time(&res, r->lat, iters, r->pt.size, efax_bench_line(b, r->pt.mode));
    if (!b->o.check) { /* bandwidth from the loop, as nccl-tests (which averages ranks; we take the slowest) */
        res.seconds = loop_us * 1e-6;
        res.gbps = res.seconds > 0 ? (double)res.bytes * 8 / res.seconds / 1e9 : 0;
    }
    res.algbw_gbs = res.gbps / 8;
    res.busbw_gbs = res.algbw_gbs * (double)(n - 1) / (double)n;
    return efax_bench_record(b, &res, wrong);
}

/* A send and a receive buffer of every memory kind (the receive buffers' keys to everyone), their tags, and the
   per-peer state. */
static int setup(run *r) {
    efax_bench *b = &r->b;
    size_t iters = (size_t)efax_opts_iters(&b->o, b->o.min_size / (uint64_t)b->size * (uint64_t)b->size);
    int rc = efax_bench_bufs(b, b->o.max_size, EFAX_MR_WRITE_SRC, EFAX_MR_WRITE_DST, r->srcs, r->dsts);
    for (int k = 0; k < b->nk && !rc; k++)
        if (!(rc = efax_expect_prepare(&b->ctx, &r->dsts[k]->mr, tag_of(k, 0)))) rc = efax_expect_prepare(&b->ctx, &r->dsts[k]->mr, tag_of(k, 1));
    r->xs = (efax_xfer *)efax_bench_calloc(b, (size_t)b->size, sizeof *r->xs);
    r->ex = (efax_expect *)efax_bench_calloc(b, (size_t)b->size, sizeof *r->ex);
    r->lat = (double *)efax_bench_calloc(b, iters, sizeof(double));
    return rc ? rc : !r->xs || !r->ex || !r->lat ? -FI_ENOMEM : 0;
}

int main(int argc, char **argv) {
    run r;
    efax_bench_desc d;
    int rc;
    memset(&r, 0, sizeof r), memset(&d, 0, sizeof d);
    d.driver = "all2all", d.min_size = 64 << 10, d.max_size = 256 << 20;
    d.about = "All-to-all: every rank writes a chunk to every other rank at once (nccl-tests sizes and busbw).";
    rc = efax_bench_open(&r.b, &d, argc, argv); /* options, memory kinds, the launcher */
    if (!rc && r.b.o.min_size < (uint64_t)r.b.size)
        rc = efax_bench_usage(&r.b, "-b %llu: the send buffer must hold at least one byte per rank (%d)", (unsigned long long)r.b.o.min_size, r.b.size);
    if (!rc) rc = efax_bench_connect(&r.b, TAG_DATA + 2 * r.b.nk); /* NICs, connections to every peer */
    if (!rc) rc = setup(&r);
    if (!rc) rc = efax_bench_begin(&r.b, NULL); /* the report's header (and the GPU ceiling) */
    while (!rc && efax_bench_next(&r.b, &r.st, &rc)) rc = measure(&r);
    return efax_bench_close(&r.b, rc);
}
