//! A PMI-1 client over the launcher's socket, written from MPICH's description of the wire
//! protocol (no library): newline-terminated lines of `key=value` words, the first `cmd=...`.
//! `mpiexec.hydra` hands every process a connected socket in `PMI_FD` (Slurm's `--mpi=pmi2`
//! too); with `PMI_PORT=host:port` the process connects itself and first says who it is
//! (`cmd=initack pmiid=...`). Then `init`, `get_maxes`, `get_appnum`, `get_my_kvsname`,
//! `put`/`get` in the job's key-value space, `barrier_in`/`barrier_out` to make puts visible,
//! `finalize` (or `abort`). Values travel hex-encoded; every read ends by the deadline, a line
//! longer than [`MAX_LINE`] or a reply that is not the expected one is an error, never a panic.

use super::{Conn, Engine};
use crate::error::{Error, Result};
use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

/// The longest reply line read (PMI-1's values are at most a few kilobytes).
pub const MAX_LINE: usize = 16 * 1024;

/// The protocol's own limits, as the launcher tells them (`get_maxes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Maxes {
    /// Longest key-value-space name.
    pub kvsname: usize,
    /// Longest key.
    pub key: usize,
    /// Longest value (before we hex-encode: half of it).
    pub value: usize,
}

/// One process' PMI-1 session.
pub struct Pmi1 {
    conn: Box<dyn Conn>,
    /// Bytes read past the last line.
    buf: Vec<u8>,
    rank: usize,
    size: usize,
    kvsname: String,
    maxes: Maxes,
    deadline: Instant,
    /// Where the socket came from, for messages (`PMI_FD=6`, `PMI_PORT=host:1234`).
    origin: String,
    done: bool,
}

/// The words of one line (`cmd=put_result rc=0` → `[("cmd","put_result"),("rc","0")]`);
/// words without `=` are skipped.
pub fn words(line: &str) -> Vec<(&str, &str)> {
    line.split_ascii_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect()
}

fn field<'a>(w: &[(&'a str, &'a str)], key: &str) -> Option<&'a str> {
    w.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes of a hex text; `None` on anything else.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    let t = text.as_bytes();
    if !t.len().is_multiple_of(2) {
        return None;
    }
    t.chunks(2)
        .map(|p| {
            let d = |c: u8| (c as char).to_digit(16);
            Some((d(p[0])? * 16 + d(p[1])?) as u8)
        })
        .collect()
}

impl Pmi1 {
    /// Starts a session on `conn`: `pmi_id` (`PMI_ID`) when the process connected itself
    /// (`PMI_PORT`), then init, the limits, the application number and the key-value space.
    /// `rank`/`size` are the launcher's (`PMI_RANK`/`PMI_SIZE`), replaced by what a `PMI_PORT`
    /// server sets. Everything must be done by `deadline`.
    pub fn start(
        conn: Box<dyn Conn>,
        origin: String,
        rank: Option<usize>,
        size: Option<usize>,
        pmi_id: Option<&str>,
        deadline: Instant,
    ) -> Result<Pmi1> {
        let mut p = Pmi1 {
            conn,
            buf: Vec::new(),
            rank: rank.unwrap_or(usize::MAX),
            size: size.unwrap_or(0),
            kvsname: String::new(),
            maxes: Maxes {
                kvsname: 256,
                key: 64,
                value: 1024,
            },
            deadline,
            origin,
            done: false,
        };
        if let Some(id) = pmi_id {
            p.send(&format!("cmd=initack pmiid={id}"))?;
            p.expect("initack")?;
            for _ in 0..3 {
                let line = p.expect("set")?;
                let w = words(&line);
                for (k, v) in w.iter().skip(1) {
                    match *k {
                        "size" => p.size = p.number(k, v)?,
                        "rank" => p.rank = p.number(k, v)?,
                        _ => {}
                    }
                }
            }
        }
        let line = p.ask(
            "cmd=init pmi_version=1 pmi_subversion=1",
            "response_to_init",
        )?;
        p.rc_ok(&line, "init")?;
        let line = p.ask("cmd=get_maxes", "maxes")?;
        let w = words(&line);
        let get = |k: &str, d: usize| field(&w, k).and_then(|v| v.parse().ok()).unwrap_or(d);
        p.maxes = Maxes {
            kvsname: get("kvsname_max", 256),
            key: get("keylen_max", 64),
            value: get("vallen_max", 1024),
        };
        p.ask("cmd=get_appnum", "appnum")?;
        let line = p.ask("cmd=get_my_kvsname", "my_kvsname")?;
        p.kvsname = field(&words(&line), "kvsname")
            .filter(|k| !k.is_empty() && k.len() <= p.maxes.kvsname.max(1))
            .ok_or_else(|| p.garbage("my_kvsname without a kvsname", &line))?
            .to_string();
        if p.size == 0 || p.size > crate::launch::MAX_WORLD || p.rank >= p.size {
            return Err(Error::Launch(format!(
                "PMI-1 ({}): rank {} of size {} is not a launch (check PMI_RANK/PMI_SIZE)",
                p.origin, p.rank, p.size
            )));
        }
        Ok(p)
    }

    /// The key-value space's name (part of the job's identity).
    #[cfg(test)]
    pub fn kvsname(&self) -> &str {
        &self.kvsname
    }

    /// The launcher's limits.
    #[cfg(test)]
    pub fn maxes(&self) -> Maxes {
        self.maxes
    }

    fn number(&self, k: &str, v: &str) -> Result<usize> {
        v.parse()
            .map_err(|_| self.garbage(&format!("{k} is not a number"), v))
    }

