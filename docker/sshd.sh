#!/bin/sh
# The MPI operator's worker command in the `mpijob` image (installed as
# /usr/local/bin/nccl-perf-sshd): sshd in the foreground, with host keys made now, when the
# container starts. An image must not carry host keys: every container made from it would
# share them, and anyone who pulls the image would hold them.
#
# As root: keys in /etc/ssh (ssh-keygen -A makes the missing ones), the system's sshd.
# As any other user (the image's default, nccl): one key in a folder of its own
# (NCCL_PERF_SSHD_DIR, default ~/.sshd), an unprivileged sshd that logs in that user only.
# Both listen on NCCL_PERF_SSHD_PORT (default 2222), the port the image's ssh client uses.
# Arguments are passed on to sshd.
set -eu

port="${NCCL_PERF_SSHD_PORT:-2222}"
if [ "$(id -u)" = 0 ]; then
  ssh-keygen -A >/dev/null
  exec /usr/sbin/sshd -D -e -p "$port" "$@"
fi

dir="${NCCL_PERF_SSHD_DIR:-${HOME:-/tmp}/.sshd}"
mkdir -p "$dir"
chmod 700 "$dir"
key="$dir/ssh_host_ed25519_key"
if [ ! -f "$key" ]; then
  ssh-keygen -q -t ed25519 -N '' -f "$key"
fi
exec /usr/sbin/sshd -D -e -p "$port" -h "$key" -o "PidFile=$dir/sshd.pid" -o UsePAM=no "$@"
