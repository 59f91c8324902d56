"""Libraries the stages and phases share: word splitting, word lists, charset detection,
the extraction sandbox, text normalization and the MinHash kernel. Nothing here is registered."""
