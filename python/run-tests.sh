#!/usr/bin/env bash
# The Python half of the test command: `pip install .` into fresh virtualenvs, then the README's
# Python quickstart and pytest in each (the first with the `ray` extra). Two environments: the
# default python3 with the newest
# numpy (2.x), and the oldest supported Python found (3.9 when installed, for the abi3 floor)
# with numpy 1.x. Run from anywhere; needs Rust (cargo) and Python >= 3.9 with venv.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/trawl-py-tests.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The quickstart is the README's own code block (between the python-quickstart markers).
awk '/<!-- python-quickstart:begin -->/{f=1;next} /<!-- python-quickstart:end -->/{f=0} f' README.md \
  | sed '/^```/d' > "$work/quickstart.py"
if [ ! -s "$work/quickstart.py" ]; then
  echo "README.md has no python-quickstart block" >&2
  exit 1
fi

# python/README.md (the wheel's description) carries the same quickstart.
awk '/^```python/{f=1;next} /^```/{f=0} f' python/README.md > "$work/quickstart-pkg.py"
if ! diff -u <(sed -n 'p' "$work/quickstart.py") "$work/quickstart-pkg.py" >&2; then
  echo "python/README.md's quickstart differs from README.md's" >&2
  exit 1
fi

# The CLI the results are compared with (built by `cargo test --all-targets`), where cargo builds
# it: `cargo metadata`'s target_directory honours CARGO_TARGET_DIR and a cargo config's
# build.target-dir.
target_dir=$(cargo metadata --format-version 1 --no-deps \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
export TRAWL_BIN="${TRAWL_BIN:-$target_dir/debug/trawl}"
[ -x "$TRAWL_BIN" ] || cargo build -q -p trawl-cli
if [ ! -x "$TRAWL_BIN" ]; then
  echo "TRAWL_BIN=$TRAWL_BIN does not exist (cargo builds into $target_dir)" >&2
  exit 1
fi

old_python=python3
for candidate in python3.9 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.9*/bin/python3 python3.10; do
  if "$candidate" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    old_python=$candidate
    break
  fi
done

run_env() { # name python numpy-spec package-spec require-ray
  local name=$1 python=$2 numpy=$3 package=$4 require_ray=$5 venv="$work/$1"
  echo "== python: $name ($("$python" --version 2>&1), $numpy)"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q "$numpy" pytest
  "$venv/bin/python" -m pip install -q "$package"
  "$venv/bin/python" -c 'import numpy, trawl; print("trawl", trawl.__version__, "numpy", numpy.__version__)'
  (cd "$work" && mkdir -p "qs-$name" && cd "qs-$name" && "$venv/bin/python" ../quickstart.py)
  (cd python/tests && TRAWL_REQUIRE_RAY=$require_ray "$venv/bin/python" -m pytest -q -p no:cacheprovider)
}

# Ray (trawl.ray's tests, a local 2-CPU cluster) in the first environment: there a missing Ray
# fails the run instead of skipping its tests.
run_env numpy2 python3 "numpy>=2" ".[ray]" 1
run_env numpy1 "$old_python" "numpy<2" . 0
