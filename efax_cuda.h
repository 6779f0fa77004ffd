/* efax_cuda.h — the CUDA half of efax: GPU memory over the fabric (dmabuf, FI_HMEM, or staged
   through pinned buffers), GPU<->NIC affinity, the GPU->CPU multi-producer queue, GPU-initiated
   writes through a CPU proxy (put, put_nbi, fence, quiet), and NVLink IPC between local GPUs.

   Use
   ---
   Include efax.h first, then this header, in a file compiled by nvcc; define EFAX_IMPLEMENTATION
   in exactly one such file (it implements both headers):

       #define EFAX_IMPLEMENTATION
       #include "efax.h"
       #include "efax_cuda.h"

       nvcc -O2 -arch=sm_90 -x cu -I. prog.c -o prog \
           $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix

   It links no CUDA driver library: driver entry points come through cudaGetDriverEntryPoint and
   NVML is opened at run time, so the same binary starts on a machine without a GPU (CI) and
   says "skipped: no CUDA device" for what needs one.

   How device memory reaches the NIC (efax_mem_device, in this order; every result says which):
     dmabuf  cuMemGetHandleForAddressRange + fi_mr_regattr(FI_MR_DMABUF, FI_HMEM_CUDA): EFA with
             libfabric >= 1.20 and a dmabuf-capable kernel (aws-ofi-nccl's practice)
     hmem    fi_mr_regattr(FI_HMEM_CUDA) by address (nvidia-peermem)
     staged  the provider cannot register device memory (Debian's libfabric has no CUDA: shm
             returns -FI_ENOSYS, tcp has no FI_HMEM): pinned host bounce buffers of the same size,
             copied cell by cell on CUDA streams so copies overlap the transfer (see efax.h
             "Staging").

   Troubleshooting
   ---------------
     - "skipped: no CUDA device": no GPU or no driver; the host variants still run.
     - staged when you expected dmabuf: `build/info` shows whether the provider offers FI_HMEM;
       libfabric must be built with CUDA (--with-cuda) and be >= 1.20 for dmabuf.
     - NVLink IPC fails to open a peer's handle: the GPUs must be in one process tree's view
       (same container) and peer access possible (`nvidia-smi topo -m`).
     - "no GPUDirect" (efa): efa found no GPU peer-to-peer support (nvidia-peermem or dmabuf),
       refused FI_OPT_CUDA_API_PERMITTED=false, and would copy device memory with CUDA; efax
       stages it instead and says so in every row (`--cuda-api` lets efa copy, knowingly).
     - EFAX_GDR_FLUSH=1 forces cudaDeviceFlushGPUDirectRDMAWrites before every read of device
       memory the NIC wrote (by default only on GPUs before Hopper with GPUDirect), 0 never.

   License: MIT (see efax.h).
*/
#ifndef EFAX_CUDA_H
#define EFAX_CUDA_H

#ifndef EFAX_H
#error "efax_cuda.h: include efax.h first"
#endif
#ifndef __CUDACC__
#error "efax_cuda.h needs a CUDA compiler: build with nvcc (nvcc -x cu for .c files)"
#endif

#include <cuda_runtime.h>
#include <cuda.h> /* types and enums only: functions come through cudaGetDriverEntryPoint */
#include <pthread.h>

// >>cuda basics --------------------------------------------------------------------------------

/* Number of CUDA devices usable here; 0 when there is no device or no driver (never an
   error), with the reason in why (may be NULL). Thread safe. */
EFAX_API int efax_cuda_devices(char *why, size_t len);

/* Makes device (local_rank mod devices) current for this thread; *device gets it. Returns 0,
   or -EFAX_E_CUDA when there is no device. */
EFAX_API int efax_cuda_bind(int local_rank, int *device);

/* Checks a CUDA call: returns 0, or logs "CALL failed: <CUDA's text> (code) at FILE:LINE" and
   returns -EFAX_E_CUDA. */
EFAX_API int efax_cuda_check(cudaError_t e, const char *call, const char *file, int line);
#define EFAX_CUDA(call) efax_cuda_check((call), #call, __FILE__, __LINE__)

// >>affinity -----------------------------------------------------------------------------------

/* One GPU as the affinity experiment shows it. */
typedef struct efax_gpu_info {
    int device;
    char name[96];
    char pci[16]; /* "0000:19:00.0" */
    int cc_major, cc_minor;
    size_t mem_bytes;
    int sms;
    bool dmabuf;             /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */
    bool gdr;                /* cudaDevAttrGPUDirectRDMASupported */
    int numa;                /* -1 when unknown */
    char cpus[128];          /* local CPU list from sysfs, e.g. "0-15" */
    int nvlinks;             /* active NVLink links (NVML), 0 when none or NVML missing */
    int nvlink_version;      /* NVLink generation (1..5), 0 when unknown */
    double nvlink_gbs;       /* theoretical one-direction bandwidth of those links, GB/s */
    int nnear;               /* nearest NICs by PCI distance (of the list given) */
    int near[EFAX_MAX_NICS]; /* their indices in that list */
    int near_depth;          /* PCI path components shared with them (more: closer) */
} efax_gpu_info;

/* Describes GPU `device` and which of `nics` (from efax_topo_list) sit nearest to it on the PCI
   tree. Returns 0 or -EFAX_E_CUDA. Thread safe. */
EFAX_API int efax_cuda_gpu_info(int device, const efax_nic_info *nics, int nnics, efax_gpu_info *out);

/* For a rank that moves device memory (cd->hmem): puts its current GPU's PCI address in
   cd->near_pci, so efax_ctx_init opens the NICs nearest that GPU (a p5: the 4 behind its PCIe
   switch) unless --nics / EFAX_NICS name others. Call after efax_cuda_use. */
EFAX_API void efax_cuda_near(efax_ctx_desc *cd);

/* Pins the calling thread to the CPUs near GPU `device` (sysfs local_cpulist). Returns 0, or
   -FI_ENOSYS when the topology is unknown (the thread stays where it was). */
EFAX_API int efax_cuda_pin_near(int device);

// >>memory -------------------------------------------------------------------------------------

/* Pinned host memory (cudaHostAlloc), registered as host memory: the seeds' "Pin" variants. */
EFAX_API const efax_mem_ops *efax_mem_pinned(void);
/* Device memory (cudaMalloc, 64 KiB aligned): dmabuf, else hmem, else staged; b->path says.
   With a NULL context (efax_buf_alloc(NULL, ...)) nothing is registered: memory for IPC. */
EFAX_API const efax_mem_ops *efax_mem_device(void);

/* Parses a --mem list ("host", "pin", "dma", comma-separated, or "all") into memory kinds.
   Without a CUDA device, pin and dma are left out and msg says "skipped: no CUDA device (...)".
   Returns 0, or -EFAX_E_USAGE with msg naming the bad entry. */
EFAX_API int efax_cuda_mem_select(const char *list, const efax_mem_ops **kinds, int max, int *n, char *msg,
                                  size_t len);

/* What efax_cuda_ceiling measured. */
typedef struct efax_ceiling {
    double gbs;       /* the best timed copy of the slowest pair of GPUs, GB/s; 0: none measured */
    double low_gbs;   /* that pair's slowest timed copy: gbs - low_gbs is the spread */
    int copies;       /* timed copies per pair */
    int warmup;       /* untimed copies before them */
    char what[160];   /* what was measured, or why nothing was */
    char shared[192]; /* "" or which ranks share one GPU ("ranks 0,1 share GPU 0 (0000:19:00.0)") */
} efax_ceiling;

/* Measures what no device-memory transfer between this job's ranks can pass: rank 0 copies
   `bytes` with cudaMemcpyPeerAsync from its GPU to the GPU of every other rank on its host (a
   copy within one GPU's memory where the ranks share it). Per pair: copies for at least 25 ms
   untimed (clocks and caches settle), then 20 back to back, each timed by events between its
   neighbours (no launch gap inside a timing); the best counts, the slowest is kept as the spread,
   and the slowest pair counts. Ranks on other hosts add no ceiling here (their NICs' line rate
   bounds them). On rank 0 `out` gets it, or gbs 0 and `what` saying why nothing was measured
   (every peer on another host, a GPU not visible), and `shared` which ranks share a GPU.
   efax_bench.h holds results against it. Collective over boot. Returns 0 or a negative code. */
EFAX_API int efax_cuda_ceiling(efax_boot *boot, size_t bytes, efax_ceiling *out);

/* Whether any of the kinds is device memory (the context should ask for FI_HMEM). */
EFAX_API bool efax_cuda_wants_hmem(const efax_mem_ops *const *kinds, int n);

/* Before a context is opened for these kinds: binds this rank to its GPU (local_rank mod
   devices) when any kind needs CUDA, or when libfabric will initialize CUDA anyway (FI_HMEM unset or
   naming cuda: efa's start-up probe makes a CUDA context on the current GPU), and says whether to ask
   for FI_HMEM. Returns 0 or -EFAX_E_CUDA. */
EFAX_API int efax_cuda_use(const efax_mem_ops *const *kinds, int n, int local_rank, bool *hmem);

// >>queue --------------------------------------------------------------------------------------

/* A multi-producer (GPU threads), single-consumer (CPU thread) queue. Each cell is one 64-byte
   line: a sequence word and 7 payload words. A producer takes a slot with one atomicAdd on a
   counter in device memory, waits until the consumer has freed it (it reads the consumer's
   position from mapped host memory only when its cached copy says the ring may be full),
   writes the payload, fences system-wide and publishes by storing the slot's sequence; the
   consumer reads the sequence with acquire semantics and only then the payload. Nothing GPU
   and CPU share lives in pageable memory. */
#define EFAX_QUEUE_WORDS 7
typedef struct efax_qcell {
    uint64_t seq; /* slot + 1 once the payload of that slot is in place */
    uint64_t w[EFAX_QUEUE_WORDS];
} efax_qcell;

enum { EFAX_QUEUE_HOST = 0, EFAX_QUEUE_DEVICE = 1 };

/* What a kernel needs to push: pass by value. */
typedef struct efax_queue_dev {
    efax_qcell *cells;          /* device view of the cells */
    const uint64_t *head;       /* device view of the consumer's position (mapped host memory) */
    unsigned long long *tail;   /* next slot to take (device memory) */
    unsigned long long *hcache; /* producers' cached copy of head (device memory) */
    uint32_t mask;
} efax_queue_dev;

typedef struct efax_queue {
    efax_qcell *cells; /* host view */
    efax_qcell *cells_d;
    uint64_t *head_h, *head_d; /* mapped pinned: the CPU writes, the GPU reads */
    unsigned long long *dev;   /* device memory: tail, hcache */
    uint32_t ncells;
    int placement;
    uint64_t head;        /* consumer's next slot */
    uint32_t unpublished; /* pops since the head was last published */
} efax_queue;

/* Creates a queue of ncells (a power of two) cells. placement: EFAX_QUEUE_HOST (cells in mapped
   pinned host memory) or EFAX_QUEUE_DEVICE (cells in device memory read by the CPU: only on
   machines that give the CPU coherent access to device memory; -FI_ENOSYS elsewhere). Must not
   move after init. Returns 0 or a negative code. */
EFAX_API int efax_queue_init(efax_queue *q, uint32_t ncells, int placement);
EFAX_API void efax_queue_deinit(efax_queue *q);
EFAX_API efax_queue_dev efax_queue_device(const efax_queue *q);

/* Consumer: takes the next command if one is published (1) or not (0); payload gets its
   words. One consumer thread only. */
EFAX_API int efax_queue_pop(efax_queue *q, uint64_t payload[EFAX_QUEUE_WORDS]);

/* Measures the queue's round trip: one GPU thread pushes n commands of nwords words (word 0: the command's
   index, the others 0), each only after the CPU popped the previous one and answered through mapped host
   memory; this thread pops and answers. us[0..n-1) gets the microseconds from pop i to pop i + 1: a full
   round trip push -> pop -> answer -> next push. n >= 2; timeout_ms bounds the pops. Returns 0, -FI_ETIMEDOUT
   (fewer than n popped in time) or -EFAX_E_CUDA. Thread safety: the calling thread is the queue's one
   consumer; the queue must be empty and have no other producer meanwhile. */
EFAX_API int efax_queue_roundtrip(efax_queue *q, int n, int nwords, int timeout_ms, double *us);

/* Loads and stores that other agents (the CPU, the other GPU) see: system scope, with acquire
   and release ordering (PTX memory model), rather than volatile accesses that may be served
   from or held in a cache. */
