"""Phone number spans for the ``pii`` stage, and the phonenumbers region of a page (rules: the
``stages/pii.py`` docstring, **phone**)."""
from __future__ import annotations

import bisect
import re

import phonenumbers
from phonenumbers import Leniency, PhoneNumberMatcher

from datapipe.stages.lib.pii_ip import version_context
from datapipe.stages.lib.pii_kinds import PHONE, Span

# ---- region --------------------------------------------------------------------------------

SUPPORTED_REGIONS = frozenset(phonenumbers.SUPPORTED_REGIONS)
_TLD_REGION_ALIASES = {"uk": "GB"}
# Language (lid.176 code) -> the region where most of its pages are written; only languages with
# one clearly dominant country ("en", "ar" have none and keep the default).
_LANG_REGIONS = {
    "de": "DE", "fr": "FR", "es": "ES", "it": "IT", "pl": "PL", "pt": "BR", "nl": "NL", "ru": "RU", "ja": "JP",
    "zh": "CN", "ko": "KR", "uk": "UA", "cs": "CZ", "sk": "SK", "sv": "SE", "da": "DK", "fi": "FI", "no": "NO",
    "nb": "NO", "nn": "NO", "hu": "HU", "tr": "TR", "el": "GR", "ro": "RO", "bg": "BG", "he": "IL", "id": "ID",
    "vi": "VN", "th": "TH", "hr": "HR", "sl": "SI", "lt": "LT", "lv": "LV", "et": "EE", "is": "IS", "fa": "IR",
}


def region_for_host(host: str | None, default_region: str = "US") -> str:
    """Phone-number region (ISO 3166 alpha-2, upper case) guessed from a host's TLD.

    ``"www.example.de"`` -> ``"DE"``; ``.uk`` -> ``"GB"``; generic TLDs (``.com``) or unknown
    hosts -> ``default_region``. Source of the mapping: the ccTLD equals the ISO code except ``uk``.
    """
    if host:
        tld = host.rstrip(".").rsplit(".", 1)[-1].lower()
        region = _TLD_REGION_ALIASES.get(tld, tld.upper())
        if len(tld) == 2 and region in SUPPORTED_REGIONS:
            return region
    return default_region


def region_for(host: str | None, lang: str | None, default_region: str = "US") -> str:
    """Phone region of a page: the host's ccTLD, else the page language's main country
    (``_LANG_REGIONS``: ``de`` -> DE, ``zh`` -> CN...), else ``default_region``."""
    region = region_for_host(host, "")
    return region or _LANG_REGIONS.get((lang or "").lower(), default_region)


# ---- phone numbers --------------------------------------------------------------------------

_LOCAL_ONLY = phonenumbers.ValidationResult.IS_POSSIBLE_LOCAL_ONLY
_POSSIBLE = (phonenumbers.ValidationResult.IS_POSSIBLE, _LOCAL_ONLY)
# Cheap gate: seven digits with at most three separator characters between neighbours.
_PHONE_GATE_RE = re.compile(r"\d(?:[\s().\-/\u2010-\u2015]{0,3}\d){6}")
# A digit run the matcher may not read ("+43/1/479 15 23-200"); tried after a cue or a "+".
_RUN_RE = re.compile(r"\+?\(?\d(?:[ ().\-/\u2010-\u2015]{0,3}\d){6,}")
# Cue words before a number, in the languages of the sample (nearest cue within 40 characters wins).
_PHONE_CUE_RE = re.compile(
    r"(?:\b(?:tel|t[eé]l[eé]?f?|tfno|tlf|telf|phone|telephone|t[eé]l[eé]phone|tel[eé]fono|fone|fon|fax|"
    r"mobil[a-z]*|mobile|cell(?:phone)?|handy|call(?:\s+us|\s+me)?|anrufen|ruf|notruf|whatsapp|signal|sms|"
    r"textphone|toll[- ]free|kontakt|contact(?:o|ez)?|телефон[а-я]*|тел|факс)\b"
    r"|(?:hotline|telefon[a-z]*|telefax)\b"  # German compounds end in the cue: "Kundenhotline"
    r"|电话|電話|传真|手机|热线|هاتف|فاكس|جوال|☎|✆|📞|📱|☏)[\s.:：\-()]*", re.IGNORECASE)
