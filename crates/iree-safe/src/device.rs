//! HAL devices, opened by driver name or device URI.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::buffer_pool::BufferPool;
use crate::driver::DeviceInfo;
use crate::error::{check, Context, Error, Result};
use crate::flags;
use crate::handle::Handle;
use crate::instance::Instance;
use crate::memory::MemoryStatistics;
use crate::{strings, sys};

/// A HAL device (`local-sync`, `local-task`, `vulkan`, `cuda`, or a device URI
/// such as `local-task://`). Cheap to clone: clones share the device.
///
/// Corresponds to `iree_hal_create_device` (with an async proactor pool, as
/// IREE's runtime API creates devices) and `iree_hal_device_retain` /
/// `iree_hal_device_release`.
#[doc(alias = "iree_hal_device_t")]
#[derive(Debug, Clone)]
pub struct Device {
    raw: Handle<sys::iree_hal_device_t>,
    uri: Arc<str>,
    /// The devices whose buffers this one's calls may take: those opened
    /// with [`open_beside`](Self::open_beside) of one another (shared by
    /// every clone of every one of them).
    host_memory: Arc<HostMemory>,
}

/// The local devices of one [`Device::open_beside`] family, held as long
/// as any handle of any of them lives. Their buffers are heap memory of
/// this process, which each of them maps by the buffer's own functions
/// (`iree/hal/buffer_heap.c`, `iree/hal/local/transient_buffer.c`) and the
/// HAL module does not tie to a device (`hal.buffer.assert` checks length,
/// memory type and usage only, `iree/modules/hal/utils/buffer_diagnostics.c`),
/// so a call on one may take the others' tensors and return them. A buffer
/// does not retain its device, though: a heap buffer updates its
/// allocator's statistics when freed, and a transient one returns its
/// memory to its device's pool. So a tensor of one member (a call result
/// aliasing an argument, say) must keep every member alive, which this
/// does.
#[derive(Debug, Default)]
struct HostMemory {
    members: Mutex<Vec<Handle<sys::iree_hal_device_t>>>,
}

// SAFETY: HAL devices are shared across threads by IREE's own runtime and
// are thread-safe per IREE's maintainers (docs/architecture.md, "Threads");
// the handle holds one reference, counted atomically.
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

impl Device {
    /// Opens the default device of a driver (`"local-sync"`,
    /// `"local-task"`, `"cuda"`) or the device a URI names.
    ///
    /// Fails with `NotFound` when no such driver was compiled into the
    /// runtime (see `cargo xtask build-iree --drivers`).
    ///
    /// # Errors
    ///
    /// [`Error::Iree`](crate::Error::Iree): `NotFound` for a driver the
    /// runtime lacks, or the driver's own error when the device cannot be
    /// created (no GPU, say).
    #[doc(alias = "iree_hal_create_device")]
    pub fn open(uri: &str) -> Result<Device> {
        let held = flags::lock();
        Device::open_holding(&held, uri)
    }

    /// Opens a `local-task` device whose task executor has at most
    /// `workers` worker threads: one per physical core of the calling
    /// thread's NUMA node, up to `workers`, each pinned to its core, where
    /// [`open("local-task")`](Self::open) gets IREE's default cap of 64.
    ///
    /// IREE's `local-task` driver reads its executor's shape from its
    /// process-global runtime flags when it is created; this sets
    /// `--task_topology_max_group_count` for this one open and back to
    /// IREE's default after it, under the lock every open takes, so other
    /// devices are not affected. (A program that sets that flag itself
    /// with `iree_flags_parse` loses its setting here.)
    ///
    /// ```no_run
    /// use std::num::NonZeroUsize;
    ///
    /// let one_worker = iree_safe::Device::open_local_task(NonZeroUsize::MIN)?;
    /// let runtime = iree_safe::Runtime::with_device(one_worker)?;
    /// # drop(runtime);
    /// # Ok::<(), iree_safe::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As for [`open`](Self::open); and [`Error::Iree`](crate::Error::Iree)
    /// when IREE refuses the flag (a runtime built without its flags).
    #[doc(alias = "task_topology_max_group_count")]
    pub fn open_local_task(workers: NonZeroUsize) -> Result<Device> {
        let held = flags::lock();
        flags::set_task_workers(&held, Some(workers))?;
        let opened = Device::open_holding(&held, "local-task");
        let reset = flags::set_task_workers(&held, None);
        let device = opened?;
        reset?;
        Ok(device)
    }

