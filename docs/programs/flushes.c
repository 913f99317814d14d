/* What a page's trip in or out of a page table costs when another thread
 * of the process runs on another CPU: UFFDIO_MOVE, UFFDIO_COPY,
 * MADV_DONTNEED one page a call or 32 in one process_madvise, and 32
 * spliced into a pipe, dropped in one process_madvise and read back (the
 * pager's batched evictions). Used by docs/results.md, "Frames moved while
 * other threads run" and "Evictions that leave together".
 *
 *   cc -O2 -pthread docs/programs/flushes.c -o /tmp/flushes
 *   /tmp/flushes 1; /tmp/flushes 2      (threads: 1, or 2 with one spinning on CPU 1)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1ULL << 16)
struct uffdio_move { unsigned long long dst, src, len, mode; long long move; };
#define UFFDIO_MOVE _IOWR(0xAA, 0x05, struct uffdio_move)
#endif

enum { PAGES = 4096, ROUNDS = 20, BATCH = 32 };
static volatile int stop;

static void pin(int cpu) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); sched_setaffinity(0, sizeof s, &s); }
static void *spin(void *unused) { (void)unused; pin(1); while (!stop) __asm__ volatile("pause"); return 0; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void die(const char *what) { perror(what); exit(1); }

static void fill(char *m) { for (long i = 0; i < PAGES; i++) m[i * 4096] = 1; }

/* A region of PAGES small pages, filled first if `full`, then registered
 * with `uffd` (if any) for missing pages: a touch of a missing page would
 * wait for a handler this program does not run. */
static char *region(int uffd, int full) {
  char *m = mmap(0, PAGES * 4096L, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) die("mmap");
  madvise(m, PAGES * 4096L, MADV_NOHUGEPAGE);
  if (full) fill(m);
  if (uffd >= 0) {
    struct uffdio_register r = {.range = {(unsigned long)m, PAGES * 4096L}, .mode = UFFDIO_REGISTER_MODE_MISSING};
    if (ioctl(uffd, UFFDIO_REGISTER, &r)) die("register");
  }
  return m;
}

/* Frees every page of m: one madvise a page, or BATCH a process_madvise. */
static void drop(char *m, int pidfd, int batched) {
  for (long i = 0; i < PAGES; i += BATCH) {
    struct iovec v[BATCH];
    for (int k = 0; k < BATCH; k++) { v[k].iov_base = m + (i + k) * 4096; v[k].iov_len = 4096; }
    if (batched) { if (syscall(SYS_process_madvise, pidfd, v, BATCH, MADV_DONTNEED, 0) < 0) die("process_madvise"); }
    else for (int k = 0; k < BATCH; k++) madvise(v[k].iov_base, 4096, MADV_DONTNEED);
  }
}

/* Takes every page of m out as the pager's batched evictions do: BATCH at
 * a time spliced into the pipe, dropped with one process_madvise, and read
 * back into `back`. */
static void splice_out(char *m, int pidfd, const int *pipefd, char *back) {
  for (long i = 0; i < PAGES; i += BATCH) {
    struct iovec v[BATCH];
    for (int k = 0; k < BATCH; k++) { v[k].iov_base = m + (i + k) * 4096; v[k].iov_len = 4096; }
    if (vmsplice(pipefd[1], v, BATCH, 0) != BATCH * 4096L) die("vmsplice");
    if (syscall(SYS_process_madvise, pidfd, v, BATCH, MADV_DONTNEED, 0) < 0) die("process_madvise");
    for (long got = 0; got < BATCH * 4096L;) {
      ssize_t n = read(pipefd[0], back + got, BATCH * 4096L - got);
      if (n <= 0) die("read");
      got += n;
    }
  }
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  pin(0);
  pthread_t other;
  if (threads > 1) pthread_create(&other, 0, spin, 0);
  int uffd = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
  struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_MOVE};
  if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api)) die("userfaultfd");
  int pidfd = syscall(SYS_pidfd_open, getpid(), 0);
  char *a = region(uffd, 1), *b = region(uffd, 0), *plain = region(-1, 0);
  char *buf = aligned_alloc(4096, 4096);
  memset(buf, 7, 4096);
  int pipefd[2];
  if (pipe(pipefd) || fcntl(pipefd[1], F_SETPIPE_SZ, BATCH * 4096) < BATCH * 4096) die("pipe");
  char *back = aligned_alloc(4096, BATCH * 4096L);
  double move = 0, copy = 0, each = 0, batch = 0, spliced = 0;
  for (int r = 0; r < ROUNDS; r++) {
    char *src = r % 2 ? b : a, *dst = r % 2 ? a : b;
    double t = now();
    for (long i = 0; i < PAGES; i++) {
      struct uffdio_move mv = {.dst = (unsigned long)(dst + i * 4096), .src = (unsigned long)(src + i * 4096), .len = 4096};
      if (ioctl(uffd, UFFDIO_MOVE, &mv)) die("UFFDIO_MOVE");
    }
    move += now() - t;
  }
  drop(a, pidfd, 1);
  drop(b, pidfd, 1);
  for (int r = 0; r < ROUNDS; r++) {
    double t = now();
    for (long i = 0; i < PAGES; i++) {
      struct uffdio_copy c = {.dst = (unsigned long)(b + i * 4096), .src = (unsigned long)buf, .len = 4096};
      if (ioctl(uffd, UFFDIO_COPY, &c)) die("UFFDIO_COPY");
    }
    copy += now() - t;
    drop(b, pidfd, 1);
    fill(plain);
    t = now();
    drop(plain, pidfd, 0);
    each += now() - t;
    fill(plain);
    t = now();
    drop(plain, pidfd, 1);
    batch += now() - t;
    fill(plain);
    t = now();
    splice_out(plain, pidfd, pipefd, back);
    spliced += now() - t;
  }
  stop = 1;
  double per = 1e6 / ((double)PAGES * ROUNDS);
  printf("%d thread%s: UFFDIO_MOVE %.2f us a page, UFFDIO_COPY %.2f, MADV_DONTNEED a page a call %.2f, %d in one process_madvise %.2f, "
         "%d spliced, dropped and read back %.2f\n",
         threads, threads > 1 ? "s" : "", move * per, copy * per, each * per, BATCH, batch * per, BATCH, spliced * per);
  return 0;
}
