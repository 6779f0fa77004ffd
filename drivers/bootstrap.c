/* bootstrap — the "bootstrap" experiment: every rank exchanges endpoint names and memory keys,
   then every ordered pair of ranks proves a SEND and a WRITE with immediate data on every
   NIC, with the data checked. Prints the pair matrix and "all N×(N−1) pairs OK", or names
   the pairs that failed.

   cc -O2 -I. drivers/bootstrap.c -o bootstrap $(pkg-config --cflags --libs libfabric pmix)
   mpirun -np 4 ./bootstrap
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OK = 0, SEND_BAD = 1, SEND_MISSING = 2, WRITE_BAD = 4, WRITE_MISSING = 8 };

/* pattern iteration of the message rank src sends to rank dst from its NIC k (0: SEND, 1: WRITE) */
static uint64_t iter_of(int dst, int k, int op) { return ((uint64_t)dst * EFAX_MAX_NICS + (uint64_t)k) * 2 + (uint64_t)op; }

int main(int argc, char **argv) {
    const char *provider = NULL, *nics = NULL;
    uint64_t msg = 4096;
    int timeout = 0, rc, n, me, nn, maxn = 0, i, j, k, nrx = 0, ntx = 0, bad = 0;
    efax_optdef defs[] = {
        {"provider", 0, EFAX_OPT_STR, &provider, 0, 0, NULL, "NAME", "libfabric provider (default efa > tcp > shm)"},
        {"nics", 0, EFAX_OPT_STR, &nics, 0, 0, NULL, "LIST", "comma-separated NIC names"},
        {"size", 's', EFAX_OPT_SIZE, &msg, 1, 16777216, NULL, "SIZE", "bytes per message (default 4K)"},
        {"timeout", 0, EFAX_OPT_INT, &timeout, 1, 86400000, NULL, "MS", "fail any wait longer than this"},
        {NULL, 0, (efax_opt_type)0, NULL, 0, 0, NULL, NULL, NULL}};
    efax_boot boot;
    efax_boot_desc bd;
    efax_ctx ctx;
    efax_ctx_desc cd;
    efax_mr tx, rx, wd;
    efax_mr_desc md;
    efax_xfer *xs = NULL;
    uint8_t *txb = NULL, *rxb = NULL, *wdb = NULL, *status = NULL, *all = NULL;
    char err[256], line[1024], *lines = NULL;

    /* 1. options, launcher, NICs, endpoint names */
    rc = efax_args_parse(argc, argv, defs, "bootstrap", "Proves SEND and WRITE-with-immediate between every ordered pair of ranks on every NIC.", err, sizeof err);
    if (rc == 1) return 0;
    if (rc) { fprintf(stderr, "bootstrap: %s\n", err); return 2; }
    memset(&bd, 0, sizeof bd);
    bd.timeout_ms = timeout;
    if ((rc = efax_boot_init(&boot, &bd))) return efax_exit_code(rc);
    memset(&cd, 0, sizeof cd);
    memset(&tx, 0, sizeof tx), memset(&rx, 0, sizeof rx), memset(&wd, 0, sizeof wd);
    cd.provider = provider;
    cd.nics = nics;
    cd.local_rank = boot.local_rank;
    cd.timeout_ms = timeout;
    if ((rc = efax_ctx_init(&ctx, &cd)) || (rc = efax_ctx_connect(&ctx, &boot))) goto out;
    n = boot.size;
    me = boot.rank;
    nn = efax_ctx_nnics(&ctx);
    for (i = 0; i < n; i++) maxn = efax_ctx_peer_nnics(&ctx, i) > maxn ? efax_ctx_peer_nnics(&ctx, i) : maxn;

    /* 2. show what was exchanged: every rank's host and NIC addresses */
    {
        size_t u = (size_t)snprintf(line, sizeof line, "rank %d on %s:", me, boot.host);
        for (k = 0; k < nn && u < sizeof line; k++) {
            char a[128];
            u += (size_t)snprintf(line + u, sizeof line - u, " %s=%s", efax_ctx_nic(&ctx, k)->name, efax_ctx_nic_addr(&ctx, k, a, sizeof a));
        }
        lines = (char *)calloc((size_t)n, sizeof line);
        if (!lines || (rc = efax_boot_allgather(&boot, line, sizeof line, lines, -1))) goto out;
        if (me == 0) {
            printf("# efax bootstrap %s: provider %s, %d ranks, bootstrap %s\n", EFAX_VERSION_STRING,
                   efax_ctx_nic(&ctx, 0)->provider, n, boot.kind == EFAX_BOOT_PMIX ? "PMIx" : boot.kind == EFAX_BOOT_TCP ? "TCP rendezvous" : "single");
            for (i = 0; i < n; i++) printf("#   %s\n", lines + (size_t)i * sizeof line);
        }
    }

    /* 3. buffers: a source slot per (peer, NIC, op), receive slots, a write window per (peer, NIC) */
    for (i = 0; i < n; i++)
        if (i != me) nrx += efax_ctx_peer_nnics(&ctx, i);
    txb = (uint8_t *)calloc((size_t)n * (size_t)nn * 2, msg);
    rxb = (uint8_t *)calloc((size_t)(nrx ? nrx : 1), msg);
    wdb = (uint8_t *)calloc((size_t)n * (size_t)maxn, msg);
    xs = (efax_xfer *)calloc((size_t)(n * nn * 2 + nrx + 1), sizeof *xs);
    status = (uint8_t *)calloc((size_t)n * (size_t)maxn, 1);
    all = (uint8_t *)calloc((size_t)n * (size_t)n * (size_t)maxn, 1);
    if (!txb || !rxb || !wdb || !xs || !status || !all) { rc = -FI_ENOMEM; goto out; }
    for (j = 0; j < n; j++)
        for (k = 0; k < nn; k++)
            for (int op = 0; op < 2; op++)
                efax_pattern_fill(txb + (((size_t)j * (size_t)nn + (size_t)k) * 2 + (size_t)op) * msg, msg, 0, me, iter_of(j, k, op));
    efax_poison(rxb, (uint64_t)(nrx ? nrx : 1) * msg);
    efax_poison(wdb, (uint64_t)n * (uint64_t)maxn * msg);
    memset(&md, 0, sizeof md);
    md.ptr = txb, md.len = (size_t)n * (size_t)nn * 2 * msg, md.access = EFAX_MR_SEND | EFAX_MR_WRITE_SRC;
    if ((rc = efax_mr_reg(&ctx, &tx, &md))) goto out;
    md.ptr = rxb, md.len = (size_t)(nrx ? nrx : 1) * msg, md.access = EFAX_MR_RECV;
    if ((rc = efax_mr_reg(&ctx, &rx, &md))) goto out;
    md.ptr = wdb, md.len = (size_t)n * (size_t)maxn * msg, md.access = EFAX_MR_WRITE_DST;
    if ((rc = efax_mr_reg(&ctx, &wd, &md)) || (rc = efax_mr_exchange(&wd, &boot))) goto out;

    /* 4. receives first (each on the NIC the peer's NIC k arrives at), then a barrier */
    for (i = 0, j = 0; i < n; i++)
        for (k = 0; i != me && k < efax_ctx_peer_nnics(&ctx, i); k++, j++)
            if ((rc = efax_recv(&ctx, &xs[ntx++], efax_ctx_route_in(&ctx, i, k), &rx, (uint64_t)j * msg, msg))) goto out;
    if ((rc = efax_boot_barrier(&boot, -1))) goto out;

    /* 5. to every peer, on every NIC: a SEND and a WRITE, each with immediate data (me, tag k) */
    for (j = 0; j < n; j++)
        for (k = 0; j != me && k < nn; k++) {
            uint32_t imm;
            size_t slot = ((size_t)j * (size_t)nn + (size_t)k) * 2;
            efax_xfer *w = &xs[ntx++];
            efax_imm_encode(me, k, 0, &imm);
            if ((rc = efax_send(&ctx, &xs[ntx++], j, k, &tx, slot * msg, msg, true, imm))) goto out;
            efax_imm_encode(me, k, 1, &imm);
            memset(w, 0, sizeof *w);
            w->nseg = 1, w->seg[0].nic = k, w->seg[0].len = msg;
            if ((rc = efax_write_segs(&ctx, w, j, &tx, (slot + 1) * msg, &wd,
                                      ((uint64_t)me * (uint64_t)maxn + (uint64_t)k) * msg, 0, true, imm)))
                goto out;
        }

    /* 6. wait for everything; what never came is marked missing, not fatal */
    for (i = 0; i < ntx; i++)
        if (efax_wait(&ctx, &xs[i], -1)) bad++;
    for (i = 0; i < n; i++)
        for (k = 0; i != me && k < efax_ctx_peer_nnics(&ctx, i); k++)
            if (efax_wait_imm(&ctx, i, k, 1, 1, -1)) status[i * maxn + k] |= WRITE_MISSING;

    /* 7. check: receives name their sender in the immediate data; writes have fixed slots */
    for (i = 0; i < n; i++)
        for (k = 0; i != me && k < efax_ctx_peer_nnics(&ctx, i); k++) status[i * maxn + k] |= SEND_MISSING;
    for (i = 0; i < nrx; i++) {
        int src, tag;
        uint32_t seq;
        if (!xs[i].done || xs[i].status || !xs[i].rx_has_data) continue;
        efax_imm_decode((uint32_t)xs[i].rx_data, &src, &tag, &seq);
        if (src < 0 || src >= n || src == me || tag >= maxn) continue;
        status[src * maxn + tag] &= (uint8_t)~SEND_MISSING;
        if (xs[i].rx_len != msg || efax_pattern_check(rxb + (size_t)i * msg, msg, 0, src, iter_of(me, tag, 0), NULL))
            status[src * maxn + tag] |= SEND_BAD;
    }
    for (i = 0; i < n; i++)
        for (k = 0; i != me && k < efax_ctx_peer_nnics(&ctx, i); k++)
            if (!(status[i * maxn + k] & WRITE_MISSING) &&
                efax_pattern_check(wdb + ((size_t)i * (size_t)maxn + (size_t)k) * msg, msg, 0, i, iter_of(me, k, 1), NULL))
                status[i * maxn + k] |= WRITE_BAD;

    /* 8. gather every rank's view and print the matrix (row: sender, column: receiver) */
    if ((rc = efax_boot_allgather(&boot, status, (size_t)n * (size_t)maxn, all, -1))) goto out;
    bad = 0;
    if (me == 0) {
        printf("\n%-10s", "from\\to");
        for (j = 0; j < n; j++) printf(" %6d", j);
        printf("\n");
        for (i = 0; i < n; i++) {
            printf("rank %-5d", i);
            for (j = 0; j < n; j++) {
                int fail = 0;
                for (k = 0; i != j && k < maxn; k++) fail |= all[((size_t)j * (size_t)n + (size_t)i) * (size_t)maxn + (size_t)k];
                printf(" %6s", i == j ? "-" : fail ? "FAIL" : "OK");
            }
            printf("\n");
        }
        for (i = 0; i < n; i++)
            for (j = 0; j < n; j++)
                for (k = 0; i != j && k < maxn; k++) {
                    int f = all[((size_t)j * (size_t)n + (size_t)i) * (size_t)maxn + (size_t)k];
                    if (!f) continue;
                    bad++;
                    printf("FAIL rank %d (%s) -> rank %d (%s) from NIC %d:%s%s%s%s\n", i, boot.hosts[i], j, boot.hosts[j], k,
                           f & SEND_MISSING ? " SEND never arrived" : "", f & SEND_BAD ? " SEND data wrong" : "",
                           f & WRITE_MISSING ? " WRITE never arrived" : "", f & WRITE_BAD ? " WRITE data wrong" : "");
                }
        if (!bad) printf("all %d×%d pairs OK (SEND and WRITE with immediate data on every NIC, %llu bytes each, checked)\n",
                         n, n - 1, (unsigned long long)msg);
    }
    if (!rc) {
        int64_t total = 0;
        rc = efax_boot_sum(&boot, bad, &total, -1);
        bad = (int)total;
    }
out:
    efax_mr_dereg(&tx);
    efax_mr_dereg(&rx);
    efax_mr_dereg(&wd);
    efax_ctx_deinit(&ctx);
    efax_boot_deinit(&boot);
    free(txb), free(rxb), free(wdb), free(xs), free(status), free(all), free(lines);
    return rc ? efax_exit_code(rc) : bad ? 1 : 0;
}
