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

   cc -O2 -I. drivers/doctor.c -o doctor $(pkg-config --cflags --libs libfabric pmix)
   nvcc -O2 -x cu -I. drivers/doctor.c -o doctor_cuda $(pkg-config --cflags --libs libfabric pmix)
   ./doctor                       # this host
   mpirun -H a,b --map-by node ./doctor --json doctor.jsonl
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#ifdef __CUDACC__
#include "efax_cuda.h"
#endif
#include "efax_bench.h"

#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/syscall.h>

enum { L_PASS, L_INFO, L_WARN, L_FAIL, L_SKIP, L_COUNT };
static const char *const level_name[L_COUNT] = {"PASS", "INFO", "WARN", "FAIL", "SKIP"};

typedef struct finding {
    int level;
    char check[16];   /* what was looked at: "libfabric", "nic", "gpu", "memlock", ... */
    char subject[48]; /* which one: a NIC's or a GPU's name, or "" */
    char text[400];
    char fix[300];
} finding;

#define MAX_FINDINGS 192
#define PACKED 49152 /* one host's findings as text, for the gather */

typedef struct doctor {
    const char *provider, *nics, *json, *csv;
    bool quiet, expect_efa;
    int timeout_ms;
    efax_boot job;  /* the launcher's job (or this process alone) */
    efax_prov prov; /* what the provider efax uses is (efax_ctx_caps; EFAX_PROV_OTHER before one opened) */
    finding f[MAX_FINDINGS];
    int n;
    char facts[512]; /* what hosts must agree on: libfabric, provider, NICs */
} doctor;

#if defined(__GNUC__)
__attribute__((format(printf, 6, 7)))
#endif
static void
add(doctor *d, int level, const char *check, const char *subject, const char *fix, const char *fmt, ...) {
    va_list ap;
    finding *f;
    if (d->n >= MAX_FINDINGS) return;
    f = &d->f[d->n++];
    f->level = level;
    snprintf(f->check, sizeof f->check, "%s", check);
    snprintf(f->subject, sizeof f->subject, "%s", subject ? subject : "");
    snprintf(f->fix, sizeof f->fix, "%s",
             fix && (level == L_WARN || level == L_FAIL) ? fix : ""); /* a fix only for a fault */
    va_start(ap, fmt);
    vsnprintf(f->text, sizeof f->text, fmt, ap);
    va_end(ap);
}

static double ms_since(uint64_t t0) { return (double)(efax_now_ns() - t0) / 1e6; }

static int read_file(const char *path, char *buf, size_t len) {
    FILE *fp = fopen(path, "r");
    size_t n;
    if (!fp) return -1;
    n = fread(buf, 1, len - 1, fp);
    fclose(fp);
    buf[n] = 0;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = 0;
    return 0;
}

/* "a|b|c" of the bits of v that are set (names[i] for flags[i]), "-" for none */
static const char *bits(char *buf, size_t len, uint64_t v, const uint64_t *flags, const char *const *names,
                        int n) {
    size_t u = 0;
    buf[0] = 0;
    for (int i = 0; i < n; i++)
        if ((v & flags[i]) && u < len)
            u += (size_t)snprintf(buf + u, len - u, "%s%s", u ? "|" : "", names[i]);
    if (!u) snprintf(buf, len, "-");
    return buf;
}

static const char *mr_mode_str(char *buf, size_t len, uint64_t v) {
    static const uint64_t f[] = {FI_MR_LOCAL,    FI_MR_VIRT_ADDR, FI_MR_ALLOCATED, FI_MR_PROV_KEY,
                                 FI_MR_ENDPOINT, FI_MR_HMEM,      FI_MR_RAW,       FI_MR_RMA_EVENT};
    static const char *const n[] = {"LOCAL",    "VIRT_ADDR", "ALLOCATED", "PROV_KEY",
                                    "ENDPOINT", "HMEM",      "RAW",       "RMA_EVENT"};
    return bits(buf, len, v, f, n, 8);
}

/* ---------------------------------------------------------------------------------- libfabric */

static void check_libfabric(doctor *d, char *provs, size_t plen, char *pick, size_t klen) {
    uint32_t rt = fi_version(), asked = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
    char lib[PATH_MAX] = "?", line[PATH_MAX + 128];
    FILE *maps = fopen("/proc/self/maps", "r");
    int rc;
    while (maps && fgets(line, sizeof line, maps)) { /* the file the library was mapped from */
        char *at = strchr(line, '/');
        if (!at || !strstr(at, "/libfabric.so")) continue;
        snprintf(lib, sizeof lib, "%s", at);
        lib[strcspn(lib, "\n")] = 0;
        break;
    }
    if (maps) fclose(maps);
    if (FI_VERSION_LT(rt, asked))
        add(d, L_FAIL, "libfabric", "",
            "run the libfabric this efax was built against (LD_LIBRARY_PATH), or rebuild against this one",
            "libfabric %u.%u loaded (%s) is older than the headers efax was built with (%u.%u): fi_getinfo "
            "refuses API %u.%u",
            FI_MAJOR(rt), FI_MINOR(rt), lib, FI_MAJOR_VERSION, FI_MINOR_VERSION, FI_MAJOR_VERSION,
            FI_MINOR_VERSION);
    else
        add(d, L_PASS, "libfabric", "", NULL,
            "libfabric %u.%u loaded (%s); efax %s built against headers %u.%u, asks for API %u.%u",
            FI_MAJOR(rt), FI_MINOR(rt), lib, EFAX_VERSION_STRING, FI_MAJOR_VERSION, FI_MINOR_VERSION,
            FI_MAJOR_VERSION, FI_MINOR_VERSION);
    provs[0] = pick[0] = 0;
    if ((rc = efax_topo_providers(provs, plen)) || !provs[0]) {
        add(d, L_FAIL, "providers", "",
            "install libfabric (Debian: apt-get install libfabric1 libfabric-bin; AWS: the EFA installer)",
            "no libfabric provider offers RDM endpoints with RMA here%s%s", rc ? ": " : "",
            rc ? efax_strerror(rc) : "");
        return;
    }
    rc = efax_topo_pick_provider(d->provider, pick, klen);
    if (rc)
        add(d, L_FAIL, "providers", "",
            "name one of the providers listed (--provider) or unset EFAX_PROVIDER",
            "providers with RDM + RMA: %s; but '%s' is not one of them (%s)", provs,
            d->provider               ? d->provider
            : getenv("EFAX_PROVIDER") ? getenv("EFAX_PROVIDER")
                                      : "?",
            efax_strerror(rc));
    else
        add(d, L_PASS, "providers", "", NULL, "providers with RDM + RMA: %s; efax uses %s (%s)", provs, pick,
            d->provider               ? "--provider"
            : getenv("EFAX_PROVIDER") ? "EFAX_PROVIDER"
                                      : "efa, else tcp, else shm");
}

