/* info — the "efa" experiment: every provider and NIC efax can use on this host, with the
   attributes that decide how efax drives it.

   cc -O2 -I. drivers/info.c -o info $(pkg-config --cflags --libs libfabric pmix)
   ./info                      # every provider with RDM + RMA
   ./info --provider efa --json -
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void bits(char *buf, size_t len, uint64_t v, const uint64_t *flag, const char *const *name, int n) {
    size_t u = 0;
    int i;
    buf[0] = 0;
    for (i = 0; i < n; i++)
        if (v & flag[i]) u += (size_t)snprintf(buf + u, len > u ? len - u : 0, "%s%s", u ? "|" : "", name[i]);
    if (!u) snprintf(buf, len, "-");
}

static void mr_mode_str(char *buf, size_t len, uint64_t v) {
    static const uint64_t f[] = {FI_MR_LOCAL,    FI_MR_VIRT_ADDR, FI_MR_ALLOCATED, FI_MR_PROV_KEY,
                                 FI_MR_ENDPOINT, FI_MR_HMEM,      FI_MR_RAW,       FI_MR_RMA_EVENT};
    static const char *const n[] = {"LOCAL",    "VIRT_ADDR", "ALLOCATED", "PROV_KEY",
                                    "ENDPOINT", "HMEM",      "RAW",       "RMA_EVENT"};
    bits(buf, len, v, f, n, 8);
}

static void mode_str(char *buf, size_t len, uint64_t v) {
    /* FI_LOCAL_MR is a 1.x mode bit; 2.x deprecates it (fi_mr(3): FI_MR_LOCAL replaces it) */
#if FI_MAJOR_VERSION < 2
    static const uint64_t f[] = {FI_CONTEXT,    FI_CONTEXT2,   FI_ASYNC_IOV,
                                 FI_RX_CQ_DATA, FI_MSG_PREFIX, FI_LOCAL_MR};
#else
    static const uint64_t f[] = {FI_CONTEXT, FI_CONTEXT2, FI_ASYNC_IOV, FI_RX_CQ_DATA, FI_MSG_PREFIX};
#endif
    static const char *const n[] = {"CONTEXT",    "CONTEXT2",   "ASYNC_IOV",
                                    "RX_CQ_DATA", "MSG_PREFIX", "LOCAL_MR"};
    bits(buf, len, v, f, n, (int)(sizeof f / sizeof f[0]));
}

/* Single-thread memcpy bandwidth over buffers of `size` bytes: the ceiling of the shm provider,
   which copies every byte once. GB/s = bytes copied / time, best of several rounds. */
static double memcpy_gbs(uint64_t size) {
    uint8_t *a = (uint8_t *)efax_host_alloc(size); /* as the benchmarks allocate */
    uint8_t *b = (uint8_t *)efax_host_alloc(size);
    double best = 0;
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, size);
    memset(b, 2, size);
    for (int round = 0; round < 7; round++) {
        uint64_t t0 = efax_now_ns(), reps = 0;
        do {
            memcpy(round & 1 ? a : b, round & 1 ? b : a, size);
            reps++;
        } while (efax_now_ns() - t0 < 200000000ull);
        double gbs = (double)(size * reps) / (double)(efax_now_ns() - t0);
        if (gbs > best) best = gbs;
    }
    free(a);
    free(b);
    return best;
}

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
    char err[256], provs[512], *tok, *save = NULL;
    FILE *jf = NULL;
    int rc, total = 0;

    rc = efax_args_parse(argc, argv, defs, "info",
                         "Lists the libfabric providers and NICs efax can use here.", err, sizeof err);
    if (rc == 1) return 0;
    if (rc) {
        fprintf(stderr, "info: %s\n", err);
        return 2;
    }
    if (mc) {
        printf("memcpy %llu bytes, one thread: %.2f GB/s\n", (unsigned long long)mc, memcpy_gbs(mc));
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
    printf("%-14s %-18s %-13s %8s %4s %-38s %-24s %4s %7s %6s %5s %5s %4s\n", "provider", "NIC", "PCI",
           "Gbps", "numa", "mr_mode", "mode", "cqd", "max_msg", "inject", "tx", "rx", "hmem");

    /* 2. every NIC of each, with its attributes */
    for (tok = strtok_r(provs, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        efax_nic_info nics[64];
        int n = 0, i;
        if ((rc = efax_topo_list(tok, nics, 64, &n)) || n == 0) {
            fprintf(stderr, "info: provider '%s' is not available here\n", tok);
            if (provider) return 1;
            continue;
        }
        for (i = 0; i < n && i < 64; i++) {
            const efax_nic_info *x = &nics[i];
            char mr[96], md[64], gb[16], mm[24];
            mr_mode_str(mr, sizeof mr, x->mr_mode);
            mode_str(md, sizeof md, x->mode);
            if (x->link_gbps > 0)
                snprintf(gb, sizeof gb, "%.0f", x->link_gbps);
            else
                snprintf(gb, sizeof gb, "-");
            efax_fmt_size(x->max_msg_size, mm, sizeof mm);
            if (x->max_msg_size >= (1ull << 62)) snprintf(mm, sizeof mm, "inf");
            printf("%-14s %-18s %-13s %8s %4d %-38s %-24s %4zu %7s %6zu %5zu %5zu %4s%s\n", x->provider,
                   x->name, x->pci[0] ? x->pci : "-", gb, x->numa, mr, md, x->cq_data_size, mm,
                   x->inject_size, x->tx_size, x->rx_size, x->hmem ? "yes" : "no",
                   x->loopback ? "  (loopback)" : "");
            if (jf)
                fprintf(
                    jf,
                    "{\"schema\":1,\"driver\":\"info\",\"provider\":\"%s\",\"nic\":\"%s\",\"fabric\":\"%s\","
                    "\"pci\":\"%s\",\"link_gbps\":%.6g,\"numa\":%d,\"mr_mode\":\"%s\",\"mode\":\"%s\","
                    "\"cq_data_size\":%zu,\"max_msg_size\":%llu,\"inject_size\":%zu,\"tx_size\":%zu,"
                    "\"rx_size\":%zu,\"mr_key_size\":%zu,\"hmem\":%s,\"loopback\":%s}\n",
                    x->provider, x->name, x->fabric, x->pci, x->link_gbps, x->numa, mr, md, x->cq_data_size,
                    (unsigned long long)x->max_msg_size, x->inject_size, x->tx_size, x->rx_size,
                    x->mr_key_size, x->hmem ? "true" : "false", x->loopback ? "true" : "false");
            total++;
        }
    }
    if (jf && jf != stdout) fclose(jf);
    printf("# %d NIC(s). efax picks efa, else tcp, else shm (override: --provider or EFAX_PROVIDER; "
           "NICs: --nics or EFAX_NICS)\n",
           total);
    return total ? 0 : 1;
}
