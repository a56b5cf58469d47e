//! ovai's own box for the plugin host, where bubblewrap is not installed: `ovai host-box`, started by the
//! daemon in place of Node, makes the box from Linux namespaces and then runs Node inside it.
//!
//! The same box as bubblewrap's: a PID namespace of its own (the host cannot see or signal anything outside,
//! and everything it starts ends with the box's first process), a mount namespace in which `.ovai/` is an
//! empty, read-only folder but for the host's own script, each desk's `.mcp.json` cannot be opened, and
//! what runs outside later is read-only, and no capabilities once Node starts (as root they are dropped; as
//! anybody else a user namespace gives them for the set-up only, and exec takes them away).
//!
//! Three processes: this one (the daemon's child, which waits), the namespace's first process (which reaps
//! orphans and ends the box when Node ends) and Node. Each dies with its parent.

use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::Signal;
use nix::sys::statvfs::{FsFlags, statvfs};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork};

pub use super::sandbox::BoxPlan as Plan;

/// The exit code of a box that could not be made (Node's own codes are passed through).
const CANNOT: i32 = 125;

/// Makes the box and runs the command in it; returns only the code to exit with.
pub fn run(plan: &Plan) -> i32 {
    match make(plan) {
        Ok(code) => code,
        Err(why) => {
            eprintln!("ovai host-box: the plugin host's box could not be made: {why}");
            CANNOT
        }
    }
}

