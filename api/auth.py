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
WRONG = "missing or wrong bearer token; send 'Authorization: Bearer <token>'"


def configured_token(token_file: str | None = None) -> str | None:
    """The token from --token-file, $SWITCHYARD_TOKEN_FILE or $SWITCHYARD_TOKEN, surrounding blanks
    stripped (a trailing newline or space could never be sent back); None when none is set."""
    path = token_file or os.environ.get(TOKEN_FILE_ENV)
    if path:
        try:
            token = Path(path).read_text().strip()
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"token file {path!r} cannot be read ({getattr(e, 'strerror', None) or e}); "
                             "check --token-file") from None
        if not token:
            raise ValueError(f"token file {path!r} is empty; write the secret into it")
        return token
    return os.environ.get(TOKEN_ENV, "").strip() or None


def presented(authorization: bytes | str | None) -> str:
    """The credentials of an 'Authorization: Bearer ...' header; the scheme is case-insensitive (RFC 9110)."""
    if isinstance(authorization, bytes):
        authorization = authorization.decode("latin-1")
    scheme, _, cred = (authorization or "").strip().partition(" ")
    return cred.strip() if scheme.lower() == "bearer" else ""


def write_refusal(token: str | None, authorization: bytes | str | None) -> tuple[int, str] | None:
    """(status, why) when a write must be refused; None when the token matches."""
    if not token:
        return 403, HOW
    if not hmac.compare_digest(presented(authorization).encode(), token.encode()):    # constant time
        return 401, WRONG
    return None


def require_writer(request: Request, authorization: Annotated[Optional[str], Header()] = None) -> None:
    why = write_refusal(request.app.state.token, authorization)
    if why is not None:
        headers = {"WWW-Authenticate": "Bearer"} if why[0] == 401 else None
        raise HTTPException(why[0], detail=why[1], headers=headers)


Writer = Depends(require_writer)
