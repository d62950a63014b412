//! Output helpers shared by the subcommands: the `--output` switch, human tables and JSON.

use std::io::Write;

use clap::ValueEnum;
use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum OutputFormat {
    /// A human table.
    #[default]
    Table,
    /// One JSON document, for machines.
    Json,
}

/// A table with the house style: condensed UTF-8 borders, wrapped to the terminal when known.
pub fn table<I, S>(header: I) -> Table
where
    I: IntoIterator<Item = S>,
    S: Into<comfy_table::Cell>,
{
    let mut table = Table::new();
    table
        .load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header);
    table
}

/// Writes `value` as pretty JSON followed by a newline.
pub fn write_json<T: Serialize + ?Sized>(
    out: &mut (dyn Write + Send),
    value: &T,
) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}
