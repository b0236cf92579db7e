# nccl-perf where nccl-tests images keep nccl-tests: the eleven *_perf benchmarks and the
# nccl-perf tool in /opt/nccl-tests/build, on PATH, on a CUDA runtime image with NCCL and OpenMPI.
#
#   docker build -t nccl-perf .
#   docker run --rm --gpus all nccl-perf all_reduce_perf -b 8 -e 8G -f 2 -g 8
#
# Build arguments (docker build --build-arg NAME=VALUE):
#   NCCL_TESTS_PREFIX  install root; the binaries go to $NCCL_TESTS_PREFIX/build
#                      (default /opt/nccl-tests). gIB/GKE layout, as the GPUDirect-RDMA recipes
#                      call it (/third_party/nccl-tests/build/all_gather_perf):
#                        docker build --build-arg NCCL_TESTS_PREFIX=/third_party/nccl-tests .
#   FEATURES           cargo features (default mpi: mpirun and srun --mpi=pmix start one MPI job;
#                      the same binaries also run alone and from Slurm/torchrun/Kubernetes
#                      environments). FEATURES= builds without MPI.
#   NAME_SUFFIX        appended to the benchmark names, as nccl-tests' `make NAME_SUFFIX=_mpi`
#                      (all_reduce_perf_mpi); default none.
#   CUDA_IMAGE         runtime base (default nvcr.io/nvidia/cuda:13.0.1-runtime-ubuntu24.04).
#   RUST_IMAGE         builder (default rust:1.95-bookworm). Its glibc sets the oldest one the
#                      binaries run on: bookworm's builds need glibc 2.35 (Ubuntu 22.04 or newer).
#
# At run time the binaries need the driver's libcuda (the NVIDIA container toolkit mounts it:
# --gpus all, or nvidia.com/gpu on Kubernetes), libnccl.so.2 and, for validation (-c 1, the
# default), libnvrtc: this image installs both when the base lacks them. Without libnvrtc,
# run with -c 0. NCCL_PERF_LIBNCCL=/path/to/libnccl.so.2 picks another NCCL (a network plugin's).
#
# Targets: the default image; `--target mpijob` adds the OpenSSH server and client settings that
# the Kubeflow MPI operator (MPIJob v2beta1) expects in launcher and worker images.

ARG RUST_IMAGE=rust:1.95-bookworm
ARG CUDA_IMAGE=nvcr.io/nvidia/cuda:13.0.1-runtime-ubuntu24.04

# ---------------------------------------------------------------------------------------------
FROM ${RUST_IMAGE} AS builder
ARG FEATURES=mpi
ARG NAME_SUFFIX=
# The MPI build binds OpenMPI (libmpi.so.40, as Ubuntu's runtime package) through bindgen.
RUN set -eux; \
    case ",${FEATURES}," in \
      *,mpi,*) apt-get update; \
               apt-get install -y --no-install-recommends libopenmpi-dev openmpi-bin libclang-dev; \
               rm -rf /var/lib/apt/lists/* ;; \
    esac
WORKDIR /src
COPY . .
# install-layout.sh lays the binaries out as nccl-tests' build folder: /stage/build/<coll>_perf.
RUN set -eux; \
    cargo build --release --locked --features "${FEATURES}"; \
    ci/install-layout.sh --from target/release --suffix "${NAME_SUFFIX}" /stage

# ---------------------------------------------------------------------------------------------
FROM ${CUDA_IMAGE} AS runtime
ARG NCCL_TESTS_PREFIX=/opt/nccl-tests
# OpenMPI's launcher and library; NCCL and NVRTC only where the base image lacks them (the CUDA
# runtime images carry both, and hold libnccl2 at the version they were tested with).
RUN set -eux; \
    pkgs="openmpi-bin"; \
    dpkg -s libnccl2 >/dev/null 2>&1 || pkgs="$pkgs libnccl2"; \
    if ! ldconfig -p | grep -q 'libnvrtc\.so'; then \
      cuda="$(echo "${CUDA_VERSION:?the base image sets CUDA_VERSION}" | cut -d. -f1,2 | tr . -)"; \
      pkgs="$pkgs cuda-nvrtc-$cuda"; \
    fi; \
    apt-get update; \
    apt-get install -y --no-install-recommends $pkgs; \
    rm -rf /var/lib/apt/lists/*
COPY --from=builder /stage/ ${NCCL_TESTS_PREFIX}/
ENV PATH=${NCCL_TESTS_PREFIX}/build:${PATH}
LABEL org.opencontainers.image.title="nccl-perf" \
      org.opencontainers.image.description="nccl-tests compatible NCCL benchmarks (*_perf) and the nccl-perf tool"

# ---------------------------------------------------------------------------------------------
# For MPIJob: the operator mounts SSH keys from a Secret into /root/.ssh and starts sshd on the
# workers (/usr/sbin/sshd -De); host keys are not checked and the mounted files' modes are not
# enforced (the Secret mount is read-only).
FROM runtime AS mpijob
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends openssh-server openssh-client; \
    rm -rf /var/lib/apt/lists/*; \
    mkdir -p /var/run/sshd; \
    sed -i 's/[ #]\(.*StrictHostKeyChecking \).*/ \1no/g' /etc/ssh/ssh_config; \
    echo "    UserKnownHostsFile /dev/null" >> /etc/ssh/ssh_config; \
    sed -i 's/#\(StrictModes \).*/\1no/g' /etc/ssh/sshd_config

# ---------------------------------------------------------------------------------------------
# The default target: the runtime image.
FROM runtime
