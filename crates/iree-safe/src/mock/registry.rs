//! Every live mock object, its reference count and its kind.
//!
//! One table, behind one mutex, maps each object's address to its kind, its
//! Rust type and its reference count. Every retain, release and access
//! checks the table first, so a double release, a release of the wrong type
//! or a use after the last release panics with a message (natively too,
//! before any memory is touched), and [`live_objects`] counts what is left.

use std::any::{type_name, TypeId};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The kinds of mock objects, one per IREE object type (modules split into
/// HAL and bytecode modules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Instance,
    ProactorPool,
    Driver,
    Device,
    FrontierTracker,
    DeviceGroup,
    HalModule,
    BytecodeModule,
    Context,
    List,
    BufferView,
    Buffer,
    Status,
}

/// A Rust type that stands for an IREE object in the mock.
pub(crate) trait Object: Send + Sync + Sized + 'static {
    /// The kind this object is counted as.
    fn kind(&self) -> Kind;
}

struct Entry {
    kind: Kind,
    type_id: TypeId,
    refs: usize,
}

static LIVE: Mutex<BTreeMap<usize, Entry>> = Mutex::new(BTreeMap::new());

fn table() -> MutexGuard<'static, BTreeMap<usize, Entry>> {
    // A panic with the lock held (a failed check below) leaves the table
    // consistent: entries are only changed after the checks pass.
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The entry of a live `T` at `ptr`; panics when there is none.
fn entry<'t, T: Object>(
    table: &'t mut BTreeMap<usize, Entry>,
    ptr: *const T,
    action: &str,
) -> &'t mut Entry {
    let Some(entry) = table.get_mut(&ptr.addr()) else {
        panic!(
            "mock IREE: {action} of {ptr:p}, which is not a live {} (released too often, or never created)",
            type_name::<T>()
        );
    };
    assert!(
        entry.type_id == TypeId::of::<T>(),
        "mock IREE: {action} of {ptr:p} as a {}, but it is a {:?}",
        type_name::<T>(),
        entry.kind
    );
    entry
}

/// Boxes `value` and registers it with one reference, which the caller owns.
pub(crate) fn create<T: Object>(value: T) -> NonNull<T> {
    const {
        assert!(
            size_of::<T>() > 0,
            "objects are told apart by address: no zero-sized objects"
        )
    };
    let kind = value.kind();
    let ptr = NonNull::from(Box::leak(Box::new(value)));
    let entry = Entry {
        kind,
        type_id: TypeId::of::<T>(),
        refs: 1,
    };
    let previous = table().insert(ptr.as_ptr().addr(), entry);
    assert!(previous.is_none(), "a fresh allocation was already live");
    ptr
}

/// Adds a reference to the live `T` at `ptr`. Panics if there is none.
pub(crate) fn retain<T: Object>(ptr: *const T) {
    entry(&mut table(), ptr, "retain").refs += 1;
}

/// Gives back one reference to the live `T` at `ptr`, destroying it when it
/// was the last. Panics if there is no live `T` there.
///
/// # Safety
/// `ptr` was returned by [`create`] (possibly cast to an IREE type and back),
/// and the caller owns the reference it gives back.
pub(crate) unsafe fn release<T: Object>(ptr: *const T) {
    let last = {
        let mut table = table();
        let entry = entry(&mut table, ptr, "release");
        entry.refs -= 1;
        entry.refs == 0 && table.remove(&ptr.addr()).is_some()
    };
    if last {
        // SAFETY: `ptr` came from `Box::leak` in `create` (caller's
        // contract), and this was its last reference: nobody can reach it
        // any more. The table lock is not held, so the destructor may release
        // the objects this one owns.
        drop(unsafe { Box::from_raw(ptr.cast_mut()) });
    }
}

