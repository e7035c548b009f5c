"""The HTTP control plane: specs/protocol.md over Starlette, served by uvicorn (`amc serve`).

Modules, in the order a request meets them: `app` (the routes, composed), `scope` (the
first checks of every request and the kernel's answer), with `auth` (tokens, principals)
and `access` (who may touch what); `routes` (the endpoints, by resource), with `bodies`
(request decoding) and `plan` (plan validation); `wire` and `views` (responses), `problems`
(errors). Around them, in one `context`: `longpoll`, `timer`, `liveness`, `eventstream`,
`metrics` and `settings`. `server` runs it all under uvicorn.
"""
