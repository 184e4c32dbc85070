//! Which of the process's own executable pages it gives back, and when.
//!
//! Why: the kernel keeps every page of the executable a process has run mapped into it
//! (and 64 KiB around each, its fault-around), for as long as the process lives. Most of
//! a node agent's code runs once, at start-up (flags, configuration and kubeconfig
//! decoding, TLS set-up, registration, the first sync of every pod), and then stays
//! resident for months beside the few MiB its loops run. Dropping the executable's
//! read-only pages from the process once the start-up work is done, and now and then
//! after, leaves resident what the node runs since; a page needed again is mapped back
//! from the page cache (a minor fault), and the pages no process maps are the first the
//! kernel reclaims under memory pressure.

use std::time::Duration;

/// The first release, when the start-up's own work (flags, configuration, kubeconfig,
/// TLS, registration) is over; the pods' first syncs may still be running.
pub const FIRST_RELEASE_AFTER: Duration = Duration::from_secs(10);
/// The gaps between releases double up to this, then stay: what a later burst of work
/// (pods created, a scrape of a new kind) left resident is given back within this long.
/// The node status report frequency: each release costs about a millisecond and the
/// minor faults of the code that runs next.
pub const RELEASE_PERIOD: Duration = Duration::from_secs(300);

/// When the release after the one at `last` (since start; `None`: none yet) is due: at
/// 10 s, 20 s, 40 s and so on, doubling while start-up's pod syncs may still be running,
/// then every [`RELEASE_PERIOD`].
pub fn next_release(last: Option<Duration>) -> Duration {
    match last {
        None => FIRST_RELEASE_AFTER,
        Some(at) => at + at.clamp(FIRST_RELEASE_AFTER, RELEASE_PERIOD),
    }
}

/// One mapping of the process as `/proc/self/smaps` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// The permissions field, such as `r-xp`.
    pub perms: String,
    /// The mapped file; empty for anonymous mappings.
    pub path: String,
    pub rss_kib: u64,
    /// Pages of the mapping written to (copied on write, relocations included): those
    /// exist nowhere else.
    pub anonymous_kib: u64,
}

/// The mappings of `/proc/self/smaps`'s text; lines it does not know are passed over.
pub fn parse_smaps(text: &str) -> Vec<Mapping> {
    let mut mappings: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        if let Some(mapping) = mapping_header(line) {
            mappings.push(mapping);
            continue;
        }
        let Some(current) = mappings.last_mut() else {
            continue;
        };
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let kib = || {
            value
                .trim()
                .strip_suffix("kB")
                .and_then(|n| n.trim().parse::<u64>().ok())
        };
        match key {
            "Rss" => current.rss_kib = kib().unwrap_or(0),
            // Unknown means possibly written: such a mapping is never released.
            "Anonymous" => current.anonymous_kib = kib().unwrap_or(u64::MAX),
            _ => {}
        }
    }
    mappings
}

/// `start-end perms offset dev inode [path]`, the header line of a mapping.
fn mapping_header(line: &str) -> Option<Mapping> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?;
    if perms.len() != 4 {
        return None;
    }
    let _offset = fields.next()?;
    let _device = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.next().unwrap_or("").trim_start().to_owned();
    Some(Mapping {
        start,
        end,
        perms: perms.to_owned(),
        path,
        rss_kib: 0,
        // Until its `Anonymous:` line says otherwise.
        anonymous_kib: u64::MAX,
    })
}

/// The address ranges to release: the executable's private mappings that can be neither
/// written nor were (no anonymous page: relocated data such as `.data.rel.ro` is
/// excluded), with pages resident. Their pages equal the file's, so dropping them loses
/// nothing.
pub fn releasable<'a>(mappings: &'a [Mapping], executable: &str) -> Vec<&'a Mapping> {
    mappings
        .iter()
        .filter(|m| {
            !executable.is_empty()
                && m.path == executable
                && (m.perms == "r--p" || m.perms == "r-xp")
                && m.anonymous_kib == 0
                && m.rss_kib > 0
                && m.end > m.start
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXE: &str = "/usr/local/bin/rkubelet";

    fn smaps() -> String {
        let mapping = |range: &str, perms: &str, path: &str, rss: u64, anon: u64| {
            format!(
                "{range} {perms} 00000000 fd:01 42 {path}\nSize: 1024 kB\nRss: {rss} kB\nPss: {rss} kB\nAnonymous: {anon} kB\nVmFlags: rd mr mw me\n"
            )
        };
        [
            mapping(
                "1000-3000",
                "r--p",
                &format!("                  {EXE}"),
                8,
                0,
            ),
            mapping("3000-9000", "r-xp", EXE, 24, 0),
            // .data.rel.ro after relocation: written, never released.
            mapping("9000-a000", "r--p", EXE, 4, 4),
            mapping("a000-b000", "rw-p", EXE, 4, 0),
            mapping(
                "c000-d000",
                "r-xp",
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
                4,
                0,
            ),
            mapping("e000-f000", "rw-p", "[heap]", 4, 4),
            mapping("f000-f800", "r--p", EXE, 0, 0),
        ]
        .concat()
    }

    #[test]
    fn smaps_gives_each_mapping_its_range_permissions_path_and_sizes() {
        let mappings = parse_smaps(&smaps());
        assert_eq!(mappings.len(), 7);
        assert_eq!(
            mappings[0],
            Mapping {
                start: 0x1000,
                end: 0x3000,
                perms: "r--p".into(),
                path: EXE.into(),
                rss_kib: 8,
                anonymous_kib: 0,
            }
        );
        assert_eq!(mappings[5].path, "[heap]");
        assert_eq!(mappings[2].anonymous_kib, 4);
    }

    #[test]
    fn only_the_executables_unwritten_read_only_mappings_with_pages_are_released() {
        let mappings = parse_smaps(&smaps());
        let ranges: Vec<(u64, u64)> = releasable(&mappings, EXE)
            .iter()
            .map(|m| (m.start, m.end))
            .collect();
        assert_eq!(ranges, vec![(0x1000, 0x3000), (0x3000, 0x9000)]);
    }

    #[test]
    fn a_mapping_without_its_anonymous_count_is_kept() {
        let text = format!("1000-2000 r-xp 00000000 fd:01 42 {EXE}\nRss: 4 kB\n");
        assert!(releasable(&parse_smaps(&text), EXE).is_empty());
        assert!(releasable(&parse_smaps(&smaps()), "").is_empty());
    }

    #[test]
    fn a_replaced_executable_is_still_matched_by_its_deleted_name() {
        let exe = format!("{EXE} (deleted)");
        let text = format!("1000-2000 r-xp 00000000 fd:01 42 {exe}\nRss: 4 kB\nAnonymous: 0 kB\n");
        assert_eq!(releasable(&parse_smaps(&text), &exe).len(), 1);
    }

    #[test]
    fn releases_come_after_start_up_doubling_their_gaps_up_to_the_period() {
        let mut at = Vec::new();
        let mut last = None;
        for _ in 0..8 {
            let next = next_release(last);
            at.push(next.as_secs());
            last = Some(next);
        }
        assert_eq!(at, [10, 20, 40, 80, 160, 320, 620, 920]);
    }
}
