/* queue — the "queue" experiment: the GPU->CPU multi-producer queue of efax_cuda.h, for each placement of
   the cells (mapped pinned host memory; device memory where the CPU can read it, else skipped with the
   reason):
     rate     push rate (million commands per second) against the number of producers (one GPU thread up
              to many blocks) and the command's payload size; the CPU pops as the GPU pushes, time from
              launch to the last pop
     latency  one producer pushes, the CPU pops and answers through mapped memory, the producer pushes the
              next: the CPU times pop to pop (a full round trip); push->pop is reported as half of it, and
              said so
     check    (-c) every producer pushes unique, self-checking commands; the consumer must see each exactly
              once and whole (untorn), or the run fails

   nvcc -O2 -arch=sm_90 -I. drivers/queue.cu -o queue \
       $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix -ldl
   ./queue -c --json queue.jsonl
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_cuda.h"
#include "efax_bench.h"

#include <string.h>

enum { NLAT = 20000, NWORDS = 3 };
static const int grids[][2] = {{1, 1}, {1, 32}, {1, 256}, {8, 256}, {32, 256}, {132, 256}, {264, 256}};
static const int words[NWORDS] = {1, 3, 7};

/* Command (producer t, index i): word 0 names it, the others are derived from it, so a torn
   command (words of two different pushes) shows. */
static __host__ __device__ uint64_t word_of(uint64_t w0, int j) { return efax_pattern_word(w0, (uint64_t)j); }

__global__ void k_push(efax_queue_dev q, int per_thread, int nwords) {
    uint64_t w[EFAX_QUEUE_WORDS], t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    for (int i = 0; i < per_thread; i++) {
        w[0] = t << 32 | (uint64_t)i;
        for (int j = 1; j < nwords; j++) w[j] = word_of(w[0], j);
        efax_queue_push(&q, w, nwords);
    }
}

typedef struct opts {
    bool check;
    const char *json;
    int cells, per, failed; /* failed: rows with bad commands */
    FILE *jf;
    double *lat;
} opts;

/* One cell of the rate table: grid x block producers push commands of nwords words (one producer alone
   pushes 1000 times more) while the CPU pops them all, with -c checking each; prints the rate and writes
   the record. *bad: plus the commands wrong (torn or unknown), duplicated or missing. */
static int rate(efax_queue *q, const opts *o, const char *pname, int grid, int block, int nwords,
                uint64_t *bad) {
    int per = grid * block == 1 ? o->per * 1000 : o->per;
    uint64_t total = (uint64_t)grid * (uint64_t)block * (uint64_t)per, got = 0, nbad = 0, t0, deadline;
    uint64_t w[EFAX_QUEUE_WORDS];
    uint8_t *seen = o->check ? (uint8_t *)calloc(total, 1) : NULL;
    char wrong[32] = "null";
    double sec, mops;
    cudaStream_t s;
    if ((o->check && !seen) || EFAX_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)))
        return -FI_ENOMEM;
    t0 = efax_now_ns();
    deadline = t0 + 60000000000ull;
    k_push<<<grid, block, 0, s>>>(efax_queue_device(q), per, nwords);
    if (EFAX_CUDA(cudaGetLastError())) return -EFAX_E_CUDA;
    while (got < total) {
        if (!efax_queue_pop(q, w)) {
            if (efax_now_ns() > deadline) {
                fprintf(stderr, "queue: only %llu of %llu commands arrived in 60 s\n",
                        (unsigned long long)got, (unsigned long long)total);
                break;
            }
            continue;
        }
        got++;
        if (o->check) {
            uint64_t t = w[0] >> 32, i = w[0] & 0xffffffffu, k = t * (uint64_t)per + i;
            int torn = 0;
            for (int j = 1; j < nwords; j++) torn |= w[j] != word_of(w[0], j);
            if (t >= (uint64_t)grid * block || i >= (uint64_t)per || torn)
                nbad++; /* wrong */
            else if (seen[k]++)
                nbad++; /* a duplicate */
        }
    }
    sec = (double)(efax_now_ns() - t0) / 1e9;
    mops = (double)got / sec / 1e6;
    for (uint64_t k = 0; o->check && k < total; k++) nbad += !seen[k]; /* missing */
    free(seen);
    EFAX_CUDA(cudaStreamSynchronize(s));
    cudaStreamDestroy(s);
    printf(" %12.2f", mops);
    if (o->check) snprintf(wrong, sizeof wrong, "%llu", (unsigned long long)nbad);
    *bad += nbad;
    efax_bench_jsonl(o->jf, "queue",
                     "\"kind\":\"rate\",\"placement\":\"%s\",\"grid\":%d,\"block\":%d,\"payload_bytes\":%d,"
                     "\"commands\":%llu,\"seconds\":%.6g,\"mops\":%.6g,\"wrong\":%s",
                     pname, grid, block, nwords * 8, (unsigned long long)got, sec, mops, wrong);
    return got == total ? 0 : -FI_ETIMEDOUT;
}

/* One producer's round trips with commands of nwords words (efax_queue_roundtrip: the CPU times pop to
   pop); prints half of them (push -> pop) and writes the record. */
