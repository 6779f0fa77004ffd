/* arrivals — the arrival model of efax.h (EFAX_IMM_WINDOW), on efax.h's public calls alone, between
   two ranks: rank 1 notifies rank 0 in orders chosen to meet each rule, rank 0 waits and checks what
   each wait returns. Each case has its own tag. Exits 0 when every case behaved, 1 naming the first
   that did not.

     any-order      sequences 0..15 sent in a scrambled order, awaited in order
     reverse        0..7 sent, awaited 7..0
     parts          6 arrivals of one sequence, awaited 2 at a time
     full-window    32 sequences outstanding at once (the window), then awaited
     overrun        a 33rd while the oldest is awaited: the wait names the overrun (-EFAX_E_OVERRUN)
     surplus        a consumed sequence gets one more than was awaited: once the window moves
                    past it, a wait reports it stale (-EFAX_E_STALE)
     behind         a sequence older than the window arrives while a later one is outstanding:
                    stale
     new-run        0..39 consumed (the window moved on), then 0..39 again: a new phase numbered
                    from 0, once the last was consumed
     staged         not here: tests/run.sh's stream tests (drivers/stream.c --staged)

   mpirun -np 2 build/arrivals --provider tcp
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_ANY = 1, TAG_REV, TAG_PARTS, TAG_FULL, TAG_OVER, TAG_SURPLUS, TAG_BEHIND, TAG_RUN, TAG_GO };

/* Rank 1's notifications under tag: sequences seqs[0..n). */
static int send_seqs(efax_ctx *ctx, int tag, const uint32_t *seqs, int n) {
    int i, rc = 0;
    for (i = 0; i < n && !rc; i++) rc = efax_notify(ctx, 0, tag, seqs[i]);
    return rc;
}

/* Rank 0 waits until `n` arrivals of (tag, seq) are held, without consuming them. */
static int held(efax_ctx *ctx, int tag, uint32_t seq, uint32_t n) {
    uint64_t deadline = efax_now_ns() + 10000000000ull;
    while (efax_imm_count(ctx, 1, tag, seq) < n) {
        int rc = efax_progress(ctx);
        if (rc < 0) return rc;
        if (efax_now_ns() > deadline) return -FI_ETIMEDOUT;
    }
    return 0;
}

/* The two ranks meet: rank 1 waits for rank 0's word `step` before it sends the next case. */
static int go(efax_ctx *ctx, uint32_t step) {
    return efax_ctx_rank(ctx) == 0 ? efax_notify(ctx, 1, TAG_GO, step)
                                   : efax_wait_imm(ctx, 0, TAG_GO, step, 1, -1);
}

static int fails(const char *name, const char *what, int rc) {
    printf("arrivals: %s: %s (got %s, %d)\n", name, what, efax_strerror(rc), rc);
    return 1;
}

static int rank0(efax_ctx *ctx) {
    uint32_t i;
    int rc;
    for (i = 0; i < 16; i++) /* any-order */
        if ((rc = efax_wait_imm(ctx, 1, TAG_ANY, i, 1, -1))) return fails("any-order", "a wait failed", rc);
    for (i = 8; i-- > 0;) /* reverse */
        if ((rc = efax_wait_imm(ctx, 1, TAG_REV, i, 1, -1))) return fails("reverse", "a wait failed", rc);
    for (i = 0; i < 3; i++) /* parts */
        if ((rc = efax_wait_imm(ctx, 1, TAG_PARTS, 3, 2, -1))) return fails("parts", "a wait failed", rc);
    if ((rc = held(ctx, TAG_FULL, 31, 1))) return fails("full-window", "the last one never came", rc);
    for (i = 0; i < 32; i++) /* full-window */
        if ((rc = efax_wait_imm(ctx, 1, TAG_FULL, i, 1, -1)))
            return fails("full-window", "a wait failed", rc);
    /* overrun: 0..31 held, then 32 comes while a wait needs 0 (it never gets a second) */
    if ((rc = held(ctx, TAG_OVER, 31, 1))) return fails("overrun", "sequence 31 never came", rc);
    if ((rc = go(ctx, 1))) return rc;
    rc = efax_wait_imm(ctx, 1, TAG_OVER, 0, 2, 10000);
    if (rc != -EFAX_E_OVERRUN) return fails("overrun", "expected -EFAX_E_OVERRUN", rc);
    /* surplus: 0 came twice and is awaited once, then 1..31; the window moves past 0 when 32 comes,
       while a wait needs a second 32 (only the fault ends it) */
    if ((rc = efax_wait_imm(ctx, 1, TAG_SURPLUS, 0, 1, -1))) return fails("surplus", "wait 0 failed", rc);
    if ((rc = go(ctx, 2))) return rc;
    for (i = 1; i < 32; i++)
        if ((rc = efax_wait_imm(ctx, 1, TAG_SURPLUS, i, 1, -1))) return fails("surplus", "a wait failed", rc);
    if ((rc = go(ctx, 3))) return rc;
    rc = efax_wait_imm(ctx, 1, TAG_SURPLUS, 32, 2, 10000);
    if (rc != -EFAX_E_STALE) return fails("surplus", "expected -EFAX_E_STALE once the window passed 0", rc);
    /* behind: 0..39 consumed, 40 held; then 5 again, while a wait needs a second 40 */
    if ((rc = go(ctx, 4))) return rc;
    for (i = 0; i < 40; i++) {
        if (i == 32 && (rc = go(ctx, 5))) return rc;
        if ((rc = efax_wait_imm(ctx, 1, TAG_BEHIND, i, 1, -1))) return fails("behind", "a wait failed", rc);
    }
    if ((rc = held(ctx, TAG_BEHIND, 40, 1))) return fails("behind", "sequence 40 never came", rc);
    if ((rc = go(ctx, 6))) return rc;
    rc = efax_wait_imm(ctx, 1, TAG_BEHIND, 40, 2, 10000);
    if (rc != -EFAX_E_STALE) return fails("behind", "expected -EFAX_E_STALE", rc);
    /* new-run: 0..39 consumed (the window moved past 0), then 0..31 again */
    for (int part = 0; part < 3; part++) {
        if ((rc = go(ctx, 7 + (uint32_t)part))) return rc;
        for (i = part == 1 ? 32 : 0; i < (part == 1 ? 40u : 32u); i++)
            if ((rc = efax_wait_imm(ctx, 1, TAG_RUN, i, 1, -1))) return fails("new-run", "a wait failed", rc);
    }
    return go(ctx, 10);
}

