/* unit — tests of everything in efax.h that needs no fabric: option parsing, sizes, immediate
   data, planning, verification patterns, statistics, error strings, peer-data checks, NIC
   matching, JSON output.

   build/unit --list        names of the tests
   build/unit NAME          runs one (exit 0 pass, 1 fail)
   build/unit               runs all
*/
#define EFAX_IMPLEMENTATION
#include "efax.h"
#include "efax_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

static int failures;
#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        if (!(c)) {                                                                                          \
            fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                          \
            failures++;                                                                                      \
        }                                                                                                    \
    } while (0)

static void test_sizes(void) {
    static const struct {
        const char *s;
        int ok;
        uint64_t v;
    } t[] = {{"0", 1, 0},
             {"1", 1, 1},
             {"4K", 1, 4096},
             {"4k", 1, 4096},
             {"1M", 1, 1 << 20},
             {"2G", 1, 2ull << 30},
             {"1T", 1, 1ull << 40},
             {"3KiB", 1, 3072},
             {"1MB", 1, 1 << 20},
             {"", 0, 0},
             {"-1", 0, 0},
             {"abc", 0, 0},
             {"1X", 0, 0},
             {"1.5M", 0, 0},
             {" 1", 0, 0},
             {"1 ", 0, 0},
             {"18446744073709551615", 1, UINT64_MAX},
             {"18446744073709551616", 0, 0},
             {"99999999999999999999", 0, 0},
             {"16777216T", 0, 0},
             {"+4", 0, 0}};
    for (unsigned i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint64_t v = 12345;
        int rc = efax_parse_size(t[i].s, &v);
        if ((rc == 0) != t[i].ok || (t[i].ok && v != t[i].v)) {
            fprintf(stderr, "  size '%s': rc %d value %llu\n", t[i].s, rc, (unsigned long long)v);
            failures++;
        }
    }
    char b[32];
    CHECK(!strcmp(efax_fmt_size(4096, b, sizeof b), "4K"));
    CHECK(!strcmp(efax_fmt_size(1 << 20, b, sizeof b), "1M"));
    CHECK(!strcmp(efax_fmt_size(1000, b, sizeof b), "1000"));
    CHECK(!strcmp(efax_fmt_size(3ull << 30, b, sizeof b), "3G"));
}

/* Parses a command line given as one string. Returns the parser's result. */
static int parse(efax_opts *o, const char *line, char *err, size_t el) {
    static char buf[1024];
    static char *argv[64];
    int argc = 0;
    char *tok, *save = NULL;
    snprintf(buf, sizeof buf, "prog %s", line);
    for (tok = strtok_r(buf, " ", &save); tok && argc < 63; tok = strtok_r(NULL, " ", &save))
        argv[argc++] = tok;
    argv[argc] = NULL;
    efax_opts_init(o);
    return efax_opts_parse(o, argc, argv, NULL, "prog", NULL, err, el);
}

static void test_options(void) {
    efax_opts o;
    char err[256];
    /* accepted */
    CHECK(parse(&o, "-b 4K -e 1M -f 4 -n 10 -w 2 -c --mode split,rr --window 3 --chunk 64K", err,
                sizeof err) == 0);
    CHECK(o.min_size == 4096 && o.max_size == (1 << 20) && o.factor == 4 && o.iters == 10 && o.warmup == 2 &&
          o.check);
    CHECK(o.modes == ((1u << EFAX_MODE_SPLIT) | (1u << EFAX_MODE_ROUNDROBIN)) && o.window == 3 &&
          o.chunk == 65536);
    CHECK(parse(&o, "--min-size=1 --max-size=1 --mode=all --provider=tcp --nics=a,b --quiet", err,
                sizeof err) == 0);
    CHECK(o.min_size == 1 && o.modes == 15 && !strcmp(o.provider, "tcp") && !strcmp(o.nics, "a,b") &&
          o.quiet);
    CHECK(!o.one_slot);
    CHECK(parse(&o, "--window 8 --one-slot", err, sizeof err) == 0 && o.one_slot && o.window == 8);
    {
        /* slot 3 of 100-byte messages: at 300, or at 0 with --one-slot (the exchange and sendrecv) */
        static efax_bench b;
        b.o = o;
        CHECK(efax_bench_slot_off(&b, 3, 100) == 0);
        b.o.one_slot = false;
        CHECK(efax_bench_slot_off(&b, 3, 100) == 300 && efax_bench_slot_off(&b, 0, 100) == 0);
    }
    /* rejected, each with a message naming the option */
    static const struct {
        const char *line, *must;
    } bad[] = {{"-b 0", "-b/--min-size"},
               {"-b -5", "-b/--min-size"},
               {"-b abc", "-b/--min-size"},
               {"-e 99999999999999999999", "-e/--max-size"},
               {"-e 128G", "-e/--max-size"},
               {"-b 1M -e 1K", "larger than"},
               {"-f 1", "factor"},
               {"-f 0.5", "factor"},
               {"-f x", "factor"},
               {"-n 0", "-n/--iters"},
               {"-n 100000000000", "-n/--iters"},
               {"-n -3", "-n/--iters"},
               {"-n 1.5", "-n/--iters"},
               {"-w -1", "-w/--warmup"},
               {"--mode fast", "--mode"},
               {"--mode ,", "--mode"},
               {"--window 0", "--window"},
               {"--window 5000", "--window"},
               {"--chunk 1", "--chunk"},
               {"--timeout 0", "--timeout"},
               {"--line-rate 0", "--line-rate"},
               {"--line-rate nan", "--line-rate"},
               {"--duration -1", "--duration"},
               {"--bogus", "unknown option"},
               {"-z", "unknown option"},
               {"stray", "unexpected argument"},
               {"-b", "needs a value"},
               {"--check=1", "takes no value"},
               {"--provider=", "empty"}};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(&o, bad[i].line, err, sizeof err);
        if (rc != -EFAX_E_USAGE || !strstr(err, bad[i].must)) {
            fprintf(stderr, "  '%s': rc %d, message '%s' (expected it to mention '%s')\n", bad[i].line, rc,
                    err, bad[i].must);
            failures++;
        }
    }
}

static void test_iters(void) {
    efax_opts o;
    uint64_t s, n = 0;
    efax_opts_init(&o);
    CHECK(efax_opts_iters(&o, 1) == 1000 && efax_opts_iters(&o, 1ull << 30) == 10 &&
          efax_opts_iters(&o, 1ull << 24) == 64);
    CHECK(efax_opts_warmup(&o, 1) == 10 && efax_opts_warmup(&o, 1ull << 30) == 1 &&
          efax_opts_warmup(&o, o.min_size) == 1000);
    o.min_size = 1000, o.max_size = 5000, o.factor = 2;
    for (s = o.min_size; s; s = efax_opts_next_size(&o, s)) n++;
    CHECK(n == 4); /* 1000 2000 4000 5000: the sweep ends exactly at the maximum */
    o.factor = 1.0001, o.min_size = 1, o.max_size = 3;
    for (s = o.min_size, n = 0; s; s = efax_opts_next_size(&o, s)) n++;
    CHECK(n == 3); /* always moves forward */
}

static void test_imm(void) {
    uint32_t imm, seq;
    int r, t;
    CHECK(efax_imm_encode(65535, 255, 255, &imm) == 0 && imm == 0xffffffffu);
    CHECK(efax_imm_encode(3, 7, 0x1ff, &imm) == 0);
    efax_imm_decode(imm, &r, &t, &seq);
    CHECK(r == 3 && t == 7 && seq == 0xff);
    CHECK(efax_imm_encode(65536, 0, 0, &imm) == -FI_EINVAL);
    CHECK(efax_imm_encode(-1, 0, 0, &imm) == -FI_EINVAL);
    CHECK(efax_imm_encode(0, 256, 0, &imm) == -FI_EINVAL);
}

/* A staged write's cells: an eighth of the write, at least EFAX_STAGE_MIN_CELL or the chunk asked,
   whole 4 KiB pages; never more than EFAX_STAGE_CELLS of them. */
