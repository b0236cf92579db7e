//! The environment written to the JSON `env` array.
//!
//! Upstream dumps the whole environment into the JSON file, which then travels with benchmark
//! results (dashboards, tickets, shared folders) carrying every token and password of the job.
//! We keep only the variables that describe how the run was set up (NCCL, CUDA, network
//! transports, MPI and launchers, locale) and drop any whose name suggests a secret.

/// Name prefixes of the variables kept: NCCL and CUDA settings, network transports (UCX,
/// libfabric), MPI implementations and process managers (Open MPI, PMIx/PMI, Slurm, Intel MPI,
/// MVAPICH2, MPICH/Hydra).
pub const ALLOWED_PREFIXES: &[&str] = &[
    "NCCL_", "CUDA_", "NVIDIA_", "UCX_", "FI_", "OMPI_", "OPAL_", "PMIX_", "PMI_", "SLURM_",
    "MPI_", "I_MPI_", "MV2_", "MPICH_", "HYDRA_",
];

/// Exact names of the variables kept besides the prefixes: locale, host, the library search
/// path (which NCCL got loaded), and the rank variables of torchrun-style launchers.
pub const ALLOWED_NAMES: &[&str] = &[
    "LANG",
    "LC_ALL",
    "HOSTNAME",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "OMP_NUM_THREADS",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
];

/// Words that exclude a variable whatever its prefix (compared case-insensitively with the name).
pub const SECRET_WORDS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "PRIVATE",
];

/// The `NAME=value` strings of the variables of `vars` that describe the run, in the order
/// given: names in `ALLOWED_NAMES` or starting with one of `ALLOWED_PREFIXES`, minus any
/// name containing one of `SECRET_WORDS`.
///
/// Pass `std::env::vars_os()` converted lossily (`std::env::vars()` panics on a non-UTF-8
/// variable).
pub fn filtered_env(vars: impl Iterator<Item = (String, String)>) -> Vec<String> {
    vars.filter(|(name, _)| describes_run(name))
        .map(|(name, value)| format!("{name}={value}"))
        .collect()
}

/// True when the variable `name` is kept in the JSON `env` array.
fn describes_run(name: &str) -> bool {
    let allowed =
        ALLOWED_NAMES.contains(&name) || ALLOWED_PREFIXES.iter().any(|p| name.starts_with(p));
    let upper = name.to_ascii_uppercase();
    allowed && !SECRET_WORDS.iter().any(|w| upper.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> impl Iterator<Item = (String, String)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn keeps_run_settings_in_order() {
        let env = filtered_env(vars(&[
            ("NCCL_VERSION", "2.28.3-1"),
            ("PATH", "/usr/bin"),
            ("NCCL_NVLS_ENABLE", "0"),
            ("HOME", "/root"),
            ("LANG", "C.UTF-8"),
            ("CUDA_VERSION", "13.0.2"),
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("USER", "root"),
        ]));
        assert_eq!(
            env,
            [
                "NCCL_VERSION=2.28.3-1",
                "NCCL_NVLS_ENABLE=0",
                "LANG=C.UTF-8",
                "CUDA_VERSION=13.0.2",
                "OMPI_COMM_WORLD_RANK=3",
            ]
        );
    }

    #[test]
    fn planted_secrets_never_appear() {
        let planted = [
            ("AWS_SECRET_ACCESS_KEY", "planted-secret-1"),
            ("HF_TOKEN", "planted-secret-2"),
            ("NCCL_FOO_TOKEN", "planted-secret-3"),
            ("NCCL_IB_Key", "planted-secret-4"),
            ("SLURM_JOB_PASSWORD", "planted-secret-5"),
            ("CUDA_auth_header", "planted-secret-6"),
            ("GITHUB_TOKEN", "planted-secret-7"),
            ("NCCL_DEBUG", "INFO"),
        ];
        let env = filtered_env(vars(&planted));
        assert_eq!(env, ["NCCL_DEBUG=INFO"]);
        let all = env.join("\n");
        assert!(!all.contains("planted-secret"), "{all}");
    }
}
