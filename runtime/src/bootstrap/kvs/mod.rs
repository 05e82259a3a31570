//! The launcher's key-value store, through which PE 0 hands the bootstrap address and the job key to
//! the other PEs when RSHMEM_BOOTSTRAP and RSHMEM_JOB_KEY are not set: PMIx (Open MPI's mpirun and
//! prterun, `srun --mpi=pmix`), else PMI-2 or PMI-1 on the socket `PMI_FD` (MPICH's hydra,
//! `srun --mpi=pmi2`, `rshmrun --pmi`). NVSHMEM's PMI, PMI-2 and PMIx bootstraps do the same.
//!
//! The PMIx client library is found at run time (`libpmix.so.2`, else `libpmix.so`): nothing is linked,
//! and a build runs where PMIx is absent. PMI-1 and PMI-2 are wire protocols on an inherited socket;
//! no library is needed.
//!
//! Every wait is bounded by RSHMEM_BOOTSTRAP_TIMEOUT: a PE that dies during the exchange makes the
//! others fail with an error naming the step, if the launcher has not ended the job first.
//!
//! The key goes through the store only when PE 0 drew it; the store is as private as the launcher
//! makes it (PMIx: a server that checks each client's user id; PMI_FD: a socket pair per process).

mod pmix;
mod simple;

use crate::error::{Error, Result};
use std::time::Duration;

/// A launcher's store, found in the environment (not yet connected).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvsFound {
    /// A PMIx server: `PMIX_NAMESPACE`, `PMIX_RANK`, and the variable with the server's address.
    Pmix {
        /// `PMIX_NAMESPACE`.
        namespace: String,
        /// `PMIX_RANK`.
        rank: String,
        /// The `PMIX_SERVER_URI*` variable found.
        uri_var: String,
    },
    /// A PMI server on the inherited socket `PMI_FD` (PMI-1, else PMI-2, as the server answers).
    PmiFd {
        /// The descriptor.
        fd: i32,
    },
}

impl KvsFound {
    /// What was found, for messages: "PMIx (namespace 1234, PMIX_SERVER_URI4)".
    pub fn describe(&self) -> String {
        match self {
            KvsFound::Pmix { namespace, uri_var, .. } => format!("a PMIx server ({uri_var}, namespace {namespace})"),
            KvsFound::PmiFd { fd } => format!("a PMI server on PMI_FD={fd}"),
        }
    }
}

/// The variables that name a PMIx server, newest protocol first.
const PMIX_URI_VARS: &[&str] = &["PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3", "PMIX_SERVER_URI21", "PMIX_SERVER_URI2"];

/// Looks for a launcher's store in the environment (`get`: a variable's value). PMIx first (a PMIx
/// launcher may also serve PMI-1), then `PMI_FD`. A `PMI_FD` that is no descriptor number is an error
/// naming it.
pub fn find_kvs(get: &dyn Fn(&str) -> Option<String>) -> Result<Option<KvsFound>> {
    let var = |n: &str| get(n).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    if let (Some(namespace), Some(rank)) = (var("PMIX_NAMESPACE"), var("PMIX_RANK")) {
        if let Some(uri_var) = PMIX_URI_VARS.iter().find(|v| var(v).is_some()) {
            return Ok(Some(KvsFound::Pmix { namespace, rank, uri_var: uri_var.to_string() }));
        }
    }
    match var("PMI_FD") {
        None => Ok(None),
        Some(v) => match v.parse::<i32>() {
            Ok(fd) if fd >= 0 => Ok(Some(KvsFound::PmiFd { fd })),
            _ => Err(Error::new(format!(
                "rshmem bootstrap: PMI_FD={v:?} is not a file descriptor number (the launcher's PMI socket)"
            ))),
        },
    }
}

enum Inner {
    Pmix(pmix::Client),
    Simple(simple::Client),
}

/// A connection to the launcher's key-value store (see the module's description). Every call waits at
/// most the timeout given to [`LauncherKvs::open`].
pub struct LauncherKvs {
    inner: Inner,
    what: String,
}

impl std::fmt::Debug for LauncherKvs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LauncherKvs").field("what", &self.what).finish_non_exhaustive()
    }
}

impl LauncherKvs {
    /// Connects to the store `found` describes, as PE `pe` of `npes` (the launcher's numbering, checked
    /// against the store's where it says one). Each later call waits at most `timeout`.
    pub fn open(found: &KvsFound, pe: usize, npes: usize, timeout: Duration) -> Result<LauncherKvs> {
        match found {
            KvsFound::Pmix { .. } => {
                let c = pmix::Client::init(timeout)?;
                let what = format!("PMIx (namespace {}, via {})", c.namespace(), c.library());
                if c.rank() != pe {
                    return Err(Error::new(format!(
                        "rshmem bootstrap: PMIx says this process is rank {} of namespace {}, but the launcher's variables make it PE {pe}",
                        c.rank(),
                        c.namespace()
                    )));
                }
                Ok(LauncherKvs { inner: Inner::Pmix(c), what })
            }
            KvsFound::PmiFd { fd } => {
                let c = simple::Client::init(*fd, pe, npes, timeout)?;
                let what = format!("{} on PMI_FD={fd}", c.version());
                Ok(LauncherKvs { inner: Inner::Simple(c), what })
            }
        }
    }

    /// "PMIx (namespace 123, via libpmix.so.2)", "PMI-1 on PMI_FD=5".
    pub fn name(&self) -> &str {
        &self.what
    }

    /// Publishes `key` = `value` (visible to the others after the next [`LauncherKvs::fence`]).
    /// `key` is letters, digits and `_`; `value` has no spaces, `=` or `;`.
    pub fn put(&mut self, key: &str, value: &str) -> Result<()> {
        match &mut self.inner {
            Inner::Pmix(c) => c.put(key, value),
            Inner::Simple(c) => c.put(key, value),
        }
    }

    /// A barrier of every process of the job that also makes what each put visible to all.
    pub fn fence(&mut self) -> Result<()> {
        match &mut self.inner {
            Inner::Pmix(c) => c.fence(),
            Inner::Simple(c) => c.fence(),
        }
    }

    /// The value PE `pe` put under `key` before the last fence.
    pub fn get(&mut self, pe: usize, key: &str) -> Result<String> {
        match &mut self.inner {
            Inner::Pmix(c) => c.get(pe, key),
            Inner::Simple(c) => c.get(pe, key),
        }
    }

    /// Ends this process's use of the store (PMIx_Finalize, PMI finalize), so that the launcher does
    /// not count this process's later exit as an exit without finalize.
    pub fn finish(self) -> Result<()> {
        match self.inner {
            Inner::Pmix(c) => c.finish(),
            Inner::Simple(c) => c.finish(),
        }
    }
}

/// Whether the PMIx client library can be loaded here, and from where (for `rshmrun --diagnose`).
pub fn pmix_library() -> std::result::Result<String, String> {
    pmix::library_check()
}
