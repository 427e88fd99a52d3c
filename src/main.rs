//! The `cairn` binary: everything is in the package's library (`src/lib.rs`).

fn main() -> std::process::ExitCode {
    cairn::main()
}
