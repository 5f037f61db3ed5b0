/* The shim's heap under stress (crates/memcg-cli/tests/shim.rs runs it
 * with the shim preloaded): the edge cases of the malloc family, then
 * four threads doing random malloc/calloc/realloc/free/posix_memalign/
 * memalign/aligned_alloc of 1 B to 4 MiB, each block filled with a byte
 * and checked before it is resized or freed, while the main thread forks
 * children that allocate and check too (a deadlock in the child is
 * caught by alarm()). Prints "ok" and exits 0, or says what failed and
 * exits 1. Usage: shim_heap_stress [ROUNDS_PER_THREAD]. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4
#define SLOTS 64
#define MAX_SIZE (4u << 20)

static long rounds = 20000;

static void fail(const char *what, size_t size)
{
    fprintf(stderr, "FAIL: %s (size %zu)\n", what, size);
    fflush(stderr);
    _exit(1);
}

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* 1 B .. 4 MiB, log-uniform, sizes above 64 KiB three times rarer. */
static size_t random_size(uint64_t *s)
{
    unsigned bits = next(s) % 23;
    if (bits > 16 && next(s) % 4 != 0)
        bits = next(s) % 17;
    size_t size = 1 + next(s) % ((size_t)1 << bits);
    return size > MAX_SIZE ? MAX_SIZE : size;
}

/* Whether the n bytes at p are all `byte`. */
static int all(const unsigned char *p, size_t n, unsigned char byte)
{
    unsigned char want[4096];
    memset(want, byte, sizeof want);
    for (size_t done = 0; done < n; done += sizeof want) {
        size_t take = n - done < sizeof want ? n - done : sizeof want;
        if (memcmp(p + done, want, take) != 0)
            return 0;
    }
    return 1;
}

struct slot {
    unsigned char *p;
    size_t size;
    unsigned char byte;
};

static void check_new(void *p, size_t size, size_t align)
{
    if (p == NULL)
        fail("allocation returned NULL", size);
    if ((uintptr_t)p % align != 0)
        fail("misaligned block", size);
    if (malloc_usable_size(p) < size)
        fail("malloc_usable_size below the size asked", size);
}

/* A new block in `s`, by one of the allocating functions. */
static void fill(struct slot *s, uint64_t *rng)
{
    size_t size = random_size(rng), align = 16;
    void *p = NULL;
    switch (next(rng) % 5) {
    case 0:
        p = calloc(1, size);
        check_new(p, size, 16);
        if (!all(p, size, 0))
            fail("calloc block not zero", size);
        break;
    case 1:
        align = (size_t)1 << (3 + next(rng) % 14);
        if (posix_memalign(&p, align, size) != 0)
            fail("posix_memalign", size);
        break;
    case 2:
        align = (size_t)1 << (next(rng) % 13);
        p = memalign(align, size);
        break;
    case 3:
        align = (size_t)1 << (next(rng) % 13);
        p = aligned_alloc(align, size);
        break;
    default:
        p = malloc(size);
    }
    check_new(p, size, align < 16 ? 16 : align);
    s->p = p;
    s->size = size;
    s->byte = 1 + next(rng) % 255;
    memset(s->p, s->byte, size);
}

static void resize(struct slot *s, uint64_t *rng)
{
    size_t size = random_size(rng);
    size_t kept = size < s->size ? size : s->size;
    unsigned char *p = realloc(s->p, size);
    check_new(p, size, 16);
    if (!all(p, kept, s->byte))
        fail("realloc lost bytes", size);
    s->p = p;
    s->size = size;
    s->byte = 1 + next(rng) % 255;
    memset(p, s->byte, size);
}

static void empty(struct slot *s)
{
    if (!all(s->p, s->size, s->byte))
        fail("block changed under its owner", s->size);
    free(s->p);
    s->p = NULL;
}

