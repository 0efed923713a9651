//! Nexmark check mode: every query Weir supports, run over the fixed 100 000-event input as a
//! materialized view, must give exactly the rows that bench/nexmark/expected/compute.py (an
//! independent Python program) computed from the same input (compared by SHA-256 of the sorted
//! rows, bench/nexmark/expected/manifest.tsv).

mod common;

/// Runs `weir bench nexmark --all --check` with `extra` arguments and asserts every query, q0
/// to q22, matched.
fn check_all(name: &str, extra: &[&str]) {
    let dir = common::scratch_dir(name);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["bench", "nexmark", "--all", "--check"])
        .args(extra)
        .arg("--data-dir")
        .arg(dir.join("db"))
        .env("RUST_LOG", "warn")
        .output()
        .expect("weir runs");
    let table = String::from_utf8_lossy(&out.stdout);
    println!("{table}");
    assert!(out.status.success(), "check failed:\n{table}\n{}", String::from_utf8_lossy(&out.stderr));
    let ok = table.lines().filter(|l| l.ends_with("| ok |")).count();
    assert_eq!(ok, 23, "queries checked ok:\n{table}");
}

#[test]
fn every_supported_query_matches_the_independent_results() {
    check_all("nexmark-check", &[]);
}

/// The same results with a state cache far smaller than the state (64 KiB for every table of a
/// query; the default is 256 MiB): operators read evicted keys and groups back from RocksDB,
/// merged with the epoch's pending writes, and must not lose or repeat any.
#[test]
fn every_supported_query_matches_with_a_state_cache_far_smaller_than_its_state() {
    check_all("nexmark-check-small-cache", &["--state-cache-size", "64KiB"]);
}

/// The same results with every keyed and stateless operator run as 2 and as 3 parallel
/// instances behind hash exchanges (issue 14: check mode at parallelism 1, 2 and 3), the second
/// also with a small cache, so instances read their key groups back from a shared table.
#[test]
fn every_supported_query_matches_at_parallelism_2_and_3() {
    check_all("nexmark-check-p2", &["--parallelism", "2"]);
    check_all("nexmark-check-p3", &["--parallelism", "3", "--state-cache-size", "64KiB"]);
}
