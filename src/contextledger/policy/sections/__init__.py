"""The sections of a policy file, one module per section (or per small family of sections);
:class:`~contextledger.policy.model.Policy` puts them together and re-exports every name.

* :mod:`.meta`: ``[policy]``.
* :mod:`.budget`: ``[budget]``, ``[recent_tail]``, ``[working_set]``, ``[candidates]``.
* :mod:`.freshness`: ``[freshness]``.
* :mod:`.privacy`: ``[privacy]``.
* :mod:`.rehydration`: ``[rehydration]``.
* :mod:`.memory`: ``[conflict]``, ``[promotion]``.
* :mod:`.recovery`: ``[recovery]``.
* :mod:`.scope`: ``[visibility]``, ``[ownership]``, ``[authority]``.
* :mod:`.retention`: ``[retention]``, ``[trace]``.
* :mod:`.tool_output`: ``[tool_output]``.

``[edits]`` and ``[tools.<name>]`` live in :mod:`contextledger.policy.tools`; the shared
field types in :mod:`contextledger.policy.fields`.
"""