static void test_stage_unit(void) {
    const uint64_t M = 1ull << 20,
                   sizes[] = {0, 4096, M - 1, M, 4 * M, 8 * M + 1, 16 * M, 256 * M, 1ull << 34};
    CHECK(efax_stage_unit(0, 0) == EFAX_STAGE_MIN_CELL &&
          efax_stage_unit(64 << 10, 0) == EFAX_STAGE_MIN_CELL);
    CHECK(efax_stage_unit(M, 0) == M && efax_stage_unit(4 * M, 0) == M &&
          efax_stage_unit(16 * M, 0) == 2 * M);
    CHECK(efax_stage_unit(256 * M, 0) == 32 * M && efax_stage_unit(16 * M, 4 * M) == 4 * M);
    CHECK(efax_stage_unit(M, 16 << 10) == M && efax_stage_unit(M, 3 * M + 1) == 3 * M + 4096);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint64_t u = efax_stage_unit(sizes[i], 0);
        CHECK(u >= EFAX_STAGE_MIN_CELL && u % 4096 == 0 && (sizes[i] + u - 1) / u <= EFAX_STAGE_CELLS);
    }
}

/* Every plan covers [0, size) exactly once, in order, on valid NICs. */
static int plan_ok(uint64_t size, int nnic, efax_mode m, uint64_t idx, efax_plan_seg *seg, int n) {
    uint64_t off = 0;
    if (n < 1 || n > nnic) return 0;
    for (int i = 0; i < n; i++) {
        if (seg[i].off != off || seg[i].nic < 0 || seg[i].nic >= nnic) return 0;
        if (size && !seg[i].len) return 0;
        for (int j = 0; j < i; j++)
            if (seg[j].nic == seg[i].nic) return 0;
        off += seg[i].len;
    }
    (void)m, (void)idx;
    return off == size;
}

static void test_plan(void) {
    static const uint64_t sizes[] = {0,
                                     1,
                                     63,
                                     64,
                                     100,
                                     4095,
                                     128 << 10,
                                     (128 << 10) + 1,
                                     256 << 10,
                                     300000,
                                     1 << 20,
                                     256ull << 20,
                                     (1ull << 30) + 7};
    efax_plan_seg seg[EFAX_MAX_NICS];
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int nnic = 1; nnic <= 8; nnic++)
            for (int m = 0; m < EFAX_MODE_COUNT; m++)
                for (uint64_t idx = 0; idx < 5; idx++) {
                    int n = efax_plan(sizes[s], nnic, (efax_mode)m, idx, 0, 0, seg);
                    if (!plan_ok(sizes[s], nnic, (efax_mode)m, idx, seg, n)) {
                        fprintf(stderr, "  plan size %llu nnic %d mode %s index %llu: bad (%d segments)\n",
                                (unsigned long long)sizes[s], nnic, efax_mode_name((efax_mode)m),
                                (unsigned long long)idx, n);
                        failures++;
                    }
                }
    /* single: the NIC asked for; round-robin rotates with the message index and uses every NIC */
    CHECK(efax_plan(1000, 4, EFAX_MODE_SINGLE, 9, 2, 0, seg) == 1 && seg[0].nic == 2);
    for (int i = 0; i < 8; i++)
        CHECK(efax_plan(1000, 4, EFAX_MODE_ROUNDROBIN, (uint64_t)i, 0, 0, seg) == 1 && seg[0].nic == i % 4);
    /* split: every NIC, 64-byte aligned pieces */
    CHECK(efax_plan(1 << 20, 4, EFAX_MODE_SPLIT, 0, 0, 0, seg) == 4 && seg[1].off == 262144 &&
          seg[3].nic == 3);
    CHECK(efax_plan(1000, 4, EFAX_MODE_SPLIT, 0, 0, 0, seg) == 4 && seg[1].off % 64 == 0);
    CHECK(efax_plan(100, 4, EFAX_MODE_SPLIT, 0, 0, 0, seg) == 2);
    /* stripe: small whole and rotating; large over a divisor of the NIC count, >= 128K, 128-aligned */
    CHECK(efax_plan(64 << 10, 4, EFAX_MODE_STRIPE, 0, 0, 0, seg) == 1 && seg[0].nic == 0);
    CHECK(efax_plan(64 << 10, 4, EFAX_MODE_STRIPE, 1, 0, 0, seg) == 1 && seg[0].nic == 1);
    CHECK(efax_plan(300 << 10, 4, EFAX_MODE_STRIPE, 0, 0, 0, seg) == 2 && seg[1].off % 128 == 0);
    CHECK(efax_plan(200 << 10, 3, EFAX_MODE_STRIPE, 0, 0, 0, seg) == 1); /* 2 stripes do not divide 3 NICs */
    CHECK(efax_plan(300 << 10, 3, EFAX_MODE_STRIPE, 0, 0, 0, seg) == 3);
    CHECK(efax_plan(4 << 20, 4, EFAX_MODE_STRIPE, 0, 0, 0, seg) == 4 && seg[0].len == (1 << 20));
    CHECK(efax_plan(4 << 20, 4, EFAX_MODE_STRIPE, 1, 0, 0, seg) == 4 && seg[0].nic == 0);
    CHECK(efax_plan(300 << 10, 4, EFAX_MODE_STRIPE, 1, 0, 0, seg) == 2 && seg[0].nic == 2);
    /* chunk counts: what the target expects */
    CHECK(efax_write_chunks(0, 4, EFAX_MODE_SPLIT, 1 << 20) == 1);
    CHECK(efax_write_chunks(4 << 20, 1, EFAX_MODE_SINGLE, 1 << 20) == 4);
    CHECK(efax_write_chunks((4 << 20) + 1, 1, EFAX_MODE_SINGLE, 1 << 20) == 5);
    CHECK(efax_write_chunks(4 << 20, 4, EFAX_MODE_SPLIT, 1 << 20) == 4);
    CHECK(efax_write_chunks(4 << 20, 4, EFAX_MODE_SPLIT, 0) == 4);
    CHECK(efax_write_chunks(4 << 20, 3, EFAX_MODE_SPLIT, 1 << 20) == 6);
    CHECK(efax_plan(1, 0, EFAX_MODE_SINGLE, 0, 0, 0, seg) == -FI_EINVAL);
    CHECK(efax_plan(1, EFAX_MAX_NICS + 1, EFAX_MODE_SINGLE, 0, 0, 0, seg) == -FI_EINVAL);
    efax_mode m;
    CHECK(efax_mode_parse("RR", &m) == 0 && m == EFAX_MODE_ROUNDROBIN);
    CHECK(efax_mode_parse("Stripe", &m) == 0 && m == EFAX_MODE_STRIPE);
    CHECK(efax_mode_parse("x", &m) == -EFAX_E_USAGE);
}

/* The check must be able to fail: a wrong byte, a missing chunk and a stale iteration all show. */
static void test_pattern(void) {
    enum { N = 1 << 16 };
    uint8_t *a = (uint8_t *)malloc(N), *b = (uint8_t *)malloc(N);
    uint64_t first;
    efax_pattern_fill(a, N, 0, 3, 7);
    CHECK(efax_pattern_check(a, N, 0, 3, 7, &first) == 0 && first == UINT64_MAX);
    a[12345] ^= 1;
    CHECK(efax_pattern_check(a, N, 0, 3, 7, &first) == 1 && first == 12345);
    a[12345] ^= 1;
    memcpy(b, a, N);
    efax_poison(b + 4096, 4096); /* a chunk that never arrived */
    CHECK(efax_pattern_check(b, N, 0, 3, 7, &first) >= 4000 && first >= 4096 && first < 4200);
    CHECK(efax_pattern_check(a, N, 0, 3, 6, NULL) > N - N / 64); /* the previous iteration's bytes */
    CHECK(efax_pattern_check(a, N, 0, 2, 7, NULL) > N - N / 64); /* another rank's bytes */
    /* a piece filled at an unaligned offset matches the whole message's bytes there */
    efax_pattern_fill(b, 1001, 333, 3, 7);
    CHECK(memcmp(b, a + 333, 1001) == 0);
    CHECK(efax_pattern_check(a + 333, 1001, 333, 3, 7, NULL) == 0);
    /* consecutive iterations differ nearly everywhere */
    efax_pattern_fill(b, N, 0, 3, 8);
    {
        int same = 0;
        for (int i = 0; i < N; i++) same += a[i] == b[i];
        CHECK(same < N / 100);
    }
    free(a);
    free(b);
}

