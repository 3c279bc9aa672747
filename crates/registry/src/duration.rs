//! ISO 8601 durations for the timers a step declares (`approval.remind_after`,
//! `approval.expires_after`, a step's `deadline`): `P3D`, `PT24H`, `P1DT12H`, `P2W`.
//!
//! Only units of fixed length are read: weeks, days, hours, minutes and seconds, in whole
//! numbers. Years and months are refused, since their length depends on the date they start
//! from, and a deadline should mean the same time in every organization and every month. A
//! duration is written back in one spelling (`P1DT12H`), so the same time is the same bytes in
//! a signed release.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest duration a timer may have: a year of days.
pub const MAX_TIMER_SECONDS: u64 = 365 * DAY;

const MINUTE: u64 = 60;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;
const WEEK: u64 = 7 * DAY;

/// Longest duration text read, in bytes.
const MAX_TEXT: usize = 64;

/// A whole number of seconds, read from and written as an ISO 8601 duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IsoDuration {
    seconds: u64,
}

impl IsoDuration {
    /// A duration of `seconds`.
    pub fn from_seconds(seconds: u64) -> Self {
        Self { seconds }
    }

    /// Its length in seconds.
    pub fn seconds(self) -> u64 {
        self.seconds
    }

    /// What is wrong with it as a timer (zero, or longer than a year); none when it is sound.
    pub fn timer_problem(self, field: &str) -> Option<String> {
        if self.seconds == 0 {
            return Some(format!(
                "{field} is zero; give a positive duration such as PT24H"
            ));
        }
        if self.seconds > MAX_TIMER_SECONDS {
            return Some(format!(
                "{field} is {self}, longer than a year (P365D); give a shorter duration"
            ));
        }
        None
    }
}

impl std::str::FromStr for IsoDuration {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let refuse = |why: &str| {
            let shown: String = text.chars().take(MAX_TEXT).collect();
            format!(
                "{shown:?} is not an ISO 8601 duration of weeks, days, hours, minutes and \
                 seconds ({why}); write e.g. PT24H, P3D or P1DT12H"
            )
        };
        if text.len() > MAX_TEXT {
            return Err(refuse("too long"));
        }
        let Some(rest) = text.strip_prefix('P') else {
            return Err(refuse("it starts with P"));
        };
        let mut seconds: u64 = 0;
        let mut in_time = false;
        let mut number = String::new();
        let mut units = 0;
        // Units in the order ISO 8601 writes them; each at most once.
        let mut last_rank = 0;
        for c in rest.chars() {
            match c {
                '0'..='9' => number.push(c),
                'T' if !in_time && number.is_empty() => {
                    in_time = true;
                    last_rank = 2;
                }
                _ => {
                    let (rank, unit) = match (in_time, c) {
                        (false, 'W') => (1, WEEK),
                        (false, 'D') => (2, DAY),
                        (true, 'H') => (3, HOUR),
                        (true, 'M') => (4, MINUTE),
                        (true, 'S') => (5, 1),
                        (false, 'Y' | 'M') => {
                            return Err(refuse("years and months vary in length"));
                        }
                        _ => return Err(refuse("an unknown unit or sign")),
                    };
                    if number.is_empty() || rank <= last_rank {
                        return Err(refuse("each unit once, in order, after its number"));
                    }
                    let n: u64 = number.parse().map_err(|_| refuse("a number too large"))?;
                    seconds = n
                        .checked_mul(unit)
                        .and_then(|s| seconds.checked_add(s))
                        .ok_or_else(|| refuse("a number too large"))?;
                    number.clear();
                    last_rank = rank;
                    units += 1;
                }
            }
        }
        if !number.is_empty() || units == 0 || (in_time && last_rank <= 2) {
            return Err(refuse("a number without its unit"));
        }
        Ok(Self { seconds })
    }
}

impl fmt::Display for IsoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.seconds / DAY;
        let hours = self.seconds % DAY / HOUR;
        let minutes = self.seconds % HOUR / MINUTE;
        let seconds = self.seconds % MINUTE;
        f.write_str("P")?;
        if days > 0 {
            write!(f, "{days}D")?;
        }
        if hours + minutes + seconds > 0 || days == 0 {
            f.write_str("T")?;
            if hours > 0 {
                write!(f, "{hours}H")?;
            }
            if minutes > 0 {
                write!(f, "{minutes}M")?;
            }
            if seconds > 0 || (hours == 0 && minutes == 0) {
                write!(f, "{seconds}S")?;
            }
        }
        Ok(())
    }
}

impl Serialize for IsoDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for IsoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for IsoDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "IsoDuration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "An ISO 8601 duration of weeks, days, hours, minutes and seconds",
            "pattern": "^P",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fixed_units_and_writes_one_spelling() {
        for (text, seconds, written) in [
            ("PT24H", DAY, "P1D"),
            ("P3D", 3 * DAY, "P3D"),
            ("P1DT12H", DAY + 12 * HOUR, "P1DT12H"),
            ("P2W", 2 * WEEK, "P14D"),
            ("PT90M", 90 * MINUTE, "PT1H30M"),
            ("PT45S", 45, "PT45S"),
            ("PT0S", 0, "PT0S"),
        ] {
            let d: IsoDuration = text.parse().unwrap();
            assert_eq!(d.seconds(), seconds, "{text}");
            assert_eq!(d.to_string(), written, "{text}");
            assert_eq!(written.parse::<IsoDuration>().unwrap(), d);
        }
    }

    #[test]
    fn refuses_calendar_units_signs_fractions_and_disorder() {
        for text in [
            "",
            "P",
            "PT",
            "P1Y",
            "P1M",
            "-P1D",
            "P-1D",
            "PT1.5H",
            "P1H",
            "PT1D",
            "P1DT",
            "PT1H1H",
            "PT1M1H",
            "1D",
            "P 1D",
            "P99999999999999999999D",
            "P1D2",
        ] {
            assert!(text.parse::<IsoDuration>().is_err(), "{text:?}");
        }
    }

    #[test]
    fn a_timer_is_positive_and_at_most_a_year() {
        let zero: IsoDuration = "PT0S".parse().unwrap();
        assert!(
            zero.timer_problem("expires_after")
                .unwrap()
                .contains("zero")
        );
        let year: IsoDuration = "P365D".parse().unwrap();
        assert_eq!(year.timer_problem("expires_after"), None);
        let more: IsoDuration = "P366D".parse().unwrap();
        assert!(
            more.timer_problem("expires_after")
                .unwrap()
                .contains("a year")
        );
    }
}
