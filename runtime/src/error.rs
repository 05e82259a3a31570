//! The one error type of the runtime: a message that names the problem (which call, which PE, which value).

use std::fmt;

/// An rshmem error. The message is meant for the user: it names the call, the PEs and the values involved.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    msg: String,
    /// The OS error number this error came from, where the code that made it kept one (`Error::os`,
    /// `From<io::Error>`, `Error::with_errno`); `context` keeps it. Lets a caller tell kinds of failure
    /// apart without reading the message (e.g. a network link that failed from a peer that closed).
    errno: Option<i32>,
}

impl Error {
    /// An error with this message and no OS error number.
    pub fn new(msg: impl Into<String>) -> Error {
        Error { msg: msg.into(), errno: None }
    }
    /// An error with its message and the OS error number it came from.
    pub fn with_errno(msg: impl Into<String>, errno: Option<i32>) -> Error {
        Error { msg: msg.into(), errno }
    }
    /// Wraps an OS error with what we were doing.
    pub fn os(what: impl fmt::Display, err: std::io::Error) -> Error {
        Error::with_errno(format!("{what}: {err}"), err.raw_os_error())
    }
    /// The message, as `Display` prints it.
    pub fn message(&self) -> &str {
        &self.msg
    }
    /// The OS error number this error came from, if it kept one.
    pub fn errno(&self) -> Option<i32> {
        self.errno
    }
    /// Prefixes context ("rshmem_malloc: ...").
    pub fn context(self, what: impl fmt::Display) -> Error {
        Error { msg: format!("{what}: {}", self.msg), errno: self.errno }
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
        Error::with_errno(e.to_string(), e.raw_os_error())
    }
}

/// The runtime's result type.
pub type Result<T> = std::result::Result<T, Error>;