/* Random operations on SLOTS blocks; every block checked at the end. */
static void churn(uint64_t seed, long n)
{
    struct slot slots[SLOTS] = {0};
    uint64_t rng = seed | 1;
    for (long i = 0; i < n; i++) {
        struct slot *s = &slots[next(&rng) % SLOTS];
        if (s->p == NULL)
            fill(s, &rng);
        else if (next(&rng) % 3 == 0)
            resize(s, &rng);
        else
            empty(s);
    }
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].p != NULL)
            empty(&slots[i]);
}

static void *worker(void *arg)
{
    churn((uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull, rounds);
    return NULL;
}

/* Forks a child that allocates and checks; fails if it does not exit 0
 * within its alarm. */
static void fork_and_check(int k)
{
    pid_t pid = fork();
    if (pid < 0)
        fail("fork", 0);
    if (pid == 0) {
        alarm(60);
        churn(0xf0f0 + k, 500);
        _exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid)
        fail("waitpid", 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child %d: status %#x\n", k, status);
        fail("a forked child failed or hung (SIGALRM is 14)", 0);
    }
}

/* Resident pages (/proc/self/statm). */
static long resident(void)
{
    long size, pages = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL || fscanf(f, "%ld %ld", &size, &pages) != 2)
        fail("reading /proc/self/statm", 0);
    fclose(f);
    return pages;
}

/* calloc of fresh memory touches only the page of each block's header:
 * 256 blocks of 100000 bytes (24 MiB) add well under 8 MiB. */
static void calloc_leaves_fresh_pages_alone(void)
{
    static void *blocks[256];
    long before = resident();
    for (int i = 0; i < 256; i++)
        check_new(blocks[i] = calloc(1, 100000), 100000, 16);
    long grown = (resident() - before) * sysconf(_SC_PAGESIZE);
    if (grown > (8l << 20))
        fail("calloc touched fresh memory", (size_t)grown);
    for (int i = 0; i < 256; i++)
        free(blocks[i]);
}

/* What glibc documents for the edge cases. */
static void edge_cases(void)
{
    Dl_info info;
    /* libmemcg_shim.so as built, libmemcg-shim.so as memcg run writes it */
    if (!dladdr((void *)malloc, &info) || strstr(info.dli_fname, "libmemcg") == NULL ||
        strstr(info.dli_fname, "shim.so") == NULL)
        fail("malloc is not the shim's", 0);
    free(NULL);
    void *a = malloc(0), *b = malloc(0);
    if (a == NULL || b == NULL || a == b)
        fail("malloc(0) is not a unique pointer", 0);
    if (realloc(a, 0) != NULL)
        fail("realloc(p, 0) did not free", 0);
    free(b);
    void *c = realloc(NULL, 100);
    check_new(c, 100, 16);
    errno = 0;
    if (calloc(SIZE_MAX / 2, 3) != NULL || errno != ENOMEM)
        fail("calloc overflow", 0);
    errno = 0;
    if (reallocarray(c, SIZE_MAX / 2, 3) != NULL || errno != ENOMEM)
        fail("reallocarray overflow", 0);
    errno = 0;
    if (malloc(SIZE_MAX - 4096) != NULL || errno != ENOMEM)
        fail("malloc of too much", 0);
    void *d;
    if (posix_memalign(&d, 24, 8) != EINVAL || posix_memalign(&d, 4, 8) != EINVAL)
        fail("posix_memalign of a bad alignment", 0);
    check_new(d = valloc(10), 10, 4096);
    free(d);
    check_new(d = pvalloc(10), 4096, 4096);
    free(d);
    check_new(d = memalign(48, 10), 10, 64);
    free(d);
    check_new(d = calloc(1000, 1000), 1000000, 16);
    if (!all(d, 1000000, 0))
        fail("large calloc not zero", 0);
    free(d);
    free(c);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        rounds = atol(argv[1]);
    alarm(300);
    calloc_leaves_fresh_pages_alone();
    edge_cases();
    pthread_t threads[THREADS];
    for (long t = 0; t < THREADS; t++)
        if (pthread_create(&threads[t], NULL, worker, (void *)(t + 1)) != 0)
            fail("pthread_create", 0);
    for (int k = 0; k < 8; k++) {
        fork_and_check(k);
        usleep(20000);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    printf("ok\n");
    return 0;
}