static __device__ __forceinline__ uint64_t efax_ld_acquire_sys(const uint64_t *p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ void efax_st_release_sys(uint64_t *p, uint64_t v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* Producer (device): pushes nwords (<= 7) words; returns the slot taken. Any number of GPU
   threads may push at once; each push is published whole (never torn). While the ring is
   full, only the producer whose slot is next to be freed reads the consumer's position from
   host memory; the others watch the cached copy in device memory, so thousands of waiting
   producers do not flood PCIe with reads. */
static __device__ __forceinline__ unsigned long long efax_queue_push(const efax_queue_dev *q,
                                                                     const uint64_t *payload, int nwords) {
    unsigned long long slot = atomicAdd(q->tail, 1ull), n = q->mask + 1ull, head;
    efax_qcell *c;
    int i;
    while (slot >= (head = *(volatile unsigned long long *)q->hcache) + n) {
        if (slot == head + n) { /* the leader: ask the consumer where it is */
            unsigned long long h = efax_ld_acquire_sys(q->head);
            if (h > head)
                atomicMax(q->hcache, h);
            else
                __nanosleep(100);
        } else {
            __nanosleep(200);
        }
    }
    c = &q->cells[slot & q->mask];
    for (i = 0; i < nwords; i++) c->w[i] = payload[i];
    efax_st_release_sys(&c->seq, slot + 1); /* after the payload: the CPU reads it with acquire */
    return slot;
}

// >>proxy --------------------------------------------------------------------------------------

/* GPU-initiated writes through a CPU proxy. A GPU producer (a block, or any thread that owns an
   efax_producer) pushes commands into an efax_queue; the proxy thread, pinned near the GPU,
   pops them, checks each against the registered windows, posts it as an RDMA write with
   immediate data (split over every NIC when asked), keeps many in flight, and publishes per
   producer how many of its commands completed. quiet waits on that count, so it waits only for
   the caller's own earlier commands. A fence is a command: the proxy posts nothing of that
   producer after it until everything before it completed. The command words, their decoder
   and its checks (efax_cmd_decode) are in efax.h's "gpu wire" section. */
static_assert(EFAX_QUEUE_WORDS == EFAX_CMD_WORDS, "a proxy command fills one queue cell");

typedef struct efax_proxy_dev {
    efax_queue_dev q;
    const uint64_t *done; /* [producers] commands completed (mapped host memory) */
    uint32_t producers;
} efax_proxy_dev;

/* A producer's state; keep it in registers or shared memory, one per producer id. */
typedef struct efax_producer {
    uint32_t id;
    uint64_t issued; /* commands pushed so far (fences included) */
} efax_producer;

/* Starts producer `id` (< producers): it continues from what its earlier kernels completed.
   Call when none of its commands is in flight (after a quiet). */
static __device__ __forceinline__ void efax_producer_begin(const efax_proxy_dev *p, efax_producer *me,
                                                           uint32_t id) {
    me->id = id;
    me->issued = efax_ld_acquire_sys(&p->done[id]);
}

static __device__ __forceinline__ void efax__push_cmd(const efax_proxy_dev *p, efax_producer *me, uint32_t op,
                                                      uint32_t flags, int dst, uint64_t soff, uint64_t doff,
                                                      uint64_t size, int tag, uint32_t seq) {
    uint64_t w[EFAX_QUEUE_WORDS];
    me->issued++;
    w[0] = (uint64_t)(op & 0xff) | (uint64_t)(flags & 0xff) << 8 | (uint64_t)(me->id & 0xffff) << 16 |
           (uint64_t)(uint32_t)dst << 32;
    w[1] = soff;
    w[2] = doff;
    w[3] = size;
    w[4] = (uint64_t)(uint32_t)tag | (uint64_t)seq << 32;
    w[5] = me->issued;
    w[6] = me->id;
    efax_queue_push(&p->q, w, EFAX_QUEUE_WORDS);
}

/* Non-blocking put: asks the proxy to write bytes [soff, soff+size) of the source window to
   rank dst's window at doff, with immediate data (this rank, tag, seq); returns at once.
   One thread per producer calls it, after the producer's data writes (the push fences them). */
static __device__ __forceinline__ void efax_put_nbi(const efax_proxy_dev *p, efax_producer *me, int dst,
                                                    uint64_t soff, uint64_t doff, uint64_t size, int tag,
                                                    uint32_t seq, uint32_t flags) {
    efax__push_cmd(p, me, EFAX_CMD_PUT, flags, dst, soff, doff, size, tag, seq);
}

/* Waits until every command this producer pushed so far completed. */
static __device__ __forceinline__ void efax_quiet(const efax_proxy_dev *p, const efax_producer *me) {
    while (efax_ld_acquire_sys(&p->done[me->id]) < me->issued) __nanosleep(128);
}

/* Blocking put: efax_put_nbi, then waits until this write (and every earlier one) completed. */
static __device__ __forceinline__ void efax_put(const efax_proxy_dev *p, efax_producer *me, int dst,
                                                uint64_t soff, uint64_t doff, uint64_t size, int tag,
                                                uint32_t seq, uint32_t flags) {
    efax_put_nbi(p, me, dst, soff, doff, size, tag, seq, flags);
    efax_quiet(p, me);
}

/* Orders this producer's earlier puts before its later ones, without waiting here. */
static __device__ __forceinline__ void efax_fence(const efax_proxy_dev *p, efax_producer *me) {
    efax__push_cmd(p, me, EFAX_CMD_FENCE, 0, 0, 0, 0, 0, 0, 0);
}

/* Block-wide forms: the block synchronises, one thread publishes, the block synchronises
   again. `me` must be the block's (e.g. in shared memory). */
static __device__ __forceinline__ void efax_block_put_nbi(const efax_proxy_dev *p, efax_producer *me, int dst,
                                                          uint64_t soff, uint64_t doff, uint64_t size,
                                                          int tag, uint32_t seq, uint32_t flags) {
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0)
        efax_put_nbi(p, me, dst, soff, doff, size, tag, seq, flags);
    __syncthreads();
}
static __device__ __forceinline__ void efax_block_quiet(const efax_proxy_dev *p, const efax_producer *me) {
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) efax_quiet(p, me);
    __syncthreads();
}

typedef struct efax_proxy_desc {
    efax_ctx *ctx;        /* the proxy thread drives it alone while running */
    efax_buf *src;        /* the source window the commands' soff refer to */
    const efax_mr *dst;   /* the destination window (exchanged with efax_mr_exchange) */
    uint32_t producers;   /* GPU producers that will push (ids 0..producers-1) */
    uint32_t queue_cells; /* 0: 4096 */
    int inflight;         /* writes in flight at most (0: 512) */
    uint64_t chunk;       /* write chunk (0: as large as allowed, as in efax_write_desc) */
    int device;           /* GPU served: the thread pins itself near it (-1: no pinning) */
} efax_proxy_desc;

typedef struct efax__pslot efax__pslot;
typedef struct efax__pprod efax__pprod;
typedef struct efax_proxy {
    efax_proxy_desc d;
    efax_queue q;
    uint64_t *done_h, *done_d;
    efax__pslot *slots, *free_slots;
    int nfree;
    efax__pprod *prod;
    uint64_t (*deferred)[EFAX_QUEUE_WORDS];
    int32_t *deferred_next, free_deferred;
    int ndeferred, nfenced;
    pthread_t thread;
    bool running;
    int stop;   /* atomic: asked to drain and stop */
    int status; /* first error the thread met */
    /* statistics (read after stop) */
    uint64_t puts, bytes, fences, bad, deferred_posts, fence_violations;
    uint64_t bad_said; /* bad + fence_violations efax_proxy_stop has logged */
    /* a watch: the thread consumes `count` arrivals (peer, tag, seq) and records when */
    int watch_peer, watch_tag;
    uint32_t watch_seq, watch_count;
    int watch_state; /* atomic: 0 idle, 1 armed, 2 hit, -1 failed */
    uint64_t watch_ns;
} efax_proxy;

/* Sets up a proxy: the queue, the per-producer completion counters (mapped pinned memory),
   the write slots. Must not move after init. Returns 0 or a negative code. */
EFAX_API int efax_proxy_init(efax_proxy *p, const efax_proxy_desc *d);
/* Starts the thread; from now until efax_proxy_stop only it may use the context. */
EFAX_API int efax_proxy_start(efax_proxy *p);
/* Lets the thread finish what was pushed (call after the producing kernels ended), then joins
   it; what is still in flight after timeout_ms (< 0: the context's) is reported. Returns the first
   error it met; else -EFAX_E_PEER when it ever refused a command (p->bad) or saw a fence violated
   (p->fence_violations), logging their counts once; else 0. */
EFAX_API int efax_proxy_stop(efax_proxy *p, int timeout_ms);
EFAX_API void efax_proxy_deinit(efax_proxy *p);
/* What kernels need: pass by value. */
EFAX_API efax_proxy_dev efax_proxy_device(const efax_proxy *p);
/* While the thread runs: have it consume `count` arrivals from peer under (tag, seq) (the
   targets' confirmations) and note the time; efax_proxy_watch_wait returns that time. */
EFAX_API void efax_proxy_watch(efax_proxy *p, int peer, int tag, uint32_t seq, uint32_t count);
EFAX_API int efax_proxy_watch_wait(efax_proxy *p, int timeout_ms, uint64_t *t_ns);

// >>ipc ----------------------------------------------------------------------------------------

/* NVLink IPC among the ranks of one host: every rank exports a device buffer's IPC handle,
   the handles go round through the bootstrap (checked: version, host, size), and each rank
   opens those of the other ranks on its host. */
typedef struct efax_ipc {
    int size, rank;
    void **peer; /* [size] device address of each rank's buffer, NULL off this host */
    size_t *len; /* [size] */
    int *device; /* [size] each rank's device ordinal */
    void *own;
} efax_ipc;

/* Collective over boot: exports dptr[0..len), opens the peers' buffers on this host. Returns 0,
   -EFAX_E_PEER/-EFAX_E_VERSION for a bad handle, or -EFAX_E_CUDA. */
EFAX_API int efax_ipc_open(efax_ipc *ipc, efax_boot *boot, void *dptr, size_t len);
EFAX_API void efax_ipc_close(efax_ipc *ipc);

/* Copies bytes (a multiple of 16) from src to dst (either may be a peer's buffer) with a kernel of grid x
   block threads and 16-byte loads and stores, `unroll` (4 or 8) loads in flight per thread before its stores.
   Layout: grid-stride over the whole buffer, or with EFAX_COPY_BLOCKED each block copies one contiguous slice
   (longer runs of consecutive writes per SM); with EFAX_COPY_TMA one thread per block drives the SM's
   bulk-copy engine (Hopper's cp.async.bulk): tiles of 16 KiB go from source to shared memory and from there
   to the destination in single large writes (grid and unroll still apply: block size is ignored beyond the
   first thread). Each thread ends with a system-scope fence, so when the kernel has finished the bytes are
   visible to the peer GPU and the CPU. Returns the launch error. */
enum { EFAX_COPY_BLOCKED = 1, EFAX_COPY_TMA = 2 }; /* TMA: bulk copies through shared memory (sm_90) */
EFAX_API cudaError_t efax_ipc_copy(void *dst, const void *src, size_t bytes, int grid, int block, int unroll,
                                   unsigned flags, cudaStream_t s);

/* Writes the verification pattern of (rank, iter) (what efax_buf's fill writes and its check
   expects) into dst[0..bytes), e.g. a peer's buffer, with a kernel of grid x block threads and
   16-byte stores, loading nothing; ends with a system-scope fence. This is the most SM stores
   alone can move to the destination, the ceiling a copy kernel is held against (a copy also
   loads). bytes: a multiple of 16, dst 16-byte aligned. Returns the launch error. */
EFAX_API cudaError_t efax_ipc_fill(void *dst, size_t bytes, int rank, uint64_t iter, int grid, int block,
                                   cudaStream_t s);

/* A persistent copy kernel: launched once, it takes jobs from mapped host memory and copies
   each with all its blocks. Only block 0 reads the host's doorbell and hands the job to the
   others through device memory; the last block to finish rings the host once. (Every block
   polling host memory at once floods PCIe with reads.) Measures copies without launches. */
typedef struct efax_copy_engine {
    volatile uint64_t *job; /* mapped: [0] sequence, [1] dst, [2] src, [3] bytes; [8] done sequence */
    uint64_t *job_d;
    uint64_t *dev; /* device memory: [0..3] the job as block 0 passed it on, [4] blocks finished */
    int grid, block;
    uint64_t seq;
    cudaStream_t stream;
    bool running;
} efax_copy_engine;

EFAX_API int efax_copy_engine_start(efax_copy_engine *e, int grid, int block, int unroll);
/* Runs one copy and waits until every block reported it (timeout_ms); returns 0 or -FI_ETIMEDOUT. */
EFAX_API int efax_copy_engine_run(efax_copy_engine *e, void *dst, const void *src, size_t bytes,
                                  int timeout_ms);
EFAX_API int efax_copy_engine_stop(efax_copy_engine *e);

/* What efax_ipc_time runs for each copy: a copy kernel (efax_ipc_copy), the copy engine (cudaMemcpyAsync),
   the pattern stored by SMs alone (efax_ipc_fill: no loads) or the persistent kernel (efax_copy_engine). */
enum { EFAX_IPC_KERNEL, EFAX_IPC_MEMCPY, EFAX_IPC_STORES, EFAX_IPC_PERSIST };
typedef struct efax_ipc_run {
    int how;                 /* EFAX_IPC_* */
    int grid, block, unroll; /* the kernel's (not MEMCPY's); unroll: KERNEL and PERSIST (4 or 8) */
    unsigned flags;          /* EFAX_COPY_* (KERNEL) */
    int rank;                /* STORES: the pattern of (rank, iter), as efax_buf's fill writes it */
    uint64_t iter;
    int iters; /* timed rounds; two untimed rounds go first */
} efax_ipc_run;

/* Times n copies at once: dst[i] <- src[i] (bytes each; src is not read by EFAX_IPC_STORES), copy i on a
   non-blocking stream of its own (PERSIST: one after another through one engine of grid x block, each within
   60 s), r->iters rounds after two untimed ones. The rounds are timed by CUDA events: the start is recorded
   on stream 0 and every stream waits for it, every stream joins stream 0 at the end; PERSIST is timed on the
   host (the sum of its copies). n: 1 to 64. *gbs gets each copy's rate: bytes x iters / the timed rounds'
   time, in GB/s. Returns 0 or a negative code (logged). Thread safety: any threads at once (each call makes
   its own streams and events) on the current device. */
EFAX_API int efax_ipc_time(const efax_ipc_run *r, int n, void *const *dst, const void *const *src,
                           size_t bytes, double *gbs);


/* ============================================================================================
   Implementation (with EFAX_IMPLEMENTATION, in the same file as efax.h's)
   ============================================================================================ */
#if defined(EFAX_IMPLEMENTATION) && !defined(EFAX_CUDA_IMPLEMENTATION_DONE)
#define EFAX_CUDA_IMPLEMENTATION_DONE

#include <dlfcn.h>
#include <sched.h>

// >>cuda basics (implementation) ---------------------------------------------------------------

EFAX_API int efax_cuda_check(cudaError_t e, const char *call, const char *file, int line) {
    if (e == cudaSuccess) return 0;
    efax_log(NULL, 0, "%s failed: %s (%d) at %s:%d", call, cudaGetErrorString(e), (int)e, file, line);
    return -EFAX_E_CUDA;
}

EFAX_API int efax_cuda_devices(char *why, size_t len) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        if (why && len) snprintf(why, len, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
        (void)cudaGetLastError(); /* clear it */
        return 0;
    }
    if (why && len) why[0] = 0;
    return n;
}

EFAX_API int efax_cuda_bind(int local_rank, int *device) {
    char why[128];
    int n = efax_cuda_devices(why, sizeof why), rc;
    if (n == 0) {
        efax_log(NULL, 0, "no CUDA device: %s", why);
        return -EFAX_E_CUDA;
    }
    *device = (local_rank < 0 ? 0 : local_rank) % n;
    if ((rc = EFAX_CUDA(cudaSetDevice(*device)))) return rc;
    return EFAX_CUDA(cudaFree(0)); /* creates the context now, not inside a timed region */
}