/// Defines the mock's `*_retain` / `*_release` C functions for a mock object
/// type: `c_type => MockType: release_fn, retain_fn;` (or only
/// `release_fn` for objects whose retain the crate never calls). Each forwards to
/// [`retain`] / [`release`], which check the object against the registry.
macro_rules! refcount_functions {
    ($($c_ty:ident => $mock:ty: $release:ident $(, $retain:ident)?;)*) => {$(
        $(
            #[doc = concat!("`", stringify!($retain), "`.")]
            ///
            /// # Safety
            /// The object is live.
            pub(crate) unsafe fn $retain(object: *mut $c_ty) {
                $crate::mock::registry::retain(object.cast::<$mock>());
            }
        )?

        #[doc = concat!("`", stringify!($release), "`: gives back a reference; the last one destroys the object and releases what it holds.")]
        ///
        /// # Safety
        /// The object is live and the caller gives back its reference.
        pub(crate) unsafe fn $release(object: *mut $c_ty) {
            // SAFETY: forwarded from this function's contract.
            unsafe { $crate::mock::registry::release(object.cast::<$mock>()) }
        }
    )*};
}
pub(crate) use refcount_functions;

/// Borrows the live `T` at `ptr`. Panics if there is none (a use after
/// free, or the wrong kind of object).
///
/// # Safety
/// `ptr` was returned by [`create`], and the caller holds a reference that
/// keeps the object alive for `'a`.
pub(crate) unsafe fn get<'a, T: Object>(ptr: *const T) -> &'a T {
    entry(&mut table(), ptr, "use");
    // SAFETY: the table says `ptr` is a live `T` from `create`; the caller's
    // reference keeps it alive for `'a`, and objects are only shared (all
    // mutation goes through atomics and mutexes inside them).
    unsafe { &*ptr }
}

/// One owned reference to a mock object, released on drop: how mock
/// objects hold the objects they retain (a device its pool, a list its
/// buffer views...).
pub(crate) struct Owned<T: Object>(NonNull<T>);

// SAFETY: `T` is Send + Sync (`Object`'s bounds) and reference counts live in
// the mutex-protected table, so references may be held and released from
// any thread.
unsafe impl<T: Object> Send for Owned<T> {}
// SAFETY: as above; `Owned` only hands out `&T`.
unsafe impl<T: Object> Sync for Owned<T> {}

impl<T: Object> Owned<T> {
    /// Creates an object and owns its first reference.
    pub(crate) fn new(value: T) -> Self {
        Owned(create(value))
    }

    /// Takes over a reference the caller owns.
    ///
    /// # Safety
    /// `ptr` was returned by [`create`] and the caller gives up one reference.
    pub(crate) unsafe fn adopt(ptr: NonNull<T>) -> Self {
        // SAFETY: the caller owns a reference, so the object is live; this
        // only checks it is a `T`.
        unsafe { get(ptr.as_ptr()) };
        Owned(ptr)
    }

    /// Takes a new reference to an object the caller borrows.
    ///
    /// # Safety
    /// `ptr` was returned by [`create`].
    pub(crate) unsafe fn retain(ptr: NonNull<T>) -> Self {
        retain(ptr.as_ptr());
        Owned(ptr)
    }

    /// The object's address, still owned by `self`.
    pub(crate) fn as_ptr(&self) -> *mut T {
        self.0.as_ptr()
    }

    /// Gives the reference to the caller (e.g. through an `out_*` pointer).
    pub(crate) fn into_raw(self) -> *mut T {
        let ptr = self.as_ptr();
        std::mem::forget(self);
        ptr
    }
}

impl<T: Object> Deref for Owned<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: `self` owns a reference, so the object is live.
        unsafe { self.0.as_ref() }
    }
}

impl<T: Object> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `create` and `self` owns the
        // reference given back, once.
        unsafe { release(self.0.as_ptr()) }
    }
}

impl<T: Object> fmt::Debug for Owned<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Owned<{}>({:p})", type_name::<T>(), self.0)
    }
}

