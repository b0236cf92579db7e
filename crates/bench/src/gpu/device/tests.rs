use super::*;

#[cfg(feature = "test-hooks")]
#[test]
fn a_hold_lasts_until_its_time_or_the_release() {
    let t = Instant::now();
    // SAFETY: `hold` reads the pointer as an integer only.
    unsafe { hold(20 as *mut c_void) };
    assert!(t.elapsed() >= Duration::from_millis(20));
    release_holds();
    let t = Instant::now();
    // SAFETY: as above.
    unsafe { hold(60_000 as *mut c_void) };
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn spans_stay_inside_their_buffer() {
    // A buffer that was never allocated (pointer only): spans are checked, nothing freed.
    let mut b = DeviceBuffer {
        ptr: 0x1000,
        len: 64,
        ctx: Context(std::ptr::null_mut()),
        from: Allocator::Driver,
    };
    assert!(b.span(0x1000, 64).is_ok());
    assert!(b.span(0x1010, 48).is_ok());
    assert!(b.span(0x1010, 49).is_err());
    assert!(b.span(0xfff, 1).is_err());
    assert!(b.span(u64::MAX, 2).is_err());
    // Empty spans touch nothing: allowed anywhere.
    assert!(b.span(0x9999_0000, 0).is_ok());
    assert_eq!(b.whole().len(), 64);
    let mut one = [0u8; 2];
    assert!(b.span(0x1000, 1).unwrap().copy_to_host(&mut one).is_err());
    b.leak();
    assert_eq!(b.addr(), 0);
    assert!(b.span(0, 1).is_err());
    assert_eq!(b.whole().len(), 0);
}
