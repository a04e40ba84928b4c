"""Start the tests' Python commands from a process that has imported their heavy libraries already.

Every `python -m MODULE` and `python SCRIPT` a test starts (directly or through a recipe) pays ~5 s
on a 2-core CPU importing torch, numpy, SciPy/scikit-learn, hydra and fairseq before it does
anything; the suite starts about a hundred. Here a server (one per pytest run) imports those
libraries once and forks a worker per command. fairseq stays out of a worker's sys.modules until
its command imports it, and what fairseq's import does to logging is done then (class Deferred);
the plugin is not preloaded (its import patches fairseq: each command's own import does it).

The command's own process (started as usual, with this directory on PYTHONPATH) hands its argv,
environment, working directory and stdin/stdout/stderr to the server in sitecustomize, waits, passes
on the signals it receives, and exits as the worker did; if it is killed, the worker is too, and if
its parent dies, the worker is orphaned as it would be (a PR_SET_PDEATHSIG the command set fires). The worker runs the command as the interpreter would: as __main__, with sys.argv and
sys.path as Python sets them, os.getppid() the process's parent, the signals the process ignores
ignored, numpy's global random state freshly seeded, its exit status, its uncaught exception
through sys.excepthook, atexit handlers.

A command starts for real instead when: the variable SOCKET_VAR is not in its environment (tests
that stop or freeze process groups remove it: a signal cannot reach the worker through a stopped
process), the server is not listening yet, the command line has interpreter options or is not a
module or script of this project or fairseq, or a variable read at start-up or by the preloaded
libraries differs from the server's.

Only the standard library is imported at module level: the client runs in every test subprocess.
"""

import contextlib
import json
import os
import signal
import socket
import struct
import sys

SOCKET_VAR = "CTEMP_TEST_FORKSERVER"
PRELOAD = (
    "torch",
    "torch._dynamo",  # torch.optim.Optimizer imports it on first use: ~1.3 s per training
    "torch.utils.tensorboard",
    "numpy",
    "scipy.stats",
    "sklearn.metrics",
    "sklearn.preprocessing",
    "omegaconf",
    "hydra",
    "hydra.core.config_store",
    "sacrebleu",
)
# Imported after PRELOAD but kept out of sys.modules until a command imports it (class Deferred).
PRELOAD_DEFERRED = "fairseq"
# Read by Python at start-up or by the preloaded libraries at import: a command's value must equal
# the server's (PYTHONPATH is applied per command; PYTHONUNBUFFERED too).
# (Not MKL_*: the server makes no MKL call, and MKL reads them at its first.)
FIXED_PREFIXES = ("PYTHON", "TORCH", "CUDA", "OMP_", "OPENBLAS_", "KMP_", "LD_", "HYDRA")
# PYTHON: the recipes' interpreter; TORCH_FORCE_*: read by each torch.load
PER_COMMAND = (
    "PYTHONPATH",
    "PYTHONUNBUFFERED",
    "PYTHON",
    "PYTHONIOENCODING",
    "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD",
    "TORCH_FORCE_WEIGHTS_ONLY_LOAD",
)
MODULE_PACKAGES = ("fairseq_ctemp", "fairseq_cli", "examples", "benchmarks", "scripts")
SCRIPT_PREFIXES = ("fairseq-", "ctemp-")  # console scripts
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT_DIRS = tuple(os.path.join(REPO, d, "") for d in ("examples", "benchmarks", "scripts"))
ORPHANED = signal.SIGRTMIN + 1  # the client's PR_SET_PDEATHSIG signal
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def send(sock, message, fds=()):
    data = json.dumps(message).encode()
    socket.send_fds(sock, [struct.pack("!I", len(data)) + data], list(fds))


def receive(sock, max_fds=0):
    """One message and the file descriptors sent with it; (None, []) at end of file."""
    head, fds, _, _ = socket.recv_fds(sock, 4, max_fds)
    if len(head) < 4:
        return None, fds
    size, data = struct.unpack("!I", head)[0], b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None, fds
        data += chunk
    return json.loads(data), fds


