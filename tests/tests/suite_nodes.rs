//! The multi-process suite across simulated nodes: every case of `common/suite.rs` that is not
//! node-local by nature (that list, with its reasons, is there), run with `rshmrun --nodes 2` and
//! `RSHMEM_REMOTE_TRANSPORT=proxy`: PEs 0-1 and 2-3 (of 4) share no memory and reach each other only
//! through the proxy transport, as on two machines. As root (CI) every case runs again with `--netns`
//! (each node in its own network namespace, joined by veth links); elsewhere those say SKIPPED.

mod common;

use common::suite::{self, suite_cases, TWO_NODES_PROXY, TWO_NODES_PROXY_NETNS};

macro_rules! nodes_tests {
    (everywhere: [$($case:ident),* $(,)?], one_node: [$($local:ident: $why:literal),* $(,)?] $(,)?) => {
        mod two_nodes {
            use super::*;
            $( #[test] fn $case() { suite::$case(&TWO_NODES_PROXY) } )*
        }
        mod two_nodes_netns {
            use super::*;
            $( #[test] fn $case() { if TWO_NODES_PROXY_NETNS.available() { suite::$case(&TWO_NODES_PROXY_NETNS) } } )*
        }
        /// The cases left out here, with their reasons: each must name a real case and give a reason.
        #[test]
        fn excluded_cases_are_few_and_explained() {
            let excluded: &[(&str, &str)] = &[$((stringify!($local), $why)),*];
            let run: &[&str] = &[$(stringify!($case)),*];
            assert!(excluded.len() * 10 <= run.len(), "more than a tenth of the suite is excluded across nodes: {excluded:?}");
            for (case, why) in excluded {
                assert!(why.len() >= 20, "{case}: the reason for leaving it out is not written: {why:?}");
                assert!(!run.contains(case), "{case} is both run and excluded");
            }
            // Referenced so that a removed case fails to compile here instead of vanishing silently.
            let _ = [$(suite::$local as fn(&suite::Layout)),*];
        }
    };
}
suite_cases!(nodes_tests);
