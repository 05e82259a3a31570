//! Hands file descriptors (heap segments: memfds on the CPU backend, cuMem POSIX handles on CUDA) to
//! same-node PEs over Unix-domain sockets with SCM_RIGHTS. Every PE runs a small server thread on an
//! abstract socket named after the job; a peer connects, presents the job key and a segment id, and
//! receives the descriptor. Abstract sockets leave nothing in the file system, even after a crash.

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Descriptors this PE offers, by segment id.
type Table = Arc<Mutex<HashMap<u32, (OwnedFd, u64)>>>;

pub struct FdServer {
    name: Vec<u8>,
    key: [u8; 16],
    table: Table,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn socket_name(job: &[u8; 16], pe: usize) -> Vec<u8> {
    let hex: String = job.iter().map(|b| format!("{b:02x}")).collect();
    format!("rshmem-{hex}-{pe}").into_bytes()
}

fn abstract_addr(name: &[u8]) -> Result<std::os::unix::net::SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    std::os::unix::net::SocketAddr::from_abstract_name(name).map_err(|e| Error::os("fd server address", e))
}

impl FdServer {
    /// Starts the server of PE `pe` for job `job` (a per-job random id) with access key `key`.
    pub fn start(job: [u8; 16], key: [u8; 16], pe: usize) -> Result<FdServer> {
        let name = socket_name(&job, pe);
        let listener = UnixListener::bind_addr(&abstract_addr(&name)?)
            .map_err(|e| Error::os(format!("PE {pe}: cannot open the fd-passing socket"), e))?;
        let table: Table = Arc::new(Mutex::new(HashMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (t2, s2) = (table.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("rshmem-fdserver".into())
            .spawn(move || serve(listener, key, t2, s2))
            .map_err(|e| Error::os("cannot start the fd server thread", e))?;
        Ok(FdServer { name, key, table, stop, thread: Some(thread) })
    }

    /// Offers `fd` (with its size in bytes) under `id`; replaces an older offer with the same id.
    pub fn offer(&self, id: u32, fd: OwnedFd, size: u64) {
        self.table.lock().unwrap().insert(id, (fd, size));
    }

    /// Withdraws an offer (closes our copy of the descriptor).
    pub fn withdraw(&self, id: u32) {
        self.table.lock().unwrap().remove(&id);
    }

    /// Fetches segment `id` from PE `pe`'s server. Retries while the server is not up yet.
    pub fn fetch(&self, job: [u8; 16], pe: usize, id: u32) -> Result<(OwnedFd, u64)> {
        let name = socket_name(&job, pe);
        let addr = abstract_addr(&name)?;
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut s = loop {
            match UnixStream::connect_addr(&addr) {
                Ok(s) => break s,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(Error::os(format!("cannot reach PE {pe}'s fd-passing socket"), e)),
            }
        };
        s.set_read_timeout(Some(Duration::from_secs(20))).ok();
        let mut req = [0u8; 20];
        req[..16].copy_from_slice(&self.key);
        req[16..].copy_from_slice(&id.to_le_bytes());
        s.write_all(&req).map_err(|e| Error::os(format!("fd request to PE {pe}"), e))?;
        let (size, fd) = recv_fd(&s).map_err(|e| e.context(format!("segment {id} from PE {pe}")))?;
        match fd {
            Some(fd) => Ok((fd, size)),
            None => Err(Error::new(format!("PE {pe} has no heap segment {id} to share (refused or withdrawn)"))),
        }
    }

    pub fn name(&self) -> &[u8] {
        &self.name
    }
}

impl Drop for FdServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept() with a connection of our own.
        if let Ok(addr) = abstract_addr(&self.name) {
            let _ = UnixStream::connect_addr(&addr);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(listener: UnixListener, key: [u8; 16], table: Table, stop: Arc<AtomicBool>) {
    for conn in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(mut s) = conn else { continue };
        s.set_read_timeout(Some(Duration::from_secs(5))).ok();
        let mut req = [0u8; 20];
        if s.read_exact(&mut req).is_err() {
            continue;
        }
        let key_ok = req[..16].iter().zip(key.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
        let id = u32::from_le_bytes(req[16..20].try_into().unwrap());
        let guard = table.lock().unwrap();
        match guard.get(&id) {
            Some((fd, size)) if key_ok => {
                let _ = send_fd(&s, *size, Some(fd.as_raw_fd()));
            }
            _ => {
                let _ = send_fd(&s, 0, None);
            }
        }
    }
}

/// Sends an 8-byte size and, if given, one descriptor as SCM_RIGHTS ancillary data.
fn send_fd(s: &UnixStream, size: u64, fd: Option<RawFd>) -> std::io::Result<()> {
    let mut data = size.to_le_bytes();
    let mut iov = libc::iovec { iov_base: data.as_mut_ptr() as *mut libc::c_void, iov_len: data.len() };
    // Room for one descriptor's control message, u64-aligned.
    let mut cbuf = [0u64; 8];
    // SAFETY: msghdr is a plain C struct; all-zero is a valid empty header that we fill in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        // SAFETY: CMSG_SPACE/CMSG_FIRSTHDR/CMSG_DATA compute offsets inside `cbuf`, which is large enough
        // for one descriptor (CMSG_SPACE(4) <= 64 bytes) and aligned for cmsghdr.
        unsafe {
            msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = libc::CMSG_SPACE(4) as usize;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(4) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut i32, fd);
        }
    }
    // SAFETY: msg points at live buffers for the duration of the call.
    let n = unsafe { libc::sendmsg(s.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
}

fn recv_fd(s: &UnixStream) -> Result<(u64, Option<OwnedFd>)> {
    let mut data = [0u8; 8];
    let mut iov = libc::iovec { iov_base: data.as_mut_ptr() as *mut libc::c_void, iov_len: data.len() };
    let mut cbuf = [0u64; 8];
    // SAFETY: zeroed msghdr is valid; we point it at our buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&cbuf);
    // SAFETY: buffers outlive the call; MSG_CMSG_CLOEXEC makes received fds close-on-exec.
    let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(Error::os("receiving a descriptor", std::io::Error::last_os_error()));
    }
    if n as usize != data.len() {
        return Err(Error::new("short reply from the fd server (peer exited?)"));
    }
    let mut fd = None;
    // SAFETY: the kernel filled msg_control; CMSG_* walk it within msg_controllen.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        if !c.is_null() && (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
            let raw = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const i32);
            fd = Some(OwnedFd::from_raw_fd(raw));
        }
    }
    Ok((u64::from_le_bytes(data), fd))
}

/// Creates an anonymous shared-memory file of `size` bytes (memfd; pages allocated on first touch).
pub fn memfd(name: &str, size: u64) -> Result<OwnedFd> {
    let cname = std::ffi::CString::new(name).unwrap();
    // SAFETY: plain syscall with a valid C string.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(Error::os("memfd_create", std::io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on our own descriptor.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) } != 0 {
        return Err(Error::os(format!("cannot size shared memory to {size} bytes"), std::io::Error::last_os_error()));
    }
    Ok(fd)
}
