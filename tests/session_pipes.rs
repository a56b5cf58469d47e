//! A seat's session through `ovai mcp` carries its lines over two pipes the daemon makes and hands over
//! with its welcome (a pipe costs each message less of the kernel's time than a socket), and keeps the
//! socket open beside them so the daemon can tell its death from its closing its side. The daemon's ends
//! are its own: whatever a client does with the ends it is given holds up nobody else, and leaves nothing
//! open in the daemon.

mod common;
use common::*;
use serde_json::json;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

/// The pipes among a process's descriptors, by the kernel's name for each (`pipe:[inode]`), past stdio.
fn pipes_of(pid: u32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let fd: u32 = e.file_name().to_string_lossy().parse().ok()?;
        let target = std::fs::read_link(e.path()).ok()?;
        let target = target.to_string_lossy().into_owned();
        (fd > 2 && target.starts_with("pipe:")).then_some(target)
    })
    .collect()
}

fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[test]
fn a_seat_session_goes_over_two_pipes_whose_other_ends_the_daemon_holds() {
    let inst = Instance::new();
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    assert!(s.tool_names().contains(&"index".to_string()));
    let (text, is_error) = s.call("index", json!({}));
    assert!(!is_error, "{text}");

    // Both may have inherited other pipes from this process (a test runner's jobserver): not counted.
    let daemon = pipes_of(d.pid());
    let inherited = pipes_of(std::process::id());
    let shared: Vec<String> = pipes_of(s.child.id())
        .into_iter()
        .filter(|p| daemon.contains(p) && !inherited.contains(p))
        .collect();
    assert_eq!(
        shared.len(),
        2,
        "pipes the bridge and the daemon share: {shared:?}; the daemon's: {daemon:?}"
    );
}

const BIG: &str = r#"
export const description = "A big answer.";
export const inputSchema = { type: "object" };
export function run() { return { text: "x".repeat(300000) }; }
"#;

/// A seat's session whose pipes came with the welcome: (the end to write to, the end to read from,
/// the socket).
fn over_pipes(inst: &Instance) -> (std::fs::File, std::fs::File, UnixStream) {
    let ovai_inst = ovai::instance::Instance::at(inst.root.clone());
    let mut sock = ovai::client::connect(&ovai_inst).unwrap();
    let pipes = ovai::client::hello_seat_over_pipes(
        &ovai_inst,
        &mut sock,
        &inst.secret("lead"),
        PATIENCE,
        &mut || false,
    )
    .unwrap()
    .expect("the daemon makes the session's pipes");
    (pipes.write, pipes.read, sock)
}

/// A client's initialize (and initialized), as raw lines.
const INITIALIZE: &str = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"x\",\"version\":\"1\"}}}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";

/// `n` raw calls of `big`, ids 1 to `n`.
fn big_calls(n: u64) -> String {
    (1..=n)
        .map(|id| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"big\",\"arguments\":{{}}}}}}\n"))
        .collect()
}

fn blocking(fd: &impl std::os::fd::AsFd) -> bool {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).unwrap());
    !flags.contains(OFlag::O_NONBLOCK)
}

#[test]
fn a_client_that_keeps_its_pipe_ends_blocking_and_stops_reading_holds_up_nobody_else() {
    let inst = Instance::with_plugins(&[("big.mjs", BIG)]);
    let d = inst.start();
    let before = descriptors(d.pid());
    let mut other = inst.session("lead");
    other.initialize();

    let (mut to_daemon, from_daemon, sock) = over_pipes(&inst);
    // Its ends are its own open files: blocking, as a pipe is made, whatever the daemon's are.
    assert!(blocking(&to_daemon) && blocking(&from_daemon));
    to_daemon.write_all(INITIALIZE.as_bytes()).unwrap();
    // Exactly a pipe's worth of empty lines (sent while the session has room, so the write ends); then
    // far more answer than a pipe holds, never read.
    to_daemon.write_all(&vec![b'\n'; 64 * 1024]).unwrap();
    to_daemon.write_all(big_calls(40).as_bytes()).unwrap();

    // The daemon answers everybody else meanwhile.
    let status = d.status().expect("ovai status answers");
    assert_eq!(status["seats"][0]["sessions"], 2, "{status}");
    let (text, is_error) = other.call("big", json!({}));
    assert!(!is_error && text.len() == 300000, "{}", text.len());

    // Gone, it leaves nothing open in the daemon.
    drop((to_daemon, from_daemon, sock));
    drop(other);
    wait_until("the daemon to hold no more descriptors than before", || {
        (descriptors(d.pid()) <= before).then_some(())
    });
}