# A cue glued to the word before by extraction ("SubscriptionCall 1800 1200 004"); case-sensitive.
_GLUED_CUE_RE = re.compile(r"(?<=[a-zà-ÿ])(?:Call|Tel|Phone|Fax|Fon|Telefon|Kontakt|Contact|Hotline)\b[\s.:：\-()]*")
_NOT_PHONE_CUE_RE = re.compile(
    r"(?:\b(?:isbn(?:-1[03])?|issn|doi|pmid|pmcid|arxiv|iban|bic|swift|blz|bankleitzahl|konto(?:nummer|-?nr)?|"
    r"kto|account|acct|rekening|vat|ust|ust-?id[a-z.-]*|uid|mwst|steuer(?:nummer|-?nr|-?id)|st\.?-?nr|tax|cnpj|"
    r"cpf|nip|regon|krs|nit|zvr(?:-zahl)?|codice\s+fiscale|p\.?\s?iva|partita\s+iva|siren|siret|rcs|hrb|hra|"
    r"handelsregister|registergericht|amtsgericht|company\s+(?:no|number|reg[a-z]*)|"
    r"reg(?:istration|istered)?\.?\s*(?:no|nr|number)|art\.?-?nr|artikel(?:nummer|-?nr)|bestell(?:nummer|-?nr)|"
    r"(?:order|item|product|invoice)\s*(?:no|nr|number|id|code|#)|kunden(?:nummer|-?nr)|auftrags?(?:nummer|-?nr)|"
    r"rechnungs?(?:nummer|-?nr)|aktenzeichen|az|drucksache|icp|oldid|curid|id|ref|verordnung|regulation|"
    r"directive|richtlinie|gesetz|decreto|d[eé]cret|plz|cep|zip|postfach|isin|wkn|ean|gtin|sku|qq)\b"
    r"|§|备|标识码|商品)", re.IGNORECASE)
# Technical standards ("IEC/EN 62053-21"); case-sensitive since "en" is a French and Spanish word.
_STANDARD_RE = re.compile(r"\b(?:DIN|EN|IEC|ISO|ASTM|IEEE|ANSI|ETSI|VDE|ÖNORM)\b")
_DATE_START_RE = re.compile(r"(?:1[89]|20)\d\d[-/.](?:0?[1-9]|1[0-2])[-/.](?:0?[1-9]|[12]\d|3[01])")
_DMY_RE = re.compile(r"(?<!\d)(?:0?[1-9]|[12]\d|3[01])\s?[./]\s?(?:0?[1-9]|1[0-2])\s?[./]\s?(?:\d{4}|\d{2})(?!\d)"
                     r"|(?<!\d)(?:0?[1-9]|[12]\d|3[01])-(?:0?[1-9]|1[0-2])-(?:19|20)\d\d(?!\d)")
# Thousands groups ("3.190.000", "1,373,900") and decimals.
_QUANTITY_RE = re.compile(r"\d{1,3}(?:\.\d{3})+(?:,\d+)?|\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d{1,3}(?:'\d{3})+|\d+[.,]\d+")
# Thousands in spaces ("3 000 000"); a cue wins, as "Tél : 71 341 066" (TN) is grouped the same way.
_SPACED_THOUSANDS_RE = re.compile(r"[1-9]\d{0,2}(?:[ \u00a0\u202f]\d{3})+")
# "2016/679", "1/79", "455/2021": regulations, court files, report numbers.
_LEGAL_REF_RE = re.compile(r"(?:19|20)\d\d\s?/\s?\d{1,5}|\d{1,5}\s?/\s?(?:19|20)\d\d")
_YEAR_PAREN_RE = re.compile(r"\((?:1[89]|20)\d\d\)")
_CLOCK_RANGE_RE = re.compile(r"\d{1,2}[.:]\d{2}\s*[-–]\s*\d{1,2}[.:]\d{2}")  # opening hours
_IMAGE_SIZE_RE = re.compile(r"[1-9]\d{2,3}\s?[x×]?\s?[1-9]\d{2,3}")  # "1707 2560", "1200x676"
_ISBN10_RE = re.compile(r"\d{1,5}[- ]\d{1,7}[- ]\d{1,7}[- ][\dX]")
# ISO 13616 IBAN shape: country, check digits, groups of four ("DE68 1002 0500 0001 0379 00").
_IBAN_RE = re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,3})?\b")
_LAYOUT_RE = re.compile(r"[\t\n]|\s{2,}")  # a tab, line break or run of spaces: table cells
_UNIT_AFTER_RE = re.compile(
    r"[ \u00a0]?(?:mm|cm|km|m|kg|g|t|kw|kwh|mw|px|pt|mb|gb|%|€|eur|euro|usd|\$|chf|st\.|stück|x)(?!\w)", re.IGNORECASE)
