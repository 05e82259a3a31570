//! Small readers of sysfs and procfs under a root directory ("/" on a host; tests build synthetic
//! trees).

use std::path::{Path, PathBuf};

/// A sysfs/procfs attribute, trimmed; None when absent or unreadable.
pub(crate) fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// `root` joined with an absolute-looking path ("/sys/class/infiniband" → root/sys/class/infiniband).
pub(crate) fn under(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// Names of the entries of a directory, in natural order (mlx5_2 before mlx5_10).
pub(crate) fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort_by_key(|s| natural_key(s));
    v
}

pub(crate) fn natural_key(s: &str) -> (String, u64, String) {
    let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (head, tail) = s.split_at(s.len() - digits);
    (head.to_string(), tail.parse().unwrap_or(0), s.to_string())
}

/// Whether `s` looks like a PCI address, `DDDD:BB:DD.F` (hex, domain of 4 or more digits).
pub(crate) fn is_bdf(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    let hex = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_hexdigit());
    if parts.len() != 3 || parts[0].len() < 4 || !hex(parts[0]) || parts[1].len() != 2 || !hex(parts[1]) {
        return false;
    }
    match parts[2].split_once('.') {
        Some((dev, func)) => dev.len() == 2 && hex(dev) && func.len() == 1 && func.chars().all(|c| ('0'..='7').contains(&c)),
        None => false,
    }
}

/// A sysfs NUMA node: None for "-1" (unknown, as on one-socket hosts and most VMs).
pub(crate) fn numa_of(dev_dir: &Path) -> Option<u32> {
    read(&dev_dir.join("numa_node")).and_then(|s| s.parse::<i64>().ok()).and_then(|n| u32::try_from(n).ok())
}
