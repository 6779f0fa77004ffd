/* sendrecv — two-sided SEND/RECV, rank 0 <-> rank k for every k in turn. Two numbers per mode,
   labelled as what they are:
     Stream     one-way bandwidth: rank 0 keeps --window messages in flight, rank k receives
                them all and confirms; time from the first send to that confirmation.
     RoundTrip  rank 0 sends, rank k answers with a message of the same size: the round-trip
                time, and size / round trip as "Gbps(rt)" (the Libefaxx ~48 Gbps figure is of
                this kind: it is not the link's bandwidth).
   Messages are planned over the NICs by --mode like writes; receives are posted on the NIC
   each piece arrives at. Nothing assumes that messages arrive in the order they were sent
   (efa's SRD does not order them unless asked, and a provider may refuse): every message of
   an iteration carries the same pattern, so any receive of the right piece may take it, and
   each piece's immediate data names it (message, segment), so -c also checks that every piece
   of every message arrived exactly once.

   cc -O2 -I. drivers/sendrecv.c -o sendrecv $(pkg-config --cflags --libs libfabric pmix)
   nvcc -O2 -x cu -I. drivers/sendrecv.c -o sendrecv_cuda $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix
   mpirun -np 2 ./sendrecv -b 1K -e 64M -c
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#ifdef __CUDACC__
#include "efax_cuda.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_ACK = 2, TAG_READY = 3, STREAM = 0, ROUNDTRIP = 1 };

typedef struct bench {
    efax_opts o;
    efax_boot boot;
    efax_ctx ctx;
    efax_report rep;
    const efax_mem_ops *kinds[3];
    int nk, k;                 /* memory kinds, and the one being measured */
    efax_buf srcs[3], dsts[3]; /* max(window, 2) slots of max_size each, per kind */
    efax_buf *src, *dst;       /* the current kind's */
    efax_xfer *tx, *rx;
    int ntx, nrx;
    double *lat;
    int me, n;
} bench;

/* Posts the sends (or, on the other side, the receives) of message m of an iteration, planned
   by `mode`. A send's immediate data names its piece: m << 8 | segment. */
static int post_msg(bench *b, bool send, int peer, efax_buf *buf, efax_mode mode, uint64_t size, uint64_t index,
                    uint64_t off, int m) {
    efax_plan_seg seg[EFAX_MAX_NICS];
    int nn = send ? efax_ctx_nnics(&b->ctx) : efax_ctx_peer_nnics(&b->ctx, peer), ns, s, rc = 0;
    ns = efax_plan(size, nn, mode, index, 0, 0, seg);
    for (s = 0; s < ns && !rc; s++) {
        if (send) rc = efax_send(&b->ctx, &b->tx[b->ntx++], peer, seg[s].nic, &buf->mr, off + seg[s].off, seg[s].len, true, (uint32_t)m << 8 | (uint32_t)s);
        else rc = efax_recv(&b->ctx, &b->rx[b->nrx++], efax_ctx_route_in(&b->ctx, peer, seg[s].nic), &buf->mr, off + seg[s].off, seg[s].len);
    }
    return rc;
}

/* With -c: the first n receives took each piece of the W messages of an iteration exactly
   once (their immediate data names them). Returns the bytes of receives that did not. */
static int64_t check_pieces(bench *b, int peer, efax_mode mode, uint64_t size, uint64_t seq, int W, int n) {
    efax_plan_seg seg[EFAX_MAX_NICS];
    unsigned char *seen = (unsigned char *)calloc((size_t)W * EFAX_MAX_NICS, 1);
    int64_t wrong = 0;
    bool told = false;
    for (int i = 0; i < n; i++) {
        const efax_xfer *x = &b->rx[i];
        uint32_t m = (uint32_t)x->rx_data >> 8, s = (uint32_t)x->rx_data & 0xff;
        int ns = m < (uint32_t)W ? efax_plan(size, efax_ctx_peer_nnics(&b->ctx, peer), mode, seq * (uint64_t)W + m, 0, 0, seg) : 0;
        if (!seen || !x->rx_has_data || s >= (uint32_t)ns || seen[m * EFAX_MAX_NICS + s]++ || x->rx_len != seg[s].len) {
            wrong += (int64_t)(x->len ? x->len : 1);
            if (!told)
                fprintf(stderr, "sendrecv: rank %d: receive %d took piece %u of message %u (immediate data %#llx, %llu bytes): "
                                "not one of this iteration's, or taken twice\n", b->me, i, s, m,
                        (unsigned long long)x->rx_data, (unsigned long long)x->rx_len);
            told = true;
        }
    }
    free(seen);
    return wrong;
}

