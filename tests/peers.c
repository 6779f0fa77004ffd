/* peers — peers that come and go, on efax.h's public calls alone, no launcher and no collective:
   each process is started by hand (tests/run.sh peers_join_leave) and ships its address and region
   descriptors as files in a shared folder (any channel would do).

     steady (ids 0 and 1)  stream writes to each other without stopping (a ring of 4 slots each way,
                           one data tag, one credit tag, every byte checked), and between messages
                           watch the folder: a newcomer is added, its write checked, written back to,
                           and removed when it leaves; a peer that stops answering (killed) is
                           named, removed, and the stream goes on
     visitor (ids 2, 3)    joins, writes its pattern into both steadies' regions, takes theirs, checks
                           every byte, leaves
     victim (id 4)         joins and takes a stream of writes from steady 0 until it is killed

   peers --role steady|visitor|victim --id N --dir DIR [--provider P] [--nics L] [--seconds S]
   Each prints one verdict line; exit 0 when it holds. */
#define EFAX_IMPLEMENTATION
#include "efax.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { TAG_DATA = 1, TAG_CREDIT, TAG_VISIT, TAG_VSTREAM, TAG_VCREDIT };
enum { MAX_PEERS = 8, SLOTS = 4, SIZE = 64 << 10, VICTIM_SLOTS = 4, QUIET_MS = 3000 };

typedef struct proc {
    efax_ctx ctx;
    int id;
    const char *dir;
    efax_mr ring, visit; /* the steady stream's slots; one slot per peer id for visitors */
    uint8_t *ring_mem, *visit_mem;
    efax_mr peers; /* every peer's regions that this process writes (unpacked) */
    efax_mr peers_visit;
} proc;

/* Writes bytes to DIR/name.N atomically (a rename), so a reader never sees half of it. */
static int put_file(const proc *p, const char *name, int n, const void *buf, size_t len) {
    char tmp[600], path[512];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s.%d", p->dir, name, n);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "wb"))) return -1;
    if (len && fwrite(buf, 1, len, f) != len) {
        fclose(f);
        return -1;
    }
    fclose(f);
    return rename(tmp, path);
}

/* Reads DIR/name.N into buf: its length, or -1 when it is not there (yet). */
static long get_file(const proc *p, const char *name, int n, void *buf, size_t cap) {
    char path[512];
    FILE *f;
    long len;
    snprintf(path, sizeof path, "%s/%s.%d", p->dir, name, n);
    if (!(f = fopen(path, "rb"))) return -1;
    len = (long)fread(buf, 1, cap, f);
    fclose(f);
    return len;
}

static int wait_file(const proc *p, const char *name, int n, void *buf, size_t cap, long *len) {
    for (int i = 0; i < 6000; i++) { /* 60 s */
        if ((*len = get_file(p, name, n, buf, cap)) >= 0) return 0;
        efax_progress((efax_ctx *)&p->ctx);
        usleep(10000);
    }
    fprintf(stderr, "peers %d: %s/%s.%d never came\n", p->id, p->dir, name, n);
    return -FI_ETIMEDOUT;
}

/* Adds peer n from its address file, and unpacks its two regions. */
static int add_peer(proc *p, int n) {
    uint8_t buf[EFAX_ADDR_BYTES];
    long len;
    int rc = wait_file(p, "addr", n, buf, sizeof buf, &len);
    if (!rc) rc = efax_ctx_peer_add(&p->ctx, buf, (size_t)len, NULL);
    if (!rc) rc = wait_file(p, "ring", n, buf, sizeof buf, &len);
    if (!rc) rc = efax_mr_unpack(&p->peers, &p->ctx, buf, (size_t)len, NULL);
    if (!rc) rc = wait_file(p, "visit", n, buf, sizeof buf, &len);
    if (!rc) rc = efax_mr_unpack(&p->peers_visit, &p->ctx, buf, (size_t)len, NULL);
    return rc;
}

