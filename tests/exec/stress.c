/* A program that does to its heap what real programs do, for `ccvm exec`'s
 * tests: many malloc'd blocks and large reallocs, calloc, aligned blocks,
 * anonymous mmap/munmap/mremap, threads, fork, exec, a read(2) into heap
 * memory that is not resident, and exit from a thread. Every result is
 * printed, so a paged run must print exactly what an unpaged run does.
 *
 * usage: stress MIB            (the whole sequence over MIB MiB of heap)
 *        stress exec-child MIB (what the exec'd program does)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rng_state;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void fill(void *p, size_t n, uint64_t seed) {
    unsigned char *b = p;
    /* Half words of a small range, half text-like: compressible, not trivially. */
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)((seed + i * 7 + (i >> 9)) % 61);
}

static int check(const void *p, size_t n, uint64_t seed) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != (unsigned char)((seed + i * 7 + (i >> 9)) % 61)) return 0;
    return 1;
}

struct block { unsigned char *p; size_t n; uint64_t seed; };

/* How a churn of blocks goes: per MiB asked for, how many blocks and rounds
 * of changes a block; the sizes of the first blocks, of those that replace
 * them and of reallocs (one in `big_one_in` of which, when set, up to
 * `big_span`); whether every third first block is calloc'd. */
struct shape {
    size_t per_mib, rounds, first_min, first_span, new_span, realloc_span, big_span, big_one_in;
    int zeroed;
};

/* Many blocks (large ones; see `small_shape` for the heap's size classes):
 * filled, some freed and reallocated, all checked to hold their bytes, be
 * aligned to 16, be at least as long as asked, and, when calloc'd, zero. */
static const struct shape large_shape = {64, 1, 16, 32768, 65536, 65536, 0, 0, 0};
/* Small blocks, the heap's size classes: many objects of at most a few
 * hundred bytes, freed and reallocated within and across classes and out
 * of them. */
static const struct shape small_shape = {2048, 3, 1, 520, 600, 600, 9000, 32, 1};

static uint64_t churn(const char *name, const struct shape *s, size_t mib, uint64_t seed) {
    rng_state = seed * 2654435761u + 1;
    size_t count = mib * s->per_mib, bad = 0;
    struct block *b = calloc(count, sizeof *b);
    for (size_t i = 0; i < count; i++) {
        size_t n = s->first_min + rnd() % s->first_span;
        int zero = s->zeroed && i % 3 == 0;
        b[i].p = zero ? calloc(1, n) : malloc(n); b[i].n = n; b[i].seed = rnd();
        if (zero) for (size_t k = 0; k < n; k++) if (b[i].p[k]) { bad++; break; }
        if ((uintptr_t)b[i].p % 16 || malloc_usable_size(b[i].p) < n) bad++;
        fill(b[i].p, n, b[i].seed);
    }
    for (size_t round = 0; round < s->rounds * count; round++) {
        size_t i = rnd() % count;
        switch (rnd() % 4) {
        case 0: free(b[i].p); b[i].n = 1 + rnd() % s->new_span; b[i].p = malloc(b[i].n); b[i].seed = rnd(); fill(b[i].p, b[i].n, b[i].seed); break;
        case 1: { int big = s->big_one_in && rnd() % s->big_one_in == 0;
                  size_t n = 1 + rnd() % (big ? s->big_span : s->realloc_span); unsigned char *q = realloc(b[i].p, n);
                  if (!check(q, n < b[i].n ? n : b[i].n, b[i].seed) || (uintptr_t)q % 16) bad++;
                  b[i].p = q; b[i].n = n; fill(q, n, b[i].seed); break; }
        default: if (!check(b[i].p, b[i].n, b[i].seed)) bad++;
        }
    }
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < count; i++) {
        if (!check(b[i].p, b[i].n, b[i].seed)) bad++;
        h = fnv(h, b[i].p, b[i].n);
    }
    for (size_t i = 0; i < count; i++) free(b[i].p);
    free(b);
    printf("%s: %zu bad, hash %016llx\n", name, bad, (unsigned long long)h);
    return h;
}

static uint64_t blocks(size_t mib, uint64_t seed) { return churn("blocks", &large_shape, mib, seed); }

/* Large reallocs up and down, calloc zeroes, aligned blocks, usable sizes. */
static void big(size_t mib) {
    size_t n = mib << 19, bad = 0;
    unsigned char *p = malloc(n);
    fill(p, n, 5);
    for (int k = 0; k < 3; k++) {
        p = realloc(p, n * 2); if (!check(p, n, 5)) bad++; fill(p, n * 2, 5);
        p = realloc(p, n / 2); if (!check(p, n / 2, 5)) bad++;
        p = realloc(p, n); fill(p, n, 5);
    }
    free(p);
    for (int k = 0; k < 8; k++) {
        size_t m = (size_t)1 << (12 + k);
        unsigned char *z = calloc(m, 3);
        for (size_t i = 0; i < m * 3; i++) if (z[i]) { bad++; break; }
        memset(z, 0xab, m * 3);
        free(z);
        void *a = NULL;
        if (posix_memalign(&a, 64 << k, m) || ((uintptr_t)a & ((64u << k) - 1))) bad++;
        if (malloc_usable_size(a) < m) bad++;
        free(a);
        void *c = aligned_alloc(4096, m);
        if ((uintptr_t)c & 4095) bad++;
        free(c);
    }
    printf("big: %zu bad\n", bad);
}

