/* incast — N-1 ranks write into one at once, as an MoE layer's combine or a KV-cache gather does:
   every rank but 0 writes --window messages into its own region of rank 0's buffer; rank 0 counts
   every writer's chunks, confirms to each, and (-c) checks every byte. The harness runs both sides
   (efax_bench_exchange). Time: a writer's first post to rank 0's confirmation, the slowest
   writer's per iteration; bandwidth: all the writers' bytes over it, held against rank 0's line
   rate (its links carry everything).

   cc -O2 -pthread -I. drivers/incast.c -o incast $(pkg-config --cflags --libs libfabric pmix)
   nvcc -O2 -x cu -I. drivers/incast.c -o incast_cuda \
       $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix
   mpirun -np 4 ./incast -b 4K -e 64M --mode all -c
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#ifdef __CUDACC__
#include "efax_cuda.h"
#endif
#include "efax_bench.h"

#include <string.h>

/* Every rank but 0 writes to rank 0. */
static bool writes(const void *user, int from, int to, int n) {
    (void)user;
    (void)n;
    return to == 0 && from != 0;
}

/* One (size, mode, memory kind): the exchange, then one result for all the writers together. */
static int measure(efax_bench *b, const efax_bench_step *st) {
    efax_bench_moves mv = {writes, NULL, 0, 0, NULL};
    uint64_t bytes = st->size * (uint64_t)b->o.window * (uint64_t)(b->size - 1); /* per iteration */
    int64_t wrong = 0;
    double loop_us;
    int nlat = 0;
    efax_result res;
    int rc = efax_bench_exchange(b, st, &mv, b->lat, &nlat, &wrong);
    if (!rc) rc = efax_bench_slowest(b, b->lat, st->iters, &loop_us); /* an iteration: its slowest writer */
    if (rc) return rc;
    efax_bench_result(&res, st, b->xsrc[st->k], NULL, EFAX_RESULT_ONEWAY, b->o.window, b->size - 1);
    efax_result_time(&res, b->lat, st->iters, bytes, efax_bench_line(b, st->mode));
    return efax_bench_record(b, &res, wrong);
}

int main(int argc, char **argv) {
    efax_bench b;
    efax_bench_desc d;
    efax_bench_xchg x; /* --window messages from each writer, into its own region of rank 0's buffer */
    efax_bench_step st;
    int rc;
    memset(&d, 0, sizeof d);
    memset(&x, 0, sizeof x);
    memset(&st, 0, sizeof st);
    x.per_writer = true;
    d.driver = "incast";
    d.about = "Incast: every rank but 0 writes into rank 0 at once (an MoE combine, a KV-cache gather).";
    d.min_size = 4096;
    d.xchg = &x;
    rc = efax_bench_open(&b, &d, argc, argv); /* options, memory kinds, the launcher */
    if (!rc) rc = efax_bench_connect(&b);     /* NICs, connections, the exchange's buffers */
    if (!rc) rc = efax_bench_begin(&b, NULL); /* the report's header (and the GPU ceiling) */
    while (!rc && efax_bench_next(&b, &st, &rc)) rc = measure(&b, &st);
    return efax_bench_close(&b, rc);
}
