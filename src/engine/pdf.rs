//! PDFs read off the server's back: worker processes that fork one confined child per file.
//!
//! A PDF is hostile input and its parser ([`crate::media::pdf`]) cannot be bounded from inside:
//! it may panic, recurse until the stack runs out, loop, or inflate a stream without limit. So
//! `serve` and `call` start `capvault pdf-worker` a few times ([`PdfReader::start`]: two
//! workers for clients' reads, one more for `--index-pdfs`' background reads, so that a slow
//! file holds one worker and the indexing never makes a client wait), before the sandbox
//! closes the filesystem (the server could not start a program after it). The worker takes every file and network
//! right from itself (Landlock, [`crate::vault::sandbox::confine_to_nothing`]), then for each
//! PDF the server sends down its stdin forks a child that sets its own limits (address space
//! [`MEMORY_LIMIT_MIB`], CPU time, no core file), reads the text and writes it to a pipe; the
//! worker kills a child that runs past [`TIME_LIMIT`] and answers the server with the text or why
//! there is none. A crash ends only the child. The server waits for an answer a little longer
//! than the worker's own limit, and stops using a worker that does not answer; a background read
//! is given up (its worker ended) when the engine stops.
//!
//! The worker is single-threaded (it is dispatched before the async runtime starts), so the
//! fork is safe.
//!
//! Where there is no `fork` (Windows), the worker reads each PDF itself, in a job object that
//! bounds its memory ([`MEMORY_LIMIT_MIB`]) and ends it with the server: a crash or a runaway
//! ends the worker, the server kills one that runs past [`TIME_LIMIT`], and each worker lost so
//! is replaced (nothing there forbids starting a program after the start).

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::locks::{lock, recover};
use crate::media::pdf::{PdfBounds, PdfError, PdfText};

/// Longest the worker lets one PDF be read.
pub const TIME_LIMIT: Duration = Duration::from_secs(15);
/// Most memory (address space) a child reading one PDF may map, in MiB.
pub const MEMORY_LIMIT_MIB: u64 = 512;
/// Largest PDF the worker takes (the vault's read limit is smaller by default).
const MAX_JOB_BYTES: u64 = 512 << 20;
/// Largest answer read back: the text bound with room for JSON escapes.
const MAX_REPLY_BYTES: u64 = 64 << 20;
/// How much longer than [`TIME_LIMIT`] the server waits for the worker's answer.
const GRACE: Duration = Duration::from_secs(5);
/// Whether a worker lost (killed at its time limit, or crashed) is replaced by a new one: where
/// the worker reads PDFs itself (no `fork`). On Unix a worker outlives every PDF, and the
/// sandbox would refuse to start a program after the start.
const REPLACE_LOST_WORKERS: bool = cfg!(not(unix));

/// What an answer carries.
type Answer = Result<PdfText, PdfError>;

/// Workers that read the PDFs a client asks for (`read_attachment`): two, so that one slow file
/// leaves a worker for the next.
const ON_DEMAND_WORKERS: usize = 2;

/// Who is waiting for a PDF's text, and so which workers read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// A client's request: read by workers of its own, never queued behind the indexing.
    OnDemand,
    /// `--index-pdfs`' background reads: one worker of its own (or the on-demand ones when the
    /// reader was started without it).
    Background,
}

/// The server's end of the PDF workers: a few worker processes, each reading one PDF at a
/// time, in two pools ([`Lane`]) so that the background indexing never makes a client's read
/// wait, and a slow file (bounded by [`TIME_LIMIT`]) holds one worker, not the others.
pub struct PdfReader {
    on_demand: Pool,
    background: Option<Pool>,
}

/// Workers of one lane.
struct Pool {
    state: Mutex<PoolState>,
    /// Signalled when a worker comes back (or is lost).
    returned: Condvar,
}

struct PoolState {
    /// Workers waiting for a PDF.
    idle: Vec<Worker>,
    /// Workers reading one now.
    busy: usize,
    /// Why there is no worker, when none is left (said to the client).
    why_none: String,
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
    replies: Replies,
    /// The job object bounding the worker's memory; closing it ends the worker.
    #[cfg(windows)]
    _job: job::Job,
}

