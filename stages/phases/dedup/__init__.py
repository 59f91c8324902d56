"""Global deduplication: exact, line-level, paragraph n-gram and MinHash LSH near-duplicates over
the whole run (the phase is ``phase.DedupPhase``; its configuration ``config.DedupConfig``)."""
