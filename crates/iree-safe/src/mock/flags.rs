//! IREE's runtime flags: the one the crate sets,
//! `--task_topology_max_group_count` (the most workers the `local-task`
//! executors created next get), checked and remembered; the mock's
//! `local-task` has no workers to shape.

use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicI32, Ordering};

use super::api::*;
use super::status::{to_status, Failure};

/// The value of `--task_topology_max_group_count` (IREE's default 64).
static TASK_TOPOLOGY_MAX_GROUP_COUNT: AtomicI32 = AtomicI32::new(64);

/// `iree_flags_parse`: every argument after the program name must be
/// `--task_topology_max_group_count=<int>`; INVALID_ARGUMENT otherwise, as IREE
/// answers a flag it does not define. The arguments are consumed (`argc`
/// becomes 1), as IREE consumes the flags it parses.
///
/// # Safety
/// `argc` and `argv` are valid; `*argv` holds `*argc` readable
/// NUL-terminated strings.
pub(crate) unsafe fn iree_flags_parse(
    mode: iree_flags_parse_mode_t,
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
) -> iree_status_t {
    assert_eq!(
        mode, IREE_FLAGS_PARSE_MODE_DEFAULT,
        "the mode the crate uses"
    );
    // SAFETY: the caller passes valid pointers.
    let (count, args) = unsafe { (*argc, *argv) };
    let count = usize::try_from(count).expect("argc is not negative");
    for index in 1..count {
        // SAFETY: the caller passes `count` readable strings.
        let arg = unsafe { CStr::from_ptr(*args.add(index)) }.to_string_lossy();
        let value = arg
            .strip_prefix("--task_topology_max_group_count=")
            .and_then(|value| value.parse().ok());
        let Some(value) = value else {
            return to_status(Err(Failure::new(
                IREE_STATUS_INVALID_ARGUMENT,
                format!("flag '{arg}' not recognized"),
            )));
        };
        TASK_TOPOLOGY_MAX_GROUP_COUNT.store(value, Ordering::SeqCst);
    }
    // SAFETY: as above.
    unsafe { *argc = 1 };
    std::ptr::null_mut()
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;

    use super::*;

    #[test]
    fn a_worker_count_holds_for_one_open_only() {
        let device = crate::Device::open_local_task(NonZeroUsize::new(2).unwrap()).unwrap();
        assert_eq!(device.uri(), "local-task");
        // Only this test opens with a worker count, and it puts IREE's
        // default back before it returns.
        assert_eq!(TASK_TOPOLOGY_MAX_GROUP_COUNT.load(Ordering::SeqCst), 64);
    }
}