/* EFA devices the kernel has (vendor 0x1d0f under /sys/class/infiniband) against what libfabric offers. */
static void check_efa(doctor *d) {
    char dir[PATH_MAX], names[512], dev[PATH_MAX];
    int nefa = 0,
        n = efax_topo_efa_devices(names, sizeof names); /* vendor 0x1d0f under /sys/class/infiniband */
    bool efa_prov =
        efax_topo_list("efa", NULL, 0, &nefa) == 0 && nefa > 0; /* libfabric's efa sees a device */
    snprintf(dir, sizeof dir, "%s/sys/class/infiniband", efax_topo_sysfs_root());
    snprintf(dev, sizeof dev, "%s/dev/infiniband", efax_topo_sysfs_root());
    if (n && !efa_prov)
        add(d, L_FAIL, "efa", "",
            access(dev, F_OK)
                ? "pass the EFA devices into the container (docker run "
                  "--device=/dev/infiniband/uverbs0 ..., Kubernetes: the EFA device plugin's "
                  "vpc.amazonaws.com/efa resource)"
                : "use the EFA installer's libfabric (LD_LIBRARY_PATH=/opt/amazon/efa/lib, or build "
                  "efax with make LIBFABRIC=/opt/amazon/efa), or rebuild libfabric with --enable-efa",
            "%d EFA device(s) here (%s) but the libfabric loaded offers no efa provider%s: efax refuses to "
            "run "
            "(it would measure the ENA through tcp) unless a provider is named (--provider tcp)",
            n, names,
            access(dev, F_OK) ? " and /dev/infiniband is missing (a container without the devices?)" : "");
    else if (n)
        add(d, L_PASS, "efa", "", NULL, "%d EFA device(s) (%s), and libfabric's efa provider sees them", n,
            names);
    else
        add(d, d->expect_efa ? L_FAIL : L_SKIP, "efa", "",
            d->expect_efa ? "run on an instance with EFA attached (p4d, p5, ...), with the EFA driver loaded"
                          : NULL,
            "no EFA device here (none with vendor 0x1d0f under %s): nothing this machine runs is EFA, and "
            "its tcp/shm "
            "numbers are not EFA numbers",
            dir);
    if (FI_VERSION_LT(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), FI_VERSION(1, 18)))
        add(d, n ? L_WARN : L_INFO, "api", "",
            "build efax against libfabric >= 1.18 headers (the EFA installer's: make "
            "LIBFABRIC=/opt/amazon/efa)",
            "efax asks for API %u.%u: below 1.18 efa turns device RDMA off by default on first-generation "
            "EFA devices "
            "and never lets the provider call CUDA (prov/efa rdm/efa_rdm_util.c efa_rdm_get_use_device_rdma, "
            "efa_user_info.c)%s",
            FI_MAJOR_VERSION, FI_MINOR_VERSION,
            n ? "" : "; no EFA here, so it matters only where you take this build");
}

/* ---------------------------------------------------------------------------------------- NICs */

/* One write of len bytes from src to dst, both this rank's, through the context's first NIC:
   announced, waited for, checked byte by byte. Returns 0, -EFAX_E_VERIFY or the error. */
static int write_once(efax_ctx *ctx, efax_buf *src, efax_buf *dst, uint64_t len, uint32_t seq, int timeout_ms,
                      double *us) {
    efax_write_desc w;
    efax_xfer x;
    efax_expect e;
    uint64_t t0;
    int rc;
    memset(&w, 0, sizeof w);
    memset(&x, 0, sizeof x);
    w.from = w.to = efax_ctx_rank(ctx);
    w.src = &src->mr;
    w.dst = &dst->mr;
    w.size = len;
    w.tag = 1;
    w.seq = seq;
    src->ops->fill(src, 0, len, w.from, seq);
    dst->ops->poison(dst, 0, len);
    t0 = efax_now_ns();
    rc = efax_write(ctx, &x, &w, NULL);
    if (!rc) rc = efax_expect_write(ctx, &e, &w);
    if (!rc) rc = efax_expect_wait(ctx, &e, timeout_ms);
    if (!rc) rc = efax_wait(ctx, &x, timeout_ms);
    *us = (double)(efax_now_ns() - t0) / 1e3;
    if (!rc && dst->ops->check(dst, 0, len, w.from, seq)) rc = -EFAX_E_VERIFY;
    return rc;
}

/* What one NIC (or GPU-and-NIC) pair did from cold: open, connect, register, first write, then warm. */
typedef struct cold {
    double open_ms, connect_ms, reg_ms, first_us, warm_us;
    char path[32];    /* how the buffer reached the NIC (host, dmabuf, hmem, staged) */
    efax_caps caps;   /* what the context found the provider can do (efax_ctx_caps) */
    char failed[320]; /* which step failed and why; "" when none did */
} cold;

/* Opens a context on NIC `nic` of `provider` alone (with cd's other fields), connects it to this
   process alone, registers two buffers of `kind`, and writes len bytes between them: once cold,
   then five times warm (best). */
static int cold_start(doctor *d, efax_ctx_desc cd, const char *nic, const efax_mem_ops *kind, uint64_t len,
                      cold *c) {
    efax_boot one;
    efax_boot_desc bd;
    efax_ctx ctx;
    efax_buf src, dst;
    uint64_t t0;
    int rc;
    memset(c, 0, sizeof *c);
    memset(&one, 0, sizeof one);
    memset(&ctx, 0, sizeof ctx);
    memset(&src, 0, sizeof src);
    memset(&dst, 0, sizeof dst);
    memset(&bd, 0, sizeof bd);
    bd.force = "single";
    bd.timeout_ms = d->timeout_ms;
    cd.nics = nic;
    cd.timeout_ms = d->timeout_ms;
    if ((rc = efax_boot_init(&one, &bd))) {
        snprintf(c->failed, sizeof c->failed, "a one-rank bootstrap failed: %s", efax_strerror(rc));
        return rc;
    }
    t0 = efax_now_ns();
    rc = efax_ctx_init(&ctx, &cd);
    c->open_ms = ms_since(t0);
    if (rc)
        snprintf(c->failed, sizeof c->failed, "opening it failed: %s", efax_strerror(rc));
    else
        c->caps = *efax_ctx_caps(&ctx);
    t0 = efax_now_ns();
    if (!rc && (rc = efax_ctx_connect(&ctx, &one)))
        snprintf(c->failed, sizeof c->failed, "connecting to itself failed: %s", efax_strerror(rc));
    c->connect_ms = ms_since(t0);
    t0 = efax_now_ns();
    if (!rc && (rc = efax_buf_alloc(&ctx, &src, kind, len, EFAX_MR_WRITE_SRC)) == 0)
        rc = efax_buf_alloc(&ctx, &dst, kind, len, EFAX_MR_WRITE_DST);
    c->reg_ms = ms_since(t0) / 2;
    if (rc && !c->failed[0])
        snprintf(c->failed, sizeof c->failed, "registering %s memory failed: %s", kind->name,
                 efax_strerror(rc));
    if (!rc) snprintf(c->path, sizeof c->path, "%s", dst.path);
    if (!rc && (rc = efax_mr_exchange(&dst.mr, &one)))
        snprintf(c->failed, sizeof c->failed, "exchanging its key failed: %s", efax_strerror(rc));
    if (!rc && (rc = write_once(&ctx, &src, &dst, len, 0, d->timeout_ms, &c->first_us)))
        snprintf(c->failed, sizeof c->failed, "a %llu-byte write to itself %s: %s", (unsigned long long)len,
                 rc == -EFAX_E_VERIFY ? "landed with wrong bytes" : "did not land", efax_strerror(rc));
    c->warm_us = 0;
    for (uint32_t i = 1; !rc && i <= 5; i++) {
        double us;
        if ((rc = write_once(&ctx, &src, &dst, len, i, d->timeout_ms, &us)))
            snprintf(c->failed, sizeof c->failed, "write %u of %llu bytes to itself failed: %s", i,
                     (unsigned long long)len, efax_strerror(rc));
        else if (c->warm_us == 0 || us < c->warm_us)
            c->warm_us = us;
    }
    efax_buf_free(&dst);
    efax_buf_free(&src);
    efax_ctx_deinit(&ctx);
    efax_boot_deinit(&one);
    return rc;
}

