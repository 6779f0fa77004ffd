/* write — one-sided RDMA WRITE with immediate data, rank 0 -> rank k. Each message is planned
   over the NICs by a mode (Single, Split, RoundRobin, Stripe); every chunk carries immediate
   data and the target counts the chunks, so it knows the whole message landed without relying
   on write ordering, then confirms to the writer. Time: first post to that confirmation.
   --targets one: rank 0 -> each rank in turn (results over all pairs); all: rank 0 -> every rank
   at once; pairs: the full-node experiment, rank i -> rank i + n/2 for every i < n/2 at once (one
   host's ranks to the other's, each rank on its own NICs: --nics "r0,r1;r2,r3"), reported per
   rank, per host and in aggregate.

   cc -O2 -I. drivers/write.c -o write $(pkg-config --cflags --libs libfabric pmix)
   nvcc -O2 -x cu -I. drivers/write.c -o write_cuda $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix
   mpirun -np 2 ./write -b 4K -e 256M --mode all -c
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#ifdef __CUDACC__
#include "efax_cuda.h"
#endif
#include "efax_bench.h"

#include <limits.h>
#include <string.h>

enum { TAG_ACK = 1, TAG_READY = 2, TAG_DATA = 3 };

typedef struct run {
    efax_bench b;
    efax_bench_step st;
    const char *targets;       /* one | all | pairs */
    efax_buf *srcs[3], *dsts[3], *src, *dst; /* per memory kind; the current one's */
    efax_xfer *xs;
    efax_expect *ex;
    efax_write_desc *w;        /* a target's messages of one iteration */
    double *lat;               /* this rank's times per iteration */
} run;

/* Message m of iteration seq from `from` to `to`, as both sides describe it. It goes under its
   own tag, and each memory kind has its own tags (a staged target takes a tag's cells as they land). */
static int tag_of(const run *r, int k, int m) { return TAG_DATA + k * r->b.o.window + m; }
static const efax_write_desc *msg(const run *r, efax_write_desc *w, int from, int to, int m, uint64_t seq) {
    memset(w, 0, sizeof *w);
    w->from = from, w->to = to, w->size = r->st.size, w->mode = r->st.mode;
    w->src = &r->src->mr, w->dst = &r->dst->mr, w->src_off = w->dst_off = (uint64_t)m * r->st.size;
    w->index = seq * (uint64_t)r->b.o.window + (uint64_t)(m + from);
    w->chunk = efax_opts_chunk(&r->b.o, &r->b.ctx, r->dst, from, to);
    w->tag = tag_of(r, r->st.k, m), w->seq = (uint32_t)seq;
    return w;
}

/* How long a writer waits for a target's confirmation: longer than the target waits for the
   writes (one timeout), so when a rail dies the side that can see which one speaks first. */
static int confirm_ms(const efax_ctx *ctx) {
    int t = efax_ctx_timeout_ms(ctx);
    return t > INT_MAX / 5 * 4 ? INT_MAX : t / 4 * 5;
}

/* A writer, one iteration: window messages to each of ranks first..last, timed until every
   target confirmed. With -c: fresh bytes, once the targets cleared the last ones. */
static int writer_iter(run *r, int first, int last, uint64_t seq, double *us) {
    int W = r->b.o.window, rc = 0;
    efax_write_desc w;
    uint64_t t0;
    for (int p = first; p <= last && r->b.o.check && seq > 0 && !rc; p++) rc = efax_wait_imm(&r->b.ctx, p, TAG_READY, (uint32_t)seq - 1, 1, -1);
    if (r->b.o.check) r->src->ops->fill(r->src, 0, r->st.size * (uint64_t)W, r->b.rank, seq);
    t0 = efax_now_ns();
    for (int p = first; p <= last && !rc; p++)
        for (int m = 0; m < W && !rc; m++) rc = efax_write(&r->b.ctx, &r->xs[(p - first) * W + m], msg(r, &w, r->b.rank, p, m, seq), NULL);
    for (int p = first; p <= last && !rc; p++) rc = efax_wait_imm(&r->b.ctx, p, TAG_ACK, (uint32_t)seq, 1, confirm_ms(&r->b.ctx));
    *us = (double)(efax_now_ns() - t0) / 1e3;
    for (int i = 0; i < (last - first + 1) * W && !rc; i++) rc = efax_wait(&r->b.ctx, &r->xs[i], -1);
    return rc;
}

/* A target, one iteration: take every message from `from`, confirm, then (-c) check and clear. */
static int target_iter(run *r, int from, uint64_t seq, int64_t *wrong) {
    for (int m = 0; m < r->b.o.window; m++) msg(r, &r->w[m], from, r->b.rank, m, seq);
    return efax_bench_take(&r->b, r->ex, r->w, r->b.o.window, r->dst, r->st.size * (uint64_t)r->b.o.window, TAG_ACK, TAG_READY, wrong);
}

