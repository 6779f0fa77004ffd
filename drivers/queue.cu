/* queue — the "queue" experiment: the GPU->CPU multi-producer queue of efax_cuda.h.
     rate     push rate (million commands per second) against the number of producers (one GPU
              thread up to many blocks) and the command's payload size; the CPU pops as the
              GPU pushes, time from launch to the last pop
     latency  one producer pushes, the CPU pops and answers through mapped memory, the producer
              pushes the next: the CPU times pop to pop (a full round trip); push->pop is
              reported as half of it, and said so
     check    (-c) every producer pushes unique, self-checking commands; the consumer must see
              each exactly once and whole (untorn), or the run fails
   for each placement of the cells: mapped pinned host memory, and device memory where the CPU
   can read it (skipped with the reason elsewhere).

   nvcc -O2 -arch=sm_90 -I. drivers/queue.cu -o queue $(pkg-config --cflags --libs-only-L libfabric pmix) -lfabric -lpmix -ldl
   ./queue -c --json queue.jsonl
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* One producer: push, wait for the CPU's answer (it popped), push the next. */
__global__ void k_pingpong(efax_queue_dev q, const volatile uint64_t *answer, int n, int nwords) {
    uint64_t w[EFAX_QUEUE_WORDS] = {0};
    for (int i = 0; i < n; i++) {
        w[0] = (uint64_t)i;
        efax_queue_push(&q, w, nwords);
        while (efax_ld_acquire_sys((const uint64_t *)answer) != (uint64_t)i + 1) { }
    }
}

typedef struct run {
    int placement, grid, block, per_thread, nwords;
    double mops, sec;
    uint64_t commands, wrong, missing, duplicate;
} run;

/* Launches the producers and pops everything they push; with check, verifies each command. */
static int rate(efax_queue *q, run *r, bool check) {
    uint64_t total = (uint64_t)r->grid * (uint64_t)r->block * (uint64_t)r->per_thread, got = 0, t0;
    uint64_t w[EFAX_QUEUE_WORDS], deadline;
    uint8_t *seen = check ? (uint8_t *)calloc(total, 1) : NULL;
    cudaStream_t s;
    if ((check && !seen) || EFAX_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))) return -FI_ENOMEM;
    t0 = efax_now_ns();
    deadline = t0 + 60000000000ull;
    k_push<<<r->grid, r->block, 0, s>>>(efax_queue_device(q), r->per_thread, r->nwords);
    if (EFAX_CUDA(cudaGetLastError())) return -EFAX_E_CUDA;
    while (got < total) {
        if (!efax_queue_pop(q, w)) {
            if (efax_now_ns() > deadline) { fprintf(stderr, "queue: only %llu of %llu commands arrived in 60 s\n", (unsigned long long)got, (unsigned long long)total); break; }
            continue;
        }
        got++;
        if (check) {
            uint64_t t = w[0] >> 32, i = w[0] & 0xffffffffu, k = t * (uint64_t)r->per_thread + i;
            int torn = 0;
            for (int j = 1; j < r->nwords; j++) torn |= w[j] != word_of(w[0], j);
            if (t >= (uint64_t)r->grid * r->block || i >= (uint64_t)r->per_thread || torn) r->wrong++;
            else if (seen[k]++) r->duplicate++;
        }
    }
    r->sec = (double)(efax_now_ns() - t0) / 1e9;
    r->commands = got;
    r->mops = (double)got / r->sec / 1e6;
    if (check) for (uint64_t k = 0; k < total; k++) r->missing += !seen[k];
    free(seen);
    EFAX_CUDA(cudaStreamSynchronize(s));
    cudaStreamDestroy(s);
    return got == total ? 0 : -FI_ETIMEDOUT;
}

/* Round trips of one producer; lat gets n - 1 pop-to-pop times in microseconds. */
static int latency(efax_queue *q, int n, int nwords, double *lat) {
    volatile uint64_t *answer = NULL;
    uint64_t *answer_d, w[EFAX_QUEUE_WORDS], prev = 0, deadline = efax_now_ns() + 60000000000ull;
    cudaStream_t s;
    int i = 0;
    if (EFAX_CUDA(cudaHostAlloc((void **)&answer, 64, cudaHostAllocMapped)) || EFAX_CUDA(cudaHostGetDevicePointer((void **)&answer_d, (void *)answer, 0)) ||
        EFAX_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)))
        return -EFAX_E_CUDA;
    *answer = 0;
    k_pingpong<<<1, 1, 0, s>>>(efax_queue_device(q), answer_d, n, nwords);
    while (i < n && efax_now_ns() < deadline) {
        if (!efax_queue_pop(q, w)) continue;
        uint64_t now = efax_now_ns();
        if (i > 0) lat[i - 1] = (double)(now - prev) / 1e3;
        prev = now;
        __atomic_store_n((uint64_t *)answer, (uint64_t)++i, __ATOMIC_RELEASE);
    }
    EFAX_CUDA(cudaStreamSynchronize(s));
    cudaStreamDestroy(s);
    cudaFreeHost((void *)answer);
    return i == n ? 0 : -FI_ETIMEDOUT;
}

