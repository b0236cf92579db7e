//! Several NCCL unique ids for one communicator (`ncclCommInitRankScalable`): each process
//! contributes the ids it made, numbered within its group; every process gets its group's ids
//! in number order. The byte layout is the same for a contribution and for the answer: the
//! group's id count (`u32` little-endian), then `(number: u32, id: 128 bytes)` entries.

/// Bytes of one NCCL unique id.
pub const ID_BYTES: usize = 128;

/// One NCCL unique id and its place in its group's list.
pub type NumberedId = (u32, [u8; ID_BYTES]);

/// The most ids one communicator may be given (far above any sensible number of roots: one
/// per rank of a 4,096-process job would be 4,096).
pub const MAX_IDS: usize = 1 << 16;

/// A contribution (or an answer): the group's id count, then `ids`.
pub fn encode(count: usize, ids: &[NumberedId]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + ids.len() * (4 + ID_BYTES));
    out.extend_from_slice(&(count as u32).to_le_bytes());
    for (n, id) in ids {
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(id);
    }
    out
}

/// Reads what [`encode`] wrote: the id count and the entries, each number below the count.
pub fn decode(bytes: &[u8]) -> Result<(usize, Vec<NumberedId>), String> {
    let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    if bytes.len() < 4 || !(bytes.len() - 4).is_multiple_of(4 + ID_BYTES) {
        return Err(format!("{} bytes is not a list of NCCL ids", bytes.len()));
    }
    let count = word(bytes) as usize;
    if count == 0 || count > MAX_IDS {
        return Err(format!("{count} NCCL ids (1 to {MAX_IDS} allowed)"));
    }
    let mut ids = Vec::new();
    for entry in bytes[4..].chunks_exact(4 + ID_BYTES) {
        let n = word(entry);
        if n as usize >= count {
            return Err(format!("NCCL id number {n} of {count}"));
        }
        let mut id = [0u8; ID_BYTES];
        id.copy_from_slice(&entry[4..]);
        ids.push((n, id));
    }
    Ok((count, ids))
}

/// Rank 0's routing: for each process (its contribution and its group's colour), the answer
/// that holds every id its group's processes contributed, in number order. A contribution that
/// does not read is left out (its group's processes then miss those numbers and say so).
pub fn route(bodies: &[&[u8]], colors: &[i64]) -> Vec<Vec<u8>> {
    let read: Vec<Option<(usize, Vec<NumberedId>)>> =
        bodies.iter().map(|b| decode(b).ok()).collect();
    colors
        .iter()
        .map(|c| {
            let mut count = 0;
            let mut ids: Vec<NumberedId> = Vec::new();
            for (r, _) in read.iter().zip(colors).filter(|(_, x)| *x == c) {
                if let Some((n, mine)) = r {
                    count = count.max(*n);
                    ids.extend_from_slice(mine);
                }
            }
            ids.sort_by_key(|(n, _)| *n);
            ids.dedup_by_key(|(n, _)| *n);
            encode(count.max(1), &ids)
        })
        .collect()
}

/// A process' reading of its answer: exactly the ids numbered `0..count`.
pub fn finish(answer: &[u8], count: usize) -> Result<Vec<[u8; ID_BYTES]>, String> {
    let (n, ids) = decode(answer)?;
    if n != count {
        return Err(format!("{n} NCCL ids where {count} were expected"));
    }
    let mut out = Vec::with_capacity(count);
    for (want, (got, id)) in ids.iter().enumerate() {
        if *got as usize != want {
            return Err(format!("NCCL id number {want} was made by no process"));
        }
        out.push(*id);
    }
    if out.len() != count {
        return Err(format!(
            "NCCL id number {} was made by no process",
            out.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(b: u8) -> [u8; ID_BYTES] {
        [b; ID_BYTES]
    }

    #[test]
    fn each_group_gets_its_own_ids_in_order() {
        // Two groups (colours 0 and 1); group 0's ids come from processes 0 and 2, out of order.
        let bodies = [
            encode(2, &[(1, id(1))]),
            encode(1, &[(0, id(9))]),
            encode(2, &[(0, id(0))]),
            encode(1, &[]),
        ];
        let refs: Vec<&[u8]> = bodies.iter().map(|b| &b[..]).collect();
        let answers = route(&refs, &[0, 1, 0, 1]);
        assert_eq!(finish(&answers[0], 2).unwrap(), vec![id(0), id(1)]);
        assert_eq!(finish(&answers[2], 2).unwrap(), vec![id(0), id(1)]);
        assert_eq!(finish(&answers[1], 1).unwrap(), vec![id(9)]);
        assert_eq!(finish(&answers[3], 1).unwrap(), vec![id(9)]);
    }

    #[test]
    fn a_missing_or_malformed_id_is_named_not_guessed() {
        let bodies = [
            encode(3, &[(0, id(0))]),
            encode(3, &[(2, id(2))]),
            vec![7; 5],
        ];
        let refs: Vec<&[u8]> = bodies.iter().map(|b| &b[..]).collect();
        let answers = route(&refs, &[0, 0, 0]);
        let e = finish(&answers[0], 3).unwrap_err();
        assert!(e.contains("number 1 was made by no process"), "{e}");
        assert!(decode(&[7; 5]).is_err());
        assert!(
            decode(&encode(2, &[(2, id(0))])).is_err(),
            "a number past the count"
        );
        assert!(decode(&encode(0, &[])).is_err(), "no ids at all");
        assert!(decode(&encode(MAX_IDS + 1, &[])).is_err());
        // A count that differs from the one expected.
        let e = finish(&encode(2, &[(0, id(0)), (1, id(1))]), 3).unwrap_err();
        assert!(e.contains("2 NCCL ids where 3"), "{e}");
        // Numbers present but the list is short.
        let e = finish(&encode(2, &[(0, id(0))]), 2).unwrap_err();
        assert!(e.contains("number 1"), "{e}");
    }
}
