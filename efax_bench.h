/* efax_bench.h — the benchmark harness of efax's drivers: options, the sweep, results and the
   report (a table, JSON Lines, CSV), in steps that leave a driver's main() the experiment alone.

   What it is
   ----------
   efax.h is the fabric library (boot, context, memory, operations, schedules); efax_cuda.h adds
   the GPU. This header is what the drivers share on top of them, kept apart so that a transfer
   engine that vendors efax.h gets no benchmark report with it (as stb keeps one concern per
   header). It uses only their public functions. Included after efax_cuda.h, it also measures the
   GPU ceiling device-memory results are held against (the "cuda glue" section, as sokol_glue.h
   joins two sokol headers).

   Which header a change belongs in: a transfer, a registration, a schedule, a wire format:
   efax.h. Anything that needs CUDA: efax_cuda.h. How a benchmark is driven, timed, checked or
   reported: here. Memory kinds, buffers and the verification pattern live in efax.h's memory
   section, because efax_cuda.h builds its kinds on them.

   Use
   ---
       #define EFAX_IMPLEMENTATION
       #include "efax.h"
       #include "efax_cuda.h"    (CUDA builds only: nvcc -x cu)
       #include "efax_bench.h"

       cc -O2 -pthread -I. drivers/write.c -o write $(pkg-config --cflags --libs libfabric pmix)

   A driver, in steps (drivers/incast.c reads as an example):
       efax_bench_open      options, memory kinds, the launcher (rank, size)
       efax_bench_connect   the context: NICs near this rank's GPU or CPU, connections, warm-up;
                            with efax_bench_desc.xchg the exchange's buffers and state
       efax_bench_buf       a buffer of a memory kind, registered; exchanged when peers write it
       efax_bench_begin     the report's header, and with device memory the measured ceiling
       efax_bench_next      the sweep: every size x mode x memory kind (rows, soak repeats)
       efax_bench_exchange  one step's writes, both sides: who writes to whom is the driver's,
                            the rest (tags, sequences, fill, check, confirmations) the harness's
       efax_bench_record    one result: wrong bytes summed over the ranks, rank 0 reports it
       efax_bench_close     everything freed, in order; the exit status

   The sections after the steps and the exchange: what more than one experiment does (driver
   helpers: sendrecv's and pingpong's two-sided loops, bootstrap's pair proof, kvcache's pages), and
   the two health tools, whole, so that a program can run them itself: the rail finder (rails) and
   the host's preflight (doctor). Their drivers are the recipes that call them.

   License: MIT (see efax.h).
*/
#ifndef EFAX_BENCH_H
#define EFAX_BENCH_H
#ifndef EFAX_H
#error "efax_bench.h: include efax.h first (and efax_cuda.h before this header in CUDA builds)"
#endif

#ifdef __cplusplus
extern "C" {
#endif

// >>options ---------------------------------------------------------------------------------

/* Options every benchmark driver takes. efax_opts_init sets the defaults. */
typedef struct efax_opts {
    uint64_t min_size, max_size; /* -b, -e (K/M/G suffixes, binary) */
    double factor;               /* -f: next size = size * factor */
    int iters;                   /* -n (0: by size, see efax_opts_iters) */
    int warmup;                  /* -w (-1: by size) */
    bool check;                  /* -c: verify every byte of every iteration */
    const char *provider;        /* --provider */
    const char *nics;            /* --nics */
    unsigned modes;              /* --mode: bit (1u << efax_mode) per mode */
    const char *json, *csv;      /* --json FILE, --csv FILE */
    bool quiet;                  /* --quiet: no table, no progress line */
    double line_gbps;            /* --line-rate GBPS (0: $EFAX_LINE_GBPS, else the provider's) */
    double line_gbps_env;        /* $EFAX_LINE_GBPS, read by efax_opts_parse (0: unset) */
    int timeout_ms;              /* --timeout MS */
    int window;                  /* --window N: messages in flight per iteration */
    bool one_slot;               /* --one-slot: every message from and into a buffer's first slot */
    uint64_t chunk;    /* --chunk BYTES: most bytes one post carries (0: efax_write_chunk's policy) */
    double duration_s; /* --duration S: repeat the sweep until S seconds passed */
    const char *mem;   /* --mem host,pin,dma (efax_cuda.h builds) */
    bool efa_shm;      /* --efa-shm: efax_ctx_desc.efa_shm */
    bool no_cuda_api;  /* --no-cuda-api: efax_ctx_desc.cuda_api -1 */
    bool cuda_api;     /* --cuda-api: efax_ctx_desc.cuda_api 1 */
    int argc;
    char **argv;
} efax_opts;

/* Kinds of option a driver can add to the common ones. */
typedef enum efax_opt_type {
    EFAX_OPT_FLAG = 1, /* bool, no argument */
    EFAX_OPT_INT,      /* int in [min, max] */
    EFAX_OPT_SIZE,     /* uint64_t bytes with K/M/G suffix, in [min, max] */
    EFAX_OPT_DOUBLE,   /* double in [min, max] */
    EFAX_OPT_STR,      /* const char* */
    EFAX_OPT_CHOICE    /* const char* that must be one of `choices` ("a|b|c") */
} efax_opt_type;

/* The entry that ends a list of options. */
/* (clang-format 14 would put the braced body on a continuation line) */
// clang-format off
#define EFAX_OPT_END {NULL, 0, (efax_opt_type)0, NULL, 0, 0, NULL, NULL, NULL}
// clang-format on

typedef struct efax_optdef {
    const char *name; /* long name without dashes */
    char short_name;  /* 0 for none */
    efax_opt_type type;
    void *dst;
    double min, max;
    const char *choices;
    const char *arg; /* argument name shown in help */
    const char *help;
} efax_optdef;

/* Parses argv against `defs` alone (terminated by an entry with name NULL): for drivers with
   their own options only. Returns 0, 1 after printing help, or -EFAX_E_USAGE with a one-line
   message in err. Pure apart from the help text. */
EFAX_API int efax_args_parse(int argc, char **argv, const efax_optdef *defs, const char *driver,
                             const char *about, char *err, size_t errlen);

/* Defaults: -b 1K -e 64M -f 2, iterations by size, window 1, chunk by efax_write_chunk, mode single. */
EFAX_API void efax_opts_init(efax_opts *o);

/* Parses argv into o: the common options and the driver's `extra` (terminated by an entry
   with name NULL; may be NULL); reads $EFAX_LINE_GBPS and checks the settings efax.h reads from
   the environment (efax_env_check). Returns 0; 1 after printing help for -h/--help (exit 0);
   -EFAX_E_USAGE with a one-line message in err naming the option and what it accepts
   (drivers exit 2). Pure apart from the help text. */
EFAX_API int efax_opts_parse(efax_opts *o, int argc, char **argv, const efax_optdef *extra,
                             const char *driver, const char *about, char *err, size_t errlen);

/* Parses "64", "4K", "1M", "2G" (binary multiples). Returns 0 or -EFAX_E_USAGE (empty,
   negative, not a number, trailing junk, overflow). Pure. */
EFAX_API int efax_parse_size(const char *s, uint64_t *out);

/* Formats bytes as "4K", "1M", "1.5G", "300". Returns buf. */
EFAX_API const char *efax_fmt_size(uint64_t bytes, char *buf, size_t len);

/* Iterations and warm-ups for a size: -n/-w when given, else many for small sizes and few
   for large so a default sweep takes about a minute. */
EFAX_API int efax_opts_iters(const efax_opts *o, uint64_t size);
EFAX_API int efax_opts_warmup(const efax_opts *o, uint64_t size);
/* The size after `size` in the sweep (0 when the sweep is over). */
EFAX_API uint64_t efax_opts_next_size(const efax_opts *o, uint64_t size);


/* min/p50/avg/p99/max of n samples; sorts v. */
typedef struct efax_stats {
    double min, p50, avg, p99, max;
} efax_stats;
EFAX_API efax_stats efax_stats_of(double *v, int n);

// >>results and the report --------------------------------------------------------------------

/* What a result measures; its name is the "kind" of JSON and CSV records. */
typedef enum efax_result_kind {
    EFAX_RESULT_ONEWAY = 0, /* "oneway": bytes one way, timed until the target confirmed */
    EFAX_RESULT_ROUNDTRIP,  /* "roundtrip": a message and its answer (Gbps(rt) = size / round trip) */
    EFAX_RESULT_HALFRTT,    /* "halfrtt": ping-pong, latency is half the round trip */
    EFAX_RESULT_ALLTOALL,   /* "alltoall": nccl-tests' algbw and busbw */
    EFAX_RESULT_IPC,        /* "ipc": NVLink copies between the GPUs of one host */
    EFAX_RESULT_KIND_COUNT
} efax_result_kind;

/* "oneway", "roundtrip", "halfrtt", "alltoall", "ipc". Pure. */
EFAX_API const char *efax_result_kind_name(efax_result_kind k);

/* One measured row cell: a (size, variant) pair. */
typedef struct efax_result {
    char variant[40];  /* e.g. "Single", "Split", "Stream", "RoundTrip" */
    char memory[16];   /* host, pinned, device */
    char mem_path[32]; /* how device memory reached the NIC: host, dmabuf, hmem, staged; with
                          " (no GPUDirect)" where efa had none */
    efax_result_kind kind;
    uint64_t size; /* bytes per message (all2all: per-rank send buffer) */
    int iters, window, peers;
    double seconds;              /* sum of timed iterations */
    uint64_t bytes;              /* bytes moved in the timed iterations (one direction) */
    double gbps;                 /* bytes*8/seconds/1e9 */
    double mmsgs;                /* million messages per second: bytes/size/seconds/1e6, the messages one
                                    direction carries (a round trip: one); reported where the driver
                                    asks (efax_bench_desc.msg_rate) */
    double algbw_gbs, busbw_gbs; /* all2all (GB/s, nccl-tests definitions); 0 elsewhere */
    double line_gbps;            /* line rate the % column uses (sum over the NICs used) */
    efax_stats lat_us;           /* per-iteration time in microseconds */
    int64_t wrong;               /* bytes that failed the check; -1 when not checked */
    int nnic;
    struct {
        char name[64];
        uint64_t bytes, ops;
    } nic[EFAX_MAX_NICS];
    char extra[2048]; /* more JSON members, written as they are (e.g. "ranks":[...]) */
    char wire[320];   /* what the OS counters that say something went wrong did over the row, per host and
                         NIC, with a verdict (efax_os_counters_events); "" when none moved */
    /* where the bytes went (efax_bench_record, over every rank): each NIC name's bytes sent and
       received, the busiest over the idlest (0: one carried nothing), and the names of those */
    double nic_spread;
    int nic_nidle;
    char nic_idle[96];
} efax_result;

/* Output of one driver run: the header block, the human table (one row per size, a column
   group per variant), CSV and JSON Lines. Only rank 0 writes. */
typedef struct efax_report {
    const efax_opts *o;
    const char *driver;
    const char *memory;
    efax_ctx *ctx;
    efax_boot *boot;
    FILE *json, *csv;
    int rank;
    efax_result row[16];
    int nrow;
    bool header_printed;
    bool tty;
    uint64_t t0_ns;
    char meta[12288]; /* the run's metadata as JSON members */
    /* The fastest the bytes can physically move between the ranks (device memory on one host:
       cudaMemcpyPeerAsync between the two GPUs, measured in the same run by efax_cuda_ceiling).
       A device-memory result above it (plus EFAX_CEILING_TOLERANCE) cannot have had its bytes
       in place: it is refused as an error naming the ceiling, and efax_report_status fails. */
    double ceiling_gbps; /* per pair of ranks; 0: none known */
    char ceiling_what[192];
    int refused;
    char (*nic_choice)[256]; /* rank 0: every rank's NICs and how they were chosen */
    int nresults;            /* results added (a run that measured nothing fails efax_report_status) */
    int nwrong;              /* results with wrong bytes, and their "size variant (N bytes)" */
    char wrong_rows[512];
    bool msg_rate;  /* efax_bench_desc.msg_rate: the Mmsg/s column and the "mmsgs" field */
    char *nic_json; /* the next result's per-NIC counters as JSON members (efax_bench_record) */
    size_t nic_json_len, nic_json_cap;
} efax_report;
#define EFAXB__CHOICE_LEN 256

/* How far above the measured ceiling a result may land before it is refused (timer and
   clock noise; 5%). */
#define EFAX_CEILING_TOLERANCE 0.05

/* Opens the outputs and prints the header block (provider, libfabric version, hosts, NICs,
   memory, command line, FI_* and EFAX_* variables). Collective: gathers host names.
   Returns 0 or a negative code (a file that cannot be opened is named). */
EFAX_API int efax_report_init(efax_report *r, const efax_opts *o, const char *driver, const char *memory,
                              efax_ctx *ctx, efax_boot *boot);
/* Adds a result: written to JSON and CSV at once, kept for the table row. */
EFAX_API void efax_report_add(efax_report *r, const efax_result *res);
/* Prints the table row of the results added since the last row. */
EFAX_API void efax_report_row(efax_report *r);
/* A live progress line on stderr (only on a terminal, never with --quiet). */
EFAX_API void efax_report_progress(efax_report *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Closes the outputs. Safe on a zeroed report. */
EFAX_API void efax_report_deinit(efax_report *r);
/* 0, or -EFAX_E_VERIFY when a result was refused (above the physical ceiling), with -c had wrong
   bytes, or when no result was added at all (a run that measured nothing is no pass): then it
   prints one line on stderr saying which. Drivers end with it, after the last row (efax_bench_close
   does), so such a run exits 1. Rank 0 decides (it holds the results). */
EFAX_API int efax_report_status(const efax_report *r);

/* Starts a result: names and shape. memory/path: e.g. "host"/"host", "device"/"staged". */
EFAX_API void efax_result_init(efax_result *res, const char *variant, const char *memory, const char *path,
                               efax_result_kind kind, uint64_t size, int window, int peers);

/* Finishes a result from n per-iteration times (microseconds; sorted in place) and the
   bytes one iteration moves: seconds, bytes, gbps, mmsgs, lat_us, line_gbps. */
EFAX_API void efax_result_time(efax_result *res, double *lat_us, int n, uint64_t bytes_per_iter,
                               double line_gbps);

// >>steps -----------------------------------------------------------------------------------

typedef struct efax_bench_xchg efax_bench_xchg; /* the exchange section says what it holds */
typedef struct efaxb__counts efaxb__counts;     /* the per-NIC counters of a row (private) */

/* What a driver is: its name, its own options and its defaults. Zeroed fields mean defaults. */
typedef struct efax_bench_desc {
    const char *driver;          /* name in messages, --help and the report ("write") */
    const char *about;           /* --help's description */
    const efax_optdef *extra;    /* the driver's own options (a list ending with name NULL; may be NULL) */
    uint64_t min_size, max_size; /* -b / -e defaults (0: efax_opts_init's) */
    double factor;               /* -f default (0: efax_opts_init's) */
    int window;                  /* --window default (0: efax_opts_init's) */
    const char *mem;             /* --mem default in CUDA builds (NULL: "all"); host builds: host */
    int min_ranks, max_ranks;    /* ranks the experiment needs (0: at least 2; max 0: no limit) */
    bool one_kind;               /* --mem must name one memory kind */
    bool gpu;                    /* needs a CUDA device: without one it says "skipped" and ends, status 0 */
    bool own_options; /* no sweep: d->extra alone is parsed (efax_args_parse); its entries may point
                         into b->o (provider, nics, timeout_ms), which efax_bench_open fills */
    bool cold;        /* efax_bench_connect does not warm the connections: the experiment's own
                         first messages open them (a broken pair is its result, not an error) */
    unsigned modes;   /* the modes the experiment runs whatever --mode says (bits 1u << efax_mode;
                         0: --mode's); of these, all but Single run only with several NICs */
    bool own_table;   /* the driver prints its own table: the report writes --json and --csv
                         alone (as --quiet) */
    bool msg_rate;    /* the table shows the message rate (Mmsg/s), the JSON has "mmsgs" (osu_mbw_mr's,
                         perftest's figure); the CSV's mmsgs column is empty without it */
    bool sends;       /* the experiment sends messages whole: sizes above the largest message the
                         provider carries (efax_caps.max_send: efa-direct's MTU) are left out, said */
    const efax_bench_xchg *xchg; /* the layout of the driver's exchange (efax_bench_exchange); NULL: none */
    const char *no_staged;       /* why --mem staged is refused (NULL: taken): the driver moves host memory
                                    only, or stages it through its own option */
} efax_bench_desc;

/* efax_bench_open's answer when there is nothing to run (help printed, or no memory kind this
   machine can run): not an error; efax_bench_close turns it into exit status 0. */
#define EFAX_BENCH_DONE 1
#define EFAX_BENCH_BUFS 8
#define EFAX_BENCH_ALLOCS 8

/* A running benchmark. Must not move between efax_bench_open and efax_bench_close. What is
   large (the report, the buffers, the exchange's state) is allocated, so it may live on a stack. */
typedef struct efax_bench {
    efax_bench_desc d;
    efax_opts o;
    efax_boot boot;
    efax_ctx ctx;
    efax_report *rep;             /* from efax_bench_begin */
    const efax_mem_ops *kinds[3]; /* the memory kinds --mem chose (and this machine can run) */
    int nk;
    int rank, size; /* after efax_bench_open */
    bool connected, begun;
    efax_buf *bufs; /* [EFAX_BENCH_BUFS] */
    int nbuf;
    void *allocs[EFAX_BENCH_ALLOCS];
    int nalloc;
    uint64_t t_start, sweeps; /* the soak: when the sweep started, whole sweeps done */
    /* with an exchange (efax_bench_desc.xchg), from efax_bench_connect: */
    efax_buf *xsrc[3], *xdst[3]; /* each memory kind's source and destination */
    double *lat;                 /* room for a step's times: efax_opts_iters at 1 byte, for every rank */
    efax_xfer *xs;               /* [in flight * size * msgs]: this rank's writes of iterations */
    efax_expect *ex;             /* [in flight * size * msgs]: the writes into this rank of iterations */
    unsigned char *xland;        /* [in flight * size]: paced, each arrival's state (efaxb__paced) */
    efax_write_desc *xw;         /* [2 * size * msgs]: this rank's writes as it describes them, then the
                                    writes into it as it expects them */
    efaxb__counts *cnt;          /* the row's per-NIC counters and the first messages (efax_bench_connect) */
    uint64_t sends_cut;          /* -e before efax_bench_connect cut it to the largest message (desc.sends) */
    char *proof;                 /* rank 0: whether the NICs moved the warm-up's proof writes by device RDMA
                                    write (efaxb__write_proof); NULL: not asked (no NIC counts it) */
    char cuda_note[224];       /* whether libfabric may initialize CUDA (efaxb__cuda_probe_off); "" unsaid */
    uint64_t confirmed_behind; /* this rank's windows of the step whose confirmation it took after the next
                                  window went out (efax_bench_exchange, confirming a window behind);
                                  summed over the ranks into the record's "confirmed_behind" */
} efax_bench;

/* One point of the sweep. Zero it before the first efax_bench_next. */
typedef struct efax_bench_step {
    uint64_t size; /* bytes per message (the driver's size column) */
    efax_mode mode;
    int k; /* memory kind: b->kinds[k] */
    const efax_mem_ops *kind;
    int iters, warmup; /* efax_opts_iters / efax_opts_warmup at size */
    bool started;
} efax_bench_step;

/* Step 1: parses the options against the common ones and d->extra (d->extra alone with
   d->own_options; printing "driver: reason" for a bad one), picks the memory kinds
   (efax_cuda_mem_select in CUDA builds), joins the job and checks the rank count. Returns 0;
   EFAX_BENCH_DONE when there is nothing to run; -EFAX_E_USAGE for bad options or ranks; or the
   bootstrap's error. Whatever it returns, end with efax_bench_close. */
EFAX_API int efax_bench_open(efax_bench *b, const efax_bench_desc *d, int argc, char **argv);

/* Step 2: opens the context from the options (--provider, --nics, --efa-shm, --no-cuda-api,
   --timeout; in CUDA builds this rank's GPU and the NICs nearest it when a kind is device memory),
   connects every rank and warms every connection (not with d->cold). With d->xchg: counts its
   tags, allocates every memory kind's source and destination (exchanged, the destinations
   poisoned and prepared for staged writes) and the state of every message. Collective. Returns 0
   or a negative code (logged). */
EFAX_API int efax_bench_connect(efax_bench *b);

/* A buffer of len bytes of memory kind `kind`, registered with `access` (EFAX_MR_*) on every NIC
   (on none before efax_bench_connect: memory no NIC uses). A region peers write into
   (EFAX_MR_WRITE_DST) is exchanged with every rank, so it is collective then. *out gets it; it is
   freed by efax_bench_close. Returns 0 or a negative code. */
EFAX_API int efax_bench_buf(efax_bench *b, const efax_mem_ops *kind, size_t len, unsigned access,
                            efax_buf **out);

/* Zeroed memory for n items of `size` bytes, freed by efax_bench_close; NULL when out of memory. */
EFAX_API void *efax_bench_calloc(efax_bench *b, size_t n, size_t size);

/* Host memory that the NICs reach only through a registered bounce buffer of the same size, copied
   cell by cell by its staging hooks (efax_stage_ops) as device memory without GPUDirect is: the
   staged engine, tested and rehearsed on any machine. Its out_ready says "not yet" to every
   other ask, as a copy still in flight would, and its copies in are deferred until a mark is
   asked about (again every other ask "not yet"), a wait or a receive's copy. Name "host", path
   "staged". */
EFAX_API const efax_mem_ops *efax_bench_mem_staged(void);

/* A driver's own check of its options or ranks failed: prints "driver: <message>" on stderr and
   returns -EFAX_E_USAGE (exit status 2 through efax_bench_close). */
EFAX_API int efax_bench_usage(const efax_bench *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Step 3: opens the report (--json, --csv) and prints its header; `memory` names the memory in it
   (NULL: the kinds'). In CUDA builds, when a kind is device memory, measures the ceiling results
   are held against (cudaMemcpyPeerAsync between its GPUs). Collective. Returns 0 or a negative code. */
EFAX_API int efax_bench_begin(efax_bench *b, const char *memory);

/* Step 4, the sweep: moves st to the next (size, mode, memory kind) of --mode and --mem, sizes
   from -b to -e by -f; prints the table row when a size is done; resets the NIC counters and
   shows the progress line. With --duration it repeats the sweep until that time has passed (rank
   0 decides; every rank follows, printing nothing but rank 0's "# sweep N done" lines). Every rank
   calls it in the same order: `while (!rc && efax_bench_next(b, &st, &rc)) rc = measure(...);`.
   Returns true with st to run (*rc untouched); false when the sweep is over (*rc untouched) or
   failed (*rc gets the negative code). */
EFAX_API bool efax_bench_next(efax_bench *b, efax_bench_step *st, int *rc);

/* Line rate in Gbit/s of the NICs `mode` uses (one for Single, all otherwise): --line-rate per NIC,
   else $EFAX_LINE_GBPS, else what the provider or sysfs reports; 0 when unknown. */
EFAX_API double efax_bench_line(const efax_bench *b, efax_mode mode);

/* Where slot `slot` of a buffer of messages of `size` bytes begins: slot * size, or 0 with
   --one-slot (every message in flight then reads and lands on the same bytes, the cache footprint
   of fabtests' fi_rdm_bw and of osu_mbw_mr: one message, not a window of them; fi_rma_bw writes
   each message of its window to its own offset, as efax does by default). Pure. */
EFAX_API uint64_t efax_bench_slot_off(const efax_bench *b, uint64_t slot, uint64_t size);

/* For experiments whose writers 0..writers-1 each time their own iterations at once (write
   --targets pairs): gathers every rank's `iters` times (lat, microseconds; collective), leaves in
   lat on rank 0 the slowest writer's time of each iteration (an iteration lasts as long as its
   slowest writer), and on rank 0 prints and adds to res->extra ("ranks":[...]) every writer's
   bandwidth, with each host's sum (against the rails its writers use: line Gbit/s each, 0:
   unknown) and the aggregate. bytes: what one writer moves per iteration. Returns 0 or the
   bootstrap's error. */
EFAX_API int efax_bench_writers(efax_bench *b, efax_result *res, double *lat, int iters, int writers,
                                uint64_t bytes, double line);

/* Starts a result of step st (efax_result_init): its label ("Split" + "DMA" + " " + suffix, which
   may be NULL), memory kind, the path buf's memory took (buf->path), and its shape. */
EFAX_API void efax_bench_result(efax_result *res, const efax_bench_step *st, const efax_buf *buf,
                                const char *suffix, efax_result_kind kind, int window, int peers);

/* Step 5: records a result. Collective: every rank passes the wrong bytes it counted (the sum is
   the result's, or -1 without -c); rank 0 adds the NIC counters and, where the exchange confirms a
   window behind, how many windows were (over every rank: "confirmed_behind"), and reports it
   (table row cell, JSON, CSV); the other ranks' res is not read. Returns 0 or the bootstrap's error. */
EFAX_API int efax_bench_record(efax_bench *b, efax_result *res, int64_t wrong);

/* Step 6: with rc 0, the report's verdict (efax_report_status: a refused or, with -c, a wrong
   result fails); then closes the report and frees the buffers, allocations, context and boot in
   that order. Returns the exit status for rc (efax_exit_code; EFAX_BENCH_DONE gives 0). */
EFAX_API int efax_bench_close(efax_bench *b, int rc);

/* For a driver with only its own options (no launcher, no sweep): parses argv against defs (efax_args_parse;
   driver and about name it in --help), printing "driver: reason" on stderr for a bad option. Returns 0,
   EFAX_BENCH_DONE after --help (exit status 0), or -EFAX_E_USAGE (exit status 2). */
EFAX_API int efax_bench_args(int argc, char **argv, const efax_optdef *defs, const char *driver,
                             const char *about);

/* Writes one JSON Lines record to f (nothing when f is NULL): {"schema":1,"driver":"<driver>", the members
   fmt formats (printf; the caller escapes strings), }. For drivers that write records of their own shape. */
EFAX_API void efax_bench_jsonl(FILE *f, const char *driver, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* For drivers that measure several variants at each point of the sweep (e.g. a stream and a round
   trip): starts variant `name` of step st, resetting the NIC counters and showing the progress line
   "mode name size bytes", as efax_bench_next does for the point. */
EFAX_API void efax_bench_variant(efax_bench *b, const efax_bench_step *st, const char *name);

/* For every memory kind k (b->kinds), a source buffer srcs[k] with access src_access and a
   destination dsts[k] with dst_access (EFAX_MR_*; exchanged when peers write it, as efax_bench_buf),
   len bytes each; the destinations are poisoned, so a check finds what did not land. Collective when
   the destinations are exchanged. Returns 0 or a negative code. */
EFAX_API int efax_bench_bufs(efax_bench *b, size_t len, unsigned src_access, unsigned dst_access,
                             efax_buf **srcs, efax_buf **dsts);

/* For experiments that time something's start on rank `from` and its end on rank `to` (each as
   microseconds after a barrier both passed: clocks of two hosts agree only that far): gathers n
   times from every rank (start on `from`, end on `to`; collective), and on rank 0 adds
   "name":{"min","p50","avg","p99","max"} of end[i] - start[i] to res->extra and prints them on a
   "#" line. Returns 0, -FI_ENOMEM or the bootstrap's error. */
EFAX_API int efax_bench_lat_pairs(efax_bench *b, efax_result *res, const char *name, const double *start,
                                  const double *end, int n, int from, int to);

/* For experiments whose ranks each time their own iterations at once, where an iteration lasts as long as its
   slowest rank (all2all): gathers every rank's `iters` times (lat, microseconds; collective) and leaves in
   lat on rank 0 the slowest rank's time of each iteration, and in *loop_us (rank 0; 0 elsewhere) the longest
   of the ranks' whole loops (the sum of its times). Returns 0, -FI_ENOMEM or the bootstrap's error. */
EFAX_API int efax_bench_slowest(efax_bench *b, double *lat, int iters, double *loop_us);

// >>exchange --------------------------------------------------------------------------------

/* An exchange is a step's writes between ranks, both sides run by the harness, as fabtests'
   bandwidth_rma() owns its timed loop: a driver says who writes to whom and how much; the harness
   numbers the tags and sequences, fills the sources, starts the writes, announces and awaits them
   on the targets, confirms, checks every byte (-c), clears and tells the writers, so that a writer
   and its target cannot disagree. Per iteration, on each rank:
       -c: wait until every target cleared the last iteration's bytes (EFAX_BENCH_TAG_READY),
           then fill this iteration's sources                                        (untimed)
       write to every target; copy to itself (from == to); announce and await every writer's
       writes (one context timeout for all); confirmed: tell each writer (EFAX_BENCH_TAG_ACK) and
       wait for each target's word (confirm_behind: the word of the iteration before);
       unconfirmed: wait for this rank's own writes                                  (timed)
       -c: check and clear what landed, tell each writer                             (untimed)
   Message m of an iteration from rank f to rank t leaves f's source at slot s = (per_target ?
   t * msgs + m : m) and lands in t's destination at slot (per_writer ? f * msgs + m : m), slots
   being the step's message size apart (all at 0 with --one-slot: efax_bench_slot_off); its bytes
   are the pattern of (f, seq << 24 | s), so that a byte of another iteration, writer or message
   shows; it rotates over the NICs from index seq * msgs + f + s. Its tag is one of the msgs tags of
   its memory kind (unconfirmed: twice as many), which start at EFAX_BENCH_TAG_DATA plus those of
   the kinds before it: into an ordinary region every message of a writer's iteration has the same,
   the kind's tag (seq mod its tags), and the target announces and awaits them as one
   (efax_expect_writes); into a staged region, whose cells are taken by writer and tag as they land,
   message m has tag m (plus msgs times seq mod the sets of msgs). EFAX_BENCH_TAG_ACK2 is a second
   confirmation word: the exchange's odd iterations' when it confirms a window behind
   (efax_bench_xchg.confirm_behind), sendrecv's Stream's second half's. One confirmation word per
   iteration, not one per half: halves cost own instructions on every write and gained nothing
   (docs/journal.md has the runs of both, and of confirming a window behind). */
enum {
    EFAX_BENCH_TAG_ACK = 1,
    EFAX_BENCH_TAG_READY = 2,
    EFAX_BENCH_TAG_ACK2 = 3,
    EFAX_BENCH_TAG_DATA = 4,
};

/* The layout of a driver's exchange, fixed for the run (efax_bench_desc.xchg). */
struct efax_bench_xchg {
    int msgs;               /* the most messages one rank writes another per iteration (0: --window) */
    bool per_target;        /* a source region per target (all-to-all); else every target the same */
    bool per_writer;        /* a destination region per writer (incast, all-to-all); else one */
    bool unconfirmed;       /* no confirmations: every rank times its own iterations, each ending when
                         its writes completed and its writers' landed (all-to-all); else a
                         writer's iteration ends when every target confirmed */
    bool window_iterations; /* unconfirmed: --window N is iterations in flight, up to
                               EFAX_BUF_MARKS (1 with -c, whose fills and checks separate them) */
    bool confirm_behind;    /* confirmed, a window behind: a writer starts iteration i + 1 before i's
                               confirmation comes, then waits for it, so that the link does not idle for
                               a confirmation's round trip between windows (fi_rma_bw's writer waits for
                               none); at most two iterations' messages are unconfirmed, and an
                               iteration's time runs from the confirmation before. Not with -c (it checks
                               each iteration apart), a poster, or one message an iteration (a write's
                               time to its confirmation is what that measures). Into a staged region the
                               next window's pieces that come before it is announced are held by
                               sequence (two a tag outstanding, of the engine's window) */
    uint64_t bytes;         /* each buffer's size (0: the slots that messages of -e bytes need) */
    /* unconfirmed, every rank writing every other, one message each, more than two ranks: a rank's
       writes leave one at a time, the next rank on first, write k + pace of a phase once this rank's
       own arrival k is in place or has arrived (pace_gate; efaxb__paced says why); 0: all at once;
       < 0: EFAX_BENCH_PACE for device memory from messages of EFAX_BENCH_PACE_MIN bytes, else 0 */
    int pace;
    int pace_gate; /* EFAX_BENCH_GATE_*: when arrival k lets write k + pace leave */
};

/* When a paced write may leave: once the arrival pace before it is in place (LANDED: each GPU then
   reads one peer at a time, but waits for that arrival's end to be seen and the next write to
   reach its target), once it has arrived (ARRIVED: its copy has started here, so the next one queues
   behind it and no GPU waits, while ranks that drift apart may read one peer together), or AUTO:
   ARRIVED below EFAX_BENCH_GATE_LANDED bytes a message, LANDED from there, where a copy outlasts
   that wait. */
enum { EFAX_BENCH_GATE_AUTO = 0, EFAX_BENCH_GATE_LANDED, EFAX_BENCH_GATE_ARRIVED };

/* The pace the exchange takes when efax_bench_xchg.pace is below 0, for device memory, from messages
   of EFAX_BENCH_PACE_MIN bytes; the gate's threshold (docs/journal.md has the runs that chose them). */
#define EFAX_BENCH_PACE 1
#define EFAX_BENCH_PACE_MIN (4ull << 20)
#define EFAX_BENCH_GATE_LANDED (16ull << 20)

/* A writer that posts through something other than this rank's context (efax_cuda.h's proxy, whose
   thread drives the context meanwhile): it starts the writes as described and waits for notices. */
typedef struct efax_bench_poster {
    int (*post)(void *user, const efax_write_desc *w, int n); /* starts an iteration's writes */
    /* waits for the notice (tag, seq) from rank peer (timeout_ms < 0: the context's); *t_ns: when it
       came (efax_now_ns) */
    int (*wait)(void *user, int peer, int tag, uint32_t seq, int timeout_ms, uint64_t *t_ns);
    int (*finish)(void *user); /* waits until the writes it started completed at this end */
    void *user;
} efax_bench_poster;

/* What one step of the sweep moves. */
typedef struct efax_bench_moves {
    /* whether rank `from` writes to rank `to` (from == to: a local copy). Every rank asks about every
       pair, so the answer may depend on nothing but the arguments and user */
    bool (*writes)(const void *user, int from, int to, int nranks);
    const void *user;
    uint64_t size;                   /* bytes per message (0: the step's) */
    int msgs;                        /* messages per writer and target (0: the layout's) */
    const efax_bench_poster *poster; /* this rank's writes (NULL: efax_write on b->ctx) */
} efax_bench_moves;

/* Runs step st's exchange: the buffers of st's memory kind, st->warmup untimed iterations and
   st->iters timed ones after a barrier. Collective (ranks that move nothing take the barrier).
   Appends this rank's iteration times (microseconds) at lat[*nlat] and advances *nlat where it
   times: on a writer (confirmed), on every rank that moves anything (unconfirmed); adds the wrong
   bytes it found to *wrong. Returns 0 or a negative code (logged). */
EFAX_API int efax_bench_exchange(efax_bench *b, const efax_bench_step *st, const efax_bench_moves *mv,
                                 double *lat, int *nlat, int64_t *wrong);

/* Iterations in flight in step st's exchange: --window where the layout takes it
   (efax_bench_xchg.window_iterations) and st's memory is not staged (staged cells are copied in
   one iteration at a time), else 1. With more than one, a rank starts iteration i + N - 1 as
   iteration i begins, and iteration i ends once its writers' bytes and its own chunk are in place
   (efax_buf_mark / efax_buf_marked), later iterations moving meanwhile: an iteration's time runs
   from the end of the one before. Pure. */
EFAX_API int efax_bench_in_flight(const efax_bench *b, const efax_bench_step *st);

// >>driver helpers --------------------------------------------------------------------------

/* What the drivers' experiments share beyond the sweep: each driver states its experiment in steps,
   and the loops, checks and tables those steps run live here. */

/* Two-sided messages between rank 0 and one other rank at a time (sendrecv), in two variants.
   Stream: rank 0 keeps a window of messages in flight, the other rank receives them all and confirms;
   an iteration is timed from its first send to that confirmation (without -c and with a window of two
   or more, the window's halves are confirmed apart and each half of the next iteration leaves as the
   same half of this one is confirmed: an iteration's time runs from the end of the one before).
   RoundTrip: one message and its answer of the same size. Messages are planned over the NICs by the
   step's mode; each piece's immediate data names it (message << 8 | segment), so no arrival order is
   assumed, and with -c every piece is checked to have arrived exactly once and every byte checked. */
typedef struct efax_bench_sends {
    efax_buf *srcs[3], *dsts[3]; /* per memory kind: max(--window, 2) slots of -e bytes each */
    efax_xfer *tx, *rx;          /* room for the sends and receives in flight */
    double *lat;                 /* rank 0: a variant's iteration times over every turn (microseconds) */
} efax_bench_sends;

/* Allocates s's buffers (every memory kind, registered for sending and receiving; destinations
   poisoned), its operations and its times, all freed by efax_bench_close. Call after
   efax_bench_connect. Returns 0 or a negative code. Not thread-safe: b's thread only. */
EFAX_API int efax_bench_sends_open(efax_bench *b, efax_bench_sends *s);

/* One turn of step st's variant (roundtrip, else Stream) between rank 0 and rank k: the receives are
   posted, a barrier, then st->warmup untimed and st->iters timed iterations. Collective: every rank
   calls it (ranks other than 0 and k take the barrier alone). Appends rank 0's iteration times at
   s->lat[*nlat] and advances *nlat; adds the wrong bytes this rank found (-c) to *wrong. Returns 0 or
   a negative code. Not thread-safe: b's thread only. */
EFAX_API int efax_bench_sendrecv(efax_bench *b, efax_bench_sends *s, const efax_bench_step *st,
                                 bool roundtrip, int k, int *nlat, int64_t *wrong);

/* The echo (pingpong), the programming model in its smallest form: rank 0 sends a message to rank 1,
   which answers with one of the same size, as SEND/RECV or as RDMA WRITE with immediate data. The
   answer comes from rank 1's own send buffer, as in fi_pingpong: answering from the buffer that just
   received would make the peer read cache lines another core just wrote, and measure that instead of
   the transport. With -c both sides check every byte they receive, outside the timing. */
typedef struct efax_bench_echo {
    efax_buf *tx, *rx; /* host memory, two halves of -e bytes each: with -c iteration parity picks one */
    double *lat;       /* rank 0: the last echo's one-way times, half of each round trip (microseconds) */
} efax_bench_echo;

/* Allocates e's send and receive buffers (the first memory kind, registered on every NIC for sends,
   receives and writes; the receive buffer exchanged) and its times, freed by efax_bench_close. Call
   after efax_bench_connect. Collective. Returns 0 or a negative code. Not thread-safe: b's thread only. */
EFAX_API int efax_bench_echo_open(efax_bench *b, efax_bench_echo *e);

/* Step st's echo between rank 0 and rank 1 (writeimm: WRITE with immediate data, else SEND/RECV):
   st->warmup untimed round trips, then st->iters timed ones, without -c back to back with one clock
   reading each (their average is the total time over the iterations, as fi_pingpong's), with -c each
   timed alone and checked between. Every rank calls it; ranks past 1 move nothing. Leaves in e->lat on
   rank 0 st->iters one-way times and in *secs the round trips' total (seconds); adds the wrong bytes
   this rank found to *wrong. Returns 0 or a negative code; after a failure a receive may still be
   posted into this call's own transfers, so close the context (efax_bench_close) before anything else
   progresses it. Not thread-safe: b's thread only. */
EFAX_API int efax_bench_echo_time(efax_bench *b, efax_bench_echo *e, const efax_bench_step *st, bool writeimm,
                                  double *secs, int64_t *wrong);

/* The proof of every ordered pair of ranks (bootstrap): every rank exchanges endpoint names and
   memory keys, then sends every other rank, from each of its NICs, a SEND and a WRITE with
   immediate data, whose bytes the receiver checks. What never arrives is marked, not fatal, so that
   one broken pair is named rather than ending the run. */
typedef struct efax_bench_pairs {
    uint64_t msg; /* bytes per message */
    /* ranks, this rank, its NICs, the most NICs of any rank, messages it receives */
    int n, me, nn, maxn, nrx;
    /* a source slot per (peer, NIC, op); receive slots; a write window per (peer, NIC) */
    efax_buf *tx, *rx, *wd;
    efax_xfer *xs;         /* the receives first, then per (peer, NIC) a WRITE and a SEND */
    uint8_t *status, *all; /* per (sender, its NIC): what went wrong on this rank; on every rank */
} efax_bench_pairs;

/* Who is there: fills p's ranks and NICs and gathers every rank's host and NIC addresses, which rank 0
   prints under a "# efax DRIVER VERSION: provider, ranks, bootstrap" line. msg: bytes per message.
   Call after efax_bench_connect. Collective. Returns 0 or a negative code. Not thread-safe. */
EFAX_API int efax_bench_pairs_meet(efax_bench *b, efax_bench_pairs *p, uint64_t msg);

/* The buffers (sources filled, the rest poisoned; the write windows exchanged) and the operations of
   p, freed by efax_bench_close. Collective. Returns 0 or a negative code. Not thread-safe. */
EFAX_API int efax_bench_pairs_open(efax_bench *b, efax_bench_pairs *p);

/* Proves every pair: receives first (each on the NIC the peer's NIC arrives at), a barrier, then to
   every peer on every NIC a SEND and a WRITE, each with immediate data; then every arrival is checked,
   and every rank's view gathered into p->all. Collective. Returns 0 or a negative code (a message that
   never came is a marked failure, not an error). Not thread-safe. */
EFAX_API int efax_bench_pairs_prove(efax_bench *b, efax_bench_pairs *p);

/* Rank 0: prints the matrix of p->all (row: sender, column: receiver), each failed pair and NIC, and
   "all N×(N−1) pairs OK" when none failed. Returns how many (pair, NIC) failed. Not thread-safe. */
EFAX_API int efax_bench_pairs_report(const efax_bench *b, const efax_bench_pairs *p);

/* For experiments of writers into one target region each (stream, kvcache): a source
   (EFAX_MR_WRITE_SRC) and a destination (EFAX_MR_WRITE_DST, exchanged) of len bytes each, of step st's
   memory kind or, staged, host memory through staging buffers (efax_bench_mem_staged); the
   destination prepared for writes taken as they land under tags tag .. tag + ntags - 1
   (efax_expect_prepare) and poisoned, so a check finds what did not land. Freed by efax_bench_close.
   Collective. Returns 0 or a negative code. Not thread-safe: b's thread only. */
EFAX_API int efax_bench_write_bufs(efax_bench *b, const efax_bench_step *st, bool staged, size_t len, int tag,
                                   int ntags, efax_buf **src, efax_buf **dst);

/* The KV-cache experiment's tables (kvcache): a cache of layers x pages pages on each side, scattered
   through a page table on each (a permutation of the cache's pages, the same on every rank), a batch
   and an expectation a layer, and the times of a variant's iterations. */
typedef struct efax_bench_kv {
    int layers, pages;
    uint32_t *src_pages, *dst_pages; /* [layers * pages]: the page tables, one permutation each */
    efax_batch *batch;               /* [layers] */
    efax_expect *ex;                 /* [layers] */
    double *post, *land;             /* [iters * layers]: microseconds after the iteration's barrier */
    double *lat;                     /* [iters]: rank 0's first post to the decode side's word */
} efax_bench_kv;

/* Allocates kv's tables for kv->layers and kv->pages (set before), draws the page tables and opens the
   batches; the memory is freed by efax_bench_close, the batches by efax_bench_kv_close. Returns 0 or a
   negative code. Not thread-safe: b's thread only. */
EFAX_API int efax_bench_kv_open(efax_bench *b, efax_bench_kv *kv);

/* For -c, every page of iteration it: fill (the prefill side, before) writes each page of src with
   its pattern; else (the decode side, after) checks each page of dst. The pages lie where the page
   tables put them (paged), or layer by layer in order (contiguous). Returns the wrong bytes found
   (0 when filling). Not thread-safe. */
EFAX_API int64_t efax_bench_kv_pages(const efax_bench_kv *kv, const efax_bench_step *st, efax_buf *src,
                                     efax_buf *dst, int it, bool paged, bool fill);

/* Closes kv's batches (before efax_bench_close). Safe on a zeroed kv. Not thread-safe. */
EFAX_API void efax_bench_kv_close(efax_bench_kv *kv);

/* The table of NICs (info): its column header line on out. Not thread-safe on a shared stream. */
EFAX_API void efax_bench_nic_header(FILE *out);

/* One NIC's row of that table on out (provider, name, PCI address, Gbit/s, NUMA node, mr_mode and mode
   bits by name, immediate data bytes, largest message, inject size, queue sizes, HMEM, loopback), and
   when json is not NULL its JSON Lines record (efax_bench_jsonl, under driver's name). Not thread-safe
   on a shared stream. */
EFAX_API void efax_bench_nic_row(FILE *out, FILE *json, const char *driver, const efax_nic_info *x);

/* Single-thread memcpy bandwidth in GB/s between two buffers of size bytes, allocated as the benchmarks
   allocate (efax_host_alloc): the ceiling of the shm provider, which copies every byte once. Best of
   seven rounds of about 0.2 s each; 0 when the memory cannot be had. Thread-safe. */
EFAX_API double efax_bench_memcpy_gbs(uint64_t size);

// >>rails -----------------------------------------------------------------------------------

/* The slow-rail finder (drivers/rails.c): which rail is slow or losing packets. For every pair of
   hosts, in both directions, every NIC alone and then all of them together (Split), interleaved
   over rounds; each NIC's best rate against the median NIC of its direction and the line rate, and
   what the OS counted over its runs (packets sent again or dropped: an efa device's hw_counters, a
   tcp rail's interface statistics and the host's TCP retransmits; efa's SRD events). One rank per
   host. Rank 0 prints and writes everything. In steps:
       efax_rails_open      the job, the context, the buffers and the outputs; the header
       efax_rails_warmup    every pair, both ways, every NIC alone, not recorded
       efax_rails_rounds    the recorded rounds
       efax_rails_confirm   one more round for the directions with a NIC slow in every round
       efax_rails_verdicts  the table, the flags and the suspects
       efax_rails_close     everything freed; the exit status
   The state is the finder's alone (no efax_bench): its context asks the tags its windows need, and
   its measurements are pairs of ranks, not a sweep. */

#define EFAX_RAILS_ALL (-1)     /* a rail's NIC: every NIC at once (Split) */
#define EFAX_RAILS_MAX_ROUNDS 8 /* the most rounds efax_rails_desc.rounds may ask */

/* What the finder measures and when it flags. efax_rails_desc_init sets the defaults. */
typedef struct efax_rails_desc {
    uint64_t size;               /* bytes per write (1M) */
    uint64_t bytes;              /* bytes each NIC moves per measurement (0: half a second at the line
                                    rate, at least 8M, else 256M) */
    int window;                  /* writes per iteration; two iterations in flight (8) */
    int rounds;                  /* interleaved rounds; a NIC's best counts (2) */
    int timeout_ms;              /* each wait's limit (0: EFAX_TIMEOUT_MS) */
    double slow;                 /* flag a NIC below this ratio of its direction's median NIC (0.8) */
    double lossy;                /* flag a NIC whose OS counts more than this share of its packets resent or
                                    dropped (0.01) */
    double line_gbps;            /* one NIC's line rate (0: $EFAX_LINE_GBPS, else the provider's) */
    bool expect_healthy;         /* efax_rails_close: a flagged path exits 1 */
    bool quiet;                  /* no line per measurement, only the table */
    const char *provider, *nics; /* efax_ctx_desc's (NULL: its defaults) */
    const char *json, *csv;      /* rank 0's JSON Lines and CSV files (NULL: none) */
} efax_rails_desc;

/* One directed rail: host `from`'s NIC to host `to`'s NIC of the same index (or every NIC at once),
   over the measurements of the run. */
typedef struct efax_rail_result {
    int from, to, nic;                      /* ranks; NIC index or EFAX_RAILS_ALL */
    double gbps[EFAX_RAILS_MAX_ROUNDS + 2]; /* per round, and the confirmation round (index rounds) */
    uint64_t lost, sent, bytes;             /* OS: packets resent or dropped, packets sent; bytes moved */
    double best;                            /* the best round's Gbps (the confirmation round's included) */
    double x_median;                        /* best over its direction's median NIC; every NIC at once:
                                               over the NICs' sum */
    double pct_line;                        /* best in % of the line rate; -1 when unknown */
    double median, line;                    /* its direction's median NIC; the line rate (0: unknown) */
    bool slow, lossy;                       /* the verdicts (one NIC alone only) */
    uint64_t events;                        /* efa's SRD events on either end's NICs */
    char wire[200]; /* the first measurement's counters that moved, with their verdict */
} efax_rail_result;

typedef struct efaxb__rails_sample efaxb__rails_sample; /* what a rank saw in one measurement (private) */

/* A running finder. Must not move between efax_rails_open and efax_rails_close; large (its boot
   and context), so better static than on a stack. Zero it before efax_rails_open. */
typedef struct efax_rails {
    efax_rails_desc d;
    efax_boot boot;
    efax_ctx ctx;
    int nnic;
    uint64_t iters;          /* iterations of one NIC's measurement (d.bytes over the window) */
    efax_rail_result *paths; /* rank 0: every rail measured, in the order first measured */
    int npath;
    char names[EFAX_MAX_NICS][72]; /* efax_rails_nic_name's */
    /* private */
    bool booted;
    efax_buf src, dst;
    efax_xfer *xs;
    efax_expect *ex;
    size_t slen; /* bytes of one sample */
    efaxb__rails_sample *mine, *all;
    FILE *jf, *cf;
} efax_rails;

/* Sets d to the defaults (1M writes, window 8, 2 rounds, slow 0.8, lossy 0.01). Thread safe. */
EFAX_API void efax_rails_desc_init(efax_rails_desc *d);

/* Step 1: joins the job (efax_boot_init), checks that there are two hosts or more and one rank per
   host, opens the context on d's provider and NICs, connects and warms it, allocates the buffers,
   opens rank 0's outputs and prints the header there. d is copied. Collective. Returns 0,
   -EFAX_E_USAGE (said on stderr) or the first failure's code; whatever it returns, end with
   efax_rails_close. Not thread safe: one thread drives a finder. */
EFAX_API int efax_rails_open(efax_rails *r, const efax_rails_desc *d);

/* One measurement: rank `from` writes `iters` iterations of the window to rank `to` over NIC `nic`
   (EFAX_RAILS_ALL: every NIC at once, Split), each end reading its OS counters around it; every
   rank takes the barrier and the gather. With round >= 0 rank 0 files it under its rail as that
   round (r->d.rounds: the confirmation round), prints it (not quiet) and writes its JSON record.
   Collective. Returns 0, -FI_EINVAL for ranks, a NIC or a round out of range, or a negative code.
   Not thread safe. */
EFAX_API int efax_rails_measure(efax_rails *r, int from, int to, int nic, uint64_t iters, int round);

/* Step 2: every pair, both ways, every NIC alone, two iterations each, not recorded (TCP opens its
   window). Collective. Returns 0 or a negative code. Not thread safe. */
EFAX_API int efax_rails_warmup(efax_rails *r);

/* Step 3: r->d.rounds rounds over every pair, both ways, each NIC alone then every NIC at once
   (moving as much per NIC as alone); odd rounds backwards, so that no end is always first.
   Collective. Returns 0 or a negative code. Not thread safe. */
EFAX_API int efax_rails_rounds(efax_rails *r);

/* Step 4: the directions where rank 0 found a NIC slow in every round measure every NIC alone once
   more (a rail slowed by a moment of the host's load recovers, a slow one stays slow). Collective.
   Returns 0 or a negative code. Not thread safe. */
EFAX_API int efax_rails_confirm(efax_rails *r);

/* Step 5: rank 0 judges every rail (r->paths' verdicts), prints the table, the summary, the flagged
   rails, the counters that moved and the suspects, and writes the paths to JSON and CSV; *flagged
   gets the flagged rails on every rank. Collective. Returns 0 or the bootstrap's error. Not thread
   safe. */
EFAX_API int efax_rails_verdicts(efax_rails *r, int *flagged);

/* Step 6: closes the outputs, frees the buffers, the context and the boot. Returns the exit status:
   efax_exit_code(rc) for rc != 0, else 1 when flagged and d.expect_healthy, else 0. Safe on a zeroed
   finder. Not thread safe. */
EFAX_API int efax_rails_close(efax_rails *r, int rc, int flagged);

/* NIC k's name in the finder's output ("all" for EFAX_RAILS_ALL; "name#k" where one name is listed
   twice, as --nics lo,lo opens two endpoints on one device). Pure, so thread safe; after
   efax_rails_open. */
EFAX_API const char *efax_rails_nic_name(const efax_rails *r, int k);

// >>doctor ----------------------------------------------------------------------------------

/* The doctor: is this host ready for efax, and if not, why? Its checks add findings, each a fact
   in plain language with a level and, for a fault, the fix. drivers/doctor.c runs them on the
   first rank of every host and prints the job's report; a program can run the same checks
   (efax_doctor_check) and read the findings, or add its own beside them (efax_doctor_add). */

/* How much a finding weighs. Ranks send the numbers to each other (efax_doctor_report): new levels
   go before EFAX_DOCTOR_LEVELS, and none is renumbered. */
typedef enum efax_doctor_level {
    EFAX_DOCTOR_PASS, /* checked, and right */
    EFAX_DOCTOR_INFO, /* a fact worth knowing */
    EFAX_DOCTOR_WARN, /* efax runs, but slower or less surely than it could: with the fix */
    EFAX_DOCTOR_FAIL, /* efax cannot run right here: with the fix */
    EFAX_DOCTOR_SKIP, /* what this host cannot show (no EFA device, no GPU) */
    EFAX_DOCTOR_LEVELS
} efax_doctor_level;

/* One finding. */
typedef struct efax_finding {
    int level;        /* efax_doctor_level */
    char check[16];   /* what was looked at: "libfabric", "nic", "gpu", "memlock", ... */
    char subject[48]; /* which one: a NIC's or a GPU's name, a pair of CPUs, or "" */
    char text[400];   /* what was found */
    char fix[300];    /* what to do about it: WARN and FAIL only, else "" */
} efax_finding;

/* The most findings one host keeps; efax_doctor_add drops the ones beyond. */
#define EFAX_DOCTOR_MAX_FINDINGS 192

/* One host's check: what to check (set before efax_doctor_check; zero for the defaults) and what
   was found. Large (the findings): static or on the heap rather than on the stack. */
typedef struct efax_doctor {
    const char *provider; /* the provider whose NICs are checked (NULL: the one efax picks) */
    const char *nics;     /* the NICs checked, "a,b" (NULL: the ones efax opens) */
    bool expect_efa;      /* no EFA device is a FAIL (for EFA clusters), else a SKIP */
    int timeout_ms;       /* how long each check waits (0: 10000) */
    efax_prov prov;       /* the provider's kind once its NICs opened (EFAX_PROV_OTHER before) */
    char facts[512];      /* what hosts must agree on: libfabric, provider, NICs */
    efax_finding f[EFAX_DOCTOR_MAX_FINDINGS];
    int n; /* findings in f */
} efax_doctor;

/* Checks this host and appends the findings to d->f: libfabric (the library loaded, the headers and
   API version), the providers, EFA devices against what libfabric sees, every NIC of the provider
   (its attributes; opened alone, a write to itself checked byte by byte, cold and warm; the OS's
   counters), the host (locked-memory limit, huge pages, clock, NUMA, whether the distance between
   two cores holds still), the launcher, and the GPUs: with efax_cuda.h included before this header
   each GPU's nearest NICs, dmabuf and GPUDirect RDMA (a write into its memory with the provider
   forbidden to call CUDA), else only whether the PCI bus has any. Takes a few seconds. d: its
   options set, the rest zero. Returns 0, or -FI_EINVAL when d is NULL. Not thread safe: it opens
   contexts, and pins the calling thread to other CPUs while it measures (its affinity set back
   after). */
EFAX_API int efax_doctor_check(efax_doctor *d);

/* Appends one finding to d: `level` (efax_doctor_level), `check` what was looked at, `subject`
   which one (NULL: none), `fix` what to do (kept for WARN and FAIL only; may be NULL), and the
   text as printf formats it. A d that holds EFAX_DOCTOR_MAX_FINDINGS already drops it. Returns
   nothing. Not thread safe (d). */
EFAX_API void efax_doctor_add(efax_doctor *d, int level, const char *check, const char *subject,
                              const char *fix, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;

/* A level's name as the report prints it: "PASS", "INFO", "WARN", "FAIL", "SKIP"; "?" for a
   number that is none of them. Pure. */
EFAX_API const char *efax_doctor_level_name(int level);

/* The job's report. Every rank passes its d: the first rank of each host the one it checked, the
   others one with no findings. Rank 0 prints each host's facts and findings (with quiet, WARN and
   FAIL lines alone), a FAIL for each host whose facts differ from the first host's (efax matches
   NICs between hosts by name), then the counts and the verdict; it writes every finding as a JSON
   record to json and a CSV row to csv (either may be NULL), the JSON summary last. Replaces tabs
   and newlines in d's findings with spaces. Collective over job. Returns the FAILs of the whole
   job (0 when ready), or a negative code (-FI_ENOMEM, or the gather's). Not thread safe. */
EFAX_API int efax_doctor_report(efax_doctor *d, efax_boot *job, bool quiet, FILE *json, FILE *csv);

#ifdef EFAX_CUDA_H
// >>cuda glue (with efax_cuda.h) -------------------------------------------------------------

/* Whether this machine has a CUDA device: 1; else 0, after printing "driver: skipped: no CUDA device (why)"
   on stdout (a driver that needs one then ends with exit status 0). */
EFAX_API int efax_bench_gpu(const char *driver);
#endif

#ifdef __cplusplus
}
#endif
#endif /* EFAX_BENCH_H */

/* ============================================================================================
   Implementation (with EFAX_IMPLEMENTATION, in the same file as efax.h's)
   ============================================================================================ */
#if defined(EFAX_IMPLEMENTATION) && !defined(EFAX_BENCH_IMPLEMENTATION_DONE)
#define EFAX_BENCH_IMPLEMENTATION_DONE

#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <limits.h>
#include <errno.h>
#include <sched.h>
#include <unistd.h>
#include <dirent.h>
#include <pthread.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#ifdef __cplusplus
extern "C" {
#endif

// >>options (implementation) -----------------------------------------------------------------

EFAX_API void efax_opts_init(efax_opts *o) {
    memset(o, 0, sizeof *o);
    o->min_size = 1024;
    o->max_size = 64ull << 20;
    o->factor = 2.0;
    o->warmup = -1;
    o->modes = 1u << EFAX_MODE_SINGLE;
    o->window = 1;
    o->chunk = 0; /* auto: efax_write_chunk */
    o->mem = "host";
}

EFAX_API int efax_parse_size(const char *s, uint64_t *out) {
    uint64_t v = 0, mul = 1;
    const char *p = s;
    if (!s || !isdigit((unsigned char)*s)) return -EFAX_E_USAGE;
    while (isdigit((unsigned char)*p)) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return -EFAX_E_USAGE;
        v = v * 10 + d;
        p++;
    }
    if (*p) { /* a binary multiple: K, M, G or T */
        const char *units = "KMGT", *u = strchr(units, toupper((unsigned char)*p));
        if (!u) return -EFAX_E_USAGE;
        mul = 1ull << (10 * (u - units + 1));
        p++;
    }
    if (*p == 'i' && mul > 1) p++;
    if ((*p == 'B' || *p == 'b') && mul > 1) p++;
    if (*p) return -EFAX_E_USAGE;
    if (mul > 1 && v > UINT64_MAX / mul) return -EFAX_E_USAGE;
    *out = v * mul;
    return 0;
}

EFAX_API const char *efax_fmt_size(uint64_t b, char *buf, size_t len) {
    static const char sfx[] = "KMGT";
    int i = -1;
    double v = (double)b;
    while (v >= 1024.0 && i < 3 && (b % 1024 == 0 || v >= 1024.0 * 1024.0)) {
        v /= 1024.0;
        i++;
        if (b % 1024) break;
        b /= 1024;
    }
    if (i < 0)
        snprintf(buf, len, "%llu", (unsigned long long)b);
    else if (v == (double)(uint64_t)v)
        snprintf(buf, len, "%llu%c", (unsigned long long)v, sfx[i]);
    else
        snprintf(buf, len, "%.1f%c", v, sfx[i]);
    return buf;
}

EFAX_PRIVATE const efax_optdef *efaxb__find_opt(const efax_optdef *defs, const char *lname, char sname) {
    for (; defs && defs->name; defs++)
        if ((lname && !strcmp(defs->name, lname)) || (!lname && sname && defs->short_name == sname))
            return defs;
    return NULL;
}

EFAX_PRIVATE void efaxb__opt_label(const efax_optdef *d, char *buf, size_t len) {
    if (d->short_name)
        snprintf(buf, len, "-%c/--%s", d->short_name, d->name);
    else
        snprintf(buf, len, "--%s", d->name);
}

EFAX_PRIVATE void efaxb__print_help(const efax_optdef *common, const efax_optdef *extra, const char *driver,
                                    const char *about) {
    const efax_optdef *sets[2];
    int k;
    sets[0] = extra;
    sets[1] = common;
    printf("usage: %s [options]   (launch under mpirun/srun --mpi=pmix, or see efax.h for EFAX_ROOT)\n",
           driver);
    if (about) printf("%s\n", about);
    printf("\noptions:\n");
    for (k = 0; k < 2; k++) {
        const efax_optdef *d;
        for (d = sets[k]; d && d->name; d++) {
            char lhs[64], rng[96] = "";
            if (d->short_name)
                snprintf(lhs, sizeof lhs, "-%c, --%s%s%s", d->short_name, d->name, d->arg ? " " : "",
                         d->arg ? d->arg : "");
            else
                snprintf(lhs, sizeof lhs, "    --%s%s%s", d->name, d->arg ? " " : "", d->arg ? d->arg : "");
            if (d->type == EFAX_OPT_CHOICE) snprintf(rng, sizeof rng, " [%s]", d->choices);
            printf("  %-28s %s%s\n", lhs, d->help ? d->help : "", rng);
        }
    }
    printf("  %-28s %s\n", "-h, --help", "this text");
    printf(
        "\nsizes take K, M, G suffixes (binary: 1K = 1024). Exit codes: 0 ok, 1 run failed, 2 bad usage.\n");
}

EFAX_PRIVATE int efaxb__set_opt(const efax_optdef *d, const char *val, char *err, size_t el) {
    char lbl[64];
    efaxb__opt_label(d, lbl, sizeof lbl);
    switch (d->type) {
    case EFAX_OPT_FLAG: *(bool *)d->dst = true; return 0;
    case EFAX_OPT_INT: {
        char *end;
        long long v;
        errno = 0;
        v = strtoll(val, &end, 10);
        if (!*val || *end || errno || (double)v < d->min || (double)v > d->max) {
            snprintf(err, el, "%s: '%s' is not valid: expected an integer in [%.0f, %.0f]", lbl, val, d->min,
                     d->max);
            return -EFAX_E_USAGE;
        }
        *(int *)d->dst = (int)v;
        return 0;
    }
    case EFAX_OPT_SIZE: {
        uint64_t v;
        char lo[32], hi[32];
        if (efax_parse_size(val, &v) || (double)v < d->min || (double)v > d->max) {
            snprintf(err, el, "%s: '%s' is not valid: expected a size in [%s, %s] (bytes, or with K/M/G)",
                     lbl, val, efax_fmt_size((uint64_t)d->min, lo, sizeof lo),
                     efax_fmt_size((uint64_t)d->max, hi, sizeof hi));
            return -EFAX_E_USAGE;
        }
        *(uint64_t *)d->dst = v;
        return 0;
    }
    case EFAX_OPT_DOUBLE: {
        char *end;
        double v;
        errno = 0;
        v = strtod(val, &end);
        if (!*val || *end || errno || !(v >= d->min && v <= d->max)) {
            snprintf(err, el, "%s: '%s' is not valid: expected a number in [%g, %g]", lbl, val, d->min,
                     d->max);
            return -EFAX_E_USAGE;
        }
        *(double *)d->dst = v;
        return 0;
    }
    case EFAX_OPT_STR:
        if (!*val) {
            snprintf(err, el, "%s: an empty value is not valid", lbl);
            return -EFAX_E_USAGE;
        }
        *(const char **)d->dst = val;
        return 0;
    case EFAX_OPT_CHOICE: {
        const char *c = d->choices;
        size_t vl = strlen(val);
        while (c && *c) {
            const char *bar = strchr(c, '|');
            size_t cl = bar ? (size_t)(bar - c) : strlen(c);
            if (cl == vl && !strncmp(c, val, vl)) {
                *(const char **)d->dst = val;
                return 0;
            }
            c = bar ? bar + 1 : NULL;
        }
        snprintf(err, el, "%s: '%s' is not valid: expected one of %s", lbl, val, d->choices);
        return -EFAX_E_USAGE;
    }
    }
    return -EFAX_E_USAGE;
}

EFAX_PRIVATE int efaxb__parse(int argc, char **argv, const efax_optdef *extra, const efax_optdef *common,
                              const char *driver, const char *about, char *err, size_t errlen) {
    int i, rc;
    err[0] = 0;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        const efax_optdef *d;
        char name[64];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            efaxb__print_help(common, extra, driver, about);
            return 1;
        }
        if (a[0] == '-' && a[1] == '-' && a[2]) {
            const char *eq = strchr(a + 2, '=');
            size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            if (nl >= sizeof name) nl = sizeof name - 1;
            memcpy(name, a + 2, nl);
            name[nl] = 0;
            if (eq) val = eq + 1;
            d = efaxb__find_opt(extra, name, 0);
            if (!d) d = efaxb__find_opt(common, name, 0);
        } else if (a[0] == '-' && a[1] && !a[2]) {
            d = efaxb__find_opt(extra, NULL, a[1]);
            if (!d) d = efaxb__find_opt(common, NULL, a[1]);
        } else {
            snprintf(err, errlen, "unexpected argument '%s' (options start with - or --; see -h)", a);
            return -EFAX_E_USAGE;
        }
        if (!d) {
            snprintf(err, errlen, "unknown option '%s' (see -h)", a);
            return -EFAX_E_USAGE;
        }
        if (d->type == EFAX_OPT_FLAG) {
            if (val) {
                snprintf(err, errlen, "option '%s' takes no value", a);
                return -EFAX_E_USAGE;
            }
        } else if (!val) {
            if (i + 1 >= argc) {
                char lbl[64];
                efaxb__opt_label(d, lbl, sizeof lbl);
                snprintf(err, errlen, "%s needs a value (%s)", lbl, d->arg ? d->arg : "value");
                return -EFAX_E_USAGE;
            }
            val = argv[++i];
        }
        if ((rc = efaxb__set_opt(d, val ? val : "", err, errlen))) return rc;
    }
    return 0;
}

EFAX_API int efax_args_parse(int argc, char **argv, const efax_optdef *defs, const char *driver,
                             const char *about, char *err, size_t errlen) {
    return efaxb__parse(argc, argv, defs, NULL, driver, about, err, errlen);
}

EFAX_API int efax_opts_parse(efax_opts *o, int argc, char **argv, const efax_optdef *extra,
                             const char *driver, const char *about, char *err, size_t errlen) {
    const char *modes = NULL;
    char bh[64], eh[64], sz[32]; /* -b/-e help: the defaults this driver set before parsing */
    int rc;
    efax_optdef common[24];
    memset(common, 0, sizeof common);
    snprintf(bh, sizeof bh, "smallest message (default %s)", efax_fmt_size(o->min_size, sz, sizeof sz));
    snprintf(eh, sizeof eh, "largest message (default %s)", efax_fmt_size(o->max_size, sz, sizeof sz));
    {
        int k = 0;
/* A default's value in a help line, from the constant that sets it */
#define EFAXB__STR(x) EFAXB__STR1(x)
#define EFAXB__STR1(x) #x
#define EFAXB__OPT(l, s, t, d, lo, hi, ch, a, h)                                                             \
    do {                                                                                                     \
        common[k].name = l;                                                                                  \
        common[k].short_name = s;                                                                            \
        common[k].type = t;                                                                                  \
        common[k].dst = d;                                                                                   \
        common[k].min = lo;                                                                                  \
        common[k].max = hi;                                                                                  \
        common[k].choices = ch;                                                                              \
        common[k].arg = a;                                                                                   \
        common[k].help = h;                                                                                  \
        k++;                                                                                                 \
    } while (0)
        EFAXB__OPT("min-size", 'b', EFAX_OPT_SIZE, &o->min_size, 1, 68719476736.0, NULL, "SIZE", bh);
        EFAXB__OPT("max-size", 'e', EFAX_OPT_SIZE, &o->max_size, 1, 68719476736.0, NULL, "SIZE", eh);
        EFAXB__OPT("factor", 'f', EFAX_OPT_DOUBLE, &o->factor, 1.0, 1024, NULL, "F",
                   "size multiplier between rows, > 1 (default 2)");
        EFAXB__OPT("iters", 'n', EFAX_OPT_INT, &o->iters, 1, 10000000, NULL, "N",
                   "timed iterations per size (default: by size)");
        EFAXB__OPT("warmup", 'w', EFAX_OPT_INT, &o->warmup, 0, 1000000, NULL, "N",
                   "untimed iterations first (default: by size)");
        EFAXB__OPT("check", 'c', EFAX_OPT_FLAG, &o->check, 0, 0, NULL, NULL,
                   "verify every byte of every iteration (outside the timing)");
        EFAXB__OPT("provider", 0, EFAX_OPT_STR, &o->provider, 0, 0, NULL, "NAME",
                   "libfabric provider: efa, tcp, shm, ... (default: efa > tcp > shm)");
        EFAXB__OPT("nics", 0, EFAX_OPT_STR, &o->nics, 0, 0, NULL, "LIST",
                   "comma-separated NIC names (default: all but loopback)");
        EFAXB__OPT("mode", 0, EFAX_OPT_STR, &modes, 0, 0, NULL, "LIST",
                   "single,split,roundrobin,stripe or all (default single)");
        EFAXB__OPT("json", 0, EFAX_OPT_STR, &o->json, 0, 0, NULL, "FILE", "write JSON Lines records");
        EFAXB__OPT("csv", 0, EFAX_OPT_STR, &o->csv, 0, 0, NULL, "FILE", "write CSV rows");
        EFAXB__OPT("quiet", 'q', EFAX_OPT_FLAG, &o->quiet, 0, 0, NULL, NULL, "no table and no progress line");
        EFAXB__OPT("line-rate", 0, EFAX_OPT_DOUBLE, &o->line_gbps, 0.001, 100000, NULL, "GBPS",
                   "line rate of one NIC in Gbit/s for the % column");
        EFAXB__OPT("timeout", 0, EFAX_OPT_INT, &o->timeout_ms, 1, 86400000, NULL, "MS",
                   "fail any wait longer than this (default " EFAXB__STR(EFAX_TIMEOUT_MS_DEFAULT) ")");
        EFAXB__OPT("window", 0, EFAX_OPT_INT, &o->window, 1, 250, NULL, "N",
                   "messages in flight per iteration (default 1)");
        EFAXB__OPT("one-slot", 0, EFAX_OPT_FLAG, &o->one_slot, 0, 0, NULL, NULL,
                   "every message in flight from and into the same bytes, as fi_rdm_bw and osu_mbw_mr "
                   "send theirs (not with -c)");
        EFAXB__OPT("chunk", 0, EFAX_OPT_SIZE, &o->chunk, 64, 1073741824.0, NULL, "SIZE",
                   "most bytes one post carries (default " EFAX_CHUNK_POLICY ")");
        EFAXB__OPT("duration", 0, EFAX_OPT_DOUBLE, &o->duration_s, 0, 31536000, NULL, "S",
                   "repeat the sweep until S seconds have passed (soak)");
        EFAXB__OPT("mem", 0, EFAX_OPT_STR, &o->mem, 0, 0, NULL, "LIST",
                   "memory kinds: host, pin, dma, all (pin/dma in CUDA builds); staged: host memory "
                   "through staging buffers");
        EFAXB__OPT("efa-shm", 0, EFAX_OPT_FLAG, &o->efa_shm, 0, 0, NULL, NULL,
                   "efa: let its own shared memory carry same-host peers (default: the NIC does)");
        EFAXB__OPT("no-cuda-api", 0, EFAX_OPT_FLAG, &o->no_cuda_api, 0, 0, NULL, NULL,
                   "the provider may not call CUDA: device memory by GPUDirect RDMA only");
        EFAXB__OPT("cuda-api", 0, EFAX_OPT_FLAG, &o->cuda_api, 0, 0, NULL, NULL,
                   "efa may move device memory by CUDA copies where it has no GPUDirect (default: staged)");
#undef EFAXB__OPT
    }
    o->argc = argc;
    o->argv = argv;
    if ((rc = efaxb__parse(argc, argv, extra, common, driver, about, err, errlen))) return rc;
    if (o->cuda_api && o->no_cuda_api) {
        snprintf(err, errlen, "--cuda-api and --no-cuda-api contradict each other: pass one");
        return -EFAX_E_USAGE;
    }
    if (modes) {
        char buf[128], *tok, *save = NULL;
        o->modes = 0;
        snprintf(buf, sizeof buf, "%s", modes);
        for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            efax_mode m;
            if (!strcmp(tok, "all")) {
                o->modes = (1u << EFAX_MODE_COUNT) - 1;
                continue;
            }
            if (efax_mode_parse(tok, &m)) {
                snprintf(err, errlen,
                         "--mode: '%s' is not valid: expected single, split, roundrobin, stripe or all", tok);
                return -EFAX_E_USAGE;
            }
            o->modes |= 1u << m;
        }
        if (!o->modes) {
            snprintf(err, errlen, "--mode: no mode given: expected single, split, roundrobin, stripe or all");
            return -EFAX_E_USAGE;
        }
    }
    { /* environment values are options too: the harness's own, then efax.h's, checked before any
         rank waits on another */
        const char *e = getenv("EFAX_LINE_GBPS");
        char *end;
        if (e && *e) {
            o->line_gbps_env = strtod(e, &end);
            if (*end || !(o->line_gbps_env > 0 && o->line_gbps_env <= 100000)) {
                snprintf(err, errlen,
                         "EFAX_LINE_GBPS='%s' is not valid: expected a line rate in Gbit/s in (0, 100000]",
                         e);
                return -EFAX_E_USAGE;
            }
        }
        if ((rc = efax_env_check(err, errlen))) return rc;
    }
    if (!(o->factor > 1.0)) {
        snprintf(err, errlen, "-f/--factor: %g is not valid: the size factor must be greater than 1",
                 o->factor);
        return -EFAX_E_USAGE;
    }
    if (o->min_size > o->max_size) {
        char lo[32], hi[32];
        snprintf(
            err, errlen,
            "-b/--min-size %s is larger than -e/--max-size %s: the smallest size must not exceed the largest",
            efax_fmt_size(o->min_size, lo, sizeof lo), efax_fmt_size(o->max_size, hi, sizeof hi));
        return -EFAX_E_USAGE;
    }
    return 0;
}

EFAX_API int efax_opts_iters(const efax_opts *o, uint64_t size) {
    uint64_t n;
    if (o->iters > 0) return o->iters;
    n = size ? (1ull << 30) / size : 1000;
    return n < 10 ? 10 : n > 1000 ? 1000 : (int)n;
}

EFAX_API int efax_opts_warmup(const efax_opts *o, uint64_t size) {
    int n, iters = efax_opts_iters(o, size);
    if (o->warmup >= 0) return o->warmup;
    /* The sweep's first size pays for first touches: shm's command queue faults in a page every
       16 messages until it wrapped (~1000 messages: 1 B ping-pong averaged 2.0 us against 0.93
       at 2 B), connections and caches warm up. It warms up for as many iterations as it times
       (at most 2000). fi_pingpong -S all pays the same in its first size, 0 B, which no efax
       size is compared with. */
    if (size == o->min_size) return iters < 2000 ? iters : 2000;
    /* Every other size: a tenth of its iterations, at most 10 (200 bought nothing measurable:
       tcp's 1 MiB ping-pong read 6-22% above fi_pingpong's in three ./bench.sh runs either way). */
    n = iters / 10;
    return n < 1 ? 1 : n > 10 ? 10 : n;
}

EFAX_API uint64_t efax_opts_next_size(const efax_opts *o, uint64_t size) {
    double next;
    uint64_t n;
    if (size >= o->max_size) return 0;
    next = (double)size * o->factor;
    n = next >= (double)o->max_size ? o->max_size : (uint64_t)next;
    return n <= size ? size + 1 : n;
}

EFAX_PRIVATE int efaxb__cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

EFAX_API efax_stats efax_stats_of(double *v, int n) {
    efax_stats s;
    double sum = 0;
    int i, k;
    memset(&s, 0, sizeof s);
    if (n <= 0) return s;
    qsort(v, (size_t)n, sizeof *v, efaxb__cmp_double);
    for (i = 0; i < n; i++) sum += v[i];
    s.min = v[0];
    s.max = v[n - 1];
    s.avg = sum / n;
    s.p50 = v[(n - 1) / 2];
    k = (int)((99.0 * n + 99) / 100) - 1; /* nearest rank */
    s.p99 = v[k < 0 ? 0 : k >= n ? n - 1 : k];
    return s;
}


// >>results and the report (implementation) ---------------------------------------------------

EFAX_API const char *efax_result_kind_name(efax_result_kind k) {
    static const char *const names[EFAX_RESULT_KIND_COUNT] = {"oneway", "roundtrip", "halfrtt", "alltoall",
                                                              "ipc"};
    return (unsigned)k < EFAX_RESULT_KIND_COUNT ? names[k] : "unknown";
}

EFAX_API void efax_result_init(efax_result *res, const char *variant, const char *memory, const char *path,
                               efax_result_kind kind, uint64_t size, int window, int peers) {
    memset(res, 0, sizeof *res);
    snprintf(res->variant, sizeof res->variant, "%s", variant);
    snprintf(res->memory, sizeof res->memory, "%s", memory);
    snprintf(res->mem_path, sizeof res->mem_path, "%s", path);
    res->kind = kind;
    res->size = size;
    res->window = window;
    res->peers = peers;
    res->wrong = -1;
}

EFAX_API void efax_result_time(efax_result *res, double *lat_us, int n, uint64_t bytes_per_iter,
                               double line_gbps) {
    int i;
    double sum = 0;
    for (i = 0; i < n; i++) sum += lat_us[i];
    res->iters = n;
    res->seconds = sum * 1e-6;
    res->bytes = bytes_per_iter * (uint64_t)n;
    res->gbps = res->seconds > 0 ? (double)res->bytes * 8 / res->seconds / 1e9 : 0;
    res->mmsgs =
        res->seconds > 0 && res->size > 0 ? (double)res->bytes / (double)res->size / res->seconds / 1e6 : 0;
    res->line_gbps = line_gbps;
    res->lat_us = efax_stats_of(lat_us, n);
}

/* Line rate in Gbit/s of the first `nics` NICs together (efax_bench_line). */
EFAX_PRIVATE double efaxb__line_rate(const efax_ctx *ctx, const efax_opts *o, int nics) {
    double sum = 0;
    int i;
    if (nics > efax_ctx_nnics(ctx)) nics = efax_ctx_nnics(ctx);
    for (i = 0; i < nics; i++) {
        double r = o->line_gbps > 0       ? o->line_gbps
                   : o->line_gbps_env > 0 ? o->line_gbps_env
                                          : efax_ctx_nic(ctx, i)->link_gbps;
        if (r <= 0) return 0;
        sum += r;
    }
    return sum;
}

/* This process's resident memory in KiB (for soak runs), or -1. */
EFAX_PRIVATE long efaxb__rss_kib(void) {
    long pages = -1, rss = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = -1;
    fclose(f);
    return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Fills res->nic[] from the context's counters: bytes and operations each NIC sent since the
   last efax_ctx_stats_reset. */
EFAX_PRIVATE void efaxb__result_nics(efax_result *res, const efax_ctx *ctx) {
    int i;
    res->nnic = efax_ctx_nnics(ctx);
    for (i = 0; i < efax_ctx_nnics(ctx); i++) {
        snprintf(res->nic[i].name, sizeof res->nic[i].name, "%s", efax_ctx_nic(ctx, i)->name);
        res->nic[i].bytes = efax_ctx_stats(ctx, i).tx_bytes;
        res->nic[i].ops = efax_ctx_stats(ctx, i).tx_ops;
    }
}

/* JSON string with escapes, appended at buf+*used. */
EFAX_PRIVATE void efaxb__json_str(char *buf, size_t cap, size_t *used, const char *s) {
    size_t u = *used;
    if (u + 2 >= cap) return;
    buf[u++] = '"';
    for (; s && *s && u + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[u++] = '\\';
            buf[u++] = (char)c;
        } else if (c == '\n') {
            buf[u++] = '\\';
            buf[u++] = 'n';
        } else if (c == '\t') {
            buf[u++] = '\\';
            buf[u++] = 't';
        } else if (c < 0x20 || c == 0x7f)
            u += (size_t)snprintf(buf + u, cap - u, "\\u%04x", c);
        else
            buf[u++] = (char)c;
    }
    buf[u++] = '"';
    buf[u] = 0;
    *used = u;
}

EFAX_PRIVATE void efaxb__cat(char *buf, size_t cap, size_t *used, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
EFAX_PRIVATE void efaxb__cat(char *buf, size_t cap, size_t *used, const char *fmt, ...) {
    va_list ap;
    int n;
    if (*used >= cap) return;
    va_start(ap, fmt);
    n = vsnprintf(buf + *used, cap - *used, fmt, ap);
    va_end(ap);
    if (n > 0) *used = *used + (size_t)n < cap ? *used + (size_t)n : cap - 1;
}

/* A finite number, or null: JSON has no NaN or infinity. */
EFAX_PRIVATE void efaxb__json_num(char *buf, size_t cap, size_t *used, double v) {
    if (v != v || v > 1e300 || v < -1e300)
        efaxb__cat(buf, cap, used, "null");
    else
        efaxb__cat(buf, cap, used, "%.6g", v);
}

/* A JSON text written into a fixed buffer as a list of keys and values: each value is placed after
   a comma when one is due (not the first in its object or array), and a key is escaped as a string
   is, so no record writes its punctuation by hand. A text longer than the buffer is cut short. */
typedef struct efaxb__jw {
    char *buf;
    size_t cap, used;
} efaxb__jw;

/* The comma a value needs, then its key (NULL: an element of an array). */
EFAX_PRIVATE void efaxb__jw_key(efaxb__jw *w, const char *key) {
    char last = w->used ? w->buf[w->used - 1] : '{';
    if (last != '{' && last != '[' && last != ':') efaxb__cat(w->buf, w->cap, &w->used, ",");
    if (!key) return;
    efaxb__json_str(w->buf, w->cap, &w->used, key);
    efaxb__cat(w->buf, w->cap, &w->used, ":");
}

EFAX_PRIVATE void efaxb__jw_str(efaxb__jw *w, const char *key, const char *s) {
    efaxb__jw_key(w, key);
    efaxb__json_str(w->buf, w->cap, &w->used, s);
}

EFAX_PRIVATE void efaxb__jw_num(efaxb__jw *w, const char *key, double v) {
    efaxb__jw_key(w, key);
    efaxb__json_num(w->buf, w->cap, &w->used, v);
}

/* A number when there is one (known), else null. */
EFAX_PRIVATE void efaxb__jw_num_or_null(efaxb__jw *w, const char *key, bool known, double v) {
    efaxb__jw_key(w, key);
    if (known)
        efaxb__json_num(w->buf, w->cap, &w->used, v);
    else
        efaxb__cat(w->buf, w->cap, &w->used, "null");
}

EFAX_PRIVATE void efaxb__jw_int(efaxb__jw *w, const char *key, long long v) {
    efaxb__jw_key(w, key);
    efaxb__cat(w->buf, w->cap, &w->used, "%lld", v);
}

EFAX_PRIVATE void efaxb__jw_u64(efaxb__jw *w, const char *key, uint64_t v) {
    efaxb__jw_key(w, key);
    efaxb__cat(w->buf, w->cap, &w->used, "%llu", (unsigned long long)v);
}

/* A value written as it is: true, false, null. */
EFAX_PRIVATE void efaxb__jw_lit(efaxb__jw *w, const char *key, const char *literal) {
    efaxb__jw_key(w, key);
    efaxb__cat(w->buf, w->cap, &w->used, "%s", literal);
}

EFAX_PRIVATE void efaxb__jw_bool(efaxb__jw *w, const char *key, bool v) {
    efaxb__jw_lit(w, key, v ? "true" : "false");
}

/* Opens an object ('{') or an array ('['); efaxb__jw_close ends it. */
EFAX_PRIVATE void efaxb__jw_open(efaxb__jw *w, const char *key, char bracket) {
    efaxb__jw_key(w, key);
    efaxb__cat(w->buf, w->cap, &w->used, "%c", bracket);
}

EFAX_PRIVATE void efaxb__jw_close(efaxb__jw *w, char bracket) {
    efaxb__cat(w->buf, w->cap, &w->used, "%c", bracket);
}

/* Writes more keys into the object that ends text (the run's metadata, written before): false when
   text does not end in one. */
EFAX_PRIVATE bool efaxb__jw_reopen(efaxb__jw *w, char *text, size_t cap) {
    w->buf = text;
    w->cap = cap;
    w->used = strlen(text);
    if (!w->used || text[w->used - 1] != '}') return false;
    text[--w->used] = 0;
    return true;
}

/* Every rank's NICs and how they were chosen (efax_ctx_init: given, nearest the GPU, on the
   NUMA node): rank 0 keeps them for the header, one line per distinct choice. Collective. */
EFAX_PRIVATE int efaxb__gather_nic_choice(efax_report *r, const efax_ctx *ctx, efax_boot *boot) {
    char mine[EFAXB__CHOICE_LEN];
    size_t u = 0;
    int i, rc;
    memset(mine, 0, sizeof mine);
    for (i = 0; i < efax_ctx_nnics(ctx); i++)
        efaxb__cat(mine, sizeof mine, &u, "%s%s", i ? "," : "", efax_ctx_nic(ctx, i)->name);
    efaxb__cat(mine, sizeof mine, &u, " (%s)", efax_ctx_nic_choice(ctx)[0] ? efax_ctx_nic_choice(ctx) : "-");
    r->nic_choice =
        r->rank == 0 ? (char(*)[EFAXB__CHOICE_LEN])calloc((size_t)boot->size, EFAXB__CHOICE_LEN) : NULL;
    if (r->rank == 0 && !r->nic_choice) return -FI_ENOMEM;
    {
        char(*all)[EFAXB__CHOICE_LEN] =
            r->nic_choice ? r->nic_choice
                          : (char(*)[EFAXB__CHOICE_LEN])calloc((size_t)boot->size, EFAXB__CHOICE_LEN);
        if (!all) return -FI_ENOMEM;
        rc = efax_boot_allgather(boot, mine, sizeof mine, all, -1);
        if (all != r->nic_choice) free(all);
    }
    return rc;
}

/* Prints the NIC lines of the header from what efaxb__gather_nic_choice kept. */
EFAX_PRIVATE void efaxb__print_nic_choice(const efax_report *r) {
    int i, j, n = r->boot ? r->boot->size : 0;
    for (i = 0; r->nic_choice && i < n; i++) {
        for (j = 0; j < i; j++)
            if (!strcmp(r->nic_choice[j], r->nic_choice[i])) break;
        if (j < i) continue;
        printf("# NICs of rank(s)");
        for (j = i; j < n; j++)
            if (!strcmp(r->nic_choice[j], r->nic_choice[i])) printf(" %d", j);
        printf(": %.*s\n", EFAXB__CHOICE_LEN, r->nic_choice[i]);
    }
}

/* JSON for a NIC's -1/0/1 attribute: null (not efa, or unknown), false, true. */
EFAX_PRIVATE const char *efaxb__tri(int v) { return v < 0 ? "null" : v ? "true" : "false"; }

/* The header lines from efax_caps: GPUDirect (device memory on efa), the largest write when
   something below efax's own 1 GiB sets it, and what the ranks' fingerprints differ in. */
EFAX_PRIVATE void efaxb__print_caps(const efax_ctx *ctx) {
    const efax_caps *c = efax_ctx_caps(ctx);
    char mine[32], job[32];
    if (c->gpudirect == 1 && c->prov == EFAX_PROV_EFA && !strncmp(efax_ctx_mem_note(ctx), "dmabuf", 6))
        printf("# GPUDirect: yes, by dmabuf (efa took FI_OPT_CUDA_API_PERMITTED=false and a FI_MR_DMABUF "
               "registration, which it never redoes by peer memory: efa_mr.c)\n");
    else if (c->gpudirect == 1 && c->prov == EFAX_PROV_EFA && !strncmp(efax_ctx_mem_note(ctx), "hmem", 4))
        printf("# GPUDirect: yes, by dmabuf or peer memory (efa took FI_OPT_CUDA_API_PERMITTED=false; a "
               "registration by address it tries by dmabuf, then by peer memory (nvidia-peermem) without "
               "saying which: efa_mr.c)\n");
    else if (c->gpudirect == 1)
        printf("# GPUDirect: yes (%s took FI_OPT_CUDA_API_PERMITTED=false: device memory moves by the NIC)\n",
               c->provider);
    if (c->gpudirect == 0)
        printf("# GPUDirect: NO: %s found no GPU peer-to-peer support (it refused "
               "FI_OPT_CUDA_API_PERMITTED=false); %s\n",
               c->provider,
               c->cuda_api == 1
                   ? "device memory moves by CUDA copies inside the provider (--cuda-api)"
                   : "device memory is staged through host memory (--cuda-api: CUDA copies instead)");
    if (c->gpudirect < 0 && c->hmem && c->prov == EFAX_PROV_EFA)
        printf("# GPUDirect: unknown (libfabric < 1.18 cannot forbid efa's CUDA calls)\n");
    if (c->max_write < EFAX_MAX_CHUNK || efax_ctx_max_chunk(ctx) < EFAX_MAX_CHUNK || c->prov == EFAX_PROV_EFA)
        printf("# largest write: %s (%s; the job's: %s)\n", efax_fmt_size(c->max_write, mine, sizeof mine),
               c->max_write_from, efax_fmt_size(efax_ctx_max_chunk(ctx), job, sizeof job));
    if (efax_ctx_peer_note(ctx)[0]) printf("# ranks differ: %s\n", efax_ctx_peer_note(ctx));
}

/* The EFA installer's version from <root>/opt/amazon/efa_installed_packages ("# EFA installer version:
   1.38.0" on its first lines), into ver; false when there is none. */
EFAX_PRIVATE bool efaxb__efa_installer(char *ver, size_t len) {
    char path[PATH_MAX], line[256], *at;
    FILE *f;
    bool found = false;
    snprintf(path, sizeof path, "%s/opt/amazon/efa_installed_packages", efax_topo_sysfs_root());
    if (!(f = fopen(path, "r"))) return false;
    for (int i = 0; i < 8 && !found && fgets(line, sizeof line, f); i++)
        if ((at = strstr(line, "EFA installer version:"))) {
            at += strlen("EFA installer version:");
            while (*at == ' ') at++;
            at[strcspn(at, " \r\n")] = 0;
            snprintf(ver, len, "%s", at);
            found = *at != 0;
        }
    fclose(f);
    return found;
}

/* The file this process mapped libfabric from (/proc/self/maps), or "?". */
EFAX_PRIVATE void efaxb__libfabric_path(char *path, size_t len) {
    char line[PATH_MAX + 128];
    FILE *maps = fopen("/proc/self/maps", "r");
    snprintf(path, len, "?");
    while (maps && fgets(line, sizeof line, maps)) {
        char *at = strchr(line, '/');
        if (!at || !strstr(at, "/libfabric.so")) continue;
        at[strcspn(at, "\n")] = 0;
        snprintf(path, len, "%s", at);
        break;
    }
    if (maps) fclose(maps);
}

/* On efa (and where EFAX_FAULTS direct rehearses efa-direct): the fabric, which libfabric and EFA
   installer ran, efa's queues and largest write, and every FI_EFA_* variable set. */
EFAX_PRIVATE void efaxb__print_efa(const efax_ctx *ctx) {
    const efax_caps *c = efax_ctx_caps(ctx);
    const efax_nic_info *n0 = efax_ctx_nic(ctx, 0);
    char lib[PATH_MAX], ver[64];
    extern char **environ;
    int k = 0;
    if (!n0 || (c->prov != EFAX_PROV_EFA && !c->direct)) return;
    if (c->prov != EFAX_PROV_EFA)
        printf("# fabric: efa-direct's limits on %s (EFAX_FAULTS direct: a rehearsal; no efa here)\n",
               c->provider);
    else if (c->direct)
        printf("# fabric: efa-direct (the device's own operations: no tags, messages of at most %llu bytes, "
               "nothing emulated)\n",
               (unsigned long long)c->max_send);
    else
        printf(
            "# fabric: efa (efa's RDM protocol, which emulates what the device lacks; --provider efa-direct: "
            "the device's own operations alone)\n");
    efaxb__libfabric_path(lib, sizeof lib);
    printf("# libfabric %u.%u from %s (headers %u.%u); EFA installer %s\n", FI_MAJOR(fi_version()),
           FI_MINOR(fi_version()), lib, FI_MAJOR_VERSION, FI_MINOR_VERSION,
           efaxb__efa_installer(ver, sizeof ver) ? ver : "not found (no /opt/amazon/efa_installed_packages)");
    printf(
        "# efa queues, NIC %s: transmit %zu (efax keeps %d in flight), receive %zu, completion %d entries\n",
        n0->name, n0->tx_size, n0->window, n0->rx_size, n0->cq_size);
    printf("# FI_EFA_* in effect:");
    for (char **e = environ; e && *e; e++)
        if (!strncmp(*e, "FI_EFA_", 7)) printf("%s %s", k++ ? "," : "", *e);
    printf("%s\n", k ? "" : " none set (efa's defaults)");
}

/* The header lines that say what the NICs' results mean: message order, and on efa whether
   same-host peers use the NIC, whether writes are RDMA writes, whether CUDA calls are allowed. */
EFAX_PRIVATE void efaxb__print_nic_semantics(const efax_ctx *ctx) {
    const efax_caps *caps = efax_ctx_caps(ctx);
    int i, sas = 0, shm_on = 0, shm_off = 0, emu = 0, real = 0, cuda_off = 0, near = 0;
    char emu_names[256], peers[128];
    size_t eu = 0;
    emu_names[0] = 0;
    for (i = 0; i < efax_ctx_nnics(ctx); i++) {
        const efax_nic_info *n = efax_ctx_nic(ctx, i);
        sas += (n->msg_order & FI_ORDER_SAS) != 0;
        shm_on += n->efa_shm == 1;
        shm_off += n->efa_shm == 0;
        real += n->emulated_write == 0;
        cuda_off += n->cuda_api == 0;
        if (n->emulated_write == 1 && eu < sizeof emu_names) {
            emu++;
            eu += (size_t)snprintf(emu_names + eu, sizeof emu_names - eu, "%s%s", eu ? "," : "", n->name);
        }
    }
    printf("# message order: %s\n",
           sas == efax_ctx_nnics(ctx) ? "send-after-send (FI_ORDER_SAS granted)"
                                      : "not ordered on every NIC (efax matches receives by immediate data)");
    efaxb__print_efa(ctx);
    efaxb__print_caps(ctx);
    if (caps->prov != EFAX_PROV_EFA) {
        if (cuda_off) printf("# CUDA API in the provider: forbidden (FI_OPT_CUDA_API_PERMITTED=false)\n");
        return;
    }
    for (i = 0; i < efax_ctx_size(ctx); i++)
        near +=
            i != efax_ctx_rank(ctx) && !strcmp(efax_ctx_host(ctx, i), efax_ctx_host(ctx, efax_ctx_rank(ctx)));
    if (!near)
        snprintf(peers, sizeof peers, "no peer on rank %d's host (efa's shared memory carries nothing)",
                 efax_ctx_rank(ctx));
    else
        snprintf(peers, sizeof peers, "%d peer(s) on rank %d's host through %s", near, efax_ctx_rank(ctx),
                 shm_on    ? "efa's shared memory (--efa-shm: memcpy, not the NIC)"
                 : shm_off ? "the NIC (efa's shared memory off)"
                           : "what efa decides (this libfabric cannot switch its shared memory off)");
    printf("# efa: %s; writes: %s; CUDA API in the provider: %s; unsolicited write recv: %s\n", peers,
           emu                           ? "EMULATED with messages (not RDMA writes)"
           : real == efax_ctx_nnics(ctx) ? "RDMA writes (device)"
                                         : "unknown (libfabric < 1.18)",
           cuda_off              ? "forbidden (GPUDirect RDMA only)"
           : caps->cuda_api == 1 ? "permitted (--cuda-api)"
                                 : "permitted",
           caps->unsolicited_write_recv < 0 ? "efa's default (libfabric < 2.5 cannot set it)"
           : caps->unsolicited_write_recv   ? "on, alike on every rank"
                                            : "off, alike on every rank");
    if (emu)
        printf("# WARNING: efa emulates RDMA writes on NIC(s) %s: WRITE results there are not RDMA writes\n",
               emu_names);
}

/* The run's metadata, repeated in every JSON record so each stands alone: "run":{...} with what
   ran where (versions, provider, hosts, NICs, every rank's NIC choice, capabilities), the options
   and the command, and the environment that steers libfabric, efax and CUDA (never the token). */
EFAX_PRIVATE void efaxb__run_meta(efax_report *r, const efax_opts *o, efax_ctx *ctx, efax_boot *boot,
                                  const char *time_utc) {
    extern char **environ;
    efaxb__jw w = {r->meta, sizeof r->meta, 0};
    char text[1024], ver[64];
    size_t tu = 0;
    char **e;
    int i;
    efaxb__jw_open(&w, "run", '{');
    efaxb__jw_str(&w, "efax", EFAX_VERSION_STRING);
    snprintf(text, sizeof text, "%u.%u", FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
    efaxb__jw_str(&w, "libfabric", text);
    efaxb__jw_str(&w, "time", time_utc);
    efaxb__jw_int(&w, "ranks", boot ? boot->size : 1);
    efaxb__jw_str(&w, "provider", ctx ? efax_ctx_provider(ctx) : "-");
    efaxb__jw_str(&w, "provider_choice", ctx ? efax_ctx_provider_choice(ctx) : "-");
    if (ctx && efax_ctx_mem_note(ctx)[0]) efaxb__jw_str(&w, "device_memory", efax_ctx_mem_note(ctx));
    efaxb__jw_open(&w, "hosts", '[');
    for (i = 0; boot && i < boot->size; i++) {
        int j;
        for (j = 0; j < i; j++)
            if (!strcmp(boot->hosts[j], boot->hosts[i])) break;
        if (j == i) efaxb__jw_str(&w, NULL, boot->hosts[i]);
    }
    efaxb__jw_close(&w, ']');
    efaxb__jw_open(&w, "nics", '[');
    for (i = 0; ctx && i < efax_ctx_nnics(ctx); i++) {
        const efax_nic_info *n = efax_ctx_nic(ctx, i);
        efaxb__jw_open(&w, NULL, '{');
        efaxb__jw_str(&w, "name", n->name);
        efaxb__jw_str(&w, "pci", n->pci);
        efaxb__jw_num(&w, "link_gbps", n->link_gbps);
        efaxb__jw_int(&w, "numa", n->numa);
        efaxb__jw_bool(&w, "sas", n->msg_order & FI_ORDER_SAS);
        efaxb__jw_lit(&w, "efa_shm", efaxb__tri(n->efa_shm));
        efaxb__jw_lit(&w, "emulated_write", efaxb__tri(n->emulated_write));
        efaxb__jw_lit(&w, "cuda_api", efaxb__tri(n->cuda_api));
        efaxb__jw_lit(&w, "gpudirect", efaxb__tri(n->gpudirect));
        efaxb__jw_close(&w, '}');
    }
    efaxb__jw_close(&w, ']');
    efaxb__jw_str(&w, "nic_choice", ctx && efax_ctx_nic_choice(ctx)[0] ? efax_ctx_nic_choice(ctx) : "-");
    efaxb__jw_open(&w, "rank_nics", '['); /* every rank's NICs and why */
    for (i = 0; r->nic_choice && boot && i < boot->size; i++) {
        if (w.used + 2 * EFAXB__CHOICE_LEN > w.cap / 2) { /* room for the command and env */
            snprintf(text, sizeof text, "(ranks %d-%d: see the header)", i, boot->size - 1);
            efaxb__jw_str(&w, NULL, text);
            break;
        }
        efaxb__jw_str(&w, NULL, r->nic_choice[i]);
    }
    efaxb__jw_close(&w, ']');
    if (ctx) {
        const efax_caps *c = efax_ctx_caps(ctx);
        efaxb__jw_lit(&w, "gpudirect", efaxb__tri(c->gpudirect));
        efaxb__jw_u64(&w, "max_write", efax_ctx_max_chunk(ctx));
        efaxb__jw_lit(&w, "unsolicited_write_recv", efaxb__tri(c->unsolicited_write_recv));
        if (efax_ctx_peer_note(ctx)[0]) efaxb__jw_str(&w, "ranks_differ", efax_ctx_peer_note(ctx));
        if (c->prov == EFAX_PROV_EFA || c->direct) {
            efaxb__jw_str(&w, "fabric", c->direct ? "efa-direct" : "efa");
            efaxb__jw_u64(&w, "max_send", c->max_send);
        }
    }
    if (efaxb__efa_installer(ver, sizeof ver)) efaxb__jw_str(&w, "efa_installer", ver);
    efaxb__jw_bool(&w, "huge_pages", ctx && efax_ctx_huge_pages(ctx));
    efaxb__jw_int(&w, "window", o->window);
    efaxb__jw_bool(&w, "one_slot", o->one_slot);
    efaxb__jw_u64(&w, "chunk", o->chunk);
    efaxb__jw_bool(&w, "check", o->check);
    text[0] = 0;
    for (i = 0; i < o->argc; i++) efaxb__cat(text, sizeof text, &tu, "%s%s", i ? " " : "", o->argv[i]);
    efaxb__jw_str(&w, "command", text);
    efaxb__jw_open(&w, "env", '{');
    for (e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        char key[128];
        if (!eq ||
            (strncmp(*e, "FI_", 3) && strncmp(*e, "EFAX_", 5) && strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21)) ||
            (size_t)(eq - *e) >= sizeof key)
            continue;
        if (!strncmp(*e, "EFAX_TOKEN=", 11)) continue; /* a secret */
        memcpy(key, *e, (size_t)(eq - *e));
        key[eq - *e] = 0;
        efaxb__jw_str(&w, key, eq + 1);
    }
    efaxb__jw_close(&w, '}');
    efaxb__jw_close(&w, '}');
}

EFAX_API int efax_report_init(efax_report *r, const efax_opts *o, const char *driver, const char *memory,
                              efax_ctx *ctx, efax_boot *boot) {
    int i;
    char tbuf[64];
    time_t now = time(NULL);
    struct tm tmv;
    extern char **environ;
    memset(r, 0, sizeof *r);
    r->o = o;
    r->driver = driver;
    r->memory = memory;
    r->ctx = ctx;
    r->boot = boot;
    r->rank = boot ? boot->rank : 0;
    r->t0_ns = efax_now_ns();
    r->tty = isatty(2) && !o->quiet;
    if (ctx && boot && boot->size > 1 && (i = efaxb__gather_nic_choice(r, ctx, boot))) return i;
    if (r->rank != 0) return 0;
    if (o->json && !(r->json = fopen(o->json, "w"))) {
        fprintf(stderr, "efax: error: --json %s: cannot open: %s\n", o->json, strerror(errno));
        free(r->nic_choice), r->nic_choice = NULL;
        return -EFAX_E_USAGE;
    }
    if (o->csv && !(r->csv = fopen(o->csv, "w"))) {
        fprintf(stderr, "efax: error: --csv %s: cannot open: %s\n", o->csv, strerror(errno));
        free(r->nic_choice), r->nic_choice = NULL;
        return -EFAX_E_USAGE;
    }
    gmtime_r(&now, &tmv);
    strftime(tbuf, sizeof tbuf, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    efaxb__run_meta(r, o, ctx, boot, tbuf);
    if (r->csv)
        fprintf(r->csv,
                "driver,variant,kind,provider,memory,mem_path,size,iters,window,peers,gbps,gbs,pct_line,line_"
                "gbps,"
                "lat_min_us,lat_p50_us,lat_avg_us,lat_p99_us,lat_max_us,wrong,algbw_gbs,busbw_gbs,nic_bytes,"
                "nic_spread,mmsgs\n");
    if (!o->quiet) {
        char sz[32], cs[32];
        printf("# efax %s %s\n", driver, EFAX_VERSION_STRING);
        printf("# provider %s (%s), libfabric %u.%u, %d rank(s) on", ctx ? efax_ctx_provider(ctx) : "-",
               ctx ? efax_ctx_provider_choice(ctx) : "-", FI_MAJOR(fi_version()), FI_MINOR(fi_version()),
               boot ? boot->size : 1);
        for (i = 0; boot && i < boot->size; i++) {
            int j;
            for (j = 0; j < i; j++)
                if (!strcmp(boot->hosts[j], boot->hosts[i])) break;
            if (j == i) printf(" %s", boot->hosts[i]);
        }
        printf("\n# NICs (rank 0):");
        for (i = 0; ctx && i < efax_ctx_nnics(ctx); i++) {
            const efax_nic_info *n = efax_ctx_nic(ctx, i);
            printf(" %s", n->name);
            if (n->pci[0]) printf(" [%s]", n->pci);
            if (o->line_gbps > 0)
                printf(" (line %.3g Gbps, given)", o->line_gbps);
            else if (n->link_gbps > 0)
                printf(" (link %.3g Gbps)", n->link_gbps);
        }
        printf("\n# memory %s%s, window %d%s, chunk %s, check %s, size %s..%s x%g\n", memory,
               !ctx || !strstr(memory, "host") ? ""
               : efax_ctx_huge_pages(ctx)      ? " (huge pages from 2M)"
                                               : " (4K pages)",
               o->window, o->one_slot ? " (one slot)" : "",
               o->chunk ? efax_fmt_size(o->chunk, cs, sizeof cs) : "auto (" EFAX_CHUNK_POLICY ")",
               o->check ? "every byte" : "off", efax_fmt_size(o->min_size, sz, sizeof sz),
               efax_fmt_size(o->max_size, tbuf, sizeof tbuf), o->factor);
        if (ctx && efax_ctx_mem_note(ctx)[0]) printf("# device memory: %s\n", efax_ctx_mem_note(ctx));
        if (ctx && efax_ctx_faults(ctx)[0])
            printf("# faults: EFAX_FAULTS=%s (tcp and shm behaving as efa may; replay with this value)\n",
                   efax_ctx_faults(ctx));
        if (ctx) efaxb__print_nic_semantics(ctx);
        efaxb__print_nic_choice(r);
        free(r->nic_choice), r->nic_choice = NULL;
        printf("# command:");
        for (i = 0; i < o->argc; i++) printf(" %s", o->argv[i]);
        printf("\n");
        {
            char **e;
            int k = 0;
            for (e = environ; e && *e; e++)
                if ((!strncmp(*e, "FI_", 3) || !strncmp(*e, "EFAX_", 5)) && strncmp(*e, "EFAX_TOKEN=", 11))
                    printf("%s %s", k++ ? "" : "# env:", *e);
            if (k) printf("\n");
        }
        fflush(stdout);
    }
    free(r->nic_choice), r->nic_choice = NULL;
    return 0;
}

/* % of line rate: of the bandwidth on the wire (busbw for all-to-all, whose algbw counts the
   chunk each rank keeps). */
EFAX_PRIVATE double efaxb__pct(const efax_result *res) {
    double g = res->kind == EFAX_RESULT_ALLTOALL ? res->busbw_gbs * 8 : res->gbps;
    return res->line_gbps > 0 ? 100.0 * g / res->line_gbps : -1;
}

EFAX_API int efax_report_status(const efax_report *r) {
    if (!r || r->rank != 0) return 0;
    if (r->nwrong) {
        if (r->tty) fprintf(stderr, "\r\033[K");
        fflush(stdout);
        fprintf(stderr, "%s: wrong bytes in %d result(s): %s\n", r->driver, r->nwrong, r->wrong_rows);
    }
    if (!r->nresults) fprintf(stderr, "%s: the run measured nothing: no result was recorded\n", r->driver);
    return r->refused || r->nwrong || !r->nresults ? -EFAX_E_VERIFY : 0;
}

EFAX_API void efax_report_add(efax_report *r, const efax_result *res) {
    char buf[sizeof((efax_report *)0)->meta + 8192]; /* the record, then the run's metadata */
    size_t u = 0;
    int i;
    if (r->rank != 0) return;
    r->nresults++;
    if (r->ceiling_gbps > 0 && !strcmp(res->memory, "device")) {
        double g = res->kind == EFAX_RESULT_ALLTOALL ? res->busbw_gbs * 8 : res->gbps;
        double lim = r->ceiling_gbps * (res->peers > 1 ? res->peers : 1);
        if (g > lim * (1 + EFAX_CEILING_TOLERANCE)) {
            fprintf(stderr,
                    "efax: error: %s %llu bytes: %.1f Gbps is above the ceiling of %.1f Gbps (%s): the bytes "
                    "cannot have been in place, so this is no result\n",
                    res->variant, (unsigned long long)res->size, g, lim, r->ceiling_what);
            r->refused++;
            return;
        }
    }
    if (r->nrow < (int)(sizeof r->row / sizeof r->row[0])) r->row[r->nrow++] = *res;
    if (res->wrong > 0) {
        size_t w = strlen(r->wrong_rows);
        char sz[32];
        efaxb__cat(r->wrong_rows, sizeof r->wrong_rows, &w, "%s%s %s (%lld byte%s)", r->nwrong++ ? ", " : "",
                   efax_fmt_size(res->size, sz, sizeof sz), res->variant, (long long)res->wrong,
                   res->wrong == 1 ? "" : "s");
    }
    if (r->json) {
        efaxb__jw w = {buf, sizeof buf, 0};
        char idle[sizeof res->nic_idle], *tok, *save = NULL;
        efaxb__jw_open(&w, NULL, '{');
        efaxb__jw_int(&w, "schema", 1);
        efaxb__jw_str(&w, "driver", r->driver);
        efaxb__jw_str(&w, "variant", res->variant);
        efaxb__jw_str(&w, "kind", efax_result_kind_name(res->kind));
        efaxb__jw_str(&w, "provider", r->ctx ? efax_ctx_provider(r->ctx) : "-");
        efaxb__jw_str(&w, "memory", res->memory);
        efaxb__jw_str(&w, "mem_path", res->mem_path);
        if (r->ceiling_gbps > 0) efaxb__jw_num(&w, "ceiling_gbps", r->ceiling_gbps);
        efaxb__jw_u64(&w, "size", res->size);
        efaxb__jw_int(&w, "iters", res->iters);
        efaxb__jw_int(&w, "window", res->window);
        efaxb__jw_int(&w, "peers", res->peers);
        efaxb__jw_num(&w, "seconds", res->seconds);
        efaxb__jw_u64(&w, "bytes", res->bytes);
        efaxb__jw_num(&w, "gbps", res->gbps);
        efaxb__jw_num(&w, "gbs", res->gbps / 8);
        if (r->msg_rate) efaxb__jw_num(&w, "mmsgs", res->mmsgs);
        efaxb__jw_num_or_null(&w, "line_gbps", res->line_gbps > 0, res->line_gbps);
        efaxb__jw_num_or_null(&w, "pct_line", res->line_gbps > 0, efaxb__pct(res));
        efaxb__jw_open(&w, "lat_us", '{');
        efaxb__jw_num(&w, "min", res->lat_us.min);
        efaxb__jw_num(&w, "p50", res->lat_us.p50);
        efaxb__jw_num(&w, "avg", res->lat_us.avg);
        efaxb__jw_num(&w, "p99", res->lat_us.p99);
        efaxb__jw_num(&w, "max", res->lat_us.max);
        efaxb__jw_close(&w, '}');
        if (res->wrong < 0)
            efaxb__jw_lit(&w, "wrong", "null");
        else
            efaxb__jw_int(&w, "wrong", (long long)res->wrong);
        if (res->kind == EFAX_RESULT_ALLTOALL) {
            efaxb__jw_num(&w, "algbw_gbs", res->algbw_gbs);
            efaxb__jw_num(&w, "busbw_gbs", res->busbw_gbs);
        }
        efaxb__jw_open(&w, "nics", '[');
        for (i = 0; i < res->nnic; i++) {
            efaxb__jw_open(&w, NULL, '{');
            efaxb__jw_str(&w, "name", res->nic[i].name);
            efaxb__jw_u64(&w, "bytes", res->nic[i].bytes);
            efaxb__jw_u64(&w, "ops", res->nic[i].ops);
            efaxb__jw_close(&w, '}');
        }
        efaxb__jw_close(&w, ']');
        efaxb__jw_num_or_null(&w, "nic_spread", res->nic_spread > 0, res->nic_spread);
        efaxb__jw_open(&w, "nics_idle", '[');
        snprintf(idle, sizeof idle, "%s", res->nic_idle);
        for (tok = strtok_r(idle, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            efaxb__jw_str(&w, NULL, tok);
        efaxb__jw_close(&w, ']');
        if (res->wire[0]) efaxb__jw_str(&w, "wire", res->wire);
        fputs(buf, r->json);
        if (r->nic_json_len) fputs(r->nic_json, r->json); /* "counted", "nic_counters", "tcp_counters" */
        u = 0;
        buf[0] = 0;
        efaxb__cat(buf, sizeof buf, &u, "%s%s,%s}\n", res->extra[0] ? "," : "", res->extra, r->meta);
        fputs(buf, r->json);
        fflush(r->json);
    }
    if (r->csv) {
        fprintf(r->csv, "%s,%s,%s,%s,%s,%s,%llu,%d,%d,%d,%.6g,%.6g,", r->driver, res->variant,
                efax_result_kind_name(res->kind), r->ctx ? efax_ctx_provider(r->ctx) : "-", res->memory,
                res->mem_path, (unsigned long long)res->size, res->iters, res->window, res->peers, res->gbps,
                res->gbps / 8);
        if (res->line_gbps > 0)
            fprintf(r->csv, "%.6g,%.6g,", efaxb__pct(res), res->line_gbps);
        else
            fprintf(r->csv, ",,");
        fprintf(r->csv, "%.6g,%.6g,%.6g,%.6g,%.6g,", res->lat_us.min, res->lat_us.p50, res->lat_us.avg,
                res->lat_us.p99, res->lat_us.max);
        if (res->wrong >= 0) fprintf(r->csv, "%lld", (long long)res->wrong);
        fprintf(r->csv, ",%.6g,%.6g,", res->algbw_gbs, res->busbw_gbs);
        for (i = 0; i < res->nnic; i++)
            fprintf(r->csv, "%s%s=%llu", i ? ";" : "", res->nic[i].name,
                    (unsigned long long)res->nic[i].bytes);
        if (res->nic_nidle)
            fprintf(r->csv, ",idle:%s", res->nic_idle);
        else
            fprintf(r->csv, ",%.6g", res->nic_spread);
        if (r->msg_rate)
            fprintf(r->csv, ",%.6g\n", res->mmsgs);
        else
            fprintf(r->csv, ",\n");
        fflush(r->csv);
    }
}

/* The table's NIC spread: the busiest NIC's bytes over the idlest's ("1.00": even), or which NIC
   carried nothing ("r1 idle"; "3 idle" when several did), "-" when not counted. */
EFAX_PRIVATE void efaxb__spread_cell(const efax_result *x, char *buf, size_t len) {
    if (x->nic_nidle == 1)
        snprintf(buf, len, "%.*s idle", (int)(len > 6 ? len - 6 : 0), x->nic_idle);
    else if (x->nic_nidle > 1)
        snprintf(buf, len, "%d idle", x->nic_nidle);
    else if (x->nic_spread > 0)
        snprintf(buf, len, "%.2f", x->nic_spread);
    else
        snprintf(buf, len, "-");
}

EFAX_API void efax_report_row(efax_report *r) {
    int i;
    bool a2a;
    char sz[32];
    int64_t wrong = -1;
    if (r->rank != 0 || r->nrow == 0) {
        r->nrow = 0;
        return;
    }
    a2a = r->row[0].kind == EFAX_RESULT_ALLTOALL;
    if (r->tty) fprintf(stderr, "\r\033[K");
    if (!r->o->quiet) {
        if (!r->header_printed) {
            printf("\n%8s", "size");
            for (i = 0; i < r->nrow; i++)
                printf(" | %-*s", a2a ? 50 : r->msg_rate ? 51 : 41, r->row[i].variant);
            printf("%s\n%8s", r->o->check ? " | " : "", "(bytes)");
            for (i = 0; i < r->nrow; i++) {
                if (a2a)
                    printf(" | %9s %9s %6s %11s %10s", "algbw GB/s", "busbw GB/s", "%line", "p50 us",
                           "NIC spread");
                else
                    printf(" | %9s %6s %12s %10s",
                           r->row[i].kind == EFAX_RESULT_ROUNDTRIP ? "Gbps(rt)" : "Gbps", "%line",
                           r->row[i].kind == EFAX_RESULT_ROUNDTRIP ? "rtt p50 us" : "p50 us", "NIC spread");
                if (!a2a && r->msg_rate) printf(" %9s", "Mmsg/s");
            }
            printf("%s\n", r->o->check ? " | #wrong" : "");
            r->header_printed = true;
        }
        printf("%8s", efax_fmt_size(r->row[0].size, sz, sizeof sz));
        for (i = 0; i < r->nrow; i++) {
            const efax_result *x = &r->row[i];
            char pct[16], spread[16];
            if (x->line_gbps > 0)
                snprintf(pct, sizeof pct, "%6.1f", efaxb__pct(x));
            else
                snprintf(pct, sizeof pct, "%6s", "-");
            efaxb__spread_cell(x, spread, sizeof spread);
            if (a2a)
                printf(" | %10.3f %10.3f %6s %11.2f %10s", x->algbw_gbs, x->busbw_gbs, pct, x->lat_us.p50,
                       spread);
            else
                printf(" | %9.3f %6s %12.2f %10s", x->gbps, pct, x->lat_us.p50, spread);
            if (!a2a && r->msg_rate) printf(" %9.4f", x->mmsgs);
            if (x->wrong >= 0) wrong = (wrong < 0 ? 0 : wrong) + x->wrong;
        }
        if (r->o->check) printf(" | %lld", (long long)wrong);
        printf("\n");
        for (i = 0; i < r->nrow; i++)
            if (r->row[i].wire[0])
                printf("#   ^ %s: counters moved: %s\n", r->row[i].variant, r->row[i].wire);
        fflush(stdout);
    }
    r->nrow = 0;
}

EFAX_API void efax_report_progress(efax_report *r, const char *fmt, ...) {
    va_list ap;
    char msg[256];
    if (r->rank != 0 || !r->tty) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\r\033[K[%s %.0fs] %s", r->driver, (double)(efax_now_ns() - r->t0_ns) / 1e9, msg);
    fflush(stderr);
}

EFAX_API void efax_report_deinit(efax_report *r) {
    if (!r) return;
    if (r->tty && r->rank == 0) fprintf(stderr, "\r\033[K");
    if (r->json) fclose(r->json);
    if (r->csv) fclose(r->csv);
    free(r->nic_choice);
    free(r->nic_json);
    memset(r, 0, sizeof *r);
}

// >>nic counters (implementation) -------------------------------------------------------------

/* One rank's counters over a window of a row: efax's own per NIC, the OS's per NIC and the host's
   TCP counters (efax_os_counters_nic, efax_os_counters_tcp). */
typedef struct efaxb__win {
    efax_nic_stats own[EFAX_MAX_NICS];
    efax_os_counters os[EFAX_MAX_NICS];
    efax_os_counters tcp;
} efaxb__win;

struct efaxb__counts {
    efaxb__win start;               /* the raw counters when the window started */
    efaxb__win acc;                 /* the row's timed windows, summed (deltas) */
    efaxb__win now, d;              /* scratch */
    bool timed;                     /* acc holds an exchange's timed iterations */
    double first_us[EFAX_MAX_NICS]; /* the first message on each NIC (efax_bench_connect); -1: none */
};

/* One rank's counters as rank 0 gathers them (efaxb__count_row): [nmax] NICs, then TCP. */
typedef struct efaxb__rank_nic {
    char name[64];
    efax_nic_stats own;
    efax_os_counters os;
} efaxb__rank_nic;
typedef struct efaxb__rank_counts {
    char host[64];
    int nnic, timed;
    efax_os_counters tcp;
    efaxb__rank_nic nic[1]; /* [nmax] */
} efaxb__rank_counts;

EFAX_PRIVATE void efaxb__snap(const efax_bench *b, efaxb__win *w) {
    int i, n = efax_ctx_nnics(&b->ctx);
    for (i = 0; i < n; i++) {
        w->own[i] = efax_ctx_stats(&b->ctx, i);
        efax_os_counters_nic(efax_ctx_nic(&b->ctx, i), &w->os[i]);
    }
    efax_os_counters_tcp(&w->tcp);
}

/* acc += d, counter by counter (a counter acc lacks is added). */
EFAX_PRIVATE void efaxb__os_add(efax_os_counters *acc, const efax_os_counters *d) {
    int i, j;
    if (!d->source[0]) return;
    if (!acc->source[0]) {
        *acc = *d;
        return;
    }
    for (i = 0; i < d->n; i++) {
        for (j = 0; j < acc->n && strcmp(acc->name[j], d->name[i]); j++) {}
        if (j == acc->n && acc->n < EFAX_OS_COUNTERS_MAX) {
            memcpy(acc->name[acc->n], d->name[i], sizeof acc->name[0]);
            acc->value[acc->n++] = 0;
        }
        if (j < acc->n) acc->value[j] += d->value[i];
    }
}

/* d = now - start for n NICs */
EFAX_PRIVATE void efaxb__since(const efaxb__win *start, const efaxb__win *now, int n, efaxb__win *d) {
    int i;
    for (i = 0; i < n; i++) {
        d->own[i].tx_bytes = now->own[i].tx_bytes - start->own[i].tx_bytes;
        d->own[i].tx_ops = now->own[i].tx_ops - start->own[i].tx_ops;
        d->own[i].rx_bytes = now->own[i].rx_bytes - start->own[i].rx_bytes;
        d->own[i].rx_ops = now->own[i].rx_ops - start->own[i].rx_ops;
        d->own[i].eagain = now->own[i].eagain - start->own[i].eagain;
        memset(&d->os[i], 0, sizeof d->os[i]);
        if (start->os[i].source[0] && now->os[i].source[0])
            efax_os_counters_delta(&start->os[i], &now->os[i], &d->os[i]);
    }
    memset(&d->tcp, 0, sizeof d->tcp);
    if (start->tcp.source[0] && now->tcp.source[0]) efax_os_counters_delta(&start->tcp, &now->tcp, &d->tcp);
}

/* A row starts (efax_bench_next, efax_bench_variant, after the NIC counters were reset): its counters
   run from here, unless an exchange times part of it (efaxb__timed_begin/end). */
EFAX_PRIVATE void efaxb__count_begin(efax_bench *b) {
    if (!b->connected || !b->cnt) return;
    b->cnt->timed = false;
    memset(&b->cnt->acc, 0, sizeof b->cnt->acc);
    efaxb__snap(b, &b->cnt->start);
}

/* An exchange's timed iterations start and end: the row counts what they moved (every rank of the
   exchange reads its counters between two barriers, so no rank's reading runs into the timing). */
EFAX_PRIVATE void efaxb__timed_begin(efax_bench *b) {
    if (b->cnt) efaxb__snap(b, &b->cnt->start);
}
EFAX_PRIVATE void efaxb__timed_end(efax_bench *b) {
    int i, n = efax_ctx_nnics(&b->ctx);
    struct efaxb__counts *c = b->cnt;
    if (!c) return;
    efaxb__snap(b, &c->now);
    efaxb__since(&c->start, &c->now, n, &c->d);
    for (i = 0; i < n; i++) {
        c->acc.own[i].tx_bytes += c->d.own[i].tx_bytes;
        c->acc.own[i].tx_ops += c->d.own[i].tx_ops;
        c->acc.own[i].rx_bytes += c->d.own[i].rx_bytes;
        c->acc.own[i].rx_ops += c->d.own[i].rx_ops;
        c->acc.own[i].eagain += c->d.own[i].eagain;
        efaxb__os_add(&c->acc.os[i], &c->d.os[i]);
    }
    efaxb__os_add(&c->acc.tcp, &c->d.tcp);
    c->timed = true;
}

/* {"source":..,"dev":..,"delta":{name:value,...}} */
EFAX_PRIVATE void efaxb__os_json(char **buf, size_t *cap, size_t *u, const efax_os_counters *c);

/* Appends printf-formatted text to a growing heap string. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
EFAX_PRIVATE void
efaxb__grow(char **buf, size_t *cap, size_t *u, const char *fmt, ...) {
    va_list ap;
    int n;
    for (;;) {
        size_t room = *cap > *u ? *cap - *u : 0;
        va_start(ap, fmt);
        n = vsnprintf(*buf ? *buf + *u : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if ((size_t)n < room) {
            *u += (size_t)n;
            return;
        }
        {
            size_t want = (*cap ? *cap * 2 : 4096) + (size_t)n;
            char *p = (char *)realloc(*buf, want);
            if (!p) return;
            *buf = p;
            *cap = want;
        }
    }
}

EFAX_PRIVATE void efaxb__os_json(char **buf, size_t *cap, size_t *u, const efax_os_counters *c) {
    int i;
    if (!c->source[0]) {
        efaxb__grow(buf, cap, u, "null");
        return;
    }
    efaxb__grow(buf, cap, u, "{\"source\":\"%s\",\"dev\":", c->source);
    {
        char s[160];
        size_t su = 0;
        s[0] = 0;
        efaxb__json_str(s, sizeof s, &su, c->dev);
        efaxb__grow(buf, cap, u, "%s,\"delta\":{", s);
    }
    for (i = 0; i < c->n; i++)
        efaxb__grow(buf, cap, u, "%s\"%s\":%llu", i ? "," : "", c->name[i], (unsigned long long)c->value[i]);
    efaxb__grow(buf, cap, u, "}}");
}

/* Collective, from efax_bench_record: every rank's counters over the row (its timed windows, else
   since the row started) to rank 0, which sums efax's own counters per host and NIC name, takes the
   OS's once per host and device, and sets res->nic_spread / nic_idle and the row's counter JSON. */
EFAX_PRIVATE int efaxb__count_row(efax_bench *b, efax_result *res) {
    struct efaxb__counts *c = b->cnt;
    int i, r, rc, n = efax_ctx_nnics(&b->ctx), nmax = 0, *ns;
    size_t len;
    efaxb__rank_counts *mine, *all;
    const efaxb__win *w;
    if (!c || !b->connected) return 0;
    if (!(ns = (int *)calloc((size_t)b->size, sizeof(int)))) return -FI_ENOMEM;
    if ((rc = efax_boot_allgather(&b->boot, &n, sizeof n, ns, -1))) {
        free(ns);
        return rc;
    }
    for (r = 0; r < b->size; r++) nmax = ns[r] > nmax ? ns[r] : nmax;
    free(ns);
    len = sizeof(efaxb__rank_counts) + (size_t)(nmax > 1 ? nmax - 1 : 0) * sizeof(efaxb__rank_nic);
    mine = (efaxb__rank_counts *)calloc(1, len);
    all = (efaxb__rank_counts *)calloc((size_t)b->size, len);
    if (!mine || !all) {
        free(mine);
        free(all);
        return -FI_ENOMEM;
    }
    if (!c->timed) {
        efaxb__snap(b, &c->now);
        efaxb__since(&c->start, &c->now, n, &c->d);
    }
    w = c->timed ? &c->acc : &c->d;
    snprintf(mine->host, sizeof mine->host, "%s", b->boot.host);
    mine->nnic = n;
    mine->timed = c->timed;
    mine->tcp = w->tcp;
    for (i = 0; i < n; i++) {
        int twice = 0;
        for (r = 0; r < n; r++)
            twice |= r != i && !strcmp(efax_ctx_nic(&b->ctx, r)->name, efax_ctx_nic(&b->ctx, i)->name);
        /* a name listed twice (--nics lo,lo: two endpoints on one device) is told apart by its index */
        snprintf(mine->nic[i].name, sizeof mine->nic[i].name, twice ? "%s#%d" : "%s",
                 efax_ctx_nic(&b->ctx, i)->name, i);
        mine->nic[i].own = w->own[i];
        mine->nic[i].os = w->os[i];
    }
    rc = efax_boot_allgather(&b->boot, mine, len, all, -1);
    free(mine);
    if (!rc && b->rank == 0) {
        efax_report *rep = b->rep;
        /* the rows: one per (host, NIC name), in the order ranks name them */
        int nrow = 0, cap = b->size * nmax, timed = 1, nidle = 0;
        efaxb__rank_nic *row = (efaxb__rank_nic *)calloc((size_t)(cap ? cap : 1), sizeof *row);
        char(*rhost)[64] = (char(*)[64])calloc((size_t)(cap ? cap : 1), 64);
        double hi = 0, lo = -1;
        size_t u = 0;
        if (!row || !rhost) {
            free(row);
            free(rhost);
            free(all);
            return -FI_ENOMEM;
        }
        for (r = 0; r < b->size; r++) {
            const efaxb__rank_counts *x = (const efaxb__rank_counts *)((const char *)all + (size_t)r * len);
            timed &= x->timed;
            for (i = 0; i < x->nnic && i < nmax; i++) {
                int k;
                for (k = 0; k < nrow && (strcmp(rhost[k], x->host) || strcmp(row[k].name, x->nic[i].name));
                     k++) {}
                if (k == nrow) {
                    memcpy(rhost[k], x->host, 64);
                    memcpy(row[k].name, x->nic[i].name, 64);
                    nrow++;
                }
                row[k].own.tx_bytes += x->nic[i].own.tx_bytes;
                row[k].own.tx_ops += x->nic[i].own.tx_ops;
                row[k].own.rx_bytes += x->nic[i].own.rx_bytes;
                row[k].own.rx_ops += x->nic[i].own.rx_ops;
                row[k].own.eagain += x->nic[i].own.eagain;
                if (!row[k].os.source[0]) row[k].os = x->nic[i].os; /* the device's, once per host */
            }
        }
        /* the spread: each NIC name's bytes (sent and received, every host), busiest over idlest */
        res->nic_idle[0] = 0;
        for (i = 0; i < nrow; i++) {
            uint64_t bytes = 0;
            int k;
            for (k = 0; k < i && strcmp(row[k].name, row[i].name); k++) {}
            if (k < i) continue; /* the name was summed with its first row */
            for (k = i; k < nrow; k++)
                if (!strcmp(row[k].name, row[i].name)) bytes += row[k].own.tx_bytes + row[k].own.rx_bytes;
            if ((double)bytes > hi) hi = (double)bytes;
            if (lo < 0 || (double)bytes < lo) lo = (double)bytes;
            if (!bytes) {
                size_t l = strlen(res->nic_idle);
                snprintf(res->nic_idle + l, sizeof res->nic_idle - l, "%s%s", nidle++ ? "," : "",
                         row[i].name);
            }
        }
        res->nic_spread = lo > 0 ? hi / lo : 0;
        res->nic_nidle = nidle;
        /* the counters that say something went wrong (efa's SRD events, retransmits and drops; an
           interface's drops and errors), per host and NIC, with a verdict: the row prints them */
        res->wire[0] = 0;
        for (i = 0; i < nrow; i++) {
            char what[256];
            size_t wl = strlen(res->wire);
            /* a long list is cut where the field ends: said so by the per-NIC counters in the JSON */
            if (efax_os_counters_events(&row[i].os, what, sizeof what) && wl + 8 < sizeof res->wire) {
                int n = snprintf(res->wire + wl, sizeof res->wire - wl, "%s%.63s %.63s: %.180s",
                                 wl ? "; " : "", rhost[i], row[i].name, what);
                (void)n;
            }
        }
        rep->nic_json_len = 0;
        efaxb__grow(&rep->nic_json, &rep->nic_json_cap, &u, ",\"counted\":\"%s\",\"nic_counters\":[",
                    timed ? "timed" : "row");
        for (i = 0; i < nrow; i++) {
            char h[160];
            size_t hu = 0;
            h[0] = 0;
            efaxb__json_str(h, sizeof h, &hu, rhost[i]);
            efaxb__grow(&rep->nic_json, &rep->nic_json_cap, &u, "%s{\"host\":%s,\"nic\":", i ? "," : "", h);
            hu = 0;
            efaxb__json_str(h, sizeof h, &hu, row[i].name);
            efaxb__grow(&rep->nic_json, &rep->nic_json_cap, &u,
                        "%s,\"tx_bytes\":%llu,\"tx_ops\":%llu,\"rx_bytes\":%llu,\"rx_ops\":%llu,\"eagain\":%"
                        "llu,\"os\":",
                        h, (unsigned long long)row[i].own.tx_bytes, (unsigned long long)row[i].own.tx_ops,
                        (unsigned long long)row[i].own.rx_bytes, (unsigned long long)row[i].own.rx_ops,
                        (unsigned long long)row[i].own.eagain);
            efaxb__os_json(&rep->nic_json, &rep->nic_json_cap, &u, &row[i].os);
            efaxb__grow(&rep->nic_json, &rep->nic_json_cap, &u, "}");
        }
        efaxb__grow(&rep->nic_json, &rep->nic_json_cap, &u, "],\"tcp_counters\":[");
        for (r = 0, i = 0; r < b->size; r++) {
            const efaxb__rank_counts *x = (const efaxb__rank_counts *)((const char *)all + (size_t)r * len);
            int q;
            char h[160];
            size_t hu = 0;
            for (q = 0;
                 q < r &&
                 strcmp(((const efaxb__rank_counts *)((const char *)all + (size_t)q * len))->host, x->host);
                 q++) {}
            if (q < r || !x->tcp.source[0]) continue; /* a host's TCP counters once */
            h[0] = 0;
            efaxb__json_str(h, sizeof h, &hu, x->host);
            efaxb__grow(&rep->nic_json, &rep->nic_json_cap, &u, "%s{\"host\":%s,\"os\":", i++ ? "," : "", h);
            efaxb__os_json(&rep->nic_json, &rep->nic_json_cap, &u, &x->tcp);
            efaxb__grow(&rep->nic_json, &rep->nic_json_cap, &u, "}");
        }
        efaxb__grow(&rep->nic_json, &rep->nic_json_cap, &u, "]");
        rep->nic_json_len = u;
        free(row);
        free(rhost);
    }
    free(all);
    return rc;
}

/* Before the warm-up (efax_bench_connect): how long the first message takes on each NIC, NIC by NIC
   (every rank notifies every peer on its NIC k and waits for each peer that has a NIC k; a barrier
   between NICs, so a round's notices never meet the next round's; as many rounds on every rank as
   the rank with the most NICs has). Collective. */
EFAX_PRIVATE int efaxb__first_messages(efax_bench *b) {
    int k, p, rc = 0, n = efax_ctx_nnics(&b->ctx), nmax = 0;
    if (!b->cnt && !(b->cnt = (struct efaxb__counts *)calloc(1, sizeof *b->cnt))) return -FI_ENOMEM;
    for (k = 0; k < EFAX_MAX_NICS; k++) b->cnt->first_us[k] = -1;
    for (p = 0; p < b->size; p++)
        if (efax_ctx_peer_nnics(&b->ctx, p) > nmax) nmax = efax_ctx_peer_nnics(&b->ctx, p);
    for (k = 0; k < nmax && !rc && b->size > 1; k++) {
        uint64_t t0;
        if ((rc = efax_boot_barrier(&b->boot, -1))) break;
        t0 = efax_now_ns();
        for (p = 0; p < b->size && !rc && k < n; p++)
            if (p != b->rank) rc = efax_notify_nic(&b->ctx, p, k, EFAX_BENCH_TAG_ACK, (uint32_t)k);
        for (p = 0; p < b->size && !rc; p++)
            if (p != b->rank && k < efax_ctx_peer_nnics(&b->ctx, p))
                rc = efax_wait_imm(&b->ctx, p, EFAX_BENCH_TAG_ACK, (uint32_t)k, 1, -1);
        if (k < n) b->cnt->first_us[k] = (double)(efax_now_ns() - t0) / 1e3;
    }
    if (!rc && b->size > 1) rc = efax_boot_barrier(&b->boot, -1);
    return rc;
}

/* The run header's cold start (efax_bench_begin): each NIC of rank 0 (efax_ctx_cold: open, connect,
   registrations; the first message), the slowest rank's sum, and the same in the JSON's run
   metadata. Collective. */
typedef struct efaxb__cold_nic {
    char name[64];
    double open_ms, connect_ms, reg_ms, first_ms;
    uint32_t regs;
} efaxb__cold_nic;

EFAX_PRIVATE int efaxb__cold_header(efax_bench *b) {
    efaxb__cold_nic *mine, *all;
    efax_report *r = b->rep;
    int i, q, rc, n = efax_ctx_nnics(&b->ctx), slow = 0;
    double worst = -1;
    efaxb__jw w;
    if (!b->connected || !b->cnt) return 0;
    mine = (efaxb__cold_nic *)calloc(EFAX_MAX_NICS, sizeof *mine);
    all = (efaxb__cold_nic *)calloc((size_t)b->size * EFAX_MAX_NICS, sizeof *all);
    if (!mine || !all) {
        free(mine);
        free(all);
        return -FI_ENOMEM;
    }
    for (i = 0; i < n; i++) {
        efax_nic_cold c = efax_ctx_cold(&b->ctx, i);
        snprintf(mine[i].name, sizeof mine[i].name, "%s", efax_ctx_nic(&b->ctx, i)->name);
        mine[i].open_ms = (double)c.open_ns / 1e6;
        mine[i].connect_ms = (double)c.connect_ns / 1e6;
        mine[i].reg_ms = (double)c.reg_ns / 1e6;
        mine[i].regs = c.regs;
        mine[i].first_ms = b->cnt->first_us[i] < 0 ? -1 : b->cnt->first_us[i] / 1e3;
    }
    rc = efax_boot_allgather(&b->boot, mine, EFAX_MAX_NICS * sizeof *mine, all, -1);
    free(mine);
    if (rc || b->rank != 0) {
        free(all);
        return rc;
    }
    for (q = 0; q < b->size; q++) { /* the slowest rank: its NICs' times summed */
        double t = 0;
        for (i = 0; i < EFAX_MAX_NICS && all[q * EFAX_MAX_NICS + i].name[0]; i++) {
            const efaxb__cold_nic *x = &all[q * EFAX_MAX_NICS + i];
            t += x->open_ms + x->connect_ms + x->reg_ms + (x->first_ms > 0 ? x->first_ms : 0);
        }
        if (t > worst) {
            worst = t;
            slow = q;
        }
    }
    if (!b->o.quiet && !b->d.own_table) {
        printf(
            "# cold start, rank 0 per NIC: open (efax_ctx_init), connect (addresses into the AV), register "
            "(regions), first message\n");
        for (i = 0; i < n; i++) {
            char first[32] = "-";
            if (all[i].first_ms >= 0) snprintf(first, sizeof first, "%.3f ms", all[i].first_ms);
            printf("#   %-16s open %8.2f ms, connect %7.3f ms, register %7.3f ms (%u), first message %s\n",
                   all[i].name, all[i].open_ms, all[i].connect_ms, all[i].reg_ms, all[i].regs, first);
        }
        if (b->size > 1)
            printf("# cold start, slowest rank: %d (%s), %.1f ms over its NICs\n", slow, b->boot.hosts[slow],
                   worst);
        fflush(stdout);
    }
    /* the JSON: "cold":{"nics":[...],"slowest_rank":...} inside "run" */
    if (efaxb__jw_reopen(&w, r->meta, sizeof r->meta)) {
        efaxb__jw_open(&w, "cold", '{');
        efaxb__jw_open(&w, "nics", '[');
        for (i = 0; i < n; i++) {
            efaxb__jw_open(&w, NULL, '{');
            efaxb__jw_str(&w, "name", all[i].name);
            efaxb__jw_num(&w, "open_ms", all[i].open_ms);
            efaxb__jw_num(&w, "connect_ms", all[i].connect_ms);
            efaxb__jw_num(&w, "register_ms", all[i].reg_ms);
            efaxb__jw_u64(&w, "regions", all[i].regs);
            efaxb__jw_num_or_null(&w, "first_message_ms", all[i].first_ms >= 0, all[i].first_ms);
            efaxb__jw_close(&w, '}');
        }
        efaxb__jw_close(&w, ']');
        efaxb__jw_int(&w, "slowest_rank", slow);
        efaxb__jw_num(&w, "slowest_ms", worst);
        efaxb__jw_close(&w, '}');
        efaxb__jw_close(&w, '}');
    }
    free(all);
    return 0;
}

// >>steps (implementation) ------------------------------------------------------------------

EFAX_API int efax_bench_usage(const efax_bench *b, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s\n", b->d.driver, msg); /* one write: ranks' lines do not interleave */
    return -EFAX_E_USAGE;
}

/* --mem's list: the kinds this build has (efax_mem_select; efax_cuda_mem_select in CUDA builds) and
   "staged", host memory through staging buffers (efax_bench_mem_staged): the exchange into and out
   of staged regions, as device memory without GPUDirect makes it, on any machine. */
EFAX_PRIVATE int efaxb__mem_select(const char *list, const efax_mem_ops **kinds, int max, int *n, char *err,
                                   size_t len) {
    char buf[128], rest[128], *tok, *save = NULL;
    size_t u = 0;
    bool staged = false;
    int rc = 0;
    snprintf(buf, sizeof buf, "%s", list ? list : "");
    rest[0] = 0;
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "staged"))
            staged = true;
        else
            efaxb__cat(rest, sizeof rest, &u, "%s%s", u ? "," : "", tok);
    }
    *n = 0;
    err[0] = 0;
    if (staged && !rest[0]) {
        kinds[(*n)++] = efax_bench_mem_staged();
        return 0;
    }
#ifdef EFAX_CUDA_H
    rc = efax_cuda_mem_select(staged ? rest : list, kinds, max, n, err, len);
#else
    rc = efax_mem_select(staged ? rest : list, kinds, max, n, err, len);
#endif
    if (rc < 0 && strstr(err, "is not valid")) { /* the library's kinds; the bench adds one */
        size_t used = strlen(err);
        efaxb__cat(err, len, &used, " (or staged)");
    }
    if (rc < 0 || !staged) return rc;
    if (*n == max) {
        snprintf(err, len, "--mem %s: at most %d memory kinds a run; name fewer", list, max);
        return -EFAX_E_USAGE;
    }
    kinds[(*n)++] = efax_bench_mem_staged();
    return rc;
}

EFAX_API int efax_bench_open(efax_bench *b, const efax_bench_desc *d, int argc, char **argv) {
    efax_boot_desc bd;
    char err[256] = "";
    int rc, min;
    memset(b, 0, sizeof *b);
    b->d = *d;
    if (!(b->bufs = (efax_buf *)calloc(EFAX_BENCH_BUFS, sizeof *b->bufs))) return -FI_ENOMEM;
    efax_opts_init(&b->o);
    if (d->min_size) b->o.min_size = d->min_size;
    if (d->max_size) b->o.max_size = d->max_size;
    if (d->factor > 1) b->o.factor = d->factor;
    if (d->window) b->o.window = d->window;
#ifdef EFAX_CUDA_H
    b->o.mem = d->mem ? d->mem : "all";
#endif
    rc = d->own_options ? efax_args_parse(argc, argv, d->extra, d->driver, d->about, err, sizeof err)
                        : efax_opts_parse(&b->o, argc, argv, d->extra, d->driver, d->about, err, sizeof err);
    if (rc == 1) return EFAX_BENCH_DONE;
    if (rc) return efax_bench_usage(b, "%s", err);
    if (d->modes) b->o.modes = d->modes; /* the experiment's, not --mode's */
    if (d->own_table) b->o.quiet = true;
    if (d->xchg && d->xchg->window_iterations && b->o.window > EFAX_BUF_MARKS)
        return efax_bench_usage(b, "--window %d: at most %d iterations in flight", b->o.window,
                                EFAX_BUF_MARKS);
    if (b->o.one_slot && b->o.check)
        return efax_bench_usage(b, "--one-slot with -c: every message lands on the same bytes, so -c "
                                   "could not tell one from another; drop --one-slot to check");
    if (d->xchg && d->xchg->window_iterations && b->o.window > 1 && b->o.check)
        return efax_bench_usage(
            b,
            "--window %d with -c: -c fills and checks every iteration apart, one in flight; "
            "drop --window to check, or -c to measure iterations in flight",
            b->o.window);
    rc = efaxb__mem_select(b->o.mem, b->kinds, 3, &b->nk, err, sizeof err);
    if (rc < 0) return efax_bench_usage(b, "%s", err);
    for (int k = 0; k < b->nk && d->no_staged; k++)
        if (b->kinds[k] == efax_bench_mem_staged())
            return efax_bench_usage(b, "--mem staged: %s", d->no_staged);
    if (d->one_kind && b->nk > 1)
        return efax_bench_usage(b, "--mem: name one memory kind (host, pin, dma or staged)");
#ifdef EFAX_CUDA_H
    if (d->gpu && !efax_bench_gpu(d->driver)) return EFAX_BENCH_DONE;
#endif
    if (!b->nk) {
        printf("# %s\n", err);
        return EFAX_BENCH_DONE;
    }
    memset(&bd, 0, sizeof bd);
    bd.timeout_ms = b->o.timeout_ms;
    if ((rc = efax_boot_init(&b->boot, &bd))) return rc;
    b->rank = b->boot.rank, b->size = b->boot.size;
    min = d->min_ranks > 0 ? d->min_ranks : 2;
    if (b->size < min || (d->max_ranks > 0 && b->size > d->max_ranks)) {
        const char *how = d->max_ranks == min ? "exactly" : "at least";
        return efax_bench_usage(b, "needs %s %d ranks, not %d (e.g. mpirun -np %d %s)", how, min, b->size,
                                min, argv[0]);
    }
    if (err[0] && b->rank == 0) printf("# %s\n", err); /* kinds this machine cannot run */
    return 0;
}

/* The exchange's messages per writer and target (efax_bench_xchg.msgs, resolved). */
EFAX_PRIVATE int efaxb__msgs(const efax_bench *b) {
    return b->d.xchg->msgs > 0 ? b->d.xchg->msgs : b->o.window;
}

/* The most iterations in flight in any step (efax_bench_in_flight). */
EFAX_PRIVATE int efaxb__depth(const efax_bench *b) { return b->d.xchg->window_iterations ? b->o.window : 1; }

/* The exchange's data tags of one memory kind: msgs, unconfirmed twice per iteration in flight
   (a rank ending iteration i has started up to i + depth - 1, and a peer that took those may end
   them and start up to i + 2 depth - 1 before this rank consumed i's arrivals). */
EFAX_PRIVATE int efaxb__kind_tags(const efax_bench *b) {
    return efaxb__msgs(b) * (b->d.xchg->unconfirmed ? 2 * efaxb__depth(b) : 1);
}

/* The exchange's buffers, their tags prepared for staged writes, and the state of its messages. */
EFAX_PRIVATE int efaxb__xchg_init(efax_bench *b) {
    const efax_bench_xchg *l = b->d.xchg;
    size_t n = (size_t)b->size, msgs = (size_t)efaxb__msgs(b), max = (size_t)b->o.max_size;
    size_t src = l->bytes ? (size_t)l->bytes : max * msgs * (l->per_target ? n : 1);
    size_t dst = l->bytes ? (size_t)l->bytes : max * msgs * (l->per_writer ? n : 1);
    int rc = 0;
    for (int k = 0; k < b->nk && !rc; k++) {
        if (!(rc = efax_bench_buf(b, b->kinds[k], src, EFAX_MR_WRITE_SRC, &b->xsrc[k])))
            rc = efax_bench_buf(b, b->kinds[k], dst, EFAX_MR_WRITE_DST, &b->xdst[k]);
        if (!rc) b->xdst[k]->ops->poison(b->xdst[k], 0, dst);
        for (int q = 0; q < efaxb__kind_tags(b) && !rc; q++)
            rc = efax_expect_prepare(&b->ctx, &b->xdst[k]->mr,
                                     EFAX_BENCH_TAG_DATA + k * efaxb__kind_tags(b) + q);
    }
    b->xs = (efax_xfer *)efax_bench_calloc(b, n * msgs * (size_t)efaxb__depth(b), sizeof *b->xs);
    b->ex = (efax_expect *)efax_bench_calloc(b, n * msgs * (size_t)efaxb__depth(b), sizeof *b->ex);
    b->xland = (unsigned char *)efax_bench_calloc(b, n * (size_t)efaxb__depth(b), 1);
    b->xw = (efax_write_desc *)efax_bench_calloc(b, 2 * n * msgs, sizeof *b->xw);
    b->lat = (double *)efax_bench_calloc(b, (size_t)efax_opts_iters(&b->o, 1) * n, sizeof *b->lat);
    if (rc) return rc;
    return !b->xs || !b->ex || !b->xland || !b->xw || !b->lat ? -FI_ENOMEM : 0;
}

/* A run of host memory alone on a host with NVIDIA GPUs: libfabric makes no CUDA call. efa probes
   GPUDirect support at its start with a cudaMalloc on the current device (prov/efa/src/efa_hmem.c
   efa_hmem_info_check_p2p_support_cuda), which makes a CUDA context on GPU 0 in every rank that binds
   no GPU: 8 host-memory ranks would crowd GPU 0. FI_HMEM=system (src/hmem.c ofi_hmem_init: the
   interfaces libfabric initializes) leaves CUDA out, so efa has nothing to probe. Set before the first
   libfabric call of the process (efax_ctx_init's), unless the user set FI_HMEM; efax_bench_begin says
   so. A rank with device memory binds its GPU first (efax_cuda_use), so the probe lands there. */
EFAX_PRIVATE void efaxb__cuda_probe_off(efax_bench *b) {
    int k, gpus = efax_topo_gpus(efax_topo_sysfs_root(), NULL, 0);
    for (k = 0; k < b->nk; k++)
        if (b->kinds[k] != efax_mem_host() && b->kinds[k] != efax_bench_mem_staged()) return;
    if (!gpus) return;
    if (getenv("FI_HMEM")) {
        snprintf(b->cuda_note, sizeof b->cuda_note,
                 "host memory only on a host with %d NVIDIA GPU(s); FI_HMEM=%s is yours, so libfabric may "
                 "initialize CUDA (efa's probe makes a context on the current GPU)",
                 gpus, getenv("FI_HMEM"));
        return;
    }
    setenv("FI_HMEM", "system", 0);
    snprintf(
        b->cuda_note, sizeof b->cuda_note,
        "off (FI_HMEM=system): host memory only on a host with %d NVIDIA GPU(s), so efa's start-up probe "
        "makes no CUDA context on GPU 0 in every rank",
        gpus);
}

/* The proof that writes move by the device's RDMA write, after the warm-up: every rank writes
   EFAXB__PROOF bytes on each of its NICs to the next rank, and holds what each NIC's own counter of
   bytes sent by RDMA write (efa's hw_counters rdma_write_bytes) grew by against them
   (efax_os_write_verdict): efa emulates writes with messages without saying so where the device, the
   driver or a peer lacks what RDMA write needs (rdm/efa_rdm_rma.h efa_rdm_rma_should_write_using_rdma:
   the unsolicited-write-recv setting the CQ got, not the one efax set, decides), and the EFA NCCL
   recipes pass a run only if the hardware counters moved. The kernel caches these counters for their
   lifespan, so each reading waits that long first. Runs where any rank's NIC has the counter;
   collective. Rank 0 keeps every rank's verdicts in b->proof. */
#define EFAXB__PROOF (1u << 20)
#define EFAXB__PROOF_SEQ 64 /* the first messages' sequences are NIC indices below it */
EFAX_PRIVATE int efaxb__write_proof(efax_bench *b) {
    int n = efax_ctx_nnics(&b->ctx), k, rc, to = (b->rank + 1) % b->size,
        from = (b->rank + b->size - 1) % b->size;
    int wn = efax_ctx_peer_nnics(&b->ctx, from), life = 0, i;
    int64_t any = 0;
    efax_os_counters *before = NULL, after;
    efax_buf src, dst;
    efax_xfer *xs = NULL;
    efax_expect *ex = NULL;
    char mine[2560], *all = NULL;
    size_t u = 0;
    struct timespec ts;
    memset(&src, 0, sizeof src);
    memset(&dst, 0, sizeof dst);
    mine[0] = 0;
    if (b->size < 2) return 0;
    before = (efax_os_counters *)calloc((size_t)n, sizeof *before);
    if (!before) return -FI_ENOMEM;
    for (k = 0; k < n; k++) {
        if (efax_os_counters_nic(efax_ctx_nic(&b->ctx, k), &before[k]) == 0 &&
            efax_os_counter(&before[k], "rdma_write_bytes") >= 0)
            any = 1;
        if (before[k].lifespan_ms > life) life = before[k].lifespan_ms;
    }
    if ((rc = efax_boot_sum(&b->boot, any, &any, -1)) || !any) goto out;
    xs = (efax_xfer *)calloc((size_t)n, sizeof *xs);
    ex = (efax_expect *)calloc((size_t)(wn > 0 ? wn : 1), sizeof *ex);
    if (!xs || !ex) rc = -FI_ENOMEM;
    if (!rc) rc = efax_buf_alloc(&b->ctx, &src, efax_mem_host(), EFAXB__PROOF, EFAX_MR_WRITE_SRC);
    if (!rc) rc = efax_buf_alloc(&b->ctx, &dst, efax_mem_host(), EFAXB__PROOF, EFAX_MR_WRITE_DST);
    if (!rc) rc = efax_mr_exchange(&dst.mr, &b->boot);
    if (rc) goto out;
    if (life > 1000) life = 1000;
    ts.tv_sec = 0;
    ts.tv_nsec = (long)(life + 1) * 1000000L;
    if ((rc = efax_boot_barrier(&b->boot, -1))) goto out;
    if (life) nanosleep(&ts, NULL);
    for (k = 0; k < n; k++) efax_os_counters_nic(efax_ctx_nic(&b->ctx, k), &before[k]);
    for (k = 0; k < n + wn && !rc; k++) {
        efax_write_desc w;
        memset(&w, 0, sizeof w);
        w.from = k < n ? b->rank : from;
        w.to = k < n ? to : b->rank;
        w.src = &src.mr;
        w.dst = &dst.mr;
        w.size = EFAXB__PROOF / (uint64_t)(k < n ? n : wn);
        w.dst_off = (uint64_t)(k < n ? k : k - n) * w.size;
        w.src_off = w.dst_off;
        w.nic = k < n ? k : k - n;
        w.tag = EFAX_BENCH_TAG_ACK;
        w.seq = EFAXB__PROOF_SEQ + (uint32_t)w.nic;
        rc = k < n ? efax_write(&b->ctx, &xs[k], &w, NULL) : efax_expect_write(&b->ctx, &ex[k - n], &w);
    }
    for (k = 0; k < wn && !rc; k++) rc = efax_expect_wait(&b->ctx, &ex[k], -1);
    for (k = 0; k < n && !rc; k++) rc = efax_wait(&b->ctx, &xs[k], -1);
    if (!rc) rc = efax_boot_barrier(&b->boot, -1);
    if (rc) goto out;
    if (life) nanosleep(&ts, NULL);
    for (k = 0; k < n; k++) {
        char why[160];
        const char *v = "cannot tell";
        efax_os_counters_nic(efax_ctx_nic(&b->ctx, k), &after);
        efax_os_counters_delta(&before[k], &after, &after);
        i = efax_os_write_verdict(&after, EFAXB__PROOF / (uint64_t)n, why, sizeof why);
        v = i == 1 ? "yes" : i == 0 ? "EMULATED" : v;
        if (u < sizeof mine)
            u += (size_t)snprintf(mine + u, sizeof mine - u, "%s%s %s (%s)", u ? "; " : "",
                                  efax_ctx_nic(&b->ctx, k)->name, v, why);
    }
    all = (char *)calloc((size_t)b->size, sizeof mine);
    if (!all) rc = -FI_ENOMEM;
    if (!rc) rc = efax_boot_allgather(&b->boot, mine, sizeof mine, all, -1);
    if (!rc && b->rank == 0 && (b->proof = (char *)calloc((size_t)b->size, sizeof mine + 128))) {
        size_t pu = 0, cap = (size_t)b->size * (sizeof mine + 128);
        for (i = 0; i < b->size && pu < cap; i++) {
            all[(size_t)(i + 1) * sizeof mine - 1] = 0; /* a peer's text ends inside its slot */
            pu += (size_t)snprintf(b->proof + pu, cap - pu, "rank %d (%.64s): %s\n", i, b->boot.hosts[i],
                                   all + (size_t)i * sizeof mine);
        }
    }
out:
    efax_buf_free(&dst);
    efax_buf_free(&src);
    free(before);
    free(xs);
    free(ex);
    free(all);
    return rc;
}

EFAX_API int efax_bench_connect(efax_bench *b) {
    efax_ctx_desc cd;
    int rc, tags = b->d.xchg ? EFAX_BENCH_TAG_DATA + b->nk * efaxb__kind_tags(b) : 0;
    memset(&cd, 0, sizeof cd);
    cd.provider = b->o.provider;
    cd.nics = b->o.nics;
    cd.local_rank = b->boot.local_rank;
    cd.timeout_ms = b->o.timeout_ms;
    cd.efa_shm = b->o.efa_shm;
    cd.no_cuda_api = b->o.no_cuda_api;
    cd.cuda_api = b->o.cuda_api ? 1 : 0;
    cd.local_size = b->boot.local_size;
    cd.imm_tags = tags > 64 ? tags : 0;
    efaxb__cuda_probe_off(b);
#ifdef EFAX_CUDA_H
    if ((rc = efax_cuda_use(b->kinds, b->nk, b->boot.local_rank, &cd.hmem))) return rc; /* this rank's GPU */
    efax_cuda_near(&cd); /* device memory: the NICs nearest this GPU */
#endif
    b->connected = true; /* efax_ctx_deinit is safe on a half-opened context */
    if ((rc = efax_ctx_init(&b->ctx, &cd)) || (rc = efax_ctx_connect(&b->ctx, &b->boot))) return rc;
    if (b->d.modes && efax_ctx_nnics(&b->ctx) == 1) b->o.modes &= 1u << EFAX_MODE_SINGLE;
    if (b->d.sends && b->o.max_size > efax_ctx_caps(&b->ctx)->max_send) {
        uint64_t most = efax_ctx_caps(&b->ctx)->max_send;
        char m[32];
        efax_fmt_size(most, m, sizeof m);
        if (b->o.min_size > most)
            return efax_bench_usage(
                b, "-b: %s carries messages of at most %s (FI_OPT_MAX_MSG_SIZE); -b %s or less",
                efax_ctx_provider(&b->ctx), m, m);
        b->sends_cut = b->o.max_size; /* efax_bench_begin says so */
        b->o.max_size = most;
    }
    if (!b->d.cold && (rc = efaxb__first_messages(b))) return rc; /* the cold start's first messages */
    if (!b->d.cold && (rc = efax_ctx_warmup(&b->ctx))) return rc;
    if (!b->d.cold && (rc = efaxb__write_proof(b))) return rc; /* where a NIC counts its RDMA writes */
    return b->d.xchg ? efaxb__xchg_init(b) : 0;
}

/* efax_bench_mem_staged: the bytes live in b->ptr, the NICs see bounce (same offsets). Copies in
   are deferred as a GPU's run behind the host: they run once a mark is asked about (every other
   ask answers "not yet"), a wait or a two-sided copy comes, or too many are pending, so the core's
   waits on marks are tested without a GPU. */
#define EFAXB__HS_PENDING 64
typedef struct efaxb__hstage {
    uint8_t *bounce;
    unsigned long asks, in_asks;
    uint64_t marks;
    struct {
        uint64_t off, len;
    } pend[EFAXB__HS_PENDING];
    unsigned npend;
} efaxb__hstage;

/* Runs the copies in that are pending, oldest first. */
EFAX_PRIVATE void efaxb__hs_run(efax_buf *b) {
    efaxb__hstage *h = (efaxb__hstage *)b->impl;
    for (unsigned i = 0; i < h->npend; i++)
        memcpy((uint8_t *)b->ptr + h->pend[i].off, h->bounce + h->pend[i].off, h->pend[i].len);
    h->npend = 0;
}

EFAX_PRIVATE int efaxb__hs_out_begin(void *u, uint64_t off, uint64_t len, uint64_t unit) {
    efax_buf *b = (efax_buf *)u;
    (void)unit;
    memcpy(((efaxb__hstage *)b->impl)->bounce + off, (uint8_t *)b->ptr + off, len);
    return 0;
}
EFAX_PRIVATE bool efaxb__hs_out_ready(void *u, uint64_t off, uint64_t len) {
    (void)off, (void)len;
    return (++((efaxb__hstage *)((efax_buf *)u)->impl)->asks & 1) == 0;
}
EFAX_PRIVATE int efaxb__hs_in_cell(void *u, uint64_t off, uint64_t len) {
    efax_buf *b = (efax_buf *)u;
    efaxb__hstage *h = (efaxb__hstage *)b->impl;
    if (h->npend == EFAXB__HS_PENDING) efaxb__hs_run(b);
    h->pend[h->npend].off = off;
    h->pend[h->npend].len = len;
    h->npend++;
    return 0;
}
EFAX_PRIVATE int efaxb__hs_in(void *u, uint64_t off, uint64_t len) {
    efax_buf *b = (efax_buf *)u;
    efaxb__hs_run(b); /* earlier copies first, as one stream runs them */
    memcpy((uint8_t *)b->ptr + off, ((efaxb__hstage *)b->impl)->bounce + off, len);
    return 0;
}
EFAX_PRIVATE int efaxb__hs_out(void *u, uint64_t off, uint64_t len) {
    return efaxb__hs_out_begin(u, off, len, 0);
}
EFAX_PRIVATE int efaxb__hs_in_wait(void *u, int timeout_ms) {
    (void)timeout_ms;
    efaxb__hs_run((efax_buf *)u);
    return 0;
}
EFAX_PRIVATE int efaxb__hs_in_mark(void *u, uint64_t *mark) {
    *mark = ((efaxb__hstage *)((efax_buf *)u)->impl)->marks++;
    return 0;
}
EFAX_PRIVATE int efaxb__hs_in_marked(void *u, uint64_t mark) {
    efax_buf *b = (efax_buf *)u;
    (void)mark;
    if ((++((efaxb__hstage *)b->impl)->in_asks & 1) != 0) return 0;
    efaxb__hs_run(b);
    return 1;
}
static const efax_stage_ops efaxb__hs_ops = {efaxb__hs_out_begin, efaxb__hs_out_ready, efaxb__hs_in_cell,
                                             efaxb__hs_in_wait,   efaxb__hs_out,       efaxb__hs_in,
                                             efaxb__hs_in_mark,   efaxb__hs_in_marked};

EFAX_PRIVATE int efaxb__hs_alloc(efax_ctx *ctx, efax_buf *b, size_t len, unsigned access) {
    efaxb__hstage *h = (efaxb__hstage *)calloc(1, sizeof *h);
    efax_mr_desc md;
    b->impl = h;
    if (!h || !(b->ptr = efax_host_alloc(len)) || !(h->bounce = (uint8_t *)efax_host_alloc(len)))
        return -FI_ENOMEM;
    snprintf(b->path, sizeof b->path, "staged");
    if (!ctx) return 0;
    memset(&md, 0, sizeof md);
    md.ptr = h->bounce;
    md.len = len;
    md.access = access;
    md.stage = &efaxb__hs_ops;
    md.stage_user = b;
    return efax_mr_reg(ctx, &b->mr, &md);
}
EFAX_PRIVATE void efaxb__hs_release(efax_buf *b) {
    efaxb__hstage *h = (efaxb__hstage *)b->impl;
    if (h) free(h->bounce);
    free(h);
    free(b->ptr);
}
/* the bytes live in host memory, b->ptr: the pattern and copies are the host kind's */
EFAX_PRIVATE void efaxb__hs_fill(efax_buf *b, uint64_t off, uint64_t len, int rank, uint64_t iter) {
    efax_mem_host()->fill(b, off, len, rank, iter);
}
EFAX_PRIVATE void efaxb__hs_poison(efax_buf *b, uint64_t off, uint64_t len) {
    efax_mem_host()->poison(b, off, len);
}
EFAX_PRIVATE uint64_t efaxb__hs_check(efax_buf *b, uint64_t off, uint64_t len, int rank, uint64_t iter) {
    return efax_mem_host()->check(b, off, len, rank, iter);
}
EFAX_PRIVATE void efaxb__hs_copy(efax_buf *dst, uint64_t doff, const efax_buf *src, uint64_t soff,
                                 uint64_t len) {
    efax_mem_host()->copy(dst, doff, src, soff, len);
}

EFAX_API const efax_mem_ops *efax_bench_mem_staged(void) {
    /* in efax_mem_ops' order, each field named: C++17 (g++, nvcc) has no designated initializers */
    static const efax_mem_ops ops = {
        "host",            /* name */
        "Staged",          /* label: Single + Staged, as --mem staged's columns */
        efaxb__hs_alloc,   /* alloc */
        efaxb__hs_release, /* release */
        efaxb__hs_fill,    /* fill */
        efaxb__hs_poison,  /* poison */
        efaxb__hs_check,   /* check */
        efaxb__hs_copy,    /* copy */
        NULL,              /* settle */
        NULL,              /* mark */
        NULL,              /* marked */
    };
    return &ops;
}

EFAX_API int efax_bench_buf(efax_bench *b, const efax_mem_ops *kind, size_t len, unsigned access,
                            efax_buf **out) {
    efax_buf *buf;
    int rc;
    if (b->nbuf == EFAX_BENCH_BUFS) return -FI_ENOMEM;
    buf = &b->bufs[b->nbuf++];
    if ((rc = efax_buf_alloc(b->connected ? &b->ctx : NULL, buf, kind, len, access))) return rc;
    if (b->connected && (access & EFAX_MR_WRITE_DST) && (rc = efax_mr_exchange(&buf->mr, &b->boot)))
        return rc;
    *out = buf;
    return 0;
}

EFAX_API void *efax_bench_calloc(efax_bench *b, size_t n, size_t size) {
    void *p;
    if (b->nalloc == EFAX_BENCH_ALLOCS || !(p = calloc(n ? n : 1, size ? size : 1))) return NULL;
    return b->allocs[b->nalloc++] = p;
}

#ifdef EFAX_CUDA_H
EFAX_PRIVATE int efaxb__ceiling(efax_bench *b, size_t bytes);
#endif

EFAX_API int efax_bench_begin(efax_bench *b, const char *memory) {
    char names[64];
    int rc;
    if (!memory) { /* the kinds' names; host memory through staging buffers (--mem staged) as "staged" */
        size_t u = 0;
        names[0] = 0;
        for (int k = 0; k < b->nk; k++)
            efaxb__cat(names, sizeof names, &u, "%s%s", k ? "," : "",
                       b->kinds[k] == efax_bench_mem_staged() ? "staged" : b->kinds[k]->name);
        memory = names;
    }
    if (!(b->rep = (efax_report *)calloc(1, sizeof *b->rep))) return -FI_ENOMEM;
    b->begun = true;
    if ((rc = efax_report_init(b->rep, &b->o, b->d.driver, memory, b->connected ? &b->ctx : NULL, &b->boot)))
        return rc;
    b->rep->msg_rate = b->d.msg_rate;
    if (b->sends_cut && b->rank == 0 && !b->o.quiet) {
        char m[32], e[32];
        printf(
            "# sizes above %s left out (-e %s): %s carries messages of at most %s (FI_OPT_MAX_MSG_SIZE%s)\n",
            efax_fmt_size(b->o.max_size, m, sizeof m), efax_fmt_size(b->sends_cut, e, sizeof e),
            efax_ctx_caps(&b->ctx)->direct ? "efa-direct" : efax_ctx_provider(&b->ctx), m,
            efax_ctx_caps(&b->ctx)->direct ? ": the device's MTU" : "");
    }
    if (b->cuda_note[0] && b->rank == 0 && !b->o.quiet) printf("# CUDA in libfabric: %s\n", b->cuda_note);
    if (b->proof && b->rank == 0) {
        const char *line = b->proof;
        efaxb__jw w;
        if (!b->o.quiet)
            printf(
                "# device RDMA write after the warm-up (each NIC's rdma_write_bytes against what this rank "
                "wrote on it, %u KiB a rank):\n",
                EFAXB__PROOF >> 10);
        while (!b->o.quiet && *line) {
            int len = (int)strcspn(line, "\n");
            printf("#   %.*s\n", len, line);
            line += len + (line[len] == '\n');
        }
        if (efaxb__jw_reopen(&w, b->rep->meta, sizeof b->rep->meta)) { /* "device_write" inside "run" */
            efaxb__jw_str(&w, "device_write", b->proof);
            efaxb__jw_close(&w, '}');
        }
    }
    if ((rc = efaxb__cold_header(b))) return rc; /* collective */
#ifdef EFAX_CUDA_H
    if (b->connected && efax_cuda_wants_hmem(b->kinds, b->nk)) return efaxb__ceiling(b, 256u << 20);
#endif
    return 0;
}

/* The first mode of --mode at or after m; EFAX_MODE_COUNT when none. */
EFAX_PRIVATE int efaxb__mode_from(const efax_bench *b, int m) {
    while (m < EFAX_MODE_COUNT && !(b->o.modes & (1u << m))) m++;
    return m;
}

/* The soak's decision at the end of a sweep: rank 0 says whether the time is up, every rank
   follows. Returns 1 (sweep again), 0 or a negative code. */
EFAX_PRIVATE int efaxb__again(efax_bench *b) {
    int64_t go, any = 0;
    int rc;
    if (!(b->o.duration_s > 0)) return 0;
    b->sweeps++;
    go = b->rank == 0 && (double)(efax_now_ns() - b->t_start) / 1e9 < b->o.duration_s;
    if (b->rank == 0)
        fprintf(stderr, "# sweep %llu done after %.0f s, rss %ld KiB\n", (unsigned long long)b->sweeps,
                (double)(efax_now_ns() - b->t_start) / 1e9, efaxb__rss_kib());
    if ((rc = efax_boot_sum(&b->boot, go, &any, EFAX_TURN_MS))) return rc;
    return any > 0;
}

EFAX_API bool efax_bench_next(efax_bench *b, efax_bench_step *st, int *rc) {
    int again;
    if (!st->started) {
        st->started = true;
        b->t_start = efax_now_ns();
        st->size = b->o.min_size;
        st->mode = (efax_mode)efaxb__mode_from(b, 0);
        st->k = 0;
    } else if (++st->k == b->nk) { /* the next mode, or the next size */
        st->k = 0;
        st->mode = (efax_mode)efaxb__mode_from(b, st->mode + 1);
        if (st->mode == EFAX_MODE_COUNT) {
            if (b->begun) efax_report_row(b->rep);
            st->mode = (efax_mode)efaxb__mode_from(b, 0);
            if (!(st->size = efax_opts_next_size(&b->o, st->size))) {
                if ((again = efaxb__again(b)) <= 0) {
                    if (again < 0) *rc = again;
                    return false;
                }
                st->size = b->o.min_size;
            }
        }
    }
    if (st->mode == EFAX_MODE_COUNT || !b->nk) return false;
    st->kind = b->kinds[st->k];
    st->iters = efax_opts_iters(&b->o, st->size);
    st->warmup = efax_opts_warmup(&b->o, st->size);
    if (b->connected) efax_ctx_stats_reset(&b->ctx);
    efaxb__count_begin(b);
    b->confirmed_behind = 0;
    if (b->begun)
        efax_report_progress(b->rep, "%s %llu bytes", efax_mode_label(st->mode),
                             (unsigned long long)st->size);
    return true;
}

EFAX_API double efax_bench_line(const efax_bench *b, efax_mode mode) {
    return efaxb__line_rate(&b->ctx, &b->o, mode == EFAX_MODE_SINGLE ? 1 : efax_ctx_nnics(&b->ctx));
}

EFAX_API uint64_t efax_bench_slot_off(const efax_bench *b, uint64_t slot, uint64_t size) {
    return b->o.one_slot ? 0 : slot * size;
}

/* Gathers every rank's `iters` times (collective). On rank 0: lat[it] becomes the slowest rank's
   time of iteration it, and *all (free it) every rank's times, rank r's at all + r*iters; NULL
   elsewhere. Returns 0, -FI_ENOMEM or the bootstrap's error. */
EFAX_PRIVATE int efaxb__gather_slowest(efax_bench *b, double *lat, int iters, double **all) {
    double *a = (double *)calloc((size_t)iters * (size_t)b->size + 1, sizeof(double));
    int rc =
        a ? efax_boot_allgather(&b->boot, lat, sizeof(double) * (size_t)iters, a, EFAX_TURN_MS) : -FI_ENOMEM;
    if (rc || b->rank != 0) {
        free(a);
        return rc;
    }
    for (int q = 0; q < b->size; q++)
        for (int it = 0; it < iters; it++)
            if (a[(size_t)q * (size_t)iters + (size_t)it] > lat[it])
                lat[it] = a[(size_t)q * (size_t)iters + (size_t)it];
    *all = a;
    return 0;
}

EFAX_API int efax_bench_writers(efax_bench *b, efax_result *res, double *lat, int iters, int writers,
                                uint64_t bytes, double line) {
    double line_per_host = line * (b->boot.local_size > 0 ? b->boot.local_size : 1), *all = NULL, sum = 0,
           host_sum = 0;
    size_t u = strlen(res->extra);
    int rc = efaxb__gather_slowest(b, lat, iters, &all);
    if (rc || b->rank != 0) return rc;
    printf("#   %s %llu bytes:", res->variant, (unsigned long long)res->size);
    u += (size_t)snprintf(res->extra + u, sizeof res->extra - u, "\"ranks\":[");
    for (int w = 0; w < writers; w++) {
        const char *host = b->boot.hosts[w];
        double t = 0, g;
        for (int it = 0; it < iters; it++) t += all[(size_t)w * (size_t)iters + (size_t)it];
        g = t > 0 ? (double)bytes * iters * 8 / (t * 1e3) : 0;
        sum += g, host_sum += g;
        printf(" rank %d (%s) %.3f Gbps", w, host, g);
        u += (size_t)snprintf(res->extra + u, sizeof res->extra - u,
                              "%s{\"rank\":%d,\"host\":\"%s\",\"gbps\":%.6g}", w ? "," : "", w, host, g);
        if (w + 1 < writers && !strcmp(b->boot.hosts[w + 1], host)) continue; /* not its host's last writer */
        printf("; host %s %.3f Gbps", host, host_sum);
        if (line_per_host > 0) printf(" = %.1f%% of the rails it used", 100 * host_sum / line_per_host);
        host_sum = 0;
    }
    snprintf(res->extra + u, sizeof res->extra - u, "]");
    printf("; all %.3f Gbps\n", sum);
    free(all);
    return 0;
}

EFAX_API void efax_bench_result(efax_result *res, const efax_bench_step *st, const efax_buf *buf,
                                const char *suffix, efax_result_kind kind, int window, int peers) {
    char label[sizeof res->variant];
    snprintf(label, sizeof label, "%s%s%s%s", efax_mode_label(st->mode), st->kind->label, suffix ? " " : "",
             suffix ? suffix : "");
    efax_result_init(res, label, st->kind->name, buf->path, kind, st->size, window, peers);
}

EFAX_API int efax_bench_record(efax_bench *b, efax_result *res, int64_t wrong) {
    int64_t total = 0, behind = 0;
    bool counts_behind = b->d.xchg && b->d.xchg->confirm_behind;
    int rc = efax_boot_sum(&b->boot, wrong, &total, EFAX_TURN_MS);
    if (!rc) rc = efaxb__count_row(b, res); /* collective: where the bytes went, every rank's NICs */
    if (!rc && counts_behind)
        rc = efax_boot_sum(&b->boot, (int64_t)b->confirmed_behind, &behind, EFAX_TURN_MS);
    if (rc || b->rank != 0) return rc;
    res->wrong = b->o.check ? total : -1;
    if (counts_behind) { /* whether the windows overlapped their confirmations: the time alone cannot say */
        size_t u = strlen(res->extra);
        efaxb__cat(res->extra, sizeof res->extra, &u, "%s\"confirmed_behind\":%lld", u ? "," : "",
                   (long long)behind);
    }
    if (b->connected) efaxb__result_nics(res, &b->ctx);
    efax_report_add(b->rep, res);
    return 0;
}

EFAX_API int efax_bench_close(efax_bench *b, int rc) {
    int i;
    if (rc == EFAX_BENCH_DONE)
        rc = 0;
    else if (!rc && b->begun)
        rc = efax_report_status(b->rep);
    efax_report_deinit(b->rep);
    free(b->rep);
    for (i = b->nbuf - 1; i >= 0; i--) efax_buf_free(&b->bufs[i]);
    free(b->bufs);
    for (i = 0; i < b->nalloc; i++) free(b->allocs[i]);
    if (b->connected) efax_ctx_deinit(&b->ctx);
    free(b->cnt);
    free(b->proof);
    efax_boot_deinit(&b->boot);
    return efax_exit_code(rc);
}

EFAX_API int efax_bench_args(int argc, char **argv, const efax_optdef *defs, const char *driver,
                             const char *about) {
    char err[256] = "";
    int rc = efax_args_parse(argc, argv, defs, driver, about, err, sizeof err);
    if (rc < 0) fprintf(stderr, "%s: %s\n", driver, err);
    return rc == 1 ? EFAX_BENCH_DONE : rc;
}

EFAX_API void efax_bench_jsonl(FILE *f, const char *driver, const char *fmt, ...) {
    va_list ap;
    if (!f) return;
    fprintf(f, "{\"schema\":1,\"driver\":\"%s\",", driver);
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputs("}\n", f);
}

EFAX_API void efax_bench_variant(efax_bench *b, const efax_bench_step *st, const char *name) {
    if (b->connected) efax_ctx_stats_reset(&b->ctx);
    efaxb__count_begin(b);
    if (b->begun)
        efax_report_progress(b->rep, "%s %s %llu bytes", efax_mode_label(st->mode), name,
                             (unsigned long long)st->size);
}

EFAX_API int efax_bench_bufs(efax_bench *b, size_t len, unsigned src_access, unsigned dst_access,
                             efax_buf **srcs, efax_buf **dsts) {
    int rc = 0;
    for (int k = 0; k < b->nk && !rc; k++)
        if (!(rc = efax_bench_buf(b, b->kinds[k], len, src_access, &srcs[k])) &&
            !(rc = efax_bench_buf(b, b->kinds[k], len, dst_access, &dsts[k])))
            dsts[k]->ops->poison(dsts[k], 0, len);
    return rc;
}

EFAX_API int efax_bench_lat_pairs(efax_bench *b, efax_result *res, const char *name, const double *start,
                                  const double *end, int n, int from, int to) {
    size_t one = 2 * (size_t)n * sizeof(double);
    double *mine = (double *)malloc(one), *all = (double *)malloc(one * (size_t)b->size), *d;
    int rc = -FI_ENOMEM, i;
    if (mine && all) {
        memcpy(mine, start, (size_t)n * sizeof(double));
        memcpy(mine + n, end, (size_t)n * sizeof(double));
        rc = efax_boot_allgather(&b->boot, mine, one, all, -1);
    }
    if (!rc && b->rank == 0 && n > 0) {
        efax_stats st;
        size_t u = strlen(res->extra);
        d = mine; /* the differences, in place of this rank's own times */
        for (i = 0; i < n; i++)
            d[i] = all[(size_t)to * 2 * (size_t)n + (size_t)n + (size_t)i] -
                   all[(size_t)from * 2 * (size_t)n + (size_t)i];
        st = efax_stats_of(d, n);
        if (u < sizeof res->extra)
            snprintf(res->extra + u, sizeof res->extra - u,
                     "%s\"%s\":{\"min\":%.3f,\"p50\":%.3f,\"avg\":%.3f,\"p99\":%.3f,\"max\":%.3f}",
                     u ? "," : "", name, st.min, st.p50, st.avg, st.p99, st.max);
        if (!b->o.quiet)
            printf("#   %s %llu bytes: %s p50 %.2f us, p99 %.2f us (rank %d to rank %d, %d samples)\n",
                   res->variant, (unsigned long long)res->size, name, st.p50, st.p99, from, to, n);
    }
    free(mine);
    free(all);
    return rc;
}

EFAX_API int efax_bench_slowest(efax_bench *b, double *lat, int iters, double *loop_us) {
    double *all = NULL;
    int rc = efaxb__gather_slowest(b, lat, iters, &all);
    *loop_us = 0;
    for (int q = 0; all && q < b->size; q++) {
        double sum = 0;
        for (int it = 0; it < iters; it++) sum += all[(size_t)q * (size_t)iters + (size_t)it];
        if (sum > *loop_us) *loop_us = sum;
    }
    free(all);
    return rc;
}

// >>exchange (implementation) ----------------------------------------------------------------

/* One step's exchange as this rank runs it: its buffers, what it writes and takes, and where. */
typedef struct efaxb__xstep {
    efax_bench *b;
    const efax_bench_step *st;
    const efax_bench_moves *mv;
    efax_buf *src, *dst;
    uint64_t size;
    int msgs, me, tag0; /* tag0: the data tags of the step's memory kind */
    int tag_sets;       /* tag sets, iterations apart (efaxb__kind_tags over efaxb__msgs) */
    int tag_stride;     /* tags a set spans: efaxb__msgs, or 1 where a writer's messages share one */
    int tag_per_msg;    /* 1: each message its own tag (a staged dst); 0: a writer's share one, and
                           the target announces and awaits them as one (efax_expect_writes) */
    int *to, nto;       /* the ranks it writes to, from the next one on */
    int *from, nfrom;   /* the ranks that write to it, from the last one back */
    bool self;          /* it writes to itself: a local copy */
    int depth;          /* iterations in flight (efax_bench_in_flight) */
    bool behind;        /* confirmed a window behind (efax_bench_xchg.confirm_behind, where it applies) */
    uint64_t first;     /* the phase's (warm-up or timed) first iteration */
    uint64_t end;       /* the iteration after the phase's last */
    uint64_t posted;    /* with depth > 1: the iterations started so far */
    uint64_t t_end;     /* with depth > 1: when the last iteration ended; behind: when the last
                           confirmation came (efax_now_ns) */
    int pace;           /* efax_bench_xchg.pace as this step takes it (0: every write at once) */
    bool arrived;       /* paced: a write leaves on an arrival, not once it landed (EFAX_BENCH_GATE_*) */
    uint64_t s_post;    /* paced: the next write to leave, counted over the phase's iterations:
                           iteration it's write to its k-th target is it x targets + k */
    uint64_t s_first;   /* paced: the phase's first write (or the iteration's, one in flight) */
} efaxb__xstep;

/* The source slot of message m to rank t, and the destination slot of message m from rank f. */
EFAX_PRIVATE uint64_t efaxb__sslot(const efaxb__xstep *x, int t, int m) {
    return (uint64_t)m + (x->b->d.xchg->per_target ? (uint64_t)t * (uint64_t)x->msgs : 0);
}
EFAX_PRIVATE uint64_t efaxb__dslot(const efaxb__xstep *x, int f, int m) {
    return (uint64_t)m + (x->b->d.xchg->per_writer ? (uint64_t)f * (uint64_t)x->msgs : 0);
}

/* The pattern iteration of the bytes in source slot s in iteration seq. */
EFAX_PRIVATE uint64_t efaxb__pattern(uint64_t seq, uint64_t s) { return seq << 24 | s; }

/* The tag of iteration seq's message 0: the tag sets take turns by iteration. Once an iteration,
   not once a message: a 64-bit division costs tens of cycles, a small message a few hundred. */
EFAX_PRIVATE int efaxb__tag_base(const efaxb__xstep *x, uint64_t seq) {
    return x->tag0 + (x->tag_sets > 1 ? (int)(seq % (uint64_t)x->tag_sets) * x->tag_stride : 0);
}

/* The messages w[0..msgs) of one writer to one target (as efaxb__msg described them) become
   iteration seq's, whose message 0 has tag tag_base (efaxb__tag_base): what changes with it. The
   layout read once: through w's stores the compiler would read it again for every message. */
EFAX_PRIVATE void efaxb__msgs_seq(const efaxb__xstep *x, efax_write_desc *w, uint64_t seq, int tag_base) {
    int msgs = x->msgs, tag_step = x->tag_per_msg;
    uint64_t index = seq * (uint64_t)msgs + (uint64_t)w->from + efaxb__sslot(x, w->to, 0); /* message 0's */
    for (int m = 0; m < msgs; m++) {
        w[m].index = index + (uint64_t)m; /* the source slots of a pair follow each other */
        w[m].tag = tag_base + m * tag_step;
        w[m].seq = (uint32_t)seq;
    }
}

/* Message m from rank f to rank t, as both sides describe it, but for what changes with the
   iteration (efaxb__msgs_seq). The exchange describes each message once and then only changes its
   iteration: a desc costs as much as the write it starts (a memset of it). */
EFAX_PRIVATE void efaxb__msg(const efaxb__xstep *x, efax_write_desc *w, int f, int t, int m) {
    memset(w, 0, sizeof *w);
    w->from = f;
    w->to = t;
    w->src = &x->src->mr;
    w->src_off = efax_bench_slot_off(x->b, efaxb__sslot(x, t, m), x->size);
    w->dst = &x->dst->mr;
    w->dst_off = efax_bench_slot_off(x->b, efaxb__dslot(x, f, m), x->size);
    w->size = x->size;
    w->mode = x->st->mode;
    w->chunk = x->b->o.chunk; /* 0: efax_write_chunk's policy, the same on both sides */
}

/* How long a writer waits for a target's confirmation: longer than the target waits for the
   writes (one timeout), so when a rail dies the side that can see which one speaks first. */
EFAX_PRIVATE int efaxb__confirm_ms(const efax_ctx *ctx) {
    int t = efax_ctx_timeout_ms(ctx);
    return t > INT_MAX / 5 * 4 ? INT_MAX : t / 4 * 5;
}

/* Waits for the notice (tag, seq) from rank peer, through the poster when there is one. */
EFAX_PRIVATE int efaxb__notice(const efaxb__xstep *x, int peer, int tag, uint32_t seq, int timeout_ms,
                               uint64_t *t_ns) {
    const efax_bench_poster *p = x->mv->poster;
    int rc;
    if (p) return p->wait(p->user, peer, tag, seq, timeout_ms, t_ns);
    rc = efax_wait_imm(&x->b->ctx, peer, tag, seq, 1, timeout_ms);
    *t_ns = efax_now_ns();
    return rc;
}

/* -c: this iteration's bytes in every source slot this rank writes from. */
EFAX_PRIVATE void efaxb__fill(const efaxb__xstep *x, uint64_t seq) {
    int ntargets = x->b->d.xchg->per_target ? x->nto + x->self : x->nto + x->self > 0;
    for (int i = 0; i < ntargets; i++) {
        int t = i < x->nto ? x->to[i] : x->me;
        for (int m = 0; m < x->msgs; m++) {
            uint64_t s = efaxb__sslot(x, t, m);
            x->src->ops->fill(x->src, s * x->size, x->size, x->me, efaxb__pattern(seq, s));
        }
    }
}

/* The writes of iteration seq from every writer into this rank: announced (a writer's messages
   as one where they share a tag), then awaited with one context timeout for all, so that this side
   gives up before a writer's confirmation wait; settled (in place), or only arrived
   (efax_expect_arrived: device memory may be copying in). Settled once, after every writer's
   arrived: a settle waits for the GPU without driving the context, so one settle a writer held
   back the copies of the writes still to come behind each earlier one's. */
EFAX_PRIVATE int efaxb__take(const efaxb__xstep *x, uint64_t seq, bool settle) {
    efax_ctx *ctx = &x->b->ctx;
    efax_write_desc *in = x->b->xw + (size_t)x->b->size * (size_t)efaxb__msgs(x->b); /* efaxb__describe's */
    efax_expect *ex = x->b->ex;
    uint64_t deadline;
    int rc = 0, tag_base = efaxb__tag_base(x, seq), nex = x->tag_per_msg ? x->nfrom * x->msgs : x->nfrom;
    for (int i = 0; i < x->nfrom && !rc; i++) {
        efax_write_desc *w = &in[i * x->msgs];
        efaxb__msgs_seq(x, w, seq, tag_base);
        if (!x->tag_per_msg)
            rc = efax_expect_writes(ctx, &ex[i], w, x->msgs);
        else
            for (int m = 0; m < x->msgs && !rc; m++) rc = efax_expect_write(ctx, &ex[i * x->msgs + m], &w[m]);
    }
    if (settle && !x->dst->mr.settle) /* the batch's one timeout counts from here */
        return rc ? rc : efax_expect_wait_all(ctx, ex, nex, efax_ctx_timeout_ms(ctx));
    deadline = efax_deadline_ns(efax_ctx_timeout_ms(ctx));
    for (int i = 0; i < nex && !rc; i++) {
        rc = efax_expect_arrived(ctx, &ex[i], efax_remaining_ms(deadline));
    }
    return rc || !settle ? rc : efax_buf_settle(x->dst);
}

/* -c: counts the wrong bytes of what landed from every writer (and the local copy), clears them,
   and tells each writer its bytes may come again. */
EFAX_PRIVATE int efaxb__check(const efaxb__xstep *x, uint64_t seq, int64_t *wrong) {
    int rc = 0;
    for (int i = 0; i < x->nfrom + x->self; i++) {
        int f = i < x->nfrom ? x->from[i] : x->me;
        for (int m = 0; m < x->msgs; m++) {
            uint64_t off = efaxb__dslot(x, f, m) * x->size, s = efaxb__sslot(x, x->me, m);
            *wrong += (int64_t)x->dst->ops->check(x->dst, off, x->size, f, efaxb__pattern(seq, s));
            x->dst->ops->poison(x->dst, off, x->size);
        }
    }
    for (int i = 0; i < x->nfrom && !rc; i++)
        rc = efax_notify(&x->b->ctx, x->from[i], EFAX_BENCH_TAG_READY, (uint32_t)seq);
    return rc;
}

/* Describes every message of the step once: this rank's writes (b->xw from 0), the writes into it
   (from size * msgs on), as iteration 0's. */
EFAX_PRIVATE void efaxb__describe(const efaxb__xstep *x) {
    efax_write_desc *out = x->b->xw, *in = x->b->xw + (size_t)x->b->size * (size_t)efaxb__msgs(x->b);
    for (int i = 0; i < x->nto; i++) {
        for (int m = 0; m < x->msgs; m++) efaxb__msg(x, &out[i * x->msgs + m], x->me, x->to[i], m);
        efaxb__msgs_seq(x, &out[i * x->msgs], 0, efaxb__tag_base(x, 0));
    }
    for (int i = 0; i < x->nfrom; i++) {
        for (int m = 0; m < x->msgs; m++) efaxb__msg(x, &in[i * x->msgs + m], x->from[i], x->me, m);
        efaxb__msgs_seq(x, &in[i * x->msgs], 0, efaxb__tag_base(x, 0));
    }
}

/* Starts iteration seq: its writes (through the poster when there is one, *posted then set; else
   on the transfers of its place in the window) and its own chunk's copy. */
EFAX_PRIVATE int efaxb__start(const efaxb__xstep *x, uint64_t seq, bool *posted) {
    efax_bench *b = x->b;
    const efax_bench_poster *p = x->mv->poster;
    efax_xfer *xs = b->xs + (size_t)(seq % (uint64_t)x->depth) * (size_t)x->nto * (size_t)x->msgs;
    int rc = 0, nw = 0, tag_base = efaxb__tag_base(x, seq);
    for (int i = 0; i < x->nto; i++, nw += x->msgs) efaxb__msgs_seq(x, &b->xw[nw], seq, tag_base);
    if (p && nw && !(rc = p->post(p->user, b->xw, nw))) *posted = true;
    for (int i = 0; !p && i < nw && !rc; i++) rc = efax_write(&b->ctx, &xs[i], &b->xw[i], NULL);
    for (int m = 0; x->self && m < x->msgs && !rc; m++)
        efax_buf_copy(x->dst, efax_bench_slot_off(b, efaxb__dslot(x, x->me, m), x->size), x->src,
                      efax_bench_slot_off(b, efaxb__sslot(x, x->me, m), x->size), x->size);
    return rc;
}

/* The word that confirms iteration seq: confirmed a window behind, two iterations' may be on their
   way at once, so they take two tags in turn. */
EFAX_PRIVATE int efaxb__ack_tag(const efaxb__xstep *x, uint64_t seq) {
    return x->behind && (seq & 1) ? EFAX_BENCH_TAG_ACK2 : EFAX_BENCH_TAG_ACK;
}

/* Waits for every target's word confirming iteration seq, and appends its time at us[*nus]: from
   the confirmation before (x->t_end) to this one. */
EFAX_PRIVATE int efaxb__confirmed(efaxb__xstep *x, uint64_t seq, double *us, int *nus) {
    const efax_ctx *ctx = &x->b->ctx;
    uint64_t t = 0;
    int rc = 0;
    for (int i = 0; i < x->nto && !rc; i++)
        rc = efaxb__notice(x, x->to[i], efaxb__ack_tag(x, seq), (uint32_t)seq, efaxb__confirm_ms(ctx), &t);
    if (!rc) us[(*nus)++] = (double)(t - x->t_end) / 1e3;
    x->t_end = t;
    return rc;
}

/* A writer's confirmations a window behind, once iteration seq's writes are out: seq - 1's (none at
   the phase's first iteration, whose start t0 the first time counts from) and at the phase's last
   iteration seq's own, so that nothing is unconfirmed across a phase's barrier. */
EFAX_PRIVATE int efaxb__confirm_behind(efaxb__xstep *x, uint64_t seq, uint64_t t0, double *us, int *nus) {
    int rc = 0;
    if (seq == x->first) {
        x->t_end = t0;
    } else {
        rc = efaxb__confirmed(x, seq - 1, us, nus);
        x->b->confirmed_behind++;
    }
    if (!rc && seq + 1 == x->end) rc = efaxb__confirmed(x, seq, us, nus);
    return rc;
}

/* --pace (efax_bench_xchg.pace): an all-to-all whose writes leave one peer at a time. shm's target
   copies each write into device memory itself, one copy after another on its own stream, in the
   order the writes reach it; with every write leaving at once, the writes of a rank that started
   a little early reach every target first, its peers all read from it together while the other
   GPUs' links idle, and every later step repeats it. Paced, each rank writes its targets in turn
   (rank r: r + 1, r + 2, ...) and lets its write k + pace of the phase leave only once its own
   arrival k (from rank r - 1 - k mod n, that rank's k-th write) is in place, which it sees locally
   (efax_expect_arrived_test, then its copy's mark): the ranks step together, each GPU read by one peer
   at a time, at no cost in messages. Each step then waits for its arrival's end to be seen and the
   next write to reach its target and be issued there, which small copies do not outlast: below
   EFAX_BENCH_GATE_LANDED the write leaves once arrival k has arrived (EFAX_BENCH_GATE_ARRIVED), which
   still orders every target's copies step by step but queues each behind the last. Its states:
   b->xland[arrival mod (in flight * targets)] 0 awaited, 1 arrived (its copy noted in the mark slot
   of that index), 2 in place; an iteration's own chunk's copy has the slot after those. */

/* Whether the phase's arrival s (counted as efaxb__xstep.s_post counts writes) lets the write pace
   after it leave: in place, or (x->arrived: EFAX_BENCH_GATE_ARRIVED) arrived; those of the
   iterations before seq are in place. */
EFAX_PRIVATE bool efaxb__landed(const efaxb__xstep *x, uint64_t seq, uint64_t s) {
    uint64_t nto = (uint64_t)x->nto;
    return s < seq * nto || x->b->xland[s % ((uint64_t)x->depth * nto)] >= (x->arrived ? 1 : 2);
}

/* Starts iteration it of a paced all-to-all: announces the writes into this rank (their states
   awaited) and starts its own chunk's copy, noted in the iteration's own slot. */
EFAX_PRIVATE int efaxb__paced_begin(efaxb__xstep *x, uint64_t it) {
    efax_bench *b = x->b;
    efax_write_desc *in = b->xw + (size_t)b->size * (size_t)efaxb__msgs(b); /* efaxb__describe's */
    uint64_t d = (uint64_t)x->depth, first = it % d * (uint64_t)x->nto;
    unsigned own = (unsigned)(d * (uint64_t)x->nto + it % d);
    int rc = 0, tag_base = efaxb__tag_base(x, it);
    for (int i = 0; i < x->nfrom && !rc; i++) {
        efaxb__msgs_seq(x, &in[i], it, tag_base);
        rc = efax_expect_write(&b->ctx, &b->ex[first + (uint64_t)i], &in[i]);
        b->xland[first + (uint64_t)i] = 0;
    }
    if (rc || !x->self) return rc;
    efax_buf_copy(x->dst, efax_bench_slot_off(b, efaxb__dslot(x, x->me, 0), x->size), x->src,
                  efax_bench_slot_off(b, efaxb__sslot(x, x->me, 0), x->size), x->size);
    return efax_buf_mark(x->dst, own | EFAX_MARK_OWN);
}

/* Posts the phase's write s: iteration s / targets, to its (s mod targets)-th target. */
EFAX_PRIVATE int efaxb__paced_post(efaxb__xstep *x, uint64_t s) {
    efax_bench *b = x->b;
    uint64_t nto = (uint64_t)x->nto, it = s / nto, k = s % nto;
    efax_write_desc *w = &b->xw[k];
    efaxb__msgs_seq(x, w, it, efaxb__tag_base(x, it));
    return efax_write(&b->ctx, &b->xs[it % (uint64_t)x->depth * nto + k], w, NULL);
}

/* Drives a paced all-to-all until iteration seq is done: its arrivals and its own chunk in place,
   its writes completed. Iterations up to end - 1 may start, x->depth of them in flight. */
EFAX_PRIVATE int efaxb__paced(efaxb__xstep *x, uint64_t seq, uint64_t end) {
    efax_bench *b = x->b;
    efax_ctx *ctx = &b->ctx;
    uint64_t d = (uint64_t)x->depth, nto = (uint64_t)x->nto, lim = seq + d < end ? seq + d : end, s;
    uint64_t deadline = efax_deadline_ns(efax_ctx_timeout_ms(ctx));
    unsigned own = (unsigned)(d * nto + seq % d), spins = 0, idle = 0;
    int rc = 0, inplace = 0;
    while (!rc && x->posted < lim) rc = efaxb__paced_begin(x, x->posted++);
    while (!rc) {
        bool done = true;
        while (!rc && x->s_post < lim * nto &&
               (x->s_post - x->s_first < (uint64_t)x->pace ||
                efaxb__landed(x, seq, x->s_post - (uint64_t)x->pace)))
            rc = efaxb__paced_post(x, x->s_post++);
        inplace = 0;
        for (s = seq * nto; s < x->posted * nto && !rc; s++) { /* arrivals, then their bytes in place */
            unsigned char *st = &b->xland[s % (d * nto)];
            unsigned slot = (unsigned)(s % (d * nto));
            if (*st == 0 && (rc = efax_expect_arrived_test(ctx, &b->ex[slot])) == 1) {
                *st = 1;
                rc = efax_buf_mark(x->dst, slot | EFAX_MARK_IN);
            }
            if (!rc && *st == 1 && (rc = efax_buf_marked(x->dst, slot)) == 1) {
                *st = 2;
                rc = 0;
            }
            if (s < (seq + 1) * nto) {
                inplace += *st == 2;
                done = done && *st == 2;
            }
        }
        for (uint64_t k = 0; k < nto && !rc; k++) { /* this iteration's writes */
            const efax_xfer *w = &b->xs[seq % d * nto + k];
            if (seq * nto + k >= x->s_post || !efax_xfer_done(w))
                done = false;
            else
                rc = w->status;
        }
        if (!rc && done && x->self && (rc = efax_buf_marked(x->dst, own)) >= 0) { /* its own chunk */
            done = rc == 1;
            rc = 0;
        }
        if (rc || done) break;
        if ((rc = efax_progress(ctx)) > 0)
            rc = 0;
        else if (!rc && ++idle >= 512) { /* as efax's waits: ranks that outnumber cores still move */
            idle = 0;
            sched_yield();
        }
        if (!rc && (++spins & 63) == 0 && efax_now_ns() > deadline) {
            efax_log(
                ctx, 0,
                "iteration %llu of the paced all-to-all (--pace %d): %d of its %d arrivals in place, "
                "%llu of its writes posted, after %d ms (a peer stopped, or a copy into device memory is "
                "wedged)",
                (unsigned long long)seq, x->pace, inplace, x->nfrom,
                (unsigned long long)(x->s_post > seq * nto ? x->s_post - seq * nto : 0),
                efax_ctx_timeout_ms(ctx));
            rc = -FI_ETIMEDOUT;
        }
    }
    return rc;
}

/* Iteration seq of a paced all-to-all with x->depth in flight (unchecked), the phase ending before
   iteration `end`; *us: from the end of the last iteration (the phase's start for its first). */
EFAX_PRIVATE int efaxb__iteration_paced(efaxb__xstep *x, uint64_t seq, uint64_t end, double *us) {
    uint64_t t;
    int rc;
    if (x->posted <= seq) { /* the phase's first iteration: nothing in flight */
        x->posted = seq;
        x->s_post = seq * (uint64_t)x->nto;
        x->s_first = x->s_post;
        x->t_end = efax_now_ns();
    }
    rc = efaxb__paced(x, seq, end);
    t = efax_now_ns();
    *us = (double)(t - x->t_end) / 1e3;
    x->t_end = t;
    return rc;
}

/* One iteration on this rank; its time (as the layout defines it) appended at us[*nus] (confirmed
   a window behind: the times of the confirmations it took, none to two). */
EFAX_PRIVATE int efaxb__iteration(efaxb__xstep *x, uint64_t seq, double *us, int *nus, int64_t *wrong) {
    efax_bench *b = x->b;
    efax_ctx *ctx = &b->ctx;
    const efax_bench_poster *p = x->mv->poster;
    bool confirmed = !b->d.xchg->unconfirmed, posted = false;
    uint64_t t0, t1 = 0, t;
    int rc = 0, frc, nw = x->nto * x->msgs;
    for (int i = 0; b->o.check && seq > 0 && i < x->nto && !rc; i++) /* every target cleared the last bytes */
        rc = efaxb__notice(x, x->to[i], EFAX_BENCH_TAG_READY, (uint32_t)seq - 1, -1, &t);
    if (b->o.check) efaxb__fill(x, seq);
    t0 = efax_now_ns();
    if (x->pace > 0) { /* its writes one peer at a time; done once its arrivals and own chunk are in place */
        x->posted = seq;
        x->s_post = seq * (uint64_t)x->nto;
        x->s_first = x->s_post;
        if (!rc) rc = efaxb__paced(x, seq, seq + 1);
    } else {
        if (!rc) rc = efaxb__start(x, seq, &posted);
        if (!rc) rc = efaxb__take(x, seq, confirmed); /* settled before a confirmation says so */
    }
    for (int i = 0; confirmed && i < x->nfrom && !rc; i++)
        rc = efax_notify(ctx, x->from[i], efaxb__ack_tag(x, seq), (uint32_t)seq);
    if (x->behind && x->nto > 0 && !rc) rc = efaxb__confirm_behind(x, seq, t0, us, nus);
    for (int i = 0; confirmed && !x->behind && i < x->nto && !rc; i++)
        rc = efaxb__notice(x, x->to[i], EFAX_BENCH_TAG_ACK, (uint32_t)seq, efaxb__confirm_ms(ctx), &t1);
    if (posted && (frc = p->finish(p->user)) && !rc)
        rc = frc; /* even after a failure: nothing may stay in flight */
    for (int i = 0; !p && i < nw && !rc; i++) rc = efax_wait(ctx, &b->xs[i], -1);
    if (!rc && x->pace <= 0 && (x->self || !confirmed)) /* the local copy and, unconfirmed, the arrivals */
        rc = efax_buf_settle(x->dst);
    if (!confirmed) t1 = efax_now_ns();
    if (!x->behind) us[(*nus)++] = (double)(t1 - t0) / 1e3;
    return rc || !b->o.check ? rc : efaxb__check(x, seq, wrong);
}

/* Iteration seq with x->depth in flight (unconfirmed, unchecked, no poster), the phase (warm-up or
   timed) ending before iteration `end`: starts the iterations up to seq + depth - 1 first, then
   awaits seq's writers' chunks and its own writes, and waits until what was noted then (the
   copies into dst, its own chunk's) is in place while driving the context, so that the copies of
   later iterations start meanwhile and the GPU never waits for the host between them. *us: from
   the end of the last iteration (the phase's start for its first) to this one's. */
EFAX_PRIVATE int efaxb__iteration_ahead(efaxb__xstep *x, uint64_t seq, uint64_t end, double *us) {
    efax_ctx *ctx = &x->b->ctx;
    efax_xfer *xs = x->b->xs + (size_t)(seq % (uint64_t)x->depth) * (size_t)x->nto * (size_t)x->msgs;
    unsigned slot = (unsigned)(seq % (uint64_t)x->depth), spins = 0;
    uint64_t deadline, t;
    int rc = 0;
    if (x->posted <= seq) { /* the phase's first iteration: nothing in flight */
        x->posted = seq;
        x->t_end = efax_now_ns();
    }
    while (!rc && x->posted < end && x->posted < seq + (uint64_t)x->depth)
        rc = efaxb__start(x, x->posted++, NULL);
    if (!rc) rc = efaxb__take(x, seq, false);
    for (int i = 0; i < x->nto * x->msgs && !rc; i++) rc = efax_wait(ctx, &xs[i], -1);
    if (!rc) rc = efax_buf_mark(x->dst, slot);
    deadline = efax_deadline_ns(efax_ctx_timeout_ms(ctx));
    while (!rc && !(rc = efax_buf_marked(x->dst, slot))) {
        int p = efax_progress(ctx);
        if (p < 0) rc = p;
        if (!rc && (++spins & 63) == 0 && efax_now_ns() > deadline) {
            efax_log(ctx, 0,
                     "iteration %llu of all-to-all: the bytes that arrived did not land within %d ms (a copy "
                     "into device memory is wedged, or the GPU is shared with work that holds it)",
                     (unsigned long long)seq, efax_ctx_timeout_ms(ctx));
            rc = -FI_ETIMEDOUT;
        }
    }
    if (rc > 0) rc = 0;
    t = efax_now_ns();
    *us = (double)(t - x->t_end) / 1e3;
    x->t_end = t;
    return rc;
}

EFAX_API int efax_bench_in_flight(const efax_bench *b, const efax_bench_step *st) {
    return b->d.xchg && b->xdst[st->k] && !b->xdst[st->k]->mr.stage ? efaxb__depth(b) : 1;
}

EFAX_API int efax_bench_exchange(efax_bench *b, const efax_bench_step *st, const efax_bench_moves *mv,
                                 double *lat, int *nlat, int64_t *wrong) {
    const efax_bench_xchg *l = b->d.xchg;
    efaxb__xstep x;
    int n = b->size, warm = st->warmup, rc = 0;
    bool timed;
    memset(&x, 0, sizeof x);
    if (!l || !b->connected)
        return efax_bench_usage(b, "efax_bench_exchange: no exchange (efax_bench_desc.xchg) is connected");
    x.b = b;
    x.st = st;
    x.mv = mv;
    x.me = b->rank;
    x.src = b->xsrc[st->k];
    x.dst = b->xdst[st->k];
    x.size = mv->size ? mv->size : st->size;
    x.msgs = mv->msgs ? mv->msgs : efaxb__msgs(b);
    x.tag0 = EFAX_BENCH_TAG_DATA + st->k * efaxb__kind_tags(b);
    x.tag_per_msg = x.dst->mr.stage != NULL; /* staged cells are taken by (writer, tag) */
    x.tag_stride = x.tag_per_msg ? efaxb__msgs(b) : 1;
    x.tag_sets = efaxb__kind_tags(b) / x.tag_stride;
    x.depth = mv->poster ? 1 : efax_bench_in_flight(b, st);
    x.behind = l->confirm_behind && !l->unconfirmed && !b->o.check && !mv->poster && x.msgs > 1;
    x.pace = l->pace >= 0 ? l->pace : x.dst->ops->mark && x.size >= EFAX_BENCH_PACE_MIN ? EFAX_BENCH_PACE : 0;
    x.arrived = l->pace_gate == EFAX_BENCH_GATE_AUTO ? x.size < EFAX_BENCH_GATE_LANDED
                                                     : l->pace_gate == EFAX_BENCH_GATE_ARRIVED;
    if (x.msgs > efaxb__msgs(b) ||
        (uint64_t)x.msgs * (l->per_target ? (uint64_t)n : 1) * x.size > x.src->len ||
        (uint64_t)x.msgs * (l->per_writer ? (uint64_t)n : 1) * x.size > x.dst->len)
        return efax_bench_usage(
            b, "efax_bench_exchange: %d message(s) of %llu bytes do not fit the layout (%d, %zu bytes)",
            x.msgs, (unsigned long long)x.size, efaxb__msgs(b), x.dst->len);
    if (!(x.to = (int *)calloc(2 * (size_t)n, sizeof(int)))) return -FI_ENOMEM;
    x.from = x.to + n;
    for (int k = 1; k < n;
         k++) { /* targets from the next rank on, writers from the last one back: spreads the load */
        if (mv->writes(mv->user, x.me, (x.me + k) % n, n)) x.to[x.nto++] = (x.me + k) % n;
        if (mv->writes(mv->user, (x.me + n - k) % n, x.me, n)) x.from[x.nfrom++] = (x.me + n - k) % n;
    }
    x.self = mv->writes(mv->user, x.me, x.me, n);
    if (!(l->unconfirmed && !mv->poster && !x.tag_per_msg && x.msgs == 1 && n > 2 && x.nto == n - 1 &&
          x.nfrom == n - 1 && x.depth * (x.nto + 1) <= EFAX_BUF_MARKS))
        x.pace = 0; /* paced: an all-to-all of one message a pair, its marks in efax_buf_mark's slots */
    timed = l->unconfirmed ? x.nto + x.nfrom + x.self > 0 : x.nto > 0;
    for (int i = 0; b->o.check && i < x.nfrom + x.self; i++) /* what lands is checked against this */
        for (int m = 0; m < x.msgs; m++)
            x.dst->ops->poison(x.dst, efaxb__dslot(&x, i < x.nfrom ? x.from[i] : x.me, m) * x.size, x.size);
    efaxb__describe(&x);
    rc = efax_boot_barrier(&b->boot, EFAX_TURN_MS); /* every rank's turn begins together */
    for (int it = -warm; it < st->iters && !rc; it++) {
        double us[2] = {0, 0};
        int nus = 0;
        if (it == 0) { /* the row counts the timed iterations: counters read between two barriers */
            efaxb__timed_begin(b);
            if ((rc = efax_boot_barrier(&b->boot, EFAX_TURN_MS))) break;
        }
        if (it == -warm || it == 0) {
            x.first = (uint64_t)(it + warm);
            x.end = (uint64_t)(it < 0 ? warm : warm + st->iters);
        }
        if (x.nto + x.nfrom + x.self > 0 && x.depth > 1) {
            if (x.pace > 0)
                rc = efaxb__iteration_paced(&x, (uint64_t)(it + warm), x.end, &us[0]);
            else
                rc = efaxb__iteration_ahead(&x, (uint64_t)(it + warm), x.end, &us[0]);
            nus = 1;
        } else if (x.nto + x.nfrom + x.self > 0) {
            rc = efaxb__iteration(&x, (uint64_t)(it + warm), us, &nus, wrong);
        }
        for (int k = 0; it >= 0 && timed && k < nus; k++) lat[(*nlat)++] = us[k];
    }
    if (!rc && st->iters > 0) rc = efax_boot_barrier(&b->boot, EFAX_TURN_MS);
    if (!rc && st->iters > 0) efaxb__timed_end(b);
    for (int i = 0; b->o.check && i < x.nto && !rc;
         i++) { /* the targets' last "cleared" notices are this step's */
        uint64_t t;
        rc = efaxb__notice(&x, x.to[i], EFAX_BENCH_TAG_READY, (uint32_t)(st->iters + warm - 1), -1, &t);
    }
    free(x.to);
    return rc;
}

// >>driver helpers (implementation) ---------------------------------------------------------

/* Operations posted and not yet waited for. */
typedef struct efaxb__ops {
    efax_xfer *x;
    int n;
} efaxb__ops;

/* One turn of efax_bench_sendrecv: the variant, the current memory kind's buffers, the lists. */
typedef struct efaxb__sr {
    efax_bench *b;
    const efax_bench_step *st;
    bool rt;                   /* RoundTrip, else Stream */
    bool halves;               /* Stream without -c, W >= 2: two halves in flight */
    int W;                     /* messages per iteration: --window for Stream, 1 */
    uint64_t t_end;            /* halves: when the last iteration ended (efax_now_ns) */
    efax_buf *src, *dst;       /* the step's memory kind's */
    efaxb__ops tx, rx;         /* the operations posted and not yet waited for */
    efaxb__ops txh[2], rxh[2]; /* halves: each half's, in tx's and rx's storage */
    double *lat;               /* rank 0's times, nlat of them */
    int nlat;
    int64_t wrong; /* the bytes this rank found wrong */
} efaxb__sr;

/* The fields every send of a window from buf to peer shares. */
EFAX_PRIVATE void efaxb__sr_send_desc(efax_send_desc *sd, int peer, efax_buf *buf) {
    memset(sd, 0, sizeof *sd);
    sd->to = peer;
    sd->src = &buf->mr;
    sd->has_imm = true;
}

/* Posts one piece of message m, segment s, as a send (sd: its fixed fields; from offset off of its
   source) onto list l. Its immediate data is m << 8 | s, naming the piece. */
EFAX_PRIVATE int efaxb__sr_send_piece(efaxb__sr *r, efax_send_desc *sd, uint64_t off,
                                      const efax_plan_seg *seg, uint64_t m, int s, efaxb__ops *l) {
    sd->nic = seg->nic;
    sd->src_off = off + seg->off;
    sd->size = seg->len;
    sd->imm = (uint32_t)m << 8 | (uint32_t)s;
    return efax_send(&r->b->ctx, &l->x[l->n++], sd);
}

/* efaxb__sr_post_range's loop where every message goes whole through one NIC (Single mode): the same
   post but for its slot, without the loop over pieces, as what a small message costs to post is what
   the message rate measures. */
EFAX_PRIVATE int efaxb__sr_post_whole(efaxb__sr *r, bool send, int peer, efax_buf *buf,
                                      const efax_plan_seg *seg, int slot0, int m0, int m1, efaxb__ops *l) {
    efax_ctx *ctx = &r->b->ctx;
    efax_xfer *x = l->x + l->n;
    int rc = 0, m = m0;
    if (send) {
        efax_send_desc sd;
        efaxb__sr_send_desc(&sd, peer, buf);
        sd.nic = seg->nic;
        sd.size = seg->len;
        for (; m < m1 && !rc; m++) {
            sd.src_off = efax_bench_slot_off(r->b, (uint64_t)(slot0 + m), r->st->size) + seg->off;
            sd.imm = (uint32_t)m << 8; /* piece 0 of message m, as efaxb__sr_send_piece names it */
            rc = efax_send(ctx, x++, &sd);
        }
    } else {
        int nic = efax_ctx_route_in(ctx, peer, seg->nic);
        for (; m < m1 && !rc; m++) {
            uint64_t off = efax_bench_slot_off(r->b, (uint64_t)(slot0 + m), r->st->size) + seg->off;
            rc = efax_recv(ctx, x++, nic, &buf->mr, off, seg->len);
        }
    }
    l->n = (int)(x - l->x); /* the failed one too, as efaxb__sr_post_range counts it */
    return rc;
}

/* Posts the sends (or, on the other side, the receives) of messages m0 .. m1-1 of iteration seq onto list
   l, planned by the step's mode: message m is number seq * W + m in slot slot0 + m of buf. A receive
   is posted on the NIC its piece arrives at. */
EFAX_PRIVATE int efaxb__sr_post_range(efaxb__sr *r, bool send, int peer, efax_buf *buf, uint64_t seq,
                                      int slot0, int m0, int m1, efaxb__ops *l) {
    efax_plan_seg seg[EFAX_MAX_NICS];
    int rnic[EFAX_MAX_NICS]; /* a receive's NIC: where the peer's NIC of its segment sends to */
    efax_send_desc sd;
    efax_ctx *ctx = &r->b->ctx;
    uint64_t size = r->st->size;
    efax_mode mode = r->st->mode;
    int nn = send ? efax_ctx_nnics(ctx) : efax_ctx_peer_nnics(ctx, peer), rc = 0;
    /* Single mode plans every message alike, in one piece: planned once, posted whole */
    if (mode == EFAX_MODE_SINGLE && m0 < m1 &&
        efax_plan(size, nn, mode, seq * (uint64_t)r->W + (uint64_t)m0, 0, 0, seg) == 1)
        return efaxb__sr_post_whole(r, send, peer, buf, seg, slot0, m0, m1, l);
    efaxb__sr_send_desc(&sd, peer, buf);
    for (uint64_t m = (uint64_t)m0; m < (uint64_t)m1 && !rc; m++) {
        uint64_t off = efax_bench_slot_off(r->b, (uint64_t)slot0 + m, size);
        int ns = efax_plan(size, nn, mode, seq * (uint64_t)r->W + m, 0, 0, seg);
        if (ns < 0) return ns;
        for (int s = 0; s < ns && !send; s++) rnic[s] = efax_ctx_route_in(ctx, peer, seg[s].nic);
        if (send) {
            for (int s = 0; s < ns && !rc; s++) rc = efaxb__sr_send_piece(r, &sd, off, &seg[s], m, s, l);
            continue;
        }
        for (int s = 0; s < ns && !rc; s++)
            rc = efax_recv(ctx, &l->x[l->n++], rnic[s], &buf->mr, off + seg[s].off, seg[s].len);
    }
    return rc;
}

/* The W messages of iteration seq, on the list of their direction. */
EFAX_PRIVATE int efaxb__sr_post(efaxb__sr *r, bool send, int peer, efax_buf *buf, uint64_t seq, int slot0) {
    return efaxb__sr_post_range(r, send, peer, buf, seq, slot0, 0, r->W, send ? &r->tx : &r->rx);
}

/* Half h of a Stream's window: messages [W/2, W) for h = 1, [0, W/2) for h = 0; its sends (or receives)
   of iteration seq onto the half's list. */
EFAX_PRIVATE int efaxb__sr_post_half(efaxb__sr *r, bool send, int peer, efax_buf *buf, uint64_t seq, int h) {
    int mid = r->W / 2;
    return efaxb__sr_post_range(r, send, peer, buf, seq, 0, h ? mid : 0, h ? r->W : mid,
                                send ? &r->txh[h] : &r->rxh[h]);
}

/* The tag that confirms half h. */
EFAX_PRIVATE int efaxb__sr_half_tag(int h) { return h ? EFAX_BENCH_TAG_ACK2 : EFAX_BENCH_TAG_ACK; }

/* With -c, on rank k: the first n receives took each piece of the W messages of iteration seq exactly once
   (their immediate data names them). Returns the bytes of receives that did not. */
EFAX_PRIVATE int64_t efaxb__sr_check_pieces(efaxb__sr *r, uint64_t seq, int n) {
    efax_plan_seg seg[EFAX_MAX_NICS];
    unsigned char *seen = (unsigned char *)calloc((size_t)r->W * EFAX_MAX_NICS, 1);
    int nn = efax_ctx_peer_nnics(&r->b->ctx, 0);
    int64_t wrong = 0;
    for (int i = 0; i < n; i++) {
        const efax_xfer *x = &r->rx.x[i];
        uint32_t m = (uint32_t)x->rx_data >> 8, s = (uint32_t)x->rx_data & 0xff;
        int ns = m < (uint32_t)r->W
                     ? efax_plan(r->st->size, nn, r->st->mode, seq * (uint64_t)r->W + m, 0, 0, seg)
                     : 0;
        if (seen && x->rx_has_data && s < (uint32_t)ns && !seen[m * EFAX_MAX_NICS + s]++ &&
            x->rx_len == seg[s].len)
            continue;
        if (!wrong)
            fprintf(stderr,
                    "%s: rank %d: receive %d took piece %u of message %u (immediate data %#llx, "
                    "%llu bytes): not one of this iteration's, or taken twice\n",
                    r->b->d.driver, r->b->rank, i, s, m, (unsigned long long)x->rx_data,
                    (unsigned long long)x->rx_len);
        wrong += (int64_t)(x->len ? x->len : 1);
    }
    free(seen);
    return wrong;
}

/* Waits for a list's operations; empties it. */
EFAX_PRIVATE int efaxb__sr_wait(efaxb__sr *r, efaxb__ops *l) {
    int rc = 0;
    for (int i = 0; i < l->n && !rc; i++) rc = efax_wait(&r->b->ctx, &l->x[i], -1);
    l->n = 0;
    return rc;
}

/* Checks (with -c) what `from` sent into the W slots from slot0, counts the wrong bytes, and clears them.
   Every message of iteration seq carries pattern (from, seq): which slot took it is not checked, as no
   order is assumed (efaxb__sr_check_pieces). */
EFAX_PRIVATE void efaxb__sr_check_slots(efaxb__sr *r, int from, uint64_t seq, int slot0) {
    uint64_t size = r->st->size;
    for (int m = 0; m < r->W; m++) {
        uint64_t off = (uint64_t)(slot0 + m) * size;
        r->wrong += (int64_t)r->dst->ops->check(r->dst, off, size, from, seq * 1000);
        r->dst->ops->poison(r->dst, off, size);
    }
}

/* Rank 0's iteration seq with rank k: W messages, timed until k confirmed them (Stream) or answered
   (RoundTrip). */
EFAX_PRIVATE int efaxb__sr_send_iter(efaxb__sr *r, int k, uint64_t seq, bool timed) {
    bool rt = r->rt, c = r->b->o.check;
    int slot = rt ? (int)(seq & 1) : 0, rc = 0;
    uint64_t size = r->st->size, t0;
    for (int m = 0; c && m < r->W; m++) r->src->ops->fill(r->src, (uint64_t)m * size, size, 0, seq * 1000);
    if (c && !rt && seq > 0)
        rc = efax_wait_imm(&r->b->ctx, k, EFAX_BENCH_TAG_READY, (uint32_t)seq - 1, 1, -1);
    t0 = efax_now_ns();
    if (rt && !rc) rc = efaxb__sr_post(r, false, k, r->dst, seq, slot);
    if (!rc) rc = efaxb__sr_post(r, true, k, r->src, seq, 0);
    if (!rc && rt) rc = efaxb__sr_wait(r, &r->rx);
    if (!rc && !rt) rc = efax_wait_imm(&r->b->ctx, k, EFAX_BENCH_TAG_ACK, (uint32_t)seq, 1, -1);
    if (timed) r->lat[r->nlat++] = (double)(efax_now_ns() - t0) / 1e3;
    if (!rc) rc = efaxb__sr_wait(r, &r->tx);
    if (!rc && c && rt) efaxb__sr_check_slots(r, k, seq, slot);
    return rc;
}

/* Rank 0's iteration seq of a Stream in halves: both halves of seq are out (the first iteration sends
   them); as each half is confirmed, its sends are done here too and the same half of seq + 1 goes, unless
   seq is the last. Timed from the end of the iteration before (the first: from its first send). */
EFAX_PRIVATE int efaxb__sr_send_halves(efaxb__sr *r, int k, uint64_t seq, bool first, bool last, bool timed) {
    int rc = 0;
    uint64_t t;
    if (first) r->t_end = efax_now_ns();
    for (int h = 0; first && h < 2 && !rc; h++) rc = efaxb__sr_post_half(r, true, k, r->src, seq, h);
    for (int h = 0; h < 2 && !rc; h++) {
        rc = efax_wait_imm(&r->b->ctx, k, efaxb__sr_half_tag(h), (uint32_t)seq, 1, -1);
        if (!rc) rc = efaxb__sr_wait(r, &r->txh[h]);
        if (!rc && !last) rc = efaxb__sr_post_half(r, true, k, r->src, seq + 1, h);
    }
    t = efax_now_ns();
    if (timed) r->lat[r->nlat++] = (double)(t - r->t_end) / 1e3;
    r->t_end = t;
    return rc;
}

/* Rank k's iteration seq of a Stream in halves: as each half's receives complete, the same half's
   receives of seq + 1 go up (unless seq is the last), then its confirmation. Untagged receives take
   messages in the order they were posted, so the halves' receives fill in order whatever order the
   messages arrive in; a half confirmed when its receives are done leaves at most W messages out. */
EFAX_PRIVATE int efaxb__sr_answer_halves(efaxb__sr *r, uint64_t seq, bool more) {
    int rc = 0;
    for (int h = 0; h < 2 && !rc; h++) {
        rc = efaxb__sr_wait(r, &r->rxh[h]);
        if (!rc && more) rc = efaxb__sr_post_half(r, false, 0, r->dst, seq + 1, h);
        if (!rc) rc = efax_notify(&r->b->ctx, 0, efaxb__sr_half_tag(h), (uint32_t)seq);
    }
    return rc;
}

/* Rank k's iteration seq: the next receives go up before the answer (a checked Stream's after its
   check); the answer comes from our own send buffer. */
EFAX_PRIVATE int efaxb__sr_answer_iter(efaxb__sr *r, int k, uint64_t seq, bool more) {
    bool rt = r->rt, c = r->b->o.check;
    int slot = rt ? (int)(seq & 1) : 0, nrx = r->rx.n, rc = efaxb__sr_wait(r, &r->rx);
    uint64_t size = r->st->size;
    if (!rc && c && !rt) r->wrong += efaxb__sr_check_pieces(r, seq, nrx);
    if (!rc && more && (rt || !c)) rc = efaxb__sr_post(r, false, 0, r->dst, seq + 1, slot ^ rt);
    if (!rc && rt) rc = efaxb__sr_post(r, true, 0, r->src, seq, slot);
    if (!rc && !rt) rc = efax_notify(&r->b->ctx, 0, EFAX_BENCH_TAG_ACK, (uint32_t)seq);
    if (!rc && rt) rc = efaxb__sr_wait(r, &r->tx);
    if (!rc && c) efaxb__sr_check_slots(r, 0, seq, slot);
    if (!rc && c && rt) /* the next answer */
        r->src->ops->fill(r->src, (uint64_t)(slot ^ 1) * size, size, k, (seq + 1) * 1000);
    if (!rc && c && !rt && more) rc = efaxb__sr_post(r, false, 0, r->dst, seq + 1, 0);
    if (!rc && c && !rt) rc = efax_notify(&r->b->ctx, 0, EFAX_BENCH_TAG_READY, (uint32_t)seq);
    return rc;
}

/* The turn's loop, every rank: rank k's first receives, the barrier, rank 0's and rank k's iterations. */
EFAX_PRIVATE int efaxb__sr_turn(efaxb__sr *r, int k) {
    int warm = r->st->warmup, last = r->st->iters + warm - 1, me = r->b->rank, rc = 0;
    bool rt = r->rt, c = r->b->o.check;
    if (me == k && r->halves)
        for (int h = 0; h < 2 && !rc; h++) rc = efaxb__sr_post_half(r, false, 0, r->dst, 0, h);
    else if (me == k)
        rc = efaxb__sr_post(r, false, 0, r->dst, 0, 0);
    if (!rc && me == k && c && rt) r->src->ops->fill(r->src, 0, r->st->size, k, 0);
    if (!rc) rc = efax_boot_barrier(&r->b->boot, EFAX_TURN_MS); /* our turn: receives are posted */
    for (int it = -warm; it < r->st->iters && !rc && (me == 0 || me == k); it++) {
        uint64_t seq = (uint64_t)(it + warm);
        if (me == 0 && r->halves)
            rc = efaxb__sr_send_halves(r, k, seq, it == -warm, seq == (uint64_t)last, it >= 0);
        else if (me == 0)
            rc = efaxb__sr_send_iter(r, k, seq, it >= 0);
        else if (r->halves)
            rc = efaxb__sr_answer_halves(r, seq, seq < (uint64_t)last);
        else
            rc = efaxb__sr_answer_iter(r, k, seq, seq < (uint64_t)last);
    }
    if (!rc && me == 0 && c && !rt)
        rc = efax_wait_imm(&r->b->ctx, k, EFAX_BENCH_TAG_READY, (uint32_t)last, 1, -1);
    return rc;
}

EFAX_API int efax_bench_sends_open(efax_bench *b, efax_bench_sends *s) {
    size_t slots = b->o.window > 2 ? (size_t)b->o.window : 2, bytes = (size_t)b->o.max_size * slots;
    size_t iters = (size_t)efax_opts_iters(&b->o, b->o.min_size) * (size_t)b->size;
    int rc = efax_bench_bufs(b, bytes, EFAX_MR_SEND, EFAX_MR_RECV, s->srcs, s->dsts);
    s->tx = (efax_xfer *)efax_bench_calloc(b, slots * EFAX_MAX_NICS, sizeof(efax_xfer));
    s->rx = (efax_xfer *)efax_bench_calloc(b, slots * EFAX_MAX_NICS * 2, sizeof(efax_xfer));
    s->lat = (double *)efax_bench_calloc(b, iters, sizeof(double));
    return rc ? rc : !s->tx || !s->rx || !s->lat ? -FI_ENOMEM : 0;
}

EFAX_API int efax_bench_sendrecv(efax_bench *b, efax_bench_sends *s, const efax_bench_step *st,
                                 bool roundtrip, int k, int *nlat, int64_t *wrong) {
    efaxb__sr r;
    int rc;
    memset(&r, 0, sizeof r);
    r.b = b;
    r.st = st;
    r.rt = roundtrip;
    r.W = roundtrip ? 1 : b->o.window;
    r.halves = !roundtrip && r.W >= 2 && !b->o.check;
    r.src = s->srcs[st->k];
    r.dst = s->dsts[st->k];
    r.tx.x = s->tx;
    r.rx.x = s->rx;
    /* a Stream's halves: each its messages' pieces (at most EFAX_MAX_NICS a message) in tx's and rx's */
    for (int h = 0; h < 2; h++) {
        r.txh[h].x = s->tx + (size_t)(h ? b->o.window / 2 : 0) * EFAX_MAX_NICS;
        r.rxh[h].x = s->rx + (size_t)(h ? b->o.window / 2 : 0) * EFAX_MAX_NICS;
    }
    r.lat = s->lat;
    r.nlat = *nlat;
    rc = efaxb__sr_turn(&r, k);
    *nlat = r.nlat;
    *wrong += r.wrong;
    return rc;
}

/* The echo's tag: its writes are the only ones in flight. */
enum { EFAXB__ECHO_TAG = 1 };

/* One echo of efax_bench_echo: both ends' messages, as described for the step. */
typedef struct efaxb__echo {
    efax_ctx *ctx;
    int me, peer;
    bool writeimm, check;
    uint64_t size;
    efax_mr *tx, *rx; /* with -c each holds two halves: iteration parity picks one */
    uint8_t *txb, *rxb;
    efax_xfer r, s;
    efax_send_desc sd; /* the SendRecv message in flight */
    efax_write_desc w; /* the WriteImm message in flight */
    uint32_t arrivals; /* chunks a WriteImm message lands in, each with the immediate data */
} efaxb__echo;

/* Which half iteration seq uses: alternating with -c (the other one is being checked or
   refilled), always the first without (the same cache footprint as fi_pingpong's). */
EFAX_PRIVATE uint64_t efaxb__echo_half(const efaxb__echo *e, uint64_t seq) {
    return e->check ? (seq & 1) * e->size : 0;
}

/* The messages to the peer (ping and answer alike), described once per size: SendRecv's from our
   send half; WriteImm's from our send half to the same receive half there. */
EFAX_PRIVATE void efaxb__echo_describe(efaxb__echo *e) {
    memset(&e->sd, 0, sizeof e->sd);
    e->sd.to = e->peer;
    e->sd.src = e->tx;
    e->sd.size = e->size;
    memset(&e->w, 0, sizeof e->w);
    e->w.from = e->me;
    e->w.to = e->peer;
    e->w.src = e->tx;
    e->w.dst = e->rx;
    e->w.size = e->size;
    e->w.mode = EFAX_MODE_SINGLE;
    e->w.tag = EFAXB__ECHO_TAG;
    /* the peer's message is cut as ours is: host memory both, between the same two hosts */
    e->arrivals = efax_write_chunks(e->size, efax_ctx_peer_nnics(e->ctx, e->peer), EFAX_MODE_SINGLE,
                                    efax_write_chunk(e->ctx, &e->w));
}

/* The SendRecv message of iteration seq: only its half changes. */
EFAX_PRIVATE const efax_send_desc *efaxb__echo_send(efaxb__echo *e, uint64_t seq) {
    e->sd.src_off = efaxb__echo_half(e, seq);
    return &e->sd;
}

/* The WriteImm message of iteration seq: its halves and sequence change. */
EFAX_PRIVATE const efax_write_desc *efaxb__echo_write(efaxb__echo *e, uint64_t seq) {
    e->w.src_off = e->w.dst_off = efaxb__echo_half(e, seq);
    e->w.seq = (uint32_t)seq;
    return &e->w;
}

/* Rank 0: one round trip of iteration seq; the answer's receive is posted after the ping. */
EFAX_PRIVATE int efaxb__echo_ping(efaxb__echo *e, uint64_t seq) {
    int rc;
    if (!e->writeimm) {
        rc = efax_send(e->ctx, &e->s, efaxb__echo_send(e, seq));
        if (!rc) rc = efax_recv(e->ctx, &e->r, 0, e->rx, efaxb__echo_half(e, seq), e->size);
        if (!rc) rc = efax_wait(e->ctx, &e->s, -1);
        return rc ? rc : efax_wait(e->ctx, &e->r, -1);
    }
    rc = efax_write(e->ctx, &e->s, efaxb__echo_write(e, seq), NULL);
    if (!rc) rc = efax_wait_imm(e->ctx, e->peer, EFAXB__ECHO_TAG, (uint32_t)seq, e->arrivals, -1);
    return rc ? rc : efax_wait(e->ctx, &e->s, -1);
}

/* Rank 1: answer iteration seq; for SEND/RECV the next receive is posted after the answer
   (fi_pingpong posts it before, so every message waits for a post; here it overlaps the flight). */
EFAX_PRIVATE int efaxb__echo_pong(efaxb__echo *e, uint64_t seq, bool last) {
    int rc;
    if (!e->writeimm) {
        rc = efax_wait(e->ctx, &e->r, -1);
        if (!rc) rc = efax_send(e->ctx, &e->s, efaxb__echo_send(e, seq));
        if (!rc && !last) rc = efax_recv(e->ctx, &e->r, 0, e->rx, efaxb__echo_half(e, seq + 1), e->size);
        return rc ? rc : efax_wait(e->ctx, &e->s, -1);
    }
    rc = efax_wait_imm(e->ctx, e->peer, EFAXB__ECHO_TAG, (uint32_t)seq, e->arrivals, -1);
    if (!rc) rc = efax_write(e->ctx, &e->s, efaxb__echo_write(e, seq), NULL);
    return rc ? rc : efax_wait(e->ctx, &e->s, -1);
}

/* The loop's clock: iteration it's ticks since the last stamp (warm-up iterations, it < 0, keep none). */
EFAX_PRIVATE inline void efaxb__echo_stamp(uint64_t *prev, double *lat, int it) {
    uint64_t t = efax_ticks();
    if (it >= 0) lat[it] = (double)(t - *prev);
    *prev = t;
}

/* A function whose frame stays out of its caller's: a timed loop keeps its values in registers
   rather than sharing them with the setup around it. */
#if defined(__GNUC__)
#define EFAXB__NOINLINE __attribute__((noinline))
#else
#define EFAXB__NOINLINE
#endif

/* Rank 0 without -c: the round trips back to back, one timestamp each (the loop tests/instr.sh
   counts against fi_pingpong's: the ping, the answer's receive, the wait and the clock, nothing
   else per iteration; SendRecv's is efaxb__echo_ping's with the first halves, the only ones without
   -c). lat[it] gets ticks. */
EFAX_PRIVATE EFAXB__NOINLINE int efaxb__echo_ping_all(efaxb__echo *e, int warm, int iters, double *lat) {
    efax_ctx *ctx = e->ctx;
    const efax_send_desc *sd = efaxb__echo_send(e, 0);
    uint64_t prev = efax_ticks();
    int rc = 0, it;
    if (e->writeimm) {
        for (it = -warm; it < iters && !rc; it++) {
            rc = efaxb__echo_ping(e, (uint64_t)(it + warm));
            efaxb__echo_stamp(&prev, lat, it);
        }
        return rc;
    }
    for (it = -warm; it < iters; it++) {
        if ((rc = efax_send(ctx, &e->s, sd))) return rc;
        if ((rc = efax_recv(ctx, &e->r, 0, e->rx, 0, e->size))) return rc;
        /* injected: done already, no call */
        if ((rc = efax_wait(ctx, &e->s, -1))) return rc;
        if ((rc = efax_wait(ctx, &e->r, -1))) return rc;
        efaxb__echo_stamp(&prev, lat, it);
    }
    return 0;
}

EFAX_API int efax_bench_echo_open(efax_bench *b, efax_bench_echo *e) {
    size_t iters = (size_t)efax_opts_iters(&b->o, b->o.min_size);
    int rc = efax_bench_buf(b, b->kinds[0], 2 * b->o.max_size, EFAX_MR_SEND | EFAX_MR_WRITE_SRC, &e->tx);
    if (!rc) rc = efax_bench_buf(b, b->kinds[0], 2 * b->o.max_size, EFAX_MR_RECV | EFAX_MR_WRITE_DST, &e->rx);
    if (!rc && !(e->lat = (double *)efax_bench_calloc(b, iters, sizeof *e->lat))) rc = -FI_ENOMEM;
    return rc;
}

EFAX_API int efax_bench_echo_time(efax_bench *b, efax_bench_echo *be, const efax_bench_step *st,
                                  bool writeimm, double *secs, int64_t *wrong) {
    int iters = st->iters, warm = st->warmup, rc = 0;
    bool check = b->o.check;
    uint64_t size = st->size, ns0, tk0, prev;
    double *lat = be->lat, us;
    efaxb__echo e;
    memset(&e, 0, sizeof e);
    e.ctx = &b->ctx;
    e.me = b->rank;
    e.peer = b->rank == 0 ? 1 : 0;
    e.writeimm = writeimm;
    e.check = check;
    e.size = size;
    e.tx = &be->tx->mr;
    e.rx = &be->rx->mr;
    e.txb = (uint8_t *)be->tx->ptr;
    e.rxb = (uint8_t *)be->rx->ptr;
    efaxb__echo_describe(&e);
    if (e.me == 1 && !writeimm) rc = efax_recv(e.ctx, &e.r, 0, e.rx, 0, size);
    if (check && e.me <= 1) {
        efax_pattern_fill(e.txb, size, 0, e.me, 0);
        efax_poison(e.rxb, 2 * size);
    }
    /* the peer writes only once this side's buffer is cleared: a split shm write's first half is
       copied by the writer itself, at once, and a late poison erased it (seen under load) */
    if (!rc && check) rc = efax_boot_barrier(&b->boot, EFAX_TURN_MS);
    /* without -c one timestamp per round trip times them back to back (average = total time /
       iterations, as in fi_pingpong); with -c the checks between them are excluded. efax_ticks
       (rdtsc; cheaper than clock_gettime under a hypervisor), converted with the loop's rate. */
    ns0 = efax_now_ns();
    tk0 = efax_ticks();
    prev = tk0;
    if (!rc && e.me == 0 && !check) rc = efaxb__echo_ping_all(&e, warm, iters, lat);
    for (int it = -warm; it < iters && e.me <= 1 && (e.me || check) && !rc; it++) {
        uint64_t seq = (uint64_t)(it + warm), t0;
        uint8_t *half = e.rxb + efaxb__echo_half(&e, seq);
        if (e.me == 0) {
            t0 = check ? efax_ticks() : prev;
            rc = efaxb__echo_ping(&e, seq);
            prev = efax_ticks();
            if (it >= 0) lat[it] = (double)(prev - t0); /* ticks, converted below */
        } else {
            rc = efaxb__echo_pong(&e, seq, it + 1 == iters);
        }
        if (!check || rc) continue;
        /* each side checks what the other sent, clears it, and prepares its next message */
        *wrong += (int64_t)efax_pattern_check(half, size, 0, e.peer, seq, NULL);
        efax_poison(half, size);
        efax_pattern_fill(e.txb + efaxb__echo_half(&e, seq + 1), size, 0, e.me, seq + 1);
    }
    if (rc) return rc;
    us = (double)(efax_now_ns() - ns0) / 1e3 / (double)(efax_ticks() - tk0 + 1); /* per tick */
    *secs = 0;
    for (int k = 0; e.me == 0 && k < iters; k++) {
        lat[k] *= us / 2; /* one-way: half */
        *secs += lat[k] * 2e-6;
    }
    return 0;
}

/* What went wrong with a (sender, NIC)'s messages, as bits. */
enum { EFAXB__SEND_BAD = 1, EFAXB__SEND_MISSING = 2, EFAXB__WRITE_BAD = 4, EFAXB__WRITE_MISSING = 8 };

/* pattern iteration of the message rank src sends to rank dst from its NIC k (0: SEND, 1: WRITE) */
EFAX_PRIVATE uint64_t efaxb__pairs_iter(int dst, int k, int op) {
    return ((uint64_t)dst * EFAX_MAX_NICS + (uint64_t)k) * 2 + (uint64_t)op;
}

/* What rank j saw of rank i's messages from its NIC k, in the views gathered from every rank. */
EFAX_PRIVATE int efaxb__pairs_seen(const efax_bench_pairs *p, int j, int i, int k) {
    return p->all[((size_t)j * (size_t)p->n + (size_t)i) * (size_t)p->maxn + (size_t)k];
}

/* The SEND to rank j from NIC k, out of its source slot; its immediate data names (this rank, k). */
EFAX_PRIVATE const efax_send_desc *efaxb__pairs_send(const efax_bench_pairs *p, efax_send_desc *sd, int j,
                                                     int k) {
    uint64_t slot = ((uint64_t)j * (uint64_t)p->nn + (uint64_t)k) * 2;
    memset(sd, 0, sizeof *sd);
    sd->to = j;
    sd->nic = k;
    sd->src = &p->tx->mr;
    sd->src_off = slot * p->msg;
    sd->size = p->msg;
    sd->has_imm = true;
    efax_imm_encode(p->me, k, 0, &sd->imm);
    return sd;
}

/* The WRITE from rank i's NIC k to rank j: out of i's source slot into i's window slot for NIC k of
   j's window, under tag 1 + k (0 is efax's own), sequence 1. */
EFAX_PRIVATE const efax_write_desc *efaxb__pairs_write(const efax_bench_pairs *p, efax_write_desc *w, int i,
                                                       int j, int k) {
    memset(w, 0, sizeof *w);
    w->from = i;
    w->to = j;
    w->src = &p->tx->mr;
    w->src_off = (((uint64_t)j * (uint64_t)p->nn + (uint64_t)k) * 2 + 1) * p->msg;
    w->dst = &p->wd->mr;
    w->dst_off = ((uint64_t)i * (uint64_t)p->maxn + (uint64_t)k) * p->msg;
    w->size = p->msg;
    w->nic = k;
    w->tag = 1 + k;
    w->seq = 1;
    return w;
}

/* What rank i's WRITE from its NIC k did in this rank's window: 0, never arrived, or data wrong. */
EFAX_PRIVATE int efaxb__pairs_write_status(efax_bench *b, efax_bench_pairs *p, int i, int k) {
    uint64_t off = ((uint64_t)i * (uint64_t)p->maxn + (uint64_t)k) * p->msg;
    if (efax_wait_imm(&b->ctx, i, 1 + k, 1, 1, -1)) return EFAXB__WRITE_MISSING;
    return p->wd->ops->check(p->wd, off, p->msg, i, efaxb__pairs_iter(p->me, k, 1)) ? EFAXB__WRITE_BAD : 0;
}

/* Whether receive i took a SEND: its sender's mark loses EFAXB__SEND_MISSING, and gains EFAXB__SEND_BAD
   when its bytes are wrong (receives name their sender in the immediate data). */
EFAX_PRIVATE void efaxb__pairs_send_status(efax_bench_pairs *p, int i) {
    efax_xfer *x = &p->xs[i];
    int src, tag;
    uint32_t seq;
    uint8_t *st;
    if (!x->done || x->status || !x->rx_has_data) return;
    efax_imm_decode((uint32_t)x->rx_data, &src, &tag, &seq);
    if (src < 0 || src >= p->n || src == p->me || tag >= p->maxn) return;
    st = &p->status[src * p->maxn + tag];
    *st &= (uint8_t)~EFAXB__SEND_MISSING;
    if (x->rx_len != p->msg ||
        p->rx->ops->check(p->rx, (uint64_t)i * p->msg, p->msg, src, efaxb__pairs_iter(p->me, tag, 0)))
        *st |= EFAXB__SEND_BAD;
}

/* Rank 0: one failed pair and NIC, said. */
EFAX_PRIVATE void efaxb__pairs_say_failed(const efax_bench *b, int i, int j, int k, int f) {
    printf("FAIL rank %d (%s) -> rank %d (%s) from NIC %d:%s%s%s%s\n", i, b->boot.hosts[i], j,
           b->boot.hosts[j], k, f & EFAXB__SEND_MISSING ? " SEND never arrived" : "",
           f & EFAXB__SEND_BAD ? " SEND data wrong" : "",
           f & EFAXB__WRITE_MISSING ? " WRITE never arrived" : "",
           f & EFAXB__WRITE_BAD ? " WRITE data wrong" : "");
}

EFAX_API int efax_bench_pairs_meet(efax_bench *b, efax_bench_pairs *p, uint64_t msg) {
    static const char *const boots[] = {"single", "PMIx", "TCP rendezvous", "single"}; /* by efax_boot.kind */
    char line[1024], a[128], *lines = (char *)efax_bench_calloc(b, (size_t)b->boot.size, sizeof line);
    size_t u = (size_t)snprintf(line, sizeof line, "rank %d on %s:", b->boot.rank, b->boot.host);
    int rc;
    p->msg = msg;
    p->n = b->boot.size;
    p->me = b->boot.rank;
    p->nn = efax_ctx_nnics(&b->ctx);
    for (int i = 0; i < p->n;
         i++) { /* the most NICs of any rank; this rank receives one per NIC of every peer */
        int m = efax_ctx_peer_nnics(&b->ctx, i);
        p->maxn = m > p->maxn ? m : p->maxn;
        p->nrx += i != p->me ? m : 0;
    }
    for (int k = 0; k < p->nn && u < sizeof line; k++) {
        const char *addr = efax_ctx_nic_addr(&b->ctx, k, a, sizeof a);
        u += (size_t)snprintf(line + u, sizeof line - u, " %s=%s", efax_ctx_nic(&b->ctx, k)->name, addr);
    }
    rc = lines ? efax_boot_allgather(&b->boot, line, sizeof line, lines, -1) : -FI_ENOMEM;
    if (rc || p->me != 0) return rc;
    printf("# efax %s %s: provider %s, %d ranks, bootstrap %s\n", b->d.driver, EFAX_VERSION_STRING,
           efax_ctx_nic(&b->ctx, 0)->provider, p->n, boots[b->boot.kind & 3]);
    for (int i = 0; i < p->n; i++) printf("#   %s\n", lines + (size_t)i * sizeof line);
    return 0;
}

EFAX_API int efax_bench_pairs_open(efax_bench *b, efax_bench_pairs *p) {
    size_t n = (size_t)p->n, nn = (size_t)p->nn, maxn = (size_t)p->maxn, nrx = (size_t)(p->nrx ? p->nrx : 1);
    const efax_mem_ops *host = efax_mem_host();
    int rc = 0;
    p->xs = (efax_xfer *)efax_bench_calloc(b, n * nn * 2 + (size_t)p->nrx + 1, sizeof *p->xs);
    p->status = (uint8_t *)efax_bench_calloc(b, n * maxn, 1);
    p->all = (uint8_t *)efax_bench_calloc(b, n * n * maxn, 1);
    if (!p->xs || !p->status || !p->all) return -FI_ENOMEM;
    rc = efax_bench_buf(b, host, n * nn * 2 * p->msg, EFAX_MR_SEND | EFAX_MR_WRITE_SRC, &p->tx);
    if (!rc) rc = efax_bench_buf(b, host, nrx * p->msg, EFAX_MR_RECV, &p->rx);
    if (!rc) rc = efax_bench_buf(b, host, n * maxn * p->msg, EFAX_MR_WRITE_DST, &p->wd); /* exchanged */
    if (rc) return rc;
    for (int s = 0; s < p->n * p->nn * 2; s++) { /* slot s: to rank s / 2nn, from NIC s / 2 % nn, op s % 2 */
        uint64_t iter = efaxb__pairs_iter(s / (2 * p->nn), s / 2 % p->nn, s % 2);
        p->tx->ops->fill(p->tx, (uint64_t)s * p->msg, p->msg, p->me, iter);
    }
    p->rx->ops->poison(p->rx, 0, nrx * p->msg); /* peers write after efax_bench_pairs_prove's barrier */
    p->wd->ops->poison(p->wd, 0, n * maxn * p->msg);
    return 0;
}

EFAX_API int efax_bench_pairs_prove(efax_bench *b, efax_bench_pairs *p) {
    efax_send_desc sd;
    efax_write_desc w;
    int ntx = 0, rc = 0;
    for (int i = 0, j = 0; i < p->n && !rc; i++)
        for (int k = 0; i != p->me && k < efax_ctx_peer_nnics(&b->ctx, i) && !rc; k++, j++) {
            int nic = efax_ctx_route_in(&b->ctx, i, k);
            rc = efax_recv(&b->ctx, &p->xs[ntx++], nic, &p->rx->mr, (uint64_t)j * p->msg, p->msg);
        }
    if (!rc) rc = efax_boot_barrier(&b->boot, -1);
    for (int j = 0; j < p->n && !rc; j++)
        for (int k = 0; j != p->me && k < p->nn && !rc; k++) {
            rc = efax_send(&b->ctx, &p->xs[ntx++], efaxb__pairs_send(p, &sd, j, k));
            if (!rc) rc = efax_write(&b->ctx, &p->xs[ntx++], efaxb__pairs_write(p, &w, p->me, j, k), NULL);
        }
    if (rc) return rc;
    for (int i = 0; i < ntx; i++) (void)efax_wait(&b->ctx, &p->xs[i], -1);
    for (int i = 0; i < p->n; i++) /* each write landed in its own slot */
        for (int k = 0; i != p->me && k < efax_ctx_peer_nnics(&b->ctx, i); k++)
            p->status[i * p->maxn + k] =
                (uint8_t)(EFAXB__SEND_MISSING | efaxb__pairs_write_status(b, p, i, k));
    for (int i = 0; i < p->nrx; i++) efaxb__pairs_send_status(p, i);
    /* every view */
    return efax_boot_allgather(&b->boot, p->status, (size_t)p->n * (size_t)p->maxn, p->all, -1);
}

EFAX_API int efax_bench_pairs_report(const efax_bench *b, const efax_bench_pairs *p) {
    int n = p->n, bad = 0;
    printf("\n%-10s", "from\\to");
    for (int j = 0; j < n; j++) printf(" %6d", j);
    for (int i = 0; i < n; i++) { /* row i: the sender; column j: the receiver */
        printf("\nrank %-5d", i);
        for (int j = 0; j < n; j++) {
            int fail = 0;
            for (int k = 0; i != j && k < p->maxn; k++) fail |= efaxb__pairs_seen(p, j, i, k);
            printf(" %6s", i == j ? "-" : fail ? "FAIL" : "OK");
        }
    }
    printf("\n");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; i != j && k < p->maxn; k++) {
                int f = efaxb__pairs_seen(p, j, i, k);
                if (!f) continue;
                bad++;
                efaxb__pairs_say_failed(b, i, j, k, f);
            }
    if (!bad)
        printf("all %d×%d pairs OK (SEND and WRITE with immediate data on every NIC, %llu bytes each, "
               "checked)\n",
               n, n - 1, (unsigned long long)p->msg);
    return bad;
}

EFAX_API int efax_bench_write_bufs(efax_bench *b, const efax_bench_step *st, bool staged, size_t len, int tag,
                                   int ntags, efax_buf **src, efax_buf **dst) {
    const efax_mem_ops *kind = staged ? efax_bench_mem_staged() : st->kind;
    int rc = efax_bench_buf(b, kind, len, EFAX_MR_WRITE_SRC, src);
    if (!rc) rc = efax_bench_buf(b, kind, len, EFAX_MR_WRITE_DST, dst);
    for (int t = 0; t < ntags && !rc; t++) rc = efax_expect_prepare(&b->ctx, &(*dst)->mr, tag + t);
    if (!rc) (*dst)->ops->poison(*dst, 0, len);
    return rc;
}

/* A page table: a permutation of the cache's pages (the same on every rank: one seed). */
EFAX_PRIVATE void efaxb__kv_shuffle(uint32_t *t, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) t[i] = (uint32_t)i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(efax_pattern_word(seed, (uint64_t)i) % (uint64_t)(i + 1));
        uint32_t v = t[i];
        t[i] = t[j];
        t[j] = v;
    }
}

EFAX_API int efax_bench_kv_open(efax_bench *b, efax_bench_kv *kv) {
    size_t cells = (size_t)kv->layers * (size_t)kv->pages, layers = (size_t)kv->layers;
    size_t iters = (size_t)efax_opts_iters(&b->o, 1);
    int rc = 0;
    kv->src_pages = (uint32_t *)efax_bench_calloc(b, cells, sizeof(uint32_t));
    kv->dst_pages = (uint32_t *)efax_bench_calloc(b, cells, sizeof(uint32_t));
    kv->batch = (efax_batch *)efax_bench_calloc(b, layers, sizeof(efax_batch));
    kv->ex = (efax_expect *)efax_bench_calloc(b, layers, sizeof(efax_expect));
    kv->post = (double *)efax_bench_calloc(b, iters * layers, sizeof(double));
    kv->land = (double *)efax_bench_calloc(b, iters * layers, sizeof(double));
    kv->lat = (double *)efax_bench_calloc(b, iters, sizeof(double));
    if (!kv->src_pages || !kv->dst_pages || !kv->batch || !kv->ex || !kv->post || !kv->land || !kv->lat)
        return -FI_ENOMEM;
    for (int l = 0; l < kv->layers && !rc; l++) rc = efax_batch_init(&kv->batch[l], kv->pages);
    if (rc) return rc;
    efaxb__kv_shuffle(kv->src_pages, (int)cells, 0x5eedull);
    efaxb__kv_shuffle(kv->dst_pages, (int)cells, 0xdecull);
    return 0;
}

EFAX_API int64_t efax_bench_kv_pages(const efax_bench_kv *kv, const efax_bench_step *st, efax_buf *src,
                                     efax_buf *dst, int it, bool paged, bool fill) {
    uint64_t s = st->size;
    int64_t wrong = 0;
    for (int l = 0; l < kv->layers; l++)
        for (int p = 0; p < kv->pages; p++) {
            int i = l * kv->pages + p;
            uint64_t so = (paged ? kv->src_pages[i] : (uint32_t)i) * s;
            uint64_t dof = (paged ? kv->dst_pages[i] : (uint32_t)i) * s;
            uint64_t pattern = (uint64_t)it << 32 | (uint64_t)i; /* page p of layer l, iteration it */
            if (fill)
                src->ops->fill(src, so, s, 0, pattern);
            else
                wrong += (int64_t)dst->ops->check(dst, dof, s, 0, pattern);
        }
    return wrong;
}

EFAX_API void efax_bench_kv_close(efax_bench_kv *kv) {
    for (int l = 0; kv->batch && l < kv->layers; l++) efax_batch_deinit(&kv->batch[l]);
}

/* The names of the bits of v that flag[0..n-1] has, "|"-joined into buf; "-" for none. */
EFAX_PRIVATE void efaxb__bits(char *buf, size_t len, uint64_t v, const uint64_t *flag,
                              const char *const *name, int n) {
    size_t u = 0;
    buf[0] = 0;
    for (int i = 0; i < n; i++)
        if (v & flag[i]) u += (size_t)snprintf(buf + u, len > u ? len - u : 0, "%s%s", u ? "|" : "", name[i]);
    if (!u) snprintf(buf, len, "-");
}

/* A domain's mr_mode bits by name, into buf; returns buf. */
EFAX_PRIVATE const char *efaxb__mr_mode_str(char *buf, size_t len, uint64_t v) {
    static const uint64_t f[] = {FI_MR_LOCAL,    FI_MR_VIRT_ADDR, FI_MR_ALLOCATED, FI_MR_PROV_KEY,
                                 FI_MR_ENDPOINT, FI_MR_HMEM,      FI_MR_RAW,       FI_MR_RMA_EVENT};
    static const char *const n[] = {"LOCAL",    "VIRT_ADDR", "ALLOCATED", "PROV_KEY",
                                    "ENDPOINT", "HMEM",      "RAW",       "RMA_EVENT"};
    efaxb__bits(buf, len, v, f, n, 8);
    return buf;
}

/* A provider's mode bits by name. */
EFAX_PRIVATE void efaxb__mode_str(char *buf, size_t len, uint64_t v) {
    /* FI_LOCAL_MR is a 1.x mode bit; 2.x deprecates it (fi_mr(3): FI_MR_LOCAL replaces it) */
#if FI_MAJOR_VERSION < 2
    static const uint64_t f[] = {FI_CONTEXT,    FI_CONTEXT2,   FI_ASYNC_IOV,
                                 FI_RX_CQ_DATA, FI_MSG_PREFIX, FI_LOCAL_MR};
#else
    static const uint64_t f[] = {FI_CONTEXT, FI_CONTEXT2, FI_ASYNC_IOV, FI_RX_CQ_DATA, FI_MSG_PREFIX};
#endif
    static const char *const n[] = {"CONTEXT",    "CONTEXT2",   "ASYNC_IOV",
                                    "RX_CQ_DATA", "MSG_PREFIX", "LOCAL_MR"};
    efaxb__bits(buf, len, v, f, n, (int)(sizeof f / sizeof f[0]));
}

EFAX_API void efax_bench_nic_header(FILE *out) {
    fprintf(out, "%-14s %-18s %-13s %8s %4s %-38s %-24s %4s %7s %6s %5s %5s %4s\n", "provider", "NIC", "PCI",
            "Gbps", "numa", "mr_mode", "mode", "cqd", "max_msg", "inject", "tx", "rx", "hmem");
}

EFAX_API void efax_bench_nic_row(FILE *out, FILE *json, const char *driver, const efax_nic_info *x) {
    char mr[96], md[64], gb[16], mm[24];
    efaxb__mr_mode_str(mr, sizeof mr, x->mr_mode);
    efaxb__mode_str(md, sizeof md, x->mode);
    if (x->link_gbps > 0)
        snprintf(gb, sizeof gb, "%.0f", x->link_gbps);
    else
        snprintf(gb, sizeof gb, "-");
    efax_fmt_size(x->max_msg_size, mm, sizeof mm);
    if (x->max_msg_size >= (1ull << 62)) snprintf(mm, sizeof mm, "inf");
    fprintf(out, "%-14s %-18s %-13s %8s %4d %-38s %-24s %4zu %7s %6zu %5zu %5zu %4s%s\n", x->provider,
            x->name, x->pci[0] ? x->pci : "-", gb, x->numa, mr, md, x->cq_data_size, mm, x->inject_size,
            x->tx_size, x->rx_size, x->hmem ? "yes" : "no", x->loopback ? "  (loopback)" : "");
    efax_bench_jsonl(
        json, driver,
        "\"provider\":\"%s\",\"nic\":\"%s\",\"fabric\":\"%s\",\"pci\":\"%s\",\"link_gbps\":%.6g,"
        "\"numa\":%d,\"mr_mode\":\"%s\",\"mode\":\"%s\",\"cq_data_size\":%zu,\"max_msg_size\":%llu,"
        "\"inject_size\":%zu,\"tx_size\":%zu,\"rx_size\":%zu,\"mr_key_size\":%zu,\"hmem\":%s,"
        "\"loopback\":%s",
        x->provider, x->name, x->fabric, x->pci, x->link_gbps, x->numa, mr, md, x->cq_data_size,
        (unsigned long long)x->max_msg_size, x->inject_size, x->tx_size, x->rx_size, x->mr_key_size,
        x->hmem ? "true" : "false", x->loopback ? "true" : "false");
}

EFAX_API double efax_bench_memcpy_gbs(uint64_t size) {
    uint8_t *a = (uint8_t *)efax_host_alloc(size);
    uint8_t *b = (uint8_t *)efax_host_alloc(size);
    double best = 0;
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, size);
    memset(b, 2, size);
    for (int round = 0; round < 7; round++) {
        uint64_t t0 = efax_now_ns(), reps = 0;
        double gbs;
        do {
            memcpy(round & 1 ? a : b, round & 1 ? b : a, size);
            reps++;
        } while (efax_now_ns() - t0 < 200000000ull);
        gbs = (double)(size * reps) / (double)(efax_now_ns() - t0);
        if (gbs > best) best = gbs;
    }
    free(a);
    free(b);
    return best;
}

// >>rails (implementation) -------------------------------------------------------------------

/* ACK 1, 2 and DATA 3.. by iteration parity: two iterations are in flight, each with its own tags */
enum { EFAXB__RAILS_ACK = 1, EFAXB__RAILS_DATA = 3 };

/* What one rank saw during one measurement: the writer's time, and every rank's OS counters over
   the NICs it used (a delta each; the last one is the host's TCP counters when it has them). */
struct efaxb__rails_sample {
    double us;
    uint64_t bytes;
    int nos;
    efax_nic_stats own[EFAX_MAX_NICS]; /* efax's own counters over the measurement */
    efax_os_counters os[1];            /* [nos]: really nnic + 1 of them (allocated so) */
};

EFAX_API void efax_rails_desc_init(efax_rails_desc *d) {
    memset(d, 0, sizeof *d);
    d->size = 1 << 20;
    d->window = 8;
    d->rounds = 2;
    d->slow = 0.8;
    d->lossy = 0.01;
}

EFAX_API const char *efax_rails_nic_name(const efax_rails *r, int k) {
    return k == EFAX_RAILS_ALL ? "all" : r->names[k];
}

EFAX_PRIVATE const char *efaxb__rails_host(const efax_rails *r, int rank) {
    return efax_ctx_host(&r->ctx, rank);
}

EFAX_PRIVATE efaxb__rails_sample *efaxb__rails_at(const efax_rails *r, efaxb__rails_sample *base, int rank) {
    return (efaxb__rails_sample *)((char *)base + (size_t)rank * r->slen);
}

/* Message m of iteration i from `from` to `to`, as both sides describe it. */
EFAX_PRIVATE void efaxb__rails_msg(const efax_rails *r, efax_write_desc *w, int from, int to, int nic,
                                   uint64_t i, int m) {
    memset(w, 0, sizeof *w);
    w->from = from;
    w->to = to;
    w->src = &r->src.mr;
    w->dst = &r->dst.mr;
    w->src_off = w->dst_off = ((i % 2) * (uint64_t)r->d.window + (uint64_t)m) * r->d.size;
    w->size = r->d.size;
    w->mode = nic == EFAX_RAILS_ALL ? EFAX_MODE_SPLIT : EFAX_MODE_SINGLE;
    w->nic = nic == EFAX_RAILS_ALL ? 0 : nic; /* Single's NIC */
    w->chunk = 0; /* the library's policy, as every driver's writes between them */
    w->tag = EFAXB__RAILS_DATA + (int)(i % 2) * r->d.window + m;
    w->seq = (uint32_t)i;
}

/* The writer: iters iterations of window messages, two iterations in flight. */
EFAX_PRIVATE int efaxb__rails_writer(efax_rails *r, int to, int nic, uint64_t iters, double *us) {
    int W = r->d.window, rc = 0;
    uint64_t t0 = efax_now_ns();
    efax_write_desc w;
    for (uint64_t i = 0; i < iters && !rc; i++) {
        if (i >= 2)
            rc = efax_wait_imm(&r->ctx, to, EFAXB__RAILS_ACK + (int)(i % 2), (uint32_t)(i - 2), 1, -1);
        for (int m = 0; m < W && !rc; m++) {
            efax_xfer *x = &r->xs[(i % 2) * (uint64_t)W + (uint64_t)m];
            if (i >= 2) rc = efax_wait(&r->ctx, x, -1);
            efaxb__rails_msg(r, &w, r->boot.rank, to, nic, i, m);
            if (!rc) rc = efax_write(&r->ctx, x, &w, NULL);
        }
    }
    for (uint64_t i = iters > 2 ? iters - 2 : 0; i < iters && !rc; i++)
        rc = efax_wait_imm(&r->ctx, to, EFAXB__RAILS_ACK + (int)(i % 2), (uint32_t)i, 1, -1);
    *us = (double)(efax_now_ns() - t0) / 1e3;
    for (int k = 0; k < 2 * W && !rc; k++)
        if (r->xs[k].op) rc = efax_wait(&r->ctx, &r->xs[k], -1);
    return rc;
}

/* The target: takes each iteration's messages and confirms on the rail being measured. */
EFAX_PRIVATE int efaxb__rails_target(efax_rails *r, int from, int nic, uint64_t iters) {
    int W = r->d.window, rc = 0;
    for (uint64_t i = 0; i < iters && !rc; i++) {
        efax_write_desc w;
        for (int m = 0; m < W && !rc; m++) {
            efaxb__rails_msg(r, &w, from, r->boot.rank, nic, i, m);
            rc = efax_expect_write(&r->ctx, &r->ex[m], &w);
        }
        for (int m = 0; m < W && !rc; m++) rc = efax_expect_wait(&r->ctx, &r->ex[m], -1);
        if (!rc) {
            int k = nic == EFAX_RAILS_ALL ? 0 : nic;
            rc = efax_notify_nic(&r->ctx, from, k, EFAXB__RAILS_ACK + (int)(i % 2), (uint32_t)i);
        }
    }
    return rc;
}

/* The OS counters of the NICs a measurement uses (and the host's TCP counters), into s. */
EFAX_PRIVATE void efaxb__rails_read_os(const efax_rails *r, int nic, efaxb__rails_sample *s) {
    s->nos = 0;
    for (int k = 0; k < r->nnic; k++) {
        efax_os_counters *c = &s->os[s->nos];
        if (nic != EFAX_RAILS_ALL && k != nic) continue;
        if (efax_os_counters_nic(efax_ctx_nic(&r->ctx, k), c) == 0) s->nos++;
    }
    if (efax_os_counters_tcp(&s->os[s->nos]) == 0) s->nos++;
}

/* What the OS says the wire lost during a measurement: *lost packets (or TCP segments) sent again
   or dropped, by the writer and the target; *sent what the writer sent. Where the host counts TCP
   (a tcp rail), sent is the writer's TCP segments, since an interface counts a 64 KiB GSO packet
   as one; else (efa) the NICs' packets. */
EFAX_PRIVATE void efaxb__rails_loss(const efax_rails *r, int a, int b, uint64_t *lost, uint64_t *sent) {
    bool tcp = false;
    *lost = *sent = 0;
    for (int side = 0; side < 2; side++) {
        const efaxb__rails_sample *s = efaxb__rails_at(r, r->all, side ? b : a);
        for (int i = 0; i < s->nos; i++) {
            uint64_t l = 0, n = 0;
            if (strcmp(s->os[i].source, "tcp") || efax_os_counters_loss(&s->os[i], &l, &n)) continue;
            *lost += l;
            if (side) continue;
            *sent += n;
            tcp = true;
        }
    }
    for (int side = 0; side < 2; side++) {
        const efaxb__rails_sample *s = efaxb__rails_at(r, r->all, side ? b : a);
        for (int i = 0; i < s->nos; i++) {
            uint64_t l = 0, n = 0;
            if (!strcmp(s->os[i].source, "tcp") || efax_os_counters_loss(&s->os[i], &l, &n)) continue;
            *lost += l;
            if (!side && !tcp) *sent += n;
        }
    }
}

/* A sample's OS counters as a JSON array (efaxb__os_json each). */
EFAX_PRIVATE void efaxb__rails_os_json(char **buf, size_t *cap, size_t *u, const efaxb__rails_sample *s) {
    efaxb__grow(buf, cap, u, "[");
    for (int i = 0; i < s->nos; i++) {
        if (i) efaxb__grow(buf, cap, u, ",");
        efaxb__os_json(buf, cap, u, &s->os[i]);
    }
    efaxb__grow(buf, cap, u, "]");
}

/* The rail (a, b, nic) in r->paths, added when it is new. */
EFAX_PRIVATE efax_rail_result *efaxb__rails_path(efax_rails *r, int a, int b, int nic) {
    efax_rail_result *p;
    for (int i = 0; i < r->npath; i++)
        if (r->paths[i].from == a && r->paths[i].to == b && r->paths[i].nic == nic) return &r->paths[i];
    p = &r->paths[r->npath++];
    memset(p, 0, sizeof *p);
    p->from = a;
    p->to = b;
    p->nic = nic;
    return p;
}

/* Rank 0: the SRD events the NICs' own counters say happened in the gathered samples of a and b, added
   to p, and the first ones that moved, with their verdict, into p->wire. */
EFAX_PRIVATE void efaxb__rails_events(efax_rails *r, efax_rail_result *p, int a, int b) {
    static const char *const srd[] = {"retrans_timeout_events", "impaired_remote_conn_events",
                                      "unresponsive_remote_events"};
    for (int side = 0; side < 2; side++) {
        const efaxb__rails_sample *s = efaxb__rails_at(r, r->all, side ? b : a);
        for (int i = 0; i < s->nos; i++) {
            char what[160];
            if (!efax_os_counters_events(&s->os[i], what, sizeof what)) continue;
            for (int k = 0; k < 3; k++)
                if (efax_os_counter(&s->os[i], srd[k]) > 0)
                    p->events += (uint64_t)efax_os_counter(&s->os[i], srd[k]);
            if (!p->wire[0])
                snprintf(p->wire, sizeof p->wire, "%s %s: %s", efaxb__rails_host(r, side ? b : a),
                         s->os[i].dev, what);
        }
    }
}

/* Rank 0: files one measurement under its rail, prints it, writes its JSON record. */
EFAX_PRIVATE void efaxb__rails_record(efax_rails *r, int round, int a, int b, int nic) {
    const efaxb__rails_sample *w = efaxb__rails_at(r, r->all, a), *t = efaxb__rails_at(r, r->all, b);
    efax_rail_result *p = efaxb__rails_path(r, a, b, nic);
    const char *name = efax_rails_nic_name(r, nic), *ha = efaxb__rails_host(r, a),
               *hb = efaxb__rails_host(r, b);
    uint64_t lost, sent;
    double g = w->us > 0 ? (double)w->bytes * 8 / (w->us * 1e3) : 0;
    char *js = NULL;
    size_t cap = 0, u = 0;
    efaxb__rails_loss(r, a, b, &lost, &sent);
    efaxb__rails_events(r, p, a, b);
    p->gbps[round] = g;
    p->lost += lost;
    p->sent += sent;
    p->bytes += w->bytes;
    if (!r->d.quiet)
        printf("  %s %d  %s %s -> %s %s: %8.3f Gbps  (%llu MiB in %.0f ms; OS: %llu of %llu packets "
               "resent or dropped)\n",
               round < r->d.rounds ? "round" : "confirm", round + 1, ha, name, hb, name, g,
               (unsigned long long)(w->bytes >> 20), w->us / 1e3, (unsigned long long)lost,
               (unsigned long long)sent);
    if (!r->jf) return;
    efaxb__grow(
        &js, &cap, &u,
        "\"kind\":\"measurement\",\"round\":%d,\"confirm\":%s,\"from\":\"%s\",\"to\":\"%s\",\"nic\":\"%s\","
        "\"bytes\":%llu,\"seconds\":%.6g,\"gbps\":%.6g,\"lost\":%llu,\"sent\":%llu,\"nics\":[",
        round + 1, round < r->d.rounds ? "false" : "true", ha, hb, name, (unsigned long long)w->bytes,
        w->us / 1e6, g, (unsigned long long)lost, (unsigned long long)sent);
    for (int k = 0; k < r->nnic; k++)
        efaxb__grow(&js, &cap, &u,
                    "%s{\"name\":\"%s\",\"tx_bytes\":%llu,\"tx_ops\":%llu,\"eagain\":%llu,\"rx_bytes\":%llu,"
                    "\"rx_ops\":%llu}",
                    k ? "," : "", efax_rails_nic_name(r, k), (unsigned long long)w->own[k].tx_bytes,
                    (unsigned long long)w->own[k].tx_ops, (unsigned long long)w->own[k].eagain,
                    (unsigned long long)t->own[k].rx_bytes, (unsigned long long)t->own[k].rx_ops);
    efaxb__grow(&js, &cap, &u, "],\"os_writer\":");
    efaxb__rails_os_json(&js, &cap, &u, w);
    efaxb__grow(&js, &cap, &u, ",\"os_target\":");
    efaxb__rails_os_json(&js, &cap, &u, t);
    if (js) efax_bench_jsonl(r->jf, "rails", "%s", js);
    free(js);
}

EFAX_API int efax_rails_measure(efax_rails *r, int a, int b, int nic, uint64_t iters, int round) {
    efaxb__rails_sample *before, *s = r->mine;
    int rc, me = r->boot.rank;
    bool ranks_ok = a >= 0 && b >= 0 && a < r->boot.size && b < r->boot.size && a != b;
    /* round indexes the rail's per-round rates; nic its NICs (or all at once) */
    bool nic_ok = nic >= EFAX_RAILS_ALL && nic < r->nnic;
    if (!ranks_ok || !nic_ok || round < -1 || round > r->d.rounds) return -FI_EINVAL;
    before = (efaxb__rails_sample *)calloc(1, r->slen);
    if (!before) return -FI_ENOMEM;
    memset(s, 0, r->slen);
    if ((rc = efax_boot_barrier(&r->boot, EFAX_TURN_MS))) goto out;
    if (me == a || me == b) {
        efaxb__rails_read_os(r, nic, before);
        efax_ctx_stats_reset(&r->ctx);
        rc = me == a ? efaxb__rails_writer(r, b, nic, iters, &s->us) : efaxb__rails_target(r, a, nic, iters);
        efaxb__rails_read_os(r, nic, s);
        for (int k = 0; k < r->nnic; k++) s->own[k] = efax_ctx_stats(&r->ctx, k);
        for (int i = 0; i < s->nos && i < before->nos; i++)
            efax_os_counters_delta(&before->os[i], &s->os[i], &s->os[i]);
        s->bytes = iters * (uint64_t)r->d.window * r->d.size;
    }
    if (rc) goto out;
    rc = efax_boot_allgather(&r->boot, s, r->slen, r->all, -1);
    if (!rc && round >= 0 && me == 0) {
        efaxb__rails_record(r, round, a, b, nic);
        fflush(stdout);
    }
out:
    free(before);
    return rc;
}

/* One NIC's line rate: the option, else $EFAX_LINE_GBPS, else the provider's; 0 when unknown. */
EFAX_PRIVATE double efaxb__rails_line(const efax_rails *r, int k) {
    const char *e = getenv("EFAX_LINE_GBPS");
    if (r->d.line_gbps > 0) return r->d.line_gbps;
    if (e && *e && strtod(e, NULL) > 0) return strtod(e, NULL);
    return efax_ctx_nic(&r->ctx, k)->link_gbps;
}

/* Whether rank 0 flags rail p. */
EFAX_PRIVATE bool efaxb__rails_flagged(const efax_rail_result *p) { return p->slow || p->lossy || p->events; }

/* Rank 0: every rail's best round (the confirmation round included), its ratio to its direction's
   median NIC and to the line rate, and its flags. Returns how many rails are slow. */
EFAX_PRIVATE int efaxb__rails_judge(efax_rails *r) {
    int slow = 0;
    for (int i = 0; i < r->npath; i++) {
        efax_rail_result *p = &r->paths[i];
        p->best = 0;
        for (int k = 0; k <= r->d.rounds; k++)
            if (p->gbps[k] > p->best) p->best = p->gbps[k];
    }
    for (int i = 0; i < r->npath; i++) {
        efax_rail_result *p = &r->paths[i];
        double v[EFAX_MAX_NICS], med = 0, line = p->nic == EFAX_RAILS_ALL ? 0 : efaxb__rails_line(r, p->nic);
        int n = 0;
        for (int j = 0; j < r->npath; j++)
            if (r->paths[j].from == p->from && r->paths[j].to == p->to && r->paths[j].nic != EFAX_RAILS_ALL)
                v[n++] = r->paths[j].best;
        qsort(v, (size_t)n, sizeof v[0], efaxb__cmp_double);
        if (n) med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
        p->median = med;
        p->line = line;
        if (p->nic == EFAX_RAILS_ALL) {
            double sum = 0;
            for (int j = 0; j < n; j++) sum += v[j];
            p->x_median = sum > 0 ? p->best / sum : 0; /* every NIC at once: its share of the NICs' sum */
        } else {
            p->x_median = med > 0 ? p->best / med : 0;
            /* one NIC has no median to fall short of: then the line rate, when known */
            p->slow = n > 1 ? p->x_median < r->d.slow : line > 0 && p->best < r->d.slow * line;
            p->lossy = p->lost >= 20 && p->sent > 0 && (double)p->lost > r->d.lossy * (double)p->sent;
            slow += p->slow;
        }
        p->pct_line = line > 0 ? 100 * p->best / line : -1;
    }
    return slow;
}

/* Rank 0: rail p's row of the table, its JSON record and CSV row. Returns whether it is flagged. */
EFAX_PRIVATE int efaxb__rails_row(efax_rails *r, const efax_rail_result *p) {
    const char *name = efax_rails_nic_name(r, p->nic), *ha = efaxb__rails_host(r, p->from);
    const char *hb = efaxb__rails_host(r, p->to);
    char dir[80], loss[48], pct[16] = "-", xm[16] = "-", verdict[160] = "ok";
    snprintf(dir, sizeof dir, "%s -> %s", ha, hb);
    if (p->sent)
        snprintf(loss, sizeof loss, "%llu/%llu (%.2f%%)", (unsigned long long)p->lost,
                 (unsigned long long)p->sent, 100.0 * (double)p->lost / (double)p->sent);
    else
        snprintf(loss, sizeof loss, "-");
    if (p->pct_line >= 0) snprintf(pct, sizeof pct, "%.1f", p->pct_line);
    if (p->nic != EFAX_RAILS_ALL) snprintf(xm, sizeof xm, "%.2f", p->x_median);
    if (efaxb__rails_flagged(p))
        snprintf(verdict, sizeof verdict, "FLAGGED %s%s%s%s%s: %s %s -> %s %s", p->slow ? "SLOW" : "",
                 p->slow && (p->lossy || p->events) ? "+" : "", p->lossy ? "LOSSY" : "",
                 p->lossy && p->events ? "+" : "", p->events ? "SRD" : "", ha, name, hb, name);
    else if (p->nic == EFAX_RAILS_ALL)
        snprintf(verdict, sizeof verdict, "every NIC at once: %.0f%% of the NICs' sum", 100 * p->x_median);
    printf("%-24s %-8s %10.3f %9s %7s %22s  %s\n", dir, name, p->best, xm, pct, loss, verdict);
    efax_bench_jsonl(
        r->jf, "rails",
        "\"kind\":\"path\",\"from\":\"%s\",\"to\":\"%s\",\"nic\":\"%s\",\"gbps\":%.6g,\"x_median\":%.6g,"
        "\"median_gbps\":%.6g,\"line_gbps\":%.6g,\"pct_line\":%.6g,\"lost\":%llu,\"sent\":%llu,"
        "\"slow\":%s,\"lossy\":%s,\"srd_events\":%llu,\"wire\":\"%s\"",
        ha, hb, name, p->best, p->x_median, p->median, p->line, p->pct_line, (unsigned long long)p->lost,
        (unsigned long long)p->sent, p->slow ? "true" : "false", p->lossy ? "true" : "false",
        (unsigned long long)p->events, p->wire);
    if (r->cf)
        fprintf(r->cf, "%s,%s,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%llu,%llu,%d,%d\n", ha, hb, name, p->best,
                p->x_median, p->median, p->line, p->pct_line, (unsigned long long)p->lost,
                (unsigned long long)p->sent, p->slow, p->lossy);
    return efaxb__rails_flagged(p);
}

/* Rank 0, when rails were flagged: which ends explain them. A host's NIC is a suspect in a role
   (sending, receiving) when every rail it takes part in so is flagged; with two hosts both ends of
   a rail always are, and only a third host tells them apart. Prints them; writes the JSON summary. */
EFAX_PRIVATE void efaxb__rails_suspects(efax_rails *r, int flagged) {
    char list[1024] = "";
    size_t u = 0;
    int n = 0;
    for (int h = 0; h < r->boot.size; h++)
        for (int k = 0; k < r->nnic; k++)
            for (int role = 0; role < 2; role++) {
                const char *name = efax_rails_nic_name(r, k), *how = role ? "receiving" : "sending";
                int in = 0, bad = 0;
                for (int i = 0; i < r->npath; i++) {
                    const efax_rail_result *p = &r->paths[i];
                    if (p->nic != k || (role ? p->to : p->from) != h) continue;
                    in++;
                    bad += efaxb__rails_flagged(p);
                }
                if (!in || bad < in) continue;
                if (u < sizeof list)
                    u += (size_t)snprintf(list + u, sizeof list - u, "%s\"%s %s %s\"", n ? "," : "",
                                          efaxb__rails_host(r, h), name, how);
                printf("# suspect: %s %s, %s (%d of %d path(s) flagged)\n", efaxb__rails_host(r, h), name,
                       how, in, in);
                n++;
            }
    if (flagged && r->boot.size == 2)
        printf("# with two hosts both ends of a flagged rail are suspects: a third host (or another peer) "
               "tells them apart\n");
    if (flagged && !n) printf("# no one NIC explains every flag: look at the flagged paths above\n");
    efax_bench_jsonl(r->jf, "rails", "\"kind\":\"summary\",\"flagged\":%d,\"paths\":%d,\"suspects\":[%s]",
                     flagged, r->npath, list);
}

/* Rank 0: the verdicts, printed and written. Returns how many rails were flagged. */
EFAX_PRIVATE int efaxb__rails_report(efax_rails *r) {
    int flagged = 0;
    efaxb__rails_judge(r);
    printf(
        "\n# rails: each NIC alone (its best of %d rounds, and of a confirmation round where one was slow) "
        "against the median NIC of its direction, and the line rate\n",
        r->d.rounds);
    printf("%-24s %-8s %10s %9s %7s %22s  %s\n", "from -> to", "NIC", "Gbps", "x median", "%line",
           "OS: resent/dropped", "verdict");
    if (r->cf)
        fprintf(r->cf, "from,to,nic,gbps,x_median,median_gbps,line_gbps,pct_line,lost,sent,slow,lossy\n");
    for (int i = 0; i < r->npath; i++) flagged += efaxb__rails_row(r, &r->paths[i]);
    if (flagged)
        printf("\n# rails: %d path(s) FLAGGED\n", flagged);
    else
        printf("\n# rails: every rail healthy (none below %.0f%% of the median, none losing over %.2g%% "
               "of its packets)\n",
               100 * r->d.slow, 100 * r->d.lossy);
    for (int i = 0; i < r->npath && flagged; i++) {
        const efax_rail_result *p = &r->paths[i];
        const char *name = efax_rails_nic_name(r, p->nic);
        if (!efaxb__rails_flagged(p)) continue;
        printf("# FLAGGED %s %s -> %s %s:%s%s%s\n", efaxb__rails_host(r, p->from), name,
               efaxb__rails_host(r, p->to), name, p->slow ? " slow" : "", p->lossy ? " losing packets" : "",
               p->events ? " SRD events" : "");
    }
    for (int i = 0; i < r->npath; i++) { /* every rail whose NICs' counters moved, with their verdict */
        const efax_rail_result *p = &r->paths[i];
        const char *name = efax_rails_nic_name(r, p->nic);
        if (p->wire[0])
            printf("# counters moved on %s %s -> %s %s: %s\n", efaxb__rails_host(r, p->from), name,
                   efaxb__rails_host(r, p->to), name, p->wire);
    }
    efaxb__rails_suspects(r, flagged);
    return flagged;
}

/* Whether the job runs one rank per host; else rank 0 says which two ranks share one. */
EFAX_PRIVATE bool efaxb__rails_one_per_host(const efax_rails *r) {
    for (int i = 0; i < r->boot.size; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(r->boot.hosts[i], r->boot.hosts[j])) {
                if (r->boot.rank == 0)
                    fprintf(stderr,
                            "rails: ranks %d and %d both run on %s: start one rank per host (mpirun --map-by "
                            "node, srun --ntasks-per-node=1)\n",
                            j, i, r->boot.hosts[i]);
                return false;
            }
    return true;
}

/* The context, its NICs' names, the buffers, the samples and the rails. */
EFAX_PRIVATE int efaxb__rails_setup(efax_rails *r) {
    efax_ctx_desc cd;
    size_t len = 2 * (size_t)r->d.window * (size_t)r->d.size, n = (size_t)r->boot.size;
    int rc;
    memset(&cd, 0, sizeof cd);
    cd.provider = r->d.provider;
    cd.nics = r->d.nics;
    cd.timeout_ms = r->d.timeout_ms;
    cd.imm_tags = EFAXB__RAILS_DATA + 2 * r->d.window + 1;
    if (cd.imm_tags < 64) cd.imm_tags = 0;
    if (!efaxb__rails_one_per_host(r)) return -EFAX_E_USAGE;
    if ((rc = efax_ctx_init(&r->ctx, &cd)) || (rc = efax_ctx_connect(&r->ctx, &r->boot)) ||
        (rc = efax_ctx_warmup(&r->ctx)))
        return rc;
    r->nnic = efax_ctx_nnics(&r->ctx);
    for (int k = 0; k < r->nnic; k++) {
        const char *name = efax_ctx_nic(&r->ctx, k)->name;
        int twice = 0;
        for (int j = 0; j < r->nnic; j++) twice |= j != k && !strcmp(efax_ctx_nic(&r->ctx, j)->name, name);
        snprintf(r->names[k], sizeof r->names[k], twice ? "%s#%d" : "%s", name, k);
    }
    if ((rc = efax_buf_alloc(&r->ctx, &r->src, efax_mem_host(), len, EFAX_MR_WRITE_SRC))) return rc;
    if ((rc = efax_buf_alloc(&r->ctx, &r->dst, efax_mem_host(), len, EFAX_MR_WRITE_DST))) return rc;
    if ((rc = efax_mr_exchange(&r->dst.mr, &r->boot))) return rc;
    /* a sample holds nnic + 1 counter sets: one is in its struct */
    r->slen = sizeof(efaxb__rails_sample) + (size_t)r->nnic * sizeof(efax_os_counters);
    r->xs = (efax_xfer *)calloc(2 * (size_t)r->d.window, sizeof *r->xs);
    r->ex = (efax_expect *)calloc((size_t)r->d.window, sizeof *r->ex);
    r->mine = (efaxb__rails_sample *)calloc(1, r->slen);
    r->all = (efaxb__rails_sample *)calloc(n, r->slen);
    r->paths = (efax_rail_result *)calloc(n * n * (size_t)(r->nnic + 1), sizeof *r->paths);
    return r->xs && r->ex && r->mine && r->all && r->paths ? 0 : -FI_ENOMEM;
}

/* Rank 0: opens --json and --csv (saying which cannot be) and prints the header. */
EFAX_PRIVATE int efaxb__rails_outputs(efax_rails *r) {
    if (r->d.json && !(r->jf = fopen(r->d.json, "w"))) {
        fprintf(stderr, "rails: --json %s: cannot open: %s\n", r->d.json, strerror(errno));
        return -EFAX_E_USAGE;
    }
    if (r->d.csv && !(r->cf = fopen(r->d.csv, "w"))) {
        fprintf(stderr, "rails: --csv %s: cannot open: %s\n", r->d.csv, strerror(errno));
        return -EFAX_E_USAGE;
    }
    printf("# efax rails %s: %d hosts, %d NIC(s) each (%s", EFAX_VERSION_STRING, r->boot.size, r->nnic,
           efax_ctx_provider(&r->ctx));
    for (int k = 0; k < r->nnic; k++) printf("%s%s", k ? "," : ": ", efax_rails_nic_name(r, k));
    printf("); %llu MiB per NIC per measurement (%llu x %d writes of %llu KiB), %d rounds, flags below "
           "%.0f%% of "
           "the median or above %.2g%% lost\n",
           (unsigned long long)((r->iters * (uint64_t)r->d.window * r->d.size) >> 20),
           (unsigned long long)r->iters, r->d.window, (unsigned long long)(r->d.size >> 10), r->d.rounds,
           100 * r->d.slow, 100 * r->d.lossy);
    fflush(stdout);
    return 0;
}

EFAX_API int efax_rails_open(efax_rails *r, const efax_rails_desc *d) {
    efax_boot_desc bd;
    uint64_t per;
    int rc;
    r->d = *d;
    if (d->size < 1 || d->window < 1 || d->rounds < 1 || d->rounds > EFAX_RAILS_MAX_ROUNDS) {
        fprintf(stderr, "rails: size and window must be 1 or more, rounds 1 to %d\n", EFAX_RAILS_MAX_ROUNDS);
        return -EFAX_E_USAGE;
    }
    memset(&bd, 0, sizeof bd);
    if ((rc = efax_boot_init(&r->boot, &bd))) return rc;
    r->booted = true;
    if (r->boot.size < 2) {
        fprintf(stderr,
                "rails: needs two hosts or more (one rank each): mpirun -H a,b --map-by node ./rails\n");
        return -EFAX_E_USAGE;
    }
    if ((rc = efaxb__rails_setup(r))) return rc;
    if (!r->d.bytes) {
        double line = efaxb__rails_line(r, 0);
        r->d.bytes = line > 0 ? (uint64_t)(line * 1e9 / 8 * 0.5) : 256ull << 20;
        if (r->d.bytes < 8ull << 20) r->d.bytes = 8ull << 20;
    }
    per = r->d.size * (uint64_t)r->d.window;
    r->iters = (r->d.bytes + per - 1) / per;
    return r->boot.rank == 0 ? efaxb__rails_outputs(r) : 0;
}

EFAX_API int efax_rails_warmup(efax_rails *r) {
    int rc = 0;
    for (int a = 0; a < r->boot.size && !rc; a++)
        for (int b = 0; b < r->boot.size && !rc; b++)
            for (int k = 0; k < r->nnic && !rc && a != b; k++) rc = efax_rails_measure(r, a, b, k, 2, -1);
    return rc;
}

EFAX_API int efax_rails_rounds(efax_rails *r) {
    int rc = 0, n = r->nnic;
    for (int round = 0; round < r->d.rounds && !rc; round++)
        for (int a = 0; a < r->boot.size && !rc; a++)
            for (int b = 0; b < r->boot.size && !rc; b++) {
                if (a == b) continue;
                for (int j = 0; j <= n && !rc; j++) {
                    int nic = round % 2 ? (j == 0 ? EFAX_RAILS_ALL : n - j) : (j == n ? EFAX_RAILS_ALL : j);
                    /* every NIC at once: each moves as much as alone */
                    uint64_t iters = nic == EFAX_RAILS_ALL ? r->iters * (uint64_t)n : r->iters;
                    rc = efax_rails_measure(r, a, b, nic, iters, round);
                }
            }
    return rc;
}

EFAX_API int efax_rails_confirm(efax_rails *r) {
    size_t pairs = (size_t)r->boot.size * (size_t)r->boot.size;
    int *redo = (int *)calloc(pairs, sizeof(int));
    int *all = (int *)calloc(pairs * (size_t)r->boot.size, sizeof(int)); /* every rank's list */
    int rc = redo && all ? 0 : -FI_ENOMEM;
    /* rank 0 alone holds the rails' results, so it decides which directions run again */
    if (!rc && r->boot.rank == 0 && efaxb__rails_judge(r))
        for (int i = 0; i < r->npath; i++)
            if (r->paths[i].slow) redo[r->paths[i].from * r->boot.size + r->paths[i].to] = 1;
    /* rank 0's list, to every rank (the others' are empty) */
    if (!rc) rc = efax_boot_allgather(&r->boot, redo, pairs * sizeof(int), all, -1);
    for (int a = 0; a < r->boot.size && !rc; a++)
        for (int b = 0; b < r->boot.size && !rc; b++) {
            if (!all[a * r->boot.size + b]) continue;
            for (int k = 0; k < r->nnic && !rc; k++)
                rc = efax_rails_measure(r, a, b, k, r->iters, r->d.rounds);
        }
    free(redo);
    free(all);
    return rc;
}

EFAX_API int efax_rails_verdicts(efax_rails *r, int *flagged) {
    int64_t sum = 0;
    int rc = efax_boot_sum(&r->boot, r->boot.rank == 0 ? efaxb__rails_report(r) : 0, &sum, -1);
    *flagged = rc ? 0 : (int)sum;
    return rc;
}

EFAX_API int efax_rails_close(efax_rails *r, int rc, int flagged) {
    if (r->jf) fclose(r->jf);
    if (r->cf) fclose(r->cf);
    r->jf = r->cf = NULL;
    efax_buf_free(&r->dst);
    efax_buf_free(&r->src);
    efax_ctx_deinit(&r->ctx);
    if (r->booted) efax_boot_deinit(&r->boot);
    r->booted = false;
    free(r->xs);
    free(r->ex);
    free(r->mine);
    free(r->all);
    free(r->paths);
    r->xs = NULL;
    r->ex = NULL;
    r->mine = r->all = NULL;
    r->paths = NULL;
    if (rc) return efax_exit_code(rc);
    return flagged && r->d.expect_healthy ? 1 : 0;
}

// >>doctor (implementation) ------------------------------------------------------------------

#define EFAXB__DOC_PACKED 49152 /* one host's findings as text, for the gather */

EFAX_API void efax_doctor_add(efax_doctor *d, int level, const char *check, const char *subject,
                              const char *fix, const char *fmt, ...) {
    va_list ap;
    efax_finding *f;
    if (d->n >= EFAX_DOCTOR_MAX_FINDINGS) return;
    f = &d->f[d->n++];
    f->level = level;
    snprintf(f->check, sizeof f->check, "%s", check);
    snprintf(f->subject, sizeof f->subject, "%s", subject ? subject : "");
    /* a fix only for a fault: a PASS or an INFO has nothing to mend */
    snprintf(f->fix, sizeof f->fix, "%s",
             fix && (level == EFAX_DOCTOR_WARN || level == EFAX_DOCTOR_FAIL) ? fix : "");
    va_start(ap, fmt);
    vsnprintf(f->text, sizeof f->text, fmt, ap);
    va_end(ap);
}

EFAX_API const char *efax_doctor_level_name(int level) {
    static const char *const names[EFAX_DOCTOR_LEVELS] = {"PASS", "INFO", "WARN", "FAIL", "SKIP"};
    return level >= 0 && level < EFAX_DOCTOR_LEVELS ? names[level] : "?";
}

EFAX_PRIVATE double efaxb__doc_ms_since(uint64_t t0) { return (double)(efax_now_ns() - t0) / 1e6; }

/* ---------------------------------------------------------------------------------- libfabric */

EFAX_PRIVATE void efaxb__doc_check_libfabric(efax_doctor *d, char *provs, size_t plen, char *pick,
                                             size_t klen) {
    uint32_t rt = fi_version(), asked = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
    char lib[PATH_MAX] = "?", line[PATH_MAX + 128];
    FILE *maps = fopen("/proc/self/maps", "r");
    int rc;
    while (maps && fgets(line, sizeof line, maps)) { /* the file the library was mapped from */
        char *at = strchr(line, '/');
        if (!at || !strstr(at, "/libfabric.so")) continue;
        snprintf(lib, sizeof lib, "%s", at);
        lib[strcspn(lib, "\n")] = 0;
        break;
    }
    if (maps) fclose(maps);
    if (FI_VERSION_LT(rt, asked))
        efax_doctor_add(
            d, EFAX_DOCTOR_FAIL, "libfabric", "",
            "run the libfabric this efax was built against (LD_LIBRARY_PATH), or rebuild against this one",
            "libfabric %u.%u loaded (%s) is older than the headers efax was built with (%u.%u): fi_getinfo "
            "refuses API %u.%u",
            FI_MAJOR(rt), FI_MINOR(rt), lib, FI_MAJOR_VERSION, FI_MINOR_VERSION, FI_MAJOR_VERSION,
            FI_MINOR_VERSION);
    else
        efax_doctor_add(
            d, EFAX_DOCTOR_PASS, "libfabric", "", NULL,
            "libfabric %u.%u loaded (%s); efax %s built against headers %u.%u, asks for API %u.%u",
            FI_MAJOR(rt), FI_MINOR(rt), lib, EFAX_VERSION_STRING, FI_MAJOR_VERSION, FI_MINOR_VERSION,
            FI_MAJOR_VERSION, FI_MINOR_VERSION);
    provs[0] = pick[0] = 0;
    if ((rc = efax_topo_providers(provs, plen)) || !provs[0]) {
        efax_doctor_add(
            d, EFAX_DOCTOR_FAIL, "providers", "",
            "install libfabric (Debian: apt-get install libfabric1 libfabric-bin; AWS: the EFA installer)",
            "no libfabric provider offers RDM endpoints with RMA here%s%s", rc ? ": " : "",
            rc ? efax_strerror(rc) : "");
        return;
    }
    rc = efax_topo_pick_provider(d->provider, pick, klen);
    if (rc)
        efax_doctor_add(d, EFAX_DOCTOR_FAIL, "providers", "",
                        "name one of the providers listed (--provider) or unset EFAX_PROVIDER",
                        "providers with RDM + RMA: %s; but '%s' is not one of them (%s)", provs,
                        d->provider               ? d->provider
                        : getenv("EFAX_PROVIDER") ? getenv("EFAX_PROVIDER")
                                                  : "?",
                        efax_strerror(rc));
    else
        efax_doctor_add(d, EFAX_DOCTOR_PASS, "providers", "", NULL,
                        "providers with RDM + RMA: %s; efax uses %s (%s)", provs, pick,
                        d->provider               ? "--provider"
                        : getenv("EFAX_PROVIDER") ? "EFAX_PROVIDER"
                                                  : "efa, else tcp, else shm");
}

/* EFA devices the kernel has (vendor 0x1d0f under /sys/class/infiniband) against what libfabric offers. */
EFAX_PRIVATE void efaxb__doc_check_efa(efax_doctor *d) {
    char dir[PATH_MAX], names[512], dev[PATH_MAX];
    int nefa = 0,
        n = efax_topo_efa_devices(names, sizeof names); /* vendor 0x1d0f under /sys/class/infiniband */
    bool efa_prov =
        efax_topo_list("efa", NULL, 0, &nefa) == 0 && nefa > 0; /* libfabric's efa sees a device */
    snprintf(dir, sizeof dir, "%s/sys/class/infiniband", efax_topo_sysfs_root());
    snprintf(dev, sizeof dev, "%s/dev/infiniband", efax_topo_sysfs_root());
    if (n && !efa_prov)
        efax_doctor_add(
            d, EFAX_DOCTOR_FAIL, "efa", "",
            access(dev, F_OK)
                ? "pass the EFA devices into the container (docker run "
                  "--device=/dev/infiniband/uverbs0 ..., Kubernetes: the EFA device plugin's "
                  "vpc.amazonaws.com/efa resource)"
                : "use the EFA installer's libfabric (LD_LIBRARY_PATH=/opt/amazon/efa/lib, or build "
                  "efax with make LIBFABRIC=/opt/amazon/efa), or rebuild libfabric with --enable-efa",
            "%d EFA device(s) here (%s) but the libfabric loaded offers no efa provider%s: efax refuses to "
            "run "
            "(it would measure the ENA through tcp) unless a provider is named (--provider tcp)",
            n, names,
            access(dev, F_OK) ? " and /dev/infiniband is missing (a container without the devices?)" : "");
    else if (n)
        efax_doctor_add(d, EFAX_DOCTOR_PASS, "efa", "", NULL,
                        "%d EFA device(s) (%s), and libfabric's efa provider sees them", n, names);
    else
        efax_doctor_add(
            d, d->expect_efa ? EFAX_DOCTOR_FAIL : EFAX_DOCTOR_SKIP, "efa", "",
            d->expect_efa ? "run on an instance with EFA attached (p4d, p5, ...), with the EFA driver loaded"
                          : NULL,
            "no EFA device here (none with vendor 0x1d0f under %s): nothing this machine runs is EFA, and "
            "its tcp/shm "
            "numbers are not EFA numbers",
            dir);
    if (FI_VERSION_LT(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), FI_VERSION(1, 18)))
        efax_doctor_add(
            d, n ? EFAX_DOCTOR_WARN : EFAX_DOCTOR_INFO, "api", "",
            "build efax against libfabric >= 1.18 headers (the EFA installer's: make "
            "LIBFABRIC=/opt/amazon/efa)",
            "efax asks for API %u.%u: below 1.18 efa turns device RDMA off by default on first-generation "
            "EFA devices "
            "and never lets the provider call CUDA (prov/efa rdm/efa_rdm_util.c efa_rdm_get_use_device_rdma, "
            "efa_user_info.c)%s",
            FI_MAJOR_VERSION, FI_MINOR_VERSION,
            n ? "" : "; no EFA here, so it matters only where you take this build");
}

/* ---------------------------------------------------------------------------------------- NICs */

/* One write of len bytes from src to dst, both this rank's, through the context's first NIC:
   announced, waited for, checked byte by byte. Returns 0, -EFAX_E_VERIFY or the error. */
EFAX_PRIVATE int efaxb__doc_write_once(efax_ctx *ctx, efax_buf *src, efax_buf *dst, uint64_t len,
                                       uint32_t seq, int timeout_ms, double *us) {
    efax_write_desc w;
    efax_xfer x;
    efax_expect e;
    uint64_t t0;
    int rc;
    memset(&w, 0, sizeof w);
    memset(&x, 0, sizeof x);
    w.from = w.to = efax_ctx_rank(ctx);
    w.src = &src->mr;
    w.dst = &dst->mr;
    w.size = len;
    w.tag = 1;
    w.seq = seq;
    src->ops->fill(src, 0, len, w.from, seq);
    dst->ops->poison(dst, 0, len);
    t0 = efax_now_ns();
    rc = efax_write(ctx, &x, &w, NULL);
    if (!rc) rc = efax_expect_write(ctx, &e, &w);
    if (!rc) rc = efax_expect_wait(ctx, &e, timeout_ms);
    if (!rc) rc = efax_wait(ctx, &x, timeout_ms);
    *us = (double)(efax_now_ns() - t0) / 1e3;
    if (!rc && dst->ops->check(dst, 0, len, w.from, seq)) rc = -EFAX_E_VERIFY;
    return rc;
}

/* What one NIC (or GPU-and-NIC) pair did from cold: open, connect, register, first write, then warm. */
typedef struct efaxb__doc_cold {
    double open_ms, connect_ms, reg_ms, first_us, warm_us;
    char path[32];    /* how the buffer reached the NIC (host, dmabuf, hmem, staged) */
    efax_caps caps;   /* what the context found the provider can do (efax_ctx_caps) */
    char failed[320]; /* which step failed and why; "" when none did */
} efaxb__doc_cold;

/* Opens a context on NIC `nic` of `provider` alone (with cd's other fields), connects it to this
   process alone, registers two buffers of `kind`, and writes len bytes between them: once cold,
   then five times warm (best). */
EFAX_PRIVATE int efaxb__doc_cold_start(efax_doctor *d, efax_ctx_desc cd, const char *nic,
                                       const efax_mem_ops *kind, uint64_t len, efaxb__doc_cold *c) {
    efax_boot one;
    efax_boot_desc bd;
    efax_ctx ctx;
    efax_buf src, dst;
    uint64_t t0;
    int rc;
    memset(c, 0, sizeof *c);
    memset(&one, 0, sizeof one);
    memset(&ctx, 0, sizeof ctx);
    memset(&src, 0, sizeof src);
    memset(&dst, 0, sizeof dst);
    memset(&bd, 0, sizeof bd);
    bd.force = "single";
    bd.timeout_ms = d->timeout_ms;
    cd.nics = nic;
    cd.timeout_ms = d->timeout_ms;
    if ((rc = efax_boot_init(&one, &bd))) {
        snprintf(c->failed, sizeof c->failed, "a one-rank bootstrap failed: %s", efax_strerror(rc));
        return rc;
    }
    t0 = efax_now_ns();
    rc = efax_ctx_init(&ctx, &cd);
    c->open_ms = efaxb__doc_ms_since(t0);
    if (rc)
        snprintf(c->failed, sizeof c->failed, "opening it failed: %s", efax_strerror(rc));
    else
        c->caps = *efax_ctx_caps(&ctx);
    t0 = efax_now_ns();
    if (!rc && (rc = efax_ctx_connect(&ctx, &one)))
        snprintf(c->failed, sizeof c->failed, "connecting to itself failed: %s", efax_strerror(rc));
    c->connect_ms = efaxb__doc_ms_since(t0);
    t0 = efax_now_ns();
    if (!rc && (rc = efax_buf_alloc(&ctx, &src, kind, len, EFAX_MR_WRITE_SRC)) == 0)
        rc = efax_buf_alloc(&ctx, &dst, kind, len, EFAX_MR_WRITE_DST);
    c->reg_ms = efaxb__doc_ms_since(t0) / 2;
    if (rc && !c->failed[0])
        snprintf(c->failed, sizeof c->failed, "registering %s memory failed: %s", kind->name,
                 efax_strerror(rc));
    if (!rc) snprintf(c->path, sizeof c->path, "%s", dst.path);
    if (!rc && (rc = efax_mr_exchange(&dst.mr, &one)))
        snprintf(c->failed, sizeof c->failed, "exchanging its key failed: %s", efax_strerror(rc));
    if (!rc && (rc = efaxb__doc_write_once(&ctx, &src, &dst, len, 0, d->timeout_ms, &c->first_us)))
        snprintf(c->failed, sizeof c->failed, "a %llu-byte write to itself %s: %s", (unsigned long long)len,
                 rc == -EFAX_E_VERIFY ? "landed with wrong bytes" : "did not land", efax_strerror(rc));
    c->warm_us = 0;
    for (uint32_t i = 1; !rc && i <= 5; i++) {
        double us;
        if ((rc = efaxb__doc_write_once(&ctx, &src, &dst, len, i, d->timeout_ms, &us)))
            snprintf(c->failed, sizeof c->failed, "write %u of %llu bytes to itself failed: %s", i,
                     (unsigned long long)len, efax_strerror(rc));
        else if (c->warm_us == 0 || us < c->warm_us)
            c->warm_us = us;
    }
    efax_buf_free(&dst);
    efax_buf_free(&src);
    efax_ctx_deinit(&ctx);
    efax_boot_deinit(&one);
    return rc;
}

/* The NUMA node of a CPU (<sysfs>/devices/system/cpu/cpuN/nodeK), or -1. */
EFAX_PRIVATE int efaxb__doc_cpu_node(int cpu) {
    char path[PATH_MAX];
    for (int k = 0; k < 64; k++) {
        snprintf(path, sizeof path, "%s/sys/devices/system/cpu/cpu%d/node%d", efax_topo_sysfs_root(), cpu, k);
        if (access(path, F_OK) == 0) return k;
    }
    return -1;
}

/* The NUMA node this process is bound to (every CPU it may run on in one node), or -1. */
EFAX_PRIVATE int efaxb__doc_my_numa(void) {
    cpu_set_t set;
    int node = -1;
    if (sched_getaffinity(0, sizeof set, &set)) return -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        int mine;
        if (!CPU_ISSET(cpu, &set)) continue;
        mine = efaxb__doc_cpu_node(cpu);
        if (mine < 0 || (node >= 0 && mine != node)) return -1;
        node = mine;
    }
    return node;
}

/* How many NUMA nodes the host has (<sysfs>/devices/system/node/nodeK). */
EFAX_PRIVATE int efaxb__doc_numa_nodes(void) {
    char path[PATH_MAX];
    int n = 0;
    for (int k = 0; k < 64; k++) {
        snprintf(path, sizeof path, "%s/sys/devices/system/node/node%d", efax_topo_sysfs_root(), k);
        if (access(path, F_OK) == 0) n++;
    }
    return n;
}

EFAX_PRIVATE void efaxb__doc_check_nic(efax_doctor *d, const char *prov, const efax_nic_info *ni, int node,
                                       int nodes) {
    char mr[96], mm[24], gb[48], when[128], sub[48];
    efax_ctx_desc cd;
    efax_os_counters oc, before;
    uint64_t lost = 0, sent = 0;
    int have_before;
    char moved[400];
    efaxb__doc_cold c;
    snprintf(sub, sizeof sub, "%s", ni->name);
    if (ni->max_msg_size >= (1ull << 62))
        snprintf(mm, sizeof mm, "unlimited");
    else
        efax_fmt_size(ni->max_msg_size, mm, sizeof mm);
    if (ni->link_gbps > 0)
        snprintf(gb, sizeof gb, "link %.4g Gbps", ni->link_gbps);
    else
        snprintf(gb, sizeof gb, "link speed unknown");
    efax_doctor_add(
        d, EFAX_DOCTOR_INFO, "nic", sub, NULL,
        "%s: PCI %s, NUMA %d, %s, mr_mode %s, max_msg %s, inject %zu B, cq_data %zu B, FI_HMEM %s, "
        "tx/rx queues %zu/%zu",
        ni->provider, ni->pci[0] ? ni->pci : "-", ni->numa, gb,
        efaxb__mr_mode_str(mr, sizeof mr, ni->mr_mode), mm, ni->inject_size, ni->cq_data_size,
        ni->hmem ? "yes" : "no", ni->tx_size, ni->rx_size);
    if (ni->cq_data_size < 4)
        efax_doctor_add(
            d, EFAX_DOCTOR_FAIL, "nic", sub, "use a provider with 4 bytes of CQ data (efa, tcp, shm)",
            "carries %zu bytes of immediate data; efax needs 4 (rank, tag, sequence)", ni->cq_data_size);
    if (getenv("EFAX_LINE_GBPS") && strtod(getenv("EFAX_LINE_GBPS"), NULL) > 0)
        efax_doctor_add(d, EFAX_DOCTOR_INFO, "nic", sub, NULL,
                        "line rate %s Gbps, as EFAX_LINE_GBPS says (the provider's: %s)",
                        getenv("EFAX_LINE_GBPS"), ni->link_gbps > 0 ? gb : "none");
    else if (ni->link_gbps <= 0 && d->prov == EFAX_PROV_SHM)
        efax_doctor_add(
            d, EFAX_DOCTOR_INFO, "nic", sub, NULL,
            "shared memory has no line rate: its results are held against memcpy (./info --memcpy)");
    else if (ni->link_gbps <= 0)
        efax_doctor_add(d, EFAX_DOCTOR_WARN, "nic", sub,
                        "pass --line-rate GBPS (or EFAX_LINE_GBPS) with the rate the link really has",
                        "no line rate known (%s): results show '-' for %% of line",
                        ni->pci[0] ? "the provider and sysfs report none"
                                   : "a virtual interface (veth, bridge, tunnel) has no rate of its own");
    if (nodes > 1 && ni->numa >= 0 && node >= 0 && node != ni->numa)
        efax_doctor_add(
            d, EFAX_DOCTOR_WARN, "nic", sub,
            "bind each rank to the NUMA node of its NICs (mpirun --bind-to numa; srun --cpu-bind)",
            "sits on NUMA node %d but this process runs on node %d: every byte crosses the socket link "
            "(Mooncake's "
            "EFA notes: 20 Gbps across, 90 near)",
            ni->numa, node);
    memset(&cd, 0, sizeof cd);
    cd.provider = prov;
    have_before = efax_os_counters_nic(ni, &before) == 0;
    efaxb__doc_cold_start(d, cd, ni->name, efax_mem_host(), 65536, &c);
    if (c.failed[0]) {
        efax_doctor_add(d, EFAX_DOCTOR_FAIL, "nic", sub,
                        "run with FI_LOG_LEVEL=warn to see the provider's reason; check the interface is up "
                        "(ip link) and, on EFA, the security group allows all traffic to itself",
                        "%s", c.failed);
    } else {
        snprintf(when, sizeof when, "open %.1f ms, connect %.2f ms, register %.2f ms", c.open_ms,
                 c.connect_ms, c.reg_ms);
        efax_doctor_add(
            d, EFAX_DOCTOR_PASS, "nic", sub, NULL,
            "a 64 KiB write to itself landed, every byte right: first %.0f us (cold), then %.0f us; "
            "%s",
            c.first_us, c.warm_us, when);
    }
    if (!c.failed[0] && d->prov == EFAX_PROV_EFA) { /* efax_caps.emulated_write, from its endpoint */
        if (c.caps.emulated_write == 1)
            efax_doctor_add(
                d, EFAX_DOCTOR_WARN, "nic", sub,
                "use an instance whose EFA does RDMA write (p5, p5en, p6) with libfabric >= 1.18 API; "
                "FI_EFA_USE_DEVICE_RDMA must not be 0",
                "efa EMULATES RDMA writes here (FI_OPT_EFA_EMULATED_WRITE): writes "
                "move as messages, and WRITE results are not RDMA writes");
        else if (c.caps.emulated_write == 0)
            efax_doctor_add(d, EFAX_DOCTOR_PASS, "nic", sub, NULL,
                            "efa does RDMA writes in the device (not emulated)");
        else
            efax_doctor_add(
                d, EFAX_DOCTOR_SKIP, "nic", sub, NULL,
                "whether efa emulates writes: this libfabric cannot say (FI_OPT_EFA_EMULATED_WRITE, "
                "1.18+)");
    }
    if (efax_os_counters_nic(ni, &oc) == 0) {
        efax_os_counters delta;
        if (have_before && oc.lifespan_ms > 0) { /* the kernel's cached values: read them again once stale */
            struct timespec ts = {0, (long)(oc.lifespan_ms > 999 ? 999 : oc.lifespan_ms + 1) * 1000000L};
            nanosleep(&ts, NULL);
            efax_os_counters_nic(ni, &oc);
        }
        if (have_before) efax_os_counters_delta(&before, &oc, &delta);
        if (have_before && efax_os_counters_events(&delta, moved, sizeof moved))
            efax_doctor_add(
                d, EFAX_DOCTOR_WARN, "counters", sub,
                "look at the NIC and its peers: run the rail finder (rails) between hosts; on EFA check the "
                "security group and the instance's health",
                "during the doctor's own writes to itself: %s", moved);
        if (efax_os_counters_events(&oc, moved, sizeof moved))
            efax_doctor_add(d, EFAX_DOCTOR_INFO, "counters", sub, NULL, "since boot (%s %s): %s", oc.source,
                            oc.dev, moved);
        efax_os_counters_loss(&oc, &lost, &sent);
        if (sent >= 10000 && lost * 100 > sent)
            efax_doctor_add(
                d, EFAX_DOCTOR_WARN, "counters", sub,
                "look for a bad cable, port or peer: run the rail finder (write --rails) between hosts",
                "since boot the OS counts %llu of %llu packets sent again or dropped (%.1f%%; %s %s)",
                (unsigned long long)lost, (unsigned long long)sent, 100.0 * (double)lost / (double)sent,
                oc.source, oc.dev);
        else
            efax_doctor_add(d, EFAX_DOCTOR_PASS, "counters", sub, NULL,
                            "the OS counts this NIC (%s %s: %d counters; since boot %llu of %llu packets "
                            "resent or dropped); results carry them per row",
                            oc.source, oc.dev, oc.n, (unsigned long long)lost, (unsigned long long)sent);
    } else {
        efax_doctor_add(d, EFAX_DOCTOR_SKIP, "counters", sub, NULL,
                        "the OS keeps no counters efax can read for it (%s)",
                        d->prov == EFAX_PROV_SHM ? "shared memory has no device"
                                                 : "no hw_counters or interface statistics by this name");
    }
}

EFAX_PRIVATE void efaxb__doc_check_nics(efax_doctor *d, const char *prov) {
    efax_ctx_desc cd;
    efax_ctx ctx;
    efax_nic_info nics[EFAX_MAX_NICS];
    int rc, n = 0, node = efaxb__doc_my_numa(), nodes = efaxb__doc_numa_nodes();
    size_t u;
    memset(&cd, 0, sizeof cd);
    memset(&ctx, 0, sizeof ctx);
    cd.provider = prov;
    cd.nics = d->nics;
    if ((rc = efax_ctx_init(&ctx, &cd))) {
        efax_doctor_add(d, EFAX_DOCTOR_FAIL, "nics", "",
                        "see the message above; --nics NAME,... picks NICs by name (./info lists them)",
                        "efax cannot open the NICs of %s%s%s: %s", prov, d->nics ? " named " : "",
                        d->nics ? d->nics : "", efax_strerror(rc));
        efax_ctx_deinit(&ctx);
        return;
    }
    n = efax_ctx_nnics(&ctx);
    d->prov = efax_ctx_caps(&ctx)->prov;
    for (int i = 0; i < n; i++) nics[i] = *efax_ctx_nic(&ctx, i);
    u = strlen(d->facts);
    snprintf(d->facts + u, sizeof d->facts - u, "; provider %s; NICs", efax_ctx_provider(&ctx));
    for (int i = 0; i < n; i++) {
        u = strlen(d->facts);
        snprintf(d->facts + u, sizeof d->facts - u, "%s%s", i ? "," : " ", nics[i].name);
    }
    efax_doctor_add(d, EFAX_DOCTOR_INFO, "nics", "", NULL, "efax opens %d NIC(s) of %s: %s (%s)", n,
                    efax_ctx_provider(&ctx), strstr(d->facts, "NICs ") + 5,
                    efax_ctx_nic_choice(&ctx)[0] ? efax_ctx_nic_choice(&ctx) : "-");
    if (d->prov == EFAX_PROV_TCP || d->prov == EFAX_PROV_SHM)
        efax_doctor_add(d, EFAX_DOCTOR_INFO, "nics", "", NULL,
                        "%s carries RMA in software (%s): nothing it moves is RDMA, and its numbers say what "
                        "this host's %s does, not what a NIC does",
                        prov, d->prov == EFAX_PROV_TCP ? "sockets" : "shared-memory copies",
                        d->prov == EFAX_PROV_TCP ? "network stack" : "memory");
    efax_ctx_deinit(&ctx);
    for (int i = 0; i < n; i++) efaxb__doc_check_nic(d, prov, &nics[i], node, nodes);
}

/* ---------------------------------------------------------------------------------------- host */

EFAX_PRIVATE void efaxb__doc_check_host(efax_doctor *d) {
    struct rlimit rl;
    char buf[256], thp[128];
    bool efa = d->prov == EFAX_PROV_EFA;
    long total = -1, freep = -1, sz = -1;
    FILE *fp;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
        char cur[32];
        if (rl.rlim_cur == RLIM_INFINITY)
            snprintf(cur, sizeof cur, "unlimited");
        else
            efax_fmt_size((uint64_t)rl.rlim_cur, cur, sizeof cur);
        if (rl.rlim_cur == RLIM_INFINITY)
            efax_doctor_add(d, EFAX_DOCTOR_PASS, "memlock", "", NULL, "locked-memory limit: unlimited");
        else
            efax_doctor_add(d, efa ? EFAX_DOCTOR_FAIL : EFAX_DOCTOR_INFO, "memlock", "",
                            "ulimit -l unlimited (/etc/security/limits.d; Slurm: PropagateResourceLimits; "
                            "docker run --ulimit memlock=-1)",
                            "locked-memory limit: %s%s", cur,
                            efa ? ": efa pins every registered buffer, "
                                  "and registrations beyond it fail"
                                : " (tcp and shm pin nothing; EFA needs it unlimited)");
    }
    if ((fp = fopen("/proc/meminfo", "r"))) {
        while (fgets(buf, sizeof buf, fp)) {
            sscanf(buf, "HugePages_Total: %ld", &total);
            sscanf(buf, "HugePages_Free: %ld", &freep);
            sscanf(buf, "Hugepagesize: %ld", &sz);
        }
        fclose(fp);
    }
    if (efax_read_sysfs("/sys/kernel/mm/transparent_hugepage/enabled", thp, sizeof thp))
        snprintf(thp, sizeof thp, "unknown");
    efax_doctor_add(
        d, EFAX_DOCTOR_INFO, "hugepages", "", NULL,
        "transparent huge pages: %s; reserved huge pages: %ld of %ld kB (%ld free); efax asks "
        "for transparent huge pages for host buffers of 2 MiB and more unless a NIC is tcp (EFAX_HUGE_PAGES)",
        thp, total, sz, freep);
    if (efax_read_sysfs("/sys/devices/system/clocksource/clocksource0/current_clocksource", buf, sizeof buf))
        snprintf(buf, sizeof buf, "unknown");
    {
        char line[4096];
        bool constant = false, nonstop = false, x86 = false;
        if ((fp = fopen("/proc/cpuinfo", "r"))) {
            while (fgets(line, sizeof line, fp))
                if (!strncmp(line, "flags", 5)) {
                    x86 = true;
                    constant = strstr(line, " constant_tsc") != NULL;
                    nonstop = strstr(line, " nonstop_tsc") != NULL;
                    break;
                }
            fclose(fp);
        }
        if (x86 && !(constant && nonstop))
            efax_doctor_add(
                d, EFAX_DOCTOR_WARN, "clock", "",
                "run on a host whose CPUs have an invariant TSC (constant_tsc and nonstop_tsc)",
                "clock source %s; the CPU's time-stamp counter is not invariant (constant_tsc %s, "
                "nonstop_tsc %s): efax's "
                "loop timer (efax_ticks) may drift",
                buf, constant ? "yes" : "no", nonstop ? "yes" : "no");
        else
            efax_doctor_add(d, EFAX_DOCTOR_PASS, "clock", "", NULL, "clock source %s%s", buf,
                            x86 ? "; invariant TSC (efax_ticks times loops with it)" : "");
    }
    {
        int nodes = efaxb__doc_numa_nodes(), node = efaxb__doc_my_numa();
        efax_doctor_add(d, EFAX_DOCTOR_INFO, "cpu", "", NULL, "%ld CPUs, %d NUMA node(s)%s",
                        sysconf(_SC_NPROCESSORS_ONLN), nodes,
                        nodes < 2   ? ""
                        : node >= 0 ? "; this process is bound to one"
                                    : "; this process may run on every one (unbound)");
    }
}

/* The distance between cores: how far apart two CPUs are, and whether that holds still. A cache
   line handed back and forth between two threads, each pinned to one CPU, a number of times a
   sample, the samples spaced apart so that they span a while. On a host whose CPUs are its own the
   samples agree. On a cloud VM the hypervisor may run two vCPUs on cores that share a cache at
   times and on cores that do not at others, switching while a program runs, and every
   small-message figure (shm's and tcp's rates, a ping-pong's latency) swings with it, for efax and
   libfabric's own tools alike. That is worth a line before a user compares figures.
   A sample during which either thread was preempted (its nonvoluntary context switches moved:
   another program wanted the CPU) measures the scheduler instead, and is left out; the guest sees
   no such switch when the hypervisor moves a vCPU, so those samples stay. */
#define EFAXB__DOC_BOUNCE_ROUNDS 1000
#define EFAXB__DOC_BOUNCE_SAMPLES 25
#define EFAXB__DOC_BOUNCE_GAP_MS 40

typedef struct efaxb__doc_bounce {
    int turn; /* 1: the partner's to answer; 0: the prober's; 2: the partner stops */
    int cpu;  /* the partner's */
    int tid;  /* the partner's thread id, once it runs there (0 before; -1: it could not) */
    uint64_t deadline;
    bool late; /* the partner gave up waiting */
} efaxb__doc_bounce;

typedef struct efaxb__doc_bounce_run {
    double ns[EFAXB__DOC_BOUNCE_SAMPLES]; /* the undisturbed samples' ns per round trip, sorted */
    int n;                                /* how many */
    int preempted;                        /* samples left out */
} efaxb__doc_bounce_run;

EFAX_PRIVATE bool efaxb__doc_pin_me(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

/* A thread's nonvoluntary context switches so far (/proc), or -1 when unknown. */
EFAX_PRIVATE long efaxb__doc_preemptions(int tid) {
    char path[64], line[128];
    long v = -1;
    FILE *fp;
    snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
    if (!(fp = fopen(path, "r"))) return -1;
    while (v < 0 && fgets(line, sizeof line, fp)) sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v);
    fclose(fp);
    return v;
}

/* Spins until *turn is no longer `from`; false once the deadline passed. */
EFAX_PRIVATE bool efaxb__doc_await_turn(int *turn, int from, uint64_t deadline) {
    unsigned spins = 0;
    while (__atomic_load_n(turn, __ATOMIC_ACQUIRE) == from)
        if ((++spins & 4095) == 0 && efax_now_ns() > deadline) return false;
    return true;
}

EFAX_PRIVATE void *efaxb__doc_partner(void *arg) {
    efaxb__doc_bounce *b = (efaxb__doc_bounce *)arg;
    bool pinned = efaxb__doc_pin_me(b->cpu);
    __atomic_store_n(&b->tid, pinned ? (int)syscall(SYS_gettid) : -1, __ATOMIC_RELEASE);
    b->late = !pinned;
    while (!b->late) {
        if (!efaxb__doc_await_turn(&b->turn, 0, b->deadline)) b->late = true;
        if (b->late || __atomic_load_n(&b->turn, __ATOMIC_ACQUIRE) == 2) break;
        __atomic_store_n(&b->turn, 0, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* Round trips of a cache line between CPUs a and b: EFAXB__DOC_BOUNCE_SAMPLES samples into *out. Returns 0,
   or an errno-style reason (EINVAL: a CPU this process may not run on; ETIMEDOUT). */
EFAX_PRIVATE int efaxb__doc_bounce_pair(int a, int b, int timeout_ms, efaxb__doc_bounce_run *out) {
    struct timespec gap = {0, EFAXB__DOC_BOUNCE_GAP_MS * 1000000L};
    int me = (int)syscall(SYS_gettid), tid = 0, rc = 0;
    efaxb__doc_bounce bo;
    pthread_t t;
    memset(out, 0, sizeof *out);
    memset(&bo, 0, sizeof bo);
    bo.cpu = b;
    bo.deadline = efax_deadline_ns(timeout_ms);
    if (!efaxb__doc_pin_me(a) || !efaxb__doc_pin_me(b) || !efaxb__doc_pin_me(a)) return EINVAL;
    if (pthread_create(&t, NULL, efaxb__doc_partner, &bo)) return EAGAIN;
    do /* the partner says where it runs, or that it cannot */
        tid = __atomic_load_n(&bo.tid, __ATOMIC_ACQUIRE);
    while (!tid && efax_now_ns() < bo.deadline);
    if (tid <= 0) rc = tid < 0 ? EINVAL : ETIMEDOUT;
    for (int s = 0; s < EFAXB__DOC_BOUNCE_SAMPLES && !rc; s++) {
        long before = efaxb__doc_preemptions(me) + efaxb__doc_preemptions(tid), after;
        uint64_t t0 = efax_now_ns();
        for (int i = 0; i < EFAXB__DOC_BOUNCE_ROUNDS && !rc; i++) {
            __atomic_store_n(&bo.turn, 1, __ATOMIC_RELEASE);
            if (!efaxb__doc_await_turn(&bo.turn, 1, bo.deadline)) rc = ETIMEDOUT;
        }
        after = efaxb__doc_preemptions(me) + efaxb__doc_preemptions(tid);
        if (after != before)
            out->preempted++;
        else
            out->ns[out->n++] = (double)(efax_now_ns() - t0) / EFAXB__DOC_BOUNCE_ROUNDS;
        if (!rc) nanosleep(&gap, NULL);
    }
    __atomic_store_n(&bo.turn, 2, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    if (!rc && bo.late) rc = ETIMEDOUT;
    qsort(out->ns, (size_t)out->n, sizeof *out->ns, efaxb__cmp_double);
    return rc;
}

/* One pair's finding: steady (INFO), moving (WARN), or too busy to tell (WARN). */
EFAX_PRIVATE void efaxb__doc_cores_finding(efax_doctor *d, int a, int b, const efaxb__doc_bounce_run *r) {
    char sub[48];
    double secs = EFAXB__DOC_BOUNCE_SAMPLES * EFAXB__DOC_BOUNCE_GAP_MS / 1000.0, lo, hi, mid;
    snprintf(sub, sizeof sub, "%d,%d", a, b);
    if (r->n < EFAXB__DOC_BOUNCE_SAMPLES / 2) {
        efax_doctor_add(
            d, EFAX_DOCTOR_WARN, "cores", sub,
            "run benchmarks on an idle host: what else runs here takes turns with them (top, or uptime's "
            "load average)",
            "CPUs %d and %d: other programs took them from the probe in %d of %d samples over %.1f s "
            "(its threads were preempted), so the distance between them cannot be told, and any figure "
            "measured now includes waiting for the CPU",
            a, b, r->preempted, EFAXB__DOC_BOUNCE_SAMPLES, secs);
        return;
    }
    lo = r->ns[r->n / 10];
    hi = r->ns[r->n - 1 - r->n / 10];
    mid = r->ns[r->n / 2];
    if (hi >= 2 * lo)
        efax_doctor_add(
            d, EFAX_DOCTOR_WARN, "cores", sub,
            "compare figures only side by side, in interleaved rounds (bench.sh does, with the spread); "
            "for steady small-message figures use dedicated cores (bare metal, or pinned vCPUs)",
            "CPUs %d and %d hand a cache line back in %.0f ns at times and %.0f ns at others (10th and "
            "90th percentile of %d samples over %.1f s; median %.0f): the distance between them changes "
            "while a program runs (virtual CPUs moved between cores), and small-message rates and "
            "latencies here swing with it, for any tool",
            a, b, lo, hi, r->n, secs, mid);
    else
        efax_doctor_add(d, EFAX_DOCTOR_INFO, "cores", sub, NULL,
                        "CPUs %d and %d hand a cache line back in %.0f ns (median of %d samples over %.1f s; "
                        "10th-90th percentile %.0f-%.0f ns)",
                        a, b, mid, r->n, secs, lo, hi);
}

/* The pairs: this process's first CPU and the next one online (neighbours), and on a host of
   several NUMA nodes the first and the last CPU online (another node, most likely). Each is
   measured unbound from the launcher's pinning, which this thread sets back after. */
EFAX_PRIVATE void efaxb__doc_check_cores(efax_doctor *d) {
    cpu_set_t mine;
    int first = -1, pairs[2][2], np = 0, online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (pthread_getaffinity_np(pthread_self(), sizeof mine, &mine)) return;
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, &mine)) first = c;
    if (online < 2 || first < 0) {
        efax_doctor_add(d, EFAX_DOCTOR_SKIP, "cores", "", NULL,
                        "one CPU online: no distance between cores to measure");
        return;
    }
    pairs[np][0] = first;
    pairs[np++][1] = (first + 1) % online;
    if (efaxb__doc_numa_nodes() > 1 && efaxb__doc_cpu_node(online - 1) != efaxb__doc_cpu_node(first) &&
        online - 1 != pairs[0][1]) {
        pairs[np][0] = first;
        pairs[np++][1] = online - 1;
    }
    for (int k = 0; k < np; k++) {
        efaxb__doc_bounce_run run;
        int rc = efaxb__doc_bounce_pair(pairs[k][0], pairs[k][1], d->timeout_ms, &run);
        char sub[48];
        snprintf(sub, sizeof sub, "%d,%d", pairs[k][0], pairs[k][1]);
        if (rc)
            efax_doctor_add(
                d, EFAX_DOCTOR_SKIP, "cores", sub, NULL, "CPUs %d and %d: %s", pairs[k][0], pairs[k][1],
                rc == ETIMEDOUT
                    ? "a cache line handed between them did not come back within --timeout"
                    : "this process may not run on both (a cpuset), so their distance is unknown");
        else
            efaxb__doc_cores_finding(d, pairs[k][0], pairs[k][1], &run);
    }
    pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
}

EFAX_PRIVATE bool efaxb__doc_on_path(const char *cmd) {
    char path[PATH_MAX], *p = getenv("PATH") ? strdup(getenv("PATH")) : NULL, *tok, *save = NULL;
    bool found = false;
    for (tok = p ? strtok_r(p, ":", &save) : NULL; tok && !found; tok = strtok_r(NULL, ":", &save)) {
        snprintf(path, sizeof path, "%s/%s", tok, cmd);
        found = access(path, X_OK) == 0;
    }
    free(p);
    return found;
}

EFAX_PRIVATE void efaxb__doc_check_launcher(efax_doctor *d) {
    char tools[128] = "", buf[256];
    const char *names[] = {"mpirun", "srun", "prterun"};
    size_t u = 0;
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        if (efaxb__doc_on_path(names[i]))
            u += (size_t)snprintf(tools + u, sizeof tools - u, "%s%s", u ? ", " : "", names[i]);
    if (getenv("EFAX_ROOT"))
        snprintf(buf, sizeof buf, "efax's TCP rendezvous (EFAX_ROOT=%s)", getenv("EFAX_ROOT"));
    else if (getenv("SLURM_JOB_ID") && (getenv("PMIX_RANK") || getenv("PMIX_NAMESPACE")))
        snprintf(buf, sizeof buf, "Slurm job %s with PMIx (srun --mpi=pmix)", getenv("SLURM_JOB_ID"));
    else if (getenv("PMIX_RANK") || getenv("PMIX_NAMESPACE"))
        snprintf(buf, sizeof buf, "PMIx%s", getenv("OMPI_COMM_WORLD_SIZE") ? " (Open MPI's mpirun)" : "");
    else if (getenv("SLURM_JOB_ID"))
        snprintf(buf, sizeof buf, "Slurm job %s, but no PMIx in this step (srun without --mpi=pmix?)",
                 getenv("SLURM_JOB_ID"));
    else
        snprintf(buf, sizeof buf, "none (this doctor runs alone)");
#ifdef EFAX_NO_PMIX
    efax_doctor_add(d, EFAX_DOCTOR_INFO, "launcher", "", NULL,
                    "launcher: %s; built without PMIx (EFAX_NO_PMIX): only EFAX_ROOT launches; installed: %s",
                    buf, u ? tools : "none of mpirun, srun, prterun");
#else
    if (getenv("SLURM_JOB_ID") && !getenv("PMIX_RANK") && !getenv("PMIX_NAMESPACE") && !getenv("EFAX_ROOT"))
        efax_doctor_add(d, EFAX_DOCTOR_WARN, "launcher", "",
                        "srun --mpi=pmix (Slurm's PMIx plugin), or set EFAX_RANK/EFAX_SIZE/EFAX_ROOT",
                        "launcher: %s; installed: %s", buf, u ? tools : "none of mpirun, srun, prterun");
    else
        efax_doctor_add(d, EFAX_DOCTOR_INFO, "launcher", "", NULL,
                        "launcher: %s; installed: %s; efax joins PMIx (mpirun, srun --mpi=pmix, prterun) or "
                        "EFAX_RANK/EFAX_SIZE/EFAX_ROOT",
                        buf, u ? tools : "none of mpirun, srun, prterun");
#endif
}

/* ---------------------------------------------------------------------------------------- GPUs */

/* With efax_cuda.h included first, each GPU is checked here rather than in the cuda glue below:
   the check opens a context, registers device memory and writes into it as the NIC checks do, with
   this section's helpers (efaxb__doc_cold_start), which the glue comes after. */
#ifdef EFAX_CUDA_H
EFAX_PRIVATE void efaxb__doc_check_gpu(efax_doctor *d, int g, const char *prov, const efax_nic_info *nics,
                                       int nn) {
    efax_gpu_info gi;
    char sub[48], near[256] = "";
    size_t u = 0;
    efax_ctx_desc cd;
    efaxb__doc_cold c;
    if (efax_cuda_gpu_info(g, nics, nn, &gi)) {
        efax_doctor_add(d, EFAX_DOCTOR_FAIL, "gpu", "", "check the driver (nvidia-smi)",
                        "GPU %d: CUDA cannot describe it", g);
        return;
    }
    snprintf(sub, sizeof sub, "GPU %d %s", g, gi.pci);
    efax_doctor_add(d, EFAX_DOCTOR_INFO, "gpu", sub, NULL,
                    "%s, compute capability %d.%d, NUMA %d, %d NVLink(s)", gi.name, gi.cc_major, gi.cc_minor,
                    gi.numa, gi.nvlinks);
    for (int i = 0; i < gi.nnear; i++) {
        u += (size_t)snprintf(near + u, sizeof near - u, "%s%s", i ? "," : "", nics[gi.near[i]].name);
    }
    if (gi.nnear && gi.near_depth >= 3)
        efax_doctor_add(d, EFAX_DOCTOR_PASS, "gpu", sub, NULL,
                        "nearest NIC(s): %s, behind its PCIe switch (PCI depth %d)", near, gi.near_depth);
    else if (gi.nnear)
        efax_doctor_add(
            d, EFAX_DOCTOR_WARN, "gpu", sub,
            "pin ranks to GPUs whose NICs share their PCIe switch; check the instance's topology (nvidia-smi "
            "topo -m)",
            "nearest NIC(s) %s share only %d PCI component(s) with it: traffic crosses the CPU's PCIe root "
            "(the wrong EFA "
            "device per GPU: uccl #724)",
            near, gi.near_depth);
    else
        efax_doctor_add(d, EFAX_DOCTOR_SKIP, "gpu", sub, NULL,
                        "no NIC of %s shares its PCI tree (the NICs have no PCI address, or sit under "
                        "another host bridge): nearness unknown, every NIC used",
                        prov);
    efax_doctor_add(d, gi.dmabuf ? EFAX_DOCTOR_PASS : EFAX_DOCTOR_WARN, "gpu", sub,
                    gi.dmabuf ? NULL
                              : "a driver and kernel with dmabuf (CUDA 11.7+, Linux 5.12+, "
                                "open kernel modules)",
                    "dmabuf export %s; GPUDirect RDMA attribute %s",
                    gi.dmabuf ? "supported" : "NOT supported", gi.gdr ? "set" : "not set");
    if (gi.cc_major < 9)
        efax_doctor_add(
            d, EFAX_DOCTOR_INFO, "gpu", sub, NULL,
            "compute capability %d.%d (before Hopper): a NIC's writes into its memory need a flush "
            "before the GPU reads them (aws-ofi-nccl platform-aws.cpp skips it only on p5)",
            gi.cc_major, gi.cc_minor);
    /* GPUDirect RDMA, really: device memory registered with the provider forbidden to call CUDA (on efa
       efax_caps.gpudirect says whether efa took it), then one write lands */
    cudaSetDevice(g);
    memset(&cd, 0, sizeof cd);
    cd.provider = prov;
    cd.hmem = true;
    cd.no_cuda_api = true;
    efaxb__doc_cold_start(d, cd,
                          gi.nnear ? nics[gi.near[0]].name
                          : nn     ? nics[0].name
                                   : NULL,
                          efax_mem_device(), 1 << 20, &c);
    if (c.failed[0])
        efax_doctor_add(
            d, d->prov == EFAX_PROV_EFA ? EFAX_DOCTOR_FAIL : EFAX_DOCTOR_WARN, "gpudirect", sub,
            "load the GPU peer-memory support (nvidia-peermem, "
            "or dmabuf with open kernel modules) and use a libfabric built with CUDA (the EFA installer's)",
            "device memory with the provider forbidden to call CUDA (FI_OPT_CUDA_API_PERMITTED=false) on %s: "
            "%s",
            gi.nnear ? nics[gi.near[0]].name : "NIC 0", c.failed);
    else if (!strncmp(c.path, "staged", 6))
        efax_doctor_add(
            d, d->prov == EFAX_PROV_EFA ? EFAX_DOCTOR_FAIL : EFAX_DOCTOR_WARN, "gpudirect", sub,
            "a libfabric with FI_HMEM for CUDA (the EFA installer's)",
            "%s cannot register device memory: it moves through pinned host buffers (staged), not by "
            "GPUDirect RDMA",
            prov);
    else
        efax_doctor_add(
            d, EFAX_DOCTOR_PASS, "gpudirect", sub, NULL,
            "device memory registered by %s with the provider forbidden to call CUDA%s, and a 1 MiB "
            "write to itself landed, every byte right: first %.0f us, then %.0f us (register %.2f ms)",
            c.path, c.caps.gpudirect == 1 ? " (efa took it: GPUDirect RDMA)" : "", c.first_us, c.warm_us,
            c.reg_ms);
}
#endif

EFAX_PRIVATE void efaxb__doc_check_gpus(efax_doctor *d, const char *prov) {
    int seen = efax_topo_gpus(efax_topo_sysfs_root(), NULL, 0);
#ifdef EFAX_CUDA_H
    char why[256] = "";
    int n = efax_cuda_devices(why, sizeof why), nn = 0;
    efax_nic_info nics[EFAX_MAX_NICS];
    efax_topo_list(prov, nics, EFAX_MAX_NICS, &nn);
    if (nn > EFAX_MAX_NICS) nn = EFAX_MAX_NICS;
    if (!n) {
        efax_doctor_add(
            d, seen ? EFAX_DOCTOR_FAIL : EFAX_DOCTOR_SKIP, "gpu", "",
            seen ? "check the driver (nvidia-smi) and CUDA_VISIBLE_DEVICES" : NULL, "%s%s",
            seen ? "NVIDIA GPUs on the PCI bus, but CUDA sees none: " : "no CUDA device here: ", why);
        return;
    }
    for (int g = 0; g < n; g++) efaxb__doc_check_gpu(d, g, prov, nics, nn);
#else
    (void)prov;
    if (seen)
        efax_doctor_add(
            d, EFAX_DOCTOR_WARN, "gpu", "",
            "run build/doctor_cuda (make cuda): drivers/doctor.c built with nvcc",
            "%d NVIDIA GPU(s) on the PCI bus, and this doctor was built without CUDA: GPUs not checked",
            seen);
    else
        efax_doctor_add(
            d, EFAX_DOCTOR_SKIP, "gpu", "", NULL,
            "no GPU on the PCI bus, and this doctor was built without CUDA (doctor_cuda checks GPUs)");
#endif
}

/* ---------------------------------------------------------------------------------------- report */

EFAX_PRIVATE void efaxb__doc_clean(char *s) {
    for (; *s; s++)
        if (*s == '\t' || *s == '\n' || *s == '\r') *s = ' ';
}

/* This host's findings as lines of "level\tcheck\tsubject\ttext\tfix"; the first line is the facts. */
EFAX_PRIVATE void efaxb__doc_pack(efax_doctor *d, char *out, size_t cap) {
    size_t u = 0;
    u += (size_t)snprintf(out, cap, "%s\n", d->facts);
    for (int i = 0; i < d->n && u < cap; i++) {
        efax_finding *f = &d->f[i];
        efaxb__doc_clean(f->check);
        efaxb__doc_clean(f->subject);
        efaxb__doc_clean(f->text);
        efaxb__doc_clean(f->fix);
        u += (size_t)snprintf(out + u, cap - u, "%d\t%s\t%s\t%s\t%s\n", f->level, f->check, f->subject,
                              f->text, f->fix);
    }
}

EFAX_PRIVATE void efaxb__doc_json_str(FILE *fp, const char *s) {
    fputc('"', fp);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(fp, "\\%c", c);
        else if (c < 0x20)
            fprintf(fp, "\\u%04x", c);
        else
            fputc(c, fp);
    }
    fputc('"', fp);
}

EFAX_PRIVATE void efaxb__doc_csv_str(FILE *fp, const char *s) {
    fputc('"', fp);
    for (; *s; s++) {
        if (*s == '"') fputc('"', fp);
        fputc(*s, fp);
    }
    fputc('"', fp);
}

/* Prints one host's packed findings (after its facts line, when `facts`) and writes them to JSON and
   CSV; counts levels into n. */
EFAX_PRIVATE void efaxb__doc_show(bool quiet, const char *host, char *packed, bool facts, FILE *jf, FILE *cf,
                                  int *n) {
    char *save = NULL, *line = strtok_r(packed, "\n", &save);
    if (facts) {
        printf("# %s: %s\n", host, line ? line : "");
        line = strtok_r(NULL, "\n", &save);
    }
    for (; line; line = strtok_r(NULL, "\n", &save)) {
        char *field[5] = {0}, *p = line;
        int k = 0, level;
        for (; k < 5 && p; k++) {
            field[k] = p;
            p = strchr(p, '\t');
            if (p) *p++ = 0;
        }
        if (k < 5) continue;
        level = atoi(field[0]);
        if (level < 0 || level >= EFAX_DOCTOR_LEVELS) continue;
        n[level]++;
        if (!quiet || level == EFAX_DOCTOR_WARN || level == EFAX_DOCTOR_FAIL)
            printf("%s  %-10s %s%s%s%s%s\n", efax_doctor_level_name(level), field[1], field[2],
                   field[2][0] ? ": " : "", field[3], field[4][0] ? ". Fix: " : "", field[4]);
        if (jf) {
            fprintf(jf, "{\"schema\":1,\"driver\":\"doctor\",\"host\":");
            efaxb__doc_json_str(jf, host);
            fprintf(jf, ",\"level\":\"%s\",\"check\":", efax_doctor_level_name(level));
            efaxb__doc_json_str(jf, field[1]);
            fprintf(jf, ",\"subject\":");
            efaxb__doc_json_str(jf, field[2]);
            fprintf(jf, ",\"text\":");
            efaxb__doc_json_str(jf, field[3]);
            fprintf(jf, ",\"fix\":");
            efaxb__doc_json_str(jf, field[4]);
            fprintf(jf, "}\n");
        }
        if (cf) {
            efaxb__doc_csv_str(cf, host);
            fprintf(cf, ",%s,", efax_doctor_level_name(level));
            efaxb__doc_csv_str(cf, field[1]);
            fputc(',', cf);
            efaxb__doc_csv_str(cf, field[2]);
            fputc(',', cf);
            efaxb__doc_csv_str(cf, field[3]);
            fputc(',', cf);
            efaxb__doc_csv_str(cf, field[4]);
            fputc('\n', cf);
        }
    }
}

EFAX_API int efax_doctor_check(efax_doctor *d) {
    char provs[256], pick[32];
    if (!d) return -FI_EINVAL;
    if (!d->timeout_ms) d->timeout_ms = 10000;
    snprintf(d->facts, sizeof d->facts, "libfabric %u.%u", FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
    efaxb__doc_check_libfabric(d, provs, sizeof provs, pick, sizeof pick);
    efaxb__doc_check_efa(d);
    if (pick[0]) efaxb__doc_check_nics(d, pick);
    efaxb__doc_check_host(d);
    efaxb__doc_check_cores(d);
    efaxb__doc_check_launcher(d);
    efaxb__doc_check_gpus(d, pick[0] ? pick : "tcp");
    return 0;
}

EFAX_API int efax_doctor_report(efax_doctor *d, efax_boot *job, bool quiet, FILE *json, FILE *csv) {
    char first_facts[512] = "", *mine, *all;
    int rc, hosts = 0, n[EFAX_DOCTOR_LEVELS] = {0};
    mine = (char *)calloc(1, EFAXB__DOC_PACKED);
    all = (char *)calloc((size_t)job->size, EFAXB__DOC_PACKED);
    if (!mine || !all) {
        free(mine);
        free(all);
        return -FI_ENOMEM;
    }
    efaxb__doc_pack(d, mine, EFAXB__DOC_PACKED);
    rc = efax_boot_allgather(job, mine, EFAXB__DOC_PACKED, all, -1);
    for (int r = 0, first = -1; !rc && r < job->size; r++) {
        char *p = all + (size_t)r * EFAXB__DOC_PACKED, facts[512];
        p[EFAXB__DOC_PACKED - 1] = 0;
        if (!strchr(p, '\t')) continue; /* not the first rank of its host */
        hosts++;
        snprintf(facts, sizeof facts, "%.*s", (int)strcspn(p, "\n"), p);
        if (job->rank == 0) {
            if (csv && first < 0) fprintf(csv, "host,level,check,subject,text,fix\n");
            printf("%s# efax doctor %s, host %s (rank %d of %d)\n", r ? "\n" : "", EFAX_VERSION_STRING,
                   job->hosts[r], r, job->size);
            efaxb__doc_show(quiet, job->hosts[r], p, true, json, csv, n);
        } else {
            for (char *line = strchr(p, '\n'); line && line[1]; line = strchr(line + 1, '\n'))
                if (atoi(line + 1) >= 0 && atoi(line + 1) < EFAX_DOCTOR_LEVELS) n[atoi(line + 1)]++;
        }
        if (first < 0) {
            first = r;
            snprintf(first_facts, sizeof first_facts, "%s", facts);
            continue;
        }
        /* hosts agree on libfabric, provider and NIC names: efax matches NICs between hosts by name,
           and a job whose hosts differ there fails later with errors that do not name the cause */
        if (strcmp(facts, first_facts)) {
            n[EFAX_DOCTOR_FAIL]++;
            if (job->rank == 0) {
                char t[1400];
                snprintf(
                    t, sizeof t,
                    "%d\thosts\t%s\t%s has '%s', %s has '%s'\tthe same libfabric, provider and NIC names "
                    "on every host (efax matches NICs by name)\n",
                    EFAX_DOCTOR_FAIL, job->hosts[r], job->hosts[first], first_facts, job->hosts[r], facts);
                n[EFAX_DOCTOR_FAIL]--; /* efaxb__doc_show counts it */
                efaxb__doc_show(quiet, "*", t, false, json, csv, n);
            }
        }
    }
    if (!rc && job->rank == 0) {
        printf("\n# doctor: %d PASS, %d WARN, %d FAIL, %d INFO, %d SKIP (SKIP: what this machine cannot "
               "show)%s\n",
               n[EFAX_DOCTOR_PASS], n[EFAX_DOCTOR_WARN], n[EFAX_DOCTOR_FAIL], n[EFAX_DOCTOR_INFO],
               n[EFAX_DOCTOR_SKIP], n[EFAX_DOCTOR_FAIL] ? ": NOT READY" : "");
        if (json)
            fprintf(json,
                    "{\"schema\":1,\"driver\":\"doctor\",\"summary\":{\"pass\":%d,\"warn\":%d,\"fail\":%d,"
                    "\"info\":%d,\"skip\":%d,\"hosts\":%d,\"ranks\":%d}}\n",
                    n[EFAX_DOCTOR_PASS], n[EFAX_DOCTOR_WARN], n[EFAX_DOCTOR_FAIL], n[EFAX_DOCTOR_INFO],
                    n[EFAX_DOCTOR_SKIP], hosts, job->size);
    }
    free(mine);
    free(all);
    return rc ? rc : n[EFAX_DOCTOR_FAIL];
}

#ifdef EFAX_CUDA_H
// >>cuda glue (implementation) ---------------------------------------------------------------

/* Measures what no device-memory result between this job's ranks can pass (efax_cuda_ceiling:
   cudaMemcpyPeerAsync between the GPUs of one host, `bytes` per copy, the best of several after a
   warm-up), sets it as the report's ceiling and prints it in the header with its spread, or says
   why there is none; when ranks share a GPU, a header line says so and what that measures.
   Collective. */
EFAX_PRIVATE int efaxb__ceiling(efax_bench *b, size_t bytes) {
    efax_report *r = b->rep;
    efax_ceiling c;
    int rc = efax_cuda_ceiling(&b->boot, bytes, &c);
    if (rc || b->rank != 0) return rc;
    /* Ranks that share a GPU are separate processes, each with its own CUDA context: unless MPS
       runs, the GPU runs one context at a time and switches between them by time slices, so a
       kernel one rank keeps running (the proxy's producers) or launches (all2all's own chunk)
       holds up the copies the other rank's provider issued (docs/testing.md, one GPU). */
    if (c.shared[0] && !b->o.quiet)
        printf("# GPU shared: %s. No link between GPUs is measured: device-memory results are copies "
               "within one GPU's memory, and wherever the ranks have GPU work at once (all2all's copies, the "
               "proxy's producer kernel) their processes' CUDA contexts take turns on it by time slices, "
               "unless MPS runs (docs/testing.md)\n",
               c.shared);
    if (c.gbs <= 0) { /* said, so that a missing ceiling is not mistaken for a checked one */
        if (!b->o.quiet) printf("# ceiling: not measured: %s; results are not checked against one\n", c.what);
        return 0;
    }
    r->ceiling_gbps = c.gbs * 8;
    snprintf(r->ceiling_what, sizeof r->ceiling_what, "%s, best of %d copies", c.what, c.copies);
    if (!b->o.quiet)
        printf("# ceiling: %s: best %.1f GB/s, spread %.1f-%.1f over %d copies (after %d untimed) = "
               "%.1f Gbps; a device-memory result above it +%.0f%% is refused\n",
               c.what, c.gbs, c.low_gbs, c.gbs, c.copies, c.warmup, r->ceiling_gbps,
               EFAX_CEILING_TOLERANCE * 100);
    return 0;
}

EFAX_API int efax_bench_gpu(const char *driver) {
    char why[160];
    if (efax_cuda_devices(why, sizeof why)) return 1;
    printf("%s: skipped: no CUDA device (%s)\n", driver, why);
    return 0;
}
#endif

#ifdef __cplusplus
}
#endif
#endif /* EFAX_BENCH_IMPLEMENTATION_DONE */
