//! Scenarios of teams and collectives (`rshmem::coll` on the host, `rshmem_device::coll` in kernels),
//! driven by tests/tests/coll.rs. Every result is checked against a model computed here: the teams'
//! members from the split arguments, the collectives' outputs from every member's source data (which
//! any PE can regenerate from the seed), reductions combined in team member order.
//!
//! - `coll_teams`: the predefined teams, splits (strided, 2-D, of the node team, of a split) checked
//!   through team_my_pe / team_n_pes / translate_pe / team_get_config on the host and in a kernel;
//!   errors of bad splits and predefined destroys; the 32-team limit (a clear error, then the slots
//!   come back); 40 split/use/destroy cycles with random membership (slots reused by other PEs).
//! - `coll`: on every team of `coll_teams`, every collective in thread, warp and block scope (kernel
//!   `k_coll`) and from the host: sync, barrier (host: puts before it are seen after it), broadcast from
//!   every root, fcollect, collect (a different count on each PE), alltoall, and reduce and
//!   reducescatter for every type and every operator it has; in-place variants, counts beyond the
//!   16 KiB scratch (chunked reductions), zero-length calls; sources must be unchanged afterwards and
//!   nothing outside each destination written.
//! - `coll_prop`: seeded random cases: a random split (strided or 2-D, of the world, a node team or a
//!   split), a random scope, random collectives with random counts, roots, types and operators.
//! - `coll_mm_*`: mismatched collectives (roots, counts, operators, types, kinds, splits, teams); each
//!   must end with an error naming the problem, not a hang (see the test for what each must say).
//!
//! Failures name the team, scope, case and `RSHMEM_TEST_SEED` that reproduces them.

use super::{ck, die, fill, run, Ctx};
use rshmem::coll::{self as hc, dtype, op, Bf16, DoubleLoc, ReduceOp, Team, TeamConfig, F16};
use rshmem_device::coll::host_op;
use rshmem_device::{TEAMS_MIN, TEAM_INVALID, TEAM_NODE, TEAM_SHARED, TEAM_WORLD};
use std::fmt;

// ---------------------------------------------------------------- random numbers

/// SplitMix64: a seeded generator whose sequence every PE can reproduce.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0, 0)
    }
    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Uniform in lo..=hi.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    fn chance(&mut self, num: usize, den: usize) -> bool {
        self.below(den) < num
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len())]
    }
    /// A float in [-4, 4), 24 random bits, never -0.0.
    fn f32(&mut self) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0
    }
    fn f64(&mut self) -> f64 {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) * 8.0 - 4.0
    }
}

/// A hash of two words (the finalizer of SplitMix64 over their combination).
fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_mul(0xd6e8_feb8_6659_fd93);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

// ---------------------------------------------------------------- teams and their model

/// A team as the test expects it: its job PEs in member order, and this PE's handle (TEAM_INVALID when
/// this PE is not a member).
#[derive(Clone, Debug)]
struct TeamM {
    name: String,
    handle: i32,
    members: Vec<usize>,
}

impl TeamM {
    fn index(&self, pe: usize) -> Option<usize> {
        self.members.iter().position(|&m| m == pe)
    }
    fn size(&self) -> usize {
        self.members.len()
    }
    fn team(&self) -> Team {
        Team(self.handle)
    }
    fn is_member(&self) -> bool {
        self.handle != TEAM_INVALID
    }
}

/// This PE's node: the PEs rshmrun placed on it (RSHMEM_LOCAL_PE of RSHMEM_LOCAL_NPES, contiguous).
fn node_members(c: &Ctx) -> Vec<usize> {
    let num = |k: &str| -> usize {
        std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| die(format!("{k} is not set: run under rshmrun")))
    };
    let (local, count) = (num("RSHMEM_LOCAL_PE"), num("RSHMEM_LOCAL_NPES"));
    (c.me - local..c.me - local + count).collect()
}

fn world(c: &Ctx) -> TeamM {
    TeamM { name: "WORLD".into(), handle: TEAM_WORLD, members: (0..c.n).collect() }
}
fn node(c: &Ctx, handle: i32) -> TeamM {
    TeamM { name: if handle == TEAM_NODE { "NODE" } else { "SHARED" }.into(), handle, members: node_members(c) }
}

fn seed_note(c: &Ctx) -> String {
    format!("RSHMEM_TEST_SEED={} reproduces", c.seed)
}

/// Splits `parent` (collective over its members; the others must not call) into the members
/// `start, start + stride, ...` and checks the handle against the model. `config`: made with
/// `team_split_strided`'s config, else with `Team::split_strided`.
fn split(c: &Ctx, parent: &TeamM, start: usize, stride: usize, size: usize, config: Option<TeamConfig>) -> TeamM {
    let members: Vec<usize> = (0..size).map(|i| parent.members[start + i * stride]).collect();
    let name = format!("{}.split({start}, {stride}, {size})", parent.name);
    let mut t = TeamM { name, handle: TEAM_INVALID, members };
    if !parent.is_member() {
        return t;
    }
    let (s, st, sz) = (start as i32, stride as i32, size as i32);
    let r = match config {
        Some(cfg) => hc::team_split_strided(parent.handle, s, st, sz, Some(cfg)).map(|h| (h != TEAM_INVALID).then_some(Team(h))),
        None => parent.team().split_strided(s, st, sz),
    };
    let r = r.unwrap_or_else(|e| die(format!("{}: {e} ({})", t.name, seed_note(c))));
    match (r, t.index(c.me)) {
        (Some(h), Some(_)) => t.handle = h.0,
        (None, None) => {}
        (r, i) => die(format!("{}: split gave {r:?} to PE {}, whose index in the model is {i:?} ({})", t.name, c.me, seed_note(c))),
    }
    t
}

/// split_2d of `parent` with `xrange`: (row team, column team) with the model's members.
fn split_2d(c: &Ctx, parent: &TeamM, xrange: usize) -> (TeamM, TeamM) {
    let p = parent.size();
    let x = xrange.min(p);
    let mut row = TeamM { name: format!("{}.2d({xrange}).x", parent.name), handle: TEAM_INVALID, members: vec![] };
    let mut col = TeamM { name: format!("{}.2d({xrange}).y", parent.name), handle: TEAM_INVALID, members: vec![] };
    let Some(i) = parent.index(c.me).filter(|_| parent.is_member()) else { return (row, col) };
    let (r, k) = (i / x, i % x);
    row.members = parent.members[r * x..((r + 1) * x).min(p)].to_vec();
    col.members = (k..p).step_by(x).map(|j| parent.members[j]).collect();
    let (a, b) = parent.team().split_2d(xrange as i32).unwrap_or_else(|e| die(format!("{}: {e} ({})", row.name, seed_note(c))));
    if a == Team::INVALID || b == Team::INVALID {
        die(format!("{}: split_2d gave {a:?}, {b:?}: every member of the parent is in a row and a column", row.name));
    }
    row.handle = a.0;
    col.handle = b.0;
    (row, col)
}

fn destroy(c: &Ctx, t: &TeamM) {
    if t.is_member() {
        t.team().destroy().unwrap_or_else(|e| die(format!("destroy {}: {e} ({})", t.name, seed_note(c))));
    }
}

