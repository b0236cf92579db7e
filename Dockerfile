# nccl-perf where nccl-tests images keep nccl-tests: the eleven *_perf benchmarks and the
# nccl-perf tool on a small CUDA image with NCCL, NVRTC and OpenMPI, for x86-64 and arm64.
#
#   docker build -t nccl-perf .
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/nccl-perf --push .
#   docker run --rm --gpus all nccl-perf all_reduce_perf -b 8 -e 8G -f 2 -g 8
#
# Where the programs answer (ci/install-layout.sh --common): $NCCL_TESTS_PREFIX/build (on PATH),
# and through symlinks /opt/nccl-tests/build, /opt/nccl_tests/build, /third_party/nccl-tests/build,
# /workspace/nccl-tests/build and /usr/local/bin; each benchmark under both names,
# all_reduce_perf (the file) and all_reduce_perf_mpi (a symlink to it: the same program, which
# starts under mpirun as nccl-tests' MPI build does), for the scripts that call either.
#
# One binary for every launcher (the default, FEATURES empty): it links no MPI, and finds the
# launcher's wire-up at run time (docs/bootstrap.md): PMIx under mpirun and srun --mpi=pmix
# (libpmix.so.2, also looked for beside mpirun: this image's openmpi-bin brings it), PMI-1 under
# MPICH's mpiexec and srun --mpi=pmi2, the MPI library as a fallback, the environment under
# plain srun, torchrun and Kubernetes. Copied into another image (a gIB image, an image with its
# own mpirun), it needs only glibc (2.34 or newer) and libgcc_s there, and starts under that
# image's mpirun as it finds it (Open MPI, or an MPI of the MPICH ABI).
#
# Several architectures: the Rust stage runs on the build machine's platform ($BUILDPLATFORM)
# and cross-compiles for $TARGETARCH (ci/cross.sh: the cross gcc and, with FEATURES=mpi, the
# target's Open MPI unpacked from Debian's packages), so cargo never runs under emulation. Only the runtime
# stages' apt-get runs on the target platform (buildx emulates it for a foreign one: QEMU in
# binfmt_misc on the build machine, as buildx documents). Needs BuildKit (Docker 23 or newer).
#
# Build arguments (docker build --build-arg NAME=VALUE):
#   NCCL_TESTS_PREFIX  where the binaries are: $NCCL_TESTS_PREFIX/build (default /opt/nccl-tests);
#                      the other paths above link to it
#   FEATURES           cargo features (default none: the one binary above). FEATURES=mpi builds
#                      the MPI build instead (linked to Open MPI's libmpi.so.40: only an Open
#                      MPI launcher starts it as one job), under the same names; the build stage
#                      then installs Open MPI's headers and libclang (ci/cross.sh --mpi), which
#                      the default build needs neither of.
#   NAME_SUFFIX        the installed files' suffix, as nccl-tests' `make NAME_SUFFIX=_mpi`
#                      (default none; the other name is a link either way)
#   CUDA_IMAGE         runtime base (default nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04): the
#                      `base` flavour plus the two CUDA packages the binaries load (libnccl2,
#                      the NVRTC of the image's CUDA); `runtime` would add math libraries they
#                      never load. The driver's libcuda comes from the host, and the image's
#                      CUDA sets the oldest driver: CUDA 13.0 needs driver 580 or newer. For
#                      hosts with an older driver, the CUDA 12 flavour:
#                        --build-arg CUDA_IMAGE=nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04
#                      (NCCL and NVRTC built for CUDA 12.8; driver 570 or newer).
#   NCCL_VERSION       the libnccl2 package version (default: the newest built for the image's
#                      CUDA, e.g. 2.28.3-1+cuda13.0); ignored when the base image has libnccl2
#   USER_UID           the image's user, nccl (default 10001; non-root)
#   RUST_IMAGE         builder (default rust:1.95-bookworm, glibc 2.36). The binaries ask for glibc
#                      symbols up to GLIBC_2.34 (`objdump -T`), so they also run on glibc 2.34
#                      and newer: Ubuntu 22.04 (2.35), RHEL 9, Debian 12.
#
# At run time the binaries need the driver's libcuda (the NVIDIA container toolkit mounts it:
# --gpus all, or nvidia.com/gpu on Kubernetes), libnccl.so.2 and, for validation, libnvrtc; where
# NVRTC is missing or too old for the GPU, validation uses the bundled PTX through the driver.
# NCCL_PERF_LIBNCCL=/path/to/libnccl.so.2 picks another NCCL (a network plugin's).
#
# The user: the image runs as nccl (uid USER_UID), which is enough for GPUs, NVLink and TCP.
# RDMA fabrics (InfiniBand, RoCE, EFA, GKE RDMA) need locked memory: run those as root with
# IPC_LOCK (examples/kubernetes: the fabric variants say runAsUser: 0), since Kubernetes gives
# an added capability to root only.
#
# Targets: the default image; `--target mpijob` adds the SSH server and client settings that
# the Kubeflow MPI operator (MPIJob v2beta1) expects, running as nccl too; sshd's host keys are
# made when a container starts (docker/sshd.sh), never stored in the image.

ARG RUST_IMAGE=rust:1.95-bookworm
ARG CUDA_IMAGE=nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04
ARG NCCL_TESTS_PREFIX=/opt/nccl-tests

