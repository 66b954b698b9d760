"""Fan-out through GNU parallel: a list of command lines run --jobs N at a
time on this machine or on the machines of --sshlogin / --sshloginfile (GNU
parallel's sshlogin syntax; ':' is this machine).  A remote machine runs the
same command line, so it needs the repository, the build and the output
folder at the same paths (a shared filesystem); the jobs start in the
caller's working folder and get the harness's environment variables
(IPU_E2E_LIBRARY and the sanitizer settings) through `--env`.

Each command line is one job; a job reports that it finished by printing one
line on stdout, which is handed to a callback as soon as the job ends, so the
caller can rewrite its summary after every job, in whatever order jobs end.
GNU parallel runs as a child that gets SIGTERM if the caller dies (even by
kill -9); on SIGTERM it stops starting jobs and sends each running job
SIGTERM, waiting up to 30 s before SIGKILL (a remote job too, through its
ssh session; only if GNU parallel itself is killed with SIGKILL does a remote
job run on to its end).  On the job's side
child.die_with_parent() makes it get SIGTERM when GNU parallel dies, and
case_lock() keeps two jobs off one case folder (a job left over from a killed
run finishes first).
"""
import fcntl
import os
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

from . import child, files, interrupts
from .command import UsageError, int_in

PARALLEL = "parallel"
FORWARDED_ENV = ("IPU_E2E_LIBRARY", "LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")
# On an interruption GNU parallel sends each job SIGTERM and waits this long
# (ms) before SIGKILL; a job forwards the signal to its command, which stops
# within about a second.
TERM_SEQUENCE = "TERM,30000,KILL,25"

job_count = int_in(1, 1024)


def add_arguments(p, jobs_help="run N cases at a time on each machine, through GNU parallel"):
    """--jobs, --sshlogin and --sshloginfile."""
    p.add_argument("--jobs", type=job_count, default=None, metavar="N", help=jobs_help)
    logins = p.add_mutually_exclusive_group()
    logins.add_argument("--sshlogin", metavar="LOGIN",
                        help="run the cases on these machines (GNU parallel --sshlogin syntax, several "
                             "separated by commas; ':' is this machine); a remote machine runs the same "
                             "command line and needs the repository and --output at the same path")
    logins.add_argument("--sshloginfile", type=Path, metavar="FILE",
                        help="the machines, one sshlogin a line (GNU parallel --sshloginfile syntax, e.g. "
                             "'ssh -p 2222 -i KEY host'; ':' is this machine)")


def requested(args):
    """Whether the flags ask for a fan-out."""
    return args.jobs is not None or args.sshlogin is not None or args.sshloginfile is not None


def check(args):
    """Refuse before any work what GNU parallel would only refuse later."""
    if shutil.which(PARALLEL) is None:
        raise UsageError("--jobs/--sshlogin: GNU parallel is not installed (Debian package 'parallel'; "
                         "make deps installs it)")
    if args.sshlogin is not None and not args.sshlogin.strip(" ,"):
        raise UsageError(f"--sshlogin: expected an sshlogin such as ':' or 'user@host', got '{args.sshlogin}'")
    if args.sshloginfile is not None:
        try:
            lines = files.read_text(args.sshloginfile, "--sshloginfile", 1 << 20).splitlines()
        except files.InputError as error:
            raise UsageError(f"{error}; expected one sshlogin a line") from None
        if not [l for l in lines if l.strip() and not l.lstrip().startswith("#")]:
            raise UsageError(f"--sshloginfile {args.sshloginfile}: no sshlogin in it; expected one a line "
                             f"(':' is this machine)")


class case_lock:
    """An exclusive lock on folder/.lock held for a with-block (waits for
    another holder, such as a job of a killed run still stopping)."""

    def __init__(self, folder):
        self.path = Path(folder) / ".lock"

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(self.path, "a")
        fcntl.flock(self.handle, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        self.handle.close()


def parallel_command(args, jobs):
    """The GNU parallel command line for the flags (jobs per machine)."""
    command = [PARALLEL, "--will-cite", "--jobs", str(jobs), "--term-seq", TERM_SEQUENCE,
               "--workdir", os.getcwd()]
    for name in FORWARDED_ENV:
        if name in os.environ:
            command += ["--env", name]
    if args.sshloginfile is not None:
        command += ["--sshloginfile", str(args.sshloginfile.resolve())]
    elif args.sshlogin is not None:
        command += ["--sshlogin", args.sshlogin]
    return command


def run(args, jobs, commands, finished):
    """Run commands (argument lists) through GNU parallel, jobs at a time per
    machine; finished(line) gets each line a job prints, when the job ends.
    Returns GNU parallel's exit code (the number of failed jobs, up to 100;
    255 when it was stopped).  On SIGINT or SIGTERM the running jobs are
    stopped and waited for, then Interrupted is raised."""
    if not commands:
        return 0
    env = dict(os.environ, PARALLEL_SHELL="/bin/sh")
    process = subprocess.Popen(parallel_command(args, jobs), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, env=env, start_new_session=True, preexec_fn=child.die_with(os.getpid()))
    try:
        process.stdin.write("".join(shlex.join(c) + "\n" for c in commands))
        process.stdin.close()
        for line in process.stdout:
            if line.strip():
                finished(line.strip())
        return process.wait()
    except interrupts.Interrupted:
        process.send_signal(signal.SIGTERM)
        # GNU parallel stops its jobs (SIGTERM, SIGKILL 30 s later) and exits.
        rest = process.stdout.read()
        process.wait()
        for line in rest.splitlines():  # jobs that finished while stopping
            if line.strip():
                finished(line.strip())
        raise
