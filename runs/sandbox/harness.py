"""The trusted start of every sandboxed program (runs inside the sandbox).

Run as ``python -I -S -c <this file> <limits...> <verdict fd> <no network>
<landlock>`` by ``runs/sandbox/__init__.py`` on the sandbox's interpreter:
the standard library of Python 3.9 only. It is public (on its command line).

1. Sets the resource limits, and in the limits mode a seccomp filter that
   denies creating sockets, System V IPC objects and io_uring rings, for good
   (with ``no_new_privs``), and where the kernel has Landlock a ruleset that
   lets it read only the system's directories and write only its own; all
   are inherited by everything started after.
2. Forks the candidate's process, which first replaces its standard input by
   ``/dev/null`` and closes the verdict pipe, then waits for its source.
3. Makes itself undumpable, so the candidate's process (same uid) can neither
   read its memory nor reopen its descriptors through ``/proc``, and only then
   reads the nonce, the candidate's source and the tests from standard input.
4. Sends the source; the candidate's process executes it as a module and then
   answers calls. The tests run here, in their own interpreter: ``candidate``
   and any other name of the candidate's module the tests use are stand-ins
   that send the arguments and receive the result as plain data (marshal of
   None, bool, int, float, complex, str, bytes, tuple, list, dict, set,
   frozenset; anything else is refused on both sides), so no object of the
   candidate's ever reaches the tests.
5. Writes the nonce to the verdict pipe only after ``check`` returned. When
   the candidate's process ends first, this process ends the same way (its
   exit status or signal), without the verdict.
"""

import marshal
import os
import resource
import sys

PLAIN = (type(None), bool, int, float, complex, str, bytes)
CONTAINERS = (tuple, list, set, frozenset)
MAX_MESSAGE = 1 << 30


class CandidateEnded(BaseException):
    """The candidate's process is gone; not an Exception: tests cannot catch it."""


class CandidateError(Exception):
    """The candidate raised an exception that is not one of Python's own."""


class ProtocolError(Exception):
    """The candidate's process sent something that is not a reply."""


# -- limits ----------------------------------------------------------------------


def _count_mine():
    uid, n = os.getuid(), 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:  # noqa: SIM105 (contextlib: an import more at every start)
                n += os.stat("/proc/" + name).st_uid == uid
            except OSError:
                pass
    return n


def _limit(cpu, mem, nproc, fsize, nofile):
    r = resource
    # One process more than asked: the candidate's own, beside this one.
    for which, soft, hard in (
        (r.RLIMIT_CPU, cpu, cpu + 1),
        (r.RLIMIT_AS, mem, mem),
        (r.RLIMIT_FSIZE, fsize, fsize),
        (r.RLIMIT_NOFILE, nofile, nofile),
        (r.RLIMIT_CORE, 0, 0),
        (r.RLIMIT_NPROC, _count_mine() + nproc + 1, 0),
    ):
        ceiling = r.getrlimit(which)[1]
        if ceiling != r.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        r.setrlimit(which, (soft, max(hard, soft)))


DENIED_SYSCALLS = (
    b"socket",  # every address family: TCP, UDP, unix (PostgreSQL, Redis), netlink
    b"io_uring_setup",  # io_uring can create and connect sockets past seccomp
    b"io_uring_enter",
    b"io_uring_register",
    b"shmget",  # System V IPC objects outlive the processes that made them
    b"semget",
    b"msgget",
    b"mq_open",
)


def _deny_network():
    """Install the seccomp filter through libseccomp (ctypes), or exit 125."""
    import ctypes
    import errno

    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError as exc:
        _refuse(f"libseccomp is not installed (apt-get install libseccomp2): {exc}")
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
    ]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    allow, deny = 0x7FFF0000, 0x00050000 | errno.EACCES  # SCMP_ACT_ERRNO(EACCES)
    # Other architectures' system calls (i386's socketcall on x86-64) are
    # killed: libseccomp's default for a filter of the native one only.
    context = lib.seccomp_init(allow)
    if not context:
        _refuse("seccomp_init failed")
    for name in DENIED_SYSCALLS:
        number = lib.seccomp_syscall_resolve_name(name)
        if number < 0:
            continue  # not a system call on this architecture
        code = lib.seccomp_rule_add(context, deny, number, 0)
        if code < 0:
            _refuse(f"seccomp_rule_add({name.decode()}): {os.strerror(-code)}")
    code = lib.seccomp_load(context)  # sets no_new_privs first
    if code < 0:
        _refuse(f"seccomp_load: {os.strerror(-code)}")
    import _socket

    try:
        _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM).close()
    except PermissionError:
        return
    _refuse("the seccomp filter did not deny socket()")


