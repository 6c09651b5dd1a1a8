//! Where the CUDA headers that IREE's `cuda` HAL driver compiles against
//! are found. The driver opens `libcuda.so` when a device is created, so a
//! build needs the headers only, never a GPU or a driver.
//!
//! Shared by the iree-sys build script (which takes what it finds, and
//! reports what it looked for when the `cuda` feature needs them) and
//! `cargo xtask build-iree` (`#[path]`; it falls back to NVIDIA's PyPI
//! wheels, joined into one folder: `xtask/src/cuda.rs`). Without headers,
//! IREE's own CMake would try to download a toolkit
//! (`build_tools/third_party/cuda/CMakeLists.txt`), which an offline build
//! cannot: so CUDA is only configured when this finds them.

use std::path::{Path, PathBuf};

/// Where the headers come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CudaHeaders {
    /// An installed toolkit (`include/cuda.h` and `bin/nvcc`, which CMake's
    /// `FindCUDAToolkit` needs): passed to CMake as `CUDAToolkit_ROOT`.
    Toolkit(PathBuf),
    /// A stripped-down toolkit (`include/cuda.h`, `nvvm/libdevice`), IREE's
    /// own convention: handed to CMake's configure as the environment
    /// variable `IREE_CUDA_DEPS_DIR`.
    DepsDir(PathBuf),
}

/// The default install location of NVIDIA's toolkit.
pub(crate) const DEFAULT_TOOLKIT: &str = "/usr/local/cuda";

/// What [`find`] looks at, in words, for an error that says none was found.
pub(crate) const SEARCHED: &str = "IREE_CUDA_DEPS_DIR (a folder with include/cuda.h), CUDA_PATH \
    and /usr/local/cuda (a toolkit with include/cuda.h and bin/nvcc)";

impl CudaHeaders {
    /// The root folder.
    pub(crate) fn root(&self) -> &Path {
        match self {
            CudaHeaders::Toolkit(root) | CudaHeaders::DepsDir(root) => root,
        }
    }

    /// The CMake definition that names a toolkit, if this is one.
    pub(crate) fn cmake_define(&self) -> Option<String> {
        match self {
            CudaHeaders::Toolkit(root) => Some(format!("CUDAToolkit_ROOT={}", root.display())),
            CudaHeaders::DepsDir(_) => None,
        }
    }

    /// The environment variable CMake's configure must see, if any.
    pub(crate) fn configure_env(&self) -> Option<(&'static str, &Path)> {
        match self {
            CudaHeaders::Toolkit(_) => None,
            CudaHeaders::DepsDir(root) => Some(("IREE_CUDA_DEPS_DIR", root)),
        }
    }
}

/// The headers named by `deps_dir` (`IREE_CUDA_DEPS_DIR`), else the toolkit
/// at `cuda_path` (`CUDA_PATH`), else the one at [`DEFAULT_TOOLKIT`].
pub(crate) fn find(deps_dir: Option<PathBuf>, cuda_path: Option<PathBuf>) -> Option<CudaHeaders> {
    if let Some(dir) = deps_dir.filter(|dir| dir.join("include/cuda.h").is_file()) {
        return Some(CudaHeaders::DepsDir(dir));
    }
    cuda_path
        .into_iter()
        .chain([PathBuf::from(DEFAULT_TOOLKIT)])
        .find(|root| root.join("include/cuda.h").is_file() && root.join("bin/nvcc").is_file())
        .map(CudaHeaders::Toolkit)
}