fn make(plan: &Plan) -> Result<i32, String> {
    let Some(program) = plan.command.first() else {
        return Err("no program was named after --".into());
    };
    let argv: Vec<CString> = plan
        .command
        .iter()
        .map(|a| CString::new(a.as_bytes()).map_err(|_| format!("the argument {a:?} holds a NUL")))
        .collect::<Result<_, _>>()?;
    let program = CString::new(program.as_bytes()).map_err(|_| "the program holds a NUL")?;
    let root = nix::unistd::geteuid().is_root();
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    // IPC of its own: System V objects made in the box go with it (see sandbox.rs).
    let mut flags = CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWIPC;
    if !root {
        flags |= CloneFlags::CLONE_NEWUSER;
    }
    unshare(flags).map_err(|e| {
        format!(
            "the kernel refused new namespaces ({e}){}",
            if root {
                ""
            } else {
                "; unprivileged user namespaces may be switched off here (sysctl kernel.unprivileged_userns_clone or user.max_user_namespaces)"
            }
        )
    })?;
    if !root {
        // The same user inside as outside, so the instance's files keep their owner.
        write("/proc/self/setgroups", "deny")?;
        write("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
        write("/proc/self/gid_map", &format!("{gid} {gid} 1"))?;
    }
    // Nothing done here may reach the daemon's view of the files.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| {
        format!(
            "the mounts could not be made private ({e}): the kernel lets this user make namespaces but not \
             mount in them (Ubuntu's AppArmor rule for unprivileged user namespaces does that); install \
             bubblewrap (apt-get install bubblewrap), which comes with a profile that allows it"
        )
    })?;
    // Opened in the new namespace before anything is hidden: what is kept is bound back from these (a
    // bind from a file opened before the unshare would name a mount of the daemon's namespace).
    let kept: Vec<(std::fs::File, &PathBuf)> = plan
        .keep
        .iter()
        .map(|p| {
            std::fs::File::open(p)
                .map(|f| (f, p))
                .map_err(|e| format!("{} could not be opened: {e}", p.display()))
        })
        .collect::<Result<_, _>>()?;

    // The working directory as a path: once the mounts are made it is entered again through them (the
    // directory entered before would reach past every one of them with a relative path).
    let cwd = std::env::current_dir()
        .map_err(|e| format!("the working directory is unreadable ({e})"))?;
    // What goes back below a private folder is opened before that folder is covered: the root, and
    // what is brought (each from its own place).
    let below_private = |p: &PathBuf| plan.private.iter().any(|t| p.starts_with(t));
    if plan.bring.len() != plan.bring_from.len() {
        return Err("each --bring needs a --bring-from".into());
    }
    let brought: Vec<(std::fs::File, &PathBuf)> = plan
        .frozen
        .iter()
        .filter(|p| below_private(p))
        .map(|p| (p, p))
        .chain(plan.bring_from.iter().zip(&plan.bring))
        .map(|(from, to)| open_path(from).map(|f| (f, to)))
        .collect::<Result<_, _>>()?;
    // Read-only everywhere, then writable again where the plan says.
    set_attr(
        Path::new("/"),
        libc::AT_RECURSIVE as u32,
        MOUNT_ATTR_RDONLY,
        0,
    )?;
    // A folder before those inside it (TMPDIR below /tmp), each made in the one covering it.
    let mut private: Vec<&PathBuf> = plan.private.iter().collect();
    private.sort_by_key(|p| p.components().count());
    for path in private {
        std::fs::create_dir_all(path)
            .map_err(|e| format!("{} could not be made in the box ({e})", path.display()))?;
        mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("mode=1777"),
        )
        .map_err(|e| format!("{} could not be made the box's own ({e})", path.display()))?;
    }
    for (file, path) in &brought {
        let made = if file.metadata().is_ok_and(|m| m.is_dir()) {
            std::fs::create_dir_all(path)
        } else {
            path.parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::File::create(path).map(drop))
        };
        made.map_err(|e| format!("{} could not be made in the box ({e})", path.display()))?;
        bind_from(file, path)?;
        seal(path, MsFlags::empty())?;
    }
    drop(brought);
    if let Some(frozen) = &plan.frozen {
        if !below_private(frozen) {
            bind(frozen, frozen)?;
        }
        seal(frozen, MsFlags::empty())?;
    }
    for path in &plan.writable_inside {
        writable(path)?;
    }
    // Before the masks and the hidden folder: a read-only bind of a folder holding one would not undo it
    // here, but the order is bubblewrap's, where it would.
    for path in &plan.read_only {
        bind(path, path)?;
        seal(path, MsFlags::empty())?;
    }
    if let Some(dir) = &plan.hide {
        hide(dir, &kept)?;
    }
    for file in &plan.mask {
        // Below a private folder and not brought back: not in the box, nothing to hide.
        if std::fs::symlink_metadata(file).is_err() {
            continue;
        }
        bind(Path::new("/dev/null"), file)?;
        seal(file, MsFlags::MS_NOEXEC)?;
    }
    drop(kept);
    std::env::set_current_dir(&cwd).map_err(|e| {
        format!(
            "the working directory {} could not be entered in the box ({e})",
            cwd.display()
        )
    })?;

    // SAFETY: `ovai host-box` is single-threaded (it runs before any runtime or thread is started), so
    // the child may run ordinary code after fork.
    match unsafe { fork() }.map_err(|e| format!("fork failed ({e})"))? {
        ForkResult::Child => {
            let code = first_process(&program, &argv);
            std::process::exit(code)
        }
        ForkResult::Parent { child } => {
            close_protocol();
            Ok(wait_for(child))
        }
    }
}

