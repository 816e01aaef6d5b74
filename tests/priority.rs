//! The engine's background work (the first build, the watcher, the periodic reconcile, the
//! index cache's saves, and the threads tantivy starts from them) runs at a lower priority than
//! the threads that answer requests, so a start that loads a large index does not delay the
//! first answer on a machine with few cores. Read from the running binary's own threads.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::common::write_tree;

/// Each thread's name and nice value, from /proc (field 19 of `stat`; the name is in
/// parentheses and may hold spaces, so the fields are counted after the last `)`).
fn threads(pid: u32) -> Vec<(String, i64)> {
    let mut found = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return found;
    };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_owned();
        let nice = stat[close + 1..]
            .split_whitespace()
            .nth(16)
            .and_then(|n| n.parse().ok())
            .expect("a nice value in stat");
        found.push((name, nice));
    }
    found
}

trait WaitOrKill {
    /// Waits up to 30 s for the process to end, then kills it; true when it had to be killed.
    fn wait_timeout_or_kill(&mut self) -> bool;
}

impl WaitOrKill for std::process::Child {
    fn wait_timeout_or_kill(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.try_wait() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.kill();
        let _ = self.wait();
        true
    }
}

#[test]
fn background_threads_run_at_a_lower_priority_than_the_threads_that_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    write_tree(
        &vault,
        &[("Home.md", "# Home\n[[Other]]\n"), ("Other.md", "other\n")],
    );
    let mut child = crate::common::capvault()
        .arg("serve")
        .arg(&vault)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // The periodic reconcile and the cache saver sleep for a minute between rounds, and the
    // index writer's threads (started by the first build) live as long as the engine, so all
    // are there to be read once started.
    let deadline = Instant::now() + Duration::from_secs(60);
    let by_name = loop {
        let mut by_name: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for (name, nice) in threads(pid) {
            by_name.entry(name).or_default().push(nice);
        }
        let started = ["capvault-sync", "capvault-cache", "segment_updater"]
            .iter()
            .all(|n| by_name.contains_key(*n));
        if started || Instant::now() > deadline {
            break by_name;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Closing stdin ends the session and the process.
    drop(child.stdin.take());
    if child.wait_timeout_or_kill() {
        panic!("capvault did not exit after stdin closed");
    }
    for name in [
        "capvault-sync",
        "capvault-cache",
        "capvault-build",
        "segment_updater",
    ] {
        assert!(by_name.contains_key(name), "no {name} thread: {by_name:?}");
    }
    for (name, nices) in &by_name {
        // The process's first thread (and the threads it started unnamed) and tokio's threads
        // answer requests at the process's own priority; every other thread is the engine's
        // or was started by it.
        let want = if name == "capvault" || name.starts_with("tokio") {
            0
        } else {
            10
        };
        assert!(
            nices.iter().all(|&n| n == want),
            "{name} at {nices:?}, not {want}: {by_name:?}"
        );
    }
}
