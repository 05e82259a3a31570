//! Helpers shared by the launcher's integration tests (launcher.rs, nodes.rs).
#![allow(dead_code)]

use std::io::Read;
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

/// Reads `pipe` to its end on a thread, appending everything to `into`.
pub fn collect(mut pipe: impl Read + Send + 'static, into: Arc<Mutex<Vec<u8>>>) -> JoinHandle<()> {
    thread::spawn(move || {
        let mut buf = [0u8; 65536];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => into.lock().unwrap().extend_from_slice(&buf[..n]),
            }
        }
    })
}
