/* proxy — the "proxy" experiment: GPU-initiated RDMA writes through the CPU proxy of efax_cuda.h.
   Rank 0's GPU blocks (the producers) push write commands; its proxy thread, pinned near the GPU,
   posts them; rank 1 counts every command's chunks, confirms, and (with -c) checks every byte
   of every command's region. Per size, in the same run:
     CPU            the same commands written by the CPU directly (the baseline)
     GPU-NBI        put_nbi for every command, one quiet at the end of the kernel
     GPU-Blocking   put (quiet after every command): each producer waits for its write
   each on one NIC and, with several NICs, split over all of them ("...Split").

   nvcc -O2 -arch=sm_90 -I. drivers/proxy.cu -o proxy $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix -ldl
   mpirun -np 2 ./proxy -b 64K -e 256M -c
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* command c of an iteration goes under its own tag, so staged targets tell the cells apart */
enum { TAG_ACK = 1, TAG_READY = 2, TAG_DATA = 3, MAX_CMDS = 128 };
enum { CPU = 0, NBI = 1, BLOCKING = 2, NVARIANTS = 3 };

/* The producers: block b writes commands b*per .. b*per+per-1, each `size` bytes at the same
   offset in source and destination. */
__global__ void k_puts(efax_proxy_dev p, int per, uint64_t size, int dst, uint32_t seq, uint32_t flags, int blocking) {
    __shared__ efax_producer me;
    if (threadIdx.x == 0) efax_producer_begin(&p, &me, blockIdx.x);
    for (int i = 0; i < per; i++) {
        uint64_t c = (uint64_t)blockIdx.x * per + i, off = c * size;
        if (blocking) {
            __syncthreads();
            if (threadIdx.x == 0) efax_put(&p, &me, dst, off, off, size, TAG_DATA + (int)c, seq, flags);
            __syncthreads();
        } else {
            efax_block_put_nbi(&p, &me, dst, off, off, size, TAG_DATA + (int)c, seq, flags);
        }
    }
    efax_block_quiet(&p, &me);
}

typedef struct bench {
    efax_opts o;
    efax_boot boot;
    efax_ctx ctx;
    efax_report rep;
    efax_buf src, dst;
    efax_proxy px;
    efax_xfer xs[MAX_CMDS];
    efax_expect ex[MAX_CMDS];
    double *lat;
    int me, producers, active, device;  /* active: producers this size uses */
    cudaStream_t stream;
} bench;

/* Rank 0 waits for rank 1's notice (tag, seq): through the proxy thread while it owns the context. */
static int wait_notice(bench *b, int variant, int tag, uint32_t seq, uint64_t *t) {
    int rc;
    if (variant == CPU) {
        rc = efax_wait_imm(&b->ctx, 1, tag, seq, 1, -1);
        *t = efax_now_ns();
        return rc;
    }
    efax_proxy_watch(&b->px, 1, tag, seq, 1);
    return efax_proxy_watch_wait(&b->px, b->ctx.timeout_ms, t);
}

/* One iteration on rank 0: `cmds` writes of `size` bytes, timed until rank 1 confirmed them all. */
static int writer_iter(bench *b, int variant, efax_mode mode, int cmds, uint64_t size, uint32_t seq, double *us) {
    int rc = 0;
    uint64_t t0, t1 = 0;
    if (b->o.check) { /* fresh bytes; rank 1 cleared its window after the last iteration */
        b->src.ops->fill(&b->src, 0, size * (uint64_t)cmds, 0, seq);
        if (seq > 0 && (rc = wait_notice(b, variant, TAG_READY, seq - 1, &t0))) return rc;
    }
    t0 = efax_now_ns();
    if (variant == CPU) {
        for (int c = 0; c < cmds && !rc; c++)
            rc = efax_write(&b->ctx, &b->xs[c], 1, mode, (uint64_t)c, &b->src.mr, (uint64_t)c * size, &b->dst.mr, (uint64_t)c * size,
                            size, efax_opts_chunk(&b->o, &b->ctx, &b->dst), TAG_DATA + c, seq, NULL);
        if (!rc) rc = wait_notice(b, variant, TAG_ACK, seq, &t1);
        for (int c = 0; c < cmds && !rc; c++) rc = efax_wait(&b->ctx, &b->xs[c], -1);
    } else {
        efax_proxy_watch(&b->px, 1, TAG_ACK, seq, 1);
        k_puts<<<b->active, 32, 0, b->stream>>>(efax_proxy_device(&b->px), cmds / b->active, size, 1, seq,
                                                  mode == EFAX_MODE_SPLIT ? EFAX_PUT_SPLIT : 0, variant == BLOCKING);
        if ((rc = EFAX_CUDA(cudaGetLastError()))) return rc;
        rc = efax_proxy_watch_wait(&b->px, b->ctx.timeout_ms, &t1);
        if (EFAX_CUDA(cudaStreamSynchronize(b->stream)) && !rc) rc = -EFAX_E_CUDA;
    }
    *us = (double)(t1 - t0) / 1e3;
    return rc;
}

