/* sendrecv — two-sided SEND/RECV, rank 0 <-> rank k for every k in turn; two numbers per mode, labelled
   as what they are. Stream: one-way bandwidth; rank 0 keeps --window messages in flight, rank k receives
   them all and confirms; time from the first send to that confirmation. RoundTrip: rank 0 sends, rank k
   answers with a message of the same size: the round-trip time, and size / round trip as "Gbps(rt)" (the
   Libefaxx figure is of this kind: it is not the link's bandwidth). Messages are planned over the
   NICs by --mode like writes; receives are posted on the NIC each piece arrives at. Nothing assumes that
   messages arrive in the order they were sent (efa's SRD does not order them unless asked, and a provider
   may refuse): every message of an iteration carries the same pattern, so any receive of the right piece
   may take it, and each piece's immediate data names it (message, segment), so -c also checks that every
   piece of every message arrived exactly once.
   Stream without -c keeps the window moving: its two halves are confirmed apart, and rank 0 sends a half
   of the next iteration as soon as the same half of this one is confirmed, so that at most --window
   messages are unconfirmed and the link never idles for a confirmation's round trip (osu_mbw_mr and
   fabtests' fi_rdm_bw confirm each whole window and wait for it: bw_tx_comp's ft_rx); an iteration's
   time runs from the end of the one before. With -c every iteration stands alone (its bytes are
   checked between them).

   cc -O2 -pthread -I. drivers/sendrecv.c -o sendrecv $(pkg-config --cflags --libs libfabric pmix)
   nvcc -O2 -x cu -I. drivers/sendrecv.c -o sendrecv_cuda \
       $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix
   mpirun -np 2 ./sendrecv -b 1K -e 64M -c
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#ifdef __CUDACC__
#include "efax_cuda.h"
#endif
#include "efax_bench.h"

typedef struct run {
    efax_bench b;
    efax_bench_step st;
    efax_bench_sends s; /* the buffers, operations and times of both variants */
} run;

/* A variant at one point of the sweep: rank 0 with each rank in turn, then its result. */
static int measure(run *r, bool roundtrip) {
    const char *name = roundtrip ? "RoundTrip" : "Stream";
    efax_result_kind kind = roundtrip ? EFAX_RESULT_ROUNDTRIP : EFAX_RESULT_ONEWAY;
    int window = roundtrip ? 1 : r->b.o.window, nlat = 0, rc = 0;
    uint64_t bytes = r->st.size * (uint64_t)window; /* what an iteration moves one way */
    int64_t wrong = 0;
    efax_result res;
    efax_bench_variant(&r->b, &r->st, name); /* its own NIC counters and progress line */
    for (int k = 1; k < r->b.size && !rc; k++)
        rc = efax_bench_sendrecv(&r->b, &r->s, &r->st, roundtrip, k, &nlat, &wrong);
    efax_bench_result(&res, &r->st, r->s.srcs[r->st.k], name, kind, window, 1);
    efax_result_time(&res, r->s.lat, nlat, bytes, efax_bench_line(&r->b, r->st.mode));
    return rc ? rc : efax_bench_record(&r->b, &res, wrong);
}

int main(int argc, char **argv) {
    run r;
    efax_bench_desc d;
    int rc;
    memset(&r, 0, sizeof r);
    memset(&d, 0, sizeof d);
    d.driver = "sendrecv";
    d.about = "Two-sided SEND/RECV, rank 0 <-> rank k: one-way streaming bandwidth and round-trip time.";
    d.window = 8;                                    /* many messages in flight for the streaming number */
    d.msg_rate = true;                               /* Mmsg/s beside Gbps */
    d.sends = true;                                  /* messages whole: none above the provider's largest */
    rc = efax_bench_open(&r.b, &d, argc, argv);      /* options, memory kinds, the launcher */
    if (!rc) rc = efax_bench_connect(&r.b);          /* NICs, connections */
    if (!rc) rc = efax_bench_sends_open(&r.b, &r.s); /* buffers of every memory kind, operations */
    if (!rc) rc = efax_bench_begin(&r.b, NULL);      /* the report's header (and the GPU ceiling) */
    while (!rc && efax_bench_next(&r.b, &r.st, &rc)) /* every size, mode and memory kind: both variants */
        if (!(rc = measure(&r, false))) rc = measure(&r, true);
    return efax_bench_close(&r.b, rc);
}
