/* rails — which rail is slow or losing packets? For every pair of hosts, in both directions: every
   NIC alone, then all of them together (Split), interleaved, for --rounds rounds (2). For each
   NIC: its Gbps (the best round), its ratio to the median NIC of that direction and to the line
   rate, and what the OS counted over its runs (packets sent again or dropped: an efa device's
   hw_counters, a tcp rail's interface statistics and the host's TCP retransmits; efa's SRD events:
   retransmit timeouts, impaired and unresponsive peers). A rail below --slow (80%) of the median,
   losing more than --lossy (1%) of its packets, or whose NICs counted an SRD event, is flagged by
   host and NIC name; with --expect-healthy a flag exits 1. One rank per host.

   cc -O2 -I. drivers/rails.c -o rails $(pkg-config --cflags --libs libfabric pmix)
   mpirun -H a,b --map-by node ./rails --expect-healthy
   srun --mpi=pmix -N 4 --ntasks-per-node=1 ./rails --json rails.jsonl
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_bench.h"

#include <stdarg.h>

enum { TAG_ACK = 1, TAG_DATA = 3 }; /* ACK 1, 2 and DATA 3.. by iteration parity (two iterations in flight) */
#define ALL -1                      /* a measurement over every NIC at once (Split) */

typedef struct opts {
    uint64_t size, bytes;
    int window, rounds, timeout_ms;
    double slow, lossy, line_gbps;
    bool expect_healthy, quiet;
    const char *provider, *nics, *json, *csv;
} opts;

/* What one rank saw during one measurement: the writer's time, and every rank's OS counters over
   the NICs it used (a delta each; the last one is the host's TCP counters when it has them). */
typedef struct sample {
    double us;
    uint64_t bytes;
    int nos;
    efax_nic_stats own[EFAX_MAX_NICS]; /* efax's own counters over the measurement */
    efax_os_counters os[1];            /* [nos]: really nnic + 1 of them (allocated so) */
} sample;

/* One directed rail: host a's NIC to host b's NIC (or every NIC at once). */
typedef struct path {
    int from, to, nic; /* ranks; NIC index or ALL */
    double gbps[10];   /* per round, and the confirmation round (index --rounds) */
    uint64_t lost, sent, bytes;
    double best, x_median, pct_line, median, line;
    bool slow, lossy;
    uint64_t events; /* efa's SRD events on either end's NICs (timeouts, impaired or unresponsive peers) */
    char wire[200];  /* the first measurement's counters that moved, with their verdict */
} path;

typedef struct rails {
    opts o;
    efax_boot boot;
    efax_ctx ctx;
    efax_buf src, dst;
    efax_xfer *xs;
    efax_expect *ex;
    int nnic;
    size_t slen; /* bytes of one sample */
    sample *mine, *all;
    path *paths;
    int npath;
    FILE *jf, *cf;
    char names[EFAX_MAX_NICS][72]; /* nic_name */
} rails;

/* A NIC's name ("all" for every NIC at once); "#k" where one name is listed twice (--nics lo,lo: two
   endpoints on one device), named once by setup. */
static const char *nic_name(const rails *r, int k) { return k == ALL ? "all" : r->names[k]; }
static const char *host(const rails *r, int rank) { return efax_ctx_host(&r->ctx, rank); }

/* Message m of iteration i from `from` to `to`, as both sides describe it. */
static void msg(const rails *r, efax_write_desc *w, int from, int to, int nic, uint64_t i, int m) {
    memset(w, 0, sizeof *w);
    w->from = from;
    w->to = to;
    w->src = &r->src.mr;
    w->dst = &r->dst.mr;
    w->src_off = w->dst_off = ((i % 2) * (uint64_t)r->o.window + (uint64_t)m) * r->o.size;
    w->size = r->o.size;
    w->mode = nic == ALL ? EFAX_MODE_SPLIT : EFAX_MODE_SINGLE;
    w->nic = nic == ALL ? 0 : nic; /* Single's NIC */
    w->chunk = 0;                  /* the library's policy, as every driver's writes between them */
    w->tag = TAG_DATA + (int)(i % 2) * r->o.window + m;
    w->seq = (uint32_t)i;
}

