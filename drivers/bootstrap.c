/* bootstrap — the "bootstrap" experiment: every rank exchanges endpoint names and memory keys,
   then every ordered pair of ranks proves a SEND and a WRITE with immediate data on every
   NIC, with the data checked. Prints the pair matrix and "all N×(N−1) pairs OK", or names
   the pairs that failed.

   cc -O2 -I. drivers/bootstrap.c -o bootstrap $(pkg-config --cflags --libs libfabric pmix)
   mpirun -np 4 ./bootstrap
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_bench.h"

#include <string.h>

enum { OK = 0, SEND_BAD = 1, SEND_MISSING = 2, WRITE_BAD = 4, WRITE_MISSING = 8 };

typedef struct proof {
    efax_bench b;
    uint64_t msg; /* bytes per message */
    /* ranks, this rank, its NICs, the most NICs of any rank, messages it receives */
    int n, me, nn, maxn, nrx;
    /* a source slot per (peer, NIC, op); receive slots; a write window per (peer, NIC) */
    efax_buf *tx, *rx, *wd;
    efax_xfer *xs;         /* the receives first, then per (peer, NIC) a WRITE and a SEND */
    uint8_t *status, *all; /* per (sender, its NIC): what went wrong on this rank; on every rank */
} proof;

/* pattern iteration of the message rank src sends to rank dst from its NIC k (0: SEND, 1: WRITE) */
static uint64_t iter_of(int dst, int k, int op) {
    return ((uint64_t)dst * EFAX_MAX_NICS + (uint64_t)k) * 2 + (uint64_t)op;
}

/* What rank j saw of rank i's messages from its NIC k, in the views gathered from every rank. */
static int seen_by(const proof *p, int j, int i, int k) {
    return p->all[((size_t)j * (size_t)p->n + (size_t)i) * (size_t)p->maxn + (size_t)k];
}

/* Who is there: ranks and NICs; every rank's host and NIC addresses (rank 0 prints them). */
static int meet(proof *p) {
    static const char *const boots[] = {"single", "PMIx", "TCP rendezvous", "single"}; /* by efax_boot.kind */
    char line[1024], a[128], *lines = (char *)efax_bench_calloc(&p->b, (size_t)p->b.boot.size, sizeof line);
    size_t u = (size_t)snprintf(line, sizeof line, "rank %d on %s:", p->b.boot.rank, p->b.boot.host);
    int rc;
    p->n = p->b.boot.size;
    p->me = p->b.boot.rank;
    p->nn = efax_ctx_nnics(&p->b.ctx);
    for (int i = 0; i < p->n;
         i++) { /* the most NICs of any rank; this rank receives one per NIC of every peer */
        int m = efax_ctx_peer_nnics(&p->b.ctx, i);
        p->maxn = m > p->maxn ? m : p->maxn;
        p->nrx += i != p->me ? m : 0;
    }
    for (int k = 0; k < p->nn && u < sizeof line; k++) {
        const char *addr = efax_ctx_nic_addr(&p->b.ctx, k, a, sizeof a);
        u += (size_t)snprintf(line + u, sizeof line - u, " %s=%s", efax_ctx_nic(&p->b.ctx, k)->name, addr);
    }
    rc = lines ? efax_boot_allgather(&p->b.boot, line, sizeof line, lines, -1) : -FI_ENOMEM;
    if (rc || p->me != 0) return rc;
    printf("# efax bootstrap %s: provider %s, %d ranks, bootstrap %s\n", EFAX_VERSION_STRING,
           efax_ctx_nic(&p->b.ctx, 0)->provider, p->n, boots[p->b.boot.kind & 3]);
    for (int i = 0; i < p->n; i++) printf("#   %s\n", lines + (size_t)i * sizeof line);
    return 0;
}