    /// [`open`](Self::open), the caller holding the flags lock.
    fn open_holding(_held: &MutexGuard<'static, ()>, uri: &str) -> Result<Device> {
        Instance::global()?;
        let allocator = sys::iree_allocator_system();
        // SAFETY: the pool constructor stores one new reference on success;
        // the options are IREE's defaults.
        let pool = unsafe {
            Handle::create(|out| {
                sys::iree_async_proactor_pool_create(
                    sys::iree_numa_node_count(),
                    std::ptr::null(),
                    sys::iree_async_proactor_pool_options_default(),
                    allocator,
                    out,
                )
            })
        }?;
        let params = sys::iree_hal_device_create_params_t {
            proactor_pool: pool.as_ptr(),
            ..sys::iree_hal_device_create_params_default()
        };
        // SAFETY: the registry is a process static, `uri` outlives the call,
        // `params` (and the pool it names, kept alive by `pool`) is valid for
        // the call; the device retains the pool, so our reference can go
        // when `pool` drops. On success one device reference is ours.
        let created = unsafe {
            Handle::create(|out| {
                sys::iree_hal_create_device(
                    sys::iree_hal_driver_registry_default(),
                    strings::view(uri),
                    &params,
                    BufferPool::global().allocator(),
                    out,
                )
            })
        };
        let hint = crate::driver::missing_driver_hint(&created);
        let raw = created.context(|| format!("cannot open device `{uri}`{hint}"))?;
        Ok(Device {
            raw,
            uri: uri.into(),
            host_memory: Arc::default(),
        })
    }

    /// Opens a `local-task` device beside this local (`local-sync` or
    /// `local-task`) one, with at most `workers` workers as
    /// [`open_local_task`](Self::open_local_task), whose calls take this
    /// device's tensors and whose tensors this device's calls take, without
    /// a copy: both keep their buffers in this process's memory. So a
    /// program can run its small calls on the single-threaded `local-sync`
    /// and its large ones on several cores, passing tensors between them.
    /// Every device of such a family stays open while a handle or tensor of
    /// any of them lives (a call's result may be another member's buffer),
    /// so open one beside a device once, not per call: each keeps its
    /// worker threads until the whole family is dropped.
    ///
    /// ```no_run
    /// use std::num::NonZeroUsize;
    ///
    /// let small = iree_safe::Device::open("local-sync")?;
    /// let large = small.open_beside(NonZeroUsize::new(2).unwrap())?;
    /// assert!(large.shares_memory_with(&small));
    /// # Ok::<(), iree_safe::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] when this device is not a local CPU device
    /// (a GPU's buffers are not host memory), else as
    /// [`open_local_task`](Self::open_local_task).
    #[doc(alias = "iree_hal_create_device")]
    pub fn open_beside(&self, workers: NonZeroUsize) -> Result<Device> {
        if !self.is_local() {
            return Err(Error::Unsupported(format!(
                "only a local CPU device (`local-sync`, `local-task`) has a device beside \
                 it that shares its memory; `{}` keeps its buffers on its own",
                self.uri
            )));
        }
        let opened = Device::open_local_task(workers)?;
        let mut members = self
            .host_memory
            .members
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if members.is_empty() {
            members.push(self.raw.clone());
        }
        members.push(opened.raw.clone());
        drop(members);
        Ok(Device {
            host_memory: Arc::clone(&self.host_memory),
            ..opened
        })
    }

    /// True when a call on this device may take `other`'s tensors as they
    /// are: the same device, or one opened [beside](Self::open_beside) it.
    pub fn shares_memory_with(&self, other: &Device) -> bool {
        self.same_device(other) || Arc::ptr_eq(&self.host_memory, &other.host_memory)
    }

    /// True for IREE's local CPU drivers (`local-sync`, `local-task`), whose
    /// buffers are heap memory: host memory the compiled code reads directly,
    /// which [`Tensor::import_shared`](crate::Tensor::import_shared) can
    /// hand it without a copy.
    pub fn is_local(&self) -> bool {
        let driver = self.uri.split("://").next().unwrap_or_default();
        matches!(driver, "local-sync" | "local-task")
    }

