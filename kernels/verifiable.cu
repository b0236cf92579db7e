// nccl-perf verifiable generator and checker kernels: each element of a rank's buffers is a pure
// function of the seed, the rank and its index (so any rank can compute what it must receive),
// and the checker counts the elements that differ from that beyond a tolerance.
//
// Compiled at run time by NVRTC, so this file is header-free: no #include at all.
// Every function here has a bit-identical host twin in oracle/src/generator/ (Rust, the test
// oracle); keep the two in step. Conversions to narrow float types are done in software
// (round to nearest even, fp8 saturating), and float arithmetic uses the explicit _rn
// intrinsics so that no FMA contraction or fast-math flag can change a result.
//
// Kernel interface (see crates/bench/src/verify/mod.rs):
//   np_input_<type>(void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed)
//   np_expected_<type>(void* buf, u64 count, u64 ix0, int op, int rn, u64 seed)
//   np_mismatch_<bits>(const void* got, const void* want, u64 count, u64 tol, u64* nwrong)
// op: -1 = copy pattern (Nil), 0 sum, 1 prod, 2 max, 3 min, 4 avg, 5 mulsum. rn <= 1 → Nil.
// All kernels use grid-stride loops, so any grid and block size work.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

#define NP_DEV static __device__ __forceinline__

#define NP_MUL_A 0x9e3779b97f4a7c13ull
#define NP_MUL_B 0xc4ceb9fe1a85ec53ull

enum { NP_NIL = -1, NP_SUM = 0, NP_PROD = 1, NP_MAX = 2, NP_MIN = 3, NP_AVG = 4, NP_MULSUM = 5 };

// ---------------------------------------------------------------------------------------------
// Mixing primitives: the 64-bit hash of an element's coordinates

NP_DEV u64 np_mix(u64 x) {
  u32 hi = (u32)(x >> 32) + 1u;
  u32 lo = (u32)x ^ hi;
  u64 y = ((((u64)hi) << 32) | (u64)lo) * NP_MUL_A;
  u32 yh = (u32)(y >> 32);
  u32 yl = (u32)y ^ ((yh << 16) | (yh >> 16));
  return (y & 0xffffffff00000000ull) | (u64)yl;
}

NP_DEV u64 np_hash(u64 a, u64 b) {
  a += 1ull << 32;
  a += b;
  a ^= a >> 32;
  a *= NP_MUL_A;
  a += (b >> 16) ^ (b << 48);
  a ^= a >> 32;
  a *= NP_MUL_B;
  return a;
}

// Unsigned division with the GPU's answer to division by zero (all ones), made explicit.
NP_DEV u64 np_div(u64 a, u64 b, u64 mask) { return b == 0 ? mask : (a / b) & mask; }

// Shuffled rank of rme among rn ranks; advances *rng by one mix.
NP_DEV u32 np_shuffle(u32 rn, u32 rme, u64* rng) {
  u32 a = (u32)*rng;
  u32 b = (u32)(*rng >> 32);
  *rng = np_mix(*rng);
  u32 m = rn == 0 ? 0u : (0x7fffffffu >> __clz((int)rn));
  u32 r = rme;
  if (r <= m) {
    r = (r * (a | 1u) + b) & m;
    r = ((r * r + r) / 2u) & m;
    r += rn - (m + 1u);
  } else {
    r -= m + 1u;
  }
  if (r <= m) {
    r = (r * (b | 1u) + a) & m;
    r = ((r * r + r) / 2u) & m;
  }
  return r;
}

