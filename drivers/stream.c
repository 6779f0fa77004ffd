/* stream — the streaming recipe a transfer engine is built on: a writer keeps up to --slots writes
   in flight into a ring of slots at its target, all under ONE data tag, numbered 0, 1, 2, ...; the
   target takes them in turn, whatever order their chunks arrive in, checks each slot (-c) and
   hands it back with a notification under ONE credit tag; the writer reuses a slot once its
   own write from it completed and the target's credit for it came. Rank i writes to rank i + n/2.
   The loop is efax.h's calls alone (docs/manual.md, "Streaming"); the harness only parses the
   options, opens the context and reports. --staged moves host memory through staging buffers
   (the path of device memory without GPUDirect). Time: the writer's first post to the last
   credit, per message the time between credits; bandwidth is one way.

   cc -O2 -pthread -I. drivers/stream.c -o stream $(pkg-config --cflags --libs libfabric pmix)
   nvcc -O2 -x cu -I. drivers/stream.c -o stream_cuda \
       $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix
   mpirun -np 2 ./stream -b 4K -e 1M -c --slots 4
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#ifdef __CUDACC__
#include "efax_cuda.h"
#endif
#include "efax_bench.h"

#include <string.h>

enum { TAG_DATA = EFAX_BENCH_TAG_DATA, TAG_CREDIT };

typedef struct run {
    efax_bench b;
    efax_bench_step st;
    int slots;
    bool staged;
    efax_buf *src, *dst;
    efax_xfer *xs; /* [slots]: the writer's write from each slot */
    double *lat;   /* a step's times between credits */
    int64_t wrong;
} run;

/* Message n from rank `from` to rank `to`, as both sides describe it: slot n % slots on both sides,
   the data tag, sequence n. */
static efax_write_desc slot_write(const run *r, int from, int to, uint64_t n) {
    efax_write_desc w;
    memset(&w, 0, sizeof w);
    w.from = from;
    w.to = to;
    w.src = &r->src->mr;
    w.dst = &r->dst->mr;
    w.src_off = n % (uint64_t)r->slots * r->st.size;
    w.dst_off = w.src_off;
    w.size = r->st.size;
    w.mode = r->st.mode;
    w.index = n;
    w.chunk = r->b.o.chunk; /* --chunk, or 0: the library's policy */
    w.tag = TAG_DATA;
    w.seq = (uint32_t)n;
    return w;
}

/* The writer's side of `count` messages to rank `to`; lat[k]: microseconds from credit k - 1 (the
   first post for k = 0) to credit k, as this rank saw them (lat may be NULL). */
static int writer(run *r, int to, int count, double *lat) {
    efax_ctx *ctx = &r->b.ctx;
    uint64_t t = efax_now_ns();
    int n, k = 0, rc = 0;
    for (n = 0; n < count + r->slots && !rc; n++) {
        efax_xfer *x = &r->xs[n % r->slots];
        efax_write_desc w;
        if (n >= r->slots) { /* slot n % slots: the target's credit for it, then our own completion */
            rc = efax_wait_imm(ctx, to, TAG_CREDIT, (uint32_t)k, 1, -1);
            if (!rc) rc = efax_wait(ctx, x, -1);
            if (lat) lat[k] = (double)(efax_now_ns() - t) / 1e3;
            t = efax_now_ns();
            k++;
        }
        if (rc || n >= count) continue;
        w = slot_write(r, r->b.rank, to, (uint64_t)n);
        if (r->b.o.check) r->src->ops->fill(r->src, w.src_off, w.size, r->b.rank, (uint64_t)n);
        rc = efax_write(ctx, x, &w, NULL);
    }
    return rc;
}

/* The target's side: each message in turn, announced, awaited, checked (-c), its slot cleared and
   handed back. */
static int target(run *r, int from, int count) {
    efax_ctx *ctx = &r->b.ctx;
    efax_expect e;
    int n, rc = 0;
    for (n = 0; n < count && !rc; n++) {
        efax_write_desc w = slot_write(r, from, r->b.rank, (uint64_t)n);
        rc = efax_expect_write(ctx, &e, &w);
        if (!rc) rc = efax_expect_wait(ctx, &e, -1);
        if (!rc && r->b.o.check) {
            r->wrong += (int64_t)r->dst->ops->check(r->dst, w.dst_off, w.size, from, (uint64_t)n);
            r->dst->ops->poison(r->dst, w.dst_off, w.size);
        }
        if (!rc) rc = efax_notify(ctx, from, TAG_CREDIT, (uint32_t)n);
    }
    return rc;
}

