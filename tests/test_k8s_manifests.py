"""deploy/kubernetes/: valid Kubernetes objects whose environment is placegroup's launch contract.

Each manifest is checked against Kubernetes' JSON schemas (kubernetes-validate, which ships
them, so this works offline; it is in the ``deploy`` extra and the check is skipped without it).
Then every pod the Jobs would start gets its environment as Kubernetes would build it (the
completion index from the Job, ``$(VAR)`` references expanded), and that environment must be
placegroup's: only variables of ``placegroup.config.SETTINGS`` (plus Kubernetes' own
``JOB_COMPLETION_INDEX``), every one that role needs, values that parse, endpoints that are the
pods' DNS names under their headless Services, and ``fluid.transpile_from_env`` must make of
each pod the pserver or trainer it is meant to be.
"""
import copy
import pathlib
import re

import pytest

import placegroup as fluid
from placegroup import config
from placegroup.ir.place_group import Node
from tests.conftest import build_fit_a_line

yaml = pytest.importorskip("yaml")

ROOT = pathlib.Path(__file__).resolve().parents[1]
MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
# Variables the manifests may set that are not placegroup settings: Kubernetes' own.
HELPERS = {"JOB_COMPLETION_INDEX"}
INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
NEEDED = {  # what transpile_from_env and the scripts read, per role
    "PSERVER": {"TRAINING_ROLE", "PADDLE_INIT_PSERVERS", "PADDLE_INIT_TRAINERS", "POD_IP",
                "PADDLE_INIT_PORT"},
    "TRAINER": {"TRAINING_ROLE", "PADDLE_INIT_PSERVERS", "PADDLE_INIT_TRAINERS", "POD_IP",
                "PADDLE_INIT_PORT", "PADDLE_TRAINER_ID", "PADDLE_TRAINER_ENDPOINTS"},
}
CONTRACT = set(NEEDED["TRAINER"])


def _objects():
    return [(path.name, doc) for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text()) if doc]


def _of_kind(kind):
    return [doc for _, doc in _objects() if doc["kind"] == kind]


def _container(job):
    (c,) = job["spec"]["template"]["spec"]["containers"]
    return c


def _role(job) -> str:
    return next(e["value"] for e in _container(job)["env"] if e["name"] == "TRAINING_ROLE")


def _pod_env(job, index: int) -> dict[str, str]:
    """The environment of pod ``index`` of an Indexed Job, as the kubelet builds it: a
    ``$(NAME)`` in a value is replaced by NAME's value when NAME is defined earlier in the list."""
    env = {}
    for e in _container(job)["env"]:
        if "valueFrom" in e:
            assert e["valueFrom"] == {"fieldRef": {"fieldPath": INDEX_FIELD}}, e
            value = str(index)
        else:
            value = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), e["value"])
        assert "$(" not in value, f"{e['name']}={value!r} refers to a variable not set before it"
        env[e["name"]] = value
    return env


def _pods(role: str):
    """``[(job, index, env)]`` for every pod the Job of ``role`` starts."""
    (job,) = [j for j in _of_kind("Job") if _role(j) == role]
    return [(job, i, _pod_env(job, i)) for i in range(job["spec"]["completions"])]


def test_the_manifests_are_there():
    assert [p.name for p in MANIFESTS] == ["pservers.yaml", "trainers.yaml"]
    assert sorted(_role(j) for j in _of_kind("Job")) == ["PSERVER", "TRAINER"]


@pytest.mark.parametrize("version", ["1.25", "latest"])
def test_every_manifest_is_a_valid_kubernetes_object(version):
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed "
                             "(pip install -e '.[deploy]'); it ships the schemas")
    version = kv.latest_version() if version == "latest" else version
    for name, doc in _objects():
        try:  # strict: a field Kubernetes does not know is an error too
            kv.validate(doc, version, strict=True)
        except kv.ValidationError as e:
            pytest.fail(f"{name}: {doc['kind']} {doc['metadata']['name']} is not valid for "
                        f"Kubernetes {version}: {e}")


def test_the_validator_rejects_a_broken_job():
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")
    job = copy.deepcopy(_of_kind("Job")[0])
    job["spec"]["completions"] = "two"
    with pytest.raises(kv.ValidationError):
        kv.validate(job, kv.latest_version(), strict=True)
    job = copy.deepcopy(_of_kind("Job")[0])
    _container(job)["env"][1]["valu"] = "x"
    with pytest.raises(kv.ValidationError):
        kv.validate(job, kv.latest_version(), strict=True)


