"""PII masking: e-mail addresses, phone numbers and IP addresses become placeholders.

Placeholders follow CS336 assignment 4 (``mask_emails``/``mask_phone_numbers``/``mask_ips``):
``|||EMAIL_ADDRESS|||``, ``|||PHONE_NUMBER|||``, ``|||IP_ADDRESS|||``. Detection works on the
original text and returns character spans (``find_pii``), so the same function is scored against
annotated spans and used for masking. The rules below were tuned on the dev split of
``benchmarks/data/pii_spans.jsonl`` (hand-labelled real pages; rules in ``PII_SPANS.md`` there) and
are measured on its test split by ``benchmarks/bench_pii.py``.

* **email**: the RFC 5322 "dot-atom" form web text uses, widened to internationalised addresses
  (RFC 6531 local parts, IDNA domains: ``иван@почта.рф``, ``info@bücher.de``, ``xn--`` TLDs). CJK and
  kana never join a local part (those scripts glue words without spaces). Not addresses: a handle
  with a leading ``@`` (``@writer``, ``@user@mastodon.social``), a "TLD" that is a file type or a
  scale label as domain (``icon@2x.png``), a host without TLD (``kulinaria@home``).
* **ip**: IPv4 dotted quads and IPv6 colon-hex tokens (``2001:db8::1``, ``::1``), validated with
  :mod:`ipaddress`. A dotted quad is a version, not an address, after a version or section word
  (``version``, ``build``, ``driver``, ``section``, ``§`` ...), after a product name (a capitalised
  word: ``Firefox 115.0.2.1``, ``Java 1.8.0.151``) unless an address word is near (``IP``,
  ``Server``, ``DNS`` ...), after ``Product/`` (user agents), before ``beta``/``rc``, or inside a
  longer dotted number (``1.2.3.4.5``).
* **phone**: :class:`phonenumbers.PhoneNumberMatcher` (libphonenumber's metadata) at
  ``Leniency.POSSIBLE`` in the page's region (``region_for``: the host's ccTLD, else the language's
  main country, else ``default_region``). A match is kept when phonenumbers calls it *valid*, or
  *possible* and either written with ``+country`` or preceded by a phone cue word (``Tel``,
  ``phone``, ``call``, ``Fax``, ``电话``, a cue glued on by extraction as in ``SubscriptionCall``...;
  the nearest cue within 40 characters counts, as Presidio's context words do). A number listed
  right after a kept one (``;``, ``,``, ``/``, "or") is kept when it is valid, has the same grouping,
  or is the local part of the previous number's area. Where the national format carries a trunk
  prefix (``0`` in DE, AT, FR, GB...; not BR's ``(67) 3316-7200``), a national number written
  without it is not valid by itself. One unbroken digit run needs ``+``, a cue, a line of its own or
  a kept number before it. Never phone numbers: a "not" cue right before (ISBN, DOI, IBAN,
  VAT/USt-IdNr., tax and company numbers, order/customer numbers, regulations, ``§``, standards
  such as ``IEC/EN``; a "not" cue names one identifier, not the numbers after it), an IBAN-shaped
  token (ISO 13616) around it, ISBN-13 (``978``/``979``) and ISBN-10 with a valid check digit
  (ISO 2108), dates (ISO, D.M.Y, D-M-YYYY), years in parentheses, runs of years, quantities
  (``3.190.000``; ``3 000 000`` unless a cue), legal references (``2016/679``), opening hours
  (``10.30-18.00``), image sizes (``1707 2560``) without a cue, a unit after (``mm``, ``€``, ``%``),
  a tab or a run of spaces inside (table layout), fewer than 7 digits, a version after a product
  name, and digits glued to an identifier (``GSK2586184``, ``cas9/1441060``, ``14847624.php``). A
  full stop after the number ends a sentence and is no glue (``Call me at (415) 555-0132.``). Runs
  the matcher cannot read are tried after ``+`` or a cue (``+43/1/479 15 23-200``,
  ``Fax: 972-3-561-3699`` as ``+972``), and North-American numbers on pages of other regions are
  checked against the US plan.

Overlaps are resolved email > ip > phone (an IP address is never also a phone number). Text that
already holds a placeholder is untouched and not counted (no ``@``/digits in a placeholder).
"""
from __future__ import annotations

