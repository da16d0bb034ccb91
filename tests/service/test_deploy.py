"""Deployment files: no Docker engine here, so the image is not built; instead the files are held
to the code. The Dockerfile installs as the Makefile does, the compose file is valid (by
`docker compose config` / `docker-compose config` when one is installed, and structurally always),
every PHRASAL_* variable they set is a real setting, every metric the dashboard plots is one the
service exports, and the probes point at real routes."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from service.metrics import Metrics
from service.routes import router
from service.settings import Settings

import yaml  # the dev extra installs pyyaml; without it this module fails to import, loudly

if sys.version_info >= (3, 11):
    import tomllib
else:  # the dev extra installs tomli on Python 3.10 (requires-python allows it)
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (REPO / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def setting_fields() -> set[str]:
    return {f"PHRASAL_{name.upper()}" for name in Settings.model_fields}


def test_dockerfile_installs_as_the_makefile_does():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    make_torch = re.search(r"pip install -q (torch==[\w.+]+)", makefile).group(1)
    instructions = dockerfile_instructions()
    args = dict(rest.split("=", 1) for keyword, rest in instructions if keyword == "ARG" and "=" in rest)
    runs = [rest for keyword, rest in instructions if keyword == "RUN"]
    torch_step = next(k for k, run in enumerate(runs) if "pip install" in run and "torch==" in run)
    project_step = next(k for k, run in enumerate(runs) if re.search(r"pip install \"?\.\[", run))
    assert torch_step < project_step  # torch first, pinned; then the project
    assert f"torch=={args['TORCH_VERSION']}" == make_torch
    extras = re.search(r"\.\[([\w,]+)\]", runs[project_step]).group(1).split(",")
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert set(extras) <= set(declared)
    assert any(dep.startswith("onnxruntime-gpu") for extra in extras for dep in declared[extra])


def test_dockerfile_runs_as_a_user_with_a_readiness_healthcheck_on_a_cuda_base():
    instructions = dockerfile_instructions()
    keywords = [keyword for keyword, _ in instructions]
    args = dict(rest.split("=", 1) for keyword, rest in instructions if keyword == "ARG" and "=" in rest)
    assert args["CUDA_IMAGE"].startswith("nvidia/cuda:") and "runtime" in args["CUDA_IMAGE"]
    user = [rest for keyword, rest in instructions if keyword == "USER"]
    assert user and user[-1] not in ("root", "0")
    assert keywords.index("USER") < keywords.index("CMD")
    (healthcheck,) = [rest for keyword, rest in instructions if keyword == "HEALTHCHECK"]
    assert "http://127.0.0.1:8000/health/ready" in healthcheck
    (cmd,) = [rest for keyword, rest in instructions if keyword == "CMD"]
    assert json.loads(cmd)[:3] == ["python", "-m", "service"]
    for keyword, rest in instructions:
        if keyword == "COPY":
            *sources, _ = shlex.split(rest)
            for source in sources:
                assert (REPO / source).exists(), source
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()}
    assert {".venv", ".git", "runs", "data"} <= ignored and "models" not in ignored and "service" not in ignored
    env = " ".join(rest for keyword, rest in instructions if keyword == "ENV")
    assert set(re.findall(r"PHRASAL_\w+", env)) <= setting_fields()


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text(encoding="utf-8"))


def test_compose_file_structure():
    spec = compose()
    services = spec["services"]
    assert set(services) == {"phrasal-gpu", "phrasal-cpu", "prometheus", "grafana"}
    gpu, cpu = services["phrasal-gpu"], services["phrasal-cpu"]
    assert gpu["profiles"] == ["gpu"] and cpu["profiles"] == ["cpu"]
    (device,) = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert "deploy" not in cpu
    for service in (gpu, cpu):
        assert service["build"] == {"context": "..", "dockerfile": "Dockerfile"}
        assert (DEPLOY / service["build"]["context"] / "Dockerfile").is_file()
        assert "phrasal" in service["networks"]["default"]["aliases"]  # what Prometheus scrapes
        phrasal_env = {k: v for k, v in service["environment"].items() if k.startswith("PHRASAL_")}
        assert set(phrasal_env) <= setting_fields()
        grace = int(service["stop_grace_period"].rstrip("s"))
        assert grace > float(service["environment"]["PHRASAL_DRAIN_TIMEOUT_S"])
        assert all(port.startswith("127.0.0.1:") for port in service["ports"])
        Settings.model_validate(  # the values themselves parse as settings
            {k.removeprefix("PHRASAL_").lower(): v for k, v in phrasal_env.items()}
            | {"model_dirs": ["models/en-de"], "memories": []}
        )
        memories = json.loads(phrasal_env["PHRASAL_MEMORIES"])  # the image's files, from the repository
        assert memories and all((REPO / Path(path).relative_to("/app")).is_file() for path in memories)
    for name in ("prometheus", "grafana"):
        for volume in services[name]["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (DEPLOY / source).exists(), source


def test_the_stores_live_where_the_image_lets_its_user_write_and_the_deployments_mount_a_volume():
    instructions = dockerfile_instructions()
    env = " ".join(rest for keyword, rest in instructions if keyword == "ENV")
    state = {Path(re.search(rf"PHRASAL_{name}=(\S+)", env).group(1)).parent for name in ("GLOSSARY_DB", "DOCUMENT_DB")}
    assert state == {Path("/var/lib/phrasal")}  # not /app: the user cannot write there, nor can k8s's read-only root
    keywords = [keyword for keyword, _ in instructions]
    (made,) = [k for k, (keyword, rest) in enumerate(instructions) if keyword == "RUN" and "/var/lib/phrasal" in rest]
    assert "chown phrasal /var/lib/phrasal" in instructions[made][1] and made < keywords.index("USER")
    spec = compose()
    for name in ("phrasal-gpu", "phrasal-cpu"):
        assert "phrasal-state:/var/lib/phrasal" in spec["services"][name]["volumes"]
    assert "phrasal-state" in spec["volumes"]
    documents = [doc for path in sorted((DEPLOY / "k8s").glob("*.yaml"))
                 for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))]
    # Kubernetes: each pod's own claim, kept across restarts and moves (not an emptyDir, lost with the pod)
    replicas = next(doc for doc in documents if doc["kind"] == "StatefulSet")["spec"]
    pod = replicas["template"]["spec"]
    mounts = {mount["mountPath"]: mount["name"] for mount in pod["containers"][0]["volumeMounts"]}
    claims = {claim["metadata"]["name"]: claim["spec"] for claim in replicas["volumeClaimTemplates"]}
    assert claims[mounts["/var/lib/phrasal"]]["accessModes"] == ["ReadWriteOnce"]
    assert mounts["/var/lib/phrasal"] not in {volume["name"] for volume in pod["volumes"]}
    user = next(rest for keyword, rest in instructions if keyword == "RUN" and "useradd" in rest)
    uid = int(re.search(r"--uid\s+(\d+)", user).group(1))
    assert pod["securityContext"]["runAsUser"] == pod["securityContext"]["fsGroup"] == uid  # the volume is its user's


def test_prometheus_scrapes_the_service_metrics_route():
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text(encoding="utf-8"))
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    (sd,) = job["dns_sd_configs"]
    assert (sd["names"], sd["port"]) == (["phrasal"], 8000)


def compose_command() -> list[str] | None:
    """`docker compose` (the plugin) if it works here, else `docker-compose`, else None."""
    if shutil.which("docker") is not None:
        if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose") is not None:
        return ["docker-compose"]
    return None


def test_compose_config_accepts_the_file():
    command = compose_command()
    if command is None:
        reason = "neither `docker compose` nor `docker-compose` is installed: compose file checked structurally only"
        # make test installs docker-compose; .ci/run sets this so that a missing tool is a failure.
        if os.environ.get("CI_REQUIRE_COMPOSE") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    for profile in ("gpu", "cpu"):
        result = subprocess.run(
            [*command, "-f", str(DEPLOY / "docker-compose.yml"), "--profile", profile, "config", "-q"],
            capture_output=True, text=True, timeout=60,
        )
        assert result.returncode == 0, result.stderr


def exported_sample_names() -> set[str]:
    metrics = Metrics()
    # A sample of every labelled family, so that each family exposes its sample names.
    metrics.observe("/translate", 200, 0.1)
    metrics.in_flight.labels(route="/translate")
    for histogram in (metrics.queue_seconds, metrics.batch_size, metrics.batch_tokens):
        histogram.labels(pair="en-de", model="en-de").observe(1)
    metrics.compute_seconds.labels(pair="en-de", model="en-de", backend="torch").observe(1)
    for family in (metrics.segments, metrics.source_tokens, metrics.generated_tokens, metrics.queue_depth):
        family.labels(pair="en-de", model="en-de")
    metrics.device_memory.labels(pair="en-de", model="en-de", backend="torch").set(1)
    return {sample.name for family in metrics.registry.collect() for sample in family.samples}


def test_the_dashboard_plots_only_metrics_the_service_exports():
    dashboard = json.loads((DEPLOY / "grafana" / "dashboards" / "phrasal.json").read_text(encoding="utf-8"))
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    used = {name for expr in expressions for name in re.findall(r"\bphrasal_\w+", expr)}
    assert used and used <= exported_sample_names(), used - exported_sample_names()
    titles = " ".join(panel["title"].lower() for panel in dashboard["panels"])
    for topic in ("latency", "throughput", "batch size", "queue depth"):
        assert topic in titles
    assert any("histogram_quantile(0.99" in expr for expr in expressions)
    provider = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "dashboards" / "phrasal.yml").read_text())
    grafana = compose()["services"]["grafana"]
    mounts = dict(volume.rsplit(":", 1)[0].split(":", 1) for volume in grafana["volumes"] if volume.startswith("./"))
    assert mounts["./grafana/dashboards"] == provider["providers"][0]["options"]["path"]
    datasource = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text())
    assert datasource["datasources"][0]["uid"] == dashboard["panels"][0]["datasource"]["uid"]


def test_kubernetes_manifests_probe_real_routes_and_outlast_the_drain():
    documents = [doc for path in sorted((DEPLOY / "k8s").glob("*.yaml"))
                 for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))]
    kinds = {doc["kind"]: doc for doc in documents}
    assert {"StatefulSet", "Service", "PodDisruptionBudget"} <= set(kinds)
    pod = kinds["StatefulSet"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    routes = {route.path for route in router.routes}
    assert container["readinessProbe"]["httpGet"]["path"] == "/health/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health/live"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] in routes
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert {name for name in env if name.startswith("PHRASAL_")} <= setting_fields()
    pre_stop = int(container["lifecycle"]["preStop"]["exec"]["command"][1])
    assert pod["terminationGracePeriodSeconds"] > pre_stop + float(env["PHRASAL_DRAIN_TIMEOUT_S"])
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert pod["securityContext"]["runAsNonRoot"] is True


def test_kubernetes_pods_reach_each_other_for_what_another_pod_stored():
    documents = [doc for path in sorted((DEPLOY / "k8s").glob("*.yaml"))
                 for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))]
    replicas = next(doc for doc in documents if doc["kind"] == "StatefulSet")
    (container,) = replicas["spec"]["template"]["spec"]["containers"]
    env = {item["name"]: item for item in container["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    # $(POD_IP) expands only where the variable is defined earlier in the list
    assert list(env).index("POD_IP") < list(env).index("PHRASAL_REPLICA_ADDRESS")
    (port,) = [p["containerPort"] for p in container["ports"] if p["name"] == "http"]
    (name_port,) = json.loads(env["PHRASAL_REPLICAS"]["value"])
    name, replica_port = name_port.split(":")
    headless = next(doc for doc in documents if doc["kind"] == "Service" and doc["metadata"]["name"] == name)
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"] is True
    assert headless["spec"]["selector"] == replicas["spec"]["selector"]["matchLabels"]
    assert replicas["spec"]["serviceName"] == name  # the StatefulSet's own: its pods' DNS names
    assert [(p["port"], p["targetPort"]) for p in headless["spec"]["ports"]] == [(port, "http")] == [(int(replica_port), "http")]
    own = env["PHRASAL_REPLICA_ADDRESS"]["value"]
    assert own == f"$(POD_IP):{port}"
    settings = Settings.model_validate({"replicas": [name_port], "replica_address": own.replace("$(POD_IP)", "10.0.0.7")})
    assert settings.replica_address == f"10.0.0.7:{port}"


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_serve_gives_torch_the_cores_minus_one_as_docs_operations_recommends():
    cores = int(subprocess.run(["getconf", "_NPROCESSORS_ONLN"], capture_output=True, text=True, check=True).stdout)
    env = {k: v for k, v in __import__("os").environ.items() if k != "OMP_NUM_THREADS"}
    dry = subprocess.run(["make", "-n", "-s", "serve"], cwd=REPO, capture_output=True, text=True, check=True, env=env)
    serve_line = dry.stdout.strip().splitlines()[-1]
    assert serve_line.startswith(f"OMP_NUM_THREADS={max(cores - 1, 1)} PHRASAL_MODEL_DIRS="), serve_line
    assert "cores available minus one" in (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