static void test_stats(void) {
    double v[] = {5, 1, 4, 2, 3}, w[200];
    efax_stats s = efax_stats_of(v, 5);
    CHECK(s.min == 1 && s.max == 5 && s.avg == 3 && s.p50 == 3 && s.p99 == 5);
    for (int i = 0; i < 200; i++) w[i] = 200 - i;
    s = efax_stats_of(w, 200);
    CHECK(s.p99 == 198 && s.p50 == 100 && s.min == 1);
    s = efax_stats_of(w, 0);
    CHECK(s.avg == 0);
}

static void test_errors(void) {
    for (int c = EFAX_E_BASE; c < EFAX_E_END; c++)
        CHECK(strlen(efax_strerror(-c)) > 5 && strcmp(efax_strerror(-c), efax_strerror(-FI_EOTHER)));
    CHECK(!strcmp(efax_strerror(-FI_EAGAIN), fi_strerror(FI_EAGAIN)) &&
          !strcmp(efax_strerror(-FI_ETRUNC), fi_strerror(FI_ETRUNC)));
    CHECK(!strcmp(efax_strerror(0), "success"));
    CHECK(efax_strerror(EFAX_E_STALE) == efax_strerror(-EFAX_E_STALE));
}

/* What peers send is checked before use. */
static void test_peer_data(void) {
    efax__hello h;
    char why[256];
    memset(&h, 0, sizeof h);
    h.magic = EFAX__HELLO_MAGIC, h.wire = EFAX_WIRE_VERSION, h.rank = 2, h.nnic = 1;
    snprintf(h.provider, sizeof h.provider, "tcp");
    snprintf(h.nic[0].name, sizeof h.nic[0].name, "eth0");
    h.nic[0].addrlen = 16;
    CHECK(efax__hello_check(&h, 2, "tcp", why, sizeof why) == 0);
    CHECK(efax__hello_check(&h, 1, "tcp", why, sizeof why) == -EFAX_E_PEER);
    CHECK(efax__hello_check(&h, 2, "shm", why, sizeof why) == -EFAX_E_PEER && strstr(why, "--provider"));
    h.wire = EFAX_WIRE_VERSION + 1;
    CHECK(efax__hello_check(&h, 2, "tcp", why, sizeof why) == -EFAX_E_VERSION && strstr(why, "wire version"));
    h.wire = EFAX_WIRE_VERSION, h.nnic = EFAX_MAX_NICS + 1;
    CHECK(efax__hello_check(&h, 2, "tcp", why, sizeof why) == -EFAX_E_PEER);
    h.nnic = 1, h.nic[0].addrlen = EFAX__ADDR_MAX + 1;
    CHECK(efax__hello_check(&h, 2, "tcp", why, sizeof why) == -EFAX_E_PEER);
    h.nic[0].addrlen = 16;
    memset(h.provider, 'x', sizeof h.provider); /* no terminator */
    CHECK(efax__hello_check(&h, 2, "tcp", why, sizeof why) == -EFAX_E_PEER);
    h.magic = 0;
    CHECK(efax__hello_check(&h, 2, "tcp", why, sizeof why) == -EFAX_E_PEER);
}

/* NICs match by name (k-th of a name to k-th), else by index modulo the peer's count. */
static void test_matching(void) {
    efax__hello a, b;
    memset(&a, 0, sizeof a), memset(&b, 0, sizeof b);
    a.nnic = 4, b.nnic = 2;
    const char *an[] = {"r0", "r1", "r2", "r3"}, *bn[] = {"r3", "r1"};
    for (int i = 0; i < 4; i++) snprintf(a.nic[i].name, 64, "%s", an[i]);
    for (int i = 0; i < 2; i++) snprintf(b.nic[i].name, 64, "%s", bn[i]);
    CHECK(efax__match(&a, 1, &b) == 1 && efax__match(&a, 3, &b) == 0); /* by name, other order */
    CHECK(efax__match(&a, 0, &b) == 0 && efax__match(&a, 2, &b) == 0); /* no such name: modulo */
    CHECK(efax__match(&b, 0, &a) == 3 && efax__match(&b, 1, &a) == 1);
    a.nnic = 3, b.nnic = 3;
    for (int i = 0; i < 3; i++) snprintf(a.nic[i].name, 64, "shm"), snprintf(b.nic[i].name, 64, "shm");
    CHECK(efax__match(&a, 0, &b) == 0 && efax__match(&a, 1, &b) == 1 && efax__match(&a, 2, &b) == 2);
    char h[64], p[16];
    CHECK(efax__split_hostport("10.0.0.1:29500", h, sizeof h, p, sizeof p) == 0 && !strcmp(h, "10.0.0.1") &&
          !strcmp(p, "29500"));
    CHECK(efax__split_hostport("[fe80::1]:80", h, sizeof h, p, sizeof p) == 0 && !strcmp(h, "fe80::1"));
    CHECK(efax__split_hostport("host", h, sizeof h, p, sizeof p) != 0);
    CHECK(efax__split_hostport("host:0", h, sizeof h, p, sizeof p) != 0);
    CHECK(efax__split_hostport("host:70000", h, sizeof h, p, sizeof p) != 0);
    CHECK(efax__split_hostport(":80", h, sizeof h, p, sizeof p) != 0);
}

/* JSON Lines with hostile strings: the runner parses the file with jq. */
static void test_json(const char *path) {
    efax_opts o;
    efax_report r;
    efax_result res;
    char *argv[] = {(char *)"prog", (char *)"--weird=\"quote\\back\nline\ttab\x01"};
    efax_opts_init(&o);
    o.json = path ? path : "/dev/null";
    o.quiet = true;
    o.argc = 2, o.argv = argv;
    CHECK(efax_report_init(&r, &o, "unit\"test", "host", NULL, NULL) == 0);
    efax_result_init(&res, "Va\"ri\\ant\n", "host", "host", EFAX_RESULT_ONEWAY, 4096, 1, 1);
    {
        double lat[3] = {1, 2, 3};
        efax_result_time(&res, lat, 3, 4096, 0);
    }
    res.wrong = 0;
    efax_report_add(&r, &res);
    efax_result_init(&res, "Zero", "host", "host", EFAX_RESULT_ALLTOALL, 1, 1, 1);
    res.gbps = 0.0 / 0.0; /* NaN must come out as null */
    efax_report_add(&r, &res);
    efax_report_row(&r);
    efax_report_deinit(&r);
}