# Landlock (Linux 5.13): the files a process and its children may open.
LANDLOCK_READ = 1 | 4 | 8  # EXECUTE, READ_FILE, READ_DIR
LANDLOCK_FILE = 1 | 2 | 4  # EXECUTE, WRITE_FILE, READ_FILE (+ TRUNCATE, IOCTL_DEV)
READABLE = ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin")
DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")


def _confine_files(workdir):
    """Read only the system's directories and the interpreter's, write only
    ``workdir`` (the server asks for it where the kernel has Landlock)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    abi = syscall(444, None, 0, 1)  # landlock_create_ruleset(VERSION)
    if abi < 1:
        _refuse("Landlock is not available")
    handled = (1 << 13) - 1  # ABI 1: execute .. make_sym
    file_rights = LANDLOCK_FILE
    if abi >= 2:
        handled |= 1 << 13  # REFER
    if abi >= 3:
        handled |= 1 << 14  # TRUNCATE
        file_rights |= 1 << 14
    if abi >= 5:
        handled |= 1 << 15  # IOCTL_DEV
        file_rights |= 1 << 15

    class Ruleset(ctypes.Structure):
        _fields_ = [
            ("fs", ctypes.c_uint64),
            ("net", ctypes.c_uint64),
            ("scoped", ctypes.c_uint64),
        ]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    # ABI 6: no signals to, nor abstract unix sockets of, processes outside.
    ruleset = Ruleset(handled, 0, 3 if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    fd = syscall(444, ctypes.byref(ruleset), size, 0)
    if fd < 0:
        _refuse(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    roots = [(path, LANDLOCK_READ) for path in READABLE]
    roots += [(sys.base_prefix, LANDLOCK_READ), (sys.prefix, LANDLOCK_READ)]
    roots += [(path, file_rights) for path in DEVICES] + [(workdir, handled)]
    for path, rights in roots:
        try:
            target = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # not on this system
        rule = PathBeneath(rights, target)
        code = syscall(445, fd, 1, ctypes.byref(rule), 0)  # PATH_BENEATH
        os.close(target)
        if code < 0:
            _refuse(f"landlock_add_rule({path}): {os.strerror(ctypes.get_errno())}")
    if syscall(446, fd, 0) < 0:  # landlock_restrict_self (after no_new_privs)
        _refuse(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    os.close(fd)


def _undumpable():
    # _ctypes, not ctypes: a tenth of its import time, on every program.
    import _ctypes

    class Long(_ctypes._SimpleCData):
        _type_ = "l"

    class Function(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = Long

    class Libc:
        _handle = _ctypes.dlopen(None, 0)  # type: ignore[arg-type]  # NULL: this program

    prctl = Function(("prctl", Libc))  # type: ignore[arg-type]  # any object with _handle
    if prctl(4, 0, 0, 0, 0) != 0 or prctl(3, 0, 0, 0, 0) != 0:  # SET/GET_DUMPABLE
        _refuse(f"prctl(PR_SET_DUMPABLE): {os.strerror(_ctypes.get_errno())}")


def _refuse(message):
    os.write(2, (f"sandbox: {message}\n").encode())
    os._exit(125)


# -- plain data across the boundary -------------------------------------------


def _plain(value):
    """``value`` as plain data (either side), else TypeError."""
    kind = type(value)
    if kind in PLAIN:
        return value
    if kind is dict:
        return {_plain(key): _plain(item) for key, item in value.items()}
    if kind in CONTAINERS:
        return kind(_plain(item) for item in value)
    for base in (int, float, complex, str, bytes, tuple, list, dict, set, frozenset):
        if isinstance(value, base):  # a subclass: its plain value
            return _plain(base(value))  # type: ignore[arg-type]  # value is a base
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(
        f"a {kind.__name__} cannot be passed between the candidate and the tests "
        "(plain data only: None, bool, int, float, complex, str, bytes, tuple, "
        "list, dict, set, frozenset)"
    )


def _checked(value):
    """``value`` if it holds plain data only (the tests' side), else ProtocolError."""
    stack, seen = [value], set()
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in PLAIN or ((kind in CONTAINERS or kind is dict) and not item):
            continue
        # Honest replies are trees (_plain copies); marshal could build a
        # list that holds itself.
        if id(item) in seen:
            raise ProtocolError("a container that holds itself")
        seen.add(id(item))
        if kind in CONTAINERS:
            stack.extend(item)
        elif kind is dict:
            stack.extend(item.keys())
            stack.extend(item.values())
        else:
            raise ProtocolError(f"a {kind.__name__} in a reply")
    return value


def _send(fd, message):
    data = marshal.dumps(message)
    data = len(data).to_bytes(8, "little") + data
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read(fd, size):
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _receive(fd):
    size = int.from_bytes(_read(fd, 8), "little")
    if size > MAX_MESSAGE:
        raise ProtocolError(f"a message of {size} bytes")
    data = _read(fd, size)
    try:
        return marshal.loads(data)
    except (EOFError, ValueError, TypeError) as exc:
        raise ProtocolError(str(exc)) from None


# -- the candidate's process ---------------------------------------------------


def _candidate(requests, replies):
    """Executes the candidate's source, then answers calls until the tests end."""
    text = _receive(requests)
    module = {"__name__": "program"}
    try:
        exec(compile(text, "<program>", "exec"), module)
    except SystemExit:
        raise
    except BaseException as exc:
        _fail(exc, text, "<program>", sys.exit)
    _flush()
    _send(replies, ("loaded",))
    while True:
        try:
            request = _receive(requests)
        except EOFError:
            _flush()
            os._exit(0)
        reply = _answer(module, request)
        try:
            _send(replies, reply)
        except ValueError as exc:  # nested too deep for marshal
            _send(replies, ("raise", "ValueError", str(exc), ""))


def _answer(module, request):
    if request[0] == "names":
        found: dict = {}
        for name in request[1]:
            if name not in module:
                continue
            value = module[name]
            if callable(value):
                found[name] = ("call",)
            elif type(value).__name__ == "module":
                found[name] = ("module", value.__name__)
            else:
                try:
                    found[name] = ("value", _plain(value))
                except (TypeError, RecursionError):
                    continue
        return ("names", found)
    _, name, args, kwargs = request  # from the tests: well formed
    try:
        if name not in module:
            raise NameError(f"name {name!r} is not defined")
        result = module[name](*args, **kwargs)
        iterator = hasattr(result, "__next__") and hasattr(result, "__iter__")
        if iterator:
            result = list(result)
        reply = ("ok", _plain(result), iterator)
    except (SystemExit, KeyboardInterrupt):
        raise
    except MemoryError:
        _out_of_memory()
    except BaseException as exc:
        reply = ("raise", *_described(exc))
    _flush()
    return reply


def _described(exc):
    import traceback

    try:
        message = str(exc)
    except Exception:
        message = ""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if frame.filename != "<string>"
    ]
    trace = "".join(traceback.format_list(frames))
    return type(exc).__name__, message, trace


