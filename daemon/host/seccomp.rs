//! No user namespaces in the box: inside one of its own a plugin would hold every capability over the
//! namespaces it made there, which the box is not built to contain. A seccomp filter refuses `unshare`
//! and `clone` asking for one (EPERM), and `clone3`, whose flags a filter cannot read (ENOSYS: the C
//! library then uses `clone`). Nor Unix sockets (EACCES), which reach programs outside the box, but a
//! pair of stream ones (already connected: a datagram pair sends to any path), nor io_uring, which would
//! make one past the filter, nor the kernel's keyrings (EPERM), which are the user's. ovai's own box installs it just before Node;
//! bubblewrap is handed it.

/// The filter, as the kernel (and bubblewrap's `--seccomp`) reads it; `None` on an architecture it is not
/// written for.
pub fn program() -> Option<Vec<libc::sock_filter>> {
    let arch = arch()?;
    // struct seccomp_data: nr at 0, arch at 4, args from 16 (each 8 bytes, the low half first).
    const NR: u32 = 0;
    const ARCH: u32 = 4;
    const ARG0_LOW: u32 = 16;
    const ARG1_LOW: u32 = 24;
    const LOAD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const JGE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
    const JSET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
    const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    const AND: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    let errno = |e: i32| libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA);
    let op = |code: u16, k: u32, jt: u8, jf: u8| libc::sock_filter { code, jt, jf, k };
    Some(vec![
        /* 0 */ op(LOAD, ARCH, 0, 0),
        // Another architecture's calls (i386's on x86_64) name other numbers: refused whole.
        /* 1 */
        op(JEQ, arch, 1, 0),
        /* 2 */ op(RET, errno(libc::EPERM), 0, 0),
        /* 3 */ op(LOAD, NR, 0, 0),
        // x32's calls carry this bit on x86_64, and are the same calls under other numbers.
        /* 4 */
        op(JGE, 0x4000_0000, 0, 1),
        /* 5 */ op(RET, errno(libc::EPERM), 0, 0),
        /* 6 */ op(JEQ, libc::SYS_clone3 as u32, 0, 1),
        /* 7 */ op(RET, errno(libc::ENOSYS), 0, 0),
        // io_uring makes sockets without the socket call this filter reads (Node falls back to epoll).
        /* 8 */
        op(JEQ, libc::SYS_io_uring_setup as u32, 0, 1),
        /* 9 */ op(RET, errno(libc::ENOSYS), 0, 0),
        // The kernel's keyrings are the user's, not the box's: keys put there outlive the host, and
        // keys kept there (by ssh, Kerberos, a keyring daemon) would be read.
        /* 10 */
        op(JEQ, libc::SYS_add_key as u32, 2, 0),
        /* 11 */ op(JEQ, libc::SYS_keyctl as u32, 1, 0),
        /* 12 */ op(JEQ, libc::SYS_request_key as u32, 0, 1),
        /* 13 */ op(RET, errno(libc::EPERM), 0, 0),
        // No Unix socket of its own (socketpair's, already connected, stay): through one a program
        // outside the box (tmux, ssh-agent, an editor's server, docker) would run what a plugin asks.
        /* 14 */
        op(JEQ, libc::SYS_socket as u32, 0, 4),
        /* 15 */ op(LOAD, ARG0_LOW, 0, 0),
        /* 16 */ op(JEQ, libc::AF_UNIX as u32, 0, 1),
        /* 17 */ op(RET, errno(libc::EACCES), 0, 0),
        /* 18 */ op(RET, ALLOW, 0, 0),
        // A pair of stream sockets only (pipes to child processes, Node's IPC): a datagram one sends to
        // any socket's path or abstract name, as a Unix socket of its own would.
        /* 19 */
        op(JEQ, libc::SYS_socketpair as u32, 0, 5),
        /* 20 */ op(LOAD, ARG1_LOW, 0, 0),
        /* 21 */ op(AND, 0xf, 0, 0),
        /* 22 */ op(JEQ, libc::SOCK_STREAM as u32, 0, 1),
        /* 23 */ op(RET, ALLOW, 0, 0),
        /* 24 */ op(RET, errno(libc::EACCES), 0, 0),
        /* 25 */ op(JEQ, libc::SYS_unshare as u32, 1, 0),
        /* 26 */ op(JEQ, libc::SYS_clone as u32, 0, 3),
        /* 27 */ op(LOAD, ARG0_LOW, 0, 0),
        /* 28 */ op(JSET, libc::CLONE_NEWUSER as u32, 0, 1),
        /* 29 */ op(RET, errno(libc::EPERM), 0, 0),
        /* 30 */ op(RET, ALLOW, 0, 0),
    ])
}

fn arch() -> Option<u32> {
    if cfg!(target_arch = "x86_64") {
        Some(0xC000_003E)
    } else if cfg!(target_arch = "aarch64") {
        Some(0xC000_00B7)
    } else {
        None
    }
}

/// The filter as bytes, for bubblewrap's `--seccomp FD`.
pub fn bytes() -> Option<Vec<u8>> {
    Some(
        program()?
            .iter()
            .flat_map(|f| {
                let mut b = Vec::with_capacity(8);
                b.extend_from_slice(&f.code.to_ne_bytes());
                b.push(f.jt);
                b.push(f.jf);
                b.extend_from_slice(&f.k.to_ne_bytes());
                b
            })
            .collect(),
    )
}

/// Installs the filter on this process (no_new_privs must be set). Async-signal-safe: it only calls
/// prctl on memory made before the fork.
pub fn install(program: &[libc::sock_filter]) -> std::io::Result<()> {
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `prog` points at `program`, alive for the call; the kernel copies it.
    let r = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const libc::sock_fprog,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_jump_lands_inside_the_program() {
        let program = super::program().expect("written for this architecture");
        for (at, op) in program.iter().enumerate() {
            let is_jump = op.code & libc::BPF_JMP as u16 != 0 && op.code & 0x07 == 0x05;
            if is_jump {
                assert!(at + 1 + (op.jt.max(op.jf) as usize) < program.len(), "{at}");
            }
        }
        assert_eq!(super::bytes().unwrap().len(), program.len() * 8);
    }
}
