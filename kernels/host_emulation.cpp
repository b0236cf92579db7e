// Host emulation of kernels/verifiable.cu, for testing without a GPU.
//
// Compiles the CUDA source as plain C++ with the few CUDA built-ins it uses defined below
// (IEEE double/float arithmetic, the integer intrinsics), runs every generator kernel with one
// thread (grid-stride loops then cover every element), and prints one line per element:
//   E <type> <op> <rn> <seed> <ix> <bits>          expected value
//   I <type> <op> <rn> <rme> <seed> <ix> <bits>    rank rme's input
//   M <bits> <tol> <count>                          mismatch-kernel count on a fixed pattern
// (hex for seed, ix and value bits). tests/gpu_generator.rs compares these lines with the Rust mirror.
// Build: g++ -std=c++17 -O1 -ffp-contract=off host_emulation.cpp (x86-64: SSE arithmetic).

#include <cstdio>
#include <cstring>

#define __device__
#define __global__
#define __forceinline__ inline
#define __shared__ static

struct NpDim3 { unsigned x; };
static NpDim3 blockIdx{0}, threadIdx{0}, blockDim{1}, gridDim{1};

static inline unsigned __umulhi(unsigned a, unsigned b) {
  return (unsigned)(((unsigned long long)a * b) >> 32);
}
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, 8); return d; }
static inline long long __double_as_longlong(double d) { long long x; memcpy(&x, &d, 8); return x; }
static inline unsigned __float_as_uint(float f) { unsigned x; memcpy(&x, &f, 4); return x; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __double2float_rn(double a) { return (float)a; }
static inline double __uint2double_rn(unsigned a) { return (double)a; }
static inline double __ull2double_rn(unsigned long long a) { return (double)a; }
static inline float __uint2float_rn(unsigned a) { return (float)a; }
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  unsigned long long old = *p;
  *p += v;
  return old;
}
static inline void __syncthreads() {}

#include "verifiable.cu"

typedef void (*InFn)(void*, u64, u64, int, int, int, u64);
typedef void (*ExFn)(void*, u64, u64, int, int, u64);
typedef void (*MmFn)(const void*, const void*, u64, u64, u64*);

struct NpType {
  const char* name;
  int size;
  InFn in;
  ExFn ex;
};

static u64 load(const unsigned char* p, int size) {
  u64 v = 0;
  memcpy(&v, p, size);  // little-endian host
  return v;
}

int main() {
  const NpType types[] = {
      {"int8", 1, np_input_int8, np_expected_int8},
      {"uint8", 1, np_input_uint8, np_expected_uint8},
      {"int32", 4, np_input_int32, np_expected_int32},
      {"uint32", 4, np_input_uint32, np_expected_uint32},
      {"int64", 8, np_input_int64, np_expected_int64},
      {"uint64", 8, np_input_uint64, np_expected_uint64},
      {"half", 2, np_input_half, np_expected_half},
      {"float", 4, np_input_float, np_expected_float},
      {"double", 8, np_input_double, np_expected_double},
      {"bfloat16", 2, np_input_bfloat16, np_expected_bfloat16},
      {"f8e4m3", 1, np_input_f8e4m3, np_expected_f8e4m3},
      {"f8e5m2", 1, np_input_f8e5m2, np_expected_f8e5m2},
  };
  const unsigned rns[] = {1, 2, 3, 4, 5, 7, 8, 16, 31, 33, 64, 72};
  const u64 seeds[2][2] = {{7ull, 0ull}, {0x0123456789abcdefull, (1ull << 62) + 12345ull}};
  const u64 n = 64;
  static unsigned char buf[8 * 64];
  for (const NpType& t : types) {
    for (int op = -1; op <= 5; op++) {
      for (unsigned rn : rns) {
        for (const auto& s : seeds) {
          t.ex(buf, n, s[1], op, (int)rn, s[0]);
          for (u64 i = 0; i < n; i++)
            printf("E %s %d %u %llx %llx %llx\n", t.name, op, rn, s[0], s[1] + i,
                   load(buf + i * t.size, t.size));
          const unsigned rmes[4] = {0u, 1u, rn / 2u, rn - 1u};
          for (int k = 0; k < 4; k++) {
            unsigned rme = rmes[k];
            bool seen = rme >= rn;
            for (int j = 0; j < k; j++) seen = seen || rmes[j] == rme;
            if (seen) continue;
            t.in(buf, n, s[1], op, (int)rn, (int)rme, s[0]);
            for (u64 i = 0; i < n; i++)
              printf("I %s %d %u %u %llx %llx %llx\n", t.name, op, rn, rme, s[0], s[1] + i,
                     load(buf + i * t.size, t.size));
          }
        }
      }
    }
  }
  // Mismatch kernels on a fixed pattern: element i of got is i, of want is i + (i % 7).
  const MmFn mm[4] = {np_mismatch_8, np_mismatch_16, np_mismatch_32, np_mismatch_64};
  const int bits[4] = {8, 16, 32, 64};
  static unsigned char got[8 * 300], want[8 * 300];
  for (int k = 0; k < 4; k++) {
    int size = bits[k] / 8;
    for (u64 i = 0; i < 300; i++) {
      u64 g = i, w = i + (i % 7);
      memcpy(got + i * size, &g, size);
      memcpy(want + i * size, &w, size);
    }
    for (u64 tol = 0; tol < 4; tol++) {
      u64 count = 0;
      mm[k](got, want, 300, tol, &count);
      printf("M %d %llu %llu\n", bits[k], tol, count);
    }
  }
  return 0;
}
