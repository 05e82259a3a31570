//! Multi-process tests: the PE program `rshmem-test-pe` under the real `rshmrun` (real processes, TCP
//! bootstrap, shared-memory heaps) on whatever backend this machine has (the CPU backend in CI), all
//! PEs on one node. The cases are defined once in `common/suite.rs`; `suite_nodes.rs` runs the same
//! ones across simulated nodes.

mod common;

use common::suite::{self, suite_cases, ONE_NODE};

/// One `#[test]` per case of both groups: on one node every case runs.
macro_rules! one_node_tests {
    (everywhere: [$($case:ident),* $(,)?], one_node: [$($local:ident: $why:literal),* $(,)?] $(,)?) => {
        $( #[test] fn $case() { suite::$case(&ONE_NODE) } )*
        $( #[test] fn $local() { suite::$local(&ONE_NODE) } )*
    };
}
suite_cases!(one_node_tests);
