"""Filter plain texts with one stage, outside a run: its signals and decisions as a table.

    python examples/filter_texts.py

``datapipe.stages.get(name, **config)`` validates the config as a manifest would;
``stage.apply(texts)`` returns a pyarrow Table with one row per text: the stage's signal columns,
``reject_reason`` and ``kept``.
"""
from datapipe.stages import get

TEXTS = [
    ("The committee met on Tuesday to discuss the new budget for the library. Members asked why the "
     "reading room closes early in winter, and the treasurer explained that heating costs rose sharply. "
     "A vote on longer opening hours was postponed until the spring meeting, when new figures arrive."),
    "buy now buy now buy now " * 30,
    "too short",
]


def main() -> list[dict]:
    stage = get("gopher_repetition")
    table = stage.apply(TEXTS, lang="en")
    rows = table.select(["gopher_top_2gram_char_frac", "reject_reason", "kept"]).to_pylist()
    for text, row in zip(TEXTS, rows):
        print(f"{row['kept']!s:5} {row['reject_reason'] or '-':40} {text[:40]!r}")
    return rows


if __name__ == "__main__":
    main()
