/* info — the "efa" experiment: every provider and NIC efax can use on this host, with the
   attributes that decide how efax drives it.

   cc -O2 -pthread -I. drivers/info.c -o info $(pkg-config --cflags --libs libfabric pmix)
   ./info                      # every provider with RDM + RMA
   ./info --provider efa --json -
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_bench.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *provider = NULL, *json = NULL;
    uint64_t mc = 0;
    efax_optdef defs[] = {
        {"provider", 0, EFAX_OPT_STR, &provider, 0, 0, NULL, "NAME",
         "only this provider (default: all with RDM + RMA)"},
        {"json", 0, EFAX_OPT_STR, &json, 0, 0, NULL, "FILE",
         "also write one JSON record per NIC (- for stdout)"},
        {"memcpy", 0, EFAX_OPT_SIZE, &mc, 4096, 68719476736.0, NULL, "SIZE",
         "only measure single-thread memcpy of SIZE bytes (the shm ceiling)"},
        EFAX_OPT_END,
    };
    char provs[512], *tok, *save = NULL;
    FILE *jf = NULL;
    int rc, total = 0;

    rc = efax_bench_args(argc, argv, defs, "info",
                         "Lists the libfabric providers and NICs efax can use here.");
    if (rc) return rc == EFAX_BENCH_DONE ? 0 : 2;
    if (mc) {
        printf("memcpy %llu bytes, one thread: %.2f GB/s\n", (unsigned long long)mc,
               efax_bench_memcpy_gbs(mc));
        return 0;
    }
    if (json) jf = strcmp(json, "-") ? fopen(json, "w") : stdout;
    if (json && !jf) {
        fprintf(stderr, "info: --json %s: cannot open\n", json);
        return 2;
    }

    /* 1. which providers offer RDM endpoints with messages and RMA */
    if (provider)
        snprintf(provs, sizeof provs, "%s", provider);
    else if ((rc = efax_topo_providers(provs, sizeof provs)) || !provs[0]) {
        fprintf(stderr, "info: no libfabric provider offers RDM endpoints with RMA here; install libfabric "
                        "(Debian: apt-get install libfabric1 libfabric-bin)\n");
        return 1;
    }
    printf("# libfabric %u.%u, efax %s; providers with RDM + RMA: %s\n", FI_MAJOR(fi_version()),
           FI_MINOR(fi_version()), EFAX_VERSION_STRING, provs);
    efax_bench_nic_header(stdout);

    /* 2. every NIC of each, with its attributes */
    for (tok = strtok_r(provs, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        efax_nic_info nics[64];
        int n = 0;
        if ((rc = efax_topo_list(tok, nics, 64, &n)) || n == 0) {
            fprintf(stderr, "info: provider '%s' is not available here\n", tok);
            if (provider) return 1;
            continue;
        }
        for (int i = 0; i < n && i < 64; i++, total++) efax_bench_nic_row(stdout, jf, "info", &nics[i]);
    }
    if (jf && jf != stdout) fclose(jf);
    printf("# %d NIC(s). efax picks efa, else tcp, else shm (override: --provider or EFAX_PROVIDER; "
           "NICs: --nics or EFAX_NICS)\n",
           total);
    return total ? 0 : 1;
}
