#!/usr/bin/env bash
# Set up avalanche-sets on a GPU machine that has no network access.
#
# The lent GPU machines' image ("cuda") has Python 3.12 with its own CUDA
# build of torch (2.11) and many scientific packages, but none of avalanche-lib, cvxpy,
# cvxpylayers, POT or quadprog, and it cannot reach a package registry. So the set-up is
# split in two:
#
#   scripts/gpu_env.sh fetch [DIR]    on a machine WITH registry access (default DIR: .whl):
#       resolves the project's run-time dependencies for CPython 3.12 / manylinux x86_64,
#       keeps what they need that is neither the torch family nor in the GPU image (the skip
#       list below) nor deliberately left out (the omit list below), and downloads those
#       wheels into DIR. Pure-Python packages published as sdists only (gputil) are built into
#       wheels here. DIR/requirements.txt records the exact set. DIR belongs to this
#       script: wheels and archives in it that are not part of the set are removed.
#   scripts/gpu_env.sh install [DIR]  on the GPU machine, from the repository root:
#       creates the virtual environment .venv-gpu on top of the image's Python (its torch is
#       used, never replaced), installs DIR's wheels without any network access (--no-index),
#       installs the project in editable mode,
#       reports unmet requirements (pip check: a version mismatch with the image's own packages
#       is a warning, the image's version is used) and checks that torch (with CUDA),
#       avalanche, ot, cvxpy and avalanche_sets import.
#       The prepared device run, scripts/gpu_check.sh, needs none of this: it installs the
#       carried wheels with `pip install --target` alone.
#   scripts/gpu_env.sh list
#       prints the FIRST-LEVEL requirements that `fetch` resolves, one per line: the
#       project's [project].dependencies less the torch family and the skip list.
#       It works offline; their transitive dependencies are only known to `fetch`.
#
# Size: the device tool carries at most 64 MiB with the whole working tree (tracked files
# included), so `fetch` keeps DIR small (about 30 MiB instead of 170):
#   * POT < 0.9.7 and scs < 3.3 (GPU_ENV_PINS): 0.9.7 adds a 170 MB solver library (32 MiB
#     wheel) the project does not use, and scs 3.3 bundles MKL (42 MiB instead of 12);
#   * avalanche-lib asks for qpsolvers[open_source_solvers], a dozen QP solvers that qpsolvers
#     only imports if present; Avalanche's GEM uses quadprog, which is kept. cvxpy 1.9's
#     sparsediffpy serves only its nonlinear (NLP) solvers. They are left out (GPU_ENV_OMIT);
#   * wandb's wheel is 20 MiB of bundled programs (wandb-core, its system monitor, a parquet
#     library) that only a W&B run starts; Avalanche imports wandb but this project never
#     starts a run. They are removed from the wheel (GPU_ENV_KEEP_WANDB_BINARIES=1 keeps them).
#
# Every step can be run again: `fetch` reuses what DIR holds, `install` reuses the virtual
# environment and pip leaves satisfied requirements alone.
#
# Environment overrides:
#   PYTHON          fetch/list: the Python whose pip downloads (default: ./.venv/bin/python
#                   if present, else python3; any version with pip >= 22.2 will do).
#                   install: the image's Python the virtual environment is built on
#                   (default: python3).
#   VENV            install: the virtual environment (default: .venv-gpu).
#   GPU_ENV_SKIP    names of the packages the GPU image already has, separated by spaces or
#                   commas; replaces the built-in list below (GPU_ENV_SKIP="" skips none).
#   GPU_ENV_OMIT    names of the packages left out although a dependency declares them
#                   (replaces the built-in list below).
#   GPU_ENV_PINS    requirements the resolution must respect (replaces the built-in list).
#   GPU_ENV_PLATFORMS  the wheel platform tags accepted (default: manylinux up to glibc 2.28).
#   GPU_ENV_KEEP_WANDB_BINARIES=1  keep wandb's bundled programs (+19 MiB).
#   GPU_ENV_MAX_MIB the size the working tree that travels must stay under (default 64).
set -euo pipefail

# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------
TARGET_PYVER="3.12"          # the GPU image's Python (3.12.3 there)
TARGET_ABI="cp312"
MAX_MIB="${GPU_ENV_MAX_MIB:-64}"

