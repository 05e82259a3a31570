//! Minimal leveled logging to stderr (RSHMEM_DEBUG = error | warn | info | debug).

use std::sync::OnceLock;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error = 0,
    Warn = 1,
    Info = 2,
    Debug = 3,
}

pub fn level() -> Level {
    static L: OnceLock<Level> = OnceLock::new();
    *L.get_or_init(|| match crate::env::get(crate::env::DEBUG).as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("error") => Level::Error,
        Some("info") => Level::Info,
        Some("debug") | Some("trace") => Level::Debug,
        _ => Level::Warn,
    })
}

fn emit(l: Level, tag: &str, msg: &str) {
    if l <= level() {
        let pe = crate::runtime::my_pe();
        if pe >= 0 {
            eprintln!("rshmem {tag} [PE {pe}]: {msg}");
        } else {
            eprintln!("rshmem {tag}: {msg}");
        }
    }
}

pub fn warn(msg: impl AsRef<str>) {
    emit(Level::Warn, "warn", msg.as_ref())
}
pub fn info(msg: impl AsRef<str>) {
    emit(Level::Info, "info", msg.as_ref())
}
pub fn debug(msg: impl AsRef<str>) {
    emit(Level::Debug, "debug", msg.as_ref())
}
