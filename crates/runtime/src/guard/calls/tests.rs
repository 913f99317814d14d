//! Each family of calls names the buffers the kernel reads and writes.

use super::*;

fn collect(nr: i64, a: [u64; 6], memory: &[(usize, Vec<u8>)]) -> Vec<(usize, usize, Access)> {
    let peek = |addr: usize, out: &mut [u8]| {
        memory.iter().any(|(at, bytes)| {
            let Some(off) = addr.checked_sub(*at) else { return false };
            let Some(src) = bytes.get(off..off + out.len()) else {
                return false;
            };
            out.copy_from_slice(src);
            true
        })
    };
    let mut seen = Vec::new();
    buffers(nr, &a, &peek, &mut |addr, len, access| seen.push((addr, len, access)));
    seen
}

#[test]
fn a_read_writes_its_buffer_and_a_write_reads_it() {
    assert_eq!(collect(SYS_read, [3, 0x1000, 77, 0, 0, 0], &[]), vec![(0x1000, 77, W)]);
    assert_eq!(collect(SYS_write, [3, 0x2000, 5, 0, 0, 0], &[]), vec![(0x2000, 5, R)]);
}

#[test]
fn iovecs_are_followed_to_their_buffers() {
    let mut iov = Vec::new();
    for (base, len) in [(0x5000u64, 10u64), (0x9000, 4096)] {
        iov.extend_from_slice(&base.to_ne_bytes());
        iov.extend_from_slice(&len.to_ne_bytes());
    }
    let seen = collect(SYS_readv, [3, 0x100, 2, 0, 0, 0], &[(0x100, iov)]);
    assert_eq!(seen, vec![(0x100, 32, R), (0x5000, 10, W), (0x9000, 4096, W)]);
}

#[test]
fn a_received_message_names_its_address_iovecs_and_control_data() {
    let mut msg = vec![0u8; 56];
    msg[0..8].copy_from_slice(&0x7000u64.to_ne_bytes());
    msg[8..12].copy_from_slice(&16u32.to_ne_bytes());
    msg[16..24].copy_from_slice(&0x300u64.to_ne_bytes());
    msg[24..32].copy_from_slice(&1u64.to_ne_bytes());
    msg[32..40].copy_from_slice(&0x8000u64.to_ne_bytes());
    msg[40..48].copy_from_slice(&64u64.to_ne_bytes());
    let mut iov = 0xa000u64.to_ne_bytes().to_vec();
    iov.extend_from_slice(&1500u64.to_ne_bytes());
    let seen = collect(SYS_recvmsg, [3, 0x200, 0, 0, 0, 0], &[(0x200, msg), (0x300, iov)]);
    assert_eq!(
        seen,
        vec![
            (0x200, 56, W),
            (0x7000, 16, W),
            (0x300, 16, R),
            (0xa000, 1500, W),
            (0x8000, 64, W)
        ]
    );
}

#[test]
fn an_unreadable_structure_stops_the_walk_without_a_crash() {
    let seen = collect(SYS_writev, [3, 0x100, 4, 0, 0, 0], &[]);
    assert_eq!(seen, vec![(0x100, 64, R)]);
}

#[test]
fn ioctl_sizes_come_from_the_request() {
    // TIOCGWINSZ is _IOR('T', 0x13, struct winsize) on the kernel's
    // encoding: read from the caller's side means the kernel writes.
    let tiocgwinsz: u64 = (2 << 30) | (8 << 16) | (0x54 << 8) | 0x13;
    assert_eq!(
        collect(SYS_ioctl, [1, tiocgwinsz, 0x4000, 0, 0, 0], &[]),
        vec![(0x4000, 8, W)]
    );
    // An old request with no size encoded names no buffer here (the
    // guard's any-pointer rule covers its page).
    assert!(collect(SYS_ioctl, [1, 0x5401, 0x4000, 0, 0, 0], &[]).is_empty());
}

#[test]
fn futex_commands_name_their_timeout_and_second_word() {
    // FUTEX_WAIT_PRIVATE: the word and a timeout.
    assert_eq!(
        collect(SYS_futex, [0x10, 128, 0, 0x20, 0, 0], &[]),
        vec![(0x10, 4, W), (0x20, TIMESPEC, R)]
    );
    // FUTEX_CMP_REQUEUE: the fourth argument is a count, not a pointer.
    assert_eq!(
        collect(SYS_futex, [0x10, 4, 1, 7, 0x30, 0], &[]),
        vec![(0x10, 4, W), (0x30, 4, W)]
    );
}

#[test]
fn execve_names_every_argument_string() {
    let mut argv = Vec::new();
    for p in [0x6000u64, 0x6100, 0] {
        argv.extend_from_slice(&p.to_ne_bytes());
    }
    let seen = collect(SYS_execve, [0x5000, 0x400, 0, 0, 0, 0], &[(0x400, argv)]);
    assert_eq!(
        seen,
        vec![
            (0x5000, PATH, R),
            (0x400, 8, R),
            (0x6000, PATH, R),
            (0x408, 8, R),
            (0x6100, PATH, R),
            (0x410, 8, R),
            (0, 8, R),
        ]
    );
}