/// The box's first process: mounts its own /proc, starts the program and reaps every orphan until the
/// program ends, then ends the box (the kernel kills what is left when this process exits).
fn first_process(program: &CString, argv: &[CString]) -> i32 {
    let filter = super::seccomp::program();
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        eprintln!("ovai host-box: could not tie the box to its parent ({e})");
        return CANNOT;
    }
    if let Err(e) = mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    ) {
        eprintln!("ovai host-box: /proc could not be mounted for the box ({e})");
        return CANNOT;
    }
    if let Err(why) = seal_the_machine() {
        eprintln!("ovai host-box: the plugin host's box could not be made: {why}");
        return CANNOT;
    }
    // SAFETY: still single-threaded.
    match unsafe { fork() } {
        Err(e) => {
            eprintln!("ovai host-box: fork failed ({e})");
            CANNOT
        }
        Ok(ForkResult::Child) => {
            // A session of its own: no controlling terminal, so no keystrokes pushed into the
            // operator's shell (TIOCSTI) when `ovai serve` runs in a terminal.
            if let Err(e) = nix::unistd::setsid() {
                eprintln!("ovai host-box: could not start a session of its own ({e})");
                return CANNOT;
            }
            if let Err(why) = drop_privileges() {
                eprintln!("ovai host-box: {why}");
                return CANNOT;
            }
            if let Some(program) = &filter
                && let Err(e) = super::seccomp::install(program)
            {
                eprintln!("ovai host-box: the box's seccomp filter could not be installed ({e})");
                return CANNOT;
            }
            let e = nix::unistd::execvp(program, argv).err();
            eprintln!(
                "ovai host-box: {} could not be run ({})",
                program.to_string_lossy(),
                e.map(|e| e.to_string()).unwrap_or_default()
            );
            127
        }
        Ok(ForkResult::Parent { child }) => {
            close_protocol();
            reap_until(child)
        }
    }
}

/// What a process without capabilities could still reach as root (uid 0 owns them): the machine's
/// devices (a disk read raw gets round every mask), the kernel's settings in /proc/sys and /sys (a
/// core_pattern is a program run as root outside any box), the sysrq trigger. The box gets a /dev of its
/// own with only the harmless devices, and the rest read-only, as bubblewrap's --dev and --proc give.
fn seal_the_machine() -> Result<(), String> {
    for path in [
        "/proc/sys",
        "/proc/sysrq-trigger",
        "/proc/irq",
        "/proc/bus",
        "/sys",
    ] {
        let path = Path::new(path);
        if path.exists() {
            bind(path, path)?;
            seal(path, MsFlags::MS_NOEXEC)?;
        }
    }
    let devices: Vec<(std::fs::File, &str)> = ["null", "zero", "full", "random", "urandom", "tty"]
        .into_iter()
        .filter_map(|name| {
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH)
                .open(format!("/dev/{name}"))
                .ok()
                .map(|f| (f, name))
        })
        .collect();
    mount(
        Some("tmpfs"),
        "/dev",
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("mode=0755,size=64k"),
    )
    .map_err(|e| format!("/dev could not be replaced ({e})"))?;
    for (file, name) in &devices {
        let target = PathBuf::from(format!("/dev/{name}"));
        std::fs::File::create(&target)
            .map_err(|e| format!("{} could not be made in the box ({e})", target.display()))?;
        bind_from(file, &target)?;
    }
    for (link, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(to, format!("/dev/{link}"))
            .map_err(|e| format!("/dev/{link} could not be made ({e})"))?;
    }
    std::fs::create_dir("/dev/shm").map_err(|e| format!("/dev/shm could not be made ({e})"))?;
    mount(
        Some("tmpfs"),
        "/dev/shm",
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("mode=1777"),
    )
    .map_err(|e| format!("/dev/shm could not be mounted ({e})"))?;
    Ok(())
}

/// Waits for `child`, reaping any other process that ends meanwhile (orphans come to the first process).
fn reap_until(child: Pid) -> i32 {
    loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => return code,
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == child => return 128 + signal as i32,
            Err(nix::errno::Errno::EINTR) | Ok(_) => continue,
            Err(_) => return CANNOT,
        }
    }
}

fn wait_for(child: Pid) -> i32 {
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => return code,
            Ok(WaitStatus::Signaled(_, signal, _)) => return 128 + signal as i32,
            Err(nix::errno::Errno::EINTR) | Ok(_) => continue,
            Err(_) => return CANNOT,
        }
    }
}

/// The protocol pipes (fds 3 and 4) and the watcher's socket (fd 5) are Node's: the processes that only
/// wait must not hold them open.
fn close_protocol() {
    let _ = nix::unistd::close(3);
    let _ = nix::unistd::close(4);
    let _ = nix::unistd::close(5);
}

