//! CPU amounts to CFS cgroup values, as upstream's `MilliCPUToShares` and
//! `milliCPUToQuota`.

/// `cpu.shares` of one whole CPU.
pub const SHARES_PER_CPU: i64 = 1024;
/// The kernel's bounds on `cpu.shares`.
pub const MIN_SHARES: i64 = 2;
pub const MAX_SHARES: i64 = 262_144;
/// The CFS period in microseconds unless configured otherwise (`cpuCFSQuotaPeriod`'s
/// default, and the kernel's and runc's).
pub const DEFAULT_QUOTA_PERIOD_US: u64 = 100_000;
/// The smallest quota the kernel accepts: 1 ms.
pub const MIN_QUOTA_US: i64 = 1000;

const MILLI_PER_CPU: i64 = 1000;

/// `cpuCFSQuotaPeriod` in microseconds, as the cgroup files take it.
pub fn period_us(period: std::time::Duration) -> u64 {
    u64::try_from(period.as_micros()).unwrap_or(u64::MAX)
}

/// `cpu.shares` for a CPU request in millicores: proportional, within the
/// kernel's bounds (no request gets the minimum).
pub fn milli_cpu_to_shares(milli_cpu: i64) -> i64 {
    if milli_cpu <= 0 {
        return MIN_SHARES;
    }
    let shares = i128::from(milli_cpu) * i128::from(SHARES_PER_CPU) / i128::from(MILLI_PER_CPU);
    i64::try_from(shares.clamp(i128::from(MIN_SHARES), i128::from(MAX_SHARES)))
        .unwrap_or(MAX_SHARES)
}

/// The CFS quota in microseconds per `period_us` for a CPU limit in
/// millicores; 0 (no quota) without a limit, else at least 1 ms.
pub fn milli_cpu_to_quota(milli_cpu: i64, period_us: i64) -> i64 {
    if milli_cpu <= 0 {
        return 0;
    }
    let quota = i128::from(milli_cpu) * i128::from(period_us) / i128::from(MILLI_PER_CPU);
    i64::try_from(quota.max(i128::from(MIN_QUOTA_US))).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares() {
        for (milli, want) in [
            (0, 2),
            (-5, 2),
            (1, 2),
            (2, 2),
            (10, 10),
            (100, 102),
            (500, 512),
            (1000, 1024),
            (2500, 2560),
            (256_000, 262_144),
            (1_000_000, 262_144),
            (i64::MAX, 262_144),
        ] {
            assert_eq!(milli_cpu_to_shares(milli), want, "{milli}m");
        }
    }

    #[test]
    fn quota() {
        for (milli, period, want) in [
            (0, 100_000, 0),
            (1, 100_000, 1000),
            (5, 100_000, 1000),
            (10, 100_000, 1000),
            (100, 100_000, 10_000),
            (250, 100_000, 25_000),
            (1000, 100_000, 100_000),
            (1500, 50_000, 75_000),
            (i64::MAX, 100_000, i64::MAX),
        ] {
            assert_eq!(milli_cpu_to_quota(milli, period), want, "{milli}m/{period}");
        }
    }
}
