//! The few NVML calls explain needs, from `libnvidia-ml.so.1` opened at run time.
//!
//! Why a hand binding through `libloading` rather than the `nvml-wrapper` crate: explain needs
//! eleven entry points (init, shutdown, two handle look-ups, name, NVLink state and version,
//! four PCIe link queries), all with plain integer and pointer arguments; `nvml-wrapper` brings
//! a generated binding of the whole library, a procedural-macro crate and their build time to
//! every benchmark for them, and `libloading` is already in the workspace. A machine without
//! the driver gets a note, never a failure: [`Nvml::open`] returns why it could not.
//!
//! Entry points and types as NVIDIA documents them in the NVML API reference
//! (<https://docs.nvidia.com/deploy/nvml-api/>): every call returns `nvmlReturn_t` (0 is
//! success), a device is an opaque pointer, NVLink state is `nvmlEnableState_t` (1 enabled).

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};

use libloading::{Library, Symbol};

type Device = *mut c_void;
type Ret = c_int;

/// `NVML_ERROR_NOT_SUPPORTED`.
const NOT_SUPPORTED: Ret = 3;
/// NVML's `NVML_NVLINK_MAX_LINKS` in current headers (18); links past a device's last one
/// answer "invalid argument".
pub const MAX_LINKS: u32 = 18;

/// An initialised NVML; shut down when dropped.
pub struct Nvml {
    lib: Library,
}

/// One GPU as NVML shows it.
pub struct NvmlGpu {
    /// `nvmlDeviceGetName`.
    pub name: Option<String>,
    /// `(link, active, version)` for every link NVML answered for.
    pub links: Vec<(u32, bool, Option<u32>)>,
    /// Why NVLink could not be read, when it could not (not supported: no NVLink).
    pub nvlink_note: Option<String>,
    /// `(max gen, max width, current gen, current width)`, each when NVML answered.
    pub pcie: [Option<u32>; 4],
}

impl Nvml {
    /// Opens and initialises NVML, or says why not.
    pub fn open() -> Result<Nvml, String> {
        // SAFETY: loading the NVIDIA driver's own library runs its initialisers, which is how
        // every NVML user starts.
        let lib = unsafe { Library::new("libnvidia-ml.so.1") }
            .map_err(|e| format!("NVML not available ({e})"))?;
        {
            // SAFETY: nvmlInit_v2 takes no argument and returns nvmlReturn_t.
            let init: Symbol<unsafe extern "C" fn() -> Ret> = unsafe { lib.get(b"nvmlInit_v2") }
                .map_err(|e| format!("NVML has no nvmlInit_v2: {e}"))?;
            // SAFETY: as above.
            let rc = unsafe { init() };
            if rc != 0 {
                return Err(format!("NVML could not start (nvmlInit_v2 returned {rc})"));
            }
        }
        let nvml = Nvml { lib };
        Ok(nvml)
    }

    /// # Safety
    /// `name` must be an NVML entry point taking no argument and returning `nvmlReturn_t`.
    unsafe fn call0(&self, name: &str) -> Result<Ret, String> {
        // SAFETY: the signature is the caller's promise.
        let f: Symbol<unsafe extern "C" fn() -> Ret> = unsafe { self.lib.get(name.as_bytes()) }
            .map_err(|e| format!("NVML has no {name}: {e}"))?;
        // SAFETY: as above.
        Ok(unsafe { f() })
    }