/* The buffers (sources filled, the rest poisoned; the write windows exchanged) and the transfers. */
static int setup(proof *p) {
    size_t n = (size_t)p->n, nn = (size_t)p->nn, maxn = (size_t)p->maxn, nrx = (size_t)(p->nrx ? p->nrx : 1);
    int rc = 0;
    p->xs = (efax_xfer *)efax_bench_calloc(&p->b, n * nn * 2 + (size_t)p->nrx + 1, sizeof *p->xs);
    p->status = (uint8_t *)efax_bench_calloc(&p->b, n * maxn, 1);
    p->all = (uint8_t *)efax_bench_calloc(&p->b, n * n * maxn, 1);
    if (!p->xs || !p->status || !p->all) return -FI_ENOMEM;
    rc =
        efax_bench_buf(&p->b, efax_mem_host(), n * nn * 2 * p->msg, EFAX_MR_SEND | EFAX_MR_WRITE_SRC, &p->tx);
    if (!rc) rc = efax_bench_buf(&p->b, efax_mem_host(), nrx * p->msg, EFAX_MR_RECV, &p->rx);
    if (!rc)
        rc = efax_bench_buf(&p->b, efax_mem_host(), n * maxn * p->msg, EFAX_MR_WRITE_DST,
                            &p->wd); /* exchanged */
    if (rc) return rc;
    for (int s = 0; s < p->n * p->nn * 2; s++) { /* slot s: to rank s / 2nn, from NIC s / 2 % nn, op s % 2 */
        uint64_t iter = iter_of(s / (2 * p->nn), s / 2 % p->nn, s % 2);
        p->tx->ops->fill(p->tx, (uint64_t)s * p->msg, p->msg, p->me, iter);
    }
    p->rx->ops->poison(p->rx, 0, nrx * p->msg); /* peers write after prove's barrier */
    p->wd->ops->poison(p->wd, 0, n * maxn * p->msg);
    return 0;
}

/* The SEND to rank j from NIC k, out of its source slot; its immediate data names (this rank, k). */
static const efax_send_desc *send_of(const proof *p, efax_send_desc *sd, int j, int k) {
    uint64_t slot = ((uint64_t)j * (uint64_t)p->nn + (uint64_t)k) * 2;
    memset(sd, 0, sizeof *sd);
    sd->to = j;
    sd->nic = k;
    sd->src = &p->tx->mr;
    sd->src_off = slot * p->msg;
    sd->size = p->msg;
    sd->has_imm = true;
    efax_imm_encode(p->me, k, 0, &sd->imm);
    return sd;
}

/* The WRITE from rank i's NIC k to rank j: out of i's source slot into i's window slot for NIC k of
   j's window, under tag 1 + k (0 is efax's own), sequence 1. */
static const efax_write_desc *write_of(const proof *p, efax_write_desc *w, int i, int j, int k) {
    memset(w, 0, sizeof *w);
    w->from = i;
    w->to = j;
    w->src = &p->tx->mr;
    w->src_off = (((uint64_t)j * (uint64_t)p->nn + (uint64_t)k) * 2 + 1) * p->msg;
    w->dst = &p->wd->mr;
    w->dst_off = ((uint64_t)i * (uint64_t)p->maxn + (uint64_t)k) * p->msg;
    w->size = p->msg;
    w->nic = k;
    w->tag = 1 + k;
    w->seq = 1;
    return w;
}

/* What rank i's WRITE from its NIC k did in this rank's window: OK, never arrived, or data wrong. */
static int write_status(proof *p, int i, int k) {
    uint64_t off = ((uint64_t)i * (uint64_t)p->maxn + (uint64_t)k) * p->msg;
    if (efax_wait_imm(&p->b.ctx, i, 1 + k, 1, 1, -1)) return WRITE_MISSING;
    return p->wd->ops->check(p->wd, off, p->msg, i, iter_of(p->me, k, 1)) ? WRITE_BAD : OK;
}

/* Whether receive i took a SEND: its sender's mark loses SEND_MISSING, and gains SEND_BAD when its
   bytes are wrong (receives name their sender in the immediate data). */
static void send_status(proof *p, int i) {
    efax_xfer *x = &p->xs[i];
    int src, tag;
    uint32_t seq;
    uint8_t *st;
    if (!x->done || x->status || !x->rx_has_data) return;
    efax_imm_decode((uint32_t)x->rx_data, &src, &tag, &seq);
    if (src < 0 || src >= p->n || src == p->me || tag >= p->maxn) return;
    st = &p->status[src * p->maxn + tag];
    *st &= (uint8_t)~SEND_MISSING;
    if (x->rx_len != p->msg ||
        p->rx->ops->check(p->rx, (uint64_t)i * p->msg, p->msg, src, iter_of(p->me, tag, 0)))
        *st |= SEND_BAD;
}

/* Receives first (each on the NIC the peer's NIC k arrives at), a barrier, then to every peer on every
   NIC a SEND and a WRITE, each with immediate data. Then every arrival is checked: what never came is
   marked missing, not fatal. */
