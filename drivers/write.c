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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* message m of a window goes under its own tag, and each memory kind has its own tags (a
   staged target takes its tags' arrivals cell by cell) */
enum { TAG_ACK = 1, TAG_READY = 2, TAG_DATA = 3 };
#define TAG_MSG(b, m) (TAG_DATA + (b)->k * (b)->o.window + (m))

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
    double *lat, *all;
    efax_expect *ex;
    const char *targets;
    int me, n;
} bench;

/* A writer, one iteration: window messages to each target, timed until every target confirmed. */
static int writer_iter(bench *b, int first, int last, efax_mode mode, uint64_t size, uint64_t seq, double *us) {
    int W = b->o.window, rc = 0, p, m;
    uint64_t t0;
    if (b->o.check) { /* new bytes each iteration; wait until the targets cleared theirs */
        for (p = first; p <= last && seq > 0 && !rc; p++) rc = efax_wait_imm(&b->ctx, p, TAG_READY, (uint32_t)seq - 1, 1, -1);
        b->src->ops->fill(b->src, 0, size * (uint64_t)W, b->me, seq);
    }
    t0 = efax_now_ns();
    for (p = first; p <= last && !rc; p++)
        for (m = 0; m < W && !rc; m++)
            rc = efax_write(&b->ctx, &b->xs[(p - first) * W + m], p, mode, seq * (uint64_t)W + (uint64_t)(m + b->me), &b->src->mr,
                            (uint64_t)m * size, &b->dst->mr, (uint64_t)m * size, size, efax_opts_chunk(&b->o, &b->ctx, b->dst), TAG_MSG(b, m), (uint32_t)seq, NULL);
    for (p = first; p <= last && !rc; p++) rc = efax_wait_imm(&b->ctx, p, TAG_ACK, (uint32_t)seq, 1, -1);
    *us = (double)(efax_now_ns() - t0) / 1e3;
    for (p = 0; p < (last - first + 1) * W && !rc; p++) rc = efax_wait(&b->ctx, &b->xs[p], -1);
    return rc;
}

/* A target, one iteration: take every message from `from` (counting its chunks, or copying
   staged cells in as they land), confirm, then (with -c) check and clear. Message m of the
   window comes under its own tag, so a staged target knows which cell is which. */
static int target_iter(bench *b, int from, efax_mode mode, uint64_t size, uint64_t seq, int64_t *wrong) {
    uint64_t bytes = size * (uint64_t)b->o.window;
    efax_expect *ex = b->ex;
    int rc = 0, m;
    for (m = 0; m < b->o.window && !rc; m++)
        rc = efax_expect_write(&b->ctx, &ex[m], &b->dst->mr, (uint64_t)m * size, size, from, efax_ctx_peer_nnics(&b->ctx, from),
                               mode, seq * (uint64_t)b->o.window + (uint64_t)(m + from), efax_opts_chunk(&b->o, &b->ctx, b->dst), TAG_MSG(b, m), (uint32_t)seq);
    for (m = 0; m < b->o.window && !rc; m++) rc = efax_expect_wait(&b->ctx, &ex[m], -1);
    if (!rc) rc = efax_notify(&b->ctx, from, TAG_ACK, (uint32_t)seq);
    if (!rc && b->o.check) {
        *wrong += (int64_t)b->dst->ops->check(b->dst, 0, bytes, from, seq);
        b->dst->ops->poison(b->dst, 0, bytes);
        rc = efax_notify(&b->ctx, from, TAG_READY, (uint32_t)seq);
    }
    return rc;
}

/* One (size, mode) step; every rank calls it with its role: it writes to ranks first..last
   (none when first > last) and/or receives from rank `from` (none when < 0). */
