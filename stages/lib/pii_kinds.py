"""The kinds of PII the ``pii`` stage masks (``stages/pii.py``), their placeholders and overlap priority."""
from __future__ import annotations

EMAIL, PHONE, IP = "email", "phone", "ip"
PLACEHOLDERS = {EMAIL: "|||EMAIL_ADDRESS|||", PHONE: "|||PHONE_NUMBER|||", IP: "|||IP_ADDRESS|||"}
PRIORITY = {EMAIL: 0, IP: 1, PHONE: 2}
Span = tuple[int, int, str]
