//! Proof of the job key, in both directions, without sending it.
//!
//! A PE's hello carries a fresh random nonce, never the key. PE 0 answers with a challenge: a nonce
//! of its own and its proof, HMAC-SHA256 under the job key of "root", the hello and its nonce. The PE
//! checks that proof before it sends anything that depends on the key, then answers with its own
//! proof, the HMAC of "leaf", the hello and PE 0's nonce. So:
//!
//! - a stranger that listens on the bootstrap port first gets a hello with a random nonce and nothing
//!   else: no key, nothing derived from it, nothing it could replay to the real PE 0 (whose nonce is
//!   fresh for every connection);
//! - a stranger that connects to PE 0 gets PE 0's proof over bytes of its choosing, which is no
//!   PE's proof (another label) and tells nothing about the key;
//! - each side checks the other's proof in constant time.
//!
//! The connection is not encrypted: a machine in the middle that relays both directions untouched
//! sees the collectives' data, as with any plain TCP. The key keeps strangers out of the job; it does
//! not hide the job's traffic from someone who controls the network.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Bytes of a nonce.
pub(super) const NONCE: usize = 16;
/// Bytes of a proof (HMAC-SHA256).
pub(super) const PROOF: usize = 32;

const ROOT: &[u8; 8] = b"rs-root3";
const LEAF: &[u8; 8] = b"rs-leaf3";

fn mac(key: &[u8; 16], label: &[u8; 8], hello: &[u8], nonce: &[u8; NONCE]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length");
    // Fixed-size fields around the one variable-size field, whose length goes first: no two
    // different inputs give the same bytes.
    m.update(label);
    m.update(&(hello.len() as u64).to_le_bytes());
    m.update(hello);
    m.update(nonce);
    m
}

/// PE 0's proof for the connection whose hello body is `hello`; `nonce` is PE 0's.
pub(super) fn root_proof(key: &[u8; 16], hello: &[u8], nonce: &[u8; NONCE]) -> [u8; PROOF] {
    mac(key, ROOT, hello, nonce).finalize().into_bytes().into()
}

/// A PE's proof, answering PE 0's challenge `nonce` to its hello body `hello`.
pub(super) fn leaf_proof(key: &[u8; 16], hello: &[u8], nonce: &[u8; NONCE]) -> [u8; PROOF] {
    mac(key, LEAF, hello, nonce).finalize().into_bytes().into()
}

/// Whether `proof` is PE 0's proof under `key` (constant time).
pub(super) fn check_root(key: &[u8; 16], hello: &[u8], nonce: &[u8; NONCE], proof: &[u8; PROOF]) -> bool {
    mac(key, ROOT, hello, nonce).verify_slice(proof).is_ok()
}

/// Whether `proof` is a PE's proof under `key` (constant time).
pub(super) fn check_leaf(key: &[u8; 16], hello: &[u8], nonce: &[u8; NONCE], proof: &[u8; PROOF]) -> bool {
    mac(key, LEAF, hello, nonce).verify_slice(proof).is_ok()
}

/// Constant-time comparison of job keys (no early exit on the first differing byte).
pub(super) fn key_eq(a: &[u8; 16], b: &[u8; 16]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_check_only_with_the_same_key_label_hello_and_nonce() {
        let (k, h, n) = ([7u8; 16], b"hello body".as_slice(), [1u8; NONCE]);
        let r = root_proof(&k, h, &n);
        let l = leaf_proof(&k, h, &n);
        assert_ne!(r, l, "the two directions have different proofs");
        assert!(check_root(&k, h, &n, &r) && check_leaf(&k, h, &n, &l));
        // PE 0's proof is no PE's proof: a stranger cannot answer PE 0 with PE 0's own words.
        assert!(!check_leaf(&k, h, &n, &r) && !check_root(&k, h, &n, &l));
        let mut k2 = k;
        k2[15] ^= 1;
        assert!(!check_root(&k2, h, &n, &r));
        assert!(!check_root(&k, b"hello bodY", &n, &r));
        let mut n2 = n;
        n2[0] ^= 0x80;
        assert!(!check_root(&k, h, &n2, &r));
        // RFC 4231 test case 2, to pin the primitive (key "Jefe").
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        let hex: String = m.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }
}