/// team_my_pe / team_n_pes / translate_pe / get_config of `teams` on the host and (k_team_info) in a
/// kernel, against the model.
fn check_teams(c: &Ctx, teams: &[TeamM], scratch: *mut u8) {
    for t in teams {
        let (want_me, want_n) = match t.index(c.me) {
            Some(i) if t.is_member() => (i as i32, t.size() as i32),
            _ => (-1, -1),
        };
        let got = (hc::team_my_pe(t.handle), hc::team_n_pes(t.handle), t.team().my_pe(), t.team().n_pes());
        if got != (want_me, want_n, want_me, want_n) {
            die(format!("{} (handle {}, members {:?}): team_my_pe, team_n_pes, Team::my_pe, Team::n_pes are {got:?}; expected {want_me}, {want_n}", t.name, t.handle, t.members));
        }
        if t.is_member() && (t.handle as usize) >= TEAMS_MIN as usize {
            let cfg = hc::team_get_config(t.handle).unwrap_or_else(|e| die(format!("team_get_config({}): {e}", t.name)));
            if cfg.version != (2 << 16) + 64 {
                die(format!("team_get_config({}): version {:#x}", t.name, cfg.version));
            }
        }
    }
    // translate_pe(t, i, u) for every pair, i from -1 to past the end.
    let max = c.n as i32 + 1;
    let model = |t: &TeamM, i: i32, u: &TeamM| -> i32 {
        if !t.is_member() || !u.is_member() || i < 0 || i as usize >= t.size() {
            return -1;
        }
        u.index(t.members[i as usize]).map_or(-1, |j| j as i32)
    };
    let mut want = Vec::new();
    for t in teams {
        want.push(if t.is_member() { t.index(c.me).unwrap() as i64 } else { -1 });
        want.push(if t.is_member() { t.size() as i64 } else { -1 });
        for u in teams {
            for i in -1..max {
                let w = model(t, i, u);
                want.push(w as i64);
                let h = hc::team_translate_pe(t.handle, i, u.handle);
                let typed = t.team().translate_pe(i, u.team()).unwrap_or(-1);
                if h != w || typed != w {
                    die(format!("translate_pe({} member {i} -> {}): host gives {h} (typed {typed}), expected {w}; members {:?} and {:?}", t.name, u.name, t.members, u.members));
                }
            }
        }
    }
    let handles: Vec<u8> = teams.iter().flat_map(|t| (t.handle as i64 as u64).to_le_bytes()).collect();
    let out = scratch.wrapping_add(4096);
    super::put_bytes(scratch, &handles);
    run("k_team_info", 1, 1, &[scratch as u64, teams.len() as u64, out as u64, max as u64]);
    let got: Vec<i64> = super::get_u64s(out, want.len()).into_iter().map(|v| v as i64).collect();
    if let Some(k) = (0..want.len()).find(|&k| got[k] != want[k]) {
        die(format!("device team queries (k_team_info): value #{k} is {}, expected {} (teams {:?})", got[k], want[k], teams.iter().map(|t| (&t.name, t.handle, &t.members)).collect::<Vec<_>>()));
    }
}

/// The teams the `coll` scenarios run on: the predefined ones and splits of every kind. All PEs
/// return the same list (handles TEAM_INVALID where not a member).
fn make_teams(c: &Ctx) -> Vec<TeamM> {
    let n = c.n;
    let w = world(c);
    let nd = node(c, TEAM_NODE);
    let s1 = { let st = 1.min(n - 1); split(c, &w, st, 1, n - st, None) };
    let s2 = { let st = if n >= 4 { 1 } else { 0 }; split(c, &w, st, 2, (n - st).div_ceil(2), None) };
    let nested = split(c, &s1, 0, 2, s1.size().div_ceil(2), None);
    let of_node = { let st = 1.min(nd.size() - 1); split(c, &nd, st, 1, nd.size() - st, None) };
    let (x, y) = split_2d(c, &w, 2);
    vec![w, nd, node(c, TEAM_SHARED), s1, s2, nested, of_node, x, y]
}

// ---------------------------------------------------------------- scenario coll_teams

pub fn teams_scenario(c: &Ctx) {
    let scratch = ck(rshmem::malloc(1 << 16));
    let w = world(c);
    // The predefined teams.
    if hc::team_my_pe(TEAM_INVALID) != -1 || hc::team_n_pes(TEAM_INVALID) != -1 || hc::team_n_pes(40) != -1 || hc::team_my_pe(7) != -1 {
        die("team_my_pe / team_n_pes of TEAM_INVALID, an unused slot or a handle out of range are not -1");
    }
    let cfg = ck(hc::team_get_config(TEAM_WORLD));
    if cfg != TeamConfig::default() {
        die(format!("team_get_config(TEAM_WORLD) is {cfg:?}, not the default"));
    }
    for h in [TEAM_INVALID, 7, 40] {
        match hc::team_get_config(h) {
            Ok(cfg) => die(format!("team_get_config({h}) gave {cfg:?} for a team that does not exist")),
            Err(e) if e.message().contains("does not exist") => {}
            Err(e) => die(format!("team_get_config({h}): unclear error: {e}")),
        }
    }
    for t in [Team::WORLD, Team::SHARED, Team::NODE] {
        match t.destroy() {
            Ok(()) => die(format!("destroying the predefined team {t:?} succeeded")),
            Err(e) if e.message().contains("predefined") => {}
            Err(e) => die(format!("destroying {t:?}: unclear error: {e}")),
        }
    }
    ck(Team::INVALID.destroy());
    // Bad split arguments: the same error on every PE, and no team made.
    let n = c.n as i32;
    for (start, stride, size) in [(-1, 1, 1), (0, 1, 0), (0, 0, 2), (0, 1, n + 1), (n, 1, 1), (1, n, 2)] {
        if size == 2 && n < 2 {
            continue;
        }
        match Team::WORLD.split_strided(start, stride, size) {
            Ok(t) => die(format!("split_strided({start}, {stride}, {size}) of {n} PEs gave {t:?}")),
            Err(e) if e.message().contains("do not select PEs of the parent team") && e.message().contains(&format!("start {start}")) => {}
            Err(e) => die(format!("split_strided({start}, {stride}, {size}) of {n} PEs: unclear error: {e}")),
        }
    }
    match Team::WORLD.split_2d(0) {
        Ok(t) => die(format!("split_2d(0) gave {t:?}")),
        Err(e) if e.message().contains("xrange 0") => {}
        Err(e) => die(format!("split_2d(0): unclear error: {e}")),
    }
    // A split with a configuration keeps it.
    let mine = TeamConfig { num_contexts: 3, uniqueid: 0x1234_5678_9abc, ..TeamConfig::default() };
    let with_cfg = split(c, &w, 0, 1, c.n, Some(mine));
    let got = ck(hc::team_get_config(with_cfg.handle));
    if got != mine {
        die(format!("team_get_config of a team made with {mine:?} gave {got:?}"));
    }
    // Every kind of split, checked on the host and in a kernel.
    let mut teams = make_teams(c);
    teams.push(with_cfg);
    check_teams(c, &teams, scratch);
    println!("PE {}: coll_teams: {}", c.me, teams.iter().map(|t| format!("{} {:?} handle {}", t.name, t.members, t.handle)).collect::<Vec<_>>().join("; "));
    for t in teams.iter().skip(3) {
        destroy(c, t);
    }
    // After destroy the handles are gone.
    for t in teams.iter().skip(3).filter(|t| t.is_member()) {
        if hc::team_n_pes(t.handle) != -1 || hc::team_get_config(t.handle).is_ok() {
            die(format!("{} (handle {}) still answers after destroy", t.name, t.handle));
        }
        match t.team().barrier() {
            Ok(()) => die(format!("a barrier on the destroyed team {} succeeded", t.name)),
            Err(e) if e.message().contains("does not exist") => {}
            Err(e) => die(format!("a barrier on the destroyed team {}: unclear error: {e}", t.name)),
        }
    }
    with_arena(|| {
        limit(c, scratch);
        churn(c);
    });
    ck(rshmem::barrier_all());
    ck(rshmem::free(scratch));
}

