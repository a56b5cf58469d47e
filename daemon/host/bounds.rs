//! What a plugin host may hold, whole box and all: memory (`hostMaxMemoryMB`: Buffers, native memory and
//! the processes it starts count, not only V8's heap) and processes (`hostMaxProcesses`: every process and
//! thread in its box). Where the daemon can make a control group (as root, or in a subtree delegated to
//! its user), each host gets one of its own and the kernel holds the bounds; elsewhere the daemon looks at
//! the box's processes at each heartbeat and ends a host that went past them. Either way a host past a
//! bound is ended, naming the files whose calls were running, and `ovai status` says which way is used.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The bounds of one generation's hosts.
#[derive(Debug, Clone)]
pub struct Bounds {
    /// `hostMaxMemoryMB`: V8's heap, and with NODE_ITSELF_MB the whole box.
    pub memory_mb: u64,
    /// `hostMaxProcesses`: processes and threads in the box.
    pub processes: u64,
}

/// What Node holds besides its heap (its code, its threads' stacks, its own buffers), on top of
/// `hostMaxMemoryMB` in the box's bound: a plugin that fills its heap is told so by V8, in its words.
pub const NODE_ITSELF_MB: u64 = 128;

/// A bound a host went past.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exceeded {
    Memory { mb: u64 },
    Processes { most: u64 },
}

impl std::fmt::Display for Exceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exceeded::Memory { mb } => write!(
                f,
                "used more memory than its box may hold ({mb} MB, hostMaxMemoryMB in openovai.json, and \
                 {NODE_ITSELF_MB} MB for Node itself)"
            ),
            Exceeded::Processes { most } => write!(
                f,
                "started more processes than its box may hold ({most} processes and threads, \
                 hostMaxProcesses in openovai.json)"
            ),
        }
    }
}

/// Where control groups can be made for hosts, found once per process.
#[derive(Debug)]
enum Groups {
    /// cgroup v2: the folder new groups go in, with memory and pids control.
    Unified(PathBuf),
    /// cgroup v1: a folder in each of the memory and pids hierarchies (either may be missing).
    Legacy {
        memory: Option<PathBuf>,
        pids: Option<PathBuf>,
    },
    /// None: why.
    None(String),
}

fn groups() -> &'static Groups {
    static FOUND: OnceLock<Groups> = OnceLock::new();
    FOUND.get_or_init(|| {
        let found = find_groups();
        // Before this process makes a group of its own, so that any named after its pid are leftovers
        // (a thousand take about 20 ms).
        found.dirs().iter().for_each(|dir| take_away_stale(dir));
        found
    })
}

impl Groups {
    /// The folders hosts' groups are made in.
    fn dirs(&self) -> Vec<PathBuf> {
        match self {
            Groups::Unified(dir) => vec![dir.clone()],
            Groups::Legacy { memory, pids } => memory.iter().chain(pids).cloned().collect(),
            Groups::None(_) => Vec::new(),
        }
    }
}

/// The start of the names of the hosts' groups of this PID namespace's daemons: `ovai-host-NS-`, NS the
/// namespace's inode, so that a daemon in another one (whose pids this one cannot see) is told apart.
fn namespace_prefix() -> String {
    let namespace = std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|link| {
            let link = link.to_string_lossy().into_owned();
            let inode = link.strip_prefix("pid:[")?.strip_suffix(']')?;
            inode.parse::<u64>().ok()
        })
        .unwrap_or(0);
    format!("ovai-host-{namespace}-")
}

/// The start of the names of this process's hosts' groups: `ovai-host-NS-PID-`.
fn group_prefix() -> String {
    format!("{}{}-", namespace_prefix(), std::process::id())
}

/// Takes away the hosts' groups in `dir` that daemons no longer running left (one killed cannot take
/// its own away): those of this PID namespace whose daemon's pid is not running, or is this process's
/// own (asked before it makes any). The kernel takes away only a group with no process left in it.
fn take_away_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let namespace = namespace_prefix();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&namespace)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid == std::process::id() || !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

