/* rails — which rail is slow or losing packets? For every pair of hosts, in both directions: every
   NIC alone, then all of them together (Split), interleaved, for --rounds rounds (2). For each
   NIC: its Gbps (the best round), its ratio to the median NIC of that direction and to the line
   rate, and what the OS counted over its runs (packets sent again or dropped: an efa device's
   hw_counters, a tcp rail's interface statistics and the host's TCP retransmits; efa's SRD events:
   retransmit timeouts, impaired and unresponsive peers). A rail below --slow (80%) of the median,
   losing more than --lossy (1%) of its packets, or whose NICs counted an SRD event, is flagged by
   host and NIC name; with --expect-healthy a flag exits 1. One rank per host. The measurements,
   verdicts and table are efax_bench.h's rails section (efax_rails_*); this is the recipe.

   cc -O2 -pthread -I. drivers/rails.c -o rails $(pkg-config --cflags --libs libfabric pmix)
   mpirun -H a,b --map-by node ./rails --expect-healthy
   srun --mpi=pmix -N 4 --ntasks-per-node=1 ./rails --json rails.jsonl
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_bench.h"

int main(int argc, char **argv) {
    static efax_rails r; /* not on the stack: its boot and context are large */
    static efax_rails_desc d;
    efax_optdef defs[] = {
        {"provider", 0, EFAX_OPT_STR, &d.provider, 0, 0, NULL, "NAME",
         "provider (default: efa, else tcp, else shm)"},
        {"nics", 0, EFAX_OPT_STR, &d.nics, 0, 0, NULL, "LIST",
         "the rails to test (default: the NICs efax opens)"},
        {"size", 's', EFAX_OPT_SIZE, &d.size, 4096, 1073741824.0, NULL, "BYTES",
         "bytes per write (default 1M)"},
        {"bytes", 'B', EFAX_OPT_SIZE, &d.bytes, 65536, 1099511627776.0, NULL, "BYTES",
         "bytes each NIC moves per measurement (default: half a second at the line rate, else 256M)"},
        {"window", 0, EFAX_OPT_INT, &d.window, 1, 64, NULL, "N",
         "writes per iteration; two iterations in flight (default 8)"},
        {"rounds", 0, EFAX_OPT_INT, &d.rounds, 1, EFAX_RAILS_MAX_ROUNDS, NULL, "N",
         "interleaved rounds; a NIC's best counts (default 2)"},
        {"slow", 0, EFAX_OPT_DOUBLE, &d.slow, 0.01, 1, NULL, "RATIO",
         "flag a NIC below RATIO x the median NIC (default 0.8)"},
        {"lossy", 0, EFAX_OPT_DOUBLE, &d.lossy, 0.0001, 1, NULL, "RATIO",
         "flag a NIC whose OS counts more than RATIO of its packets resent or dropped (default 0.01)"},
        {"line-rate", 0, EFAX_OPT_DOUBLE, &d.line_gbps, 0.001, 100000, NULL, "GBPS",
         "one NIC's line rate (default: EFAX_LINE_GBPS, else the provider's)"},
        {"expect-healthy", 0, EFAX_OPT_FLAG, &d.expect_healthy, 0, 0, NULL, NULL, "a flagged NIC exits 1"},
        {"json", 0, EFAX_OPT_STR, &d.json, 0, 0, NULL, "FILE", "every measurement and path as JSON records"},
        {"csv", 0, EFAX_OPT_STR, &d.csv, 0, 0, NULL, "FILE", "every path as a CSV row"},
        {"quiet", 'q', EFAX_OPT_FLAG, &d.quiet, 0, 0, NULL, NULL, "only the verdict table"},
        {"timeout", 0, EFAX_OPT_INT, &d.timeout_ms, 100, 86400000, NULL, "MS",
         "each wait's limit (default EFAX_TIMEOUT_MS)"},
        EFAX_OPT_END};
    int rc, flagged = 0;
    efax_rails_desc_init(&d);
    rc = efax_bench_args(
        argc, argv, defs, "rails",
        "Finds the slow or lossy rail: every NIC alone, then all together, between every pair "
        "of hosts, both ways; flags a NIC below 80% of the median or losing packets.");
    if (rc) return rc == EFAX_BENCH_DONE ? 0 : 2;
    /* the job (one rank per host, two hosts or more), the context on the rails, the buffers, the header */
    rc = efax_rails_open(&r, &d);
    /* every pair, both ways, every NIC alone, not recorded: TCP opens its window */
    if (!rc) rc = efax_rails_warmup(&r);
    /* the rounds: each NIC alone, then every NIC at once; a line per measurement */
    if (!rc) rc = efax_rails_rounds(&r);
    /* a direction slow in every round, once more: a moment of the host's load is no slow rail */
    if (!rc) rc = efax_rails_confirm(&r);
    /* the table, the flags and the suspects; the count of flagged rails on every rank */
    if (!rc) rc = efax_rails_verdicts(&r, &flagged);
    return efax_rails_close(&r, rc, flagged);
}
