/*
 * The differential corpus's anonymous-memory allocator (`memcg testbed
 * corpus` builds it with the host's cc, dynamically linked: under
 * `memcg run` the shim puts its memory under the simulator; in a booted
 * guest it runs on the host's libc, shipped beside bash).
 *
 *   usemem MIB [malloc|brk] [HOLDFILE]
 *   usemem MIB hotcold HOTMIB
 *
 * Allocates MIB MiB (`malloc`: one block, which glibc maps; `brk`: 64K
 * blocks from the heap), writes every page (its index, then a constant:
 * compressible, never zero- or same-filled), and when HOLDFILE is given
 * creates it and waits until it is removed. Then reads every page back
 * and exits 0 when every byte is intact, 1 when one is not (printing the
 * count on stderr), 2 on a usage or allocation error.
 *
 * hotcold: writes HOTMIB MiB (one block: the hot set), then MIB MiB of
 * cold pages in 1 MiB blocks, each written once and kept; after each
 * cold MiB it reads every hot page back (checked). The cold pages are
 * never read again, so every swap-in is a refault of the hot set.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define CHUNK (64UL << 10)

static uint64_t word(size_t page, size_t i)
{
	return i == 0 ? page : 0x5a5a5a5a5a5a5a5aULL ^ (i & 7);
}

static void fill(unsigned char *p, size_t first)
{
	uint64_t *w = (uint64_t *)p;
	for (size_t i = 0; i < PAGE / 8; i++)
		w[i] = word(first, i);
}

static size_t check(const unsigned char *p, size_t first)
{
	const uint64_t *w = (const uint64_t *)p;
	size_t bad = 0;
	for (size_t i = 0; i < PAGE / 8; i++)
		bad += w[i] != word(first, i);
	return bad;
}

static void hold(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0)
		close(fd);
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	while (access(path, F_OK) == 0)
		nanosleep(&ts, NULL);
}

static unsigned char *filled(size_t len, size_t first)
{
	unsigned char *p = malloc(len);
	if (!p) {
		fprintf(stderr, "usemem: malloc: %s\n", strerror(errno));
		exit(2);
	}
	for (size_t off = 0; off < len; off += PAGE)
		fill(p + off, first + off / PAGE);
	return p;
}

static int hotcold(size_t cold_mib, size_t hot_mib)
{
	size_t hot_len = hot_mib << 20, bad = 0;
	unsigned char *hot = filled(hot_len, 0);
	for (size_t m = 0; m < cold_mib; m++) {
		filled(1UL << 20, (hot_len >> 12) + (m << 8));
		for (size_t off = 0; off < hot_len; off += PAGE)
			bad += check(hot + off, off / PAGE);
	}
	if (bad) {
		fprintf(stderr, "usemem: %zu bad words\n", bad);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: usemem MIB [malloc|brk] [HOLDFILE] | MIB hotcold HOTMIB\n");
		return 2;
	}
	if (argc > 3 && strcmp(argv[2], "hotcold") == 0)
		return hotcold(strtoul(argv[1], NULL, 10), strtoul(argv[3], NULL, 10));
	size_t len = (size_t)strtoul(argv[1], NULL, 10) << 20;
	int brk_mode = argc > 2 && strcmp(argv[2], "brk") == 0;
	size_t nchunks = brk_mode ? len / CHUNK : 1;
	size_t chunk = brk_mode ? CHUNK : len;
	unsigned char **chunks = calloc(nchunks, sizeof(*chunks));
	if (!chunks)
		return 2;
	for (size_t c = 0; c < nchunks; c++) {
		chunks[c] = malloc(chunk);
		if (!chunks[c]) {
			fprintf(stderr, "usemem: malloc: %s\n", strerror(errno));
			return 2;
		}
		for (size_t off = 0; off < chunk; off += PAGE)
			fill(chunks[c] + off, (c * chunk + off) / PAGE);
	}
	if (argc > 3)
		hold(argv[3]);
	size_t bad = 0;
	for (size_t c = 0; c < nchunks; c++)
		for (size_t off = 0; off < chunk; off += PAGE)
			bad += check(chunks[c] + off, (c * chunk + off) / PAGE);
	if (bad) {
		fprintf(stderr, "usemem: %zu bad words\n", bad);
		return 1;
	}
	return 0;
}
