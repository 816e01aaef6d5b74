//! Shared harness for the integration tests: fixture trees on disk and a real rmcp client
//! talking to the real `capvault` binary over stdio.
//!
//! Fixtures are built with `std::fs` by the trusted test harness; the product code never does.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, dead_code)]

#[cfg(feature = "oauth")]
pub mod oauth;

use std::path::{Path, PathBuf};

use rmcp::model::{CallToolRequestParams, CallToolResult, ReadResourceRequestParams};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceError, ServiceExt};
use serde_json::{Map, Value};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_capvault");

/// The longest a server may take to exit once its input ends (or it is told to stop): it saves
/// its index cache first. Past it the test fails, naming the server that hung.
pub const EXIT_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// `capvault` with the tests' environment: caches under `target/` ([`test_cache_home`]), no user
/// config, a state folder of the tests' own, warnings logged. Add arguments and what a test
/// changes.
pub fn capvault() -> std::process::Command {
    let mut cmd = std::process::Command::new(BIN);
    cmd.env("CAPVAULT_LOG", "capvault=warn")
        // The default index cache goes under the user's cache folder: keep the tests' apart.
        .env("XDG_CACHE_HOME", test_cache_home())
        // A developer's own ~/.config/capvault/config.toml must not change what tests see.
        .env("XDG_CONFIG_HOME", test_cache_home().join("no-config"))
        // Nor the developer's (or CI machine's) own state folder: history and grants stay here.
        .env("XDG_STATE_HOME", test_cache_home().join("state"))
        // Nor what the shell that runs the tests has set for capvault.
        .env_remove("CAPVAULT_WRITE")
        .env_remove("CAPVAULT_TOKEN");
    cmd
}

/// `capvault serve <vault> <extra>` with the tests' environment ([`capvault`]), to spawn.
pub fn serve_command(vault: &Path, extra: &[&str]) -> tokio::process::Command {
    let mut cmd = capvault();
    cmd.arg("serve").arg(vault).args(extra);
    cmd.into()
}

/// `capvault <args>` run to its end with the tests' environment: its output.
pub fn run(args: &[&str]) -> std::process::Output {
    capvault().args(args).output().expect("run capvault")
}

/// Polls `check` (every 50 ms) until it gives a value; fails the test, naming `what`, when
/// `within` passes first. For what a test waits on: it goes on as soon as the condition holds,
/// however slow or fast the machine.
pub async fn poll<T>(
    what: &str,
    within: std::time::Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let until = std::time::Instant::now() + within;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            std::time::Instant::now() < until,
            "{what}: not within {within:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Stderr lines of a server, gathered as they come.
pub type Log = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// Gathers the lines of `stream` into a [`Log`] until it ends.
pub fn gather_lines(stream: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> Log {
    use tokio::io::AsyncBufReadExt;
    let log = Log::default();
    let keep = std::sync::Arc::clone(&log);
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            keep.lock().unwrap().push(line);
        }
    });
    log
}

/// A client connected to `capvault serve <vault>` running as a child process.
pub struct Server {
    pub client: RunningService<RoleClient, ()>,
    /// The server process, when it serves over HTTP.
    pub http: Option<HttpChild>,
    /// The server process over stdio: [`Server::stop`] waits for its exit.
    process: Option<tokio::process::Child>,
}

/// `capvault serve --transport http` running as a child process.
pub struct HttpChild {
    pub child: tokio::process::Child,
    /// The `/mcp` URL it printed.
    pub url: String,
    /// Its stderr lines so far (the access log among them).
    pub stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl HttpChild {
    /// Spawns `capvault serve <vault> --transport http --listen 127.0.0.1:0 <extra>` with
    /// `env`, and waits for the line that gives its URL.
    pub async fn spawn(vault: &Path, extra: &[&str], env: &[(&str, &str)]) -> HttpChild {
        use tokio::io::AsyncBufReadExt;
        install_tls_provider();
        let mut cmd = serve_command(vault, &["--transport", "http", "--listen", "127.0.0.1:0"]);
        cmd.args(extra);
        cmd.env("CAPVAULT_LOG", "capvault=info");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn capvault");
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let url = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                stderr.lock().unwrap().push(line.clone());
                if let Some(url) = line.strip_prefix("capvault: serving over HTTP at ") {
                    return url.to_owned();
                }
            }
            panic!(
                "capvault exited without serving: {:?}",
                stderr.lock().unwrap()
            );
        })
        .await
        .expect("capvault did not start serving within 30 s");
        let keep = std::sync::Arc::clone(&stderr);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                keep.lock().unwrap().push(line);
            }
        });
        HttpChild { child, url, stderr }
    }

    /// `host:port` of the listener.
    pub fn authority(&self) -> String {
        let rest = self.url.split("://").nth(1).unwrap();
        rest.split('/').next().unwrap().to_owned()
    }

    /// An rmcp client connected over Streamable HTTP, with `token` as its bearer token.
    pub async fn connect(&self, token: Option<&str>) -> RunningService<RoleClient, ()> {
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url.clone());
        if let Some(t) = token {
            config = config.auth_header(t.to_owned());
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        ().serve(transport).await.expect("MCP handshake over HTTP")
    }

    /// Sends SIGTERM and waits (at most 30 s) for the exit status.
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("running") as i32;
        let pid = rustix::process::Pid::from_raw(pid).expect("a pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
        tokio::time::timeout(EXIT_WITHIN, self.child.wait())
            .await
            .expect("capvault did not exit within 30 s of SIGTERM")
            .unwrap()
    }
}