    /// The device with this PCI bus id (`0000:04:00.0`), or the first device.
    pub fn device(&self, pci_bus_id: Option<&str>) -> Result<NvmlGpu, String> {
        let mut dev: Device = std::ptr::null_mut();
        let rc = match pci_bus_id {
            Some(id) => {
                let id = CString::new(id).map_err(|_| "PCI bus id with a NUL".to_string())?;
                // SAFETY: documented signature; `id` outlives the call, `dev` is written.
                let f: Symbol<unsafe extern "C" fn(*const c_char, *mut Device) -> Ret> =
                    unsafe { self.lib.get(b"nvmlDeviceGetHandleByPciBusId_v2") }
                        .map_err(|e| format!("NVML: {e}"))?;
                // SAFETY: `f` has nvmlDeviceGetHandleByPciBusId_v2's documented signature; `id` is
                // NUL-terminated and outlives the call, `dev` is a valid place for the handle.
                unsafe { f(id.as_ptr(), &mut dev) }
            }
            None => {
                // SAFETY: documented signature.
                let f: Symbol<unsafe extern "C" fn(c_uint, *mut Device) -> Ret> =
                    unsafe { self.lib.get(b"nvmlDeviceGetHandleByIndex_v2") }
                        .map_err(|e| format!("NVML: {e}"))?;
                // SAFETY: `f` has nvmlDeviceGetHandleByIndex_v2's documented signature; `dev` is a
                // valid place for the handle.
                unsafe { f(0, &mut dev) }
            }
        };
        if rc != 0 || dev.is_null() {
            return Err(format!(
                "NVML found no GPU {} (error {rc})",
                pci_bus_id.unwrap_or("0")
            ));
        }
        let (links, nvlink_note) = match self.links(dev) {
            Ok(links) => (links, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        Ok(NvmlGpu {
            name: self.name(dev),
            links,
            nvlink_note,
            pcie: [
                "nvmlDeviceGetMaxPcieLinkGeneration",
                "nvmlDeviceGetMaxPcieLinkWidth",
                "nvmlDeviceGetCurrPcieLinkGeneration",
                "nvmlDeviceGetCurrPcieLinkWidth",
            ]
            .map(|n| self.uint(dev, n)),
        })
    }

    fn name(&self, dev: Device) -> Option<String> {
        let mut buf = [0 as c_char; 96];
        // SAFETY: documented signature; the buffer's length is passed.
        let f: Symbol<unsafe extern "C" fn(Device, *mut c_char, c_uint) -> Ret> =
            unsafe { self.lib.get(b"nvmlDeviceGetName") }.ok()?;
        // SAFETY: `f` has the documented signature; `dev` came from NVML and the buffer holds
        // `buf.len()` characters.
        let rc = unsafe { f(dev, buf.as_mut_ptr(), buf.len() as c_uint) };
        buf[buf.len() - 1] = 0;
        (rc == 0).then(|| {
            // SAFETY: `buf` ends in a NUL (written above), so the string ends inside it.
            unsafe { CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        })
    }

    fn uint(&self, dev: Device, name: &str) -> Option<u32> {
        let mut v: c_uint = 0;
        // SAFETY: the four PCIe queries take (device, unsigned int *).
        let f: Symbol<unsafe extern "C" fn(Device, *mut c_uint) -> Ret> =
            unsafe { self.lib.get(name.as_bytes()) }.ok()?;
        // SAFETY: `f` takes (device, unsigned int *): `dev` came from NVML, `v` is a valid place.
        (unsafe { f(dev, &mut v) } == 0).then_some(v)
    }

    fn links(&self, dev: Device) -> Result<Vec<(u32, bool, Option<u32>)>, String> {
        // SAFETY: documented signatures: (device, link, enable state *) and
        // (device, link, unsigned int *).
        let state: Symbol<unsafe extern "C" fn(Device, c_uint, *mut c_int) -> Ret> =
            unsafe { self.lib.get(b"nvmlDeviceGetNvLinkState") }
                .map_err(|e| format!("NVML: {e}"))?;
        // SAFETY: nvmlDeviceGetNvLinkVersion's documented signature, as above.
        let version: Symbol<unsafe extern "C" fn(Device, c_uint, *mut c_uint) -> Ret> =
            unsafe { self.lib.get(b"nvmlDeviceGetNvLinkVersion") }
                .map_err(|e| format!("NVML: {e}"))?;
        let mut links = Vec::new();
        for link in 0..MAX_LINKS {
            let mut on: c_int = 0;
            // SAFETY: `state` has the documented signature; `dev` came from NVML, `on` is a valid
            // place.
            let rc = unsafe { state(dev, link, &mut on) };
            if rc == NOT_SUPPORTED && link == 0 {
                return Ok(links);
            }
            if rc != 0 {
                continue;
            }
            let mut v: c_uint = 0;
            // SAFETY: `version` has the documented signature; `dev` came from NVML, `v` is a valid
            // place.
            let v = (unsafe { version(dev, link, &mut v) } == 0).then_some(v);
            links.push((link, on == 1, v));
        }
        Ok(links)
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: nvmlShutdown takes no argument; NVML was initialised in `open`.
        let _ = unsafe { self.call0("nvmlShutdown") };
    }
}
