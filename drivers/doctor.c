/* doctor — is this node ready for efax, and if not, why? A preflight in plain language: one line
   per finding, PASS / WARN / FAIL (and INFO for facts, SKIP for what it cannot know here), each
   WARN and FAIL with its fix; --json writes the same as JSON Lines. A FAIL exits 1.

   What it checks: libfabric (the library it loads, the headers it was built with, the API
   version efax asks for), the providers, every NIC efax would use (attributes; opened alone,
   timed; memory registered, timed; one write to itself that lands and checks, cold and warm; the
   OS's counters), EFA devices and whether libfabric sees them, the host (locked-memory limit,
   huge pages, clock, NUMA, whether the distance between its cores holds still, the launcher),
   and in the CUDA build (doctor_cuda) every GPU: PCI address, nearest NICs and their PCI
   distance, dmabuf export, and whether GPUDirect RDMA really works (device memory registered
   with the provider forbidden to call CUDA, and one write lands).
   Under a launcher (mpirun, srun, EFAX_RANK...) the first rank of each host checks it, and rank 0
   prints every host's findings and what differs between hosts.

   cc -O2 -pthread -I. drivers/doctor.c -o doctor $(pkg-config --cflags --libs libfabric pmix)
   nvcc -O2 -x cu -I. drivers/doctor.c -o doctor_cuda $(pkg-config --cflags --libs libfabric pmix)
   ./doctor                       # this host
   mpirun -H a,b --map-by node ./doctor --json doctor.jsonl
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#ifdef __CUDACC__
#include "efax_cuda.h" /* before efax_bench.h: its doctor then checks the GPUs too */
#endif
#include "efax_bench.h"

int main(int argc, char **argv) {
    static efax_doctor d; /* its findings are large: not on the stack */
    const char *json = NULL, *csv = NULL;
    bool quiet = false;
    efax_optdef defs[] = {
        {"provider", 0, EFAX_OPT_STR, &d.provider, 0, 0, NULL, "NAME",
         "check this provider's NICs (default: the one efax picks)"},
        {"nics", 0, EFAX_OPT_STR, &d.nics, 0, 0, NULL, "LIST",
         "check these NICs (default: the ones efax opens)"},
        {"json", 0, EFAX_OPT_STR, &json, 0, 0, NULL, "FILE",
         "also write every finding as a JSON record (- for stdout)"},
        {"csv", 0, EFAX_OPT_STR, &csv, 0, 0, NULL, "FILE", "also write every finding as a CSV row"},
        {"quiet", 'q', EFAX_OPT_FLAG, &quiet, 0, 0, NULL, NULL,
         "print only WARN and FAIL lines and the verdict"},
        {"expect-efa", 0, EFAX_OPT_FLAG, &d.expect_efa, 0, 0, NULL, NULL,
         "no EFA device is a FAIL (for EFA clusters)"},
        {"timeout", 0, EFAX_OPT_INT, &d.timeout_ms, 100, 3600000, NULL, "MS",
         "how long each check waits (default 10000)"},
        EFAX_OPT_END};
    efax_boot job;
    efax_boot_desc bd;
    FILE *jf = NULL, *cf = NULL;
    int rc;

    /* 1. the options, and the launcher's job (or this process alone) */
    rc = efax_bench_args(argc, argv, defs, "doctor",
                         "Checks that this node (every node, under a launcher) is ready for efax: "
                         "one line per finding, PASS / WARN / FAIL with the fix. A FAIL exits 1.");
    if (rc) return rc == EFAX_BENCH_DONE ? 0 : 2;
    memset(&bd, 0, sizeof bd);
    bd.allow_single = true;
    if ((rc = efax_boot_init(&job, &bd))) return efax_exit_code(rc);

    /* 2. rank 0 writes the report: its files open before anything is checked */
    if (job.rank == 0 && json && !(jf = strcmp(json, "-") ? fopen(json, "w") : stdout)) {
        fprintf(stderr, "doctor: --json %s: cannot open: %s\n", json, strerror(errno));
        return 2;
    }
    if (job.rank == 0 && csv && !(cf = fopen(csv, "w"))) {
        fprintf(stderr, "doctor: --csv %s: cannot open: %s\n", csv, strerror(errno));
        return 2;
    }

    /* 3. the first rank of each host checks it */
    if (job.local_rank == 0) efax_doctor_check(&d);

    /* 4. every host's findings to rank 0, which prints them and the verdict */
    rc = efax_doctor_report(&d, &job, quiet, jf, cf);

    if (jf && jf != stdout) fclose(jf);
    if (cf) fclose(cf);
    efax_boot_deinit(&job);
    return rc < 0 ? efax_exit_code(rc) : rc > 0;
}
