//! The official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned in scripts/test-tools)
//! against `ovai serve`'s HTTP endpoint, every scenario 2025-11-25 and 2026-07-28 require. The suite sends
//! no headers of its own, so a local proxy adds the seat's bearer token to each request.

mod common;
use common::http::{BearerProxy, Http};
use common::*;
use serde_json::json;
use std::path::PathBuf;
use std::process::Command;

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

/// What the suite expects of a server at each revision, run whole: every scenario a revision requires,
/// with the expected failures in tests/fixtures/conformance-expected-failures.yml (each says why it does
/// not apply to ovai). Anything else that fails, fails the test; so does an expected failure that passes.
#[test]
fn the_suite_passes_what_2025_11_25_and_2026_07_28_require() {
    let modules = tools_dir();
    let inst = Instance::new();
    inst.set_config(json!({ "http": { "listen": "127.0.0.1:0" } }));
    inst.fixture("echo.mjs");
    let d = inst.start();
    let http = Http::at(d.status().unwrap()["http"].as_str().unwrap());
    let proxy = BearerProxy::start(http.addr, &inst.secret("lead"));
    let url = format!("http://localhost:{}/mcp", proxy.addr.port());
    let expected = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/conformance-expected-failures.yml");
    let mut failed = Vec::new();
    for revision in ["2025-11-25", "2026-07-28"] {
        let out = Command::new(modules.join("node/bin/node"))
            .arg(modules.join(".bin/conformance"))
            .args(["server", "--url", &url, "--requirements", revision])
            .args(
                std::env::var("OVAI_CONFORMANCE_OUT")
                    .map(|o| vec!["-o".to_string(), format!("{o}/{revision}")])
                    .unwrap_or_default(),
            )
            .arg("--expected-failures")
            .arg(&expected)
            .env("NO_COLOR", "1")
            .output()
            .expect("the conformance suite runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!(
            "--- requirements {revision}: exit {:?}\n{text}",
            out.status.code()
        );
        if !out.status.success() {
            failed.push(revision);
        }
    }
    assert!(
        failed.is_empty(),
        "the suite failed at {failed:?} (its output is above)"
    );
}
