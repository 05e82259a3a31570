//! The pure parsers of configuration values that several layers share: the env table's checks
//! (`config::env`) and the layers that read the values (bootstrap, probes, transports) call the same
//! function, so a value the check accepts is a value its reader understands. Nothing here does I/O.

// ------------------------------------------------------------------ hex and the job key

/// Bytes from hex digits (either case, two per byte); None for an odd length or a non-hex digit.
pub fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

/// Lowercase hex digits of `b`, two per byte (what [`decode_hex`] reads back).
pub fn encode_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// RSHMEM_JOB_KEY's value as a key: 32 hex digits, not all zero. The one decoder of it (the env table's
/// check and the bootstrap use it).
pub fn decode_job_key(v: &str) -> std::result::Result<[u8; 16], String> {
    let bad = || {
        format!(
            "must be 32 hex digits (got {} characters; make one with: od -An -tx1 -N16 /dev/urandom | tr -d ' \\n')",
            v.chars().count()
        )
    };
    let key: [u8; 16] = decode_hex(v).ok_or_else(bad)?.try_into().map_err(|_| bad())?;
    if key == [0; 16] {
        return Err("is all zeros, which is no secret: use a random key".into());
    }
    Ok(key)
}

// ------------------------------------------------------------------ addresses

/// Why `addr` is not host:port, if it is not (the env table's check uses it too).
pub fn addr_syntax(addr: &str) -> std::result::Result<(), &'static str> {
    let (host, port) = addr.rsplit_once(':').ok_or("no port")?;
    if host.is_empty() {
        return Err("no host");
    }
    match port.parse::<u16>() {
        Ok(p) if p != 0 => Ok(()),
        _ => Err("the port must be 1 to 65535"),
    }
}

// ------------------------------------------------------------------ RSHMEM_REMOTE_TRANSPORT

/// The transport chosen for PEs on other nodes (`RSHMEM_REMOTE_TRANSPORT`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Remote {
    /// The default: for a job with PEs on other nodes, `ibgda` on a NIC that passes every check, else
    /// `proxy`; nothing for a single-node job (`transport::select::choose_remote` decides).
    Auto,
    /// PEs on other nodes are not reachable; device calls to them fail naming the PE.
    None,
    /// A CPU proxy thread per PE carries requests over TCP to the peer's proxy.
    Proxy,
    /// GPU threads post mlx5 work requests to the NIC (or to rshmem's emulated NIC) themselves.
    Ibgda,
}

/// The values `RSHMEM_REMOTE_TRANSPORT` takes, for messages and `rshmrun --info`.
pub const REMOTE_VALUES: &str = "auto, none, proxy or ibgda";

/// Parses a `RSHMEM_REMOTE_TRANSPORT` value (unset: `auto`). Case-insensitive, surrounding blanks
/// ignored; anything else is an error saying what is expected.
pub fn parse_remote(v: Option<&str>) -> std::result::Result<Remote, String> {
    match v.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        None | Some("auto") => Ok(Remote::Auto),
        Some("none") => Ok(Remote::None),
        Some("proxy") => Ok(Remote::Proxy),
        Some("ibgda") => Ok(Remote::Ibgda),
        Some(other) => Err(format!("{other:?} is not a transport: expected {REMOTE_VALUES}")),
    }
}

// ------------------------------------------------------------------ RSHMEM_IB_HCA

/// `RSHMEM_IB_HCA`: which RDMA devices (and ports) IBGDA may use. Comma-separated `name[:port]`
/// entries (`mlx5_0:1,mlx5_3`); a leading `^` makes it an exclusion list (`^mlx5_2`). Names match
/// exactly. Unset: every device.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct HcaList {
    /// `^`: the entries are excluded, everything else is allowed.
    pub exclude: bool,
    /// (device, port: None = every port).
    pub entries: Vec<(String, Option<u32>)>,
}

impl HcaList {
    /// Whether port `port` of device `dev` may be used.
    pub fn allows(&self, dev: &str, port: u32) -> bool {
        if self.entries.is_empty() {
            return true;
        }
        let listed = self.entries.iter().any(|(d, p)| d == dev && p.is_none_or(|p| p == port));
        listed != self.exclude
    }
    /// Whether the list keeps any port of device `dev` (an exclusion of some ports keeps the others).
    pub fn allows_device(&self, dev: &str) -> bool {
        if self.entries.is_empty() {
            return true;
        }
        if self.exclude {
            !self.entries.iter().any(|(d, p)| d == dev && p.is_none())
        } else {
            self.entries.iter().any(|(d, _)| d == dev)
        }
    }
}

/// Parses a `RSHMEM_IB_HCA` value (see [`HcaList`]); `Err` says what is expected.
pub fn parse_hca_list(v: &str) -> std::result::Result<HcaList, String> {
    const EXPECTED: &str = "expected RDMA device names with an optional :port, comma-separated (mlx5_0:1,mlx5_1), or ^ and such a list to exclude them (^mlx5_2)";
    let v = v.trim();
    let (exclude, list) = match v.strip_prefix('^') {
        Some(rest) => (true, rest.trim()),
        None => (false, v),
    };
    let mut entries = Vec::new();
    for item in list.split(',') {
        let item = item.trim();
        let (name, port) = match item.split_once(':') {
            Some((n, p)) => match p.trim().parse::<u32>() {
                Ok(p) if p >= 1 => (n.trim(), Some(p)),
                _ => return Err(format!("{EXPECTED}; {item:?} has a bad port")),
            },
            None => (item, None),
        };
        if name.is_empty() || name.len() > 64 || !name.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) {
            return Err(format!("{EXPECTED}; {item:?} is not a device name"));
        }
        entries.push((name.to_string(), port));
    }
    Ok(HcaList { exclude, entries })
}

/// The `RSHMEM_IB_HCA` check for `crate::config::env::VARS`.
pub fn check_hca_list(v: &str) -> std::result::Result<(), String> {
    parse_hca_list(v).map(|_| ())
}
