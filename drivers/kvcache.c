/* kvcache — disaggregated prefill to decode: rank 0 (prefill) writes L layers x P pages of S bytes of
   KV cache into rank 1's (decode), layer by layer, each layer one batch of P pages scattered through
   a page table on each side (random permutations: neither side's pages of a layer are contiguous),
   awaited by the decode side as one expectation (the batch's count, declared on both sides), so it
   takes layer 0 while later layers fly. Beside it (Contig), the same bytes as one contiguous write
   per layer. Rows: Gbps of every layer's bytes from the first post to the decode side's word that
   the last landed, pages per second (Mmsg/s), and each layer's time from its post to its landing
   (p50/p99, clocks read on both sides after a barrier). -c checks every page, outside the time.
   --staged moves host memory through staging buffers, as device memory without GPUDirect moves.

   cc -O2 -pthread -I. drivers/kvcache.c -o kvcache $(pkg-config --cflags --libs libfabric pmix)
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

#include <string.h>

enum { TAG_ACK = EFAX_BENCH_TAG_DATA, TAG_KV, KV_TAGS = 8 }; /* layer l: tag TAG_KV + l % 8, seq l / 8 */

typedef struct run {
    efax_bench b;
    efax_bench_step st;
    efax_bench_kv kv; /* the page tables, batches and times */
    efax_buf *src, *dst;
    bool staged; /* --staged: host memory through staging buffers, as device memory without GPUDirect */
} run;

/* Layer l as both sides describe it: its pages through the page tables (paged) or one block. */
static efax_batch_desc layer(const run *r, int l, bool paged) {
    const efax_bench_kv *kv = &r->kv;
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
    d.index = paged ? (uint64_t)l * (uint64_t)kv->pages : (uint64_t)l; /* rotating modes: a page, a layer */
    d.npages = paged ? kv->pages : 1;
    d.page_size = paged ? r->st.size : r->st.size * (uint64_t)kv->pages;
    d.src_pages = paged ? &kv->src_pages[l * kv->pages] : NULL;
    d.dst_pages = paged ? &kv->dst_pages[l * kv->pages] : NULL;
    d.src_off = d.dst_off = paged ? 0 : d.page_size * (uint64_t)l;
    return d;
}

/* One iteration, both sides: prefill posts every layer and waits for the decode side's word;
   decode announces every layer, takes each as it lands, then says so. */
static int iteration(run *r, int it, bool paged) {
    efax_ctx *ctx = &r->b.ctx;
    efax_bench_kv *kv = &r->kv;
    double *post = &kv->post[it * kv->layers], *land = &kv->land[it * kv->layers];
    int l, rc = efax_boot_barrier(&r->b.boot, -1);
    uint64_t t0 = efax_now_ns();
    for (l = 0; l < kv->layers && !rc; l++) {
        efax_batch_desc d = layer(r, l, paged);
        if (r->b.rank == 0) {
            rc = efax_write_batch(ctx, &kv->batch[l], &d);
            post[l] = (double)(efax_now_ns() - t0) / 1e3;
        } else
            rc = efax_expect_batch(ctx, &kv->ex[l], &d);
    }
    for (l = 0; l < kv->layers && !rc; l++) {
        if (r->b.rank == 0) {
            rc = efax_batch_wait(ctx, &kv->batch[l], -1);
        } else {
            rc = efax_expect_wait(ctx, &kv->ex[l], -1);
            land[l] = (double)(efax_now_ns() - t0) / 1e3;
        }
    }
    if (!rc)
        rc = r->b.rank == 0 ? efax_wait_imm(ctx, 1, TAG_ACK, (uint32_t)it, 1, -1)
                            : efax_notify(ctx, 0, TAG_ACK, (uint32_t)it);
    if (r->b.rank == 0) kv->lat[it] = (double)(efax_now_ns() - t0) / 1e3;
    return rc;
}

/* One variant (Paged or Contig) of a step: iterations (-c: every page filled before, checked after),
   then the result with each layer's time to land. */
