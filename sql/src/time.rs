//! Date-time literals (IoTDB's `DATETIME_LITERAL`) to milliseconds since the epoch, and the
//! civil calendar arithmetic under them (proleptic Gregorian, Howard Hinnant's
//! `days_from_civil`). A literal without a zone offset is UTC: Fencepost does not take the
//! session's zone yet.

use std::time::{SystemTime, UNIX_EPOCH};

const MS_PER_DAY: i64 = 86_400_000;

/// The last year taken in a literal: i64 milliseconds end in the year 292,278,994, and a
/// bound keeps the day arithmetic from overflowing.
const YEAR_MAX: i64 = 999_999_999;

/// The wall clock, in milliseconds since the epoch (0 before it, saturated far after).
pub fn wall_clock_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `ms` moved by `months` calendar months in UTC, the time of day kept and the day of the month
/// clamped to the month's last (January 31st + 1 month is February 28th or 29th); `None` past
/// the i64 range.
pub fn add_months(ms: i64, months: i64) -> Option<i64> {
    let (days, time_of_day) = (ms.div_euclid(MS_PER_DAY), ms.rem_euclid(MS_PER_DAY));
    let (year, month, day) = civil_from_days(days);
    let total = (year.checked_mul(12)? + i64::from(month) - 1).checked_add(months)?;
    let (year, month) = (total.div_euclid(12), total.rem_euclid(12) as u32 + 1);
    if year.abs() > YEAR_MAX {
        return None;
    }
    let day = day.min(days_in_month(year, month));
    days_from_civil(year, month, day)
        .checked_mul(MS_PER_DAY)?
        .checked_add(time_of_day)
}

/// Whether `year` has a February 29th.
pub fn is_leap_year(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// How many days `month` (1 to 12) of `year` has.
pub fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to `year-month-day` (negative before it); `month` is 1 to 12 and `day`
/// 1 to 31. Exact for any year whose days fit in an i64 with room (|year| < 2^50).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    // Years start on March 1st, so the leap day is the last day of the year.
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400); // [0, 399]
    let month_from_march = i64::from((month + 9) % 12); // March 0 .. February 11
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1; // [0, 365]
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The inverse of [`days_from_civil`]: `(year, month, day)` of the day `days` after 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097); // [0, 146096]
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153; // [0, 11]
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month as u32, day as u32)
}

/// The fields of a date-time literal, as written.
#[derive(Debug, Default, PartialEq)]
struct Fields {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    millis: u32,
    /// East of UTC, in minutes.
    offset_minutes: i64,
}

/// Milliseconds since the epoch of a date-time literal: `yyyy-MM-dd` (also `/` or `.` between
/// the fields), optionally followed by `T` or blanks and `HH:mm:ss`, optional `.S` to `.SSS`
/// and an optional zone `Z`, `±HH:mm`, `±HHmm` or `±HH`. Month, day and the time fields take one
/// or two digits, the year four or more. Without a zone the time is UTC. The error names `text`
/// and the field that is wrong.
pub fn datetime_ms(text: &str) -> Result<i64, String> {
    let invalid = |why: String| format!("invalid date-time '{text}': {why}");
    let fields = Scanner::new(text).fields().map_err(invalid)?;
    check(&fields).map_err(invalid)?;
    let days = days_from_civil(fields.year, fields.month, fields.day);
    let seconds =
        i64::from(fields.hour) * 3600 + i64::from(fields.minute) * 60 + i64::from(fields.second)
            - fields.offset_minutes * 60;
    days.checked_mul(MS_PER_DAY)
        .and_then(|ms| ms.checked_add(seconds * 1000 + i64::from(fields.millis)))
        .ok_or_else(|| format!("date-time '{text}' is out of range (times are i64 milliseconds)"))
}

/// Each field within its range: month 1 to 12, day within the month (leap years counted), hour
/// below 24, minute and second below 60, a zone within ±18:00 as IoTDB (Java) takes it.
fn check(f: &Fields) -> Result<(), String> {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    if !(1..=12).contains(&f.month) {
        return Err(format!("month {} is not 1 to 12", f.month));
    }
    let days = days_in_month(f.year, f.month);
    if f.day == 0 || f.day > days {
        let name = MONTHS[f.month as usize - 1];
        return Err(format!(
            "day {} is not 1 to {days} ({name} {} has {days} days)",
            f.day, f.year
        ));
    }
    if f.hour > 23 {
        return Err(format!("hour {} is not 0 to 23", f.hour));
    }
    if f.minute > 59 {
        return Err(format!("minute {} is not 0 to 59", f.minute));
    }
    if f.second > 59 {
        return Err(format!("second {} is not 0 to 59", f.second));
    }
    if f.offset_minutes.abs() > 18 * 60 {
        return Err("the zone offset is beyond ±18:00".into());
    }
    Ok(())
}

