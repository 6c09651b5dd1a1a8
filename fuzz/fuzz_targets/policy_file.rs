//! The policy file reader on any text: it never panics, accepts only what
//! stays within the bounds, and what it accepts writes back to a text that
//! reads back equal. Each input is read as it is, and sealed with the end
//! line a writer would add, so that mutations reach the records behind the
//! seal.
#![no_main]

use jit_cache::{stable_hash, LearnedPolicy, PolicyScope};
use libfuzzer_sys::fuzz_target;

/// The scope of the committed corpus's files.
const SCOPE: PolicyScope<'static> = PolicyScope {
    function: "mlp_layer",
    definition_hash: 0x5eaf,
    compiler: "fuzz",
    target: "fuzz",
};

fn check(text: &str) {
    let Ok(learned) = LearnedPolicy::from_text(text, &SCOPE) else {
        return;
    };
    assert!(learned.hot().len() <= LearnedPolicy::MAX_HOT);
    assert!(learned.dynamic_dims().count() <= LearnedPolicy::MAX_DYNAMIC_CLASSES);
    let again = learned.to_text(&SCOPE);
    assert!(again.len() <= text.len(), "canonical text is no longer");
    assert_eq!(LearnedPolicy::from_text(&again, &SCOPE), Ok(learned));
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    check(text);
    let body = match text.rsplit_once("end\t") {
        Some((body, _)) => body.to_owned(),
        None => format!("{text}\n"),
    };
    check(&format!("{body}end\t{:016x}\n", stable_hash(body.as_bytes())));
});
