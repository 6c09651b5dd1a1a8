//! A pure-Rust mock of the part of IREE's C API this crate calls, used under
//! miri (the `iree_mock` cfg that `build.rs` sets there; nothing else
//! selects it).
//!
//! Every IREE object the crate creates is a Rust object here, with its
//! reference count kept in one table, so a double release, a release of the
//! wrong kind of object or a use after the last release panics, and
//! [`live_objects`] tells what is still alive: a test that ends with
//! anything but the process-wide VM instance alive has leaked. Ownership
//! follows IREE's rules (a context retains its modules, the HAL module its
//! device group, the group its device and frontier tracker, a device its
//! proactor pool, a list the buffer views in it). Host memory that IREE
//! hands its caller to free (device lists, string builder storage) is
//! counted too, until `iree_allocator_free` gives it back.
//!
//! The drivers are IREE's `local-sync` and `local-task`, and
//! [`SOFTWARE_DRIVER`], the mock's own, whose one device reports itself as
//! Vulkan reports a software rasterizer (`driver.rs`).
//!
//! Modules are loaded from the mock's own text format instead of `.vmfb`
//! flatbuffers; [`program`] writes the artifacts the tests load, and the
//! format is described in `program.rs`. Their functions run a few simple ops
//! (f32 tensor addition and scaling, scalar integer and float arithmetic),
//! so calls, results and IREE-style errors are testable.
//!
//! ```
//! # #[cfg(iree_mock)] {
//! use iree_safe::{mock, Runtime, Tensor};
//!
//! let before = mock::live_objects().total_excluding_instance();
//! {
//!     let runtime = Runtime::new("local-sync")?;
//!     let add = runtime.load(mock::program("add").unwrap().vmfb())?.function("add")?;
//!     let x = Tensor::from_slice(runtime.device(), &[2], &[1.0f32, 2.0])?;
//!     let y = add.call(&[x.clone().into(), x.into()])?;
//!     assert_eq!(y[0].as_tensor().unwrap().to_vec::<f32>()?, [2.0, 4.0]);
//! }
//! // Everything but the process-wide VM instance was released.
//! assert_eq!(mock::live_objects().total_excluding_instance(), before);
//! # }
//! # Ok::<(), iree_safe::Error>(())
//! ```

mod allocator;
pub(crate) mod api;
mod context;
mod driver;
mod flags;
mod hal;
mod list;
mod module;
mod ops;
mod program;
mod registry;
mod status;
mod string_builder;
mod string_view;

pub use driver::SOFTWARE_DRIVER;
pub use program::program;
pub use registry::{live_objects, LiveObjects};

/// Serializes the mock's unit tests that count live objects.
#[cfg(test)]
pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