/* What efax asks every provider for (efax__hints), and that efa-direct is never chosen. */
static void test_hints(void) {
    struct fi_info *h = efax__hints("efa", true, true), *d;
    CHECK(h && h->domain_attr->cq_data_size == 4); /* efa carries 4 bytes: asked for, not just checked */
    CHECK(h && h->tx_attr->msg_order == FI_ORDER_SAS && h->rx_attr->msg_order == FI_ORDER_SAS);
    CHECK(h && (h->caps & FI_HMEM) && (h->domain_attr->mr_mode & FI_MR_HMEM) &&
          !strcmp(h->fabric_attr->prov_name, "efa"));
    CHECK(h && (h->mode & FI_CONTEXT2) && h->ep_attr->type == FI_EP_RDM);
    fi_freeinfo(h);
    h = efax__hints(NULL, false, false); /* the second try: no ordering asked */
    CHECK(h && h->tx_attr->msg_order == 0 && h->rx_attr->msg_order == 0 &&
          h->domain_attr->cq_data_size == 4 && !h->fabric_attr->prov_name);
    fi_freeinfo(h);
    /* efa-direct: dropped by fabric name (2.x lists it first, with efa's domain names) */
    d = fi_allocinfo();
    CHECK(d != NULL);
    if (d) {
        d->fabric_attr->name = strdup("efa-direct");
        CHECK(efax__is_efa_direct(d));
        free(d->fabric_attr->name);
        d->fabric_attr->name = strdup("efa");
        CHECK(!efax__is_efa_direct(d));
        free(d->fabric_attr->name);
        d->fabric_attr->name = strdup("EFA-fe80::1"); /* a 1.x efa fabric */
        CHECK(!efax__is_efa_direct(d));
        fi_freeinfo(d);
    }
    /* efa-direct asked for by name: efa's provider, that fabric, no FI_TAGGED (it has none) */
    h = efax__hints("efa-direct", false, false);
    CHECK(h && !(h->caps & FI_TAGGED) && (h->caps & FI_RMA) && !strcmp(h->fabric_attr->prov_name, "efa") &&
          h->fabric_attr->name && !strcmp(h->fabric_attr->name, "efa-direct") && (h->mode & FI_CONTEXT2) &&
          (h->domain_attr->mr_mode & FI_MR_LOCAL) && !(h->mode & FI_RX_CQ_DATA));
    fi_freeinfo(h);
    {
        char buf[32];
        /* no EFA device here: not offered (on an EFA host it is a provider like any other) */
        CHECK(efax_topo_pick_provider("efa-direct", buf, sizeof buf) == -EFAX_E_NOPROV);
    }
}

/* A write chunk never exceeds 1 GiB (one efa RDMA write with data) nor the NICs' limit, writer
   and target count the same chunks, and chunk 0 means "as large as allowed", not unlimited. */
static void test_chunk(void) {
    const uint64_t G = 1ull << 30;
    CHECK(EFAX_MAX_CHUNK == G);
    CHECK(efax_chunk_clamp(0, 0) == G && efax_chunk_clamp(2 * G, 0) == G &&
          efax_chunk_clamp(1 << 20, 0) == (1 << 20));
    CHECK(efax_chunk_clamp(0, 65536) == 65536 && efax_chunk_clamp(1 << 20, 65536) == 65536 &&
          efax_chunk_clamp(4096, 65536) == 4096);
    CHECK(efax_chunk_clamp(0, UINT64_MAX) == G &&
          efax_chunk_clamp(3 * G, 2 * G) == G);                   /* max_msg_size UINT64_MAX */
    CHECK(efax_write_chunks(4 * G, 1, EFAX_MODE_SINGLE, 0) == 4); /* --chunk 0: 1 GiB pieces */
    CHECK(efax_write_chunks(3 * G + 1, 1, EFAX_MODE_SINGLE, 0) == 4);
    CHECK(efax_write_chunks(4 * G, 1, EFAX_MODE_SINGLE, 2 * G) == 4); /* asked for 2 GiB: still 1 GiB */
    CHECK(efax_write_chunks(4 * G, 4, EFAX_MODE_SPLIT, 0) == 4);
    CHECK(efax_write_chunks(8 * G, 2, EFAX_MODE_SPLIT, 0) == 8);
    CHECK(efax_write_chunks(G, 1, EFAX_MODE_SINGLE, 0) == 1 &&
          efax_write_chunks(G + 1, 1, EFAX_MODE_SINGLE, 0) == 2);
    {
        efax_plan_seg seg[2] = {{0, 0, 2 * G}, {1, 2 * G, 0}};
        CHECK(efax_plan_chunks(seg, 2, 0) == 3); /* an empty segment is one post, carrying its data */
    }
}

/* Reads a fixture's list of PCI addresses (tests/topo/<machine>/gpus or nics). */
static int read_list(const char *dir, const char *file, char (*out)[16], int max) {
    char path[512], line[64];
    int n = 0;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "  cannot read %s\n", path);
        return 0;
    }
    while (n < max && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0]) snprintf(out[n++], 16, "%.15s", line);
    }
    fclose(f);
    return n;
}

/* Which NICs a rank uses by default, on topology fixtures (tests/topo/record.sh writes them):
   a p5 (8 GPUs, 32 NICs, 4 behind each GPU's PCIe switch) and a p4d (8 GPUs, 4 NICs, one per
   pair of GPUs), read through the sysfs root efax_topo_* take (EFAX_SYSFS_ROOT in a run). The
   trees are SYNTHETIC (tests/topo/p5/NOTE.md): the instances' shape with made-up bus numbers, never
   read from a p5 or a p4d. */
static void test_topology(void) {
    char here[512], root[600], gpus[8][16], nicpci[32][16];
    efax_nic_info nics[32];
    int out[EFAX_MAX_NICS], ng, nn;
    snprintf(here, sizeof here, "%s", __FILE__);
    *(strrchr(here, '/') ? strrchr(here, '/') : here) = 0;
    /* p5 */
    snprintf(root, sizeof root, "%s/topo/p5", here[0] ? here : ".");
    ng = read_list(root, "gpus", gpus, 8), nn = read_list(root, "nics", nicpci, 32);
    CHECK(ng == 8 && nn == 32);
    memset(nics, 0, sizeof nics);
    for (int i = 0; i < nn; i++) {
        snprintf(nics[i].name, sizeof nics[i].name, "rdmap%ds0-rdm", i);
        memcpy(nics[i].pci, nicpci[i], sizeof nics[i].pci);
        nics[i].numa = efax_topo_pci_numa(root, nicpci[i]);
    }
    CHECK(nics[0].numa == 0 && nics[31].numa == 1);
    CHECK(efax_topo_pci_depth(root, gpus[0], nicpci[0]) == 3 &&
          efax_topo_pci_depth(root, gpus[0], nicpci[4]) == 0);
    CHECK(efax_topo_pci_depth(root, gpus[0], "0000:ff:00.0") == 0 &&
          efax_topo_pci_depth(root, "bogus", nicpci[0]) == 0);
    for (int g = 0; g < ng; g++) {
        int k = efax_topo_near(root, nics, nn, gpus[g], -1, out, EFAX_MAX_NICS);
        int ok = k == 4;
        for (int j = 0; j < k && ok; j++) ok = out[j] == 4 * g + j;
        if (!ok) {
            fprintf(stderr, "  p5 GPU %d (%s): %d NICs nearest, first %d (expected NICs %d..%d)\n", g,
                    gpus[g], k, k ? out[0] : -1, 4 * g, 4 * g + 3);
            failures++;
        }
    }
    /* host memory: the NICs of the rank's NUMA node; nothing known: no preference */
    CHECK(efax_topo_near(root, nics, nn, NULL, 1, out, EFAX_MAX_NICS) == 16 && out[0] == 16 && out[15] == 31);
    CHECK(efax_topo_near(root, nics, nn, "", -1, out, EFAX_MAX_NICS) == 0);
    CHECK(efax_topo_near(root, nics, nn, NULL, 5, out, EFAX_MAX_NICS) == 0);
    CHECK(efax_topo_near(root, nics, nn, gpus[2], -1, out, 2) == 2 && out[0] == 8); /* capped at max */
    CHECK(efax_topo_near("/nonexistent", nics, nn, gpus[0], -1, out, EFAX_MAX_NICS) ==
          0); /* no tree: no preference */
    /* p4d */
    snprintf(root, sizeof root, "%s/topo/p4d", here[0] ? here : ".");
    ng = read_list(root, "gpus", gpus, 8), nn = read_list(root, "nics", nicpci, 32);
    CHECK(ng == 8 && nn == 4);
    memset(nics, 0, sizeof nics);
    for (int i = 0; i < nn; i++) {
        memcpy(nics[i].pci, nicpci[i], sizeof nics[i].pci);
        nics[i].numa = efax_topo_pci_numa(root, nicpci[i]);
    }
    CHECK(efax_topo_pci_depth(root, gpus[0], nicpci[1]) == 1); /* same host bridge, other switch */
    for (int g = 0; g < ng; g++) {
        int k = efax_topo_near(root, nics, nn, gpus[g], -1, out, EFAX_MAX_NICS);
        if (k != 1 || out[0] != g / 2) {
            fprintf(stderr, "  p4d GPU %d (%s): %d NICs nearest, first %d (expected NIC %d)\n", g, gpus[g], k,
                    k ? out[0] : -1, g / 2);
            failures++;
        }
    }
    CHECK(efax_topo_near(root, nics, nn, NULL, 0, out, EFAX_MAX_NICS) == 2 && out[0] == 0 && out[1] == 1);
    CHECK(efax_topo_gpus(root, NULL, 0) == 8); /* two GPUs behind each switch: the one NIC is shared */
    /* p6-b200 (and a p5en's switches): 2 GPUs and 2 NICs behind each PCIe switch, both NICs tied
       nearest both GPUs: each GPU takes its own, in PCI order, as NCCL_NETDEVS_POLICY=max:1 does */
    snprintf(root, sizeof root, "%s/topo/p6-b200", here[0] ? here : ".");
    ng = read_list(root, "gpus", gpus, 8), nn = read_list(root, "nics", nicpci, 32);
    CHECK(ng == 8 && nn == 8);
    memset(nics, 0, sizeof nics);
    for (int i = 0; i < nn; i++) {
        memcpy(nics[i].pci, nicpci[i], sizeof nics[i].pci);
        nics[i].numa = efax_topo_pci_numa(root, nicpci[i]);
    }
    {
        char found[8][16];
        CHECK(efax_topo_gpus(root, found, 8) == 8 && !strcmp(found[0], gpus[0]) &&
              !strcmp(found[7], gpus[7]));
        CHECK(efax_topo_gpus(root, found, 2) == 8 && !strcmp(found[1], gpus[1])); /* counts past max */
    }
    for (int g = 0; g < ng; g++) {
        int k = efax_topo_near(root, nics, nn, gpus[g], -1, out, EFAX_MAX_NICS);
        if (k != 1 || out[0] != g) {
            fprintf(stderr, "  p6-b200 GPU %d (%s): %d NICs nearest, first %d (expected NIC %d alone)\n", g,
                    gpus[g], k, k ? out[0] : -1, g);
            failures++;
        }
    }
    CHECK(efax_topo_pci_depth(root, gpus[0], nicpci[1]) == efax_topo_pci_depth(root, gpus[0], nicpci[0]));
    snprintf(root, sizeof root, "%s/topo/counters", here[0] ? here : ".");
    CHECK(efax_topo_gpus(root, NULL, 0) == 0);
}

