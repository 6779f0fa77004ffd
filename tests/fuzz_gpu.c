/* fuzz_gpu — libFuzzer targets for what efax_cuda.h decodes from GPUs and peers, built as host
   code (the decoders live in efax.h's "gpu wire" section and need no CUDA):
     cmd  the proxy's command decoder (efax_cmd_decode): 7 words a GPU producer pushed, checked
          against the producers, the producer's order, the job and both windows
     ipc  the IPC record ranks of one host exchange (efax_ipc_record_check)
   One binary per target (-DFUZZ_IPC selects ipc); seeds in tests/corpus/{cmd,ipc}.

   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. tests/fuzz_gpu.c -o fuzz_cmd $(pkg-config --cflags --libs libfabric pmix)
   ./fuzz_cmd -max_total_time=60 tests/corpus/cmd
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"

#include <stdlib.h>
#include <string.h>

/* A refusal always says why, in a terminated, non-empty line. */
static void why_ok(const char *why, size_t len) {
    if (!memchr(why, 0, len) || !why[0] || strchr(why, '\n')) abort();
}

#ifndef FUZZ_IPC
/* Input: the 7 command words, then parameters: producers, ranks, this rank, the expected
   number, flags for the destination window table, the source window's length and each rank's
   destination window length (missing bytes read as zero). */
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    uint8_t in[56 + 5 + 8 + 16 * 8];
    uint64_t w[EFAX_CMD_WORDS], src_len, expected;
    efax_rmr remote[16];
    efax_mr dst;
    efax_cmd c;
    char why[200];
    uint32_t producers;
    int size, rank, rc;
    memset(in, 0, sizeof in);
    memcpy(in, d, n < sizeof in ? n : sizeof in);
    memcpy(w, in, sizeof w);
    producers = 1u + in[56] * 257u % 65535u; /* 1..65535, small values most often */
    if (in[56] < 16) producers = 1u + in[56];
    size = 1 + in[57] % 16;
    rank = in[58] % size;
    expected = 1 + in[59];
    memcpy(&src_len, in + 61, 8);
    memset(&dst, 0, sizeof dst);
    memset(remote, 0, sizeof remote);
    for (int r = 0; r < 16; r++) memcpy(&remote[r].len, in + 69 + 8 * r, 8);
    dst.remote = (in[60] & 1) ? NULL : remote;
    dst.nremote = (in[60] & 2) ? size - 1 : size; /* a table shorter than the job is refused, not read past */
    memset(why, 0x55, sizeof why);
    rc = efax_cmd_decode(w, producers, expected, rank, size, src_len, (in[60] & 4) ? NULL : &dst, &c, why,
                         sizeof why);
    if (rc) {
        if (rc != -EFAX_E_PEER) abort();
        why_ok(why, sizeof why);
        return 0;
    }
    /* accepted: every field in range, and the fields say exactly what the words said */
    if (c.producer >= producers || c.number != expected || w[6] != c.producer) abort();
    if (w[0] != ((uint64_t)c.op | (uint64_t)c.flags << 8 | (uint64_t)c.producer << 16 |
                 (uint64_t)(uint32_t)c.dst << 32))
        abort();
    if ((uint64_t)c.tag != (w[4] & 0xffff) || c.seq != (uint32_t)(w[4] >> 32) || c.number != w[5]) abort();
    if (c.op == EFAX_CMD_FENCE) return 0;
    if (c.op != EFAX_CMD_PUT || (c.flags & ~(uint32_t)EFAX_PUT_SPLIT)) abort();
    if (c.dst < 0 || c.dst >= size || c.dst == rank || c.dst >= dst.nremote || !dst.remote) abort();
    if (c.soff != w[1] || c.doff != w[2] || c.size != w[3]) abort();
    if (c.soff + c.size < c.soff || c.soff + c.size > src_len) abort();
    if (c.doff + c.size < c.doff || c.doff + c.size > remote[c.dst].len) abort();
    return 0;
}
#else
/* Input: the record (its wire field relative to EFAX_WIRE_VERSION), then this rank's view:
   which rank sent it, and whether this host has the record's name. */
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    efax_ipc_record r;
    char host[64], why[200];
    uint8_t prm[2] = {0, 0};
    bool local = true;
    int rank, rc;
    memset(&r, 0, sizeof r);
    memcpy(&r, d, n < sizeof r ? n : sizeof r);
    r.wire +=
        EFAX_WIRE_VERSION; /* inputs hold the wire version relative to this build's: the corpus outlives a wire change */
    if (n > sizeof r) memcpy(prm, d + sizeof r, n - sizeof r < 2 ? n - sizeof r : 2);
    rank = prm[0] % 8;
    /* this host: "h0", or the name the record carries (so both branches are reached) */
    if ((prm[1] & 1) && memchr(r.host, 0, sizeof r.host))
        memcpy(host, r.host, sizeof host);
    else
        strcpy(host, "h0");
    memset(why, 0x55, sizeof why);
    rc = efax_ipc_record_check(&r, rank, host, &local, why, sizeof why);
    if (rc) {
        if ((rc != -EFAX_E_PEER && rc != -EFAX_E_VERSION) || local) abort();
        if (rc == -EFAX_E_VERSION && (r.magic != EFAX_IPC_MAGIC || r.wire == EFAX_WIRE_VERSION)) abort();
        why_ok(why, sizeof why);
        return 0;
    }
    if (r.magic != EFAX_IPC_MAGIC || r.wire != EFAX_WIRE_VERSION || r.rank != rank) abort();
    if (!memchr(r.host, 0, sizeof r.host) || !r.host[0]) abort();
    if (local != (strcmp(r.host, host) == 0)) abort();
    if (local && (r.device < 0 || r.device > 1023)) abort();
    return 0;
}
#endif
