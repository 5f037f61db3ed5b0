/* A real process for the anonymous-memory tests (tests/anon.rs): it
 * touches memory under `memcg run` and checks every byte it wrote.
 *
 *   anon_helper touch MB        mmap'd and malloc'd pages, each page
 *                               written with its own pattern, read back
 *                               twice; prints "ok"
 *   anon_helper fork MB         fills, forks: the child checks every
 *                               page, rewrites half and checks again;
 *                               the parent checks its own after; "ok"
 *   anon_helper hold MB         fills, prints "ready", sleeps
 *   anon_helper blocks MB STAT  writes MB of 64K malloc blocks (the heap's
 *                               small blocks, from its first chunk on)
 *                               and prints "anon" of the memory.stat
 *                               file STAT (bytes) while it holds them
 *   anon_helper stress SEED THREADS FORKS MB
 *                               threads and forked children each
 *                               allocate, write, free and check in a
 *                               seeded random order; "ok"
 * Exit status 1 (with the page) on the first wrong byte. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096UL

static uint64_t pattern(uint64_t seed, size_t page, size_t word)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ULL + page * 0xBF58476D1CE4E5B9ULL + word;
	x ^= x >> 31;
	return x * 0x94D049BB133111EBULL;
}

static void fill(uint64_t *p, size_t pages, uint64_t seed)
{
	for (size_t i = 0; i < pages; i++)
		for (size_t w = 0; w < PAGE / 8; w += 64)
			p[i * PAGE / 8 + w] = pattern(seed, i, w);
}

static int check(const uint64_t *p, size_t pages, uint64_t seed, const char *what)
{
	for (size_t i = 0; i < pages; i++)
		for (size_t w = 0; w < PAGE / 8; w += 64)
			if (p[i * PAGE / 8 + w] != pattern(seed, i, w)) {
				fprintf(stderr, "%s: page %zu word %zu wrong\n", what, i, w);
				return 1;
			}
	return 0;
}

static uint64_t *region(size_t pages, int use_malloc)
{
	void *p = use_malloc ? malloc(pages * PAGE)
			     : mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!p || p == MAP_FAILED) {
		perror("allocating");
		exit(2);
	}
	return p;
}

static int touch(size_t mb)
{
	size_t half = mb * 256 / 2;
	uint64_t *a = region(half, 0), *b = region(half, 1);
	fill(a, half, 1);
	fill(b, half, 2);
	for (int r = 0; r < 2; r++)
		if (check(a, half, 1, "mmap") || check(b, half, 2, "malloc"))
			return 1;
	munmap(a, half * PAGE);
	free(b);
	puts("ok");
	return 0;
}

static int forked(size_t mb)
{
	size_t pages = mb * 256;
	uint64_t *a = region(pages, 1);
	fill(a, pages, 3);
	pid_t child = fork();
	if (child == 0) {
		if (check(a, pages, 3, "child sees the parent's"))
			_exit(1);
		fill(a, pages / 2, 4);
		_exit(check(a, pages / 2, 4, "child's own"));
	}
	int status;
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	if (check(a, pages, 3, "parent's after the child"))
		return 1;
	puts("ok");
	return 0;
}

static int hold(size_t mb)
{
	size_t pages = mb * 256;
	uint64_t *a = region(pages, 1);
	fill(a, pages, 5);
	puts("ready");
	fflush(stdout);
	for (;;) {
		if (check(a, pages, 5, "held"))
			return 1;
		usleep(1000);
	}
}

struct worker {
	uint64_t seed;
	size_t pages;
	int bad;
};

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t s = w->seed | 1;
	uint64_t *blocks[8] = {0};
	size_t sizes[8] = {0};
	uint64_t seeds[8] = {0};
	for (int round = 0; round < 64 && !w->bad; round++) {
		int i = next(&s) % 8;
		if (blocks[i]) {
			/* Only mmap'd blocks stay between rounds. */
			w->bad |= check(blocks[i], sizes[i], seeds[i], "stress");
			munmap(blocks[i], sizes[i] * PAGE);
			blocks[i] = NULL;
			continue;
		}
		sizes[i] = 1 + next(&s) % w->pages;
		seeds[i] = next(&s);
		int use_malloc = next(&s) % 2;
		blocks[i] = region(sizes[i], use_malloc);
		fill(blocks[i], sizes[i], seeds[i]);
		if (use_malloc) {
			w->bad |= check(blocks[i], sizes[i], seeds[i], "stress");
			free(blocks[i]);
			blocks[i] = NULL;
		}
	}
	for (int i = 0; i < 8; i++)
		if (blocks[i]) {
			w->bad |= check(blocks[i], sizes[i], seeds[i], "stress");
			munmap(blocks[i], sizes[i] * PAGE);
		}
	return NULL;
}

static int threads_round(uint64_t seed, int threads, size_t pages)
{
	pthread_t t[64];
	struct worker w[64];
	int bad = 0;
	for (int i = 0; i < threads && i < 64; i++) {
		w[i] = (struct worker){ seed * 64 + i, pages, 0 };
		pthread_create(&t[i], NULL, work, &w[i]);
	}
	for (int i = 0; i < threads && i < 64; i++) {
		pthread_join(t[i], NULL);
		bad |= w[i].bad;
	}
	return bad;
}

static int stress(uint64_t seed, int threads, int forks, size_t mb)
{
	size_t pages = mb * 256 / (threads ? threads : 1) / 4 + 1;
	pid_t kids[64];
	int n = 0, bad = 0;
	for (int f = 0; f < forks && f < 64; f++) {
		pid_t k = fork();
		if (k == 0)
			_exit(threads_round(seed + 1000 + f, threads, pages));
		if (k > 0)
			kids[n++] = k;
	}
	bad |= threads_round(seed, threads, pages);
	for (int i = 0; i < n; i++) {
		int status;
		if (waitpid(kids[i], &status, 0) != kids[i] || !WIFEXITED(status) || WEXITSTATUS(status))
			bad = 1;
	}
	if (bad) {
		fprintf(stderr, "stress: seed %llu failed\n", (unsigned long long)seed);
		return 1;
	}
	puts("ok");
	return 0;
}

static int blocks(size_t mb, const char *stat)
{
	size_t n = mb * 16;
	for (size_t i = 0; i < n; i++) {
		char *b = malloc(64 << 10);
		if (!b)
			return 1;
		memset(b, 1 + i % 255, 64 << 10);
	}
	FILE *f = fopen(stat, "r");
	char key[64];
	unsigned long long v;
	while (f && fscanf(f, "%63s %llu", key, &v) == 2)
		if (!strcmp(key, "anon"))
			printf("anon %llu\n", v);
	return f ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "touch"))
		return touch(atol(argv[2]));
	if (argc >= 3 && !strcmp(argv[1], "fork"))
		return forked(atol(argv[2]));
	if (argc >= 3 && !strcmp(argv[1], "hold"))
		return hold(atol(argv[2]));
	if (argc >= 4 && !strcmp(argv[1], "blocks"))
		return blocks(atol(argv[2]), argv[3]);
	if (argc >= 6 && !strcmp(argv[1], "stress"))
		return stress(strtoull(argv[2], NULL, 10), atoi(argv[3]), atoi(argv[4]), atol(argv[5]));
	fprintf(stderr, "usage: anon_helper touch|fork|hold MB | blocks MB STAT | stress SEED THREADS FORKS MB\n");
	return 2;
}
