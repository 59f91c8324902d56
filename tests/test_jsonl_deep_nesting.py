"""One JSON line nested deeper than the parser allows costs that line only (read:invalid_json)."""
import json

from datapipe.io.jsonl import read_jsonl


def test_deeply_nested_line_errors_alone(tmp_path):
    deep = "[" * 200_000 + "]" * 200_000  # 400 KB; json's C parser raises RecursionError at ~1000 levels
    lines = [json.dumps({"id": "a", "text": "first"}),
             '{"id": "b", "text": "deep", "meta": ' + deep + "}",
             deep,
             json.dumps({"id": "c", "text": "last"})]
    p = tmp_path / "docs.jsonl"
    p.write_text("\n".join(lines) + "\n")
    items = list(read_jsonl(str(p)))
    assert [(it.status, it.reason) for it in items] == [
        ("document", None), ("errored", "read:invalid_json"), ("errored", "read:invalid_json"), ("document", None)]
    assert [it.row["text"] for it in items if it.status == "document"] == ["first", "last"]
    assert items[1].detail.startswith("line 2: nested deeper")
    assert items[2].detail.startswith("line 3: nested deeper")
    # the errored line's place: its byte offset and length in the file
    assert items[1].row["warc_offset"] == len(lines[0]) + 1