def test_the_manifests_set_only_placegroup_settings():
    for job in _of_kind("Job"):
        names = [e["name"] for e in _container(job)["env"]]
        unknown = set(names) - set(config.SETTINGS) - HELPERS
        assert not unknown, f"{job['metadata']['name']} sets {unknown}, which placegroup does not read"
        assert len(names) == len(set(names)), f"{job['metadata']['name']} sets a variable twice"


@pytest.mark.parametrize("role", ["PSERVER", "TRAINER"])
def test_each_role_gets_every_variable_it_needs_in_a_form_that_parses(role):
    for job, i, env in _pods(role):
        missing = NEEDED[role] - set(env)
        assert not missing, f"{role} pod {i} lacks {missing}"
        for name, text in env.items():
            if name in config.SETTINGS:
                config.get(name, env)  # raises ConfigError on a bad value
        Node.parse(f"{env['POD_IP']}:{env['PADDLE_INIT_PORT']}")
        for item in env["PADDLE_INIT_PSERVERS"].split(",") + env["PADDLE_TRAINER_ENDPOINTS"].split(","):
            Node.parse(item)  # ip:port, every one with its port


def test_the_endpoints_are_the_pods_names_under_headless_services():
    services = {s["metadata"]["name"]: s for s in _of_kind("Service")}
    pservers, trainers = _pods("PSERVER"), _pods("TRAINER")
    shared = {k: v for k, v in pservers[0][2].items() if k in CONTRACT - {"TRAINING_ROLE", "POD_IP",
                                                                             "PADDLE_TRAINER_ID"}}
    for job, i, env in pservers + trainers:  # every pod agrees on the job
        assert {k: env[k] for k in shared} == shared, f"{job['metadata']['name']}-{i} differs"
    assert shared["PADDLE_INIT_TRAINERS"] == str(len(trainers))

    for pods, listed in ((pservers, shared["PADDLE_INIT_PSERVERS"]),
                         (trainers, shared["PADDLE_TRAINER_ENDPOINTS"])):
        endpoints = [f"{env['POD_IP']}:{env['PADDLE_INIT_PORT']}" for _, _, env in pods]
        assert listed.split(",") == endpoints, "the list must name every pod, in index order"
        for job, i, env in pods:
            spec = job["spec"]["template"]["spec"]
            service = services[spec["subdomain"]]
            # An Indexed Job's pod i is named <job>-<i>; under the Service of its subdomain
            # it is <job>-<i>.<service>.
            assert env["POD_IP"] == f"{job['metadata']['name']}-{i}.{service['metadata']['name']}"
            assert service["spec"]["clusterIP"] == "None"
            assert service["spec"]["selector"].items() <= job["spec"]["template"]["metadata"]["labels"].items()
            assert int(env["PADDLE_INIT_PORT"]) in [p["port"] for p in service["spec"]["ports"]]
            assert job["spec"]["completionMode"] == "Indexed"
    for _, i, env in trainers:
        assert env["PADDLE_TRAINER_ID"] == str(i)


class _RecordingExecutor:
    """Stands in for fluid.Executor: transpile_from_env only runs programs and closes it."""

    def __init__(self):
        self.ran, self.closed = [], False

    def run(self, program, **kw):
        self.ran.append(program)

    def close(self):
        self.closed = True


@pytest.mark.parametrize("role", ["PSERVER", "TRAINER"])
def test_transpile_from_env_makes_each_pod_what_it_is_meant_to_be(role, monkeypatch):
    pods = _pods(role)
    for job, i, env in pods:
        for name in config.SETTINGS:
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        exe = _RecordingExecutor()
        main, startup = fluid.Program(), fluid.Program()  # each pod transpiles its own model
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            build_fit_a_line()
        prog, got_role, tid, n = fluid.transpile_from_env(exe, main, startup)
        assert (got_role, n) == (role, len(_pods("TRAINER")))
        endpoint = f"{env['POD_IP']}:{env['PADDLE_INIT_PORT']}"
        if role == "PSERVER":  # it served (ran its program) and closed
            assert prog.executor.endpoint == endpoint and exe.ran[-1] is prog and exe.closed
        else:
            assert tid == i and prog.executor.rank == i and not exe.closed


def test_docs_show_the_deploy_files_by_path():
    text = (ROOT / "docs" / "launch.md").read_text()
    for path in MANIFESTS + sorted((ROOT / "deploy" / "slurm").iterdir()):
        assert str(path.relative_to(ROOT)) in text, f"docs/launch.md does not name {path}"
    # The manifests live in deploy/ only: no copy in the doc to drift from them.
    assert "kind: Job" not in text and "#SBATCH" not in text