/// How many mock objects of each kind are alive, from [`live_objects`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveObjects {
    /// VM instances (`iree_vm_instance_t`).
    pub instances: usize,
    /// Async proactor pools.
    pub proactor_pools: usize,
    /// HAL drivers (`iree_hal_driver_registry_try_create`).
    pub drivers: usize,
    /// HAL devices.
    pub devices: usize,
    /// Async frontier trackers.
    pub frontier_trackers: usize,
    /// HAL device groups.
    pub device_groups: usize,
    /// HAL modules (`iree_hal_module_create`).
    pub hal_modules: usize,
    /// Bytecode modules, each holding its archive.
    pub bytecode_modules: usize,
    /// VM contexts.
    pub contexts: usize,
    /// VM lists.
    pub lists: usize,
    /// HAL buffer views.
    pub buffer_views: usize,
    /// HAL buffers (one per buffer view).
    pub buffers: usize,
    /// Statuses not yet freed.
    pub statuses: usize,
    /// Blocks of host memory that IREE allocated for the caller (device
    /// lists, string builder storage) and the caller has not freed with
    /// `iree_allocator_free`.
    pub host_blocks: usize,
}

impl LiveObjects {
    /// Live objects of every kind but the VM instance, which
    /// `Instance::global()` keeps for the life of the process by design.
    pub fn total_excluding_instance(&self) -> usize {
        let LiveObjects {
            instances: _,
            proactor_pools,
            drivers,
            devices,
            frontier_trackers,
            device_groups,
            hal_modules,
            bytecode_modules,
            contexts,
            lists,
            buffer_views,
            buffers,
            statuses,
            host_blocks,
        } = *self;
        proactor_pools
            + drivers
            + devices
            + frontier_trackers
            + device_groups
            + hal_modules
            + bytecode_modules
            + contexts
            + lists
            + buffer_views
            + buffers
            + statuses
            + host_blocks
    }

    fn count(&mut self, kind: Kind) -> &mut usize {
        match kind {
            Kind::Instance => &mut self.instances,
            Kind::ProactorPool => &mut self.proactor_pools,
            Kind::Driver => &mut self.drivers,
            Kind::Device => &mut self.devices,
            Kind::FrontierTracker => &mut self.frontier_trackers,
            Kind::DeviceGroup => &mut self.device_groups,
            Kind::HalModule => &mut self.hal_modules,
            Kind::BytecodeModule => &mut self.bytecode_modules,
            Kind::Context => &mut self.contexts,
            Kind::List => &mut self.lists,
            Kind::BufferView => &mut self.buffer_views,
            Kind::Buffer => &mut self.buffers,
            Kind::Status => &mut self.statuses,
        }
    }
}

/// Counts the mock objects alive right now, per kind.
pub fn live_objects() -> LiveObjects {
    let mut counts = LiveObjects {
        host_blocks: super::allocator::live_blocks(),
        ..LiveObjects::default()
    };
    for entry in table().values() {
        *counts.count(entry.kind) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Probe(u8);

    impl Object for Probe {
        fn kind(&self) -> Kind {
            Kind::List
        }
    }

    #[test]
    fn retain_and_release_balance() {
        let _serial = crate::mock::serial();
        let ptr = create(Probe(7)).as_ptr();
        retain(ptr);
        // SAFETY: `ptr` came from `create`; we own both references.
        unsafe {
            release(ptr);
            assert_eq!(get(ptr).0, 7);
            release(ptr);
        }
    }

    /// Only created by `a_double_release_panics`, so no other test can
    /// reuse its address in between.
    #[derive(Debug)]
    struct Released(u8);

    impl Object for Released {
        fn kind(&self) -> Kind {
            Kind::List
        }
    }

    #[test]
    #[should_panic(expected = "not a live")]
    fn a_double_release_panics() {
        let _serial = crate::mock::serial();
        let ptr = create(Released(1)).as_ptr();
        // SAFETY: `ptr` came from `create` and is live.
        assert_eq!(unsafe { get(ptr) }.0, 1);
        // SAFETY: the first release gives back the one reference; the
        // second is caught by the table before the freed memory is touched.
        unsafe {
            release(ptr);
            release(ptr);
        }
    }

    #[test]
    fn owned_releases_on_drop() {
        let _serial = crate::mock::serial();
        let owned = Owned::new(Probe(3));
        let ptr = NonNull::new(owned.as_ptr()).unwrap();
        // SAFETY: `ptr` came from `create` and is kept alive by `owned`.
        let second = unsafe { Owned::retain(ptr) };
        drop(owned);
        assert_eq!((*second).0, 3);
        drop(second);
        assert!(!table().contains_key(&ptr.as_ptr().addr()));
    }
}
