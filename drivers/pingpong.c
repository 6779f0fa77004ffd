/* pingpong — the "echo" experiment: the programming model in its smallest form. Rank 0 sends a
   message to rank 1, which answers with one of the same size; as SEND/RECV, then as RDMA WRITE
   with immediate data (--variant times one alone). Latency is one-way: half the round trip.
   With -c both sides check every byte they receive (outside the timing). The answer comes from
   rank 1's own send buffer, as in fi_pingpong: answering from the buffer that just received
   would make the peer read cache lines another core just wrote (on shm that halves the
   bandwidth at 4 MiB) and measure that instead of the transport.

   cc -O2 -I. drivers/pingpong.c -o pingpong $(pkg-config --cflags --libs libfabric pmix)
   mpirun -np 2 ./pingpong -b 1 -e 1M -c
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_bench.h"

#include <string.h>

enum { TAG_PING = 1, SENDRECV = 0, WRITEIMM = 1 };

typedef struct echo {
    efax_ctx *ctx;
    int me, peer, variant;
    bool check;
    uint64_t size;
    efax_mr *tx, *rx; /* with -c each holds two halves: iteration parity picks one */
    uint8_t *txb, *rxb;
    efax_xfer r, s;
    efax_send_desc sd; /* the SendRecv message in flight */
    efax_write_desc w; /* the WriteImm message in flight */
    uint32_t arrivals; /* chunks a WriteImm message lands in, each with the immediate data */
    double *lat;       /* rank 0: the timed round trips' halves (microseconds) */
} echo;

/* Which half iteration seq uses: alternating with -c (the other one is being checked or
   refilled), always the first without (the same cache footprint as fi_pingpong's). */
static uint64_t half_of(const echo *e, uint64_t seq) { return e->check ? (seq & 1) * e->size : 0; }

/* The messages to the peer (ping and answer alike), described once per size: SendRecv's from our
   send half; WriteImm's from our send half to the same receive half there. */
static void echo_describe(echo *e) {
    memset(&e->sd, 0, sizeof e->sd);
    e->sd.to = e->peer;
    e->sd.src = e->tx;
    e->sd.size = e->size;
    memset(&e->w, 0, sizeof e->w);
    e->w.from = e->me;
    e->w.to = e->peer;
    e->w.src = e->tx;
    e->w.dst = e->rx;
    e->w.size = e->size;
    e->w.mode = EFAX_MODE_SINGLE;
    e->w.tag = TAG_PING;
    /* the peer's message is cut as ours is: host memory both, between the same two hosts */
    e->arrivals = efax_write_chunks(e->size, efax_ctx_peer_nnics(e->ctx, e->peer), EFAX_MODE_SINGLE,
                                    efax_write_chunk(e->ctx, &e->w));
}

/* The SendRecv message of iteration seq: only its half changes. */
static const efax_send_desc *echo_send(echo *e, uint64_t seq) {
    e->sd.src_off = half_of(e, seq);
    return &e->sd;
}

/* The WriteImm message of iteration seq: its halves and sequence change. */
static const efax_write_desc *echo_write(echo *e, uint64_t seq) {
    e->w.src_off = e->w.dst_off = half_of(e, seq);
    e->w.seq = (uint32_t)seq;
    return &e->w;
}

/* Rank 0: one round trip of iteration seq; the answer's receive is posted after the ping. */
static int ping(echo *e, uint64_t seq) {
    int rc;
    if (e->variant == SENDRECV) {
        rc = efax_send(e->ctx, &e->s, echo_send(e, seq));
        if (!rc) rc = efax_recv(e->ctx, &e->r, 0, e->rx, half_of(e, seq), e->size);
        if (!rc) rc = efax_wait(e->ctx, &e->s, -1);
        return rc ? rc : efax_wait(e->ctx, &e->r, -1);
    }
    rc = efax_write(e->ctx, &e->s, echo_write(e, seq), NULL);
    if (!rc) rc = efax_wait_imm(e->ctx, e->peer, TAG_PING, (uint32_t)seq, e->arrivals, -1);
    return rc ? rc : efax_wait(e->ctx, &e->s, -1);
}

/* Rank 1: answer iteration seq; for SEND/RECV the next receive is posted after the answer
   (fi_pingpong posts it before, so every message waits for a post; here it overlaps the flight). */
