//! The classic harness mistakes `rimthan stage --fault` injects, and the code the server must
//! answer each with.

/// A classic harness mistake to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Attest a host asset with a digest that is not its rendition's.
    WrongDigest,
    /// Write and attest a file the step does not declare.
    ExtraFile,
    /// Put a declared output behind a symlink.
    SymlinkedOutput,
    /// Submit the report set without one validator's report.
    MissingReport,
    /// Reuse a checkpoint after the session moved on.
    StaleCheckpoint,
    /// Send, for an output a deterministic check reads, a text that is not the file's bytes.
    TextMismatch,
}

impl Fault {
    /// Every fault.
    pub const ALL: [Fault; 6] = [
        Fault::WrongDigest,
        Fault::ExtraFile,
        Fault::SymlinkedOutput,
        Fault::MissingReport,
        Fault::StaleCheckpoint,
        Fault::TextMismatch,
    ];

    /// The flag spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::WrongDigest => "wrong-digest",
            Fault::ExtraFile => "extra-file",
            Fault::SymlinkedOutput => "symlinked-output",
            Fault::MissingReport => "missing-report",
            Fault::StaleCheckpoint => "stale-checkpoint",
            Fault::TextMismatch => "text-mismatch",
        }
    }

    /// The code the server answers with.
    pub fn expected_code(self) -> &'static str {
        match self {
            Fault::WrongDigest => "asset_digest_mismatch",
            Fault::ExtraFile => "unexpected_output",
            Fault::SymlinkedOutput => "symlink_in_path",
            Fault::MissingReport => "report_missing",
            Fault::StaleCheckpoint => "stale_checkpoint",
            Fault::TextMismatch => "output_text_mismatch",
        }
    }
}

impl std::str::FromStr for Fault {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Fault::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Fault::ALL.iter().map(|f| f.as_str()).collect();
                format!("unknown fault {s:?}: use one of {}", names.join(", "))
            })
    }
}
