//! The connecting side of a proxy connection: [`connect`] retries until a deadline (the peer's proxy
//! may not listen yet), sends this PE's [`Hello`] and checks the acceptor's answer (`super::accept` is
//! the other side): the job key (in constant time), the PE count, the heap size, that the connection
//! is meant for this PE and lane, and the wire version. A refusal says only its status; the error names
//! the peer and what did not match.

use crate::error::{Error, Result};
use crate::transport::proxy::tcp::{key_eq, send_all, Connection, Endpoint, HELLO_TIMEOUT};
use crate::transport::wire::{Hello, HelloStatus, HELLO_LEN, MAGIC, MAX_CHUNK, MAX_LANES, MIN_CHUNK, VERSION};
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Connects to `peer` at `addr` (retrying until `deadline` while nobody listens), as connection
/// `lane` of `lanes` between the two PEs, and exchanges hellos.
pub fn connect(addr: SocketAddr, me: &Endpoint, peer: u32, lane: u16, lanes: u16, deadline: Instant) -> Result<Connection> {
    me.check()?;
    if peer >= me.npes || peer == me.pe {
        return Err(Error::new(format!("transport: cannot connect PE {} to PE {peer} of {}", me.pe, me.npes)));
    }
    if lanes == 0 || lanes as u32 > MAX_LANES || lane >= lanes {
        return Err(Error::new(format!("transport: connection {lane} of {lanes} (at most {MAX_LANES} per pair)")));
    }
    let who = format!("PE {peer} at {addr}");
    let mut last_err;
    let mut stream = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match TcpStream::connect_timeout(&addr, left.clamp(Duration::from_millis(1), Duration::from_secs(1))) {
            Ok(s) => break s,
            Err(e) => last_err = e,
        }
        if Instant::now() >= deadline {
            return Err(Error::new(format!("transport: could not connect to {who}: {last_err}")));
        }
        std::thread::sleep(Duration::from_millis(10).min(deadline.saturating_duration_since(Instant::now())));
    };
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(HELLO_TIMEOUT));
    let hello = Hello {
        magic: MAGIC,
        version: VERSION,
        status: 0,
        key: me.key,
        src_pe: me.pe,
        dst_pe: peer,
        npes: me.npes,
        lane,
        lanes,
        heap_size: me.heap_size,
        max_chunk: me.max_chunk,
        _reserved: 0,
    };
    send_all(&stream, &[bytemuck::bytes_of(&hello)], deadline.saturating_duration_since(Instant::now()).max(HELLO_TIMEOUT))
        .map_err(|e| Error::new(format!("transport: sending the hello to {who}: {e}")))?;
    let answer = read_hello(&mut stream, deadline.saturating_duration_since(Instant::now()).max(HELLO_TIMEOUT))
        .map_err(|e| Error::new(format!("transport: {who} did not answer the hello: {e}")))?;
    if answer.magic != MAGIC {
        return Err(Error::new(format!("transport: {who} is not an rshmem proxy (bad hello magic)")));
    }
    // A refusal carries its status alone (and, for another wire version, the acceptor's version).
    match HelloStatus::from_u32(answer.status) {
        Some(HelloStatus::Accepted) => {}
        Some(HelloStatus::WrongVersion) => {
            return Err(Error::new(format!(
                "transport: {who} refused the connection: it speaks wire version {}, this PE version {VERSION} (all PEs of a job must run the same rshmem build)",
                answer.version
            )))
        }
        Some(s @ (HelloStatus::WrongPeCount | HelloStatus::WrongHeapSize)) => {
            return Err(Error::new(format!(
                "transport: {who} refused the connection: {} (this PE has {} PEs and a heap of {} bytes; a refusal does not say what the other side has)",
                s.describe(),
                me.npes,
                me.heap_size
            )))
        }
        Some(s) => return Err(Error::new(format!("transport: {who} refused the connection: {}", s.describe()))),
        None => return Err(Error::new(format!("transport: {who} answered with unknown status {}", answer.status))),
    }
    if answer.version != VERSION {
        return Err(Error::new(format!(
            "transport: {who} speaks wire version {}, this PE version {VERSION}",
            answer.version
        )));
    }
    // The acceptor proves it belongs to the same job and is the PE we meant.
    let why = if !key_eq(&answer.key, &me.key) {
        Some("wrong job key".to_string())
    } else if answer.src_pe != peer || answer.dst_pe != me.pe {
        Some(format!("it answers as PE {} for PE {}", answer.src_pe, answer.dst_pe))
    } else if answer.npes != me.npes || answer.heap_size != me.heap_size {
        Some(format!("it has {} PEs and a heap of {} bytes", answer.npes, answer.heap_size))
    } else if answer.lane != lane || answer.lanes != lanes {
        Some(format!("it answers as connection {} of {}", answer.lane, answer.lanes))
    } else if !(MIN_CHUNK..=MAX_CHUNK).contains(&answer.max_chunk) || answer._reserved != 0 {
        Some(format!("malformed hello (chunk size {})", answer.max_chunk))
    } else {
        None
    };
    if let Some(why) = why {
        let _ = stream.shutdown(Shutdown::Both);
        return Err(Error::new(format!("transport: dropped the connection to {who}: {why}")));
    }
    Ok(Connection::new(stream, me, peer, answer.max_chunk, lane, addr))
}

/// Connects `lanes` connections to `peer` (see [`connect`]).
pub fn connect_lanes(addr: SocketAddr, me: &Endpoint, peer: u32, lanes: u16, deadline: Instant) -> Result<Vec<Connection>> {
    (0..lanes).map(|lane| connect(addr, me, peer, lane, lanes, deadline)).collect()
}

fn read_hello(s: &mut TcpStream, timeout: Duration) -> io::Result<Hello> {
    s.set_read_timeout(Some(timeout.max(Duration::from_millis(1))))?;
    let mut b = [0u8; HELLO_LEN];
    let mut got = 0;
    while got < HELLO_LEN {
        match s.read(&mut b[got..]) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("connection closed after {got} of {HELLO_LEN} hello bytes"),
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("timed out after {timeout:?} with {got} of {HELLO_LEN} hello bytes"),
                ))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(bytemuck::pod_read_unaligned(&b))
}