/* EFA devices the kernel has, read from a tree (tests/topo/counters has one, vendor 0x1d0f; the
   p5 tree none): what efax_ctx_init refuses to fall back to tcp over. */
static void test_efa_devices(void) {
    char here[512], root[600], names[128];
    snprintf(here, sizeof here, "%s", __FILE__);
    *(strrchr(here, '/') ? strrchr(here, '/') : here) = 0;
    snprintf(root, sizeof root, "%s/topo/counters", here[0] ? here : ".");
    setenv("EFAX_SYSFS_ROOT", root, 1);
    CHECK(efax_topo_efa_devices(names, sizeof names) == 1 && !strcmp(names, "rdmap16s27"));
    CHECK(efax_topo_efa_devices(NULL, 0) == 1);
    snprintf(root, sizeof root, "%s/topo/p5", here[0] ? here : ".");
    setenv("EFAX_SYSFS_ROOT", root, 1);
    CHECK(efax_topo_efa_devices(names, sizeof names) == 0 && !names[0]);
    unsetenv("EFAX_SYSFS_ROOT");
}

/* EFAX_FAULTS values: every family, seeds, sizes; every bad value refused with a reason that names it
   and the families */
static void test_faults(void) {
    static const struct {
        const char *spec;
        int ok;
        unsigned fams;
        uint64_t seed;
        int has_seed;
        uint64_t rma, first;
    } c[] = {{NULL, 1, 0, 0, 0, 65536, 0},
             {"", 1, 0, 0, 0, 65536, 0},
             {"reorder", 1, EFAX_FAULT_REORDER, 0, 0, 65536, 0},
             {"eagain,injectfail", 1, EFAX_FAULT_EAGAIN | EFAX_FAULT_INJECTFAIL, 0, 0, 65536, 0},
             {"all:42", 1, EFAX_FAULT_ALL, 42, 1, 65536, 0},
             {"emulated,smallrma:0x10", 1, EFAX_FAULT_EMULATED | EFAX_FAULT_SMALLRMA, 16, 1, 65536, 0},
             {"smallrma=4K", 1, EFAX_FAULT_SMALLRMA, 0, 0, 4096, 0},
             {"smallrma=1M:7", 1, EFAX_FAULT_SMALLRMA, 7, 1, 1 << 20, 0},
             {"injectfail=2", 1, EFAX_FAULT_INJECTFAIL, 0, 0, 65536, 2},
             {"rxfail", 1, EFAX_FAULT_RXFAIL, 0, 0, 65536, 0},
             {"rxfail=50:3", 1, EFAX_FAULT_RXFAIL, 3, 1, 65536, 0},
             {"reorder,all", 1, EFAX_FAULT_ALL, 0, 0, 65536, 0},
             {"bogus", 0, 0, 0, 0, 0, 0},
             {"reorder,", 1, EFAX_FAULT_REORDER, 0, 0, 65536, 0},
             {"direct", 1, EFAX_FAULT_DIRECT, 0, 0, 65536, 0},
             {"all,direct:3", 1, EFAX_FAULT_ALL | EFAX_FAULT_DIRECT, 3, 1, 65536, 0},
             {"cqmax=256,reorder", 1, EFAX_FAULT_CQMAX | EFAX_FAULT_REORDER, 0, 0, 65536, 0},
             {"cqmax=0", 0, 0, 0, 0, 0, 0},
             {"cqmax=x", 0, 0, 0, 0, 0, 0},
             {"cqmax", 0, 0, 0, 0, 0, 0},
             {"direct=1", 0, 0, 0, 0, 0, 0},
             {",", 0, 0, 0, 0, 0, 0},
             {"all:", 0, 0, 0, 0, 0, 0},
             {"all:x", 0, 0, 0, 0, 0, 0},
             {"all:-1", 0, 0, 0, 0, 0, 0},
             {":5", 0, 0, 0, 0, 0, 0},
             {"smallrma=0", 0, 0, 0, 0, 0, 0},
             {"smallrma=2G", 0, 0, 0, 0, 0, 0},
             {"smallrma=4Q", 0, 0, 0, 0, 0, 0},
             {"injectfail=0", 0, 0, 0, 0, 0, 0},
             {"injectfail=x", 0, 0, 0, 0, 0, 0},
             {"rxfail=0", 0, 0, 0, 0, 0, 0},
             {"rxfail=-3", 0, 0, 0, 0, 0, 0},
             {"Reorder", 0, 0, 0, 0, 0, 0}};
    for (unsigned i = 0; i < sizeof c / sizeof c[0]; i++) {
        efax_fault_spec f;
        char why[400];
        int rc = efax_faults_parse(c[i].spec, &f, why, sizeof why);
        if (c[i].ok != (rc == 0) ||
            (rc == 0 &&
             (f.families != c[i].fams || f.has_seed != (bool)c[i].has_seed ||
              (c[i].has_seed && f.seed != c[i].seed) || f.rma != c[i].rma || f.inject_first != c[i].first))) {
            fprintf(stderr, "  EFAX_FAULTS='%s': rc %d, families %#x seed %llu rma %llu first %llu (%s)\n",
                    c[i].spec ? c[i].spec : "(null)", rc, f.families, (unsigned long long)f.seed,
                    (unsigned long long)f.rma, (unsigned long long)f.inject_first, why);
            failures++;
        }
        if (rc && (!strstr(why, "EFAX_FAULTS='") || !strstr(why, "reorder, eagain, injectfail") ||
                   strchr(why, '\n'))) {
            fprintf(
                stderr,
                "  EFAX_FAULTS='%s': the reason does not name the value and the families in one line: %s\n",
                c[i].spec, why);
            failures++;
        }
    }
    {
        efax_fault_spec f;
        char why[400];
        CHECK(efax_faults_parse("cqmax=4096", &f, why, sizeof why) == 0 && f.cq_max == 4096);
        CHECK(efax_faults_parse("bogus", &f, why, sizeof why) && strstr(why, "direct, cqmax=N"));
        CHECK(
            !(EFAX_FAULT_ALL & (EFAX_FAULT_DIRECT | EFAX_FAULT_CQMAX))); /* limits, not faults: not in all */
    }
}

