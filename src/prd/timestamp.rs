//! Timestamps written into the front matter in the shape the file already uses: v3 PRDs keep a
//! plain date (`updated: 2026-11-30`), v4 PRDs an ISO 8601 instant
//! (`updated: 2026-02-24T02:00:00Z`). The PRD is the user's document, so prdloop writes what
//! its author (or PAI) would have written rather than a format of its own.

use jiff::ZonedDateTime;
use jiff::civil::DateTime;

/// The value for a timestamp key given its current value and the time now, in the same shape:
/// - a date (`2026-11-30`) stays a date: today in `now`'s time zone;
/// - a UTC instant (`2026-02-24T02:00:00Z`) stays UTC with `Z`;
/// - an instant with an offset (`+01:00`, `-0500`) keeps an offset, written the same way (with
///   or without the colon), using `now`'s offset: the machine's zone now, which may differ from
///   the file's after a change of daylight saving time;
/// - instants keep their precision (minutes, seconds, or that many fraction digits, truncated)
///   and their `T` or space between date and time;
/// - anything else, or no value, becomes a UTC instant with `Z` to the second.
pub fn timestamp_like(existing: Option<&str>, now: &ZonedDateTime) -> String {
    let shape = existing.map_or(Shape::UNKNOWN, Shape::of);
    match shape.zone {
        Zone::DateOnly => now.date().to_string(),
        Zone::Utc => {
            let utc = now.timestamp().to_zoned_datetime(jiff::tz::TimeZone::UTC);
            format!("{}Z", instant(utc.datetime(), &shape))
        }
        Zone::Offset { colon } => {
            let secs = now.offset().seconds();
            let sign = if secs < 0 { '-' } else { '+' };
            let (h, m) = (secs.abs() / 3600, secs.abs() % 3600 / 60);
            let sep = if colon { ":" } else { "" };
            format!("{}{sign}{h:02}{sep}{m:02}", instant(now.datetime(), &shape))
        }
    }
}

