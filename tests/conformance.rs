//! The official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned in scripts/test-tools)
//! against `ovai serve`'s HTTP endpoint. The suite sends no headers of its own, so a local proxy adds the
//! seat's bearer token to each request. The scenarios run are those that need no tools of the suite's own
//! making; the README lists the others and why they do not apply.

mod common;
use common::http::{BearerProxy, Http};
use common::*;
use serde_json::json;
use std::path::PathBuf;
use std::process::Command;

/// The scenarios that test a server in general, with no fixture tools, prompts or resources of the suite.
const SCENARIOS: &[&str] = &[
    "server-initialize",
    "ping",
    "tools-list",
    "dns-rebinding-protection",
    "server-sse-polling",
    "server-sse-multiple-streams",
];

fn tools_dir() -> PathBuf {
    let cache = std::env::var_os("OVAI_TEST_TOOLS")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .filter(|p| !p.is_empty())
                .map(|c| PathBuf::from(c).join("ovai-test-tools"))
        })
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/ovai-test-tools"))
        })
        .unwrap_or_else(|| PathBuf::from("/tmp/ovai-test-tools"));
    let dir = cache.join("conformance/node_modules");
    assert!(
        dir.join("node/bin/node").exists() && dir.join(".bin/conformance").exists(),
        "the MCP conformance suite is not installed for the tests (looked in {}): scripts/test installs it with \
         npm (@modelcontextprotocol/conformance and node@22, pinned) into that cache folder; run scripts/test",
        dir.display()
    );
    dir
}

fn run_scenario(modules: &std::path::Path, url: &str, scenario: &str) -> (bool, String) {
    let out = Command::new(modules.join("node/bin/node"))
        .arg(modules.join(".bin/conformance"))
        .args(["server", "--url", url, "--scenario", scenario])
        .env("NO_COLOR", "1")
        .output()
        .expect("the conformance suite runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn the_official_conformance_suite_passes_its_general_server_scenarios() {
    let modules = tools_dir();
    let inst = Instance::new();
    inst.set_config(json!({ "http": { "listen": "127.0.0.1:0" } }));
    inst.fixture("echo.mjs");
    let d = inst.start();
    let http = Http::at(d.status().unwrap()["http"].as_str().unwrap());
    let proxy = BearerProxy::start(http.addr, &inst.secret("lead"));
    let url = format!("http://localhost:{}/mcp", proxy.addr.port());
    let only = std::env::var("OVAI_CONFORMANCE_SCENARIOS").ok();
    let scenarios: Vec<&str> = match &only {
        Some(list) => list.split(',').collect(),
        None => SCENARIOS.to_vec(),
    };
    let mut failed = Vec::new();
    for scenario in scenarios {
        let (ok, text) = run_scenario(&modules, &url, scenario);
        eprintln!(
            "--- {scenario}: {}\n{text}",
            if ok { "passed" } else { "FAILED" }
        );
        if !ok {
            failed.push(scenario);
        }
    }
    assert!(failed.is_empty(), "scenarios that failed: {failed:?}");
}
