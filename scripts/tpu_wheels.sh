#!/usr/bin/env bash
# Wheels of the runtime dependencies a TPU machine without network lacks, into .whl-tpu/.
#
#   scripts/tpu_wheels.sh            # the set `autotune tune` needs: optuna, sqlalchemy, rich, flatbuffers, ...
#   scripts/tpu_wheels.sh --report   # also matplotlib and its needs (~24 MB more), for `autotune report` there
#
# Run it here, where PyPI is reachable; scripts/tpu_env.sh installs the wheels there (docs/how-to/tpu-host.md).
# The TPU image has jax 0.10.2, jaxlib, libtpu, numpy and scipy (so also ml_dtypes and opt_einsum, which jax
# needs); everything else the package imports at run time travels as a wheel for CPython 3.11 on x86-64 Linux.
# The versions are those `make install` puts in .venv (with constraints.txt), so both sides run the same code;
# the script warns when .venv holds another version. `packaging`, `typing_extensions` and `Pygments` travel
# too although the image's pytest may bring some version of them: they are small, and /tmp/site comes before
# the image's site-packages, so optuna, sqlalchemy and rich get the versions they are tested with here.
# SQLAlchemy 2.1 needs no greenlet (only its asyncio extra does), so none travels.
#
# Idempotent: a wheel already in .whl-tpu/ is not fetched again (no network call when all are present); a
# wheel of another version of a pinned package is removed (two versions of one package stop the install).
# Other wheels in the folder are left alone, but the check below covers every wheel there. It ends by
# checking that the set is closed (every Requires-Dist, extras and other platforms' markers skipped, is in
# the folder or in the image, at a version it accepts) and prints each wheel's size and the total: the
# whole working tree sent to the TPU machine, these wheels included, must stay under 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEST=.whl-tpu

# NAME==VERSION, as in .venv (pip show there).
CORE=(
    optuna==5.1.0          # the study
    alembic==1.20.1        # optuna's RDB storage (its schema migrations)
    Mako==1.4.3            # alembic
    MarkupSafe==3.0.4      # Mako
    colorlog==6.12.0       # optuna's logging (imported by `import optuna`)
    tqdm==4.70.1           # optuna's progress bar (imported by `import optuna`)
    PyYAML==6.0.4          # optuna
    packaging==26.4        # optuna
    SQLAlchemy==2.1.9      # the cache and optuna's storage
    typing_extensions==4.16.0  # SQLAlchemy, alembic
    rich==15.0.0           # the CLI's tables and progress
    markdown-it-py==4.3.0  # rich
    mdurl==0.1.2           # markdown-it-py
    Pygments==2.21.0       # rich
    flatbuffers==25.12.19  # jax.export serialises programs for the isolated trial worker
)
# `autotune report` alone imports matplotlib (its PNG figures); a report can as well be written here from
# the study database copied back, so these travel only with --report.
REPORT=(
    matplotlib==3.11.2
    contourpy==1.3.3
    cycler==0.12.1
    fonttools==4.68.0
    kiwisolver==1.5.1
    pillow==13.0.0
    pyparsing==3.3.3
    python-dateutil==4.0.0
    tzdata==2026.6
)

WANT=("${CORE[@]}")
case "${1:-}" in
    "") ;;
    --report) WANT+=("${REPORT[@]}") ;;
    *) echo "usage: scripts/tpu_wheels.sh [--report]" >&2; exit 2 ;;
esac

mkdir -p "$DEST"

# A wheel's file name starts with its name normalised (lower case, runs of -_. as _), then -VERSION-.
norm() { tr 'A-Z' 'a-z' <<<"$1" | sed -E 's/[-_.]+/_/g'; }