/* A driver API function, without linking libcuda (the binary must start where there is none). */
EFAX_PRIVATE void *efax__cu_fn(const char *name) {
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q;
#if CUDART_VERSION >= 12050
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        fn = NULL;
#else
    if (cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        fn = NULL;
#endif
    (void)cudaGetLastError();
    return fn;
}

EFAX_PRIVATE bool efax__dmabuf_supported(int device) {
    typedef CUresult (*attr_fn)(int *, CUdevice_attribute, CUdevice);
    attr_fn get = (attr_fn)efax__cu_fn("cuDeviceGetAttribute");
    int v = 0;
    return get && get(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, (CUdevice)device) == CUDA_SUCCESS && v;
}

// >>affinity (implementation) ------------------------------------------------------------------

EFAX_PRIVATE void efax__gpu_pci(int device, char *pci, size_t len) {
    char id[32];
    size_t i;
    pci[0] = 0;
    if (cudaDeviceGetPCIBusId(id, sizeof id, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    for (i = 0; id[i] && i + 1 < len; i++) pci[i] = (char)tolower((unsigned char)id[i]);
    pci[i] = 0;
    /* sysfs names are 0000:bb:dd.f; CUDA may give an 8-digit domain */
    if (strlen(pci) == 17 && !strncmp(pci, "0000", 4)) memmove(pci, pci + 4, strlen(pci + 4) + 1);
}

/* NVML, opened at run time: only what the affinity experiment reads. */
typedef struct efax__nvml {
    void *lib;
    int (*init)(void);
    int (*shutdown)(void);
    int (*by_pci)(const char *, void **);
    int (*link_state)(void *, unsigned, int *);
    int (*link_version)(void *, unsigned, unsigned *);
} efax__nvml;

EFAX_PRIVATE bool efax__nvml_open(efax__nvml *n) {
    memset(n, 0, sizeof *n);
    if (!(n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL))) return false;
    n->init = (int (*)(void))dlsym(n->lib, "nvmlInit_v2");
    n->shutdown = (int (*)(void))dlsym(n->lib, "nvmlShutdown");
    n->by_pci = (int (*)(const char *, void **))dlsym(n->lib, "nvmlDeviceGetHandleByPciBusId_v2");
    n->link_state = (int (*)(void *, unsigned, int *))dlsym(n->lib, "nvmlDeviceGetNvLinkState");
    n->link_version = (int (*)(void *, unsigned, unsigned *))dlsym(n->lib, "nvmlDeviceGetNvLinkVersion");
    if (!n->init || !n->shutdown || !n->by_pci || !n->link_state || !n->link_version || n->init() != 0) {
        dlclose(n->lib);
        n->lib = NULL;
        return false;
    }
    return true;
}

EFAX_API int efax_cuda_gpu_info(int device, const efax_nic_info *nics, int nnics, efax_gpu_info *out) {
    cudaDeviceProp prop;
    char path[128], buf[256];
    efax__nvml nv;
    int v = 0;
    memset(out, 0, sizeof *out);
    out->device = device;
    out->numa = -1;
    if (EFAX_CUDA(cudaGetDeviceProperties(&prop, device))) return -EFAX_E_CUDA;
    efax__copy(out->name, sizeof out->name, prop.name);
    out->cc_major = prop.major;
    out->cc_minor = prop.minor;
    out->mem_bytes = prop.totalGlobalMem;
    out->sms = prop.multiProcessorCount;
    out->dmabuf = efax__dmabuf_supported(device);
    if (cudaDeviceGetAttribute(&v, cudaDevAttrGPUDirectRDMASupported, device) == cudaSuccess)
        out->gdr = v != 0;
    (void)cudaGetLastError();
    efax__gpu_pci(device, out->pci, sizeof out->pci);
    if (out->pci[0]) {
        snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/numa_node", out->pci);
        if (!efax_read_sysfs(path, buf, sizeof buf)) out->numa = atoi(buf);
        snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/local_cpulist", out->pci);
        if (efax_read_sysfs(path, out->cpus, sizeof out->cpus)) out->cpus[0] = 0;
    }
    if (out->pci[0] && efax__nvml_open(&nv)) {
        void *h = NULL;
        char id[32];
        snprintf(id, sizeof id, "%s", out->pci);
        if (nv.by_pci(id, &h) == 0)
            for (unsigned l = 0; l < 18; l++) {
                int active = 0;
                unsigned ver = 0;
                if (nv.link_state(h, l, &active) != 0 || !active) continue;
                out->nvlinks++;
                /* NVML answers an nvmlNvlinkVersion_t: 1 = 1.0, 2 = 2.0, 3 = 2.2, 4 = 3.0,
                   5 = 3.1, 6 = 4.0, 7 = 5.0 */
                if (nv.link_version(h, l, &ver) == 0 && ver > 0)
                    out->nvlink_version = ver <= 1 ? 1 : ver <= 3 ? 2 : ver <= 5 ? 3 : (int)ver - 2;
            }
        /* some drivers report 5.0 for Hopper, whose links are NVLink 4 */
        if (out->cc_major == 9 && out->nvlink_version > 4) out->nvlink_version = 4;
        /* one direction of a link: 20 GB/s for NVLink 1, 25 for 2 to 4, 50 for 5 */
        out->nvlink_gbs = out->nvlinks * (out->nvlink_version >= 5   ? 50.0
                                          : out->nvlink_version == 1 ? 20.0
                                                                     : 25.0);
        nv.shutdown();
        dlclose(nv.lib);
    }
    if (out->pci[0] && nnics > 0) { /* the same choice efax_ctx_init makes for this GPU */
        const char *root = efax_topo_sysfs_root();
        out->nnear = efax_topo_near(root, nics, nnics, out->pci, -1, out->near, EFAX_MAX_NICS);
        out->near_depth = out->nnear ? efax_topo_pci_depth(root, out->pci, nics[out->near[0]].pci) : 0;
    }
    return 0;
}

EFAX_API void efax_cuda_near(efax_ctx_desc *cd) {
    int dev;
    cd->near_pci[0] = 0;
    if (!cd->hmem || cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    efax__gpu_pci(dev, cd->near_pci, sizeof cd->near_pci);
}

EFAX_API int efax_cuda_pin_near(int device) {
    char pci[16], path[128], list[256], *tok, *save = NULL;
    cpu_set_t set;
    int n = 0;
    efax__gpu_pci(device, pci, sizeof pci);
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/local_cpulist", pci);
    if (!pci[0] || efax_read_sysfs(path, list, sizeof list)) return -FI_ENOSYS;
    CPU_ZERO(&set);
    for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int a = atoi(tok), b = strchr(tok, '-') ? atoi(strchr(tok, '-') + 1) : a;
        for (; a <= b && a < CPU_SETSIZE; a++, n++) CPU_SET(a, &set);
    }
    if (!n) return -FI_ENOSYS;
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) ? -FI_ENOSYS : 0;
}

// >>memory (implementation) --------------------------------------------------------------------

EFAX_PRIVATE int efax__pinned_alloc(efax_ctx *ctx, efax_buf *b, size_t len, unsigned access) {
    int rc;
    if ((rc = EFAX_CUDA(cudaHostAlloc(&b->ptr, len ? len : 1, cudaHostAllocPortable)))) return rc;
    memset(b->ptr, 0, len);
    return efax__buf_reg_cpu(ctx, b, len, access, "pinned");
}
EFAX_PRIVATE void efax__pinned_release(efax_buf *b) {
    if (b->ptr) cudaFreeHost(b->ptr);
}

/* Device memory and, when staged, its bounce buffer and copy streams. Copies out are recorded
   in a ring of "out" ranges, each with an event per cell on one stream: a chunk is ready when
   the event of its last cell fired (a stream runs its copies in order). A range is reused only
   after its copies finished, so a range no longer in the ring is in the bounce buffer. */
#define EFAX__OUTS 256
#define EFAX__IN_MARKS 256 /* marks on the copies in (efax_stage_ops.in_mark), reused in turn */
typedef struct efax__dev {
    uint8_t *raw, *d; /* cudaMalloc'ed, and 64 KiB aligned within it */
    int device;
    int dmabuf_fd;
    uint8_t *bounce; /* staged: pinned host memory the NICs use */
    cudaStream_t out_s, in_s;
    cudaStream_t copy_s;      /* local copies (efax_buf_copy), overlapping what the provider moves in */
    cudaEvent_t settle_ev[2]; /* efax__dev_settle's: the legacy default stream's, and copy_s's */
    cudaEvent_t mark_ev[EFAX_BUF_MARKS][2]; /* efax_buf_mark's, the same two streams per slot */
    int mark_n[EFAX_BUF_MARKS];             /* the slot's last mark: 1 + the streams it recorded (0: none) */
    struct {
        uint64_t off, len, unit;
        unsigned ncells;
        cudaEvent_t ev[256];
        unsigned nev;
    } out[EFAX__OUTS];
    unsigned nout;
    cudaEvent_t in_ev[EFAX__IN_MARKS]; /* mark m's event is in_ev[m % EFAX__IN_MARKS] */
    uint64_t in_marks;                 /* marks made */
    unsigned long long *bad_d;
    bool flush; /* NIC writes need cudaDeviceFlushGPUDirectRDMAWrites before the GPU reads */
} efax__dev;

EFAX_PRIVATE int efax__st_out_begin(void *u, uint64_t off, uint64_t len, uint64_t unit) {
    efax__dev *s = (efax__dev *)u;
    unsigned k = s->nout++ % EFAX__OUTS, c, n = len ? (unsigned)((len + unit - 1) / unit) : 0;
    int rc;
    if (n > 256) return -FI_EINVAL;
    if (s->out[k].ncells && (rc = EFAX_CUDA(cudaEventSynchronize(s->out[k].ev[s->out[k].ncells - 1]))))
        return rc;
    for (; s->out[k].nev < n; s->out[k].nev++)
        if ((rc = EFAX_CUDA(cudaEventCreateWithFlags(&s->out[k].ev[s->out[k].nev], cudaEventDisableTiming))))
            return rc;
    s->out[k].off = off;
    s->out[k].len = len;
    s->out[k].unit = unit;
    s->out[k].ncells = n;
    for (c = 0; c < n; c++) {
        uint64_t o = off + (uint64_t)c * unit,
                 l = len - (uint64_t)c * unit < unit ? len - (uint64_t)c * unit : unit;
        if ((rc = EFAX_CUDA(cudaMemcpyAsync(s->bounce + o, s->d + o, l, cudaMemcpyDeviceToHost, s->out_s))) ||
            (rc = EFAX_CUDA(cudaEventRecord(s->out[k].ev[c], s->out_s))))
            return rc;
    }
    return 0;
}

EFAX_PRIVATE bool efax__st_out_ready(void *u, uint64_t off, uint64_t len) {
    efax__dev *s = (efax__dev *)u;
    for (unsigned i = 0; i < EFAX__OUTS && i < s->nout; i++) { /* newest first */
        unsigned k = (s->nout - 1 - i) % EFAX__OUTS;
        uint64_t o = s->out[k].off;
        if (!s->out[k].ncells || off < o || off + len > o + s->out[k].len) continue;
        {
            unsigned last = len ? (unsigned)((off + len - 1 - o) / s->out[k].unit) : 0;
            cudaError_t e = cudaEventQuery(s->out[k].ev[last]);
            if (e == cudaErrorNotReady) return false;
            if (e != cudaSuccess) efax_cuda_check(e, "cudaEventQuery(staged copy out)", __FILE__, __LINE__);
            return true;
        }
    }
    return true; /* its range was recycled, which waits for the range's copies: they are done */
}

EFAX_PRIVATE int efax__st_in_cell(void *u, uint64_t off, uint64_t len) {
    efax__dev *s = (efax__dev *)u;
    return EFAX_CUDA(cudaMemcpyAsync(s->d + off, s->bounce + off, len, cudaMemcpyHostToDevice, s->in_s));
}

EFAX_PRIVATE int efax__st_in_wait(void *u, int timeout_ms) {
    efax__dev *s = (efax__dev *)u;
    uint64_t deadline = efax_deadline_ns(timeout_ms);
    cudaError_t e;
    while ((e = cudaStreamQuery(s->in_s)) == cudaErrorNotReady)
        if (efax_now_ns() > deadline) {
            efax_log(NULL, 0, "staged receive: copies into device memory did not finish within %d ms",
                     timeout_ms);
            return -FI_ETIMEDOUT;
        }
    return EFAX_CUDA(e);
}

/* A mark after every copy in so far: an event recorded on their stream. A slot is recorded again
   EFAX__IN_MARKS marks later without waiting; its event then stands for a later mark, whose copies
   include the earlier one's (a stream runs its copies in order), so efax__st_in_marked may answer
   "not yet" late, never "finished" early. */
EFAX_PRIVATE int efax__st_in_mark(void *u, uint64_t *mark) {
    efax__dev *s = (efax__dev *)u;
    cudaEvent_t *ev = &s->in_ev[s->in_marks % EFAX__IN_MARKS];
    int rc;
    if (!*ev && (rc = EFAX_CUDA(cudaEventCreateWithFlags(ev, cudaEventDisableTiming)))) return rc;
    if ((rc = EFAX_CUDA(cudaEventRecord(*ev, s->in_s)))) return rc;
    *mark = s->in_marks++;
    return 0;
}

EFAX_PRIVATE int efax__st_in_marked(void *u, uint64_t mark) {
    efax__dev *s = (efax__dev *)u;
    cudaError_t e = cudaEventQuery(s->in_ev[mark % EFAX__IN_MARKS]);
    if (e == cudaErrorNotReady) return 0;
    return e == cudaSuccess ? 1 : EFAX_CUDA(e);
}

EFAX_PRIVATE int efax__st_out_sync(void *u, uint64_t off, uint64_t len) {
    efax__dev *s = (efax__dev *)u;
    return EFAX_CUDA(cudaMemcpy(s->bounce + off, s->d + off, len, cudaMemcpyDeviceToHost));
}

EFAX_PRIVATE int efax__st_in_sync(void *u, uint64_t off, uint64_t len) {
    efax__dev *s = (efax__dev *)u;
    int rc;
    /* after the copies in already started (in_s does not wait for the legacy stream's copy), so an
       older write's bytes cannot land over this receive's */
    if ((rc = EFAX_CUDA(cudaStreamSynchronize(s->in_s)))) return rc;
    return EFAX_CUDA(cudaMemcpy(s->d + off, s->bounce + off, len, cudaMemcpyHostToDevice));
}

EFAX_PRIVATE const efax_stage_ops *efax__cuda_stage_ops(void) {
    static const efax_stage_ops ops = {efax__st_out_begin, efax__st_out_ready, efax__st_in_cell,
                                       efax__st_in_wait,   efax__st_out_sync,  efax__st_in_sync,
                                       efax__st_in_mark,   efax__st_in_marked};
    return &ops;
}

/* Whether NIC writes into device memory of `device` must be flushed before the GPU reads them.
   A NIC's writes through GPUDirect RDMA may still sit in the PCIe fabric when its completion
   arrives; on GPUs before Hopper a kernel can then read stale bytes, so NCCL flushes every receive
   there (a local RDMA read, or cuFlushGPUDirectRDMAWrites with NCCL_NET_... CUDA flush: aws-ofi-nccl
   nccl_ofi_rdma.cpp rdma_flush_req, nccl_ofi_cuda.cpp nccl_net_ofi_gpu_flush_gpudirect_rdma_writes),
   and aws-ofi-nccl turns the flush off only for p5 and later (platform-aws.cpp: NCCL_NET_FORCE_FLUSH=0).
   efax takes CUDA's documented call: cudaDeviceFlushGPUDirectRDMAWrites blocks until remote writes to
   the device are visible to it, and is a no-op where cudaDevAttrGPUDirectRDMAWritesOrdering already
   orders them for the owner (CUDA runtime API). So: needed on compute capability < 9.0 unless that
   attribute says owner or better, and only where the NIC itself writes device memory (efax_caps
   gpudirect 1: efa); EFAX_GDR_FLUSH=1 forces it on anywhere (so a Hopper machine's tests run the
   call), 0 off. Returns 1 (flush, *why says why), 0 (not needed), -FI_ENOSYS (needed but the GPU
   offers no flush: *why says so; staged memory is then the correct path), or -EFAX_E_USAGE. */
EFAX_PRIVATE int efax__gdr_flush_need(const efax_caps *caps, int device, char *why, size_t wl) {
    int cc = 0, ordering = 0, opts = 0, v;
    if (efax_env_setting("EFAX_GDR_FLUSH", &v)) return -EFAX_E_USAGE; /* -1 unset, 0 or 1 */
    if (v == 0) return 0;
    if (cudaDeviceGetAttribute(&cc, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) cc = 0;
    if (cudaDeviceGetAttribute(&ordering, cudaDevAttrGPUDirectRDMAWritesOrdering, device) != cudaSuccess)
        ordering = 0;
    if (cudaDeviceGetAttribute(&opts, cudaDevAttrGPUDirectRDMAFlushWritesOptions, device) != cudaSuccess)
        opts = 0;
    (void)cudaGetLastError();
    if (v < 0 && (caps->gpudirect != 1 || cc >= 9 || ordering >= cudaGPUDirectRDMAWritesOrderingOwner))
        return 0;
    if (!(opts & cudaFlushGPUDirectRDMAWritesOptionHost)) {
        snprintf(
            why, wl,
            "GPU %d (compute capability %d.x) needs NIC writes flushed before it reads them and offers no "
            "cudaDeviceFlushGPUDirectRDMAWrites",
            device, cc);
        return -FI_ENOSYS;
    }
    if (v > 0)
        snprintf(why, wl, "NIC writes flushed before GPU reads (forced by EFAX_GDR_FLUSH=1)");
    else
        snprintf(why, wl, "NIC writes flushed before GPU reads (compute capability %d.x < 9.0)", cc);
    return 1;
}

/* Makes NIC writes into s's device visible to it (efax__gdr_flush_need); 0 where none are needed. */
EFAX_PRIVATE int efax__gdr_flush(efax__dev *s) {
    int cur = -1, rc;
    if (!s->flush) return 0;
    if (cudaGetDevice(&cur) != cudaSuccess) (void)cudaGetLastError();
    if (cur != s->device && (rc = EFAX_CUDA(cudaSetDevice(s->device)))) return rc;
    rc = EFAX_CUDA(cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                                      cudaFlushGPUDirectRDMAWritesToOwner));
    if (cur >= 0 && cur != s->device) cudaSetDevice(cur);
    return rc;
}

/* Waits until copies that a provider started into this device buffer, and the buffer's own local
   copies (efax__dev_copy), have finished; -FI_ETIMEDOUT, named, once timeout_ms passed (a wedged
   copy ends the run instead of hanging it; < 0: the library's limit, efax_deadline_ns). shm's CUDA IPC path
   completes a write or receive once it has *issued* a device-to-device cudaMemcpy in the target
   (prov/shm smr_progress_ipc -> ofi_copy_to_hmem_iov -> ofi_cudaMemcpy, src/hmem_cuda.c), which
   does not wait for device-to-device copies (CUDA's "API synchronization behavior"). That
   cudaMemcpy runs on the legacy default stream of the device's primary context, which libfabric's
   CUDA runtime and this one share; it is the only stream libfabric 2.6.0 copies on (its
   cuMemcpyDtoDAsync is never called). An event recorded there after it fires once the copy ran
   (the legacy stream also waits for every blocking stream of the context); local copies run on
   copy_s, a non-blocking stream, which gets an event of its own. Both are polled against the
   deadline. This used to be cudaDeviceSynchronize, which has no timeout and waits for every
   kernel of the process, a persistent producer kernel's too. */
/* Records an event on each stream that copies into s (the legacy default stream: the provider's
   copies, bit 0 of `which`; copy_s, once it exists: the buffer's own, bit 1), creating ev[0..1] on
   first use; *n: the streams it recorded, as a mask. efax__dev_settle's and efax_buf_mark's. The
   caller has made s's GPU current. */
EFAX_PRIVATE int efax__dev_note(efax__dev *s, cudaEvent_t ev[2], int *n, int which) {
    int rc = 0;
    *n = 0;
    for (int i = 0; i < 2 && !rc; i++)
        if (!ev[i]) rc = EFAX_CUDA(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
    if (!rc && (which & 1) && !(rc = EFAX_CUDA(cudaEventRecord(ev[0], cudaStreamLegacy)))) *n |= 1;
    if (!rc && (which & 2) && s->copy_s && !(rc = EFAX_CUDA(cudaEventRecord(ev[1], s->copy_s)))) *n |= 2;
    return rc;
}

/* Whether the events efax__dev_note recorded (mask n) fired: 1, 0 not yet (*pending: the first
   that has not), or a negative code naming the stream. */
EFAX_PRIVATE int efax__dev_fired(const cudaEvent_t ev[2], int n, int *pending) {
    for (int i = 0; i < 2; i++) {
        cudaError_t e;
        if (!(n & (1 << i))) continue;
        e = cudaEventQuery(ev[i]);
        if (e == cudaSuccess) continue;
        *pending = i;
        if (e == cudaErrorNotReady) return 0;
        return efax_cuda_check(
            e, i ? "cudaEventQuery(the buffer's local copy)" : "cudaEventQuery(the provider's copies)",
            __FILE__, __LINE__);
    }
    return 1;
}

EFAX_PRIVATE int efax__dev_settle(void *u, int timeout_ms) {
    efax__dev *s = (efax__dev *)u;
    int cur = -1, rc = 0, n = 0, pending = 0;
    uint64_t started = efax_now_ns(), deadline = efax_deadline_ns(timeout_ms);
    unsigned spins = 0;
    if ((rc = efax__gdr_flush(s))) return rc; /* pre-Hopper: NIC writes visible to the GPU first */
    if (cudaGetDevice(&cur) != cudaSuccess) (void)cudaGetLastError();
    if (cur != s->device && (rc = EFAX_CUDA(cudaSetDevice(s->device)))) return rc;
    rc = efax__dev_note(s, s->settle_ev, &n, 3);
    while (!rc && !(rc = efax__dev_fired(s->settle_ev, n, &pending)))
        if ((++spins & 63) == 0 && efax_now_ns() > deadline) {
            efax_log(
                NULL, 0,
                "device memory on GPU %d: %s did not finish within %d ms (a copy or kernel on that GPU is "
                "wedged, or the GPU is shared with work that holds it)",
                s->device, pending ? "the buffer's own local copy" : "the copies the provider issued into it",
                (int)((deadline - started) / 1000000));
            rc = -FI_ETIMEDOUT;
        }
    if (cur >= 0 && cur != s->device) cudaSetDevice(cur);
    return rc > 0 ? 0 : rc;
}

/* The order in which device-memory paths are tried, and why; the context's mem_path
   (EFAX_MEM_PATH=dmabuf|hmem|staged) forces one (*forced). One order serves every provider: on shm
   dmabuf and hmem move device memory alike (docs/journal.md), and on efa it is aws-ofi-nccl's. */
EFAX_PRIVATE const char *efax__dev_paths(const efax_ctx *ctx, const char **why, bool *forced) {
    const char *force = efax_ctx_mem_path(ctx);
    *forced = *force != 0;
    if (*forced) {
        *why = "forced by EFAX_MEM_PATH";
        return force;
    }
    *why = "dmabuf first, as aws-ofi-nccl does on EFA (no nvidia-peermem needed)";
    return "dmabuf,hmem,staged";
}

/* Device memory through one path; 0, or a negative code with the reason in why. */
EFAX_PRIVATE int efax__dev_reg(efax_ctx *ctx, efax_buf *b, efax__dev *s, size_t len, unsigned access,
                               const char *path, char *why, size_t wl) {
    efax_mr_desc md;
    int rc;
    memset(&md, 0, sizeof md);
    md.ptr = s->d;
    md.len = len;
    md.access = access;
    md.iface = FI_HMEM_CUDA;
    md.device = s->device;
    md.device_only = true; /* cudaMalloc memory: shm's IPC path needs to know (fi_mr(3)) */
    md.settle = efax__dev_settle;
    md.settle_user = s;
    if (!strcmp(path, "dmabuf")) {
#ifdef FI_MR_DMABUF
        typedef CUresult (*handle_fn)(void *, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long);
        handle_fn get = (handle_fn)efax__cu_fn("cuMemGetHandleForAddressRange");
        long page = sysconf(_SC_PAGESIZE);
        /* the range must start and end on host pages (CUDA; libfabric's hmem_cuda rounds the same
           way): the buffer is 64 KiB aligned and its allocation has room for the rounded end */
        size_t span = (len + (size_t)page - 1) / (size_t)page * (size_t)page;
        int fd = -1;
        CUresult cr;
        if (!efax__dmabuf_supported(s->device)) {
            snprintf(why, wl, "GPU %d does not support dmabuf", s->device);
            return -FI_ENOSYS;
        }
        if (!get) {
            snprintf(why, wl, "the CUDA driver has no cuMemGetHandleForAddressRange");
            return -FI_ENOSYS;
        }
        if ((cr = get(&fd, (CUdeviceptr)(uintptr_t)s->d, span, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)) !=
                CUDA_SUCCESS ||
            fd < 0) {
            snprintf(why, wl, "cuMemGetHandleForAddressRange failed (CUresult %d)", (int)cr);
            return -FI_ENOSYS;
        }
        md.dmabuf = true;
        md.dmabuf_fd = fd;
        md.dmabuf_offset = 0;
        if ((rc = efax_mr_reg(ctx, &b->mr, &md))) {
            close(fd);
            snprintf(why, wl, "fi_mr_regattr(FI_MR_DMABUF) failed: %s", efax_strerror(rc));
            return rc;
        }
        s->dmabuf_fd = fd;
        return 0;
#else
        snprintf(why, wl, "this libfabric (%d.%d) has no FI_MR_DMABUF (1.20+)", FI_MAJOR_VERSION,
                 FI_MINOR_VERSION);
        return -FI_ENOSYS;
#endif
    }
    if (!strcmp(path, "hmem")) {
        if ((rc = efax_mr_reg(ctx, &b->mr, &md))) {
            snprintf(why, wl, "fi_mr_regattr(FI_HMEM_CUDA) failed: %s", efax_strerror(rc));
            return rc;
        }
        return 0;
    }
    /* staged: pinned host bounce buffers, copied cell by cell on streams of their own */
    if ((rc = EFAX_CUDA(cudaHostAlloc((void **)&s->bounce, len ? len : 1, cudaHostAllocPortable))) ||
        (rc = EFAX_CUDA(cudaStreamCreateWithFlags(&s->out_s, cudaStreamNonBlocking))) ||
        (rc = EFAX_CUDA(cudaStreamCreateWithFlags(&s->in_s, cudaStreamNonBlocking)))) {
        snprintf(why, wl, "pinned bounce buffers: %s", efax_strerror(rc));
        return rc;
    }
    memset(s->bounce, 0, len);
    memset(&md, 0, sizeof md);
    md.ptr = s->bounce;
    md.len = len;
    md.access = access;
    md.stage = efax__cuda_stage_ops();
    md.stage_user = s;
    if ((rc = efax_mr_reg(ctx, &b->mr, &md)))
        snprintf(why, wl, "registering the bounce buffers failed: %s", efax_strerror(rc));
    return rc;
}

/* Device memory: the provider's paths in order (efax__dev_paths), the first that registers;
   b->path says which ran, the context's note says why, and each path passed over is one line. */
EFAX_PRIVATE int efax__dev_alloc(efax_ctx *ctx, efax_buf *b, size_t len, unsigned access) {
    efax__dev *s = (efax__dev *)calloc(1, sizeof *s);
    const efax_caps *caps = ctx ? efax_ctx_caps(ctx) : NULL;
    char order[64], *tok, *save = NULL, why[192], note[192] = "", flush_why[160];
    const char *reason;
    bool hmem = false, forced, first;
    int rc = -FI_ENOSYS;
    if (!s) return -FI_ENOMEM;
    b->impl = s;
    s->dmabuf_fd = -1;
    /* 128 KiB of slack: 64 KiB alignment plus a dmabuf range rounded up to host pages */
    if ((rc = EFAX_CUDA(cudaGetDevice(&s->device))) ||
        (rc = EFAX_CUDA(cudaMalloc((void **)&s->raw, len + (128u << 10)))) ||
        (rc = EFAX_CUDA(cudaMalloc((void **)&s->bad_d, sizeof(unsigned long long)))))
        return rc;
    s->d = (uint8_t *)(((uintptr_t)s->raw + 0xffff) & ~(uintptr_t)0xffff); /* 64 KiB: GPUDirect's page */
    if ((rc = EFAX_CUDA(cudaMemset(s->d, 0, len))) || (rc = EFAX_CUDA(cudaDeviceSynchronize()))) return rc;
    b->ptr = s->d;
    if (!ctx) { /* device memory no NIC uses (NVLink IPC): nothing to register */
        efax__copy(b->path, sizeof b->path, "device");
        return 0;
    }
    hmem = caps->hmem;
    efax__copy(order, sizeof order, efax__dev_paths(ctx, &reason, &forced));
    first = !efax_ctx_mem_note(ctx)[0]; /* the context's first device buffer speaks for all of them */
    for (tok = strtok_r(order, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "dmabuf") && strcmp(tok, "hmem") && strcmp(tok, "staged")) {
            efax_log(ctx, 0, "EFAX_MEM_PATH='%s': expected dmabuf, hmem or staged", tok);
            return -EFAX_E_USAGE;
        }
        if (strcmp(tok, "staged") && !hmem) {
            rc = -FI_ENOSYS;
            snprintf(why, sizeof why,
                     "provider %s cannot register device memory (no FI_HMEM, or a libfabric "
                     "without CUDA)",
                     caps->provider);
        } else if (strcmp(tok, "staged") && caps->gpudirect == 0 && caps->cuda_api != 1) {
            rc = -EFAX_E_UNSUPPORTED; /* efax_mr_reg would refuse it too: the provider would copy with CUDA */
            snprintf(why, sizeof why,
                     "no GPUDirect: %s found no GPU peer-to-peer support (--cuda-api lets it copy "
                     "device memory with CUDA)",
                     caps->provider);
        } else if (!(rc = efax__dev_reg(ctx, b, s, len, access, tok, why, sizeof why)))
            break;
        if (forced) {
            efax_log(ctx, 0, "device memory: EFAX_MEM_PATH=%s cannot be used: %s", tok, why);
            return rc ? rc : -FI_ENOSYS;
        }
        if (first) efax_log(ctx, 1, "device memory: %s not usable (%s); trying the next path", tok, why);
        snprintf(note, sizeof note, "%s", why);
    }
    if (!tok) return rc ? rc : -FI_ENOSYS;
    snprintf(b->path, sizeof b->path, "%s%s", tok, caps->gpudirect == 0 ? " (no GPUDirect)" : "");
    flush_why[0] = 0;
    if (strcmp(tok, "staged") &&
        (rc = efax__gdr_flush_need(caps, s->device, flush_why, sizeof flush_why)) < 0) {
        if (rc == -EFAX_E_USAGE || forced) {
            efax_log(ctx, 0, "device memory: %s",
                     rc == -EFAX_E_USAGE ? "EFAX_GDR_FLUSH is not valid: expected 0 or 1" : flush_why);
            return rc;
        }
        /* a pre-Hopper GPU without a flush: staged copies are ordered by CUDA, so the bytes are right */
        efax_mr_dereg(&b->mr);
        if (s->dmabuf_fd >= 0) close(s->dmabuf_fd), s->dmabuf_fd = -1;
        if ((rc = efax__dev_reg(ctx, b, s, len, access, "staged", why, sizeof why))) return rc;
        snprintf(note, sizeof note, "%s", flush_why);
        snprintf(b->path, sizeof b->path, "staged");
        tok = (char *)"staged";
        if (first) efax_log(ctx, 1, "device memory: %s; staging it instead", flush_why);
    } else {
        s->flush = rc == 1;
    }
    if (first) {
        char line[448];
        if (tok == order)
            snprintf(line, sizeof line, "%s (%s)%s%s", tok, reason, s->flush ? "; " : "",
                     s->flush ? flush_why : "");
        else
            snprintf(line, sizeof line, "%s instead of %s (%s)%s%s", tok, order, note, s->flush ? "; " : "",
                     s->flush ? flush_why : "");
        efax_ctx_set_mem_note(ctx, line);
    }
    return 0;
}

EFAX_PRIVATE void efax__dev_release(efax_buf *b) {
    efax__dev *s = (efax__dev *)b->impl;
    if (!s) return;
    if (s->out_s) cudaStreamSynchronize(s->out_s), cudaStreamDestroy(s->out_s);
    if (s->in_s) cudaStreamSynchronize(s->in_s), cudaStreamDestroy(s->in_s);
    if (s->copy_s) cudaStreamSynchronize(s->copy_s), cudaStreamDestroy(s->copy_s);
    for (int i = 0; i < 2; i++)
        if (s->settle_ev[i]) cudaEventDestroy(s->settle_ev[i]);
    for (int k = 0; k < EFAX_BUF_MARKS; k++)
        for (int i = 0; i < 2; i++)
            if (s->mark_ev[k][i]) cudaEventDestroy(s->mark_ev[k][i]);
    for (unsigned k = 0; k < EFAX__OUTS; k++)
        for (unsigned c = 0; c < s->out[k].nev; c++) cudaEventDestroy(s->out[k].ev[c]);
    for (unsigned k = 0; k < EFAX__IN_MARKS; k++)
        if (s->in_ev[k]) cudaEventDestroy(s->in_ev[k]);
    if (s->bounce) cudaFreeHost(s->bounce);
    if (s->dmabuf_fd >= 0) close(s->dmabuf_fd);
    if (s->raw) cudaFree(s->raw);
    if (s->bad_d) cudaFree(s->bad_d);
    free(s);
}

/* The verification pattern, on the GPU: word w of a message is efax_pattern_word(seed, w). */
__global__ void efax__k_fill(uint8_t *p, uint64_t len, uint64_t seed) {
    uint64_t nw = (len + 7) / 8, stride = (uint64_t)gridDim.x * blockDim.x;
    bool aligned = ((uintptr_t)p & 7) == 0;
    for (uint64_t w = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; w < nw; w += stride) {
        uint64_t v = efax_pattern_word(seed, w), o = w * 8;
        if (aligned && o + 8 <= len)
            *(uint64_t *)(p + o) = v;
        else
            for (int k = 0; k < 8 && o + k < len; k++) p[o + k] = (uint8_t)(v >> (8 * k));
    }
}

__global__ void efax__k_check(const uint8_t *p, uint64_t len, uint64_t seed, unsigned long long *bad) {
    uint64_t nw = (len + 7) / 8, stride = (uint64_t)gridDim.x * blockDim.x;
    bool aligned = ((uintptr_t)p & 7) == 0;
    unsigned long long mine = 0;
    for (uint64_t w = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; w < nw; w += stride) {
        uint64_t v = efax_pattern_word(seed, w), o = w * 8;
        if (aligned && o + 8 <= len) {
            uint64_t g = *(const uint64_t *)(p + o);
            if (g != v)
                for (int k = 0; k < 8; k++) mine += (uint8_t)(g >> (8 * k)) != (uint8_t)(v >> (8 * k));
        } else {
            for (int k = 0; k < 8 && o + k < len; k++) mine += p[o + k] != (uint8_t)(v >> (8 * k));
        }
    }
    if (mine) atomicAdd(bad, mine);
}

EFAX_PRIVATE void efax__dev_fill(efax_buf *b, uint64_t off, uint64_t len, int rank, uint64_t iter) {
    if (!len) return;
    efax__k_fill<<<1024, 256>>>((uint8_t *)b->ptr + off, len, efax_pattern_seed(rank, iter));
    EFAX_CUDA(cudaDeviceSynchronize());
}

EFAX_PRIVATE void efax__dev_poison(efax_buf *b, uint64_t off, uint64_t len) {
    EFAX_CUDA(cudaMemset((uint8_t *)b->ptr + off, EFAX_POISON, len));
    EFAX_CUDA(cudaDeviceSynchronize());
}

EFAX_PRIVATE uint64_t efax__dev_check(efax_buf *b, uint64_t off, uint64_t len, int rank, uint64_t iter) {
    efax__dev *s = (efax__dev *)b->impl;
    unsigned long long bad = 0;
    if (!len) return 0;
    if (efax__gdr_flush(s) || EFAX_CUDA(cudaMemset(s->bad_d, 0, sizeof bad))) return len;
    efax__k_check<<<1024, 256>>>((const uint8_t *)b->ptr + off, len, efax_pattern_seed(rank, iter), s->bad_d);
    if (EFAX_CUDA(cudaGetLastError()) ||
        EFAX_CUDA(cudaMemcpy(&bad, s->bad_d, sizeof bad, cudaMemcpyDeviceToHost)))
        return len;
    return bad;
}

EFAX_PRIVATE void efax__dev_copy(efax_buf *dst, uint64_t doff, const efax_buf *src, uint64_t soff,
                                 uint64_t len) {
    efax__dev *s = (efax__dev *)dst->impl;
    uint8_t *d = (uint8_t *)dst->ptr + doff;
    const uint8_t *from = (const uint8_t *)src->ptr + soff;
    int sms = 0, grid;
    /* On a stream of its own, and by the SMs rather than a copy engine: shm's IPC copies of the
       transfers in flight run on the copy engines, and a local cudaMemcpy there ran after them
       (all2all's own chunk made its iterations last the two copies end to end). By an eighth of
       the SMs: the copy then still finishes well inside the transfers it overlaps, and leaves the
       memory to the link's pulls, which all the SMs or the copy engine did not (docs/journal.md has
       the runs). efax_buf_settle waits for it. */
    if (!s->copy_s && EFAX_CUDA(cudaStreamCreateWithFlags(&s->copy_s, cudaStreamNonBlocking))) return;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, s->device) != cudaSuccess)
        sms = 0, (void)cudaGetLastError();
    grid = sms / 8 > 1 ? sms / 8 : 1;
    if (sms > 0 && len % 16 == 0 && ((uintptr_t)d | (uintptr_t)from) % 16 == 0 &&
        efax_ipc_copy(d, from, len, grid, 512, 4, EFAX_COPY_BLOCKED, s->copy_s) == cudaSuccess)
        return;
    (void)cudaGetLastError();
    EFAX_CUDA(cudaMemcpyAsync(d, from, len, cudaMemcpyDeviceToDevice, s->copy_s));
}

