/* proxy — the "proxy" experiment: GPU-initiated RDMA writes through the CPU proxy of efax_cuda.h.
   Rank 0's GPU blocks (the producers) push write commands; its proxy thread, pinned near the GPU,
   posts them; rank 1 counts every command's chunks, confirms, and (with -c) checks every byte
   of every command's region. Per size, in the same run:
     CPU            the same commands written by the CPU directly (the baseline)
     GPU-NBI        put_nbi for every command, one quiet at the end of the kernel
     GPU-Blocking   put (quiet after every command): each producer waits for its write
   each on one NIC and, with several NICs, split over all of them ("...Split"). The harness runs
   both sides (efax_bench_exchange); in the GPU variants rank 0's writes and waits go through the
   proxy, whose thread drives the context meanwhile.

   nvcc -O2 -arch=sm_90 -I. drivers/proxy.cu -o proxy \
       $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix -ldl
   mpirun -np 2 ./proxy -b 64K -e 256M -c
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_cuda.h"
#include "efax_bench.h"

#include <string.h>

enum { MAX_CMDS = 128, CPU = 0, NBI = 1, BLOCKING = 2, NVARIANTS = 3 };

/* The producers: block b pushes commands b*per .. b*per+per-1 as the harness described them (command c:
   `size` bytes at c * size on both sides, tag tag0 + c * tag_step), as efax_block_put_nbi does (blocking:
   efax_put). */
__global__ void k_puts(efax_proxy_dev p, int per, uint64_t size, int dst, int tag0, int tag_step,
                       uint32_t seq, uint32_t flags, int blocking) {
    __shared__ efax_producer me;
    if (threadIdx.x == 0) efax_producer_begin(&p, &me, blockIdx.x);
    for (int i = 0; i < per; i++) {
        uint64_t c = (uint64_t)blockIdx.x * per + i, off = c * size;
        __syncthreads();
        if (threadIdx.x == 0)
            efax_put_nbi(&p, &me, dst, off, off, size, tag0 + (int)c * tag_step, seq, flags);
        if (threadIdx.x == 0 && blocking) efax_quiet(&p, &me);
        __syncthreads();
    }
    efax_block_quiet(&p, &me);
}

typedef struct run {
    efax_bench b;
    efax_bench_step st;
    efax_proxy px;            /* rank 0's */
    int producers, active, v; /* active: producers this size uses; v: the variant */
    uint64_t budget;          /* --bytes */
    cudaStream_t stream;
} run;

/* Rank 0 writes to rank 1. */
static bool writes(const void *user, int from, int to, int n) {
    (void)user;
    (void)n;
    return from == 0 && to == 1;
}

/* The GPU variants' writer: the producers push the commands, the proxy thread posts them. The
   confirmation is watched from before the kernel starts, so its time is the proxy thread's. */
static int gpu_post(void *user, const efax_write_desc *w, int n) {
    run *r = (run *)user;
    uint32_t flags = w[0].mode == EFAX_MODE_SPLIT ? EFAX_PUT_SPLIT : 0;
    int tag_step = n > 1 ? w[1].tag - w[0].tag : 0; /* the harness's: a tag a message, or one for all */
    efax_proxy_watch(&r->px, w[0].to, EFAX_BENCH_TAG_ACK, w[0].seq, 1);
    k_puts<<<r->active, 32, 0, r->stream>>>(efax_proxy_device(&r->px), n / r->active, w[0].size, w[0].to,
                                            w[0].tag, tag_step, w[0].seq, flags, r->v == BLOCKING);
    return EFAX_CUDA(cudaGetLastError());
}

/* Rank 0 waits for rank 1's notices through the proxy thread (it owns the context). */
static int gpu_wait(void *user, int peer, int tag, uint32_t seq, int timeout_ms, uint64_t *t_ns) {
    run *r = (run *)user;
    if (tag != EFAX_BENCH_TAG_ACK)
        efax_proxy_watch(&r->px, peer, tag, seq, 1); /* gpu_post watches for that one */
    return efax_proxy_watch_wait(&r->px, timeout_ms < 0 ? efax_ctx_timeout_ms(&r->b.ctx) : timeout_ms, t_ns);
}

static int gpu_finish(void *user) { return EFAX_CUDA(cudaStreamSynchronize(((run *)user)->stream)); }

/* Variant v at one (size, mode): budget/size commands (1..128, inside the window), whole ones per
   producer; the exchange (with the proxy thread running in the GPU variants), then the result. */
