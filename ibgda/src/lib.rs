#![no_std]
//! GPU-initiated networking (IBGDA). Placeholder crate: the mlx5 WQE/CQE/doorbell structures and the
//! emulated NIC land in a later issue.