/* One iteration on rank 1: take every command, confirm, then (with -c) check and clear. */
static int target_iter(bench *b, efax_mode mode, int cmds, uint64_t size, uint32_t seq, int64_t *wrong) {
    int rc = 0;
    for (int c = 0; c < cmds && !rc; c++)
        rc = efax_expect_write(&b->ctx, &b->ex[c], &b->dst.mr, (uint64_t)c * size, size, 0, efax_ctx_peer_nnics(&b->ctx, 0), mode,
                               (uint64_t)c, efax_opts_chunk(&b->o, &b->ctx, &b->dst), TAG_DATA + c, seq);
    for (int c = 0; c < cmds && !rc; c++) rc = efax_expect_wait(&b->ctx, &b->ex[c], -1);
    if (!rc) rc = efax_notify(&b->ctx, 0, TAG_ACK, seq);
    if (!rc && b->o.check) {
        *wrong += (int64_t)b->dst.ops->check(&b->dst, 0, size * (uint64_t)cmds, 0, seq);
        b->dst.ops->poison(&b->dst, 0, size * (uint64_t)cmds);
        rc = efax_notify(&b->ctx, 0, TAG_READY, seq);
    }
    return rc;
}

int main(int argc, char **argv) {
    static const char *const vname[] = {"CPU", "GPU-NBI", "GPU-Blocking"};
    bench b;
    efax_ctx_desc cd;
    efax_boot_desc bd;
    efax_proxy_desc pd;
    const efax_mem_ops *kinds[3];
    uint64_t budget = 256ull << 20, window;
    int rc, nk = 0;
    char err[256];
    efax_optdef extra[] = {
        {"producers", 'p', EFAX_OPT_INT, &b.producers, 1, 1024, NULL, "N", "GPU blocks pushing commands (default 8)"},
        {"bytes", 0, EFAX_OPT_SIZE, &budget, 4096, 68719476736.0, NULL, "SIZE", "bytes per iteration: commands = bytes/size, 1..128 (default 256M)"},
        {NULL, 0, (efax_opt_type)0, NULL, 0, 0, NULL, NULL, NULL}};

    /* 1. options: one memory kind (device memory by default), sizes 64K..256M */
    memset(&b, 0, sizeof b);
    b.producers = 8;
    efax_opts_init(&b.o);
    b.o.min_size = 64 << 10;
    b.o.max_size = 256 << 20;
    b.o.mem = "dma";
    rc = efax_opts_parse(&b.o, argc, argv, extra, "proxy", "GPU-initiated writes through a CPU proxy, against CPU-initiated writes.", err, sizeof err);
    if (rc == 1) return 0;
    if (rc) { fprintf(stderr, "proxy: %s\n", err); return 2; }
    rc = efax_cuda_mem_select(b.o.mem, kinds, 3, &nk, err, sizeof err);
    if (rc < 0 || nk > 1) { fprintf(stderr, "proxy: %s\n", rc < 0 ? err : "--mem: name one memory kind (host, pin or dma)"); return 2; }
    if (!efax_cuda_devices(err, sizeof err)) { printf("proxy: skipped: no CUDA device (%s)\n", err); return 0; }

    /* 2. launcher, this rank's GPU, NICs, connections */
    memset(&bd, 0, sizeof bd);
    bd.timeout_ms = b.o.timeout_ms;
    if ((rc = efax_boot_init(&b.boot, &bd))) return efax_exit_code(rc);
    b.me = b.boot.rank;
    if (b.boot.size != 2) { fprintf(stderr, "proxy: needs exactly 2 ranks (mpirun -np 2 %s)\n", argv[0]); efax_boot_deinit(&b.boot); return 2; }
    memset(&cd, 0, sizeof cd);
    cd.provider = b.o.provider;
    cd.nics = b.o.nics;
    cd.local_rank = b.boot.local_rank;
    cd.timeout_ms = b.o.timeout_ms;
    cd.efa_shm = b.o.efa_shm, cd.no_cuda_api = b.o.no_cuda_api;
    cd.imm_tags = TAG_DATA + MAX_CMDS;
    if ((rc = efax_cuda_use(kinds, nk, b.boot.local_rank, &cd.hmem))) goto out;
    efax_cuda_near(&cd); /* device memory: the NICs nearest this GPU */
    cudaGetDevice(&b.device);
    if ((rc = efax_ctx_init(&b.ctx, &cd)) || (rc = efax_ctx_connect(&b.ctx, &b.boot)) || (rc = efax_ctx_warmup(&b.ctx))) goto out;

    /* 3. the windows (every command's region), and rank 0's proxy */
    window = budget > b.o.max_size ? budget : b.o.max_size;
    if ((rc = efax_buf_alloc(&b.ctx, &b.src, kinds[0], window, EFAX_MR_WRITE_SRC)) ||
        (rc = efax_buf_alloc(&b.ctx, &b.dst, kinds[0], window, EFAX_MR_WRITE_DST)) || (rc = efax_mr_exchange(&b.dst.mr, &b.boot)))
        goto out;
    for (int c = 0; c < MAX_CMDS && !rc; c++) rc = efax_expect_prepare(&b.ctx, &b.dst.mr, TAG_DATA + c);
    b.lat = (double *)calloc((size_t)efax_opts_iters(&b.o, b.o.min_size), sizeof(double));
    if (rc || !b.lat || (rc = EFAX_CUDA(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking)))) goto out;
    memset(&pd, 0, sizeof pd);
    pd.ctx = &b.ctx, pd.src = &b.src, pd.dst = &b.dst.mr, pd.producers = (uint32_t)b.producers, pd.chunk = efax_opts_chunk(&b.o, &b.ctx, &b.dst), pd.device = b.device;
    if (b.me == 0 && (rc = efax_proxy_init(&b.px, &pd))) goto out;
    if ((rc = efax_report_init(&b.rep, &b.o, "proxy", kinds[0]->name, &b.ctx, &b.boot))) goto out;
    if (kinds[0] == efax_mem_device() && (rc = efax_cuda_ceiling(&b.rep, &b.boot, 256u << 20))) goto out;

    /* 4. the sweep: every size, every variant, each mode (Single; Split with several NICs) */
    for (uint64_t size = b.o.min_size; size && !rc; size = efax_opts_next_size(&b.o, size)) {
        /* budget/size commands (1..128, inside the window), whole ones per producer */
        int cmds = (int)(budget / size);
        cmds = cmds < 1 ? 1 : cmds > MAX_CMDS ? MAX_CMDS : cmds;
        b.active = cmds < b.producers ? cmds : b.producers;
        cmds = cmds / b.active * b.active;
        for (int mode = EFAX_MODE_SINGLE; mode <= EFAX_MODE_SPLIT && !rc; mode++)
            for (int v = CPU; v < NVARIANTS && !rc && (mode == EFAX_MODE_SINGLE || efax_ctx_nnics(&b.ctx) > 1); v++) {
                int iters = efax_opts_iters(&b.o, size * (uint64_t)cmds), warm = efax_opts_warmup(&b.o, size * (uint64_t)cmds);
                int64_t wrong = 0, total = 0;
                char label[40];
                efax_result res;
                efax_ctx_stats_reset(&b.ctx);
                if (b.me == 0 && v != CPU && (rc = efax_proxy_start(&b.px))) break;
                if (b.o.check && b.me == 1) b.dst.ops->poison(&b.dst, 0, size * (uint64_t)cmds);
                if (!rc) rc = efax_boot_barrier(&b.boot, EFAX_TURN_MS);
                for (int it = -warm; it < iters && !rc; it++) {
                    uint32_t seq = (uint32_t)(it + warm);
                    double us = 0;
                    if (b.me == 0) rc = writer_iter(&b, v, (efax_mode)mode, cmds, size, seq, &us);
                    else rc = target_iter(&b, (efax_mode)mode, cmds, size, seq, &wrong);
                    if (it >= 0) b.lat[it] = us;
                }
                if (!rc && b.me == 0 && b.o.check) { /* the last "cleared" notice belongs to this step */
                    uint64_t t;
                    rc = wait_notice(&b, v, TAG_READY, (uint32_t)(iters + warm - 1), &t);
                }
                if (b.me == 0 && v != CPU) {
                    int prc = efax_proxy_stop(&b.px, b.ctx.timeout_ms);
                    if (!rc) rc = prc;
                    if (b.px.bad || b.px.fence_violations) { fprintf(stderr, "proxy: %llu bad command(s)\n", (unsigned long long)b.px.bad); rc = rc ? rc : -EFAX_E_PEER; }
                }
                if (!rc) rc = efax_boot_sum(&b.boot, wrong, &total, EFAX_TURN_MS);
                if (rc || b.me != 0) continue;
                snprintf(label, sizeof label, "%s%s", vname[v], mode == EFAX_MODE_SPLIT ? "Split" : "");
                efax_result_init(&res, label, kinds[0]->name, b.src.path, "oneway", size, cmds, 1);
                efax_result_time(&res, b.lat, iters, size * (uint64_t)cmds,
                                 efax_line_rate(&b.ctx, &b.o, mode == EFAX_MODE_SINGLE ? 1 : efax_ctx_nnics(&b.ctx)));
                res.wrong = b.o.check ? total : -1;
                efax_result_nics(&res, &b.ctx);
                efax_report_add(&b.rep, &res);
            }
        efax_report_row(&b.rep);
    }
    if (!rc) rc = efax_report_status(&b.rep);
    efax_report_deinit(&b.rep);
out:
    if (b.me == 0) efax_proxy_deinit(&b.px);
    if (b.stream) cudaStreamDestroy(b.stream);
    efax_buf_free(&b.src);
    efax_buf_free(&b.dst);
    efax_ctx_deinit(&b.ctx);
    efax_boot_deinit(&b.boot);
    free(b.lat);
    return efax_exit_code(rc);
}
