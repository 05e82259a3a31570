//! The modules of one CUDA backend instance and the device state they share: every module that
//! carries the device library has an `rshmemi_device_state`, and the runtime writes the same state into
//! all of them (modules it loaded, and nvcc-linked programs' modules that registered themselves). The
//! runtime's own module (the device library and its service kernels) is loaded here on first use.
//! Both the backend (publishing the state, `Module::load`) and the services (launching service
//! kernels) use this registry.

use super::driver::{self, check};
use super::module::Module;
use crate::error::{Error, Result};
use cudarc::driver::sys as cu;
use rshmem_device::state::DeviceState;
use std::sync::{Arc, Mutex};

struct Registry {
    /// Device addresses of `rshmemi_device_state` in every module that carries the device library.
    state_addrs: Vec<u64>,
    state: Option<DeviceState>,
    /// Modules loaded for this instance (`Module::load`): kept loaded while it lives, since their
    /// device-state addresses are in `state_addrs`; unloaded when the instance retires them.
    modules: Vec<Arc<Module>>,
}

/// The modules of one backend instance (see the module notes).
pub struct Modules {
    ctx: cu::CUcontext,
    registry: Mutex<Registry>,
    /// The runtime's own module (device library + its kernels: barrier/quiet on stream, the proxy's
    /// service kernels), loaded at first use: JIT-compiling the device library takes a while and most
    /// programs never need it.
    own: Mutex<Option<Arc<Module>>>,
}

// SAFETY: CUcontext is a handle usable from any thread once made current there (every method binds
// it first); all mutable state is behind the Mutexes.
unsafe impl Send for Modules {}
// SAFETY: as for Send; &self methods lock before touching state, and the driver API is thread-safe.
unsafe impl Sync for Modules {}

impl Modules {
    /// An empty registry for the backend instance of context `ctx` (the runtime's module loads on first
    /// use).
    pub fn new(ctx: cu::CUcontext) -> Modules {
        Modules { ctx, registry: Mutex::new(Registry { state_addrs: vec![], state: None, modules: vec![] }), own: Mutex::new(None) }
    }

