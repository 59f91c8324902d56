"""The ``topic`` stage (any fastText model -> label column) and domain rules that read it."""
import pyarrow as pa

from datapipe.stages.phases.tokenize.mixture import DomainAssigner, MixConfig
from datapipe.stages.topic import Topic, TopicConfig


def test_topic_labels_drive_domains(data_dir):
    d = data_dir / "golden" / "cs336_a4"
    texts = [(d / "high_quality_wiki_reference.txt").read_text(), (d / "low_quality_cc.txt").read_text(), "Bonjour"]
    batch = pa.table({"id": ["w", "c", "f"], "text": texts, "lang": ["en", "en", "fr"],
                      "url": ["http://a.org/x"] * 3, "host": ["a.org"] * 3})
    # The shipped wiki-vs-cc model (its MODEL_CARD: these fixtures score 0.96 wiki / 0.97 cc) as a
    # two-topic model; French is not scored.
    out = Topic(TopicConfig(model_path="quality_wiki_cc.ftz", languages=["en"]))(batch)
    assert out.column("topic").to_pylist() == ["wiki", "cc", None]
    scores = out.column("topic_score").to_pylist()
    assert scores[0] > 0.9 and scores[1] > 0.9 and scores[2] is None
    assert "reject_reason" not in out.column_names  # labels only, never a rejection
    mix = MixConfig(rules=[{"domain": "encyclopedic", "column": "topic", "equals": "wiki"}], default_domain="web")
    assert DomainAssigner(mix)(out) == ["encyclopedic", "web", "web"]


def test_min_score_leaves_unsure_documents_unlabelled(data_dir):
    d = data_dir / "golden" / "cs336_a4"
    batch = pa.table({"id": ["w"], "text": [(d / "high_quality_wiki_reference.txt").read_text()], "lang": ["en"]})
    out = Topic(TopicConfig(model_path="quality_wiki_cc.ftz", min_score=0.999999))(batch)
    assert out.column("topic").to_pylist() == [None] and out.column("topic_score").to_pylist() == [None]
