/* kvcache — disaggregated prefill to decode: rank 0 (prefill) writes L layers x P pages of S bytes of
   KV cache into rank 1's (decode), layer by layer, each layer one batch of P pages scattered through
   a page table on each side (random permutations: neither side's pages of a layer are contiguous),
   awaited by the decode side as one expectation (the batch's count, declared on both sides), so it
   takes layer 0 while later layers fly. Beside it (Contig), the same bytes as one contiguous write
   per layer. Rows: Gbps of every layer's bytes from the first post to the decode side's word that
   the last landed, pages per second (Mmsg/s), and each layer's time from its post to its landing
   (p50/p99, clocks read on both sides after a barrier). -c checks every page, outside the time.
   --staged moves host memory through staging buffers, as device memory without GPUDirect moves.

   cc -O2 -I. drivers/kvcache.c -o kvcache $(pkg-config --cflags --libs libfabric pmix)
   nvcc -O2 -x cu -I. drivers/kvcache.c -o kvcache_cuda \
       $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix
   mpirun -np 2 ./kvcache -b 64K -e 64K --layers 32 --pages 64 -c
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#ifdef __CUDACC__
#include "efax_cuda.h"
#endif
#include "efax_bench.h"

#include <stdio.h>
#include <string.h>

enum { TAG_ACK = EFAX_BENCH_TAG_DATA, TAG_KV, KV_TAGS = 8 }; /* layer l: tag TAG_KV + l % 8, seq l / 8 */

typedef struct run {
    efax_bench b;
    efax_bench_step st;
    int layers, pages;
    efax_buf *src, *dst;
    uint32_t *src_pages, *dst_pages; /* [layers * pages]: the page tables, one permutation each */
    efax_batch *batch;               /* [layers] */
    efax_expect *ex;                 /* [layers] */
    double *post, *land;             /* [iters * layers]: microseconds after the iteration's barrier */
    double *lat;                     /* [iters]: rank 0's first post to the decode side's word */
    int64_t wrong;
    bool staged; /* --staged: host memory through staging buffers, as device memory without GPUDirect */
} run;

/* Layer l as both sides describe it: its pages through the page tables (paged) or one block. */
static efax_batch_desc layer(const run *r, int l, bool paged) {
    efax_batch_desc d;
    memset(&d, 0, sizeof d);
    d.from = 0;
    d.to = 1;
    d.src = &r->src->mr;
    d.dst = &r->dst->mr;
    d.mode = r->st.mode;
    d.chunk = r->b.o.chunk;
    d.tag = TAG_KV + l % KV_TAGS;
    d.seq = (uint32_t)(l / KV_TAGS);
    d.index = paged ? (uint64_t)l * (uint64_t)r->pages : (uint64_t)l; /* rotating modes: a page, a layer */
    d.npages = paged ? r->pages : 1;
    d.page_size = paged ? r->st.size : r->st.size * (uint64_t)r->pages;
    d.src_pages = paged ? &r->src_pages[l * r->pages] : NULL;
    d.dst_pages = paged ? &r->dst_pages[l * r->pages] : NULL;
    d.src_off = d.dst_off = paged ? 0 : d.page_size * (uint64_t)l;
    return d;
}

/* A page table: a permutation of the cache's pages (the same on both ranks: one seed). */
static void shuffle(uint32_t *t, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) t[i] = (uint32_t)i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(efax_pattern_word(seed, (uint64_t)i) % (uint64_t)(i + 1));
        uint32_t v = t[i];
        t[i] = t[j];
        t[j] = v;
    }
}

/* Page p of layer l, iteration it: its pattern (the writer's fill, the decode side's check). */
static uint64_t page_iter(const run *r, int it, int l, int p) {
    return (uint64_t)it << 32 | (uint64_t)(l * r->pages + p);
}

/* One iteration, both sides: prefill posts every layer and waits for the decode side's word;
   decode announces every layer, takes each as it lands, then says so. */