# ---- the client: in sitecustomize of every Python process started with SOCKET_VAR set ----


def program(argv):
    """('module', NAME) or ('script', PATH) for a command line the server can run, else None."""
    args = argv[1:]
    if len(args) >= 2 and args[0] == "-m" and args[1].split(".")[0] in MODULE_PACKAGES:
        return "module", args[1]
    if args and not args[0].startswith("-"):
        path = os.path.abspath(args[0])
        if os.path.basename(path).startswith(SCRIPT_PREFIXES) or path.startswith(SCRIPT_DIRS):
            return "script", args[0]
    return None


def hand_over():
    """Run this process's command in a worker of the server and exit with its status; returns
    without doing anything where the command must start for real."""
    path = os.environ.get(SOCKET_VAR)
    if not path or not sys.platform.startswith("linux") or program(sys.orig_argv) is None:
        return  # (Linux only: PR_SET_PDEATHSIG, pidfd)
    try:
        cwd = os.getcwd()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
    except OSError:
        return
    request = request_for(sys.orig_argv, cwd, os.getppid(), ignored_signals())
    send(sock, request, fds=(0, 1, 2))
    reply, _ = receive(sock)
    if reply is None or "pid" not in reply:
        sock.close()
        return  # the server declined: start for real
    for number in FORWARDED:
        signal.signal(number, lambda signum, frame, pid=reply["pid"]: forward(pid, signum))
    watch_parent(sock, request["ppid"])
    result, _ = receive(sock)
    exit_like(result["status"] if result else 0x100)  # no status: the session died; exit 1


def request_for(argv, cwd, ppid, ignored):
    """What a client sends: its command line, environment, directory, parent and ignored signals."""
    return {"argv": argv, "env": dict(os.environ), "cwd": cwd, "ppid": ppid, "ignored": ignored}


def ignored_signals():
    """The signals this process ignores: those its parent ignored (exec keeps them ignored; a
    background job of a script ignores SIGINT), and SIGPIPE and SIGXFSZ (Python's start-up)."""
    ignored = []
    for number in range(1, signal.NSIG):
        try:
            if signal.getsignal(number) == signal.SIG_IGN:
                ignored.append(number)
        except ValueError:
            pass
    return ignored


def watch_parent(sock, ppid):
    """When this process's parent dies, the worker's session ends (the worker is orphaned as this
    process would be: a PR_SET_PDEATHSIG it asked for fires)."""
    import ctypes

    signal.signal(ORPHANED, lambda signum, frame: send(sock, {"orphaned": True}))
    ctypes.CDLL(None).prctl(1, ORPHANED)  # PR_SET_PDEATHSIG
    if os.getppid() != ppid:  # died before the prctl
        send(sock, {"orphaned": True})


def forward(pid, signum):
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def exit_like(status):
    """End this process as the worker ended: its exit code, or the signal that killed it."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


# ---- the server ----


def serve(path):
    """Preload, then fork a session per connection on the Unix socket `path` (bound only when
    ready: until then commands start for real)."""
    import ctypes
    import importlib

    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: ends with the pytest process
    os.close(os.pidfd_open(os.getpid()))  # Linux 5.3 or later, else no server: commands start as usual
    fixed, before = fixed_env(os.environ), dict(os.environ)
    for name in PRELOAD:
        importlib.import_module(name)
    base = [p for p in sys.path[1:] if p not in pythonpath_entries(before)]
    deferred = Deferred.imported(PRELOAD_DEFERRED, base)
    # what the imports set (torch: KMP_DUPLICATE_LIB_OK, TORCHINDUCTOR_CACHE_DIR, ...), as they
    # would in the command's own process
    added = {k: v for k, v in os.environ.items() if before.get(k) != v}
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # sessions are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    while True:
        conn, _ = listener.accept()
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            listener.close()
            session(conn, fixed, added, base, deferred)
        conn.close()


def pythonpath_entries(env):
    """The sys.path entries Python makes of env's PYTHONPATH."""
    return [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]


