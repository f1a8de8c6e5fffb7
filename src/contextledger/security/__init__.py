"""Secrets, restricted payloads, retention and deletion (seed 000 §4.15, §8 R2, R3, R12).

* :mod:`~contextledger.security.secrets` — secret classification and redaction;
* :mod:`~contextledger.security.screen` — the record-time hooks;
* :mod:`~contextledger.security.reveal` — showing a restricted payload on an explicit,
  recorded request.
"""