static int pong(echo *e, uint64_t seq, bool last) {
    int rc;
    if (e->variant == SENDRECV) {
        rc = efax_wait(e->ctx, &e->r, -1);
        if (!rc) rc = efax_send(e->ctx, &e->s, echo_send(e, seq));
        if (!rc && !last) rc = efax_recv(e->ctx, &e->r, 0, e->rx, half_of(e, seq + 1), e->size);
        return rc ? rc : efax_wait(e->ctx, &e->s, -1);
    }
    rc = efax_wait_imm(e->ctx, e->peer, TAG_PING, (uint32_t)seq, e->arrivals, -1);
    if (!rc) rc = efax_write(e->ctx, &e->s, echo_write(e, seq), NULL);
    return rc ? rc : efax_wait(e->ctx, &e->s, -1);
}

/* The loop's clock: iteration it's ticks since the last stamp (warm-up iterations, it < 0, keep none). */
static inline void stamp(uint64_t *prev, double *lat, int it) {
    uint64_t t = efax_ticks();
    if (it >= 0) lat[it] = (double)(t - *prev);
    *prev = t;
}

/* Rank 0 without -c: the round trips back to back, one timestamp each (the loop tests/instr.sh
   counts against fi_pingpong's: the ping, the answer's receive, the wait and the clock, nothing
   else per iteration; SendRecv's is ping's with the first halves, the only ones without -c).
   lat[it] gets ticks. */
static int ping_all(echo *e, int warm, int iters, double *lat) {
    efax_ctx *ctx = e->ctx;
    const efax_send_desc *sd = echo_send(e, 0);
    uint64_t prev = efax_ticks();
    int rc = 0, it;
    if (e->variant != SENDRECV) {
        for (it = -warm; it < iters && !rc; it++) {
            rc = ping(e, (uint64_t)(it + warm));
            stamp(&prev, lat, it);
        }
        return rc;
    }
    for (it = -warm; it < iters; it++) {
        if ((rc = efax_send(ctx, &e->s, sd))) return rc;
        if ((rc = efax_recv(ctx, &e->r, 0, e->rx, 0, e->size))) return rc;
        /* injected: done already, no call */
        if ((rc = efax_wait(ctx, &e->s, -1))) return rc;
        if ((rc = efax_wait(ctx, &e->r, -1))) return rc;
        stamp(&prev, lat, it);
    }
    return 0;
}

/* One size, one variant: warm-up, then timed round trips (ranks past 1 only join the record). */
static int measure(efax_bench *b, echo *e, const efax_bench_step *st) {
    const char *name = e->variant == SENDRECV ? "SendRecv" : "WriteImm";
    int iters = st->iters, warm = st->warmup, rc = 0;
    uint64_t size = e->size = st->size, ns0, tk0, prev;
    double *lat = e->lat, secs = 0, us;
    int64_t wrong = 0;
    efax_result res;
    efax_bench_variant(b, st, name); /* its own NIC counters and progress line */
    echo_describe(e);
    if (e->me == 1 && e->variant == SENDRECV) rc = efax_recv(e->ctx, &e->r, 0, e->rx, 0, size);
    if (b->o.check && e->me <= 1) {
        efax_pattern_fill(e->txb, size, 0, e->me, 0);
        efax_poison(e->rxb, 2 * size);
    }
    /* the peer writes only once this side's buffer is cleared: a split shm write's first half is
       copied by the writer itself, at once, and a late poison erased it (seen under load) */
    if (!rc && b->o.check) rc = efax_boot_barrier(&b->boot, EFAX_TURN_MS);
    /* without -c one timestamp per round trip times them back to back (average = total time /
       iterations, as in fi_pingpong); with -c the checks between them are excluded. efax_ticks
       (rdtsc ~10 ns; clock_gettime ~25 ns under a hypervisor), converted with the loop's rate. */
    ns0 = efax_now_ns();
    tk0 = efax_ticks();
    prev = tk0;
    if (!rc && e->me == 0 && !b->o.check) rc = ping_all(e, warm, iters, lat);
    for (int it = -warm; it < iters && e->me <= 1 && (e->me || b->o.check) && !rc; it++) {
        uint64_t seq = (uint64_t)(it + warm), t0;
        uint8_t *half = e->rxb + half_of(e, seq);
        if (e->me == 0) {
            t0 = b->o.check ? efax_ticks() : prev;
            rc = ping(e, seq);
            prev = efax_ticks();
            if (it >= 0) lat[it] = (double)(prev - t0); /* ticks, converted below */
        } else {
            rc = pong(e, seq, it + 1 == iters);
        }
        if (!b->o.check || rc) continue;
        /* each side checks what the other sent, clears it, and prepares its next message */
        wrong += (int64_t)efax_pattern_check(half, size, 0, e->peer, seq, NULL);
        efax_poison(half, size);
        efax_pattern_fill(e->txb + half_of(e, seq + 1), size, 0, e->me, seq + 1);
    }
    if (rc) return rc;
    us = (double)(efax_now_ns() - ns0) / 1e3 / (double)(efax_ticks() - tk0 + 1); /* per tick */
    for (int k = 0; e->me == 0 && k < iters; k++) {
        lat[k] *= us / 2; /* one-way: half */
        secs += lat[k] * 2e-6;
    }
    efax_result_init(&res, name, "host", "host", EFAX_RESULT_HALFRTT, size, 1, 1);
    efax_result_time(&res, lat, iters, 2 * size, efax_bench_line(b, EFAX_MODE_SINGLE));
    res.seconds = secs; /* a round trip moves 2 * size */
    res.gbps = secs > 0 ? (double)res.bytes * 8 / secs / 1e9 : 0;
    return efax_bench_record(b, &res, wrong);
}