/* Opens the context (this process's id, no peers yet), registers and publishes its regions. */
static int open_proc(proc *p, const char *provider, const char *nics) {
    efax_ctx_desc cd;
    efax_mr_desc md;
    uint8_t buf[EFAX_ADDR_BYTES];
    size_t len;
    int rc;
    memset(&cd, 0, sizeof cd);
    cd.provider = provider;
    cd.nics = nics;
    cd.max_peers = MAX_PEERS;
    cd.self = p->id;
    if ((rc = efax_ctx_init(&p->ctx, &cd))) return rc;
    p->ring_mem = (uint8_t *)efax_host_alloc(2 * SLOTS * (size_t)SIZE);
    p->visit_mem = (uint8_t *)efax_host_alloc(MAX_PEERS * (size_t)SIZE);
    if (!p->ring_mem || !p->visit_mem) return -FI_ENOMEM;
    memset(&md, 0, sizeof md);
    md.ptr = p->ring_mem; /* [0, SLOTS): what this process writes from; [SLOTS, 2 SLOTS): what lands */
    md.len = 2 * SLOTS * (size_t)SIZE;
    if ((rc = efax_mr_reg(&p->ctx, &p->ring, &md))) return rc;
    md.ptr = p->visit_mem;
    md.len = MAX_PEERS * (size_t)SIZE;
    if ((rc = efax_mr_reg(&p->ctx, &p->visit, &md))) return rc;
    if ((rc = efax_mr_pack(&p->ring, buf, sizeof buf, &len)) || put_file(p, "ring", p->id, buf, len))
        return -1;
    if ((rc = efax_mr_pack(&p->visit, buf, sizeof buf, &len)) || put_file(p, "visit", p->id, buf, len))
        return -1;
    if ((rc = efax_ctx_addr(&p->ctx, buf, sizeof buf, &len)) || put_file(p, "addr", p->id, buf, len))
        return -1;
    return 0;
}

/* A write of one SIZE slot: from this process's region `src` at soff to peer `to`'s view at doff. */
static efax_write_desc slot_write(int from, int to, const efax_mr *src, const efax_mr *dst, uint64_t soff,
                                  uint64_t doff, int tag, uint32_t seq) {
    efax_write_desc w;
    memset(&w, 0, sizeof w);
    w.from = from;
    w.to = to;
    w.src = src;
    w.dst = dst;
    w.src_off = soff;
    w.dst_off = doff;
    w.size = SIZE;
    w.tag = tag;
    w.seq = seq;
    return w;
}

/* What a steady process does for a newcomer, between messages of its stream. */
typedef struct guest {
    int state; /* 0 none, 1 expecting its write, 2 writing back, 3 done, 4 victim streaming */
    efax_expect e;
    efax_xfer x[VICTIM_SLOTS];
    uint64_t sent, credited, last_ns;
} guest;

/* Steady's look at the folder and its guests: newcomers added, their writes checked and answered,
   the victim streamed to, leavers and the silent removed. Returns 0 or a failure. */
