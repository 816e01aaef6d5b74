//! The `capvault` command line: parses the arguments ([`capvault::app::cli`]), sets up logging
//! (stderr only: stdout belongs to the MCP protocol) and hands each command to its module in
//! [`capvault::app`]. `serve` and `call` are prepared before the async runtime starts.

use std::pin::Pin;
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

use capvault::app::call::PreparedCall;
use capvault::app::cli::{Cli, Command, ModelCommand};
use capvault::app::serve::Prepared;
use capvault::vault::host::Host;

/// Caps glibc's malloc at two arenas (it would create up to eight per core, one per thread that
/// contends). The server's heap is mostly the vault model and index, built once by a handful of
/// threads and kept: with many arenas, the memory each build thread frees stays reserved in its
/// own arena. Measured at 100k notes: peak RSS 1,236 -> 1,166 MB, resident after the build
/// 1,194 -> 1,084 MB, build time unchanged (docs/performance.md). Called before any thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_malloc_arenas() {
    // SAFETY: mallopt only sets a tuning parameter of the allocator; it is called once, before
    // this process starts any other thread.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}

fn main() -> ExitCode {
    limit_malloc_arenas();
    // rustls's `ring` provider for every TLS use (the HTTPS listener and the issuer's keys
    // name it too).
    #[cfg(any(feature = "http", feature = "net"))]
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse_checked();
    if matches!(cli.command, Command::PdfWorker) {
        // Before anything starts a thread: the worker forks.
        return capvault::engine::pdf::worker_main();
    }
    if prints_to_a_reader(&cli.command) {
        end_quietly_on_a_closed_pipe();
    }
    // `call` prints one result: its log says only what went wrong (CAPVAULT_LOG says more).
    let default_log = if matches!(cli.command, Command::Call(_)) {
        "capvault=warn"
    } else {
        "capvault=info"
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        // A log line that cannot be written (stderr closed, or a full disk under it) is lost,
        // never reported with `eprintln!`, which panics the thread that logged: a warning
        // during the first build stopped it for good.
        .log_internal_errors(false)
        .with_env_filter(
            EnvFilter::try_from_env("CAPVAULT_LOG").unwrap_or_else(|_| EnvFilter::new(default_log)),
        )
        .init();
    // `serve` opens every folder, reads every credential and binds its listener here, then
    // applies the sandbox, all before the runtime starts a thread.
    // The one claim of the authority over the user's own files by host path (the config,
    // token, TLS and model files, clients' configs): passed to each command that needs it.
    let host = Host::claim();
    let job = match job(host, cli.command) {
        Ok(job) => job,
        Err(e) => return failure(&e),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("capvault: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(job);
    // Everything that matters has finished (the engine is shut down, replies are written); a
    // read of stdin may still be blocked on a thread of the runtime after a signal, and a plain
    // drop of the runtime would wait for it forever.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => failure(&e),
    }
}

/// Whether `command` prints for a reader (a terminal or a pipe such as `| head`), so that a
/// reader that stops early should end it by SIGPIPE. Not `serve` (its stdout is the protocol
/// and the client's leaving is handled), not `doctor` (the server it starts may close its pipe,
/// which is a finding) and not `model fetch` (a connection closed under a vectored write must
/// be an error, not a signal): those two write with `writeln!`, and [`failure`] ends them
/// quietly on a broken pipe.
fn prints_to_a_reader(command: &Command) -> bool {
    !matches!(
        command,
        Command::Serve(_)
            | Command::Doctor { .. }
            | Command::Model {
                command: ModelCommand::Fetch { .. }
            }
    )
}

/// A closed stdout (`capvault install --list | head -3`) ends the process as it ends other
/// command-line tools: by SIGPIPE, silently, instead of an error about a broken pipe.
#[cfg(unix)]
fn end_quietly_on_a_closed_pipe() {
    // SAFETY: restores the default action of one signal (the Rust runtime set it to ignore);
    // called before any thread starts, with a valid handler constant.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn end_quietly_on_a_closed_pipe() {}

/// Reports `e` on stderr and returns the failure code, or ends quietly with success when the
/// reader of stdout has gone. Each cause is shown once: a message that already ends with its
/// cause's text (the vault's "cannot open vault folder X: <OS error>") does not repeat it.
fn failure(e: &anyhow::Error) -> ExitCode {
    let closed = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    });
    if closed {
        return ExitCode::SUCCESS;
    }
    eprintln!("capvault: {}", error_text(e));
    ExitCode::FAILURE
}

/// `e` and its causes on one line, without a cause the message before it already shows.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if text.ends_with(&part) || text.contains(&format!("{part}: ")) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// A command's work for the runtime to run.
type Job = Pin<Box<dyn Future<Output = anyhow::Result<()>>>>;

/// `command` as a job for the runtime. Only `serve` and `call` do work here, before the runtime
/// starts a thread: they open every folder, read every credential and (`serve`) bind the
/// listener and apply the sandbox, which then confines every thread the runtime starts. The
/// others start when the runtime runs them.
fn job(host: Host, command: Command) -> anyhow::Result<Job> {
    #[cfg(feature = "http")]
    use capvault::app::tokens;
    use capvault::app::{install, model, state};
    Ok(match command {
        Command::Serve(args) => Box::pin(Prepared::new(&host, args)?.serve()),
        Command::Call(args) => Box::pin(PreparedCall::new(&host, args)?.run()),
        Command::Demo { full } => {
            let show = if full {
                capvault::demo::Show::Full
            } else {
                capvault::demo::Show::Brief
            };
            Box::pin(capvault::demo::run(Box::new(std::io::stdout()), show))
        }
        Command::Install(args) => Box::pin(async move { install::install(&host, args) }),
        Command::Uninstall {
            client,
            name,
            dry_run,
        } => Box::pin(async move { install::uninstall(&host, &client, &name, dry_run) }),
        Command::Bundle { out, level } => {
            Box::pin(async move { install::bundle(&host, &out, level) })
        }
        #[cfg(feature = "http")]
        Command::Token { command } => Box::pin(async move { tokens::token(&host, command) }),
        #[cfg(feature = "oauth")]
        Command::Tokens { command } => Box::pin(async move { tokens::tokens(&host, command) }),
        #[cfg(feature = "oauth")]
        Command::Passwd { vault, state_dir } => {
            Box::pin(async move { capvault::app::oauth::passwd(&vault, state_dir.as_deref()) })
        }
        #[cfg(not(feature = "http"))]
        Command::Token { .. } => return Err(capvault::app::not_built("http", "capvault token")),
        #[cfg(not(feature = "oauth"))]
        Command::Tokens { .. } => return Err(capvault::app::not_built("oauth", "capvault tokens")),
        #[cfg(not(feature = "oauth"))]
        Command::Passwd { .. } => return Err(capvault::app::not_built("oauth", "capvault passwd")),
        Command::Confirm {
            vault,
            code,
            state_dir,
        } => Box::pin(async move {
            capvault::app::confirm::run(&vault, code.as_deref(), state_dir.as_deref())
        }),
        Command::State {
            vault,
            adopt,
            force,
            state_dir,
        } => Box::pin(
            async move { state::run(&vault, adopt.as_deref(), force, state_dir.as_deref()) },
        ),
        Command::Model { command } => Box::pin(model::run(host, command)),
        Command::Doctor { vault } => Box::pin(async move { install::doctor(&host, &vault).await }),
        Command::PdfWorker => anyhow::bail!("pdf-worker runs before the runtime starts"),
    })
}