/* A completion queue holds two windows, the control receives and room for peers' writes
   (16384 by default); a given size shrinks the window so that at least half of what control leaves
   is room for incoming writes */
static void test_cq_size(void) {
    int w = 256, size, room;
    efax__cq_plan(0, EFAX__CTRL_SLOTS, &w, &size, &room);
    CHECK(w == 256 && room == 16384 && size == 2 * 256 + EFAX__CTRL_SLOTS + 16384);
    w = 256;
    efax__cq_plan(256, EFAX__CTRL_SLOTS, &w, &size, &room);
    CHECK(w == 48 && size == 256 && room == 96 && 2 * w + EFAX__CTRL_SLOTS + room == size);
    w = 16;
    efax__cq_plan(4096, EFAX__CTRL_SLOTS, &w, &size, &room);
    CHECK(w == 16 && size == 4096 && room == 4096 - 32 - EFAX__CTRL_SLOTS);
    w = 256;
    efax__cq_plan(10, EFAX__CTRL_SLOTS, &w, &size, &room); /* below the minimum: the minimum */
    CHECK(size == EFAX__CQ_MIN && room >= size / 4);
}

/* OS counters from the synthetic tree tests/topo/counters (EFAX_SYSFS_ROOT): an efa device's
   hw_counters (lifespan is a setting, skipped), an interface's statistics, the namespace's TCP
   counters; deltas and what the wire lost. Then the live tree: loopback's statistics move when
   bytes go through it. */
static void test_counters(void) {
    char here[512], root[600];
    efax_nic_info efa, eth, shm;
    efax_os_counters a, b, d;
    uint64_t lost = 0, sent = 0;
    snprintf(here, sizeof here, "%s", __FILE__);
    *(strrchr(here, '/') ? strrchr(here, '/') : here) = 0;
    snprintf(root, sizeof root, "%s/topo/counters", here[0] ? here : ".");
    setenv("EFAX_SYSFS_ROOT", root, 1);
    memset(&efa, 0, sizeof efa), memset(&eth, 0, sizeof eth), memset(&shm, 0, sizeof shm);
    snprintf(efa.provider, sizeof efa.provider, "efa");
    snprintf(efa.name, sizeof efa.name, "rdmap16s27-rdm");
    snprintf(eth.provider, sizeof eth.provider, "tcp;ofi_rxm");
    snprintf(eth.name, sizeof eth.name, "eth0");
    snprintf(shm.provider, sizeof shm.provider, "shm");
    snprintf(shm.name, sizeof shm.name, "shm");
    CHECK(efax_os_counters_nic(&efa, &a) == 0 && !strcmp(a.source, "efa") && !strcmp(a.dev, "rdmap16s27"));
    CHECK(a.n == 22 && efax_os_counter(&a, "lifespan") == -1);
    CHECK(efax_os_counter(&a, "rdma_write_bytes") == 96636764160ll &&
          efax_os_counter(&a, "retrans_pkts") == 1);
    CHECK(!strcmp(a.name[0], "impaired_remote_conn_events") &&
          !strcmp(a.name[a.n - 1], "unresponsive_remote_events"));
    CHECK(efax_os_counters_loss(&a, &lost, &sent) == 0 && lost == 4 && sent == 11796480);
    CHECK(efax_os_counters_nic(&eth, &b) == 0 && !strcmp(b.source, "net") && b.n == 24);
    CHECK(efax_os_counter(&b, "tx_bytes") == 1073741824 && efax_os_counter(&b, "tx_dropped") == 2);
    CHECK(efax_os_counters_loss(&b, &lost, &sent) == 0 && lost == 2 && sent == 741540);
    CHECK(efax_os_counters_nic(&shm, &d) == -FI_ENOENT && d.n == 0 && !d.source[0]);
    snprintf(eth.name, sizeof eth.name, "../../../etc");
    CHECK(efax_os_counters_nic(&eth, &d) == -FI_ENOENT);
    CHECK(efax_os_counters_tcp(&a) == 0 && !strcmp(a.source, "tcp") && a.n == 10);
    CHECK(efax_os_counter(&a, "RetransSegs") == 14831 && efax_os_counter(&a, "RtoMin") == -1);
    CHECK(efax_os_counters_loss(&a, &lost, &sent) == 0 && lost == 14831 && sent == 741540);
    /* deltas: by name, a counter that went backwards counts from 0, one missing before is left out */
    b = a;
    b.value[0] += 7;
    for (int i = 0; i < b.n; i++)
        if (!strcmp(b.name[i], "RetransSegs")) b.value[i] = 5;
    snprintf(a.name[1], sizeof a.name[1], "Renamed");
    efax_os_counters_delta(&a, &b, &d);
    CHECK(d.n == 9 && d.value[0] == 7 && efax_os_counter(&d, "RetransSegs") == 5 &&
          efax_os_counter(&d, "OutSegs") == 0);
    CHECK(!strcmp(d.source, "tcp"));
    efax_os_counters_delta(&a, &b, &b); /* in place */
    CHECK(b.n == 9 && b.value[0] == 7);
    /* what moved, and what it says: the SRD events first (the tree's efa device: 1 retransmit, 3
       drops since boot; lifespan 10 ms kept apart), then the verdict on writes */
    {
        char txt[400];
        efax_os_counters e, z;
        CHECK(efax_os_counters_nic(&efa, &e) == 0 && e.lifespan_ms == 10);
        CHECK(efax_os_counters_events(&e, txt, sizeof txt) == 2 &&
              !strcmp(txt,
                      "retrans_pkts +1, rx_drops +3: packets lost and sent again (SRD retransmits): loss or "
                      "congestion on the path"));
        z = e;
        for (int i = 0; i < z.n; i++) z.value[i] = 0;
        CHECK(efax_os_counters_events(&z, txt, sizeof txt) == 0 && !txt[0]);
        for (int i = 0; i < z.n; i++)
            if (!strcmp(z.name[i], "unresponsive_remote_events") ||
                !strcmp(z.name[i], "retrans_timeout_events"))
                z.value[i] = 2;
        CHECK(efax_os_counters_events(&z, txt, sizeof txt) == 2 &&
              strstr(txt, "unresponsive_remote_events +2") &&
              strstr(txt, "retrans_timeout_events +2: a peer stopped answering"));
        CHECK(efax_os_counters_events(&a, txt, sizeof txt) == 0); /* tcp's namespace counters: not a NIC's */
        for (int i = 0; i < z.n; i++) z.value[i] = !strcmp(z.name[i], "rdma_write_bytes") ? 1048576 : 0;
        CHECK(efax_os_write_verdict(&z, 1048576, txt, sizeof txt) == 1 && strstr(txt, "grew by 1048576"));
        CHECK(efax_os_write_verdict(&z, 1048577, txt, sizeof txt) == 0 &&
              strstr(txt, "grew by 1048576 of the 1048577"));
        for (int i = 0; i < z.n; i++) z.value[i] = 0;
        CHECK(efax_os_write_verdict(&z, 4096, txt, sizeof txt) == 0); /* emulated: nothing by RDMA write */
        CHECK(efax_os_write_verdict(&b, 4096, txt, sizeof txt) == -1 && strstr(txt, "no rdma_write_bytes"));
        CHECK(efax_os_write_verdict(NULL, 4096, txt, sizeof txt) == -1);
    }
    setenv("EFAX_SYSFS_ROOT", "/nonexistent", 1);
    CHECK(efax_os_counters_tcp(&a) == -FI_ENOENT && efax_os_counters_nic(&efa, &a) == -FI_ENOENT);
    unsetenv("EFAX_SYSFS_ROOT");
    /* the live tree: datagrams sent to loopback show in lo's statistics (other traffic may add more) */
    snprintf(eth.name, sizeof eth.name, "lo");
    if (efax_os_counters_nic(&eth, &a) == 0) {
        struct sockaddr_in to;
        char buf[1000];
        int fd = socket(AF_INET, SOCK_DGRAM, 0);
        memset(buf, 1, sizeof buf), memset(&to, 0, sizeof to);
        to.sin_family = AF_INET, to.sin_port = htons(9), to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        for (int i = 0; fd >= 0 && i < 10; i++)
            sendto(fd, buf, sizeof buf, 0, (struct sockaddr *)&to, sizeof to);
        if (fd >= 0) close(fd);
        CHECK(efax_os_counters_nic(&eth, &b) == 0 && !strcmp(b.source, "net") && !strcmp(b.dev, "lo"));
        efax_os_counters_delta(&a, &b, &d);
        CHECK(efax_os_counter(&d, "tx_bytes") >= 10 * 1000 && efax_os_counter(&d, "tx_packets") >= 10);
    }
}

