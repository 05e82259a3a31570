//! The symmetric-heap allocator. Deterministic: the same requests in the same order give the same
//! offsets on every PE, so one offset names the same object everywhere. Offsets are relative to the
//! heap base; the first `INTERNAL_BYTES` belong to the runtime.

use std::collections::BTreeMap;

/// Alignment of every allocation unless a larger one is asked for (a GPU cache line pair).
pub const MIN_ALIGN: usize = 256;

/// Free and live ranges of the symmetric heap, as offsets from the heap base. The runtime holds one
/// and changes it only inside collective allocations, so it is the same on every PE.
pub struct Allocator {
    size: usize,
    /// Free ranges: start offset -> length. Adjacent ranges are always merged.
    free: BTreeMap<usize, usize>,
    /// Live allocations: start offset -> (length, offset of the block actually reserved, its length).
    used: BTreeMap<usize, (usize, usize, usize)>,
    /// Highest offset ever handed out (for backends that back the heap as it grows).
    high_water: usize,
}

impl Allocator {
    /// An allocator for offsets `[start, size)`.
    pub fn new(start: usize, size: usize) -> Allocator {
        let mut free = BTreeMap::new();
        if size > start {
            free.insert(start, size - start);
        }
        Allocator { size, free, used: BTreeMap::new(), high_water: start }
    }

    /// First fit. Returns the offset, or None when no free range can hold `len` at `align`.
    pub fn alloc(&mut self, len: usize, align: usize) -> Option<usize> {
        let align = align.max(MIN_ALIGN);
        let len = len.max(1).checked_add(MIN_ALIGN - 1)? & !(MIN_ALIGN - 1);
        let (&start, &flen) = self.free.iter().find(|(&s, &l)| {
            let a = (s + align - 1) & !(align - 1);
            a.checked_add(len).is_some_and(|end| end <= s + l)
        })?;
        let a = (start + align - 1) & !(align - 1);
        self.free.remove(&start);
        if a > start {
            self.free.insert(start, a - start);
        }
        let end = a + len;
        if end < start + flen {
            self.free.insert(end, start + flen - end);
        }
        self.used.insert(a, (len, a, len));
        self.high_water = self.high_water.max(end);
        Some(a)
    }

    /// Frees the allocation at `off`. Returns false when `off` is not the start of a live allocation.
    pub fn free(&mut self, off: usize) -> bool {
        let Some((_, start, len)) = self.used.remove(&off) else { return false };
        let mut s = start;
        let mut l = len;
        if let Some((&ps, &pl)) = self.free.range(..s).next_back() {
            if ps + pl == s {
                self.free.remove(&ps);
                s = ps;
                l += pl;
            }
        }
        if let Some(&nl) = self.free.get(&(s + l)) {
            self.free.remove(&(s + l));
            l += nl;
        }
        self.free.insert(s, l);
        true
    }

    /// Size of the live allocation starting at `off`.
    pub fn size_of(&self, off: usize) -> Option<usize> {
        self.used.get(&off).map(|u| u.0)
    }

    /// Bytes of the largest free range (the largest allocation that can succeed at `MIN_ALIGN`).
    pub fn largest_free(&self) -> usize {
        self.free.values().copied().max().unwrap_or(0)
    }
    /// Bytes free in all.
    pub fn total_free(&self) -> usize {
        self.free.values().sum()
    }
    /// The end of the managed offsets (the heap size).
    pub fn size(&self) -> usize {
        self.size
    }
    /// The end of the highest range ever handed out (or the start, before any): how much of the heap
    /// must be backed.
    pub fn high_water(&self) -> usize {
        self.high_water
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_reuse_and_merge() {
        let mut a = Allocator::new(1024, 1 << 20);
        let x = a.alloc(100, 1).unwrap();
        let y = a.alloc(1000, 1).unwrap();
        let z = a.alloc(10, 4096).unwrap();
        assert_eq!(x, 1024);
        assert_eq!(y, 1024 + 256);
        assert_eq!(z % 4096, 0);
        assert!(a.free(y));
        assert!(!a.free(y), "double free must be refused");
        assert!(!a.free(12345), "unknown offset must be refused");
        // The hole left by y is reused by a request that fits.
        assert_eq!(a.alloc(512, 1), Some(y));
        assert!(a.free(x) && a.free(z) && a.free(y));
        assert_eq!(a.total_free(), (1 << 20) - 1024);
        assert_eq!(a.largest_free(), (1 << 20) - 1024);
    }

    #[test]
    fn exhaustion_returns_none_and_keeps_heap_intact() {
        let mut a = Allocator::new(0, 4096);
        let x = a.alloc(4096, 1).unwrap();
        assert_eq!(a.alloc(1, 1), None);
        assert_eq!(a.alloc(usize::MAX - 10, 1), None);
        assert!(a.free(x));
        assert_eq!(a.alloc(4096, 1), Some(0));
    }

    #[test]
    fn deterministic_sequence() {
        let run = || {
            let mut a = Allocator::new(65536, 1 << 24);
            let mut v = vec![];
            for i in 0..200usize {
                let o = a.alloc((i * 7919) % 5000 + 1, 1 << (i % 10)).unwrap();
                v.push(o);
                if i % 3 == 0 {
                    a.free(v[i / 2]);
                }
            }
            v
        };
        assert_eq!(run(), run());
    }
}