/* The writer: iters iterations of window messages, two iterations in flight. */
static int writer(rails *r, int to, int nic, uint64_t iters, double *us) {
    int W = r->o.window, rc = 0;
    uint64_t t0 = efax_now_ns();
    efax_write_desc w;
    for (uint64_t i = 0; i < iters && !rc; i++) {
        if (i >= 2) rc = efax_wait_imm(&r->ctx, to, TAG_ACK + (int)(i % 2), (uint32_t)(i - 2), 1, -1);
        for (int m = 0; m < W && !rc; m++) {
            efax_xfer *x = &r->xs[(i % 2) * (uint64_t)W + (uint64_t)m];
            if (i >= 2) rc = efax_wait(&r->ctx, x, -1);
            msg(r, &w, r->boot.rank, to, nic, i, m);
            if (!rc) rc = efax_write(&r->ctx, x, &w, NULL);
        }
    }
    for (uint64_t i = iters > 2 ? iters - 2 : 0; i < iters && !rc; i++)
        rc = efax_wait_imm(&r->ctx, to, TAG_ACK + (int)(i % 2), (uint32_t)i, 1, -1);
    *us = (double)(efax_now_ns() - t0) / 1e3;
    for (int k = 0; k < 2 * W && !rc; k++)
        if (r->xs[k].op) rc = efax_wait(&r->ctx, &r->xs[k], -1);
    return rc;
}

/* The target: takes each iteration's messages and confirms on the rail being measured. */
static int target(rails *r, int from, int nic, uint64_t iters) {
    int W = r->o.window, rc = 0;
    for (uint64_t i = 0; i < iters && !rc; i++) {
        efax_write_desc w;
        for (int m = 0; m < W && !rc; m++) {
            msg(r, &w, from, r->boot.rank, nic, i, m);
            rc = efax_expect_write(&r->ctx, &r->ex[m], &w);
        }
        for (int m = 0; m < W && !rc; m++) rc = efax_expect_wait(&r->ctx, &r->ex[m], -1);
        if (!rc)
            rc = efax_notify_nic(&r->ctx, from, nic == ALL ? 0 : nic, TAG_ACK + (int)(i % 2), (uint32_t)i);
    }
    return rc;
}

/* The OS counters of the NICs a measurement uses (and the host's TCP counters), into s. */
static void read_os(const rails *r, int nic, sample *s) {
    s->nos = 0;
    for (int k = 0; k < r->nnic; k++) {
        efax_os_counters *c = &s->os[s->nos];
        if (nic != ALL && k != nic) continue;
        if (efax_os_counters_nic(efax_ctx_nic(&r->ctx, k), c) == 0) s->nos++;
    }
    if (efax_os_counters_tcp(&s->os[s->nos]) == 0) s->nos++;
}

static sample *sample_at(const rails *r, sample *base, int rank) {
    return (sample *)((char *)base + (size_t)rank * r->slen);
}

/* One measurement: rank a writes to rank b over `nic` (or every NIC); every rank takes part in
   the barrier and the gather. Rank 0 returns the samples in r->all. */
static int measure(rails *r, int a, int b, int nic, uint64_t iters) {
    sample *before = (sample *)calloc(1, r->slen), *s = r->mine;
    int rc, me = r->boot.rank;
    if (!before) return -FI_ENOMEM;
    memset(s, 0, r->slen);
    if ((rc = efax_boot_barrier(&r->boot, EFAX_TURN_MS))) goto out;
    if (me == a || me == b) {
        read_os(r, nic, before);
        efax_ctx_stats_reset(&r->ctx);
        rc = me == a ? writer(r, b, nic, iters, &s->us) : target(r, a, nic, iters);
        read_os(r, nic, s);
        for (int k = 0; k < r->nnic; k++) s->own[k] = efax_ctx_stats(&r->ctx, k);
        for (int i = 0; i < s->nos && i < before->nos; i++)
            efax_os_counters_delta(&before->os[i], &s->os[i], &s->os[i]);
        s->bytes = iters * (uint64_t)r->o.window * r->o.size;
    }
    if (rc) goto out;
    rc = efax_boot_allgather(&r->boot, s, r->slen, r->all, -1);
out:
    free(before);
    return rc;
}

/* What the OS says the wire lost during a measurement: *lost packets (or TCP segments) sent again
   or dropped, by the writer and the target; *sent what the writer sent. Where the host counts TCP
   (a tcp rail), sent is the writer's TCP segments, since an interface counts a 64 KiB GSO packet
   as one; else (efa) the NICs' packets. */
