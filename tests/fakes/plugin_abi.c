/* The C side of --explain's plugin ABI (crates/capture/src/ffi/abi.rs), declared here from the
 * field types and order of NCCL's profiler v4/v5 event descriptors and tuner v4/v5 tables, and
 * checked at compile time against the offsets and sizes the Rust structs have: the test
 * (tests/capture_abi.rs) passes Rust's figures as -D definitions, and a mismatch fails the
 * build of this file. Nothing here runs. */
#include <stddef.h>
#include <stdint.h>

struct coll {
  uint64_t seq;
  const char *func;
  const void *send;
  void *recv;
  size_t count;
  int root;
  const char *datatype;
  uint8_t channels;
  uint8_t warps;
  const char *algo;
  const char *proto;
};

struct p2p {
  const char *func;
  void *buff;
  const char *datatype;
  size_t count;
  int peer;
  uint8_t channels;
};

struct net {
  int64_t id;
  void *data;
};

union body {
  struct coll coll;
  struct p2p p2p;
  struct net net;
};

struct descr_v4 {
  uint8_t type;
  void *parent;
  int rank;
  union body body;
};

struct descr_v5 {
  uint64_t type;
  void *parent;
  int rank;
  union body body;
};

typedef int (*fn)(void);
struct profiler_v5 { const char *name; fn init, start, stop, record, finalize; };
struct tuner_v5 { const char *name; fn init, get_coll_info, finalize; };

#define SAME(expr, rust) _Static_assert((expr) == (rust), #expr " differs from the Rust struct")
SAME(offsetof(struct descr_v4, rank), V4_RANK);
SAME(offsetof(struct descr_v4, body), V4_BODY);
SAME(offsetof(struct descr_v5, rank), V5_RANK);
SAME(offsetof(struct descr_v5, body), V5_BODY);
SAME(offsetof(struct coll, count), COLL_COUNT);
SAME(offsetof(struct coll, datatype), COLL_DATATYPE);
SAME(offsetof(struct coll, channels), COLL_CHANNELS);
SAME(offsetof(struct coll, algo), COLL_ALGO);
SAME(offsetof(struct coll, proto), COLL_PROTO);
SAME(offsetof(struct p2p, peer), P2P_PEER);
SAME(offsetof(struct p2p, channels), P2P_CHANNELS);
SAME(offsetof(struct net, data), NET_DATA);
SAME(sizeof(struct profiler_v5), PROFILER_V5_SIZE);
SAME(sizeof(struct tuner_v5), TUNER_V5_SIZE);
