//! The proxy's TCP setup: the address it listens on, the connections to every PE on another node
//! (made once, at init: the lower PE connects, the higher accepts), and the listener's service after
//! setup, when every connection is a stranger's. Both serve the listener through one
//! `accept::Acceptor` loop each: every connection at once, strangers reported rate-limited.

use crate::bootstrap::{Bootstrap, WarnLimiter};
use crate::config::NetEnv;
use crate::error::{Error, Result};
use crate::log;
use crate::transport::proxy::accept::Acceptor;
use crate::transport::proxy::engine::Engine;
use crate::transport::proxy::connect;
use crate::transport::proxy::tcp::{Connection, Endpoint};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The IPv4 address this PE's proxy listens on (`node::iface::proxy_listen_ip`, which
/// `rshmrun --diagnose` reports too): RSHMEM_PROXY_IFNAME's, else the address this host uses to reach
/// the bootstrap rendezvous (with `--netns` every node has its own), else the default interface's.
fn listen_ip(net: &NetEnv) -> Result<IpAddr> {
    crate::node::iface::proxy_listen_ip(net).map(|(ip, _)| ip)
}

/// Collective: listens, and all-gathers every PE's listen address and wanted channel count
/// (`channels`) through the bootstrap. Returns the listener, its address, every PE's, and the job's
/// channel count: the largest any PE wanted (every PE runs that many, one connection per channel to
/// each peer).
pub(crate) fn listen(boot: &Bootstrap, net: &NetEnv, channels: usize) -> Result<(TcpListener, SocketAddr, Vec<SocketAddr>, usize)> {
    let (me, n) = (boot.pe() as u32, boot.npes() as u32);
    let ip = listen_ip(net)?;
    let listener = TcpListener::bind((ip, 0)).map_err(|e| Error::os(format!("proxy: PE {me}: cannot listen on {ip}"), e))?;
    let listen = listener.local_addr().map_err(|e| Error::os("proxy: listener address", e))?;
    log::info(format!("proxy: PE {me} listens on {listen}"));
    let all = boot.allgather("rshmem_init (proxy addresses)", format!("{listen} {channels}").as_bytes())?;
    let mut addrs = Vec::with_capacity(n as usize);
    let mut job_channels = 1;
    for (pe, a) in all.iter().enumerate() {
        let text = String::from_utf8_lossy(a);
        let parsed = text.split_once(' ').and_then(|(a, c)| Some((a.parse::<SocketAddr>().ok()?, c.parse::<usize>().ok()?)));
        let Some((addr, c)) = parsed.filter(|&(_, c)| (1..=crate::transport::wire::MAX_LANES as usize).contains(&c)) else {
            return Err(boot.abort(Error::new(format!(
                "proxy: PE {pe} sent {text:?} as its proxy address and lane count (expected \"ip:port n\", n from 1 to {})",
                crate::transport::wire::MAX_LANES
            ))));
        };
        addrs.push(addr);
        job_channels = job_channels.max(c);
    }

    Ok((listener, listen, addrs, job_channels))
}

/// What the warnings about strangers on the proxy's port are about (`WarnLimiter`'s summary line).
const STRANGERS: &str = "connections to the proxy port";

/// Collective: makes `lanes` connections to every PE on another node (`remote[pe]`): to the higher
/// ones, accepting the lower ones, each checked by its hello. Returns the connections by PE and lane
/// (an empty list for PEs of this node).
///
/// The listener's connections are served all at once (`accept::Acceptor`): strangers holding idle
/// connections, or sending garbage, neither delay nor stop the PEs' own; warnings about them are
/// rate-limited.
#[allow(clippy::too_many_arguments)]
pub(crate) fn connect_all(boot: &Bootstrap, listener: &TcpListener, addrs: &[SocketAddr], ep: &Endpoint, remote: &[bool], lanes: usize, timeout: Duration) -> Result<Vec<Vec<Connection>>> {
    let (me, n) = (boot.pe() as u32, boot.npes() as u32);
    let deadline = Instant::now() + timeout;
    let expect_accept: Vec<u32> = (0..me).filter(|&q| remote[q as usize]).collect();
    let mut conns: Vec<Vec<Connection>> = (0..n).map(|_| Vec::new()).collect();
    let want = |c: &Connection, got: &[Connection]| {
        expect_accept.contains(&c.peer()) && (c.lane() as usize) < lanes && !got.iter().any(|g| g.peer() == c.peer() && g.lane() == c.lane())
    };
    // Set when connecting failed: the acceptor stops waiting.
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| -> Result<()> {
        let acceptor = sc.spawn(|| -> Result<Vec<Connection>> {
            let mut acc = Acceptor::new(listener, ep)?;
            let mut warns = WarnLimiter::new(STRANGERS);
            let mut got: Vec<Connection> = Vec::new();
            while got.len() < expect_accept.len() * lanes {
                if Instant::now() >= deadline || stop.load(Ordering::Acquire) {
                    let missing: Vec<u32> = expect_accept.iter().copied().filter(|q| got.iter().filter(|c| c.peer() == *q).count() < lanes).collect();
                    return Err(Error::new(format!("proxy: PE {me}: PEs {missing:?} did not connect within {timeout:?}")));
                }
                match acc.next(deadline.min(Instant::now() + Duration::from_millis(100))) {
                    None => {}
                    Some(Ok(c)) if want(&c, &got) => got.push(c),
                    Some(Ok(c)) => warns.warn(format!("proxy: PE {me}: unexpected connection from PE {} (connection {}) at {} during setup: dropped", c.peer(), c.lane(), c.peer_addr())),
                    Some(Err(e)) => warns.warn(format!("proxy: {e}")),
                }
            }
            Ok(got)
        });
        let mut first_err = None;
        'peers: for q in (me + 1)..n {
            if remote[q as usize] {
                for lane in 0..lanes {
                    match connect::connect(addrs[q as usize], ep, q, lane as u16, lanes as u16, deadline) {
                        Ok(c) => conns[q as usize].push(c),
                        Err(e) => {
                            first_err = Some(e);
                            stop.store(true, Ordering::Release);
                            break 'peers;
                        }
                    }
                }
            }
        }
        let accepted = acceptor.join().map_err(|_| Error::new("proxy: the setup thread panicked"))?;
        if let Some(e) = first_err {
            return Err(e);
        }
        let mut accepted = accepted?;
        accepted.sort_by_key(|c| (c.peer(), c.lane()));
        for c in accepted {
            let q = c.peer() as usize;
            conns[q].push(c);
        }
        Ok(())
    })
    .map_err(|e| e.context(format!("rshmem_init: proxy transport of PE {me}")))?;
    Ok(conns)
}