/// The next line of `sock`, and the descriptors that come with it.
fn welcome_with_fds(sock: &UnixStream) -> (String, Vec<std::os::fd::OwnedFd>) {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut line = Vec::new();
    let mut fds = Vec::new();
    loop {
        let mut byte = [0u8; 1];
        let mut iov = [std::io::IoSliceMut::new(&mut byte)];
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 4]);
        let msg = recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::empty(),
        )
        .unwrap();
        for c in msg.cmsgs().unwrap() {
            if let ControlMessageOwned::ScmRights(raw) = c {
                // SAFETY: installed in this process for this message alone; one owner each.
                fds.extend(
                    raw.into_iter()
                        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                );
            }
        }
        if msg.bytes == 0 || byte[0] == b'\n' {
            break;
        }
        line.push(byte[0]);
    }
    (String::from_utf8_lossy(&line).into_owned(), fds)
}

/// Writes `bytes` on `sock` with `fds` attached.
fn send_with_fds(sock: &UnixStream, bytes: &[u8], fds: &[&dyn AsRawFd]) {
    let raw: Vec<i32> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
    nix::sys::socket::sendmsg::<()>(
        sock.as_raw_fd(),
        &[std::io::IoSlice::new(bytes)],
        &[nix::sys::socket::ControlMessage::ScmRights(&raw)],
        nix::sys::socket::MsgFlags::empty(),
        None,
    )
    .unwrap();
}

#[test]
fn a_client_cannot_hand_the_daemon_pipes_of_its_own_to_make_blocking() {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let inst = Instance::with_plugins(&[("big.mjs", BIG)]);
    let d = inst.start();
    let mut other = inst.session("lead");
    other.initialize();

    let ovai_inst = ovai::instance::Instance::at(inst.root.clone());
    let mut sock = ovai::client::connect(&ovai_inst).unwrap();
    let hello =
        json!({ "ovai": ovai::wire::VERSION, "seatSecret": inst.secret("lead"), "pipes": true });
    sock.write_all(format!("{hello}\n").as_bytes()).unwrap();
    // The daemon's pipes are kept open: closed, they would end the session (and its socket) at once.
    let (welcome, given) = welcome_with_fds(&sock);
    assert_eq!(
        (
            serde_json::from_str::<serde_json::Value>(&welcome).unwrap(),
            given.len()
        ),
        (json!({ "ok": true, "pipes": true }), 2),
        "the welcome brings the daemon's pipes"
    );
    // Pipes of its own passed after the welcome, with copies kept: were the daemon to take them, the
    // client could make the daemon's ends blocking and stop reading.
    let (daemon_reads, to_daemon) = nix::unistd::pipe().unwrap();
    let (_from_daemon, daemon_writes) = nix::unistd::pipe().unwrap();
    send_with_fds(&sock, b"\n", &[&daemon_reads, &daemon_writes]);
    for fd in [&daemon_reads, &daemon_writes] {
        let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).unwrap());
        fcntl(fd, FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK)).unwrap();
    }
    let mut to_daemon = std::fs::File::from(to_daemon);
    to_daemon
        .write_all(format!("{INITIALIZE}{}", big_calls(20)).as_bytes())
        .unwrap();

    // Nobody else waits on that client.
    assert!(d.status().is_some(), "ovai status answers");
    let (text, is_error) = other.call("big", json!({}));
    assert!(!is_error && text.len() == 300000, "{}", text.len());
    drop((to_daemon, sock, given));
}

