//! Safe RAII wrappers over one shared IREE runtime, and IREE's compiler.
//!
//! This crate is the only place in the workspace that calls IREE's C API,
//! and it knows nothing of the layers above it or of caching policy. It
//! implements the layout that can both share and evict
//! (docs/architecture.md, "One runtime per process"): one VM [`Instance`]
//! per process, one [`Runtime`] (device + device group + HAL module) shared
//! by every compiled artifact, and one small [`Module`] per artifact with
//! its own VM context, freed when dropped. [`compiler`] drives IREE's
//! compiler, in-process or as a subprocess.
//!
//! ```no_run
//! use iree_safe::compiler::{choose_compiler, CompileOptions, CompilerPreference};
//! use iree_safe::{Runtime, Tensor};
//!
//! let runtime = Runtime::new("local-sync")?;
//! let compiler = choose_compiler(CompilerPreference::Auto).unwrap().compiler;
//! let sigmoid_mlir = std::fs::read_to_string("sigmoid.mlir").unwrap();
//! let artifact = compiler.compile(&sigmoid_mlir, &CompileOptions::default()).unwrap();
//! // Loading runs the artifact's code: only the compiler's output (or bytes
//! // vouched for with `TrustedVmfb::new_unchecked`) can be loaded.
//! let module = runtime.load(artifact.vmfb())?;
//! let sigmoid = module.function("sigmoid")?; // look up once, call often
//! let x = Tensor::from_slice(runtime.device(), &[1, 5], &[0.0f32, 1.0, 2.0, 3.0, 4.0])?;
//! let outputs = sigmoid.call(&[x.into()])?;
//! let y: Vec<f32> = outputs[0].as_tensor().unwrap().to_vec()?;
//! # Ok::<(), iree_safe::Error>(())
//! ```
//!
//! Ownership mirrors IREE's rules, so drop order never matters: a
//! [`Function`] keeps its [`Module`], a module keeps its [`Runtime`], and a
//! [`Tensor`] keeps its [`Device`]. Thread safety follows IREE's documented
//! rules: instances, devices, modules and buffer views are thread-safe; VM
//! contexts are thread-compatible, so each module serializes calls on its
//! context with a mutex (give each thread its own module for parallelism).
//!
//! Under miri the crate runs against a pure-Rust mock of the C API that
//! counts live objects (`mock`, selected by the `iree_mock` cfg that
//! `build.rs` sets).
//!
//! The modules form a tree: the low-level ones (`sys`, `error`, `handle`,
//! `strings`, `transfer`) know nothing of the objects above them, and each
//! object's module only imports the objects it is built from.
//!
//! # Crate features
//!
//! - `in-process-compiler` (default): the in-process compiler
//!   (`compiler::InProcessCompiler`: `libIREECompiler` loaded with
//!   libloading). Without it only the subprocess compiler (`iree-compile`)
//!   runs, and asking for the in-process one is an error naming the feature.
//! - `platform-gpu` (default), `vulkan`, `cuda`, `metal`: the runtime's HAL
//!   drivers, iree-runtime-sys's features of the same names (its crate
//!   docs): the target's GPU drivers, or that driver, required. The CPU
//!   drivers are always built.

#![deny(missing_docs)]
#![warn(clippy::missing_errors_doc)]
#![warn(clippy::exhaustive_structs, clippy::exhaustive_enums)]

mod artifact;
mod buffer_pool;
mod calling_convention;
pub mod compiler;
mod cpu_features;
mod device;
mod driver;
mod element;
mod error;
mod flags;
mod function;
mod handle;
mod huge_pages;
mod import;
mod instance;
mod list;
mod memory;
#[cfg(iree_mock)]
pub mod mock;
mod module;
mod process_exit;
mod runtime;
#[cfg(all(target_os = "linux", not(iree_mock)))]
mod signals;
mod strings;
mod sys;
mod tensor;
mod transfer;
mod value;
mod vmfb;

pub use buffer_pool::{
    BufferPool, BufferPoolStatistics, DEFAULT_BUFFER_POOL_CAPACITY, POOLED_BLOCK_MIN,
};
pub use calling_convention::{CallingConvention, SlotKind};
pub use device::Device;
pub use driver::{DeviceInfo, DeviceKind};
pub use element::{Element, ElementType};
pub use error::{Error, Result, StatusCode};
pub use function::{Function, Results};
pub use instance::Instance;
pub use memory::MemoryStatistics;
pub use module::{Module, WeakModule};
pub use process_exit::{at_exit, AtExitError};
pub use runtime::Runtime;
#[cfg(all(target_os = "linux", not(iree_mock)))]
pub use signals::{exit_on_signals, SignalsError};
pub use tensor::Tensor;
pub use value::VmValue;
pub use vmfb::TrustedVmfb;

/// The IREE runtime version these wrappers are built against.
pub const IREE_RUNTIME_VERSION: &str = iree_sys::build_info::IREE_VERSION;

/// The HAL drivers built into the linked runtime, comma-separated
/// (`local-sync,local-task,vulkan`): what iree-runtime-sys's driver features
/// chose for a build from source, or what the install's manifest records;
/// `None` for an install without a manifest.
pub const IREE_RUNTIME_DRIVERS: Option<&str> = iree_sys::build_info::DRIVERS;

/// What identifies the linked runtime build beyond its version (the install
/// key of `cargo xtask build-iree`): caches of compiled artifacts key on it.
pub const IREE_RUNTIME_BUILD: &str = iree_sys::build_info::RUNTIME_BUILD;

mod thread_safety {
    use super::*;
    use static_assertions::{assert_impl_all, assert_not_impl_any};

    assert_impl_all!(Instance: Send, Sync);
    assert_impl_all!(Device: Send, Sync, Clone);
    assert_impl_all!(DeviceInfo: Send, Sync, Clone);
    assert_impl_all!(DeviceKind: Send, Sync, Copy);
    assert_impl_all!(Runtime: Send, Sync, Clone);
    assert_impl_all!(Module: Send, Sync, Clone);
    assert_impl_all!(Function: Send, Sync, Clone);
    assert_impl_all!(Tensor: Send, Sync, Clone);
    assert_impl_all!(VmValue: Send, Sync);
    assert_impl_all!(MemoryStatistics: Send, Sync, Copy);
    assert_impl_all!(BufferPool: Send, Sync);
    assert_impl_all!(Error: Send, Sync, std::error::Error);
    // Raw handles stay on one thread; an invocation list moves between
    // threads through its module's pool but is never shared.
    assert_not_impl_any!(handle::Handle<iree_sys::iree_vm_context_t>: Send, Sync);
    assert_impl_all!(list::List: Send);
    assert_not_impl_any!(list::List: Sync);
    assert_impl_all!(list::ListPool: Send, Sync);
}
