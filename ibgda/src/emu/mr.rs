//! Registered memory regions and the responder side of remote operations.

use std::prelude::rust_2021::*;
use super::reason::{Reason, RemoteError};
use crate::mlx5::syndrome;
use crate::wqe::Atomic;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// Access rights of a region (the `ibv_access_flags` values). Local reads are always allowed.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Hash)]
pub struct Access(pub u32);

impl Access {
    pub const NONE: Access = Access(0);
    pub const LOCAL_WRITE: Access = Access(1);
    pub const REMOTE_WRITE: Access = Access(2);
    pub const REMOTE_READ: Access = Access(4);
    pub const REMOTE_ATOMIC: Access = Access(8);
    /// What NVSHMEM registers its heap with.
    pub const ALL: Access = Access(15);
    pub const fn contains(self, o: Access) -> bool {
        self.0 & o.0 == o.0
    }
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, o: Access) -> Access {
        Access(self.0 | o.0)
    }
}

/// One registered region: `len` bytes at `base` in this process.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Region {
    pub base: u64,
    pub len: u64,
    pub access: Access,
}

impl Region {
    /// Whether `[addr, addr + len)` lies inside the region (overflow-safe).
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        match (addr.checked_sub(self.base), self.base.checked_add(self.len), addr.checked_add(len)) {
            (Some(_), Some(end), Some(e)) => e <= end,
            _ => false,
        }
    }
}

/// Why a registration was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MrError {
    /// The key is registered already.
    KeyInUse(u32),
    /// `INVALID_LKEY` (0x100) ends scatter lists and cannot name a region.
    ReservedKey,
    /// The range wraps around the address space or is null.
    BadRange,
}

impl std::fmt::Display for MrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MrError::KeyInUse(k) => write!(f, "memory key {k:#x} is registered already"),
            MrError::ReservedKey => write!(f, "memory key 0x100 is reserved (MLX5_INVALID_LKEY)"),
            MrError::BadRange => write!(f, "memory region is null or wraps around the address space"),
        }
    }
}
impl std::error::Error for MrError {}

/// How the NIC moves bytes in and out of a region that is not plain memory of this process (GPU
/// memory, where a real NIC does DMA over PCIe and the emulator needs the platform's copies). Regions
/// registered without one are read and written directly.
pub trait Dma: Send + Sync {
    /// Copies `out.len()` bytes at `addr` (inside a region registered with this accessor) into `out`.
    ///
    /// # Safety
    /// `[addr, addr + out.len())` lies inside a live region registered with this accessor.
    unsafe fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), String>;
    /// Copies `data` to `addr`.
    ///
    /// # Safety
    /// As [`Dma::read`].
    unsafe fn write(&self, addr: u64, data: &[u8]) -> Result<(), String>;
}

/// An address a check let through, and the accessor of its region (None: plain memory).
type Reached = (*mut u8, Option<Arc<dyn Dma>>);

/// A registered region and how to reach its bytes.
#[derive(Clone)]
struct Entry {
    region: Region,
    dma: Option<Arc<dyn Dma>>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}{}", self.region, if self.dma.is_some() { " (through DMA)" } else { "" })
    }
}

/// The memory regions of one protection domain: key (lkey = rkey here) -> region.
#[derive(Default, Debug)]
pub struct MrTable {
    regions: RwLock<HashMap<u32, Entry>>,
}

/// Why an access was refused (the caller maps it to a local or remote syndrome).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Denied {
    UnknownKey,
    OutOfRange,
    NoRight,
    /// The region's accessor failed to copy.
    Dma,
}

impl MrTable {
    pub fn new() -> MrTable {
        MrTable::default()
    }

    /// Registers `len` bytes at `base` under `key`.
    ///
    /// # Safety
    /// The range must be memory of this process that stays readable (and writable where `access`
    /// allows writes) until the key is deregistered and no NIC operation can use it any more. The NIC
    /// accesses it concurrently with the program, as DMA does.
    pub unsafe fn register(&self, key: u32, base: *mut u8, len: u64, access: Access) -> Result<(), MrError> {
        // SAFETY: forwarded contract.
        unsafe { self.register_with(key, base, len, access, None) }
    }

    /// Registers `len` bytes at `base` under `key`, reached through `dma` (None: directly).
    ///
    /// # Safety
    /// As [`register`](Self::register); with an accessor, the range must be memory it can copy.
    pub unsafe fn register_with(&self, key: u32, base: *mut u8, len: u64, access: Access, dma: Option<Arc<dyn Dma>>) -> Result<(), MrError> {
        if key == crate::mlx5::INVALID_LKEY {
            return Err(MrError::ReservedKey);
        }
        if base.is_null() || (base as u64).checked_add(len).is_none() {
            return Err(MrError::BadRange);
        }
        let mut t = self.regions.write().unwrap_or_else(|e| e.into_inner());
        if t.contains_key(&key) {
            return Err(MrError::KeyInUse(key));
        }
        t.insert(key, Entry { region: Region { base: base as u64, len, access }, dma });
        Ok(())
    }

    /// Removes a key; returns whether it was registered.
    pub fn deregister(&self, key: u32) -> bool {
        self.regions.write().unwrap_or_else(|e| e.into_inner()).remove(&key).is_some()
    }

    pub fn lookup(&self, key: u32) -> Option<Region> {
        self.regions.read().unwrap_or_else(|e| e.into_inner()).get(&key).map(|e| e.region)
    }

    fn entry(&self, key: u32) -> Option<Entry> {
        self.regions.read().unwrap_or_else(|e| e.into_inner()).get(&key).cloned()
    }

