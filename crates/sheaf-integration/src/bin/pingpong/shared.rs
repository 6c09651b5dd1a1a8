//! The `shared` mode: this project's `JitRuntime`.

use sheaf_integration::{reference, HostTensor, JitConfig, JitRuntime, Value};

use crate::args::Args;
use crate::workload::{self, Record, Recorder};

pub(crate) fn run(args: &Args, emit: &mut dyn FnMut(&Record)) -> Result<(), String> {
    // No disk cache: every signature is compiled for real, once.
    let config = JitConfig::builder()
        .driver(&args.driver)
        .no_disk_cache()
        .build()
        .map_err(|e| e.to_string())?;
    let jit = JitRuntime::new(config).map_err(|e| e.to_string())?;
    let (sigmoid, softmax) = (reference::sigmoid(), reference::softmax());
    let mut recorder = Recorder::new("shared", &args.checkpoints, emit);
    let mut stale = 0;
    for i in 0..args.max_iters() {
        let x = workload::sigmoid_input(i);
        let (y, _) = jit
            .call_host(&sigmoid, &[Value::from(x.clone())], &[])
            .map_err(|e| e.to_string())?;
        stale += u64::from(!check(&y, &sigmoid.interpret(&[HostTensor::F32(x)], &[])?));

        let (x, t) = workload::softmax_input(i);
        let captured = [reference::temperature(t)];
        let (y, _) = jit
            .call_host(&softmax, &[Value::from(x.clone())], &captured)
            .map_err(|e| e.to_string())?;
        stale += u64::from(!check(
            &y,
            &softmax.interpret(&[HostTensor::F32(x)], &captured)?,
        ));

        let stats = jit.stats();
        recorder.after(
            i + 1,
            stats.total.compiles,
            stats.total.live_entries as u64,
            stale,
        );
    }
    if std::env::var_os("SHEAF_JIT_TRACE").is_some() {
        eprintln!("{}", jit.profile());
    }
    Ok(())
}

fn check(actual: &[HostTensor], expected: &[HostTensor]) -> bool {
    match (actual.first(), expected.first()) {
        (Some(HostTensor::F32(a)), Some(HostTensor::F32(e))) => {
            a.shape() == e.shape() && workload::matches(a.as_slice().unwrap_or(&[]), e)
        }
        _ => false,
    }
}
