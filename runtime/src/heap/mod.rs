//! The symmetric heap's bookkeeping: the collective allocator's free list ([`alloc`]) and the table of
//! buffers registered for remote access from outside the heap ([`register`]). Pure data structures: the
//! runtime backs and registers memory with the platform and the transports.

pub mod alloc;
pub mod register;
