/* Memory calls made without the C library (inline system calls, as some
 * runtimes and libraries make them) on heap pages that left memory behave
 * as the kernel's: a range made read-only or inaccessible and back keeps
 * its bytes, a dropped range reads as zeros, a range unmapped and mapped
 * again is fresh zeros, and a range moved with mremap takes its bytes with
 * it. For `ccvm exec`'s tests: under a small --ram every check runs on
 * pages that were evicted first.
 *
 * usage: rawcalls MIB
 * Prints one line per check with its wrong bytes, then "ok" or "BAD". */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

static long raw(long nr, long a, long b, long c, long d, long e) {
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    return ret;
}

static unsigned char pattern(size_t i) { return (unsigned char)(i * 7 + 1); }

/* Touches a buffer as large as the heap, to push the heap out of memory. */
static void spill(size_t n) {
    unsigned char *s = malloc(n);
    for (size_t i = 0; i < n; i += 64) s[i] = (unsigned char)i;
    free(s);
}

static size_t wrong_pattern(const unsigned char *p, size_t from, size_t len) {
    size_t bad = 0;
    for (size_t i = 0; i < len; i++) bad += p[i] != pattern(from + i);
    return bad;
}

static size_t not_zero(const unsigned char *p, size_t len) {
    size_t bad = 0;
    for (size_t i = 0; i < len; i++) bad += p[i] != 0;
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: rawcalls MIB\n"); return 2; }
    size_t n = (size_t)atol(argv[1]) << 20, q = n / 8;
    unsigned char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) { perror("mmap"); return 2; }
    for (size_t i = 0; i < n; i++) m[i] = pattern(i);
    spill(n);
    size_t bad[6] = {0};
    long r[6] = {0};

    /* 1: read-only, read, writable again, written. */
    r[0] = raw(SYS_mprotect, (long)m, q, PROT_READ, 0, 0);
    bad[0] += wrong_pattern(m, 0, q);
    r[0] |= raw(SYS_mprotect, (long)m, q, PROT_READ | PROT_WRITE, 0, 0);
    for (size_t i = 0; i < q; i += 4096) m[i] = pattern(i);
    spill(n);
    bad[0] += wrong_pattern(m, 0, q);

    /* 2: inaccessible while the rest is paged, then back. */
    r[1] = raw(SYS_mprotect, (long)(m + q), q, PROT_NONE, 0, 0);
    spill(n);
    for (size_t i = 3 * q; i < n; i += 4096) m[i] = pattern(i);
    spill(n);
    r[1] |= raw(SYS_mprotect, (long)(m + q), q, PROT_READ | PROT_WRITE, 0, 0);
    bad[1] = wrong_pattern(m + q, q, q);

    /* 3: dropped: zeros. */
    r[2] = raw(SYS_madvise, (long)(m + 2 * q), q, MADV_DONTNEED, 0, 0);
    bad[2] = not_zero(m + 2 * q, q);

    /* 4: unmapped while the rest is paged, mapped again: fresh zeros. */
    r[3] = raw(SYS_munmap, (long)(m + 3 * q), q, 0, 0, 0);
    spill(n);
    for (size_t i = 4 * q; i < n; i += 4096) m[i] = pattern(i);
    spill(n);
    long back = raw(SYS_mmap, (long)(m + 3 * q), q, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1);
    r[3] |= back != (long)(m + 3 * q);
    bad[3] = not_zero(m + 3 * q, q);

    /* 5: moved elsewhere with mremap: the bytes go with it. */
    long to = raw(SYS_mmap, 0, 2 * q, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
    long moved = raw(SYS_mremap, (long)(m + 4 * q), q, q, MREMAP_MAYMOVE | MREMAP_FIXED, to);
    r[4] = moved != to;
    spill(n);
    if (moved == to) bad[4] = wrong_pattern((unsigned char *)to, 4 * q, q);

    /* 6: the pages never named keep theirs. */
    bad[5] = wrong_pattern(m + 5 * q, 5 * q, 3 * q);

    const char *what[6] = {"read-only and back", "inaccessible and back", "dropped",
                           "unmapped and mapped again", "moved", "untouched"};
    int ok = 1;
    for (int i = 0; i < 6; i++) {
        printf("%s: %zu wrong bytes%s\n", what[i], bad[i], r[i] ? " (a call failed)" : "");
        ok = ok && bad[i] == 0 && r[i] == 0;
    }
    printf("%s\n", ok ? "ok" : "BAD");
    return !ok;
}
