/* all2all — every rank writes one chunk to every other rank at once and waits until every
   peer's chunk has landed (counted chunk by chunk through immediate data). The size column is
   each rank's send buffer, cut into one chunk per rank, as in nccl-tests' alltoall_perf;
   algbw = size / time and busbw = algbw * (n-1)/n, so the numbers compare with nccl-tests.
   Time, as nccl-tests takes it: a rank's whole loop of iterations run back to back, divided
   by the iterations — a rank may start its next iteration while a slower one finishes, and
   that overlap is the sustained rate. nccl-tests averages the ranks' loops; we report the
   slowest rank's. The latency columns are per iteration, the slowest rank's each time. With -c
   the checks separate the iterations (a rank may start its next one before a peer has finished
   checking, so its own loop undercounts): bandwidth then comes from those per-iteration times.
   --window N keeps N iterations in flight (default 1, nccl-tests' one collective at a time): a
   rank starts iteration i + N - 1 as iteration i begins, so the copies and transfers of the next
   ones queue behind the current one's instead of waiting for the host to see it end.
   --pace N (more than two ranks): a rank writes its peers one at a time, the next rank on first,
   its write k + N leaving once its own arrival k is in place, so that no GPU is read by two peers
   at once (efax_bench.h's exchange says why); 0: every write at once; default: EFAX_BENCH_PACE for
   device memory from chunks of EFAX_BENCH_PACE_MIN bytes, else 0. --pace-gate arrived: write
   k + N leaves once arrival k has arrived (its copy started here) rather than landed; auto (the
   default): arrived below chunks of EFAX_BENCH_GATE_LANDED bytes, landed from there.
   Modes: Single (NIC 0), Split (each chunk striped over all NICs), RoundRobin (chunk to peer p
   on NIC (p + rank + iteration) mod NICs), Stripe. The harness runs both sides
   (efax_bench_exchange).

   cc -O2 -pthread -I. drivers/all2all.c -o all2all $(pkg-config --cflags --libs libfabric pmix)
   nvcc -O2 -x cu -I. drivers/all2all.c -o all2all_cuda \
       $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix
   mpirun -np 4 ./all2all -b 64K -e 256M --mode single,split,roundrobin -c
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#ifdef __CUDACC__
#include "efax_cuda.h"
#endif
#include "efax_bench.h"

#include <string.h>

/* Every rank writes to every rank: to itself by a local copy. */
static bool writes(const void *user, int from, int to, int n) {
    (void)user;
    (void)from;
    (void)to;
    (void)n;
    return true;
}

/* One (size, mode, memory kind) of the sweep; an iteration takes as long as its slowest rank. */
static int measure(efax_bench *b, const efax_bench_step *st) {
    efax_bench_step pt = *st; /* the point: its size cut to whole chunks, and its iterations */
    efax_bench_moves mv = {writes, NULL, 0, 0, NULL};
    int n = b->size, nlat = 0, rc;
    int64_t wrong = 0;
    double loop_us = 0; /* the slowest rank's whole loop; b->lat: the slowest rank's time per iteration */
    efax_result res;
    mv.size = st->size / (uint64_t)n;
    pt.size = mv.size * (uint64_t)n;
    pt.iters = efax_opts_iters(&b->o, pt.size);
    pt.warmup = efax_opts_warmup(&b->o, pt.size);
    efax_report_progress(b->rep, "%s %llu bytes", efax_mode_label(pt.mode), (unsigned long long)pt.size);
    rc = efax_bench_exchange(b, &pt, &mv, b->lat, &nlat, &wrong);
    if (!rc) rc = efax_bench_slowest(b, b->lat, pt.iters, &loop_us);
    if (rc) return rc;
    efax_bench_result(&res, &pt, b->xsrc[pt.k], NULL, EFAX_RESULT_ALLTOALL, efax_bench_in_flight(b, &pt),
                      n - 1);
    efax_result_time(&res, b->lat, pt.iters, pt.size, efax_bench_line(b, pt.mode));
    if (!b->o.check) { /* bandwidth from the loop, as nccl-tests (which averages ranks; we: the slowest) */
        res.seconds = loop_us * 1e-6;
        res.gbps = res.seconds > 0 ? (double)res.bytes * 8 / res.seconds / 1e9 : 0;
    }
    res.algbw_gbs = res.gbps / 8;
    res.busbw_gbs = res.algbw_gbs * (double)(n - 1) / (double)n;
    return efax_bench_record(b, &res, wrong);
}

int main(int argc, char **argv) {
    efax_bench b;
    efax_bench_desc d;
    efax_bench_xchg x; /* a chunk to each rank from its own region, into the target's region per writer */
    efax_bench_step st;
    int pace = -1;
    const char *gate = "auto";
    efax_optdef extra[] = {
        {"pace", 0, EFAX_OPT_INT, &pace, 0, 64, NULL, "N",
         "more than two ranks: writes leave one peer at a time, write k + N once arrival k is in place "
         "(0: all at once; default: 1 for device memory from 4 MiB chunks, else 0)"},
        {"pace-gate", 0, EFAX_OPT_CHOICE, &gate, 0, 0, "auto|landed|arrived", "WHEN",
         "paced: write k + N leaves once arrival k landed or arrived (its copy started); auto (default): "
         "arrived below 16 MiB chunks, landed from there"},
        EFAX_OPT_END,
    };
    int rc;
    memset(&d, 0, sizeof d);
    memset(&x, 0, sizeof x);
    memset(&st, 0, sizeof st);
    x.msgs = 1;
    x.per_target = true;
    x.per_writer = true;
    x.unconfirmed = true;
    x.window_iterations = true; /* --window N: N iterations in flight */
    d.driver = "all2all";
    d.about =
        "All-to-all: every rank writes a chunk to every other rank at once (nccl-tests sizes and busbw).";
    d.extra = extra;
    d.min_size = 64 << 10;
    d.max_size = 256 << 20;
    d.xchg = &x;
    rc = efax_bench_open(&b, &d, argc, argv); /* options, memory kinds, the launcher */
    x.bytes = b.o.max_size;                   /* a send and a receive buffer of -e bytes: a chunk per rank */
    x.pace = pace;
    x.pace_gate = EFAX_BENCH_GATE_AUTO;
    if (!strcmp(gate, "landed")) x.pace_gate = EFAX_BENCH_GATE_LANDED;
    if (!strcmp(gate, "arrived")) x.pace_gate = EFAX_BENCH_GATE_ARRIVED;
    if (!rc && b.o.min_size < (uint64_t)b.size)
        rc = efax_bench_usage(&b, "-b %llu: the send buffer must hold at least one byte per rank (%d)",
                              (unsigned long long)b.o.min_size, b.size);
    if (!rc) rc = efax_bench_connect(&b);     /* NICs, connections to every peer, the exchange's buffers */
    if (!rc) rc = efax_bench_begin(&b, NULL); /* the report's header (and the GPU ceiling) */
    while (!rc && efax_bench_next(&b, &st, &rc)) rc = measure(&b, &st);
    return efax_bench_close(&b, rc);
}