/* efax_buf_mark for device memory: events on the two streams efax__dev_settle waits for, the
   legacy default stream (the provider's copies; alone with EFAX_MARK_IN) and copy_s (the buffer's
   own; alone with EFAX_MARK_OWN), in the slot. */
EFAX_PRIVATE int efax__dev_mark(efax_buf *b, unsigned slot) {
    efax__dev *s = (efax__dev *)b->impl;
    int cur = -1, rc, which = slot & EFAX_MARK_IN ? 1 : slot & EFAX_MARK_OWN ? 2 : 3, n = 0;
    if (!s) return 0;
    slot &= ~(EFAX_MARK_IN | EFAX_MARK_OWN);
    if (cudaGetDevice(&cur) != cudaSuccess) (void)cudaGetLastError();
    if (cur != s->device && (rc = EFAX_CUDA(cudaSetDevice(s->device)))) return rc;
    rc = efax__dev_note(s, s->mark_ev[slot], &n, which);
    s->mark_n[slot] = rc ? 0 : 1 + n;
    if (cur >= 0 && cur != s->device) cudaSetDevice(cur);
    return rc;
}

/* efax_buf_marked for device memory: the slot's events fired (then, pre-Hopper, the NIC writes
   flushed). */
EFAX_PRIVATE int efax__dev_marked(efax_buf *b, unsigned slot) {
    efax__dev *s = (efax__dev *)b->impl;
    int rc, pending = 0;
    if (!s) return 1;
    if (!s->mark_n[slot]) return -FI_EINVAL; /* no mark in that slot */
    if ((rc = efax__dev_fired(s->mark_ev[slot], s->mark_n[slot] - 1, &pending)) != 1) return rc;
    rc = efax__gdr_flush(s);
    return rc ? rc : 1;
}

