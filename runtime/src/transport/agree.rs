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

/// What test hook `var` says of PE `pe`, as the environment sets it now: None when it is unset; else
/// whether its value names `pe` ([`names`]). A transport gets the hooks from init's configuration
/// (`Config::hooks`) instead.
pub(crate) fn hook_names(var: &str, pe: usize) -> Option<bool> {
    crate::config::env::get(var).map(|v| names(&v, pe))
}

/// Whether a test hook's value, `all` or a comma-separated list of PEs, names PE `pe`.
fn names(value: &str, pe: usize) -> bool {
    value.trim() == "all" || value.split(',').any(|p| p.trim().parse::<usize>() == Ok(pe))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_name_all_or_listed_pes_and_failures_are_told_by_prefix() {
        assert!(names(" all ", 7));
        assert_eq!((names(" 1, 3 ", 1), names(" 1, 3 ", 2), names(" 1, 3 ", 3)), (true, false, true));
        assert!(!names("", 0));
        assert!(is_agreed_failure(&Error::new("p: the NIC could not be set up (x) on PE 0 (PE 0: y)"), "p: the NIC could not be set up"));
        assert!(!is_agreed_failure(&Error::new("something else"), "p:"));
    }
}
