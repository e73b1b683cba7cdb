"""Rotating webhook and mechanism signing secrets: during the grace period every
message carries two Standard Webhooks signatures, and a verifier holding either secret — the
``standardwebhooks`` library on the receiving side, the reference server on the sampling side —
accepts it; afterwards only the new secret does."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError
from starlette.requests import Request
from starlette.responses import Response

from app.auth.rotation import DEFAULT_GRACE_SECONDS, rotate_secret, signing_secrets
from app.models.alarms import Webhook as WebhookRow
from app.models.mechanisms import Mechanism
from app.reference.server import endpoint_app, reference_app
from app.sampling.client import MechanismEndpoint, SamplingClient, SamplingClientConfig
from app.sampling.protocol import (
    SamplingError,
    encode_request,
    generate_secret,
    sign_headers,
)
from tests.support.api_helpers import create_mechanism, create_webhook
from tests.support.sampling_server import serve_app

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


def _accepts(secret: str, body: bytes, headers: dict[str, str]) -> bool:
    try:
        Webhook(secret).verify(body, headers)
        return True
    except WebhookVerificationError:
        return False


# ------------------------------------------------------------------------------------ pure parts


def test_two_signatures_verify_with_either_secret_and_no_other() -> None:
    old, new, stranger = generate_secret(), generate_secret(), generate_secret()
    body = b'{"type":"webhook.test"}'
    headers = sign_headers((new, old), "msg_1", body)
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert all(part.startswith("v1,") for part in headers["webhook-signature"].split(" "))
    assert _accepts(old, body, headers) and _accepts(new, body, headers)
    assert not _accepts(stranger, body, headers)
    assert not _accepts(old, body + b" ", headers)
    assert sign_headers(new, "msg_1", body, timestamp=1)["webhook-signature"] == \
        sign_headers([new], "msg_1", body, timestamp=1)["webhook-signature"]
    with pytest.raises(ValueError):
        sign_headers((), "msg_1", body)


class _Row:
    def __init__(self, secret: str) -> None:
        self.secret, self.previous_secret, self.previous_secret_expires_at = secret, None, None


def test_rotate_secret_keeps_the_last_two_for_the_grace_period() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    a, b, c = generate_secret(), generate_secret(), generate_secret()
    row = _Row(a)
    assert signing_secrets(row, now) == (a,)
    expires = rotate_secret(row, b, DEFAULT_GRACE_SECONDS, now)
    assert expires == now + timedelta(hours=24)
    assert signing_secrets(row, now) == (b, a)
    assert signing_secrets(row, expires - timedelta(seconds=1)) == (b, a)
    assert signing_secrets(row, expires) == (b,)
    # Rotating again during the grace period: only the last two stay live.
    rotate_secret(row, c, 60, now)
    assert signing_secrets(row, now) == (c, b)
    # grace 0: switch at once.
    assert rotate_secret(row, a, 0, now) is None and signing_secrets(row, now) == (a,)
    with pytest.raises(ValueError):
        rotate_secret(row, a, 60, now)
    with pytest.raises(ValueError):
        rotate_secret(row, b, -1, now)


def test_the_reference_server_accepts_any_of_its_secrets() -> None:
    old, new, stranger = generate_secret(), generate_secret(), generate_secret()
    body = encode_request([0] * 9 + [1], 3, "r-0", "m", 0)
    with TestClient(reference_app([old, new], change_period=10**6)) as ref:
        for signers, status in (((old,), 200), ((new,), 200), ((new, old), 200), ((stranger,), 401)):
            headers = {**sign_headers(signers, "r-0", body), "content-type": "application/json"}
            response = ref.post("/reference/scenarios/a", content=body, headers=headers)
            assert response.status_code == status, (signers, response.text)
    with pytest.raises(ValueError):
        reference_app([], change_period=10)


# ------------------------------------------------------------------------------------ webhooks


class _Receiver:
    """A webhook receiver that records, for each delivery, which secrets verify it."""

    def __init__(self) -> None:
        self.secrets: dict[str, str] = {}
        self.seen: list[dict[str, object]] = []
        self.app = FastAPI()
        self.app.add_api_route("/hooks", self.handle, methods=["POST"])

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        headers = dict(request.headers)
        self.seen.append({"signatures": len(headers["webhook-signature"].split(" ")),
                          **{name: _accepts(s, body, headers) for name, s in self.secrets.items()}})
        return Response(status_code=204)


def _deliver(session_factory, settings) -> int:  # noqa: ANN001
    from app.alarms.delivery import WebhookDeliverer
    from app.sampling.safe_http import SafeAsyncClient

    async def run() -> int:
        async with SafeAsyncClient(settings.safe_http_config()) as http:
            return await WebhookDeliverer(session_factory, http, settings).deliver_due()

    return asyncio.run(run())


@SQLITE_ONLY
def test_webhook_rotation_signs_deliveries_with_both_secrets_during_the_grace_period(
    client: TestClient, db, session_factory, settings  # noqa: ANN001
) -> None:
    receiver = _Receiver()
    with serve_app(receiver.app) as base_url:
        hook = create_webhook(client, url=f"{base_url}/hooks", event_types=["alarm.firing"])
        receiver.secrets["old"] = hook["secret"]
        rotated = client.post(f"/v1/webhooks/{hook['id']}/rotate-secret", json={"grace_seconds": 3600})
        assert rotated.status_code == 200, rotated.text
        new = rotated.json()
        assert new["id"] == hook["id"] and new["secret"].startswith("whsec_") and new["secret"] != hook["secret"]
        expires = datetime.fromisoformat(new["previous_secret_expires_at"])
        assert timedelta(minutes=59) < expires - datetime.now(UTC) <= timedelta(hours=1)
        receiver.secrets["new"] = new["secret"]
        assert new["secret"] not in client.get(f"/v1/webhooks/{hook['id']}").text

        assert client.post(f"/v1/webhooks/{hook['id']}/test").status_code == 202
        assert _deliver(session_factory, settings) == 1
        assert receiver.seen == [{"signatures": 2, "old": True, "new": True}]

        # Once the grace period is over, only the new secret signs.
        with db() as session:
            session.get(WebhookRow, uuid.UUID(hook["id"])).previous_secret_expires_at = datetime.now(UTC) - timedelta(seconds=1)
        assert client.post(f"/v1/webhooks/{hook['id']}/test").status_code == 202
        assert _deliver(session_factory, settings) == 1
        assert receiver.seen[-1] == {"signatures": 1, "old": False, "new": True}

        # Without a body: the default 24 h; grace 0 switches at once.
        default = client.post(f"/v1/webhooks/{hook['id']}/rotate-secret").json()
        assert timedelta(hours=23) < datetime.fromisoformat(default["previous_secret_expires_at"]) - datetime.now(UTC)
        at_once = client.post(f"/v1/webhooks/{hook['id']}/rotate-secret", json={"grace_seconds": 0}).json()
        assert at_once["previous_secret_expires_at"] is None
        receiver.secrets = {"previous": default["secret"], "current": at_once["secret"]}
        client.post(f"/v1/webhooks/{hook['id']}/test")
        _deliver(session_factory, settings)
        assert receiver.seen[-1] == {"signatures": 1, "previous": False, "current": True}


@SQLITE_ONLY
@pytest.mark.parametrize(("body", "pointer"), [({"grace_seconds": -1}, "#/grace_seconds"),
                                              ({"grace_seconds": 31 * 86400}, "#/grace_seconds"),
                                              ({"grace_seconds": "soon"}, "#/grace_seconds"),
                                              ({"secret": "whsec_x"}, "#/secret")])
def test_rotation_validation(client: TestClient, body: dict, pointer: str) -> None:
    hook = create_webhook(client)
    mechanism = create_mechanism(client)
    if "secret" not in body:
        response = client.post(f"/v1/webhooks/{hook['id']}/rotate-secret", json=body)
        assert response.status_code == 422 and pointer in {e["pointer"] for e in response.json()["errors"]}
    response = client.post(f"/v1/mechanisms/{mechanism['id']}/rotate-secret", json=body)
    assert response.status_code == 422 and pointer in {e["pointer"] for e in response.json()["errors"]}
    same = client.post(f"/v1/mechanisms/{mechanism['id']}/rotate-secret", json={"secret": mechanism["secret"]})
    assert same.status_code == 422 and same.json()["errors"][0]["pointer"] == "#/secret"
    assert client.post(f"/v1/webhooks/{uuid.uuid4()}/rotate-secret").status_code == 404
    assert client.post(f"/v1/mechanisms/{uuid.uuid4()}/rotate-secret").status_code == 404


# ------------------------------------------------------------------------------------ mechanisms


def _noisy_count(database, n, rng):  # noqa: ANN001, ANN202
    return sum(database) + rng.laplace(0.0, 1.0, size=n)


def _sample(endpoint: MechanismEndpoint, settings) -> str:  # noqa: ANN001
    async def run() -> str:
        async with SamplingClient(config=SamplingClientConfig(max_attempts=1),
                                  http_config=settings.safe_http_config()) as sampler:
            try:
                await sampler.sample(endpoint, [1, 0, 1], 5, monitor_id="m", period=0)
                return "ok"
            except SamplingError as exc:
                return f"{exc.reason}:{exc.status_code}"

    return asyncio.run(run())


@SQLITE_ONLY
def test_mechanism_rotation_keeps_old_and_new_valid_during_the_overlap(client: TestClient, db, settings) -> None:  # noqa: ANN001
    from app.mechanisms.contract import endpoint_of

    old, new = generate_secret(), generate_secret()
    mechanism = create_mechanism(client, secret=old)
    apps = {name: endpoint_app({"/sample": (_noisy_count, "real")}, secret=secrets)
            for name, secrets in (("old", old), ("new", new), ("both", [old, new]))}
    with serve_app(apps["old"]) as old_url, serve_app(apps["new"]) as new_url, serve_app(apps["both"]) as both_url:
        urls = {"old": old_url, "new": new_url, "both": both_url}

        def check(name: str) -> bool:
            client.patch(f"/v1/mechanisms/{mechanism['id']}", json={"sampling_url": f"{urls[name]}/sample"})
            report = client.post(f"/v1/mechanisms/{mechanism['id']}/validate", json={"database": [1, 0, 1], "n": 5})
            assert report.status_code == 200, report.text
            return report.json()["ok"]

        def sampled(name: str) -> str:
            """What the monitors' runner sends (app.mechanisms.contract.endpoint_of), to endpoint ``name``."""
            with db() as session:
                row = session.get(Mechanism, uuid.UUID(mechanism["id"]))
                row.sampling_url = f"{urls[name]}/sample"
                endpoint = endpoint_of(row)
            return _sample(endpoint, settings)

        assert (check("old"), check("new"), check("both")) == (True, False, True)
        rotated = client.post(f"/v1/mechanisms/{mechanism['id']}/rotate-secret",
                              json={"secret": new, "grace_seconds": 600})
        assert rotated.status_code == 200, rotated.text
        assert rotated.json()["secret"] == new and rotated.json()["previous_secret_expires_at"] is not None
        # The overlap: an endpoint still on the old secret, and one already on the new, both accept.
        assert (check("old"), check("new"), check("both")) == (True, True, True)
        assert [sampled(n) for n in ("old", "new", "both")] == ["ok", "ok", "ok"]
        # An update probed before it is saved (?validate=true) signs with both secrets too.
        probed = client.patch(f"/v1/mechanisms/{mechanism['id']}?validate=true",
                              json={"sampling_url": f"{urls['old']}/sample", "probe_database": [1, 0, 1]})
        assert probed.status_code == 200, probed.text
        # After it, the old secret no longer signs: the endpoint left on it refuses (401).
        with db() as session:
            session.get(Mechanism, uuid.UUID(mechanism["id"])).previous_secret_expires_at = (
                datetime.now(UTC) - timedelta(seconds=1))
        assert (check("old"), check("new"), check("both")) == (False, True, True)
        assert [sampled(n) for n in ("old", "new", "both")] == ["http_status:401", "ok", "ok"]
    # A generated secret, shown once.
    generated = client.post(f"/v1/mechanisms/{mechanism['id']}/rotate-secret").json()
    assert generated["secret"].startswith("whsec_") and generated["secret"] != new
    assert generated["secret"] not in client.get(f"/v1/mechanisms/{mechanism['id']}").text
