//! A large copy to the host is written on huge pages where the kernel
//! offers them: reading a 64 MiB tensor back takes a few dozen page faults,
//! not one per 4 KiB page (16,384).
#![cfg(all(target_os = "linux", not(iree_mock)))] // the mock's copies are not the kernel's pages

use iree_safe::{Runtime, Tensor};

const ELEMENTS: usize = 16 << 20; // 64 MiB of f32

#[test]
fn a_large_host_copy_faults_per_huge_page() {
    let Some(mode) = transparent_huge_pages() else {
        eprintln!("skipped: this kernel has no transparent huge pages");
        return;
    };
    if mode == "never" {
        eprintln!("skipped: transparent huge pages are off (`never`)");
        return;
    }
    let runtime = Runtime::new("local-sync").unwrap();
    let values: Vec<f32> = (0..ELEMENTS).map(|i| i as f32).collect();
    let x = Tensor::from_slice(runtime.device(), &[ELEMENTS], &values).unwrap();

    let before = minor_faults();
    let back = x.to_vec::<f32>().unwrap();
    let faults = minor_faults() - before;

    assert_eq!(back, values);
    let base_pages = (ELEMENTS * 4 / 4096) as u64;
    assert!(
        faults < base_pages / 4,
        "reading 64 MiB back took {faults} page faults (THP `{mode}`), \
         about one per 4 KiB page ({base_pages}): the copy was not on huge pages"
    );
}

/// The kernel's transparent huge page mode (`always`, `madvise` or
/// `never`), `None` where it has none.
fn transparent_huge_pages() -> Option<String> {
    let text = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(text[start..end].to_owned())
}

/// This thread's minor page faults so far (field 10 of
/// `/proc/thread-self/stat`, counted after the command's closing `)`).
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let after_command = &stat[stat.rfind(')').unwrap() + 2..];
    after_command.split(' ').nth(7).unwrap().parse().unwrap()
}
