//! The CUDA headers the runtime's `cuda` HAL driver is compiled against.
//!
//! The driver loads `libcuda.so` when a device is opened, so building it
//! needs headers only, never a GPU or a driver. They come from where the
//! iree-sys build script looks (`crates/iree-sys/build/cuda_headers.rs`:
//! `IREE_CUDA_DEPS_DIR`, an installed toolkit at `CUDA_PATH` or
//! `/usr/local/cuda`), else from NVIDIA's PyPI wheels installed into the project venv:
//! `cuda.h` and the runtime headers (`nvidia-cuda-runtime-cu12`), the
//! `crt/` headers they include and `libdevice` (`nvidia-cuda-nvcc-cu12`),
//! and `nv/target` (`nvidia-cuda-cccl-cu12`). The wheels install into three
//! folders; IREE's CMake wants one toolkit root, so `target/iree/cuda-headers/`
//! joins them with symbolic links and is handed to IREE's configure as
//! `IREE_CUDA_DEPS_DIR`, IREE's own variable for a stripped-down toolkit
//! (`build_tools/third_party/cuda/CMakeLists.txt`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::{process, tools};

/// The wheels that hold the headers, pinned (CUDA 12.9, which IREE 3.13's
/// driver supports: it needs CUDA >= 12).
pub(crate) const WHEELS: &[&str] = &[
    "nvidia-cuda-runtime-cu12==12.9.79",
    "nvidia-cuda-nvcc-cu12==12.9.86",
    "nvidia-cuda-cccl-cu12==12.9.27",
];

pub(crate) use headers::CudaHeaders;

/// The toolkit lookup shared with the iree-sys build script.
#[path = "../../crates/iree-sys/build/cuda_headers.rs"]
mod headers;

/// Finds installed headers (`IREE_CUDA_DEPS_DIR`, `CUDA_PATH`,
/// `/usr/local/cuda`, as the iree-sys build script does), else installs the
/// wheels (once) and joins their headers into a folder handed to CMake as
/// `IREE_CUDA_DEPS_DIR`.
pub(crate) fn locate() -> Result<CudaHeaders> {
    let var = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(found) = headers::find(var("IREE_CUDA_DEPS_DIR"), var("CUDA_PATH")) {
        return Ok(found);
    }
    eprintln!(
        "[xtask] no CUDA headers in {}: using NVIDIA's wheels",
        headers::SEARCHED
    );
    tools::ensure_requirements(WHEELS)?;
    let nvidia = tools::site_packages()?.join("nvidia");
    let root = process::workspace_root().join("target/iree/cuda-headers");
    join_wheels(&nvidia, &root)?;
    Ok(CudaHeaders::DepsDir(root))
}

/// Makes `root/include/*` link to every entry of the wheels' `include`
/// folders, and `root/nvvm` to nvcc's (where IREE looks for libdevice).
fn join_wheels(nvidia: &Path, root: &Path) -> Result<()> {
    let include = root.join("include");
    let _ = std::fs::remove_dir_all(root);
    std::fs::create_dir_all(&include)
        .with_context(|| format!("cannot create {}", include.display()))?;
    for wheel in ["cuda_runtime", "cuda_nvcc", "cuda_cccl"] {
        let from = nvidia.join(wheel).join("include");
        let entries = std::fs::read_dir(&from).with_context(|| {
            format!(
                "cannot read {}; delete target/venv/.xtask-requirements and run again",
                from.display()
            )
        })?;
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot read {}", from.display()))?;
            link(&entry.path(), &include.join(entry.file_name()))?;
        }
    }
    link(&nvidia.join("cuda_nvcc/nvvm"), &root.join("nvvm"))
}

fn link(original: &Path, link: &Path) -> Result<()> {
    if link.exists() {
        // Two wheels with one header: the first (the runtime's) wins.
        return Ok(());
    }
    std::os::unix::fs::symlink(original, link)
        .with_context(|| format!("cannot link {}", link.display()))
}
