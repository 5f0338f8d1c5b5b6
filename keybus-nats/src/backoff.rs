//! Exponential backoff between retries, reset by a success.

use std::time::Duration;

/// How long a bridge waits before retrying after a failure: `min`, doubling
/// per consecutive failure up to `max`; a success starts over at `min`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first wait.
    pub min: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for Backoff {
    /// 50 ms doubling to 2 s: a restarted local server is found within about 2 s.
    fn default() -> Self {
        Backoff {
            min: Duration::from_millis(50),
            max: Duration::from_secs(2),
        }
    }
}

/// The running state of a [`Backoff`].
#[derive(Debug)]
pub(crate) struct Retry {
    policy: Backoff,
    failures: u32,
}

impl Retry {
    pub(crate) fn new(policy: Backoff) -> Self {
        Retry {
            policy,
            failures: 0,
        }
    }

    /// The wait before the next try, after one more failure.
    pub(crate) fn fail(&mut self) -> Duration {
        let wait = self
            .policy
            .min
            .saturating_mul(1u32 << self.failures.min(16))
            .min(self.policy.max);
        self.failures = self.failures.saturating_add(1);
        wait
    }

    pub(crate) fn succeed(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_max_and_resets() {
        let mut r = Retry::new(Backoff {
            min: Duration::from_millis(10),
            max: Duration::from_millis(35),
        });
        let waits: Vec<_> = (0..4).map(|_| r.fail().as_millis()).collect();
        assert_eq!(waits, [10, 20, 35, 35]);
        r.succeed();
        assert_eq!(r.fail().as_millis(), 10);
    }
}