EFAX_PRIVATE int efax__dev_buf_settle(efax_buf *b) {
    return b->impl ? efax__dev_settle(b->impl, b->mr.ctx ? efax_ctx_timeout_ms(b->mr.ctx) : -1) : 0;
}

EFAX_API const efax_mem_ops *efax_mem_pinned(void) { /* host memory's pattern and copy on pinned pages */
    /* in efax_mem_ops' order, each field named: C++17 (g++, nvcc) has no designated initializers */
    static const efax_mem_ops ops = {
        "pinned",             /* name */
        "Pin",                /* label */
        efax__pinned_alloc,   /* alloc */
        efax__pinned_release, /* release */
        efax__host_fill,      /* fill */
        efax__host_poison,    /* poison */
        efax__host_check,     /* check */
        efax__host_copy,      /* copy */
        NULL,                 /* settle: the CPU's stores are visible at once */
        NULL,                 /* mark */
        NULL,                 /* marked */
    };
    return &ops;
}

EFAX_API const efax_mem_ops *efax_mem_device(void) {
    static const efax_mem_ops ops = {
        "device",             /* name */
        "DMA",                /* label */
        efax__dev_alloc,      /* alloc */
        efax__dev_release,    /* release */
        efax__dev_fill,       /* fill */
        efax__dev_poison,     /* poison */
        efax__dev_check,      /* check */
        efax__dev_copy,       /* copy */
        efax__dev_buf_settle, /* settle: the provider's copies into the GPU done */
        efax__dev_mark,       /* mark */
        efax__dev_marked,     /* marked */
    };
    return &ops;
}

EFAX_API int efax_cuda_mem_select(const char *list, const efax_mem_ops **kinds, int max, int *n, char *msg,
                                  size_t len) {
    char buf[128], why[128], *tok, *save = NULL, skipped[64] = "";
    int ndev = efax_cuda_devices(why, sizeof why);
    *n = 0;
    msg[0] = 0;
    efax__copy(buf, sizeof buf, list && *list ? list : "all");
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const efax_mem_ops *want[3];
        int nw = 0, i, j;
        if (!strcmp(tok, "all"))
            want[nw++] = efax_mem_host(), want[nw++] = efax_mem_pinned(), want[nw++] = efax_mem_device();
        else if (!strcmp(tok, "host"))
            want[nw++] = efax_mem_host();
        else if (!strcmp(tok, "pin") || !strcmp(tok, "pinned"))
            want[nw++] = efax_mem_pinned();
        else if (!strcmp(tok, "dma") || !strcmp(tok, "device"))
            want[nw++] = efax_mem_device();
        else {
            snprintf(msg, len, "--mem: '%s' is not valid: expected host, pin, dma or all", tok);
            return -EFAX_E_USAGE;
        }
        for (i = 0; i < nw; i++) {
            if (want[i] != efax_mem_host() && ndev == 0) {
                if (!strstr(skipped, want[i]->label))
                    snprintf(skipped + strlen(skipped), sizeof skipped - strlen(skipped), "%s%s",
                             skipped[0] ? ", " : "", want[i]->label);
                continue;
            }
            for (j = 0; j < *n; j++)
                if (kinds[j] == want[i]) break;
            if (j == *n && *n < max) kinds[(*n)++] = want[i];
        }
    }
    if (skipped[0]) snprintf(msg, len, "skipped: no CUDA device (%s variants): %s", skipped, why);
    return *n ? 0 : 1;
}

#define EFAX__CEIL_COPIES 20
#define EFAX__CEIL_WARM_MS 25
#define EFAX__CEIL_WARM_MAX 400

/* cudaMemcpyPeerAsync from device `from` to `to` (the same device: a copy within its memory):
   untimed copies for EFAX__CEIL_WARM_MS (at most EFAX__CEIL_WARM_MAX), then EFAX__CEIL_COPIES
   queued back to back behind one more untimed copy, with an event between each two, so that
   every timing spans exactly one copy and no host gap; *best and *low in GB/s. */
