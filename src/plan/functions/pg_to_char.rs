//! The template of Postgres's `to_char(timestamp, template)` (Postgres docs, 9.8 "Data Type
//! Formatting Functions", Table 9.26 and 9.27; its `formatting.c` for the details below).
//!
//! # Patterns
//! Numeric ones may be written in capitals or in lower case (`YYYY`, `yyyy`); the words
//! `MONTH`, `Month`, `month` (and `MON`, `DAY`, `DY`, the meridiem, the era) give the name in
//! that case.
//!
//! | pattern | value |
//! |---|---|
//! | `HH`, `HH12` / `HH24` | hour 01-12 / 00-23 |
//! | `MI`, `SS` | minute, second (00-59) |
//! | `MS`, `US`, `FF1`..`FF6` | milliseconds (000-999), microseconds, the first n digits of the fraction |
//! | `SSSS`, `SSSSS` | seconds past midnight |
//! | `AM`, `PM`, `am`, `pm`, `A.M.`, `P.M.`, `a.m.`, `p.m.` | meridiem |
//! | `YYYY`, `YYY`, `YY`, `Y`, `Y,YYY` | year: 4, the last 3, 2 or 1 digits; with a comma |
//! | `IYYY`, `IYY`, `IY`, `I` | ISO 8601 week-numbering year |
//! | `BC`, `AD`, `B.C.`, `A.D.` (either) | era |
//! | `MONTH`, `Month`, `month` | month name, blank-padded to 9 |
//! | `MON`, `Mon`, `mon` | abbreviated month name |
//! | `MM` | month (01-12) |
//! | `DAY`, `Day`, `day` | day name, blank-padded to 9 |
//! | `DY`, `Dy`, `dy` | abbreviated day name |
//! | `DDD`, `IDDD` | day of year (001-366); of the ISO year |
//! | `DD` | day of month (01-31) |
//! | `D`, `ID` | day of week, Sunday 1 to Saturday 7; ISO, Monday 1 to Sunday 7 |
//! | `W`, `WW`, `IW` | week of month (1-5), of year (1-53, from January 1), ISO week (01-53) |
//! | `CC` | century |
//! | `J` | Julian day |
//! | `Q` | quarter |
//! | `RM`, `rm` | month in Roman numerals |
//! | `TZ`, `tz` | zone abbreviation of a TIMESTAMP_LTZ in the session time zone (`UTC`, `CST`, `PDT`; `+08` for a zone without one), empty for a TIMESTAMP |
//! | `OF`, `TZH`, `TZM` | the zone's offset from UTC (`+00`, `+05:30`; a TIMESTAMP's is `+00`); its hours (`+05`) and minutes (`30`) |
//!
//! Modifiers: `FM` before a pattern drops its zero padding and blank padding, `TH` / `th` after
//! a number adds its ordinal suffix (`DDth` is `05th`), `TM` before a name drops its padding
//! (the names are always English), `SP` after a number and `FX` are accepted and change
//! nothing, as in Postgres. An empty template gives NULL (Postgres's). Text in double quotes is copied (`\"` is a quote); a
//! backslash before a double quote outside of them copies the quote; any other character is
//! copied. No template is an error: what is not a pattern is text.

use std::fmt::Write;

use chrono::{Datelike, NaiveDateTime, Timelike};

use super::date_format::MONTHS;

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Piece {
    Text(String),
    Field {
        pattern: Pattern,
        /// `FM`: no padding.
        fill: bool,
        /// `TH` (`Some(true)`) or `th` (`Some(false)`).
        ordinal: Option<bool>,
    },
}

/// A letter case the name patterns are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Case {
    Upper,
    Capitalized,
    Lower,
}

/// A pattern of the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pattern {
    Hour12,
    Hour24,
    Minute,
    Second,
    Millis,
    Micros,
    Fraction(u32),
    SecondsOfDay,
    Meridiem { case: Case, dots: bool },
    YearComma,
    Year(u32),
    IsoYear(u32),
    Era { case: Case, dots: bool },
    MonthName { case: Case, short: bool },
    Month,
    DayName { case: Case, short: bool },
    DayOfYear,
    IsoDayOfYear,
    DayOfMonth,
    DayOfWeek,
    IsoDayOfWeek,
    WeekOfMonth,
    WeekOfYear,
    IsoWeek,
    Century,
    Julian,
    Quarter,
    RomanMonth(Case),
    Zone(Case),
    ZoneHours,
    ZoneMinutes,
    Offset,
}

