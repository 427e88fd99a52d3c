//! The `cairn` binary's library: the command-line interface over
//! `cairn-core` and `cairn-api`. `src/main.rs` only calls [`main`]: as a
//! library, the CLI starts compiling as soon as the crates below it have
//! their metadata, instead of waiting for them to finish (cargo links a
//! binary only from finished libraries), which keeps a fresh build short.

mod audit;
mod changesets;
mod drift;
mod environment;
mod hooks;
mod migrate;
mod notifications;
mod package;
mod progress;
mod provider_test;
mod providers;
mod reconcile;
mod refactor;
mod remote;
mod scaffold;
mod serve;
mod stacks;
mod telemetry;
mod tree;
mod types;
mod validate;
pub mod wiring;

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

    /// The SQLite state file (created on first use; default ./cairn-state.db).
    #[arg(long, global = true, env = "CAIRN_STATE")]
    state: Option<PathBuf>,

    /// Where file-backed built-in providers keep their resources (default:
    /// the state file's name plus `.resources`).
    #[arg(long, global = true, env = "CAIRN_DATA_DIR")]
    data_dir: Option<PathBuf>,

    /// Run the command against a `cairn serve` (or any CloudFormation
    /// endpoint) instead of the embedded engine, signing with the AWS
    /// credentials of the environment.
    #[arg(long, global = true, env = "CAIRN_ENDPOINT")]
    endpoint: Option<String>,

    /// How logs are written to stderr: text, or one JSON object per line
    /// with the fields of the request and operation it belongs to
    /// (default: the configuration's `[log] format`, else text).
    #[arg(long, global = true, env = "CAIRN_LOG_FORMAT", value_enum)]
    log_format: Option<LogFormatArg>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
}

