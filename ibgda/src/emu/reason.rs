//! Why the emulated NIC failed a WQE ([`Reason`], shared with the device-resident model:
//! `crate::nicmodel`) and the error of a remote operation ([`RemoteError`]).

pub use crate::nicmodel::Reason;

/// A failed remote operation: the syndrome the requester's error CQE carries and why.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RemoteError {
    pub syndrome: u8,
    pub reason: Reason,
}

#[cfg(test)]
mod tests {
    use super::Reason;

    #[test]
    fn every_reason_reads_back_from_its_byte() {
        for &r in Reason::ALL {
            assert_eq!(Reason::from_u8(r as u8), Some(r));
            assert!(!r.describe().is_empty());
        }
        assert_eq!(Reason::ALL.len(), 20);
        assert_eq!(Reason::from_u8(0), None);
        assert_eq!(Reason::from_u8(0xec), None);
    }
}
