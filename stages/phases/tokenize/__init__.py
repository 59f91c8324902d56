"""Phase ``tokenize``: domain mixing to target weights and token shards (sections ``mix`` and ``tokenize``)."""
