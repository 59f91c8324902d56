"""The run's LocalCluster talks TLS with a throw-away CA: another local process that reaches the
scheduler's port can neither connect nor run code in a worker (runner.local_security); an external
scheduler is reached with the manifest's cluster.tls_* files."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from distributed import Client
from distributed.security import Security

from datapipe.engine import runner
from datapipe.manifest.load import ManifestError, load_manifest

REPO = Path(__file__).resolve().parent.parent


def _manifest(tmp_path, **over):
    return load_manifest(REPO / "manifests" / "cc-2026.yaml",
                         {"inputs.crawl": None, "inputs.paths": [str(tmp_path)], "output": str(tmp_path / "out"),
                          "cluster.workers": 1, "cluster.dashboard_address": "127.0.0.1:0", **over})


def _attack(address: str, **kw) -> int:
    """What an unauthenticated local process did: connect and run code in a worker (its pid back)."""
    with Client(address, timeout=5, **kw) as c:
        return c.submit(os.getpid, pure=False).result(timeout=10)


def test_another_process_cannot_use_the_run_scheduler(tmp_path):
    with runner.dask_client(_manifest(tmp_path)) as client:
        addr = client.scheduler.address
        assert addr.startswith("tls://127.0.0.1:")
        assert client.submit(os.getpid, pure=False).result() != os.getpid()  # the run's own client works
        port = addr.rsplit(":", 1)[1]
        attempts = [(addr, {}),                                  # plain client, no certificate
                    (f"tcp://127.0.0.1:{port}", {}),             # plain TCP to the TLS port
                    (addr, {"security": Security.temporary()})]  # TLS with a certificate of its own CA
        for address, kw in attempts:
            with pytest.raises((OSError, TimeoutError, TypeError, ValueError)):
                _attack(address, **kw)


def test_external_scheduler_reached_with_the_manifest_tls_files(tmp_path):
    sec = Security.temporary()  # stands in for a cluster's CA and a client certificate it signed
    ca, cert = tmp_path / "ca.pem", tmp_path / "client.pem"
    ca.write_text(sec.tls_ca_file)
    cert.write_text(sec.tls_client_cert + sec.tls_client_key)   # cert and key in one file
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, processes=False, security=sec, dashboard_address="127.0.0.1:0") as lc:
        m = _manifest(tmp_path, **{"cluster.address": lc.scheduler_address, "cluster.tls_ca_file": str(ca),
                                   "cluster.tls_cert": str(cert)})
        with runner.dask_client(m) as client:
            assert client.submit(sum, [1, 2]).result() == 3
        with pytest.raises(runner.ClusterError):  # without the files: refused at the handshake
            with runner.dask_client(_manifest(tmp_path, **{"cluster.address": lc.scheduler_address})):
                pass


def test_tls_fields_are_checked_before_any_work(tmp_path):
    with pytest.raises(ManifestError, match="need a tls:// address"):
        _manifest(tmp_path, **{"cluster.address": "tcp://h:8786", "cluster.tls_ca_file": str(tmp_path)})
    with pytest.raises(ManifestError, match="is not a file"):
        _manifest(tmp_path, **{"cluster.address": "tls://h:8786", "cluster.tls_ca_file": str(tmp_path / "no"),
                               "cluster.tls_cert": str(tmp_path / "no")})
