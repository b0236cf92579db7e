/* A stand-in for the plugin loading of NCCL 2.22 to 2.26 (tests/capture_old_nccl.rs), written
 * from our reading of NCCL's src/misc/profiler.cc, tuner.cc (2.22-2.25) and src/plugin/ (2.26):
 * with NCCL_PROFILER_PLUGIN / NCCL_TUNER_PLUGIN=STATIC_PLUGIN, NCCL opens the program itself
 * (dlopen(NULL)) and looks its versioned tables up with dlsym, newest first, in the order each
 * version has; it calls the profiler's init(context, &mask), reads the mask before each call and
 * sends collective events only while the collective bit is set, each under a group event; it
 * hands the tuner its cost table (numAlgo x numProto floats). Descriptors are the C layout of
 * each version's collective member (v1: one-byte enum indexes; v2: names and trafficBytes; v3:
 * names, no trafficBytes). Nothing of NCCL is linked. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct coll_v1 {
  const char *name; uint64_t hash, seq; uint8_t func; const void *send; void *recv;
  size_t count; int root; uint8_t datatype; uint32_t op; size_t traffic;
  uint8_t channels, warps, algo, proto; int collnet, nvls;
};
struct coll_v2 {
  const char *name; uint64_t hash, seq; const char *func; const void *send; void *recv;
  size_t count; int root; const char *datatype; size_t traffic;
  uint8_t channels, warps; const char *algo, *proto;
};
struct coll_v3 {
  const char *name; uint64_t hash, seq; const char *func; const void *send; void *recv;
  size_t count; int root; const char *datatype;
  uint8_t channels, warps; const char *algo, *proto;
};
struct descr {
  uint8_t type; void *parent; int rank;
  union { struct coll_v1 v1; struct coll_v2 v2; struct coll_v3 v3; char room[128]; } u;
};
struct profiler {
  const char *name;
  int (*init)(void **context, int *mask);
  int (*start)(void *context, void **handle, struct descr *d);
  int (*stop)(void *handle);
  int (*record)(void *handle, int state, void *args);
  int (*finalize)(void *context);
};
struct tuner_v3 {
  const char *name;
  int (*init)(size_t ranks, size_t nodes, void *log, void **context);
  int (*get)(void *context, int coll, size_t bytes, int pipe, float **table, int algos,
             int protos, int *channels);
  int (*destroy)(void *context);
};
struct tuner_v4 {
  const char *name;
  int (*init)(size_t ranks, size_t nodes, void *log, void **context);
  int (*get)(void *context, int coll, size_t bytes, int pipe, float **table, int algos,
             int protos, int reg, int *channels);
  int (*destroy)(void *context);
};

static int mask; /* NCCL's activation mask variable */

/* The first of `names` the program exports, its index in `found`. */
static void *lookup(void *self, const char *const *names, int n, int *found) {
  for (int i = 0; i < n; i++) {
    void *t = dlsym(self, names[i]);
    if (t) { *found = i; return t; }
  }
  *found = -1;
  return NULL;
}

/* As NCCL `version` (22203, 22304, 22503, 22605): loads both plugins from the program, makes
 * one AllReduce call of 1 MiB chosen as Ring/LL128 on 6 channels. `profiler_out` and `tuner_out`
 * get the table names found ("" for none). Returns the number of collective events sent, or -1
 * when a plugin call failed. */
int fake_nccl_call(int version, char *profiler_out, char *tuner_out) {
  static const char *const p_names[] = {"ncclProfiler_v3", "ncclProfiler_v2", "ncclProfiler_v1"};
  static const char *const t_names[] = {"ncclTunerPlugin_v4", "ncclTunerPlugin_v3"};
  int p_first = version >= 22600 ? 0 : version >= 22400 ? 1 : version >= 22300 ? 2 : 3;
  int t_first = version >= 22400 ? 0 : 1;
  void *self = dlopen(NULL, RTLD_NOW | RTLD_LOCAL);
  int p_found = -1, t_found = -1, sent = 0;
  struct profiler *p = p_first < 3 ? lookup(self, p_names + p_first, 3 - p_first, &p_found) : NULL;
  void *t = lookup(self, t_names + t_first, 2 - t_first, &t_found);
  strcpy(profiler_out, p ? p_names[p_first + p_found] : "");
  strcpy(tuner_out, t ? t_names[t_first + t_found] : "");

  float table[7][3];
  for (int a = 0; a < 7; a++)
    for (int q = 0; q < 3; q++) table[a][q] = -1.0f;
  table[1][1] = 12.5f; /* Ring/LL128 */
  int algos = version < 22300 ? 6 : 7, channels = 0;
  if (t) {
    void *tctx = NULL;
    int v4 = t_first + t_found == 0;
    struct tuner_v3 *t3 = t;
    struct tuner_v4 *t4 = t;
    if ((v4 ? t4->init : t3->init)(2, 1, NULL, &tctx)) return -1;
    int r = v4 ? t4->get(tctx, 4, 1 << 20, 1, (float **)table, algos, 3, 0, &channels)
               : t3->get(tctx, 4, 1 << 20, 1, (float **)table, algos, 3, &channels);
    if (r || (v4 ? t4->destroy : t3->destroy)(tctx)) return -1;
  }
  if (p) {
    void *ctx = NULL, *group = NULL, *event = NULL;
    if (p->init(&ctx, &mask)) return -1;
    if (__atomic_load_n(&mask, __ATOMIC_RELAXED) & 2) {
      struct descr g, d;
      memset(&g, 0, sizeof g);
      memset(&d, 0, sizeof d);
      g.type = 1;
      p->start(ctx, &group, &g);
      d.type = 2;
      d.parent = group;
      d.rank = 0;
      int v = 3 - (p_first + p_found);
      if (v == 1) {
        d.u.v1 = (struct coll_v1){.func = 4, .count = 1 << 18, .datatype = 7, .traffic = 1 << 20,
                                  .channels = 6, .warps = 16, .algo = 1, .proto = 1};
      } else if (v == 2) {
        d.u.v2 = (struct coll_v2){.func = "AllReduce", .count = 1 << 18, .datatype = "ncclFloat32",
                                  .traffic = 1 << 20, .channels = 6, .warps = 16, .algo = "RING",
                                  .proto = "LL128"};
      } else {
        d.u.v3 = (struct coll_v3){.func = "AllReduce", .count = 1 << 18, .datatype = "ncclFloat32",
                                  .channels = 6, .warps = 16, .algo = "RING", .proto = "LL128"};
      }
      if (group && p->start(ctx, &event, &d) == 0) sent++;
      if (event) p->stop(event);
      if (group) p->stop(group);
    }
    if (p->finalize(ctx)) return -1;
  }
  return sent;
}
