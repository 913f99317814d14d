/* Reserve-then-commit memory, as V8 and the JVM manage their heaps,
 * checked against a model of what the kernel guarantees: each thread
 * reserves a range (PROT_NONE, MAP_NORESERVE) and runs random operations
 * on parts of it: commits (mprotect, or a fixed mmap over the
 * reservation), decommits (mprotect PROT_NONE and MADV_DONTNEED, or a
 * fixed PROT_NONE mmap), read-only and executable protections, writes, a
 * file mapped at a fixed address over it and replaced again, MADV_FREE
 * (a page then reads as before or as zeros), a range unmapped and mapped
 * again, a page moved out with mremap, checks of every readable page,
 * and probes that a PROT_NONE page faults (SIGSEGV). With "raw", the
 * memory calls are inline system calls, not the C library's.
 * A spill buffer pushes pages out of memory under a small --ram.
 * For `ccvm exec`'s tests; prints one line per thread and exits 1 on any
 * difference from the model.
 *
 * usage: reserve THREADS MIB_PER_THREAD OPS SEED [raw]
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
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE 4096
enum { NONE, RO, RX, RW };

static size_t pages_per_thread, ops;
static int raw_calls;
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

static long raw(long nr, long a, long b, long c, long d, long e, long f) {
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}

/* The memory calls, through the C library or inline (raw_calls). */
static int x_mprotect(void *a, size_t len, int prot) {
    if (!raw_calls) return mprotect(a, len, prot);
    return raw(SYS_mprotect, (long)a, (long)len, prot, 0, 0, 0) ? -1 : 0;
}
static int x_madvise(void *a, size_t len, int advice) {
    if (!raw_calls) return madvise(a, len, advice);
    return raw(SYS_madvise, (long)a, (long)len, advice, 0, 0, 0) ? -1 : 0;
}
static int x_munmap(void *a, size_t len) {
    if (!raw_calls) return munmap(a, len);
    return raw(SYS_munmap, (long)a, (long)len, 0, 0, 0, 0) ? -1 : 0;
}
static void *x_mmap(void *a, size_t len, int prot, int flags, int fd, off_t off) {
    if (!raw_calls) return mmap(a, len, prot, flags, fd, off);
    long r = raw(SYS_mmap, (long)a, (long)len, prot, flags, fd, off);
    return r < 0 && r > -4096 ? MAP_FAILED : (void *)r;
}
static void *x_mremap(void *old, size_t old_len, size_t new_len, int flags, void *to) {
    if (!raw_calls) return mremap(old, old_len, new_len, flags, to);
    long r = raw(SYS_mremap, (long)old, (long)old_len, (long)new_len, flags, (long)to, 0);
    return r < 0 && r > -4096 ? MAP_FAILED : (void *)r;
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
    unsigned char *freed; /* per page: MADV_FREE'd since its last write: its value or zeros */
    unsigned char *scratch; /* plain memory outside the heap, where pages are moved to */
    size_t errors, checked, probed;
    uint64_t sum;
};

static void fill(struct thread *t, size_t p, uint64_t v) {
    uint64_t *w = (uint64_t *)(t->base + p * PAGE);
    for (size_t i = 0; i < PAGE / 8; i++) w[i] = word(v, p, i);
    t->value[p] = v;
    t->filed[p] = 0;
    t->freed[p] = 0;
}

static int is_zero(const uint64_t *w) {
    for (size_t i = 0; i < PAGE / 8; i++)
        if (w[i]) return 0;
    return 1;
}

/* Checks page p of the model against the bytes at w (its place, or
 * where it was moved). A freed page may also read as zeros, and then
 * counts nothing in the sum, so that the output does not depend on
 * whether the kernel reclaimed it. */