fn find_groups() -> Groups {
    if !cfg!(target_os = "linux") {
        return Groups::None("control groups exist on Linux only".into());
    }
    let Ok(mine) = std::fs::read_to_string("/proc/self/cgroup") else {
        return Groups::None("/proc/self/cgroup cannot be read".into());
    };
    let mut memory = None;
    let mut pids = None;
    let mut unified = None;
    for line in mine.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = path.trim_start_matches('/');
        if controllers.is_empty() {
            unified = Some(path.to_string());
        }
        for c in controllers.split(',') {
            match c {
                "memory" => memory = Some(Path::new("/sys/fs/cgroup/memory").join(path)),
                "pids" => pids = Some(Path::new("/sys/fs/cgroup/pids").join(path)),
                _ => {}
            }
        }
    }
    let writable =
        |p: &Path| p.is_dir() && nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok();
    if memory.is_some() || pids.is_some() {
        let memory = memory.filter(|p| writable(p));
        let pids = pids.filter(|p| writable(p));
        if memory.is_some() || pids.is_some() {
            return Groups::Legacy { memory, pids };
        }
        return Groups::None("this user may not make control groups here".into());
    }
    let Some(path) = unified else {
        return Groups::None("this process is in no control group".into());
    };
    let dir = Path::new("/sys/fs/cgroup").join(path);
    if !writable(&dir) {
        return Groups::None("this user may not make control groups here".into());
    }
    match unified_controllers(&dir) {
        Ok(()) => Groups::Unified(dir),
        Err(why) => Groups::None(why),
    }
}

/// Makes memory and pids control reach the groups made in `dir` (cgroup v2), where they do not yet.
fn unified_controllers(dir: &Path) -> Result<(), String> {
    let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
    if enabled.split_whitespace().any(|c| c == "memory")
        && enabled.split_whitespace().any(|c| c == "pids")
    {
        return Ok(());
    }
    std::fs::write(dir.join("cgroup.subtree_control"), "+memory +pids").map_err(|e| {
        format!(
            "memory and process control cannot be turned on for the groups of {} ({e})",
            dir.display()
        )
    })
}

impl Bounds {
    /// How the bounds are held, in words for `ovai status` and runtime.log.
    pub fn describe(&self) -> String {
        let (memory, processes) = (self.memory_mb, self.processes);
        match groups() {
            Groups::None(why) => format!(
                "The plugin host's box may hold {memory} MB (hostMaxMemoryMB) and {NODE_ITSELF_MB} MB for \
                 Node itself, and {processes} processes and threads (hostMaxProcesses), looked at by the \
                 daemon at each heartbeat (no control group: {why}); a host past either is ended."
            ),
            _ => format!(
                "The plugin host's box may hold {memory} MB (hostMaxMemoryMB) and {NODE_ITSELF_MB} MB for \
                 Node itself, and {processes} processes and threads (hostMaxProcesses), held by a control \
                 group of its own; a host past either is ended."
            ),
        }
    }

    /// A control group for one new host, its bounds written, or `None` where none can be made.
    pub fn group(&self) -> Option<HostGroup> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let name = format!("{}{}", group_prefix(), NEXT.fetch_add(1, Ordering::Relaxed));
        let made = match groups() {
            Groups::None(_) => return None,
            Groups::Unified(dir) => {
                let dir = dir.join(&name);
                HostGroup::make(
                    vec![dir.clone()],
                    "cgroup.procs",
                    &[
                        (dir.join("memory.max"), self.box_bytes().to_string()),
                        (dir.join("memory.swap.max"), "0".into()),
                        (dir.join("pids.max"), self.processes.to_string()),
                    ],
                )
            }
            Groups::Legacy { memory, pids } => {
                let memory = memory.as_ref().map(|d| d.join(&name));
                let pids = pids.as_ref().map(|d| d.join(&name));
                let mut limits = Vec::new();
                if let Some(m) = &memory {
                    limits.push((
                        m.join("memory.limit_in_bytes"),
                        self.box_bytes().to_string(),
                    ));
                }
                if let Some(p) = &pids {
                    limits.push((p.join("pids.max"), self.processes.to_string()));
                }
                // The first process joins by its one thread (`tasks`), which the kernel moves without
                // the lock that moving a whole process takes: that lock waits out an RCU grace period
                // (about 12 ms here, every host start). Between fork and exec it has only the one.
                HostGroup::make(memory.into_iter().chain(pids).collect(), "tasks", &limits)
            }
        };
        match made {
            Ok(group) => Some(group),
            Err(e) => {
                tracing::warn!("a control group for the plugin host could not be made: {e}");
                None
            }
        }
    }

    /// A host's box, looked at from outside (where it has no control group): past a bound or not.
    pub fn look_at(&self, pid: u32) -> Option<Exceeded> {
        let (bytes, tasks) = box_usage(pid);
        if tasks > self.processes {
            return Some(Exceeded::Processes {
                most: self.processes,
            });
        }
        (bytes > self.box_bytes()).then_some(Exceeded::Memory { mb: self.memory_mb })
    }

    /// The whole box's memory bound, in bytes.
    fn box_bytes(&self) -> u64 {
        (self.memory_mb + NODE_ITSELF_MB) << 20
    }
}