/// Makes rustls's `ring` provider the process default: reqwest (rmcp's HTTP client, the
/// tests' own) is built without one of its own, as capvault builds it.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// What a tool call returned, flattened for assertions.
#[derive(Debug, Clone)]
pub struct Reply {
    pub is_error: bool,
    /// `structuredContent`, or Null.
    pub structured: Value,
    /// All text content joined.
    pub text: String,
    /// The whole result as JSON (to scan for leaks).
    pub raw: String,
    /// An error result's `_meta["capvault/error"]` (`{code, message, param?, suggestions?}`), or
    /// Null.
    pub error: Value,
}

impl Server {
    /// Spawns the binary on `vault` with extra arguments.
    pub async fn start_with(vault: &Path, extra: &[&str]) -> Server {
        Self::from_command(serve_command(vault, extra)).await
    }

    /// Spawns the binary on `vault` serving over HTTP (with extra arguments) and connects an
    /// rmcp client to it with no token.
    pub async fn start_http(vault: &Path, extra: &[&str]) -> Server {
        let child = HttpChild::spawn(vault, extra, &[]).await;
        let client = child.connect(None).await;
        Server {
            client,
            http: Some(child),
            process: None,
        }
    }

    /// Spawns `cmd` (a `capvault serve` command line) and connects to it over its stdin and
    /// stdout; its stderr goes where `cmd` says (the test's, by default).
    pub async fn from_command(mut cmd: tokio::process::Command) -> Server {
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn capvault");
        let stdio = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let client = handshake(stdio).await;
        Server {
            client,
            http: None,
            process: Some(child),
        }
    }

    /// [`Server::from_command`] with the server's stderr gathered line by line.
    pub async fn from_command_logged(mut cmd: tokio::process::Command) -> (Server, Log) {
        cmd.stderr(std::process::Stdio::piped());
        let mut server = Self::from_command(cmd).await;
        let stderr = server.process.as_mut().and_then(|c| c.stderr.take());
        (server, gather_lines(stderr.expect("a piped stderr")))
    }

    /// A client of a server the test runs itself (over HTTP, say): [`Server::stop`] ends only
    /// the session.
    pub fn of_client(client: RunningService<RoleClient, ()>) -> Server {
        Server {
            client,
            http: None,
            process: None,
        }
    }

    /// The server process's id (to read its memory in `/proc`), over stdio.
    pub fn pid(&self) -> u32 {
        self.process
            .as_ref()
            .and_then(tokio::process::Child::id)
            .expect("a server process over stdio, still running")
    }

    /// Spawns the binary on `vault` (stdio) in a process where `openat2` fails with ENOSYS
    /// ([`deny_openat2`]).
    #[cfg(target_os = "linux")]
    pub async fn start_without_openat2(vault: &Path, extra: &[&str]) -> Server {
        let mut cmd = serve_command(vault, extra);
        deny_openat2(cmd.as_std_mut());
        Self::from_command(cmd).await
    }

    pub async fn start(vault: &Path) -> Server {
        Self::start_with(vault, &[]).await
    }

    /// Calls a tool with JSON object arguments.
    pub async fn call(&self, tool: &str, args: Value) -> Reply {
        reply(call_tool(&self.client, tool, args).await)
    }

    /// Calls a tool and expects success.
    pub async fn ok(&self, tool: &str, args: Value) -> Value {
        let r = self.call(tool, args.clone()).await;
        assert!(!r.is_error, "{tool} {args} failed: {}", r.text);
        r.structured
    }