/// Splits of the whole world until the table is full: exactly 32 teams live at once (3 predefined, 3
/// reserved handles, 26 made), then a clear error; the full table still works, and after destroying
/// them the slots come back.
fn limit(c: &Ctx, scratch: *mut u8) {
    let w = world(c);
    let mut made = Vec::new();
    let err = loop {
        match Team::WORLD.split_strided(0, 1, c.n as i32) {
            Ok(Some(t)) => made.push(TeamM { name: format!("limit #{}", made.len()), handle: t.0, members: w.members.clone() }),
            Ok(None) => die("a split of the whole world left this PE out"),
            Err(e) => break e,
        }
        if made.len() > 40 {
            die("more than 40 teams live at once: no limit");
        }
    };
    let m = err.message();
    if made.len() != 32 - TEAMS_MIN as usize || !(m.contains("no free team slot") && m.contains("at most 32 teams")) {
        die(format!("the team limit: {} splits succeeded (expected {}), then: {m}", made.len(), 32 - TEAMS_MIN));
    }
    if c.me == 0 {
        println!("PE 0: coll_teams: {} teams live, then the expected error: {m}", made.len() + TEAMS_MIN as usize);
    }
    // The last slot works (a collective on it), and so do translations through every live team.
    let last = made.last().unwrap().clone();
    quick_check(c, &last, 1);
    let mut all = vec![w.clone()];
    all.extend(made.iter().step_by(5).cloned());
    check_teams(c, &all, scratch);
    // Also across a non-world split: its agreement runs on the device (the parent is not the world).
    match last.team().split_strided(0, 1, 1) {
        Ok(t) => die(format!("a split of a split with the table full gave {t:?}")),
        Err(e) if e.message().contains("no free team slot") => {}
        Err(e) => die(format!("a split of a split with the table full: unclear error: {e}")),
    }
    for t in &made {
        destroy(c, t);
    }
    let again = split(c, &w, 0, 1, c.n, None);
    if again.handle != TEAMS_MIN {
        die(format!("after destroying every team the first split got handle {}, expected {TEAMS_MIN}", again.handle));
    }
    quick_check(c, &again, 2);
    destroy(c, &again);
}

/// 40 cycles of split / use / destroy with random membership: every slot is reused by teams of
/// other members (the synchronization words of a reused slot must not carry the old team's state).
fn churn(c: &Ctx) {
    let w = world(c);
    let nd = node(c, TEAM_NODE);
    let mut rng = Rng::new(mix(c.seed, 0xc4u64));
    let mut live: Vec<TeamM> = Vec::new();
    for cycle in 0..40 {
        let parent = if rng.chance(1, 4) { &nd } else { &w };
        let p = parent.size();
        let stride = rng.range(1, p.max(2) - 1).min(p);
        let start = rng.below(p);
        let size = rng.range(1, (p - 1 - start) / stride + 1);
        let t = split(c, parent, start, stride, size, None);
        let t = TeamM { name: format!("churn #{cycle}: {}", t.name), ..t };
        if t.is_member() {
            quick_check(c, &t, cycle + 10);
        }
        live.push(t);
        // Keep a few alive for a while, so that slots are freed out of order.
        while live.len() > 3 || (rng.chance(1, 3) && !live.is_empty()) {
            let k = rng.below(live.len());
            destroy(c, &live.remove(k));
        }
    }
    for t in &live {
        destroy(c, t);
    }
    ck(rshmem::barrier_all());
}

/// A short check of a team: a host fcollect and a device sum reduction of small vectors.
fn quick_check(c: &Ctx, t: &TeamM, tag: usize) {
    let ops = vec![
        Op::data(host_op::FCOLLECT, 24, 0, 0),
        Op::reduce(host_op::REDUCE, 5, dtype::I64, op::SUM, false),
        Op::reduce(host_op::REDUCESCATTER, 3, dtype::U32, op::XOR, false),
        Op::data(host_op::BARRIER, 0, 0, 0),
    ];
    run_ops(c, t, if tag.is_multiple_of(2) { Mode::Host } else { Mode::Block }, ops, mix(c.seed, tag as u64), &format!("quick check {tag}"));
}

// ---------------------------------------------------------------- collectives: cases and model

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Thread,
    Warp,
    Block,
    Host,
}
const MODES: [Mode; 4] = [Mode::Thread, Mode::Warp, Mode::Block, Mode::Host];

/// Every (type, operator) pair the reductions have.
fn reduction_pairs() -> Vec<(u32, u32)> {
    let mut v = Vec::new();
    for dt in dtype::I8..=dtype::DOUBLE2 {
        for o in op::AND..=op::MAXLOC {
            if rshmem_device::coll::valid_reduction(dt, o) {
                v.push((dt, o));
            }
        }
    }
    v
}

fn dtype_name(dt: u32) -> &'static str {
    ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64", "double2"].get(dt as usize).copied().unwrap_or("?")
}
fn op_name(o: u32) -> &'static str {
    ["and", "or", "xor", "min", "max", "sum", "prod", "maxloc"].get(o as usize).copied().unwrap_or("?")
}
fn what_name(w: u32) -> &'static str {
    ["sync", "barrier", "broadcast", "fcollect", "collect", "alltoall", "reduce", "reducescatter"].get(w as usize).copied().unwrap_or("?")
}
fn elem_size(dt: u32) -> usize {
    rshmem_device::coll::dtype_size(dt)
}

/// One collective call of a case list. Lengths: `n` is bytes for the data collectives (collect: see
/// `counts`, the bytes of each member) and elements for the reductions.
#[derive(Clone)]
struct Op {
    what: u32,
    n: usize,
    root: usize,
    dt: u32,
    o: u32,
    in_place: bool,
    counts: Vec<usize>,
    /// Byte offset of the data collectives' buffers from 16-byte alignment.
    misalign: usize,
    seed: u64,
    // Where the buffers are in the arena (set by `layout`).
    dest: usize,
    src: usize,
    /// End of the op's buffers (their slack included): [dest, end) is checked after the call.
    end: usize,
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", what_name(self.what))?;
        match self.what {
            host_op::REDUCE | host_op::REDUCESCATTER => write!(f, " {} {} of {} elements", dtype_name(self.dt), op_name(self.o), self.n)?,
            host_op::COLLECT => write!(f, " of {:?} bytes", self.counts)?,
            host_op::BROADCAST => write!(f, " of {} bytes from root {}", self.n, self.root)?,
            host_op::SYNC | host_op::BARRIER => {}
            _ => write!(f, " of {} bytes", self.n)?,
        }
        if self.in_place {
            write!(f, " in place")?;
        }
        if self.misalign != 0 {
            write!(f, " at +{}", self.misalign)?;
        }
        Ok(())
    }
}

