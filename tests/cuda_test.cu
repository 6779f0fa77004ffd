/* cuda_test — GPU correctness tests that need two ranks (one GPU each): the checks themselves
   (a corrupted byte in device or pinned memory is found, exactly, at any offset; #wrong never
   exceeds the bytes checked), the proxy's put_nbi, fence and quiet semantics, refusal of a bad
   command, and every byte of every command checked at the target. Run by tests/gpu.sh on the GPU machine; without a GPU it says skipped (77).

   mpirun -np 2 build/cuda_test --provider shm
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_cuda.h"
#include "efax_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

enum { TAG_A = 1, TAG_B = 2, TAG_C = 3, TAG_DONE = 4, PRODUCERS = 4, BIG = 8 << 20, SMALL = 4096, CHUNK = 1 << 20 };

/* Each block: a big put A into its region, fence, a small put B after it, then quiet; thread 0
   then notes in mapped host memory that its quiet returned. Block 0 also sends one command
   outside the target's window: the proxy must refuse it and still count it done. */
__global__ void k_semantics(efax_proxy_dev p, volatile uint64_t *quiet_at, uint64_t window, uint32_t seq) {
    __shared__ efax_producer me;
    uint64_t a = (uint64_t)blockIdx.x * (BIG + SMALL), bofs = a + BIG;
    if (threadIdx.x == 0) efax_producer_begin(&p, &me, blockIdx.x);
    efax_block_put_nbi(&p, &me, 1, a, a, BIG, TAG_A, seq, 0);
    __syncthreads();
    if (threadIdx.x == 0) efax_fence(&p, &me);
    efax_block_put_nbi(&p, &me, 1, bofs, bofs, SMALL, TAG_B, seq, 0);
    if (blockIdx.x == 0) efax_block_put_nbi(&p, &me, 1, 0, window, SMALL, TAG_C, seq, 0); /* outside: refused */
    efax_block_quiet(&p, &me);
    if (threadIdx.x == 0) quiet_at[blockIdx.x] = 1;
}

static int failures;
#define EXPECT(c, ...) do { if (!(c)) { fprintf(stderr, "cuda_test: FAIL: " __VA_ARGS__); fprintf(stderr, "\n"); failures++; } } while (0)

/* Spins until *release is set: a copy or kernel that never ends, as far as a waiter can tell. */
__global__ void k_hold(volatile const int *release) {
    if (threadIdx.x == 0)
        while (!*release) __nanosleep(256);
}

