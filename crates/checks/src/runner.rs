//! The threads check runs happen on.
//!
//! A run needs a thread of its own: its parsers and interpreter recurse deeper than a caller's
//! thread may allow (see [`RUN_STACK`]), and the caller waits beside it so that it can raise the
//! stop flag at the wall-time bound. Starting that thread for every run cost more than many runs
//! do: the clone, the first touch of every stack page the run reaches (each a page fault and a
//! zeroed page), the allocator's per-thread set-up, and unmapping the stack at the end. So a
//! thread that finished a run waits for the next one instead of ending.
//!
//! A run never queues behind another: it takes an idle thread if there is one and starts a new
//! one otherwise, so its wall-time bound starts when it starts. What is kept is bounded: at most
//! [`MAX_IDLE`] threads wait at once (a thread finishing a run when that many wait ends), and a
//! thread that waited [`IDLE_FOR`] without work ends. The hard part is that last step: a caller
//! may take a thread's mailbox from the idle list just as the thread gives up waiting, so the
//! thread ends only if it removes its own mailbox from the list itself; when the mailbox is gone,
//! a run is on its way and the thread waits for it.

use std::sync::{
    Mutex, PoisonError,
    atomic::{AtomicU64, Ordering},
    mpsc::{self, RecvTimeoutError},
};
use std::time::Duration;

/// Stack of a thread runs happen on. The parsers recurse per nesting level, which is bounded
/// (`sql::MAX_SQL_NESTING`, serde's limit of 128), but a debug build spends several times the
/// stack of a release build per level, more than a test or tokio thread's 2 MiB; the
/// reservation is virtual, and only what the parsers reach is committed.
const RUN_STACK: usize = 64 << 20;
/// Threads that wait for a run at most.
const MAX_IDLE: usize = 16;
/// How long a thread waits for a run before it ends.
const IDLE_FOR: Duration = Duration::from_secs(30);

/// A run, with everything it reads owned, so that it outlives no borrow.
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

/// A waiting thread's mailbox, with the number that tells it apart.
struct Mailbox {
    thread: u64,
    jobs: mpsc::Sender<Job>,
}

/// The waiting threads' mailboxes, the most recently idle last.
static IDLE: Mutex<Vec<Mailbox>> = Mutex::new(Vec::new());
static NEXT_THREAD: AtomicU64 = AtomicU64::new(0);

fn idle() -> std::sync::MutexGuard<'static, Vec<Mailbox>> {
    // The list stays consistent under a panic: every change is one push or one removal.
    IDLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `job` on an idle thread, or on a new one when none waits. An error means the
/// operating system could not start a thread.
pub(crate) fn run(job: Job) -> std::io::Result<()> {
    // A thread takes its mailbox off the list before it ends, so a mailbox on it accepts; the
    // run goes to a new thread all the same if one did not.
    let job = match idle().pop() {
        Some(mailbox) => match mailbox.jobs.send(job) {
            Ok(()) => return Ok(()),
            Err(mpsc::SendError(back)) => back,
        },
        None => job,
    };
    let thread = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
    let (jobs, mailbox) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("rimthan-check".to_owned())
        .stack_size(RUN_STACK)
        .spawn(move || {
            job();
            serve(thread, jobs, mailbox);
        })?;
    Ok(())
}

/// A thread's life after its first run: offer itself, run what comes, end when idle too long
/// or when enough others wait.
fn serve(thread: u64, jobs: mpsc::Sender<Job>, mailbox: mpsc::Receiver<Job>) {
    loop {
        {
            let mut idle = idle();
            if idle.len() >= MAX_IDLE {
                return;
            }
            idle.push(Mailbox {
                thread,
                jobs: jobs.clone(),
            });
        }
        loop {
            match mailbox.recv_timeout(IDLE_FOR) {
                Ok(job) => {
                    job();
                    break;
                }
                Err(RecvTimeoutError::Timeout) => {
                    let mut idle = idle();
                    if let Some(at) = idle.iter().position(|m| m.thread == thread) {
                        idle.remove(at);
                        return;
                    }
                    // A caller took the mailbox and is sending a run: wait for it.
                }
                // This thread holds a sender itself, so the channel cannot close.
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}