import ipaddress
import re
from typing import ClassVar

import phonenumbers
import pyarrow as pa
from phonenumbers import Leniency, PhoneNumberMatcher

from datapipe.ranges import NonNegFloat
from datapipe.stage import Stage, StageConfig, merge_reasons, register, with_column

EMAIL, PHONE, IP = "email", "phone", "ip"
PLACEHOLDERS = {EMAIL: "|||EMAIL_ADDRESS|||", PHONE: "|||PHONE_NUMBER|||", IP: "|||IP_ADDRESS|||"}
_PRIORITY = {EMAIL: 0, IP: 1, PHONE: 2}
Span = tuple[int, int, str]

# ---- region --------------------------------------------------------------------------------

_SUPPORTED_REGIONS = frozenset(phonenumbers.SUPPORTED_REGIONS)
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
        if len(tld) == 2 and region in _SUPPORTED_REGIONS:
            return region
    return default_region


def region_for(host: str | None, lang: str | None, default_region: str = "US") -> str:
    """Phone region of a page: the host's ccTLD, else the page language's main country
    (``_LANG_REGIONS``: ``de`` -> DE, ``zh`` -> CN...), else ``default_region``."""
    region = region_for_host(host, "")
    return region or _LANG_REGIONS.get((lang or "").lower(), default_region)


# ---- e-mail ---------------------------------------------------------------------------------

# Scripts written without spaces (CJK, kana, hangul, full-width forms) never join a local part, or
# "请联系tech@x.cn" would take the sentence along.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_EMAIL_RE = re.compile(
    rf"(?<![.%+@\-])(?<![^\W{_CJK}])[^\W_{_CJK}](?:[^\W{_CJK}]|[.%+\-]){{0,63}}@"
    r"((?:[^\W_](?:[\w-]{0,61}[^\W_])?\.)+)"
    rf"([A-Za-z]{{2,24}}(?![A-Za-z0-9-])|xn--[A-Za-z0-9-]{{2,59}}(?![\w-])|[^\W\d_{_CJK}]{{2,24}}(?![\w-]))"
)
# File names look like addresses: a file type as "TLD", a scale label as domain ("icon@2x.png").
_FILE_EXTS = frozenset(
    "png jpg jpeg gif svg webp avif bmp ico tif tiff heic pdf css js mjs json xml html htm php asp aspx txt csv "
    "zip gz tgz rar mp3 mp4 m4a mov avi mkv webm wav ogg woff woff2 ttf otf eot".split())
_SCALE_LABEL_RE = re.compile(r"\d+(?:[.,]\d+)?x", re.IGNORECASE)


def _emails(text: str) -> list[Span]:
    out = []
    for m in _EMAIL_RE.finditer(text):
        if m.group(2).lower() in _FILE_EXTS or _SCALE_LABEL_RE.fullmatch(m.group(1).split(".", 1)[0]):
            continue
        out.append((m.start(), m.end(), EMAIL))
    return out


# ---- IP addresses ---------------------------------------------------------------------------

# Dotted quad not touching other digits/dots (so "192.0.2.146." keeps its full stop).
_IPV4_RE = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\.?\d)(?!\w)")
# Colon-hex token; an embedded IPv4 tail ("::ffff:192.0.2.1") is allowed.
_IPV6_RE = re.compile(
    r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{1,4})?(?![\w:])"
)
# A dotted quad right after one of these words is a version or a section number.
_VERSION_WORDS = frozenset(
    "version versions ver vers v release rel build rev revision firmware update patch driver kernel sdk api jdk "
    "jre section sec chapter ch clause paragraph para art article kapitel abschnitt absatz ziffer nr no number "
    "table fig figure step item rule standard iso rfc § beta alpha rc".split())
