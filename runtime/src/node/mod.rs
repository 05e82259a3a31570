//! What the PEs of one node share besides their heaps: descriptors passed over Unix sockets
//! ([`fdpass`]), the same-node exchange of exported memory built on it ([`exchange`]), rshmrun's job
//! status board ([`jobstatus`]), the seqlock both use for records read by other processes
//! ([`seqlock`]), and the choice of the local address a listener binds ([`iface`]).

pub mod exchange;
pub mod fdpass;
pub mod iface;
pub mod jobstatus;
pub mod seqlock;