static int tend(proc *p, guest *g, long *wrong, int *named, uint64_t at) {
    uint8_t dummy[8];
    for (int n = 2; n < MAX_PEERS; n++) {
        guest *q = &g[n];
        efax_write_desc w;
        int rc;
        if (q->state == 0 && get_file(p, "ready", n, dummy, sizeof dummy) >= 0 &&
            get_file(p, "left", n, dummy, sizeof dummy) < 0) {
            if ((rc = add_peer(p, n))) return rc;
            q->last_ns = efax_now_ns();
            if (get_file(p, "victim", n, dummy, sizeof dummy) >= 0) {
                q->state = p->id == 0 ? 4 : 3;
            } else {
                w = slot_write(n, p->id, NULL, &p->visit, 0, (uint64_t)n * SIZE, TAG_VISIT, 0);
                if ((rc = efax_expect_write(&p->ctx, &q->e, &w))) return rc;
                q->state = 1;
            }
            put_file(p, "added", p->id * 100 + n, NULL, 0);
            printf("steady %d: peer %d added at message %llu\n", p->id, n, (unsigned long long)at);
        }
        if (q->state == 1 && (rc = efax_expect_test(&p->ctx, &q->e)) != 0) {
            if (rc < 0) return rc;
            *wrong += (long)efax_pattern_check(p->visit_mem + (size_t)n * SIZE, SIZE, 0, n, 7, NULL);
            efax_pattern_fill(p->visit_mem + (size_t)p->id * SIZE, SIZE, 0, p->id, 7);
            w = slot_write(p->id, n, &p->visit, &p->peers_visit, (uint64_t)p->id * SIZE,
                           (uint64_t)p->id * SIZE, TAG_VISIT, 0);
            if ((rc = efax_write(&p->ctx, &q->x[0], &w, NULL))) return rc;
            q->state = 2;
        }
        if (q->state == 2 && efax_xfer_done(&q->x[0])) q->state = q->x[0].status ? -q->x[0].status : 3;
        if (q->state == 4) { /* the victim: a stream of writes, each slot reused once it was credited */
            while (efax_imm_count(&p->ctx, n, TAG_VCREDIT, (uint32_t)q->credited) > 0) {
                if ((rc = efax_wait_imm(&p->ctx, n, TAG_VCREDIT, (uint32_t)q->credited, 1, 0))) break;
                q->credited++;
                q->last_ns = efax_now_ns();
            }
            for (int k = 0; k < VICTIM_SLOTS; k++)
                if (q->x[k].done && q->x[k].status && q->state == 4) {
                    printf("steady %d: peer %d failed a write: %s\n", p->id, n,
                           efax_strerror(q->x[k].status));
                    q->state = 5;
                }
            if (q->state == 4 && efax_now_ns() - q->last_ns > (uint64_t)QUIET_MS * 1000000ull) {
                printf("steady %d: peer %d gave no credit for %d ms (its writes unanswered)\n", p->id, n,
                       QUIET_MS);
                q->state = 5;
            }
            if (q->state == 4 && q->sent < q->credited + VICTIM_SLOTS &&
                (q->sent < VICTIM_SLOTS || q->x[q->sent % VICTIM_SLOTS].done)) {
                efax_xfer *x = &q->x[q->sent % VICTIM_SLOTS];
                w = slot_write(p->id, n, &p->ring, &p->peers, 0, (uint64_t)(q->sent % VICTIM_SLOTS) * SIZE,
                               TAG_VSTREAM, (uint32_t)q->sent);
                if ((rc = efax_write(&p->ctx, x, &w, NULL))) {
                    printf("steady %d: peer %d refused a write: %s\n", p->id, n, efax_strerror(rc));
                    q->state = 5;
                } else
                    q->sent++;
            }
            if (q->state == 5) { /* its transfers may still be in efax's hands: q stays as it is */
                printf("steady %d: peer %d named and removed at message %llu\n", p->id, n,
                       (unsigned long long)at);
                *named += 1;
                if ((rc = efax_ctx_peer_remove(&p->ctx, n))) return rc;
                q->state = 6;
            }
        }
        if ((q->state == 3 || q->state < 0) && get_file(p, "left", n, dummy, sizeof dummy) >= 0) {
            if (q->state < 0) return q->state;
            if ((rc = efax_ctx_peer_remove(&p->ctx, n))) return rc;
            printf("steady %d: peer %d left, removed at message %llu\n", p->id, n, (unsigned long long)at);
            q->state = 6;
        }
    }
    return 0;
}

