/* sendrecv — two-sided SEND/RECV, rank 0 <-> rank k for every k in turn; two numbers per mode, labelled
   as what they are. Stream: one-way bandwidth; rank 0 keeps --window messages in flight, rank k receives
   them all and confirms; time from the first send to that confirmation. RoundTrip: rank 0 sends, rank k
   answers with a message of the same size: the round-trip time, and size / round trip as "Gbps(rt)" (the
   Libefaxx ~48 Gbps figure is of this kind: it is not the link's bandwidth). Messages are planned over the
   NICs by --mode like writes; receives are posted on the NIC each piece arrives at. Nothing assumes that
   messages arrive in the order they were sent (efa's SRD does not order them unless asked, and a provider
   may refuse): every message of an iteration carries the same pattern, so any receive of the right piece
   may take it, and each piece's immediate data names it (message, segment), so -c also checks that every
   piece of every message arrived exactly once.
   Stream without -c keeps the window moving: its two halves are confirmed apart, and rank 0 sends a half
   of the next iteration as soon as the same half of this one is confirmed, so that at most --window
   messages are unconfirmed and the link never idles for a confirmation's round trip (osu_mbw_mr and
   fabtests' fi_rdm_bw confirm each whole window and wait for it: bw_tx_comp's ft_rx); an iteration's
   time runs from the end of the one before. With -c every iteration stands alone (its bytes are
   checked between them).

   cc -O2 -I. drivers/sendrecv.c -o sendrecv $(pkg-config --cflags --libs libfabric pmix)
   nvcc -O2 -x cu -I. drivers/sendrecv.c -o sendrecv_cuda \
       $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix
   mpirun -np 2 ./sendrecv -b 1K -e 64M -c
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#ifdef __CUDACC__
#include "efax_cuda.h"
#endif
#include "efax_bench.h"

enum { STREAM = 0, ROUNDTRIP = 1 };

/* Operations posted and not yet waited for. */
typedef struct oplist {
    efax_xfer *x;
    int n;
} oplist;

typedef struct run {
    efax_bench b;
    efax_bench_step st;
    int v, W;                    /* the variant, its messages per iteration (--window for Stream, 1) */
    int nlat;                    /* lat's length */
    bool halves;                 /* Stream without -c, W >= 2: two halves in flight */
    uint64_t t_end;              /* halves: when the last iteration ended (efax_now_ns) */
    efax_buf *srcs[3], *dsts[3]; /* max(window, 2) slots of max_size each, per memory kind */
    efax_buf *src, *dst;         /* the current kind's */
    oplist tx, rx;               /* the operations posted and not yet waited for */
    oplist txh[2], rxh[2];       /* halves: each half's, in tx's and rx's storage */
    double *lat;                 /* rank 0's nlat times of the variant */
    int64_t wrong;               /* the bytes this rank found wrong in it */
} run;

/* The fields every send of a window from buf to peer shares. */
static void send_desc(efax_send_desc *sd, int peer, efax_buf *buf) {
    memset(sd, 0, sizeof *sd);
    sd->to = peer;
    sd->src = &buf->mr;
    sd->has_imm = true;
}

/* Posts one piece of message m, segment s, as a send (sd: its fixed fields; from offset off of its
   source) onto list l. Its immediate data is m << 8 | s, naming the piece. */
static int send_piece(run *r, efax_send_desc *sd, uint64_t off, const efax_plan_seg *seg, uint64_t m, int s,
                      oplist *l) {
    sd->nic = seg->nic;
    sd->src_off = off + seg->off;
    sd->size = seg->len;
    sd->imm = (uint32_t)m << 8 | (uint32_t)s;
    return efax_send(&r->b.ctx, &l->x[l->n++], sd);
}

/* post_range's loop where every message goes whole through one NIC (Single mode): the same post but
   for its slot, without the loop over pieces. What a small message costs to post here is what the
   message rate measures: 129 -> 83 own instructions a send, 120 -> 82 a receive (shm, 8 B). */
