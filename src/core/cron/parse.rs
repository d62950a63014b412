//! Parsing expression text into a [`CronExpr`], and printing it back in normalised form.

use std::fmt;

use super::error::{CronError, CronField, FieldProblem};
use super::every::Every;
use super::expr::{
    CronExpr, DOM_LAST, DOM_STAR, DOW_STAR, HAS_NTH, HOUR_STAR, MINUTE_STAR, MONTH_STAR, NTH_LAST,
    SECOND_FIELD,
};

const MONTH_NAMES: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// What one field accepts.
struct FieldSpec {
    field: CronField,
    min: u32,
    /// Largest value of the field's cycle (`*` covers `min..=max`).
    max: u32,
    /// Largest value accepted in text: 7 for day-of-week, where it is another Sunday.
    max_written: u32,
    /// Names for `min`, `min + 1`, ...; empty when the field is numeric only.
    names: &'static [&'static str],
    /// Whether a reversed range wraps around the end of the cycle.
    wraps: bool,
}

const SECOND: FieldSpec = FieldSpec {
    field: CronField::Second,
    min: 0,
    max: 59,
    max_written: 59,
    names: &[],
    wraps: false,
};
const MINUTE: FieldSpec = FieldSpec {
    field: CronField::Minute,
    min: 0,
    max: 59,
    max_written: 59,
    names: &[],
    wraps: false,
};
const HOUR: FieldSpec = FieldSpec {
    field: CronField::Hour,
    min: 0,
    max: 23,
    max_written: 23,
    names: &[],
    wraps: true,
};
const DAY_OF_MONTH: FieldSpec = FieldSpec {
    field: CronField::DayOfMonth,
    min: 1,
    max: 31,
    max_written: 31,
    names: &[],
    wraps: false,
};
const MONTH: FieldSpec = FieldSpec {
    field: CronField::Month,
    min: 1,
    max: 12,
    max_written: 12,
    names: &MONTH_NAMES,
    wraps: false,
};
const DAY_OF_WEEK: FieldSpec = FieldSpec {
    field: CronField::DayOfWeek,
    min: 0,
    max: 6,
    max_written: 7,
    names: &WEEKDAY_NAMES,
    wraps: true,
};

/// A field after parsing, before it is packed into the expression.
#[derive(Default)]
struct ParsedField {
    bits: u64,
    starts_with_star: bool,
    /// `L` in day-of-month.
    last_day: bool,
    /// `DOW#n` / `DOWL` in day-of-week, per weekday.
    nth: [u8; 7],
}

pub(super) fn parse(text: &str) -> Result<CronExpr, CronError> {
    let trimmed = text.trim();
    if trimmed.starts_with('@') {
        return parse_alias(trimmed);
    }
    let fields: Vec<&str> = trimmed
        .split([' ', '\t'])
        .filter(|part| !part.is_empty())
        .collect();
    // Six fields: a second first (as Quartz and Spring write it).
    let (second, [minute, hour, dom, month, dow]) = match fields.as_slice() {
        [minute, hour, dom, month, dow] => (None, [*minute, *hour, *dom, *month, *dow]),
        [second, minute, hour, dom, month, dow] => {
            (Some(*second), [*minute, *hour, *dom, *month, *dow])
        }
        _ => return Err(CronError::FieldCount(fields.len())),
    };

    let second = second.map(|s| parse_field(&SECOND, s)).transpose()?;
    let minute = parse_field(&MINUTE, minute)?;
    let hour = parse_field(&HOUR, hour)?;
    let dom = parse_field(&DAY_OF_MONTH, dom)?;
    let month = parse_field(&MONTH, month)?;
    let dow = parse_field(&DAY_OF_WEEK, dow)?;

    let mut flags = 0;
    for (is_set, flag) in [
        (minute.starts_with_star, MINUTE_STAR),
        (hour.starts_with_star, HOUR_STAR),
        (dom.starts_with_star, DOM_STAR),
        (month.starts_with_star, MONTH_STAR),
        (dow.starts_with_star, DOW_STAR),
        (dom.last_day, DOM_LAST),
        (dow.nth.iter().any(|&n| n != 0), HAS_NTH),
        (second.is_some(), SECOND_FIELD),
    ] {
        if is_set {
            flags |= flag;
        }
    }
    // Day-of-week 7 is Sunday again: fold it onto 0.
    let weekdays = (dow.bits | (dow.bits >> 7)) & 0x7f;
    // Every field value was range-checked, so the narrowing casts keep all bits.
    Ok(CronExpr {
        seconds: second.map_or(1, |s| s.bits),
        minutes: minute.bits,
        hours: hour.bits as u32,
        days: dom.bits as u32,
        months: month.bits as u16,
        weekdays: weekdays as u8,
        flags,
        nth: dow.nth,
        every: None,
    })
}

