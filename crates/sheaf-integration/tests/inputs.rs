//! Inputs a caller controls are errors, never aborts: argument trees of any
//! depth (on a thread with a 2 MiB stack), and host copies that cannot be
//! allocated (converted dtypes and strided arrays larger than the address
//! space left, in a child process whose address space is limited).

mod support;

use std::process::Command;
use std::sync::Arc;

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{reference, DType, HostTensor, JitError, Value};

/// `depth` containers of `kind`, one inside the other, around a tensor.
fn nested(depth: usize, kind: fn(Value) -> Value) -> Value {
    let mut value = Value::host(ArrayD::<f32>::zeros(IxDyn(&[2])));
    for _ in 0..depth {
        value = kind(value);
    }
    value
}

fn tuple(inner: Value) -> Value {
    Value::Tuple(vec![inner])
}

fn list(inner: Value) -> Value {
    Value::List(vec![
        Value::Scalar(sheaf_integration::ScalarValue::I32(1)),
        inner,
    ])
}

fn dict(inner: Value) -> Value {
    Value::Dict(vec![("k".into(), inner)])
}

fn is_depth_error<T>(result: &Result<T, JitError>) -> bool {
    matches!(result, Err(JitError::Unsupported(message)) if message.contains("deep"))
}

#[test]
fn argument_trees_of_any_depth_are_errors_not_stack_overflows() {
    let jit = support::jit();
    let sigmoid = reference::sigmoid();
    let on_a_small_stack = std::thread::Builder::new().stack_size(2 << 20);
    on_a_small_stack
        .spawn(move || {
            for kind in [tuple as fn(Value) -> Value, list, dict] {
                let deep = nested(100_000, kind);
                let result = jit.dispatch(&sigmoid, std::slice::from_ref(&deep), &[]);
                assert!(is_depth_error(&result), "{:?}", result.err());
                let copy = deep.clone();
                assert!(format!("{copy:?}").contains(".."));
                assert!(is_depth_error(&copy.into_host()));
                drop(deep);

                let deepest_allowed = nested(Value::MAX_DEPTH, kind);
                let result = jit.dispatch(&sigmoid, std::slice::from_ref(&deepest_allowed), &[]);
                assert!(!is_depth_error(&result), "{:?}", result.err());
                assert!(deepest_allowed.into_host().is_ok());
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn clones_keep_every_key_and_leaf() {
    let tree = Value::Dict(vec![
        (
            "b".into(),
            Value::List(vec![nested(3, dict), nested(2, tuple)]),
        ),
        (
            "a".into(),
            Value::Static(sheaf_integration::ScalarValue::I64(4)),
        ),
    ]);
    assert_eq!(format!("{:?}", tree.clone()), format!("{tree:?}"));
    let copy = tree.clone();
    let b = copy.get("b").unwrap().elements().unwrap();
    assert_eq!(b.len(), 2);
    assert!(b[0].get("k").is_some());
    assert!(format!("{tree:?}").starts_with("Dict([(\"b\", List([Dict("));
}

const CHILD: &str = "SHEAF_JIT_INPUTS_CHILD";
const HOST_COPY_TEST: &str = "host_copies_that_cannot_be_allocated_are_errors";

#[test]
fn host_copies_that_cannot_be_allocated_are_errors() {
    if std::env::var_os(CHILD).is_some() {
        return host_copies_under_a_limit();
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", HOST_COPY_TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(output.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert_eq!(stdout.matches("refused: ").count(), 4, "{stdout}\n{stderr}");
}

/// Holds two 4 GiB f32 arrays (untouched zero pages), then leaves 1 GiB of
/// address space: every copy to the device needs more, and is refused.
fn host_copies_under_a_limit() {
    let jit = support::jit();
    let device = jit.runtime().device();
    let elements = 1usize << 30;
    let flat = Arc::new(ArrayD::<f32>::zeros(IxDyn(&[elements])));
    let transposed = ArrayD::<f32>::zeros(IxDyn(&[1 << 15, 1 << 15])).reversed_axes();
    assert!(!transposed.is_standard_layout());
    let tensors = [
        (
            "bf16-tagged",
            HostTensor::tagged(Arc::clone(&flat), DType::BF16).unwrap(),
        ),
        (
            "f64-tagged",
            HostTensor::tagged(Arc::clone(&flat), DType::F64).unwrap(),
        ),
        ("transposed", HostTensor::from(transposed)),
        ("f32", HostTensor::F32(flat)),
    ];
    let limit = mapped_bytes() + (1 << 30);
    rustix::process::setrlimit(
        rustix::process::Resource::As,
        rustix::process::Rlimit {
            current: Some(limit),
            maximum: None,
        },
    )
    .unwrap();
    for (what, tensor) in &tensors {
        let error = tensor.to_device(device).unwrap_err();
        assert!(matches!(error, JitError::Runtime(_)), "{what}: {error}");
        println!("{what} refused: {error}");
    }
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