    /// The devices `driver` (`"local-sync"`, `"vulkan"`, `"cuda"`...) can
    /// open, in the driver's order, each with the URI that opens it and its
    /// kind as the driver reports it.
    ///
    /// ```no_run
    /// use iree_safe::Device;
    ///
    /// // A GPU if Vulkan has one, else the CPU.
    /// let gpu = Device::available("vulkan")
    ///     .unwrap_or_default()
    ///     .into_iter()
    ///     .find(|info| !info.kind.is_software());
    /// let device = match gpu {
    ///     Some(info) => Device::open(&info.uri())?,
    ///     None => Device::open("local-task")?,
    /// };
    /// # drop(device);
    /// # Ok::<(), iree_safe::Error>(())
    /// ```
    ///
    /// The driver is created for the question and released before this
    /// returns (Vulkan and CUDA load their system library to answer it).
    /// The device reports are only read for their kind: a driver that
    /// writes none, or fails to, lists its devices as
    /// [`DeviceKind::Unknown`](crate::DeviceKind::Unknown).
    ///
    /// # Errors
    ///
    /// [`Error::Iree`](crate::Error::Iree): `NotFound` for a driver the
    /// runtime lacks (see `cargo xtask build-iree --drivers`), or the
    /// driver's own error when it cannot be created (`Unavailable` without
    /// `libcuda.so`, say) or cannot list its devices.
    #[doc(alias = "iree_hal_driver_query_available_devices")]
    #[doc(alias = "iree_hal_driver_registry_try_create")]
    pub fn available(driver: &str) -> Result<Vec<DeviceInfo>> {
        crate::driver::available(driver)
    }

    /// The driver name or URI this device was opened with.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// A configuration value of the device, such as `("cuda.device",
    /// "compute_capability_major")` on a CUDA device or `("hal.device.id",
    /// "local-sync")` (1 when the device matches the pattern). Fails with
    /// `NotFound` for a key the driver does not know.
    ///
    /// # Errors
    ///
    /// [`Error::Iree`](crate::Error::Iree) with code `NotFound` for a key the
    /// driver does not know.
    #[doc(alias = "iree_hal_device_query_i64")]
    pub fn query_i64(&self, category: &str, key: &str) -> Result<i64> {
        let mut value = 0i64;
        // SAFETY: the device is live; the views outlive the call; `value` is
        // a valid out-pointer; the status is freed by `check`.
        unsafe {
            check(sys::iree_hal_device_query_i64(
                self.as_ptr(),
                strings::view(category),
                strings::view(key),
                &mut value,
            ))
        }
        .context(|| format!("querying `{category} :: {key}` of device `{}`", self.uri))?;
        Ok(value)
    }

    /// The bytes this device's allocator holds now, and the most it held
    /// at once since the device was opened (see [`MemoryStatistics`] for
    /// what is counted). Every clone of a device shares its allocator, so
    /// the figures cover every tensor and call result on it; another
    /// [`Device::open`] (another [`Runtime`](crate::Runtime)) counts apart.
    ///
    /// ```no_run
    /// # let runtime = iree_safe::Runtime::new("local-sync")?;
    /// let before = runtime.device().memory_statistics()?;
    /// let x = iree_safe::Tensor::from_slice(runtime.device(), &[1024], &[0.0f32; 1024])?;
    /// let after = runtime.device().memory_statistics()?;
    /// assert!(after.device_bytes_in_use >= before.device_bytes_in_use + 4096);
    /// # drop(x);
    /// # Ok::<(), iree_safe::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Internal`] when the device has no allocator, which IREE's
    /// devices always have.
    #[doc(alias = "iree_hal_allocator_query_statistics")]
    #[doc(alias = "iree_hal_device_allocator")]
    pub fn memory_statistics(&self) -> Result<MemoryStatistics> {
        // SAFETY: the device is live (we hold a reference). The allocator
        // it returns is borrowed: the device retains it for its life or
        // until `iree_hal_device_replace_allocator`, which this crate never
        // calls (iree/hal/device.h), so it is live for the query below.
        let allocator = unsafe { sys::iree_hal_device_allocator(self.as_ptr()) };
        if allocator.is_null() {
            return Err(Error::internal(format!(
                "device `{}` has no allocator",
                self.uri
            )));
        }
        let mut raw = sys::iree_hal_allocator_statistics_t::default();
        // SAFETY: the allocator is live (see above) and the query is
        // thread-safe (iree/hal/allocator.h: "Thread-safe; statistics are
        // captured at the time the call is made"); `raw` is a valid,
        // writable `iree_hal_allocator_statistics_t`, which IREE zeroes and
        // fills. The bindings declare the struct with statistics compiled in
        // (IREE's default); a runtime built without them has a smaller
        // struct, of which IREE writes only the first 4 bytes of `raw`.
        unsafe { sys::iree_hal_allocator_query_statistics(allocator, &mut raw) };
        Ok(MemoryStatistics::from_raw(&raw))
    }

    /// True when both handles refer to the same IREE device.
    pub fn same_device(&self, other: &Device) -> bool {
        self.as_ptr() == other.as_ptr()
    }

    /// A number that is the same for every handle of one device and differs
    /// between live devices (for maps keyed by device).
    pub fn id(&self) -> usize {
        self.as_ptr().addr()
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::iree_hal_device_t {
        self.raw.as_ptr()
    }
}
