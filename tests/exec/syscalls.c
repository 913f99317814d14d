/* System calls handed heap memory that is not resident, for `ccvm exec`'s
 * tests of the SIGBUS-mode guard. Each case allocates its buffers from the
 * heap, pushes them out of memory by writing a large spill area, then makes
 * the call; its results are printed, so a paged run must print exactly what
 * an unpaged run does (in signal mode an unguarded call fails with EFAULT).
 *
 * usage: syscalls SPILL_MIB          (every case once)
 *        syscalls SPILL_MIB time N   (also: ns per call of a few calls, to
 *                                     standard error)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static size_t spill_bytes;
static unsigned char *spill;

/* Writes the whole spill area: under a small --ram, everything else in the
 * heap (the buffers just allocated) leaves memory. */
static void push_out(void) {
    static unsigned round;
    round++;
    for (size_t i = 0; i < spill_bytes; i += 64) spill[i] = (unsigned char)(i * 31 + round);
}

static void *heap(size_t n) {
    void *p = malloc(n);
    if (!p) { perror("malloc"); exit(2); }
    memset(p, 0x5a, n);
    return p;
}

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

#define CHECK(name, ok) printf("%-12s %s\n", name, (ok) ? "ok" : "FAILED")

static const char *self_path;

static void files(void) {
    /* read, pread, readv into evicted heap buffers; stdio's internal read. */
    size_t n = 3 * 4096 + 100;
    char *a = heap(n), *b = heap(n), *c1 = heap(5000), *c2 = heap(5000);
    push_out();
    int fd = open(self_path, O_RDONLY);
    ssize_t r1 = read(fd, a, n);
    ssize_t r2 = pread(fd, b, n, 0);
    struct iovec *iov = heap(2 * sizeof *iov);
    iov[0] = (struct iovec){c1, 5000};
    iov[1] = (struct iovec){c2, 5000};
    push_out();
    ssize_t r3 = preadv(fd, iov, 2, 0);
    CHECK("read", r1 == (ssize_t)n);
    CHECK("pread", r2 == (ssize_t)n && memcmp(a, b, n) == 0);
    CHECK("preadv", r3 == 10000 && memcmp(c1, a, 5000) == 0 && memcmp(c2, a + 5000, 5000) == 0);
    printf("file hash    %016llx\n", (unsigned long long)fnv(a, n));
    close(fd);

    FILE *f = fopen(self_path, "rb");
    char *d = heap(n);
    setvbuf(f, heap(65536), _IOFBF, 65536); /* stdio's buffer in the heap */
    push_out();
    size_t got = fread(d, 1, n, f);
    CHECK("fread", got == n && memcmp(d, a, n) == 0);
    fclose(f);

    /* write and writev from evicted buffers, read back. */
    char path[] = "/tmp/ccvm-syscalls-XXXXXX";
    int w = mkstemp(path);
    push_out();
    ssize_t w1 = write(w, a, n);
    iov[0] = (struct iovec){c1, 5000};
    iov[1] = (struct iovec){c2, 5000};
    push_out();
    ssize_t w2 = writev(w, iov, 2);
    struct stat *st = heap(sizeof *st);
    push_out();
    int s1 = fstat(w, st);
    CHECK("write", w1 == (ssize_t)n);
    CHECK("writev", w2 == 10000);
    CHECK("fstat", s1 == 0 && st->st_size == (off_t)n + 10000);
    char *pathcopy = heap(sizeof path);
    strcpy(pathcopy, path);
    push_out();
    CHECK("stat", stat(pathcopy, st) == 0 && st->st_size == (off_t)n + 10000);
    push_out();
    CHECK("unlink", unlink(pathcopy) == 0);
    close(w);

    /* getdents64 through readdir (the C library's internal call into its
     * own heap buffer), getcwd, readlink into the heap. */
    DIR *dir = opendir("/");
    push_out();
    int entries = 0;
    while (readdir(dir)) entries++;
    closedir(dir);
    CHECK("readdir", entries > 2);
    char *cwd = heap(4096);
    push_out();
    CHECK("getcwd", getcwd(cwd, 4096) != NULL);
    char *link = heap(4096);
    push_out();
    ssize_t l = readlink("/proc/self/exe", link, 4096);
    CHECK("readlink", l > 0);
}

