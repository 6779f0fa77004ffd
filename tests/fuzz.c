/* fuzz — libFuzzer target for everything efax decodes from outside: command lines, sizes, a
   peer's endpoint list, memory keys, rendezvous hello, immediate data (counted and staged), and
   the planner's invariants. The first byte picks the decoder.

   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. tests/fuzz.c -o fuzz $(pkg-config --cflags --libs libfabric pmix)
   ./fuzz -max_total_time=30
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_bench.h"

#include <stdlib.h>
#include <string.h>

static void quiet_log(void *user, int level, const char *msg) { (void)user, (void)level, (void)msg; }

/* Command line: NUL-separated words. */
static void fuzz_opts(const uint8_t *d, size_t n) {
    char *buf = (char *)malloc(n + 1), *argv[64];
    int argc = 1;
    efax_opts o;
    char err[256];
    memcpy(buf, d, n);
    buf[n] = 0;
    argv[0] = (char *)"prog";
    for (size_t i = 0; i < n && argc < 63; i++)
        if (i == 0 || buf[i - 1] == 0) argv[argc++] = buf + i;
    argv[argc] = NULL;
    efax_opts_init(&o);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) argv[i] = (char *)"-c"; /* no help text */
    (void)efax_opts_parse(&o, argc, argv, NULL, "prog", NULL, err, sizeof err);
    free(buf);
}

static void fuzz_size(const uint8_t *d, size_t n) {
    char s[64];
    uint64_t v;
    if (n >= sizeof s) n = sizeof s - 1;
    memcpy(s, d, n);
    s[n] = 0;
    if (efax_parse_size(s, &v) == 0 && strlen(s) && !strchr(s, 'K') && !strchr(s, 'k') && !strchr(s, 'M') &&
        !strchr(s, 'm') && !strchr(s, 'G') && !strchr(s, 'g') && !strchr(s, 'T') && !strchr(s, 't') &&
        v != strtoull(s, NULL, 10))
        abort(); /* a plain number must parse to itself */
}

#define BLOB(T, d, n)                                                                                        \
    T b;                                                                                                     \
    memset(&b, 0, sizeof b);                                                                                 \
    memcpy(&b, d, n < sizeof b ? n : sizeof b)

static void fuzz_hello(const uint8_t *d, size_t n) {
    BLOB(efax__hello, d, n);
    char why[256];
    (void)efax__hello_check(&b, 1, "tcp", why, sizeof why);
    if (efax__hello_check(&b, b.rank, "tcp", why, sizeof why) == 0) { /* accepted: everything in range */
        if (b.nnic < 1 || b.nnic > EFAX_MAX_NICS) abort();
        for (int i = 0; i < b.nnic; i++)
            if (b.nic[i].addrlen == 0 || b.nic[i].addrlen > EFAX__ADDR_MAX ||
                !memchr(b.nic[i].name, 0, sizeof b.nic[i].name))
                abort();
    }
}

static void fuzz_mr(const uint8_t *d, size_t n) {
    BLOB(efax__mr_blob, d, n);
    char why[256];
    if (efax__mr_blob_check(&b, 3, 2, why, sizeof why) == 0 && (b.nnic != 2 || b.rank != 3)) abort();
}

static void fuzz_boot(const uint8_t *d, size_t n) {
    BLOB(efax__boot_hello, d, n);
    int fds[8] = {-1, -1, 5, -1, -1, -1, -1, -1};
    char why[256];
    int rc = efax__boot_hello_check(&b, 42, 8, fds, why, sizeof why);
    if (rc == 0 && (b.rank <= 0 || b.rank >= 8 || b.rank == 2 || b.token != 42)) abort();
}

/* Immediate data from a peer is arbitrary: count it, and feed the staged-write engine. */
static int stage_in(void *u, uint64_t off, uint64_t len) {
    (void)u;
    return off + len > 1 << 20 ? -1 : 0;
}
static int stage_wait(void *u, int ms) {
    (void)u, (void)ms;
    return 0;
}
static void fuzz_imm(const uint8_t *d, size_t n) {
    static const efax_stage_ops ops = {NULL, NULL, stage_in, stage_wait, NULL, NULL, NULL, NULL};
    efax_ctx ctx;
    efax_mr dst;
    efax_expect e;
    efax_write_desc w;
    memset(&ctx, 0, sizeof ctx);
    memset(&dst, 0, sizeof dst);
    ctx.size = 4, ctx.ntags = 8, ctx.rank = 0, ctx.connected = true, ctx.log = quiet_log, ctx.nnic = 1;
    ctx.imm = (efax__imm_slot *)calloc(32, sizeof(efax__imm_slot));
    ctx.imm_nic = (uint32_t *)calloc(32, sizeof(uint32_t));
    ctx.hooks = (efax__imm_hook *)calloc(8, sizeof(efax__imm_hook));
    ctx.peer_nnic = (int *)calloc(4, sizeof(int));
    ctx.nic = (efax__nic *)calloc(1, sizeof(efax__nic));
    for (int i = 0; i < 4; i++) ctx.peer_nnic[i] = 2;
    dst.len = 1 << 20, dst.stage = &ops, dst.ctx = &ctx;
    (void)efax_expect_prepare(&ctx, &dst, 5);
    memset(&w, 0, sizeof w);
    w.from = 1, w.to = 0, w.dst = &dst, w.size = n >= 1 ? (uint64_t)d[0] << 12 : 0,
    w.mode = (efax_mode)(n >= 1 ? d[0] % EFAX_MODE_COUNT : 0);
    w.chunk = 4096, w.tag = 5;
    if (n >= 1 && efax_expect_write(&ctx, &e, &w) == 0) {
        for (size_t i = 1; i + 4 <= n; i += 4) {
            uint32_t imm;
            memcpy(&imm, d + i, 4);
            efax__count_imm(&ctx, imm, 0);
        }
        if (e.cells_done > e.ncells) abort();
    }
    for (int t = 0; t < 8; t++) free(ctx.stage_rx ? ctx.stage_rx[t] : NULL);
    free(ctx.stage_rx), free(ctx.imm), free(ctx.imm_nic), free(ctx.hooks), free(ctx.peer_nnic), free(ctx.nic);
}

/* Plans cover the message exactly once, on valid NICs, whatever the inputs. */
static void fuzz_plan(const uint8_t *d, size_t n) {
    uint64_t size = 0, index = 0, off = 0;
    efax_plan_seg seg[EFAX_MAX_NICS];
    int nnic, k;
    if (n < 18) return;
    memcpy(&size, d, 8), memcpy(&index, d + 8, 8);
    size >>= d[16] % 64;
    nnic = d[17] % (EFAX_MAX_NICS + 2);
    k = efax_plan(size, nnic, (efax_mode)(d[16] % (EFAX_MODE_COUNT + 1)), index, d[17] % 3, 0, seg);
    if (k < 0) return;
    if (k == 0 || k > nnic) abort();
    for (int i = 0; i < k; i++) {
        if (seg[i].off != off || seg[i].nic < 0 || seg[i].nic >= nnic) abort();
        off += seg[i].len;
    }
    if (off != size) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    if (n < 1) return 0;
    switch (d[0] % 7) {
    case 0: fuzz_opts(d + 1, n - 1); break;
    case 1: fuzz_size(d + 1, n - 1); break;
    case 2: fuzz_hello(d + 1, n - 1); break;
    case 3: fuzz_mr(d + 1, n - 1); break;
    case 4: fuzz_boot(d + 1, n - 1); break;
    case 5: fuzz_imm(d + 1, n - 1); break;
    case 6: fuzz_plan(d + 1, n - 1); break;
    }
    return 0;
}
