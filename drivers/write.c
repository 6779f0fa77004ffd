/* write — one-sided RDMA WRITE with immediate data, rank 0 -> rank k. Each message is planned
   over the NICs by a mode (Single, Split, RoundRobin, Stripe); every chunk carries immediate
   data and the target counts the chunks, so it knows the whole message landed without relying
   on write ordering, then confirms to the writer. With two or more messages an iteration and no -c
   the writer sends the next window before the last one's confirmation comes, so that the link does
   not idle for its round trip (at most two windows unconfirmed): an iteration's time runs from one
   confirmation to the next; else from the first post to the confirmation.
   --targets one: rank 0 -> each rank in turn (results over all pairs); all: rank 0 -> every rank
   at once; pairs: the full-node experiment, rank i -> rank i + n/2 for every i < n/2 at once (one
   host's ranks to the other's, each rank on its own NICs: --nics "r0,r1;r2,r3"), reported per
   rank, per host and in aggregate. The harness runs both sides (efax_bench_exchange).

   cc -O2 -pthread -I. drivers/write.c -o write $(pkg-config --cflags --libs libfabric pmix)
   nvcc -O2 -x cu -I. drivers/write.c -o write_cuda \
       $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix
   mpirun -np 2 ./write -b 4K -e 256M --mode all -c
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#ifdef __CUDACC__
#include "efax_cuda.h"
#endif
#include "efax_bench.h"

#include <string.h>

typedef struct run {
    efax_bench b;
    efax_bench_step st;
    const char *targets; /* one | all | pairs */
    bool all, pairs;
    int k; /* --targets one: this turn's target */
} run;

/* Who writes to whom: rank 0 to rank k (one), to every other rank (all), rank i to i + n/2 (pairs). */
static bool writes(const void *user, int from, int to, int n) {
    const run *r = (const run *)user;
    if (r->pairs) return from < n / 2 && to == from + n / 2;
    return from == 0 && to != 0 && (r->all || to == r->k);
}

/* One (size, mode, memory kind) of the sweep: every turn, then the result of every pair. */
static int measure(run *r) {
    efax_bench *b = &r->b;
    efax_bench_moves mv = {writes, r, 0, 0, NULL};
    int n = b->size, h = n / 2, nlat = 0, rc = 0;
    int peers = r->pairs ? h : r->all ? n - 1 : 1;
    uint64_t bytes = r->st.size * (uint64_t)b->o.window;
    double line = efax_bench_line(b, r->st.mode);
    int64_t wrong = 0;
    efax_result res;
    for (r->k = 1; r->k < n && !rc; r->k = r->all || r->pairs ? n : r->k + 1)
        rc = efax_bench_exchange(b, &r->st, &mv, b->lat, &nlat, &wrong);
    efax_bench_result(&res, &r->st, b->xsrc[r->st.k], NULL, EFAX_RESULT_ONEWAY, b->o.window, peers);
    if (!rc && r->pairs) rc = efax_bench_writers(b, &res, b->lat, r->st.iters, h, bytes, line);
    if (rc) return rc;
    if (r->pairs) nlat = r->st.iters;
    efax_result_time(&res, b->lat, nlat, bytes * (uint64_t)peers, line * (r->pairs ? h : 1));
    return efax_bench_record(b, &res, wrong);
}

int main(int argc, char **argv) {
    run r;
    efax_bench_desc d;
    efax_bench_xchg x; /* --window messages from a writer to each target, into one region */
    efax_optdef extra[] = {
        {"targets", 0, EFAX_OPT_CHOICE, &r.targets, 0, 0, "one|all|pairs", "WHICH",
         "one: rank 0 -> each rank in turn (default); all: every rank at once; pairs: rank i -> i + n/2, all "
         "at once"},
        EFAX_OPT_END,
    };
    int rc;
    memset(&r, 0, sizeof r);
    memset(&d, 0, sizeof d);
    memset(&x, 0, sizeof x);
    r.targets = "one";
    d.driver = "write";
    d.about = "One-sided WRITE with immediate data from rank 0 to the other ranks; the targets count chunks.";
    d.extra = extra;
    d.min_size = 4096;
    x.confirm_behind = true; /* the next window goes out before the last one's confirmation comes */
    d.xchg = &x;
    d.msg_rate = true;                          /* Mmsg/s beside Gbps: the small-message figure */
    rc = efax_bench_open(&r.b, &d, argc, argv); /* options, memory kinds, the launcher */
    r.all = !strcmp(r.targets, "all");
    r.pairs = !strcmp(r.targets, "pairs");
    if (!rc && r.pairs && r.b.size % 2)
        rc = efax_bench_usage(&r.b, "--targets pairs needs an even number of ranks (%d)", r.b.size);
    if (!rc) rc = efax_bench_connect(&r.b);     /* NICs, connections, the exchange's buffers */
    if (!rc) rc = efax_bench_begin(&r.b, NULL); /* the report's header (and the GPU ceiling) */
    while (!rc && efax_bench_next(&r.b, &r.st, &rc)) rc = measure(&r);
    return efax_bench_close(&r.b, rc);
}
