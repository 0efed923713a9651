//! Nexmark check mode: every query Weir supports, run over the fixed 100 000-event input as a
//! materialized view, must give exactly the rows that bench/nexmark/expected/compute.py (an
//! independent Python program) computed from the same input (compared by SHA-256 of the sorted
//! rows, bench/nexmark/expected/manifest.tsv).

mod common;

#[test]
fn every_supported_query_matches_the_independent_results() {
    let dir = common::scratch_dir("nexmark-check");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["bench", "nexmark", "--all", "--check", "--data-dir"])
        .arg(dir.join("db"))
        .env("RUST_LOG", "warn")
        .output()
        .expect("weir runs");
    let table = String::from_utf8_lossy(&out.stdout);
    println!("{table}");
    assert!(out.status.success(), "check failed:\n{table}\n{}", String::from_utf8_lossy(&out.stderr));
    // Every query but q6 (an OVER aggregate, which Flink does not run either) is checked.
    let ok = table.lines().filter(|l| l.ends_with("| ok |")).count();
    assert_eq!(ok, 22, "queries checked ok:\n{table}");
}