    /// Every page of `tool` from `args` on, following `next_cursor` until there is none (at
    /// most 1,000 pages: a cursor that never ends fails the test).
    pub async fn pages(&self, tool: &str, args: Value) -> Vec<Value> {
        let mut pages = Vec::new();
        let mut next = args.clone();
        loop {
            assert!(pages.len() < 1_000, "{tool} {args}: more than 1,000 pages");
            let page = self.ok(tool, next.clone()).await;
            let cursor = page
                .get("next_cursor")
                .and_then(Value::as_str)
                .map(str::to_owned);
            pages.push(page);
            match cursor {
                Some(c) => next["cursor"] = Value::String(c),
                None => return pages,
            }
        }
    }

    /// Calls a tool and expects an isError reply; returns its message.
    pub async fn err(&self, tool: &str, args: Value) -> String {
        let r = self.call(tool, args.clone()).await;
        assert!(
            r.is_error,
            "{tool} {args} should fail but returned {}",
            r.raw
        );
        r.text
    }

    /// Reads a resource; Err is the JSON-RPC error's message and code.
    pub async fn read_resource(&self, uri: &str) -> Result<String, (i32, String)> {
        let read = self
            .client
            .read_resource(ReadResourceRequestParams::new(uri.to_owned()));
        match tokio::time::timeout(CALL_TIMEOUT, read)
            .await
            .unwrap_or_else(|_| panic!("resources/read {uri}: no answer (a hang)"))
        {
            Ok(r) => Ok(serde_json::to_string(&r).unwrap()),
            Err(ServiceError::McpError(e)) => Err((e.code.0, e.message.to_string())),
            Err(other) => panic!("resources/read {uri}: unexpected failure {other:?}"),
        }
    }

    /// Polls `vault_info` until the search index is ready (at most 60 s); returns its `index`.
    pub async fn wait_index_ready(&self) -> Value {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let info = self.ok("vault_info", serde_json::json!({})).await;
            // The index is ready first; the counts appear once the model is built too.
            if info["index"]["state"] == "ready" && !info["notes"].is_null() {
                return info["index"].clone();
            }
            assert!(
                std::time::Instant::now() < until,
                "index not ready after 60 s: {info}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Calls `tool` until `done` accepts its reply (at most `secs` seconds); returns that reply.
    pub async fn eventually(
        &self,
        secs: u64,
        tool: &str,
        args: Value,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let r = self.ok(tool, args.clone()).await;
            if done(&r) {
                return r;
            }
            assert!(
                std::time::Instant::now() < until,
                "{tool} {args}: still not as expected after {secs} s: {r}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Ends the session and, over stdio, waits for the server to exit (the end of its input
    /// is its cue to save its index cache and go): its exit status. A server still running
    /// after [`EXIT_WITHIN`] is killed and the test fails. Over HTTP the server is left to its
    /// owner ([`HttpChild::terminate`], or its drop).
    pub async fn stop(self) -> Option<std::process::ExitStatus> {
        let Server {
            client,
            http: _,
            process,
        } = self;
        let _ = client.cancel().await;
        let mut child = process?;
        match tokio::time::timeout(EXIT_WITHIN, child.wait()).await {
            Ok(status) => Some(status.expect("the server's exit status")),
            Err(_) => {
                let _ = child.kill().await;
                panic!(
                    "capvault (pid {:?}) did not exit within {EXIT_WITHIN:?} of its input's end; killed",
                    child.id()
                );
            }
        }
    }
}

fn reply(result: CallToolResult) -> Reply {
    let raw = serde_json::to_string(&result).unwrap();
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    let error = serde_json::from_str::<Value>(&raw)
        .ok()
        .map(|v| v["_meta"]["capvault/error"].clone())
        .unwrap_or(Value::Null);
    Reply {
        error,
        is_error: result.is_error == Some(true),
        structured: result.structured_content.unwrap_or(Value::Null),
        text,
        raw,
    }
}

/// The `XDG_CACHE_HOME` the spawned servers get, so their default index cache stays under
/// `target/`.
pub fn test_cache_home() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("xdg-cache")
}

/// Writes `files` (path, content) under `root`, creating folders.
pub fn write_tree(root: &Path, files: &[(impl AsRef<str>, impl AsRef<str>)]) {
    for (path, content) in files {
        let (path, content) = (path.as_ref(), content.as_ref());
        let full = root.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
    }
}

/// Creates a symlink `link` (relative to `root`) pointing at `target` (verbatim).
pub fn symlink(root: &Path, link: &str, target: impl AsRef<Path>) {
    let full = root.join(link);
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, full).unwrap();
}

/// A snapshot of every file under `root` (path, bytes), for "unchanged" assertions.
pub fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        entries.sort_by_key(|e| e.path());
        for e in entries {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() {
                out.push((e.path(), std::fs::read(e.path()).unwrap()));
            } else if ft.is_symlink() {
                out.push((
                    e.path(),
                    std::fs::read_link(e.path())
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                ));
            }
        }
    }
    out
}

