"""Write endpoints need a bearer token; with none configured they are off (403, saying how to enable)."""
from __future__ import annotations

import hmac
import os
from pathlib import Path
from typing import Annotated, Optional

from fastapi import Depends, Header, HTTPException, Request

TOKEN_ENV, TOKEN_FILE_ENV = "SWITCHYARD_TOKEN", "SWITCHYARD_TOKEN_FILE"
HOW = ("write endpoints are disabled: start the daemon with SWITCHYARD_TOKEN=<secret> (or "
       "tuner serve --token-file PATH), then send 'Authorization: Bearer <secret>'")


def configured_token(token_file: str | None = None) -> str | None:
    path = token_file or os.environ.get(TOKEN_FILE_ENV)
    if path:
        try:
            token = Path(path).read_text().strip()
        except OSError as e:
            raise ValueError(f"token file {path!r} cannot be read ({e.strerror}); check --token-file") from None
        if not token:
            raise ValueError(f"token file {path!r} is empty; write the secret into it")
        return token
    return os.environ.get(TOKEN_ENV) or None


def require_writer(request: Request, authorization: Annotated[Optional[str], Header()] = None) -> None:
    token = request.app.state.token
    if not token:
        raise HTTPException(403, detail=HOW)
    given = authorization[7:] if authorization and authorization.startswith("Bearer ") else ""
    if not hmac.compare_digest(given.encode(), token.encode()):     # constant time
        raise HTTPException(401, detail="missing or wrong bearer token; send 'Authorization: Bearer <token>'",
                            headers={"WWW-Authenticate": "Bearer"})


Writer = Depends(require_writer)
