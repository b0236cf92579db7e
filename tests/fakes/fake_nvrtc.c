/* A stand-in for an old libnvrtc.so for tests (see tests/env_faults.rs): it has a version
 * query but none of the compile entry points nccl-perf calls. */
int nvrtcVersion(int *major, int *minor) { *major = 9; *minor = 0; return 0; }