_VERSION_AFTER_RE = re.compile(r"\s*(?:beta|alpha|rc\d*|lts|final|build|-snapshot)\b", re.IGNORECASE)
# Words that announce an address, so a capitalised word before the quad is no product name.
_IP_WORDS_RE = re.compile(
    r"\b(?:ip(?:v4|s)?|address(?:es)?|adressen?|addr|server|hosts?|hostname|router|gateway|dns|proxy|resolver|"
    r"ping|inet|subnet|netmask|dhcp|lan|wan|vpn|nameserver|endpoint|firewall|client|peer)\b", re.IGNORECASE)


def _version_context(text: str, start: int, end: int) -> bool:
    """True when the number at ``start:end`` reads as a version ("Firefox 115.0.2.1", "Chrome/59.0.3071.125",
    "section 1.2.3.4", "2.0.0.16 beta")."""
    before = text[max(0, start - 40):start].rsplit("\n", 1)[-1]
    if len(before) > 1 and before[-1] == "/" and before[-2].isalpha():
        return True  # a user-agent product token
    words = before.split()
    word = words[-1].strip("()[]:,;\"'") if words else ""
    if word.lower().rstrip(".") in _VERSION_WORDS or _VERSION_AFTER_RE.match(text, end):
        return True
    # A product name ("Java", "Opera"), unless an address word comes just before it ("DNS-Server Cloudflare 1.1.1.1").
    return word[:1].isupper() and not _IP_WORDS_RE.search(" ".join(words[-3:]))


# Substrings every match of the patterns above contains, found by a fast literal-prefix scan: a text
# without one has no match, and the full patterns (which try every position) are skipped.
_IPV4_GATE_RE = re.compile(r"\.\d{1,3}\.\d{1,3}\.\d")
_IPV6_GATE_RE = re.compile(r":[0-9A-Fa-f]{0,4}:")


def _ips(text: str) -> list[Span]:
    out = []
    for m in (_IPV4_RE.finditer(text) if _IPV4_GATE_RE.search(text) else ()):
        try:
            ipaddress.IPv4Address(m.group())
        except ValueError:
            continue
        if not _version_context(text, m.start(), m.end()):
            out.append((m.start(), m.end(), IP))
    if ":" in text and _IPV6_GATE_RE.search(text):
        for m in _IPV6_RE.finditer(text):
            s = m.group()
            groups = [g for g in s.split(":") if g]
            # Two non-empty groups and a digit keep C++ "a::b" and clock times out; "::1" is the loopback.
            loopback_like = s.startswith("::") and len(groups) == 1 and groups[0].isdigit()
            if not any(c.isdigit() for c in s) or (len(groups) < 2 and not loopback_like):
                continue
            try:
                ipaddress.IPv6Address(s)
            except ValueError:
                continue
            out.append((m.start(), m.end(), IP))
    return out


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


def _judge(text: str, s: int, e: int, raw: str, number, region: str) -> str:
    """``"phone"``, ``"maybe"`` (well formed; only a phone listed right before can vouch for it) or ``"no"``."""
    digits = re.sub(r"\D", "", raw)
    valid = phonenumbers.is_valid_number(number)
    if (len(digits) < 7 or _LAYOUT_RE.search(raw) or _not_a_number_shape(raw, digits)
            or _glued(text, s, e, raw, valid) or _UNIT_AFTER_RE.match(text, e)):
        return "no"
    cue = _cue(text, s)
    if cue == "not" or (cue != "phone" and (_IMAGE_SIZE_RE.fullmatch(raw) or _SPACED_THOUSANDS_RE.fullmatch(raw))):
        return "no"
    if cue != "phone" and re.fullmatch(r"\d+(?:\.\d+){2,}", raw) and _version_context(text, s, e):
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
        line = text[text.rfind("\n", 0, s) + 1:].split("\n", 1)[0]
        return "phone" if valid and line.strip() == raw else ("maybe" if valid else "no")
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


