/* Signals taken on alternate stacks in the heap while the heap pages: for
 * `ccvm exec`'s tests. The main thread sets a 32 KiB alternate stack and a
 * second thread a 256 KiB one, both malloc'd; each touches its own heap
 * (MIB MiB in all) while sending itself SIGURG, whose handler moves the
 * interrupted context to a counting trampoline (as Go preempts). Each
 * thread then reads its stack back and the heap is checked.
 *
 * usage: sigstack MIB     prints what it counted and read
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static volatile long injected;

/* Called as if the interrupted code had called it; returns to it. */
__attribute__((naked)) static void trampoline(void) {
    __asm__ volatile(
        "push %rax\n push %rcx\n push %rdx\n push %rsi\n push %rdi\n push %r8\n push %r9\n push %r10\n push %r11\n"
        "pushf\n lock incq injected(%rip)\n popf\n"
        "pop %r11\n pop %r10\n pop %r9\n pop %r8\n pop %rdi\n pop %rsi\n pop %rdx\n pop %rcx\n pop %rax\n"
        "ret $128\n");
}

static void on_urg(int sig, siginfo_t *si, void *uc_) {
    (void)sig; (void)si;
    greg_t *g = ((ucontext_t *)uc_)->uc_mcontext.gregs;
    g[REG_RSP] -= 128 + 8; /* past the red zone */
    *(greg_t *)g[REG_RSP] = g[REG_RIP];
    g[REG_RIP] = (greg_t)trampoline;
}

struct job { size_t bytes, stack; unsigned long sum; int stack_ok; };

static void *work(void *arg) {
    struct job *j = arg;
    stack_t ss = { .ss_sp = malloc(j->stack), .ss_size = j->stack }, back;
    if (sigaltstack(&ss, NULL) != 0) { perror("sigaltstack"); exit(2); }
    unsigned char *p = malloc(j->bytes);
    pid_t tid = (pid_t)syscall(SYS_gettid);
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < j->bytes; i += 512) {
            p[i] = (unsigned char)(i * 7 + round);
            if (i % (256 << 10) == 0) syscall(SYS_tgkill, getpid(), tid, SIGURG);
        }
    for (size_t i = 0; i < j->bytes; i += 512) j->sum += p[i] == (unsigned char)(i * 7 + 2);
    sigaltstack(NULL, &back);
    j->stack_ok = back.ss_sp == ss.ss_sp && back.ss_size == ss.ss_size && !(back.ss_flags & SS_DISABLE);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: sigstack MIB\n"); return 2; }
    size_t half = ((size_t)atol(argv[1]) << 20) / 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_urg;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigfillset(&sa.sa_mask);
    sigaction(SIGURG, &sa, NULL);
    struct job a = { half, 32 << 10, 0, 0 }, b = { half, 256 << 10, 0, 0 };
    pthread_t t;
    pthread_create(&t, NULL, work, &b);
    work(&a);
    pthread_join(t, NULL);
    size_t pages = half / 512;
    printf("signals: %ld; bytes right: %lu %lu of %zu; stacks read back: %d %d\n", injected, a.sum, b.sum, pages, a.stack_ok,
           b.stack_ok);
    return !(a.sum == pages && b.sum == pages && a.stack_ok && b.stack_ok && injected > 0);
}
