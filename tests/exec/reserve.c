/* Reserve-then-commit memory, as V8 and the JVM manage their heaps,
 * checked against a model of what the kernel guarantees: each thread
 * reserves a range (PROT_NONE, MAP_NORESERVE) and runs random operations
 * on parts of it: commits (mprotect, or a fixed mmap over the
 * reservation), decommits (mprotect PROT_NONE and MADV_DONTNEED, or a
 * fixed PROT_NONE mmap), read-only and executable protections, writes, a
 * file mapped at a fixed address over it and replaced again, checks of
 * every readable page, and probes that a PROT_NONE page faults (SIGSEGV).
 * A spill buffer pushes pages out of memory under a small --ram.
 * For `ccvm exec`'s tests; prints one line per thread and exits 1 on any
 * difference from the model.
 *
 * usage: reserve THREADS MIB_PER_THREAD OPS SEED
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096
enum { NONE, RO, RX, RW };

static size_t pages_per_thread, ops;
static uint64_t seed;
static int file_fd;
static unsigned char *spill;
static size_t spill_len;
static __thread sigjmp_buf probe_jmp;
static __thread volatile int probing;

static void on_segv(int sig, siginfo_t *si, void *ctx) {
    (void)si; (void)ctx;
    if (probing) siglongjmp(probe_jmp, 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

static uint64_t next(uint64_t *s) {
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}

/* Word i of page p holding value v (v = 0: a zero page). */
static uint64_t word(uint64_t v, size_t p, size_t i) {
    return v == 0 ? 0 : v ^ (p * 0x9e3779b97f4a7c15ull) ^ i;
}

/* The file's pages hold this value (page p of the file at offset p). */
static uint64_t file_value(size_t p) { return 0x5151000000000000ull | p; }

struct thread {
    int id;
    unsigned char *base;
    uint64_t *value; /* per page: what it holds */
    unsigned char *prot;
    unsigned char *filed; /* per page: holds the file's page, not a value of ours */
    unsigned char *file_vma; /* per page: mapped from the file (DONTNEED reads the file again) */
    size_t errors, checked, probed;
    uint64_t sum;
};

static void fill(struct thread *t, size_t p, uint64_t v) {
    uint64_t *w = (uint64_t *)(t->base + p * PAGE);
    for (size_t i = 0; i < PAGE / 8; i++) w[i] = word(v, p, i);
    t->value[p] = v;
    t->filed[p] = 0;
}

static void check(struct thread *t, size_t p) {
    const uint64_t *w = (const uint64_t *)(t->base + p * PAGE);
    for (size_t i = 0; i < PAGE / 8; i++) {
        uint64_t want = t->filed[p] ? (i == 0 ? file_value(t->value[p]) : 0) : word(t->value[p], p, i);
        if (w[i] != want) {
            if (t->errors++ < 5)
                fprintf(stderr, "thread %d page %zu word %zu: %#lx, want %#lx (prot %d)\n", t->id, p, i,
                        (unsigned long)w[i], (unsigned long)want, t->prot[p]);
            break;
        }
    }
    t->sum += w[0] + w[PAGE / 8 - 1];
    t->checked++;
}

static int prot_of(int m) {
    return m == RW ? PROT_READ | PROT_WRITE : m == RO ? PROT_READ : m == RX ? PROT_READ | PROT_EXEC : PROT_NONE;
}

