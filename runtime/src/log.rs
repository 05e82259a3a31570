//! Minimal leveled logging to stderr (RSHMEM_DEBUG = error | warn | info | debug). Init sets the level
//! from its configuration ([`set_level`]), every init anew; before the first init, and after a failed
//! one, the level is warn.

use crate::config::LogLevel;
use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};

/// This process's PE number for messages, pushed here by the runtime as soon as it knows it
/// ([`set_pe`]); -1 until then. Kept after a failed init and after finalize.
static PE: AtomicI64 = AtomicI64::new(-1);

/// Records this process's PE number: every message from now on carries it.
pub fn set_pe(pe: usize) {
    PE.store(i64::try_from(pe).unwrap_or(-1), Ordering::Relaxed);
}

/// The PE number set by [`set_pe`], if any.
pub fn pe() -> Option<usize> {
    usize::try_from(PE.load(Ordering::Relaxed)).ok()
}

/// A message's severity, most severe first: a message is printed when its level is at most [`level`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Failures.
    Error = 0,
    /// Something likely wrong that does not stop the job (the default level).
    Warn = 1,
    /// What the runtime chose and found (transports, devices, sizes).
    Info = 2,
    /// Details for debugging rshmem itself.
    Debug = 3,
}

/// The level messages are printed at: the last init's RSHMEM_DEBUG (warn before any init).
static LEVEL: AtomicU8 = AtomicU8::new(Level::Warn as u8);

/// Sets the level (init, from its configuration's RSHMEM_DEBUG).
pub fn set_level(l: LogLevel) {
    LEVEL.store(l as u8, Ordering::Relaxed);
}

/// The level set by [`set_level`] (warn before any init).
pub fn level() -> Level {
    match LEVEL.load(Ordering::Relaxed) {
        0 => Level::Error,
        1 => Level::Warn,
        2 => Level::Info,
        _ => Level::Debug,
    }
}

/// "rshmem {tag} [PE n]: " with the PE number as soon as this process knows it (the runtime sets it
/// from the launcher's variables or the bootstrap, before init completes; it stays after a failed init
/// or finalize).
fn emit(l: Level, tag: &str, msg: &str) {
    if l <= level() {
        match pe() {
            Some(pe) => eprintln!("rshmem {tag} [PE {pe}]: {msg}"),
            None => eprintln!("rshmem {tag}: {msg}"),
        }
    }
}

/// Prints `msg` at level error.
pub fn error(msg: impl AsRef<str>) {
    emit(Level::Error, "error", msg.as_ref())
}
/// Prints `msg` at level warn.
pub fn warn(msg: impl AsRef<str>) {
    emit(Level::Warn, "warn", msg.as_ref())
}
/// Prints `msg` at level info.
pub fn info(msg: impl AsRef<str>) {
    emit(Level::Info, "info", msg.as_ref())
}
/// Prints `msg` at level debug.
pub fn debug(msg: impl AsRef<str>) {
    emit(Level::Debug, "debug", msg.as_ref())
}

/// A byte count for messages: "4096 bytes", "64 KiB", "1.5 GiB".
pub fn size_text(n: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if n >= unit {
            let v = n as f64 / unit as f64;
            return if n.is_multiple_of(unit) { format!("{} {name}", n / unit) } else { format!("{v:.1} {name}") };
        }
    }
    format!("{n} bytes")
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_well() {
        use super::size_text;
        assert_eq!(size_text(8), "8 bytes");
        assert_eq!(size_text(4096), "4 KiB");
        assert_eq!(size_text(1 << 30), "1 GiB");
        assert_eq!(size_text(3 << 29), "1.5 GiB");
        assert_eq!(size_text((2 << 20) + 1), "2.0 MiB");
    }
}