static int measure(run *r, int v) {
    static const char *const vname[] = {"CPU", "GPU-NBI", "GPU-Blocking"};
    efax_bench *b = &r->b;
    efax_bench_poster gpu = {gpu_post, gpu_wait, gpu_finish, r};
    efax_bench_moves mv = {writes, NULL, 0, 0, v == CPU ? NULL : &gpu};
    bool thread = b->rank == 0 && v != CPU;
    int cmds = (int)(r->budget / r->st.size), nlat = 0, rc, prc;
    efax_bench_step st = r->st;
    int64_t wrong = 0;
    efax_result res;
    cmds = cmds < 1 ? 1 : cmds > MAX_CMDS ? MAX_CMDS : cmds;
    r->v = v;
    r->active = cmds < r->producers ? cmds : r->producers;
    mv.msgs = cmds / r->active * r->active;
    st.iters = efax_opts_iters(&b->o, r->st.size * (uint64_t)mv.msgs);
    st.warmup = efax_opts_warmup(&b->o, r->st.size * (uint64_t)mv.msgs);
    efax_bench_variant(b, &st, vname[v]); /* its own NIC counters and progress line */
    if (thread && (rc = efax_proxy_start(&r->px))) return rc;
    rc = efax_bench_exchange(b, &st, &mv, b->lat, &nlat, &wrong);
    if (thread && (prc = efax_proxy_stop(&r->px, efax_ctx_timeout_ms(&b->ctx))) && !rc)
        rc = prc; /* refused commands fail it too */
    if (rc) return rc;
    efax_result_init(&res, vname[v], st.kind->name, b->xsrc[0]->path, EFAX_RESULT_ONEWAY, st.size, mv.msgs,
                     1);
    if (st.mode == EFAX_MODE_SPLIT) strcat(res.variant, "Split"); /* "GPU-BlockingSplit" fits */
    efax_result_time(&res, b->lat, st.iters, st.size * (uint64_t)mv.msgs, efax_bench_line(b, st.mode));
    return efax_bench_record(b, &res, wrong);
}

/* Rank 0's proxy over the exchange's buffers, and its stream. */
static int setup(run *r) {
    efax_bench *b = &r->b;
    efax_proxy_desc pd;
    int rc = EFAX_CUDA(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
    memset(&pd, 0, sizeof pd);
    pd.ctx = &b->ctx;
    pd.src = b->xsrc[0];
    pd.dst = &b->xdst[0]->mr;
    pd.producers = (uint32_t)r->producers;
    pd.chunk = b->o.chunk;     /* as the harness describes the writes (0: the library's policy) */
    cudaGetDevice(&pd.device); /* efax_bench_connect made this rank's GPU current */
    return rc || b->rank != 0 ? rc : efax_proxy_init(&r->px, &pd);
}

int main(int argc, char **argv) {
    run r;
    efax_bench_desc d;
    efax_bench_xchg x; /* up to 128 commands from rank 0 into one region of rank 1 */
    efax_optdef extra[] = {
        {"producers", 'p', EFAX_OPT_INT, &r.producers, 1, 1024, NULL, "N",
         "GPU blocks pushing commands (default 8)"},
        {"bytes", 0, EFAX_OPT_SIZE, &r.budget, 4096, 68719476736.0, NULL, "SIZE",
         "bytes per iteration: commands = bytes/size, 1..128 (default 256M)"},
        EFAX_OPT_END,
    };
    int rc;
    memset(&r, 0, sizeof r);
    memset(&d, 0, sizeof d);
    memset(&x, 0, sizeof x);
    r.producers = 8;
    r.budget = 256ull << 20;
    x.msgs = MAX_CMDS;
    d.driver = "proxy";
    d.no_staged = "device memory staged through host memory is EFAX_MEM_PATH=staged with --mem dma";
    d.about = "GPU-initiated writes through a CPU proxy, against CPU-initiated writes.";
    d.extra = extra;
    d.min_size = 64 << 10;
    d.max_size = 256 << 20;
    d.mem = "dma";
    d.min_ranks = 2;
    d.max_ranks = 2;
    d.one_kind = true;
    d.gpu = true;
    d.modes = 1u << EFAX_MODE_SINGLE | 1u << EFAX_MODE_SPLIT; /* Split with several NICs */
    d.xchg = &x;
    rc = efax_bench_open(&r.b, &d, argc,
                         argv); /* options, one memory kind (device memory by default), 2 ranks */
    x.bytes = r.budget > r.b.o.max_size ? r.budget : r.b.o.max_size; /* every command's region */
    if (!rc) rc = efax_bench_connect(&r.b);
    if (!rc) rc = setup(&r);
    if (!rc) rc = efax_bench_begin(&r.b, NULL);      /* the report's header, the GPU ceiling */
    while (!rc && efax_bench_next(&r.b, &r.st, &rc)) /* every size and mode; each variant there */
        for (int v = CPU; v < NVARIANTS && !rc; v++) rc = measure(&r, v);
    if (r.b.rank == 0) efax_proxy_deinit(&r.px);
    if (r.stream) cudaStreamDestroy(r.stream);
    return efax_bench_close(&r.b, rc);
}
