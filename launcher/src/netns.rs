//! Simulated nodes on one machine: one network namespace per node, joined by a bridge, so that traffic
//! between PEs of different nodes crosses real (virtual) interfaces as it would between hosts.
//!
//! Layout, for N nodes:
//! ```text
//!   switch namespace:   bridge "rsbr0"  ── veth "n0" ── "eth0" 10.99.0.1/24  (node 0's namespace)
//!                                       ── veth "n1" ── "eth0" 10.99.0.2/24  (node 1's namespace) ...
//! ```
//! Every namespace, the switch's included, is private: none is the caller's own and none has a name in
//! the file system. A namespace lives while a descriptor refers to it (or a process runs in it), so the
//! whole network disappears by itself when rshmrun and its PEs are gone, on every exit path, SIGKILL
//! included; there is nothing to clean up and nothing left behind.
//!
//! Links and addresses are made with rtnetlink messages (the GPU machines have no `ip` command). The
//! message headers are `bytemuck` Pod structs, each defined once here.
//!
//! Needs CAP_SYS_ADMIN and CAP_NET_ADMIN (root): [`SimNet::new`] says so plainly when they are missing.

use bytemuck::{Pod, Zeroable};
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The subnet every simulated node has an address in: node i is 10.99.0.(i+1)/24.
pub const SUBNET: [u8; 3] = [10, 99, 0];
const PREFIX_LEN: u8 = 24;
const BRIDGE: &str = "rsbr0";
/// The node side of each veth pair.
pub const NODE_IFNAME: &str = "eth0";
/// At most this many nodes fit in the /24 (addresses .1 to .254).
pub const MAX_NODES: usize = 254;

/// One simulated node: its namespace and its address.
pub struct Node {
    ns: OwnedFd,
    pub addr: Ipv4Addr,
}

impl Node {
    /// The namespace descriptor (for `setns` in a PE's child process before exec).
    pub fn ns_fd(&self) -> RawFd {
        self.ns.as_raw_fd()
    }

    /// The namespace, for [`in_netns`].
    pub fn ns(&self) -> &OwnedFd {
        &self.ns
    }
}

/// The simulated network of one job.
pub struct SimNet {
    /// Keeps the switch namespace (and so the bridge) alive.
    _switch: OwnedFd,
    pub nodes: Vec<Node>,
}

impl SimNet {
    /// Makes `n` node namespaces joined by a bridge in a private switch namespace.
    pub fn new(n: usize) -> io::Result<SimNet> {
        if n == 0 || n > MAX_NODES {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{n} simulated nodes: between 1 and {MAX_NODES} fit in {}.{}.{}.0/{PREFIX_LEN}", SUBNET[0], SUBNET[1], SUBNET[2])));
        }
        let switch = new_netns().map_err(|e| needs_root(e, "create a network namespace"))?;
        let nodes: Vec<Node> = (0..n)
            .map(|i| {
                Ok(Node { ns: new_netns().map_err(|e| needs_root(e, "create a network namespace"))?, addr: node_addr(i) })
            })
            .collect::<io::Result<_>>()?;
        in_netns(&switch, || -> io::Result<()> {
            let nl = Netlink::open()?;
            nl.new_link(BRIDGE, "bridge", None)?;
            nl.set_up(BRIDGE)?;
            for (i, node) in nodes.iter().enumerate() {
                let host_side = format!("n{i}");
                nl.new_link(&host_side, "veth", Some((NODE_IFNAME, node.ns.as_raw_fd())))?;
                nl.set_master(&host_side, BRIDGE)?;
                nl.set_up(&host_side)?;
            }
            Ok(())
        })
        .map_err(|e| context(e, "setting up the bridge of the simulated nodes"))?;
        for (i, node) in nodes.iter().enumerate() {
            in_netns(&node.ns, || -> io::Result<()> {
                let nl = Netlink::open()?;
                nl.set_up("lo")?;
                nl.set_up(NODE_IFNAME)?;
                nl.add_addr(NODE_IFNAME, node.addr, PREFIX_LEN)
            })
            .map_err(|e| context(e, &format!("setting up simulated node {i}")))?;
        }
        Ok(SimNet { _switch: switch, nodes })
    }
}

/// The address of simulated node `i`.
pub fn node_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], (i + 1) as u8)
}

fn needs_root(e: io::Error, what: &str) -> io::Error {
    if e.raw_os_error() == Some(libc::EPERM) {
        io::Error::new(e.kind(), format!("cannot {what}: {e} (simulated nodes with --netns need root: CAP_SYS_ADMIN and CAP_NET_ADMIN)"))
    } else {
        context(e, &format!("cannot {what}"))
    }
}

