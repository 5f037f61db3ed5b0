/*
 * Seed 000's sequential zero-folio swap, for the real-kernel column of
 * `memcg reproduce` (crates/memcg-cli/src/reproduce/kernel.rs): map MB
 * MiB of anonymous memory, write zeros into every page in order (past
 * the cgroup's memory.max this already swaps out), page the whole range
 * out with MADV_PAGEOUT, then read every page back in order (swap-in).
 * Prints one `phase=usec` line per phase. Built static by the host's gcc.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
	size_t len = (size_t)atol(argc > 1 ? argv[1] : "64") << 20;
	volatile unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned long sum = 0;
	double t;

	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	t = now_us();
	for (size_t i = 0; i < len; i += 4096)
		p[i] = 0;
	printf("write_us=%.0f\n", now_us() - t);
	t = now_us();
	if (madvise((void *)p, len, MADV_PAGEOUT))
		perror("madvise");
	printf("pageout_us=%.0f\n", now_us() - t);
	t = now_us();
	for (size_t i = 0; i < len; i += 4096)
		sum += p[i];
	printf("read_us=%.0f\n", now_us() - t);
	return sum != 0;
}