_NANP_RE = re.compile(r"(?<![\w+])(?:\+?1[-. ]?)?(?:\(\d{3}\)[-. ]?|\d{3}[-. ])\d{3}[-. ]\d{4}(?![\w-])")
_LIST_GAP_RE = re.compile(r"[\s,;/|]*(?:or|oder|und|and|o|y|et|ou|или|и)?[\s,;/|]*", re.IGNORECASE)


def _cue(text: str, start: int) -> str | None:
    """``"phone"`` or ``"not"`` from the nearest cue word in the 40 characters (same line) before ``start``.

    A "not" cue with other digits between it and ``start`` belongs to those digits."""
    before = text[max(0, start - 40):start].rsplit("\n", 1)[-1]
    best, kind = -1, None
    for rx, k in ((_PHONE_CUE_RE, "phone"), (_GLUED_CUE_RE, "phone"), (_NOT_PHONE_CUE_RE, "not"), (_STANDARD_RE, "not")):
        for m in rx.finditer(before):
            if m.end() > best:
                best, kind = m.end(), k
    # A "not" cue names one identifier ("CEP 79020-250 - ... (67) 3316-7200"); a phone cue may head a list.
    if kind == "not" and re.search(r"\d\d", before[best:]):
        return None
    return kind


def _isbn10_ok(digits: str) -> bool:
    """ISO 2108 ISBN-10 check digit (weights 10..1, sum divisible by 11; X = 10)."""
    return len(digits) == 10 and sum((10 - i) * (10 if c in "Xx" else int(c)) for i, c in enumerate(digits)) % 11 == 0


def _not_a_number_shape(raw: str, digits: str) -> bool:
    """Dates, year runs, quantities, legal references, opening hours, ISBNs."""
    if (len(digits) == 13 and raw.startswith(("978", "979"))) or (
            _ISBN10_RE.fullmatch(raw) and _isbn10_ok(re.sub(r"[^\dXx]", "", raw))):
        return True
    if _DATE_START_RE.match(raw) or _DMY_RE.search(raw) or _QUANTITY_RE.fullmatch(raw):
        return True
    if _LEGAL_REF_RE.fullmatch(raw) or _CLOCK_RANGE_RE.search(raw) or _YEAR_PAREN_RE.search(raw):
        return True
    groups = re.findall(r"\d+", raw)
    return len(groups) > 1 and all(len(g) == 4 and g[:2] in ("19", "20") for g in groups)


def _glued(text: str, s: int, e: int, raw: str, valid: bool = False) -> bool:
    """Digits that continue an identifier, URL or file name ("GSK2586184", "ange.202312147",
    "14847624.php", "10:20:0022.06"). A full stop ending a sentence is no glue."""
    if s > 0:
        p = text[s - 1]
        # Extraction glues words onto numbers ("Beratung0800 433 88 77 66"): a spaced, valid number
        # written with its trunk prefix or "+" survives.
        if p.isalnum() and not (" " in raw and valid and raw[0] in "0+("):
            return True
        if p in "/=_#@&?" or (p in ".-" and s > 1 and text[s - 2].isalnum()) or (p == ":" and s > 1 and text[s - 2].isdigit()):
            return True
    if e < len(text):
        n = text[e]
        if n in "=_#@%‰" or (n == "/" and not raw.startswith("+")):  # "+54 9 11 4556-9147/48" keeps its number
            return True
        if n in ".-" and e + 1 < len(text) and text[e + 1].isalnum():
            return True
    return False