# ---------------------------------------------------------------------------------------------
FROM --platform=$BUILDPLATFORM ${RUST_IMAGE} AS builder
ARG TARGETARCH
ARG FEATURES=
ARG NAME_SUFFIX=
ARG NCCL_TESTS_PREFIX
WORKDIR /src
# The toolchain for TARGETARCH (another architecture: its cross gcc and libc; with FEATURES=mpi
# also Open MPI and libclang, the target's Open MPI into /sysroot), before the sources so that
# the layer is kept across source changes.
COPY ci/cross.sh ci/cross.sh
RUN set -eux; \
    mpi=""; case ",${FEATURES}," in *,mpi,*) mpi=--mpi ;; esac; \
    ci/cross.sh --install $mpi --sysroot /sysroot "${TARGETARCH:-$(dpkg --print-architecture)}"; \
    rm -rf /var/lib/apt/lists/*
COPY . .
# install-layout.sh stages the image's paths under /stage: the binaries in
# $NCCL_TESTS_PREFIX/build, the links of --common around them.
RUN set -eux; \
    mpi=""; case ",${FEATURES}," in *,mpi,*) mpi=--mpi ;; esac; \
    triple="$(ci/cross.sh --print-triple "${TARGETARCH:-$(dpkg --print-architecture)}")"; \
    ci/cross.sh $mpi --sysroot /sysroot "$triple" -- \
      cargo build --release --locked --target "$triple" --features "${FEATURES}"; \
    ci/install-layout.sh --from "target/$triple/release" --suffix "${NAME_SUFFIX}" --common --destdir /stage "${NCCL_TESTS_PREFIX}"

# ---------------------------------------------------------------------------------------------
FROM ${CUDA_IMAGE} AS runtime
ARG NCCL_TESTS_PREFIX
ARG NCCL_VERSION=
ARG USER_UID=10001
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Open MPI's launcher (mpirun, for the mpijob target and any mpirun in the image) with the
# libpmix.so.2 the programs open under it (found from mpirun's prefix: Debian's pmix2/lib) and
# libmpi.so.40 (their fallback; what a FEATURES=mpi build links); NCCL (held at the version
# built for the image's CUDA) and NVRTC where the base image lacks them; the user. Other
# packages take the versions of the image's apt sources (the CUDA repository's NVRTC is the
# image's CUDA); $pkgs is a word list.
# hadolint ignore=DL3008,SC2086
RUN set -eux; \
    cuda="$(echo "${CUDA_VERSION:?the CUDA images set CUDA_VERSION}" | cut -d. -f1,2)"; \
    apt-get update; \
    pkgs="openmpi-bin"; \
    hold=""; \
    if ! dpkg -s libnccl2 >/dev/null 2>&1; then \
      nccl="${NCCL_VERSION:-$(apt-cache madison libnccl2 | awk -v c="+cuda$cuda" 'substr($3, length($3) - length(c) + 1) == c && v == "" { v = $3 } END { print v }')}"; \
      pkgs="$pkgs libnccl2=${nccl:?no libnccl2 built for CUDA $cuda in the image apt sources}"; \
      hold=libnccl2; \
    fi; \
    if ! ldconfig -p | grep 'libnvrtc\.so' >/dev/null; then \
      pkgs="$pkgs cuda-nvrtc-$(echo "$cuda" | tr . -)"; \
    fi; \
    apt-get install -y --no-install-recommends $pkgs; \
    if [ -n "$hold" ]; then apt-mark hold $hold; fi; \
    rm -rf /var/lib/apt/lists/*; \
    useradd --uid "${USER_UID}" --create-home --shell /bin/bash nccl
COPY --from=builder /stage/ /
# The COPY above brings /workspace (for the /workspace/nccl-tests link) owned by root: the run
# user's working folder is made its own after it.
RUN chown nccl:nccl /workspace
ENV PATH=${NCCL_TESTS_PREFIX}/build:${PATH}
WORKDIR /workspace
USER ${USER_UID}
# The CUDA base image's entrypoint prints a banner on stdout before the command's output, where
# scrapers read the benchmark's table: the programs run directly instead.
ENTRYPOINT []
CMD ["bash"]
LABEL org.opencontainers.image.title="nccl-perf" \
      org.opencontainers.image.description="nccl-tests compatible NCCL benchmarks (*_perf) and the nccl-perf tool"

# ---------------------------------------------------------------------------------------------
# For MPIJob: the operator mounts its SSH keys from a Secret at the MPIJob's sshAuthMountPath
# (/home/nccl/.ssh for this user) and runs the worker command, here docker/sshd.sh, which makes
# host keys and starts sshd on port 2222 (the image's ssh client uses that port). Host keys are
# not checked, and the mounted files' modes are not enforced (the Secret mount is read-only).
FROM runtime AS mpijob
ARG USER_UID=10001
USER 0
COPY docker/sshd.sh /usr/local/bin/nccl-perf-sshd
# hadolint ignore=DL3008
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends openssh-server openssh-client; \
    rm -rf /var/lib/apt/lists/*; \
    rm -f /etc/ssh/ssh_host_*; \
    mkdir -p /var/run/sshd; \
    sed -i 's/[ #]\(.*StrictHostKeyChecking \).*/ \1no/g' /etc/ssh/ssh_config; \
    printf '    UserKnownHostsFile /dev/null\n    Port 2222\n' >> /etc/ssh/ssh_config; \
    sed -i 's/#\(StrictModes \).*/\1no/g' /etc/ssh/sshd_config
USER ${USER_UID}

# ---------------------------------------------------------------------------------------------
# The default target: the runtime image.
FROM runtime