missing=()
for spec in "${WANT[@]}"; do
    name=${spec%%==*} ver=${spec#*==} n=$(norm "$name")
    have=0
    for f in "$DEST"/*.whl; do
        [[ -e $f ]] || continue
        base=$(basename "$f")
        fname=$(norm "${base%%-*}") rest=${base#*-} fver=${rest%%-*}
        [[ $fname == "$n" ]] || continue
        if [[ $fver == "$ver" ]]; then
            have=1
        else
            echo "removing $base (pinned: $name==$ver)"
            rm -f -- "$f"
        fi
    done
    ((have)) || missing+=("$spec")
done

if ((${#missing[@]})); then
    echo "downloading ${#missing[@]} wheel(s): ${missing[*]}"
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any \
        -d "$DEST" "${missing[@]}"
else
    echo "all ${#WANT[@]} wheels already in $DEST/"
fi

# Check: one version each, the right Python and platform, the set closed; then sizes. Pins vs .venv: warn.
VENV_PY=""
[[ -x .venv/bin/python ]] && VENV_PY=.venv/bin/python
"$PY" - "$DEST" "$VENV_PY" "${WANT[@]}" <<'EOF'
import os, re, subprocess, sys, zipfile
from email.parser import Parser

try:
    from packaging.requirements import Requirement
    from packaging.version import Version
except ImportError:  # pip carries its own copy
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.version import Version

dest, venv_py, want = sys.argv[1], sys.argv[2], sys.argv[3:]
norm = lambda s: re.sub(r"[-_.]+", "-", s).lower()
# What the TPU image holds (jax and what jax and jaxlib need): never shipped, accepted as satisfied.
IMAGE = {"jax", "jaxlib", "libtpu", "numpy", "scipy", "ml-dtypes", "opt-einsum"}
ENV = {"python_version": "3.11", "python_full_version": "3.11.0", "implementation_name": "cpython",
       "platform_python_implementation": "CPython", "sys_platform": "linux", "platform_system": "Linux",
       "platform_machine": "x86_64", "os_name": "posix", "extra": ""}

wheels, problems, glibc = {}, [], (2, 5)
for f in sorted(os.listdir(dest)):
    if not f.endswith(".whl"):
        continue
    name, ver, *_, py, abi, plat = f[:-4].split("-")
    key = norm(name)
    if key in wheels:
        problems.append(f"two wheels of {key}: {wheels[key][1]} and {f}")
    pys = py.split(".")
    if not any(p in ("py3", "cp311") or (abi == "abi3" and p.startswith("cp3") and int(p[3:]) <= 11) for p in pys):
        problems.append(f"{f} is not for CPython 3.11")
    need = None
    for p in plat.split("."):
        m = re.fullmatch(r"manylinux_(\d+)_(\d+)_x86_64", p)
        old = {"manylinux1_x86_64": (2, 5), "manylinux2010_x86_64": (2, 12), "manylinux2014_x86_64": (2, 17)}
        g = (int(m[1]), int(m[2])) if m else old.get(p, (0, 0) if p == "any" else None)
        if g is not None and (need is None or g < need):
            need = g
    if need is None:
        problems.append(f"{f} is not for x86-64 Linux")
    else:
        glibc = max(glibc, need)
    with zipfile.ZipFile(os.path.join(dest, f)) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        md = Parser().parsestr(z.read(meta).decode())
    wheels[key] = (Version(md["Version"]), f, md.get_all("Requires-Dist") or [], os.path.getsize(os.path.join(dest, f)))

for spec in want:
    name, ver = spec.split("==")
    if norm(name) not in wheels:
        problems.append(f"{spec} was not downloaded")
for key, (ver, f, reqs, _) in wheels.items():
    for line in reqs:
        r = Requirement(line)
        if r.marker is not None and not r.marker.evaluate(ENV):
            continue  # an extra, or another Python or platform
        dep = norm(r.name)
        if dep in IMAGE:
            continue
        if dep not in wheels:
            problems.append(f"{f} needs {line}, which is neither in {dest}/ nor in the TPU image")
        elif not r.specifier.contains(wheels[dep][0], prereleases=True):
            problems.append(f"{f} needs {line}, but {dest}/ has {dep} {wheels[dep][0]}")

if venv_py:
    names = [s.split("==")[0] for s in want]
    code = ("import sys, importlib.metadata as m\n"
            "for n in sys.argv[1:]:\n"
            "    try: print(n, m.version(n))\n"
            "    except m.PackageNotFoundError: print(n, '-')\n")
    out = subprocess.run([venv_py, "-c", code, *names], capture_output=True, text=True).stdout.split("\n")
    got = dict(l.split(" ", 1) for l in out if " " in l)
    for spec in want:
        name, ver = spec.split("==")
        if got.get(name, ver) not in (ver, "-"):
            print(f"warning: .venv has {name} {got[name]}, this script pins {ver}: update the pin", file=sys.stderr)

total = 0
for key, (ver, f, _, size) in sorted(wheels.items()):
    total += size
    print(f"{size / 1e6:8.2f} MB  {f}")
print(f"{total / 1e6:8.2f} MB  in {len(wheels)} wheels in {dest}/ ({total / 2**20:.1f} MiB of the 64 MiB that may travel);"
      f" needs glibc >= {glibc[0]}.{glibc[1]} on the TPU machine")
if problems:
    for p in problems:
        print("error: " + p, file=sys.stderr)
    sys.exit(1)
print(f"closed: every requirement is in {dest}/ or in the TPU image (jax, jaxlib, numpy, scipy, ml_dtypes, opt_einsum)")
EOF
