//! `capvault model import|fetch|check`: embedding models for semantic search.

#[cfg(feature = "semantic")]
use std::io::Write;

use super::cli::ModelCommand;
use crate::vault::host::Host;

/// `capvault model ...`.
pub async fn run(host: Host, command: ModelCommand) -> anyhow::Result<()> {
    #[cfg(not(feature = "semantic"))]
    {
        let _ = (host, command);
        Err(super::not_built("semantic", "capvault model"))
    }
    #[cfg(feature = "semantic")]
    match command {
        ModelCommand::Fetch {
            repo,
            revision,
            sha256,
            out,
        } => {
            use crate::semantic::fetch;
            let spec = fetch::ModelSpec::from_args(repo.as_deref(), revision.as_deref(), &sha256)
                .map_err(anyhow::Error::msg)?;
            let in_cache = out.is_none();
            let folder = match out {
                Some(dir) => dir,
                None => spec.cache_folder().ok_or_else(|| {
                    anyhow::anyhow!("no cache folder for this user: pass --out DIR")
                })?,
            };
            let report = |line: &str| eprintln!("capvault: model fetch: {line}");
            let done = fetch::fetch(&host, &spec, &folder, in_cache, &fetch::endpoint(), &report)
                .await
                .map_err(anyhow::Error::msg)?;
            let m = crate::semantic::load_model(&host, &folder).map_err(|e| {
                anyhow::anyhow!("{e} (the files match their pins, but do not load as a model)")
            })?;
            let info = m.info();
            let received: u64 = done.downloaded.iter().map(|(_, n)| n).sum();
            let mut out = std::io::stdout();
            writeln!(
                out,
                "{} at {} is in {} ({} downloaded now, {} there already; every sha256 matches \
                 its pin): {} tokens x {} dimensions.",
                spec.repo,
                spec.revision,
                folder.display(),
                if done.downloaded.is_empty() {
                    "nothing".to_owned()
                } else {
                    format!("{received} bytes")
                },
                done.present.len(),
                info.vocabulary,
                info.dimensions,
            )?;
            if in_cache && spec.is_default() {
                writeln!(out, "Serve with: capvault serve VAULT --semantic")?;
            } else {
                writeln!(
                    out,
                    "Serve with: capvault serve VAULT --embedding-model {}",
                    folder.display()
                )?;
            }
            Ok(())
        }
        ModelCommand::Import {
            source,
            out,
            dimensions,
            corpus,
        } => {
            #[cfg(feature = "import")]
            {
                use crate::semantic::import::{self, Progress};
                let last = std::sync::Mutex::new((0usize, 0usize));
                let progress = |p: Progress| {
                    let (stage, done, total, what) = match p {
                        Progress::Tokens(d, n) => (0, d, n, "tokens"),
                        Progress::Texts(d, n) => (1, d, n, "corpus texts"),
                        Progress::Epochs(d, n) => (2, d, n, "tuning passes"),
                    };
                    let tenth = done * 10 / total.max(1);
                    let mut last = last
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    if *last != (stage, tenth) {
                        *last = (stage, tenth);
                        eprintln!("capvault: model import: {done} of {total} {what}");
                    }
                };
                let made = import::import(
                    &host,
                    &source,
                    &out,
                    dimensions,
                    corpus.as_deref(),
                    &progress,
                )
                .map_err(anyhow::Error::msg)?;
                if let Some(t) = &made.tuned {
                    println!(
                        "Tuned on {} sections of the corpus ({} texts with runs of their words; \
                         {} of its words added to the vocabulary whole): held-out agreement with \
                         the transformer (mean cosine) {:.3} -> {:.3}.",
                        t.sections, t.texts, t.words, t.fit.before, t.fit.after
                    );
                } else {
                    eprintln!(
                        "capvault: model import: without --corpus the model knows each word \
                         alone; --corpus <your vault> tunes it on your notes, and it then finds \
                         them by meaning much better (README: Semantic search)."
                    );
                }
                println!(
                    "Wrote a static model of {} tokens x {} dimensions ({:.0}% of the variance) \
                     to {} in {:.0} s. Serve with --embedding-model {}",
                    made.tokens,
                    made.dimensions,
                    made.variance_kept * 100.0,
                    out.display(),
                    made.seconds,
                    out.display()
                );
                Ok(())
            }
            #[cfg(not(feature = "import"))]
            {
                let _ = (source, out, dimensions, corpus);
                Err(super::not_built("import", "capvault model import"))
            }
        }
        ModelCommand::Check { dir, text } => {
            let started = std::time::Instant::now();
            let m = crate::semantic::load_model(&host, &dir)?;
            let info = m.info();
            println!(
                "{}: {} tokens x {} dimensions, revision {}, loaded in {} ms",
                info.name,
                info.vocabulary,
                info.dimensions,
                info.revision.as_deref().unwrap_or("unknown"),
                started.elapsed().as_millis()
            );
            if let Some(t) = text {
                match m.embed(&t) {
                    Some(v) => println!(
                        "{} non-zero dimensions",
                        v.iter().filter(|x| **x != 0.0).count()
                    ),
                    None => println!("no token of the text is known to the model"),
                }
            }
            Ok(())
        }
    }
}