/// Reads a literal's fields left to right; errors say what was expected.
struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str) -> Self {
        Scanner {
            bytes: text.as_bytes(),
            at: 0,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        self.at += usize::from(found);
        found
    }

    /// A run of `min` to `max` digits, as a number; `what` names it in errors.
    fn number(&mut self, what: &str, min: usize, max: usize) -> Result<i64, String> {
        let start = self.at;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
        let digits = &self.bytes[start..self.at];
        if digits.is_empty() {
            return Err(format!("expected the {what}, {}", self.found()));
        }
        if digits.len() < min || digits.len() > max {
            let wanted = match (min, max) {
                (min, usize::MAX) => format!("{min} or more"),
                (min, max) if min == max => format!("{min}"),
                (min, max) if min + 1 == max => format!("{min} or {max}"),
                (min, max) => format!("{min} to {max}"),
            };
            return Err(format!(
                "the {what} takes {wanted} digits, not {}",
                digits.len()
            ));
        }
        digits
            .iter()
            .try_fold(0_i64, |n, d| {
                n.checked_mul(10)?.checked_add(i64::from(d - b'0'))
            })
            .ok_or_else(|| format!("the {what} is out of range"))
    }

    fn field(&mut self, what: &str) -> Result<u32, String> {
        // Two digits at most, so the value fits.
        self.number(what, 1, 2).map(|n| n as u32)
    }

    fn expect(&mut self, byte: u8, after: &str) -> Result<(), String> {
        if self.eat(byte) {
            Ok(())
        } else {
            Err(format!(
                "expected '{}' after the {after}, {}",
                byte as char,
                self.found()
            ))
        }
    }

    fn found(&self) -> String {
        match self.peek() {
            None => "found the end".into(),
            Some(_) => {
                let rest = String::from_utf8_lossy(&self.bytes[self.at..]);
                let c = rest.chars().next().unwrap_or('?');
                format!("found '{c}'")
            }
        }
    }

    fn fields(mut self) -> Result<Fields, String> {
        let year = self.number("year", 4, usize::MAX)?;
        if year > YEAR_MAX {
            return Err(format!(
                "the year {year} is out of range (times are i64 milliseconds)"
            ));
        }
        let mut f = Fields {
            year,
            ..Fields::default()
        };
        let separator = match self.peek() {
            Some(b @ (b'-' | b'/' | b'.')) => b,
            _ => {
                return Err(format!(
                    "expected '-', '/' or '.' after the year, {}",
                    self.found()
                ))
            }
        };
        self.at += 1;
        f.month = self.field("month")?;
        self.expect(separator, "month")?;
        f.day = self.field("day")?;
        if self.peek().is_none() {
            return Ok(f);
        }
        let blanks = self.at;
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.at += 1;
        }
        if self.at == blanks && !self.eat(b'T') && !self.eat(b't') {
            return Err(format!(
                "expected 'T' or a space after the day, {}",
                self.found()
            ));
        }
        self.time(&mut f)?;
        f.offset_minutes = self.zone()?;
        match self.peek() {
            None => Ok(f),
            Some(_) => Err(format!("expected the end, {}", self.found())),
        }
    }

    /// `HH:mm:ss[.SSS]`.
    fn time(&mut self, f: &mut Fields) -> Result<(), String> {
        f.hour = self.field("hour")?;
        self.expect(b':', "hour")?;
        f.minute = self.field("minute")?;
        self.expect(b':', "minute")?;
        f.second = self.field("second")?;
        if self.eat(b'.') {
            let start = self.at;
            while self.peek().is_some_and(|b| b.is_ascii_digit()) {
                self.at += 1;
            }
            let digits = &self.bytes[start..self.at];
            if digits.is_empty() {
                return Err(format!(
                    "expected the milliseconds after '.', {}",
                    self.found()
                ));
            }
            if digits.len() > 3 {
                return Err(format!(
                    "{} fraction digits are finer than milliseconds, which times are in",
                    digits.len()
                ));
            }
            f.millis = (0..3).fold(0, |ms, i| {
                ms * 10 + digits.get(i).map_or(0, |d| u32::from(d - b'0'))
            });
        }
        Ok(())
    }

    /// Nothing (UTC), `Z`, `±HH:mm`, `±HHmm` or `±HH`: minutes east of UTC.
    fn zone(&mut self) -> Result<i64, String> {
        let sign = match self.peek() {
            None => return Ok(0),
            Some(b'Z' | b'z') => {
                self.at += 1;
                return Ok(0);
            }
            Some(b'+') => 1,
            Some(b'-') => -1,
            Some(_) => {
                return Err(format!(
                    "expected a zone (Z, +08:00, -0500), {}",
                    self.found()
                ))
            }
        };
        self.at += 1;
        let start = self.at;
        let digits = self.number("zone offset", 1, usize::MAX)?;
        let (hours, minutes) = match self.at - start {
            1 | 2 if self.eat(b':') => (digits, i64::from(self.field("zone minutes")?)),
            1 | 2 => (digits, 0),
            4 => (digits / 100, digits % 100),
            n => return Err(format!("the zone offset takes 2 or 4 digits, not {n}")),
        };
        if minutes > 59 {
            return Err(format!("zone minute {minutes} is not 0 to 59"));
        }
        Ok(sign * (hours * 60 + minutes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_are_added_on_the_calendar() {
        let at = |y, m, d| days_from_civil(y, m, d) * MS_PER_DAY + 3_600_000;
        assert_eq!(add_months(at(2024, 1, 31), 1), Some(at(2024, 2, 29)));
        assert_eq!(add_months(at(2023, 1, 31), 1), Some(at(2023, 2, 28)));
        assert_eq!(add_months(at(2024, 1, 31), 2), Some(at(2024, 3, 31)));
        assert_eq!(add_months(at(2024, 11, 30), 3), Some(at(2025, 2, 28)));
        assert_eq!(add_months(at(2024, 3, 15), -15), Some(at(2022, 12, 15)));
        assert_eq!(add_months(at(1969, 12, 31), 1), Some(at(1970, 1, 31)));
        assert_eq!(add_months(0, i64::MAX), None);
        assert_eq!(add_months(i64::MAX, 1), None);
    }

    #[test]
    fn known_days() {
        for (y, m, d, days) in [
            (1970, 1, 1, 0),
            (1969, 12, 31, -1),
            (2000, 3, 1, 11_017),
            (2024, 1, 1, 19_723),
            (2024, 2, 29, 19_782),
            (1900, 1, 1, -25_567),
            (1600, 2, 29, -135_081),
            (0, 3, 1, -719_468),
            (-1, 12, 31, -719_529),
            (9999, 12, 31, 2_932_896),
            // JavaScript's last date: 10^8 days after the epoch.
            (275_760, 9, 13, 100_000_000),
            (-271_821, 4, 20, -100_000_000),
        ] {
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
            assert_eq!(civil_from_days(days), (y, m, d), "{days}");
        }
    }

    #[test]
    fn consecutive_days_round_trip_across_four_centuries_and_far_away() {
        for start in [-800_000, -146_097, 0, 2_900_000, 1_000_000_000_000] {
            let mut expected = civil_from_days(start);
            for days in start..start + 146_097 * 2 {
                let (y, m, d) = civil_from_days(days);
                assert_eq!((y, m, d), expected, "{days}");
                assert!((1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m));
                assert_eq!(days_from_civil(y, m, d), days);
                expected = if d < days_in_month(y, m) {
                    (y, m, d + 1)
                } else if m < 12 {
                    (y, m + 1, 1)
                } else {
                    (y + 1, 1, 1)
                };
            }
        }
    }

    #[test]
    fn leap_years() {
        assert!(is_leap_year(2024) && is_leap_year(2000) && is_leap_year(1600));
        assert!(!is_leap_year(2023) && !is_leap_year(1900) && !is_leap_year(2100));
        assert_eq!(days_in_month(2024, 2), 29);
        assert_eq!(days_in_month(1900, 2), 28);
    }

    const JAN_1_2024: i64 = 1_704_067_200_000;

    #[test]
    fn every_form_of_a_literal() {
        for (text, ms) in [
            ("2024-01-01", JAN_1_2024),
            ("2024/01/01", JAN_1_2024),
            ("2024.01.01", JAN_1_2024),
            ("2024-1-1", JAN_1_2024),
            ("2024-01-01T00:00:00", JAN_1_2024),
            ("2024-01-01t00:00:00", JAN_1_2024),
            ("2024-01-01 00:00:00", JAN_1_2024),
            ("2024/01/01  00:00:00", JAN_1_2024),
            ("2024-01-01T00:00:00Z", JAN_1_2024),
            ("2024-01-01T08:00:00+08:00", JAN_1_2024),
            ("2024-01-01T08:00:00+0800", JAN_1_2024),
            ("2024-01-01T08:00:00+08", JAN_1_2024),
            ("2023-12-31T19:00:00-0500", JAN_1_2024),
            ("2024-01-01 08:00:00.123+08:00", JAN_1_2024 + 123),
            ("2024-01-01T00:00:00.5", JAN_1_2024 + 500),
            ("2024-01-01T00:00:00.05", JAN_1_2024 + 50),
            ("2024-01-01T01:02:03.004", JAN_1_2024 + 3_723_004),
            ("1970-01-01T00:00:00", 0),
            ("1969-12-31T23:59:59.999", -1),
            ("1900-01-01", -25_567 * MS_PER_DAY),
            ("2024-02-29T23:59:59", JAN_1_2024 + 60 * MS_PER_DAY - 1000),
            ("9999-12-31", 2_932_896 * MS_PER_DAY),
            ("275760-09-13", 100_000_000 * MS_PER_DAY),
        ] {
            assert_eq!(datetime_ms(text), Ok(ms), "{text}");
        }
    }

    #[test]
    fn invalid_fields_are_named() {
        for (text, why) in [
            ("2024-13-01", "month 13 is not 1 to 12"),
            ("2024-00-01", "month 0 is not 1 to 12"),
            (
                "2024-02-30",
                "day 30 is not 1 to 29 (February 2024 has 29 days)",
            ),
            (
                "2023-02-29",
                "day 29 is not 1 to 28 (February 2023 has 28 days)",
            ),
            ("1900-02-29", "day 29 is not 1 to 28"),
            (
                "2024-04-31",
                "day 31 is not 1 to 30 (April 2024 has 30 days)",
            ),
            ("2024-01-00", "day 0 is not 1 to 31"),
            ("2024-01-01T24:00:00", "hour 24 is not 0 to 23"),
            ("2024-01-01T00:60:00", "minute 60 is not 0 to 59"),
            ("2024-01-01T00:00:60", "second 60 is not 0 to 59"),
            ("2024-01-01T00:00:00+19:00", "beyond ±18:00"),
            ("2024-01-01T00:00:00+08:60", "zone minute 60"),
            (
                "2024-01-01T00:00:00.1234",
                "4 fraction digits are finer than milliseconds",
            ),
            ("24-01-01", "the year takes 4 or more digits, not 2"),
            ("2024-001-01", "the month takes 1 or 2 digits, not 3"),
            ("2024-01/01", "expected '-' after the month, found '/'"),
            (
                "2024-01-01T00:00",
                "expected ':' after the minute, found the end",
            ),
            (
                "2024-01-01X",
                "expected 'T' or a space after the day, found 'X'",
            ),
            ("2024-01-01T00:00:00 x", "expected a zone"),
            (
                "2024-01-01T00:00:00+123",
                "the zone offset takes 2 or 4 digits, not 3",
            ),
            ("2024-01-01T00:00:00Zz", "expected the end, found 'z'"),
            ("", "expected the year, found the end"),
            ("now", "expected the year, found 'n'"),
            (
                "2024",
                "expected '-', '/' or '.' after the year, found the end",
            ),
        ] {
            let e = datetime_ms(text).expect_err(text);
            assert!(
                e.starts_with(&format!("invalid date-time '{text}': ")),
                "{e}"
            );
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn past_i64_milliseconds_is_out_of_range_not_a_panic() {
        let e = datetime_ms("999999999-12-31").unwrap_err();
        assert!(e.contains("out of range"), "{e}");
        assert!(datetime_ms("292278994-08-17T07:12:55.807Z").is_ok());
        assert!(datetime_ms("292278994-08-17T07:12:55.808Z").is_err());
        assert!(datetime_ms("9999999999-01-01").is_err());
    }

    #[test]
    fn the_wall_clock_is_after_2024() {
        assert!(wall_clock_ms() > JAN_1_2024);
    }
}
