//! Rank 0's first words to every connection: a fresh nonce, the launch's salt (drawn once per
//! launch; the secret is stretched under it, `auth::JobKey::derive`) and both signed with the
//! job key. A process answers only a challenge it can verify: one from anyone without the key
//! (a squatter on the port or on another address of rank 0's name, another job's rank 0) gets
//! no signed hello, so a keyless stranger learns nothing it could test guesses against, and
//! cannot pick the salt a process stretches its secret under.

use crate::auth::{JobKey, LEN, NoRandom, nonce};

/// The challenge's length on the wire: nonce, salt, signature.
pub(super) const BYTES: usize = 3 * LEN;

/// One connection's challenge.
#[derive(Clone)]
pub(super) struct Challenge {
    /// Fresh for this connection: the hello is signed over it (no replay).
    pub(super) nonce: [u8; LEN],
    /// The launch's salt.
    pub(super) salt: [u8; LEN],
    mac: [u8; LEN],
}

impl Challenge {
    /// A challenge with a fresh nonce for the launch whose salt is `salt` and key `key`.
    pub(super) fn new(key: &JobKey, salt: &[u8; LEN]) -> Result<Challenge, NoRandom> {
        let nonce = nonce()?;
        Ok(Challenge {
            nonce,
            salt: *salt,
            mac: key.sign(&[b"challenge", &nonce, salt]),
        })
    }

    /// The bytes sent (and signed over by the hello and the session key).
    pub(super) fn bytes(&self) -> [u8; BYTES] {
        let mut b = [0u8; BYTES];
        b[..LEN].copy_from_slice(&self.nonce);
        b[LEN..2 * LEN].copy_from_slice(&self.salt);
        b[2 * LEN..].copy_from_slice(&self.mac);
        b
    }

    /// A challenge as received (`None`: not the length of one).
    pub(super) fn parse(b: &[u8]) -> Option<Challenge> {
        if b.len() != BYTES {
            return None;
        }
        let field = |i: usize| -> [u8; LEN] {
            let mut f = [0u8; LEN];
            f.copy_from_slice(&b[i * LEN..(i + 1) * LEN]);
            f
        };
        Some(Challenge {
            nonce: field(0),
            salt: field(1),
            mac: field(2),
        })
    }

    /// Whether it was signed with `key` (the key derived under this challenge's salt).
    pub(super) fn verify(&self, key: &JobKey) -> bool {
        key.verify(&[b"challenge", &self.nonce, &self.salt], &self.mac)
    }
}

/// The job key for each salt a process is challenged with: stretching costs tens of
/// milliseconds, so the key of the last salt is kept (rank 0's salt is the same on every
/// attempt; a stranger that sends a new one each time costs one stretch per attempt, and
/// attempts are paced).
pub(super) struct Keys<'a> {
    job: &'a str,
    secret: &'a crate::auth::Secret,
    last: Option<([u8; LEN], JobKey)>,
}

impl<'a> Keys<'a> {
    /// Keys of the job `job` with the user's `secret`.
    pub(super) fn new(job: &'a str, secret: &'a crate::auth::Secret) -> Keys<'a> {
        Keys {
            job,
            secret,
            last: None,
        }
    }

    /// The key under `salt`.
    pub(super) fn under(&mut self, salt: &[u8; LEN]) -> JobKey {
        match &self.last {
            Some((s, k)) if s == salt => k.clone(),
            _ => {
                let k = JobKey::derive(self.job, self.secret, salt);
                self.last = Some((*salt, k.clone()));
                k
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Secret;

    #[test]
    fn a_challenge_verifies_only_under_its_key_and_unchanged() {
        let secret = Secret::from_env(Some("a long enough secret"), None).unwrap();
        let salt = [3u8; LEN];
        let mut keys = Keys::new("job", &secret);
        let key = keys.under(&salt);
        let c = Challenge::new(&key, &salt).unwrap();
        let back = Challenge::parse(&c.bytes()).unwrap();
        assert!(back.verify(&keys.under(&back.salt)));
        // Another secret, another job or another salt: refused.
        let other = Secret::from_env(Some("another long secret"), None).unwrap();
        assert!(!back.verify(&Keys::new("job", &other).under(&salt)));
        assert!(!back.verify(&Keys::new("job2", &secret).under(&salt)));
        let mut moved = c.bytes();
        moved[LEN] ^= 1;
        let moved = Challenge::parse(&moved).unwrap();
        assert!(!moved.verify(&keys.under(&moved.salt)));
        assert!(Challenge::parse(&c.bytes()[..BYTES - 1]).is_none());
        // Two challenges of one launch differ in their nonce only.
        let d = Challenge::new(&key, &salt).unwrap();
        assert_ne!(c.nonce, d.nonce);
        assert_eq!(c.salt, d.salt);
    }
}