static int iteration(run *r, int it, bool paged, double *lat) {
    efax_ctx *ctx = &r->b.ctx;
    double *post = &r->post[it * r->layers], *land = &r->land[it * r->layers];
    int l, rc = efax_boot_barrier(&r->b.boot, -1);
    uint64_t t0 = efax_now_ns();
    for (l = 0; l < r->layers && !rc; l++) {
        efax_batch_desc d = layer(r, l, paged);
        if (r->b.rank == 0) {
            rc = efax_write_batch(ctx, &r->batch[l], &d);
            post[l] = (double)(efax_now_ns() - t0) / 1e3;
        } else
            rc = efax_expect_batch(ctx, &r->ex[l], &d);
    }
    for (l = 0; l < r->layers && !rc; l++) {
        if (r->b.rank == 0) {
            rc = efax_batch_wait(ctx, &r->batch[l], -1);
        } else {
            rc = efax_expect_wait(ctx, &r->ex[l], -1);
            land[l] = (double)(efax_now_ns() - t0) / 1e3;
        }
    }
    if (!rc)
        rc = r->b.rank == 0 ? efax_wait_imm(ctx, 1, TAG_ACK, (uint32_t)it, 1, -1)
                            : efax_notify(ctx, 0, TAG_ACK, (uint32_t)it);
    if (r->b.rank == 0) lat[it] = (double)(efax_now_ns() - t0) / 1e3;
    return rc;
}

/* -c: fills every page of the prefill cache (before), checks every page of the decode cache (after):
   where the page tables put them (paged), or layer by layer in order (contiguous). */
static void pages_check(run *r, int it, bool paged, bool fill) {
    uint64_t s = r->st.size;
    for (int l = 0; l < r->layers; l++)
        for (int p = 0; p < r->pages; p++) {
            int i = l * r->pages + p;
            uint64_t so = (paged ? r->src_pages[i] : (uint32_t)i) * s,
                     dof = (paged ? r->dst_pages[i] : (uint32_t)i) * s;
            if (fill)
                r->src->ops->fill(r->src, so, s, 0, page_iter(r, it, l, p));
            else
                r->wrong += (int64_t)r->dst->ops->check(r->dst, dof, s, 0, page_iter(r, it, l, p));
        }
}

/* One variant (Paged or Contig) of a step: iterations, then the result with each layer's time to land. */
static int variant(run *r, bool paged) {
    efax_bench *b = &r->b;
    uint64_t bytes = r->st.size * (uint64_t)r->pages * (uint64_t)r->layers;
    int n = r->st.iters * r->layers, rc = 0;
    efax_result res;
    efax_bench_variant(b, &r->st, paged ? "Paged" : "Contig");
    for (int it = -r->st.warmup; it < r->st.iters && !rc; it++) {
        int k = it < 0 ? 0 : it;
        if (b->o.check && r->b.rank == 0) pages_check(r, k, paged, true);
        rc = iteration(r, k, paged, r->lat);
        if (!rc && b->o.check && r->b.rank == 1) pages_check(r, k, paged, false);
    }
    efax_bench_result(&res, &r->st, r->dst, paged ? "Paged" : "Contig", EFAX_RESULT_ONEWAY, r->pages, 1);
    /* each layer's post on rank 0 to its landing on rank 1 */
    if (!rc) rc = efax_bench_lat_pairs(b, &res, "layer_land_us", r->post, r->land, n, 0, 1);
    if (rc) return rc;
    /* pages per second: the message rate's column (a page is the row's size) */
    efax_result_time(&res, r->lat, r->st.iters, bytes, efax_bench_line(b, r->st.mode));
    rc = efax_bench_record(b, &res, b->o.check ? r->wrong : -1);
    r->wrong = 0;
    return rc;
}

/* The two caches for memory kind st.kind (--staged: host memory through staging buffers, every
   layer's tag prepared for cells taken as they land). */
static int caches(run *r) {
    const efax_mem_ops *kind = r->staged ? efax_bench_mem_staged() : r->st.kind;
    size_t len = (size_t)r->layers * (size_t)r->pages * (size_t)r->b.o.max_size;
    int rc = efax_bench_buf(&r->b, kind, len, EFAX_MR_WRITE_SRC, &r->src);
    if (!rc) rc = efax_bench_buf(&r->b, kind, len, EFAX_MR_WRITE_DST, &r->dst);
    for (int t = 0; t < KV_TAGS && !rc; t++) rc = efax_expect_prepare(&r->b.ctx, &r->dst->mr, TAG_KV + t);
    return rc;
}