static int post_whole(run *r, bool send, int peer, efax_buf *buf, const efax_plan_seg *seg, int slot0, int m0,
                      int m1, oplist *l) {
    efax_ctx *ctx = &r->b.ctx;
    efax_xfer *x = l->x + l->n;
    int rc = 0, m = m0;
    if (send) {
        efax_send_desc sd;
        send_desc(&sd, peer, buf);
        sd.nic = seg->nic;
        sd.size = seg->len;
        for (; m < m1 && !rc; m++) {
            sd.src_off = efax_bench_slot_off(&r->b, (uint64_t)(slot0 + m), r->st.size) + seg->off;
            sd.imm = (uint32_t)m << 8; /* piece 0 of message m, as send_piece names it */
            rc = efax_send(ctx, x++, &sd);
        }
    } else {
        int nic = efax_ctx_route_in(ctx, peer, seg->nic);
        for (; m < m1 && !rc; m++) {
            uint64_t off = efax_bench_slot_off(&r->b, (uint64_t)(slot0 + m), r->st.size) + seg->off;
            rc = efax_recv(ctx, x++, nic, &buf->mr, off, seg->len);
        }
    }
    l->n = (int)(x - l->x); /* the failed one too, as post_range counts it */
    return rc;
}

/* Posts the sends (or, on the other side, the receives) of messages m0 .. m1-1 of iteration seq onto list
   l, planned by the step's mode: message m is number seq * W + m in slot slot0 + m of buf. A receive
   is posted on the NIC its piece arrives at. */
static int post_range(run *r, bool send, int peer, efax_buf *buf, uint64_t seq, int slot0, int m0, int m1,
                      oplist *l) {
    efax_plan_seg seg[EFAX_MAX_NICS];
    int rnic[EFAX_MAX_NICS]; /* a receive's NIC: where the peer's NIC of its segment sends to */
    efax_send_desc sd;
    int nn = send ? efax_ctx_nnics(&r->b.ctx) : efax_ctx_peer_nnics(&r->b.ctx, peer), rc = 0;
    /* Single mode plans every message alike, in one piece: planned once, posted by post_whole */
    if (r->st.mode == EFAX_MODE_SINGLE && m0 < m1 &&
        efax_plan(r->st.size, nn, r->st.mode, seq * (uint64_t)r->W + (uint64_t)m0, 0, 0, seg) == 1)
        return post_whole(r, send, peer, buf, seg, slot0, m0, m1, l);
    send_desc(&sd, peer, buf);
    for (uint64_t m = (uint64_t)m0; m < (uint64_t)m1 && !rc; m++) {
        uint64_t off = efax_bench_slot_off(&r->b, (uint64_t)slot0 + m, r->st.size);
        int ns = efax_plan(r->st.size, nn, r->st.mode, seq * (uint64_t)r->W + m, 0, 0, seg);
        if (ns < 0) return ns;
        for (int s = 0; s < ns && !send; s++) rnic[s] = efax_ctx_route_in(&r->b.ctx, peer, seg[s].nic);
        if (send) {
            for (int s = 0; s < ns && !rc; s++) rc = send_piece(r, &sd, off, &seg[s], m, s, l);
            continue;
        }
        for (int s = 0; s < ns && !rc; s++)
            rc = efax_recv(&r->b.ctx, &l->x[l->n++], rnic[s], &buf->mr, off + seg[s].off, seg[s].len);
    }
    return rc;
}

/* The W messages of iteration seq, on the list of their direction. */
static int post(run *r, bool send, int peer, efax_buf *buf, uint64_t seq, int slot0) {
    return post_range(r, send, peer, buf, seq, slot0, 0, r->W, send ? &r->tx : &r->rx);
}

/* Half h of a Stream's window: messages [W/2, W) for h = 1, [0, W/2) for h = 0; its sends (or receives)
   of iteration seq onto the half's list, and the tag that confirms it. */
static int post_half(run *r, bool send, int peer, efax_buf *buf, uint64_t seq, int h) {
    int mid = r->W / 2;
    return post_range(r, send, peer, buf, seq, 0, h ? mid : 0, h ? r->W : mid,
                      send ? &r->txh[h] : &r->rxh[h]);
}
static int half_tag(int h) { return h ? EFAX_BENCH_TAG_ACK2 : EFAX_BENCH_TAG_ACK; }

/* With -c, on rank k: the first n receives took each piece of the W messages of iteration seq exactly once
   (their immediate data names them). Returns the bytes of receives that did not. */
