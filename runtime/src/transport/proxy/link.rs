//! One peer of the proxy engine: the connection's sending half ([`FrameLink`]), what this PE awaits from
//! the peer (`Pending`), and the work queue of the peer's responder thread (`Job`).

use crate::error::{Error, Result};
use crate::transport::proxy::tcp::{poll_briefly, Connection};
use crate::transport::wire::{Message, OpHeader, Width};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

/// One direction of a connection to a peer PE, as the engine uses it: frames of the wire protocol
/// (`transport::wire`), validated by the receiving side before anything is applied. The sending half
/// and the receiving half of one connection are two `FrameLink`s used by different threads.
pub trait FrameLink: Send {
    /// The PE on the other end.
    fn peer(&self) -> u32;
    /// The largest payload one frame to the peer may carry.
    fn send_chunk(&self) -> u32;
    /// Sends one frame (header and payload); a frame the peer would refuse is an error, not sent.
    fn send(&mut self, h: &OpHeader, payload: &[u8]) -> Result<()>;
    /// Sends a message (`Message::encode`).
    fn send_message(&mut self, m: &Message<'_>) -> Result<()>;
    /// Queues one frame whose payload is the concatenation of `payload`'s pieces, to go with the next
    /// `flush` (or before the next send). The default sends it at once.
    ///
    /// # Safety
    /// The bytes of `payload` must stay valid and unchanged until the next flush or send.
    unsafe fn queue(&mut self, h: &OpHeader, payload: [&[u8]; 2]) -> Result<()> {
        if payload[1].is_empty() {
            return self.send(h, payload[0]);
        }
        self.send(h, &[payload[0], payload[1]].concat())
    }
    /// Queues a message (copied: no borrowed bytes).
    fn queue_message(&mut self, m: &Message<'_>) -> Result<()> {
        self.send_message(m)
    }
    /// Sends every queued frame.
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    /// Whether a frame can be read without waiting (false when unknown).
    fn ready(&self) -> bool {
        false
    }
    /// Waits at most `idle` for a frame; Ok(true): [`FrameLink::current`] holds it (validated).
    fn recv_timeout(&mut self, idle: Duration) -> Result<bool>;
    /// The frame the last successful receive read.
    fn current(&self) -> Result<Message<'_>>;
    /// Ends the sending direction in order (a CLOSE frame).
    fn close(self: Box<Self>) -> Result<()>;
}

impl FrameLink for Connection {
    fn peer(&self) -> u32 {
        Connection::peer(self)
    }
    fn send_chunk(&self) -> u32 {
        Connection::send_chunk(self)
    }
    fn send(&mut self, h: &OpHeader, payload: &[u8]) -> Result<()> {
        Connection::send(self, h, payload)
    }
    fn send_message(&mut self, m: &Message<'_>) -> Result<()> {
        Connection::send_message(self, m)
    }
    unsafe fn queue(&mut self, h: &OpHeader, payload: [&[u8]; 2]) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { Connection::queue(self, h, payload) }
    }
    fn queue_message(&mut self, m: &Message<'_>) -> Result<()> {
        Connection::queue_message(self, m)
    }
    fn flush(&mut self) -> Result<()> {
        Connection::flush(self)
    }
    fn ready(&self) -> bool {
        Connection::ready(self)
    }
    fn recv_timeout(&mut self, idle: Duration) -> Result<bool> {
        Connection::recv_timeout(self, idle)
    }
    fn current(&self) -> Result<Message<'_>> {
        Connection::current(self)
    }
    fn close(self: Box<Self>) -> Result<()> {
        Connection::close(*self)
    }
}

/// A GET awaiting its response: where the bytes go.
pub(crate) struct PendingGet {
    pub(crate) dst: u64,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) got: u64,
    /// `g`: into the return slot (len <= 8), accumulated here.
    pub(crate) ret: Option<[u8; 8]>,
}

/// A fetching AMO awaiting its old value.
pub(crate) struct PendingAmo {
    pub(crate) ret: bool,
    pub(crate) dst: u64,
    pub(crate) width: u32,
}

/// What this PE awaits from one peer.
#[derive(Default)]
pub(crate) struct Pending {
    pub(crate) gets: HashMap<u64, PendingGet>,
    pub(crate) amos: HashMap<u64, PendingAmo>,
    /// Requests (first sequence number, tickets) completed by the next QUIET completion that covers
    /// them, in order.
    pub(crate) acks: VecDeque<(u64, u64)>,
}

/// Frames an extension's answer writes to the connection.
pub(crate) type SendFn = Box<dyn FnOnce(&mut dyn FrameLink) -> Result<()> + Send>;

/// What a responder thread sends for the receiver.
pub(crate) enum Job {
    /// A GET's bytes, read at the target when the request arrived (see `Engine::apply`).
    Get { seq: u64, offset: u64, data: Vec<u8> },
    Amo { seq: u64, width: Width, value: u64 },
    QuietAck { seq: u64 },
    /// An answer an extension of the engine sends (the emulated NIC's responder): the frames it
    /// writes to the connection.
    Send(SendFn),
}

/// The link to one peer PE.
pub(crate) struct Link {
    pub(crate) peer: u32,
    /// The sending half (None once closed).
    pub(crate) tx: Mutex<Option<Box<dyn FrameLink>>>,
    pub(crate) pending: Mutex<Pending>,
    /// Work for the responder thread (None once finalize closed it).
    pub(crate) jobs: Mutex<Option<mpsc::Sender<Job>>>,
    /// Set when the peer sent CLOSE.
    pub(crate) closed: AtomicBool,
    /// Set when the connection ended without CLOSE while nothing was in flight (see `Engine::receive`).
    pub(crate) gone: AtomicBool,
}

impl Link {
    pub(crate) fn new(peer: u32, tx: Option<Box<dyn FrameLink>>, jobs: Option<mpsc::Sender<Job>>) -> Link {
        Link {
            peer,
            tx: Mutex::new(tx),
            pending: Mutex::new(Pending::default()),
            jobs: Mutex::new(jobs),
            closed: AtomicBool::new(false),
            gone: AtomicBool::new(false),
        }
    }

    /// Runs `f` with the sending half; an error once the connection is closed.
    pub(crate) fn send<T>(&self, f: impl FnOnce(&mut dyn FrameLink) -> Result<T>) -> Result<T> {
        let mut tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        match tx.as_mut() {
            Some(c) => f(&mut **c),
            None => Err(Error::new(format!("proxy: the connection to PE {} is closed", self.peer))),
        }
    }

    /// Queues `j` for this peer's responder thread (dropped once finalize closed the queue).
    pub(crate) fn push(&self, j: Job) {
        if let Some(tx) = self.jobs.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            let _ = tx.send(j);
        }
    }
}

/// The responder's next job: soon after the previous one (`last`), the queue is polled before the
/// responder sleeps in `recv` (`tcp::poll_briefly`). None: the receiver is gone.
pub(crate) fn next_job(jobs: &mpsc::Receiver<Job>, last: &mut Instant) -> Option<Job> {
    let mut got = None;
    poll_briefly(Some(*last), || match jobs.try_recv() {
        Ok(j) => {
            got = Some(Some(j));
            true
        }
        Err(mpsc::TryRecvError::Empty) => false,
        Err(mpsc::TryRecvError::Disconnected) => {
            got = Some(None);
            true
        }
    });
    let j = got.unwrap_or_else(|| jobs.recv().ok());
    *last = Instant::now();
    j
}
