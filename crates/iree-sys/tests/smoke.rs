//! Smoke test of the raw bindings: compile `tests/data/sigmoid.mlir` with the
//! installed compiler, then create an instance, a local-sync device and a
//! session, load the module, call it on known inputs, check the results
//! against `1/(1+exp(-x))`, and release everything.

use std::ffi::c_char;
use std::path::PathBuf;
use std::process::Command;
use std::ptr;

use iree_runtime_sys::*;

/// Frees `status` and panics with IREE's message if it is not OK.
fn check(status: iree_status_t, what: &str) {
    if iree_status_is_ok(status) {
        return;
    }
    let mut buffer = vec![0 as c_char; 4096];
    let mut length = 0;
    // SAFETY: `buffer` has the capacity we pass; `status` is a live status
    // that we own and free exactly once right after formatting it.
    let message = unsafe {
        iree_status_format(status, buffer.len(), buffer.as_mut_ptr(), &mut length);
        iree_status_free(status);
        String::from_utf8_lossy(std::slice::from_raw_parts(
            buffer.as_ptr().cast::<u8>(),
            length,
        ))
        .into_owned()
    };
    panic!("{what} failed: {message}");
}

fn string_view(text: &str) -> iree_string_view_t {
    iree_make_string_view(text.as_ptr().cast(), text.len())
}

/// `iree-compile` of the install `cargo xtask build-iree` made.
fn iree_compile() -> PathBuf {
    PathBuf::from(
        build_info::IREE_COMPILE
            .expect("iree-sys was linked against an install made by `cargo xtask build-iree`"),
    )
}

/// Compiles the test program for this process's architecture with its
/// baseline CPU: right whichever machine `iree-compile` runs on (under
/// qemu-user, an aarch64 test runs the x86_64 compiler of the install).
fn compile_sigmoid() -> Vec<u8> {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/sigmoid.mlir");
    let out = tempfile::tempdir().expect("a temporary folder");
    let vmfb = out.path().join("sigmoid.vmfb");
    let status = Command::new(iree_compile())
        .args([
            "--iree-input-type=stablehlo",
            "--iree-hal-target-device=local",
            "--iree-hal-local-target-device-backends=llvm-cpu",
            "--iree-llvmcpu-target-cpu=generic",
        ])
        .arg(format!(
            "--iree-llvmcpu-target-triple={}-unknown-linux-gnu",
            std::env::consts::ARCH
        ))
        .arg(&source)
        .arg("-o")
        .arg(&vmfb)
        .status()
        .expect("iree-compile starts");
    assert!(
        status.success(),
        "iree-compile failed on {}",
        source.display()
    );
    std::fs::read(vmfb).expect("the compiled module is readable")
}

#[test]
fn sigmoid_runs_through_the_raw_api() {
    let vmfb = compile_sigmoid();
    let input: [f32; 8] = [-4.0, -1.5, -0.5, 0.0, 0.25, 1.0, 2.5, 6.0];
    let mut output = [0f32; 8];

    // SAFETY: each call follows the IREE runtime API contract: out-pointers
    // point at live locals, every created object is released exactly once in
    // reverse order of creation, `vmfb` outlives the session that borrows it
    // (null deallocator), and the call struct is deinitialized before the
    // session is released.
    unsafe {
        let allocator = iree_allocator_system();
        let mut instance_options = std::mem::zeroed();
        iree_runtime_instance_options_initialize(&mut instance_options);
        iree_runtime_instance_options_use_all_available_drivers(&mut instance_options);
        let mut instance = ptr::null_mut();
        check(
            iree_runtime_instance_create(&instance_options, allocator, &mut instance),
            "instance create",
        );

        let mut device = ptr::null_mut();
        check(
            iree_runtime_instance_try_create_default_device(
                instance,
                string_view("local-sync"),
                &mut device,
            ),
            "device create",
        );

        let mut session_options = std::mem::zeroed();
        iree_runtime_session_options_initialize(&mut session_options);
        let mut session = ptr::null_mut();
        check(
            iree_runtime_session_create_with_device(
                instance,
                &session_options,
                device,
                iree_runtime_instance_host_allocator(instance),
                &mut session,
            ),
            "session create",
        );
        check(
            iree_runtime_session_append_bytecode_module_from_memory(
                session,
                iree_make_const_byte_span(vmfb.as_ptr(), vmfb.len()),
                iree_allocator_null(),
            ),
            "module load",
        );

        let mut call = std::mem::zeroed();
        check(
            iree_runtime_call_initialize_by_name(
                session,
                string_view("sigmoid.sigmoid"),
                &mut call,
            ),
            "lookup",
        );

        let shape: [iree_hal_dim_t; 1] = [input.len() as iree_hal_dim_t];
        let params = iree_hal_buffer_params_t {
            usage: IREE_HAL_BUFFER_USAGE_DEFAULT,
            type_: IREE_HAL_MEMORY_TYPE_DEVICE_LOCAL,
            ..Default::default()
        };
        let mut input_view = ptr::null_mut();
        check(
            iree_hal_buffer_view_allocate_buffer_copy(
                device,
                iree_runtime_session_device_allocator(session),
                shape.len(),
                shape.as_ptr(),
                IREE_HAL_ELEMENT_TYPE_FLOAT_32,
                IREE_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR,
                params,
                iree_make_const_byte_span(input.as_ptr().cast(), std::mem::size_of_val(&input)),
                &mut input_view,
            ),
            "input copy",
        );
        check(
            iree_runtime_call_inputs_push_back_buffer_view(&mut call, input_view),
            "push input",
        );
        iree_hal_buffer_view_release(input_view);
        check(iree_runtime_call_invoke(&mut call, 0), "invoke");

        let mut output_view = ptr::null_mut();
        check(
            iree_runtime_call_outputs_pop_front_buffer_view(&mut call, &mut output_view),
            "pop output",
        );
        assert_eq!(iree_hal_buffer_view_shape_rank(output_view), 1);
        assert_eq!(
            iree_hal_buffer_view_element_type(output_view),
            IREE_HAL_ELEMENT_TYPE_FLOAT_32
        );
        check(
            iree_hal_device_transfer_d2h(
                device,
                iree_hal_buffer_view_buffer(output_view),
                0,
                output.as_mut_ptr().cast(),
                std::mem::size_of_val(&output) as iree_device_size_t,
                IREE_HAL_TRANSFER_BUFFER_FLAG_DEFAULT,
                iree_infinite_timeout(),
            ),
            "read back",
        );
        iree_hal_buffer_view_release(output_view);

        iree_runtime_call_deinitialize(&mut call);
        iree_runtime_session_release(session);
        iree_hal_device_release(device);
        iree_runtime_instance_release(instance);
    }

    for (x, y) in input.iter().zip(output) {
        let expected = 1.0 / (1.0 + (-x).exp());
        assert!(
            (y - expected).abs() <= 1e-6,
            "sigmoid({x}) = {y}, expected {expected}"
        );
    }
}
