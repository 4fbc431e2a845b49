// CUDA C kernels on the CPU, for tests: what cpunvrtc.c puts before a program's source when it
// compiles it with the host's C++ compiler instead of NVRTC. A test double of the GPU, so that
// generated kernels run in CI against CPU references; never part of a package.
//
// A launch runs its blocks one after another; the threads of a block are fibers of the calling
// thread, each run until it reaches a barrier or ends. `__syncthreads()` (and its
// _or / _and / _count forms) releases once every thread of the block that has not ended waits
// at it; `ct_cpu::shfl_down` (what cpunvrtc.c makes of the `shfl.sync.down.b32` asm) releases
// once every live thread of the warp waits at it, as do `__shfl_sync` and its up / down / xor
// forms and `__ballot_sync` (full warps of width 32). A barrier that some threads of the block
// never reach (they ended first) is reported and aborts the launch, as a hang would on a GPU.
// `__shared__` variables are function statics: one copy, shared by the fibers of the block
// running now, as they would be by its threads.
#pragma once

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <type_traits>
#include <utility>

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int a = 1, unsigned int b = 1, unsigned int c = 1) : x(a), y(b), z(c) {}
};
typedef dim3 uint3;

#define __global__
#define __device__
#define __host__
#define __noinline__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__ __restrict
#define __launch_bounds__(...)