impl Op {
    fn data(what: u32, n: usize, root: usize, misalign: usize) -> Op {
        Op { what, n, root, dt: 0, o: 0, in_place: false, counts: vec![], misalign, seed: 0, dest: 0, src: 0, end: 0 }
    }
    fn reduce(what: u32, n: usize, dt: u32, o: u32, in_place: bool) -> Op {
        Op { dt, o, in_place, ..Op::data(what, n, 0, 0) }
    }
    fn is_reduction(&self) -> bool {
        matches!(self.what, host_op::REDUCE | host_op::REDUCESCATTER)
    }
    /// (dest, src) lengths in bytes on member `me` of a team of `size`.
    fn lens(&self, size: usize, me: usize) -> (usize, usize) {
        let sz = elem_size(self.dt);
        match self.what {
            host_op::SYNC => (0, 0),
            host_op::BARRIER => (8 * size, 0),
            host_op::BROADCAST => (self.n, self.n),
            host_op::FCOLLECT => (size * self.n, self.n),
            host_op::COLLECT => (self.counts.iter().sum(), self.counts[me]),
            host_op::ALLTOALL => (size * self.n, size * self.n),
            host_op::REDUCE => (self.n * sz, self.n * sz),
            _ => (self.n * sz, size * self.n * sz),
        }
    }
    /// Where this op's source starts relative to its destination when in place.
    fn in_place_src(&self, me: usize) -> usize {
        if self.what == host_op::FCOLLECT { me * self.n } else { 0 }
    }
}

/// Member `pe`'s source data of `op` (src_len bytes): the same on every PE that computes it.
fn src_data(op: &Op, size: usize, idx: usize, pe: usize) -> Vec<u8> {
    let (_, len) = op.lens(size, idx);
    let seed = mix(op.seed, pe as u64 + 1);
    if !op.is_reduction() {
        return fill(seed, len);
    }
    let mut rng = Rng::new(seed);
    let count = len / elem_size(op.dt);
    let mut out = Vec::with_capacity(len);
    for _ in 0..count {
        match op.dt {
            dtype::I8..=dtype::U64 => out.extend_from_slice(&rng.next().to_le_bytes()[..elem_size(op.dt)]),
            dtype::F16 => out.extend_from_slice(&no_neg_zero(F16::from_f32(rng.f32()).0).to_le_bytes()),
            dtype::BF16 => out.extend_from_slice(&no_neg_zero(Bf16::from_f32(rng.f32()).0).to_le_bytes()),
            dtype::F32 => out.extend_from_slice(&rng.f32().to_le_bytes()),
            dtype::F64 => out.extend_from_slice(&rng.f64().to_le_bytes()),
            _ => {
                // Few distinct values and locations, so that ties (the smaller location wins) occur.
                out.extend_from_slice(&(rng.below(6) as f64).to_le_bytes());
                out.extend_from_slice(&(rng.below(20) as f64).to_le_bytes());
            }
        }
    }
    out
}
fn no_neg_zero(bits: u16) -> u16 {
    if bits == 0x8000 { 0 } else { bits }
}

/// Elements of the reduction model: read from and written to little-endian bytes, combined as the
/// operator says (floats: min/max keep the first of equal values; half types compute in f32 and round
/// back after every step).
trait El: Copy {
    const SZ: usize;
    fn read(b: &[u8]) -> Self;
    fn write(self, out: &mut Vec<u8>);
    fn comb(self, o: u32, b: Self) -> Self;
}
macro_rules! int_el {
    ($($t:ty),*) => {$(
        impl El for $t {
            const SZ: usize = std::mem::size_of::<$t>();
            fn read(b: &[u8]) -> $t { <$t>::from_le_bytes(b.try_into().unwrap()) }
            fn write(self, out: &mut Vec<u8>) { out.extend_from_slice(&self.to_le_bytes()) }
            fn comb(self, o: u32, b: $t) -> $t {
                match o {
                    op::AND => self & b,
                    op::OR => self | b,
                    op::XOR => self ^ b,
                    op::MIN => self.min(b),
                    op::MAX => self.max(b),
                    op::SUM => self.wrapping_add(b),
                    op::PROD => self.wrapping_mul(b),
                    _ => die(format!("model: operator {o} on an integer")),
                }
            }
        }
    )*};
}
int_el!(i8, i16, i32, i64, u8, u16, u32, u64);
fn fcomb<F: Copy + PartialOrd + std::ops::Add<Output = F> + std::ops::Mul<Output = F>>(a: F, o: u32, b: F) -> F {
    match o {
        op::MIN => if b < a { b } else { a },
        op::MAX => if b > a { b } else { a },
        op::SUM => a + b,
        op::PROD => a * b,
        _ => die(format!("model: operator {o} on a float")),
    }
}
impl El for f32 {
    const SZ: usize = 4;
    fn read(b: &[u8]) -> f32 { f32::from_le_bytes(b.try_into().unwrap()) }
    fn write(self, out: &mut Vec<u8>) { out.extend_from_slice(&self.to_le_bytes()) }
    fn comb(self, o: u32, b: f32) -> f32 { fcomb(self, o, b) }
}
impl El for f64 {
    const SZ: usize = 8;
    fn read(b: &[u8]) -> f64 { f64::from_le_bytes(b.try_into().unwrap()) }
    fn write(self, out: &mut Vec<u8>) { out.extend_from_slice(&self.to_le_bytes()) }
    fn comb(self, o: u32, b: f64) -> f64 { fcomb(self, o, b) }
}
impl El for F16 {
    const SZ: usize = 2;
    fn read(b: &[u8]) -> F16 { F16(u16::from_le_bytes(b.try_into().unwrap())) }
    fn write(self, out: &mut Vec<u8>) { out.extend_from_slice(&self.0.to_le_bytes()) }
    fn comb(self, o: u32, b: F16) -> F16 { F16::from_f32(fcomb(self.to_f32(), o, b.to_f32())) }
}
impl El for Bf16 {
    const SZ: usize = 2;
    fn read(b: &[u8]) -> Bf16 { Bf16(u16::from_le_bytes(b.try_into().unwrap())) }
    fn write(self, out: &mut Vec<u8>) { out.extend_from_slice(&self.0.to_le_bytes()) }
    fn comb(self, o: u32, b: Bf16) -> Bf16 { Bf16::from_f32(fcomb(self.to_f32(), o, b.to_f32())) }
}
impl El for DoubleLoc {
    const SZ: usize = 16;
    fn read(b: &[u8]) -> DoubleLoc { DoubleLoc { value: f64::read(&b[..8]), loc: f64::read(&b[8..]) } }
    fn write(self, out: &mut Vec<u8>) {
        self.value.write(out);
        self.loc.write(out);
    }
    fn comb(self, _o: u32, b: DoubleLoc) -> DoubleLoc {
        // maxloc: the larger value; of equal values, the smaller location.
        if b.value > self.value || (b.value == self.value && b.loc < self.loc) { b } else { self }
    }
}