# Every manylinux tag from glibc 2.28 down (pip does not add the older ones itself when
# --platform is given), with the legacy aliases of 2.17, 2.12 and 2.5.
if [ -n "${GPU_ENV_PLATFORMS:-}" ]; then
  read -r -a PLATFORMS <<< "$GPU_ENV_PLATFORMS"
else
  PLATFORMS=()
  for glibc in $(seq 28 -1 5); do PLATFORMS+=("manylinux_2_${glibc}_x86_64"); done
  PLATFORMS+=(manylinux2014_x86_64 manylinux2010_x86_64 manylinux1_x86_64)
fi

# The image's own torch, torchvision and numpy (its pip list, read on 2026-11-17): resolving against them keeps `fetch` from choosing a package
# that needs newer ones. POT and scs: see "Size" above.
PINS="${GPU_ENV_PINS-torch==2.11.0 torchvision==0.26.0 numpy==2.5.2 pot<0.9.7 scs<3.3}"

# Declared by a dependency, never imported by this project's code paths (see "Size" above):
# qpsolvers' optional solvers (qpsolvers[open_source_solvers], from avalanche-lib) and cvxpy's
# NLP engine.
# What only these need is left out too.
OMIT="${GPU_ENV_OMIT-cvxopt py-mkl-pardiso piqp proxsuite qpalm daqp jaxopt qpax qtqp sip-python
ecos sparsediffpy}"

# The torch family: never fetched, whatever the skip list says (the image's CUDA build is used).
# A name matching this extended regular expression (after PEP 503 normalisation) is dropped.
TORCH_FAMILY_RE='^(torch|torchvision|torchaudio|triton|nvidia-.*|cuda-.*)$'

# Packages the GPU image already has (its package list, read on a machine running the image on
# 2026-11-17).
# Override with GPU_ENV_SKIP.
DEFAULT_SKIP="absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio
attrs botorch build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy
coverage cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax
e3nn einops equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec
gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna imageio
iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib
kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown
markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict
multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro
nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13
nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13
nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir
onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker
prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing
pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout
pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers
setuptools shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch
torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope
triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt
xarray xxhash yarl zipp"
SKIP="${GPU_ENV_SKIP-$DEFAULT_SKIP}"
export GPU_ENV_SKIP_LIST="${SKIP//,/ }" GPU_ENV_OMIT_LIST="${OMIT//,/ }" \
  GPU_ENV_TORCH_FAMILY_RE="$TORCH_FAMILY_RE"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

usage() {
  cat >&2 <<EOF
usage: scripts/gpu_env.sh fetch [DIR]     download the wheels the GPU image lacks into DIR (default .whl)
       scripts/gpu_env.sh install [DIR]   on the GPU machine: .venv-gpu from DIR, offline
       scripts/gpu_env.sh list            the first-level requirements fetch resolves (offline;
                                          fetch adds their transitive dependencies)
Overrides: PYTHON, VENV, GPU_ENV_SKIP, GPU_ENV_OMIT, GPU_ENV_PINS, GPU_ENV_PLATFORMS,
GPU_ENV_KEEP_WANDB_BINARIES, GPU_ENV_MAX_MIB (see the comments at the top of this script).
EOF
}
say() { echo "[gpu_env] $*"; }
die() { echo "[gpu_env] ERROR: $*" >&2; exit 1; }
WORK=""                                         # the temporary folder of fetch or install
trap '[ -z "$WORK" ] || rm -rf "$WORK"' EXIT
quiet_log() { grep -v 'is ignored: it is neither a file nor a directory' "$1" >&2 || true; }

# The Python used by fetch and list.
fetch_python() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"
  elif [ -x .venv/bin/python ]; then echo "$here/.venv/bin/python"
  else echo python3
  fi
}

# A Python helper shared by list, fetch and install, so that all filter names the same way.
#   direct                    the first-level requirements (pyproject.toml's)
#   names NAME...             those of the names that fetch would carry
#   report FILE               name==version of what a pip --report's packages need, walking
#                             the requirements from the requested ones and stopping at the
#                             torch family, the skip list and the omit list
#   lacking DIR MANIFEST      the MANIFEST entries DIR has no wheel of
#   prune DIR MANIFEST        remove DIR's wheels/archives not in MANIFEST; fail naming the
#                             MANIFEST entries without a wheel
#   slim-wandb WHEEL          remove wandb's bundled programs (wandb/bin/) from its wheel
#   check-deps FILE OMIT... -- OURS...  read `pip check`'s output; fail on what OURS lack
helper() {
  local py="$1"; shift
  "$py" - "$@" <<'PY'
import json, os, re, sys

def canon(name):
    return re.sub(r"[-_.]+", "-", name).lower()

skip = {canon(n) for n in os.environ["GPU_ENV_SKIP_LIST"].split()}
omit = {canon(n) for n in os.environ["GPU_ENV_OMIT_LIST"].split()}
torch_family = re.compile(os.environ["GPU_ENV_TORCH_FAMILY_RE"])

def carried(name):
    n = canon(name)
    return not torch_family.match(n) and n not in skip

def req_name(req):
    return re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req).group(1)

