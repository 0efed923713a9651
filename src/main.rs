//! The `weir` binary: the global allocator and [`weir::cli::main`], where the command line is.

use std::process::ExitCode;

/// mimalloc: the state layer allocates a key and a value per row; glibc's malloc took ~40% of
/// Nexmark q4's cycles in a profile (bench/README.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    weir::cli::main()
}