static int latency(efax_queue *q, const opts *o, const char *pname, int nwords) {
    efax_stats st;
    int rc = efax_queue_roundtrip(q, NLAT, nwords, 60000, o->lat);
    if (rc) return rc;
    for (int i = 0; i < NLAT - 1; i++) o->lat[i] /= 2; /* one way: half the round trip */
    st = efax_stats_of(o->lat, NLAT - 1);
    printf("%-10d B %10.2f %10.2f %10.2f %10.2f\n", nwords * 8, st.min, st.p50, st.p99, st.max);
    efax_bench_jsonl(o->jf, "queue",
                     "\"kind\":\"latency\",\"placement\":\"%s\",\"payload_bytes\":%d,\"half_rtt_us\":{"
                     "\"min\":%.6g,\"p50\":%.6g,\"avg\":%.6g,\"p99\":%.6g,\"max\":%.6g}",
                     pname, nwords * 8, st.min, st.p50, st.avg, st.p99, st.max);
    return 0;
}

/* One placement of the cells: the rate table (producers x payload), then one producer's latency. */
static int placement(opts *o, int pl) {
    const char *pname = pl == EFAX_QUEUE_HOST ? "host" : "device";
    efax_queue q;
    int rc = efax_queue_init(&q, (uint32_t)o->cells, pl);
    if (rc) {
        printf("\n# cells in %s memory: skipped (%s)\n", pname,
               rc == -FI_ENOSYS ? "the CPU cannot map device memory here" : efax_strerror(rc));
        efax_queue_deinit(&q);
        return rc == -FI_ENOSYS ? 0 : rc;
    }
    printf("\n# cells in %s memory, %d cells of 64 bytes; push rate in million commands/s%s\n%-12s", pname,
           o->cells, o->check ? ", every command checked" : "", "producers");
    for (int k = 0; k < NWORDS; k++) printf(" %10d B", words[k] * 8);
    printf("%s\n", o->check ? "   wrong/missing/duplicate" : "");
    for (unsigned g = 0; g < sizeof grids / sizeof grids[0] && !rc; g++) {
        char lbl[32];
        uint64_t bad = 0;
        snprintf(lbl, sizeof lbl, "%dx%d", grids[g][0], grids[g][1]);
        printf("%-12s", lbl);
        for (int k = 0; k < NWORDS && !rc; k++)
            rc = rate(&q, o, pname, grids[g][0], grids[g][1], words[k], &bad);
        if (o->check) printf("   %llu%s", (unsigned long long)bad, bad ? "  FAILED" : "");
        o->failed += bad != 0;
        printf("\n");
    }
    printf("# one producer, push -> pop (half the round trip push -> pop -> answer -> next push), "
           "microseconds\n%-12s %10s %10s %10s %10s\n",
           "payload", "min", "p50", "p99", "max");
    for (int k = 0; k < NWORDS && !rc; k++) rc = latency(&q, o, pname, words[k]);
    efax_queue_deinit(&q);
    return rc;
}

int main(int argc, char **argv) {
    opts o;
    efax_optdef defs[] = {
        {"check", 'c', EFAX_OPT_FLAG, &o.check, 0, 0, NULL, NULL,
         "verify every command: exactly once, untorn"},
        {"cells", 0, EFAX_OPT_INT, &o.cells, 2, 1 << 24, NULL, "N",
         "queue cells, a power of two (default 4096)"},
        {"per-thread", 'n', EFAX_OPT_INT, &o.per, 1, 1 << 20, NULL, "N",
         "commands each producer thread pushes (default 64)"},
        {"json", 0, EFAX_OPT_STR, &o.json, 0, 0, NULL, "FILE", "write JSON Lines records"},
        EFAX_OPT_END,
    };
    int rc, dev;
    memset(&o, 0, sizeof o);
    o.cells = 4096;
    o.per = 64;
    rc = efax_bench_args(argc, argv, defs, "queue",
                         "Push rate, push->pop latency and exactly-once delivery of the GPU->CPU queue.");
    if (!rc && (o.cells & (o.cells - 1))) {
        fprintf(stderr, "queue: --cells %d: must be a power of two\n", o.cells);
        rc = -EFAX_E_USAGE;
    }
    if (!rc && !efax_bench_gpu("queue")) rc = EFAX_BENCH_DONE; /* skipped: no CUDA device */
    if (rc) return rc == EFAX_BENCH_DONE ? 0 : efax_exit_code(rc);
    if (efax_cuda_bind(0, &dev) || !(o.lat = (double *)calloc(NLAT, sizeof(double)))) return 1;
    if (o.json && !(o.jf = fopen(o.json, "w"))) {
        fprintf(stderr, "queue: --json %s: cannot open\n", o.json);
        return 2;
    }
    efax_cuda_pin_near(dev);
    for (int pl = EFAX_QUEUE_HOST; pl <= EFAX_QUEUE_DEVICE;
         pl++) /* each runs; a failure in any fails the run */
        if (placement(&o, pl)) rc = 1;
    if (o.jf) fclose(o.jf);
    free(o.lat);
    if (o.check)
        printf("\n%s\n", o.failed ? "queue check FAILED: commands lost, duplicated or torn"
                                  : "queue check: every command seen exactly once, untorn");
    return rc || o.failed ? 1 : 0;
}