static void loss_of(const rails *r, int a, int b, uint64_t *lost, uint64_t *sent) {
    bool tcp = false;
    *lost = *sent = 0;
    for (int side = 0; side < 2; side++) {
        const sample *s = sample_at(r, r->all, side ? b : a);
        for (int i = 0; i < s->nos; i++) {
            uint64_t l = 0, n = 0;
            if (strcmp(s->os[i].source, "tcp") || efax_os_counters_loss(&s->os[i], &l, &n)) continue;
            *lost += l;
            if (side) continue;
            *sent += n;
            tcp = true;
        }
    }
    for (int side = 0; side < 2; side++) {
        const sample *s = sample_at(r, r->all, side ? b : a);
        for (int i = 0; i < s->nos; i++) {
            uint64_t l = 0, n = 0;
            if (!strcmp(s->os[i].source, "tcp") || efax_os_counters_loss(&s->os[i], &l, &n)) continue;
            *lost += l;
            if (!side && !tcp) *sent += n;
        }
    }
}

static void json_counters(FILE *f, const sample *s) {
    fprintf(f, "[");
    for (int i = 0; i < s->nos; i++) {
        fprintf(f, "%s{\"source\":\"%s\",\"dev\":\"%s\",\"delta\":{", i ? "," : "", s->os[i].source,
                s->os[i].dev);
        for (int j = 0; j < s->os[i].n; j++)
            fprintf(f, "%s\"%s\":%llu", j ? "," : "", s->os[i].name[j],
                    (unsigned long long)s->os[i].value[j]);
        fprintf(f, "}}");
    }
    fprintf(f, "]");
}

static path *path_of(rails *r, int a, int b, int nic) {
    for (int i = 0; i < r->npath; i++)
        if (r->paths[i].from == a && r->paths[i].to == b && r->paths[i].nic == nic) return &r->paths[i];
    memset(&r->paths[r->npath], 0, sizeof r->paths[0]);
    r->paths[r->npath].from = a;
    r->paths[r->npath].to = b;
    r->paths[r->npath].nic = nic;
    return &r->paths[r->npath++];
}

