//! The medium's bound for the remote engine's figures: TCP over loopback (or any address), measured by
//! a compiled program in the same call as the engine (`bench/`, the GPU scripts), so that a remote
//! figure is compared with what the kernel's TCP itself gives on that machine.
//!
//!   rshmem-loopback [--streams 1,4,8,16] [--bytes 256m] [--rtt-rounds 20000]
//!
//! Prints one line per figure:
//! - `loopback_bw streams=N GBps=X`: N connections, each with a sending and a receiving thread,
//!   `--bytes` in all split over them, in writes of 1 MiB (the engine's large frames), from the first
//!   byte sent to the last received;
//! - `loopback_rtt mode=poll us=X` and `mode=block us=X`: the median round trip of 8 bytes between two
//!   threads over one connection, with the receiver spinning on a non-blocking socket (as the engine's
//!   lane threads do on a machine of many cores) or sleeping in a blocking read.

use clap::Parser;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

#[derive(Parser)]
#[command(name = "rshmem-loopback", about = "TCP loopback bandwidth by stream count and 8-byte round trip, for comparison with the remote engine.")]
struct Cli {
    /// Stream counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8,16")]
    streams: Vec<usize>,
    /// Bytes per bandwidth run, all streams together (k, m, g suffixes).
    #[arg(long, default_value = "256m", value_parser = parse_bytes)]
    bytes: usize,
    /// Round trips per latency run.
    #[arg(long, default_value_t = 20000)]
    rtt_rounds: usize,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    addr: String,
}

fn parse_bytes(v: &str) -> Result<usize, String> {
    let v = v.trim().to_ascii_lowercase();
    let (n, m) = match v.chars().last() {
        Some('k') => (&v[..v.len() - 1], 1 << 10),
        Some('m') => (&v[..v.len() - 1], 1 << 20),
        Some('g') => (&v[..v.len() - 1], 1 << 30),
        _ => (&v[..], 1),
    };
    n.parse::<usize>().map(|n| n * m).map_err(|e| format!("{v:?}: {e}"))
}

fn pair(addr: &str) -> (TcpStream, TcpStream) {
    let l = TcpListener::bind((addr, 0)).expect("listen");
    let a = l.local_addr().expect("address");
    let c = TcpStream::connect(a).expect("connect");
    let (s, _) = l.accept().expect("accept");
    c.set_nodelay(true).expect("nodelay");
    s.set_nodelay(true).expect("nodelay");
    (c, s)
}

fn bandwidth(addr: &str, streams: usize, bytes: usize) -> f64 {
    const WRITE: usize = 1 << 20;
    let per = (bytes / streams).max(WRITE);
    let conns: Vec<(TcpStream, TcpStream)> = (0..streams).map(|_| pair(addr)).collect();
    let start = Instant::now();
    std::thread::scope(|s| {
        for (mut tx, mut rx) in conns {
            s.spawn(move || {
                let buf = vec![0x5au8; WRITE];
                let mut left = per;
                while left > 0 {
                    let n = left.min(WRITE);
                    tx.write_all(&buf[..n]).expect("send");
                    left -= n;
                }
            });
            s.spawn(move || {
                let mut buf = vec![0u8; WRITE];
                let mut left = per;
                while left > 0 {
                    let n = rx.read(&mut buf).expect("receive");
                    assert!(n > 0, "the sender closed early");
                    left -= n;
                }
            });
        }
    });
    (per * streams) as f64 / start.elapsed().as_secs_f64() / 1e9
}

fn rtt(addr: &str, rounds: usize, poll: bool) -> f64 {
    let (mut a, mut b) = pair(addr);
    if poll {
        a.set_nonblocking(true).expect("nonblocking");
        b.set_nonblocking(true).expect("nonblocking");
    }
    fn read8(s: &mut TcpStream, poll: bool) {
        let mut buf = [0u8; 8];
        let mut got = 0;
        while got < 8 {
            match s.read(&mut buf[got..]) {
                Ok(0) => panic!("closed"),
                Ok(n) => got += n,
                Err(e) if poll && e.kind() == std::io::ErrorKind::WouldBlock => std::hint::spin_loop(),
                Err(e) => panic!("read: {e}"),
            }
        }
    }
    let echo = std::thread::spawn(move || {
        for _ in 0..rounds {
            read8(&mut b, poll);
            b.write_all(&[1u8; 8]).expect("echo");
        }
    });
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        a.write_all(&[2u8; 8]).expect("ping");
        read8(&mut a, poll);
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    echo.join().expect("echo thread");
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let cli = Cli::parse();
    for &n in &cli.streams {
        // A warm-up run, then the measured one.
        bandwidth(&cli.addr, n, cli.bytes / 8);
        println!("loopback_bw streams={n} GBps={:.3}", bandwidth(&cli.addr, n, cli.bytes));
    }
    for (mode, poll) in [("poll", true), ("block", false)] {
        rtt(&cli.addr, cli.rtt_rounds / 10, poll);
        println!("loopback_rtt mode={mode} us={:.2}", rtt(&cli.addr, cli.rtt_rounds, poll));
    }
}
