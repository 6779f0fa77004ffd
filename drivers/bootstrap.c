/* bootstrap — the "bootstrap" experiment: every rank exchanges endpoint names and memory keys,
   then every ordered pair of ranks proves a SEND and a WRITE with immediate data on every
   NIC, with the data checked. Prints the pair matrix and "all N×(N−1) pairs OK", or names
   the pairs that failed.

   cc -O2 -pthread -I. drivers/bootstrap.c -o bootstrap $(pkg-config --cflags --libs libfabric pmix)
   mpirun -np 4 ./bootstrap
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_bench.h"

#include <string.h>

int main(int argc, char **argv) {
    efax_bench b;
    efax_bench_desc d;
    efax_bench_pairs p;
    uint64_t msg = 4096;
    int64_t bad = 0;
    int rc;
    efax_optdef defs[] = {
        {"provider", 0, EFAX_OPT_STR, &b.o.provider, 0, 0, NULL, "NAME",
         "libfabric provider (default efa > tcp > shm)"},
        {"nics", 0, EFAX_OPT_STR, &b.o.nics, 0, 0, NULL, "LIST", "comma-separated NIC names"},
        {"size", 's', EFAX_OPT_SIZE, &msg, 1, 16777216, NULL, "SIZE", "bytes per message (default 4K)"},
        {"timeout", 0, EFAX_OPT_INT, &b.o.timeout_ms, 1, 86400000, NULL, "MS",
         "fail any wait longer than this"},
        EFAX_OPT_END,
    };
    memset(&b, 0, sizeof b);
    memset(&p, 0, sizeof p);
    memset(&d, 0, sizeof d);
    d.driver = "bootstrap";
    d.about = "Proves SEND and WRITE-with-immediate between every ordered pair of ranks on every NIC.";
    d.extra = defs;
    d.own_options = true;
    d.min_ranks = 1;
    d.cold = true;
    rc = efax_bench_open(&b, &d, argc, argv); /* its own options, the launcher */
    if (!rc) rc = efax_bench_connect(&b); /* NICs, endpoint names; cold: the connections are what is proven */
    if (!rc) rc = efax_bench_pairs_meet(&b, &p, msg); /* who is there: rank 0 prints every rank's NICs */
    if (!rc) rc = efax_bench_pairs_open(&b, &p);      /* the buffers, filled and poisoned */
    if (!rc) rc = efax_bench_pairs_prove(&b, &p);     /* every pair, every NIC: a SEND and a WRITE */
    if (!rc)                                          /* rank 0's verdict, for all */
        rc = efax_boot_sum(&b.boot, p.me == 0 ? efax_bench_pairs_report(&b, &p) : 0, &bad, -1);
    rc = efax_bench_close(&b, rc);
    return rc ? rc : bad ? 1 : 0;
}
