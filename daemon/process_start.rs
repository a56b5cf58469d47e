//! When a process started, as the kernel counts it: with its pid, this names one process for good, where
//! a pid alone may since have been given to another.

/// The start time of process `pid` (clock ticks since boot, field 22 of `/proc/PID/stat`); `None` where
/// there is no /proc, or no such process.
pub fn of(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse(&stat)
}

/// The name in field 2 may hold spaces and parentheses: the fields are counted after its last `)`.
fn parse(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_start_time_is_read_past_a_name_with_spaces_and_parentheses() {
        let stat =
            "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10";
        assert_eq!(super::parse(stat), Some(98765));
        assert_eq!(super::parse("4242 (x) S 1"), None);
        assert!(super::of(std::process::id()).is_some());
    }
}
