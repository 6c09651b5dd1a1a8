"""The JAX side of `cargo xtask bench-vs-jax`.

Runs the workloads of the Rust side (`main.rs` and its modules in this
folder) with JAX on the CPU, float32, the persistent compilation cache off,
on the inputs `bench_vs_jax write-inputs DIR` wrote, and prints one JSON
object per row, of the Rust side's shape (key, label, unit, value, sum, abs,
sq, device). The functions compute what the reference functions of
`crates/sheaf-integration/src/reference/` compute.

    JAX_PLATFORMS=cpu python jax_side.py --inputs DIR [--quick] [--rows compute]

JAX has one compile mode: its rows of a new function's first result, the
ping-pong and the ragged batch are measured once and printed under both of
the Rust side's keys (blocking and background).
"""

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_enable_x64", False)
jax.config.update("jax_enable_compilation_cache", False)

INDEX_VERSION = 2
BATCH_SIZES = [1, 2, 4, 8, 16, 32, 64, 128]
MAX_BATCH = 128
POOL_ROWS = 256
WIDTH = 256
TEMPERATURE = 0.5
TEMPERATURES = [0.5, 1.0]
DEVICE = f"jax {jax.__version__} {jax.devices()[0].platform}"


def sigmoid(x):
    """reference::sigmoid: 1 / (1 + exp(-x)) (stablehlo.logistic)."""
    return jax.nn.sigmoid(x)


def softmax(x, temperature):
    """reference::softmax: softmax over the last axis of x / temperature,
    as its lowering computes it (times the inverse of each row's sum)."""
    s = x / temperature
    e = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    return e * (1.0 / jnp.sum(e, axis=-1, keepdims=True))


def mlp_layer(x, w, b):
    """reference::mlp_layer: relu(x·W + b)."""
    return jnp.maximum(x @ w + b, 0.0)


def matmul(a, b):
    """The Rust side's matmul (matmul.rs): one dot_general."""
    return a @ b