// Rank rme's part of a random total *y split over rn ranks (spec sumXY); advances *rng once.
NP_DEV u64 np_sum_xy(bool wide, u32 rn, u32 rme, u64* rng, u64 ymax, u64* y, bool avoid) {
  u64 mask = wide ? ~0ull : 0xffffffffull;
  u64 ymin = ((ymax + 1ull) & mask) / 2ull;
  u64 span = (ymax / 2ull + (avoid ? 0ull : 1ull)) & mask;
  u64 d = wide ? __umul64hi(*rng, span) : (u64)__umulhi((u32)*rng, (u32)span);
  u64 start = avoid ? ((*y + 1ull) & mask) : ymin;
  u64 y1 = (start + d) & mask;
  u64 back = (avoid && (y1 < ymin || y1 > ymax)) ? ymax / 2ull : 0ull;
  u64 yv = (y1 - back) & mask;
  *y = yv;
  *rng = np_mix(*rng);

  u64 rn64 = (u64)rn;
  u64 pn = rn == 1u ? 1ull : ((np_div(yv, rn64, mask) * 2ull - 1ull) & mask);
  if (pn == 0ull) pn = 1ull;
  if (pn > rn64) pn = rn64;
  u64 psum_mask = ymax <= 0x7fffffffull ? 0xffffffffull : ~0ull;
  u64 psum = ((pn * (pn + 1ull)) & psum_mask) / 2ull;
  u64 s1 = np_div(yv, psum, mask);
  u64 s2 = np_div(rn64, pn, mask);
  u32 s = (u32)(s1 < s2 ? s1 : s2);
  // s == 0: quotient 0xFFFFFFFF, so only the last rank contributes (keeps the sum exact).
  u32 q = s == 0u ? 0xffffffffu : rme / s;
  u64 x = (u64)q < pn ? 1ull + (u64)q : 0ull;
  if (rme == rn - 1u) x = (x + (yv - (u64)s * psum)) & mask;
  return x;
}

// ---------------------------------------------------------------------------------------------
// Float layouts: fields, exact decoding, round-to-nearest-even encoding.

struct NpLay {
  u32 e;       // exponent bits
  u32 m;       // mantissa bits
  bool sat;    // fp8: overflow saturates to the largest finite value
  bool noinf;  // e4m3: no infinities, only all-ones is NaN
};

// Layouts of the six float types (initialisers for NpLay).
#define NP_HALF_LAY {5u, 10u, false, false}
#define NP_FLOAT_LAY {8u, 23u, false, false}
#define NP_DOUBLE_LAY {11u, 52u, false, false}
#define NP_BF16_LAY {8u, 7u, false, false}
#define NP_E4M3_LAY {4u, 3u, true, true}
#define NP_E5M2_LAY {5u, 2u, true, false}

NP_DEV u32 np_bias(NpLay l) { return (1u << (l.e - 1u)) - 1u; }
NP_DEV u64 np_mmask(NpLay l) { return (1ull << l.m) - 1ull; }
NP_DEV u64 np_emask(NpLay l) { return (1ull << l.e) - 1ull; }

NP_DEV u64 np_make(NpLay l, u64 sign, u64 exp, u64 mant) {
  return ((sign & 1ull) << (l.e + l.m)) | ((exp & np_emask(l)) << l.m) | (mant & np_mmask(l));
}

// v·2^(base − bias − M) with the given sign; v == 0 gives +0.
NP_DEV u64 np_normalise(NpLay l, u64 sign, u32 base, u64 v) {
  if (v == 0ull) return 0ull;
  u32 top = 63u - (u32)__clzll((i64)v);
  u32 exp;
  u64 mant;
  if (top <= l.m) {
    u32 k = l.m - top;
    exp = base - k;
    mant = v << k;
  } else {
    u32 k = top - l.m;
    exp = base + k;
    mant = v >> k;
  }
  return np_make(l, sign, (u64)exp, mant);
}

NP_DEV u64 np_max_finite(NpLay l) {
  return l.noinf ? ((np_emask(l) << l.m) | (np_mmask(l) - 1ull)) : ((np_emask(l) << l.m) - 1ull);
}

NP_DEV double np_pow2(i64 k) { return __longlong_as_double((k + 1023ll) << 52); }