/* Rank 0: files one measurement under its path, prints it, writes its JSON record. */
static void record(rails *r, int round, int a, int b, int nic) {
    const sample *w = sample_at(r, r->all, a);
    path *p = path_of(r, a, b, nic);
    uint64_t lost, sent;
    double g = w->us > 0 ? (double)w->bytes * 8 / (w->us * 1e3) : 0;
    loss_of(r, a, b, &lost, &sent);
    for (int side = 0; side < 2; side++) { /* what the NICs' own counters say went wrong */
        const sample *s = sample_at(r, r->all, side ? b : a);
        for (int i = 0; i < s->nos; i++) {
            static const char *const srd[] = {"retrans_timeout_events", "impaired_remote_conn_events",
                                              "unresponsive_remote_events"};
            char what[160];
            if (!efax_os_counters_events(&s->os[i], what, sizeof what)) continue;
            for (int k = 0; k < 3; k++)
                if (efax_os_counter(&s->os[i], srd[k]) > 0)
                    p->events += (uint64_t)efax_os_counter(&s->os[i], srd[k]);
            if (!p->wire[0])
                snprintf(p->wire, sizeof p->wire, "%s %s: %s", host(r, side ? b : a), s->os[i].dev, what);
        }
    }
    p->gbps[round] = g;
    p->lost += lost;
    p->sent += sent;
    p->bytes += w->bytes;
    if (!r->o.quiet)
        printf("  %s %d  %s %s -> %s %s: %8.3f Gbps  (%llu MiB in %.0f ms; OS: %llu of %llu packets "
               "resent or dropped)\n",
               round < r->o.rounds ? "round" : "confirm", round + 1, host(r, a), nic_name(r, nic), host(r, b),
               nic_name(r, nic), g, (unsigned long long)(w->bytes >> 20), w->us / 1e3,
               (unsigned long long)lost, (unsigned long long)sent);
    if (!r->jf) return;
    fprintf(
        r->jf,
        "{\"schema\":1,\"driver\":\"rails\",\"kind\":\"measurement\",\"round\":%d,\"confirm\":%s,\"from\":"
        "\"%s\",\"to\":\"%s\",\"nic\":\"%s\",\"bytes\":%llu,\"seconds\":%.6g,\"gbps\":%.6g,\"lost\":%llu,"
        "\"sent\":%llu,\"nics\":[",
        round + 1, round < r->o.rounds ? "false" : "true", host(r, a), host(r, b), nic_name(r, nic),
        (unsigned long long)w->bytes, w->us / 1e6, g, (unsigned long long)lost, (unsigned long long)sent);
    for (int k = 0; k < r->nnic; k++)
        fprintf(r->jf,
                "%s{\"name\":\"%s\",\"tx_bytes\":%llu,\"tx_ops\":%llu,\"eagain\":%llu,\"rx_bytes\":%llu,\"rx_"
                "ops\":%llu}",
                k ? "," : "", nic_name(r, k), (unsigned long long)w->own[k].tx_bytes,
                (unsigned long long)w->own[k].tx_ops, (unsigned long long)w->own[k].eagain,
                (unsigned long long)sample_at(r, r->all, b)->own[k].rx_bytes,
                (unsigned long long)sample_at(r, r->all, b)->own[k].rx_ops);
    fprintf(r->jf, "],\"os_writer\":");
    json_counters(r->jf, w);
    fprintf(r->jf, ",\"os_target\":");
    json_counters(r->jf, sample_at(r, r->all, b));
    fprintf(r->jf, "}\n");
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double line_rate(const rails *r, int k) {
    const char *e = getenv("EFAX_LINE_GBPS");
    if (r->o.line_gbps > 0) return r->o.line_gbps;
    if (e && *e && strtod(e, NULL) > 0) return strtod(e, NULL);
    return efax_ctx_nic(&r->ctx, k)->link_gbps;
}

/* Rank 0: every path's best round, ratio to its direction's median NIC and to the line rate, the
   verdicts; prints them and writes them to JSON. Returns how many paths were flagged. */
/* Rank 0: every path's best round (the confirmation round included), its ratio to its direction's
   median NIC and to the line rate, and its flags. Returns how many paths are slow. */
static int judge(rails *r) {
    int slow = 0;
    for (int i = 0; i < r->npath; i++) {
        path *p = &r->paths[i];
        p->best = 0;
        for (int k = 0; k <= r->o.rounds; k++)
            if (p->gbps[k] > p->best) p->best = p->gbps[k];
    }
    for (int i = 0; i < r->npath; i++) {
        path *p = &r->paths[i];
        double v[EFAX_MAX_NICS], med = 0, line = p->nic == ALL ? 0 : line_rate(r, p->nic);
        int n = 0;
        for (int j = 0; j < r->npath; j++)
            if (r->paths[j].from == p->from && r->paths[j].to == p->to && r->paths[j].nic != ALL)
                v[n++] = r->paths[j].best;
        qsort(v, (size_t)n, sizeof v[0], cmp_double);
        if (n) med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
        p->median = med;
        p->line = line;
        if (p->nic == ALL) {
            double sum = 0;
            for (int j = 0; j < n; j++) sum += v[j];
            p->x_median = sum > 0 ? p->best / sum : 0; /* every NIC at once: its share of the NICs' sum */
        } else {
            p->x_median = med > 0 ? p->best / med : 0;
            /* one NIC has no median to fall short of: then the line rate, when known */
            p->slow = n > 1 ? p->x_median < r->o.slow : line > 0 && p->best < r->o.slow * line;
            p->lossy = p->lost >= 20 && p->sent > 0 && (double)p->lost > r->o.lossy * (double)p->sent;
            slow += p->slow;
        }
        p->pct_line = line > 0 ? 100 * p->best / line : -1;
    }
    return slow;
}

static int verdicts(rails *r) {
    int flagged = 0;
    judge(r);
    printf(
        "\n# rails: each NIC alone (its best of %d rounds, and of a confirmation round where one was slow) "
        "against the median NIC of its direction, and the line rate\n",
        r->o.rounds);
    printf("%-24s %-8s %10s %9s %7s %22s  %s\n", "from -> to", "NIC", "Gbps", "x median", "%line",
           "OS: resent/dropped", "verdict");
    if (r->cf)
        fprintf(r->cf, "from,to,nic,gbps,x_median,median_gbps,line_gbps,pct_line,lost,sent,slow,lossy\n");
    for (int i = 0; i < r->npath; i++) {
        path *p = &r->paths[i];
        double med = p->median, line = p->line;
        char dir[80], loss[48], pct[16], xm[16], verdict[160];
        snprintf(dir, sizeof dir, "%s -> %s", host(r, p->from), host(r, p->to));
        if (p->sent)
            snprintf(loss, sizeof loss, "%llu/%llu (%.2f%%)", (unsigned long long)p->lost,
                     (unsigned long long)p->sent, 100.0 * (double)p->lost / (double)p->sent);
        else
            snprintf(loss, sizeof loss, "-");
        if (p->pct_line >= 0)
            snprintf(pct, sizeof pct, "%.1f", p->pct_line);
        else
            snprintf(pct, sizeof pct, "-");
        if (p->nic == ALL)
            snprintf(xm, sizeof xm, "-");
        else
            snprintf(xm, sizeof xm, "%.2f", p->x_median);
        if (p->slow || p->lossy || p->events) {
            flagged++;
            snprintf(verdict, sizeof verdict, "FLAGGED %s%s%s%s%s: %s %s -> %s %s", p->slow ? "SLOW" : "",
                     p->slow && (p->lossy || p->events) ? "+" : "", p->lossy ? "LOSSY" : "",
                     p->lossy && p->events ? "+" : "", p->events ? "SRD" : "", host(r, p->from),
                     nic_name(r, p->nic), host(r, p->to), nic_name(r, p->nic));
        } else if (p->nic == ALL) {
            snprintf(verdict, sizeof verdict, "every NIC at once: %.0f%% of the NICs' sum",
                     100 * p->x_median);
        } else {
            snprintf(verdict, sizeof verdict, "ok");
        }
        printf("%-24s %-8s %10.3f %9s %7s %22s  %s\n", dir, nic_name(r, p->nic), p->best, xm, pct, loss,
               verdict);
        if (r->jf)
            fprintf(r->jf,
                    "{\"schema\":1,\"driver\":\"rails\",\"kind\":\"path\",\"from\":\"%s\",\"to\":\"%s\","
                    "\"nic\":\"%s\","
                    "\"gbps\":%.6g,\"x_median\":%.6g,\"median_gbps\":%.6g,\"line_gbps\":%.6g,\"pct_line\":%."
                    "6g,\"lost\":%llu,"
                    "\"sent\":%llu,\"slow\":%s,\"lossy\":%s,\"srd_events\":%llu,\"wire\":\"%s\"}\n",
                    host(r, p->from), host(r, p->to), nic_name(r, p->nic), p->best, p->x_median, med, line,
                    p->pct_line, (unsigned long long)p->lost, (unsigned long long)p->sent,
                    p->slow ? "true" : "false", p->lossy ? "true" : "false", (unsigned long long)p->events,
                    p->wire);
        if (r->cf)
            fprintf(r->cf, "%s,%s,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%llu,%llu,%d,%d\n", host(r, p->from),
                    host(r, p->to), nic_name(r, p->nic), p->best, p->x_median, med, line, p->pct_line,
                    (unsigned long long)p->lost, (unsigned long long)p->sent, p->slow, p->lossy);
    }
    return flagged;
}

/* Rank 0, when paths were flagged: which ends explain them. A host's NIC is a suspect in a role
   (sending, receiving) when every path it takes part in so is flagged; with two hosts both ends of
   a rail always are, and only a third host tells them apart. Prints them; writes the JSON summary. */
static void suspects(rails *r, int flagged) {
    char list[1024] = "";
    size_t u = 0;
    int n = 0;
    for (int h = 0; h < r->boot.size; h++)
        for (int k = 0; k < r->nnic; k++)
            for (int role = 0; role < 2; role++) {
                int in = 0, bad = 0;
                for (int i = 0; i < r->npath; i++) {
                    const path *p = &r->paths[i];
                    if (p->nic != k || (role ? p->to : p->from) != h) continue;
                    in++;
                    bad += p->slow || p->lossy || p->events;
                }
                if (!in || bad < in) continue;
                if (u < sizeof list)
                    u += (size_t)snprintf(list + u, sizeof list - u, "%s\"%s %s %s\"", n ? "," : "",
                                          host(r, h), nic_name(r, k), role ? "receiving" : "sending");
                printf("# suspect: %s %s, %s (%d of %d path(s) flagged)\n", host(r, h), nic_name(r, k),
                       role ? "receiving" : "sending", in, in);
                n++;
            }
    if (flagged && r->boot.size == 2)
        printf("# with two hosts both ends of a flagged rail are suspects: a third host (or another peer) "
               "tells them apart\n");
    if (flagged && !n) printf("# no one NIC explains every flag: look at the flagged paths above\n");
    if (r->jf)
        fprintf(r->jf,
                "{\"schema\":1,\"driver\":\"rails\",\"kind\":\"summary\",\"flagged\":%d,\"paths\":%d,"
                "\"suspects\":[%s]}\n",
                flagged, r->npath, list);
}

static int setup(rails *r) {
    efax_ctx_desc cd;
    size_t len = 2 * (size_t)r->o.window * (size_t)r->o.size;
    int rc;
    memset(&cd, 0, sizeof cd);
    cd.provider = r->o.provider;
    cd.nics = r->o.nics;
    cd.timeout_ms = r->o.timeout_ms;
    cd.imm_tags = TAG_DATA + 2 * r->o.window + 1;
    if (cd.imm_tags < 64) cd.imm_tags = 0;
    for (int i = 0; i < r->boot.size; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(r->boot.hosts[i], r->boot.hosts[j])) {
                if (r->boot.rank == 0)
                    fprintf(stderr,
                            "rails: ranks %d and %d both run on %s: start one rank per host (mpirun --map-by "
                            "node, "
                            "srun --ntasks-per-node=1)\n",
                            j, i, r->boot.hosts[i]);
                return -EFAX_E_USAGE;
            }
    if ((rc = efax_ctx_init(&r->ctx, &cd)) || (rc = efax_ctx_connect(&r->ctx, &r->boot)) ||
        (rc = efax_ctx_warmup(&r->ctx)))
        return rc;
    r->nnic = efax_ctx_nnics(&r->ctx);
    for (int k = 0; k < r->nnic; k++) {
        const char *n = efax_ctx_nic(&r->ctx, k)->name;
        int twice = 0;
        for (int j = 0; j < r->nnic; j++) twice |= j != k && !strcmp(efax_ctx_nic(&r->ctx, j)->name, n);
        snprintf(r->names[k], sizeof r->names[k], twice ? "%s#%d" : "%s", n, k);
    }
    if ((rc = efax_buf_alloc(&r->ctx, &r->src, efax_mem_host(), len, EFAX_MR_WRITE_SRC))) return rc;
    if ((rc = efax_buf_alloc(&r->ctx, &r->dst, efax_mem_host(), len, EFAX_MR_WRITE_DST))) return rc;
    if ((rc = efax_mr_exchange(&r->dst.mr, &r->boot))) return rc;
    r->slen = sizeof(sample) + (size_t)r->nnic * sizeof(efax_os_counters); /* nnic + 1 counter sets */
    r->xs = (efax_xfer *)calloc(2 * (size_t)r->o.window, sizeof *r->xs);
    r->ex = (efax_expect *)calloc((size_t)r->o.window, sizeof *r->ex);
    r->mine = (sample *)calloc(1, r->slen);
    r->all = (sample *)calloc((size_t)r->boot.size, r->slen);
    r->paths =
        (path *)calloc((size_t)r->boot.size * (size_t)r->boot.size * (size_t)(r->nnic + 1), sizeof *r->paths);
    return r->xs && r->ex && r->mine && r->all && r->paths ? 0 : -FI_ENOMEM;
}

int main(int argc, char **argv) {
    static rails r; /* not on the stack: its boot and context are large */
    efax_optdef defs[] = {
        {"provider", 0, EFAX_OPT_STR, &r.o.provider, 0, 0, NULL, "NAME",
         "provider (default: efa, else tcp, else shm)"},
        {"nics", 0, EFAX_OPT_STR, &r.o.nics, 0, 0, NULL, "LIST",
         "the rails to test (default: the NICs efax opens)"},
        {"size", 's', EFAX_OPT_SIZE, &r.o.size, 4096, 1073741824.0, NULL, "BYTES",
         "bytes per write (default 1M)"},
        {"bytes", 'B', EFAX_OPT_SIZE, &r.o.bytes, 65536, 1099511627776.0, NULL, "BYTES",
         "bytes each NIC moves per measurement (default: half a second at the line rate, else 256M)"},
        {"window", 0, EFAX_OPT_INT, &r.o.window, 1, 64, NULL, "N",
         "writes per iteration; two iterations in flight (default 8)"},
        {"rounds", 0, EFAX_OPT_INT, &r.o.rounds, 1, 8, NULL, "N",
         "interleaved rounds; a NIC's best counts (default 2)"},
        {"slow", 0, EFAX_OPT_DOUBLE, &r.o.slow, 0.01, 1, NULL, "RATIO",
         "flag a NIC below RATIO x the median NIC (default 0.8)"},
        {"lossy", 0, EFAX_OPT_DOUBLE, &r.o.lossy, 0.0001, 1, NULL, "RATIO",
         "flag a NIC whose OS counts more than RATIO of its packets resent or dropped (default 0.01)"},
        {"line-rate", 0, EFAX_OPT_DOUBLE, &r.o.line_gbps, 0.001, 100000, NULL, "GBPS",
         "one NIC's line rate (default: "
         "EFAX_LINE_GBPS, else the provider's)"},
        {"expect-healthy", 0, EFAX_OPT_FLAG, &r.o.expect_healthy, 0, 0, NULL, NULL, "a flagged NIC exits 1"},
        {"json", 0, EFAX_OPT_STR, &r.o.json, 0, 0, NULL, "FILE",
         "every measurement and path as JSON records"},
        {"csv", 0, EFAX_OPT_STR, &r.o.csv, 0, 0, NULL, "FILE", "every path as a CSV row"},
        {"quiet", 'q', EFAX_OPT_FLAG, &r.o.quiet, 0, 0, NULL, NULL, "only the verdict table"},
        {"timeout", 0, EFAX_OPT_INT, &r.o.timeout_ms, 100, 86400000, NULL, "MS",
         "each wait's limit (default EFAX_TIMEOUT_MS)"},
        EFAX_OPT_END};
    efax_boot_desc bd;
    int rc, flagged = 0;
    uint64_t iters;
    r.o.size = 1 << 20;
    r.o.window = 8;
    r.o.rounds = 2;
    r.o.slow = 0.8;
    r.o.lossy = 0.01;
    rc = efax_bench_args(
        argc, argv, defs, "rails",
        "Finds the slow or lossy rail: every NIC alone, then all together, between "
        "every pair of hosts, both ways; flags a NIC below 80% of the median or losing packets.");
    if (rc) return rc == EFAX_BENCH_DONE ? 0 : 2;
    memset(&bd, 0, sizeof bd);
    if ((rc = efax_boot_init(&r.boot, &bd))) return efax_exit_code(rc);
    if (r.boot.size < 2) {
        fprintf(stderr,
                "rails: needs two hosts or more (one rank each): mpirun -H a,b --map-by node ./rails\n");
        return 2;
    }
    if ((rc = setup(&r))) goto done;
    if (!r.o.bytes) {
        double line = line_rate(&r, 0);
        r.o.bytes = line > 0 ? (uint64_t)(line * 1e9 / 8 * 0.5) : 256ull << 20;
        if (r.o.bytes < 8ull << 20) r.o.bytes = 8ull << 20;
    }
    iters = (r.o.bytes + r.o.size * (uint64_t)r.o.window - 1) / (r.o.size * (uint64_t)r.o.window);
    if (r.boot.rank == 0 && r.o.json && !(r.jf = fopen(r.o.json, "w"))) {
        fprintf(stderr, "rails: --json %s: cannot open: %s\n", r.o.json, strerror(errno));
        rc = -EFAX_E_USAGE;
        goto done;
    }
    if (r.boot.rank == 0 && r.o.csv && !(r.cf = fopen(r.o.csv, "w"))) {
        fprintf(stderr, "rails: --csv %s: cannot open: %s\n", r.o.csv, strerror(errno));
        rc = -EFAX_E_USAGE;
        goto done;
    }
    if (r.boot.rank == 0) {
        printf("# efax rails %s: %d hosts, %d NIC(s) each (%s", EFAX_VERSION_STRING, r.boot.size, r.nnic,
               efax_ctx_provider(&r.ctx));
        for (int k = 0; k < r.nnic; k++) printf("%s%s", k ? "," : ": ", nic_name(&r, k));
        printf("); %llu MiB per NIC per measurement (%llu x %d writes of %llu KiB), %d rounds, flags below "
               "%.0f%% of the "
               "median or above %.2g%% lost\n",
               (unsigned long long)((iters * (uint64_t)r.o.window * r.o.size) >> 20),
               (unsigned long long)iters, r.o.window, (unsigned long long)(r.o.size >> 10), r.o.rounds,
               100 * r.o.slow, 100 * r.o.lossy);
        fflush(stdout);
    }
    /* warm-up, not recorded: every pair, both ways, every NIC alone (TCP opens its window) */
    for (int a = 0; a < r.boot.size && !rc; a++)
        for (int b = 0; b < r.boot.size && !rc; b++)
            for (int k = 0; k < r.nnic && !rc && a != b; k++) rc = measure(&r, a, b, k, 2);
    /* every pair, both ways, each NIC alone then all at once; odd rounds backwards (no end always first) */
    for (int round = 0; round < r.o.rounds && !rc; round++)
        for (int a = 0; a < r.boot.size && !rc; a++)
            for (int b = 0; b < r.boot.size && !rc; b++) {
                if (a == b) continue;
                for (int j = 0; j <= r.nnic && !rc; j++) {
                    int nic = round % 2 ? (j == 0 ? ALL : r.nnic - j) : (j == r.nnic ? ALL : j);
                    uint64_t n = nic == ALL ? iters * (uint64_t)r.nnic
                                            : iters; /* 'all': every NIC moves as much as alone */
                    if (!(rc = measure(&r, a, b, nic, n)) && r.boot.rank == 0) {
                        record(&r, round, a, b, nic);
                        fflush(stdout);
                    }
                }
            }
    /* a path slow in every round gets one more chance, a confirmation round of its direction (every NIC
       alone again): a rail slowed by a moment of the host's load recovers, a slow one stays slow */
    if (!rc) {
        size_t pairs = (size_t)r.boot.size * (size_t)r.boot.size, len = pairs * sizeof(int);
        int *redo = (int *)calloc(pairs, sizeof(int));
        int *all = (int *)calloc(pairs * (size_t)r.boot.size, sizeof(int));
        if (!redo || !all) rc = -FI_ENOMEM;
        if (!rc && r.boot.rank == 0 && judge(&r))
            for (int i = 0; i < r.npath; i++)
                if (r.paths[i].slow) redo[r.paths[i].from * r.boot.size + r.paths[i].to] = 1;
        if (!rc) rc = efax_boot_allgather(&r.boot, redo, len, all, -1); /* rank 0's list, to every rank */
        for (int a = 0; a < r.boot.size && !rc; a++)
            for (int b = 0; b < r.boot.size && !rc; b++) {
                if (!all[a * r.boot.size + b]) continue;
                for (int k = 0; k < r.nnic && !rc; k++)
                    if (!(rc = measure(&r, a, b, k, iters)) && r.boot.rank == 0) {
                        record(&r, r.o.rounds, a, b, k);
                        fflush(stdout);
                    }
            }
        free(redo);
        free(all);
    }
    if (!rc && r.boot.rank == 0) {
        flagged = verdicts(&r);
        if (flagged)
            printf("\n# rails: %d path(s) FLAGGED\n", flagged);
        else
            printf("\n# rails: every rail healthy (none below %.0f%% of the median, none losing over %.2g%% "
                   "of its packets)\n",
                   100 * r.o.slow, 100 * r.o.lossy);
        for (int i = 0; i < r.npath && flagged; i++) {
            const path *p = &r.paths[i];
            if (!p->slow && !p->lossy && !p->events) continue;
            printf("# FLAGGED %s %s -> %s %s:%s%s%s\n", host(&r, p->from), nic_name(&r, p->nic),
                   host(&r, p->to), nic_name(&r, p->nic), p->slow ? " slow" : "",
                   p->lossy ? " losing packets" : "", p->events ? " SRD events" : "");
        }
        for (int i = 0; i < r.npath; i++) /* every path whose NICs' counters moved, with their verdict */
            if (r.paths[i].wire[0])
                printf("# counters moved on %s %s -> %s %s: %s\n", host(&r, r.paths[i].from),
                       nic_name(&r, r.paths[i].nic), host(&r, r.paths[i].to), nic_name(&r, r.paths[i].nic),
                       r.paths[i].wire);
        suspects(&r, flagged);
    }
    {
        int64_t sum = 0;
        if (!rc) rc = efax_boot_sum(&r.boot, flagged, &sum, -1);
        flagged = (int)sum;
    }
done:
    if (r.jf) fclose(r.jf);
    if (r.cf) fclose(r.cf);
    efax_buf_free(&r.dst);
    efax_buf_free(&r.src);
    efax_ctx_deinit(&r.ctx);
    efax_boot_deinit(&r.boot);
    free(r.xs);
    free(r.ex);
    free(r.mine);
    free(r.all);
    free(r.paths);
    if (rc) return efax_exit_code(rc);
    return flagged && r.o.expect_healthy ? 1 : 0;
}