/* Host memory on many NICs: ranks share the PCIe switch groups, local rank i group i mod G (p5:
   8 groups of 4, p4d: 4 of 1), a rank alone takes them all, a bound rank its node's (synthetic
   trees: tests/topo/p5/NOTE.md). */
static void test_host_nics(void) {
    char here[512], root[600], nicpci[32][16], why[160];
    efax_nic_info nics[32];
    int group[32], out[EFAX_MAX_NICS], nn, k;
    snprintf(here, sizeof here, "%s", __FILE__);
    *(strrchr(here, '/') ? strrchr(here, '/') : here) = 0;
    snprintf(root, sizeof root, "%s/topo/p5", here[0] ? here : ".");
    nn = read_list(root, "nics", nicpci, 32);
    CHECK(nn == 32);
    memset(nics, 0, sizeof nics);
    for (int i = 0; i < nn; i++) {
        memcpy(nics[i].pci, nicpci[i], sizeof nics[i].pci);
        nics[i].numa = efax_topo_pci_numa(root, nicpci[i]);
    }
    CHECK(efax_topo_switch_groups(root, nics, nn, group) == 8);
    for (int i = 0; i < nn; i++)
        if (group[i] != i / 4) {
            fprintf(stderr, "  p5 NIC %d (%s): switch group %d, expected %d\n", i, nicpci[i], group[i],
                    i / 4);
            failures++;
        }
    for (int r = 0; r < 8; r++) { /* 8 ranks unbound: 4 NICs each, the r-th switch */
        k = efax_topo_host_nics(root, nics, nn, -1, r, 8, out, EFAX_MAX_NICS, why, sizeof why);
        if (k != 4 || out[0] != 4 * r || out[3] != 4 * r + 3) {
            fprintf(stderr, "  p5 local rank %d of 8: %d NICs from %d (%s)\n", r, k, k ? out[0] : -1, why);
            failures++;
        }
    }
    k = efax_topo_host_nics(root, nics, nn, -1, 3, 8, out, EFAX_MAX_NICS, why, sizeof why);
    CHECK(!strcmp(why, "PCIe switch group 3 of 8, local rank 3 of 8"));
    k = efax_topo_host_nics(root, nics, nn, -1, 9, 16, out, EFAX_MAX_NICS, why, sizeof why);
    CHECK(k == 2 && out[0] == 5 && out[1] == 7); /* 9 mod 8, the second of its two ranks: NICs 1, 3 of it */
    CHECK(!strcmp(why, "PCIe switch group 1 of 8, NIC share 2 of 2, local rank 9 of 16"));
    CHECK(efax_topo_host_nics(root, nics, nn, -1, 0, 1, out, EFAX_MAX_NICS, NULL, 0) ==
          32); /* alone: every NIC */
    CHECK(efax_topo_host_nics(root, nics, nn, -1, 0, 0, out, EFAX_MAX_NICS, NULL, 0) ==
          32); /* local_size unknown */
    k = efax_topo_host_nics(root, nics, nn, -1, 1, 2, out, EFAX_MAX_NICS, why,
                            sizeof why); /* 2 ranks: every other switch */
    CHECK(k == 16 && out[0] == 4 && out[4] == 12 &&
          !strcmp(why, "PCIe switch groups 1,3,5,7 of 8, local rank 1 of 2"));
    /* bound: node 1 holds switches 4-7; with 8 ranks, 4 expected there; local rank 5 takes switch 5 */
    CHECK(efax_topo_host_nics(root, nics, nn, 1, 5, 8, out, EFAX_MAX_NICS, NULL, 0) == 4 && out[0] == 20);
    CHECK(efax_topo_host_nics(root, nics, nn, 1, 0, 2, out, EFAX_MAX_NICS, NULL, 0) == 16 &&
          out[0] == 16); /* alone there */
    CHECK(efax_topo_host_nics(root, nics, nn, 7, 0, 8, out, EFAX_MAX_NICS, NULL, 0) ==
          0); /* no NIC on that node */
    CHECK(efax_topo_host_nics("/nonexistent", nics, nn, -1, 0, 8, out, EFAX_MAX_NICS, NULL, 0) ==
          0); /* no tree */
    /* p4d: one NIC per switch */
    snprintf(root, sizeof root, "%s/topo/p4d", here[0] ? here : ".");
    nn = read_list(root, "nics", nicpci, 32);
    memset(nics, 0, sizeof nics);
    for (int i = 0; i < nn; i++) {
        memcpy(nics[i].pci, nicpci[i], sizeof nics[i].pci);
        nics[i].numa = efax_topo_pci_numa(root, nicpci[i]);
    }
    CHECK(nn == 4 && efax_topo_switch_groups(root, nics, nn, group) == 4);
    for (int r = 0; r < 8; r++) {
        k = efax_topo_host_nics(root, nics, nn, -1, r, 8, out, EFAX_MAX_NICS, NULL, 0);
        if (k != 1 || out[0] != r % 4) {
            fprintf(stderr, "  p4d local rank %d of 8: %d NICs, first %d (expected NIC %d)\n", r, k,
                    k ? out[0] : -1, r % 4);
            failures++;
        }
    }
    /* p6-b200: 4 groups of 2 NICs; 8 ranks: one NIC each (group r mod 4, share r / 4); 4 ranks: a group each */
    snprintf(root, sizeof root, "%s/topo/p6-b200", here[0] ? here : ".");
    nn = read_list(root, "nics", nicpci, 32);
    memset(nics, 0, sizeof nics);
    for (int i = 0; i < nn; i++) {
        memcpy(nics[i].pci, nicpci[i], sizeof nics[i].pci);
        nics[i].numa = efax_topo_pci_numa(root, nicpci[i]);
    }
    CHECK(nn == 8 && efax_topo_switch_groups(root, nics, nn, group) == 4);
    for (int r = 0; r < 8; r++) {
        k = efax_topo_host_nics(root, nics, nn, -1, r, 8, out, EFAX_MAX_NICS, NULL, 0);
        if (k != 1 || out[0] != 2 * (r % 4) + r / 4) {
            fprintf(stderr, "  p6-b200 local rank %d of 8: %d NICs, first %d (expected NIC %d alone)\n", r, k,
                    k ? out[0] : -1, 2 * (r % 4) + r / 4);
            failures++;
        }
    }
    CHECK(efax_topo_host_nics(root, nics, nn, -1, 3, 4, out, EFAX_MAX_NICS, NULL, 0) == 2 && out[0] == 6);
    /* 6 ranks: groups 0 and 1 have two ranks each (one NIC each), groups 2 and 3 one (both NICs) */
    CHECK(efax_topo_host_nics(root, nics, nn, -1, 5, 6, out, EFAX_MAX_NICS, NULL, 0) == 1 && out[0] == 3);
    CHECK(efax_topo_host_nics(root, nics, nn, -1, 2, 6, out, EFAX_MAX_NICS, NULL, 0) == 2 && out[0] == 4);
    /* p4d again: a NIC whose path the tree lacks is in no group */
    snprintf(root, sizeof root, "%s/topo/p4d", here[0] ? here : ".");
    nn = read_list(root, "nics", nicpci, 32);
    memset(nics, 0, sizeof nics);
    for (int i = 0; i < nn; i++) {
        memcpy(nics[i].pci, nicpci[i], sizeof nics[i].pci);
        nics[i].numa = efax_topo_pci_numa(root, nicpci[i]);
    }
    snprintf(nics[1].pci, sizeof nics[1].pci, "0000:ff:00.0");
    CHECK(efax_topo_switch_groups(root, nics, nn, group) == 3 && group[1] == -1 && group[0] == 0 &&
          group[2] == 1);
}