EFAX_PRIVATE int efax__peer_copy_gbs(int from, int to, size_t bytes, double *best, double *low, int *warm) {
    void *a = NULL, *b = NULL;
    cudaStream_t st = NULL;
    cudaEvent_t ev[EFAX__CEIL_COPIES + 1];
    int cur = 0, rc, peer = 0, i, nev = 0;
    uint64_t t0;
    cudaGetDevice(&cur);
    *best = *low = 0, *warm = 0;
    memset(ev, 0, sizeof ev);
    if ((rc = EFAX_CUDA(cudaSetDevice(to))) || (rc = EFAX_CUDA(cudaMalloc(&b, bytes))) ||
        (rc = EFAX_CUDA(cudaSetDevice(from))) || (rc = EFAX_CUDA(cudaMalloc(&a, bytes))) ||
        (rc = EFAX_CUDA(cudaMemset(a, 1, bytes))) ||
        (rc = EFAX_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking))))
        goto out;
    for (; nev < EFAX__CEIL_COPIES + 1 && !rc; nev++) rc = EFAX_CUDA(cudaEventCreate(&ev[nev]));
    if (rc) goto out;
    if (from != to && cudaDeviceCanAccessPeer(&peer, from, to) == cudaSuccess && peer) {
        cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
            rc = EFAX_CUDA(e);
            goto out;
        }
        (void)cudaGetLastError();
    }
    t0 = efax_now_ns();
    while (!rc && *warm < EFAX__CEIL_WARM_MAX &&
           (*warm < 2 || efax_now_ns() - t0 < EFAX__CEIL_WARM_MS * 1000000ull)) {
        for (i = 0; i < 4 && !rc; i++, ++*warm)
            rc = EFAX_CUDA(cudaMemcpyPeerAsync(b, to, a, from, bytes, st));
        if (!rc) rc = EFAX_CUDA(cudaStreamSynchronize(st));
    }
    if (!rc) { /* one more, so the stream is busy when ev[0] is recorded */
        rc = EFAX_CUDA(cudaMemcpyPeerAsync(b, to, a, from, bytes, st));
        ++*warm;
    }
    for (i = 0; i <= EFAX__CEIL_COPIES && !rc; i++) {
        if ((rc = EFAX_CUDA(cudaEventRecord(ev[i], st)))) break;
        if (i < EFAX__CEIL_COPIES) rc = EFAX_CUDA(cudaMemcpyPeerAsync(b, to, a, from, bytes, st));
    }
    if (!rc) rc = EFAX_CUDA(cudaEventSynchronize(ev[EFAX__CEIL_COPIES]));
    for (i = 0; i < EFAX__CEIL_COPIES && !rc; i++) {
        float ms = 0;
        double g;
        if ((rc = EFAX_CUDA(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]))) || ms <= 0) break;
        g = (double)bytes / (ms * 1e-3) / 1e9;
        if (g > *best) *best = g;
        if (*low == 0 || g < *low) *low = g;
    }
out:
    for (i = 0; i < nev; i++) cudaEventDestroy(ev[i]);
    if (st) cudaStreamDestroy(st);
    if (a) cudaFree(a);
    if (b) cudaFree(b);
    cudaSetDevice(cur);
    return rc;
}

EFAX_API int efax_cuda_ceiling(efax_boot *boot, size_t bytes, efax_ceiling *out) {
    struct who {
        char host[64];
        char pci[32];
    } me, *all;
    int dev = 0, rc = 0, p, q;
    size_t u = 0;
    memset(out, 0, sizeof *out);
    out->copies = EFAX__CEIL_COPIES;
    snprintf(out->what, sizeof out->what,
             "every other rank runs on another host (its NICs' line rate bounds it)");
    memset(&me, 0, sizeof me);
    efax__copy(me.host, sizeof me.host, boot->host);
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetPCIBusId(me.pci, sizeof me.pci, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        me.pci[0] = 0;
    }
    all = (struct who *)calloc((size_t)boot->size, sizeof *all);
    if (!all) return -FI_ENOMEM;
    if ((rc = efax_boot_allgather(boot, &me, sizeof me, all, -1)) || boot->rank != 0) {
        free(all);
        return rc;
    }
    /* ranks whose GPUs are one: each group once, named by its first rank */
    for (p = 0; p < boot->size; p++) {
        int n = 0, first = 1, d = -1;
        char ranks[96] = "";
        size_t ru = 0;
        if (!all[p].pci[0]) continue;
        for (q = 0; q < p; q++)
            if (!strcmp(all[q].host, all[p].host) && !strcmp(all[q].pci, all[p].pci)) break;
        if (q < p) continue;
        for (q = p; q < boot->size; q++)
            if (!strcmp(all[q].host, all[p].host) && !strcmp(all[q].pci, all[p].pci)) {
                n++;
                if (ru < sizeof ranks)
                    ru += (size_t)snprintf(ranks + ru, sizeof ranks - ru, "%s%d", first ? "" : ",", q);
                first = 0;
            }
        if (n < 2 || u >= sizeof out->shared) continue;
        if (strcmp(all[p].host, me.host) || cudaDeviceGetByPCIBusId(&d, all[p].pci) != cudaSuccess)
            (void)cudaGetLastError(), d = -1;
        if (d >= 0)
            u += (size_t)snprintf(out->shared + u, sizeof out->shared - u, "%sranks %s share GPU %d (%s)",
                                  u ? "; " : "", ranks, d, all[p].pci);
        else
            u += (size_t)snprintf(out->shared + u, sizeof out->shared - u, "%sranks %s share GPU %s on %s",
                                  u ? "; " : "", ranks, all[p].pci, all[p].host);
    }
    for (p = 1; p < boot->size && !rc; p++) {
        int to = -1, warm = 0;
        double best = 0, low = 0;
        if (strcmp(all[p].host, me.host)) continue;
        if (!all[p].pci[0] || cudaDeviceGetByPCIBusId(&to, all[p].pci) != cudaSuccess) {
            (void)cudaGetLastError();
            if (out->gbs <= 0)
                snprintf(out->what, sizeof out->what,
                         "rank %d's GPU (%s) is not visible to rank 0 (CUDA_VISIBLE_DEVICES per rank?)", p,
                         all[p].pci[0] ? all[p].pci : "unknown");
            continue;
        }
        if ((rc = efax__peer_copy_gbs(dev, to, bytes, &best, &low, &warm))) break;
        if (best > 0 && (out->gbs == 0 || best < out->gbs)) {
            out->gbs = best, out->low_gbs = low, out->warmup = warm;
            snprintf(out->what, sizeof out->what,
                     "cudaMemcpyPeerAsync GPU %d -> GPU %d%s, %zu MiB, measured in this run", dev, to,
                     dev == to ? " (one GPU: a copy within its memory)" : "", bytes >> 20);
        }
    }
    free(all);
    return rc;
}

EFAX_API bool efax_cuda_wants_hmem(const efax_mem_ops *const *kinds, int n) {
    for (int i = 0; i < n; i++)
        if (kinds[i] == efax_mem_device()) return true;
    return false;
}

EFAX_API int efax_cuda_use(const efax_mem_ops *const *kinds, int n, int local_rank, bool *hmem) {
    int dev;
    const char *fh = getenv("FI_HMEM");
    *hmem = efax_cuda_wants_hmem(kinds, n);
    for (int i = 0; i < n; i++)
        if (kinds[i] != efax_mem_host()) return efax_cuda_bind(local_rank, &dev);
    /* host memory alone, where libfabric will initialize CUDA anyway (FI_HMEM unset or naming cuda; the
       harness sets it to system where it can): its CUDA calls (efa's start-up probe, a cudaMalloc:
       efa_hmem.c) then make their context on this rank's GPU rather than every rank's on GPU 0 */
    if ((!fh || strstr(fh, "cuda")) && efax_cuda_devices(NULL, 0) > 0)
        return efax_cuda_bind(local_rank, &dev);
    return 0;
}

// >>queue (implementation) ---------------------------------------------------------------------

EFAX_API int efax_queue_init(efax_queue *q, uint32_t ncells, int placement) {
    int rc, dev = 0, v = 0;
    memset(q, 0, sizeof *q);
    if (ncells < 2 || (ncells & (ncells - 1))) {
        efax_log(NULL, 0, "queue: %u cells: the size must be a power of two, at least 2", ncells);
        return -FI_EINVAL;
    }
    q->ncells = ncells;
    q->placement = placement;
    if (placement == EFAX_QUEUE_DEVICE) {
        /* cells in device memory need the CPU to read device memory coherently */
        cudaGetDevice(&dev);
        if (cudaDeviceGetAttribute(&v, cudaDevAttrPageableMemoryAccessUsesHostPageTables, dev) !=
                cudaSuccess ||
            !v) {
            (void)cudaGetLastError();
            efax_log(NULL, 1,
                     "queue: cells in device memory need a CPU mapping of device memory (a coherent "
                     "platform such as Grace Hopper, or GDRCopy); this machine has none");
            return -FI_ENOSYS;
        }
        if ((rc = EFAX_CUDA(cudaMalloc((void **)&q->cells_d, sizeof(efax_qcell) * ncells)))) return rc;
        q->cells = q->cells_d;
        if ((rc = EFAX_CUDA(cudaMemset(q->cells_d, 0, sizeof(efax_qcell) * ncells)))) return rc;
    } else {
        if ((rc = EFAX_CUDA(cudaHostAlloc((void **)&q->cells, sizeof(efax_qcell) * ncells,
                                          cudaHostAllocMapped | cudaHostAllocPortable))) ||
            (rc = EFAX_CUDA(cudaHostGetDevicePointer((void **)&q->cells_d, q->cells, 0))))
            return rc;
        memset(q->cells, 0, sizeof(efax_qcell) * ncells);
    }
    if ((rc = EFAX_CUDA(
             cudaHostAlloc((void **)&q->head_h, 64, cudaHostAllocMapped | cudaHostAllocPortable))) ||
        (rc = EFAX_CUDA(cudaHostGetDevicePointer((void **)&q->head_d, q->head_h, 0))) ||
        (rc = EFAX_CUDA(cudaMalloc((void **)&q->dev, 2 * sizeof(unsigned long long)))) ||
        (rc = EFAX_CUDA(cudaMemset(q->dev, 0, 2 * sizeof(unsigned long long)))))
        return rc;
    memset(q->head_h, 0, 64);
    return 0;
}

EFAX_API void efax_queue_deinit(efax_queue *q) {
    if (q->placement == EFAX_QUEUE_DEVICE) {
        if (q->cells_d) cudaFree(q->cells_d);
    } else if (q->cells)
        cudaFreeHost(q->cells);
    if (q->head_h) cudaFreeHost(q->head_h);
    if (q->dev) cudaFree(q->dev);
    memset(q, 0, sizeof *q);
}

EFAX_API efax_queue_dev efax_queue_device(const efax_queue *q) {
    efax_queue_dev d;
    d.cells = q->cells_d;
    d.head = q->head_d;
    d.tail = q->dev;
    d.hcache = q->dev + 1;
    d.mask = q->ncells - 1;
    return d;
}

EFAX_API int efax_queue_pop(efax_queue *q, uint64_t payload[EFAX_QUEUE_WORDS]) {
    efax_qcell *c = &q->cells[q->head & (q->ncells - 1)];
    if (__atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) != q->head + 1) {
        /* nothing published: tell producers where we are, in case one waits for room */
        if (q->unpublished) __atomic_store_n(q->head_h, q->head, __ATOMIC_RELEASE), q->unpublished = 0;
        return 0;
    }
    memcpy(payload, (const void *)c->w, sizeof c->w);
    q->head++;
    /* producers read the position only when the ring looks full: publishing every 32 pops is enough */
    if (++q->unpublished >= 32) __atomic_store_n(q->head_h, q->head, __ATOMIC_RELEASE), q->unpublished = 0;
    return 1;
}

/* efax_queue_roundtrip's producer: push, wait for the CPU's answer (it popped), push the next. */
__global__ void efax__k_pingpong(efax_queue_dev q, const uint64_t *answer, int n, int nwords) {
    uint64_t w[EFAX_QUEUE_WORDS] = {0};
    for (int i = 0; i < n; i++) {
        w[0] = (uint64_t)i;
        efax_queue_push(&q, w, nwords);
        while (efax_ld_acquire_sys(answer) != (uint64_t)i + 1) {}
    }
}

EFAX_API int efax_queue_roundtrip(efax_queue *q, int n, int nwords, int timeout_ms, double *us) {
    volatile uint64_t *answer = NULL;
    uint64_t *answer_d, w[EFAX_QUEUE_WORDS], prev = 0, deadline = efax_deadline_ns(timeout_ms);
    cudaStream_t s;
    int i = 0;
    if (EFAX_CUDA(cudaHostAlloc((void **)&answer, 64, cudaHostAllocMapped)) ||
        EFAX_CUDA(cudaHostGetDevicePointer((void **)&answer_d, (void *)answer, 0)) ||
        EFAX_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)))
        return -EFAX_E_CUDA;
    *answer = 0;
    efax__k_pingpong<<<1, 1, 0, s>>>(efax_queue_device(q), answer_d, n, nwords);
    while (i < n && efax_now_ns() < deadline) {
        if (!efax_queue_pop(q, w)) continue;
        uint64_t now = efax_now_ns();
        if (i > 0) us[i - 1] = (double)(now - prev) / 1e3;
        prev = now;
        __atomic_store_n((uint64_t *)answer, (uint64_t)++i,
                         __ATOMIC_RELEASE); /* the producer may push the next */
    }
    EFAX_CUDA(cudaStreamSynchronize(s));
    cudaStreamDestroy(s);
    cudaFreeHost((void *)answer);
    return i == n ? 0 : -FI_ETIMEDOUT;
}

// >>proxy (implementation) ---------------------------------------------------------------------

struct efax__pslot {
    efax_xfer x;
    efax__pslot *next;
    efax_proxy *p;
    uint32_t prod;
};

struct efax__pprod {
    uint64_t taken;           /* commands run or refused, in the producer's order (fences included) */
    uint64_t completed;       /* of those, completed (what quiet waits on) */
    uint64_t fence_at;        /* number of a fence waiting for everything before it, or 0 */
    int32_t dq_head, dq_tail; /* commands held back behind that fence */
};

EFAX_PRIVATE void efax__proxy_publish(efax_proxy *p, uint32_t prod) {
    __atomic_store_n(&p->done_h[prod], p->prod[prod].completed, __ATOMIC_RELEASE);
}