#[test]
fn the_welcome_brings_the_pipes_and_the_session_goes_on_over_them() {
    let inst = Instance::new();
    let d = inst.start();
    let before = descriptors(d.pid());
    for round in 0..20 {
        let (to_daemon, from_daemon, sock) = over_pipes(&inst);
        let reader = std::io::BufReader::new(TimedReader::new(from_daemon));
        let mut mcp = ovai::client::McpClient::new(reader, to_daemon);
        mcp.initialize("pipes").unwrap();
        let answer = mcp
            .request("tools/call", json!({ "name": "index", "arguments": {} }))
            .unwrap()
            .unwrap();
        assert_eq!(answer["isError"], false, "round {round}: {answer}");
        drop((mcp, sock));
    }
    wait_until("the daemon to hold no more descriptors than before", || {
        (descriptors(d.pid()) <= before).then_some(())
    });
    // A hello that does not offer pipes is welcomed as before, with none, and goes on over its socket.
    let ovai_inst = ovai::instance::Instance::at(inst.root.clone());
    let mut sock = ovai::client::connect(&ovai_inst).unwrap();
    ovai::client::hello_seat(&ovai_inst, &mut sock, &inst.secret("lead"), PATIENCE).unwrap();
    let reader = std::io::BufReader::new(TimedReader::new(sock.try_clone().unwrap()));
    let mut mcp = ovai::client::McpClient::new(reader, sock);
    mcp.initialize("socket").unwrap();
    assert!(
        mcp.request("tools/list", json!({})).unwrap().unwrap()["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
}

/// Not ovai's daemon: something on the instance's socket that takes one connection's hello, then does
/// `serve` with it.
fn fake_daemon(
    inst: &Instance,
    serve: impl FnOnce(UnixStream) + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let path = inst.root.join(".ovai/ovai.sock");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        ovai::client::read_line_unbuffered(&mut sock, 64 * 1024).unwrap();
        serve(sock);
    })
}

#[test]
fn a_bridge_given_something_else_than_two_pipes_says_so_and_answers() {
    let inst = Instance::new();
    // A welcome with a file and /dev/zero for pipes.
    let fake = fake_daemon(&inst, |mut sock| {
        let file = std::fs::File::open("/dev/null").unwrap();
        let zero = std::fs::File::open("/dev/zero").unwrap();
        send_with_fds(&sock, b"{\"ok\":true,\"pipes\":true}\n", &[&file, &zero]);
        // Held open until the bridge has had its say.
        let _ = ovai::client::read_line_unbuffered(&mut sock, 64 * 1024);
    });
    let (mut s, r) = inst.try_session(&inst.secret("lead"));
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("the end to write into is not that end of a pipe"),
        "{r}"
    );
    assert!(!s.wait().success());
    assert!(
        s.stderr
            .lock()
            .unwrap()
            .contains("is not that end of a pipe"),
        "{}",
        s.stderr.lock().unwrap()
    );
    fake.join().unwrap();
}

#[test]
fn a_bridge_whose_daemon_makes_no_pipes_goes_on_over_the_socket() {
    let inst = Instance::new();
    // An older daemon: a welcome without pipes, then the session's lines on the socket.
    let fake = fake_daemon(&inst, |mut sock| {
        sock.write_all(b"{\"ok\":true}\n").unwrap();
        let line = ovai::client::read_line_unbuffered(&mut sock, 64 * 1024).unwrap();
        let request: serde_json::Value = serde_json::from_str(&line).unwrap();
        let answer =
            json!({ "jsonrpc": "2.0", "id": request["id"], "result": { "over": "the socket" } });
        sock.write_all(format!("{answer}\n").as_bytes()).unwrap();
        let _ = ovai::client::read_line_unbuffered(&mut sock, 64 * 1024);
    });
    let (s, r) = inst.try_session(&inst.secret("lead"));
    assert_eq!(r["result"], json!({ "over": "the socket" }), "{r}");
    drop(s);
    fake.join().unwrap();
}