/* Steady: the stream to and from the other steady process, the guests tended between messages. */
static int steady(proc *p, int seconds) {
    int other = 1 - p->id, named = 0, rc;
    guest g[MAX_PEERS];
    efax_xfer x[SLOTS];
    efax_expect e;
    long wrong = 0;
    uint64_t n, t_end;
    uint8_t dummy[8];
    memset(g, 0, sizeof g);
    memset(x, 0, sizeof x);
    if ((rc = add_peer(p, other))) return rc;
    printf("steady %d: streaming\n", p->id);
    fflush(stdout);
    t_end = efax_now_ns() + (uint64_t)seconds * 1000000000ull;
    for (n = 0; !rc; n++) {
        efax_write_desc w;
        uint64_t slot = n % SLOTS;
        if (n >= SLOTS) { /* the other's credit for slot n, and our own write from it done */
            rc = efax_wait_imm(&p->ctx, other, TAG_CREDIT, (uint32_t)(n - SLOTS), 1, -1);
            if (!rc) rc = efax_wait(&p->ctx, &x[slot], -1);
        }
        if (!rc) {
            efax_pattern_fill(p->ring_mem + slot * SIZE, SIZE, 0, p->id, n);
            w = slot_write(p->id, other, &p->ring, &p->peers, slot * SIZE, (SLOTS + slot) * SIZE, TAG_DATA,
                           (uint32_t)n);
            rc = efax_write(&p->ctx, &x[slot], &w, NULL);
        }
        w = slot_write(other, p->id, NULL, &p->ring, 0, (SLOTS + slot) * SIZE, TAG_DATA, (uint32_t)n);
        if (!rc) rc = efax_expect_write(&p->ctx, &e, &w);
        if (!rc) rc = efax_expect_wait(&p->ctx, &e, -1);
        if (!rc) {
            wrong += (long)efax_pattern_check(p->ring_mem + (SLOTS + slot) * SIZE, SIZE, 0, other, n, NULL);
            rc = efax_notify(&p->ctx, other, TAG_CREDIT, (uint32_t)n);
        }
        if (!rc && n % 16 == 0) rc = tend(p, g, &wrong, &named, n);
        if (!rc && n % 256 == 0 && get_file(p, "stop", 0, dummy, sizeof dummy) >= 0) break;
        if (!rc && efax_now_ns() > t_end) {
            fprintf(stderr, "steady %d: no stop after %d s\n", p->id, seconds);
            rc = -FI_ETIMEDOUT;
        }
    }
    for (uint64_t k = 0; !rc && k < SLOTS && k <= n; k++) /* the last credits: nothing left in flight */
        rc = efax_wait_imm(&p->ctx, other, TAG_CREDIT, (uint32_t)(n - k), 1, -1);
    printf("steady %d: %s after %llu messages each way, %ld wrong bytes, %d silent peer(s) named\n", p->id,
           rc ? efax_strerror(rc) : "stopped", (unsigned long long)n, wrong, named);
    return rc ? rc : wrong ? 1 : 0;
}

