/*
 * The stand-in libcuda's cuLaunchKernelEx with a driver call's footprint on the core, for
 * `bench:host --pressure` (benchmarks/src/host.ts). Built over stubcuda.c with
 * STAND_IN=__attribute__((weak)), it replaces that file's cuLaunchKernelEx, which returns at
 * once. Each call runs 512 small functions through a table, each function on a cache line of
 * its own (32 KiB of code, 512 indirect calls), and reads and writes one byte of each cache line
 * of 32 KiB of data: about what a core's first-level caches and branch predictors hold, as a
 * real cuLaunchKernel's few microseconds of driver code replace them. The code that runs
 * between two launches then pays to bring its own instructions and data back, as it does
 * between real driver calls (decision 0050). It does no GPU work; the only state it keeps is
 * the count of launches its test reads (pressureLaunches).
 */
#include <stdint.h>

#define FN(n)                                                                   \
  __attribute__((noinline, aligned(64))) static uint64_t f##n(uint64_t x) {     \
    x += n;                                                                     \
    x ^= x >> 7;                                                                \
    return x + n * 7;                                                           \
  }
#define FN8(p) FN(p##0) FN(p##1) FN(p##2) FN(p##3) FN(p##4) FN(p##5) FN(p##6) FN(p##7)
#define FN64(p) FN8(p##0) FN8(p##1) FN8(p##2) FN8(p##3) FN8(p##4) FN8(p##5) FN8(p##6) FN8(p##7)
#define FN512(p) FN64(p##0) FN64(p##1) FN64(p##2) FN64(p##3) FN64(p##4) FN64(p##5) FN64(p##6) FN64(p##7)
/* f1000 ... f1777: the digits after the leading 1 count in octal, 512 functions. */
FN512(1)

#define AT(n) f##n,
#define AT8(p) AT(p##0) AT(p##1) AT(p##2) AT(p##3) AT(p##4) AT(p##5) AT(p##6) AT(p##7)
#define AT64(p) AT8(p##0) AT8(p##1) AT8(p##2) AT8(p##3) AT8(p##4) AT8(p##5) AT8(p##6) AT8(p##7)
#define AT512(p) AT64(p##0) AT64(p##1) AT64(p##2) AT64(p##3) AT64(p##4) AT64(p##5) AT64(p##6) AT64(p##7)
static uint64_t (*const table[512])(uint64_t) = {AT512(1)};

static uint8_t data[32 * 1024];
static volatile uint64_t sink;
static volatile uint64_t launches;

int cuLaunchKernelEx(const void *config, void *function, void **parameters, void **extra) {
  (void)function;
  (void)parameters;
  (void)extra;
  uint64_t x = (uint64_t)(uintptr_t)config;
  for (int i = 0; i < 512; i++) x += table[i]((uint64_t)i);
  for (unsigned i = 0; i < sizeof data; i += 64) x += data[i]++;
  sink = x;
  launches = launches + 1;
  return 0;
}

/* How many launches this library has taken: its test checks that this cuLaunchKernelEx, not the
 * plain stand-in's, is the one a build over stubcuda.c exports. */
uint64_t pressureLaunches(void) { return launches; }
