//! `whoami`: what the server reads from the token this command sends (`GET /v1/whoami`):
//! subject, scopes, environments and expiry.

use std::io::Write;
use std::process::ExitCode;

use serde_json::Value;

use super::output::{self, OutputArgs};
use super::remote::ServerArgs;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  SENTIN8_CRON_API_TOKEN=$TOKEN sentin8-cron whoami --server http://127.0.0.1:8080
  sentin8-cron whoami -o json")]
pub struct Args {
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let client = args.server.require()?;
    let me = client.get("/v1/whoami", &[]).await?;
    if args.output.format.is_structured() {
        output::write_structured(out, args.output.format, &me)?;
        return Ok(ExitCode::SUCCESS);
    }
    let list = |field: &str| -> String {
        me[field]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    };
    let environments = if me["all_environments"] == Value::Bool(true) {
        "every environment".to_owned()
    } else {
        list("environments")
    };
    let expires = me["expires_at"].as_str().map_or(
        "with its process (development token)".to_owned(),
        str::to_owned,
    );
    let mut table = output::table(["field", "value"]);
    table.add_row(["subject", me["subject"].as_str().unwrap_or_default()]);
    table.add_row(["scopes", &list("scopes")]);
    table.add_row(["environments", &environments]);
    table.add_row(["expires_at", &expires]);
    if args.output.no_headers {
        table.without_headers();
    }
    output::write_table(out, &table)?;
    Ok(ExitCode::SUCCESS)
}