mode, args = sys.argv[1], sys.argv[2:]
if mode == "direct":
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib
    with open("pyproject.toml", "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    for req in deps:
        if carried(req_name(req)):
            print(req.replace(" ", ""))

elif mode == "names":
    print("\n".join(n for n in args if carried(n) and canon(n) not in omit))

elif mode == "report":
    from pip._vendor.packaging.requirements import Requirement
    # the GPU image's interpreter, for the requirements' environment markers
    env = {"python_version": "3.12", "python_full_version": "3.12.3", "os_name": "posix",
           "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
           "platform_python_implementation": "CPython", "implementation_name": "cpython",
           "implementation_version": "3.12.3"}
    with open(args[0]) as f:
        items = {canon(i["metadata"]["name"]): i for i in json.load(f)["install"]}
    todo = [(n, tuple(i.get("requested_extras") or ())) for n, i in items.items() if i["requested"]]
    seen, keep, left_out = set(), set(), set()
    def applies(req, extra):
        return req.marker is None or req.marker.evaluate({**env, "extra": extra})
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen or name not in items:
            continue
        seen.add((name, extras))
        if name in omit:
            left_out.add(name)
            continue
        # A package of the image or the torch family: the image has what it needs, but not
        # necessarily what an extra of it asks for (requests[socks] from gdown: PySocks).
        only_extras = not carried(name)
        if not only_extras:
            keep.add(name)
        for spec in items[name]["metadata"].get("requires_dist") or ():
            req = Requirement(spec)
            always = applies(req, "")
            if (always and not only_extras) or any(applies(req, e) and not always for e in extras):
                todo.append((canon(req.name), tuple(sorted(req.extras))))
    for name in sorted(keep):
        print(f"{name}=={items[name]['metadata']['version']}")
    if left_out:
        print("[gpu_env] left out (GPU_ENV_OMIT): " + " ".join(sorted(left_out)), file=sys.stderr)

elif mode in ("prune", "lacking"):
    from pip._vendor.packaging.utils import canonicalize_name, parse_wheel_filename
    from pip._vendor.packaging.version import Version
    folder, manifest = args
    wanted = {}
    with open(manifest) as f:
        for line in f:
            name, version = line.strip().split("==")
            wanted[canonicalize_name(name), Version(version)] = line.strip()
    if mode == "lacking":
        have = {parse_wheel_filename(fn)[:2] for fn in os.listdir(folder) if fn.endswith(".whl")}
        for key, line in wanted.items():
            if key not in have:
                print(line)
        sys.exit()
    for fn in sorted(os.listdir(folder)):
        if fn.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(fn)
            if (name, version) in wanted:
                del wanted[name, version]  # a second wheel of it would be removed
                continue
        elif not fn.endswith((".tar.gz", ".zip")):
            continue
        print(f"[gpu_env] removing {fn} (not part of the set)")
        os.remove(os.path.join(folder, fn))
    for line in sorted(wanted.values()):
        print(f"[gpu_env] no wheel of {line} in {folder}", file=sys.stderr)
    sys.exit(1 if wanted else 0)

elif mode == "slim-wandb":
    import zipfile
    wheel = args[0]
    with zipfile.ZipFile(wheel) as z:
        members = z.infolist()
        drop = {m.filename for m in members if m.filename.startswith("wandb/bin/")}
        if drop:
            tmp = wheel + ".part"
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
                for m in members:
                    if m.filename in drop:
                        continue
                    data = z.read(m)
                    if m.filename.endswith(".dist-info/RECORD"):
                        data = b"".join(l for l in data.splitlines(keepends=True)
                                        if l.split(b",")[0].decode() not in drop)
                    out.writestr(m, data)
    if drop:
        os.replace(tmp, wheel)
        print(f"[gpu_env] removed from {os.path.basename(wheel)}: " + " ".join(sorted(drop)))

elif mode == "check-deps":
    cut = args.index("--")
    left_out, ours = {canon(n) for n in args[1:cut]}, {canon(n) for n in args[cut + 1:]}
    problems = []
    for line in open(args[0]):
        m = re.match(r"(\S+) \S+ (?:requires (\S+), which is not installed"
                     r"|has requirement (\S+?)[<>=!~; ].*, but you have .*)", line.strip())
        if not m or canon(m.group(1)) not in ours:
            continue  # the image's own packages: not this script's business
        needed = canon(m.group(2) or m.group(3))
        if needed in left_out:
            print(f"[gpu_env] as intended (GPU_ENV_OMIT): {line.strip()}")
        else:
            problems.append(line.strip())
    for p in problems:
        print(f"[gpu_env] unmet: {p}", file=sys.stderr)
    sys.exit(1 if problems else 0)
PY
}

