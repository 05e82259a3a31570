//! `--bind-to core`: each PE started on this host gets its own share of the CPUs rshmrun may use.
//!
//! Unbound, the kernel moves a job's threads between CPUs as it likes: with more busy threads than
//! CPUs (the CPU backend runs each block as a thread, beside every PE's proxy threads), two PEs' hot
//! threads end up on one CPU at times while another idles, and a measurement swings by 2x from run to
//! run. Bound, every PE keeps its share. mpirun binds by default; rshmrun binds only when asked, since
//! a GPU host's best binding follows its PCIe layout (docs/tuning.md).

use std::io;

/// What `--bind-to` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BindTo {
    /// The PEs inherit rshmrun's CPUs (the default).
    None,
    /// Each PE gets an equal, contiguous share of rshmrun's CPUs, in PE order.
    Core,
}

/// The CPUs this process may run on, in increasing order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is a plain bit array; all zeros is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live cpu_set_t of the size passed; pid 0 is this thread.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: CPU_ISSET reads one bit of the set for an index below CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

/// Splits `allowed` among `n` PEs: contiguous shares in PE order, the first `allowed.len() % n` PEs
/// with one CPU more, so that every CPU is used; when PEs outnumber CPUs, PE `i` gets CPU `i % len`
/// alone (PEs then share CPUs, as few as possible each). Empty when `allowed` is.
pub fn shares(allowed: &[usize], n: usize) -> Vec<Vec<usize>> {
    if allowed.is_empty() || n == 0 {
        return Vec::new();
    }
    if n >= allowed.len() {
        return (0..n).map(|i| vec![allowed[i % allowed.len()]]).collect();
    }
    let mut s = vec![Vec::new(); n];
    for (i, &c) in allowed.iter().enumerate() {
        s[crate::split::block_of(i as u32, allowed.len() as u32, n as u32).0 as usize].push(c);
    }
    s
}

/// The kernel's form of a set of CPUs (each below CPU_SETSIZE).
pub fn cpu_set(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: all zeros is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        debug_assert!(c < libc::CPU_SETSIZE as usize);
        // SAFETY: CPU_SET writes one bit of the set for an index below CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    set
}

/// `cpus` as the kernel's lists print them: "0-3,8".
pub fn list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}-{}", cpus[i], cpus[j]) } else { cpus[i].to_string() });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_use_every_cpu_once_in_pe_order() {
        let cpus: Vec<usize> = (0..16).collect();
        assert_eq!(shares(&cpus, 2), vec![(0..8).collect::<Vec<_>>(), (8..16).collect()]);
        let s = shares(&cpus, 3);
        assert_eq!(s.iter().map(Vec::len).collect::<Vec<_>>(), [6, 5, 5]);
        assert_eq!(s.concat(), cpus);
        // Gaps in the allowed set are kept out of every share.
        assert_eq!(shares(&[0, 2, 4, 6], 2), vec![vec![0, 2], vec![4, 6]]);
    }

    #[test]
    fn more_pes_than_cpus_share_them_round_robin() {
        assert_eq!(shares(&[4, 5], 5), vec![vec![4], vec![5], vec![4], vec![5], vec![4]]);
        assert_eq!(shares(&[1], 1), vec![vec![1]]);
        assert!(shares(&[], 3).is_empty());
    }

    #[test]
    fn lists_read_as_the_kernel_prints_them() {
        assert_eq!(list(&[0, 1, 2, 3, 8]), "0-3,8");
        assert_eq!(list(&[5]), "5");
        assert_eq!(list(&[0, 2, 3]), "0,2-3");
        let set = cpu_set(&[0, 3]);
        // SAFETY: CPU_ISSET reads one bit for an index below CPU_SETSIZE.
        assert!(unsafe { libc::CPU_ISSET(3, &set) && !libc::CPU_ISSET(1, &set) });
    }
}