static int wait_list(bench *b, efax_xfer *xs, int *n) {
    int rc = 0;
    for (int i = 0; i < *n && !rc; i++) rc = efax_wait(&b->ctx, &xs[i], -1);
    *n = 0;
    return rc;
}

/* Receives of one iteration: `count` messages from peer into dst slots starting at slot0. */
static int post_recvs(bench *b, int peer, efax_mode mode, uint64_t size, uint64_t seq, int count, int slot0, int W) {
    int rc = 0;
    for (int m = 0; m < count && !rc; m++)
        rc = post_msg(b, false, peer, b->dst, mode, size, seq * (uint64_t)W + (uint64_t)m, (uint64_t)(slot0 + m) * size, m);
    return rc;
}

/* Checks (with -c) what `from` sent into `count` slots from slot0, and clears them. Every
   message of iteration seq carries pattern (from, seq): which slot a message took is not
   checked, as no order is assumed (check_pieces checks that each arrived once). */
static int64_t check_slots(bench *b, int from, uint64_t size, uint64_t seq, int count, int slot0) {
    int64_t wrong = 0;
    for (int m = 0; m < count; m++) {
        uint64_t off = (uint64_t)(slot0 + m) * size;
        wrong += (int64_t)b->dst->ops->check(b->dst, off, size, from, seq * 1000);
        b->dst->ops->poison(b->dst, off, size);
    }
    return wrong;
}

/* One (size, mode, variant) step between rank 0 and rank k; every rank calls it. */
static int step(bench *b, int k, int variant, efax_mode mode, uint64_t size, int *nlat, int64_t *wrong) {
    int iters = efax_opts_iters(&b->o, size), warm = efax_opts_warmup(&b->o, size), rc = 0;
    int W = variant == STREAM ? b->o.window : 1, last = iters + warm - 1;
    if (b->me == k) rc = post_recvs(b, 0, mode, size, 0, W, 0, W);
    if (b->me == k && b->o.check && variant == ROUNDTRIP) b->src->ops->fill(b->src, 0, size, k, 0);
    if (!rc) rc = efax_boot_barrier(&b->boot, EFAX_TURN_MS); /* our turn: receives are posted */
    for (int it = -warm; it <= iters - 1 && !rc && (b->me == 0 || b->me == k); it++) {
        uint64_t seq = (uint64_t)(it + warm), t0 = 0;
        int slot = variant == ROUNDTRIP ? (int)(seq & 1) : 0;
        if (b->me == 0) {
            if (b->o.check) {
                for (int m = 0; m < W; m++) b->src->ops->fill(b->src, (uint64_t)m * size, size, 0, seq * 1000);
                if (variant == STREAM && seq > 0) rc = efax_wait_imm(&b->ctx, k, TAG_READY, (uint32_t)seq - 1, 1, -1);
            }
            t0 = efax_now_ns();
            if (variant == ROUNDTRIP && !rc) rc = post_recvs(b, k, mode, size, seq, 1, slot, 1);
            for (int m = 0; m < W && !rc; m++)
                rc = post_msg(b, true, k, b->src, mode, size, seq * (uint64_t)W + (uint64_t)m, (uint64_t)m * size, m);
            if (!rc) rc = variant == STREAM ? efax_wait_imm(&b->ctx, k, TAG_ACK, (uint32_t)seq, 1, -1) : wait_list(b, b->rx, &b->nrx);
            if (it >= 0) b->lat[(*nlat)++] = (double)(efax_now_ns() - t0) / 1e3;
            if (!rc) rc = wait_list(b, b->tx, &b->ntx);
            if (!rc && b->o.check && variant == ROUNDTRIP) *wrong += check_slots(b, k, size, seq, 1, slot);
        } else if (variant == STREAM) {
            int nrx = b->nrx;
            if ((rc = wait_list(b, b->rx, &b->nrx))) break;
            if (b->o.check) *wrong += check_pieces(b, 0, mode, size, seq, W, nrx);
            if (!b->o.check && seq < (uint64_t)last) rc = post_recvs(b, 0, mode, size, seq + 1, W, 0, W);
            if (!rc) rc = efax_notify(&b->ctx, 0, TAG_ACK, (uint32_t)seq);
            if (!rc && b->o.check) {
                *wrong += check_slots(b, 0, size, seq, W, 0);
                if (seq < (uint64_t)last) rc = post_recvs(b, 0, mode, size, seq + 1, W, 0, W);
                if (!rc) rc = efax_notify(&b->ctx, 0, TAG_READY, (uint32_t)seq);
            }
        } else { /* round trip: answer from our own send buffer (prepared during the last one) */
            if ((rc = wait_list(b, b->rx, &b->nrx))) break;
            if (seq < (uint64_t)last) rc = post_recvs(b, 0, mode, size, seq + 1, 1, slot ^ 1, 1);
            if (!rc) rc = post_msg(b, true, 0, b->src, mode, size, seq, (uint64_t)slot * size, 0);
            if (!rc) rc = wait_list(b, b->tx, &b->ntx);
            if (!rc && b->o.check) {
                *wrong += check_slots(b, 0, size, seq, 1, slot);
                b->src->ops->fill(b->src, (uint64_t)(slot ^ 1) * size, size, k, (seq + 1) * 1000);
            }
        }
    }
    if (!rc && b->me == 0 && b->o.check && variant == STREAM) rc = efax_wait_imm(&b->ctx, k, TAG_READY, (uint32_t)last, 1, -1);
    return rc;
}

