/* A stand-in for libnccl.so.2 for tests without a GPU (see tests/env_faults.rs), chosen with
 * NCCL_PERF_LIBNCCL. Reports version 2.28.3, or the code in FAKE_NCCL_VERSION (21701 for an
 * NCCL 2.17.1); creating ids and communicators "works" (nothing is created); every collective
 * fails. Build with -DFAKE_ONLY_VERSION for a library that exports ncclGetVersion alone (a
 * library too old, or not NCCL). */
#include <stdlib.h>
#include <string.h>

int ncclGetVersion(int *v) {
  const char *e = getenv("FAKE_NCCL_VERSION");
  *v = e && *e ? atoi(e) : 22803;
  return 0;
}

#ifndef FAKE_ONLY_VERSION
typedef struct { char internal[128]; } ncclUniqueId;

const char *ncclGetErrorString(int r) { (void)r; return "fake NCCL error"; }
const char *ncclGetLastError(void *comm) { (void)comm; return ""; }
int ncclGetUniqueId(ncclUniqueId *id) { memset(id, 0, sizeof *id); return 0; }
int ncclCommInitRank(void **comm, int n, ncclUniqueId id, int rank) {
  (void)n; (void)id; (void)rank;
  *comm = (void *)1;
  return 0;
}
int ncclCommDestroy(void *comm) { (void)comm; return 0; }
int ncclCommAbort(void *comm) { (void)comm; return 0; }
int ncclCommGetAsyncError(void *comm, int *state) { (void)comm; *state = 0; return 0; }
int ncclGroupStart(void) { return 0; }
int ncclGroupEnd(void) { return 0; }

#define FAIL(name) int name(void) { return 1; }
FAIL(ncclAllReduce)
FAIL(ncclAllGather)
FAIL(ncclReduceScatter)
FAIL(ncclBroadcast)
FAIL(ncclReduce)
FAIL(ncclSend)
FAIL(ncclRecv)
#endif
