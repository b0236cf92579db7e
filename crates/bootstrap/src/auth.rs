//! Who may join a rendezvous. Every process of one launch derives the same job key from what the
//! launch shares and strangers lack: the launcher's job identity (Slurm job and step, torchrun
//! run id, OpenMPI job id) and, when the user sets one, a secret (`NCCL_PERF_RENDEZVOUS_KEY` or
//! the file named by `NCCL_PERF_RENDEZVOUS_KEY_FILE`), stretched with Argon2id under a salt
//! rank 0 draws for each launch. Rank 0 sends each connection a challenge: a random nonce and
//! the launch's salt, signed with the key, so a process answers only a rank 0 that holds the
//! key (`tcp/challenge.rs`); the hello carries HMAC-SHA256(key, challenge ‖ hello), so the
//! secret never travels and a recorded hello cannot be replayed. Rank 0's welcome (and an abort before it) is signed the
//! same way over the process' own nonce, so a process that squats the port cannot pose as rank
//! 0. Both nonces and the job key give each connection its session key, which authenticates
//! every later frame (`tcp/seal.rs`). Only a secret keeps strangers out: a job identity alone
//! can be read or guessed, so without a secret rank 0 says the rendezvous is open.

use hmac::{Hmac, Mac};
use nccl_perf_facts::environment::{RENDEZVOUS_KEY, RENDEZVOUS_KEY_FILE};
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
                // A named pipe (or a device) would block the open or the read past every
                // deadline: only a regular file (a link to one, as a mounted Secret is) is read.
                let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
                if !meta.is_file() {
                    return Err(bad("not a regular file (a pipe, device or folder)".into()));
                }
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

impl Secret {
    /// The user's secret (if any) followed by a launch's one-time `token` (what rank 0
    /// publishes through a launcher's engine): strangers without the engine's key-value space
    /// cannot join even where the user set no secret.
    pub fn with_token(&self, token: &[u8]) -> Secret {
        let mut s = self.0.clone();
        if !s.is_empty() {
            s.push(0);
        }
        s.extend_from_slice(token);
        Secret(s)
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

/// Argon2id costs that stretch a user's secret into the job key (OWASP's first choice: 19 MiB,
/// two passes, one lane): one captured hello lets an eavesdropper test guesses offline, and each
/// guess then costs this much memory and time. Every process pays it once at start-up.
const STRETCH_MEMORY_KIB: u32 = 19 * 1024;
const STRETCH_PASSES: u32 = 2;

/// Secrets shorter than this (in characters) draw a warning: guessable from one captured hello.
pub const SHORT_SECRET: usize = 16;

impl Secret {
    /// Whether the secret is set but shorter than [`SHORT_SECRET`] characters (a secret that is
    /// not UTF-8 counts in bytes).
    pub fn is_short(&self) -> bool {
        let len = std::str::from_utf8(&self.0).map_or(self.0.len(), |t| t.chars().count());
        self.is_set() && len < SHORT_SECRET
    }
}

/// The key every process of one launch derives alike.
#[derive(Clone)]
pub struct JobKey([u8; LEN]);

impl JobKey {
    /// From the launcher's job identity, the user's secret (either may be empty) and the
    /// launch's salt (rank 0 draws it at random and sends it in every challenge). The secret is
    /// stretched with Argon2id salted with the launch's salt and the job identity, so a table
    /// of guesses made for one launch is worth nothing for the next; without a secret the key
    /// is public to anyone who knows the job identity, and the salt plays no part.
    pub fn derive(job: &str, secret: &Secret, salt: &[u8]) -> JobKey {
        let mut stretched = [0u8; LEN];
        if secret.is_set() {
            // A constant of ours, the launch's salt and the job identity (every process knows
            // them once it has rank 0's challenge; Argon2 needs at least 8 bytes).
            let salt = [
                b"nccl-perf rendezvous secret v4\0".as_slice(),
                &(salt.len() as u64).to_le_bytes(),
                salt,
                job.as_bytes(),
            ]
            .concat();
            stretch(&secret.0, &salt, &mut stretched);
        }
        let mut m = mac_with(&stretched);
        m.update(b"nccl-perf rendezvous key v3\0");
        m.update(job.as_bytes());
        JobKey(m.finalize().into_bytes().into())
    }

    /// The key of one connection: from the job key and both sides' nonces (rank 0's challenge,
    /// the process' own), so no frame of one connection is valid on another.
    pub fn session(&self, challenge: &[u8], nonce: &[u8]) -> JobKey {
        JobKey(self.sign(&[b"session", challenge, nonce]))
    }

    /// HMAC of `parts`, one after another, each prefixed by its length (no ambiguity).
    pub fn sign(&self, parts: &[&[u8]]) -> [u8; LEN] {
        self.mac(parts).finalize().into_bytes().into()
    }

    /// Whether `tag` is the HMAC of `parts` (compared in constant time).
    pub fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        self.mac(parts).verify_slice(tag).is_ok()
    }

    fn mac(&self, parts: &[&[u8]]) -> HmacSha256 {
        let mut m = mac_with(&self.0);
        for p in parts {
            m.update(&(p.len() as u64).to_le_bytes());
            m.update(p);
        }
        m
    }
}

/// Argon2id of `secret` with `salt` into `out`.
fn stretch(secret: &[u8], salt: &[u8], out: &mut [u8; LEN]) {
    use argon2::{Algorithm, Argon2, Params, Version};
    // Constant, valid parameters and a salt of ours over 8 bytes: this cannot fail, but if it
    // ever did, the key is still derived (unstretched) rather than the process panicking.
    let done = Params::new(STRETCH_MEMORY_KIB, STRETCH_PASSES, 1, Some(LEN))
        .map(|p| Argon2::new(Algorithm::Argon2id, Version::V0x13, p))
        .and_then(|a| a.hash_password_into(secret, salt, out));
    if done.is_err() {
        let mut m = mac_with(secret);
        m.update(salt);
        *out = m.finalize().into_bytes().into();
    }
}

fn mac_with(key: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length; this cannot fail.
    match HmacSha256::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC accepts every key length"),
    }
}