/// Elements `first..first + n` of every member's source combined in member order.
fn reduce_model<T: El>(srcs: &[Vec<u8>], first: usize, n: usize, o: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * T::SZ);
    for e in first..first + n {
        let at = |s: &Vec<u8>| T::read(&s[e * T::SZ..(e + 1) * T::SZ]);
        let mut acc = at(&srcs[0]);
        for s in &srcs[1..] {
            acc = acc.comb(o, at(s));
        }
        acc.write(&mut out);
    }
    out
}

/// What member `idx` of team `t` must hold in its destination after `op`.
fn expected(op: &Op, t: &TeamM, idx: usize) -> Vec<u8> {
    let size = t.size();
    let src = |j: usize| src_data(op, size, j, t.members[j]);
    match op.what {
        host_op::SYNC => vec![],
        host_op::BARRIER => t.members.iter().flat_map(|&pe| mix(op.seed, pe as u64).to_le_bytes()).collect(),
        host_op::BROADCAST => src(op.root),
        host_op::FCOLLECT | host_op::COLLECT => (0..size).flat_map(src).collect(),
        host_op::ALLTOALL => (0..size).flat_map(|j| src(j)[idx * op.n..(idx + 1) * op.n].to_vec()).collect(),
        _ => {
            let srcs: Vec<Vec<u8>> = (0..size).map(src).collect();
            let first = if op.what == host_op::REDUCESCATTER { idx * op.n } else { 0 };
            macro_rules! go {
                ($($d:ident => $t:ty),*) => {
                    match op.dt {
                        $(dtype::$d => reduce_model::<$t>(&srcs, first, op.n, op.o),)*
                        _ => reduce_model::<DoubleLoc>(&srcs, first, op.n, op.o),
                    }
                };
            }
            go!(I8 => i8, I16 => i16, I32 => i32, I64 => i64, U8 => u8, U16 => u16, U32 => u32, U64 => u64, F16 => F16, BF16 => Bf16, F32 => f32, F64 => f64)
        }
    }
}

// ---------------------------------------------------------------- collectives: running cases

/// The arena all collective cases carve their buffers from: one symmetric allocation per process.
static ARENA: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
const ARENA_BYTES: usize = 12 << 20;
const SLACK: usize = 16;

fn arena() -> *mut u8 {
    let a = ARENA.load(std::sync::atomic::Ordering::Relaxed);
    if a == 0 {
        die("coll: no arena allocated");
    }
    a as *mut u8
}
fn with_arena(f: impl FnOnce()) {
    let a = ck(rshmem::malloc(ARENA_BYTES));
    ARENA.store(a as usize, std::sync::atomic::Ordering::Relaxed);
    f();
    ARENA.store(0, std::sync::atomic::Ordering::Relaxed);
    ck(rshmem::free(a));
}