static int64_t check_pieces(run *r, uint64_t seq, int n) {
    efax_plan_seg seg[EFAX_MAX_NICS];
    unsigned char *seen = (unsigned char *)calloc((size_t)r->W * EFAX_MAX_NICS, 1);
    int nn = efax_ctx_peer_nnics(&r->b.ctx, 0);
    int64_t wrong = 0;
    for (int i = 0; i < n; i++) {
        const efax_xfer *x = &r->rx.x[i];
        uint32_t m = (uint32_t)x->rx_data >> 8, s = (uint32_t)x->rx_data & 0xff;
        int ns = m < (uint32_t)r->W
                     ? efax_plan(r->st.size, nn, r->st.mode, seq * (uint64_t)r->W + m, 0, 0, seg)
                     : 0;
        if (seen && x->rx_has_data && s < (uint32_t)ns && !seen[m * EFAX_MAX_NICS + s]++ &&
            x->rx_len == seg[s].len)
            continue;
        if (!wrong)
            fprintf(stderr,
                    "sendrecv: rank %d: receive %d took piece %u of message %u (immediate data %#llx, "
                    "%llu bytes): not one of this iteration's, or taken twice\n",
                    r->b.rank, i, s, m, (unsigned long long)x->rx_data, (unsigned long long)x->rx_len);
        wrong += (int64_t)(x->len ? x->len : 1);
    }
    free(seen);
    return wrong;
}

/* Waits for a list's operations; empties it. */
static int wait_list(run *r, oplist *l) {
    int rc = 0;
    for (int i = 0; i < l->n && !rc; i++) rc = efax_wait(&r->b.ctx, &l->x[i], -1);
    l->n = 0;
    return rc;
}

/* Checks (with -c) what `from` sent into the W slots from slot0, counts the wrong bytes, and clears them.
   Every message of iteration seq carries pattern (from, seq): which slot took it is not checked, as no
   order is assumed (check_pieces). */
static void check_slots(run *r, int from, uint64_t seq, int slot0) {
    for (int m = 0; m < r->W; m++) {
        uint64_t off = (uint64_t)(slot0 + m) * r->st.size;
        r->wrong += (int64_t)r->dst->ops->check(r->dst, off, r->st.size, from, seq * 1000);
        r->dst->ops->poison(r->dst, off, r->st.size);
    }
}

/* Rank 0's iteration seq with rank k: W messages, timed until k confirmed them (Stream) or answered
   (RoundTrip). */
static int send_iter(run *r, int k, uint64_t seq, bool timed) {
    bool rt = r->v == ROUNDTRIP, c = r->b.o.check;
    int slot = rt ? (int)(seq & 1) : 0, rc = 0;
    uint64_t t0;
    for (int m = 0; c && m < r->W; m++)
        r->src->ops->fill(r->src, (uint64_t)m * r->st.size, r->st.size, 0, seq * 1000);
    if (c && !rt && seq > 0) rc = efax_wait_imm(&r->b.ctx, k, EFAX_BENCH_TAG_READY, (uint32_t)seq - 1, 1, -1);
    t0 = efax_now_ns();
    if (rt && !rc) rc = post(r, false, k, r->dst, seq, slot);
    if (!rc) rc = post(r, true, k, r->src, seq, 0);
    if (!rc && rt) rc = wait_list(r, &r->rx);
    if (!rc && !rt) rc = efax_wait_imm(&r->b.ctx, k, EFAX_BENCH_TAG_ACK, (uint32_t)seq, 1, -1);
    if (timed) r->lat[r->nlat++] = (double)(efax_now_ns() - t0) / 1e3;
    if (!rc) rc = wait_list(r, &r->tx);
    if (!rc && c && rt) check_slots(r, k, seq, slot);
    return rc;
}

/* Rank 0's iteration seq of a Stream in halves: both halves of seq are out (the first iteration sends
   them); as each half is confirmed, its sends are done here too and the same half of seq + 1 goes, unless
   seq is the last. Timed from the end of the iteration before (the first: from its first send). */
