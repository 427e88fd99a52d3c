//! The `cairn` binary: the command-line interface over `cairn-core`.

mod validate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "cairn",
    version,
    about = "CloudFormation-compatible orchestration engine"
)]
struct Cli {
    /// Configuration file (TOML). Without it, built-in defaults apply.
    #[arg(long, global = true, env = "CAIRN_CONFIG")]
    config: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Check a template and print its description and parameters
    /// (like `aws cloudformation validate-template`).
    Validate {
        /// Template file (JSON or YAML).
        template: PathBuf,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
}

fn load_config(path: Option<&PathBuf>) -> anyhow::Result<cairn_core::config::Config> {
    Ok(match path {
        Some(p) => cairn_core::config::Config::load(p)?,
        None => cairn_core::config::Config::default(),
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = (|| -> anyhow::Result<()> {
        let config = load_config(cli.config.as_ref())?;
        match &cli.command {
            Command::Validate { template, output } => validate::run(&config, template, *output),
        }
    })();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