    fn garbage(&self, what: &str, line: &str) -> Error {
        Error::Launch(format!(
            "PMI-1 ({}): the launcher's answer makes no sense ({what}): '{}'",
            self.origin,
            crate::peer_text::clean(line, 120)
        ))
    }

    fn rc_ok(&self, line: &str, what: &str) -> Result<()> {
        match field(&words(line), "rc") {
            None | Some("0") => Ok(()),
            Some(rc) => Err(Error::Launch(format!(
                "PMI-1 ({}): {what} failed (rc={}): '{}'",
                self.origin,
                crate::peer_text::clean(rc, 20),
                crate::peer_text::clean(line, 120)
            ))),
        }
    }

    fn lost(&self, why: String, timed_out: bool) -> Error {
        Error::Peers {
            msg: format!("PMI-1 ({}): {why}", self.origin),
            timed_out,
            lost: Vec::new(),
        }
    }

    fn send(&mut self, line: &str) -> Result<()> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(self.lost(format!("timed out before sending '{line}'"), true));
        }
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        let r = self
            .conn
            .set_timeouts(left)
            .and_then(|()| self.conn.write_all(&bytes));
        r.map_err(|e| self.lost(format!("cannot write to the launcher: {e}"), is_timeout(&e)))
    }

    /// The next line, by the deadline.
    fn line(&mut self) -> Result<String> {
        loop {
            if let Some(end) = self.buf.iter().position(|b| *b == b'\n') {
                let rest = self.buf.split_off(end + 1);
                let line = std::mem::replace(&mut self.buf, rest);
                return Ok(String::from_utf8_lossy(&line[..end]).trim().to_string());
            }
            if self.buf.len() > MAX_LINE {
                return Err(Error::Launch(format!(
                    "PMI-1 ({}): the launcher sent a line longer than {MAX_LINE} bytes",
                    self.origin
                )));
            }
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.lost(
                    "timed out waiting for the launcher's answer (NCCL_PERF_BOOTSTRAP_TIMEOUT)"
                        .into(),
                    true,
                ));
            }
            let mut chunk = [0u8; 4096];
            if let Err(e) = self.conn.set_timeouts(left) {
                return Err(self.lost(format!("socket: {e}"), false));
            }
            match self.conn.read(&mut chunk) {
                Ok(0) => {
                    return Err(self.lost("the launcher closed the connection".into(), false));
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted || is_timeout(&e) => {}
                Err(e) => return Err(self.lost(format!("cannot read: {e}"), false)),
            }
        }
    }

    /// The next line, which must be `cmd=<cmd>`.
    fn expect(&mut self, cmd: &str) -> Result<String> {
        let line = self.line()?;
        if field(&words(&line), "cmd") != Some(cmd) {
            return Err(self.garbage(&format!("expected cmd={cmd}"), &line));
        }
        Ok(line)
    }

    fn ask(&mut self, line: &str, answer: &str) -> Result<String> {
        self.send(line)?;
        self.expect(answer)
    }

    /// The job-wide key of `key` put by `rank`.
    fn full_key(&self, rank: usize, key: &str) -> Result<String> {
        let k = format!("nccl-perf-{rank}-{key}");
        if k.len() > self.maxes.key
            || !k
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(Error::Internal(format!(
                "PMI-1 ({}): the key '{k}' is longer than the launcher's {} characters or not plain",
                self.origin, self.maxes.key
            )));
        }
        Ok(k)
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

impl Engine for Pmi1 {
    fn name(&self) -> String {
        format!("PMI-1 ({})", self.origin)
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn job(&self) -> String {
        format!("pmi:{}", self.kvsname)
    }
    fn put(&mut self, key: &str, value: &[u8]) -> Result<()> {
        let k = self.full_key(self.rank, key)?;
        let v = hex(value);
        // The launcher's limit counts the terminating NUL of its C string.
        if v.len() >= self.maxes.value {
            return Err(Error::Internal(format!(
                "PMI-1 ({}): a value of {} hex characters is longer than the launcher's {}",
                self.origin,
                v.len(),
                self.maxes.value
            )));
        }
        let line = format!("cmd=put kvsname={} key={k} value={v}", self.kvsname);
        let line = self.ask(&line, "put_result")?;
        self.rc_ok(&line, "put")
    }
    fn fence(&mut self) -> Result<()> {
        self.ask("cmd=barrier_in", "barrier_out").map(|_| ())
    }
    fn get(&mut self, rank: usize, key: &str) -> Result<Vec<u8>> {
        let k = self.full_key(rank, key)?;
        let line = format!("cmd=get kvsname={} key={k}", self.kvsname);
        let line = self.ask(&line, "get_result")?;
        self.rc_ok(&line, &format!("get of {k}"))?;
        let w = words(&line);
        let v =
            field(&w, "value").ok_or_else(|| self.garbage("get_result without a value", &line))?;
        unhex(v).ok_or_else(|| self.garbage("a value that is not hex", &line))
    }
    fn finalize(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(());
        }
        self.ask("cmd=finalize", "finalize_ack").map(|_| ())
    }
    fn grace(&mut self, d: Duration) {
        self.deadline = self.deadline.max(Instant::now() + d);
    }
    fn abort(&mut self, code: i32, msg: &str) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        // No answer comes: the launcher ends the job. The message is not sent: PMI-1's abort
        // has no room for one that every server reads.
        let _ = msg;
        let _ = self.send(&format!("cmd=abort exitcode={code}"));
    }
}

#[cfg(test)]
mod tests;
