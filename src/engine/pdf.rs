//! PDFs read off the server's back: a worker process that forks one confined child per file.
//!
//! A PDF is hostile input and its parser ([`crate::media::pdf`]) cannot be bounded from inside:
//! it may panic, recurse until the stack runs out, loop, or inflate a stream without limit. So
//! `serve` and `call` start `capvault pdf-worker` once, before the sandbox closes the filesystem
//! (the server could not start a program after it). The worker takes every file and network
//! right from itself (Landlock, [`crate::vault::sandbox::confine_to_nothing`]), then for each
//! PDF the server sends down its stdin forks a child that sets its own limits (address space
//! [`MEMORY_LIMIT_MIB`], CPU time, no core file), reads the text and writes it to a pipe; the
//! worker kills a child that runs past [`TIME_LIMIT`] and answers the server with the text or why
//! there is none. A crash ends only the child. The server waits for an answer a little longer
//! than the worker's own limit, and stops using a worker that does not answer.
//!
//! The worker is single-threaded (it is dispatched before the async runtime starts), so the
//! fork is safe.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::sync::Mutex;
use std::time::Duration;
#[cfg(unix)]
use std::time::Instant;

use crate::locks::lock;
#[cfg(unix)]
use crate::media::pdf::PdfBounds;
use crate::media::pdf::{PdfError, PdfText};

/// Longest the worker lets one PDF be read.
pub const TIME_LIMIT: Duration = Duration::from_secs(15);
/// Most memory (address space) a child reading one PDF may map, in MiB.
pub const MEMORY_LIMIT_MIB: u64 = 512;
/// Largest PDF the worker takes (the vault's read limit is smaller by default).
const MAX_JOB_BYTES: u64 = 512 << 20;
/// Largest answer read back: the text bound with room for JSON escapes.
#[cfg_attr(not(unix), allow(dead_code))]
const MAX_REPLY_BYTES: u64 = 64 << 20;
/// How much longer than [`TIME_LIMIT`] the server waits for the worker's answer.
#[cfg_attr(not(unix), allow(dead_code))]
const GRACE: Duration = Duration::from_secs(5);

/// What an answer carries.
type Answer = Result<PdfText, PdfError>;

/// The server's end of the PDF worker: one PDF at a time.
pub struct PdfReader {
    state: Mutex<ReaderState>,
}

enum ReaderState {
    Running(Worker),
    /// No worker: why, said to the client.
    Down(String),
}

#[cfg_attr(not(unix), allow(dead_code))]
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
}

impl std::fmt::Debug for PdfReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let running = matches!(&*lock(&self.state), ReaderState::Running(_));
        f.debug_struct("PdfReader")
            .field("running", &running)
            .finish()
    }
}

impl Drop for PdfReader {
    fn drop(&mut self) {
        if let Ok(state) = self.state.get_mut()
            && let ReaderState::Running(w) = state
        {
            let _ = w.child.kill();
            let _ = w.child.wait();
        }
    }
}

impl PdfReader {
    /// A reader without a worker: every PDF answers `why`.
    pub fn none(why: &str) -> PdfReader {
        PdfReader {
            state: Mutex::new(ReaderState::Down(why.to_owned())),
        }
    }

    /// Starts the worker: this program again, as `capvault pdf-worker`. Call it before the
    /// sandbox applies. A worker that cannot start leaves a reader that says why.
    pub fn start() -> PdfReader {
        if cfg!(not(feature = "pdf")) {
            return PdfReader::none(crate::media::pdf::NOT_BUILT);
        }
        if cfg!(not(unix)) {
            return PdfReader::none("PDF text needs a Unix system here (its reader runs forked)");
        }
        match spawn_worker() {
            Ok(w) => PdfReader {
                state: Mutex::new(ReaderState::Running(w)),
            },
            Err(e) => {
                tracing::warn!("the PDF worker did not start: {e}; PDFs will not be read");
                PdfReader::none(&format!("the PDF worker did not start ({e})"))
            }
        }
    }

    /// Whether a worker runs.
    pub fn is_running(&self) -> bool {
        matches!(&*lock(&self.state), ReaderState::Running(_))
    }

    /// The text of the PDF in `bytes`, read by the worker's confined child.
    pub fn read(&self, bytes: &[u8]) -> Result<PdfText, PdfError> {
        let mut state = lock(&self.state);
        let worker = match &mut *state {
            ReaderState::Running(w) => w,
            ReaderState::Down(why) => return Err(PdfError::NoReader(why.clone())),
        };
        match ask(worker, bytes) {
            Ok(answer) => answer,
            Err(e) => {
                tracing::warn!("the PDF worker stopped answering ({e}); PDFs will not be read");
                if let ReaderState::Running(mut w) = std::mem::replace(
                    &mut *state,
                    ReaderState::Down("the PDF worker stopped".to_owned()),
                ) {
                    let _ = w.child.kill();
                    let _ = w.child.wait();
                }
                Err(PdfError::Crashed("the PDF worker stopped".to_owned()))
            }
        }
    }
}

