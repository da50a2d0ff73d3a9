//! The test helpers' scratch folders: a test process never drops its statics, so each process's
//! vector stores stay on disk after it ends; the next test process removes them.

use crate::common::*;

#[test]
fn the_folders_of_ended_test_processes_are_removed_and_live_ones_kept() {
    let base = tempfile::tempdir().unwrap();
    // An ended process: its folder and an unheld lock file.
    std::fs::create_dir_all(base.path().join("4000001/vectors-0")).unwrap();
    std::fs::write(base.path().join("4000001/vectors-0/store"), b"x").unwrap();
    std::fs::write(base.path().join("4000001.lock"), b"").unwrap();
    // A killed process that never wrote its lock file.
    std::fs::create_dir_all(base.path().join("4000002")).unwrap();
    // A live process: holds its lock.
    std::fs::create_dir_all(base.path().join("4000003/vectors-0")).unwrap();
    let held = std::fs::File::create(base.path().join("4000003.lock")).unwrap();
    held.lock().unwrap();

    assert_eq!(sweep_scratch(base.path()), 2);
    assert!(!base.path().join("4000001").exists());
    assert!(!base.path().join("4000002").exists());
    assert!(base.path().join("4000003/vectors-0").exists(), "a live process's folder is kept");
    drop(held);
    assert_eq!(sweep_scratch(base.path()), 1, "once it ends, it goes too");

    // This process's own folder is under the shared scratch base and is what `bin` uses.
    let own = scratch();
    assert!(own.ends_with(std::process::id().to_string()) && own.is_dir());
    sweep_scratch(own.parent().unwrap());
    assert!(own.is_dir(), "a sweep never removes the folder of the process sweeping");
}
