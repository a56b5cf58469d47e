//! ovai's own processes run as `SCHED_BATCH` on Linux, whose wake-ups preempt no ordinary process: the
//! bridge's two threads, and the daemon; the plugin host (in its box) starts under the ordinary policy.
//! `OVAI_BRIDGE_BATCH=0` and `OVAI_DAEMON_BATCH=0` keep the policy each was started with.

mod common;
use common::*;
use serde_json::json;

/// Field `n` (from 3) of a `stat` file, a number: the fields after the command's closing parenthesis.
fn stat_field(stat: &std::path::Path, n: usize) -> Option<u32> {
    let stat = std::fs::read_to_string(stat).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(n - 3)?
        .parse()
        .ok()
}

/// The scheduling policy (field 41 of a stat; 0 ordinary, 3 SCHED_BATCH, 5 SCHED_IDLE).
const POLICY: usize = 41;
/// The parent's pid (field 4).
const PARENT: usize = 4;

/// The scheduling policy of each thread of a process.
fn policies_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| stat_field(&t.ok()?.path().join("stat"), POLICY))
        .collect()
}

/// The policies of a bridge's two threads, once both run (the client's reader and the daemon's).
fn bridge_policies(s: &Session) -> Vec<u32> {
    wait_until("the bridge's two threads", || {
        let p = policies_of(s.child.id());
        (p.len() == 2).then_some(p)
    })
}

#[test]
fn the_bridge_relays_without_preempting_what_it_relays_for_unless_told_not_to() {
    let inst = Instance::new();
    let _d = inst.start();
    let mut batch = inst.session("lead");
    batch.initialize();
    assert_eq!(bridge_policies(&batch), [3, 3], "SCHED_BATCH, each thread");
    let (text, is_error) = batch.call("index", json!({}));
    assert!(!is_error, "{text}");

    let mut ordinary = inst.session_with_env("lead", &[("OVAI_BRIDGE_BATCH", "0")]);
    ordinary.initialize();
    assert_eq!(bridge_policies(&ordinary), [0, 0], "the ordinary policy");

    // A value that is neither 0 nor 1 is named, and the default taken.
    let mut unclear = inst.session_with_env("lead", &[("OVAI_BRIDGE_BATCH", "false")]);
    unclear.initialize();
    assert_eq!(bridge_policies(&unclear), [3, 3]);
    let said = wait_until("the bridge's sentence on stderr", || {
        let said = unclear.stderr.lock().unwrap().clone();
        said.contains("using 1.").then_some(said)
    });
    assert!(
        said.contains(
            "ovai mcp: OVAI_BRIDGE_BATCH is \"false\", which is neither 0 (the bridge's threads keep the \
             policy they were started with) nor 1 (SCHED_BATCH, the default); using 1."
        ),
        "{said}"
    );

    // A bridge started under another policy than the ordinary one keeps it. (Leaving SCHED_IDLE takes
    // CAP_SYS_NICE: run unprivileged, the kernel refuses the change and a bridge that tried would pass too;
    // as root, as CI runs, it would not.)
    let mut cmd = bridge_command(&inst.root, Some(&inst.secret("lead")));
    // SAFETY: between fork and exec only sched_setscheduler, which is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            let param = libc::sched_param { sched_priority: 0 };
            if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut idle = Session::spawn_command(cmd);
    idle.initialize();
    assert_eq!(bridge_policies(&idle), [5, 5], "SCHED_IDLE, as started");
}

/// The policy of a process's main thread (its own stat).
fn policy_of(pid: u32) -> u32 {
    stat_field(format!("/proc/{pid}/stat").as_ref(), POLICY).expect("the process's stat")
}

/// The processes below `pid`, children first, by the parent each names in its stat.
fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let child: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let parent = stat_field(format!("/proc/{child}/stat").as_ref(), PARENT)?;
            Some((child, parent))
        })
        .collect();
    let mut found = vec![pid];
    let mut at = 0;
    while at < found.len() {
        let of = found[at];
        found.extend(parents.iter().filter(|(_, p)| *p == of).map(|(c, _)| *c));
        at += 1;
    }
    found.split_off(1)
}

#[test]
fn the_daemon_runs_batched_and_its_plugin_host_ordinary() {
    let inst = Instance::new();
    inst.fixture("echo.mjs");
    let d = inst.start();
    let mut s = inst.session("lead");
    s.initialize();
    let (text, is_error) = s.call("echo", json!({ "x": 1 }));
    assert!(!is_error, "{text}");
    assert_eq!(
        policy_of(d.pid()),
        3,
        "the daemon's event loop runs as SCHED_BATCH"
    );
    let host = d.host_pid();
    let below = descendants(d.pid());
    assert!(below.contains(&host), "the host {host} among {below:?}");
    for pid in below {
        assert!(
            policies_of(pid).iter().all(|&p| p == 0),
            "process {pid} below the daemon ({}): {:?}",
            std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default(),
            policies_of(pid)
        );
    }
}

#[test]
fn ovai_daemon_batch_0_keeps_the_daemons_policy_and_anything_else_is_named() {
    let inst = Instance::new();
    let d = Daemon::start_with_env(&inst, &[("OVAI_DAEMON_BATCH", "0")]);
    assert_eq!(policy_of(d.pid()), 0, "the ordinary policy, as started");
    assert_eq!(d.stop().code(), Some(0));

    let d = Daemon::start_with_env(&inst, &[("OVAI_DAEMON_BATCH", "yes")]);
    assert_eq!(policy_of(d.pid()), 3);
    let said = std::fs::read_to_string(&d.stderr).unwrap();
    assert!(
        said.contains(
            "OVAI_DAEMON_BATCH is \"yes\", which is neither 0 (the daemon keeps the policy it was started \
             with) nor 1 (SCHED_BATCH, the default); using 1."
        ),
        "{said}"
    );
}