/// The patterns, longest first where one starts another (`HH24` before `HH`, `SSSSS` before
/// `SSSS` and `SS`). Each is matched as written here, in lower case, or (for the names) with
/// its first letter in capitals.
const PATTERNS: &[(&str, Pattern)] = &[
    ("Y,YYY", Pattern::YearComma),
    ("A.M.", Pattern::Meridiem { case: Case::Upper, dots: true }),
    ("P.M.", Pattern::Meridiem { case: Case::Upper, dots: true }),
    ("B.C.", Pattern::Era { case: Case::Upper, dots: true }),
    ("A.D.", Pattern::Era { case: Case::Upper, dots: true }),
    ("MONTH", Pattern::MonthName { case: Case::Upper, short: false }),
    ("SSSSS", Pattern::SecondsOfDay),
    ("HH24", Pattern::Hour24),
    ("HH12", Pattern::Hour12),
    ("IYYY", Pattern::IsoYear(4)),
    ("IDDD", Pattern::IsoDayOfYear),
    ("SSSS", Pattern::SecondsOfDay),
    ("TZH", Pattern::ZoneHours),
    ("TZM", Pattern::ZoneMinutes),
    ("YYYY", Pattern::Year(4)),
    ("IYY", Pattern::IsoYear(3)),
    ("YYY", Pattern::Year(3)),
    ("MON", Pattern::MonthName { case: Case::Upper, short: true }),
    ("DAY", Pattern::DayName { case: Case::Upper, short: false }),
    ("DDD", Pattern::DayOfYear),
    ("FF1", Pattern::Fraction(1)),
    ("FF2", Pattern::Fraction(2)),
    ("FF3", Pattern::Fraction(3)),
    ("FF4", Pattern::Fraction(4)),
    ("FF5", Pattern::Fraction(5)),
    ("FF6", Pattern::Fraction(6)),
    ("HH", Pattern::Hour12),
    ("MI", Pattern::Minute),
    ("SS", Pattern::Second),
    ("MS", Pattern::Millis),
    ("US", Pattern::Micros),
    ("AM", Pattern::Meridiem { case: Case::Upper, dots: false }),
    ("PM", Pattern::Meridiem { case: Case::Upper, dots: false }),
    ("BC", Pattern::Era { case: Case::Upper, dots: false }),
    ("AD", Pattern::Era { case: Case::Upper, dots: false }),
    ("IY", Pattern::IsoYear(2)),
    ("YY", Pattern::Year(2)),
    ("MM", Pattern::Month),
    ("DY", Pattern::DayName { case: Case::Upper, short: true }),
    ("DD", Pattern::DayOfMonth),
    ("ID", Pattern::IsoDayOfWeek),
    ("WW", Pattern::WeekOfYear),
    ("IW", Pattern::IsoWeek),
    ("CC", Pattern::Century),
    ("RM", Pattern::RomanMonth(Case::Upper)),
    ("TZ", Pattern::Zone(Case::Upper)),
    ("OF", Pattern::Offset),
    ("I", Pattern::IsoYear(1)),
    ("Y", Pattern::Year(1)),
    ("D", Pattern::DayOfWeek),
    ("W", Pattern::WeekOfMonth),
    ("J", Pattern::Julian),
    ("Q", Pattern::Quarter),
];

