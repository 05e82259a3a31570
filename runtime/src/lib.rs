//! rshmem host runtime.
pub mod bootstrap;
pub mod env;
pub mod error;

pub use error::{Error, Result};