/* One (size, mode, memory kind): the warm-up stream, then the timed one, numbered from 0 again. */
static int measure(run *r) {
    efax_bench *b = &r->b;
    int half = b->size / 2, peer = (b->rank + half) % b->size, rc = 0;
    bool writes = b->rank < half;
    efax_result res;
    for (int phase = 0; phase < 2 && !rc; phase++) {
        int count = phase ? r->st.iters : r->st.warmup;
        rc = efax_boot_barrier(&b->boot, -1);
        if (!rc) rc = writes ? writer(r, peer, count, phase ? r->lat : NULL) : target(r, peer, count);
    }
    if (!rc) rc = efax_boot_barrier(&b->boot, -1);
    efax_bench_result(&res, &r->st, r->dst, r->staged ? "Staged" : NULL, EFAX_RESULT_ONEWAY, r->slots, 1);
    if (!rc) rc = efax_bench_writers(b, &res, r->lat, r->st.iters, half, r->st.size, 0);
    if (rc) return rc;
    efax_result_time(&res, r->lat, r->st.iters, r->st.size * (uint64_t)half, efax_bench_line(b, r->st.mode));
    rc = efax_bench_record(b, &res, r->b.o.check ? r->wrong : -1);
    r->wrong = 0;
    return rc;
}

int main(int argc, char **argv) {
    run r;
    efax_bench_desc d;
    efax_optdef extra[] = {
        {"slots", 0, EFAX_OPT_INT, &r.slots, 1, EFAX_IMM_WINDOW, NULL, "N",
         "slots of the ring: writes in flight at most (default 4)"},
        {"staged", 0, EFAX_OPT_FLAG, &r.staged, 0, 0, NULL, NULL,
         "host memory through staging buffers (device memory's path without GPUDirect)"},
        EFAX_OPT_END,
    };
    int rc, kind = -1;
    size_t len; /* the ring's bytes */
    memset(&r, 0, sizeof r);
    memset(&d, 0, sizeof d);
    r.slots = 4;
    d.driver = "stream";
    d.no_staged =
        "stream stages host memory with --staged (the ring checked against the staged window there): use it";
    d.about = "A writer streams into a ring of slots under one tag; the target hands slots back by credits.";
    d.extra = extra;
    d.min_size = 4096;
    d.max_size = 1 << 20;
    d.one_kind = true;
    rc = efax_bench_open(&r.b, &d, argc, argv); /* options, memory kinds, the launcher */
    if (!rc && r.b.size % 2) rc = efax_bench_usage(&r.b, "needs an even number of ranks (%d)", r.b.size);
    if (!rc && r.staged && strcmp(r.b.kinds[0]->name, "host"))
        rc = efax_bench_usage(&r.b, "--staged stages host memory: leave --mem at host");
    if (!rc && r.staged && r.slots > EFAX_STAGE_WINDOW) /* a slot a write outstanding, one tag */
        rc = efax_bench_usage(&r.b, "--staged: at most %d slots (staged writes outstanding a tag)",
                              EFAX_STAGE_WINDOW);
    if (!rc) rc = efax_bench_connect(&r.b); /* NICs, connections, warm-up */
    if (!rc) {                              /* a write a slot; a step's times */
        r.xs = (efax_xfer *)efax_bench_calloc(&r.b, (size_t)r.slots, sizeof *r.xs);
        r.lat = (double *)efax_bench_calloc(&r.b, (size_t)efax_opts_iters(&r.b.o, 1), sizeof(double));
        rc = r.xs && r.lat ? 0 : -FI_ENOMEM;
    }
    if (!rc) rc = efax_bench_begin(&r.b, NULL); /* the report's header (and the GPU ceiling) */
    len = (size_t)r.slots * (size_t)r.b.o.max_size;
    while (!rc && efax_bench_next(&r.b, &r.st, &rc)) {
        /* the ring's buffers, once a memory kind (staged: cells taken as they land) */
        if (r.st.k != kind &&
            !(rc = efax_bench_write_bufs(&r.b, &r.st, r.staged, len, TAG_DATA, 1, &r.src, &r.dst)))
            kind = r.st.k;
        if (!rc) rc = measure(&r);
    }
    return efax_bench_close(&r.b, rc);
}
