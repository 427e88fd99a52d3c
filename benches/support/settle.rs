//! A quiet disk before a timed phase.

/// Writes back everything dirty in the page cache and waits until it is
/// written (`sync(2)`). The build before a bench, and each phase before
/// the next, leave up to hundreds of megabytes that the kernel writes back
/// in the background for tens of seconds, competing with the next phase
/// for the disk and the machine's two cores: on this project's 2-core VM
/// (2026-11-29) the engine-only 10,000-resource create took 1.6-1.9x its
/// floor after a sync and 2.0-2.5x within a minute of a build, with the
/// same binary.
pub fn settle() {
    // SAFETY: sync(2) takes no arguments, touches no memory of ours and
    // cannot fail.
    unsafe { libc::sync() }
}