def _out_of_memory():
    # Its frames still hold what it allocated: no imports now.
    os.write(2, b"MemoryError: out of its memory limit\n")
    os._exit(1)


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105
            stream.flush()
        except (OSError, ValueError):
            pass


def _print_exception(exc, text, filename):
    # The program's frames only; imported now: a fifth of a program's start.
    import linecache
    import traceback

    lines = text.splitlines(True)
    linecache.cache[filename] = (len(text), None, lines, filename)
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if frame.filename != "<string>"
    ]
    sys.stderr.write("Traceback (most recent call last):\n")
    sys.stderr.write("".join(traceback.format_list(frames)))
    sys.stderr.write("".join(traceback.format_exception_only(type(exc), exc)))
    _flush()


def _fail(exc, text, filename, end):
    """Reports what stopped the program or the tests, then calls ``end(1)``."""
    if isinstance(exc, MemoryError):
        _out_of_memory()
    _print_exception(exc, text, filename)
    end(1)


# -- the tests' process --------------------------------------------------------


class Candidate:
    """The channel to the candidate's process; its end mirrors the tests' end."""

    def __init__(self, pid, requests, replies):
        self.pid, self.requests, self.replies = pid, requests, replies
        self.poll = None
        # Processes it started hold its pipe open after it ended: its end is
        # told by a pidfd (Linux 5.3), the pipe's end only where there is none.
        try:
            import select

            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            return
        self.pidfd, self.poll = pidfd, select.poll()
        self.poll.register(replies, select.POLLIN)
        self.poll.register(pidfd, select.POLLIN)

    def ask(self, message):
        try:
            _send(self.requests, message)
            while self.poll is not None:
                ready = [fd for fd, _ in self.poll.poll()]
                if self.replies in ready:
                    break
                if self.pidfd in ready:
                    raise CandidateEnded
            return _checked(_receive(self.replies))
        except (EOFError, BrokenPipeError):
            raise CandidateEnded from None

    def stand_in(self, name):
        candidate = self

        def call(*args, **kwargs):
            try:
                message = ("call", name, _plain(args), _plain(kwargs))
            except RecursionError:
                raise TypeError("arguments nested too deep") from None
            reply = candidate.ask(message)
            if type(reply) is tuple and reply[:1] == ("ok",) and len(reply) == 3:
                return iter(reply[1]) if reply[2] is True else reply[1]
            if type(reply) is tuple and reply[:1] == ("raise",) and len(reply) == 4:
                _raise(*(str(part) for part in reply[1:]))
            raise ProtocolError("an answer that is not a reply")

        call.__name__ = call.__qualname__ = name
        return call

    def bind(self, names, namespace):
        """The names the tests use and their own code does not define."""
        reply = self.ask(("names", sorted(names)))
        if type(reply) is not tuple or reply[:1] != ("names",):
            raise ProtocolError("an answer that is not a list of names")
        for name, found in dict(reply[1]).items():
            if name not in names or type(found) is not tuple or not found:
                continue
            if found[0] == "call":
                namespace[name] = self.stand_in(name)
            elif found[0] == "value" and len(found) == 2:
                namespace[name] = found[1]
            elif found[0] == "module" and str(found[1]) in _stdlib():
                namespace[name] = __import__(str(found[1]))

    def mirror(self):
        """End this process as the candidate's ended (it did: its pipe closed)."""
        _flush()
        _, status = os.waitpid(self.pid, 0)
        if os.WIFSIGNALED(status):
            import signal

            number = os.WTERMSIG(status)
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)
            os._exit(128 + number)
        os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _stdlib():
    names = getattr(sys, "stdlib_module_names", ())
    return set(names) | set(sys.builtin_module_names)