def _trunk_prefix(region: str) -> str | None:
    """The national (trunk) prefix of ``region`` ("0" in DE, FR, GB), None where there is none or it is NANP's "1"."""
    meta = phonenumbers.PhoneMetadata.metadata_for_region(region)
    prefix = meta.national_prefix if meta is not None else None
    return prefix if prefix not in (None, "", "1") else None


class _Lines:
    """Where the stripped line holding a position starts and ends; newlines are found once per text
    and each line is stripped once, so asking for every match costs linear time in all (a
    search from each match back to its line's start is quadratic on one long line of numbers)."""

    def __init__(self, text: str):
        self.text = text
        self._breaks: list[int] | None = None
        self._bounds: dict[int, tuple[int, int]] = {}

    def stripped(self, pos: int) -> tuple[int, int]:
        """``(start, end)`` of the line holding ``pos`` without its surrounding whitespace."""
        if self._breaks is None:
            self._breaks = [m.start() for m in re.finditer("\n", self.text)]
        k = bisect.bisect_left(self._breaks, pos)  # newlines before pos
        if k not in self._bounds:
            ls = self._breaks[k - 1] + 1 if k else 0
            le = self._breaks[k] if k < len(self._breaks) else len(self.text)
            line = self.text[ls:le]
            self._bounds[k] = (ls + len(line) - len(line.lstrip()), ls + len(line.rstrip()))
        return self._bounds[k]


def _overlaps(starts: list[int], ends: list[int], s: int, e: int) -> bool:
    """Whether ``[s, e)`` overlaps one of the sorted, non-overlapping spans ``starts[i]:ends[i]``."""
    i = bisect.bisect_left(starts, e) - 1  # the last span starting before e
    return i >= 0 and ends[i] > s


def _judge(text: str, s: int, e: int, raw: str, number, region: str, lines: _Lines | None = None) -> str:
    """``"phone"``, ``"maybe"`` (well formed; only a phone listed right before can vouch for it) or ``"no"``."""
    digits = re.sub(r"\D", "", raw)
    valid = phonenumbers.is_valid_number(number)
    if (len(digits) < 7 or _LAYOUT_RE.search(raw) or _not_a_number_shape(raw, digits)
            or _glued(text, s, e, raw, valid) or _UNIT_AFTER_RE.match(text, e)):
        return "no"
    cue = _cue(text, s)
    if cue == "not" or (cue != "phone" and (_IMAGE_SIZE_RE.fullmatch(raw) or _SPACED_THOUSANDS_RE.fullmatch(raw))):
        return "no"
    if cue != "phone" and re.fullmatch(r"\d+(?:\.\d+){2,}", raw) and version_context(text, s, e):
        return "no"
    if any(m.start() < e and s < m.end() for m in _IBAN_RE.finditer(text, max(0, s - 48), min(len(text), e + 48))):
        return "no"
    # Where the national format carries a trunk prefix (DE "030 ...", FR "01 ..."), digits without
    # it or "+" are at best a local number ("192 / 233-238" in a table is "valid" in AT): a cue must
    # vouch for them. Plans that format without it (BR "(67) 3316-7200") are not affected.
    international = raw.startswith("+")
    trunk = _trunk_prefix(region)
    if valid and trunk and not international and not digits.startswith(trunk):
        national = re.sub(r"\D", "", phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL))
        valid = not national.startswith(trunk)
    if raw.strip("()").lstrip("+").isdigit() and not international and cue != "phone":
        # One unbroken run of digits is mostly an id ("4424505176"); alone on its line, or listed
        # after a phone number, it may be one.
        alone = (lines or _Lines(text)).stripped(s) == (s, e)  # the line, stripped, is raw (= text[s:e])
        return "phone" if valid and alone else ("maybe" if valid else "no")
    possible = phonenumbers.is_possible_number_with_reason(number) in _POSSIBLE
    if valid or (possible and (cue == "phone" or international)):
        return "phone"
    return "maybe" if possible else "no"