/* The connect fingerprint: what makes efa emulate writes between two ranks is refused, naming both;
   the rest is flagged. Every rank compares with rank 0, so all reach one verdict. */
static void test_fingerprint(void) {
    efax__fp a, b;
    char why[512], note[256];
    memset(&a, 0, sizeof a);
    a.fi_version = FI_VERSION(2, 6), a.prov = EFAX_PROV_EFA, a.hmem = 1, a.gpudirect = 1,
    a.emulated_write = 0;
    a.unsolicited_write_recv = 1, a.max_write = 1u << 30;
    b = a;
    note[0] = 0;
    CHECK(efax__fp_compare(&a, 0, "h0", &b, 1, "h1", why, sizeof why, note, sizeof note) == 0 && !note[0]);
    b.emulated_write = 1;
    CHECK(efax__fp_compare(&a, 0, "h0", &b, 1, "h1", why, sizeof why, note, sizeof note) == -EFAX_E_MISMATCH);
    CHECK(strstr(why, "rank 1 (h1) emulates RDMA writes") && strstr(why, "rank 0 (h0) does not"));
    b.emulated_write = -1; /* a rank that cannot say is not one that emulates */
    CHECK(efax__fp_compare(&a, 0, "h0", &b, 1, "h1", why, sizeof why, note, sizeof note) == 0);
    a.emulated_write = 1;
    CHECK(efax__fp_compare(&a, 0, "h0", &b, 1, "h1", why, sizeof why, note, sizeof note) ==
              -EFAX_E_MISMATCH &&
          strstr(why, "rank 0 (h0) emulates") && strstr(why, "cannot say"));
    b = a;
    b.unsolicited_write_recv = 0;
    CHECK(efax__fp_compare(&a, 0, "h0", &b, 3, "h3", why, sizeof why, note, sizeof note) ==
              -EFAX_E_MISMATCH &&
          strstr(why, "rank 0 (h0) set efa's unsolicited write recv on and rank 3 (h3) off"));
    b.unsolicited_write_recv = -1; /* libfabric < 2.5 could not set it: flagged */
    note[0] = 0;
    CHECK(efax__fp_compare(&a, 0, "h0", &b, 3, "h3", why, sizeof why, note, sizeof note) == 0 &&
          strstr(note, "rank 3 could not set"));
    b = a;
    b.fi_version = FI_VERSION(1, 22), b.gpudirect = 0, b.hmem = 0;
    note[0] = 0;
    CHECK(efax__fp_compare(&a, 0, "h0", &b, 2, "h2", why, sizeof why, note, sizeof note) == 0);
    CHECK(strstr(note, "rank 2 runs libfabric 1.22, rank 0 2.6") && strstr(note, "rank 2 lacks FI_HMEM") &&
          strstr(note, "rank 2 GPUDirect NO, rank 0 yes"));
    /* tcp and shm: every efa field -1, nothing to say */
    memset(&a, 0, sizeof a);
    a.fi_version = FI_VERSION(1, 17), a.prov = EFAX_PROV_TCP,
    a.gpudirect = a.emulated_write = a.unsolicited_write_recv = -1;
    b = a;
    note[0] = 0;
    CHECK(efax__fp_compare(&a, 0, "h0", &b, 1, "h1", why, sizeof why, note, sizeof note) == 0 && !note[0]);
    b.fi_version = FI_VERSION(2, 6); /* another major version: refused; another minor: flagged */
    CHECK(efax__fp_compare(&a, 0, "h0", &b, 1, "h1", why, sizeof why, note, sizeof note) ==
              -EFAX_E_MISMATCH &&
          strstr(why, "rank 0 (h0) runs libfabric 1.17 and rank 1 (h1) 2.6"));
    b.fi_version = FI_VERSION(1, 18);
    CHECK(efax__fp_compare(&a, 0, "h0", &b, 1, "h1", why, sizeof why, note, sizeof note) == 0 &&
          strstr(note, "rank 1 runs libfabric 1.18, rank 0 1.17"));
    /* the provider's kind comes from its name in one place */
    CHECK(efax__prov_of("efa") == EFAX_PROV_EFA && efax__prov_of("tcp;ofi_rxm") == EFAX_PROV_TCP);
    CHECK(efax__prov_of("shm") == EFAX_PROV_SHM && efax__prov_of("sockets") == EFAX_PROV_OTHER &&
          efax__prov_of(NULL) == EFAX_PROV_OTHER);
    CHECK(efax__prov_of("efax") == EFAX_PROV_OTHER && efax__prov_of("ofi_rxm;tcp") == EFAX_PROV_OTHER);
}

/* fi_mr(3): a dmabuf region's address is base_addr + offset, base_addr the dmabuf's start. */
static void test_dmabuf(void) {
#ifdef FI_MR_DMABUF
    static char buf[1 << 16];
    struct fi_mr_dmabuf db;
    efax__dmabuf_fill(&db, 7, 4096, 1000, buf + 4096);
    CHECK(db.fd == 7 && db.offset == 4096 && db.len == 1000 && (char *)db.base_addr == buf);
    CHECK((char *)db.base_addr + db.offset == buf + 4096);
    efax__dmabuf_fill(&db, 7, 0, 1000, buf);
    CHECK((char *)db.base_addr == buf && db.offset == 0);
#else
    printf("  (libfabric %d.%d has no FI_MR_DMABUF: nothing to fill)\n", FI_MAJOR_VERSION, FI_MINOR_VERSION);
#endif
}

typedef struct {
    const char *name;
    void (*fn)(void);
} test;
static const test tests[] = {{"sizes", test_sizes},
                             {"options", test_options},
                             {"iters", test_iters},
                             {"imm", test_imm},
                             {"stage-unit", test_stage_unit},
                             {"plan", test_plan},
                             {"pattern", test_pattern},
                             {"stats", test_stats},
                             {"errors", test_errors},
                             {"peer_data", test_peer_data},
                             {"matching", test_matching},
                             {"hints", test_hints},
                             {"chunk", test_chunk},
                             {"topology", test_topology},
                             {"host_nics", test_host_nics},
                             {"fingerprint", test_fingerprint},
                             {"dmabuf", test_dmabuf},
                             {"counters", test_counters},
                             {"faults", test_faults},
                             {"cq_size", test_cq_size},
                             {"efa_devices", test_efa_devices}};

int main(int argc, char **argv) {
    unsigned i;
    if (argc > 1 && !strcmp(argv[1], "--list")) {
        for (i = 0; i < sizeof tests / sizeof tests[0]; i++) printf("%s\n", tests[i].name);
        return 0;
    }
    if (argc > 2 && !strcmp(argv[1], "json")) {
        test_json(argv[2]);
        return failures ? 1 : 0;
    }
    for (i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (argc > 1 && strcmp(argv[1], tests[i].name)) continue;
        int before = failures;
        tests[i].fn();
        printf("%s %s\n", failures == before ? "PASS" : "FAIL", tests[i].name);
    }
    return failures ? 1 : 0;
}
