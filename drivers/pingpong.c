/* pingpong — the "echo" experiment: the programming model in its smallest form. Rank 0 sends
   a message to rank 1, which answers with a message of the same size; first as SEND/RECV,
   then as RDMA WRITE with immediate data. Reported latency is one-way: half the measured
   round trip. With -c both sides check every byte they receive (outside the timing). The
   answer comes from rank 1's own send buffer, as in fi_pingpong: answering from the buffer
   that just received would make the peer read cache lines another core just wrote (on shm
   that halves the bandwidth at 4 MiB) and measure that instead of the transport.

   cc -O2 -I. drivers/pingpong.c -o pingpong $(pkg-config --cflags --libs libfabric pmix)
   mpirun -np 2 ./pingpong -b 1 -e 1M -c
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_PING = 1, SENDRECV = 0, WRITEIMM = 1 };

typedef struct echo {
    efax_ctx *ctx;
    int me, peer, variant;
    bool check;
    uint64_t size;
    efax_mr *tx, *rx;      /* with -c each holds two halves: iteration parity picks one */
    uint8_t *txb, *rxb;
    efax_xfer r, s;
} echo;

/* Which half iteration seq uses: alternating with -c (the other one is being checked or
   refilled), always the first without (the same cache footprint as fi_pingpong's). */
static uint64_t half_of(const echo *e, uint64_t seq) { return e->check ? (seq & 1) * e->size : 0; }

/* How many chunks a WriteImm message lands in (each carries the immediate data): one, unless
   it is larger than the most one write may carry (1 GiB on efa). */
static uint32_t arrivals(const echo *e) {
    return efax_write_chunks(e->size, efax_ctx_peer_nnics(e->ctx, e->peer), EFAX_MODE_SINGLE, efax_ctx_max_chunk(e->ctx));
}

/* Rank 0: one round trip of iteration seq. */
static int ping(echo *e, uint64_t seq) {
    uint64_t half = half_of(e, seq);
    efax_xfer *both[2] = {&e->s, &e->r};
    int rc;
    if (e->variant == SENDRECV) {
        if ((rc = efax_recv(e->ctx, &e->r, 0, e->rx, half, e->size)) ||
            (rc = efax_send(e->ctx, &e->s, e->peer, 0, e->tx, half, e->size, false, 0)))
            return rc;
        return efax_wait_all(e->ctx, both, 2, -1);
    }
    if ((rc = efax_write(e->ctx, &e->s, e->peer, EFAX_MODE_SINGLE, 0, e->tx, half, e->rx, half, e->size, 0, TAG_PING,
                         (uint32_t)seq, NULL)) ||
        (rc = efax_wait_imm(e->ctx, e->peer, TAG_PING, (uint32_t)seq, arrivals(e), -1)))
        return rc;
    return efax_wait(e->ctx, &e->s, -1);
}

/* Rank 1: answer iteration seq. For SEND/RECV the receive of the next iteration is posted
   before the answer goes out. */
static int pong(echo *e, uint64_t seq, bool last) {
    uint64_t half = half_of(e, seq);
    int rc;
    if (e->variant == SENDRECV) {
        if ((rc = efax_wait(e->ctx, &e->r, -1))) return rc;
        if (!last && (rc = efax_recv(e->ctx, &e->r, 0, e->rx, half_of(e, seq + 1), e->size))) return rc;
        if ((rc = efax_send(e->ctx, &e->s, e->peer, 0, e->tx, half, e->size, false, 0))) return rc;
        return efax_wait(e->ctx, &e->s, -1);
    }
    if ((rc = efax_wait_imm(e->ctx, e->peer, TAG_PING, (uint32_t)seq, arrivals(e), -1)) ||
        (rc = efax_write(e->ctx, &e->s, e->peer, EFAX_MODE_SINGLE, 0, e->tx, half, e->rx, half, e->size, 0, TAG_PING,
                         (uint32_t)seq, NULL)))
        return rc;
    return efax_wait(e->ctx, &e->s, -1);
}

