//! Wall-clock instants as text, the way the API server writes them. Pure: callers
//! pass the time in, so formatting never reads a clock.

/// `unix_nanos` as Go's RFC3339Nano text (UTC, trailing zeros of the
/// fraction dropped), the format upstream stamps `config.seen` with.
pub fn rfc3339_nanos(unix_nanos: i64) -> String {
    let secs = unix_nanos.div_euclid(1_000_000_000);
    let nanos = unix_nanos.rem_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let mut text = format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
    if nanos != 0 {
        let fraction = format!("{nanos:09}");
        text.push('.');
        text.push_str(fraction.trim_end_matches('0'));
    }
    text.push('Z');
    text
}

/// Howard Hinnant's days-since-epoch to proleptic Gregorian date.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `unix_nanos` as klog's `MMDD hh:mm:ss.uuuuuu`, in UTC (klog writes the local time;
/// nodes run in UTC).
pub fn klog_timestamp(unix_nanos: i64) -> String {
    let secs = unix_nanos.div_euclid(1_000_000_000);
    let micros = unix_nanos.rem_euclid(1_000_000_000) / 1_000;
    let in_day = secs.rem_euclid(86_400);
    let (_, month, day) = civil_from_days(secs.div_euclid(86_400));
    format!(
        "{month:02}{day:02} {:02}:{:02}:{:02}.{micros:06}",
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60
    )
}

/// `unix_nanos` as `YYYYMMDD-hhmmss` in UTC (Go's `20060102-150405`, the suffix of a
/// rotated container log).
pub fn compact_utc_timestamp(unix_nanos: i64) -> String {
    let secs = unix_nanos.div_euclid(1_000_000_000);
    let rem = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `unix_nanos` as RFC3339 with whole seconds (`metav1.Time`'s wire format).
pub fn rfc3339_seconds(unix_nanos: i64) -> String {
    rfc3339_nanos(unix_nanos.div_euclid(1_000_000_000) * 1_000_000_000)
}

/// `unix_nanos` as RFC3339 with exactly six fraction digits (`metav1.MicroTime`'s wire
/// format, as a Lease's `renewTime`).
pub fn rfc3339_micros(unix_nanos: i64) -> String {
    let secs = unix_nanos.div_euclid(1_000_000_000);
    let micros = unix_nanos.rem_euclid(1_000_000_000) / 1_000;
    let whole = rfc3339_nanos(secs * 1_000_000_000);
    format!("{}.{micros:06}Z", whole.trim_end_matches('Z'))
}

/// RFC3339 text (`2026-11-21T03:33:31Z`, `...31.5Z`, `...31+02:00`) as Unix nanoseconds;
/// `None` when it is not RFC3339.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let digits = |from: usize, len: usize| -> Option<i64> {
        let part = text.get(from..from + len)?;
        part.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| part.parse().ok())
            .flatten()
    };
    if bytes.len() < 20 || bytes[4] != b'-' || bytes[7] != b'-' || bytes[13] != b':' {
        return None;
    }
    if !matches!(bytes[10], b'T' | b't' | b' ') || bytes[16] != b':' {
        return None;
    }
    let (year, month, day) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (hour, minute, second) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut at = 19;
    let mut nanos = 0i64;
    if bytes.get(at) == Some(&b'.') {
        let start = at + 1;
        let mut end = start;
        while end < bytes.len() && bytes[end].is_ascii_digit() {
            end += 1;
        }
        if end == start {
            return None;
        }
        let fraction = &text[start..end.min(start + 9)];
        nanos = fraction.parse::<i64>().ok()? * 10i64.pow(9 - fraction.len() as u32);
        at = end;
    }
    let offset_secs = match bytes.get(at)? {
        b'Z' | b'z' if at + 1 == bytes.len() => 0,
        sign @ (b'+' | b'-') if at + 6 == bytes.len() && bytes[at + 3] == b':' => {
            let value = digits(at + 1, 2)? * 3600 + digits(at + 4, 2)? * 60;
            if *sign == b'+' {
                value
            } else {
                -value
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// Howard Hinnant's proleptic Gregorian date to days since the epoch.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_go() {
        assert_eq!(rfc3339_nanos(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_nanos(1_500_000_000), "1970-01-01T00:00:01.5Z");
        assert_eq!(rfc3339_nanos(-1_000_000_000), "1969-12-31T23:59:59Z");
        assert_eq!(rfc3339_nanos(-1), "1969-12-31T23:59:59.999999999Z");
        assert_eq!(
            rfc3339_nanos(951_782_400_500_000_000),
            "2000-02-29T00:00:00.5Z"
        );
        assert_eq!(
            rfc3339_nanos(1_795_232_011_000_000_123),
            "2026-11-21T03:33:31.000000123Z"
        );
        assert_eq!(
            rfc3339_seconds(1_795_232_011_999_999_999),
            "2026-11-21T03:33:31Z"
        );
    }

    #[test]
    fn micros_have_six_digits() {
        assert_eq!(rfc3339_micros(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            rfc3339_micros(1_795_232_011_123_456_789),
            "2026-11-21T03:33:31.123456Z"
        );
    }

    #[test]
    fn parses_what_it_formats_and_offsets() {
        for nanos in [
            0,
            1_500_000_000,
            951_782_400_500_000_000,
            1_795_232_011_000_000_123,
        ] {
            assert_eq!(parse_rfc3339(&rfc3339_nanos(nanos)), Some(nanos));
        }
        assert_eq!(
            parse_rfc3339("2026-11-21T05:33:31+02:00"),
            Some(1_795_232_011_000_000_000)
        );
        assert_eq!(parse_rfc3339("2026-11-21"), None);
        assert_eq!(parse_rfc3339("2026-13-21T03:33:31Z"), None);
        assert_eq!(parse_rfc3339("2026-11-21T03:33:31"), None);
        assert_eq!(parse_rfc3339("2026-11-21T03:33:31.Z"), None);
    }
}