/// The pattern at the start of `s`, and its length in bytes.
fn pattern_at(s: &str) -> Option<(Pattern, usize)> {
    for (name, pattern) in PATTERNS {
        let Some(head) = s.get(..name.len()) else { continue };
        let case = if head == *name {
            Case::Upper
        } else if head == name.to_ascii_lowercase() {
            Case::Lower
        } else if head.len() > 1 && head[..1] == name[..1] && head[1..] == name[1..].to_ascii_lowercase() {
            Case::Capitalized
        } else {
            continue;
        };
        let cased = match *pattern {
            Pattern::MonthName { short, .. } => Pattern::MonthName { case, short },
            Pattern::DayName { short, .. } => Pattern::DayName { case, short },
            // A capitalized meridiem, era, Roman month or zone is none of them (Postgres).
            Pattern::Meridiem { dots, .. } if case != Case::Capitalized => Pattern::Meridiem { case, dots },
            Pattern::Era { dots, .. } if case != Case::Capitalized => Pattern::Era { case, dots },
            Pattern::RomanMonth(_) if case != Case::Capitalized => Pattern::RomanMonth(case),
            Pattern::Zone(_) if case != Case::Capitalized => Pattern::Zone(case),
            Pattern::Meridiem { .. } | Pattern::Era { .. } | Pattern::RomanMonth(_) | Pattern::Zone(_) => continue,
            // Numbers: upper or lower case only (`Mm` is text).
            _ if case == Case::Capitalized => continue,
            other => other,
        };
        return Some((cased, name.len()));
    }
    None
}

/// Parses a template; every template parses.
pub(super) fn parse_template(template: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut rest = template;
    let (mut fill, mut translated) = (false, false);
    while let Some(c) = rest.chars().next() {
        if c == '"' {
            // Quoted text, `\"` a quote in it.
            let mut chars = rest[1..].char_indices();
            let mut end = rest.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, next)) = chars.next() {
                            text.push(next);
                        }
                    }
                    '"' => {
                        end = i + 2;
                        break;
                    }
                    c => text.push(c),
                }
            }
            rest = &rest[end.min(rest.len())..];
            continue;
        }
        if c == '\\' && rest[1..].starts_with('"') {
            text.push('"');
            rest = &rest[2..];
            continue;
        }
        let modifier = rest.get(..2).map(str::to_ascii_uppercase);
        if matches!(modifier.as_deref(), Some("FM" | "FX" | "TM")) && pattern_at(&rest[2..]).is_some() {
            fill |= modifier.as_deref() == Some("FM");
            translated |= modifier.as_deref() == Some("TM");
            rest = &rest[2..];
            continue;
        }
        match pattern_at(rest) {
            Some((pattern, len)) => {
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                rest = &rest[len..];
                let ordinal = match rest.get(..2) {
                    Some("TH") => Some(true),
                    Some("th") => Some(false),
                    _ => None,
                };
                if ordinal.is_some() {
                    rest = &rest[2..];
                }
                if matches!(rest.get(..2), Some("SP" | "sp")) {
                    rest = &rest[2..];
                }
                // `TM` names are not padded.
                let name = matches!(pattern, Pattern::MonthName { .. } | Pattern::DayName { .. });
                let fill = std::mem::take(&mut fill) | (std::mem::take(&mut translated) && name);
                pieces.push(Piece::Field { pattern, fill, ordinal });
            }
            None => {
                text.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    pieces
}

const DAYS: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const ROMAN: [&str; 12] = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII"];

fn cased(s: &str, case: Case) -> String {
    match case {
        Case::Upper => s.to_uppercase(),
        Case::Lower => s.to_lowercase(),
        Case::Capitalized => s.to_string(),
    }
}

/// The ordinal suffix of `n` (`st`, `nd`, `rd`, `th`).
fn ordinal_suffix(n: i64) -> &'static str {
    match (n % 100, n % 10) {
        (11..=13, _) => "th",
        (_, 1) => "st",
        (_, 2) => "nd",
        (_, 3) => "rd",
        _ => "th",
    }
}

