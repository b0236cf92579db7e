/* A stand-in for a tuner plugin that a user or a cloud image configures (NCCL_TUNER_PLUGIN),
 * for tests/capture_chain.rs: --explain chains such a tuner behind its own. It exports a v5
 * table and a v3 table, each of which makes a visible decision: v5 marks Tree/LL (index 0, 0)
 * as the cheapest entry and asks for 7 channels; v3 asks for 3 channels. Each keeps the rank
 * count its init got in its context and checks it on every call. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef int (*logger)(void);

struct ctx { size_t ranks; int finalized; };

static int init5(void **out, uint64_t comm, size_t ranks, size_t nodes, logger log, void *nvl,
                 void *constants) {
  (void)comm; (void)nodes; (void)log; (void)nvl; (void)constants;
  struct ctx *c = calloc(1, sizeof *c);
  if (!c) return 1;
  c->ranks = ranks;
  *out = c;
  return 0;
}

static int init3(size_t ranks, size_t nodes, logger log, void **out) {
  return init5(out, 0, ranks, nodes, log, NULL, NULL);
}

static int info5(void *ctx, int coll, size_t bytes, int pipe, float **table, int algos, int protos,
                 int reg, int *channels) {
  (void)coll; (void)bytes; (void)pipe; (void)protos; (void)reg;
  struct ctx *c = ctx;
  if (!c || c->ranks == 0) return 3;
  if (algos > 0) ((float *)table)[0] = 0.5f;
  *channels = 7;
  return 0;
}

static int info3(void *ctx, int coll, size_t bytes, int pipe, float **table, int algos, int protos,
                 int *channels) {
  (void)coll; (void)bytes; (void)pipe; (void)table; (void)algos; (void)protos;
  struct ctx *c = ctx;
  if (!c || c->ranks == 0) return 3;
  *channels = 3;
  return 0;
}

static int fin(void *ctx) {
  free(ctx);
  return 0;
}

struct v5 { const char *name; void *init, *info, *fin; };

const struct v5 ncclTunerPlugin_v5 = { "fake-tuner", (void *)init5, (void *)info5, (void *)fin };
const struct v5 ncclTunerPlugin_v3 = { "fake-tuner", (void *)init3, (void *)info3, (void *)fin };
