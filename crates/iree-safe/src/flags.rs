//! IREE's runtime flags (`iree/base/tooling/flags.h`), used for the one
//! setting no create function takes: how many workers (at most) a
//! `local-task` device's task executor gets.
//!
//! The `local-task` driver builds its executor from process-global flags
//! each time a driver is created (`iree_task_executors_create_from_flags`,
//! iree/task/api.c, called from the driver factory in
//! iree/hal/drivers/local_task/registration/driver_module.c), and
//! [`Device::open`](crate::Device::open) creates a driver per device. So a
//! worker count is set just before the device is opened and reset just
//! after, all under one process-wide lock that every device open takes:
//! no other open sees the override.

use std::ffi::{c_char, c_int, CString};
use std::num::NonZeroUsize;
use std::sync::{Mutex, MutexGuard};

use crate::error::{check, Error, Result};
use crate::sys;

/// Held across every device open (and every flag change around one).
static FLAGS: Mutex<()> = Mutex::new(());

/// The lock every device open holds.
pub(crate) fn lock() -> MutexGuard<'static, ()> {
    // The guarded state is IREE's; a panic while held leaves nothing of
    // ours half-changed.
    FLAGS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// IREE's default `--task_topology_max_group_count` (iree/task/api.c).
const DEFAULT_MAX_WORKERS: i32 = 64;

/// Caps the worker count of the `local-task` executors created from now on
/// (`--task_topology_max_group_count`, the flag IREE recommends over
/// `--task_topology_group_count`, which would unpin the workers): `Some(n)`
/// for at most `n` workers, `None` for IREE's default cap of 64. Either
/// way IREE makes one worker per physical core of the calling thread's
/// NUMA node, up to the cap, each pinned to its core.
///
/// The caller holds [`lock`].
pub(crate) fn set_task_workers(
    _held: &MutexGuard<'static, ()>,
    workers: Option<NonZeroUsize>,
) -> Result<()> {
    let cap = match workers {
        Some(n) => i32::try_from(n.get()).unwrap_or(i32::MAX),
        None => DEFAULT_MAX_WORKERS,
    };
    parse(&format!("--task_topology_max_group_count={cap}"))
}

/// Parses one flag of an integer type (IREE keeps no pointer into the
/// argument for those, only for string flags, which this never sets).
fn parse(flag: &str) -> Result<()> {
    let flag = CString::new(flag).map_err(|_| Error::internal("a flag with a NUL"))?;
    let mut argv: [*mut c_char; 2] = [c"iree-safe".as_ptr().cast_mut(), flag.as_ptr().cast_mut()];
    let mut argc: c_int = 2;
    let mut argv_ptr = argv.as_mut_ptr();
    // SAFETY: `argc` counts the valid NUL-terminated strings at `argv_ptr`,
    // which live (a static and `flag`) until the call returns; IREE only
    // reorders the array in place and lowers `argc` (flags.h), and keeps no
    // pointer to an integer flag's text. The flag table is process-global,
    // which is why the caller holds `FLAGS`. The status is ours; `check`
    // frees it.
    unsafe {
        check(sys::iree_flags_parse(
            sys::IREE_FLAGS_PARSE_MODE_DEFAULT,
            &mut argc,
            &mut argv_ptr,
        ))
    }
}