def fixed_env(env):
    return {
        k: v
        for k, v in env.items()
        if k.startswith(FIXED_PREFIXES) and k not in PER_COMMAND and k != SOCKET_VAR
    }


def session(conn, fixed, added, base, deferred):
    """One command: fork its worker, pass on its pid, kill it if the client dies, report its end."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        request, fds = receive(conn, max_fds=3)
        why = declined(request, fds, fixed, added)
        print(
            f"{why or 'forked'}: {' '.join(request['argv'][1:3]) if request else ''}",
            file=sys.stderr,
            flush=True,
        )
        if why:
            send(conn, {"declined": why})
            os._exit(0)
        pid = os.fork()
        if pid == 0:
            conn.close()
            run_command(request, fds, added, base, deferred)
        for fd in fds:
            os.close(fd)
        try:
            send(conn, {"pid": pid})
        except OSError:  # the client is gone already (a process killed at its start)
            os.kill(pid, signal.SIGKILL)
        status = watch(conn, pid)
        with contextlib.suppress(OSError):  # the client may be gone (killed)
            send(conn, {"status": status})
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(0)


def declined(request, fds, fixed, added):
    """Why the server cannot run this request as its own process would run, or None."""
    if request is None or len(fds) != 3:
        return "bad request"
    theirs = {k: v for k, v in fixed_env(request["env"]).items() if added.get(k) != v}
    if theirs != fixed:
        return "start-up variables differ: " + " ".join(
            sorted({k for k in {**theirs, **fixed} if theirs.get(k) != fixed.get(k)})
        )
    return None


def watch(conn, pid):
    """Wait for the worker; kill it if the client goes away first (its socket reads end of file)."""
    import select

    pidfd = os.pidfd_open(pid)
    ready, _, _ = select.select([conn, pidfd], [], [])
    if pidfd not in ready:
        try:
            message, _ = receive(conn)
        except ConnectionResetError:  # the client was killed with our reply unread
            message = None
        if message is not None:  # orphaned: end the session, the worker's parent
            os._exit(0)
        os.kill(pid, signal.SIGKILL)  # the client is gone: so is the process it stands for
    return os.waitpid(pid, 0)[1]


def run_command(request, fds, added, base, deferred):
    """In the worker: become the command's process and run it as the interpreter would."""
    code, interrupted = 1, False
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environ.update(added)
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        reset_signals(request["ignored"])
        reseed_numpy()
        configure_streams(request["env"])
        emulate_parent(request["ppid"])
        code, interrupted = run_main(request["argv"], base, request["env"], deferred)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        finish(code, interrupted)