/* Visitor: joins, writes to both steady processes, takes their writes, checks, leaves. */
static int visitor(proc *p) {
    efax_expect e[2];
    efax_xfer x[2];
    efax_write_desc w;
    uint8_t dummy[8];
    long len, wrong = 0;
    int s, rc = put_file(p, "ready", p->id, NULL, 0);
    for (s = 0; s < 2 && !rc; s++) /* both must have added us before we write */
        rc = wait_file(p, "added", s * 100 + p->id, dummy, sizeof dummy, &len);
    for (s = 0; s < 2 && !rc; s++) rc = add_peer(p, s);
    for (s = 0; s < 2 && !rc; s++) {
        w = slot_write(s, p->id, NULL, &p->visit, 0, (uint64_t)s * SIZE, TAG_VISIT, 0);
        rc = efax_expect_write(&p->ctx, &e[s], &w);
    }
    efax_pattern_fill(p->visit_mem + (size_t)p->id * SIZE, SIZE, 0, p->id, 7);
    for (s = 0; s < 2 && !rc; s++) {
        w = slot_write(p->id, s, &p->visit, &p->peers_visit, (uint64_t)p->id * SIZE, (uint64_t)p->id * SIZE,
                       TAG_VISIT, 0);
        rc = efax_write(&p->ctx, &x[s], &w, NULL);
    }
    for (s = 0; s < 2 && !rc; s++) rc = efax_wait(&p->ctx, &x[s], -1);
    for (s = 0; s < 2 && !rc; s++) rc = efax_expect_wait(&p->ctx, &e[s], -1);
    for (s = 0; s < 2 && !rc; s++)
        wrong += (long)efax_pattern_check(p->visit_mem + (size_t)s * SIZE, SIZE, 0, s, 7, NULL);
    if (!rc) put_file(p, "left", p->id, NULL, 0);
    printf("visitor %d: %s, %ld wrong bytes\n", p->id, rc ? efax_strerror(rc) : "wrote both, took both",
           wrong);
    return rc ? rc : wrong ? 1 : 0;
}

/* Victim: joins, then takes steady 0's stream (a credit a write) until it is killed. */
static int victim(proc *p) {
    efax_expect e;
    efax_write_desc w;
    uint8_t dummy[8];
    long len;
    int rc = put_file(p, "victim", p->id, NULL, 0);
    if (!rc) rc = put_file(p, "ready", p->id, NULL, 0);
    for (int s = 0; s < 2 && !rc; s++) rc = wait_file(p, "added", s * 100 + p->id, dummy, sizeof dummy, &len);
    if (!rc) rc = add_peer(p, 0);
    for (uint64_t n = 0; !rc; n++) {
        w = slot_write(0, p->id, NULL, &p->ring, 0, (n % VICTIM_SLOTS) * SIZE, TAG_VSTREAM, (uint32_t)n);
        rc = efax_expect_write(&p->ctx, &e, &w);
        if (!rc) rc = efax_expect_wait(&p->ctx, &e, -1);
        if (!rc) rc = efax_notify(&p->ctx, 0, TAG_VCREDIT, (uint32_t)n);
        if (n == 64) put_file(p, "streaming", p->id, NULL, 0);
    }
    printf("victim %d: %s\n", p->id, efax_strerror(rc));
    return 1;
}

int main(int argc, char **argv) {
    proc p;
    const char *role = NULL, *provider = NULL, *nics = NULL;
    int seconds = 120, rc;
    memset(&p, 0, sizeof p);
    p.id = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--role"))
            role = argv[i + 1];
        else if (!strcmp(argv[i], "--id"))
            p.id = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dir"))
            p.dir = argv[i + 1];
        else if (!strcmp(argv[i], "--provider"))
            provider = argv[i + 1];
        else if (!strcmp(argv[i], "--nics"))
            nics = argv[i + 1];
        else if (!strcmp(argv[i], "--seconds"))
            seconds = atoi(argv[i + 1]);
    }
    if (!role || !p.dir || p.id < 0 || p.id >= MAX_PEERS) {
        fprintf(
            stderr,
            "peers: usage: peers --role steady|visitor|victim --id N --dir DIR [--provider P] [--nics L]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    rc = open_proc(&p, provider, nics);
    if (!rc)
        rc = !strcmp(role, "steady")    ? steady(&p, seconds)
             : !strcmp(role, "visitor") ? visitor(&p)
                                        : victim(&p);
    if (rc < 0) fprintf(stderr, "peers %d (%s): %s\n", p.id, role, efax_strerror(rc));
    efax_mr_dereg(&p.peers);
    efax_mr_dereg(&p.peers_visit);
    efax_mr_dereg(&p.ring);
    efax_mr_dereg(&p.visit);
    efax_ctx_deinit(&p.ctx);
    free(p.ring_mem);
    free(p.visit_mem);
    return rc < 0 ? 1 : rc;
}
