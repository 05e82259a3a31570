//! Scenarios of the proxy's data port under attack (issue 19, item 7), under `rshmrun --nodes 2 -np 4`
//! (PE 2 on another node than PE 0) with RSHMEM_REMOTE_TRANSPORT=proxy. Driven by
//! tests/tests/proxy_port.rs, which also plays the local attacker that watches for new listeners.
//!
//! - `port_init`: prints how long `rshmem::init` took on this PE, then holds the job 0.3 s (the test
//!   runs it while a squatter holds idle connections to every new listener of the job).
//! - `port_hello`: PE 2 sends PE 0's proxy hellos that must be refused (another wire version with the
//!   job's key and with a wrong key, a wrong key, another PE count, another heap size, another target
//!   PE) from a raw socket; each refusal must carry its status and nothing of PE 0's identity.
//! - `port_flood`: PE 2 holds a few idle connections to PE 0's proxy port and opens thousands more
//!   (garbage, wrong keys, connect-and-close); the test counts PE 0's lines about them. Afterwards the
//!   job's own connections still work.
//! - `port_cut_idle`, `port_cut_busy`: every PE waits (idle links), or streams puts and gets to the PE of
//!   the other node (busy links), after PE 0 printed `PE 0: ready for the cut`; the test then cuts node
//!   1's link, and the job must end naming the network failure.

use super::remote::{get, hello, hello_v, job_key, pe0_proxy_addr_at_pe2, put, rogue};
use super::{barrier, ck, die, fill, Ctx};
use rshmem::transport::wire::{MAGIC, VERSION};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long a cut scenario waits for its PE to be ended by the failure, before it gives up.
const CUT_WAIT: Duration = Duration::from_secs(60);

pub fn init_time(c: &Ctx) {
    println!("PE {}: init took {} ms", c.me, c.init.as_millis());
    // The job's listeners stay a moment longer, so that the test's squatter, on a busy machine,
    // still finds every one of them before finalize closes them.
    barrier();
    std::thread::sleep(Duration::from_millis(300));
    barrier();
}

/// PE 2: every refusal answers with the magic, its status (and, for another wire version, PE 0's
/// version), and zeros: no key, PE number, PE count, heap size, lanes or chunk size.
pub fn hello_refusals(c: &Ctx) {
    if let Some(addr) = pe0_proxy_addr_at_pe2(c, "port_hello") {
        let key = job_key();
        let mut bad = key;
        bad[5] ^= 0xa5;
        let heap = rshmem::heap_size() as u64;
        let n = c.n as u32;
        let cases: [(&str, Vec<u8>, u32); 7] = [
            ("another wire version with the job's key", hello_v(VERSION + 1, key, 2, 0, n, heap), 2),
            ("another wire version with a wrong key", hello_v(VERSION + 1, bad, 2, 0, n, heap), 1),
            ("wire version 0 with a wrong key", hello_v(0, bad, 2, 0, n, heap), 1),
            ("a wrong key", hello(bad, 2, 0, n, heap), 1),
            ("another PE count", hello(key, 2, 0, n + 1, heap), 3),
            ("another heap size", hello(key, 2, 0, n, heap + 4096), 4),
            ("a hello meant for PE 1", hello(key, 2, 1, n, heap), 5),
        ];
        for (what, h, want) in cases {
            let ans = rogue(addr, &h, &[]);
            if ans.len() != 64 {
                die(format!("port_hello: {what}: PE 0 answered {} bytes, expected a 64-byte refusal", ans.len()));
            }
            let status = u32::from_le_bytes(ans[12..16].try_into().unwrap());
            let version = u32::from_le_bytes(ans[8..12].try_into().unwrap());
            if ans[..8] != MAGIC || status != want {
                die(format!("port_hello: {what}: answer magic {:?}, status {status}; expected status {want}", &ans[..8]));
            }
            if version != 0 && version != VERSION {
                die(format!("port_hello: {what}: the refusal names wire version {version}"));
            }
            if let Some(i) = ans[16..].iter().position(|&b| b != 0) {
                die(format!(
                    "port_hello: {what}: the refusal (status {status}) carries PE 0's identity: byte {} is {:#x} (bytes 16..64: {:02x?})",
                    16 + i,
                    ans[16 + i],
                    &ans[16..]
                ));
            }
            println!("PE 2: {what}: refused with status {status} and nothing else");
        }
    }
    barrier();
}

/// PE 2 floods PE 0's proxy port with stranger connections while holding a few idle ones.
pub fn flood(c: &Ctx) {
    const IDLE: usize = 4;
    const FLOOD: usize = 3000;
    let buf = ck(rshmem::calloc(4096, 1));
    if let Some(addr) = pe0_proxy_addr_at_pe2(c, "port_flood") {
        let connect = |addr: SocketAddr| TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap_or_else(|e| die(format!("port_flood: connecting to {addr}: {e}")));
        let idle: Vec<TcpStream> = (0..IDLE).map(|_| connect(addr)).collect();
        let mut bad = job_key();
        bad[0] ^= 1;
        let wrong_key = hello(bad, 2, 0, c.n as u32, rshmem::heap_size() as u64);
        let t = Instant::now();
        for i in 0..FLOOD {
            let mut s = connect(addr);
            let what: &[u8] = match i % 3 {
                0 => &[b'G'; 64],
                1 => &wrong_key,
                _ => continue,
            };
            let _ = s.write_all(what);
            // Until PE 0 closes it (bounded), so that this PE does not pile up connections.
            let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
        }
        println!("PE 2: {FLOOD} stranger connections to PE 0's proxy port ({addr}) in {:.2} s, {IDLE} idle ones held", t.elapsed().as_secs_f64());
        drop(idle);
    }
    barrier();
    // The job's own connections still work, and carry the right bytes.
    if c.me == 0 || c.me == 2 {
        let to = 2 - c.me;
        let data = fill(c.seed ^ c.me as u64, 4096);
        put(buf, &data, to);
        if get(buf, 4096, to) != data {
            die(format!("port_flood: PE {to}'s buffer does not hold what PE {} put after the flood", c.me));
        }
    }
    barrier();
    ck(rshmem::free(buf));
}

/// The job waits (idle links) or streams to the other node (busy links) until a cut ends it.
pub fn cut(c: &Ctx, busy: bool) {
    const LEN: usize = 64 << 10;
    let buf = ck(rshmem::calloc(LEN, c.n));
    let partner = (c.me + c.n / 2) % c.n;
    if c.n != 4 || !super::remote::is_remote(buf, partner) {
        die("port_cut needs rshmrun --nodes 2 -np 4 (PEs 0, 1 on node 0, PEs 2, 3 on node 1)");
    }
    // Every connection has carried data before the cut.
    let data = fill(c.seed ^ c.me as u64, LEN);
    // SAFETY: pointer arithmetic inside the allocation of LEN * n bytes.
    let mine = unsafe { buf.add(c.me * LEN) };
    for pe in (0..c.n).filter(|&pe| super::remote::is_remote(buf, pe)) {
        put(mine, &data, pe);
    }
    barrier();
    if c.me == 0 {
        println!("PE 0: ready for the cut ({} links)", if busy { "busy" } else { "idle" });
    }
    let start = Instant::now();
    let mut rounds = 0u64;
    while start.elapsed() < CUT_WAIT {
        if busy {
            put(mine, &data, partner);
            if get(mine, LEN, partner) != data {
                die(format!("port_cut: PE {partner} returned other bytes than this PE put there"));
            }
            rounds += 1;
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    die(format!("port_cut: still running {CUT_WAIT:?} after the cut was announced ({rounds} rounds of puts and gets to PE {partner})"));
}