static int step(bench *b, int first, int last, int from, efax_mode mode, uint64_t size, int *nlat, int64_t *wrong) {
    int iters = efax_opts_iters(&b->o, size), warm = efax_opts_warmup(&b->o, size), rc = 0;
    if (b->o.check && from >= 0) b->dst->ops->poison(b->dst, 0, size * (uint64_t)b->o.window);
    if ((rc = efax_boot_barrier(&b->boot, EFAX_TURN_MS))) return rc; /* wait for our turn */
    for (int it = -warm; it < iters && !rc; it++) {
        uint64_t seq = (uint64_t)(it + warm);
        double us;
        if (first <= last) {
            rc = writer_iter(b, first, last, mode, size, seq, &us);
            if (it >= 0) b->lat[(*nlat)++] = us;
        } else if (from >= 0) {
            rc = target_iter(b, from, mode, size, seq, wrong);
        }
    }
    /* the targets' last "cleared" notices belong to this step: consume them */
    for (int p = first; b->o.check && p <= last && !rc; p++)
        rc = efax_wait_imm(&b->ctx, p, TAG_READY, (uint32_t)(iters + warm - 1), 1, -1);
    return rc;
}

/* The full-node report: every writer's bandwidth, each host's sum, the aggregate. Rank 0. */
static void report_pairs(bench *b, efax_result *res, int iters, uint64_t size, double line) {
    int h = b->n / 2;
    size_t u = strlen(res->extra);
    double sum = 0, host_sum = 0;
    printf("#   %s %llu bytes:", res->variant, (unsigned long long)size);
    u += (size_t)snprintf(res->extra + u, sizeof res->extra - u, "\"ranks\":[");
    for (int w = 0; w < h; w++) {
        double t = 0, g;
        for (int it = 0; it < iters; it++) t += b->all[(size_t)w * (size_t)iters + (size_t)it];
        g = t > 0 ? (double)size * (double)b->o.window * iters * 8 / (t * 1e3) : 0;
        sum += g;
        printf(" rank %d (%s) %.3f Gbps", w, b->boot.hosts[w], g);
        u += (size_t)snprintf(res->extra + u, sizeof res->extra - u, "%s{\"rank\":%d,\"host\":\"%s\",\"gbps\":%.6g}",
                              w ? "," : "", w, b->boot.hosts[w], g);
        if (w + 1 == h || strcmp(b->boot.hosts[w + 1], b->boot.hosts[w])) { /* last writer of its host */
            host_sum += g;
            printf("; host %s %.3f Gbps", b->boot.hosts[w], host_sum);
            if (line > 0) printf(" = %.1f%% of the rails it used", 100 * host_sum / line);
            host_sum = 0;
        } else {
            host_sum += g;
        }
    }
    snprintf(res->extra + u, sizeof res->extra - u, "]");
    printf("; all %.3f Gbps\n", sum);
}