static void *release_later(void *arg) { /* the backstop: a settle without a deadline returns after 3 s, not never */
    usleep(3000000);
    __atomic_store_n((int *)arg, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* A device buffer's settle (the hook efax_expect_wait and efax_wait call) ends with -FI_ETIMEDOUT,
   named, when a copy on the stream the provider copies on (the legacy default stream) never
   finishes, and returns at once while a kernel that has nothing to do with the buffer runs on a
   non-blocking stream of its own (the proxy's producers): cudaDeviceSynchronize, which it used to
   be, waited for both (a backstop thread releases the kernel after 3 s, so that code fails here
   instead of hanging). */
static void check_settle(efax_ctx *ctx) {
    efax_buf b;
    int *release = NULL, *release_d = NULL, rc;
    cudaStream_t own = NULL;
    pthread_t backstop;
    uint64_t t0;
    double ms;
    memset(&b, 0, sizeof b);
    if (efax_buf_alloc(ctx, &b, efax_mem_device(), 1 << 20, EFAX_MR_WRITE_DST)) { EXPECT(0, "settle: cannot allocate"); return; }
    if (!b.mr.settle) { /* staged: the provider never copies into device memory itself */
        printf("cuda_test: settle: not on the %s path (no provider copies into device memory to wait for)\n", b.path);
        efax_buf_free(&b);
        return;
    }
    if (EFAX_CUDA(cudaHostAlloc((void **)&release, sizeof(int), cudaHostAllocMapped)) ||
        EFAX_CUDA(cudaHostGetDevicePointer((void **)&release_d, release, 0)) ||
        EFAX_CUDA(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking))) {
        EXPECT(0, "settle: CUDA set-up failed");
        goto out;
    }
    /* a kernel on a stream of its own: not the buffer's business */
    *release = 0;
    k_hold<<<1, 32, 0, own>>>(release_d);
    pthread_create(&backstop, NULL, release_later, release);
    t0 = efax_now_ns();
    rc = b.mr.settle(b.mr.settle_user, 10000);
    ms = (double)(efax_now_ns() - t0) / 1e6;
    EXPECT(rc == 0 && ms < 1000, "settle waited %.0f ms (rc %d) for a kernel on another non-blocking stream", ms, rc);
    __atomic_store_n(release, 1, __ATOMIC_SEQ_CST);
    pthread_join(backstop, NULL);
    EXPECT(!EFAX_CUDA(cudaStreamSynchronize(own)), "settle: the held kernel did not end");
    /* a copy that does not end on the legacy stream (a kernel there stands in for it) */
    *release = 0;
    k_hold<<<1, 32, 0, cudaStreamLegacy>>>(release_d);
    pthread_create(&backstop, NULL, release_later, release);
    t0 = efax_now_ns();
    rc = b.mr.settle(b.mr.settle_user, 300);
    ms = (double)(efax_now_ns() - t0) / 1e6;
    EXPECT(rc == -FI_ETIMEDOUT && ms >= 290 && ms < 2500, "settle over a wedged copy returned %d after %.0f ms; expected -FI_ETIMEDOUT "
           "after 300 ms", rc, ms);
    __atomic_store_n(release, 1, __ATOMIC_SEQ_CST);
    pthread_join(backstop, NULL);
    rc = b.mr.settle(b.mr.settle_user, 10000);
    EXPECT(rc == 0, "settle after the copy ended returned %d", rc);
    printf("cuda_test: settle (%s): ends a wedged copy with -FI_ETIMEDOUT (the error above is expected) and ignores a "
           "kernel on another stream\n", b.path);
out:
    if (own) cudaStreamDestroy(own);
    if (release) cudaFreeHost(release);
    efax_buf_free(&b);
}

/* Marks (efax_buf_mark / efax_buf_marked: all2all's iterations in flight) see each copy into a
   device buffer land on its own: two copies that do not end on the legacy stream (kernels there
   stand in for shm's copies of two iterations), a mark after each; the first mark fires once the
   first copy ends while the second's does not, then the second's; a slot out of range is refused. */
static void check_marks(efax_ctx *ctx) {
    efax_buf b;
    int *release = NULL, *release_d = NULL, first = -9, second = -9;
    uint64_t deadline;
    memset(&b, 0, sizeof b);
    if (efax_buf_alloc(ctx, &b, efax_mem_device(), 1 << 20, EFAX_MR_WRITE_DST)) { EXPECT(0, "marks: cannot allocate"); return; }
    if (EFAX_CUDA(cudaHostAlloc((void **)&release, 2 * sizeof(int), cudaHostAllocMapped)) ||
        EFAX_CUDA(cudaHostGetDevicePointer((void **)&release_d, release, 0))) {
        EXPECT(0, "marks: CUDA set-up failed");
        goto out;
    }
    release[0] = release[1] = 0;
    k_hold<<<1, 32, 0, cudaStreamLegacy>>>(release_d);
    EXPECT(efax_buf_mark(&b, 0) == 0, "marks: mark 0 failed");
    k_hold<<<1, 32, 0, cudaStreamLegacy>>>(release_d + 1);
    EXPECT(efax_buf_mark(&b, 1) == 0, "marks: mark 1 failed");
    usleep(20000);
    EXPECT(efax_buf_marked(&b, 0) == 0 && efax_buf_marked(&b, 1) == 0, "marks: a mark fired before its copy ended");
    __atomic_store_n(&release[0], 1, __ATOMIC_SEQ_CST);
    deadline = efax_now_ns() + 3000000000ull;
    while ((first = efax_buf_marked(&b, 0)) == 0 && efax_now_ns() < deadline) {}
    second = efax_buf_marked(&b, 1);
    EXPECT(first == 1 && second == 0, "marks: after the first copy ended, marked gave %d and %d (expected 1 and 0)", first, second);
    __atomic_store_n(&release[1], 1, __ATOMIC_SEQ_CST);
    deadline = efax_now_ns() + 3000000000ull;
    while ((second = efax_buf_marked(&b, 1)) == 0 && efax_now_ns() < deadline) {}
    EXPECT(second == 1, "marks: the second mark gave %d after its copy ended", second);
    EXPECT(efax_buf_mark(&b, EFAX_BUF_MARKS) == -FI_EINVAL && efax_buf_marked(&b, EFAX_BUF_MARKS) == -FI_EINVAL,
           "marks: slot %d was not refused", EFAX_BUF_MARKS);
    printf("cuda_test: marks (%s): each mark fires when the copies before it ended, not before, not after later ones\n", b.path);
    /* narrowed (all2all --pace): with the provider's stream held, a mark of the buffer's own copy alone
       fires once that copy ended, and a mark of the provider's copies alone only once they did. The
       copy kernel runs once first: CUDA loads a kernel at its first launch (lazy loading), and that
       load waited for the held kernel, so the copy could not end before the release */
    efax_buf_copy(&b, 0, &b, 512 << 10, 256 << 10);
    EXPECT(efax_buf_settle(&b) == 0, "marks: the local copy did not settle");
    release[0] = 0;
    k_hold<<<1, 32, 0, cudaStreamLegacy>>>(release_d);
    efax_buf_copy(&b, 0, &b, 512 << 10, 256 << 10);
    EXPECT(efax_buf_mark(&b, 2 | EFAX_MARK_OWN) == 0 && efax_buf_mark(&b, 3 | EFAX_MARK_IN) == 0,
           "marks: a narrowed mark failed");
    deadline = efax_now_ns() + 3000000000ull;
    while ((first = efax_buf_marked(&b, 2)) == 0 && efax_now_ns() < deadline) {}
    second = efax_buf_marked(&b, 3);
    EXPECT(first == 1 && second == 0, "marks: own copy done, provider's held: marked gave %d and %d (expected 1 and 0)",
           first, second);
    __atomic_store_n(&release[0], 1, __ATOMIC_SEQ_CST);
    deadline = efax_now_ns() + 3000000000ull;
    while ((second = efax_buf_marked(&b, 3)) == 0 && efax_now_ns() < deadline) {}
    EXPECT(second == 1, "marks: the provider's mark gave %d once its stream ran", second);
    printf("cuda_test: narrowed marks: EFAX_MARK_OWN fires with the provider's copies held, EFAX_MARK_IN after them\n");
out:
    if (release) {
        __atomic_store_n(&release[0], 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&release[1], 1, __ATOMIC_SEQ_CST);
        cudaDeviceSynchronize();
    }
    if (release) cudaFreeHost(release);
    efax_buf_free(&b);
}

/* The check must be able to fail: a pattern-filled buffer checks clean; one byte changed (in
   device memory, through the CUDA API, as a NIC would leave it) is exactly one wrong byte
   wherever it sits; a poisoned buffer is nearly len wrong bytes (a poison byte matches the
   pattern in 1 place of 256), never more. */
static void check_the_check(efax_ctx *ctx, const efax_mem_ops *kind, int rank) {
    const uint64_t len = (1u << 20) + 37, offs[] = {0, 1, 7, 8, 4095, 4096, 524287, len - 9, len - 1};
    efax_buf b;
    uint64_t n;
    memset(&b, 0, sizeof b);
    if (efax_buf_alloc(ctx, &b, kind, len, EFAX_MR_WRITE_DST)) { EXPECT(0, "%s: cannot allocate", kind->name); return; }
    b.ops->fill(&b, 0, len, rank, 3);
    EXPECT((n = b.ops->check(&b, 0, len, rank, 3)) == 0, "%s (%s): %llu wrong bytes in a clean buffer", kind->name, b.path,
           (unsigned long long)n);
    EXPECT((n = b.ops->check(&b, 0, len, rank, 4)) > len / 2 && n <= len, "%s: another iteration's pattern gave %llu wrong of %llu",
           kind->name, (unsigned long long)n, (unsigned long long)len);
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        uint8_t good, bad;
        if (EFAX_CUDA(cudaMemcpy(&good, (uint8_t *)b.ptr + offs[i], 1, cudaMemcpyDefault))) break;
        bad = (uint8_t)(good ^ 0x10);
        if (EFAX_CUDA(cudaMemcpy((uint8_t *)b.ptr + offs[i], &bad, 1, cudaMemcpyDefault))) break;
        EXPECT((n = b.ops->check(&b, 0, len, rank, 3)) == 1, "%s (%s): byte %llu corrupted, the check found %llu", kind->name, b.path,
               (unsigned long long)offs[i], (unsigned long long)n);
        EXPECT((n = b.ops->check(&b, offs[i] & ~7ull, len - (offs[i] & ~7ull), rank, 3)) >= 1,
               "%s: a sub-range check from %llu missed the corrupted byte", kind->name, (unsigned long long)(offs[i] & ~7ull));
        if (EFAX_CUDA(cudaMemcpy((uint8_t *)b.ptr + offs[i], &good, 1, cudaMemcpyDefault))) break;
    }
    EXPECT((n = b.ops->check(&b, 0, len, rank, 3)) == 0, "%s: %llu wrong after restoring every byte", kind->name, (unsigned long long)n);
    b.ops->poison(&b, 0, len);
    /* a poison byte equals the pattern byte by chance in 1 of 256 places */
    EXPECT((n = b.ops->check(&b, 0, len, rank, 3)) <= len && n >= len - len / 128, "%s: a poisoned buffer of %llu bytes checked %llu wrong", kind->name,
           (unsigned long long)len, (unsigned long long)n);
    printf("cuda_test: rank %d: the %s check (%s) finds a single corrupted byte at %zu offsets\n", rank, kind->name, b.path,
           sizeof offs / sizeof offs[0]);
    efax_buf_free(&b);
}

int main(int argc, char **argv) {
    const char *provider = NULL;
    efax_optdef defs[] = {{"provider", 0, EFAX_OPT_STR, &provider, 0, 0, NULL, "NAME", "provider (default shm)"},
                          {NULL, 0, (efax_opt_type)0, NULL, 0, 0, NULL, NULL, NULL}};
    efax_boot boot;
    efax_ctx ctx;
    efax_ctx_desc cd;
    efax_buf src, dst;
    efax_proxy px;
    efax_proxy_desc pd;
    char err[256];
    int rc, dev;
    uint64_t window = (uint64_t)PRODUCERS * (BIG + SMALL);
    volatile uint64_t *quiet_at = NULL;
    uint64_t *quiet_d;

    rc = efax_args_parse(argc, argv, defs, "cuda_test", "Proxy semantics on two GPUs.", err, sizeof err);
    if (rc) return rc == 1 ? 0 : 2;
    if (!efax_cuda_devices(err, sizeof err)) { printf("skipped: no CUDA device (%s)\n", err); return 77; }
    if (efax_boot_init(&boot, NULL)) return 1;
    if (boot.size != 2) { fprintf(stderr, "cuda_test: needs 2 ranks\n"); return 2; }
    memset(&cd, 0, sizeof cd), memset(&src, 0, sizeof src), memset(&dst, 0, sizeof dst), memset(&px, 0, sizeof px);
    cd.provider = provider ? provider : "shm";
    cd.hmem = true; /* device memory: registered directly where the provider can */
    if ((rc = efax_cuda_bind(boot.local_rank, &dev)) || (rc = efax_ctx_init(&ctx, &cd)) || (rc = efax_ctx_connect(&ctx, &boot)) ||
        (rc = efax_ctx_warmup(&ctx)))
        goto out;
    check_the_check(&ctx, efax_mem_device(), boot.rank);
    check_the_check(&ctx, efax_mem_pinned(), boot.rank);
    if (boot.rank == 0) check_settle(&ctx);
    if (boot.rank == 0) check_marks(&ctx);
    /* pinned memory: the GPU writes its data in place, the NIC reads it, the target checks it */
    if ((rc = efax_buf_alloc(&ctx, &src, efax_mem_pinned(), window, EFAX_MR_WRITE_SRC)) ||
        (rc = efax_buf_alloc(&ctx, &dst, efax_mem_pinned(), window, EFAX_MR_WRITE_DST)) || (rc = efax_mr_exchange(&dst.mr, &boot)))
        goto out;
    if (boot.rank == 0) {
        src.ops->fill(&src, 0, window, 0, 7);
        memset(&pd, 0, sizeof pd);
        pd.ctx = &ctx, pd.src = &src, pd.dst = &dst.mr, pd.producers = PRODUCERS, pd.device = dev;
        pd.chunk = CHUNK; /* the target counts arrivals in chunks of this size: both sides name it */
        if ((rc = efax_proxy_init(&px, &pd)) || (rc = EFAX_CUDA(cudaHostAlloc((void **)&quiet_at, 64 * 8, cudaHostAllocMapped))) ||
            (rc = EFAX_CUDA(cudaHostGetDevicePointer((void **)&quiet_d, (void *)quiet_at, 0))))
            goto out;
        memset((void *)quiet_at, 0, 64 * 8);
        if ((rc = efax_boot_barrier(&boot, -1)) || (rc = efax_proxy_start(&px))) goto out;
        k_semantics<<<PRODUCERS, 64>>>(efax_proxy_device(&px), quiet_d, window, 7);
        rc = EFAX_CUDA(cudaDeviceSynchronize()); /* returns only if every quiet returned: no hang */
        {
            int prc = efax_proxy_stop(&px, 10000); /* the refused command makes the run fail */
            EXPECT(prc == -EFAX_E_PEER, "efax_proxy_stop returned %d (%s), expected -EFAX_E_PEER for the refused command", prc, efax_strerror(prc));
            if (!rc) rc = prc == -EFAX_E_PEER ? 0 : prc;
        }
        for (int b = 0; b < PRODUCERS; b++) EXPECT(quiet_at[b] == 1, "block %d's quiet did not return", b);
        EXPECT(px.bad == 1, "the proxy refused %llu commands, expected exactly the one outside the window", (unsigned long long)px.bad);
        EXPECT(px.puts == 2 * PRODUCERS, "the proxy posted %llu writes, expected %d", (unsigned long long)px.puts, 2 * PRODUCERS);
        EXPECT(px.fences == PRODUCERS && px.fence_violations == 0, "fences %llu (expected %d), violations %llu",
               (unsigned long long)px.fences, PRODUCERS, (unsigned long long)px.fence_violations);
        for (int b = 0; b < PRODUCERS; b++) EXPECT(px.done_h[b] == 3 + (b == 0), "producer %d: %llu commands done", b, (unsigned long long)px.done_h[b]);
        if (!rc) rc = efax_notify(&ctx, 1, TAG_DONE, 7);
    } else {
        /* the target: each block's B may only be complete once its A is (the fence); nothing
           may arrive for the refused command; then every byte of every region */
        uint32_t a_chunks = efax_write_chunks(BIG, efax_ctx_peer_nnics(&ctx, 0), EFAX_MODE_SINGLE, CHUNK);
        uint32_t b_chunks = efax_write_chunks(SMALL, efax_ctx_peer_nnics(&ctx, 0), EFAX_MODE_SINGLE, CHUNK);
        uint64_t deadline = efax_now_ns() + 30000000000ull;
        int order_bad = 0;
        dst.ops->poison(&dst, 0, window);
        if ((rc = efax_boot_barrier(&boot, -1))) goto out;
        while (efax_imm_count(&ctx, 0, TAG_B, 7) < PRODUCERS * b_chunks && efax_now_ns() < deadline) {
            uint32_t b_before = efax_imm_count(&ctx, 0, TAG_B, 7);
            efax_progress(&ctx);
            /* a B that landed now: all A chunks of (at least) that many blocks must be in */
            if (efax_imm_count(&ctx, 0, TAG_B, 7) > b_before && efax_imm_count(&ctx, 0, TAG_A, 7) < efax_imm_count(&ctx, 0, TAG_B, 7) / b_chunks * a_chunks)
                order_bad++;
        }
        rc = efax_wait_imm(&ctx, 0, TAG_A, 7, PRODUCERS * a_chunks, -1);
        if (!rc) rc = efax_wait_imm(&ctx, 0, TAG_B, 7, PRODUCERS * b_chunks, -1);
        if (!rc) rc = efax_wait_imm(&ctx, 0, TAG_DONE, 7, 1, -1);
        EXPECT(order_bad == 0, "%d B writes completed before their A (fence broken)", order_bad);
        EXPECT(efax_imm_count(&ctx, 0, TAG_C, 7) == 0, "the refused command wrote anyway");
        EXPECT(dst.ops->check(&dst, 0, window, 0, 7) == 0, "wrong bytes in the written regions");
    }
out:
    if (rc) fprintf(stderr, "cuda_test: %s\n", efax_strerror(rc)), failures++;
    if (boot.rank == 0) efax_proxy_deinit(&px);
    if (quiet_at) cudaFreeHost((void *)quiet_at);
    efax_buf_free(&src), efax_buf_free(&dst);
    efax_ctx_deinit(&ctx);
    {
        int64_t total = 0;
        int sum_rc = efax_boot_sum(&boot, failures, &total, -1);
        if (sum_rc) { /* the other rank's verdict is unknown: that is no pass */
            fprintf(stderr, "cuda_test: rank %d: the ranks' results could not be gathered: %s\n", boot.rank, efax_strerror(sum_rc));
            total = failures + 1;
        } else if (boot.rank == 0)
            printf("cuda_test: %s\n", total ? "FAILED" : "proxy put_nbi/fence/quiet, a refused command, every byte: OK");
        efax_boot_deinit(&boot);
        return total ? 1 : 0;
    }
}