/// Writes `t` as `pieces` (one row; the caller ends it). `zone` is the abbreviation and
/// offset (seconds east of UTC) of a TIMESTAMP_LTZ's zone at `t` (`None` for a TIMESTAMP).
pub(super) fn write_template(out: &mut impl Write, pieces: &[Piece], t: &NaiveDateTime, zone: Option<(&str, i32)>) -> std::fmt::Result {
    let offset = zone.map_or(0, |(_, o)| o);
    for piece in pieces {
        let (pattern, fill, ordinal) = match piece {
            Piece::Text(s) => {
                out.write_str(s)?;
                continue;
            }
            Piece::Field { pattern, fill, ordinal } => (*pattern, *fill, *ordinal),
        };
        // A number and its width, or text and the width it is blank-padded to.
        let number = |n: i64, width: usize| (Some(n), width, String::new());
        let text = |s: String, width: usize| (None, width, s);
        let year = t.year();
        let iso = t.iso_week();
        let (value, width, words) = match pattern {
            Pattern::Hour12 => number(i64::from(if t.hour() % 12 == 0 { 12 } else { t.hour() % 12 }), 2),
            Pattern::Hour24 => number(i64::from(t.hour()), 2),
            Pattern::Minute => number(i64::from(t.minute()), 2),
            Pattern::Second => number(i64::from(t.second()), 2),
            Pattern::Millis => number(i64::from(t.nanosecond() % 1_000_000_000 / 1_000_000), 3),
            Pattern::Micros => number(i64::from(t.nanosecond() % 1_000_000_000 / 1_000), 6),
            Pattern::Fraction(n) => number(i64::from(t.nanosecond() % 1_000_000_000 / 10u32.pow(9 - n)), n as usize),
            Pattern::SecondsOfDay => number(i64::from(t.num_seconds_from_midnight()), 0),
            Pattern::Meridiem { case, dots } => {
                let pm = t.hour() >= 12;
                let s = match (pm, dots) {
                    (false, false) => "AM",
                    (true, false) => "PM",
                    (false, true) => "A.M.",
                    (true, true) => "P.M.",
                };
                text(cased(s, case), 0)
            }
            Pattern::YearComma => {
                let y = year.abs();
                text(format!("{},{:03}", y / 1000, y % 1000), 0)
            }
            Pattern::Year(digits) => year_digits(year, digits),
            Pattern::IsoYear(digits) => year_digits(iso.year(), digits),
            Pattern::Era { case, dots } => {
                let s = match (year > 0, dots) {
                    (true, false) => "AD",
                    (false, false) => "BC",
                    (true, true) => "A.D.",
                    (false, true) => "B.C.",
                };
                text(cased(s, case), 0)
            }
            Pattern::MonthName { case, short } => {
                let name = MONTHS[t.month0() as usize];
                match short {
                    true => text(cased(&name[..3], case), 0),
                    false => text(cased(name, case), 9),
                }
            }
            Pattern::Month => number(i64::from(t.month()), 2),
            Pattern::DayName { case, short } => {
                let name = DAYS[t.weekday().num_days_from_sunday() as usize];
                match short {
                    true => text(cased(&name[..3], case), 0),
                    false => text(cased(name, case), 9),
                }
            }
            Pattern::DayOfYear => number(i64::from(t.ordinal()), 3),
            Pattern::IsoDayOfYear => {
                number(i64::from((iso.week() - 1) * 7 + t.weekday().number_from_monday()), 3)
            }
            Pattern::DayOfMonth => number(i64::from(t.day()), 2),
            Pattern::DayOfWeek => number(i64::from(t.weekday().number_from_sunday()), 1),
            Pattern::IsoDayOfWeek => number(i64::from(t.weekday().number_from_monday()), 1),
            Pattern::WeekOfMonth => number(i64::from((t.day() - 1) / 7 + 1), 1),
            Pattern::WeekOfYear => number(i64::from((t.ordinal() - 1) / 7 + 1), 2),
            Pattern::IsoWeek => number(i64::from(iso.week()), 2),
            Pattern::Century => {
                let century = if year > 0 { (year + 99) / 100 } else { -((99 - year) / 100) };
                number(i64::from(century), 2)
            }
            Pattern::Julian => number(i64::from(t.date().num_days_from_ce()) + 1_721_425, 0),
            Pattern::Quarter => number(i64::from(t.month0() / 3 + 1), 1),
            Pattern::RomanMonth(case) => text(cased(ROMAN[t.month0() as usize], case), 4),
            Pattern::Zone(case) => text(cased(zone.map_or("", |(a, _)| a), case), 0),
            // A TIMESTAMP's is +00, as in Postgres.
            Pattern::Offset => text(crate::plan::time_zone::offset_text(offset), 0),
            Pattern::ZoneHours => text(format!("{}{:02}", if offset < 0 { '-' } else { '+' }, offset.unsigned_abs() / 3600), 0),
            Pattern::ZoneMinutes => text(format!("{:02}", offset.unsigned_abs() % 3600 / 60), 0),
        };
        match value {
            Some(n) => {
                let width = if fill { 0 } else { width };
                write!(out, "{n:0width$}")?;
                if let Some(upper) = ordinal {
                    let suffix = ordinal_suffix(n);
                    out.write_str(&if upper { suffix.to_uppercase() } else { suffix.to_string() })?;
                }
            }
            None if fill => out.write_str(&words)?,
            None => write!(out, "{words:<width$}")?,
        }
    }
    Ok(())
}