/// Where a worker's answers are read: its stdout, polled (Unix), or a thread of its own that
/// reads them off the pipe (elsewhere: a pipe there cannot be polled).
#[cfg(unix)]
type Replies = std::process::ChildStdout;
#[cfg(not(unix))]
type Replies = std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>;

impl Worker {
    fn end(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl std::fmt::Debug for PdfReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PdfReader")
            .field("running", &self.is_running())
            .field("background", &self.background.is_some())
            .finish()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Ok(state) = self.state.get_mut() {
            for w in state.idle.drain(..) {
                w.end();
            }
        }
    }
}

impl Pool {
    fn new(workers: Vec<Worker>, why_none: &str) -> Pool {
        Pool {
            state: Mutex::new(PoolState {
                idle: workers,
                busy: 0,
                why_none: why_none.to_owned(),
            }),
            returned: Condvar::new(),
        }
    }

    /// `n` new workers (fewer when some do not start; why, when none does).
    fn start(n: usize) -> Pool {
        let mut workers = Vec::with_capacity(n);
        let mut why = String::new();
        for _ in 0..n {
            match spawn_worker() {
                Ok(w) => workers.push(w),
                Err(e) => {
                    tracing::warn!("a PDF worker did not start: {e}");
                    why = format!("the PDF worker did not start ({e})");
                }
            }
        }
        if workers.is_empty() {
            tracing::warn!("no PDF worker started; PDFs will not be read");
        }
        Pool::new(workers, &why)
    }

    fn has_workers(&self) -> bool {
        let state = lock(&self.state);
        state.busy > 0 || !state.idle.is_empty()
    }

    /// Reads `bytes` on the first worker free (waiting for one while all are busy: each
    /// answers within its bound), giving up when `cancelled` says so.
    fn read(&self, bytes: &[u8], cancelled: &dyn Fn() -> bool) -> Answer {
        let mut worker = {
            let mut state = lock(&self.state);
            loop {
                if let Some(w) = state.idle.pop() {
                    state.busy += 1;
                    break w;
                }
                if state.busy == 0 {
                    return Err(PdfError::NoReader(state.why_none.clone()));
                }
                if cancelled() {
                    return Err(PdfError::NoReader(STOPPING.to_owned()));
                }
                state = recover(self.returned.wait_timeout(state, CANCEL_CHECK)).0;
            }
        };
        let answer = ask(&mut worker, bytes, cancelled);
        // A worker lost mid-answer (its pipe holds an unknown part of a reply) is ended, and
        // where workers are replaced its successor started, before the pool is locked: the read
        // still counts as busy meanwhile, so no one waiting is told there is no worker.
        let given_up = answer.is_err() && cancelled();
        let (kept, replacement) = match &answer {
            Ok(_) => (Some(worker), None),
            Err(_) => {
                worker.end();
                (None, (REPLACE_LOST_WORKERS && !given_up).then(spawn_worker))
            }
        };
        let mut state = lock(&self.state);
        state.busy -= 1;
        state.idle.extend(kept);
        let answer = match answer {
            Ok(answer) => answer,
            Err(_) if given_up => Err(PdfError::NoReader(STOPPING.to_owned())),
            Err(e) => match replacement {
                Some(Ok(w)) => {
                    state.idle.push(w);
                    Err(lost_reading(&e))
                }
                Some(Err(why)) => {
                    tracing::warn!("a PDF worker was not replaced: {why}");
                    state.why_none = format!("the PDF worker did not start ({why})");
                    Err(lost_reading(&e))
                }
                None => {
                    tracing::warn!("a PDF worker stopped answering ({e}); it is not used again");
                    state.why_none = "the PDF worker stopped".to_owned();
                    Err(PdfError::Crashed("the PDF worker stopped".to_owned()))
                }
            },
        };
        drop(state);
        self.returned.notify_one();
        answer
    }
}

/// Why a read given up at shutdown has no text (never kept: the PDF is read at the next start).
const STOPPING: &str = "the server is stopping";
/// How often a read waiting for a worker or an answer looks whether it was given up.
const CANCEL_CHECK: Duration = Duration::from_millis(100);