/* NUMA node this process is bound to (every CPU it may run on in one node), or -1. */
/* The NUMA node of a CPU (<sysfs>/devices/system/cpu/cpuN/nodeK), or -1. */
static int cpu_node(int cpu) {
    char path[PATH_MAX];
    for (int k = 0; k < 64; k++) {
        snprintf(path, sizeof path, "%s/sys/devices/system/cpu/cpu%d/node%d", efax_topo_sysfs_root(), cpu, k);
        if (access(path, F_OK) == 0) return k;
    }
    return -1;
}

static int my_numa(void) {
    cpu_set_t set;
    int node = -1;
    if (sched_getaffinity(0, sizeof set, &set)) return -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        int mine;
        if (!CPU_ISSET(cpu, &set)) continue;
        mine = cpu_node(cpu);
        if (mine < 0 || (node >= 0 && mine != node)) return -1;
        node = mine;
    }
    return node;
}

static int numa_nodes(void) {
    char path[PATH_MAX];
    int n = 0;
    for (int k = 0; k < 64; k++) {
        snprintf(path, sizeof path, "%s/sys/devices/system/node/node%d", efax_topo_sysfs_root(), k);
        if (access(path, F_OK) == 0) n++;
    }
    return n;
}

static void check_nic(doctor *d, const char *prov, const efax_nic_info *ni, int node, int nodes) {
    char mr[96], mm[24], gb[48], when[128], sub[48];
    efax_ctx_desc cd;
    efax_os_counters oc, before;
    uint64_t lost = 0, sent = 0;
    int have_before;
    char moved[400];
    cold c;
    snprintf(sub, sizeof sub, "%s", ni->name);
    if (ni->max_msg_size >= (1ull << 62))
        snprintf(mm, sizeof mm, "unlimited");
    else
        efax_fmt_size(ni->max_msg_size, mm, sizeof mm);
    if (ni->link_gbps > 0)
        snprintf(gb, sizeof gb, "link %.4g Gbps", ni->link_gbps);
    else
        snprintf(gb, sizeof gb, "link speed unknown");
    add(d, L_INFO, "nic", sub, NULL,
        "%s: PCI %s, NUMA %d, %s, mr_mode %s, max_msg %s, inject %zu B, cq_data %zu B, FI_HMEM %s, "
        "tx/rx queues %zu/%zu",
        ni->provider, ni->pci[0] ? ni->pci : "-", ni->numa, gb, mr_mode_str(mr, sizeof mr, ni->mr_mode), mm,
        ni->inject_size, ni->cq_data_size, ni->hmem ? "yes" : "no", ni->tx_size, ni->rx_size);
    if (ni->cq_data_size < 4)
        add(d, L_FAIL, "nic", sub, "use a provider with 4 bytes of CQ data (efa, tcp, shm)",
            "carries %zu bytes of immediate data; efax needs 4 (rank, tag, sequence)", ni->cq_data_size);
    if (getenv("EFAX_LINE_GBPS") && strtod(getenv("EFAX_LINE_GBPS"), NULL) > 0)
        add(d, L_INFO, "nic", sub, NULL, "line rate %s Gbps, as EFAX_LINE_GBPS says (the provider's: %s)",
            getenv("EFAX_LINE_GBPS"), ni->link_gbps > 0 ? gb : "none");
    else if (ni->link_gbps <= 0 && d->prov == EFAX_PROV_SHM)
        add(d, L_INFO, "nic", sub, NULL,
            "shared memory has no line rate: its results are held against memcpy (./info --memcpy)");
    else if (ni->link_gbps <= 0)
        add(d, L_WARN, "nic", sub,
            "pass --line-rate GBPS (or EFAX_LINE_GBPS) with the rate the link really has",
            "no line rate known (%s): results show '-' for %% of line",
            ni->pci[0] ? "the provider and sysfs report none"
                       : "a virtual interface (veth, bridge, tunnel) has no rate of its own");
    if (nodes > 1 && ni->numa >= 0 && node >= 0 && node != ni->numa)
        add(d, L_WARN, "nic", sub,
            "bind each rank to the NUMA node of its NICs (mpirun --bind-to numa; srun --cpu-bind)",
            "sits on NUMA node %d but this process runs on node %d: every byte crosses the socket link "
            "(Mooncake's "
            "EFA notes: 20 Gbps across, 90 near)",
            ni->numa, node);
    memset(&cd, 0, sizeof cd);
    cd.provider = prov;
    have_before = efax_os_counters_nic(ni, &before) == 0;
    cold_start(d, cd, ni->name, efax_mem_host(), 65536, &c);
    if (c.failed[0]) {
        add(d, L_FAIL, "nic", sub,
            "run with FI_LOG_LEVEL=warn to see the provider's reason; check the interface is up "
            "(ip link) and, on EFA, the security group allows all traffic to itself",
            "%s", c.failed);
    } else {
        snprintf(when, sizeof when, "open %.1f ms, connect %.2f ms, register %.2f ms", c.open_ms,
                 c.connect_ms, c.reg_ms);
        add(d, L_PASS, "nic", sub, NULL,
            "a 64 KiB write to itself landed, every byte right: first %.0f us (cold), then %.0f us; "
            "%s",
            c.first_us, c.warm_us, when);
    }
    if (!c.failed[0] && d->prov == EFAX_PROV_EFA) { /* efax_caps.emulated_write, from its endpoint */
        if (c.caps.emulated_write == 1)
            add(d, L_WARN, "nic", sub,
                "use an instance whose EFA does RDMA write (p5, p5en, p6) with libfabric >= 1.18 API; "
                "FI_EFA_USE_DEVICE_RDMA must not be 0",
                "efa EMULATES RDMA writes here (FI_OPT_EFA_EMULATED_WRITE): writes "
                "move as messages, and WRITE results are not RDMA writes");
        else if (c.caps.emulated_write == 0)
            add(d, L_PASS, "nic", sub, NULL, "efa does RDMA writes in the device (not emulated)");
        else
            add(d, L_SKIP, "nic", sub, NULL,
                "whether efa emulates writes: this libfabric cannot say (FI_OPT_EFA_EMULATED_WRITE, "
                "1.18+)");
    }
    if (efax_os_counters_nic(ni, &oc) == 0) {
        efax_os_counters delta;
        if (have_before && oc.lifespan_ms > 0) { /* the kernel's cached values: read them again once stale */
            struct timespec ts = {0, (long)(oc.lifespan_ms > 999 ? 999 : oc.lifespan_ms + 1) * 1000000L};
            nanosleep(&ts, NULL);
            efax_os_counters_nic(ni, &oc);
        }
        if (have_before) efax_os_counters_delta(&before, &oc, &delta);
        if (have_before && efax_os_counters_events(&delta, moved, sizeof moved))
            add(d, L_WARN, "counters", sub,
                "look at the NIC and its peers: run the rail finder (rails) between hosts; on EFA check the "
                "security group and the instance's health",
                "during the doctor's own writes to itself: %s", moved);
        if (efax_os_counters_events(&oc, moved, sizeof moved))
            add(d, L_INFO, "counters", sub, NULL, "since boot (%s %s): %s", oc.source, oc.dev, moved);
        efax_os_counters_loss(&oc, &lost, &sent);
        if (sent >= 10000 && lost * 100 > sent)
            add(d, L_WARN, "counters", sub,
                "look for a bad cable, port or peer: run the rail finder (write --rails) between hosts",
                "since boot the OS counts %llu of %llu packets sent again or dropped (%.1f%%; %s %s)",
                (unsigned long long)lost, (unsigned long long)sent, 100.0 * (double)lost / (double)sent,
                oc.source, oc.dev);
        else
            add(d, L_PASS, "counters", sub, NULL,
                "the OS counts this NIC (%s %s: %d counters; since boot %llu of %llu packets "
                "resent or dropped); results carry them per row",
                oc.source, oc.dev, oc.n, (unsigned long long)lost, (unsigned long long)sent);
    } else {
        add(d, L_SKIP, "counters", sub, NULL, "the OS keeps no counters efax can read for it (%s)",
            d->prov == EFAX_PROV_SHM ? "shared memory has no device"
                                     : "no hw_counters or interface statistics by this name");
    }
}