def new(fn):
    """A new function object computing `fn`. JAX keeps its traces and
    compiled code per function object, so a jit of it traces, lowers and
    compiles anew, as the Rust side's new runtime (or new definition) does."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


class Checksum:
    """f64 sums of outputs: plain, of absolute values, of squares."""

    def __init__(self):
        self.sum = self.abs = self.sq = 0.0

    def add(self, values):
        v = np.asarray(values, dtype=np.float64)
        self.sum += float(v.sum())
        self.abs += float(np.abs(v).sum())
        self.sq += float((v * v).sum())
        return self


def row(key, label, unit, value, checksum):
    return {
        "key": key,
        "label": label,
        "unit": unit,
        "value": value,
        "sum": checksum.sum,
        "abs": checksum.abs,
        "sq": checksum.sq,
        "device": DEVICE,
    }


def p50_us(samples):
    samples = sorted(samples)
    return samples[len(samples) // 2] / 1e3 if samples else 0.0


def warm_p50_us(warm_up, calls, call):
    """Runs `call` warm_up times untimed, then calls times timed: the
    per-call p50 in µs."""
    for _ in range(warm_up):
        call()
    samples = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        call()
        samples.append(time.perf_counter_ns() - start)
    return p50_us(samples)


def read_inputs(folder):
    rerun = "run `bench_vs_jax write-inputs DIR` (or `cargo xtask bench-vs-jax`) again"
    path = Path(folder) / "index.json"
    try:
        index = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        sys.exit(f"jax_side.py: cannot read {path} ({e}); {rerun}")
    if index.get("version") != INDEX_VERSION:
        sys.exit(f"jax_side.py: {path} is not of version {INDEX_VERSION}; {rerun}")
    arrays = {}
    for name, entry in index["arrays"].items():
        file = Path(folder) / entry["file"]
        values = np.fromfile(file, dtype="<f4")
        if values.size != int(np.prod(entry["shape"])):
            sys.exit(f"jax_side.py: {file} does not hold f32{entry['shape']}; {rerun}")
        total = float(values.astype(np.float64).sum())
        if abs(total - entry["sum"]) > 1e-9 * (1.0 + abs(total)):
            sys.exit(f"jax_side.py: {file} sums to {total}, not {entry['sum']}; {rerun}")
        arrays[name] = values.astype(np.float32).reshape(entry["shape"])
    return index, arrays


def sigmoid_rows(inputs, counts):
    f = jax.jit(new(sigmoid))
    x = inputs["sigmoid_x"]
    last = np.asarray(f(x))

    def host_call():
        nonlocal last
        last = np.asarray(f(x))

    p50 = warm_p50_us(counts["warm_up"], counts["sigmoid_calls"], host_call)
    label = "sigmoid f32[1,5], host → host: warm p50"
    rows = [row("sigmoid_host", label, "us", p50, Checksum().add(last))]

    y = jax.device_put(x)

    def chained():
        nonlocal y
        y = f(y)
        y.block_until_ready()

    p50 = warm_p50_us(counts["warm_up"], counts["sigmoid_calls"], chained)
    rows.append(
        row(
            "sigmoid_device",
            "sigmoid f32[1,5], device → device, chained: warm p50",
            "us",
            p50,
            Checksum().add(np.asarray(y)),
        )
    )
    return rows


def batch_rows(inputs, counts):
    f = jax.jit(new(mlp_layer))
    pool = inputs["mlp_x"]
    w, b = jax.device_put(inputs["mlp_w"]), jax.device_put(inputs["mlp_b"])
    calls = [(jax.device_put(pool[:batch]), w, b) for batch in BATCH_SIZES]
    for args in calls:
        for _ in range(counts["warm_up"]):
            f(*args).block_until_ready()
    samples = [[] for _ in calls]
    for _ in range(counts["batch_rounds"]):
        for args, timed in zip(calls, samples):
            for _ in range(counts["batch_calls_per_round"]):
                start = time.perf_counter_ns()
                f(*args).block_until_ready()
                timed.append(time.perf_counter_ns() - start)
    return [
        row(
            f"mlp_b{batch}",
            f"mlp_layer f32[{batch},{WIDTH}], 8 sizes in one runtime: warm p50",
            "us",
            p50_us(timed),
            Checksum().add(np.asarray(f(*args))),
        )
        for batch, args, timed in zip(BATCH_SIZES, calls, samples)
    ]


def compute_rows(inputs, counts):
    put = jax.device_put
    softmax_t = functools.partial(new(softmax), temperature=TEMPERATURE)
    cases = [
        (
            "matmul",
            "matmul f32[512,512]·f32[512,512]: warm p50",
            jax.jit(new(matmul)),
            (put(inputs["matmul_a"]), put(inputs["matmul_b"])),
            counts["warm_up"] // 10,
            counts["matmul_calls"],
        ),
        (
            "matmul_large",
            "matmul f32[1024,1024]·f32[1024,1024]: warm p50",
            jax.jit(new(matmul)),
            (put(inputs["matmul_large_a"]), put(inputs["matmul_large_b"])),
            max(counts["warm_up"] // 80, 1),
            counts["matmul_calls"] // 8,
        ),
        (
            "bmm",
            "batched matmul f32[8,256,256]·f32[8,256,256]: warm p50",
            jax.jit(new(matmul)),
            (put(inputs["bmm_a"]), put(inputs["bmm_b"])),
            counts["warm_up"] // 10,
            counts["matmul_calls"],
        ),
        (
            "softmax",
            f"softmax f32[128,1024] / {TEMPERATURE}: warm p50",
            jax.jit(softmax_t),
            (put(inputs["softmax_x"]),),
            counts["warm_up"],
            counts["compute_calls"],
        ),
        (
            "mlp",
            f"mlp_layer f32[{MAX_BATCH},{WIDTH}]: warm p50",
            jax.jit(new(mlp_layer)),
            (put(inputs["mlp_x"][:MAX_BATCH]), put(inputs["mlp_w"]), put(inputs["mlp_b"])),
            counts["warm_up"],
            counts["compute_calls"],
        ),
    ]
    rows = []
    for key, label, f, args, warm_up, calls in cases:
        p50 = warm_p50_us(warm_up, calls, lambda: f(*args).block_until_ready())
        rows.append(row(key, label, "us", p50, Checksum().add(np.asarray(f(*args)))))
    return rows


def fresh_rows(inputs, counts):
    x = inputs["sigmoid_x"]
    # Start the backend and the compiler on another function first, as the
    # Rust side loads its compiler first.
    np.asarray(jax.jit(new(sigmoid))(np.zeros((1, 3), np.float32)))
    times, checksum = [], Checksum()
    for _ in range(counts["fresh_functions"]):
        f = jax.jit(new(sigmoid))
        start = time.perf_counter_ns()
        y = np.asarray(f(x))
        times.append((time.perf_counter_ns() - start) / 1e6)
        checksum = Checksum().add(y)
    median = sorted(times)[len(times) // 2]
    labels = {
        "fresh_blocking": "new function, first result: blocking",
        "fresh_background_first": "new function, first result: background (interpreted)",
        "fresh_background_compiled": "new function, first compiled result: background",
    }
    return [row(key, label, "ms", median, checksum) for key, label in labels.items()]


def both_modes(key, label, value, checksum):
    """The row under the Rust side's blocking and background keys."""
    return [
        row(f"{key}_{mode}", label.format(mode=mode), "ms", value, checksum)
        for mode in ("blocking", "background")
    ]


