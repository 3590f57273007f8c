//! The host's process table, read from `/proc`: which processes descend from a daemon, and
//! whether they are still there after it died.

use std::collections::HashMap;
use std::time::Duration;

/// One process as `/proc/PID/stat` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub pid: i32,
    pub ppid: i32,
    pub comm: String,
    /// `R`, `S`, `Z`, …
    pub state: char,
    /// Clock ticks after boot at which it started: with the pid, what tells this process
    /// from a later one that reused its pid (its name changes when it executes a program).
    pub start_time: u64,
}

/// Every process of the host (that this process may see).
pub fn all() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .collect()
}

/// `/proc/PID/stat`, when the process exists.
pub fn stat(pid: i32) -> Option<Proc> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name is in parentheses and may contain anything, parentheses included.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text[open + 1..close].to_owned();
    let mut rest = text[close + 1..].split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    // Fields 5 to 21 lie between the parent and the start time.
    let start_time = rest.nth(17)?.parse().ok()?;
    Some(Proc {
        pid,
        ppid,
        comm,
        state,
        start_time,
    })
}

/// Every process that descends from `root` (not `root` itself).
pub fn descendants(root: i32) -> Vec<Proc> {
    let table = all();
    let mut children: HashMap<i32, Vec<&Proc>> = HashMap::new();
    for proc in &table {
        children.entry(proc.ppid).or_default().push(proc);
    }
    let mut found = Vec::new();
    let mut queue = vec![root];
    while let Some(pid) = queue.pop() {
        for child in children.get(&pid).into_iter().flatten() {
            found.push((*child).clone());
            queue.push(child.pid);
        }
    }
    found
}

/// Whether `proc` is still running: present, and not a zombie (a zombie holds no
/// descriptors, memory or namespaces; only its exit status waits to be collected).
pub fn running(proc: &Proc) -> bool {
    // A pid reused by an unrelated process is not the same process.
    stat(proc.pid).is_some_and(|now| now.state != 'Z' && now.start_time == proc.start_time)
}

/// Waits up to `limit` until none of `procs` is running; returns those that still are.
pub async fn await_gone(procs: &[Proc], limit: Duration) -> Vec<Proc> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let left: Vec<Proc> = procs.iter().filter(|p| running(p)).cloned().collect();
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_in_the_table_with_its_parent() {
        let me = stat(std::process::id() as i32).expect("own stat");
        assert_eq!(me.pid, std::process::id() as i32);
        assert!(me.ppid > 0);
        assert!(me.start_time > 0);
        assert!(running(&me));
        assert!(all().iter().any(|p| p.pid == me.pid));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let found = descendants(me.pid);
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            found.iter().any(|p| p.pid == child.id() as i32),
            "{found:?}"
        );
    }
}
