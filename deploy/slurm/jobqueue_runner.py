"""Run `hetgraph run` on Slurm GPU nodes started through dask-jobqueue.

The Dask scheduler runs in this process (with the hetgraph dashboard page, on this host's
loopback); each Slurm job is one node running ``dask cuda worker --resources GPU=1`` (a
worker per GPU) and, started by the job script's prologue, one
``dask worker --resources CPU=1``. Once every worker has joined, this runs
``hetgraph run ... --scheduler ADDRESS`` with the arguments it does not know itself, then
ends the jobs. Needs ``pip install dask-jobqueue`` beside hetgraph and a file system the
nodes share (the scheduler file). Example::

    python deploy/slurm/jobqueue_runner.py --nodes 2 --gpus-per-node 4 --cores 32 \\
        --memory 480GB --walltime 01:00:00 pagerank /shared/graph.txt --top 10

Every socket listens on ``--interface`` (a private network; default: the interface of this
host's name). With ``--tls-dir`` (certificates from deploy/tls/make-certs.sh, on the
shared file system) every link is TLS.
"""

import argparse
import os
import shlex
import subprocess
import sys


def parse(argv=None):
    """(runner options, the arguments for ``hetgraph run``)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                epilog="Other arguments go to `hetgraph run`.")
    p.add_argument("--nodes", type=int, default=1, help="Slurm jobs, one node each")
    p.add_argument("--gpus-per-node", type=int, default=1)
    p.add_argument("--cores", type=int, default=16, help="CPU cores per node")
    p.add_argument("--memory", default="64GB", help="memory per node")
    p.add_argument("--walltime", default="01:00:00")
    p.add_argument("--queue", help="Slurm partition")
    p.add_argument("--account", help="Slurm account")
    p.add_argument("--interface", help="network interface of every process (ib0...)")
    p.add_argument("--tls-dir", help="directory written by deploy/tls/make-certs.sh")
    p.add_argument("--job-dir", default="hetgraph-jobqueue",
                   help="shared directory for the scheduler file and the job logs")
    args, run_args = p.parse_known_args(argv)
    if len(run_args) < 2:
        p.error("give the algorithm and the graph for `hetgraph run`")
    return args, run_args


def cluster_options(args):
    """SLURMCluster's keyword arguments for ``args`` (Dask's configuration read first)."""
    job_dir = os.path.abspath(args.job_dir)
    scheduler_file = os.path.join(job_dir, "scheduler.json")
    net = f" --interface {shlex.quote(args.interface)}" if args.interface else ""
    prologue = []
    if args.tls_dir:
        prologue.append(f"export DASK_CONFIG={shlex.quote(tls_config(args))}")
    # the CPU worker: in the background of each job, before its GPU workers start
    prologue.append(f"{shlex.quote(sys.executable)} -m distributed.cli.dask_worker "
                    f"--scheduler-file {shlex.quote(scheduler_file)}{net} "
                    f"--resources CPU=1 --nthreads 1 --memory-limit 0.5 &")
    scheduler = {"preload": ["hetgraph.dashboard"], "scheduler_file": scheduler_file,
                 "dashboard_address": "127.0.0.1:8787"}
    options = {
        "cores": args.cores, "processes": 1, "memory": args.memory,
        "walltime": args.walltime, "queue": args.queue, "account": args.account,
        "interface": args.interface, "log_directory": job_dir,
        "job_extra_directives": [f"--gpus-per-node={args.gpus_per_node}", "--exclusive"],
        "worker_command": "dask_cuda.cli",  # `python -m dask_cuda.cli`: dask cuda worker
        # these come after jobqueue's own --nthreads (cores) and --memory-limit (memory):
        # one task at a time, and dask-cuda's share of the node's memory per GPU worker
        "worker_extra_args": ["--resources", "GPU=1", "--nthreads", "1",
                              "--memory-limit", "auto"],
        "job_script_prologue": prologue,
        "scheduler_options": scheduler,
    }
    if args.tls_dir:
        from distributed.security import Security

        # the certificates of DASK_CONFIG; given, jobqueue passes them to the workers
        options["security"] = Security()
    return options


def tls_config(args):
    return os.path.join(os.path.abspath(args.tls_dir), "dask.yaml")


def use_tls_config(path):
    """Dask's TLS settings from ``path``, in this process and for `hetgraph run`."""
    import dask.config
    import yaml

    os.environ["DASK_CONFIG"] = path
    with open(path) as f:
        dask.config.update(dask.config.config, yaml.safe_load(f))


def main(argv=None):
    args, run_args = parse(argv)
    if args.tls_dir:
        use_tls_config(tls_config(args))
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError:
        sys.exit("jobqueue_runner.py needs dask-jobqueue: pip install dask-jobqueue")
    from distributed import Client

    os.makedirs(args.job_dir, exist_ok=True)
    with SLURMCluster(**cluster_options(args)) as slurm, Client(slurm) as client:
        slurm.scale(jobs=args.nodes)
        client.wait_for_workers(args.nodes * (args.gpus_per_node + 1))
        command = ["hetgraph", "run", *run_args, "--scheduler", slurm.scheduler_address]
        return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main())
