//! TCP bootstrap: all-gather, broadcast and barrier of byte buffers among the PEs of a job.
//! (Implementation in progress.)