/// Copies the files under `from` into `to` (symlinks left out), for tests that change a vault.
/// The first file named `name` under `root` (a state folder's `audit.jsonl`, say).
pub fn find_file(root: &Path, name: &str) -> PathBuf {
    snapshot(root)
        .into_iter()
        .map(|(p, _)| p)
        .find(|p| p.file_name().is_some_and(|n| n == name))
        .unwrap_or_else(|| panic!("no {name} under {}", root.display()))
}

pub fn copy_tree(from: &Path, to: &Path) {
    for (path, bytes) in snapshot(from) {
        let rel = path.strip_prefix(from).unwrap();
        let dest = to.join(rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        if std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink()
        {
            continue;
        }
        std::fs::write(dest, bytes).unwrap();
    }
}

/// Where the shared real vaults live, if present. Under `CAPVAULT_REQUIRE_SHARED_VAULTS=1`
/// (set by CI) a missing vault fails the test instead of skipping it.
pub fn shared_vault(name: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/vaults")
        .join(name);
    let present = p.is_dir();
    assert!(
        present || std::env::var_os("CAPVAULT_REQUIRE_SHARED_VAULTS").is_none_or(|v| v != "1"),
        "../shared/vaults/{name} is absent and CAPVAULT_REQUIRE_SHARED_VAULTS=1"
    );
    present.then_some(p)
}

/// The sentence-transformers folder CI imports the static model from
/// (`CAPVAULT_TRANSFORMER_MODEL`); see [`model_folder`].
pub fn transformer_dir(what: &str) -> Option<PathBuf> {
    model_folder("CAPVAULT_TRANSFORMER_MODEL", what)
}

/// The model folder named by the environment variable `var`, or `None` (and a note naming
/// `what`, which is not run) when it is not set. Under `CAPVAULT_REQUIRE_MODEL=1` (set by CI)
/// it must be.
pub fn model_folder(var: &str, what: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            assert!(
                std::env::var_os("CAPVAULT_REQUIRE_MODEL").is_none_or(|v| v != "1"),
                "CAPVAULT_REQUIRE_MODEL=1 but {var} is not set"
            );
            eprintln!("{what}: no {var}, not run");
            None
        }
    }
}

/// Makes `cmd`'s process (and everything it runs) see `openat2` fail with ENOSYS, through a
/// seccomp filter installed between fork and exec: cap-std then takes its component-by-component
/// fallback, as on kernels before 5.6 and under some container profiles. Linux only.
#[cfg(target_os = "linux")]
pub fn deny_openat2(cmd: &mut std::process::Command) {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
    use std::os::unix::process::CommandExt;
    let arch: TargetArch = std::env::consts::ARCH
        .try_into()
        .expect("a seccomp architecture");
    let filter = SeccompFilter::new(
        [(libc::SYS_openat2, vec![])].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .expect("the filter");
    let program: BpfProgram = filter.try_into().expect("a BPF program");
    // SAFETY: the closure only makes the prctl and seccomp system calls (no allocation on the
    // success path), which is allowed between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            seccompiler::apply_filter(&program)
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::PermissionDenied))
        });
    }
}

/// Word groups of the tiny static model [`write_model`] writes: words of one group embed in one
/// direction.
pub const GROUPS: &[&[&str]] = &[
    &["dog", "puppy", "canine", "hound", "pets", "pet"],
    &["bicycle", "cycling", "bike", "pedal", "wheels"],
    &["bread", "baking", "dough", "oven", "yeast", "loaf"],
    &["secret", "hidden", "private"],
];

