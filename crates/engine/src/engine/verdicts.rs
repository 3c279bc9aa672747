//! The verdicts of the deterministic checks this engine has run (`docs/engine.md` §5.1): the
//! state behind `rules::checks::Judge`, on the engine's floor, since a rule keeps nothing.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use rimthan_checks::{CheckError, Finding, Input, Limits};
use rimthan_registry::{Sha256Digest, StepCheck};

use crate::{
    cache::{BoundedCache, CacheBounds, CacheStats},
    rules::checks::Judge,
};

/// The bounds of the verdict cache: a verdict is a few findings (at most
/// `Limits::max_findings`, each message bounded), so 16 MiB holds thousands of preparations.
pub(crate) const VERDICT_CACHE_BOUNDS: CacheBounds = CacheBounds {
    max_bytes: 16 * 1024 * 1024,
    max_entries: 16_384,
};

/// The findings of the checks this engine has run, by what determines them: the check's
/// digest, the bounds it ran under, and each input's path and digest. A check is deterministic,
/// so a retried preparation (a lost reply, a lost compare-and-swap, a harness preparing the same
/// outputs again) does not run it again. Only findings are kept: a check that stopped at a
/// bound may have stopped on a busy machine's clock, so it runs again. Every key is made of
/// values the server verified (a registry digest, a declared path, the digest of bytes it
/// hashed itself), and the cache is bounded in bytes (`docs/engine.md` §5.1).
#[derive(Debug)]
pub(crate) struct Verdicts {
    known: BoundedCache<VerdictKey, Arc<Vec<Finding>>>,
    runs: AtomicU64,
}

/// What determines a check's outcome.
#[derive(Debug, PartialEq, Eq, Hash)]
struct VerdictKey {
    check: Sha256Digest,
    limits: Limits,
    inputs: Vec<(String, Sha256Digest)>,
}

impl Default for Verdicts {
    fn default() -> Self {
        Self {
            known: BoundedCache::new(VERDICT_CACHE_BOUNDS),
            runs: AtomicU64::new(0),
        }
    }
}

impl Verdicts {
    /// How many checks actually ran.
    pub(crate) fn runs(&self) -> u64 {
        self.runs.load(Ordering::Relaxed)
    }

    /// What the cache holds and how it has served.
    pub(crate) fn stats(&self) -> CacheStats {
        self.known.stats()
    }
}

impl Judge for Verdicts {
    fn judge(
        &self,
        check: &StepCheck,
        inputs: &[Input<'_>],
        digests: Vec<(String, Sha256Digest)>,
    ) -> Result<Arc<Vec<Finding>>, CheckError> {
        let entry = check.entry();
        let span = super::trace::check_span(&entry.id, &entry.version, || {
            inputs.iter().map(|i| i.bytes().len()).sum()
        });
        let _entered = span.enter();
        let key = VerdictKey {
            check: entry.sha256,
            limits: check.compiled().limits().clone(),
            inputs: digests,
        };
        if let Some(known) = self.known.get_if(&key, |_| true) {
            super::trace::check_verdict(&span, &known, true);
            return Ok(known);
        }
        let mut running = check.compiled().start(inputs)?;
        let findings = match running.wait_for(PATIENCE) {
            Some(outcome) => outcome,
            None => run_blocking(move || running.wait()),
        };
        let findings = Arc::new(findings?);
        super::trace::check_verdict(&span, &findings, false);
        self.runs.fetch_add(1, Ordering::Relaxed);
        let weight = key.inputs.iter().map(|(p, _)| p.len() + 64).sum::<usize>()
            + findings
                .iter()
                .map(|f| {
                    f.rule.len() + f.message.len() + f.path.as_ref().map_or(0, String::len) + 64
                })
                .sum::<usize>()
            + 128;
        self.known.insert(key, Arc::clone(&findings), weight);
        Ok(findings)
    }
}

/// How long a caller waits for a check run on its own thread before it hands that thread over
/// ([`run_blocking`]): most runs end well within it, and handing over a runtime's worker costs
/// more than a short run (`docs/performance.md`, "The price of proof: a check's hand-off").
/// It is also the longest a check stalls the other tasks of the worker that waits for it.
const PATIENCE: Duration = Duration::from_millis(5);

/// Waits without stalling the other tasks of a multi-threaded runtime's worker (a check may
/// run up to its wall-time bound).
fn run_blocking<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}