static int send_halves(run *r, int k, uint64_t seq, bool first, bool last, bool timed) {
    int rc = 0;
    uint64_t t;
    if (first) r->t_end = efax_now_ns();
    for (int h = 0; first && h < 2 && !rc; h++) rc = post_half(r, true, k, r->src, seq, h);
    for (int h = 0; h < 2 && !rc; h++) {
        rc = efax_wait_imm(&r->b.ctx, k, half_tag(h), (uint32_t)seq, 1, -1);
        if (!rc) rc = wait_list(r, &r->txh[h]);
        if (!rc && !last) rc = post_half(r, true, k, r->src, seq + 1, h);
    }
    t = efax_now_ns();
    if (timed) r->lat[r->nlat++] = (double)(t - r->t_end) / 1e3;
    r->t_end = t;
    return rc;
}

/* Rank k's iteration seq of a Stream in halves: as each half's receives complete, the same half's
   receives of seq + 1 go up (unless seq is the last), then its confirmation. Untagged receives take
   messages in the order they were posted, so the halves' receives fill in order whatever order the
   messages arrive in; a half confirmed when its receives are done leaves at most W messages out. */
static int answer_halves(run *r, uint64_t seq, bool more) {
    int rc = 0;
    for (int h = 0; h < 2 && !rc; h++) {
        rc = wait_list(r, &r->rxh[h]);
        if (!rc && more) rc = post_half(r, false, 0, r->dst, seq + 1, h);
        if (!rc) rc = efax_notify(&r->b.ctx, 0, half_tag(h), (uint32_t)seq);
    }
    return rc;
}

/* Rank k's iteration seq: the next receives go up before the answer (a checked Stream's after its
   check); the answer comes from our own send buffer. */
static int answer_iter(run *r, int k, uint64_t seq, bool more) {
    bool rt = r->v == ROUNDTRIP, c = r->b.o.check;
    int slot = rt ? (int)(seq & 1) : 0, nrx = r->rx.n, rc = wait_list(r, &r->rx);
    if (!rc && c && !rt) r->wrong += check_pieces(r, seq, nrx);
    if (!rc && more && (rt || !c)) rc = post(r, false, 0, r->dst, seq + 1, slot ^ rt);
    if (!rc && rt) rc = post(r, true, 0, r->src, seq, slot);
    if (!rc && !rt) rc = efax_notify(&r->b.ctx, 0, EFAX_BENCH_TAG_ACK, (uint32_t)seq);
    if (!rc && rt) rc = wait_list(r, &r->tx);
    if (!rc && c) check_slots(r, 0, seq, slot);
    if (!rc && c && rt) /* the next answer */
        r->src->ops->fill(r->src, (uint64_t)(slot ^ 1) * r->st.size, r->st.size, k, (seq + 1) * 1000);
    if (!rc && c && !rt && more) rc = post(r, false, 0, r->dst, seq + 1, 0);
    if (!rc && c && !rt) rc = efax_notify(&r->b.ctx, 0, EFAX_BENCH_TAG_READY, (uint32_t)seq);
    return rc;
}

/* The variant between rank 0 and rank k; every rank calls it. */
static int turn(run *r, int k) {
    int warm = r->st.warmup, last = r->st.iters + warm - 1, me = r->b.rank, rc = 0;
    bool rt = r->v == ROUNDTRIP, c = r->b.o.check;
    if (me == k && r->halves)
        for (int h = 0; h < 2 && !rc; h++) rc = post_half(r, false, 0, r->dst, 0, h);
    else if (me == k)
        rc = post(r, false, 0, r->dst, 0, 0);
    if (!rc && me == k && c && rt) r->src->ops->fill(r->src, 0, r->st.size, k, 0);
    if (!rc) rc = efax_boot_barrier(&r->b.boot, EFAX_TURN_MS); /* our turn: receives are posted */
    for (int it = -warm; it < r->st.iters && !rc && (me == 0 || me == k); it++) {
        uint64_t seq = (uint64_t)(it + warm);
        if (me == 0 && r->halves)
            rc = send_halves(r, k, seq, it == -warm, seq == (uint64_t)last, it >= 0);
        else if (me == 0)
            rc = send_iter(r, k, seq, it >= 0);
        else if (r->halves)
            rc = answer_halves(r, seq, seq < (uint64_t)last);
        else
            rc = answer_iter(r, k, seq, seq < (uint64_t)last);
    }
    if (!rc && me == 0 && c && !rt)
        rc = efax_wait_imm(&r->b.ctx, k, EFAX_BENCH_TAG_READY, (uint32_t)last, 1, -1);
    return rc;
}