/// Writes a static model folder for [`GROUPS`] under `dir`.
#[cfg(feature = "semantic")]
pub fn write_model(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let dims = GROUPS.len() + 1;
    let mut vocab = serde_json::Map::new();
    vocab.insert("[unk]".into(), serde_json::json!(0));
    let mut table = vec![0f32; dims];
    table[dims - 1] = 1e-3;
    for (g, group) in GROUPS.iter().enumerate() {
        for w in *group {
            vocab.insert((*w).to_owned(), serde_json::json!(vocab.len()));
            let mut row = vec![0f32; dims];
            row[g] = 1.0;
            table.extend(row);
        }
    }
    let tokenizer = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": {"type": "Lowercase"}, "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[unk]"}
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
    std::fs::write(
        dir.join("config.json"),
        serde_json::json!({"model_type": "model2vec", "hidden_dim": dims, "name": "groups-test",
               "revision": "r1"})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("model.safetensors"),
        capvault::semantic::model::safetensors_bytes(&table, dims).unwrap(),
    )
    .unwrap();
}

/// Calls `tool` with `args` (a JSON object) on any connected client (whatever its handler):
/// the result as it came (tool errors included); a protocol error panics.
pub async fn call_tool(
    client: &rmcp::service::Peer<RoleClient>,
    tool: &str,
    args: Value,
) -> CallToolResult {
    let args: Map<String, Value> = match args {
        Value::Object(m) => m,
        _ => panic!("arguments must be an object"),
    };
    let call = client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args));
    tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{tool}: no answer within {} s (a hang)",
                CALL_TIMEOUT.as_secs()
            )
        })
        .unwrap_or_else(|e| panic!("{tool}: protocol error {e:?}"))
}

/// The longest a test waits for one answer of the server: a hang fails the test that met it,
/// named, instead of stalling the whole run until CI gives up.
pub const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(180);

/// The MCP handshake with a server, bounded by [`CALL_TIMEOUT`].
pub async fn handshake<T, E, A>(transport: T) -> RunningService<RoleClient, ()>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    tokio::time::timeout(CALL_TIMEOUT, ().serve(transport))
        .await
        .expect("no answer to initialize within the timeout (a hang)")
        .expect("MCP handshake")
}

/// The lower-case hex SHA-256 of `bytes`: a note's version as `read_note` gives it.
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes.as_ref())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The `path` of each item of the list `reply[key]` (`hits`, `notes`, `rows`...).
pub fn paths_at(reply: &Value, key: &str) -> Vec<String> {
    reply[key]
        .as_array()
        .unwrap_or_else(|| panic!("no `{key}` list in {reply}"))
        .iter()
        .map(|h| h["path"].as_str().unwrap().to_owned())
        .collect()
}

/// A server process whose memory a test watches: its pid, with its address space limited so
/// that an unbounded allocation ends it (as the machine's memory would) instead of the test
/// machine swapping.
#[cfg(target_os = "linux")]
pub struct Watched {
    pub server: Server,
    pub pid: u32,
}

#[cfg(target_os = "linux")]
impl Watched {
    /// `capvault serve <vault> <extra>` over stdio with at most `address_space` bytes of
    /// virtual memory.
    pub async fn start(vault: &Path, extra: &[&str], address_space: u64) -> Watched {
        use std::os::unix::process::CommandExt;
        let mut cmd = serve_command(vault, extra);
        // SAFETY: setrlimit is async-signal-safe and allocates nothing.
        unsafe {
            cmd.as_std_mut().pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: address_space,
                    rlim_max: address_space,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let server = Server::from_command(cmd).await;
        let pid = server.pid();
        Watched { server, pid }
    }

    /// Sets the server's peak resident size (`VmHWM`) back to what it holds now.
    pub fn reset_peak(&self) {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid), "5").expect("clear_refs");
    }

    /// A `kB` line of `/proc/PID/status` (`VmHWM`, `VmRSS`) in bytes.
    pub fn status_bytes(&self, key: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .unwrap_or_else(|_| panic!("the server (pid {}) is gone", self.pid));
        status
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kib| kib * 1024)
            .unwrap_or_else(|| panic!("no {key} in the server's status"))
    }

    /// True while the server process runs (not ended, not a zombie).
    pub fn alive(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid)).is_ok_and(|s| {
            s.lines()
                .find(|l| l.starts_with("State:"))
                .is_some_and(|l| !l.contains('Z') && !l.contains('X'))
        })
    }

    /// Calls `tool`; `None` when the server ended instead of answering.
    pub async fn try_call(&self, tool: &str, args: Value) -> Option<Reply> {
        let args: Map<String, Value> = match args {
            Value::Object(m) => m,
            _ => panic!("arguments must be an object"),
        };
        let call = self
            .server
            .client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args));
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(r)) => Some(reply(r)),
            Ok(Err(_)) => None,
            Err(_) => panic!(
                "{tool}: no answer within {} s (a hang)",
                CALL_TIMEOUT.as_secs()
            ),
        }
    }
}