EFAX_PRIVATE void efax__proxy_done(void *user, efax_xfer *x) {
    efax__pslot *sl = (efax__pslot *)user;
    efax_proxy *p = sl->p;
    if (x->status && !p->status) p->status = x->status;
    p->prod[sl->prod].completed++;
    efax__proxy_publish(p, sl->prod);
    sl->next = p->free_slots;
    p->free_slots = sl;
    p->nfree++;
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
EFAX_PRIVATE void
efax__proxy_bad(efax_proxy *p, const uint64_t *w, const char *fmt, ...) {
    char why[256];
    va_list ap;
    uint32_t prod = (uint32_t)(w[0] >> 16) & 0xffff;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (p->bad++ < 8)
        efax_log(p->d.ctx, 0,
                 "proxy: producer %u command %llu refused: %s (rank %d, src offset %llu, dst offset %llu, "
                 "%llu bytes); nothing written",
                 prod, (unsigned long long)w[5], why, (int)(uint32_t)(w[0] >> 32), (unsigned long long)w[1],
                 (unsigned long long)w[2], (unsigned long long)w[3]);
    if (prod < p->d.producers) { /* counted as completed, so the producer's quiet returns */
        p->prod[prod].completed++;
        efax__proxy_publish(p, prod);
    }
}

/* Runs one command now (its producer has no fence waiting): decoded and checked here, in the
   producer's order, so a refused command counts as done in its place and a fence after it
   still completes. */
EFAX_PRIVATE void efax__proxy_exec(efax_proxy *p, const uint64_t *w) {
    efax__pprod *pp = &p->prod[(w[0] >> 16) & 0xffff]; /* the id was checked by efax__proxy_take */
    efax_ctx *ctx = p->d.ctx;
    efax_cmd c;
    efax_write_desc wd;
    char why[200];
    efax__pslot *sl;
    int rc = efax_cmd_decode(w, p->d.producers, pp->taken + 1, efax_ctx_rank(ctx), efax_ctx_size(ctx),
                             p->d.src->len, p->d.dst, &c, why, sizeof why);
    uint64_t number = ++pp->taken;
    if (rc) return efax__proxy_bad(p, w, "%s", why);
    if (c.op == EFAX_CMD_FENCE) {
        if (pp->completed + 1 == number) { /* nothing before it is outstanding */
            pp->completed++;
            p->fences++;
            efax__proxy_publish(p, c.producer);
        } else {
            pp->fence_at = number;
            p->nfenced++;
        }
        return;
    }
    if (pp->fence_at) p->fence_violations++; /* cannot happen: fenced commands are held back */
    sl = p->free_slots;
    p->free_slots = sl->next;
    p->nfree--;
    sl->prod = c.producer;
    memset(&wd, 0, sizeof wd);
    wd.from = efax_ctx_rank(ctx);
    wd.to = c.dst;
    wd.src = &p->d.src->mr;
    wd.src_off = c.soff;
    wd.dst = p->d.dst;
    wd.dst_off = c.doff;
    wd.size = c.size;
    wd.mode = (c.flags & EFAX_PUT_SPLIT) ? EFAX_MODE_SPLIT
                                         : EFAX_MODE_SINGLE; /* index 0: these modes do not rotate */
    wd.chunk = p->d.chunk;
    wd.tag = c.tag;
    wd.seq = c.seq;
    wd.on_done = efax__proxy_done; /* the slot returns as its write completes */
    wd.done_user = sl;
    rc = efax_write(ctx, &sl->x, &wd, NULL);
    if (rc) { /* efax_write said why; the slot goes back and the command counts as done */
        sl->next = p->free_slots;
        p->free_slots = sl;
        p->nfree++;
        if (!p->status) p->status = rc;
        pp->completed++;
        efax__proxy_publish(p, c.producer);
        return;
    }
    p->puts++;
    p->bytes += c.size;
}

/* A command from the queue: run it, or hold it back behind its producer's fence. */
EFAX_PRIVATE void efax__proxy_take(efax_proxy *p, const uint64_t *w) {
    uint32_t prod = (uint32_t)(w[0] >> 16) & 0xffff;
    efax__pprod *pp;
    int32_t i;
    if (prod >= p->d.producers) return efax__proxy_bad(p, w, "producer id >= %u", p->d.producers);
    pp = &p->prod[prod];
    if (!pp->fence_at && pp->dq_head < 0) return efax__proxy_exec(p, w);
    i = p->free_deferred; /* room is guaranteed: the main loop pops only while some is free */
    p->free_deferred = p->deferred_next[i];
    memcpy(p->deferred[i], w, sizeof p->deferred[i]);
    p->deferred_next[i] = -1;
    if (pp->dq_tail >= 0)
        p->deferred_next[pp->dq_tail] = i;
    else
        pp->dq_head = i;
    pp->dq_tail = i;
    p->ndeferred++;
}

/* Fences whose earlier commands completed complete now; what they held back runs. */
EFAX_PRIVATE void efax__proxy_fences(efax_proxy *p) {
    for (uint32_t k = 0; k < p->d.producers && (p->nfenced || p->ndeferred); k++) {
        efax__pprod *pp = &p->prod[k];
        if (pp->fence_at && pp->completed + 1 == pp->fence_at) {
            pp->fence_at = 0;
            pp->completed++;
            p->fences++;
            p->nfenced--;
            efax__proxy_publish(p, k);
        }
        while (!pp->fence_at && pp->dq_head >= 0 && p->nfree > 0) {
            int32_t i = pp->dq_head;
            pp->dq_head = p->deferred_next[i];
            if (pp->dq_head < 0) pp->dq_tail = -1;
            p->ndeferred--;
            p->deferred_posts++;
            efax__proxy_exec(p, p->deferred[i]);
            p->deferred_next[i] = p->free_deferred;
            p->free_deferred = i;
        }
    }
}

EFAX_PRIVATE void *efax__proxy_main(void *arg) {
    efax_proxy *p = (efax_proxy *)arg;
    efax_ctx *ctx = p->d.ctx;
    uint64_t w[EFAX_QUEUE_WORDS], deadline = 0;
    unsigned idle = 0;
    if (p->d.device >= 0) {
        cudaSetDevice(p->d.device);
        efax_cuda_pin_near(p->d.device);
    }
    for (;;) {
        int got = efax_progress(ctx), popped = 0, state;
        if (got < 0 && !p->status) p->status = got;
        if (p->nfenced || p->ndeferred) efax__proxy_fences(p);
        while (p->nfree > 0 && p->free_deferred >= 0 && popped < 64 && efax_queue_pop(&p->q, w)) {
            efax__proxy_take(p, w);
            popped++;
        }
        state = __atomic_load_n(&p->watch_state, __ATOMIC_ACQUIRE);
        if (state == 1 && efax_imm_count(ctx, p->watch_peer, p->watch_tag, p->watch_seq) >= p->watch_count) {
            int rc = efax_wait_imm(ctx, p->watch_peer, p->watch_tag, p->watch_seq, p->watch_count, -1);
            p->watch_ns = efax_now_ns();
            __atomic_store_n(&p->watch_state, rc ? -1 : 2, __ATOMIC_RELEASE);
        }
        if (__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
            if (!popped && p->nfree == p->d.inflight && !p->ndeferred && !p->nfenced) break;
            if (!deadline)
                deadline = efax_deadline_ns(__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE));
            else if (efax_now_ns() > deadline) {
                efax_log(ctx, 0, "proxy: %d write(s) still in flight and %d command(s) held back at stop",
                         p->d.inflight - p->nfree, p->ndeferred);
                if (!p->status) p->status = -FI_ETIMEDOUT;
                break;
            }
        }
        efax__idle(got + popped, &idle);
    }
    return NULL;
}

EFAX_API int efax_proxy_init(efax_proxy *p, const efax_proxy_desc *d) {
    int rc, i;
    memset(p, 0, sizeof *p);
    p->d = *d;
    if (!p->d.queue_cells) p->d.queue_cells = 4096;
    if (p->d.inflight <= 0) p->d.inflight = 512;
    if (!d->ctx || !d->src || !d->dst || !d->dst->remote || !d->producers || d->producers > 65535) {
        efax_log(d->ctx, 0,
                 "proxy: needs a context, a source buffer, an exchanged destination and 1..65535 producers");
        return -FI_EINVAL;
    }
    if ((rc = efax_queue_init(&p->q, p->d.queue_cells, EFAX_QUEUE_HOST))) return rc;
    if ((rc = EFAX_CUDA(cudaHostAlloc((void **)&p->done_h, sizeof(uint64_t) * d->producers,
                                      cudaHostAllocMapped | cudaHostAllocPortable))) ||
        (rc = EFAX_CUDA(cudaHostGetDevicePointer((void **)&p->done_d, p->done_h, 0))))
        return rc;
    memset(p->done_h, 0, sizeof(uint64_t) * d->producers);
    p->slots = (efax__pslot *)calloc((size_t)p->d.inflight, sizeof(efax__pslot));
    p->prod = (efax__pprod *)calloc(d->producers, sizeof(efax__pprod));
    p->deferred = (uint64_t(*)[EFAX_QUEUE_WORDS])calloc((size_t)p->d.queue_cells * 2, sizeof *p->deferred);
    p->deferred_next = (int32_t *)calloc((size_t)p->d.queue_cells * 2, sizeof(int32_t));
    if (!p->slots || !p->prod || !p->deferred || !p->deferred_next) return -FI_ENOMEM;
    for (i = 0; i < p->d.inflight; i++) {
        p->slots[i].p = p;
        p->slots[i].next = p->free_slots;
        p->free_slots = &p->slots[i];
    }
    p->nfree = p->d.inflight;
    for (i = 0; i < (int)p->d.queue_cells * 2; i++)
        p->deferred_next[i] = i + 1 < (int)p->d.queue_cells * 2 ? i + 1 : -1;
    p->free_deferred = 0;
    for (uint32_t k = 0; k < d->producers; k++) p->prod[k].dq_head = p->prod[k].dq_tail = -1;
    return 0;
}

EFAX_API int efax_proxy_start(efax_proxy *p) {
    int rc;
    if (p->running) return 0;
    __atomic_store_n(&p->stop, 0, __ATOMIC_RELEASE);
    if ((rc = pthread_create(&p->thread, NULL, efax__proxy_main, p))) {
        efax_log(p->d.ctx, 0, "proxy: pthread_create failed: %s", strerror(rc));
        return -rc;
    }
    p->running = true;
    return 0;
}

EFAX_API int efax_proxy_stop(efax_proxy *p, int timeout_ms) {
    if (!p->running) return p->status;
    /* p->stop holds the limit, and 0 means "run on": a limit of 0 stops at once, after 1 ms */
    timeout_ms = timeout_ms < 0 ? efax_ctx_timeout_ms(p->d.ctx) : timeout_ms;
    __atomic_store_n(&p->stop, timeout_ms > 0 ? timeout_ms : 1, __ATOMIC_RELEASE);
    pthread_join(p->thread, NULL);
    p->running = false;
    if (p->bad + p->fence_violations > p->bad_said) { /* refused commands wrote nothing: the run is wrong */
        p->bad_said = p->bad + p->fence_violations;
        efax_log(p->d.ctx, 0, "proxy: %llu bad command(s) refused, %llu fence violation(s)",
                 (unsigned long long)p->bad, (unsigned long long)p->fence_violations);
    }
    if (p->bad_said && !p->status) p->status = -EFAX_E_PEER;
    return p->status;
}

EFAX_API void efax_proxy_deinit(efax_proxy *p) {
    if (p->running) efax_proxy_stop(p, 0);
    efax_queue_deinit(&p->q);
    if (p->done_h) cudaFreeHost(p->done_h);
    free(p->slots), free(p->prod), free(p->deferred), free(p->deferred_next);
    memset(p, 0, sizeof *p);
}

EFAX_API efax_proxy_dev efax_proxy_device(const efax_proxy *p) {
    efax_proxy_dev d;
    d.q = efax_queue_device(&p->q);
    d.done = p->done_d;
    d.producers = p->d.producers;
    return d;
}

EFAX_API void efax_proxy_watch(efax_proxy *p, int peer, int tag, uint32_t seq, uint32_t count) {
    p->watch_peer = peer;
    p->watch_tag = tag;
    p->watch_seq = seq;
    p->watch_count = count;
    __atomic_store_n(&p->watch_state, 1, __ATOMIC_RELEASE);
}

EFAX_API int efax_proxy_watch_wait(efax_proxy *p, int timeout_ms, uint64_t *t_ns) {
    uint64_t deadline = efax_deadline_ns(timeout_ms);
    int st;
    while ((st = __atomic_load_n(&p->watch_state, __ATOMIC_ACQUIRE)) == 1) {
        if (efax_now_ns() > deadline) {
            efax_log(p->d.ctx, 0, "proxy: timed out after %d ms waiting for %u confirmation(s) from rank %d",
                     timeout_ms, p->watch_count, p->watch_peer);
            return -FI_ETIMEDOUT;
        }
        sched_yield();
    }
    __atomic_store_n(&p->watch_state, 0, __ATOMIC_RELEASE);
    if (t_ns) *t_ns = p->watch_ns;
    return st == 2 ? 0 : -EFAX_E_PEER;
}

// >>ipc (implementation) -----------------------------------------------------------------------

/* The record (efax_ipc_record) and its check (efax_ipc_record_check) are in efax.h. */
static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(((efax_ipc_record *)0)->handle),
              "an IPC handle is 64 bytes");

EFAX_API int efax_ipc_open(efax_ipc *ipc, efax_boot *boot, void *dptr, size_t len) {
    efax_ipc_record me, *all;
    cudaIpcMemHandle_t h;
    int r, rc;
    memset(ipc, 0, sizeof *ipc);
    memset(&me, 0, sizeof me);
    ipc->size = boot->size;
    ipc->rank = boot->rank;
    ipc->own = dptr;
    me.magic = EFAX_IPC_MAGIC;
    me.wire = EFAX_WIRE_VERSION;
    me.rank = boot->rank;
    me.len = len;
    efax__copy(me.host, sizeof me.host, boot->host);
    if ((rc = EFAX_CUDA(cudaGetDevice(&me.device))) || (rc = EFAX_CUDA(cudaIpcGetMemHandle(&h, dptr))))
        return rc;
    memcpy(me.handle, &h, sizeof me.handle);
    all = (efax_ipc_record *)calloc((size_t)boot->size, sizeof *all);
    ipc->peer = (void **)calloc((size_t)boot->size, sizeof(void *));
    ipc->len = (size_t *)calloc((size_t)boot->size, sizeof(size_t));
    ipc->device = (int *)calloc((size_t)boot->size, sizeof(int));
    if (!all || !ipc->peer || !ipc->len || !ipc->device) {
        free(all);
        return -FI_ENOMEM;
    }
    if ((rc = efax_boot_allgather(boot, &me, sizeof me, all, -1))) {
        free(all);
        return rc;
    }
    for (r = 0; r < boot->size; r++) {
        const efax_ipc_record *b = &all[r];
        char why[200];
        bool local;
        ipc->device[r] = -1;
        if ((rc = efax_ipc_record_check(b, r, me.host, &local, why, sizeof why))) {
            efax_log(NULL, 0, "ipc: %s", why);
            break;
        }
        if (!local) continue; /* another host: not reachable over NVLink */
        ipc->len[r] = b->len;
        ipc->device[r] = b->device;
        if (r == boot->rank) {
            ipc->peer[r] = dptr;
            continue;
        }
        memcpy(&h, b->handle, sizeof h);
        if ((rc = EFAX_CUDA(cudaIpcOpenMemHandle(&ipc->peer[r], h, cudaIpcMemLazyEnablePeerAccess)))) {
            efax_log(NULL, 0,
                     "ipc: cannot open rank %d's buffer (device %d on %s): are both GPUs visible to both "
                     "processes?",
                     r, b->device, b->host);
            break;
        }
    }
    free(all);
    if (rc) efax_ipc_close(ipc);
    return rc;
}

EFAX_API void efax_ipc_close(efax_ipc *ipc) {
    for (int r = 0; ipc->peer && r < ipc->size; r++)
        if (ipc->peer[r] && r != ipc->rank) cudaIpcCloseMemHandle(ipc->peer[r]);
    free(ipc->peer), free(ipc->len), free(ipc->device);
    memset(ipc, 0, sizeof *ipc);
}

