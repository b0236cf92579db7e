/* A stand-in for libnvrtc.so for tests (see tests/env_faults.rs). By default an old one: a
 * version query but none of the compile entry points nccl-perf calls. Built with
 * -DFAKE_NVRTC_FAILS (ci/gpu-drop-in.sh), one that has every entry point but fails every
 * compilation, as an NVRTC that does not know the GPU. */
#include <stddef.h>
#include <string.h>

int nvrtcVersion(int *major, int *minor) { *major = 9; *minor = 0; return 0; }

#ifdef FAKE_NVRTC_FAILS
static const char LOG[] = "fake NVRTC: compilation refused";
const char *nvrtcGetErrorString(int r) { (void)r; return "NVRTC_ERROR_COMPILATION"; }
int nvrtcCreateProgram(void **prog, const char *src, const char *name, int n, const char *const *h,
                       const char *const *i) {
  (void)src; (void)name; (void)n; (void)h; (void)i;
  *prog = (void *)1;
  return 0;
}
int nvrtcCompileProgram(void *prog, int n, const char *const *opts) {
  (void)prog; (void)n; (void)opts;
  return 6; /* NVRTC_ERROR_COMPILATION */
}
int nvrtcGetProgramLogSize(void *prog, size_t *size) { (void)prog; *size = sizeof LOG; return 0; }
int nvrtcGetProgramLog(void *prog, char *log) { (void)prog; memcpy(log, LOG, sizeof LOG); return 0; }
int nvrtcGetPTXSize(void *prog, size_t *size) { (void)prog; *size = 0; return 3; }
int nvrtcGetPTX(void *prog, char *ptx) { (void)prog; (void)ptx; return 3; }
int nvrtcGetCUBINSize(void *prog, size_t *size) { (void)prog; *size = 0; return 3; }
int nvrtcGetCUBIN(void *prog, char *cubin) { (void)prog; (void)cubin; return 3; }
int nvrtcDestroyProgram(void **prog) { *prog = NULL; return 0; }
#endif