def _phones(text: str, region: str) -> list[Span]:
    if not _PHONE_GATE_RE.search(text):
        return []
    out: list[Span] = []
    hits = list(PhoneNumberMatcher(text, region, leniency=Leniency.POSSIBLE))
    prev = None  # (end, raw, number) of the number accepted last
    for m in hits:
        verdict = _judge(text, m.start, m.end, m.raw_string, m.number, region)
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
        if any(m.start < e and s < m.end for m in hits):
            continue
        cue = _cue(text, s)
        if not (raw.startswith("+") or cue == "phone") or cue == "not":
            continue
        if _not_a_number_shape(raw, re.sub(r"\D", "", raw)) or _glued(text, s, e, raw):
            continue
        try:
            number = phonenumbers.parse(raw if raw.startswith("+") else "+" + re.sub(r"\D", "", raw), None)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_valid_number(number):
            out.append((s, e, PHONE))
    # A North-American number on a page of another region ("(555) 867-5309" on a .de page).
    if region != "US":
        for m in _NANP_RE.finditer(text):
            s, e = m.start(), m.end()
            if any(a < e and s < b for a, b, _ in out) or _glued(text, s, e, m.group()) or _cue(text, s) == "not":
                continue
            try:
                number = phonenumbers.parse(m.group(), "US")
            except phonenumbers.NumberParseException:
                continue
            if phonenumbers.is_valid_number(number) or _cue(text, s) == "phone":
                out.append((s, e, PHONE))
    return sorted(out)


def find_pii(text: str, region: str = "US", kinds: tuple[str, ...] = (EMAIL, IP, PHONE)) -> list[tuple[int, int, str]]:
    """PII spans of ``text``: sorted, non-overlapping ``(start, end, kind)`` character offsets.

    ``kind`` is ``"email"``, ``"ip"`` or ``"phone"``; ``region`` is the phonenumbers region for
    numbers written without ``+country``. On overlap the span of higher priority (email > ip >
    phone), then the longer one, wins. Pure function; raises nothing for any ``str`` input.
    """
    spans: list[tuple[int, int, str]] = []
    if EMAIL in kinds and "@" in text:
        spans += _emails(text)
    if IP in kinds:
        spans += _ips(text)
    if PHONE in kinds:
        spans += _phones(text, region)
    spans.sort(key=lambda s: (_PRIORITY[s[2]], -(s[1] - s[0]), s[0]))
    taken: list[tuple[int, int, str]] = []
    for s in spans:
        if all(s[1] <= t[0] or s[0] >= t[1] for t in taken):
            taken.append(s)
    return sorted(taken)


def mask_spans(text: str, spans: list[tuple[int, int, str]]) -> str:
    """Replace each ``(start, end, kind)`` span (sorted, non-overlapping) by its placeholder."""
    parts, pos = [], 0
    for start, end, kind in spans:
        parts.append(text[pos:start])
        parts.append(PLACEHOLDERS[kind])
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def mask_pii(text: str, region: str = "US", kinds: tuple[str, ...] = (EMAIL, IP, PHONE)) -> tuple[str, dict[str, int]]:
    """Masked text and the number of masks per kind (``{"email": n, "ip": n, "phone": n}``)."""
    spans = find_pii(text, region, kinds)
    counts = {k: 0 for k in (EMAIL, IP, PHONE)}
    for _, _, kind in spans:
        counts[kind] += 1
    return mask_spans(text, spans), counts


# CS336-style single-kind helpers: (masked text, number of masks).
def mask_emails(text: str) -> tuple[str, int]:
    masked, c = mask_pii(text, kinds=(EMAIL,))
    return masked, c[EMAIL]


def mask_phone_numbers(text: str, region: str = "US") -> tuple[str, int]:
    masked, c = mask_pii(text, region, kinds=(PHONE,))
    return masked, c[PHONE]