static void check_at(struct thread *t, size_t p, const uint64_t *w) {
    if (t->freed[p]) {
        if (!is_zero(w)) {
            for (size_t i = 0; i < PAGE / 8; i++)
                if (w[i] != word(t->value[p], p, i)) {
                    if (t->errors++ < 5) fprintf(stderr, "thread %d page %zu: freed, neither old nor zero\n", t->id, p);
                    break;
                }
        }
        t->checked++;
        return;
    }
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

static void check(struct thread *t, size_t p) { check_at(t, p, (const uint64_t *)(t->base + p * PAGE)); }

/* Page p now reads as zeros, read-write (anonymous memory mapped anew). */
static void zeroed(struct thread *t, size_t p) {
    t->value[p] = 0;
    t->filed[p] = t->file_vma[p] = t->freed[p] = 0;
    t->prot[p] = RW;
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
    t->freed = calloc(n, 1);
    /* Outside the heap whatever the mode: an inline call is never paged. */
    t->scratch = (unsigned char *)raw(SYS_mmap, 0, 64 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if ((long)t->scratch < 0) { fprintf(stderr, "scratch mmap failed\n"); exit(2); }
    for (size_t op = 0; op < ops; op++) {
        size_t a = next(&s) % n, len = 1 + next(&s) % 64;
        if (a + len > n) len = n - a;
        unsigned char *at = t->base + a * PAGE;
        switch (next(&s) % 15) {
        case 0: case 1: /* commit by mprotect: contents kept */
            if (x_mprotect(at, len * PAGE, PROT_READ | PROT_WRITE)) { perror("mprotect"); exit(2); }
            memset(t->prot + a, RW, len);
            break;
        case 2: /* commit by a fixed mapping: zeros */
            if (x_mmap(at, len * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != at) {
                perror("mmap fixed"); exit(2);
            }
            for (size_t p = a; p < a + len; p++) zeroed(t, p);
            break;
        case 3: /* decommit as V8 does: protect, then drop */
            if (x_mprotect(at, len * PAGE, PROT_NONE) || x_madvise(at, len * PAGE, MADV_DONTNEED)) {
                perror("decommit"); exit(2);
            }
            for (size_t p = a; p < a + len; p++) {
                t->filed[p] = t->file_vma[p];
                t->value[p] = t->file_vma[p] ? p : 0;
                t->prot[p] = NONE;
                t->freed[p] = 0;
            }
            break;
        case 4: /* decommit as the JVM does: a fixed reservation over it */
            if (x_mmap(at, len * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) != at) {
                perror("mmap fixed none"); exit(2);
            }
            for (size_t p = a; p < a + len; p++) { zeroed(t, p); t->prot[p] = NONE; }
            break;
        case 5: /* read-only or executable */
        {
            int m = next(&s) % 2 ? RO : RX;
            if (x_mprotect(at, len * PAGE, prot_of(m))) { perror("mprotect ro"); exit(2); }
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
            if (x_mmap(at, len * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, file_fd, (off_t)a * PAGE) != at) {
                perror("mmap file"); exit(2);
            }
            for (size_t p = a; p < a + len; p++) {
                t->value[p] = p; t->filed[p] = t->file_vma[p] = 1; t->prot[p] = RW; t->freed[p] = 0;
            }
            break;
        case 12: /* MADV_FREE on anonymous pages: each reads as before or as zeros until written */
        {
            int anonymous = 1;
            for (size_t p = a; p < a + len; p++) anonymous = anonymous && !t->file_vma[p];
            if (!anonymous) break;
            if (x_madvise(at, len * PAGE, MADV_FREE)) { perror("madvise free"); exit(2); }
            for (size_t p = a; p < a + len; p++)
                if (t->value[p] && !t->filed[p]) t->freed[p] = 1;
            break;
        }
        case 13: /* part of the reservation unmapped, then mapped again: zeros */
            if (x_munmap(at, len * PAGE)) { perror("munmap"); exit(2); }
            if (x_mmap(at, len * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != at) {
                perror("mmap after munmap"); exit(2);
            }
            for (size_t p = a; p < a + len; p++) zeroed(t, p);
            break;
        case 14: /* one anonymous read-write page moved out with mremap: it takes its bytes */
        {
            if (t->prot[a] != RW || t->file_vma[a]) break;
            unsigned char *to = t->scratch + (next(&s) % 64) * PAGE;
            if (x_mremap(at, PAGE, PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, to) != to) { perror("mremap"); exit(2); }
            check_at(t, a, (const uint64_t *)to);
            if (x_mmap(at, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != at) {
                perror("mmap after mremap"); exit(2);
            }
            zeroed(t, a);
            break;
        }
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
    if (argc < 5) { fprintf(stderr, "usage: reserve THREADS MIB_PER_THREAD OPS SEED [raw]\n"); return 2; }
    raw_calls = argc > 5 && strcmp(argv[5], "raw") == 0;
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