namespace ct_cpu {

// Switching between fibers: on x86-64 a few instructions (callee-saved registers, the stack
// pointer, the SSE and x87 control words), elsewhere ucontext (whose swapcontext also sets the
// signal mask, a system call each time; decision 0044).
#if defined(__x86_64__)
extern "C" __attribute__((visibility("hidden"))) void ct_cpu_switch(void** from, void* to);
asm(R"(
  .text
  .globl ct_cpu_switch
  .hidden ct_cpu_switch
  .type ct_cpu_switch, @function
ct_cpu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size ct_cpu_switch, .-ct_cpu_switch
)");

struct Context {
  void* sp = nullptr;
};

inline void switch_to(Context& from, Context& to) { ct_cpu_switch(&from.sp, to.sp); }

/** A context that starts `entry` (which never returns) on `stack`. */
inline void make_context(Context& context, char* stack, size_t size, void (*entry)()) {
  uintptr_t top = ((uintptr_t)(stack + size)) & ~(uintptr_t)15;
  uint64_t* slot = (uint64_t*)(top - 16);  // the return address: ret leaves rsp = 8 mod 16
  slot[0] = (uint64_t)(uintptr_t)entry;
  slot[1] = 0;
  uint64_t* registers = slot - 6;  // rbp, rbx, r12..r15: zeros
  for (int i = 0; i < 6; i++) registers[i] = 0;
  uint32_t* control = (uint32_t*)(registers - 1);
  control[0] = 0x1f80;  // MXCSR's default
  control[1] = 0x037f;  // the x87 control word's default
  context.sp = (void*)(registers - 1);
}
#else
struct Context {
  ucontext_t context;
};

inline void switch_to(Context& from, Context& to) { swapcontext(&from.context, &to.context); }

inline void make_context(Context& context, char* stack, size_t size, void (*entry)()) {
  getcontext(&context.context);
  context.context.uc_stack.ss_sp = stack;
  context.context.uc_stack.ss_size = size;
  context.context.uc_link = nullptr;
  makecontext(&context.context, entry, 0);
}
#endif

/** Why a fiber stopped: it runs, waits at the block barrier, waits at its warp's, or ended. */
enum State { RUNNING, AT_BLOCK, AT_WARP, ENDED };

struct Fiber {
  Context context;
  uint3 thread;
  unsigned int linear;
  State state;
  int vote;
  unsigned int word;
};

struct Launch {
  Fiber* fibers = nullptr;
  char* stacks = nullptr;
  unsigned int* words = nullptr;
  Context scheduler;
  Fiber* current = nullptr;
  void (*body)(void*) = nullptr;
  void* closure = nullptr;
  uint3 block_index;
  dim3 grid, block;
  int vote_or = 0, vote_and = 0, vote_count = 0;
  const char* failure = nullptr;
};

inline Launch* running = nullptr;

constexpr size_t kStackBytes = 64 * 1024;

inline void fiber_main() {
  running->body(running->closure);
  running->current->state = ENDED;
  switch_to(running->current->context, running->scheduler);
}

inline void wait_here(State state) {
  Fiber* fiber = running->current;
  fiber->state = state;
  switch_to(fiber->context, running->scheduler);
}

/**
 * Runs the fibers of one block until all have ended. Returns false (with `failure`) for a
 * barrier that can never release.
 */
inline bool run_block(Launch& launch) {
  const unsigned int threads = launch.block.x * launch.block.y * launch.block.z;
  for (unsigned int t = 0; t < threads; t++) {
    Fiber& fiber = launch.fibers[t];
    fiber.linear = t;
    fiber.thread = uint3(t % launch.block.x, (t / launch.block.x) % launch.block.y,
                         t / (launch.block.x * launch.block.y));
    fiber.state = RUNNING;
    make_context(fiber.context, launch.stacks + (size_t)t * kStackBytes, kStackBytes,
                 fiber_main);
  }
  for (;;) {
    for (unsigned int t = 0; t < threads; t++) {
      Fiber& fiber = launch.fibers[t];
      if (fiber.state != RUNNING) continue;
      launch.current = &fiber;
      switch_to(launch.scheduler, fiber.context);
    }
    // Nothing runs now: release the warps whose live threads all wait at the warp barrier,
    // else the block barrier once every live thread waits there.
    bool released = false;
    for (unsigned int w = 0; w < threads; w += 32) {
      const unsigned int end = threads < w + 32 ? threads : w + 32;
      bool all = true, any = false;
      for (unsigned int t = w; t < end; t++) {
        const State s = launch.fibers[t].state;
        if (s == AT_WARP) any = true;
        else if (s != ENDED) all = false;
      }
      if (any && all) {
        for (unsigned int t = w; t < end; t++) launch.words[t] = launch.fibers[t].word;
        for (unsigned int t = w; t < end; t++) {
          if (launch.fibers[t].state == AT_WARP) launch.fibers[t].state = RUNNING;
        }
        released = true;
      }
    }
    if (released) continue;
    unsigned int waiting = 0, ended = 0;
    int any = 0, every = 1, count = 0;
    for (unsigned int t = 0; t < threads; t++) {
      const Fiber& fiber = launch.fibers[t];
      if (fiber.state == ENDED) {
        ended++;
      } else if (fiber.state == AT_BLOCK) {
        waiting++;
        any |= fiber.vote != 0;
        every &= fiber.vote != 0;
        count += fiber.vote != 0;
      }
    }
    if (ended == threads) return true;
    if (waiting + ended != threads || ended != 0) {
      launch.failure = ended != 0
                           ? "__syncthreads() that some threads of the block never reach "
                             "(they ended first): the kernel would hang on a GPU"
                           : "a warp shuffle that some threads of the warp never reach";
      return false;
    }
    launch.vote_or = any;
    launch.vote_and = every;
    launch.vote_count = count;
    for (unsigned int t = 0; t < threads; t++) launch.fibers[t].state = RUNNING;
  }
}

/**
 * Runs `body(closure)` as a grid of `grid` blocks of `block` threads; prints and returns false
 * on a failure.
 */
inline bool run_grid(dim3 grid, dim3 block, void (*body)(void*), void* closure) {
  Launch launch;
  launch.grid = grid;
  launch.block = block;
  launch.body = body;
  launch.closure = closure;
  const unsigned int threads = block.x * block.y * block.z;
  launch.fibers = (Fiber*)calloc(threads, sizeof(Fiber));
  launch.words = (unsigned int*)calloc(threads, sizeof(unsigned int));
  launch.stacks = (char*)malloc((size_t)threads * kStackBytes);
  if (launch.fibers == nullptr || launch.words == nullptr || launch.stacks == nullptr) {
    free(launch.fibers);
    free(launch.words);
    free(launch.stacks);
    fprintf(stderr, "cuda-on-cpu: no memory for %u fibers\n", threads);
    return false;
  }
  Launch* outer = running;
  running = &launch;
  bool ok = true;
  for (unsigned int z = 0; ok && z < grid.z; z++) {
    for (unsigned int y = 0; ok && y < grid.y; y++) {
      for (unsigned int x = 0; ok && x < grid.x; x++) {
        launch.block_index = uint3(x, y, z);
        ok = run_block(launch);
      }
    }
  }
  running = outer;
  if (!ok) {
    fprintf(stderr, "cuda-on-cpu: block (%u, %u, %u): %s\n", launch.block_index.x,
            launch.block_index.y, launch.block_index.z, launch.failure);
  }
  free(launch.fibers);
  free(launch.words);
  free(launch.stacks);
  return ok;
}

template <class... A, size_t... I>
void call_with(void (*kernel)(A...), void** parameters, std::index_sequence<I...>) {
  kernel(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(parameters[I])...);
}

template <class... A>
struct Call {
  void (*kernel)(A...);
  void** parameters;
  static void run(void* self) {
    Call* call = static_cast<Call*>(self);
    call_with(call->kernel, call->parameters, std::index_sequence_for<A...>{});
  }
};

/** A kernel's launch from the driver's `kernelParams` (one pointer to each argument's value). */
template <class... A>
bool launch(void (*kernel)(A...), dim3 grid, dim3 block, void** parameters) {
  Call<A...> call{kernel, parameters};
  return run_grid(grid, block, &Call<A...>::run, &call);
}

/** `shfl.sync.down.b32` over the full warp: lane + delta's word, or the lane's own past the warp. */
inline unsigned int shfl_down(unsigned int word, unsigned int delta) {
  Fiber* fiber = running->current;
  fiber->word = word;
  wait_here(AT_WARP);
  const unsigned int lane = fiber->linear % 32;
  const unsigned int threads = running->block.x * running->block.y * running->block.z;
  const unsigned int source = fiber->linear + delta;
  const unsigned int result =
      lane + delta < 32 && source < threads ? running->words[source] : word;
  // The words stay until every lane of the warp has read its own: a second barrier.
  wait_here(AT_WARP);
  return result;
}

/**
 * A 32-bit word exchanged within the warp: every live lane publishes `word` and reads lane
 * `source`'s (its own for a source outside the warp or past the block).
 */
inline unsigned int warp_word(unsigned int word, unsigned int source) {
  Fiber* fiber = running->current;
  fiber->word = word;
  wait_here(AT_WARP);
  const unsigned int base = fiber->linear - fiber->linear % 32;
  const unsigned int threads = running->block.x * running->block.y * running->block.z;
  const unsigned int result =
      source < 32 && base + source < threads ? running->words[base + source] : word;
  wait_here(AT_WARP);
  return result;
}

/** The warp's predicates as a mask, bit l for lane l (lanes that ended or do not exist: 0). */
inline unsigned int warp_ballot(int predicate) {
  Fiber* fiber = running->current;
  fiber->word = predicate != 0;
  wait_here(AT_WARP);
  const unsigned int base = fiber->linear - fiber->linear % 32;
  const unsigned int threads = running->block.x * running->block.y * running->block.z;
  unsigned int mask = 0;
  for (unsigned int l = 0; l < 32 && base + l < threads; l++) {
    if (running->fibers[base + l].state != ENDED && running->words[base + l] != 0) mask |= 1u << l;
  }
  wait_here(AT_WARP);
  return mask;
}

/** A value of 4 or 8 bytes from lane `source`, a word at a time. */
template <class T>
inline T warp_value(T value, unsigned int source) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "warp shuffles of 4- and 8-byte values only");
  unsigned int words[sizeof(T) / 4];
  memcpy(words, &value, sizeof(T));
  for (unsigned int w = 0; w < sizeof(T) / 4; w++) words[w] = warp_word(words[w], source);
  T result;
  memcpy(&result, words, sizeof(T));
  return result;
}

