"""On-disk formats of a run folder: the document schema, token shards."""
