/* xfer — correctness test of the transfer engine under mpirun: every rank sends to its right
   neighbour and receives from its left one (a ring), as SEND/RECV and as WRITE with immediate
   data, in every mode, for sizes from 1 byte to --max (default 64 MiB), with a small window
   and small chunks so the backlog and window logic run. Every byte is checked; any wrong byte,
   stale iteration or error exits 1. --staged moves every byte through staging buffers (host
   memory standing in for device memory), so the staged engine is tested without a GPU.

   mpirun -np 4 build/xfer_test --provider tcp
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { TAG_W = 5 };

/* The ring's write from rank `from` to rank `to` (whole buffers, under TAG_W, sequence = index), as
   both sides describe it. */
static const efax_write_desc *ring_write(efax_write_desc *w, int from, int to, const efax_mr *src,
                                         const efax_mr *dst, efax_mode mode, uint64_t index, uint64_t size,
                                         uint64_t chunk) {
    memset(w, 0, sizeof *w);
    w->from = from, w->to = to, w->src = src, w->dst = dst, w->size = size, w->mode = mode, w->index = index;
    w->chunk = chunk, w->tag = TAG_W, w->seq = (uint32_t)index;
    return w;
}

int main(int argc, char **argv) {
    const char *provider = NULL, *nics = NULL;
    uint64_t max = 64ull << 20, chunk = 64 << 10;
    int window = 4, rc = 0, me, n, left, right, errors = 0;
    bool staged = false, bad_key = false, eq_error = false, fi_more = false, lost_inject = false,
         incast = false;
    efax_optdef defs[] = {
        {"provider", 0, EFAX_OPT_STR, &provider, 0, 0, NULL, "NAME", "provider"},
        {"nics", 0, EFAX_OPT_STR, &nics, 0, 0, NULL, "LIST", "NICs"},
        {"max", 0, EFAX_OPT_SIZE, &max, 1, 1073741824.0, NULL, "SIZE", "largest message (default 64M)"},
        {"chunk", 0, EFAX_OPT_SIZE, &chunk, 0, 1073741824.0, NULL, "SIZE",
         "write chunk (default 64K; 0: efax's own, EFAX_CHUNK_POLICY)"},
        {"window", 0, EFAX_OPT_INT, &window, 1, 1024, NULL, "N", "operations in flight per NIC (default 4)"},
        {"staged", 0, EFAX_OPT_FLAG, &staged, 0, 0, NULL, NULL, "move data through staging buffers"},
        {"bad-key", 0, EFAX_OPT_FLAG, &bad_key, 0, 0, NULL, NULL,
         "fault: rank 0 writes with a corrupted remote key; the write must fail, precisely"},
        {"eq-error", 0, EFAX_OPT_FLAG, &eq_error, 0, 0, NULL, NULL,
         "fault: an endpoint error appears on rank 0's event queue; its next wait must fail, naming the NIC, "
         "at once"},
        {"incast", 0, EFAX_OPT_FLAG, &incast, 0, 0, NULL, NULL,
         "every other rank writes --max bytes / (ranks - 1) to rank 0 at once, in --chunk posts, while rank "
         "0 does not poll for 300 ms; rank 0 expects all of it at once, which must fit its completion queue "
         "or fail, named"},
        {"fi-more", 0, EFAX_OPT_FLAG, &fi_more, 0, 0, NULL, NULL,
         "post batches with FI_MORE (efax_ctx_desc.fi_more)"},
        {"lost-inject", 0, EFAX_OPT_FLAG, &lost_inject, 0, 0, NULL, NULL,
         "fault (with EFAX_FAULTS=injectfail=2): rank 0's first small send is dropped after it was counted "
         "done; its waits must fail at once, that send's included"},
        {NULL, 0, (efax_opt_type)0, NULL, 0, 0, NULL, NULL, NULL}};
    static const uint64_t sizes[] = {1, 7, 64, 4095, 4096, 65537, (1 << 20) + 3, 16 << 20, 64 << 20};
    efax_boot boot;
    efax_ctx ctx;
    efax_ctx_desc cd;
    efax_buf src, dst;
    efax_xfer xs[2 * EFAX_MAX_NICS];
    efax_write_desc w;
    char err[256];
    uint64_t iter = 0;

    rc = efax_args_parse(argc, argv, defs, "xfer_test",
                         "Ring correctness test of SEND/RECV and WRITE in every mode.", err, sizeof err);
    if (rc == 1) return 0;
    if (rc) {
        fprintf(stderr, "xfer_test: %s\n", err);
        return 2;
    }
    if (efax_boot_init(&boot, NULL)) return 1;
    memset(&cd, 0, sizeof cd);
    memset(&src, 0, sizeof src), memset(&dst, 0, sizeof dst);
    cd.provider = provider, cd.nics = nics, cd.window = window, cd.fi_more = fi_more;
    if ((rc = efax_ctx_init(&ctx, &cd)) || (rc = efax_ctx_connect(&ctx, &boot)) ||
        (rc = efax_ctx_warmup(&ctx)))
        goto out;
    me = boot.rank, n = boot.size, right = (me + 1) % n, left = (me + n - 1) % n;
    if ((rc = efax_buf_alloc(&ctx, &src, staged ? efax_bench_mem_staged() : efax_mem_host(), max,
                             EFAX_MR_SEND | EFAX_MR_WRITE_SRC)) ||
        (rc = efax_buf_alloc(&ctx, &dst, staged ? efax_bench_mem_staged() : efax_mem_host(), max,
                             EFAX_MR_RECV | EFAX_MR_WRITE_DST)) ||
        (rc = efax_mr_exchange(&dst.mr, &boot)) || (rc = efax_expect_prepare(&ctx, &dst.mr, TAG_W)))
        goto out;

    if (eq_error) {
        /* rank 0's NIC 0 gets an error entry on its event queue, written the way libfabric's
           util EQ (which efa's is) takes one from a provider (ofi_eq_write with UTIL_FLAG_ERROR,
           1 << 60, in prov/util/src/util_eq.c); efa writes such entries where, without an EQ,
           it would abort(). rank 0 then waits for arrivals that never come: the wait must end
           with the EQ's error long before its 20 s timeout, and every later progress too. */
        int64_t ok = 1;
        if (me == 0) {
            struct fi_eq_err_entry e;
            ssize_t w;
            uint64_t t0 = efax_now_ns();
            memset(&e, 0, sizeof e);
            e.err = FI_EIO;
            e.prov_errno = 0;
            w = fi_eq_write(ctx.nic[0].eq, FI_NOTIFY, &e, sizeof e, 1ull << 60);
            if (!ctx.nic[0].eq || w != (ssize_t)sizeof e) {
                printf("xfer_test: provider %s: no writable event queue (fi_eq_write: %zd): skipped\n",
                       efax_ctx_nic(&ctx, 0)->provider, w);
                ok = 77;
            } else {
                rc = efax_wait_imm(&ctx, right, TAG_W, 99, 1, 20000);
                printf("xfer_test: rank 0's wait ended after %.0f ms with: %s (%d)\n",
                       (double)(efax_now_ns() - t0) / 1e6, efax_strerror(rc), rc);
                ok = rc == -FI_EIO && efax_now_ns() - t0 < 5000000000ull && efax_progress(&ctx) == -FI_EIO;
            }
        }
        rc = 0;
        boot.idle = NULL; /* the context is dead by design: the verdict's collective must not drive it */
        efax_boot_sum(&boot, me == 0 ? ok : 0, &ok, -1);
        if (ok == 77) {
            rc = 0;
            errors = 0;
            efax_buf_free(&src), efax_buf_free(&dst), efax_ctx_deinit(&ctx), efax_boot_deinit(&boot);
            return 77;
        }
        errors += ok != 1;
        goto out;
    }

    if (incast) {
        /* Peers' writes with immediate data land in rank 0's completion queue without
           consuming a receive there (efa: unsolicited write recv), and a writer's writes complete
           once placed, whether rank 0 polled or not: only what rank 0 expects bounds them. Rank 0
           announces every writer's chunks, stops polling for 300 ms while they write, then takes
           everything. With a completion queue too small for all of it (EFAX_CQ_SIZE), the
           announcement must fail, naming the numbers, rather than let efa lose completions. */
        uint64_t part = (max / (uint64_t)(n > 1 ? n - 1 : 1)) & ~(uint64_t)4095, wrong = 0;
        if (n < 2 || !part) {
            fprintf(stderr,
                    "xfer_test: --incast needs 2 or more ranks and --max of at least 4K per writer\n");
            rc = -EFAX_E_USAGE;
            goto out;
        }
        if (me == 0) {
            efax_expect ex[256];
            efax_poison(dst.ptr, part * (uint64_t)(n - 1));
            for (int p = 1; p < n && p <= 256 && !rc; p++) {
                ring_write(&w, p, 0, &src.mr, &dst.mr, EFAX_MODE_SINGLE, 7, part, chunk);
                w.dst_off = part * (uint64_t)(p - 1);
                rc = efax_expect_write(&ctx, &ex[p - 1], &w);
            }
            if (!rc) rc = efax_boot_barrier(&boot, -1);
            if (!rc) usleep(300000);
            if (!rc) rc = efax_expect_wait_all(&ctx, ex, n - 1 < 256 ? n - 1 : 256, -1); /* one timeout */
            for (int p = 1; p < n && !rc; p++)
                wrong +=
                    efax_pattern_check((uint8_t *)dst.ptr + part * (uint64_t)(p - 1), part, 0, p, 7, NULL);
            printf("xfer_test: incast: %d writer(s) x %llu bytes in %llu-byte chunks into rank 0: %s, %llu "
                   "wrong bytes\n",
                   n - 1, (unsigned long long)part, (unsigned long long)chunk,
                   rc ? efax_strerror(rc) : "all landed", (unsigned long long)wrong);
            errors += wrong != 0;
        } else {
            efax_pattern_fill(src.ptr, part, 0, me, 7);
            rc = efax_boot_barrier(&boot, -1);
            ring_write(&w, me, 0, &src.mr, &dst.mr, EFAX_MODE_SINGLE, 7, part, chunk);
            w.dst_off = part * (uint64_t)(me - 1);
            if (!rc) rc = efax_write(&ctx, &xs[0], &w, NULL);
            if (!rc) rc = efax_wait(&ctx, &xs[0], -1);
        }
        goto out;
    }

    if (lost_inject) {
        /* EFAX_FAULTS=injectfail=2: the fault layer drops the second inject the provider
           takes (after the warmup's notification): rank 0's 8-byte send, which efax counts done at
           once, and an error entry with no context (as efa's) surfaces polls later. Rank 0 then waits
           for a receive that only that send would have caused: the wait must end on the lost send
           within 2 s (not time out after 5), and a wait for the send itself must now fail too. */
        int64_t ok = 1;
        efax_xfer sx, rx;
        if (efax_ctx_nnics(&ctx) != 1 || n != 2 || strncmp(efax_ctx_faults(&ctx), "injectfail", 10)) {
            fprintf(stderr, "xfer_test: --lost-inject needs 2 ranks, one NIC and EFAX_FAULTS=injectfail=2\n");
            rc = -EFAX_E_USAGE;
            goto out;
        }
        if (me == 0) {
            uint64_t t0;
            int rs;
            efax_pattern_fill(src.ptr, 8, 0, me, 1);
            efax_send_desc sd = {0};
            sd.to = 1, sd.src = &src.mr, sd.size = 8;
            rc = efax_send(&ctx, &sx, &sd);
            if (!rc) rc = efax_recv(&ctx, &rx, 0, &dst.mr, 0, 64);
            t0 = efax_now_ns();
            if (!rc) rc = efax_wait(&ctx, &rx, 5000);
            rs = efax_wait(&ctx, &sx, 0);
            printf("xfer_test: rank 0: the wait for the answer ended after %.0f ms with: %s (%d); the wait "
                   "for the lost send "
                   "itself: %s (%d); faults dropped %llu inject(s)\n",
                   (double)(efax_now_ns() - t0) / 1e6, efax_strerror(rc), rc, efax_strerror(rs), rs,
                   (unsigned long long)efax_ctx_fault_stats(&ctx).failed);
            ok = rc != 0 && rc != -FI_ETIMEDOUT && rs != 0 && efax_now_ns() - t0 < 2000000000ull &&
                 efax_ctx_fault_stats(&ctx).failed == 1;
        } else {
            rc = efax_recv(&ctx, &rx, 0, &dst.mr, 0, 64);
            if (!rc) rc = efax_wait(&ctx, &rx, 3000);
            printf("xfer_test: rank 1: the send it waited for: %s (%d)\n", efax_strerror(rc), rc);
        }
        rc = 0;
        boot.idle = NULL; /* the context is dead by design: the verdict's collective must not drive it */
        efax_boot_sum(&boot, me == 0 ? ok : 0, &ok, -1);
        errors += ok != 1;
        if (me == 0)
            printf("xfer_test: lost inject: %s\n",
                   ok == 1 ? "named at once, the send's wait failed too" : "NOT REPORTED AS IT MUST BE");
        goto out;
    }

    if (bad_key) {
        /* rank 0 writes to rank 1 with a corrupted key and address. Nothing may land; the failure
           must surface precisely: a CQ error or a timeout at the writer (shm never completes such
           a write), or, where the provider completes it locally and the target drops it (tcp),
           the target's wait times out naming the writer. */
        int64_t landed = 0, reported = 0;
        if (me == 0) {
            for (int k = 0; k < EFAX_MAX_NICS; k++) dst.mr.remote[right].key[k] ^= 0x5a5a5a5a5aull;
            dst.mr.remote[right].base += 1ull << 40;
            rc = efax_write(&ctx, &xs[0],
                            ring_write(&w, me, right, &src.mr, &dst.mr, EFAX_MODE_SINGLE, 1, 65536, 0), NULL);
            if (!rc) rc = efax_wait(&ctx, &xs[0], 5000);
            printf("xfer_test: rank 0's corrupted write ended with: %s (%d)\n", efax_strerror(rc), rc);
            reported = rc != 0;
        } else if (me == 1) {
            efax_expect ex;
            efax_poison(dst.ptr, 65536);
            rc = efax_expect_write(&ctx, &ex,
                                   ring_write(&w, 0, me, &src.mr, &dst.mr, EFAX_MODE_SINGLE, 1, 65536, 0));
            if (!rc) rc = efax_expect_wait_all(&ctx, &ex, 1, 5000); /* the batch's wait names it too */
            printf("xfer_test: rank 1's wait for it ended with: %s (%d)\n", efax_strerror(rc), rc);
            reported = rc != 0;
            landed = rc == 0;
            for (uint64_t i = 0; i < 65536; i++) landed |= ((uint8_t *)dst.ptr)[i] != EFAX_POISON;
        }
        rc = 0;
        efax_boot_sum(&boot, landed, &landed, -1);
        efax_boot_sum(&boot, reported, &reported, -1);
        if (me == 0)
            printf("xfer_test: corrupted write: %s, %s\n", landed ? "SOMETHING LANDED" : "nothing landed",
                   reported ? "the failure was reported" : "NOBODY REPORTED IT");
        errors += landed || !reported;
        goto out;
    }
    for (unsigned si = 0; si < sizeof sizes / sizeof sizes[0] && !rc; si++) {
        uint64_t size = sizes[si];
        if (size > max) continue;
        for (int mode = 0; mode < EFAX_MODE_COUNT && !rc; mode++) {
            efax_plan_seg seg[EFAX_MAX_NICS];
            int ns, nx = 0;
            uint64_t wrong;
            uint32_t imm;

            /* SEND/RECV: receives for the left neighbour's plan, a barrier, then the sends */
            iter++;
            efax_pattern_fill(src.ptr, size, 0, me, iter);
            efax_poison(dst.ptr, size);
            ns = efax_plan(size, efax_ctx_peer_nnics(&ctx, left), (efax_mode)mode, iter, 0, 0, seg);
            for (int s = 0; s < ns && !rc; s++)
                rc = efax_recv(&ctx, &xs[nx++], efax_ctx_route_in(&ctx, left, seg[s].nic), &dst.mr,
                               seg[s].off, seg[s].len);
            if (!rc) rc = efax_boot_barrier(&boot, -1);
            ns = efax_plan(size, efax_ctx_nnics(&ctx), (efax_mode)mode, iter, 0, 0, seg);
            efax_imm_encode(me, TAG_W, (uint32_t)iter, &imm);
            for (int s = 0; s < ns && !rc; s++) {
                efax_send_desc sd = {0};
                sd.to = right;
                sd.nic = seg[s].nic;
                sd.src = &src.mr;
                sd.src_off = seg[s].off;
                sd.size = seg[s].len;
                sd.has_imm = true;
                sd.imm = imm;
                rc = efax_send(&ctx, &xs[nx++], &sd);
            }
            for (int i = 0; i < nx && !rc; i++) rc = efax_wait(&ctx, &xs[i], -1);
            if (rc) break;
            for (int i = 0; i < nx; i++)
                if (xs[i].op == EFAX_OP_RECV &&
                    (!xs[i].rx_has_data ||
                     (uint32_t)xs[i].rx_data !=
                         ((uint32_t)left << 16 | (uint32_t)TAG_W << 8 | (uint32_t)(iter & 0xff)))) {
                    fprintf(stderr, "xfer_test: rank %d: receive %d carried immediate data %#llx\n", me, i,
                            (unsigned long long)xs[i].rx_data);
                    errors++;
                }
            if ((wrong = efax_pattern_check(dst.ptr, size, 0, left, iter, NULL))) {
                fprintf(stderr,
                        "xfer_test: rank %d: SEND/RECV %s %llu bytes from rank %d: %llu wrong bytes\n", me,
                        efax_mode_name((efax_mode)mode), (unsigned long long)size, left,
                        (unsigned long long)wrong);
                errors++;
            }

            /* WRITE with immediate data: count the left neighbour's chunks */
            iter++;
            efax_pattern_fill(src.ptr, size, 0, me, iter);
            efax_poison(dst.ptr, size);
            if ((rc = efax_boot_barrier(&boot, -1))) break;
            rc = efax_write(&ctx, &xs[0],
                            ring_write(&w, me, right, &src.mr, &dst.mr, (efax_mode)mode, iter, size, chunk),
                            NULL);
            {
                efax_expect ex;
                if (!rc)
                    rc = efax_expect_write(
                        &ctx, &ex,
                        ring_write(&w, left, me, &src.mr, &dst.mr, (efax_mode)mode, iter, size, chunk));
                if (!rc) rc = efax_expect_wait(&ctx, &ex, -1);
            }
            if (!rc) rc = efax_wait(&ctx, &xs[0], -1);
            if (rc) break;
            if ((wrong = efax_pattern_check(dst.ptr, size, 0, left, iter, NULL))) {
                fprintf(stderr, "xfer_test: rank %d: WRITE %s %llu bytes from rank %d: %llu wrong bytes\n",
                        me, efax_mode_name((efax_mode)mode), (unsigned long long)size, left,
                        (unsigned long long)wrong);
                errors++;
            }
            if (!rc) rc = efax_boot_barrier(&boot, -1); /* nobody refills before everyone checked */

            /* The same bytes as three writes under one tag and sequence (this mode, Single on the
               last NIC, this mode with another index), announced and awaited as one expectation
               (efax_expect_writes); a staged region must refuse that, naming the way */
            iter++;
            efax_pattern_fill(src.ptr, size, 0, me, iter);
            efax_poison(dst.ptr, size);
            if (rc || (rc = efax_boot_barrier(&boot, -1))) break;
            {
                efax_write_desc ws[3], in[3];
                efax_expect ex;
                uint64_t cut[4] = {0, size / 3, size - size / 5, size};
                for (int k = 0; k < 3; k++) {
                    efax_mode m = k == 1 ? EFAX_MODE_SINGLE : (efax_mode)mode;
                    ring_write(&ws[k], me, right, &src.mr, &dst.mr, m, iter, cut[k + 1] - cut[k], chunk);
                    ring_write(&in[k], left, me, &src.mr, &dst.mr, m, iter, cut[k + 1] - cut[k], chunk);
                    ws[k].src_off = ws[k].dst_off = in[k].src_off = in[k].dst_off = cut[k];
                    ws[k].index = in[k].index = iter + (uint64_t)k; /* seq stays the iteration's */
                    ws[k].nic = in[k].nic = k == 1 ? efax_ctx_nnics(&ctx) - 1 : 0;
                    ws[k].seq = in[k].seq = (uint32_t)iter;
                    if (k == 1) in[k].nic = efax_ctx_peer_nnics(&ctx, left) - 1;
                }
                if (staged) { /* refused (asked once), and nothing written: a staged write has its own tag */
                    int refused = si || mode ? -FI_EINVAL : efax_expect_writes(&ctx, &ex, in, 3);
                    if (refused != -FI_EINVAL) {
                        fprintf(stderr, "xfer_test: rank %d: efax_expect_writes on a staged region: %d\n", me,
                                refused);
                        errors++;
                    }
                    continue;
                }
                for (int k = 0; k < 3 && !rc; k++) rc = efax_write(&ctx, &xs[k], &ws[k], NULL);
                if (!rc) {
                    int refused = -FI_EINVAL;
                    in[2].seq++; /* another sequence: refused (asked once), nothing left announced */
                    if (!si && !mode) refused = efax_expect_writes(&ctx, &ex, in, 3);
                    in[2].seq--;
                    if (refused != -FI_EINVAL) {
                        fprintf(stderr, "xfer_test: rank %d: efax_expect_writes of two sequences: %d\n", me,
                                refused);
                        errors++;
                    }
                    if (!(rc = efax_expect_writes(&ctx, &ex, in, 3))) rc = efax_expect_wait(&ctx, &ex, -1);
                    if (!rc && ex.size != size) {
                        fprintf(stderr, "xfer_test: rank %d: efax_expect_writes awaited %llu bytes of %llu\n",
                                me, (unsigned long long)ex.size, (unsigned long long)size);
                        errors++;
                    }
                }
                for (int k = 0; k < 3 && !rc; k++) rc = efax_wait(&ctx, &xs[k], -1);
            }
            if (rc) break;
            if ((wrong = efax_pattern_check(dst.ptr, size, 0, left, iter, NULL))) {
                fprintf(stderr,
                        "xfer_test: rank %d: WRITE %s %llu bytes from rank %d in three, awaited as one: %llu "
                        "wrong bytes\n",
                        me, efax_mode_name((efax_mode)mode), (unsigned long long)size, left,
                        (unsigned long long)wrong);
                errors++;
            }
            if (!rc) rc = efax_boot_barrier(&boot, -1);
        }
    }
    if (!rc && me == 0) {
        uint64_t eagain = 0;
        for (int k = 0; k < efax_ctx_nnics(&ctx); k++) eagain += efax_ctx_stats(&ctx, k).eagain;
        printf("xfer_test: %d ranks, %d NIC(s), sizes 1..%llu, all modes%s: %s (the provider refused %llu "
               "posts for now: -FI_EAGAIN)\n",
               n, efax_ctx_nnics(&ctx), (unsigned long long)max, staged ? ", staged" : "",
               errors ? "ERRORS" : "every byte correct", (unsigned long long)eagain);
    }
out:
    efax_buf_free(&src);
    efax_buf_free(&dst);
    efax_ctx_deinit(&ctx);
    efax_boot_deinit(&boot);
    return rc || errors ? 1 : 0;
}