/* Buffers of every memory kind (max(window, 2) slots each) and the operation lists. */
static int setup(run *r) {
    efax_bench *b = &r->b;
    size_t slots = b->o.window > 2 ? (size_t)b->o.window : 2, bytes = (size_t)b->o.max_size * slots;
    size_t iters = (size_t)efax_opts_iters(&b->o, b->o.min_size) * (size_t)b->size;
    int rc = efax_bench_bufs(b, bytes, EFAX_MR_SEND, EFAX_MR_RECV, r->srcs, r->dsts);
    r->tx.x = (efax_xfer *)efax_bench_calloc(b, slots * EFAX_MAX_NICS, sizeof(efax_xfer));
    r->rx.x = (efax_xfer *)efax_bench_calloc(b, slots * EFAX_MAX_NICS * 2, sizeof(efax_xfer));
    r->lat = (double *)efax_bench_calloc(b, iters, sizeof(double));
    /* a Stream's halves: each its messages' pieces (at most EFAX_MAX_NICS a message) in tx's and rx's */
    for (int h = 0; h < 2 && r->tx.x && r->rx.x; h++) {
        r->txh[h].x = r->tx.x + (size_t)(h ? b->o.window / 2 : 0) * EFAX_MAX_NICS;
        r->rxh[h].x = r->rx.x + (size_t)(h ? b->o.window / 2 : 0) * EFAX_MAX_NICS;
    }
    return rc ? rc : !r->tx.x || !r->rx.x || !r->lat ? -FI_ENOMEM : 0;
}

/* Variant v at one point of the sweep: rank 0 with each rank in turn. */
static int measure(run *r, int v) {
    static const char *const vname[] = {"Stream", "RoundTrip"};
    efax_result_kind kind = v == STREAM ? EFAX_RESULT_ONEWAY : EFAX_RESULT_ROUNDTRIP;
    int rc = 0;
    efax_result res;
    r->nlat = 0;
    r->wrong = 0;
    r->v = v;
    r->W = v == STREAM ? r->b.o.window : 1;
    r->halves = v == STREAM && r->W >= 2 && !r->b.o.check;
    r->src = r->srcs[r->st.k];
    r->dst = r->dsts[r->st.k];
    efax_bench_variant(&r->b, &r->st, vname[v]); /* its own NIC counters and progress line */
    for (int k = 1; k < r->b.size && !rc; k++) rc = turn(r, k);
    efax_bench_result(&res, &r->st, r->src, vname[v], kind, r->W, 1);
    efax_result_time(&res, r->lat, r->nlat, r->st.size * (uint64_t)r->W, efax_bench_line(&r->b, r->st.mode));
    return rc ? rc : efax_bench_record(&r->b, &res, r->wrong);
}

int main(int argc, char **argv) {
    run r;
    efax_bench_desc d;
    int rc;
    memset(&r, 0, sizeof r);
    memset(&d, 0, sizeof d);
    d.driver = "sendrecv";
    d.about = "Two-sided SEND/RECV, rank 0 <-> rank k: one-way streaming bandwidth and round-trip time.";
    d.window = 8;                               /* many messages in flight for the streaming number */
    d.msg_rate = true;                          /* Mmsg/s beside Gbps */
    d.sends = true;                             /* messages whole: none above the provider's largest */
    rc = efax_bench_open(&r.b, &d, argc, argv); /* options, memory kinds, the launcher */
    if (!rc) rc = efax_bench_connect(&r.b);     /* NICs, connections */
    if (!rc) rc = setup(&r);
    if (!rc) rc = efax_bench_begin(&r.b, NULL);      /* the report's header (and the GPU ceiling) */
    while (!rc && efax_bench_next(&r.b, &r.st, &rc)) /* every size, mode and memory kind: both variants */
        if (!(rc = measure(&r, STREAM))) rc = measure(&r, ROUNDTRIP);
    return efax_bench_close(&r.b, rc);
}