int main(int argc, char **argv) {
    bench b;
    efax_ctx_desc cd;
    efax_boot_desc bd;
    efax_optdef extra[] = {
        {"targets", 0, EFAX_OPT_CHOICE, &b.targets, 0, 0, "one|all|pairs", "WHICH", "one: rank 0 -> each rank in turn (default); all: every rank at once; pairs: rank i -> i + n/2, all at once"},
        {NULL, 0, (efax_opt_type)0, NULL, 0, 0, NULL, NULL, NULL}};
    char err[256], names[64];
    int rc;
    uint64_t sweeps = 0, t_start;

    /* 1. options */
    memset(&b, 0, sizeof b);
    b.targets = "one";
    efax_opts_init(&b.o);
    b.o.min_size = 4096;
#ifdef __CUDACC__
    b.o.mem = "all"; /* host, pinned and device memory */
#endif
    rc = efax_opts_parse(&b.o, argc, argv, extra, "write",
                         "One-sided WRITE with immediate data from rank 0 to the other ranks; the targets count chunks.", err, sizeof err);
    if (rc == 1) return 0;
    if (rc) { fprintf(stderr, "write: %s\n", err); return 2; }
#ifdef __CUDACC__
    rc = efax_cuda_mem_select(b.o.mem, b.kinds, 3, &b.nk, err, sizeof err);
#else
    rc = efax_mem_select(b.o.mem, b.kinds, 3, &b.nk, err, sizeof err);
#endif
    if (rc < 0) { fprintf(stderr, "write: %s\n", err); return 2; }
    if (!b.nk) { printf("# %s\n", err); return 0; }

    /* 2. launcher, NICs, connections */
    memset(&bd, 0, sizeof bd);
    bd.timeout_ms = b.o.timeout_ms;
    if ((rc = efax_boot_init(&b.boot, &bd))) return efax_exit_code(rc);
    b.me = b.boot.rank;
    b.n = b.boot.size;
    if (b.n < 2) { fprintf(stderr, "write: needs at least 2 ranks (e.g. mpirun -np 2 %s)\n", argv[0]); efax_boot_deinit(&b.boot); return 2; }
    if (err[0] && b.me == 0) printf("# %s\n", err); /* kinds this machine cannot run */
    if (!strcmp(b.targets, "pairs") && b.n % 2) { fprintf(stderr, "write: --targets pairs needs an even number of ranks (%d)\n", b.n); efax_boot_deinit(&b.boot); return 2; }
    memset(&cd, 0, sizeof cd);
    cd.provider = b.o.provider;
    cd.nics = b.o.nics;
    cd.local_rank = b.boot.local_rank;
    cd.timeout_ms = b.o.timeout_ms;
    cd.efa_shm = b.o.efa_shm, cd.no_cuda_api = b.o.no_cuda_api;
    cd.imm_tags = TAG_DATA + b.nk * b.o.window > 64 ? TAG_DATA + b.nk * b.o.window : 64;
#ifdef __CUDACC__
    if ((rc = efax_cuda_use(b.kinds, b.nk, b.boot.local_rank, &cd.hmem))) goto out; /* this rank's GPU */
    efax_cuda_near(&cd); /* device memory: the NICs nearest this GPU */
#endif
    if ((rc = efax_ctx_init(&b.ctx, &cd)) || (rc = efax_ctx_connect(&b.ctx, &b.boot)) || (rc = efax_ctx_warmup(&b.ctx))) goto out;

    /* 3. buffers of every memory kind: rank 0's source, every target's window, each registered
          with only the rights it needs */
    for (b.k = 0; b.k < b.nk; b.k++) {
        size_t bytes = (size_t)b.o.max_size * (size_t)b.o.window;
        if ((rc = efax_buf_alloc(&b.ctx, &b.srcs[b.k], b.kinds[b.k], bytes, EFAX_MR_WRITE_SRC)) ||
            (rc = efax_buf_alloc(&b.ctx, &b.dsts[b.k], b.kinds[b.k], bytes, EFAX_MR_WRITE_DST)) ||
            (rc = efax_mr_exchange(&b.dsts[b.k].mr, &b.boot)))
            goto out;
        b.dst = &b.dsts[b.k];
        for (int m = 0; m < b.o.window && !rc; m++) rc = efax_expect_prepare(&b.ctx, &b.dst->mr, TAG_MSG(&b, m));
        if (rc) goto out;
    }
    b.xs = (efax_xfer *)calloc((size_t)b.n * (size_t)b.o.window, sizeof *b.xs);
    b.lat = (double *)calloc((size_t)efax_opts_iters(&b.o, b.o.min_size) * (size_t)b.n, sizeof *b.lat);
    b.all = (double *)calloc((size_t)efax_opts_iters(&b.o, b.o.min_size) * (size_t)b.n, sizeof *b.all);
    b.ex = (efax_expect *)calloc((size_t)b.o.window, sizeof *b.ex);
    if (!b.xs || !b.lat || !b.all || !b.ex) { rc = -FI_ENOMEM; goto out; }
    if ((rc = efax_report_init(&b.rep, &b.o, "write", efax_mem_names(b.kinds, b.nk, names, sizeof names), &b.ctx, &b.boot))) goto out;
#ifdef __CUDACC__
    if (efax_cuda_wants_hmem(b.kinds, b.nk) && (rc = efax_cuda_ceiling(&b.rep, &b.boot, 256u << 20))) goto out;
#endif

    /* 4. the sweep: every size, every mode; targets one at a time (results over all pairs) or all at once */
    t_start = efax_now_ns();
    do {
        for (uint64_t size = b.o.min_size; size && !rc; size = efax_opts_next_size(&b.o, size))
            for (int mode = 0; mode < EFAX_MODE_COUNT && !rc; mode++)
            for (b.k = 0; b.k < b.nk && !rc && (b.o.modes & (1u << mode)); b.k++) {
                int nlat = 0, all = !strcmp(b.targets, "all"), pairs = !strcmp(b.targets, "pairs"), h = b.n / 2;
                int iters = efax_opts_iters(&b.o, size), writers = pairs ? h : 1;
                int64_t wrong = 0, total = 0;
                char label[40];
                double line;
                efax_result res;
                b.src = &b.srcs[b.k], b.dst = &b.dsts[b.k];
                efax_ctx_stats_reset(&b.ctx);
                efax_report_progress(&b.rep, "%s %llu bytes", efax_mode_label((efax_mode)mode), (unsigned long long)size);
                if (pairs) /* every rank of the first half writes to its counterpart at once */
                    rc = step(&b, b.me < h ? b.me + h : 1, b.me < h ? b.me + h : 0, b.me < h ? -1 : b.me - h, (efax_mode)mode, size, &nlat, &wrong);
                else
                    for (int k = 1; k < b.n && !rc; k = all ? b.n : k + 1)
                        rc = step(&b, b.me == 0 ? k : 1, b.me == 0 ? (all ? b.n - 1 : k) : 0,
                                  b.me != 0 && (all || b.me == k) ? 0 : -1, (efax_mode)mode, size, &nlat, &wrong);
                if (!rc) rc = efax_boot_sum(&b.boot, wrong, &total, EFAX_TURN_MS);
                if (!rc && pairs) rc = efax_boot_allgather(&b.boot, b.lat, sizeof(double) * (size_t)iters, b.all, EFAX_TURN_MS);
                if (rc || b.me != 0) continue;
                if (pairs) /* an iteration lasts as long as its slowest writer */
                    for (int it = 0; it < iters; it++)
                        for (int w = 0; w < h; w++)
                            if (b.all[(size_t)w * (size_t)iters + (size_t)it] > b.lat[it]) b.lat[it] = b.all[(size_t)w * (size_t)iters + (size_t)it];
                snprintf(label, sizeof label, "%s%s", efax_mode_label((efax_mode)mode), b.kinds[b.k]->label);
                line = efax_line_rate(&b.ctx, &b.o, mode == EFAX_MODE_SINGLE ? 1 : efax_ctx_nnics(&b.ctx));
                efax_result_init(&res, label, b.kinds[b.k]->name, b.src->path, "oneway", size, b.o.window, pairs ? h : all ? b.n - 1 : 1);
                efax_result_time(&res, b.lat, pairs ? iters : nlat, size * (uint64_t)b.o.window * (uint64_t)(all ? b.n - 1 : writers),
                                 line * writers);
                if (pairs) report_pairs(&b, &res, iters, size, line * (b.boot.local_size > 0 ? b.boot.local_size : 1));
                res.wrong = b.o.check ? total : -1;
                efax_result_nics(&res, &b.ctx);
                efax_report_add(&b.rep, &res);
                if (b.k == b.nk - 1 && (mode == EFAX_MODE_COUNT - 1 || !(b.o.modes >> (mode + 1)))) efax_report_row(&b.rep);
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
    if (!rc) rc = efax_report_status(&b.rep);
    efax_report_deinit(&b.rep);
out:
    for (int k = 0; k < 3; k++) efax_buf_free(&b.srcs[k]), efax_buf_free(&b.dsts[k]);
    efax_ctx_deinit(&b.ctx);
    efax_boot_deinit(&b.boot);
    free(b.xs);
    free(b.lat);
    free(b.all);
    free(b.ex);
    return efax_exit_code(rc);
}