static int prove(proof *p) {
    efax_send_desc sd;
    efax_write_desc w;
    int ntx = 0, rc = 0;
    for (int i = 0, j = 0; i < p->n && !rc; i++)
        for (int k = 0; i != p->me && k < efax_ctx_peer_nnics(&p->b.ctx, i) && !rc; k++, j++) {
            int nic = efax_ctx_route_in(&p->b.ctx, i, k);
            rc = efax_recv(&p->b.ctx, &p->xs[ntx++], nic, &p->rx->mr, (uint64_t)j * p->msg, p->msg);
        }
    if (!rc) rc = efax_boot_barrier(&p->b.boot, -1);
    for (int j = 0; j < p->n && !rc; j++)
        for (int k = 0; j != p->me && k < p->nn && !rc; k++) {
            rc = efax_send(&p->b.ctx, &p->xs[ntx++], send_of(p, &sd, j, k));
            if (!rc) rc = efax_write(&p->b.ctx, &p->xs[ntx++], write_of(p, &w, p->me, j, k), NULL);
        }
    if (rc) return rc;
    for (int i = 0; i < ntx; i++) (void)efax_wait(&p->b.ctx, &p->xs[i], -1);
    for (int i = 0; i < p->n; i++) /* each write landed in its own slot */
        for (int k = 0; i != p->me && k < efax_ctx_peer_nnics(&p->b.ctx, i); k++)
            p->status[i * p->maxn + k] = (uint8_t)(SEND_MISSING | write_status(p, i, k));
    for (int i = 0; i < p->nrx; i++) send_status(p, i);
    return efax_boot_allgather(&p->b.boot, p->status, (size_t)p->n * (size_t)p->maxn, p->all,
                               -1); /* every view */
}

/* Rank 0: one failed pair and NIC, said. */
static void say_failed(const proof *p, int i, int j, int k, int f) {
    printf("FAIL rank %d (%s) -> rank %d (%s) from NIC %d:%s%s%s%s\n", i, p->b.boot.hosts[i], j,
           p->b.boot.hosts[j], k, f & SEND_MISSING ? " SEND never arrived" : "",
           f & SEND_BAD ? " SEND data wrong" : "", f & WRITE_MISSING ? " WRITE never arrived" : "",
           f & WRITE_BAD ? " WRITE data wrong" : "");
}

/* Rank 0: the matrix (row: sender, column: receiver) and each failed pair and NIC. Returns how many
   failed. */
static int report(const proof *p) {
    int n = p->n, bad = 0;
    printf("\n%-10s", "from\\to");
    for (int j = 0; j < n; j++) printf(" %6d", j);
    for (int i = 0; i < n; i++) { /* row i: the sender; column j: the receiver */
        printf("\nrank %-5d", i);
        for (int j = 0; j < n; j++) {
            int fail = 0;
            for (int k = 0; i != j && k < p->maxn; k++) fail |= seen_by(p, j, i, k);
            printf(" %6s", i == j ? "-" : fail ? "FAIL" : "OK");
        }
    }
    printf("\n");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; i != j && k < p->maxn; k++) {
                int f = seen_by(p, j, i, k);
                if (!f) continue;
                bad++;
                say_failed(p, i, j, k, f);
            }
    if (!bad)
        printf("all %d×%d pairs OK (SEND and WRITE with immediate data on every NIC, %llu bytes each, "
               "checked)\n",
               n, n - 1, (unsigned long long)p->msg);
    return bad;
}

int main(int argc, char **argv) {
    efax_bench_desc d;
    int64_t bad = 0;
    int rc;
    proof p;
    efax_optdef defs[] = {
        {"provider", 0, EFAX_OPT_STR, &p.b.o.provider, 0, 0, NULL, "NAME",
         "libfabric provider (default efa > tcp > shm)"},
        {"nics", 0, EFAX_OPT_STR, &p.b.o.nics, 0, 0, NULL, "LIST", "comma-separated NIC names"},
        {"size", 's', EFAX_OPT_SIZE, &p.msg, 1, 16777216, NULL, "SIZE", "bytes per message (default 4K)"},
        {"timeout", 0, EFAX_OPT_INT, &p.b.o.timeout_ms, 1, 86400000, NULL, "MS",
         "fail any wait longer than this"},
        EFAX_OPT_END,
    };
    memset(&p, 0, sizeof p);
    memset(&d, 0, sizeof d);
    p.msg = 4096;
    d.driver = "bootstrap";
    d.about = "Proves SEND and WRITE-with-immediate between every ordered pair of ranks on every NIC.";
    d.extra = defs;
    d.own_options = true;
    d.min_ranks = 1;
    d.cold = true;
    rc = efax_bench_open(&p.b, &d, argc, argv); /* its own options, the launcher */
    if (!rc)
        rc =
            efax_bench_connect(&p.b); /* the NICs, endpoint names; cold: the connections are what is proven */
    if (!rc) rc = meet(&p);
    if (!rc) rc = setup(&p);
    if (!rc) rc = prove(&p);
    if (!rc)
        rc = efax_boot_sum(&p.b.boot, p.me == 0 ? report(&p) : 0, &bad, -1); /* rank 0's verdict, for all */
    rc = efax_bench_close(&p.b, rc);
    return rc ? rc : bad ? 1 : 0;
}
