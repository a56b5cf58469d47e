//! The instances the cases run on, and the daemon serving one: started, asked, stopped.

use super::*;

pub(crate) const ECHO: &str = r#"export const description = "Echoes its arguments.";
export const inputSchema = { type: "object", properties: { i: { type: "integer", description: "A number." } } };
export function run(args) { return { text: JSON.stringify(args) }; }
"#;

/// A temporary openovai instance with `n` echo plugins (p0000…), its seats, and the baseline's view of it.
pub(crate) struct Instance {
    pub(crate) root: PathBuf,
    /// The Leader's, `bench`.
    pub(crate) secret: String,
    /// Every seat's, the Leader's first: a seat holds at most 64 sessions, and `--load` runs up to 1,024.
    secrets: Vec<String>,
    next: std::sync::atomic::AtomicUsize,
}

/// Seats enough for `--load`'s most sessions at 64 a seat.
const SEATS: usize = 16;

impl Instance {
    pub(crate) fn ovai(&self) -> ovai::instance::Instance {
        ovai::instance::Instance::at(self.root.clone())
    }
}

impl Instance {
    pub(crate) fn new(setup: &Setup, name: &str, n: usize) -> Self {
        let root = setup.work.join(name);
        let _ = std::fs::remove_dir_all(&root);
        run_ok(
            Command::new(&setup.ovai)
                .args(["init", "--user", "bench", "--leader", "bench"])
                .arg(&root),
        );
        for i in 0..n {
            std::fs::write(root.join("plugins").join(format!("p{i:04}.mjs")), ECHO)
                .expect("a plugin file");
        }
        let mut secrets =
            vec![ovai::desk::secret_in(&root.join("desks/bench")).expect("the desk's secret")];
        for i in 1..SEATS {
            let seat = format!("w{i:02}");
            run_ok(
                Command::new(&setup.ovai)
                    .args(["seat", "add", &seat, "--root"])
                    .arg(&root),
            );
            secrets.push(
                ovai::desk::secret_in(&root.join("desks").join(&seat)).expect("the desk's secret"),
            );
        }
        Self {
            root,
            secret: secrets[0].clone(),
            secrets,
            next: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The secret of the seat the next session takes: each in turn, so no seat holds more than its 64.
    pub(crate) fn next_secret(&self) -> &str {
        let i = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        &self.secrets[i % self.secrets.len()]
    }
}

impl Instance {
    /// Adds an HTTP endpoint on a free loopback port to openovai.json.
    pub(crate) fn listen_http(&self) {
        let path = self.root.join("openovai.json");
        let mut config: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("openovai.json"))
                .expect("openovai.json parses");
        config["http"] = json!({ "listen": "127.0.0.1:0" });
        std::fs::write(&path, config.to_string()).expect("openovai.json is written");
    }
}

pub(crate) fn run_ok(cmd: &mut Command) {
    let out = cmd.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A running `ovai serve`, stopped when dropped.
pub(crate) struct Daemon {
    pub(crate) child: Child,
}

impl Daemon {
    /// Starts the daemon and waits for READY=1 on a notify socket; returns it and the time that took.
    pub(crate) fn start(setup: &Setup, inst: &Instance) -> (Self, Duration) {
        Self::start_with_env(setup, inst, &[])
    }

    pub(crate) fn start_with_env(
        setup: &Setup,
        inst: &Instance,
        env: &[(&str, &std::ffi::OsStr)],
    ) -> (Self, Duration) {
        let sock_path = inst
            .root
            .join(".ovai")
            .join(format!("bench-notify-{}", std::process::id()));
        let _ = std::fs::remove_file(&sock_path);
        let sock = UnixDatagram::bind(&sock_path).expect("a notify socket");
        sock.set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let started = Instant::now();
        let child = Command::new(&setup.ovai)
            .args(["serve", "--root"])
            .arg(&inst.root)
            .env("NOTIFY_SOCKET", &sock_path)
            .env("OVAI_LOG", "warn")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ovai serve starts");
        let mut buf = [0u8; 512];
        loop {
            let n = sock.recv(&mut buf).expect("READY=1 arrives");
            if String::from_utf8_lossy(&buf[..n])
                .lines()
                .any(|l| l == "READY=1")
            {
                break;
            }
        }
        let took = started.elapsed();
        let _ = std::fs::remove_file(&sock_path);
        (Self { child }, took)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        kill(self.child.id(), Signal::SIGTERM);
        let _ = self.child.wait();
    }
}

pub(crate) fn kill(pid: u32, signal: Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal);
}

pub(crate) fn status(setup: &Setup, inst: &Instance) -> Value {
    let out = Command::new(&setup.ovai)
        .args(["status", "--json", "--root"])
        .arg(&inst.root)
        .output()
        .expect("status");
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// `pid` itself if it is Node, else the first Node process below it (the host inside its box).
pub(crate) fn node_in(pid: u32) -> u32 {
    let comm = |p: u32| std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        if comm(p).trim() == "node" {
            return p;
        }
        let children =
            std::fs::read_to_string(format!("/proc/{p}/task/{p}/children")).unwrap_or_default();
        todo.extend(
            children
                .split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok()),
        );
    }
    pid
}

pub(crate) fn child_of(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

pub(crate) fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}