/// An empty, read-only folder over `dir`, with `kept` bound back into it read-only.
fn hide(dir: &Path, kept: &[(std::fs::File, &PathBuf)]) -> Result<(), String> {
    mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755,size=64k"),
    )
    .map_err(|e| format!("{} could not be hidden ({e})", dir.display()))?;
    for (file, path) in kept {
        if path.parent() != Some(dir) {
            return Err(format!(
                "{} is not directly in {}, the folder it is kept in",
                path.display(),
                dir.display()
            ));
        }
        std::fs::File::create_new(path)
            .map_err(|e| format!("{} could not be made in the box ({e})", path.display()))?;
        bind_from(file, path)?;
        seal(path, MsFlags::MS_NOEXEC)?;
    }
    mount(
        None::<&str>,
        dir,
        None::<&str>,
        MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        None::<&str>,
    )
    .map_err(|e| format!("{} could not be made read-only ({e})", dir.display()))
}

/// `path` (a folder or a file) opened as a place only (`O_PATH`), to be bound from once what holds it is
/// covered.
fn open_path(path: &Path) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)
        .map_err(|e| format!("{} could not be opened ({e})", path.display()))
}

/// `path` bound onto itself and writable (it cannot be renamed from inside).
fn writable(path: &Path) -> Result<(), String> {
    bind(path, path)?;
    set_attr(path, 0, 0, MOUNT_ATTR_RDONLY)
}

/// What `file` (opened before the mounts that cover it) is, bound at `target`.
fn bind_from(file: &std::fs::File, target: &Path) -> Result<(), String> {
    bind(
        Path::new(&format!("/proc/self/fd/{}", file.as_raw_fd())),
        target,
    )
}

fn bind(source: &Path, target: &Path) -> Result<(), String> {
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| format!("{} could not be bound ({e})", target.display()))
}

/// Makes the bind mount at `path` read-only, without devices or set-user-ID, keeping the flags the kernel
/// will not let a namespace clear.
fn seal(path: &Path, extra: MsFlags) -> Result<(), String> {
    let mut flags = MsFlags::MS_REMOUNT
        | MsFlags::MS_BIND
        | MsFlags::MS_RDONLY
        | MsFlags::MS_NOSUID
        | MsFlags::MS_NODEV
        | extra;
    if let Ok(now) = statvfs(path) {
        let f = now.flags();
        for (has, keep) in [
            (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
            (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
            (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
            (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
        ] {
            if f.contains(has) {
                flags |= keep;
            }
        }
    }
    mount(None::<&str>, path, None::<&str>, flags, None::<&str>)
        .map_err(|e| format!("{} could not be made read-only ({e})", path.display()))
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// mount_setattr(2) (Linux 5.12): sets and clears mount attributes, on a whole tree at once when
/// `flags` has AT_RECURSIVE.
fn set_attr(path: &Path, flags: u32, set: u64, clear: u64) -> Result<(), String> {
    let c_path = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{} holds a NUL", path.display()))?;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: the path is a NUL-terminated string and the attributes a struct of the kernel's layout,
    // both alive for the call; the kernel reads them only.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c_path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r != 0 {
        return Err(format!(
            "the mounts at {} could not be made {} ({}; ovai's own box needs Linux 5.12 or newer)",
            path.display(),
            if set & MOUNT_ATTR_RDONLY != 0 {
                "read-only"
            } else {
                "writable"
            },
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

fn write(path: &str, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{path} could not be written ({e})"))
}

/// No capability survives into the program, and none can be gained back (set-user-ID files included).
fn drop_privileges() -> Result<(), String> {
    let err = |what: &str| format!("{what} ({})", std::io::Error::last_os_error());
    // SAFETY: prctl and capset with plain integer arguments and a struct this function owns.
    unsafe {
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL)
            {
                break;
            }
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) != 0
        {
            return Err(err("the ambient capabilities could not be cleared"));
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(err("no_new_privs could not be set"));
        }
        let header = CapHeader {
            version: 0x2008_0522,
            pid: 0,
        };
        let data = [CapData::default(); 2];
        if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) != 0 {
            return Err(err("the capabilities could not be dropped"));
        }
    }
    Ok(())
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}