def configure_streams(env):
    """sys.stdin, stdout and stderr made anew on fds 0-2, as Python makes them for this environment
    (PYTHONIOENCODING, PYTHONUNBUFFERED) and these files."""
    import io

    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    encoding, _, errors = env.get("PYTHONIOENCODING", "").partition(":")
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        mode, old = "r" if fd == 0 else "w", getattr(sys, name)
        buffer = open(fd, mode + "b", buffering=0 if unbuffered and mode == "w" else -1, closefd=False)
        getattr(buffer, "raw", buffer).name = f"<{name}>"  # as Python names them
        stream = io.TextIOWrapper(
            buffer,
            encoding=encoding or old.encoding,
            errors=errors if errors and fd < 2 else old.errors,
            newline="\n",
            line_buffering=fd == 2 or (fd == 1 and os.isatty(1)),
            write_through=unbuffered and mode == "w",
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def emulate_parent(ppid):
    """os.getppid() answers as in the client's process (a sweep's run checks it was started by the
    sweep), until the worker is orphaned."""
    session, real = os.getppid(), os.getppid

    os.getppid = lambda: ppid if real() == session else real()


def reset_signals(ignored):
    """The dispositions the client's process started with: ignored, the signals it ignores; SIGINT
    raises KeyboardInterrupt unless ignored; every other signal its default."""
    for number in range(1, signal.NSIG):
        try:
            signal.signal(number, signal.SIG_IGN if number in ignored else signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    if signal.SIGINT not in ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def reseed_numpy():
    """numpy's global RandomState from fresh entropy, as its import in a new process seeds it (the
    server's own, forked, would give every command the same numbers)."""
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()


def run_main(argv, base, env, deferred):
    """Run the module or script of argv in __main__; (exit code, ended by KeyboardInterrupt)."""
    import builtins
    import runpy

    kind, target = program(argv)
    rest = argv[2:] if kind == "script" else argv[3:]
    first = os.getcwd() if kind == "module" else os.path.dirname(os.path.realpath(target))
    own = [first, *pythonpath_entries(env)]
    sys.path[:] = [*own, *base]
    if deferred is not None:
        deferred.install(own)
    sys.orig_argv = list(argv)
    main = sys.modules["__main__"].__dict__
    main.clear()
    main.update(__name__="__main__", __builtins__=builtins, __doc__=None, __spec__=None, __package__=None)
    try:
        if kind == "module":
            sys.argv = ["-m", *rest]
            runpy._run_module_as_main(target, alter_argv=True)
        else:
            sys.argv = [target, *rest]
            main.update(__file__=os.path.abspath(target), __cached__=None)
            with open(target, "rb") as f:
                code = compile(f.read(), os.path.abspath(target), "exec")
            exec(code, main)
    except SystemExit as e:
        return exit_code(e), False
    except BaseException as e:  # reported without this function's frame, as the interpreter would
        e.__traceback__ = e.__traceback__.tb_next or e.__traceback__
        sys.excepthook(type(e), e, e.__traceback__)
        return 1, isinstance(e, KeyboardInterrupt)
    return 0, False


def exit_code(e):
    """The interpreter's exit status for SystemExit(e.code)."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    print(e.code, file=sys.stderr)
    return 1


def finish(code, interrupted):
    """Shut down as the interpreter does (threads joined, atexit run, streams flushed), then exit
    with `code`, or by SIGINT after an uncaught KeyboardInterrupt."""
    import atexit
    import threading

    try:
        threading._shutdown()
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    finally:
        if interrupted:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code)


# ---- fairseq: imported in the server, revealed to a worker when its command imports it ----


class Deferred:
    """Modules the server imported (fairseq and what only it imports), out of sys.modules until the
    worker's command imports one of them; what their import did to logging is replayed then.

    fairseq's import configures logging: logging.basicConfig in three modules (the first call wins),
    and an INFO record. In a process of its own, what a command logs depends on whether it set up
    logging before it imported fairseq (fairseq_cli.train does; a script may not), so the server
    records those calls and records and the worker makes them at the command's first import. The
    import is made with sys.path without the command's own entries (its directory, PYTHONPATH); a
    command whose entries hold a module that import found, or one it looked for and did not find
    (fairseq tries optional packages: tensorboardX, apex, wandb, ...), imports it all anew. What the
    import changed outside its own modules is there from the start (hydra's ConfigStore holds
    fairseq's configs before the command imports fairseq)."""

    def __init__(self, modules, events, missing):
        self.modules, self.events, self.missing = modules, events, missing
        self.tops = {name.split(".")[0] for name in modules}
        self.revealed = None

    @classmethod
    def imported(cls, name, path):
        """Import `name` with sys.path `path` (recorded: recording()); its new modules leave
        sys.modules. None where the import cannot be replayed (it failed or warned, or configured
        logging with a stream, file or handlers of its own)."""
        import importlib

        before = set(sys.modules)
        with recording(path) as (events, missing, shown):
            try:
                importlib.import_module(name)
            except Exception:
                shown.append("failed")
        modules = {n: sys.modules.pop(n) for n in set(sys.modules) - before}
        own = {"format", "datefmt", "style", "level"}
        if shown or any(isinstance(e, dict) and e.keys() - own for e in events):
            return None  # (its modules stay out: each command imports them itself)
        return cls(modules, events, missing)

    def install(self, entries):
        """In the worker, before the command runs with these sys.path entries of its own."""
        if any(regular_module(top, entries) for top in self.tops) or any(
            findable(name, entries) for name in self.missing
        ):
            return  # the command's own import would find other modules: it imports them itself
        sys.meta_path.insert(0, self)

    def find_spec(self, name, path=None, target=None):
        import importlib.util

        if name not in self.modules:
            return None
        sys.meta_path.remove(self)
        module = self.modules.pop(name)  # (the import system puts it in sys.modules itself)
        sys.modules.update(self.modules)
        self.revealed = module, module.__spec__
        replay(self.events)
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        return self.revealed[0]

    def exec_module(self, module):
        module.__spec__ = self.revealed[1]  # its own, which the import system replaced


@contextlib.contextmanager
def recording(path):
    """Within, with sys.path `path`: (events: the logging.basicConfig calls (their keywords) and log
    records made, missing: the dotted names imports looked for and did not find, shown: the
    warnings shown); logging, sys.path and the import system as before after."""
    import builtins
    import logging
    import warnings

    root, events, missing, failed, probed = logging.getLogger(), [], set(), set(), set()
    saved = sys.path[:], root.handlers[:], root.level, logging.basicConfig, builtins.__import__

    def import_(name, globals=None, locals=None, fromlist=(), level=0):
        try:
            return saved[4](name, globals, locals, fromlist, level)
        except ImportError:
            if not level:
                failed.add(name)  # the whole name: `import a.b` where `a` is not found looks for a.b
            raise

    finder = MissingFinder(probed)
    sys.path[:], root.handlers[:] = path, [Recorder(events)]
    root.setLevel(1)  # every record is made, whatever level the command sets
    logging.basicConfig, builtins.__import__ = (lambda **kwargs: events.append(kwargs)), import_
    sys.meta_path.append(finder)
    try:
        with warnings.catch_warnings(record=True) as shown:
            yield events, missing, shown
    finally:
        sys.meta_path.remove(finder)
        sys.path[:], root.handlers[:], level, logging.basicConfig, builtins.__import__ = saved
        root.setLevel(level)
        # a name found missing by a probe (importlib.util.find_spec, a parent looked for first)
        # counts unless a failed import statement asked for a longer one
        missing |= failed | {n for n in probed if not any(f.startswith(n + ".") for f in failed)}


class Recorder:
    """A logging handler that keeps the records (a stand-in: only handle() is called)."""

    def __init__(self, events):
        self.events, self.level = events, 0

    def handle(self, record):
        self.events.append(record)


class MissingFinder:
    """Last on sys.meta_path: the names no other finder found."""

    def __init__(self, missing):
        self.missing = missing

    def find_spec(self, name, path=None, target=None):
        self.missing.add(name)


def replay(events):
    """The logging.basicConfig calls and the records of an import, made now."""
    import logging

    for event in events:
        if isinstance(event, dict):
            logging.basicConfig(**event)
            continue
        logger = logging.getLogger(event.name)
        if logger.isEnabledFor(event.levelno):
            args = (event.pathname, event.lineno, event.msg, event.args, event.exc_info, event.funcName)
            logger.handle(logger.makeRecord(event.name, event.levelno, *args, None, event.stack_info))


def regular_module(name, entries):
    """Whether a module or regular package `name` is in one of the sys.path entries."""
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec(name, entries)
    return spec is not None and spec.origin is not None


def findable(name, entries):
    """Whether the dotted `name` would be found with these sys.path entries (namespace packages
    included)."""
    from importlib.machinery import PathFinder

    parts, path = name.split("."), entries
    for i in range(len(parts)):
        spec = PathFinder.find_spec(".".join(parts[: i + 1]), path)
        if spec is None:
            return False
        path = spec.submodule_search_locations
        if path is None:
            return i == len(parts) - 1
    return True
