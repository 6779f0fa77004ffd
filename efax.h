/* efax.h — raw inter-node communication over libfabric (AWS EFA, tcp, shm), in one header.

   What it is
   ----------
   A small C library for measuring and driving what the network itself does, without NCCL
   in the way: fabric set-up on one or many NICs, memory registration, completion polling,
   two-sided SEND/RECV, one-sided RDMA WRITE with 32-bit immediate data, multi-NIC
   schedules (single, split, round-robin, stripe) and a PMIx or TCP bootstrap: the fabric
   library alone, for a transfer engine to vendor.

   Three headers, one concern each (stb keeps one per header; sokol_glue.h joins two):
       efax.h        the fabric: boot, context, memory (with the memory kinds and the
                     verification pattern every header checks bytes with), operations, schedules
       efax_cuda.h   the GPU: device memory, GPU<->NIC affinity, the GPU->CPU queue, the CPU
                     proxy, NVLink IPC (includes nothing of the harness)
       efax_bench.h  the benchmark harness of drivers/: options, the sweep, results, the report
   Which header a change belongs in: a transfer, a registration, a schedule or a wire format:
   here; anything that needs CUDA: efax_cuda.h; how a benchmark is driven, timed or reported:
   efax_bench.h. Dependencies point one way: efax_bench.h -> efax_cuda.h -> efax.h.

   Reading order: the engine first, in declarations and implementation alike (// >> anchors):
   config, context, memory, operations, schedule (writes over NICs, arrivals, batches), then
   bootstrap, then what diagnoses and tests it: topology, counters, faults (the layer that makes
   tcp and shm misbehave as efa may, zero cost when off), gpu wire.

   Use
   ---
   Define EFAX_IMPLEMENTATION in exactly one C or C++ file before including this header:

       #define EFAX_IMPLEMENTATION
       #include "efax.h"

   Build a program in one line:

       cc -O2 -I. prog.c -o prog $(pkg-config --cflags --libs libfabric pmix)
       cc -O2 -I. -DEFAX_NO_PMIX prog.c -o prog $(pkg-config --cflags --libs libfabric)

   Launch (every rank runs the same program):

       mpirun -np 2 ./prog                      # Open MPI (its mpirun is a PMIx server)
       srun --mpi=pmix -N 2 ./prog              # Slurm
       EFAX_RANK=0 EFAX_SIZE=2 EFAX_ROOT=10.0.0.1:29500 EFAX_TOKEN=s3cret ./prog   # on host A
       EFAX_RANK=1 EFAX_SIZE=2 EFAX_ROOT=10.0.0.1:29500 EFAX_TOKEN=s3cret ./prog   # on host B

   The model, in order of use
   --------------------------
       efax_ctx_init      open the NICs of a provider (fabric, domain, CQ, AV, RDM endpoint each)
       efax_boot_init     rank and size from PMIx or the TCP rendezvous; all-gathers over TCP
       efax_ctx_connect   exchange endpoint names, match NICs between hosts, fill the AVs
       efax_mr_reg        register one buffer on every NIC; efax_mr_exchange gives every peer's keys
       efax_write / efax_send / efax_recv   start a transfer (an efax_xfer); efax_progress moves it
       efax_wait          wait for a transfer, with a timeout; efax_wait_imm counts a peer's arrivals
       efax_notify        a tiny control message that the peer counts like a write's immediate data
       efax_os_counters_nic   what the OS counts for a NIC (efa hw_counters, an interface's
                          statistics): bytes, packets, retransmits, drops

   Config macros (define before including)
   ---------------------------------------
       EFAX_NO_PMIX        build without PMIx; only the TCP rendezvous bootstraps
       EFAX_MAX_NICS       most NICs one context opens (default 32: a p5 has 32 EFA devices)
       EFAX_ASSERT(c)      assertion hook (default: assert)
       EFAX_API            linkage of public functions (default: extern; define as static to
                           keep everything in one translation unit)

   Environment
   -----------
       EFAX_PROVIDER       provider to use (efa, efa-direct, tcp, shm, ...); default efa, else tcp,
                           else shm; a host with EFA devices where efa is not offered runs
                           nothing unless one is named
       EFAX_NICS           comma-separated NIC (domain) names; a name listed twice opens two
                           endpoints on it (exercises multi-rail code on one device); groups
                           separated by ';' give the ranks of one host their own NICs
       EFAX_TIMEOUT_MS     how long any wait lasts before it fails (default EFAX_TIMEOUT_MS_DEFAULT: 30000)
       EFAX_BOOTSTRAP      pmix | tcp: force a bootstrap (default: tcp if EFAX_ROOT is set, else pmix)
       EFAX_RANK, EFAX_SIZE, EFAX_ROOT (host:port), EFAX_TOKEN: the TCP rendezvous
       EFAX_NODE           this rank's host name when the launcher names none (the rendezvous;
                           default gethostname()): ranks with one name are one host (local rank,
                           NIC groups), e.g. containers or network namespaces sharing a hostname
       EFAX_LINE_GBPS      line rate of one NIC in Gbit/s when the provider reports none (or a
                           shaped link's rate)
       EFAX_EFA_SHM        1: let efa's own shared memory carry peers on the same host (default
                           0: they go through the NIC; --efa-shm)
       EFAX_SHM_SPLIT      shm on libfabric 2.x: smallest write (bytes) that the writer and the target
                           copy half each, at once (default 524288; 0: never)
       EFAX_CQ_SIZE        entries of each NIC's completion queue (default: two windows, control,
                           and 16384 for peers' writes); a target expecting more chunks at once
                           than that fails, naming it (efa would lose completions)
       EFAX_FAULTS         family,family,...[:seed]: make tcp and shm behave as efa may (reorder,
                           eagain, injectfail, emulated, smallrma[=SIZE], all; and efa-direct's
                           limits: direct, cqmax=N); see >>faults. Off unless set; the seed a run
                           used is in its header
       EFAX_HUGE_PAGES     1: host buffers of 2 MiB and more ask for transparent huge pages, 0: they
                           never do (default: they do unless a NIC is tcp; efax_ctx_host_alloc)
       EFAX_CUDA_API       whether the provider may call CUDA to move device memory
                           (FI_OPT_CUDA_API_PERMITTED). Unset: on efa with device memory it may
                           not (GPUDirect RDMA only; where efa has none the run says "no
                           GPUDirect" and stages device memory); 1: it may (--cuda-api); 0: it
                           may not on any provider, and refusing fails the run (--no-cuda-api)
       EFAX_EFA_UNSOLICITED_WRITE_RECV  efa (libfabric 2.5+): 1 (default, efa's own) or 0, set
                           on every endpoint; ranks that differ are refused at connect
       EFAX_CAPS_OVERRIDE  for tests and rehearsals: "emulated_write=1,gpudirect=0,..." replaces
                           what this rank reports about its provider (efax_caps)
       EFAX_MEM_PATH       dmabuf | hmem | staged: how device memory reaches the NICs, forced
                           (default: efax_cuda.h tries them in that order)
       EFAX_SYSFS_ROOT     read the PCI topology and the OS's NIC counters from ROOT/sys (and
                           ROOT/proc/net/snmp) instead of /sys (e.g. the synthetic tests/topo/p5,
                           tests/topo/counters); without EFAX_NICS a rank uses the NICs
                           nearest its GPU (device memory), or its share of the PCIe switch
                           groups (host memory), else those on its CPU's NUMA node

   Troubleshooting
   ---------------
     - "no provider": install libfabric (Debian: libfabric1 libfabric-bin); `fi_info -l` lists providers.
     - "EFA device(s) ... but libfabric ... offers no efa provider": load the EFA installer's
       libfabric (LD_LIBRARY_PATH=/opt/amazon/efa/lib), pass /dev/infiniband into a container, or
       name a provider (--provider tcp) to measure it knowingly.
     - Host memory on a host with GPUs: set FI_HMEM=system before the first libfabric call, or
       efa's start-up probe makes a CUDA context on the current GPU (efax_bench.h does it).
     - "unknown NIC": the message lists the NICs the provider has; pass one of them to --nics.
     - "no launcher": run under mpirun/srun --mpi=pmix, or set EFAX_RANK/EFAX_SIZE/EFAX_ROOT.
     - A wait times out: the peer died or never started, or the transfer is slower than
       EFAX_TIMEOUT_MS; the message names the peer, NIC and what was awaited.
     - Under AddressSanitizer set FI_MR_CACHE_MONITOR=disabled (libfabric's memory hooks and
       ASan's interceptors disagree).

   License: MIT (see the end of this file).
*/
#ifndef EFAX_H
#define EFAX_H

/* The implementation uses POSIX and GNU interfaces (clock_gettime, getaddrinfo, sched
   affinity): include efax.h before other headers in the implementing file, or compile
   with -D_GNU_SOURCE. */
#if defined(EFAX_IMPLEMENTATION) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE 1
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
/* libfabric 2.x's headers are not pedantic C++ (fi_eq.h has a flexible array member); outside
   /usr/include they are not system headers, so their warnings would fail -Wpedantic -Werror. */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_errno.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

// >>config ---------------------------------------------------------------------------------

#define EFAX_VERSION_MAJOR 0
#define EFAX_VERSION_MINOR 1
#define EFAX_VERSION_PATCH 0
#define EFAX_VERSION_STRING "0.1.0"
/* Wire format of everything ranks exchange; ranks with different values refuse each other.
   (Overridable only so the tests can build a mismatched peer.) */
#ifndef EFAX_WIRE_VERSION
#define EFAX_WIRE_VERSION                                                                                    \
    5u /* 5: a staged write's cells are at least EFAX_STAGE_MIN_CELL; 4: staged writes carry a
                                 sequence beside their cell; addresses and regions as bytes; an address
                                 carries each NIC's control region (efa-direct) */
#endif

#ifndef EFAX_API
#define EFAX_API extern
#endif
#define EFAX_PRIVATE static

#ifndef EFAX_MAX_NICS
#define EFAX_MAX_NICS 32
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* efax's own error codes: far above FI_ERRNO_MAX so they never collide with libfabric's.
   Functions return 0 or a negative value: -FI_Exxx or -EFAX_Exxx. */
enum {
    EFAX_E_BASE = 5000,
    EFAX_E_USAGE = EFAX_E_BASE, /* bad option or argument (drivers exit 2) */
    EFAX_E_NOPROV,              /* provider not available on this host */
    EFAX_E_NONIC,               /* requested NIC not offered by the provider */
    EFAX_E_LAUNCH,              /* no PMIx and no rendezvous variables */
    EFAX_E_BOOT,                /* bootstrap failure (PMIx or TCP rendezvous) */
    EFAX_E_VERSION,             /* a peer runs another efax wire version */
    EFAX_E_PEER,                /* a peer sent something malformed or was lost */
    EFAX_E_BOUNDS,              /* offset/size outside a registered window */
    EFAX_E_STALE,               /* immediate data of an old sequence arrived, or more than it had */
    EFAX_E_VERIFY,              /* data check failed */
    EFAX_E_CUDA,                /* a CUDA call failed (efax_cuda.h) */
    EFAX_E_UNSUPPORTED,         /* the provider or build cannot do what was asked */
    EFAX_E_MISMATCH,            /* ranks' providers differ where efa would silently emulate */
    EFAX_E_OVERRUN,             /* more sequences outstanding under one tag than its window holds */
    EFAX_E_END
};

/* Names any code efax returns: efax's own, libfabric's (fi_strerror) or errno values.
   Accepts the code with either sign. Thread safe. */
EFAX_API const char *efax_strerror(int code);

/* The exit status a program should end with for code rc: 0 for 0; 2 for what the user asked
   wrongly (bad options or environment, a provider or NIC that does not exist, no launcher);
   1 for a failed run. */
EFAX_API int efax_exit_code(int rc);

/* Checks the integer settings efax's headers read from the environment (EFAX_TIMEOUT_MS,
   EFAX_EFA_SHM, EFAX_CUDA_API, EFAX_EFA_UNSOLICITED_WRITE_RECV, EFAX_SHM_SPLIT, EFAX_HUGE_PAGES,
   EFAX_GDR_FLUSH, EFAX_CQ_SIZE: each stated once, with its default and range) and EFAX_FAULTS,
   so that a program can refuse a bad one before any rank waits on another. Returns 0, or
   -EFAX_E_USAGE with "NAME='value' is not valid: expected ..." in err. Thread safe. */
EFAX_API int efax_env_check(char *err, size_t len);
/* Setting `name` of those (its default when unset), for a header that reads one (efax_cuda.h:
   EFAX_GDR_FLUSH, -1 unset). Returns 0, -EFAX_E_USAGE for a bad value (efax_env_check names it) or
   -FI_EINVAL for a name not among them. Thread safe. */
EFAX_API int efax_env_setting(const char *name, int *value);

/* Log hook: every error efax detects is described once, in full, through it (which
   operation, which peer, which NIC, the provider's text), then returned as a code.
   level: 0 error, 1 warning, 2 info, 3 debug. Default: errors and warnings to stderr. */
typedef void (*efax_log_fn)(void *user, int level, const char *msg);

/* Monotonic time in nanoseconds. Thread safe. */
EFAX_API uint64_t efax_now_ns(void);

/* Every wait's limit when neither the caller nor $EFAX_TIMEOUT_MS sets one. "Not given" is spelled
   one way a place: 0 in a desc (a zeroed desc takes the defaults), < 0 as an argument (there 0 is a
   limit: no time left, as efax_remaining_ms returns once a deadline passed). */
#define EFAX_TIMEOUT_MS_DEFAULT 30000
#define EFAX_WINDOW_DEFAULT 256  /* operations in flight per NIC, when the provider allows as many */
#define EFAX_IMM_TAGS_DEFAULT 64 /* immediate-data tags counted per peer */
/* shm on libfabric 2.x: the smallest write the writer and the target copy half each, at once (the
   crossover below which two copies cost more than they save; docs/journal.md has the runs) */
#define EFAX_SHM_SPLIT_DEFAULT (512 << 10)

/* The instant timeout_ms from now, on efax_now_ns's clock; timeout_ms < 0: the library's limit
   ($EFAX_TIMEOUT_MS, else EFAX_TIMEOUT_MS_DEFAULT). Thread safe. */
EFAX_API uint64_t efax_deadline_ns(int timeout_ms);
/* Milliseconds left until deadline (efax_deadline_ns's), rounded up; 0 once it passed. Thread safe. */
EFAX_API int efax_remaining_ms(uint64_t deadline);

/* A cheaper timestamp for timing loops, in ticks of an unspecified rate: the CPU's invariant
   time-stamp counter on x86-64 (rdtsc) and the virtual counter on aarch64 (cntvct_el0), else
   efax_now_ns(). Under a hypervisor clock_gettime (kvm-clock) costs a fair part of a shm round
   trip, which a ping-pong that stamps every round trip would measure as latency. Convert a
   difference with the rate seen over the same stretch (efax_now_ns() and efax_ticks() read at
   its start and end). Thread safe. */
EFAX_API uint64_t efax_ticks(void);

// >>context ---------------------------------------------------------------------------------

/* One NIC (a libfabric domain) of a provider and the attributes that matter. */
typedef struct efax_nic_info {
    char provider[32]; /* e.g. "efa", "tcp;ofi_rxm", "shm" */
    char name[64];     /* domain name: EFA device (rdmap16s27-rdm), interface (eth0), "shm" */
    char fabric[64];
    char pci[16];     /* "0000:10:1b.0", or "" when the NIC has no PCI device */
    double link_gbps; /* line rate (provider or sysfs); 0 when unknown or virtual (veth) */
    int numa;         /* NUMA node, -1 when unknown */
    uint64_t caps, mode, mr_mode;
    uint64_t msg_order; /* transmit msg_order granted (FI_ORDER_SAS: sends arrive in order) */
    size_t cq_data_size, max_msg_size, inject_size, tx_size, rx_size, mr_key_size;
    size_t inject_rma_size; /* largest write by inject; inject_size is for sends. Both from the
                               endpoint (FI_OPT_INJECT_*_SIZE, libfabric 2.x) once it is open */
    size_t max_rma_size;    /* largest write the endpoint takes (FI_OPT_MAX_RMA_SIZE, 2.x; else
                               max_msg_size) */
    size_t max_send_size;   /* largest message the endpoint sends (FI_OPT_MAX_MSG_SIZE, 2.x; else
                               max_msg_size): efa-direct's is the device's MTU, 8 KiB */
    uint32_t addr_format;
    int window;  /* once open: efax's operations in flight on it (at most tx_size: efax_ctx_desc.window) */
    int cq_size; /* once open: its completion queue's entries (efax_ctx_desc.cq_size) */
    /* efa only, once the endpoint is open (-1: not efa, or this libfabric cannot say): */
    int efa_shm;                /* 1: efa's own shared memory carries same-node peers, 0: the NIC does */
    int emulated_write;         /* 1: efa emulates RDMA writes with messages (FI_OPT_EFA_EMULATED_WRITE) */
    int cuda_api;               /* FI_OPT_CUDA_API_PERMITTED: 0 set false (GPUDirect only), 1 set true
                                   (--cuda-api), -1 untouched */
    int gpudirect;              /* 1: the provider took FI_OPT_CUDA_API_PERMITTED=false, so it moves device
                                   memory by the NIC; 0: it refused (efa: no GPU peer-to-peer support);
                                   -1: not asked */
    int unsolicited_write_recv; /* FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV as efax set it (2.5+), -1 not */
    bool hmem;                  /* FI_HMEM offered */
    bool loopback;              /* the loopback interface (tcp) */
} efax_nic_info;

typedef struct efax_ctx efax_ctx;
typedef struct efax_boot efax_boot; /* the bootstrap section says what it holds */
typedef struct efax_xfer efax_xfer;
typedef struct efax_op efax_op;

/* How to set up a context. A zeroed desc means defaults. */
typedef struct efax_ctx_desc {
    const char *provider; /* NULL: $EFAX_PROVIDER, else efa > tcp > shm */
    const char *nics;     /* comma list of NIC names; NULL: $EFAX_NICS, else the NICs a device backs
                             (EFA devices, physical interfaces), else every NIC but loopback.
                             Groups separated by ';' ("r0,r1;r2,r3") give each rank of a host
                             its own NICs: local rank i takes group i mod the group count */
    int local_rank;       /* this rank's index on its host (efax_boot.local_rank) for NIC groups */
    int local_size;       /* ranks on this host (efax_boot.local_size): without nics, ranks moving
                             host memory share the NICs' PCIe switch groups (efax_topo_host_nics);
                             0: this rank alone */
    char near_pci[16];    /* PCI address of this rank's GPU when it moves device memory
                             (efax_cuda_near fills it): without nics / $EFAX_NICS, the NICs
                             nearest it are used; "" (host memory): this rank's share of the
                             PCIe switch groups (efax_topo_host_nics), else the NICs on the NUMA
                             node it is bound to (efax_topo_near); with none known, every NIC */
    int max_nics;         /* cap on NICs opened (0: no cap) */
    int window;           /* operations in flight per NIC (0: min(provider tx size, EFAX_WINDOW_DEFAULT)) */
    int timeout_ms;       /* every wait's limit (0: $EFAX_TIMEOUT_MS, else EFAX_TIMEOUT_MS_DEFAULT) */
    int imm_tags;         /* immediate-data tags counted per peer (0: EFAX_IMM_TAGS_DEFAULT; at most
                             EFAX_IMM_MAX_TAGS) */
    bool hmem;            /* ask for FI_HMEM (device memory registration); efax_cuda.h sets it. Not
                             asked when mem_path is "staged": staged memory is host memory to the NIC */
    bool fi_more;         /* post batches with FI_MORE on all but the last (default off) */
    int shm_split;        /* shm on libfabric 2.x: a write with immediate data of at least this many
                             bytes, host memory on both sides, is copied half by the writer and half
                             by the target at once (two cores; see efax__post_split). 0:
                             $EFAX_SHM_SPLIT, else EFAX_SHM_SPLIT_DEFAULT; -1: never */
    int huge_pages;       /* host buffers efax allocates (efax_ctx_host_alloc): 1 ask for transparent
                             huge pages from 2 MiB up, -1 never, 0: $EFAX_HUGE_PAGES, else yes
                             unless a NIC is tcp */
    int cq_size;          /* entries of each NIC's completion queue (0: $EFAX_CQ_SIZE, else two windows
                             + control + 16384 for peers' writes; at least 256). A smaller queue
                             shrinks the window to a quarter of it (efax__cq_plan says why) */
    bool efa_shm;         /* efa: let its own shared memory carry peers on this host (default
                             off, so same-host ranks measure the NIC; $EFAX_EFA_SHM=1 too) */
    int cuda_api;         /* whether the provider may call CUDA (FI_OPT_CUDA_API_PERMITTED) to move
                             device memory. 0: $EFAX_CUDA_API, else the default: on efa with
                             hmem it may not (GPUDirect RDMA only, as aws-ofi-nccl sets it), and
                             where efa refuses (no GPU peer-to-peer support) device memory is
                             staged through host memory and said so ("no GPUDirect"); other
                             providers are left alone. 1 (--cuda-api, EFAX_CUDA_API=1): it may,
                             knowingly (efa without GPUDirect then copies with CUDA). -1
                             (--no-cuda-api, EFAX_CUDA_API=0): it may not, on every provider,
                             and a provider that refuses fails efax_ctx_init */
    bool no_cuda_api;     /* the older spelling of cuda_api = -1 */
    const char *mem_path; /* how device memory reaches the NICs: "dmabuf", "hmem" or "staged"
                               forces one (NULL: $EFAX_MEM_PATH, else efax_cuda.h tries them in
                               that order); efax_ctx_mem_path */
    int max_peers;        /* > 0: the context takes peers one at a time, from their addresses
                             (efax_ctx_addr, efax_ctx_peer_add), up to this many ids, this
                             process being peer `self`; no boot needed. 0: efax_ctx_connect adds
                             every rank of a boot (and room for max(ranks, max_peers) ids) */
    int self;             /* this process's peer id when max_peers > 0 (0 .. max_peers - 1) */
    efax_log_fn log;      /* NULL: stderr */
    void *log_user;
    int log_level; /* most verbose level logged (0: errors and warnings; 2 adds info) */
} efax_ctx_desc;

/* Per-NIC traffic counters (this process, since init or efax_ctx_stats_reset). */
typedef struct efax_nic_stats {
    /* tx: what this NIC carried out; rx: receives, and remote writes with data that landed here
       (their bytes once efax_expect_wait saw them land; rx_ops as each chunk lands). A count and
       its bytes are apart: side by side, compilers pair their updates into vector instructions
       that cost a message more than the two additions. */
    uint64_t tx_bytes, rx_bytes;
    uint64_t tx_ops, rx_ops;
    uint64_t eagain; /* posts the provider refused for now (-FI_EAGAIN) */
} efax_nic_stats;

/* Which provider a context runs on: the one place efax tells providers apart by name
   (efax__prov_of); everything else reads efax_caps. */
typedef enum efax_prov { EFAX_PROV_OTHER = 0, EFAX_PROV_EFA, EFAX_PROV_TCP, EFAX_PROV_SHM } efax_prov;

/* What the context's provider can do and how efax drives it, resolved once by efax_ctx_init from
   what libfabric answered (fi_getinfo, fi_getopt, fi_setopt). Every decision that depends on the
   provider reads this, never the provider's name. An int field is 1/0, or -1 where it does not
   apply (not efa) or this libfabric cannot say. efax_ctx_connect exchanges the fields marked
   "fingerprint" with every rank (efax_ctx_peer_note). */
typedef struct efax_caps {
    efax_prov prov;
    char provider[32];          /* as libfabric names it: "efa", "tcp;ofi_rxm", "shm" */
    uint32_t fi_version;        /* the libfabric loaded (fi_version()); fingerprint */
    uint64_t mr_mode;           /* mr_mode bits granted, over every NIC */
    size_t cq_data_size;        /* immediate data bytes, the smallest of the NICs (efax needs 4) */
    size_t inject_msg_size;     /* largest send by inject, the smallest of the NICs' endpoints */
    size_t inject_rma_size;     /* largest write by inject, likewise */
    uint64_t max_write;         /* the largest single write: EFAX_MAX_CHUNK, each NIC's max_msg_size and
                                   FI_OPT_MAX_RMA_SIZE, and on efa the device's max_rdma_size (read
                                   through an efa-direct endpoint, 2.x); efax_ctx_max_chunk is the
                                   job's (the smallest over every rank, after connect) */
    char max_write_from[64];    /* what set max_write */
    bool hmem;                  /* FI_HMEM granted: device memory can be registered; fingerprint */
    int gpudirect;              /* 1: device memory moves by the NIC (efa took CUDA_API_PERMITTED=false),
                                   0: no GPUDirect (efa refused: no GPU peer-to-peer support), -1: not
                                   asked (no hmem, or not efa); fingerprint */
    int cuda_api;               /* FI_OPT_CUDA_API_PERMITTED: 0 false, 1 true (--cuda-api), -1 untouched */
    int emulated_write;         /* 1: a NIC emulates RDMA writes with messages (FI_OPT_EFA_EMULATED_WRITE);
                                   fingerprint */
    int unsolicited_write_recv; /* efa: FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV as efax set it on every
                                   rank; fingerprint */
    int efa_shm;                /* efa: 1 its own shared memory carries same-host peers, 0 the NIC */
    bool eq_required;           /* without a bound event queue the provider abort()s on some errors
                                   (efa: efa_base_ep_write_eq_error) */
    bool whole_writes;          /* a write is one copy however it is cut (shm): write whole messages */
    bool chunk_between_hosts;   /* writes between hosts go in 128 KiB posts (tcp: efax_write_chunk) */
    bool split_writes;          /* shm on 2.x: large writes are copied half by each side */
    bool small_pages;           /* host buffers without huge pages (tcp: efax_ctx_host_alloc says why) */
    bool stale_name_retry;      /* fi_enable's -FI_EBUSY means a dead process's region: rename (shm) */
    bool direct;                /* efa's efa-direct fabric (--provider efa-direct), or EFAX_FAULTS direct
                                   rehearsing it: no tagged messages (efax_notify is a 0-byte write
                                   into the peer's control region), messages of at most max_send,
                                   the target's AV filled before any write (a barrier in connect) */
    uint64_t max_send;          /* the largest message, the smallest of the NICs' max_send_size */
} efax_caps;

/* Opens a context: the provider's NICs (each with fabric, domain, CQ, AV and RDM endpoint).
   ctx must stay at one address until efax_ctx_deinit. Returns 0, -EFAX_E_NOPROV (message
   lists the providers present), -EFAX_E_NONIC (lists the NICs), or a libfabric error.
   Not thread safe: one thread drives a context (FI_THREAD_DOMAIN). */
EFAX_API int efax_ctx_init(efax_ctx *ctx, const efax_ctx_desc *desc);

/* Closes everything in reverse order; safe on a zeroed or half-initialised context. */
EFAX_API void efax_ctx_deinit(efax_ctx *ctx);

/* Exchanges endpoint names and NIC lists with every rank and fills each NIC's address
   vector. NICs are matched between hosts by name when both have the name (rails with the
   same interface or device names), else by index modulo the peer's NIC count, so hosts
   need not have the same number or order of NICs. From here on the boot's collectives drive
   this context's progress while they wait (efax_boot.idle), so a rank in a barrier still sees a
   lost injected operation or a dead endpoint; boot must stay valid until efax_ctx_deinit (which
   unhooks it) or be deinitialised first. Collective. Returns 0, -EFAX_E_VERSION (a peer runs
   another wire version), -EFAX_E_PEER, or a libfabric error. */
EFAX_API int efax_ctx_connect(efax_ctx *ctx, efax_boot *boot);

/* Peers that come and go. A context opened with efax_ctx_desc.max_peers > 0 has no peers but
   itself; a process ships its address (efax_ctx_addr: its id, provider, host, capability
   fingerprint and every NIC's endpoint name, versioned and checksummed) by any channel it likes
   (a file, a socket, etcd, MPI), and each side adds the other (efax_ctx_peer_add) while everything
   else runs: no collective, nobody stops. A context made by efax_ctx_connect takes more peers the
   same way, up to its max_peers. */

/* The largest address efax_ctx_addr writes, in bytes (a header, then per NIC its name, its control
   region, and its endpoint name of at most 96 bytes). */
#define EFAX_ADDR_BYTES (160 + EFAX_MAX_NICS * (64 + 16 + 4 + 96))
/* Writes this process's address into buf (cap bytes; EFAX_ADDR_BYTES always suffice); *len gets
   its size. Returns 0, -FI_ETOOSMALL (cap too small: *len says how much) or -FI_EOPBADSTATE (no
   peer id yet). Thread safe against nothing else writing the context. */
EFAX_API int efax_ctx_addr(const efax_ctx *ctx, void *buf, size_t cap, size_t *len);
/* Adds the peer whose address (efax_ctx_addr's bytes) is buf[0..len): every NIC's address into
   the matching NIC's address vector, routes both ways, its counts of arrivals started afresh. A
   peer id taken already is refused unless it is the same process (then 0, nothing changes).
   *peer (may be NULL) gets its id. Returns 0, -EFAX_E_PEER naming what is wrong with the bytes
   (not an address, truncated, corrupted), -EFAX_E_VERSION (another efax), -EFAX_E_MISMATCH
   (another provider, or capabilities efa would silently emulate writes between), -FI_EINVAL (an id
   outside 0..max_peers-1), or a libfabric error. Not thread safe. */
EFAX_API int efax_ctx_peer_add(efax_ctx *ctx, const void *buf, size_t len, int *peer);
/* Removes peer `peer`: its transfers not yet posted end with -FI_ECONNABORTED naming it, waits
   for its arrivals end likewise, its addresses leave the address vectors; nothing else is
   disturbed. Writes already posted to it complete as the provider says. Returns 0 or -FI_EINVAL
   (not a peer). Not thread safe. */
EFAX_API int efax_ctx_peer_remove(efax_ctx *ctx, int peer);
/* Whether id `peer` is a peer of this context now (this process included). */
EFAX_API bool efax_ctx_has_peer(const efax_ctx *ctx, int peer);

/* Number of NICs the context opened. */
EFAX_API int efax_ctx_nnics(const efax_ctx *ctx);
/* Attributes of local NIC i (0 <= i < nnics). */
EFAX_API const efax_nic_info *efax_ctx_nic(const efax_ctx *ctx, int i);
/* Local NIC i's endpoint address as text (fi_av_straddr), e.g. "fi_sockaddr_in://10.0.0.1:4242". */
EFAX_API const char *efax_ctx_nic_addr(const efax_ctx *ctx, int i, char *buf, size_t len);
/* Counters of local NIC i. */
EFAX_API efax_nic_stats efax_ctx_stats(const efax_ctx *ctx, int i);
/* Zeroes every NIC's counters. */
EFAX_API void efax_ctx_stats_reset(efax_ctx *ctx);

/* How long local NIC i took to start, in nanoseconds: efax_ctx_init opening its fabric, domain,
   CQ, AV and endpoint; efax_ctx_connect inserting every peer's addresses into its AV; and every
   efax_mr_reg so far registering on it (regs of them). A run header's cold start: a slow start
   shows where it is (lazy address insertion on many EFA NICs makes a first transfer take seconds:
   Mooncake's EFA notes). */
typedef struct efax_nic_cold {
    uint64_t open_ns, connect_ns, reg_ns;
    uint32_t regs;
} efax_nic_cold;
EFAX_API efax_nic_cold efax_ctx_cold(const efax_ctx *ctx, int i);
/* A line saying how device memory reaches this context's NICs and why ("dmabuf: ..."), set by
   efax_cuda.h when it registers device memory; "" when none was. The report prints it. */
EFAX_API const char *efax_ctx_mem_note(const efax_ctx *ctx);
EFAX_API void efax_ctx_set_mem_note(efax_ctx *ctx, const char *note);
/* Whether host buffers this context allocates (efax_ctx_host_alloc) ask for huge pages. */
EFAX_API bool efax_ctx_huge_pages(const efax_ctx *ctx);
/* The provider the context opened ("tcp;ofi_rxm", "shm", "efa"). */
EFAX_API const char *efax_ctx_provider(const efax_ctx *ctx);
/* What the context's provider can do (efax_caps), resolved by efax_ctx_init. */
EFAX_API const efax_caps *efax_ctx_caps(const efax_ctx *ctx);
/* What efax_ctx_connect found different between ranks without refusing them (libfabric
   versions, FI_HMEM, GPUDirect), one clause per difference; "" when every rank is alike. */
EFAX_API const char *efax_ctx_peer_note(const efax_ctx *ctx);
/* How the provider was chosen ("named by the program (--provider)", "named by EFAX_PROVIDER", "the
   first of efa, tcp, shm offered"), for run headers. */
EFAX_API const char *efax_ctx_provider_choice(const efax_ctx *ctx);
/* How this rank's NICs were chosen ("--nics", "nearest GPU 0000:53:00.0", ...), for run headers. */
EFAX_API const char *efax_ctx_nic_choice(const efax_ctx *ctx);
/* Every wait's limit in milliseconds (efax_ctx_desc.timeout_ms, resolved). */
EFAX_API int efax_ctx_timeout_ms(const efax_ctx *ctx);
/* The device-memory path the job forces (efax_ctx_desc.mem_path, resolved), or "". */
EFAX_API const char *efax_ctx_mem_path(const efax_ctx *ctx);
/* Logs a message through the context's hook (printf-style). */
EFAX_API void efax_log(const efax_ctx *ctx, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

// >>memory ----------------------------------------------------------------------------------

/* What a registered region is used for: registration asks only for these rights. */
enum {
    EFAX_MR_SEND = 1u << 0,      /* source of sends */
    EFAX_MR_RECV = 1u << 1,      /* destination of receives */
    EFAX_MR_WRITE_SRC = 1u << 2, /* local source of RDMA writes */
    EFAX_MR_WRITE_DST = 1u << 3, /* remote peers write into it (FI_REMOTE_WRITE) */
    EFAX_MR_ALL = 0xfu
};

/* Staging: memory the NICs cannot register (device memory when the provider has no FI_HMEM)
   moves through registered bounce memory of the same size. The region registered is the
   bounce; these callbacks move bytes between it and the real memory (efax_cuda.h: cudaMemcpy
   on a stream, cell by cell, so copies overlap the network). Offsets are within the region. */
typedef struct efax_stage_ops {
    /* start copying [off, off+len) out to the bounce, in cells of `unit` bytes */
    int (*out_begin)(void *user, uint64_t off, uint64_t len, uint64_t unit);
    /* true once [off, off+len) is in the bounce */
    bool (*out_ready)(void *user, uint64_t off, uint64_t len);
    /* [off, off+len) landed in the bounce: start copying it in */
    int (*in_cell)(void *user, uint64_t off, uint64_t len);
    /* every copy started by in_cell finished (0, or a negative code on timeout/failure) */
    int (*in_wait)(void *user, int timeout_ms);
    /* blocking copies for two-sided messages: out before a send, in after a receive */
    int (*out_sync)(void *user, uint64_t off, uint64_t len);
    int (*in_sync)(void *user, uint64_t off, uint64_t len);
    /* optional (both set, or a wait takes in_wait): in_mark puts a mark after every copy in_cell has
       started, in *mark (0 or a negative code); in_marked says whether the copies before `mark`
       finished (1), not yet (0), or failed (a negative code). A wait then drives the fabric while
       its own copies run, and waits for no copy started after them. */
    int (*in_mark)(void *user, uint64_t *mark);
    int (*in_marked)(void *user, uint64_t mark);
} efax_stage_ops;

/* Writes into a staged region carry the index of their cell (cells of efax_stage_unit bytes)
   beside their sequence in the immediate data's sequence bits, so the target copies each cell
   in as its last piece lands. At most EFAX_STAGE_CELLS cells per transfer, each at least `chunk`
   (the write desc's, 0: none) and EFAX_STAGE_MIN_CELL, a multiple of 4 KiB; a cell larger than a
   post is written in several, each carrying the cell's index. Pure. */
EFAX_API uint64_t efax_stage_unit(uint64_t size, uint64_t chunk);

/* A buffer to register. iface/device/dmabuf describe device memory (efax_cuda.h fills them). */
typedef struct efax_mr_desc {
    void *ptr;
    size_t len;
    unsigned access;        /* EFAX_MR_* bits; 0 means EFAX_MR_ALL */
    int iface;              /* enum fi_hmem_iface; 0 = FI_HMEM_SYSTEM (host memory) */
    int device;             /* CUDA device ordinal for FI_HMEM_CUDA */
    int dmabuf_fd;          /* >= 0 (with dmabuf=true): register through FI_MR_DMABUF */
    uint64_t dmabuf_offset; /* offset of ptr within the dmabuf */
    bool dmabuf;
    bool device_only;            /* device memory the host cannot address (cudaMalloc): registered with
                                    FI_HMEM_DEVICE_ONLY where libfabric has it, which shm needs for its
                                    CUDA IPC path (fi_mr(3)); without it shm bounces through host memory */
    const efax_stage_ops *stage; /* non-NULL: ptr is a bounce buffer standing in for other memory */
    void *stage_user;
    /* Optional: makes bytes that landed visible to whoever reads the region next. Providers may
       complete a remote write or receive into device memory before the device copy that moves it
       has finished (shm's CUDA IPC copy runs asynchronously to the host); efax_expect_wait (for
       writes into the region) and efax_wait / efax_wait_all (for receives into it) call settle
       once the transfer completed, so a completion they report means the bytes are in place.
       efax_wait_imm only counts arrivals: after it, call efax_buf_settle or the hook yourself.
       A writer's own completion says nothing about the target's copy: reuse a source once the
       target has confirmed. efax_cuda.h's hook waits for events on the streams the provider and
       the buffer's local copies use, polled against timeout_ms. Returns 0 or a negative code. */
    int (*settle)(void *user, int timeout_ms);
    void *settle_user;
} efax_mr_desc;

/* Another rank's view of a registered region: where it is and its key on each of its NICs. */
#define EFAX_RMR_STAGED 1u   /* the peer's region is staged: write it cell by cell */
#define EFAX_RMR_WRITABLE 2u /* the peer registered it for remote writes (it has keys) */
#define EFAX_RMR_HOST 4u     /* the peer's region is host memory (not device memory) */
typedef struct efax_rmr {
    uint64_t base; /* address used in writes (0-based offsets unless FI_MR_VIRT_ADDR) */
    uint64_t len;
    uint32_t flags; /* EFAX_RMR_* */
    int nnic;
    uint64_t key[EFAX_MAX_NICS]; /* FI_KEY_NOTAVAIL where the region has no remote access */
} efax_rmr;

/* One buffer registered on every NIC of a context. Must not move after efax_mr_reg. */
typedef struct efax_mr {
    efax_ctx *ctx;
    void *ptr;
    size_t len;
    unsigned access;
    int iface;
    struct fid_mr *mr[EFAX_MAX_NICS];
    void *desc[EFAX_MAX_NICS];
    uint64_t key[EFAX_MAX_NICS]; /* FI_KEY_NOTAVAIL where no peer needs one (no remote access) */
    efax_rmr *remote;            /* [size] after efax_mr_exchange; remote[own rank] is this one */
    int nremote;
    const efax_stage_ops *stage;
    void *stage_user;
    int (*settle)(void *user, int timeout_ms); /* efax_mr_desc.settle */
    void *settle_user;
    bool direct; /* host memory without a staging hook: what a small send's or write's inject takes */
} efax_mr;

/* Registers desc->ptr[0..len) on every NIC with the rights desc->access asks for.
   Returns 0, -FI_ENOSYS / -EFAX_E_UNSUPPORTED when the provider cannot register this kind
   of memory, or another libfabric error (logged with the NIC's name). Not thread safe. */
EFAX_API int efax_mr_reg(efax_ctx *ctx, efax_mr *mr, const efax_mr_desc *desc);

/* Closes the registrations and frees the remote table; safe on a zeroed efax_mr. */
EFAX_API void efax_mr_dereg(efax_mr *mr);

/* Gives every rank every other rank's keys and address of `mr` (mr->remote[r]): efax_mr_pack on
   every rank, an all-gather, efax_mr_unpack of each. Collective over boot. */
EFAX_API int efax_mr_exchange(efax_mr *mr, efax_boot *boot);

/* A registered region as bytes any channel can carry (a peer's efax_mr_unpack makes it writable):
   its owner's id, provider, address and size, memory kind (host, device, staged, writable) and
   every NIC's key, versioned and checksummed. EFAX_MR_BYTES always suffice. */
#define EFAX_MR_BYTES (64 + 8 * EFAX_MAX_NICS)
/* Writes mr's descriptor into buf (cap bytes); *len gets its size. Returns 0 or -FI_ETOOSMALL.
   Thread safe. */
EFAX_API int efax_mr_pack(const efax_mr *mr, void *buf, size_t cap, size_t *len);
/* Takes a peer's region descriptor buf[0..len) into view->remote[owner] (allocated for every
   peer id on first use; view may be the caller's own registered region, or a zeroed efax_mr
   standing for peers' regions only), so that writes with w.dst = view reach it. *owner (may be
   NULL) gets the owner's id. The owner must be a peer (efax_ctx_peer_add). Returns 0,
   -EFAX_E_PEER naming what is wrong (not a region descriptor, truncated, corrupted, an owner that
   is no peer, a NIC count other than the peer's), -EFAX_E_VERSION, -EFAX_E_MISMATCH (registered
   with another provider) or -FI_ENOMEM. Release a view made only of peers' regions with
   efax_mr_dereg. Not thread safe. */
EFAX_API int efax_mr_unpack(efax_mr *view, efax_ctx *ctx, const void *buf, size_t len, int *owner);

#if defined(__CUDACC__)
#define EFAX_HD __host__ __device__
#else
#define EFAX_HD
#endif

/* Verification pattern: byte `off` of the message that `rank` sends in iteration `iter` is
   byte off%8 of efax_pattern_word(efax_pattern_seed(rank, iter), off/8) (little-endian).
   Every (rank, iteration, offset) gives other bytes, so a stale or misplaced byte shows.
   Inline and __host__ __device__ under nvcc, so GPU kernels check device memory the same way. */
static inline EFAX_HD uint64_t efax_pattern_word(uint64_t seed, uint64_t word) {
    uint64_t z = seed + word + 0x9e3779b97f4a7c15ull; /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline EFAX_HD uint64_t efax_pattern_seed(int rank, uint64_t iter) {
    return efax_pattern_word(((uint64_t)(uint32_t)rank << 32) ^ efax_pattern_word(iter ^ 0x5eedull, 0), 0);
}
EFAX_API void efax_pattern_fill(void *buf, uint64_t len, uint64_t off, int rank, uint64_t iter);
/* Counts bytes of buf that differ from the pattern; *first_bad (may be NULL) gets the
   offset of the first (or UINT64_MAX). */
EFAX_API uint64_t efax_pattern_check(const void *buf, uint64_t len, uint64_t off, int rank, uint64_t iter,
                                     uint64_t *first_bad);
/* Clears a receive buffer with a poison byte before a checked iteration. */
#define EFAX_POISON 0xA5
EFAX_API void efax_poison(void *buf, uint64_t len);

/* Memory the benchmarks move: host memory here; efax_cuda.h adds pinned host memory and
   device memory (registered by dmabuf, by address, or staged through pinned buffers). */
typedef struct efax_buf efax_buf;
typedef struct efax_mem_ops {
    const char *name;  /* "host", "pinned", "device" */
    const char *label; /* variant suffix: "" for host, "Pin", "DMA" */
    int (*alloc)(efax_ctx *ctx, efax_buf *b, size_t len, unsigned access);
    void (*release)(efax_buf *b);
    /* the message at [off, off+len) gets pattern bytes 0..len of (rank, iter); check counts
       the bytes that differ; poison clears */
    void (*fill)(efax_buf *b, uint64_t off, uint64_t len, int rank, uint64_t iter);
    void (*poison)(efax_buf *b, uint64_t off, uint64_t len);
    uint64_t (*check)(efax_buf *b, uint64_t off, uint64_t len, int rank, uint64_t iter);
    /* copies len bytes from src+soff to dst+doff (both of this kind); may return before the
       copy finished (device memory: it overlaps transfers), settle waits for it */
    void (*copy)(efax_buf *dst, uint64_t doff, const efax_buf *src, uint64_t soff, uint64_t len);
    /* waits until everything written into the buffer (copies, and what the provider moves in
       for device memory) is in place; NULL: always in place (host memory) */
    int (*settle)(efax_buf *b);
    /* mark notes in slot (the low 8 bits; EFAX_MARK_IN or EFAX_MARK_OWN above them narrow it)
       what has been started into the buffer so far; marked says whether that is in place (1), not
       yet (0), or a negative code; NULL: always in place (host memory) */
    int (*mark)(efax_buf *b, unsigned slot);
    int (*marked)(efax_buf *b, unsigned slot);
} efax_mem_ops;

struct efax_buf {
    const efax_mem_ops *ops;
    void *ptr; /* where the data lives (host or device address) */
    size_t len;
    efax_mr mr;    /* what the NICs use: ptr itself, or a staging buffer */
    char path[32]; /* host, pinned, dmabuf, hmem, staged; " (no GPUDirect)" added where the
                                provider had none (efax_caps.gpudirect 0) */
    void *impl;    /* the kind's own state */
};


/* Page-aligned host memory for buffers the NICs touch; from 2 MiB up it is 2 MiB aligned and
   asks for transparent huge pages (fewer pages to pin and translate: the shm provider's
   copies and NIC registrations run faster). Zeroed. Free with free(). NULL on failure. */
EFAX_API void *efax_host_alloc(size_t len);
/* efax_host_alloc with the pages this context's NICs move fastest (efax_ctx_desc.huge_pages):
   huge pages unless a NIC is tcp. tcp copies through sockets and pins nothing, and libfabric
   1.17's tcp;ofi_rxm moved its rendezvous messages (256 KiB and up) 10-25% slower out of and
   into them (ping-pong, 2-core VM; 2.6.0's tcp the same either way); shm's copies pin pages,
   and there huge pages halve the 1 MiB ping-pong. Thread safe. */
EFAX_API void *efax_ctx_host_alloc(const efax_ctx *ctx, size_t len);

/* Host memory (page-aligned, registered as host memory). */
EFAX_API const efax_mem_ops *efax_mem_host(void);
/* Parses a --mem list for a host-only build: "host" or "all"; pin and dma need the CUDA build
   (efax_cuda_mem_select). Returns 0, or -EFAX_E_USAGE with the reason in msg. */
EFAX_API int efax_mem_select(const char *list, const efax_mem_ops **kinds, int max, int *n, char *msg,
                             size_t len);
/* "host,pinned,device": the names of n kinds, for headers. */
EFAX_API const char *efax_mem_names(const efax_mem_ops *const *kinds, int n, char *buf, size_t len);
/* Allocates len bytes of a memory kind and registers them with `access` (EFAX_MR_*) on
   every NIC of ctx (a kind may accept ctx NULL: memory no NIC uses). b must not move
   afterwards. Returns 0 or a negative code (logged). */
EFAX_API int efax_buf_alloc(efax_ctx *ctx, efax_buf *b, const efax_mem_ops *ops, size_t len, unsigned access);
/* Deregisters and frees; safe on a zeroed efax_buf. */
EFAX_API void efax_buf_free(efax_buf *b);
/* Starts a local copy between two buffers of the same kind (all2all's own chunk); it is in place
   once efax_buf_settle(dst) returns (host memory: at once). */
EFAX_API void efax_buf_copy(efax_buf *dst, uint64_t doff, const efax_buf *src, uint64_t soff, uint64_t len);
/* Waits until everything written into b is in place: local copies, and bytes the provider still
   moves after reporting completion (device memory). Returns 0 or a negative code. */
EFAX_API int efax_buf_settle(efax_buf *b);
enum { EFAX_BUF_MARKS = 16 }; /* efax_buf_mark's slots */
/* efax_buf_mark's narrowing flags, or'ed into the slot: only the copies a provider issued (IN),
   only the buffer's own local copies (OWN). A caller that waits for one transfer's bytes need not
   wait for a local copy started after it, nor the other way round (all2all --pace). */
enum { EFAX_MARK_IN = 1u << 8, EFAX_MARK_OWN = 1u << 9 };
/* Notes in slot (0 .. EFAX_BUF_MARKS-1, reused freely; EFAX_MARK_IN or EFAX_MARK_OWN or'ed in
   narrow what it notes) what has been started into b so far: the copies a provider issued into it
   (device memory on shm: efax_expect_arrived) and its own local copies. With several transfers in
   flight into one buffer, efax_buf_marked then tells when those noted landed, without waiting for
   the later ones as efax_buf_settle does (all2all with --window: iterations in flight). Host and
   pinned memory: nothing to note. Returns 0 or a negative code. Not thread safe. */
EFAX_API int efax_buf_mark(efax_buf *b, unsigned slot);
/* Whether what mark `slot` noted is in place: 1, or 0 not yet (poll again, driving the contexts
   that move data into b meanwhile), or a negative code. Never blocks. Not thread safe. */
EFAX_API int efax_buf_marked(efax_buf *b, unsigned slot);

// >>operations ------------------------------------------------------------------------------

/* Immediate data (32 bits): who wrote (rank, 16 bits), a tag (8 bits, counted separately)
   and a sequence (8 bits, counted separately too).

   Arrivals, in any order. A target counts each arrival (a chunk of a write with immediate data,
   or a notification) under its (peer, tag, sequence), whatever order they come in: efa keeps no
   order between writes (its RDM endpoint grants send-after-send only, and SRD delivers out of
   order), each NIC has its own completion queue, and a write done at the writer says nothing
   about what the target has seen. Under one (peer, tag) up to EFAX_IMM_WINDOW sequences may be
   outstanding at once (arrived or awaited, not yet consumed); efax_wait_imm and efax_expect_wait
   consume only their own sequence. A writer that streams into a ring of slots under one tag
   numbers its writes 0, 1, 2, ... (mod 256) and stays at most EFAX_IMM_WINDOW ahead of what the
   target consumed (credits from the target do this: docs/manual.md, "Streaming"). Errors:
     -EFAX_E_STALE    an arrival (or a wait) of a sequence older than the window, when later
                      ones are still outstanding (the last consumed came after it), or
                      arrivals of a consumed sequence that no wait took before the window moved
                      past it: more arrivals than the sequence had
     -EFAX_E_OVERRUN  a sequence EFAX_IMM_WINDOW or more ahead of the oldest outstanding one, or
                      one that the window had to pass before it came: too many outstanding
   When nothing is outstanding under a (peer, tag), any sequence may come next: a program may
   number each phase from 0 again once the last phase was consumed. Writes into a staged region
   (device memory without GPUDirect) carry 5 bits of sequence and 3 of cell: up to
   EFAX_STAGE_WINDOW sequences outstanding, each in at most EFAX_STAGE_CELLS cells. */
#define EFAX_IMM_RANK_BITS 16
#define EFAX_IMM_TAG_BITS 8
#define EFAX_IMM_SEQ_BITS 8
#define EFAX_IMM_MAX_RANKS (1 << EFAX_IMM_RANK_BITS)
#define EFAX_IMM_MAX_TAGS (1 << EFAX_IMM_TAG_BITS)
#define EFAX_IMM_WINDOW 32   /* sequences outstanding per (peer, tag) */
#define EFAX_STAGE_CELLS 8   /* cells of a write into a staged region */
#define EFAX_STAGE_WINDOW 16 /* sequences outstanding per (peer, tag) into staged regions */
/* A staged cell costs two device copies, a post split in three operations and a completion
   whatever its size, and the writes of a window already overlap one another's copies: a smaller
   cell only adds those costs (journal: cells of at least 1 MiB) */
#define EFAX_STAGE_MIN_CELL (1ull << 20)

/* Packs (rank, tag, seq) into 32-bit immediate data. Returns 0 or -FI_EINVAL when a field
   does not fit. Pure. */
EFAX_API int efax_imm_encode(int rank, int tag, uint32_t seq, uint32_t *imm);
/* Unpacks immediate data. Pure. */
EFAX_API void efax_imm_decode(uint32_t imm, int *rank, int *tag, uint32_t *seq);

/* One contiguous piece of a transfer on one NIC. Filled by the scheduler (efax_plan). */
typedef struct efax_seg {
    struct efax_seg *next; /* NIC's pending list */
    struct efax_xfer *x;
    uint64_t off; /* offset within the transfer */
    uint64_t len;
    uint64_t posted;    /* bytes of it posted so far */
    uint64_t completed; /* bytes of it completed */
    int nic;
} efax_seg;

enum { EFAX_OP_SEND = 1, EFAX_OP_RECV, EFAX_OP_WRITE };

/* Called inside efax_progress the moment a transfer is done (efax_write_desc.on_done,
   efax_send_desc.on_done); it may not start transfers itself. Keeps an engine (efax_cuda.h's
   proxy) from scanning its transfers for completion. */
typedef void (*efax_done_fn)(void *user, efax_xfer *x);

/* One logical transfer: a send, a receive or a write, possibly in many chunks over many
   NICs. Owned by the caller; any memory will do: efax_send, efax_recv and efax_write set
   every field that they or a later call read, from their arguments, and read none back (the
   hooks are inputs of the descs; a send done at once by inject leaves the queue's fields).
   It must not move, nor be started again, until efax_xfer_done() says so. The caller reads
   status, done, chunks and, for receives, rx_len, rx_data and rx_has_data; the rest is
   efax's. */
struct efax_xfer {
    int op;     /* EFAX_OP_* */
    int peer;   /* -1 for a receive from anyone */
    int status; /* 0, or the first error of any chunk */
    bool done;
    bool has_imm;
    uint32_t imm;
    const efax_mr *lmr; /* local region */
    uint64_t loff;      /* offset in the local region */
    const efax_mr *rmr; /* remote region (writes): rmr->remote[peer] */
    uint64_t roff;
    uint64_t len;
    uint64_t chunk; /* most bytes one post carries */
    int nseg;
    efax_seg seg[EFAX_MAX_NICS];
    uint32_t pending;  /* chunks posted but not completed */
    uint32_t unposted; /* segments with bytes still to post */
    uint32_t chunks;   /* chunks this transfer is made of (the target counts them) */
    /* receives: what arrived */
    uint64_t rx_len;
    uint64_t rx_data;
    bool rx_has_data;
    bool (*ready)(void *user, uint64_t off, uint64_t len); /* efax_write_desc's */
    void *ready_user;
    bool cell_seq; /* into a staged region: posts within cells of `cell` bytes, each carrying
                             its cell's index beside the sequence */
    uint64_t cell;
    efax_done_fn on_done; /* the desc's */
    void *done_user;
};

/* One send as its sender describes it. Zeroed fields mean defaults. */
typedef struct efax_send_desc {
    int to;             /* the receiving rank */
    int nic;            /* the local NIC it leaves on (0: NIC 0) */
    const efax_mr *src; /* the sender's region */
    uint64_t src_off;
    uint64_t size; /* bytes: one post (sends are not chunked) */
    bool has_imm;  /* carry immediate data: the receiver's xfer gets it in rx_data */
    uint32_t imm;
    efax_done_fn on_done; /* optional (NULL: none) */
    void *done_user;
} efax_send_desc;

/* Starts the send s describes into x (any memory: see efax_xfer). Returns 0 (queued or
   posted), -FI_EINVAL / -EFAX_E_BOUNDS for bad arguments. Not thread safe. */
EFAX_API int efax_send(efax_ctx *ctx, efax_xfer *x, const efax_send_desc *s);

/* Posts a receive of up to len bytes into mr+off on local NIC `nic` from any peer, into x (any
   memory). Returns 0, -FI_EINVAL or -EFAX_E_BOUNDS. Not thread safe. */
EFAX_API int efax_recv(efax_ctx *ctx, efax_xfer *x, int nic, const efax_mr *mr, uint64_t off, uint64_t len);

/* Drives the context once: drains every NIC's CQ (completions, receives, immediate data,
   errors), then posts queued chunks up to each NIC's window; every 1024th call it also reads
   each NIC's event queue, where a provider puts endpoint errors that belong to no operation
   (efa would abort() without one). Returns the number of completions handled, or a negative
   code for a failure not tied to one transfer. Two are sticky, returned by this and every later
   call: an event-queue error (the endpoint is unusable), and an injected operation (a small send,
   write or notification, counted done when posted) whose error entry came later: its transfer
   cannot be named, so nothing after it can be trusted. Every efax wait runs through it.
   Not thread safe. */
EFAX_API int efax_progress(efax_ctx *ctx);

/* True when x finished (successfully or not; see x->status). */
EFAX_API bool efax_xfer_done(const efax_xfer *x);

/* Progresses until x is done or timeout_ms passes (<0: the context's timeout). Returns
   x->status, -FI_ETIMEDOUT with a message naming the operation, peer and NIC, or the context's
   sticky error (efax_progress), even for a transfer already done: an injected operation that
   failed may have been it. A transfer made of injects is done when posted, so a wait for it that
   comes before its failure surfaced returns 0: an inject reports nothing else. */
EFAX_API int efax_wait(efax_ctx *ctx, efax_xfer *x, int timeout_ms);

/* Like efax_wait for n transfers (pointers; NULL entries are skipped). */
EFAX_API int efax_wait_all(efax_ctx *ctx, efax_xfer **xs, int n, int timeout_ms);

/* Sends a control message: the peer counts it under (this rank, tag, seq) exactly as it
   counts a write's immediate data. Tagged, so it never meets efax_recv's buffers. Goes out
   on NIC 0; efax_notify_nic picks the NIC. Retries -FI_EAGAIN until the timeout. */
EFAX_API int efax_notify(efax_ctx *ctx, int peer, int tag, uint32_t seq);
EFAX_API int efax_notify_nic(efax_ctx *ctx, int peer, int nic, int tag, uint32_t seq);

/* Tag 0 is efax's own (efax_ctx_warmup); applications use tags 1 .. imm_tags-1. */
#define EFAX_TAG_INTERNAL 0

/* Opens every connection before anything is timed: each rank notifies every peer on every
   NIC and waits for every peer's notifications (the first message over EFA or tcp can take
   milliseconds). Collective: every rank calls it after efax_ctx_connect. */
EFAX_API int efax_ctx_warmup(efax_ctx *ctx);

/* Hands arrivals under `tag` to fn instead of counting them (fn NULL: count again). For
   engines that need to know each chunk as it lands (efax_cuda.h's staged receives put a
   chunk index in the sequence bits). fn runs inside efax_progress. */
typedef void (*efax_imm_fn)(void *user, int peer, int tag, uint32_t seq, int nic);
EFAX_API int efax_ctx_imm_hook(efax_ctx *ctx, int tag, efax_imm_fn fn, void *user);

/* Waits until `count` arrivals (writes with immediate data or notifications) from `peer`
   under `tag` carried sequence `seq` (low EFAX_IMM_SEQ_BITS bits), then consumes them. Arrivals
   of other sequences under the tag are counted apart meanwhile, in any order (EFAX_IMM_WINDOW:
   the window, and its errors); a sequence may be consumed in parts, by several waits. Returns 0,
   -FI_ETIMEDOUT (names the peer, tag, sequence, how many of count arrived and on which NIC),
   -EFAX_E_STALE, -EFAX_E_OVERRUN, or the error of a failed arrival. It does not settle the region
   written (efax_mr_desc.settle): for device memory use efax_expect_wait, or efax_buf_settle after
   it. timeout_ms < 0: the context's. Not thread safe. */
EFAX_API int efax_wait_imm(efax_ctx *ctx, int peer, int tag, uint32_t seq, uint32_t count, int timeout_ms);

/* Arrivals from peer under (tag, seq) counted so far and not yet consumed: a poll that never
   blocks (nor progresses: efax_progress does). 0 for a sequence outside the tag's window. Not
   thread safe. */
EFAX_API uint32_t efax_imm_count(const efax_ctx *ctx, int peer, int tag, uint32_t seq);

// >>schedule --------------------------------------------------------------------------------

/* How one logical transfer becomes posts over several NICs. */
typedef enum efax_mode {
    EFAX_MODE_SINGLE = 0, /* one NIC (the one asked for) */
    EFAX_MODE_SPLIT,      /* one buffer striped evenly over all NICs */
    EFAX_MODE_ROUNDROBIN, /* whole messages rotate over NICs (message index picks the NIC) */
    EFAX_MODE_STRIPE,     /* small messages whole and rotating, large ones striped over
                             up to all NICs with stripes of at least min_stripe (aws-ofi-nccl) */
    EFAX_MODE_COUNT
} efax_mode;

/* Names: "single", "split", "roundrobin", "stripe" (and the CamelCase labels of tables). */
EFAX_API const char *efax_mode_name(efax_mode m);
EFAX_API const char *efax_mode_label(efax_mode m);
/* Parses a mode name (case-insensitive; "rr" means roundrobin). Returns 0 or -EFAX_E_USAGE. */
EFAX_API int efax_mode_parse(const char *s, efax_mode *m);

#define EFAX_MIN_STRIPE (128u * 1024u)
#define EFAX_STRIPE_ALIGN 128u

/* One planned piece: local NIC, offset within the message, length. */
typedef struct efax_plan_seg {
    int nic;
    uint64_t off, len;
} efax_plan_seg;

/* Plans a message of `size` bytes over `nnic` NICs. index: the message's number (which NIC
   a rotating mode starts on; pass e.g. iteration*window + message + peer). nic0: the NIC
   SINGLE uses. min_stripe: STRIPE's smallest stripe (0: EFAX_MIN_STRIPE).
   out: at least nnic entries. Returns the number of segments (>= 1; a 0-byte message gives
   one empty segment) or -FI_EINVAL. Pure: the same inputs give the same plan on every rank. */
EFAX_API int efax_plan(uint64_t size, int nnic, efax_mode mode, uint64_t index, int nic0, uint64_t min_stripe,
                       efax_plan_seg *out);

/* The largest chunk efax posts as one write, whatever --chunk says (0 included): efa carries a
   write with immediate data as one hardware RDMA write (efa_rdm_pke.c efa_rdm_pke_write asserts
   it), cut at MIN(efa's write segment, 1 GiB by default, and the device's max_rdma_size)
   (efa_rdm_ope.c efa_rdm_ope_post_remote_write; efa_env.c efa_write_segment_size), and neither
   its max_msg_size nor its RDM endpoint's FI_OPT_MAX_RMA_SIZE (both UINT64_MAX) says so. The
   device's own limit, where libfabric tells it, lowers efax_caps.max_write below this. Applied
   on every provider, so writer and target count the same chunks. */
#define EFAX_MAX_CHUNK (1ull << 30)

/* The chunk a write uses: `chunk` (0: as large as allowed) clamped to `limit` and to
   EFAX_MAX_CHUNK (limit 0: EFAX_MAX_CHUNK alone). Pure. */
EFAX_API uint64_t efax_chunk_clamp(uint64_t chunk, uint64_t limit);

/* The largest chunk this context's writes use: efax_caps.max_write (EFAX_MAX_CHUNK, each NIC's
   max_msg_size and FI_OPT_MAX_RMA_SIZE, efa's device max_rdma_size), and after efax_ctx_connect the
   smallest over every rank (writer and target must agree on the chunk count). efax_write and
   efax_expect_write clamp to it. */
EFAX_API uint64_t efax_ctx_max_chunk(const efax_ctx *ctx);

/* The chunk a write uses when its desc names none (efax_write_desc.chunk 0): EFAX_CHUNK_DEFAULT; on shm
   whole messages (into staged regions EFAX_CHUNK_SHM_STAGED); on tcp between two hosts
   EFAX_CHUNK_TCP_FAR. In words once, so that a program's help and its run header print what
   efax_write_chunk decides (a test holds the words to the numbers). */
#define EFAX_CHUNK_DEFAULT (1ull << 20)
#define EFAX_CHUNK_SHM_STAGED (4ull << 20)
#define EFAX_CHUNK_TCP_FAR (128ull << 10)
#define EFAX_CHUNK_POLICY "1M; on shm whole messages (staged regions: 4M); on tcp between hosts 128K"


/* How many posts (chunks of at most `chunk` bytes; 0 or more than EFAX_MAX_CHUNK count as
   EFAX_MAX_CHUNK) a plan makes: what the target counts. */
EFAX_API uint32_t efax_plan_chunks(const efax_plan_seg *segs, int nseg, uint64_t chunk);

/* One write as both of its sides see it: the writer fills it to start the write (efax_write),
   the target fills the same to know what lands (efax_expect_write), so the two cannot disagree
   (build it in one function both sides call). Zeroed fields mean defaults, resolved for both
   sides in one place (efax__write_desc). */
typedef struct efax_write_desc {
    int from, to;       /* the writer's rank and the target's (may be the same: a loopback
                           through the NIC) */
    const efax_mr *src; /* the writer's region (only the writer reads it) */
    uint64_t src_off;
    const efax_mr *dst; /* the target's region: exchanged (efax_mr_exchange) on the writer,
                           the target's own on the target */
    uint64_t dst_off;
    uint64_t size;  /* bytes */
    efax_mode mode; /* how the writer plans it over its NICs (0: Single) */
    int nic;        /* the writer's NIC that Single uses (0: NIC 0; modulo its NICs) */
    uint64_t index; /* the message's number: the NIC a rotating mode starts on */
    uint64_t chunk; /* most bytes one post carries (0: EFAX_CHUNK_POLICY's, efax_write_chunk;
                       always clamped to efax_ctx_max_chunk). Into a staged region no
                       post crosses a cell of efax_stage_unit(size, chunk) */
    int tag;        /* every chunk carries immediate data (from, tag, seq): the target
                       counts them under (from, tag) */
    uint32_t seq;
    /* the writer's alone (the target ignores them; NULL: none). A chunk is posted only once
       ready(ready_user, off, len) says its source bytes are in place: */
    bool (*ready)(void *user, uint64_t off, uint64_t len);
    void *ready_user;
    efax_done_fn on_done; /* called inside efax_progress once the write is done */
    void *done_user;
} efax_write_desc;

/* Plans and starts the write w describes (w->from must be this rank) into x (any memory: see
   efax_xfer): w->src+src_off -> w->to's w->dst at dst_off. *chunks receives how many chunks
   the target counts (may be NULL). Returns 0, -FI_EINVAL (naming the field) or another
   negative code. Not thread safe. */
EFAX_API int efax_write(efax_ctx *ctx, efax_xfer *x, const efax_write_desc *w, uint32_t *chunks);

/* The most bytes one post of write w carries: w->chunk clamped to efax_ctx_max_chunk, or with
   w->chunk 0 EFAX_CHUNK_POLICY's, from what writer and target share (the provider's efax_caps
   whole_writes and chunk_between_hosts, whether the target's region is staged, whether the two
   ranks share a host), so both sides cut the write alike. Either side may ask (w->from or w->to
   is this rank). After efax_ctx_connect. Thread safe. */
EFAX_API uint64_t efax_write_chunk(const efax_ctx *ctx, const efax_write_desc *w);

/* The number of chunks the target of such a write counts, computed on the target from the
   writer's NIC count (efax_ctx_peer_nnics) and the same mode and chunk size (clamped to
   EFAX_MAX_CHUNK; efax_expect_write clamps to efax_ctx_max_chunk first). Pure. */
EFAX_API uint32_t efax_write_chunks(uint64_t size, int writer_nnic, efax_mode mode, uint64_t chunk);

/* Batched and paged writes: many pieces from one region to one peer's region, under one tag and
   sequence, posted together (with FI_MORE on all but the last where efax_ctx_desc.fi_more asks),
   that the target awaits as one expectation of a known count. The count is declared on both sides,
   not carried: writer and target build the same efax_batch_desc (the target needs only the pieces'
   sizes, which a receiver that allocated the pages knows), so no extra message is sent and nothing
   waits on one; a notification that carried the count could itself arrive before or after the data
   (no order on efa), so the target would still count. */
typedef struct efax_batch_seg {
    uint64_t src_off, dst_off, len;
} efax_batch_seg;

typedef struct efax_batch_desc {
    int from, to;             /* the writer's rank and the target's */
    const efax_mr *src, *dst; /* as efax_write_desc's: dst exchanged or unpacked on the writer */
    efax_mode mode;           /* each piece planned over the writer's NICs as a write of its own:
                                   Split stripes every piece, RoundRobin and Stripe rotate pieces */
    int nic;                  /* Single's NIC */
    uint64_t index;           /* piece i rotates from index + i */
    uint64_t chunk;           /* most bytes one post carries (0: EFAX_CHUNK_POLICY's) */
    int tag;                  /* every chunk of every piece carries (from, tag, seq) */
    uint32_t seq;
    const efax_batch_seg *segs; /* either nseg pieces, each (src_off, dst_off, len), */
    int nseg;
    const uint32_t *src_pages; /* or npages pages of page_size bytes: page i from src_off +
                                   src_pages[i] * src_stride to dst_off + dst_pages[i] * dst_stride
                                   (strides 0: page_size); src_pages NULL: 0, 1, 2, ... (the target
                                   passes its own dst_pages and may leave src_pages NULL) */
    const uint32_t *dst_pages;
    int npages;
    uint64_t page_size, src_stride, dst_stride, src_off, dst_off;
} efax_batch_desc;

/* The target's side of a write: what it expects and how it knows it landed. For an ordinary
   region it counts chunks (efax_wait_imm); for a staged one it takes each cell as it arrives
   and copies it in (the copies overlap the rest of the transfer). */
typedef struct efax_expect {
    const efax_mr *mr;
    int peer, tag;
    uint32_t seq, count;      /* ordinary regions: chunks to count */
    uint64_t off, size, unit; /* the first write's offset and the bytes awaited; staged: its cells */
    int ncells, cells_done, status;
    bool active;
    bool landed;                    /* efax_expect_test took its chunks; it waits for the region to settle */
    uint32_t on_nic[EFAX_MAX_NICS]; /* ordinary regions: chunks to count on each local NIC */
    uint64_t on_nic_bytes[EFAX_MAX_NICS]; /* bytes the plan lands on each local NIC: its rx_bytes once
                                             landed (a remote write's completion carries no length
                                             on every provider: tcp reports 0) */
    uint32_t want[EFAX_STAGE_CELLS], got[EFAX_STAGE_CELLS]; /* staged: each cell's pieces */
    efax_batch_desc batch; /* staged: a batch (batch.dst set), one cell copied in piece by piece */
    uint64_t in_mark;      /* staged, every cell's copy in started: the mark after them (marked) */
    bool marked;
} efax_expect;

/* Tells a context that writes into staged region `dst` arrive under `tag` (cells are taken
   as they land, even before efax_expect_write names the transfer). Call once per tag, before
   peers may write. No-op for ordinary regions. */
EFAX_API int efax_expect_prepare(efax_ctx *ctx, const efax_mr *dst, int tag);

/* Announces the write w describes into e (any memory: every field a later call reads is set from
   w) (w->to must be this rank; w->dst is this rank's region; the writer's NIC count comes from
   efax_ctx_peer_nnics(w->from)). Returns 0 or a negative code. */
EFAX_API int efax_expect_write(efax_ctx *ctx, efax_expect *e, const efax_write_desc *w);

/* Announces n writes that rank ws[0].from makes under one tag and sequence into one ordinary region
   (ws[i].tag, .seq, .from, .dst the same; any offsets, sizes, modes and NICs), as one expectation e
   whose wait takes them all: a target awaiting a window of small writes from a peer announces and
   awaits them once, not once a write (each of them counts its chunks here as efax_expect_write's
   would; the writer writes each under that tag and sequence). n == 1 is efax_expect_write. Staged
   regions take each write's cells as it lands: announce those one by one. Returns 0, -FI_EINVAL
   naming the write that differs, or what efax_expect_write returns for a write (nothing stays
   announced then). Not thread safe. */
EFAX_API int efax_expect_writes(efax_ctx *ctx, efax_expect *e, const efax_write_desc *ws, int n);

/* Waits until that write landed (and, staged, was copied in). Returns 0, -FI_ETIMEDOUT naming
   what is missing, -EFAX_E_STALE, or a copy error. */
EFAX_API int efax_expect_wait(efax_ctx *ctx, efax_expect *e, int timeout_ms);

/* As efax_expect_wait, but for ordinary regions without settling the region (efax_mr_desc.settle):
   every chunk arrived, and device memory may still be copying in. For a caller with several
   writes in flight into one device buffer, which notes each (efax_buf_mark) and sees it land
   (efax_buf_marked) while later ones keep moving. Staged regions: efax_expect_wait. */
EFAX_API int efax_expect_arrived(efax_ctx *ctx, efax_expect *e, int timeout_ms);

/* Whether the write e announces (into an ordinary region) has arrived, without waiting: 1 (taken,
   as efax_expect_arrived takes it: every chunk counted; device memory may still be copying in,
   which efax_buf_mark and efax_buf_marked follow), 0 not yet (drive the context, efax_progress, and
   ask again), or a negative code: -EFAX_E_STALE (another sequence's arrivals under its tag), an
   incoming operation's failure, the context's sticky error; -FI_EINVAL for a staged region or an
   expectation not announced. For a caller that keeps several transfers moving and acts on each
   arrival (all2all --pace). Never blocks, nor progresses (efax_expect_test does both, and settles).
   Not thread safe. */
EFAX_API int efax_expect_arrived_test(efax_ctx *ctx, efax_expect *e);

/* efax_expect_wait for each of the n writes es[0..n) announce, in order, with one timeout for all
   of them (counted from this call): for a target that awaits a batch (a window of small writes, a
   layer's pages). A write that already landed in an ordinary region is taken without a wait's
   setup or a clock read. Returns 0 or the first failure (the writes after it stay announced:
   wait for them again). Thread safety: as efax_expect_wait. */
EFAX_API int efax_expect_wait_all(efax_ctx *ctx, efax_expect *es, int n, int timeout_ms);

/* Whether that write landed, without blocking: progresses the context once; 1 landed (and, device
   memory, settled; staged, copied in), 0 not yet (call again), or a negative code (the wait's). Once
   it returned 1 or an error, e is done with. Not thread safe. */
EFAX_API int efax_expect_test(efax_ctx *ctx, efax_expect *e);

/* The writer's side of batches: room for up to max pieces a batch, allocated once
   (efax_batch_init), reused batch after batch. */
typedef struct efax_batch {
    efax_xfer *xs; /* [cap] one transfer a piece */
    int cap, n, ndone;
    int status;      /* the first failure of a piece */
    uint32_t chunks; /* chunks the target counts for the batch in flight */
    int peer, tag;
    uint32_t seq;
} efax_batch;

/* Room for batches of up to max_pieces pieces. Returns 0, -FI_EINVAL or -FI_ENOMEM. */
EFAX_API int efax_batch_init(efax_batch *b, int max_pieces);
/* Frees it; safe on a zeroed batch. Its writes must be done (efax_batch_wait). */
EFAX_API void efax_batch_deinit(efax_batch *b);
/* Starts the batch d describes (d->from is this rank), non-blocking: every piece checked, planned
   and queued, then posted NIC by NIC. Returns 0, or a negative code naming the piece (the pieces
   before it are on their way: wait for them, then treat the batch as failed). Not thread safe. */
EFAX_API int efax_write_batch(efax_ctx *ctx, efax_batch *b, const efax_batch_desc *d);
/* Whether batch b is done at the writer, without blocking: progresses the context once; 1 done, 0 not
   yet, or the first piece's failure. Done at the writer says nothing of the target: it counts. */
EFAX_API int efax_batch_test(efax_ctx *ctx, efax_batch *b);
/* efax_batch_test until done, or timeout_ms (< 0: the context's); -FI_ETIMEDOUT names the batch. */
EFAX_API int efax_batch_wait(efax_ctx *ctx, efax_batch *b, int timeout_ms);
/* The target's side: announces batch d (d->to is this rank) as one expectation e, every piece's
   chunks counted as efax_expect_write would; await it with efax_expect_wait or efax_expect_test.
   Into a staged region (device memory without GPUDirect) the batch is one cell, copied in piece by
   piece once its last chunk landed: d is copied, but its arrays (segs, page tables) must stay until
   the wait returns. Returns 0 or a negative code naming the piece. */
EFAX_API int efax_expect_batch(efax_ctx *ctx, efax_expect *e, const efax_batch_desc *d);

// >>bootstrap -------------------------------------------------------------------------------

enum { EFAX_BOOT_NONE = 0, EFAX_BOOT_PMIX, EFAX_BOOT_TCP, EFAX_BOOT_SINGLE };

typedef struct efax_boot_desc {
    int timeout_ms;    /* 0: $EFAX_TIMEOUT_MS, else EFAX_TIMEOUT_MS_DEFAULT */
    bool allow_single; /* with no launcher, run as rank 0 of 1 instead of failing */
    const char *force; /* "pmix" or "tcp" (NULL: $EFAX_BOOTSTRAP, else automatic); "single":
                          rank 0 of 1 whatever launched it (a rank's own loopback checks,
                          beside the job's boot: efax's doctor) */
    efax_log_fn log;
    void *log_user;
} efax_boot_desc;

/* Who this process is and how to reach the others. Must not move after init. */
struct efax_boot {
    int kind; /* EFAX_BOOT_* */
    int rank, size;
    int local_rank, local_size;
    char host[64];
    char (*hosts)[64]; /* [size] host name of every rank */
    int timeout_ms;
    efax_log_fn log;
    void *log_user;
    /* TCP rendezvous: on rank 0, one socket per peer; elsewhere, one socket to rank 0. */
    int *fds;
    int fd;
    uint64_t token;
    void *pmix_proc; /* pmix_proc_t of this process */
    /* Optional: called about every 10 ms while a collective waits for its peers; a negative return
       ends the collective with that code. efax_ctx_connect sets it to the context's progress. */
    int (*idle)(void *user);
    void *idle_user;
    int idle_rc; /* what idle returned when it ended a collective (for its message) */
};

/* Finds the launcher and joins the job: PMIx (mpirun, srun --mpi=pmix, prterun), or the TCP
   rendezvous from EFAX_RANK/EFAX_SIZE/EFAX_ROOT/EFAX_TOKEN. Either way the collectives below
   run over TCP sockets to rank 0 (under PMIx, rank 0 publishes its address and a random token
   through PMIx once: PMIx would keep every per-call key for the life of the job). Without a
   launcher, fails with -EFAX_E_LAUNCH and a message saying how to launch (or runs alone if
   allow_single). Gathers every rank's host name and computes local rank/size. Not thread safe. */
EFAX_API int efax_boot_init(efax_boot *b, const efax_boot_desc *desc);

/* Leaves the job; safe on a zeroed or failed efax_boot. */
EFAX_API void efax_boot_deinit(efax_boot *b);

/* How long a rank may wait for its turn in a benchmark whose ranks take turns (rank 0 with
   rank 1, then rank 2, ...): the barrier between steps. A lost peer still ends the wait at
   once (the launcher kills the job, or the rendezvous socket closes). */
#define EFAX_TURN_MS (6 * 3600 * 1000)

/* All-gather: every rank contributes len bytes; out receives size*len bytes, rank r's at
   out + r*len. Collective: every rank calls it in the same order with the same len.
   timeout_ms < 0: the boot's timeout. Returns 0, -FI_ETIMEDOUT naming the missing ranks, or
   -EFAX_E_BOOT. Not thread safe. */
EFAX_API int efax_boot_allgather(efax_boot *b, const void *in, size_t len, void *out, int timeout_ms);

/* Barrier over all ranks (timeout_ms < 0: the boot's timeout). */
EFAX_API int efax_boot_barrier(efax_boot *b, int timeout_ms);

/* Sums one value over all ranks (a barrier too). */
EFAX_API int efax_boot_sum(efax_boot *b, int64_t value, int64_t *sum, int timeout_ms);

/* This rank, the job size, and the NIC count of peer p (after efax_ctx_connect). */
EFAX_API int efax_ctx_rank(const efax_ctx *ctx);
EFAX_API int efax_ctx_size(const efax_ctx *ctx);
EFAX_API int efax_ctx_peer_nnics(const efax_ctx *ctx, int peer);
/* The host rank p runs on, as the bootstrap named it (after efax_ctx_connect; "?" before). */
EFAX_API const char *efax_ctx_host(const efax_ctx *ctx, int p);
/* Which local NIC receives what peer p sends from its NIC k (-1 if p has no NIC k). */
EFAX_API int efax_ctx_route_in(const efax_ctx *ctx, int peer, int peer_nic);

// >>topology --------------------------------------------------------------------------------

/* Reads one sysfs (or /proc) value into buf (at most len - 1 bytes), trailing newlines and spaces cut.
   Returns 0, -FI_EINVAL for len 0, or -FI_ENOENT when the file cannot be opened. Thread safe. */
EFAX_API int efax_read_sysfs(const char *path, char *buf, size_t len);

/* Lists the NICs `provider` offers on this host (RDM endpoints with messages, tagged
   messages and RMA), one entry per domain. provider: a name such as "efa", "tcp", "shm";
   NULL picks as efax_ctx_init does. out: array of `max` entries (may be NULL to count).
   *count receives the number found (may exceed max). Returns 0, -EFAX_E_NOPROV.
   Thread safe. */
EFAX_API int efax_topo_list(const char *provider, efax_nic_info *out, int max, int *count);

/* Writes into buf the providers that offer RDM endpoints with RMA on this host, comma
   separated ("efa,efa-direct,tcp,shm": efa-direct, efa's other fabric in libfabric 2.x, where the
   device offers what efax needs of it). Returns 0 or a negative code. Thread safe. */
EFAX_API int efax_topo_providers(char *buf, size_t len);

/* The provider efax uses when none is named: `want` if not NULL/empty, else $EFAX_PROVIDER,
   else efa, tcp or shm, the first present. "efa-direct" names efa's other fabric (libfabric 2.x:
   only what the device does; efax_caps.direct); "efa" is efa's RDM protocol. Writes it into buf.
   Returns 0 or -EFAX_E_NOPROV. It does not refuse a fall back from efa on a host with EFA devices:
   efax_ctx_init does (efax_topo_efa_devices). Thread safe. */
EFAX_API int efax_topo_pick_provider(const char *want, char *buf, size_t len);

/* The EFA devices the kernel has: entries of <root>/sys/class/infiniband whose device/vendor is
   Amazon's (0x1d0f), whatever libfabric sees. names (may be NULL) gets them comma separated.
   Returns how many. efax_ctx_init refuses to fall back to tcp or shm where there are some and
   no provider was named; the doctor compares them with what libfabric offers. Thread safe. */
EFAX_API int efax_topo_efa_devices(char *names, size_t len);

/* NVIDIA GPUs on the PCI bus under root (vendor 0x10de, class 0x03xxxx: what a program without CUDA
   sees), their PCI addresses in pci[] sorted, at most max (pci may be NULL to count). Returns how
   many there are. Thread safe. */
EFAX_API int efax_topo_gpus(const char *root, char (*pci)[16], int max);

/* Where efax reads the PCI tree: $EFAX_SYSFS_ROOT, a directory holding a "sys" tree (tests/topo/p5
   and tests/topo/p4d are synthetic ones shaped like a p5's and a p4d's: their NOTE.md), or "" for
   the live /sys. Every
   topology path is root + "/sys/...". Thread safe. */
EFAX_API const char *efax_topo_sysfs_root(void);

/* How near two PCI devices ("0000:53:00.0") sit: the number of PCI components (host bridge,
   root port, switch ports) their sysfs paths share under root. 0 when either is unknown or
   they sit under different host bridges; more is nearer (behind one PCIe switch: 3 or more).
   Thread safe. */
EFAX_API int efax_topo_pci_depth(const char *root, const char *a, const char *b);

/* NUMA node of PCI device `pci` under root; -1 when unknown. Thread safe. */
EFAX_API int efax_topo_pci_numa(const char *root, const char *pci);

/* Which of `nics` a rank should use by default. dev_pci (its GPU's PCI address, or NULL/""):
   the NICs sharing the most PCI path with it (a p5's 4 behind the GPU's switch, a p4d's one),
   as aws-ofi-nccl does (nccl_ofi_topo.cpp), shared out among the GPUs behind the same switch when
   there are NICs enough (a p5en's or p6-b200's 2 GPUs and 2 NICs: one each; GPUs read from sysfs,
   efax_topo_gpus); else numa >= 0: the NICs on that NUMA node.
   out: indices into nics, at most max. Returns how many (0: no preference: use them all).
   Reads sysfs under root only for PCI depths. Thread safe. */
EFAX_API int efax_topo_near(const char *root, const efax_nic_info *nics, int nnics, const char *dev_pci,
                            int numa, int *out, int max);

/* Groups NICs by the PCIe switch they hang off, read under root: NICs whose PCI paths agree on all
   but their last two components (the NIC and the switch port above it) share a switch (a p5: 8
   groups of 4, a p4d: 4 of 1). group[i] gets NIC i's group, numbered in the order of the groups'
   PCI paths, so every rank of a host numbers them alike; -1 for a NIC with no PCI path there.
   Returns the number of groups (0: no NIC has a PCI path). Thread safe. */
EFAX_API int efax_topo_switch_groups(const char *root, const efax_nic_info *nics, int nnics, int *group);

/* Which of `nics` a rank moving host memory uses by default: whole PCIe switch groups
   (efax_topo_switch_groups), shared out among the local_size ranks of the host as device memory
   effectively is (each GPU's rank takes the switch it sits behind). Local rank i takes group
   i mod G when there are G groups or fewer than ranks, else every group g with g mod local_size
   == i. numa >= 0 (the rank is bound to a node): only the groups with NICs on that node, shared
   among the ranks expected there (local_size in proportion to the groups). local_size <= 0
   counts as 1. out: indices into nics, at most max; why (may be NULL) gets which groups, e.g.
   "PCIe switch group 2 of 8, local rank 2 of 8". Returns how many (0: no groups known: no
   preference). Thread safe. */
EFAX_API int efax_topo_host_nics(const char *root, const efax_nic_info *nics, int nnics, int numa,
                                 int local_rank, int local_size, int *out, int max, char *why, size_t wl);

// >>counters --------------------------------------------------------------------------------

/* What the operating system counts for a NIC, beside efax's own counters (efax_nic_stats): the
   NIC's or the interface's counters, read from sysfs under efax_topo_sysfs_root(), so that a run
   can say what the wire did (retransmits, drops) and a transfer engine can watch its rails.
     efa  <root>/sys/class/infiniband/<device>/ports/1/hw_counters/<name>: the efa kernel driver's
          port statistics (tx_bytes, rx_bytes, tx_pkts, rdma_write_bytes, rdma_write_recv_bytes,
          retrans_pkts, rx_drops, ...; drivers/infiniband/hw/efa/efa_verbs.c in Linux). The
          device of domain "rdmap16s27-rdm" is "rdmap16s27".
     net  <root>/sys/class/net/<interface>/statistics/<name>: a tcp rail's interface (rx_bytes,
          tx_packets, tx_dropped, ...).
     tcp  <root>/proc/net/snmp, its "Tcp:" lines (OutSegs, RetransSegs, InErrs, ...): the counters
          of this process's network namespace, shared by every interface in it.
   Values are the raw counters, sorted by name; efax_os_counters_delta subtracts two readings. */
#define EFAX_OS_COUNTERS_MAX 32
typedef struct efax_os_counters {
    char source[8];  /* "efa", "net", "tcp", or "" when the OS has none for the NIC */
    char dev[64];    /* what was read: "rdmap16s27", "r0", "/proc/net/snmp" */
    int lifespan_ms; /* how long the kernel keeps the values before it reads the device again (the RDMA
                        core's hw_counters/lifespan); 0 when it does not say. A reading that must see
                        what just happened waits that long first */
    int n;
    char name[EFAX_OS_COUNTERS_MAX][32];
    uint64_t value[EFAX_OS_COUNTERS_MAX];
} efax_os_counters;

/* Reads the OS's counters of NIC `nic` (efax_ctx_nic, efax_topo_list) into out: an efa NIC's
   hw_counters, else the statistics of the interface the NIC is named after. Returns 0, or
   -FI_ENOENT with out->n = 0 when the OS has none for it (shm; an interface in another network
   namespace). Reads a few dozen small files: not for a timed loop. Thread safe. */
EFAX_API int efax_os_counters_nic(const efax_nic_info *nic, efax_os_counters *out);

/* Reads this network namespace's TCP counters (<root>/proc/net/snmp). Returns 0 or -FI_ENOENT.
   Thread safe. */
EFAX_API int efax_os_counters_tcp(efax_os_counters *out);

/* out = after - before, counter by counter (names in both; a counter that went backwards, reset
   or wrapped, counts from 0). out may be after. Pure. */
EFAX_API void efax_os_counters_delta(const efax_os_counters *before, const efax_os_counters *after,
                                     efax_os_counters *out);

/* The value of counter `name`, or -1 when c has no such counter. Pure. */
EFAX_API int64_t efax_os_counter(const efax_os_counters *c, const char *name);

/* What the counters (a delta over a stretch) say went wrong on the wire, the counters users of efa
   watch (aws-ofi-nccl's and NVSentinel's): efa's SRD events (retrans_timeout_events: a packet not
   acknowledged in time; impaired_remote_conn_events: a peer slow to answer; unresponsive_remote_events:
   a peer that stopped answering) and its retrans_pkts and rx_drops; an interface's drops and errors.
   out gets the counters that moved and a verdict: "retrans_pkts +12, retrans_timeout_events +1: packets
   lost and sent again (...)". Returns how many moved (0: none, out ""). Pure. */
EFAX_API int efax_os_counters_events(const efax_os_counters *c, char *out, size_t len);

/* Whether a NIC moved `wrote` bytes by device RDMA write, from its counters' delta over a stretch in
   which this process wrote them by RDMA write on it (efa: hw_counters rdma_write_bytes, the device's
   count of bytes it sent by RDMA write, which efa's emulated writes, sent as messages, never add to).
   1: it grew by at least wrote (device RDMA write; the counter is the device's, so other processes'
   writes on it add too); 0: by less (emulated: why says by how much); -1: no such counter (why says).
   Pure. */
EFAX_API int efax_os_write_verdict(const efax_os_counters *c, uint64_t wrote, char *why, size_t len);

/* What the counters (a delta) say the wire lost: *lost the packets sent again or dropped, *sent
   the packets sent. efa: retrans_pkts + rx_drops of tx_pkts; tcp: RetransSegs of OutSegs; net:
   tx_dropped + rx_dropped + tx_errors + rx_errors of tx_packets. Returns 0, or -FI_ENOENT (both
   0) when c holds none of them. Pure. */
EFAX_API int efax_os_counters_loss(const efax_os_counters *c, uint64_t *lost, uint64_t *sent);

// >>faults ----------------------------------------------------------------------------------

/* A fault layer at efax's boundary with libfabric (each fi_* call of the data path goes through a
   small wrapper), off unless $EFAX_FAULTS names families: then tcp and shm behave as efa may,
   which they otherwise never do. EFAX_FAULTS=family,family,...[:seed], read once by
   efax_ctx_init; the families:
     reorder     completions handed on in any order, within a NIC and across NICs, a few held
                 back for many polls; writes handed to the provider late, so a write lands before,
                 after or between the notifications that follow it (efa orders neither)
     eagain      any post refused with -FI_EAGAIN, in bursts lasting 1 to 2048 polls of the NIC's
                 completion queue (efa's RNR back-off and full queues)
     injectfail  an injected send, write or notification dropped after it was counted done, its
                 error entry (op_context NULL, an efa provider errno) arriving polls later; now and
                 then a completion turned into an error entry with a provider errno
     rxfail      a peer's write, now and then, turned at its target into the error entry efa gives a
                 failed incoming write (NULL context, FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, no data:
                 nothing names the writer, so the target's next wait for arrivals fails with it);
                 rxfail=N: the N-th incoming write of a NIC is the first
     emulated    every endpoint says its writes are emulated (FI_OPT_EFA_EMULATED_WRITE, read through
                 efax's getopt wrapper, on every provider and line): flagged, and efa still delivers;
                 emulated=odd: only odd ranks' do (even ranks' say not), a mismatched peer, which
                 efax_ctx_connect refuses, naming both ranks
     smallrma    the endpoint's max RMA size reads 64 KiB (smallrma=SIZE: another), so every large
                 write is many chunks
     all         every family above
   and two that impose a fabric's limits rather than faults (not part of `all`):
     direct      efa-direct's (libfabric 2.x's other efa fabric, --provider efa-direct): no tagged
                 operations, messages of at most 8 KiB (FI_OPT_MAX_MSG_SIZE, the device's MTU), no
                 inject writes but of 0 bytes (FI_OPT_INJECT_RMA_SIZE 0), sends and injects of at
                 most 32 bytes (the device's inline size), a descriptor for every buffer
                 (FI_MR_LOCAL), no message order, nothing emulated. efax runs as on efa-direct (its
                 control messages become 0-byte writes) and a call that breaks a limit is refused as
                 efa-direct would refuse it, counted, and named (a bug: the count must stay 0)
     cqmax=N     fi_cq_open refuses a queue of more than N entries, as a device with a smaller
                 max_cqe would (efax then opens one at the provider's own size)
   Decisions come from a seeded generator per rank and NIC (after efax_ctx_connect every rank
   takes rank 0's seed), so a seed gives the same decisions for the same sequence of calls; how
   processes interleave still varies. Whatever the families, posts with FI_MORE wait for the
   next post without it, as efa's do (its doorbell), and the layer checks that efax never leaves
   a batch ending on FI_MORE (a sticky error if it does). */
enum {
    EFAX_FAULT_REORDER = 1u << 0,
    EFAX_FAULT_EAGAIN = 1u << 1,
    EFAX_FAULT_INJECTFAIL = 1u << 2,
    EFAX_FAULT_EMULATED = 1u << 3,
    EFAX_FAULT_SMALLRMA = 1u << 4,
    EFAX_FAULT_RXFAIL = 1u << 5,
    EFAX_FAULT_ALL = 0x3fu
};

/* The families that impose a fabric's limits rather than faults: outside EFAX_FAULT_ALL. */
enum { EFAX_FAULT_DIRECT = 1u << 6, EFAX_FAULT_CQMAX = 1u << 7 };

/* An EFAX_FAULTS value, parsed. */
typedef struct efax_fault_spec {
    unsigned families; /* EFAX_FAULT_* bits; 0: off */
    uint64_t seed;     /* when has_seed */
    bool has_seed;
    uint64_t cq_max;       /* cqmax=N: the largest completion queue fi_cq_open takes */
    uint64_t rma;          /* smallrma's max RMA size: 64 KiB, or smallrma=SIZE */
    uint64_t inject_first; /* injectfail=N: the N-th inject the provider takes is the first dropped
                                 (0: one of the 16th to 271st, drawn from the seed) */
    bool emulated_odd;     /* emulated=odd: only odd ranks' writes are emulated */
    uint64_t rx_first;     /* rxfail=N: a NIC's N-th incoming write is the first to fail (0: drawn) */
} efax_fault_spec;

/* Parses an EFAX_FAULTS value (NULL or "": off). Returns 0, or -EFAX_E_USAGE with a one-line
   reason naming the value and the valid families in why. Pure; thread safe. */
EFAX_API int efax_faults_parse(const char *spec, efax_fault_spec *out, char *why, size_t wl);

/* What the fault layer did so far in this process (zeroes when it is off). */
typedef struct efax_fault_stats {
    uint64_t held;       /* reorder: completions handed on later or out of order */
    uint64_t deferred;   /* reorder: writes handed to the provider late */
    uint64_t refused;    /* eagain: posts refused with -FI_EAGAIN */
    uint64_t bursts;     /* eagain: bursts of refusals */
    uint64_t failed;     /* injectfail: injected operations dropped, each with an error entry */
    uint64_t errored;    /* injectfail: completions turned into error entries */
    uint64_t emulated;   /* emulated: NICs that said their writes are emulated */
    uint64_t capped;     /* smallrma: NICs whose max RMA size was cut */
    uint64_t direct;     /* direct: calls refused for breaking efa-direct's limits (a bug: must stay 0) */
    uint64_t cq_refused; /* cqmax: completion queues refused for their size */

    uint64_t batched;     /* posts with FI_MORE that waited for the doorbell */
    uint64_t interrupted; /* posts refused while a batch with FI_MORE waited for its doorbell */
    uint64_t unrung;      /* batches efax left ending on FI_MORE (a bug: must stay 0) */
    uint64_t rxfailed;    /* rxfail: incoming writes turned into error entries */
} efax_fault_stats;

/* The fault families in force as a replayable EFAX_FAULTS value with its seed
   ("reorder,eagain:1234"), or "" when the layer is off. For run headers. */
EFAX_API const char *efax_ctx_faults(const efax_ctx *ctx);
/* The fault layer's counts for this process. */
EFAX_API efax_fault_stats efax_ctx_fault_stats(const efax_ctx *ctx);

// >>gpu wire (what efax_cuda.h decodes from GPUs and peers) ------------------------------------

/* efax_cuda.h's GPU producers push proxy commands of EFAX_CMD_WORDS 64-bit words, and ranks on
   one host exchange IPC records. Both are decoded and checked here, as pure host code (no
   CUDA), so that host tools and fuzzers (tests/fuzz.c) run the same checks the proxy and
   efax_ipc_open run.
   Command words: w[0] = op (8 bits) | flags << 8 (8) | producer << 16 (16) | destination rank
   << 32; w[1] source offset; w[2] destination offset; w[3] size; w[4] = tag (low 16 bits used)
   | seq << 32; w[5] the producer's command number (1, 2, ...; fences count); w[6] producer. */
#define EFAX_CMD_WORDS 7
enum { EFAX_CMD_PUT = 1, EFAX_CMD_FENCE = 2 };
enum { EFAX_PUT_SPLIT = 1 }; /* post this write over every NIC (split mode) */

typedef struct efax_cmd {
    uint32_t op, flags, producer;
    int dst, tag;
    uint32_t seq;
    uint64_t soff, doff, size, number;
} efax_cmd;

/* Decodes command words w into c and checks them: the producer below `producers`, the
   number `expected` (the producer's next), a known op, and for a put: flags known, the
   destination a rank of the job other than `rank`, [soff, soff+size) inside the source window
   of src_len bytes and [doff, doff+size) inside dst->remote[destination] (an exchanged
   efax_mr). Returns 0, or -EFAX_E_PEER with the reason in why (c is filled as far as
   decoded). Pure; thread safe. */
EFAX_API int efax_cmd_decode(const uint64_t w[EFAX_CMD_WORDS], uint32_t producers, uint64_t expected,
                             int rank, int size, uint64_t src_len, const efax_mr *dst, efax_cmd *c, char *why,
                             size_t wl);

/* What a rank tells the ranks of its host about a device buffer (efax_ipc_open); handle is
   the CUDA IPC handle's 64 bytes. */
#define EFAX_IPC_MAGIC 0x45465849u /* "EFXI" */
typedef struct efax_ipc_record {
    uint32_t magic, wire;
    int32_t rank, device;
    char host[64];
    uint64_t len;
    uint8_t handle[64];
} efax_ipc_record;

/* Checks rank `rank`'s record as this rank (on host `host`) received it: magic, wire version,
   rank, a non-empty terminated host name, and for a record from this host a device ordinal
   in 0..1023. *local (may be NULL) is set when the record is from this host (its handle can be
   opened). Returns 0, -EFAX_E_VERSION or -EFAX_E_PEER (why says). Pure; thread safe. */
EFAX_API int efax_ipc_record_check(const efax_ipc_record *r, int rank, const char *host, bool *local,
                                   char *why, size_t wl);

// >>private types (declared here so callers can embed them; do not touch their fields) ---------

#define EFAX__ADDR_MAX 96
#define EFAX__CTRL_SLOTS 64
#define EFAX__CTRL_MSG 16
#define EFAX__CTRL_TAG 0x6566617843544c00ull /* "efaxCTL\0": control messages' libfabric tag */

enum { EFAX__OPK_TX = 1, EFAX__OPK_RX, EFAX__OPK_CTRL };

struct efax_op {
    struct fi_context2 fctx; /* first: providers with FI_CONTEXT/FI_CONTEXT2 use it */
    efax_op *next;
    efax_xfer *x;
    uint64_t len;
    int kind; /* EFAX__OPK_* */
    int nic;
    int slot;         /* control slot */
    struct iovec iov; /* kept alive for FI_ASYNC_IOV */
    struct fi_rma_iov riov;
    void *desc;
    int split;        /* EFAX__SPLIT_*: a half of a split write, or its marker */
    uint32_t imm;     /* a split write's: the immediate data its marker carries (with its cell's index
                         into a staged region) */
    efax_op *partner; /* the other half while both are in flight */
};

/* The states of an operation of a split write (efax__post_split). */
enum { EFAX__SPLIT_NONE = 0, EFAX__SPLIT_HALF, EFAX__SPLIT_WAIT, EFAX__SPLIT_MARKER };

typedef struct efax__route {
    fi_addr_t fa; /* peer's matched NIC in this NIC's AV */
    int rnic;     /* its index on the peer; -1: no peer now */
} efax__route;

/* What an arrival met that it could not be counted under (-EFAX_E_STALE, -EFAX_E_OVERRUN), kept for
   the next wait on its (peer, tag): the first such, and how many came. */
typedef struct efax__seq_fault {
    int err;
    uint32_t seq, n, at; /* the arrival's sequence, how many, the sequence it met */
} efax__seq_fault;

/* Arrivals from one peer under one tag, by sequence: a window of EFAX_IMM_WINDOW sequences from
   base, the oldest that may still hold something. It moves up only when a sequence beyond it
   comes, over entries that are empty or consumed (efax__imm_place). */
typedef struct efax__imm_slot {
    uint32_t count[EFAX_IMM_WINDOW]; /* arrivals not yet consumed, by sequence mod the window */
    uint32_t taken;                  /* entries a wait consumed (more of it may still come) */
    uint32_t live;                   /* arrivals held and not consumed (0: any sequence may start anew) */
    uint8_t base;
    bool used;          /* base was set: by the first sequence, or again when all was consumed */
    int awaited;        /* the sequence a wait in progress needs, plus one (0: none) */
    uint64_t passed[4]; /* sequences the window moved past before they came (bit: the sequence) */
    efax__seq_fault fault;
} efax__imm_slot;

typedef struct efax__imm_hook {
    efax_imm_fn fn;
    void *user;
} efax__imm_hook;

/* Cells of staged writes from one peer under one tag, by sequence (mod EFAX__STAGE_SEQS): the
   announced write each belongs to, or the pieces of cells that came before it was announced. The
   window is the EFAX_STAGE_WINDOW sequences from base, the oldest announced and not consumed; a
   first announcement sets it (anchored), and so does one when nothing is outstanding. */
#define EFAX__STAGE_SEQS (2 * EFAX_STAGE_WINDOW)
typedef struct efax__stage_rx {
    efax_expect *e[EFAX__STAGE_SEQS];
    uint32_t early[EFAX__STAGE_SEQS][EFAX_STAGE_CELLS];
    uint32_t taken; /* sequences consumed that the window has not moved past */
    uint32_t live;  /* pieces held early and writes announced, not consumed */
    uint8_t base;
    bool anchored;
    efax__seq_fault fault;
} efax__stage_rx;

struct efax__fnic; /* the fault layer's per-NIC state (>>faults implementation) */

typedef struct efax__nic {
    efax_nic_info info;
    struct fi_info *fi;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_cq *cq;
    struct fid_av *av;
    struct fid_ep *ep;
    struct fid_eq *eq;         /* errors the provider cannot put on the CQ (efax__eq_read) */
    struct efax__route *route; /* to each peer from here: this NIC's row of ctx->route */
    uint8_t addr[EFAX__ADDR_MAX];
    size_t addrlen;
    int window, inflight;
    efax_op *ops, *free_ops;
    efax_seg *pend_head, *pend_tail; /* transmit segments waiting for the window */
    efax_seg *rxp_head, *rxp_tail;   /* receives waiting to be posted */
    int rx_inflight;
    uint8_t *ctrl_buf;
    struct fid_mr *ctrl_mr;
    void *ctrl_desc;
    efax_op ctrl_ops[EFAX__CTRL_SLOTS];
    int nctrl, ctrl_posted;
    uint64_t split_min; /* shm on libfabric 2.x: writes this large are split (0: never) */
    efax_op *retry;     /* split-write posts the provider refused for now */
    bool work;          /* something may wait besides the CQ (queued receives or chunks, retry, free
                           control slots): set where it may start, recomputed by efax__nic_work, so
                           that a poll tests one flag */
    efax_nic_stats stats;
    int cq_size;              /* entries the CQ was opened with (efax__cq_plan) */
    int cq_incoming;          /* of them, room for peers' writes with immediate data */
    uint64_t expecting;       /* chunks that expectations (efax_expect_write) await here now */
    struct efax__fnic *fault; /* the fault layer's state; NULL when it is off */
    efax_nic_cold cold;       /* efax_ctx_cold */
} efax__nic;

/* The fault layer (>>faults): what EFAX_FAULTS asked for and what it did. */
typedef struct efax__faults {
    unsigned fams; /* EFAX_FAULT_* (0: off) */
    bool armed;    /* from efax_ctx_connect on: every rank draws from rank 0's seed */
    uint64_t seed;
    uint64_t cq_max; /* cqmax=N */

    uint64_t rma;          /* smallrma's max RMA size */
    uint64_t inject_first; /* injectfail=N (0: drawn) */
    bool emulated_odd;     /* emulated=odd */
    uint64_t rx_first;     /* rxfail=N (0: drawn) */
    int rank_hint;         /* the launcher's rank (environment) for `emulated`, before connect */
    char spec[112];        /* the replayable value: families and seed */
    efax_fault_stats stats;
} efax__faults;

struct efax_ctx {
    int nnic;
    efax__nic *nic;     /* [nnic] */
    efax__nic *nic_end; /* nic + nnic: where a poll's walk over the NICs stops */
    int rank, size;     /* after efax_ctx_connect; 0/1 before */
    bool connected;
    int *peer_nnic;        /* [size] */
    char (*peer_host)[64]; /* [size] host of every rank, for messages */
    uint8_t *peer_far;     /* [size] 1: the rank is on another host (efax_write_chunk's policy) */
    uint8_t *peer_on;      /* [size] 1: a peer now (efax_ctx_peer_add, efax_ctx_connect) */
    uint64_t *peer_max;    /* [size] the largest chunk between this process and the peer: both sides' */
    fi_addr_t **peer_fa;   /* [size] -> [nnic * its NICs]: what its insertion put in each NIC's AV */
    int max_peers;         /* efax_ctx_desc.max_peers */
    char self_host[64];    /* this process's host name, as its address carries it */
    bool batching;         /* efax_write_batch: writes queue their chunks, posted together after */
    efax__route *route;    /* [nnic * size]: a NIC's routes together (efax__nic.route) */
    int *route_in;         /* [size * EFAX_MAX_NICS]: local NIC that peer NIC k sends to */
    int ntags;
    efax__imm_slot *imm;       /* [size * ntags] */
    uint32_t *imm_nic;         /* [size * ntags * EFAX_IMM_WINDOW * nnic]: a sequence's arrivals on each NIC
                          (with one NIC its count is that NIC's, and this is not kept) */
    efax__imm_hook *hooks;     /* [ntags] */
    efax__stage_rx **stage_rx; /* [ntags] -> [size], for tags that receive staged writes */
    uint64_t bad_imm;          /* arrivals whose immediate data named no valid rank/tag */
    int timeout_ms;
    bool fi_more;
    uint64_t next_key; /* requested keys when the provider does not choose them */
    bool huge_pages;   /* efax_ctx_host_alloc asks for transparent huge pages */
    efax_log_fn log;
    void *log_user;
    int log_level;
    char provider[32];
    int last_cq_error;    /* a failure no transfer owned (control or remote write) */
    char mem_note[192];   /* how device memory reaches the NICs, and why (efax_ctx_mem_note) */
    int sticky_error;     /* every later progress returns it: an endpoint error from an EQ, or an
                                  injected operation that failed after it was counted done */
    int wait_slow;        /* sticky_error or settling: a finished wait's one load for "more to do"
                                  (efax__wait_end) */
    efax__faults faults;  /* >>faults */
    efax_boot *boot;      /* whose collectives progress this context while they wait */
    uint64_t max_chunk;   /* efax_ctx_max_chunk */
    int cq_entries;       /* efax_ctx_desc.cq_size, resolved (0: sized by the window) */
    bool efa_shm;         /* efax_ctx_desc's, with the environment applied */
    int cuda_api;         /* efax_ctx_desc.cuda_api resolved: 0 default, 1 permit, -1 forbid */
    int uwr;              /* FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV to set (efax__ctx_defaults) */
    efax_caps caps;       /* efax_ctx_caps */
    char peer_note[256];  /* efax_ctx_peer_note */
    char nic_choice[128]; /* how the NICs were chosen, for the run header */
    char prov_choice[64]; /* how the provider was chosen (efax_ctx_provider_choice) */
    uint64_t *peer_ctrl;  /* [size * EFAX_MAX_NICS * 2]: key and address of each peer NIC's control region
                             (efax_notify_nic's 0-byte write where caps.direct) */
    char mem_path[64];    /* efax_ctx_desc.mem_path, resolved ("" when none is forced) */
    unsigned tick;        /* progress calls until the next looks past the CQs (efax__progress_tick):
                                  the EQs every 1024th call, the sticky error at once (1) */
    int settling;         /* registered regions with a settle hook: efax_wait_all settles receives
                                  into them (while there are none, it does not look) */
};


#ifdef __cplusplus
}
#endif
#endif /* EFAX_H */

/* ============================================================================================
   Implementation
   ============================================================================================ */
#ifdef EFAX_IMPLEMENTATION
#ifndef EFAX_IMPLEMENTATION_DONE
#define EFAX_IMPLEMENTATION_DONE

#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <errno.h>
#include <time.h>
#include <limits.h>
#include <ctype.h>
#include <unistd.h>
#include <fcntl.h>
#include <poll.h>
#include <netdb.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sched.h>
#include <sys/mman.h>
#include <dirent.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_ext.h> /* efa's endpoint options (FI_OPT_EFA_EMULATED_WRITE) */
#ifndef EFAX_NO_PMIX
#include <pmix.h>
#endif

#ifndef EFAX_ASSERT
#include <assert.h>
#define EFAX_ASSERT(c) assert(c)
#endif

#ifdef __cplusplus
extern "C" {
#endif

// >>internal: what efax_cuda.h builds on (not an API) -----------------------------------------

/* efax_cuda.h is compiled in the same translation unit as this implementation (it requires
   EFAX_IMPLEMENTATION in the same file) and builds its pinned and device memory kinds, its GPU
   topology and its proxy loop on these private functions, so that they behave exactly as the
   host ones do. Nothing else private is used outside efax.h: efax_cuda.h uses these and public
   functions, efax_bench.h public functions alone (tests/run.sh, header/internal-boundary). */
EFAX_PRIVATE void efax__copy(char *dst, size_t cap, const char *src); /* bounded strcpy */
EFAX_PRIVATE void efax__idle(int got, unsigned *idle);                /* a wait's spin, then yield */
/* registers host memory b->ptr[0..len) for a CPU-addressable kind; b->path becomes path */
EFAX_PRIVATE int efax__buf_reg_cpu(efax_ctx *ctx, efax_buf *b, size_t len, unsigned access, const char *path);
/* the host kind's pattern operations (efax_mem_ops), for kinds the CPU addresses */
EFAX_PRIVATE void efax__host_fill(efax_buf *b, uint64_t off, uint64_t len, int rank, uint64_t iter);
EFAX_PRIVATE void efax__host_poison(efax_buf *b, uint64_t off, uint64_t len);
EFAX_PRIVATE uint64_t efax__host_check(efax_buf *b, uint64_t off, uint64_t len, int rank, uint64_t iter);
EFAX_PRIVATE void efax__host_copy(efax_buf *dst, uint64_t doff, const efax_buf *src, uint64_t soff,
                                  uint64_t len);

// >>hints, and what the core calls of the sections at the end ---------------------------------

/* The hot path's branch hints: the error side of a check, kept out of line (EFAX__COLD), costs
   the common side nothing but the test. */
#ifndef EFAX__UNLIKELY
#if defined(__GNUC__)
#define EFAX__UNLIKELY(c) __builtin_expect(!!(c), 0)
#define EFAX__COLD __attribute__((noinline, cold))
#else
#define EFAX__UNLIKELY(c) (c)
#define EFAX__COLD
#endif
#endif
#if defined(__GNUC__)
#define EFAX__LIKELY(c) __builtin_expect(!!(c), 1)
#define EFAX__HOT_INLINE static inline __attribute__((always_inline)) /* the poll that finds nothing */
#define EFAX__NOINLINE __attribute__((noinline)) /* keeps its frame out of the caller's */
#else
#define EFAX__LIKELY(c) (c)
#define EFAX__HOT_INLINE static inline
#define EFAX__NOINLINE
#endif
/* The posts every message makes (efax_send, efax_recv, efax_write), a target's announcement of
   each write (efax_expect_write) and efax_wait's test for a transfer already done: in C with GCC
   or clang their definitions are inline, so that a caller compiled with the
   implementation (EFAX_IMPLEMENTATION in the same file, as the drivers are) runs them without a
   call, a frame and argument passing, and with what it passes as constants folded in. (The waits
   stay out of line: their polls are what tests/instr.sh counts as calls of a wait into libfabric,
   and each wait would be a new copy of the poll loop.) The prototypes are extern, so the
   definition is still the external one other translation units call (C11 6.7.4p7). Not in C++
   (g++, nvcc): there an inline function has vague linkage, and a file that inlined every use need
   not emit it for the others. EFAX_NO_API_INLINE keeps them out of line. */
#if defined(__GNUC__) && !defined(__cplusplus) && !defined(EFAX_NO_API_INLINE)
#define EFAX__API_INLINE __attribute__((always_inline)) inline
/* clang's -Wstatic-in-inline holds any inline function with external linkage to C11 6.7.4p3, which
   constrains inline definitions only; these are external ones (p7: the prototypes say extern), so
   they may call the file's static functions. Popped at the implementation's end. */
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wstatic-in-inline"
#define EFAX__API_INLINE_POP
#endif
#else
#define EFAX__API_INLINE
#endif

/* efa-direct as the fault layer emulates it: its device limits */
#define EFAX__F_DIRECT_MSG 8192u  /* FI_OPT_MAX_MSG_SIZE: the device's MTU (ibv_port_attr.max_msg_sz) */
#define EFAX__F_DIRECT_INLINE 32u /* FI_OPT_INJECT_MSG_SIZE: the device's inline_buf_size */

/* The topology's discovery (>>topology, at the end): what context init asks of libfabric and sysfs. */
EFAX_PRIVATE int efax__cpu_numa(const char *root);
EFAX_PRIVATE int efax__domains(struct fi_info *list, struct fi_info **pick, int max);
EFAX_PRIVATE void efax__fill_info(const struct fi_info *fi, efax_nic_info *n);
EFAX_PRIVATE int efax__getinfo(const char *prov, bool hmem, struct fi_info **out);
EFAX_PRIVATE bool efax__is_efa_direct(const struct fi_info *fi);
EFAX_PRIVATE int efax__topo_near(const char *root, const efax_nic_info *nics, int nnics, const char *dev_pci,
                                 int numa, int *out, int max, int *shares);

/* libfabric's data path: every call goes through one of these doors, one predictable branch while
   the fault layer is off (n->fault NULL), the layer's cold side when it is on (>>faults, at the end). */
EFAX_PRIVATE int efax__fi_cq_open(efax_ctx *ctx, efax__nic *n, struct fi_cq_attr *attr);
static inline ssize_t efax__fi_cq_read(efax__nic *n, struct fi_cq_data_entry *buf, size_t count);
static inline ssize_t efax__fi_cq_readerr(efax__nic *n, struct fi_cq_err_entry *e);
static inline const char *efax__fi_cq_strerror(efax__nic *n, const struct fi_cq_err_entry *e, char *buf,
                                               size_t len);
static inline ssize_t efax__fi_inject(efax__nic *n, const void *buf, size_t len, fi_addr_t a);
static inline ssize_t efax__fi_inject_write(efax__nic *n, const void *buf, size_t len, fi_addr_t a,
                                            uint64_t raddr, uint64_t key);
static inline ssize_t efax__fi_inject_writedata(efax__nic *n, const void *buf, size_t len, uint64_t data,
                                                fi_addr_t a, uint64_t raddr, uint64_t key);
static inline ssize_t efax__fi_injectdata(efax__nic *n, const void *buf, size_t len, uint64_t data,
                                          fi_addr_t a);
static inline ssize_t efax__fi_recv(efax__nic *n, void *buf, size_t len, void *desc, fi_addr_t a, void *ctx);
static inline ssize_t efax__fi_sendmsg(efax__nic *n, const struct fi_msg *m, uint64_t flags);
static inline ssize_t efax__fi_tinjectdata(efax__nic *n, const void *buf, size_t len, uint64_t data,
                                           fi_addr_t a, uint64_t tag);
static inline ssize_t efax__fi_trecv(efax__nic *n, void *buf, size_t len, void *desc, fi_addr_t a,
                                     uint64_t tag, void *ctx);
static inline ssize_t efax__fi_writemsg(efax__nic *n, const struct fi_msg_rma *m, uint64_t flags);

/* The fault layer's life cycle and checks (>>faults, at the end). */
EFAX__COLD EFAX_PRIVATE void efax__f_bell_check(efax__nic *n);
EFAX_PRIVATE void efax__fault_close(efax__nic *n);
EFAX_PRIVATE int efax__fault_open(efax_ctx *ctx, efax__nic *n);
EFAX_PRIVATE void efax__faults_arm(efax_ctx *ctx, uint64_t seed);
EFAX_PRIVATE int efax__faults_init(efax_ctx *ctx);
EFAX_PRIVATE void efax__faults_limits_summary(efax_ctx *ctx);
EFAX_PRIVATE void efax__faults_summary(efax_ctx *ctx);
EFAX_PRIVATE int efax__getopt_emulated(efax_ctx *ctx, efax__nic *n, bool *emulated);
EFAX_PRIVATE int efax__getopt_max_rma(efax_ctx *ctx, efax__nic *n, size_t *v);

// >>config (implementation) ------------------------------------------------------------------

EFAX_API const char *efax_strerror(int code) {
    if (code < 0) code = -code;
    switch (code) {
    case 0: return "success";
    case EFAX_E_USAGE: return "bad option or argument";
    case EFAX_E_NOPROV: return "libfabric provider not available";
    case EFAX_E_NONIC: return "no such NIC for this provider";
    case EFAX_E_LAUNCH: return "no launcher (PMIx or EFAX_RANK/EFAX_SIZE/EFAX_ROOT)";
    case EFAX_E_BOOT: return "bootstrap failed";
    case EFAX_E_VERSION: return "peer runs another efax wire version";
    case EFAX_E_PEER: return "peer sent malformed data or was lost";
    case EFAX_E_BOUNDS: return "offset or size outside the registered window";
    case EFAX_E_STALE: return "data of an old sequence arrived (or more than the sequence had)";
    case EFAX_E_VERIFY: return "data check failed";
    case EFAX_E_CUDA: return "CUDA call failed";
    case EFAX_E_UNSUPPORTED: return "not supported by this provider or build";
    case EFAX_E_MISMATCH: return "ranks' provider capabilities differ";
    case EFAX_E_OVERRUN: return "more sequences outstanding under one tag than its window holds";
    default: break;
    }
    return fi_strerror(code);
}

EFAX_API int efax_exit_code(int rc) {
    if (rc == 0) return 0;
    if (rc == -EFAX_E_USAGE || rc == -EFAX_E_NOPROV || rc == -EFAX_E_NONIC || rc == -EFAX_E_LAUNCH) return 2;
    return 1;
}

EFAX_API uint64_t efax_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

EFAX_API uint64_t efax_ticks(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
    uint64_t v;
    __asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v));
    return v;
#else
    return efax_now_ns();
#endif
}

EFAX_PRIVATE void efax__stderr_log(void *user, int level, const char *msg) {
    (void)user;
    fprintf(stderr, "efax: %s%s\n", level == 0 ? "error: " : level == 1 ? "warning: " : "", msg);
}

EFAX_PRIVATE void efax__vlog(efax_log_fn fn, void *user, int max_level, int level, const char *fmt,
                             va_list ap) {
    char msg[1024];
    if (level > 1 && level > max_level) return;
    vsnprintf(msg, sizeof msg, fmt, ap);
    (fn ? fn : efax__stderr_log)(user, level, msg);
}

EFAX_API void efax_log(const efax_ctx *ctx, int level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    efax__vlog(ctx ? ctx->log : NULL, ctx ? ctx->log_user : NULL, ctx ? ctx->log_level : 0, level, fmt, ap);
    va_end(ap);
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
EFAX_PRIVATE void
efax__blog(const efax_boot *b, int level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    efax__vlog(b->log, b->log_user, 0, level, fmt, ap);
    va_end(ap);
}

EFAX_PRIVATE int efax__env_int_quiet(const char *name, int def, int lo, int hi, int *out) {
    const char *s = getenv(name);
    char *end;
    long v;
    if (!s || !*s) {
        *out = def;
        return 0;
    }
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -EFAX_E_USAGE;
    *out = (int)v;
    return 0;
}

EFAX_PRIVATE int efax__env_int(const char *name, int def, int lo, int hi, int *out) {
    int rc = efax__env_int_quiet(name, def, lo, hi, out);
    if (rc)
        fprintf(stderr, "efax: error: %s='%s' is not valid: expected an integer in [%d, %d]\n", name,
                getenv(name), lo, hi);
    return rc;
}

/* The settings the context and the bootstrap read from the environment, each stated once: its
   default, its range and what a bad value is told to be. efax__env reads one where it applies;
   efax_env_check reads them all up front. */
enum {
    EFAX__ENV_TIMEOUT_MS,
    EFAX__ENV_EFA_SHM,
    EFAX__ENV_CUDA_API,
    EFAX__ENV_EFA_UWR,
    EFAX__ENV_SHM_SPLIT,
    EFAX__ENV_HUGE_PAGES,
    EFAX__ENV_GDR_FLUSH,
    EFAX__ENV_CQ_SIZE,
    EFAX__ENV_COUNT
};
static const struct {
    const char *name;
    int def, lo, hi;
    const char *what;
} efax__envs[EFAX__ENV_COUNT] = {
    {"EFAX_TIMEOUT_MS", EFAX_TIMEOUT_MS_DEFAULT, 1, INT_MAX, "milliseconds in [1, 2147483647]"},
    {"EFAX_EFA_SHM", 0, 0, 1, "0 or 1"},
    {"EFAX_CUDA_API", -1, 0, 1, "0 or 1"}, /* unset: the provider's default (efax__ctx_defaults) */
    {"EFAX_EFA_UNSOLICITED_WRITE_RECV", 1, 0, 1, "0 or 1"},
    {"EFAX_SHM_SPLIT", EFAX_SHM_SPLIT_DEFAULT, 0, INT_MAX, "bytes (0: never split)"},
    {"EFAX_HUGE_PAGES", -1, 0, 1, "0 or 1"},
    {"EFAX_GDR_FLUSH", -1, 0, 1, "0 or 1"}, /* efax_cuda.h's (efax_env_setting); unset: by the GPU */
    /* unset: sized by the window (efax__cq_plan); at least EFAX__CQ_MIN */
    {"EFAX_CQ_SIZE", 0, 256, 1 << 24, "completion-queue entries in [256, 16777216]"},
};

EFAX_PRIVATE int efax__env_why(int id, char *err, size_t len) {
    int v;
    if (!efax__env_int_quiet(efax__envs[id].name, efax__envs[id].def, efax__envs[id].lo, efax__envs[id].hi,
                             &v))
        return 0;
    snprintf(err, len, "%s='%s' is not valid: expected %s", efax__envs[id].name, getenv(efax__envs[id].name),
             efax__envs[id].what);
    return -EFAX_E_USAGE;
}

/* Setting id's value (its default when unset); a bad one is logged and refused. */
EFAX_PRIVATE int efax__env(int id, int *out) {
    char err[256];
    int rc = efax__env_why(id, err, sizeof err);
    if (rc)
        fprintf(stderr, "efax: error: %s\n", err);
    else
        efax__env_int_quiet(efax__envs[id].name, efax__envs[id].def, efax__envs[id].lo, efax__envs[id].hi,
                            out);
    return rc;
}

EFAX_API int efax_env_setting(const char *name, int *value) {
    for (int id = 0; id < EFAX__ENV_COUNT; id++)
        if (!strcmp(efax__envs[id].name, name))
            return efax__env_int_quiet(name, efax__envs[id].def, efax__envs[id].lo, efax__envs[id].hi, value);
    return -FI_EINVAL;
}

/* A desc's timeout_ms: 0 (not given) becomes $EFAX_TIMEOUT_MS or EFAX_TIMEOUT_MS_DEFAULT; a negative
   one is refused (a desc spells "not given" 0). */
EFAX_PRIVATE int efax__timeout_default(int *timeout_ms) {
    if (*timeout_ms < 0) {
        fprintf(stderr,
                "efax: error: timeout_ms=%d in a desc: give milliseconds, or 0 for $EFAX_TIMEOUT_MS "
                "(default %d)\n",
                *timeout_ms, EFAX_TIMEOUT_MS_DEFAULT);
        return -FI_EINVAL;
    }
    return *timeout_ms ? 0 : efax__env(EFAX__ENV_TIMEOUT_MS, timeout_ms);
}

EFAX_API uint64_t efax_deadline_ns(int timeout_ms) {
    /* a bad $EFAX_TIMEOUT_MS was refused where the context or boot resolved its defaults */
    if (timeout_ms < 0 && efax__env_int_quiet(efax__envs[EFAX__ENV_TIMEOUT_MS].name, EFAX_TIMEOUT_MS_DEFAULT,
                                              1, INT_MAX, &timeout_ms))
        timeout_ms = EFAX_TIMEOUT_MS_DEFAULT;
    return efax_now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

EFAX_API int efax_remaining_ms(uint64_t deadline) {
    uint64_t now = efax_now_ns();
    return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

EFAX_API int efax_env_check(char *err, size_t len) {
    int id, rc = 0;
    efax_fault_spec fs;
    for (id = 0; id < EFAX__ENV_COUNT && !rc; id++) rc = efax__env_why(id, err, len);
    if (!rc)
        rc = efax_faults_parse(getenv("EFAX_FAULTS"), &fs, err, len); /* not an integer: its own parser */
    return rc;
}

EFAX_PRIVATE void efax__copy(char *dst, size_t cap, const char *src) {
    size_t n = src ? strlen(src) : 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = 0;
}

// >>completion queues (implementation) ---------------------------------------------------------

/* A NIC's completion queue must hold whatever can wait in it at once: its own
   transmits and receives (a window each), its control receives, and peers' writes with immediate
   data. On efa those consume no receive here (unsolicited write recv, fi_efa(7)
   FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV, on by default), so only the writers bound them: an incast
   of N peers with a window W each puts up to N*W completions here. efa sizes its device CQ at its
   rx + tx queues (prov/efa/src/efa_domain.c, rdm_cq_size), or at what fi_cq_open asks when that is
   larger (efa_rdm_cq.c), and does not protect it from overrun (prov/efa/docs/
   efa_fabric_comparison.md, FI_RM_ENABLED): completions beyond it are lost and the waits for them
   time out, naming what never arrived. A writer's window does not bound them: its writes complete
   when the target's NIC placed them, whether or not the target read its CQ, so the writer posts
   on. Only the protocol does: the target confirms, and writers write no more than it expects until
   then (efax_bench's exchange: one iteration). So efax asks for room (entries 0: two windows +
   control + EFAX__CQ_INCOMING; a given size shrinks the window to a quarter of what control
   leaves, so at least half of it is for incoming writes) and checks the protocol against it: a
   target announcing more chunks at once on a NIC than that room (efax_expect_write) fails, naming
   the numbers, on efa, under the fault layer, and wherever a size was given (efax__cq_enforced).
   tcp and shm queue overflowing completions in software. */
#define EFAX__CQ_INCOMING 16384
#define EFAX__CQ_MIN 256

/* Whether a target checks what it awaits against its CQ's room (efax_expect_write). */
EFAX_PRIVATE bool efax__cq_enforced(const efax_ctx *ctx) {
    return ctx->caps.prov == EFAX_PROV_EFA || ctx->faults.fams || ctx->cq_entries > 0;
}

EFAX_PRIVATE void efax__cq_plan(int entries, int ctrl, int *window, int *cq_size, int *incoming) {
    int w;
    if (entries <= 0) {
        *cq_size = 2 * *window + ctrl + EFAX__CQ_INCOMING;
        *incoming = EFAX__CQ_INCOMING;
        return;
    }
    if (entries < EFAX__CQ_MIN) entries = EFAX__CQ_MIN;
    w = (entries - ctrl) / 4;
    if (*window > w) *window = w > 0 ? w : 1;
    *cq_size = entries;
    *incoming = entries - 2 * *window - ctrl;
}

// >>context (implementation) -------------------------------------------------------------------

/* The context's sticky error (efax_progress): the first one stays; the next progress returns it. */
EFAX_PRIVATE void efax__set_sticky(efax_ctx *ctx, int rc) {
    if (!ctx->sticky_error) ctx->sticky_error = rc;
    ctx->wait_slow = 1;
    ctx->tick = 1;
}

/* The libfabric headers this is built against are at least version a.b. Endpoint options are
   enum members, not macros, so they are guarded by the version that introduced them (NEWS.md):
   FI_OPT_CUDA_API_PERMITTED and efa's FI_OPT_EFA_EMULATED_WRITE 1.18, FI_OPT_SHARED_MEMORY_PERMITTED
   1.21, FI_OPT_MAX_*_SIZE / FI_OPT_INJECT_*_SIZE taken from 2.0 (where efa implements them). */
#define EFAX__FI_AT_LEAST(a, b) (FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION) >= FI_VERSION(a, b))

/* The one place efax tells providers apart by name: libfabric's prov_name of the fabric opened
   ("tcp;ofi_rxm" is tcp under the rxm utility). Every other decision reads efax_caps. */
EFAX_PRIVATE efax_prov efax__prov_of(const char *prov_name) {
    size_t n = prov_name ? strcspn(prov_name, ";") : 0;
    if (n == 3 && !strncmp(prov_name, "efa", 3)) return EFAX_PROV_EFA;
    if (n == 3 && !strncmp(prov_name, "tcp", 3)) return EFAX_PROV_TCP;
    if (n == 3 && !strncmp(prov_name, "shm", 3)) return EFAX_PROV_SHM;
    return EFAX_PROV_OTHER;
}

/* Endpoint options set before fi_enable (fi_endpoint(3): both must be set before enabling).
   - FI_OPT_SHARED_MEMORY_PERMITTED (1.21+), efa only: without it efa moves data between ranks
     of one host through its own shm provider (fi_efa(7)), so an 8-ranks-per-node all-to-all
     would measure memcpy, not the NIC; aws-ofi-nccl sets it false (nccl_ofi_ofiutils.cpp).
     Off unless asked (efa_shm); libfabric older than 1.21 cannot be told, and says so.
   - FI_OPT_CUDA_API_PERMITTED (1.18+) = false: the provider may then move device memory only by
     GPUDirect RDMA. efa refuses it (-FI_EOPNOTSUPP) when it found no GPU peer-to-peer support
     (efa_rdm_ep_fiops.c efa_rdm_ep_set_cuda_api_permitted; efa_hmem.c logs that only at INFO),
     and then registers CUDA memory with a software key and moves it by CUDA copies
     (efa_rdm_mr.c), dmabuf included: a run would say "dmabuf" and measure cudaMemcpy. So by
     default efa with device memory gets false, as aws-ofi-nccl does wherever GDR is there
     (nccl_ofi_ofiutils.cpp), and a refusal is recorded as "no GPUDirect" (info.gpudirect 0):
     efax_cuda.h then stages device memory through host memory, and efax_mr_reg refuses CUDA
     memory on such a NIC. cuda_api 1 (--cuda-api) asks the same question, then permits the CUDA
     calls knowingly; cuda_api -1 (--no-cuda-api) forbids them on any provider and fails where
     refused (proves the pure path).
   - FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV (2.5+), efa only: set on every rank to the same value
     (ctx->uwr), because efa emulates writes with immediate data to a peer whose setting differs
     (efa_rdm_rma.h efa_rdm_rma_should_write_using_rdma, logged at INFO only); the connect
     fingerprint then refuses ranks that set it differently. */
EFAX_PRIVATE int efax__ep_options(efax_ctx *ctx, efax__nic *n) {
    bool efa = ctx->caps.prov == EFAX_PROV_EFA;
    bool ask = ctx->cuda_api < 0 || (efa && n->fi && (n->fi->caps & FI_HMEM)); /* whether to ask for false */
    bool first = n == ctx->nic; /* what holds for every NIC is said once */
#if EFAX__FI_AT_LEAST(1, 21)
    if (efa) {
        bool permit = ctx->efa_shm;
        int rc =
            fi_setopt(&n->ep->fid, FI_OPT_ENDPOINT, FI_OPT_SHARED_MEMORY_PERMITTED, &permit, sizeof permit);
        if (rc)
            efax_log(
                ctx, 1,
                "NIC %s: FI_OPT_SHARED_MEMORY_PERMITTED=%s refused (%s): same-host peers go as efa decides",
                n->info.name, permit ? "true" : "false", fi_strerror(-rc));
        n->info.efa_shm = rc ? -1 : permit;
    }
#else
    if (efa)
        efax_log(ctx, 2,
                 "NIC %s: libfabric %d.%d cannot switch off efa's shared memory (1.21+); "
                 "FI_EFA_ENABLE_SHM_TRANSFER=0 does",
                 n->info.name, FI_MAJOR_VERSION, FI_MINOR_VERSION);
#endif
#if EFAX__FI_AT_LEAST(2, 5)
    if (efa) {
        bool use = ctx->uwr != 0;
        int rc =
            fi_setopt(&n->ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV, &use, sizeof use);
        n->info.unsolicited_write_recv = rc ? -1 : use;
        if (rc && !use && ctx->caps.direct) {
            /* efa-direct turns it off only with FI_RX_CQ_DATA (efa_ep.c), a receive posted for every
               write with immediate data, which efax's one-sided writes never post */
            efax_log(ctx, 0,
                     "NIC %s: efa-direct refused unsolicited write recv off (%s): without it every write "
                     "with immediate data needs a receive posted at the target, which efax does not post; "
                     "unset EFAX_EFA_UNSOLICITED_WRITE_RECV=0 / FI_EFA_USE_UNSOLICITED_WRITE_RECV=0, or "
                     "use --provider efa",
                     n->info.name, fi_strerror(-rc));
            return -EFAX_E_USAGE;
        }
        if (rc && first)
            efax_log(ctx, 1, "NIC %s: FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV=%s refused (%s)", n->info.name,
                     use ? "true" : "false", fi_strerror(-rc));
    }
#endif
    if (ask) {
#if EFAX__FI_AT_LEAST(1, 18)
        bool permit = false;
        int rc = fi_setopt(&n->ep->fid, FI_OPT_ENDPOINT, FI_OPT_CUDA_API_PERMITTED, &permit, sizeof permit);
        n->info.gpudirect = rc == 0;
        n->info.cuda_api = rc ? -1 : 0;
        if (rc == -FI_EINVAL) {
            /* -FI_EINVAL is a libfabric without CUDA (built without it, or it found no CUDA library or
               device: efa_rdm_ep_fiops.c efa_rdm_ep_set_cuda_api_permitted, smr_ep.c, rxm_ep.c), not a
               host without GPUDirect (-FI_EOPNOTSUPP), as aws-ofi-nccl reads the answers
               (nccl_ofi_ofiutils.cpp: only EOPNOTSUPP and ENOPROTOOPT mean no GDR). Such a provider
               makes no CUDA call (nothing to forbid) and registers no device memory: staged. */
            n->info.gpudirect = -1;
            n->info.hmem = false;
            if (first)
                efax_log(
                    ctx, efa || ctx->cuda_api < 0 ? 1 : 2,
                    "NIC %s: FI_OPT_CUDA_API_PERMITTED refused with -FI_EINVAL: this libfabric (%u.%u) has "
                    "no CUDA support (built without CUDA, or it found no CUDA library or device), so it "
                    "makes no CUDA call and cannot register device memory; device memory is staged",
                    n->info.name, FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
            return 0;
        }
        if (rc && ctx->cuda_api < 0) {
            efax_log(
                ctx, 0,
                "NIC %s (%s): FI_OPT_CUDA_API_PERMITTED=false refused (%s): this provider or host has no "
                "GPUDirect RDMA path for device memory; run without --no-cuda-api / EFAX_CUDA_API=0",
                n->info.name, n->info.provider, fi_strerror(-rc));
            return rc;
        }
        if (rc && first)
            efax_log(ctx, 1,
                     "NIC %s: no GPUDirect: efa refused FI_OPT_CUDA_API_PERMITTED=false (%s: it found no GPU "
                     "peer-to-peer support) and would move device memory by CUDA copies; %s",
                     n->info.name, fi_strerror(-rc),
                     ctx->cuda_api > 0 ? "permitted by --cuda-api" : "device memory is staged");
        if (ctx->cuda_api > 0) { /* --cuda-api: the answer is recorded, the calls permitted knowingly */
            permit = true;
            if (fi_setopt(&n->ep->fid, FI_OPT_ENDPOINT, FI_OPT_CUDA_API_PERMITTED, &permit, sizeof permit) ==
                0)
                n->info.cuda_api = 1;
        }
#else
        if (ctx->cuda_api < 0) {
            efax_log(ctx, 0,
                     "--no-cuda-api needs libfabric 1.18+ (FI_OPT_CUDA_API_PERMITTED); this build has %d.%d",
                     FI_MAJOR_VERSION, FI_MINOR_VERSION);
            return -EFAX_E_UNSUPPORTED;
        }
        if (first)
            efax_log(ctx, 1,
                     "NIC %s: libfabric %d.%d cannot forbid efa's CUDA calls (1.18+): whether device memory "
                     "moves by GPUDirect is unknown",
                     n->info.name, FI_MAJOR_VERSION, FI_MINOR_VERSION);
#endif
    }
    (void)efa;
    return 0;
}

/* Whether the provider emulates RDMA writes with messages (FI_OPT_EFA_EMULATED_WRITE, 1.18+: on
   efa the device has no RDMA write, or it is switched off). Such a "write" is not one;
   aws-ofi-nccl refuses emulated writes for its RDMA protocol (platform-aws.cpp). Asked of every
   provider (the others answer -FI_ENOPROTOOPT: -1), so a fault layer at efax's boundary can
   answer for them. It reflects the local device only (efa_rdm_ep_fiops.c getopt): a peer that
   differs is caught by the connect fingerprint. */
EFAX_PRIVATE void efax__ep_emulated(efax_ctx *ctx, efax__nic *n) {
    bool emulated = false;
    /* the fault layer's `emulated` answers here for any provider (efax__getopt_emulated) */
    if (efax__getopt_emulated(ctx, n, &emulated) == 0) {
        n->info.emulated_write = emulated;
        if (emulated)
            efax_log(ctx, 1,
                     "NIC %s: %s emulates RDMA writes with messages on this device: WRITE results are not "
                     "RDMA writes%s",
                     n->info.name, n->info.provider,
                     ctx->faults.fams & EFAX_FAULT_EMULATED ? " (EFAX_FAULTS emulated says so)" : "");
    }
}

/* Limits the open endpoint reports (fi_endpoint(3) FI_OPT_MAX_RMA_SIZE, FI_OPT_INJECT_MSG_SIZE,
   FI_OPT_INJECT_RMA_SIZE, 2.0+), which can be smaller than fi_info's: efa's inject sizes depend on
   the endpoint (prov/efa/src/rdm/efa_rdm_ep_fiops.c). efa's RDM endpoint answers max_rma_size
   with fi_info's max_msg_size, UINT64_MAX (efa_rdm_ep_fiops.c: base_ep.max_rma_size =
   info->ep_attr->max_msg_size), not the device's max_rdma_size: that one only an efa-direct
   endpoint tells (efax__efa_max_rdma). A provider without an option answers -FI_ENOPROTOOPT and
   fi_info's value stays. */
EFAX_PRIVATE void efax__ep_limits(efax_ctx *ctx, efax__nic *n) {
    size_t rma = n->info.max_rma_size;
    /* the fault layer's `smallrma` answers here on either line */
    if (efax__getopt_max_rma(ctx, n, &rma) == 0 && rma != n->info.max_rma_size) {
        efax_log(ctx, 2, "NIC %s: the endpoint's max_rma_size is %zu (fi_info: %zu)", n->info.name, rma,
                 n->info.max_rma_size);
        n->info.max_rma_size = rma;
    }
#if EFAX__FI_AT_LEAST(2, 0)
    static const int opt[4] = {0, FI_OPT_INJECT_MSG_SIZE, FI_OPT_INJECT_RMA_SIZE, FI_OPT_MAX_MSG_SIZE};
    size_t *dst[4];
    int i;
    dst[0] = &n->info.max_rma_size;
    dst[1] = &n->info.inject_size;
    dst[2] = &n->info.inject_rma_size;
    dst[3] = &n->info.max_send_size;
    for (i = 1; i < 4; i++) {
        size_t v = 0, len = sizeof v;
        if (fi_getopt(&n->ep->fid, FI_OPT_ENDPOINT, opt[i], &v, &len) == 0 && len == sizeof v) {
            if (v != *dst[i])
                efax_log(ctx, 2, "NIC %s: the endpoint's %s is %zu (fi_info: %zu)", n->info.name,
                         i == 0   ? "max_rma_size"
                         : i == 1 ? "inject_msg_size"
                         : i == 2 ? "inject_rma_size"
                                  : "max_msg_size",
                         v, *dst[i]);
            *dst[i] = v;
        }
    }
#endif
    if (ctx->faults.fams & EFAX_FAULT_DIRECT) { /* what an efa-direct endpoint answers (efa_ep.c getopt) */
        if (n->info.max_send_size > EFAX__F_DIRECT_MSG) n->info.max_send_size = EFAX__F_DIRECT_MSG;
        if (n->info.inject_size > EFAX__F_DIRECT_INLINE) n->info.inject_size = EFAX__F_DIRECT_INLINE;
        n->info.inject_rma_size = 0;
        n->info.msg_order = 0; /* efa-direct orders nothing (efa_fabric_comparison.md) */
    }
}

/* efa: the device's max_rdma_size, the most one hardware RDMA write carries. efa cuts a write at
   MIN(1 GiB, max_rdma_size) (efa_rdm_ope.c efa_rdm_ope_post_remote_write) and asserts that a write
   with immediate data is one hardware write (efa_rdm_pke.c efa_rdm_pke_write), so efax's chunks
   must not exceed it. The RDM endpoint does not say it (efax__ep_limits); an endpoint of the
   efa-direct fabric on the same device does (efa_base_ep.c: max_rma_size = the device's
   max_rdma_size; efa_ep.c getopt), without being enabled (no queue pair is made). libefa's
   efadv_query_device would too, at the price of linking it: efax asks libfabric only. Returns 0
   when it cannot tell (libfabric 1.x has no efa-direct; no such domain). Once per context. */
EFAX_PRIVATE uint64_t efax__efa_max_rdma(const char *domain) {
    uint64_t out = 0;
#if EFAX__FI_AT_LEAST(2, 0)
    struct fi_info *h = fi_allocinfo(), *fi = NULL;
    struct fid_fabric *fab = NULL;
    struct fid_domain *dom = NULL;
    struct fid_ep *ep = NULL;
    size_t v = 0, len = sizeof v;
    if (!h) return 0;
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
    h->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA | FI_ASYNC_IOV;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    h->fabric_attr->prov_name = strdup("efa");
    h->fabric_attr->name = strdup("efa-direct");
    h->domain_attr->name = strdup(domain);
    if (h->fabric_attr->prov_name && h->fabric_attr->name && h->domain_attr->name &&
        fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, h, &fi) == 0 && fi &&
        fi_fabric(fi->fabric_attr, &fab, NULL) == 0 && fi_domain(fab, fi, &dom, NULL) == 0 &&
        fi_endpoint(dom, fi, &ep, NULL) == 0 &&
        fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MAX_RMA_SIZE, &v, &len) == 0 && len == sizeof v)
        out = v;
    if (ep) fi_close(&ep->fid);
    if (dom) fi_close(&dom->fid);
    if (fab) fi_close(&fab->fid);
    if (fi) fi_freeinfo(fi);
    fi_freeinfo(h);
#else
    (void)domain;
#endif
    return out;
}

EFAX_PRIVATE int efax__fierr(const efax_ctx *ctx, int rc, const char *what, const char *nic) {
    efax_log(ctx, 0, "%s failed on NIC %s: %s (%d)", what, nic ? nic : "-", fi_strerror(-rc), rc);
    return rc;
}

/* (Re)posts control receive `slot`. A slot whose post the provider refused is left free (kind 0)
   so that efax_progress posts it again: marked as posted, it was lost for good, and once every
   slot was, notifications found no receive. */
EFAX_PRIVATE int efax__post_ctrl(efax_ctx *ctx, efax__nic *n, int slot) {
    efax_op *op = &n->ctrl_ops[slot];
    ssize_t rc;
    memset(op, 0, sizeof *op);
    op->kind = EFAX__OPK_CTRL;
    op->nic = (int)(n - ctx->nic);
    op->slot = slot;
    rc = efax__fi_trecv(n, n->ctrl_buf + (size_t)slot * EFAX__CTRL_MSG, EFAX__CTRL_MSG, n->ctrl_desc,
                        FI_ADDR_UNSPEC, EFAX__CTRL_TAG, &op->fctx);
    if (rc == 0) {
        n->ctrl_posted++;
    } else {
        op->kind = 0;
        n->work = true; /* efax__nic_work posts it again */
    }
    return (int)rc;
}

EFAX_PRIVATE uint64_t efax__new_key(efax_ctx *ctx) { return ++ctx->next_key; }

#ifdef FI_MR_DMABUF
/* The dmabuf of a registration whose first byte, ptr, sits `off` bytes into the dmabuf `fd`:
   fi_mr(3) takes base_addr as the start of the dmabuf's mapping, not of the range registered,
   and the region's address is base_addr + offset (prov/efa/src/efa_mr.c efa_mr_reg_ibv_mr,
   include/ofi_mr.h ofi_mr_get_iov_from_dmabuf). efax_cuda.h exports a dmabuf starting at the
   buffer (off 0), where both readings agree. */
EFAX_PRIVATE void efax__dmabuf_fill(struct fi_mr_dmabuf *db, int fd, uint64_t off, size_t len, void *ptr) {
    memset(db, 0, sizeof *db);
    db->fd = fd;
    db->offset = off;
    db->len = len;
    db->base_addr = (void *)((uintptr_t)ptr - (uintptr_t)off);
}
#endif

EFAX_PRIVATE int efax__reg(efax_ctx *ctx, efax__nic *n, void *buf, size_t len, uint64_t access, int iface,
                           int device, int dmabuf_fd, uint64_t dmabuf_off, bool device_only,
                           struct fid_mr **mr) {
    struct fi_mr_attr attr;
    struct iovec iov;
    uint64_t flags = 0;
    int rc;
    memset(&attr, 0, sizeof attr);
    iov.iov_base = buf;
    iov.iov_len = len;
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = access;
    attr.requested_key = efax__new_key(ctx);
    attr.iface = (enum fi_hmem_iface)iface;
    if (iface == FI_HMEM_CUDA) attr.device.cuda = device;
#ifdef FI_HMEM_DEVICE_ONLY
    if (device_only && iface != FI_HMEM_SYSTEM) flags |= FI_HMEM_DEVICE_ONLY;
#else
    (void)device_only;
#endif
    if (dmabuf_fd >= 0) {
#ifdef FI_MR_DMABUF
        {
            struct fi_mr_dmabuf db;
            efax__dmabuf_fill(&db, dmabuf_fd, dmabuf_off, len, buf);
            attr.dmabuf = &db;
            flags |= FI_MR_DMABUF;
            rc = fi_mr_regattr(n->domain, &attr, flags, mr);
            goto bound;
        }
#else
        (void)dmabuf_off;
        efax_log(ctx, 1, "NIC %s: this build's libfabric (%d.%d) has no FI_MR_DMABUF (1.20+)", n->info.name,
                 FI_MAJOR_VERSION, FI_MINOR_VERSION);
        return -FI_ENOSYS;
#endif
    }
    rc = fi_mr_regattr(n->domain, &attr, flags, mr);
#ifdef FI_MR_DMABUF
bound:
#endif
    if (rc) return rc;
    if (n->info.mr_mode & FI_MR_ENDPOINT) {
        rc = fi_mr_bind(*mr, &n->ep->fid, 0);
        if (!rc) rc = fi_mr_enable(*mr);
        if (rc) {
            fi_close(&(*mr)->fid);
            *mr = NULL;
        }
    }
    return rc;
}

/* shm names an endpoint's region in /dev/shm after its process: "PID:UID:INDEX". A process that
   was killed leaves its region behind, and once pids wrap, a new process with that pid finds it:
   libfabric 1.x's shm then fails fi_enable with -FI_EBUSY (smr_retry_map, prov/shm/src/smr_util.c,
   after unlinking the stale file); 2.x retries under a new name itself (smr_ep_ctrl). This does
   what 2.x does, for 1.x: the same name with a suffix no other process picks. */
EFAX_PRIVATE int efax__shm_enable_renamed(efax_ctx *ctx, efax__nic *n) {
    char name[256], renamed[256 + 32];
    size_t len = sizeof name - 1;
    int rc;
    memset(name, 0, sizeof name);
    if ((rc = fi_getname(&n->ep->fid, name, &len))) return rc;
    snprintf(renamed, sizeof renamed, "%s:efax%llx", name,
             (unsigned long long)(efax_now_ns() ^ ((uint64_t)getpid() << 40)));
    efax_log(ctx, 1,
             "NIC %s: shm endpoint %s is taken (most likely left by a killed process whose pid "
             "this one reused); enabling it as %s",
             n->info.name, name, renamed);
    if ((rc = fi_setname(&n->ep->fid, renamed, strlen(renamed) + 1))) return rc;
    return fi_enable(n->ep);
}

EFAX_PRIVATE int efax__open_nic(efax_ctx *ctx, efax__nic *n, struct fi_info *fi, int window) {
    struct fi_cq_attr cqa;
    struct fi_av_attr ava;
    int rc, i;
    n->fi = fi_dupinfo(fi);
    if (!n->fi) return -FI_ENOMEM;
    efax__fill_info(n->fi, &n->info);
    if ((rc = fi_fabric(n->fi->fabric_attr, &n->fabric, NULL)))
        return efax__fierr(ctx, rc, "fi_fabric", n->info.name);
    if ((rc = fi_domain(n->fabric, n->fi, &n->domain, NULL)))
        return efax__fierr(ctx, rc, "fi_domain", n->info.name);
    /* An event queue for the endpoint. Without one, efa calls abort() when it has an error it
       cannot report on a CQ (efa_base_ep_write_eq_error in prov/efa/src/efa_base_ep.c); with
       one, efax__eq_read turns it into a message and an error code. FI_WRITE lets a test put an
       error there as a provider would. */
    {
        struct fi_eq_attr eqa;
        memset(&eqa, 0, sizeof eqa);
        eqa.size = 64;
        eqa.wait_obj = FI_WAIT_NONE;
        eqa.flags = FI_WRITE;
        if ((rc = fi_eq_open(n->fabric, &eqa, &n->eq, NULL))) {
            n->eq = NULL;
            if (ctx->caps.eq_required) return efax__fierr(ctx, rc, "fi_eq_open", n->info.name);
            efax_log(ctx, 2, "NIC %s: no event queue (fi_eq_open: %s): provider errors come on the CQ only",
                     n->info.name, fi_strerror(-rc));
        }
    }
    n->window = window; /* efax__ctx_defaults: 256 unless asked; at most the transmit queue */
    if (n->info.tx_size && (size_t)n->window > n->info.tx_size) n->window = (int)n->info.tx_size;
    efax__cq_plan(ctx->cq_entries, EFAX__CTRL_SLOTS, &n->window, &n->cq_size, &n->cq_incoming);
    memset(&cqa, 0, sizeof cqa);
    cqa.format = FI_CQ_FORMAT_DATA;
    cqa.wait_obj = FI_WAIT_NONE;
    cqa.size = (size_t)n->cq_size;
    if ((rc = efax__fi_cq_open(ctx, n, &cqa)) && ctx->cq_entries <= 0) {
        /* A device caps its completion queues (efa: the device's max_cqe, ibv_create_cq in
           efa_cq.c); efax's default asks for room for 16384 peers' writes, which one may refuse.
           The provider's own size then (size 0: efa sizes it at rx + tx, efa_domain.c), the
           window and the room for incoming writes planned from it, and said. A size the user gave
           (EFAX_CQ_SIZE) is not second-guessed. */
        int asked = n->cq_size, est = (int)(n->info.tx_size + n->info.rx_size), first = rc;
        cqa.size = 0;
        if (!(rc = efax__fi_cq_open(ctx, n, &cqa))) {
            n->window = window;
            if (n->info.tx_size && (size_t)n->window > n->info.tx_size) n->window = (int)n->info.tx_size;
            efax__cq_plan(est > 0 ? est : EFAX__CQ_MIN, EFAX__CTRL_SLOTS, &n->window, &n->cq_size,
                          &n->cq_incoming);
            efax_log(ctx, 1,
                     "NIC %s: fi_cq_open refused %d entries (%s); opened at the provider's default size "
                     "instead, and plans for %d entries, its transmit and receive queues together (efa's "
                     "size), so "
                     "the window is %d and a target awaits at most %d chunks at once on this NIC "
                     "(EFAX_CQ_SIZE sets "
                     "another size)",
                     n->info.name, asked, fi_strerror(-first), n->cq_size, n->window, n->cq_incoming);
        }
    }
    if (rc) return efax__fierr(ctx, rc, "fi_cq_open", n->info.name);
    n->info.window = n->window;
    n->info.cq_size = n->cq_size;
    if ((rc = efax__fault_open(ctx, n))) return rc;
    memset(&ava, 0, sizeof ava);
    ava.type = n->fi->domain_attr->av_type != FI_AV_UNSPEC ? n->fi->domain_attr->av_type : FI_AV_TABLE;
    if ((rc = fi_av_open(n->domain, &ava, &n->av, NULL)))
        return efax__fierr(ctx, rc, "fi_av_open", n->info.name);
    if ((rc = fi_endpoint(n->domain, n->fi, &n->ep, NULL)))
        return efax__fierr(ctx, rc, "fi_endpoint", n->info.name);
    if ((rc = fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV)))
        return efax__fierr(ctx, rc, "fi_ep_bind(cq)", n->info.name);
    if ((rc = fi_ep_bind(n->ep, &n->av->fid, 0))) return efax__fierr(ctx, rc, "fi_ep_bind(av)", n->info.name);
    if (n->eq && (rc = fi_ep_bind(n->ep, &n->eq->fid, 0))) {
        if (ctx->caps.eq_required) return efax__fierr(ctx, rc, "fi_ep_bind(eq)", n->info.name);
        efax_log(ctx, 2, "NIC %s: the provider takes no event queue (fi_ep_bind: %s)", n->info.name,
                 fi_strerror(-rc));
        fi_close(&n->eq->fid);
        n->eq = NULL;
    }
    if ((rc = efax__ep_options(ctx, n))) return rc;
    rc = fi_enable(n->ep);
    if (rc == -FI_EBUSY && ctx->caps.stale_name_retry) rc = efax__shm_enable_renamed(ctx, n);
    if (rc) return efax__fierr(ctx, rc, "fi_enable", n->info.name);
    efax__ep_limits(ctx, n);
    efax__ep_emulated(ctx, n);
    n->addrlen = sizeof n->addr;
    if ((rc = fi_getname(&n->ep->fid, n->addr, &n->addrlen)))
        return efax__fierr(ctx, rc, "fi_getname", n->info.name);
    /* the operation pool: one op per slot of the window for transmits, as many for receives */
    n->ops = (efax_op *)calloc((size_t)n->window * 2, sizeof(efax_op));
    if (!n->ops) return -FI_ENOMEM;
    for (i = 0; i < n->window * 2; i++) {
        n->ops[i].next = n->free_ops;
        n->free_ops = &n->ops[i];
    }
    /* control receives: small tagged buffers for efax_notify. Without tags (efa-direct) a
       notification is a 0-byte write with immediate data into the peer's control region, which it
       counts as it counts any write's (efax_notify_nic): the region takes remote writes, and no
       receive is posted for it. */
    n->ctrl_buf = (uint8_t *)calloc(EFAX__CTRL_SLOTS, EFAX__CTRL_MSG);
    if (!n->ctrl_buf) return -FI_ENOMEM;
    if ((rc = efax__reg(ctx, n, n->ctrl_buf, EFAX__CTRL_SLOTS * EFAX__CTRL_MSG,
                        FI_RECV | FI_SEND | (ctx->caps.direct ? FI_REMOTE_WRITE : 0), FI_HMEM_SYSTEM, 0, -1,
                        0, false, &n->ctrl_mr)))
        return efax__fierr(ctx, rc, "fi_mr_regattr(control buffers)", n->info.name);
    n->ctrl_desc = fi_mr_desc(n->ctrl_mr);
    /* as many as a quarter of the provider's receive queue allows: the rest is the user's */
    n->nctrl = n->info.rx_size && n->info.rx_size / 4 < EFAX__CTRL_SLOTS ? (int)(n->info.rx_size / 4)
                                                                         : EFAX__CTRL_SLOTS;
    if (n->nctrl < 1) n->nctrl = 1;
    if (ctx->caps.direct) n->nctrl = 0;
    for (i = 0; i < n->nctrl; i++) {
        rc = efax__post_ctrl(ctx, n, i);
        if (rc && rc != -FI_EAGAIN && rc != -FI_ENOMEM)
            return efax__fierr(ctx, rc, "fi_trecv(control)", n->info.name);
        /* refused for now: efax__post_ctrl left it free, efax_progress posts it later */
    }
    return 0;
}

EFAX_PRIVATE void efax__close_nic(efax__nic *n) {
    efax__fault_close(n);
    if (n->ep) fi_close(&n->ep->fid);
    if (n->ctrl_mr) fi_close(&n->ctrl_mr->fid);
    if (n->av) fi_close(&n->av->fid);
    if (n->cq) fi_close(&n->cq->fid);
    if (n->eq) fi_close(&n->eq->fid);
    if (n->domain) fi_close(&n->domain->fid);
    if (n->fabric) fi_close(&n->fabric->fid);
    if (n->fi) fi_freeinfo(n->fi);
    free(n->ops);
    free(n->ctrl_buf);
    memset(n, 0, sizeof *n);
}

/* The one place an efax_ctx_desc's defaults are resolved (zeroed fields, then the environment):
   imm_tags EFAX_IMM_TAGS_DEFAULT, window EFAX_WINDOW_DEFAULT (each NIC clamps it to its transmit
   queue), timeout_ms $EFAX_TIMEOUT_MS or EFAX_TIMEOUT_MS_DEFAULT, nics $EFAX_NICS, mem_path
   $EFAX_MEM_PATH, efa_shm and cuda_api from $EFAX_EFA_SHM /
   $EFAX_CUDA_API (unset: the default; 1 permit; 0 forbid; no_cuda_api is cuda_api -1), efa's
   unsolicited write recv from $EFAX_EFA_UNSOLICITED_WRITE_RECV, else off where
   FI_EFA_USE_UNSOLICITED_WRITE_RECV switches it off, else on (efa's own default, what aws-ofi-nccl
   runs; the same on every rank or refused), shm_split $EFAX_SHM_SPLIT or EFAX_SHM_SPLIT_DEFAULT,
   huge_pages $EFAX_HUGE_PAGES or by the NICs (efax__ctx_open). */
EFAX_PRIVATE int efax__ctx_defaults(efax_ctx *ctx, const efax_ctx_desc *desc, efax_ctx_desc *d) {
    int rc, v;
    if (desc)
        *d = *desc;
    else
        memset(d, 0, sizeof *d);
    ctx->log = d->log; /* errors below are logged */
    ctx->log_user = d->log_user;
    ctx->log_level = d->log_level;
    if (d->imm_tags <= 0) d->imm_tags = EFAX_IMM_TAGS_DEFAULT;
    if (d->imm_tags > EFAX_IMM_MAX_TAGS) {
        efax_log(ctx, 0, "imm_tags=%d: at most %d tags fit in immediate data", d->imm_tags,
                 EFAX_IMM_MAX_TAGS);
        return -EFAX_E_USAGE;
    }
    if (d->window <= 0) d->window = EFAX_WINDOW_DEFAULT;
    if ((rc = efax__timeout_default(&d->timeout_ms))) return rc;
    if (!d->nics || !*d->nics) d->nics = getenv("EFAX_NICS");
    if (!d->mem_path) d->mem_path = getenv("EFAX_MEM_PATH");
    /* staged device memory is host memory to the provider, so it needs no FI_HMEM; and shm turns its
       cross-memory copies off for every transfer of an endpoint that asks FI_HMEM (prov/shm smr_ep.c),
       moving host memory through its bounce buffers at a fraction of the rate */
    if (d->hmem && d->mem_path && !strcmp(d->mem_path, "staged")) d->hmem = false;
    if ((rc = efax__env(EFAX__ENV_EFA_SHM, &v))) return rc;
    d->efa_shm = d->efa_shm || v;
    if (d->no_cuda_api && d->cuda_api > 0) {
        efax_log(ctx, 0, "--cuda-api and --no-cuda-api contradict each other: pass one");
        return -EFAX_E_USAGE;
    }
    if (d->no_cuda_api) d->cuda_api = -1;
    if ((rc = efax__env(EFAX__ENV_CUDA_API, &v))) return rc;
    if (!d->cuda_api) d->cuda_api = v < 0 ? 0 : v ? 1 : -1;
    d->no_cuda_api = d->cuda_api < 0;
    { /* efa's own switch (prov/efa efa_env.c) turns it off whatever the option says: count it */
        const char *fe = getenv("FI_EFA_USE_UNSOLICITED_WRITE_RECV");
        bool off = fe && (!strcmp(fe, "0") || !strcasecmp(fe, "false") || !strcasecmp(fe, "no") ||
                          !strcasecmp(fe, "off"));
        if ((rc = efax__env(EFAX__ENV_EFA_UWR, &ctx->uwr))) return rc;
        if (off) ctx->uwr = 0;
    }
    if (!d->shm_split) {
        if ((rc = efax__env(EFAX__ENV_SHM_SPLIT, &v))) return rc;
        d->shm_split = v ? v : -1;
    }
    if (!d->cq_size && (rc = efax__env(EFAX__ENV_CQ_SIZE, &d->cq_size))) return rc;
    if (d->cq_size && d->cq_size < EFAX__CQ_MIN) d->cq_size = EFAX__CQ_MIN;
    if (!d->huge_pages) { /* unset: decided by the NICs once open (efax__ctx_open) */
        if ((rc = efax__env(EFAX__ENV_HUGE_PAGES, &v))) return rc;
        d->huge_pages = v < 0 ? 0 : v ? 1 : -1;
    }
    return 0;
}

/* Step 1: the provider (efax_topo_pick_provider) and its RDM fabric descriptions, with FI_HMEM when
   asked and offered. *list: free with fi_freeinfo. Returns 0, -EFAX_E_NOPROV or -EFAX_E_USAGE. */
EFAX_PRIVATE int efax__ctx_provider(efax_ctx *ctx, const efax_ctx_desc *d, struct fi_info **list) {
    char names[1024], efa[256];
    const char *want = d->provider && *d->provider ? d->provider : getenv("EFAX_PROVIDER");
    int rc = efax_topo_pick_provider(d->provider, ctx->provider, sizeof ctx->provider), nefa;
    snprintf(ctx->prov_choice, sizeof ctx->prov_choice, "%s",
             d->provider && *d->provider ? "named by the program (--provider)"
             : want && *want             ? "named by EFAX_PROVIDER"
                                         : "the first of efa, tcp, shm offered");
    if (rc && want && !strcasecmp(want, "efa-direct")) {
        efax_topo_providers(names, sizeof names);
        efax_log(ctx, 0,
                 "provider efa-direct is not offered here (providers: %s): it needs libfabric 2.x with the "
                 "efa provider, an EFA device, and a device with unsolicited write recv (efax's writes "
                 "with immediate data consume no receive; efa_user_info.c offers efa-direct without "
                 "FI_RX_CQ_DATA only then); use --provider efa",
                 names[0] ? names : "none");
        return -EFAX_E_NOPROV;
    }
    if (rc) {
        efax_topo_providers(names, sizeof names);
        if (want && *want)
            efax_log(ctx, 0, "provider '%s' is not available here; providers on this host: %s", want,
                     names[0] ? names : "none");
        else
            efax_log(ctx, 0,
                     "none of efa, tcp, shm is available (providers here: %s); install "
                     "libfabric (Debian: apt-get install libfabric1)",
                     names[0] ? names : "none");
        return -EFAX_E_NOPROV;
    }
    /* A host with EFA devices where efa is not offered (the EFA installer's libfabric not on the
       loader path, a container without /dev/infiniband, a libfabric built without efa) would
       measure the ENA through tcp, with nothing but "provider tcp" in the header: refused unless a
       provider was named. */
    if (!(want && *want) && efax__prov_of(ctx->provider) != EFAX_PROV_EFA &&
        (nefa = efax_topo_efa_devices(efa, sizeof efa)) > 0) {
        char dev[PATH_MAX];
        snprintf(dev, sizeof dev, "%s/dev/infiniband", efax_topo_sysfs_root());
        efax_log(ctx, 0,
                 "this host has %d EFA device(s) (%s) but libfabric %u.%u offers no efa provider, so efax "
                 "would run on %s (the ENA, not EFA): refused. %s; or name a provider to measure it "
                 "knowingly (--provider %s, EFAX_PROVIDER=%s)",
                 nefa, efa, FI_MAJOR(fi_version()), FI_MINOR(fi_version()), ctx->provider,
                 access(dev, F_OK)
                     ? "Fix: /dev/infiniband is missing, so pass the EFA devices into the container (docker "
                       "run --device=/dev/infiniband/uverbs0 ..., or the Kubernetes EFA device plugin's "
                       "vpc.amazonaws.com/efa resource)"
                     : "Fix: load the EFA installer's libfabric (LD_LIBRARY_PATH=/opt/amazon/efa/lib, or "
                       "build with make LIBFABRIC=/opt/amazon/efa; ./doctor says which libfabric is loaded)",
                 ctx->provider, ctx->provider);
        return -EFAX_E_NOPROV;
    }
    if (want && *want && efax__prov_of(ctx->provider) != EFAX_PROV_EFA &&
        strcasecmp(ctx->provider, "efa-direct") && (nefa = efax_topo_efa_devices(efa, sizeof efa)) > 0)
        efax_log(ctx, 1, "provider %s %s on a host with %d EFA device(s) (%s): this run measures %s, not EFA",
                 ctx->provider, ctx->prov_choice, nefa, efa, ctx->provider);
    rc = efax__getinfo(ctx->provider, d->hmem, list);
    if ((rc || !*list) && d->hmem) {
        efax_log(ctx, 2, "provider %s offers no FI_HMEM: device memory cannot be registered", ctx->provider);
        rc = efax__getinfo(ctx->provider, false, list);
    }
    if (rc || !*list) {
        efax_log(ctx, 0,
                 "provider %s offers no RDM endpoint with messages, tagged messages and "
                 "RMA writes (fi_getinfo: %s)",
                 ctx->provider, fi_strerror(-rc));
        return -EFAX_E_NOPROV;
    }
    return 0;
}

/* Step 2a, NICs given by name (desc.nics / $EFAX_NICS): with groups ("r0,r1;r2,r3") this rank's
   is group (local rank mod groups). Fills chosen; returns how many, or -EFAX_E_NONIC /
   -EFAX_E_USAGE naming the NIC. */
EFAX_PRIVATE int efax__ctx_named_nics(efax_ctx *ctx, const efax_ctx_desc *d, struct fi_info **dom, int ndom,
                                      const char *names, struct fi_info **chosen) {
    char buf[1024], *tok, *save = NULL;
    int nsel = 0, i;
    snprintf(ctx->nic_choice, sizeof ctx->nic_choice, "given (%s)",
             d->nics == getenv("EFAX_NICS") ? "EFAX_NICS" : "--nics");
    efax__copy(buf, sizeof buf, d->nics);
    if (strchr(buf, ';')) { /* NIC groups: this rank's is the (local rank mod count)-th */
        int ngroups = 1, g = 0, pickg;
        char *p, *start = buf;
        for (p = buf; *p; p++) ngroups += *p == ';';
        pickg = (d->local_rank > 0 ? d->local_rank : 0) % ngroups;
        for (p = buf; *p; p++)
            if (*p == ';') {
                *p = 0;
                if (g++ == pickg) break;
                start = p + 1;
            }
        memmove(buf, start, strlen(start) + 1);
        efax_log(ctx, 2, "local rank %d uses NIC group %d of %d: %s", d->local_rank, pickg, ngroups, buf);
    }
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        for (i = 0; i < ndom; i++)
            if (!strcmp(dom[i]->domain_attr->name, tok)) break;
        if (i == ndom) {
            efax_log(ctx, 0, "NIC '%s' is not offered by provider %s; its NICs here: %s", tok, ctx->provider,
                     names);
            return -EFAX_E_NONIC;
        }
        if (nsel == EFAX_MAX_NICS) {
            efax_log(ctx, 0, "more than %d NICs listed; raise EFAX_MAX_NICS", EFAX_MAX_NICS);
            return -EFAX_E_USAGE;
        }
        chosen[nsel++] = dom[i];
    }
    return nsel;
}

/* Step 2b, no NICs given: those a device backs (a PCI function: EFA devices, physical interfaces),
   not bridges, veths or docker0, whose addresses may mean the local host on every node; without
   any, every NIC but loopback; without those, loopback. Of those, the NICs nearest this rank's
   GPU (device memory); for host memory this rank's share of the PCIe switch groups (a p5 has 32
   NICs, 4 behind each GPU's switch: 8 ranks a node each opening all 32, or 16 of their NUMA node,
   would make 128-256 endpoints and register every buffer 16-32 times), else the NICs on the NUMA
   node it is bound to. Fills chosen; returns how many. */
EFAX_PRIVATE int efax__ctx_default_nics(efax_ctx *ctx, const efax_ctx_desc *d, struct fi_info **dom, int ndom,
                                        struct fi_info **chosen) {
    efax_nic_info tmp, *infos;
    int level = 0, nsel = 0, i, k, numa, idx[EFAX_MAX_NICS];
    struct fi_info *nearer[EFAX_MAX_NICS];
    const char *root = efax_topo_sysfs_root();
    char gpu[16], why[120] = "";
    int shares = 1;
    for (i = 0; i < ndom; i++) {
        efax__fill_info(dom[i], &tmp);
        if (!tmp.loopback) level = level > 1 ? level : tmp.pci[0] ? 2 : 1;
    }
    for (i = 0; i < ndom && nsel < EFAX_MAX_NICS; i++) {
        efax__fill_info(dom[i], &tmp);
        if ((level >= 1 && tmp.loopback) || (level == 2 && !tmp.pci[0])) continue;
        chosen[nsel++] = dom[i];
    }
    snprintf(ctx->nic_choice, sizeof ctx->nic_choice, "every NIC a device backs; none known nearer");
    if (nsel < 2 || !(infos = (efax_nic_info *)calloc((size_t)nsel, sizeof *infos))) return nsel;
    efax__copy(gpu, sizeof gpu, d->near_pci);
    numa = gpu[0] ? -1 : efax__cpu_numa(root);
    for (i = 0; i < nsel; i++) efax__fill_info(chosen[i], &infos[i]);
    k = gpu[0] ? 0
               : efax_topo_host_nics(root, infos, nsel, numa, d->local_rank, d->local_size, idx,
                                     EFAX_MAX_NICS, why, sizeof why);
    if (k > 0) /* why bounded: gcc -O1 (make asan) sees a truncation otherwise */
        snprintf(ctx->nic_choice, sizeof ctx->nic_choice, "%.100s; host memory", why);
    else
        k = efax__topo_near(root, infos, nsel, gpu, numa, idx, EFAX_MAX_NICS, &shares);
    free(infos);
    if (k <= 0) return nsel;
    for (i = 0; i < k; i++) nearer[i] = chosen[idx[i]];
    for (i = 0; i < k; i++) chosen[i] = nearer[i];
    if (gpu[0] && shares > 1)
        snprintf(ctx->nic_choice, sizeof ctx->nic_choice,
                 "nearest GPU %s by PCI distance, its share of the NICs %d GPUs sit nearest", gpu, shares);
    else if (gpu[0])
        snprintf(ctx->nic_choice, sizeof ctx->nic_choice, "nearest GPU %s by PCI distance", gpu);
    else if (!why[0])
        snprintf(ctx->nic_choice, sizeof ctx->nic_choice, "on NUMA node %d (where this rank is bound)", numa);
    return k;
}

/* Step 1b: what the provider is, before any NIC opens: efax__prov_of's kind and what follows from
   it alone. The rest of efax_caps comes from the open NICs (efax__caps_nics). */
EFAX_PRIVATE void efax__caps_prov(efax_ctx *ctx, const struct fi_info *fi, const efax_ctx_desc *d) {
    efax_caps *c = &ctx->caps;
    memset(c, 0, sizeof *c);
    efax__copy(c->provider, sizeof c->provider,
               fi && fi->fabric_attr ? fi->fabric_attr->prov_name : ctx->provider);
    c->prov = efax__prov_of(c->provider);
    c->fi_version = fi_version();
    c->gpudirect = c->cuda_api = c->emulated_write = c->unsolicited_write_recv = c->efa_shm = -1;
    c->eq_required = c->prov == EFAX_PROV_EFA;
    c->whole_writes = c->prov == EFAX_PROV_SHM;
    c->chunk_between_hosts = c->prov == EFAX_PROV_TCP;
    /* 1.x's shm cannot overlap the two copies (efax__post_split says why) */
    c->split_writes = c->prov == EFAX_PROV_SHM && FI_MAJOR(fi_version()) >= 2 && d->shm_split > 0;
    c->small_pages = c->prov == EFAX_PROV_TCP;
    c->stale_name_retry = c->prov == EFAX_PROV_SHM;
    c->direct = (fi && efax__is_efa_direct(fi)) || (ctx->faults.fams & EFAX_FAULT_DIRECT);
}

/* $EFAX_CAPS_OVERRIDE ("emulated_write=1,gpudirect=0"): replaces what this rank reports about its
   provider in efax_caps, and so in the run header and the connect fingerprint, never what the
   provider itself does (what efax decides from efax_caps follows it: device memory is staged
   under gpudirect=0, writes are cut at max_write). It rehearses on tcp and shm what a mixed EFA
   cluster prints and proves that efax_ctx_connect refuses it (tests/run.sh fault/caps-*). Fields:
   emulated_write, unsolicited_write_recv, gpudirect (-1, 0 or 1), hmem (0 or 1), max_write
   (bytes, 4096 up to what the provider allows: lowers it). Returns 0 or -EFAX_E_USAGE. */
EFAX_PRIVATE int efax__caps_override(efax_ctx *ctx) {
    static const char *const names[5] = {"emulated_write", "unsolicited_write_recv", "gpudirect", "hmem",
                                         "max_write"};
    const char *env = getenv("EFAX_CAPS_OVERRIDE");
    char buf[256], *tok, *save = NULL;
    efax_caps *c = &ctx->caps;
    if (!env || !*env) return 0;
    efax__copy(buf, sizeof buf, env);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '='), *end = NULL;
        int k = 5, *dst[3];
        unsigned long long v = 0;
        bool ok = false;
        dst[0] = &c->emulated_write;
        dst[1] = &c->unsolicited_write_recv;
        dst[2] = &c->gpudirect;
        for (k = 0; eq && k < 5; k++)
            if ((size_t)(eq - tok) == strlen(names[k]) && !strncmp(tok, names[k], (size_t)(eq - tok))) break;
        if (!eq) k = 5;
        if (k < 4) ok = !strcmp(eq + 1, "0") || !strcmp(eq + 1, "1") || (k < 3 && !strcmp(eq + 1, "-1"));
        if (k == 4) {
            errno = 0;
            v = strtoull(eq + 1, &end, 10);
            ok = isdigit((unsigned char)eq[1]) && !*end && !errno && v >= 4096 && v <= c->max_write;
        }
        if (!ok) {
            efax_log(
                ctx, 0,
                "EFAX_CAPS_OVERRIDE='%s': '%s' is not valid: expected NAME=VALUE pairs: emulated_write, "
                "unsolicited_write_recv, gpudirect (-1, 0, 1), hmem (0, 1) or max_write (4096..%llu bytes)",
                env, tok, (unsigned long long)c->max_write);
            return -EFAX_E_USAGE;
        }
        if (k == 4) {
            efax_log(ctx, 1,
                     "EFAX_CAPS_OVERRIDE: this rank's largest write is %llu bytes (the provider's %llu)", v,
                     (unsigned long long)c->max_write);
            c->max_write = v;
            snprintf(c->max_write_from, sizeof c->max_write_from, "EFAX_CAPS_OVERRIDE");
            continue;
        }
        efax_log(ctx, 1, "EFAX_CAPS_OVERRIDE: this rank reports %s=%d (the provider said %d)", names[k],
                 atoi(eq + 1), k == 3 ? (int)c->hmem : *dst[k]);
        if (k == 3)
            c->hmem = atoi(eq + 1) != 0;
        else
            *dst[k] = atoi(eq + 1);
    }
    return 0;
}

/* An int attribute over the NICs: the first NIC's, or 1 where any says 1 (emulated, ...). */
EFAX_PRIVATE int efax__tri_any(int acc, int v, bool first) {
    return first ? v : acc == 1 || v == 1 ? 1 : acc < v ? acc : v;
}

/* Step 3b: the rest of efax_caps, from the open NICs; then $EFAX_CAPS_OVERRIDE. */
EFAX_PRIVATE int efax__caps_nics(efax_ctx *ctx) {
    efax_caps *c = &ctx->caps;
    uint64_t dev = 0;
    int i, rc;
    c->max_write = EFAX_MAX_CHUNK;
    snprintf(c->max_write_from, sizeof c->max_write_from, "EFAX_MAX_CHUNK");
    c->hmem = ctx->nnic > 0;
    for (i = 0; i < ctx->nnic; i++) {
        const efax_nic_info *n = &ctx->nic[i].info;
        bool first = i == 0;
        c->mr_mode |= n->mr_mode;
        c->hmem = c->hmem && ctx->nic[i].fi && (ctx->nic[i].fi->caps & FI_HMEM) && n->hmem;
        if (first || n->cq_data_size < c->cq_data_size) c->cq_data_size = n->cq_data_size;
        if (first || n->inject_size < c->inject_msg_size) c->inject_msg_size = n->inject_size;
        if (first || n->inject_rma_size < c->inject_rma_size) c->inject_rma_size = n->inject_rma_size;
        if (first || n->max_send_size < c->max_send) c->max_send = n->max_send_size;
        if (n->max_msg_size && n->max_msg_size < c->max_write) {
            c->max_write = n->max_msg_size;
            snprintf(c->max_write_from, sizeof c->max_write_from, "max_msg_size of NIC %.24s", n->name);
        }
        if (n->max_rma_size && n->max_rma_size < c->max_write) {
            c->max_write = n->max_rma_size;
            snprintf(c->max_write_from, sizeof c->max_write_from, "FI_OPT_MAX_RMA_SIZE of NIC %.24s",
                     n->name);
        }
        if (first || n->gpudirect < c->gpudirect) c->gpudirect = n->gpudirect; /* one NIC without it: none */
        c->cuda_api = efax__tri_any(c->cuda_api, n->cuda_api, first);
        c->emulated_write = efax__tri_any(c->emulated_write, n->emulated_write, first);
        c->unsolicited_write_recv =
            efax__tri_any(c->unsolicited_write_recv, n->unsolicited_write_recv, first);
        c->efa_shm = efax__tri_any(c->efa_shm, n->efa_shm, first);
    }
    /* <=: a device whose max_rdma_size is 1 GiB sets the limit too, and the header says it is the device's */
    if (c->prov == EFAX_PROV_EFA && c->direct && ctx->nnic > 0) /* its endpoint says the device's */
        dev = ctx->nic[0].info.max_rma_size;
    else if (c->prov == EFAX_PROV_EFA && ctx->nnic > 0)
        dev = efax__efa_max_rdma(ctx->nic[0].info.name);
    if (dev > 0 && dev <= c->max_write && c->prov == EFAX_PROV_EFA) {
        c->max_write = dev;
        snprintf(c->max_write_from, sizeof c->max_write_from, "the device's max_rdma_size (efa-direct)");
    }
    if (c->prov == EFAX_PROV_EFA && !dev)
        efax_log(ctx, 2,
                 "efa: the device's max_rdma_size is unknown (no efa-direct endpoint: libfabric %u.%u); "
                 "writes are cut at %llu bytes",
                 FI_MAJOR(fi_version()), FI_MINOR(fi_version()), (unsigned long long)c->max_write);
    if ((rc = efax__caps_override(ctx))) return rc;
    ctx->max_chunk = c->max_write;
    return 0;
}

/* Step 3: opens the chosen NICs (efax__open_nic), checks each carries 4 bytes of immediate data,
   and resolves the capabilities (efax__caps_nics). Returns 0 or a negative code (logged). */
EFAX_PRIVATE int efax__ctx_open(efax_ctx *ctx, const efax_ctx_desc *d, struct fi_info **chosen, int nsel) {
    int i, rc;
    if (!(ctx->nic = (efax__nic *)calloc((size_t)nsel, sizeof(efax__nic)))) return -FI_ENOMEM;
    ctx->huge_pages =
        d->huge_pages > 0 || (!d->huge_pages && !ctx->caps.small_pages); /* efax_ctx_host_alloc */
    for (i = 0; i < nsel; i++) {
        const efax_nic_info *ni = &ctx->nic[i].info;
        uint64_t t0 = efax_now_ns();
        ctx->nnic = i + 1;
        ctx->nic_end = ctx->nic + ctx->nnic;
        rc = efax__open_nic(ctx, &ctx->nic[i], chosen[i], d->window);
        ctx->nic[i].cold.open_ns = efax_now_ns() - t0;
        if (rc) return rc;
        if (ni->cq_data_size < 4) {
            efax_log(ctx, 0, "NIC %s offers %zu bytes of immediate data; efax needs 4", ni->name,
                     ni->cq_data_size);
            return -EFAX_E_UNSUPPORTED;
        }
        if (ctx->caps.split_writes) /* two halves of whole pages */
            ctx->nic[i].split_min = d->shm_split < 8192 ? 8192 : (uint64_t)d->shm_split;
    }
    return efax__caps_nics(ctx);
}

EFAX_PRIVATE int efax__ctx_alone(efax_ctx *ctx, int self);

EFAX_API int efax_ctx_init(efax_ctx *ctx, const efax_ctx_desc *desc) {
    efax_ctx_desc d;
    struct fi_info *list = NULL, *dom[256], *chosen[EFAX_MAX_NICS];
    int ndom, nsel, i, rc;
    char names[1024] = "";
    memset(ctx, 0, sizeof *ctx);
    ctx->rank = 0;
    ctx->size = 1;
    ctx->tick = 1; /* the first progress reads the EQs */
    if ((rc = efax__ctx_defaults(ctx, desc, &d))) return rc;
    if ((rc = efax__faults_init(ctx))) return rc;
    ctx->cq_entries = d.cq_size;
    ctx->fi_more = d.fi_more;
    ctx->efa_shm = d.efa_shm;
    ctx->cuda_api = d.cuda_api;
    ctx->ntags = d.imm_tags;
    ctx->timeout_ms = d.timeout_ms;
    ctx->max_peers = d.max_peers;
    efax__copy(ctx->mem_path, sizeof ctx->mem_path, d.mem_path ? d.mem_path : "");
    if ((rc = efax__ctx_provider(ctx, &d, &list))) return rc;
    efax__caps_prov(ctx, list, &d);
    ndom = efax__domains(list, dom, 256);
    if (ndom > 256) ndom = 256;
    for (i = 0; i < ndom; i++) {
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", i ? ", " : "", dom[i]->domain_attr->name);
    }
    nsel = d.nics && *d.nics ? efax__ctx_named_nics(ctx, &d, dom, ndom, names, chosen)
                             : efax__ctx_default_nics(ctx, &d, dom, ndom, chosen);
    if (nsel > 0 && d.max_nics > 0 && nsel > d.max_nics) nsel = d.max_nics;
    if (nsel == 0) {
        efax_log(ctx, 0, "provider %s: no NIC selected (NICs here: %s)", ctx->provider, names);
        nsel = -EFAX_E_NONIC;
    }
    rc = nsel < 0 ? nsel : efax__ctx_open(ctx, &d, chosen, nsel);
    fi_freeinfo(list);
    if (!rc && d.max_peers > 0) rc = efax__ctx_alone(ctx, d.self);
    if (rc) efax_ctx_deinit(ctx);
    return rc;
}

EFAX_API void efax_ctx_deinit(efax_ctx *ctx) {
    int i;
    if (!ctx) return;
    if (ctx->boot && ctx->boot->idle_user == ctx) ctx->boot->idle = NULL, ctx->boot->idle_user = NULL;
    efax__faults_summary(ctx);
    efax__faults_limits_summary(ctx);
    for (i = ctx->nnic - 1; i >= 0; i--)
        if (ctx->nic) efax__close_nic(&ctx->nic[i]);
    free(ctx->nic);
    free(ctx->peer_nnic);
    free(ctx->route);
    free(ctx->route_in);
    free(ctx->peer_ctrl);
    free(ctx->imm);
    free(ctx->imm_nic);
    free(ctx->hooks);
    if (ctx->stage_rx)
        for (i = 0; i < ctx->ntags; i++) free(ctx->stage_rx[i]);
    free(ctx->stage_rx);
    free(ctx->peer_host);
    free(ctx->peer_far);
    free(ctx->peer_on);
    free(ctx->peer_max);
    for (i = 0; ctx->peer_fa && i < ctx->size; i++) free(ctx->peer_fa[i]);
    free(ctx->peer_fa);
    memset(ctx, 0, sizeof *ctx);
}

EFAX_API int efax_ctx_nnics(const efax_ctx *ctx) { return ctx->nnic; }
EFAX_API const efax_nic_info *efax_ctx_nic(const efax_ctx *ctx, int i) {
    return i >= 0 && i < ctx->nnic ? &ctx->nic[i].info : NULL;
}
EFAX_API efax_nic_stats efax_ctx_stats(const efax_ctx *ctx, int i) { return ctx->nic[i].stats; }

EFAX_API efax_nic_cold efax_ctx_cold(const efax_ctx *ctx, int i) {
    efax_nic_cold z;
    if (i >= 0 && i < ctx->nnic) return ctx->nic[i].cold;
    memset(&z, 0, sizeof z);
    return z;
}
EFAX_API const char *efax_ctx_nic_addr(const efax_ctx *ctx, int i, char *buf, size_t len) {
    size_t l = len;
    if (i < 0 || i >= ctx->nnic || !len) return "";
    buf[0] = 0;
    fi_av_straddr(ctx->nic[i].av, ctx->nic[i].addr, buf, &l);
    buf[len - 1] = 0;
    return buf;
}
EFAX_API void efax_ctx_stats_reset(efax_ctx *ctx) {
    int i;
    for (i = 0; i < ctx->nnic; i++) memset(&ctx->nic[i].stats, 0, sizeof ctx->nic[i].stats);
}
EFAX_API const char *efax_ctx_mem_note(const efax_ctx *ctx) { return ctx ? ctx->mem_note : ""; }
EFAX_API bool efax_ctx_huge_pages(const efax_ctx *ctx) { return ctx && ctx->huge_pages; }
EFAX_API const char *efax_ctx_provider(const efax_ctx *ctx) { return ctx->provider; }
EFAX_API const efax_caps *efax_ctx_caps(const efax_ctx *ctx) { return &ctx->caps; }
EFAX_API const char *efax_ctx_peer_note(const efax_ctx *ctx) { return ctx->peer_note; }
EFAX_API const char *efax_ctx_nic_choice(const efax_ctx *ctx) { return ctx->nic_choice; }
EFAX_API const char *efax_ctx_provider_choice(const efax_ctx *ctx) { return ctx->prov_choice; }
EFAX_API int efax_ctx_timeout_ms(const efax_ctx *ctx) { return ctx->timeout_ms; }
EFAX_API const char *efax_ctx_mem_path(const efax_ctx *ctx) { return ctx->mem_path; }
EFAX_API void efax_ctx_set_mem_note(efax_ctx *ctx, const char *note) {
    if (ctx) efax__copy(ctx->mem_note, sizeof ctx->mem_note, note ? note : "");
}
EFAX_API int efax_ctx_rank(const efax_ctx *ctx) { return ctx->rank; }
EFAX_API int efax_ctx_size(const efax_ctx *ctx) { return ctx->size; }
EFAX_API const char *efax_ctx_host(const efax_ctx *ctx, int p) {
    return ctx->peer_host && p >= 0 && p < ctx->size ? ctx->peer_host[p] : "?";
}
EFAX_API int efax_ctx_peer_nnics(const efax_ctx *ctx, int peer) {
    return ctx->peer_nnic && peer >= 0 && peer < ctx->size ? ctx->peer_nnic[peer] : 0;
}
EFAX_API int efax_ctx_route_in(const efax_ctx *ctx, int peer, int peer_nic) {
    if (!ctx->route_in || peer < 0 || peer >= ctx->size || peer_nic < 0 || peer_nic >= ctx->peer_nnic[peer])
        return -1;
    return ctx->route_in[(size_t)peer * EFAX_MAX_NICS + (size_t)peer_nic];
}

// >>context: connect (implementation) ----------------------------------------------------------

/* What each rank tells the others in efax_ctx_connect. */
#define EFAX__HELLO_MAGIC 0x45464148u /* "EFAH" */
typedef struct efax__hello_nic {
    char name[64];
    uint32_t addrlen;
    uint8_t addr[EFAX__ADDR_MAX];
    uint64_t ctrl_key,
        ctrl_addr; /* its control region, where efa-direct's notifications write (caps.direct) */
} efax__hello_nic;
/* What a rank's provider does that decides whether efa writes between two ranks are what they
   seem (efax_caps' "fingerprint" fields): exchanged in the hello, compared by efax__fp_compare. */
typedef struct efax__fp {
    uint32_t fi_version;
    int8_t prov, hmem, gpudirect, emulated_write, unsolicited_write_recv, pad[3];
    uint64_t max_write; /* efax_caps.max_write: the job's chunk limit is the smallest */
} efax__fp;
typedef struct efax__hello {
    uint32_t magic, wire;
    int32_t rank, nnic;
    char provider[32];
    char host[64];
    efax__fp fp;
    efax__hello_nic nic[EFAX_MAX_NICS];
} efax__hello;

/* The boot's idle hook (efax_boot.idle): a collective that waits drives the context, so a rank in
   a barrier still sees its own failures (a lost inject, a dead endpoint) and ends the wait. */
EFAX_PRIVATE int efax__boot_idle(void *user) {
    int rc = efax_progress((efax_ctx *)user);
    return rc < 0 ? rc : 0;
}

/* What every rank tells the others beside its hello: its fault layer (EFAX_FAULTS must agree;
   rank 0's seed serves every rank). */
typedef struct efax__limits {
    uint64_t fault_seed;
    uint32_t fault_fams, pad;
} efax__limits;

EFAX_PRIVATE void efax__fp_of(const efax_caps *c, efax__fp *fp) {
    memset(fp, 0, sizeof *fp);
    fp->fi_version = c->fi_version;
    fp->prov = (int8_t)c->prov;
    fp->hmem = (int8_t)c->hmem;
    fp->gpudirect = (int8_t)c->gpudirect;
    fp->emulated_write = (int8_t)c->emulated_write;
    fp->unsolicited_write_recv = (int8_t)c->unsolicited_write_recv;
    fp->max_write = c->max_write;
}

/* Compares rank p's fingerprint b with rank q's a (every rank compares every peer with rank 0, so
   every rank reaches the same verdict and none waits on one that refused). Refused (returns
   -EFAX_E_MISMATCH, why names both ranks and the difference): what makes efa emulate every write
   between the two, silently (efa_rdm_rma.h efa_rdm_rma_should_write_using_rdma, logged at INFO):
   one emulates RDMA writes and the other does not (both must support RDMA write), or they set
   unsolicited write recv differently. Refused too: another libfabric major version on a provider
   other than efa (tcp from Debian's 1.17 and from 2.6.0 never completed a message between them
   here: a 20 s timeout, not an error; efa negotiates its protocol per peer, efa_rdm_peer.h).
   Flagged (appended to note, returns 0): other libfabric versions otherwise, FI_HMEM on one only
   (that rank stages device memory), GPUDirect on one only, and unsolicited write recv that one
   rank could not set. Pure. */
EFAX_PRIVATE int efax__fp_compare(const efax__fp *a, int q, const char *qhost, const efax__fp *b, int p,
                                  const char *phost, char *why, size_t wl, char *note, size_t nl) {
    size_t u = strlen(note);
    if ((a->emulated_write == 1) != (b->emulated_write == 1)) {
        int e = a->emulated_write == 1 ? q : p, n = e == q ? p : q;
        snprintf(
            why, wl,
            "rank %d (%s) emulates RDMA writes with messages (FI_OPT_EFA_EMULATED_WRITE) and rank %d (%s) "
            "%s: efa would emulate every write between them (efa_rdm_rma.h: both must support RDMA write); "
            "run on NICs that do RDMA writes",
            e, e == q ? qhost : phost, n, n == q ? qhost : phost,
            (e == q ? b : a)->emulated_write == 0 ? "does not" : "cannot say");
        return -EFAX_E_MISMATCH;
    }
    if (a->unsolicited_write_recv >= 0 && b->unsolicited_write_recv >= 0 &&
        a->unsolicited_write_recv != b->unsolicited_write_recv) {
        snprintf(
            why, wl,
            "rank %d (%s) set efa's unsolicited write recv %s and rank %d (%s) %s: efa would emulate writes "
            "with immediate data between them (efa_rdm_rma.h); set EFAX_EFA_UNSOLICITED_WRITE_RECV and "
            "FI_EFA_USE_UNSOLICITED_WRITE_RECV alike on every rank",
            q, qhost, a->unsolicited_write_recv ? "on" : "off", p, phost,
            b->unsolicited_write_recv ? "on" : "off");
        return -EFAX_E_MISMATCH;
    }
    if (a->prov != EFAX_PROV_EFA && FI_MAJOR(a->fi_version) != FI_MAJOR(b->fi_version)) {
        snprintf(why, wl,
                 "rank %d (%s) runs libfabric %u.%u and rank %d (%s) %u.%u: this provider's wire protocol is "
                 "not the same across major versions; use one libfabric on every rank",
                 q, qhost, FI_MAJOR(a->fi_version), FI_MINOR(a->fi_version), p, phost,
                 FI_MAJOR(b->fi_version), FI_MINOR(b->fi_version));
        return -EFAX_E_MISMATCH;
    }
#define EFAX__NOTE(...) (u < nl ? (void)(u += (size_t)snprintf(note + u, nl - u, __VA_ARGS__)) : (void)0)
    if (a->fi_version != b->fi_version)
        EFAX__NOTE("%srank %d runs libfabric %u.%u, rank %d %u.%u", u ? "; " : "", p, FI_MAJOR(b->fi_version),
                   FI_MINOR(b->fi_version), q, FI_MAJOR(a->fi_version), FI_MINOR(a->fi_version));
    if (a->hmem != b->hmem)
        EFAX__NOTE("%srank %d %s FI_HMEM, rank %d %s", u ? "; " : "", p, b->hmem ? "has" : "lacks", q,
                   a->hmem ? "has" : "lacks");
    if (a->gpudirect != b->gpudirect && (a->gpudirect >= 0 || b->gpudirect >= 0))
        EFAX__NOTE("%srank %d GPUDirect %s, rank %d %s", u ? "; " : "", p,
                   b->gpudirect == 1 ? "yes"
                   : b->gpudirect    ? "n/a"
                                     : "NO",
                   q,
                   a->gpudirect == 1 ? "yes"
                   : a->gpudirect    ? "n/a"
                                     : "NO");
    if (a->prov == EFAX_PROV_EFA && (a->unsolicited_write_recv < 0) != (b->unsolicited_write_recv < 0))
        EFAX__NOTE("%srank %d could not set efa's unsolicited write recv (libfabric < 2.5?)", u ? "; " : "",
                   a->unsolicited_write_recv < 0 ? q : p);
#undef EFAX__NOTE
    return 0;
}

/* Checks a peer's hello. Returns 0 or -EFAX_E_VERSION / -EFAX_E_PEER with the reason in why. */
EFAX_PRIVATE int efax__hello_check(const efax__hello *h, int rank, const char *provider, char *why,
                                   size_t wl) {
    int i;
    if (h->magic != EFAX__HELLO_MAGIC) {
        snprintf(why, wl, "rank %d sent no efax endpoint data (magic %08x)", rank, h->magic);
        return -EFAX_E_PEER;
    }
    if (h->wire != EFAX_WIRE_VERSION) {
        snprintf(why, wl,
                 "rank %d runs efax wire version %u, this rank %u: build every rank from the "
                 "same efax.h",
                 rank, h->wire, EFAX_WIRE_VERSION);
        return -EFAX_E_VERSION;
    }
    if (h->rank != rank || h->nnic < 1 || h->nnic > EFAX_MAX_NICS) {
        snprintf(why, wl, "rank %d sent a malformed endpoint list (rank %d, %d NICs)", rank, h->rank,
                 h->nnic);
        return -EFAX_E_PEER;
    }
    if (memchr(h->provider, 0, sizeof h->provider) == NULL || strcmp(h->provider, provider)) {
        snprintf(why, wl, "rank %d uses provider %.32s, this rank %s: pass the same --provider to every rank",
                 rank, memchr(h->provider, 0, sizeof h->provider) ? h->provider : "?", provider);
        return -EFAX_E_PEER;
    }
    for (i = 0; i < h->nnic; i++)
        if (h->nic[i].addrlen == 0 || h->nic[i].addrlen > EFAX__ADDR_MAX ||
            !memchr(h->nic[i].name, 0, sizeof h->nic[i].name)) {
            snprintf(why, wl, "rank %d NIC %d: malformed address (%u bytes)", rank, i, h->nic[i].addrlen);
            return -EFAX_E_PEER;
        }
    return 0;
}

/* Which of `to`'s NICs NIC i of `from` talks to: the k-th NIC with the same name as i when `to`
   has one (k = how many NICs of that name come before i), else i modulo to's NIC count. */
EFAX_PRIVATE int efax__match(const efax__hello *from, int i, const efax__hello *to) {
    int k = 0, j, seen = 0;
    for (j = 0; j < i; j++)
        if (!strcmp(from->nic[j].name, from->nic[i].name)) k++;
    for (j = 0; j < to->nnic; j++)
        if (!strcmp(to->nic[j].name, from->nic[i].name) && seen++ == k) return j;
    return i % to->nnic;
}

/* Bytes on the wire (addresses, region descriptors): fields one after the other, as this host
   lays them out (every host efa and efax run on is little-endian), ended by a checksum. */
typedef struct efax__wr {
    uint8_t *p;
    size_t cap, n;
} efax__wr;
EFAX_PRIVATE void efax__put(efax__wr *w, const void *v, size_t len) {
    if (w->n + len <= w->cap) memcpy(w->p + w->n, v, len);
    w->n += len;
}
typedef struct efax__rd {
    const uint8_t *p;
    size_t len, n;
} efax__rd;
EFAX_PRIVATE void efax__get(efax__rd *r, void *v, size_t len) {
    if (r->n + len <= r->len)
        memcpy(v, r->p + r->n, len);
    else
        memset(v, 0, len);
    r->n += len;
}
/* FNV-1a, 64 bits: what a blob's last 8 bytes must be, over the bytes before them. */
EFAX_PRIVATE uint64_t efax__fnv(const void *buf, size_t len) {
    const uint8_t *b = (const uint8_t *)buf;
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i;
    for (i = 0; i < len; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
/* The checksum ends w's bytes; returns 0, or -FI_ETOOSMALL when they did not fit (*len: the size). */
EFAX_PRIVATE int efax__seal(efax__wr *w, size_t *len) {
    uint64_t h = w->n <= w->cap ? efax__fnv(w->p, w->n) : 0;
    efax__put(w, &h, sizeof h);
    *len = w->n;
    return w->n <= w->cap ? 0 : -FI_ETOOSMALL;
}
/* Checks a blob's frame: magic, version, size and checksum. Returns 0, or -EFAX_E_PEER /
   -EFAX_E_VERSION with the reason in why ("what" names the kind of blob). */
EFAX_PRIVATE int efax__blob_check(const void *buf, size_t len, uint32_t magic, const char *what, char *why,
                                  size_t wl) {
    uint32_t m = 0, ver = 0, size = 0;
    uint64_t h;
    if (!buf || len < 20) {
        snprintf(why, wl, "%zu bytes are no %s (too short)", buf ? len : 0, what);
        return -EFAX_E_PEER;
    }
    memcpy(&m, buf, 4);
    memcpy(&ver, (const uint8_t *)buf + 4, 4);
    memcpy(&size, (const uint8_t *)buf + 8, 4);
    if (m != magic) {
        snprintf(why, wl, "the bytes are no %s (magic %08x, expected %08x)", what, m, magic);
        return -EFAX_E_PEER;
    }
    if (ver != EFAX_WIRE_VERSION) {
        snprintf(why, wl,
                 "the %s comes from efax wire version %u, this process runs %u: build every side from "
                 "the same efax.h",
                 what, ver, EFAX_WIRE_VERSION);
        return -EFAX_E_VERSION;
    }
    if (size != len) {
        snprintf(why, wl, "the %s is %u bytes, %zu were given: %s", what, size, len,
                 len < size ? "truncated on its way"
                            : "more bytes than it has (pass the length it was packed with)");
        return -EFAX_E_PEER;
    }
    memcpy(&h, (const uint8_t *)buf + len - 8, 8);
    if (h != efax__fnv(buf, len - 8)) {
        snprintf(why, wl, "the %s's checksum does not match its bytes: corrupted on its way", what);
        return -EFAX_E_PEER;
    }
    return 0;
}

#define EFAX__ADDR_MAGIC 0x45464141u /* "EFAA" */

/* Packs hello h as an address (efax_ctx_addr's bytes). */
EFAX_PRIVATE int efax__hello_pack(const efax__hello *h, uint32_t fault_fams, void *buf, size_t cap,
                                  size_t *len) {
    efax__wr w = {(uint8_t *)buf, cap, 0};
    uint32_t magic = EFAX__ADDR_MAGIC, ver = EFAX_WIRE_VERSION, size = 0;
    int i;
    efax__put(&w, &magic, 4);
    efax__put(&w, &ver, 4);
    efax__put(&w, &size, 4); /* filled below */
    efax__put(&w, &h->rank, 4);
    efax__put(&w, &h->nnic, 4);
    efax__put(&w, &fault_fams, 4);
    efax__put(&w, h->provider, sizeof h->provider);
    efax__put(&w, h->host, sizeof h->host);
    efax__put(&w, &h->fp.fi_version, 4);
    efax__put(&w, &h->fp.prov, 5); /* prov, hmem, gpudirect, emulated_write, unsolicited_write_recv */
    efax__put(&w, &h->fp.max_write, 8);
    for (i = 0; i < h->nnic; i++) {
        efax__put(&w, h->nic[i].name, sizeof h->nic[i].name);
        efax__put(&w, &h->nic[i].ctrl_key, 8);
        efax__put(&w, &h->nic[i].ctrl_addr, 8);
        efax__put(&w, &h->nic[i].addrlen, 4);
        efax__put(&w, h->nic[i].addr, h->nic[i].addrlen);
    }
    size = (uint32_t)(w.n + 8);
    if (w.cap >= 12) memcpy(w.p + 8, &size, 4);
    return efax__seal(&w, len);
}

/* Unpacks an address into h (and its fault families); why names what is wrong. */
EFAX_PRIVATE int efax__hello_unpack(const void *buf, size_t len, efax__hello *h, uint32_t *fault_fams,
                                    char *why, size_t wl) {
    efax__rd r = {(const uint8_t *)buf, len, 12};
    int i, rc;
    memset(h, 0, sizeof *h);
    if ((rc = efax__blob_check(buf, len, EFAX__ADDR_MAGIC, "address", why, wl))) return rc;
    h->magic = EFAX__HELLO_MAGIC;
    h->wire = EFAX_WIRE_VERSION;
    efax__get(&r, &h->rank, 4);
    efax__get(&r, &h->nnic, 4);
    efax__get(&r, fault_fams, 4);
    efax__get(&r, h->provider, sizeof h->provider);
    efax__get(&r, h->host, sizeof h->host);
    efax__get(&r, &h->fp.fi_version, 4);
    efax__get(&r, &h->fp.prov, 5);
    efax__get(&r, &h->fp.max_write, 8);
    if (h->nnic < 1 || h->nnic > EFAX_MAX_NICS) {
        snprintf(why, wl, "the address names %d NICs (1..%d)", h->nnic, EFAX_MAX_NICS);
        return -EFAX_E_PEER;
    }
    for (i = 0; i < h->nnic; i++) {
        efax__get(&r, h->nic[i].name, sizeof h->nic[i].name);
        efax__get(&r, &h->nic[i].ctrl_key, 8);
        efax__get(&r, &h->nic[i].ctrl_addr, 8);
        efax__get(&r, &h->nic[i].addrlen, 4);
        if (h->nic[i].addrlen > EFAX__ADDR_MAX) break;
        efax__get(&r, h->nic[i].addr, h->nic[i].addrlen);
    }
    if (i < h->nnic || r.n + 8 != len) {
        snprintf(why, wl, "the address's NIC list does not add up to its %zu bytes", len);
        return -EFAX_E_PEER;
    }
    h->provider[sizeof h->provider - 1] = 0;
    h->host[sizeof h->host - 1] = 0;
    return 0;
}

/* This process's hello: its id, provider, host, fingerprint and NICs. */
EFAX_PRIVATE void efax__hello_of(const efax_ctx *ctx, int id, const char *host, efax__hello *me) {
    int i;
    memset(me, 0, sizeof *me);
    me->magic = EFAX__HELLO_MAGIC;
    me->wire = EFAX_WIRE_VERSION;
    me->rank = id;
    me->nnic = ctx->nnic;
    efax__copy(me->provider, sizeof me->provider, ctx->provider);
    efax__copy(me->host, sizeof me->host, host);
    efax__fp_of(&ctx->caps, &me->fp);
    for (i = 0; i < ctx->nnic; i++) {
        efax__copy(me->nic[i].name, sizeof me->nic[i].name, ctx->nic[i].info.name);
        me->nic[i].addrlen = (uint32_t)ctx->nic[i].addrlen;
        memcpy(me->nic[i].addr, ctx->nic[i].addr, ctx->nic[i].addrlen);
        me->nic[i].ctrl_key = ctx->nic[i].ctrl_mr ? fi_mr_key(ctx->nic[i].ctrl_mr) : 0;
        me->nic[i].ctrl_addr =
            ctx->nic[i].info.mr_mode & FI_MR_VIRT_ADDR ? (uint64_t)(uintptr_t)ctx->nic[i].ctrl_buf : 0;
    }
}

/* The peers' tables of a context that takes peer ids 0 .. cap-1, this process being `self`. */
EFAX_PRIVATE int efax__peers_alloc(efax_ctx *ctx, int self, int cap, const char *host) {
    size_t n = (size_t)cap;
    int i;
    if (cap < 1 || cap > EFAX_IMM_MAX_RANKS || self < 0 || self >= cap) {
        efax_log(ctx, 0,
                 "peer id %d of %d: ids are 0 .. max_peers - 1, at most %d (immediate data names no more)",
                 self, cap, EFAX_IMM_MAX_RANKS);
        return -FI_EINVAL;
    }
    ctx->rank = self;
    ctx->size = cap;
    ctx->peer_nnic = (int *)calloc(n, sizeof(int));
    ctx->peer_host = (char(*)[64])calloc(n, 64);
    ctx->peer_far = (uint8_t *)calloc(n, 1);
    ctx->peer_on = (uint8_t *)calloc(n, 1);
    ctx->peer_max = (uint64_t *)calloc(n, sizeof(uint64_t));
    ctx->peer_fa = (fi_addr_t **)calloc(n, sizeof(fi_addr_t *));
    ctx->route = (efax__route *)calloc(n * (size_t)ctx->nnic, sizeof(efax__route));
    ctx->route_in = (int *)calloc(n * EFAX_MAX_NICS, sizeof(int));
    ctx->imm = (efax__imm_slot *)calloc(n * (size_t)ctx->ntags, sizeof(efax__imm_slot));
    ctx->imm_nic =
        (uint32_t *)calloc(n * (size_t)ctx->ntags * EFAX_IMM_WINDOW * (size_t)ctx->nnic, sizeof(uint32_t));
    if (!ctx->hooks) ctx->hooks = (efax__imm_hook *)calloc((size_t)ctx->ntags, sizeof(efax__imm_hook));
    if (ctx->caps.direct) /* where efax_notify_nic writes on each peer NIC */
        ctx->peer_ctrl = (uint64_t *)calloc(n * EFAX_MAX_NICS * 2, sizeof(uint64_t));
    if (!ctx->peer_nnic || !ctx->peer_host || !ctx->peer_far || !ctx->peer_on || !ctx->peer_max ||
        !ctx->peer_fa || !ctx->route || !ctx->route_in || !ctx->imm || !ctx->imm_nic || !ctx->hooks ||
        (ctx->caps.direct && !ctx->peer_ctrl))
        return -FI_ENOMEM; /* efax_ctx_deinit frees what there is */
    for (i = 0; i < ctx->nnic; i++) ctx->nic[i].route = ctx->route + (size_t)i * n;
    for (i = 0; i < cap * ctx->nnic; i++) { /* no peer yet: efax_write's fast path reads rnic */
        ctx->route[i].fa = FI_ADDR_NOTAVAIL;
        ctx->route[i].rnic = -1;
    }
    efax__copy(ctx->self_host, sizeof ctx->self_host, host);
    ctx->connected = true;
    return 0;
}

/* Peer p's counts of arrivals (every tag, staged cells too), started afresh. */
EFAX_PRIVATE void efax__peer_counts_reset(efax_ctx *ctx, int p) {
    size_t per = (size_t)ctx->ntags * EFAX_IMM_WINDOW * (size_t)ctx->nnic;
    int t;
    memset(&ctx->imm[(size_t)p * (size_t)ctx->ntags], 0, (size_t)ctx->ntags * sizeof(efax__imm_slot));
    memset(&ctx->imm_nic[(size_t)p * per], 0, per * sizeof(uint32_t));
    for (t = 0; ctx->stage_rx && t < ctx->ntags; t++)
        if (ctx->stage_rx[t]) memset(&ctx->stage_rx[t][p], 0, sizeof ctx->stage_rx[t][p]);
}

/* Takes peer p's addresses out of every NIC's address vector (those efax__peer_insert put there). */
EFAX_PRIVATE void efax__peer_av_remove(efax_ctx *ctx, int p) {
    int i, j, pn = ctx->peer_nnic[p];
    for (i = 0; ctx->peer_fa[p] && i < ctx->nnic; i++) {
        for (j = 0; j < pn; j++) {
            fi_addr_t fa = ctx->peer_fa[p][i * pn + j];
            if (fa != FI_ADDR_NOTAVAIL) (void)fi_av_remove(ctx->nic[i].av, &fa, 1, 0);
        }
        ctx->nic[i].route[p].fa = FI_ADDR_NOTAVAIL;
        ctx->nic[i].route[p].rnic = -1;
    }
    free(ctx->peer_fa[p]);
    ctx->peer_fa[p] = NULL;
}

/* Makes h (me: this process's hello) peer h->rank: its NICs into every NIC's address vector (the
   one each of ours sends to, and every one of its that sends to ours), the routes both ways, its
   largest chunk (both sides'), its counts started afresh. */
EFAX_PRIVATE int efax__peer_insert(efax_ctx *ctx, const efax__hello *me, const efax__hello *h) {
    int p = h->rank, i, j, rc;
    ctx->peer_nnic[p] = h->nnic;
    ctx->peer_fa[p] = (fi_addr_t *)malloc((size_t)ctx->nnic * (size_t)h->nnic * sizeof(fi_addr_t));
    if (!ctx->peer_fa[p]) return -FI_ENOMEM;
    for (i = 0; i < ctx->nnic * h->nnic; i++) ctx->peer_fa[p][i] = FI_ADDR_NOTAVAIL;
    memcpy(ctx->peer_host[p], h->host, 64);
    ctx->peer_host[p][63] = 0;
    ctx->peer_far[p] = strcmp(h->host, me->host) != 0;
    ctx->peer_max[p] = ctx->caps.max_write;
    if (h->fp.max_write && h->fp.max_write < ctx->peer_max[p]) ctx->peer_max[p] = h->fp.max_write;
    for (j = 0; j < h->nnic; j++) {
        ctx->route_in[(size_t)p * EFAX_MAX_NICS + (size_t)j] = efax__match(h, j, me);
        if (ctx->peer_ctrl) { /* efa-direct: where notifications to that NIC write */
            ctx->peer_ctrl[((size_t)p * EFAX_MAX_NICS + (size_t)j) * 2] = h->nic[j].ctrl_key;
            ctx->peer_ctrl[((size_t)p * EFAX_MAX_NICS + (size_t)j) * 2 + 1] = h->nic[j].ctrl_addr;
        }
    }
    for (i = 0; i < ctx->nnic; i++) {
        efax__nic *n = &ctx->nic[i];
        int out = efax__match(me, i, h);
        /* insert the NIC we send to, and every NIC of the peer that sends to us here */
        for (j = 0; j < h->nnic; j++) {
            fi_addr_t fa = FI_ADDR_NOTAVAIL;
            uint64_t t0 = efax_now_ns();
            if (j != out && efax__match(h, j, me) != i) continue;
            rc = fi_av_insert(n->av, h->nic[j].addr, 1, &fa, 0, NULL);
            n->cold.connect_ns += efax_now_ns() - t0;
            if (rc != 1) {
                efax_log(ctx, 0, "fi_av_insert of peer %d (%s) NIC %s into NIC %s failed: %s", p, h->host,
                         h->nic[j].name, n->info.name, fi_strerror(rc < 0 ? -rc : FI_EOTHER));
                efax__peer_av_remove(ctx, p);
                return rc < 0 ? rc : -FI_EOTHER;
            }
            ctx->peer_fa[p][i * h->nnic + j] = fa;
            if (j == out) {
                n->route[p].fa = fa;
                n->route[p].rnic = j;
            }
        }
    }
    efax__peer_counts_reset(ctx, p);
    ctx->peer_on[p] = 1;
    return 0;
}

/* The boot's idle hook (efax_boot.idle) is set below; efax_ctx_connect: every rank's hello, checked
   against rank 0's, every rank inserted. */
EFAX_API int efax_ctx_connect(efax_ctx *ctx, efax_boot *boot) {
    efax__hello *all = NULL, me;
    efax__limits *lim = NULL, mine;
    int rc = 0, p, size = boot->size, cap;
    char why[512];
    efax__hello_of(ctx, boot->rank, boot->host, &me);
    if (size > EFAX_IMM_MAX_RANKS) {
        efax_log(ctx, 0, "%d ranks: immediate data names at most %d", size, EFAX_IMM_MAX_RANKS);
        return -EFAX_E_UNSUPPORTED;
    }
    memset(&mine, 0, sizeof mine);
    mine.fault_seed = ctx->faults.seed;
    mine.fault_fams = ctx->faults.fams;
    all = (efax__hello *)calloc((size_t)size, sizeof *all);
    lim = (efax__limits *)calloc((size_t)size, sizeof *lim);
    if (!all || !lim) {
        rc = -FI_ENOMEM;
        goto out;
    }
    if ((rc = efax_boot_allgather(boot, &me, sizeof me, all, -1)) ||
        (rc = efax_boot_allgather(boot, &mine, sizeof mine, lim, -1))) {
        efax_log(ctx, 0, "exchanging endpoint names failed: %s", efax_strerror(rc));
        goto out;
    }
    for (p = 0; p < size && !rc; p++)
        if ((rc = efax__hello_check(&all[p], p, ctx->provider, why, sizeof why))) efax_log(ctx, 0, "%s", why);
    ctx->peer_note[0] = 0;
    for (p = 1; p < size && !rc; p++) /* every rank against rank 0: the same verdict everywhere */
        if ((rc = efax__fp_compare(&all[0].fp, 0, all[0].host, &all[p].fp, p, all[p].host, why, sizeof why,
                                   ctx->peer_note, sizeof ctx->peer_note)))
            efax_log(ctx, 0, "%s", why);
    for (p = 0; p < size && !rc; p++) /* the fault layer, alike on every rank: rank 0's seed serves all */
        if (lim[p].fault_fams != ctx->faults.fams) {
            efax_log(
                ctx, 0,
                "EFAX_FAULTS differs between ranks (rank %d: %s, this rank: %s): set it alike on every rank",
                p, lim[p].fault_fams ? "on" : "off", ctx->faults.fams ? efax_ctx_faults(ctx) : "off");
            rc = -EFAX_E_USAGE;
        }
    if (rc) goto out;
    if (ctx->peer_note[0] && boot->rank == 0) efax_log(ctx, 1, "ranks differ: %s", ctx->peer_note);
    /* efax_ctx_max_chunk: the smallest over every rank */
    ctx->max_chunk = ctx->caps.max_write;
    for (p = 0; p < size; p++)
        if (all[p].fp.max_write && all[p].fp.max_write < ctx->max_chunk) ctx->max_chunk = all[p].fp.max_write;
    cap = ctx->max_peers > size ? ctx->max_peers : size;
    if ((rc = efax__peers_alloc(ctx, boot->rank, cap, boot->host))) goto out;
    for (p = 0; p < size && !rc; p++) rc = efax__peer_insert(ctx, &me, &all[p]);
    if (rc) goto out;
    /* efa-direct writes only to a target that has the initiator in its AV (a device limitation:
       prov/efa/docs/efa_fabric_comparison.md, "Peer AV entry on the RMA target side"): no rank
       writes before every rank has filled its AVs. */
    if (ctx->caps.direct && (rc = efax_boot_barrier(boot, -1))) {
        efax_log(ctx, 0, "the barrier after filling the address vectors failed: %s", efax_strerror(rc));
        goto out;
    }
    efax__faults_arm(ctx, lim[0].fault_seed);
    boot->idle = efax__boot_idle; /* collectives progress the fabric while they wait */
    boot->idle_user = ctx;
    ctx->boot = boot;
out:
    free(lim);
    free(all);
    if (rc) ctx->connected = false;
    return rc;
}

/* efax_ctx_init with max_peers: this process is peer `self`, its only peer so far (writes to itself go
   through the NIC as to any peer), and its fault layer draws from its own seed. */
EFAX_PRIVATE int efax__ctx_alone(efax_ctx *ctx, int self) {
    efax__hello me;
    char host[64] = "";
    int rc;
    const char *node = getenv("EFAX_NODE");
    if (node && *node)
        efax__copy(host, sizeof host, node);
    else if (gethostname(host, sizeof host - 1))
        efax__copy(host, sizeof host, "?");
    ctx->max_chunk = ctx->caps.max_write;
    if ((rc = efax__peers_alloc(ctx, self, ctx->max_peers, host))) return rc;
    efax__hello_of(ctx, self, host, &me);
    if ((rc = efax__peer_insert(ctx, &me, &me))) return rc;
    efax__faults_arm(ctx, ctx->faults.seed);
    return 0;
}

EFAX_API int efax_ctx_addr(const efax_ctx *ctx, void *buf, size_t cap, size_t *len) {
    efax__hello me;
    if (!ctx->connected) {
        efax_log(ctx, 0,
                 "efax_ctx_addr: this context has no peer id yet (efax_ctx_desc.max_peers and self, or "
                 "efax_ctx_connect)");
        return -FI_EOPBADSTATE;
    }
    efax__hello_of(ctx, ctx->rank, ctx->self_host, &me);
    return efax__hello_pack(&me, ctx->faults.fams, buf, cap, len);
}

EFAX_API bool efax_ctx_has_peer(const efax_ctx *ctx, int peer) {
    return ctx->connected && peer >= 0 && peer < ctx->size && ctx->peer_on[peer];
}

EFAX_API int efax_ctx_peer_add(efax_ctx *ctx, const void *buf, size_t len, int *peer) {
    efax__hello h, me;
    uint32_t fams = 0;
    char why[512], note[256] = "";
    int rc;
    if (peer) *peer = -1;
    if (!ctx->connected) {
        efax_log(
            ctx, 0,
            "efax_ctx_peer_add: this context takes no peers (efax_ctx_desc.max_peers, or efax_ctx_connect)");
        return -FI_EOPBADSTATE;
    }
    if ((rc = efax__hello_unpack(buf, len, &h, &fams, why, sizeof why)) ||
        (rc = efax__hello_check(&h, h.rank, ctx->provider, why, sizeof why))) {
        efax_log(ctx, 0, "efax_ctx_peer_add: %s", why);
        return rc == -EFAX_E_PEER && strstr(why, "provider") ? -EFAX_E_MISMATCH : rc;
    }
    if (h.rank < 0 || h.rank >= ctx->size) {
        efax_log(ctx, 0,
                 "efax_ctx_peer_add: the address is peer %d's, and this context takes ids 0..%d "
                 "(efax_ctx_desc.max_peers)",
                 h.rank, ctx->size - 1);
        return -FI_EINVAL;
    }
    efax__hello_of(ctx, ctx->rank, ctx->self_host, &me);
    if (ctx->peer_on[h.rank]) {
        if (h.rank == ctx->rank && !memcmp(&h.nic, &me.nic, sizeof me.nic))
            return peer ? (*peer = h.rank), 0 : 0;
        efax_log(ctx, 0,
                 "efax_ctx_peer_add: peer id %d (%s) is taken by %s; remove it first (efax_ctx_peer_remove) "
                 "or give the newcomer another id",
                 h.rank, h.host, ctx->peer_host[h.rank]);
        return -FI_EBUSY;
    }
    if (fams != ctx->faults.fams) {
        efax_log(ctx, 0,
                 "efax_ctx_peer_add: peer %d (%s) runs with EFAX_FAULTS %s, this process %s: set it alike",
                 h.rank, h.host, fams ? "on" : "off", ctx->faults.fams ? efax_ctx_faults(ctx) : "off");
        return -EFAX_E_USAGE;
    }
    if ((rc = efax__fp_compare(&me.fp, ctx->rank, me.host, &h.fp, h.rank, h.host, why, sizeof why, note,
                               sizeof note))) {
        efax_log(ctx, 0, "efax_ctx_peer_add: %s", why);
        return rc;
    }
    if (note[0]) efax_log(ctx, 1, "peer %d differs: %s", h.rank, note);
    if ((rc = efax__peer_insert(ctx, &me, &h))) return rc;
    if (peer) *peer = h.rank;
    return 0;
}


// >>memory (implementation) --------------------------------------------------------------------

EFAX_API int efax_mr_reg(efax_ctx *ctx, efax_mr *mr, const efax_mr_desc *desc) {
    unsigned access;
    uint64_t fa = 0;
    int i, rc;
    memset(mr, 0, sizeof *mr);
    if (!desc || !desc->ptr || !desc->len) {
        efax_log(ctx, 0, "efax_mr_reg: a buffer and a non-zero length are required");
        return -FI_EINVAL;
    }
    access = desc->access ? desc->access : (unsigned)EFAX_MR_ALL;
    /* efa without GPUDirect takes CUDA memory and moves it by CUDA copies (efa_rdm_mr.c): a run
       would measure cudaMemcpy under the name of the NIC. Only where that was permitted knowingly. */
    if (desc->iface != FI_HMEM_SYSTEM && ctx->caps.gpudirect == 0 && ctx->caps.cuda_api != 1) {
        efax_log(
            ctx, 0,
            "registering device memory on %s: no GPUDirect (the provider refused "
            "FI_OPT_CUDA_API_PERMITTED=false: no GPU peer-to-peer support) and it would move the bytes by "
            "CUDA copies; stage it through host memory, or pass --cuda-api (EFAX_CUDA_API=1, "
            "efax_ctx_desc.cuda_api 1) to allow that knowingly",
            ctx->caps.provider);
        return -EFAX_E_UNSUPPORTED;
    }
    if (access & EFAX_MR_SEND) fa |= FI_SEND;
    if (access & EFAX_MR_RECV) fa |= FI_RECV;
    if (access & EFAX_MR_WRITE_SRC) fa |= FI_WRITE;
    if (access & EFAX_MR_WRITE_DST) fa |= FI_REMOTE_WRITE;
    mr->ctx = ctx;
    mr->ptr = desc->ptr;
    mr->len = desc->len;
    mr->access = access;
    mr->iface = desc->iface;
    mr->stage = desc->stage;
    mr->stage_user = desc->stage_user;
    mr->settle = desc->settle;
    mr->settle_user = desc->settle_user;
    mr->direct = desc->iface == FI_HMEM_SYSTEM && !desc->stage;
    if (mr->settle) { /* efax_mr_dereg, also of a failed registration, takes it back */
        ctx->settling++;
        ctx->wait_slow = 1;
    }
    for (i = 0; i < ctx->nnic; i++) {
        efax__nic *n = &ctx->nic[i];
        uint64_t t0 = efax_now_ns();
        rc = efax__reg(ctx, n, desc->ptr, desc->len, fa, desc->iface, desc->device,
                       desc->dmabuf ? desc->dmabuf_fd : -1, desc->dmabuf_offset, desc->device_only,
                       &mr->mr[i]);
        n->cold.reg_ns += efax_now_ns() - t0;
        n->cold.regs++;
        if (rc) {
            efax_log(ctx, rc == -FI_ENOSYS || desc->iface != FI_HMEM_SYSTEM ? 2 : 0,
                     "registering %zu bytes of %s memory%s on NIC %s failed: %s (%d)", desc->len,
                     desc->iface == FI_HMEM_CUDA ? "CUDA" : "host", desc->dmabuf ? " (dmabuf)" : "",
                     n->info.name, fi_strerror(-rc), rc);
            efax_mr_dereg(mr);
            return rc;
        }
        mr->desc[i] = fi_mr_desc(mr->mr[i]);
        mr->key[i] = fi_mr_key(mr->mr[i]);
        /* A key is needed only where peers write into the region. Since libfabric 2.2 the util
           providers (tcp, shm) give a region without remote access none (fi_mr(3): "for memory
           that is only used locally, there isn't a key"): normal, not an error. */
        if (mr->key[i] == FI_KEY_NOTAVAIL && (fa & FI_REMOTE_WRITE)) {
            if (n->info.mr_mode & FI_MR_RAW)
                efax_log(ctx, 0,
                         "NIC %s uses raw memory keys (FI_MR_RAW: fi_mr_raw_attr), which efax does "
                         "not support; choose another provider with --provider",
                         n->info.name);
            else
                efax_log(ctx, 0, "NIC %s gave no key for %zu bytes registered for remote writes",
                         n->info.name, desc->len);
            efax_mr_dereg(mr);
            return -EFAX_E_UNSUPPORTED;
        }
    }
    return 0;
}

EFAX_API uint64_t efax_stage_unit(uint64_t size, uint64_t chunk) {
    uint64_t u = (size + EFAX_STAGE_CELLS - 1) / EFAX_STAGE_CELLS;
    if (u < EFAX_STAGE_MIN_CELL) u = EFAX_STAGE_MIN_CELL;
    if (chunk > u) u = chunk;
    return (u + 4095) & ~4095ull;
}

/* A staged write's sequence bits: its sequence (mod twice the window, so that a sequence behind
   the window is told from one inside it) above its cell's index. */
#define EFAX__STAGE_CELL_BITS 3
#define EFAX__ONE_CELL (1ull << 62) /* a batch into a staged region: every chunk is cell 0 */
static inline uint32_t efax__stage_imm_seq(uint32_t seq, unsigned cell) {
    return (seq % EFAX__STAGE_SEQS) << EFAX__STAGE_CELL_BITS | cell;
}

/* The posts a segment [off, off + len) of a write into a staged region is made of: no post
   crosses a cell of `unit` bytes nor carries more than `chunk`; an empty segment is one post, of
   cell 0. Adds each post to want[its cell] (want may be NULL). Writer and target both count so. */
EFAX_PRIVATE uint64_t efax__stage_pieces(uint64_t off, uint64_t len, uint64_t unit, uint64_t chunk,
                                         uint32_t *want) {
    uint64_t at = off, end = off + len, posts = 0;
    if (!len) {
        if (want) want[0]++;
        return 1;
    }
    while (at < end) {
        uint64_t cell = at / unit, piece = (cell + 1) * unit - at;
        if (piece > end - at) piece = end - at;
        posts += (piece + chunk - 1) / chunk;
        if (want) want[cell] += (uint32_t)((piece + chunk - 1) / chunk);
        at += piece;
    }
    return posts;
}

EFAX_API void efax_mr_dereg(efax_mr *mr) {
    int i;
    if (!mr) return;
    for (i = EFAX_MAX_NICS - 1; i >= 0; i--)
        if (mr->mr[i]) fi_close(&mr->mr[i]->fid);
    if (mr->settle && mr->ctx) {
        efax_ctx *ctx = mr->ctx;
        ctx->settling--;
        ctx->wait_slow = ctx->settling || ctx->sticky_error;
    }
    free(mr->remote);
    memset(mr, 0, sizeof *mr);
}
EFAX_API void efax_pattern_fill(void *buf, uint64_t len, uint64_t off, int rank, uint64_t iter) {
    uint8_t *p = (uint8_t *)buf;
    uint64_t seed = efax_pattern_seed(rank, iter), i = 0;
    while (i < len && ((off + i) & 7)) {
        p[i] = (uint8_t)(efax_pattern_word(seed, (off + i) >> 3) >> (8 * ((off + i) & 7)));
        i++;
    }
    for (; i + 8 <= len; i += 8) {
        uint64_t w = efax_pattern_word(seed, (off + i) >> 3);
        memcpy(p + i, &w, 8);
    }
    for (; i < len; i++) p[i] = (uint8_t)(efax_pattern_word(seed, (off + i) >> 3) >> (8 * ((off + i) & 7)));
}

EFAX_API uint64_t efax_pattern_check(const void *buf, uint64_t len, uint64_t off, int rank, uint64_t iter,
                                     uint64_t *first_bad) {
    const uint8_t *p = (const uint8_t *)buf;
    uint64_t seed = efax_pattern_seed(rank, iter), i = 0, bad = 0, first = UINT64_MAX;
    for (; i < len; i++) {
        if (((off + i) & 7) == 0 && i + 8 <= len) {
            uint64_t w = efax_pattern_word(seed, (off + i) >> 3), g;
            memcpy(&g, p + i, 8);
            if (g == w) {
                i += 7;
                continue;
            }
        }
        if (p[i] != (uint8_t)(efax_pattern_word(seed, (off + i) >> 3) >> (8 * ((off + i) & 7)))) {
            if (first == UINT64_MAX) first = i;
            bad++;
        }
    }
    if (first_bad) *first_bad = first;
    return bad;
}

EFAX_API void efax_poison(void *buf, uint64_t len) { memset(buf, EFAX_POISON, len); }

EFAX_PRIVATE void *efax__host_pages(size_t len, bool huge) {
    size_t align = huge && len >= (2u << 20) ? (2u << 20) : 4096, cap = (len + align - 1) & ~(align - 1);
    void *p = NULL;
    if (!cap) cap = align;
    if (posix_memalign(&p, align, cap)) return NULL;
#ifdef MADV_HUGEPAGE
    if (align > 4096) madvise(p, cap, MADV_HUGEPAGE);
#endif
    memset(p, 0, cap);
    return p;
}

EFAX_API void *efax_host_alloc(size_t len) { return efax__host_pages(len, true); }
EFAX_API void *efax_ctx_host_alloc(const efax_ctx *ctx, size_t len) {
    return efax__host_pages(len, ctx->huge_pages);
}

/* Registers b->ptr (len bytes the CPU addresses: host or pinned) and names its path. */
EFAX_PRIVATE int efax__buf_reg_cpu(efax_ctx *ctx, efax_buf *b, size_t len, unsigned access,
                                   const char *path) {
    efax_mr_desc md;
    memset(&md, 0, sizeof md);
    md.ptr = b->ptr;
    md.len = len;
    md.access = access;
    efax__copy(b->path, sizeof b->path, path);
    return efax_mr_reg(ctx, &b->mr, &md);
}

EFAX_PRIVATE int efax__host_alloc(efax_ctx *ctx, efax_buf *b, size_t len, unsigned access) {
    b->ptr = efax_ctx_host_alloc(ctx, len);
    if (!b->ptr) {
        efax_log(ctx, 0, "cannot allocate %zu bytes of host memory", len);
        return -FI_ENOMEM;
    }
    return efax__buf_reg_cpu(ctx, b, len, access, "host");
}
EFAX_PRIVATE void efax__host_release(efax_buf *b) { free(b->ptr); }
EFAX_PRIVATE void efax__host_fill(efax_buf *b, uint64_t off, uint64_t len, int rank, uint64_t iter) {
    efax_pattern_fill((uint8_t *)b->ptr + off, len, 0, rank, iter);
}
EFAX_PRIVATE void efax__host_poison(efax_buf *b, uint64_t off, uint64_t len) {
    efax_poison((uint8_t *)b->ptr + off, len);
}
EFAX_PRIVATE uint64_t efax__host_check(efax_buf *b, uint64_t off, uint64_t len, int rank, uint64_t iter) {
    return efax_pattern_check((uint8_t *)b->ptr + off, len, 0, rank, iter, NULL);
}

EFAX_PRIVATE void efax__host_copy(efax_buf *dst, uint64_t doff, const efax_buf *src, uint64_t soff,
                                  uint64_t len) {
    memcpy((uint8_t *)dst->ptr + doff, (const uint8_t *)src->ptr + soff, len);
}

EFAX_API const efax_mem_ops *efax_mem_host(void) {
    /* in efax_mem_ops' order, each field named: C++17 (g++, nvcc) has no designated initializers */
    static const efax_mem_ops ops = {
        "host",             /* name */
        "",                 /* label */
        efax__host_alloc,   /* alloc */
        efax__host_release, /* release */
        efax__host_fill,    /* fill */
        efax__host_poison,  /* poison */
        efax__host_check,   /* check */
        efax__host_copy,    /* copy */
        NULL,               /* settle: the CPU's stores are visible at once */
        NULL,               /* mark */
        NULL,               /* marked */
    };
    return &ops;
}

EFAX_API int efax_mem_select(const char *list, const efax_mem_ops **kinds, int max, int *n, char *msg,
                             size_t len) {
    char buf[128], *tok, *save = NULL;
    *n = 0;
    msg[0] = 0;
    efax__copy(buf, sizeof buf, list && *list ? list : "host");
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "host") && strcmp(tok, "all")) {
            bool cuda = !strcmp(tok, "pin") || !strcmp(tok, "pinned") || !strcmp(tok, "dma") ||
                        !strcmp(tok, "device");
            snprintf(msg, len, "--mem: '%s' %s", tok,
                     cuda ? "needs the CUDA build of this driver (build/*_cuda, made by nvcc)"
                          : "is not valid: expected host, pin, dma or all");
            return -EFAX_E_USAGE;
        }
        if (*n == 0 && max > 0) kinds[(*n)++] = efax_mem_host();
    }
    return 0;
}

EFAX_API const char *efax_mem_names(const efax_mem_ops *const *kinds, int n, char *buf, size_t len) {
    size_t u = 0;
    buf[0] = 0;
    for (int i = 0; i < n && u < len; i++)
        u += (size_t)snprintf(buf + u, len - u, "%s%s", i ? "," : "", kinds[i]->name);
    return buf;
}

EFAX_API void efax_buf_copy(efax_buf *dst, uint64_t doff, const efax_buf *src, uint64_t soff, uint64_t len) {
    if (len) dst->ops->copy(dst, doff, src, soff, len);
}

EFAX_API int efax_buf_settle(efax_buf *b) { return b->ops && b->ops->settle ? b->ops->settle(b) : 0; }

EFAX_API int efax_buf_mark(efax_buf *b, unsigned slot) {
    if ((slot & ~(EFAX_MARK_IN | EFAX_MARK_OWN)) >= EFAX_BUF_MARKS) return -FI_EINVAL;
    if ((slot & EFAX_MARK_IN) && (slot & EFAX_MARK_OWN)) slot &= ~(EFAX_MARK_IN | EFAX_MARK_OWN); /* both */
    return b->ops && b->ops->mark ? b->ops->mark(b, slot) : 0;
}

EFAX_API int efax_buf_marked(efax_buf *b, unsigned slot) {
    if (slot >= EFAX_BUF_MARKS) return -FI_EINVAL;
    return b->ops && b->ops->marked ? b->ops->marked(b, slot) : 1;
}

EFAX_API int efax_buf_alloc(efax_ctx *ctx, efax_buf *b, const efax_mem_ops *ops, size_t len,
                            unsigned access) {
    int rc;
    memset(b, 0, sizeof *b);
    b->ops = ops;
    b->len = len;
    rc = ops->alloc(ctx, b, len, access);
    if (rc) efax_buf_free(b);
    return rc;
}

EFAX_API void efax_buf_free(efax_buf *b) {
    if (!b || !b->ops) return;
    efax_mr_dereg(&b->mr);
    b->ops->release(b);
    memset(b, 0, sizeof *b);
}


#define EFAX__MR_MAGIC 0x4546414du /* "EFAM" */

EFAX_API int efax_mr_pack(const efax_mr *mr, void *buf, size_t cap, size_t *len) {
    const efax_ctx *ctx = mr->ctx;
    efax__wr w = {(uint8_t *)buf, cap, 0};
    uint32_t magic = EFAX__MR_MAGIC, ver = EFAX_WIRE_VERSION, size = 0, nnic, flags, prov, pad = 0;
    uint64_t base;
    int i;
    if (!ctx || !ctx->connected) {
        if (ctx) efax_log(ctx, 0, "efax_mr_pack: the region's context has no peer id yet");
        return -FI_EOPBADSTATE;
    }
    nnic = (uint32_t)ctx->nnic;
    flags = (mr->stage ? EFAX_RMR_STAGED : 0) | ((mr->access & EFAX_MR_WRITE_DST) ? EFAX_RMR_WRITABLE : 0) |
            (mr->iface == 0 ? EFAX_RMR_HOST : 0);
    prov = (uint32_t)efax__fnv(ctx->provider, strlen(ctx->provider));
    base = (ctx->nic[0].info.mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)mr->ptr : 0;
    efax__put(&w, &magic, 4);
    efax__put(&w, &ver, 4);
    efax__put(&w, &size, 4);
    efax__put(&w, &ctx->rank, 4);
    efax__put(&w, &nnic, 4);
    efax__put(&w, &flags, 4);
    efax__put(&w, &prov, 4);
    efax__put(&w, &pad, 4);
    efax__put(&w, &base, 8);
    {
        uint64_t l = mr->len;
        efax__put(&w, &l, 8);
    }
    for (i = 0; i < ctx->nnic; i++) efax__put(&w, &mr->key[i], 8);
    size = (uint32_t)(w.n + 8);
    if (w.cap >= 12) memcpy(w.p + 8, &size, 4);
    return efax__seal(&w, len);
}

EFAX_API int efax_mr_unpack(efax_mr *view, efax_ctx *ctx, const void *buf, size_t len, int *owner) {
    efax__rd r = {(const uint8_t *)buf, len, 12};
    int32_t who = -1;
    uint32_t nnic = 0, flags = 0, prov = 0, pad = 0;
    uint64_t base = 0, rlen = 0;
    char why[320];
    efax_rmr *rm;
    int rc;
    uint32_t i;
    if (owner) *owner = -1;
    if ((rc = efax__blob_check(buf, len, EFAX__MR_MAGIC, "region descriptor", why, sizeof why))) {
        efax_log(ctx, 0, "efax_mr_unpack: %s", why);
        return rc;
    }
    efax__get(&r, &who, 4);
    efax__get(&r, &nnic, 4);
    efax__get(&r, &flags, 4);
    efax__get(&r, &prov, 4);
    efax__get(&r, &pad, 4);
    efax__get(&r, &base, 8);
    efax__get(&r, &rlen, 8);
    if (!efax_ctx_has_peer(ctx, who)) {
        efax_log(ctx, 0,
                 "efax_mr_unpack: the region is peer %d's, which is no peer of this context now (add it "
                 "first: efax_ctx_peer_add)",
                 who);
        return -EFAX_E_PEER;
    }
    if (prov != (uint32_t)efax__fnv(ctx->provider, strlen(ctx->provider))) {
        efax_log(ctx, 0,
                 "efax_mr_unpack: peer %d (%s) registered the region on another provider than this "
                 "context's %s: its keys mean nothing here",
                 who, ctx->peer_host[who], ctx->provider);
        return -EFAX_E_MISMATCH;
    }
    if ((int)nnic != ctx->peer_nnic[who] || r.n + 8 * (size_t)nnic + 8 != len ||
        (flags & ~(EFAX_RMR_STAGED | EFAX_RMR_WRITABLE | EFAX_RMR_HOST))) {
        efax_log(ctx, 0,
                 "efax_mr_unpack: peer %d (%s) describes the region with keys on %u NIC(s) (flags %x); it "
                 "has %d NIC(s): the descriptor is not of this peer's context",
                 who, ctx->peer_host[who], nnic, flags, ctx->peer_nnic[who]);
        return -EFAX_E_PEER;
    }
    if (!view->remote || view->nremote != ctx->size) {
        free(view->remote);
        view->remote = (efax_rmr *)calloc((size_t)ctx->size, sizeof(efax_rmr));
        view->nremote = view->remote ? ctx->size : 0;
        if (!view->remote) return -FI_ENOMEM;
    }
    if (!view->ctx) view->ctx = ctx; /* a view of peers' regions only: no registration of its own */
    rm = &view->remote[who];
    memset(rm, 0, sizeof *rm);
    rm->base = base;
    rm->len = rlen;
    rm->flags = flags;
    rm->nnic = (int)nnic;
    for (i = 0; i < nnic; i++) efax__get(&r, &rm->key[i], 8);
    if (owner) *owner = who;
    return 0;
}

EFAX_API int efax_mr_exchange(efax_mr *mr, efax_boot *boot) {
    efax_ctx *ctx = mr->ctx;
    uint8_t me[EFAX_MR_BYTES], *all = NULL;
    size_t len = 0;
    int p, rc;
    if (!ctx || !ctx->connected || !ctx->boot) {
        if (ctx) efax_log(ctx, 0, "efax_mr_exchange: call efax_ctx_connect first");
        return -FI_EOPBADSTATE;
    }
    memset(me, 0, sizeof me);
    if ((rc = efax_mr_pack(mr, me, sizeof me, &len))) return rc;
    all = (uint8_t *)calloc((size_t)boot->size, sizeof me);
    if (!all) return -FI_ENOMEM;
    if ((rc = efax_boot_allgather(boot, me, sizeof me, all, -1))) {
        efax_log(ctx, 0, "exchanging memory keys failed: %s", efax_strerror(rc));
        free(all);
        return rc;
    }
    for (p = 0; p < boot->size && !rc; p++) {
        uint32_t size = 0;
        memcpy(&size, all + (size_t)p * sizeof me + 8, 4);
        rc = efax_mr_unpack(mr, ctx, all + (size_t)p * sizeof me, size <= sizeof me ? size : sizeof me, NULL);
        if (rc)
            efax_log(ctx, 0, "rank %d (%s): its region's descriptor was refused", p, efax_ctx_host(ctx, p));
    }
    free(all);
    return rc;
}

// >>operations (implementation) ----------------------------------------------------------------

EFAX_API int efax_imm_encode(int rank, int tag, uint32_t seq, uint32_t *imm) {
    *imm = 0;
    if (rank < 0 || rank >= EFAX_IMM_MAX_RANKS || tag < 0 || tag >= EFAX_IMM_MAX_TAGS) return -FI_EINVAL;
    *imm = ((uint32_t)rank << (EFAX_IMM_TAG_BITS + EFAX_IMM_SEQ_BITS)) |
           ((uint32_t)tag << EFAX_IMM_SEQ_BITS) | (seq & ((1u << EFAX_IMM_SEQ_BITS) - 1));
    return 0;
}

EFAX_API void efax_imm_decode(uint32_t imm, int *rank, int *tag, uint32_t *seq) {
    *rank = (int)(imm >> (EFAX_IMM_TAG_BITS + EFAX_IMM_SEQ_BITS));
    *tag = (int)((imm >> EFAX_IMM_SEQ_BITS) & ((1u << EFAX_IMM_TAG_BITS) - 1));
    *seq = imm & ((1u << EFAX_IMM_SEQ_BITS) - 1);
}

EFAX_PRIVATE const char *efax__opname(int op) {
    return op == EFAX_OP_SEND ? "send" : op == EFAX_OP_RECV ? "receive" : op == EFAX_OP_WRITE ? "write" : "?";
}

EFAX_PRIVATE const char *efax__host(const efax_ctx *ctx, int peer) {
    return ctx->peer_host && peer >= 0 && peer < ctx->size ? ctx->peer_host[peer] : "?";
}

EFAX_PRIVATE void efax__seg_push(efax_seg **head, efax_seg **tail, efax_seg *s) {
    s->next = NULL;
    if (*tail)
        (*tail)->next = s;
    else
        *head = s;
    *tail = s;
}

EFAX_PRIVATE efax_seg *efax__seg_pop(efax_seg **head, efax_seg **tail) {
    efax_seg *s = *head;
    if (s) {
        *head = s->next;
        if (!*head) *tail = NULL;
        s->next = NULL;
    }
    return s;
}

EFAX_PRIVATE void efax__xfer_check_done(efax_xfer *x) {
    if (x->pending == 0 && x->unposted == 0 && !x->done) {
        x->done = true;
        if (x->on_done) x->on_done(x->done_user, x);
    }
}

/* The route to peer's NIC matched with local NIC nic. */
static inline const efax__route *efax__route_to(const efax_ctx *ctx, int peer, int nic) {
    return &ctx->nic[nic].route[peer];
}

/* Sends len bytes at buf to fa by inject, with immediate data when has_imm. */
static inline int efax__inject_send(efax__nic *n, const void *buf, uint64_t len, bool has_imm, uint32_t imm,
                                    fi_addr_t fa) {
    return (int)(has_imm ? efax__fi_injectdata(n, buf, len, imm, fa) : efax__fi_inject(n, buf, len, fa));
}

/* Sends or writes a small chunk by inject: the provider copies it at once, so it needs no
   operation context and produces no completion (one CQ round trip less per small message). */
EFAX_PRIVATE int efax__inject_tx(efax_ctx *ctx, efax__nic *n, efax_seg *s, uint64_t len, uint32_t imm) {
    efax_xfer *x = s->x;
    const efax__route *rt = efax__route_to(ctx, x->peer, s->nic);
    const void *buf = (const uint8_t *)x->lmr->ptr + x->loff + s->off + s->posted;
    if (x->op == EFAX_OP_WRITE) {
        const efax_rmr *rm = &x->rmr->remote[x->peer];
        uint64_t addr = rm->base + x->roff + s->off + s->posted, key = rm->key[rt->rnic];
        return (int)(x->has_imm ? efax__fi_inject_writedata(n, buf, len, imm, rt->fa, addr, key)
                                : efax__fi_inject_write(n, buf, len, rt->fa, addr, key));
    }
    return efax__inject_send(n, buf, len, x->has_imm, imm, rt->fa);
}

EFAX_PRIVATE void efax__op_free(efax__nic *n, efax_op *op) {
    op->next = n->free_ops;
    n->free_ops = op;
}

EFAX_PRIVATE void efax__post_retry(efax_ctx *ctx, efax__nic *n);
EFAX_PRIVATE void efax__split_done(efax_ctx *ctx, efax__nic *n, efax_op *op);

/* Fills op for len bytes at offset off of transfer x on NIC nic: the local iovec and, for a
   write, the remote one. Returns the peer's address on that NIC. */
EFAX_PRIVATE fi_addr_t efax__op_fill(efax_ctx *ctx, efax_op *op, efax_xfer *x, int nic, uint64_t off,
                                     uint64_t len) {
    const efax__route *rt = efax__route_to(ctx, x->peer, nic);
    op->kind = EFAX__OPK_TX;
    op->x = x;
    op->nic = nic;
    op->len = len;
    op->split = EFAX__SPLIT_NONE;
    op->partner = NULL;
    op->iov.iov_base = (uint8_t *)x->lmr->ptr + x->loff + off;
    op->iov.iov_len = len;
    op->desc = x->lmr->desc[nic];
    if (x->op == EFAX_OP_WRITE) {
        const efax_rmr *rm = &x->rmr->remote[x->peer];
        op->riov.addr = rm->base + x->roff + off;
        op->riov.len = len;
        op->riov.key = rm->key[rt->rnic];
    }
    return rt->fa;
}

/* Posts op (filled by efax__op_fill) as a write to fa. */
EFAX_PRIVATE int efax__writemsg(efax__nic *n, efax_op *op, fi_addr_t fa, uint64_t flags, uint32_t imm) {
    struct fi_msg_rma m;
    m.msg_iov = &op->iov;
    m.desc = &op->desc;
    m.iov_count = 1;
    m.addr = fa;
    m.rma_iov = &op->riov;
    m.rma_iov_count = 1;
    m.context = &op->fctx;
    m.data = imm;
    return (int)efax__fi_writemsg(n, &m, flags);
}

/* Posts one chunk of a transmit segment. Returns 0, -FI_EAGAIN or an error. */
EFAX_PRIVATE int efax__post_tx(efax_ctx *ctx, efax__nic *n, efax_seg *s, uint64_t len, uint32_t imm,
                               efax_op *op, bool more) {
    efax_xfer *x = s->x;
    fi_addr_t fa = efax__op_fill(ctx, op, x, s->nic, s->off + s->posted, len);
    uint64_t flags = FI_COMPLETION | (x->has_imm ? FI_REMOTE_CQ_DATA : 0) | (more ? FI_MORE : 0);
    struct fi_msg m;
    if (x->op == EFAX_OP_WRITE) return efax__writemsg(n, op, fa, flags, imm);
    m.msg_iov = &op->iov;
    m.desc = &op->desc;
    m.iov_count = 1;
    m.addr = fa;
    m.context = &op->fctx;
    m.data = imm;
    return (int)efax__fi_sendmsg(n, &m, flags);
}

/* A split write (shm on libfabric 2.x, host memory on both sides, n->split_min bytes or more).
   shm copies a write with immediate data once, in the target's progress (process_vm_readv),
   while the writer waits; a write without it the writer copies itself, inside fi_write (prov/shm
   smr_rma.c: smr_do_fast_rma), taking only its own endpoint's lock. A split write makes both
   copy at once, on two cores: the second half goes first, as a write the target copies
   (FI_DELIVERY_COMPLETE keeps it off the fast path; it carries no immediate data), then the
   writer copies the first half; once both have completed, a zero-byte write carries the
   immediate data (the marker: imm, which names the cell of a staged target), so the target
   counts one arrival per chunk, as for any write. A staged source or target splits as host
   memory does: the NICs see its host staging buffer (a source's bytes are out before the post).
   1.17's shm cannot overlap them: its fast path holds the target region's lock through the
   copy (smr_generic_rma), and the target holds that lock through its own (smr_progress_cmd).
   Returns 0 (both halves handed over, or the writer's queued on n->retry), -FI_EAGAIN
   (nothing posted) or an error (nothing posted). */
EFAX_PRIVATE int efax__post_split(efax_ctx *ctx, efax__nic *n, efax_seg *s, uint64_t len, uint32_t imm) {
    efax_xfer *x = s->x;
    efax_op *mine = n->free_ops, *theirs = mine ? mine->next : NULL;
    uint64_t off = s->off + s->posted, first = (len / 2 + 4095) & ~(uint64_t)4095;
    fi_addr_t fa;
    int rc;
    if (!theirs) return -FI_EAGAIN;
    fa = efax__op_fill(ctx, theirs, x, s->nic, off + first, len - first);
    if ((rc = efax__writemsg(n, theirs, fa, FI_COMPLETION | FI_DELIVERY_COMPLETE, 0))) return rc;
    n->free_ops = theirs->next;
    efax__op_fill(ctx, mine, x, s->nic, off, first);
    mine->split = theirs->split = EFAX__SPLIT_HALF;
    mine->imm = theirs->imm = imm;
    mine->partner = theirs;
    theirs->partner = mine;
    n->inflight++;
    x->pending += 2;
    mine->next = n->retry; /* posted from the retry queue, where a refusal leaves it */
    n->retry = mine;
    n->work = true;
    efax__post_retry(ctx, n);
    return 0;
}

EFAX_PRIVATE void efax__fail_xfer(efax_ctx *ctx, efax_xfer *x, int rc) {
    (void)ctx;
    if (!x->status) x->status = rc;
}

/* Posts what waits on n->retry: writer halves of split writes (efax__post_split) and markers.
   An operation of a failed transfer is dropped. Stops at the first refusal (-FI_EAGAIN). */
EFAX_PRIVATE void efax__post_retry(efax_ctx *ctx, efax__nic *n) {
    while (n->retry) {
        efax_op *op = n->retry;
        efax_xfer *x = op->x;
        int rc = 0;
        if (!x->status) {
            const efax__route *rt = efax__route_to(ctx, x->peer, op->nic);
            rc = op->split == EFAX__SPLIT_HALF
                     ? efax__writemsg(n, op, rt->fa, FI_COMPLETION, 0)
                     : (int)efax__fi_inject_writedata(n, op->iov.iov_base, 0, op->imm, rt->fa, op->riov.addr,
                                                      op->riov.key);
            if (rc == -FI_EAGAIN) {
                n->stats.eagain++;
                return;
            }
        }
        n->retry = op->next;
        if (rc) {
            efax_log(ctx, 0, "%s to rank %d (%s) on NIC %s: posting failed: %s (%d)",
                     op->split == EFAX__SPLIT_HALF ? "split write's own half" : "split write's marker",
                     x->peer, efax__host(ctx, x->peer), n->info.name, fi_strerror(-rc), rc);
            efax__fail_xfer(ctx, x, rc);
        }
        if (op->split == EFAX__SPLIT_HALF && !rc && !x->status) {
            n->inflight++; /* its completion carries on in efax__split_done */
            continue;
        }
        if (op->split == EFAX__SPLIT_HALF) { /* never posted: done as far as its partner goes */
            efax__split_done(ctx, n, op);
            continue;
        }
        x->pending--; /* a marker: injected (no completion follows) or dropped */
        efax__op_free(n, op);
        efax__xfer_check_done(x);
    }
}

/* One half of a split write has completed (or will never be posted): the first to finish waits
   for the other; the second announces both with the marker, unless the transfer failed. */
EFAX_PRIVATE void efax__split_done(efax_ctx *ctx, efax__nic *n, efax_op *op) {
    efax_xfer *x = op->x;
    efax_op *p = op->partner;
    x->pending--;
    if (p && p->split == EFAX__SPLIT_HALF) { /* the other half is still out */
        op->split = EFAX__SPLIT_WAIT;
        return;
    }
    if (p) efax__op_free(n, p);
    if (x->status) {
        efax__op_free(n, op);
        efax__xfer_check_done(x);
        return;
    }
    op->split = EFAX__SPLIT_MARKER;
    op->partner = NULL;
    x->pending++;
    op->next = n->retry;
    n->retry = op;
    n->work = true;
    efax__post_retry(ctx, n);
}

/* A wait's limit: timeout_ms, or the context's where it is < 0 (not given). */
static inline int efax__wait_ms(const efax_ctx *ctx, int timeout_ms) {
    return timeout_ms < 0 ? ctx->timeout_ms : timeout_ms;
}

/* Whether, after posting `len` bytes of s, this loop will certainly post another chunk at once:
   only then may a post carry FI_MORE. efa defers the doorbell of a FI_MORE post until a post
   without it (prov/efa/src/efa_data_path_ops.h: ibv_wr_complete only without FI_MORE), so a
   batch that ends on FI_MORE would sit unsent. A chunk that waits for its source (ready hook,
   staged copy) or belongs to a failed transfer may end the loop, so none follows a FI_MORE
   post; -FI_EAGAIN leaves the next chunk queued, and the next efax_progress posts it. */
EFAX_PRIVATE bool efax__next_postable(const efax_seg *s, uint64_t len) {
    const efax_seg *t = s->posted + len < s->len ? s : s->next;
    const efax_xfer *y = t ? t->x : NULL;
    return y && !y->status && !y->ready && !(y->lmr->stage && y->op == EFAX_OP_WRITE);
}

EFAX_PRIVATE int efax__drain(efax_ctx *ctx, efax__nic *n);
EFAX_PRIVATE void efax__idle(int got, unsigned *idle);
EFAX_PRIVATE bool efax__expired(uint64_t *deadline, unsigned *spins, int timeout_ms);

/* A post with FI_MORE was taken and the one after it refused (-FI_EAGAIN): efa has the first in
   its queue without having rung the doorbell (efa_data_path_ops.h), and its refusal did not ring
   it either (it refuses in efa_rdm before touching the queue: efa_rdm_rma.c, efa_rdm_ope.c, so
   fi_msg(3)'s "flush delayed calls when a new call fails" does not happen). Returning now would
   leave the batch unsent until some later post, while the caller may wait on something else
   (efa_rdm_pke.c). So the refused chunk is posted again at once, without FI_MORE,
   draining this NIC's CQ between tries (completions free what the provider lacked), until the
   provider takes it or the context's timeout passes. Returns 0 or the post's error (the caller
   fails the transfer; with the timeout, -FI_ETIMEDOUT, named). */
EFAX_PRIVATE int efax__close_batch(efax_ctx *ctx, efax__nic *n, efax_seg *s, uint64_t len, uint32_t imm) {
    uint64_t deadline = 0;
    unsigned spins = 0, idle = 0;
    for (;;) {
        int rc, got;
        n->stats.eagain++;
        if ((got = efax__drain(ctx, n)) < 0) return got;
        rc = efax__post_tx(ctx, n, s, len, imm, n->free_ops, false);
        if (rc != -FI_EAGAIN) return rc;
        efax__idle(got, &idle);
        if (efax__expired(&deadline, &spins, ctx->timeout_ms)) {
            efax_log(
                ctx, 0,
                "NIC %s: posts sent with FI_MORE wait for one without it, and the provider refused that one "
                "for %d ms (-FI_EAGAIN)",
                n->info.name, ctx->timeout_ms);
            return -FI_ETIMEDOUT;
        }
    }
}

/* The provider refused the queue's head for now, or its bytes are not ready yet. When that is its
   peer's doing (a connection still opening, or a peer gone: tcp refuses so until it knows), the
   peers behind it must not wait on it: every queued segment of that peer goes behind the others',
   in its order (efa orders nothing between writes anyway). Returns whether another peer's segment
   is at the head now. */
EFAX_PRIVATE bool efax__pend_rotate(efax__nic *n) {
    int peer = n->pend_head->x->peer;
    efax_seg *keep_h = NULL, *keep_t = NULL, *move_h = NULL, *move_t = NULL, *s, *next;
    for (s = n->pend_head; s && s->x->peer == peer; s = s->next) {}
    if (!s) return false;
    for (s = n->pend_head; s; s = next) {
        efax_seg **h = s->x->peer == peer ? &move_h : &keep_h, **t = s->x->peer == peer ? &move_t : &keep_t;
        next = s->next;
        s->next = NULL;
        if (*t)
            (*t)->next = s;
        else
            *h = s;
        *t = s;
    }
    keep_t->next = move_h;
    n->pend_head = keep_h;
    n->pend_tail = move_t;
    return true;
}

/* The queue's head segment s leaves NIC n's queue; check: the transfer may be done with it (nothing
   of it is in flight to complete it later: it was injected, or failed). */
static inline void efax__seg_leave(efax__nic *n, efax_seg *s, bool check) {
    efax_xfer *x = s->x;
    efax__seg_pop(&n->pend_head, &n->pend_tail);
    x->unposted--;
    if (check) efax__xfer_check_done(x);
}

/* len more bytes of the queue's head segment s are on their way; it leaves the queue once all are. */
static inline void efax__seg_posted(efax__nic *n, efax_seg *s, uint64_t len, bool check) {
    s->posted += len;
    if (s->posted >= s->len) efax__seg_leave(n, s, check);
}

/* Posts queued transmit chunks while the NIC's window has room. */
EFAX_PRIVATE int efax__post_nic(efax_ctx *ctx, efax__nic *n) {
    int posted = 0, rotated = 0;
    bool open = false; /* the last post carried FI_MORE: the batch must end on a post without it */
    if (n->retry) efax__post_retry(ctx, n);
    while (n->pend_head && n->inflight < n->window && n->free_ops) {
        efax_seg *s = n->pend_head;
        efax_xfer *x = s->x;
        uint64_t len, at;
        uint32_t imm = x->imm;
        efax_op *op;
        int rc;
        bool more;
        if (x->status) { /* the transfer failed elsewhere: post no more of it */
            efax__seg_leave(n, s, true);
            continue;
        }
        len = s->len - s->posted;
        at = s->off + s->posted;
        if (len > x->chunk) len = x->chunk;
        if (x->cell_seq) { /* to a staged target: no post crosses a cell, each carries its index */
            uint64_t cell = at / x->cell, end = (cell + 1) * x->cell;
            if (len > end - at) len = end - at;
            imm = x->imm | (uint32_t)cell;
        }
        /* bytes not ready yet (the caller's, or a staged source's copy out): another peer's may go */
        if ((x->ready && !x->ready(x->ready_user, at, len)) ||
            (x->lmr->stage && x->op == EFAX_OP_WRITE &&
             !x->lmr->stage->out_ready(x->lmr->stage_user, x->loff + at, len))) {
            if (!open && rotated++ < 4 && efax__pend_rotate(n)) continue;
            break;
        }
        if (len <= (x->op == EFAX_OP_WRITE ? n->info.inject_rma_size : n->info.inject_size) &&
            x->lmr->iface == 0) {
            rc = efax__inject_tx(ctx, n, s, len, imm);
            if (rc == 0) {
                open = false; /* an inject rings the doorbell */
                n->stats.tx_bytes += len;
                n->stats.tx_ops++;
                efax__seg_posted(n, s, len, true);
                posted++;
                continue;
            }
            if (rc != -FI_EAGAIN) goto failed;
            /* the inject buffer is full: post it normally (its completion frees the space) */
        }
        if (n->split_min && len >= n->split_min && x->op == EFAX_OP_WRITE && x->has_imm &&
            x->lmr->iface == 0 && (x->rmr->remote[x->peer].flags & EFAX_RMR_HOST) &&
            n->inflight + 2 <= n->window && !n->retry && !open) {
            rc = efax__post_split(ctx, n, s, len, imm);
            if (rc == -FI_EAGAIN) {
                n->stats.eagain++;
                break;
            }
            if (rc) goto failed;
            efax__seg_posted(n, s, len, false);
            posted++;
            continue;
        }
        op = n->free_ops;
        EFAX_ASSERT(op);
        /* FI_MORE only where the loop will post again at once: the window and the pool have room for
           the next chunk, and it does not wait for anything */
        more = ctx->fi_more && n->inflight + 1 < n->window && op->next && efax__next_postable(s, len);
        rc = efax__post_tx(ctx, n, s, len, imm, op, more);
        if (rc == -FI_EAGAIN && open) { /* never end a batch on a FI_MORE post */
            more = false;
            rc = efax__close_batch(ctx, n, s, len, imm);
            op = n->free_ops; /* the drain may have freed operations ahead of it */
        }
        if (rc == -FI_EAGAIN) {
            n->stats.eagain++;
            if (!open && rotated++ < 4 && efax__pend_rotate(n)) continue; /* another peer's may go */
            break;
        }
        if (rc) {
        failed:
            efax_log(ctx, 0, "%s of %llu bytes to rank %d (%s) on NIC %s: posting failed: %s (%d)",
                     efax__opname(x->op), (unsigned long long)len, x->peer, efax__host(ctx, x->peer),
                     n->info.name, fi_strerror(-rc), rc);
            efax__fail_xfer(ctx, x, rc);
            efax__seg_leave(n, s, true);
            continue;
        }
        n->free_ops = op->next;
        n->inflight++;
        x->pending++;
        efax__seg_posted(n, s, len, false);
        posted++;
        open = more;
    }
    if (EFAX__UNLIKELY(n->fault)) efax__f_bell_check(n); /* the fault layer checks the promise above */
    return posted;
}

/* Segment s (its transfer's first post) goes out at once when it is one chunk, nothing is queued
   ahead of it on NIC n and the window has room, the provider taking it; else it joins the queue,
   which posts it in turn (by inject where small, split, in cells, when ready). The queue's general
   loop costs a ping-pong noticeably more own instructions a round trip (docs/journal.md). s->x is
   set as for the queue. */
EFAX_PRIVATE void efax__post_or_queue(efax_ctx *ctx, efax__nic *n, efax_seg *s) {
    efax_xfer *x = s->x;
    efax_op *op = n->free_ops;
    bool wr = x->op == EFAX_OP_WRITE;
    if (!n->pend_head && !n->retry && op && n->inflight < n->window && s->len <= x->chunk && !x->ready &&
        !x->cell_seq && !(wr && x->lmr->stage) && !(n->split_min && wr && s->len >= n->split_min) &&
        (s->len > (wr ? n->info.inject_rma_size : n->info.inject_size) || x->lmr->iface != 0) &&
        efax__post_tx(ctx, n, s, s->len, x->imm, op, false) == 0) {
        n->free_ops = op->next;
        n->inflight++;
        x->pending++;
        s->posted = s->len;
        x->unposted--;
        return;
    }
    efax__seg_push(&n->pend_head, &n->pend_tail, s);
    n->work = true;
    efax__post_nic(ctx, n);
}

/* Posts receive x on NIC n (index nic) with operation op (n->free_ops); the caller takes op from
   the pool when the provider took it. fi_recv takes the buffer itself: op keeps no iovec. */
static inline int efax__recv_post(efax__nic *n, efax_xfer *x, efax_op *op, int nic) {
    op->kind = EFAX__OPK_RX;
    op->x = x; /* its completion and error read the rest from x (op->len, nic and desc are a transmit's) */
    return (int)efax__fi_recv(n, (uint8_t *)x->lmr->ptr + x->loff, x->len, x->lmr->desc[nic], FI_ADDR_UNSPEC,
                              &op->fctx);
}

/* A receive that failed: nothing arrived (efax_recv leaves rx_* to its completion). */
EFAX_PRIVATE void efax__rx_none(efax_xfer *x) {
    x->rx_len = 0;
    x->rx_data = 0;
    x->rx_has_data = false;
}

EFAX_PRIVATE int efax__post_rx(efax_ctx *ctx, efax__nic *n) {
    while (n->rxp_head && n->rx_inflight < n->window && n->free_ops) {
        efax_seg *s = n->rxp_head;
        efax_xfer *x = s->x;
        efax_op *op = n->free_ops;
        int rc = efax__recv_post(n, x, op, s->nic);
        if (rc == -FI_EAGAIN) break;
        efax__seg_pop(&n->rxp_head, &n->rxp_tail);
        x->unposted--;
        if (rc) {
            efax_log(ctx, 0, "posting a receive of %llu bytes on NIC %s failed: %s (%d)",
                     (unsigned long long)x->len, n->info.name, fi_strerror(-rc), rc);
            efax__rx_none(x);
            efax__fail_xfer(ctx, x, rc);
            efax__xfer_check_done(x);
            continue;
        }
        n->free_ops = op->next;
        n->rx_inflight++;
        x->pending++;
    }
    return 0;
}

/* A fault an arrival met, kept for the next wait (the first one; how many came). */
EFAX_PRIVATE void efax__seq_fault_add(efax__seq_fault *f, int err, uint32_t seq, uint32_t n, uint32_t at) {
    if (!f->err) {
        f->err = err;
        f->seq = seq;
        f->at = at;
        f->n = 0;
    }
    f->n += n;
}

/* Logs what went wrong with sequence seq from peer under tag (code: -EFAX_E_OVERRUN or
   -EFAX_E_STALE; at: the sequence it met) and returns code. what: "arrival", "wait", ... */
EFAX_PRIVATE int efax__seq_report(const efax_ctx *ctx, int code, int peer, int tag, uint32_t seq, uint32_t n,
                                  uint32_t at, unsigned window, const char *what) {
    if (code == -EFAX_E_OVERRUN)
        efax_log(
            ctx, 0,
            "rank %d (%s) tag %d: %s of sequence %u while sequence %u is still outstanding, or after the "
            "window moved past it: more than %u sequences outstanding under one tag (the window). Let "
            "the writer run at most %u ahead of what this rank consumed (credits), consume every "
            "sequence that arrives, or spread transfers over more tags",
            peer, efax__host(ctx, peer), tag, what, seq, at, window, window);
    else
        efax_log(ctx, 0,
                 "rank %d (%s) tag %d: %u %s(s) of sequence %u came after it was consumed, or behind the "
                 "window (at sequence %u) while later ones were outstanding: data of an earlier transfer, or "
                 "more than the sequence had. Number the transfers under a tag 0, 1, 2, ... and await each "
                 "with the count it has",
                 peer, efax__host(ctx, peer), tag, n ? n : 1, what, seq, at);
    return code;
}

/* A fault kept for the next wait, reported (logged) once: its code. */
EFAX_PRIVATE EFAX__NOINLINE int efax__seq_fault_take(const efax_ctx *ctx, efax__seq_fault *f, int peer,
                                                     int tag, unsigned window, const char *what) {
    int rc = efax__seq_report(ctx, f->err, peer, tag, f->seq, f->n, f->at, window, what);
    f->err = 0;
    return rc;
}

#define EFAX__SEQS (1u << EFAX_IMM_SEQ_BITS)

/* Whether sequence seq lies in the window of sl: its count is count[seq % EFAX_IMM_WINDOW]. */
static inline bool efax__imm_in(const efax__imm_slot *sl, uint32_t seq) {
    return sl->used && ((seq - sl->base) & (EFAX__SEQS - 1)) < EFAX_IMM_WINDOW;
}

/* Empties entry idx of a (peer, tag)'s window (slot: its index in ctx->imm), per-NIC counts too. */
static inline void efax__imm_clear(efax_ctx *ctx, size_t slot, uint32_t idx) {
    ctx->imm[slot].count[idx] = 0;
    if (ctx->nnic > 1)
        memset(&ctx->imm_nic[(slot * EFAX_IMM_WINDOW + idx) * (size_t)ctx->nnic], 0,
               (size_t)ctx->nnic * sizeof(uint32_t));
}

static inline void efax__imm_mark(efax__imm_slot *sl, uint32_t seq, bool passed) {
    uint64_t bit = 1ull << (seq & 63);
    if (passed)
        sl->passed[(seq >> 6) & 3] |= bit;
    else
        sl->passed[(seq >> 6) & 3] &= ~bit;
}

/* Brings sequence seq into the window of (peer, tag) `slot`, for an arrival or a wait (`awaited`: the
   sequence a wait in progress needs, which the window keeps; -1: none). A first sequence, or one
   outside the window when nothing is held or awaited (a new run, or a tag used every so many
   sequences), starts the window anew with seq as its newest. Returns 0
   with seq inside; -EFAX_E_OVERRUN when the window would have to pass a sequence still outstanding
   (*at: that one) or seq came after the window passed it; -EFAX_E_STALE when seq is behind the
   window while later ones are held. Moving up passes what it must, no more: empty entries, and
   consumed ones that still hold arrivals (more than their sequence had: kept as a stale fault for
   the next wait). A consumed entry may still take more of its sequence (waits may take it in parts,
   and parts come in any order), so the window keeps it as long as it can. */
EFAX_PRIVATE EFAX__NOINLINE int efax__imm_place(efax_ctx *ctx, size_t slot, uint32_t seq, int awaited,
                                                uint32_t *at) {
    efax__imm_slot *sl = &ctx->imm[slot];
    unsigned d = (seq - sl->base) & (EFAX__SEQS - 1), need, k;
    bool idle = sl->live == 0 && awaited < 0;
    *at = sl->base;
    if (!sl->used || (idle && d >= EFAX_IMM_WINDOW)) {
        memset(sl->count, 0, sizeof sl->count);
        if (ctx->nnic > 1)
            memset(&ctx->imm_nic[slot * EFAX_IMM_WINDOW * (size_t)ctx->nnic], 0,
                   EFAX_IMM_WINDOW * (size_t)ctx->nnic * sizeof(uint32_t));
        sl->base = (uint8_t)((seq - EFAX_IMM_WINDOW + 1) & (EFAX__SEQS - 1));
        sl->used = true;
        /* what came before seq is consumed, as far as this window knows (nothing is held): an
           old arrival is stale, not an overrun; seq's own entry awaits it */
        sl->taken = ~(1u << (seq % EFAX_IMM_WINDOW));
        memset(sl->passed, 0, sizeof sl->passed);
        return 0;
    }
    if (d < EFAX_IMM_WINDOW) return 0;
    if (d >= EFAX__SEQS / 2) /* behind the window, with later sequences outstanding */
        return (sl->passed[(seq >> 6) & 3] >> (seq & 63)) & 1 ? -EFAX_E_OVERRUN : -EFAX_E_STALE;
    need = d - EFAX_IMM_WINDOW + 1;
    for (k = 0; k < need; k++) {
        uint32_t q = sl->base, idx = q % EFAX_IMM_WINDOW, bit = 1u << idx;
        uint32_t held = k < EFAX_IMM_WINDOW ? sl->count[idx] : 0;
        bool taken = (sl->taken & bit) != 0;
        if ((int)q == awaited || (held && !taken)) {
            *at = q;
            return -EFAX_E_OVERRUN;
        }
        if (held) { /* consumed, and more came than was taken */
            efax__seq_fault_add(&sl->fault, -EFAX_E_STALE, q, held, seq);
            sl->live -= held;
        }
        if (k < EFAX_IMM_WINDOW) efax__imm_clear(ctx, slot, idx);
        efax__imm_mark(sl, q, !taken);
        sl->taken &= ~bit;
        sl->base = (uint8_t)((q + 1) & (EFAX__SEQS - 1));
        efax__imm_mark(sl, sl->base + EFAX_IMM_WINDOW - 1, false); /* it enters the window now */
    }
    return 0;
}

/* efax__count_imm for an arrival outside its window: placed first (out of line, so that the count of
   one inside it saves no registers for this). */
EFAX_PRIVATE EFAX__NOINLINE void efax__count_placed(efax_ctx *ctx, size_t slot, uint32_t seq, int nic) {
    efax__imm_slot *sl = &ctx->imm[slot];
    uint32_t at, idx = seq % EFAX_IMM_WINDOW;
    int rc = efax__imm_place(ctx, slot, seq, sl->awaited - 1, &at);
    if (rc) { /* not counted: the next wait on this (peer, tag) reports it */
        efax__seq_fault_add(&sl->fault, rc, seq, 1, at);
        return;
    }
    sl->count[idx]++;
    sl->live++;
    if (ctx->nnic > 1) ctx->imm_nic[(slot * EFAX_IMM_WINDOW + idx) * (size_t)ctx->nnic + (size_t)nic]++;
}

EFAX_PRIVATE void efax__count_imm(efax_ctx *ctx, uint64_t data, int nic) {
    int rank, tag;
    uint32_t seq, idx;
    size_t slot;
    efax__imm_slot *sl;
    efax_imm_decode((uint32_t)data, &rank, &tag, &seq);
    if (!ctx->imm || rank >= ctx->size || tag >= ctx->ntags) {
        if (ctx->bad_imm++ < 8)
            efax_log(ctx, 1,
                     "NIC %s: immediate data 0x%08x names rank %d tag %d, outside this job "
                     "(%d ranks, %d tags): ignored",
                     ctx->nic[nic].info.name, (unsigned)data, rank, tag, ctx->size, ctx->ntags);
        return;
    }
    if (ctx->hooks[tag].fn) {
        ctx->hooks[tag].fn(ctx->hooks[tag].user, rank, tag, seq, nic);
        return;
    }
    slot = (size_t)rank * (size_t)ctx->ntags + (size_t)tag;
    sl = &ctx->imm[slot];
    if (EFAX__UNLIKELY(!efax__imm_in(sl, seq))) { /* a first, a new run, or the window moves */
        efax__count_placed(ctx, slot, seq, nic);
        return;
    }
    idx = seq % EFAX_IMM_WINDOW;
    sl->count[idx]++;
    sl->live++;
    if (ctx->nnic > 1) ctx->imm_nic[(slot * EFAX_IMM_WINDOW + idx) * (size_t)ctx->nnic + (size_t)nic]++;
}

EFAX__HOT_INLINE void efax__complete(efax_ctx *ctx, efax__nic *n, efax_op *op, int err, uint64_t len,
                                     uint64_t flags, uint64_t data) {
    efax_xfer *x = op->x;
    (void)ctx;
    if (op->kind == EFAX__OPK_TX) {
        n->inflight--;
        if (!err) {
            int i;
            n->stats.tx_bytes += op->len;
            n->stats.tx_ops++;
            for (i = 0; i < x->nseg; i++) /* which NIC's piece: for naming a stalled NIC */
                if (x->seg[i].nic == op->nic) {
                    x->seg[i].completed += op->len;
                    break;
                }
        }
        if (op->split) { /* a half of a split write: the marker follows both */
            if (err) efax__fail_xfer(ctx, x, err);
            efax__split_done(ctx, n, op);
            return;
        }
    } else {
        n->rx_inflight--;
        if (err) efax__rx_none(x);
        if (!err) {
            n->stats.rx_bytes += len;
            n->stats.rx_ops++;
            x->rx_len = len;
            x->rx_has_data = (flags & FI_REMOTE_CQ_DATA) != 0;
            x->rx_data = data;
            if (x->lmr->stage) { /* a staged receive: copy what landed in */
                int rc = x->lmr->stage->in_sync(x->lmr->stage_user, x->loff, len);
                if (rc) err = rc;
            }
        }
    }
    if (err) efax__fail_xfer(ctx, x, err);
    x->pending--;
    efax__op_free(n, op);
    efax__xfer_check_done(x);
}

/* An injected operation (a small send, write or notification: efax counted it done when the
   provider took it) failed later. Its error entry has no context (efa_rdm_txe_handle_error copies
   the inject's, which is NULL: prov/efa/src/rdm/efa_rdm_ope.c), only the flags, the data and the
   tag, so no transfer can be named as its owner: whatever it carried never arrived, and every
   wait on this context fails from here on (a sticky error), the one in progress first.
   Before it surfaces, a wait for a transfer that injected has returned 0: an inject reports
   nothing else. */
EFAX_PRIVATE void efax__lost_inject(efax_ctx *ctx, efax__nic *n, const struct fi_cq_err_entry *e,
                                    const char *ptxt) {
    int rank = -1, tag = -1, rc = -(int)(e->err ? e->err : FI_EOTHER);
    uint32_t seq = 0;
    char what[96] = "";
    bool ctrl = (e->flags & FI_TAGGED) && e->tag == EFAX__CTRL_TAG;
    if ((e->flags & FI_REMOTE_CQ_DATA) || ctrl || e->data) {
        efax_imm_decode((uint32_t)e->data, &rank, &tag, &seq);
        snprintf(what, sizeof what, " (immediate data: tag %d, sequence %u)", tag, seq);
    }
    efax_log(
        ctx, 0,
        "NIC %s: an injected %s%s failed after efax counted it done: %s (provider errno %d: %s). An inject "
        "has no completion to fail, so its transfer cannot be named: what it carried never arrived, and "
        "every wait on this context fails from here on",
        n->info.name,
        ctrl                    ? "notification"
        : (e->flags & FI_WRITE) ? "write"
                                : "send",
        what, fi_strerror(-rc), e->prov_errno, ptxt ? ptxt : "-");
    efax__set_sticky(ctx, rc);
}

EFAX_PRIVATE void efax__cq_error(efax_ctx *ctx, efax__nic *n) {
    struct fi_cq_err_entry e;
    char pbuf[256];
    const char *ptxt;
    efax_op *op;
    memset(&e, 0, sizeof e);
    if (efax__fi_cq_readerr(n, &e) < 0) return;
    ptxt = efax__fi_cq_strerror(n, &e, pbuf, sizeof pbuf);
    op = (efax_op *)e.op_context;
    if (!op && (e.flags & (FI_SEND | FI_WRITE)) && !(e.flags & (FI_RECV | FI_REMOTE_WRITE))) {
        efax__lost_inject(ctx, n, &e, ptxt);
        return;
    }
    if (!op) { /* a peer's write (efa: unsolicited write recv) that failed here: it names no writer */
        efax_log(ctx, 0,
                 "NIC %s: a peer's incoming write failed: %s (provider: %s); the provider does not say "
                 "whose, so the next wait for arrivals on this rank fails with it",
                 n->info.name, fi_strerror(e.err), ptxt ? ptxt : "-");
        ctx->last_cq_error = -(int)(e.err ? e.err : FI_EOTHER);
        return;
    }
    if (op->kind == EFAX__OPK_CTRL) {
        n->ctrl_posted--;
        n->work = true;
        op->kind = 0;
        if (e.err != FI_ECANCELED)
            efax_log(ctx, 1, "NIC %s: control receive failed: %s (provider: %s)", n->info.name,
                     fi_strerror(e.err), ptxt ? ptxt : "-");
        return;
    }
    {
        efax_xfer *x = op->x;
        int rnic = x->peer >= 0 && ctx->route ? efax__route_to(ctx, x->peer, op->nic)->rnic : -1;
        if (x->peer >= 0)
            efax_log(ctx, 0,
                     "%s of %llu bytes to rank %d (%s) on NIC %s (peer NIC %d) failed: %s (provider: %s)",
                     efax__opname(x->op), (unsigned long long)op->len, x->peer, efax__host(ctx, x->peer),
                     n->info.name, rnic, fi_strerror(e.err), ptxt ? ptxt : "-");
        else
            efax_log(ctx, 0, "receive of up to %llu bytes on NIC %s failed: %s (provider: %s)",
                     (unsigned long long)x->len, n->info.name, fi_strerror(e.err), ptxt ? ptxt : "-");
        efax__complete(ctx, n, op, -(int)(e.err ? e.err : FI_EOTHER), 0, 0, 0);
    }
}

#define EFAX__CQ_BATCH 32 /* entries one fi_cq_read takes at most */

/* An entry that is not one of efax's transfers: a peer's write with immediate data, or a control
   message (efax_notify). Out of line: the ping-pong's completion (a receive) passes it by. */
EFAX_PRIVATE EFAX__NOINLINE void efax__cq_other(efax_ctx *ctx, efax__nic *n,
                                                const struct fi_cq_data_entry *e) {
    efax_op *op = (efax_op *)e->op_context;
    if (!op || (e->flags & FI_REMOTE_WRITE)) {
        /* a peer's write with immediate data landed here: its bytes are credited by
           efax_expect_wait (a remote write's completion has no length on tcp) */
        n->stats.rx_ops++;
        if (e->flags & FI_REMOTE_CQ_DATA) efax__count_imm(ctx, e->data, (int)(n - ctx->nic));
        return;
    }
    {
        int slot = op->slot;
        n->ctrl_posted--;
        n->work = true;
        op->kind = 0;
        if (e->flags & FI_REMOTE_CQ_DATA) efax__count_imm(ctx, e->data, (int)(n - ctx->nic));
        efax__post_ctrl(ctx, n, slot);
    }
}

/* One entry fi_cq_read returned: an operation of a transfer completes here, inline; the rest
   goes to efax__cq_other. A receive is one operation (efax_recv posts it whole), so its completion
   ends its transfer: what efax__complete does for it, without the branches that cannot apply. */
EFAX__HOT_INLINE void efax__cq_entry(efax_ctx *ctx, efax__nic *n, const struct fi_cq_data_entry *e) {
    efax_op *op = (efax_op *)e->op_context;
    efax_xfer *x;
    if (EFAX__UNLIKELY(!op || (e->flags & FI_REMOTE_WRITE))) {
        efax__cq_other(ctx, n, e);
        return;
    }
    x = op->x;
    if (op->kind != EFAX__OPK_RX || EFAX__UNLIKELY(x->lmr->stage != NULL)) {
        if (op->kind == EFAX__OPK_CTRL)
            efax__cq_other(ctx, n, e);
        else
            efax__complete(ctx, n, op, 0, e->len, e->flags, e->data);
        return;
    }
    n->rx_inflight--;
    n->stats.rx_bytes += e->len;
    n->stats.rx_ops++;
    x->rx_len = e->len;
    x->rx_data = e->data;
    x->rx_has_data = (e->flags & FI_REMOTE_CQ_DATA) != 0;
    x->pending = 0;
    efax__op_free(n, op);
    x->done = true; /* efax_recv takes no on_done */
}

/* Handles what fi_cq_read returned into e (got entries, or -FI_EAVAIL: an error entry waits) and
   reads on while a read came back full. Returns the completions handled, or a negative code. */
EFAX_PRIVATE EFAX__NOINLINE int efax__drain_on(efax_ctx *ctx, efax__nic *n, struct fi_cq_data_entry *e,
                                               ssize_t got) {
    int total = 0;
    for (;; got = efax__fi_cq_read(n, e, EFAX__CQ_BATCH)) {
        ssize_t i;
        if (got == -FI_EAGAIN) break;
        if (got == -FI_EAVAIL) {
            efax__cq_error(ctx, n);
            total++;
            continue;
        }
        if (got < 0) {
            efax_log(ctx, 0, "fi_cq_read on NIC %s failed: %s", n->info.name, fi_strerror((int)-got));
            return (int)got;
        }
        for (i = 0; i < got; i++) efax__cq_entry(ctx, n, &e[i]);
        total += (int)got;
        if (got < EFAX__CQ_BATCH) break;
    }
    return total;
}

/* Drains a NIC's CQ. The read that finds nothing, most reads of a wait, returns at once; the one
   that finds one completion (a ping-pong's answer) handles it inline; more, or an error, go to
   efax__drain_on (its frame and saved registers are paid only then). */
EFAX__HOT_INLINE int efax__drain(efax_ctx *ctx, efax__nic *n) {
    struct fi_cq_data_entry e[EFAX__CQ_BATCH];
    ssize_t got = efax__fi_cq_read(n, e, EFAX__CQ_BATCH);
    if (got == -FI_EAGAIN) return 0;
    if (EFAX__LIKELY(got == 1)) {
        efax__cq_entry(ctx, n, &e[0]);
        return 1;
    }
    return efax__drain_on(ctx, n, e, got);
}

/* Reads a NIC's event queue: ordinary events are dropped; an error entry (what efa would have
   abort()ed on without an EQ) is logged with the NIC and becomes the context's sticky error.
   Returns 0 or that error. */
EFAX_PRIVATE int efax__eq_read(efax_ctx *ctx, efax__nic *n) {
    uint32_t event;
    uint64_t buf[16];
    ssize_t got;
    while ((got = fi_eq_read(n->eq, &event, buf, sizeof buf, 0)) >= 0)
        efax_log(ctx, 3, "NIC %s: event %u on the event queue (ignored)", n->info.name, (unsigned)event);
    if (got == -FI_EAGAIN) return 0;
    if (got == -FI_EAVAIL) {
        struct fi_eq_err_entry e;
        char pbuf[256];
        const char *ptxt;
        memset(&e, 0, sizeof e);
        if ((got = fi_eq_readerr(n->eq, &e, 0)) < 0) {
            efax_log(ctx, 0, "NIC %s: fi_eq_readerr failed: %s", n->info.name, fi_strerror((int)-got));
            return (int)got;
        }
        ptxt = e.prov_errno ? fi_eq_strerror(n->eq, e.prov_errno, e.err_data, pbuf, sizeof pbuf) : "none";
        efax_log(ctx, 0,
                 "NIC %s (%s, %s) reported an endpoint error on its event queue: %s (provider errno %d: %s); "
                 "the provider names no peer or operation for it: every transfer on this NIC stops here",
                 n->info.name, n->info.provider, ctx->peer_host ? efax__host(ctx, ctx->rank) : "this host",
                 fi_strerror(e.err ? e.err : FI_EOTHER), e.prov_errno, ptxt ? ptxt : "-");
        return -(e.err > 0 ? e.err : FI_EOTHER);
    }
    efax_log(ctx, 0, "NIC %s: fi_eq_read failed: %s", n->info.name, fi_strerror((int)-got));
    return (int)got;
}

/* Every NIC's event queue (efax__eq_read); an error there becomes the context's for good. */
EFAX_PRIVATE EFAX__COLD int efax__eq_all(efax_ctx *ctx) {
    int i, rc;
    for (i = 0; i < ctx->nnic; i++)
        if (ctx->nic[i].eq && (rc = efax__eq_read(ctx, &ctx->nic[i]))) {
            efax__set_sticky(ctx, rc);
            return rc;
        }
    return 0;
}

/* What waits on a NIC after its CQ was drained: receives and transmit chunks queued for the window,
   a split write's refused post, control slots to post again. */
EFAX_PRIVATE EFAX__NOINLINE void efax__nic_work(efax_ctx *ctx, efax__nic *n) {
    int s;
    if (n->rxp_head) efax__post_rx(ctx, n);
    if (n->pend_head || n->retry) efax__post_nic(ctx, n); /* retry: a split write's refused post */
    if (n->ctrl_posted < n->nctrl)
        for (s = 0; s < n->nctrl; s++)
            if (n->ctrl_ops[s].kind == 0 && efax__post_ctrl(ctx, n, s)) break;
    n->work = n->rxp_head || n->pend_head || n->retry || n->ctrl_posted < n->nctrl;
}

/* efax_progress's body, inline in the waits: a wait's polls run in its own frame (one set of
   saved registers per wait, not per poll, and the completion's handling inline). */
/* What efax_progress looks at besides the CQs, on the calls ctx->tick counts down to: the sticky
   error (efax__set_sticky sets the tick to 1, so that the next call returns it, and so does every
   call after it), and every 1024th call the EQs: an EQ error ends the endpoint, so it is seen
   within microseconds to a few milliseconds either way, and on tcp with libfabric 2.x one
   fi_eq_read drives the connection manager (a syscall), as costly as the CQ poll itself. One
   decrement and branch per call for both. Returns 0 or the sticky error. */
EFAX_PRIVATE EFAX__COLD int efax__progress_tick(efax_ctx *ctx) {
    ctx->tick = 1024;
    if (!ctx->sticky_error) efax__eq_all(ctx);
    if (ctx->sticky_error) ctx->tick = 1;
    return ctx->sticky_error;
}

EFAX__HOT_INLINE int efax__progress(efax_ctx *ctx) {
    efax__nic *n, *end;
    int total = 0, rc;
    if (EFAX__UNLIKELY(--ctx->tick == 0) && (rc = efax__progress_tick(ctx))) return rc;
    for (n = ctx->nic, end = ctx->nic_end; n < end; n++) {
        if ((rc = efax__drain(ctx, n)) < 0) return rc;
        total += rc;
        if (n->work) efax__nic_work(ctx, n);
    }
    return total;
}

/* efax__progress for a context of one NIC, as most ranks are (one per NIC, or one NIC for all):
   without the walk over the NICs, whose bounds a wait's loop kept in registers it then had to spill. */
EFAX__HOT_INLINE int efax__progress_one(efax_ctx *ctx, efax__nic *n) {
    int rc;
    if (EFAX__UNLIKELY(--ctx->tick == 0) && (rc = efax__progress_tick(ctx))) return rc;
    if ((rc = efax__drain(ctx, n)) >= 0 && n->work) efax__nic_work(ctx, n);
    return rc;
}

EFAX_API int efax_progress(efax_ctx *ctx) { return efax__progress(ctx); }

/* The checks every post and wait makes: inline, one test each; what fails them goes to the cold
   functions below, which name the problem. */
EFAX_PRIVATE EFAX__COLD int efax__bad_peer(efax_ctx *ctx, int peer, int nic);
EFAX_PRIVATE EFAX__COLD int efax__bad_local(efax_ctx *ctx, const efax_mr *mr, uint64_t off, uint64_t len,
                                            const char *what);

static inline int efax__check_peer(efax_ctx *ctx, int peer, int nic) {
    if (EFAX__LIKELY(ctx->connected && (unsigned)peer < (unsigned)ctx->size && ctx->peer_on[peer] &&
                     (unsigned)nic < (unsigned)ctx->nnic))
        return 0;
    return efax__bad_peer(ctx, peer, nic);
}

static inline int efax__check_local(efax_ctx *ctx, const efax_mr *mr, uint64_t off, uint64_t len,
                                    const char *what) {
    if (EFAX__LIKELY(mr && mr->ctx == ctx && off <= mr->len && len <= mr->len - off)) return 0;
    return efax__bad_local(ctx, mr, off, len, what);
}

EFAX_PRIVATE int efax__bad_peer(efax_ctx *ctx, int peer, int nic) {
    if (!ctx->connected) {
        efax_log(ctx, 0, "no peers yet: call efax_ctx_connect first");
        return -FI_EOPBADSTATE;
    }
    if (peer < 0 || peer >= ctx->size) {
        efax_log(ctx, 0, "peer rank %d is outside the job (0..%d)", peer, ctx->size - 1);
        return -FI_EINVAL;
    }
    if (!ctx->peer_on[peer]) {
        efax_log(ctx, 0, "%d is no peer of this context now (removed, or never added: efax_ctx_peer_add)",
                 peer);
        return -FI_ECONNABORTED;
    }
    if (nic < 0 || nic >= ctx->nnic) {
        efax_log(ctx, 0, "NIC index %d: this context has %d NIC(s)", nic, ctx->nnic);
        return -FI_EINVAL;
    }
    return 0;
}

EFAX_PRIVATE int efax__bad_local(efax_ctx *ctx, const efax_mr *mr, uint64_t off, uint64_t len,
                                 const char *what) {
    if (!mr || mr->ctx != ctx) {
        efax_log(ctx, 0, "%s: the memory region is not registered with this context", what);
        return -FI_EINVAL;
    }
    if (off > mr->len || len > mr->len - off) {
        efax_log(ctx, 0, "%s: bytes [%llu, %llu) fall outside the registered region of %zu bytes", what,
                 (unsigned long long)off, (unsigned long long)(off + len), mr->len);
        return -EFAX_E_BOUNDS;
    }
    return 0;
}

/* A one-segment transfer (send or receive): every field but the unused segments is set (any
   memory will do), not the whole segment table (the small-message path stays short). */
EFAX_PRIVATE void efax__xfer_one(efax_xfer *x, int op, int peer, const efax_mr *mr, uint64_t off,
                                 uint64_t len, int nic) {
    x->op = op;
    x->peer = peer;
    x->status = 0;
    x->done = false;
    x->has_imm = false;
    x->imm = 0;
    x->lmr = mr;
    x->loff = off;
    x->rmr = NULL;
    x->roff = 0;
    x->len = len;
    x->chunk = len ? len : 1;
    x->nseg = 1;
    x->pending = 0;
    x->unposted = 1;
    x->chunks = 1;
    x->rx_len = 0;
    x->rx_data = 0;
    x->rx_has_data = false;
    x->ready = NULL;
    x->ready_user = NULL;
    x->cell_seq = false;
    x->on_done = NULL;
    x->done_user = NULL;
    x->seg[0].next = NULL;
    x->seg[0].x = x;
    x->seg[0].off = 0;
    x->seg[0].len = len;
    x->seg[0].posted = 0;
    x->seg[0].completed = 0;
    x->seg[0].nic = nic;
}

/* A staged source's bytes copied out to its staging buffer before a send (efax_mr_desc.stage). */
EFAX_PRIVATE EFAX__COLD int efax__send_stage(efax_ctx *ctx, const efax_send_desc *s) {
    int rc = s->src->stage->out_sync(s->src->stage_user, s->src_off, s->size);
    if (rc)
        efax_log(ctx, 0, "send to rank %d: copying %llu bytes out to the staging buffer failed: %s", s->to,
                 (unsigned long long)s->size, efax_strerror(rc));
    return rc;
}

/* A send through the NIC's queue (efax__post_nic), which keeps the order of what waits there. */
EFAX_PRIVATE EFAX__NOINLINE int efax__send_queued(efax_ctx *ctx, efax_xfer *x, const efax_send_desc *s) {
    efax__nic *n = &ctx->nic[s->nic];
    if (EFAX__UNLIKELY(s->size > ctx->caps.max_send)) { /* efa-direct: the MTU; efa RDM segments */
        efax_log(ctx, 0,
                 "send of %llu bytes to rank %d: NIC %s carries messages of at most %llu bytes "
                 "(FI_OPT_MAX_MSG_SIZE%s); send less at once, or write",
                 (unsigned long long)s->size, s->to, n->info.name, (unsigned long long)ctx->caps.max_send,
                 ctx->caps.direct ? ": efa-direct's is the device's MTU" : "");
        return -FI_EMSGSIZE;
    }
    efax__xfer_one(x, EFAX_OP_SEND, s->to, s->src, s->src_off, s->size, s->nic);
    x->has_imm = s->has_imm;
    x->imm = s->imm;
    x->on_done = s->on_done;
    x->done_user = s->done_user;
    efax__post_or_queue(ctx, n, &x->seg[0]);
    return 0;
}

EFAX__API_INLINE int efax_send(efax_ctx *ctx, efax_xfer *x, const efax_send_desc *s) {
    const efax_mr *mr = s->src;
    uint64_t off = s->src_off, len = s->size;
    int peer = s->to, nic = s->nic, rc;
    efax__nic *n;
    if ((rc = efax__check_peer(ctx, peer, nic)) || (rc = efax__check_local(ctx, mr, off, len, "send")))
        return rc;
    n = &ctx->nic[nic];
    /* A small send with nothing queued ahead of it on this NIC goes out at once by inject,
       without the queue: a ping-pong's answer is sent on its critical path, and the queue's
       general loop costs as many instructions as the provider's inject itself. It is done at
       once, so x gets what a caller or a wait reads of a finished transfer (status, done, chunks;
       the kind and region efax_wait_all looks at), set before the inject so that few values live
       across the call: a refused inject takes the queue, which sets x anew and keeps the order. */
    if (!n->pend_head && !n->retry && len <= n->info.inject_size && mr->direct) {
        x->op = EFAX_OP_SEND;
        x->peer = peer;
        x->status = 0;
        x->done = true;
        x->lmr = mr;
        x->len = len;
        x->chunks = 1;
        if (EFAX__LIKELY(efax__inject_send(n, (const uint8_t *)mr->ptr + off, len, s->has_imm, s->imm,
                                           n->route[peer].fa) == 0)) {
            n->stats.tx_bytes += s->size;
            n->stats.tx_ops++;
            if (s->on_done) s->on_done(s->done_user, x);
            return 0;
        }
    }
    if (EFAX__UNLIKELY(mr->stage != NULL) && (rc = efax__send_stage(ctx, s))) return rc;
    return efax__send_queued(ctx, x, s);
}

/* A receive through the NIC's queue of receives (efax__post_rx), which keeps their order. */
EFAX_PRIVATE EFAX__NOINLINE int efax__recv_queued(efax_ctx *ctx, efax_xfer *x, int nic) {
    efax__nic *n = &ctx->nic[nic];
    x->pending = 0;
    x->unposted = 1;
    x->seg[0].x = x;
    x->seg[0].len = x->len;
    efax__seg_push(&n->rxp_head, &n->rxp_tail, &x->seg[0]);
    n->work = true;
    efax__post_rx(ctx, n);
    return 0;
}

/* A receive the provider refused outright: the transfer fails (its wait says so). */
EFAX_PRIVATE EFAX__COLD int efax__recv_failed(efax_ctx *ctx, efax__nic *n, efax_xfer *x, int rc) {
    efax_log(ctx, 0, "posting a receive of %llu bytes on NIC %s failed: %s (%d)", (unsigned long long)x->len,
             n->info.name, fi_strerror(-rc), rc);
    x->pending = 0;
    x->unposted = 0;
    efax__rx_none(x);
    efax__fail_xfer(ctx, x, rc);
    efax__xfer_check_done(x);
    return 0;
}

EFAX__API_INLINE int efax_recv(efax_ctx *ctx, efax_xfer *x, int nic, const efax_mr *mr, uint64_t off,
                               uint64_t len) {
    efax__nic *n;
    efax_op *op;
    int rc;
    if (EFAX__UNLIKELY((unsigned)nic >= (unsigned)ctx->nnic)) {
        efax_log(ctx, 0, "receive: NIC index %d, this context has %d", nic, ctx->nnic);
        return -FI_EINVAL;
    }
    if ((rc = efax__check_local(ctx, mr, off, len, "receive"))) return rc;
    n = &ctx->nic[nic];
    /* what a receive's completion, a wait's timeout message and the caller read (the segment's
       list fields only where it queues; rx_* where it ends), as posted at once (the queue's path
       and a refusal set pending and unposted back) */
    x->op = EFAX_OP_RECV;
    x->peer = -1;
    x->status = 0;
    x->done = false;
    x->lmr = mr;
    x->loff = off;
    x->len = len;
    x->pending = 1;
    x->unposted = 0;
    x->chunks = 1;
    x->on_done = NULL;
    x->seg[0].nic = nic;
    /* nothing queued ahead of it and room in the window: posted at once, without the queue */
    if (!n->rxp_head && n->rx_inflight < n->window && (op = n->free_ops)) {
        rc = efax__recv_post(n, x, op, nic);
        if (EFAX__LIKELY(rc == 0)) {
            n->free_ops = op->next;
            n->rx_inflight++;
            return 0;
        }
        if (rc != -FI_EAGAIN) return efax__recv_failed(ctx, n, x, rc);
    }
    return efax__recv_queued(ctx, x, nic);
}

/* EFAX_CHUNK_POLICY for write w (w->chunk 0), as its writer (writer) or its target sees it: both
   know the target's region (the writer from its exchanged flags) and the two ranks' hosts. */
static inline uint64_t efax__chunk_auto(const efax_ctx *ctx, const efax_write_desc *w, bool writer) {
    int peer = writer ? w->to : w->from;
    bool staged = writer ? (w->dst->remote[peer].flags & EFAX_RMR_STAGED) != 0 : w->dst->stage != NULL;
    /* On shm a write is one copy however it is cut (the target's process_vm_readv, or CUDA IPC for
       device memory; on 2.x efax itself splits a large one between the writer's copy and the
       target's, efax__post_split), so whole messages: each chunk only adds a command, a response
       and a completion, and a device copy's fixed cost that small posts cannot hide (journal:
       shm's whole writes). A staged region is taken cell by cell (efax_stage_unit: an eighth of
       the write, at least EFAX_STAGE_MIN_CELL or a chunk), its source copied out a post at a
       time: posts small enough for the copies to run beside the transfer, each costing a split's
       three operations (both halves and the marker), so a middle size (journal: staged device
       memory's chunk). */
    if (ctx->caps.whole_writes) return staged ? EFAX_CHUNK_SHM_STAGED : EFAX_MAX_CHUNK;
    /* tcp between two hosts moves writes of 64-128 KiB several times faster than larger ones; on one
       host whole posts up to 1 MiB stay ahead (journal: tcp's chunk between hosts) */
    if (ctx->caps.chunk_between_hosts && ctx->peer_far[peer]) return EFAX_CHUNK_TCP_FAR;
    return EFAX_CHUNK_DEFAULT;
}

/* The chunk write w uses (efax_write_chunk), as its writer or its target: the one place a zero
   chunk is resolved, for the fast paths and the planned ones alike. */
static inline uint64_t efax__chunk_of(const efax_ctx *ctx, const efax_write_desc *w, bool writer) {
    return efax_chunk_clamp(w->chunk ? w->chunk : efax__chunk_auto(ctx, w, writer),
                            ctx->peer_max[writer ? w->to : w->from]);
}

/* The immediate data of write w: efax_imm_encode's fields, known to be in range (ranks and tags
   checked at init and by efax_write's fast path). */
static inline uint32_t efax__write_imm(const efax_ctx *ctx, const efax_write_desc *w) {
    return (uint32_t)ctx->rank << (EFAX_IMM_TAG_BITS + EFAX_IMM_SEQ_BITS) |
           (uint32_t)w->tag << EFAX_IMM_SEQ_BITS | (w->seq & ((1u << EFAX_IMM_SEQ_BITS) - 1));
}

/* What a write of desc w in x->nseg segments of at most `chunk` bytes a post, `chunks` posts in
   all, sets of x beside its segments. */
EFAX_PRIVATE void efax__write_fields(efax_xfer *x, const efax_write_desc *w, uint32_t imm, uint64_t chunk,
                                     uint32_t chunks) {
    x->op = EFAX_OP_WRITE;
    x->peer = w->to;
    x->status = 0;
    x->done = false;
    x->has_imm = true;
    x->imm = imm;
    x->ready = w->ready;
    x->ready_user = w->ready_user;
    x->on_done = w->on_done;
    x->done_user = w->done_user;
    x->lmr = w->src;
    x->loff = w->src_off;
    x->rmr = w->dst;
    x->roff = w->dst_off;
    x->len = w->size;
    x->chunk = chunk;
    x->pending = 0;
    x->unposted = (uint32_t)x->nseg;
    x->chunks = chunks;
}

EFAX_PRIVATE EFAX__NOINLINE int efax__write_planned(efax_ctx *ctx, efax_xfer *x, const efax_write_desc *desc,
                                                    uint32_t *chunks);

/* A write of host memory on one NIC, too large to inject, with nothing queued ahead of it there
   (efax_write checked its desc): in one chunk (and not one efax__post_nic splits), x is set as the
   general path sets it, in one segment, and posted at once or queued (efax__post_or_queue);
   otherwise it takes the general path. Skips the desc's copy and checks, the plan and the segment
   loop, a third of a small write's own instructions (docs/journal.md). */
EFAX_PRIVATE EFAX__NOINLINE int efax__write_now(efax_ctx *ctx, efax__nic *n, efax_xfer *x,
                                                const efax_write_desc *w, uint32_t *chunks) {
    efax_seg *s = &x->seg[0];
    uint32_t imm = efax__write_imm(ctx, w);
    uint64_t chunk = efax__chunk_of(ctx, w, true);
    if (w->size > chunk || (n->split_min && w->size >= n->split_min))
        return efax__write_planned(ctx, x, w, chunks);
    x->rx_len = 0;
    x->rx_data = 0;
    x->rx_has_data = false;
    x->cell_seq = false;
    x->nseg = 1;
    efax__write_fields(x, w, imm, chunk, 1);
    s->nic = w->nic;
    s->off = 0;
    s->len = w->size;
    s->x = x;
    s->posted = 0;
    s->completed = 0;
    efax__post_or_queue(ctx, n, s);
    if (chunks) *chunks = 1;
    return 0;
}

/* Starts the write of the segments efax_write planned into x->seg, as w (resolved by
   efax__write_desc) describes it: bytes [src_off + seg.off, +seg.len) of w->src go to
   w->dst->remote[w->to] at dst_off + seg.off through seg.nic, in posts of at most w->chunk bytes
   (a staged target's cells), each carrying imm; a staged source copies out in cells of unit
   bytes. Checks the whole range against both registered windows first. */
EFAX_PRIVATE int efax__write_segs(efax_ctx *ctx, efax_xfer *x, const efax_write_desc *w, uint64_t stage_unit,
                                  uint32_t imm) {
    const efax_mr *lmr = w->src, *rmr = w->dst;
    uint64_t len = w->size, chunks = 0, loff = w->src_off, roff = w->dst_off, chunk = w->chunk;
    int i, rc, nseg = x->nseg, peer = w->to;
    x->cell_seq = (rmr->remote[peer].flags & EFAX_RMR_STAGED) != 0; /* posts within its cells, indexed */
    x->cell = stage_unit;
    if (x->cell_seq) /* the sequence's bits beside the cell's (efax__stage_imm_seq) */
        imm = (imm & ~((1u << EFAX_IMM_SEQ_BITS) - 1)) | efax__stage_imm_seq(w->seq, 0);
    for (i = 0; i < nseg; i++) {
        const efax_seg *s = &x->seg[i];
        if (x->cell_seq)
            chunks += efax__stage_pieces(s->off, s->len, stage_unit, chunk, NULL);
        else if (!s->len)
            chunks++;
        else
            chunks += (s->len + chunk - 1) / chunk;
    }
    if ((rc = efax__check_local(ctx, lmr, loff, len, "write source"))) return rc;
    {
        const efax_rmr *rm = &rmr->remote[peer];
        if (roff > rm->len || len > rm->len - roff) {
            efax_log(ctx, 0,
                     "write to rank %d (%s): bytes [%llu, %llu) fall outside its registered "
                     "window of %llu bytes",
                     peer, efax__host(ctx, peer), (unsigned long long)roff, (unsigned long long)(roff + len),
                     (unsigned long long)rm->len);
            return -EFAX_E_BOUNDS;
        }
    }
    efax__write_fields(x, w, imm, chunk, (uint32_t)chunks);
    if (lmr->stage) { /* a staged source: copied out a post's worth at a time (at most 256 pieces), so the
                         first post leaves once its own bytes are out, and the copies run ahead of the
                         posts; each post waits only for the pieces it carries */
        uint64_t piece = chunk < len ? chunk : len;
        int src;
        if (piece && (len + piece - 1) / piece > 256) piece = (len + 255) / 256;
        src = lmr->stage->out_begin(lmr->stage_user, loff, len, piece ? piece : 1);
        if (src) {
            efax_log(ctx, 0, "write to rank %d: copying %llu bytes out to the staging buffer failed: %s",
                     peer, (unsigned long long)len, efax_strerror(src));
            x->done = true;
            x->status = src;
            return src;
        }
    }
    for (i = 0; i < nseg; i++) {
        efax_seg *s = &x->seg[i];
        s->x = x;
        s->posted = 0;
        s->completed = 0; /* an empty segment still goes out: one 0-byte chunk carrying the immediate data */
        if (nseg == 1 && !ctx->batching) break;
        efax__seg_push(&ctx->nic[s->nic].pend_head, &ctx->nic[s->nic].pend_tail, s);
        ctx->nic[s->nic].work = true;
    }
    if (ctx->batching) /* efax_write_batch posts the batch's chunks together */
        return 0;
    if (nseg == 1) /* one segment (one NIC: most writes) may go out at once */
        efax__post_or_queue(ctx, &ctx->nic[x->seg[0].nic], &x->seg[0]);
    else
        for (i = 0; i < nseg; i++) efax__post_nic(ctx, &ctx->nic[x->seg[i].nic]);
    return 0;
}

EFAX_API bool efax_xfer_done(const efax_xfer *x) { return x->done; }

/* Waits spin on the CQs; after a stretch with nothing completed they yield the core, so
   ranks that outnumber cores (CI, oversubscribed tests) still make progress promptly. */
EFAX_PRIVATE void efax__idle(int got, unsigned *idle) {
    if (got > 0)
        *idle = 0;
    else if (++*idle >= 512) {
        *idle = 0;
        sched_yield();
    }
}

/* The waits' clock: a wait reads it only once it has spun 16 empty rounds, on the 16th setting
   its deadline, after that checking it every 16th round. A wait that its first progress calls
   end (a ping-pong's, or one for an injected send that is done at once) reads no clock: under a
   hypervisor clock_gettime (kvm-clock) is a fair part of a shm round trip, which goes through
   three waits. The timeout then counts from the 16th round, microseconds late.
   Returns true once timeout_ms have passed since then. */
EFAX_PRIVATE bool efax__expired(uint64_t *deadline, unsigned *spins, int timeout_ms) {
    uint64_t now;
    if ((++*spins & 15) != 0) return false;
    now = efax_now_ns();
    if (!*deadline) {
        *deadline = efax_deadline_ns(timeout_ms);
        return false;
    }
    return now > *deadline;
}

/* The waits' clock and yield in one (efax_wait_all, efax_wait_imm): between polls a wait counts
   them and ORs what each found into `busy`; every 16th poll it calls this, which yields the core
   after 32 such rounds in a row in which nothing was found (512 polls, as efax__idle), and reads
   the clock: the first time it sets the deadline (the timeout counts from the 16th poll, as
   efax__expired's), after that it compares. Per poll the wait pays an OR, an increment and a
   branch; a wait that its first polls end reads no clock, nor sets up w (the 16th poll's tick
   does: spins == 16). timeout_ms < 0: the context's. Returns true once the timeout has passed. */
typedef struct efax__spin {
    uint64_t deadline;
    unsigned idle;
} efax__spin;

EFAX_PRIVATE EFAX__NOINLINE bool efax__spin_tick(const efax_ctx *ctx, efax__spin *w, unsigned spins,
                                                 unsigned busy, int timeout_ms) {
    uint64_t now;
    if (spins == 16) {
        w->deadline = 0;
        w->idle = 0;
    }
    if (busy)
        w->idle = 0;
    else if (++w->idle >= 32) {
        w->idle = 0;
        sched_yield();
    }
    now = efax_now_ns();
    if (!w->deadline) {
        w->deadline = efax_deadline_ns(efax__wait_ms(ctx, timeout_ms));
        return false;
    }
    return now > w->deadline;
}

/* The deadline of a wait that ended before efax__expired set one: timeout_ms from now. */
EFAX_PRIVATE uint64_t efax__deadline(uint64_t deadline, int timeout_ms) {
    return deadline ? deadline : efax_deadline_ns(timeout_ms);
}

/* For timeout messages: this rank's NICs that still have operations in flight or waiting, e.g.
   "; still in flight here: NIC r1 (4 posted, 12 waiting)" — a dead link shows as the NIC whose
   operations never complete while the others drained. Empty when nothing is outstanding. */
EFAX_PRIVATE void efax__busy_nics(const efax_ctx *ctx, char *out, size_t len) {
    size_t u = 0;
    int k;
    out[0] = 0;
    for (k = 0; k < ctx->nnic && u < len; k++) {
        const efax__nic *n = &ctx->nic[k];
        unsigned waiting = 0;
        const efax_seg *sg;
        for (sg = n->pend_head; sg; sg = sg->next) waiting++;
        if (!n->inflight && !waiting) continue;
        u += (size_t)snprintf(out + u, len - u, "%s NIC %s (%d posted, %u waiting)",
                              u ? "," : "; still in flight here:", n->info.name, n->inflight, waiting);
    }
}

EFAX_PRIVATE int efax__timeout_msg(efax_ctx *ctx, const efax_xfer *x, int ms) {
    if (x->op == EFAX_OP_RECV)
        efax_log(ctx, 0,
                 "timed out after %d ms waiting for a receive of up to %llu bytes on NIC %s: "
                 "no peer sent it (died, never started, or slower than the timeout: raise "
                 "EFAX_TIMEOUT_MS or --timeout)",
                 ms, (unsigned long long)x->len, ctx->nic[x->seg[0].nic].info.name);
    else {
        char nics[256];
        size_t u = 0;
        int i;
        nics[0] = 0;
        for (i = 0; i < x->nseg && u < sizeof nics; i++) /* the NICs whose pieces did not finish */
            if (x->seg[i].completed < x->seg[i].len || (!x->seg[i].len && x->pending))
                u += (size_t)snprintf(nics + u, sizeof nics - u, "%s%s (%llu of %llu bytes)", u ? ", " : "",
                                      ctx->nic[x->seg[i].nic].info.name,
                                      (unsigned long long)x->seg[i].completed,
                                      (unsigned long long)x->seg[i].len);
        efax_log(ctx, 0,
                 "timed out after %d ms: %s of %llu bytes to rank %d (%s) stalled on NIC %s; %u chunk(s) "
                 "in flight. The peer died or stopped progressing, that NIC's link is down, or the "
                 "transfer needs more than EFAX_TIMEOUT_MS / --timeout",
                 ms, efax__opname(x->op), (unsigned long long)x->len, x->peer, efax__host(ctx, x->peer),
                 nics[0] ? nics : "?", x->pending);
    }
    return -FI_ETIMEDOUT;
}

EFAX_PRIVATE EFAX__COLD int efax__sticky(efax_ctx *ctx, const efax_xfer *x);
EFAX_PRIVATE EFAX__NOINLINE int efax__settle_recvs(efax_xfer **xs, int n, uint64_t deadline, int timeout_ms);

/* efax_wait's end when the transfer failed, the context holds an error, or a receive may need
   settling: efax_wait_all's order of answers. */
EFAX_PRIVATE EFAX__NOINLINE int efax__wait_end(efax_ctx *ctx, efax_xfer *x, uint64_t deadline,
                                               int timeout_ms) {
    if (x->status) return x->status;
    if (ctx->sticky_error) return efax__sticky(ctx, x);
    if (!ctx->settling) return 0;
    return efax__settle_recvs(&x, 1, deadline, efax__wait_ms(ctx, timeout_ms));
}

/* The waits' polls for one transfer, inline in each wait: until x is done (0), the context fails or
   the timeout passes (the error, named). *spins, *busy and *w carry over from transfer to transfer
   of one wait (efax__spin_tick's). */
EFAX__HOT_INLINE int efax__poll_done(efax_ctx *ctx, efax_xfer *x, efax__spin *w, unsigned *spins,
                                     unsigned *busy, int timeout_ms) {
    int rc;
    while (!x->done) {
        if ((rc = efax__progress(ctx)) < 0) return rc == ctx->sticky_error ? efax__sticky(ctx, x) : rc;
        *busy |= (unsigned)rc;
        if ((++*spins & 15) == 0) {
            if (efax__spin_tick(ctx, w, *spins, *busy, timeout_ms))
                return efax__timeout_msg(ctx, x, efax__wait_ms(ctx, timeout_ms));
            *busy = 0;
        }
    }
    return 0;
}

/* efax_wait's loop: efax_wait_all's for one transfer, without the array's bookkeeping, which a
   ping-pong's answer would pay every round trip (a wait's frame holds what its polls keep). */
EFAX_PRIVATE EFAX__NOINLINE int efax__wait_one(efax_ctx *ctx, efax_xfer *x, int timeout_ms) {
    efax__spin w; /* set by the first tick */
    unsigned spins = 0, busy = 0;
    int rc = efax__poll_done(ctx, x, &w, &spins, &busy, timeout_ms);
    if (rc) return rc;
    if (EFAX__LIKELY(!x->status && !ctx->wait_slow)) return 0;
    return efax__wait_end(ctx, x, spins >= 16 ? w.deadline : 0, timeout_ms);
}

/* efax__wait_one on a context of one NIC, for a transfer not done yet: the same polls without the
   walk over the NICs, which takes two more registers than a call's loop can keep (the transfer
   would spill to the stack every round trip). Its body is efax__poll_done's written out: one inline
   step shared by both loops, through pointers to the counters, costs instructions a round trip
   that tests/instr.sh counts (docs/journal.md). */
EFAX_PRIVATE EFAX__NOINLINE int efax__wait_nic(efax_ctx *ctx, efax_xfer *x, int timeout_ms) {
    efax__nic *n = ctx->nic;
    efax__spin w; /* set by the first tick */
    unsigned spins = 0, busy = 0;
    int rc;
    do {
        if ((rc = efax__progress_one(ctx, n)) < 0) return rc == ctx->sticky_error ? efax__sticky(ctx, x) : rc;
        busy |= (unsigned)rc;
        if ((++spins & 15) == 0) {
            if (efax__spin_tick(ctx, &w, spins, busy, timeout_ms))
                return efax__timeout_msg(ctx, x, efax__wait_ms(ctx, timeout_ms));
            busy = 0;
        }
    } while (!x->done);
    if (EFAX__LIKELY(!x->status && !ctx->wait_slow)) return 0;
    return efax__wait_end(ctx, x, spins >= 16 ? w.deadline : 0, timeout_ms);
}

EFAX__API_INLINE int efax_wait(efax_ctx *ctx, efax_xfer *x, int timeout_ms) {
    /* a transfer already done (an inject is, at once): its answer without a call */
    if (EFAX__LIKELY(x->done && !x->status && !ctx->wait_slow)) return 0;
    if (x->done) return efax__wait_end(ctx, x, 0, timeout_ms);
    return ctx->nnic == 1 ? efax__wait_nic(ctx, x, timeout_ms) : efax__wait_one(ctx, x, timeout_ms);
}

/* efax_wait_all's last step where receives may land in regions with a settle hook: what landed in
   device memory is in place once the region settled (once per region). */
EFAX_PRIVATE EFAX__NOINLINE int efax__settle_recvs(efax_xfer **xs, int n, uint64_t deadline, int timeout_ms) {
    int i, rc;
    for (i = 0; i < n; i++) {
        const efax_mr *m = xs[i] ? xs[i]->lmr : NULL;
        int j;
        if (!m || !m->settle || xs[i]->op != EFAX_OP_RECV) continue;
        for (j = 0; j < i; j++)
            if (xs[j] && xs[j]->op == EFAX_OP_RECV && xs[j]->lmr == m) break;
        deadline = efax__deadline(deadline, timeout_ms);
        if (j == i && (rc = m->settle(m->settle_user, efax_remaining_ms(deadline) + 1))) return rc;
    }
    return 0;
}

/* A wait ended by the context's sticky error (an EQ error, or an injected operation that failed
   after it was counted done): the error was described where it surfaced; this names the wait. */
EFAX_PRIVATE EFAX__COLD int efax__sticky(efax_ctx *ctx, const efax_xfer *x) {
    if (x && x->op == EFAX_OP_RECV)
        efax_log(
            ctx, 0,
            "the wait for a receive of up to %llu bytes on NIC %s ends on this context's earlier error: %s",
            (unsigned long long)x->len, ctx->nic[x->seg[0].nic].info.name, fi_strerror(-ctx->sticky_error));
    else if (x)
        efax_log(ctx, 0,
                 "the wait for a %s of %llu bytes to rank %d (%s) ends on this context's earlier error: %s",
                 efax__opname(x->op), (unsigned long long)x->len, x->peer, efax__host(ctx, x->peer),
                 fi_strerror(-ctx->sticky_error));
    return ctx->sticky_error;
}

EFAX_API int efax_wait_all(efax_ctx *ctx, efax_xfer **xs, int n, int timeout_ms) {
    efax__spin w; /* set by the first tick */
    unsigned spins = 0, busy = 0;
    int rc, i, status = 0;
    for (i = 0; i < n; i++) { /* in order: the first failure is the answer */
        efax_xfer *x = xs[i];
        if (!x) continue;
        if ((rc = efax__poll_done(ctx, x, &w, &spins, &busy, timeout_ms))) return rc;
        if (EFAX__UNLIKELY(x->status) && !status) status = x->status;
    }
    if (status) return status;
    /* done, but the context lost an injected operation (or its endpoint) since: this transfer may be
       what was lost */
    if (EFAX__UNLIKELY(ctx->sticky_error)) return efax__sticky(ctx, n ? xs[0] : NULL);
    if (EFAX__LIKELY(!ctx->settling)) return 0;
    return efax__settle_recvs(xs, n, spins >= 16 ? w.deadline : 0, efax__wait_ms(ctx, timeout_ms));
}

/* A notification without tags (caps.direct): a 0-byte inject write carrying imm into the peer NIC's
   control region, which efa-direct takes (efa_rma.c efa_rma_inject_writedata: 0 bytes only) and
   the peer counts as any write's immediate data, consuming no receive (unsolicited write recv). */
EFAX_PRIVATE EFAX__NOINLINE int efax__notify_write(efax_ctx *ctx, efax__nic *n, int peer, uint32_t imm) {
    const uint64_t *c = &ctx->peer_ctrl[((size_t)peer * EFAX_MAX_NICS + (size_t)n->route[peer].rnic) * 2];
    return (int)efax__fi_inject_writedata(n, NULL, 0, imm, n->route[peer].fa, c[1], c[0]);
}

EFAX_API int efax_notify_nic(efax_ctx *ctx, int peer, int nic, int tag, uint32_t seq) {
    uint32_t imm;
    uint8_t msg[8];
    uint64_t deadline = 0;
    unsigned spins = 0, idle = 0;
    int rc;
    efax__nic *n;
    if ((rc = efax__check_peer(ctx, peer, nic))) return rc;
    if (EFAX__UNLIKELY(ctx->sticky_error)) {
        efax_log(ctx, 0, "notify to rank %d (%s), tag %d: this context's earlier error stops it: %s", peer,
                 efax__host(ctx, peer), tag, fi_strerror(-ctx->sticky_error));
        return ctx->sticky_error;
    }
    n = &ctx->nic[nic];
    if (tag < 0 || tag >= ctx->ntags || efax_imm_encode(ctx->rank, tag, seq, &imm)) {
        efax_log(ctx, 0, "notify: tag %d outside 0..%d", tag, ctx->ntags - 1);
        return -FI_EINVAL;
    }
    memcpy(msg, &imm, 4);
    memset(msg + 4, 0, 4);
    for (;;) {
        rc = ctx->caps.direct
                 ? efax__notify_write(ctx, n, peer, imm)
                 : (int)efax__fi_tinjectdata(n, msg, sizeof msg, imm, n->route[peer].fa, EFAX__CTRL_TAG);
        if (rc == 0) return 0;
        if (rc != -FI_EAGAIN) {
            efax_log(ctx, 0, "notify to rank %d (%s) on NIC %s failed: %s (%d)", peer, efax__host(ctx, peer),
                     n->info.name, fi_strerror(-rc), rc);
            return rc;
        }
        n->stats.eagain++;
        if ((rc = efax_progress(ctx)) < 0) {
            if (rc == ctx->sticky_error)
                efax_log(ctx, 0, "notify to rank %d (%s), tag %d: ended by this context's earlier error: %s",
                         peer, efax__host(ctx, peer), tag, fi_strerror(-rc));
            return rc;
        }
        efax__idle(rc, &idle);
        if (efax__expired(&deadline, &spins, ctx->timeout_ms)) {
            efax_log(ctx, 0,
                     "timed out after %d ms sending a notification to rank %d (%s): the provider "
                     "kept refusing (-FI_EAGAIN)",
                     ctx->timeout_ms, peer, efax__host(ctx, peer));
            return -FI_ETIMEDOUT;
        }
    }
}

/* efax_ctx_peer_remove is here, beside what it ends: the queued transfers of the operations. */
EFAX_API int efax_ctx_peer_remove(efax_ctx *ctx, int peer) {
    int i;
    if (!efax_ctx_has_peer(ctx, peer) || peer == ctx->rank) {
        efax_log(ctx, 0, "efax_ctx_peer_remove: %d is %s", peer,
                 peer == ctx->rank ? "this process" : "no peer of this context");
        return -FI_EINVAL;
    }
    for (i = 0; i < ctx->nnic; i++) { /* its transfers not yet posted end, named */
        efax__nic *n = &ctx->nic[i];
        efax_seg *s;
        for (s = n->pend_head; s; s = s->next)
            if (s->x->peer == peer && !s->x->status) {
                efax_log(ctx, 0, "%s of %llu bytes to peer %d (%s): the peer was removed before it went out",
                         efax__opname(s->x->op), (unsigned long long)s->x->len, peer, ctx->peer_host[peer]);
                efax__fail_xfer(ctx, s->x, -FI_ECONNABORTED);
            }
        n->work = true;
    }
    efax__peer_av_remove(ctx, peer);
    efax__peer_counts_reset(ctx, peer);
    ctx->peer_on[peer] = 0;
    ctx->peer_nnic[peer] = 0;
    return 0;
}

EFAX_API int efax_notify(efax_ctx *ctx, int peer, int tag, uint32_t seq) {
    return efax_notify_nic(ctx, peer, 0, tag, seq);
}

EFAX_API int efax_ctx_warmup(efax_ctx *ctx) {
    int p, k, rc;
    for (p = 0; p < ctx->size; p++)
        for (k = 0; p != ctx->rank && k < ctx->nnic; k++)
            if ((rc = efax_notify_nic(ctx, p, k, EFAX_TAG_INTERNAL, 0))) return rc;
    for (p = 0; p < ctx->size; p++)
        if (p != ctx->rank &&
            (rc = efax_wait_imm(ctx, p, EFAX_TAG_INTERNAL, 0, (uint32_t)ctx->peer_nnic[p], -1)))
            return rc;
    return 0;
}

EFAX_API int efax_ctx_imm_hook(efax_ctx *ctx, int tag, efax_imm_fn fn, void *user) {
    if (!ctx->hooks || tag <= EFAX_TAG_INTERNAL || tag >= ctx->ntags) {
        efax_log(ctx, 0, "imm hook: tag %d outside 1..%d (or efax_ctx_connect not called)", tag,
                 ctx->ntags - 1);
        return -FI_EINVAL;
    }
    ctx->hooks[tag].fn = fn;
    ctx->hooks[tag].user = user;
    return 0;
}

EFAX_API uint32_t efax_imm_count(const efax_ctx *ctx, int peer, int tag, uint32_t seq) {
    const efax__imm_slot *sl;
    if (!ctx->imm || peer < 0 || peer >= ctx->size || tag < 0 || tag >= ctx->ntags) return 0;
    sl = &ctx->imm[(size_t)peer * (size_t)ctx->ntags + (size_t)tag];
    seq &= (1u << EFAX_IMM_SEQ_BITS) - 1;
    return efax__imm_in(sl, seq) ? sl->count[seq % EFAX_IMM_WINDOW] : 0;
}

/* Consumes count arrivals of sequence seq (in sl's window, holding at least that many). When its
   entry is left empty, its per-NIC counts start again from zero (a sequence consumed in parts
   keeps them). */
static inline void efax__imm_take(efax_ctx *ctx, efax__imm_slot *sl, size_t slot, uint32_t seq,
                                  uint32_t count) {
    uint32_t idx = seq % EFAX_IMM_WINDOW;
    sl->count[idx] -= count;
    sl->live -= count;
    sl->taken |= 1u << idx;
    if (ctx->nnic > 1 && !sl->count[idx])
        memset(&ctx->imm_nic[(slot * EFAX_IMM_WINDOW + idx) * (size_t)ctx->nnic], 0,
               (size_t)ctx->nnic * sizeof(uint32_t));
}

/* efax_wait_imm; `expect` (arrivals due on each local NIC, or NULL) lets a timeout name the
   NICs that fell short — a dead rail — rather than only count what arrived. */
EFAX_PRIVATE int efax__wait_imm(efax_ctx *ctx, int peer, int tag, uint32_t seq, uint32_t count,
                                int timeout_ms, const uint32_t *expect) {
    efax__imm_slot *sl;
    efax__spin w; /* set by the first tick */
    unsigned spins = 0, found = 0;
    uint32_t idx, at;
    size_t slot;
    int rc;
    if ((rc = efax__check_peer(ctx, peer, 0))) return rc;
    if (tag < 0 || tag >= ctx->ntags) {
        efax_log(ctx, 0, "wait_imm: tag %d outside 0..%d", tag, ctx->ntags - 1);
        return -FI_EINVAL;
    }
    seq &= (1u << EFAX_IMM_SEQ_BITS) - 1;
    idx = seq % EFAX_IMM_WINDOW;
    slot = (size_t)peer * (size_t)ctx->ntags + (size_t)tag;
    sl = &ctx->imm[slot];
    if (sl->fault.err) return efax__seq_fault_take(ctx, &sl->fault, peer, tag, EFAX_IMM_WINDOW, "arrival");
    if (!efax__imm_in(sl, seq) && (rc = efax__imm_place(ctx, slot, seq, -1, &at)))
        return efax__seq_report(ctx, rc, peer, tag, seq, 0, at, EFAX_IMM_WINDOW, "wait");
    timeout_ms = efax__wait_ms(ctx, timeout_ms);
    sl->awaited = (int)seq + 1; /* the window keeps it while arrivals move it */
    for (;;) {
        if (EFAX__UNLIKELY(sl->fault.err)) {
            rc = efax__seq_fault_take(ctx, &sl->fault, peer, tag, EFAX_IMM_WINDOW, "arrival");
            break;
        }
        if (EFAX__UNLIKELY(ctx->sticky_error)) { /* an injected operation lost, or the endpoint */
            efax_log(
                ctx, 0,
                "the wait for %u arrival(s) from rank %d (%s), tag %d, sequence %u (%u arrived) ends on this "
                "context's earlier error: %s",
                count, peer, efax__host(ctx, peer), tag, seq, sl->count[idx],
                fi_strerror(-ctx->sticky_error));
            rc = ctx->sticky_error;
            break;
        }
        if (sl->count[idx] >= count) {
            efax__imm_take(ctx, sl, slot, seq, count);
            rc = 0;
            break;
        }
        if (ctx->last_cq_error) { /* an incoming write failed: say which wait it ended (names the peer) */
            rc = ctx->last_cq_error;
            ctx->last_cq_error = 0;
            efax_log(ctx, 0,
                     "waiting for %u arrival(s) from rank %d (%s), tag %d, sequence %u (%u arrived): an "
                     "incoming write failed (%s), and the provider does not say whose; one of this wait's "
                     "may never come",
                     count, peer, efax__host(ctx, peer), tag, seq, sl->count[idx], fi_strerror(-rc));
            break;
        }
        if ((rc = efax__progress(ctx)) < 0) {
            if (rc == ctx->sticky_error) continue; /* named above, at the top of the loop */
            break;
        }
        found |= (unsigned)rc;
        if ((++spins & 15) != 0) continue;
        if (!efax__spin_tick(ctx, &w, spins, found, timeout_ms)) {
            found = 0;
        } else {
            char busy[256], where[512] = "";
            const uint32_t *got = &ctx->imm_nic[(slot * EFAX_IMM_WINDOW + idx) * (size_t)ctx->nnic];
            size_t u = 0;
            int k;
            efax__busy_nics(ctx, busy, sizeof busy);
            for (k = 0; k < ctx->nnic && u < sizeof where;
                 k++) { /* what came on each NIC; which fell short */
                uint32_t on = ctx->nnic == 1 ? sl->count[idx] : got[k], due = expect ? expect[k] : 0;
                char of[24] = "";
                if (!on && !due) continue;
                if (due) snprintf(of, sizeof of, " of %u", due);
                u += (size_t)snprintf(where + u, sizeof where - u, "%s%u%s on NIC %s%s", u ? ", " : " (", on,
                                      of, ctx->nic[k].info.name,
                                      on < due ? (on ? ": short" : ": nothing arrived") : "");
            }
            if (u && u < sizeof where) snprintf(where + u, sizeof where - u, ")");
            efax_log(ctx, 0,
                     "timed out after %d ms waiting for %u arrival(s) from rank %d (%s), tag %d, "
                     "sequence %u: %u arrived%s; the peer died, never started, a link is down, or the "
                     "peer is slower than the timeout (raise EFAX_TIMEOUT_MS or --timeout)%s",
                     timeout_ms, count, peer, efax__host(ctx, peer), tag, seq, sl->count[idx], where, busy);
            rc = -FI_ETIMEDOUT;
            break;
        }
    }
    sl->awaited = 0;
    return rc;
}

EFAX_API int efax_wait_imm(efax_ctx *ctx, int peer, int tag, uint32_t seq, uint32_t count, int timeout_ms) {
    return efax__wait_imm(ctx, peer, tag, seq, count, timeout_ms, NULL);
}

// >>schedule (implementation) ------------------------------------------------------------------

EFAX_API const char *efax_mode_name(efax_mode m) {
    static const char *const n[] = {"single", "split", "roundrobin", "stripe"};
    return (unsigned)m < EFAX_MODE_COUNT ? n[m] : "?";
}

EFAX_API const char *efax_mode_label(efax_mode m) {
    static const char *const n[] = {"Single", "Split", "RoundRobin", "Stripe"};
    return (unsigned)m < EFAX_MODE_COUNT ? n[m] : "?";
}

EFAX_API int efax_mode_parse(const char *s, efax_mode *m) {
    int i;
    if (!s) return -EFAX_E_USAGE;
    if (!strcasecmp(s, "rr")) {
        *m = EFAX_MODE_ROUNDROBIN;
        return 0;
    }
    for (i = 0; i < EFAX_MODE_COUNT; i++)
        if (!strcasecmp(s, efax_mode_name((efax_mode)i))) {
            *m = (efax_mode)i;
            return 0;
        }
    return -EFAX_E_USAGE;
}

EFAX_PRIVATE uint64_t efax__div_ceil(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

/* Cuts size into k stripes of ceil(size/k) rounded up to `align`, on NICs start, start+1, ... */
EFAX_PRIVATE int efax__stripes(uint64_t size, int k, uint64_t align, int nnic, int start,
                               efax_plan_seg *out) {
    uint64_t stripe = efax__div_ceil(efax__div_ceil(size, (uint64_t)k), align) * align, off = 0;
    int n = 0;
    while (off < size && n < k) {
        uint64_t len = size - off < stripe ? size - off : stripe;
        out[n].nic = (start + n) % nnic;
        out[n].off = off;
        out[n].len = len;
        off += len;
        n++;
    }
    return n;
}

EFAX_API int efax_plan(uint64_t size, int nnic, efax_mode mode, uint64_t index, int nic0, uint64_t min_stripe,
                       efax_plan_seg *out) {
    int k;
    if (nnic < 1 || nnic > EFAX_MAX_NICS || !out || nic0 < 0) return -FI_EINVAL;
    if (!min_stripe) min_stripe = EFAX_MIN_STRIPE;
    out[0].off = 0;
    out[0].len = size;
    switch (mode) {
    case EFAX_MODE_SINGLE: out[0].nic = nic0 % nnic; return 1;
    case EFAX_MODE_ROUNDROBIN: out[0].nic = (int)(index % (uint64_t)nnic); return 1;
    case EFAX_MODE_SPLIT:
        if (size == 0 || nnic == 1) {
            out[0].nic = 0;
            return 1;
        }
        /* 64-byte aligned stripes keep every NIC's piece cache-line aligned */
        k = size < (uint64_t)nnic * 64 ? (int)efax__div_ceil(size, 64) : nnic;
        return efax__stripes(size, k, 64, nnic, 0, out);
    case EFAX_MODE_STRIPE: {
        /* aws-ofi-nccl's threshold scheduler: as many stripes as min_stripe allows, reduced
           to a divisor of the NIC count, 128-byte aligned, starting where the last message's
           stripes ended */
        uint64_t want = efax__div_ceil(size, min_stripe);
        k = want < 1 ? 1 : want > (uint64_t)nnic ? nnic : (int)want;
        while (k > 1 && nnic % k) k--;
        if (size == 0) {
            out[0].nic = (int)(index % (uint64_t)nnic);
            return 1;
        }
        return efax__stripes(size, k, EFAX_STRIPE_ALIGN, nnic, (int)((index * (uint64_t)k) % (uint64_t)nnic),
                             out);
    }
    default: return -FI_EINVAL;
    }
}

EFAX_API uint64_t efax_chunk_clamp(uint64_t chunk, uint64_t limit) {
    if (!limit || limit > EFAX_MAX_CHUNK) limit = EFAX_MAX_CHUNK;
    return !chunk || chunk > limit ? limit : chunk;
}

EFAX_API uint64_t efax_ctx_max_chunk(const efax_ctx *ctx) { return efax_chunk_clamp(0, ctx->max_chunk); }

EFAX_API uint64_t efax_write_chunk(const efax_ctx *ctx, const efax_write_desc *w) {
    bool writer = w->from == ctx->rank;
    int peer = writer ? w->to : w->from;
    if (!efax_ctx_has_peer(ctx, peer) || !w->dst ||
        (writer && (!w->dst->remote || w->dst->nremote != ctx->size)))
        return efax_chunk_clamp(w->chunk, ctx->max_chunk);
    return efax__chunk_of(ctx, w, writer);
}

EFAX_API uint32_t efax_plan_chunks(const efax_plan_seg *segs, int nseg, uint64_t chunk) {
    uint64_t n = 0;
    int i;
    chunk = efax_chunk_clamp(chunk, 0);
    for (i = 0; i < nseg; i++) n += segs[i].len ? efax__div_ceil(segs[i].len, chunk) : 1;
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

EFAX_API uint32_t efax_write_chunks(uint64_t size, int writer_nnic, efax_mode mode, uint64_t chunk) {
    efax_plan_seg segs[EFAX_MAX_NICS];
    int n = efax_plan(size, writer_nnic, mode, 0, 0, 0, segs);
    return n < 0 ? 0 : efax_plan_chunks(segs, n, chunk);
}

/* A write's desc as this side uses it, checked: this rank is its writer (writer) or its target,
   the peer is a rank, the tag is one of the context's, the regions are there (the writer's
   destination exchanged and writable), the NIC is one of the writer's. The one place its
   defaults resolve, the same on both sides: out->chunk becomes what one post carries at most
   (chunk clamped to efax_ctx_max_chunk, 0 meaning as large as that), *unit a staged region's
   cells (efax_stage_unit(size, chunk)). */
EFAX_PRIVATE int efax__write_desc(const efax_ctx *ctx, const efax_write_desc *w, bool writer,
                                  efax_write_desc *out, uint64_t *unit) {
    const char *side = writer ? "write" : "expect_write";
    int me = writer ? w->from : w->to, peer = writer ? w->to : w->from, rc;
    const efax_rmr *rm;
    if ((rc = efax__check_peer((efax_ctx *)ctx, peer, 0))) return rc;
    if (me != ctx->rank) {
        efax_log(ctx, 0, "%s: desc.%s is rank %d, but this is rank %d", side, writer ? "from" : "to", me,
                 ctx->rank);
        return -FI_EINVAL;
    }
    /* this rank itself is a peer too: the write loops back through the NIC (the doctor checks each NIC
       so) */
    if (peer < 0 || peer >= ctx->size) {
        efax_log(ctx, 0, "%s: desc.%s is rank %d: expected a rank of 0..%d", side, writer ? "to" : "from",
                 peer, ctx->size - 1);
        return -FI_EINVAL;
    }
    if (w->tag <= EFAX_TAG_INTERNAL || w->tag >= ctx->ntags) {
        efax_log(ctx, 0, "%s: desc.tag %d outside 1..%d (efax_ctx_desc.imm_tags)", side, w->tag,
                 ctx->ntags - 1);
        return -FI_EINVAL;
    }
    if (!w->dst || (writer && !w->src)) {
        efax_log(ctx, 0, "%s: desc.%s is NULL", side, w->dst ? "src" : "dst");
        return -FI_EINVAL;
    }
    if (w->nic < 0 || w->nic >= (writer ? ctx->nnic : ctx->peer_nnic[peer])) {
        efax_log(ctx, 0, "%s: desc.nic %d: rank %d has %d NIC(s)", side, w->nic, w->from,
                 writer ? ctx->nnic : ctx->peer_nnic[peer]);
        return -FI_EINVAL;
    }
    if (writer && (!w->dst->remote || w->dst->nremote != ctx->size)) {
        efax_log(ctx, 0, "write: the destination region has no remote keys: call efax_mr_exchange");
        return -FI_EINVAL;
    }
    rm = writer ? &w->dst->remote[peer] : NULL;
    if (rm && !(rm->flags & EFAX_RMR_WRITABLE)) {
        efax_log(ctx, 0,
                 "write: rank %d registered the destination without EFAX_MR_WRITE_DST: it takes no "
                 "remote writes (add EFAX_MR_WRITE_DST to its efax_mr_desc.access)",
                 peer);
        return -FI_EINVAL;
    }
    *out = *w;
    /* a staged side's cells: from the chunk asked for; a batch's piece into a staged region is all of
       one cell (efax_expect_batch copies the batch in piece by piece once every chunk landed) */
    *unit = ctx->batching ? EFAX__ONE_CELL : efax_stage_unit(w->size, w->chunk);
    out->chunk = efax__chunk_of(ctx, w, writer);
    return 0;
}

/* efax_write's general path: checks the desc (naming what is wrong), plans the write over the NICs
   and queues its chunks, which efax__post_nic posts (by inject where they are small). */
EFAX_PRIVATE EFAX__NOINLINE int efax__write_planned(efax_ctx *ctx, efax_xfer *x, const efax_write_desc *desc,
                                                    uint32_t *chunks) {
    efax_plan_seg segs[EFAX_MAX_NICS];
    efax_write_desc w;
    uint64_t unit;
    uint32_t imm;
    int n, i, rc;
    if (chunks) *chunks = 0;
    if ((rc = efax__write_desc(ctx, desc, true, &w, &unit))) return rc;
    if (efax_imm_encode(ctx->rank, w.tag, w.seq, &imm)) return -FI_EINVAL;
    n = efax_plan(w.size, ctx->nnic, w.mode, w.index, w.nic, 0, segs);
    if (n < 0) {
        efax_log(ctx, 0, "write: cannot plan %llu bytes in mode %d", (unsigned long long)w.size, (int)w.mode);
        return n;
    }
    /* a fresh transfer: nothing is read from what x held. efax__write_segs sets every field a write
       reads, and the segments it uses; the rest of the segment table is not cleared: a memset of x
       would cost more than the rest of the post */
    x->rx_len = 0;
    x->rx_data = 0;
    x->rx_has_data = false;
    x->nseg = n;
    for (i = 0; i < n; i++) {
        x->seg[i].nic = segs[i].nic;
        x->seg[i].off = segs[i].off;
        x->seg[i].len = segs[i].len;
    }
    rc = efax__write_segs(ctx, x, &w, unit, imm);
    if (chunks) *chunks = rc ? 0 : x->chunks;
    return rc;
}

EFAX__API_INLINE int efax_write(efax_ctx *ctx, efax_xfer *x, const efax_write_desc *w, uint32_t *chunks) {
    const efax_mr *src = w->src, *dst = w->dst;
    uint64_t len = w->size, soff = w->src_off, doff = w->dst_off;
    int peer = w->to, nic = w->nic, tag = w->tag;
    /* A small write of host memory on one NIC, with nothing queued ahead of it there, goes out at
       once by inject: one chunk, no plan, no queue (the general path costs several times the inject's
       own instructions; a transfer engine writes millions of small ones). The tests are the general
       path's checks, each in one comparison; whatever fails one, or the inject, takes the general
       path, which names the problem or queues the write (keeping the order behind a refused one). */
    if (w->mode == EFAX_MODE_SINGLE && !w->ready && w->from == ctx->rank && ctx->connected &&
        (unsigned)peer < (unsigned)ctx->size && (unsigned)nic < (unsigned)ctx->nnic &&
        tag > EFAX_TAG_INTERNAL && tag < ctx->ntags && (w->chunk == 0 || w->chunk >= len) && src &&
        src->ctx == ctx && src->direct && soff <= src->len && len <= src->len - soff && dst && dst->remote &&
        dst->nremote == ctx->size) {
        efax__nic *n = &ctx->nic[nic];
        const efax_rmr *rm = &dst->remote[peer];
        if (!n->pend_head && !n->retry &&
            (rm->flags & (EFAX_RMR_WRITABLE | EFAX_RMR_STAGED)) == EFAX_RMR_WRITABLE && doff <= rm->len &&
            len <= rm->len - doff) {
            const efax__route *rt = &n->route[peer];
            uint32_t imm;
            /* too large to inject: posted in one chunk, at once unless the NIC's queue must take it */
            if (len > n->info.inject_rma_size) return efax__write_now(ctx, n, x, w, chunks);
            imm = efax__write_imm(ctx, w);
            /* what a caller or a wait reads of a finished write (as efax_send's inject sets it) */
            x->op = EFAX_OP_WRITE;
            x->peer = peer;
            x->status = 0;
            x->done = true;
            x->lmr = src;
            x->len = len;
            x->chunks = 1;
            /* rnic < 0: no peer now (removed, or never added), which the general path names */
            if (EFAX__LIKELY(rt->rnic >= 0 &&
                             efax__fi_inject_writedata(n, (const uint8_t *)src->ptr + soff, len, imm, rt->fa,
                                                       rm->base + doff, rm->key[rt->rnic]) == 0)) {
                n->stats.tx_bytes += len;
                n->stats.tx_ops++;
                if (chunks) *chunks = 1;
                if (w->on_done) w->on_done(w->done_user, x);
                return 0;
            }
        }
    }
    return efax__write_planned(ctx, x, w, chunks);
}

/* Piece i of batch d as a write of its own (efax_write_batch and efax_expect_batch describe it so). */
static inline void efax__batch_piece(const efax_batch_desc *d, int i, efax_write_desc *w) {
    memset(w, 0, sizeof *w);
    w->from = d->from;
    w->to = d->to;
    w->src = d->src;
    w->dst = d->dst;
    w->mode = d->mode;
    w->nic = d->nic;
    w->index = d->index + (uint64_t)i;
    w->chunk = d->chunk;
    w->tag = d->tag;
    w->seq = d->seq;
    if (d->segs) {
        w->src_off = d->segs[i].src_off;
        w->dst_off = d->segs[i].dst_off;
        w->size = d->segs[i].len;
    } else {
        uint64_t ss = d->src_stride ? d->src_stride : d->page_size,
                 ds = d->dst_stride ? d->dst_stride : d->page_size;
        w->src_off = d->src_off + (d->src_pages ? d->src_pages[i] : (uint64_t)i) * ss;
        w->dst_off = d->dst_off + (d->dst_pages ? d->dst_pages[i] : (uint64_t)i) * ds;
        w->size = d->page_size;
    }
}

EFAX_PRIVATE void efax__stage_cell(efax_ctx *ctx, efax_expect *e, unsigned cell, uint32_t n) {
    if ((int)cell >= e->ncells || e->got[cell] + n > e->want[cell]) {
        if (!e->status)
            efax_log(
                ctx, 0,
                "staged write from rank %d (%s), tag %d, sequence %u: cell %u arrived in %u piece(s) more "
                "than its %u: data of another transfer under the same sequence",
                e->peer, efax__host(ctx, e->peer), e->tag, (unsigned)e->seq, cell, n,
                (int)cell < e->ncells ? e->want[cell] : 0);
        e->status = -EFAX_E_STALE;
        return;
    }
    e->got[cell] += n;
    if (e->got[cell] == e->want[cell]) {
        uint64_t off = (uint64_t)cell * e->unit, len = e->size > off ? e->size - off : 0;
        int rc = 0;
        if (len > e->unit) len = e->unit;
        if (e->batch.dst) { /* a batch's one cell: its pieces, where they landed */
            efax_write_desc w;
            int i, np = e->batch.segs ? e->batch.nseg : e->batch.npages;
            for (i = 0; i < np && !rc; i++) {
                efax__batch_piece(&e->batch, i, &w);
                rc = w.size ? e->mr->stage->in_cell(e->mr->stage_user, w.dst_off, w.size) : 0;
            }
        } else if (len)
            rc = e->mr->stage->in_cell(e->mr->stage_user, e->off + off, len);
        if (rc && !e->status) e->status = rc;
        if (++e->cells_done == e->ncells && !e->status && e->mr->stage->in_mark && e->mr->stage->in_marked) {
            rc = e->mr->stage->in_mark(e->mr->stage_user, &e->in_mark);
            if (rc) e->status = rc;
            e->marked = rc == 0;
        }
    }
}

/* Staged sequence sseq's distance above r's base (mod EFAX__STAGE_SEQS). */
static inline unsigned efax__stage_dist(const efax__stage_rx *r, uint32_t sseq) {
    return (sseq - r->base) % EFAX__STAGE_SEQS;
}

/* A staged write's piece of cell `cell`, sequence sseq, arrived: its write's if announced, else
   kept until it is. With the window set, a piece outside it or of a consumed sequence is a fault
   for the next wait; when nothing is outstanding the window lets go: a new run may start. */
EFAX_PRIVATE void efax__stage_hook(void *user, int peer, int tag, uint32_t seq, int nic) {
    efax_ctx *ctx = (efax_ctx *)user;
    efax__stage_rx *r = &ctx->stage_rx[tag][peer];
    uint32_t sseq = seq >> EFAX__STAGE_CELL_BITS, cell = seq & (EFAX_STAGE_CELLS - 1);
    (void)nic;
    if (r->live == 0) r->anchored = false;
    if (r->anchored && (efax__stage_dist(r, sseq) >= EFAX_STAGE_WINDOW || (r->taken >> sseq) & 1)) {
        efax__seq_fault_add(&r->fault, (r->taken >> sseq) & 1 ? -EFAX_E_STALE : -EFAX_E_OVERRUN, sseq, 1,
                            r->base);
        return;
    }
    if (r->e[sseq]) {
        efax__stage_cell(ctx, r->e[sseq], cell, 1);
        return;
    }
    r->early[sseq][cell]++;
    r->live++;
}

/* Sets r's window at staged sequence sseq, about to be announced while nothing else is: pieces
   held for sequences outside it are faults for the next wait. */
EFAX_PRIVATE void efax__stage_anchor(efax__stage_rx *r, uint32_t sseq) {
    uint32_t q, c;
    r->base = (uint8_t)sseq;
    r->anchored = true;
    r->taken = 0;
    for (q = 0; q < EFAX__STAGE_SEQS; q++)
        for (c = 0; efax__stage_dist(r, q) >= EFAX_STAGE_WINDOW && c < EFAX_STAGE_CELLS; c++)
            if (r->early[q][c]) {
                efax__seq_fault_add(&r->fault, -EFAX_E_STALE, q, r->early[q][c], sseq);
                r->live -= r->early[q][c];
                r->early[q][c] = 0;
            }
}

/* e (announced, staged) is consumed: its sequence's entry is free for the sequence's next run, and
   the window moves past what has been consumed from its base on. */
EFAX_PRIVATE void efax__stage_done(efax__stage_rx *r, const efax_expect *e) {
    uint32_t sseq = e->seq % EFAX__STAGE_SEQS;
    r->e[sseq] = NULL;
    r->live--;
    r->taken |= 1u << sseq;
    while ((r->taken >> r->base) & 1) {
        r->taken &= ~(1u << r->base);
        r->base = (uint8_t)((r->base + 1) % EFAX__STAGE_SEQS);
    }
}

EFAX_API int efax_expect_prepare(efax_ctx *ctx, const efax_mr *dst, int tag) {
    if (!dst->stage) return 0;
    if (!ctx->connected || tag <= EFAX_TAG_INTERNAL || tag >= ctx->ntags) {
        efax_log(ctx, 0, "expect_prepare: tag %d outside 1..%d (or efax_ctx_connect not called)", tag,
                 ctx->ntags - 1);
        return -FI_EINVAL;
    }
    if (!ctx->stage_rx &&
        !(ctx->stage_rx = (efax__stage_rx **)calloc((size_t)ctx->ntags, sizeof *ctx->stage_rx)))
        return -FI_ENOMEM;
    if (!ctx->stage_rx[tag] &&
        !(ctx->stage_rx[tag] = (efax__stage_rx *)calloc((size_t)ctx->size, sizeof(efax__stage_rx))))
        return -FI_ENOMEM;
    return efax_ctx_imm_hook(ctx, tag, efax__stage_hook, ctx);
}

/* The staged window's room for a write from peer under (tag, seq) (efax_expect_write, efax_expect_batch):
   its entry, or NULL with *rc set and the reason logged. */
EFAX_PRIVATE efax__stage_rx *efax__stage_claim(efax_ctx *ctx, int peer, int tag, uint32_t seq,
                                               const char *side, int *rc) {
    efax__stage_rx *r;
    uint32_t sseq = seq % EFAX__STAGE_SEQS;
    if (!ctx->stage_rx || !ctx->stage_rx[tag]) {
        efax_log(ctx, 0,
                 "%s: the region is staged: call efax_expect_prepare(ctx, region, %d) before peers write",
                 side, tag);
        *rc = -FI_EOPBADSTATE;
        return NULL;
    }
    r = &ctx->stage_rx[tag][peer];
    if (r->fault.err) { /* what an arrival met, reported once */
        *rc = efax__seq_fault_take(ctx, &r->fault, peer, tag, EFAX_STAGE_WINDOW, "staged piece");
        return NULL;
    }
    if (!r->anchored || r->live == 0) efax__stage_anchor(r, sseq);
    if (efax__stage_dist(r, sseq) >= EFAX_STAGE_WINDOW || (r->taken >> sseq) & 1) {
        efax_log(
            ctx, 0,
            "%s: a staged write from rank %d (%s), tag %d, sequence %u: %s (the oldest outstanding is %u mod "
            "%u). Announce staged writes in their sequence's order, at most %u outstanding",
            side, peer, efax__host(ctx, peer), tag, (unsigned)seq,
            (r->taken >> sseq) & 1 ? "its sequence was consumed already"
                                   : "more than the window's sequences would be outstanding",
            (unsigned)r->base, EFAX__STAGE_SEQS, EFAX_STAGE_WINDOW);
        *rc = -EFAX_E_OVERRUN;
        return NULL;
    }
    if (r->e[sseq]) {
        efax_log(ctx, 0, "%s: a staged write from rank %d under tag %d, sequence %u is already expected",
                 side, peer, tag, (unsigned)seq);
        *rc = -FI_EBUSY;
        return NULL;
    }
    return r;
}

/* The posts each cell of staged expectation e comes in, for write w (resolved by efax__write_desc) of a
   writer of writer_nnic NICs, planned as the writer plans it (efax__stage_pieces), and the bytes each
   local NIC takes. */
EFAX_PRIVATE int efax__stage_want(efax_ctx *ctx, efax_expect *e, const efax_write_desc *w, int writer_nnic) {
    efax_plan_seg segs[EFAX_MAX_NICS];
    int i, n = efax_plan(w->size, writer_nnic, w->mode, w->index, w->nic, 0, segs);
    if (n < 0) return n;
    for (i = 0; i < n; i++) {
        if (ctx->route_in) /* connected: the local NIC this piece lands on */
            e->on_nic_bytes[ctx->route_in[(size_t)e->peer * EFAX_MAX_NICS + (size_t)segs[i].nic] %
                            EFAX_MAX_NICS] += segs[i].len;
        efax__stage_pieces(segs[i].off, segs[i].len, e->unit, w->chunk, e->want);
    }
    return 0;
}

/* Staged expectation e is announced in r: counted from now on, with the pieces that came before it. */
EFAX_PRIVATE void efax__stage_attach(efax_ctx *ctx, efax__stage_rx *r, efax_expect *e) {
    uint32_t idx = e->seq % EFAX__STAGE_SEQS;
    int i;
    r->e[idx] = e;
    e->active = true;
    r->live++;                             /* an announced write is outstanding until its wait */
    for (i = 0; i < EFAX_STAGE_CELLS; i++) /* pieces that landed before this call */
        if (r->early[idx][i]) {
            uint32_t k = r->early[idx][i];
            r->early[idx][i] = 0;
            r->live -= k;
            efax__stage_cell(ctx, e, (unsigned)i, k);
        }
}

/* efax_expect_write's general path: any region, mode and chunk count (a staged region's cells). */
EFAX_PRIVATE EFAX__NOINLINE int efax__expect_planned(efax_ctx *ctx, efax_expect *e,
                                                     const efax_write_desc *desc) {
    efax_plan_seg segs[EFAX_MAX_NICS];
    efax_write_desc w;
    efax__stage_rx *r;
    const efax_mr *dst = desc->dst;
    uint64_t doff = desc->dst_off, size = desc->size, unit;
    int n, i, rc, peer = desc->from, tag = desc->tag, writer_nnic;
    memset(e, 0, sizeof *e); /* nothing is read from what e held */
    e->mr = dst;
    e->peer = peer;
    e->tag = tag;
    e->seq = desc->seq;
    e->off = doff;
    e->size = size;
    if ((rc = efax__write_desc(ctx, desc, false, &w, &unit))) return rc;
    writer_nnic = efax_ctx_peer_nnics(ctx, peer);
    if (doff > dst->len || size > dst->len - doff) {
        efax_log(ctx, 0, "expect_write: bytes [%llu, %llu) fall outside the registered region of %zu bytes",
                 (unsigned long long)doff, (unsigned long long)(doff + size), dst->len);
        return -EFAX_E_BOUNDS;
    }
    e->active = true;
    if (!dst->stage) {
        n = efax_plan(size, writer_nnic, w.mode, w.index, w.nic, 0, segs);
        for (i = 0; i < n; i++) { /* each piece's chunks, counted on the NIC they arrive on here */
            uint32_t c = efax_plan_chunks(&segs[i], 1, w.chunk);
            int here = ctx->route_in[(size_t)peer * EFAX_MAX_NICS + (size_t)segs[i].nic] % EFAX_MAX_NICS;
            e->on_nic[here] += c;
            e->on_nic_bytes[here] += segs[i].len;
            e->count += c;
        }
        if (!e->count) return -FI_EINVAL;
        /* what this target awaits must fit its completion queues where they can overrun:
           on efa, under the fault layer (which plays efa), and wherever a size was given; tcp and shm
           queue the rest in software, and chunk otherwise than efa (tcp: 128 KiB between hosts) */
        for (i = 0; efax__cq_enforced(ctx) && i < ctx->nnic; i++)
            if (e->on_nic[i] && ctx->nic[i].expecting + e->on_nic[i] > (uint64_t)ctx->nic[i].cq_incoming) {
                efax_log(
                    ctx, 0,
                    "expect_write from rank %d (%s), tag %d: this rank would then await %llu chunks at once "
                    "on "
                    "NIC %s, and its completion queue has room for %d of peers' writes (%d entries in all): "
                    "on "
                    "efa, whose writes with immediate data consume no receive, the excess overruns it and "
                    "completions are lost. Raise EFAX_CQ_SIZE (efax_ctx_desc.cq_size), write larger chunks, "
                    "or "
                    "expect fewer writes at once",
                    peer, efax__host(ctx, peer), tag,
                    (unsigned long long)(ctx->nic[i].expecting + e->on_nic[i]), ctx->nic[i].info.name,
                    ctx->nic[i].cq_incoming, ctx->nic[i].cq_size);
                e->active = false;
                return -FI_EOVERFLOW;
            }
        for (i = 0; i < ctx->nnic; i++) ctx->nic[i].expecting += e->on_nic[i];
        return 0;
    }
    e->active = false; /* until the write is announced */
    if (!(r = efax__stage_claim(ctx, peer, tag, desc->seq, "expect_write", &rc))) return rc;
    e->unit = unit;
    e->ncells = size ? (int)((size + e->unit - 1) / e->unit) : 1;
    if ((rc = efax__stage_want(ctx, e, &w, writer_nnic))) return rc;
    efax__stage_attach(ctx, r, e);
    return 0;
}

/* A write that lands whole on one of this rank's NICs into an ordinary region (one NIC's writer or
   Single mode): its chunks (*count) and that NIC (*here), without a plan, when it fits the NIC's
   completion queue beside what is awaited there already. A target announces every write it awaits:
   the general path (efax__expect_planned) costs several times the provider's own work per small one,
   and made the target the slower side of a stream of them. The tests are the general path's checks;
   whatever fails one takes it (false), which names the problem. */
static inline bool efax__expect_quick(const efax_ctx *ctx, const efax_write_desc *w, uint32_t *count,
                                      int *here) {
    const efax_mr *dst = w->dst;
    uint64_t size = w->size, doff = w->dst_off, chunk;
    int peer = w->from, nic = w->nic, writer_nnic;
    if (!ctx->connected || w->to != ctx->rank || (unsigned)peer >= (unsigned)ctx->size ||
        !ctx->peer_on[peer] || !dst || dst->stage || w->tag <= EFAX_TAG_INTERNAL || w->tag >= ctx->ntags ||
        (unsigned)w->mode >= EFAX_MODE_COUNT || doff > dst->len || size > dst->len - doff)
        return false;
    writer_nnic = ctx->peer_nnic[peer];
    if ((unsigned)nic >= (unsigned)writer_nnic || (w->mode != EFAX_MODE_SINGLE && writer_nnic != 1))
        return false;
    chunk = efax__chunk_of(ctx, w, false);
    if (size > chunk * (uint64_t)UINT32_MAX) return false;
    *count = size <= chunk ? 1 : (uint32_t)efax__div_ceil(size, chunk);
    *here = ctx->route_in[(size_t)peer * EFAX_MAX_NICS + (size_t)(w->mode == EFAX_MODE_SINGLE ? nic : 0)] %
            EFAX_MAX_NICS;
    return !efax__cq_enforced(ctx) ||
           ctx->nic[*here].expecting + *count <= (uint64_t)ctx->nic[*here].cq_incoming;
}

/* e as an ordinary region's expectation of nothing yet from w's writer under w's tag and
   sequence: of e only what its wait reads (e is 1.5 KB, its staged cells' tables unused here). */
static inline void efax__expect_start(const efax_ctx *ctx, efax_expect *e, const efax_write_desc *w) {
    int i;
    e->mr = w->dst;
    e->peer = w->from;
    e->tag = w->tag;
    e->seq = w->seq;
    e->count = 0;
    e->off = w->dst_off;
    e->size = w->size;
    e->unit = 0;
    e->ncells = e->cells_done = e->status = 0;
    e->active = true;
    e->landed = false;
    if (ctx->nnic == 1) { /* one store each: the loop below becomes two calls of memset */
        e->on_nic[0] = 0;
        e->on_nic_bytes[0] = 0;
    } else
        for (i = 0; i < ctx->nnic; i++) {
            e->on_nic[i] = 0;
            e->on_nic_bytes[i] = 0;
        }
}

EFAX__API_INLINE int efax_expect_write(efax_ctx *ctx, efax_expect *e, const efax_write_desc *w) {
    uint32_t count;
    int here;
    if (!efax__expect_quick(ctx, w, &count, &here)) return efax__expect_planned(ctx, e, w);
    efax__expect_start(ctx, e, w);
    e->count = count;
    e->on_nic[here] = count;
    e->on_nic_bytes[here] = w->size;
    ctx->nic[here].expecting += count;
    return 0;
}

/* e's chunks no longer count against the NICs' completion queues (efax_expect_write added them). */
EFAX_PRIVATE void efax__unexpect(efax_ctx *ctx, efax_expect *e) {
    int i;
    e->active = false;
    if (ctx->nnic == 1) {
        ctx->nic[0].expecting -= e->on_nic[0];
        return;
    }
    for (i = 0; i < ctx->nnic; i++) ctx->nic[i].expecting -= e->on_nic[i];
}

/* efax_expect_writes' refusal of write i, which does not share write 0's writer, tag, sequence,
   target or ordinary region (nothing is announced then). */
EFAX_PRIVATE EFAX__NOINLINE int efax__expect_writes_bad(efax_ctx *ctx, efax_expect *e,
                                                        const efax_write_desc *ws, int i) {
    if (e->active) efax__unexpect(ctx, e);
    if (!ws[i].dst)
        efax_log(ctx, 0, "expect_writes: write %d names no region (dst)", i);
    else if (ws[0].dst->stage)
        efax_log(ctx, 0,
                 "expect_writes: the region is staged, whose cells are taken as each write lands: announce "
                 "each write under its own tag (efax_expect_write)");
    else
        efax_log(
            ctx, 0,
            "expect_writes: write %d (rank %d to %d, tag %d, seq %u) differs from write 0 (rank %d to %d, "
            "tag %d, seq %u) or writes into another region: one expectation counts one writer's writes "
            "under one tag and sequence into one ordinary region",
            i, ws[i].from, ws[i].to, ws[i].tag, (unsigned)ws[i].seq, ws[0].from, ws[0].to, ws[0].tag,
            (unsigned)ws[0].seq);
    return -FI_EINVAL;
}

/* What efax__expect_add keeps of the last write it counted without a plan: a write like it (the same
   size, chunk, mode and NIC) lands alike, so its count and local NIC are taken without the plan. */
typedef struct efax__expect_like {
    bool valid;
    efax_mode mode;
    int nic, here;
    uint64_t size, chunk;
    uint32_t count;
} efax__expect_like;

/* Adds write w's chunks to expectation e (efax_expect_writes, efax_expect_batch). Returns 0, or what
   efax__expect_planned returns (nothing added). */
EFAX__HOT_INLINE int efax__expect_add(efax_ctx *ctx, efax_expect *e, const efax_write_desc *w,
                                      efax__expect_like *like) {
    int k, rc;
    /* the next of a window like the last: its count and NIC, once its bytes fit the region and its
       chunks the NIC's completion queue (the checks efax__expect_quick makes that vary) */
    if (!(like->valid && w->size == like->size && w->chunk == like->chunk && w->mode == like->mode &&
          w->nic == like->nic && w->dst_off <= w->dst->len && w->size <= w->dst->len - w->dst_off &&
          (!efax__cq_enforced(ctx) ||
           ctx->nic[like->here].expecting + like->count <= (uint64_t)ctx->nic[like->here].cq_incoming))) {
        like->valid = efax__expect_quick(ctx, w, &like->count, &like->here);
        like->size = w->size;
        like->chunk = w->chunk;
        like->mode = w->mode;
        like->nic = w->nic;
    }
    if (EFAX__LIKELY(like->valid)) {
        e->count += like->count;
        e->on_nic[like->here] += like->count;
        e->on_nic_bytes[like->here] += w->size;
        ctx->nic[like->here].expecting += like->count; /* the next write's room counts this one's */
    } else {
        efax_expect one;
        if ((rc = efax__expect_planned(ctx, &one, w))) return rc; /* which names the problem */
        e->count += one.count;
        for (k = 0; k < ctx->nnic; k++) {
            e->on_nic[k] += one.on_nic[k];
            e->on_nic_bytes[k] += one.on_nic_bytes[k];
        }
    }
    e->size += w->size;
    return 0;
}

EFAX_API int efax_expect_writes(efax_ctx *ctx, efax_expect *e, const efax_write_desc *ws, int n) {
    efax__expect_like like;
    int i, rc;
    like.valid = false;
    if (n == 1) return efax_expect_write(ctx, e, ws);
    if (n < 1 || !ws) {
        efax_log(ctx, 0, "expect_writes: %d write(s)%s: name at least one", n, ws ? "" : " at NULL");
        return -FI_EINVAL;
    }
    e->active = false;
    if (!ws[0].dst || ws[0].dst->stage) return efax__expect_writes_bad(ctx, e, ws, 0);
    efax__expect_start(ctx, e, &ws[0]);
    e->size = 0;
    for (i = 0; i < n; i++) {
        const efax_write_desc *w = &ws[i];
        if (w->from != ws[0].from || w->to != ws[0].to || w->tag != ws[0].tag || w->seq != ws[0].seq ||
            w->dst != ws[0].dst)
            return efax__expect_writes_bad(ctx, e, ws, i);
        if ((rc = efax__expect_add(ctx, e, w, &like))) {
            efax__unexpect(ctx, e);
            return rc;
        }
    }
    return 0;
}

/* A write that landed: each local NIC's rx_bytes gets what the plan put on it. */
EFAX_PRIVATE void efax__credit_rx(efax_ctx *ctx, const efax_expect *e) {
    int i;
    if (ctx->nnic == 1) { /* the common case, without the loop's two tests a NIC */
        ctx->nic[0].stats.rx_bytes += e->on_nic_bytes[0];
        return;
    }
    for (i = 0; i < ctx->nnic && i < EFAX_MAX_NICS; i++) ctx->nic[i].stats.rx_bytes += e->on_nic_bytes[i];
}

/* All of e's chunks arrived already (a stream of small writes: nearly always), with nothing wrong
   to report: as efax__wait_imm's first round would find it. */
static inline bool efax__expect_landed(const efax_ctx *ctx, const efax_expect *e, const efax__imm_slot *sl) {
    uint32_t seq = e->seq & ((1u << EFAX_IMM_SEQ_BITS) - 1);
    return efax__imm_in(sl, seq) && sl->count[seq % EFAX_IMM_WINDOW] >= e->count && !sl->fault.err &&
           !ctx->sticky_error;
}

/* e's (peer, tag) in ctx->imm. */
static inline size_t efax__expect_slot(const efax_ctx *ctx, const efax_expect *e) {
    return (size_t)e->peer * (size_t)ctx->ntags + (size_t)e->tag;
}

/* Takes e's write, which landed (efax__expect_landed), without a wait: its chunks off the count,
   its bytes to the NICs' counters. */
static inline void efax__expect_take(efax_ctx *ctx, efax_expect *e, size_t slot) {
    efax__unexpect(ctx, e);
    efax__imm_take(ctx, &ctx->imm[slot], slot, e->seq & ((1u << EFAX_IMM_SEQ_BITS) - 1), e->count);
    efax__credit_rx(ctx, e);
}

/* efax_expect_wait's and efax_expect_arrived's for ordinary regions: the chunks, then settle or not. */
EFAX_PRIVATE int efax__expect_chunks(efax_ctx *ctx, efax_expect *e, int timeout_ms, bool settle) {
    int rc = 0;
    size_t slot = efax__expect_slot(ctx, e);
    if (efax__expect_landed(ctx, e, &ctx->imm[slot])) /* taken without the wait's setup */
        efax__expect_take(ctx, e, slot);
    else {
        efax__unexpect(ctx, e);
        rc = efax__wait_imm(ctx, e->peer, e->tag, e->seq, e->count, timeout_ms, e->on_nic);
        if (!rc) efax__credit_rx(ctx, e);
    }
    if (!rc && settle && e->mr->settle)
        rc = e->mr->settle(e->mr->settle_user, efax__wait_ms(ctx, timeout_ms));
    return rc;
}

EFAX_API int efax_expect_arrived(efax_ctx *ctx, efax_expect *e, int timeout_ms) {
    if (!e->active) return -FI_EINVAL;
    return e->mr->stage ? efax_expect_wait(ctx, e, timeout_ms)
                        : efax__expect_chunks(ctx, e, timeout_ms, false);
}

/* Staged expectation e's copies into the real memory finished, every cell having arrived (or e
   failed): with a mark (efax_stage_ops.in_mark), polled while the context progresses, so the next
   writes land meanwhile; else, or once e failed, by in_wait, which waits for every copy started.
   Returns 0 or a negative code (-FI_ETIMEDOUT past the deadline, logged). */
EFAX_PRIVATE int efax__stage_copied(efax_ctx *ctx, efax_expect *e, uint64_t deadline, int timeout_ms) {
    const efax_stage_ops *ops = e->mr->stage;
    unsigned spins = 0, idle = 0;
    int rc = 0, got;
    while (e->marked && !e->status && (rc = ops->in_marked(e->mr->stage_user, e->in_mark)) == 0) {
        if ((got = efax_progress(ctx)) < 0) {
            e->status = got; /* in_wait below: no copy may still run once the wait returns */
            break;
        }
        efax__idle(got, &idle);
        if ((++spins & 15) == 0 && efax_now_ns() > deadline) {
            efax_log(
                ctx, 0,
                "staged write from rank %d (%s), tag %d, sequence %u: every cell arrived, and its copies "
                "into the memory did not finish within %d ms",
                e->peer, efax__host(ctx, e->peer), e->tag, (unsigned)e->seq, timeout_ms);
            return -FI_ETIMEDOUT;
        }
    }
    if (rc < 0 && !e->status) e->status = rc; /* the mark failed: in_wait below, as for a failure */
    if (e->marked && !e->status) return 0;
    return ops->in_wait(e->mr->stage_user, efax_remaining_ms(deadline) + 1);
}

EFAX_API int efax_expect_wait(efax_ctx *ctx, efax_expect *e, int timeout_ms) {
    uint64_t deadline;
    unsigned spins = 0, idle = 0;
    efax__stage_rx *r;
    int rc;
    if (!e->active) return -FI_EINVAL;
    if (!e->mr->stage) return efax__expect_chunks(ctx, e, timeout_ms, true);
    timeout_ms = efax__wait_ms(ctx, timeout_ms);
    deadline = efax_deadline_ns(timeout_ms);
    r = &ctx->stage_rx[e->tag][e->peer];
    while (e->cells_done < e->ncells && !e->status) {
        if (r->fault.err) { /* what an arrival under this tag met */
            e->status =
                efax__seq_fault_take(ctx, &r->fault, e->peer, e->tag, EFAX_STAGE_WINDOW, "staged piece");
            break;
        }
        if (ctx->last_cq_error) { /* an incoming write failed (it names no writer): this may be it */
            e->status = ctx->last_cq_error;
            ctx->last_cq_error = 0;
            efax_log(ctx, 0,
                     "waiting for a staged write from rank %d (%s), tag %d, sequence %u (%d of %d cells "
                     "arrived): an incoming write failed (%s), and the provider does not say whose",
                     e->peer, efax__host(ctx, e->peer), e->tag, (unsigned)e->seq, e->cells_done, e->ncells,
                     fi_strerror(-e->status));
            break;
        }
        if ((rc = efax_progress(ctx)) < 0) {
            e->status = rc;
            break;
        }
        efax__idle(rc, &idle);
        if ((++spins & 15) == 0 && efax_now_ns() > deadline) {
            efax_log(
                ctx, 0,
                "timed out after %d ms waiting for a staged write of %llu bytes from rank %d (%s), tag %d, "
                "sequence %u: %d of %d cells arrived; the peer died or stopped, or raise EFAX_TIMEOUT_MS",
                timeout_ms, (unsigned long long)e->size, e->peer, efax__host(ctx, e->peer), e->tag,
                (unsigned)e->seq, e->cells_done, e->ncells);
            e->status = -FI_ETIMEDOUT;
        }
    }
    rc = efax__stage_copied(ctx, e, deadline, timeout_ms);
    efax__stage_done(r, e);
    e->active = false;
    if (!e->status && !rc) efax__credit_rx(ctx, e);
    return e->status ? e->status : rc;
}

EFAX_API int efax_expect_arrived_test(efax_ctx *ctx, efax_expect *e) {
    size_t slot;
    efax__imm_slot *sl;
    int rc;
    if (!e->active || e->mr->stage) return -FI_EINVAL;
    slot = efax__expect_slot(ctx, e);
    sl = &ctx->imm[slot];
    if (efax__expect_landed(ctx, e, sl)) {
        efax__expect_take(ctx, e, slot);
        return 1;
    }
    if (ctx->sticky_error) return ctx->sticky_error;
    if (sl->fault.err)
        return efax__seq_fault_take(ctx, &sl->fault, e->peer, e->tag, EFAX_IMM_WINDOW, "arrival");
    if ((rc = ctx->last_cq_error)) { /* an incoming write failed: name the one this caller awaits */
        ctx->last_cq_error = 0;
        efax_log(
            ctx, 0,
            "awaiting %u arrival(s) from rank %d (%s), tag %d, sequence %u: an incoming write failed (%s), "
            "and the provider does not say whose",
            e->count, e->peer, efax__host(ctx, e->peer), e->tag, (unsigned)e->seq, fi_strerror(-rc));
        return rc;
    }
    return 0;
}

EFAX_API int efax_expect_wait_all(efax_ctx *ctx, efax_expect *es, int n, int timeout_ms) {
    uint64_t deadline;
    int i, rc = 0;
    timeout_ms = efax__wait_ms(ctx, timeout_ms);
    deadline = efax_deadline_ns(timeout_ms);
    for (i = 0; i < n && !rc; i++) {
        efax_expect *e = &es[i];
        size_t slot;
        /* landed in an ordinary region that needs no settling: efax__expect_chunks' fast path, inline */
        if (e->active && !e->mr->stage && !e->mr->settle &&
            efax__expect_landed(ctx, e, &ctx->imm[slot = efax__expect_slot(ctx, e)]))
            efax__expect_take(ctx, e, slot);
        else
            rc = efax_expect_wait(ctx, e, efax_remaining_ms(deadline));
    }
    return rc;
}


/* The pieces of batch d, or -FI_EINVAL (logged) when it names neither segments nor pages. */
EFAX_PRIVATE int efax__batch_pieces(const efax_ctx *ctx, const efax_batch_desc *d, const char *side) {
    int n = d->segs ? d->nseg : d->npages;
    if (n < 1 || (d->segs && d->npages) || (!d->segs && !d->page_size)) {
        efax_log(ctx, 0,
                 "%s: the batch names %d piece(s) (segs %s, %d page(s) of %llu bytes): name segments or "
                 "pages",
                 side, n, d->segs ? "given" : "NULL", d->npages, (unsigned long long)d->page_size);
        return -FI_EINVAL;
    }
    return n;
}

EFAX_API int efax_batch_init(efax_batch *b, int max_pieces) {
    memset(b, 0, sizeof *b);
    if (max_pieces < 1) return -FI_EINVAL;
    b->xs = (efax_xfer *)calloc((size_t)max_pieces, sizeof *b->xs);
    if (!b->xs) return -FI_ENOMEM;
    b->cap = max_pieces;
    return 0;
}

EFAX_API void efax_batch_deinit(efax_batch *b) {
    free(b->xs);
    memset(b, 0, sizeof *b);
}

/* A piece of a batch is done (efax_write_desc.on_done): counted, its failure kept. */
EFAX_PRIVATE void efax__batch_piece_done(void *user, efax_xfer *x) {
    efax_batch *b = (efax_batch *)user;
    b->ndone++;
    if (x->status && !b->status) b->status = x->status;
}

EFAX_API int efax_write_batch(efax_ctx *ctx, efax_batch *b, const efax_batch_desc *d) {
    efax_write_desc w;
    int n = efax__batch_pieces(ctx, d, "write_batch"), i, rc = 0;
    uint32_t c;
    if (n < 0) return n;
    if (n > b->cap) {
        efax_log(ctx, 0, "write_batch: %d pieces, room for %d (efax_batch_init)", n, b->cap);
        return -FI_EINVAL;
    }
    b->n = b->ndone = b->status = 0;
    b->chunks = 0;
    b->peer = d->to;
    b->tag = d->tag;
    b->seq = d->seq;
    ctx->batching = true; /* every piece queues its chunks; they go out together below */
    for (i = 0; i < n && !rc; i++) {
        efax__batch_piece(d, i, &w);
        w.on_done = efax__batch_piece_done;
        w.done_user = b;
        if ((rc = efax__write_planned(ctx, &b->xs[i], &w, &c))) {
            efax_log(ctx, 0, "write_batch: piece %d of %d (%llu bytes from offset %llu to %llu) was refused",
                     i, n, (unsigned long long)w.size, (unsigned long long)w.src_off,
                     (unsigned long long)w.dst_off);
            break;
        }
        b->chunks += c;
        b->n++;
    }
    ctx->batching = false;
    for (i = 0; i < ctx->nnic; i++)
        if (ctx->nic[i].pend_head) efax__post_nic(ctx, &ctx->nic[i]);
    return rc;
}

EFAX_API int efax_batch_test(efax_ctx *ctx, efax_batch *b) {
    int rc = efax_progress(ctx);
    if (rc < 0) return rc;
    if (b->ndone < b->n) return 0;
    return b->status ? b->status : 1;
}

EFAX_API int efax_batch_wait(efax_ctx *ctx, efax_batch *b, int timeout_ms) {
    uint64_t deadline = 0;
    unsigned spins = 0, idle = 0;
    int rc;
    timeout_ms = efax__wait_ms(ctx, timeout_ms);
    while ((rc = efax_batch_test(ctx, b)) == 0) {
        efax__idle(0, &idle);
        if (efax__expired(&deadline, &spins, timeout_ms)) {
            char busy[256];
            efax__busy_nics(ctx, busy, sizeof busy);
            efax_log(ctx, 0,
                     "timed out after %d ms waiting for a batch of %d pieces to rank %d (%s), tag %d, "
                     "sequence %u: %d done%s",
                     timeout_ms, b->n, b->peer, efax__host(ctx, b->peer), b->tag, (unsigned)b->seq, b->ndone,
                     busy);
            return -FI_ETIMEDOUT;
        }
    }
    return rc < 0 ? rc : 0;
}

/* efax_expect_batch into a staged region: one expectation of one cell, every chunk of every piece
   counted as cell 0 of the batch's sequence (efax_write_batch cuts them so), the pieces copied in
   when the last chunk landed. d is kept; its arrays must stay as they are until the wait returns. */
EFAX_PRIVATE int efax__expect_batch_staged(efax_ctx *ctx, efax_expect *e, const efax_batch_desc *d, int n) {
    efax_write_desc w, piece;
    efax__stage_rx *r;
    uint64_t unit;
    int i, rc, writer_nnic = efax_ctx_peer_nnics(ctx, d->from);
    memset(e, 0, sizeof *e);
    e->mr = d->dst;
    e->peer = d->from;
    e->tag = d->tag;
    e->seq = d->seq;
    e->unit = EFAX__ONE_CELL;
    e->ncells = 1;
    e->batch = *d;
    for (i = 0; i < n; i++) {
        efax__batch_piece(d, i, &piece);
        if ((rc = efax__write_desc(ctx, &piece, false, &w, &unit))) return rc;
        if (w.dst_off > w.dst->len || w.size > w.dst->len - w.dst_off) {
            efax_log(ctx, 0,
                     "expect_batch: piece %d, bytes [%llu, %llu), falls outside the region of %zu bytes", i,
                     (unsigned long long)w.dst_off, (unsigned long long)(w.dst_off + w.size), w.dst->len);
            return -EFAX_E_BOUNDS;
        }
        w.dst_off = 0; /* one cell for all: a piece's offset within it is the writer's (cell 0 either way) */
        if ((rc = efax__stage_want(ctx, e, &w, writer_nnic))) return rc;
        e->size += piece.size;
    }
    if (!(r = efax__stage_claim(ctx, e->peer, e->tag, e->seq, "expect_batch", &rc))) return rc;
    efax__stage_attach(ctx, r, e);
    return 0;
}

EFAX_API int efax_expect_batch(efax_ctx *ctx, efax_expect *e, const efax_batch_desc *d) {
    efax_write_desc w;
    efax__expect_like like;
    int n = efax__batch_pieces(ctx, d, "expect_batch"), i, rc;
    like.valid = false;
    e->active = false;
    if (n < 0) return n;
    if (d->dst && d->dst->stage) return efax__expect_batch_staged(ctx, e, d, n);
    for (i = 0; i < n; i++) {
        efax__batch_piece(d, i, &w);
        if (i == 0) {
            efax__expect_start(ctx, e, &w);
            e->size = 0;
        }
        if ((rc = efax__expect_add(ctx, e, &w, &like))) {
            efax_log(ctx, 0, "expect_batch: piece %d of %d was refused", i, n);
            efax__unexpect(ctx, e);
            return rc;
        }
    }
    return 0;
}

EFAX_API int efax_expect_test(efax_ctx *ctx, efax_expect *e) {
    size_t slot;
    int rc;
    if (!e->active && !e->landed) return -FI_EINVAL;
    if ((rc = efax_progress(ctx)) < 0) return rc;
    if (e->mr->stage) { /* every cell in, and its copies in finished (its mark; without one the wait's) */
        efax__stage_rx *r = &ctx->stage_rx[e->tag][e->peer];
        if (e->cells_done < e->ncells && !e->status && !r->fault.err && !ctx->last_cq_error) return 0;
        if (e->marked && !e->status && (rc = e->mr->stage->in_marked(e->mr->stage_user, e->in_mark)) == 0)
            return 0; /* its copies in are running */
        rc = efax_expect_wait(ctx, e, -1);
        return rc ? rc : 1;
    }
    slot = efax__expect_slot(ctx, e);
    if (!e->landed) {
        efax__imm_slot *sl = &ctx->imm[slot];
        if (sl->fault.err || ctx->sticky_error || ctx->last_cq_error) { /* the wait names it */
            rc = efax__expect_chunks(ctx, e, 0, false);
            e->active = false;
            return rc ? rc : -FI_EOTHER;
        }
        if (!efax__expect_landed(ctx, e, sl)) return 0;
        efax__expect_take(ctx, e, slot);
        e->landed = true;
    }
    if (e->mr->settle) {
        rc = e->mr->settle(e->mr->settle_user, 0);
        if (rc == -FI_ETIMEDOUT || rc == -FI_EAGAIN) return 0;
    } else
        rc = 0;
    e->active = false;
    e->landed = false;
    return rc ? rc : 1;
}

// >>bootstrap: TCP rendezvous (implementation) ---------------------------------------------------

#define EFAX__BOOT_MAGIC 0x45465842u /* "EFXB" */


/* Reads or writes exactly len bytes before the deadline. */
/* Reads or writes len bytes by the deadline. b (may be NULL): its idle hook runs every 10 ms of
   waiting, and a negative return from it ends the wait (kept in b->idle_rc). */
EFAX_PRIVATE int efax__io_b(efax_boot *b, int fd, void *buf, size_t len, bool wr, uint64_t deadline) {
    uint8_t *p = (uint8_t *)buf;
    while (len) {
        struct pollfd pf;
        ssize_t n;
        int ms = efax_remaining_ms(deadline), prc, slice;
        if (ms == 0) return -FI_ETIMEDOUT;
        slice = b && b->idle && ms > 10 ? 10 : ms;
        pf.fd = fd;
        pf.events = wr ? POLLOUT : POLLIN;
        pf.revents = 0;
        prc = poll(&pf, 1, slice);
        if (prc < 0 && errno == EINTR) continue;
        if (prc < 0) return -errno;
        if (prc == 0 && slice < ms) {
            int hrc = b->idle(b->idle_user);
            if (hrc < 0) return b->idle_rc = hrc;
            continue;
        }
        if (prc == 0) return -FI_ETIMEDOUT;
        n = wr ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (n == 0) return -EFAX_E_PEER;
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return errno == ECONNRESET || errno == EPIPE ? -EFAX_E_PEER : -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

EFAX_PRIVATE int efax__io(int fd, void *buf, size_t len, bool wr, uint64_t deadline) {
    return efax__io_b(NULL, fd, buf, len, wr, deadline);
}

typedef struct efax__boot_hello {
    uint32_t magic, wire;
    uint64_t token;
    int32_t rank, size;
} efax__boot_hello;

typedef struct efax__boot_reply {
    uint32_t magic, wire;
    int32_t status;
    int32_t pad;
} efax__boot_reply;

/* Checks a rendezvous hello at rank 0: 0 to accept; 1 to drop the connection and go on
   waiting (not an efax peer, wrong token); -EFAX_E_VERSION / -EFAX_E_BOOT to give up. why
   says what. fds: the ranks joined so far (-1: not yet). */
EFAX_PRIVATE int efax__boot_hello_check(const efax__boot_hello *h, uint64_t token, int size, const int *fds,
                                        char *why, size_t wl) {
    if (h->magic != EFAX__BOOT_MAGIC || h->token != token) {
        snprintf(why, wl, "rejected a connection: %s",
                 h->magic != EFAX__BOOT_MAGIC ? "not an efax peer" : "wrong EFAX_TOKEN");
        return 1;
    }
    if (h->wire != EFAX_WIRE_VERSION) {
        snprintf(why, wl,
                 "rank %d runs efax wire version %u, rank 0 runs %u: build every rank from the same efax.h",
                 h->rank, h->wire, EFAX_WIRE_VERSION);
        return -EFAX_E_VERSION;
    }
    if (h->size != size || h->rank <= 0 || h->rank >= size || fds[h->rank] >= 0) {
        snprintf(why, wl, "a peer claims rank %d of %d; rank 0 has EFAX_SIZE=%d%s", h->rank, h->size, size,
                 h->rank > 0 && h->rank < size && fds[h->rank] >= 0 ? " and that rank already joined" : "");
        return -EFAX_E_BOOT;
    }
    return 0;
}

EFAX_PRIVATE uint64_t efax__hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    while (s && *s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

/* "host:port" or "[v6]:port" */
EFAX_PRIVATE int efax__split_hostport(const char *s, char *host, size_t hl, char *port, size_t pl) {
    const char *colon;
    if (!s || !*s) return -1;
    if (*s == '[') {
        const char *e = strchr(s, ']');
        if (!e || e[1] != ':') return -1;
        if ((size_t)(e - s - 1) >= hl) return -1;
        memcpy(host, s + 1, (size_t)(e - s - 1));
        host[e - s - 1] = 0;
        colon = e + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || (size_t)(colon - s) >= hl || colon == s) return -1;
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = 0;
    }
    efax__copy(port, pl, colon + 1);
    {
        char *end;
        long v = strtol(port, &end, 10);
        if (!port[0] || *end || v <= 0 || v > 65535) return -1;
    }
    return 0;
}

/* Binds and listens at ai for the size-1 peers; a socket, or a negative errno (logged). */
EFAX_PRIVATE int efax__tcp_listen(efax_boot *b, const char *root, const struct addrinfo *ai) {
    int one = 1, lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;
    if (lfd < 0) return -errno;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, ai->ai_addr, ai->ai_addrlen) || listen(lfd, b->size)) {
        rc = -errno;
        efax__blog(b, 0,
                   "rendezvous: rank 0 cannot listen on %s: %s (it must be an address of rank 0's "
                   "host, and the port free)",
                   root, strerror(errno));
        close(lfd);
        return rc;
    }
    return lfd;
}

/* Rank 0: accepts every other rank on the listening socket lfd (closed here), checking each
   hello, then tells them all to go. root names the address for messages. */
EFAX_PRIVATE int efax__tcp_root(efax_boot *b, const char *root, int lfd, uint64_t deadline) {
    int one = 1, joined = 0, i, rc = 0;
    efax__boot_reply rep;
    b->fds = (int *)malloc(sizeof(int) * (size_t)b->size);
    if (!b->fds) {
        close(lfd);
        return -FI_ENOMEM;
    }
    b->fd = -1;
    for (i = 0; i < b->size; i++) b->fds[i] = -1;
    while (joined < b->size - 1) {
        struct pollfd pf;
        efax__boot_hello h;
        struct sockaddr_storage from;
        socklen_t fl = sizeof from;
        char who[INET6_ADDRSTRLEN + 8] = "?", why[256];
        int fd, prc, ms = efax_remaining_ms(deadline);
        pf.fd = lfd;
        pf.events = POLLIN;
        pf.revents = 0;
        prc = ms ? poll(&pf, 1, ms) : 0;
        if (prc < 0 && errno == EINTR) continue;
        if (prc <= 0) {
            char miss[256] = "";
            size_t l = 0;
            for (i = 1; i < b->size && l + 12 < sizeof miss; i++)
                if (b->fds[i] < 0) l += (size_t)snprintf(miss + l, sizeof miss - l, "%s%d", l ? "," : "", i);
            efax__blog(b, 0, "rendezvous: timed out after %d ms waiting for rank(s) %s to join at %s (%s)",
                       b->timeout_ms, miss, root,
                       b->kind == EFAX_BOOT_TCP
                           ? "never started, or EFAX_ROOT/EFAX_TOKEN differ"
                           : "they could not reach this host over TCP: see their errors");
            rc = -FI_ETIMEDOUT;
            break;
        }
        fd = accept4(lfd, (struct sockaddr *)&from, &fl, SOCK_CLOEXEC);
        if (fd < 0) continue;
        if (from.ss_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)&from)->sin_addr, who, sizeof who);
        else if (from.ss_family == AF_INET6)
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&from)->sin6_addr, who, sizeof who);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        {
            uint64_t hd = efax_now_ns() + 5000000000ull;
            if (hd > deadline) hd = deadline;
            if (efax__io(fd, &h, sizeof h, false, hd)) {
                close(fd);
                continue;
            }
        }
        memset(&rep, 0, sizeof rep);
        rep.magic = EFAX__BOOT_MAGIC;
        rep.wire = EFAX_WIRE_VERSION;
        rep.status = efax__boot_hello_check(&h, b->token, b->size, b->fds, why, sizeof why);
        if (rep.status) { /* refused: tell the peer why, then drop it (or give up) */
            efax__blog(b, rep.status == 1 ? 1 : 0, "rendezvous: %s (from %s)", why, who);
            if (rep.status == 1) rep.status = -EFAX_E_BOOT;
            efax__io(fd, &rep, sizeof rep, true, deadline);
            close(fd);
            if (rep.status == -EFAX_E_BOOT && (h.magic != EFAX__BOOT_MAGIC || h.token != b->token)) continue;
            rc = rep.status;
            break;
        }
        b->fds[h.rank] = fd;
        joined++;
    }
    close(lfd);
    if (rc) return rc;
    memset(&rep, 0, sizeof rep);
    rep.magic = EFAX__BOOT_MAGIC;
    rep.wire = EFAX_WIRE_VERSION;
    for (i = 1; i < b->size; i++)
        if ((rc = efax__io(b->fds[i], &rep, sizeof rep, true, deadline))) return rc;
    return 0;
}

/* One try to join rank 0 at address a. 0: joined (b->fd set). 1: nobody there, or a stranger
   that refused us (why in last), so try elsewhere. Negative: give up (logged). */
EFAX_PRIVATE int efax__tcp_try(efax_boot *b, const struct addrinfo *a, const char *root, uint64_t deadline,
                               bool stranger_ok, char *last, size_t ll) {
    int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), err = 0, one = 1, rc, ms;
    socklen_t el = sizeof err;
    struct pollfd pf;
    efax__boot_hello h;
    efax__boot_reply rep;
    if (fd < 0) {
        snprintf(last, ll, "socket: %s", strerror(errno));
        return 1;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) && errno != EINPROGRESS) {
        snprintf(last, ll, "%s", strerror(errno));
        close(fd);
        return 1;
    }
    pf.fd = fd;
    pf.events = POLLOUT;
    pf.revents = 0;
    ms = efax_remaining_ms(deadline);
    if (poll(&pf, 1, ms < 1000 ? ms : 1000) <= 0) {
        snprintf(last, ll, "connect timed out");
        close(fd);
        return 1;
    }
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err) {
        snprintf(last, ll, "%s", strerror(err));
        close(fd);
        return 1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    memset(&h, 0, sizeof h);
    h.magic = EFAX__BOOT_MAGIC;
    h.wire = EFAX_WIRE_VERSION;
    h.token = b->token;
    h.rank = b->rank;
    h.size = b->size;
    if ((rc = efax__io(fd, &h, sizeof h, true, deadline)) ||
        (rc = efax__io(fd, &rep, sizeof rep, false, deadline))) {
        close(fd);
        if (stranger_ok) {
            snprintf(last, ll, "a listener that is not our rank 0");
            return 1;
        }
        efax__blog(b, 0,
                   "rendezvous at %s: rank 0 closed the connection or did not answer (%s): "
                   "check that EFAX_TOKEN and EFAX_SIZE are the same on every rank",
                   root, efax_strerror(rc));
        return rc == -FI_ETIMEDOUT ? rc : -EFAX_E_BOOT;
    }
    if (rep.magic == EFAX__BOOT_MAGIC && !rep.status) {
        b->fd = fd;
        return 0;
    }
    close(fd);
    if (rep.magic == EFAX__BOOT_MAGIC && (rep.status == -EFAX_E_VERSION || rep.wire != EFAX_WIRE_VERSION)) {
        efax__blog(b, 0,
                   "rendezvous: rank 0 runs efax wire version %u, this rank %u: build every rank from "
                   "the same efax.h",
                   rep.wire, EFAX_WIRE_VERSION);
        return -EFAX_E_VERSION;
    }
    if (stranger_ok) {
        snprintf(last, ll, "another job's rank 0 refused us");
        return 1;
    }
    efax__blog(b, 0, "rendezvous at %s refused rank %d: %s (check EFAX_TOKEN, EFAX_SIZE, EFAX_RANK)", root,
               b->rank, efax_strerror(rep.status));
    return -EFAX_E_BOOT;
}

/* Joins rank 0 at any of the addresses ai, retrying until the deadline (rank 0 may start
   after us). */
EFAX_PRIVATE int efax__tcp_dial(efax_boot *b, const struct addrinfo *ai, const char *root, uint64_t deadline,
                                bool stranger_ok) {
    char last[128] = "no attempt";
    const struct addrinfo *a;
    int rc;
    for (;;) {
        for (a = ai; a; a = a->ai_next)
            if ((rc = efax__tcp_try(b, a, root, deadline, stranger_ok, last, sizeof last)) <= 0) return rc;
        if (efax_remaining_ms(deadline) == 0) break;
        usleep(100000);
    }
    efax__blog(b, 0,
               "rendezvous: could not reach rank 0 at %s within %d ms (last error: %s); check the "
               "address, that rank 0 is running, and that TCP between the hosts is allowed",
               root, b->timeout_ms, last);
    return -FI_ETIMEDOUT;
}

EFAX_PRIVATE int efax__tcp_join(efax_boot *b, const char *root, uint64_t deadline) {
    char host[256], port[16], where[300];
    struct addrinfo hints, *ai = NULL;
    int rc;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    if (efax__split_hostport(root, host, sizeof host, port, sizeof port)) {
        efax__blog(b, 0, "EFAX_ROOT='%s' is not host:port (e.g. 10.0.0.1:29500 or [fe80::1]:29500)", root);
        return -EFAX_E_USAGE;
    }
    if ((rc = getaddrinfo(host, port, &hints, &ai)) || !ai) {
        efax__blog(b, 0, "EFAX_ROOT=%s: cannot resolve '%s': %s", root, host, gai_strerror(rc));
        return -EFAX_E_BOOT;
    }
    snprintf(where, sizeof where, "EFAX_ROOT=%s", root);
    if (b->rank == 0) {
        rc = efax__tcp_listen(b, where, ai);
        if (rc >= 0) rc = efax__tcp_root(b, where, rc, deadline);
    } else {
        rc = efax__tcp_dial(b, ai, where, deadline, false);
    }
    freeaddrinfo(ai);
    return rc;
}

EFAX_PRIVATE int efax__tcp_allgather(efax_boot *b, const void *in, size_t len, void *out, int timeout_ms) {
    uint64_t deadline = efax_deadline_ns(timeout_ms);
    uint64_t hdr;
    int i, rc;
    memcpy((uint8_t *)out + (size_t)b->rank * len, in, len);
    b->idle_rc = 0;
    if (b->rank != 0) {
        hdr = len;
        if ((rc = efax__io_b(b, b->fd, &hdr, sizeof hdr, true, deadline)) ||
            (rc = efax__io_b(b, b->fd, (void *)(uintptr_t)in, len, true, deadline)) ||
            (rc = efax__io_b(b, b->fd, out, len * (size_t)b->size, false, deadline))) {
            if (rc == b->idle_rc)
                efax__blog(b, 0,
                           "rendezvous all-gather: this rank's fabric context failed while it waited: %s",
                           efax_strerror(rc));
            else
                efax__blog(b, 0, "rendezvous all-gather: lost rank 0 (%s): %s", b->hosts ? b->hosts[0] : "?",
                           rc == -FI_ETIMEDOUT ? "timed out" : "it exited or crashed");
            return rc;
        }
        return 0;
    }
    for (i = 1; i < b->size; i++) {
        rc = efax__io_b(b, b->fds[i], &hdr, sizeof hdr, false, deadline);
        if (!rc && hdr != len) {
            efax__blog(b, 0,
                       "rendezvous all-gather: rank %d sent %llu bytes, rank 0 expected %zu: the "
                       "ranks run different programs or call collectives in another order",
                       i, (unsigned long long)hdr, len);
            return -EFAX_E_BOOT;
        }
        if (!rc) rc = efax__io_b(b, b->fds[i], (uint8_t *)out + (size_t)i * len, len, false, deadline);
        if (rc && rc == b->idle_rc) {
            efax__blog(
                b, 0,
                "rendezvous all-gather: this rank's fabric context failed while it waited for rank %d: %s", i,
                efax_strerror(rc));
            return rc;
        }
        if (rc) {
            efax__blog(b, 0, "rendezvous all-gather: lost rank %d (%s): %s", i, b->hosts ? b->hosts[i] : "?",
                       rc == -FI_ETIMEDOUT ? "timed out" : "it exited or crashed");
            return rc;
        }
    }
    for (i = 1; i < b->size; i++)
        if ((rc = efax__io(b->fds[i], out, len * (size_t)b->size, true, deadline))) {
            efax__blog(b, 0, "rendezvous all-gather: lost rank %d while sending", i);
            return rc;
        }
    return 0;
}

// >>bootstrap: PMIx (implementation) -------------------------------------------------------------

#ifndef EFAX_NO_PMIX
/* A process id in our namespace (PMIX_LOAD_PROCID trips -Waddress in C++). */
EFAX_PRIVATE void efax__pmix_proc(pmix_proc_t *p, const pmix_proc_t *me, pmix_rank_t rank) {
    PMIX_PROC_CONSTRUCT(p);
    memcpy(p->nspace, me->nspace, sizeof p->nspace);
    p->rank = rank;
}

EFAX_PRIVATE int efax__pmix_init(efax_boot *b) {
    pmix_proc_t *me = (pmix_proc_t *)calloc(1, sizeof(pmix_proc_t)), wild;
    pmix_value_t *v = NULL;
    pmix_status_t st;
    if (!me) return -FI_ENOMEM;
    b->pmix_proc = me;
    st = PMIx_Init(me, NULL, 0);
    if (st != PMIX_SUCCESS) {
        efax__blog(b, 0, "PMIx_Init failed: %s", PMIx_Error_string(st));
        free(me);
        b->pmix_proc = NULL;
        return -EFAX_E_BOOT;
    }
    b->kind = EFAX_BOOT_PMIX;
    b->rank = (int)me->rank;
    efax__pmix_proc(&wild, me, PMIX_RANK_WILDCARD);
    st = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v);
    if (st != PMIX_SUCCESS || !v) {
        efax__blog(b, 0, "PMIx_Get(PMIX_JOB_SIZE) failed: %s", PMIx_Error_string(st));
        return -EFAX_E_BOOT;
    }
    b->size = v->type == PMIX_UINT32 ? (int)v->data.uint32 : v->type == PMIX_INT ? v->data.integer : 0;
    PMIX_VALUE_RELEASE(v);
    if (b->size <= 0 || b->rank < 0 || b->rank >= b->size) {
        efax__blog(b, 0, "PMIx reports rank %d of %d", b->rank, b->size);
        return -EFAX_E_BOOT;
    }
    v = NULL;
    if (PMIx_Get(me, PMIX_HOSTNAME, NULL, 0, &v) == PMIX_SUCCESS && v && v->type == PMIX_STRING &&
        v->data.string)
        efax__copy(b->host, sizeof b->host, v->data.string);
    if (v) PMIX_VALUE_RELEASE(v);
    return 0;
}

EFAX_PRIVATE int efax__pmix_fence(efax_boot *b, bool collect, int timeout_ms) {
    pmix_proc_t wild;
    pmix_info_t info[2];
    bool flag = collect;
    int tmo = (timeout_ms + 999) / 1000;
    pmix_status_t st;
    efax__pmix_proc(&wild, (const pmix_proc_t *)b->pmix_proc, PMIX_RANK_WILDCARD);
    PMIX_INFO_CONSTRUCT(&info[0]);
    PMIX_INFO_CONSTRUCT(&info[1]);
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &flag, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &tmo, PMIX_INT);
    st = PMIx_Fence(&wild, 1, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (st != PMIX_SUCCESS) {
        efax__blog(b, 0, "PMIx_Fence failed: %s%s", PMIx_Error_string(st),
                   st == PMIX_ERR_TIMEOUT ? " (a rank did not arrive in time)" : "");
        return st == PMIX_ERR_TIMEOUT ? -FI_ETIMEDOUT : -EFAX_E_BOOT;
    }
    return 0;
}

/* 64 unpredictable bits: a rendezvous token that only this job's ranks learn (through PMIx). */
EFAX_PRIVATE uint64_t efax__random64(void) {
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &v, sizeof v) != (ssize_t)sizeof v) v = 0;
        close(fd);
    }
    if (!v) v = efax_now_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    return v;
}

/* Appends " a.b.c.d" to the bootstrap card unless it is there already (or is loopback and
   loopback_ok is false); returns the new length. */
EFAX_PRIVATE size_t efax__card_add(char *card, size_t cap, size_t l, const struct in_addr *ip,
                                   bool loopback_ok) {
    char a[INET_ADDRSTRLEN + 2] = " ";
    size_t n;
    if (!loopback_ok && (ntohl(ip->s_addr) >> 24) == 127) return l;
    inet_ntop(AF_INET, ip, a + 1, INET_ADDRSTRLEN);
    n = strlen(a);
    a[n] = ' ';
    a[n + 1] = 0;
    card[l] = ' '; /* the card ends in a space while we search, so every address matches whole */
    card[l + 1] = 0;
    if (strstr(card, a) || l + n + 2 >= cap) {
        card[l] = 0;
        return l;
    }
    a[n] = 0;
    memcpy(card + l, a, n + 1);
    return l + n;
}

/* Rank 0's card for the star: a listening socket on an ephemeral port (*lfd), and in card "token
   port addr...": what this host's name resolves to first (the address the cluster knows it by),
   then every other up IPv4 address, loopback last (for ranks on this host). */
EFAX_PRIVATE int efax__pmix_card(efax_boot *b, char *card, size_t cap, int *lfd) {
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    struct addrinfo any, hints, *res = NULL, *a;
    struct ifaddrs *ifs = NULL, *i;
    char hn[256];
    size_t l;
    int pass;
    b->token = efax__random64();
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    memset(&any, 0, sizeof any);
    any.ai_family = AF_INET;
    any.ai_addr = (struct sockaddr *)&sa;
    any.ai_addrlen = sizeof sa;
    if ((*lfd = efax__tcp_listen(b, "an ephemeral port (PMIx bootstrap)", &any)) < 0) return *lfd;
    getsockname(*lfd, (struct sockaddr *)&sa, &sl);
    l = (size_t)snprintf(card, cap, "%016llx %u", (unsigned long long)b->token, (unsigned)ntohs(sa.sin_port));
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (!gethostname(hn, sizeof hn) && !getaddrinfo(hn, NULL, &hints, &res)) {
        for (a = res; a; a = a->ai_next)
            l = efax__card_add(card, cap, l, &((struct sockaddr_in *)a->ai_addr)->sin_addr, false);
        freeaddrinfo(res);
    }
    if (!getifaddrs(&ifs)) {
        for (pass = 0; pass < 2; pass++)
            for (i = ifs; i; i = i->ifa_next)
                if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
                    !(i->ifa_flags & IFF_LOOPBACK) == !pass)
                    l = efax__card_add(card, cap, l, &((struct sockaddr_in *)i->ifa_addr)->sin_addr,
                                       pass == 1);
        freeifaddrs(ifs);
    }
    return 0;
}

/* Rank 0 publishes its card under efax.boot. */
EFAX_PRIVATE int efax__pmix_publish(efax_boot *b, char *card) {
    pmix_value_t val;
    pmix_status_t st;
    PMIX_VALUE_CONSTRUCT(&val);
    val.type = PMIX_STRING;
    val.data.string = card;
    st = PMIx_Put(PMIX_GLOBAL, "efax.boot", &val);
    if (st == PMIX_SUCCESS) st = PMIx_Commit();
    if (st != PMIX_SUCCESS) {
        efax__blog(b, 0, "PMIx_Put/Commit(efax.boot) failed: %s", PMIx_Error_string(st));
        return -EFAX_E_BOOT;
    }
    return 0;
}

/* Every other rank reads rank 0's card (after the fence) and dials its star. */
EFAX_PRIVATE int efax__pmix_join(efax_boot *b, uint64_t deadline) {
    char card[1024], where[1200], a[INET_ADDRSTRLEN + 1];
    pmix_proc_t r0;
    pmix_value_t *v = NULL;
    pmix_status_t st;
    struct sockaddr_in sa[32];
    struct addrinfo ai[32];
    unsigned long long token;
    unsigned port;
    int n = 0, off = 0;
    const char *addrs;
    efax__pmix_proc(&r0, (pmix_proc_t *)b->pmix_proc, 0);
    st = PMIx_Get(&r0, "efax.boot", NULL, 0, &v);
    if (st != PMIX_SUCCESS || !v || v->type != PMIX_STRING || !v->data.string) {
        efax__blog(b, 0, "PMIx_Get(efax.boot) from rank 0: %s",
                   st != PMIX_SUCCESS ? PMIx_Error_string(st) : "not a string");
        if (v) PMIX_VALUE_RELEASE(v);
        return -EFAX_E_BOOT;
    }
    efax__copy(card, sizeof card, v->data.string);
    PMIX_VALUE_RELEASE(v);
    if (sscanf(card, "%llx %u%n", &token, &port, &off) != 2 || port == 0 || port > 65535) {
        efax__blog(b, 0, "PMIx: rank 0 published '%s' under efax.boot: the ranks run different programs",
                   card);
        return -EFAX_E_BOOT;
    }
    b->token = token;
    addrs = card + off;
    memset(ai, 0, sizeof ai);
    for (const char *c = addrs; n < 32 && sscanf(c, " %16s%n", a, &off) == 1; c += off) {
        memset(&sa[n], 0, sizeof sa[n]);
        sa[n].sin_family = AF_INET;
        sa[n].sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, a, &sa[n].sin_addr) != 1) continue;
        ai[n].ai_family = AF_INET;
        ai[n].ai_socktype = SOCK_STREAM;
        ai[n].ai_addr = (struct sockaddr *)&sa[n];
        ai[n].ai_addrlen = sizeof sa[n];
        if (n) ai[n - 1].ai_next = &ai[n];
        n++;
    }
    if (!n) {
        efax__blog(b, 0, "PMIx: rank 0 found no IPv4 address to offer for the bootstrap (%s)", card);
        return -EFAX_E_BOOT;
    }
    snprintf(where, sizeof where, "rank 0's PMIx bootstrap port %u at%s", port, addrs);
    return efax__tcp_dial(b, ai, where, deadline, true);
}

/* PMIx keeps every key it is given for the life of the job, so a collective run as a put and a
   fence would grow memory with every call, without bound in a long sweep. PMIx is used once: rank
   0 publishes a token, a port and its IPv4 addresses (efax__pmix_card, efax__pmix_publish); every
   rank joins rank 0 over TCP (efax__pmix_join); all collectives then run on that star, exactly as
   with EFAX_ROOT: no growth, and a dead rank is seen at once (closed socket). */
EFAX_PRIVATE int efax__pmix_star(efax_boot *b) {
    uint64_t deadline = efax_deadline_ns(b->timeout_ms);
    char card[1024];
    int lfd = -1, rc = 0;
    if (b->size == 1) return 0;
    if (b->rank == 0 && !(rc = efax__pmix_card(b, card, sizeof card, &lfd))) rc = efax__pmix_publish(b, card);
    if (!rc) rc = efax__pmix_fence(b, true, b->timeout_ms);
    if (rc) {
        if (lfd >= 0) close(lfd);
        return rc;
    }
    if (b->rank == 0) return efax__tcp_root(b, "this host's PMIx bootstrap port", lfd, deadline);
    return efax__pmix_join(b, deadline);
}
#endif

// >>bootstrap (implementation) -----------------------------------------------------------------

/* The one place an efax_boot_desc's defaults are resolved: timeout_ms ($EFAX_TIMEOUT_MS, else
   EFAX_TIMEOUT_MS_DEFAULT) and force ($EFAX_BOOTSTRAP: pmix or tcp). */
EFAX_PRIVATE int efax__boot_defaults(efax_boot *b, const efax_boot_desc *desc, efax_boot_desc *d) {
    int rc;
    if (desc)
        *d = *desc;
    else
        memset(d, 0, sizeof *d);
    b->log = d->log; /* errors below are logged */
    b->log_user = d->log_user;
    if ((rc = efax__timeout_default(&d->timeout_ms))) return rc;
    if (d->force && !strcmp(d->force, "single")) return 0;
    if (!d->force) d->force = getenv("EFAX_BOOTSTRAP");
    if (d->force && *d->force && strcmp(d->force, "pmix") && strcmp(d->force, "tcp")) {
        efax__blog(b, 0, "EFAX_BOOTSTRAP='%s': expected pmix or tcp", d->force);
        return -EFAX_E_USAGE;
    }
    return 0;
}

/* The TCP rendezvous from EFAX_RANK, EFAX_SIZE, EFAX_ROOT and EFAX_TOKEN. */
EFAX_PRIVATE int efax__boot_tcp(efax_boot *b, const char *root) {
    uint64_t deadline = efax_deadline_ns(b->timeout_ms);
    char h[256], pt[16];
    int rc;
    if (!root || !*root || !getenv("EFAX_RANK") || !getenv("EFAX_SIZE")) {
        efax__blog(b, 0,
                   "the TCP rendezvous needs EFAX_RANK, EFAX_SIZE and EFAX_ROOT=host:port on every rank");
        return -EFAX_E_LAUNCH;
    }
    if ((rc = efax__env_int("EFAX_SIZE", 1, 1, EFAX_IMM_MAX_RANKS, &b->size))) return rc;
    if ((rc = efax__env_int("EFAX_RANK", 0, 0, b->size - 1, &b->rank))) return rc;
    if (efax__split_hostport(root, h, sizeof h, pt, sizeof pt)) {
        efax__blog(b, 0, "EFAX_ROOT='%s' is not host:port (e.g. 10.0.0.1:29500 or [fe80::1]:29500)", root);
        return -EFAX_E_USAGE;
    }
    if (!getenv("EFAX_TOKEN"))
        efax__blog(b, 1, "EFAX_TOKEN is not set: the rendezvous accepts any peer that knows EFAX_ROOT");
    b->token = efax__hash(getenv("EFAX_TOKEN"));
    b->kind = EFAX_BOOT_TCP;
    return b->size > 1 ? efax__tcp_join(b, root, deadline) : 0;
}

/* Every rank's host name: local rank and size, and names for messages. Collective. */
EFAX_PRIVATE int efax__boot_hosts(efax_boot *b) {
    const char *node = getenv("EFAX_NODE");
    int rc, i;
    if (!b->host[0] && node && *node)
        efax__copy(b->host, sizeof b->host, node); /* PMIx may have named it */
    else if (!b->host[0] && gethostname(b->host, sizeof b->host))
        efax__copy(b->host, sizeof b->host, "?");
    b->host[sizeof b->host - 1] = 0;
    if (!(b->hosts = (char(*)[64])calloc((size_t)b->size, 64))) return -FI_ENOMEM;
    if ((rc = efax_boot_allgather(b, b->host, 64, b->hosts, -1))) return rc;
    b->local_rank = 0, b->local_size = 0;
    for (i = 0; i < b->size; i++) {
        b->hosts[i][63] = 0;
        if (!strcmp(b->hosts[i], b->host)) {
            if (i < b->rank) b->local_rank++;
            b->local_size++;
        }
    }
    return 0;
}

EFAX_API int efax_boot_init(efax_boot *b, const efax_boot_desc *desc) {
    efax_boot_desc d;
    const char *root = getenv("EFAX_ROOT");
    int rc;
    memset(b, 0, sizeof *b);
    b->fd = -1;
    b->size = 1;
    if ((rc = efax__boot_defaults(b, desc, &d))) return rc;
    b->timeout_ms = d.timeout_ms;
    if (d.force && !strcmp(d.force, "single")) {
        b->kind = EFAX_BOOT_SINGLE;
    } else if (!strcmp(d.force ? d.force : "", "tcp") || (!(d.force && *d.force) && root && *root)) {
        rc = efax__boot_tcp(b, root);
    } else if ((d.force && !strcmp(d.force, "pmix")) || getenv("PMIX_NAMESPACE") || getenv("PMIX_RANK")) {
#ifndef EFAX_NO_PMIX
        if (!(rc = efax__pmix_init(b))) rc = efax__pmix_star(b);
#else
        efax__blog(b, 0,
                   "launched under PMIx, but this program was built with EFAX_NO_PMIX: rebuild "
                   "without it (and with $(pkg-config --cflags --libs pmix)) or use EFAX_ROOT");
        return -EFAX_E_LAUNCH;
#endif
    } else if (d.allow_single) {
        b->kind = EFAX_BOOT_SINGLE;
    } else {
        efax__blog(b, 0,
                   "no launcher found: start every rank with `mpirun -np N PROG` (Open MPI), "
                   "`srun --mpi=pmix -n N PROG` (Slurm) or `prterun`, or set EFAX_RANK, EFAX_SIZE, "
                   "EFAX_ROOT=host:port and EFAX_TOKEN on every rank");
        return -EFAX_E_LAUNCH;
    }
    if (!rc) rc = efax__boot_hosts(b);
    if (rc) efax_boot_deinit(b);
    return rc;
}

EFAX_API void efax_boot_deinit(efax_boot *b) {
    int i;
    if (!b) return;
    if (b->fds) {
        for (i = 0; i < b->size; i++)
            if (b->fds[i] >= 0) close(b->fds[i]);
        free(b->fds);
    }
    if (b->fd >= 0) close(b->fd);
#ifndef EFAX_NO_PMIX
    if (b->pmix_proc) {
        PMIx_Finalize(NULL, 0);
        free(b->pmix_proc);
    }
#endif
    free(b->hosts);
    memset(b, 0, sizeof *b);
    b->fd = -1;
}

EFAX_API int efax_boot_allgather(efax_boot *b, const void *in, size_t len, void *out, int timeout_ms) {
    if (timeout_ms < 0) timeout_ms = b->timeout_ms;
    switch (b->kind) {
    case EFAX_BOOT_SINGLE: memcpy(out, in, len); return 0;
    case EFAX_BOOT_TCP:
    case EFAX_BOOT_PMIX: /* collectives run on the TCP star PMIx helped wire (efax__pmix_star) */
        if (b->size == 1) {
            memcpy(out, in, len);
            return 0;
        }
        return efax__tcp_allgather(b, in, len, out, timeout_ms);
    default: return -EFAX_E_BOOT;
    }
}

EFAX_API int efax_boot_barrier(efax_boot *b, int timeout_ms) {
    if (timeout_ms < 0) timeout_ms = b->timeout_ms;
    {
        uint8_t one = 1, *all = (uint8_t *)malloc((size_t)b->size);
        int rc;
        if (!all) return -FI_ENOMEM;
        rc = efax_boot_allgather(b, &one, 1, all, timeout_ms);
        free(all);
        return rc;
    }
}

EFAX_API int efax_boot_sum(efax_boot *b, int64_t value, int64_t *sum, int timeout_ms) {
    int64_t *all = (int64_t *)malloc(sizeof(int64_t) * (size_t)b->size);
    int rc, i;
    if (!all) return -FI_ENOMEM;
    rc = efax_boot_allgather(b, &value, sizeof value, all, timeout_ms);
    *sum = 0;
    for (i = 0; !rc && i < b->size; i++) *sum += all[i];
    free(all);
    return rc;
}

// >>topology (implementation) ------------------------------------------------------------------

/* The hints behind every fi_getinfo efax makes. Beyond the capabilities, what efax asks for:
   - cq_data_size = 4: efax's immediate data is 32 bits and efa carries exactly 4 bytes
     (fi_efa(7); prov/efa efa_prov_info.c). Asked for in the hints, as fabtests (common/shared.c)
     and aws-ofi-nccl do, so a provider with less never appears rather than failing after it
     was opened (efax_ctx_init still checks what it got).
   - msg_order FI_ORDER_SAS on transmit and receive, when `sas`: efa's transport (SRD) is
     unordered and efa grants send-after-send only to hints that ask (efa_user_info.c
     intersects the hints' msg_order with what it can do); aws-ofi-nccl asks too. tcp and shm
     grant it unasked. efax does not rely on it (its receivers identify a message by its
     immediate data, never by arrival order); it makes efa behave as the others do.
     efax__getinfo asks again without it when a provider cannot order.
   prov "efa-direct" asks for that fabric of efa (efax__is_efa_direct): no FI_TAGGED, which it lacks
   (efax's control messages are then 0-byte writes), and no FI_RX_CQ_DATA, so efa offers it only
   where the device has unsolicited write recv (efa_user_info.c efa_user_info_alter_direct): a
   write with immediate data then consumes no receive at the target, as efax's writes need. Which
   fabric is chosen is efax__getinfo's business. */
EFAX_PRIVATE struct fi_info *efax__hints(const char *prov, bool hmem, bool sas) {
    struct fi_info *h = fi_allocinfo();
    bool direct = prov && !strcasecmp(prov, "efa-direct");
    if (!h) return NULL;
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_SEND | FI_RECV | FI_WRITE | FI_REMOTE_WRITE;
    if (direct) h->caps &= ~(uint64_t)FI_TAGGED;
    /* The modes efax can honour: operation contexts are efax_op (fi_context2 first) and
       iovecs live in the op until completion. */
    h->mode = FI_CONTEXT | FI_CONTEXT2 | FI_ASYNC_IOV;
    h->domain_attr->mr_mode =
        FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    h->domain_attr->cq_data_size = 4;
    if (sas) {
        h->tx_attr->msg_order = FI_ORDER_SAS;
        h->rx_attr->msg_order = FI_ORDER_SAS;
    }
    if (hmem) {
        h->caps |= FI_HMEM;
        h->domain_attr->mr_mode |= FI_MR_HMEM;
    }
    if (prov && *prov && !(h->fabric_attr->prov_name = strdup(direct ? "efa" : prov))) {
        fi_freeinfo(h);
        return NULL;
    }
    if (direct && !(h->fabric_attr->name = strdup("efa-direct"))) {
        fi_freeinfo(h);
        return NULL;
    }
    return h;
}

/* True for an entry of libfabric 2.x's "efa-direct" fabric. It is listed before "efa" with the
   same domain names (prov/efa/src/efa_prov.c), so a choice by domain name alone could take it.
   It carries only what the device does (prov/efa/docs/efa_fabric_comparison.md): no FI_TAGGED,
   messages of at most the MTU, nothing emulated, the target's AV holding the initiator before an
   RMA. efax takes it only when asked by name (--provider efa-direct, efax__getinfo); "efa" means
   efa's RDM protocol. The fabric is matched by name, not by hints: libfabric 1.x named efa's
   fabric after the device's GID prefix ("EFA-fe80::..."), so a hint of "efa" would hide every
   1.x NIC. */
EFAX_PRIVATE bool efax__is_efa_direct(const struct fi_info *fi) {
    const char *f = fi->fabric_attr ? fi->fabric_attr->name : NULL;
    return f && !strcasecmp(f, "efa-direct");
}

/* fi_getinfo with efax's hints: first asking for send-after-send ordering, then, if the
   provider offers nothing so, without it. efa-direct entries are kept only when prov names it,
   and only they then. *out is NULL when nothing matches. */
EFAX_PRIVATE int efax__getinfo(const char *prov, bool hmem, struct fi_info **out) {
    int rc = 0, pass;
    bool direct = prov && !strcasecmp(prov, "efa-direct");
    *out = NULL;
    for (pass = 0; pass < 2 && !*out; pass++) {
        struct fi_info *h = efax__hints(prov, hmem, pass == 0), **pp;
        if (!h) return -FI_ENOMEM;
        rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, h, out);
        fi_freeinfo(h);
        if (rc == -FI_ENODATA) *out = NULL, rc = 0;
        if (rc) return rc;
        for (pp = out; *pp;) {
            struct fi_info *fi = *pp;
            if (efax__is_efa_direct(fi) == direct) {
                pp = &fi->next;
                continue;
            }
            *pp = fi->next;
            fi->next = NULL;
            fi_freeinfo(fi);
        }
    }
    return rc;
}

EFAX_API int efax_read_sysfs(const char *path, char *buf, size_t len) {
    FILE *f;
    size_t n;
    if (!len) return -FI_EINVAL;
    f = fopen(path, "r");
    if (!f) return -FI_ENOENT;
    n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = 0;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = 0;
    return 0;
}

EFAX_PRIVATE bool efax__is_pci(const char *s) {
    unsigned a, b, c, d;
    char tail;
    return strlen(s) == 12 && sscanf(s, "%4x:%2x:%2x.%1x%c", &a, &b, &c, &d, &tail) == 4;
}

/* The PCI device a network interface sits on: the deepest PCI component of its sysfs path. */
EFAX_PRIVATE void efax__if_pci(const char *ifname, char *pci, size_t len) {
    char path[PATH_MAX], real[PATH_MAX], *tok, *save = NULL;
    pci[0] = 0;
    snprintf(path, sizeof path, "%s/sys/class/net/%s/device", efax_topo_sysfs_root(), ifname);
    if (!realpath(path, real)) return;
    for (tok = strtok_r(real, "/", &save); tok; tok = strtok_r(NULL, "/", &save))
        if (efax__is_pci(tok)) efax__copy(pci, len, tok);
}

EFAX_PRIVATE void efax__fill_info(const struct fi_info *fi, efax_nic_info *n) {
    char path[PATH_MAX], buf[64];
    memset(n, 0, sizeof *n);
    efax__copy(n->provider, sizeof n->provider, fi->fabric_attr->prov_name);
    efax__copy(n->name, sizeof n->name, fi->domain_attr->name);
    efax__copy(n->fabric, sizeof n->fabric, fi->fabric_attr->name);
    n->numa = -1;
    n->efa_shm = n->emulated_write = n->cuda_api = n->gpudirect = n->unsolicited_write_recv = -1;
    n->caps = fi->caps;
    n->mode = fi->mode;
    n->mr_mode = (uint64_t)fi->domain_attr->mr_mode;
    n->msg_order = fi->tx_attr ? fi->tx_attr->msg_order : 0;
    n->cq_data_size = fi->domain_attr->cq_data_size;
    n->max_msg_size = fi->ep_attr->max_msg_size;
    n->inject_size = fi->tx_attr->inject_size;
    n->inject_rma_size = fi->tx_attr->inject_size;
    n->max_rma_size = fi->ep_attr->max_msg_size;
    n->max_send_size = fi->ep_attr->max_msg_size;
    n->tx_size = fi->tx_attr->size;
    n->rx_size = fi->rx_attr->size;
    n->mr_key_size = fi->domain_attr->mr_key_size;
    n->addr_format = fi->addr_format;
    n->hmem = (fi->caps & FI_HMEM) != 0;
    n->loopback = !strcmp(n->name, "lo") || !strncmp(n->fabric, "127.", 4) || !strcmp(n->fabric, "::1/128");
    if (fi->nic && fi->nic->bus_attr && fi->nic->bus_attr->bus_type == FI_BUS_PCI) {
        const struct fi_pci_attr *p = &fi->nic->bus_attr->attr.pci;
        snprintf(n->pci, sizeof n->pci, "%04x:%02x:%02x.%x", p->domain_id, p->bus_id, p->device_id,
                 p->function_id);
    }
    if (fi->nic && fi->nic->link_attr && fi->nic->link_attr->speed)
        n->link_gbps = (double)fi->nic->link_attr->speed / 1e9;
    if (!n->pci[0]) efax__if_pci(n->name, n->pci, sizeof n->pci);
    if (n->link_gbps == 0) {
        snprintf(path, sizeof path, "%s/sys/class/net/%s/speed", efax_topo_sysfs_root(), n->name);
        if (!efax_read_sysfs(path, buf, sizeof buf) && atoi(buf) > 0) n->link_gbps = atoi(buf) / 1000.0;
    }
    /* A network interface with no device behind it (veth, bridge, tun, lo) reports a nominal
       speed (a veth says 10 Gbit/s) that no link enforces: the line rate is unknown there. */
    snprintf(path, sizeof path, "%s/sys/class/net/%s", efax_topo_sysfs_root(), n->name);
    if (access(path, F_OK) == 0) {
        snprintf(path, sizeof path, "%s/sys/class/net/%s/device", efax_topo_sysfs_root(), n->name);
        if (access(path, F_OK) != 0) n->link_gbps = 0;
    }
    if (n->pci[0]) n->numa = efax_topo_pci_numa(efax_topo_sysfs_root(), n->pci);
}

EFAX_API const char *efax_topo_sysfs_root(void) {
    const char *r = getenv("EFAX_SYSFS_ROOT");
    return r ? r : "";
}

EFAX_API int efax_topo_efa_devices(char *names, size_t len) {
    char dir[PATH_MAX], path[PATH_MAX + 300], vendor[32];
    DIR *dp;
    struct dirent *de;
    size_t u = 0;
    int n = 0;
    if (names && len) names[0] = 0;
    snprintf(dir, sizeof dir, "%s/sys/class/infiniband", efax_topo_sysfs_root());
    if (!(dp = opendir(dir))) return 0;
    while ((de = readdir(dp))) {
        if (de->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s/device/vendor", dir, de->d_name);
        if (efax_read_sysfs(path, vendor, sizeof vendor) || strcmp(vendor, "0x1d0f")) continue;
        n++;
        if (names && u < len) u += (size_t)snprintf(names + u, len - u, "%s%s", u ? "," : "", de->d_name);
    }
    closedir(dp);
    return n;
}

EFAX_PRIVATE int efax__cmp_pci(const void *a, const void *b) {
    return strcmp((const char *)a, (const char *)b);
}

EFAX_API int efax_topo_gpus(const char *root, char (*pci)[16], int max) {
    char dir[PATH_MAX], path[PATH_MAX + 300], v[32], c[32];
    char found[64][16];
    DIR *dp;
    struct dirent *de;
    int n = 0, i;
    snprintf(dir, sizeof dir, "%s/sys/bus/pci/devices", root ? root : "");
    if (!(dp = opendir(dir))) return 0;
    while ((de = readdir(dp)) && n < 64) {
        if (!efax__is_pci(de->d_name)) continue;
        snprintf(path, sizeof path, "%s/%s/vendor", dir, de->d_name);
        if (efax_read_sysfs(path, v, sizeof v) || strcmp(v, "0x10de")) continue;
        snprintf(path, sizeof path, "%s/%s/class", dir, de->d_name);
        if (efax_read_sysfs(path, c, sizeof c) || strncmp(c, "0x03", 4)) continue;
        efax__copy(found[n++], 16, de->d_name);
    }
    closedir(dp);
    qsort(found, (size_t)n, sizeof found[0], efax__cmp_pci);
    for (i = 0; pci && i < n && i < max; i++) memcpy(pci[i], found[i], 16);
    return n;
}

EFAX_API int efax_topo_pci_numa(const char *root, const char *pci) {
    char path[PATH_MAX], buf[32];
    if (!pci || !efax__is_pci(pci)) return -1;
    snprintf(path, sizeof path, "%s/sys/bus/pci/devices/%s/numa_node", root ? root : "", pci);
    return efax_read_sysfs(path, buf, sizeof buf) ? -1 : atoi(buf);
}

/* The PCI components of a device's sysfs path, from its host bridge ("pci0000:00") down:
   /sys/bus/pci/devices/X links to /sys/devices/pci0000:00/0000:00:01.0/.../X. Returns how
   many were written to comp, or 0. */
EFAX_PRIVATE int efax__pci_path(const char *root, const char *pci, char comp[][16], int max) {
    char path[PATH_MAX], real[PATH_MAX], *at, *next, *tok, *save = NULL;
    int n = 0;
    if (!pci || !efax__is_pci(pci)) return 0;
    snprintf(path, sizeof path, "%s/sys/bus/pci/devices/%s", root ? root : "", pci);
    if (!realpath(path, real) || !(at = strstr(real, "/sys/devices/pci"))) return 0;
    while ((next = strstr(at + 1, "/sys/devices/pci"))) at = next; /* the tree's own, under any root */
    for (tok = strtok_r(at + strlen("/sys/devices/"), "/", &save); tok && n < max;
         tok = strtok_r(NULL, "/", &save))
        efax__copy(comp[n++], 16, tok);
    return n;
}

EFAX_API int efax_topo_pci_depth(const char *root, const char *a, const char *b) {
    char ca[16][16], cb[16][16];
    int na = efax__pci_path(root, a, ca, 16), nb = efax__pci_path(root, b, cb, 16), d = 0;
    while (d < na && d < nb && !strcmp(ca[d], cb[d])) d++;
    return d;
}

/* Sorts NIC indices out[0..n) by the NICs' PCI addresses: shares of a switch's NICs are dealt in PCI
   order, the same on every rank of a host whatever order the provider listed them in. */
EFAX_PRIVATE void efax__sort_by_pci(const efax_nic_info *nics, int *out, int n) {
    int i, j;
    for (i = 1; i < n; i++)
        for (j = i; j > 0 && strcmp(nics[out[j - 1]].pci, nics[out[j]].pci) > 0; j--) {
            int t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
}

/* Of n NICs tied nearest GPU dev_pci at PCI depth best, the share of that GPU when other GPUs are
   as near them (behind the same PCIe switch): a p5en's or p6-b200's switch holds 2 GPUs and 2 NICs
   (aws-ofi-nccl platform-aws.cpp, which sets NCCL_NETDEVS_POLICY=max:1 there), and both GPUs'
   ranks taking both NICs would each be half as fast as it could. The i-th of g such GPUs (in PCI
   order, as every rank numbers them) takes the NICs j with j mod g == i, when there are at least g
   NICs; fewer NICs than GPUs (a p4d: 2 GPUs, 1 NIC) are shared. *shares: how many GPUs took shares
   (1: none). Returns the new count. */
EFAX_PRIVATE int efax__near_share(const char *root, const efax_nic_info *nics, const char *dev_pci, int best,
                                  int *out, int n, int *shares) {
    char gpus[64][16];
    int ng = efax_topo_gpus(root, gpus, 64), g, mine = -1, peers = 0, k = 0, j;
    if (ng > 64) ng = 64;
    for (g = 0; g < ng; g++) {
        if (efax_topo_pci_depth(root, gpus[g], nics[out[0]].pci) < best) continue;
        if (!strcasecmp(gpus[g], dev_pci)) mine = peers;
        peers++;
    }
    *shares = 1;
    if (mine < 0 || peers < 2 || n < peers) return n;
    efax__sort_by_pci(nics, out, n);
    for (j = 0; j < n; j++)
        if (j % peers == mine) out[k++] = out[j];
    *shares = peers;
    return k;
}

/* efax_topo_near; *shares (may be NULL): how many GPUs share the nearest NICs out (1: this GPU's
   alone, or no GPU given). */
EFAX_PRIVATE int efax__topo_near(const char *root, const efax_nic_info *nics, int nnics, const char *dev_pci,
                                 int numa, int *out, int max, int *shares) {
    int i, n = 0, best = 0, one;
    if (!shares) shares = &one;
    *shares = 1;
    if (dev_pci && *dev_pci) {
        for (i = 0; i < nnics; i++) {
            int d = nics[i].pci[0] ? efax_topo_pci_depth(root, dev_pci, nics[i].pci) : 0;
            if (d == 0 || d < best) continue;
            if (d > best) n = 0, best = d;
            if (n < max) out[n++] = i;
        }
        return n > 1 ? efax__near_share(root, nics, dev_pci, best, out, n, shares) : n;
    }
    if (numa < 0) return 0;
    for (i = 0; i < nnics; i++)
        if (nics[i].numa == numa && n < max) out[n++] = i;
    return n;
}

EFAX_API int efax_topo_near(const char *root, const efax_nic_info *nics, int nnics, const char *dev_pci,
                            int numa, int *out, int max) {
    return efax__topo_near(root, nics, nnics, dev_pci, numa, out, max, NULL);
}

/* A NIC's switch key: its PCI path without the last two components (the NIC and the switch
   port above it), joined by '/'; "" when its path is unknown or too short to have a parent. */
EFAX_PRIVATE void efax__switch_key(const char *root, const char *pci, char *key, size_t len) {
    char comp[16][16];
    int n = efax__pci_path(root, pci, comp, 16), i;
    size_t u = 0;
    key[0] = 0;
    if (n < 2) return;
    if (n == 2) n = 3; /* a NIC straight under its host bridge: the bridge is its group */
    for (i = 0; i < n - 2 && u + 17 < len; i++)
        u += (size_t)snprintf(key + u, len - u, "%s%s", i ? "/" : "", comp[i]);
}

EFAX_API int efax_topo_switch_groups(const char *root, const efax_nic_info *nics, int nnics, int *group) {
    char(*key)[272] = NULL;
    int i, j, ngroups = 0;
    if (nnics <= 0) return 0;
    if (!(key = (char(*)[272])calloc((size_t)nnics, sizeof *key))) {
        for (i = 0; i < nnics; i++) group[i] = -1;
        return 0;
    }
    for (i = 0; i < nnics; i++) efax__switch_key(root, nics[i].pci, key[i], sizeof key[i]);
    /* group number = how many distinct keys sort before this one: the same on every rank */
    for (i = 0; i < nnics; i++) {
        group[i] = -1;
        if (!key[i][0]) continue;
        group[i] = 0;
        for (j = 0; j < nnics; j++) {
            int k;
            if (!key[j][0] || strcmp(key[j], key[i]) >= 0) continue;
            for (k = 0; k < j; k++)
                if (!strcmp(key[k], key[j])) break;
            if (k == j) group[i]++;
        }
        if (group[i] + 1 > ngroups) ngroups = group[i] + 1;
    }
    free(key);
    return ngroups;
}

EFAX_API int efax_topo_host_nics(const char *root, const efax_nic_info *nics, int nnics, int numa,
                                 int local_rank, int local_size, int *out, int max, char *why, size_t wl) {
    int group[256], cand[256], ncand = 0, ngroups, share, mine, i, j, n = 0;
    bool take[256];
    size_t u = 0;
    char list[160];
    if (why && wl) why[0] = 0;
    if (nnics <= 0 || nnics > 256 || (ngroups = efax_topo_switch_groups(root, nics, nnics, group)) == 0)
        return 0;
    if (local_size < 1) local_size = 1;
    if (local_rank < 0) local_rank = 0;
    for (j = 0; j < ngroups; j++) { /* the groups this rank may take: all, or those on its node */
        bool here = numa < 0;
        for (i = 0; i < nnics && !here; i++) here = group[i] == j && nics[i].numa == numa;
        if (here) cand[ncand++] = j;
    }
    if (ncand == 0) return 0; /* bound to a node without NICs: no preference */
    /* how many of the host's ranks share these groups: all of them, or those expected on this node */
    share = numa < 0 || ncand == ngroups ? local_size : (local_size * ncand + ngroups - 1) / ngroups;
    if (share < 1) share = 1;
    memset(take, 0, sizeof take);
    if (share >= ncand)
        take[cand[local_rank % ncand]] = true;
    else
        for (j = 0; j < ncand; j++) take[cand[j]] = j % share == local_rank % share;
    list[0] = 0;
    for (j = 0, mine = 0; j < ngroups; j++)
        if (take[j] && u + 8 < sizeof list)
            u += (size_t)snprintf(list + u, sizeof list - u, "%s%d", mine++ ? "," : "", j);
    for (i = 0; i < nnics; i++)
        if (group[i] >= 0 && take[group[i]] && n < max) out[n++] = i;
    /* more ranks than groups, unbound: the ranks that take one group share its NICs out when it has
       enough (a p6-b200: 4 groups of 2 NICs, 8 ranks: one NIC each, as efax_topo_near gives the two
       GPUs behind a switch), else share them all (a p4d: 1 NIC a group) */
    if (numa < 0 && share >= ncand && ncand > 0) {
        int peers = (local_size - 1 - local_rank % ncand) / ncand + 1, k = local_rank / ncand, j, m = 0;
        if (peers > 1 && n >= peers && k < peers) {
            efax__sort_by_pci(nics, out, n);
            for (j = 0; j < n; j++)
                if (j % peers == k) out[m++] = out[j];
            n = m;
            if (why && wl)
                snprintf(why, wl, "PCIe switch group %s of %d, NIC share %d of %d, local rank %d of %d", list,
                         ngroups, k + 1, peers, local_rank, local_size);
            return n;
        }
    }
    if (why && wl)
        snprintf(why, wl, "PCIe switch group%s %s of %d%s, local rank %d of %d", mine > 1 ? "s" : "", list,
                 ngroups, numa >= 0 && ncand < ngroups ? " on this NUMA node" : "", local_rank, local_size);
    return n;
}

/* NUMA node of the CPUs the caller may run on (<root>/sys/devices/system/cpu/cpuN/nodeK), or -1
   when they span several nodes or none is known: an unbound rank (mpirun --bind-to none, srun
   without binding) has no node of its own, and the CPU it happens to run on at start-up would
   pick NICs at random. */
EFAX_PRIVATE int efax__cpu_numa(const char *root) {
    char path[PATH_MAX];
    cpu_set_t set;
    int cpu, k, node = -1;
    if (sched_getaffinity(0, sizeof set, &set)) return -1;
    for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        int mine = -1;
        if (!CPU_ISSET(cpu, &set)) continue;
        for (k = 0; k < 64 && mine < 0; k++) {
            snprintf(path, sizeof path, "%s/sys/devices/system/cpu/cpu%d/node%d", root, cpu, k);
            if (access(path, F_OK) == 0) mine = k;
        }
        if (mine < 0 || (node >= 0 && mine != node)) return -1;
        node = mine;
    }
    return node;
}

/* One fi_info per domain: the first entry of each, preferring IPv4 addresses on tcp. */
EFAX_PRIVATE int efax__domains(struct fi_info *list, struct fi_info **pick, int max) {
    int n = 0, i;
    struct fi_info *fi;
    for (fi = list; fi; fi = fi->next) {
        for (i = 0; i < n; i++)
            if (!strcmp(pick[i]->domain_attr->name, fi->domain_attr->name)) break;
        if (i < n) {
            if (pick[i]->addr_format != FI_SOCKADDR_IN && fi->addr_format == FI_SOCKADDR_IN) pick[i] = fi;
            continue;
        }
        if (n < max) pick[n] = fi;
        n++;
    }
    return n;
}

EFAX_API int efax_topo_providers(char *buf, size_t len) {
    struct fi_info *list = NULL, *fi;
    size_t used = 0;
    int rc = efax__getinfo(NULL, false, &list);
    buf[0] = 0;
    if (rc) return rc;
    for (fi = list; fi; fi = fi->next) {
        char name[64];
        const char *p = fi->fabric_attr->prov_name;
        char *semi;
        efax__copy(name, sizeof name, p);
        if ((semi = strchr(name, ';'))) *semi = 0; /* "tcp;ofi_rxm" is asked for as "tcp" */
        if (!strncmp(name, "ofi_", 4)) continue;
        {
            /* skip names already listed */
            const char *q = buf;
            size_t nl = strlen(name);
            bool seen = false;
            while (*q) {
                if (!strncmp(q, name, nl) && (q[nl] == ',' || q[nl] == 0)) {
                    seen = true;
                    break;
                }
                q = strchr(q, ',');
                if (!q) break;
                q++;
            }
            if (seen) continue;
        }
        if (used + strlen(name) + 2 >= len) break;
        used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "," : "", name);
        if (!strcmp(name, "efa")) { /* efax__getinfo lists efa-direct only when asked by name */
            struct fi_info *d = NULL;
            if (efax__getinfo("efa-direct", false, &d) == 0 && d && used + 12 < len)
                used += (size_t)snprintf(buf + used, len - used, ",efa-direct");
            fi_freeinfo(d);
        }
    }
    fi_freeinfo(list);
    return 0;
}

EFAX_API int efax_topo_pick_provider(const char *want, char *buf, size_t len) {
    static const char *const order[] = {"efa", "tcp", "shm"};
    struct fi_info *list = NULL;
    unsigned i;
    if (!want || !*want) want = getenv("EFAX_PROVIDER");
    if (want && *want) {
        if (efax__getinfo(want, false, &list) == 0 && list) {
            fi_freeinfo(list);
            efax__copy(buf, len, want);
            return 0;
        }
        return -EFAX_E_NOPROV;
    }
    for (i = 0; i < sizeof order / sizeof order[0]; i++) {
        if (efax__getinfo(order[i], false, &list) == 0 && list) {
            fi_freeinfo(list);
            efax__copy(buf, len, order[i]);
            return 0;
        }
    }
    return -EFAX_E_NOPROV;
}

EFAX_API int efax_topo_list(const char *provider, efax_nic_info *out, int max, int *count) {
    char prov[32];
    struct fi_info *list = NULL, *pick[256];
    int rc, n, i;
    *count = 0;
    rc = efax_topo_pick_provider(provider, prov, sizeof prov);
    if (rc) return rc;
    rc = efax__getinfo(prov, false, &list);
    if (rc) return rc;
    if (!list) return -EFAX_E_NOPROV;
    n = efax__domains(list, pick, 256);
    if (n > 256) n = 256;
    for (i = 0; i < n && out && i < max; i++) efax__fill_info(pick[i], &out[i]);
    /* an FI_HMEM query tells whether device memory can be registered */
    if (out) {
        struct fi_info *hl = NULL, *fi;
        if (efax__getinfo(prov, true, &hl) == 0)
            for (fi = hl; fi; fi = fi->next)
                for (i = 0; i < n && i < max; i++)
                    if (!strcmp(out[i].name, fi->domain_attr->name)) out[i].hmem = true;
        fi_freeinfo(hl);
    }
    *count = n;
    fi_freeinfo(list);
    return 0;
}

// >>counters (implementation) ------------------------------------------------------------------

/* Inserts (name, value) into c, keeping names sorted; drops what does not fit. */
EFAX_PRIVATE void efax__osc_add(efax_os_counters *c, const char *name, uint64_t value) {
    int i = c->n, j;
    if (c->n >= EFAX_OS_COUNTERS_MAX || strlen(name) >= sizeof c->name[0]) return;
    while (i > 0 && strcmp(c->name[i - 1], name) > 0) i--;
    for (j = c->n; j > i; j--) {
        memcpy(c->name[j], c->name[j - 1], sizeof c->name[0]);
        c->value[j] = c->value[j - 1];
    }
    efax__copy(c->name[i], sizeof c->name[0], name);
    c->value[i] = value;
    c->n++;
}

/* Every file of dir holding one unsigned number, as a counter. Returns how many were read. */
EFAX_PRIVATE int efax__osc_dir(efax_os_counters *c, const char *dir) {
    char path[PATH_MAX], buf[64], *end;
    struct dirent *de;
    DIR *d = opendir(dir);
    if (!d) return 0;
    while ((de = readdir(d))) {
        unsigned long long v;
        if (de->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        /* hw_counters/lifespan is how long the kernel caches the values (ms), not a counter (Linux
           drivers/infiniband/core/sysfs.c, hw_stat lifespan) */
        if (!strcmp(de->d_name, "lifespan")) {
            if (!efax_read_sysfs(path, buf, sizeof buf)) c->lifespan_ms = atoi(buf) > 0 ? atoi(buf) : 0;
            continue;
        }
        if (efax_read_sysfs(path, buf, sizeof buf) || !isdigit((unsigned char)buf[0])) continue;
        errno = 0;
        v = strtoull(buf, &end, 10);
        if (errno || *end) continue;
        efax__osc_add(c, de->d_name, (uint64_t)v);
    }
    closedir(d);
    return c->n;
}

EFAX_API int efax_os_counters_nic(const efax_nic_info *nic, efax_os_counters *out) {
    char dev[64], dir[PATH_MAX], *dash;
    const char *root = efax_topo_sysfs_root();
    memset(out, 0, sizeof *out);
    if (efax__prov_of(nic->provider) == EFAX_PROV_EFA) {
        efax__copy(dev, sizeof dev, nic->name);
        if ((dash = strrchr(dev, '-')) && (!strcmp(dash, "-rdm") || !strcmp(dash, "-dgrm"))) *dash = 0;
        snprintf(dir, sizeof dir, "%s/sys/class/infiniband/%s/ports/1/hw_counters", root, dev);
        if (efax__osc_dir(out, dir)) {
            efax__copy(out->source, sizeof out->source, "efa");
            efax__copy(out->dev, sizeof out->dev, dev);
            return 0;
        }
        return -FI_ENOENT;
    }
    snprintf(dir, sizeof dir, "%s/sys/class/net/%s/statistics", root, nic->name);
    if (!nic->name[0] || strchr(nic->name, '/') || !efax__osc_dir(out, dir)) return -FI_ENOENT;
    efax__copy(out->source, sizeof out->source, "net");
    efax__copy(out->dev, sizeof out->dev, nic->name);
    return 0;
}

EFAX_API int efax_os_counters_tcp(efax_os_counters *out) {
    /* RtoAlgorithm, RtoMin, RtoMax and MaxConn are settings and CurrEstab a gauge: not counted */
    static const char *const skip[] = {"RtoAlgorithm", "RtoMin", "RtoMax", "MaxConn", "CurrEstab"};
    char path[PATH_MAX], names[1024], values[1024], *ns, *vs, *n, *v;
    FILE *f;
    memset(out, 0, sizeof *out);
    snprintf(path, sizeof path, "%s/proc/net/snmp", efax_topo_sysfs_root());
    if (!(f = fopen(path, "r"))) return -FI_ENOENT;
    /* a "Tcp:" line of names, then one of values */
    while (fgets(names, sizeof names, f)) {
        if (strncmp(names, "Tcp:", 4) || !fgets(values, sizeof values, f) || strncmp(values, "Tcp:", 4))
            continue;
        n = strtok_r(names + 4, " \n", &ns);
        v = strtok_r(values + 4, " \n", &vs);
        for (; n && v; n = strtok_r(NULL, " \n", &ns), v = strtok_r(NULL, " \n", &vs)) {
            unsigned k;
            bool keep = isdigit((unsigned char)v[0]) != 0;
            for (k = 0; k < sizeof skip / sizeof skip[0]; k++) keep = keep && strcmp(n, skip[k]);
            if (keep) efax__osc_add(out, n, (uint64_t)strtoull(v, NULL, 10));
        }
        break;
    }
    fclose(f);
    if (!out->n) return -FI_ENOENT;
    efax__copy(out->source, sizeof out->source, "tcp");
    efax__copy(out->dev, sizeof out->dev, "/proc/net/snmp");
    return 0;
}

EFAX_API void efax_os_counters_delta(const efax_os_counters *before, const efax_os_counters *after,
                                     efax_os_counters *out) {
    efax_os_counters d;
    int i;
    memset(&d, 0, sizeof d);
    efax__copy(d.source, sizeof d.source, after->source);
    efax__copy(d.dev, sizeof d.dev, after->dev);
    d.lifespan_ms = after->lifespan_ms;
    for (i = 0; i < after->n; i++) {
        int64_t b = efax_os_counter(before, after->name[i]);
        if (b < 0) continue;
        efax__osc_add(&d, after->name[i],
                      after->value[i] >= (uint64_t)b ? after->value[i] - (uint64_t)b : after->value[i]);
    }
    *out = d;
}

EFAX_API int64_t efax_os_counter(const efax_os_counters *c, const char *name) {
    int i;
    for (i = 0; c && i < c->n; i++)
        if (!strcmp(c->name[i], name)) return (int64_t)(c->value[i] & INT64_MAX);
    return -1;
}

EFAX_API int efax_os_counters_events(const efax_os_counters *c, char *out, size_t len) {
    /* the most telling first: the verdict is the first's that moved */
    static const struct {
        const char *name, *verdict;
    } ev[] = {
        {"unresponsive_remote_events",
         "a peer stopped answering (dead, hung, or its path down): check it and its rail"},
        {"impaired_remote_conn_events",
         "a connection to a peer was impaired (the peer or the path slow to answer)"},
        {"retrans_timeout_events",
         "packets went unacknowledged until SRD timed out and sent them again: loss or "
         "congestion on the path"},
        {"retrans_pkts", "packets lost and sent again (SRD retransmits): loss or congestion on the path"},
        {"rx_drops", "packets dropped on arrival (the device had no room): a receiver overrun"},
        {"tx_dropped", "the interface dropped packets it was to send"},
        {"rx_dropped", "the interface dropped packets it received"},
        {"tx_errors", "the interface failed to send packets"},
        {"rx_errors", "the interface received bad packets"},
    };
    size_t u = 0, i;
    int moved = 0, first = -1;
    if (out && len) out[0] = 0;
    if (!c || (strcmp(c->source, "efa") && strcmp(c->source, "net"))) return 0;
    for (i = 0; i < sizeof ev / sizeof ev[0]; i++) {
        int64_t v = efax_os_counter(c, ev[i].name);
        if (v <= 0) continue;
        if (first < 0) first = (int)i;
        moved++;
        if (out && u < len)
            u += (size_t)snprintf(out + u, len - u, "%s%s +%lld", u ? ", " : "", ev[i].name, (long long)v);
    }
    if (moved && out && u < len) snprintf(out + u, len - u, ": %s", ev[first].verdict);
    return moved;
}

EFAX_API int efax_os_write_verdict(const efax_os_counters *c, uint64_t wrote, char *why, size_t len) {
    int64_t grew = c ? efax_os_counter(c, "rdma_write_bytes") : -1;
    if (grew < 0) {
        if (why && len)
            snprintf(why, len, "no rdma_write_bytes counter for it (%s)",
                     c && c->source[0] ? c->source : "the OS counts nothing for this NIC");
        return -1;
    }
    if ((uint64_t)grew >= wrote) {
        if (why && len)
            snprintf(why, len, "rdma_write_bytes grew by %llu, efax wrote %llu", (unsigned long long)grew,
                     (unsigned long long)wrote);
        return 1;
    }
    if (why && len)
        snprintf(why, len,
                 "rdma_write_bytes grew by %llu of the %llu bytes efax wrote: the rest moved as messages",
                 (unsigned long long)grew, (unsigned long long)wrote);
    return 0;
}

EFAX_API int efax_os_counters_loss(const efax_os_counters *c, uint64_t *lost, uint64_t *sent) {
    static const char *const efa[] = {"retrans_pkts", "rx_drops"};
    static const char *const tcp[] = {"RetransSegs"};
    static const char *const net[] = {"tx_dropped", "rx_dropped", "tx_errors", "rx_errors"};
    const char *const *names = efa;
    const char *of = "tx_pkts";
    int n = 2, i, found = 0;
    *lost = *sent = 0;
    if (!strcmp(c->source, "tcp"))
        names = tcp, n = 1, of = "OutSegs";
    else if (!strcmp(c->source, "net"))
        names = net, n = 4, of = "tx_packets";
    else if (strcmp(c->source, "efa"))
        return -FI_ENOENT;
    for (i = 0; i < n; i++) {
        int64_t v = efax_os_counter(c, names[i]);
        if (v >= 0) *lost += (uint64_t)v, found++;
    }
    if (efax_os_counter(c, of) >= 0) *sent = (uint64_t)efax_os_counter(c, of), found++;
    return found ? 0 : -FI_ENOENT;
}

// >>gpu wire (implementation) -------------------------------------------------------------------

EFAX_API int efax_cmd_decode(const uint64_t w[EFAX_CMD_WORDS], uint32_t producers, uint64_t expected,
                             int rank, int size, uint64_t src_len, const efax_mr *dst, efax_cmd *c, char *why,
                             size_t wl) {
    memset(c, 0, sizeof *c);
    c->op = (uint32_t)w[0] & 0xff;
    c->flags = (uint32_t)(w[0] >> 8) & 0xff;
    c->producer = (uint32_t)(w[0] >> 16) & 0xffff;
    c->dst = (int)(uint32_t)(w[0] >> 32);
    c->soff = w[1];
    c->doff = w[2];
    c->size = w[3];
    c->tag = (int)(w[4] & 0xffff);
    c->seq = (uint32_t)(w[4] >> 32);
    c->number = w[5];
    if (c->producer >= producers || w[6] != c->producer) {
        snprintf(why, wl, "producer id %u (word 6: %llu) outside 0..%u", c->producer,
                 (unsigned long long)w[6], producers ? producers - 1 : 0);
        return -EFAX_E_PEER;
    }
    if (c->number != expected) {
        snprintf(why, wl, "out of order: command number %llu, expected %llu", (unsigned long long)c->number,
                 (unsigned long long)expected);
        return -EFAX_E_PEER;
    }
    if (c->op == EFAX_CMD_FENCE) return 0;
    if (c->op != EFAX_CMD_PUT) {
        snprintf(why, wl, "unknown operation %u", c->op);
        return -EFAX_E_PEER;
    }
    if (c->flags & ~(uint32_t)EFAX_PUT_SPLIT) {
        snprintf(why, wl, "unknown flags %#x", c->flags);
        return -EFAX_E_PEER;
    }
    if (c->dst < 0 || c->dst >= size || c->dst == rank) {
        snprintf(why, wl, "destination rank %d outside the job (%d ranks) or this rank", c->dst, size);
        return -EFAX_E_PEER;
    }
    if (c->size > src_len || c->soff > src_len - c->size) {
        snprintf(why, wl, "source bytes outside the registered window of %llu bytes",
                 (unsigned long long)src_len);
        return -EFAX_E_PEER;
    }
    if (!dst || !dst->remote || c->dst >= dst->nremote || c->size > dst->remote[c->dst].len ||
        c->doff > dst->remote[c->dst].len - c->size) {
        snprintf(why, wl, "destination bytes outside rank %d's window of %llu bytes", c->dst,
                 dst && dst->remote && c->dst < dst->nremote ? (unsigned long long)dst->remote[c->dst].len
                                                             : 0ull);
        return -EFAX_E_PEER;
    }
    return 0;
}

EFAX_API int efax_ipc_record_check(const efax_ipc_record *r, int rank, const char *host, bool *local,
                                   char *why, size_t wl) {
    bool here;
    if (local) *local = false;
    if (r->magic != EFAX_IPC_MAGIC || r->wire != EFAX_WIRE_VERSION) {
        snprintf(why, wl, "rank %d sent a malformed IPC handle (magic %08x, wire %u; this rank's wire %u)%s",
                 rank, r->magic, r->wire, EFAX_WIRE_VERSION,
                 r->wire != EFAX_WIRE_VERSION ? ": build every rank from the same efax.h" : "");
        return r->magic == EFAX_IPC_MAGIC && r->wire != EFAX_WIRE_VERSION ? -EFAX_E_VERSION : -EFAX_E_PEER;
    }
    if (r->rank != rank || !memchr(r->host, 0, sizeof r->host) || !r->host[0]) {
        snprintf(why, wl, "rank %d sent a malformed IPC record (rank %d, host name %s)", rank, r->rank,
                 memchr(r->host, 0, sizeof r->host) ? "empty" : "unterminated");
        return -EFAX_E_PEER;
    }
    here = strcmp(r->host, host) == 0;
    if (here && (r->device < 0 || r->device > 1023)) {
        snprintf(why, wl, "rank %d sent an IPC record for device %d", rank, r->device);
        return -EFAX_E_PEER;
    }
    if (local) *local = here;
    return 0;
}

// >>faults (implementation) --------------------------------------------------------------------

/* The fault layer sits where efax calls libfabric's data path: each call goes through a small
   inline wrapper, efax__fi_*, that costs one predictable branch when the layer is off (n->fault
   is NULL) and hands the call to efax__f_* when it is on. */

/* libfabric's headers are at least version a.b (>>context has the same test for its options) */
#define EFAX__F_FI_AT_LEAST(a, b) (FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION) >= FI_VERSION(a, b))

#define EFAX__F_HOLD 16  /* completions held back at once, at most (reorder) */
#define EFAX__F_POSTS 64 /* posts the layer holds per NIC: late writes, doorbell batches */
#define EFAX__F_ERRS 32  /* error entries waiting to be handed on per NIC */

static const char *const efax__fault_names[] = {"reorder",  "eagain",   "injectfail",
                                                "emulated", "smallrma", "rxfail"};

EFAX_PRIVATE int efax__f_bad(const char *spec, const char *what, char *why, size_t wl) {
    snprintf(why, wl,
             "EFAX_FAULTS='%s' is not valid: %s; expected family,family,...[:seed] with families "
             "reorder, eagain, injectfail[=N], emulated[=odd], smallrma[=SIZE], rxfail[=N] or all",
             spec, what);
    return -EFAX_E_USAGE;
}

/* The settings that take a count (name=N): its range and what it counts, for the message. The order
   is efax_faults_parse's: cq_max, rx_first, inject_first. */
#define EFAX__F_COUNTS 3u
static const struct {
    const char *prefix, *label, *what;
    unsigned family;
    unsigned long long hi;
} efax__f_counts[EFAX__F_COUNTS] = {
    {"cqmax=", "cqmax", "a number of entries", EFAX_FAULT_CQMAX, 1ull << 24},
    {"rxfail=", "rxfail count", "a number of incoming writes", EFAX_FAULT_RXFAIL, 1000000000ull},
    {"injectfail=", "injectfail count", "a number of injects", EFAX_FAULT_INJECTFAIL, 1000000000ull},
};

/* The index in efax__f_counts of the setting tok names, or EFAX__F_COUNTS. */
EFAX_PRIVATE unsigned efax__f_count_of(const char *tok) {
    unsigned k;
    for (k = 0; k < EFAX__F_COUNTS; k++)
        if (!strncmp(tok, efax__f_counts[k].prefix, strlen(efax__f_counts[k].prefix))) break;
    return k;
}

EFAX_API int efax_faults_parse(const char *spec, efax_fault_spec *out, char *why, size_t wl) {
    char buf[256], *tok, *save = NULL, *colon, what[160];
    unsigned *families = &out->families;
    memset(out, 0, sizeof *out);
    out->rma = 64u << 10;
    if (why && wl) why[0] = 0;
    if (!spec || !*spec) return 0;
    if (strlen(spec) >= sizeof buf) return efax__f_bad("(too long)", "longer than 255 characters", why, wl);
    memcpy(buf, spec, strlen(spec) + 1);
    if ((colon = strchr(buf, ':'))) {
        char *end;
        *colon = 0;
        errno = 0;
        out->seed = strtoull(colon + 1, &end, 0);
        if (errno || end == colon + 1 || *end || colon[1] == '-')
            return efax__f_bad(spec, "the seed after ':' is not a non-negative integer", why, wl);
        out->has_seed = true;
    }
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        unsigned k;
        if (!strcmp(tok, "all")) {
            *families |= EFAX_FAULT_ALL;
            continue;
        }
        if (!strncmp(tok, "smallrma=", 9)) {
            char *end;
            double v = strtod(tok + 9, &end);
            uint64_t mul = *end == 'K' || *end == 'k' ? 1024u : *end == 'M' || *end == 'm' ? 1u << 20 : 1;
            if (mul > 1) end++;
            if (end == tok + 9 || *end || !(v * (double)mul >= 1) || v * (double)mul > (double)(1ull << 30)) {
                snprintf(what, sizeof what,
                         "smallrma size '%.40s' is not a size of 1 byte to 1G (K and M suffixes)", tok + 9);
                return efax__f_bad(spec, what, why, wl);
            }
            out->rma = (uint64_t)(v * (double)mul);
            *families |= EFAX_FAULT_SMALLRMA;
            continue;
        }
        if (!strcmp(tok, "direct")) { /* a fabric's limits: not in efax__fault_names (outside `all`) */
            *families |= EFAX_FAULT_DIRECT;
            continue;
        }
        if ((k = efax__f_count_of(tok)) < EFAX__F_COUNTS) {
            const char *val = tok + strlen(efax__f_counts[k].prefix);
            uint64_t *dst = k == 0 ? &out->cq_max : k == 1 ? &out->rx_first : &out->inject_first;
            char *end;
            unsigned long long v;
            errno = 0;
            v = strtoull(val, &end, 10);
            if (errno || end == val || *end || *val == '-' || v < 1 || v > efax__f_counts[k].hi) {
                snprintf(what, sizeof what, "%s '%.40s' is not %s in [1, %llu]", efax__f_counts[k].label, val,
                         efax__f_counts[k].what, efax__f_counts[k].hi);
                return efax__f_bad(spec, what, why, wl);
            }
            *dst = v;
            *families |= efax__f_counts[k].family;
            continue;
        }
        if (!strcmp(tok, "emulated=odd")) {
            out->emulated_odd = true;
            *families |= EFAX_FAULT_EMULATED;
            continue;
        }
        for (k = 0; k < sizeof efax__fault_names / sizeof efax__fault_names[0]; k++)
            if (!strcmp(tok, efax__fault_names[k])) break;
        if (k == sizeof efax__fault_names / sizeof efax__fault_names[0]) {
            snprintf(what, sizeof what, "unknown family '%.40s' (beside the faults: direct, cqmax=N)", tok);
            return efax__f_bad(spec, what, why, wl);
        }
        *families |= 1u << k;
    }
    if (!*families) return efax__f_bad(spec, "no family named", why, wl);
    return 0;
}

/* A post as the layer keeps it: every argument of the call, to hand to the provider later. */
enum {
    EFAX__FP_WRITEMSG = 1,
    EFAX__FP_SENDMSG,
    EFAX__FP_INJECT,
    EFAX__FP_INJECTDATA,
    EFAX__FP_INJECT_WRITE,
    EFAX__FP_INJECT_WRITEDATA,
    EFAX__FP_TINJECTDATA,
    EFAX__FP_RECV,
    EFAX__FP_TRECV
};

typedef struct efax__fpost {
    int kind;         /* EFAX__FP_* */
    uint64_t release; /* the NIC's poll count from which it may go to the provider */
    uint64_t flags;   /* writemsg, sendmsg */
    struct iovec iov;
    void *desc;
    struct fi_rma_iov riov; /* writes: remote address and key */
    fi_addr_t addr;
    uint64_t data, tag;
    void *context;
    const void *buf; /* injects: the caller's bytes */
    size_t len;
} efax__fpost;

typedef struct efax__fent {
    struct fi_cq_data_entry e;
    uint64_t release;
    bool held; /* held back when it was read */
} efax__fent;

typedef struct efax__ferr {
    struct fi_cq_err_entry e;
    uint64_t release;
    bool synthetic; /* made by the layer: its text is in data */
    char data[256]; /* the provider's err_data copied (it reuses its buffer), or the layer's text */
} efax__ferr;

struct efax__fnic {
    efax_ctx *ctx;
    efax__nic *n;
    uint64_t rng;
    uint64_t polls;             /* fi_cq_read calls through the layer: its clock */
    uint64_t refuse, refuse_rx; /* eagain: transmits / receives are refused until `polls` reaches it */
    uint64_t inject_left;       /* injectfail: injects until the next one fails */
    uint64_t rx_left;           /* rxfail: incoming writes until the next one fails */
    efax__fent *ent;            /* a ring of completions read from the provider, not handed on */
    size_t cap, head, nent;
    int held; /* of them, held back (release in the future) */
    efax__ferr err[EFAX__F_ERRS];
    int nerr;
    efax__ferr cur; /* the error entry -FI_EAVAIL announced, for fi_cq_readerr */
    bool has_cur;
    efax__fpost late[EFAX__F_POSTS]; /* posts to hand to the provider at their release, in order */
    int nlate;
    efax__fpost bell[EFAX__F_POSTS]; /* posts with FI_MORE waiting for one without it (efa's doorbell) */
    int nbell;
    bool unrung_logged;
    unsigned direct_logged; /* direct: the kinds of post already named (EFAX__FP_* bits) */
};

/* xorshift64*: the layer's generator, one per NIC (seeded per rank and NIC). */
EFAX_PRIVATE uint64_t efax__f_rand(struct efax__fnic *f) {
    f->rng ^= f->rng >> 12;
    f->rng ^= f->rng << 25;
    f->rng ^= f->rng >> 27;
    return f->rng * 0x2545f4914f6cdd1dull;
}

/* A delay in polls: mostly none, some short, a few long (completions held back for many polls). */
EFAX_PRIVATE uint64_t efax__f_delay(struct efax__fnic *f) {
    uint64_t r = efax__f_rand(f) % 100;
    if (r < 70) return 0;
    if (r < 96) return 1 + efax__f_rand(f) % 8;
    return 64 + efax__f_rand(f) % 960;
}

EFAX_PRIVATE bool efax__f_on(const struct efax__fnic *f, unsigned fam) {
    return f->ctx->faults.armed && (f->ctx->faults.fams & fam);
}

/* The rank the launcher gave this process, from its environment: emulated=odd picks odd ranks
   before efax_ctx_connect knows them. 1 when no launcher variable says (emulated). */
EFAX_PRIVATE int efax__f_rank_hint(void) {
    static const char *const vars[] = {"EFAX_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID",
                                       "PMI_RANK"};
    size_t i;
    for (i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long r;
        if (!v || !*v) continue;
        r = strtol(v, &end, 10);
        if (!*end && r >= 0 && r < INT_MAX) return (int)r;
    }
    return 1;
}

/* The replayable value: the families as given (all when all) and the seed. */
EFAX_PRIVATE void efax__faults_spec(efax_ctx *ctx) {
    efax__faults *fs = &ctx->faults;
    size_t u = 0, k;
    if ((fs->fams & EFAX_FAULT_ALL) == EFAX_FAULT_ALL && fs->rma == (64u << 10) && !fs->inject_first &&
        !fs->emulated_odd && !fs->rx_first) {
        snprintf(fs->spec, sizeof fs->spec, "all:%llu", (unsigned long long)fs->seed);
        return;
    }
    for (k = 0; k < sizeof efax__fault_names / sizeof efax__fault_names[0]; k++) {
        if (!(fs->fams & (1u << k))) continue;
        u += (size_t)snprintf(fs->spec + u, sizeof fs->spec - u, "%s%s", u ? "," : "", efax__fault_names[k]);
        if ((1u << k) == EFAX_FAULT_SMALLRMA && fs->rma != (64u << 10) && u < sizeof fs->spec)
            u += (size_t)snprintf(fs->spec + u, sizeof fs->spec - u, "=%llu", (unsigned long long)fs->rma);
        if ((1u << k) == EFAX_FAULT_EMULATED && fs->emulated_odd && u < sizeof fs->spec)
            u += (size_t)snprintf(fs->spec + u, sizeof fs->spec - u, "=odd");
        if ((1u << k) == EFAX_FAULT_INJECTFAIL && fs->inject_first && u < sizeof fs->spec)
            u += (size_t)snprintf(fs->spec + u, sizeof fs->spec - u, "=%llu",
                                  (unsigned long long)fs->inject_first);
        if ((1u << k) == EFAX_FAULT_RXFAIL && fs->rx_first && u < sizeof fs->spec)
            u += (size_t)snprintf(fs->spec + u, sizeof fs->spec - u, "=%llu",
                                  (unsigned long long)fs->rx_first);
    }
    if (u < sizeof fs->spec)
        snprintf(fs->spec + u, sizeof fs->spec - u, ":%llu", (unsigned long long)fs->seed);
}

/* efax__faults_spec, then the families that impose a fabric's limits (outside `all`), before the seed. */
EFAX_PRIVATE void efax__faults_name(efax_ctx *ctx) {
    efax__faults *fs = &ctx->faults;
    char extra[64] = "", *colon;
    size_t u = 0;
    efax__faults_spec(ctx);
    if (fs->fams & EFAX_FAULT_DIRECT) u += (size_t)snprintf(extra + u, sizeof extra - u, ",direct");
    if (fs->fams & EFAX_FAULT_CQMAX)
        snprintf(extra + u, sizeof extra - u, ",cqmax=%llu", (unsigned long long)fs->cq_max);
    if (!extra[0] || !(colon = strrchr(fs->spec, ':')) || strlen(fs->spec) + strlen(extra) >= sizeof fs->spec)
        return;
    memmove(colon + strlen(extra), colon, strlen(colon) + 1);
    memcpy(colon, extra, strlen(extra));
    if (fs->spec[0] == ',') memmove(fs->spec, fs->spec + 1, strlen(fs->spec)); /* no fault family */
}

/* Reads $EFAX_FAULTS (once, in efax_ctx_init). Returns 0 or -EFAX_E_USAGE (one line logged). */
EFAX_PRIVATE int efax__faults_init(efax_ctx *ctx) {
    efax__faults *fs = &ctx->faults;
    efax_fault_spec sp;
    char why[320];
    memset(fs, 0, sizeof *fs);
    if (efax_faults_parse(getenv("EFAX_FAULTS"), &sp, why, sizeof why)) {
        fprintf(stderr, "efax: error: %s\n", why);
        return -EFAX_E_USAGE;
    }
    fs->fams = sp.families;
    fs->seed = sp.seed;
    fs->cq_max = sp.cq_max;
    fs->rma = sp.rma;
    fs->inject_first = sp.inject_first;
    fs->emulated_odd = sp.emulated_odd;
    fs->rx_first = sp.rx_first;
    if (!fs->fams) return 0;
    if (!sp.has_seed) fs->seed = (efax_now_ns() ^ ((uint64_t)getpid() << 32)) & 0xffffffffull;
    fs->rank_hint = efax__f_rank_hint();
    efax__faults_name(ctx);
    return 0;
}

/* The layer's state for an open NIC. */
EFAX_PRIVATE int efax__fault_open(efax_ctx *ctx, efax__nic *n) {
    struct efax__fnic *f;
    if (!ctx->faults.fams) return 0;
    if (!(f = (struct efax__fnic *)calloc(1, sizeof *f))) return -FI_ENOMEM;
    f->ctx = ctx;
    f->n = n;
    f->cap = 256 + EFAX__F_HOLD; /* what one poll hands on (efax__drain asks 32 at a time) and the held */
    f->ent = (efax__fent *)calloc(f->cap, sizeof *f->ent);
    n->fault = f;
    if (!f->ent) return -FI_ENOMEM;
    f->rng = 0x9e3779b97f4a7c15ull; /* until efax_ctx_connect seeds it; nothing is drawn before */
    return 0;
}

EFAX_PRIVATE void efax__fault_close(efax__nic *n) {
    if (!n->fault) return;
    free(n->fault->ent);
    free(n->fault);
    n->fault = NULL;
}

/* From efax_ctx_connect on, every rank draws from rank 0's seed: one generator per (rank, NIC). */
EFAX_PRIVATE void efax__faults_arm(efax_ctx *ctx, uint64_t seed) {
    int i;
    if (!ctx->faults.fams) return;
    ctx->faults.seed = seed;
    for (i = 0; i < ctx->nnic; i++) {
        struct efax__fnic *f = ctx->nic[i].fault;
        if (!f) continue;
        f->rng = efax_pattern_word(seed ^ ((uint64_t)(uint32_t)ctx->rank << 32), (uint64_t)i) | 1;
        f->inject_left = ctx->faults.inject_first ? ctx->faults.inject_first - 1 : 15 + efax__f_rand(f) % 256;
        f->rx_left = ctx->faults.rx_first ? ctx->faults.rx_first - 1 : efax__f_rand(f) % 4096;
    }
    efax__faults_name(ctx);
    ctx->faults.armed = true;
}

/* getopt of FI_OPT_EFA_EMULATED_WRITE (1.18+), answered by `emulated` on every provider and line
   (true; with emulated=odd true on odd ranks and false on even ones, as an efa device that does
   RDMA writes says): the code that reads it (efax__ep_emulated, the connect fingerprint) runs as
   on efa. */
EFAX_PRIVATE int efax__getopt_emulated(efax_ctx *ctx, efax__nic *n, bool *emulated) {
    int rc = -FI_ENOPROTOOPT;
#if EFAX__F_FI_AT_LEAST(1, 18)
    size_t len = sizeof *emulated;
    rc = fi_getopt(&n->ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_EMULATED_WRITE, emulated, &len);
    if (!rc && len != sizeof *emulated) rc = -FI_EINVAL;
#else
    (void)n;
#endif
    if (ctx->faults.fams & EFAX_FAULT_EMULATED) {
        *emulated = !ctx->faults.emulated_odd || (ctx->faults.rank_hint & 1);
        if (*emulated) ctx->faults.stats.emulated++;
        rc = 0;
    }
    return rc;
}

/* getopt of the endpoint's max RMA size (FI_OPT_MAX_RMA_SIZE, 2.x; 1.x has only fi_info's
   max_msg_size, already in *v), cut to `smallrma`'s size when asked. */
EFAX_PRIVATE int efax__getopt_max_rma(efax_ctx *ctx, efax__nic *n, size_t *v) {
    int rc = -FI_ENOPROTOOPT;
#if EFAX__F_FI_AT_LEAST(2, 0)
    size_t got = 0, len = sizeof got;
    if ((rc = fi_getopt(&n->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MAX_RMA_SIZE, &got, &len)) == 0 &&
        len == sizeof got)
        *v = got;
    else if (!rc)
        rc = -FI_EINVAL;
#else
    (void)n;
#endif
    if ((ctx->faults.fams & EFAX_FAULT_SMALLRMA) && (*v == 0 || *v > ctx->faults.rma)) {
        *v = (size_t)ctx->faults.rma;
        ctx->faults.stats.capped++;
        rc = 0;
    }
    return rc;
}

EFAX_PRIVATE ssize_t efax__f_issue(efax__nic *n, const efax__fpost *p) {
    switch (p->kind) {
    case EFAX__FP_WRITEMSG: {
        struct fi_msg_rma m;
        memset(&m, 0, sizeof m);
        m.msg_iov = &p->iov;
        m.desc = (void **)&p->desc;
        m.iov_count = 1;
        m.addr = p->addr;
        m.rma_iov = &p->riov;
        m.rma_iov_count = 1;
        m.context = p->context;
        m.data = p->data;
        return fi_writemsg(n->ep, &m, p->flags);
    }
    case EFAX__FP_SENDMSG: {
        struct fi_msg m;
        memset(&m, 0, sizeof m);
        m.msg_iov = &p->iov;
        m.desc = (void **)&p->desc;
        m.iov_count = 1;
        m.addr = p->addr;
        m.context = p->context;
        m.data = p->data;
        return fi_sendmsg(n->ep, &m, p->flags);
    }
    case EFAX__FP_INJECT: return fi_inject(n->ep, p->buf, p->len, p->addr);
    case EFAX__FP_INJECTDATA: return fi_injectdata(n->ep, p->buf, p->len, p->data, p->addr);
    case EFAX__FP_INJECT_WRITE:
        return fi_inject_write(n->ep, p->buf, p->len, p->addr, p->riov.addr, p->riov.key);
    case EFAX__FP_INJECT_WRITEDATA:
        return fi_inject_writedata(n->ep, p->buf, p->len, p->data, p->addr, p->riov.addr, p->riov.key);
    case EFAX__FP_TINJECTDATA: return fi_tinjectdata(n->ep, p->buf, p->len, p->data, p->addr, p->tag);
    case EFAX__FP_RECV: return fi_recv(n->ep, p->iov.iov_base, p->iov.iov_len, p->desc, p->addr, p->context);
    case EFAX__FP_TRECV:
        return fi_trecv(n->ep, p->iov.iov_base, p->iov.iov_len, p->desc, p->addr, p->tag, 0, p->context);
    default: return -FI_EINVAL;
    }
}

EFAX_PRIVATE bool efax__f_inject(int kind) { return kind >= EFAX__FP_INJECT && kind <= EFAX__FP_TINJECTDATA; }
EFAX_PRIVATE bool efax__f_write(int kind) {
    return kind == EFAX__FP_WRITEMSG || kind == EFAX__FP_INJECT_WRITE || kind == EFAX__FP_INJECT_WRITEDATA;
}
/* The flags a completion (or error entry) of such a post carries. */
EFAX_PRIVATE uint64_t efax__f_flags(int kind) {
    return kind == EFAX__FP_TINJECTDATA ? FI_SEND | FI_TAGGED
           : efax__f_write(kind)        ? FI_RMA | FI_WRITE
                                        : FI_SEND | FI_MSG;
}

/* An error entry for the CQ, handed on after `delay` polls; false when the NIC's queue is full. */
EFAX_PRIVATE bool efax__f_error(struct efax__fnic *f, const struct fi_cq_err_entry *e, const char *text,
                                uint64_t delay) {
    efax__ferr *x;
    if (f->nerr == EFAX__F_ERRS) return false;
    x = &f->err[f->nerr++];
    x->e = *e;
    x->release = f->polls + delay;
    x->synthetic = text != NULL;
    x->data[0] = 0;
    if (text)
        efax__copy(x->data, sizeof x->data, text);
    else if (e->err_data && e->err_data_size)
        memcpy(x->data, e->err_data, e->err_data_size < sizeof x->data ? e->err_data_size : sizeof x->data);
    x->e.err_data = NULL;
    x->e.err_data_size = 0;
    return true;
}

/* efa's provider errors for an operation whose peer did not answer (prov/efa/src/efa_errno.h and
   efa_errno_to_fi_errno there): what an injected operation failing later most likely carries. */
EFAX_PRIVATE void efax__f_fail(struct efax__fnic *f, struct fi_cq_err_entry *e, const char *what) {
    static const struct {
        int prov, err;
        const char *text;
    } codes[] = {
        {13, FI_ECONNABORTED, "Unresponsive remote (was previously responsive)"},
        {15, FI_EHOSTUNREACH, "Unreachable remote - never received a response"},
        {10, FI_ENORX, "Destination resource not ready (no work queue entries posted on receive queue)"}};
    char text[256];
    unsigned k = (unsigned)(efax__f_rand(f) % 3);
    e->err = codes[k].err;
    e->prov_errno = codes[k].prov;
    snprintf(text, sizeof text, "%s [efa provider errno %d; injected by EFAX_FAULTS=%s: injectfail %s]",
             codes[k].text, codes[k].prov, f->ctx->faults.spec, what);
    efax__f_error(f, e, text, efax__f_rand(f) % 16);
}

/* Hands held posts whose time came to the provider, in order, stopping at a refusal (so a later one
   never overtakes a refused earlier one). A post the provider fails becomes an error entry. */
EFAX_PRIVATE void efax__f_pump(struct efax__fnic *f) {
    int i = 0, j;
    while (i < f->nlate) {
        efax__fpost *p = &f->late[i];
        ssize_t rc;
        if (p->release > f->polls) {
            i++;
            continue;
        }
        rc = efax__f_issue(f->n, p);
        if (rc == -FI_EAGAIN) break;
        if (rc) {
            struct fi_cq_err_entry e;
            memset(&e, 0, sizeof e);
            e.op_context = efax__f_inject(p->kind) ? NULL : p->context;
            e.flags = efax__f_flags(p->kind);
            e.err = (int)-rc;
            e.data = p->data;
            efax__f_error(f, &e, NULL, 0);
        }
        for (j = i + 1; j < f->nlate; j++) f->late[j - 1] = f->late[j];
        f->nlate--;
    }
}

/* The doorbell: a post without FI_MORE was accepted, so the posts with FI_MORE before it go, in
   order, ahead of anything handed on late. */
EFAX_PRIVATE void efax__f_ring(struct efax__fnic *f) {
    int i;
    if (!f->nbell) return;
    for (i = f->nlate - 1; i >= 0; i--) f->late[i + f->nbell] = f->late[i];
    for (i = 0; i < f->nbell; i++) {
        f->late[i] = f->bell[i];
        f->late[i].release = 0;
        f->late[i].flags &= ~FI_MORE;
    }
    f->nlate += f->nbell;
    f->nbell = 0;
    efax__f_pump(f);
}

/* efa-direct's limits (EFAX_FAULTS direct), as its data path checks them (prov/efa/src efa_msg.c,
   efa_rma.c, efa_ep.c): what it would refuse or assert on is refused here with its code, counted
   and named once per kind. efax must never break them: the count stays 0 in a correct run. */
EFAX__COLD EFAX_PRIVATE ssize_t efax__f_direct(struct efax__fnic *f, const efax__fpost *p) {
    const char *why = NULL;
    ssize_t rc = 0;
    bool inject_write = p->kind == EFAX__FP_INJECT_WRITE || p->kind == EFAX__FP_INJECT_WRITEDATA;
    bool inject_send = p->kind == EFAX__FP_INJECT || p->kind == EFAX__FP_INJECTDATA;
    bool sge = p->kind == EFAX__FP_SENDMSG || p->kind == EFAX__FP_RECV || p->kind == EFAX__FP_WRITEMSG;
    if (p->kind == EFAX__FP_TINJECTDATA || p->kind == EFAX__FP_TRECV) {
        why = "a tagged operation (efa-direct has no FI_TAGGED)";
        rc = -FI_ENOSYS;
    } else if (inject_write && p->len) {
        why = "an inject write of more than 0 bytes (FI_OPT_INJECT_RMA_SIZE is 0)";
        rc = -FI_ENOSYS;
    } else if (inject_send && p->len > EFAX__F_DIRECT_INLINE) {
        why = "an inject send above the device's inline size";
        rc = -FI_EOPNOTSUPP;
    } else if (p->kind == EFAX__FP_SENDMSG && p->len > EFAX__F_DIRECT_MSG) {
        why = "a message above the device's MTU (FI_OPT_MAX_MSG_SIZE)";
        rc = -FI_EMSGSIZE;
    } else if (sge && p->len && !p->desc) {
        why = "a buffer without a descriptor (efa-direct requires FI_MR_LOCAL)";
        rc = -FI_EINVAL;
    }
    if (!rc) return 0;
    f->ctx->faults.stats.direct++;
    if (!(f->direct_logged & (1u << p->kind))) {
        f->direct_logged |= 1u << p->kind;
        efax_log(f->ctx, 0,
                 "NIC %s: efax posted %s of %zu bytes, which efa-direct refuses (%s; EFAX_FAULTS=%s)",
                 f->n->info.name, why, p->len, fi_strerror((int)-rc), f->ctx->faults.spec);
    }
    return rc;
}

/* A post, with the layer on: refused (eagain), dropped with a later error (injectfail), held for
   the doorbell (FI_MORE), handed on late (reorder) or to the provider now. */
EFAX__COLD EFAX_PRIVATE ssize_t efax__f_post(efax__nic *n, efax__fpost *p) {
    struct efax__fnic *f = n->fault;
    efax__faults *fs = &f->ctx->faults;
    bool tx = p->kind != EFAX__FP_RECV && p->kind != EFAX__FP_TRECV;
    bool write = efax__f_write(p->kind);
    ssize_t rc;
    if ((fs->fams & EFAX_FAULT_DIRECT) && (rc = efax__f_direct(f, p))) return rc;
    if (efax__f_on(f, EFAX_FAULT_EAGAIN)) {
        /* transmits: a burst of 1-16 polls, some to 256, a few to 2048 (efa's RNR back-off, a full
           send queue); receives: short bursts of 1-8 polls, more often (a full receive pool) */
        uint64_t *until = tx ? &f->refuse : &f->refuse_rx;
        if (*until <= f->polls && efax__f_rand(f) % (tx ? 256 : 16) == 0) {
            uint64_t r = efax__f_rand(f) % 100;
            *until = f->polls + (!tx      ? 1 + efax__f_rand(f) % 8
                                 : r < 70 ? 1 + efax__f_rand(f) % 16
                                 : r < 95 ? 16 + efax__f_rand(f) % 240
                                          : 256 + efax__f_rand(f) % 1792);
            fs->stats.bursts++;
        }
        if (*until > f->polls) { /* every such post until the NIC has been polled that often */
            fs->stats.refused++;
            if (tx && f->nbell)
                fs->stats.interrupted++; /* a doorbell the provider refused: efax must post again at once */
            return -FI_EAGAIN;
        }
    }
    if (tx && (p->flags & FI_MORE) && f->nbell + f->nlate < EFAX__F_POSTS) { /* efa: no doorbell yet */
        f->bell[f->nbell++] = *p;
        fs->stats.batched++;
        return 0;
    }
    /* the countdown counts injects the provider took (tcp refuses the first ones while it connects) */
    if (efax__f_inject(p->kind) && efax__f_on(f, EFAX_FAULT_INJECTFAIL) && f->inject_left == 0) {
        struct fi_cq_err_entry e;
        char what[96];
        f->inject_left = 256 + efax__f_rand(f) % 4096;
        memset(&e, 0, sizeof e); /* as efa_rdm_txe_handle_error makes it: an inject has no context */
        e.flags = efax__f_flags(p->kind);
        e.data = p->data;
        e.tag = p->tag;
        snprintf(what, sizeof what, "dropped this %s of %zu bytes",
                 p->kind == EFAX__FP_TINJECTDATA ? "notification"
                 : write                         ? "write"
                                                 : "send",
                 p->len);
        efax__f_fail(f, &e, what);
        fs->stats.failed++;
        efax__f_ring(f); /* it was accepted, as far as efax can tell */
        return 0;
    }
    /* reorder: a write handed on late, so what is posted after it (a notification, another chunk)
       may overtake it. Only writes with a completion: the caller polls until it comes, which hands
       the write on. An inject is the caller's to forget: efa sends it without another call, and a
       held one would wait for a poll that may never come (a rank's last answer before a barrier). */
    if (p->kind == EFAX__FP_WRITEMSG && efax__f_on(f, EFAX_FAULT_REORDER) &&
        f->nlate + f->nbell < EFAX__F_POSTS && efax__f_rand(f) % 4 == 0) {
        efax__f_ring(f);
        p->release = f->polls + 1 + efax__f_delay(f);
        p->flags &= ~FI_MORE;
        f->late[f->nlate++] = *p;
        fs->stats.deferred++;
        return 0;
    }
    if (tx && f->nbell) { /* ring: what waited for the doorbell goes first */
        efax__f_ring(f);
        if (f->nlate && f->late[0].release == 0)
            return -FI_EAGAIN; /* the provider refused some: keep the order */
    }
    rc = efax__f_issue(n, p);
    if (rc == 0 && efax__f_inject(p->kind) && f->inject_left && efax__f_on(f, EFAX_FAULT_INJECTFAIL))
        f->inject_left--;
    return rc;
}

/* fi_cq_read with the layer on: hands on late posts, reads from the provider into the layer's ring,
   then hands completions on: in any order (reorder), some held back for many polls, error entries
   as -FI_EAVAIL. */
EFAX__COLD EFAX_PRIVATE ssize_t efax__f_cq_read(efax__nic *n, struct fi_cq_data_entry *out, size_t count) {
    struct efax__fnic *f = n->fault;
    efax__faults *fs = &f->ctx->faults;
    bool reorder = efax__f_on(f, EFAX_FAULT_REORDER);
    size_t given = 0;
    int i;
    f->polls++;
    if (f->nlate) efax__f_pump(f);
    for (;;) { /* enough to hand on `count` (held ones aside) */
        struct fi_cq_data_entry tmp[64];
        size_t room = f->cap - f->nent, ready = f->nent - (size_t)f->held, want, k;
        ssize_t got;
        want = ready >= count ? 0 : count - ready;
        if (want > room) want = room;
        if (want > 64) want = 64;
        if (!want) break;
        got = fi_cq_read(n->cq, tmp, want);
        if (got == -FI_EAGAIN) break;
        if (got == -FI_EAVAIL) {
            struct fi_cq_err_entry e;
            if (f->nerr == EFAX__F_ERRS) break;
            memset(&e, 0, sizeof e);
            if ((got = fi_cq_readerr(n->cq, &e, 0)) < 0) return got;
            efax__f_error(f, &e, NULL, reorder ? efax__f_delay(f) : 0);
            continue;
        }
        if (got < 0) return got;
        for (k = 0; k < (size_t)got; k++) {
            efax__fent *x;
            efax_op *op = (efax_op *)tmp[k].op_context;
            if (op && !(tmp[k].flags & FI_REMOTE_WRITE) && op->kind == EFAX__OPK_TX &&
                efax__f_on(f, EFAX_FAULT_INJECTFAIL) && efax__f_rand(f) % 4096 == 0 &&
                f->nerr < EFAX__F_ERRS) { /* a completion turned into an error entry with a provider errno */
                struct fi_cq_err_entry e;
                memset(&e, 0, sizeof e);
                e.op_context = tmp[k].op_context;
                e.flags = tmp[k].flags;
                e.data = tmp[k].data;
                efax__f_fail(f, &e, "turned this completion into an error");
                fs->stats.errored++;
                continue;
            }
            if ((tmp[k].flags & FI_REMOTE_WRITE) && efax__f_on(f, EFAX_FAULT_RXFAIL) &&
                f->nerr < EFAX__F_ERRS && f->rx_left-- == 0) {
                /* a peer's write failed here, as efa reports it for unsolicited write recv
                   (rdm/efa_rdm_cq.c, efa_rdm_cq_process_wc): no context, no data, nothing that
                   names the writer or what it carried */
                struct fi_cq_err_entry e;
                memset(&e, 0, sizeof e);
                e.flags = FI_REMOTE_CQ_DATA | FI_RMA | FI_REMOTE_WRITE;
                efax__f_fail(f, &e, "turned this incoming write into the error efa reports for it");
                f->rx_left = 256 + efax__f_rand(f) % 4096;
                fs->stats.rxfailed++;
                continue;
            }
            x = &f->ent[(f->head + f->nent++) % f->cap];
            x->e = tmp[k];
            x->release = reorder && f->held < EFAX__F_HOLD ? f->polls + efax__f_delay(f) : 0;
            x->held = x->release > f->polls;
            if (x->held) f->held++, fs->stats.held++;
        }
        if ((size_t)got < want) break;
    }
    for (i = 0; i < f->nerr; i++) /* an error whose time came: announced when nothing else was handed on */
        if (f->err[i].release <= f->polls) {
            int j;
            f->cur = f->err[i];
            f->has_cur = true;
            for (j = i + 1; j < f->nerr; j++) f->err[j - 1] = f->err[j];
            f->nerr--;
            return -FI_EAVAIL;
        }
    while (given < count && f->nent) {
        size_t scan = f->nent < 64 ? f->nent : 64, pick = SIZE_MAX, ready = 0, k;
        for (k = 0; k < scan; k++) { /* reorder: any ready one of the first 64 (at most 16 are held back) */
            const efax__fent *x = &f->ent[(f->head + k) % f->cap];
            if (x->release > f->polls) continue;
            if (!reorder) {
                pick = k;
                break;
            }
            if (efax__f_rand(f) % ++ready == 0) pick = k;
        }
        if (pick == SIZE_MAX) break;
        {
            efax__fent *x = &f->ent[(f->head + pick) % f->cap], *h = &f->ent[f->head];
            if (x->held) f->held--; /* it was held back; its time came */
            out[given++] = x->e;
            if (pick) *x = *h; /* the head takes its place */
            f->head = (f->head + 1) % f->cap;
            f->nent--;
        }
    }
    return given ? (ssize_t)given : -FI_EAGAIN;
}

EFAX__COLD EFAX_PRIVATE ssize_t efax__f_cq_readerr(efax__nic *n, struct fi_cq_err_entry *e) {
    struct efax__fnic *f = n->fault;
    if (!f->has_cur) return -FI_EAGAIN;
    *e = f->cur.e;
    e->err_data = f->cur.data[0] ? f->cur.data : NULL;
    e->err_data_size = f->cur.data[0] ? strlen(f->cur.data) + 1 : 0;
    f->has_cur = false;
    return 1;
}

/* efax__post_nic returned: a batch it left ending on FI_MORE would sit unsent on efa until some
   later post (prov/efa/src/efa_data_path_ops.h rings only without FI_MORE). A sticky error, so a
   test of efax's posting sees it. */
EFAX__COLD EFAX_PRIVATE void efax__f_bell_check(efax__nic *n) {
    struct efax__fnic *f = n->fault;
    if (!f->nbell) return;
    f->ctx->faults.stats.unrung++;
    if (!f->unrung_logged) {
        f->unrung_logged = true;
        efax_log(
            f->ctx, 0,
            "NIC %s: efax's posting returned with %d post(s) sent with FI_MORE and none without it after "
            "them: efa would not send them until some later post (its doorbell rings only without FI_MORE)",
            n->info.name, f->nbell);
    }
    efax__set_sticky(f->ctx, -FI_EOTHER);
}

/* The wrappers: one predictable branch when the layer is off. */

/* A writemsg (riov: its remote side) or a sendmsg (riov NULL) with the layer on, as a post. */
EFAX__COLD EFAX_PRIVATE ssize_t efax__f_post_msg(efax__nic *n, int kind, const struct iovec *iov, void **desc,
                                                 fi_addr_t addr, const struct fi_rma_iov *riov, uint64_t data,
                                                 void *context, uint64_t flags) {
    efax__fpost p;
    memset(&p, 0, sizeof p);
    p.kind = kind;
    p.flags = flags;
    p.iov = iov[0];
    p.desc = desc ? desc[0] : NULL;
    if (riov) p.riov = riov[0];
    p.addr = addr;
    p.data = data;
    p.context = context;
    p.len = iov[0].iov_len;
    return efax__f_post(n, &p);
}
static inline ssize_t efax__fi_writemsg(efax__nic *n, const struct fi_msg_rma *m, uint64_t flags) {
    if (EFAX__UNLIKELY(n->fault))
        return efax__f_post_msg(n, EFAX__FP_WRITEMSG, m->msg_iov, m->desc, m->addr, m->rma_iov, m->data,
                                m->context, flags);
    return fi_writemsg(n->ep, m, flags);
}
static inline ssize_t efax__fi_sendmsg(efax__nic *n, const struct fi_msg *m, uint64_t flags) {
    if (EFAX__UNLIKELY(n->fault))
        return efax__f_post_msg(n, EFAX__FP_SENDMSG, m->msg_iov, m->desc, m->addr, NULL, m->data, m->context,
                                flags);
    return fi_sendmsg(n->ep, m, flags);
}
/* The injects and receives with the layer on: the call's arguments as a post (kind EFAX__FP_*). */
EFAX__COLD EFAX_PRIVATE ssize_t efax__f_post_args(efax__nic *n, int kind, const void *buf, size_t len,
                                                  uint64_t data, fi_addr_t a, uint64_t raddr, uint64_t key,
                                                  uint64_t tag, void *desc, void *ctx) {
    efax__fpost p;
    memset(&p, 0, sizeof p);
    p.kind = kind;
    p.buf = buf;
    p.len = len;
    p.data = data;
    p.addr = a;
    p.riov.addr = raddr;
    p.riov.key = key;
    p.riov.len = len;
    p.tag = tag;
    p.desc = desc;
    p.context = ctx;
    p.iov.iov_base = (void *)(uintptr_t)buf;
    p.iov.iov_len = len;
    return efax__f_post(n, &p);
}
static inline ssize_t efax__fi_inject(efax__nic *n, const void *buf, size_t len, fi_addr_t a) {
    if (EFAX__UNLIKELY(n->fault))
        return efax__f_post_args(n, EFAX__FP_INJECT, buf, len, 0, a, 0, 0, 0, NULL, NULL);
    return fi_inject(n->ep, buf, len, a);
}
static inline ssize_t efax__fi_injectdata(efax__nic *n, const void *buf, size_t len, uint64_t data,
                                          fi_addr_t a) {
    if (EFAX__UNLIKELY(n->fault))
        return efax__f_post_args(n, EFAX__FP_INJECTDATA, buf, len, data, a, 0, 0, 0, NULL, NULL);
    return fi_injectdata(n->ep, buf, len, data, a);
}
static inline ssize_t efax__fi_inject_write(efax__nic *n, const void *buf, size_t len, fi_addr_t a,
                                            uint64_t raddr, uint64_t key) {
    if (EFAX__UNLIKELY(n->fault))
        return efax__f_post_args(n, EFAX__FP_INJECT_WRITE, buf, len, 0, a, raddr, key, 0, NULL, NULL);
    return fi_inject_write(n->ep, buf, len, a, raddr, key);
}
static inline ssize_t efax__fi_inject_writedata(efax__nic *n, const void *buf, size_t len, uint64_t data,
                                                fi_addr_t a, uint64_t raddr, uint64_t key) {
    if (EFAX__UNLIKELY(n->fault))
        return efax__f_post_args(n, EFAX__FP_INJECT_WRITEDATA, buf, len, data, a, raddr, key, 0, NULL, NULL);
    return fi_inject_writedata(n->ep, buf, len, data, a, raddr, key);
}
static inline ssize_t efax__fi_tinjectdata(efax__nic *n, const void *buf, size_t len, uint64_t data,
                                           fi_addr_t a, uint64_t tag) {
    if (EFAX__UNLIKELY(n->fault))
        return efax__f_post_args(n, EFAX__FP_TINJECTDATA, buf, len, data, a, 0, 0, tag, NULL, NULL);
    return fi_tinjectdata(n->ep, buf, len, data, a, tag);
}
static inline ssize_t efax__fi_recv(efax__nic *n, void *buf, size_t len, void *desc, fi_addr_t a, void *ctx) {
    if (EFAX__UNLIKELY(n->fault))
        return efax__f_post_args(n, EFAX__FP_RECV, buf, len, 0, a, 0, 0, 0, desc, ctx);
    return fi_recv(n->ep, buf, len, desc, a, ctx);
}
static inline ssize_t efax__fi_trecv(efax__nic *n, void *buf, size_t len, void *desc, fi_addr_t a,
                                     uint64_t tag, void *ctx) {
    if (EFAX__UNLIKELY(n->fault))
        return efax__f_post_args(n, EFAX__FP_TRECV, buf, len, 0, a, 0, 0, tag, desc, ctx);
    return fi_trecv(n->ep, buf, len, desc, a, tag, 0, ctx);
}
static inline ssize_t efax__fi_cq_read(efax__nic *n, struct fi_cq_data_entry *buf, size_t count) {
    if (EFAX__UNLIKELY(n->fault)) return efax__f_cq_read(n, buf, count);
    return fi_cq_read(n->cq, buf, count);
}
static inline ssize_t efax__fi_cq_readerr(efax__nic *n, struct fi_cq_err_entry *e) {
    if (EFAX__UNLIKELY(n->fault)) return efax__f_cq_readerr(n, e);
    return fi_cq_readerr(n->cq, e, 0);
}
/* fi_cq_open; under cqmax=N a queue of more than N entries is refused as a device whose max_cqe is
   smaller refuses it (efa: ibv_create_cq, efa_cq.c), size 0 (the provider's own) never. */
EFAX_PRIVATE int efax__fi_cq_open(efax_ctx *ctx, efax__nic *n, struct fi_cq_attr *attr) {
    if ((ctx->faults.fams & EFAX_FAULT_CQMAX) && attr->size > ctx->faults.cq_max) {
        ctx->faults.stats.cq_refused++;
        return -FI_EINVAL;
    }
    return fi_cq_open(n->domain, attr, &n->cq, NULL);
}

/* The provider's text for an error entry; the layer's own for one it made. */
static inline const char *efax__fi_cq_strerror(efax__nic *n, const struct fi_cq_err_entry *e, char *buf,
                                               size_t len) {
    if (EFAX__UNLIKELY(n->fault) && e->err_data && e->err_data == (const void *)n->fault->cur.data &&
        n->fault->cur.synthetic)
        return (const char *)e->err_data;
    return fi_cq_strerror(n->cq, e->prov_errno, e->err_data, buf, len);
}

/* One line per rank at the end: what the layer did (the soak reads these). */
EFAX_PRIVATE void efax__faults_summary(efax_ctx *ctx) {
    const efax_fault_stats *s = &ctx->faults.stats;
    if (!ctx->faults.fams || !ctx->faults.armed) return;
    efax_log(
        ctx, 1,
        "EFAX_FAULTS=%s on rank %d: reorder held=%llu deferred=%llu; eagain refused=%llu bursts=%llu; "
        "injectfail failed=%llu errored=%llu; emulated nics=%llu; smallrma nics=%llu; rxfail failed=%llu; "
        "doorbell batched=%llu interrupted=%llu unrung=%llu",
        ctx->faults.spec, ctx->rank, (unsigned long long)s->held, (unsigned long long)s->deferred,
        (unsigned long long)s->refused, (unsigned long long)s->bursts, (unsigned long long)s->failed,
        (unsigned long long)s->errored, (unsigned long long)s->emulated, (unsigned long long)s->capped,
        (unsigned long long)s->rxfailed, (unsigned long long)s->batched, (unsigned long long)s->interrupted,
        (unsigned long long)s->unrung);
}

/* The line of the families that impose a fabric's limits (direct, cqmax), when on. */
EFAX_PRIVATE void efax__faults_limits_summary(efax_ctx *ctx) {
    const efax_fault_stats *s = &ctx->faults.stats;
    if (!(ctx->faults.fams & (EFAX_FAULT_DIRECT | EFAX_FAULT_CQMAX))) return;
    efax_log(ctx, 1,
             "EFAX_FAULTS=%s, the limits it imposed, rank %d: direct refused=%llu; cqmax refused=%llu",
             ctx->faults.spec, ctx->rank, (unsigned long long)s->direct, (unsigned long long)s->cq_refused);
}

EFAX_API const char *efax_ctx_faults(const efax_ctx *ctx) {
    return ctx && ctx->faults.fams ? ctx->faults.spec : "";
}
EFAX_API efax_fault_stats efax_ctx_fault_stats(const efax_ctx *ctx) { return ctx->faults.stats; }

#ifdef EFAX__API_INLINE_POP
#pragma clang diagnostic pop
#endif
#ifdef __cplusplus
}
#endif
#endif /* EFAX_IMPLEMENTATION_DONE */
#endif /* EFAX_IMPLEMENTATION */

/*
MIT License

Copyright (c) 2026 the efax authors

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
associated documentation files (the "Software"), to deal in the Software without restriction,
including without limitation the rights to use, copy, modify, merge, publish, distribute,
sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT
NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES
OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN
CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
*/