def _raise(name, message, trace):
    import builtins

    kind = getattr(builtins, name, None)
    exc = None
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            exc = kind(message)
        except Exception:  # one that takes other arguments (UnicodeDecodeError)
            exc = None
    if exc is None:
        exc = CandidateError(f"{name}: {message}")
    if trace and hasattr(exc, "add_note"):
        exc.add_note("raised by the candidate:\n" + trace.rstrip())
    raise exc


def _names_used(code):
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, type(code)):
            names |= _names_used(constant)
    return names


def _tests(candidate, tests, entry_point):
    import builtins

    code = compile(tests, "<tests>", "exec")
    namespace = {"__name__": "tests"}
    exec(code, namespace)
    wanted = {
        name
        for name in _names_used(code)
        if name not in namespace and not hasattr(builtins, name)
    }
    if wanted:
        candidate.bind(wanted, namespace)
    check = namespace.get("check")
    if not callable(check):
        raise NameError("the tests define no check function")
    check(candidate.stand_in(entry_point))


def _main():
    cpu, mem, nproc, fsize, nofile, verdict, no_network, landlock = map(
        int, sys.argv[1:9]
    )
    _limit(cpu, mem, nproc, fsize, nofile)
    if no_network:
        _deny_network()
    if landlock:
        _confine_files(os.getcwd())
    _flush()
    requests_in, requests_out = os.pipe()
    replies_in, replies_out = os.pipe()
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd in (null, verdict, requests_out, replies_in):
            os.close(fd)
        _candidate(requests_in, replies_out)
        return
    os.close(requests_in)
    os.close(replies_out)
    _undumpable()
    nonce, _, payload = sys.stdin.buffer.read().partition(b"\n")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    source, tests, entry_point = marshal.loads(payload)
    del payload
    candidate = Candidate(pid, requests_out, replies_in)
    try:
        if candidate.ask(source) != ("loaded",):
            raise ProtocolError("no answer to its source")
        _tests(candidate, tests, entry_point)
    except CandidateEnded:
        candidate.mirror()
    except ProtocolError as exc:
        os.write(2, (f"the candidate's process broke the protocol: {exc}\n").encode())
        os._exit(1)
    except BaseException as exc:
        _fail(exc, tests, "<tests>", os._exit)
    _flush()
    os.write(verdict, nonce)
    os._exit(0)


if __name__ == "__main__":
    _main()