def mask_ips(text: str) -> tuple[str, int]:
    masked, c = mask_pii(text, kinds=(IP,))
    return masked, c[IP]


def too_much_pii(counts: dict[str, int], n_words: int, max_per_100_words: float | None) -> bool:
    """Decision rule: reject when masks per 100 words exceed ``max_per_100_words`` (None = never).

    The idea is Dolma's ``too_much_pii`` document flag (its ``pii_regex_with_counts`` taggers);
    no published threshold is copied: it comes from the manifest.
    """
    if max_per_100_words is None or n_words <= 0:
        return False
    return 100.0 * sum(counts.values()) / n_words > max_per_100_words


@register
class PIIMask(Stage):
    """Mask e-mails, phone numbers and IP addresses in ``text``; count masks per kind.

    Input batch: ``text`` (string); ``host`` and ``lang`` (strings, optional) give the phone region
    (``region_for``: ccTLD, else language, else ``default_region``). Output: the same
    rows with ``text`` masked and int32 columns ``pii_email_count``, ``pii_phone_count``,
    ``pii_ip_count``. Rejects with ``pii:too_much_pii`` only if ``max_per_100_words`` is set.
    """

    name = "pii"
    edits = ("text",)  # spans are masked in place
    reads = ("lang", "host")  # the phone numbers' region: the host's ccTLD, then the language

    class Config(StageConfig):
        #: Kinds to mask (subset of email, ip, phone).
        kinds: list[str] = [EMAIL, IP, PHONE]
        #: Region for phone numbers without +country when neither ccTLD nor language gives one.
        default_region: str = "US"
        #: Guess the phone region from the host's ccTLD, else from the page's language.
        region_from_host: bool = True
        #: Reject when masks per 100 whitespace words exceed this (>= 0; None = mask only, never reject).
        max_per_100_words: NonNegFloat | None = None

    fields: ClassVar[list[pa.Field]] = [
        pa.field("pii_email_count", pa.int32()),
        pa.field("pii_phone_count", pa.int32()),
        pa.field("pii_ip_count", pa.int32()),
    ]

    def setup(self) -> None:
        bad = set(self.config.kinds) - set(PLACEHOLDERS)
        if bad:
            raise ValueError(f"pii.kinds: unknown kinds {sorted(bad)}; allowed: email, ip, phone")
        if self.config.default_region not in _SUPPORTED_REGIONS:
            raise ValueError(f"pii.default_region {self.config.default_region!r} is not a phonenumbers region")

    def __call__(self, batch: pa.Table) -> pa.Table:
        self.ensure_setup()
        cfg = self.config
        kinds = tuple(cfg.kinds)
        texts = batch.column("text").to_pylist()
        hosts = batch.column("host").to_pylist() if "host" in batch.column_names else [None] * len(texts)
        langs = batch.column("lang").to_pylist() if "lang" in batch.column_names else [None] * len(texts)
        out_text, counts = [], {EMAIL: [], PHONE: [], IP: []}
        reasons = []
        for text, host, lang in zip(texts, hosts, langs):
            if text is None:
                out_text.append(None)
                for k in counts:
                    counts[k].append(0)
                reasons.append(None)
                continue
            region = region_for(host, lang, cfg.default_region) if cfg.region_from_host else cfg.default_region
            masked, c = mask_pii(text, region, kinds)
            out_text.append(masked)
            for k in counts:
                counts[k].append(c[k])
            reasons.append("pii:too_much_pii" if too_much_pii(c, len(text.split()), cfg.max_per_100_words) else None)
        batch = with_column(batch, "text", out_text, pa.string())
        batch = with_column(batch, "pii_email_count", counts[EMAIL], pa.int32())
        batch = with_column(batch, "pii_phone_count", counts[PHONE], pa.int32())
        batch = with_column(batch, "pii_ip_count", counts[IP], pa.int32())
        return merge_reasons(batch, reasons)
