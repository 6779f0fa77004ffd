/* pingpong — the "echo" experiment: the programming model in its smallest form. Rank 0 sends a
   message to rank 1, which answers with one of the same size; as SEND/RECV, then as RDMA WRITE
   with immediate data (--variant times one alone). Latency is one-way: half the round trip.
   With -c both sides check every byte they receive (outside the timing). The answer comes from
   rank 1's own send buffer, as in fi_pingpong: answering from the buffer that just received
   would make the peer read cache lines another core just wrote (on shm that halves the
   bandwidth at 4 MiB) and measure that instead of the transport.

   cc -O2 -pthread -I. drivers/pingpong.c -o pingpong $(pkg-config --cflags --libs libfabric pmix)
   mpirun -np 2 ./pingpong -b 1 -e 1M -c
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_bench.h"

#include <string.h>

/* One size, one variant: the echo (ranks past 1 only join the record), then its result. */
static int measure(efax_bench *b, efax_bench_echo *e, const efax_bench_step *st, bool writeimm) {
    const char *name = writeimm ? "WriteImm" : "SendRecv";
    double secs = 0;
    int64_t wrong = 0;
    efax_result res;
    int rc;
    efax_bench_variant(b, st, name); /* its own NIC counters and progress line */
    rc = efax_bench_echo_time(b, e, st, writeimm, &secs, &wrong);
    if (rc) return rc;
    efax_result_init(&res, name, "host", "host", EFAX_RESULT_HALFRTT, st->size, 1, 1);
    efax_result_time(&res, e->lat, st->iters, 2 * st->size, efax_bench_line(b, EFAX_MODE_SINGLE));
    res.seconds = secs; /* a round trip moves 2 * size */
    res.gbps = secs > 0 ? (double)res.bytes * 8 / secs / 1e9 : 0;
    return efax_bench_record(b, &res, wrong);
}

int main(int argc, char **argv) {
    efax_bench b;
    efax_bench_desc d;
    efax_bench_step st;
    efax_bench_echo e;
    const char *variant = "both"; /* fi_pingpong's sequence is sendrecv's alone: one kind, size after size */
    efax_optdef extra[] = {
        {"variant", 0, EFAX_OPT_CHOICE, &variant, 0, 0, "both|sendrecv|writeimm", "WHICH",
         "which echo to time (default both)"},
        EFAX_OPT_END,
    };
    bool first, last; /* the variants to run: SendRecv (false), WriteImm (true) or both */
    int rc;
    memset(&d, 0, sizeof d);
    memset(&st, 0, sizeof st);
    memset(&e, 0, sizeof e);
    d.driver = "pingpong";
    d.no_staged = "the echo moves host memory only (its writes count arrivals; a staged region takes them by "
                  "cell): drop it";
    d.about = "Ping-pong (echo) between rank 0 and rank 1 over SEND/RECV and WRITE with immediate\n"
              "data. Latency is one-way: half the measured round trip. Other ranks wait.";
    d.extra = extra;
    d.min_size = 1;
    d.max_size = 1 << 20;
    d.modes = 1u << EFAX_MODE_SINGLE;         /* the variants are the experiment's; --mode does not apply */
    rc = efax_bench_open(&b, &d, argc, argv); /* options (sizes 1 B .. 1 MiB), the launcher */
    b.d.sends = strcmp(variant, "writeimm") != 0; /* SEND/RECV: no size above the provider's largest */
    if (!rc) rc = efax_bench_connect(&b);
    if (!rc) rc = efax_bench_echo_open(&b, &e); /* a send and a receive buffer, two halves each */
    if (!rc) rc = efax_bench_begin(&b, "host");
    first = !strcmp(variant, "writeimm");
    last = strcmp(variant, "sendrecv") != 0;
    while (!rc && efax_bench_next(&b, &st, &rc)) /* each size: the chosen variants */
        for (int v = first; v <= last && !rc; v++) rc = measure(&b, &e, &st, v);
    return efax_bench_close(&b, rc);
}