impl PdfReader {
    /// A reader without a worker: every PDF answers `why`.
    pub fn none(why: &str) -> PdfReader {
        PdfReader {
            on_demand: Pool::new(Vec::new(), why),
            background: None,
        }
    }

    /// Starts the workers: this program again, as `capvault pdf-worker`, [`ON_DEMAND_WORKERS`]
    /// for clients' reads and, with `background` (`--index-pdfs`), one more for the indexing.
    /// Call it before the sandbox applies. Workers that cannot start leave a reader that says
    /// why.
    pub fn start(background: bool) -> PdfReader {
        if cfg!(not(feature = "pdf")) {
            return PdfReader::none(crate::media::pdf::NOT_BUILT);
        }
        PdfReader {
            on_demand: Pool::start(ON_DEMAND_WORKERS),
            background: background.then(|| Pool::start(1)),
        }
    }

    /// Whether a worker runs.
    pub fn is_running(&self) -> bool {
        self.on_demand.has_workers() || self.background.as_ref().is_some_and(Pool::has_workers)
    }

    /// The text of the PDF in `bytes`, read by an on-demand worker's confined child.
    pub fn read(&self, bytes: &[u8]) -> Result<PdfText, PdfError> {
        self.read_in(Lane::OnDemand, bytes, &|| false)
    }

    /// The text of the PDF in `bytes`, read by `lane`'s workers; given up (a
    /// [`PdfError::NoReader`] answer) as soon as `cancelled` says so, at shutdown.
    pub fn read_in(
        &self,
        lane: Lane,
        bytes: &[u8],
        cancelled: &dyn Fn() -> bool,
    ) -> Result<PdfText, PdfError> {
        let pool = match (lane, &self.background) {
            (Lane::Background, Some(pool)) => pool,
            _ => &self.on_demand,
        };
        pool.read(bytes, cancelled)
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
    // Bounded before it is sent a PDF (it waits on its stdin until then).
    #[cfg(windows)]
    let job = match job::Job::bound(&child, MEMORY_LIMIT_MIB << 20) {
        Ok(job) => job,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other(format!(
                "its memory could not be bounded: {e}"
            )));
        }
    };
    #[cfg(not(unix))]
    let stdout = read_replies_on_a_thread(stdout);
    Ok(Worker {
        child,
        stdin,
        replies: stdout,
        #[cfg(windows)]
        _job: job,
    })
}

/// Writes one PDF to a worker: an 8-byte little-endian length, then the bytes.
fn send(worker: &mut Worker, bytes: &[u8]) -> std::io::Result<()> {
    worker
        .stdin
        .write_all(&(bytes.len() as u64).to_le_bytes())?;
    worker.stdin.write_all(bytes)?;
    worker.stdin.flush()
}

/// Reads one answer (a length and that many bytes) from `from`; `None` at a clean end.
#[cfg_attr(unix, allow(dead_code))]
fn read_frame(from: &mut impl Read) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 8];
    match from.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u64::from_le_bytes(len);
    if len > MAX_REPLY_BYTES {
        return Err(std::io::Error::other("an answer over its bound"));
    }
    let mut reply = Vec::new();
    from.take(len).read_to_end(&mut reply)?;
    if reply.len() as u64 != len {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(Some(reply))
}

