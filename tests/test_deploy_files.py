"""deploy/'s files that cannot run here (no docker, Slurm, Kubernetes or GPU) checked for
what deploy/README.md says they do: the compose file's services, ports and device
requests, the Kubernetes manifests' worker groups, ports and probes, the Helm values, the
Slurm template and runner, the shell scripts' syntax, and the GPU extras."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
SCRIPTS = sorted([*DEPLOY.rglob("*.sh"), *DEPLOY.rglob("*.sbatch")])


def _load(name):
    with open(DEPLOY / name) as f:
        return yaml.safe_load(f)


def _load_all(name):
    with open(DEPLOY / name) as f:
        return {doc["kind"]: doc for doc in yaml.safe_load_all(f)}


def _flag(command, name):
    """The value after ``name`` in an argument list (None when absent)."""
    return command[command.index(name) + 1] if name in command else None


# -- compose -----------------------------------------------------------------------------

def test_compose_has_scheduler_cpu_and_gpu_workers_on_one_image():
    services = _load("docker/compose.yaml")["services"]
    assert {"scheduler", "cpu-worker", "gpu-worker-0", "gpu-worker-1", "client"} <= set(services)
    assert {s["image"] for s in services.values()} == {"hetgraph:latest"}
    assert {s["build"]["dockerfile"] for s in services.values()} == {"deploy/docker/Dockerfile"}
    assert (DEPLOY / "docker" / services["scheduler"]["build"]["context"] / "pyproject.toml").exists()
    scheduler = services["scheduler"]
    assert scheduler["command"][:2] == ["dask", "scheduler"]
    assert _flag(scheduler["command"], "--preload") == "hetgraph.dashboard"
    assert sorted(scheduler["ports"]) == ["127.0.0.1:8786:8786", "127.0.0.1:8787:8787"]
    assert "/health" in " ".join(scheduler["healthcheck"]["test"])
    cpu = services["cpu-worker"]["command"]
    assert cpu[:2] == ["dask", "worker"] and _flag(cpu, "--resources") == "CPU=1"
    assert _flag(cpu, "--nthreads") == "1"


def test_compose_gpu_workers_request_one_distinct_gpu_each():
    services = _load("docker/compose.yaml")["services"]
    gpus = {name: s for name, s in services.items() if name.startswith("gpu-worker")}
    ids = []
    for name, service in gpus.items():
        command = service["command"]
        assert command[:3] == ["dask", "cuda", "worker"], name
        assert _flag(command, "--resources") == "GPU=1" and _flag(command, "--nthreads") == "1"
        assert service["depends_on"]["scheduler"]["condition"] == "service_healthy"
        (device,) = service["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
        ids += device["device_ids"]
        assert "ports" not in service  # only the scheduler is published
    assert sorted(ids) == ["0", "1"]


def _has_compose():
    return shutil.which("docker") is not None and subprocess.run(
        ["docker", "compose", "version"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _has_compose(), reason="docker compose is not installed")
def test_docker_compose_config_accepts_the_file():
    done = subprocess.run(["docker", "compose", "-f", str(DEPLOY / "docker" / "compose.yaml"),
                           "--profile", "gpu1", "--profile", "client", "config", "--quiet"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_dockerfile_is_one_cuda_runtime_image_exposing_dask_ports():
    text = (DEPLOY / "docker" / "Dockerfile").read_text()
    lines = [line.split() for line in text.splitlines() if line and not line.startswith("#")]
    base = next(line[1] for line in lines if line[0] == "ARG" and "CUDA_IMAGE=" in line[1])
    assert base.startswith("CUDA_IMAGE=nvidia/cuda:") and "-runtime-" in base
    assert ["EXPOSE", "8786", "8787"] in lines
    user = next(line[1] for line in lines if line[0] == "USER")
    assert user not in ("root", "0")
    assert '[gpu-cuda${CUDA_MAJOR},dashboard]' in text
    assert ["ENTRYPOINT", '["tini",', '"--"]'] in lines


# -- Kubernetes --------------------------------------------------------------------------

def _container(spec):
    (container,) = spec["spec"]["containers"]
    return container


def test_daskcluster_has_scheduler_ports_probes_and_a_cpu_worker_group():
    docs = _load_all("kubernetes/daskcluster.yaml")
    cluster = docs["DaskCluster"]
    assert cluster["apiVersion"] == "kubernetes.dask.org/v1"
    scheduler = cluster["spec"]["scheduler"]
    container = _container(scheduler)
    assert _flag(container["args"], "--preload") == "hetgraph.dashboard"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"tcp-comm": 8786, "http-dashboard": 8787}
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"port": "http-dashboard", "path": "/health"}
    service = scheduler["service"]
    assert service["type"] == "ClusterIP"
    assert {(p["port"], p["targetPort"]) for p in service["ports"]} == {
        (8786, "tcp-comm"), (8787, "http-dashboard")}
    worker = _container(cluster["spec"]["worker"])
    assert worker["args"][:2] == ["dask", "worker"]
    assert _flag(worker["args"], "--resources") == "CPU=1"
    assert _flag(worker["args"], "--nthreads") == "1"
    assert "nvidia.com/gpu" not in worker["resources"].get("limits", {})


def test_daskworkergroup_is_gpu_workers_of_the_cluster():
    docs = _load_all("kubernetes/daskcluster.yaml")
    group = docs["DaskWorkerGroup"]
    assert group["spec"]["cluster"] == docs["DaskCluster"]["metadata"]["name"]
    worker = _container(group["spec"]["worker"])
    assert worker["args"][:3] == ["dask", "cuda", "worker"]
    assert _flag(worker["args"], "--resources") == "GPU=1"
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert worker["livenessProbe"]["httpGet"]["path"] == "/health"
    images = {_container(docs["DaskCluster"]["spec"][part])["image"]
              for part in ("scheduler", "worker")} | {worker["image"]}
    assert len(images) == 1  # one image: the same versions everywhere


def test_network_policy_admits_the_cluster_and_its_client_only():
    docs = _load_all("kubernetes/daskcluster.yaml")
    name = docs["DaskCluster"]["metadata"]["name"]
    policy = docs["NetworkPolicy"]["spec"]
    assert policy["podSelector"]["matchLabels"] == {"dask.org/cluster-name": name}
    (rule,) = policy["ingress"]
    admitted = [peer["podSelector"]["matchLabels"] for peer in rule["from"]]
    job = _load_all("kubernetes/client-job.yaml")["Job"]["spec"]["template"]
    assert job["metadata"]["labels"] in admitted
    args = _container(job)["args"]
    assert _flag(args, "--scheduler") == f"tcp://{name}-scheduler:8786"


def test_helm_values_have_cpu_and_gpu_worker_groups():
    values = _load("kubernetes/helm-values.yaml")
    assert values["scheduler"]["extraArgs"] == ["--preload", "hetgraph.dashboard"]
    assert values["scheduler"]["serviceType"] == "ClusterIP"
    assert values["scheduler"]["livenessProbe"]["httpGet"]["path"] == "/health"
    assert values["worker"]["extraArgs"] == ["--resources", "CPU=1"]
    (gpu,) = values["additional_worker_groups"]
    assert gpu["extraArgs"] == ["--resources", "GPU=1"]
    assert gpu["image"]["dask_worker"] == "dask-cuda-worker"
    assert gpu["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert values["worker"]["threads_per_worker"] == gpu["threads_per_worker"] == 1
    assert values["jupyter"]["enabled"] is False
    # the chart runs dask-scheduler and dask-worker, which Dask no longer installs: the
    # image forwards them to `dask scheduler` / `dask worker`
    assert values["worker"]["image"]["dask_worker"] == "dask-worker"
    dockerfile = (DEPLOY / "docker" / "Dockerfile").read_text()
    assert "for role in scheduler worker" in dockerfile and 'exec dask %s "$@"' in dockerfile


# -- TLS, Slurm, scripts ----------------------------------------------------------------

def test_tls_template_names_a_certificate_for_every_role():
    tls = _load("tls/dask-tls.yaml")["distributed"]["comm"]
    assert tls["require-encryption"] is True
    assert tls["tls"]["ca-file"] == "@TLS_DIR@/ca.pem"
    for role in ("scheduler", "worker", "client"):
        assert tls["tls"][role] == {"cert": f"@TLS_DIR@/{role}.pem",
                                    "key": f"@TLS_DIR@/{role}-key.pem"}


def test_sbatch_starts_every_kind_of_process():
    text = (DEPLOY / "slurm" / "hetgraph.sbatch").read_text()
    for part in ("dask scheduler", "--preload hetgraph.dashboard", "dask cuda worker",
                 "--resources GPU=1", "dask worker", "--resources CPU=1", "--scheduler-file",
                 'hetgraph run "$algorithm" "$@" --scheduler "$address"'):
        assert part in text, part


def test_jobqueue_runner_starts_gpu_and_cpu_workers():
    sys.path.insert(0, str(DEPLOY / "slurm"))
    try:
        import jobqueue_runner
    finally:
        sys.path.remove(str(DEPLOY / "slurm"))
    args, run_args = jobqueue_runner.parse(["--nodes", "2", "--gpus-per-node", "4",
                                            "--interface", "ib0", "sssp", "g.txt",
                                            "--source", "1"])
    assert run_args == ["sssp", "g.txt", "--source", "1"] and args.nodes == 2
    options = jobqueue_runner.cluster_options(args)
    assert options["worker_command"] == "dask_cuda.cli"
    assert options["worker_extra_args"][:2] == ["--resources", "GPU=1"]
    assert "--gpus-per-node=4" in options["job_extra_directives"]
    (cpu_worker,) = options["job_script_prologue"]
    assert "--resources CPU=1" in cpu_worker and "--interface ib0" in cpu_worker
    assert options["scheduler_options"]["preload"] == ["hetgraph.dashboard"]
    with pytest.raises(SystemExit):
        jobqueue_runner.parse(["--nodes", "2"])  # no algorithm and graph


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_shell_script_syntax(script):
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_shellcheck():
    done = subprocess.run(["shellcheck", *map(str, SCRIPTS)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_gpu_extras_name_one_cupy_wheel_each():
    tomllib = pytest.importorskip("tomllib")
    with open(ROOT / "pyproject.toml", "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    for cuda in ("12", "13"):
        wheels = [r for r in extras[f"gpu-cuda{cuda}"] if r.startswith("cupy")]
        assert [w.split(">")[0] for w in wheels] == [f"cupy-cuda{cuda}x"]
        assert any(r.startswith("dask-cuda") for r in extras[f"gpu-cuda{cuda}"])
    assert extras["gpu"] == ["hetgraph[gpu-cuda12]"]
    readme = (ROOT / "README.md").read_text()
    assert '".[gpu-cuda13]"' in readme and '".[gpu-cuda12]"' in readme
    set_up = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    assert set_up.count("```bash") == 2  # the two set-up commands stay two