fn parse_alias(alias: &str) -> Result<CronExpr, CronError> {
    let mut words = alias.split_whitespace();
    let name = words.next().unwrap_or(alias);
    if name.eq_ignore_ascii_case("@every") {
        // The fields stay all `*`, so anything that reads them sees a schedule of elapsed
        // time; the interval decides the instants.
        return Ok(CronExpr {
            every: Some(Every::parse(&alias[name.len()..])?),
            ..parse("* * * * *")?
        });
    }
    let expansion = match name.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => return Err(CronError::UnknownAlias(name.to_owned())),
    };
    if words.next().is_some() {
        return Err(CronError::AliasWithFields(name.to_owned()));
    }
    parse(expansion)
}

fn parse_field(spec: &FieldSpec, text: &str) -> Result<ParsedField, CronError> {
    parse_field_problem(spec, text).map_err(|problem| CronError::Field {
        field: spec.field,
        problem,
    })
}

fn parse_field_problem(spec: &FieldSpec, text: &str) -> Result<ParsedField, FieldProblem> {
    if text.is_empty() {
        return Err(FieldProblem::EmptyField);
    }
    let mut parsed = ParsedField {
        starts_with_star: text.starts_with('*'),
        ..ParsedField::default()
    };
    for element in text.split(',') {
        parse_element(spec, element, &mut parsed)?;
    }
    Ok(parsed)
}

fn parse_element(
    spec: &FieldSpec,
    element: &str,
    parsed: &mut ParsedField,
) -> Result<(), FieldProblem> {
    if element.is_empty() {
        return Err(FieldProblem::EmptyElement);
    }
    if spec.field == CronField::DayOfMonth && element.eq_ignore_ascii_case("L") {
        parsed.last_day = true;
        return Ok(());
    }
    if spec.field == CronField::DayOfWeek {
        if let Some((day, occurrence)) = element.split_once('#') {
            let weekday = parse_modified_weekday(spec, element, day)?;
            let n = parse_number(occurrence)
                .filter(|n| (1..=5).contains(n))
                .ok_or_else(|| FieldProblem::NthOutOfRange(occurrence.to_owned()))?;
            set_nth(parsed, weekday, 1 << (n - 1));
            return Ok(());
        }
        if element.len() > 1 && (element.ends_with('L') || element.ends_with('l')) {
            let day = element.get(..element.len() - 1).unwrap_or_default();
            let weekday = parse_modified_weekday(spec, element, day)?;
            set_nth(parsed, weekday, NTH_LAST);
            return Ok(());
        }
    }

    let (range, step) = match element.split_once('/') {
        Some((range, step)) => (range, Some(parse_step(spec, step)?)),
        None => (element, None),
    };
    let (from, to) = if range == "*" {
        (spec.min, spec.max)
    } else if let Some((from, to)) = range.split_once('-') {
        (parse_value(spec, from)?, parse_value(spec, to)?)
    } else {
        let value = parse_value(spec, range)?;
        match step {
            // `a/n` means `a-max/n`; a written 7 (Sunday) starts the week again.
            Some(_) => (value % (spec.max + 1), spec.max),
            None => (value, value),
        }
    };
    let step = step.unwrap_or(1);

    if from <= to {
        for value in (from..=to).step_by(step as usize) {
            parsed.bits |= 1 << value;
        }
        return Ok(());
    }
    if !spec.wraps {
        return Err(FieldProblem::ReversedRange { from, to });
    }
    if from > spec.max {
        // Day-of-week `7-n`: the 7 is the Sunday that starts the week.
        for value in (spec.min..=to).step_by(step as usize) {
            parsed.bits |= 1 << value;
        }
        return Ok(());
    }
    // Wrap around: from..=max, then min..=to, stepping through the joined sequence.
    let cycle = spec.max - spec.min + 1;
    let length = (spec.max - from + 1) + (to - spec.min + 1);
    for offset in (0..length).step_by(step as usize) {
        let mut value = from + offset;
        if value > spec.max {
            value -= cycle;
        }
        parsed.bits |= 1 << value;
    }
    Ok(())
}

/// The weekday before `#n` or `L`, reduced to 0..=6.
fn parse_modified_weekday(spec: &FieldSpec, element: &str, day: &str) -> Result<u32, FieldProblem> {
    if day.contains(['-', '/', '*', ',']) || day.is_empty() {
        return Err(FieldProblem::ModifierWithRange(element.to_owned()));
    }
    Ok(parse_value(spec, day)? % 7)
}

fn set_nth(parsed: &mut ParsedField, weekday: u32, bit: u8) {
    if let Some(slot) = parsed.nth.get_mut(weekday as usize) {
        *slot |= bit;
    }
}

fn parse_step(spec: &FieldSpec, text: &str) -> Result<u32, FieldProblem> {
    let cycle = spec.max - spec.min + 1;
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FieldProblem::InvalidStep(text.to_owned()));
    }
    match parse_number(text) {
        Some(0) => Err(FieldProblem::StepTooSmall),
        Some(step) if step <= cycle => Ok(step),
        _ if text.bytes().all(|b| b == b'0') => Err(FieldProblem::StepTooSmall),
        _ => Err(FieldProblem::StepOutOfRange {
            step: text.to_owned(),
            max: cycle,
        }),
    }
}

