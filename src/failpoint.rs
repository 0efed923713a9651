//! Failpoints for crash tests: `WEIR_FAILPOINT=<name>[,<name>...]` makes the process abort
//! (no destructor, no flush: as a SIGKILL) the first time it reaches a named moment.
//!
//! | name | moment |
//! | --- | --- |
//! | `after_precommit` | an exactly-once Kafka sink's epoch is committed in RocksDB, its Kafka transaction not yet |
//!
//! Unset (always, outside tests) it costs one read of a once-initialized flag.

use std::sync::OnceLock;

/// Aborts the process if `WEIR_FAILPOINT` names `name`.
pub fn hit(name: &str) {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        std::env::var("WEIR_FAILPOINT").map(|v| v.split(',').map(|n| n.trim().to_string()).collect()).unwrap_or_default()
    });
    if names.iter().any(|n| n == name) {
        eprintln!("weir: failpoint {name} reached: aborting (WEIR_FAILPOINT)");
        std::process::abort();
    }
}
