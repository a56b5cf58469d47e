//! host.mjs with nothing of the daemon around it: a driver on its fds 3 and 4 (the protocol's init, one
//! load, then calls), beside a minimal Node process that answers the same lines. The difference is what
//! the host's own code costs; the rest of its cost in the chain is the chain's.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use super::{ECHO, Used};

/// Answers `load` as loaded and `call` as the echo plugin would, each read's answers in one write.
const MINIMAL: &str = r#"import net from "node:net"; import fs from "node:fs";
fs.writeSync(4, '{"t":"ready","v":1}\n');
new net.Socket({ fd: 3, readable: true, writable: false, onread: { buffer: Buffer.allocUnsafe(65536), callback(n, b) {
  let s = 0; let out = "";
  for (;;) {
const e = b.indexOf(10, s);
if (e < 0 || e >= n) break;
const m = JSON.parse(b.utf8Slice(s, e));
s = e + 1;
if (m.t === "load") out += `{"t":"loaded","id":${m.id},"key":${m.key},"ok":true}\n`;
if (m.t !== "call") continue;
const text = JSON.stringify(m.args ?? {});
out += `{"t":"answer","id":${m.id},"key":${m.key},"text":${JSON.stringify(text)}}\n`;
  }
  if (out) fs.writeSync(4, out);
} } });
"#;

struct Host {
    child: Child,
    /// The other end of the host's fd 5, open while it runs.
    _watch: UnixStream,
    to: File,
    from: BufReader<File>,
}

impl Host {
    fn start(node: &Path, script: &Path, plugins: &Path) -> Self {
        // Close-on-exec: Node gets fds 3, 4 and 5 only. Fd 5 is a socket, as the daemon gives it (the
        // host's watcher answers on it; left closed, Node's own first descriptor would land there).
        let cloexec = nix::fcntl::OFlag::O_CLOEXEC;
        let (down_r, down_w) = nix::unistd::pipe2(cloexec).expect("a pipe");
        let (up_r, up_w) = nix::unistd::pipe2(cloexec).expect("a pipe");
        let (watch, theirs) = UnixStream::pair().expect("a socket pair");
        let (r, w, x) = (down_r.as_raw_fd(), up_w.as_raw_fd(), theirs.as_raw_fd());
        let mut cmd = Command::new(node);
        cmd.arg(script)
            .env("OVAI_HOST", ovai::host::protocol::PROTOCOL.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        // SAFETY: the daemon's own placement of fds 3, 4 and 5, which runs only fcntl and dup2
        // (async-signal-safe) between fork and exec.
        unsafe {
            cmd.pre_exec(move || ovai::host::child::put_on_fds(&[r, w, x]));
        }
        let child = cmd.spawn().expect("node starts");
        drop((down_r, up_w, theirs));
        let mut host = Self {
            child,
            _watch: watch,
            to: File::from(down_w),
            from: BufReader::with_capacity(1 << 16, File::from(up_r)),
        };
        let ready = host.line();
        assert!(ready.contains("\"ready\""), "the host said {ready}");
        let dir = plugins.display().to_string();
        let init = serde_json::json!({ "t": "init", "root": dir, "pluginsDir": dir, "config": {},
            "maxAnswerBytes": 1 << 20, "key": 7 });
        let load = serde_json::json!({ "t": "load", "id": 1, "name": "p0000",
            "file": plugins.join("p0000.mjs"), "key": 9 });
        host.to
            .write_all(format!("{init}\n{load}\n").as_bytes())
            .expect("the host reads");
        let loaded = host.line();
        assert!(loaded.contains("\"ok\":true"), "the host said {loaded}");
        host
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        let n = self.from.read_line(&mut line).expect("the host writes");
        assert!(n > 0, "the host ended");
        line
    }

    /// `n` calls, `k` in flight; the seconds they took.
    fn calls(&mut self, first: u64, n: u64, k: u64) -> f64 {
        let request = |id: u64| {
            format!(
                "{{\"t\":\"call\",\"id\":{id},\"tool\":\"p0000\",\"args\":{{\"i\":{id}}},\"seat\":\"bench\",\"role\":\"Leader\",\"key\":{}}}\n",
                2_479_161_134_786_620u64 + id
            )
        };
        let started = Instant::now();
        let mut out = String::new();
        let mut sent = 0;
        while sent < k.min(n) {
            out.push_str(&request(first + sent));
            sent += 1;
        }
        let mut line = String::new();
        let mut got = 0;
        while got < n {
            if !out.is_empty() {
                self.to.write_all(out.as_bytes()).expect("the host reads");
                out.clear();
            }
            // Every answer already read is taken, and their requests go out together.
            loop {
                line.clear();
                let read = self.from.read_line(&mut line).expect("the host writes");
                assert!(read > 0, "the host ended");
                assert!(line.contains("\"text\""), "the host answered {line}");
                got += 1;
                if sent < n {
                    out.push_str(&request(first + sent));
                    sent += 1;
                }
                if got == n || !self.from.buffer().contains(&b'\n') {
                    break;
                }
            }
        }
        started.elapsed().as_secs_f64()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn compare(node: &Path, work: &Path, n: usize) {
    let plugins = work.join("host-alone");
    std::fs::create_dir_all(&plugins).expect("a plugins folder");
    std::fs::write(plugins.join("p0000.mjs"), ECHO).expect("the plugin");
    let minimal = work.join("minimal-host.mjs");
    std::fs::write(&minimal, MINIMAL).expect("the minimal host");
    let shim = Path::new("host-shim/host.mjs")
        .canonicalize()
        .expect("host-shim/host.mjs");
    let n = n as u64;
    // Alternated rounds: the machine's load moves from minute to minute.
    for (k, round) in [1, 32]
        .into_iter()
        .flat_map(|k| (1..=3).map(move |r| (k, r)))
    {
        eprintln!("k={k}, round {round}:");
        for (label, script) in [
            ("host.mjs", shim.as_path()),
            ("minimal host", minimal.as_path()),
        ] {
            let mut host = Host::start(node, script, &plugins);
            host.calls(10, n / 2, k);
            let before = Used::of(host.child.id());
            let took = host.calls(10 + n, n, k);
            eprintln!(
                "  {label}: {:.0} calls/s, per call: node {}",
                n as f64 / took,
                Used::of(host.child.id()).per_call(before, n as usize)
            );
        }
    }
}
