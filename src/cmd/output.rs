//! Output shared by the subcommands: the `-o` switch, plain aligned tables, JSON and YAML, and
//! the one time format.
//!
//! Tables are plain columns separated by spaces, never box drawing and never wrapped: they
//! read the same on a terminal of any width (or one that reports none) as piped into `awk`
//! or `cut`. A cell's line breaks become spaces so each record stays on one line. Columns are
//! aligned by terminal width (wide CJK characters take two columns, combining marks none).

use std::fmt;
use std::io::Write;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::ValueEnum;
use serde::Serialize;
use unicode_width::{UnicodeWidthChar as _, UnicodeWidthStr as _};

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum OutputFormat {
    /// Aligned columns for people.
    #[default]
    Table,
    /// Aligned columns with every column (long texts in full).
    Wide,
    /// One JSON document, for machines.
    Json,
    /// One YAML document.
    Yaml,
}

impl OutputFormat {
    /// JSON or YAML: the records themselves rather than a table of them.
    pub fn is_structured(self) -> bool {
        matches!(self, OutputFormat::Json | OutputFormat::Yaml)
    }
}

/// The output switches of the commands that print records.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
#[command(next_help_heading = "Output")]
pub struct OutputArgs {
    /// Output format.
    #[arg(
        short = 'o',
        long = "output",
        value_enum,
        default_value_t,
        value_name = "FORMAT"
    )]
    pub format: OutputFormat,
    /// Print table rows without the header line.
    #[arg(long)]
    pub no_headers: bool,
}

/// Longest text a `table` cell shows before it is cut (`wide` shows all of it).
pub const NARROW_CELL: usize = 60;

/// A table of plain aligned columns.
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    headers: bool,
}

/// A table with these column names.
pub fn table<I, S>(header: I) -> Table
where
    I: IntoIterator<Item = S>,
    S: ToString,
{
    Table {
        header: header.into_iter().map(|h| h.to_string()).collect(),
        rows: Vec::new(),
        headers: true,
    }
}

impl Table {
    /// Adds one row; a cell's line breaks become spaces.
    pub fn add_row<I, S>(&mut self, row: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: ToString,
    {
        self.rows.push(
            row.into_iter()
                .map(|cell| one_line(&cell.to_string()))
                .collect(),
        );
        self
    }

    /// Leaves the header line out (`--no-headers`).
    pub fn without_headers(&mut self) -> &mut Self {
        self.headers = false;
        self
    }

    /// Whether the table has rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

fn one_line(text: &str) -> String {
    if text.contains(['\n', '\r', '\t']) {
        text.split(['\n', '\r', '\t'])
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        text.to_owned()
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<&Vec<String>> = if self.headers {
            std::iter::once(&self.header).chain(&self.rows).collect()
        } else {
            self.rows.iter().collect()
        };
        let columns = lines.iter().map(|l| l.len()).max().unwrap_or(0);
        let mut widths = vec![0usize; columns];
        for line in &lines {
            for (width, cell) in widths.iter_mut().zip(line.iter()) {
                *width = (*width).max(cell.width());
            }
        }
        for (number, line) in lines.iter().enumerate() {
            if number > 0 {
                writeln!(f)?;
            }
            let mut text = String::new();
            for (index, cell) in line.iter().enumerate() {
                if index > 0 {
                    text.push_str("   ");
                }
                text.push_str(cell);
                if index + 1 < line.len() {
                    let pad = widths[index] - cell.width();
                    text.extend(std::iter::repeat_n(' ', pad));
                }
            }
            f.write_str(text.trim_end())?;
        }
        Ok(())
    }
}

/// Writes a table, or nothing at all when it has no rows and no header is wanted.
pub fn write_table(out: &mut (dyn Write + Send), table: &Table) -> anyhow::Result<()> {
    if table.is_empty() && !table.headers {
        return Ok(());
    }
    writeln!(out, "{table}")?;
    Ok(())
}

/// Cuts `text` to [`NARROW_CELL`] terminal columns (with an ellipsis) unless `wide`.
pub fn cell(text: &str, wide: bool) -> String {
    if wide || text.width() <= NARROW_CELL {
        return text.to_owned();
    }
    let mut cut = String::new();
    let mut used = 0;
    for ch in text.chars() {
        let columns = ch.width().unwrap_or(0);
        if used + columns > NARROW_CELL - 1 {
            break;
        }
        used += columns;
        cut.push(ch);
    }
    cut.push('…');
    cut
}

/// The one time format of the command line: RFC 3339 in UTC with `Z`, to the second.
pub fn time_text(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// An optional instant as a table cell (`-` for none).
pub fn opt_time_text(at: Option<DateTime<Utc>>) -> String {
    at.map_or_else(|| "-".to_owned(), time_text)
}

/// Writes `value` as pretty JSON followed by a newline.
pub fn write_json<T: Serialize + ?Sized>(
    out: &mut (dyn Write + Send),
    value: &T,
) -> anyhow::Result<()> {
    // serde_json writes a token at a time; a line-buffered stdout would make each line a
    // system call (a report of ten thousand changes has a few hundred thousand lines).
    let mut buffered = std::io::BufWriter::with_capacity(1 << 16, &mut *out);
    serde_json::to_writer_pretty(&mut buffered, value)?;
    writeln!(buffered)?;
    buffered.flush()?;
    Ok(())
}

/// Writes `value` as one YAML document.
pub fn write_yaml<T: Serialize + ?Sized>(
    out: &mut (dyn Write + Send),
    value: &T,
) -> anyhow::Result<()> {
    let text = serde_saphyr::to_string(&value)?;
    out.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        writeln!(out)?;
    }
    Ok(())
}

/// Writes `value` as JSON or YAML, as `format` asks (a table format writes JSON).
pub fn write_structured<T: Serialize + ?Sized>(
    out: &mut (dyn Write + Send),
    format: OutputFormat,
    value: &T,
) -> anyhow::Result<()> {
    match format {
        OutputFormat::Yaml => write_yaml(out, value),
        _ => write_json(out, value),
    }
}

/// Standard output as commands write to it: once the reader has gone (`... | head -1`), the
/// rest of the output is dropped instead of failing the write. A command then goes on to end
/// with the status its work earned (a refused `apply` step still exits non-zero), and `serve`
/// keeps serving. Any other write error is passed on.
#[derive(Debug)]
pub struct ClosedPipeIsDone<W> {
    inner: W,
    closed: bool,
}

impl<W: Write> ClosedPipeIsDone<W> {
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            closed: false,
        }
    }