/* Every rank, in its role: writes to ranks first..last (none if first > last), takes from `from` (none if < 0). */
static int turn(run *r, int first, int last, int from, int *nlat, int64_t *wrong) {
    int iters = r->st.iters, warm = r->st.warmup, rc = 0;
    if (r->b.o.check && from >= 0) r->dst->ops->poison(r->dst, 0, r->st.size * (uint64_t)r->b.o.window);
    if ((rc = efax_boot_barrier(&r->b.boot, EFAX_TURN_MS))) return rc; /* wait for our turn */
    for (int it = -warm; it < iters && !rc; it++) {
        double us;
        if (first <= last && !(rc = writer_iter(r, first, last, (uint64_t)(it + warm), &us)) && it >= 0) r->lat[(*nlat)++] = us;
        if (first > last && from >= 0) rc = target_iter(r, from, (uint64_t)(it + warm), wrong);
    }
    for (int p = first; r->b.o.check && p <= last && !rc; p++) /* the targets' last "cleared" notices are this turn's */
        rc = efax_wait_imm(&r->b.ctx, p, TAG_READY, (uint32_t)(iters + warm - 1), 1, -1);
    return rc;
}

/* One (size, mode, memory kind) of the sweep. */
static int measure(run *r) {
    efax_bench *b = &r->b;
    int n = b->size, me = b->rank, h = n / 2, iters = r->st.iters, nlat = 0, rc = 0;
    int all = !strcmp(r->targets, "all"), pairs = !strcmp(r->targets, "pairs"), peers = pairs ? h : all ? n - 1 : 1;
    double line = efax_bench_line(b, r->st.mode);
    int64_t wrong = 0;
    efax_result res;
    r->src = r->srcs[r->st.k], r->dst = r->dsts[r->st.k];
    if (pairs) /* every rank of the first half writes to its counterpart at once */
        rc = turn(r, me < h ? me + h : 1, me < h ? me + h : 0, me < h ? -1 : me - h, &nlat, &wrong);
    for (int k = 1; !pairs && k < n && !rc; k = all ? n : k + 1)
        rc = turn(r, me == 0 ? k : 1, me == 0 ? (all ? n - 1 : k) : 0, me != 0 && (all || me == k) ? 0 : -1, &nlat, &wrong);
    if (rc) return rc;
    efax_bench_result(&res, &r->st, r->src, NULL, EFAX_RESULT_ONEWAY, b->o.window, peers);
    if (pairs && (rc = efax_bench_writers(b, &res, r->lat, iters, h, r->st.size * (uint64_t)b->o.window, line))) return rc;
    efax_result_time(&res, r->lat, pairs ? iters : nlat, r->st.size * (uint64_t)b->o.window * (uint64_t)peers, line * (pairs ? h : 1));
    return efax_bench_record(b, &res, wrong);
}

/* Buffers of every memory kind (sources; windows, exchanged, with their tags) and the per-message state. */
static int setup(run *r) {
    efax_bench *b = &r->b;
    size_t bytes = (size_t)b->o.max_size * (size_t)b->o.window, lats = (size_t)efax_opts_iters(&b->o, b->o.min_size) * (size_t)b->size;
    int rc = efax_bench_bufs(b, bytes, EFAX_MR_WRITE_SRC, EFAX_MR_WRITE_DST, r->srcs, r->dsts);
    for (int k = 0; k < b->nk && !rc; k++)
        for (int m = 0; m < b->o.window && !rc; m++) rc = efax_expect_prepare(&b->ctx, &r->dsts[k]->mr, tag_of(r, k, m));
    r->xs = (efax_xfer *)efax_bench_calloc(b, (size_t)b->size * (size_t)b->o.window, sizeof *r->xs);
    r->ex = (efax_expect *)efax_bench_calloc(b, (size_t)b->o.window, sizeof *r->ex);
    r->w = (efax_write_desc *)efax_bench_calloc(b, (size_t)b->o.window, sizeof *r->w);
    r->lat = (double *)efax_bench_calloc(b, lats, sizeof(double));
    return rc ? rc : !r->xs || !r->ex || !r->w || !r->lat ? -FI_ENOMEM : 0;
}

int main(int argc, char **argv) {
    run r;
    efax_bench_desc d;
    efax_optdef extra[] = {
        {"targets", 0, EFAX_OPT_CHOICE, &r.targets, 0, 0, "one|all|pairs", "WHICH", "one: rank 0 -> each rank in turn (default); all: every rank at once; pairs: rank i -> i + n/2, all at once"},
        EFAX_OPT_END};
    int rc;
    memset(&r, 0, sizeof r), memset(&d, 0, sizeof d);
    r.targets = "one";
    d.driver = "write", d.extra = extra, d.min_size = 4096;
    d.about = "One-sided WRITE with immediate data from rank 0 to the other ranks; the targets count chunks.";
    rc = efax_bench_open(&r.b, &d, argc, argv); /* options, memory kinds, the launcher */
    if (!rc && !strcmp(r.targets, "pairs") && r.b.size % 2) rc = efax_bench_usage(&r.b, "--targets pairs needs an even number of ranks (%d)", r.b.size);
    if (!rc) rc = efax_bench_connect(&r.b, TAG_DATA + r.b.nk * r.b.o.window); /* NICs, connections */
    if (!rc) rc = setup(&r);
    if (!rc) rc = efax_bench_begin(&r.b, NULL); /* the report's header (and the GPU ceiling) */
    while (!rc && efax_bench_next(&r.b, &r.st, &rc)) rc = measure(&r);
    return efax_bench_close(&r.b, rc);
}
