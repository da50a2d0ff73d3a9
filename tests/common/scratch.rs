//! Scratch folders of test processes: the vector stores `bin` gives each call live under
//! `<tmp>/toolgraph-tests/<pid>`, and a test process that ends leaves them for the next to remove.

use std::path::{Path, PathBuf};

/// This test process's scratch folder, `<tmp>/toolgraph-tests/<pid>`: the process holds
/// `<pid>.lock` while it lives, and its first call removes the folders of processes that no longer
/// hold theirs (a test process never drops its statics, so no process removes its own).
pub fn scratch() -> &'static Path {
    static DIR: std::sync::OnceLock<(PathBuf, std::fs::File)> = std::sync::OnceLock::new();
    &DIR.get_or_init(|| {
        let base = std::env::temp_dir().join("toolgraph-tests");
        std::fs::create_dir_all(&base).unwrap();
        let pid = std::process::id().to_string();
        // Locked before the folder exists, so a sweep never sees it unheld.
        let lock = lock_file(&base, &pid);
        lock.lock().unwrap();
        sweep_scratch(&base);
        // A folder of an ended process that had this pid: its lock is ours now.
        let dir = base.join(&pid);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        (dir, lock)
    })
    .0
}

fn lock_file(base: &Path, name: &str) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(base.join(format!("{name}.lock")))
        .unwrap()
}

/// Remove every folder under `base` whose process no longer holds its lock (it ended, or was
/// killed); the lock files stay (empty: unlinking one a new process of the same pid is taking
/// would let the next sweep remove a live folder). Returns how many were removed.
pub fn sweep_scratch(base: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(base) else { return 0 };
    let mut removed = 0;
    for e in entries.flatten() {
        let (path, name) = (e.path(), e.file_name().to_string_lossy().into_owned());
        if !path.is_dir() {
            continue;
        }
        let lock = lock_file(base, &name);
        if lock.try_lock().is_ok() && std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}
