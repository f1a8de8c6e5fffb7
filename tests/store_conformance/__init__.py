"""The storage conformance suite: written once against the store contract
(``contextledger.store``), run unchanged on every backend through the ``backend_url``
fixture (SQLite file, PostgreSQL database).  Optional behaviour is gated on the
capabilities a store *declares* (``store.capabilities``), never discovered by probing.
"""
