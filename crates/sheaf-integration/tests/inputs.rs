//! Inputs a caller controls are errors, never aborts: argument trees of any
//! depth (on a thread with a 2 MiB stack), and host copies that cannot be
//! allocated (converted dtypes and strided arrays larger than the address
//! space left, in a child process whose address space is limited).

mod support;

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
                assert!(is_depth_error(&copy.into_host_value()));
                drop(deep);

                let deepest_allowed = nested(Value::MAX_DEPTH, kind);
                let result = jit.dispatch(&sigmoid, std::slice::from_ref(&deepest_allowed), &[]);
                assert!(!is_depth_error(&result), "{:?}", result.err());
                assert!(deepest_allowed.into_host_value().is_ok());
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

/// `depth` levels, each a tuple of a tensor of one element (the level's
/// number) and the next level, in a dict or a list by turns.
fn levels(depth: usize) -> (Value, Vec<Arc<ArrayD<f32>>>) {
    let arrays: Vec<Arc<ArrayD<f32>>> = (0..depth)
        .map(|level| Arc::new(ArrayD::from_elem(IxDyn(&[1]), level as f32)))
        .collect();
    let mut value = Value::Static(sheaf_integration::ScalarValue::I64(-1));
    for (level, array) in arrays.iter().enumerate().rev() {
        let inner = if level % 2 == 0 {
            Value::dict([("next", value)])
        } else {
            Value::List(vec![value])
        };
        value = Value::Tuple(vec![Value::from(HostTensor::F32(Arc::clone(array))), inner]);
    }
    (value, arrays)
}

/// The array a host f32 tensor shares.
fn shared(tensor: &sheaf_integration::Tensor) -> &Arc<ArrayD<f32>> {
    match tensor {
        sheaf_integration::Tensor::Host(HostTensor::F32(array)) => array,
        other => panic!("a host f32 tensor, got {other:?}"),
    }
}

#[test]
fn deep_trees_come_apart_by_move_without_copies_or_recursion() {
    let on_a_small_stack = std::thread::Builder::new().stack_size(2 << 20);
    on_a_small_stack
        .spawn(|| {
            // Every tensor, depth first and in order, moved: each array is
            // shared by the test's handle and the tensor only.
            let (tree, arrays) = levels(100_000);
            let tensors = tree.into_tensors();
            assert_eq!(tensors.len(), arrays.len());
            for (tensor, array) in tensors.iter().zip(&arrays) {
                assert!(Arc::ptr_eq(shared(tensor), array), "the same array");
                assert_eq!(Arc::strong_count(array), 2, "moved, not copied");
            }
            drop(tensors);
            assert!(arrays.iter().all(|array| Arc::strong_count(array) == 1));

            // Level by level, by hand: a tuple, its tensor, then a dict or
            // a list whose one child is the next level.
            let (mut tree, arrays) = levels(100_000);
            for (level, array) in arrays.iter().enumerate() {
                let [tensor, inner]: [Value; 2] = tree.into_tuple().unwrap().try_into().unwrap();
                let tensor = tensor.into_tensor().unwrap();
                assert!(Arc::ptr_eq(shared(&tensor), array));
                assert_eq!(Arc::strong_count(array), 2, "moved, not copied");
                tree = if level % 2 == 0 {
                    let [(key, next)]: [(Arc<str>, Value); 1] =
                        inner.into_dict().unwrap().try_into().unwrap();
                    assert_eq!(&*key, "next");
                    next
                } else {
                    let inner = inner.into_dict().unwrap_err();
                    let [next]: [Value; 1] = inner.into_list().unwrap().try_into().unwrap();
                    next
                };
            }
            // The innermost leaf is no container, and no tensor.
            let leaf = tree.into_elements().unwrap_err();
            let leaf = leaf.into_tensor().unwrap_err();
            assert_eq!(leaf.to_scalar().unwrap().as_i64(), Some(-1));
            assert!(leaf.into_tensors().is_empty());
        })
        .unwrap()
        .join()
        .unwrap();
}

const CHILD: &str = "SHEAF_JIT_INPUTS_CHILD";
const HOST_COPY_TEST: &str = "host_copies_that_cannot_be_allocated_are_errors";

#[test]
fn host_copies_that_cannot_be_allocated_are_errors() {
    if std::env::var_os(CHILD).is_some() {
        return host_copies_under_a_limit();
    }
    let output = test_support::child::rerun(HOST_COPY_TEST)
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