/// A plain decimal number; `None` for anything else or a value too large to matter.
fn parse_number(text: &str) -> Option<u32> {
    if text.is_empty() || text.len() > 9 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn parse_value(spec: &FieldSpec, text: &str) -> Result<u32, FieldProblem> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return match parse_number(text) {
            Some(value) if (spec.min..=spec.max_written).contains(&value) => Ok(value),
            _ => Err(FieldProblem::OutOfRange {
                value: text.to_owned(),
                min: spec.min,
                max: spec.max_written,
            }),
        };
    }
    if spec.names.is_empty() || !text.bytes().all(|b| b.is_ascii_alphabetic()) || text.is_empty() {
        return Err(FieldProblem::InvalidValue(text.to_owned()));
    }
    (spec.min..)
        .zip(spec.names)
        .find(|(_, name)| name.eq_ignore_ascii_case(text))
        .map(|(value, _)| value)
        .ok_or_else(|| FieldProblem::UnknownName(text.to_owned()))
}

impl fmt::Display for CronExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(every) = self.every {
            return every.fmt(f);
        }
        let mut list = ListWriter::new(f);
        if self.flags & SECOND_FIELD != 0 {
            // A `*` decides nothing in the seconds field: it prints as `*` or `*/n` only when
            // that reads best.
            let star = (1..=30).any(|step| {
                let covered = step_bits(&SECOND, step);
                covered & self.seconds == covered
            });
            write_bits(&mut list, self.seconds, &SECOND, star)?;
            list.next_field()?;
        }
        write_bits(
            &mut list,
            self.minutes,
            &MINUTE,
            self.flags & MINUTE_STAR != 0,
        )?;
        list.next_field()?;
        write_bits(
            &mut list,
            u64::from(self.hours),
            &HOUR,
            self.flags & HOUR_STAR != 0,
        )?;
        list.next_field()?;
        write_bits(
            &mut list,
            u64::from(self.days),
            &DAY_OF_MONTH,
            self.flags & DOM_STAR != 0,
        )?;
        if self.flags & DOM_LAST != 0 {
            list.item(format_args!("L"))?;
        }
        list.next_field()?;
        write_bits(
            &mut list,
            u64::from(self.months),
            &MONTH,
            self.flags & MONTH_STAR != 0,
        )?;
        list.next_field()?;
        write_bits(
            &mut list,
            u64::from(self.weekdays),
            &DAY_OF_WEEK,
            self.flags & DOW_STAR != 0,
        )?;
        for (weekday, &occurrences) in self.nth.iter().enumerate() {
            for n in 0..5 {
                if occurrences & (1 << n) != 0 {
                    list.item(format_args!("{weekday}#{}", n + 1))?;
                }
            }
            if occurrences & NTH_LAST != 0 {
                list.item(format_args!("{weekday}L"))?;
            }
        }
        Ok(())
    }
}

/// Writes comma-separated items, starting a new space-separated field on request.
struct ListWriter<'a, 'b> {
    out: &'a mut fmt::Formatter<'b>,
    first_in_field: bool,
}

impl<'a, 'b> ListWriter<'a, 'b> {
    fn new(out: &'a mut fmt::Formatter<'b>) -> Self {
        ListWriter {
            out,
            first_in_field: true,
        }
    }

    fn item(&mut self, item: fmt::Arguments<'_>) -> fmt::Result {
        if !self.first_in_field {
            self.out.write_str(",")?;
        }
        self.first_in_field = false;
        self.out.write_fmt(item)
    }

    fn next_field(&mut self) -> fmt::Result {
        self.first_in_field = true;
        self.out.write_str(" ")
    }
}

/// Writes a field's value set so that it parses back to the same bits and the same `*` flag.
fn write_bits(
    list: &mut ListWriter<'_, '_>,
    bits: u64,
    spec: &FieldSpec,
    starts_with_star: bool,
) -> fmt::Result {
    let mut rest = bits;
    if starts_with_star {
        // The `*` element always covers `min`; pick the smallest step whose values all match.
        let cycle = spec.max - spec.min + 1;
        let step = (1..=cycle)
            .find(|&step| {
                let covered = step_bits(spec, step);
                covered & bits == covered
            })
            .unwrap_or(cycle);
        if step == 1 {
            list.item(format_args!("*"))?;
        } else {
            list.item(format_args!("*/{step}"))?;
        }
        rest &= !step_bits(spec, step);
    }
    let mut value = spec.min;
    while value <= spec.max {
        if rest & (1 << value) == 0 {
            value += 1;
            continue;
        }
        let mut end = value;
        while end < spec.max && rest & (1 << (end + 1)) != 0 {
            end += 1;
        }
        match end - value {
            0 => list.item(format_args!("{value}"))?,
            1 => {
                list.item(format_args!("{value}"))?;
                list.item(format_args!("{end}"))?;
            }
            _ => list.item(format_args!("{value}-{end}"))?,
        }
        value = end + 1;
    }
    Ok(())
}

fn step_bits(spec: &FieldSpec, step: u32) -> u64 {
    (spec.min..=spec.max)
        .step_by(step as usize)
        .fold(0, |bits, value| bits | 1 << value)
}
