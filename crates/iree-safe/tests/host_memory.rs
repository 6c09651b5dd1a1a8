//! A device result larger than the host can still allocate: reading it back
//! is an error, never an abort. The test runs itself again in a child
//! process whose address space is limited (as `prlimit --as` would).
#![cfg(not(iree_mock))] // the mock holds no large buffers

use iree_safe::{Error, Runtime, Tensor};
use test_support::iree::program;

const CHILD: &str = "IREE_SAFE_HOST_MEMORY_CHILD";
const TEST: &str = "a_host_copy_that_cannot_be_allocated_is_an_error";

#[test]
fn a_host_copy_that_cannot_be_allocated_is_an_error() {
    if std::env::var_os(CHILD).is_some() {
        return child();
    }
    let output = test_support::child::rerun(TEST)
        .env(CHILD, "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(output.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("host copy refused: "), "{stdout}\n{stderr}");
}

/// Makes a 2 GiB device result, then reads it back with 3 GiB of address
/// space to spare: the device buffer fits, a second 2 GiB does not.
fn child() {
    let runtime = Runtime::new("local-sync").unwrap();
    let artifact = program("broadcast"); // compiled before the limit
    let broadcast = runtime
        .load(artifact.vmfb())
        .unwrap()
        .function("broadcast")
        .unwrap();
    let x = Tensor::from_slice(runtime.device(), &[], &[1.5f32]).unwrap();
    let limit = mapped_bytes() + (3 << 30);
    rustix::process::setrlimit(
        rustix::process::Resource::As,
        rustix::process::Rlimit {
            current: Some(limit),
            maximum: None,
        },
    )
    .unwrap();
    let outputs = broadcast.call(&[x.into()]).unwrap();
    let y = outputs[0].as_tensor().unwrap();
    assert_eq!(y.shape(), [1 << 29]);
    let error = y.to_vec::<f32>().unwrap_err();
    assert!(matches!(error, Error::HostAllocation { .. }), "{error}");
    println!("host copy refused: {error}");
}

/// The process's address space now (`VmSize`).
fn mapped_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmSize:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}