/* Anonymous mappings: zeroed, grown with mremap, unmapped. */
static void mappings(size_t mib) {
    size_t n = mib << 18, bad = 0;
    unsigned char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) { printf("mmap failed\n"); return; }
    for (size_t i = 0; i < n; i += 4096) if (m[i]) bad++;
    fill(m, n, 9);
    unsigned char *g = mremap(m, n, n * 3, MREMAP_MAYMOVE);
    if (g == MAP_FAILED) { printf("mremap failed\n"); return; }
    if (!check(g, n, 9)) bad++;
    for (size_t i = n; i < n * 3; i += 4096) if (g[i]) bad++;
    fill(g, n * 3, 9);
    if (!check(g, n * 3, 9)) bad++;
    if (munmap(g, n * 3)) bad++;
    /* Unmapped piecewise, as GCC's collector does: the pages left keep
     * their contents until they go too. */
    size_t pages = 64;
    unsigned char *q = mmap(NULL, pages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (size_t k = 0; k < pages; k += 8) fill(q + k * 4096, 8 * 4096, 13 + k);
    for (size_t k = 8; k < pages; k += 16) {
        if (munmap(q + k * 4096, 8 * 4096)) bad++;
        unsigned char *r = malloc(8 * 4096); /* may reuse freed memory, never q's */
        fill(r, 8 * 4096, 14);
        for (size_t j = 0; j < k; j += 16)
            if (!check(q + j * 4096, 8 * 4096, 13 + j)) bad++;
        free(r);
    }
    for (size_t k = 0; k < pages; k += 16)
        if (munmap(q + k * 4096, 8 * 4096)) bad++;
    /* A reservation committed in part (as a JVM's heap), paged, and
     * shared memory: the kernel's, unpaged, and reported as such. */
    size_t rn = 64 << 20;
    unsigned char *res = mmap(NULL, rn, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (res == MAP_FAILED || mprotect(res, 1 << 20, PROT_READ | PROT_WRITE)) bad++;
    else { fill(res, 1 << 20, 15); if (!check(res, 1 << 20, 15)) bad++; munmap(res, rn); }
    unsigned char *sh = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) bad++;
    else { fill(sh, 1 << 20, 16); if (!check(sh, 1 << 20, 16)) bad++; munmap(sh, 1 << 20); }
    printf("mappings: %zu bad\n", bad);
}

/* Threads filling and checking their own blocks and a shared one. */
static unsigned char *shared;
static size_t shared_n;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *worker(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    size_t n = shared_n, bad = 0;
    unsigned char *own = malloc(n);
    for (int round = 0; round < 3; round++) {
        fill(own, n, id * 100 + round);
        pthread_mutex_lock(&lock);
        for (size_t i = id; i < shared_n; i += 4) shared[i] = (unsigned char)(shared[i] + id + 1);
        pthread_mutex_unlock(&lock);
        if (!check(own, n, id * 100 + round)) bad++;
    }
    free(own);
    return (void *)bad;
}
static void threads(size_t mib) {
    shared_n = mib << 18;
    shared = calloc(shared_n, 1);
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    size_t bad = 0;
    for (int i = 0; i < 4; i++) { void *r; pthread_join(t[i], &r); bad += (size_t)r; }
    for (size_t i = 0; i < shared_n; i++) if (shared[i] != (unsigned char)(3 * (i % 4 + 1))) { bad++; break; }
    printf("threads: %zu bad, shared hash %016llx\n", bad, (unsigned long long)fnv(14695981039346656037ull, shared, shared_n));
    free(shared);
}

/* The child of a fork sees the parent's heap as it was. */
static void forks(size_t mib) {
    size_t n = mib << 19;
    unsigned char *p = malloc(n);
    fill(p, n, 77);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int ok = check(p, n, 77);
        unsigned char *q = malloc(n / 4);
        fill(q, n / 4, 3);
        ok = ok && check(q, n / 4, 3);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    fill(p, n, 78);
    printf("fork: child %s, parent %s\n", WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "ok" : "BAD",
           check(p, n, 78) ? "ok" : "BAD");
    free(p);
}

/* A read(2) into heap memory that has long left RAM. */
static void reads(size_t mib) {
    size_t n = 1 << 20, bad = 0;
    unsigned char *buf = malloc(n);
    fill(buf, n, 1);
    blocks(mib / 2 + 1, 11); /* pushes buf out */
    char path[] = "/tmp/ccvm-stress-XXXXXX";
    int fd = mkstemp(path);
    unsigned char *src = malloc(n);
    fill(src, n, 42);
    if (write(fd, src, n) != (ssize_t)n) bad++;
    lseek(fd, 0, SEEK_SET);
    if (read(fd, buf, n) != (ssize_t)n) bad++;
    if (!check(buf, n, 42)) bad++;
    close(fd);
    unlink(path);
    free(src);
    free(buf);
    printf("read: %zu bad\n", bad);
}

static void exec_self(const char *self, size_t mib) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char arg[32];
        snprintf(arg, sizeof arg, "%zu", mib);
        execl(self, self, "exec-child", arg, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("exec: child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static void *exiter(void *arg) {
    (void)arg;
    printf("exit from a thread\n");
    exit(0);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: stress MIB | stress exec-child MIB\n"); return 2; }
    if (!strcmp(argv[1], "exec-child")) {
        size_t mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 4;
        blocks(mib, 99);
        return 5;
    }
    size_t mib = strtoul(argv[1], NULL, 10);
    blocks(mib, 1);
    churn("small blocks", &small_shape, mib, 3);
    big(mib);
    mappings(mib);
    threads(mib);
    forks(mib);
    reads(mib);
    exec_self(argv[0], mib / 2 + 1);
    pthread_t t;
    pthread_create(&t, NULL, exiter, NULL);
    for (;;) pause();
}