/// The last `digits` digits of `year` (all of them for 4, however many), zero-padded.
fn year_digits(year: i32, digits: u32) -> (Option<i64>, usize, String) {
    let y = i64::from(year.abs());
    match digits {
        4 => (Some(y), 4, String::new()),
        d => (Some(y % 10i64.pow(d)), d as usize, String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(t: &str, template: &str) -> String {
        let t = NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S%.f").expect("a timestamp");
        let mut out = String::new();
        write_template(&mut out, &parse_template(template), &t, None).expect("written");
        out
    }

    // Values from Postgres's documentation and worked out by hand from the calendar: 2015-07-05
    // was a Sunday, day 186 of 2015, in ISO week 27 of 2015.
    #[test]
    fn templates() {
        let t = "2015-07-05 09:04:03.012345";
        assert_eq!(format(t, "YYYY-MM-DD HH24:MI:SS"), "2015-07-05 09:04:03");
        assert_eq!(format(t, "yyyy-mm-dd hh24:mi:ss.ms"), "2015-07-05 09:04:03.012");
        assert_eq!(format(t, "HH12:MI AM US FF2"), "09:04 AM 012345 01");
        assert_eq!(format(t, "Day, DD Month YYYY"), "Sunday   , 05 July      2015");
        assert_eq!(format(t, "FMDay, FMDD FMMonth YYYY"), "Sunday, 5 July 2015");
        assert_eq!(format(t, "DY dy Dy MON mon Mon"), "SUN sun Sun JUL jul Jul");
        assert_eq!(format(t, "DDD D ID W WW IW Q CC RM rm"), "186 1 7 1 27 27 3 21 VII  vii ");
        assert_eq!(format(t, "DDth \"of\" FMMonth, FMDDTH"), "05th of July, 5TH");
        // Unquoted, `of` is the offset, as in Postgres (UTC's for a TIMESTAMP too).
        assert_eq!(format(t, "DD of"), "05 +00");
        assert_eq!(format(t, "\"Quarter\" Q, \"week\" IW"), "Quarter 3, week 27");
        assert_eq!(format(t, "Y,YYY YYY YY Y IYYY"), "2,015 015 15 5 2015");
        assert_eq!(format(t, "SSSS J"), "32643 2457209");
        assert_eq!(format("2015-07-05 00:30:00", "HH HH12 HH24 am a.m. PM"), "12 12 00 am a.m. AM");
        assert_eq!(format("2015-07-05 13:00:00", "FMHH12 p.m."), "1 p.m.");
        assert_eq!(format("2015-01-01 00:00:00", "IYYY-IW-ID IDDD"), "2015-01-4 004");
        assert_eq!(format("2016-01-01 00:00:00", "IYYY-IW-ID"), "2015-53-5");
        // Text that is no pattern is copied; `TZ` of a TIMESTAMP is empty.
        assert_eq!(format(t, "at %H! TZ"), "at %H! ");
        assert_eq!(format("2015-07-02 00:00:00", "FMDDth FMDDth"), "2nd 2nd");
        assert_eq!(format("2015-07-11 00:00:00", "FMDDth"), "11th");
        // The ISO 8601 offset; TM names unpadded; SP ignored.
        assert_eq!(format(t, "HH24:MI:SSTZH:TZM"), "09:04:03+00:00");
        assert_eq!(format(t, "TMMonth|TMDay|DDSP"), "July|Sunday|05");
    }
}
