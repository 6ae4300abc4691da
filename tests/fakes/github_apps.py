"""The fake GitHub's App manifest flow: the "create GitHub App" page and the code's conversion.

GitHub's web side (github.com/settings/apps/new, or an organisation's) takes the posted
manifest, asks its user to confirm, registers the App and sends the browser to the manifest's
redirect_url with a one-time code and the state; POST /app-manifests/{code}/conversions trades
the code (once, within an hour) for the App's id, webhook secret and private key.
"""

from __future__ import annotations

import json
import secrets
import time
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import urlencode

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from flask import redirect, request

# GitHub's web pages (not REST calls): what a browser opens, never the bot.
WEB_PAGES = ("/settings/apps/new", "/organizations/", "/apps/", "/fake/")
# Paths of the flow that take no credentials: GitHub's web pages and the conversion.
OPEN_PATHS = (*WEB_PAGES, "/app-manifests/")
# The pages ask for no favicon (a data: URL), so the browser logs no failed request.
HEAD = '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,">'

CODE_LIFETIME_SECONDS = 3600.0


class AppManifestRoutes:
    """The manifest flow's routes; FakeGitHub mixes them in."""

    app: Any
    url: str
    app_id: int | None
    public_key: str | None

    def _init_manifest_flow(self) -> None:
        # code -> (the App it registers, when it was made, whether it was traded already)
        self.manifest_codes: dict[str, dict[str, Any]] = {}
        self.registered_apps: list[dict[str, Any]] = []
        self.code_lifetime = CODE_LIFETIME_SECONDS
        self.viewer = "octocat"  # who is "logged in" to the fake's web pages
        self._app_ids = iter(range(424_242, 10**9))
        self._manifest_routes()

    @staticmethod
    def open_path(path: str) -> bool:
        """Whether ``path`` is a page or call of the flow (no credentials needed)."""
        return path.startswith(OPEN_PATHS)

    def _manifest_routes(self) -> None:
        app = self.app

        @app.post("/settings/apps/new")
        def new_app() -> Any:
            return self._confirmation(None)

        @app.post("/organizations/<org>/settings/apps/new")
        def new_org_app(org: str) -> Any:
            return self._confirmation(org)

        @app.post("/fake/confirm-app")
        def confirm() -> Any:
            manifest = json.loads(request.form["manifest"])
            manifest["name"] = request.form.get("name") or manifest["name"]
            code = self.register(manifest, request.form.get("org") or None)
            query = urlencode({"code": code, "state": request.form.get("state", "")})
            return redirect(f"{manifest['redirect_url']}?{query}", code=302)

        @app.post("/app-manifests/<code>/conversions")
        def conversion(code: str) -> Any:
            found = self.manifest_codes.get(code)
            if found is None or found["used"]:
                return {
                    "message": "Not Found",
                    "documentation_url": "https://docs.github.com/rest/apps/apps"
                    "#create-a-github-app-from-a-manifest",
                    "status": "404",
                }, 404
            if time.monotonic() - found["made"] > self.code_lifetime:
                return {
                    "message": "Validation Failed",
                    "errors": [{"resource": "Code", "code": "expired"}],
                    "status": "422",
                }, 422
            found["used"] = True
            return found["app"], 201

        @app.get("/apps/<slug>/installations/new")
        def install(slug: str) -> Any:
            name = escape(slug)
            return f"{HEAD}<title>Install {name}</title><h1>Install {name}</h1>"

    def _confirmation(self, org: str | None) -> Any:
        """GitHub's "Create GitHub App" page for the posted manifest."""
        raw = request.form.get("manifest", "")
        try:
            manifest = json.loads(raw)
        except ValueError:
            return f"{HEAD}<p>Invalid GitHub App configuration</p>", 422
        state = request.args.get("state", "")
        owner = org or self.viewer
        return f"""{HEAD}
<title>Create GitHub App</title>
<h1>Create GitHub App for {escape(owner)}</h1>
<form method="post" action="/fake/confirm-app">
  <label>GitHub App name <input name="name" value="{escape(str(manifest.get("name", "")))}"></label>
  <input type="hidden" name="manifest" value="{escape(raw)}">
  <input type="hidden" name="state" value="{escape(state)}">
  <input type="hidden" name="org" value="{escape(org or "")}">
  <button type="submit">Create GitHub App for {escape(owner)}</button>
</form>"""

    def register(self, manifest: dict[str, Any], org: str | None = None) -> str:
        """Register an App from ``manifest`` as GitHub does; returns its one-time code.

        The fake then accepts the new App's JWT, as GitHub accepts a registered App's.
        """
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        ).decode()
        app_id = next(self._app_ids)
        slug = str(manifest["name"]).lower().replace(" ", "-")
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        owner = org or self.viewer
        registered = {
            "id": app_id,
            "slug": slug,
            "node_id": f"A_kwDO{app_id}",
            "owner": {
                "login": owner,
                "id": 1,
                "type": "Organization" if org else "User",
                "html_url": f"{self.url}/{owner}",
            },
            "name": manifest["name"],
            "description": manifest.get("description", ""),
            "external_url": manifest.get("url", ""),
            "html_url": f"{self.url}/apps/{slug}",
            "created_at": now,
            "updated_at": now,
            "permissions": manifest.get("default_permissions", {}),
            "events": manifest.get("default_events", []),
            "installations_count": 0,
            "client_id": f"Iv1.{secrets.token_hex(8)}",
            "client_secret": secrets.token_hex(20),
            "webhook_secret": secrets.token_hex(20),
            "pem": pem,
        }
        self.registered_apps.append({"manifest": manifest, **registered})
        self.app_id = app_id
        self.public_key = (
            key.public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )
        code = secrets.token_hex(10)
        self.manifest_codes[code] = {"app": registered, "made": time.monotonic(), "used": False}
        return code