int main(int argc, char **argv) {
    efax_bench b;
    efax_bench_desc d;
    efax_bench_step st;
    efax_buf *tx, *rx;
    echo e;
    const char *variant = "both"; /* fi_pingpong's sequence is sendrecv's alone: one kind, size after size */
    efax_optdef extra[] = {
        {"variant", 0, EFAX_OPT_CHOICE, &variant, 0, 0, "both|sendrecv|writeimm", "WHICH",
         "which echo to time (default both)"},
        EFAX_OPT_END,
    };
    size_t iters;
    int rc, first, last;
    memset(&d, 0, sizeof d);
    memset(&st, 0, sizeof st);
    memset(&e, 0, sizeof e);
    d.driver = "pingpong";
    d.about = "Ping-pong (echo) between rank 0 and rank 1 over SEND/RECV and WRITE with immediate\n"
              "data. Latency is one-way: half the measured round trip. Other ranks wait.";
    d.extra = extra;
    d.min_size = 1;
    d.max_size = 1 << 20;
    d.modes = 1u << EFAX_MODE_SINGLE;         /* the variants are the experiment's; --mode does not apply */
    rc = efax_bench_open(&b, &d, argc, argv); /* options (sizes 1 B .. 1 MiB), the launcher */
    b.d.sends = strcmp(variant, "writeimm") != 0; /* SEND/RECV: no size above the provider's largest */
    if (!rc) rc = efax_bench_connect(&b);
    /* a send and a receive buffer (two halves each for -c), registered on every NIC */
    if (!rc) rc = efax_bench_buf(&b, b.kinds[0], 2 * b.o.max_size, EFAX_MR_SEND | EFAX_MR_WRITE_SRC, &tx);
    if (!rc) rc = efax_bench_buf(&b, b.kinds[0], 2 * b.o.max_size, EFAX_MR_RECV | EFAX_MR_WRITE_DST, &rx);
    iters = (size_t)efax_opts_iters(&b.o, b.o.min_size);
    if (!rc && !(e.lat = (double *)efax_bench_calloc(&b, iters, sizeof *e.lat))) rc = -FI_ENOMEM;
    if (!rc) rc = efax_bench_begin(&b, "host");
    e.ctx = &b.ctx;
    e.check = b.o.check;
    e.me = b.rank;
    e.peer = b.rank == 0 ? 1 : 0;
    if (!rc) {
        e.tx = &tx->mr;
        e.rx = &rx->mr;
        e.txb = (uint8_t *)tx->ptr;
        e.rxb = (uint8_t *)rx->ptr;
    }
    first = strcmp(variant, "writeimm") ? SENDRECV : WRITEIMM;
    last = strcmp(variant, "sendrecv") ? WRITEIMM : SENDRECV;
    while (!rc && efax_bench_next(&b, &st, &rc)) /* each size: the chosen variants */
        for (e.variant = first; e.variant <= last && !rc; e.variant++) rc = measure(&b, &e, &st);
    return efax_bench_close(&b, rc);
}
