//! The one error type of the runtime: a message that names the problem (which call, which PE, which value).

use std::fmt;

/// An rshmem error. The message is meant for the user: it names the call, the PEs and the values involved.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    msg: String,
}

impl Error {
    pub fn new(msg: impl Into<String>) -> Error {
        Error { msg: msg.into() }
    }
    /// Wraps an OS error with what we were doing.
    pub fn os(what: impl fmt::Display, err: std::io::Error) -> Error {
        Error::new(format!("{what}: {err}"))
    }
    pub fn message(&self) -> &str {
        &self.msg
    }
    /// Prefixes context ("rshmem_malloc: ...").
    pub fn context(self, what: impl fmt::Display) -> Error {
        Error::new(format!("{what}: {}", self.msg))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::new(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, Error>;