#[derive(Subcommand)]
enum ProviderCommand {
    /// Write a provider project that builds, passes `cairn provider test`
    /// and deploys its sample template with no edit.
    New(ProviderNewArgs),
    /// Run the contract tests against a provider, through the client the
    /// engine uses: schema, create, a repeated request id, drift, updates
    /// in place and by replacement, invalid input, delete twice, an expired
    /// deadline. Exits non-zero when a test fails.
    Test(ProviderTestArgs),
    /// Package a provider project for the registry (`cairn type
    /// register`): its type's CloudFormation-style schema and its handler
    /// (the plugin library, or the handler's URL), with the SHA-256 of
    /// every file, optionally signed.
    Package(package::PackageArgs),
    /// Make a minisign key pair to sign packages with.
    Keygen(package::KeygenArgs),
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Lang {
    Rust,
    Python,
    Typescript,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProjectKind {
    /// A resource provider.
    Resource,
    /// A hook: checks before resources are created, updated or deleted.
    Hook,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Transport {
    /// A dynamic library Cairn loads (Rust only).
    Dylib,
    /// A webhook handler Cairn calls over HTTP.
    Webhook,
}

#[derive(clap::Args)]
struct ProviderNewArgs {
    /// The project's name (crate or package; lowercase, digits, '-', '_').
    name: String,
    #[arg(long, value_enum)]
    lang: Lang,
    /// For Rust: a plugin (dylib) or a webhook handler. Python and
    /// TypeScript providers are webhook handlers.
    #[arg(long, value_enum)]
    transport: Option<Transport>,
    /// What it serves: a resource type, or a hook (CloudFormation's HOOK
    /// type: a Rust plugin library).
    #[arg(long, value_enum, default_value = "resource")]
    kind: ProjectKind,
    /// The directory to create (default: NAME).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The resource type it serves (default Example::<Name>::Note; a hook:
    /// Example::<Name>::Hook).
    #[arg(long)]
    type_name: Option<String>,
    /// Depend on cairn-sdk at this path (a Cairn checkout's sdk/). Default:
    /// the SDK this binary was built with, written into the project
    /// (cairn-sdk/).
    #[arg(long)]
    sdk_path: Option<PathBuf>,
    /// Install the Python SDK from this path (a Cairn checkout's
    /// sdk-python/). Default: the SDK this binary was built with, written
    /// into the project (cairn-provider/).
    #[arg(long)]
    python_sdk: Option<PathBuf>,
    /// Depend on the TypeScript SDK at this path (a Cairn checkout's
    /// sdk-typescript/). Default: the SDK this binary was built with,
    /// written into the project (cairn-provider/, built by its build).
    #[arg(long)]
    typescript_sdk: Option<PathBuf>,
    /// The port a webhook handler listens on.
    #[arg(long, default_value_t = 8080)]
    port: u16,
}

#[derive(clap::Args)]
#[group(skip)]
#[command(group(clap::ArgGroup::new("under").required(true).args(["type_name", "plugin", "webhook"])))]
struct ProviderTestArgs {
    /// A type this configuration serves (built-ins, configured plugins and
    /// handlers, custom resources).
    #[arg(long = "type")]
    type_name: Option<String>,
    /// A provider plugin library: every type it declares.
    #[arg(long)]
    plugin: Option<PathBuf>,
    /// Load the plugin into this process instead of a `cairn plugin-host`
    /// child.
    #[arg(long, requires = "plugin")]
    in_process: bool,
    /// The plugin's settings, as a `[[providers]]` entry's `settings` (a
    /// JSON or YAML file).
    #[arg(long, requires = "plugin", value_name = "FILE")]
    settings: Option<PathBuf>,
    /// A webhook handler (serving `/schema`): every type it declares.
    #[arg(long)]
    webhook: Option<String>,
    /// The handler's signing secret.
    #[arg(long, requires = "webhook")]
    secret: Option<String>,
    /// The handler answers Cairn's CheckDrift request.
    #[arg(long, requires = "webhook")]
    drift: bool,
    /// The handler answers Cairn's Read request (the read tests run).
    #[arg(long, requires = "webhook")]
    read: bool,
    /// Inputs per type (JSON or YAML): `Type: {Create: {...}, Updates: [...],
    /// Invalid: {...}}`, or `Type: {<create properties>}`. Without it they
    /// are derived from the schema.
    #[arg(long)]
    properties: Option<PathBuf>,
    /// A further update per type (`Type: {<properties>}`), applied in order.
    #[arg(long = "update")]
    updates: Vec<PathBuf>,
    /// Seconds one call may take.
    #[arg(long, default_value_t = 60)]
    timeout_seconds: u64,
    #[arg(long, value_enum, default_value_t)]
    output: OutputFormat,
    /// Also write the results as JUnit XML here (for CI).
    #[arg(long)]
    junit: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a provider plugin on stdin/stdout (run by Cairn itself for
    /// `isolation = "process"`; not for use by hand).
    #[command(hide = true)]
    PluginHost {
        /// The plugin library.
        path: PathBuf,
        /// Refuse the library unless its SHA-256 is this.
        #[arg(long)]
        sha256: Option<String>,
    },
    /// Check a template and print its description and parameters
    /// (like `aws cloudformation validate-template`).
    Validate {
        /// Template file (JSON or YAML).
        template: PathBuf,
        /// A parameter value for the static pass, KEY=VALUE (repeatable;
        /// defaults are used for the others).
        #[arg(long = "parameter", short = 'p')]
        parameters: Vec<String>,
        /// A HOT environment file (repeatable; later ones win).
        #[arg(long = "environment", short = 'e')]
        environments: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// Create a stack from a template and wait until it is done.
    Deploy(DeployOpts),
    /// Delete a stack and its resources and wait until it is done.
    Delete {
        stack: String,
        /// A resource to keep (only for a stack in DELETE_FAILED; repeatable).
        #[arg(long)]
        retain: Vec<String>,
    },
    /// Resume the rollback of a stack in UPDATE_ROLLBACK_FAILED and wait.
    ContinueRollback {
        stack: String,
        /// A resource to mark rolled back without a provider call (repeatable).
        #[arg(long)]
        skip: Vec<String>,
    },
    /// Roll back a stack whose create or update failed with --disable-rollback
    /// (CREATE_FAILED or UPDATE_FAILED) to its last stable state, and wait.
    Rollback { stack: String },
    /// Turn a root stack's termination protection on or off (a protected
    /// stack, and every nested stack under it, is not deleted).
    Protect {
        stack: String,
        #[arg(long, conflicts_with = "off", required_unless_present = "off")]
        on: bool,
        #[arg(long)]
        off: bool,
    },
    /// Import resources made elsewhere into an existing stack: TEMPLATE is
    /// the stack's template with them added (each with a DeletionPolicy),
    /// FILE lists them (JSON or YAML: [{ResourceType, LogicalResourceId,
    /// ResourceIdentifier: {...}}]); nothing else may change. Waits for
    /// IMPORT_COMPLETE.
    Import(ImportOpts),
    /// Rename resources and move them between stacks without calling a
    /// provider (CloudFormation's stack refactoring): each --stack gives a
    /// stack's template after the move; a resource that leaves one
    /// template and appears in another under the same logical id moves,
    /// --map moves or renames the rest. Nothing may be created, deleted or
    /// changed. Shows the actions; --execute applies them.
    Refactor(RefactorOpts),
    /// Show a stack's policy, or set it with --set FILE (a JSON document of
    /// Allow/Deny statements on Update:Modify|Replace|Delete).
    StackPolicy {
        stack: String,
        #[arg(long, value_name = "FILE")]
        set: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// Preview an update (or a create) as a change set, without touching
    /// resources (like `aws cloudformation create-change-set`).
    Plan(PlanOpts),
    /// Execute a change set made by `cairn plan` and wait until it is done.
    Execute {
        stack: String,
        change_set: String,
        /// Keep what was done when it fails: a create stops in CREATE_FAILED,
        /// an update in UPDATE_FAILED (then update again, or `cairn rollback`).
        #[arg(long)]
        disable_rollback: bool,
    },
    /// List a stack's change sets.
    ChangeSets {
        stack: String,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// Show a change set.
    ChangeSet {
        stack: String,
        change_set: String,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// Delete a change set.
    DeleteChangeSet { stack: String, change_set: String },
    /// Cancel a stack's update in progress: it rolls back; waits until done.
    CancelUpdate { stack: String },
    /// Signal a resource that waits for signals (a CreationPolicy, a
    /// WaitCondition with one), like `aws cloudformation signal-resource`.
    Signal {
        stack: String,
        /// The logical id of the resource.
        resource: String,
        /// The signal's UniqueId (1 to 64 characters; a repeated one
        /// replaces the earlier signal).
        #[arg(long = "id")]
        unique_id: String,
        #[arg(long, default_value = "SUCCESS", value_parser = ["SUCCESS", "FAILURE"])]
        status: String,
        /// Why (shown when a FAILURE fails the resource).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Show the operations run on a stack.
    History {
        stack: String,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// List stacks, deleted ones included.
    List {
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// Show a stack (by name, or by stack id for deleted stacks).
    Describe {
        stack: String,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// Show a stack's events.
    Events {
        stack: String,
        /// Also the events of its nested stacks, in time order, each under
        /// its path of logical ids (`App/Db/Instance`).
        #[arg(long)]
        nested: bool,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// Show a stack's resources.
    Resources {
        stack: String,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// Show a stack's outputs.
    Outputs {
        stack: String,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// Work on a provider: run its contract tests.
    Provider {
        #[command(subcommand)]
        command: ProviderCommand,
    },
    /// The audit trail: every API call and console action that changed
    /// something, newest first (who, from where, what, how it ended).
    Audit(audit::AuditArgs),
    /// Hooks: check a template against every hook in force, changing
    /// nothing (`cairn hooks check STACK TEMPLATE`).
    Hooks {
        #[command(subcommand)]
        command: hooks::HooksCommand,
    },
    /// The type registry: register packages, list and describe types and
    /// their versions, set the default version, deregister.
    Type {
        #[command(subcommand)]
        command: types::TypeCommand,
    },
    /// List the resource types this configuration serves (provider,
    /// transport, version), or one type's schema.
    Providers {
        /// Show this type's schema.
        #[arg(long = "type")]
        type_name: Option<String>,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// Update a stack and bring reality back to the template (Cloudify's
    /// deployment update): uninstall removed, install added, heal unhealthy,
    /// fix drift, reinstall what cannot change in place. Waits until done.
    Update(UpdateOpts),
    /// Detect drift: compare each resource with what the template set
    /// (IN_SYNC, MODIFIED with the differences, DELETED, NOT_CHECKED).
    Drift {
        stack: String,
        /// Only this resource (repeatable).
        #[arg(long = "resource")]
        resources: Vec<String>,
        /// Show the last detection instead of running one.
        #[arg(long)]
        last: bool,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// Copy a SQLite state file into an empty PostgreSQL database (to run
    /// several engines on it): stacks, resources, events, history, change
    /// sets, drift results, groups and exports. Prints what it copied and
    /// verified.
    MigrateState {
        /// The SQLite state file.
        #[arg(long)]
        from: PathBuf,
        /// The PostgreSQL state: postgres://user@host:port/database.
        #[arg(long)]
        to: String,
    },
    /// Serve the CloudFormation Query API (aws CLI, boto3 and the other AWS
    /// SDKs with an endpoint URL) until SIGTERM.
    Serve {
        /// Address to listen on (default: [server] listen); port 0 picks one.
        #[arg(long)]
        listen: Option<String>,
    },
    /// Show the template a stack was made from.
    Template {
        stack: String,
        /// The template as Cairn reads it: AWS::Include's snippets inserted,
        /// AWS::LanguageExtensions' loops expanded, HOT lowered to
        /// CloudFormation's long form (JSON). The same as `--stage processed`.
        #[arg(long)]
        expanded: bool,
        /// `original` (as written, the default) or `processed` (GetTemplate's
        /// TemplateStage).
        #[arg(long, value_parser = ["original", "processed"])]
        stage: Option<String>,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
}

#[derive(clap::Args)]
struct DeployOpts {
    stack: String,
    template: PathBuf,
    /// A parameter value, KEY=VALUE (repeatable).
    #[arg(long = "parameter", short = 'p')]
    parameters: Vec<String>,
    /// Keep what was done when it fails: a create stops in CREATE_FAILED
    /// (OnFailure DO_NOTHING), an update in UPDATE_FAILED; deploy again to
    /// continue, or `cairn rollback` to go back.
    #[arg(long)]
    disable_rollback: bool,
    /// DO_NOTHING, ROLLBACK (default) or DELETE.
    #[arg(long)]
    on_failure: Option<String>,
    /// Keep the stack's current value of this parameter (update; repeatable).
    #[arg(long = "use-previous-value")]
    use_previous: Vec<String>,
    /// A stack tag, KEY=VALUE (repeatable; an update without any keeps
    /// the stack's tags).
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// Fail the create (and roll it back, or as --on-failure says) when it
    /// has not finished within this many minutes (TimeoutInMinutes).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    timeout_minutes: Option<u32>,
    /// Acknowledge capabilities the template requires (CAPABILITY_IAM,
    /// CAPABILITY_NAMED_IAM, CAPABILITY_AUTO_EXPAND, or a provider's own).
    #[arg(long, num_args = 1..)]
    capabilities: Vec<String>,
    /// A HOT environment file (repeatable; later ones win): parameters,
    /// parameter_defaults, resource_registry.
    #[arg(long = "environment", short = 'e')]
    environments: Vec<PathBuf>,
    /// Create the stack with termination protection on
    /// (EnableTerminationProtection; `cairn protect` changes it later).
    #[arg(long)]
    enable_termination_protection: bool,
    /// The stack's policy, a JSON file (StackPolicyBody; on an update, the
    /// policy that governs later updates).
    #[arg(long, value_name = "FILE")]
    stack_policy: Option<PathBuf>,
    /// The policy this update alone is checked against, instead of the
    /// stack's (StackPolicyDuringUpdateBody).
    #[arg(long, value_name = "FILE")]
    stack_policy_during_update: Option<PathBuf>,
    /// Rollback triggers and the monitoring period (RollbackConfiguration):
    /// JSON, or a JSON or YAML file, such as {"RollbackTriggers": [{"Arn":
    /// "http://app/health", "Type": "Cairn::Http::HealthCheck"}],
    /// "MonitoringTimeInMinutes": 5}. A field left out keeps the stack's.
    #[arg(long, value_name = "JSON|FILE")]
    rollback_configuration: Option<String>,
    /// A webhook URL that receives every event of the stack, signed with
    /// `[webhooks] secret` (NotificationARNs; repeatable, at most 5; on an
    /// update, replaces the stack's).
    #[arg(long = "notify", value_name = "URL")]
    notify: Vec<String>,
    /// On an update: the stack's events go to no webhook any more.
    #[arg(long, conflicts_with = "notify")]
    no_notify: bool,
    /// Move resources of registered types to each type's default
    /// version (they keep the version they were made with otherwise).
    #[arg(long)]
    upgrade_types: bool,
}

#[derive(clap::Args)]
struct RefactorOpts {
    /// NAME=TEMPLATE_FILE (repeatable, 1 to 5 stacks).
    #[arg(long = "stack", required = true, value_name = "NAME=TEMPLATE")]
    stacks: Vec<String>,
    /// SOURCE_STACK.LOGICAL_ID=DESTINATION_STACK.LOGICAL_ID (repeatable).
    #[arg(long = "map", value_name = "FROM=TO")]
    maps: Vec<String>,
    #[arg(long)]
    description: Option<String>,
    /// A --stack that does not exist is created to hold what moves
    /// into it (EnableStackCreation).
    #[arg(long)]
    enable_stack_creation: bool,
    /// Apply the refactor (without it, only the preview).
    #[arg(long)]
    execute: bool,
    #[arg(long, value_enum, default_value_t)]
    output: OutputFormat,
}

impl RefactorOpts {
    fn args(&self) -> refactor::RefactorArgs<'_> {
        refactor::RefactorArgs {
            stacks: &self.stacks,
            maps: &self.maps,
            description: self.description.as_deref(),
            enable_stack_creation: self.enable_stack_creation,
            execute: self.execute,
            output: self.output,
        }
    }
}

#[derive(clap::Args)]
struct ImportOpts {
    stack: String,
    template: PathBuf,
    /// The resources to import: [{ResourceType, LogicalResourceId,
    /// ResourceIdentifier}] (JSON or YAML).
    #[arg(long, value_name = "FILE")]
    resources: PathBuf,
    /// A parameter value, KEY=VALUE (repeatable).
    #[arg(long = "parameter", short = 'p')]
    parameters: Vec<String>,
    /// Keep the stack's current value of this parameter (repeatable).
    #[arg(long = "use-previous-value")]
    use_previous: Vec<String>,
    #[arg(long, num_args = 1..)]
    capabilities: Vec<String>,
}

impl ImportOpts {
    fn args(&self) -> stacks::ImportArgs<'_> {
        stacks::ImportArgs {
            stack: &self.stack,
            template: &self.template,
            resources: &self.resources,
            parameters: &self.parameters,
            use_previous: &self.use_previous,
            capabilities: &self.capabilities,
        }
    }
}

#[derive(clap::Args)]
struct PlanOpts {
    stack: String,
    /// Template file; without it, the stack's current template.
    template: Option<PathBuf>,
    /// A parameter value, KEY=VALUE (repeatable).
    #[arg(long = "parameter", short = 'p')]
    parameters: Vec<String>,
    /// Keep the stack's current value of this parameter (repeatable).
    #[arg(long = "use-previous-value")]
    use_previous: Vec<String>,
    /// The change set's name (default: plan-<random>).
    #[arg(long)]
    name: Option<String>,
    #[arg(long)]
    description: Option<String>,
    /// Also a change set for each nested stack the update modifies
    /// (IncludeNestedStacks), named `<name>-<Logical>`.
    #[arg(long)]
    include_nested: bool,
    /// A stack tag once executed, KEY=VALUE (repeatable; none keeps the
    /// stack's tags).
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// Acknowledge capabilities the template requires (CAPABILITY_IAM,
    /// CAPABILITY_NAMED_IAM, CAPABILITY_AUTO_EXPAND, or a provider's own).
    #[arg(long, num_args = 1..)]
    capabilities: Vec<String>,
    /// A HOT environment file (repeatable; later ones win).
    #[arg(long = "environment", short = 'e')]
    environments: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    output: OutputFormat,
    /// Move resources of registered types to each type's default
    /// version (they keep the version they were made with otherwise).
    #[arg(long)]
    upgrade_types: bool,
}

#[derive(clap::Args)]
struct UpdateOpts {
    stack: String,
    /// The new template (default: the stack's current one).
    template: Option<PathBuf>,
    /// A parameter value, KEY=VALUE (repeatable).
    #[arg(long = "parameter", short = 'p')]
    parameters: Vec<String>,
    /// Keep the stack's current value of this parameter (repeatable).
    #[arg(long = "use-previous-value")]
    use_previous: Vec<String>,
    /// Keep the template and parameters; still heal and fix drift.
    #[arg(long)]
    drift_only: bool,
    /// Move resources of registered types to each type's default
    /// version (they keep the version they were made with otherwise).
    #[arg(long)]
    upgrade_types: bool,
    /// Show the steps and what each phase would do; change nothing.
    #[arg(long)]
    preview: bool,
    /// Do not create added resources.
    #[arg(long)]
    skip_install: bool,
    /// Do not delete removed resources (they leave the stack, left in place).
    #[arg(long)]
    skip_uninstall: bool,
    /// Do not reinstall resources whose changes cannot be applied in place.
    #[arg(long)]
    skip_reinstall: bool,
    /// Do not check status or heal unhealthy resources.
    #[arg(long)]
    skip_heal: bool,
    /// Do not check drift (changed resources are updated from the template).
    #[arg(long)]
    skip_drift_check: bool,
    /// Failed deletes while uninstalling do not stop the update.
    #[arg(long)]
    ignore_failure: bool,
    /// The stack policy this update alone is checked against, instead of
    /// the stack's (a JSON file, as `cairn deploy` takes it).
    #[arg(long, value_name = "FILE")]
    stack_policy_during_update: Option<PathBuf>,
    /// For --preview.
    #[arg(long, value_enum, default_value_t)]
    output: OutputFormat,
}

impl DeployOpts {
    fn args(&self) -> stacks::DeployArgs<'_> {
        stacks::DeployArgs {
            stack: &self.stack,
            tags: &self.tags,
            template: &self.template,
            parameters: &self.parameters,
            disable_rollback: self.disable_rollback,
            on_failure: self.on_failure.as_deref(),
            use_previous: &self.use_previous,
            timeout_minutes: self.timeout_minutes,
            environments: &self.environments,
            capabilities: &self.capabilities,
            termination_protection: self.enable_termination_protection,
            stack_policy: self.stack_policy.as_deref(),
            stack_policy_during_update: self.stack_policy_during_update.as_deref(),
            rollback_configuration: self.rollback_configuration.as_deref(),
            notify: &self.notify,
            no_notify: self.no_notify,
            upgrade_types: self.upgrade_types,
        }
    }
}

impl PlanOpts {
    fn args(&self) -> changesets::PlanArgs<'_> {
        changesets::PlanArgs {
            stack: &self.stack,
            template: self.template.as_deref(),
            parameters: &self.parameters,
            use_previous: &self.use_previous,
            name: self.name.as_deref(),
            description: self.description.as_deref(),
            environments: &self.environments,
            include_nested: self.include_nested,
            output: self.output,
            capabilities: &self.capabilities,
            tags: &self.tags,
            upgrade_types: self.upgrade_types,
        }
    }
}

impl UpdateOpts {
    fn args(&self) -> reconcile::Args<'_> {
        reconcile::Args {
            stack: &self.stack,
            template: self.template.as_deref(),
            parameters: &self.parameters,
            use_previous: &self.use_previous,
            preview: self.preview,
            output: self.output,
            stack_policy_during_update: self.stack_policy_during_update.as_deref(),
            upgrade_types: self.upgrade_types,
            flags: cairn_core::engine::ReconcileFlags {
                drift_only: self.drift_only,
                skip_install: self.skip_install,
                skip_uninstall: self.skip_uninstall,
                skip_reinstall: self.skip_reinstall,
                skip_heal: self.skip_heal,
                skip_drift_check: self.skip_drift_check,
                ignore_failure: self.ignore_failure,
            },
        }
    }
}

fn load_config(path: Option<&PathBuf>) -> anyhow::Result<cairn_core::config::Config> {
    Ok(match path {
        Some(p) => cairn_core::config::Config::load(p)?,
        None => cairn_core::config::Config::default(),
    })
}

/// Logs (`tracing`) to stderr: a server always (`RUST_LOG`, default
/// `warn`: lease renewals that fail, takeovers, late custom-resource
/// answers), a command only when `RUST_LOG` is set (its output is the
/// events and the result). The plugin host's stderr is the plugin's.
/// As JSON (`--log-format json` or `[log] format = "json"`), each line
/// carries the fields of the spans it was written in: the API request
/// (`action`, `request_id`) and the stack operation (`stack`, `stack_id`,
/// `status`, `engine`).
fn init_logs(command: &Command, json: bool, telemetry: Option<&telemetry::Telemetry>) {
    use tracing_subscriber::prelude::*;
    use tracing_subscriber::Layer;
    if matches!(command, Command::PluginHost { .. }) {
        return;
    }
    let wanted = std::env::var("RUST_LOG").ok();
    let filter = match (command, wanted) {
        (_, Some(filter)) => Some(filter),
        (Command::Serve { .. }, None) => Some("warn".to_string()),
        (_, None) => None,
    };
    let logs = filter.map(|filter| {
        let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
        let layer = match json {
            true => layer
                .json()
                .with_current_span(true)
                .with_span_list(true)
                .boxed(),
            false => layer.with_ansi(console::Term::stderr().is_term()).boxed(),
        };
        layer.with_filter(tracing_subscriber::EnvFilter::new(filter))
    });
    // Cairn's own spans, whatever the logs show.
    let traces = telemetry.map(|t| {
        tracing_opentelemetry::layer()
            .with_tracer(t.tracer())
            .with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target("cairn", tracing::Level::INFO),
            )
    });
    let _ = tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .try_init();
}

/// The configuration's `[telemetry]` (or the OTEL_EXPORTER_OTLP_*
/// variables) started, for every command but the plugin host.
fn start_telemetry(cli: &Cli) -> anyhow::Result<Option<telemetry::Telemetry>> {
    if matches!(cli.command, Command::PluginHost { .. }) || cli.endpoint.is_some() {
        return Ok(None);
    }
    let config = cli
        .config
        .as_ref()
        .and_then(|p| cairn_core::config::Config::load(p).ok())
        .unwrap_or_default();
    telemetry::start(&config.telemetry)
}

/// Whether logs are JSON: the flag, else the configuration file's `[log]
/// format` (a file that cannot be read is reported by the command itself).
fn logs_as_json(cli: &Cli) -> bool {
    match cli.log_format {
        Some(f) => f == LogFormatArg::Json,
        None => cli
            .config
            .as_ref()
            .and_then(|p| cairn_core::config::Config::load(p).ok())
            .is_some_and(|c| c.log.format == cairn_core::config::LogFormat::Json),
    }
}

async fn run(cli: Cli, telemetry: Option<&telemetry::Telemetry>) -> anyhow::Result<()> {
    init_logs(&cli.command, logs_as_json(&cli), telemetry);
    if let Command::PluginHost { path, sha256 } = &cli.command {
        use cairn_plugin::process::{serve_stdio, MAGIC_COOKIE, MAGIC_COOKIE_ENV};
        if std::env::var(MAGIC_COOKIE_ENV).as_deref() != Ok(MAGIC_COOKIE) {
            anyhow::bail!("cairn plugin-host is started by Cairn for a plugin with isolation = \"process\"; it is not meant to be run by hand");
        }
        return Ok(serve_stdio(path, sha256.as_deref()).await?);
    }
    if let Some(endpoint) = &cli.endpoint {
        return run_remote(endpoint, &cli.command).await;
    }
    let mut config = load_config(cli.config.as_ref())?;
    if let Some(dir) = &cli.data_dir {
        config.engine.data_dir = Some(dir.clone());
    }
    if let Command::Validate {
        template,
        parameters,
        environments,
        output,
    } = &cli.command
    {
        let state = stacks::state_path(cli.state.as_ref(), &config);
        return validate::run(&config, &state, template, parameters, environments, *output).await;
    }
    if let Command::Provider {
        command: ProviderCommand::New(a),
    } = &cli.command
    {
        return provider_new(a);
    }
    if let Command::Provider {
        command: ProviderCommand::Test(a),
    } = &cli.command
    {
        return provider_test(a, cli.state.as_ref(), &config).await;
    }
    if let Command::Provider {
        command: ProviderCommand::Package(a),
    } = &cli.command
    {
        return package::package(&config, a);
    }
    if let Command::Provider {
        command: ProviderCommand::Keygen(a),
    } = &cli.command
    {
        return package::keygen(a);
    }
    if let Command::Providers { type_name, output } = &cli.command {
        let state = stacks::state_path(cli.state.as_ref(), &config);
        return providers::run(&config, &state, type_name.as_deref(), *output).await;
    }
    if let Command::MigrateState { from, to } = &cli.command {
        return migrate::run(from, to).await;
    }
    let state = stacks::state_path(cli.state.as_ref(), &config);
    if let Command::Serve { listen } = &cli.command {
        return serve::run(serve::ServeArgs {
            config,
            state: &state,
            listen: listen.clone(),
            spans: telemetry.map(|t| t.counts.clone()),
        })
        .await;
    }
    // A signal is a quick write that must land even while the operation it
    // is for is abandoned: that operation's resume (by the next command)
    // counts it.
    let (engine, resumed) = if matches!(
        cli.command,
        Command::Signal { .. } | Command::Type { .. } | Command::Audit(_)
    ) {
        (stacks::open_without_resume(&config, &state).await?, false)
    } else {
        stacks::open(&config, &state).await?
    };
    // A command that runs an operation (or resumed one) sends the stack
    // notifications meanwhile, and what is left before it exits.
    let operates = resumed
        || matches!(
            cli.command,
            Command::Deploy(_)
                | Command::Delete { .. }
                | Command::ContinueRollback { .. }
                | Command::Rollback { .. }
                | Command::Import(_)
                | Command::Execute { .. }
                | Command::CancelUpdate { .. }
                | Command::Update(_)
        );
    if let Command::Type { command } = &cli.command {
        return types::run(&engine, command).await;
    }
    let notifying = operates.then(|| notifications::start(&engine));
    let outcome = run_command(&cli, &engine).await;
    if let Some(n) = notifying {
        n.finish().await;
    }
    outcome
}

/// Runs a command that needs the engine.
async fn run_command(
    cli: &Cli,
    engine: &std::sync::Arc<cairn_core::engine::Engine>,
) -> anyhow::Result<()> {
    let engine = engine.clone();
    match &cli.command {
        Command::Validate { .. }
        | Command::PluginHost { .. }
        | Command::Providers { .. }
        | Command::Provider { .. }
        | Command::Type { .. }
        | Command::MigrateState { .. }
        | Command::Serve { .. } => Ok(()),
        Command::Hooks { command } => hooks::run(&engine, command).await,
        Command::Audit(a) => audit::run(&engine, a).await,
        Command::Deploy(o) => stacks::deploy(&engine, o.args()).await,
        Command::Delete { stack, retain } => stacks::delete(&engine, stack, retain).await,
        Command::ContinueRollback { stack, skip } => {
            stacks::continue_rollback(&engine, stack, skip).await
        }
        Command::Rollback { stack } => stacks::rollback(&engine, stack).await,
        Command::Protect { stack, on, .. } => stacks::protect(&engine, stack, *on).await,
        Command::StackPolicy { stack, set, output } => {
            stacks::stack_policy(&engine, stack, set.as_deref(), *output).await
        }
        Command::Import(o) => stacks::import(&engine, o.args()).await,
        Command::Refactor(o) => refactor::run(&engine, o.args()).await,
        Command::Plan(o) => changesets::plan(&engine, o.args()).await,
        Command::Execute {
            stack,
            change_set,
            disable_rollback,
        } => changesets::execute(&engine, stack, change_set, *disable_rollback).await,
        Command::ChangeSets { stack, output } => changesets::list(&engine, stack, *output).await,
        Command::ChangeSet {
            stack,
            change_set,
            output,
        } => changesets::describe(&engine, stack, change_set, *output).await,
        Command::DeleteChangeSet { stack, change_set } => {
            changesets::delete(&engine, stack, change_set).await
        }
        Command::CancelUpdate { stack } => changesets::cancel_update(&engine, stack).await,
        Command::Signal {
            stack,
            resource,
            unique_id,
            status,
            reason,
        } => {
            engine
                .signals()
                .signal_resource(stack, resource, unique_id, status, reason.clone())
                .await?;
            println!("{status} signal {unique_id} kept for {resource} of stack {stack}");
            Ok(())
        }
        Command::History { stack, output } => changesets::history(&engine, stack, *output).await,
        Command::List { output } => stacks::list(&engine, *output).await,
        Command::Describe { stack, output } => stacks::describe(&engine, stack, *output).await,
        Command::Events {
            stack,
            nested,
            output,
        } => stacks::events(&engine, stack, *nested, *output).await,
        Command::Resources { stack, output } => stacks::resources(&engine, stack, *output).await,
        Command::Outputs { stack, output } => stacks::outputs(&engine, stack, *output).await,
        Command::Template {
            stack,
            expanded,
            stage,
            output,
        } => {
            let processed = *expanded || stage.as_deref() == Some("processed");
            stacks::template(&engine, stack, processed, *output).await
        }
        Command::Drift {
            stack,
            resources,
            last,
            output,
        } => drift::run(&engine, stack, resources, *last, *output).await,
        Command::Update(o) => reconcile::run(&engine, o.args()).await,
    }
}

/// `cairn provider new`: the project, written for the language and
/// transport asked for.
fn provider_new(a: &ProviderNewArgs) -> anyhow::Result<()> {
    let kind = match (a.lang, a.transport) {
        _ if a.kind == ProjectKind::Hook => match (a.lang, a.transport) {
            (Lang::Rust, None | Some(Transport::Dylib)) => scaffold::Kind::RustHook,
            (Lang::Rust, Some(Transport::Webhook)) => anyhow::bail!("a hook served by a webhook is an AWS::CloudFormation::LambdaHook resource (README, Hooks): cairn provider new --kind hook makes a Rust plugin; leave out --transport"),
            (Lang::Python | Lang::Typescript, _) => anyhow::bail!("a Python or TypeScript hook is a Lambda hook function behind the SDK's Lambda adapter, named by an AWS::CloudFormation::LambdaHook (README, Hooks); cairn provider new --kind hook makes a Rust plugin: give --lang rust"),
        },
        (Lang::Rust, Some(Transport::Dylib)) => scaffold::Kind::RustDylib,
        (Lang::Rust, Some(Transport::Webhook)) => scaffold::Kind::RustWebhook,
        (Lang::Rust, None) => {
            anyhow::bail!("a Rust provider is a plugin or a webhook handler: give --transport dylib or --transport webhook")
        }
        (Lang::Python, None | Some(Transport::Webhook)) => scaffold::Kind::Python,
        (Lang::Python, Some(Transport::Dylib)) => {
            anyhow::bail!("a Python provider is a webhook handler: leave out --transport or give --transport webhook")
        }
        (Lang::Typescript, None | Some(Transport::Webhook)) => scaffold::Kind::TypeScript,
        (Lang::Typescript, Some(Transport::Dylib)) => {
            anyhow::bail!("a TypeScript provider is a webhook handler: leave out --transport or give --transport webhook")
        }
    };
    let dir = scaffold::run(&scaffold::Args {
        name: &a.name,
        kind,
        dir: a.dir.as_deref(),
        type_name: a.type_name.as_deref(),
        sdk_path: a.sdk_path.as_deref(),
        python_sdk: a.python_sdk.as_deref(),
        typescript_sdk: a.typescript_sdk.as_deref(),
        port: a.port,
    })?;
    println!(
        "wrote {}: see its README.md for the commands that build, test and deploy it",
        dir.display()
    );
    Ok(())
}

/// `cairn provider test`: the contract tests against a type, a plugin or a
/// handler.
async fn provider_test(
    a: &ProviderTestArgs,
    state: Option<&PathBuf>,
    config: &cairn_core::config::Config,
) -> anyhow::Result<()> {
    let under = match (&a.type_name, &a.plugin, &a.webhook) {
        (Some(t), _, _) => provider_test::Under::Type(t.clone()),
        (_, Some(path), _) => provider_test::Under::Plugin {
            path: path.clone(),
            isolation: if a.in_process {
                cairn_core::config::Isolation::None
            } else {
                cairn_core::config::Isolation::Process
            },
            settings: a
                .settings
                .as_deref()
                .map(provider_test::read_settings)
                .transpose()?,
        },
        (_, _, Some(url)) => provider_test::Under::Webhook {
            url: url.clone(),
            secret: a.secret.clone(),
            drift: a.drift,
            read: a.read,
        },
        _ => anyhow::bail!("give --type, --plugin or --webhook"),
    };
    let state = stacks::state_path(state, config);
    let data_dir = stacks::data_dir(config, &state);
    provider_test::run(
        stacks::with_local_ca(config, &state),
        provider_test::Args {
            under,
            properties: a.properties.as_deref(),
            updates: &a.updates,
            timeout_seconds: a.timeout_seconds,
            output: a.output,
            junit: a.junit.as_deref(),
            data_dir,
        },
    )
    .await
}

/// A command against a server (`--endpoint`).
async fn run_remote(endpoint: &str, command: &Command) -> anyhow::Result<()> {
    use remote::Command as R;
    let remote_command = match command {
        Command::Deploy(o) => R::Deploy(o.args()),
        Command::Delete { stack, retain } => R::Delete { stack, retain },
        Command::ContinueRollback { stack, skip } => R::ContinueRollback { stack, skip },
        Command::Rollback { stack } => R::Rollback { stack },
        Command::Protect { stack, on, .. } => R::Protect { stack, on: *on },
        Command::Import(o) => R::Import(o.args()),
        Command::Refactor(o) => R::Refactor(o.args()),
        Command::StackPolicy { stack, set, output } => R::StackPolicy {
            stack,
            set: set.as_deref(),
            output: *output,
        },
        Command::CancelUpdate { stack } => R::CancelUpdate { stack },
        Command::Signal {
            stack,
            resource,
            unique_id,
            status,
            reason,
        } => R::Signal {
            stack,
            resource,
            unique_id,
            status,
            reason: reason.as_deref(),
        },
        Command::List { output } => R::List(*output),
        Command::Describe { stack, output } => R::Describe(stack, *output),
        Command::Events {
            stack,
            nested: false,
            output,
        } => R::Events(stack, *output),
        Command::Events { nested: true, .. } => {
            anyhow::bail!("cairn --endpoint events does not follow nested stacks yet: run it on each nested stack (cairn list shows them with their ParentId)")
        }
        Command::Resources { stack, output } => R::Resources(stack, *output),
        Command::Outputs { stack, output } => R::Outputs(stack, *output),
        Command::Template {
            stack,
            expanded,
            stage,
            output,
        } => R::Template(
            stack,
            *expanded || stage.as_deref() == Some("processed"),
            *output,
        ),
        Command::Validate {
            template, output, ..
        } => R::Validate(template, *output),
        Command::History { stack, output } => R::History(stack, *output),
        Command::Audit(a) => R::Audit(a),
        Command::Update(o) => R::Update(o.args()),
        Command::Type { command } => R::Type(command),
        Command::Plan(o) => R::Plan(o.args()),
        Command::Execute {
            stack,
            change_set,
            disable_rollback,
        } => R::Execute {
            stack,
            change_set,
            disable_rollback: *disable_rollback,
        },
        Command::ChangeSets { stack, output } => R::ChangeSets(stack, *output),
        Command::ChangeSet {
            stack,
            change_set,
            output,
        } => R::ChangeSet(stack, change_set, *output),
        Command::DeleteChangeSet { stack, change_set } => R::DeleteChangeSet(stack, change_set),
        Command::Drift {
            stack,
            resources,
            last: false,
            output,
        } => R::Drift {
            stack,
            only: resources,
            output: *output,
        },
        _ => {
            return Err(anyhow::anyhow!(
                "this command does not run with --endpoint: every stack and type command does except `drift --last`; `providers`, `provider`, `hooks check` and `serve` are about this machine's state"
            ))
        }
    };
    remote::run(endpoint, remote_command).await
}

/// A write to a closed stdout (`cairn events S --output json | head -1`)
/// ends the command quietly with exit status 0: what the reader wanted it
/// has, as with every Unix tool that stops when its reader does. Rust
/// ignores SIGPIPE (sockets and the plugin hosts' pipes rely on that), so
/// `println!` panics and a `write` returns `BrokenPipe` instead: this hook
/// turns that one panic into the quiet end, and [`closed_stdout`] finds
/// the error.
fn end_quietly_on_a_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if text.starts_with("failed printing to stdout") && text.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

/// Whether a command's error is its stdout closed under it (a JSON
/// document streamed to `head`): then it ends quietly, with status 0.
fn closed_stdout(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| {
                cause
                    .downcast_ref::<serde_json::Error>()
                    .and_then(serde_json::Error::io_error_kind)
            })
            == Some(std::io::ErrorKind::BrokenPipe)
    })
}

/// The `cairn` command: parses the arguments, runs the command on a
/// tokio runtime, prints the error and exits 1 on failure.
pub fn main() -> ExitCode {
    end_quietly_on_a_closed_stdout();
    let cli = Cli::parse();
    // Traces are exported from a thread of the process's own, started
    // before the runtime (its HTTP client is a blocking one).
    let telemetry = match start_telemetry(&cli) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let result = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(run(cli, telemetry.as_ref())),
        Err(e) => Err(anyhow::anyhow!("cannot start the async runtime: {e}")),
    };
    if let Some(t) = &telemetry {
        t.flush();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if closed_stdout(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