int main(int argc, char **argv) {
    static const int grids[][2] = {{1, 1}, {1, 32}, {1, 256}, {8, 256}, {32, 256}, {132, 256}, {264, 256}};
    static const int words[] = {1, 3, 7};
    bool check = false;
    const char *json = NULL;
    int cells = 4096, per = 64, rc = 0, dev, nlat = 20000, failed = 0;
    efax_optdef defs[] = {
        {"check", 'c', EFAX_OPT_FLAG, &check, 0, 0, NULL, NULL, "verify every command: exactly once, untorn"},
        {"cells", 0, EFAX_OPT_INT, &cells, 2, 1 << 24, NULL, "N", "queue cells, a power of two (default 4096)"},
        {"per-thread", 'n', EFAX_OPT_INT, &per, 1, 1 << 20, NULL, "N", "commands each producer thread pushes (default 64)"},
        {"json", 0, EFAX_OPT_STR, &json, 0, 0, NULL, "FILE", "write JSON Lines records"},
        {NULL, 0, (efax_opt_type)0, NULL, 0, 0, NULL, NULL, NULL}};
    char err[256], why[128];
    double *lat;
    FILE *jf = NULL;

    /* 1. options and the GPU */
    rc = efax_args_parse(argc, argv, defs, "queue", "Push rate, push->pop latency and exactly-once delivery of the GPU->CPU queue.", err, sizeof err);
    if (rc == 1) return 0;
    if (rc) { fprintf(stderr, "queue: %s\n", err); return 2; }
    if (cells & (cells - 1)) { fprintf(stderr, "queue: --cells %d: must be a power of two\n", cells); return 2; }
    if (!efax_cuda_devices(why, sizeof why)) { printf("queue: skipped: no CUDA device (%s)\n", why); return 0; }
    if (efax_cuda_bind(0, &dev) || !(lat = (double *)calloc((size_t)nlat, sizeof(double)))) return 1;
    if (json && !(jf = fopen(json, "w"))) { fprintf(stderr, "queue: --json %s: cannot open\n", json); return 2; }
    efax_cuda_pin_near(dev);

    /* 2. every placement: rate against producers and payload, then the latency of one producer */
    for (int placement = EFAX_QUEUE_HOST; placement <= EFAX_QUEUE_DEVICE; placement++) {
        const char *pname = placement == EFAX_QUEUE_HOST ? "host" : "device";
        efax_queue q;
        if ((rc = efax_queue_init(&q, (uint32_t)cells, placement))) {
            printf("\n# cells in %s memory: skipped (%s)\n", pname, rc == -FI_ENOSYS ? "the CPU cannot map device memory here" : efax_strerror(rc));
            efax_queue_deinit(&q);
            rc = rc == -FI_ENOSYS ? 0 : rc;
            continue;
        }
        printf("\n# cells in %s memory, %d cells of 64 bytes; push rate in million commands/s%s\n", pname, cells,
               check ? ", every command checked" : "");
        printf("%-12s", "producers");
        for (unsigned k = 0; k < sizeof words / sizeof words[0]; k++) printf(" %10d B", words[k] * 8);
        printf("%s\n", check ? "   wrong/missing/duplicate" : "");
        for (unsigned g = 0; g < sizeof grids / sizeof grids[0] && !rc; g++) {
            char lbl[32];
            uint64_t bad = 0;
            snprintf(lbl, sizeof lbl, "%dx%d", grids[g][0], grids[g][1]);
            printf("%-12s", lbl);
            for (unsigned k = 0; k < sizeof words / sizeof words[0] && !rc; k++) {
                run r;
                memset(&r, 0, sizeof r);
                r.placement = placement, r.grid = grids[g][0], r.block = grids[g][1], r.nwords = words[k];
                r.per_thread = grids[g][0] * grids[g][1] == 1 ? per * 1000 : per; /* one producer alone pushes more */
                rc = rate(&q, &r, check);
                bad += r.wrong + r.missing + r.duplicate;
                printf(" %12.2f", r.mops);
                if (jf) {
                    char wrong[32] = "null";
                    if (check) snprintf(wrong, sizeof wrong, "%llu", (unsigned long long)(r.wrong + r.missing + r.duplicate));
                    fprintf(jf, "{\"schema\":1,\"driver\":\"queue\",\"kind\":\"rate\",\"placement\":\"%s\",\"grid\":%d,\"block\":%d,"
                                "\"payload_bytes\":%d,\"commands\":%llu,\"seconds\":%.6g,\"mops\":%.6g,\"wrong\":%s}\n",
                            pname, r.grid, r.block, r.nwords * 8, (unsigned long long)r.commands, r.sec, r.mops, wrong);
                }
            }
            if (check) printf("   %llu%s", (unsigned long long)bad, bad ? "  FAILED" : "");
            failed += bad != 0;
            printf("\n");
        }
        printf("# one producer, push -> pop (half the round trip push -> pop -> answer -> next push), microseconds\n");
        printf("%-12s %10s %10s %10s %10s\n", "payload", "min", "p50", "p99", "max");
        for (unsigned k = 0; k < sizeof words / sizeof words[0] && !rc; k++) {
            efax_stats st;
            if ((rc = latency(&q, nlat, words[k], lat))) break;
            for (int i = 0; i < nlat - 1; i++) lat[i] /= 2; /* one way: half the round trip */
            st = efax_stats_of(lat, nlat - 1);
            printf("%-10d B %10.2f %10.2f %10.2f %10.2f\n", words[k] * 8, st.min, st.p50, st.p99, st.max);
            if (jf)
                fprintf(jf, "{\"schema\":1,\"driver\":\"queue\",\"kind\":\"latency\",\"placement\":\"%s\",\"payload_bytes\":%d,"
                            "\"half_rtt_us\":{\"min\":%.6g,\"p50\":%.6g,\"avg\":%.6g,\"p99\":%.6g,\"max\":%.6g}}\n",
                        pname, words[k] * 8, st.min, st.p50, st.avg, st.p99, st.max);
        }
        efax_queue_deinit(&q);
    }
    if (jf) fclose(jf);
    free(lat);
    if (check) printf("\n%s\n", failed ? "queue check FAILED: commands lost, duplicated or torn" : "queue check: every command seen exactly once, untorn");
    return rc || failed ? 1 : 0;
}