int main(int argc, char **argv) {
    static const char *const vname[] = {"Stream", "RoundTrip"};
    bench b;
    efax_ctx_desc cd;
    efax_boot_desc bd;
    char err[256], names[64];
    int rc, slots;

    /* 1. options: many messages in flight by default for the streaming number */
    memset(&b, 0, sizeof b);
    efax_opts_init(&b.o);
    b.o.window = 8;
#ifdef __CUDACC__
    b.o.mem = "all"; /* host, pinned and device memory */
#endif
    rc = efax_opts_parse(&b.o, argc, argv, NULL, "sendrecv",
                         "Two-sided SEND/RECV, rank 0 <-> rank k: one-way streaming bandwidth and round-trip time.", err, sizeof err);
    if (rc == 1) return 0;
    if (rc) { fprintf(stderr, "sendrecv: %s\n", err); return 2; }
#ifdef __CUDACC__
    rc = efax_cuda_mem_select(b.o.mem, b.kinds, 3, &b.nk, err, sizeof err);
#else
    rc = efax_mem_select(b.o.mem, b.kinds, 3, &b.nk, err, sizeof err);
#endif
    if (rc < 0) { fprintf(stderr, "sendrecv: %s\n", err); return 2; }
    if (!b.nk) { printf("# %s\n", err); return 0; }

    /* 2. launcher, NICs, connections */
    memset(&bd, 0, sizeof bd);
    bd.timeout_ms = b.o.timeout_ms;
    if ((rc = efax_boot_init(&b.boot, &bd))) return efax_exit_code(rc);
    b.me = b.boot.rank;
    b.n = b.boot.size;
    if (b.n < 2) { fprintf(stderr, "sendrecv: needs at least 2 ranks (e.g. mpirun -np 2 %s)\n", argv[0]); efax_boot_deinit(&b.boot); return 2; }
    if (err[0] && b.me == 0) printf("# %s\n", err); /* kinds this machine cannot run */
    memset(&cd, 0, sizeof cd);
    cd.provider = b.o.provider;
    cd.nics = b.o.nics;
    cd.local_rank = b.boot.local_rank;
    cd.timeout_ms = b.o.timeout_ms;
    cd.efa_shm = b.o.efa_shm, cd.no_cuda_api = b.o.no_cuda_api;
#ifdef __CUDACC__
    if ((rc = efax_cuda_use(b.kinds, b.nk, b.boot.local_rank, &cd.hmem))) goto out; /* this rank's GPU */
    efax_cuda_near(&cd); /* device memory: the NICs nearest this GPU */
#endif
    if ((rc = efax_ctx_init(&b.ctx, &cd)) || (rc = efax_ctx_connect(&b.ctx, &b.boot)) || (rc = efax_ctx_warmup(&b.ctx))) goto out;

    /* 3. buffers and the operation lists */
    slots = b.o.window > 2 ? b.o.window : 2;
    for (b.k = 0; b.k < b.nk; b.k++) {
        if ((rc = efax_buf_alloc(&b.ctx, &b.srcs[b.k], b.kinds[b.k], (size_t)b.o.max_size * (size_t)slots, EFAX_MR_SEND)) ||
            (rc = efax_buf_alloc(&b.ctx, &b.dsts[b.k], b.kinds[b.k], (size_t)b.o.max_size * (size_t)slots, EFAX_MR_RECV)))
            goto out;
        b.dsts[b.k].ops->poison(&b.dsts[b.k], 0, (uint64_t)b.o.max_size * (uint64_t)slots);
    }
    b.tx = (efax_xfer *)calloc((size_t)slots * EFAX_MAX_NICS, sizeof(efax_xfer));
    b.rx = (efax_xfer *)calloc((size_t)slots * EFAX_MAX_NICS * 2, sizeof(efax_xfer));
    b.lat = (double *)calloc((size_t)efax_opts_iters(&b.o, b.o.min_size) * (size_t)b.n, sizeof(double));
    if (!b.tx || !b.rx || !b.lat) { rc = -FI_ENOMEM; goto out; }
    if ((rc = efax_report_init(&b.rep, &b.o, "sendrecv", efax_mem_names(b.kinds, b.nk, names, sizeof names), &b.ctx, &b.boot))) goto out;
#ifdef __CUDACC__
    if (efax_cuda_wants_hmem(b.kinds, b.nk) && (rc = efax_cuda_ceiling(&b.rep, &b.boot, 256u << 20))) goto out;
#endif

    /* 4. the sweep: every size, every mode, both variants, rank 0 with each rank in turn */
    for (uint64_t size = b.o.min_size; size && !rc; size = efax_opts_next_size(&b.o, size)) {
        for (int mode = 0; mode < EFAX_MODE_COUNT && !rc; mode++)
            for (b.k = 0; b.k < b.nk && (b.o.modes & (1u << mode)) && !rc; b.k++)
            for (int v = STREAM; v <= ROUNDTRIP && !rc; v++) {
                int nlat = 0;
                int64_t wrong = 0, total = 0;
                char label[40];
                efax_result res;
                b.src = &b.srcs[b.k], b.dst = &b.dsts[b.k];
                efax_ctx_stats_reset(&b.ctx);
                efax_report_progress(&b.rep, "%s %s %llu bytes", efax_mode_label((efax_mode)mode), vname[v], (unsigned long long)size);
                for (int k = 1; k < b.n && !rc; k++) rc = step(&b, k, v, (efax_mode)mode, size, &nlat, &wrong);
                if (!rc) rc = efax_boot_sum(&b.boot, wrong, &total, EFAX_TURN_MS);
                if (rc || b.me != 0) continue;
                snprintf(label, sizeof label, "%s%s %s", efax_mode_label((efax_mode)mode), b.kinds[b.k]->label, vname[v]);
                efax_result_init(&res, label, b.kinds[b.k]->name, b.src->path, v == STREAM ? "oneway" : "roundtrip", size,
                                 v == STREAM ? b.o.window : 1, 1);
                efax_result_time(&res, b.lat, nlat, size * (uint64_t)(v == STREAM ? b.o.window : 1),
                                 efax_line_rate(&b.ctx, &b.o, mode == EFAX_MODE_SINGLE ? 1 : efax_ctx_nnics(&b.ctx)));
                res.wrong = b.o.check ? total : -1;
                efax_result_nics(&res, &b.ctx);
                efax_report_add(&b.rep, &res);
            }
        efax_report_row(&b.rep);
    }
    if (!rc) rc = efax_report_status(&b.rep);
    efax_report_deinit(&b.rep);
out:
    for (int k = 0; k < 3; k++) efax_buf_free(&b.srcs[k]), efax_buf_free(&b.dsts[k]);
    efax_ctx_deinit(&b.ctx);
    efax_boot_deinit(&b.boot);
    free(b.tx), free(b.rx), free(b.lat);
    return efax_exit_code(rc);
}
