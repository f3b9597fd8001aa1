//! IoTDB's `DATE` values: a day as the integer `yyyy * 10000 + mm * 100 + dd`, years 1000 to
//! 9999, as the official clients send it (IOTDB_PROTOCOL §5.3) and IoTDB's `DateUtils` checks it.

/// Whether `v` is a real day (leap years counted) between 1000-01-01 and 9999-12-31.
pub fn is_valid(v: i32) -> bool {
    let (year, month, day) = (v / 10_000, v / 100 % 100, v % 100);
    (1000..=9999).contains(&year) && (1..=12).contains(&month) && day >= 1 && {
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
        let days = match month {
            2 if leap => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        day <= days
    }
}

/// `yyyy-mm-dd`, as IoTDB prints a DATE.
pub fn format(v: i32) -> String {
    format!("{:04}-{:02}-{:02}", v / 10_000, v / 100 % 100, v % 100)
}

/// Parses `yyyy-mm-dd` (one- or two-digit month and day allowed, as in IoTDB's SQL) into a valid
/// DATE value.
pub fn parse(s: &str) -> Option<i32> {
    let mut parts = s.split('-');
    let mut next = |digits: std::ops::RangeInclusive<usize>| {
        let part = parts.next()?;
        (digits.contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse::<i32>().ok())
            .flatten()
    };
    let (year, month, day) = (next(4..=4)?, next(1..=2)?, next(1..=2)?);
    if parts.next().is_some() {
        return None;
    }
    let v = year * 10_000 + month * 100 + day;
    is_valid(v).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_days_round_trip_through_text() {
        for v in [10000101, 20240229, 20000229, 99991231, 19700101] {
            assert!(is_valid(v), "{v}");
            assert_eq!(parse(&format(v)), Some(v));
        }
        assert_eq!(parse("2024-1-5"), Some(20240105));
    }

    #[test]
    fn impossible_days_are_refused() {
        for v in [
            0, -20240101, 9990101, 100000101, 20230229, 19000229, 20240431, 20241301, 20240100,
        ] {
            assert!(!is_valid(v), "{v}");
        }
        for s in [
            "",
            "2024",
            "2024-02",
            "2024-02-30",
            "24-01-01",
            "2024-01-01-1",
            "2024-0x-01",
        ] {
            assert_eq!(parse(s), None, "{s}");
        }
    }
}