static void *run(void *arg) {
    struct thread *t = arg;
    size_t n = pages_per_thread;
    uint64_t s = seed * 1000003 + (uint64_t)t->id + 1;
    t->base = mmap(NULL, n * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t->base == MAP_FAILED) { perror("mmap"); exit(2); }
    t->value = calloc(n, sizeof *t->value);
    t->prot = calloc(n, 1);
    t->filed = calloc(n, 1);
    t->file_vma = calloc(n, 1);
    for (size_t op = 0; op < ops; op++) {
        size_t a = next(&s) % n, len = 1 + next(&s) % 64;
        if (a + len > n) len = n - a;
        unsigned char *at = t->base + a * PAGE;
        switch (next(&s) % 12) {
        case 0: case 1: /* commit by mprotect: contents kept */
            if (mprotect(at, len * PAGE, PROT_READ | PROT_WRITE)) { perror("mprotect"); exit(2); }
            memset(t->prot + a, RW, len);
            break;
        case 2: /* commit by a fixed mapping: zeros */
            if (mmap(at, len * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != at) {
                perror("mmap fixed"); exit(2);
            }
            for (size_t p = a; p < a + len; p++) { t->value[p] = 0; t->filed[p] = t->file_vma[p] = 0; t->prot[p] = RW; }
            break;
        case 3: /* decommit as V8 does: protect, then drop */
            if (mprotect(at, len * PAGE, PROT_NONE) || madvise(at, len * PAGE, MADV_DONTNEED)) {
                perror("decommit"); exit(2);
            }
            for (size_t p = a; p < a + len; p++) {
                t->filed[p] = t->file_vma[p];
                t->value[p] = t->file_vma[p] ? p : 0;
                t->prot[p] = NONE;
            }
            break;
        case 4: /* decommit as the JVM does: a fixed reservation over it */
            if (mmap(at, len * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) != at) {
                perror("mmap fixed none"); exit(2);
            }
            for (size_t p = a; p < a + len; p++) { t->value[p] = 0; t->filed[p] = t->file_vma[p] = 0; t->prot[p] = NONE; }
            break;
        case 5: /* read-only or executable */
        {
            int m = next(&s) % 2 ? RO : RX;
            if (mprotect(at, len * PAGE, prot_of(m))) { perror("mprotect ro"); exit(2); }
            memset(t->prot + a, m, len);
            break;
        }
        case 6: case 7: case 8: /* writes */
            for (size_t p = a; p < a + len; p++)
                if (t->prot[p] == RW) fill(t, p, next(&s) | 1);
            break;
        case 9: /* checks */
            for (size_t p = a; p < a + len; p++)
                if (t->prot[p] != NONE) check(t, p);
            break;
        case 10: /* a PROT_NONE page faults */
            for (size_t p = a; p < a + len; p++) {
                if (t->prot[p] != NONE) continue;
                probing = 1;
                if (sigsetjmp(probe_jmp, 1) == 0) {
                    volatile unsigned char c = t->base[p * PAGE];
                    (void)c;
                    probing = 0;
                    if (t->errors++ < 5) fprintf(stderr, "thread %d page %zu: PROT_NONE but readable\n", t->id, p);
                } else {
                    probing = 0;
                    t->probed++;
                }
                break;
            }
            break;
        case 11: /* a file mapped over it, private, at a fixed address */
            if (a + len > 64) break; /* the file has 64 pages; map at most its size */
            if (mmap(at, len * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, file_fd, (off_t)a * PAGE) != at) {
                perror("mmap file"); exit(2);
            }
            for (size_t p = a; p < a + len; p++) { t->value[p] = p; t->filed[p] = t->file_vma[p] = 1; t->prot[p] = RW; }
            break;
        }
        /* Push pages out of memory now and then. */
        if (op % 256 == 0)
            for (size_t i = next(&s) % PAGE; i < spill_len; i += PAGE) spill[i]++;
    }
    for (size_t p = 0; p < n; p++)
        if (t->prot[p] != NONE) check(t, p);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: reserve THREADS MIB_PER_THREAD OPS SEED\n"); return 2; }
    int threads = atoi(argv[1]);
    pages_per_thread = ((size_t)atol(argv[2]) << 20) / PAGE;
    ops = (size_t)atol(argv[3]);
    seed = strtoull(argv[4], NULL, 10);
    struct sigaction sa = { .sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_NODEFER };
    sigaction(SIGSEGV, &sa, NULL);
    char path[] = "/tmp/ccvm-reserve-XXXXXX";
    file_fd = mkstemp(path);
    if (file_fd < 0) { perror("mkstemp"); return 2; }
    unlink(path);
    for (size_t p = 0; p < 64; p++) {
        uint64_t page[PAGE / 8] = { file_value(p) };
        if (pwrite(file_fd, page, PAGE, (off_t)(p * PAGE)) != PAGE) { perror("pwrite"); return 2; }
    }
    spill_len = (size_t)threads * pages_per_thread * PAGE / 2;
    spill = malloc(spill_len);
    memset(spill, 1, spill_len);
    struct thread t[16] = { 0 };
    pthread_t tid[16];
    if (threads < 1 || threads > 16) { fprintf(stderr, "1 to 16 threads\n"); return 2; }
    for (int i = 0; i < threads; i++) { t[i].id = i; pthread_create(&tid[i], NULL, run, &t[i]); }
    size_t errors = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        printf("thread %d: sum %016lx checked %zu probed %zu\n", i, (unsigned long)t[i].sum, t[i].checked,
               t[i].probed);
        errors += t[i].errors;
    }
    printf("errors: %zu\n", errors);
    return errors != 0;
}