    fn bind(&self) -> Result<()> {
        // SAFETY: ctx is the retained primary context, valid for the process's life.
        check(unsafe { cu::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")
    }

    /// Writes the device state into every registered module.
    fn publish_all(&self, r: &Registry) -> Result<()> {
        if let Some(st) = r.state.as_ref() {
            for &a in &r.state_addrs {
                // SAFETY: every address in state_addrs is a module's `rshmemi_device_state`, of
                // size_of::<DeviceState>() bytes, alive while this instance lives (register_state's
                // contract; our own modules are held in `modules`/`own`); st is a local value.
                unsafe { driver::htod(a, st as *const DeviceState as *const u8, std::mem::size_of::<DeviceState>())? };
            }
        }
        Ok(())
    }

    /// Keeps `state` and writes it into every registered module (now and into modules registered later).
    pub fn publish(&self, state: &DeviceState) -> Result<()> {
        self.bind()?;
        let mut r = self.registry.lock().unwrap();
        r.state = Some(*state);
        self.publish_all(&r)
    }

    /// Registers another module's `rshmemi_device_state` and fills it in (now and whenever the state
    /// is published again).
    ///
    /// # Safety
    /// `addr` must be the device address of a module's `rshmemi_device_state` in this instance's
    /// context (`size_of::<DeviceState>()` writable bytes that nothing else uses), and that module must
    /// stay loaded as long as this instance lives (until [`Modules::retire`]).
    pub unsafe fn register_state(&self, addr: u64) -> Result<()> {
        self.bind()?;
        let mut r = self.registry.lock().unwrap();
        if !r.state_addrs.contains(&addr) {
            r.state_addrs.push(addr);
        }
        self.publish_all(&r)
    }

    /// The device address of `module`'s `rshmemi_device_state`, checked to be the size this runtime
    /// writes. `call` names the API call for errors.
    fn module_state(&self, module: cu::CUmodule, call: &str) -> Result<u64> {
        if module.is_null() {
            return Err(Error::new(format!("{call}: the module is null")));
        }
        self.bind()?;
        let name = std::ffi::CString::new(rshmem_device::state::STATE_SYMBOL).unwrap();
        let (mut addr, mut bytes) = (0, 0);
        // SAFETY: out-pointers to locals; the driver checks the module handle.
        let r = unsafe { cu::cuModuleGetGlobal_v2(&mut addr, &mut bytes, module, name.as_ptr()) };
        if r != cu::CUresult::CUDA_SUCCESS {
            return Err(Error::new(format!(
                "{call}: the module has no {} ({r:?}): was it device-linked with librshmem_device.a (nvcc -rdc=true ... librshmem_device.a)?",
                rshmem_device::state::STATE_SYMBOL
            )));
        }
        let want = std::mem::size_of::<DeviceState>();
        if bytes != want {
            return Err(Error::new(format!(
                "{call}: the module's device state is {bytes} bytes but this librshmem writes {want}: it was linked with a librshmem_device.a of another rshmem build"
            )));
        }
        Ok(addr)
    }

    /// `rshmem_cumodule_init`: registers the module's device state (see `register_state`).
    ///
    /// # Safety
    /// `module` must stay loaded until `unregister_module(module)` or until this instance retires.
    pub unsafe fn register_module(&self, module: cu::CUmodule) -> Result<()> {
        let addr = self.module_state(module, "rshmem_cumodule_init")?;
        // SAFETY: addr is the module's own rshmemi_device_state of the right size (checked above); the
        // caller keeps the module loaded while it is registered.
        unsafe { self.register_state(addr) }
    }

    /// `rshmem_cumodule_finalize`: the module's device state is no longer written.
    pub fn unregister_module(&self, module: cu::CUmodule) -> Result<()> {
        let addr = self.module_state(module, "rshmem_cumodule_finalize")?;
        let mut r = self.registry.lock().unwrap();
        let before = r.state_addrs.len();
        r.state_addrs.retain(|&a| a != addr);
        if r.state_addrs.len() == before {
            return Err(Error::new("rshmem_cumodule_finalize: the module was not registered by rshmem_cumodule_init"));
        }
        Ok(())
    }

    /// Makes `m` (loaded in this instance's context) one of this instance's modules: it stays loaded
    /// while the instance lives, and its device state (if it has one) is registered and filled in.
    pub fn adopt(&self, m: &Arc<Module>) -> Result<()> {
        let mut addr = None;
        m.with_state_addr(|a| addr = Some(a));
        self.registry.lock().unwrap().modules.push(m.clone());
        if let Some(a) = addr {
            // SAFETY: a is m's own `rshmemi_device_state` (cuModuleGetGlobal), and m is held in
            // `modules` (just above) until this instance retires.
            unsafe { self.register_state(a)? };
        }
        Ok(())
    }

    /// The runtime's own module, loaded (and its device state filled in) on first use.
    pub fn own(&self) -> Result<Arc<Module>> {
        let mut m = self.own.lock().unwrap();
        if m.is_none() {
            let loaded = Arc::new(Module::load_in(self.ctx, &[], None)?);
            self.adopt(&loaded)?;
            *m = Some(loaded);
        }
        Ok(m.clone().unwrap())
    }

    /// The context these modules live in.
    pub fn ctx(&self) -> cu::CUcontext {
        self.ctx
    }

    /// The instance ends (the context is synchronized): every module that still holds this instance's
    /// state (an nvcc program's, which outlives us) now reads "not initialized", so a device call after
    /// finalize fails naming the call instead of using the heap the backend unmaps next; the next init
    /// registers and fills it again. Our own modules are released.
    pub fn retire(&self) {
        let mut r = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        let zero = 0u64.to_le_bytes();
        for &a in &r.state_addrs {
            // SAFETY: a is a registered `rshmemi_device_state` (register_state's contract: alive while
            // this instance lives, and it still does); the magic is its first 8 bytes.
            let _ = unsafe { driver::htod(a + std::mem::offset_of!(DeviceState, magic) as u64, zero.as_ptr(), 8) };
        }
        r.modules.clear();
        self.own.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}