static int rank1(efax_ctx *ctx) {
    static const uint32_t scrambled[16] = {7, 3, 15, 0, 9, 12, 1, 14, 5, 2, 11, 8, 13, 4, 10, 6};
    uint32_t seqs[64], i;
    int rc = send_seqs(ctx, TAG_ANY, scrambled, 16);
    for (i = 0; i < 8; i++) seqs[i] = i;
    if (!rc) rc = send_seqs(ctx, TAG_REV, seqs, 8);
    for (i = 0; i < 6; i++) seqs[i] = 3;
    if (!rc) rc = send_seqs(ctx, TAG_PARTS, seqs, 6);
    for (i = 0; i < 32; i++) seqs[i] = 31 - i; /* the newest first: the window must hold the rest */
    if (!rc) rc = send_seqs(ctx, TAG_FULL, seqs, 32);
    if (!rc) rc = send_seqs(ctx, TAG_OVER, seqs, 32);
    if (!rc) rc = go(ctx, 1);
    seqs[0] = 32;
    if (!rc) rc = send_seqs(ctx, TAG_OVER, seqs, 1);
    seqs[0] = seqs[1] = 0; /* one more of 0 than rank 0 awaits */
    if (!rc) rc = send_seqs(ctx, TAG_SURPLUS, seqs, 2);
    for (i = 0; i < 41; i++) seqs[i] = i;
    if (!rc) rc = go(ctx, 2);
    if (!rc) rc = send_seqs(ctx, TAG_SURPLUS, seqs + 1, 31);
    if (!rc) rc = go(ctx, 3);
    if (!rc) rc = send_seqs(ctx, TAG_SURPLUS, seqs + 32, 1);
    if (!rc) rc = go(ctx, 4);
    if (!rc) rc = send_seqs(ctx, TAG_BEHIND, seqs, 32);
    if (!rc) rc = go(ctx, 5);
    if (!rc) rc = send_seqs(ctx, TAG_BEHIND, seqs + 32, 9);
    if (!rc) rc = go(ctx, 6);
    if (!rc) rc = send_seqs(ctx, TAG_BEHIND, seqs + 5, 1);
    if (!rc) rc = go(ctx, 7);
    if (!rc) rc = send_seqs(ctx, TAG_RUN, seqs, 32);
    if (!rc) rc = go(ctx, 8);
    if (!rc) rc = send_seqs(ctx, TAG_RUN, seqs + 32, 8);
    if (!rc) rc = go(ctx, 9);
    if (!rc) rc = send_seqs(ctx, TAG_RUN, seqs, 32);
    if (!rc) rc = go(ctx, 10);
    return rc;
}

int main(int argc, char **argv) {
    efax_boot boot;
    efax_ctx ctx;
    efax_ctx_desc cd;
    int rc, i;
    memset(&cd, 0, sizeof cd);
    for (i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--provider"))
            cd.provider = argv[i + 1];
        else if (!strcmp(argv[i], "--nics"))
            cd.nics = argv[i + 1];
        else
            break;
    }
    if (i < argc) {
        fprintf(stderr, "arrivals: usage: arrivals [--provider NAME] [--nics LIST] (under mpirun -np 2)\n");
        return 2;
    }
    if ((rc = efax_boot_init(&boot, NULL))) return efax_exit_code(rc);
    if (boot.size != 2) {
        fprintf(stderr, "arrivals: needs 2 ranks (mpirun -np 2), got %d\n", boot.size);
        efax_boot_deinit(&boot);
        return 2;
    }
    rc = efax_ctx_init(&ctx, &cd);
    if (!rc) rc = efax_ctx_connect(&ctx, &boot);
    if (!rc) rc = efax_ctx_warmup(&ctx);
    if (!rc) rc = boot.rank == 0 ? rank0(&ctx) : rank1(&ctx);
    if (!rc && boot.rank == 0) printf("arrivals: every case behaved\n");
    efax_ctx_deinit(&ctx);
    efax_boot_deinit(&boot);
    return rc ? 1 : 0;
}