int main(int argc, char **argv) {
    run r;
    efax_bench_desc d;
    efax_optdef extra[] = {
        {"layers", 0, EFAX_OPT_INT, &r.layers, 1, KV_TAGS * EFAX_IMM_WINDOW, NULL, "L",
         "layers (default 32)"},
        {"pages", 0, EFAX_OPT_INT, &r.pages, 1, 65536, NULL, "P", "pages a layer (default 64)"},
        {"staged", 0, EFAX_OPT_FLAG, &r.staged, 0, 0, NULL, NULL,
         "host memory through staging buffers (device memory's path without GPUDirect)"},
        EFAX_OPT_END,
    };
    int rc, kind = -1, cells;
    memset(&r, 0, sizeof r);
    memset(&d, 0, sizeof d);
    r.layers = 32;
    r.pages = 64;
    d.driver = "kvcache";
    d.about =
        "Prefill writes L layers x P scattered pages into decode, a batch a layer; beside one write a layer.";
    d.extra = extra;
    d.min_size = d.max_size = 64 << 10;
    d.min_ranks = d.max_ranks = 2;
    d.one_kind = true;
    d.msg_rate = true; /* Mmsg/s: million pages a second */
    rc = efax_bench_open(&r.b, &d, argc, argv);
    if (!rc && r.staged && strcmp(r.b.kinds[0]->name, "host"))
        rc = efax_bench_usage(&r.b, "--staged stages host memory: leave --mem at host");
    if (!rc && r.staged && r.layers > KV_TAGS * EFAX_STAGE_WINDOW)
        rc = efax_bench_usage(&r.b,
                              "--staged: at most %d layers (%d tags, %d staged writes outstanding a tag)",
                              KV_TAGS * EFAX_STAGE_WINDOW, KV_TAGS, EFAX_STAGE_WINDOW);
    if (!rc) rc = efax_bench_connect(&r.b);
    cells = r.layers * r.pages;
    r.src_pages = (uint32_t *)efax_bench_calloc(&r.b, (size_t)cells, sizeof(uint32_t));
    r.dst_pages = (uint32_t *)efax_bench_calloc(&r.b, (size_t)cells, sizeof(uint32_t));
    r.batch = (efax_batch *)efax_bench_calloc(&r.b, (size_t)r.layers, sizeof(efax_batch));
    r.ex = (efax_expect *)efax_bench_calloc(&r.b, (size_t)r.layers, sizeof(efax_expect));
    r.post = (double *)efax_bench_calloc(&r.b, (size_t)efax_opts_iters(&r.b.o, 1) * (size_t)r.layers,
                                         sizeof(double));
    r.land = (double *)efax_bench_calloc(&r.b, (size_t)efax_opts_iters(&r.b.o, 1) * (size_t)r.layers,
                                         sizeof(double));
    r.lat = (double *)efax_bench_calloc(&r.b, (size_t)efax_opts_iters(&r.b.o, 1), sizeof(double));
    if (!rc && (!r.src_pages || !r.dst_pages || !r.batch || !r.ex || !r.post || !r.land || !r.lat))
        rc = -FI_ENOMEM;
    for (int l = 0; l < r.layers && !rc; l++) rc = efax_batch_init(&r.batch[l], r.pages);
    if (!rc) {
        shuffle(r.src_pages, cells, 0x5eedull);
        shuffle(r.dst_pages, cells, 0xdecull);
        rc = efax_bench_begin(&r.b, NULL);
    }
    while (!rc && efax_bench_next(&r.b, &r.st, &rc)) {
        if (r.st.k != kind && !(rc = caches(&r))) kind = r.st.k;
        if (!rc) rc = variant(&r, true);
        if (!rc) rc = variant(&r, false);
    }
    for (int l = 0; r.batch && l < r.layers; l++) efax_batch_deinit(&r.batch[l]);
    return efax_bench_close(&r.b, rc);
}