inline unsigned int lane() { return running->current->linear % 32; }

inline float f16_to_f32(unsigned short h) {
  _Float16 value;
  memcpy(&value, &h, 2);
  return (float)value;
}

inline unsigned short f32_to_f16(float f) {
  _Float16 value = (_Float16)f;
  unsigned short h;
  memcpy(&h, &value, 2);
  return h;
}

}  // namespace ct_cpu

#define threadIdx (ct_cpu::running->current->thread)
#define blockIdx (ct_cpu::running->block_index)
#define blockDim (ct_cpu::running->block)
#define gridDim (ct_cpu::running->grid)
static const int warpSize = 32;

inline void __syncthreads() { ct_cpu::wait_here(ct_cpu::AT_BLOCK); }
inline int __syncthreads_or(int predicate) {
  ct_cpu::running->current->vote = predicate != 0;
  ct_cpu::wait_here(ct_cpu::AT_BLOCK);
  return ct_cpu::running->vote_or;
}
inline int __syncthreads_and(int predicate) {
  ct_cpu::running->current->vote = predicate != 0;
  ct_cpu::wait_here(ct_cpu::AT_BLOCK);
  return ct_cpu::running->vote_and;
}
inline int __syncthreads_count(int predicate) {
  ct_cpu::running->current->vote = predicate != 0;
  ct_cpu::wait_here(ct_cpu::AT_BLOCK);
  return ct_cpu::running->vote_count;
}
// Warp shuffles and votes of the full warp (width 32; the mask is not checked). Lanes that
// ask for a lane outside the warp read their own value, as on the GPU.
template <class T>
inline T __shfl_sync(unsigned int, T var, int source) {
  return ct_cpu::warp_value(var, (unsigned int)source & 31u);
}
template <class T>
inline T __shfl_up_sync(unsigned int, T var, unsigned int delta) {
  const unsigned int lane = ct_cpu::lane();
  return ct_cpu::warp_value(var, lane >= delta ? lane - delta : lane);
}
template <class T>
inline T __shfl_down_sync(unsigned int, T var, unsigned int delta) {
  const unsigned int lane = ct_cpu::lane();
  return ct_cpu::warp_value(var, lane + delta < 32 ? lane + delta : lane);
}
template <class T>
inline T __shfl_xor_sync(unsigned int, T var, int mask) {
  return ct_cpu::warp_value(var, ct_cpu::lane() ^ ((unsigned int)mask & 31u));
}
inline unsigned int __ballot_sync(unsigned int, int predicate) {
  return ct_cpu::warp_ballot(predicate);
}
inline int __any_sync(unsigned int, int predicate) { return ct_cpu::warp_ballot(predicate) != 0; }
// The lanes that have not ended (a warp barrier here: lanes that only diverged count too).
inline unsigned int __activemask() { return ct_cpu::warp_ballot(1); }
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }

inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}

inline float __uint_as_float(unsigned int u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
inline unsigned int __float_as_uint(float f) {
  unsigned int u;
  memcpy(&u, &f, 4);
  return u;
}
inline float __int_as_float(int i) {
  float f;
  memcpy(&f, &i, 4);
  return f;
}
inline int __float_as_int(float f) {
  int i;
  memcpy(&i, &f, 4);
  return i;
}
inline double __longlong_as_double(long long i) {
  double d;
  memcpy(&d, &i, 8);
  return d;
}
inline long long __double_as_longlong(double d) {
  long long i;
  memcpy(&i, &d, 8);
  return i;
}
// CUDA's vector type the kernels use (16-byte aligned, as on the GPU), and the cache-hinted
// loads, which on the CPU are plain loads.
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
template <class T>
inline T __ldcs(const T* p) {
  return *p;
}

inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }

template <class T>
inline T min(T a, T b) {
  return b < a ? b : a;
}
template <class T>
inline T max(T a, T b) {
  return a < b ? b : a;
}