fn instant(dt: DateTime, shape: &Shape) -> String {
    let mut s = format!(
        "{:04}-{:02}-{:02}{}{:02}:{:02}",
        dt.year(),
        dt.month(),
        dt.day(),
        shape.sep,
        dt.hour(),
        dt.minute()
    );
    if let Precision::Seconds { fraction } = shape.precision {
        s.push_str(&format!(":{:02}", dt.second()));
        if fraction > 0 {
            let nanos = format!("{:09}", dt.subsec_nanosecond());
            s.push('.');
            s.push_str(&nanos[..fraction.min(9)]);
        }
    }
    s
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Zone {
    DateOnly,
    Utc,
    Offset { colon: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Precision {
    Minutes,
    /// Seconds and this many fraction digits.
    Seconds {
        fraction: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    zone: Zone,
    precision: Precision,
    sep: char,
}

impl Shape {
    const UNKNOWN: Shape = Shape {
        zone: Zone::Utc,
        precision: Precision::Seconds { fraction: 0 },
        sep: 'T',
    };

    /// The shape of a value, by its characters only (its numbers need not make a valid time).
    fn of(value: &str) -> Shape {
        Shape::parse(value.trim()).unwrap_or(Shape::UNKNOWN)
    }

    fn parse(v: &str) -> Option<Shape> {
        let b = v.as_bytes();
        let digits = |r: std::ops::Range<usize>| {
            b.get(r.clone())
                .is_some_and(|s| s.iter().all(u8::is_ascii_digit))
        };
        let date =
            digits(0..4) && b.get(4) == Some(&b'-') && digits(5..7) && b.get(7) == Some(&b'-');
        if !date || !digits(8..10) {
            return None;
        }
        if b.len() == 10 {
            return Some(Shape {
                zone: Zone::DateOnly,
                ..Shape::UNKNOWN
            });
        }
        let sep = match b[10] {
            b'T' => 'T',
            b' ' => ' ',
            _ => return None,
        };
        if !(digits(11..13) && b.get(13) == Some(&b':') && digits(14..16)) {
            return None;
        }
        let mut i = 16;
        let mut precision = Precision::Minutes;
        if b.get(i) == Some(&b':') {
            if !digits(i + 1..i + 3) {
                return None;
            }
            i += 3;
            let mut fraction = 0;
            if b.get(i) == Some(&b'.') {
                let n = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                if n == 0 {
                    return None;
                }
                fraction = n;
                i += 1 + n;
            }
            precision = Precision::Seconds { fraction };
        }
        let zone = match &v[i..] {
            "Z" | "z" => Zone::Utc,
            z if z.len() == 6
                && (z.starts_with('+') || z.starts_with('-'))
                && digits(i + 1..i + 3)
                && z.as_bytes()[3] == b':'
                && digits(i + 4..i + 6) =>
            {
                Zone::Offset { colon: true }
            }
            z if z.len() == 5
                && (z.starts_with('+') || z.starts_with('-'))
                && digits(i + 1..i + 5) =>
            {
                Zone::Offset { colon: false }
            }
            _ => return None,
        };
        Some(Shape {
            zone,
            precision,
            sep,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-30 22:45:07.123456789 in Berlin (UTC+01:00), which is 21:45 UTC.
    fn berlin() -> ZonedDateTime {
        "2026-11-30T22:45:07.123456789+01:00[Europe/Berlin]"
            .parse()
            .unwrap()
    }

    fn like(existing: &str) -> String {
        timestamp_like(Some(existing), &berlin())
    }

    #[test]
    fn a_date_stays_a_date_in_the_local_zone() {
        assert_eq!(like("2026-02-13"), "2026-11-30");
        let tokyo: ZonedDateTime = "2026-11-30T22:45:07+09:00[Asia/Tokyo]".parse().unwrap();
        assert_eq!(timestamp_like(Some("2026-02-13"), &tokyo), "2026-11-30");
        let early: ZonedDateTime = "2026-12-01T00:30:00+01:00[Europe/Berlin]".parse().unwrap();
        assert_eq!(timestamp_like(Some("2026-02-13"), &early), "2026-12-01");
    }

    #[test]
    fn utc_stays_utc_with_its_precision() {
        assert_eq!(like("2026-02-24T02:00:00Z"), "2026-11-30T21:45:07Z");
        assert_eq!(like("2026-02-24T02:00:00.481Z"), "2026-11-30T21:45:07.123Z");
        assert_eq!(
            like("2026-02-24T02:00:00.000000Z"),
            "2026-11-30T21:45:07.123456Z"
        );
        assert_eq!(like("2026-02-24T02:00Z"), "2026-11-30T21:45Z");
        assert_eq!(like("2026-02-24 02:00:00Z"), "2026-11-30 21:45:07Z");
    }

    #[test]
    fn an_offset_stays_an_offset_form() {
        assert_eq!(
            like("2026-02-24T02:00:00+01:00"),
            "2026-11-30T22:45:07+01:00"
        );
        assert_eq!(
            like("2026-02-24T02:00:00-05:00"),
            "2026-11-30T22:45:07+01:00"
        );
        assert_eq!(
            like("2026-02-24T02:00:00.12+0530"),
            "2026-11-30T22:45:07.12+0100"
        );
        let ny: ZonedDateTime = "2026-11-30T16:45:07-05:00[America/New_York]"
            .parse()
            .unwrap();
        assert_eq!(
            timestamp_like(Some("2026-02-24T02:00:00+01:00"), &ny),
            "2026-11-30T16:45:07-05:00"
        );
        let utc: ZonedDateTime = "2026-11-30T21:45:07+00:00[UTC]".parse().unwrap();
        assert_eq!(
            timestamp_like(Some("2026-02-24T02:00:00+01:00"), &utc),
            "2026-11-30T21:45:07+00:00"
        );
    }

    #[test]
    fn unknown_shapes_become_utc_seconds() {
        for v in [
            "",
            "yesterday",
            "24/02/2026",
            "2026-02-24T02",
            "2026-02-24T02:00:00",
            "2026-02-24T02:00:00.Z",
            "2026-02-24T02:00:00+1",
            "2026-2-24",
            "1771898400",
        ] {
            assert_eq!(like(v), "2026-11-30T21:45:07Z", "{v:?}");
        }
        assert_eq!(timestamp_like(None, &berlin()), "2026-11-30T21:45:07Z");
    }

    #[test]
    fn surrounding_spaces_do_not_change_the_shape() {
        assert_eq!(like(" 2026-02-13 "), "2026-11-30");
    }
}
