//! Shared helpers for the integration tests: a temporary instance, a real `ovai serve`, and sessions
//! connected through a real `ovai mcp` bridge. Every wait has a hard limit, so a broken server fails a
//! test instead of hanging it; no test asserts on how long anything took.

#![allow(dead_code)]

pub mod gemini_api;
pub mod http;
pub mod messages_api;
pub mod responses_api;
pub mod standin;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ovai::client::{ClientError, McpClient};
use serde_json::{Value, json};

pub const OVAI: &str = env!("CARGO_BIN_EXE_ovai");
/// The longest any single wait in a test may take before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(60);

pub fn ovai() -> assert_cmd::Command {
    let mut c = assert_cmd::Command::new(OVAI);
    c.env_remove("OVAI_ROOT")
        .env_remove("OVAI_SECRET")
        .env_remove("OVAI_BRIDGE_BATCH")
        .env_remove("OVAI_DAEMON_BATCH")
        .timeout(PATIENCE);
    c
}

pub struct Instance {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
}

impl Instance {
    /// A new instance: User ann, Leader lead, no plugins.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("ovai-t")
            .tempdir_in("/tmp")
            .expect("a temporary directory");
        let root = std::fs::canonicalize(dir.path()).expect("the temporary directory's path");
        ovai()
            .args(["init", "--user", "ann", "--leader", "lead"])
            .arg(&root)
            .assert()
            .success();
        // A folder of the operator's, where plugins in the tests leave what they note: the root's own
        // entries are read-only in the plugin host's box.
        std::fs::create_dir(root.join("work")).expect("the work folder");
        Self { dir, root }
    }

    /// A new instance one folder down in a temporary folder (`/tmp/ovai-nestXXXX/NAME`), as `ovai demo`
    /// and many users make them: User ann, Leader lead, no plugins.
    pub fn nested(name: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("ovai-nest")
            .tempdir_in("/tmp")
            .expect("a temporary directory");
        let root = std::fs::canonicalize(dir.path())
            .expect("the temporary directory's path")
            .join(name);
        ovai()
            .args(["init", "--user", "ann", "--leader", "lead"])
            .arg(&root)
            .assert()
            .success();
        Self { dir, root }
    }

    pub fn with_plugins(plugins: &[(&str, &str)]) -> Self {
        let inst = Self::new();
        for (file, source) in plugins {
            inst.write_plugin(file, source);
        }
        inst
    }

    pub fn write_plugin(&self, file: &str, source: &str) {
        let path = self.root.join("plugins").join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, source).unwrap();
    }

    /// Copies files from tests/fixtures/plugins into the instance's plugins/.
    pub fn fixture(&self, file: &str) {
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/plugins")
            .join(file);
        let text =
            std::fs::read_to_string(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        self.write_plugin(file, &text);
    }

    pub fn set_config(&self, extra: Value) {
        let path = self.root.join("openovai.json");
        let mut v: Value = read_json(&path);
        for (k, val) in extra.as_object().unwrap() {
            v[k] = val.clone();
        }
        std::fs::write(path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    }

    /// `ovai status --json`, read.
    pub fn status_json(&self) -> Value {
        let out = self.cmd().args(["status", "--json"]).output().unwrap();
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
    }

    /// A tool's figures in `ovai status --json` (calls, refusals, …), `null` before its first call.
    pub fn tool_figures(&self, tool: &str) -> Value {
        let v = self.status_json();
        v["figures"]
            .as_array()
            .and_then(|all| all.iter().find(|f| f["name"] == tool))
            .cloned()
            .unwrap_or(Value::Null)
    }

    pub fn cmd(&self) -> assert_cmd::Command {
        let mut c = ovai();
        c.arg("--root").arg(&self.root);
        c
    }

    pub fn add_seat(&self, name: &str) {
        self.cmd().args(["seat", "add", name]).assert().success();
    }

    pub fn secret(&self, seat: &str) -> String {
        let text =
            std::fs::read_to_string(self.root.join("desks").join(seat).join(".mcp.json")).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        v["mcpServers"]["openovai"]["env"]["OVAI_SECRET"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The sentences of runtime.log rows with this topic, in order.
    pub fn rows(&self, topic: &str) -> Vec<String> {
        std::fs::read_to_string(self.root.join("runtime.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (_, rest) = l.split_once(' ')?;
                let (t, s) = rest.split_once(' ')?;
                (t == topic).then(|| s.to_string())
            })
            .collect()
    }

    /// Waits for a row with this topic holding `part`.
    pub fn wait_for_row(&self, topic: &str, part: &str) {
        wait_until(&format!("a {topic} row holding {part:?}"), || {
            self.rows(topic)
                .iter()
                .any(|r| r.contains(part))
                .then_some(())
        })
    }

    /// The `host` rows, once a new host was started after the last one ended (its row is written).
    pub fn host_rows_after_respawn(&self) -> Vec<String> {
        wait_until("a new host", || {
            let rows = self.rows("host");
            rows.iter()
                .any(|r| r.starts_with("A new plugin host (pid "))
                .then_some(rows)
        })
    }

    /// A session through `ovai mcp` presenting `secret` (which may be nobody's), and the answer to its
    /// `initialize`: for tests of what is refused.
    pub fn try_session(&self, secret: &str) -> (Session, Value) {
        let mut s = Session::spawn_command(bridge_command(&self.root, Some(secret)));
        let r = s.request(
            "initialize",
            json!({ "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "tests", "version": "1" } }),
        );
        (s, r)
    }

    pub fn start(&self) -> Daemon {
        Daemon::start(self)
    }

    /// Connects a session for `seat` through `ovai mcp` with `env` set for it besides the seat's own, started
    /// in its desk. The bridge's own settings come from `env` alone, never from the shell running the tests,
    /// but for a longer wait for a daemon to come back.
    pub fn session_with_env(&self, seat: &str, env: &[(&str, &str)]) -> Session {
        let mut cmd = bridge_command(&self.root, Some(&self.secret(seat)));
        // A daemon started again can take more than the bridge's 30 s to come up on a loaded machine
        // (seen once in CI); a test that wants the bridge to give up sets its own window.
        cmd.current_dir(self.root.join("desks").join(seat))
            .env("OVAI_RECONNECT_SECONDS", "300")
            .envs(env.iter().copied());
        Session::spawn_command(cmd)
    }

    /// Connects a session for `seat` through `ovai mcp`, the way a client started in its desk does.
    pub fn session(&self, seat: &str) -> Session {
        self.session_with_env(seat, &[])
    }
}

pub struct Daemon {
    pub child: Child,
    root: PathBuf,
    pub stderr: PathBuf,
}

impl Daemon {
    pub fn start(inst: &Instance) -> Self {
        Self::start_with_env(inst, &[])
    }

    /// Starts `ovai serve` with extra variables in its environment.
    pub fn start_with_env(inst: &Instance, env: &[(&str, &str)]) -> Self {
        Self::start_with(inst, env, None)
    }

    /// Starts `ovai serve` with at most `max_fds` file descriptors (soft and hard limit), if given.
    pub fn start_with(inst: &Instance, env: &[(&str, &str)], max_fds: Option<u64>) -> Self {
        use std::os::unix::process::CommandExt;
        let stderr = inst.root.join(format!("serve-{}.stderr", nanos()));
        let before = count_up_rows(&inst.root);
        let mut cmd = Command::new(OVAI);
        cmd.args(["serve", "--root"])
            .arg(&inst.root)
            .env_remove("OVAI_ROOT")
            .env_remove("OVAI_DAEMON_BATCH")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap());
        if let Some(n) = max_fds {
            // SAFETY: setrlimit is async-signal-safe; it runs in the child between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let limit = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = cmd.spawn().expect("ovai serve starts");
        let mut d = Self {
            child,
            root: inst.root.clone(),
            stderr,
        };
        d.wait_up(before);
        d
    }

    fn wait_up(&mut self, before: usize) {
        wait_until("ovai serve to come up", || {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "ovai serve exited ({status}): {}",
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                );
            }
            (count_up_rows(&self.root) > before && self.status().is_some()).then_some(())
        })
    }

    /// `ovai status --json`, or None when no daemon answers.
    pub fn status(&self) -> Option<Value> {
        let out = Command::new(OVAI)
            .args(["status", "--json", "--root"])
            .arg(&self.root)
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn host_pid(&self) -> u32 {
        wait_until("the plugin host to come up", || {
            self.status()
                .and_then(|s| s["host"]["pid"].as_u64())
                .map(|pid| pid as u32)
        })
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, then waits for the exit; returns the exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        signal(self.child.id(), libc::SIGTERM);
        wait_exit(&mut self.child)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            signal(self.child.id(), libc::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn count_up_rows(root: &Path) -> usize {
    std::fs::read_to_string(root.join("runtime.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(" server ovai serve is up "))
        .count()
}

/// Polls `poll` until it gives a value. PATIENCE is not a speed requirement: it only turns a server that
/// never gets there into a failed test instead of a hung one.
/// A copy of the ovai binary at `to`, ready to run. Another test's thread that forks while the copy is
/// open for writing holds it open in its child until that child execs, and running the copy meanwhile
/// fails with ETXTBSY: it is run once until it no longer does.
pub fn copy_ovai(to: &Path) {
    std::fs::copy(OVAI, to).unwrap();
    wait_until(
        "the copied binary to be free to run",
        || match Command::new(to).arg("--version").output() {
            Err(e) if e.raw_os_error() == Some(26) => None,
            _ => Some(()),
        },
    );
}

pub fn wait_until<T>(what: &str, poll: impl FnMut() -> Option<T>) -> T {
    wait_until_for(what, PATIENCE, poll)
}

/// As `wait_until`, with a patience of its own (a client whose own limit is a minute).
pub fn wait_until_for<T>(what: &str, patience: Duration, mut poll: impl FnMut() -> Option<T>) -> T {
    let give_up = Instant::now() + patience;
    loop {
        if let Some(v) = poll() {
            return v;
        }
        if Instant::now() >= give_up {
            panic!("gave up waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `request` whole on a new connection to `addr` and reads the answer to its end (the request
/// says `connection: close`).
pub fn exchange(addr: impl std::net::ToSocketAddrs, request: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

pub fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    wait_until("a process to exit", || child.try_wait().ok().flatten())
}

pub fn signal(pid: u32, sig: i32) {
    // SAFETY: sending a signal to a process id has no memory effects on this process.
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

/// Stops process `pid` and waits until every thread of it has stopped: until then one of them may
/// still run.
pub fn freeze(pid: u32) {
    signal(pid, libc::SIGSTOP);
    wait_until("the process to stop", || {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
        tasks
            .flatten()
            .all(|t| {
                let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
                // The state follows the command's closing parenthesis.
                stat.rsplit_once(") ")
                    .is_some_and(|(_, rest)| rest.starts_with('T'))
            })
            .then_some(())
    });
}

/// A process's resident memory, in kB (`VmRSS` in /proc).
pub fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap()
}

pub fn process_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid as i32, 0) } != 0 {
        return false;
    }
    // A zombie (exited, not yet reaped by a parent that is itself gone) is not alive.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
                .unwrap_or(true)
        })
        .unwrap_or(false)
}

/// Waits until `pid` is gone; fails the test if it outlives PATIENCE.
pub fn wait_gone(pid: u32) {
    wait_until(&format!("process {pid} to end"), || {
        (!process_alive(pid)).then_some(())
    })
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// A child's stdout, read on a thread of its own so that every wait for it has a limit: a server that
/// never answers fails the test instead of hanging it.
pub struct TimedReader {
    rx: mpsc::Receiver<Vec<u8>>,
    chunk: Vec<u8>,
    at: usize,
    patience: Duration,
}

impl TimedReader {
    pub fn new(from: impl std::io::Read + Send + 'static) -> Self {
        Self::with_patience(from, PATIENCE)
    }

    /// As `new`, waiting up to `patience` for each read.
    pub fn with_patience(
        mut from: impl std::io::Read + Send + 'static,
        patience: Duration,
    ) -> Self {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match from.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tx.send(buf[..n].to_vec()).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Self {
            rx,
            chunk: Vec::new(),
            at: 0,
            patience,
        }
    }
}

impl std::io::Read for TimedReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.at == self.chunk.len() {
            match self.rx.recv_timeout(self.patience) {
                Ok(chunk) => {
                    self.chunk = chunk;
                    self.at = 0;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("nothing arrived within {} s", self.patience.as_secs()),
                    ));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(0),
            }
        }
        let n = out.len().min(self.chunk.len() - self.at);
        out[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// The session's stdin, which the test can close as a client does when it quits.
pub struct Input(Option<ChildStdin>);

impl Write for Input {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.0.as_mut() {
            Some(w) => w.write(buf),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.as_mut().map_or(Ok(()), Write::flush)
    }
}

/// An MCP session through a real `ovai mcp` process, spoken with ovai's own MCP client.
pub struct Session {
    pub child: Child,
    mcp: McpClient<BufReader<TimedReader>, Input>,
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
}

impl std::ops::Deref for Session {
    type Target = McpClient<BufReader<TimedReader>, Input>;
    fn deref(&self) -> &Self::Target {
        &self.mcp
    }
}

impl std::ops::DerefMut for Session {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.mcp
    }
}

/// `ovai serve` for the instance, started and not waited for: a test that looks at it as it starts.
/// A plugin whose import waits until the file `go` exists (a test lets it go), called `gate`.
pub fn gated_import(go: &Path) -> String {
    format!(
        "import {{ existsSync }} from \"node:fs\";\n\
         while (!existsSync({go:?})) await new Promise((r) => setTimeout(r, 20));\n\
         export const description = \"Imported once the test lets it.\";\n\
         export const inputSchema = {{ type: \"object\" }};\n\
         export function run() {{ return {{ text: \"ok\" }}; }}\n"
    )
}

/// `ovai serve` of the binary at `exe` (a copy the test may move or replace), once it serves.
pub fn serve_from(exe: &Path, inst: &Instance) -> Child {
    let serve = serve_unwaited_from(exe, inst);
    wait_until("the server to serve", || {
        let out = inst.cmd().arg("status").output().ok()?;
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success() && !said.contains(") is starting")).then_some(())
    });
    serve
}

pub fn serve_unwaited(inst: &Instance) -> Child {
    serve_unwaited_from(Path::new(OVAI), inst)
}

fn serve_unwaited_from(exe: &Path, inst: &Instance) -> Child {
    Command::new(exe)
        .args(["serve", "--root"])
        .arg(&inst.root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ovai serve starts")
}

/// `ovai mcp` as `seat`, its stdin and stdout piped for the test to write and read as it likes (a
/// `Session` reads its stdout as it comes), its stderr dropped.
pub fn bridge_piped(inst: &Instance, seat: &str) -> Child {
    bridge_command(&inst.root, Some(&inst.secret(seat)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("ovai mcp starts")
}

/// `ovai mcp` for the instance at `root`, presenting `secret` if there is one. The bridge's environment
/// comes from the test alone, never from the shell running the tests.
pub fn bridge_command(root: &Path, secret: Option<&str>) -> Command {
    let mut cmd = Command::new(OVAI);
    cmd.arg("mcp")
        .env("OVAI_ROOT", root)
        .env_remove("OVAI_SECRET")
        .env_remove("OVAI_BRIDGE_BATCH");
    if let Some(s) = secret {
        cmd.env("OVAI_SECRET", s);
    }
    cmd
}

impl Session {
    /// A session over any prepared `ovai mcp` command.
    pub fn spawn_command(cmd: Command) -> Self {
        Self::spawn_with_stderr(cmd, None)
    }

    /// A session whose bridge writes its stderr to `stderr` when given (which nothing here reads), else
    /// to a pipe read into `Session::stderr`.
    pub fn spawn_with_stderr(mut cmd: Command, stderr: Option<Stdio>) -> Self {
        let read_here = stderr.is_none();
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr.unwrap_or_else(Stdio::piped))
            .spawn()
            .expect("ovai mcp starts");
        let stdout = child.stdout.take().unwrap();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let stderr_reader = child.stderr.take().filter(|_| read_here).map(|pipe| {
            let sink = stderr.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    sink.lock().unwrap().push_str(&(line + "\n"));
                }
            })
        });
        let input = Input(child.stdin.take());
        Self {
            child,
            mcp: McpClient::new(BufReader::new(TimedReader::new(stdout)), input),
            stderr,
            stderr_reader,
        }
    }

    /// Waits until the bridge has said `words` on stderr.
    pub fn wait_for_stderr(&self, words: &str) {
        wait_until(&format!("{words:?} on the bridge's stderr"), || {
            self.stderr.lock().unwrap().contains(words).then_some(())
        });
    }

    /// What went wrong, with what the bridge said on stderr.
    fn broke(&self, what: &str, e: ClientError) -> ! {
        panic!(
            "{what}: {e}; backlog {:?}; stderr: {}",
            self.mcp.backlog,
            self.stderr.lock().unwrap()
        )
    }

    pub fn send(&mut self, msg: &Value) {
        if let Err(e) = self.mcp.send(msg) {
            self.broke("ovai mcp takes no more input", e);
        }
    }

    /// Writes `bytes` as they are (a line that is not JSON, say).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        use std::io::Write;
        let written = match self.mcp.writer().0.as_mut() {
            Some(w) => w.write_all(bytes).and_then(|()| w.flush()),
            None => Err(std::io::Error::other("the input is closed")),
        };
        if let Err(e) = written {
            panic!("ovai mcp takes no more input: {e}");
        }
    }

    /// Closes the session's input, as a client does when it quits.
    pub fn close_input(&mut self) {
        self.mcp.writer().0.take();
    }

    /// The next message matching `pred`; others are kept in the backlog.
    pub fn recv_where(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        match self.mcp.recv_where(pred) {
            Ok(v) => v,
            Err(e) => self.broke("no matching message from ovai mcp", e),
        }
    }

    pub fn send_request(&mut self, method: &str, params: Value) -> u64 {
        match self.mcp.send_request(method, params) {
            Ok(id) => id,
            Err(e) => self.broke("ovai mcp takes no more input", e),
        }
    }

    pub fn response(&mut self, id: u64) -> Value {
        match self.mcp.response(id) {
            Ok(v) => v,
            Err(e) => self.broke(&format!("no answer to request {id}"), e),
        }
    }

    /// A request and its whole response message.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.response(id)
    }

    pub fn initialize_as(&mut self, version: &str) -> Value {
        match self.mcp.initialize_as("tests", version) {
            Ok(v) => v,
            Err(e) => self.broke("initialize", e),
        }
    }

    pub fn initialize(&mut self) -> Value {
        self.initialize_as("2025-06-18")
    }

    /// tools/call: (text, isError).
    pub fn call(&mut self, tool: &str, args: Value) -> (String, bool) {
        let r = self.request("tools/call", json!({ "name": tool, "arguments": args }));
        text_of(&r)
    }

    pub fn tool_names(&mut self) -> Vec<String> {
        let r = self.request("tools/list", json!({}));
        r["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// Waits for the bridge to exit and for its stderr to be read to the end; returns its status.
    pub fn wait(&mut self) -> std::process::ExitStatus {
        let status = wait_exit(&mut self.child);
        if let Some(r) = self.stderr_reader.take() {
            let _ = r.join();
        }
        status
    }
}

/// A command running in the background, its stdout and stderr gathered as they come; killed when
/// dropped unless waited for.
pub struct Running {
    child: Option<std::process::Child>,
    out: std::sync::Arc<std::sync::Mutex<String>>,
    err: std::sync::Arc<std::sync::Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    pub fn spawn(mut cmd: std::process::Command) -> Self {
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the command starts");
        let gather = |stream: Box<dyn std::io::Read + Send>| {
            let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
            let sink = text.clone();
            let reader = std::thread::spawn(move || {
                use std::io::BufRead;
                for l in std::io::BufReader::new(stream)
                    .lines()
                    .map_while(Result::ok)
                {
                    sink.lock().unwrap().push_str(&(l + "\n"));
                }
            });
            (text, reader)
        };
        let (out, r1) = gather(Box::new(child.stdout.take().expect("piped")));
        let (err, r2) = gather(Box::new(child.stderr.take().expect("piped")));
        Self {
            child: Some(child),
            out,
            err,
            readers: vec![r1, r2],
        }
    }

    pub fn id(&self) -> u32 {
        self.child.as_ref().map_or(0, std::process::Child::id)
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// `ovai logs -f -n 0` on an instance.
    pub fn following(inst: &Instance) -> Self {
        let mut cmd = std::process::Command::new(OVAI);
        cmd.args(["logs", "-f", "-n", "0", "--root"])
            .arg(&inst.root);
        Self::spawn(cmd)
    }

    /// What it printed on stdout so far.
    pub fn shown(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    pub fn wait_for_stdout(&self, words: &str) {
        wait_until(&format!("{words:?} on stdout"), || {
            self.out.lock().unwrap().contains(words).then_some(())
        });
    }

    pub fn wait_for_stderr(&self, words: &str) {
        wait_until(&format!("{words:?} on stderr"), || {
            self.err.lock().unwrap().contains(words).then_some(())
        });
    }

    /// Waits for it to end: its status, stdout and stderr.
    pub fn wait(mut self) -> (std::process::ExitStatus, String, String) {
        let status = self.child.take().expect("running").wait().expect("waited");
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let out = self.out.lock().unwrap().clone();
        let err = self.err.lock().unwrap().clone();
        (status, out, err)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (text, isError) of a tools/call response; panics on a JSON-RPC error.
pub fn text_of(response: &Value) -> (String, bool) {
    let result = response
        .get("result")
        .unwrap_or_else(|| panic!("a result, not {response}"));
    let text = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    (text, result["isError"].as_bool().unwrap_or(false))
}

/// A JSON file an instance holds (openovai.json, a desk's .mcp.json, the seat book), read whole.
pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}
