//! The one rule by which rshmrun splits things into contiguous blocks: PEs into simulated nodes
//! (`--nodes`), CPUs among PEs (`--bind-to core`).

/// Where item `i` of `n` lies when they are split into `blocks` contiguous blocks, the first
/// `n % blocks` with one item more: (block, index in the block, items in the block).
pub fn block_of(i: u32, n: u32, blocks: u32) -> (u32, u32, u32) {
    debug_assert!(blocks >= 1 && blocks <= n && i < n);
    let (base, extra) = (n / blocks, n % blocks);
    let big = extra * (base + 1); // items in the blocks with one more
    if i < big {
        (i / (base + 1), i % (base + 1), base + 1)
    } else {
        (extra + (i - big) / base, (i - big) % base, base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_contiguous_and_larger_first() {
        // 4 PEs on 3 nodes: 0-1, 2, 3.
        let l: Vec<_> = (0..4).map(|pe| block_of(pe, 4, 3)).collect();
        assert_eq!(l, [(0, 0, 2), (0, 1, 2), (1, 0, 1), (2, 0, 1)]);
        assert_eq!((0..4).map(|pe| block_of(pe, 4, 2)).collect::<Vec<_>>(), [(0, 0, 2), (0, 1, 2), (1, 0, 2), (1, 1, 2)]);
        assert_eq!(block_of(3, 4, 1), (0, 3, 4));
        // Every split: contiguous blocks, sizes differ by at most one, larger first, all PEs covered once.
        for np in 1..40u32 {
            for nodes in 1..=np {
                let l: Vec<_> = (0..np).map(|pe| block_of(pe, np, nodes)).collect();
                let mut next = (0, 0);
                for &(node, local, size) in &l {
                    assert_eq!((node, local), next, "np {np} nodes {nodes}: {l:?}");
                    assert!(size == np / nodes + u32::from(node < np % nodes), "np {np} nodes {nodes}: {l:?}");
                    next = if local + 1 == size { (node + 1, 0) } else { (node, local + 1) };
                }
                assert_eq!(next, (nodes, 0), "np {np} nodes {nodes}: {l:?}");
            }
        }
    }
}
