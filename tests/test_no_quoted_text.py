"""Nothing in the repository quotes the comments a course's safety tests use (they are not ours).

Each comment is known here only by the SHA-256 (first 16 hex digits) of its lower-cased word
5-grams, so this test holds none of its words. Every tracked text file is cut the same way; a
file sharing three or more 5-grams with one comment quotes it.
"""
from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_WORD = re.compile(r"[a-z0-9*']+")
N, AT_MOST = 5, 2  # 5-grams; two shared ones can be chance ("on the talk page ...")

#: Hashes of the word 5-grams of each comment (what the course's fixture stands for -> hashes).
QUOTED = {
    "nsfw": frozenset({
        "2382819da3b73d60", "297b3f2695057954", "47ef6eef4753f91c", "679d9ba2ea3842f0", "785a9eadcf913ca1",
        "8624af2407d123cf", "929c11d899808c7d", "9d4be4cfd7953da5", "a2f66031174badea", "c30ca57fb426578b",
        "ded6ede3bd74ed32", "e25a39cc8dfa2f03", "e6768c949fc03ce7", "fa4388320c878cfa",
    }),
    "not nsfw": frozenset({
        "073f8fe60c15339f", "5ce35096517d1847", "6e410e40b0bd4ba8", "8f4e5e3ae5d86fe0", "97af8d09d50e96a0",
        "f87cfc2ab1c5735c",
    }),
    "toxic": frozenset({
        "00a72638fcc64f9f", "00db08ddd6a33670", "02dde5a2bc19d4cc", "17f9f08f9e416c17", "1acc6f9968777e2b",
        "1ec37f80dee5866b", "375067b6238859a6", "53e9a2aca37b770e", "54f8f28100e63b41", "5c13a3e134e4314a",
        "5ca5ec1735ac9d56", "61a31d59632a13a0", "687c6c82fc005eb4", "6a8b79d425cef826", "6a9c90a6f3518ecb",
        "81a075e25686767e", "821a2f04f008878d", "890478aaa91f8e7c", "8c27edac62f758b5", "921c0fb5f9f69ff0",
        "9f3eed4bf28af40d", "a3831e79b2596f94", "a771b8dd6796487f", "a96e534d5b672ce0", "ab4727813f367bd8",
        "acebf89bcffcef3e", "ad2e655ee921695c", "af5a348f2c3dccd7", "b2714345e308315d", "bf18c11bacd59aac",
        "c3f199c95aec88e1", "c5452b655fe6a331", "c921c3891dd2c74e", "cd301dc0c2b58b71", "d0495c6d57a9c743",
        "dd410a2a977e2a77", "ddbe335c25ac724e", "e7d69f3efaf58120", "e85f9123ff0e072f", "e8dca9795bbd05ec",
    }),
    "not toxic": frozenset({
        "54c72b37e66e8807", "7b2d964e4964b2e3", "9191c131d93d63e0", "9943704590c59a92", "ce8469659ef4cd09",
        "d9f2c47bde41613d", "e45509ca510e9884",
    }),
}


def gram_hashes(text: str) -> set[str]:
    words = _WORD.findall(text.lower())
    return {hashlib.sha256(" ".join(words[i:i + N]).encode()).hexdigest()[:16] for i in range(len(words) - N + 1)}


def tracked_text_files() -> list[Path]:
    try:
        names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
        files = [REPO / n for n in names.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file but the venv
        files = [p for p in REPO.rglob("*") if p.is_file() and ".venv" not in p.parts and ".git" not in p.parts]
    out = []
    for p in files:
        if p.is_file() and p.stat().st_size < 2_000_000 and b"\0" not in p.read_bytes()[:8192]:
            out.append(p)
    return out


def test_a_quote_split_over_source_lines_is_found():
    """The scan sees through how a quote sits in code: string literals cut over lines, quotes,
    capitals and punctuation; unrelated text shares nothing."""
    sentence = "Seven quiet herons stood along the grey canal before the morning ferry left its berth."
    hashes = gram_hashes(sentence)
    code = 'X = ("SEVEN quiet herons stood along "\n     "the grey canal, before the morning ferry "\n     "left its berth.")'
    assert len(hashes) == 11 and gram_hashes(code) >= hashes
    assert not gram_hashes("the article on the talk page of the project needs better sources") & set().union(
        *QUOTED.values())


def test_no_tracked_file_quotes_the_comments():
    files = tracked_text_files()
    assert len(files) > 100
    found = []
    for p in files:
        grams = gram_hashes(p.read_text(encoding="utf-8", errors="replace"))
        for what, hashes in QUOTED.items():
            if len(grams & hashes) > AT_MOST:
                found.append(f"{p.relative_to(REPO)}: the {what!r} comment ({len(grams & hashes)} of {len(hashes)} 5-grams)")
    assert not found, found