/// The operating system gave no random numbers.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the operating system's random source is unavailable ({0}): the rendezvous needs it for its \
     nonces and does not start without it"
)]
pub struct NoRandom(String);

/// A fresh random nonce from the operating system's random source (getrandom). There is no
/// fallback: predictable nonces would let a recorded hello be replayed.
pub fn nonce() -> Result<[u8; LEN], NoRandom> {
    let mut n = [0u8; LEN];
    getrandom::fill(&mut n).map_err(|e| NoRandom(e.to_string()))?;
    Ok(n)
}

/// A random number below `n` (`n` > 0), from the operating system's random source; 0 when it
/// is unavailable (used only to pick which connection to drop under load).
pub fn below(n: usize) -> usize {
    let mut b = [0u8; 8];
    match getrandom::fill(&mut b) {
        Ok(()) => (u64::from_le_bytes(b) % n.max(1) as u64) as usize,
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_depends_on_job_and_secret() {
        let none = Secret::default();
        let s = Secret::from_env(Some("hunter2\n"), None).unwrap();
        let a = JobKey::derive("slurm:1.0", &none, b"salt");
        let nonce = nonce().unwrap();
        let tag = a.sign(&[&nonce, b"hello"]);
        assert!(a.verify(&[&nonce, b"hello"], &tag));
        assert!(!a.verify(&[&nonce, b"hellp"], &tag));
        assert!(!a.verify(&[&nonce, b"hel", b"lo"], &tag));
        assert!(!JobKey::derive("slurm:1.1", &none, b"salt").verify(&[&nonce, b"hello"], &tag));
        assert!(!JobKey::derive("slurm:1.0", &s, b"salt").verify(&[&nonce, b"hello"], &tag));
        assert_ne!(super::nonce().unwrap(), nonce);
        // Sessions differ by either nonce, and from the job key.
        let other = super::nonce().unwrap();
        let s1 = a.session(&nonce, &other).sign(&[b"x"]);
        assert_ne!(s1, a.session(&other, &nonce).sign(&[b"x"]));
        assert_ne!(s1, a.sign(&[b"x"]));
        assert!(s.is_short() && !none.is_short());
        // Counted in characters: eight two-byte characters are still short.
        assert!(Secret::from_env(Some("ääääääää"), None).unwrap().is_short());
        assert!(
            !Secret::from_env(Some("a-long-enough-secret"), None)
                .unwrap()
                .is_short()
        );
    }

    #[test]
    fn the_secret_is_stretched() {
        // The same secret and job give the same key (every process agrees); the stretch costs
        // time (optimised: tens of milliseconds; the dev profile optimises argon2 too).
        let s = Secret::from_env(Some("hunter2"), None).unwrap();
        let t = std::time::Instant::now();
        let a = JobKey::derive("job", &s, b"salt").sign(&[b"x"]);
        let took = t.elapsed();
        assert_eq!(a, JobKey::derive("job", &s, b"salt").sign(&[b"x"]));
        assert_ne!(a, JobKey::derive("job2", &s, b"salt").sign(&[b"x"]));
        // Another launch's salt: another key (a table of guesses for one is no use for another).
        assert_ne!(a, JobKey::derive("job", &s, b"salt2").sign(&[b"x"]));
        // Without a secret the salt plays no part (the key is public anyway).
        let none = Secret::default();
        assert_eq!(
            JobKey::derive("job", &none, b"salt").sign(&[b"x"]),
            JobKey::derive("job", &none, b"other").sign(&[b"x"])
        );
        assert!(took > std::time::Duration::from_millis(2), "{took:?}");
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

    #[test]
    fn a_key_file_that_is_a_pipe_is_refused_before_it_is_opened() {
        // The test holds the pipe open for reading and writing, so an open of it would not
        // block, but a read would wait for the end that never comes (the test would hang).
        let p = std::env::temp_dir().join(format!("nccl-perf-key-fifo-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        let made = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .is_ok_and(|s| s.success());
        assert!(made, "mkfifo failed");
        let _held = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .unwrap();
        let e = Secret::from_env(None, p.to_str()).unwrap_err().to_string();
        assert!(
            e.ends_with("not a regular file (a pipe, device or folder)"),
            "{e}"
        );
        let e = Secret::from_env(None, Some("/")).unwrap_err().to_string();
        assert!(
            e.ends_with("not a regular file (a pipe, device or folder)"),
            "{e}"
        );
        let _ = std::fs::remove_file(&p);
    }
}