/// One host's control groups (one for v2; one per hierarchy for v1): joined by the host's first process
/// between fork and exec, taken away once it has ended.
pub struct HostGroup {
    dirs: Vec<PathBuf>,
    /// Each group's `cgroup.procs` (v2) or `tasks` (v1), open for writing, for the join.
    procs: Vec<File>,
}

impl HostGroup {
    fn make(dirs: Vec<PathBuf>, join: &str, limits: &[(PathBuf, String)]) -> std::io::Result<Self> {
        let mut made = Self {
            dirs: Vec::new(),
            procs: Vec::new(),
        };
        for dir in dirs {
            match std::fs::create_dir(&dir) {
                // Left by an earlier process that had this pid (a daemon killed before it took its
                // groups away): the kernel takes away only a group with no process left in it.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    std::fs::remove_dir(&dir)?;
                    std::fs::create_dir(&dir)?;
                }
                other => other?,
            }
            made.dirs.push(dir.clone());
            made.procs.push(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(dir.join(join))?,
            );
        }
        for (file, value) in limits {
            // memory.swap.max is there only where swap is accounted: its absence is no failure.
            match std::fs::write(file, value) {
                Err(e)
                    if e.kind() == std::io::ErrorKind::NotFound
                        && file.ends_with("memory.swap.max") => {}
                other => other?,
            }
        }
        Ok(made)
    }

    /// The descriptors the host's first process writes "0" to, between fork and exec, to join.
    pub fn join_fds(&self) -> Vec<RawFd> {
        self.procs.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// How to look at this group's counts, apart from it.
    pub fn look(&self, bounds: &Bounds) -> Look {
        Look {
            bounds: bounds.clone(),
            of: Watched::Groups(self.dirs.clone()),
        }
    }
}

/// How the daemon looks at one host's box, at each heartbeat.
#[derive(Debug, Clone)]
pub struct Look {
    bounds: Bounds,
    of: Watched,
}

#[derive(Debug, Clone)]
enum Watched {
    /// Its control groups, which count for it.
    Groups(Vec<PathBuf>),
    /// Its first process: the daemon counts what is under it.
    Tree(u32),
}

impl Look {
    /// A box with no control group, looked at through its first process.
    pub fn tree(bounds: &Bounds, pid: u32) -> Self {
        Self {
            bounds: bounds.clone(),
            of: Watched::Tree(pid),
        }
    }

    /// A bound the box went past, if any.
    pub fn exceeded(&self) -> Option<Exceeded> {
        match &self.of {
            Watched::Groups(dirs) => counted_past(dirs, &self.bounds),
            Watched::Tree(pid) => self.bounds.look_at(*pid),
        }
    }
}

