"""Pages of the service (an inspector, dashboards …).

Every module in this package that defines a FastAPI ``router`` (an
:class:`fastapi.APIRouter`) is included by :func:`contextledger.server.app.create_app`, in
module-name order, with no other registration.  A page reads the ledger through
``request.app.state.service.ledger`` and the caller's tenant through
:func:`contextledger.server.deps.tenant_scope`.
"""