/// Serves the listener after setup: every connection opened now is a stranger (the job's
/// connections are all made at init). Hellos are read and refused (a wrong key, ...) for all
/// connections at once; a valid hello (someone with the key) is cut off at its first frame, which is
/// named. Neither ends this PE, and nothing is applied. Warnings are rate-limited: a flood of
/// strangers prints a few lines and a count.
pub(crate) fn serve_late(eng: Arc<Engine>, listener: TcpListener, ep: Endpoint) {
    let me = eng.me;
    let mut warns = WarnLimiter::new(STRANGERS);
    let mut acc = match Acceptor::new(&listener, &ep) {
        Ok(a) => a,
        Err(e) => {
            log::error(format!("proxy: PE {me}: the listener stops serving: {e}"));
            return;
        }
    };
    while !eng.closing.load(Ordering::Acquire) && !eng.abort.load(Ordering::Acquire) {
        warns.tick();
        match acc.next(Instant::now() + Duration::from_millis(100)) {
            None => {}
            Some(Err(e)) => warns.warn(format!("proxy: {e}")),
            Some(Ok(c)) => {
                // Only a holder of the job key gets here; its first frame's head is read (bounded)
                // to name it, and nothing of it is applied.
                let peer = c.peer();
                let addr = c.peer_addr();
                let why = match c.into_stream() {
                    Ok(s) => first_frame(&eng, peer, &s),
                    Err(e) => e.to_string(),
                };
                warns.warn(format!("proxy: PE {me}: cut off a connection from {} claiming to be PE {peer}, opened after setup: {why}", addr));
            }
        }
    }
}

/// What a late connection sent first (at most 2 s of waiting), checked as a lane checks frames: the
/// connection is answered with an ERROR naming what is wrong with it (or, for a valid frame, that a
/// connection opened after setup is not the job's), and nothing of it is applied. Returns the text.
fn first_frame(eng: &Engine, peer: u32, s: &std::net::TcpStream) -> String {
    use crate::transport::wire::{check, frame_size, Context, Frames, Head, HEAD_BYTES};
    let start = Instant::now();
    let read = |b: &mut [u8]| -> std::result::Result<(), String> {
        let mut got = 0;
        while got < b.len() {
            if start.elapsed() > Duration::from_secs(2) {
                return Err("it sent no whole frame".into());
            }
            match crate::transport::proxy::tcp::recv_some(s, &mut b[got..]) {
                Ok(Some(0)) => return Err("it closed before a whole frame".into()),
                Ok(Some(n)) => got += n,
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
                Err(e) => return Err(format!("reading its first frame: {e}")),
            }
        }
        Ok(())
    };
    let mut head = [0u8; HEAD_BYTES];
    if let Err(e) = read(&mut head) {
        return e;
    }
    let h: Head = bytemuck::pod_read_unaligned(&head);
    let ctx = Context { peer, lanes: 1, lane: 0, backed: eng.target.backed() };
    let verdict = frame_size(&h, &ctx).and_then(|n| {
        let mut f = vec![0u8; n];
        f[..HEAD_BYTES].copy_from_slice(&head);
        read(&mut f[HEAD_BYTES..])?;
        check(&f, &ctx).map(|_| ())
    });
    let text = match verdict {
        Err(e) => format!("its first frame was refused: {e}"),
        Ok(()) => "a connection opened after setup is not one of the job's lanes: nothing it sends is applied".to_string(),
    };
    let mut b = Vec::new();
    Frames::error(&mut b, &text);
    let _ = crate::transport::proxy::tcp::send_some(s, &[std::io::IoSlice::new(&b)]);
    let _ = s.shutdown(std::net::Shutdown::Write);
    text
}
