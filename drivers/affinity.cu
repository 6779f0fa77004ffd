/* affinity — the "affinity" experiment: every GPU of this host with what decides how it talks to
   the network: PCI address, compute capability, memory, dmabuf and GPUDirect RDMA support,
   NVLink links and their speed (NVML), NUMA node, nearby CPUs and the nearest NICs of the
   provider by PCI distance. A table, and --json.

   nvcc -O2 -arch=sm_90 -I. drivers/affinity.cu -o affinity \
       $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix -ldl
   ./affinity --provider efa
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_cuda.h"
#include "efax_bench.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *provider = NULL, *json = NULL;
    efax_optdef defs[] = {
        {"provider", 0, EFAX_OPT_STR, &provider, 0, 0, NULL, "NAME",
         "whose NICs to match (default efa > tcp > shm)"},
        {"json", 0, EFAX_OPT_STR, &json, 0, 0, NULL, "FILE",
         "also write one JSON record per GPU (- for stdout)"},
        EFAX_OPT_END,
    };
    efax_nic_info nics[64];
    char err[256], why[128];
    int rc, nn = 0, ngpu;
    FILE *jf = NULL;

    /* 1. options, GPUs, the provider's NICs */
    rc = efax_args_parse(argc, argv, defs, "affinity", "Lists this host's GPUs and the NICs nearest to each.",
                         err, sizeof err);
    if (rc == 1) return 0;
    if (rc) {
        fprintf(stderr, "affinity: %s\n", err);
        return 2;
    }
    if (!(ngpu = efax_cuda_devices(why, sizeof why))) {
        printf("affinity: skipped: no CUDA device (%s)\n", why);
        return 0;
    }
    if (efax_topo_list(provider, nics, 64, &nn)) nn = 0;
    if (nn > 64) nn = 64;
    if (json) jf = strcmp(json, "-") ? fopen(json, "w") : stdout;
    if (json && !jf) {
        fprintf(stderr, "affinity: --json %s: cannot open\n", json);
        return 2;
    }

    /* 2. one row per GPU */
    printf("%-4s %-26s %-13s %4s %8s %6s %4s %9s %5s %-12s %s\n", "gpu", "name", "PCI", "cc", "mem GiB",
           "dmabuf", "gdr", "NVLink", "numa", "cpus",
           nn ? "nearest NICs" : "nearest NICs (no NIC of the provider has a PCI address)");
    for (int d = 0; d < ngpu; d++) {
        efax_gpu_info g;
        char links[32], nearl[256] = "";
        size_t u = 0;
        if ((rc = efax_cuda_gpu_info(d, nics, nn, &g))) return 1;
        if (g.nvlinks)
            snprintf(links, sizeof links, "%dx v%d", g.nvlinks, g.nvlink_version);
        else
            snprintf(links, sizeof links, "-");
        for (int i = 0; i < g.nnear; i++)
            u += (size_t)snprintf(nearl + u, sizeof nearl - u, "%s%s", i ? "," : "", nics[g.near[i]].name);
        printf("%-4d %-26.26s %-13s %d.%d %8.1f %6s %4s %9s %5d %-12s %s\n", d, g.name, g.pci, g.cc_major,
               g.cc_minor, (double)g.mem_bytes / (1ull << 30), g.dmabuf ? "yes" : "no", g.gdr ? "yes" : "no",
               links, g.numa, g.cpus[0] ? g.cpus : "-", g.nnear ? nearl : "-");
        if (!jf) continue;
        fprintf(
            jf,
            "{\"schema\":1,\"driver\":\"affinity\",\"gpu\":%d,\"name\":\"%s\",\"pci\":\"%s\","
            "\"cc\":\"%d.%d\",\"mem_bytes\":%zu,\"sms\":%d,\"dmabuf\":%s,\"gdr\":%s,\"nvlinks\":%d,"
            "\"nvlink_version\":%d,\"nvlink_gbs\":%.6g,\"numa\":%d,\"cpus\":\"%s\",\"nearest_nics\":\"%s\","
            "\"pci_depth\":%d}\n",
            d, g.name, g.pci, g.cc_major, g.cc_minor, g.mem_bytes, g.sms, g.dmabuf ? "true" : "false",
            g.gdr ? "true" : "false", g.nvlinks, g.nvlink_version, g.nvlink_gbs, g.numa, g.cpus, nearl,
            g.near_depth);
    }
    if (nn)
        printf("# NICs of provider %s: %d; a rank's proxy/progress thread pins itself to its GPU's CPUs\n",
               nics[0].provider, nn);
    if (jf && jf != stdout) fclose(jf);
    return 0;
}