def _continues(prev_raw: str, prev_number, raw: str, number) -> bool:
    """A number listed right after an accepted one: valid by itself, the same digit grouping
    ("225-8452; 225-8458"), or the previous number's area code plus these digits is valid
    ("021-54098575 54098577")."""
    if phonenumbers.is_valid_number(number) or re.sub(r"\d", "d", prev_raw) == re.sub(r"\d", "d", raw):
        return True
    nsn = phonenumbers.national_significant_number(prev_number)
    ndc = phonenumbers.length_of_national_destination_code(prev_number)
    if ndc <= 0:
        return False
    try:
        joined = phonenumbers.parse(nsn[:ndc] + re.sub(r"\D", "", raw), phonenumbers.region_code_for_number(prev_number))
    except phonenumbers.NumberParseException:
        return False
    return phonenumbers.is_valid_number(joined) and len(phonenumbers.national_significant_number(joined)) == len(nsn)


class TooManyCandidates(Exception):
    """A text holds more phone-number candidates than the caller's budget (``max_candidates``)."""


def phones(text: str, region: str, max_candidates: int | None = None) -> list[Span]:
    """Phone spans of ``text``. ``max_candidates``: most candidates (matcher hits plus digit runs
    and North-American numbers parsed) examined before TooManyCandidates is raised; each costs
    about 0.1-0.5 ms of phonenumbers parsing, so the cap bounds a page's time by its content."""
    if not _PHONE_GATE_RE.search(text):
        return []
    out: list[Span] = []
    budget = [max_candidates]

    def spend() -> None:
        if budget[0] is not None:
            budget[0] -= 1
            if budget[0] < 0:
                raise TooManyCandidates(max_candidates)

    hits = []
    for m in PhoneNumberMatcher(text, region, leniency=Leniency.POSSIBLE):  # in order, disjoint
        spend()
        hits.append(m)
    hit_starts, hit_ends = [m.start for m in hits], [m.end for m in hits]
    lines = _Lines(text)
    prev = None  # (end, raw, number) of the number accepted last
    for m in hits:
        verdict = _judge(text, m.start, m.end, m.raw_string, m.number, region, lines)
        if (verdict == "maybe" and prev is not None and _LIST_GAP_RE.fullmatch(text, prev[0], m.start)
                and _continues(prev[1], prev[2], m.raw_string, m.number)):
            verdict = "phone"
        if verdict == "phone":
            out.append((m.start, m.end, PHONE))
            prev = (m.end, m.raw_string, m.number)
        else:
            prev = None
    # Runs the matcher does not read: international numbers it refuses ("+43/1/479 15 23-200") and,
    # after a cue, a country code written without "+" ("Fax: 972-3-561-3699").
    for r in _RUN_RE.finditer(text):
        s, e, raw = r.start(), r.end(), r.group()
        if _overlaps(hit_starts, hit_ends, s, e):
            continue
        cue = _cue(text, s)
        if not (raw.startswith("+") or cue == "phone") or cue == "not":
            continue
        if _not_a_number_shape(raw, re.sub(r"\D", "", raw)) or _glued(text, s, e, raw):
            continue
        spend()
        try:
            number = phonenumbers.parse(raw if raw.startswith("+") else "+" + re.sub(r"\D", "", raw), None)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_valid_number(number):
            out.append((s, e, PHONE))
    # A North-American number on a page of another region ("(555) 867-5309" on a .de page).
    if region != "US":
        # Matcher spans and runs are disjoint (runs skip matcher spans), and NANP matches are disjoint
        # from each other: checking against the spans found so far is enough.
        found = sorted(out)
        starts, ends = [a for a, _, _ in found], [b for _, b, _ in found]
        for m in _NANP_RE.finditer(text):
            s, e = m.start(), m.end()
            if _overlaps(starts, ends, s, e) or _glued(text, s, e, m.group()) or _cue(text, s) == "not":
                continue
            spend()
            try:
                number = phonenumbers.parse(m.group(), "US")
            except phonenumbers.NumberParseException:
                continue
            if phonenumbers.is_valid_number(number) or _cue(text, s) == "phone":
                out.append((s, e, PHONE))
    return sorted(out)
