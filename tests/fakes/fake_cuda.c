/* A stand-in for the NVIDIA driver library (libcuda.so.1) for tests on machines without a GPU:
 * tests/env_faults.rs builds it with `cc -shared` and puts it first on LD_LIBRARY_PATH.
 *
 * Environment:
 *   FAKE_CUDA_INIT   cuInit's result (default 0; 100 = CUDA_ERROR_NO_DEVICE)
 *   FAKE_CUDA_COUNT  number of devices (default 0)
 *   FAKE_CUDA_MEM    total memory of each device in bytes (default 80 GiB)
 * Build with -DFAKE_TOO_OLD to leave out cuStreamQuery and cuMemGetInfo_v2, as an old driver.
 *
 * Devices answer the property queries a run makes before its communicators exist; every other
 * entry point fails with CUDA_ERROR_UNKNOWN (999), so nothing goes further by accident. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

int cuInit(unsigned flags) { (void)flags; return env_int("FAKE_CUDA_INIT", 0); }

int cuGetErrorString(int e, const char **s) {
  switch (e) {
  case 0: *s = "no error"; break;
  case 100: *s = "no CUDA-capable device is detected"; break;
  default: *s = "unknown error"; break;
  }
  return 0;
}

int cuDeviceGetCount(int *n) { *n = env_int("FAKE_CUDA_COUNT", 0); return 0; }

int cuDeviceGet(int *dev, int ordinal) {
  if (ordinal < 0 || ordinal >= env_int("FAKE_CUDA_COUNT", 0)) return 101; /* invalid device */
  *dev = ordinal;
  return 0;
}

int cuDeviceGetAttribute(int *v, int attr, int dev) {
  switch (attr) {
  case 33: *v = dev + 1; break;  /* PCI bus id */
  case 75: *v = 9; break;        /* compute capability major */
  default: *v = 0; break;        /* PCI domain and device, minor */
  }
  return 0;
}

int cuDeviceGetName(char *name, int len, int dev) {
  (void)dev;
  strncpy(name, "Fake GPU", (size_t)len);
  return 0;
}

int cuDeviceTotalMem_v2(size_t *bytes, int dev) {
  (void)dev;
  const char *v = getenv("FAKE_CUDA_MEM");
  *bytes = v && *v ? (size_t)strtoull(v, NULL, 10) : (size_t)80 << 30;
  return 0;
}

int cuDevicePrimaryCtxRetain(void **ctx, int dev) { *ctx = (void *)(size_t)(0x1000 + dev); return 0; }
int cuCtxSetCurrent(void *ctx) { (void)ctx; return 0; }

#define FAIL(name) int name(void) { return 999; }
FAIL(cuStreamCreate)
FAIL(cuStreamDestroy_v2)
FAIL(cuStreamSynchronize)
FAIL(cuMemAlloc_v2)
FAIL(cuMemFree_v2)
FAIL(cuMemsetD8Async)
FAIL(cuMemcpyDtoDAsync_v2)
FAIL(cuMemcpyDtoH_v2)
FAIL(cuModuleLoadData)
FAIL(cuModuleGetFunction)
FAIL(cuLaunchKernel)
#ifndef FAKE_TOO_OLD
FAIL(cuStreamQuery)
FAIL(cuMemGetInfo_v2)
#endif