static void sockets(void) {
    int *sv = heap(2 * sizeof(int));
    push_out();
    CHECK("socketpair", socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
    char *out = heap(9000), *in = heap(9000);
    for (int i = 0; i < 9000; i++) out[i] = (char)(i * 7);
    push_out();
    ssize_t s = send(sv[0], out, 9000, 0);
    push_out();
    ssize_t r = recv(sv[1], in, 9000, 0);
    CHECK("send/recv", s == 9000 && r == 9000 && memcmp(in, out, 9000) == 0);

    /* sendmsg with two iovecs and a descriptor; recvmsg into the heap. */
    struct msghdr *m = heap(sizeof *m);
    struct iovec *iov = heap(2 * sizeof *iov);
    char *control = heap(CMSG_SPACE(sizeof(int)));
    memset(m, 0, sizeof *m);
    iov[0] = (struct iovec){out, 3000};
    iov[1] = (struct iovec){out + 3000, 3000};
    m->msg_iov = iov;
    m->msg_iovlen = 2;
    m->msg_control = control;
    m->msg_controllen = CMSG_SPACE(sizeof(int));
    struct cmsghdr *c = CMSG_FIRSTHDR(m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    int zero = open("/dev/zero", O_RDONLY);
    memcpy(CMSG_DATA(c), &zero, sizeof zero);
    push_out();
    ssize_t sm = sendmsg(sv[0], m, 0);
    memset(in, 0, 9000);
    iov[0] = (struct iovec){in, 6000};
    m->msg_iovlen = 1;
    memset(control, 0, CMSG_SPACE(sizeof(int)));
    m->msg_controllen = CMSG_SPACE(sizeof(int));
    push_out();
    ssize_t rm = recvmsg(sv[1], m, 0);
    int passed = -1;
    struct cmsghdr *rc = CMSG_FIRSTHDR(m);
    if (rc && rc->cmsg_type == SCM_RIGHTS) memcpy(&passed, CMSG_DATA(rc), sizeof passed);
    char byte = 1;
    CHECK("sendmsg", sm == 6000);
    CHECK("recvmsg", rm == 6000 && memcmp(in, out, 6000) == 0 && passed >= 0 && read(passed, &byte, 1) == 1 && byte == 0);

    /* poll, select and epoll with their arrays in the heap. */
    struct pollfd *p = heap(sizeof *p);
    p->fd = sv[1];
    p->events = POLLIN;
    send(sv[0], "x", 1, 0);
    push_out();
    int pr = poll(p, 1, 1000);
    CHECK("poll", pr == 1 && (p->revents & POLLIN));
    fd_set *set = heap(sizeof *set);
    FD_ZERO(set);
    FD_SET(sv[1], set);
    struct timeval *tv = heap(sizeof *tv);
    tv->tv_sec = 1;
    tv->tv_usec = 0;
    push_out();
    int sr = select(sv[1] + 1, set, NULL, NULL, tv);
    CHECK("select", sr == 1 && FD_ISSET(sv[1], set));
    int ep = epoll_create1(0);
    struct epoll_event *ev = heap(4 * sizeof *ev);
    ev[0].events = EPOLLIN;
    ev[0].data.u64 = 77;
    push_out();
    int ec = epoll_ctl(ep, EPOLL_CTL_ADD, sv[1], ev);
    memset(ev, 0, 4 * sizeof *ev);
    push_out();
    int ew = epoll_wait(ep, ev, 4, 1000);
    CHECK("epoll", ec == 0 && ew == 1 && ev[0].data.u64 == 77);
}

static pthread_mutex_t *shared_lock;
static long *shared_count;

static void *contend(void *arg) {
    (void)arg;
    for (int i = 0; i < 20000; i++) {
        pthread_mutex_lock(shared_lock);
        ++*shared_count;
        pthread_mutex_unlock(shared_lock);
        if (i % 5000 == 0) push_out();
    }
    return NULL;
}

static void process(void) {
    /* Assorted structures the kernel fills. */
    struct utsname *u = heap(sizeof *u);
    push_out();
    CHECK("uname", uname(u) == 0 && strcmp(u->sysname, "Linux") == 0);
    unsigned char *rnd = heap(8192);
    push_out();
    CHECK("getrandom", getrandom(rnd, 8192, 0) == 8192);
    struct timespec *ts = heap(2 * sizeof *ts);
    ts[0] = (struct timespec){0, 1000};
    push_out();
    CHECK("nanosleep", nanosleep(&ts[0], &ts[1]) == 0);
    int *fds = heap(2 * sizeof(int));
    push_out();
    CHECK("pipe", pipe(fds) == 0 && write(fds[1], "ab", 2) == 2);
    char *two = heap(2);
    push_out();
    CHECK("pipe read", read(fds[0], two, 2) == 2 && two[0] == 'a');

    /* Signal state kept in the heap. */
    struct sigaction *sa = heap(2 * sizeof *sa);
    memset(sa, 0, 2 * sizeof *sa);
    sa[0].sa_handler = SIG_IGN;
    push_out();
    CHECK("sigaction", sigaction(SIGUSR1, &sa[0], &sa[1]) == 0 && sigaction(SIGUSR1, NULL, &sa[1]) == 0 &&
                           sa[1].sa_handler == SIG_IGN);
    sigset_t *sets = heap(2 * sizeof *sets);
    sigemptyset(&sets[0]);
    sigaddset(&sets[0], SIGUSR2);
    push_out();
    CHECK("sigprocmask", sigprocmask(SIG_BLOCK, &sets[0], NULL) == 0 && sigprocmask(SIG_SETMASK, NULL, &sets[1]) == 0 &&
                             sigismember(&sets[1], SIGUSR2) && sigprocmask(SIG_UNBLOCK, &sets[0], NULL) == 0);

    /* Futexes in the heap: threads contending on a mutex. */
    shared_lock = heap(sizeof *shared_lock);
    shared_count = heap(sizeof *shared_count);
    pthread_mutex_init(shared_lock, NULL);
    *shared_count = 0;
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, contend, NULL);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    CHECK("futex", *shared_count == 60000);

    /* fork and wait4 with the status in the heap; execve with its
     * arguments in the heap. */
    int *status = heap(sizeof *status);
    char *note = heap(4);
    memcpy(note, "kid", 4);
    push_out();
    pid_t pid = fork();
    /* The child writes from its heap (plain memory in a forked child). */
    if (pid == 0) _exit(write(fds[1], note, 4) == 4 ? 7 : 8);
    push_out();
    CHECK("wait4", waitpid(pid, status, 0) == pid && WIFEXITED(*status) && WEXITSTATUS(*status) == 7);
    char *got = heap(4);
    push_out();
    CHECK("fork write", read(fds[0], got, 4) == 4 && memcmp(got, "kid", 4) == 0);
    char **argv = heap(3 * sizeof *argv);
    argv[0] = heap(16);
    strcpy(argv[0], "/bin/sh");
    argv[1] = heap(64);
    strcpy(argv[1], "-c");
    argv[2] = NULL;
    char **argv3 = heap(4 * sizeof *argv3);
    argv3[0] = argv[0];
    argv3[1] = argv[1];
    argv3[2] = heap(64);
    strcpy(argv3[2], "exit 3");
    argv3[3] = NULL;
    pid = vfork();
    if (pid == 0) {
        execv(argv3[0], argv3);
        _exit(127);
    }
    push_out();
    CHECK("execve", waitpid(pid, status, 0) == pid && WEXITSTATUS(*status) == 3);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* ns per call of a call with no buffer, a read of 64 bytes from a
 * resident heap buffer, and a read into a buffer pushed out first. */
static void timing(long n) {
    double t0 = now();
    for (long i = 0; i < n; i++) getppid();
    double plain = (now() - t0) / n;
    int fd = open("/dev/zero", O_RDONLY);
    char *buf = heap(64);
    t0 = now();
    for (long i = 0; i < n; i++) read(fd, buf, 64);
    double rd = (now() - t0) / n;
    fprintf(stderr, "timing: getppid %.0f ns, read of 64 bytes into the heap %.0f ns\n", plain * 1e9, rd * 1e9);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: syscalls SPILL_MIB [time N]\n"); return 2; }
    self_path = argv[0];
    spill_bytes = (size_t)atol(argv[1]) << 20;
    spill = malloc(spill_bytes);
    files();
    sockets();
    process();
    if (argc == 4 && strcmp(argv[2], "time") == 0) timing(atol(argv[3]));
    return 0;
}
