//! What the transports' collective setups share: agreeing on a failure, so that every PE of the job
//! gets the same error and can fall back alike ([`agree_failure`], [`is_agreed_failure`]), and the test
//! hooks that make chosen PEs believe something of their NIC ([`hook_names`]).

use crate::bootstrap::Bootstrap;
use crate::error::{Error, Result};

/// The most bytes of a PE's reason the all-gather carries.
const REASON_BYTES: usize = 400;

/// Collective: every PE says how its part of a setup step went (`mine`); Ok when it went well
/// everywhere, else the same error on every PE, `{prefix} ({what}) on {PEs} (PE {first}: {reason})`:
/// the PEs it failed on and the first one's reason (shortened). `call` names the all-gather.
pub(crate) fn agree_failure(boot: &Bootstrap, call: &str, prefix: &str, what: &str, mine: std::result::Result<(), String>) -> Result<()> {
    let status: Vec<u8> = match &mine {
        Ok(()) => vec![0],
        Err(e) => {
            let mut cut = e.len().min(REASON_BYTES);
            while !e.is_char_boundary(cut) {
                cut -= 1;
            }
            [&[1u8][..], &e.as_bytes()[..cut]].concat()
        }
    };
    let said = boot.allgather(call, &status)?;
    let failed: Vec<usize> = (0..said.len()).filter(|&pe| said[pe].first() != Some(&0)).collect();
    match failed.first() {
        None => Ok(()),
        Some(&first) => Err(Error::new(format!(
            "{prefix} ({what}) on {} (PE {first}: {})",
            crate::bootstrap::pe_list(&failed),
            String::from_utf8_lossy(said[first].get(1..).unwrap_or_default())
        ))),
    }
}

/// Whether `e` is an agreed failure (every PE got it alike, as [`agree_failure`] gives it) that starts
/// with `prefix`.
pub(crate) fn is_agreed_failure(e: &Error, prefix: &str) -> bool {
    e.to_string().starts_with(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_told_by_prefix() {
        assert!(is_agreed_failure(&Error::new("p: the NIC could not be set up (x) on PE 0 (PE 0: y)"), "p: the NIC could not be set up"));
        assert!(!is_agreed_failure(&Error::new("something else"), "p:"));
    }
}
