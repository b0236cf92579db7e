//! Who may join a rendezvous. Every process of one launch derives the same job key from what the
//! launch shares and strangers lack: the launcher's job identity (Slurm job and step, torchrun
//! run id, OpenMPI job id) and, when the user sets one, a secret (`NCCL_PERF_RENDEZVOUS_KEY` or
//! the file named by `NCCL_PERF_RENDEZVOUS_KEY_FILE`). Rank 0 sends each connection a random
//! nonce; the hello carries HMAC-SHA256(key, nonce ‖ hello), so the secret never travels and a
//! recorded hello cannot be replayed. Rank 0's welcome is signed the same way over the
//! process' own nonce, so a process that squats the port cannot pose as rank 0.

use crate::environment::{RENDEZVOUS_KEY, RENDEZVOUS_KEY_FILE};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::Read;

/// Length of a nonce and of a MAC.
pub const LEN: usize = 32;

/// The longest secret read from a key file (a Kubernetes Secret is a few dozen bytes).
const MAX_SECRET: u64 = 4096;

type HmacSha256 = Hmac<Sha256>;

/// A user-set secret; never printed.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() {
            "Secret(none)"
        } else {
            "Secret(<redacted>)"
        })
    }
}

impl Secret {
    /// Whether a secret was set.
    pub fn is_set(&self) -> bool {
        !self.0.is_empty()
    }

    /// The secret from `NCCL_PERF_RENDEZVOUS_KEY` (the text itself) or
    /// `NCCL_PERF_RENDEZVOUS_KEY_FILE` (a file, trailing newline ignored); none when neither is
    /// set.
    pub fn from_env(key: Option<&str>, file: Option<&str>) -> Result<Secret, SecretError> {
        match (key, file) {
            (Some(_), Some(_)) => Err(SecretError::Both),
            (Some(k), None) if k.trim().is_empty() => Err(SecretError::EmptyKey),
            (Some(k), None) => Ok(Secret(k.trim_end_matches(['\r', '\n']).as_bytes().to_vec())),
            (None, Some(path)) => {
                let bad = |why: String| SecretError::File {
                    path: path.to_string(),
                    why,
                };
                let f = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
                let mut text = Vec::new();
                f.take(MAX_SECRET + 1)
                    .read_to_end(&mut text)
                    .map_err(|e| bad(e.to_string()))?;
                if text.len() as u64 > MAX_SECRET {
                    return Err(bad(format!("longer than {MAX_SECRET} bytes")));
                }
                while matches!(text.last(), Some(b'\n' | b'\r')) {
                    text.pop();
                }
                if text.is_empty() {
                    return Err(bad("the file is empty".into()));
                }
                Ok(Secret(text))
            }
            (None, None) => Ok(Secret::default()),
        }
    }
}

/// Why the secret cannot be read; one line naming the variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Both variables are set.
    #[error("set {} or {}, not both", RENDEZVOUS_KEY.name, RENDEZVOUS_KEY_FILE.name)]
    Both,
    /// The key is blank.
    #[error("{} is set but empty", RENDEZVOUS_KEY.name)]
    EmptyKey,
    /// The key file cannot be read, is empty or too long.
    #[error("{}='{path}': {why}", RENDEZVOUS_KEY_FILE.name)]
    File {
        /// The file.
        path: String,
        /// What is wrong with it.
        why: String,
    },
}

/// The key every process of one launch derives alike.
#[derive(Clone)]
pub struct JobKey([u8; LEN]);

impl JobKey {
    /// From the launcher's job identity and the user's secret (either may be empty).
    pub fn derive(job: &str, secret: &Secret) -> JobKey {
        let mut m = mac_with(&secret.0);
        m.update(b"nccl-perf rendezvous key v2\0");
        m.update(job.as_bytes());
        JobKey(m.finalize().into_bytes().into())
    }

    /// HMAC of `parts`, one after another, each prefixed by its length (no ambiguity).
    pub fn sign(&self, parts: &[&[u8]]) -> [u8; LEN] {
        let mut m = mac_with(&self.0);
        for p in parts {
            m.update(&(p.len() as u64).to_le_bytes());
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    /// Whether `tag` is the HMAC of `parts` (compared in constant time).
    pub fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        let mut m = mac_with(&self.0);
        for p in parts {
            m.update(&(p.len() as u64).to_le_bytes());
            m.update(p);
        }
        m.verify_slice(tag).is_ok()
    }
}

fn mac_with(key: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length; this cannot fail.
    match HmacSha256::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC accepts every key length"),
    }
}

/// A fresh random nonce from the kernel (`/dev/urandom`); time and pid mixed in by hashing
/// where that device cannot be read (a nonce must only never repeat).
pub fn nonce() -> [u8; LEN] {
    let mut n = [0u8; LEN];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut n));
    if read.is_err() {
        use sha2::Digest;
        static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let c = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let mut h = Sha256::new();
        h.update(t.to_le_bytes());
        h.update(std::process::id().to_le_bytes());
        h.update(c.to_le_bytes());
        n = h.finalize().into();
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_depends_on_job_and_secret() {
        let none = Secret::default();
        let s = Secret::from_env(Some("hunter2\n"), None).unwrap();
        let a = JobKey::derive("slurm:1.0", &none);
        let nonce = nonce();
        let tag = a.sign(&[&nonce, b"hello"]);
        assert!(a.verify(&[&nonce, b"hello"], &tag));
        assert!(!a.verify(&[&nonce, b"hellp"], &tag));
        assert!(!a.verify(&[&nonce, b"hel", b"lo"], &tag));
        assert!(!JobKey::derive("slurm:1.1", &none).verify(&[&nonce, b"hello"], &tag));
        assert!(!JobKey::derive("slurm:1.0", &s).verify(&[&nonce, b"hello"], &tag));
        assert_ne!(super::nonce(), nonce);
    }

    #[test]
    fn secrets_from_the_environment_and_files() {
        assert!(!Secret::from_env(None, None).unwrap().is_set());
        assert!(Secret::from_env(Some(" "), None).is_err());
        assert!(Secret::from_env(Some("a"), Some("/x")).is_err());
        let e = Secret::from_env(None, Some("/nonexistent/key"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("NCCL_PERF_RENDEZVOUS_KEY_FILE='/nonexistent/key': "),
            "{e}"
        );
        let dir = std::env::temp_dir().join(format!("nccl-perf-key-{}", std::process::id()));
        std::fs::write(&dir, "s3cret\n").unwrap();
        let s = Secret::from_env(None, dir.to_str()).unwrap();
        assert_eq!(s, Secret::from_env(Some("s3cret"), None).unwrap());
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
        std::fs::write(&dir, "\n").unwrap();
        assert!(Secret::from_env(None, dir.to_str()).is_err());
        let _ = std::fs::remove_file(&dir);
    }
}
