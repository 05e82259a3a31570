//! Teams and collectives, written once for both backends on top of the RMA calls of `ops`.
//!
//! # Teams
//! A team is a strided set of PEs (`state::TeamDesc`): member `i` is job PE `start + i * stride`; for
//! the node teams and their splits the `start + i * stride`-th PE of this node; for a team of arbitrary
//! members (made from a unique id) entry `start + i * stride` of its member table. The host makes and
//! destroys teams (a split is collective over the parent team, `team_init` over the members alone) and
//! writes the table into the internal area of every member's heap; device code reads it from there.
//!
//! # Synchronization
//! Every collective of a team ends with one exchange of that team ([`team_exchange`]): each member
//! announces `epoch << 16 | tag` in its slot on every other member and waits until every slot here has
//! reached the epoch. The tag says which collective, and a hash of its arguments (root, count, type,
//! operator), so members that entered different collectives, or the same one with different arguments,
//! fail with a message naming what the other PE is in instead of hanging or mixing data.
//!
//! # Algorithms, and why
//! - broadcast, fcollect, collect, alltoall push: each PE writes its contribution to every member
//!   (NVLink stores for mapped PEs, one proxy request per member for the others), then one exchange with
//!   quiet completes and publishes them. No PE writes a member's destination before that member has
//!   entered the collective (`deliver`): small data lands in the member's inbox and is copied out after
//!   the one round; large data is written in place after an opening round. With direct writes every
//!   byte crosses a link once. Ring or tree schedules pay off when a PE's links are the bottleneck; with
//!   one NVLink switch domain (every GPU pair at full rate) direct writes are as fast and have the
//!   fewest rounds.
//! - small reductions (all members' data fit half the team's scratch, 8 KiB) push: each PE writes its
//!   source (its block `i`, for reducescatter) into an inbox in member `i`'s scratch, one exchange
//!   publishes them, and each PE combines its inbox locally in team order (so every PE computes bitwise
//!   the same result, floats included). One round: latency is what counts at these sizes.
//! - larger reductions pull: after an opening exchange (every member's source is ready), each PE reads
//!   every member's source, combines in team order and writes only its own destination; a closing
//!   exchange keeps sources unchanged until all have read them. Two rounds, but each source byte
//!   crosses a link once per reader and no scratch limits the size. When every member is mapped, one
//!   pass combines in registers; otherwise (PEs on other nodes, or an in-place reduction) chunks go
//!   through the team's scratch. Reducescatter is the same with each PE reducing only its own block, so
//!   each source byte is read once in total.
//!
//! # Files
//! - `teams`: the team table, [`Team`], member numbers and the team queries.
//! - `sync`: collective tags, the team exchange, team sync and the barriers.
//! - `data`: broadcast, fcollect, alltoall and collect, and the delivery they share.
//! - `elem`: the reduction operator and type codes and the element types' arithmetic.
//! - `reduce`: reductions and reducescatter.
//! - `host`: the collectives the host starts ([`run`]).
//!
//! The files import each other by their own paths, bottom to top: teams, sync, data, elem, reduce,
//! host. This file only declares them and re-exports their public items.

mod data;
mod elem;
mod host;
mod reduce;
mod sync;
mod teams;
pub mod typed;

// The kinds are defined with the failures that name them (`Problem::Mismatch`), below this layer.
pub use crate::types::Kind;
pub use data::{alltoall, lands_direct, broadcast, broadcast_grid, broadcast_sync, collect, fcollect, push_grid, push_sync};
pub use elem::{dtype, dtype_size, op, valid_reduction, Bf16, DoubleLoc, Elem, F16};
pub use host::{host_op, run};
pub use reduce::{pull, pull_slice, pull_sync, pulls, reduce, reduce_as};
pub use sync::{barrier_all, barrier_all_block, barrier_all_warp, sync_all, sync_all_block, sync_all_warp, tag, team_exchange, team_exchange_scoped, team_sync_scoped, Order};
pub use teams::{index_of, index_of_in, lookup, member, member_of, team, team_my_pe, team_n_pes, team_translate_pe, Team};