def pingpong_rows(inputs, counts):
    iterations = counts["pingpong_iterations"]
    x = inputs["sigmoid_x"]
    xs = [x, x.reshape(1, 5, 1)]
    s = inputs["softmax_small"]
    sig = jax.jit(new(sigmoid))
    soft = jax.jit(new(softmax), static_argnames="temperature")
    outputs = []
    start = time.perf_counter_ns()
    for i in range(iterations):
        outputs.append(np.asarray(sig(xs[i % 2])))
        outputs.append(np.asarray(soft(s, temperature=TEMPERATURES[i % 2])))
    total = (time.perf_counter_ns() - start) / 1e6
    checksum = Checksum()
    for output in outputs:
        checksum.add(output)
    label = f"ping-pong, {iterations} iterations (4 signatures), {{mode}}: total"
    return both_modes("pingpong", label, total, checksum)


def ragged_rows(index, inputs, counts):
    calls = counts["ragged_calls"]
    pool = inputs["mlp_x"]
    w, b = jax.device_put(inputs["mlp_w"]), jax.device_put(inputs["mlp_b"])
    f = jax.jit(new(mlp_layer))
    total, checksum = 0, Checksum()
    for i, batch in enumerate(index["ragged_sizes"][:calls]):
        offset = i % (POOL_ROWS - MAX_BATCH + 1)
        x = pool[offset : offset + batch]
        start = time.perf_counter_ns()
        y = np.asarray(f(x, w, b))
        total += time.perf_counter_ns() - start
        checksum.add(y)
    label = f"ragged mlp_layer, {calls} calls, b in 1..={MAX_BATCH}, {{mode}}: total"
    return both_modes("ragged", label, total / 1e6, checksum)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--inputs", required=True, help="the folder `bench_vs_jax write-inputs` wrote"
    )
    parser.add_argument("--quick", action="store_true", help="fewer calls: a smoke test")
    parser.add_argument(
        "--rows",
        choices=["all", "compute"],
        default="all",
        help="`compute`: only the matmul, softmax and mlp_layer rows",
    )
    args = parser.parse_args()
    index, inputs = read_inputs(args.inputs)
    counts = index["quick" if args.quick else "full"]
    compute_only = args.rows == "compute"

    def emit(rows):
        for r in rows:
            print(json.dumps(r), flush=True)

    if not compute_only:
        emit(sigmoid_rows(inputs, counts))
        emit(batch_rows(inputs, counts))
    emit(compute_rows(inputs, counts))
    if not compute_only:
        emit(fresh_rows(inputs, counts))
        emit(pingpong_rows(inputs, counts))
        emit(ragged_rows(index, inputs, counts))


if __name__ == "__main__":
    main()