// Exact value of a bit pattern.
NP_DEV double np_to_double(NpLay l, u64 bits) {
  if (l.m == 52u) return __longlong_as_double((i64)bits);
  double sign = ((bits >> (l.e + l.m)) & 1ull) ? -1.0 : 1.0;
  u64 ef = (bits >> l.m) & np_emask(l);
  u64 mf = bits & np_mmask(l);
  i64 bias = (i64)np_bias(l);
  i64 m = (i64)l.m;
  if (ef == np_emask(l) && (!l.noinf || mf == np_mmask(l))) {
    if (mf == 0ull && !l.noinf) return sign * __longlong_as_double(0x7ff0000000000000ll);
    return __longlong_as_double(0x7ff8000000000000ll);
  }
  u64 sig;
  i64 scale;
  if (ef == 0ull) {
    sig = mf;
    scale = 1ll - bias - m;
  } else {
    sig = mf | (1ull << l.m);
    scale = (i64)ef - bias - m;
  }
  return __dmul_rn(__dmul_rn(sign, __ull2double_rn(sig)), np_pow2(scale));
}

// x rounded to nearest even into the layout.
NP_DEV u64 np_from_double(NpLay l, double x) {
  u64 xb = (u64)__double_as_longlong(x);
  if (l.m == 52u) return xb;
  u64 sign_bit = (xb >> 63) << (l.e + l.m);
  if ((xb & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) {
    return sign_bit | (np_emask(l) << l.m) | np_mmask(l);
  }
  i64 e64 = (i64)((xb >> 52) & 0x7ffull);
  u64 f64m = xb & ((1ull << 52) - 1ull);
  if (e64 == 0) return sign_bit;
  u64 overflow = l.sat ? np_max_finite(l) : (np_emask(l) << l.m);
  u64 sig = f64m | (1ull << 52);
  i64 te = e64 - 1023ll + (i64)np_bias(l);
  if (te > (i64)np_emask(l)) return sign_bit | overflow;
  i64 shift = 52ll - (i64)l.m + (te >= 1 ? 0ll : 1ll - te);
  if (shift > 54) return sign_bit;
  u64 q = sig >> shift;
  u64 rem = sig & ((1ull << shift) - 1ull);
  u64 half = 1ull << (shift - 1);
  if (rem > half || (rem == half && (q & 1ull))) q += 1ull;
  u64 mag = te >= 1 ? ((((u64)(te - 1)) << l.m) + q) : q;
  if (mag > np_max_finite(l)) mag = overflow;
  return sign_bit | mag;
}

// ---------------------------------------------------------------------------------------------
// Element generators

NP_DEV u64 np_low_mask(u32 w) { return ~0ull >> (64u - w); }

NP_DEV u64 np_index_hash(u32 rme, u64 seed, u64 ix) { return np_hash(ix ^ (ix << 16) ^ (u64)rme, seed); }

NP_DEV u64 np_nil_int(u32 w, u64 seed, u64 ix) { return np_mix(seed ^ ix) >> (64u - w); }

NP_DEV u64 np_int_input(u32 w, int op, u32 rme, u64 seed, u64 ix) {
  u64 v = np_index_hash(rme, seed, ix) & np_low_mask(w);
  return (op == NP_PROD && v == 0ull) ? 1ull : v;
}

NP_DEV i64 np_sext(u64 v, u32 w) { return ((i64)(v << (64u - w))) >> (64u - w); }

// Reduction of two integers of w bits (sum/avg/mulsum add; min/max compare).
NP_DEV u64 np_int_reduce(u32 w, bool is_signed, int op, u64 a, u64 b) {
  u64 mask = np_low_mask(w);
  if (op == NP_PROD) return (a * b) & mask;
  if (op == NP_MAX || op == NP_MIN) {
    bool less = is_signed ? (np_sext(a, w) < np_sext(b, w)) : (a < b);  // a < b
    bool more = is_signed ? (np_sext(b, w) < np_sext(a, w)) : (b < a);  // b < a
    if (op == NP_MAX) return less ? b : a;
    return more ? b : a;
  }
  return (a + b) & mask;
}

NP_DEV u64 np_int_expected(u32 w, bool is_signed, int op, u32 rn, u64 seed, u64 ix) {
  u64 mask = np_low_mask(w);
  u64 acc = 0ull;
  for (u32 r = 0; r < rn; r++) {
    u64 v = np_int_input(w, op, r, seed, ix);
    if (op == NP_MULSUM && (r & 1u)) v = (v + v) & mask;
    acc = r == 0 ? v : np_int_reduce(w, is_signed, op, acc, v);
  }
  if (op == NP_AVG && rn != 0u) {
    if (is_signed) {
      acc = (u64)(np_sext(acc, w) / (i64)rn) & mask;
    } else {
      acc = acc / (u64)rn;
    }
  }
  return acc;
}

NP_DEV u64 np_nil_float(NpLay l, u32 rme, u64 seed, u64 ix) {
  u64 r = np_index_hash(rme, seed, ix);
  u64 sign = r & 1ull;
  r ^= r >> 1;
  u64 exp = (r & ((1ull << (l.e - 1u)) - 1ull)) + (1ull << (l.e - 2u));
  r ^= r >> l.e;
  return np_make(l, sign, exp, r & np_mmask(l));
}

NP_DEV u32 np_sum_base(NpLay l, u64 rng) {
  u32 span = ((1u << l.e) - 1u) - (l.m + 1u);
  return (l.m + 1u) + __umulhi((u32)(rng >> 32), span);
}

NP_DEV u32 np_half_up(u32 rn) { return rn / 2u + (rn & 1u); }

// Float sum: even shuffled ranks add, odd ones subtract.
NP_DEV void np_float_sum(NpLay l, u32 rn, u32 rme, u64 seed, u64 ix, u64* in, u64* out) {
  bool wide = l.m > 31u;
  u64 ymax = (1ull << (l.m + 1u)) - 1ull;
  u64 rng = np_hash(seed, ix);
  u64 ysign = rng & 1ull;
  u64 xsign = ysign;
  u32 base = np_sum_base(l, rng);
  rng = np_mix(rng);
  u32 r = np_shuffle(rn, rme, &rng);
  u64 y0 = 0ull;
  u64 x = np_sum_xy(wide, np_half_up(rn), r / 2u, &rng, ymax, &y0, false);
  u64 y = y0;
  if (rn / 2u != 0u) {
    u64 y1 = y0;
    u64 x1 = np_sum_xy(wide, rn / 2u, r / 2u, &rng, ymax, &y1, true);
    ysign ^= (y0 < y1) ? 1ull : 0ull;
    y = y0 > y1 ? y0 - y1 : y1 - y0;
    xsign ^= (u64)(r % 2u);
    if (r % 2u == 1u) x = x1;
  }
  *in = np_normalise(l, xsign, base, x);
  *out = np_normalise(l, ysign, base, y);
}

// Float prod: one shuffled rank holds the mantissa, the others powers of two.
NP_DEV void np_float_prod(NpLay l, u32 rn, u32 rme, u64 seed, u64 ix, u64* in, u64* out) {
  u64 rng = np_hash(seed, ix);
  u32 r = np_shuffle(rn, rme, &rng);
  u64 ysign = (u64)((rn / 2u) % 2u);
  u64 xsign = (u64)(r % 2u);
  u64 bias = (u64)np_bias(l);
  u64 ye = 0ull;
  u64 xe = np_sum_xy(false, rn, r, &rng, bias, &ye, false);
  u64 ym = rng & np_mmask(l);
  if (ym == 0ull) ym = 1ull;
  *in = np_make(l, xsign, xe + bias, r == 0u ? ym : 0ull);
  *out = np_make(l, ysign, ye + bias, ym);
}

// Float PreMulSum with scalar 1 on even ranks and 2 on odd ranks.
NP_DEV void np_float_mulsum(NpLay l, u32 rn, u32 rme, u64 seed, u64 ix, u64* in, u64* out) {
  bool wide = l.m > 31u;
  u64 ymax = (1ull << (l.m + 1u)) - 1ull;
  u64 rng = np_hash(seed, ix);
  u64 ysign = rng & 1ull;
  u32 base = np_sum_base(l, rng);
  rng = np_mix(rng);
  u32 s0 = np_shuffle(np_half_up(rn), rme / 2u, &rng);
  u32 s1 = np_shuffle(rn / 2u, rme / 2u, &rng);
  u64 y0 = 0ull;
  u64 x0 = np_sum_xy(wide, np_half_up(rn), s0, &rng, ymax >> 1, &y0, false);
  u64 x1 = 0ull;
  u64 y1 = 0ull;
  if (rn / 2u != 0u) x1 = np_sum_xy(wide, rn / 2u, s1, &rng, ymax >> 2, &y1, false);
  *in = np_normalise(l, ysign, base, (rme % 2u == 0u) ? x0 : x1);
  *out = np_normalise(l, ysign, base, y0 + 2ull * y1);
}

// Float avg: independent of the index; two shuffled ranks hold 1 + m, the rest zero.
// is_float / is_fp8 pick how the expected a + b is added (float: in float; fp8: via half).
NP_DEV void np_float_avg(NpLay l, bool is_float, bool is_fp8, u32 rn, u32 rme, u64 seed, u64* in,
                         u64* out) {
  u64 rng = seed;
  u32 r = np_shuffle(rn, rme, &rng);
  u64 mask = np_mmask(l);
  u64 m = (rng * (r == 0u ? 1ull : 0xbeefull)) & mask;
  *in = r < 2u ? np_normalise(l, 0ull, np_bias(l) + l.m, 1ull + m) : 0ull;
  u64 m0 = rng & mask;
  u64 m1 = (rng * 0xbeefull) & mask;
  if (l.m == 52u) {
    double inv = __ddiv_rn(1.0, __uint2double_rn(rn));
    double a = __dmul_rn(__ull2double_rn(1ull + m0), inv);
    double b = __dmul_rn(__ull2double_rn(1ull + m1), inv);
    *out = (u64)__double_as_longlong(__dadd_rn(a, b));
    return;
  }
  float inv = __double2float_rn(__ddiv_rn(1.0, __uint2double_rn(rn)));
  u64 ab = np_from_double(l, (double)__fmul_rn(__uint2float_rn((u32)(1ull + m0)), inv));
  u64 bb = np_from_double(l, (double)__fmul_rn(__uint2float_rn((u32)(1ull + m1)), inv));
  double a = np_to_double(l, ab);
  double b = np_to_double(l, bb);
  if (is_float) {
    *out = (u64)__float_as_uint(__fadd_rn(__double2float_rn(a), __double2float_rn(b)));
  } else if (is_fp8) {
    NpLay half_lay = NP_HALF_LAY;
    *out = np_from_double(l, np_to_double(half_lay, np_from_double(half_lay, __dadd_rn(a, b))));
  } else {
    *out = np_from_double(l, __dadd_rn(a, b));
  }
}

// Float min/max: fold of every rank's copy pattern.
NP_DEV u64 np_float_minmax(NpLay l, int op, u32 rn, u64 seed, u64 ix) {
  u64 best = np_nil_float(l, 0u, seed, ix);
  for (u32 r = 1u; r < rn; r++) {
    u64 v = np_nil_float(l, r, seed, ix);
    double bv = np_to_double(l, best);
    double vv = np_to_double(l, v);
    bool take = op == NP_MAX ? (bv < vv) : (vv < bv);
    if (take) best = v;
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// Per-element dispatch

NP_DEV int np_effective_op(int op, u32 rn) {
  if (rn <= 1u || op < NP_SUM || op > NP_MULSUM) return NP_NIL;
  return op;
}

NP_DEV u64 np_int_input_elem(u32 w, int op, u32 rn, u32 rme, u64 seed, u64 ix) {
  op = np_effective_op(op, rn);
  return op == NP_NIL ? np_nil_int(w, seed, ix) : np_int_input(w, op, rme, seed, ix);
}

NP_DEV u64 np_int_expected_elem(u32 w, bool is_signed, int op, u32 rn, u64 seed, u64 ix) {
  op = np_effective_op(op, rn);
  return op == NP_NIL ? np_nil_int(w, seed, ix) : np_int_expected(w, is_signed, op, rn, seed, ix);
}

// want_expected: false → rank rme's input, true → the expected result.
NP_DEV u64 np_float_elem(NpLay l, bool is_float, bool is_fp8, bool want_expected, int op, u32 rn,
                         u32 rme, u64 seed, u64 ix) {
  op = np_effective_op(op, rn);
  u64 in = 0ull, out = 0ull;
  switch (op) {
    case NP_SUM: np_float_sum(l, rn, rme, seed, ix, &in, &out); break;
    case NP_PROD: np_float_prod(l, rn, rme, seed, ix, &in, &out); break;
    case NP_MULSUM: np_float_mulsum(l, rn, rme, seed, ix, &in, &out); break;
    case NP_AVG: np_float_avg(l, is_float, is_fp8, rn, rme, seed, &in, &out); break;
    case NP_MAX:
    case NP_MIN:
      if (want_expected) return np_float_minmax(l, op, rn, seed, ix);
      return np_nil_float(l, rme, seed, ix);
    default: return np_nil_float(l, want_expected ? 0u : rme, seed, ix);
  }
  return want_expected ? out : in;
}

// ---------------------------------------------------------------------------------------------
// Kernel bodies (grid-stride loops)

NP_DEV u64 np_tid() { return (u64)blockIdx.x * (u64)blockDim.x + (u64)threadIdx.x; }
NP_DEV u64 np_stride() { return (u64)blockDim.x * (u64)gridDim.x; }

template <typename S>
NP_DEV void np_int_input_body(u32 w, void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed) {
  S* out = (S*)buf;
  for (u64 i = np_tid(); i < count; i += np_stride())
    out[i] = (S)np_int_input_elem(w, op, (u32)rn, (u32)rme, seed, ix0 + i);
}

template <typename S>
NP_DEV void np_int_expected_body(u32 w, bool is_signed, void* buf, u64 count, u64 ix0, int op, int rn,
                                 u64 seed) {
  S* out = (S*)buf;
  for (u64 i = np_tid(); i < count; i += np_stride())
    out[i] = (S)np_int_expected_elem(w, is_signed, op, (u32)rn, seed, ix0 + i);
}

template <typename S>
NP_DEV void np_float_body(NpLay l, bool is_float, bool is_fp8, bool want_expected, void* buf, u64 count,
                          u64 ix0, int op, int rn, int rme, u64 seed) {
  S* out = (S*)buf;
  for (u64 i = np_tid(); i < count; i += np_stride())
    out[i] = (S)np_float_elem(l, is_float, is_fp8, want_expected, op, (u32)rn, (u32)rme, seed, ix0 + i);
}

template <typename S>
NP_DEV void np_mismatch_body(const void* got, const void* want, u64 count, u64 tol, u64* nwrong) {
  __shared__ u64 block_wrong;
  if (threadIdx.x == 0) block_wrong = 0ull;
  __syncthreads();
  const S* g = (const S*)got;
  const S* w = (const S*)want;
  u64 n = 0ull;
  for (u64 i = np_tid(); i < count; i += np_stride()) {
    u64 a = (u64)g[i];
    u64 b = (u64)w[i];
    u64 d = a > b ? a - b : b - a;
    if (d > tol) n += 1ull;
  }
  if (n != 0ull) atomicAdd(&block_wrong, n);
  __syncthreads();
  if (threadIdx.x == 0 && block_wrong != 0ull) atomicAdd(nwrong, block_wrong);
}

// ---------------------------------------------------------------------------------------------
// Which datatypes get kernels: all of them, unless the compiler is given -DNP_SOME and one
// -DNP_T_<type>=1 per wanted type (fewer kernels compile faster at run time).

#ifdef NP_SOME
#define NP_WANT(t) NP_T_##t
#else
#define NP_WANT(t) 1
#endif

// ---------------------------------------------------------------------------------------------
// Input kernels

#if NP_WANT(int8)
extern "C" __global__ void np_input_int8(void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed) {
  np_int_input_body<u8>(8u, buf, count, ix0, op, rn, rme, seed);
}
#endif
#if NP_WANT(uint8)
extern "C" __global__ void np_input_uint8(void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed) {
  np_int_input_body<u8>(8u, buf, count, ix0, op, rn, rme, seed);
}
#endif
#if NP_WANT(int32)
extern "C" __global__ void np_input_int32(void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed) {
  np_int_input_body<u32>(32u, buf, count, ix0, op, rn, rme, seed);
}
#endif
#if NP_WANT(uint32)
extern "C" __global__ void np_input_uint32(void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed) {
  np_int_input_body<u32>(32u, buf, count, ix0, op, rn, rme, seed);
}
#endif
#if NP_WANT(int64)
extern "C" __global__ void np_input_int64(void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed) {
  np_int_input_body<u64>(64u, buf, count, ix0, op, rn, rme, seed);
}
#endif
#if NP_WANT(uint64)
extern "C" __global__ void np_input_uint64(void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed) {
  np_int_input_body<u64>(64u, buf, count, ix0, op, rn, rme, seed);
}
#endif
#if NP_WANT(half)
extern "C" __global__ void np_input_half(void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed) {
  NpLay l = NP_HALF_LAY;
  np_float_body<u16>(l, false, false, false, buf, count, ix0, op, rn, rme, seed);
}
#endif
#if NP_WANT(float)
extern "C" __global__ void np_input_float(void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed) {
  NpLay l = NP_FLOAT_LAY;
  np_float_body<u32>(l, true, false, false, buf, count, ix0, op, rn, rme, seed);
}
#endif
#if NP_WANT(double)
extern "C" __global__ void np_input_double(void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed) {
  NpLay l = NP_DOUBLE_LAY;
  np_float_body<u64>(l, false, false, false, buf, count, ix0, op, rn, rme, seed);
}
#endif
#if NP_WANT(bfloat16)
extern "C" __global__ void np_input_bfloat16(void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed) {
  NpLay l = NP_BF16_LAY;
  np_float_body<u16>(l, false, false, false, buf, count, ix0, op, rn, rme, seed);
}
#endif
#if NP_WANT(f8e4m3)
extern "C" __global__ void np_input_f8e4m3(void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed) {
  NpLay l = NP_E4M3_LAY;
  np_float_body<u8>(l, false, true, false, buf, count, ix0, op, rn, rme, seed);
}
#endif
#if NP_WANT(f8e5m2)
extern "C" __global__ void np_input_f8e5m2(void* buf, u64 count, u64 ix0, int op, int rn, int rme, u64 seed) {
  NpLay l = NP_E5M2_LAY;
  np_float_body<u8>(l, false, true, false, buf, count, ix0, op, rn, rme, seed);
}
#endif

// ---------------------------------------------------------------------------------------------
// Expected kernels

#if NP_WANT(int8)
extern "C" __global__ void np_expected_int8(void* buf, u64 count, u64 ix0, int op, int rn, u64 seed) {
  np_int_expected_body<u8>(8u, true, buf, count, ix0, op, rn, seed);
}
#endif
#if NP_WANT(uint8)
extern "C" __global__ void np_expected_uint8(void* buf, u64 count, u64 ix0, int op, int rn, u64 seed) {
  np_int_expected_body<u8>(8u, false, buf, count, ix0, op, rn, seed);
}
#endif
#if NP_WANT(int32)
extern "C" __global__ void np_expected_int32(void* buf, u64 count, u64 ix0, int op, int rn, u64 seed) {
  np_int_expected_body<u32>(32u, true, buf, count, ix0, op, rn, seed);
}
#endif
#if NP_WANT(uint32)
extern "C" __global__ void np_expected_uint32(void* buf, u64 count, u64 ix0, int op, int rn, u64 seed) {
  np_int_expected_body<u32>(32u, false, buf, count, ix0, op, rn, seed);
}
#endif
#if NP_WANT(int64)
extern "C" __global__ void np_expected_int64(void* buf, u64 count, u64 ix0, int op, int rn, u64 seed) {
  np_int_expected_body<u64>(64u, true, buf, count, ix0, op, rn, seed);
}
#endif
#if NP_WANT(uint64)
extern "C" __global__ void np_expected_uint64(void* buf, u64 count, u64 ix0, int op, int rn, u64 seed) {
  np_int_expected_body<u64>(64u, false, buf, count, ix0, op, rn, seed);
}
#endif
#if NP_WANT(half)
extern "C" __global__ void np_expected_half(void* buf, u64 count, u64 ix0, int op, int rn, u64 seed) {
  NpLay l = NP_HALF_LAY;
  np_float_body<u16>(l, false, false, true, buf, count, ix0, op, rn, 0, seed);
}
#endif
#if NP_WANT(float)
extern "C" __global__ void np_expected_float(void* buf, u64 count, u64 ix0, int op, int rn, u64 seed) {
  NpLay l = NP_FLOAT_LAY;
  np_float_body<u32>(l, true, false, true, buf, count, ix0, op, rn, 0, seed);
}
#endif
#if NP_WANT(double)
extern "C" __global__ void np_expected_double(void* buf, u64 count, u64 ix0, int op, int rn, u64 seed) {
  NpLay l = NP_DOUBLE_LAY;
  np_float_body<u64>(l, false, false, true, buf, count, ix0, op, rn, 0, seed);
}
#endif
#if NP_WANT(bfloat16)
extern "C" __global__ void np_expected_bfloat16(void* buf, u64 count, u64 ix0, int op, int rn, u64 seed) {
  NpLay l = NP_BF16_LAY;
  np_float_body<u16>(l, false, false, true, buf, count, ix0, op, rn, 0, seed);
}
#endif
#if NP_WANT(f8e4m3)
extern "C" __global__ void np_expected_f8e4m3(void* buf, u64 count, u64 ix0, int op, int rn, u64 seed) {
  NpLay l = NP_E4M3_LAY;
  np_float_body<u8>(l, false, true, true, buf, count, ix0, op, rn, 0, seed);
}
#endif
#if NP_WANT(f8e5m2)
extern "C" __global__ void np_expected_f8e5m2(void* buf, u64 count, u64 ix0, int op, int rn, u64 seed) {
  NpLay l = NP_E5M2_LAY;
  np_float_body<u8>(l, false, true, true, buf, count, ix0, op, rn, 0, seed);
}
#endif

// ---------------------------------------------------------------------------------------------
// Mismatch counters: |got − want| > tol on the raw bits, one atomicAdd per block.

extern "C" __global__ void np_mismatch_8(const void* got, const void* want, u64 count, u64 tol, u64* nwrong) {
  np_mismatch_body<u8>(got, want, count, tol, nwrong);
}
extern "C" __global__ void np_mismatch_16(const void* got, const void* want, u64 count, u64 tol, u64* nwrong) {
  np_mismatch_body<u16>(got, want, count, tol, nwrong);
}
extern "C" __global__ void np_mismatch_32(const void* got, const void* want, u64 count, u64 tol, u64* nwrong) {
  np_mismatch_body<u32>(got, want, count, tol, nwrong);
}
extern "C" __global__ void np_mismatch_64(const void* got, const void* want, u64 count, u64 tol, u64* nwrong) {
  np_mismatch_body<u64>(got, want, count, tol, nwrong);
}