static void check_nics(doctor *d, const char *prov) {
    efax_ctx_desc cd;
    efax_ctx ctx;
    efax_nic_info nics[EFAX_MAX_NICS];
    int rc, n = 0, node = my_numa(), nodes = numa_nodes();
    size_t u;
    memset(&cd, 0, sizeof cd);
    memset(&ctx, 0, sizeof ctx);
    cd.provider = prov;
    cd.nics = d->nics;
    if ((rc = efax_ctx_init(&ctx, &cd))) {
        add(d, L_FAIL, "nics", "",
            "see the message above; --nics NAME,... picks NICs by name (./info lists them)",
            "efax cannot open the NICs of %s%s%s: %s", prov, d->nics ? " named " : "", d->nics ? d->nics : "",
            efax_strerror(rc));
        efax_ctx_deinit(&ctx);
        return;
    }
    n = efax_ctx_nnics(&ctx);
    d->prov = efax_ctx_caps(&ctx)->prov;
    for (int i = 0; i < n; i++) nics[i] = *efax_ctx_nic(&ctx, i);
    u = strlen(d->facts);
    snprintf(d->facts + u, sizeof d->facts - u, "; provider %s; NICs", efax_ctx_provider(&ctx));
    for (int i = 0; i < n; i++) {
        u = strlen(d->facts);
        snprintf(d->facts + u, sizeof d->facts - u, "%s%s", i ? "," : " ", nics[i].name);
    }
    add(d, L_INFO, "nics", "", NULL, "efax opens %d NIC(s) of %s: %s (%s)", n, efax_ctx_provider(&ctx),
        strstr(d->facts, "NICs ") + 5, efax_ctx_nic_choice(&ctx)[0] ? efax_ctx_nic_choice(&ctx) : "-");
    if (d->prov == EFAX_PROV_TCP || d->prov == EFAX_PROV_SHM)
        add(d, L_INFO, "nics", "", NULL,
            "%s carries RMA in software (%s): nothing it moves is RDMA, and its numbers say what "
            "this host's %s does, not what a NIC does",
            prov, d->prov == EFAX_PROV_TCP ? "sockets" : "shared-memory copies",
            d->prov == EFAX_PROV_TCP ? "network stack" : "memory");
    efax_ctx_deinit(&ctx);
    for (int i = 0; i < n; i++) check_nic(d, prov, &nics[i], node, nodes);
}

/* ---------------------------------------------------------------------------------------- host */

static void check_host(doctor *d) {
    struct rlimit rl;
    char buf[256], thp[128];
    bool efa = d->prov == EFAX_PROV_EFA;
    long total = -1, freep = -1, sz = -1;
    FILE *fp;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
        char cur[32];
        if (rl.rlim_cur == RLIM_INFINITY)
            snprintf(cur, sizeof cur, "unlimited");
        else
            efax_fmt_size((uint64_t)rl.rlim_cur, cur, sizeof cur);
        if (rl.rlim_cur == RLIM_INFINITY)
            add(d, L_PASS, "memlock", "", NULL, "locked-memory limit: unlimited");
        else
            add(d, efa ? L_FAIL : L_INFO, "memlock", "",
                "ulimit -l unlimited (/etc/security/limits.d; Slurm: PropagateResourceLimits; "
                "docker run --ulimit memlock=-1)",
                "locked-memory limit: %s%s", cur,
                efa ? ": efa pins every registered buffer, "
                      "and registrations beyond it fail"
                    : " (tcp and shm pin nothing; EFA needs it unlimited)");
    }
    if ((fp = fopen("/proc/meminfo", "r"))) {
        while (fgets(buf, sizeof buf, fp)) {
            sscanf(buf, "HugePages_Total: %ld", &total);
            sscanf(buf, "HugePages_Free: %ld", &freep);
            sscanf(buf, "Hugepagesize: %ld", &sz);
        }
        fclose(fp);
    }
    if (read_file("/sys/kernel/mm/transparent_hugepage/enabled", thp, sizeof thp))
        snprintf(thp, sizeof thp, "unknown");
    add(d, L_INFO, "hugepages", "", NULL,
        "transparent huge pages: %s; reserved huge pages: %ld of %ld kB (%ld free); efax asks "
        "for transparent huge pages for host buffers of 2 MiB and more unless a NIC is tcp (EFAX_HUGE_PAGES)",
        thp, total, sz, freep);
    if (read_file("/sys/devices/system/clocksource/clocksource0/current_clocksource", buf, sizeof buf))
        snprintf(buf, sizeof buf, "unknown");
    {
        char line[4096];
        bool constant = false, nonstop = false, x86 = false;
        if ((fp = fopen("/proc/cpuinfo", "r"))) {
            while (fgets(line, sizeof line, fp))
                if (!strncmp(line, "flags", 5)) {
                    x86 = true;
                    constant = strstr(line, " constant_tsc") != NULL;
                    nonstop = strstr(line, " nonstop_tsc") != NULL;
                    break;
                }
            fclose(fp);
        }
        if (x86 && !(constant && nonstop))
            add(d, L_WARN, "clock", "",
                "run on a host whose CPUs have an invariant TSC (constant_tsc and nonstop_tsc)",
                "clock source %s; the CPU's time-stamp counter is not invariant (constant_tsc %s, "
                "nonstop_tsc %s): efax's "
                "loop timer (efax_ticks) may drift",
                buf, constant ? "yes" : "no", nonstop ? "yes" : "no");
        else
            add(d, L_PASS, "clock", "", NULL, "clock source %s%s", buf,
                x86 ? "; invariant TSC (efax_ticks times loops with it)" : "");
    }
    {
        int nodes = numa_nodes(), node = my_numa();
        add(d, L_INFO, "cpu", "", NULL, "%ld CPUs, %d NUMA node(s)%s", sysconf(_SC_NPROCESSORS_ONLN), nodes,
            nodes < 2   ? ""
            : node >= 0 ? "; this process is bound to one"
                        : "; this process may run on every one (unbound)");
    }
}

