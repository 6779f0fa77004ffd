/* instr_idle — polls that find nothing, for tests/instr.sh: the own instructions of an empty poll,
   measured where nothing else happens. Two ranks connect; rank 0 posts a receive nobody sends and
   waits RECV_MS for it (efax_wait's loop, efax__wait_one), then waits IMM_MS for a notification
   nobody sends (efax_wait_imm's loop); both must time out. Rank 1 waits in a barrier meanwhile.
   Two runs under callgrind that differ in one wait's length differ only in that wait's polls.

   EFAX_RANK=1 EFAX_SIZE=2 EFAX_ROOT=127.0.0.1:PORT build/instr_idle tcp 200 200 &
   EFAX_RANK=0 EFAX_SIZE=2 EFAX_ROOT=127.0.0.1:PORT build/instr_idle tcp 200 200
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Drops efax's messages: the two timeouts are expected. */
static void quiet(void *user, int level, const char *msg) { (void)user, (void)level, (void)msg; }

int main(int argc, char **argv) {
    efax_boot boot;
    efax_ctx ctx;
    efax_buf buf;
    efax_xfer x;
    efax_ctx_desc cd;
    int rc, made = 0, wait_rc = 0, imm_rc = 0;
    if (argc != 4 || atoi(argv[2]) <= 0 || atoi(argv[3]) <= 0) {
        fprintf(stderr, "usage: instr_idle PROVIDER RECV_MS IMM_MS (two ranks)\n");
        return 2;
    }
    memset(&cd, 0, sizeof cd);
    cd.provider = argv[1];
    cd.log = quiet;
    rc = efax_boot_init(&boot, NULL);
    if (!rc && ++made && boot.size != 2) rc = -EFAX_E_USAGE;
    if (!rc && ++made) rc = efax_ctx_init(&ctx, &cd);
    if (!rc) rc = efax_ctx_connect(&ctx, &boot);
    if (!rc && ++made) rc = efax_buf_alloc(&ctx, &buf, efax_mem_host(), 4096, EFAX_MR_RECV);
    if (!rc && boot.rank == 0) {
        rc = efax_recv(&ctx, &x, 0, &buf.mr, 0, 4096);
        if (!rc) wait_rc = efax_wait(&ctx, &x, atoi(argv[2]));
        if (!rc) imm_rc = efax_wait_imm(&ctx, 1, 1, 0, 1, atoi(argv[3]));
        if (!rc && (wait_rc != -FI_ETIMEDOUT || imm_rc != -FI_ETIMEDOUT)) {
            fprintf(stderr, "instr_idle: the waits ended with %d and %d, not a timeout\n", wait_rc, imm_rc);
            rc = -FI_EOTHER;
        }
    }
    if (!rc) rc = efax_boot_barrier(&boot, -1);
    if (rc) fprintf(stderr, "instr_idle: %s\n", efax_strerror(rc));
    if (made >= 3) efax_buf_free(&buf); /* the receive is still posted: the context's close cancels it */
    if (made >= 2) efax_ctx_deinit(&ctx);
    if (made >= 1) efax_boot_deinit(&boot);
    return rc ? 1 : 0;
}