fn context(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// A new, empty network namespace, held by the returned descriptor.
fn new_netns() -> io::Result<OwnedFd> {
    // unshare and setns of the network namespace act on the calling thread alone, so a short-lived
    // thread makes the namespace and opens it; the caller's threads stay where they are.
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: unshare takes no pointers; it moves only this thread into a new namespace.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            let f = std::fs::File::open("/proc/thread-self/ns/net")?;
            Ok(OwnedFd::from(f))
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("namespace thread panicked")))
    })
}

/// Runs `f` on a thread that has joined namespace `ns`: sockets it makes belong to that namespace.
pub fn in_netns<T: Send>(ns: &OwnedFd, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            enter_netns(ns.as_raw_fd())?;
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("namespace thread panicked")))
    })
}

/// Moves the calling thread into network namespace `fd` (also usable in a child between fork and exec:
/// it calls only async-signal-safe `setns`).
pub fn enter_netns(fd: RawFd) -> io::Result<()> {
    // SAFETY: setns takes a descriptor and a flag; an invalid descriptor is reported as EBADF/EINVAL.
    if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

// ---- rtnetlink --------------------------------------------------------------------------------------

/// `struct nlmsghdr`.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
struct NlMsgHdr {
    len: u32,
    ty: u16,
    flags: u16,
    seq: u32,
    pid: u32,
}

/// `struct ifinfomsg`.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct IfInfoMsg {
    family: u8,
    pad: u8,
    ty: u16,
    index: i32,
    flags: u32,
    change: u32,
}

/// `struct ifaddrmsg`.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct IfAddrMsg {
    family: u8,
    prefixlen: u8,
    flags: u8,
    scope: u8,
    index: u32,
}

/// `struct rtattr` (also `struct nlattr`: same layout).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct RtAttr {
    len: u16,
    ty: u16,
}

const _: () = assert!(std::mem::size_of::<NlMsgHdr>() == 16);
const _: () = assert!(std::mem::size_of::<IfInfoMsg>() == 16);
const _: () = assert!(std::mem::size_of::<IfAddrMsg>() == 8);
const _: () = assert!(std::mem::size_of::<RtAttr>() == 4);

// Values from linux/rtnetlink.h, linux/if_link.h, linux/veth.h, linux/if_addr.h.
const RTM_NEWLINK: u16 = 16;
const RTM_NEWADDR: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const IFLA_IFNAME: u16 = 3;
const IFLA_MASTER: u16 = 10;
const IFLA_LINKINFO: u16 = 18;
const IFLA_NET_NS_FD: u16 = 28;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_INFO_DATA: u16 = 2;
const VETH_INFO_PEER: u16 = 1;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const NLA_F_NESTED: u16 = 0x8000;

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One request being built: header, fixed part, attributes (nested ones patched when closed).
struct Msg {
    buf: Vec<u8>,
}

impl Msg {
    fn new(ty: u16, flags: u16, fixed: &[u8]) -> Msg {
        let hdr = NlMsgHdr { len: 0, ty, flags: NLM_F_REQUEST | NLM_F_ACK | flags, seq: 1, pid: 0 };
        let mut buf = bytemuck::bytes_of(&hdr).to_vec();
        buf.extend_from_slice(fixed);
        buf.resize(align4(buf.len()), 0);
        Msg { buf }
    }
    fn attr(&mut self, ty: u16, data: &[u8]) -> &mut Msg {
        let a = RtAttr { len: (4 + data.len()) as u16, ty };
        self.buf.extend_from_slice(bytemuck::bytes_of(&a));
        self.buf.extend_from_slice(data);
        self.buf.resize(align4(self.buf.len()), 0);
        self
    }
    fn attr_str(&mut self, ty: u16, s: &str) -> &mut Msg {
        let mut b = s.as_bytes().to_vec();
        b.push(0);
        self.attr(ty, &b)
    }
    /// Opens a nested attribute; returns where its header is, for `close`.
    fn open(&mut self, ty: u16) -> usize {
        let at = self.buf.len();
        self.attr(ty | NLA_F_NESTED, &[]);
        at
    }
    fn close(&mut self, at: usize) {
        let len = (self.buf.len() - at) as u16;
        self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
    }
    fn fixed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        self.buf.resize(align4(self.buf.len()), 0);
    }
    fn finish(mut self) -> Vec<u8> {
        let len = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&len.to_ne_bytes());
        self.buf
    }
}