/* >> cores: how far apart two CPUs are, and whether that holds still. A cache line handed back and
   forth between two threads, each pinned to one CPU, a thousand times a sample, 25 samples 40 ms
   apart. On a host whose CPUs are its own the samples agree within a few percent. On a 2-vCPU
   cloud VM (this project's CI machine) they came out ~105 ns or ~500 ns, switching every 0.2-1 s:
   the hypervisor runs the two vCPUs on cores that share a cache or on cores that do not, and every
   small-message figure (shm's and tcp's rates, a ping-pong's latency) swings 2-4x with it, for
   efax and libfabric's own tools alike. That is worth a line before a user compares figures.
   A sample during which either thread was preempted (its nonvoluntary context switches moved:
   another program wanted the CPU) measures the scheduler instead, and is left out; the guest sees
   no such switch when the hypervisor moves a vCPU, so those samples stay. */
#define BOUNCE_ROUNDS 1000
#define BOUNCE_SAMPLES 25
#define BOUNCE_GAP_MS 40

typedef struct bounce {
    int turn; /* 1: the partner's to answer; 0: the prober's; 2: the partner stops */
    int cpu;  /* the partner's */
    int tid;  /* the partner's thread id, once it runs there (0 before; -1: it could not) */
    uint64_t deadline;
    bool late; /* the partner gave up waiting */
} bounce;

typedef struct bounce_run {
    double ns[BOUNCE_SAMPLES]; /* the undisturbed samples' ns per round trip, sorted */
    int n;                     /* how many */
    int preempted;             /* samples left out */
} bounce_run;

static bool pin_me(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

/* A thread's nonvoluntary context switches so far (/proc), or -1 when unknown. */
static long preemptions(int tid) {
    char path[64], line[128];
    long v = -1;
    FILE *fp;
    snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
    if (!(fp = fopen(path, "r"))) return -1;
    while (v < 0 && fgets(line, sizeof line, fp)) sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v);
    fclose(fp);
    return v;
}

/* Spins until *turn is no longer `from`; false once the deadline passed. */
static bool await_turn(int *turn, int from, uint64_t deadline) {
    unsigned spins = 0;
    while (__atomic_load_n(turn, __ATOMIC_ACQUIRE) == from)
        if ((++spins & 4095) == 0 && efax_now_ns() > deadline) return false;
    return true;
}

