/* any_memory — a newcomer's program that hands efax every struct it fills as garbage: efax_boot,
   efax_ctx, efax_buf, efax_xfer and efax_expect are malloc'd and (unless --undefined) filled with
   0xA5 bytes, as an uninitialised stack struct may hold them. efax must set every field it reads
   (efax_write once read its hooks back out of the efax_xfer it was starting, and jumped to
   0xA5A5A5A5A5A5A5A5). Rank 0 writes a checked message to rank 1 and sends it another; rank 1
   expects the write and receives the send into one struct each; every byte is checked, then both
   go again through the same structs. With --undefined the structs stay as malloc left them, so
   that valgrind's memcheck reports any field efax reads before it set it. Exit 0: all bytes right.

   mpirun -np 2 build/any_memory --provider tcp
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SIZE = 65536 + 3, TAG = 1 };

/* A struct of `size` bytes as the caller might hand it to efax: garbage. */
static void *garbage(size_t size, bool undefined) {
    void *p = malloc(size);
    if (p && !undefined) memset(p, 0xA5, size);
    return p;
}

/* The write of round r from rank 0 into rank 1, as both sides describe it. */
static const efax_write_desc *the_write(efax_write_desc *w, const efax_buf *src, const efax_buf *dst,
                                        uint32_t r) {
    memset(w, 0, sizeof *w);
    w->from = 0;
    w->to = 1;
    w->src = &src->mr;
    w->dst = &dst->mr;
    w->size = SIZE;
    w->tag = TAG;
    w->seq = r;
    return w;
}

/* One round: rank 0 writes [0, SIZE) and sends [SIZE, 2 SIZE); rank 1 takes both. Returns wrong bytes
   (rank 1), or a negative code. */
static int64_t round_trip(efax_ctx *ctx, efax_boot *boot, efax_buf *src, efax_buf *dst, efax_xfer *wx,
                          efax_xfer *sx, efax_expect *ex, uint32_t r) {
    efax_write_desc w;
    efax_send_desc s;
    int rc = 0;
    if (boot->rank == 0) {
        efax_pattern_fill(src->ptr, SIZE, 0, 0, 2 * r);
        efax_pattern_fill((uint8_t *)src->ptr + SIZE, SIZE, 0, 0, 2 * r + 1);
    }
    if (boot->rank == 1) {
        efax_poison(dst->ptr, 2 * SIZE);
        rc = efax_recv(ctx, sx, 0, &dst->mr, SIZE, SIZE);
        if (!rc) rc = efax_expect_write(ctx, ex, the_write(&w, src, dst, r));
    }
    if (!rc) rc = efax_boot_barrier(boot, -1); /* the receive is posted */
    if (!rc && boot->rank == 0) {
        memset(&s, 0, sizeof s);
        s.to = 1;
        s.src = &src->mr;
        s.src_off = SIZE;
        s.size = SIZE;
        rc = efax_write(ctx, wx, the_write(&w, src, dst, r), NULL);
        if (!rc) rc = efax_send(ctx, sx, &s);
        if (!rc) rc = efax_wait(ctx, wx, -1);
        if (!rc) rc = efax_wait(ctx, sx, -1);
    }
    if (!rc && boot->rank == 1) {
        rc = efax_expect_wait(ctx, ex, -1);
        if (!rc) rc = efax_wait(ctx, sx, -1);
    }
    if (rc || boot->rank != 1) return rc;
    return (int64_t)(efax_pattern_check(dst->ptr, SIZE, 0, 0, 2 * r, NULL) +
                     efax_pattern_check((uint8_t *)dst->ptr + SIZE, SIZE, 0, 0, 2 * r + 1, NULL));
}

int main(int argc, char **argv) {
    bool undefined = argc > 1 && !strcmp(argv[argc - 1], "--undefined");
    efax_boot *boot = (efax_boot *)garbage(sizeof *boot, undefined);
    efax_ctx *ctx = (efax_ctx *)garbage(sizeof *ctx, undefined);
    efax_buf *src = (efax_buf *)garbage(sizeof *src, undefined);
    efax_buf *dst = (efax_buf *)garbage(sizeof *dst, undefined);
    efax_xfer *wx = (efax_xfer *)garbage(sizeof *wx, undefined);
    efax_xfer *sx = (efax_xfer *)garbage(sizeof *sx, undefined);
    efax_expect *ex = (efax_expect *)garbage(sizeof *ex, undefined);
    efax_ctx_desc cd;
    int64_t wrong = 0, all = 0;
    int made = 0; /* inits called */
    int rc = !boot || !ctx || !src || !dst || !wx || !sx || !ex ? -FI_ENOMEM : 0;
    memset(&cd, 0, sizeof cd); /* a desc is an input: zeroed means defaults */
    cd.provider = argc > 2 && !strcmp(argv[1], "--provider") ? argv[2] : NULL;
    if (!rc && ++made) rc = efax_boot_init(boot, NULL);
    if (!rc && boot->size != 2) rc = -EFAX_E_USAGE;
    if (!rc && ++made) rc = efax_ctx_init(ctx, &cd);
    if (!rc) rc = efax_ctx_connect(ctx, boot);
    if (!rc && ++made)
        rc = efax_buf_alloc(ctx, src, efax_mem_host(), 2 * SIZE, EFAX_MR_SEND | EFAX_MR_WRITE_SRC);
    if (!rc && ++made)
        rc = efax_buf_alloc(ctx, dst, efax_mem_host(), 2 * SIZE, EFAX_MR_RECV | EFAX_MR_WRITE_DST);
    if (!rc) rc = efax_mr_exchange(&dst->mr, boot);
    for (uint32_t r = 1; r <= 2 && !rc; r++) { /* twice: the structs again, as the first round left them */
        int64_t got = round_trip(ctx, boot, src, dst, wx, sx, ex, r);
        if (got < 0)
            rc = (int)got;
        else
            wrong += got;
    }
    if (!rc) rc = efax_boot_sum(boot, wrong, &all, -1);
    if (!rc && boot->rank == 0)
        printf("any_memory: a write and a send, twice, through garbage structs: %lld wrong bytes\n",
               (long long)all);
    if (rc) fprintf(stderr, "any_memory: %s\n", efax_strerror(rc));
    if (made >= 4) efax_buf_free(dst);
    if (made >= 3) efax_buf_free(src);
    if (made >= 2) efax_ctx_deinit(ctx);
    if (made >= 1) efax_boot_deinit(boot);
    free(ex);
    free(sx);
    free(wx);
    free(dst);
    free(src);
    free(ctx);
    free(boot);
    return rc || all ? 1 : 0;
}
