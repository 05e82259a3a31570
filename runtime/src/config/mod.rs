//! Configuration: every environment variable rshmem reads ([`env`](mod@env): the table, the getters and the
//! checks run at init) and the pure parsers of their values ([`parse`]). Nothing here imports another
//! rshmem layer: the bootstrap, the transports and the probes all read their settings through it.

pub mod env;
pub mod parse;