fn align_up(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

/// Runs `ops` on team `t` (this PE must be a member) in `mode`, in groups that fit the arena: each
/// group is laid out, its sources written and destinations poisoned, then a barrier of the team, the
/// calls (one kernel for all of them, or host calls), and the checks.
fn run_ops(c: &Ctx, t: &TeamM, mode: Mode, mut ops: Vec<Op>, seed: u64, what: &str) {
    if !t.is_member() {
        return;
    }
    let idx = t.index(c.me).unwrap();
    let size = t.size();
    for (k, op) in ops.iter_mut().enumerate() {
        op.seed = mix(seed, k as u64);
    }
    let mut k = 0;
    while k < ops.len() {
        // Lay out as many as fit (the kernel's table after them).
        let mut at = 0usize;
        let first = k;
        while k < ops.len() {
            let op = &mut ops[k];
            let (dl, sl) = op.lens(size, idx);
            // Destinations: room for every member's count of a collect (the sum is the same everywhere).
            let mut p = align_up(at, 16) + op.misalign;
            op.dest = p;
            if op.in_place {
                op.src = op.dest + op.in_place_src(idx);
                p += dl.max(op.in_place_src(idx) + sl) + SLACK;
            } else {
                p += dl + SLACK;
                p = align_up(p, 16) + op.misalign;
                op.src = p;
                // A collect's source has a different length on each member: room for the longest keeps
                // every later buffer at the same address on every member.
                p += op.counts.iter().copied().max().unwrap_or(sl).max(sl) + SLACK;
            }
            op.end = p;
            let table_end = align_up(p, 16) + 64 * (k + 1 - first);
            if table_end > ARENA_BYTES {
                if k == first {
                    die(format!("coll: case {op:?} does not fit the {ARENA_BYTES}-byte arena"));
                }
                break;
            }
            at = p;
            k += 1;
        }
        run_group(c, t, mode, &ops[first..k], align_up(at, 16), &format!("{what}, cases {first}..{k}"));
    }
}

fn run_group(c: &Ctx, t: &TeamM, mode: Mode, ops: &[Op], table: usize, what: &str) {
    let idx = t.index(c.me).unwrap();
    let size = t.size();
    let a = arena();
    let used = table + 64 * ops.len();
    let poison = fill(mix(ops[0].seed, 0xbad), used);
    let mut image = poison.clone();
    let srcs: Vec<Vec<u8>> = ops.iter().map(|op| src_data(op, size, idx, c.me)).collect();
    for (op, s) in ops.iter().zip(&srcs) {
        image[op.src..op.src + s.len()].copy_from_slice(s);
    }
    let scope = |m: Mode| match m {
        Mode::Thread => 0u64,
        Mode::Warp => 1,
        _ => 2,
    };
    if mode != Mode::Host {
        for (k, op) in ops.iter().enumerate() {
            let (n, x) = match op.what {
                host_op::COLLECT => (op.counts[idx], 0),
                host_op::REDUCE | host_op::REDUCESCATTER => (op.n, op.dt as u64),
                host_op::BROADCAST => (op.n, op.root as u64),
                _ => (op.n, 0),
            };
            let e = [op.what as u64, scope(mode), t.handle as u64, a as u64 + op.dest as u64, a as u64 + op.src as u64, n as u64, x, op.o as u64];
            for (i, v) in e.iter().enumerate() {
                let o = table + 64 * k + 8 * i;
                image[o..o + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
    }
    super::put_bytes(a, &image);
    let ctx = |m: String| format!("coll: {} on {} (handle {}, members {:?}, this PE index {idx}), {what}: {m} ({})", what_name_mode(mode), t.name, t.handle, t.members, seed_note(c));
    t.team().barrier().unwrap_or_else(|e| die(ctx(format!("the barrier before the cases: {e}"))));
    let started = std::time::Instant::now();
    if mode == Mode::Host {
        for (k, op) in ops.iter().enumerate() {
            // SAFETY: every buffer lies in the arena (symmetric), at the lengths `lens` gives, which
            // are what the collective reads and writes.
            let r = unsafe { host_call(c, t, op, a, idx, k) };
            r.unwrap_or_else(|e| die(ctx(format!("{op:?}: {e}"))));
        }
    } else {
        run("k_coll", 1, c.threads, &[a as u64 + table as u64, ops.len() as u64]);
    }
    let took = started.elapsed();
    let got = super::get_bytes(a, used);
    for (k, op) in ops.iter().enumerate() {
        // Everything from the destination to the end of the op's buffers is what was written before
        // the call (poison, the source), except the destination's result.
        let want = if op.what == host_op::BARRIER && mode != Mode::Host { vec![] } else { expected(op, t, idx) };
        let mut region = image[op.dest..op.end].to_vec();
        region[..want.len()].copy_from_slice(&want);
        let d = &got[op.dest..op.end];
        let Some(i) = (0..region.len()).find(|&i| d[i] != region[i]) else { continue };
        if i < want.len() {
            let sz = if op.is_reduction() { elem_size(op.dt) } else { 1 };
            let e = i / sz;
            let differ = (0..want.len() / sz).filter(|&j| d[j * sz..(j + 1) * sz] != want[j * sz..(j + 1) * sz]).count();
            die(ctx(format!(
                "case {k} ({op:?}): element {e} of the destination is {:02x?}, expected {:02x?} ({differ} of {} elements differ)",
                &d[e * sz..(e + 1) * sz],
                &want[e * sz..(e + 1) * sz],
                want.len() / sz
            )));
        }
        let at = op.dest + i;
        let place = if at >= op.src && at < op.src + srcs[k].len() { format!("byte {} of the source changed", at - op.src) } else { format!("byte {} past the {}-byte result was written", i - want.len(), want.len()) };
        die(ctx(format!("case {k} ({op:?}): {place}")));
    }
    if std::env::var_os("RSHMEM_TEST_COLL_VERBOSE").is_some() {
        println!("PE {}: {} on {}: {} cases in {:.1} ms", c.me, what_name_mode(mode), t.name, ops.len(), took.as_secs_f64() * 1e3);
    }
}

fn what_name_mode(m: Mode) -> &'static str {
    match m {
        Mode::Thread => "device thread scope",
        Mode::Warp => "device warp scope",
        Mode::Block => "device block scope",
        Mode::Host => "host",
    }
}

/// One host call of `op`, the `k`-th of its list: through the typed API (reductions through the
/// type's own entry point), or for every third case the untyped `collective`, for every third the
/// `collective_on_stream` (on the CPU backend it runs at once; on GPUs on the default stream, then
/// waited for).
///
/// # Safety
/// The op's buffers lie in the arena `a` at the lengths the call reads and writes.
unsafe fn host_call(c: &Ctx, t: &TeamM, op: &Op, a: *mut u8, idx: usize, k: usize) -> rshmem::Result<()> {
    let team = t.team();
    let (dest, src) = (a.wrapping_add(op.dest), a.wrapping_add(op.src) as *const u8);
    if !k.is_multiple_of(3) && !matches!(op.what, host_op::SYNC | host_op::BARRIER) {
        let (n, x) = match op.what {
            host_op::COLLECT => (op.counts[idx], 0),
            host_op::REDUCE | host_op::REDUCESCATTER => (op.n, op.dt as u64),
            host_op::BROADCAST => (op.n, op.root as u64),
            _ => (op.n, 0),
        };
        // SAFETY: the caller's contract: symmetric buffers of the lengths the call uses.
        unsafe {
            return if k % 3 == 1 {
                hc::collective(op.what, t.handle, dest, src, n, x, op.o as u64)
            } else {
                hc::collective_on_stream(op.what, t.handle, dest, src, n, x, op.o as u64, std::ptr::null_mut())?;
                if rshmem::backend_name()? == "cuda" {
                    rshmem::stream::wait_default_stream("collective_on_stream (test)")?;
                }
                Ok(())
            };
        }
    }
    // SAFETY: for all calls below, the caller's contract: symmetric buffers of the lengths the call uses.
    unsafe {
        match op.what {
            host_op::SYNC => team.sync(),
            host_op::BARRIER => {
                // Puts before the barrier are complete and visible on every member after it.
                let v = mix(op.seed, c.me as u64).to_le_bytes();
                for &pe in &t.members {
                    rshmem::putmem(dest.wrapping_add(8 * idx), v.as_ptr(), 8, pe as i32)?;
                }
                team.barrier()
            }
            // Whole 8-byte elements through the typed API as u64, the rest as bytes.
            host_op::BROADCAST if op.n.is_multiple_of(8) && op.misalign == 0 => hc::broadcast::<u64>(team, dest as *mut u64, src as *const u64, op.n / 8, op.root as i32),
            host_op::BROADCAST => hc::broadcast::<u8>(team, dest, src, op.n, op.root as i32),
            host_op::FCOLLECT if op.n.is_multiple_of(8) && op.misalign == 0 => hc::fcollect::<u64>(team, dest as *mut u64, src as *const u64, op.n / 8),
            host_op::FCOLLECT => hc::fcollect::<u8>(team, dest, src, op.n),
            host_op::COLLECT => hc::collect::<u8>(team, dest, src, op.counts[idx]),
            host_op::ALLTOALL if op.n.is_multiple_of(8) && op.misalign == 0 => hc::alltoall::<u64>(team, dest as *mut u64, src as *const u64, op.n / 8),
            host_op::ALLTOALL => hc::alltoall::<u8>(team, dest, src, op.n),
            _ => {
                let scatter = op.what == host_op::REDUCESCATTER;
                let rop = [ReduceOp::And, ReduceOp::Or, ReduceOp::Xor, ReduceOp::Min, ReduceOp::Max, ReduceOp::Sum, ReduceOp::Prod, ReduceOp::MaxLoc][op.o as usize];
                macro_rules! go {
                    ($($d:ident => $t:ty),*) => {
                        match op.dt {
                            $(dtype::$d => if scatter {
                                hc::reducescatter::<$t>(team, rop, dest as *mut $t, src as *const $t, op.n)
                            } else {
                                hc::reduce::<$t>(team, rop, dest as *mut $t, src as *const $t, op.n)
                            },)*
                            _ => unreachable!(),
                        }
                    };
                }
                go!(I8 => i8, I16 => i16, I32 => i32, I64 => i64, U8 => u8, U16 => u16, U32 => u32, U64 => u64, F16 => F16, BF16 => Bf16, F32 => f32, F64 => f64, DOUBLE2 => DoubleLoc)
            }
        }
    }
}

/// A byte count for a data collective: small, odd, page-sized, and beyond the 16 KiB scratch.
fn pick_bytes(rng: &mut Rng) -> usize {
    rng.pick(&[1, 3, 8, 24, 100, 1000, 4096 + 5, 20_000])
}

/// The case list of one team and scope: every collective, every root, every reduction pair (`pairs`),
/// in-place and large variants, zero lengths.
fn full_cases(rng: &mut Rng, size: usize, pairs: &[(u32, u32)]) -> Vec<Op> {
    let mut v = vec![Op::data(host_op::SYNC, 0, 0, 0), Op::data(host_op::BARRIER, 0, 0, 0)];
    for root in 0..size {
        let mut b = Op::data(host_op::BROADCAST, pick_bytes(rng), root, rng.below(8));
        b.in_place = rng.chance(1, 3);
        v.push(b);
    }
    v.push(Op::data(host_op::BROADCAST, 0, rng.below(size), 0));
    v.push(Op::data(host_op::BROADCAST, 20_000, rng.below(size), 0));
    for what in [host_op::FCOLLECT, host_op::ALLTOALL] {
        v.push(Op::data(what, pick_bytes(rng), 0, rng.below(8)));
        v.push(Op::data(what, rng.range(1, 64), 0, 0));
        v.push(Op::data(what, 0, 0, 0));
    }
    v.push(Op { in_place: true, ..Op::data(host_op::FCOLLECT, rng.range(1, 300), 0, 0) });
    v.push(Op::data(host_op::FCOLLECT, 8 * 1024, 0, 0));
    // Large enough to land straight in `dest` (more than half a team's scratch): on the host and on
    // streams over mapped PEs these run their copies on a whole grid (`coll::push_grid`).
    v.push(Op::data(host_op::ALLTOALL, 6 * 1024, 0, 0));
    v.push(Op { in_place: true, ..Op::data(host_op::FCOLLECT, 9 * 1024, 0, 0) });
    for kind in 0..3 {
        let mut o = Op::data(host_op::COLLECT, 0, 0, rng.below(8));
        o.counts = (0..size)
            .map(|_| match kind {
                0 => rng.pick(&[0, 1, 5, 64, 333]),
                1 => rng.pick(&[0, 2000, 9000]),
                _ => 0,
            })
            .collect();
        v.push(o);
    }
    for &(dt, o) in pairs {
        for what in [host_op::REDUCE, host_op::REDUCESCATTER] {
            v.push(Op::reduce(what, rng.range(1, 33), dt, o, rng.chance(1, 4)));
        }
    }
    // Beyond the scratch (16 KiB: chunks of 8 KiB), in place and not, and zero lengths.
    let all = reduction_pairs();
    for (what, in_place) in [(host_op::REDUCE, true), (host_op::REDUCE, false), (host_op::REDUCESCATTER, true), (host_op::REDUCESCATTER, false)] {
        let (dt, o) = rng.pick(&all);
        let n = rng.range(20_000, 40_000) / elem_size(dt);
        v.push(Op::reduce(what, n, dt, o, in_place));
        v.push(Op::reduce(what, 0, dt, o, in_place));
    }
    v
}

/// A random case list of `count` cases (the property test).
fn random_cases(rng: &mut Rng, size: usize, count: usize) -> Vec<Op> {
    let pairs = reduction_pairs();
    (0..count)
        .map(|_| {
            let what = rng.pick(&[host_op::SYNC, host_op::BARRIER, host_op::BROADCAST, host_op::FCOLLECT, host_op::COLLECT, host_op::ALLTOALL, host_op::REDUCE, host_op::REDUCE, host_op::REDUCESCATTER, host_op::REDUCESCATTER]);
            let bytes = |rng: &mut Rng| if rng.chance(1, 8) { 0 } else if rng.chance(1, 6) { rng.range(10_000, 30_000) } else { rng.range(1, 700) };
            match what {
                host_op::REDUCE | host_op::REDUCESCATTER => {
                    let (dt, o) = rng.pick(&pairs);
                    let n = bytes(rng) / elem_size(dt).min(4);
                    Op::reduce(what, n.min(40_000 / elem_size(dt)), dt, o, rng.chance(1, 3))
                }
                host_op::COLLECT => {
                    let mut op = Op::data(what, 0, 0, rng.below(8));
                    op.counts = (0..size).map(|_| bytes(rng)).collect();
                    op
                }
                _ => {
                    let mut op = Op::data(what, bytes(rng), rng.below(size), rng.below(8));
                    op.in_place = matches!(what, host_op::BROADCAST | host_op::FCOLLECT) && rng.chance(1, 4);
                    op
                }
            }
        })
        .collect()
}

// ---------------------------------------------------------------- scenarios coll and coll_prop

pub fn coll_scenario(c: &Ctx) {
    with_arena(|| {
        let teams = make_teams(c);
        let pairs = reduction_pairs();
        let t0 = std::time::Instant::now();
        let mut cases = 0;
        for (r, t) in teams.iter().enumerate() {
            for (m, &mode) in MODES.iter().enumerate() {
                let mut rng = Rng::new(mix(c.seed, (r * 16 + m) as u64));
                let ops = full_cases(&mut rng, t.size().max(1), &pairs);
                if t.is_member() {
                    cases += ops.len();
                }
                run_ops(c, t, mode, ops, mix(c.seed, 1000 + (r * 16 + m) as u64), &format!("team {r}"));
            }
            ck(rshmem::barrier_all());
        }
        println!("PE {}: coll: {cases} collective calls on {} teams in {:.2} s", c.me, teams.iter().filter(|t| t.is_member()).count(), t0.elapsed().as_secs_f64());
        for t in teams.iter().skip(3) {
            destroy(c, t);
        }
    });
}

/// Seeded random cases: `RSHMEM_TEST_COLL_ITERS` iterations (default 40), each a random split of a
/// random parent, a random scope and 16 random collectives.
pub fn prop_scenario(c: &Ctx) {
    let iters: usize = std::env::var("RSHMEM_TEST_COLL_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(40);
    with_arena(|| {
        let w = world(c);
        let nd = node(c, TEAM_NODE);
        let (mut cases, mut shapes) = (0, std::collections::BTreeSet::new());
        for it in 0..iters {
            let mut rng = Rng::new(mix(c.seed, 0x9_0000 + it as u64));
            // The parent: the world, a node team, or a split of the world (made here, destroyed after).
            let mut made = Vec::new();
            let parent = match rng.below(5) {
                0 => nd.clone(),
                4 => node(c, TEAM_SHARED),
                1 => {
                    let p = w.size();
                    let stride = rng.range(1, p.max(2) - 1).min(p);
                    let start = rng.below(p);
                    let size = rng.range(1, (p - 1 - start) / stride + 1);
                    let t = split(c, &w, start, stride, size, None);
                    made.push(t.clone());
                    t
                }
                _ => w.clone(),
            };
            let mut teams = Vec::new();
            if parent.is_member() || parent.handle == TEAM_WORLD {
                if rng.chance(1, 3) {
                    let (x, y) = split_2d(c, &parent, rng.range(1, parent.size() + 1));
                    teams.push(x);
                    teams.push(y);
                } else {
                    let p = parent.size();
                    let stride = rng.range(1, p.max(2) - 1).min(p);
                    let start = rng.below(p);
                    let size = rng.range(1, (p - 1 - start) / stride + 1);
                    teams.push(split(c, &parent, start, stride, size, None));
                }
            }
            let mode = rng.pick(&MODES);
            for (k, t) in teams.iter().enumerate() {
                let mut trng = Rng::new(mix(rng.0, k as u64));
                let ops = random_cases(&mut trng, t.size(), 16);
                if t.is_member() {
                    cases += ops.len();
                    shapes.insert(t.members.clone());
                }
                run_ops(c, t, mode, ops, mix(c.seed, (it * 8 + k) as u64), &format!("coll_prop iteration {it} of {iters}"));
            }
            for t in teams.iter().chain(&made) {
                destroy(c, t);
            }
            ck(rshmem::barrier_all());
        }
        println!("PE {}: coll_prop: {iters} iterations, {cases} collective calls here on {} different teams", c.me, shapes.len());
    });
}

// ---------------------------------------------------------------- mismatch scenarios

/// Runs one device collective entry of k_coll: [what, scope, team, dest, src, n, a, b].
fn kernel_call(c: &Ctx, buf: *mut u8, e: [u64; 8]) {
    let tab = buf.wrapping_add(1 << 20);
    super::put_bytes(tab, &e.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>());
    run("k_coll", 1, c.threads, &[tab as u64, 1]);
}

/// Mismatched collectives: each PE enters what the scenario says; a device collective must stop the PE
/// with "collective mismatch: ..." (checked by the test), a host split must return an error naming
/// both PEs' calls or arguments. Reaching the end is the bug.
pub fn mismatch(c: &Ctx, which: &str) {
    let buf = ck(rshmem::calloc(2 << 20, 1));
    let b = buf as u64;
    let w = world(c);
    let me = c.me as u64;
    // A copy of the world made by a split: its collectives and splits run on the device path.
    let copy = split(c, &w, 0, 1, c.n, None);
    let ch = copy.handle as u64;
    ck(rshmem::barrier_all());
    let host = |r: rshmem::Result<()>| {
        if let Err(e) = r {
            die(format!("{which}: a host error instead of the device's mismatch message: {e}"));
        }
    };
    // SAFETY: for the host collectives below, buf is symmetric of 2 MiB, more than any call here uses.
    unsafe {
        match which {
            // Broadcast with a different root on each PE.
            "coll_mm_root" => host(hc::broadcast::<u8>(copy.team(), buf, buf.add(4096), 64, (c.me % 2) as i32)),
            // fcollect with a different count on each PE.
            "coll_mm_count" => host(hc::fcollect::<u8>(copy.team(), buf, buf.add(1 << 19), 8 * (c.me + 1))),
            // Reductions: a different count, operator, type.
            "coll_mm_reduce_count" => kernel_call(c, buf, [host_op::REDUCE as u64, 2, ch, b, b + 4096, 4 + me, dtype::I32 as u64, op::SUM as u64]),
            "coll_mm_op" => host(hc::reduce::<i32>(copy.team(), if c.me == 0 { ReduceOp::Sum } else { ReduceOp::Max }, buf as *mut i32, buf.add(4096) as *const i32, 16)),
            "coll_mm_type" => {
                let dt = if c.me == 0 { dtype::F32 } else { dtype::I32 };
                kernel_call(c, buf, [host_op::REDUCESCATTER as u64, 0, ch, b, b + 4096, 16, dt as u64, op::SUM as u64])
            }
            // PE 0 in a broadcast, the others in an fcollect of the same team (device, warp scope).
            "coll_mm_kind" => {
                let what = if c.me == 0 { host_op::BROADCAST } else { host_op::FCOLLECT };
                kernel_call(c, buf, [what as u64, 1, ch, b, b + (1 << 19), 64, 0, 0])
            }
            // PE 0 in a sync of the world team, the others in a reduction of it (block scope).
            "coll_mm_sync_reduce" => {
                let what = if c.me == 0 { host_op::SYNC } else { host_op::REDUCE };
                kernel_call(c, buf, [what as u64, 2, TEAM_WORLD as u64, b, b + 4096, 8, dtype::U64 as u64, op::SUM as u64])
            }
            // PE 0 splits the copy of the world, the others enter its barrier.
            "coll_mm_split_barrier" => {
                if c.me == 0 {
                    let _ = copy.team().split_strided(0, 1, 1);
                } else {
                    host(copy.team().barrier());
                }
            }
            // A split of the copy with different arguments on PE 0 (device agreement).
            "coll_mm_split_args_team" => {
                let _ = copy.team().split_strided(0, 1, if c.me == 0 { 1 } else { c.n as i32 });
            }
            // PE 0 splits the copy of the world (a device agreement) while the others are in
            // barrier_all (a host barrier): neither side can see the other's call.
            "coll_mm_split_team_barrier_all" => {
                if c.me == 0 {
                    let _ = copy.team().split_strided(0, 1, 1);
                } else {
                    ck(rshmem::barrier_all());
                }
            }
            // PE 0 splits the world while the others are in barrier_all: a host error naming both.
            "coll_mm_split_barrier_all" => {
                let r = if c.me == 0 { Team::WORLD.split_strided(0, 1, 1).map(|_| ()) } else { rshmem::barrier_all() };
                match r {
                    Ok(()) => die(format!("{which}: team_split on PE 0 against barrier_all on the others succeeded")),
                    Err(e) => {
                        let m = e.message();
                        if !(m.contains("rshmem_team_split_strided") && m.contains("rshmem_barrier_all")) {
                            die(format!("{which}: the error does not name both calls: {m}"));
                        }
                        println!("PE {}: expected error: {m}", c.me);
                        println!("PE {}: {which} ok", c.me);
                        std::process::exit(0);
                    }
                }
            }
            // A split of the world with different arguments on PE 0: an error on every PE naming both
            // PEs' arguments; no team is made and the job goes on.
            "coll_mm_split_args" => {
                let start = if c.me == 0 { 1 } else { 0 };
                match Team::WORLD.split_strided(start, 1, 1) {
                    Ok(t) => die(format!("{which}: a split with different arguments gave {t:?}")),
                    Err(e) => {
                        let m = e.message().to_string();
                        println!("PE {}: expected error: {m}", c.me);
                        if !(m.contains("different arguments") && m.contains("start 1, stride 1, size 1") && m.contains("start 0, stride 1, size 1")) {
                            die(format!("{which}: the error does not name both PEs' arguments: {m}"));
                        }
                    }
                }
                let again = split(c, &w, 0, 1, c.n, None);
                ck(again.team().barrier());
                destroy(c, &again);
                destroy(c, &copy);
                ck(rshmem::free(buf));
                println!("PE {}: {which} ok", c.me);
                return;
            }
            // PE 0 syncs the world team, the others the copy: different teams cannot see each other;
            // RSHMEM_WAIT_TIMEOUT must end it naming the call.
            "coll_mm_teams" => {
                let t = if c.me == 0 { Team::WORLD } else { copy.team() };
                host(t.sync());
            }
            // A collective on a destroyed team: the host returns an error; a kernel stops naming it.
            "coll_bad_team" => {
                let h = copy.handle;
                destroy(c, &copy);
                match hc::fcollect::<u8>(Team(h), buf, buf.add(4096), 8) {
                    Ok(()) => die(format!("{which}: a host fcollect on the destroyed team {h} succeeded")),
                    Err(e) if e.message().contains("does not exist") => println!("PE {}: expected error: {e}", c.me),
                    Err(e) => die(format!("{which}: unclear error: {e}")),
                }
                kernel_call(c, buf, [host_op::BROADCAST as u64, 0, h as u64, b, b + 4096, 8, 0, 0]);
            }
            other => die(format!("unknown mismatch scenario {other:?}")),
        }
    }
    die(format!("{which}: the mismatched collective completed"));
}
