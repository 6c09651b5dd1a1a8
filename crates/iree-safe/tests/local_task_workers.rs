//! `Device::open_local_task`: a `local-task` device with at most the
//! workers asked for (one per physical core up to that), and no change to
//! the devices opened after it. In a file of
//! its own: it counts the process's threads, which other tests' devices
//! would add to.

use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use iree_safe::Device;

/// The task system's worker threads alive now (IREE names them
/// `iree-worker-<n>`, iree/task/topology.c).
fn workers_now() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("iree-worker"))
        .count()
}

/// The worker threads once they have started: each names itself when it
/// runs, so the count settles shortly after the device opens. Waits until
/// there is one and the count has not changed for 200 ms (at most 10 s).
fn workers() -> usize {
    let start = Instant::now();
    let (mut count, mut since) = (workers_now(), Instant::now());
    while since.elapsed() < Duration::from_millis(200) && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(10));
        let now = workers_now();
        if now != count {
            (count, since) = (now, Instant::now());
        }
    }
    count
}

#[test]
#[cfg_attr(miri, ignore = "counts threads in /proc")]
fn a_local_task_device_gets_the_workers_asked_for_and_only_it() {
    let default = {
        let _device = Device::open("local-task").unwrap();
        workers()
    };
    assert!(default >= 1, "{default} workers by default");
    for count in [1, 3] {
        let device = Device::open_local_task(NonZeroUsize::new(count).unwrap()).unwrap();
        assert_eq!(device.uri(), "local-task");
        assert_eq!(workers(), count.min(default), "asked for {count}");
        drop(device);
        let _device = Device::open("local-task").unwrap();
        assert_eq!(workers(), default, "after a device of {count}");
    }
}
