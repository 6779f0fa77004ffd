/* write — one-sided RDMA WRITE with immediate data, rank 0 -> rank k. Each message is planned
   over the NICs by a mode (Single, Split, RoundRobin, Stripe); every chunk carries immediate
   data and the target counts the chunks, so it knows the whole message landed without relying
   on write ordering, then confirms to rank 0. Time: first post to that confirmation.

   cc -O2 -I. drivers/write.c -o write $(pkg-config --cflags --libs libfabric pmix)
   nvcc -O2 -x cu -I. drivers/write.c -o write_cuda $(pkg-config --cflags --libs libfabric pmix) -lcuda
   mpirun -np 2 ./write -b 4K -e 256M --mode all -c
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#ifdef __CUDACC__
#include "efax_cuda.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_DATA = 1, TAG_ACK = 2, TAG_READY = 3 };

typedef struct bench {
    efax_opts o;
    efax_boot boot;
    efax_ctx ctx;
    efax_report rep;
    efax_buf src, dst;
    efax_xfer *xs;
    double *lat;
    const char *targets;
    int me, n;
} bench;

/* Rank 0, one iteration: window messages to each target, timed until every target confirmed. */
static int writer_iter(bench *b, int first, int last, efax_mode mode, uint64_t size, uint64_t seq, double *us) {
    int W = b->o.window, rc = 0, p, m;
    uint64_t t0;
    if (b->o.check) { /* new bytes each iteration; wait until the targets cleared theirs */
        b->src.ops->fill(&b->src, 0, size * (uint64_t)W, 0, seq);
        for (p = first; p <= last && seq > 0 && !rc; p++) rc = efax_wait_imm(&b->ctx, p, TAG_READY, (uint32_t)seq - 1, 1, -1);
    }
    t0 = efax_now_ns();
    for (p = first; p <= last && !rc; p++)
        for (m = 0; m < W && !rc; m++)
            rc = efax_write(&b->ctx, &b->xs[(p - first) * W + m], p, mode, seq * (uint64_t)W + (uint64_t)(m + p), &b->src.mr,
                            (uint64_t)m * size, &b->dst.mr, (uint64_t)m * size, size, b->o.chunk, TAG_DATA, (uint32_t)seq, NULL);
    for (p = first; p <= last && !rc; p++) rc = efax_wait_imm(&b->ctx, p, TAG_ACK, (uint32_t)seq, 1, -1);
    *us = (double)(efax_now_ns() - t0) / 1e3;
    for (p = 0; p < (last - first + 1) * W && !rc; p++) rc = efax_wait(&b->ctx, &b->xs[p], -1);
    return rc;
}

/* A target, one iteration: count every chunk, confirm, then (with -c) check and clear. */
static int target_iter(bench *b, efax_mode mode, uint64_t size, uint64_t seq, int64_t *wrong) {
    uint64_t bytes = size * (uint64_t)b->o.window;
    uint32_t chunks = (uint32_t)b->o.window * efax_write_chunks(size, efax_ctx_peer_nnics(&b->ctx, 0), mode, b->o.chunk);
    int rc = efax_wait_imm(&b->ctx, 0, TAG_DATA, (uint32_t)seq, chunks, -1);
    if (!rc) rc = efax_notify(&b->ctx, 0, TAG_ACK, (uint32_t)seq);
    if (!rc && b->o.check) {
        *wrong += (int64_t)b->dst.ops->check(&b->dst, 0, bytes, 0, seq);
        b->dst.ops->poison(&b->dst, 0, bytes);
        rc = efax_notify(&b->ctx, 0, TAG_READY, (uint32_t)seq);
    }
    return rc;
}

/* One (size, mode) step with targets first..last at once; every rank calls it. */
static int step(bench *b, int first, int last, efax_mode mode, uint64_t size, int *nlat, int64_t *wrong) {
    int iters = efax_opts_iters(&b->o, size), warm = efax_opts_warmup(&b->o, size), rc = 0;
    if (b->o.check && b->me >= first && b->me <= last) b->dst.ops->poison(&b->dst, 0, size * (uint64_t)b->o.window);
    if ((rc = efax_boot_barrier(&b->boot, EFAX_TURN_MS))) return rc; /* wait for our turn */
    for (int it = -warm; it < iters && !rc; it++) {
        uint64_t seq = (uint64_t)(it + warm);
        double us;
        if (b->me == 0) {
            rc = writer_iter(b, first, last, mode, size, seq, &us);
            if (it >= 0) b->lat[(*nlat)++] = us;
        } else if (b->me >= first && b->me <= last) {
            rc = target_iter(b, mode, size, seq, wrong);
        }
    }
    /* the targets' last "cleared" notices belong to this step: consume them */
    for (int p = first; b->me == 0 && b->o.check && p <= last && !rc; p++)
        rc = efax_wait_imm(&b->ctx, p, TAG_READY, (uint32_t)(iters + warm - 1), 1, -1);
    return rc;
}