int main(int argc, char **argv) {
    static const char *const names[] = {"SendRecv", "WriteImm"};
    efax_opts o;
    efax_boot boot;
    efax_ctx ctx;
    efax_ctx_desc cd;
    efax_boot_desc bd;
    efax_mr tx, rx;
    efax_mr_desc md;
    efax_report rep;
    echo e;
    char err[256];
    int rc;
    double *lat = NULL;

    /* 1. options: sizes 1 B .. 1 MiB by default */
    efax_opts_init(&o);
    o.min_size = 1;
    o.max_size = 1 << 20;
    rc = efax_opts_parse(&o, argc, argv, NULL, "pingpong",
                         "Ping-pong (echo) between rank 0 and rank 1 over SEND/RECV and WRITE with immediate\n"
                         "data. Latency is one-way: half the measured round trip. Other ranks wait.",
                         err, sizeof err);
    if (rc == 1) return 0;
    if (rc) { fprintf(stderr, "pingpong: %s\n", err); return 2; }
    {
        const efax_mem_ops *kind;
        int nk;
        if ((rc = efax_mem_select(o.mem, &kind, 1, &nk, err, sizeof err))) { fprintf(stderr, "pingpong: %s\n", err); return 2; }
    }

    /* 2. join the job, open the NICs, exchange endpoint names */
    memset(&bd, 0, sizeof bd);
    bd.timeout_ms = o.timeout_ms;
    if ((rc = efax_boot_init(&boot, &bd))) return efax_exit_code(rc);
    if (boot.size < 2) {
        fprintf(stderr, "pingpong: needs 2 ranks (e.g. mpirun -np 2 %s)\n", argv[0]);
        efax_boot_deinit(&boot);
        return 2;
    }
    memset(&cd, 0, sizeof cd);
    memset(&tx, 0, sizeof tx);
    memset(&rx, 0, sizeof rx);
    memset(&e, 0, sizeof e);
    cd.provider = o.provider;
    cd.nics = o.nics;
    cd.local_rank = boot.local_rank;
    cd.timeout_ms = o.timeout_ms;
    cd.efa_shm = o.efa_shm, cd.no_cuda_api = o.no_cuda_api;
    if ((rc = efax_ctx_init(&ctx, &cd)) || (rc = efax_ctx_connect(&ctx, &boot))) goto out;
    e.ctx = &ctx;
    e.check = o.check;
    e.me = boot.rank;
    e.peer = boot.rank == 0 ? 1 : 0;

    /* 3. a send and a receive buffer (two halves each for -c), registered on every NIC */
    e.txb = (uint8_t *)efax_host_alloc(2 * o.max_size);
    e.rxb = (uint8_t *)efax_host_alloc(2 * o.max_size);
    lat = (double *)malloc(sizeof(double) * (size_t)efax_opts_iters(&o, o.min_size));
    if (!e.txb || !e.rxb || !lat) { fprintf(stderr, "pingpong: out of memory\n"); rc = -FI_ENOMEM; goto out; }
    memset(e.txb, 0, 2 * o.max_size);
    memset(e.rxb, 0, 2 * o.max_size);
    memset(&md, 0, sizeof md);
    md.ptr = e.txb; md.len = 2 * o.max_size; md.access = EFAX_MR_SEND | EFAX_MR_WRITE_SRC;
    if ((rc = efax_mr_reg(&ctx, &tx, &md))) goto out;
    md.ptr = e.rxb; md.len = 2 * o.max_size; md.access = EFAX_MR_RECV | EFAX_MR_WRITE_DST;
    if ((rc = efax_mr_reg(&ctx, &rx, &md)) || (rc = efax_mr_exchange(&rx, &boot))) goto out;
    e.tx = &tx;
    e.rx = &rx;
    if ((rc = efax_report_init(&rep, &o, "pingpong", "host", &ctx, &boot))) goto out;

    /* 4. the sweep: each size, each variant: warm-up, then timed round trips */
    for (uint64_t size = o.min_size; size && !rc; size = efax_opts_next_size(&o, size)) {
        int iters = efax_opts_iters(&o, size), warm = efax_opts_warmup(&o, size);
        for (e.variant = SENDRECV; e.variant <= WRITEIMM && !rc; e.variant++) {
            int64_t wrong = 0, total_wrong = 0;
            double secs = 0;
            e.size = size;
            efax_ctx_stats_reset(&ctx);
            if (e.me == 1 && e.variant == SENDRECV)
                rc = efax_recv(&ctx, &e.r, 0, &rx, 0, size);
            if (o.check && e.me <= 1) efax_pattern_fill(e.txb, size, 0, e.me, 0), efax_poison(e.rxb, 2 * size);
            /* without -c nothing happens between round trips, so one clock reading per round trip
               times them back to back (the average is then total time / iterations, as in
               fi_pingpong); with -c the checks between them are excluded */
            uint64_t prev = efax_now_ns();
            for (int it = -warm; it < iters && e.me <= 1 && !rc; it++) {
                uint64_t seq = (uint64_t)(it + warm), t0, t1;
                uint8_t *half = e.rxb + half_of(&e, seq);
                if (e.me == 0) {
                    t0 = o.check ? efax_now_ns() : prev;
                    rc = ping(&e, seq);
                    prev = t1 = efax_now_ns();
                    if (it >= 0) {
                        lat[it] = (double)(t1 - t0) / 2e3; /* one-way: half the round trip */
                        secs += lat[it] * 2e-6;
                    }
                } else {
                    rc = pong(&e, seq, it + 1 == iters);
                }
                /* each side checks what the other sent, clears it, and prepares its next message */
                if (o.check && !rc) {
                    wrong += (int64_t)efax_pattern_check(half, size, 0, e.peer, seq, NULL);
                    efax_poison(half, size);
                    efax_pattern_fill(e.txb + half_of(&e, seq + 1), size, 0, e.me, seq + 1);
                }
            }
            /* 5. the step's end: gather the check, report */
            if (!rc) rc = efax_boot_sum(&boot, wrong, &total_wrong, EFAX_TURN_MS);
            if (!rc && e.me == 0) {
                efax_result res;
                memset(&res, 0, sizeof res);
                snprintf(res.variant, sizeof res.variant, "%s", names[e.variant]);
                snprintf(res.memory, sizeof res.memory, "host");
                snprintf(res.mem_path, sizeof res.mem_path, "host");
                snprintf(res.kind, sizeof res.kind, "halfrtt");
                res.size = size;
                res.iters = iters;
                res.window = 1;
                res.peers = 1;
                res.seconds = secs;
                res.bytes = 2 * size * (uint64_t)iters;
                res.gbps = (double)res.bytes * 8 / secs / 1e9;
                res.line_gbps = o.line_gbps > 0 ? o.line_gbps : efax_ctx_nic(&ctx, 0)->link_gbps;
                res.lat_us = efax_stats_of(lat, iters);
                res.wrong = o.check ? total_wrong : -1;
                efax_result_nics(&res, &ctx);
                efax_report_add(&rep, &res);
            }
        }
        efax_report_row(&rep);
    }
    if (!rc) rc = efax_report_status(&rep);
    efax_report_deinit(&rep);
out:
    efax_mr_dereg(&tx);
    efax_mr_dereg(&rx);
    efax_ctx_deinit(&ctx);
    efax_boot_deinit(&boot);
    free(e.txb);
    free(e.rxb);
    free(lat);
    return efax_exit_code(rc);
}
