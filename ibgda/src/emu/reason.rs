//! Why the emulated NIC failed a WQE ([`Reason`]) and the error of a remote operation
//! ([`RemoteError`]).

codes! {
    /// Why the emulator failed a WQE: written to the error CQE's `vendor_err_synd` byte (real NICs put
    /// their own vendor codes there; these are the emulator's, for diagnostics). The PRM syndrome is in
    /// `syndrome`. `from_u8` reads the byte back; `describe` says what it means.
    #[derive(PartialOrd, Ord, Hash, Debug)]
    pub enum Reason: u8 [from_u8, describe] {
        UnknownOpcode = 0xe0 => "unknown or unsupported WQE opcode",
        BadOpmod = 0xe1 => "opmod not valid for the opcode",
        BadDs = 0xe2 => "ds does not match the opcode's segments",
        WqeIndexMismatch = 0xe3 => "control segment's WQE index is not the NIC's consumer index (stale or overwritten WQE)",
        QpnMismatch = 0xe4 => "control segment's QPN is not this QP's",
        BeyondProducer = 0xe5 => "WQE extends past the doorbell record's producer count",
        BadInline = 0xe6 => "malformed inline segment",
        BadFence = 0xe7 => "reserved fence mode",
        UnknownLkey = 0xe8 => "unknown lkey",
        LocalRange = 0xe9 => "local buffer outside its memory region",
        LocalRights = 0xea => "local memory region not writable",
        BadLength = 0xeb => "bad byte count",
        UnknownRkey = 0xf0 => "unknown rkey",
        RemoteRange = 0xf1 => "remote range outside its memory region",
        RemoteRights = 0xf2 => "remote memory region lacks the access right",
        Misaligned = 0xf3 => "misaligned atomic target",
        NoReceiveQueue = 0xf4 => "send-type opcode: the emulated responder has no receive queue",
        Unreachable = 0xf5 => "remote side unreachable",
        Flushed = 0xf6 => "flushed: QP in error state",
        DmaFailed = 0xf7 => "the memory copy (DMA) of the region failed",
    }
}

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
