//! A token bucket (Go's `golang.org/x/time/rate` and client-go's flowcontrol): `qps` tokens
//! a second, at most `burst` saved up. Time is a value: callers pass a monotonic `now`.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Duration,
}

impl TokenBucket {
    /// A full bucket at `now`. `qps <= 0` means no limit.
    pub fn new(qps: f64, burst: u32, now: Duration) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps,
            burst,
            tokens: burst,
            last: now,
        }
    }

    pub fn unlimited(&self) -> bool {
        self.qps <= 0.0 || !self.qps.is_finite()
    }

    fn refill(&mut self, now: Duration) {
        let elapsed = now.saturating_sub(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
    }

    /// Take a token now if one is there (the spam filter's `TryAccept`).
    pub fn try_take(&mut self, now: Duration) -> bool {
        if self.unlimited() {
            return true;
        }
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Reserve a token (the client's `Wait`): how long the caller must wait before using
    /// it; zero when one is there now. Reservations queue: tokens may go negative.
    pub fn reserve(&mut self, now: Duration) -> Duration {
        if self.unlimited() {
            return Duration::ZERO;
        }
        self.refill(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn a_burst_then_the_rate() {
        let mut bucket = TokenBucket::new(5.0, 10, ms(0));
        let waits: Vec<Duration> = (0..12).map(|_| bucket.reserve(ms(0))).collect();
        assert!(waits[..10].iter().all(|w| w.is_zero()));
        assert_eq!(waits[10], ms(200));
        assert_eq!(waits[11], ms(400));
        // After a second of quiet, five tokens came back but two were already promised.
        assert_eq!(bucket.reserve(ms(1000)), ms(0));
        assert_eq!(bucket.reserve(ms(1000)), ms(0));
        assert_eq!(bucket.reserve(ms(1000)), ms(0));
        assert_eq!(bucket.reserve(ms(1000)), ms(200));
    }

    #[test]
    fn try_take_refuses_without_queueing() {
        let mut bucket = TokenBucket::new(1.0 / 300.0, 2, ms(0));
        assert!(bucket.try_take(ms(0)));
        assert!(bucket.try_take(ms(0)));
        assert!(!bucket.try_take(ms(0)));
        assert!(!bucket.try_take(Duration::from_secs(299)));
        assert!(bucket.try_take(Duration::from_secs(300)));
    }

    #[test]
    fn zero_qps_is_unlimited() {
        let mut bucket = TokenBucket::new(0.0, 1, ms(0));
        assert!((0..1000).all(|_| bucket.reserve(ms(0)).is_zero()));
    }
}
