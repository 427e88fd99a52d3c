//! The `cairn` binary: everything is in the package's library (`src/lib.rs`).

/// Templates and stacks are trees of many small allocations; see Cargo.toml.
/// Chosen here, by the binary, so the library's users (the benches, which
/// pick their own) are free to.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cairn::main()
}
