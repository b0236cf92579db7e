//! Every frame after the welcome is authenticated: its body carries HMAC-SHA256 under the
//! connection's session key (`auth::JobKey::session`) over the direction, a sequence number, the
//! tag and the body. The sequence numbers are implicit (both sides count), so a frame that is
//! changed, injected, replayed, reordered, cut short or dropped fails the check and the
//! connection is given up, naming the peer.

use crate::auth::{JobKey, LEN};

/// Which way a frame travels (part of what is signed: a frame cannot be reflected back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Direction {
    /// Rank 0 to another process.
    FromRoot,
    /// Another process to rank 0.
    ToRoot,
}

/// One direction of one connection: the session key and the next sequence number.
pub(super) struct Seal {
    key: JobKey,
    direction: Direction,
    seq: u64,
}

/// A frame that fails authentication.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "a message that fails authentication (changed, injected, replayed or out of order on the way)"
)]
pub(super) struct Tampered;

impl Seal {
    /// The seal of frames going `direction` under `session`, from sequence number 0.
    pub(super) fn new(session: &JobKey, direction: Direction) -> Seal {
        Seal {
            key: session.clone(),
            direction,
            seq: 0,
        }
    }

    /// The frame header that is signed with the body: direction, tag, sequence number.
    fn head(&self, tag: u8) -> [u8; 10] {
        let mut h = [0u8; 10];
        h[0] = self.direction as u8;
        h[1] = tag;
        h[2..].copy_from_slice(&self.seq.to_le_bytes());
        h
    }

    /// `body` followed by its authentication tag; the next frame gets the next number.
    pub(super) fn close(&mut self, tag: u8, body: &[u8]) -> Vec<u8> {
        let mac = self.key.sign(&[&self.head(tag), body]);
        self.seq += 1;
        let mut out = Vec::with_capacity(body.len() + LEN);
        out.extend_from_slice(body);
        out.extend_from_slice(&mac);
        out
    }

    /// Gives back the number of the last frame sealed, which was never sent: the next frame
    /// takes it.
    pub(super) fn take_back(&mut self) {
        self.seq = self.seq.saturating_sub(1);
    }

    /// The body of a sealed frame, if it is the next one of this direction, unchanged.
    pub(super) fn open(&mut self, tag: u8, mut sealed: Vec<u8>) -> Result<Vec<u8>, Tampered> {
        let at = sealed.len().checked_sub(LEN).ok_or(Tampered)?;
        let mac = sealed.split_off(at);
        if !self.key.verify(&[&self.head(tag), &sealed], &mac) {
            return Err(Tampered);
        }
        self.seq += 1;
        Ok(sealed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Secret;

    fn pair() -> (Seal, Seal) {
        let session =
            JobKey::derive("job", &Secret::default(), b"salt").session(&[1; 32], &[2; 32]);
        (
            Seal::new(&session, Direction::ToRoot),
            Seal::new(&session, Direction::ToRoot),
        )
    }

    #[test]
    fn frames_open_in_order_and_nothing_else_does() {
        let (mut tx, mut rx) = pair();
        let a = tx.close(3, b"first");
        let b = tx.close(3, b"second");
        assert_eq!(rx.open(3, a.clone()).unwrap(), b"first");
        // Replayed, changed, retagged, cut short, or from the other direction: refused.
        assert_eq!(rx.open(3, a.clone()), Err(Tampered));
        let mut changed = b.clone();
        changed[0] ^= 1;
        assert_eq!(rx.open(3, changed), Err(Tampered));
        assert_eq!(rx.open(4, b.clone()), Err(Tampered));
        assert_eq!(rx.open(3, b[..b.len() - 1].to_vec()), Err(Tampered));
        assert_eq!(rx.open(3, Vec::new()), Err(Tampered));
        assert_eq!(rx.open(3, b.clone()).unwrap(), b"second");
        let session =
            JobKey::derive("job", &Secret::default(), b"salt").session(&[1; 32], &[2; 32]);
        let mut back = Seal::new(&session, Direction::FromRoot);
        let (mut tx, _) = pair();
        assert_eq!(back.open(3, tx.close(3, b"x")), Err(Tampered));
    }

    #[test]
    fn a_number_given_back_goes_to_the_next_frame() {
        let (mut tx, mut rx) = pair();
        let _never_sent = tx.close(10, b"");
        tx.take_back();
        assert_eq!(rx.open(8, tx.close(8, b"one")).unwrap(), b"one");
    }

    #[test]
    fn a_dropped_frame_breaks_the_sequence() {
        let (mut tx, mut rx) = pair();
        let _lost = tx.close(8, b"one");
        assert_eq!(rx.open(8, tx.close(8, b"two")), Err(Tampered));
    }
}