int main(int argc, char **argv) {
    bench b;
    efax_ctx_desc cd;
    efax_boot_desc bd;
    efax_optdef extra[] = {
        {"targets", 0, EFAX_OPT_CHOICE, &b.targets, 0, 0, "one|all", "WHICH", "one: rank 0 -> each rank in turn (default); all: every rank at once"},
        {NULL, 0, (efax_opt_type)0, NULL, 0, 0, NULL, NULL, NULL}};
    const efax_mem_ops *mem = efax_mem_host();
    char err[256];
    int rc;
    uint64_t sweeps = 0, t_start;

    /* 1. options */
    memset(&b, 0, sizeof b);
    b.targets = "one";
    efax_opts_init(&b.o);
    b.o.min_size = 4096;
    rc = efax_opts_parse(&b.o, argc, argv, extra, "write",
                         "One-sided WRITE with immediate data from rank 0 to the other ranks; the targets count chunks.", err, sizeof err);
    if (rc == 1) return 0;
    if (rc) { fprintf(stderr, "write: %s\n", err); return 2; }
#ifdef __CUDACC__
    if ((rc = efax_cuda_mem_parse(b.o.mem, &mem, err, sizeof err))) { fprintf(stderr, "write: %s\n", err); return rc > 0 ? 0 : 2; }
#else
    if (strcmp(b.o.mem, "host")) { fprintf(stderr, "write: --mem %s: this build has host memory only; use the CUDA build (build/write_cuda)\n", b.o.mem); return 2; }
#endif

    /* 2. launcher, NICs, connections */
    memset(&bd, 0, sizeof bd);
    bd.timeout_ms = b.o.timeout_ms;
    if (efax_boot_init(&b.boot, &bd)) return 1;
    b.me = b.boot.rank;
    b.n = b.boot.size;
    if (b.n < 2) { fprintf(stderr, "write: needs at least 2 ranks (e.g. mpirun -np 2 %s)\n", argv[0]); efax_boot_deinit(&b.boot); return 2; }
    memset(&cd, 0, sizeof cd);
    cd.provider = b.o.provider;
    cd.nics = b.o.nics;
    cd.timeout_ms = b.o.timeout_ms;
#ifdef __CUDACC__
    cd.hmem = efax_cuda_wants_hmem(mem);
#endif
    if ((rc = efax_ctx_init(&b.ctx, &cd)) || (rc = efax_ctx_connect(&b.ctx, &b.boot)) || (rc = efax_ctx_warmup(&b.ctx))) goto out;

    /* 3. buffers: rank 0's source, every target's window, registered with only the rights they need */
    {
        size_t bytes = (size_t)b.o.max_size * (size_t)b.o.window;
        if ((rc = efax_buf_alloc(&b.ctx, &b.src, mem, bytes, EFAX_MR_WRITE_SRC)) ||
            (rc = efax_buf_alloc(&b.ctx, &b.dst, mem, bytes, EFAX_MR_WRITE_DST)) || (rc = efax_mr_exchange(&b.dst.mr, &b.boot)))
            goto out;
    }
    b.xs = (efax_xfer *)calloc((size_t)b.n * (size_t)b.o.window, sizeof *b.xs);
    b.lat = (double *)calloc((size_t)efax_opts_iters(&b.o, b.o.min_size) * (size_t)b.n, sizeof *b.lat);
    if (!b.xs || !b.lat) { rc = -FI_ENOMEM; goto out; }
    if ((rc = efax_report_init(&b.rep, &b.o, "write", mem->name, &b.ctx, &b.boot))) goto out;

    /* 4. the sweep: every size, every mode; targets one at a time (results over all pairs) or all at once */
    t_start = efax_now_ns();
    do {
        for (uint64_t size = b.o.min_size; size && !rc; size = efax_opts_next_size(&b.o, size))
            for (int mode = 0; mode < EFAX_MODE_COUNT && !rc; mode++) {
                int nlat = 0, all = !strcmp(b.targets, "all");
                int64_t wrong = 0, total = 0;
                char label[40];
                efax_result res;
                if (!(b.o.modes & (1u << mode))) continue;
                efax_ctx_stats_reset(&b.ctx);
                efax_report_progress(&b.rep, "%s %llu bytes", efax_mode_label((efax_mode)mode), (unsigned long long)size);
                for (int k = 1; k < b.n && !rc; k = all ? b.n : k + 1)
                    rc = step(&b, k, all ? b.n - 1 : k, (efax_mode)mode, size, &nlat, &wrong);
                if (!rc) rc = efax_boot_sum(&b.boot, wrong, &total, EFAX_TURN_MS);
                if (rc || b.me != 0) continue;
                snprintf(label, sizeof label, "%s%s", efax_mode_label((efax_mode)mode), mem->label);
                efax_result_init(&res, label, mem->name, b.src.path, "oneway", size, b.o.window, all ? b.n - 1 : 1);
                efax_result_time(&res, b.lat, nlat, size * (uint64_t)b.o.window * (uint64_t)(all ? b.n - 1 : 1),
                                 efax_line_rate(&b.ctx, &b.o, mode == EFAX_MODE_SINGLE ? 1 : efax_ctx_nnics(&b.ctx)));
                res.wrong = b.o.check ? total : -1;
                efax_result_nics(&res, &b.ctx);
                efax_report_add(&b.rep, &res);
                if (mode == EFAX_MODE_COUNT - 1 || !(b.o.modes >> (mode + 1))) efax_report_row(&b.rep);
            }
        /* a soak repeats the sweep: rank 0 decides, everyone follows */
        if (!rc && b.o.duration_s > 0) {
            int64_t go = b.me == 0 && (double)(efax_now_ns() - t_start) / 1e9 < b.o.duration_s, any = 0;
            sweeps++;
            if (b.me == 0) fprintf(stderr, "# sweep %llu done after %.0f s, rss %ld KiB\n", (unsigned long long)sweeps,
                                   (double)(efax_now_ns() - t_start) / 1e9, efax_rss_kib());
            rc = efax_boot_sum(&b.boot, go, &any, EFAX_TURN_MS);
            if (!rc && !any) break;
        }
    } while (!rc && b.o.duration_s > 0);
    efax_report_deinit(&b.rep);
out:
    efax_buf_free(&b.src);
    efax_buf_free(&b.dst);
    efax_ctx_deinit(&b.ctx);
    efax_boot_deinit(&b.boot);
    free(b.xs);
    free(b.lat);
    return rc ? 1 : 0;
}