cmd_list() {
  local py; py="$(fetch_python)"
  helper "$py" direct
}

# ---------------------------------------------------------------------------------------------
# fetch
# ---------------------------------------------------------------------------------------------
cmd_fetch() {
  local dir="${1:-.whl}" py work log name req tried="" n p whl
  py="$(fetch_python)"
  "$py" -m pip --version >/dev/null 2>&1 || die "$py has no pip (set PYTHON to a Python with pip)"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  WORK="$(mktemp -d)"; work="$WORK"
  log="$work/pip.log"

  # The first-level requirements.
  helper "$py" direct > "$work/requirements.in"
  tr ' ' '\n' <<< "$PINS" | sed '/^$/d' > "$work/constraints.txt"
  say "resolving for CPython $TARGET_PYVER ($TARGET_ABI, manylinux x86_64), with $(tr '\n' ' ' < "$work/constraints.txt"):"
  sed 's/^/    /' "$work/requirements.in"

  local target=(--only-binary=:all: --python-version "$TARGET_PYVER" --implementation cp
                --abi "$TARGET_ABI")
  for p in "${PLATFORMS[@]}"; do target+=(--platform "$p"); done

  # Resolve the whole set (the packages' metadata only: --dry-run --report). A requirement
  # published as an sdist only has no cp312 wheel: if it is pure Python, build its wheel here
  # (it works on any Python), put it in DIR, which the resolver also reads (--find-links), and
  # resolve again.
  for n in $(seq 1 10); do
    if "$py" -m pip install --dry-run --ignore-installed --quiet --report "$work/report.json" \
        --target "$work/target" "${target[@]}" --find-links "$dir" \
        -c "$work/constraints.txt" -r "$work/requirements.in" > "$log" 2>&1; then
      break
    fi
    req="$(sed -n 's/.*Could not find a version that satisfies the requirement \([^ ]*\).*/\1/p' "$log" | head -n 1)"
    name="$(sed 's/[^A-Za-z0-9._-].*//' <<< "$req")"
    if [ -z "$req" ] || [ "$n" = 10 ]; then
      quiet_log "$log"; die "the resolution failed (see pip's output above)"
    fi
    case " $tried " in
      *" $name "*) quiet_log "$log"; die "no usable wheel for $req even after building one" ;;
    esac
    tried="$tried $name"
    # Never build what is not carried anyway (the torch family, the image's packages): a
    # missing wheel of it means a platform tag is missing (GPU_ENV_PLATFORMS) or a pin is off.
    if [ -z "$(helper "$py" names "$name")" ]; then
      quiet_log "$log"
      die "no $TARGET_ABI wheel for $req (torch family, image or omitted): check GPU_ENV_PLATFORMS and GPU_ENV_PINS"
    fi
    say "$req has no $TARGET_ABI wheel: building a pure-Python wheel from its sdist"
    "$py" -m pip wheel --quiet --no-deps -c "$work/constraints.txt" -w "$work/built" "$req" \
      > "$log" 2>&1 || { quiet_log "$log"; die "could not build a wheel of $req"; }
    for whl in "$work"/built/*.whl; do
      case "$whl" in
        *-none-any.whl) mv "$whl" "$dir/" ;;
        *) die "$req is not pure Python ($(basename "$whl")) and has no $TARGET_ABI wheel" ;;
      esac
    done
  done

  helper "$py" report "$work/report.json" > "$work/requirements.txt"
  mv "$work/requirements.txt" "$dir/requirements.txt"
  say "$(wc -l < "$dir/requirements.txt") packages to carry (the image has the rest):"
  sed 's/^/    /' "$dir/requirements.txt"

  # Download exactly the resolved versions that DIR lacks (--no-deps: the set is already
  # complete). A wheel already there is kept as it is (wandb's, slimmed below, too).
  helper "$py" lacking "$dir" "$dir/requirements.txt" > "$work/lacking.txt"
  if [ -s "$work/lacking.txt" ]; then
    say "downloading $(wc -l < "$work/lacking.txt") wheels"
    "$py" -m pip download --quiet --no-deps "${target[@]}" --find-links "$dir" -d "$dir" \
      -r "$work/lacking.txt" > "$log" 2>&1 || { quiet_log "$log"; die "download failed"; }
  fi
  if [ "${GPU_ENV_KEEP_WANDB_BINARIES:-0}" != 1 ]; then
    for whl in "$dir"/wandb-*.whl; do
      if [ -e "$whl" ]; then helper "$py" slim-wandb "$whl"; fi
    done
  fi

  # Remove what an earlier run left and is no longer wanted; stop if a wheel is missing.
  helper "$py" prune "$dir" "$dir/requirements.txt" \
    || die "$dir lacks the wheels named above"

  # The size, against what the device tool carries (the tracked files travel too).
  local bytes tracked count
  bytes="$(du -sb "$dir" | cut -f1)"
  tracked="$(git ls-files -z 2>/dev/null | xargs -0 -r stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')"
  count="$(find "$dir" -maxdepth 1 \( -name '*.whl' -o -name '*.tar.gz' \) | wc -l)"
  mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
  say "$dir: $count files, $(mib "$bytes") (with the repository's tracked files: $(mib $((bytes + tracked))))"
  if [ $((bytes + tracked)) -gt $((MAX_MIB * 1048576)) ]; then
    echo "[gpu_env] !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
    echo "[gpu_env] WARNING: $(mib "$bytes") of wheels + $(mib "$tracked") of tracked files is over" >&2
    echo "[gpu_env] the $MAX_MIB MiB the device tool carries: the run would be refused."        >&2
    echo "[gpu_env] Leave more out (GPU_ENV_SKIP, GPU_ENV_OMIT, GPU_ENV_PINS)."                  >&2
    echo "[gpu_env] !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!" >&2
  fi
  say "next, on the GPU machine, from the repository root: scripts/gpu_env.sh install ${1:-.whl}"
}

# ---------------------------------------------------------------------------------------------
# install
# ---------------------------------------------------------------------------------------------
# Say which requirement pip could not find in DIR (pip's log in $1), then stop.
explain_missing() {
  local log="$1" dir="$2" reqs
  quiet_log "$log" 2>&1 | tail -n 15 >&2
  reqs="$(sed -n 's/.*No matching distribution found for \(.*\)/\1/p' "$log" | sort -u)"
  if [ -n "$reqs" ]; then
    echo "[gpu_env] ERROR: no wheel in $dir for:" >&2
    sed 's/^/[gpu_env]     /' <<< "$reqs" >&2
    die "run 'scripts/gpu_env.sh fetch' again where a registry can be reached and bring $dir here"
  fi
  die "pip failed (see its output above)"
}

cmd_install() {
  local dir="${1:-.whl}" base="${PYTHON:-python3}" venv="${VENV:-.venv-gpu}" vpy log work
  [ -d "$dir" ] || die "no folder $dir: run 'scripts/gpu_env.sh fetch $dir' on a machine with \
registry access and bring $dir here"
  dir="$(cd "$dir" && pwd)"
  [ -f "$dir/requirements.txt" ] || die "$dir/requirements.txt is missing: run fetch again"
  command -v "$base" >/dev/null 2>&1 || die "no Python '$base' (set PYTHON)"
  WORK="$(mktemp -d)"; work="$WORK"
  log="$work/pip.log"
  # Never the network: no index, only DIR (also for pip's own build steps).
  export PIP_NO_INDEX=1 PIP_FIND_LINKS="$dir" PIP_DISABLE_PIP_VERSION_CHECK=1

  # 1. The virtual environment, on top of the image's Python and its packages.
  #    --without-pip: ensurepip may be absent from a distribution's Python; the image's pip is
  #    used through its site packages instead.
  if [ ! -x "$venv/bin/python" ]; then
    say "creating $venv (--system-site-packages) with $base"
    "$base" -m venv --system-site-packages --without-pip "$venv" \
      || die "could not create $venv with '$base -m venv'"
  fi
  venv="$(cd "$venv" && pwd)"
  vpy="$venv/bin/python"

  # The image's python3 is itself a virtual environment (/opt/torch/.venv), and
  # --system-site-packages only reaches the BASE interpreter's site packages, not that
  # environment's, where torch is. So a .pth file adds the parent's site-packages folders
  # (after the new environment's own, so that what is installed here comes first).
  local parent_sites
  parent_sites="$("$base" -c 'import site, sys; print("\n".join(p for p in site.getsitepackages() if p.startswith(sys.prefix)))')"
  "$vpy" - "$parent_sites" <<'PY'
import os, site, sys
own = site.getsitepackages()[0]
missing = [p for p in sys.argv[1].splitlines() if p and os.path.isdir(p) and p not in sys.path]
if missing:
    pth = os.path.join(own, "_gpu_env_parent.pth")
    with open(pth, "w") as f:
        f.write("".join(f"import site; site.addsitedir({p!r})\n" for p in missing))
    print("[gpu_env] the image's packages are reached through", pth)
PY
  "$vpy" -m pip --version >/dev/null 2>&1 || "$vpy" -m ensurepip --default-pip >/dev/null \
    || die "no pip in $venv (nor in the image's site packages)"
  "$vpy" -c 'import torch' 2>/dev/null \
    || die "torch cannot be imported in $venv: is '$base' the image's Python (the one with torch)?"

  # 2. The wheels, offline. --no-deps: the set is complete but for what is left out on
  #    purpose (GPU_ENV_OMIT); `pip check` below names anything else that is missing.
  say "installing $(wc -l < "$dir/requirements.txt") packages from $dir (offline)"
  "$vpy" -m pip install --no-index --no-deps --find-links "$dir" -r "$dir/requirements.txt" \
    > "$log" 2>&1 || explain_missing "$log" "$dir"

  # 3. The project itself, from this checkout (editable; its dependencies are in place).
  say "installing avalanche-sets (editable) from $here"
  "$vpy" -m pip install --no-index --no-deps --no-build-isolation -e . > "$log" 2>&1 \
    || { tail -n 30 "$log" >&2; die "installing the project failed (see above)"; }

  # 4. Requirements: what the carried packages and the project declare must be
  #    there in a fitting version (the image's or a carried one), but for GPU_ENV_OMIT.
  local ours
  ours="$(sed 's/==.*//' "$dir/requirements.txt" | tr '\n' ' ') avalanche-sets"
  "$vpy" -m pip check > "$work/check.txt" 2>&1 || true
  # Reported, not fatal: the image's own packages may be other versions than a carried package
  # declares; the import check below is what must pass.
  # shellcheck disable=SC2086  # word splitting of the name lists is intended
  helper "$vpy" check-deps "$work/check.txt" $OMIT -- $ours \
    || say "WARNING: requirements not met (above): the image's versions are used; if an \
import below fails, run fetch again with a GPU_ENV_SKIP that does not name them"

  # 5. The check: everything imports, and torch is the image's CUDA build.
  say "checking the environment"
  "$vpy" - "$venv" <<'PY'
import sys
import torch, avalanche, ot, cvxpy, cvxpylayers.torch, quadprog, avalanche_sets
if torch.__file__.startswith(sys.argv[1]):
    sys.exit("[gpu_env] ERROR: torch was installed into the environment, not the image's")
cuda = torch.cuda.is_available()
print(f"[gpu_env] torch {torch.__version__} ({torch.__file__})")
print(f"[gpu_env] CUDA available: {cuda}" + (f", device: {torch.cuda.get_device_name(0)}" if cuda else ""))
print(f"[gpu_env] avalanche {avalanche.__version__}, POT {ot.__version__}, "
      f"cvxpy {cvxpy.__version__}")
print("[gpu_env] ok: run with", sys.executable)
PY
}

case "${1:-}" in
  fetch)   shift; cmd_fetch "$@" ;;
  install) shift; cmd_install "$@" ;;
  list)    shift; cmd_list "$@" ;;
  -h|--help|help) usage ;;
  *) usage; [ -n "${1:-}" ] && die "unknown sub-command '$1'"; exit 2 ;;
esac
