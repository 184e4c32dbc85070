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

/// `unix_nanos` as RFC3339 with whole seconds (`metav1.Time`'s wire format).
pub fn rfc3339_seconds(unix_nanos: i64) -> String {
    rfc3339_nanos(unix_nanos.div_euclid(1_000_000_000) * 1_000_000_000)
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
}
