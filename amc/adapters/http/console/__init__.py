"""The web console's static files (index.html, app.css and the ES modules of the page),
shipped as package data and served at /ui by `amc.adapters.http.routes.console`."""