/// A thread that reads `from`'s answers as they come and hands them over; it ends with the
/// pipe (the worker's end, or its kill) or at the first bad frame.
#[cfg_attr(unix, allow(dead_code))]
fn read_replies_on_a_thread(
    mut from: impl Read + Send + 'static,
) -> std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("pdf-replies".into())
        .spawn(move || {
            loop {
                let frame = match read_frame(&mut from) {
                    Ok(Some(f)) => Ok(f),
                    Ok(None) => return,
                    Err(e) => Err(e),
                };
                let last = frame.is_err();
                if tx.send(frame).is_err() || last {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("the PDF worker's reply reader did not start: {e}");
    }
    rx
}

/// Waits (until `deadline`, and while not `cancelled`) for the next answer on `replies`.
#[cfg_attr(unix, allow(dead_code))]
fn next_reply(
    replies: &std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>,
    deadline: Instant,
    cancelled: &dyn Fn() -> bool,
) -> std::io::Result<Vec<u8>> {
    use std::sync::mpsc::RecvTimeoutError;
    loop {
        if cancelled() {
            return Err(std::io::ErrorKind::Interrupted.into());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        match replies.recv_timeout(left.min(CANCEL_CHECK)) {
            Ok(reply) => return reply,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
}

/// What a client is told of a PDF whose worker was lost reading it (and replaced).
#[cfg_attr(unix, allow(dead_code))]
fn lost_reading(e: &std::io::Error) -> PdfError {
    match e.kind() {
        std::io::ErrorKind::TimedOut => PdfError::TooSlow(TIME_LIMIT.as_secs()),
        _ => PdfError::Crashed(format!(
            "the reader ended on it (out of memory, the limit is {MEMORY_LIMIT_MIB} MiB, or of \
             stack)"
        )),
    }
}

/// Sends one PDF and waits (at most the worker's limit and [`GRACE`], and while not
/// `cancelled`) for its answer, which the worker's reply thread reads.
#[cfg(not(unix))]
fn ask(worker: &mut Worker, bytes: &[u8], cancelled: &dyn Fn() -> bool) -> std::io::Result<Answer> {
    send(worker, bytes)?;
    let reply = next_reply(
        &worker.replies,
        Instant::now() + TIME_LIMIT + GRACE,
        cancelled,
    )?;
    serde_json::from_slice(&reply).map_err(std::io::Error::other)
}

/// Sends one PDF and waits (at most the worker's limit and [`GRACE`], and while not
/// `cancelled`) for its answer.
#[cfg(unix)]
fn ask(worker: &mut Worker, bytes: &[u8], cancelled: &dyn Fn() -> bool) -> std::io::Result<Answer> {
    send(worker, bytes)?;
    let deadline = Instant::now() + TIME_LIMIT + GRACE;
    let mut len = [0u8; 8];
    read_by(&mut worker.replies, &mut len, deadline, cancelled)?;
    let len = u64::from_le_bytes(len);
    if len > MAX_REPLY_BYTES {
        return Err(std::io::Error::other("an answer over its bound"));
    }
    let mut reply = vec![0u8; len as usize];
    read_by(&mut worker.replies, &mut reply, deadline, cancelled)?;
    serde_json::from_slice(&reply).map_err(std::io::Error::other)
}

/// Fills `buf` from `from`, waiting for data no later than `deadline`, and only while not
/// `cancelled`.
#[cfg(unix)]
fn read_by<R: Read + std::os::fd::AsFd>(
    from: &mut R,
    buf: &mut [u8],
    deadline: Instant,
    cancelled: &dyn Fn() -> bool,
) -> std::io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        // In slices, to look at `cancelled` between them.
        loop {
            if cancelled() {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            let slice = deadline.min(Instant::now() + CANCEL_CHECK);
            match wait_readable(from, slice) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut && slice < deadline => {}
                Err(e) => return Err(e),
            }
        }
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

/// Reads `job` in the worker itself (no `fork` here): a panic is caught, and a crash, an
/// allocation past the job object's bound or a runaway ends the worker, which the server replaces.
#[cfg(not(unix))]
fn read_in_child(job: &[u8]) -> Answer {
    std::panic::catch_unwind(|| crate::media::pdf::extract(job, &PdfBounds::default()))
        .unwrap_or_else(|_| Err(PdfError::Crashed("it panicked".into())))
}

/// A Windows job object bounding one worker.
#[cfg(windows)]
mod job {
    use std::os::windows::io::AsRawHandle;

    use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};
    use windows_sys::Win32::System::JobObjects::{
        AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION,
        JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, JOB_OBJECT_LIMIT_PROCESS_MEMORY,
        JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectExtendedLimitInformation,
        SetInformationJobObject,
    };

    /// An open job object; closing it (on drop) ends the processes in it.
    pub(super) struct Job(HANDLE);

    // SAFETY: a job object handle may be used and closed from any thread.
    unsafe impl Send for Job {}

    impl Job {
        /// Puts `child` in a new job object whose processes may commit at most `bytes` each,
        /// die on an unhandled exception rather than open an error dialog, and end when the
        /// job is closed.
        pub(super) fn bound(child: &std::process::Child, bytes: u64) -> std::io::Result<Job> {
            // SAFETY: no security attributes and no name are valid arguments; the handle
            // returned is checked, and owned (closed) by the `Job`.
            let handle = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
            if handle.is_null() {
                return Err(std::io::Error::last_os_error());
            }
            let job = Job(handle);
            // SAFETY: the structure is plain data, for which all zeroes is a valid value.
            let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
            limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_PROCESS_MEMORY
                | JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
                | JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION;
            limits.ProcessMemoryLimit = usize::try_from(bytes).unwrap_or(usize::MAX);
            // SAFETY: `limits` is the structure this information class names, with its size.
            let set = unsafe {
                SetInformationJobObject(
                    job.0,
                    JobObjectExtendedLimitInformation,
                    std::ptr::from_ref(&limits).cast(),
                    std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
                )
            };
            if set == 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: both handles are open: the job's (owned above) and the child's (owned by
            // `child`, borrowed for the call).
            let assigned =
                unsafe { AssignProcessToJobObject(job.0, child.as_raw_handle() as HANDLE) };
            if assigned == 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(job)
        }
    }

    impl Drop for Job {
        fn drop(&mut self) {
            // SAFETY: the handle is open and owned by this `Job`, closed once here.
            unsafe { CloseHandle(self.0) };
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut f = (body.len() as u64).to_le_bytes().to_vec();
        f.extend_from_slice(body);
        f
    }

    // The reply path Windows uses (a thread reads the worker's answers off its pipe), run here on
    // in-memory pipes.

    #[test]
    fn answers_are_read_frame_by_frame_and_a_clean_end_is_no_answer() {
        let mut bytes = frame(b"one");
        bytes.extend(frame(b""));
        let mut from = std::io::Cursor::new(bytes);
        assert_eq!(read_frame(&mut from).unwrap().as_deref(), Some(&b"one"[..]));
        assert_eq!(read_frame(&mut from).unwrap().as_deref(), Some(&b""[..]));
        assert!(read_frame(&mut from).unwrap().is_none());
    }

    #[test]
    fn an_answer_cut_short_or_over_its_bound_is_an_error_not_an_allocation() {
        let mut cut = frame(b"abcdef");
        cut.truncate(10);
        assert!(read_frame(&mut std::io::Cursor::new(cut)).is_err());
        let huge = (MAX_REPLY_BYTES + 1).to_le_bytes().to_vec();
        let e = read_frame(&mut std::io::Cursor::new(huge)).unwrap_err();
        assert!(e.to_string().contains("over its bound"), "{e}");
    }

    #[test]
    fn the_reply_thread_hands_over_each_answer_then_ends_with_the_pipe() {
        let mut bytes = frame(b"first");
        bytes.extend(frame(b"second"));
        let replies = read_replies_on_a_thread(std::io::Cursor::new(bytes));
        let far = Instant::now() + Duration::from_secs(10);
        assert_eq!(next_reply(&replies, far, &|| false).unwrap(), b"first");
        assert_eq!(next_reply(&replies, far, &|| false).unwrap(), b"second");
        // The worker gone (its pipe ended): said at once, not at the deadline.
        let e = next_reply(&replies, far, &|| false).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
    }

    /// A pipe whose writer never writes (a worker stuck on a PDF) until `release` is dropped.
    struct Stuck(std::sync::mpsc::Receiver<()>);
    impl Read for Stuck {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            let _ = self.0.recv();
            Ok(0)
        }
    }

    #[test]
    fn a_worker_that_does_not_answer_is_given_up_at_the_deadline_or_when_cancelled() {
        let (release, stuck) = std::sync::mpsc::channel::<()>();
        let replies = read_replies_on_a_thread(Stuck(stuck));
        let started = Instant::now();
        let e = next_reply(&replies, started + Duration::from_millis(300), &|| false).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(300));
        let e = next_reply(&replies, started + Duration::from_secs(60), &|| true).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted);
        // A worker killed at its limit is a PDF too slow; one that ended on it, a crash.
        assert!(matches!(lost_reading(&e), PdfError::Crashed(_)));
        let slow = std::io::Error::from(std::io::ErrorKind::TimedOut);
        assert!(matches!(lost_reading(&slow), PdfError::TooSlow(15)));
        drop(release);
    }
}