/// Past a bound, as the groups count: the processes' (the kernel refused a fork for it), or the
/// memory's (the kernel killed a process of the box for it).
fn counted_past(dirs: &[PathBuf], bounds: &Bounds) -> Option<Exceeded> {
    {
        for dir in dirs {
            if counted(&dir.join("pids.events"), "max") > 0 {
                return Some(Exceeded::Processes {
                    most: bounds.processes,
                });
            }
            let oom = counted(&dir.join("memory.events"), "oom_kill")
                + counted(&dir.join("memory.oom_control"), "oom_kill");
            if oom > 0 {
                return Some(Exceeded::Memory {
                    mb: bounds.memory_mb,
                });
            }
        }
        None
    }
}

/// Joins the groups whose `cgroup.procs` or `tasks` are `fds` (writing "0": the writer): async-signal-safe,
/// for between fork and exec, while the process has one thread.
pub fn join(fds: &[RawFd]) -> std::io::Result<()> {
    for fd in fds {
        // SAFETY: writing two bytes from a static buffer to a descriptor this process holds.
        if unsafe { libc::write(*fd, b"0\n".as_ptr().cast(), 2) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

impl Drop for HostGroup {
    /// The host's processes have ended by now (its box's end waits for all of them), but the kernel may
    /// take a moment to let the group go: tried again for a second, off the daemon's thread.
    fn drop(&mut self) {
        let dirs = std::mem::take(&mut self.dirs);
        self.procs.clear();
        let gone = |dirs: &mut Vec<PathBuf>| dirs.retain(|d| std::fs::remove_dir(d).is_err());
        let mut left = dirs;
        gone(&mut left);
        if left.is_empty() {
            return;
        }
        std::thread::spawn(move || {
            for _ in 0..20 {
                std::thread::sleep(std::time::Duration::from_millis(50));
                gone(&mut left);
                if left.is_empty() {
                    return;
                }
            }
            tracing::debug!(
                ?left,
                "control groups of an ended plugin host could not be taken away"
            );
        });
    }
}

/// The count after `key` in a cgroup events file (`max 3`, `oom_kill 1`); 0 where there is none.
fn counted(file: &Path, key: &str) -> u64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|text| {
            text.lines().find_map(|l| {
                let (k, n) = l.split_once(' ')?;
                (k == key).then(|| n.trim().parse().ok()).flatten()
            })
        })
        .unwrap_or(0)
}

/// The resident bytes and the tasks (processes and threads) of `pid` and everything under it.
/// (resident bytes, tasks) of a process and everything under it.
pub fn box_usage(pid: u32) -> (u64, u64) {
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .unwrap_or(4096) as u64;
    let (mut bytes, mut tasks) = (0u64, 0u64);
    let mut todo = vec![pid];
    let mut seen = 0usize;
    while let Some(p) = todo.pop() {
        seen += 1;
        // A box past any sensible count is past the bound already: the walk stops there.
        if seen > 1 << 16 {
            break;
        }
        if let Ok(statm) = std::fs::read_to_string(format!("/proc/{p}/statm")) {
            let resident: u64 = statm
                .split_whitespace()
                .nth(1)
                .and_then(|r| r.parse().ok())
                .unwrap_or(0);
            bytes += resident * page;
        }
        let Ok(threads) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in threads.flatten() {
            tasks += 1;
            if let Ok(children) = std::fs::read_to_string(t.path().join("children")) {
                todo.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    (bytes, tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_and_its_children_are_counted() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let (bytes, tasks) = box_usage(std::process::id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(tasks >= 2, "{tasks}");
        assert!(bytes > 1 << 20, "{bytes}");
        let small = Bounds {
            memory_mb: 1,
            processes: 1,
        };
        assert!(small.look_at(std::process::id()).is_some());
    }

    #[test]
    fn a_process_that_joins_between_fork_and_exec_is_in_each_group_with_its_children() {
        use std::os::unix::process::CommandExt;
        let bounds = Bounds {
            memory_mb: 64,
            processes: 64,
        };
        let Some(group) = bounds.group() else {
            return eprintln!("not run: {}", bounds.describe());
        };
        let fds = group.join_fds();
        // On cgroup v1 by its one thread (`tasks`), which waits out no RCU grace period.
        let joined_by: Vec<PathBuf> = fds
            .iter()
            .map(|fd| std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap())
            .collect();
        let by = match groups() {
            Groups::Legacy { .. } => "tasks",
            _ => "cgroup.procs",
        };
        assert!(joined_by.iter().all(|p| p.ends_with(by)), "{joined_by:?}");
        let mut cmd = std::process::Command::new("sh");
        // A child it starts after the join is counted too.
        cmd.args(["-c", "sleep 30 & wait"]);
        // SAFETY: `join` writes to descriptors this process holds, as the host's spawn does.
        unsafe { cmd.pre_exec(move || join(&fds)) };
        let mut child = cmd.spawn().unwrap();
        let pid = child.id().to_string();
        let mut members = Vec::new();
        for _ in 0..100 {
            members = group
                .dirs
                .iter()
                .map(|d| std::fs::read_to_string(d.join("cgroup.procs")).unwrap())
                .collect();
            if members.iter().all(|m| m.lines().count() == 2) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = std::process::Command::new("pkill")
            .args(["-P", &pid])
            .status();
        let _ = child.kill();
        let _ = child.wait();
        assert!(!members.is_empty());
        for m in &members {
            assert!(m.lines().any(|l| l == pid), "{pid} not in {m:?}");
            assert_eq!(m.lines().count(), 2, "the shell and its sleep: {m:?}");
        }
    }

    #[test]
    fn a_group_an_earlier_process_left_under_the_same_name_is_made_anew() {
        let bounds = Bounds {
            memory_mb: 64,
            processes: 64,
        };
        let Some(first) = bounds.group() else {
            eprintln!("not run: {}", bounds.describe());
            return;
        };
        // As a daemon killed before it took its groups away leaves them, for the next process that
        // gets its pid.
        let dirs = first.dirs.clone();
        std::mem::forget(first);
        let again = HostGroup::make(dirs.clone(), "cgroup.procs", &[]).expect("made anew");
        assert_eq!(again.dirs, dirs);
        drop(again);
        assert!(dirs.iter().all(|d| !d.exists()), "{dirs:?}");
    }

    #[test]
    fn groups_left_by_daemons_no_longer_running_are_taken_away() {
        if let Groups::None(why) = groups() {
            return eprintln!("not run: {why}");
        }
        let parents = groups().dirs();
        let mut ended = std::process::Command::new("true").spawn().unwrap();
        ended.wait().unwrap();
        let mut running = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let ns = namespace_prefix();
        let named =
            |name: String| -> Vec<PathBuf> { parents.iter().map(|p| p.join(&name)).collect() };
        let stale = [
            named(format!("{ns}{}-1", ended.id())),
            // This process's own, left by an earlier one with its pid: it has made none of them yet.
            named(format!("{}7", group_prefix())),
        ];
        let kept = [
            named(format!("{ns}{}-1", running.id())),
            // Another PID namespace's daemon: its pid means nothing here.
            named(format!(
                "ovai-host-1{ns_tail}{}-1",
                ended.id(),
                ns_tail = &ns["ovai-host-".len()..]
            )),
            named(format!("{ns}test-1")),
        ];
        for dir in stale.iter().chain(&kept).flatten() {
            std::fs::create_dir(dir).unwrap();
        }
        for parent in &parents {
            take_away_stale(parent);
        }
        let left: Vec<bool> = stale
            .iter()
            .chain(&kept)
            .flatten()
            .map(|d| d.exists())
            .collect();
        for dir in kept.iter().flatten() {
            let _ = std::fs::remove_dir(dir);
        }
        let _ = running.kill();
        let _ = running.wait();
        let stale_count = stale.iter().flatten().count();
        assert!(left[..stale_count].iter().all(|l| !l), "{stale:?}");
        assert!(left[stale_count..].iter().all(|l| *l), "{kept:?}");
    }

    #[test]
    fn an_events_file_is_read_by_its_keys() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memory.events");
        std::fs::write(&file, "low 0\nhigh 0\nmax 4\noom 1\noom_kill 2\n").unwrap();
        assert_eq!(counted(&file, "oom_kill"), 2);
        assert_eq!(counted(&file, "max"), 4);
        assert_eq!(counted(&dir.path().join("none"), "max"), 0);
    }
}