    /// `[addr, addr + len)` under `key` if the region holds it and has the rights `need`: its address
    /// and its accessor (None: plain memory of this process).
    fn check_entry(&self, key: u32, addr: u64, len: u64, need: Access) -> Result<Reached, Denied> {
        let e = self.entry(key).ok_or(Denied::UnknownKey)?;
        if !e.region.contains(addr, len) {
            return Err(Denied::OutOfRange);
        }
        if !e.region.access.contains(need) {
            return Err(Denied::NoRight);
        }
        Ok((addr as *mut u8, e.dma))
    }

    /// The address of `[addr, addr + len)` under `key` if the region holds it and has the rights `need`.
    pub(crate) fn check(&self, key: u32, addr: u64, len: u64, need: Access) -> Result<*mut u8, Denied> {
        self.check_entry(key, addr, len, need).map(|(p, _)| p)
    }

    /// The responder's check of a remote access: `[raddr, raddr + len)` under `rkey` with the rights
    /// `need`, or the error the requester's CQE gets (REMOTE_ACCESS and why).
    pub fn check_remote(&self, rkey: u32, raddr: u64, len: u64, need: Access) -> Result<u64, RemoteError> {
        self.check(rkey, raddr, len, need).map(|p| p as u64).map_err(remote_denied)
    }

    /// Copies `out.len()` bytes at `addr` under `key` (checked against `need`) into `out`.
    pub(crate) fn read(&self, key: u32, addr: u64, out: &mut [u8], need: Access) -> Result<(), Denied> {
        let (p, dma) = self.check_entry(key, addr, out.len() as u64, need)?;
        match dma {
            // SAFETY: checked inside the region registered with this accessor.
            Some(d) => unsafe { d.read(addr, out) }.map_err(|_| Denied::Dma),
            None => {
                // SAFETY: `check_entry` found `[p, p + len)` inside a registered region (its contract:
                // live memory of this process); `out` is the NIC's own buffer. Read as DMA does.
                unsafe { std::ptr::copy_nonoverlapping(p as *const u8, out.as_mut_ptr(), out.len()) };
                Ok(())
            }
        }
    }

    /// Copies `data` to `addr` under `key` (checked against `need`).
    pub(crate) fn write(&self, key: u32, addr: u64, data: &[u8], need: Access) -> Result<(), Denied> {
        let (p, dma) = self.check_entry(key, addr, data.len() as u64, need)?;
        match dma {
            // SAFETY: checked inside the region registered with this accessor.
            Some(d) => unsafe { d.write(addr, data) }.map_err(|_| Denied::Dma),
            None => {
                // SAFETY: as in `read`, for writing (the rights were checked).
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
                Ok(())
            }
        }
    }
}

fn remote_denied(d: Denied) -> RemoteError {
    let reason = match d {
        Denied::UnknownKey => Reason::UnknownRkey,
        Denied::OutOfRange => Reason::RemoteRange,
        Denied::NoRight => Reason::RemoteRights,
        Denied::Dma => return RemoteError { syndrome: syndrome::REMOTE_OP, reason: Reason::DmaFailed },
    };
    RemoteError { syndrome: syndrome::REMOTE_ACCESS, reason }
}

/// The responder's side of an RDMA WRITE: checks the rkey, range and REMOTE_WRITE, then stores `data`.
pub fn respond_write(mrs: &MrTable, rkey: u32, raddr: u64, data: &[u8]) -> Result<(), RemoteError> {
    if data.is_empty() {
        return Ok(());
    }
    mrs.write(rkey, raddr, data, Access::REMOTE_WRITE).map_err(remote_denied)
}

/// The responder's side of an RDMA READ: checks the rkey, range and REMOTE_READ, then copies into `out`.
pub fn respond_read(mrs: &MrTable, rkey: u32, raddr: u64, out: &mut [u8]) -> Result<(), RemoteError> {
    if out.is_empty() {
        return Ok(());
    }
    mrs.read(rkey, raddr, out, Access::REMOTE_READ).map_err(remote_denied)
}

/// The responder's side of an atomic: checks the rkey, range, REMOTE_ATOMIC and natural alignment,
/// then applies `op` atomically to the little-endian target and returns the old value. Regions reached
/// through a [`Dma`] accessor (GPU memory) cannot be updated atomically from here: their owner applies
/// the atomic (the runtime's responder does, on the GPU) and this answers REMOTE_OP.
pub fn respond_atomic(mrs: &MrTable, rkey: u32, raddr: u64, op: Atomic) -> Result<u64, RemoteError> {
    let n = op.bytes() as u64;
    let (p, dma) = mrs.check_entry(rkey, raddr, n, Access::REMOTE_ATOMIC).map_err(remote_denied)?;
    if !raddr.is_multiple_of(n) {
        return Err(RemoteError { syndrome: syndrome::REMOTE_INVAL_REQ, reason: Reason::Misaligned });
    }
    if dma.is_some() {
        return Err(RemoteError { syndrome: syndrome::REMOTE_OP, reason: Reason::DmaFailed });
    }
    if n == 4 {
        // SAFETY: 4 bytes inside a registered region, 4-byte aligned; the program accesses it only
        // atomically while NIC atomics may target it (as on hardware).
        let a = unsafe { AtomicU32::from_ptr(p as *mut u32) };
        let old = a.fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| Some(op.apply(o as u64) as u32));
        Ok(match old {
            Ok(v) | Err(v) => v as u64,
        })
    } else {
        // SAFETY: as above, 8 bytes, 8-byte aligned.
        let a = unsafe { AtomicU64::from_ptr(p as *mut u64) };
        if let Atomic::Fa64 { add } = op {
            return Ok(a.fetch_add(add, Ordering::AcqRel));
        }
        let old = a.fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| Some(op.apply(o)));
        Ok(match old {
            Ok(v) | Err(v) => v,
        })
    }
}