    /// True once a write found the pipe closed.
    pub fn closed(&self) -> bool {
        self.closed
    }

    fn absorb(&mut self, result: std::io::Result<()>) -> std::io::Result<()> {
        match result {
            Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            other => other,
        }
    }
}

impl<W: Write> Write for ClosedPipeIsDone<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.closed {
            return Ok(buf.len());
        }
        match self.inner.write(buf) {
            Ok(written) => Ok(written),
            Err(err) => self.absorb(Err(err)).map(|()| buf.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let flushed = self.inner.flush();
        self.absorb(flushed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_aligned_without_borders_or_trailing_spaces() {
        let mut t = table(["id", "status", "error"]);
        t.add_row(["a", "failed", "line one\nline two"]);
        t.add_row(["bbbb", "ok", ""]);
        assert_eq!(
            t.to_string(),
            "id     status   error\na      failed   line one line two\nbbbb   ok"
        );
        t.without_headers();
        assert_eq!(
            t.to_string(),
            "a      failed   line one line two\nbbbb   ok"
        );
    }

    #[test]
    fn narrow_cells_are_cut_and_wide_ones_kept() {
        let long = "x".repeat(NARROW_CELL + 5);
        assert_eq!(cell(&long, true), long);
        let cut = cell(&long, false);
        assert_eq!(cut.chars().count(), NARROW_CELL);
        assert!(cut.ends_with('…'));
        // Wide characters count for two columns: the cut cell fits the same columns.
        let cut = cell(&"日".repeat(NARROW_CELL), false);
        assert!(cut.width() <= NARROW_CELL, "{cut}");
        assert_eq!(cut.chars().count(), (NARROW_CELL - 1) / 2 + 1, "{cut}");
    }

    #[test]
    fn wide_and_combining_characters_keep_columns_aligned() {
        let mut t = table(["name", "status"]);
        // "日本" is four columns wide; "e\u{301}" (e and a combining acute) is one.
        t.add_row(["日本", "ok"]).add_row(["e\u{301}", "failed"]);
        let text = t.to_string();
        let starts: Vec<usize> = text
            .lines()
            .map(|line| {
                let at = line.rfind("   ").unwrap() + 3;
                line[..at].width()
            })
            .collect();
        assert_eq!(starts, vec![7, 7, 7], "{text}");
    }

    #[test]
    fn times_are_utc_seconds_with_z() {
        let at = DateTime::parse_from_rfc3339("2030-01-01T02:03:04.567891+02:00")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(time_text(at), "2030-01-01T00:03:04Z");
        assert_eq!(opt_time_text(None), "-");
    }

    /// A writer whose reader has gone.
    struct Closed(usize);

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            self.0 += 1;
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
    }

    #[test]
    fn a_closed_pipe_drops_the_rest_of_the_output_and_other_errors_pass() {
        let mut out = ClosedPipeIsDone::new(Closed(0));
        assert!(!out.closed());
        writeln!(out, "first").unwrap();
        writeln!(out, "second").unwrap();
        out.flush().unwrap();
        assert!(out.closed());
        assert_eq!(out.inner.0, 1, "nothing is written after the pipe closed");

        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("disk full"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut out = ClosedPipeIsDone::new(Full);
        assert!(writeln!(out, "x").is_err());
        assert!(!out.closed());
    }
}