static int variant(run *r, bool paged) {
    efax_bench *b = &r->b;
    efax_bench_kv *kv = &r->kv;
    uint64_t bytes = r->st.size * (uint64_t)kv->pages * (uint64_t)kv->layers;
    int n = r->st.iters * kv->layers, rc = 0;
    int64_t wrong = 0; /* what the decode side found, -c */
    efax_result res;
    efax_bench_variant(b, &r->st, paged ? "Paged" : "Contig");
    for (int it = -r->st.warmup; it < r->st.iters && !rc; it++) {
        int k = it < 0 ? 0 : it;
        if (b->o.check && b->rank == 0) efax_bench_kv_pages(kv, &r->st, r->src, r->dst, k, paged, true);
        rc = iteration(r, k, paged);
        if (!rc && b->o.check && b->rank == 1)
            wrong += efax_bench_kv_pages(kv, &r->st, r->src, r->dst, k, paged, false);
    }
    efax_bench_result(&res, &r->st, r->dst, paged ? "Paged" : "Contig", EFAX_RESULT_ONEWAY, kv->pages, 1);
    /* each layer's post on rank 0 to its landing on rank 1 */
    if (!rc) rc = efax_bench_lat_pairs(b, &res, "layer_land_us", kv->post, kv->land, n, 0, 1);
    if (rc) return rc;
    /* pages per second: the message rate's column (a page is the row's size) */
    efax_result_time(&res, kv->lat, r->st.iters, bytes, efax_bench_line(b, r->st.mode));
    return efax_bench_record(b, &res, b->o.check ? wrong : -1);
}

int main(int argc, char **argv) {
    run r;
    efax_bench_desc d;
    efax_optdef extra[] = {
        {"layers", 0, EFAX_OPT_INT, &r.kv.layers, 1, KV_TAGS * EFAX_IMM_WINDOW, NULL, "L",
         "layers (default 32)"},
        {"pages", 0, EFAX_OPT_INT, &r.kv.pages, 1, 65536, NULL, "P", "pages a layer (default 64)"},
        {"staged", 0, EFAX_OPT_FLAG, &r.staged, 0, 0, NULL, NULL,
         "host memory through staging buffers (device memory's path without GPUDirect)"},
        EFAX_OPT_END,
    };
    int rc, kind = -1;
    size_t len; /* each cache's bytes */
    memset(&r, 0, sizeof r);
    memset(&d, 0, sizeof d);
    r.kv.layers = 32;
    r.kv.pages = 64;
    d.driver = "kvcache";
    d.no_staged = "kvcache stages host memory with --staged (its layers checked against the staged window "
                  "there): use it";
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
    if (!rc && r.staged && r.kv.layers > KV_TAGS * EFAX_STAGE_WINDOW)
        rc = efax_bench_usage(&r.b,
                              "--staged: at most %d layers (%d tags, %d staged writes outstanding a tag)",
                              KV_TAGS * EFAX_STAGE_WINDOW, KV_TAGS, EFAX_STAGE_WINDOW);
    if (!rc) rc = efax_bench_connect(&r.b);
    if (!rc) rc = efax_bench_kv_open(&r.b, &r.kv); /* page tables, batches, times */
    if (!rc) rc = efax_bench_begin(&r.b, NULL);
    len = (size_t)r.kv.layers * (size_t)r.kv.pages * (size_t)r.b.o.max_size;
    while (!rc && efax_bench_next(&r.b, &r.st, &rc)) {
        /* the two caches, once a memory kind (staged: every layer's tag prepared for cells as they land) */
        if (r.st.k != kind &&
            !(rc = efax_bench_write_bufs(&r.b, &r.st, r.staged, len, TAG_KV, KV_TAGS, &r.src, &r.dst)))
            kind = r.st.k;
        if (!rc) rc = variant(&r, true);
        if (!rc) rc = variant(&r, false);
    }
    efax_bench_kv_close(&r.kv);
    return efax_bench_close(&r.b, rc);
}
