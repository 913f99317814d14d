//! The flags of `ccvm exec`, and what it does with them.

use std::path::PathBuf;

use clap::Args;

use crate::args::{self, OutputArgs, PagingArgs};

#[derive(Args)]
pub struct ExecArgs {
    /// RAM budget of the program's heap: uncompressed pages plus the compression cache, e.g. 64M.
    #[arg(long, value_parser = args::parse_bytes, default_value = "128M")]
    ram: u64,
    /// Address space reserved for the heap; what the program allocates beyond it is not paged.
    #[arg(long, value_parser = args::parse_bytes, default_value = "4G")]
    heap: u64,
    #[command(flatten)]
    paging: PagingArgs,
    /// Run the program unpaged first (output discarded) and show both wall times.
    #[arg(long)]
    compare: bool,
    /// Run the program without ccvm: for a program ccvm cannot page (statically linked).
    #[arg(long)]
    unpaged: bool,
    /// Do not meter the program's processes in a memory cgroup of their own (made, as root, inside
    /// ccvm's): the meter costs about 0.4 MiB, charged to the group ccvm runs in, so a run metered
    /// from outside (`ccvm bench kernel`) goes without it.
    #[arg(long)]
    no_cgroup_meter: bool,
    /// --json or --csv: the report in that form (on standard error, like the text report).
    #[command(flatten)]
    output: OutputArgs,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    report: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "PROGRAM"
    )]
    command: Vec<String>,
}

/// `ccvm exec`: returns the program's exit status.
pub fn run(a: ExecArgs) -> anyhow::Result<i32> {
    args::check_pages("--heap", a.heap)?;
    let settings = ccvm_runtime::ExecSettings {
        config: a.paging.config(a.ram)?,
        heap_bytes: a.heap,
        ..ccvm_runtime::ExecSettings::default()
    };
    super::exec(super::ExecOptions {
        settings,
        command: a.command,
        compare: a.compare,
        unpaged: a.unpaged,
        cgroup_meter: !a.no_cgroup_meter,
        format: a.output.format(),
        report: a.report,
    })
}
