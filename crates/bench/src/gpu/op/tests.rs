use super::*;

#[test]
fn rotation_walks_the_shifts_by_addition() {
    for (span, steps) in [(0, 1), (8, 1), (8, 3), (1 << 20, 1024), (24, 7)] {
        let mut r = Shifts::new(span, steps);
        for it in 0..3000u64 {
            assert_eq!(r.next_shift(), span * (it % steps), "{span} {steps} {it}");
        }
    }
}

#[test]
fn ranges_follow_each_calls_definition() {
    let io = Io {
        send: 0x1000,
        recv: 0x2000,
        count: 10,
    };
    assert_eq!(
        Bound::AllGather(io).ranges(4, 1, 3),
        [(0x1000, 40), (0x2000, 120)]
    );
    assert_eq!(
        Bound::ReduceScatter(io).ranges(4, 1, 3),
        [(0x1000, 120), (0x2000, 40)]
    );
    assert_eq!(
        Bound::AlltoAll(io).ranges(2, 0, 4),
        [(0x1000, 80), (0x2000, 80)]
    );
    // Root-only buffers count on the root only.
    assert_eq!(Bound::Broadcast(io, 1).ranges(4, 0, 2)[0], (0, 0));
    assert_eq!(Bound::Broadcast(io, 1).ranges(4, 1, 2)[0], (0x1000, 40));
    assert_eq!(Bound::Reduce(io, 0).ranges(4, 1, 2)[1], (0, 0));
    assert_eq!(Bound::Gather(io, 0).ranges(4, 0, 2)[1], (0x2000, 80));
    assert_eq!(
        Bound::Scatter(io, 0).ranges(4, 1, 2),
        [(0, 0), (0x2000, 40)]
    );
    let copy = Bound::Copy {
        dst: 0x2000,
        src: 0x1000,
        bytes: 7,
    };
    assert_eq!(copy.ranges(8, 0, 1), [(0x1000, 7), (0x2000, 7)]);
}

#[test]
fn ranges_are_checked_with_the_rotation() {
    let bufs = [(0x1000, 0x100), (0x2000, 0x100)];
    let send = |buf, count| Bound::Send {
        buf,
        count,
        peer: 0,
    };
    assert!(check_ranges(&[send(0x1000, 64)], 4, 0, 1, 0, &bufs).is_ok());
    assert!(check_ranges(&[send(0x1000, 65)], 4, 0, 1, 0, &bufs).is_err());
    assert!(check_ranges(&[send(0x1000, 32)], 4, 0, 1, 128, &bufs).is_ok());
    assert!(check_ranges(&[send(0x1000, 32)], 4, 0, 1, 129, &bufs).is_err());
    // A range may not straddle two buffers, nor start before one.
    assert!(check_ranges(&[send(0x10f0, 8)], 4, 0, 1, 0, &bufs).is_err());
    assert!(check_ranges(&[send(0xff0, 1)], 4, 0, 1, 0, &bufs).is_err());
    // Empty calls reach nothing; overflow is outside.
    assert!(check_ranges(&[send(0x9999, 0), Bound::GroupEnd], 4, 0, 1, 0, &bufs).is_ok());
    assert!(check_ranges(&[send(u64::MAX - 2, 1)], 4, 0, 1, 0, &bufs).is_err());
    // A freed buffer (address 0) holds nothing.
    assert!(check_ranges(&[send(0, 1)], 1, 0, 1, 0, &[(0, 16)]).is_err());
}
