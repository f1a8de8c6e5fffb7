"""The inspector's data layer: why the model saw what it saw, and why it did not see the
rest (seed 000 §2.5, §4.12; seed 001 §9 ContextPlan).

Pure reads of the ledger (no optional package): per-record decisions of every assembly
(:mod:`~contextledger.inspector.resolve`), why-not searches
(:mod:`~contextledger.inspector.whynot`), and the data behind the inspector's pages
(conversations, a conversation's transcript projection and branch tree, an assembly's
token bar, decisions, provenance chains and its change against the previous request).
Served as HTML by :mod:`contextledger.server.pages.inspector`.
"""