/* Grid-stride copy with 16-byte accesses: U loads in flight (through the read-only path)
   before the U stores. */
template <int U>
static __device__ __forceinline__ void efax__copy16(uint4 *dst, const uint4 *src, size_t n, size_t i,
                                                    size_t stride) {
    for (; i + (U - 1) * stride < n; i += U * stride) {
        uint4 v[U];
#pragma unroll
        for (int k = 0; k < U; k++) v[k] = __ldg(&src[i + k * stride]);
#pragma unroll
        for (int k = 0; k < U; k++) dst[i + k * stride] = v[k];
    }
    for (; i < n; i += stride) dst[i] = __ldg(&src[i]);
}

template <int U> __global__ void efax__k_copy(uint4 *dst, const uint4 *src, size_t n, int blocked) {
    if (blocked) { /* this block's contiguous slice, block-stride inside it */
        size_t per = (n + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * per, hi = lo + per < n ? lo + per : n;
        if (lo < hi) efax__copy16<U>(dst + lo, src + lo, hi - lo, threadIdx.x, blockDim.x);
    } else {
        efax__copy16<U>(dst, src, n, blockIdx.x * (size_t)blockDim.x + threadIdx.x,
                        (size_t)gridDim.x * blockDim.x);
    }
    __threadfence_system(); /* the copy is visible to the peer GPU and the CPU before completion is seen */
}

#define EFAX__TMA_TILE 16384
#define EFAX__TMA_STAGES 2
static __device__ __forceinline__ uint32_t efax__smem(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* Each block: its contiguous slice in 16 KiB tiles, double-buffered in shared memory: a tile is
   loaded by cp.async.bulk (completing on an mbarrier), then stored to the destination by one
   bulk write; a buffer is refilled once its store has read it. */
__global__ void efax__k_copy_tma(uint8_t *dst, const uint8_t *src, size_t bytes) {
#if __CUDA_ARCH__ >= 900
    __shared__ __align__(128) uint8_t buf[EFAX__TMA_STAGES][EFAX__TMA_TILE];
    __shared__ __align__(8) uint64_t bar[EFAX__TMA_STAGES];
    size_t tiles = (bytes + EFAX__TMA_TILE - 1) / EFAX__TMA_TILE, per = (tiles + gridDim.x - 1) / gridDim.x;
    size_t t0 = blockIdx.x * per, t1 = t0 + per < tiles ? t0 + per : tiles, n = t1 > t0 ? t1 - t0 : 0;
    if (threadIdx.x == 0 && n) {
        for (int k = 0; k < EFAX__TMA_STAGES; k++)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(efax__smem(&bar[k])) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        for (size_t t = 0; t < n + EFAX__TMA_STAGES; t++) {
            /* first store the oldest tile loaded (tile t+1-STAGES), then load tile t into the buffer
               whose store is now the second newest: loads run STAGES-1 tiles ahead of stores */
            if (t + 1 >= EFAX__TMA_STAGES && t + 1 - EFAX__TMA_STAGES < n) {
                size_t u = t + 1 - EFAX__TMA_STAGES, off = (t0 + u) * EFAX__TMA_TILE;
                int k = (int)(u % EFAX__TMA_STAGES);
                uint32_t len = (uint32_t)(bytes - off < EFAX__TMA_TILE ? bytes - off : EFAX__TMA_TILE),
                         ok = 0, phase = (uint32_t)((u / EFAX__TMA_STAGES) & 1);
                do
                    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
                                 "selp.u32 %0, 1, 0, p; }"
                                 : "=r"(ok)
                                 : "r"(efax__smem(&bar[k])), "r"(phase)
                                 : "memory");
                while (!ok);
                asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + off),
                             "r"(efax__smem(buf[k])), "r"(len)
                             : "memory");
                asm volatile("cp.async.bulk.commit_group;" ::: "memory");
            }
            if (t < n) {
                int k = (int)(t % EFAX__TMA_STAGES);
                size_t off = (t0 + t) * EFAX__TMA_TILE;
                uint32_t len = (uint32_t)(bytes - off < EFAX__TMA_TILE ? bytes - off : EFAX__TMA_TILE);
                if (t >= EFAX__TMA_STAGES) asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
                asm volatile(
                    "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(efax__smem(&bar[k])),
                    "r"(len)
                    : "memory");
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
                             "%2, [%3];" ::"r"(efax__smem(buf[k])),
                             "l"(src + off), "r"(len), "r"(efax__smem(&bar[k]))
                             : "memory");
            }
        }
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
    __threadfence_system();
#endif
}

EFAX_API cudaError_t efax_ipc_copy(void *dst, const void *src, size_t bytes, int grid, int block, int unroll,
                                   unsigned flags, cudaStream_t s) {
    int blocked = (flags & EFAX_COPY_BLOCKED) != 0;
    if (flags & EFAX_COPY_TMA) {
        if (bytes % 16 || ((uintptr_t)dst | (uintptr_t)src) % 16) return cudaErrorInvalidValue;
        efax__k_copy_tma<<<grid, 32, 0, s>>>((uint8_t *)dst, (const uint8_t *)src, bytes);
        return cudaGetLastError();
    }
    if (bytes % 16 || ((uintptr_t)dst | (uintptr_t)src) % 16 || (unroll != 4 && unroll != 8))
        return cudaErrorInvalidValue;
    if (unroll == 8)
        efax__k_copy<8><<<grid, block, 0, s>>>((uint4 *)dst, (const uint4 *)src, bytes / 16, blocked);
    else
        efax__k_copy<4><<<grid, block, 0, s>>>((uint4 *)dst, (const uint4 *)src, bytes / 16, blocked);
    return cudaGetLastError();
}

/* Two pattern words per 16-byte store, grid-stride. */
__global__ void efax__k_fill16(uint4 *dst, uint64_t n, uint64_t seed) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t lo = efax_pattern_word(seed, 2 * i), hi = efax_pattern_word(seed, 2 * i + 1);
        dst[i] = make_uint4((uint32_t)lo, (uint32_t)(lo >> 32), (uint32_t)hi, (uint32_t)(hi >> 32));
    }
    __threadfence_system();
}

EFAX_API cudaError_t efax_ipc_fill(void *dst, size_t bytes, int rank, uint64_t iter, int grid, int block,
                                   cudaStream_t s) {
    if (bytes % 16 || (uintptr_t)dst % 16 || grid < 1 || block < 1) return cudaErrorInvalidValue;
    efax__k_fill16<<<grid, block, 0, s>>>((uint4 *)dst, bytes / 16, efax_pattern_seed(rank, iter));
    return cudaGetLastError();
}

/* The persistent copy kernel: block 0's thread 0 waits for a new job sequence in mapped host
   memory and passes the job on in device memory; every block's thread 0 waits for it there;
   the blocks copy, fence, count themselves done in device memory, and the last one rings the
   host. */
__global__ void efax__k_persist(uint64_t *job, uint64_t *dev, int unroll) {
    __shared__ uint64_t s_seq, s_dst, s_src, s_bytes;
    uint64_t last = 0;
    for (;;) {
        if (threadIdx.x == 0) {
            uint64_t q;
            if (blockIdx.x == 0) {
                while ((q = efax_ld_acquire_sys(&job[0])) == last) __nanosleep(32);
                dev[1] = efax_ld_acquire_sys(&job[1]), dev[2] = efax_ld_acquire_sys(&job[2]),
                dev[3] = efax_ld_acquire_sys(&job[3]);
                asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(dev), "l"(q) : "memory");
            } else {
                do asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(q) : "l"(dev) : "memory");
                while (q == last);
            }
            s_seq = q;
            s_dst = dev[1];
            s_src = dev[2];
            s_bytes = dev[3];
        }
        __syncthreads();
        if (s_seq == UINT64_MAX) return;
        if (unroll == 8)
            efax__copy16<8>((uint4 *)s_dst, (const uint4 *)s_src, s_bytes / 16,
                            blockIdx.x * (size_t)blockDim.x + threadIdx.x, (size_t)gridDim.x * blockDim.x);
        else
            efax__copy16<4>((uint4 *)s_dst, (const uint4 *)s_src, s_bytes / 16,
                            blockIdx.x * (size_t)blockDim.x + threadIdx.x, (size_t)gridDim.x * blockDim.x);
        __threadfence_system();
        last = s_seq;
        __syncthreads();
        if (threadIdx.x == 0 &&
            atomicAdd((unsigned long long *)&dev[4], 1ull) == (unsigned long long)gridDim.x - 1) {
            dev[4] = 0; /* the last block: every block copied and fenced */
            efax_st_release_sys(&job[8], last);
        }
    }
}

EFAX_API int efax_copy_engine_start(efax_copy_engine *e, int grid, int block, int unroll) {
    int rc;
    memset(e, 0, sizeof *e);
    e->grid = grid;
    e->block = block;
    if ((rc = EFAX_CUDA(cudaHostAlloc((void **)&e->job, 128, cudaHostAllocMapped))) ||
        (rc = EFAX_CUDA(cudaHostGetDevicePointer((void **)&e->job_d, (void *)e->job, 0))) ||
        (rc = EFAX_CUDA(cudaMalloc((void **)&e->dev, 8 * sizeof(uint64_t)))) ||
        (rc = EFAX_CUDA(cudaMemset(e->dev, 0, 8 * sizeof(uint64_t)))) ||
        (rc = EFAX_CUDA(cudaStreamCreateWithFlags(&e->stream, cudaStreamNonBlocking))))
        return rc;
    memset((void *)e->job, 0, 128);
    efax__k_persist<<<grid, block, 0, e->stream>>>(e->job_d, e->dev, unroll);
    if ((rc = EFAX_CUDA(cudaGetLastError()))) return rc;
    e->running = true;
    return 0;
}

EFAX_API int efax_copy_engine_run(efax_copy_engine *e, void *dst, const void *src, size_t bytes,
                                  int timeout_ms) {
    uint64_t deadline = efax_deadline_ns(timeout_ms), seq = ++e->seq;
    if (bytes % 16) return -FI_EINVAL;
    e->job[1] = (uint64_t)(uintptr_t)dst;
    e->job[2] = (uint64_t)(uintptr_t)src;
    e->job[3] = bytes;
    __atomic_store_n((uint64_t *)&e->job[0], seq, __ATOMIC_RELEASE); /* after the parameters */
    while (__atomic_load_n((uint64_t *)&e->job[8], __ATOMIC_ACQUIRE) != seq)
        if (efax_now_ns() > deadline) {
            efax_log(NULL, 0, "copy engine: job %llu not finished within %d ms", (unsigned long long)seq,
                     timeout_ms);
            return -FI_ETIMEDOUT;
        }
    return 0;
}

EFAX_API int efax_copy_engine_stop(efax_copy_engine *e) {
    int rc = 0;
    if (e->running) {
        __atomic_store_n((uint64_t *)&e->job[0], UINT64_MAX, __ATOMIC_RELEASE);
        rc = EFAX_CUDA(cudaStreamSynchronize(e->stream));
    }
    if (e->stream) cudaStreamDestroy(e->stream);
    if (e->job) cudaFreeHost((void *)e->job);
    if (e->dev) cudaFree(e->dev);
    memset(e, 0, sizeof *e);
    return rc;
}

/* One round of efax_ipc_time: every copy once; host_ms (when not NULL) adds the host's time of each. */
static int efax__ipc_round(const efax_ipc_run *r, int n, void *const *dst, const void *const *src,
                           size_t bytes, cudaStream_t *s, efax_copy_engine *eng, double *host_ms) {
    int rc = 0;
    for (int t = 0; t < n && !rc; t++) {
        uint64_t t0 = efax_now_ns();
        if (r->how == EFAX_IPC_STORES)
            rc = EFAX_CUDA(efax_ipc_fill(dst[t], bytes, r->rank, r->iter, r->grid, r->block, s[t]));
        else if (r->how == EFAX_IPC_KERNEL)
            rc =
                EFAX_CUDA(efax_ipc_copy(dst[t], src[t], bytes, r->grid, r->block, r->unroll, r->flags, s[t]));
        else if (r->how == EFAX_IPC_MEMCPY)
            rc = EFAX_CUDA(cudaMemcpyAsync(dst[t], src[t], bytes, cudaMemcpyDeviceToDevice, s[t]));
        else
            rc = efax_copy_engine_run(eng, dst[t], src[t], bytes, 60000);
        if (host_ms) *host_ms += (double)(efax_now_ns() - t0) / 1e6;
    }
    return rc;
}

EFAX_API int efax_ipc_time(const efax_ipc_run *r, int n, void *const *dst, const void *const *src,
                           size_t bytes, double *gbs) {
    bool persist = r->how == EFAX_IPC_PERSIST;
    cudaStream_t s[64] = {};
    cudaEvent_t e0 = NULL, e1 = NULL;
    efax_copy_engine eng = {};
    float ev_ms = 0;
    double ms = 0;
    int rc = 0;
    *gbs = 0;
    if (n < 1 || n > 64) return -FI_EINVAL;
    for (int t = 0; t < n && !persist && !rc; t++)
        rc = EFAX_CUDA(cudaStreamCreateWithFlags(&s[t], cudaStreamNonBlocking));
    if (!rc && !persist && !(rc = EFAX_CUDA(cudaEventCreate(&e0)))) rc = EFAX_CUDA(cudaEventCreate(&e1));
    if (!rc && persist) rc = efax_copy_engine_start(&eng, r->grid, r->block, r->unroll);
    for (int it = -2; it < r->iters && !rc; it++) {
        if (it == 0 && !persist)
            EFAX_CUDA(cudaEventRecord(e0, s[0])); /* the timed rounds start: every stream after it */
        for (int t = 1; it == 0 && !persist && t < n; t++) EFAX_CUDA(cudaStreamWaitEvent(s[t], e0, 0));
        rc = efax__ipc_round(r, n, dst, src, bytes, s, &eng, persist && it >= 0 ? &ms : NULL);
    }
    for (int t = 1; !rc && !persist && t < n; t++) /* join the streams */
        if (!(rc = EFAX_CUDA(cudaEventRecord(e1, s[t])))) rc = EFAX_CUDA(cudaStreamWaitEvent(s[0], e1, 0));
    if (!rc && !persist && !(rc = EFAX_CUDA(cudaEventRecord(e1, s[0]))) &&
        !(rc = EFAX_CUDA(cudaEventSynchronize(e1))) &&
        !(rc = EFAX_CUDA(cudaEventElapsedTime(&ev_ms, e0, e1))))
        ms = ev_ms;
    if (persist) efax_copy_engine_stop(&eng);
    for (int t = 0; t < n; t++)
        if (s[t]) cudaStreamDestroy(s[t]);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (!rc) *gbs = (double)bytes * r->iters / (ms * 1e-3) / 1e9;
    return rc;
}

#endif /* EFAX_IMPLEMENTATION */

#endif /* EFAX_CUDA_H */
