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
#include "efax_bench.h"

#include <string.h>

enum { TAG_ACK = 1, TAG_READY = 2, TAG_DATA = 3, MAX_CMDS = 128 }; /* command c: tag TAG_DATA + c (staged targets tell cells apart) */
enum { CPU = 0, NBI = 1, BLOCKING = 2, NVARIANTS = 3 };

/* The producers: block b writes commands b*per .. b*per+per-1 of `size` bytes (the same offset both sides) as efax_block_put_nbi does (blocking: efax_put). */
__global__ void k_puts(efax_proxy_dev p, int per, uint64_t size, int dst, uint32_t seq, uint32_t flags, int blocking) {
    __shared__ efax_producer me;
    if (threadIdx.x == 0) efax_producer_begin(&p, &me, blockIdx.x);
    for (int i = 0; i < per; i++) {
        uint64_t c = (uint64_t)blockIdx.x * per + i, off = c * size;
        __syncthreads();
        if (threadIdx.x == 0) efax_put_nbi(&p, &me, dst, off, off, size, TAG_DATA + (int)c, seq, flags);
        if (threadIdx.x == 0 && blocking) efax_quiet(&p, &me);
        __syncthreads();
    }
    efax_block_quiet(&p, &me);
}

typedef struct run {
    efax_bench b;
    efax_bench_step st;
    efax_buf *src, *dst;       /* every command's region */
    efax_proxy px;             /* rank 0's */
    efax_xfer xs[MAX_CMDS];    /* the CPU's writes (rank 0); ex: rank 1's expectations */
    efax_expect ex[MAX_CMDS];
    double *lat;
    int producers, active, cmds, v; /* active: producers this size uses; cmds: commands per iteration; v: the variant */
    uint64_t budget;           /* --bytes */
    cudaStream_t stream;
} run;

/* Command c of iteration seq from rank 0 to rank 1, as the CPU writer and the target describe it:
   index 0, as the proxy thread plans the GPU's commands (Single and Split do not rotate). */
static const efax_write_desc *cmd(const run *r, efax_write_desc *w, int c, uint32_t seq) {
    memset(w, 0, sizeof *w);
    w->from = 0, w->to = 1, w->size = r->st.size, w->mode = r->st.mode;
    w->src = &r->src->mr, w->dst = &r->dst->mr, w->src_off = w->dst_off = (uint64_t)c * r->st.size;
    w->chunk = efax_opts_chunk(&r->b.o, &r->b.ctx, r->dst, 0, 1), w->tag = TAG_DATA + c, w->seq = seq;
    return w;
}

/* Rank 0 waits for rank 1's notice (tag, seq): through the proxy thread in the GPU variants (it owns the context). */
static int notice(run *r, int tag, uint32_t seq) {
    if (r->v != CPU) efax_proxy_watch(&r->px, 1, tag, seq, 1);
    return r->v == CPU ? efax_wait_imm(&r->b.ctx, 1, tag, seq, 1, -1) : efax_proxy_watch_wait(&r->px, efax_ctx_timeout_ms(&r->b.ctx), NULL);
}

/* One iteration. Rank 0: the commands (CPU, or GPU producers + proxy), timed until rank 1 confirmed them all (*us, if given). Rank 1: takes them. */
static int iter(run *r, uint32_t seq, double *us, int64_t *wrong) {
    efax_write_desc w[MAX_CMDS];
    uint64_t t0, t1 = 0, bytes = r->st.size * (uint64_t)r->cmds;
    int rc = 0, gpu = r->v != CPU;
    for (int c = 0; r->b.rank == 1 && c < r->cmds; c++) cmd(r, &w[c], c, seq);
    if (r->b.rank == 1) return efax_bench_take(&r->b, r->ex, w, r->cmds, r->dst, bytes, TAG_ACK, TAG_READY, wrong);
    if (r->b.o.check) r->src->ops->fill(r->src, 0, bytes, 0, seq); /* fresh bytes, written */
    if (r->b.o.check && seq > 0 && (rc = notice(r, TAG_READY, seq - 1))) return rc; /* once rank 1 cleared the last */
    t0 = efax_now_ns();
    if (gpu) efax_proxy_watch(&r->px, 1, TAG_ACK, seq, 1); /* the proxy thread watches while the producers push */
    if (gpu) k_puts<<<r->active, 32, 0, r->stream>>>(efax_proxy_device(&r->px), r->cmds / r->active, r->st.size, 1, seq, r->st.mode == EFAX_MODE_SPLIT ? EFAX_PUT_SPLIT : 0, r->v == BLOCKING);
    if (gpu && (rc = EFAX_CUDA(cudaGetLastError()))) return rc;
    for (int c = 0; !gpu && c < r->cmds && !rc; c++) rc = efax_write(&r->b.ctx, &r->xs[c], cmd(r, &w[c], c, seq), NULL);
    if (!rc) rc = gpu ? efax_proxy_watch_wait(&r->px, efax_ctx_timeout_ms(&r->b.ctx), &t1) : notice(r, TAG_ACK, seq);
    if (!gpu) t1 = efax_now_ns(); /* the confirmation came */
    for (int c = 0; !gpu && c < r->cmds && !rc; c++) rc = efax_wait(&r->b.ctx, &r->xs[c], -1);
    if (gpu && EFAX_CUDA(cudaStreamSynchronize(r->stream)) && !rc) rc = -EFAX_E_CUDA;
    if (us) *us = (double)(t1 - t0) / 1e3;
    return rc;
}

/* Variant v at one (size, mode): budget/size commands (1..128, inside the window), whole ones per producer;
   the iterations (with the proxy thread running in the GPU variants), then the result. */