fn spawn_worker() -> std::io::Result<Worker> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg("pdf-worker")
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        return Err(std::io::Error::other("no pipes to the worker"));
    };
    Ok(Worker {
        child,
        stdin,
        stdout,
    })
}

/// No worker runs here (see [`PdfReader::start`]).
#[cfg(not(unix))]
fn ask(_worker: &mut Worker, _bytes: &[u8]) -> std::io::Result<Answer> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Sends one PDF and waits (at most the worker's limit and [`GRACE`]) for its answer.
#[cfg(unix)]
fn ask(worker: &mut Worker, bytes: &[u8]) -> std::io::Result<Answer> {
    worker
        .stdin
        .write_all(&(bytes.len() as u64).to_le_bytes())?;
    worker.stdin.write_all(bytes)?;
    worker.stdin.flush()?;
    let deadline = Instant::now() + TIME_LIMIT + GRACE;
    let mut len = [0u8; 8];
    read_by(&mut worker.stdout, &mut len, deadline)?;
    let len = u64::from_le_bytes(len);
    if len > MAX_REPLY_BYTES {
        return Err(std::io::Error::other("an answer over its bound"));
    }
    let mut reply = vec![0u8; len as usize];
    read_by(&mut worker.stdout, &mut reply, deadline)?;
    serde_json::from_slice(&reply).map_err(std::io::Error::other)
}

/// Fills `buf` from `from`, waiting for data no later than `deadline`.
#[cfg(unix)]
fn read_by<R: Read + std::os::fd::AsFd>(
    from: &mut R,
    buf: &mut [u8],
    deadline: Instant,
) -> std::io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        wait_readable(from, deadline)?;
        match from.read(&mut buf[filled..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Waits until `fd` has data (or its other end closed), or fails at `deadline`.
#[cfg(unix)]
fn wait_readable(fd: &impl std::os::fd::AsFd, deadline: Instant) -> std::io::Result<()> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        let timeout = Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        match poll(&mut fds, Some(&timeout)) {
            Ok(0) => continue,
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// `capvault pdf-worker`: reads PDFs from stdin (each an 8-byte little-endian length and the
/// bytes), answers each on stdout (a length and JSON), until stdin ends.
pub fn worker_main() -> ExitCode {
    let confined = crate::vault::sandbox::confine_to_nothing();
    tracing::debug!("pdf worker confined: {confined:?}");
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    loop {
        let mut len = [0u8; 8];
        match input.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return ExitCode::SUCCESS,
            Err(_) => return ExitCode::FAILURE,
        }
        let len = u64::from_le_bytes(len);
        if len > MAX_JOB_BYTES {
            return ExitCode::FAILURE;
        }
        let mut job = vec![0u8; len as usize];
        if input.read_exact(&mut job).is_err() {
            return ExitCode::FAILURE;
        }
        let answer = read_in_child(&job);
        drop(job);
        let reply = serde_json::to_vec(&answer).unwrap_or_else(|_| b"null".to_vec());
        let sent = output
            .write_all(&(reply.len() as u64).to_le_bytes())
            .and_then(|()| output.write_all(&reply))
            .and_then(|()| output.flush());
        if sent.is_err() {
            return ExitCode::FAILURE;
        }
    }
}

/// Reads `job` in a forked child within the limits, and says what came of it.
#[cfg(unix)]
fn read_in_child(job: &[u8]) -> Answer {
    let (from_child, to_child) = match rustix::pipe::pipe() {
        Ok(p) => p,
        Err(e) => return Err(PdfError::Crashed(format!("no pipe: {e}"))),
    };
    // SAFETY: the worker is single-threaded (see the module docs), so the child starts with a
    // consistent heap and no lock held by a thread that does not exist in it; the child only
    // computes, writes to its pipe and leaves by `_exit`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(PdfError::Crashed("the worker could not fork".into()));
    }
    if pid == 0 {
        drop(from_child);
        child_limits();
        let answer =
            std::panic::catch_unwind(|| crate::media::pdf::extract(job, &PdfBounds::default()))
                .unwrap_or_else(|_| Err(PdfError::Crashed("it panicked".into())));
        let reply = serde_json::to_vec(&answer).unwrap_or_default();
        let mut rest = &reply[..];
        while !rest.is_empty() {
            match rustix::io::write(&to_child, rest) {
                Ok(0) | Err(_) => break,
                Ok(n) => rest = &rest[n..],
            }
        }
        // SAFETY: ends the child without running the parent's exit handlers or destructors.
        unsafe { libc::_exit(0) }
    }
    drop(to_child);
    // Infallible: `fork` returned neither an error (< 0, answered above) nor 0 (the child).
    let pid = rustix::process::Pid::from_raw(pid).expect("a forked child's pid is positive");
    let deadline = Instant::now() + TIME_LIMIT;
    let mut reply = Vec::new();
    let mut timed_out = false;
    // Whether the child's answer was read to its end (else it is killed before the wait, so
    // that a child still writing can never keep the worker waiting).
    let mut ended = false;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        if wait_readable(&from_child, deadline).is_err() {
            timed_out = true;
            break;
        }
        match rustix::io::read(&from_child, &mut chunk) {
            Ok(0) => {
                ended = true;
                break;
            }
            Ok(n) if (reply.len() + n) as u64 <= MAX_REPLY_BYTES => {
                reply.extend_from_slice(&chunk[..n])
            }
            Ok(_) => break,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    if !ended {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
    let status = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
    let signal = status
        .ok()
        .flatten()
        .and_then(|(_, s)| s.terminating_signal());
    if timed_out || signal == Some(libc::SIGXCPU) {
        return Err(PdfError::TooSlow(TIME_LIMIT.as_secs()));
    }
    if !ended {
        return Err(PdfError::Crashed(
            "its answer was cut short or over its bound".into(),
        ));
    }
    if signal == Some(libc::SIGKILL) {
        // The kernel's kill at the CPU limit's hard bound.
        return Err(PdfError::TooSlow(TIME_LIMIT.as_secs()));
    }
    if signal == Some(libc::SIGABRT) {
        // A failed allocation aborts, as does a stack overflow (panics are caught above).
        return Err(PdfError::Crashed(format!(
            "it ran out of memory (the limit is {MEMORY_LIMIT_MIB} MiB) or of stack"
        )));
    }
    if let Some(sig) = signal {
        return Err(PdfError::Crashed(format!("stopped by signal {sig}")));
    }
    serde_json::from_slice(&reply)
        .unwrap_or_else(|_| Err(PdfError::Crashed("no answer from the reader".into())))
}

#[cfg(not(unix))]
fn read_in_child(_job: &[u8]) -> Answer {
    Err(PdfError::NoReader(
        "PDFs are read in a confined child process, on Unix only for now".into(),
    ))
}

/// The child's own limits: memory, CPU time (a second past the worker's clock), no core file.
#[cfg(unix)]
fn child_limits() {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let cpu = TIME_LIMIT.as_secs() + 1;
    let _ = setrlimit(
        Resource::As,
        Rlimit {
            current: Some(MEMORY_LIMIT_MIB << 20),
            maximum: Some(MEMORY_LIMIT_MIB << 20),
        },
    );
    let _ = setrlimit(
        Resource::Cpu,
        Rlimit {
            current: Some(cpu),
            maximum: Some(cpu + 1),
        },
    );
    let _ = setrlimit(
        Resource::Core,
        Rlimit {
            current: Some(0),
            maximum: Some(0),
        },
    );
}

/// Most PDFs whose text [`TextCache`] keeps.
const CACHED_PDFS: usize = 64;
/// Most bytes of text it keeps, all PDFs together.
const CACHED_BYTES: usize = 64 << 20;

/// The text of the PDFs read lately, by their bytes' SHA-256: a PDF read again (its next pages,
/// a second look) is not parsed again. An answer that is an error is kept too (a damaged file
/// stays damaged), except that the worker's own failures are not.
#[derive(Debug, Default)]
pub struct TextCache {
    kept: Mutex<Vec<(String, std::sync::Arc<Answer>)>>,
}

impl TextCache {
    /// The answer for the PDF whose bytes hash to `sha256`, read by `reader` when not kept.
    pub fn get_or_read(
        &self,
        reader: &PdfReader,
        sha256: &str,
        bytes: &[u8],
    ) -> std::sync::Arc<Answer> {
        {
            let mut kept = lock(&self.kept);
            if let Some(i) = kept.iter().position(|(k, _)| k == sha256) {
                let entry = kept.remove(i);
                let answer = entry.1.clone();
                kept.push(entry);
                return answer;
            }
        }
        let answer = std::sync::Arc::new(reader.read(bytes));
        if matches!(
            &*answer,
            Err(PdfError::NoReader(_)) | Err(PdfError::Crashed(_))
        ) {
            return answer;
        }
        let mut kept = lock(&self.kept);
        kept.push((sha256.to_owned(), answer.clone()));
        let size = |a: &Answer| a.as_ref().map_or(0, PdfText::text_bytes);
        let mut total: usize = kept.iter().map(|(_, a)| size(a)).sum();
        while kept.len() > CACHED_PDFS || (total > CACHED_BYTES && kept.len() > 1) {
            let (_, old) = kept.remove(0);
            total -= size(&old);
        }
        answer
    }
}
