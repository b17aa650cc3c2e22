# Source this at the start of a command on the TPU machine (no network; jax, jaxlib, libtpu, numpy and
# scipy preinstalled on PYTHONPATH), after scripts/tpu_wheels.sh filled .whl-tpu/ here and the call carried it:
#
#   source scripts/tpu_env.sh || exit 1; autotune tune studies/accel_rnn.py
#
# It installs the wheels in .whl-tpu/ into $TPU_SITE (default /tmp/site; commands there run as an ordinary
# user), appends that folder and then the repository root to PYTHONPATH (the machine's own JAX stays first;
# the root last, so `import autotune` and `python3 -m autotune` work without installing the package), defines
# a shell function `autotune` (python3 -m autotune "$@"), and prints one line: python, jax, and whether
# optuna, sqlalchemy, rich and flatbuffers import. It imports jax but opens no device (one process at a time
# may hold the TPU chip). It returns non-zero with one line on stderr when something is missing.
# docs/how-to/tpu-host.md says more.

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    echo "tpu_env: source this file (source scripts/tpu_env.sh), do not run it: its settings would be lost" >&2
    exit 2
fi

_tpu_env() {
    local root site py stamp wheels log
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd) || return 1
    site=${TPU_SITE:-/tmp/site}
    py=${PYTHON:-python3}

    if ! compgen -G "$root/.whl-tpu/*.whl" >/dev/null; then
        echo "tpu_env: no wheels in $root/.whl-tpu/: run scripts/tpu_wheels.sh where PyPI is reachable and carry .whl-tpu in the call" >&2
        return 1
    fi
    # A warm machine keeps /tmp between calls: install again only when the set of wheels changed.
    wheels=$(cd "$root/.whl-tpu" && ls -1 -- *.whl)
    stamp=$site/.tpu-wheels
    if [[ ! -f $stamp || $(<"$stamp") != "$wheels" ]]; then
        log=$(mktemp)
        if ! PIP_CONFIG_FILE=/dev/null "$py" -m pip install --isolated -q --no-index --no-deps --no-compile \
            --no-cache-dir --upgrade --target "$site" "$root"/.whl-tpu/*.whl >"$log" 2>&1; then
            echo "tpu_env: installing .whl-tpu/*.whl into $site failed ($("$py" -c 'import platform, sys; print("python", sys.version.split()[0], "glibc", platform.libc_ver()[1])' 2>&1)): $(grep -v '^\s*$' "$log" | tail -n 1)" >&2
            rm -f "$log"
            return 1
        fi
        rm -f "$log"
        printf '%s\n' "$wheels" >"$stamp"
    fi

    case ":${PYTHONPATH:-}:" in *":$site:"*) ;; *) PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$site ;; esac
    case ":$PYTHONPATH:" in *":$root:"*) ;; *) PYTHONPATH=$PYTHONPATH:$root ;; esac
    export PYTHONPATH
    export PYTHONUNBUFFERED=${PYTHONUNBUFFERED:-1}  # the output of a killed command still comes back

    # Imports only: jax.devices() (or any computation) would open the chip in this short-lived process.
    "$py" - <<'EOF'
import importlib, platform, sys

parts, bad = [f"python {platform.python_version()}"], []
try:
    import jax

    parts.append(f"jax {jax.__version__} ({jax.__file__.rsplit('/', 2)[0]})")
except Exception as e:  # noqa: BLE001
    parts.append(f"jax FAILED ({type(e).__name__}: {e})")
    bad.append("jax")
for name in ("optuna", "sqlalchemy", "rich", "flatbuffers", "autotune"):
    try:
        mod = importlib.import_module(name)
        ver = getattr(mod, "__version__", None)
        if ver is None:
            from importlib.metadata import version

            ver = version(name)
        parts.append(f"{name} {ver}")
    except Exception as e:  # noqa: BLE001
        parts.append(f"{name} FAILED ({type(e).__name__}: {str(e)[:80]})")
        bad.append(name)
if not {"jax", "autotune"} & set(bad):
    from autotune.program import _compat  # noqa: E402

    if _compat.backends_started():  # an import opened the chip: it would stay held while this line prints
        parts.append("JAX backends were initialised by an import")
        bad.append("backends")
print("tpu_env: " + ", ".join(parts), file=sys.stderr if bad else sys.stdout)
sys.exit(1 if bad else 0)
EOF
    [[ $? -eq 0 ]] || return 1
    autotune() { "${PYTHON:-python3}" -m autotune "$@"; }
}

_tpu_env
_tpu_env_rc=$?
unset -f _tpu_env
return $_tpu_env_rc  # the status of `source scripts/tpu_env.sh`