static int measure(run *r, int v) {
    static const char *const vname[] = {"CPU", "GPU-NBI", "GPU-Blocking"};
    efax_bench *b = &r->b;
    int cmds = (int)(r->budget / r->st.size), iters, warm, gpu = b->rank == 0 && v != CPU, rc, prc;
    uint64_t bytes;
    int64_t wrong = 0;
    efax_result res;
    cmds = cmds < 1 ? 1 : cmds > MAX_CMDS ? MAX_CMDS : cmds;
    r->v = v, r->active = cmds < r->producers ? cmds : r->producers, r->cmds = cmds / r->active * r->active;
    bytes = r->st.size * (uint64_t)r->cmds, iters = efax_opts_iters(&b->o, bytes), warm = efax_opts_warmup(&b->o, bytes);
    efax_ctx_stats_reset(&b->ctx);
    if (gpu && (rc = efax_proxy_start(&r->px))) return rc;
    if (b->o.check && b->rank == 1) r->dst->ops->poison(r->dst, 0, bytes);
    rc = efax_boot_barrier(&b->boot, EFAX_TURN_MS);
    for (int it = -warm; it < iters && !rc; it++) rc = iter(r, (uint32_t)(it + warm), it >= 0 ? &r->lat[it] : NULL, &wrong);
    if (!rc && b->rank == 0 && b->o.check) rc = notice(r, TAG_READY, (uint32_t)(iters + warm - 1)); /* this step's last */
    if (gpu && (prc = efax_proxy_stop(&r->px, efax_ctx_timeout_ms(&b->ctx))) && !rc) rc = prc; /* refused commands fail it too */
    if (rc) return rc;
    efax_result_init(&res, vname[v], r->st.kind->name, r->src->path, EFAX_RESULT_ONEWAY, r->st.size, r->cmds, 1);
    if (r->st.mode == EFAX_MODE_SPLIT) strcat(res.variant, "Split"); /* "GPU-BlockingSplit" fits */
    efax_result_time(&res, r->lat, iters, bytes, efax_bench_line(b, r->st.mode));
    return efax_bench_record(b, &res, wrong);
}

/* The windows (every command's region, prepared for staging), and rank 0's proxy. */
static int setup(run *r) {
    efax_bench *b = &r->b;
    size_t window = r->budget > b->o.max_size ? r->budget : b->o.max_size;
    efax_proxy_desc pd = {};
    int rc = efax_bench_buf(b, b->kinds[0], window, EFAX_MR_WRITE_SRC, &r->src);
    if (!rc) rc = efax_bench_buf(b, b->kinds[0], window, EFAX_MR_WRITE_DST, &r->dst);
    for (int c = 0; c < MAX_CMDS && !rc; c++) rc = efax_expect_prepare(&b->ctx, &r->dst->mr, TAG_DATA + c);
    r->lat = (double *)efax_bench_calloc(b, (size_t)efax_opts_iters(&b->o, b->o.min_size), sizeof(double));
    if (rc || !r->lat || (rc = EFAX_CUDA(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking)))) return rc ? rc : -FI_ENOMEM;
    pd.ctx = &b->ctx, pd.src = r->src, pd.dst = &r->dst->mr, pd.producers = (uint32_t)r->producers, pd.chunk = efax_opts_chunk(&b->o, &b->ctx, r->dst, 0, 1);
    cudaGetDevice(&pd.device); /* efax_bench_connect made this rank's GPU current */
    return b->rank == 0 ? efax_proxy_init(&r->px, &pd) : 0;
}

int main(int argc, char **argv) {
    run r;
    efax_bench_desc d;
    efax_optdef extra[] = {
        {"producers", 'p', EFAX_OPT_INT, &r.producers, 1, 1024, NULL, "N", "GPU blocks pushing commands (default 8)"},
        {"bytes", 0, EFAX_OPT_SIZE, &r.budget, 4096, 68719476736.0, NULL, "SIZE", "bytes per iteration: commands = bytes/size, 1..128 (default 256M)"}, EFAX_OPT_END};
    int rc;
    memset(&r, 0, sizeof r), memset(&d, 0, sizeof d);
    r.producers = 8, r.budget = 256ull << 20;
    d.driver = "proxy", d.extra = extra, d.min_size = 64 << 10, d.max_size = 256 << 20, d.mem = "dma", d.min_ranks = d.max_ranks = 2;
    d.one_kind = d.gpu = true, d.about = "GPU-initiated writes through a CPU proxy, against CPU-initiated writes.";
    rc = efax_bench_open(&r.b, &d, argc, argv); /* options, one memory kind (device memory by default), 2 ranks */
    if (!rc) rc = efax_bench_connect(&r.b, TAG_DATA + MAX_CMDS);
    if (!rc) r.b.o.modes = 1u << EFAX_MODE_SINGLE | (efax_ctx_nnics(&r.b.ctx) > 1 ? 1u << EFAX_MODE_SPLIT : 0u); /* not --mode: Split with several NICs */
    if (!rc) rc = setup(&r);
    if (!rc) rc = efax_bench_begin(&r.b, NULL); /* the report's header, the GPU ceiling */
    while (!rc && efax_bench_next(&r.b, &r.st, &rc)) /* every size and mode; each variant there */
        for (int v = CPU; v < NVARIANTS && !rc; v++) rc = measure(&r, v);
    if (r.b.rank == 0) efax_proxy_deinit(&r.px);
    if (r.stream) cudaStreamDestroy(r.stream);
    return efax_bench_close(&r.b, rc);
}
