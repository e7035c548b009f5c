"""The HTTP control plane: specs/protocol.md over Starlette, served by uvicorn (`amc serve`).

Modules, in the order a request meets them: `auth` (tokens, principals), `access` (who may
touch what), `bodies` (request decoding), `plan` (plan validation), `app` (the endpoints),
`wire` (response views), `problems` (errors); around them `longpoll`, `timer`, `metrics`
and `settings`; `server` runs it all under uvicorn.
"""