/// An rtnetlink socket in the namespace of the thread that opened it.
struct Netlink {
    fd: OwnedFd,
}

impl Netlink {
    fn open() -> io::Result<Netlink> {
        // SAFETY: plain socket(2) call; the descriptor is owned right away.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor nobody else owns.
        Ok(Netlink { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Sends one request and waits for its acknowledgement; a kernel error comes back as that errno.
    fn request(&self, what: &str, msg: Vec<u8>) -> io::Result<()> {
        // SAFETY: msg is a valid buffer of msg.len() bytes; the kernel address is zeroed (pid 0).
        let sent = unsafe {
            let mut addr: libc::sockaddr_nl = std::mem::zeroed();
            addr.nl_family = libc::AF_NETLINK as u16;
            libc::sendto(
                self.fd.as_raw_fd(),
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if sent < 0 {
            return Err(context(io::Error::last_os_error(), what));
        }
        let mut buf = vec![0u8; 8192];
        loop {
            // SAFETY: buf is writable for its length.
            let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(context(e, what));
            }
            match parse_ack(&buf[..n as usize]) {
                Ok(Some(0)) => return Ok(()),
                Ok(Some(errno)) => return Err(context(io::Error::from_raw_os_error(errno), what)),
                Ok(None) => continue,
                Err(msg) => return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{what}: {msg}"))),
            }
        }
    }

    /// Creates link `name` of `kind`; for a veth, `peer` names the other end and the namespace it goes to.
    fn new_link(&self, name: &str, kind: &str, peer: Option<(&str, RawFd)>) -> io::Result<()> {
        let mut m = Msg::new(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, bytemuck::bytes_of(&IfInfoMsg::zeroed()));
        m.attr_str(IFLA_IFNAME, name);
        let info = m.open(IFLA_LINKINFO);
        m.attr_str(IFLA_INFO_KIND, kind);
        if let Some((peer_name, ns)) = peer {
            let data = m.open(IFLA_INFO_DATA);
            let p = m.open(VETH_INFO_PEER);
            m.fixed(bytemuck::bytes_of(&IfInfoMsg::zeroed()));
            m.attr_str(IFLA_IFNAME, peer_name);
            m.attr(IFLA_NET_NS_FD, &(ns as u32).to_ne_bytes());
            m.close(p);
            m.close(data);
        }
        m.close(info);
        self.request(&format!("creating {kind} link {name}"), m.finish())
    }

    fn set_up(&self, name: &str) -> io::Result<()> {
        let ifi = IfInfoMsg { flags: libc::IFF_UP as u32, change: libc::IFF_UP as u32, ..IfInfoMsg::zeroed() };
        let mut m = Msg::new(RTM_NEWLINK, 0, bytemuck::bytes_of(&ifi));
        m.attr_str(IFLA_IFNAME, name);
        self.request(&format!("bringing up {name}"), m.finish())
    }

    fn set_master(&self, name: &str, master: &str) -> io::Result<()> {
        let master_index = ifindex(master)?;
        let mut m = Msg::new(RTM_NEWLINK, 0, bytemuck::bytes_of(&IfInfoMsg::zeroed()));
        m.attr_str(IFLA_IFNAME, name);
        m.attr(IFLA_MASTER, &master_index.to_ne_bytes());
        self.request(&format!("attaching {name} to {master}"), m.finish())
    }

    fn add_addr(&self, name: &str, addr: Ipv4Addr, prefix: u8) -> io::Result<()> {
        let ifa = IfAddrMsg { family: libc::AF_INET as u8, prefixlen: prefix, flags: 0, scope: 0, index: ifindex(name)? };
        let mut m = Msg::new(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, bytemuck::bytes_of(&ifa));
        m.attr(IFA_LOCAL, &addr.octets());
        m.attr(IFA_ADDRESS, &addr.octets());
        self.request(&format!("adding {addr}/{prefix} to {name}"), m.finish())
    }
}

/// Index of interface `name` in the calling thread's namespace.
fn ifindex(name: &str) -> io::Result<u32> {
    let c = std::ffi::CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name with NUL"))?;
    // SAFETY: c is a valid NUL-terminated string for the call's duration.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(context(io::Error::last_os_error(), &format!("no interface {name}")));
    }
    Ok(i)
}

/// Reads the kernel's answer to a request: `Some(errno)` (0 = success) for an acknowledgement,
/// `None` for anything else; a malformed answer is an error. Every length is checked before use.
fn parse_ack(mut b: &[u8]) -> Result<Option<i32>, String> {
    const HDR: usize = std::mem::size_of::<NlMsgHdr>();
    while !b.is_empty() {
        if b.len() < HDR {
            return Err(format!("truncated netlink header ({} bytes)", b.len()));
        }
        let h: NlMsgHdr = bytemuck::pod_read_unaligned(&b[..HDR]);
        let len = h.len as usize;
        if len < HDR || len > b.len() {
            return Err(format!("netlink message length {len} outside 16..={}", b.len()));
        }
        if h.ty == NLMSG_ERROR {
            if len < HDR + 4 {
                return Err("netlink error message without its code".into());
            }
            let code = i32::from_ne_bytes(b[HDR..HDR + 4].try_into().unwrap());
            return Ok(Some(-code));
        }
        b = &b[align4(len).min(b.len())..];
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn ack_parser_checks_lengths() {
        let ok = {
            let mut v = bytemuck::bytes_of(&NlMsgHdr { len: 36, ty: NLMSG_ERROR, flags: 0, seq: 1, pid: 0 }).to_vec();
            v.extend_from_slice(&0i32.to_ne_bytes());
            v.extend_from_slice(&[0u8; 16]);
            v
        };
        assert_eq!(parse_ack(&ok), Ok(Some(0)));
        let mut eperm = ok.clone();
        eperm[16..20].copy_from_slice(&(-libc::EPERM).to_ne_bytes());
        assert_eq!(parse_ack(&eperm), Ok(Some(libc::EPERM)));
        // Every truncation and every corrupted length ends in Ok or a clear error, never a panic.
        for cut in 0..ok.len() {
            let _ = parse_ack(&ok[..cut]);
        }
        let mut x = 0x9e3779b97f4a7c15u64;
        for _ in 0..20000 {
            let mut m = ok.clone();
            for _ in 0..3 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = (x as usize) % m.len();
                m[i] = (x >> 32) as u8;
            }
            let _ = parse_ack(&m);
        }
        assert!(parse_ack(&ok[..10]).unwrap_err().contains("truncated"));
    }

    /// Two simulated nodes reach each other over the bridge and only over it: node 0 connects to node 1's
    /// address; node 1's loopback listener is invisible from node 0; the namespaces are gone when dropped.
    #[test]
    fn two_nodes_talk_over_the_bridge() {
        if !is_root() {
            return rshmem_test_support::skip("two_nodes_talk_over_the_bridge", "network namespaces need root (scripts/test.sh runs as root)");
        }
        let net = SimNet::new(2).expect("simulated network");
        let (n0, n1) = (&net.nodes[0], &net.nodes[1]);
        assert_eq!(n1.addr, Ipv4Addr::new(10, 99, 0, 2));
        let listener = in_netns(&n1.ns, || TcpListener::bind((n1.addr, 0))).unwrap();
        let port = listener.local_addr().unwrap().port();
        let lo_listener = in_netns(&n1.ns, || TcpListener::bind((Ipv4Addr::LOCALHOST, 0))).unwrap();
        let lo_port = lo_listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, peer) = listener.accept().unwrap();
            let mut b = [0u8; 5];
            s.read_exact(&mut b).unwrap();
            s.write_all(&b).unwrap();
            peer
        });
        let addr = n1.addr;
        let echoed = in_netns(&n0.ns, || {
            let mut s = TcpStream::connect((addr, port))?;
            s.write_all(b"hello")?;
            let mut b = [0u8; 5];
            s.read_exact(&mut b)?;
            // Node 1's loopback is its own: nothing listens on node 0's loopback at that port.
            let lo = TcpStream::connect((Ipv4Addr::LOCALHOST, lo_port));
            Ok((b, lo.is_err()))
        })
        .unwrap();
        assert_eq!(&echoed.0, b"hello");
        assert!(echoed.1, "node 0 reached node 1's loopback listener: the namespaces are not separate");
        assert_eq!(server.join().unwrap().ip(), std::net::IpAddr::V4(n0.addr), "the connection came from node 0's address");
        // Neither the bridge nor the node interfaces exist in this (the caller's) namespace.
        assert!(ifindex(BRIDGE).is_err());
    }

    #[test]
    fn node_count_is_checked() {
        assert!(SimNet::new(0).is_err());
        let e = SimNet::new(MAX_NODES + 1).err().expect("255 nodes must be refused");
        assert!(e.to_string().contains("between 1 and 254"), "{e}");
    }
}