static void *partner(void *arg) {
    bounce *b = (bounce *)arg;
    bool pinned = pin_me(b->cpu);
    __atomic_store_n(&b->tid, pinned ? (int)syscall(SYS_gettid) : -1, __ATOMIC_RELEASE);
    b->late = !pinned;
    while (!b->late) {
        if (!await_turn(&b->turn, 0, b->deadline)) b->late = true;
        if (b->late || __atomic_load_n(&b->turn, __ATOMIC_ACQUIRE) == 2) break;
        __atomic_store_n(&b->turn, 0, __ATOMIC_RELEASE);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Round trips of a cache line between CPUs a and b: BOUNCE_SAMPLES samples into *out. Returns 0,
   or an errno-style reason (EINVAL: a CPU this process may not run on; ETIMEDOUT). */
static int bounce_pair(int a, int b, int timeout_ms, bounce_run *out) {
    struct timespec gap = {0, BOUNCE_GAP_MS * 1000000L};
    int me = (int)syscall(SYS_gettid), tid = 0, rc = 0;
    bounce bo;
    pthread_t t;
    memset(out, 0, sizeof *out);
    memset(&bo, 0, sizeof bo);
    bo.cpu = b;
    bo.deadline = efax_deadline_ns(timeout_ms);
    if (!pin_me(a) || !pin_me(b) || !pin_me(a)) return EINVAL;
    if (pthread_create(&t, NULL, partner, &bo)) return EAGAIN;
    do /* the partner says where it runs, or that it cannot */
        tid = __atomic_load_n(&bo.tid, __ATOMIC_ACQUIRE);
    while (!tid && efax_now_ns() < bo.deadline);
    if (tid <= 0) rc = tid < 0 ? EINVAL : ETIMEDOUT;
    for (int s = 0; s < BOUNCE_SAMPLES && !rc; s++) {
        long before = preemptions(me) + preemptions(tid), after;
        uint64_t t0 = efax_now_ns();
        for (int i = 0; i < BOUNCE_ROUNDS && !rc; i++) {
            __atomic_store_n(&bo.turn, 1, __ATOMIC_RELEASE);
            if (!await_turn(&bo.turn, 1, bo.deadline)) rc = ETIMEDOUT;
        }
        after = preemptions(me) + preemptions(tid);
        if (after != before)
            out->preempted++;
        else
            out->ns[out->n++] = (double)(efax_now_ns() - t0) / BOUNCE_ROUNDS;
        if (!rc) nanosleep(&gap, NULL);
    }
    __atomic_store_n(&bo.turn, 2, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    if (!rc && bo.late) rc = ETIMEDOUT;
    qsort(out->ns, (size_t)out->n, sizeof *out->ns, cmp_double);
    return rc;
}

/* One pair's finding: steady (INFO), moving (WARN), or too busy to tell (WARN). */
static void cores_finding(doctor *d, int a, int b, const bounce_run *r) {
    char sub[48];
    double secs = BOUNCE_SAMPLES * BOUNCE_GAP_MS / 1000.0, lo, hi, mid;
    snprintf(sub, sizeof sub, "%d,%d", a, b);
    if (r->n < BOUNCE_SAMPLES / 2) {
        add(d, L_WARN, "cores", sub,
            "run benchmarks on an idle host: what else runs here takes turns with them (top, or uptime's "
            "load average)",
            "CPUs %d and %d: other programs took them from the probe in %d of %d samples over %.1f s "
            "(its threads were preempted), so the distance between them cannot be told, and any figure "
            "measured now includes waiting for the CPU",
            a, b, r->preempted, BOUNCE_SAMPLES, secs);
        return;
    }
    lo = r->ns[r->n / 10];
    hi = r->ns[r->n - 1 - r->n / 10];
    mid = r->ns[r->n / 2];
    if (hi >= 2 * lo)
        add(d, L_WARN, "cores", sub,
            "compare figures only side by side, in interleaved rounds (bench.sh does, with the spread); "
            "for steady small-message figures use dedicated cores (bare metal, or pinned vCPUs)",
            "CPUs %d and %d hand a cache line back in %.0f ns at times and %.0f ns at others (10th and "
            "90th percentile of %d samples over %.1f s; median %.0f): the distance between them changes "
            "while a program runs (virtual CPUs moved between cores), and small-message rates and "
            "latencies here swing with it, for any tool",
            a, b, lo, hi, r->n, secs, mid);
    else
        add(d, L_INFO, "cores", sub, NULL,
            "CPUs %d and %d hand a cache line back in %.0f ns (median of %d samples over %.1f s; "
            "10th-90th percentile %.0f-%.0f ns)",
            a, b, mid, r->n, secs, lo, hi);
}

/* The pairs: this process's first CPU and the next one online (neighbours), and on a host of
   several NUMA nodes the first and the last CPU online (another node, most likely). Each is
   measured unbound from the launcher's pinning, which this thread sets back after. */
static void check_cores(doctor *d) {
    cpu_set_t mine;
    int first = -1, pairs[2][2], np = 0, online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (pthread_getaffinity_np(pthread_self(), sizeof mine, &mine)) return;
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, &mine)) first = c;
    if (online < 2 || first < 0) {
        add(d, L_SKIP, "cores", "", NULL, "one CPU online: no distance between cores to measure");
        return;
    }
    pairs[np][0] = first;
    pairs[np++][1] = (first + 1) % online;
    if (numa_nodes() > 1 && cpu_node(online - 1) != cpu_node(first) && online - 1 != pairs[0][1]) {
        pairs[np][0] = first;
        pairs[np++][1] = online - 1;
    }
    for (int k = 0; k < np; k++) {
        bounce_run run;
        int rc = bounce_pair(pairs[k][0], pairs[k][1], d->timeout_ms, &run);
        char sub[48];
        snprintf(sub, sizeof sub, "%d,%d", pairs[k][0], pairs[k][1]);
        if (rc)
            add(d, L_SKIP, "cores", sub, NULL, "CPUs %d and %d: %s", pairs[k][0], pairs[k][1],
                rc == ETIMEDOUT
                    ? "a cache line handed between them did not come back within --timeout"
                    : "this process may not run on both (a cpuset), so their distance is unknown");
        else
            cores_finding(d, pairs[k][0], pairs[k][1], &run);
    }
    pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
}

static bool on_path(const char *cmd) {
    char path[PATH_MAX], *p = getenv("PATH") ? strdup(getenv("PATH")) : NULL, *tok, *save = NULL;
    bool found = false;
    for (tok = p ? strtok_r(p, ":", &save) : NULL; tok && !found; tok = strtok_r(NULL, ":", &save)) {
        snprintf(path, sizeof path, "%s/%s", tok, cmd);
        found = access(path, X_OK) == 0;
    }
    free(p);
    return found;
}

static void check_launcher(doctor *d) {
    char tools[128] = "", buf[256];
    const char *names[] = {"mpirun", "srun", "prterun"};
    size_t u = 0;
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        if (on_path(names[i]))
            u += (size_t)snprintf(tools + u, sizeof tools - u, "%s%s", u ? ", " : "", names[i]);
    if (getenv("EFAX_ROOT"))
        snprintf(buf, sizeof buf, "efax's TCP rendezvous (EFAX_ROOT=%s)", getenv("EFAX_ROOT"));
    else if (getenv("SLURM_JOB_ID") && (getenv("PMIX_RANK") || getenv("PMIX_NAMESPACE")))
        snprintf(buf, sizeof buf, "Slurm job %s with PMIx (srun --mpi=pmix)", getenv("SLURM_JOB_ID"));
    else if (getenv("PMIX_RANK") || getenv("PMIX_NAMESPACE"))
        snprintf(buf, sizeof buf, "PMIx%s", getenv("OMPI_COMM_WORLD_SIZE") ? " (Open MPI's mpirun)" : "");
    else if (getenv("SLURM_JOB_ID"))
        snprintf(buf, sizeof buf, "Slurm job %s, but no PMIx in this step (srun without --mpi=pmix?)",
                 getenv("SLURM_JOB_ID"));
    else
        snprintf(buf, sizeof buf, "none (this doctor runs alone)");
#ifdef EFAX_NO_PMIX
    add(d, L_INFO, "launcher", "", NULL,
        "launcher: %s; built without PMIx (EFAX_NO_PMIX): only EFAX_ROOT launches; installed: %s", buf,
        u ? tools : "none of mpirun, srun, prterun");
#else
    if (getenv("SLURM_JOB_ID") && !getenv("PMIX_RANK") && !getenv("PMIX_NAMESPACE") && !getenv("EFAX_ROOT"))
        add(d, L_WARN, "launcher", "",
            "srun --mpi=pmix (Slurm's PMIx plugin), or set EFAX_RANK/EFAX_SIZE/EFAX_ROOT",
            "launcher: %s; installed: %s", buf, u ? tools : "none of mpirun, srun, prterun");
    else
        add(d, L_INFO, "launcher", "", NULL,
            "launcher: %s; installed: %s; efax joins PMIx (mpirun, srun --mpi=pmix, prterun) or "
            "EFAX_RANK/EFAX_SIZE/EFAX_ROOT",
            buf, u ? tools : "none of mpirun, srun, prterun");
#endif
}

/* ---------------------------------------------------------------------------------------- GPUs */

/* NVIDIA GPUs on the PCI bus (vendor 0x10de, class 0x03xxxx): what a build without CUDA can see. */
static int pci_gpus(void) {
    char dir[PATH_MAX], path[PATH_MAX + 300], v[32], c[32];
    DIR *dp;
    struct dirent *de;
    int n = 0;
    snprintf(dir, sizeof dir, "%s/sys/bus/pci/devices", efax_topo_sysfs_root());
    if (!(dp = opendir(dir))) return 0;
    while ((de = readdir(dp))) {
        if (de->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s/vendor", dir, de->d_name);
        if (read_file(path, v, sizeof v) || strcmp(v, "0x10de")) continue;
        snprintf(path, sizeof path, "%s/%s/class", dir, de->d_name);
        if (!read_file(path, c, sizeof c) && !strncmp(c, "0x03", 4)) n++;
    }
    closedir(dp);
    return n;
}

#ifdef EFAX_CUDA_H
static void check_gpu(doctor *d, int g, const char *prov, const efax_nic_info *nics, int nn) {
    efax_gpu_info gi;
    char sub[48], near[256] = "", nlist[256] = "";
    size_t u = 0, v = 0;
    efax_ctx_desc cd;
    cold c;
    if (efax_cuda_gpu_info(g, nics, nn, &gi)) {
        add(d, L_FAIL, "gpu", "", "check the driver (nvidia-smi)", "GPU %d: CUDA cannot describe it", g);
        return;
    }
    snprintf(sub, sizeof sub, "GPU %d %s", g, gi.pci);
    add(d, L_INFO, "gpu", sub, NULL, "%s, compute capability %d.%d, NUMA %d, %d NVLink(s)", gi.name,
        gi.cc_major, gi.cc_minor, gi.numa, gi.nvlinks);
    for (int i = 0; i < gi.nnear; i++) {
        u += (size_t)snprintf(near + u, sizeof near - u, "%s%s", i ? "," : "", nics[gi.near[i]].name);
        v += (size_t)snprintf(nlist + v, sizeof nlist - v, "%s%s", i ? "," : "", nics[gi.near[i]].name);
    }
    if (gi.nnear && gi.near_depth >= 3)
        add(d, L_PASS, "gpu", sub, NULL, "nearest NIC(s): %s, behind its PCIe switch (PCI depth %d)", near,
            gi.near_depth);
    else if (gi.nnear)
        add(d, L_WARN, "gpu", sub,
            "pin ranks to GPUs whose NICs share their PCIe switch; check the instance's topology (nvidia-smi "
            "topo -m)",
            "nearest NIC(s) %s share only %d PCI component(s) with it: traffic crosses the CPU's PCIe root "
            "(the wrong EFA "
            "device per GPU: uccl #724)",
            near, gi.near_depth);
    else
        add(d, L_SKIP, "gpu", sub, NULL,
            "no NIC of %s shares its PCI tree (the NICs have no PCI address, or sit under "
            "another host bridge): nearness unknown, every NIC used",
            prov);
    add(d, gi.dmabuf ? L_PASS : L_WARN, "gpu", sub,
        gi.dmabuf ? NULL
                  : "a driver and kernel with dmabuf (CUDA 11.7+, Linux 5.12+, "
                    "open kernel modules)",
        "dmabuf export %s; GPUDirect RDMA attribute %s", gi.dmabuf ? "supported" : "NOT supported",
        gi.gdr ? "set" : "not set");
    if (gi.cc_major < 9)
        add(d, L_INFO, "gpu", sub, NULL,
            "compute capability %d.%d (before Hopper): a NIC's writes into its memory need a flush "
            "before the GPU reads them (aws-ofi-nccl platform-aws.cpp skips it only on p5)",
            gi.cc_major, gi.cc_minor);
    /* GPUDirect RDMA, really: device memory registered with the provider forbidden to call CUDA (on efa
       efax_caps.gpudirect says whether efa took it), then one write lands */
    cudaSetDevice(g);
    memset(&cd, 0, sizeof cd);
    cd.provider = prov;
    cd.hmem = true;
    cd.no_cuda_api = true;
    cold_start(d, cd,
               gi.nnear ? nics[gi.near[0]].name
               : nn     ? nics[0].name
                        : NULL,
               efax_mem_device(), 1 << 20, &c);
    if (c.failed[0])
        add(d, d->prov == EFAX_PROV_EFA ? L_FAIL : L_WARN, "gpudirect", sub,
            "load the GPU peer-memory support (nvidia-peermem, "
            "or dmabuf with open kernel modules) and use a libfabric built with CUDA (the EFA installer's)",
            "device memory with the provider forbidden to call CUDA (FI_OPT_CUDA_API_PERMITTED=false) on %s: "
            "%s",
            gi.nnear ? nics[gi.near[0]].name : "NIC 0", c.failed);
    else if (!strncmp(c.path, "staged", 6))
        add(d, d->prov == EFAX_PROV_EFA ? L_FAIL : L_WARN, "gpudirect", sub,
            "a libfabric with FI_HMEM for CUDA (the EFA installer's)",
            "%s cannot register device memory: it moves through pinned host buffers (staged), not by "
            "GPUDirect RDMA",
            prov);
    else
        add(d, L_PASS, "gpudirect", sub, NULL,
            "device memory registered by %s with the provider forbidden to call CUDA%s, and a 1 MiB "
            "write to itself landed, every byte right: first %.0f us, then %.0f us (register %.2f ms)",
            c.path, c.caps.gpudirect == 1 ? " (efa took it: GPUDirect RDMA)" : "", c.first_us, c.warm_us,
            c.reg_ms);
}
#endif

static void check_gpus(doctor *d, const char *prov) {
    int seen = pci_gpus();
#ifdef EFAX_CUDA_H
    char why[256] = "";
    int n = efax_cuda_devices(why, sizeof why), nn = 0;
    efax_nic_info nics[EFAX_MAX_NICS];
    efax_topo_list(prov, nics, EFAX_MAX_NICS, &nn);
    if (nn > EFAX_MAX_NICS) nn = EFAX_MAX_NICS;
    if (!n) {
        add(d, seen ? L_FAIL : L_SKIP, "gpu", "",
            seen ? "check the driver (nvidia-smi) and CUDA_VISIBLE_DEVICES" : NULL, "%s%s",
            seen ? "NVIDIA GPUs on the PCI bus, but CUDA sees none: " : "no CUDA device here: ", why);
        return;
    }
    for (int g = 0; g < n; g++) check_gpu(d, g, prov, nics, nn);
#else
    (void)prov;
    if (seen)
        add(d, L_WARN, "gpu", "", "run build/doctor_cuda (make cuda): drivers/doctor.c built with nvcc",
            "%d NVIDIA GPU(s) on the PCI bus, and this doctor was built without CUDA: GPUs not checked",
            seen);
    else
        add(d, L_SKIP, "gpu", "", NULL,
            "no GPU on the PCI bus, and this doctor was built without CUDA (doctor_cuda checks GPUs)");
#endif
}

/* ---------------------------------------------------------------------------------------- report */

static void clean(char *s) {
    for (; *s; s++)
        if (*s == '\t' || *s == '\n' || *s == '\r') *s = ' ';
}

/* This host's findings as lines of "level\tcheck\tsubject\ttext\tfix"; the first line is the facts. */
static void pack(doctor *d, char *out, size_t cap) {
    size_t u = 0;
    u += (size_t)snprintf(out, cap, "%s\n", d->facts);
    for (int i = 0; i < d->n && u < cap; i++) {
        finding *f = &d->f[i];
        clean(f->check);
        clean(f->subject);
        clean(f->text);
        clean(f->fix);
        u += (size_t)snprintf(out + u, cap - u, "%d\t%s\t%s\t%s\t%s\n", f->level, f->check, f->subject,
                              f->text, f->fix);
    }
}

static void json_str(FILE *fp, const char *s) {
    fputc('"', fp);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(fp, "\\%c", c);
        else if (c < 0x20)
            fprintf(fp, "\\u%04x", c);
        else
            fputc(c, fp);
    }
    fputc('"', fp);
}

static void csv_str(FILE *fp, const char *s) {
    fputc('"', fp);
    for (; *s; s++) {
        if (*s == '"') fputc('"', fp);
        fputc(*s, fp);
    }
    fputc('"', fp);
}

/* Prints one host's packed findings (after its facts line, when `facts`) and writes them to JSON and
   CSV; counts levels into n. */
static void show(const doctor *d, const char *host, char *packed, bool facts, FILE *jf, FILE *cf, int *n) {
    char *save = NULL, *line = strtok_r(packed, "\n", &save);
    if (facts) {
        printf("# %s: %s\n", host, line ? line : "");
        line = strtok_r(NULL, "\n", &save);
    }
    for (; line; line = strtok_r(NULL, "\n", &save)) {
        char *field[5] = {0}, *p = line;
        int k = 0, level;
        for (; k < 5 && p; k++) {
            field[k] = p;
            p = strchr(p, '\t');
            if (p) *p++ = 0;
        }
        if (k < 5) continue;
        level = atoi(field[0]);
        if (level < 0 || level >= L_COUNT) continue;
        n[level]++;
        if (!d->quiet || level == L_WARN || level == L_FAIL)
            printf("%s  %-10s %s%s%s%s%s\n", level_name[level], field[1], field[2], field[2][0] ? ": " : "",
                   field[3], field[4][0] ? ". Fix: " : "", field[4]);
        if (jf) {
            fprintf(jf, "{\"schema\":1,\"driver\":\"doctor\",\"host\":");
            json_str(jf, host);
            fprintf(jf, ",\"level\":\"%s\",\"check\":", level_name[level]);
            json_str(jf, field[1]);
            fprintf(jf, ",\"subject\":");
            json_str(jf, field[2]);
            fprintf(jf, ",\"text\":");
            json_str(jf, field[3]);
            fprintf(jf, ",\"fix\":");
            json_str(jf, field[4]);
            fprintf(jf, "}\n");
        }
        if (cf) {
            csv_str(cf, host);
            fprintf(cf, ",%s,", level_name[level]);
            csv_str(cf, field[1]);
            fputc(',', cf);
            csv_str(cf, field[2]);
            fputc(',', cf);
            csv_str(cf, field[3]);
            fputc(',', cf);
            csv_str(cf, field[4]);
            fputc('\n', cf);
        }
    }
}

int main(int argc, char **argv) {
    static doctor d; /* its findings are large: not on the stack */
    efax_optdef defs[] = {
        {"provider", 0, EFAX_OPT_STR, &d.provider, 0, 0, NULL, "NAME",
         "check this provider's NICs (default: the one efax picks)"},
        {"nics", 0, EFAX_OPT_STR, &d.nics, 0, 0, NULL, "LIST",
         "check these NICs (default: the ones efax opens)"},
        {"json", 0, EFAX_OPT_STR, &d.json, 0, 0, NULL, "FILE",
         "also write every finding as a JSON record (- for stdout)"},
        {"csv", 0, EFAX_OPT_STR, &d.csv, 0, 0, NULL, "FILE", "also write every finding as a CSV row"},
        {"quiet", 'q', EFAX_OPT_FLAG, &d.quiet, 0, 0, NULL, NULL,
         "print only WARN and FAIL lines and the verdict"},
        {"expect-efa", 0, EFAX_OPT_FLAG, &d.expect_efa, 0, 0, NULL, NULL,
         "no EFA device is a FAIL (for EFA clusters)"},
        {"timeout", 0, EFAX_OPT_INT, &d.timeout_ms, 100, 3600000, NULL, "MS",
         "how long each check waits (default 10000)"},
        EFAX_OPT_END};
    efax_boot_desc bd;
    char provs[256], pick[32], first_facts[512] = "", *mine, *all;
    FILE *jf = NULL, *cf = NULL;
    int rc, hosts = 0, n[L_COUNT] = {0};
    rc = efax_bench_args(argc, argv, defs, "doctor",
                         "Checks that this node (every node, under a launcher) is ready for efax: "
                         "one line per finding, PASS / WARN / FAIL with the fix. A FAIL exits 1.");
    if (rc) return rc == EFAX_BENCH_DONE ? 0 : 2;
    if (!d.timeout_ms) d.timeout_ms = 10000;
    memset(&bd, 0, sizeof bd);
    bd.allow_single = true;
    if ((rc = efax_boot_init(&d.job, &bd))) return efax_exit_code(rc);
    if (d.job.rank == 0 && d.json && !(jf = strcmp(d.json, "-") ? fopen(d.json, "w") : stdout)) {
        fprintf(stderr, "doctor: --json %s: cannot open: %s\n", d.json, strerror(errno));
        return 2;
    }
    if (d.job.rank == 0 && d.csv && !(cf = fopen(d.csv, "w"))) {
        fprintf(stderr, "doctor: --csv %s: cannot open: %s\n", d.csv, strerror(errno));
        return 2;
    }
    if (d.job.local_rank == 0) { /* one rank a host checks it */
        snprintf(d.facts, sizeof d.facts, "libfabric %u.%u", FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
        check_libfabric(&d, provs, sizeof provs, pick, sizeof pick);
        check_efa(&d);
        if (pick[0]) check_nics(&d, pick);
        check_host(&d);
        check_cores(&d);
        check_launcher(&d);
        check_gpus(&d, pick[0] ? pick : "tcp");
    }
    mine = (char *)calloc(1, PACKED);
    all = (char *)calloc((size_t)d.job.size, PACKED);
    if (!mine || !all) return 1;
    pack(&d, mine, PACKED);
    if ((rc = efax_boot_allgather(&d.job, mine, PACKED, all, -1))) return efax_exit_code(rc);
    for (int r = 0, first = -1; r < d.job.size; r++) {
        char *p = all + (size_t)r * PACKED, facts[512];
        p[PACKED - 1] = 0;
        if (!strchr(p, '\t')) continue; /* not the first rank of its host */
        hosts++;
        snprintf(facts, sizeof facts, "%.*s", (int)strcspn(p, "\n"), p);
        if (d.job.rank == 0) {
            if (cf && first < 0) fprintf(cf, "host,level,check,subject,text,fix\n");
            printf("%s# efax doctor %s, host %s (rank %d of %d)\n", r ? "\n" : "", EFAX_VERSION_STRING,
                   d.job.hosts[r], r, d.job.size);
            show(&d, d.job.hosts[r], p, true, jf, cf, n);
        } else {
            for (char *line = strchr(p, '\n'); line && line[1]; line = strchr(line + 1, '\n'))
                if (atoi(line + 1) >= 0 && atoi(line + 1) < L_COUNT) n[atoi(line + 1)]++;
        }
        if (first < 0) {
            first = r;
            snprintf(first_facts, sizeof first_facts, "%s", facts);
            continue;
        }
        /* hosts agree on libfabric, provider and NIC names (NCCL #1921: "unexpected number of rails") */
        if (strcmp(facts, first_facts)) {
            n[L_FAIL]++;
            if (d.job.rank == 0) {
                char t[1400];
                snprintf(
                    t, sizeof t,
                    "%d\thosts\t%s\t%s has '%s', %s has '%s'\tthe same libfabric, provider and NIC names "
                    "on every host (efax matches NICs by name)\n",
                    L_FAIL, d.job.hosts[r], d.job.hosts[first], first_facts, d.job.hosts[r], facts);
                n[L_FAIL]--; /* show() counts it */
                show(&d, "*", t, false, jf, cf, n);
            }
        }
    }
    if (d.job.rank == 0) {
        printf("\n# doctor: %d PASS, %d WARN, %d FAIL, %d INFO, %d SKIP (SKIP: what this machine cannot "
               "show)%s\n",
               n[L_PASS], n[L_WARN], n[L_FAIL], n[L_INFO], n[L_SKIP], n[L_FAIL] ? ": NOT READY" : "");
        if (jf)
            fprintf(jf,
                    "{\"schema\":1,\"driver\":\"doctor\",\"summary\":{\"pass\":%d,\"warn\":%d,\"fail\":%d,"
                    "\"info\":%d,"
                    "\"skip\":%d,\"hosts\":%d,\"ranks\":%d}}\n",
                    n[L_PASS], n[L_WARN], n[L_FAIL], n[L_INFO], n[L_SKIP], hosts, d.job.size);
    }
    if (jf && jf != stdout) fclose(jf);
    if (cf) fclose(cf);
    free(mine);
    free(all);
    efax_boot_deinit(&d.job);
    return n[L_FAIL] ? 1 : 0;
}
